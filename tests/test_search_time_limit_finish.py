"""``time_limit`` counts what a run does after its last generation (the finishing: the
returned programs re-scored by the compiled path, the scaling written into them, the front):
the loop leaves it its estimated time (``Search.finish_estimate``), and the writing of the
scaling takes the forms' losses from one run of the programs (numptx.search.scaling). No
timing is asserted: what is checked is the decision each estimate leads to, and that the
losses returned are still those the compiled path gives."""
from __future__ import annotations

import dataclasses

import numpy as np

from numptx import search
from numptx import stack_ptx as sp
from numptx.search.evaluate import Evaluator
from numptx.search.genes import Genes
from numptx.search.loop import Candidate
from numptx.search.scaling import written

OPS = ["add", "sub", "mul", "sin"]


def _data(n: int = 40, seed: int = 0, dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    X = np.random.default_rng(seed).uniform(-2, 2, (n, 2)).astype(dtype)
    return X, (X[:, 0] ** 3 - X[:, 0] + 0.5 * X[:, 1] ** 2).astype(dtype)


def _run(**kw):
    X, y = _data()
    opts = dict(population=120, generations=2, seed=3, evaluate="interpret", device="cpu")
    return search.regress(X, y, OPS, **{**opts, **kw})


def _fresh_compiled(X: np.ndarray, y: np.ndarray, programs: list) -> np.ndarray:
    """The losses a new evaluator's compiled path (no scaling) gives the programs."""
    ev = Evaluator(X, y, loss="mse", device="cpu", evaluate="compile")
    return ev.score_compiled(programs, build="full")


def test_the_finishing_estimate_stops_a_generation_that_would_otherwise_run():
    r = _run(time_limit=1e6)
    s = r._search
    est = s.finish_estimate()
    assert est > 0 and s._compiled_rate is not None    # the compiled re-score was timed
    last = s.history[-1].seconds
    # a limit the next generation would keep alone, but not with the finishing after it
    s.cfg = dataclasses.replace(s.cfg, time_limit=last + est / 2)
    assert not 0.0 + last > s.cfg.time_limit           # the old rule: one more generation
    assert s.out_of_time(0.0)
    again = s.run(5, False)
    assert again.stopped == "time_limit" and again.generations == len(r.history)
    # room for both: the check lets the next generation start
    s.cfg = dataclasses.replace(s.cfg, time_limit=last + 2 * est + 3600)
    assert not s.out_of_time(0.0)
    assert s.out_of_time(3600 + last + 2 * est)       # past the limit whatever the estimate


def test_without_a_time_limit_or_before_a_generation_nothing_is_estimated():
    X, y = _data()
    s = search.regress(X, y, OPS, population=60, generations=0, seed=0, evaluate="interpret",
                       device="cpu", time_limit=5.0)._search
    assert s.finish_estimate() == 0.0 and not s.out_of_time(4.9) and s.out_of_time(5.1)
    assert s._compiled_rate is None                      # no generation: nothing timed
    r = _run()
    assert not r._search.out_of_time(1e9)                # no time limit: never out of time
    assert r._search._compiled_rate is None


def test_a_time_limit_that_does_not_bind_changes_nothing():
    # the estimate times a compiled re-score and makes the plain evaluator during the run:
    # neither may touch what the run draws or finds
    a, b, c = _run(time_limit=1e6), _run(time_limit=1e6), _run()
    assert a.stopped == b.stopped == c.stopped == "generations"
    for r in (b, c):
        assert r.best.program == a.best.program and r.best.loss == a.best.loss
        assert [g.best for g in r.history] == [g.best for g in a.history]
        assert [(p.program, p.loss) for p in r.population] == \
            [(p.program, p.loss) for p in a.population]
        assert [(e.program, e.loss) for e in r.front] == [(e.program, e.loss) for e in a.front]
        assert r.evaluated == a.evaluated


def test_what_is_returned_carries_the_compiled_paths_losses():
    X, y = _data()
    r = _run(time_limit=1e6)
    assert r.rescored is not None and r.rescored.differing == 0
    progs = [r.best.program] + [e.program for e in r.front]
    want = _fresh_compiled(X, y, progs)
    assert [r.best.loss] + [e.loss for e in r.front] == want.tolist()
    # the population (written from one run of its programs) too, bit for bit on the CPU
    pop = _fresh_compiled(X, y, [p.program for p in r.population])
    got = np.array([p.loss for p in r.population])
    assert np.array_equal(got, pop)


def test_written_from_outputs_equals_the_forms_scored_one_by_one():
    # the CPU interpreter's evaluator takes the forms' losses from the outputs; a compiled
    # evaluator scores each form: the same programs and losses, every form picked
    for dtype, dt in ((np.float32, "f32"), (np.float64, "f64")):
        X = np.random.default_rng(1).uniform(-1, 1, (30, 2)).astype(dtype)
        y = (X[:, 0] * X[:, 1] + 3).astype(dtype)
        genes = Genes(["add", "mul"], 2, dtype=dt)
        x0, x1 = sp.input("x0"), sp.input("x1")
        mul, add = sp.instr(f"mul.rn.{dt}"), sp.instr(f"add.rn.{dt}")
        progs = [[x0, x1, mul, sp.const(3.0, dt), add],          # exact: as it is
                 [x0, x1, mul],                                    # f + a
                 [x0, x1, add],                                    # f * b + a
                 [x0, x0, mul, x1, mul], [x1, x1, x0, mul, mul, x0, add]]
        cands = [Candidate(p, 0.0, genes) for p in progs]
        fast = Evaluator(X, y, device="cpu", evaluate="interpret", linear_scaling=True)
        slow = Evaluator(X, y, device="cpu", evaluate="compile", linear_scaling=True)
        a, b = written(fast, genes, cands), written(slow, genes, cands)
        assert [c.program for c in a] == [c.program for c in b]
        assert [c.loss for c in a] == [c.loss for c in b]
        assert [len(c.program) - len(p) for c, p in zip(a, progs)][:3] == [0, 2, 4]
        assert [c.loss for c in a] == \
            _fresh_compiled(X, y, [c.program for c in a]).tolist()
