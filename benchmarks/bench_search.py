"""The search loop (issue 15): candidates per second end to end, and time to solve benchmarks.

- **throughput**: ``search.regress`` on Pagie-1 (``--points`` samples, ``--population``,
  ``--generations``): the headline is candidates *evaluated* per second end to end (programs
  scored after dedup, constant-fit trials included, over the wall time of the run, which
  covers generate, dedup, stub, pack, build, evaluate, fit, select); children made per second
  (every child, scored or deduplicated) is reported beside it, with the time per stage. On the
  CPU (the emulator) by default, on the GPU with ``--gpu`` (pipelined: modules assemble while
  the next children are made; ``--no-pipeline`` for the one-batch path, to compare).
- **stages** (``--stages``, no GPU needed): each step of a GPU generation timed on the CPU,
  and one generation's build sequential and pipelined side by side, projected to ``--cores``
  (see :func:`stages` for the formula); ``--options`` adds nvJitLink option sets.
- **solving** (``--nguyen``): Nguyen-1..7 (and Pagie-1 with ``--pagie``) with seeds 0..9:
  solved (loss < 1e-6) or not within ``--time-cap`` seconds, the generations and the time.

::

    python benchmarks/bench_search.py                       # CPU throughput, small Pagie-1
    python benchmarks/bench_search.py --gpu --points 20000 --population 4096 --generations 20
    python benchmarks/bench_search.py --nguyen --problems 1 2 3 4 --seeds 0 1 2 --time-cap 60
    python benchmarks/bench_search.py --gpu --points 20000 --population 4096 --no-pipeline
    python benchmarks/bench_search.py --stages --options      # where a GPU generation's time goes

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
                       seed=0, device=device, progress=args.progress, pipeline=args.pipeline)
    wall = time.perf_counter() - t0
    made = r._search.children_made
    print(f"\n### Throughput: Pagie-1, {args.points} points, population {args.population}, "
          f"{r.generations} generations, device {r.device}"
          f"{'' if args.pipeline else ', not pipelined'}\n")
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


def _children(g, pop, rng, n: int) -> list:
    """``n`` children of random parents: crossover, then a mutation half of the time."""
    from numptx.search import operators as O
    kids = []
    for _ in range(n):
        a, b = pop[int(rng.integers(len(pop)))], pop[int(rng.integers(len(pop)))]
        c = O.crossover(a, b, rng, genes=g, max_length=64)
        kids.append(O.mutate(c, g, rng, max_length=64) if rng.random() < 0.5 else c)
    return kids


def _generation(g, pop, tmpl, n: int, per: int, pipelined: bool) -> tuple[float, int]:
    """Build one generation of ``n`` children (the same ones for the same seed): its wall
    time and the candidates packed. Children, keys and stubs are made on this thread;
    pipelined: a chunk of ``per`` at a time, each module sent to the threads at once."""
    from numptx import stack_ptx as sp
    from numptx.search.formula import canonical_keys
    from numptx.search.pipeline import PackPipeline
    site = tmpl.sites["f"]
    rng = np.random.default_rng(1)
    seen: set = set()

    def fresh(kids):
        out = []
        for k, p in zip(canonical_keys(kids, g), kids):
            if k not in seen:
                seen.add(k)
                out.append(p)
        return out
    t0 = time.perf_counter()
    if not pipelined:
        new = fresh(_children(g, pop, rng, n))
        packs = tmpl.pack_many("f", list(sp.compile_many(new, site=site)), select="cand",
                               per_module=per)
    else:
        packs = []
        with PackPipeline(tmpl, "f", select="cand", per_module=per) as pipe:
            for start in range(0, n, per):
                pipe.add(sp.compile_many(fresh(_children(g, pop, rng, min(per, n - start))),
                                         site=site))
                packs.extend(pipe.ready())
            packs.extend(pipe.finish())
    for p in packs:
        if not p.empty:
            p.cubin                  # noqa: B018 - built (pipelined: already)
    return time.perf_counter() - t0, sum(len(p) for p in packs)


def stages(args) -> None:
    """Per-candidate costs of the steps a GPU generation takes, without a GPU: making a child
    (selection aside: crossover and mutation), its canonical key, its stub, packing a module
    (Python: the packed stub, its PTX, the constant-patch shape) and assembling packed modules
    of the fitness kernel (nvJitLink, the GPU path's build). Then the build of one whole
    generation of ``--population`` children (made, keyed, deduplicated, compiled, packed and
    assembled; no launch), sequential (what ``Evaluator.score`` does: every child made, then
    one ``pack_many``) and pipelined (``Evaluator.score_chunks``: a chunk a module, each
    module assembling in a thread while the next chunk is made), side by side in this run,
    with nothing cached (templates with ``cache=False``). ``--options`` adds nvJitLink option
    sets: assembly core time and the SASS instructions of the modules (nvdisasm).

    Projection to ``--cores`` cores (C), per child made, from the single-threaded costs
    measured here: G = making a child and its key (every child), u = the share of children
    that are new (deduplication leaves the rest unbuilt, measured in the generation's build),
    then per new candidate Ss = stub and packing (Python), Sh = the constant-patch shape
    (Python, sequential path only: the pipeline's template does not patch) and A = nvJitLink
    core time; P = candidates a module, N = the children of a generation. All Python runs
    under one GIL, whichever thread runs it. Sequential: Python and assembly take turns,
    G + u (Ss + Sh) + u A / C. Pipelined: they overlap, this thread making children while
    the other cores assemble, max(G + u Ss, u A / (C - 1)), plus the last module's assembly,
    which nothing overlaps, A P / N. Children/s is the inverse; candidates (new, evaluated)/s
    is u times that. Launches, module loads, copies back and constant fitting are in
    neither, so the end-to-end figure on a GPU is lower."""
    import os
    import numptx as nx
    from numptx import stack_ptx as sp
    from numptx.jit.fitness import fitness_template
    from numptx.jit.nvjitlink import ptx_to_cubin
    from numptx.jit.pack import pack
    from numptx.search import operators as O
    from numptx.search.formula import canonical_keys
    from numptx.search.genes import Genes
    g, rng, n = Genes(args.ops, 2), np.random.default_rng(0), args.population
    pop = [O.random_program(g, rng, (2, 12)) for _ in range(n)]
    base = fitness_template(2, None, "f32", "mse", "sm_90")

    def fresh_template(patch: bool = True):
        # the fitness kernel's PTX in a template of its own: nothing cached, no plans shared
        return nx.Template(base.ptx, entry=base.entry, arch=base.arch, cache=False,
                           patch_constants=patch)
    per = args.per_module or int(min(256, max(16, -(-n // (2 * args.cores)))))
    t = time.perf_counter()
    kids = _children(g, pop, rng, n)
    t_gen = time.perf_counter() - t
    t = time.perf_counter()
    canonical_keys(kids, g)
    t_key = time.perf_counter() - t
    t = time.perf_counter()
    stubs = list(sp.compile_many(kids, site=base.sites["f"]))
    t_stub = time.perf_counter() - t
    tmpl = fresh_template()
    mods = [stubs[i:i + per] for i in range(0, n, per)]
    t = time.perf_counter()
    packs = [pack(tmpl, "f", m, select="cand", offset=i * per) for i, m in enumerate(mods)]
    ptxs = [p.ptx for p in packs]
    t_pack = time.perf_counter() - t
    t = time.perf_counter()
    for p in packs:
        tmpl.split(p.variant.stubs)
    t_shape = time.perf_counter() - t
    t = time.process_time()
    for x in ptxs:
        ptx_to_cubin(x, base.arch)
    t_link = time.process_time() - t               # one thread: its CPU time is core time
    cores = len(os.sched_getaffinity(0))
    print(f"\n### Steps, per candidate ({n} candidates, modules of {per}, one thread)\n")
    print("| step | per candidate |\n|---|---|")
    for name, sec in (("make a child (crossover, mutation)", t_gen),
                      ("canonical key (dedup)", t_key), ("stub", t_stub),
                      ("pack a module (packed stub, PTX)", t_pack),
                      ("constant-patch shape of a module (patching on)", t_shape)):
        print(f"| {name} | {sec / n * 1e6:.1f} us |")
    print(f"| assemble packed modules (nvJitLink), core time | {t_link / n * 1e3:.3f} ms |")

    G, Ss, Sh, A, C = (t_gen + t_key) / n, (t_stub + t_pack) / n, t_shape / n, t_link / n, \
        args.cores
    print(f"\n### One generation's build: {n} children, modules of {per}, nothing cached "
          f"({cores} cores here)\n")
    print(f"| build | wall here | per child here | new candidates | projected on {C} cores: "
          f"children/s, new candidates/s |")
    print("|---|---|---|---|---|")
    rows = (("sequential: all children, then one pack_many (patching on)", False, True),
            ("sequential, patching off", False, False),
            ("pipelined: a chunk a module (patching off)", True, False))
    for name, pipelined, patch in rows:
        wall, got = _generation(g, pop, fresh_template(patch), n, per, pipelined)
        u = got / n
        if pipelined:
            proj = max(G + u * Ss, u * A / (C - 1)) + A * per / n
        else:
            proj = G + u * (Ss + (Sh if patch else 0.0)) + u * A / C
        print(f"| {name} | {wall:.2f} s | {wall / n * 1e6:.0f} us | {got} ({100 * u:.0f} %) | "
              f"{proj * 1e6:.0f} us: {1 / proj:,.0f}, {u / proj:,.0f} |")
    print(f"\nG = {G * 1e6:.1f} us, Ss = {Ss * 1e6:.1f} us, Sh = {Sh * 1e6:.1f} us, "
          f"A = {A * 1e3:.3f} ms, P = {per}, N = {n}")
    if args.options:
        _options(ptxs[:4], base.arch, sum(len(m) for m in mods[:4]))


def _options(ptxs: list, arch: str, n: int) -> None:
    """nvJitLink option sets on the same modules: core time and SASS instructions."""
    from numptx.jit.nvjitlink import ptx_to_cubin
    from numptx.jit.sass import ToolMissingError, sass_instructions
    sets = [(), ("-Xptxas=-O2",), ("-Xptxas=-O1",), ("-Xptxas=-O0",), ("-O0",)]
    best = {o: float("inf") for o in sets}
    count = {}
    for rep in range(3):                  # interleaved, best of 3: the machine is shared
        for o in sets:
            t = time.process_time()
            cubins = [ptx_to_cubin(x, arch, options=o) for x in ptxs]
            best[o] = min(best[o], time.process_time() - t)
            if rep == 0:
                try:
                    count[o] = sum(len(sass_instructions(c)) for c in cubins)
                except ToolMissingError:         # no nvdisasm: times only
                    count[o] = 0
    print(f"\n### nvJitLink options ({len(ptxs)} modules, {n} candidates, best of 3)\n")
    print("| options | assembly core time per candidate | SASS instructions |\n|---|---|---|")
    for o in sets:
        sass = f"{count[o]:,} ({count[o] / count[()]:.2f}x)" if count[()] else "no nvdisasm"
        print(f"| {' '.join(o) or '(default: -O3)'} | {best[o] / n * 1e3:.3f} ms "
              f"({100 * (best[o] / best[()] - 1):+.0f} %) | {sass} |")


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
    ap.add_argument("--no-pipeline", dest="pipeline", action="store_false",
                    help="GPU: make every child, then build in one batch (the old path)")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--stages", action="store_true",
                    help="per-candidate cost of each step of a GPU generation, and one "
                         "generation's build sequential and pipelined (no GPU needed)")
    ap.add_argument("--cores", type=int, default=16,
                    help="with --stages: the cores the projection is for (default 16)")
    ap.add_argument("--per-module", type=int, default=None,
                    help="with --stages: candidates a module (default: what the evaluator "
                         "picks for --population on --cores cores)")
    ap.add_argument("--options", action="store_true",
                    help="with --stages: time nvJitLink option sets and count SASS")
    args = ap.parse_args()
    args.points = args.points or (20000 if args.gpu else 400)
    args.restart = args.restart or None
    if args.stages:
        args.population = args.population or 4096
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
