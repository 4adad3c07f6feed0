"""Import cost: how long ``import numptx`` and ``from numptx import stack_ptx`` take, and how
many modules they load, each in a fresh interpreter (best and median of ``--runs``, after one
warm-up run that writes the bytecode caches, in a temporary PYTHONPYCACHEPREFIX, even where
PYTHONDONTWRITEBYTECODE is set). The interpreter's own start-up is not counted: the clock runs
around the import statement only.

    python benchmarks/bench_import.py                   # this tree; targets in benchmarks/README.md
    python benchmarks/bench_import.py --before HEAD~1   # that commit's numptx too, side by side
    python benchmarks/bench_import.py --profile         # the heaviest modules of each case

``--before REV`` extracts ``numptx/`` at REV (``git archive``) into a temporary folder with this
tree's compiled core (numptx/_native*.so) and runs the two alternately, so both see the same
load. The load average is printed with the figures: on the 2-core development machine a busy
neighbour doubles them.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: case -> (statement, target in seconds or None); "[numpy loaded]": NumPy is imported before
#: the clock starts (numptx's own share)
CASES = {
    "import numpy (the floor)": ("import numpy", None),
    "import numptx": ("import numptx", 0.3),
    "from numptx import stack_ptx": ("from numptx import stack_ptx", 0.15),
    "  the same, [numpy loaded]": ("from numptx import stack_ptx", None),
    "nx.ptx_expr (the DSL)": ("import numptx as nx; nx.ptx_expr", None),
    "nx.Template (the compile side)": ("import numptx as nx; nx.Template", None),
}

PROBE = textwrap.dedent("""
    import json, sys, time
    {setup}
    before = set(sys.modules)
    t0 = time.perf_counter()
    {stmt}
    dt = time.perf_counter() - t0
    new = set(sys.modules) - before
    print(json.dumps({{"s": dt, "modules": len(new),
                       "numptx": sum(m.split(".")[0] == "numptx" for m in new)}}))
""")


def child_env(tree: str, pycache: str) -> dict[str, str]:
    """The environment of a measured interpreter: numptx from ``tree``, and bytecode caches
    written (under ``pycache``, outside the trees) even where PYTHONDONTWRITEBYTECODE is set,
    so that runs after the warm-up load bytecode as an installed package does."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": tree + os.pathsep + env.get("PYTHONPATH", ""),
            "PYTHONPYCACHEPREFIX": pycache}


def run_once(case: str, tree: str, pycache: str) -> dict:
    """One fresh interpreter running ``case`` with numptx from ``tree`` (a folder holding
    ``numptx/``)."""
    stmt = CASES[case][0]
    setup = "import numpy" if "[numpy loaded]" in case else ""
    r = subprocess.run([sys.executable, "-c", PROBE.format(setup=setup, stmt=stmt)],
                       capture_output=True, text=True, env=child_env(tree, pycache), cwd=tree,
                       timeout=300)
    if r.returncode:
        raise SystemExit(f"bench_import: {stmt!r} failed in {tree}:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def measure(trees: dict[str, str], runs: int, pycache: str) -> dict[tuple[str, str], list[dict]]:
    """(case, tree label) -> ``runs`` results; the trees alternate run by run."""
    out: dict[tuple[str, str], list[dict]] = {}
    for case in CASES:
        for tree in trees.values():
            run_once(case, tree, pycache)                         # warm-up: bytecode caches
        for _ in range(runs):
            for label, tree in trees.items():
                out.setdefault((case, label), []).append(run_once(case, tree, pycache))
    return out


def before_tree(rev: str, into: str) -> str:
    """``numptx/`` at ``rev`` under ``into``, with this tree's compiled core."""
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev, "numptx"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    for so in glob.glob(os.path.join(ROOT, "numptx", "_native*.so")):
        shutil.copy(so, os.path.join(into, "numptx"))
    return into


def profile(stmt: str, tree: str, top: int, pycache: str) -> list[str]:
    """The ``top`` modules of ``stmt`` by cumulative import time (``python -X importtime``)."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", stmt], capture_output=True,
                       text=True, env=child_env(tree, pycache), cwd=tree, timeout=300)
    rows = []
    for line in r.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].strip()))
    return [f"{us / 1e3:8.1f} ms  {name}" for us, name in sorted(rows, reverse=True)[:top]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="fresh interpreters per case (best of)")
    ap.add_argument("--before", metavar="REV", help="also measure numptx at this git revision")
    ap.add_argument("--profile", action="store_true", help="print each case's heaviest modules")
    ap.add_argument("--top", type=int, default=12, help="modules listed by --profile")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error(f"--runs must be at least 1, not {args.runs}")
    with tempfile.TemporaryDirectory(prefix="numptx-bench-import-") as tmp:
        pycache = os.path.join(tmp, "pycache")
        trees = {"now": ROOT}
        if args.before:
            old = os.path.join(tmp, "before")
            os.mkdir(old)
            trees = {f"at {args.before}": before_tree(args.before, old), "now": ROOT}
        load = os.getloadavg()
        got = measure(trees, args.runs, pycache)
        load_after = os.getloadavg()
        report(got, trees, args.runs, load, load_after)
        if args.profile:
            for case, (stmt, _) in CASES.items():
                if "[numpy loaded]" in case:
                    continue
                print(f"\n{case} (now), cumulative -X importtime:")
                print("\n".join(profile(stmt, ROOT, args.top, pycache)))
    return 0


def report(got: dict, trees: dict, runs: int, load: tuple, load_after: tuple) -> None:
    print(f"fresh interpreter per run, best and median of {runs}; {sys.version.split()[0]}; "
          f"load average {load[0]:.2f} before, {load_after[0]:.2f} after")
    print(f"{'case':32} {'tree':14} {'best':>9} {'median':>9} {'modules':>8} {'numptx':>7} "
          f"{'target':>8}  met")
    for case, (_, target) in CASES.items():
        for label in trees:
            rs = got[(case, label)]
            ts = [r["s"] for r in rs]
            best = min(ts)
            met = "" if target is None else ("yes" if best <= target else "no")
            tgt = "" if target is None else f"{target:.2f} s"
            print(f"{case:32} {label:14} {best * 1e3:7.1f}ms {statistics.median(ts) * 1e3:7.1f}ms "
                  f"{rs[0]['modules']:8d} {rs[0]['numptx']:7d} {tgt:>8}  {met}")


if __name__ == "__main__":
    sys.exit(main())
