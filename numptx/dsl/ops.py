"""The DSL operations: one table (:data:`OPS`) of name, arity, type rule, NumPy reference,
lowering to instruction-table rows and public ``nx.*`` names; the ``nx.*`` functions
(numptx/dsl/functions.py), :data:`PUBLIC` and the operation table of docs/dsl.md are generated
from it (``python tools/dsl_ops.py`` rewrites both files; tests check they are current).

    import numptx as nx
    @nx.ptx_expr
    def f(x: nx.f32, y: nx.f32):
        return nx.where(x > y, nx.sqrt(x - y), nx.exp(y)) + abs(x) // 2

Type rules (``kind``), applied by the tracer (:class:`numptx.dsl.promote.Tracer`):

* ``num``     operands unify to one type T, the result is T (``+ - * // % **``, minimum, ...);
* ``float``   as ``num``, integer operands are first converted to f64 (NumPy: ``np.sqrt(i)``
  and ``i / j`` are float64);
* ``cmp``     operands unify, the result is a predicate;
* ``bits``    integers (or predicates for ``& | ^ ~``); ``shift`` integers only;
* ``logical`` each operand becomes a predicate (numbers: ``!= 0``), the result is a predicate;
* ``where``   a predicate and two values that unify; ``test`` a number -> a predicate.

A lowering (numptx/dsl/lowering.py) is ``lower(b, t, fastmath, *operands)`` against the builder
protocol of docs/design/dsl.md (``b.instr(row, *args)``, ``b.const(value, t)``); ``t`` is the
operand type name. f16/bf16 operations without a native row compute in f32 and round back once
(exact for + - * / sqrt, within the stated accuracy otherwise). A reference is ``ref(T, *arrays)``
with NumPy's own function on arrays of the declared dtype.

A new math function is one mathlib sequence plus one row here (docs/design/dsl_functions.md);
the row's ``deriv`` is its derivative rule for ``nx.grad`` (numptx/dsl/grad_rules.py;
tests/test_grad.py checks every float operation has one, against sympy).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from .. import semantics as S
from . import types as T
from .grad_rules import (D, PIECEWISE_CONSTANT, Deriv, constant, int_power, lit, minmax_jvp,
                         partials, real, rule, scaled, tadd, tdiv, tmul, tsub)
from .graph import Graph, canonical
from .lowering import (arith, binary_arith, bits_type, cmp_lowering, is_mathlib_lowering,
                       lower_abs, lower_bits, lower_clip, lower_copysign, lower_floordiv,
                       lower_fmod, lower_minmax, lower_mod, lower_neg, lower_pow, lower_rsqrt,
                       lower_shift, lower_sign, lower_test, mathlib_functions, mathlib_lowering,
                       np_convert, round_mode, select, unary_row, via32)
from .promote import FAST_TYPES
from .proxy import OPS, EagerValue, Proxy, TraceError, user_frame
from .trace import EagerTracer, GraphTracer, fused_binary, fused_ternary, fused_unary

__all__ = ["DslOp", "OPS", "PUBLIC", "op_table", "public_function", "apply", "bitcast",
           "docs_table", "update_docs", "functions_source", "update_functions",
           "mathlib_functions"]

_INF = float("inf")


@dataclass(frozen=True)
class DslOp:
    """One DSL operation. ``native16``: f16/bf16 operands use rows of their own type (else
    they compute in f32). ``accuracy``: ``"exact"`` (reference and emulated stub agree bit for
    bit), a sentence saying where they agree, or an error bound ``(ulp_f32, ulp_f64)`` in units
    in the last place of the result;
    ``fast_accuracy`` describes ``fastmath=True`` where it differs. ``public``: the ``nx.*``
    names of its function (numptx/dsl/functions.py is generated from them). ``deriv``: its
    derivative rule for ``nx.grad`` (numptx/dsl/grad_rules.py; None: none, an error where a
    derivative needs it; operations with predicate or integer results need none)."""
    name: str
    arity: int
    kind: str
    ref: Callable[..., Any] = field(repr=False)
    lower: Callable[..., Any] = field(repr=False)
    python: str = ""
    numpy: str = ""
    native16: bool = False
    accuracy: Any = "exact"
    fast_accuracy: Any = None
    doc: str = ""
    cuda_accuracy: Any = None    # ``precision="cuda"`` where it differs from ``accuracy``
    ref16: bool = False          # ``ref`` takes bf16 bits itself (else: computed in f32, rounded)
    public: tuple = ()           # its ``nx.*`` names: the first is its function, the rest aliases
    deriv: Any = field(default=None, repr=False)   # its derivative rule (grad_rules.Deriv)

    def __post_init__(self):
        # the tracer's fast path: operand types it takes as they are, and the single table row
        # an application lowers to per (type, fastmath) when it is just that (found lazily)
        object.__setattr__(self, "fast_types", FAST_TYPES.get(self.kind))
        object.__setattr__(self, "rows", {})

    def single_row(self, t: str, fastmath: str) -> str | bool:
        """The row one application on ``t`` operands is, if it is one row applied to the
        operands in order (else False); cached in ``rows``."""
        g = Graph()
        xs = [g.input(f"a{i}", t) for i in range(self.arity)]
        try:
            r = self.lower(g, t, fastmath, *xs)
        except Exception:
            r = None
        row = r.target if (r is not None and r.op == "instr" and list(r.args) == xs
                           and len(g.nodes) == self.arity + 1) else False
        self.rows[(t, fastmath)] = row
        return row

    def __call__(self, *args):
        return apply(self, args)


# ---- references ---------------------------------------------------------------------------------
def _np(fn):
    def ref(t, *xs):
        return fn(*xs)
    ref.__name__ = getattr(fn, "__name__", "ref")
    return ref


def _ref_fma(t, a, b, c):
    """a * b + c rounded once (NumPy has no fma): exact in float64 with an error-free sum;
    bf16 operands arrive as their bits (``ref16``)."""
    if t.kind in "su":
        return a * b + c
    shape = np.broadcast(a, b, c).shape
    if t.name == "f64":
        return S.fma_f64(a, b, c).reshape(shape)
    return S.fma_small(a, b, c, t.name).reshape(shape)


def _ref_sigmoid(t, x):
    r = 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))
    return r.astype(t.np) if t.name != "f64" else r


def _ref_pow(t, x, y):
    if t.kind in "su" and np.any(np.asarray(y) < 0):
        raise ValueError("Integers to negative integer powers are not allowed.")
    return np.power(x, y)


def _ref_test(fn):
    def ref(t, x):
        return fn(x) if t.kind == "f" else np.full(np.shape(x), fn is np.isfinite)
    return ref


def _ref_where(t, c, a, b):
    return np.where(c, a, b)


def _ref_rsqrt(t, x):
    return t.np.type(1) / np.sqrt(x)


def _ref_rcp(t, x):
    return t.np.type(1) / x



# ---- derivative rules (the ``deriv`` column; numptx/dsl/grad_rules.py) -------------------------
# a partial is a function of the operands and the result ``y`` (reusing ``y`` shares it with the
# value); non-differentiable points take the mean of the one-sided derivatives
_LN2, _LN10 = math.log(2.0), math.log(10.0)


def _jvp_mul(xs, y, ts):
    (a, b), (ta, tb) = xs, ts
    if a.node is b.node:               # x * x: 2 x t, the 2 kept for the chain's constants
        return tmul(tmul(ta, a, y), 2, y)
    return tadd(tmul(ta, b, y), tmul(tb, a, y), y)


def _jvp_div(xs, y, ts):
    b, (ta, tb) = xs[1], ts
    return tdiv(tsub(ta, tmul(tb, y, y), y), b, y)          # (ta - y tb) / b


def _jvp_pow(xs, y, ts):
    (x, b), (tx, tb) = xs, ts
    out = None
    if tx is not None:                 # b x^(b-1): exact at x = 0 (b y / x would be 0 / 0)
        n = constant(b)                # a constant integer: by multiplications
        n = int(n) if n is not None and float(n).is_integer() and abs(n) <= 65 else None
        if n == 0:                     # x**0 is 1 everywhere (0, inf, NaN too): flat
            out = None
        elif n is not None:
            out = tmul(tx, int_power(x, n - 1, n), y)    # n x^(n-1), n inside
        else:                          # b = 0 as above (0 * 0^-1 would be NaN), as JAX
            out = tmul(tx, D.where(b == 0, lit(0.0, x), b * x ** (b - 1)), y)
    if tb is not None:                 # y log x; at x = 0 log(1) (0^b is flat in b there)
        safe = D.where(x == 0, lit(1.0, x), x)
        out = tadd(out, tmul(tb, y * D.log(safe), y), y)
    return out


def _jvp_hypot(xs, y, ts):
    (a, b), (ta, tb) = xs, ts
    num = real(tadd(tmul(ta, a, y), tmul(tb, b, y), y), y)
    return D.where(y == 0, lit(0.0, y), num / y)             # (a ta + b tb) / y; 0 at (0, 0)


def _jvp_where(xs, y, ts):
    return D.where(xs[0], real(ts[1], y), real(ts[2], y))


def _jvp_clip(xs, y, ts):
    (x, lo, hi), (tx, tlo, thi) = xs, ts
    m = D.maximum(x, lo)
    tm = None if tx is None and tlo is None else minmax_jvp(x, lo, m, tx, tlo)
    return None if tm is None and thi is None else minmax_jvp(m, hi, y, tm, thi)


_MINMAX = rule("the operand equal to the result (a tie: 1/2 each)",
               lambda xs, y, ts: minmax_jvp(xs[0], xs[1], y, ts[0], ts[1]))


# ---- the table ----------------------------------------------------------------------------------
_MATH_ACC = (4, 4)           # documented bound of mathlib sequences (ulp, f32 / f64)
_FAST_ACC = ".approx row bounds (f32)"
# float fmod/% agree with NumPy bit for bit only while the quotient fits the f64 mantissa
_FMOD_ACC = "ints exact; floats exact while |a / b| < 2^52, +-0 beyond (NumPy: the exact remainder)"
_CUDA_ACC = "CUDA's documented bound (f32; docs/dsl_accuracy.md), f64 as accurate"


def _math(name: str, ref: Callable | None = None, numpy: str = "", arity: int = 1,
          deriv: Deriv | None = None) -> DslOp:
    """The row of a float function lowered by mathlib's sequence ``name`` (mathlib.FUNCTIONS),
    public as ``nx.<name>``; its reference is ``np.<name>`` unless given."""
    return DslOp(name, arity, "float", ref or _np(getattr(np, name)), mathlib_lowering(name), "",
                 numpy or f"np.{name}", accuracy=_MATH_ACC, fast_accuracy=_FAST_ACC, cuda_accuracy=_CUDA_ACC,
                 public=(name,), deriv=deriv)


_CONTRACT = "a product used only by sums contracts into one fma.rn (NVRTC's rule, " \
    "numptx/dsl/contract.py); the reference rounds twice"

_ROWS: list[DslOp] = [
    DslOp("add", 2, "num", _np(np.add), binary_arith("add"), "a + b", "np.add", True,
          cuda_accuracy=_CONTRACT,
          deriv=partials("a: 1; b: 1", 1, 1)),
    DslOp("sub", 2, "num", _np(np.subtract), binary_arith("sub"), "a - b", "np.subtract", True,
          cuda_accuracy=_CONTRACT,
          deriv=partials("a: 1; b: -1", 1, -1)),
    DslOp("mul", 2, "num", _np(np.multiply), binary_arith("mul"), "a * b", "np.multiply", True,
          deriv=rule("a: b; b: a", _jvp_mul)),
    DslOp("truediv", 2, "float", _np(np.true_divide), binary_arith("div"), "a / b",
          "np.true_divide", fast_accuracy="2 ulp (div.approx.ftz.f32)",
          deriv=rule("a: 1 / b; b: -y / b", _jvp_div)),
    DslOp("floordiv", 2, "num", _np(np.floor_divide), lower_floordiv, "a // b", "np.floor_divide",
          public=("floor_divide",),
          doc="NumPy's floor division: ints: // 0 gives 0, MIN // -1 = MIN; floats: "
              "npy_divmod, exact while |a / b| < 2^52 (beyond: the rounded quotient)",
          deriv=PIECEWISE_CONSTANT),
    DslOp("mod", 2, "num", _np(np.remainder), lower_mod, "a % b", "np.remainder",
          public=("remainder",), accuracy=_FMOD_ACC,
          doc="sign of the divisor; ints: % 0 gives 0; floats: npy_divmod (exact fmod while "
              "|a / b| < 2^52, +-0 beyond)",
          deriv=partials("a: 1; b: -floor(a / b)", 1, lambda a, b, y: -D.floor(a / b))),
    DslOp("fmod", 2, "num", _np(np.fmod), lower_fmod, "", "np.fmod", public=("fmod",),
          accuracy=_FMOD_ACC,
          doc="C fmod: sign of the dividend; ints: fmod(a, 0) = 0; floats: exact while "
              "|a / b| < 2^52, +-0 beyond",
          deriv=partials("a: 1; b: -trunc(a / b)", 1, lambda a, b, y: -D.trunc(a / b))),
    DslOp("pow", 2, "num", _ref_pow, lower_pow, "a ** b", "np.power", public=("pow", "power"),
          accuracy=_MATH_ACC, fast_accuracy=_FAST_ACC, cuda_accuracy=_CUDA_ACC,
          doc="constant integer exponents -4 <= n <= 6 become multiplications (repeated "
              "squaring; n < 0: 2^(jk) / (x 2^-j)^k, no early overflow or underflow); integers "
              "need a constant n >= 0; else mathlib pow",
          deriv=rule("a: b a^(b-1); b: y log(a) (0 at a = 0)", _jvp_pow)),
    DslOp("neg", 1, "num", _np(np.negative), lower_neg, "-a", "np.negative", True,
          deriv=partials("-1", -1)),
    DslOp("pos", 1, "num", _np(np.positive), lambda b, t, fm, x: x, "+a", "np.positive", True,
          deriv=partials("1", 1)),
    DslOp("abs", 1, "num", _np(np.abs), lower_abs, "abs(a)", "np.abs", True,
          public=("abs", "absolute"),
          deriv=partials("sign(a) (0 at 0)", lambda x, y: D.sign(x))),
    DslOp("square", 1, "num", _np(np.square), lambda b, t, fm, x: arith(b, "mul", t, fm, x, x),
          "", "np.square", True, public=("square",),
          deriv=partials("2 a", lambda x, y: scaled(2, x))),
    DslOp("fma", 3, "num", _ref_fma, lambda b, t, fm, x, y, z: arith(b, "fma", t, fm, x, y, z),
          "", "(exact a * b + c)", True, doc="one rounding (floats); ints wrap", ref16=True,
          public=("fma",),
          deriv=partials("a: b; b: a; c: 1", lambda a, b, c, y: b, lambda a, b, c, y: a, 1)),
    DslOp("minimum", 2, "num", _np(np.minimum), via32(lower_minmax("min", True)), "",
          "np.minimum", doc="NaN-propagating; the sign of a zero result is unspecified",
          public=("minimum",),
          deriv=_MINMAX),
    DslOp("maximum", 2, "num", _np(np.maximum), via32(lower_minmax("max", True)), "",
          "np.maximum", doc="NaN-propagating; the sign of a zero result is unspecified",
          public=("maximum",),
          deriv=_MINMAX),
    DslOp("fmin", 2, "num", _np(np.fmin), via32(lower_minmax("min", False)), "", "np.fmin",
          doc="a NaN operand yields the other", public=("fmin",),
          deriv=_MINMAX),
    DslOp("fmax", 2, "num", _np(np.fmax), via32(lower_minmax("max", False)), "", "np.fmax",
          doc="a NaN operand yields the other", public=("fmax",),
          deriv=_MINMAX),
    DslOp("clip", 3, "num", _np(np.clip), via32(lower_clip), "", "np.clip",
          doc="minimum(maximum(a, lo), hi), NaN-propagating", public=("clip",),
          deriv=rule("as minimum(maximum(a, lo), hi)", _jvp_clip)),
    DslOp("sqrt", 1, "float", _np(np.sqrt), unary_row("sqrt"), "", "np.sqrt",
          fast_accuracy="rel 2^-23 (sqrt.approx.ftz.f32)", public=("sqrt",),
          deriv=partials("0.5 / y", lambda x, y: 0.5 / y)),
    DslOp("rsqrt", 1, "float", _ref_rsqrt, lower_rsqrt, "", "1 / np.sqrt(a)",
          fast_accuracy="rel 2^-22.9 (rsqrt.approx.ftz.f32)",
          cuda_accuracy="rel 2^-22.9 (rsqrt.approx.f32, as CUDA's rsqrtf)",
          doc="accurate: 1 / sqrt(a), two roundings", public=("rsqrt",),
          deriv=partials("-0.5 y^3", lambda x, y: scaled(-0.5, y * y * y))),
    DslOp("rcp", 1, "float", _ref_rcp, unary_row("rcp"), "", "1 / a",
          fast_accuracy="1 ulp (rcp.approx.ftz.f32)", public=("rcp",),
          deriv=partials("-y^2", lambda x, y: scaled(-1, y * y))),
    _math("exp", deriv=partials("y", lambda x, y: y)),
    _math("exp2", deriv=partials("y ln 2", lambda x, y: y * _LN2)),
    _math("expm1", deriv=partials("exp(a)", lambda x, y: D.exp(x))),
    _math("log", deriv=partials("1 / a", lambda x, y: 1.0 / x)),
    _math("log2", deriv=partials("1 / (a ln 2)", lambda x, y: 1.0 / (x * _LN2))),
    _math("log10", deriv=partials("1 / (a ln 10)", lambda x, y: 1.0 / (x * _LN10))),
    _math("log1p", deriv=partials("1 / (1 + a)", lambda x, y: 1.0 / (x + 1.0))),
    _math("sin", deriv=partials("cos(a)", lambda x, y: D.cos(x))),
    _math("cos", deriv=partials("-sin(a)", lambda x, y: -D.sin(x))),
    _math("tan", deriv=partials("1 + y^2", lambda x, y: y * y + 1.0)),
    _math("tanh", deriv=partials("1 - y^2", lambda x, y: 1.0 - y * y)),
    _math("sinh", deriv=partials("cosh(a)", lambda x, y: D.cosh(x))),
    _math("cosh", deriv=partials("sinh(a)", lambda x, y: D.sinh(x))),
    _math("arctan", deriv=partials("1 / (1 + a^2)", lambda x, y: 1.0 / (x * x + 1.0))),
    _math("cbrt", deriv=partials("1 / (3 y^2)", lambda x, y: 1.0 / (y * y * 3.0))),
    _math("sigmoid", _ref_sigmoid, "1 / (1 + np.exp(-a))",
          deriv=partials("y (1 - y)", lambda x, y: y * (1.0 - y))),
    _math("hypot", arity=2, deriv=rule("a: a / y; b: b / y (0 at (0, 0))", _jvp_hypot)),
    DslOp("copysign", 2, "float", _np(np.copysign), via32(lower_copysign), "", "np.copysign",
          public=("copysign",),
          deriv=partials("a: sign(a) sign(y); b: 0", lambda a, b, y: D.sign(a) * D.sign(y),
                         None)),
    DslOp("floor", 1, "num", _np(np.floor), via32(round_mode("rmi")), "math.floor(a)", "np.floor",
          public=("floor",),
          deriv=PIECEWISE_CONSTANT),
    DslOp("ceil", 1, "num", _np(np.ceil), via32(round_mode("rpi")), "math.ceil(a)", "np.ceil",
          public=("ceil",),
          deriv=PIECEWISE_CONSTANT),
    DslOp("trunc", 1, "num", _np(np.trunc), via32(round_mode("rzi")), "math.trunc(a)", "np.trunc",
          public=("trunc",),
          deriv=PIECEWISE_CONSTANT),
    DslOp("round", 1, "num", _np(np.rint), via32(round_mode("rni")), "round(a)", "np.rint",
          doc="half to even", public=("round", "rint"),
          deriv=PIECEWISE_CONSTANT),
    DslOp("sign", 1, "num", _np(np.sign), via32(lower_sign), "", "np.sign", public=("sign",),
          deriv=PIECEWISE_CONSTANT),
    *(DslOp(cc, 2, "cmp", _np(fn), via32(cmp_lowering(cc)), f"a {sym} b", f"np.{fn.__name__}")
      for cc, fn, sym in (("eq", np.equal, "=="), ("ne", np.not_equal, "!="), ("lt", np.less, "<"),
                          ("le", np.less_equal, "<="), ("gt", np.greater, ">"),
                          ("ge", np.greater_equal, ">="))),
    DslOp("bitand", 2, "bits", _np(np.bitwise_and), lower_bits("and"), "a & b", "np.bitwise_and"),
    DslOp("bitor", 2, "bits", _np(np.bitwise_or), lower_bits("or"), "a | b", "np.bitwise_or"),
    DslOp("bitxor", 2, "bits", _np(np.bitwise_xor), lower_bits("xor"), "a ^ b", "np.bitwise_xor"),
    DslOp("invert", 1, "bits", _np(np.invert), lower_bits("not"), "~a", "np.invert"),
    DslOp("lshift", 2, "shift", _np(np.left_shift), lower_shift("shl"), "a << b",
          "np.left_shift", doc="amounts >= the width (or negative) give 0"),
    DslOp("rshift", 2, "shift", _np(np.right_shift), lower_shift("shr"), "a >> b",
          "np.right_shift", doc="arithmetic for signed types; amounts >= the width give 0 or -1"),
    *(DslOp(f"logical_{n}", arity, "logical", _np(getattr(np, f"logical_{n}")), lower_bits(n), "",
            f"np.logical_{n}", public=(f"logical_{n}",))
      for n, arity in (("and", 2), ("or", 2), ("xor", 2), ("not", 1))),
    DslOp("isnan", 1, "test", _ref_test(np.isnan), via32(lower_test("isnan")), "", "np.isnan",
          public=("isnan",)),
    DslOp("isinf", 1, "test", _ref_test(np.isinf), via32(lower_test("isinf")), "", "np.isinf",
          public=("isinf",)),
    DslOp("isfinite", 1, "test", _ref_test(np.isfinite), via32(lower_test("isfinite")), "",
          "np.isfinite", public=("isfinite",)),
    DslOp("where", 3, "where", _ref_where, lambda b, t, fm, c, x, y: select(b, t, c, x, y), "",
          "np.where", True, public=("where",),
          deriv=rule("the selected operand's", _jvp_where)),
]

def _with16(op: DslOp) -> DslOp:
    """Ops that are not native for f16/bf16 compute in f32 and round back once."""
    if op.native16 or op.kind in ("bits", "shift", "logical", "where") \
            or getattr(op.lower, "__name__", "") == "run":
        return op
    return replace(op, lower=via32(op.lower))


for _op in _ROWS:
    OPS[_op.name] = _with16(_op)
del _op


def op_table() -> list[DslOp]:
    """The DSL operations in table order (docs/dsl.md is generated from it)."""
    return list(OPS.values())


def _cast(dtype: T.DType, value: Any):
    """``nx.f32(value)``: traced values get a conversion node, NumPy values ``astype``."""
    if isinstance(value, Proxy):
        return value.tracer.cast(value, dtype)
    if isinstance(value, (bool, int, float)):
        if dtype.kind in "su" and isinstance(value, float):
            return np.asarray(value).astype(dtype.np)[()]
        return canonical(value, dtype.name)
    arr = np.asarray(value)
    src = T.as_dtype(arr.dtype)
    if src is None:
        raise TraceError(f"nx.{dtype.name}({value!r}): unsupported value type {arr.dtype}")
    out = np_convert(arr, src, dtype)
    return out[()] if out.ndim == 0 else out


T.set_cast_hook(_cast)


# ---- application outside a trace ----------------------------------------------------------------
def apply(op: DslOp, args: tuple):
    """Apply ``op``: to traced values (through their tracer), else eagerly to NumPy values or
    Python numbers (a Python result for Python numbers only)."""
    for a in args:
        if isinstance(a, Proxy):
            return a.tracer.apply(op, args)
    ev = EagerTracer()
    wrapped, scalar = [], True
    for a in args:
        if isinstance(a, (np.ndarray, np.generic, list, tuple)):
            arr = np.asarray(a)
            t = T.as_dtype(arr.dtype)
            if t is None:
                raise TraceError(f"nx.{op.name}: unsupported array type {arr.dtype}")
            scalar = scalar and arr.ndim == 0
            wrapped.append(Proxy(EagerValue(arr, t), ev))
        else:
            wrapped.append(a)
    out = ev.apply(op, tuple(wrapped))
    if not isinstance(out, Proxy):
        return out                                   # Python numbers only
    v = out.node.value
    return v[()] if scalar else v


def bitcast(x: Any, dtype: T.DType):
    """Reinterpret the bits of ``x`` as ``dtype`` (same width): ``nx.bitcast(x, nx.u32)`` for an
    f32 ``x`` gives its IEEE bits (``x.view(np.uint32)`` in NumPy; PTX ``mov.b32``)."""
    dst = T.as_dtype(dtype)
    if isinstance(x, Proxy):
        tr = x.tracer
        tr.begin()
        src = x.dtype
        if dst is None or src.bits != dst.bits or "p" in (src.kind, dst.kind):
            raise TraceError(f"nx.bitcast: {src.name} -> {dtype}: the widths differ",
                             frame=user_frame(), fix="bitcast between types of one width")
        if src is dst:
            return x
        if isinstance(tr, EagerTracer):
            return Proxy(EagerValue(x.node.value.view(dst.np), dst), tr)
        if not isinstance(tr, GraphTracer):       # nx.grad's dual values (numptx/dsl/grad.py)
            return tr.bitcast(x, dst)
        b = tr.graph
        bt = bits_type(src.name)
        return Proxy(b.instr(f"bitcast.{dst.name}.{bt}", b.instr(f"bitcast.{bt}.{src.name}",
                                                                  x.node)), tr)
    arr = np.asarray(x)
    return arr.view(dst.np)[()] if arr.ndim == 0 else arr.view(dst.np)


def public_function(name: str) -> Callable:
    """The ``nx.*`` function of the DSL operation ``name``: a fused fast path on traced values
    (numptx/dsl/trace.py), :func:`apply` on NumPy values and Python numbers::

        sqrt = public_function("sqrt")        # numptx/dsl/functions.py, generated
        sqrt(np.float32(4.0))                 # 2.0
    """
    op = OPS[name]

    def eager(args):
        return apply(op, args)
    if op.arity in (1, 2, 3):
        fn = (fused_unary(name, eager) if op.arity == 1 else
              fused_binary(name, eager=eager) if op.arity == 2 else fused_ternary(name, eager))
    else:                                   # no fused path for other arities
        def fn(*args):
            for a in args:
                if a.__class__ is Proxy:
                    return a.tracer.apply(op, args)
            return apply(op, args)
    fn.__name__ = fn.__qualname__ = op.public[0] if op.public else name
    fn.__module__ = _FUNCTIONS_MODULE          # where it is defined for readers and pickle
    sig = ", ".join("abc"[:op.arity])
    fn.__doc__ = f"``nx.{fn.__name__}({sig})``: {op.numpy or name}" + \
        (f" ({op.doc})" if op.doc else "") + ". Traced values, NumPy values or Python numbers."
    return fn


_FUNCTIONS_MODULE = __name__.rpartition(".")[0] + ".functions"

PUBLIC: tuple[str, ...] = (*(n for op in OPS.values() for n in op.public), "bitcast")
"""Every ``nx.*`` DSL function name, from the table's ``public`` column (plus ``bitcast``, which
takes a type): what numptx.dsl.functions defines and both ``numptx`` and ``numptx.dsl`` export."""


# ---- documentation: the operation table of docs/dsl.md ------------------------------------------
_DOC_BEGIN = "<!-- BEGIN GENERATED: numptx.dsl.ops.docs_table() -->"
_DOC_END = "<!-- END GENERATED -->"


def _rows_used(op: DslOp, t: T.DType, fastmath: str) -> list[str]:
    """The instruction rows one application of ``op`` to values of type ``t`` lowers to."""
    g = Graph(op.name)
    tr = GraphTracer(g, fastmath)
    arg_t = [T.pred if (op.kind == "logical" or (op.kind == "where" and i == 0)) else t
             for i in range(op.arity)]
    args = tuple(Proxy(g.input(f"a{i}", a.name), tr) for i, a in enumerate(arg_t))
    out = tr.apply(op, args)
    g.outputs = [("out", out.node)]
    return [n.target for n in g.live() if n.op == "instr"]


def _describe_rows(rows: list[str], mathlib: bool = False) -> str:
    if not rows:
        return "(none)"
    if mathlib and len(rows) > 4:           # counts would drift with every mathlib change
        conv = [r for r in rows[:2] if r.startswith("cvt.") and len(set(r.split(".")[-2:])) == 2]
        return ", ".join([f"`{r}`" for r in conv] + ["mathlib sequence"])
    distinct = list(dict.fromkeys(rows))
    if len(rows) <= 4:
        return ", ".join(f"`{r}`" for r in rows)
    shown = ", ".join(f"`{r}`" for r in distinct[:3])
    return f"{len(rows)} instr: {shown}{', ...' if len(distinct) > 3 else ''}"


def _accuracy_text(op: DslOp) -> str:
    acc = op.accuracy if isinstance(op.accuracy, str) else \
        f"<= {op.accuracy[0]} ulp (f32), <= {op.accuracy[1]} ulp (f64)"
    return acc + (f"; cuda: {op.cuda_accuracy}" if op.cuda_accuracy else "") + \
        (f"; fastmath: {op.fast_accuracy}" if op.fast_accuracy else "")


def docs_table() -> str:
    """The markdown table of every DSL operation (generated; docs/dsl.md embeds it)."""
    lines = ["| op | Python | `nx.` | NumPy reference | types | f32 | f32, accurate "
             "| f32, fastmath | s32 | accuracy | derivative (`nx.grad`) | notes |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    kinds = {"num": "numbers", "float": "floats (ints: in f64)", "cmp": "numbers -> pred",
             "bits": "ints, pred", "shift": "ints", "logical": "any -> pred",
             "where": "pred, any, any", "test": "numbers -> pred"}
    for op in op_table():
        numeric = op.kind not in ("bits", "shift")
        ml = op.name == "pow" or is_mathlib_lowering(op.lower)      # pow: mathlib unless n
        f32 = _describe_rows(_rows_used(op, T.f32, "cuda"), ml) if numeric else "-"
        acc = _describe_rows(_rows_used(op, T.f32, "accurate"), ml) if numeric else "-"
        fast = _describe_rows(_rows_used(op, T.f32, "fast"), ml) if numeric else "-"
        if op.name == "pow":
            s32 = "constant n >= 0 only: `mul.lo.s32` (squaring)"
        else:
            s32 = _describe_rows(_rows_used(op, T.s32, "cuda"), ml) if op.kind != "logical" else "-"
        py = f"`{op.python}`" if op.python else ""
        name = op.public[0] if op.public else ""
        deriv = op.deriv.text if op.deriv is not None else \
            "- (no float result)" if op.kind not in ("num", "float", "where") else "none"
        row = [f"`{op.name}`", py, f"`nx.{name}`" if name else "", f"`{op.numpy}`",
               kinds[op.kind], f32, acc, fast, s32, _accuracy_text(op), deriv, op.doc]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return "\n".join(lines) + "\n"


def update_docs(path: str = "docs/dsl.md", *, check: bool = False) -> bool:
    """Rewrite the generated table in ``path`` (between the markers); with ``check=True`` only
    report whether it is up to date::

        python -c "from numptx.dsl.ops import update_docs; update_docs('docs/dsl.md')"
    """
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    a, b = text.index(_DOC_BEGIN) + len(_DOC_BEGIN), text.index(_DOC_END)
    return _rewrite(path, text, text[:a] + "\n" + docs_table() + text[b:], check)


def _rewrite(path: str, text: str, new: str, check: bool) -> bool:
    """Write ``new`` over ``path`` (whose contents are ``text``) where they differ; with
    ``check`` only say whether they are equal."""
    if check:
        return new == text
    if new != text:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(new)
    return True


# ---- the generated module of nx.* functions ------------------------------------------------------
FUNCTIONS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "functions.py")


def functions_source() -> str:
    """The text of numptx/dsl/functions.py: one assignment per ``nx.*`` name of the table's
    ``public`` column (aliases bound to the first name), so that static readers (IDEs, type
    checkers) and ``from numptx import sin`` see every function."""
    lines = ['"""The ``nx.*`` DSL functions: GENERATED from the operation table of',
             "numptx/dsl/ops.py (its ``public`` column) by ``python tools/dsl_ops.py``; do not edit",
             "(tests check that it is current). ``numptx`` and ``numptx.dsl`` export every name of",
             "``__all__`` (``from numptx import *`` all but abs, pow and round).",
             '"""',
             "# ruff: noqa: A001 - nx.abs, nx.pow and nx.round shadow builtins, like np.abs",
             "from __future__ import annotations", "",
             "from .ops import bitcast as bitcast, public_function as _fn", ""]
    body, line = [], "__all__ = ["
    for item in [f'"{n}",' for n in PUBLIC]:
        if len(line) + len(item) + 1 > 99:
            body.append(line.rstrip())
            line = "           "
        line += item + " "
    body.append(line.rstrip()[:-1] + "]")
    lines += body + [""]
    for op in OPS.values():
        if op.public:
            first = op.public[0]
            lines.append(f'{first} = _fn("{op.name}")')
            lines += [f"{alias} = {first}" for alias in op.public[1:]]
    return "\n".join(lines) + "\n"


def update_functions(path: str = FUNCTIONS_PATH, *, check: bool = False) -> bool:
    """Rewrite numptx/dsl/functions.py from the table; with ``check=True`` only report whether
    it is up to date."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    return _rewrite(path, text, functions_source(), check)
