"""A target far from zero (y = 1e7 + f(x)): linear scaling's pearson score and the fits called
every program of unit-scale inputs flat (constant up to rounding), because their rule took the
prediction's mean square about the target's mean; the search returned the constant 1e7. The
rule now takes the prediction's own mean square, on every path (the CPU score, the
interpreter's, the GPU kernel's sums, the NumPy and C Levenberg–Marquardt fits)."""
from __future__ import annotations

import numpy as np
import pytest

from numptx import search
from numptx.jit.populations.fitness import losses_from_sums
from numptx.jit.populations.fitness_interpret import losses_of_predictions, pearson_flat


def _data(offset: float, dtype):
    X = np.random.default_rng(0).uniform(-1, 1, (100, 2))
    y = X[:, 0] * X[:, 1] + X[:, 1] + offset
    return X.astype(dtype), y.astype(dtype), y


@pytest.mark.parametrize("offset, dtype", [(1e7, np.float64), (1e10, np.float64),
                                           (1e4, np.float32), (300.0, np.float32)])
@pytest.mark.parametrize("fit_method", ["lm", "es"])
def test_a_target_with_a_large_offset_is_searched_not_returned_as_a_constant(offset, dtype,
                                                                          fit_method):
    X, y, exact = _data(offset, dtype)
    r = search.regress(X, y, ["add", "mul"], seed=0, population=100, generations=8,
                       device="cpu", fit_method=fit_method)
    assert "x0" in r.best.formula and "x1" in r.best.formula, r.best.formula
    # the fit explains the variation: within the data type's rounding at the offset
    err = np.abs(r.best.predict(X).astype(np.float64) - exact)
    assert err.max() < 1e-3 * (1 + offset * np.finfo(dtype).eps * 1e3)


def test_the_flat_rule_reads_the_predictions_own_scale():
    p = np.array([[0.1, -0.3, 0.7, 0.2], [5.0, 5.0, 5.0, 5.0], [1e7, 1e7 + 2e-9, 1e7, 1e7]])
    var = p.var(axis=1)
    assert pearson_flat(var, (p * p).mean(axis=1)).tolist() == [False, True, True]
    # a target at 1e7 does not make the first row flat (the rule before did); the third
    # varies by one float64 ulp of 1e7: flat (a variation of 1e-3 there is resolved)
    y = p[0] * 2 + 1e7
    got = losses_of_predictions(p, y, "pearson")
    assert got[0] == pytest.approx(0.0, abs=1e-12) and np.isinf(got[1:]).all()


def test_the_kernels_sums_give_the_interpreters_losses_at_an_offset():
    """losses_from_sums reads the GPU kernel's moments about the target's mean (s0, s1, s2 of
    q = p - c): it reaches the interpreter's losses on the same predictions."""
    rng = np.random.default_rng(1)
    y = rng.uniform(-1, 1, 64) + 1e4
    p = np.stack([y * 3 - 2e4, rng.uniform(-1, 1, 64), np.full(64, 2.0)])
    c = y.mean()
    q = p - c
    sums = np.stack([q.sum(1), (q * q).sum(1), (q * (y - c)).sum(1), np.zeros(3)], axis=1)
    want = losses_of_predictions(p, y, "pearson")
    got = losses_from_sums(sums, y, "pearson")
    assert np.isinf(want[2]) and np.isinf(got[2])          # a constant: flat on both
    assert got[:2] == pytest.approx(want[:2], rel=1e-6, abs=1e-9)


def test_where_the_sums_cannot_resolve_a_variance_they_say_flat_not_a_wrong_loss():
    """At y = 1e9 + ..., a unit-scale prediction's variance is below the rounding of moments
    about 1e9: the sums (the GPU kernel's) score it +inf, never a finite loss of garbage; the
    interpreter's two-pass moments still score it."""
    rng = np.random.default_rng(2)
    y = rng.uniform(-1, 1, 64) + 1e9
    p = (y - 1e9)[None, :] * 2
    q = p - y.mean()
    sums = np.stack([q.sum(1), (q * q).sum(1), (q * (y - y.mean())).sum(1), np.zeros(1)], axis=1)
    assert np.isinf(losses_from_sums(sums, y, "pearson")[0])
    assert losses_of_predictions(p, y, "pearson")[0] == pytest.approx(0.0, abs=1e-9)
