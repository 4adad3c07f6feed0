"""Review of issue 25: a user's model given as ``predictor=`` whose predictions are not one
finite number a child (NaN, too few, a column) is a SearchError naming ``predictor``; before,
NaN predictions screened the children silently in index order, too few left the last
children out of the ranking, and a 2-D column crashed with a TypeError."""
from __future__ import annotations

import numpy as np
import pytest

from numptx import search
from numptx.learn import RandomFeatureRidge
from numptx.search.genes import SearchError

OPS = ["add", "sub", "mul", "sin", "cos"]


class Odd:
    """A real ridge model whose predictions are spoiled as ``how`` says."""

    def __init__(self, how):
        self.how, self.inner = how, RandomFeatureRidge(seed=0)
        self.n_seen, self.n_features = 0, None

    def partial_fit(self, F, y):
        self.inner.partial_fit(F, y)
        self.n_seen, self.n_features = self.inner.n_seen, self.inner.n_features
        return self

    def predict(self, F):
        p = self.inner.predict(F)
        if self.how == "nan":
            p[::2] = np.nan
        return {"nan": p, "short": p[:-3], "column": p[:, None], "fine": p}[self.how]

    def rank(self, F):
        return np.argsort(self.predict(F), kind="stable")


def _run(how):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (100, 2)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] + np.sin(X[:, 0])).astype(np.float32)
    return search.regress(X, y, OPS, population=200, generations=8, seed=3, device="cpu",
                          evaluate="interpret", predictor=Odd(how))


@pytest.mark.parametrize("how, what", [("nan", "non-finite"), ("short", r"shape \("),
                                       ("column", r"shape \(")])
def test_bad_predictions_of_a_users_model_name_the_predictor(how, what):
    with pytest.raises(SearchError, match=f"predictor=.*{what}"):
        _run(how)


def test_a_users_model_of_good_predictions_screens():
    r = _run("fine")
    assert any(c is not None for c in r.rank_correlations)
