"""Review 25b: a learned basis fitted on an archive of one elite is zero (no spread to
learn), every program then falls in one cell, the archive keeps one elite, and the next refit
learns from that one elite again: the run stays at one cell for ever (a small batch whose
first generation had one behaviour filled 1 cell in 40 generations; named descriptors fill
10). An archive of fewer elites than axes is refitted with the generation's children too."""
from __future__ import annotations

import numpy as np

from numptx import search
from numptx.search import learned_cells as L

OPS = ["add", "sub", "mul", "sin"]


def test_an_archive_of_one_elite_does_not_stay_one_for_ever():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (200, 2)).astype(np.float32)
    y = (X[:, 0] * X[:, 1]).astype(np.float32)
    r = search.map_elites(X, y, OPS, descriptors="learned", bins=5, batch=2,
                          generations=2 * L.REFIT + 5, seed=4, device="cpu",
                          evaluate="interpret")
    filled = [g.filled for g in r.history]
    assert filled[L.REFIT - 1] == 1                     # this run's archive: one elite at the refit
    assert max(filled[L.REFIT:]) > 1, filled
    s = r._search
    assert np.any(s.learned.basis != 0)
    assert s.learned.cells([c.program for c in s.archive.values()]) == list(s.archive)
