"""Review 29: defects found in the search's input edges (check_scale, user_stacklevel) and in
pearson's flat rule taken on the prediction's own mean square (every path: the interpreter,
the CPU score, the kernel's sums, the NumPy and C fits)."""
from __future__ import annotations

import numpy as np
import pytest

from numptx import search
from numptx.jit.populations.fitness import _score, losses_from_sums
from numptx.jit.populations.fitness_interpret import losses_of_predictions


def _offset_input(dtype=np.float64):
    """x0 a float64 input at a large offset (1e7 + U(0, 1): easting in metres, a timestamp),
    x1 of unit scale; y follows x0 (tomorrow's value from today's)."""
    X = np.random.default_rng(0).uniform(0, 1, (100, 2))
    X[:, 0] += 1e7
    return X.astype(dtype), (X[:, 0] + 0.5 * X[:, 1] + X[:, 1] ** 2).astype(dtype)


def _sums(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The fitness kernel's sums (s0, s1, s2 of q = p - mean y, non-finite rows) in float64."""
    q = p.astype(np.float64) - y.astype(np.float64).mean()
    dy = y.astype(np.float64) - y.astype(np.float64).mean()
    return np.stack([q.sum(1), (q * q).sum(1), (q @ dy)[:, None].sum(1),
                     np.zeros(len(q))], axis=1)


@pytest.mark.parametrize("fit_method", ["lm", "es"])
def test_an_input_at_a_large_offset_is_not_flat(fit_method):
    """Before: x0 = 1e7 + U(0, 1) in float64 varies by 1e-15 of its own mean square, below
    PEARSON_FLAT (1e-12): every program of x0 scored +inf, and the search ignored x0 (loss
    0.08, the variance of x0's part; the rule before 74728c8 found it, loss 3e-10)."""
    X, y = _offset_input()
    r = search.regress(X, y, ["add", "mul"], seed=0, population=100, generations=8,
                       device="cpu", fit_method=fit_method)
    assert "x0" in r.best.formula, r.best.formula
    assert r.best.loss < 0.01                 # x0 ignored: 0.08


def test_the_paths_agree_on_a_float64_input_at_an_offset():
    X, y = _offset_input()
    p = np.stack([X[:, 0], X[:, 0] + 0.5 * X[:, 1], np.full(100, 1e7)])
    interp = losses_of_predictions(p, y, "pearson")
    cpu = np.array([_score(row, y, "pearson") for row in p])
    sums = losses_from_sums(_sums(p, y), y, "pearson")
    assert np.isfinite(interp[:2]).all() and np.isinf(interp[2])
    np.testing.assert_allclose(cpu, interp, rtol=1e-12)
    # (q = p - mean y rounds at 1e7's ulp, 2e-9: the sums' resolution, as the kernel's)
    np.testing.assert_allclose(sums, interp, rtol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_constant_up_to_rounding_stays_flat_on_every_path(dtype):
    """A constant computed through rounding: up to 4 ulps of noise on its value."""
    X, y = _offset_input(dtype)
    rng = np.random.default_rng(1)
    for c in (1e7, 3.0, 1e-3):
        p = np.full((1, 100), c, dtype)
        for _ in range(4):
            up = rng.integers(0, 2, 100).astype(bool)
            p[0, up] = np.nextafter(p[0, up], dtype(np.inf))
        assert np.ptp(p) > 0                  # it does vary, by rounding
        assert np.isinf(losses_of_predictions(p, y, "pearson")).all()
        assert _score(p[0], y, "pearson") == np.inf
        assert np.isinf(losses_from_sums(_sums(p, y), y, "pearson")).all()


@pytest.mark.parametrize("offset", [1e3, 1e4, 1e5, 1e6, 3e6, 1e7])
def test_the_sums_score_no_loss_of_rounding_at_an_offset(offset):
    """The kernel's sums (moments about y's mean) against the interpreter's two-pass moments:
    within 1e-6 or +inf (flat: not resolved), never a finite loss of rounding. Before, with
    SUMS_ROUNDING at 64 float64 epsilons, y = 3e6 + x0*x1 + x1 scored its exact program
    0.0046 (the interpreter: 2e-16), 1e6 scored it 6.6e-4."""
    X = np.random.default_rng(0).uniform(-1, 1, (100, 2))
    y = X[:, 0] * X[:, 1] + X[:, 1] + offset
    p = np.stack([X[:, 0] * X[:, 1] + X[:, 1], X[:, 1], X[:, 0]])
    interp = losses_of_predictions(p, y, "pearson")
    sums = losses_from_sums(_sums(p, y), y, "pearson")
    assert np.isfinite(interp).all()
    ok = np.isinf(sums) | (np.abs(sums - interp) <= 1e-6)
    assert ok.all(), (sums, interp)
