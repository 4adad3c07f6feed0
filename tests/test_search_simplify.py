"""numptx.search.simplify (issue 26, item 3): simplified formulas of the real C core's stubs keep
the program's values (bit for bit in the exact mode, against the real emulator; to a tolerance,
and equal in exact arithmetic, in the algebraic mode), print commutative operands in one
canonical order, and their complexity counts the nodes of the printed expression."""
from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from numptx import stack_ptx as sp
from numptx.learn.features import live_ops
from numptx.search import operators as O
from numptx.search.formula import evaluate, formula
from numptx.search.genes import Genes, SearchError
from numptx.search.results import Candidate
from numptx.search.simplify import complexities, complexity, simplified, simplified_of_stub

ALL_F32 = ["add", "sub", "mul", "div", "neg", "abs", "sq", "inv", "sqrt", "max", "min", "fma",
           "exp", "exp2", "log", "log2", "sin", "cos", "tanh", "sigmoid"]
ALL_F64 = ["add", "sub", "mul", "div", "neg", "abs", "sq", "inv", "sqrt", "max", "min", "fma"]
PROTECTED = ["add", "sub", "mul", "div", "sqrtabs", "logabs", "aq", "sin", "exp", "dup"]
G = Genes(["add", "sub", "mul", "div", "neg", "sq", "exp", "sin", "inv", "max", "abs", "fma"], 2)


def W(g: Genes, *names) -> list[sp.Op]:
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


def _programs(g: Genes, seed: int, n: int, length=(4, 30)) -> list[list[sp.Op]]:
    rng = np.random.default_rng(seed)
    progs = [O.random_program(g, rng, length) for _ in range(n)]
    return progs + [O.mutate(O.crossover(a, b, rng), g, rng) for a, b in zip(progs, progs[1:n // 2])]


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal bit for bit, NaN for NaN (a NaN's payload is not part of formula.py's promise)."""
    na, nb = np.isnan(a), np.isnan(b)
    u = np.uint32 if a.dtype == np.float32 else np.uint64
    return bool(np.array_equal(na, nb) and np.array_equal(a[~na].view(u), b[~nb].view(u)))


def _inputs(g: Genes, rng, rows: int, low: float, high: float) -> np.ndarray:
    return rng.uniform(low, high, size=(rows, len(g.names))).astype(
        np.float32 if g.dtype == "f32" else np.float64)


# ---- the issue's examples ----------------------------------------------------------------------
GX = Genes(["add", "mul", "div", "sq", "sin"], names=["x"])
ISSUE = [
    (G, ("x0", "x0", "x0", "sq", "mul", "x0", "sq", "add", "add"),
     "x0 + (x0*x0**2 + x0**2)", "x0 + (x0**2 + x0**3)", "x0 + x0**2 + x0**3", 5),
    (G, ("x0", "x0", 0.840067, "mul", 0.595191, "mul", 0.99999, "x1", "sin", "mul", "add", "mul"),
     "x0*(x0*0.840067*0.595191 + 0.99999*sin(x1))",
     "x0*(0.595191*(0.840067*x0) + 0.99999*sin(x1))", "x0*(0.5*x0 + 0.99999*sin(x1))", 9),
    (GX, ("x", 0.999996, "div", "x", "x", "div", "div", "x", "mul", "x", "add", "x", "mul", "x",
          "add"),
     "(x/0.999996/(x/x)*x + x)*x + x", "x + x*(x + x*(x/0.999996/(x/x)))",
     "x + x*(x + 1.000004*x**2)", 7),
]


@pytest.mark.parametrize("g, words, printed, exact, algebraic, n", ISSUE)
def test_the_issues_examples_print_simplified(g, words, printed, exact, algebraic, n):
    prog = W(g, *words)
    assert formula(prog, g) == printed                   # as the issue saw them
    assert simplified(prog, g, exact=True) == exact
    assert simplified(prog, g) == algebraic
    assert complexity(prog, g) == n
    c = Candidate(prog, 0.0, g)
    assert c.simplified() == algebraic and c.simplified(exact=True) == exact    # the same text
    assert c.complexity == n
    X = np.random.default_rng(0).uniform(0.5, 2, size=(32, len(g.names)))
    ref = Candidate(prog, 0.0, g).predict(X)
    assert _same_bits(evaluate(simplified(prog, g, exact=True, digits=9), X, g), ref)
    np.testing.assert_allclose(evaluate(simplified(prog, g, digits=9), X, g), ref, rtol=1e-5)


@pytest.mark.parametrize("words, exact, algebraic, n", [
    (("x0",), "x0", "x0", 1),
    (("x0", "exp"), "exp(x0)", "exp(x0)", 2),             # the macro's constant is no node
    (("x0", "x0", "x0", "mul", "mul"), "x0**3", "x0**3", 2),
    (("x0", "sq", "sq"), "(x0**2)**2", "x0**4", 2),       # (x*x)*(x*x) rounds unlike x**4
    (("x1", "x0", "add"), "x0 + x1", "x0 + x1", 3),
    (("x0", "x0", "sub"), "x0 - x0", "0", 1),             # NaN at x0 = inf: algebraic only
    (("x0", "x0", "div"), "x0/x0", "1", 1),               # NaN at 0, inf, NaN: algebraic only
    (("x0", 2.0, "add", 3.0, "mul"), "3*(x0 + 2)", "3*(x0 + 2)", 5),
    ((3.0, "x0", "sub"), "3 - x0", "3 - x0", 3),
    (("x0", -4.0, "mul", "x1", "sub"), "-4*x0 - x1", "-4*x0 - x1", 5),
    (("x0", "inv"), "1/x0", "1/x0", 2),                   # a reciprocal is one node
    (("x0", "x1", "mul", "sq"), "(x0*x1)**2", "(x0*x1)**2", 4),
    (("x0", "neg", 2.0, "mul", "abs"), "abs(2*-x0)", "2*abs(x0)", 4),
    (("x0", "x1", "max"), "fmax(x0, x1)", "fmax(x0, x1)", 3),
    (("x1", "x0", "max"), "fmax(x0, x1)", "fmax(x0, x1)", 3),
    (("x1", "x0", 2.0, "fma"), "fma(x0, x1, 2)", "x0*x1 + 2", 5),
    (("x0", 0.0, "add"), "x0 + 0", "x0", 1),              # -0.0 + 0.0 is +0.0: exact keeps it
    (("x0", 0.0, "div"), "x0/0", "x0/0", 3),
    (("add", "x0", "x1"), "x1", "x1", 1),                  # dead ops count nothing
])
def test_known_simplifications(words, exact, algebraic, n):
    prog = W(G, *words)
    assert simplified(prog, G, exact=True) == exact
    assert simplified(prog, G) == algebraic
    assert complexity(prog, G) == n


def test_a_coefficient_near_one_is_printed_with_the_digits_that_show_it():
    prog = W(G, "x0", 0.999996, "div")                    # 1.000004*x0, not 1*x0
    assert simplified(prog, G) == "1.000004*x0"
    assert simplified(prog, G, digits=3) == "1.000004*x0"
    assert simplified(W(G, "x0", 3.0, "div"), G, digits=3) == "0.333*x0"


def test_evaluate_reads_integer_powers_as_the_programs_products():
    g = Genes(["mul"], 1)
    X = np.random.default_rng(1).uniform(-3, 3, size=(64, 1)).astype(np.float32)
    x = X[:, 0]
    assert _same_bits(evaluate("x0**3", X, g), (x * x) * x)
    assert _same_bits(evaluate("x0**5", X, g), (((x * x) * x) * x) * x)
    np.testing.assert_allclose(evaluate("x0**-1", X, g), 1 / x, rtol=1e-6)


# ---- values kept ---------------------------------------------------------------------------------
@pytest.mark.parametrize("ops, dtype", [(ALL_F32, "f32"), ([o for o in ALL_F64 if o != "fma"], "f64"),
                                        (ALL_F32 + ["dup"], "f32"), (PROTECTED, "f32")])
def test_exact_mode_matches_the_emulator_bit_for_bit(ops, dtype):
    """Property: on random (and mutated) programs, the exact text evaluates bit for bit like the
    emulated stub (NaN where it is NaN), at ordinary and special inputs (0, -0.0, inf, NaN)."""
    g = Genes(ops, 3, dtype=dtype)
    rng = np.random.default_rng(26)
    X = _inputs(g, rng, 200, -4, 4)
    X[:6] = [[0, -0.0, 1], [np.inf, -np.inf, 0], [np.nan, 1, -0.0], [0.5, 2, 3],
             [1e-3, -1e3, 7], [np.pi, -np.pi, 0.25]]
    digits = 9 if dtype == "f32" else 17
    bad = []
    for prog in _programs(g, 26, 300):
        text = simplified(prog, g, exact=True, digits=digits)
        if not _same_bits(evaluate(text, X, g), Candidate(prog, 0.0, g).predict(X)):
            bad.append((formula(prog, g), text))
    assert not bad, bad[:5]


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_constants_fold_as_the_emulator_computes_them(dtype):
    """Constant-only arithmetic folds bit for bit as the stub computes it, at the edges too
    (subnormal results, overflow to inf, division by zero, signed zeros)."""
    g = Genes(["add", "sub", "mul", "div"], 1, dtype=dtype)
    npt = np.float32 if dtype == "f32" else np.float64
    tiny, big = float(np.finfo(npt).tiny), float(np.finfo(npt).max)
    rng = np.random.default_rng(29)
    values = [0.0, -0.0, 1.0, 3.0, -7.5, tiny, -tiny / 4, big, -big / 3, 1e-30, 0.1] + \
        [float(v) for v in rng.normal(size=12)]
    X = np.ones((1, 1), npt)
    for op in ("add", "sub", "mul", "div"):
        for a, b in zip(values, values[::-1] + values[:3]):
            prog = W(g, a, b, op)
            ref = Candidate(prog, 0.0, g).predict(X)
            text = simplified(prog, g, exact=True, digits=17)
            assert _same_bits(evaluate(text, X, g), ref), (op, a, b, text)
            assert math.isnan(ref[0]) or float(text) == float(ref[0])   # the dtype's value


def test_exact_mode_matches_formula_where_formula_is_not_exact():
    """f64 fma: formula's text rounds twice (its docstring says so); the exact mode's text
    evaluates bit for bit as formula's does."""
    g = Genes(ALL_F64, 3, dtype="f64")
    X = _inputs(g, np.random.default_rng(3), 100, -4, 4)
    for prog in _programs(g, 3, 200):
        a = evaluate(simplified(prog, g, exact=True, digits=17), X, g)
        assert _same_bits(a, evaluate(formula(prog, g, digits=17), X, g)), formula(prog, g)


@pytest.mark.parametrize("ops, dtype, rtol", [
    (ALL_F32, "f32", 1e-4), (ALL_F64, "f64", 1e-9), (ALL_F32 + ["dup"], "f32", 1e-4),
    (["add", "sub", "mul", "div", "sq", "neg", "inv"], "f64", 1e-9), (PROTECTED, "f32", 1e-4)])
def test_algebraic_mode_is_close_to_the_emulator_away_from_zero(ops, dtype, rtol):
    """Property: where the inputs avoid 0, inf and NaN ([0.5, 2]) and the program is well
    conditioned (its emulated value moves by less than rtol/10 when the inputs move by 4 ulps:
    not ``1/(x1 + (x0 - x1 - x0))``, whose value is a rounding error's reciprocal), the algebraic
    text evaluates to the emulated stub's values within rtol."""
    g = Genes(ops, 2, dtype=dtype)
    X = _inputs(g, np.random.default_rng(5), 64, 0.5, 2.0)
    eps = 4 * np.finfo(X.dtype).eps
    digits = 9 if dtype == "f32" else 17
    bad, compared = [], 0
    for prog in _programs(g, 5, 300, (4, 24)):
        cand = Candidate(prog, 0.0, g)
        ref = cand.predict(X).astype(np.float64)
        ok = np.isfinite(ref)
        for s in (1 + eps, 1 - eps):
            moved = cand.predict(X * X.dtype.type(s)).astype(np.float64)
            with np.errstate(all="ignore"):
                ok &= np.abs(moved - ref) <= rtol / 10 * np.abs(ref)
        text = simplified(prog, g, digits=digits)
        got = evaluate(text, X, g).astype(np.float64)
        err = np.abs(got[ok] - ref[ok]) / np.maximum(np.abs(ref[ok]), 1e-30)
        compared += int(ok.sum())
        if not np.isfinite(got[ok]).all() or (err.size and err.max() > rtol):
            bad.append((simplified(prog, g, exact=True), text))
    assert not bad, bad[:5]
    assert compared > 300 * 64 // 2           # most rows are well conditioned


def _mp_namespace(mpmath):
    nan = mpmath.mpf("nan")

    def real(f):
        def g(*a):
            if any(mpmath.isnan(v) for v in a):
                return nan
            try:
                r = f(*a)
            except (ZeroDivisionError, ValueError, OverflowError):
                return nan
            return r if not isinstance(r, mpmath.mpc) else nan
        return g

    pos = (lambda f: real(lambda a: f(a) if a >= 0 else nan))
    return {"exp": real(mpmath.exp), "exp2": real(lambda a: mpmath.power(2, a)),
            "log": pos(mpmath.log), "log2": pos(lambda a: mpmath.log(a, 2)),
            "sin": real(mpmath.sin), "cos": real(mpmath.cos), "tanh": real(mpmath.tanh),
            "sqrt": pos(mpmath.sqrt), "abs": real(abs), "fmax": real(max), "fmin": real(min),
            "fma": real(lambda a, b, c: a * b + c), "inf": mpmath.inf, "nan": nan}


@pytest.mark.parametrize("ops, dtype", [(ALL_F32, "f32"), (ALL_F64, "f64"),
                                        (["add", "sub", "mul", "div", "sq", "sin", "exp", "dup"],
                                         "f32"), (PROTECTED, "f32")])
def test_algebraic_mode_is_equal_in_exact_arithmetic(ops, dtype):
    """Property: evaluated with 60-digit arithmetic (mpmath), the exact text and the algebraic
    text (both at 17 digits, so every constant is the program's) agree to 1e-9 wherever the
    exact text is finite: the algebraic rewrites are identities of real numbers."""
    mpmath = pytest.importorskip("mpmath")
    g = Genes(ops, 2, dtype=dtype)
    rows = np.random.default_rng(7).uniform(0.5, 2.0, size=(6, 2))
    ns = _mp_namespace(mpmath)
    bad = []
    with mpmath.workdps(60):
        for prog in _programs(g, 7, 160, (4, 24)):
            te, ta = (simplified(prog, g, exact=e, digits=17) for e in (True, False))
            for row in rows:
                env = {**ns, **{n: mpmath.mpf(float(v)) for n, v in zip(g.names, row)}}
                try:
                    e = eval(te, {"__builtins__": {}}, env)      # noqa: S307 - our own text
                except ZeroDivisionError:
                    continue
                if not mpmath.isfinite(e):
                    continue
                try:
                    a = eval(ta, {"__builtins__": {}}, env)      # noqa: S307
                except ZeroDivisionError:
                    a = mpmath.inf
                if not mpmath.isfinite(a) or abs(a - e) > 1e-9 * max(abs(e), 1e-30):
                    bad.append((te, ta))
                    break
    assert not bad, bad[:5]


# ---- canonical order ---------------------------------------------------------------------------------
def _swapped(prog: list[sp.Op], g: Genes) -> list[sp.Op]:
    """``prog`` with a ``swap`` before each commutative instruction: its operands reversed."""
    comm = {repr(g.op_words(o)[-1]) for o in ("add", "mul", "max", "min") if o in g.ops}
    out: list[sp.Op] = []
    for op in prog:
        if repr(op) in comm:
            out.append(sp.swap(g.dtype))
        out.append(op)
    return out


def test_commutative_operands_print_in_one_order():
    for a, b in (("x0", "x1"), ("x1", "x0")):
        assert simplified(W(G, a, b, "add"), G, exact=True) == "x0 + x1"
        assert simplified(W(G, a, b, "max"), G, exact=True) == "fmax(x0, x1)"
    assert simplified(W(G, "x1", "sin", "x0", "mul"), G, exact=True) == "x0*sin(x1)"
    assert simplified(W(G, "x0", "x1", "sin", "mul"), G, exact=True) == "x0*sin(x1)"
    assert simplified(W(G, "x0", 2.0, "mul"), G, exact=True) == "2*x0"    # numbers first
    assert simplified(W(G, 2.0, "x0", "add"), G, exact=True) == "x0 + 2"  # numbers last


@pytest.mark.parametrize("ops, dtype", [(ALL_F32, "f32"), (ALL_F64, "f64")])
def test_programs_equal_up_to_commutative_operands_print_equal_text(ops, dtype):
    """Property: reversing the operands of every add, mul, max and min of a random program
    (a swap before each) changes neither text nor complexity, in either mode."""
    g = Genes(ops, 3, dtype=dtype)
    progs = _programs(g, 11, 200)
    swapped = [_swapped(p, g) for p in progs]
    changed = 0
    for p, q in zip(progs, swapped):
        changed += formula(p, g) != formula(q, g)
        for exact in (True, False):
            assert simplified(p, g, exact=exact) == simplified(q, g, exact=exact), formula(p, g)
    assert changed > 20          # the swaps reorder operands the plain printer shows as built
    np.testing.assert_array_equal(complexities(progs, g), complexities(swapped, g))


# ---- complexity ------------------------------------------------------------------------------------
@pytest.mark.parametrize("ops, dtype", [(ALL_F32, "f32"), (ALL_F32 + ["dup"], "f32"),
                                        (ALL_F64, "f64"), (PROTECTED + ["fma"], "f32")])
def test_complexity_is_at_most_the_live_words(ops, dtype):
    """Property: complexity <= the program's live words (pushes and instruction words that
    reach the output; 1 for an empty output) + 1 per live fma (one word, two operations)."""
    g = Genes(ops, 3, dtype=dtype)
    progs = _programs(g, 13, 1000, (2, 40))
    fma = repr(g.op_words("fma")[0])
    bad = []
    for p, c, live in zip(progs, complexities(progs, g), live_ops(progs, g)):
        fmas = sum(1 for op, k in zip(p, live) if k and repr(op) == fma)
        if c > max(int(live.sum()), 1) + fmas:
            bad.append((int(c), int(live.sum()), simplified(p, g)))
    assert not bad, bad[:5]


def test_programs_that_print_the_same_text_have_the_same_complexity():
    """Property: MAP-Elites cells of different lengths that print one formula (dead ops,
    no-ops, reordered operands) get one complexity; the complexity counts the text's nodes."""
    g = Genes(["add", "sub", "mul", "div", "sq", "neg", "max"], 2)
    progs = _programs(g, 17, 1500, (2, 14))
    cx = complexities(progs, g)
    by_text: dict[str, set[int]] = {}
    lengths: dict[str, set[int]] = {}
    for p, c in zip(progs, cx):
        t = simplified(p, g, digits=17)
        by_text.setdefault(t, set()).add(int(c))
        lengths.setdefault(t, set()).add(len(p))
    assert all(len(v) == 1 for v in by_text.values()), \
        [(t, v) for t, v in by_text.items() if len(v) > 1][:5]
    assert sum(len(v) > 1 for v in lengths.values()) > 10     # texts reached by several lengths
    dead = W(g, "x0", "x1", "mul", 2.0, "x0", "sub", "neg", "sq")   # the first product is dead
    assert complexity(dead, g) == complexity(W(g, "x0", 2.0, "sub", "sq"), g) == 4


def test_complexities_batch_equals_one_at_a_time():
    progs = _programs(G, 5, 60, (3, 20))
    got = complexities(progs, G)
    assert got.dtype == np.int64 and got.shape == (len(progs),)
    assert list(got) == [complexity(p, G) for p in progs]
    assert list(complexities([sp.encode(p) for p in progs], G)) == list(got)
    assert complexities([], G).shape == (0,)


def test_complexities_from_threads_equal_the_serial_ones():
    g = Genes(ALL_F32, 2)
    progs = _programs(g, 19, 200)
    want = complexities(progs, g)
    got: list = [None] * 4

    def work(k: int) -> None:
        got[k] = complexities(progs[k::2] + progs[1 - k % 2::2], g)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        np.testing.assert_array_equal(got[k], np.concatenate([want[k::2], want[1 - k % 2::2]]))


def test_shared_subexpressions_stay_linear():
    g = Genes(["sin", "mul", "add"], 1)
    prog = [sp.input("x0")]
    for _ in range(30):          # each step uses the previous value twice: a tree of 2**30 leaves
        prog += [sp.dup("f32"), sp.instr("sin.approx.f32"), sp.instr("mul.rn.f32"),
                 g.const(0.5), sp.instr("add.rn.f32")]
    for exact in (True, False):
        text = simplified(prog, g, exact=exact)
        assert len(text) < 3000 and ":=" in text
        X = np.linspace(-1, 1, 9)[:, None]
        np.testing.assert_allclose(evaluate(text, X, g), Candidate(prog, 0.0, g).predict(X),
                                   rtol=1e-4)
    assert complexity(prog, g) <= 6 * 30 + 1


def test_deep_chains_order_and_count_without_recursion():
    """Two chains of 1,500 sins summed: the canonical order compares them by a digest past
    algebra.KEY_DEPTH levels (no RecursionError), in either order of the operands."""
    g = Genes(["add", "sin"], 2)
    chain = [sp.instr("sin.approx.f32")] * 1500
    a = [sp.input("x0"), *chain, sp.input("x1"), *chain, *g.op_words("add")]
    b = [sp.input("x1"), *chain, sp.input("x0"), *chain, *g.op_words("add")]
    assert complexity(a, g) == complexity(b, g) == 2 * 1501 + 1
    for exact in (True, False):
        text = simplified(a, g, exact=exact)
        assert text == simplified(b, g, exact=exact) and text.count("sin(") == 3000


def test_the_order_of_deep_nodes_is_the_same_in_every_process():
    """Deep nodes order by a digest of ints and floats only (a str's hash changes with
    PYTHONHASHSEED): two processes of different hash seeds print one text."""
    import os
    import subprocess
    import sys
    code = ("from numptx import stack_ptx as sp; from numptx.search.genes import Genes; "
            "from numptx.search.simplify import simplified; g = Genes(['add', 'sin', 'cos'], 2); "
            "c = [sp.instr('sin.approx.f32')] * 20; d = [sp.instr('cos.approx.f32')] * 20; "
            "p = [sp.input('x0'), *c, sp.input('x0'), *d, *g.op_words('add'), sp.input('x1'), "
            "*c, *g.op_words('add')]; print(simplified(p, g), simplified(p, g, exact=True))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}, check=True).stdout
            for seed in ("1", "2", "3")}
    assert len(outs) == 1 and "sin(" in outs.pop()


def test_simplified_of_stub_equals_simplified():
    progs = _programs(G, 23, 30)
    stubs = sp.compile_many(progs, G.inputs, G.outputs)
    for p, s in zip(progs, stubs):
        for exact in (True, False):
            assert simplified_of_stub(s, G, exact=exact) == simplified(p, G, exact=exact)


# ---- bad input -------------------------------------------------------------------------------------
def test_bad_input_is_a_search_error_naming_the_argument():
    prog = W(G, "x0", "sin")
    with pytest.raises(SearchError, match="genes="):
        complexity(prog, "f32")
    with pytest.raises(SearchError, match="genes="):
        simplified(prog, None)
    with pytest.raises(SearchError, match="programs="):
        complexities("x0 sin", G)
    with pytest.raises(SearchError, match="digits="):
        simplified(prog, G, digits=0)
    with pytest.raises(SearchError, match="exact="):
        simplified(prog, G, exact="yes")
    with pytest.raises(SearchError, match="programs"):
        complexities([[1, 2, 3]], G)
    assert complexity([], G) == 1 and simplified([], G) == "0"     # an empty program reads 0
