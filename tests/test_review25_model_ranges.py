"""Review of issue 25: the models on finite inputs at the ends of float64's range. Before the
fixes: the MLP stored a feature past float32's range as inf and predicted NaN for every row,
silently; targets past ~1e154 overflowed its standardization (predictions +-inf); ridge targets
whose sums overflow float64 gave NaN predictions, silently. Now: a LearnError naming the
argument (and the row and column), or finite predictions."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from numptx.learn import MLP, LearnError, RandomFeatureRidge

F = np.random.default_rng(0).normal(size=(200, 3))
Y = F.sum(axis=1)


def test_an_mlp_feature_past_float32_names_its_row_and_column():
    G = F.copy()
    G[7, 1] = 1e39
    model = MLP(seed=0)
    with pytest.raises(LearnError, match=r"F: row 7, column 1 .*float32"):
        model.partial_fit(G, Y)
    assert model.n_seen == 0 and model.n_features is None        # nothing learned


def test_an_mlp_learns_float32_features_at_the_edge_of_their_range():
    G = F.astype(np.float32)
    G[:, 0] = np.float32(3e38) * np.sign(G[:, 0])
    assert np.isfinite(MLP(seed=0).partial_fit(G, Y).predict(G)).all()


@pytest.mark.parametrize("scale", [1e200, 1e300])
def test_an_mlp_predicts_huge_targets_finitely(scale):
    model = MLP(seed=0, steps=50).partial_fit(F, Y * scale)
    pred = model.predict(F)
    assert np.isfinite(pred).all()
    # the same fit as on unscaled targets, scaled (standardization removes the scale)
    ref = MLP(seed=0, steps=50).partial_fit(F, Y).predict(F)
    np.testing.assert_allclose(pred / scale, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_ridge_targets_whose_sums_overflow_are_a_learn_error_and_change_nothing():
    model = RandomFeatureRidge(seed=0).partial_fit(F, Y)
    before = pickle.dumps(model)
    with pytest.raises(LearnError, match=r"y: the fit's sums overflow"):
        model.partial_fit(F, np.full(200, 1e308))
    assert pickle.dumps(model) == before
    with pytest.raises(LearnError, match=r"y: the fit's sums overflow"):
        RandomFeatureRidge(seed=0).partial_fit(F, np.full(200, 1.7e308))


def test_ridge_with_huge_but_summable_targets_stays_finite():
    pred = RandomFeatureRidge(seed=0).partial_fit(F, Y * 1e300).predict(F)
    assert np.isfinite(pred).all()
