"""Levenberg–Marquardt constant fitting (``numptx.search.least_squares``): the C fit
(``native/lm.h``, every round in one call per thread) against the NumPy rounds it replaced
(``_fit_numpy``, kept as the reference), side by side in one process, alternating.

    python benchmarks/bench_fit.py          # 20 and 200 rows, 125 programs, 12 rounds
    python benchmarks/bench_fit.py --rows 20 200 2000 --programs 125 --steps 12 --repeat 5

The programs are random programs of the search's breeder (Nguyen's function set ``add sub mul
div exp log sin cos``, one input, weights on) fitted to Nguyen-4 (x + x^2 + ... + x^6 on
[-1, 1]), f32, mse under linear scaling (the search's CPU default). The time is CPU time
(``time.process_time``: all threads summed) per fit call, the median of ``--repeat`` calls of
each path. Pin the process (``taskset -c 1``) for one core's figures. The last column counts
the programs whose best losses agree within a relative 1e-6 (sums in another order can tip an
accept/reject on an ill-conditioned fit, which then drifts: a program or so in a hundred).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from numptx.search.evaluate import Evaluator
from numptx.search.genes import LN2, LOG2E, Genes
from numptx.search.least_squares import _fit_numpy, fit_least_squares
from numptx.search.operators import random_program

OPS = ("add", "sub", "mul", "div", "exp", "log", "sin", "cos")


def case(rows: int, programs: int, seed: int = 0) -> tuple[Evaluator, list]:
    """The evaluator (Nguyen-4 on ``rows`` rows) and ``programs`` random programs."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (rows, 1)).astype(np.float32)
    y = sum(X[:, 0].astype(np.float64) ** k for k in range(1, 7)).astype(np.float32)
    ev = Evaluator(X, y, loss="mse", device="cpu", evaluate="interpret", linear_scaling=True)
    g = Genes(OPS, 1, weights=True)
    return ev, [random_program(g, rng, (6, 14)) for _ in range(programs)]


def cpu_time(fn, *args, **kw) -> float:
    t = time.process_time()
    fn(*args, **kw)
    return time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[20, 200])
    ap.add_argument("--programs", type=int, default=125)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--search", nargs="+", default=None, metavar="PROBLEM",
                    help="instead: the C fit of a search's own population (500 programs after "
                         "8 generations of search.regress on these sr_compare problems, seed 1)")
    a = ap.parse_args()
    if a.search:
        search_populations(a.search, a.steps, a.repeat)
        return
    print(f"{'rows':>6} {'ops/prog':>8} {'numpy ms':>9} {'C ms':>8} {'ratio':>6}  "
          f"losses within 1e-6 (both +inf included)")
    for rows in a.rows:
        ev, progs = case(rows, a.programs)
        ref = _fit_numpy(ev, progs, steps=a.steps)
        got = fit_least_squares(ev, progs, steps=a.steps)
        fin = np.isfinite(ref[1])
        both = fin & np.isfinite(got[1])
        close = np.isclose(got[1][both], ref[1][both], rtol=1e-6, atol=0).sum()
        same = f"{close + (~fin & ~np.isfinite(got[1])).sum()}/{len(progs)}" + \
            f" (runs: C {got[2]:,}, NumPy {ref[2]:,})"
        t_np, t_c = [], []
        for _ in range(a.repeat):
            t_np.append(cpu_time(_fit_numpy, ev, progs, steps=a.steps))
            t_c.append(cpu_time(fit_least_squares, ev, progs, steps=a.steps))
        m_np, m_c = statistics.median(t_np), statistics.median(t_c)
        print(f"{rows:>6} {np.mean([len(p) for p in progs]):>8.1f} {1e3 * m_np:>9.1f} "
              f"{1e3 * m_c:>8.1f} {m_np / m_c:>6.1f}  {same}")


def search_populations(problems: list[str], steps: int, repeat: int) -> None:
    """CPU ms of one ``fit_least_squares`` call (median of ``repeat``) on the population a
    search holds after 8 generations, and the runs it made: what a generation of
    ``search.regress`` fits. Run it under two builds to compare them."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import sr_compare as sc
    from numptx import search
    print(f"{'problem':>16} {'rows':>5} {'ops/prog':>8} {'C ms':>8} {'runs':>8}")
    for name in problems:
        Xtr, ytr, _, _ = sc.data(sc.PROBLEMS[name], 1)
        r = search.regress(Xtr.astype(np.float32), ytr.astype(np.float32), list(sc.OPS),
                           population=500, generations=8, seed=1, device="cpu",
                           evaluate="interpret")
        ev = Evaluator(Xtr.astype(np.float32), ytr.astype(np.float32), loss="mse",
                       device="cpu", evaluate="interpret", linear_scaling=True)
        progs = [list(c.program) for c in r.population]
        g = Genes(OPS, Xtr.shape[1])        # the exp and log genes' constants, as the search
        kw = dict(steps=steps, protect=[g.round(v) for v in (LOG2E, -LOG2E, LN2)])
        runs = fit_least_squares(ev, progs, **kw)[2]
        t = statistics.median(cpu_time(fit_least_squares, ev, progs, **kw)
                              for _ in range(repeat))
        print(f"{name:>16} {len(ytr):>5} {np.mean([len(p) for p in progs]):>8.1f} "
              f"{1e3 * t:>8.1f} {runs:>8,}")


if __name__ == "__main__":
    main()
