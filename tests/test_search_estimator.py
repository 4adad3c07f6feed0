"""numptx.search.SymbolicRegressor (issue 26 item 1): scikit-learn's own estimator checks,
Pipeline and GridSearchCV, pickling, scikit-learn's conventions for bad input, the options
kept in step with regress (the import without scikit-learn: tests/test_search_inputs.py,
which runs where scikit-learn is not installed)."""
from __future__ import annotations

import inspect
import os
import pickle
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from numptx import search  # noqa: E402
from numptx.search import SearchError, SymbolicRegressor  # noqa: E402

#: small runs: every check fits a few times
SMALL = dict(population=64, generations=2, random_state=0, device="cpu")


def _data(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X = np.random.default_rng(seed).uniform(-1, 1, (n, 2))
    return X, X[:, 0] * X[:, 1] + X[:, 1]


def test_check_estimator():
    """scikit-learn's estimator checks pass (array-API input is skipped by scikit-learn
    itself unless SCIPY_ARRAY_API is set)."""
    from sklearn.utils.estimator_checks import check_estimator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(SymbolicRegressor(**SMALL), on_fail=None)
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results
              if r["status"] == "failed"]
    assert not failed, failed
    assert sum(r["status"] == "passed" for r in results) > 40


def test_fit_recovers_a_hidden_formula_and_keeps_the_front():
    X, y = _data()
    m = SymbolicRegressor(("add", "mul"), population=200, generations=20, random_state=0,
                          device="cpu").fit(X, y)
    assert m.score(X, y) > 0.999999
    assert m.n_features_in_ == 2 and m.input_names_ == ("x0", "x1")
    assert not hasattr(m, "feature_names_in_")          # plain arrays: none, as scikit-learn
    assert any(c.program == m.best_.program for c in m.equations_)
    assert np.allclose(m.predict(X), y, atol=1e-5)
    assert m.stopped_ in ("generations", "target") and m.history_ and isinstance(m.seed_, int)


def test_front_is_monotone():
    """``equations_`` (regress's front): more complexity, strictly lower loss."""
    X, y = _data()
    m = SymbolicRegressor(("add", "mul"), population=200, generations=10, random_state=1,
                          device="cpu").fit(X, y)
    eq = m.equations_
    assert eq and all(hasattr(c, "complexity") for c in eq)
    for a, b in zip(eq, eq[1:]):
        assert a.complexity < b.complexity and b.loss < a.loss


def test_pipeline_and_grid_search():
    X, y = _data(120)
    pipe = Pipeline([("scale", StandardScaler()),
                     ("sr", SymbolicRegressor(("add", "mul"), **SMALL))])
    assert pipe.fit(X, y).predict(X).shape == (120,)
    assert np.isfinite(pipe.score(X, y))
    grid = GridSearchCV(SymbolicRegressor(("add", "mul"), **SMALL),
                        {"parsimony": [0.0, 0.01], "population": [32, 64]}, cv=2)
    grid.fit(X, y)
    assert set(grid.best_params_) == {"parsimony", "population"}
    assert grid.best_estimator_.predict(X).shape == (120,)
    assert len(grid.cv_results_["mean_test_score"]) == 4


def test_clone_shares_the_executor():
    """GridSearchCV clones the estimator for each fit: the executor (a pool, which cannot be
    deep-copied) is shared, the other options copied; the clone fits through it."""
    from concurrent.futures import ThreadPoolExecutor

    from sklearn.base import clone
    X, y = _data(80)
    with ThreadPoolExecutor(2) as pool:
        m = SymbolicRegressor(("add", "mul"), executor=pool, **SMALL)
        c = clone(m)
        assert c.executor is pool and c.ops == m.ops and c is not m
        assert c.fit(X, y).predict(X).shape == (80,)


def test_pickle_round_trip_predicts_without_a_gpu(tmp_path):
    """Pickled and loaded here: the same predictions; loaded in a fresh interpreter that sees
    no GPU (CUDA_VISIBLE_DEVICES empty): the same predictions too."""
    X, y = _data()
    m = SymbolicRegressor(("add", "mul"), population=100, generations=5, random_state=0,
                          device="cpu").fit(X, y)
    back = pickle.loads(pickle.dumps(m))
    assert back.best_.formula == m.best_.formula
    assert np.array_equal(back.predict(X), m.predict(X))
    path = tmp_path / "m.pkl"
    path.write_bytes(pickle.dumps(m))
    np.save(tmp_path / "X.npy", X)
    code = textwrap.dedent(f"""
        import pickle, numpy as np
        m = pickle.loads(open({str(path)!r}, "rb").read())
        np.save({str(tmp_path / "p.npy")!r}, m.predict(np.load({str(tmp_path / "X.npy")!r})))
    """)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    assert np.array_equal(np.load(tmp_path / "p.npy"), m.predict(X))


def test_sklearn_conventions_for_bad_input():
    X, y = _data(50)
    m = SymbolicRegressor(**SMALL)
    with pytest.raises(NotFittedError):
        m.predict(X)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        m.fit(bad, y)
    with pytest.raises(ValueError, match="Input y contains NaN"):
        m.fit(X, np.where(np.arange(50) == 7, np.nan, y))
    m.fit(X, y)
    with pytest.raises(ValueError, match="X has 3 features, but SymbolicRegressor is "
                                         "expecting 2 features"):
        m.predict(np.ones((4, 3)))


def test_bad_options_are_search_errors_naming_them():
    X, y = _data(50)
    with pytest.raises(SearchError, match="model_selection"):
        SymbolicRegressor(model_selection="shortest", **SMALL).fit(X, y)
    with pytest.raises(SearchError, match="population"):
        SymbolicRegressor(**{**SMALL, "population": -3}).fit(X, y)
    with pytest.raises(SearchError, match="random_state"):
        SymbolicRegressor(**{**SMALL, "random_state": "zero"}).fit(X, y)
    with pytest.raises(SearchError, match="before its first generation.*time_limit"):
        SymbolicRegressor(**{**SMALL, "time_limit": 0.0}).fit(X, y)
    with pytest.raises(ValueError, match="colour"):
        SymbolicRegressor().set_params(colour=1)


def test_options_are_regress_options():
    """The constructor takes each of regress's options by name (seed as random_state; the
    input names come from the data), with regress's default."""
    reg = {k: p.default for k, p in inspect.signature(search.regress).parameters.items()
           if k not in ("X", "y", "names", "seed")}
    est = {k: p.default for k, p in inspect.signature(SymbolicRegressor).parameters.items()
           if k != "random_state"}
    assert est == reg


def test_dtype_follows_the_ops():
    """float64 X: the search runs in f64 when every op has an f64 form, in f32 when one has
    none (sin); dtype='f64' with sin is regress's SearchError with the fix."""
    X, y = _data(80)
    assert SymbolicRegressor(("add", "mul"), **SMALL).fit(X, y).best_.genes.dtype == "f64"
    m = SymbolicRegressor(("add", "mul", "sin"), **SMALL).fit(X, y)
    assert m.best_.genes.dtype == "f32" and m.predict(X).dtype == np.float32
    with pytest.raises(SearchError, match="'sin' has no f64 form"):
        SymbolicRegressor(("add", "sin"), dtype="f64", **SMALL).fit(X, y)


def test_dataframe_names():
    pd = pytest.importorskip("pandas")
    X, y = _data(80)
    df = pd.DataFrame(X, columns=["mass (kg)", "y"])
    m = SymbolicRegressor(("add", "mul"), **SMALL).fit(df, y)
    assert list(m.feature_names_in_) == ["mass (kg)", "y"]
    assert m.input_names_ == ("mass_kg", "y")
    assert set(m.best_.genes.names) == {"mass_kg", "y"}
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        plain = m.predict(X)                    # scikit-learn's warning: fitted with names
    assert np.array_equal(m.predict(df), plain)


def test_random_state_reproduces_a_fit():
    X, y = _data(80)
    a = SymbolicRegressor(**{**SMALL, "random_state": np.random.RandomState(5)}).fit(X, y)
    b = SymbolicRegressor(**{**SMALL, "random_state": np.random.RandomState(5)}).fit(X, y)
    assert a.seed_ == b.seed_ and a.best_.program == b.best_.program


def test_feynman_example_png_writer_round_trips(tmp_path):
    """examples/feynman_discovery.py's PNG (no imaging library): the file decodes (chunk
    layout, CRCs, zlib) to the array drawn. The example itself runs in tests/test_examples.py."""
    import runpy
    import struct
    import zlib
    ex = runpy.run_path(os.path.join(os.path.dirname(__file__), "..", "examples",
                                     "feynman_discovery.py"))
    found = [{"name": "a", "front": [(1, 1.0), (3, 1e-3), (7, 0.0)]},
             {"name": "b", "front": [(2, 0.5)]}]
    rgb = ex["draw_numpy"](found, width=64, height=48)
    assert rgb.shape == (48, 64, 3) and (rgb != 255).any()
    path = tmp_path / "f.png"
    ex["write_png"](str(path), rgb)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks = 8, {}
    while at < len(data):
        n, = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + n]
        assert struct.unpack(">I", data[at + 8 + n:at + 12 + n])[0] == zlib.crc32(kind + body)
        chunks[kind] = body
        at += 12 + n
    assert struct.unpack(">II", chunks[b"IHDR"][:8]) == (64, 48)
    raw = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(48, 1 + 64 * 3)
    assert (raw[:, 0] == 0).all() and np.array_equal(raw[:, 1:].reshape(48, 64, 3), rgb)
