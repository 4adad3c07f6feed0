"""Review 25b: a forged ``learned`` checkpoint field whose basis or mean is finite but huge
passed the resume checks, then overflowed the projection to NaN and filed programs into the
cell (-2**63, -2**63), silently. A PCA basis has rows of norm 1 (or 0) and the mean of the
transformed outputs is within log1p(float64 max); anything else is a CheckpointError naming
the field."""
from __future__ import annotations

import numpy as np
import pytest

from numptx import search
from numptx.search import checkpoint as ck
from numptx.search.checkpoint import CheckpointError

OPS = ["add", "sub", "mul", "sin"]


def _saved(path):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (200, 2)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] + np.sin(X[:, 0])).astype(np.float32)
    search.map_elites(X, y, OPS, descriptors="learned", bins=5, batch=60, generations=2,
                      seed=4, device="cpu", evaluate="interpret").save(path)


def _forge(path, key, fill):
    st = ck.read(str(path))
    a = ck.decode_array(st["learned"][key], key)
    a[...] = fill
    a.reshape(-1)[::2] *= -1
    st["learned"][key] = ck.encode_array(a)
    ck.write(str(path), st)


@pytest.mark.parametrize("key, fill", [("basis", 1e308), ("basis", 2.0), ("mean", 1e308)])
def test_a_finite_but_impossible_basis_or_mean_is_refused(tmp_path, key, fill):
    path = tmp_path / "run.nxck"
    _saved(path)
    _forge(path, key, fill)
    with pytest.raises(CheckpointError, match=f"learned.{key}"):
        search.resume(path, generations=1)


def test_the_saved_state_itself_resumes(tmp_path):
    path = tmp_path / "run.nxck"
    _saved(path)
    r = search.resume(path, generations=1)
    assert r.archive and all(0 <= i < 5 and 0 <= j < 5 for i, j in r.archive)
