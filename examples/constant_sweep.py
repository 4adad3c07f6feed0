"""A constant sweep: 256 variants of one formula in a 512-site GEMM template, built in well under
a second because only the first ones are assembled; the rest are patched (docs/templates.md,
"New constants of a known formula").

    python examples/constant_sweep.py          # builds on the CPU; runs the best on a GPU if any
"""
import sys
import time
from pathlib import Path

import numpy as np

import numptx as nx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_inject import gemm_template  # noqa: E402  the register-tiled GEMM of the benchmarks


@nx.ptx_expr
def mac(a: nx.f32, b: nx.f32, acc: nx.f32, c: nx.f32) -> nx.f32:
    """One multiply-accumulate of a scaled GEMM: acc + a * (b * c)."""
    return nx.fma(a, b * c, acc)


def main() -> None:
    t = time.perf_counter()
    gemm = nx.CudaTemplate(gemm_template(), entry="gemm", arch="sm_90", cache=False)
    print(f"template: {gemm.sites['mac'].instances} instances of site 'mac', NVRTC once in "
          f"{(time.perf_counter() - t) * 1e3:.0f} ms")

    constants = np.linspace(0.25, 4.0, 256, dtype=np.float32)
    t = time.perf_counter()
    variants = gemm.build_many([{"mac": mac.bind(c=float(c))} for c in constants])
    dt = time.perf_counter() - t
    print(f"build_many: {len(variants)} variants in {dt * 1e3:.0f} ms "
          f"({dt / len(variants) * 1e3:.2f} ms each): one shape proof, the rest patched")

    # the patched cubins are the ones ptxas makes: check two against a full assembly
    plain = nx.CudaTemplate(gemm_template(), entry="gemm", arch="sm_90", cache=False,
                            patch_constants=False)
    for k in (17, 200):
        t = time.perf_counter()
        same = plain.inject(mac=mac.bind(c=float(constants[k]))).cubin == variants[k].cubin
        print(f"c={constants[k]:.4f}: patched cubin == ptxas's: {same} "
              f"(one assembly takes {(time.perf_counter() - t) * 1e3:.0f} ms)")
        assert same

    try:
        from numba import cuda
        gpu = cuda.is_available() and not nx.simulator_active()   # the simulator runs no C++
    except Exception:   # noqa: BLE001 - no driver
        gpu = False
    if not gpu:
        print("no GPU here: the variants are built; on a GPU this runs a few of them")
        return
    m = n = k = 256
    a = np.random.rand(m, k).astype(np.float32)
    b = np.random.rand(k, n).astype(np.float32)
    for idx in (0, 128, 255):
        out = np.zeros((m, n), np.float32)
        variants[idx][(n // 8 // 16, m // 8 // 16), (16, 16)](out, a, b, m, n, k)
        err = np.abs(out - a @ (b * constants[idx])).max()
        print(f"c={constants[idx]:.4f}: max |error| vs NumPy {err:.2e}")
        assert err < 1e-3 * k


if __name__ == "__main__":
    main()
