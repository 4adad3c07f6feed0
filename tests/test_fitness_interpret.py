"""nx.fitness(..., evaluate=...): the batch interpreter's losses equal the compiled path's (on a
CPU: the stub emulator) bit for bit; what the interpreter cannot score goes to the compiled
path under "auto" and raises under "interpret"."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import numptx as nx
from numptx import stack_ptx as sp
from numptx.search.genes import Genes

OPS = ["add", "sub", "mul", "div", "sin", "cos", "exp", "log", "sqrt", "sq", "max", "tanh"]


def gene_programs(n: int, dtype: str, seed: int) -> list:
    ops = [o for o in OPS if dtype == "f32" or o not in ("sin", "cos", "exp", "log", "tanh")]
    genes = Genes(ops, 2, dtype=dtype)
    rng = np.random.default_rng(seed)
    progs = []
    for _ in range(n):
        p: list = []
        for _ in range(int(rng.integers(1, 14))):
            r = rng.random()
            if r < 0.4:
                p.append(sp.input(f"x{int(rng.integers(2))}"))
            elif r < 0.5:
                p.append(sp.const(float(rng.normal() * 3), dtype))
            else:
                p.extend(genes.op_words(ops[int(rng.integers(len(ops)))]))
        progs.append(p)
    return progs


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_interpret_and_compile_give_the_same_losses(dtype):
    progs = gene_programs(200, dtype, 1 if dtype == "f32" else 2)
    dt = np.float32 if dtype == "f32" else np.float64
    X = np.random.default_rng(3).uniform(-2, 3, (57, 2)).astype(dt)
    y = (X[:, 0] * X[:, 1] + np.abs(X[:, 0])).astype(dt)
    for loss in ("mse", "mae", "rmse", "pearson"):
        a = nx.fitness(progs, X, y, loss, device="cpu", evaluate="interpret")
        b = nx.fitness(progs, X, y, loss, device="cpu", evaluate="compile")
        assert np.array_equal(a, b), (loss, np.flatnonzero(a != b)[:5])
        assert np.isinf(a).any() and np.isfinite(a).any()      # both kinds were scored


def test_auto_sends_what_the_interpreter_lacks_to_the_compiled_path(caplog):
    X = np.random.default_rng(0).uniform(0.5, 2, (40, 2)).astype(np.float32)
    y = (X[:, 0] * 2).astype(np.float32)

    @nx.ptx_expr
    def f(x0: nx.f32, x1: nx.f32) -> nx.f32:
        return x0 + x0

    pop = [
        [sp.input("x0"), sp.input("x0"), sp.instr("add.rn.f32")],           # interpreted
        f,                                                                    # a formula
        "mov.f32 %v_p, %v_x1;",                                               # PTX text
        [sp.input("cand"), sp.instr("cvt.rn.f32.u32"), sp.input("x0"),        # reads cand
         sp.instr("add.rn.f32")],
        [sp.input("x0"), sp.instr("cvt.rn.f16.f32"), sp.instr("cvt.f32.f16")],   # an f16 row
    ]
    with caplog.at_level(logging.DEBUG, logger="numptx.jit.populations.fitness_interpret"):
        a = nx.fitness(pop, X, y, device="cpu", per_module=2)
    b = nx.fitness(pop, X, y, device="cpu", per_module=2, evaluate="compile")
    assert np.array_equal(a, b) and a[0] == 0.0
    assert "left to the compiled path" in caplog.text


@pytest.mark.parametrize("cand, match", [
    (1, r"candidate 1 is a PtxExpr"),
    (4, r"candidate 1: the interpreter does not run 'cvt.rn.f16.f32'"),
    (3, r"candidate 1: it reads cand"),
])
def test_interpret_refuses_what_it_cannot_score(cand, match):
    X = np.random.default_rng(0).uniform(0.5, 2, (8, 2)).astype(np.float32)

    @nx.ptx_expr
    def f(x0: nx.f32, x1: nx.f32) -> nx.f32:
        return x0

    pop = [[sp.input("x0")], f, [sp.input("x1")],
           [sp.input("cand"), sp.instr("cvt.rn.f32.u32")],
           [sp.input("x0"), sp.instr("cvt.rn.f16.f32"), sp.instr("cvt.f32.f16")]]
    keep = [0, cand]
    with pytest.raises(nx.jit.fitness.FitnessError, match=match) as e:
        nx.fitness([pop[k] for k in keep], X, X[:, 0], device="cpu", evaluate="interpret")
    assert e.value.candidate == 1


def test_interpret_refuses_a_user_loss_and_a_bad_evaluate():
    X = np.ones((4, 2), np.float32)

    @nx.ptx_expr
    def loss(p: nx.f32, t: nx.f32) -> nx.f32:
        return (p - t) * (p - t)

    with pytest.raises(nx.jit.fitness.FitnessError, match="user loss needs evaluate='compile'"):
        nx.fitness([[sp.input("x0")]], X, X[:, 0], loss, device="cpu", evaluate="interpret")
    with pytest.raises(nx.jit.fitness.FitnessError, match="evaluate='fast'"):
        nx.fitness([[sp.input("x0")]], X, X[:, 0], device="cpu", evaluate="fast")
    # "auto" with a user loss: the compiled path, the same score
    a = nx.fitness([[sp.input("x0")]], X, X[:, 0] + 1, loss, device="cpu")
    assert a.tolist() == [1.0]


def test_encoded_and_mmptx_programs():
    X = np.random.default_rng(1).uniform(0.5, 2, (16, 2)).astype(np.float32)
    y = X[:, 0] * X[:, 1]
    prog = [sp.input("x0"), sp.input("x1"), sp.instr("mul.rn.f32")]
    enc = sp.encode(prog, ["x0", "x1"])
    mm = sp.encode(prog, ["x0", "x1"], dialect="mm-ptx")
    for p in (enc, mm):
        a = nx.fitness([p], X, y, device="cpu", evaluate="interpret")
        b = nx.fitness([p], X, y, device="cpu", evaluate="compile")
        assert np.array_equal(a, b) and a[0] == 0.0
