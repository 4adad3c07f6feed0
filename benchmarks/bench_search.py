"""The search loop (issue 15): candidates per second end to end, and time to solve benchmarks.

- **throughput**: ``search.regress`` on Pagie-1 (``--points`` samples, ``--population``,
  ``--generations``): the headline is candidates *evaluated* per second end to end (programs
  scored after dedup, constant-fit trials included, over the wall time of the run, which
  covers generate, dedup, stub, pack, build, evaluate, fit, select); children made per second
  (every child, scored or deduplicated) is reported beside it, with the time per stage. On the
  CPU (the emulator) by default, on the GPU with ``--gpu``.
- **solving** (``--nguyen``): Nguyen-1..7 (and Pagie-1 with ``--pagie``) with seeds 0..9:
  solved (loss < 1e-6) or not within ``--time-cap`` seconds, the generations and the time.

::

    python benchmarks/bench_search.py                       # CPU throughput, small Pagie-1
    python benchmarks/bench_search.py --gpu --points 20000 --population 4096 --generations 20
    python benchmarks/bench_search.py --nguyen --problems 1 2 3 4 --seeds 0 1 2 --time-cap 60
    python benchmarks/bench_search.py --stages                # where a GPU generation's time goes

Prints markdown tables. Targets (issue 15): >= 20,000 candidates/s end to end for Pagie-1 with
20,000 points on a 16-core GPU machine; Nguyen-1..4 solved in under 60 s each for most seeds on
the 2-core CPU.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from numptx import search

OPS = ["add", "sub", "mul", "div", "exp", "log", "sin", "cos"]


def pagie(n: int, rng: np.random.Generator):
    X = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    with np.errstate(divide="ignore"):
        y = 1 / (1 + X[:, 0] ** -4) + 1 / (1 + X[:, 1] ** -4)
    return X, y.astype(np.float32)


NGUYEN = {
    1: (lambda x: x ** 3 + x ** 2 + x, (-1, 1)),
    2: (lambda x: x ** 4 + x ** 3 + x ** 2 + x, (-1, 1)),
    3: (lambda x: x ** 5 + x ** 4 + x ** 3 + x ** 2 + x, (-1, 1)),
    4: (lambda x: x ** 6 + x ** 5 + x ** 4 + x ** 3 + x ** 2 + x, (-1, 1)),
    5: (lambda x: np.sin(x ** 2) * np.cos(x) - 1, (-1, 1)),
    6: (lambda x: np.sin(x) + np.sin(x + x ** 2), (-1, 1)),
    7: (lambda x: np.log(x + 1) + np.log(x ** 2 + 1), (0, 2)),
}


def nguyen(k: int, seed: int):
    f, (lo, hi) = NGUYEN[k]
    rng = np.random.default_rng(1000 + seed)
    X = rng.uniform(lo, hi, (20, 1)).astype(np.float32)
    return X, f(X[:, 0].astype(np.float64)).astype(np.float32)


def throughput(args) -> None:
    device = "gpu" if args.gpu else "cpu"
    X, y = pagie(args.points, np.random.default_rng(0))
    if args.warmup:        # NVRTC of the fitness kernel, first packs: not what a run costs
        search.regress(X[:256], y[:256], OPS, population=64, generations=2, seed=1, device=device)
    t0 = time.perf_counter()
    r = search.regress(X, y, OPS, population=args.population, generations=args.generations,
                       seed=0, device=device, progress=args.progress)
    wall = time.perf_counter() - t0
    made = r._search.children_made
    print(f"\n### Throughput: Pagie-1, {args.points} points, population {args.population}, "
          f"{r.generations} generations, device {r.device}\n")
    print("| measure | value |\n|---|---|")
    print(f"| candidates evaluated (after dedup, constant-fit trials included) | "
          f"{r.evaluated} |")
    print(f"| children made (each evaluated or deduplicated) | {made} |")
    print(f"| wall time | {wall:.2f} s |")
    print(f"| **candidates evaluated/s end to end** | **{r.evaluated / wall:,.0f}** |")
    print(f"| children made/s end to end | {made / wall:,.0f} |")
    for k, v in r.timings.items():
        print(f"| stage {k} | {v:.2f} s ({100 * v / wall:.0f} %) |")
    print(f"| best loss | {r.best.loss:.4g} |")
    print(f"| best formula | `{r.best.formula[:80]}` |")


def solve(args) -> None:
    device = "gpu" if args.gpu else "cpu"
    cases = [(f"Nguyen-{k}", lambda s, k=k: nguyen(k, s)) for k in args.problems]
    if args.pagie:
        cases.append(("Pagie-1", lambda s: pagie(args.points, np.random.default_rng(s))))
    print(f"\n### Time to solve (loss < {args.target:g}), seeds {args.seeds}, population "
          f"{args.population}, restart {args.restart}, cap {args.time_cap:g} s, device "
          f"{device}, ops {' '.join(args.ops)}\n")
    print("| problem | solved | median time (solved) | median generations (solved) | "
          "worst time | best loss (unsolved) |")
    print("|---|---|---|---|---|---|")
    for name, make in cases:
        times, gens, unsolved = [], [], []
        for seed in args.seeds:
            X, y = make(seed)
            t0 = time.perf_counter()
            r = search.regress(X, y, args.ops, population=args.population, generations=10_000,
                               seed=seed, target=args.target, time_limit=args.time_cap,
                               device=device, parsimony=args.parsimony, restart=args.restart)
            dt = time.perf_counter() - t0
            if r.best.loss < args.target:
                times.append(dt)
                gens.append(r.generations)
            else:
                unsolved.append(r.best.loss)
            if args.verbose:
                print(f"  {name} seed {seed}: {r.best.loss:.3g} in {dt:.1f} s, "
                      f"{r.generations} gens: {r.best.formula[:70]}", file=sys.stderr)
        n = len(args.seeds)
        med_t = f"{statistics.median(times):.1f} s" if times else "-"
        med_g = f"{statistics.median(gens):.0f}" if gens else "-"
        worst = f"{max(times):.1f} s" if times else "-"
        bad = f"{min(unsolved):.3g}" if unsolved else "-"
        print(f"| {name} | {len(times)}/{n} | {med_t} | {med_g} | {worst} | {bad} |", flush=True)


def stages(args) -> None:
    """Per-candidate costs of the steps a GPU generation takes, without a GPU: making a child
    (selection aside: crossover and mutation), its canonical key, its stub, and assembling
    packed modules of the fitness kernel (nvJitLink, the GPU path's build)."""
    from numptx import stack_ptx as sp
    from numptx.jit.fitness import fitness_template
    from numptx.search import operators as O
    from numptx.search.formula import canonical_keys
    from numptx.search.genes import Genes
    g, rng, n = Genes(args.ops, 2), np.random.default_rng(0), args.population
    pop = [O.random_program(g, rng, (2, 12)) for _ in range(n)]
    t = time.perf_counter()
    kids = []
    for _ in range(n):
        a, b = pop[int(rng.integers(n))], pop[int(rng.integers(n))]
        c = O.crossover(a, b, rng, genes=g, max_length=64)
        kids.append(O.mutate(c, g, rng, max_length=64) if rng.random() < 0.5 else c)
    t_gen = time.perf_counter() - t
    t = time.perf_counter()
    canonical_keys(kids, g)
    t_key = time.perf_counter() - t
    tmpl = fitness_template(2, None, "f32", "mse", "sm_90")
    t = time.perf_counter()
    stubs = sp.compile_many(kids, site=tmpl.sites["f"])
    t_stub = time.perf_counter() - t
    t = time.perf_counter()
    packs = tmpl.pack_many("f", list(stubs), select="cand", per_module=256)
    for p in packs:
        p._require()
    t_build = time.perf_counter() - t
    import os
    cores = len(os.sched_getaffinity(0))
    print(f"| step | per candidate ({n} candidates, {cores} cores) |\n|---|---|")
    for name, sec in (("make a child", t_gen), ("canonical key", t_key), ("stub", t_stub),
                      ("assemble packed modules (wall)", t_build)):
        print(f"| {name} | {sec / n * 1e6:.1f} us |")
    print(f"| assemble, core time | {t_build * cores / n * 1e3:.2f} ms |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu", action="store_true", help="evaluate on the GPU")
    ap.add_argument("--points", type=int, default=None,
                    help="Pagie-1 samples (default 20000 on a GPU, 400 on a CPU)")
    ap.add_argument("--population", type=int, default=None,
                    help="default: 4096 on a GPU, 500 on a CPU")
    ap.add_argument("--generations", type=int, default=None, help="default: 10 (GPU), 5 (CPU)")
    ap.add_argument("--nguyen", action="store_true", help="time to solve Nguyen-1..7")
    ap.add_argument("--pagie", action="store_true", help="with --nguyen: Pagie-1 as well")
    ap.add_argument("--problems", type=int, nargs="+", default=list(range(1, 8)))
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    ap.add_argument("--time-cap", type=float, default=60.0)
    ap.add_argument("--target", type=float, default=1e-6)
    ap.add_argument("--parsimony", type=float, default=0.0)
    ap.add_argument("--restart", type=int, default=20,
                    help="generations without progress before a fresh population (0: never)")
    ap.add_argument("--ops", nargs="+", default=OPS,
                    help=f"the op set of --nguyen (default: {' '.join(OPS)})")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--no-warmup", dest="warmup", action="store_false")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--stages", action="store_true",
                    help="per-candidate cost of each step of a GPU generation (no GPU needed)")
    args = ap.parse_args()
    args.points = args.points or (20000 if args.gpu else 400)
    args.restart = args.restart or None
    if args.stages:
        args.population = args.population or 1024
        stages(args)
    elif args.nguyen:
        args.population = args.population or (4096 if args.gpu else 500)
        solve(args)
    else:
        args.population = args.population or (4096 if args.gpu else 500)
        args.generations = args.generations or (10 if args.gpu else 5)
        throughput(args)


if __name__ == "__main__":
    main()
