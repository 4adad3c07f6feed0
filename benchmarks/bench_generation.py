"""CPU time of a search's generations, and the hash of the population they reach: run it
from two checkouts (or snapshots) to compare the cost of a generation with the same runs::

    taskset -c 0 python benchmarks/bench_generation.py                 # this checkout
    taskset -c 0 python benchmarks/bench_generation.py --root /tmp/old  # another (its numptx/)

Each line: the problem and seed, generations, evaluations, the best loss and its
1 - R² (the loss over the variance of y), a hash of the final population (programs and
losses: equal hashes, the same run), the process's CPU seconds and ``result.timings``; the
last line, the mean log10(1 - R²) of the bests and the CPU of all runs. The problems and data
are :mod:`sr_compare`'s; the search is ``search.regress`` as the protocol calls it
(population 500, ``restart=20``) for a fixed number of generations, so two settings compare
generation for generation whatever the host's speed (benchmarks/README.md, "A cheaper
generation" and "Tree on larger data")::

    python benchmarks/bench_generation.py --problems Keijzer-4 --seeds 0 1 2 3 4 5 \
        --generations 60 --numptx-args '{"variation": "linear"}'

Across checkouts, the options must mean the same search in both: regress's default
``variation="auto"`` (tree from 100 training rows, since 9bcb223) runs I.18.4 and Keijzer-4
(200-201 rows) as tree where an older checkout runs them linear; pass ``--numptx-args
'{"variation": "linear"}'`` to compare with one (and drop those problems for a checkout older
than the option, which refuses it). The seed is ``--seeds``' (data and search alike).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=None, help="a checkout whose numptx/ to import")
    ap.add_argument("--problems", nargs="+", default=["Keijzer-11", "Feynman-I.18.4", "Nguyen-4"])
    ap.add_argument("--generations", type=int, default=40)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--numptx-args", default="{}", metavar="JSON",
                    help="more regress arguments, replacing the protocol's")
    args = ap.parse_args()
    try:
        extra = json.loads(args.numptx_args)
    except json.JSONDecodeError as e:
        ap.error(f"--numptx-args: not JSON ({e})")
    if not isinstance(extra, dict) or "seed" in extra:
        ap.error("--numptx-args: give a JSON object of regress arguments (the seed is --seeds')")
    if args.root:
        sys.path.insert(0, os.path.abspath(args.root))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import numpy as np
    import sr_compare as sc
    import numptx
    from numptx import search
    print(f"numptx from {os.path.dirname(numptx.__file__)}")
    logs, total = [], 0.0
    for name in args.problems:
        for seed in args.seeds:
            Xtr, ytr, _, _ = sc.data(sc.PROBLEMS[name], seed)
            y32 = ytr.astype(np.float32)
            t0 = time.process_time()
            r = search.regress(Xtr.astype(np.float32), y32, list(sc.OPS), **(dict(
                population=500, generations=args.generations, seed=seed, device="cpu",
                restart=20) | extra))
            cpu = time.process_time() - t0
            total += cpu
            rel = r.best.loss / float(np.var(y32.astype(np.float64)))
            logs.append(math.log10(max(rel, 1e-12)))
            h = hashlib.sha1(repr([(c.loss, [op.raw for op in c.program])
                                   for c in r.population]).encode()).hexdigest()[:12]
            print(f"{name}: seed {seed}, {r.generations} generations, {r.evaluated:,} "
                  f"evaluations, best {r.best.loss:.6g} (1 - R² {rel:.3g}), population {h}, "
                  f"CPU {cpu:.2f} s, { {k: round(v, 2) for k, v in r.timings.items()} }",
                  flush=True)
    print(f"mean log10(1 - R²) {sum(logs) / len(logs):.2f} over {len(logs)} runs, "
          f"CPU {total:.1f} s, {json.dumps(extra)}")


if __name__ == "__main__":
    main()
