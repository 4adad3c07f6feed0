"""Review of issue 25: resume stays exact with a predictor when the score cache passes its bound.
A checkpoint saves a cache of more than CACHE_SAVED keys empty (the next evaluation clears it
anyway); but the screen chose its children before that evaluation, from the full cache: a child
whose key was cached was let through unscreened in the uninterrupted run and screened after the
resume, so the runs parted. The screen now sees the cache as the evaluation will."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

from numptx import search

OPS = ["add", "sub", "mul", "sin", "cos"]


@pytest.mark.parametrize("model", ["ridge", "mlp"])
def test_resume_is_exact_with_a_predictor_past_the_cache_bound(tmp_path, monkeypatch, model):
    for mod, name in (("loop", "CACHE_MAX"), ("screening", "CACHE_MAX"), ("semantic", "CACHE_MAX"),
                      ("fields", "CACHE_MAX"), ("checkpoint", "CACHE_MAX"),
                      ("checkpoint", "CACHE_SAVED")):
        monkeypatch.setattr(importlib.import_module(f"numptx.search.{mod}"), name, 300)
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (100, 2)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] + np.sin(X[:, 0])).astype(np.float32)
    kw = dict(population=200, seed=3, device="cpu", evaluate="interpret", predictor=model)
    full = search.regress(X, y, OPS, generations=12, **kw)
    assert any(c is not None for c in full.rank_correlations)      # the screen screened
    for at in (6, 7, 8):
        half = search.regress(X, y, OPS, generations=at, **kw)
        half.save(tmp_path / "h.nxck")
        more = search.resume(tmp_path / "h.nxck", generations=12 - at)
        assert [g[:5] for g in more.history] == [g[:5] for g in full.history], at
        assert more.evaluated == full.evaluated, at
        assert more.rank_correlations == full.rank_correlations, at
