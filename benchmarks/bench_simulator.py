"""Simulator launches: launches per second of a 64-thread numba-cuda kernel under
``NUMBA_ENABLE_CUDASIM=1`` with an ``@nx.ptx_expr`` site (the Laplace kernel
``acc + exp(-abs(x - y) * c)``): a new formula each launch (its own constant ``c``, or its own
structure: its own multiply-adds), or one formula relaunched. Three ways, side by side in one run (best of ``--repeat``):

* ``reference, per thread``: numba's block manager, each thread runs the formula's NumPy
  reference (numptx before issue 14: the PTX was never run);
* ``stub, per thread``: numba's block manager, each thread runs the stub in the emulator;
* ``stub, batched``: the default: numptx's block manager, one emulator run per site and block.

    NUMBA_ENABLE_CUDASIM=1 python benchmarks/bench_simulator.py [--variants 20] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
    raise SystemExit("run under the simulator: NUMBA_ENABLE_CUDASIM=1 python "
                     "benchmarks/bench_simulator.py")

import numptx as nx                                   # noqa: E402
import numptx.jit.launch as L                         # noqa: E402
from numba import cuda                                # noqa: E402


def laplace_fn(out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("k", x=a[i], y=b[i], out={}, mod={"acc": out[i]})


KERNELS = {"stub": nx.kernel(laplace_fn), "reference": nx.kernel(laplace_fn, simulate="reference")}
WAYS = (("reference, per thread", "reference", False), ("stub, per thread", "stub", False),
        ("stub, batched", "stub", True))
_serial = [0]


def formula(c: float):
    @nx.ptx_expr
    def k(x: nx.f32, y: nx.f32, acc: nx.f32):
        return {"acc": acc + nx.exp(-abs(x - y) * c)}
    return k


def structure(serial: int):
    """A formula of its own shape (one of 256): the Laplace term, then 8 multiply-adds, the
    k-th ``r * x + y`` or ``r * y + x`` by bit k of ``serial``."""
    @nx.ptx_expr
    def k(x: nx.f32, y: nx.f32, acc: nx.f32):
        r = nx.exp(-abs(x - y) * 0.5)
        for bit in range(8):
            r = r * x + y if serial >> bit & 1 else r * y + x
        return {"acc": acc + r}
    return k


CASES = ("new constant", "new structure", "relaunch")


def rate(kernel, batch: bool, case: str, n_variants: int, grid: int, block: int, a, b) -> float:
    L.SIM_BATCH = batch
    out = np.zeros_like(a)
    f0 = formula(0.25)
    t0 = time.perf_counter()
    for _ in range(n_variants):
        _serial[0] += 1
        f = (formula(0.25 + _serial[0] / 4096) if case == "new constant" else
             structure(_serial[0] % 256) if case == "new structure" else f0)
        kernel.inject(k=f)[grid, block](out, a, b)
    return n_variants / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--grid", type=int, default=1)
    args = ap.parse_args()
    n = args.block * args.grid
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    for k in KERNELS.values():                      # warm-up
        k.inject(k=formula(0.5))[args.grid, args.block](np.zeros_like(a), a, b)
    best: dict = {}
    for _ in range(args.repeat):
        for label, how, batch in WAYS:
            for case in CASES:
                r = rate(KERNELS[how], batch, case, args.variants, args.grid, args.block, a, b)
                best[label, case] = max(best.get((label, case), 0.0), r)
    L.SIM_BATCH = True
    print(f"{args.grid}x{args.block} threads, best of {args.repeat} x {args.variants} launches")
    print("| way | new constant each launch | new structure each launch | one formula relaunched |")
    print("|---|---|---|---|")
    for label, _, _ in WAYS:
        print(f"| {label} | " + " | ".join(f"{best[label, c]:.1f} /s" for c in CASES) + " |")


if __name__ == "__main__":
    main()
