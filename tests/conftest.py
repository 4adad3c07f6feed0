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
