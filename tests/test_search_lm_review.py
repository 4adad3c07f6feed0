"""Review of the Levenberg–Marquardt constant fitting (numptx.search.least_squares) and the
linear scaling written into returned programs (numptx.search.scaling): each test pins a
defect found in review (it failed before its fix)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from numptx import stack_ptx as sp
from numptx.search.evaluate import Evaluator
from numptx.search.genes import Genes, SearchError
from numptx.search.least_squares import fit_least_squares
from numptx.search.operators import constants_of, random_program


def c(v, t="f32"):
    return sp.const(v, t)


def i(name):
    return sp.instr(name)


def x(j=0):
    return sp.input(f"x{j}")


def _ev(f=lambda X: 3 * X[:, 0] + 1, dtype=np.float32, n=40, d=1, seed=0, **kw):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d)).astype(dtype)
    kw = {"loss": "mse", "device": "cpu", "evaluate": "interpret"} | kw
    return Evaluator(X, f(X).astype(dtype), **kw)


def _fit(ev, progs, **kw):
    """fit_least_squares with every warning an error (a fit warns nothing)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fit_least_squares(ev, progs, **kw)


def test_protected_huge_constant_is_not_clipped():
    # the trials are clipped to +-1e30; a protected constant beyond that stayed clipped
    ev = _ev()
    big = float(np.float32(1e35))
    prog = [x(), c(big), i("mul.rn.f32"), c(1.0), i("mul.rn.f32"), c(0.5), i("add.rn.f32")]
    progs, sse, _ = _fit(ev, [prog], steps=8, protect=(big,))
    got = constants_of(progs[0])
    assert got[0] == big
    assert ev.score(progs)[0] < ev.score([prog])[0]
    assert sse[0] == pytest.approx(ev.score(progs)[0] * 40, rel=1e-9)


def test_protected_f64_constant_in_an_f32_program_stays_exact():
    # an f64 constant (behind cvt) was rounded to f32 with the f32 evaluator's trials, and
    # written back so, protected or not
    ev = _ev()
    prog = [x(), i("cvt.f64.f32"), c(0.1, "f64"), i("add.rn.f64"), c(2.0, "f64"),
            i("mul.rn.f64"), i("cvt.rn.f32.f64")]
    progs, sse, _ = _fit(ev, [prog], steps=10, protect=(0.1,))
    got = constants_of(progs[0])
    assert got[0] == 0.1
    assert sse[0] == pytest.approx(ev.score(progs)[0] * 40, rel=1e-9)


def test_f32_constants_in_an_f64_search_are_fitted():
    # the step h ~ sqrt(eps) |theta| was the evaluator's (f64) for every constant: below an
    # f32 constant's ulp, so its Jacobian was zero and it never moved
    ev = _ev(dtype=np.float64)
    prog = [x(), i("cvt.rn.f32.f64"), c(2.0), i("mul.rn.f32"), c(0.0), i("add.rn.f32"),
            i("cvt.f64.f32")]
    progs, _, _ = _fit(ev, [prog], steps=10)
    np.testing.assert_allclose(constants_of(progs[0]), [3.0, 1.0], rtol=1e-5, atol=1e-6)
    assert ev.score(progs)[0] < 1e-10


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_constant_is_kept_and_the_others_fitted(bad):
    # a NaN constant made fit_least_squares raise SearchError('values[0]=nan ...') writing
    # its own trial back; an inf one warned (inf - inf) and was replaced by 1e30
    ev = _ev()
    op = "max.f32" if bad != bad else "min.f32"       # max(x, NaN) = x, min(x, inf) = x
    prog = [x(), c(bad), i(op), c(2.0), i("mul.rn.f32"), c(0.0), i("add.rn.f32")]
    progs, _, _ = _fit(ev, [prog], steps=10)
    got = constants_of(progs[0])
    assert progs[0][1] == prog[1]                     # the very op, as it was
    np.testing.assert_allclose(got[1:], [3.0, 1.0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kw, name", [
    (dict(steps=2.5), "steps=2.5"), (dict(steps="3"), "steps='3'"),
    (dict(steps=-1), "steps=-1"), (dict(protect=("a",)), "protect"),
    (dict(protect=1.0), "protect"), (dict(scaling="yes"), "scaling='yes'")])
def test_bad_arguments_are_refused(kw, name):
    ev = _ev()
    prog = [x(), c(2.0), i("mul.rn.f32")]
    with pytest.raises(SearchError, match=name):
        fit_least_squares(ev, [prog], **kw)


def test_bad_evaluator_and_programs_are_refused():
    ev = _ev()
    with pytest.raises(SearchError, match="evaluator"):
        fit_least_squares(None, [[x()]])
    with pytest.raises(SearchError, match="programs"):
        fit_least_squares(ev, 5)
    with pytest.raises(SearchError, match=r"programs\[1\]=7"):
        fit_least_squares(ev, [[x()], 7])


def test_pearson_fit_never_makes_a_program_worse():
    # under loss="pearson" (1 - r, signed) the fit minimized the SSE of the best a + b f,
    # b of either sign: a program anti-correlated with y was driven to a more negative r
    # (a worse pearson loss), and fit_least_squares returned it
    g = Genes(["add", "sub", "mul", "div", "sin", "cos"], 2, weights=True)
    rng = np.random.default_rng(1)
    ev = _ev(lambda X: np.sin(X[:, 0]) * 2 + X[:, 1] ** 2, n=50, d=2, seed=1, loss="pearson")
    progs = [random_program(g, rng, int(rng.integers(2, 14))) for _ in range(120)]
    fitted, _, _ = _fit(ev, progs, steps=8)
    before, after = ev.score(progs), ev.score(fitted)
    worse = np.flatnonzero(after > before + 1e-12)
    assert not len(worse), [(k, before[k], after[k]) for k in worse[:5]]
    assert (after < before - 1e-6).sum() > 10          # and it still fits


def test_scaled_fit_never_moves_into_a_constant_output():
    # under linear scaling a constant output has no correlation: the evaluator scores it
    # +inf, but the fit counted it n var(y), and took a trial that made a near-constant
    # output exactly constant (its sse lower by a rounding): a program scoring inf came back
    g = Genes(["add", "sub", "mul", "div", "sqrt"], 2, dtype="f64", weights=True)
    rng = np.random.default_rng(1)
    X = np.random.default_rng(1).uniform(-2, 2, (50, 2))
    ev = Evaluator(X, np.sin(X[:, 0]) * 2 + X[:, 1] ** 2, loss="mse", device="cpu",
                   evaluate="interpret", linear_scaling=True)
    progs = [random_program(g, rng, int(rng.integers(2, 20))) for _ in range(300)]
    fitted, sse, _ = _fit(ev, progs, steps=8)
    before, after = ev.score(progs), ev.score(fitted)
    worse = np.flatnonzero(after > before * (1 + 1e-12))
    assert not len(worse), [(k, before[k], after[k]) for k in worse[:5]]
    # the fit's sums say what the evaluator says: +inf exactly where it scores +inf
    moved = np.isfinite(sse)
    np.testing.assert_array_equal(np.isfinite(sse[moved]), np.isfinite(after[moved]))


def test_written_form_is_the_same_under_mse_and_rmse():
    # the "within a hair" floor 1e-10 var(y) is in squared units; rmse losses were compared
    # with it as they are, so a near-exact program got "* 1 - 9e-08" written under rmse
    # (and the form chosen depended on the units of y)
    from numptx.search.loop import Candidate
    from numptx.search.scaling import written
    g = Genes(["add", "mul"], 1, dtype="f64")
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (64, 1))
    y = 2 * X[:, 0] * X[:, 0] + 1 + 1e-6 * rng.standard_normal(64)
    prog = [x(), x(), i("mul.rn.f64"), c(2.0, "f64"), i("mul.rn.f64"), c(1.0, "f64"),
            i("add.rn.f64")]
    got = {}
    for loss in ("mse", "rmse"):
        ev = Evaluator(X, y, loss=loss, device="cpu", evaluate="interpret",
                       linear_scaling=True)
        w = written(ev, g, [Candidate(prog, 0.0, g)])[0]
        assert w.loss == ev.plain().score([w.program])[0]
        got[loss] = w.program
    assert got["mse"] == got["rmse"] == prog


def test_fit_holds_a_bounded_batch_of_outputs(monkeypatch):
    # every program's 1 + k variant runs over all rows were held at once (and several
    # float64 copies of them): ~28 bytes x variants x rows, 45 GB for a population of 1000
    # on a million rows; the evaluator's interpreter holds 2**23 predictions at a time
    import numptx.search.least_squares as ls
    g = Genes(["add", "sub", "mul", "sin"], 2, weights=True)
    rng = np.random.default_rng(2)
    ev = _ev(lambda X: np.sin(2 * X[:, 0]) + X[:, 1], n=60, d=2, seed=2)
    progs = [random_program(g, rng, int(rng.integers(3, 12))) for _ in range(40)]
    _fit = ls._fit_numpy     # the NumPy reference batches (the C fit holds one program a thread)
    whole, sse_whole, runs_whole = _fit(ev, progs, steps=4)
    held = []
    run = ls.Variants.run

    def spy(self, thetas):
        held.append(len(thetas) * self.pt.n_rows)
        return run(self, thetas)

    monkeypatch.setattr(ls.Variants, "run", spy)
    monkeypatch.setattr(ls, "CHUNK_VALUES", 16 * 60, raising=False)
    parts, sse_parts, runs_parts = _fit(ev, progs, steps=4)
    biggest = max(1 + len(constants_of(p)) for p in progs) * 60
    assert max(held) <= max(16 * 60, biggest) and len(held) > 4 * 3
    # batches change nothing: each program's fit is its own
    assert parts == whole and runs_parts == runs_whole
    np.testing.assert_array_equal(sse_parts, sse_whole)


def test_pearson_of_a_rounding_constant_is_the_same_on_both_reductions():
    from numptx.jit.populations.fitness import losses_from_sums
    from numptx.jit.populations.fitness_interpret import losses_of_predictions
    rng = np.random.default_rng(1)
    X = rng.uniform(0.1, 2, 64).astype(np.float32)
    y = (np.sin(3 * X) + X + 10).astype(np.float32)         # a mean away from pred's
    # (x * 1.00001) / (x * 1.00004): a constant but for its last bits
    pred = (X * np.float32(1.00001)) / (X * np.float32(1.00004))
    assert pred.std() > 0 and pred.std() < 1e-6 * abs(pred.mean())
    c0 = float(y.astype(np.float64).mean())        # the kernel's sums, as numpy takes them
    q = pred.astype(np.float64) - c0
    sums = np.array([[q.sum(), (q * q).sum(), (q * (y.astype(np.float64) - c0)).sum(), 0]])
    gpu = losses_from_sums(sums, y, "pearson")[0]
    cpu = losses_of_predictions(pred[None, :], y, "pearson")[0]
    assert (np.isinf(gpu) and np.isinf(cpu)) or gpu == pytest.approx(cpu, rel=1e-6)
    # the compiled CPU path (fitness._score) judges it alike
    from numptx.jit.populations.fitness import _score
    assert np.isinf(_score(pred, y, "pearson")) == np.isinf(cpu)
