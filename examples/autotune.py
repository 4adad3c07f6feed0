"""Autotuning formula variants of a pairwise squared-distance kernel with ``nx.autotune``.

One CUDA C++ template (a k loop with a site ``f``: ``acc = f(acc, x, y)``) and several ways to
write the same squared Euclidean distance, plus one formula of another distance (L1), which a
result check rejects. ``nx.autotune`` builds the candidates in parallel and ranks them:

- on a GPU by time (CUDA events, best of ``repeats``), each candidate checked against NumPy first;
- on a CPU by a static cost: the SASS instruction count of the kernel (``cost="sass"``, needs
  ``numptx[tools]``; the register count without it).

The ranking is cached on disk, one entry per candidate, so adding a candidate measures only it.

    python examples/autotune.py            # the table (times on a GPU, SASS counts on a CPU)
    python examples/autotune.py --bench    # and what autotuning costs: builds, cache hits
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

import numpy as np

import numptx as nx
from numptx.jit.tune.autotune import autotune, gpu_available
from numptx.jit.compile.sass import find_tool

SRC = r'''
extern "C" __global__ void pairwise(float* out, const float* X, const float* YT, int n, int d) {
    // X is n x d, YT is d x n (Y transposed): the threads of a warp read neighbouring y values
    const int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || j >= n) return;
    const float* xr = X + (long long)i * d;
    float acc = 0.0f;
    #pragma unroll 4
    for (int k = 0; k < d; ++k) {
        const float x = xr[k], y = YT[(long long)k * n + j];
        PTX_INJECT("f", PTX_IN(F32, x), PTX_IN(F32, y), PTX_MOD(F32, acc));
    }
    out[(long long)i * n + j] = acc;
}'''


def formula(fn):
    """``fn(acc, x, y)`` as an f32 ``@nx.ptx_expr`` (the site's variables, by name)."""
    def f(acc: nx.f32, x: nx.f32, y: nx.f32) -> nx.f32:
        return fn(acc, x, y)
    f.__name__ = f.__qualname__ = fn.__name__
    return nx.ptx_expr(f)


def direct(acc, x, y):
    return acc + (x - y) * (x - y)          # one sub, one fma


def expanded(acc, x, y):
    return acc + x * x - 2 * x * y + y * y  # more work, and cancellation


def by_pow(acc, x, y):
    return acc + nx.pow(x - y, 2.0)         # CUDA's powf: a general power


def by_exp_log(acc, x, y):
    return acc + nx.exp(2 * nx.log(nx.abs(x - y)))     # transcendental: slowest


def l1(acc, x, y):
    return acc + nx.abs(x - y)              # another distance: the check rejects it


FORMULAS = [direct, expanded, by_pow, by_exp_log, l1]


def reference(out, X, YT, n, d):
    """Squared distances in float64, from host copies of the arguments (``check=``)."""
    X, Y = X.reshape(n, d).astype(np.float64), YT.reshape(d, n).T.astype(np.float64)
    return ((X * X).sum(1)[:, None] + (Y * Y).sum(1)[None, :] - 2 * X @ Y.T).reshape(-1)


def static_cost() -> str:
    """"sass" when nvdisasm is installed (numptx[tools]), else "registers"."""
    try:
        find_tool("nvdisasm")
        return "sass"
    except nx.ToolMissingError:
        return "registers"


def problem(n: int = 2048, d: int = 128):
    """(args, grid, block) of an n x n distance matrix over d features, on the device."""
    from numba import cuda
    rng = np.random.default_rng(5)
    X, YT = (rng.standard_normal(n * d).astype(np.float32) for _ in range(2))
    out = cuda.device_array(n * n, np.float32)
    grid = ((n + 31) // 32, (n + 7) // 8)
    return (out, cuda.to_device(X), cuda.to_device(YT), n, d), grid, (32, 8)


def main(argv: list[str]) -> None:
    tmpl = nx.CudaTemplate(SRC, entry="pairwise")
    cands = [{"f": formula(fn)} for fn in FORMULAS]
    names = [fn.__name__ for fn in FORMULAS]
    gpu = gpu_available()
    with tempfile.TemporaryDirectory() as rankings:     # a fresh ranking cache for the demo
        if gpu:
            args, grid, block = problem()
            kw = dict(args=args, grid=grid, block=block, check=reference, rtol=1e-3, atol=1e-2)
            print(f"timing {len(cands)} candidates on the GPU (µs, best of 10):")
        else:
            kw = dict(cost=static_cost())
            print(f"no GPU: ranking {len(cands)} candidates by static cost ({kw['cost']}):")
        first = autotune(tmpl, cands[:-1], cache_dir=rankings, **kw)
        show(first, names)
        # one more candidate: only it is measured, the others come from the cache
        second = autotune(tmpl, cands, cache_dir=rankings, **kw)
        print(f"\nwith {names[-1]!r} added: measured {[names[i] for i in second.measured]}, "
              f"{sum(second.from_cache)} from the cache; winner {names[second.index]!r}")
        for i, why in second.failed.items():
            print(f"  excluded {names[i]!r}: {why[:100]}")
    if "--bench" in argv:
        bench(tmpl, gpu)


def show(best, names: list[str]) -> None:
    unit = "µs" if best.cost == "time" else best.unit
    print(f"| rank | formula | {unit} |\n|---|---|---|")
    for r, i in enumerate(best.ranking, 1):
        c = best.costs[i] * 1e6 if best.cost == "time" else best.costs[i]
        print(f"| {r} | {names[i]} | {c:.4g} |")
    for i, why in best.failed.items():
        print(f"| — | {names[i]} | failed: {why[:70]} |")
    print(f"winner: {names[best.index]!r} (variant {best.variant.key[:12]})")


# ---------------------------------------------------------------------------------------------
# --bench: what autotuning costs
# ---------------------------------------------------------------------------------------------
BENCH_FORMULAS = [lambda acc, x, y, p=p: acc + nx.abs(x - y) ** p for p in range(1, 9)] + [
    lambda acc, x, y: acc + nx.exp(-nx.abs(x - y)),
    lambda acc, x, y: acc + nx.tanh(x * y),
    lambda acc, x, y: acc + nx.log1p(nx.abs(x - y)),
    lambda acc, x, y: acc + nx.sqrt(nx.abs(x - y)),
    lambda acc, x, y: acc + nx.sin(x - y),
    lambda acc, x, y: acc + nx.cos(x - y),
    lambda acc, x, y: acc + nx.sigmoid(x - y),
    lambda acc, x, y: acc + nx.cbrt(x - y),
]


def bench(tmpl: nx.CudaTemplate, gpu: bool) -> None:
    """Wall time of: building the candidates one after another (what a serial autotuner
    does), autotune on a cold cache (parallel build + measure), again with every ranking
    cached, and with one candidate added. Fresh cubin and ranking caches each time."""
    forms = [formula(f) for f in BENCH_FORMULAS]
    stubs = [{"f": f.stub(tmpl.sites["f"])} for f in forms]     # traced once, outside the clock
    kw = dict(zip(("args", "grid", "block"), problem())) if gpu else {"cost": static_cost()}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        def fresh(name):
            cache = nx.CubinCache(os.path.join(tmp, name), memory_entries=0)
            return nx.CudaTemplate(SRC, entry="pairwise", cache=cache, patch_constants=False)

        t = fresh("serial")
        start = time.perf_counter()
        for s in stubs[:-1]:
            t.inject(s).cubin
        rows.append(("serial build (variant.cubin one by one)", time.perf_counter() - start, ""))
        t, rankings = fresh("tune"), os.path.join(tmp, "rankings")
        for what, cands in (("autotune, cold caches", stubs[:-1]),
                            ("autotune, every ranking cached", stubs[:-1]),
                            ("autotune, one candidate added", stubs)):
            start = time.perf_counter()
            best = autotune(t, cands, cache_dir=rankings, **kw)
            rows.append((what, time.perf_counter() - start,
                         f"{len(best.measured)} measured, {sum(best.from_cache)} cached"))
    print(f"\nautotune costs, {len(stubs) - 1} candidates ({os.cpu_count()} cores, "
          f"{'GPU times' if gpu else 'static cost ' + kw['cost']}):")
    print("| step | wall s | |\n|---|---|---|")
    for what, s, note in rows:
        print(f"| {what} | {s:.3f} | {note} |")


if __name__ == "__main__":
    # runpy (tests/test_examples.py) leaves the caller's argv: read flags only when run as a script
    is_script = bool(sys.argv) and os.path.abspath(sys.argv[0]) == os.path.abspath(__file__)
    main(sys.argv[1:] if is_script else [])
