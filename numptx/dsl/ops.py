"""The DSL operations: one table (:data:`OPS`) of name, arity, type rule, NumPy reference and
lowering to instruction-table rows; the ``nx.*`` functions are generated from it.

    import numptx as nx
    @nx.ptx_expr
    def f(x: nx.f32, y: nx.f32):
        return nx.where(x > y, nx.sqrt(x - y), nx.exp(y)) + abs(x) // 2

Type rules (``kind``), applied by the tracer (:class:`numptx.dsl.trace.Tracer`):

* ``num``     operands unify to one type T, the result is T (``+ - * // % **``, minimum, ...);
* ``float``   as ``num``, integer operands are first converted to f64 (NumPy: ``np.sqrt(i)``
  and ``i / j`` are float64);
* ``cmp``     operands unify, the result is a predicate;
* ``bits``    integers (or predicates for ``& | ^ ~``); ``shift`` integers only;
* ``logical`` each operand becomes a predicate (numbers: ``!= 0``), the result is a predicate;
* ``where``   a predicate and two values that unify; ``test`` a number -> a predicate.

A lowering is ``lower(b, t, fastmath, *operands)`` against the builder protocol of
docs/design/dsl.md (``b.instr(row, *args)``, ``b.const(value, t)``); ``t`` is the operand type
name. f16/bf16 operations without a native row compute in f32 and round back once (exact for
+ - * / sqrt, within the stated accuracy otherwise). A reference is ``ref(T, *arrays)`` with
NumPy's own function on arrays of the declared dtype.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .. import semantics as S
from . import types as T
from .graph import canonical
from .trace import (CONVERT, FAST_TYPES, OPS, EagerTracer, EagerValue, Proxy, TraceError,
                    fused_binary, fused_ternary, fused_unary, user_frame)

__all__ = ["DslOp", "OPS", "op_table"]

_F16 = ("f16", "bf16")
_INF = float("inf")


@dataclass(frozen=True)
class DslOp:
    """One DSL operation. ``native16``: f16/bf16 operands use rows of their own type (else
    they compute in f32). ``accuracy``: ``"exact"`` (reference and emulated stub agree bit for
    bit), or an error bound ``(ulp_f32, ulp_f64)`` in units in the last place of the result;
    ``fast_accuracy`` describes ``fastmath=True`` where it differs."""
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
    ref16: bool = False          # ``ref`` takes bf16 bits itself (else: computed in f32, rounded)

    def __post_init__(self):
        # the tracer's fast path: operand types it takes as they are, and the single table row
        # an application lowers to per (type, fastmath) when it is just that (found lazily)
        object.__setattr__(self, "fast_types", FAST_TYPES.get(self.kind))
        object.__setattr__(self, "rows", {})

    def single_row(self, t: str, fastmath: bool) -> str | bool:
        """The row one application on ``t`` operands is, if it is one row applied to the
        operands in order (else False); cached in ``rows``."""
        from .graph import Graph
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


# ---- lowering helpers ----------------------------------------------------------------------------
_ARITH = {  # (op, type, fastmath) -> row
    ("add", "f32", False): "add.rn.f32", ("add", "f32", True): "add.ftz.f32",
    ("sub", "f32", False): "sub.rn.f32", ("sub", "f32", True): "sub.ftz.f32",
    ("mul", "f32", False): "mul.rn.f32", ("mul", "f32", True): "mul.ftz.f32",
    ("div", "f32", False): "div.rn.f32", ("div", "f32", True): "div.approx.ftz.f32",
    ("sqrt", "f32", False): "sqrt.rn.f32", ("sqrt", "f32", True): "sqrt.approx.ftz.f32",
    ("rcp", "f32", False): "rcp.rn.f32", ("rcp", "f32", True): "rcp.approx.ftz.f32",
    ("fma", "f32", False): "fma.rn.f32", ("fma", "f32", True): "fma.rn.ftz.f32",
    ("add", "f64", False): "add.rn.f64", ("add", "f64", True): "add.f64",
    ("sub", "f64", False): "sub.rn.f64", ("sub", "f64", True): "sub.f64",
    ("mul", "f64", False): "mul.rn.f64", ("mul", "f64", True): "mul.f64",
}
for _t in ("f64",):
    for _o in ("div", "sqrt", "rcp", "fma"):
        for _fm in (False, True):
            _ARITH[(_o, _t, _fm)] = f"{_o}.rn.{_t}"
for _t in _F16:
    for _o in ("add", "sub", "mul", "fma"):
        for _fm in (False, True):
            _ARITH[(_o, _t, _fm)] = f"{_o}.rn.{_t}"
for _t in ("s32", "u32", "s64", "u64"):
    for _fm in (False, True):
        _ARITH.update({("add", _t, _fm): f"add.{_t}", ("sub", _t, _fm): f"sub.{_t}",
                       ("mul", _t, _fm): f"mul.lo.{_t}", ("fma", _t, _fm): f"mad.lo.{_t}"})
del _t, _o, _fm


def arith(b, op: str, t: str, fm: bool, *xs):
    """``b.instr`` of the row for arithmetic ``op`` on type ``t`` (IEEE or fastmath form)."""
    return b.instr(_ARITH[(op, t, fm)], *xs)


def _is_float(t: str) -> bool:
    return t[0] == "f" or t == "bf16"


def _bits_type(t: str) -> str:
    return {"s32": "b32", "u32": "b32", "s64": "b64", "u64": "b64", "f32": "b32",
            "f64": "b64", "f16": "b16", "bf16": "b16"}[t]


def _bitwise(b, row: str, t: str, *xs):
    """A b32/b64 row on s/u values: reinterpret, apply, reinterpret back (mov.b, free)."""
    bt = _bits_type(t)
    ys = [b.instr(f"bitcast.{bt}.{t}", x) for x in xs]
    return b.instr(f"bitcast.{t}.{bt}", b.instr(f"{row}.{bt}", *ys))


def select(b, t: str, p, x, y):
    """``p ? x : y`` for any DSL type (selp; f16/bf16 through b16; pred with and/or)."""
    if t == "pred":
        return b.instr("or.pred", b.instr("and.pred", p, x),
                       b.instr("and.pred", b.instr("not.pred", p), y))
    if t in _F16:
        r = b.instr("selp.b16", b.instr(f"bitcast.b16.{t}", x), b.instr(f"bitcast.b16.{t}", y), p)
        return b.instr(f"bitcast.{t}.b16", r)
    return b.instr(f"selp.{t}", x, y, p)


def _not(b, p):
    return b.instr("not.pred", p)


def _cmp(b, cc: str, t: str, x, y):
    """NumPy comparison: ordered for lt/le/gt/ge/eq (false with NaN), ``ne`` true with NaN."""
    if t == "pred":
        r = b.instr("xor.pred", x, y)
        return r if cc == "ne" else _not(b, r)
    if cc == "ne" and _is_float(t):
        return _not(b, b.instr(f"setp.eq.{t}", x, y))
    return b.instr(f"setp.{cc}.{t}", x, y)


def _isnan(b, t, x):
    return b.instr(f"setp.nan.{t}", x, x)


def _cvt_row(dst: str, src: str) -> str:
    from ..instructions import TABLE
    for name in (f"cvt.{dst}.{src}", f"cvt.rn.{dst}.{src}", f"cvt.rzi.{dst}.{src}"):
        if name in TABLE:
            return name
    raise TraceError(f"no conversion row from {src} to {dst} in the instruction table")


def convert(b, src: str, dst: str, x):
    """``nx.<dst>(x)`` as instructions: float->int truncates (cvt.rzi, NumPy's astype; PTX
    saturates where NumPy is undefined), int->float and float narrowing round to nearest,
    int->int wraps/extends, number->pred is ``x != 0`` (NaN is True), pred->number is 1/0."""
    if src == dst:
        return x
    if src == "pred":
        if dst in _F16:
            return convert(b, "f32", dst, convert(b, "pred", "f32", x))
        return b.instr(f"selp.{dst}", b.const(1, dst), b.const(0, dst), x)
    if dst == "pred":
        if src in _F16:
            x, src = convert(b, src, "f32", x), "f32"
        return _not(b, b.instr(f"setp.eq.{src}", x, b.const(0, src)))
    if _is_float(src) and not _is_float(dst):
        return b.instr(f"cvt.rzi.{dst}.{src}", x)
    return b.instr(_cvt_row(dst, src), x)


def _via32(lower):
    """Run an f32 lowering for f16/bf16 operands and round the result back once."""
    def run(b, t, fm, *xs):
        if t not in _F16:
            return lower(b, t, fm, *xs)
        ys = [convert(b, t, "f32", x) if x.dtype == t else x for x in xs]
        r = lower(b, "f32", fm, *ys)
        return convert(b, "f32", t, r) if r.dtype == "f32" else r
    run.__name__ = getattr(lower, "__name__", "lower")
    return run


# ---- integer and float lowerings -----------------------------------------------------------------
def _lower_neg(b, t, fm, x):
    if t[0] == "u":
        return b.instr(f"sub.{t}", b.const(0, t), x)
    return b.instr(f"neg.{t}", x)


def _lower_abs(b, t, fm, x):
    return x if t[0] == "u" else b.instr(f"abs.{t}", x)


def _int_divmod(b, t, x, y):
    """NumPy floor division and remainder of integers: floor rounding, remainder with the sign
    of the divisor, ``x // 0 == x % 0 == 0``, ``MIN // -1 == MIN``."""
    zero = b.const(0, t)
    q, r = b.instr(f"div.{t}", x, y), b.instr(f"rem.{t}", x, y)
    by0 = b.instr(f"setp.eq.{t}", y, zero)
    if t[0] == "s":
        adj = b.instr("and.pred", b.instr(f"setp.ne.{t}", r, zero),
                      b.instr("xor.pred", b.instr(f"setp.lt.{t}", r, zero),
                              b.instr(f"setp.lt.{t}", y, zero)))
        q = b.instr(f"selp.{t}", b.instr(f"sub.{t}", q, b.const(1, t)), q, adj)
        r = b.instr(f"selp.{t}", b.instr(f"add.{t}", r, y), r, adj)
    return b.instr(f"selp.{t}", zero, q, by0), b.instr(f"selp.{t}", zero, r, by0)


def fmod_seq(b, t, x, y):
    """C fmod (exact) for f32/f64: q = trunc(x / y) corrected by one, r = fma(-q, y, x) with
    the sign of x; fmod(x, +-inf) = x. f32 computes in f64. Exact while |x / y| < 2^52; for a
    larger finite quotient it returns +-0 (so x // y is the rounded quotient)."""
    if t == "f32":
        r = fmod_seq(b, "f64", convert(b, "f32", "f64", x), convert(b, "f32", "f64", y))
        return convert(b, "f64", "f32", r)
    zero, one, inf = b.const(0.0, t), b.const(1.0, t), b.const(_INF, t)
    qd = b.instr(f"div.rn.{t}", x, y)
    q0 = b.instr(f"cvt.rzi.{t}.{t}", qd)
    r0 = b.instr(f"fma.rn.{t}", b.instr(f"neg.{t}", q0), y, x)
    over = b.instr("and.pred", _not(b, b.instr(f"setp.eq.{t}", r0, zero)),
                   b.instr("xor.pred", b.instr(f"setp.lt.{t}", r0, zero),
                           b.instr(f"setp.lt.{t}", x, zero)))
    under = b.instr(f"setp.ge.{t}", b.instr(f"abs.{t}", r0), b.instr(f"abs.{t}", y))
    s = b.instr(f"copysign.{t}", qd, one)
    q = b.instr(f"selp.{t}", b.instr(f"sub.rn.{t}", q0, s),
                b.instr(f"selp.{t}", b.instr(f"add.rn.{t}", q0, s), q0, under), over)
    r = b.instr(f"copysign.{t}", x, b.instr(f"fma.rn.{t}", b.instr(f"neg.{t}", q), y, x))
    finite_x = b.instr(f"setp.lt.{t}", b.instr(f"abs.{t}", x), inf)
    big = b.instr("and.pred", b.instr(f"setp.ge.{t}", b.instr(f"abs.{t}", qd),
                                      b.const(2.0 ** 53, t)),
                  b.instr("and.pred", finite_x, _not(b, b.instr(f"setp.eq.{t}", y, zero))))
    r = b.instr(f"selp.{t}", b.instr(f"copysign.{t}", x, zero), r, big)   # beyond 2^53: +-0
    keep = b.instr("and.pred", b.instr(f"setp.eq.{t}", b.instr(f"abs.{t}", y), inf), finite_x)
    return b.instr(f"selp.{t}", x, r, keep)


def _float_divmod(b, t, x, y):
    """NumPy's npy_divmod / npy_floor_divide / npy_remainder, operation for operation."""
    zero, one, half = b.const(0.0, t), b.const(1.0, t), b.const(0.5, t)
    mod = fmod_seq(b, t, x, y)
    by0 = b.instr(f"setp.eq.{t}", y, zero)
    div = b.instr(f"div.rn.{t}", b.instr(f"sub.rn.{t}", x, mod), y)
    mod_nz = _not(b, b.instr(f"setp.eq.{t}", mod, zero))          # NaN counts as nonzero
    adj = b.instr("and.pred", mod_nz, b.instr("xor.pred", b.instr(f"setp.lt.{t}", y, zero),
                                               b.instr(f"setp.lt.{t}", mod, zero)))
    mod2 = b.instr(f"selp.{t}", b.instr(f"add.rn.{t}", mod, y), mod, adj)
    div = b.instr(f"selp.{t}", b.instr(f"sub.rn.{t}", div, one), div, adj)
    mod2 = b.instr(f"selp.{t}", mod2, b.instr(f"copysign.{t}", y, zero), mod_nz)
    fl = b.instr(f"cvt.rmi.{t}.{t}", div)
    fl = b.instr(f"selp.{t}", b.instr(f"add.rn.{t}", fl, one), fl,
                 b.instr(f"setp.gt.{t}", b.instr(f"sub.rn.{t}", div, fl), half))
    quot = b.instr(f"div.rn.{t}", x, y)
    fl = b.instr(f"selp.{t}", fl, b.instr(f"copysign.{t}", quot, zero),
                 _not(b, b.instr(f"setp.eq.{t}", div, zero)))
    return b.instr(f"selp.{t}", quot, fl, by0), b.instr(f"selp.{t}", mod, mod2, by0)


def _lower_floordiv(b, t, fm, x, y):
    return (_float_divmod if _is_float(t) else _int_divmod)(b, t, x, y)[0]


def _lower_mod(b, t, fm, x, y):
    return (_float_divmod if _is_float(t) else _int_divmod)(b, t, x, y)[1]


def _lower_fmod(b, t, fm, x, y):
    if _is_float(t):
        return fmod_seq(b, t, x, y)
    # C fmod of integers: remainder with the sign of the dividend; NumPy gives 0 for y == 0
    zero = b.const(0, t)
    return b.instr(f"selp.{t}", zero, b.instr(f"rem.{t}", x, y), b.instr(f"setp.eq.{t}", y, zero))


def _int_pow(b, t, x, n: int):
    """x ** n for a constant n >= 0 by squaring (wraps like NumPy)."""
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else b.instr(f"mul.lo.{t}", result, base)
        n >>= 1
        if n:
            base = b.instr(f"mul.lo.{t}", base, base)
    return result if result is not None else b.const(1, t)


def _lower_pow(b, t, fm, x, y):
    n = None
    if y.op == "const":
        v = y.target.item() if t != "bf16" else None
        if v is not None and float(v).is_integer() and abs(v) <= (1 << 62):
            n = int(v)
    if not _is_float(t):
        if n is None or n < 0:
            raise TraceError("integer ** needs a constant exponent >= 0 (NumPy raises for "
                             "negative integer powers)", frame=user_frame(),
                             fix="use a float type for variable exponents: nx.f64(x) ** nx.f64(y)")
        return _int_pow(b, t, x, n)
    if n is not None and abs(n) <= 4:        # multiplication chain (np.power(x, 2) is x*x)
        if n == 0:
            return b.const(1.0, t)
        r = x
        for _ in range(abs(n) - 1):
            r = arith(b, "mul", t, fm, r, x)
        return r if n > 0 else arith(b, "div", t, fm, b.const(1.0, t), r)
    return _mathlib("pow")(b, t, fm, x, y)


def _lower_minmax(which: str, nan_propagating: bool):
    def lower(b, t, fm, x, y):
        r = b.instr(f"{which}.{t}", x, y)
        if nan_propagating and _is_float(t):
            r = b.instr(f"selp.{t}", arith(b, "add", t, False, x, y), r,
                        b.instr(f"setp.nan.{t}", x, y))
        return r
    return lower


def _lower_clip(b, t, fm, x, lo, hi):
    mx, mn = _lower_minmax("max", True), _lower_minmax("min", True)
    return mn(b, t, fm, mx(b, t, fm, x, lo), hi)


def _round_mode(mode: str):
    def lower(b, t, fm, x):
        return b.instr(f"cvt.{mode}.{t}.{t}", x) if _is_float(t) else x
    return lower


def _lower_sign(b, t, fm, x):
    zero, one = b.const(0, t), b.const(1, t)
    if t[0] == "u":
        return b.instr(f"selp.{t}", one, zero, b.instr(f"setp.ne.{t}", x, zero))
    s = b.instr(f"selp.{t}", one, zero, b.instr(f"setp.gt.{t}", x, zero))
    s = b.instr(f"selp.{t}", b.const(-1, t), s, b.instr(f"setp.lt.{t}", x, zero))
    return b.instr(f"selp.{t}", x, s, _isnan(b, t, x)) if _is_float(t) else s


def _lower_shift(direction: str):
    def lower(b, t, fm, x, n):
        if t[1:] == "64":       # clamp a 64-bit amount before it becomes the u32 operand
            n64 = n if t == "u64" else b.instr("cvt.u64.s64", n)
            n = b.instr("cvt.u32.u64", b.instr("min.u64", n64, b.const(64, "u64")))
        elif t == "s32":
            n = b.instr("cvt.u32.s32", n)
        if direction == "shl":
            bt = _bits_type(t)
            return b.instr(f"bitcast.{t}.{bt}", b.instr(f"shl.{bt}", b.instr(f"bitcast.{bt}.{t}", x), n))
        return b.instr(f"shr.{t}", x, n)
    return lower


def _lower_bits(row: str):
    def lower(b, t, fm, *xs):
        if t == "pred":
            return b.instr(f"{row}.pred", *xs)
        return _bitwise(b, row, t, *xs)
    return lower


def _lower_test(which: str):
    def lower(b, t, fm, x):
        if not _is_float(t):
            return b.const(which == "isfinite", "pred")
        if which == "isnan":
            return _isnan(b, t, x)
        cc = "eq" if which == "isinf" else "lt"
        return b.instr(f"setp.{cc}.{t}", b.instr(f"abs.{t}", x), b.const(_INF, t))
    return lower


def _lower_rsqrt(b, t, fm, x):
    if fm and t == "f32":
        return b.instr("rsqrt.approx.ftz.f32", x)
    return arith(b, "div", t, False, b.const(1.0, t), arith(b, "sqrt", t, False, x))


# ---- mathlib ----------------------------------------------------------------------------------
def mathlib_functions() -> dict:
    """``numptx.dsl.mathlib.FUNCTIONS``: name -> (fn(b, *x, dtype, fastmath), arity, reference)."""
    from . import mathlib
    return mathlib.FUNCTIONS


def _mathlib(name: str):
    """Lower through mathlib's sequence ``name`` (f32/f64; f16/bf16 arrive as f32)."""
    def lower(b, t, fm, *xs):
        return mathlib_functions()[name][0](b, *xs, dtype=t, fastmath=fm)
    lower.__name__ = f"mathlib_{name}"
    return lower


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


# ---- the table ----------------------------------------------------------------------------------
def _binary_arith(op):
    rows = {(t, fm): r for (o, t, fm), r in _ARITH.items() if o == op}

    def lower(b, t, fm, x, y):
        return b.instr(rows[t, fm], x, y)
    lower.__name__ = op
    return lower


def _unary_row(prefix: str):
    def lower(b, t, fm, x):
        return arith(b, prefix, t, fm, x)
    return lower


def _cmp_lower(cc):
    def lower(b, t, fm, x, y):
        return _cmp(b, cc, t, x, y)
    return lower


def _copysign(b, t, fm, x, y):
    return b.instr(f"copysign.{t}", y, x)       # PTX: copysign d, a, b = b with the sign of a


_TRANSCENDENTAL = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
                   "tanh", "sinh", "cosh", "arctan", "cbrt")
_MATHLIB_OPS = frozenset(_TRANSCENDENTAL + ("sigmoid", "hypot", "pow"))
_MATH_ACC = (4, 4)           # documented bound of mathlib sequences (ulp, f32 / f64)
_FAST_ACC = ".approx row bounds (f32)"

_ROWS: list[DslOp] = [
    DslOp("add", 2, "num", _np(np.add), _binary_arith("add"), "a + b", "np.add", True),
    DslOp("sub", 2, "num", _np(np.subtract), _binary_arith("sub"), "a - b", "np.subtract", True),
    DslOp("mul", 2, "num", _np(np.multiply), _binary_arith("mul"), "a * b", "np.multiply", True),
    DslOp("truediv", 2, "float", _np(np.true_divide), _binary_arith("div"), "a / b",
          "np.true_divide", fast_accuracy="2 ulp (div.approx.ftz.f32)"),
    DslOp("floordiv", 2, "num", _np(np.floor_divide), _lower_floordiv, "a // b", "np.floor_divide",
          doc="NumPy's floor division: ints: // 0 gives 0, MIN // -1 = MIN; floats: "
              "npy_divmod, exact while |a / b| < 2^52 (beyond: the rounded quotient)"),
    DslOp("mod", 2, "num", _np(np.remainder), _lower_mod, "a % b", "np.remainder",
          doc="sign of the divisor; ints: % 0 gives 0; floats: npy_divmod (exact fmod while "
              "|a / b| < 2^52, +-0 beyond)"),
    DslOp("fmod", 2, "num", _np(np.fmod), _lower_fmod, "", "np.fmod",
          doc="C fmod: sign of the dividend; ints: fmod(a, 0) = 0; floats: exact while "
              "|a / b| < 2^52, +-0 beyond"),
    DslOp("pow", 2, "num", _ref_pow, _lower_pow, "a ** b", "np.power",
          accuracy=_MATH_ACC, fast_accuracy=_FAST_ACC,
          doc="constant integer exponents |n| <= 4 become multiplications (n < 0: 1 / x**|n|); "
              "integers need a constant n >= 0; else mathlib pow"),
    DslOp("neg", 1, "num", _np(np.negative), _lower_neg, "-a", "np.negative", True),
    DslOp("pos", 1, "num", _np(np.positive), lambda b, t, fm, x: x, "+a", "np.positive", True),
    DslOp("abs", 1, "num", _np(np.abs), _lower_abs, "abs(a)", "np.abs", True),
    DslOp("square", 1, "num", _np(np.square), lambda b, t, fm, x: arith(b, "mul", t, fm, x, x),
          "", "np.square", True),
    DslOp("fma", 3, "num", _ref_fma, lambda b, t, fm, x, y, z: arith(b, "fma", t, fm, x, y, z),
          "", "(exact a * b + c)", True, doc="one rounding (floats); ints wrap", ref16=True),
    DslOp("minimum", 2, "num", _np(np.minimum), _via32(_lower_minmax("min", True)), "",
          "np.minimum", doc="NaN-propagating; the sign of a zero result is unspecified"),
    DslOp("maximum", 2, "num", _np(np.maximum), _via32(_lower_minmax("max", True)), "",
          "np.maximum", doc="NaN-propagating; the sign of a zero result is unspecified"),
    DslOp("fmin", 2, "num", _np(np.fmin), _via32(_lower_minmax("min", False)), "", "np.fmin",
          doc="a NaN operand yields the other"),
    DslOp("fmax", 2, "num", _np(np.fmax), _via32(_lower_minmax("max", False)), "", "np.fmax",
          doc="a NaN operand yields the other"),
    DslOp("clip", 3, "num", _np(np.clip), _via32(_lower_clip), "", "np.clip",
          doc="minimum(maximum(a, lo), hi), NaN-propagating"),
    DslOp("sqrt", 1, "float", _np(np.sqrt), _unary_row("sqrt"), "", "np.sqrt",
          fast_accuracy="rel 2^-23 (sqrt.approx.ftz.f32)"),
    DslOp("rsqrt", 1, "float", _ref_rsqrt, _lower_rsqrt, "", "1 / np.sqrt(a)",
          fast_accuracy="rel 2^-22.9 (rsqrt.approx.ftz.f32)", doc="IEEE: 1 / sqrt(a), two roundings"),
    DslOp("rcp", 1, "float", _ref_rcp, _unary_row("rcp"), "", "1 / a",
          fast_accuracy="1 ulp (rcp.approx.ftz.f32)"),
    *(DslOp(n, 1, "float", _np(getattr(np, n)), _mathlib(n), "", f"np.{n}",
            accuracy=_MATH_ACC, fast_accuracy=_FAST_ACC) for n in _TRANSCENDENTAL),
    DslOp("sigmoid", 1, "float", _ref_sigmoid, _mathlib("sigmoid"), "", "1 / (1 + np.exp(-a))",
          accuracy=_MATH_ACC, fast_accuracy=_FAST_ACC),
    DslOp("hypot", 2, "float", _np(np.hypot), _mathlib("hypot"), "", "np.hypot",
          accuracy=_MATH_ACC, fast_accuracy=_FAST_ACC),
    DslOp("copysign", 2, "float", _np(np.copysign), _via32(_copysign), "", "np.copysign"),
    DslOp("floor", 1, "num", _np(np.floor), _via32(_round_mode("rmi")), "math.floor(a)", "np.floor"),
    DslOp("ceil", 1, "num", _np(np.ceil), _via32(_round_mode("rpi")), "math.ceil(a)", "np.ceil"),
    DslOp("trunc", 1, "num", _np(np.trunc), _via32(_round_mode("rzi")), "math.trunc(a)", "np.trunc"),
    DslOp("round", 1, "num", _np(np.rint), _via32(_round_mode("rni")), "round(a)", "np.rint",
          doc="half to even"),
    DslOp("sign", 1, "num", _np(np.sign), _via32(_lower_sign), "", "np.sign"),
    *(DslOp(cc, 2, "cmp", _np(fn), _via32(_cmp_lower(cc)), f"a {sym} b", f"np.{fn.__name__}")
      for cc, fn, sym in (("eq", np.equal, "=="), ("ne", np.not_equal, "!="), ("lt", np.less, "<"),
                          ("le", np.less_equal, "<="), ("gt", np.greater, ">"),
                          ("ge", np.greater_equal, ">="))),
    DslOp("bitand", 2, "bits", _np(np.bitwise_and), _lower_bits("and"), "a & b", "np.bitwise_and"),
    DslOp("bitor", 2, "bits", _np(np.bitwise_or), _lower_bits("or"), "a | b", "np.bitwise_or"),
    DslOp("bitxor", 2, "bits", _np(np.bitwise_xor), _lower_bits("xor"), "a ^ b", "np.bitwise_xor"),
    DslOp("invert", 1, "bits", _np(np.invert), _lower_bits("not"), "~a", "np.invert"),
    DslOp("lshift", 2, "shift", _np(np.left_shift), _lower_shift("shl"), "a << b",
          "np.left_shift", doc="amounts >= the width (or negative) give 0"),
    DslOp("rshift", 2, "shift", _np(np.right_shift), _lower_shift("shr"), "a >> b",
          "np.right_shift", doc="arithmetic for signed types; amounts >= the width give 0 or -1"),
    DslOp("logical_and", 2, "logical", _np(np.logical_and), _lower_bits("and"), "", "np.logical_and"),
    DslOp("logical_or", 2, "logical", _np(np.logical_or), _lower_bits("or"), "", "np.logical_or"),
    DslOp("logical_xor", 2, "logical", _np(np.logical_xor), _lower_bits("xor"), "", "np.logical_xor"),
    DslOp("logical_not", 1, "logical", _np(np.logical_not), _lower_bits("not"), "", "np.logical_not"),
    DslOp("isnan", 1, "test", _ref_test(np.isnan), _via32(_lower_test("isnan")), "", "np.isnan"),
    DslOp("isinf", 1, "test", _ref_test(np.isinf), _via32(_lower_test("isinf")), "", "np.isinf"),
    DslOp("isfinite", 1, "test", _ref_test(np.isfinite), _via32(_lower_test("isfinite")), "",
          "np.isfinite"),
    DslOp("where", 3, "where", _ref_where, lambda b, t, fm, c, x, y: select(b, t, c, x, y), "",
          "np.where", True),
]


def _with16(op: DslOp) -> DslOp:
    """Ops that are not native for f16/bf16 compute in f32 and round back once."""
    if op.native16 or op.kind in ("bits", "shift", "logical", "where") \
            or getattr(op.lower, "__name__", "") == "run":
        return op
    from dataclasses import replace
    return replace(op, lower=_via32(op.lower))


for _op in _ROWS:
    OPS[_op.name] = _with16(_op)
del _op


def op_table() -> list[DslOp]:
    """The DSL operations in table order (docs/dsl.md is generated from it)."""
    return list(OPS.values())


# ---- casts ------------------------------------------------------------------------------------------
def _np_convert(a: np.ndarray, src: T.DType, dst: T.DType) -> np.ndarray:
    """NumPy's ``astype`` semantics (float->int truncates; undefined for NaN/out of range)."""
    a = np.asarray(a)
    if src is dst:
        return a
    with np.errstate(all="ignore"):
        if src.name == "bf16":
            a, src = S.bf16_to_f32(a).reshape(a.shape), T.f32
            if dst is T.f32:
                return a
        if dst.name == "bf16":
            if src.kind in "su":
                return S.int_to_float(a, src.name, "bf16").reshape(a.shape)
            if src.kind == "p":
                a = a.astype(np.float32)
            return S.f64_to_bf16(a.astype(np.float64)).reshape(a.shape)
        return a.astype(dst.np)


CONVERT[0] = convert
CONVERT[1] = _np_convert


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
    out = _np_convert(arr, src, dtype)
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
        b = tr.graph
        bt = _bits_type(src.name)
        return Proxy(b.instr(f"bitcast.{dst.name}.{bt}", b.instr(f"bitcast.{bt}.{src.name}", x.node)), tr)
    arr = np.asarray(x)
    return arr.view(dst.np)[()] if arr.ndim == 0 else arr.view(dst.np)


def _public(name: str, doc: str = ""):
    op = OPS[name]

    if op.arity == 1:
        fn = fused_unary(name, lambda args: apply(op, args))
    elif op.arity == 2:
        fn = fused_binary(name, eager=lambda args: apply(op, args))
    elif op.arity == 3:
        fn = fused_ternary(name, lambda args: apply(op, args))
    else:
        def fn(*args):
            for a in args:
                if a.__class__ is Proxy:
                    return a.tracer.apply(op, args)
            return apply(op, args)
    fn.__name__ = fn.__qualname__ = name
    sig = ", ".join("abc"[:op.arity])
    fn.__doc__ = (doc or f"``nx.{name}({sig})``: {op.numpy or name}") + \
        (f" ({op.doc})" if op.doc else "") + ". Traced values, NumPy values or Python numbers."
    return fn


sqrt, rsqrt, rcp = _public("sqrt"), _public("rsqrt"), _public("rcp")
exp, exp2, expm1 = _public("exp"), _public("exp2"), _public("expm1")
log, log2, log10, log1p = _public("log"), _public("log2"), _public("log10"), _public("log1p")
sin, cos, tan, tanh = _public("sin"), _public("cos"), _public("tan"), _public("tanh")
sinh, cosh, arctan = _public("sinh"), _public("cosh"), _public("arctan")
pow, hypot, cbrt, sigmoid = _public("pow"), _public("hypot"), _public("cbrt"), _public("sigmoid")
power = pow
floor, ceil, trunc, round = _public("floor"), _public("ceil"), _public("trunc"), _public("round")
rint = round
square, sign, copysign = _public("square"), _public("sign"), _public("copysign")
absolute = _public("abs")
globals()["abs"] = absolute         # nx.abs, like np.abs (defined last: the builtin is used above)
minimum, maximum, fmin, fmax = (_public("minimum"), _public("maximum"), _public("fmin"),
                                _public("fmax"))
clip, fma, where = _public("clip"), _public("fma"), _public("where")
fmod, floor_divide, remainder = _public("fmod"), _public("floordiv"), _public("mod")
logical_and, logical_or = _public("logical_and"), _public("logical_or")
logical_xor, logical_not = _public("logical_xor"), _public("logical_not")
isnan, isinf, isfinite = _public("isnan"), _public("isinf"), _public("isfinite")

PUBLIC = ("sqrt", "rsqrt", "rcp", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin",
          "cos", "tan", "tanh", "sinh", "cosh", "arctan", "pow", "power", "hypot", "cbrt",
          "sigmoid", "floor", "ceil", "trunc", "round", "rint", "square", "sign", "copysign",
          "absolute", "abs", "minimum", "maximum", "fmin", "fmax", "clip", "fma", "where", "fmod",
          "floor_divide", "remainder", "logical_and", "logical_or", "logical_xor",
          "logical_not", "isnan", "isinf", "isfinite", "bitcast")


# ---- documentation: the operation table of docs/dsl.md ------------------------------------------
_DOC_BEGIN = "<!-- BEGIN GENERATED: numptx.dsl.ops.docs_table() -->"
_DOC_END = "<!-- END GENERATED -->"


def _rows_used(op: DslOp, t: T.DType, fastmath: bool) -> list[str]:
    """The instruction rows one application of ``op`` to values of type ``t`` lowers to."""
    from .graph import Graph
    from .trace import GraphTracer
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
    acc = "exact" if op.accuracy == "exact" else \
        f"<= {op.accuracy[0]} ulp (f32), <= {op.accuracy[1]} ulp (f64)"
    return acc + (f"; fastmath: {op.fast_accuracy}" if op.fast_accuracy else "")


def _nx_name(op: DslOp) -> str:
    for n in PUBLIC:
        fn = globals().get(n)
        if getattr(fn, "__name__", "") == op.name and n != "absolute":
            return n
    return ""


def docs_table() -> str:
    """The markdown table of every DSL operation (generated; docs/dsl.md embeds it)."""
    lines = ["| op | Python | `nx.` | NumPy reference | types | f32 | f32, fastmath | s32 "
             "| accuracy | notes |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    kinds = {"num": "numbers", "float": "floats (ints: in f64)", "cmp": "numbers -> pred",
             "bits": "ints, pred", "shift": "ints", "logical": "any -> pred",
             "where": "pred, any, any", "test": "numbers -> pred"}
    for op in op_table():
        numeric = op.kind not in ("bits", "shift")
        ml = op.name in _MATHLIB_OPS
        f32 = _describe_rows(_rows_used(op, T.f32, False), ml) if numeric else "-"
        fast = _describe_rows(_rows_used(op, T.f32, True), ml) if numeric else "-"
        if op.name == "pow":
            s32 = "constant n >= 0 only: `mul.lo.s32` (squaring)"
        else:
            s32 = _describe_rows(_rows_used(op, T.s32, False), ml) if op.kind != "logical" else "-"
        py = f"`{op.python}`" if op.python else ""
        name = _nx_name(op)
        row = [f"`{op.name}`", py, f"`nx.{name}`" if name else "", f"`{op.numpy}`",
               kinds[op.kind], f32, fast, s32, _accuracy_text(op), op.doc]
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
    new = text[:a] + "\n" + docs_table() + text[b:]
    if check:
        return new == text
    if new != text:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(new)
    return True
