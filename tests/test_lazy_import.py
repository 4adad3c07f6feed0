"""``import numptx`` imports no numba; nx.site still works in numba-cuda kernels because its IR
rewrite is registered when numba.cuda is imported (numptx.jit.numba.after_import), or at once when
numba.cuda came first. Fresh interpreters in subprocesses; no GPU."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest

from numptx.jit.numba import after_import

NO_NUMBA = r'''
import sys
import numptx as nx
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("numba", "numba_cuda", "llvmlite"))
assert not heavy, heavy
from numptx import site, kernel, Kernel, KernelVariant, LaunchError, SiteError, CudaTemplate
assert site is nx.site and kernel is nx.kernel
assert not nx.jit.numba_site._registered
'''

COMPILE = r'''
from numba import cuda
from numba.cuda import types as nbt
from numptx.jit.numba.after_import import _Finder
assert nx.jit.numba_site._registered
assert not any("numba.cuda" in f.hooks for f in sys.meta_path if isinstance(f, _Finder))  # gone
assert type(cuda.__spec__.loader).__name__ != "_Loader" and cuda.__loader__ is cuda.__spec__.loader

def apply(out, a, b):                      # a plain function, compiled by numba-cuda directly
    i = cuda.grid(1)
    out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})

ptx, _ = cuda.compile_ptx(apply, (nbt.float32[:],) * 3, cc=(9, 0))
assert "// PTX_INJECT_BEGIN combine" in ptx, ptx
assert nx.PtxInject(ptx).sites["combine"].signature == "combine(in f32 x, in f32 y, out f32 z)"
print("OK")
'''


def _run(code: str, **env: str) -> str:
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=300, env={**os.environ, **env})
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _real_numba_only():
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        pytest.skip("needs the real numba-cuda")
    pytest.importorskip("numba.cuda")


def test_import_numptx_imports_no_numba_then_sites_compile():
    _real_numba_only()
    assert "OK" in _run(NO_NUMBA + COMPILE)


def test_numba_cuda_imported_first_registers_at_import():
    _real_numba_only()
    assert "OK" in _run("import sys\nfrom numba import cuda\nimport numptx as nx\n" + COMPILE)


def test_nx_kernel_compiles_without_importing_numba_first():
    _real_numba_only()
    code = NO_NUMBA + r'''
from numba import cuda
@nx.kernel("void(float32[:], float32[:])", cache=False)
def k(out, a):
    i = cuda.grid(1)
    out[i] = nx.site("s", x=a[i], out={"z": "f32"})
v = k.inject(s="mov.f32 %v_z, %v_x;")
assert v.cubin[:4] == b"\x7fELF" and "PTX_INJECT_BEGIN" not in v.ptx
print("OK")
'''
    assert "OK" in _run(code)


def test_simulator_registers_nothing():
    code = NO_NUMBA + r'''
import numpy as np
from numba import cuda
from numptx.jit.numba.after_import import _Finder
assert nx.jit.numba_site.SIMULATOR and not nx.jit.numba_site._registered
assert not any("numba.cuda" in f.hooks for f in sys.meta_path if isinstance(f, _Finder))
nx.jit.numba_site.register()
assert not nx.jit.numba_site._registered

@nx.kernel
def k(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("s", x=a[i], out={"z": "f32"})

a = np.arange(4, dtype=np.float32)
out = np.zeros_like(a)
k.inject(s="add.rn.f32 %v_z, %v_x, %v_x;")[1, 4](out, a)
assert np.array_equal(out, 2 * a), out
print("OK")
'''
    assert "OK" in _run(code, NUMBA_ENABLE_CUDASIM="1")


# ---- the post-import hook itself (in this process, on a throwaway module) ----------------------
def _module(tmp_path, monkeypatch, name: str, body: str = "VALUE = 1\n") -> None:
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)


def _finders() -> list:
    return [f for f in sys.meta_path if isinstance(f, after_import._Finder)]


def test_hook_runs_once_after_the_import(tmp_path, monkeypatch):
    name = "numptx_hook_probe_a"
    _module(tmp_path, monkeypatch, name)
    calls = []
    after_import.when_imported(name, lambda: calls.append(sys.modules[name].VALUE))
    assert calls == [] and _finders()
    import importlib
    mod = importlib.import_module(name)
    assert calls == [1]
    assert type(mod.__loader__).__name__ == "SourceFileLoader" and mod.__spec__.loader is mod.__loader__
    importlib.reload(mod)
    assert calls == [1]
    after_import.when_imported(name, lambda: calls.append("now"))     # imported: runs at once
    assert calls == [1, "now"]


def test_a_failing_hook_warns_and_the_import_succeeds(tmp_path, monkeypatch):
    name = "numptx_hook_probe_b"
    _module(tmp_path, monkeypatch, name)

    def boom():
        raise RuntimeError("boom")
    after_import.when_imported(name, boom)
    import importlib
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert importlib.import_module(name).VALUE == 1
    assert any("boom" in str(w.message) for w in seen)
