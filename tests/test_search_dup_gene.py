"""The ``dup`` gene: the stack's top copied, so one subexpression feeds two ops (a program is
then a DAG: ``E dup mul`` is E²). Every stage takes it as the compiler does."""
from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest

from numptx import search
from numptx.search.evaluate import Evaluator
from numptx.search.genes import Genes

F = importlib.import_module("numptx.search.formula")     # (the package's ``formula`` is a function)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_dup_is_a_gene_of_both_dtypes(dtype):
    g = Genes(["add", "mul", "dup"], 1, dtype=dtype)
    (op,) = g.op_words("dup")
    assert op.kind == "meta" and "dup" in repr(op)


def _square_twice(g):
    # x0 dup mul dup add = 2 * x0**2
    return [*g.input_words("x0"), *g.op_words("dup"), *g.op_words("mul"), *g.op_words("dup"),
            *g.op_words("add")]


def test_formula_evaluation_and_key_of_a_dup_program():
    g = Genes(["add", "mul", "dup"], 1)
    prog = _square_twice(g)
    X = np.linspace(-2, 2, 17, dtype=np.float32)[:, None]
    np.testing.assert_array_equal(F.evaluate(prog, X, g), (2 * X[:, 0] ** 2).astype(np.float32))
    text = F.formula(prog, g)
    assert "x0" in text
    np.testing.assert_array_equal(F.evaluate(text, X, g), F.evaluate(prog, X, g))
    # keys: tests/test_review24_dup_gene.py (a dup spelling and the plain one share a key)


def test_the_interpreter_and_the_compiled_path_agree_on_dup_programs():
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (40, 2)).astype(np.float32)
    y = (X[:, 0] ** 2 + X[:, 1]).astype(np.float32)
    g = Genes(["add", "sub", "mul", "sin", "dup"], 2)
    from numptx.search import operators as O
    progs = [O.random_program(g, rng, length=(2, 14)) for _ in range(60)]
    assert any(op.kind == "meta" for p in progs for op in p)
    interp = Evaluator(X, y, device="cpu", evaluate="interpret", names=g.names)
    comp = Evaluator(X, y, device="cpu", evaluate="compile", names=g.names)
    np.testing.assert_array_equal(interp.score(progs), comp.score(progs))


def test_regress_with_dup_finds_a_square():
    X = np.linspace(-1, 1, 32, dtype=np.float32)[:, None]
    y = (3 * X[:, 0] ** 4).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = search.regress(X, y, ["add", "mul", "dup"], population=64, generations=10, seed=0,
                           device="cpu", target=1e-10)
    assert r.best.loss <= 1e-10
    np.testing.assert_allclose(r.best.predict(X), y, rtol=1e-5, atol=1e-6)
