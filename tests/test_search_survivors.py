"""Who forms the next population (``survivors=``): "plus" (parents and children compete,
each program once) and "children" (elites + children), their checks and checkpoints."""
import numpy as np
import pytest

from numptx import search
from numptx import stack_ptx as sp
from numptx.search import checkpoint as ck
from numptx.search.genes import SearchError

OPS = ["add", "sub", "mul"]


def _data(n=24, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
    x = X[:, 0]
    return X, (x ** 3 + x * x + x).astype(np.float32)


def _run(**kw):
    X, y = _data()
    opts = dict(population=40, generations=6, seed=1, device="cpu", fit_top=4, fit_steps=3)
    opts.update(kw)
    return search.regress(X, y, OPS, **opts)


def _pop_losses(r):
    return [c.loss for c in r._search.population]


def test_plus_is_regress_default_and_children_is_evolves():
    from numptx.search.config import check_config
    assert check_config("regress").survivors == "plus"
    assert check_config("evolve").survivors == "children"
    assert _run(generations=1)._search.cfg.survivors == "plus"


def test_plus_never_loses_the_best_and_keeps_each_program_once():
    best_of_pop = []
    r = _run(generations=8, progress=lambda g: best_of_pop.append(g.best))
    pop = r._search.population
    assert len(pop) == 40
    names = list(r._search.genes.names)
    exact = [sp.encode(c.program, names).tobytes() for c in pop]
    assert len(set(exact)) == len(exact)
    # the population's best is the run's best (it cannot be lost), and it never rises
    assert min(_pop_losses(r)) == r._search.best.loss
    assert all(b <= a for a, b in zip(best_of_pop, best_of_pop[1:]))
    # the population is sorted best first (the survivors are the best of parents + children)
    assert _pop_losses(r) == sorted(_pop_losses(r))


def test_children_replaces_all_but_the_elites():
    r = _run(survivors="children", elitism=2, generations=3)
    pop = r._search.population
    assert len(pop) == 40
    # the two elites lead, then the children in the order made: not sorted by loss
    losses = _pop_losses(r)
    assert losses[:2] == sorted(losses[:2]) and losses[2:] != sorted(losses[2:])


def test_plus_and_children_differ_and_each_is_reproducible():
    a, b = _run(survivors="plus"), _run(survivors="plus")
    c = _run(survivors="children")
    assert _pop_losses(a) == _pop_losses(b)
    assert [x.program for x in a._search.population] != [x.program for x in c._search.population]


@pytest.mark.parametrize("bad", ["best", "", None.__class__, 1, True])
def test_a_bad_survivors_is_a_search_error_naming_it(bad):
    with pytest.raises(SearchError, match="survivors"):
        _run(survivors=bad, generations=1)


def test_a_plus_run_resumes_exactly(tmp_path):
    whole = _run(generations=6)
    half = _run(generations=3)
    path = tmp_path / "run.nxck"
    half.save(path)
    more = search.resume(path, generations=3, device="cpu")
    assert more._search.cfg.survivors == "plus"
    assert _pop_losses(more) == _pop_losses(whole)
    assert more.best.program == whole.best.program


def test_a_checkpoint_saved_before_survivors_resumes_generational(tmp_path):
    r = _run(generations=2, survivors="children")
    path = tmp_path / "old.nxck"
    r.save(path)
    state = ck.read(path)
    del state["config"]["survivors"]               # as a run saved before the option
    ck.write(path, state)
    more = search.resume(path, generations=1, device="cpu")
    assert more._search.cfg.survivors == "children"
