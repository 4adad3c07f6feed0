"""Islands (``regress(islands=k, migration=m)``): k subpopulations of one run, each drawing its
parents and keeping its best on its own, with copies of each island's best programs sent along
a ring every m generations; restarts and checkpoints as a run of one population."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from numptx import search
from numptx import stack_ptx as sp
from numptx.search.checkpoint import CheckpointError
from numptx.search.genes import SearchError
from numptx.search.results import Candidate, program_key
from numptx.search.strategies import MIGRANTS, Evolutionary, Islands, _migrate

OPS = ["add", "sub", "mul", "div", "sin"]


def _data():
    X = np.random.default_rng(0).uniform(-2, 2, (24, 2)).astype(np.float32)
    return X, (X[:, 0] ** 3 - X[:, 0] * X[:, 1] + np.sin(X[:, 1])).astype(np.float32)


def _run(**kw):
    X, y = _data()
    args = dict(population=48, generations=6, seed=5, device="cpu", islands=4, migration=2)
    args.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return search.regress(X, y, OPS, **args)


def _words(prog):
    return [op.raw or op.name for op in prog]


def test_islands_split_the_population_and_keep_its_size():
    r = _run()
    s = r._search
    assert isinstance(s.strategy, Islands) and isinstance(_run(islands=1)._search.strategy,
                                                          Evolutionary)
    assert len(s.island_sizes) == 4 and sum(s.island_sizes) == len(r.population) <= 48
    assert all(n >= 1 for n in s.island_sizes)
    # each island holds distinct programs, sorted or not, and the run's best is in one of them
    keys = [program_key(c.program) for c in r.population]
    lo = 0
    for n in s.island_sizes:
        isle = keys[lo:lo + n]
        assert len(set(isle)) == len(isle)
        lo += n
    assert min(c.loss for c in r.population) == r.best.loss or r._search.restarts


def test_parents_are_drawn_within_their_island():
    r = _run(generations=2)          # the first generation is one random population
    s = r._search
    pop = s.population
    sizes = s.island_sizes
    a, b = s.island_parents(pop, sizes, [12, 12, 12, 12])
    lo = 0
    for i, n in enumerate(sizes):
        own = {program_key(c.program) for c in pop[lo:lo + n]}
        assert all(program_key(p) in own for p in a[12 * i:12 * (i + 1)] + b[12 * i:12 * (i + 1)])
        lo += n


def _cand(value: float, loss: float) -> Candidate:
    return Candidate([sp.const(value, "f32")], loss, None)      # type: ignore[arg-type]


def test_migration_sends_each_islands_best_to_the_next():
    def isle(losses, base):
        return [_cand(base + v, float(v)) for v in losses]
    isles = [isle([3, 1, 2, 5], 100), isle([9, 8, 7, 6], 200), isle([0.5, 4, 4.5, 10], 300)]
    _migrate(isles)
    assert MIGRANTS == 2
    # island b got a's two best (1, 2) in place of its two worst (9, 8)
    assert sorted(c.loss for c in isles[1]) == [1, 2, 6, 7]
    # island c got b's two best as they were before (6, 7), in place of 10 and 4.5
    assert sorted(c.loss for c in isles[2]) == [0.5, 4, 6, 7]
    # island a got c's two best (0.5, 4), in place of its worst (5, 3)
    assert sorted(c.loss for c in isles[0]) == [0.5, 1, 2, 4]


def test_a_migrant_an_island_holds_already_is_not_copied_twice():
    isles = [[_cand(1.0, 1.0), _cand(2.0, 2.0)], [_cand(1.0, 1.0), _cand(9.0, 9.0)]]
    _migrate(isles)
    # island 1 holds program 1.0 already: only 2.0 comes, in place of 9.0
    assert sorted(c.loss for c in isles[1]) == [1.0, 2.0]
    assert len({program_key(c.program) for c in isles[1]}) == 2


def test_one_island_is_the_plain_run_and_islands_differ():
    X, y = _data()
    plain = search.regress(X, y, OPS, population=48, generations=4, seed=2, device="cpu")
    one = search.regress(X, y, OPS, population=48, generations=4, seed=2, device="cpu",
                         islands=1, migration=3)
    assert [g[:-1] for g in plain.history] == [g[:-1] for g in one.history]
    assert _words(plain.best.program) == _words(one.best.program)
    four = search.regress(X, y, OPS, population=48, generations=4, seed=2, device="cpu",
                          islands=4)
    assert [_words(c.program) for c in four.population] != \
        [_words(c.program) for c in plain.population]


def test_a_run_of_islands_resumes_exactly(tmp_path):
    full = _run(generations=7)
    part = _run(generations=3)
    path = tmp_path / "isl.nxck"
    part.save(path)
    more = search.resume(path, generations=4)
    assert [g[:-1] for g in more.history] == [g[:-1] for g in full.history]
    assert more._search.island_sizes == full._search.island_sizes
    assert [_words(c.program) for c in more.population] == \
        [_words(c.program) for c in full.population]
    assert more.best.loss == full.best.loss


def _rewrite(path, edit):
    """A checkpoint with its state edited (the header and checksum made again)."""
    from numptx.search import checkpoint as ck
    st = ck.read(str(path))
    edit(st)
    ck.write(str(path), st)


@pytest.mark.parametrize("sizes", [[1, 2, 3], [0, 16, 16, 16], [12, 12, 12, 13], "4"])
def test_a_checkpoints_island_sizes_are_checked(tmp_path, sizes):
    part = _run(generations=2)
    path = tmp_path / "isl.nxck"
    part.save(path)
    _rewrite(path, lambda st: st.__setitem__("islands", sizes))
    with pytest.raises(CheckpointError, match="islands"):
        search.resume(path, generations=1)


def test_island_sizes_in_a_run_of_one_island_are_refused(tmp_path):
    part = _run(generations=2, islands=1)
    path = tmp_path / "one.nxck"
    part.save(path)
    _rewrite(path, lambda st: st.__setitem__("islands", [24, 24]))
    with pytest.raises(CheckpointError, match="islands.*one island"):
        search.resume(path, generations=1)


@pytest.mark.parametrize("kw, match", [
    (dict(islands=0), "islands=0"),
    (dict(islands=25), "islands=25.*population of 48"),
    (dict(islands=True), "islands=True"),
    (dict(islands=2, survivors="children"), "islands=2.*survivors='children'"),
    (dict(migration=-1), "migration=-1"),
])
def test_bad_islands_are_named(kw, match):
    with pytest.raises(SearchError, match=match):
        _run(**kw)


def test_map_elites_has_no_islands():
    from numptx.search.config import check_config
    with pytest.raises(SearchError, match="islands=2.*MAP-Elites"):
        check_config("map_elites", population=16, islands=2, elitism=0)
    assert json.loads(json.dumps(check_config("regress", islands=3).to_dict()))["islands"] == 3


@pytest.mark.parametrize("population, survivors, islands", [
    (500, "plus", 4), (1000, "plus", 4), (250, "plus", 2), (199, "plus", 1), (48, "plus", 1),
    (500, "children", 1)])
def test_the_default_is_one_island_per_100_programs_up_to_4(population, survivors, islands):
    from numptx.search.config import check_config
    opts = check_config("regress", population=population, survivors=survivors)
    assert opts.islands == islands
    assert check_config("evolve", population=population).islands == 1
    # derived again when the population changes
    assert opts.replace(population=120).islands == 1
