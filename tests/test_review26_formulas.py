"""Adversarial review of issue 26's formulas (simplify, the front's rules, export): each test
failed before the fix committed with it, on the real C core, emulator and sympy."""
from __future__ import annotations

import math

import numpy as np
import pytest

from numptx import stack_ptx as sp
from numptx.search import front as F
from numptx.search.formula import MAX_POWER, evaluate
from numptx.search.genes import Genes, SearchError
from numptx.search.results import Candidate
from numptx.search.simplify import simplified


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    na, nb = np.isnan(a), np.isnan(b)
    u = np.uint32 if a.dtype == np.float32 else np.uint64
    return bool(np.array_equal(na, nb) and np.array_equal(a[~na].view(u), b[~nb].view(u)))


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("n", [MAX_POWER, MAX_POWER + 1, 70])
def test_exact_text_of_a_long_product_chain_is_bit_exact(dtype, n):
    """x*x*...*x (n factors, each mul rounded): the exact text (and numpy(), which reads it)
    evaluates bit for bit like the emulated program. Before the fix the exact mode printed
    ``x0**65``, which evaluate reads with numpy.power: ~80 % of the rows differed."""
    g = Genes(["mul"], 1, dtype=dtype)
    prog = [sp.input("x0")] + [sp.input("x0"), *g.op_words("mul")] * (n - 1)
    X = np.linspace(0.9, 1.1, 501).astype(np.float32 if dtype == "f32" else np.float64)[:, None]
    cand = Candidate(prog, 0.0, g)
    ref = cand.predict(X)
    text = simplified(prog, g, exact=True, digits=17)
    assert _same_bits(evaluate(text, X, g), ref), text
    assert _same_bits(cand.numpy()(X), ref)
    assert simplified(prog, g) == f"x0**{n}"              # the algebraic text is one power


def test_mdl_reads_a_constant_near_the_dtypes_largest():
    """A front entry whose constant is within a step of float32's largest: its description
    length is measured (a backward step), not a SearchError for the whole front ('values[0]=inf:
    not a finite f32 constant' before the fix)."""
    from numptx.search.evaluate import Evaluator
    g = Genes(["add", "mul"], 1)
    X = np.linspace(1, 2, 64, dtype=np.float32)[:, None]
    y = (3.4028e38 * 1e-38 * X[:, 0]).astype(np.float32)
    ev = Evaluator(X, y, device="cpu", evaluate="interpret")
    prog = [sp.input("x0"), g.const(1e-38), *g.op_words("mul"), g.const(3.4028e38),
            *g.op_words("mul")]
    simple = [sp.input("x0")]
    lengths = F.description_lengths([Candidate(simple, 1.0, g), Candidate(prog, 0.0, g)], ev)
    assert np.isfinite(lengths).all(), lengths


@pytest.mark.parametrize("text, want", [
    ("fmax(x0, nan)", "x0"), ("fmin(nan, x0)", "x0"), ("fmax(nan, nan)", "nan"),
    ("sat(nan)", "0"), ("sat(x0*nan)", "0"), ("fmin(fmax(x0, nan), nan)", "x0")])
def test_sympy_of_fmax_fmin_sat_of_a_nan(text, want):
    """PTX's max/min of a NaN is the other operand (formula.evaluate computes it so); sympy's
    Max/Min raise ValueError ('The argument 'nan' is not comparable') on a NaN: sympy() and
    latex() crashed on such formulas before the fix."""
    pytest.importorskip("sympy")
    from numptx.search.export import sympy_of
    assert str(sympy_of(text, ["x0"])) == want


def test_sympy_of_a_candidate_whose_fmax_folds_to_a_nan_or_zoo():
    """Random programs fold 0/0 to nan and 1/0 to sympy's zoo inside fmax: sympy() and latex()
    return (zoo kept inside an unevaluated Max), and any expression sympy itself refuses is a
    SearchError, never a bare ValueError."""
    pytest.importorskip("sympy")
    g = Genes(["max", "div", "mul", "inv", "sq"], 2)
    nan_max = [sp.input("x0"), g.const(0.0), g.const(0.0), *g.op_words("div"),
               *g.op_words("max")]
    c = Candidate(nan_max, 0.0, g)
    assert c.formula == "fmax(x0, nan)"
    assert str(c.sympy()) == "x0" and c.latex() == "x_{0}"
    zoo_max = [sp.input("x1"), sp.input("x0"), g.const(0.0), *g.op_words("mul"),
               *g.op_words("inv"), *g.op_words("max")]
    c = Candidate(zoo_max, 0.0, g)
    assert "Max" in str(c.sympy()) and isinstance(c.latex(), str)


def test_a_result_pickles_with_its_front_and_model(tmp_path):
    """A Result pickles (its search, with compiled modules and pools, is left out: 'cannot
    pickle _cffi_backend.__CDataFromBuf' before the fix): the front, the model and an mdl
    selection made before pickling come back; what needs the run says so."""
    import pickle

    from numptx import search
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, (64, 1)).astype(np.float32)
    y = (X[:, 0] * X[:, 0] + 0.5).astype(np.float32)
    r = search.regress(X, y, ["add", "mul"], population=32, generations=2, seed=0,
                       model_selection="mdl")
    got = pickle.loads(pickle.dumps(r))
    assert [(c.loss, c.complexity, c.formula) for c in got.front] == \
        [(c.loss, c.complexity, c.formula) for c in r.front]
    assert got.model.formula == r.model.formula and got.select("mdl").formula == r.model.formula
    assert got.select("accuracy").formula == r.front[-1].formula
    assert got.children_per_second == r.children_per_second
    with pytest.raises(SearchError, match="Result.save"):
        got.save(tmp_path / "run.nxck")
    r.save(tmp_path / "run.nxck")                          # the run's own result still saves
    import copy
    copy.copy(r).save(tmp_path / "copy.nxck")              # a shallow copy shares the search


def test_complexities_of_candidates_of_different_genes():
    """Candidates of two runs (an f32 op set with sin, an f64 one) measured together, as
    front.pareto does for any candidates: each with its own genes. Before the fix all were
    compiled with the first one's genes: the f64 program 2.5 + x0*x1 measured 1, not 5 (and
    kept on it), and pareto filed it as the simplest entry."""
    g32 = Genes(["add", "mul", "sin"], 2)
    g64 = Genes(["add", "mul"], 2, dtype="f64")
    a = Candidate([sp.input("x0"), *g32.op_words("sin")], 1.0, g32)
    b = Candidate([sp.input("x0"), sp.input("x1"), *g64.op_words("mul"), g64.const(2.5),
                   *g64.op_words("add")], 0.5, g64)
    from numptx.search.results import complexities_of
    assert complexities_of([a, b]).tolist() == [2, 5]
    assert [c.complexity for c in F.pareto([a, b])] == [2, 5]


@pytest.mark.parametrize("words, want", [
    (("x0", 5e-324, "x1", "mul", "div"), "x0/(4.94066e-324*x1)"),
    ((1.7e308, "x1", "mul", 1.7e308, "mul"), "1.7e+308*(1.7e+308*x1)")])
def test_the_algebraic_text_keeps_constants_whose_product_overflows(words, want):
    """f64 constants combined in float64: 1/5e-324 and 1.7e308**2 overflow, and the
    algebraic text (what sympy() reads) said inf*x0/x1 and inf*x1 before the fix, a formula
    that is inf (or nan) where the program is finite (x1 = 1e300: 2.02e+23*x0)."""
    g = Genes(["mul", "div"], 2, dtype="f64")
    prog = [sp.input(w) if isinstance(w, str) and w in g.names else
            g.const(w) if isinstance(w, float) else g.op_words(w) for w in words]
    prog = [op for w in prog for op in (w if isinstance(w, list) else [w])]
    assert simplified(prog, g) == want
    X = np.array([[1.0, 1e300], [3.0, 1e-310]])
    ref = Candidate(prog, 0.0, g).predict(X)
    got = evaluate(simplified(prog, g, digits=17), X, g)
    ok = np.isfinite(ref)
    assert ok.any() and np.allclose(got[ok], ref[ok], rtol=1e-12), (got, ref)
