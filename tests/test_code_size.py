"""Small files and short functions (issue 24, item 2): no module of the package over
``FILE_LINES`` lines and no function or method (nested ones included) over ``FUNCTION_LINES``,
outside the allowlists below. Read with ``ast`` (nothing is imported); a function's length runs
from its ``def`` line to its last line, docstring included.

An entry in an allowlist says why; one that is no longer needed fails too, so the lists only
shrink."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "numptx"

FILE_LINES = 700
FUNCTION_LINES = 80

#: files allowed past FILE_LINES, path -> why: data tables only (rows, not logic). None
#: today: the instruction rows (numptx/instructions.py, instructions_mmptx.py) and the value
#: types (numptx/valuetypes.py) fit.
DATA_TABLES: dict[str, str] = {}

#: functions allowed past FUNCTION_LINES, (path, qualified name) -> why: none.
LONG_FUNCTIONS: dict[tuple[str, str], str] = {}


def file_lines(source: str) -> int:
    """The lines of a module's source."""
    return len(source.splitlines())


def long_functions(source: str, limit: int = FUNCTION_LINES) -> dict[str, int]:
    """Qualified name (``Class.method``, ``outer.inner``) -> lines, of each function or method
    of ``source`` longer than ``limit`` lines."""
    out: dict[str, int] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    n = (child.end_lineno or child.lineno) - child.lineno + 1
                    if n > limit:
                        out[name] = n
                walk(child, name + ".")
            else:
                walk(child, prefix)
    walk(ast.parse(source), "")
    return out


def _modules() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(PACKAGE.rglob("*.py"))}


MODULES = _modules()


def test_the_walk_sees_the_package():
    assert len(MODULES) > 100 and "numptx/search/loop.py" in MODULES
    assert "numptx/jit/populations/fitness_checks.py" in MODULES


def test_the_measures_count_what_they_say():
    """A function of 81 lines is long, one of 80 is not; methods and nested functions count
    under their qualified names; a class is no function."""
    body = "\n".join(f"    x{i} = {i}" for i in range(79))
    src = (f"def short():\n{body}\n\n"                       # 80 lines
           f"def long():\n{body}\n    return 0\n\n"          # 81 lines
           f"class K:\n    def m(self):\n{body.replace('    ', '        ')}\n"
           f"        y = 1\n        return y\n\n"            # K.m: 82 lines
           f"def outer():\n    def inner():\n{body.replace('    ', '        ')}\n"
           f"        return 1\n    return inner\n")
    assert long_functions(src) == {"long": 81, "K.m": 82, "outer.inner": 81, "outer": 83}
    assert file_lines(src) == src.count("\n") == 80 + 1 + 81 + 1 + (1 + 82) + 1 + 83


def test_no_file_is_too_long():
    long = {path: file_lines(src) for path, src in MODULES.items()
            if file_lines(src) > FILE_LINES and path not in DATA_TABLES}
    assert not long, (f"modules over {FILE_LINES} lines: "
                      + ", ".join(f"{p} ({n})" for p, n in sorted(long.items()))
                      + "; split each along what it does (a data table of rows only may go in "
                        "DATA_TABLES, with its reason)")


def test_no_function_is_too_long():
    long = [f"{path}: {name} ({n} lines)" for path, src in MODULES.items()
            for name, n in long_functions(src).items() if (path, name) not in LONG_FUNCTIONS]
    assert not long, (f"functions over {FUNCTION_LINES} lines: " + "; ".join(sorted(long))
                      + "; split each into steps (see tests/test_code_size.py)")


def test_every_allowance_is_still_needed():
    """An allowlisted file that shrank, or a function that shrank or went, fails: remove it."""
    stale = [f"DATA_TABLES: {path}" for path in DATA_TABLES
             if path not in MODULES or file_lines(MODULES[path]) <= FILE_LINES]
    stale += [f"LONG_FUNCTIONS: {path}: {name}" for path, name in LONG_FUNCTIONS
              if name not in long_functions(MODULES.get(path, ""))]
    assert not stale, "allowlist entries no longer needed (remove them): " + "; ".join(stale)
