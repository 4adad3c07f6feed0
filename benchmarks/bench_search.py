"""The search loop (issue 15): candidates per second end to end, and time to solve benchmarks.

- **throughput**: ``search.regress`` on Pagie-1 (``--points`` samples, ``--population``,
  ``--generations``): the headline is candidates *evaluated* per second end to end (programs
  scored after dedup, constant-fit trials included, over the wall time of the run, which
  covers generate, dedup, stub, pack, build, evaluate, fit, select); children made per second
  (every child, scored or deduplicated) is reported beside it, with the time per stage. On the
  CPU (the emulator) by default, on the GPU with ``--gpu`` (pipelined: modules assemble while
  the next children are made; ``--no-pipeline`` for the one-batch path, to compare).
- **stages** (``--stages``, no GPU needed): one generation of a warm search (``--warm`` CPU
  generations of Pagie-1) made the old way (the operators) and by the breeder with ``revary``
  0, 1, 2, 4, side by side from the same parents: making, keying, the share new; then each
  step of its GPU build timed on the CPU, projected to ``--cores`` (see :func:`stages` for the
  formula); ``--options`` adds nvJitLink option sets.
- **solving** (``--nguyen``): Nguyen-1..7 (and Pagie-1 with ``--pagie``) with seeds 0..9:
  solved (loss < 1e-6) or not within ``--time-cap`` seconds, the generations and the time.
- **against Operon** (``--compare``, issue 23): Nguyen-1..8, Keijzer-4/11/12 and six
  AI-Feynman equations, numptx's CPU search (``evaluate="interpret"``) and Operon
  (``pyoperon``, an optional extra: skipped with a message when absent) alternating run by run
  on the same data: solved runs (test R² > 0.999999), median time to solve, evaluations/s.
  The issue's protocol is ``--seeds 0 1 2 3 4 --time-cap 60`` (the default); the problems,
  the data and the runners are in ``benchmarks/sr_compare.py``.

::

    python benchmarks/bench_search.py                       # CPU throughput, small Pagie-1
    python benchmarks/bench_search.py --gpu --points 20000 --population 4096 --generations 20
    python benchmarks/bench_search.py --nguyen --problems 1 2 3 4 --seeds 0 1 2 --time-cap 60
    python benchmarks/bench_search.py --gpu --points 20000 --population 4096 --no-pipeline
    python benchmarks/bench_search.py --stages --options      # where a GPU generation's time goes
    python benchmarks/bench_search.py --nguyen --problems 1 2 --revary 0   # duplicates kept
    python benchmarks/bench_search.py --compare --seeds 0 1 --time-cap 10 --json runs.json
    python benchmarks/bench_search.py --compare --problems Nguyen-1 Feynman --seeds 0

Prints markdown tables. Targets (issue 15): >= 20,000 candidates/s end to end for Pagie-1 with
20,000 points on a 16-core GPU machine; Nguyen-1..4 solved in under 60 s each for most seeds on
the 2-core CPU.
"""
from __future__ import annotations

import argparse
import json
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
                       seed=0, device=device, progress=args.progress, pipeline=args.pipeline,
                       **_revary(args))
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


def _revary(args) -> dict:
    """``revary=`` when given (the library's default otherwise)."""
    return {} if args.revary is None else {"revary": args.revary}


def solve(args) -> None:
    device = "gpu" if args.gpu else "cpu"
    cases = [(f"Nguyen-{k}", lambda s, k=k: nguyen(k, s)) for k in map(int, args.problems)]
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
                               device=device, parsimony=args.parsimony, restart=args.restart,
                               **_revary(args))
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


def _old_children(g, cfg, rng, pa, pb) -> list:
    """The children the loop made before the breeder (numptx.search.operators, as its
    child_chunks called them): the old code path, for side-by-side timings."""
    from numptx.search import operators as O
    coins = rng.random((len(pa), 2))
    out = []
    for a, b, (c0, c1) in zip(pa, pb, coins):
        if c0 < cfg.crossover:
            child = O.crossover(a, b, rng, max_length=cfg.max_length, genes=g)
            if c1 < cfg.mutation:
                child = O.mutate(child, g, rng, max_length=cfg.max_length)
        else:
            child = O.mutate(a, g, rng, max_length=cfg.max_length)
        out.append(child)
    return out


def _warm_search(n: int, generations: int):
    """A search after ``generations`` CPU generations of Pagie-1 (200 points, population
    ``n``, no constant fitting): its population, score cache and breeder are what a
    generation of a run starts from, which a random population is not (its children are
    rarely duplicates)."""
    X, y = pagie(200, np.random.default_rng(0))
    return search.regress(X, y, OPS, population=n, generations=generations, seed=0,
                          device="cpu", fit_top=0)._search


def _make(s, variant: str, pa: list, pb: list, per: int) -> tuple[list, float, float, int]:
    """One generation's children of ``s`` (a warm search) by ``variant`` (``old`` or
    ``revary=k``), from the same parents and random state each time: (the new programs, in
    order; seconds making; seconds keying; children)."""
    import copy
    import gc
    from numptx.search.formula import canonical_keys
    rng = np.random.default_rng(7)
    scored = s.cache
    gc.collect()          # each way starts with a collected heap (a full collection of the warm
    #                       search's objects, ~30 ms, would land on whichever way runs first)
    if variant == "old":
        t = time.perf_counter()
        kids = _old_children(s.genes, s.cfg, rng, pa, pb)
        t_make = time.perf_counter() - t
        t = time.perf_counter()
        keys = [k for i in range(0, len(kids), per) for k in canonical_keys(kids[i:i + per],
                                                                            s.genes)]
        t_key = time.perf_counter() - t
    else:
        b = copy.copy(s.breeder)              # its parents' splits, as the loop has them
        b.revary, b.split = int(variant.split("=")[1]), dict(s.breeder.split)
        keyed = [0.0]
        kids, keys = [], []
        t = time.perf_counter()
        for progs, ks in b.children(rng, pa, pb, size=per, scored=scored,
                                    on_keys=lambda sec: keyed.__setitem__(0, keyed[0] + sec)):
            kids += progs
            keys += ks
        t_key = keyed[0]
        t_make = time.perf_counter() - t - t_key
    seen, new = set(), []
    for p, k in zip(kids, keys):
        if k not in scored and k not in seen:
            seen.add(k)
            new.append(p)
    return new, t_make, t_key, len(kids)


def _build(tmpl, new: list, per: int) -> float:
    """Pipelined build of ``new`` (compiled, packed, assembled in threads), as
    ``Evaluator.score_chunks`` does it: wall seconds."""
    from numptx import stack_ptx as sp
    from numptx.search.pipeline import PackPipeline
    site = tmpl.sites["f"]
    t0 = time.perf_counter()
    packs = []
    with PackPipeline(tmpl, "f", select="cand", per_module=per) as pipe:
        for i in range(0, len(new), per):
            pipe.add(sp.compile_many(new[i:i + per], site=site))
            packs.extend(pipe.ready())
        packs.extend(pipe.finish())
    assert sum(len(p) for p in packs) == len(new) and all(p.empty or p.cubin for p in packs)
    return time.perf_counter() - t0


def stages(args) -> None:
    """Per-candidate costs of the steps a GPU generation takes, without a GPU, and what they
    project to on ``--cores`` cores.

    The generation is a real one: a Pagie-1 search runs ``--warm`` generations on the CPU
    (population ``--population``), then one generation's parents are drawn by tournament, as
    the loop draws them, and its children made from them several ways, side by side in this
    run, from the same parents and random state: ``old`` (the operators module, as the loop
    made children before the breeder) and the breeder (:mod:`numptx.search.breed`) with
    ``revary`` 0, 1 (the default), 2 and 4 (a duplicate mutated again, at a gene that feeds
    the output, up to that many times).
    For each (after a full garbage collection): making the children (with revary, the
    retries' mutations too), their canonical keys (dedup; the retries' keys too) and the
    share of children that are new (not scored before, not made earlier in the generation).
    Then, on the default's new programs, with nothing cached (templates with
    ``cache=False``): the stub, packing a module (Python: packed stub, PTX) and assembling
    the modules of the fitness kernel (nvJitLink, core time: the GPU path's build); and the
    pipelined build (``Evaluator.score_chunks``: modules assemble in threads while the next
    chunk is made) of the old and the default ways' new programs, wall time here.
    ``--options`` adds nvJitLink option sets.

    Projection to ``--cores`` cores (C), per child, from the single-threaded costs measured
    here: G = making a child and keying it (retries included), u = the share of children
    that are new; per new candidate Ss = stub and packing (Python) and A = nvJitLink core
    time; P = candidates a module, N = the children of a generation. All Python runs under
    one GIL, whichever thread runs it. Pipelined, Python and assembly overlap, this thread
    making children while the other cores assemble: max(G + u Ss, u A / (C - 1)), plus the
    last module's assembly, which nothing overlaps, A P / N. Children/s is the inverse;
    candidates (new, evaluated)/s is u times that. The loop tapers the last two modules' worth
    of a generation to modules of P / 4 (``PackPipeline(taper_at=...)``); a formula cannot
    say what that leaves (the last full module may still be assembling, small modules queue
    behind full ones), so the "simulated" column runs the schedule: the modules cut as the
    loop cuts them, each sent when the main thread has made its candidates (G + u Ss per
    child), assembled by C - 1 workers in order, a module of k candidates taking F + a k core
    time (F, a fitted to A P and T, the measured core time of one module of P / 4). Launches, module loads, copies back,
    selection and constant fitting are in neither, so the end-to-end figure on a GPU is
    lower."""
    import os
    import numptx as nx
    from numptx import stack_ptx as sp
    from numptx.jit.populations.fitness import fitness_template
    from numptx.jit.compile.nvjitlink import ptx_to_cubin
    from numptx.jit.populations.pack import pack
    n = args.population
    t = time.perf_counter()
    s = _warm_search(n, args.warm)
    t_warm = time.perf_counter() - t
    base = fitness_template(2, None, "f32", "mse", "sm_90")

    def fresh_template():
        # the fitness kernel's PTX in a template of its own: nothing cached, no plans shared;
        # no constant patching, as the evaluator's pipeline packs
        return nx.Template(base.ptx, entry=base.entry, arch=base.arch, cache=False,
                           patch_constants=False)
    per = args.per_module or int(min(256, max(16, -(-n // (2 * args.cores)))))
    # the loop's selection: tournaments on the loss (no parsimony), elites aside
    pop, cfg = s.population, s.cfg
    n_child = n - cfg.elitism
    fit = np.array([c.loss for c in pop])
    idx = np.random.default_rng(3).integers(0, len(pop), size=(2 * n_child, cfg.tournament))
    win = idx[np.arange(2 * n_child), np.argmin(fit[idx], axis=1)].tolist()
    pa, pb = [pop[i].program for i in win[:n_child]], [pop[i].program for i in win[n_child:]]
    variants = ["old", "revary=0", "revary=1", "revary=2", "revary=4"]
    made = {v: _make(s, v, pa, pb, per) for v in variants}
    new = made["revary=1"][0]
    m = min(len(new), 1024)                         # enough for the per-candidate costs
    t = time.perf_counter()
    stubs = list(sp.compile_many(new[:m], site=base.sites["f"]))
    t_stub = time.perf_counter() - t
    tmpl = fresh_template()
    mods = [stubs[i:i + per] for i in range(0, m, per)]
    t = time.perf_counter()
    packs = [pack(tmpl, "f", md, select="cand", offset=i * per) for i, md in enumerate(mods)]
    ptxs = [p.ptx for p in packs]
    t_pack = time.perf_counter() - t
    t = time.process_time()
    for x in ptxs:
        ptx_to_cubin(x, base.arch)
    t_link = time.process_time() - t               # one thread: its CPU time is core time
    small = max(16, per // 4)                      # the loop's tapered modules
    small_ptx = pack(fresh_template(), "f", stubs[:small], select="cand").ptx
    t = time.process_time()
    ptx_to_cubin(small_ptx, base.arch)
    T = time.process_time() - t
    cores = len(os.sched_getaffinity(0))
    Ss, A, C = (t_stub + t_pack) / m, t_link / m, args.cores
    print(f"\n### One generation's children, per child (population {n} after {args.warm} "
          f"CPU generations of Pagie-1 ({t_warm:.0f} s); {n_child} children, one thread)\n")
    print(f"| children made by | make a child (with retries) | keys (with retries') | "
          f"G = make + keys | new "
          f"(share u) | G / u (Python per new) | projected on {C} cores: children/s, "
          f"new candidates/s | simulated, tapered |")
    print("|---|---|---|---|---|---|---|---|")
    for v in variants:
        kids_new, t_make, t_key, kids = made[v]
        G, u = (t_make + t_key) / kids, len(kids_new) / kids
        proj = max(G + u * Ss, u * A / (C - 1)) + A * per / kids
        taper = _simulate(kids, len(kids_new), G + u * Ss, A, T, per, small, C) / kids
        name = "operators (before)" if v == "old" else f"breeder, {v}" + \
            (" (default)" if v == "revary=1" else "")
        print(f"| {name} | {t_make / kids * 1e6:.1f} us | {t_key / kids * 1e6:.1f} us | "
              f"{G * 1e6:.1f} us | {len(kids_new)} ({100 * u:.0f} %) | {G / u * 1e6:.1f} us | "
              f"{proj * 1e6:.0f} us: {1 / proj:,.0f}, {u / proj:,.0f} | "
              f"{taper * 1e6:.0f} us: {1 / taper:,.0f}, {u / taper:,.0f} |")
    print(f"\n### Per new candidate ({m} of the default's, modules of {per}, nothing "
          f"cached)\n")
    print("| step | per candidate |\n|---|---|")
    print(f"| stub | {t_stub / m * 1e6:.1f} us |")
    print(f"| pack a module (packed stub, PTX) | {t_pack / m * 1e6:.1f} us |")
    print(f"| assemble packed modules (nvJitLink), core time | {A * 1e3:.3f} ms |")
    print(f"| one tapered module of {small} (nvJitLink), core time | T = {T * 1e3:.1f} ms "
          f"({T / small * 1e3:.3f} ms a candidate) |")
    print(f"\nSs = {Ss * 1e6:.1f} us, A = {A * 1e3:.3f} ms, P = {per}, N = {n_child}, "
          f"C = {C}")
    print(f"\n### Pipelined build of the new programs ({cores} cores here)\n")
    print("| children made by | new candidates | wall here (build only) |\n|---|---|---|")
    for v in ("old", "revary=1"):
        kids_new = made[v][0]
        print(f"| {v} | {len(kids_new)} | {_build(fresh_template(), kids_new, per):.2f} s |")
    if args.options:
        _options(ptxs[:4], base.arch, sum(len(md) for md in mods[:4]))


def _simulate(kids: int, new: int, per_child: float, A: float, T: float, per: int,
              small: int, C: int) -> float:
    """Seconds for one pipelined generation's build on C cores: the main thread makes the
    ``kids`` children (``per_child`` each, ``new`` of them new) and sends each module when its
    candidates are made, cut as the loop cuts them (modules of ``per``; from ``new - 2 per``
    on, and the last one, modules of ``small``); C - 1 workers assemble them in order, a module
    of k candidates taking F + a k (fitted: F + a per = A per, F + a small = T)."""
    import heapq
    a = (A * per - T) / (per - small)
    F = T - a * small
    per_new = per_child * kids / max(1, new)
    sizes, sent, taper = [], 0, max(0, new - 2 * per)
    while new - sent >= (size := small if sent >= taper else per):
        sizes.append(size)
        sent += size
    sizes += [min(small, new - i) for i in range(sent, new, small)]
    workers = [0.0] * (C - 1)
    end, made = kids * per_child, 0
    for k in sizes:
        made += k
        start = max(made * per_new, heapq.heappop(workers))
        heapq.heappush(workers, start + F + a * k)
        end = max(end, start + F + a * k)
    return end


def _options(ptxs: list, arch: str, n: int) -> None:
    """nvJitLink option sets on the same modules: core time and SASS instructions."""
    from numptx.jit.compile.nvjitlink import ptx_to_cubin
    from numptx.jit.compile.sass import ToolMissingError, sass_instructions
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


def _positive(text: str) -> int:
    """argparse type: a positive int."""
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive int")
    return v


def _json_object(text: str) -> dict:
    """--numptx-args: a JSON object of more ``search.regress`` arguments, else a usage error."""
    try:
        v = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not JSON ({e}); give an object, e.g. "
                                         f"'{{\"fit_steps\": 16}}'") from None
    if not isinstance(v, dict):
        raise argparse.ArgumentTypeError(f"a JSON {type(v).__name__}; give an object of "
                                         f"regress arguments, e.g. '{{\"fit_steps\": 16}}'")
    return v


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
    ap.add_argument("--problems", nargs="+", default=None,
                    help="--nguyen: numbers (default 1..7); --compare: names or prefixes "
                         "(Nguyen-1, Keijzer, Feynman; default all 17)")
    ap.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="default: 0..9 (--nguyen), 0..4 (--compare)")
    ap.add_argument("--time-cap", type=float, default=60.0)
    ap.add_argument("--target", type=float, default=1e-6)
    ap.add_argument("--parsimony", type=float, default=0.0)
    ap.add_argument("--restart", type=int, default=20,
                    help="generations without progress before a fresh population (0: never)")
    ap.add_argument("--ops", nargs="+", default=OPS,
                    help=f"the op set of --nguyen (default: {' '.join(OPS)})")
    ap.add_argument("--revary", type=int, default=None,
                    help="mutations of a duplicate child before it is kept (default: the "
                         "library's, 1)")
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
    ap.add_argument("--warm", type=int, default=5,
                    help="with --stages: CPU generations before the measured one (default 5)")
    ap.add_argument("--per-module", type=int, default=None,
                    help="with --stages: candidates a module (default: what the evaluator "
                         "picks for --population on --cores cores)")
    ap.add_argument("--options", action="store_true",
                    help="with --stages: time nvJitLink option sets and count SASS")
    ap.add_argument("--compare", action="store_true",
                    help="numptx against Operon (pyoperon) on 17 problems (issue 23)")
    ap.add_argument("--evaluate", default="interpret", choices=["interpret", "compile"],
                    help="with --compare: how numptx scores on the CPU (compile: the emulator)")
    ap.add_argument("--operon-local", type=int, default=5,
                    help="with --compare: Operon's local search (LM) iterations (default 5)")
    ap.add_argument("--pin", type=int, default=1,
                    help="with --compare: CPUs the process is pinned to, so that both engines "
                         "run on one core (default 1; 0: not pinned)")
    ap.add_argument("--engines", nargs="+", default=["numptx", "Operon"],
                    choices=["numptx", "Operon"], help="with --compare: the engines to run")
    ap.add_argument("--numptx-args", default=None, metavar="JSON", type=_json_object,
                    help="with --compare: more search.regress arguments for a probe, e.g. "
                         "'{\"fit_steps\": 16}' (the table is then not the issue's protocol)")
    ap.add_argument("--operon-population", type=_positive, default=None,
                    help="with --compare: Operon's population (default: --population)")
    ap.add_argument("--json", default=None, help="with --compare: write every run here")
    ap.add_argument("--replay", default=None, metavar="JSON",
                    help="with --compare: print the tables of runs saved by --json, run nothing")
    args = ap.parse_args()
    args.points = args.points or (20000 if args.gpu else 400)
    args.restart = args.restart or None
    if args.stages:
        args.population = args.population or 4096
        stages(args)
    elif args.compare and args.replay:
        import sr_compare
        sr_compare.replay(args.replay)
    elif args.compare:
        import sr_compare
        sr_compare.compare(sr_compare.pick(args.problems), args.seeds or list(range(5)),
                           ops=args.ops, population=args.population or 500,
                           time_cap=args.time_cap, evaluate=args.evaluate,
                           operon_local=args.operon_local, cpus=args.pin, json_path=args.json,
                           engines=args.engines,
                           numptx_args=args.numptx_args,
                           operon_population=args.operon_population)
    elif args.nguyen:
        args.problems = args.problems or list(range(1, 8))
        args.seeds = args.seeds if args.seeds is not None else list(range(10))
        args.population = args.population or (4096 if args.gpu else 500)
        solve(args)
    else:
        args.population = args.population or (4096 if args.gpu else 500)
        args.generations = args.generations or (10 if args.gpu else 5)
        throughput(args)


if __name__ == "__main__":
    main()
