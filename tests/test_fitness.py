"""nx.fitness: scores of a population on a data set. On the CPU (formulas through their NumPy
reference, programs and PTX through the emulator) against an independent NumPy evaluation;
on a GPU (marker ``gpu``) against the CPU path; the generated kernel builds here for real."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

import numptx as nx
from numptx import stack_ptx as sp
from numptx.jit.populations.fitness import FitnessError, fitness_template

RNG = np.random.default_rng(11)
X = RNG.uniform(-2, 2, (300, 2)).astype(np.float32)
Y = (X[:, 0] * 1.5 - X[:, 1] * X[:, 1]).astype(np.float32)


def _formula(r: random.Random, depth: int) -> str:
    if depth == 0 or r.random() < 0.25:
        return r.choice(["x0", "x1", "np.float32(0.5)", "np.float32(2.0)", "np.float32(-1.25)"])
    a, b = _formula(r, depth - 1), _formula(r, depth - 1)
    k = r.randrange(7)
    return [f"({a} + {b})", f"({a} - {b})", f"({a} * {b})", f"np.abs({a})",
            f"np.minimum({a}, {b})", f"np.maximum({a}, {b})", f"np.sqrt(np.abs({a}))"][k]


def _to_nx(expr: str) -> str:
    return expr.replace("np.float32", "nx.f32").replace("np.abs", "nx.abs") \
        .replace("np.minimum", "nx.minimum").replace("np.maximum", "nx.maximum") \
        .replace("np.sqrt", "nx.sqrt")


def _make(i: int, expr: str):
    ns = {"nx": nx, "np": np}
    exec(f"def cand{i}(x0: nx.f32, x1: nx.f32) -> nx.f32:\n    return {_to_nx(expr)}\n", ns)
    return nx.ptx_expr(ns[f"cand{i}"], precision="accurate")   # NumPy rounds a*b+c twice


def _numpy_scores(exprs, loss):
    out = []
    for e in exprs:
        with np.errstate(all="ignore"):
            p = np.broadcast_to(eval(e, {"np": np, "x0": X[:, 0], "x1": X[:, 1]}),
                                Y.shape).astype(np.float64)
        t = Y.astype(np.float64)
        if not np.all(np.isfinite(p)):
            out.append(math.inf)
        elif loss == "mse":
            out.append(np.mean((p - t) ** 2))
        elif loss == "mae":
            out.append(np.mean(np.abs(p - t)))
        elif loss == "rmse":
            out.append(math.sqrt(np.mean((p - t) ** 2)))
        else:
            out.append(math.inf if p.std() == 0 else max(0.0, 1 - np.corrcoef(p, t)[0, 1]))
    return np.array(out)


@pytest.mark.parametrize("loss", ["mse", "mae", "rmse", "pearson"])
def test_fifty_random_formulas_against_numpy(loss):
    r = random.Random(3)
    exprs = [_formula(r, 4) for _ in range(50)]
    got = nx.fitness([_make(i, e) for i, e in enumerate(exprs)], X, Y, loss, device="cpu")
    want = _numpy_scores(exprs, loss)
    assert got.shape == (50,) and got.dtype == np.float64
    assert np.array_equal(np.isinf(got), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-9, atol=1e-12)


def test_programs_and_ptx_run_in_the_emulator():
    prog = [sp.input("x0"), sp.input("x1"), sp.instr("mul.rn.f32")]
    # (a program reading an input the data lack is refused: tests/test_fitness_inputs.py)
    got = nx.fitness([prog, "mov.f32 %v_p, %v_x1;", "bogus.f32 %v_p;"], X, Y, "mae",
                     device="cpu")
    want = [np.mean(np.abs((X[:, 0] * X[:, 1]).astype(np.float64) - Y)),
            np.mean(np.abs(X[:, 1].astype(np.float64) - Y)), math.inf]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_nan_and_inf_score_infinity_and_user_loss():
    @nx.ptx_expr
    def logx(x0: nx.f32, x1: nx.f32) -> nx.f32:
        return nx.log(x0)                       # NaN for x0 < 0

    @nx.ptx_expr(precision="accurate")        # Y was computed with two roundings
    def exact(x0: nx.f32, x1: nx.f32) -> nx.f32:
        return x0 * 1.5 - x1 * x1

    @nx.ptx_expr
    def huber(p: nx.f32, t: nx.f32) -> nx.f32:
        d = nx.abs(p - t)
        return nx.where(d < 1, 0.5 * d * d, d - 0.5)

    got = nx.fitness([logx, exact], X, Y, huber, device="cpu")
    assert got[0] == math.inf and got[1] == 0.0


def test_columns_bind_by_name_or_position_and_names_rename():
    @nx.ptx_expr
    def by_pos(a: nx.f32, b: nx.f32) -> nx.f32:
        return a - b

    @nx.ptx_expr
    def by_name(v: nx.f32) -> nx.f32:
        return v * 2

    got = nx.fitness([by_pos, by_name], X, Y, device="cpu", names=["u", "v"])
    want = [np.mean(((X[:, 0] - X[:, 1]).astype(np.float64) - Y) ** 2),
            np.mean(((X[:, 1] * 2).astype(np.float64) - Y) ** 2)]
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("args, match", [
    (([], X, Y), "empty population"),
    ((["mov.f32 %v_p, %v_x0;"], X, Y[:-1]), "one target per sample"),
    ((["mov.f32 %v_p, %v_x0;"], X[None], Y), r"\(n samples, d columns\)"),
    ((["mov.f32 %v_p, %v_x0;"], X, Y, "l2"), "loss='l2'"),
])
def test_bad_input(args, match):
    with pytest.raises(FitnessError, match=match):
        nx.fitness(*args, device="cpu")
    with pytest.raises(FitnessError, match="names="):
        nx.fitness(["mov.f32 %v_p, %v_x0;"], X, Y, names=["a"], device="cpu")
    with pytest.raises(FitnessError, match="device="):
        nx.fitness(["mov.f32 %v_p, %v_x0;"], X, Y, device="tpu")


@pytest.mark.parametrize("loss", ["mse", "pearson", "user"])
def test_the_gpu_kernel_builds_here(loss):
    t = fitness_template(2, ("x0", "x1"), "f32", loss)
    assert "f" in t.sites and ("loss" in t.sites) == (loss == "user")
    prog = [sp.input("x0"), sp.input("x1"), sp.instr("add.rn.f32")]
    extra = {}
    if loss == "user":
        @nx.ptx_expr
        def sq(p: nx.f32, t: nx.f32) -> nx.f32:
            return (p - t) * (p - t)
        extra["loss"] = sq
    pack = t.pack("f", [prog, "mov.f32 %v_p, %v_x0;"], select="cand", **extra)
    assert pack.cubin[:4] == b"\x7fELF" and pack.errors == {}


@pytest.mark.gpu
@pytest.mark.parametrize("loss", ["mse", "mae", "rmse", "pearson"])
def test_gpu_scores_equal_the_cpu_path(loss):
    r = random.Random(8)
    cands = [_make(i, _formula(r, 3)) for i in range(40)]
    cands += [[sp.input("x0"), sp.input("x1"), sp.instr("mul.rn.f32")], "bogus;"]
    cpu = nx.fitness(cands, X, Y, loss, device="cpu")
    gpu = nx.fitness(cands, X, Y, loss, device="gpu", per_module=16)
    assert np.array_equal(np.isinf(cpu), np.isinf(gpu))
    fin = np.isfinite(cpu)
    np.testing.assert_allclose(gpu[fin], cpu[fin], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("names", [["cand", "x1"], ["p", "x1"], ["int", "x1"], ["_nx_X", "a"],
                                   ["t", "l"]])
def test_column_names_that_would_clash_are_refused(names):
    with pytest.raises(FitnessError, match="names="):
        nx.fitness(["mov.f32 %v_p, %v_x0;"], X, Y, names=names, device="cpu")


def test_columns_named_like_kernel_locals_before_work():
    # names the kernel once used for its own locals are fine now
    got = nx.fitness(["mov.f32 %v_p, %v_X;"], X, Y, names=["X", "s0"], device="cpu")
    np.testing.assert_allclose(got, [np.mean((X[:, 0].astype(np.float64) - Y) ** 2)])


def test_block_and_data_checks():
    with pytest.raises(FitnessError, match="block="):
        nx.fitness(["mov.f32 %v_p, %v_x0;"], X, Y, block=100, device="cpu")
    with pytest.raises(FitnessError, match="real numbers"):
        nx.fitness(["mov.f32 %v_p, %v_x0;"], X.astype(np.complex64), Y, device="cpu")
    with pytest.raises(FitnessError, match="real numbers"):
        nx.fitness(["mov.f32 %v_p, %v_x0;"], np.array([["a"]]), np.array([1.0]), device="cpu")


def test_a_formula_of_other_types_runs_in_its_own_type_or_is_refused():
    # float64 data no longer make an f32 formula score +inf: the kernel runs in the formula's
    # type (tests/test_fitness_inputs.py has the rule); dtype= of the other type refuses it
    @nx.ptx_expr
    def f32_only(x0: nx.f32, x1: nx.f32) -> nx.f32:
        return x0 + x1

    got = nx.fitness([f32_only], X.astype(np.float64), Y.astype(np.float64), device="cpu")
    np.testing.assert_allclose(got, [np.mean(((X[:, 0] + X[:, 1]).astype(np.float64) - Y) ** 2)],
                               rtol=1e-12)
    with pytest.raises(FitnessError, match="candidate 0 is written in f32"):
        nx.fitness([f32_only], X, Y, dtype="f64", device="cpu")
