"""Simulator launches: launches per second of a 64-thread numba-cuda kernel under
``NUMBA_ENABLE_CUDASIM=1`` with an ``@nx.ptx_expr`` site (the Laplace kernel
``acc + exp(-abs(x - y) * c)``): a new formula each launch (its own constant ``c``, or its own
structure: its own multiply-adds), or one formula relaunched. Three ways, side by side in one run (best of ``--repeat``):

* ``reference, per thread``: numba's block manager, each thread runs the formula's NumPy
  reference (numptx before issue 14: the PTX was never run);
* ``stub, per thread``: numba's block manager, each thread runs the stub in the emulator;
* ``stub, batched``: the default: numptx's waves of blocks, one emulator run per site and
  round (numptx.jit.numba.sim_waves).

Then (issue 22, item 12) one step of an n-body kernel (``examples/nbody_force_law.py``: each
thread sums the softened-gravity pair forces of all the bodies, a loop of ``n`` trips) with the
force law as one ``nx.site`` filled by an ``@nx.ptx_expr`` formula, against the same kernel with
the formula written inline (``@cuda.jit``, NumPy float32 scalars), in the same run, at
``--bodies`` threads (blocks of 64): seconds per launch, their ratio, and the largest
difference of the two kernels' forces (relative to the largest force).

    NUMBA_ENABLE_CUDASIM=1 python benchmarks/bench_simulator.py [--variants 20] [--repeat 3]
        [--bodies 64,512] [--only launches|nbody]
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
import numptx.jit.numba.launch as L                         # noqa: E402
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


@nx.kernel
def nbody_site(pos, mass, acc, soft):
    i = cuda.grid(1)
    if i < pos.shape[0]:
        xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
        ax = ay = az = np.float32(0.0)
        for j in range(pos.shape[0]):
            dx, dy, dz = pos[j, 0] - xi, pos[j, 1] - yi, pos[j, 2] - zi
            r2 = dx * dx + dy * dy + dz * dz + soft
            s = nx.site("law", r2=r2, m=mass[j], out={"s": nx.f32})
            ax += s * dx
            ay += s * dy
            az += s * dz
        acc[i, 0], acc[i, 1], acc[i, 2] = ax, ay, az


@cuda.jit
def nbody_inline(pos, mass, acc, soft):
    i = cuda.grid(1)
    if i < pos.shape[0]:
        xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
        ax = ay = az = np.float32(0.0)
        for j in range(pos.shape[0]):
            dx, dy, dz = pos[j, 0] - xi, pos[j, 1] - yi, pos[j, 2] - zi
            r2 = dx * dx + dy * dy + dz * dz + soft
            inv_r = np.float32(1.0) / np.sqrt(r2)
            s = mass[j] * inv_r * inv_r * inv_r
            ax += s * dx
            ay += s * dy
            az += s * dz
        acc[i, 0], acc[i, 1], acc[i, 2] = ax, ay, az


@nx.ptx_expr
def gravity(r2: nx.f32, m: nx.f32) -> nx.f32:
    inv_r = nx.rsqrt(r2)
    return m * inv_r * inv_r * inv_r


def nbody(bodies: list[int], repeat: int) -> None:
    """Seconds per launch of the n-body step, the site against the inline formula."""
    site = nbody_site.inject(law=gravity)
    rng = np.random.default_rng(5)
    warm = np.ones((1, 3), np.float32)
    for k in (nbody_inline, site):      # the site's check (one nvJitLink run) before timing
        k[1, 1](warm, np.ones(1, np.float32), np.zeros_like(warm), np.float32(1e-2))
    print(f"\nn-body step, one nx.site against the formula inline, best of {repeat}")
    print("| threads (bodies) | inline | nx.site | ratio | largest difference |")
    print("|---|---|---|---|---|")
    for n in bodies:
        pos = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
        mass = rng.uniform(0.5, 1.5, n).astype(np.float32)
        soft = np.float32(1e-2)
        best, outs = {}, {}
        for _ in range(repeat):
            for label, k in (("inline", nbody_inline), ("site", site)):
                out = outs[label] = np.zeros_like(pos)
                t0 = time.perf_counter()
                k[(n + 63) // 64, 64](pos, mass, out, soft)
                best[label] = min(best.get(label, np.inf), time.perf_counter() - t0)
        # the same forces (rsqrt.approx against 1 / sqrt: a few ulp), relative to the largest
        diff = np.abs(outs["site"] - outs["inline"]).max() / np.abs(outs["inline"]).max()
        print(f"| {n} | {best['inline']:.3f} s | {best['site']:.3f} s | "
              f"{best['site'] / best['inline']:.1f}x | {diff:.1e} |")


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
    ap.add_argument("--bodies", default="64,512")
    ap.add_argument("--only", choices=("launches", "nbody"))
    args = ap.parse_args()
    if args.only != "launches":
        nbody([int(b) for b in args.bodies.split(",")], args.repeat)
    if args.only == "nbody":
        return
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
