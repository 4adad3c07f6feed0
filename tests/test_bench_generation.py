"""benchmarks/bench_generation.py runs, and two runs of one checkout report the same
population (what it compares across checkouts)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_generation_reports_the_same_population_twice():
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_generation.py"), "--root", str(ROOT),
           "--generations", "2", "--problems", "Nguyen-4", "Nguyen-4"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
    assert f"numptx from {ROOT / 'numptx'}" in out
    hashes = re.findall(r"Nguyen-4: seed 0, 2 generations, .* population ([0-9a-f]{12}), CPU", out)
    assert len(hashes) == 2 and hashes[0] == hashes[1]


def test_bench_generation_takes_seeds_and_regress_arguments_and_refuses_bad_ones():
    script = str(ROOT / "benchmarks" / "bench_generation.py")
    cmd = [sys.executable, script, "--root", str(ROOT), "--generations", "2", "--problems",
           "Nguyen-4", "--seeds", "0", "1", "--numptx-args", '{"variation": "tree"}']
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
    assert re.findall(r"Nguyen-4: seed (\d), 2 generations", out) == ["0", "1"]
    assert re.search(r'mean log10\(1 - R²\) -?[0-9.]+ over 2 runs, .*"variation": "tree"', out)
    for bad, why in (("{variation", "not JSON"), ('["tree"]', "a JSON object"),
                     ('{"seed": 3}', "the seed is --seeds")):
        r = subprocess.run(cmd[:-1] + [bad], capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and why in r.stderr, (bad, r.stderr[-300:])
