"""Review of issue 25: a checkpoint's ``screen`` field (a predictor's saved model) can come from
someone else, so every fault of it is a CheckpointError naming the field, at resume: an attribute
that shadows a method, a missing or extra one, a hyperparameter out of the constructor's bounds
(an unbounded allocation or loop), arrays or counters that disagree, correlations that do not
match the run's history. Before the fix these resumed and crashed later (TypeError,
AttributeError, MemoryError) or ran silently with a different model."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from numptx import search
from numptx.learn import MLP as LearnMLP, RandomFeatureRidge
from numptx.search import checkpoint as ck

OPS = ["add", "sub", "mul", "sin", "cos"]


def _saved(tmp_path, model):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (100, 2)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] + np.sin(X[:, 0])).astype(np.float32)
    r = search.regress(X, y, OPS, population=100, generations=4, seed=3, device="cpu",
                       evaluate="interpret", predictor=model)
    path = tmp_path / "run.nxck"
    r.save(path)
    return path, ck.read(str(path))


def _attr(name, value):
    return lambda s: s["attributes"].__setitem__(name, value)


FORGED = {
    "shadows predict": _attr("predict", 1),
    "an extra attribute": _attr("zzz", 1),
    "no n_seen": lambda s: s["attributes"].pop("n_seen"),
    "n_features of other genes": _attr("n_features", 7),
    "seen < 0": lambda s: s.__setitem__("seen", -5),
    "the other model": lambda s: s.__setitem__("model", "MLP" if "theta" in s["attributes"]
                                               else "RandomFeatureRidge"),
    "correlations short": lambda s: s.__setitem__("correlations", []),
    "seconds < 0": lambda s: s.__setitem__("seconds", -1.0),
    "a counter as a bool": _attr("n_seen", True),
}
RIDGE = {"features past its bound": _attr("features", 10 ** 8),
         "kind unknown": _attr("kind", "bogus"), "alpha < 0": _attr("alpha", -1.0)}
MLP = {"steps past its bound": _attr("steps", 10 ** 9), "pos past the store": _attr("pos", 10 ** 9),
       "activation unknown": _attr("activation", "bogus"),
       "a params array of another shape": lambda s: s["attributes"]["params"]["list"].__setitem__(
           0, {"array": ck.encode_array(np.zeros((3, 3), np.float32))})}


@pytest.mark.parametrize("model, edit", [("ridge", e) for e in {**FORGED, **RIDGE}]
                         + [("mlp", e) for e in {**FORGED, **MLP}])
def test_a_forged_saved_predictor_is_a_checkpoint_error(tmp_path, model, edit):
    path, st = _saved(tmp_path, model)
    forged = copy.deepcopy(st)
    {**FORGED, **RIDGE, **MLP}[edit](forged["screen"])
    ck.write(str(path), forged)
    with pytest.raises(search.CheckpointError, match="field screen"):
        search.resume(path, generations=1)


@pytest.mark.parametrize("model", ["ridge", "mlp"])
def test_an_untouched_saved_predictor_still_resumes(tmp_path, model):
    path, _ = _saved(tmp_path, model)
    r = search.resume(path, generations=1)
    assert len(r.rank_correlations) == len(r.history) == 5


@pytest.mark.parametrize("make", [
    lambda: RandomFeatureRidge(features=32, decay=0.9, kind="relu", seed=5),
    lambda: LearnMLP(hidden=(16, 8), steps=5, store=300, activation="relu", seed=2)])
def test_a_saved_model_of_other_hyperparameters_resumes_exactly(tmp_path, make):
    """The checks accept what a run saves: a numptx.learn model given as an object, of
    hyperparameters other than the defaults (its attributes' shapes follow them)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (100, 2)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] + np.sin(X[:, 0])).astype(np.float32)
    kw = dict(population=100, seed=3, device="cpu", evaluate="interpret")
    whole = search.regress(X, y, OPS, generations=6, predictor=make(), **kw)
    part = search.regress(X, y, OPS, generations=4, predictor=make(), **kw)
    part.save(tmp_path / "run.nxck")
    r = search.resume(tmp_path / "run.nxck", generations=2)
    assert r.best.loss == whole.best.loss and r.evaluated == whole.evaluated
    assert r.rank_correlations == whole.rank_correlations
