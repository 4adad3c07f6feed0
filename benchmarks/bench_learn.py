"""Learning in the loop (issue 25): the cost of numptx.learn's models on one core.

    taskset -c 0 python benchmarks/bench_learn.py                   # every section
    taskset -c 0 python benchmarks/bench_learn.py --section models --repeat 5
    taskset -c 0 python benchmarks/bench_learn.py --section search --time-cap 20  # seconds a run

Section ``models``: the two models of ``numptx.learn`` on ``--features`` input features
(float32, like ``numptx.learn.features``' matrices; a smooth synthetic target):

* **update**: ``partial_fit`` of ``new`` rows on a model that has already learned ``store``
  rows (``RandomFeatureRidge``: the sufficient-statistics update and the Cholesky solve, whose
  cost does not depend on ``store``; ``MLP``: its ``steps`` full-batch Adam steps over the
  ring buffer, ``store`` rows + the new ones, capped at its ``store=``; with ``batch=``, over
  the new rows and a replay sample, ``batch`` rows in all, whatever the store);
* **infer**: ``predict`` of a batch of candidates, and ``rank`` (predict and a stable sort).

Times are CPU time (``time.process_time``) of one call, the best of ``--repeat``, each on a
fresh copy of the fitted model. The script pins NumPy's BLAS to one thread (the environment
variables below are set before NumPy is imported); run it under ``taskset -c 0`` so the process
stays on one core. Issue 25's targets: an update of 1,000 rows over a 10,000-row store <= 5 ms;
inference <= 1 us a candidate in batches of 10,000.
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402  (after the thread settings: NumPy reads them on import)
import pickle  # noqa: E402
import time  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402

from numptx.learn.mlp import MLP  # noqa: E402
from numptx.learn.models import RandomFeatureRidge  # noqa: E402

#: the models measured: name -> a fresh, unfitted model
MODELS: dict[str, Callable[[], Any]] = {
    "ridge fourier D=128 (default)": lambda: RandomFeatureRidge(),
    "ridge relu D=128": lambda: RandomFeatureRidge(kind="relu"),
    "ridge fourier D=256": lambda: RandomFeatureRidge(features=256),
    "MLP (64,) tanh, 20 steps": lambda: MLP(),
    "MLP (64,) tanh, 5 steps": lambda: MLP(steps=5),
    "MLP (64,) tanh, 5 steps, batch=1024": lambda: MLP(steps=5, batch=1024),
    "MLP (64,) tanh, 3 steps, batch=1024": lambda: MLP(steps=3, batch=1024),
}


def data(rows: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` float32 rows of ``d`` features and a smooth target."""
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(rows, d)).astype(np.float32)
    w = rng.normal(size=d) / np.sqrt(d)
    F64 = F.astype(np.float64)
    return F, np.sin(F64 @ w) + 0.5 * (F64[:, 0] ** 2) + 0.1 * F64[:, 1]


def best_cpu(fn: Callable[[], Any], repeat: int, setup: Callable[[], Any] | None = None
             ) -> float:
    """The least CPU time (seconds) of ``repeat`` calls of ``fn(setup())``."""
    best = float("inf")
    for _ in range(repeat):
        arg = setup() if setup else None
        t = time.process_time()
        fn(arg) if setup else fn()
        best = min(best, time.process_time() - t)
    return best


def update_table(d: int, stores: list[int], news: list[int], repeat: int) -> None:
    print(f"\nupdate: partial_fit of `new` rows after `store` rows, {d} features, CPU ms "
          f"(best of {repeat})")
    print("| model | store rows | new rows | update ms |\n|---|---|---|---|")
    for name, make in MODELS.items():
        for store in stores:
            F, y = data(store + max(news), d)
            fitted = pickle.dumps(make().partial_fit(F[:store], y[:store]))
            for new in news:
                Fn, yn = F[store:store + new], y[store:store + new]
                ms = 1e3 * best_cpu(lambda m: m.partial_fit(Fn, yn), repeat,
                                    lambda: pickle.loads(fitted))
                print(f"| {name} | {store:,} | {new:,} | {ms:.2f} |", flush=True)


def infer_table(d: int, batches: list[int], repeat: int, store: int = 10_000) -> None:
    print(f"\ninfer: predict and rank of a batch, {d} features, after {store:,} rows learned, "
          f"CPU time (best of {repeat})")
    print("| model | batch | predict ms | predict us/cand | rank us/cand |\n|---|---|---|---|---|")
    F, y = data(store + max(batches), d)
    for name, make in MODELS.items():
        model = make().partial_fit(F[:store], y[:store])
        for batch in batches:
            Q = F[store:store + batch]
            t_pred = best_cpu(lambda: model.predict(Q), repeat)
            t_rank = best_cpu(lambda: model.rank(Q), repeat)
            print(f"| {name} | {batch:,} | {1e3 * t_pred:.3f} | {1e6 * t_pred / batch:.3f} | "
                  f"{1e6 * t_rank / batch:.3f} |", flush=True)


def section_models(a: argparse.Namespace) -> None:
    update_table(a.features, a.store, a.new, a.repeat)
    infer_table(a.features, a.batch, a.repeat)


def section_search(a: argparse.Namespace) -> None:
    """The predictor inside the search (benchmarks/learn_search.py): held-out Spearman of
    running searches, and the protocol's runs with and without ``predictor=True``."""
    import learn_search
    learn_search.report(a.problems, a.seeds, a.time_cap)


#: the sections, in the order ``--section all`` runs them (``search`` only when asked: minutes)
SECTIONS: dict[str, Callable[[argparse.Namespace], None]] = {"models": section_models,
                                                            "search": section_search}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--section", choices=["all", *SECTIONS], default="all")
    ap.add_argument("--features", type=int, default=64, help="input features (default 64)")
    ap.add_argument("--store", type=int, nargs="+", default=[1_000, 10_000],
                    help="rows learned before the timed update")
    ap.add_argument("--new", type=int, nargs="+", default=[100, 1_000],
                    help="rows of the timed update")
    ap.add_argument("--batch", type=int, nargs="+", default=[100, 1_000, 10_000],
                    help="candidates a predict/rank call")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--problems", nargs="+",
                    default=["Nguyen-4", "Nguyen-7", "Keijzer-12", "Feynman-I.18.4"],
                    help="--section search: the protocol's problems to screen")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--time-cap", type=float, default=20.0,
                    help="--section search: seconds a run (the protocol's is 60)")
    a = ap.parse_args()
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    print(f"numpy {np.__version__}, BLAS threads 1, CPUs allowed {affinity}")
    for name, run in SECTIONS.items():
        if a.section == name or (a.section == "all" and name != "search"):
            run(a)


if __name__ == "__main__":
    main()
