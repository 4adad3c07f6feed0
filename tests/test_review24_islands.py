"""Review of islands (issue 24, R2): defects found in ``regress(islands=k)``, each with the
test that failed before its fix."""
from __future__ import annotations

import warnings

import numpy as np

from numptx import search
from numptx.search import checkpoint as ck

OPS = ["add", "sub", "mul", "div", "sin"]


def _data():
    X = np.random.default_rng(0).uniform(-2, 2, (24, 2)).astype(np.float32)
    return X, (X[:, 0] ** 3 - X[:, 0] * X[:, 1] + np.sin(X[:, 1])).astype(np.float32)


def _run(**kw):
    X, y = _data()
    args = dict(population=48, generations=3, seed=5, device="cpu")
    args.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return search.regress(X, y, OPS, **args)


def _words(prog):
    return [op.raw or op.name for op in prog]


def test_a_checkpoint_from_before_islands_resumes_on_one_population(tmp_path):
    # a run of 200 saved before islands existed (its config has no "islands", no "migration")
    # ran one population: resumed, it runs one population, not the 2 islands derived now
    full = _run(population=200, generations=3, islands=1)
    part = _run(population=200, generations=2, islands=1)
    path = tmp_path / "old.nxck"
    part.save(path)
    st = ck.read(str(path))
    del st["config"]["islands"], st["config"]["migration"]
    ck.write(str(path), st)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        more = search.resume(path, generations=1)
    assert more._search.cfg.islands == 1
    assert [_words(c.program) for c in more.population] == \
        [_words(c.program) for c in full.population]
