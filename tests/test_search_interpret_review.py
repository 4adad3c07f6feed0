"""Review of the search through the batch interpreter (issue 23): the compiled re-score when
semantic dedup's probe is partial, the GPU compiled path's reduction of the fitness sums, and
checkpoint fields. CPU only (the interpreter's C core, the emulator, NVRTC not needed)."""
import importlib
import math
import warnings

import numpy as np
import pytest

from numptx import search
from numptx.errors import NumptxWarning
from numptx.jit.populations import fitness as F
from numptx.search import checkpoint as ck
from numptx.search.checkpoint import CheckpointError

E = importlib.import_module("numptx.search.evaluate")   # (search.evaluate: the formula's)


def _piecewise(n: int = 100):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (n, 2)).astype(np.float32)
    return X, (np.maximum(X[:, 0], X[:, 1]) * X[:, 0]).astype(np.float32)


# ---- semantic dedup on a partial probe: what is returned carries its own loss ---------------------
@pytest.mark.parametrize("evaluate", ["compile", "interpret"])
def test_a_partial_probe_returns_elites_with_their_own_losses_and_says_why(evaluate):
    # one probe row of 100: programs that agree there (max/min/abs) take each other's loss;
    # an elite filed on another program's loss was returned with it, unchecked on the
    # compiled path (no re-score) and blamed on the interpreter on the other
    X, y = _piecewise()
    with pytest.warns(NumptxWarning, match=r"semantic dedup .* 1 probe row\(s\) only, of 100") \
            as got:
        r = search.map_elites(X, y, ["add", "sub", "mul", "max", "min", "abs"], batch=100,
                              generations=3, seed=4, device="cpu", evaluate=evaluate,
                              semantic_dedup=1, fit_top=0, linear_scaling=False)
    assert r.semantic_duplicates > 0
    want = E.Evaluator(X, y, device="cpu", evaluate="compile").score(
        [c.program for c in r.archive.values()])
    assert [c.loss for c in r.archive.values()] == want.tolist()
    assert r.rescored is not None and r.rescored.differing >= 1
    assert r.best.loss == r.rescored.compiled[0]
    assert any(w.filename == __file__ for w in got.list)       # the caller's line


def test_an_exact_probe_or_none_leaves_a_compiled_run_unrescored():
    X, y = _piecewise(n=20)                  # a probe of 32 covers all 20 rows: exact
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumptxWarning)
        for k in (32, 0):
            r = search.regress(X, y, ["add", "mul", "max"], population=40, generations=2,
                               seed=1, device="cpu", evaluate="compile", semantic_dedup=k)
            assert r.rescored is None


# ---- the search's GPU compiled path: the one reduction of the sums -----------------------------
@pytest.mark.parametrize("loss", ["mse", "mae", "rmse", "pearson"])
def test_the_search_reduces_fitness_sums_as_nx_fitness_does(loss):
    # f64 predictions near 1.5e308: each row's term is finite (no row flagged), the sum of
    # the centred predictions overflows; pearson's moments are then NaN, and
    # max(0.0, 1.0 - nan) scored a perfect 0.0 in the search's own copy of the formulas
    X = np.linspace(-1, 1, 4)[:, None]
    y = np.array([0.0, 1.0, 0.0, 1.0])
    ev = E.Evaluator(X, y, loss=loss, device="cpu")
    c = float(y.mean())
    q = np.full(4, 1.5e308) - c
    with np.errstate(all="ignore"):                       # as the kernel's sums overflow
        sums = np.array([[np.sum(q), np.sum(q * q), np.sum(q * (y - c)), 0.0],
                         [np.sum((X[:, 0] - y) ** 2), 1.0, 0.5, 0.0],          # ordinary
                         [1.0, 2.0, 0.5, 1.0],                                 # a bad row
                         [1.0, 2.0, 0.5, 0.0]])                                # failed build
        got = ev.losses_of(sums, [3])
        want = F.losses_from_sums(sums, y, loss, [3])
    assert np.isinf(sums[0, 0]) and np.isfinite(q).all()
    assert np.array_equal(got, want)
    if loss == "pearson":
        assert got[0] == math.inf
    assert got[2] == got[3] == math.inf


# ---- checkpoints ---------------------------------------------------------------------------------
def test_a_forged_semantic_table_names_its_field_once(tmp_path):
    X, y = _piecewise(n=60)
    r = search.regress(X, y, ["add", "mul"], population=20, generations=2, seed=1,
                       device="cpu", semantic_dedup=8)
    r.save(tmp_path / "r.nxck")
    state = ck.read(tmp_path / "r.nxck")
    assert "semantic" in state
    for field, bad in (("keys", 5), ("losses", "x")):
        st = ck.read(tmp_path / "r.nxck")
        st["semantic"][field] = bad
        ck.write(tmp_path / "bad.nxck", st)
        with pytest.raises(CheckpointError) as e:
            search.resume(tmp_path / "bad.nxck", generations=1, device="cpu")
        msg = str(e.value)
        assert msg.count("checkpoint ") == 1 and msg.count("field ") == 1, msg
        assert f"field semantic.{field}: " in msg or "field semantic: " in msg


def test_resume_is_exact_past_the_cache_and_table_bounds(tmp_path, monkeypatch):
    # the score cache is cleared when it holds more than CACHE_MAX keys at the next
    # evaluation and the semantic table when it does at the next settle; a checkpoint kept
    # only the last CACHE_MAX of each, so a resumed run cleared later than the
    # uninterrupted one and made other children from there
    import importlib as il
    small = 150
    for mod, name in (("loop", "CACHE_MAX"), ("semantic", "CACHE_MAX"),
                      ("fields", "CACHE_MAX"), ("checkpoint", "CACHE_MAX"),
                      ("checkpoint", "CACHE_SAVED")):
        monkeypatch.setattr(il.import_module(f"numptx.search.{mod}"), name, small)
    X, y = _piecewise(n=300)
    kw = dict(population=60, seed=6, device="cpu", evaluate="interpret", semantic_dedup=8,
              fit_top=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumptxWarning)
        full = search.regress(X, y, ["add", "sub", "mul", "max"], generations=10, **kw)
        for at in (3, 4, 5, 6):
            half = search.regress(X, y, ["add", "sub", "mul", "max"], generations=at, **kw)
            half.save(tmp_path / "h.nxck")
            more = search.resume(tmp_path / "h.nxck", generations=10 - at, device="cpu")
            assert [g[:5] for g in more.history] == [g[:5] for g in full.history], at
            assert (more.evaluated, more.semantic_duplicates) == \
                (full.evaluated, full.semantic_duplicates), at
            assert [(c.program, c.loss) for c in more.population] == \
                [(c.program, c.loss) for c in full.population], at
