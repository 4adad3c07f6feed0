"""Adversarial review of issue 26's estimator and inputs (SymbolicRegressor, input names,
protected ops, time_limit): each test failed before the fix committed with it."""
from __future__ import annotations

import pickle
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("sklearn")

from numptx.search import SearchError, SymbolicRegressor  # noqa: E402

SMALL = dict(population=48, generations=2, random_state=0, device="cpu")


def _data(n: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X = np.random.default_rng(seed).uniform(-1, 1, (n, 2))
    return X, 3.0 * (X[:, 0] * X[:, 1] + X[:, 1]) + 5.0


def test_pearson_loss_is_refused_not_a_silently_wrong_predict():
    """loss='pearson' scores a formula up to a + b·f, so its formula (x1 + x1*x0 for
    3(x1 + x1*x0) + 5) predicted y badly: R² -3.4 on the data it fitted with loss 0. The
    estimator refuses it, naming the option and the fix (mse: the same scale-free search,
    with a and b written into the formula)."""
    X, y = _data()
    with pytest.raises(SearchError, match=r"loss='pearson'.*loss='mse'"):
        SymbolicRegressor(("add", "mul"), loss="pearson", **SMALL).fit(X, y)
    m = SymbolicRegressor(("add", "mul"), loss="mse", population=100, generations=10,
                          random_state=0, device="cpu").fit(X, y)
    assert m.score(X, y) > 0.999999


def test_renamed_dataframe_columns_warn_at_fit():
    """A DataFrame's columns the formulas cannot use as they are ('mass (kg)', 'ß') are
    renamed; regress warns which, and so does the estimator's fit (it passed the names to
    regress already mapped, so no warning was shown and 'ß' became x1 silently). The warning
    points at the caller of fit, not at numptx."""
    pd = pytest.importorskip("pandas")
    X, y = _data()
    with pytest.warns(UserWarning, match=r"'mass \(kg\)' as 'mass_kg', 'ß' as 'x1'") as rec:
        m = SymbolicRegressor(("add", "mul"), **SMALL).fit(
            pd.DataFrame(X, columns=["mass (kg)", "ß"]), y)
    assert m.input_names_ == ("mass_kg", "x1")
    assert [w.filename for w in rec if "mass_kg" in str(w.message)] == [__file__]
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # usable names: no warning
        SymbolicRegressor(("add", "mul"), **SMALL).fit(pd.DataFrame(X, columns=["a", "y"]), y)


def _no_progress(g):
    return None


@pytest.mark.parametrize("what", ["executor", "progress"])
def test_a_fitted_estimator_pickles_with_an_executor_or_a_lambda(what):
    """A pool (executor=) and a lambda (progress=) do not pickle, so a fitted estimator that
    had one did not either (TypeError, PicklingError). They are run-time helpers, not the
    model: the pickle leaves them out (None, False) and the loaded model predicts the same; a
    picklable progress function is kept."""
    X, y = _data()
    with ThreadPoolExecutor(2) as pool:
        extra = {"executor": pool} if what == "executor" else {"progress": lambda g: None}
        m = SymbolicRegressor(("add", "mul"), **extra, **SMALL).fit(X, y)
        back = pickle.loads(pickle.dumps(m))
        assert getattr(m, what) is extra[what]           # the fitted one keeps its own
    assert back.executor is None and back.progress is False
    assert np.array_equal(back.predict(X), m.predict(X))
    kept = pickle.loads(pickle.dumps(SymbolicRegressor(progress=_no_progress)))
    assert kept.progress is _no_progress


def test_f32_only_ops_on_f64_data_past_the_f32_range_name_the_op():
    """float64 X with sin: the estimator runs the search in f32 (sin has no f64 form); X
    past the f32 range was refused with "rescale the data or use float64 X", and X was
    float64 already. The error names the op that forced f32 and the fixes that work."""
    X, y = _data()
    for big_X, big_y in ((X * 1e39, y), (X, y * 1e39)):
        with pytest.raises(SearchError, match=r"'sin' has no f64 form.*(X|y) holds values "
                                              r"past the f32 range.*rescale") as e:
            SymbolicRegressor(("add", "sin"), **SMALL).fit(big_X, big_y)
        assert "use float64 X" not in str(e.value)
    assert SymbolicRegressor(("add", "mul"), **SMALL).fit(X * 1e39, y * 1e39) \
        .best_.genes.dtype == "f64"                     # no f32-only op: f64, no overflow


def test_a_fitted_aq_stays_one_gene_so_variation_keeps_it_protected():
    """aq's 1 is a constant the fitting moves; with another value the gene was no longer
    recognised (Genes.tokens matched its exact words), so crossover and mutation cut inside
    it and moved its bare sqrt/div elsewhere: a search with only add, mul, aq and sqrtabs
    returned programs such as sqrt(0.267194*x1 + 1.5955), NaN for x1 < -5.97 (seed 0,
    population 300, 25 generations). A fitted aq is one gene, and children of programs made
    of protected ops give no NaN on finite inputs."""
    from numptx import stack_ptx as sp
    from numptx.search.genes import Genes
    from numptx.search.operators import (constants_of, crossover, mutate, random_program,
                                         with_constants)
    from numptx.search.results import Candidate
    g = Genes(["add", "mul", "aq", "sqrtabs"], names=["a", "b"])
    a, b = sp.input("a"), sp.input("b")
    aq = with_constants([a, b, *g.op_words("aq")], [2.5])
    assert g.tokens(aq) == [0, 1, 2, 9]
    assert g.tokens([*aq, *g.op_words("sqrtabs")]) == [0, 1, 2, 9, 11]
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.uniform(-40, 40, (256, 2)), np.zeros((1, 2))]).astype(np.float32)
    parents = [with_constants(p, rng.uniform(0.5, 3, len(constants_of(p))))
               for p in (random_program(g, rng, length=(4, 14)) for _ in range(40))]
    for k in range(600):
        p, q = parents[k % 40], parents[(7 * k + 3) % 40]
        child = mutate(crossover(p, q, rng, genes=g), g, rng)
        with np.errstate(all="ignore"):
            out = Candidate(child, 0.0, g).predict(X)
        assert not np.isnan(out).any(), Candidate(child, 0.0, g).formula


def test_a_failed_refit_leaves_the_estimator_unfitted():
    """A refit on 3 columns that fails (time_limit=0: no formula) had already set
    n_features_in_ = 3 while best_ was the old 2-input model: predict on 3 columns then ran
    the old formula on the first two, silently. A failed fit leaves no fitted attribute:
    predict is a NotFittedError."""
    from sklearn.exceptions import NotFittedError
    X = np.random.default_rng(0).uniform(-1, 1, (60, 3))
    y = X[:, 0] * X[:, 1] + X[:, 1]
    m = SymbolicRegressor(("add", "mul"), **SMALL).fit(X[:, :2], y)
    with pytest.raises(SearchError, match="before its first generation"):
        m.set_params(time_limit=0.0).fit(X, y)
    with pytest.raises(NotFittedError):
        m.predict(X)
    assert not [k for k in vars(m) if k.endswith("_")]
    m.set_params(time_limit=None).fit(X, y)             # a later fit works as ever
    assert m.n_features_in_ == 3 and m.predict(X).shape == (60,)


def test_no_finite_loss_is_not_blamed_on_time_limit():
    """y of 1e200 (finite in float64) gives every candidate an infinite loss (the squared
    errors overflow), so the search has no model: the error said the search "stopped
    (generations) before its first generation ... give time_limit= more than None s". It
    says what happened and the fix (rescale y)."""
    X, y = _data()
    # refused before the search now (numptx.search.prepare.check_scale), naming y and the fix
    with pytest.raises(SearchError, match=r"y reaches .*rescale y") as e:
        SymbolicRegressor(("add", "mul"), **SMALL).fit(X, y * 1e200)
    assert "time_limit" not in str(e.value)
    with pytest.raises(SearchError, match="before its first generation.*time_limit"):
        SymbolicRegressor(**{**SMALL, "time_limit": 0.0}).fit(X, y)
