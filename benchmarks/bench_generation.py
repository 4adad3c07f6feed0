"""CPU time of a search's generations, and the hash of the population they reach: run it
from two checkouts (or snapshots) to compare the cost of a generation with the same runs::

    taskset -c 0 python benchmarks/bench_generation.py                 # this checkout
    taskset -c 0 python benchmarks/bench_generation.py --root /tmp/old  # another (its numptx/)

Each line: the problem, generations, evaluations, the best loss, a hash of the final
population (programs and losses: equal hashes, the same run), the process's CPU seconds and
``result.timings``. The problems and data are :mod:`sr_compare`'s; the search is
``search.regress`` as the protocol calls it (population 500, seed 0, ``restart=20``) for a
fixed number of generations (benchmarks/README.md, "A cheaper generation").
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=None, help="a checkout whose numptx/ to import")
    ap.add_argument("--problems", nargs="+", default=["Keijzer-11", "Feynman-I.18.4", "Nguyen-4"])
    ap.add_argument("--generations", type=int, default=40)
    args = ap.parse_args()
    if args.root:
        sys.path.insert(0, os.path.abspath(args.root))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import numpy as np
    import sr_compare as sc
    import numptx
    from numptx import search
    print(f"numptx from {os.path.dirname(numptx.__file__)}")
    for name in args.problems:
        Xtr, ytr, _, _ = sc.data(sc.PROBLEMS[name], 0)
        t0 = time.process_time()
        r = search.regress(Xtr.astype(np.float32), ytr.astype(np.float32), list(sc.OPS),
                           population=500, generations=args.generations, seed=0, device="cpu",
                           restart=20)
        cpu = time.process_time() - t0
        h = hashlib.sha1(repr([(c.loss, [op.raw for op in c.program])
                               for c in r.population]).encode()).hexdigest()[:12]
        print(f"{name}: {r.generations} generations, {r.evaluated:,} evaluations, best "
              f"{r.best.loss:.6g}, population {h}, CPU {cpu:.2f} s, "
              f"{ {k: round(v, 2) for k, v in r.timings.items()} }", flush=True)


if __name__ == "__main__":
    main()
