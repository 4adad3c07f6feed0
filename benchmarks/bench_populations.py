"""Populations: candidates per second per core, packed against separate variants.

- packs of random 32-instruction Stack PTX programs (stubs + render + nvJitLink), one thread,
  against ``build_many`` of the same programs as separate variants (one thread), side by side;
- the cost per candidate as a function of ``per_module`` (64 ... 4096);
- jump table (``brx.idx``, what numptx emits) against a binary branch tree, same candidates;
- the host cost of a launch: on a CPU the argument preparation alone
  (``python benchmarks/bench_launch.py``), on a GPU the whole launch;
- ``nx.fitness``'s preparation (its checks of each candidate, ``numptx.jit.populations.fitness.prepare``)
  for 4096 candidates of each kind, CPU time, against ``pack_many`` of the same PTX texts.

- ``--layouts``: programs/s per core (CPU time of stubs + render + nvJitLink, one thread) by
  module layout (one jump-table function against kernels of 128, ``layout="kernels"``) and by
  build mode (``build="full"`` against ``"fast"``, -Ofc=max), at 256 and 2048 candidates a
  module, with the SASS instructions per candidate each build gives (the run-time side of the
  fast build where no GPU is lent: ``sass_instructions`` of every kernel, over the candidates);
- ``--counted``: the same comparison as counted work, load-independent: x86 instructions
  (valgrind's cachegrind, ``I refs``) of one pack build in a child process, less a child that
  does all but the assembly (interpreter, NVRTC, stubs);
- ``--farm``: the bytes sent per task to Dask workers and the scaling with 1 and 2 worker
  processes (``numptx.jit.compile.farm``; see that function).
- ``--search``: the search's own GPU modules (``Evaluator.packs``: the fitness kernel, 256
  candidates a module as kernels of 128) of a population an evolved ``search.regress`` run
  holds and of random initial programs of three op sets, at ``build="full"`` and
  ``"fast"``: CPU time per candidate (one thread) and SASS instructions per candidate, the
  kernel cost of the screening build where no GPU is lent (what ``build="auto"`` is set
  by: ``numptx.search.config.AUTO_BUILD``).

    python benchmarks/bench_populations.py [--n 2048] [--separate 64] [--fitness-only]
    python benchmarks/bench_populations.py --layouts [--repeat 3]
    python benchmarks/bench_populations.py --counted      # valgrind: x86 instructions, ~15 min
    python benchmarks/bench_populations.py --farm
    python benchmarks/bench_populations.py --search [--repeat 3]

Programs/s per core are measured on one thread (``max_workers=1``): core-seconds per
candidate is what the target is about, and this 2-core machine is shared.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time

import numptx as nx
from numptx import stack_ptx as sp
from numptx.jit.populations.pack import Population

FIT = r'''
extern "C" __global__ void fit(float* err, const float* X, const float* Y, int n) {
    unsigned cand = blockIdx.y;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float e = 0.0f;
    if (i < n) {
        float x = X[i], y;
        PTX_INJECT("f", PTX_IN(U32, cand), PTX_IN(F32, x), PTX_OUT(F32, y));
        float d = y - Y[i];
        e = d * d;
    }
    for (int o = 16; o > 0; o >>= 1) e += __shfl_down_sync(0xffffffffu, e, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(&err[cand], e);
}'''

_BIN = ["add.rn.f32", "sub.rn.f32", "mul.rn.f32", "min.f32", "max.f32"]
# unary rows: single instructions on the GPU (sqrt.rn / div.rn expand to subroutines that
# ptxas compiles per call site: a program of those costs several times more to assemble)
_UN = ["abs.f32", "neg.f32", "ex2.approx.ftz.f32", "sin.approx.ftz.f32", "lg2.approx.ftz.f32"]


def chain(seed: int, n_instr: int = 32) -> list:
    """A random Stack PTX program of ``n_instr`` instructions over x whose every instruction
    feeds the result (each takes the running value), so none is dead."""
    r = random.Random(seed)
    p = [sp.input("x")]
    for _ in range(n_instr):
        k = r.random()
        if k < 0.55:
            p += [sp.input("x") if r.random() < 0.5 else sp.const(r.uniform(-2, 2), "f32"),
                  sp.instr(r.choice(_BIN))]
        elif k < 0.8:
            p += [sp.const(r.uniform(-2, 2), "f32"), sp.input("x"), sp.instr("fma.rn.f32")]
        else:
            p.append(sp.instr(r.choice(_UN)))
    return p


def random_program(seed: int, n_instr: int = 32) -> list:
    """A random Stack PTX program as mm-ptx's packed benchmark makes them: 32 instructions
    drawn at random, each popping its operands from the stack (inputs and constants pushed
    when it runs short); values left under the top are dead and the compiler drops them."""
    r = random.Random(seed)
    p, depth, n = [], 0, 0
    rows = [(b, 2) for b in _BIN] + [(u, 1) for u in _UN] + [("fma.rn.f32", 3)]
    while n < n_instr:
        name, arity = r.choice(rows)
        while depth < arity or r.random() < 0.3:
            p.append(sp.input("x") if r.random() < 0.5 else sp.const(r.uniform(-2, 2), "f32"))
            depth += 1
        p.append(sp.instr(name))
        depth -= arity - 1
        n += 1
    return p


def _tree(site, select: str, texts: list[str]) -> str:
    """The same population as a binary branch tree over the selector (for comparison)."""
    out = ["{", ".reg .pred %__t;", ".reg .u32 %__i;", f"mov.b32 %__i, %{site[select].reg};",
           f"setp.ge.u32 %__t, %__i, {len(texts)};", "@%__t bra $__T_end;"]
    count = [0]

    def node(lo: int, hi: int) -> None:
        if hi - lo == 1:
            out.extend(["{", texts[lo], "}", "bra.uni $__T_end;"])
            return
        mid = (lo + hi) // 2
        count[0] += 1
        right = f"$__T_r{count[0]}"
        out.extend([f"setp.ge.u32 %__t, %__i, {mid};", f"@%__t bra {right};"])
        node(lo, mid)
        out.append(f"{right}:")
        node(mid, hi)
    node(0, len(texts))
    out += ["$__T_end:", "}"]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2048, help="programs per pack")
    ap.add_argument("--separate", type=int, default=64,
                    help="programs built as separate variants (the per-candidate cost is flat)")
    ap.add_argument("--sweep", default="64,128,256,512,1024,2048,4096")
    ap.add_argument("--fitness-only", action="store_true",
                    help="only nx.fitness's preparation (4096 candidates of each kind)")
    ap.add_argument("--layouts", action="store_true",
                    help="only programs/s per core by pack layout and build mode")
    ap.add_argument("--farm", action="store_true",
                    help="only bytes per task and scaling with Dask worker processes")
    ap.add_argument("--search", action="store_true",
                    help="only the search's modules: full against fast build (time, SASS)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--counted", action="store_true",
                    help="x86 instructions of each layout and build under valgrind")
    ap.add_argument("--pack-once", nargs=4, metavar=("N", "LAYOUT", "BUILD", "ASSEMBLE"),
                    help="(for --counted) build one pack and exit")
    args = ap.parse_args()
    if args.pack_once:
        n, layout, build, assemble = args.pack_once
        tmpl = nx.CudaTemplate(FIT, entry="fit", cache=False)
        p = tmpl.pack("f", [random_program(s) for s in range(int(n))], select="cand",
                      layout=layout, build=build)
        p.population.texts(tmpl.sites["f"])
        if assemble == "yes":
            p.cubin
        return None
    if args.counted:
        return counted()
    if args.fitness_only:
        return fitness_preparation()
    if args.layouts:
        return layouts(args.repeat)
    if args.farm:
        return farm()
    if args.search:
        return search_modules(args.repeat)

    tmpl = nx.CudaTemplate(FIT, entry="fit", cache=False)
    site = tmpl.sites["f"]
    n_max = max(args.n, max(map(int, args.sweep.split(","))))
    families = {"random (mm-ptx style)": [random_program(s) for s in range(n_max)],
                "chain (every instruction live)": [chain(s) for s in range(args.n)]}

    def packed(progs: list, n: int) -> float:
        t0 = time.perf_counter()
        tmpl.pack("f", progs[:n], select="cand").cubin
        return (time.perf_counter() - t0) / n

    print(f"{'case':52s} {'n':>5s} {'per candidate':>14s} {'programs/s/core':>16s}")
    for fam, progs in families.items():
        live = sum(sp.compile(p, site=site).count(";") for p in progs[:64]) / 64
        sep = progs[:args.separate]
        t = time.perf_counter()
        tmpl.build_many([{"f": p} for p in sep], max_workers=1)
        per_sep = (time.perf_counter() - t) / len(sep)
        per_pack = min(packed(progs, args.n) for _ in range(2))
        print(f"{fam}: {live:.0f} PTX statements per stub on average")
        for name, n, per in (("  separate variants (build_many, 1 thread)", len(sep), per_sep),
                             (f"  packed, per_module={args.n} (1 thread)", args.n, per_pack)):
            print(f"{name:52s} {n:5d} {per * 1e3:11.3f} ms {1 / per:16.0f}")
        print(f"{'  core-seconds per candidate, separate / packed':52s} "
              f"{per_sep / per_pack:22.1f}x   (target >= 30x)")
        print(f"{'  packed programs/s per core':52s} {1 / per_pack:22.0f}    "
              f"(target >= 5000; mm-ptx 3170)")
    progs = families["random (mm-ptx style)"]

    print("\nper_module sweep, random programs (one pack of each size, 1 thread):")
    best = None
    for n in map(int, args.sweep.split(",")):
        per = packed(progs, n)
        best = (per, n) if best is None or per < best[0] else best
        print(f"  per_module={n:5d}: {per * 1e6:8.1f} us per candidate, {1 / per:8.0f} programs/s")
    print(f"  best: per_module={best[1]}")

    print("\njump table (brx.idx) vs branch tree, same candidates, nvJitLink only:")
    texts = Population(progs[:args.n], "cand").texts(site)
    from numptx.jit.populations.pack import dispatch_text
    for name, stub in (("jump table", dispatch_text(site, "cand", texts)),
                       ("branch tree", _tree(site, "cand", texts))):
        ptx = tmpl.render([stub])
        t = time.perf_counter()
        nx.ptx_to_cubin(ptx, tmpl.arch)
        print(f"  {name:12s}: {(time.perf_counter() - t) * 1e3:8.1f} ms for {args.n}")

    print("\nlaunch host cost: see python benchmarks/bench_launch.py (argument preparation on a "
          "CPU; whole launches on a GPU)")
    fitness_preparation()


def layouts(repeats: int = 3, sizes: tuple[int, ...] = (256, 2048)) -> None:
    """CPU time per candidate (``time.process_time``: this process's cores, nvJitLink
    included; best of ``repeats``, the four builds interleaved) of ``tmpl.pack(...).cubin``
    for random mm-ptx-style programs, by layout and build mode; SASS instructions per
    candidate of each build."""
    from numptx.jit.compile.sass import sass_instructions
    tmpl = nx.CudaTemplate(FIT, entry="fit", cache=False)
    progs = [random_program(s) for s in range(max(sizes))]
    modes = [("function", "full"), ("kernels", "full"), ("function", "fast"), ("kernels", "fast")]
    print(f"{'candidates':>10s} {'layout':>9s} {'build':>5s} {'us/candidate':>13s} "
          f"{'programs/s/core':>16s} {'vs function/full':>17s} {'SASS/candidate':>15s}")
    for n in sizes:
        best: dict = {}
        sass: dict = {}
        for _ in range(repeats):
            for layout, build in modes:
                t = time.process_time()
                p = tmpl.pack("f", progs[:n], select="cand", layout=layout, build=build)
                cubin = p.cubin
                per = (time.process_time() - t) / n
                best[layout, build] = min(per, best.get((layout, build), per))
                if (layout, build) not in sass:
                    sass[layout, build] = sum(len(sass_instructions(cubin, k.entry))
                                              for k in p.kernels) / n
        base = best["function", "full"]
        for layout, build in modes:
            per = best[layout, build]
            print(f"{n:10d} {layout:>9s} {build:>5s} {per * 1e6:13.1f} {1 / per:16.0f} "
                  f"{base / per:16.2f}x {sass[layout, build]:15.1f}")


def search_modules(repeats: int = 3, n: int = 512, per_module: int = 256) -> None:
    """The search's GPU modules (:meth:`numptx.search.evaluate.Evaluator.packs`, one thread)
    of ``n`` programs at each build: CPU time per candidate (best of ``repeats``, the builds
    interleaved) and SASS instructions per candidate (every kernel's, over the candidates).
    The populations: what a 5-generation ``regress`` run on the CPU holds at the end, and
    random initial programs (``init_length=(2, 12)``) of three op sets."""
    import numpy as np
    from concurrent.futures import ThreadPoolExecutor
    from numptx import search
    from numptx.jit.compile.sass import sass_instructions
    from numptx.search import operators as O
    from numptx.search.evaluate import Evaluator
    from numptx.search.genes import Genes
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (1024, 2)).astype(np.float32)
    y = (X[:, 0] ** 2 + np.sin(X[:, 1]) * X[:, 0]).astype(np.float32)
    ops = ("add", "sub", "mul", "div", "sin", "exp")
    run = search.regress(X, y, ops, population=n, generations=5, seed=0, device="cpu")
    pops = {"evolved, " + " ".join(ops): [c.program for c in run.population][:n]}
    for some in (("add", "sub", "mul"), ("add", "sub", "mul", "div"),
                 ("add", "sub", "mul", "sin", "exp")):
        genes = Genes(some, 2)
        pops["random, " + " ".join(some)] = [O.random_program(genes, rng, (2, 12))
                                             for _ in range(n)]
    print(f"{'population':44s} {'build':>5s} {'us/candidate':>13s} {'programs/s/core':>16s} "
          f"{'SASS/candidate':>15s}")
    with ThreadPoolExecutor(1) as one:        # one thread: core time per candidate
        for name, progs in pops.items():
            ev = Evaluator(X, y, device="cpu", executor=one, per_module=per_module)
            row = {}
            for _ in range(repeats):
                for build in ("full", "fast"):
                    # a new, empty cubin cache: every repeat assembles
                    os.environ["NUMPTX_CACHE_DIR"] = tempfile.mkdtemp(prefix="nx-bench-")
                    t = time.process_time()
                    packs = ev.packs(progs, build=build)
                    for p in packs:
                        p.cubin                            # noqa: B018 - assembled
                    per = (time.process_time() - t) / len(progs)
                    sass = sum(len(sass_instructions(p.cubin, k.entry))
                               for p in packs for k in p.kernels) / len(progs)
                    row[build] = (min(per, row.get(build, (per,))[0]), sass)
            for build in ("full", "fast"):
                per, sass = row[build]
                print(f"{name:44s} {build:>5s} {per * 1e6:13.1f} {1 / per:16.0f} {sass:15.1f}")
            print(f"{'':44s} fast/full: {row['full'][0] / row['fast'][0]:.2f}x less time, "
                  f"{row['fast'][1] / row['full'][1]:.2f}x the SASS")


def counted(cases=((256, "function", "full"), (256, "kernels", "fast"),
                    (2048, "function", "full"), (2048, "kernels", "full"),
                    (2048, "function", "fast"), (2048, "kernels", "fast"))) -> None:
    """x86 instructions a candidate of each pack build (valgrind --tool=cachegrind
    --cache-sim=no): a child builds one pack, another does the same but the assembly; the
    difference over the candidates is nvJitLink's counted work a candidate (the render of the
    module is in it, ~0.2 %)."""
    import re
    import subprocess
    import tempfile

    def refs(*argv: str) -> int:
        with tempfile.TemporaryDirectory() as d:
            out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                                  f"--cachegrind-out-file={d}/cg", sys.executable, __file__,
                                  "--pack-once", *argv], capture_output=True, text=True,
                                 check=True).stderr
        return int(re.search(r"I\s+refs:\s+([\d,]+)", out).group(1).replace(",", ""))
    base = {n: refs(str(n), "function", "full", "no") for n in {c[0] for c in cases}}
    first = None
    print(f"{'candidates':>10s} {'layout':>9s} {'build':>5s} {'M instructions/candidate':>25s} "
          f"{'vs the first':>13s}")
    for n, layout, build in cases:
        per = (refs(str(n), layout, build, "yes") - base[n]) / n
        first = first or per
        print(f"{n:10d} {layout:>9s} {build:>5s} {per / 1e6:25.2f} {first / per:12.2f}x")


def farm(n: int = 2048, per_module: int = 256) -> None:
    """Bytes per task (what the client sends a Dask worker for one module, pickled as Dask
    sends task arguments) against today's (the rendered PTX text of the module), for random
    32-instruction programs as encodings and as texts, and the GEMM-sized template's one-time
    part; then the same ``pack_many`` on a LocalCluster of 1 and 2 worker processes (wall
    time of one batch each, interleaved, best of 2; the client's own work included)."""
    import pickle
    from distributed import Client, LocalCluster
    from numptx.jit.compile import farm as F
    tmpl = nx.CudaTemplate(FIT, entry="fit", cache=False)
    site = tmpl.sites["f"]
    progs = [random_program(s) for s in range(n)]
    words = [sp.encode(p, ["x"]) for p in progs]
    texts = [str(sp.compile(p, site=site)) for p in progs]
    print(f"bytes per task, modules of {per_module} random 32-instruction programs:")
    for name, pop in (("encodings (words)", words), ("stub texts", texts)):
        p = tmpl.pack("f", pop[:per_module], select="cand")
        _, task = F.task_of(tmpl, {"f": p.population}, p.variant)
        sent, today = len(pickle.dumps(task)), len(pickle.dumps(p.ptx))
        print(f"  {name:18s}: {sent:9,d} B a task ({sent / per_module:6.0f} B a candidate); "
              f"today's PTX {today:9,d} B ({today / per_module:6.0f} B a candidate)")
    spec = F.template_spec(tmpl)
    print(f"  the template, once per worker: {len(pickle.dumps(spec)):,d} B")
    from bench_inject import gemm_template
    gemm = nx.CudaTemplate(gemm_template(), entry="gemm", cache=False)
    stubs = {"mac": "fma.rn.f32 %v_acc, %v_a, %v_b, %v_acc;"}
    v = gemm.inject(stubs)
    _, task = F.task_of(gemm, stubs, v)
    print(f"  GEMM variant (512 sites): {len(pickle.dumps(task)):,d} B a task; today's PTX "
          f"{len(pickle.dumps(v.ptx)):,d} B; the template once per worker "
          f"{len(pickle.dumps(F.template_spec(gemm))):,d} B")
    print(f"\nscaling, pack_many of {n} encodings in modules of {per_module}, wall time:")
    best: dict = {}
    for _ in range(2):
        for workers in (1, 2):
            with LocalCluster(processes=True, n_workers=workers, threads_per_worker=1,
                              dashboard_address=None) as c, Client(c) as client:
                tmpl.pack_many("f", words[:8], select="cand", per_module=4, executor=client)
                t = time.perf_counter()
                for p in tmpl.pack_many("f", words, select="cand", per_module=per_module,
                                        executor=client):
                    p.cubin
                took = time.perf_counter() - t
                best[workers] = min(took, best.get(workers, took))
    for workers, took in best.items():
        print(f"  {workers} worker process(es): {took:6.2f} s, {n / took:7.0f} programs/s")
    print(f"  2 workers / 1: {best[1] / best[2]:.2f}x (target >= 1.8x)")


def fitness_preparation(n: int = 4096, repeats: int = 3) -> None:
    """CPU time of ``prepare`` (nx.fitness's checks) for ``n`` random programs as compiled
    stubs, op lists, encodings and PTX texts: cold (caches emptied) and again (cached); the
    texts against ``pack_many`` of the same texts (what a GPU run builds)."""
    import numpy as np
    from numptx.jit.populations import fitness as F
    from numptx.jit.populations.fitness_checks import clear_caches
    X = np.random.default_rng(0).uniform(-1, 1, (256, 1)).astype(np.float32)
    y = X[:, 0] * 2
    tmpl = F.fitness_template(1, ("x",), "f32")
    progs = [random_program(s) for s in range(n)]
    stubs = sp.compile_many(progs, site=tmpl.sites["f"])
    pops = {"compiled stubs": stubs, "op lists": progs,
            "encodings": [sp.encode(p, ["x"]) for p in progs], "PTX texts": [str(s) for s in stubs]}
    print(f"\nnx.fitness preparation, {n} candidates (CPU time, best of {repeats}):")
    for name, pop in pops.items():
        cold, warm = [], []
        for _ in range(repeats):
            clear_caches()
            t = time.process_time()
            F.prepare(pop, X, y, names=["x"])
            cold.append(time.process_time() - t)
            t = time.process_time()
            F.prepare(pop, X, y, names=["x"])
            warm.append(time.process_time() - t)
        print(f"  {name:16s}: {min(cold) * 1e3:8.1f} ms ({min(cold) / n * 1e6:6.2f} us a "
              f"candidate), cached {min(warm) * 1e3:6.1f} ms")
    t = time.process_time()
    for p in tmpl.pack_many("f", pops["PTX texts"], select="cand"):
        p.cubin
    pack = time.process_time() - t
    print(f"  {'pack_many texts':16s}: {pack * 1e3:8.1f} ms (preparing the texts: "
          f"{min(cold) / pack * 100:.1f} % of it)")


if __name__ == "__main__":
    main()
