"""``getattr(x, "_name")`` (and ``hasattr``/``setattr``/``delattr``) reaches into another
module's private names as surely as ``x._name`` does, but hides from an attribute walk
(issue 24, item 1): tests/test_jit_layout.py refuses the attribute form; this test refuses the
string form. A private name the module (or its private package) defines itself is its own."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "numptx"
PROBES = {"getattr", "hasattr", "setattr", "delattr"}

#: private names that outside libraries spell with an underscore as their public API, and why
EXTERNAL = {
    "_fields", "_asdict", "_replace", "_make",       # NamedTuple's documented API
}
#: (module, name) pairs allowed, each with its reason; add one only with a reason
KNOWN: set[tuple[str, str]] = set()
#: the one module that may name numba-cuda's private attributes (each checked against the
#: installed numba-cuda by tests/test_numba_compat.py)
COMPAT = "numptx.jit.numba.numba_compat"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module(p: Path) -> str:
    rel = p.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _unit(mod: str) -> str:
    parts = mod.split(".")
    for i, p in enumerate(parts[1:], 1):
        if _private(p):
            return ".".join(parts[:i + 1])
    return mod


def _defined(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
            names.add(n.attr)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif (isinstance(n, ast.Call) and len(n.args) >= 2
              and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str)
              and ast.unparse(n.func) in ("setattr", "object.__setattr__")):
            names.add(n.args[1].value)          # set here by name: the module's own
    return names


def _trees() -> dict[str, ast.AST]:
    return {_module(p): ast.parse(p.read_text(encoding="utf-8"), str(p))
            for p in sorted(ROOT.rglob("*.py"))}


def _string_reads(tree: ast.AST):
    for n in ast.walk(tree):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in PROBES
                and len(n.args) >= 2 and isinstance(n.args[1], ast.Constant)
                and isinstance(n.args[1].value, str)):
            yield n.lineno, n.func.id, n.args[1].value


def test_the_walk_finds_string_reads():
    tree = ast.parse("getattr(obj, '_hidden', None)\nhasattr(m, '_x')\ngetattr(o, 'public')\n")
    assert [(f, s) for _, f, s in _string_reads(tree)] == [
        ("getattr", "_hidden"), ("hasattr", "_x"), ("getattr", "public")]


def test_no_module_reads_private_names_through_strings():
    trees = _trees()
    assert "numptx.search.loop" in trees and "numptx.jit.tune.autotune" in trees
    defined: dict[str, set[str]] = {}
    for mod, tree in trees.items():
        defined.setdefault(_unit(mod), set()).update(_defined(tree))
    bad = []
    for mod, tree in trees.items():
        own = defined[_unit(mod)]
        if mod == COMPAT:
            continue
        for line, fn, name in _string_reads(tree):
            if (_private(name) and name not in own and name not in EXTERNAL
                    and (mod, name) not in KNOWN):
                bad.append(f"{mod}:{line}: {fn}(..., {name!r})")
    assert not bad, ("private names read through strings across modules (give the name a "
                     "public spelling, or declare it in numptx/jit/numba/numba_compat.py for "
                     "numba's):\n  " + "\n  ".join(bad))
