"""Review of a1a7d6a (bench_search.py --compare --numptx-args): arguments that are not a JSON
object of regress arguments are refused when parsed, naming the flag, before any run (they
were a JSONDecodeError traceback, or a TypeError deep in the first run after the warm-up)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_search  # noqa: E402
import sr_compare  # noqa: E402


@pytest.mark.parametrize("bad", ["16", "[1, 2]", "{fit_steps: 16}", '"population"'])
def test_numptx_args_not_a_json_object_is_a_usage_error(bad, monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(sr_compare, "compare", lambda *a, **k: ran.append(k))
    monkeypatch.setattr(sys, "argv", ["bench_search.py", "--compare", "--numptx-args", bad])
    with pytest.raises(SystemExit) as e:
        bench_search.main()
    assert e.value.code == 2 and not ran
    assert "--numptx-args" in capsys.readouterr().err


def test_numptx_args_a_json_object_reaches_the_comparison(monkeypatch):
    ran = []
    monkeypatch.setattr(sr_compare, "compare", lambda *a, **k: ran.append(k))
    monkeypatch.setattr(sys, "argv", ["bench_search.py", "--compare", "--numptx-args",
                                      '{"fit_steps": 16}'])
    bench_search.main()
    assert ran[0]["numptx_args"] == {"fit_steps": 16}


def test_operon_population_must_be_positive():
    # before: --operon-population 0 fell back to --population, -5 was taken
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_search.py"
    for bad in ("0", "-5", "x"):
        r = subprocess.run([sys.executable, str(script), "--compare", "--operon-population", bad],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and "--operon-population" in r.stderr
