"""Review of islands (issue 24, R2): defects found in ``regress(islands=k)``, each with the
test that failed before its fix."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from numptx import search
from numptx import stack_ptx as sp
from numptx.search import checkpoint as ck
from numptx.search.checkpoint import CheckpointError
from numptx.search.results import Candidate, program_key
from numptx.search.strategies import _migrate

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


def _cand(value: float, loss: float, length: int = 1, genes=None) -> Candidate:
    c = Candidate([sp.const(value, "f32")] * length, loss, genes)   # type: ignore[arg-type]
    c.remember_complexity(length)     # what parsimony charges (its complexity): as if measured
    return c


def test_migration_ranks_by_the_penalized_loss_selection_uses():
    # parsimony 1: island b's best is b1 (5 + complexity 1 = 6); by raw loss it is b's worst,
    # and a migration by raw loss evicted it for a's program of loss 0 (0 + complexity 10)
    s = _run(generations=1, islands=2, parsimony=1.0)._search
    g = s.genes
    a = [_cand(1.0, 0.0, 10, g), _cand(2.0, 1.0, 1, g), _cand(3.0, 2.0, 1, g)]
    b = [_cand(11.0, 5.0, 1, g), _cand(12.0, 3.0, 10, g), _cand(13.0, 4.0, 10, g),
         _cand(14.0, 4.5, 10, g)]
    want = {program_key(c.program) for c in (b[0], b[1], a[1], a[2])}
    isles = [list(a), list(b)]
    _migrate(isles, s.penalized)
    got = {program_key(c.program) for c in isles[1]}
    assert program_key(b[0].program) in got                 # b's best stays
    # a's two best by penalized loss (2 and 3) came, in place of b's two worst (14.5, 14)
    assert got == want
    # and the run's own step migrates by it: a run with parsimony keeps its island sizes
    r = _run(generations=4, islands=2, migration=1, parsimony=0.05)
    assert sum(r._search.island_sizes) == len(r.population)


def test_a_migration_never_grows_an_island():
    # an island left with one program (dedup kept fewer) takes one migrant, not two: its size
    # stays, and so does the population's (a checkpoint of a larger one is refused on resume)
    isles = [[_cand(1.0, 1.0), _cand(2.0, 2.0)], [_cand(9.0, 9.0)]]
    _migrate(isles)
    assert [len(i) for i in isles] == [2, 1]
    assert isles[1][0].loss == 1.0


def _small(**kw):
    # one input, "add", one constant, programs of at most 2 ops: fewer distinct programs than
    # the population, so keep-best (and each island's) keeps fewer than ``population``
    X = np.random.default_rng(0).uniform(-2, 2, (16, 1)).astype(np.float32)
    args = dict(population=20, seed=0, device="cpu", migration=1, max_length=2,
                init_length=(1, 2), constants=[1.0], input_weights=False,
                linear_scaling=False, fit_top=0, revary=0)
    args.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return search.regress(X, (2 * X[:, 0]).astype(np.float32), ["add"], **args)


@pytest.mark.parametrize("islands", [1, 2])
def test_a_population_keep_best_left_smaller_resumes_exactly(tmp_path, islands):
    full = _small(generations=4, islands=islands)
    part = _small(generations=3, islands=islands)
    assert len(part.population) < 20          # dedup kept fewer: a good checkpoint all the same
    path = tmp_path / "small.nxck"
    part.save(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        more = search.resume(path, generations=1)
    assert more._search.island_sizes == full._search.island_sizes
    assert [_words(c.program) for c in more.population] == \
        [_words(c.program) for c in full.population]
    assert [g[:-1] for g in more.history] == [g[:-1] for g in full.history]


def test_a_population_larger_than_the_run_is_still_refused(tmp_path):
    part = _small(generations=2, islands=1, population=8, max_length=4, init_length=(1, 4))
    path = tmp_path / "big.nxck"
    part.save(path)
    st = ck.read(str(path))
    st["population"] = st["population"] * 3
    ck.write(str(path), st)
    with pytest.raises(CheckpointError, match="population.*at most"):
        search.resume(path, generations=1)


def test_island_sizes_over_an_islands_share_are_refused(tmp_path):
    # an island keeps at most its share of the population (48 / 4 = 12): [1, 23, 12, 12] sums
    # to 48 but no run holds it (its island 1 would draw parents among 23 and keep 12)
    part = _run(generations=2, islands=4, migration=1)
    path = tmp_path / "isl.nxck"
    part.save(path)
    st = ck.read(str(path))
    assert st["islands"] == [12, 12, 12, 12]
    st["islands"] = [1, 23, 12, 12]
    ck.write(str(path), st)
    with pytest.raises(CheckpointError, match=r"islands.*island 1 holds 23.*share 12"):
        search.resume(path, generations=1)


def test_a_smaller_island_population_without_its_sizes_is_refused(tmp_path):
    # islands that keep-best left uneven: without "islands" the resumed run split the
    # population evenly and went on differently from the uninterrupted run
    part = _small(generations=3, islands=2)
    path = tmp_path / "small.nxck"
    part.save(path)
    st = ck.read(str(path))
    assert sum(st["islands"]) == len(st["population"]) < 20
    del st["islands"]
    ck.write(str(path), st)
    with pytest.raises(CheckpointError, match=r"islands.*missing"):
        search.resume(path, generations=1)
