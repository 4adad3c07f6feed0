"""The layout of the package: numptx's modules import each other without a cycle, and no module
reaches into another module's private names.

Both are read from the source with ``ast`` (nothing is imported): every ``import`` statement of
every module under ``numptx/``, function-level and ``if TYPE_CHECKING:`` ones included, relative
ones resolved. Stages import downwards only (native -> core -> dsl -> jit -> cli); a lazy import
is for an optional heavy dependency (numba, the CUDA bindings) or a later stage, never a way
round a cycle. No GPU, no toolchain."""
from __future__ import annotations

import ast
import doctest
import os
import sys

import pytest

from numptx.jit.numba import numba_compat

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "numptx")

#: import edges allowed to close a cycle: none; add one only with a reason
KNOWN_EDGES: set[tuple[str, str]] = set()

#: private attribute names that may be read across modules, and why
EXTERNAL_PRIVATES = {
    "_replace", "_asdict", "_fields", "_make",      # NamedTuple's public API (underscored)
    "_getframe",                                    # sys._getframe: the tracer's source positions
    "_SimpleCData",                                 # ctypes: the type of a marshalled scalar
    "_codelibrary",                                 # numba's _Kernel: where a loaded cubin goes
    "_definitions",                                 # numba's FunctionIR: kept in step by rewrites
}
#: numba-cuda's, read in numptx.jit.numba.numba_compat alone (tests/test_numba_compat.py checks)
EXTERNAL_PRIVATES |= set(numba_compat.ATTRIBUTES) | set(numba_compat.SIMULATOR_ATTRIBUTES)
#: cffi handles: their attributes are the C core's symbols
EXTERNAL_BASES = {"ffi", "lib", "_native"}
#: (module, private name) read across modules: none; add one only with a reason
KNOWN_PRIVATES: set[tuple[str, str]] = set()


def _modules() -> dict[str, tuple[str | None, bool]]:
    """Module name -> (source path or None for an extension module, is a package)."""
    mods: dict[str, tuple[str | None, bool]] = {}
    base = os.path.dirname(ROOT)
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = os.path.relpath(folder, base).split(os.sep)
        for f in files:
            if f.endswith(".py"):
                stem = f[:-3]
                if stem == "__init__":
                    mods[".".join(rel)] = (os.path.join(folder, f), True)
                else:
                    mods[".".join(rel + [stem])] = (os.path.join(folder, f), False)
            elif f.endswith((".so", ".pyd")):
                mods.setdefault(".".join(rel + [f.split(".")[0]]), (None, False))
    return mods


MODULES = _modules()
TREES = {m: ast.parse(open(p, encoding="utf-8").read(), p) for m, (p, _) in MODULES.items() if p}


def _owner(name: str) -> str | None:
    """The numptx module a dotted name lives in (the longest module prefix)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(mod: str) -> list[tuple[str, int, str, str | None]]:
    """(imported module, line, what, name imported from it or None) of each import of ``mod``
    that reaches a numptx module."""
    is_pkg = MODULES[mod][1]
    out = []
    for node in ast.walk(TREES[mod]):
        if isinstance(node, ast.Import):
            for a in node.names:
                target = _owner(a.name)
                if target:
                    out.append((target, node.lineno, f"import {a.name}", None))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = mod.split(".") if is_pkg else mod.split(".")[:-1]
                parts = parts[:len(parts) - (node.level - 1)]
                source = ".".join(parts + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if not source.split(".")[0] == "numptx":
                continue
            for a in node.names:
                what = f"from {'.' * node.level}{node.module or ''} import {a.name}"
                if f"{source}.{a.name}" in MODULES:            # a submodule
                    out.append((f"{source}.{a.name}", node.lineno, what, None))
                elif _owner(source):
                    out.append((_owner(source), node.lineno, what, a.name))
    return out


def _graph() -> dict[str, dict[str, str]]:
    """module -> {imported module: where (line and statement)}, itself and KNOWN_EDGES left out."""
    graph: dict[str, dict[str, str]] = {m: {} for m in MODULES}
    for mod in TREES:
        for target, line, what, _ in _imports(mod):
            if target != mod and (mod, target) not in KNOWN_EDGES:
                graph[mod].setdefault(target, f"{mod}:{line} {what}")
    return graph


def _cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_the_walk_sees_the_package():
    """A sanity check of the walk itself: it finds the modules and their imports, lazy ones
    included, and resolves relative imports."""
    assert {"numptx", "numptx.jit.templates.template", "numptx.dsl.expr", "numptx._native"} <= set(MODULES)
    graph = _graph()
    assert "numptx.jit.compile.nvjitlink" in graph["numptx.jit.templates.template"]
    assert "numptx.site_layout" in graph["numptx.jit.numba.sim_checks"]
    assert "numptx.jit.numba.launch" in graph["numptx.jit.numba.kernel"]
    assert _cycles({"a": {"b": ""}, "b": {"c": ""}, "c": {"a": ""}, "d": {"a": ""}}) == [
        ["a", "b", "c"]]


def test_no_import_cycle_among_numptx_modules():
    graph = _graph()
    found = []
    for comp in _cycles(graph):
        edges = [graph[a][b] for a in comp for b in comp if b in graph[a]]
        found.append(" -> ".join(comp) + "\n      " + "\n      ".join(edges))
    assert not found, "import cycles:\n  " + "\n  ".join(found)


def test_jit_imports_no_later_stage():
    """numptx/jit builds on the core and the DSL; the package facade and the CLI come after."""
    late = {"numptx", "numptx.cli", "numptx.demo"}
    bad = [f"{m}:{line} {what}" for m in TREES if m.startswith("numptx.jit")
           for target, line, what, _ in _imports(m) if target in late]
    assert not bad, "\n".join(bad)


def _defined_names(tree: ast.AST) -> set[str]:
    """Attribute names a module defines: its functions, classes and methods, names it assigns
    (module and class attributes), attributes it sets on self/cls, ``__slots__`` entries."""
    names: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif (isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
              and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")):
            names.add(n.attr)
        elif isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                               for t in n.targets):
            names.update(c.value for c in ast.walk(n.value)
                         if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return names


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _unit(mod: str) -> str:
    """What may share private names: a module, or a whole private package (``numptx._program``,
    one implementation split into files by size)."""
    parts = mod.split(".")
    for i, p in enumerate(parts[1:], 1):
        if _private(p):
            return ".".join(parts[:i + 1])
    return mod


def test_no_module_reads_another_modules_private_names():
    """``x._name`` (read or written) where ``x`` is not ``self``/``cls`` and this module does
    not define ``_name``, and ``from m import _name`` of a name (not a module) of another numptx
    module. Private *modules* (``numptx._text``) are the package's own and may be imported."""
    bad = []
    defined: dict[str, set[str]] = {}
    for mod, tree in TREES.items():
        defined.setdefault(_unit(mod), set()).update(_defined_names(tree))
    for mod, tree in TREES.items():
        own = defined[_unit(mod)]
        for n in ast.walk(tree):
            if (isinstance(n, ast.Attribute) and _private(n.attr) and n.attr not in own
                    and n.attr not in EXTERNAL_PRIVATES
                    and not (isinstance(n.value, ast.Name)
                             and n.value.id in {"self", "cls"} | EXTERNAL_BASES)
                    and (mod, n.attr) not in KNOWN_PRIVATES):
                bad.append(f"{mod}:{n.lineno}: {ast.unparse(n)}")
        for target, line, what, name in _imports(mod):
            if (name and _private(name) and _unit(target) != _unit(mod)
                    and (mod, name) not in KNOWN_PRIVATES):
                bad.append(f"{mod}:{line}: {what}")
    assert not bad, "private names read across modules:\n  " + "\n  ".join(sorted(bad))


def test_names_stay_importable_where_they_were():
    """Helpers moved to modules of their own are re-exported where users import them."""
    from numptx.jit.compile import build
    from numptx.jit.templates import cuda_launch, residency, stubs, template
    from numptx.jit import errors
    from numptx.jit.numba import launch
    assert template.BuildError is build.BuildError is errors.BuildError
    assert launch.LaunchError is cuda_launch.LaunchError is errors.LaunchError
    assert template.resolve_stub is stubs.resolve_stub
    assert launch.keep_loaded is residency.keep_loaded
    import numptx as nx
    assert nx.BuildError is errors.BuildError and nx.LaunchError is errors.LaunchError


@pytest.mark.parametrize("name", ["numptx.jit.errors", "numptx.jit.templates.stubs", "numptx.dsl.expr"])
def test_module_docstrings_run(name):
    __import__(name)
    result = doctest.testmod(sys.modules[name])
    assert result.failed == 0 and result.attempted > 0, name
