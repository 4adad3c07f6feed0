"""Review of a1a7d6a / c9b3b80 (benchmarks/sr_compare.py probes): the table's header names
the populations the engines ran with, a probe's own (--numptx-args '{"population": ...}',
--operon-population) included, not the protocol's that the probe replaced."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import sr_compare  # noqa: E402


def test_a_probe_header_names_the_population_it_ran(capsys):
    runs = sr_compare.compare(["Nguyen-1"], [0], ops=["add", "mul"], population=500,
                              time_cap=0.2, evaluate="interpret", operon_local=5, cpus=0,
                              json_path=None, engines=["numptx"],
                              numptx_args={"population": 16, "fit_steps": 2})
    assert [r.engine for r in runs] == ["numptx"]
    head = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("### ")]
    assert len(head) == 1
    assert "population numptx 16" in head[0] and "500" not in head[0], head[0]
    assert "Operon" not in head[0], head[0]          # one engine ran: no "against Operon"
