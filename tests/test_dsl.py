"""@nx.ptx_expr: tracing, trace errors (file:line and fix), binding to sites, printing, CSE,
constant folding, promotion rules, casts, bind(), fastmath rows, backends, docs/dsl.md."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

import numptx as nx
from numptx import semantics as S
from numptx.dsl import ops as dsl_ops
from numptx.dsl.graph import Graph, GraphError

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))
RNG = np.random.default_rng(11)
_SRC = open(HERE, encoding="utf-8").read().splitlines()


def line_of(marker: str) -> int:
    """1-based line of this file that contains ``marker`` (a comment tag such as ``# E:if``)."""
    hits = [i + 1 for i, text in enumerate(_SRC) if text.rstrip().endswith(marker)]
    assert len(hits) == 1, marker
    return hits[0]


def emulate(f, values, backend=None, fastmath=None):
    """Emulate ``f.stub()`` over registers named after parameters and outputs."""
    g = f.trace(fastmath)
    stub = f.stub(backend=backend, fastmath=fastmath)
    return nx.emulate(stub, values, outputs={k: n.dtype for k, n in g.outputs})


def same(a, b):
    """Bit-for-bit equality, any NaN equal to any NaN."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    if a.dtype.kind == "f":
        return bool(np.all(((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))))
    return bool(np.array_equal(a, b))


# ---------------------------------------------------------------------------------- acceptance
def test_acceptance(spine_ptx):
    @nx.ptx_expr
    def dist(x: nx.f32, y: nx.f32) -> nx.f32:
        return nx.sqrt(x * x + y * y)
    assert dist(np.float32(3), np.float32(4)) == np.float32(5)
    assert isinstance(dist(np.float32(3), np.float32(4)), np.float32)
    inj = nx.PtxInject(spine_ptx)
    stub = dist.stub(inj.sites["combine"])
    cubin = nx.ptx_to_cubin(inj.render({"combine": stub}), arch="sm_90")
    assert len(cubin) > 0
    z = inj.sites["combine"]["z"].reg
    x, y = inj.sites["combine"]["x"].reg, inj.sites["combine"]["y"].reg
    got = nx.emulate(stub, {x: np.float32([3, 5, 1e20]), y: np.float32([4, 12, 1e20])}, [z])[z]
    assert same(got, dist(np.float32([3, 5, 1e20]), np.float32([4, 12, 1e20])))


def test_decorator_forms_and_backend_validation():
    def f(x):
        return x + 1.0
    a, b = nx.ptx_expr(f), nx.ptx_expr(fastmath=True, backend="ast")(f)
    assert (a.fastmath, a.backend, b.fastmath, b.backend) == (False, "stack", True, "ast")
    with pytest.raises(ValueError, match="backend"):
        nx.ptx_expr(backend="tree")
    assert "f(x: f32)" in repr(a) and a.params == {"x": nx.f32}


# ---------------------------------------------------------------------------------- trace errors
def _trace_error(fn, marker, *fix_words, **kw):
    with pytest.raises(nx.TraceError) as ei:
        nx.ptx_expr(fn, **kw).graph
    e = ei.value
    msg = str(e)
    line = line_of(marker)
    assert f"test_dsl.py:{line}:" in msg, msg
    assert e.lineno == line and e.filename == HERE
    assert marker.split("#")[0].strip()[:10] in msg            # the code line is quoted
    for w in fix_words:
        assert w in msg, (w, msg)
    assert isinstance(e, nx.NumptxError)
    return msg


def test_trace_error_data_dependent_if():
    def f(x):
        if x > 0:  # E:if
            return x
        return -x
    _trace_error(f, "# E:if", "fix:", "nx.where")


def test_trace_error_while_and_or_not_bool():
    def w(x):
        while x < 1.0:  # E:while
            x = x * 2.0
        return x

    def a(x, y):
        return x > 0 and y > 0  # E:and

    def n(x):
        return not (x > 0)  # E:not

    def b(x):
        return bool(x)  # E:bool

    def chain(x):
        return 0 < x < 1  # E:chain
    _trace_error(w, "# E:while", "nx.where")
    _trace_error(a, "# E:and", "logical_and")
    _trace_error(n, "# E:not", "~")
    _trace_error(b, "# E:bool", "truth value")
    _trace_error(chain, "# E:chain", "nx.where")


def test_trace_error_len_iter_index():
    def ln(x):
        return len(x)  # E:len

    def it(x):
        return sum(v for v in x)  # E:iter

    def ix(x):
        return x[0]  # E:index
    _trace_error(ln, "# E:len", "range(n)")
    _trace_error(it, "# E:iter", "separate parameters")
    _trace_error(ix, "# E:index", "return a tuple")


def test_trace_error_numpy_and_math():
    def uf(x):
        return np.arcsinh(x)  # E:ufunc

    def kw(x):
        return np.add(x, x, where=True)  # E:ufunckw

    def fn(x):
        return np.linalg.norm(x)  # E:npfunc

    def m(x):
        return math.sqrt(x)  # E:math

    def i(x):
        return int(x)  # E:int
    assert "np.arcsinh" in _trace_error(uf, "# E:ufunc", "docs/dsl.md")
    assert "where=" in _trace_error(kw, "# E:ufunckw")
    _trace_error(fn, "# E:npfunc", "not supported")
    _trace_error(m, "# E:math", "nx.sqrt")
    _trace_error(i, "# E:int", "nx.s32")


def test_trace_error_mixed_types_and_literals():
    def mixed(x: nx.f32, i: nx.s32):
        return x + i  # E:mixed

    def f64(x: nx.f32, d: nx.f64):
        return x * d  # E:f64

    def intfloat(i: nx.s32):
        return i * 0.5  # E:intfloat

    def npscalar(x: nx.f32):
        return x * np.float64(2)  # E:npscalar

    def overflow(i: nx.s32):
        return i + 2 ** 40  # E:overflow

    def unsigned(u: nx.u32):
        return u + -1  # E:unsigned

    def prednum(x):
        return (x > 0) + 1  # E:prednum

    def ambiguous(x):
        return nx.where(x > 0, 1.0, 0.0)  # E:ambiguous
    assert "f32 and s32" in _trace_error(mixed, "# E:mixed", "mixed types need a cast", "nx.f32(")
    _trace_error(f64, "# E:f64", "mixed types need a cast")
    _trace_error(intfloat, "# E:intfloat", "mixed types need a cast", "nx.f32(x)")
    _trace_error(npscalar, "# E:npscalar", "mixed types need a cast")
    _trace_error(overflow, "# E:overflow", "out of range for s32")
    _trace_error(unsigned, "# E:unsigned", "out of range for u32")
    _trace_error(prednum, "# E:prednum", "nx.where(p, 1.0, 0.0)")
    _trace_error(ambiguous, "# E:ambiguous", "nx.f32(cond)")


def test_trace_error_operations():
    def ipow(i: nx.s32, j: nx.s32):
        return i ** j  # E:ipow

    def bits(x):
        return x & 1  # E:bits

    def shift(x):
        return x << 1  # E:shift

    def rnd(x):
        return round(x, 2)  # E:round

    def order(p: nx.pred, q: nx.pred):
        return p < q  # E:order
    _trace_error(ipow, "# E:ipow", "constant exponent")
    _trace_error(bits, "# E:bits", "nx.bitcast")
    _trace_error(shift, "# E:shift", "needs integers")
    _trace_error(rnd, "# E:round", "nx.round(x * 100)")
    _trace_error(order, "# E:order", "not ordered")


def test_trace_error_outputs_and_annotations():
    def ann(x) -> nx.s32:  # E:ann
        return x

    def nothing(x):  # E:nothing
        return ()

    def badout(x):  # E:badout
        return "x"
    _trace_error(ann, "# E:ann", "nx.s32(value)")
    _trace_error(nothing, "# E:nothing", "return a value")
    _trace_error(badout, "# E:badout")
    with pytest.raises(nx.TraceError, match="not a numptx type"):
        def bad(x: str):
            return x
        nx.ptx_expr(bad)


# ---------------------------------------------------------------------------------- tracing
def test_python_control_flow_on_constants_unrolls():
    @nx.ptx_expr(precision="accurate")
    def poly(x):
        acc = x
        for k in range(3):
            if k % 2:
                acc = acc * x
            else:
                acc = acc + math.pi
        return acc
    rows = [n.target for n in poly.graph.live() if n.op == "instr"]
    assert rows == ["add.rn.f32", "mul.rn.f32", "add.rn.f32"]
    x = np.float32([0.5, -2, 3])
    assert same(poly(x), ((x + np.float32(math.pi)) * x) + np.float32(math.pi))


def test_numpy_ufuncs_on_proxies_map_to_dsl_ops():
    @nx.ptx_expr
    def f(x, y):
        return np.sqrt(np.abs(x)) + np.add(y, 1.0) * np.float32(2) + np.where(x > y, x, y)
    x, y = RNG.standard_normal(50).astype(np.float32), RNG.standard_normal(50).astype(np.float32)
    ref = np.sqrt(np.abs(x)) + (y + np.float32(1)) * np.float32(2) + np.where(x > y, x, y)
    assert same(f(x, y), ref)
    assert same(emulate(f, {"x": x, "y": y})["out"], ref)


def test_python_numbers_only_give_python_numbers():
    assert nx.sqrt(4.0) == 2.0 and isinstance(nx.sqrt(4.0), float)
    assert nx.floor_divide(-7, 2) == -4 and isinstance(nx.minimum(1, 2), int)

    @nx.ptx_expr
    def f(x: nx.f32):
        return x * nx.sqrt(2.0) + nx.exp(0.0)        # stays f32 (weak Python numbers)
    assert f.graph.outputs[0][1].dtype == "f32"


def test_eager_nx_functions_on_numpy_values():
    x = np.float32([4, 1])
    assert same(nx.sqrt(x), np.sqrt(x)) and nx.sqrt(np.float32(4)).dtype == np.float32
    assert same(nx.minimum(np.float32([1, np.nan]), np.float32([2, 0])), np.float32([1, np.nan]))
    assert nx.f32(3) == np.float32(3) and nx.s32(np.float32([2.7, -2.7])).tolist() == [2, -2]
    assert nx.bitcast(np.float32(1.0), nx.u32) == 0x3F800000


def test_tuple_and_dict_outputs_and_reference_shapes():
    @nx.ptx_expr
    def t(x, y):
        return x + y, x - y

    @nx.ptx_expr
    def d(x: nx.f64, i: nx.s32):
        return {"s": x * 2.0, "k": i + 1, "p": x > 0}
    assert t(np.float32(1), np.float32(2)) == (np.float32(3), np.float32(-1))
    r = d(np.float64([1.5, -2.0]), np.int32([1, 2]))
    assert r["s"].dtype == np.float64 and r["k"].dtype == np.int32 and r["p"].dtype == bool
    assert [k for k, _ in d.graph.outputs] == ["s", "k", "p"]
    got = emulate(d, {"x": np.float64([1.5, -2.0]), "i": np.int32([1, 2])})
    assert same(got["s"], r["s"]) and same(got["k"], r["k"]) and same(got["p"], r["p"])


def test_constant_output_takes_annotation_or_default():
    @nx.ptx_expr
    def f(x) -> tuple[nx.f32, nx.s64]:
        return x, 3
    assert [n.dtype for _, n in f.graph.outputs] == ["f32", "s64"]
    assert f(np.float32(1))[1].dtype == np.int64


def test_non_numeric_default_is_a_plain_python_argument():
    @nx.ptx_expr
    def f(x, fn=nx.exp, scale: nx.f32 = 2.0):
        return fn(x) * scale
    assert list(f.params) == ["x", "scale"]
    assert same(f(np.float32(0.0), np.float32(3.0)), np.float32(3.0))
    assert same(f(np.float32(0.0)), np.float32(2.0))          # the numeric default


# ---------------------------------------------------------------------------------- the graph
def test_graph_printing_fx_style():
    @nx.ptx_expr
    def dist(x, y):
        return nx.sqrt(nx.fma(x, x, y * y))  # G:dist
    text = str(dist.graph)
    line = line_of("# G:dist")
    assert text.splitlines() == [
        "graph dist(x: f32, y: f32) -> f32:",
        f"    %t0 : f32 = mul.rn.f32(%y, %y)   # test_dsl.py:{line}",
        f"    %t1 : f32 = fma.rn.f32(%x, %x, %t0)   # test_dsl.py:{line}",
        f"    %t2 : f32 = sqrt.rn.f32(%t1)   # test_dsl.py:{line}",
        "    return %t2",
    ]
    dist.graph.lint()


def test_graph_names_are_unique_and_avoid_parameters():
    @nx.ptx_expr(precision="accurate")
    def f(t0, t1):
        return {"a": t0 * t1 + 1.0, "b": t0 - t1}
    text = str(f.graph)
    assert "%t0 : f32 = mul.rn.f32(%t0" not in text and "%t2 : f32 = mul.rn.f32(%t0, %t1)" in text
    assert "return {'a': %t3, 'b': %t4}" in text
    f.graph.lint()


def test_cse_merges_identical_and_commuted_instructions():
    @nx.ptx_expr(precision="accurate")
    def f(x, y):
        a = x * y + nx.sqrt(x)
        b = y * x + nx.sqrt(x)
        return a * b
    rows = [n.target for n in f.graph.live() if n.op == "instr"]
    assert rows.count("mul.rn.f32") == 2 and rows.count("sqrt.rn.f32") == 1
    assert rows.count("add.rn.f32") == 1
    stub = f.stub()
    assert stub.count("sqrt.rn.f32") == 1


def test_constant_folding_uses_table_semantics():
    g = Graph()
    x = g.input("x", "f32")
    c = g.instr("add.rn.f32", g.const(0.1, "f32"), g.const(0.2, "f32"))
    assert c.op == "const" and c.target == np.float32(0.1) + np.float32(0.2)
    d = g.instr("div.s32", g.const(7, "s32"), g.const(0, "s32"))      # table: by 0 gives -1
    assert d.op == "const" and d.target == -1
    e = g.instr("ex2.approx.f32", g.const(1.0, "f32"))                # approximate: not folded
    assert e.op == "instr"
    assert g.instr("selp.f32", x, c, g.const(True, "pred")) is x     # constant predicate

    @nx.ptx_expr
    def f(x, a: nx.f32 = 0.0, b: nx.f32 = 0.0):
        return x * (a * b + a)
    h = f.bind(a=3.0, b=0.5)
    rows = [(n.target, [str(getattr(a, 'target', '')) for a in n.args])
            for n in h.graph.live() if n.op == "instr"]
    assert rows == [("mul.rn.f32", ["x", "4.5"])]
    assert list(h.params) == ["x"] and same(h(np.float32(2)), np.float32(9))


def test_graph_lint_reports_with_dump():
    g = Graph("bad")
    x = g.input("x", "f32")
    y = g.instr("neg.f32", x)
    y.dtype = "s32"
    g.outputs = [("out", y)]
    with pytest.raises(GraphError) as ei:
        g.lint()
    assert "neg.f32" in str(ei.value) and "graph bad(x: f32)" in str(ei.value)
    with pytest.raises(GraphError, match="operand 0 is s32"):
        g.instr("abs.f32", g.const(1, "s32"))


# ---------------------------------------------------------------------------------- promotion
@pytest.mark.parametrize("fn, dtypes, out", [
    (lambda x: x * 2.0, ("f32",), "f32"),
    (lambda x: 2 * x + math.pi, ("f32",), "f32"),
    (lambda x: x * 2.0, ("f16",), "f16"),
    (lambda i: i + 1, ("s32",), "s32"),
    (lambda i: i * 3 + 7, ("u64",), "u64"),
    (lambda i, j: i / j, ("s32", "s32"), "f64"),
    (lambda i: nx.sqrt(i), ("u32",), "f64"),
    (lambda i, j: i // j, ("s64", "s64"), "s64"),
    (lambda x, y: x < y, ("f64", "f64"), "pred"),
    (lambda x: nx.isnan(x), ("s32",), "pred"),
    (lambda p, q: p & ~q, ("pred", "pred"), "pred"),
    (lambda x: x * np.float32(2), ("f32",), "f32"),
    (lambda x: nx.where(x > 0, x, 0.0), ("bf16",), "bf16"),
])
def test_promotion_rules(fn, dtypes, out):
    names = [f"a{i}" for i in range(len(dtypes))]
    f = nx.ptx_expr(fn)
    f = nx.PtxExpr(eval(f"lambda {', '.join(names)}: fn({', '.join(names)})", {"fn": fn}))
    for k, t in zip(names, dtypes):
        f.all_params[k] = f.params[k] = getattr(nx, t)
    assert f.graph.outputs[0][1].dtype == out
    vals = {k: _sample(getattr(nx, t), 40) for k, t in zip(names, dtypes)}
    ref = f(**vals)
    assert same(emulate(f, vals)["out"], ref)
    assert np.asarray(ref).dtype == getattr(nx, out).np


def _sample(t, n):
    if t.kind == "f":
        x = RNG.standard_normal(n) * 8
        return nx.bf16(x.astype(np.float32)) if t.name == "bf16" else x.astype(t.np)
    if t.kind == "p":
        return RNG.integers(0, 2, n).astype(bool)
    x = RNG.integers(-50 if t.kind == "s" else 0, 50, n).astype(t.np)
    return np.where(x == 0, 1, x).astype(t.np)


# ---------------------------------------------------------------------------------- casts
_CAST_TYPES = ("f16", "bf16", "f32", "f64", "s32", "u32", "s64", "u64", "pred")


@pytest.mark.parametrize("src", _CAST_TYPES)
def test_casts_between_all_types_in_the_defined_range(src):
    t = getattr(nx, src)
    if t.kind == "f":      # in range of every destination: no NaN, |x| < 255 (u32: x >= 0 below)
        x = np.concatenate([RNG.uniform(0, 250, 64), [0.0, 0.5, 1.5, 2.5, 249.75]])
        x = x.astype(np.float32) if src == "bf16" else x.astype(t.np)
    elif t.kind == "p":
        x = np.array([True, False, True])
    else:
        info = np.iinfo(t.np)
        x = np.concatenate([RNG.integers(info.min, info.max, 64, dtype=t.np, endpoint=True),
                            np.array([0, 1, info.max, info.min], dtype=t.np)])
    for dst in _CAST_TYPES:
        if t.kind == "f" and dst in ("s32", "u32", "s64", "u64"):
            pass                                    # in range by construction
        f = nx.PtxExpr(lambda v, _d=getattr(nx, dst): _d(v))
        f.all_params["v"] = f.params["v"] = t
        ref = f(x)
        got = emulate(f, {"v": nx.bf16(x) if src == "bf16" else x})["out"]
        if dst == "bf16":
            ok = same(S.bf16_to_f32(ref), S.bf16_to_f32(got))
        else:
            ok = same(ref, got)
        assert ok, (src, dst)


def test_cast_rows():
    f = nx.PtxExpr(lambda x, i: (nx.s32(x), nx.f32(i), nx.f64(x), nx.u64(i), nx.f32(x > 0)))
    f.all_params["i"] = f.params["i"] = nx.s32
    rows = [n.target for n in f.graph.live() if n.op == "instr"]
    assert {"cvt.rzi.s32.f32", "cvt.rn.f32.s32", "cvt.f64.f32", "cvt.u64.s32", "selp.f32"} <= set(rows)


def test_bitcast():
    @nx.ptx_expr
    def f(x):
        b = nx.bitcast(x, nx.u32)
        return nx.bitcast(b & 0x7FFFFFFF, nx.f32), b >> 31
    x = np.float32([-1.5, 2.0, -0.0])
    r = f(x)
    assert same(r[0], np.abs(x)) and r[1].tolist() == [1, 0, 1]
    got = emulate(f, {"x": x})
    assert same(got["out0"], r[0]) and same(got["out1"], r[1])
    with pytest.raises(nx.TraceError, match="widths differ"):
        nx.ptx_expr(lambda x: nx.bitcast(x, nx.u64)).graph


# ---------------------------------------------------------------------------------- semantics
def test_integer_division_by_zero_and_signs_follow_numpy():
    @nx.ptx_expr
    def f(i: nx.s32, j: nx.s32):
        return i // j, i % j, nx.fmod(i, j)
    i = np.int32([7, -7, 7, -7, 5, -(2 ** 31), -(2 ** 31), 0])
    j = np.int32([2, 2, -2, -2, 0, -1, 0, 0])
    with np.errstate(all="ignore"):
        want = (np.floor_divide(i, j), np.remainder(i, j), np.fmod(i, j))
    got = f(i, j)
    emu = emulate(f, {"i": i, "j": j})
    for k in range(3):
        assert same(got[k], want[k]) and same(emu[f"out{k}"], want[k])
    assert got[0].tolist() == [3, -4, -4, 3, 0, -(2 ** 31), 0, 0]


def test_float_floor_division_and_modulo_follow_numpy():
    @nx.ptx_expr
    def f(x: nx.f64, y: nx.f64):
        return x // y, x % y
    x = np.float64([7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 1.0, 1.0, np.inf, np.nan, 5.0, 1e300])
    y = np.float64([2, 2, -2, -2, -3, 3, np.inf, -np.inf, 2, 1, 0, 1e-300])
    got = emulate(f, {"x": x, "y": y})
    with np.errstate(all="ignore"):
        assert same(got["out0"], np.floor_divide(x, y))
        assert same(got["out1"][:-1], np.remainder(x, y)[:-1])     # |x / y| beyond 2^52: skip
        assert got["out1"][-1] == 0


def test_minimum_maximum_propagate_nan_fmin_fmax_do_not():
    @nx.ptx_expr
    def f(x, y):
        return nx.minimum(x, y), nx.maximum(x, y), nx.fmin(x, y), nx.fmax(x, y), nx.clip(x, 0.0, y)
    x = np.float32([1, np.nan, 3, np.nan])
    y = np.float32([2, 1, np.nan, np.nan])
    got, ref = emulate(f, {"x": x, "y": y}), f(x, y)
    for k in range(5):
        assert same(got[f"out{k}"], ref[k]), k
    assert np.isnan(ref[0][1]) and ref[2][1] == 1


def test_nan_comparisons_follow_numpy():
    @nx.ptx_expr
    def f(x, y):
        return x != y, x == y, x < y, nx.logical_not(x >= y)
    x, y = np.float32([np.nan, 1, 1]), np.float32([1, np.nan, 1])
    got, ref = emulate(f, {"x": x, "y": y}), f(x, y)
    assert ref[0].tolist() == [True, True, False]
    for k in range(4):
        assert same(got[f"out{k}"], ref[k])


def test_shifts_and_bit_operations_follow_numpy():
    @nx.ptx_expr
    def f(a: nx.s64, n: nx.s64):
        return a << n, a >> n, ~a ^ (a & n) | n
    a = np.int64([1, -8, 2 ** 62, -1, 5, 7])
    n = np.int64([1, 70, 3, 64, -1, 2 ** 33])
    got, ref = emulate(f, {"a": a, "n": n}), f(a, n)
    for k in range(3):
        assert same(got[f"out{k}"], ref[k]), k


def test_integer_powers_and_small_float_powers():
    @nx.ptx_expr
    def f(x, i: nx.u32):
        return x ** 2, x ** -1, x ** 0, i ** 5, i ** 0
    x, i = np.float32([1.5, -3, 0.0]), np.uint32([3, 70000, 0])
    got, ref = emulate(f, {"x": x, "i": i}), f(x, i)
    for k in range(5):
        assert same(got[f"out{k}"], ref[k]), k
    assert "mul.rn.f32" in str(f.graph) and "mathlib" not in str(f.graph)


def test_f16_and_bf16_arithmetic_rounds_once():
    for t in (nx.f16, nx.bf16):
        f = nx.PtxExpr(lambda a, b: (a * b + a / b, nx.sqrt(a * a), nx.fma(a, b, a)),
                       precision="accurate")       # "cuda" would contract a * b + a / b
        f.all_params.update(a=t, b=t)
        f.params.update(a=t, b=t)
        a = (RNG.standard_normal(200) * 4).astype(np.float32)
        b = (RNG.standard_normal(200) * 4).astype(np.float32)
        if t is nx.f16:
            a, b = a.astype(np.float16), b.astype(np.float16)
        ref = f(a, b)
        got = emulate(f, {"a": nx.bf16(a) if t is nx.bf16 else a, "b": nx.bf16(b) if t is nx.bf16 else b})
        for k in range(3):
            r, g = (S.bf16_to_f32(ref[k]), S.bf16_to_f32(got[f"out{k}"])) if t is nx.bf16 \
                else (ref[k], got[f"out{k}"])
            assert same(r, g), (t, k)
    assert "fma.rn.bf16" in str(f.graph)


# ---------------------------------------------------------------------------------- precision
def test_accurate_is_exact_cuda_uses_cuda_algorithms_fastmath_approx_rows():
    def f(x, y):
        return nx.sqrt(x) / y + nx.exp(x) * nx.rsqrt(y) - nx.rcp(x)
    acc, fast = nx.ptx_expr(f, precision="accurate"), nx.ptx_expr(f, fastmath=True)
    cud = nx.ptx_expr(f)
    assert cud.precision == "cuda" and acc.precision == "accurate" and fast.precision == "fast"
    a, b, c = str(acc.stub()), str(fast.stub()), str(cud.stub())
    # CUDA C++ with default options: IEEE / sqrt rcp, expf's fma.rm + ex2, rsqrtf's approx row,
    # a product and a sum in one fma
    for row in ("sqrt.rn.f32", "div.rn.f32", "rcp.rn.f32", "fma.rm.f32", "ex2.approx.ftz.f32",
                "rsqrt.approx.f32", "fma.rn.f32"):
        assert row in c, row
    assert ".ftz.f32 %" not in c.replace("ex2.approx.ftz", "")
    assert str(acc.stub(precision="cuda")) == c and str(cud.stub(precision="accurate")) == a
    for row in ("sqrt.rn.f32", "div.rn.f32", "rcp.rn.f32", "mul.rn.f32"):
        assert row in a
    assert ".approx" not in a and ".ftz" not in a
    for row in ("sqrt.approx.ftz.f32", "div.approx.ftz.f32", "rcp.approx.ftz.f32",
                "rsqrt.approx.ftz.f32", "ex2.approx.ftz.f32", "mul.ftz.f32", "sub.ftz.f32"):
        assert row in b, row
    assert str(acc.stub(fastmath=True)) == b
    x = np.float32(RNG.uniform(0.5, 4, 100))
    y = np.float32(RNG.uniform(0.5, 4, 100))
    got = emulate(fast, {"x": x, "y": y})["out"]
    assert np.allclose(got, acc(x, y), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin",
                                  "cos", "tan", "tanh", "sinh", "cosh", "arctan", "cbrt",
                                  "sigmoid"])
@pytest.mark.parametrize("t", ["f32", "f64"])
def test_transcendentals_within_documented_accuracy(name, t):
    fn = getattr(nx, name)
    f = nx.PtxExpr(lambda x: fn(x))
    f.all_params["x"] = f.params["x"] = getattr(nx, t)
    x = (RNG.standard_normal(400) * 6).astype(getattr(nx, t).np)
    if name.startswith("log") or name == "cbrt":
        x = np.abs(x) + np.asarray(1e-3, x.dtype)
    ref = f(x)
    got = emulate(f, {"x": x})["out"]
    assert ulp_distance(got, ref).max() <= dsl_ops.OPS[name].accuracy[t == "f64"], name


def ulp_distance(a, b):
    """|a - b| in units in the last place (ordered-integer distance; NaN vs NaN is 0)."""
    a, b = np.asarray(a), np.asarray(b)
    it = {4: np.int32, 8: np.int64}[a.dtype.itemsize]

    def key(v):
        i = v.view(it).astype(np.int64)
        return np.where(i < 0, np.iinfo(it).min - i, i)
    d = np.abs(key(a) - key(b)).astype(np.float64)
    return np.where(np.isnan(a) & np.isnan(b), 0, d)


# ---------------------------------------------------------------------------------- binding
SITES_SRC = r'''
extern "C" __global__ void k(float* o, const float* a, const int* b, double* d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = a[i], y = a[i + n], z, w, acc = o[i];
        int s = b[i], r;
        PTX_INJECT("same", PTX_IN(F32, x), PTX_IN(F32, y), PTX_OUT(F32, z));
        PTX_INJECT("renamed", PTX_IN(F32, u, a[i]), PTX_IN(F32, v, a[i + 1]), PTX_OUT(F32, res, o[i + 2]));
        PTX_INJECT("typed", PTX_IN(F32, x), PTX_IN(S32, s), PTX_OUT(F32, z));
        PTX_INJECT("accum", PTX_IN(F32, x), PTX_IN(F32, y), PTX_MOD(F32, acc), PTX_OUT(S32, r));
        PTX_INJECT("three", PTX_IN(F32, x), PTX_OUT(F32, w), PTX_OUT(F32, z), PTX_OUT(F64, dd, d[i]));
        o[i] = z + w + acc + r;
    }
}'''


@pytest.fixture(scope="module")
def sites():
    return nx.PtxInject(nx.cuda_to_ptx(SITES_SRC, arch="sm_90")).sites


def _run_site(stub, site, values):
    inputs = {site[k].reg: v for k, v in values.items()}
    out = nx.emulate(stub, inputs, [v.reg for v in site.outputs])
    return {v.name: out[v.reg] for v in site.outputs}


def test_bind_by_name_and_by_declaration_order(sites):
    @nx.ptx_expr
    def f(x, y):
        return x - y
    x, y = np.float32([5, 1]), np.float32([2, 3])
    assert same(_run_site(f.stub(sites["same"]), sites["same"], {"x": x, "y": y})["z"], x - y)
    got = _run_site(f.stub(sites["renamed"]), sites["renamed"], {"u": x, "v": y})["res"]
    assert same(got, x - y)                                       # u <- x, v <- y (order)

    @nx.ptx_expr
    def g(y, x):                                                  # names match: by name
        return x - y
    assert same(_run_site(g.stub(sites["same"]), sites["same"], {"x": x, "y": y})["z"], x - y)


def test_bind_mismatch_shows_both_signatures(sites):
    @nx.ptx_expr
    def f(x, y):
        return x * y
    with pytest.raises(nx.BindError) as ei:
        f.stub(sites["typed"])
    msg = str(ei.value)
    assert "f(x: f32, y: f32) -> out: f32" in msg and "typed(in f32 x, in s32 s, out f32 z)" in msg

    @nx.ptx_expr
    def g(x, y, w):
        return x
    with pytest.raises(nx.BindError, match=r"3 parameter\(s\) for 2 in/mod"):
        g.stub(sites["same"])

    @nx.ptx_expr
    def h(x, y):
        return x, y
    with pytest.raises(nx.BindError, match=r"2 output\(s\) for 1 out/mod") as ei:
        h.stub(sites["same"])
    assert "same(in f32 x, in f32 y, out f32 z)" in str(ei.value)

    @nx.ptx_expr
    def i(x, y):
        return nx.s32(x + y)
    with pytest.raises(nx.BindError, match="output 'out' is s32, site variable 'z' is f32"):
        i.stub(sites["same"])
    assert isinstance(ei.value, nx.TraceError)


def test_bind_typed_site_and_defaults_baked_in(sites):
    @nx.ptx_expr
    def f(x, s: nx.s32, gain: nx.f32 = 3.0):
        return x * nx.f32(s) * gain
    x, s = np.float32([1.5, -2]), np.int32([2, 7])
    got = _run_site(f.stub(sites["typed"]), sites["typed"], {"x": x, "s": s})["z"]
    assert same(got, f(x, s))


def test_mod_variables_dict_outputs_and_pass_through(sites):
    @nx.ptx_expr
    def step(x, y, acc):
        return {"acc": acc + x * y, "r": nx.s32(x > y)}
    site = sites["accum"]
    x, y, acc = np.float32([1, 2]), np.float32([3, 1]), np.float32([10, 20])
    got = _run_site(step.stub(site), site, {"x": x, "y": y, "acc": acc})
    assert same(got["acc"], acc + x * y) and got["r"].tolist() == [0, 1]

    @nx.ptx_expr
    def flag(x, y):                             # returns only r: acc keeps its value
        return {"r": nx.s32(x < y)}
    got = _run_site(flag.stub(site), site, {"x": x, "y": y, "acc": acc})
    assert same(got["acc"], acc) and got["r"].tolist() == [1, 0]

    @nx.ptx_expr
    def single(x, y):                           # one output for the one out variable
        return nx.s32(x + y)
    got = _run_site(single.stub(site), site, {"x": x, "y": y, "acc": acc})
    assert same(got["acc"], acc) and got["r"].tolist() == [4, 3]

    for backend in ("stack", "ast"):             # reads acc but leaves it alone
        @nx.ptx_expr(backend=backend)
        def reads(x, y, acc):
            return {"r": nx.s32(x * y < acc)}
        got = _run_site(reads.stub(site), site, {"x": x, "y": y, "acc": acc})
        assert same(got["acc"], acc) and got["r"].tolist() == [1, 1], backend

    @nx.ptx_expr
    def wrong(x, y, acc):
        return {"nope": x}
    with pytest.raises(nx.BindError, match="nope"):
        wrong.stub(site)


def test_two_parameters_on_one_register():
    """stub(inputs=...) may bind two parameters to one register."""
    @nx.ptx_expr
    def f(x, y):
        return x * y + x
    s = f.stub(inputs={"x": "r", "y": "r"}, outputs={"out": "o"})
    got = nx.emulate(s, {"r": np.float32([3, -2])}, {"o": "f32"})["o"]
    assert got.tolist() == [12.0, 2.0]


def test_tuple_outputs_bind_in_order(sites):
    @nx.ptx_expr
    def f(x):
        return x + 1.0, x * 2.0, nx.f64(x) / 3.0
    site = sites["three"]
    x = np.float32([1.5, -4])
    got = _run_site(f.stub(site), site, {"x": x})
    assert same(got["w"], x + 1) and same(got["z"], x * 2) and same(got["dd"], f(x)[2])


def test_bind_makes_a_new_expression(sites):
    @nx.ptx_expr
    def f(x, y, alpha: nx.f32 = 1.0):
        return alpha * x + y
    g = f.bind(alpha=0.5)
    assert g is not f and g is f.bind(alpha=0.5) and list(g.params) == ["x", "y"]
    assert list(f.params) == ["x", "y", "alpha"]
    x, y = np.float32([2, 4]), np.float32([1, 1])
    assert same(_run_site(g.stub(sites["same"]), sites["same"], {"x": x, "y": y})["z"], x * 0.5 + y)
    with pytest.raises(nx.TraceError, match="no parameter 'beta'"):
        f.bind(beta=1.0)
    with pytest.raises(nx.TraceError, match="Python or NumPy number"):
        f.bind(alpha="big")


def test_stub_over_registers_and_renames():
    @nx.ptx_expr
    def f(x, y):
        return {"s": x + y, "d": x - y}
    stub = f.stub(inputs={"x": "a"}, outputs={"d": "diff"})
    got = nx.emulate(stub, {"a": np.float32(5), "y": np.float32(2)}, ["s", "diff"])
    assert got["s"] == 7 and got["diff"] == 3
    with pytest.raises(nx.BindError, match="not a parameter"):
        f.stub(inputs={"z": "q"})


def test_restub_reuses_graph_and_program(sites):
    @nx.ptx_expr
    def f(x, y):
        return x * y + 1.0
    f.stub(sites["same"])
    g, low = f.graph, f.lowered()
    f.stub(sites["renamed"])
    f.stub()
    assert f.graph is g and f.lowered() is low


# ---------------------------------------------------------------------------------- backends
def test_backends_agree_and_ast_cap():
    def f(x, y):
        a = nx.sqrt(x * x + y * y)
        b = nx.where(a > 1.0, a, -a)
        return nx.fma(a, b, x) + nx.floor(b) - a * 3.0
    s, a = nx.ptx_expr(f, precision="accurate"), nx.ptx_expr(f, precision="accurate", backend="ast")
    x = RNG.standard_normal(200).astype(np.float32)
    y = RNG.standard_normal(200).astype(np.float32)
    assert same(emulate(s, {"x": x, "y": y})["out"], emulate(a, {"x": x, "y": y})["out"])
    assert same(emulate(a, {"x": x, "y": y})["out"], s(x, y))
    assert "store(" in repr(s.program()) and "load(" in repr(s.program())

    def deep(x):                                   # a DAG whose tree doubles per level
        for _ in range(20):
            x = x * x + x
        return x
    with pytest.raises(nx.TraceError, match='backend="stack"'):
        nx.ptx_expr(deep, backend="ast").stub()
    assert nx.ptx_expr(deep, precision="accurate").stub().count("mul.rn.f32") == 20
    assert nx.ptx_expr(deep).stub().count("fma.rn.f32") == 20       # x * x + x: one fma


def test_big_formula_raises_limits():
    def big(x):
        acc = x
        for k in range(1500):
            acc = nx.fma(acc, x, float(k % 7))
        return acc
    for backend in ("stack", "ast"):
        f = nx.ptx_expr(big, backend=backend)
        assert f.lowered().limits is not None
        stub = f.stub()
        assert stub.count("fma.rn.f32") == 1500 and not stub.diagnostics
    x = np.float32([0.5, -0.25])
    assert same(nx.emulate(stub, {"x": x}, ["out"])["out"], f(x))


# ---------------------------------------------------------------------------------- docs
def test_docs_operation_table_is_current():
    path = os.path.join(ROOT, "docs", "dsl.md")
    assert dsl_ops.update_docs(path, check=True), (
        "docs/dsl.md is stale: python -c \"from numptx.dsl.ops import update_docs; "
        "update_docs('docs/dsl.md')\"")
    text = open(path, encoding="utf-8").read()
    for op in dsl_ops.op_table():
        assert f"| `{op.name}` |" in text
    for name in dsl_ops.PUBLIC:
        assert hasattr(nx, name)


def test_graph_lines_come_from_a_retrace_and_survive_a_changing_formula():
    """The fast tracing paths record no source lines; printing re-traces once to find them. A
    formula whose trace changes between runs prints without lines rather than wrong ones."""
    calls = []

    @nx.ptx_expr
    def stable(x, y):
        return x * y + 1.0  # G:stable
    g = stable.graph
    assert all(n.frame is None for n in g.nodes if n.op == "instr")
    assert f"# test_dsl.py:{line_of('# G:stable')}" in str(g)
    assert all(n.frame is not None for n in g.nodes if n.op == "instr")

    @nx.ptx_expr
    def changing(x, y):
        calls.append(1)
        return x * y if len(calls) == 1 else x + y  # G:changing
    text = str(changing.graph)
    assert len(calls) == 2 and "mul.rn.f32" in text and "# test_dsl.py" not in text


def test_lowering_falls_back_to_python_after_a_table_change(monkeypatch):
    """A graph traced under another instruction table version is lowered by the Python
    reference (its record holds the old row indices)."""
    from numptx.dsl import lower as L
    from numptx.instructions import TABLE

    @nx.ptx_expr
    def f(x, y):
        return nx.sqrt(x * x + y * y)
    g = f.graph
    want = L.to_stack_py(g)
    called = []
    real = L.to_stack_py
    monkeypatch.setattr(L, "to_stack_py", lambda *a: called.append(1) or real(*a))
    assert L.to_stack(g).words == want.words and not called
    monkeypatch.setattr(g, "rec_version", (TABLE.uid, TABLE.version - 1))
    assert L.to_stack(g).words == want.words and called


def test_c_lowering_reports_a_corrupt_record():
    from numptx._program import ProgramError, lower_dag

    @nx.ptx_expr
    def f(x, y):
        return x * y
    g = f.graph
    bad = list(g.rec)
    bad[-1] = 99                                   # an operand index past the node
    with pytest.raises(ProgramError, match="DAG lowering failed: invalid argument"):
        lower_dag(bad, [len(g.nodes) - 1], len(g.nodes))


def test_bind_keeps_a_bounded_cache_of_recent_bindings():
    """A search binds thousands of constants: bind() reuses recent results and forgets the
    oldest beyond a bound instead of growing without end."""
    from numptx.dsl.expr import _MAX_BINDS

    @nx.ptx_expr
    def f(x, c):
        return x * c
    first = f.bind(c=0.0)
    assert f.bind(c=0.0) is first
    for k in range(1, _MAX_BINDS + 50):
        f.bind(c=float(k))
    assert len(f._binds) == _MAX_BINDS
    assert f.bind(c=float(_MAX_BINDS + 48)) is f.bind(c=float(_MAX_BINDS + 48))
    assert f.bind(c=0.0) is not first                # forgotten, made again, still right
    assert float(f.bind(c=0.0)(np.float32(3))) == 0.0


def test_tracing_and_stubbing_from_several_threads(spine_ptx):
    """Fresh expressions traced, lowered and compiled from 4 threads at once (shared caches,
    per-thread C scratch) give the same stubs as one thread."""
    import threading
    inj = nx.PtxInject(spine_ptx)
    site = inj.sites["combine"]

    def formula(x, y):
        r = nx.sqrt(x * x + y * y)
        return nx.where(x > y, nx.fma(x, 0.5, r), r * 0.25) + nx.floor(y)
    want = str(nx.ptx_expr(formula).stub(site))
    bad: list = []

    def work():
        for k in range(150):
            f = nx.ptx_expr(formula) if k % 2 else nx.ptx_expr(formula).bind(y=float(k))
            s = str(f.stub(site) if k % 2 else f.stub())
            if k % 2 and s != want:
                bad.append(s)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_closures_of_one_def_keep_their_own_defaults_and_annotations():
    """Expressions of closures made by one ``def`` (same code object) keep their own defaults
    (-0.0 is not 0.0) and their own resolved annotations."""
    def make(k, T):
        def f(x, c=k):
            return x / c
        f.__annotations__ = {"x": T}
        return f
    pos, neg = nx.ptx_expr(make(0.0, nx.f32)), nx.ptx_expr(make(-0.0, nx.f32))
    assert float(pos(np.float32(1))) == np.inf and float(neg(np.float32(1))) == -np.inf
    assert nx.ptx_expr(make(1.0, nx.f64)).params["x"] is nx.f64
    assert nx.ptx_expr(make(1.0, nx.f32)).params["x"] is nx.f32


def test_string_annotations_resolve_for_each_function():
    """A formula defined again after its module rebinds a type name sees the new type."""
    ns = {"nx": nx}
    src = "def f(x: T) -> T:\n    return x * x\n"
    ns["T"] = nx.f32
    exec("from __future__ import annotations\n" + src, ns)
    e1 = nx.ptx_expr(ns["f"])
    ns["T"] = nx.f64
    exec("from __future__ import annotations\n" + src, ns)
    e2 = nx.ptx_expr(ns["f"])
    assert e1.params["x"] is nx.f32 and e2.params["x"] is nx.f64


def test_printing_a_graph_survives_a_formula_that_fails_the_second_time():
    calls = []

    @nx.ptx_expr
    def once(x):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("traced twice")
        return x + 1.0
    text = str(once.graph)
    assert "add.rn.f32" in text and "# test_dsl.py" not in text and len(calls) == 2
