"""Review of issue 24 (found by the dup gene's property test): :func:`formula.evaluate` runs
``fmax``/``fmin`` and ``copysign`` as the instruction table does (PTX: max(+0, -0) is +0,
min is -0 whatever the order; a NaN sign counts as +), not as NumPy's fmax/fmin (whose signed
zero depends on the order and on the array length) and copysign (a NaN's sign bit), so a
printed formula evaluates bit for bit as the emulated stub, as formula.py's docstring says."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import numptx as nx
from numptx import stack_ptx as sp
from numptx.search.genes import Genes

F = importlib.import_module("numptx.search.formula")


def _emulated(prog, g, X):
    stub = sp.compile(prog, g.inputs, g.outputs)
    regs = {f"%{n}": X[:, j] for j, n in enumerate(g.names)}
    out = np.asarray(nx.emulate(stub, regs, ["%y"])["%y"], X.dtype)
    return np.broadcast_to(out, (len(X),))


def _same_bits(a, b):
    u = np.uint32 if a.dtype == np.float32 else np.uint64
    return np.array_equal(np.ascontiguousarray(a).view(u), np.ascontiguousarray(b).view(u))


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("rows", [2, 17])            # NumPy's SIMD loop from 16 elements
def test_max_and_min_of_signed_zeros_evaluate_as_the_stub(dtype, op, rows):
    g = Genes([op, "neg"], 2, dtype=dtype)
    npt = np.float32 if dtype == "f32" else np.float64
    X = np.zeros((rows, 2), npt)
    X[::2, 0] = -0.0
    X[1::2, 1] = -0.0
    for a, b in (("x0", "x1"), ("x1", "x0")):
        prog = [sp.input(a), sp.input(b), *g.op_words(op)]
        ref = _emulated(prog, g, X)
        assert _same_bits(F.evaluate(prog, X, g), ref), F.formula(prog, g)
        assert _same_bits(F.evaluate(F.formula(prog, g), X, g), ref)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_copysign_with_a_nan_sign_evaluates_as_the_stub(dtype):
    g = Genes(["sub", "div", f"copysign.{dtype}"], 1, dtype=dtype)
    X = np.array([[0.0], [1.5], [-2.0]], np.float32 if dtype == "f32" else np.float64)
    zero = [sp.input("x0"), sp.input("x0"), *g.op_words("sub")]
    nan = [*zero, *zero, *g.op_words("div")]                    # 0/0: NumPy's is -NaN on x86
    prog = [*nan, sp.input("x0"), *g.op_words(f"copysign.{dtype}")]
    ref = _emulated(prog, g, X)
    np.testing.assert_array_equal(ref, np.abs(X[:, 0]))         # PTX: a NaN sign counts as +
    assert _same_bits(F.evaluate(prog, X, g), ref), F.formula(prog, g)


def test_two_nans_give_the_canonical_nan_as_the_stub():
    g = Genes(["sub", "div", "max", "neg"], 1)
    X = np.array([[0.0], [1.0]], np.float32)
    zero = [sp.input("x0"), sp.input("x0"), *g.op_words("sub")]
    nan = [*zero, *zero, *g.op_words("div")]
    prog = [*nan, *nan, *g.op_words("neg"), *g.op_words("max")]
    assert _same_bits(F.evaluate(prog, X, g), _emulated(prog, g, X))
