"""Review 25b: when the programs' outputs span fewer than two directions (all probe rows
alike, or an archive of two elites), the second principal component came from a singular
value of rounding noise, and its bins were cut between the 1st and 99th percentiles of that
noise: programs were filed by floating-point error (a run on constant inputs filled a
diagonal of cells with a one-dimensional behaviour). A component of a negligible singular
value is no axis: it is zero, and every program sits in its first bin."""
from __future__ import annotations

import numpy as np

from numptx import search
from numptx import stack_ptx as sp
from numptx.search import learned_cells as L

OPS = ["add", "sub", "mul", "sin"]


def _programs(genes):
    x0, x1 = sp.input("x0"), sp.input("x1")
    return [[x0], [x1], [x0, x1, *genes.op_words("mul")], [x0, *genes.op_words("sin")],
            [x0, x0, *genes.op_words("add")], [x0, x1, *genes.op_words("sub")]]


def test_outputs_constant_over_the_probe_have_one_axis():
    genes = search.Genes(OPS, 2)
    X = np.tile(np.array([[0.7, -1.3]], np.float32), (40, 1))      # every row alike
    cells = L.LearnedCells(genes, X, 6, seed=0)
    progs = _programs(genes)
    cells.fit(progs, 0)
    assert np.any(cells.basis[0] != 0) and np.all(cells.basis[1] == 0)
    got = cells.cells(progs)
    assert {j for _, j in got} == {0}
    assert len({i for i, _ in got}) > 2                  # the real axis still spreads them


def test_two_elites_give_one_axis():
    rng = np.random.default_rng(1)
    genes = search.Genes(OPS, 2)
    X = rng.uniform(-2, 2, (100, 2)).astype(np.float32)
    cells = L.LearnedCells(genes, X, 6, seed=0)
    a, b = _programs(genes)[2:4]
    cells.fit([a, b], 0)
    assert np.all(cells.basis[1] == 0)
    assert [j for _, j in cells.cells(_programs(genes))] == [0] * 6


def test_a_run_on_constant_inputs_files_along_one_axis():
    X = np.tile(np.array([[0.7, -1.3]], np.float32), (60, 1))
    y = np.full(60, 2.0, np.float32)
    r = search.map_elites(X, y, OPS, descriptors="learned", bins=5, batch=60, generations=12,
                          seed=4, device="cpu", evaluate="interpret")
    assert len(r.archive) > 1 and {j for _, j in r.archive} == {0}
