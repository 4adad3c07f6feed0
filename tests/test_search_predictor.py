"""A search with a predictor (``predictor=``, issue 25): a numptx.learn model, trained online on
every scored child, screens the next generation's children; only the predicted best share (and
an exploration share) is scored and fitted. Real searches on the CPU interpreter throughout."""
from __future__ import annotations

import math

import numpy as np
import pytest

from numptx import search
from numptx.learn import RandomFeatureRidge
from numptx.search import screening
from numptx.search.genes import SearchError

OPS = ["add", "sub", "mul", "sin", "cos"]


def _data(n: int = 200, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 2)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] + np.sin(X[:, 0])).astype(np.float32)
    return X, y


def _run(**kw):
    X, y = _data()
    args = dict(population=200, generations=8, seed=3, device="cpu", evaluate="interpret")
    return search.regress(X, y, OPS, **(args | kw))


def test_a_screen_that_lets_everything_through_changes_nothing():
    """screen=1, explore=0: every new child is scored, so the run is the run without a
    predictor, bit for bit (the screen draws from a random generator of its own)."""
    plain = _run()
    full = _run(predictor=True, screen=1.0, explore=0.0)
    assert full.best.loss == plain.best.loss and full.best.program == plain.best.program
    assert full.evaluated == plain.evaluated
    assert [g.best for g in full.history] == [g.best for g in plain.history]
    assert plain.rank_correlations is None and len(full.rank_correlations) == 8
    assert full.timings["predict"] > 0 and "predict" not in plain.timings


def test_screening_scores_fewer_children_and_reports_its_correlation():
    plain = _run(generations=12)
    screened = _run(generations=12, predictor=True, screen=0.25, explore=0.05)
    assert screened.evaluated < 0.7 * plain.evaluated, (screened.evaluated, plain.evaluated)
    rc = [r for r in screened.rank_correlations if r is not None]
    assert rc, "no generation screened (the model never warmed up)"
    assert all(-1.0 <= r <= 1.0 for r in rc)
    assert np.mean(rc) > 0.3, rc              # the model ranks children better than chance
    # the children screened out are not cached: a later copy is scored
    s = screened._search
    assert all(math.isfinite(v) or v == math.inf for v in s.cache.values())


def test_the_same_seed_gives_the_same_screened_run():
    a = _run(predictor=True)
    b = _run(predictor=True)
    assert a.best.program == b.best.program and a.best.loss == b.best.loss
    assert a.evaluated == b.evaluated
    assert a.rank_correlations == b.rank_correlations


def test_a_screened_search_solves_a_hidden_formula():
    X, y = _data(300, seed=1)
    r = search.regress(X, y, OPS, population=300, generations=60, seed=0, device="cpu",
                       evaluate="interpret", predictor=True,
                       target=1e-8 * float(np.var(y.astype(np.float64))))
    assert r.best.loss <= 1e-6 * float(np.var(y.astype(np.float64))), r.best.formula


@pytest.mark.parametrize("model", ["ridge", "mlp"])
def test_checkpoint_and_resume_are_exact_with_a_predictor(tmp_path, model):
    whole = _run(generations=8, predictor=model)
    half = _run(generations=4, predictor=model)
    path = tmp_path / "run.nxck"
    half.save(path)
    resumed = search.resume(path, generations=4)
    assert resumed.best.program == whole.best.program and resumed.best.loss == whole.best.loss
    assert resumed.evaluated == whole.evaluated
    assert resumed.rank_correlations == whole.rank_correlations


def test_a_users_model_object_screens_and_cannot_be_checkpointed(tmp_path):
    class Mine:                       # numptx.learn's protocol, by duck typing
        def __init__(self):
            self.inner = RandomFeatureRidge(features=32, seed=1)
            self.n_seen, self.n_features = 0, None

        def partial_fit(self, F, y):
            self.inner.partial_fit(F, y)
            self.n_seen, self.n_features = self.inner.n_seen, self.inner.n_features
            return self

        def predict(self, F):
            return self.inner.predict(F)

        def rank(self, F):
            return self.inner.rank(F)
    r = _run(predictor=Mine())
    assert r.best is not None and r.timings["predict"] > 0
    with pytest.raises(SearchError, match="checkpoint keeps numptx.learn's models"):
        r.save(tmp_path / "x.nxck")


@pytest.mark.parametrize("kw, match", [
    (dict(predictor="svm"), "predictor='svm'"),
    (dict(predictor=object()), "partial_fit, predict and rank"),
    (dict(predictor=True, screen=0.0), "screen=0.0"),
    (dict(predictor=True, screen=1.5), "screen=1.5"),
    (dict(predictor=True, explore=-0.1), "explore=-0.1"),
    (dict(predictor=True, survivors="children", islands=1), "survivors='plus'"),
])
def test_bad_predictor_options_name_the_option(kw, match):
    X, y = _data(50)
    with pytest.raises(SearchError, match=match):
        search.regress(X, y, OPS, population=20, generations=1, device="cpu", **kw)


def test_target_of_clips_and_marks_non_finite_losses():
    t = screening.target_of(np.array([0.0, 1e-20, 1.0, 1e9, np.inf, np.nan]), 1.0)
    assert t.tolist() == [screening.LOW, screening.LOW, 0.0, screening.HIGH,
                          screening.HIGH + 1, screening.HIGH + 1]


# ---- evolve: a user's fitness of built packs; the predictor reads the words alone ---------
_EVOLVE_SRC = r'''
extern "C" __global__ void fit(float* out, const float* X, int n) {
    unsigned cand = blockIdx.y;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float t = X[i], p;
        PTX_INJECT("f", PTX_IN(U32, cand), PTX_IN(F32, t), PTX_OUT(F32, p));
        out[(size_t)cand * n + i] = p;
    }
}'''


def _evolve_fitness(tmpl, scored: list):
    """Each candidate of each built pack run by the emulator: its error against t*t - t."""
    import numptx as nx
    site = tmpl.sites["f"]
    t = np.linspace(-1, 1, 16, dtype=np.float32)

    def fitness(packs):
        out = []
        for p in packs:
            assert p.cubin[:4] == b"\x7fELF"                  # built for real
            for stub in p.candidates:
                got = nx.emulate(stub, {site["t"].reg: t, site["cand"].reg: np.uint32(0)},
                                 [site["p"].reg])[site["p"].reg]
                out.append(float(np.mean((got - (t * t - t)) ** 2)))
        scored.append(len(out))
        return out
    return fitness


def test_evolve_screens_children_by_their_words(tmp_path):
    import numptx as nx
    tmpl = nx.CudaTemplate(_EVOLVE_SRC, entry="fit")
    kw = dict(ops=["add", "mul", "sub"], population=48, generations=30, seed=0,
              survivors="plus")
    plain_n: list = []
    plain = search.evolve(tmpl, "f", _evolve_fitness(tmpl, plain_n), **kw)
    screened_n: list = []
    screened = search.evolve(tmpl, "f", _evolve_fitness(tmpl, screened_n), predictor=True,
                             **kw)
    assert sum(screened_n) < 0.8 * sum(plain_n), (sum(screened_n), sum(plain_n))
    assert any(r is not None for r in screened.rank_correlations)
    assert math.isfinite(screened.best.loss) and plain.rank_correlations is None
    screened.save(tmp_path / "e.nxck")               # the model goes into the checkpoint
    with pytest.raises(SearchError, match="survivors='plus'"):
        search.evolve(tmpl, "f", _evolve_fitness(tmpl, []), predictor=True, population=8,
                      generations=1)
