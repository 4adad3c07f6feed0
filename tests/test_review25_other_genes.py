"""Review of issue 25 (its "Bad input"): a model given to a search whose genes differ from the
ones it was trained on is a SearchError naming ``predictor``, raised before any scoring. The
word features have the same width for any genes, so before the fix a ridge model trained on
one search went on screening another's children silently with features that meant other
things."""
from __future__ import annotations

import numpy as np
import pytest

from numptx import search
from numptx.learn import RandomFeatureRidge
from numptx.search.genes import SearchError

KW = dict(population=200, generations=6, seed=3, device="cpu", evaluate="interpret")


def _data(cols):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (100, cols)).astype(np.float32)
    return X, (X[:, 0] * X[:, 1] + np.sin(X[:, 0])).astype(np.float32)


def test_a_model_trained_on_other_genes_names_the_predictor():
    model = RandomFeatureRidge(seed=0)
    X, y = _data(2)
    search.regress(X, y, ["add", "sub", "mul", "sin"], predictor=model, **KW)
    assert model.n_seen > 0
    X3, y3 = _data(3)
    with pytest.raises(SearchError, match="predictor=.*learned from a search of Genes"):
        search.regress(X3, y3, ["add", "mul", "div"], predictor=model, **KW)
    with pytest.raises(SearchError, match="predictor=.*learned from a search of Genes"):
        search.regress(X, y, ["add", "sub", "mul", "cos"], predictor=model, **KW)


def test_a_model_of_another_feature_width_names_the_predictor():
    model = RandomFeatureRidge(seed=0).partial_fit(np.ones((4, 5)), np.arange(4.0))
    X, y = _data(2)
    with pytest.raises(SearchError, match="predictor=.*5 features a row"):
        search.regress(X, y, ["add", "mul"], predictor=model, **KW)


def test_a_model_trained_on_the_same_genes_goes_on_learning():
    model = RandomFeatureRidge(seed=0)
    X, y = _data(2)
    search.regress(X, y, ["add", "sub", "mul", "sin"], predictor=model, **KW)
    seen = model.n_seen
    r = search.regress(X, y, ["add", "sub", "mul", "sin"], predictor=model, **(KW | {"seed": 4}))
    assert model.n_seen > seen and r.best is not None
