"""The search's declared seams (issue 24, item 1): the options as a frozen, checked dataclass,
the scorers behind one Protocol, and the selection strategies as objects."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from numptx import search
from numptx.search.config import DEFAULTS, KINDS, SearchOptions, check_config
from numptx.search.evaluate import Evaluator
from numptx.search.genes import SearchError
from numptx.search.scorers import Scorer, UserFitness
from numptx.search.state import SearchState
from numptx.search.strategies import Evolutionary, MapElites, strategy_for


def _data(n=48):
    X = np.random.default_rng(0).uniform(-1, 1, (n, 2)).astype(np.float32)
    return X, (X[:, 0] * X[:, 1] + X[:, 0]).astype(np.float32)


def test_options_are_frozen_and_replace_checks_again():
    opts = check_config("regress", population=200)
    assert isinstance(opts, SearchOptions) and opts.kind == "regress"
    assert (opts.population, opts.tournament, opts.elitism) == (200, 5, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.population = 3                               # type: ignore[misc]
    assert opts.replace(generations=7).generations == 7 and opts.generations == 100
    with pytest.raises(SearchError, match="tournament=500.*200"):
        opts.replace(tournament=500)
    assert set(opts.to_dict()) == set(DEFAULTS)


def test_an_unknown_option_is_named_with_the_valid_ones():
    with pytest.raises(SearchError) as e:
        check_config("regress", popluation=10)
    msg = str(e.value)
    assert "'popluation'" in msg and "population" in msg and "survivors" in msg
    with pytest.raises(SearchError, match="where='search'.*regress"):
        check_config("search")                            # type: ignore[arg-type]


def test_every_kind_has_a_strategy_and_the_archive_is_map_elites_only():
    assert set(KINDS) == {"regress", "map_elites", "evolve"}
    assert isinstance(strategy_for("regress"), Evolutionary)
    assert isinstance(strategy_for("evolve"), Evolutionary)
    assert isinstance(strategy_for("map_elites"), MapElites)
    X, y = _data()
    r = search.regress(X, y, ["add", "mul"], population=24, generations=2, seed=1,
                       device="cpu")
    m = search.map_elites(X, y, ["add", "mul"], batch=24, generations=2, seed=1, device="cpu")
    assert r.archive is None and r._search.strategy.keeps_archive is False
    assert isinstance(m.archive, dict) and m.archive and m._search.strategy.keeps_archive
    # the generation row counts the archive's cells for MAP-Elites, the population otherwise
    assert m.history[-1].filled == len(m.archive) and r.history[-1].filled == len(r.population)


def test_the_data_evaluator_and_the_user_fitness_are_scorers():
    X, y = _data()
    ev = Evaluator(X, y, device="cpu", evaluate="interpret")
    assert isinstance(ev, Scorer)
    assert ev.score([[]]).shape == (1,)
    fit = UserFitness(template=None, site="f", site_obj=None, select="cand",
                      fitness=lambda packs: [], per_module=None, executor=None, build="full")
    assert isinstance(fit, Scorer)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fit.build = "fast"                                # type: ignore[misc]


def test_a_search_scores_through_its_scorer():
    X, y = _data()
    r = search.regress(X, y, ["add", "mul"], population=16, generations=1, seed=2,
                       device="cpu")
    s = r._search
    assert isinstance(s, SearchState)          # what strategies and MAP-Elites are typed against
    assert s.scorer is s.evaluator
    progs = [c.program for c in r.population[:4]]
    np.testing.assert_array_equal(s._score(progs), s.evaluator.score(progs))


def test_the_option_literals_match_the_checked_values():
    from typing import get_args

    from numptx.jit.populations.fitness import LOSSES
    from numptx.search.config import FIT_METHODS, SURVIVORS, Device, FitMethod, Kind, Loss, \
        Survivors
    from numptx.search.evaluate import EVALUATE, Evaluate
    assert get_args(Loss) == tuple(LOSSES)
    assert get_args(FitMethod) == FIT_METHODS and get_args(Survivors) == SURVIVORS
    assert get_args(Kind) == KINDS and get_args(Evaluate) == tuple(EVALUATE)
    assert get_args(Device) == ("auto", "cpu", "gpu")
    X, y = _data(16)
    with pytest.raises(SearchError, match="device"):
        search.regress(X, y, ["add"], population=4, generations=1, device="tpu")
