"""Constants fitted by Levenberg–Marquardt on the batch interpreter, and linear scaling
(numptx.search.least_squares, numptx.search.scaling, Evaluator(linear_scaling=True))."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from numptx import stack_ptx as sp
from numptx import search
from numptx.search.evaluate import Evaluator
from numptx.search.genes import Genes, SearchError
from numptx.search.least_squares import ParameterTapes, fit_least_squares
from numptx.search.operators import constants_of
from numptx.search.scaling import outputs, written
from numptx.search.loop import Candidate

F32 = "f32"


def c(v, t=F32):
    return sp.const(v, t)


def i(name):
    return sp.instr(name)


def x(j=0):
    return sp.input(f"x{j}")


def _data(f, n=40, d=1, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d)).astype(dtype)
    return X, f(X).astype(dtype)


def _sin_prog(t=F32):
    # b * sin(a * x) + c0, constants a=1, b=1, c0=0
    return [c(1.0, t), x(), i(f"mul.rn.{t}"), i(f"sin.approx.{t}") if t == F32 else
            i(f"mul.rn.{t}"), c(1.0, t), i(f"mul.rn.{t}"), c(0.0, t), i(f"add.rn.{t}")]


def test_lm_recovers_constants_exactly():
    X, y = _data(lambda X: 2.5 * np.sin(1.7 * X[:, 0]) + 0.3)
    ev = Evaluator(X, y, loss="mse", device="cpu", evaluate="interpret")
    before = ev.score([_sin_prog()])[0]
    progs, sse, runs = fit_least_squares(ev, [_sin_prog()], steps=20)
    after = ev.score(progs)[0]
    assert before > 1.0 and after < 1e-12 * before
    np.testing.assert_allclose(constants_of(progs[0]), [1.7, 2.5, 0.3], rtol=1e-5, atol=1e-6)
    # a trial a round, and its 3 perturbed runs when it is taken and a step follows (round
    # 0's is; not every round's)
    assert 20 + 3 <= runs < 20 * 4
    assert sse[0] == pytest.approx(after * len(y), rel=1e-3, abs=1e-12)


def test_lm_f64_and_linear_scaling_residual():
    X, y = _data(lambda X: 4.0 * X[:, 0] * X[:, 0] * 1.25 - 7.0, dtype=np.float64)
    prog = [x(), c(0.5, "f64"), i("add.rn.f64"), x(), i("mul.rn.f64")]   # (x + 0.5) x
    ev = Evaluator(X, y, loss="mse", device="cpu", evaluate="interpret", linear_scaling=True)
    progs, sse, _ = fit_least_squares(ev, [prog], steps=15)
    # a + b (x + c) x = 5 x^2 - 7 needs c = 0: the scaled loss goes to (near) zero
    assert abs(constants_of(progs[0])[0]) < 1e-6
    assert ev.score(progs)[0] < 1e-20


def test_protected_and_dead_constants_stay():
    X, y = _data(lambda X: 3.0 * X[:, 0])
    ev = Evaluator(X, y, loss="mse", device="cpu", evaluate="interpret")
    # 9.0 is pushed and never used (dead), 1.4426950408889634 is protected
    prog = [c(9.0), x(), c(1.4426950408889634), i("mul.rn.f32"), c(1.0), i("mul.rn.f32")]
    progs, _, _ = fit_least_squares(ev, [prog], steps=10, protect=(float(np.float32(
        1.4426950408889634)),))
    got = constants_of(progs[0])
    assert got[0] == 9.0 and got[1] == np.float32(1.4426950408889634)
    assert got[2] == pytest.approx(3.0 / float(np.float32(1.4426950408889634)), rel=1e-5)


def test_parameter_tapes_slots_follow_the_program_constants():
    X, y = _data(lambda X: X[:, 0])
    ev = Evaluator(X, y, loss="mse", device="cpu", evaluate="interpret")
    # two equal constants are two parameters (the stub would share one literal)
    prog = [x(), c(2.0), i("mul.rn.f32"), c(2.0), i("add.rn.f32")]
    pt = ParameterTapes(ev, [prog, [x()]])
    assert pt.ok.all()
    assert sorted(pt.slot_param[pt.slot_prog == 0].tolist()) == [0, 1]
    var = pt.variants(np.array([0, 0, 1]))
    out = var.run(np.array([[3.0, 5.0], [1.0, -1.0], [0.0, 0.0]]))
    np.testing.assert_array_equal(out[0], (X[:, 0] * np.float32(3) + np.float32(5)))
    np.testing.assert_array_equal(out[1], (X[:, 0] * np.float32(1) - np.float32(1)))
    np.testing.assert_array_equal(out[2], X[:, 0])


def test_program_the_interpreter_refuses_is_left_as_it_is():
    X, y = _data(lambda X: X[:, 0] + 1)
    ev = Evaluator(X, y, loss="mse", device="cpu", evaluate="interpret")
    prog = [sp.input("cand"), i("cvt.rn.f32.u32"), x(), i("add.rn.f32"), c(3.0),
            i("add.rn.f32")]
    progs, sse, _ = fit_least_squares(ev, [prog], steps=5)
    assert progs[0] == prog and np.isinf(sse[0])


def test_scaled_loss_is_the_best_affine_fit():
    X, y = _data(lambda X: np.exp(X[:, 0]) * 3 - 2, n=64)
    ev = Evaluator(X, y, loss="mse", device="cpu", evaluate="interpret", linear_scaling=True)
    progs = [[x(), i("mul.rn.f32"), x()], [x(), x(), i("mul.rn.f32")],
             [x(), c(0.5), i("add.rn.f32"), i("sin.approx.f32")]]
    got = ev.score(progs)
    F = outputs(ev, progs)
    for k in range(len(progs)):
        A = np.stack([np.ones(len(y)), F[k]], 1)
        coef = np.linalg.lstsq(A, y.astype(np.float64), rcond=None)[0]
        want = np.mean((A @ coef - y) ** 2)
        assert got[k] == pytest.approx(want, rel=1e-6)
    rm = Evaluator(X, y, loss="rmse", device="cpu", evaluate="interpret", linear_scaling=True)
    np.testing.assert_allclose(rm.score(progs), np.sqrt(got), rtol=1e-12)


def test_written_keeps_exact_programs_and_writes_scaling():
    genes = Genes(["add", "mul", "sin"], 1)
    X, y = _data(lambda X: 2 * X[:, 0] * X[:, 0] + 1)
    ev = Evaluator(X, y, loss="mse", device="cpu", evaluate="interpret", linear_scaling=True)
    exact = [x(), x(), i("mul.rn.f32"), x(), x(), i("mul.rn.f32"), i("add.rn.f32"), c(1.0),
             i("add.rn.f32")]
    shape = [x(), x(), i("mul.rn.f32")]
    got = written(ev, genes, [Candidate(exact, 0.0, genes), Candidate(shape, 0.0, genes)])
    assert got[0].program == exact                     # already exact: as it was found
    assert len(got[1].program) == len(shape) + 4       # * b + a written in
    assert got[1].loss < 1e-10
    assert got[1].loss == ev.plain().score([got[1].program])[0]
    np.testing.assert_allclose(got[1].predict(X), y, rtol=1e-5, atol=1e-5)
    assert "*2" in got[1].formula.replace(" ", "") and "+1" in got[1].formula.replace(" ", "")


def test_regress_fits_constants_and_returns_a_deployable_program():
    X, y = _data(lambda X: 3.7 * np.sin(2.3 * X[:, 0]) - 0.4, n=30, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no rescore difference is warned
        r = search.regress(X, y, ["add", "sub", "mul", "sin"], population=200,
                           generations=30, seed=1, device="cpu", target=1e-10)
    assert r.stopped == "target"
    assert r.best.loss < 1e-10 * 10
    assert r._search.cfg.fit_method == "lm" and r._search.cfg.linear_scaling is True
    np.testing.assert_allclose(r.best.predict(X), y, atol=1e-4)
    assert r.rescored is not None and r.rescored.differing == 0
    assert r.best.loss == Evaluator(X, y, device="cpu", evaluate="compile").score(
        [r.best.program])[0]
    pop_loss = [p.loss for p in r.population]
    assert pop_loss == list(Evaluator(X, y, device="cpu").score([p.program
                                                                 for p in r.population]))


def test_options_checked():
    X, y = _data(lambda X: X[:, 0])
    with pytest.raises(SearchError, match="linear_scaling='yes'"):
        search.regress(X, y, linear_scaling="yes", generations=1, population=8)
    with pytest.raises(SearchError, match="loss='mae'"):
        search.regress(X, y, loss="mae", linear_scaling=True, generations=1, population=8)
    with pytest.raises(SearchError, match="fit_method='bfgs'"):
        search.regress(X, y, fit_method="bfgs", generations=1, population=8)
    with pytest.raises(SearchError, match="fit_method='lm' with loss='mae'"):
        search.regress(X, y, loss="mae", fit_method="lm", generations=1, population=8)
    r = search.regress(X, y, linear_scaling=np.True_, generations=1, population=8, seed=0,
                       device="cpu")
    assert r._search.cfg.linear_scaling is True
    with pytest.raises(SearchError, match="linear scaling"):
        search.regress(X, np.ones_like(y), linear_scaling=True, generations=1, population=8)


def test_defaults_resolve_by_loss_and_device():
    X, y = _data(lambda X: X[:, 0] * 2)
    r = search.regress(X, y, generations=1, population=16, seed=0, device="cpu", loss="mae")
    assert r._search.cfg.fit_method == "es" and r._search.cfg.linear_scaling is False
    r = search.regress(X, np.ones_like(y), generations=1, population=16, seed=0, device="cpu")
    assert r._search.cfg.linear_scaling is False       # a constant y: nothing to scale
    r = search.regress(X, y, generations=1, population=16, seed=0, device="cpu",
                       fit_method="es", linear_scaling=False)
    assert r._search.cfg.fit_method == "es" and r._search.cfg.fit_top == 2
    # under lm every child is fitted (as Operon fits every child), unless fit_top says
    r = search.regress(X, y, generations=1, population=16, seed=0, device="cpu")
    assert r._search.cfg.fit_method == "lm" and r._search.cfg.fit_top == 16
    r = search.regress(X, y, generations=1, population=16, seed=0, device="cpu", fit_top=3)
    assert r._search.cfg.fit_top == 3


def test_resume_keeps_scaling_and_method(tmp_path):
    X, y = _data(lambda X: 5 * X[:, 0] * X[:, 0] + 1)
    r = search.regress(X, y, ["add", "mul"], generations=2, population=32, seed=4,
                       device="cpu")
    path = tmp_path / "run.ckpt"
    r.save(path)
    r2 = search.resume(path, generations=1)
    assert r2._search.cfg.linear_scaling is True
    assert r2._search.cfg.fit_method == "lm"
    assert r2._search.evaluator.linear_scaling
    assert r2.best.loss <= r.best.loss


def test_weighted_inputs_are_one_gene_and_survive_a_checkpoint(tmp_path):
    g = Genes(["add", "sin"], 2, weights=True)
    w = g.input_words("x1")
    assert [op.kind for op in w] == ["const", "input", "instr"]
    # a fitted weight (any value) is still one gene; a bare constant before it is its own
    prog = [c(0.25), c(-3.5), sp.input("x1"), w[2], *g.op_words("add")]
    assert g.tokens(prog) == [0, 1, 4, 5]
    assert Genes.from_dict(g.to_dict()) == g and g != Genes(["add", "sin"], 2)
    # ops without "mul": the checkpoint still takes the weighted inputs' mul
    X, y = _data(lambda X: np.sin(2 * X[:, 0]) + X[:, 1], d=2)
    r = search.regress(X, y, ["add", "sin"], population=24, generations=2, seed=0,
                       device="cpu")
    assert r._search.genes.weights
    r.save(tmp_path / "w.ckpt")
    more = search.resume(tmp_path / "w.ckpt", generations=1)
    assert more.generations == 3 and more._search.genes.weights


def test_resume_of_a_weighted_lm_run_is_exact(tmp_path):
    X, y = _data(lambda X: 1.5 * X[:, 0] ** 3 - X[:, 0], n=30)
    kw = dict(population=40, seed=3, device="cpu")
    full = search.regress(X, y, ["add", "sub", "mul"], generations=4, **kw)
    part = search.regress(X, y, ["add", "sub", "mul"], generations=2, **kw)
    part.save(tmp_path / "p.ckpt")
    more = search.resume(tmp_path / "p.ckpt", generations=2)
    assert [g[:5] for g in more.history] == [g[:5] for g in full.history]
    assert more.best.program == full.best.program


def test_a_large_lm_population_passes_the_trials_bound_that_es_keeps():
    """Under lm fit_top defaults to every child and takes no trials: a checkpoint of a
    population over 250,000 (fit_top x 4 trials > 1,000,000) must still resume."""
    from numptx.search.config import check_config
    cfg = check_config("regress", population=300_000, fit_top=300_000, fit_method="lm")
    assert cfg.fit_top == 300_000 and cfg.fit_trials == 4
    with pytest.raises(SearchError, match="fit_trials"):
        check_config("regress", population=300_000, fit_top=300_000, fit_method="es")
