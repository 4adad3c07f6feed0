"""Lowerings of the DSL operations to instruction-table rows, written against the builder
protocol of docs/design/dsl.md (``b.instr(row, *args)``, ``b.const(value, t)``)::

    lower_floordiv(b, "s32", False, x, y)       # NumPy's // on s32 values, as table rows
    convert(b, "f32", "s32", x)                 # nx.s32(x): cvt.rzi.s32.f32

A lowering is ``lower(b, t, fastmath, *operands)``; ``t`` is the operand type name. The operation
table (numptx/dsl/ops.py) names one per operation; mathlib sequences are reached through
:func:`mathlib_lowering`. :func:`convert` (graph) and :func:`np_convert` (NumPy) are the two
halves of ``nx.<type>(value)``.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .. import semantics as S
from ..instructions import TABLE
from ..valuetypes import BY_NAME, FLOATS, INTS
from . import types as T
from .modes import MODES
from .proxy import PrecisionError, TraceError, user_frame

__all__ = ["arith", "select", "convert", "np_convert", "via32", "fmod_seq", "bits_type",
           "mathlib_functions", "mathlib_lowering", "is_mathlib_lowering", "binary_arith",
           "unary_row", "cmp_lowering", "lower_neg", "lower_abs", "lower_floordiv", "lower_mod",
           "lower_fmod", "lower_pow", "lower_minmax", "lower_clip", "round_mode", "lower_sign",
           "lower_shift", "lower_bits", "lower_test", "lower_rsqrt", "lower_copysign", "MODES"]

_F16 = ("f16", "bf16")
_INF = float("inf")


_ARITH_FAST = {  # (op, type) -> row, fastmath
    ("add", "f32"): "add.ftz.f32", ("sub", "f32"): "sub.ftz.f32", ("mul", "f32"): "mul.ftz.f32",
    ("div", "f32"): "div.approx.ftz.f32", ("sqrt", "f32"): "sqrt.approx.ftz.f32",
    ("rcp", "f32"): "rcp.approx.ftz.f32", ("fma", "f32"): "fma.rn.ftz.f32",
    ("add", "f64"): "add.f64", ("sub", "f64"): "sub.f64", ("mul", "f64"): "mul.f64",
}
_ARITH: dict = {}  # (op, type, mode) -> row
for _t in ("f32", "f64", *_F16):
    for _o in ("add", "sub", "mul", "fma") + (("div", "sqrt", "rcp") if _t[0] == "f" and
                                               _t != "f16" else ()):
        for _fm in MODES:
            _ARITH[(_o, _t, _fm)] = _ARITH_FAST.get((_o, _t), f"{_o}.rn.{_t}") \
                if _fm == "fast" else f"{_o}.rn.{_t}"
# cuda: the contractible rows; numptx/dsl/contract.py fuses them by NVRTC's rule after tracing
# and turns the rest into .rn, so ptxas contracts nothing else
for _t in ("f32", "f64"):
    for _o in ("add", "sub", "mul"):
        _ARITH[(_o, _t, "cuda")] = f"{_o}.{_t}"
for _t in ("s32", "u32", "s64", "u64"):
    for _fm in MODES:
        _ARITH.update({("add", _t, _fm): f"add.{_t}", ("sub", _t, _fm): f"sub.{_t}",
                       ("mul", _t, _fm): f"mul.lo.{_t}", ("fma", _t, _fm): f"mad.lo.{_t}"})
del _t, _o, _fm

def arith(b, op: str, t: str, fm: str, *xs):
    """``b.instr`` of the row for arithmetic ``op`` on type ``t`` in math mode ``fm``."""
    return b.instr(_ARITH[(op, t, fm)], *xs)


def _is_float(t: str) -> bool:
    return t[0] == "f" or t == "bf16"


_BITS_TYPE = {t: f"b{BY_NAME[t].bits}" for t in FLOATS + INTS}


def bits_type(t: str) -> str:
    """The bit type of ``t``'s width (f32 -> b32): bitwise rows and bitcasts go through it."""
    return _BITS_TYPE[t]


def _bitwise(b, row: str, t: str, *xs):
    """A b32/b64 row on s/u values: reinterpret, apply, reinterpret back (mov.b, free)."""
    bt = bits_type(t)
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


def via32(lower):
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
def lower_neg(b, t, fm, x):
    if t[0] == "u":
        return b.instr(f"sub.{t}", b.const(0, t), x)
    return b.instr(f"neg.{t}", x)


def lower_abs(b, t, fm, x):
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


def lower_floordiv(b, t, fm, x, y):
    return (_float_divmod if _is_float(t) else _int_divmod)(b, t, x, y)[0]


def lower_mod(b, t, fm, x, y):
    return (_float_divmod if _is_float(t) else _int_divmod)(b, t, x, y)[1]


def lower_fmod(b, t, fm, x, y):
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


def lower_pow(b, t, fm, x, y):
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
    if n is not None and POW_BY_MULTIPLICATION[0] <= n <= POW_BY_MULTIPLICATION[1]:
        if n == 0:
            return b.const(1.0, t)
        if n > 0:
            return _square_and_multiply(b, t, fm, x, n)     # np.power(x, 2) is x*x too
        return _negative_power(b, t, fm, x, -n)
    return mathlib_lowering("pow")(b, t, fm, x, y)


#: the constant integer exponents lowered by multiplications (repeated squaring, then one
#: division for n < 0), the range whose error stays within pow's documented 4 ulp: each product
#: rounds once, so x**6 = x4*x2 errs by at most 0.5 + m6 (3/m2 + 1/m4) / 2 ulp to first order
#: (m the mantissas of the partial powers): <= 3.51 ulp; n = -4 <= 3.5; n = 7 and n = -5 can
#: pass 4. Measured over every f32 of [1, 2) (each binade alike): 1.90 (n = 4), 2.92 (5),
#: 3.44 (6), 3.38 (-4) ulp from the exact power (docs/dsl.md, "Differences from NumPy").
POW_BY_MULTIPLICATION = (-4, 6)


#: per type, the power of two ``2^E`` whose k-th root scales ``x`` before ``x ** -k`` (half the
#: exponent range: every partial power of a scaled ``x`` whose result is representable is normal)
_RANGE_BITS = {"f32": 64, "f64": 512}


def _negative_power(b, t, fm, x, k: int):
    """``x ** -k`` (1 <= k <= 4) as ``2^(+-jk) / (x 2^(-+j))^k``, ``j = E // k``: the powers of
    two are exact, so the quotient rounds once, and ``(x 2^-+j)^k`` stays normal wherever
    ``x ** -k`` is representable (``1 / x**k`` overflowed to 0, or lost precision in a subnormal
    ``x**k``, where ``x ** -k`` is a subnormal or near the top of the range). Four instructions
    more than ``1 / x**k`` (abs, setp, two selp, mul; ptxas folds the abs)."""
    one = b.const(1.0, t)
    if k == 1 or t not in _RANGE_BITS:
        return arith(b, "div", t, fm, one, _square_and_multiply(b, t, fm, x, k))
    j = _RANGE_BITS[t] // k
    nodes = getattr(b, "nodes", None)
    start = 0 if nodes is None else len(nodes)
    big = b.instr(f"setp.ge.{t}", b.instr(f"abs.{t}", x), one)
    scale = b.instr(f"selp.{t}", b.const(2.0 ** -j, t), b.const(2.0 ** j, t), big)
    num = b.instr(f"selp.{t}", b.const(2.0 ** (-j * k), t), b.const(2.0 ** (j * k), t), big)
    if nodes is not None:       # the scales are the formula's shape, as mathlib's constants are:
        lib = [n.key for n in nodes[start:] if n.op == "const"]    # numptx.jit.compile.patch keeps them
        if lib:
            if getattr(b, "library", None) is None:
                b.library = set()
            b.library.update(lib)
    xs = arith(b, "mul", t, fm, x, scale)
    return arith(b, "div", t, fm, num, _square_and_multiply(b, t, fm, xs, k))


def _square_and_multiply(b, t, fm, x, n: int):
    """``x ** n`` for ``n >= 1``: ``x2 = x*x, x4 = x2*x2, ...`` and the product of the squares
    ``n``'s bits name (n = 6: x2, x4, x4*x2: three multiplications)."""
    acc, base = None, x
    while n:
        if n & 1:
            acc = base if acc is None else arith(b, "mul", t, fm, acc, base)
        n >>= 1
        if n:
            base = arith(b, "mul", t, fm, base, base)
    return acc


def lower_minmax(which: str, nan_propagating: bool):
    def lower(b, t, fm, x, y):
        r = b.instr(f"{which}.{t}", x, y)
        if nan_propagating and _is_float(t):
            r = b.instr(f"selp.{t}", arith(b, "add", t, "accurate", x, y), r,
                        b.instr(f"setp.nan.{t}", x, y))
        return r
    return lower


def lower_clip(b, t, fm, x, lo, hi):
    mx, mn = lower_minmax("max", True), lower_minmax("min", True)
    return mn(b, t, fm, mx(b, t, fm, x, lo), hi)


def round_mode(mode: str):
    def lower(b, t, fm, x):
        return b.instr(f"cvt.{mode}.{t}.{t}", x) if _is_float(t) else x
    return lower


def lower_sign(b, t, fm, x):
    zero, one = b.const(0, t), b.const(1, t)
    if t[0] == "u":
        return b.instr(f"selp.{t}", one, zero, b.instr(f"setp.ne.{t}", x, zero))
    s = b.instr(f"selp.{t}", one, zero, b.instr(f"setp.gt.{t}", x, zero))
    s = b.instr(f"selp.{t}", b.const(-1, t), s, b.instr(f"setp.lt.{t}", x, zero))
    return b.instr(f"selp.{t}", x, s, _isnan(b, t, x)) if _is_float(t) else s


def lower_shift(direction: str):
    def lower(b, t, fm, x, n):
        if t[1:] == "64":       # clamp a 64-bit amount before it becomes the u32 operand
            n64 = n if t == "u64" else b.instr("cvt.u64.s64", n)
            n = b.instr("cvt.u32.u64", b.instr("min.u64", n64, b.const(64, "u64")))
        elif t == "s32":
            n = b.instr("cvt.u32.s32", n)
        if direction == "shl":
            bt = bits_type(t)
            return b.instr(f"bitcast.{t}.{bt}", b.instr(f"shl.{bt}", b.instr(f"bitcast.{bt}.{t}", x), n))
        return b.instr(f"shr.{t}", x, n)
    return lower


def lower_bits(row: str):
    def lower(b, t, fm, *xs):
        if t == "pred":
            return b.instr(f"{row}.pred", *xs)
        return _bitwise(b, row, t, *xs)
    return lower


def lower_test(which: str):
    def lower(b, t, fm, x):
        if not _is_float(t):
            return b.const(which == "isfinite", "pred")
        if which == "isnan":
            return _isnan(b, t, x)
        cc = "eq" if which == "isinf" else "lt"
        return b.instr(f"setp.{cc}.{t}", b.instr(f"abs.{t}", x), b.const(_INF, t))
    return lower


def lower_rsqrt(b, t, fm, x):
    if fm == "fast" and t == "f32":
        return b.instr("rsqrt.approx.ftz.f32", x)
    if fm == "cuda" and t == "f32":                 # CUDA's rsqrtf
        return b.instr("rsqrt.approx.f32", x)
    return arith(b, "div", t, "accurate", b.const(1.0, t), arith(b, "sqrt", t, "accurate", x))


# ---- mathlib ----------------------------------------------------------------------------------
def mathlib_functions() -> dict:
    """``numptx.dsl.mathlib.FUNCTIONS``: name -> (fn(b, *x, dtype, fastmath), arity, reference)."""
    from . import mathlib          # on first use: mathlib's constants cost import time
    return mathlib.FUNCTIONS


def mathlib_lowering(name: str) -> Callable:
    """Lower through mathlib's sequence ``name`` in the math mode (f32/f64; f16/bf16 arrive as
    f32): :func:`numptx.dsl.mathlib.implementation` picks it."""
    def lower(b, t, fm, *xs):
        from . import mathlib
        impl = mathlib.implementation(name, t, fm)
        if impl is None:
            have = [m for m in MODES if mathlib.implementation(name, t, m) is not None]
            raise PrecisionError(
                f"nx.{name} has no {t} implementation in precision {fm!r} (fastmath=True is "
                f"'fast'); {t} has: {', '.join(map(repr, have))}", frame=user_frame(),
                fix=f"use @nx.ptx_expr(precision={have[0]!r}) for {t} values, or compute "
                    f"this function in f32")
        nodes = getattr(b, "nodes", None)
        if nodes is None:                   # an eager builder
            return impl(b, *xs)
        start = len(nodes)
        r = impl(b, *xs)
        # the constants the sequence brought in: part of a formula's shape, not the user's
        # (numptx.jit.compile.patch varies only the user's constants between variants)
        lib = [n.key for n in nodes[start:] if n.op == "const"]
        if lib:
            if getattr(b, "library", None) is None:
                b.library = set()
            b.library.update(lib)
        return r
    lower.__name__ = f"mathlib_{name}"
    return lower


def is_mathlib_lowering(lower: Callable) -> bool:
    """Whether ``lower`` (possibly wrapped by :func:`via32`) runs a mathlib sequence."""
    return getattr(lower, "__name__", "").startswith("mathlib_")



def binary_arith(op):
    rows = {(t, fm): r for (o, t, fm), r in _ARITH.items() if o == op}

    def lower(b, t, fm, x, y):
        return b.instr(rows[t, fm], x, y)
    lower.__name__ = op
    return lower


def unary_row(prefix: str):
    def lower(b, t, fm, x):
        return arith(b, prefix, t, fm, x)
    return lower


def cmp_lowering(cc):
    def lower(b, t, fm, x, y):
        return _cmp(b, cc, t, x, y)
    return lower


def lower_copysign(b, t, fm, x, y):
    return b.instr(f"copysign.{t}", y, x)       # PTX: copysign d, a, b = b with the sign of a


# ---- casts in NumPy ---------------------------------------------------------------------------
def np_convert(a: np.ndarray, src: T.DType, dst: T.DType) -> np.ndarray:
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
