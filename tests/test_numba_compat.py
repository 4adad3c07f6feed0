"""numptx's use of numba-cuda internals goes through one module, :mod:`numptx.jit.numba.numba_compat`,
and every entry of it resolves on the installed numba-cuda.

The walk reads numptx's source with ``ast`` (as ``tests/test_jit_layout.py`` does). numba-cuda's
own source is read by path, not imported, to find the private attributes its objects carry."""
from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import warnings

import pytest

from numptx.jit.numba import numba_compat

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "numptx")
COMPAT = os.path.join(ROOT, "jit", "numba", "numba_compat.py")

#: numba modules anyone may import: numba-cuda's documented API
PUBLIC_MODULES = {"numba", "numba.cuda", "numba.cuda.types", "numba.cuda.extending"}
#: attributes of ``numba.cuda`` (or ``numba``) that lead into its internals
INTERNAL_ATTRIBUTES = {"cudadrv", "simulator", "dispatcher", "args", "typing", "codegen",
                       "sigutils", "rewrites"}


def _numba_cuda_dir() -> str:
    """numba-cuda's package folder (``numba.cuda`` found, not imported)."""
    spec = importlib.util.find_spec("numba.cuda")
    assert spec is not None and spec.origin, "numba-cuda is not installed"
    return os.path.dirname(spec.origin)


def _numba_file(module: str) -> str:
    rel = module.split(".")[2:]                 # below numba.cuda
    base = os.path.join(_numba_cuda_dir(), *rel)
    return base + ".py" if os.path.exists(base + ".py") else os.path.join(base, "__init__.py")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def numba_private_names() -> set[str]:
    """The private attributes numba-cuda's objects carry that numptx handles: those the compat
    module lists, and every ``obj._name = ...`` / ``def _name`` in the modules it reaches
    (numptx touches objects of these modules: kernels, code libraries, IR, the simulator)."""
    modules = {m for m, _ in numba_compat.ATTRIBUTES.values()}
    modules |= {m for m, _ in numba_compat.SIMULATOR_ATTRIBUTES.values()}
    modules |= {"numba.cuda.cudadrv.driver", "numba.cuda.cudadrv.devicearray",
                "numba.cuda.simulator.kernelapi", "numba.cuda.simulator.cudadrv.devicearray"}
    names = set(numba_compat.ATTRIBUTES) | set(numba_compat.SIMULATOR_ATTRIBUTES)
    for m in modules:
        tree = ast.parse(open(_numba_file(m), encoding="utf-8").read())
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and _private(n.attr):
                names.add(n.attr)
            elif isinstance(n, (ast.FunctionDef, ast.ClassDef)) and _private(n.name):
                names.add(n.name)
    return names


def _own_names(tree: ast.AST) -> set[str]:
    """Private names a numptx module defines itself (functions, classes, assigned names,
    attributes of self/cls): those it may use as it likes."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif (isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
              and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")):
            out.add(n.attr)
    return out


def _root(node: ast.AST) -> str | None:
    """The name a chain of attributes starts from (``numba`` of ``numba.cuda.x``)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def numba_internals(source: str, where: str, privates: set[str]) -> list[str]:
    """Where ``source`` touches numba internals: an import of a numba module outside
    :data:`PUBLIC_MODULES` or of a private name, ``numba.x``/``cuda.x`` of an internal
    subpackage, and ``obj._name`` or ``getattr(obj, "_name")`` of a numba private attribute the
    module does not define itself."""
    tree = ast.parse(source)
    own = _own_names(tree)
    bad = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            bad += [f"{where}:{n.lineno}: import {a.name}" for a in n.names
                    if a.name.split(".")[0] == "numba" and a.name not in PUBLIC_MODULES]
        elif isinstance(n, ast.ImportFrom) and not n.level and n.module \
                and n.module.split(".")[0] == "numba":
            names = [a.name for a in n.names]
            if n.module not in PUBLIC_MODULES or any(_private(a) for a in names):
                bad.append(f"{where}:{n.lineno}: from {n.module} import {', '.join(names)}")
        elif isinstance(n, ast.Attribute):
            if n.attr in INTERNAL_ATTRIBUTES and _root(n.value) in ("numba", "cuda"):
                bad.append(f"{where}:{n.lineno}: {ast.unparse(n)}")
            elif n.attr in privates and n.attr not in own:
                bad.append(f"{where}:{n.lineno}: {ast.unparse(n)}")
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
              and n.func.id in ("getattr", "hasattr", "setattr", "delattr") and len(n.args) > 1
              and isinstance(n.args[1], ast.Constant) and n.args[1].value in privates
              and n.args[1].value not in own):
            bad.append(f"{where}:{n.lineno}: {ast.unparse(n)}")
    return bad


def _sources():
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            path = os.path.join(folder, f)
            if f.endswith(".py") and path != COMPAT:
                yield os.path.relpath(path, os.path.dirname(ROOT)), path


def test_the_check_finds_numba_internals():
    """The walk below can fail: each kind of access is found, public API is not."""
    src = '''
from numba import cuda
from numba.cuda import types
import numba.cuda
from numba.cuda.cudadrv import driver
from numba.cuda.core import ir
import numba.cuda.simulator.kernel
lib = kernel._codelibrary
dims = getattr(manager, "_grid_dim", ())
x = numba.cuda.cudadrv.devices
def _local(): pass
_local()
self_ok = obj.to_device
'''
    found = numba_internals(src, "m", {"_codelibrary", "_grid_dim", "_local"})
    assert [f.split(":")[1] for f in found] == ["5", "6", "7", "8", "9", "10"], found


def test_no_module_outside_the_compat_module_touches_numba_internals():
    privates = numba_private_names()
    assert {"_codelibrary", "_definitions", "_grid_dim", "_to_core_stream"} <= privates
    bad = []
    for rel, path in _sources():
        bad += numba_internals(open(path, encoding="utf-8").read(), rel, privates)
    assert not bad, ("numba-cuda internals used outside numptx/jit/numba/numba_compat.py (add an "
                     "entry there and import it):\n  " + "\n  ".join(sorted(bad)))


def test_every_entry_resolves_on_the_installed_numba_cuda():
    assert numba_compat.missing() == []
    for name in numba_compat.ENTRIES:
        assert numba_compat.resolve(name) is not None, name
    api = numba_compat.rewrite_api()
    assert issubclass(api.UnsupportedError, Exception) and callable(api.register_rewrite)
    assert hasattr(api.ir, "FunctionIR") and hasattr(api.ir, "Expr")
    args, ret = numba_compat.normalize_signature("void(float32[:], int32)")
    assert [str(a) for a in args] == ["array(float32, 1d, A)", "int32"] and str(ret) == "none"


def test_every_simulator_entry_resolves():
    """In a process that runs numba-cuda as its simulator (as numptx then uses them)."""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    code = ("import numba.cuda; from numptx.jit import numba_compat as c; "
            "print(c.missing(simulator=True)); "
            "print(c.simulator_kernel_module().BlockManager.__name__)")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["[]", "BlockManager"], r.stdout + r.stderr


@pytest.mark.parametrize("table", ["ATTRIBUTES", "SIMULATOR_ATTRIBUTES"])
def test_each_private_attribute_is_still_numbas(table):
    """numba-cuda's code still names each private attribute numptx relies on, in the class or
    function the compat module says (read from its source)."""
    missing = []
    for attr, (module, owner) in getattr(numba_compat, table).items():
        tree = ast.parse(open(_numba_file(module), encoding="utf-8").read())
        defs = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))
                and n.name == owner]
        named = {getattr(n, "attr", None) for d in defs for n in ast.walk(d)}
        named |= {n.value for d in defs for n in ast.walk(d) if isinstance(n, ast.Constant)}
        if attr not in named:
            missing.append(f"{module}.{owner} no longer names {attr}")
    assert not missing, "\n".join(missing)


def test_the_demo_silences_the_warning_numba_cuda_raises():
    """numba-cuda 0.30 raises its own NumbaPerformanceWarning (numba.cuda.core.errors), not
    numba's: the demo's filter took numba's class and let numba-cuda's through."""
    from numba.cuda.core.errors import NumbaPerformanceWarning

    from numptx.demo import _quiet_small_grids
    assert NumbaPerformanceWarning in numba_compat.performance_warnings()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with _quiet_small_grids():
            warnings.warn(NumbaPerformanceWarning("grid size 1 will likely result in GPU "
                                                  "under-utilization"), stacklevel=1)
    assert not seen, [str(w.message) for w in seen]


def test_launch_helpers_read_what_numba_reads():
    """``declared_numba_type`` and ``has_numba_type_property`` agree with numba's typeof on a
    class with a ``_numba_type_`` property; ``needs_more_linking`` reads a code library's
    link files (real numba-cuda objects, no GPU)."""
    from numba.cuda import types
    from numba.cuda.codegen import CUDACodeLibrary

    class Carries:
        @property
        def _numba_type_(self):
            return types.float32[:]
    assert numba_compat.has_numba_type_property(Carries)
    assert not numba_compat.has_numba_type_property(list)
    assert numba_compat.declared_numba_type(Carries()) == types.float32[:]
    assert numba_compat.typeof_impl()(Carries(), None) == types.float32[:]
    assert numba_compat.declared_numba_type(3) is None
    lib = CUDACodeLibrary.__new__(CUDACodeLibrary)
    lib._linking_files, lib.needs_cudadevrt = set(), False
    assert not numba_compat.needs_more_linking(lib)
    lib._linking_files = {"extra.cu"}
    assert numba_compat.needs_more_linking(lib)
