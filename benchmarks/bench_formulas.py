"""Formulas as symbolic-regression users expect them (issue 26): what they cost on one core.

    taskset -c 0 python benchmarks/bench_formulas.py                     # every section
    taskset -c 0 python benchmarks/bench_formulas.py --section complexity --programs 1000

Sections:

* ``complexity``: ``numptx.search.simplify.complexities`` (the Pareto front's and parsimony's
  measure) and ``simplified`` per program, on random programs of 5-10, 10-20 and 20-40 ops
  (an empty cache), and on children whose constants were all refitted (what a search asks);
* ``export``: ``Candidate.sympy()``, ``latex()``, making ``numpy()`` and running it on 100,000
  rows (beside ``predict``, the emulator), ``ptx_expr().stub()``;
* ``search``: the front's seconds a generation (``result.timings["front"]``) and a
  generation's CPU with ``parsimony`` counting complexity against counting ops (Nguyen-7 of
  ``sr_compare``, population 1000).

CPU time (``time.process_time``); BLAS pinned to one thread. Results: benchmarks/README.md.
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from numptx.search import loop, operators as O, simplify as S  # noqa: E402
from numptx.search.genes import Genes  # noqa: E402
from numptx.search.results import Candidate  # noqa: E402

OPS = ["add", "sub", "mul", "div", "sin", "exp"]


def cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def programs(genes: Genes, n: int, lo: int, hi: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    out: list = []
    while len(out) < n:
        p = O.random_program(genes, rng, (2, 30))
        if lo <= len(p) <= hi:
            out.append(p)
    return out


def section_complexity(a: argparse.Namespace) -> None:
    genes = Genes(OPS, 2)
    print("| programs | complexities µs/program | simplified µs/program |\n|---|---|---|")
    for lo, hi in ((5, 10), (10, 20), (20, 40)):
        progs = programs(genes, a.programs, lo, hi)
        S._CACHES.clear()
        t = cpu(lambda: S.complexities(progs, genes))
        S._CACHES.clear()
        u = cpu(lambda: [S.simplified(p, genes) for p in progs])
        print(f"| {lo}-{hi} ops | {1e6 * t / len(progs):.0f} | {1e6 * u / len(progs):.0f} |")
    rng = np.random.default_rng(1)
    pop = programs(genes, 500, 4, 16, seed=1)
    S._CACHES.clear()
    S.complexities(pop, genes)
    total, n = 0.0, 0
    for _ in range(5):
        kids = [O.mutate(O.crossover(pop[rng.integers(500)], pop[rng.integers(500)], rng),
                         genes, rng, max_length=40) for _ in range(500)]
        kids = [O.with_constants(k, rng.normal(size=len(O.constants_of(k)))) for k in kids]
        total += cpu(lambda: S.complexities(kids, genes))
        n, pop = n + len(kids), kids
    print(f"| children, constants refitted (5 x 500) | {1e6 * total / n:.0f} | |")


def section_export(a: argparse.Namespace) -> None:
    genes = Genes(OPS, 2)
    cands = [Candidate(p, 0.0, genes) for p in programs(genes, 50, 10, 30)]
    X = np.random.default_rng(0).uniform(-2, 2, (100_000, 2)).astype(np.float32)
    cands[0].sympy(), cands[0].ptx_expr().stub()          # imports warmed
    rows = [("sympy()", lambda c: c.sympy()), ("latex()", lambda c: c.latex()),
            ("numpy(), made", lambda c: c.numpy()),
            ("numpy()(X), 100,000 rows", lambda c: c.numpy()(X)),
            ("predict(X), 100,000 rows (the emulator)", lambda c: c.predict(X)),
            ("ptx_expr().stub()", lambda c: c.ptx_expr().stub())]
    print("| call | ms a candidate |\n|---|---|")
    for name, fn in rows:
        t = cpu(lambda: [fn(c) for c in cands])
        print(f"| {name} | {1e3 * t / len(cands):.2f} |")


def section_search(a: argparse.Namespace) -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sr_compare as SC
    from numptx import search
    Xtr, ytr, _, _ = SC.data(SC.PROBLEMS["Nguyen-7"], 0)
    X, y = Xtr.astype(np.float32), ytr.astype(np.float32)
    kw = dict(population=1000, generations=a.generations, seed=1, device="cpu", target=-1.0)
    measured = loop.front_sizes
    print("| run | CPU s a generation | front s a generation |\n|---|---|---|")
    for name, parsimony, sizes in (("no parsimony", 0.0, measured),
                                   ("parsimony 1e-4, complexity", 1e-4, measured),
                                   ("parsimony 1e-4, ops (before)", 1e-4,
                                    lambda cs: np.array([len(c.program) for c in cs], float))):
        loop.front_sizes = sizes
        t = time.process_time()
        r = search.regress(X, y, list(SC.OPS), parsimony=parsimony, **kw)
        t = time.process_time() - t
        print(f"| {name} | {t / r.generations:.3f} | "
              f"{r.timings.get('front', 0.0) / r.generations:.3f} |")
    loop.front_sizes = measured


SECTIONS = {"complexity": section_complexity, "export": section_export,
            "search": section_search}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--section", choices=["all", *SECTIONS], default="all")
    ap.add_argument("--programs", type=int, default=1000, help="programs a complexity row")
    ap.add_argument("--generations", type=int, default=6, help="generations of a search row")
    a = ap.parse_args()
    for name, fn in SECTIONS.items():
        if a.section in ("all", name):
            print(f"\n## {name}")
            fn(a)


if __name__ == "__main__":
    main()
