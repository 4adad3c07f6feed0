"""Review of issue 25: RandomFeatureRidge standardizes a first batch whose columns hold values
past ~1e154 (finite float64). Before the fix the column's std overflowed to inf: a column of
1e200s was standardized to 0 (the feature dropped, silently), one of +-1.7e308 gave NaN
features and numpy's LinAlgError ("SVD did not converge")."""
from __future__ import annotations

import numpy as np

from numptx.learn import RandomFeatureRidge

F = np.random.default_rng(0).normal(size=(300, 3))
Y = np.sin(F[:, 0]) + F[:, 1]


def test_a_column_of_huge_values_is_standardized_like_its_unscaled_self():
    ref = RandomFeatureRidge(seed=0).partial_fit(F, Y).predict(F)
    G = F.copy()
    G[:, 0] *= 1e200
    got = RandomFeatureRidge(seed=0).partial_fit(G, Y).predict(G)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_a_column_at_float64s_limit_gives_finite_predictions():
    G = F.copy()
    G[:, 0] = 1.7e308 * np.sign(F[:, 0])
    pred = RandomFeatureRidge(seed=0).partial_fit(G, Y).predict(G)
    assert np.isfinite(pred).all()
    # the sign of column 0 is what it holds: it still informs the fit
    assert np.corrcoef(pred, np.sign(F[:, 0]))[0, 1] > 0.3
