"""``import numptx`` imports names at their first use (PEP 562): the facade and ``numptx.jit``
resolve every public name to its defining module's object, ``from numptx import *`` and
``dir(numptx)`` still see them all, a fresh ``import numptx`` loads no numpy, numba or CUDA
bindings, and ``from numptx import stack_ptx`` none of the compile side. The registrations that
the eager facade made at import (the GPU interpreter, the GPU fitness scorer, ``nx.site``'s numba
rewrite) still happen, when the module they register with is imported. Timing lives in
benchmarks/bench_import.py, not here. Fresh interpreters in subprocesses; no GPU."""
from __future__ import annotations

import ast
import builtins
import importlib
import os
import subprocess
import sys
import textwrap

import pytest

import numptx as nx
import numptx.dsl as dsl
import numptx.jit as jit
import numptx.search as search
from numptx import errors
from numptx.dsl import functions

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "numptx")
#: what a fresh ``import numptx`` may load of numptx: the facade, its errors, and the
#: post-import hooks (numptx.jit.numba.after_import) that run the registrations later, and the
#: old flat paths of jit's modules (numptx.jit.moved, no import of its own)
LIGHT = {"numptx", "numptx._version", "numptx.errors", "numptx.jit", "numptx.jit.moved",
         "numptx.jit.numba", "numptx.jit.numba.after_import"}


def _run(code: str, **env: str) -> str:
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=300, env={**os.environ, **env})
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _loaded(code: str) -> set[str]:
    """The modules in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    out = _run(code + "\nimport sys\nprint('\\n'.join(sorted(sys.modules)))\n")
    return set(out.split())


# ---- the same objects, under every name --------------------------------------------------------
@pytest.mark.parametrize("name", sorted(nx._LAZY))
def test_each_lazy_name_is_its_defining_modules_object(name):
    module = importlib.import_module(nx._LAZY[name])
    assert getattr(nx, name) is getattr(module, name)


def test_every_public_name_resolves_to_its_home():
    homes = {**{n: errors for n in nx._ERRORS}, **{n: functions for n in functions.__all__},
             **{n: importlib.import_module(m) for n, m in nx._LAZY.items()}}
    for name in nx.__all__:
        if name == "__version__":
            assert nx.__version__ == importlib.import_module("numptx._version").__version__
        elif name == "search":
            assert nx.search is search is sys.modules["numptx.search"]
        else:
            assert getattr(nx, name) is getattr(homes[name], name), name


def test_all_is_the_eager_facades_list():
    """The names ``from numptx import *`` gave before the facade went lazy: the table, the
    errors, ``search`` and the DSL functions but abs, pow and round."""
    shadows = {n for n in functions.__all__ if hasattr(builtins, n)}
    assert shadows == {"abs", "pow", "round"}
    assert set(nx.__all__) == ({*nx._LAZY, *nx._ERRORS, "__version__", "search"}
                               | set(functions.__all__) - shadows)
    assert len(nx.__all__) == len(set(nx.__all__))
    ns: dict = {}
    exec("from numptx import *", ns)
    assert {n for n in ns if n != "__builtins__"} == set(nx.__all__)
    assert all(ns[n] is getattr(nx, n) for n in nx.__all__)
    assert "abs" not in ns and nx.abs is functions.abs


@pytest.mark.parametrize("pkg", [jit, dsl, search], ids=lambda p: p.__name__)
def test_subpackage_names_resolve(pkg):
    lazy = getattr(pkg, "_LAZY", {})
    for name in pkg.__all__:
        value = getattr(pkg, name)
        if name in lazy:
            assert value is getattr(importlib.import_module(lazy[name]), name), name
        assert name in dir(pkg), name


def test_dir_lists_names_and_submodules():
    listed = set(dir(nx))
    assert set(nx.__all__) <= listed
    assert {"jit", "dsl", "search", "stack_ptx", "inject", "annotate", "abs", "pow"} <= listed
    # an optional extra, imported on request only: once another test has imported numptx.torch it
    # is an attribute like any submodule, so ask a fresh process
    assert _run("import numptx\nprint('torch' in dir(numptx))").split() == ["False"]
    assert set(jit.__all__) <= set(dir(jit))


def test_submodules_are_attributes_at_first_use():
    assert nx.stack_ptx is importlib.import_module("numptx.stack_ptx")
    assert nx.jit.sass is importlib.import_module("numptx.jit.compile.sass")
    assert nx.jit.numba_site.site is nx.site
    for bad in ("no_such_name", "__no_such_dunder__", "_private_nothing"):
        assert not hasattr(nx, bad)
        with pytest.raises(AttributeError, match=bad):
            getattr(nx, bad)
    assert not hasattr(jit, "no_such_module")


# ---- what a fresh import loads -----------------------------------------------------------------
def test_import_numptx_loads_only_the_facade():
    """Probing a private name (as IPython and pickle do) loads nothing either."""
    loaded = _loaded("import numptx\nassert not hasattr(numptx, '_ipython_canary_method')")
    heavy = sorted(m for m in loaded if m.split(".")[0] in
                   ("numpy", "numba", "numba_cuda", "llvmlite", "cuda", "cffi"))
    assert not heavy, heavy
    assert {m for m in loaded if m.split(".")[0] == "numptx"} == LIGHT


def test_stack_ptx_loads_no_compile_side():
    loaded = _loaded("from numptx import stack_ptx")
    assert "numptx.stack_ptx" in loaded
    ours = {m for m in loaded if m.startswith(("numptx.jit", "numptx.dsl", "numptx.search"))}
    assert ours <= LIGHT, sorted(ours - LIGHT)
    assert not [m for m in loaded if m.split(".")[0] in ("numba", "numba_cuda", "cuda")]


def test_a_name_loads_its_module_not_everything():
    loaded = _loaded("import numptx as nx\nnx.NumptxError, nx.LaunchError, nx.BuildError")
    assert "numptx.jit.errors" in loaded
    assert not {"numptx.jit.templates.template", "numptx.dsl", "numptx.search"} & loaded


# ---- registrations that ran at import before ---------------------------------------------------
def test_gpu_interpreter_registers_when_the_interpreter_is_imported():
    """``sp.interpret(device="gpu"/"auto")`` finds the GPU backend without numptx.jit imported
    first (its answer here: whether a GPU runs the generated kernel)."""
    out = _run("""
        from numptx import stack_ptx as sp
        import sys
        I = sys.modules["numptx._program.interpret"]
        backend = I._devices["gpu"]
        assert "numptx.jit.populations.interpret_gpu" not in sys.modules
        from numptx.jit.populations.fitness import gpu_available
        assert backend.available() == gpu_available()
        assert type(backend._backend()).__name__ == "GpuInterpreter"
        print("OK")
    """)
    assert "OK" in out


def test_gpu_scorer_registers_when_fitness_interpret_is_imported():
    out = _run("""
        import numptx.search                           # imports fitness_interpret, not the GPU side
        from numptx.jit import fitness_interpret as F
        assert len(F._gpu) == 1
        from numptx.jit.populations.interpret_gpu import fitness_losses
        assert F._gpu == [fitness_losses]              # interpret_gpu's own, once imported
        print("OK")
    """)
    assert "OK" in out


def test_site_compiles_in_a_plain_numba_kernel_without_touching_nx_site_first():
    """``import numptx`` alone, then numba.cuda: the rewrite is registered by numba.cuda's
    import, so ``nx.site`` inside a ``cuda.compile_ptx``'d function becomes a site."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        pytest.skip("needs the real numba-cuda")
    pytest.importorskip("numba.cuda")
    out = _run("""
        import sys
        import numptx as nx
        assert "numptx.jit.numba.numba_site" not in sys.modules
        from numba import cuda
        from numba.cuda import types as nbt
        assert sys.modules["numptx.jit.numba.numba_site"]._registered

        def apply(out, a, b):
            i = cuda.grid(1)
            out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})

        ptx, _ = cuda.compile_ptx(apply, (nbt.float32[:],) * 3, cc=(9, 0))
        assert nx.PtxInject(ptx).sites["combine"].signature == "combine(in f32 x, in f32 y, out f32 z)"
        print("OK")
    """)
    assert "OK" in out


# ---- the table is declarative ------------------------------------------------------------------
def _type_checking_imports(path: str, package: str) -> dict[str, str]:
    """name -> absolute module of each ``from X import name`` under ``if TYPE_CHECKING:``."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom):
                    base = package if imp.level else ""
                    module = ".".join(p for p in (base, imp.module) if p)
                    out.update({a.name: module for a in imp.names})
    return out


@pytest.mark.parametrize("pkg", [nx, jit], ids=lambda p: p.__name__)
def test_lazy_table_is_what_type_checkers_see(pkg):
    """The ``TYPE_CHECKING`` imports (what type checkers and tests/test_jit_layout.py read) are
    the lazy table, name for name and module for module."""
    seen = _type_checking_imports(pkg.__file__, pkg.__name__)
    seen.pop("*", None)                      # the DSL functions: numptx.dsl.functions.__all__
    seen.pop("search", None)                 # a subpackage
    assert seen == pkg._LAZY
