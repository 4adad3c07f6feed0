"""The math sequences: one function per DSL math operation, registered with :func:`sequence`.

A sequence is ``fn(b, x, *, dtype, fastmath)`` (binary ones ``fn(b, x, y, ...)``) written against
the builder protocol (``b.instr``/``b.const``, docs/design/dsl.md)::

    @sequence(np.exp, fast=True)          # NumPy reference; fast: an f32 .approx form exists
    def exp(b, x, *, dtype: str = "f32", fastmath: bool = False):
        ...                               # b.instr(...) / b.const(...) calls, or Ops(b, dtype)

The decorator is the registration: :data:`FUNCTIONS` (name, arity, reference) and
:data:`FAST_FORMS` are built from it, and the DSL operation table (numptx/dsl/ops.py) lowers an
op through ``FUNCTIONS[name]``. The methods are summarised in the package docstring.
"""
from __future__ import annotations

import inspect
from typing import Callable

import numpy as np

from .core import CONST, EXACT, LN2, Ops

__all__ = ["FUNCTIONS", "FAST_FORMS", "sequence"]    # + every registered sequence (below)

_INF = float("inf")
_NAN = float("nan")

FUNCTIONS: dict[str, tuple[Callable, int, Callable]] = {}
"""DSL name -> (implementation, arity, NumPy reference), in definition order."""

_FAST: set = set()


def sequence(reference: Callable, *, fast: bool = False) -> Callable[[Callable], Callable]:
    """Register the decorated sequence under its name: its arity is the number of value
    parameters after the builder; ``reference`` is the NumPy function it approximates (tests
    and benchmarks/accuracy_dsl.py measure against it); ``fast``: its f32 ``fastmath=True``
    form uses ``.approx`` rows."""
    def register(fn: Callable) -> Callable:
        params = inspect.signature(fn).parameters.values()
        arity = sum(p.kind is p.POSITIONAL_OR_KEYWORD for p in params) - 1
        FUNCTIONS[fn.__name__] = (fn, arity, reference)
        __all__.append(fn.__name__)
        if fast:
            _FAST.add(fn.__name__)
        return fn
    return register


def _np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _np_rsqrt(x):
    return 1 / np.sqrt(x)


def _np_rcp(x):
    return 1 / x


# ================================================================== exponentials
# clamps keep k = rint(x log2 e) inside the two-step scaling range; beyond them the result is
# inf or 0 anyway (NaN passes through the selp clamps)
_EXP_CLAMP = {"f32": (-105.0, 89.5), "f64": (-746.0, 711.0)}
_EXP2_CLAMP = {"f32": (-152.0, 130.0), "f64": (-1080.0, 1030.0)}
_EXPM1_CLAMP = {"f32": (-18.0, 89.0), "f64": (-40.0, 710.0)}
_EXPM1_TINY = {"f32": 2.0 ** -25, "f64": 2.0 ** -54}   # below: expm1(x) rounds to x


def _reduce_ln2(o: Ops, x):
    """(kf, r, rl): kf = rint(x log2 e), r + rl = x - kf ln2 (the first fma is exact, rl is
    the rounding error of the second)."""
    kf = o.rint(o.mul(x, o.K["LOG2E"]))
    l1, l2 = o.K["LN2_EXP"]
    r1 = o.fma(kf, -l1, x)
    r = o.fma(kf, -l2, r1)
    return kf, r, o.fma(kf, -l2, o.sub(r1, r))


def _one_plus(o: Ops, v, lo):
    """1 + v + lo for |v| < 1 and a small lo, with one significant rounding: the rounding
    error of 1 + v is recovered exactly (Fast2Sum) and added to lo."""
    h = o.add(1.0, v)
    return o.add(h, o.add(o.add(o.sub(1.0, h), v), lo))


def _exp_parts(o: Ops, x, kadj: int):
    """(h, l, k): e^x * 2^kadj = (h + l) 2^k with h = RN(1 + r) and l the rest (|l| < 0.07):
    e^r = 1 + r + (r^2 P(r) + rl)."""
    lo, hi = _EXP_CLAMP[o.t]
    xc, _, _ = o.clamp(x, lo, hi)
    kf, r, rl = _reduce_ln2(o, xc)
    tail = o.fma(o.mul(r, r), o.horner(r, o.C("exp")), rl)
    h = o.add(1.0, r)
    l = o.add(o.add(o.sub(1.0, h), r), tail)                       # Fast2Sum: |r| < 1
    k = o.f2i(kf)
    return h, l, (o.iadd(k, kadj) if kadj else k)


def _exp_core(o: Ops, x, kadj: int = 0):
    """e^x * 2^kadj (kadj in {0, -1}) for any x, rounded once; NaN -> NaN."""
    h, l, k = _exp_parts(o, x, kadj)
    return o.scale(o.add(h, l), k)


def _exp_dw(o: Ops, a, kadj: int = 0):
    """e^a 2^kadj as an unevaluated sum (hi, lo), |lo| <= ulp(hi) (hi overflows to inf
    past the threshold while lo stays finite)."""
    h, l, k = _exp_parts(o, a, kadj)
    hh = o.add(h, l)
    l = o.add(o.sub(h, hh), l)                                      # Fast2Sum: |h| >= |l|
    h = hh
    k1 = o.i("shr.s32", k, o.ci(1, "u32"))
    s1, s2 = o.pow2(k1), o.pow2(o.isub(k, k1))
    return o.mul(o.mul(h, s1), s2), o.mul(o.mul(l, s1), s2)


def _expm1_core(o: Ops, x):
    """e^x - 1 for |x| >= 2^-25 (2^-54 for f64), any sign; NaN -> NaN."""
    lo, hi = _EXPM1_CLAMP[o.t]
    xc, _, _ = o.clamp(x, lo, hi)
    kf, r, rl = _reduce_ln2(o, xc)
    tail = o.fma(o.mul(r, r), o.horner(r, o.C("expm1")), rl)      # e^r - 1 = r + tail
    k = o.f2i(kf)
    s = o.pow2(o.isub(k, 1))                                        # 2^(k-1)
    big = o.i("setp.gt.s32", k, o.ci(o.MANT + 1))                  # s - 1/2 inexact
    u = o.sel(s, o.sub(s, 0.5), big)
    v = o.mul(s, r)                                                 # exact
    h = o.add(u, v)
    lo = o.fma(s, tail, o.sel(-0.5, 0.0, big))
    t = o.add(h, o.add(o.add(o.sub(u, h), v), lo))                 # Fast2Sum: |u| >= |v|
    return o.add(t, t)                                              # (2^k (1 + r + tail) - 1)


def _exp2_poly(o: Ops, r):
    """2^r for |r| <= 1/2 + tiny: 1 + r ln2 + r^2 P(r), r ln2 as an exact product plus the low
    part of ln2."""
    c0, c0l = o.K["LN2_EXP"]
    m = o.mul(r, c0)
    ml = o.fma(r, c0, o.neg(m))
    lo = o.fma(o.mul(r, r), o.horner(r, o.C("exp2")), o.fma(r, c0l, ml))
    return _one_plus(o, m, lo)


def _div_dw(o: Ops, num, den, denl, numl=None):
    """(num + numl) / (den + denl) for small numl, denl, nearly correctly rounded:
    q = num * rcp(den), then one correction with the exact remainder."""
    inv = o.rcp(den)
    q = o.mul(num, inv)
    rho = o.fma(q, o.neg(denl), o.fma(q, o.neg(den), num))  # num - q (den + denl)
    if numl is not None:
        rho = o.add(rho, numl)
    return o.fma(rho, inv, q)


def _f32_fast(fastmath: bool, dtype: str) -> bool:
    return fastmath and dtype == "f32"


def _ex2_fast(b, v):
    return b.instr("ex2.approx.ftz.f32", v)


def _mulf(b, a, c: float):
    return b.instr("mul.rn.ftz.f32", a, b.const(c, "f32"))


@sequence(np.exp, fast=True)
def exp(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """e^x."""
    if _f32_fast(fastmath, dtype):
        return _ex2_fast(b, _mulf(b, x, CONST["f32"]["LOG2E"]))
    return _exp_core(Ops(b, dtype), x)


@sequence(np.exp2, fast=True)
def exp2(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """2^x."""
    if _f32_fast(fastmath, dtype):
        return _ex2_fast(b, x)
    o = Ops(b, dtype)
    lo, hi = _EXP2_CLAMP[o.t]
    xc, _, _ = o.clamp(x, lo, hi)
    kf = o.rint(xc)
    r = o.sub(xc, kf)                                               # exact
    return o.scale(_exp2_poly(o, r), o.f2i(kf))


@sequence(np.expm1)
def expm1(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """e^x - 1 (no fast form: the accurate sequence in both modes)."""
    o = Ops(b, dtype)
    res = _expm1_core(o, x)
    return o.sel(x, res, o.cmp("lt", o.abs(x), _EXPM1_TINY[o.t]))

# ==================================================================== logarithms


def _log1p_reduced(o: Ops, f):
    """log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1] as (hi, lo or None).
    f32: f - f^2/2 + f^3 P(f). f64: 2s + s^3 P(s^2), s = f / (2 + f) plus its rounding error
    (s + sl = f / (2 + f) to about 2^-100)."""
    if not o.f64:
        u = o.fma(f, o.horner(f, o.C("log1p")), -0.5)
        return f, o.mul(o.mul(f, f), u)
    d = o.add(2.0, f)
    s = o.div(f, d)
    rr = o.fma(s, o.neg(d), f)                          # f - s d, exact
    rr = o.fma(s, o.sub(o.sub(d, 2.0), f), rr)          # - s (2 + f - d)
    sl = o.mul(rr, o.fma(s, -0.5, 0.5))                # / (2 + f) = (1 - s) / 2
    z = o.mul(s, s)
    lo = o.fma(o.mul(z, s), o.horner(z, o.C("atanh")), o.add(sl, sl))
    return o.add(s, s), lo


def _log_combine(o: Ops, ef, ph, pl, base):
    """log_base(2^ef * (1 + f)) from log(1 + f) = ph + pl (pl may be None)."""
    if base == "e":
        h1, h2 = o.K["LN2_LOG"]
        a = o.mul(ef, h1)                                   # exact
        hi = o.add(a, ph)
        err = o.add(o.sub(a, hi), ph)                       # Fast2Sum: |a| >= |ph| or a = 0
        lo = o.fma(ef, h2, err if pl is None else o.add(err, pl))
        return o.add(hi, lo)
    ch, cl = o.K["LOG2E_2"] if base == 2 else o.K["LOG10E_2"]
    m = o.mul(ph, ch)
    ml = o.fma(ph, cl, o.fma(ph, ch, o.neg(m)))         # ph * c - m
    if pl is not None:
        ml = o.fma(pl, ch, ml)
    if base == 2:
        a = ef
    else:
        g1, g2 = o.K["LG2_LOG"]
        a = o.mul(ef, g1)                                   # exact
    hi = o.add(a, m)
    lo = o.add(o.add(o.sub(a, hi), m), ml)
    if base == 10:
        lo = o.fma(ef, g2, lo)
    return o.add(hi, lo)


def _log_any(b, x, dtype, base):
    o = Ops(b, dtype)
    a, shift = o.prescale(x)
    e, m = o.frexp_sqrt2(a)
    ef = o.i2f(o.isub(e, shift))
    ph, pl = _log1p_reduced(o, o.sub(m, 1.0))
    res = _log_combine(o, ef, ph, pl, base)
    res = o.sel(res, x, o.cmp("lt", x, _INF))              # +inf, NaN -> x
    res = o.sel(_NAN, res, o.cmp("lt", x, 0.0))
    return o.sel(-_INF, res, o.cmp("eq", x, 0.0))


def _lg2_fast(b, x, scale: float | None):
    v = b.instr("lg2.approx.ftz.f32", x)
    return v if scale is None else _mulf(b, v, scale)


@sequence(np.log, fast=True)
def log(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """Natural logarithm."""
    if _f32_fast(fastmath, dtype):
        return _lg2_fast(b, x, float(np.float32(float(LN2))))
    return _log_any(b, x, dtype, "e")


@sequence(np.log2, fast=True)
def log2(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """Base-2 logarithm."""
    if _f32_fast(fastmath, dtype):
        return _lg2_fast(b, x, None)
    return _log_any(b, x, dtype, 2)


@sequence(np.log10, fast=True)
def log10(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """Base-10 logarithm."""
    if _f32_fast(fastmath, dtype):
        return _lg2_fast(b, x, float(np.float32(float(LN2 / EXACT["ln10"]))))
    return _log_any(b, x, dtype, 10)


@sequence(np.log1p)
def log1p(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """log(1 + x) (no fast form): u = 1 + x is split as 2^e m; f = x when e = 0, else
    m - 1 plus the rounding error of 1 + x scaled by 2^-e / m."""
    o = Ops(b, dtype)
    u = o.add(x, 1.0)
    c = o.sub(x, o.sub(u, 1.0))                             # 1 + x = u + c
    e, m = o.frexp_sqrt2(u)
    e0 = o.i("setp.eq.s32", e, o.ci(0))
    f = o.sel(x, o.sub(m, 1.0), e0)
    ne = o.i("max.s32", o.i("neg.s32", e), o.ci(2 - o.BIAS))
    cs = o.mul(c, o.pow2(ne))
    corr = o.mul(cs, o.fma(f, o.sub(f, 1.0), 1.0))         # c 2^-e / (1 + f)
    corr = o.sel(0.0, corr, e0)
    ph, pl = _log1p_reduced(o, f)
    pl = corr if pl is None else o.add(pl, corr)
    res = _log_combine(o, o.i2f(e), ph, pl, "e")
    res = o.sel(res, x, o.cmp("lt", x, _INF))
    res = o.sel(_NAN, res, o.cmp("lt", x, -1.0))
    res = o.sel(-_INF, res, o.cmp("eq", x, -1.0))
    return o.sel(x, res, o.cmp("lt", o.abs(x), _EXPM1_TINY[o.t]))  # log1p(x) = x, keeps -0

# ================================================================== trigonometry


def _trig_reduce(o: Ops, x):
    """(r, rl, k): r + rl = x - k pi/2 with k = rint(x 2/pi) as s32. Three-part Cody-Waite:
    x - k p1 is exact (fma), k p2 is split exactly (mul + fma) and added with 2Sum, k p3 goes
    into the low part."""
    kf = o.rint(o.mul(x, o.K["TWO_OVER_PI"]))
    p1, p2, p3 = o.K["PIO2_3"]
    r1 = o.fma(kf, -p1, x)
    th = o.mul(kf, -p2)
    tl = o.fma(kf, p2, th)                                  # -(the rounding error of th)
    r = o.add(r1, th)
    bb = o.sub(r, r1)
    e = o.add(o.sub(r1, o.sub(r, bb)), o.sub(th, bb))       # 2Sum
    rl = o.fma(kf, -p3, o.sub(e, tl))
    # |r| <= 0.9 inside the accurate range; beyond it keep r bounded (inf/NaN x: NaN in rl)
    r = o.i(f"max.{o.t}", o.i(f"min.{o.t}", r, o.c(0.9)), o.c(-0.9))
    if o.f64:                                               # quadrant from the low 32 bits
        k = o.i("cvt.s32.s64", o.i("cvt.rni.s64.f64", kf))
    else:
        k = o.f2i(kf)
    return r, rl, k


def _sin_parts(o: Ops, r, rl, z, h):
    """sin(r + rl) = r + (r^3 S(z) + rl (1 - r^2/2)) as (r, tail), h = z/2."""
    return r, o.fma(o.mul(z, r), o.horner(z, o.C("sin")), o.fma(h, o.neg(rl), rl))


def _cos_parts(o: Ops, r, rl, z, h):
    """cos(r + rl) = (1 - h) + (z^2 C(z) - r rl) as (w, tail), w = RN(1 - h)."""
    w = o.sub(1.0, h)
    tail = o.fma(o.mul(z, z), o.horner(z, o.C("cos")), o.sub(o.sub(1.0, w), h))
    return w, o.fma(r, o.neg(rl), tail)


def _sin_poly(o: Ops, r, rl, z, h):
    return o.add(*_sin_parts(o, r, rl, z, h))


def _cos_poly(o: Ops, r, rl, z, h):
    return o.add(*_cos_parts(o, r, rl, z, h))


def _sin_cos(b, x, dtype, shift: int):
    o = Ops(b, dtype)
    r, rl, k = _trig_reduce(o, x)
    if shift:
        k = o.iadd(k, shift)                                # cos x = sin(x + pi/2)
    z = o.mul(r, r)
    h = o.mul(z, 0.5)
    res = o.sel(_cos_poly(o, r, rl, z, h), _sin_poly(o, r, rl, z, h), o.bit_set(k, 0))
    res = o.sel(o.neg(res), res, o.bit_set(k, 1))
    # beyond the accurate range (|r| > 0.9) the value is meaningless: keep it in [-1, 1]
    res, _, _ = o.clamp(res, -1.0, 1.0)
    return res if shift else o.sel(x, res, o.cmp("eq", x, 0.0))     # sin(-0) = -0


@sequence(np.sin, fast=True)
def sin(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """sin x (x in radians)."""
    if _f32_fast(fastmath, dtype):
        return b.instr("sin.approx.ftz.f32", x)
    return _sin_cos(b, x, dtype, 0)


@sequence(np.cos, fast=True)
def cos(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """cos x (x in radians)."""
    if _f32_fast(fastmath, dtype):
        return b.instr("cos.approx.ftz.f32", x)
    return _sin_cos(b, x, dtype, 1)


@sequence(np.tan, fast=True)
def tan(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """tan x = sin r / cos r (even quadrant) or -cos r / sin r (odd)."""
    if _f32_fast(fastmath, dtype):
        return b.instr("div.approx.ftz.f32", b.instr("sin.approx.ftz.f32", x),
                       b.instr("cos.approx.ftz.f32", x))
    o = Ops(b, dtype)
    r, rl, k = _trig_reduce(o, x)
    z = o.mul(r, r)
    h = o.mul(z, 0.5)
    sh, sl = _sin_parts(o, r, rl, z, h)
    ch, cl = _cos_parts(o, r, rl, z, h)
    s = o.add(sh, sl)
    sl = o.add(o.sub(sh, s), sl)                            # Fast2Sum: |sh| >= |sl|
    c = o.add(ch, cl)
    cl = o.add(o.sub(ch, c), cl)
    odd = o.bit_set(k, 0)
    res = _div_dw(o, o.sel(o.neg(c), s, odd), o.sel(s, c, odd), o.sel(sl, cl, odd),
                  o.sel(o.neg(cl), sl, odd))
    return o.sel(x, res, o.cmp("eq", x, 0.0))

# ==================================================================== hyperbolic
_TANH_SMALL = {"f32": 0.55, "f64": 0.3}
_TANH_CLAMP = {"f32": 10.0, "f64": 20.0}


@sequence(np.tanh, fast=True)
def tanh(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """tanh x: an odd polynomial for small |x|, else t / (t + 2) with t = expm1(2|x|)."""
    if _f32_fast(fastmath, dtype):
        return b.instr("tanh.approx.f32", x)
    o = Ops(b, dtype)
    a = o.abs(x)
    z = o.mul(a, a)
    small = o.fma(o.mul(z, a), o.horner(z, o.C("tanh_" + o.t)), a)
    cap = _TANH_CLAMP[o.t]
    ac = o.sel(cap, a, o.cmp("gt", a, cap))
    t = _expm1_core(o, o.add(ac, ac))
    den = o.add(t, 2.0)
    bb = o.sub(den, t)
    denl = o.add(o.sub(t, o.sub(den, bb)), o.sub(2.0, bb))  # t + 2 = den + denl (2Sum)
    big = _div_dw(o, t, den, denl)
    return o.copysign(x, o.sel(small, big, o.cmp("lt", a, _TANH_SMALL[o.t])))


@sequence(np.sinh, fast=True)
def sinh(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """sinh x: an odd polynomial for |x| < 1, else h - 1/(4h) with h = e^|x| / 2."""
    o = Ops(b, dtype)
    a = o.abs(x)
    z = o.mul(a, a)
    small = o.fma(o.mul(z, a), o.horner(z, o.C("sinh")), a)
    if _f32_fast(fastmath, dtype):
        h = _ex2_fast(b, b.instr("fma.rn.ftz.f32", a, o.c(o.K["LOG2E"]), o.c(-1.0)))
        big = b.instr("sub.rn.ftz.f32", h, _mulf(b, b.instr("rcp.approx.ftz.f32", h), 0.25))
    else:
        h, hl = _exp_dw(o, a, -1)
        big = o.add(h, o.sub(hl, o.div(0.25, h)))
    return o.copysign(x, o.sel(small, big, o.cmp("lt", a, 1.0)))


@sequence(np.cosh, fast=True)
def cosh(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """cosh x = h + 1/(4h), h = e^|x| / 2."""
    if _f32_fast(fastmath, dtype):
        a = b.instr("abs.ftz.f32", x)
        h = _ex2_fast(b, b.instr("fma.rn.ftz.f32", a, b.const(CONST["f32"]["LOG2E"], "f32"),
                                 b.const(-1.0, "f32")))
        return b.instr("add.rn.ftz.f32", h, _mulf(b, b.instr("rcp.approx.ftz.f32", h), 0.25))
    o = Ops(b, dtype)
    h, hl = _exp_dw(o, o.abs(x), -1)
    return o.add(h, o.add(hl, o.div(0.25, h)))

# ==================================================================== arctangent


def _atan_off(o: Ops, v, vl, off_h, off_l):
    """off + atan(v + vl) for |v| <= 1 (vl tiny), off = off_h + off_l either 0 or >= pi/2:
    atan(v) = v + v^3 P(v^2), atan(v + vl) ~ atan(v) + vl (1 - v^2), Fast2Sum for off + v."""
    z = o.mul(v, v)
    vl = o.fma(z, o.neg(vl), vl)
    t = o.fma(o.mul(z, v), o.horner(z, o.C("atan")), o.add(off_l, vl))
    hi = o.add(off_h, v)
    err = o.add(o.sub(off_h, hi), v)                        # |off_h| >= |v| or off_h = 0
    return o.add(hi, o.add(err, t))


@sequence(np.arctan)
def arctan(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """arctan x (no fast form): v = |x| or -1/|x| (one division), v + vl exactly through the
    remainder, atan(v) by a polynomial on [-1, 1], plus pi/2 in two parts for |x| > 1; the
    sign of x at the end."""
    o = Ops(b, dtype)
    a = o.abs(x)
    big = o.cmp("gt", a, 1.0)
    a = o.sel(2.0 ** 60, a, o.cmp("gt", a, 2.0 ** 60))   # atan(a) = pi/2 - 1/a; inf -> 2^60
    v = o.div(o.sel(-1.0, a, big), o.sel(a, 1.0, big))
    vl = o.sel(o.mul(o.fma(v, a, 1.0), v), 0.0, big)      # -1/a - v (exact remainder / a)
    h1, h2 = o.K["PIO2_2"]
    res = _atan_off(o, v, vl, o.sel(h1, 0.0, big), o.sel(h2, 0.0, big))
    return o.copysign(x, res)

# ================================ pow, sigmoid, hypot, cbrt, rsqrt, rcp, arctan2
_POW_CLAMP = {"f32": (-155.0, 135.0), "f64": (-1080.0, 1030.0)}


def _log2_dw(o: Ops, ax):
    """log2(ax) for a positive finite ax as a double word (zh, zl), relative error ~2^-30 (f32)
    / 2^-62 (f64): log2 m = C1 (s + sl) + C3 s^3 + ..., s + sl = (m - 1) / (m + 1)."""
    a, shift = o.prescale(ax)
    e, m = o.frexp_sqrt2(a)
    ef = o.i2f(o.isub(e, shift))
    f = o.sub(m, 1.0)
    d = o.add(2.0, f)
    s = o.div(f, d)
    rr = o.fma(s, o.neg(d), f)
    rr = o.fma(s, o.sub(o.sub(d, 2.0), f), rr)
    sl = o.mul(rr, o.fma(s, -0.5, 0.5))
    z = o.mul(s, s)
    c1h, c1l = o.K["C1_POW"]
    ph = o.mul(s, c1h)
    pl = o.fma(sl, c1h, o.fma(s, c1l, o.fma(s, c1h, o.neg(ph))))   # C1 (s + sl) - ph
    # C3 (s + sl)^3 as a double word, the s^5 tail in working precision
    zl = o.fma(o.add(s, s), sl, o.fma(s, s, o.neg(z)))  # (s + sl)^2 - z
    s3 = o.mul(z, s)
    s3l = o.fma(z, sl, o.fma(zl, s, o.fma(z, s, o.neg(s3))))
    c3h, c3l = o.K["C3_POW"]
    t3 = o.mul(s3, c3h)
    t3l = o.fma(s3l, c3h, o.fma(s3, c3l, o.fma(s3, c3h, o.neg(t3))))
    tail = o.mul(o.mul(s3, z), o.horner(z, o.C("atanh52")))
    h2 = o.add(ph, t3)
    pl = o.add(pl, o.add(o.add(o.sub(ph, h2), t3), o.add(t3l, tail)))
    ph = h2
    zh = o.add(ef, ph)
    zl = o.add(o.add(o.sub(ef, zh), ph), pl)               # Fast2Sum: |ef| >= 1 > |ph| or ef = 0
    return zh, zl


@sequence(np.power, fast=True)
def pow(b, x, y, *, dtype: str = "f32", fastmath: bool = False):
    """x^y with the C99 / NumPy special cases. Fast form: ex2(y lg2 x) (no special cases: NaN
    for x < 0, as CUDA's __powf)."""
    if _f32_fast(fastmath, dtype):
        return _ex2_fast(b, b.instr("mul.rn.ftz.f32", y, b.instr("lg2.approx.ftz.f32", x)))
    o = Ops(b, dtype)
    ax = o.abs(x)
    zh, zl = _log2_dw(o, ax)
    wh = o.mul(y, zh)
    wl = o.fma(y, zl, o.fma(y, zh, o.neg(wh)))             # y (zh + zl) - wh
    lo, hi = _POW_CLAMP[o.t]
    whc, above, below = o.clamp(wh, lo, hi)                # beyond: 2^kf over/underflows
    wl = o.sel(0.0, wl, o.por(above, below))               # (and wl may be NaN from inf - inf)
    kf = o.rint(o.add(whc, wl))                             # (wh, wl) need not be normalized
    r = o.add(o.sub(whc, kf), wl)                           # whc - kf is exact
    res = o.scale(_exp2_poly(o, r), o.f2i(kf))
    # special cases (C99 Annex F, as np.power)
    zero, inf = o.cmp("eq", ax, 0.0), o.cmp("eq", ax, _INF)
    big = o.i("xor.pred", zero, o.cmp("gt", y, 0.0))      # 0^-y, inf^+y -> inf
    res = o.sel(o.sel(_INF, 0.0, big), res, o.por(zero, inf))
    res = o.sel(_NAN, res, o.cmp("nan", x, y))
    yint = o.cmp("eq", o.rint(y), y)
    negfin = o.pand(o.cmp("lt", x, 0.0), o.cmp("gt", x, -_INF))
    res = o.sel(_NAN, res, o.pand(negfin, o.i("not.pred", yint)))
    h = o.mul(y, 0.5)
    odd = o.pand(yint, o.cmp("ne", o.rint(h), h))
    res = o.sel(o.neg(res), res, o.pand(odd, o.signbit(x)))
    one = o.por(o.cmp("eq", y, 0.0), o.cmp("eq", x, 1.0))
    one = o.por(one, o.pand(o.cmp("eq", x, -1.0), o.cmp("eq", o.abs(y), _INF)))
    return o.sel(1.0, res, one)


@sequence(_np_sigmoid, fast=True)
def sigmoid(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """1 / (1 + e^-x), as e^-|x| over 1 + e^-|x| for x < 0 (no overflow, tiny results kept)."""
    if _f32_fast(fastmath, dtype):
        e = _ex2_fast(b, _mulf(b, x, -CONST["f32"]["LOG2E"]))
        return b.instr("rcp.approx.ftz.f32", b.instr("add.rn.ftz.f32", e, b.const(1.0, "f32")))
    o = Ops(b, dtype)
    e, el = _exp_dw(o, o.neg(o.abs(x)))
    pos = o.cmp("ge", x, 0.0)
    den = o.add(1.0, e)
    denl = o.add(o.add(o.sub(1.0, den), e), el)           # 1 + e + el = den + denl
    return _div_dw(o, o.sel(1.0, e, pos), den, denl, o.sel(0.0, el, pos))


@sequence(np.hypot)
def hypot(b, x, y, *, dtype: str = "f32", fastmath: bool = False):
    """sqrt(x^2 + y^2) without overflow (no fast form): both scaled by a power of two chosen
    from the larger magnitude; inf if either is inf (even with a NaN), else NaN if either is."""
    o = Ops(b, dtype)
    a, c = o.abs(x), o.abs(y)
    big = o.i(f"max.{o.t}", a, c)
    sml = o.i(f"min.{o.t}", a, c)
    th, sc = (500, 600) if o.f64 else (62, 100)
    up, down = o.cmp("lt", big, 2.0 ** -th), o.cmp("gt", big, 2.0 ** th)
    s = o.sel(2.0 ** -sc, o.sel(2.0 ** sc, 1.0, up), down)
    inv = o.sel(2.0 ** sc, o.sel(2.0 ** -sc, 1.0, up), down)
    bs, ss = o.mul(big, s), o.mul(sml, s)
    res = o.mul(o.sqrt(o.fma(bs, bs, o.mul(ss, ss))), inv)
    res = o.sel(_NAN, res, o.cmp("nan", x, y))
    return o.sel(_INF, res, o.por(o.cmp("eq", a, _INF), o.cmp("eq", c, _INF)))
_CBRT_OFF = {"f32": 180, "f64": 1200}                       # multiples of 3: e + OFF >= 0


@sequence(np.cbrt)
def cbrt(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """Cube root (no fast form): |x| = 2^(3q + j) m, Newton's iteration for (2^j m)^(-1/3)
    from a quadratic seed, then y = (2^j m) r^2 corrected once with the exact residual."""
    o = Ops(b, dtype)
    a = o.abs(x)
    a2, shift = o.prescale(a)                               # PRESCALE is a multiple of 3
    ia = o.bits(a2)
    e = o.isub(o.isub(o.narrow(o.wsar(ia, o.MANT)), o.BIAS), shift)
    mbits = o.wadd(o.wand(ia, (1 << o.MANT) - 1), o.BIAS << o.MANT)    # m in [1, 2)
    ep = o.iadd(e, _CBRT_OFF[o.t])
    q = o.i("cvt.s32.u32", o.i("mul.hi.u32", o.i("cvt.u32.s32", ep),
                                o.ci(0x55555556, "u32")))               # floor(ep / 3)
    j = o.i("mad.lo.s32", q, o.ci(-3), ep)                  # ep - 3q in {0, 1, 2}
    q = o.isub(q, _CBRT_OFF[o.t] // 3)
    mp = o.from_bits(o.wadd(mbits, o.wshl(o.wide(j), o.MANT)))          # 2^j m in [1, 8)
    seed = o.horner(o.from_bits(mbits), o.C("rcbrt"))
    d = o.sel(2.0 ** (-2 / 3), o.sel(2.0 ** (-1 / 3), 1.0, o.i("setp.eq.s32", j, o.ci(1))),
              o.i("setp.eq.s32", j, o.ci(2)))
    r = o.mul(seed, d)
    nmp = o.neg(mp)
    for _ in range(2 if o.f64 else 1):
        r2 = o.mul(r, r)
        eps = o.fma(nmp, o.mul(r2, r), 1.0)                 # 1 - mp r^3
        r = o.fma(o.mul(r, 1.0 / 3.0), eps, r)
    r2 = o.mul(r, r)
    yv = o.mul(mp, r2)
    yy = o.mul(yv, yv)
    ny = o.neg(yv)
    res = o.fma(ny, o.fma(yv, yv, o.neg(yy)), o.fma(ny, yy, mp))   # mp - y^3
    yv = o.fma(res, o.mul(r2, 1.0 / 3.0), yv)
    out = o.from_bits(o.wadd(o.bits(yv), o.wshl(o.wide(q), o.MANT)))
    ok = o.pand(o.cmp("gt", a, 0.0), o.cmp("lt", a, _INF))
    return o.sel(o.copysign(x, out), x, ok)


@sequence(_np_rsqrt, fast=True)
def rsqrt(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """1 / sqrt(x): div.rn of 1 by sqrt.rn (fast: rsqrt.approx.ftz)."""
    if _f32_fast(fastmath, dtype):
        return b.instr("rsqrt.approx.ftz.f32", x)
    o = Ops(b, dtype)
    return o.div(1.0, o.sqrt(x))


@sequence(_np_rcp, fast=True)
def rcp(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """1 / x: rcp.rn (fast: rcp.approx.ftz)."""
    if _f32_fast(fastmath, dtype):
        return b.instr("rcp.approx.ftz.f32", x)
    return Ops(b, dtype).rcp(x)


@sequence(np.arctan2)
def arctan2(b, y, x, *, dtype: str = "f32", fastmath: bool = False):
    """The angle of (x, y), as np.arctan2(y, x) (no fast form): v = min(|x|, |y|) /
    max(|x|, |y|) with its remainder, then off +- atan(v) with off in {0, pi/2, pi} by the
    octant, the sign of y at the end; C99 special cases (zeros and infinities) included."""
    o = Ops(b, dtype)
    a, c = o.abs(x), o.abs(y)
    swap = o.cmp("gt", c, a)
    num, den = o.sel(a, c, swap), o.sel(c, a, swap)
    # keep rcp(den) finite and normal: scale both by 2^-2 near the top, 2^64 near the bottom
    top = 2.0 ** (1021 if o.f64 else 125)
    s = o.sel(0.25, o.sel(2.0 ** 64, 1.0, o.cmp("lt", den, 4.0 / top)), o.cmp("gt", den, top))
    num, den = o.mul(num, s), o.mul(den, s)
    inv = o.rcp(den)
    v = o.mul(num, inv)
    vl = o.mul(o.fma(o.neg(v), den, num), inv)             # num/den - v
    ok = o.pand(o.cmp("gt", den, 0.0), o.cmp("lt", den, _INF))
    vl = o.sel(vl, 0.0, ok)
    v = o.sel(0.0, v, o.cmp("eq", den, 0.0))                # atan2(+-0, +-0): angle 0 or pi
    v = o.sel(1.0, v, o.cmp("eq", num, _INF))               # both infinite: pi/4 or 3pi/4
    xneg = o.signbit(x)
    flip = o.i("xor.pred", swap, xneg)                      # angle = off - atan(v)
    v, vl = o.sel(o.neg(v), v, flip), o.sel(o.neg(vl), vl, flip)
    h1, h2 = o.K["PIO2_2"]
    p1, p2 = 2 * h1, 2 * h2                                 # pi (exact doubling)
    off_h = o.sel(o.sel(h1, p1, swap), o.sel(h1, 0.0, swap), xneg)
    off_l = o.sel(o.sel(h2, p2, swap), o.sel(h2, 0.0, swap), xneg)
    res = o.copysign(y, _atan_off(o, v, vl, off_h, off_l))
    return o.sel(_NAN, res, o.cmp("nan", x, y))


FAST_FORMS = frozenset(_FAST)
"""Functions whose f32 ``fastmath=True`` form uses ``.approx`` rows (the others run the accurate
sequence in both modes)."""
