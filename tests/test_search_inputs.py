"""What a user's data and options meet before a search (issue 26, "Other things that tripped
the run"): any input name (``y`` included, a DataFrame's columns mapped where they cannot be
used as they are), float64 data with f32-only ops, protected operators, time_limit, and
``import numptx.search`` without the optional extras (scikit-learn, pandas, sympy)."""
from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

from numptx import stack_ptx as sp
from numptx import search
from numptx.search import SearchError
from numptx.search.formula import evaluate, formula
from numptx.search.genes import OP_NAMES, PROTECTED, Genes, op_dtypes
from numptx.search.operators import random_program, with_constants
from numptx.search.prepare import input_names
from numptx.search.results import Candidate

RUN = dict(population=100, generations=8, seed=0, device="cpu")


# ---- input names ----------------------------------------------------------------------------
@pytest.mark.parametrize("evaluate_", ["interpret", "compile"])
def test_an_input_named_y(evaluate_):
    """``y`` is an input name like any other: the search finds y*x + y, its formula names y,
    and the stub (whose output register %y is that input's) predicts the target."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (200, 2)).astype(np.float32)
    target = X[:, 0] * X[:, 1] + X[:, 0]
    r = search.regress(X, target, ["add", "mul"], names=["y", "x"], evaluate=evaluate_,
                       population=60, generations=10, fit_top=0, seed=0, device="cpu")
    assert r.best.loss < 1e-10
    assert "y" in r.best.formula and "x" in r.best.formula
    assert np.allclose(r.best.predict(X), target, atol=1e-5)
    assert np.array_equal(evaluate(r.best.formula, X, r.genes), r.best.predict(X))


def test_y_reads_before_the_output_writes_it():
    """Programs where the output is y itself, y's square, or no input: the stub's %y holds
    the input until the program's value is written into it."""
    g = Genes(["add", "mul", "sq"], names=["y", "x"])
    X = np.array([[2.0, 3.0], [-1.5, 0.5]], np.float32)
    for prog, want in (([sp.input("y")], X[:, 0]),
                       ([sp.input("y"), *g.op_words("sq")], X[:, 0] ** 2),
                       ([sp.input("x"), sp.input("y"), *g.op_words("mul")], X[:, 0] * X[:, 1]),
                       ([g.const(4.0)], np.float32([4.0, 4.0]))):
        c = Candidate(prog, 0.0, g)
        assert np.array_equal(c.predict(X), want), formula(prog, g)


def test_input_names_maps_any_names():
    assert input_names(["mass (kg)", "v", "class", "2nd", "y"]) == \
        ("mass_kg", "v", "class_", "x2nd", "y")
    assert input_names(["mass (kg)", "int", "", "a", "a"]) == \
        ("mass_kg", "int_", "x2", "a", "a_2")
    assert input_names(["é", "sin", "p", "__x__", 7]) == ("e", "sin_", "p_", "x", "x4")
    # each result is accepted by Genes and the fitness kernel's names
    for names in (["mass (kg)", "int", "", "a", "a"], ["é", "sin", "p", "__x__", 7],
                  ["cand", "t", "l", "double", "nan", "y"]):
        mapped = input_names(names)
        assert len(set(mapped)) == len(mapped)
        Genes(["add"], names=mapped)


def test_dataframe_columns_name_the_inputs():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (150, 2)).astype(np.float32)
    df = pd.DataFrame(X, columns=["speed", "mass (kg)"])
    target = X[:, 0] * X[:, 1]
    with pytest.warns(UserWarning, match=r"'mass \(kg\)' as 'mass_kg'"):
        r = search.regress(df, target, ["add", "mul"], **RUN)
    assert r.genes.names == ("speed", "mass_kg")
    assert set(r.best.formula.replace("*", " ").replace("+", " ").split()) & \
        {"speed", "mass_kg"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # usable names: no warning
        r = search.regress(pd.DataFrame(X, columns=["v", "y"]), target, ["add", "mul"], **RUN)
    assert r.genes.names == ("v", "y")
    r = search.regress(df, target, ["add", "mul"], names=["a", "b"], **RUN)   # names= wins
    assert r.genes.names == ("a", "b")
    r = search.regress(pd.DataFrame(X), target, ["add", "mul"], **RUN)       # int columns
    assert r.genes.names == ("x0", "x1")


@pytest.mark.parametrize("bad", ["p", "cand", "int", "double"])
def test_a_name_the_kernel_uses_is_refused_with_the_fix(bad):
    X = np.ones((20, 2), np.float32)
    with pytest.raises(SearchError, match=rf"names=: '{bad}' is a name the fitness kernel "
                                          rf"uses.*input_names"):
        search.regress(X, X[:, 0], ["add"], names=["a", bad], **RUN)


@pytest.mark.parametrize("bad", ["é", "1x", "_x", "class", "sin", "a b"])
def test_genes_refuse_unusable_names_with_the_fix(bad):
    with pytest.raises(SearchError, match=r"names=: .*input_names\(names\)"):
        Genes(["add"], names=["a", bad])


# ---- float64 data ----------------------------------------------------------------------------
def test_f64_data_with_an_f32_only_op_says_the_fix():
    X = np.random.default_rng(2).uniform(-1, 1, (50, 1))
    with pytest.raises(SearchError, match=r"op 'sin' has no f64 form .*X is float64, so the "
                                          r"search runs in f64: pass X as float32 \(or "
                                          r"dtype='f32'\)"):
        search.regress(X, np.sin(X[:, 0]), ["add", "sin"], **RUN)
    r = search.regress(X, np.sin(X[:, 0]), ["add", "sin"], dtype="f32", **RUN)
    assert r.genes.dtype == "f32" and r.best.loss < 1e-6


# ---- protected operators ---------------------------------------------------------------------
def test_protected_forms():
    assert PROTECTED == {"sqrt": "sqrtabs", "log": "logabs", "div": "aq"}
    assert set(PROTECTED.values()) <= set(OP_NAMES)
    assert op_dtypes("sqrtabs") == op_dtypes("aq") == ("f32", "f64")
    assert op_dtypes("logabs") == ("f32",) and op_dtypes("nope") == ()
    g = Genes(["sqrtabs", "logabs", "aq", "cos"], names=["a", "b"])
    a, b = sp.input("a"), sp.input("b")
    progs = {"sqrt(abs(cos(a)))": [a, *g.op_words("cos"), *g.op_words("sqrtabs")],
             "log(abs(a))": [a, *g.op_words("logabs")],
             "a/sqrt(b**2 + 1)": [a, b, *g.op_words("aq")]}
    X = np.random.default_rng(3).uniform(-3, 3, (500, 2)).astype(np.float32)
    X[0] = (0.0, 0.0)
    want = {"sqrt(abs(cos(a)))": np.sqrt(np.abs(np.cos(X[:, 0]))),
            "log(abs(a))": np.log(np.abs(X[:, 0]), where=X[:, 0] != 0,
                                  out=np.full(500, -np.inf, np.float32)),
            "a/sqrt(b**2 + 1)": X[:, 0] / np.sqrt(X[:, 1] ** 2 + 1)}
    for text, prog in progs.items():
        c = Candidate(prog, 0.0, g)
        assert c.formula == text
        got = c.predict(X)
        assert not np.isnan(got).any(), text
        # sin/cos/lg2 are .approx forms: a few ulp from NumPy's
        assert np.allclose(got, want[text], rtol=1e-5, atol=1e-5, equal_nan=True), text
    assert np.isneginf(Candidate(progs["log(abs(a))"], 0.0, g).predict(X)[0])   # log|0|


def test_aq_stays_protected_when_its_constant_is_fitted():
    """aq's 1 is a constant the fitting may move; the abs keeps it positive: a/sqrt(|c| + b²)."""
    g = Genes(["aq"], names=["a", "b"])
    prog = with_constants([sp.input("a"), sp.input("b"), *g.op_words("aq")], [-4.0])
    X = np.array([[1.0, 0.0], [2.0, 3.0]], np.float32)
    got = Candidate(prog, 0.0, g).predict(X)
    assert np.allclose(got, X[:, 0] / np.sqrt(4.0 + X[:, 1] ** 2))


def test_protected_ops_search_stays_defined_off_its_range():
    """sqrt(cos(x)) fitted on [-1, 1] with sqrtabs: the formula found is finite on [-6, 6],
    where cos < 0 would make sqrt NaN."""
    rng = np.random.default_rng(4)
    X = rng.uniform(-1, 1, (200, 1)).astype(np.float32)
    target = np.sqrt(np.cos(X[:, 0]))
    r = search.regress(X, target, ["add", "mul", "cos", "sqrtabs", "aq"], population=200,
                       generations=10, seed=0, device="cpu")
    wide = np.linspace(-6, 6, 1001, dtype=np.float32)[:, None]
    assert r.best.loss < 1e-4
    assert np.isfinite(r.best.predict(wide)).all(), r.best.formula


def test_protected_ops_in_random_programs_give_no_nan():
    """Random programs of add, mul, cos, sqrtabs and aq give no NaN on finite inputs of
    moderate size (a product of infinities could: none at this size). Not logabs: its -inf at
    0 (as log's) can meet an inf or a 0 further on (-inf + inf, 0 * -inf)."""
    g = Genes(["add", "mul", "cos", "sqrtabs", "aq"], names=["a", "b"])
    rng = np.random.default_rng(5)
    X = rng.uniform(-2, 2, (64, 2)).astype(np.float32)
    X[0] = 0.0
    for _ in range(200):
        out = Candidate(random_program(g, rng, length=(2, 8)), 0.0, g).predict(X)
        assert not np.isnan(out).any()


# ---- time_limit ------------------------------------------------------------------------------
def test_time_limit_stops_and_says_so():
    """A run past its time_limit stops with stopped='time_limit' (no timing asserted: a
    zero limit runs no generation; a generous one does not stop the run)."""
    X = np.random.default_rng(6).uniform(-1, 1, (50, 1)).astype(np.float32)
    r = search.regress(X, X[:, 0] ** 3 + 1, ["add", "mul"], time_limit=0.0, **RUN)
    assert r.stopped == "time_limit" and r.generations == 0
    r = search.regress(X, X[:, 0] ** 3 + 1, ["add", "mul"], time_limit=3600.0, **RUN)
    assert r.stopped in ("generations", "target") and r.generations >= 1


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_protected_formulas_evaluate_like_the_stub(dtype):
    """The printed formula of random programs with the protected forms evaluates (NumPy)
    bit for bit as the stub does (the emulator), as formula.py promises for the search's ops."""
    ops = ["add", "mul", "sqrtabs", "aq"] + (["logabs", "cos"] if dtype == "f32" else [])
    g = Genes(ops, names=["y", "b"], dtype=dtype)
    rng = np.random.default_rng(7)
    npd = np.float32 if dtype == "f32" else np.float64
    X = rng.uniform(-3, 3, (100, 2)).astype(npd)
    X[0] = 0.0
    digits = 9 if dtype == "f32" else 17
    for _ in range(150):
        c = Candidate(random_program(g, rng, length=(2, 10)), 0.0, g)
        got = evaluate(formula(c.program, g, digits=digits), X, g)
        assert np.array_equal(got, c.predict(X), equal_nan=True), c.formula


# ---- optional extras ------------------------------------------------------------------------
_NO_SKLEARN = """
import sys
sys.modules["sklearn"] = None            # import sklearn raises ImportError
import numptx.search as s
assert not {"sklearn", "pandas", "sympy"} & {m.split(".")[0] for m in sys.modules
                                              if sys.modules[m] is not None}, "imported"
try:
    s.SymbolicRegressor
except s.SearchError as e:
    print(e)
"""


def test_search_imports_without_sklearn_and_the_estimator_names_the_extra():
    res = subprocess.run([sys.executable, "-c", _NO_SKLEARN], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    assert 'pip install "numptx[sklearn]"' in res.stdout


def test_candidate_predict_refuses_x_of_another_width():
    """Candidate.predict reads one column per input: another width is a SearchError naming the
    inputs (it ignored extra columns, and too few were an IndexError)."""

    from numptx.search.genes import Genes
    from numptx.search.results import Candidate
    g = Genes(["add"], 2)
    c = Candidate([sp.input("x0"), sp.input("x1"), *g.op_words("add")], 0.0, g)
    assert c.predict(np.ones((3, 2))).tolist() == [2.0, 2.0, 2.0]
    for X in (np.ones((3, 3)), np.ones((3, 1)), np.ones(3), np.ones((2, 2, 2))):
        with pytest.raises(SearchError, match=r"Candidate.predict: X of shape .*x0, x1"):
            c.predict(X)
