"""Pairwise "semiring" kernels: one CUDA C++ template whose k loop has a site with a mod
accumulator, filled with a Laplace-kernel formula ``acc + exp(-|x - y| * inv_sigma)``
(docs/templates.md). Sigma is either baked into each variant (``f.bind(inv_sigma=...)``: after
the first two variants, new values are patched into the cubin, not assembled) or read at run time
from a kernel parameter that the site passes to the formula (one variant for every sigma).

    python examples/semiring_distances.py      # builds and emulates on a CPU; launches on a GPU

On a CPU the cubins are built and each stub is checked with ``nx.emulate`` (the PTX the GPU would
run, on NumPy arrays) against NumPy; CUDA C++ variants launch only on a GPU.
"""
import time

import numpy as np

import numptx as nx

SRC = r'''
extern "C" __global__ void pairwise(float* out, const float* A, const float* B,
                                    int m, int n, int d, float inv_sigma) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < m && j < n) {
        float acc = 0.0f;                               // the semiring's zero
        for (int k = 0; k < d; ++k) {
            float x = A[i * d + k], y = B[j * d + k];
            PTX_INJECT("reduce", PTX_IN(F32, x), PTX_IN(F32, y), PTX_IN(F32, inv_sigma),
                       PTX_MOD(F32, acc));              // acc = reduce(acc, x, y)
        }
        out[i * n + j] = acc;
    }
}'''


@nx.ptx_expr
def laplace(x: nx.f32, y: nx.f32, acc: nx.f32, inv_sigma: nx.f32) -> nx.f32:
    """One k step of a Laplace-kernel "distance": acc + exp(-|x - y| / sigma)."""
    return acc + nx.exp(-abs(x - y) * inv_sigma)


def reference(A: np.ndarray, B: np.ndarray, inv_sigma: float) -> np.ndarray:
    """NumPy, in float64."""
    diff = np.abs(A[:, None, :].astype(np.float64) - B[None, :, :])
    return np.exp(-diff * inv_sigma).sum(axis=2)


def emulated(formula, site, A: np.ndarray, B: np.ndarray, inv_sigma: float) -> np.ndarray:
    """The stub's PTX run by the emulator, k step by k step, on all (i, j) pairs at once."""
    m, n, d = A.shape[0], B.shape[0], A.shape[1]
    acc = np.zeros(m * n, np.float32)
    s = np.full(m * n, inv_sigma, np.float32)
    for k in range(d):
        x, y = np.repeat(A[:, k], n), np.tile(B[:, k], m)
        acc = nx.emulate(formula, {"x": x, "y": y, "acc": acc, "inv_sigma": s}, site=site)["acc"]
    return acc.reshape(m, n)


def gpu_available() -> bool:
    if nx.simulator_active():           # numba's simulator runs Python kernels, not CUDA C++
        return False
    try:
        from numba import cuda
        return bool(cuda.is_available())
    except Exception:   # noqa: BLE001 - no driver
        return False


def main() -> None:
    t = time.perf_counter()
    tmpl = nx.CudaTemplate(SRC, entry="pairwise", arch="sm_90", cache=False)   # NVRTC, once
    print(f"{tmpl}  (NVRTC {(time.perf_counter() - t) * 1e3:.0f} ms)")
    site = tmpl.sites["reduce"]

    sigmas = [0.25, 0.5, 1.0, 2.0, 3.0, 4.0]
    # sigma baked in: the formula's parameter becomes a constant; the site's inv_sigma is unused
    baked = tmpl.build_many([{"reduce": laplace.bind(inv_sigma=1.0 / s)} for s in sigmas])
    for s, v in zip(sigmas, baked):
        print(f"  baked   sigma={s:<5} {v.build_info.how:<9} {v.build_info.seconds * 1e3:8.3f} ms"
              f"  {v.build_info.why or ''}")
    # sigma=2.0 is assembled: its 1/sigma = 0.5 is also a constant of exp's own code, and the
    # stub shares one register for both, so its text (its shape) differs from the others'

    # sigma at run time: one variant; the kernel parameter reaches the formula through the site
    runtime = tmpl.inject(reduce=laplace)
    runtime.cubin
    print(f"  runtime (any sigma) {runtime.build_info.how:<9} {runtime.build_info.seconds * 1e3:8.3f} ms")

    rng = np.random.default_rng(0)
    m, n, d = 24, 40, 16
    A = rng.standard_normal((m, d)).astype(np.float32)
    B = rng.standard_normal((n, d)).astype(np.float32)

    worst = 0.0
    if gpu_available():
        where = "launched on the GPU"
        out = np.zeros((m, n), np.float32)
        grid, block = ((n + 15) // 16, (m + 15) // 16), (16, 16)
        for s, v in zip(sigmas, baked):
            v[grid, block](out, A, B, m, n, d, np.float32(0))     # inv_sigma unused: baked in
            worst = max(worst, np.abs(out - reference(A, B, 1.0 / s)).max())
            runtime[grid, block](out, A, B, m, n, d, np.float32(1.0 / s))
            worst = max(worst, np.abs(out - reference(A, B, 1.0 / s)).max())
    else:
        where = "emulated on the CPU (no GPU: CUDA C++ variants do not launch here)"
        for s in sigmas:
            ref = reference(A, B, 1.0 / s)
            got_baked = emulated(laplace.bind(inv_sigma=1.0 / s), site, A, B, 1.0 / s)
            got_runtime = emulated(laplace, site, A, B, 1.0 / s)
            worst = max(worst, np.abs(got_baked - ref).max(), np.abs(got_runtime - ref).max())
    print(f"{len(sigmas)} baked variants and the run-time one, {m}x{n} pairs, d={d}: {where}; "
          f"max |error| vs NumPy {worst:.2e}")
    assert worst < 1e-4 * d


if __name__ == "__main__":
    main()
