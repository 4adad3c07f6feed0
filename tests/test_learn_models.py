"""numptx.learn's models (issue 25, item 1): RandomFeatureRidge against its closed form in
NumPy, the MLP's gradient against finite differences, both models learning a smooth target,
determinism under a seed, pickles, rank order, spearman against a brute-force reference, and
every bad input."""
from __future__ import annotations

import doctest
import importlib
import math
import pickle

import numpy as np
import pytest

from numptx import learn
from numptx.learn import LearnError
from numptx.learn.mlp import MLP, loss_and_grad
from numptx.learn.models import Model, RandomFeatureRidge, spearman


def smooth(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """y = sin(F0) + F1^2 on uniform inputs (and a third, irrelevant column)."""
    rng = np.random.default_rng(seed)
    F = rng.uniform(-2.5, 2.5, size=(rows, 3))
    return F, np.sin(F[:, 0]) + F[:, 1] ** 2


def r2(pred: np.ndarray, y: np.ndarray) -> float:
    return 1.0 - float(np.mean((pred - y) ** 2) / np.var(y))


def fit_chunks(model, F, y, sizes):
    start = 0
    for n in sizes:
        model.partial_fit(F[start:start + n], y[start:start + n])
        start += n
    assert start == len(F)
    return model


def feature_map(model: RandomFeatureRidge, F: np.ndarray) -> np.ndarray:
    """The ridge's feature map written out from its definition (standardize, project, cos or
    relu, scale, the constant column)."""
    Z = (F - model.mean) / model.std @ model.W + model.b
    Z = np.cos(Z) if model.kind == "fourier" else np.maximum(Z, 0.0)
    return np.hstack([Z * math.sqrt(2.0 / model.features), np.ones((len(F), 1))])


# ---- RandomFeatureRidge against its closed form

@pytest.mark.parametrize("kind", ["fourier", "relu"])
def test_ridge_in_chunks_is_the_closed_form_on_all_rows(kind):
    F, y = smooth(1000, seed=1)
    model = fit_chunks(RandomFeatureRidge(features=64, alpha=0.05, kind=kind, seed=3),
                       F, y, [137, 1, 400, 262, 200])
    first = F[:137]
    np.testing.assert_array_equal(model.mean, first.mean(axis=0))
    # the features are float32 (the definition in float64 agrees to float32's precision)
    np.testing.assert_allclose(model.transform(F), feature_map(model, F), rtol=0, atol=1e-5)
    Phi = model.transform(F)
    P = np.diag(np.r_[np.full(64, 0.05), 0.0])       # the constant column is not penalized
    theta = np.linalg.solve(Phi.T @ Phi + P, Phi.T @ y)
    assert model.solver == "cholesky"
    np.testing.assert_allclose(model.theta, theta, rtol=1e-6, atol=1e-9 * np.abs(theta).max())
    magnitude = float((np.abs(Phi) @ np.abs(theta)).max())   # a float32 dot product's scale
    np.testing.assert_allclose(model.predict(F), Phi @ theta, rtol=0, atol=1e-5 * magnitude)
    F32 = F.astype(np.float32)                          # float32 input: the same features
    np.testing.assert_allclose(model.transform(F32), Phi, rtol=0, atol=1e-5)
    assert model.n_seen == 1000 and model.n_features == 3


def test_ridge_with_decay_is_the_closed_form_of_weighted_rows():
    F, y = smooth(900, seed=2)
    sizes = [300, 100, 350, 150]
    decay = 0.6
    model = fit_chunks(RandomFeatureRidge(features=48, alpha=0.02, decay=decay, seed=5),
                       F, y, sizes)
    w = np.concatenate([np.full(n, decay ** (len(sizes) - 1 - k)) for k, n in enumerate(sizes)])
    Phi = model.transform(F)
    P = np.diag(np.r_[np.full(48, 0.02), 0.0])
    theta = np.linalg.solve(Phi.T @ (w[:, None] * Phi) + P, Phi.T @ (w * y))
    np.testing.assert_allclose(model.theta, theta, rtol=1e-6, atol=1e-9 * np.abs(theta).max())
    plain = fit_chunks(RandomFeatureRidge(features=48, alpha=0.02, seed=5), F, y, sizes)
    assert not np.allclose(plain.theta, model.theta)   # the decay changed the fit


@pytest.mark.parametrize("kind", ["fourier", "relu"])
def test_ridge_generalizes_on_a_smooth_target(kind):
    F, y = smooth(2000)
    model = fit_chunks(RandomFeatureRidge(kind=kind, seed=0), F[:1500], y[:1500], [500] * 3)
    assert r2(model.predict(F[1500:]), y[1500:]) > 0.9


def test_ridge_learns_a_constant_target_through_its_unpenalized_column():
    F, _ = smooth(200)
    model = RandomFeatureRidge(alpha=10.0).partial_fit(F, np.full(200, 1e4))
    np.testing.assert_allclose(model.predict(F), 1e4, rtol=1e-6)


@pytest.mark.parametrize("index", [0, 1])
def test_huge_finite_targets_give_finite_predictions(index):
    F, y = smooth(300)
    huge = both()[index].partial_fit(F, y * 1e38)       # past float32's range once scaled
    plain = both()[index].partial_fit(F, y)
    pred = huge.predict(F)
    assert np.isfinite(pred).all()
    np.testing.assert_allclose(pred / 1e38, plain.predict(F), rtol=0, atol=1e-4 * np.ptp(y))


@pytest.mark.parametrize("index", [0, 1])
def test_rows_far_outside_the_first_batch_give_finite_predictions(index):
    F, y = smooth(300)
    model = both()[index].partial_fit(F, y)
    far = F[:4].copy()
    far[:, 0] = [1e10, -1e39, 1e300, -1e300]            # past float32 once standardized
    pred = model.predict(far)
    assert np.isfinite(pred).all()
    np.testing.assert_allclose(model.predict(far[[2, 0]]), pred[[2, 0]], rtol=1e-6)


# ---- MLP

@pytest.mark.parametrize("hidden,activation", [((4,), "tanh"), ((3, 5), "tanh"),
                                               ((4, 3), "relu")])
def test_mlp_gradient_matches_finite_differences(hidden, activation):
    rng = np.random.default_rng(0)
    sizes = (3, *hidden, 1)
    params = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        params += [rng.normal(0, 0.7, (a, b)), rng.normal(0, 0.3, b)]
    X, y = rng.normal(size=(11, 3)), rng.normal(size=11)
    loss, grads = loss_and_grad(params, X, y, activation, weight_decay=0.1)
    assert [g.shape for g in grads] == [p.shape for p in params]
    h = 1e-6
    for p, g in zip(params, grads):
        for i in np.ndindex(p.shape):
            keep = p[i]
            p[i] = keep + h
            up = loss_and_grad(params, X, y, activation, 0.1)[0]
            p[i] = keep - h
            down = loss_and_grad(params, X, y, activation, 0.1)[0]
            p[i] = keep
            assert abs((up - down) / (2 * h) - g[i]) < 1e-7 + 1e-6 * abs(g[i]), (i, g[i])
    assert loss == loss_and_grad(params, X, y, activation, 0.1)[0]


def test_mlp_training_lowers_the_loss():
    F, y = smooth(800)
    model = MLP(hidden=(32,), steps=60, seed=1).partial_fit(F, y)
    first = model.last_losses.copy()
    assert len(first) == 60 and first[-1] < 0.5 * first[0]
    model.partial_fit(F[:0], y[:0])                     # an empty batch: nothing happens
    np.testing.assert_array_equal(model.last_losses, first)
    model.partial_fit(F[:10], y[:10])                   # Adam continues where it stopped
    assert model.last_losses[0] < first[0] and model.last_losses[-1] < first[-1]
    assert model.t == 120 and model.n_seen == 810


@pytest.mark.parametrize("hidden,activation", [((64,), "tanh"), ((64, 32), "relu")])
def test_mlp_learns_a_smooth_target(hidden, activation):
    F, y = smooth(2000)
    model = fit_chunks(MLP(hidden=hidden, activation=activation, steps=60, lr=1e-2, seed=0),
                       F[:1500], y[:1500], [500, 500, 500])
    assert r2(model.predict(F[1500:]), y[1500:]) > 0.8


def test_mlp_store_keeps_the_latest_rows():
    F, y = smooth(250)
    F = F.astype(np.float32)                            # the buffer's dtype
    model = fit_chunks(MLP(store=100, steps=1), F, y, [60, 70, 90, 30])
    assert model.count == 100
    kept = {tuple(r) for r in model.X[:model.count]}
    assert kept == {tuple(r) for r in F[150:]}
    assert {float(v) for v in model.Y[:model.count]} == {float(v) for v in y[150:]}
    np.testing.assert_allclose(model.x_mean, F[150:].mean(axis=0, dtype=np.float64))
    np.testing.assert_allclose(model.x_std, F[150:].std(axis=0, dtype=np.float64), rtol=1e-5)
    big = MLP(store=50, steps=1).partial_fit(F, y)      # one batch larger than the store
    assert {tuple(r) for r in big.X} == {tuple(r) for r in F[200:]}


def test_mlp_batch_trains_on_the_new_rows_and_a_replay_sample():
    F, y = smooth(1200)
    F = F.astype(np.float32)
    model = fit_chunks(MLP(store=1000, steps=1, batch=300, seed=3), F, y, [400, 400, 400])
    rows = model._rows(100)                      # what the next update of 100 rows trains on
    assert rows is not None and len(rows) == 300 == len(set(rows.tolist()))
    assert set(((model.pos - 1 - np.arange(100)) % 1000).tolist()) <= set(rows.tolist())
    assert rows.max() < model.count
    np.testing.assert_array_equal(rows, model._rows(100))        # seeded by (seed, steps)
    assert model._rows(400).tolist() == ((model.pos - 1 - np.arange(300)) % 1000).tolist()
    small = MLP(store=1000, steps=1, batch=5000).partial_fit(F[:400], y[:400])
    assert small._rows(400) is None              # a buffer within the batch: all of it
    # the standardization stays the buffer's, whatever the batch
    np.testing.assert_allclose(model.x_mean, model.X[:model.count].mean(axis=0, dtype=np.float64))


def test_mlp_batch_learns_and_is_deterministic():
    F, y = smooth(3000)
    make = lambda: MLP(hidden=(64,), steps=20, batch=512, seed=0)    # noqa: E731
    a = fit_chunks(make(), F[:2500], y[:2500], [500] * 5)
    b = fit_chunks(make(), F[:2500], y[:2500], [500] * 5)
    assert a.predict(F[2500:]).tobytes() == b.predict(F[2500:]).tobytes()
    assert r2(a.predict(F[2500:]), y[2500:]) > 0.7
    assert "batch=512" in repr(a)
    with pytest.raises(LearnError, match="batch"):
        MLP(batch=0)


# ---- both models: the seam, determinism, pickles, rank

def both(seed: int = 0):
    return [RandomFeatureRidge(features=64, seed=seed), MLP(hidden=(16,), steps=15, seed=seed)]


@pytest.mark.parametrize("index", [0, 1])
def test_same_seed_same_bits_and_another_seed_differs(index):
    F, y = smooth(600)
    a = fit_chunks(both(7)[index], F[:400], y[:400], [200, 200])
    b = fit_chunks(both(7)[index], F[:400], y[:400], [200, 200])
    c = fit_chunks(both(8)[index], F[:400], y[:400], [200, 200])
    assert isinstance(a, Model)
    assert a.predict(F[400:]).tobytes() == b.predict(F[400:]).tobytes()
    assert not np.array_equal(a.predict(F[400:]), c.predict(F[400:]))


@pytest.mark.parametrize("index", [0, 1])
def test_pickle_round_trip_predicts_and_keeps_learning_the_same(index):
    F, y = smooth(900)
    model = both()[index].partial_fit(F[:300], y[:300])
    twin = pickle.loads(pickle.dumps(model))
    assert twin.predict(F[600:]).tobytes() == model.predict(F[600:]).tobytes()
    model.partial_fit(F[300:600], y[300:600])
    twin.partial_fit(F[300:600], y[300:600])
    assert twin.predict(F[600:]).tobytes() == model.predict(F[600:]).tobytes()
    assert twin.n_seen == model.n_seen == 600


@pytest.mark.parametrize("index", [0, 1])
def test_rank_is_lowest_prediction_first_ties_by_index(index):
    F, y = smooth(300)
    model = both()[index].partial_fit(F, y)
    Q = np.vstack([F[:20], F[5:6], F[:3]])              # rows 5 and 20, 0 and 21 ... tie
    order = model.rank(Q)
    assert order.dtype == np.int64 and sorted(order.tolist()) == list(range(len(Q)))
    pred = model.predict(Q)
    assert np.all(np.diff(pred[order]) >= 0)
    np.testing.assert_array_equal(order, np.argsort(pred, kind="stable"))
    pos = {int(i): k for k, i in enumerate(order)}
    assert pos[5] < pos[20] and pos[0] < pos[21] and pos[2] < pos[23]
    assert model.predict(F[:0]).shape == (0,) and model.rank(F[:0]).shape == (0,)


@pytest.mark.parametrize("name", ["numptx.learn.models", "numptx.learn.mlp",
                                  "numptx.learn.checks"])
def test_module_docstrings_run(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0 and result.attempted > 0, name


def test_the_facade_names_the_same_objects():
    assert learn.RandomFeatureRidge is RandomFeatureRidge and learn.MLP is MLP
    assert learn.spearman is spearman and learn.Model is Model


# ---- spearman

def brute_spearman(a, b) -> float:
    def ranks(x):
        return np.array([sum(v < u for v in x) + (sum(v == u for v in x) - 1) / 2 for u in x])
    ra, rb = ranks(list(a)), ranks(list(b))
    return float(np.corrcoef(ra, rb)[0, 1])


@pytest.mark.parametrize("seed", range(6))
def test_spearman_against_brute_force_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    a = rng.integers(0, 6, n).astype(float)             # many ties
    b = a * rng.choice([-1, 1]) + rng.integers(0, 4, n)
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        assert math.isnan(spearman(a, b))
    else:
        assert spearman(a, b) == pytest.approx(brute_spearman(a, b), abs=1e-12)


def test_spearman_edges():
    assert spearman([3.0, 1.0, 2.0], [30.0, 10.0, 20.0]) == 1.0
    assert spearman(np.arange(5), -np.arange(5.0) ** 3) == -1.0
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert math.isnan(spearman([1], [2]))


# ---- bad input

@pytest.mark.parametrize("index", [0, 1])
def test_bad_features_and_targets_name_the_argument(index):
    F, y = smooth(20)
    model = both()[index]
    with pytest.raises(LearnError, match="not been fitted"):
        model.predict(F)
    with pytest.raises(LearnError, match="not been fitted"):
        model.rank(F)
    with pytest.raises(LearnError, match=r"F: expected a 2-D array .* 1-D"):
        model.partial_fit(F[:, 0], y)
    with pytest.raises(LearnError, match=r"F: expected a 2-D array .* 3-D"):
        model.partial_fit(F[None], y)
    with pytest.raises(LearnError, match=r"y: expected a 1-D array .* 2-D"):
        model.partial_fit(F, y[:, None])
    with pytest.raises(LearnError, match=r"y: 19 values, but F has 20 rows"):
        model.partial_fit(F, y[:19])
    bad = F.copy()
    bad[7, 2] = np.nan
    with pytest.raises(LearnError, match=r"F: row 7, column 2 is nan"):
        model.partial_fit(bad, y)
    bad_y = y.copy()
    bad_y[4] = -np.inf
    with pytest.raises(LearnError, match=r"y: row 4 is -inf"):
        model.partial_fit(F, bad_y)
    with pytest.raises(LearnError, match="y: not an array"):
        model.partial_fit(F[:2], [[1.0], [1.0, 2.0]])
    with pytest.raises(LearnError, match="F: not an array"):
        model.partial_fit([[1.0, 2.0, 3.0], [1.0]], y[:2])
    with pytest.raises(LearnError, match="F: dtype"):
        model.partial_fit(F.astype(complex), y)
    with pytest.raises(LearnError, match="first partial_fit needs at least one row"):
        model.partial_fit(F[:0], y[:0])
    with pytest.raises(LearnError, match="F: 0 columns"):
        model.partial_fit(F[:, :0], y)
    assert model.n_seen == 0 and model.n_features is None   # nothing learned on the way
    model.partial_fit(F, y)
    for call in (model.predict, model.rank, lambda G: model.partial_fit(G, y)):
        with pytest.raises(LearnError, match=r"F: 2 columns, but the model was fitted with 3"):
            call(F[:, :2])
    bad[7, 2] = np.inf
    with pytest.raises(LearnError, match=r"F: row 7, column 2 is inf"):
        model.predict(bad)


@pytest.mark.parametrize("kwargs,match", [
    ({"features": 0}, r"features=0: out of range; expected an integer \[1, 65536\]"),
    ({"features": 2.5}, r"features=2.5: expected an integer"),
    ({"features": True}, r"features=True: expected an integer"),
    ({"alpha": 0.0}, r"alpha=0.0: out of range; expected a finite number in \(0, inf\]"),
    ({"alpha": math.nan}, r"alpha=nan"),
    ({"kind": "rbf"}, r"kind='rbf': expected one of 'fourier', 'relu'"),
    ({"scale": -1}, r"scale=-1.0: out of range"),
    ({"decay": 0}, r"decay=0.0: out of range; expected a finite number in \(0, 1\]"),
    ({"decay": 1.5}, r"decay=1.5"),
    ({"seed": -1}, r"seed=-1: out of range; expected an integer >= 0"),
    ({"seed": "0"}, r"seed='0': expected an integer"),
])
def test_bad_ridge_arguments(kwargs, match):
    with pytest.raises(LearnError, match=match):
        RandomFeatureRidge(**kwargs)


@pytest.mark.parametrize("kwargs,match", [
    ({"hidden": ()}, r"hidden=\(\): 0 layers; expected 1 or 2"),
    ({"hidden": (8, 8, 8)}, r"3 layers; expected 1 or 2 layer sizes, each in \[1, 256\]"),
    ({"hidden": (257,)}, r"hidden\[0\]=257: out of range; expected an integer \[1, 256\]"),
    ({"hidden": (8, 0)}, r"hidden\[1\]=0: out of range"),
    ({"hidden": "big"}, r"hidden='big': expected 1 or 2 layer sizes"),
    ({"hidden": None}, r"hidden=None: expected 1 or 2 layer sizes"),
    ({"steps": -1}, r"steps=-1: out of range; expected an integer \[0, 1000000\]"),
    ({"lr": 0}, r"lr=0.0: out of range; expected a finite number in \(0, 1\]"),
    ({"store": 0}, r"store=0: out of range"),
    ({"weight_decay": -0.1}, r"weight_decay=-0.1: out of range; .* \[0, inf\]"),
    ({"activation": "gelu"}, r"activation='gelu': expected one of 'tanh', 'relu'"),
    ({"seed": 1.0}, r"seed=1.0: expected an integer"),
])
def test_bad_mlp_arguments(kwargs, match):
    with pytest.raises(LearnError, match=match):
        MLP(**kwargs)


def test_mlp_takes_one_int_as_one_layer():
    assert MLP(hidden=12).hidden == (12,)


def test_bad_spearman_input():
    with pytest.raises(LearnError, match="a has 3 values but b has 2"):
        spearman([1, 2, 3], [1, 2])
    with pytest.raises(LearnError, match=r"b: row 1 is nan"):
        spearman([1, 2, 3], [1, math.nan, 2])
    with pytest.raises(LearnError, match=r"a: row 0 is inf"):
        spearman([math.inf, 2, 3], [1, 2, 3])
    with pytest.raises(LearnError, match=r"a: expected a 1-D array"):
        spearman([[1, 2]], [1, 2])
