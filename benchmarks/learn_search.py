"""The predictor inside the search (issue 25, item 4): ``bench_learn.py --section search``.

Two measurements on the problems of the comparison with Operon (``sr_compare.PROBLEMS``, the
same data rule and seeds):

- **Spearman on held-out children**: a run with ``predictor=True, screen=1, explore=0`` scores
  every child, so each generation's predictions are made on children the model has not learned
  yet (it learns them after they are scored): ``result.rank_correlations`` is the held-out
  rank correlation, generation by generation (None while the model warms up).
- **Screening**: the protocol's run (``sr_compare.run_numptx``: CPU, f32, the interpreter, the
  training stop, a time cap) with and without ``predictor=True`` side by side, problem by
  problem: solved runs, evaluations (programs scored, constant-fit runs included) and the median
  seconds of the solved runs.

Run on one core (``taskset -c 0``): a time-capped run measures the machine as well as the
search.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import numpy as np

import sr_compare as S

#: the problems the held-out figure is measured on (Nguyen and AI-Feynman, as the issue asks)
HELD_OUT = ("Nguyen-4", "Nguyen-7", "Keijzer-12", "Feynman-I.12.1", "Feynman-I.18.4")


def held_out(problems: Sequence[str] = HELD_OUT, seeds: Sequence[int] = (0, 1),
             generations: int = 20, model: str = "ridge") -> list[tuple]:
    """(problem, seed, median and quartiles of the per-generation held-out Spearman, the
    predictor's seconds per child, generations measured) of runs that score every child."""
    from numptx import search
    out = []
    for name in problems:
        for seed in seeds:
            Xtr, ytr, _, _ = S.data(S.PROBLEMS[name], seed)
            X32, y32 = Xtr.astype(np.float32), ytr.astype(np.float32)
            r = search.regress(X32, y32, list(S.OPS), population=500, generations=generations,
                               seed=seed, device="cpu", evaluate="interpret", restart=20,
                               predictor=model, screen=1.0, explore=0.0)
            rc = [v for v in r.rank_correlations or [] if v is not None]
            made = r._search.children_made
            q = np.percentile(rc, [25, 50, 75]).tolist() if rc else [float("nan")] * 3
            out.append((name, seed, q, r.timings.get("predict", 0.0) / max(1, made), len(rc)))
    return out


def screening(problems: Sequence[str], seeds: Sequence[int], time_cap: float,
              extra: dict | None = None) -> list[tuple]:
    """(problem, predictor on?, solved, runs, evaluations, median seconds of solved runs) of
    the protocol's runs without and with ``predictor=True`` (plus ``extra`` arguments)."""
    rows = []
    for name in problems:
        for on in (False, True):
            runs = [S.run_numptx(name, seed, ops=S.OPS, population=500, time_cap=time_cap,
                                 evaluate="interpret",
                                 extra=({"predictor": True} | (extra or {})) if on else None)
                    for seed in seeds]
            solved = [r.seconds for r in runs if r.solved]
            rows.append((name, on, len(solved), len(runs), sum(r.evaluations for r in runs),
                         statistics.median(solved) if solved else float("nan")))
    return rows


def descriptors_compare(problems: Sequence[str], seeds: Sequence[int],
                        generations: int = 30) -> list[tuple]:
    """(problem, seed, descriptors, cells filled, best loss / var y, seconds) of MAP-Elites
    with the named descriptors (length, op_mix: 8 x 5 cells) and the learned ones (8 x 8)."""
    from numptx import search
    rows = []
    for name in problems:
        for seed in seeds:
            Xtr, ytr, _, _ = S.data(S.PROBLEMS[name], seed)
            X32, y32 = Xtr.astype(np.float32), ytr.astype(np.float32)
            var = float(np.var(y32.astype(np.float64)))
            for d in (("length", "op_mix"), "learned"):
                t0 = time.perf_counter()
                r = search.map_elites(X32, y32, list(S.OPS), descriptors=d, batch=300,
                                      generations=generations, seed=seed, device="cpu",
                                      evaluate="interpret")
                rows.append((name, seed, d if isinstance(d, str) else "+".join(d),
                             len(r.archive), r.best.loss / var, time.perf_counter() - t0))
    return rows


def report(problems: Sequence[str], seeds: Sequence[int], time_cap: float,
           held_problems: Sequence[str] = HELD_OUT) -> None:
    """Print both tables (markdown)."""
    t0 = time.perf_counter()
    print("### Held-out Spearman (screen=1: every child predicted, then scored and learned)\n")
    print("| problem | seed | Spearman q25 / median / q75 | generations | predictor µs a child |")
    print("|---|---|---|---|---|")
    for name, seed, q, per, n in held_out(held_problems, seeds[:2]):
        print(f"| {name} | {seed} | {q[0]:.2f} / {q[1]:.2f} / {q[2]:.2f} | {n} | "
              f"{per * 1e6:.1f} |")
    print("\n### MAP-Elites: named against learned descriptors (30 generations of 300)\n")
    print("| problem | seed | descriptors | cells filled | best loss / var y | seconds |")
    print("|---|---|---|---|---|---|")
    for name, seed, d, n, best, sec in descriptors_compare(held_problems[:3], seeds[:1]):
        print(f"| {name} | {seed} | {d} | {n} | {best:.3g} | {sec:.1f} |")
    print(f"\n### Screening (predictor=True, screen=0.25, explore=0.05) against none, "
          f"{time_cap:g} s a run, seeds {list(seeds)}\n")
    print("| problem | predictor | solved | evaluations | median s to solve |")
    print("|---|---|---|---|---|")
    tot = {False: [0, 0, 0], True: [0, 0, 0]}
    for name, on, solved, runs, ev, med in screening(problems, seeds, time_cap):
        print(f"| {name} | {'yes' if on else 'no'} | {solved}/{runs} | {ev:,} | {med:.2f} |")
        tot[on][0] += solved
        tot[on][1] += runs
        tot[on][2] += ev
    for on in (False, True):
        s, n, ev = tot[on]
        print(f"| all | {'yes' if on else 'no'} | {s}/{n} | {ev:,} | |")
    print(f"\n({time.perf_counter() - t0:.0f} s)")
