"""Scoring without assembling: the batch interpreter (``sp.interpret``) against the compiled
path, side by side in one run.

    python benchmarks/bench_interpret.py                  # row-ops/s and candidates/s (CPU)
    python benchmarks/bench_interpret.py --rows 1000 20000 1000000 --programs 1000
    python benchmarks/bench_interpret.py --exact 10000    # bit-exact against nx.emulate
    python benchmarks/bench_interpret.py --gpu            # the GPU interpreter (needs a GPU)

* **row-ops/s**: instructions executed x rows, over CPU seconds (``time.process_time``: the
  threads' time summed, so per core) and over wall seconds (all cores).
* **candidates/s**: programs of the search's genes (``numptx.search.genes``, f32, ~20 words)
  scored end to end by ``nx.fitness``: ``evaluate="interpret"`` against ``"compile"`` (on a
  CPU the compiled path is the stub emulator; on a GPU, packs assembled by ptxas). The compiled
  path runs on a sample (``--sample``) and is reported per candidate.
* ``--evaluator``: the search's own scoring (``numptx.search.evaluate.Evaluator.score``) of
  1,000 random programs of the search's breeder (``add sub mul div sin cos exp log``, one
  input), interpret against compile, wall time, best of 3 (the compiled path once, on fewer
  programs at large data).
* ``--exact N``: N random programs per dtype (f32, f64; meta ops, stores, routines, special
  values) interpreted and emulated on 64 rows; every row must match bit for bit (any NaN
  matches any NaN).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

import numptx as nx
from numptx import stack_ptx as sp
from numptx._program.interpret import records
from numptx.search.genes import Genes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from interp_programs import data, random_program, routine, rows_for  # noqa: E402

OPS = ["add", "sub", "mul", "div", "sin", "cos", "exp", "log", "sqrt", "sq"]


def gene_programs(n: int, d: int, length: int, seed: int = 0) -> list:
    """``n`` random programs of the genes' words (f32), ``length`` genes each."""
    genes = Genes(OPS, d)
    rng = np.random.default_rng(seed)
    progs = []
    for _ in range(n):
        p: list = []
        for _ in range(length):
            r = rng.random()
            if r < 0.4:
                p.append(sp.input(genes.names[int(rng.integers(d))]))
            elif r < 0.5:
                p.append(sp.const(float(rng.normal()), "f32"))
            else:
                p.extend(genes.op_words(OPS[int(rng.integers(len(OPS)))]))
        progs.append(p)
    return progs


def row_ops(progs: list, names: list[str], rows: int) -> float:
    """Instructions executed over ``rows`` rows (INSTR records: inputs and constants cost
    nothing per row)."""
    tp = sp.tapes(progs, dict.fromkeys(names, "f32"), {"y": "f32"})
    _, at = records(tp)
    return float(((tp.words[at] & 0xFF) == 2).sum()) * rows


def throughput(args) -> None:
    d = 2
    names = [f"x{j}" for j in range(d)]
    progs = gene_programs(args.programs, d, args.length)
    print(f"{len(progs)} programs of {args.length} genes ({', '.join(OPS)}), f32")
    print(f"{'rows':>9} {'row-ops/s cpu':>14} {'row-ops/s wall':>15} {'interp cand/s':>14} "
          f"{'compile cand/s':>15} {'ratio':>7}")
    for n in args.rows:
        rng = np.random.default_rng(1)
        X = rng.uniform(0.1, 2.0, (n, d)).astype(np.float32)
        y = (X[:, 0] * X[:, 1] + np.sin(X[:, 0])).astype(np.float32)
        cols = {m: X[:, j] for j, m in enumerate(names)}
        ops = row_ops(progs, names, n)
        sp.interpret(progs[:8], cols, {"y": "f32"}, device="cpu")       # warm: tables,
        nx.fitness(progs[:8], X, y, device="cpu", evaluate="compile")    # the fitness kernel
        c0, w0 = time.process_time(), time.perf_counter()
        sp.interpret(progs, cols, {"y": "f32"}, device="cpu")
        c1, w1 = time.process_time() - c0, time.perf_counter() - w0
        c0 = time.process_time()
        nx.fitness(progs, X, y, device="cpu", evaluate="interpret")
        ci = time.process_time() - c0
        k = max(1, min(len(progs), args.sample if n <= 100_000 else max(1, args.sample // 20)))
        c0 = time.process_time()
        nx.fitness(progs[:k], X, y, device="cpu", evaluate="compile")
        cc = (time.process_time() - c0) / k
        ri, rc = len(progs) / ci, 1 / cc
        print(f"{n:>9} {ops / c1:>14.3g} {ops / w1:>15.3g} {ri:>14.0f} {rc:>15.1f} "
              f"{ri / rc:>7.0f}")


def exact(args) -> None:
    names = ["a", "b", "c"]
    for dtype in ("f32", "f64"):
        rng = np.random.default_rng(11)
        rows = rows_for(dtype)
        cols = data(rng, dtype, names, 64)
        outs = {"y": dtype, "z": dtype}
        kw = dict(routines=[routine(dtype)])
        bad = checked = 0
        for start in range(0, args.exact, 500):
            progs = [random_program(rng, dtype, names, rows, int(rng.integers(1, 40)))
                     for _ in range(min(500, args.exact - start))]
            got = sp.interpret(progs, cols, outs, device="cpu", on_limit="run", **kw)
            stubs = sp.compile_many(progs, dict.fromkeys(names, dtype), outs, **kw)
            for k, stub in enumerate(stubs):
                with np.errstate(all="ignore"):
                    want = nx.emulate(stub, cols, list(outs))
                for o in outs:
                    a = got[o][k]
                    b = np.broadcast_to(np.asarray(want[o]), a.shape)
                    u = f"u{a.dtype.itemsize}"
                    same = (np.isnan(a) & np.isnan(b)) | (a.view(u) == b.view(u))
                    if not same.all():
                        bad += 1
                        if bad <= 3:
                            print(f"  mismatch: {dtype} program {start + k} output {o}")
                checked += 1
        print(f"{dtype}: {checked} programs x 64 rows x 2 outputs over {len(rows)} rows of the "
              f"table: {bad} mismatching outputs")


def evaluator(args) -> None:
    from numptx.search.breed import Breeder
    from numptx.search.evaluate import Evaluator
    genes = Genes(["add", "sub", "mul", "div", "sin", "cos", "exp", "log"], 1)
    rng = np.random.default_rng(0)
    breeder = Breeder(genes, crossover=0.5, mutation=0.9, max_length=64)
    progs = list(breeder.random_programs(rng, 1000, (2, 12)))
    print(f"Evaluator.score: {len(progs)} programs, mean length "
          f"{np.mean([len(p) for p in progs]):.1f} ops")
    for n in args.rows:
        X = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
        y = (X[:, 0] ** 3 + X[:, 0] ** 2 + X[:, 0]).astype(np.float32)
        rates = {}
        for mode in ("interpret", "compile"):
            ev = Evaluator(X, y, device="cpu", evaluate=mode)
            k = len(progs) if mode == "interpret" or n <= 20 else max(20, 300_000 // n)
            ev.score(progs[:20])                       # warm: templates, tables
            best = math.inf
            for _ in range(3 if mode == "interpret" else 1):
                t0 = time.perf_counter()
                ev.score(progs[:k])
                best = min(best, time.perf_counter() - t0)
            rates[mode] = k / best
        print(f"  rows {n:>9}: interpret {rates['interpret']:>9.0f} cand/s, compile "
              f"{rates['compile']:>7.0f} cand/s, ratio {rates['interpret'] / rates['compile']:.0f}")


def gpu(args) -> None:
    if not nx.jit.fitness.gpu_available():
        print("--gpu: no CUDA GPU here; the CPU figures above are the proxy")
        return
    names = ["x0", "x1"]
    progs = gene_programs(args.programs, 2, args.length)
    for n in args.rows:
        X = np.random.default_rng(1).uniform(0.1, 2.0, (n, 2)).astype(np.float32)
        cols = {m: X[:, j] for j, m in enumerate(names)}
        sp.interpret(progs[:8], cols, {"y": "f32"}, device="gpu")
        w0 = time.perf_counter()
        sp.interpret(progs, cols, {"y": "f32"}, device="gpu")
        w = time.perf_counter() - w0
        print(f"gpu rows {n}: {row_ops(progs, names, n) / w:.3g} row-ops/s, "
              f"{len(progs) / w:.0f} candidates/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1000, 20000])
    ap.add_argument("--programs", type=int, default=1000)
    ap.add_argument("--length", type=int, default=8, help="genes per program")
    ap.add_argument("--sample", type=int, default=40,
                    help="programs the compiled (emulated) path scores")
    ap.add_argument("--exact", type=int, default=0)
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--evaluator", action="store_true",
                    help="the search's Evaluator.score, interpret against compile")
    args = ap.parse_args()
    if args.exact:
        exact(args)
        return
    if args.evaluator:
        evaluator(args)
        return
    throughput(args)
    if args.gpu:
        gpu(args)


if __name__ == "__main__":
    main()
