"""Shared fixtures. Tests run on the CPU with the real NVRTC and nvJitLink; tests marked ``gpu``
launch kernels and skip cleanly when no CUDA GPU is present."""
from __future__ import annotations

import functools
import os

import pytest


@functools.lru_cache(maxsize=1)
def gpu_available() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    try:
        from numba import cuda
        return bool(cuda.is_available())
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none detected)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


SPINE_SRC = r'''
extern "C" __global__ void kernel(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = a[i], y = b[i], z;
        PTX_INJECT("combine", PTX_IN(F32, x), PTX_IN(F32, y), PTX_OUT(F32, z));
        out[i] = z;
    }
}'''


@pytest.fixture(scope="session")
def spine_ptx() -> str:
    import numptx as nx
    return nx.cuda_to_ptx(SPINE_SRC, arch="sm_90")


def run_script(tmp_path, source: str, *, simulator: bool, marker: str) -> None:
    """Run ``source`` as a fresh Python process (under numba-cuda's simulator, or with it
    off) and check it exits 0 printing ``marker``."""
    import subprocess
    import sys
    script = tmp_path / "script.py"
    script.write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and marker in r.stdout, r.stdout + r.stderr


def elf_sections(cubin: bytes) -> dict[str, bytes]:
    """Section name -> contents of an ELF64 little-endian file (a cubin); NOBITS sections are
    empty. Comparing ``.text.<kernel>`` of two cubins compares their machine code."""
    import struct
    assert cubin[:4] == b"\x7fELF" and cubin[4] == 2, "not an ELF64 file"
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    out = {}
    for name_off, kind, _, _, off, size, *_ in headers:
        start = names_at + name_off
        name = cubin[start:cubin.index(b"\0", start)].decode()
        out[name] = b"" if kind == 8 else cubin[off:off + size]
    return out


class Counting:
    """Counts nvJitLink runs made by templates and build_many (the real function runs)."""

    def __init__(self, monkeypatch):
        from numptx.jit.compile import build as build_mod
        from numptx.jit.templates import template as template_mod
        self.calls = 0
        real = template_mod.ptx_to_cubin

        def to_cubin(*a, **k):
            self.calls += 1
            return real(*a, **k)
        for mod in (template_mod, build_mod):
            monkeypatch.setattr(mod, "ptx_to_cubin", to_cubin)
