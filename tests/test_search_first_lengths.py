"""The genes of a run's first programs (``init_length``; None derives them from the inputs:
numptx.search.config.first_lengths)."""
import numpy as np
import pytest

from numptx import search
from numptx.search import checkpoint as ck
from numptx.search.config import (DEFAULTS, INIT_LENGTH_MORE, INIT_LENGTH_ONE, check_config,
                                  first_lengths)
from numptx.search.checkpoint import CheckpointError
from numptx.search.genes import Genes

OPS = ["add", "sub", "mul"]


def _data(d: int, n: int = 40):
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    return X, (X.sum(axis=1) ** 2).astype(np.float32)


def _longest_first(X, y, **kw) -> int:
    """The most genes of a first program (a run's first generation is its first population)."""
    r = search.regress(X, y, OPS, population=300, generations=1, seed=5, device="cpu",
                       fit_top=0, linear_scaling=False, **kw)   # (scaling adds 4 ops)
    genes = r.population[0].genes
    return max(len(genes.tokens(c.program)) - 1 for c in r.population)


def test_first_lengths_derive_from_the_inputs():
    assert DEFAULTS["init_length"] is None and check_config("regress").init_length is None
    assert first_lengths(None, 1) == INIT_LENGTH_ONE == (2, 12)
    assert first_lengths(None, 2) == first_lengths(None, 7) == INIT_LENGTH_MORE == (2, 24)
    assert first_lengths((3, 5), 4) == (3, 5) and first_lengths([1, 1], 1) == (1, 1)


@pytest.mark.parametrize("d, given, low, high", [
    (1, None, 9, 12),          # one input: up to 12 genes
    (2, None, 13, 24),         # two: up to 24 (of 300 programs some pass 12)
    (2, (2, 12), 9, 12),       # given: as given, whatever the inputs
    (3, (4, 6), 4, 6),
])
def test_the_first_population_has_those_lengths(d, given, low, high):
    X, y = _data(d)
    kw = {} if given is None else {"init_length": given}
    assert low <= _longest_first(X, y, **kw) <= high


def test_one_input_runs_are_the_runs_of_before():
    # the default over one input is the old default's draws: the same run, bit for bit
    X, y = _data(1)
    a = search.regress(X, y, OPS, population=40, generations=3, seed=2, device="cpu")
    b = search.regress(X, y, OPS, population=40, generations=3, seed=2, device="cpu",
                       init_length=(2, 12))
    assert a.best.formula == b.best.formula and a.best.loss == b.best.loss
    assert [g.best for g in a.history] == [g.best for g in b.history]


def test_a_checkpoint_keeps_the_derived_lengths(tmp_path):
    X, y = _data(2)
    path = tmp_path / "run.nxck"
    search.regress(X, y, OPS, population=30, generations=1, seed=1, device="cpu").save(path)
    assert ck.read(path)["config"]["init_length"] is None
    r = search.resume(path, generations=1, device="cpu")
    assert r.generations == 2
    r.save(path)
    assert ck.read(path)["config"]["init_length"] is None      # still derived, not pinned
    state = ck.read(path)
    state["config"]["init_length"] = "long"
    ck.write(path, state)
    with pytest.raises(CheckpointError, match=r"field config: init_length='long'"):
        search.resume(path, generations=1, device="cpu")


def test_a_checkpoint_of_before_keeps_its_lengths(tmp_path):
    # a checkpoint written with init_length=[2, 12] (every one before None was the default)
    # resumes with those lengths over two inputs too: the run it was
    X, y = _data(2)
    path = tmp_path / "old.nxck"
    search.regress(X, y, OPS, population=30, generations=1, seed=1, device="cpu",
                   init_length=(2, 12)).save(path)
    assert ck.read(path)["config"]["init_length"] == [2, 12]
    search.resume(path, generations=1, device="cpu").save(path)
    assert ck.read(path)["config"]["init_length"] == [2, 12]
    # a checkpoint without the option at all (a trimmed file): (2, 12), what runs drew then
    state = ck.read(path)
    del state["config"]["init_length"]
    ck.write(path, state)
    r = search.resume(path, generations=1, device="cpu")
    r.save(path)
    assert ck.read(path)["config"]["init_length"] == [2, 12]


def test_checkpoint_programs_may_be_as_long_as_the_derived_first_ones():
    from numptx.search.fields import Fields, Programs
    g = Genes(OPS, 2)
    opts = check_config("regress", max_length=4)
    progs = Programs(Fields({}, "x.nxck"), g, opts)
    assert progs.max_ops == 24 * max(len(g.op_words(n)) for n in OPS)
