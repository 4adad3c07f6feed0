"""Templates and variants: build three variants of a CUDA C++ template in parallel, get them back
from the cubin cache, and run a numba kernel with a site (docs/templates.md).

    python examples/templates_example.py                           # builds; no GPU needed
    NUMBA_ENABLE_CUDASIM=1 python examples/templates_example.py    # also runs the numba kernel
"""
import tempfile

import numpy as np
from numba import cuda          # a module global: the simulator swaps it for its own

import numptx as nx
from numptx import stack_ptx as sp
from numptx.jit.numba.numba_site import SIMULATOR

SRC = r'''
extern "C" __global__ void kernel(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = a[i], y = b[i], z;
        PTX_INJECT("combine", PTX_IN(F32, x), PTX_IN(F32, y), PTX_OUT(F32, z));
        out[i] = z;
    }
}'''


@nx.ptx_expr
def dist(x: nx.f32, y: nx.f32) -> nx.f32:
    return nx.sqrt(x * x + y * y)


STUBS = {
    "@nx.ptx_expr": dist,                                              # traced formula
    "PTX text": "max.f32 %v_z, %v_x, %v_y;",                           # registers %v_<name>
    "Stack PTX": [sp.input("x"), sp.input("y"), sp.instr("mul.rn.f32")],   # x * y
}


def cuda_variants(folder: str) -> None:
    cache = nx.CubinCache(folder)                   # private; the default is nx.default_cache()
    tmpl = nx.CudaTemplate(SRC, entry="kernel", arch="sm_90", cache=cache)   # NVRTC, once
    print(tmpl)
    print(f"params: {', '.join(p.decl for p in tmpl.params)}")
    batch = [{"combine": stub} for stub in STUBS.values()]
    variants = tmpl.build_many(batch)               # nvJitLink in a thread pool
    for name, v in zip(STUBS, variants):
        print(f"  {name:<13} key {v.key[:12]}  cubin {len(v.cubin)} bytes")
    print(f"first build: {cache.info().misses} cache misses")

    # a new process would start with an empty memory cache: the disk entries serve it
    fresh = nx.CubinCache(folder)
    again = nx.CudaTemplate(SRC, entry="kernel", arch="sm_90", cache=fresh)
    rebuilt = again.build_many(batch)
    assert [v.cubin for v in rebuilt] == [v.cubin for v in variants]
    info = fresh.info()
    print(f"rebuild: {info.hits} hits, {info.misses} misses, {info.entries} entries in {folder}")


def numba_variant(folder: str) -> None:
    @nx.kernel(cache=nx.CubinCache(folder))
    def apply(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})

    rng = np.random.default_rng(0)
    a, b = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
    out = np.zeros_like(a)
    k = apply.inject(combine=dist)
    if not SIMULATOR:
        apply.ptx(out, a, b)                        # numba compiles the template for these types
        print(f"numba variant: {k.sites['combine']}, cubin {len(k.cubin)} bytes")
        if not cuda.is_available():
            print("numba variant: launching needs a GPU or the simulator (NUMBA_ENABLE_CUDASIM=1)")
            return
    k[4, 256](out, a, b)                            # the GPU, or the simulator on the CPU
    assert np.allclose(out, np.hypot(a, b), rtol=1e-6)
    apply.inject(combine=STUBS["Stack PTX"])[4, 256](out, a, b)
    assert np.allclose(out, a * b)
    where = "in the simulator" if SIMULATOR else "on the GPU"
    print(f"numba variants ran {where} and match NumPy")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="numptx-cache-") as folder:
        cuda_variants(folder)
        numba_variant(folder)


if __name__ == "__main__":
    main()
