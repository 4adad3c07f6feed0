"""``nx.site``'s numba side in modules of their own (issue 24, item 2): the IR rewrite
(``numba_rewrite``) and the intrinsic (``numba_intrinsic``) are imported with numba-cuda, never by
``import numptx``; the call's spec and shared messages (``site_spec``) stay importable from
``numba_site``; and no function of these modules runs over the size the project keeps to.

The PTX the split left unchanged was compared before and after by compiling kernels with sites
(every type, typed values, loops, inlined device functions, dict variables, the misuse errors):
the tests of ``tests/test_numba_site.py`` and ``tests/test_site_binding.py`` keep that."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import numptx as nx
from numptx.jit.numba import numba_site, site_spec

JIT = Path(__file__).resolve().parents[1] / "numptx" / "jit" / "numba"
MODULES = ["numba_site.py", "numba_rewrite.py", "numba_intrinsic.py", "site_spec.py"]
#: the project's limits (docs: "Small files (~700 lines max), functions under ~80 lines")
MAX_FUNCTION_LINES = 80
MAX_SITE_LINES = 600


def _run(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.mark.parametrize("name", MODULES)
def test_no_function_over_the_size_limit(name):
    tree = ast.parse((JIT / name).read_text())
    long = [f"{n.name}: {n.end_lineno - n.lineno + 1} lines (line {n.lineno})"
            for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"numptx/jit/{name}: " + "; ".join(long)


def test_numba_site_is_small_and_holds_no_numba_code():
    text = (JIT / "numba_site.py").read_text()
    assert len(text.splitlines()) <= MAX_SITE_LINES
    tree = ast.parse(text)
    nested = [n.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
              for n in ast.walk(f) if isinstance(n, ast.ClassDef)]
    assert not nested, f"classes defined inside functions: {nested}"


def test_names_stay_importable_from_numba_site():
    assert numba_site.SiteError is site_spec.SiteError is nx.SiteError
    assert numba_site.SiteSpec is site_spec.SiteSpec
    for name in ("dtype_name", "check_variables", "two_signatures"):
        assert getattr(numba_site, name) is getattr(site_spec, name)
    assert issubclass(nx.SiteError, nx.NumptxError)
    with pytest.raises(nx.SiteError, match="duplicate variable name 'x'"):
        numba_site.check_variables("s", [("in", None, "x"), ("out", "f32", "x")])


def test_the_rewrite_is_imported_with_numba_not_with_numptx():
    """``import numptx``, ``numptx.jit`` and ``numptx.jit.numba.numba_site`` load neither numba nor
    the rewrite; importing numba.cuda registers the rewrite for ``nx.site`` itself, and a
    plain ``cuda.compile_ptx`` turns the call into a site."""
    pytest.importorskip("numba.cuda")
    out = _run("""
        import sys
        import numptx as nx
        import numptx.jit
        from numptx.jit import numba_site
        heavy = ("numba", "numba.cuda", "numptx.jit.numba.numba_rewrite", "numptx.jit.numba.numba_intrinsic")
        assert not [m for m in heavy if m in sys.modules], [m for m in heavy if m in sys.modules]
        assert not numba_site._registered
        from numba import cuda
        from numba.cuda import types as nbt
        assert numba_site._registered
        from numptx.jit.numba.numba_rewrite import SiteRewrite
        assert SiteRewrite.site_function is nx.site

        def k(out, a):
            i = cuda.grid(1)
            out[i] = nx.site("s", x=a[i], out={"z": nx.f32})

        ptx, _ = cuda.compile_ptx(k, (nbt.float32[:],) * 2, cc=(9, 0))
        print(nx.PtxInject(ptx).sites["s"].signature)
    """)
    assert out.strip().splitlines()[-1] == "s(in f32 x, out f32 z)"


def test_the_rewrite_and_the_simulator_word_a_misuse_alike():
    """Both sides take the message from site_spec: the GPU build's UnsupportedError carries the
    words the simulator's SiteError has."""
    cuda = pytest.importorskip("numba.cuda")
    if numba_site.SIMULATOR:
        pytest.skip("needs the real numba-cuda")
    from numba.cuda import types as nbt

    def k(out, a):
        out[0] = nx.site("s", x=a[0], ot={"z": "f32"})

    with pytest.raises(Exception) as info:
        cuda.compile_ptx(k, (nbt.float32[:],) * 2, cc=(9, 0))
    assert site_spec.dict_as_input("s", "ot") in str(info.value)
    assert "did you mean out=?" in str(info.value)
