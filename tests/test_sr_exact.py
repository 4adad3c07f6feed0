"""benchmarks/sr_exact.py: SRBench's exact-recovery check of the --compare runs (issue 26,
item 0). Real sympy, real parsers (numptx's formula grammar through search.export.sympy_of,
Operon's infix text), a real worker process for the time box; no search is run."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sympy")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import sr_compare  # noqa: E402
import sr_exact  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results_sr_compare_2026-11-29c.json"


def test_every_problem_has_a_true_formula_equal_to_its_numpy_function():
    import sympy
    assert set(sr_exact.TRUE) == set(sr_compare.PROBLEMS)
    for name, p in sr_compare.PROBLEMS.items():
        lo, hi = np.array(p.lo, float), np.array(p.hi, float)
        X = np.random.default_rng(7).uniform(lo, hi, (64, len(lo)))
        f = sympy.lambdify(sympy.symbols(sr_exact.names_of(name)), sr_exact.true_model(name),
                           "numpy")
        got = np.broadcast_to(f(*X.T), (len(X),))
        np.testing.assert_allclose(got, p.f(X), rtol=1e-12, atol=1e-12, err_msg=name)
    # exact numbers: the true formulas hold no floats (3/2 a Rational, pi sympy's)
    assert not any(sr_exact.true_model(n).atoms(sympy.Float) for n in sr_exact.TRUE)


@pytest.mark.parametrize("engine, problem, text, rule", [
    # numptx's formula grammar (sympy_of): a bare formula, a factor and an offset that rounds away
    ("numptx", "Feynman-I.25.13", "x0/x1", None),
    ("numptx", "Feynman-I.39.1", "x0*x1*1.5 - 1.25823e-07", None),
    ("numptx", "Nguyen-5", "sin(x0**2)*cos(x0) + 2.5", "difference is constant"),
    ("numptx", "Feynman-I.18.4", "fma(x0, x2, x1*x3)/(x0 + x1)*0.25", "ratio is constant"),
    ("numptx", "Nguyen-1", "(_t0 := x0*x0)*x0 + _t0 + x0", None),
    ("numptx", "Feynman-II.3.24", "x0/(0.996625*x1)/(0.976112*x1)*0.0774144 + 1.85466e-09",
     "ratio is constant"),
    # Operon's infix text: its linear scaling, ^ powers, max/min, a constant that rounds to 0.5
    ("Operon", "Feynman-I.12.1", "-54.3727 * (((1.105963 * x1) * ((-0.016629) * x0))) + "
     "5.83294e-08", "ratio is constant"),
    ("Operon", "Nguyen-1", "1 * (((x0 ^ 3) + (x0 ^ 2)) + max(x0, x0)) + -1.5", None),
    ("Operon", "Nguyen-8", "1 * (exp((sin(((-0.619939) / (-1.183997))) * "
     "log((1.000000 * x0))))) + 3.69325e-08", None),
])
def test_exact_recoveries_of_both_engines(engine, problem, text, rule):
    r = sr_exact.check(engine, problem, text)
    assert r["exact"] is True, r
    if rule is not None:
        assert r["rule"] == rule, r


@pytest.mark.parametrize("engine, problem, text, why", [
    # a near-miss polynomial: its coefficient is off in the 5th decimal place, past the rounding
    ("numptx", "Nguyen-1", "x0**3 + x0**2 + 1.00001*x0", "neither"),
    ("Operon", "Nguyen-2", "((x0 ^ 4) + (1.0 * (x0 ^ 3))) + ((0.99999 * (x0 ^ 2)) + x0)",
     "neither"),
    ("numptx", "Nguyen-8", "exp(0.499984*log(x0))", "neither"),       # x0**0.499984
    ("numptx", "Nguyen-6", "sin(x0) + cos(x0 + x0**2)", "neither"),   # another function
    ("Operon", "Feynman-I.14.3", "(x0 * x1) + x2", "neither"),        # another structure
    # a constant model is no solution even though its ratio (0) is a constant: SRBench's clean-up
    ("Operon", "Nguyen-1", "0 * x0", "model is constant 0"),
])
def test_not_exact(engine, problem, text, why):
    r = sr_exact.check(engine, problem, text)
    assert r["exact"] is False and r["rule"].startswith(why), r


@pytest.mark.parametrize("engine, text, what", [
    ("Operon", "foo(x0)", "unknown function 'foo'"),                  # a function Operon never prints
    ("Operon", "x0 +", "not infix text"),
    ("Operon", "x7 * x0", "unknown name 'x7'"),         # Nguyen-1 has one input
    ("Operon", "x0.real", "unsupported syntax"),        # no attribute access: nothing evaluated
    ("numptx", "x0 +", "SearchError"),
])
def test_text_that_does_not_parse_is_an_error_not_exact(engine, text, what):
    r = sr_exact.check(engine, "Nguyen-1", text)
    assert r["exact"] is False and what in r["error"], r


def test_a_slow_check_times_out_and_the_next_check_gets_a_new_worker():
    runs = json.loads(RESULTS.read_text())
    # Operon's solved Keijzer-4 model: over 100 nodes; sympy's simplify takes seconds on it
    big = next(r for r in runs if r["engine"] == "Operon" and r["problem"] == "Keijzer-4"
               and r["solved"])
    with sr_exact.Checker(timeout=0.2) as c:
        late = c.check("Operon", "Keijzer-4", big["model"])
        assert late["timeout"] is True and late["exact"] is False, late
        after = c.check("numptx", "Feynman-I.25.13", "x0/x1")   # a new worker answers
    assert after["exact"] is True and "timeout" not in after, after
    with pytest.raises(ValueError, match="timeout=0"):
        sr_exact.Checker(timeout=0)


def test_the_cli_counts_solved_exact_and_timeouts_per_engine(tmp_path, capsys):
    runs = [
        {"engine": "numptx", "problem": "Feynman-I.25.13", "seed": 0, "solved": True,
         "test_r2": 1.0, "model": "x0/x1"},
        {"engine": "numptx", "problem": "Feynman-I.25.13", "seed": 1, "solved": False,
         "test_r2": 0.9, "model": "x0 + x1"},
        {"engine": "Operon", "problem": "Feynman-I.25.13", "seed": 0, "solved": True,
         "test_r2": 1.0, "model": "1 * ((x0 / x1) + (x0 * 1e-05))"},
    ]
    src, out = tmp_path / "runs.json", tmp_path / "verdicts.json"
    src.write_text(json.dumps(runs))
    vs = sr_exact.main([str(src), "--json", str(out), "--quiet"])
    assert [v["verdict"] for v in vs] == ["exact", "unsolved", "not exact"]
    assert json.loads(out.read_text()) == vs
    text = capsys.readouterr().out
    assert "| Feynman-I.25.13 | 1/2 | 1 | 0 | 1/1 | 0 | 0 |" in text, text
    assert "| **all** | 1/2 | 1 | 0 | 1/1 | 0 | 0 |" in text, text


def test_a_file_that_is_not_a_runs_list_is_refused_by_name(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"engine": "numptx"}))
    with pytest.raises(SystemExit, match="bad.json: not a list of runs"):
        sr_exact.main([str(bad)])
    bad.write_text(json.dumps([{"engine": "numptx", "problem": "Nguyen-1"}]))
    with pytest.raises(SystemExit, match="run 0 has no seed, solved, model"):
        sr_exact.main([str(bad)])
