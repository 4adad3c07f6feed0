"""numptx.search.formula: printed formulas agree with the real emulator on the real C core's stubs,
macros print as functions, dead code never shows, and canonical keys deduplicate built programs."""
from __future__ import annotations

import numpy as np
import pytest

import numptx as nx
from numptx import stack_ptx as sp
from numptx.search import operators as O
from numptx.search.formula import (canonical_key, canonical_keys, evaluate, formula,
                                   formula_of_stub)
from numptx.search.genes import Genes, SearchError

ALL_F32 = ["add", "sub", "mul", "div", "neg", "abs", "sq", "inv", "sqrt", "max", "min", "fma",
           "exp", "exp2", "log", "log2", "sin", "cos", "tanh", "sigmoid"]
ALL_F64 = ["add", "sub", "mul", "div", "neg", "abs", "sq", "inv", "sqrt", "max", "min", "fma"]


def W(g: Genes, *names: str) -> list[sp.Op]:
    """The words of several op genes, or inputs/constants given as str/float."""
    out: list[sp.Op] = []
    for n in names:
        if isinstance(n, float):
            out.append(g.const(n))
        elif n in g.names:
            out.append(sp.input(n))
        else:
            out.extend(g.op_words(n))
    return out


G = Genes(ALL_F32, 2)


@pytest.mark.parametrize("words, text", [
    (("x0", "exp"), "exp(x0)"),
    (("x0", "log"), "log(x0)"),
    (("x0", "exp2"), "exp2(x0)"),
    (("x0", "sq"), "x0**2"),
    (("x0", "sigmoid"), "1/(exp(-x0) + 1)"),
    (("x0", "x1", "sub", "sq"), "(x0 - x1)**2"),
    (("x0", "neg", "sq"), "(-x0)**2"),
    (("x0", 0.0, "sub", 1.0, "mul", 1.0, "div"), "x0"),           # -0, *1, /1 dropped
    (("x0", -0.0, "add"), "x0"),                                    # x + -0.0 is x
    (("x0", 0.0, "add"), "x0 + 0"),            # kept: -0.0 + 0.0 is +0.0, not x0's -0.0
    (("x0", -0.0, "sub"), "x0 + 0"),                                # x - -0.0 is x + 0.0
    (("x0", -0.0, "mul"), "x0*-0.0"),                               # a zero's sign is printed
    ((2.0, 3.0, "mul", "x0", "add"), "6 + x0"),                     # constants folded
    (("x0", 0.5, "exp", "mul"), "x0*1.64872"),
    (("x0", "neg", "neg", "x1", "neg", "add"), "x0 - x1"),
    (("x0", "x1", "x0", "fma"), "fma(x0, x1, x0)"),
    (("x0", "x0", "max"), "x0"),
    (("x0", "x1", "add", "x0", "add"), "x0 + x1 + x0"),
    (("x0", "x1", "x0", "add", "add"), "x0 + (x1 + x0)"),          # float + is not associative
    (("x0", "x1", "x0", "mul", "div"), "x0/(x1*x0)"),
    (("x0", -0.5, "add", "sin", "inv"), "1/sin(x0 - 0.5)"),
    (("x0", -0.5, "sub"), "x0 + 0.5"),
    (("add", "mul", "x1", "x0", "sq", "x0", "mul", "x1"), "x1"),   # no-ops and dead code vanish
    ((), "0"),                                                       # an empty program reads 0
])
def test_known_formulas(words, text):
    prog = W(G, *words)
    assert formula(prog, G) == text
    X = np.random.default_rng(0).uniform(0.5, 2, size=(16, 2))
    stub = sp.compile(prog, G.inputs, G.outputs)
    ref = nx.emulate(stub, {"x0": X[:, 0].astype(np.float32), "x1": X[:, 1].astype(np.float32)},
                     ["y"])["y"]
    np.testing.assert_allclose(evaluate(formula(prog, G, digits=9), X, G), ref, rtol=1e-6)


def test_simplify_false_prints_the_dag_as_is():
    prog = W(G, "x0", "exp", "x1", "sq", 0.0, "add", "add")
    assert formula(prog, G) == "exp(x0) + x1**2"
    assert formula(prog, G, simplify=False) == "exp2(x0*1.4427) + (x1*x1 + 0)"
    assert formula(W(G, 2.0, 3.0, "mul"), G, simplify=False) == "2*3"


def test_digits_and_inputs_named():
    g = Genes(["mul"], names=["speed", "t"])
    prog = [sp.input("speed"), g.const(1 / 3), sp.instr("mul.rn.f32"), sp.input("t"),
            sp.instr("mul.rn.f32")]
    assert formula(prog, g) == "speed*0.333333*t"
    assert formula(prog, g, digits=3) == "speed*0.333*t"
    with pytest.raises(SearchError, match="digits="):
        formula(prog, g, digits=0)


def test_shared_subexpressions_stay_linear():
    g = Genes(["sin", "mul", "add"], 1)
    prog = [sp.input("x0")]
    for _ in range(30):          # each step uses the previous value twice: a tree of 2**30 leaves
        prog += [sp.dup("f32"), sp.instr("sin.approx.f32"), sp.instr("mul.rn.f32"),
                 g.const(0.5), sp.instr("add.rn.f32")]
    text = formula(prog, g)
    assert len(text) < 2000 and ":=" in text
    X = np.linspace(-1, 1, 9)[:, None]
    ref = nx.emulate(sp.compile(prog, g.inputs, g.outputs), {"x0": X[:, 0].astype(np.float32)},
                     ["y"])["y"]
    np.testing.assert_allclose(evaluate(text, X, g), ref, rtol=1e-5)


def _agree(got: np.ndarray, ref: np.ndarray, rtol: float) -> str | None:
    """None when got matches ref: same NaN and infinity positions, finite values within rtol."""
    if not np.array_equal(np.isnan(got), np.isnan(ref)):
        return "NaN positions differ"
    inf_g, inf_r = np.where(np.isinf(got), got, 0), np.where(np.isinf(ref), ref, 0)
    if not np.array_equal(inf_g, inf_r):
        return "infinities differ"
    fin = np.isfinite(got) & np.isfinite(ref)
    err = np.abs(got[fin].astype(np.float64) - ref[fin]) / np.maximum(np.abs(ref[fin]), 1e-30)
    if err.size and err.max() > rtol:
        return f"relative error {err.max():.3g}"
    return None


@pytest.mark.parametrize("ops, dtype, rtol", [(ALL_F32, "f32", 1e-5), (ALL_F64, "f64", 1e-12)])
def test_random_formulas_match_the_emulator(ops, dtype, rtol):
    """Property: for a few hundred random (and mutated) programs, evaluate(formula(prog)) matches
    nx.emulate of the stub the C core builds."""
    g = Genes(ops, 3, dtype=dtype)
    rng = np.random.default_rng(2026)
    progs = [O.random_program(g, rng, (4, 30)) for _ in range(300)]
    progs += [O.mutate(O.crossover(a, b, rng), g, rng) for a, b in zip(progs, progs[1:150])]
    stubs = sp.compile_many(progs, g.inputs, g.outputs)
    npd = np.float32 if dtype == "f32" else np.float64
    X = rng.uniform(-4, 4, size=(200, 3)).astype(npd)
    X[:8] = [[0, 1, -1], [0.5, 2, 3], [1e-3, -1e3, 7], [np.pi, -np.pi, 0.25]] * 2
    cols = {n: X[:, j] for j, n in enumerate(g.names)}
    bad = []
    nontrivial = 0
    for prog, stub in zip(progs, stubs):
        text = formula(prog, g, digits=9 if dtype == "f32" else 17)
        assert formula_of_stub(stub, g, digits=9 if dtype == "f32" else 17) == text
        nontrivial += any(n in text for n in g.names) and "(" in text
        ref = nx.emulate(stub, cols, ["y"])["y"]
        why = _agree(evaluate(text, X, g), ref, rtol)
        if why:
            bad.append((text, why))
    assert not bad, bad[:5]
    assert nontrivial > 50                       # the property is not vacuous


def test_evaluate_a_program_directly():
    rng = np.random.default_rng(8)
    X = rng.uniform(0.1, 3, size=(50, 2))
    for _ in range(30):
        prog = O.random_program(G, rng, 12)
        a = evaluate(prog, X, G)
        b = evaluate(formula(prog, G, digits=9), X, G)
        assert a.dtype == np.float32 and a.shape == (50,)
        np.testing.assert_array_equal(a, b)


def test_evaluate_errors_name_the_argument():
    X = np.ones((3, 2))
    for text, needle in [("x0 +", "not a formula"), ("foo(x0)", "unknown function"),
                         ("x9", "unknown name"), ("x0 if x1 else 2", "unsupported"),
                         ("sin(x0, x1)", "takes 1"), ("__import__('os')", "unknown function"),
                         ("'a'", "literal")]:
        with pytest.raises(SearchError, match=needle) as e:
            evaluate(text, X, G)
        assert "text_or_prog" in str(e.value) or "formula" in str(e.value)
    with pytest.raises(SearchError, match="X:"):
        evaluate("x0", np.ones((3, 3)), G)
    with pytest.raises(SearchError, match="genes="):
        evaluate("x0", X, None)
    assert evaluate("2", X, G).tolist() == [2.0, 2.0, 2.0]
    assert evaluate("x0", np.arange(3.0), Genes(["add"], 1)).tolist() == [0.0, 1.0, 2.0]


def test_canonical_key_ignores_noops_and_dead_code():
    prog = W(G, "x0", "exp", "x1", "mul")
    key = canonical_key(prog, G)
    assert isinstance(key, bytes) and len(key) == 16
    assert canonical_key(W(G, "add") + prog, G) == key               # add lacking operands
    assert canonical_key([sp.nop()] + prog, G) == key
    assert canonical_key(W(G, "x1", "sin", "x0") + prog[1:], G) == key   # dead sin(x1) below
    assert canonical_key(W(G, "x0", "exp", "x1", "add"), G) != key
    assert canonical_key(W(G, "x1", "exp", "x0", "mul"), G) != key
    others = [W(G, "x0"), W(G, "x1"), W(G, "x0", "sin"), W(G, "x0", "cos"), W(G, 0.5)]
    keys = canonical_keys(others + [prog], G)
    assert keys[-1] == key and len(set(keys)) == len(keys)


def test_canonical_key_groups_equal_formulas():
    """Programs with equal keys print equal formulas (the converse need not hold)."""
    rng = np.random.default_rng(3)
    progs = [O.random_program(G, rng, (1, 6)) for _ in range(400)]
    by_key: dict[bytes, str] = {}
    for prog, key in zip(progs, canonical_keys(progs, G)):
        assert by_key.setdefault(key, formula(prog, G)) == formula(prog, G)
    assert len(by_key) < len(progs)                  # short random programs do repeat


def test_formula_rejects_bad_arguments():
    with pytest.raises(SearchError, match="genes="):
        formula([], "genes")
    with pytest.raises(SearchError, match="prog"):
        formula([sp.input("zz")], G)
