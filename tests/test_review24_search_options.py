"""Review of issue 24's SearchOptions (numptx/search/config.py): ``replace`` and the
dataclass's own constructor give what :func:`check_config` gives for the same options.

- ``opts.replace(population=...)`` derives again what the first check derived (tournament,
  elitism, fit_top, survivors left to the search), instead of re-checking the old derived
  values as if the caller had given them (a SearchError naming ``tournament=5`` the caller
  never gave, or an elitism of 1 % of the old population kept silently);
- ``dataclasses.replace(opts, ...)`` and ``SearchOptions(...)`` are checked (a bad value is a
  SearchError naming the option, not a silently unchecked run).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from numptx import search
from numptx.search.config import DEFAULTS, SearchOptions, check_config
from numptx.search.genes import SearchError


def test_replace_derives_again_what_the_first_check_derived():
    opts = check_config("regress", population=1000)
    assert (opts.tournament, opts.elitism, opts.fit_top) == (5, 10, 7)
    # a smaller population: the derived tournament follows it (it was 5 > 4: an error)
    assert opts.replace(population=4) == check_config("regress", population=4)
    # a larger one: elitism and fit_top follow it (they stayed 10 and 7)
    big = opts.replace(population=100_000)
    assert big == check_config("regress", population=100_000)
    assert (big.elitism, big.fit_top) == (1000, 64)
    # MAP-Elites' batch too
    me = check_config("map_elites", population=100, elitism=0)
    assert me.replace(population=3) == check_config("map_elites", population=3, elitism=0)
    # evolve's survivors stay what evolve derives
    assert check_config("evolve", fit_top=0).replace(revary=2).survivors == "children"


def test_replace_keeps_and_checks_again_what_the_caller_gave():
    opts = check_config("regress", population=1000, tournament=7, fit_top=3)
    half = opts.replace(population=500)
    assert (half.tournament, half.fit_top, half.elitism) == (7, 3, 5)
    with pytest.raises(SearchError, match=r"tournament=7: give an int in \[1, 5\]"):
        opts.replace(population=5)
    # what a replace gives is given from then on (the search's resolved fitting options)
    lm = opts.replace(fit_method="lm", fit_top=1000)
    assert lm.replace(generations=3).fit_top == 1000


def test_a_run_keeps_its_resolved_options_through_replace():
    X = np.random.default_rng(0).uniform(-1, 1, (32, 1)).astype(np.float32)
    y = (2 * X[:, 0]).astype(np.float32)
    r = search.regress(X, y, ["add", "mul"], population=16, generations=1, seed=0,
                       device="cpu")
    cfg = r._search.cfg
    assert (cfg.fit_method, cfg.fit_top, cfg.input_weights, cfg.linear_scaling) == \
        ("lm", 16, True, True)
    again = cfg.replace(generations=9)
    assert dataclasses.replace(again, generations=1) == cfg
    assert set(again.to_dict()) == set(DEFAULTS)


def test_the_dataclass_constructor_and_dataclasses_replace_are_checked():
    opts = check_config("regress", population=200)
    with pytest.raises(SearchError, match="population=-3"):
        dataclasses.replace(opts, population=-3)
    with pytest.raises(SearchError, match="fit_method='bogus'"):
        dataclasses.replace(opts, fit_method="bogus")
    with pytest.raises(SearchError, match="where='search'"):
        dataclasses.replace(opts, kind="search")
    fields = {"kind": "regress", **opts.to_dict()}
    with pytest.raises(SearchError, match="mutation=1.5"):
        SearchOptions(**(fields | {"mutation": 1.5}))
    # a good one is the checked one, its values normalized as check_config normalizes them
    made = SearchOptions(**(fields | {"population": np.int64(200), "init_length": [2, 12]}))
    assert type(made.population) is int and made.init_length == (2, 12)
    assert dataclasses.replace(made, init_length=None) == opts    # None: derived from the inputs
    # None for a derived option: derived, as check_config derives it
    assert SearchOptions(**(fields | {"population": 3, "tournament": None, "islands": None,
                                      "elitism": None, "fit_top": None})) == \
        check_config("regress", population=3)


def _xy():
    X = np.random.default_rng(1).uniform(-1, 1, (32, 1)).astype(np.float32)
    return X, (3 * X[:, 0] + 1).astype(np.float32)


def test_fit_trials_is_bounded_by_the_fit_method_the_run_resolves():
    """fit_method='auto' is checked as what it resolves to: on the CPU with a least-squares
    loss that is lm, which takes no trials, so fit_top x fit_trials past 1,000,000 runs there
    (as it does with fit_method='lm'); where it resolves to es the bound holds."""
    X, y = _xy()
    kw = dict(population=64, generations=1, seed=0, device="cpu", fit_top=64,
              fit_trials=20_000)
    lm = search.regress(X, y, ["add", "mul"], fit_method="lm", **kw)
    auto = search.regress(X, y, ["add", "mul"], **kw)            # resolves to lm: the same
    assert auto._search.cfg.fit_method == "lm"
    assert auto._search.cfg == lm._search.cfg and auto.best.loss == lm.best.loss
    # resolved to es (mae is no least-squares loss): fit_top x fit_trials is bounded
    with pytest.raises(SearchError, match=r"fit_trials=20000: give an int in \[1, 15,625\]"):
        search.regress(X, y, ["add", "mul"], loss="mae", **kw)
    with pytest.raises(SearchError, match=r"fit_trials=20000: give an int in \[1, 15,625\]"):
        search.regress(X, y, ["add", "mul"], fit_method="es", **kw)
    with pytest.raises(SearchError, match=r"fit_trials=20000: give an int in \[1, 15,625\]"):
        search.map_elites(X, y, ["add", "mul"], batch=64, generations=1, seed=0, loss="mae",
                          device="cpu", fit_top=64, fit_trials=20_000)


def test_a_data_checkpoint_with_fit_method_auto_is_refused(tmp_path):
    """A data run saves the fit method it resolved; 'auto' in its checkpoint (a hand-edited
    file) is a CheckpointError naming it, since 'auto' is checked with lm's fit_trials bound
    (the run checks the resolved method again): a forged file must not slip past the es bound."""
    from numptx.search import checkpoint as ck
    from numptx.search.checkpoint import CheckpointError
    from numptx.search.fields import Fields
    X, y = _xy()
    r = search.regress(X, y, ["add", "mul"], population=16, generations=1, seed=0,
                       device="cpu", fit_method="es")
    r.save(tmp_path / "r.nxck")
    state = ck.read(tmp_path / "r.nxck")
    assert state["config"]["fit_method"] == "es"
    state["config"] |= {"fit_method": "auto", "fit_top": 16, "fit_trials": 500_000}
    ck.write(tmp_path / "auto.nxck", state)
    # the fields' check alone (resumed unchecked, es would score 8,000,000 trial programs)
    with pytest.raises(CheckpointError, match="field config: fit_method='auto'"):
        Fields(ck.read(tmp_path / "auto.nxck"), "auto.nxck").config("regress", None)
    with pytest.raises(CheckpointError, match="field config: fit_method='auto'"):
        state["config"]["fit_trials"] = 4
        ck.write(tmp_path / "auto4.nxck", state)
        search.resume(tmp_path / "auto4.nxck", generations=1, device="cpu")
    assert search.resume(tmp_path / "r.nxck", generations=1, device="cpu").generations == 2
