"""CUDA-speed forms of the exponentials and logarithms (f32), ``precision="cuda"``.

Each is the algorithm of CUDA's own single-precision function (what NVRTC emits for ``expf``,
``logf``, ... with default options), as table rows; CUDA's branches (special inputs) are
``selp``. So an injected formula has CUDA's instruction count, speed and error::

    from numptx.dsl.mathlib import EagerBuilder, implementation
    implementation("exp", "f32", "cuda")(EagerBuilder(), np.float32([1.0]))

* exp: ``k`` and ``2^k`` from one ``fma.rm`` on a saturated, scaled argument (the integer lands
  in the low mantissa bits of a 1.5*2^23 shifter), ``r = x log2 e - k`` in two fmas,
  ``ex2.approx.ftz(r) * 2^k``. exp2: ``ex2.approx``. sinh/cosh: the same reduction with
  ``k = trunc(|x| log2 e)`` and ``e^|x|/4``, combined with one ``div.approx``; a polynomial for
  ``|x| < 1`` (sinh). tanh: ``1 - 2/(e^2|x| + 1)`` with ``rcp.approx`` for ``|x| >= 0.6``, an odd
  polynomial below. sigmoid: ``1 / (1 + exp(-x))`` with IEEE division, as CUDA C++ writes it
  (0 below x = -88.72, where the true value is below 2^-126).
* expm1: the exp reduction with ``k`` from a 1.5*2^23 shifter, a polynomial for ``e^r - 1``,
  and ``2^k (p + 1) - 1`` arranged to cancel exactly.
* log, log2, log10: ``x = 2^e m`` with ``m`` in [2/3, 4/3) from an integer subtraction on the
  bits (subnormals pre-scaled by 2^23), a degree-9 polynomial in ``m - 1``; inf, NaN, negative
  and zero inputs through ``fma(x, inf, inf)`` and a ``selp``. log1p: the same with the
  reduction taken on ``1 + x`` rounded toward zero and the lost low part added back.

The approximate rows (``ex2.approx``, ``rcp.approx``, ``div.approx``) are emulated correctly
rounded from float64; the GPU's may differ by the bounds the PTX ISA documents (2 ulp for
``ex2``), so ``nx.emulate`` is within about 2 ulp of the GPU for exp, sinh, cosh, tanh and
sigmoid, and bit-exact for the logarithms (exact rows only). Measured error:
docs/dsl_accuracy.md.
"""
from __future__ import annotations

from .core import Ops
from .cuda_forms import cuda_form

__all__ = ["h32", "d64", "hi_f32", "add_hi", "EXP64_POLY", "exp64"]   # for cuda_f64.py

_INF = float("inf")


def h32(bits: int) -> float:
    """The f32 of an IEEE bit pattern (CUDA's constants are bit patterns)."""
    import struct
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _exp_scaled(o: Ops, x):
    """(e, s) with e^x = e * s: e = ex2.approx.ftz(r), s = 2^k from the shifter's bits."""
    t = o.i("cvt.sat.f32.f32", o.fma(x, h32(0x3BBB989D), 0.5))        # x log2(e)/256 + 1/2
    j = o.i("fma.rm.f32", t, o.c(252.0), o.c(h32(0x4B400001)))
    d = o.add(j, h32(0xCB40007F))                                     # k (as a float)
    r = o.fma(x, h32(0x3FB8AA3B), o.neg(d))                           # x log2 e - k, two parts
    r = o.fma(x, h32(0x32A57060), r)
    s = o.i("bitcast.f32.b32", o.i("shl.b32", o.i("bitcast.b32.f32", j), o.ci(23, "u32")))
    return o.i("ex2.approx.ftz.f32", r), s


@cuda_form("exp")
def exp(b, x, *, dtype):
    o = Ops(b, dtype)
    e, s = _exp_scaled(o, x)
    return o.i("mul.f32", e, s)          # contractible, as CUDA's: acc + exp(x) is one fma


def d64(bits: int) -> float:
    import struct
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


EXP64_POLY = tuple(d64(v) for v in (
    0x3FF0000000000000, 0x3FF0000000000000, 0x3FE000000000000B, 0x3FC5555555555511,
    0x3FA55555555502A1, 0x3F81111111122322, 0x3F56C16C1852B7AF, 0x3F2A01A014761F65,
    0x3EFA01997C89EB71, 0x3EC71DEE62401315, 0x3E928AF3FCA213EA, 0x3E5ADE1569CE2BDF))


def hi_f32(o: Ops, x):
    """The high word of an f64 as an f32 (CUDA compares |x| that way: one 32-bit compare)."""
    hi = o.i("cvt.u32.u64", o.i("shr.u64", o.i("bitcast.u64.b64", o.i("bitcast.b64.f64", x)),
                                 o.ci(32, "u32")))
    return o.i("bitcast.f32.b32", o.i("bitcast.b32.u32", hi))


def add_hi(o: Ops, v, w32):
    """``v`` (f64) with ``w32`` (u32) added to its high word: a scaling by a power of two."""
    t = o.i("shl.b64", o.i("bitcast.b64.u64", o.i("cvt.u64.u32", w32)), o.ci(32, "u32"))
    s = o.i("add.s64", o.i("bitcast.s64.b64", o.i("bitcast.b64.f64", v)),
            o.i("bitcast.s64.b64", t))
    return o.i("bitcast.f64.b64", o.i("bitcast.b64.s64", s))


@cuda_form("exp", dtypes=("f64",))
def exp64(b, x, *, dtype):
    """CUDA's ``exp``: k from a 1.5*2^52 shifter, a degree-11 polynomial, 2^k added to the
    exponent field; past |x| = 708.4 a two-step scaling (subnormal results, overflow) and
    past 746 the limits, selected branch-free."""
    o = Ops(b, dtype)
    j = o.fma(x, d64(0x3FF71547652B82FE), d64(0x4338000000000000))
    kf = o.add(j, d64(0xC338000000000000))
    r = o.fma(kf, d64(0xBFE62E42FEFA39EF), x)
    r = o.fma(kf, d64(0xBC7ABC9E3B39803F), r)
    p = o.horner(r, EXP64_POLY)
    k = o.i("cvt.u32.u64", o.i("bitcast.u64.b64", o.i("bitcast.b64.f64", j)))   # low word
    kb = o.i("bitcast.b32.u32", k)
    fast = add_hi(o, p, o.i("bitcast.u32.b32", o.i("shl.b32", kb, o.ci(20, "u32"))))
    ks = o.i("bitcast.s32.b32", kb)
    k1 = o.i("shr.s32", o.iadd(ks, o.i("bitcast.s32.b32", o.i("shr.b32", kb, o.ci(31, "u32")))),
             o.ci(1, "u32"))                                             # k / 2 toward 0
    shl20 = lambda v: o.i("bitcast.u32.b32", o.i("shl.b32", o.i("bitcast.b32.s32", v),  # noqa: E731
                                                  o.ci(20, "u32")))
    p1 = add_hi(o, p, shl20(k1))
    s2 = add_hi(o, o.c(1.0), shl20(o.isub(ks, k1)))                    # 2^(k - k1)
    two = o.mul(p1, s2)
    ax = o.i("abs.f32", hi_f32(o, x))
    lim = o.sel(0.0, o.add(x, float("inf")), o.cmp("lt", x, 0.0))       # 0, +inf or NaN
    slow = o.sel(two, lim, o.i("setp.lt.f32", ax, o.bd.const(h32(0x40874800), "f32")))
    return o.sel(fast, slow, o.i("setp.lt.f32", ax, o.bd.const(h32(0x4086232B), "f32")))


@cuda_form("exp2")
def exp2(b, x, *, dtype):
    return b.instr("ex2.approx.f32", x)


@cuda_form("sigmoid")
def sigmoid(b, x, *, dtype):
    # 1 / (1 + e^-x) as CUDA C++ writes it (the sum contracts into an fma): below x = -88.72
    # e^-x overflows and the result is 0 where the true value is a subnormal (< 2^-126)
    o = Ops(b, dtype)
    e, s = _exp_scaled(o, o.neg(x))
    return o.div(1.0, o.fma(e, s, 1.0))


def _exp_half(o: Ops, ax):
    """e^|x| / 4 for sinh and cosh (|x| up to the overflow threshold plus 2 binades)."""
    kf = o.i("cvt.rzi.f32.f32", o.mul(ax, h32(0x3FB8AA3B)))
    big = o.cmp("gt", o.abs(kf), 126.0)
    kf = o.sel(o.copysign(kf, o.c(126.0)), kf, big)
    r = o.fma(kf, h32(0xBF317218), ax)
    r = o.fma(kf, h32(0x3102E308), r)
    bits = o.i("bitcast.b32.f32", o.add(kf, h32(0x4B40007D)))          # 2^(k - 2)
    s = o.i("bitcast.f32.b32", o.i("shl.b32", bits, o.ci(23, "u32")))
    return o.mul(o.i("ex2.approx.ftz.f32", o.mul(r, h32(0x3FB8AA3B))), s)


@cuda_form("sinh")
def sinh(b, x, *, dtype):
    o = Ops(b, dtype)
    ax = o.abs(x)
    q = _exp_half(o, ax)
    big = o.fma(2.0, q, o.i("div.approx.ftz.f32", o.c(-0.125), q))   # e^|x|/2 - e^-|x|/2
    z = o.mul(x, x)
    p = o.horner(z, (h32(0x3E2AAAAB), h32(0x3C08889A), h32(0x394FFF49), h32(0x363D0ADA)))
    small = o.fma(o.mul(z, p), x, x)
    return o.sel(o.copysign(x, big), small, o.cmp("ge", ax, 1.0))


@cuda_form("cosh")
def cosh(b, x, *, dtype):
    o = Ops(b, dtype)
    q = _exp_half(o, o.abs(x))
    return o.fma(2.0, q, o.i("div.approx.ftz.f32", o.c(0.125), q))   # e^|x|/2 + e^-|x|/2


@cuda_form("tanh")
def tanh(b, x, *, dtype):
    o = Ops(b, dtype)
    ax = o.abs(x)
    e = o.i("ex2.approx.ftz.f32", o.mul(ax, h32(0x4038AA3B)))           # e^(2|x|)
    big = o.fma(o.i("rcp.approx.ftz.f32", o.add(e, 1.0)), -2.0, 1.0)
    big = o.copysign(x, o.sel(1.0, big, o.cmp("ge", ax, h32(0x41102CB4))))
    z = o.mul(x, x)
    # x + x z P(z), the last step an fma with +0 as CUDA has it: tanh(-0) = -0
    p = o.horner(z, (0.0, h32(0xBEAAA9ED), h32(0x3E085941), h32(0xBD563CAE), h32(0x3C80F082)))
    small = o.fma(p, x, x)
    return o.sel(big, small, o.cmp("ge", ax, h32(0x3F19999A)))


@cuda_form("expm1")
def expm1(b, x, *, dtype):
    o = Ops(b, dtype)
    lim = h32(0x42B17218)
    x = o.sel(o.copysign(x, o.c(lim)), x, o.cmp("gt", o.abs(x), lim))
    j = o.fma(x, h32(0x3FB8AA3B), h32(0x4B40007F))                       # 1.5*2^23 + 127 + k
    kf = o.add(j, h32(0xCB40007F))
    r = o.fma(o.neg(kf), h32(0x3F317217), x)
    r = o.fma(o.neg(kf), h32(0x3377D1CF), r)
    sb = o.i("shl.b32", o.i("bitcast.b32.f32", j), o.ci(23, "u32"))    # 2^k (2^(k-1) if k >= 25)
    k25 = o.cmp("ge", kf, 25.0)
    sb = o.i("selp.b32", o.i("bitcast.b32.s32", o.iadd(o.i("bitcast.s32.b32", sb), -8388608)),
             sb, k25)
    s = o.sel(0.0, o.i("bitcast.f32.b32", sb), o.cmp("eq", kf, -128.0))
    p = o.horner(r, (0.0, h32(0x3F000003), h32(0x3E2AAA59), h32(0x3D2AA9AF), h32(0x3C091356),
                     h32(0x3AB5B2C6)))
    p = o.fma(p, r, r)                                                   # e^r - 1
    res = o.fma(p, s, o.neg(o.sub(1.0, s)))                              # s (e^r - 1) + s - 1
    return o.sel(o.add(res, res), res, k25)


def _log_parts(o: Ops, x, poly: tuple, lg2: bool):
    """(log of the reduced argument plus e ln2 (or e for log2), the pre-scaled input)."""
    sub = o.cmp("lt", x, h32(0x00800000))
    xs = o.sel(o.mul(x, 8388608.0), x, sub)                             # subnormals: * 2^23
    eoff = o.sel(-23.0, 0.0, sub)
    ib = o.i("bitcast.s32.b32", o.i("bitcast.b32.f32", xs))
    shift = -1060439283 if lg2 else -1059760811                          # 2/3 in both
    e = o.i("and.b32", o.i("bitcast.b32.s32", o.iadd(ib, shift)), o.ci(-8388608 & 0xFFFFFFFF, "b32"))
    es = o.i("bitcast.s32.b32", e)
    m = o.from_bits(o.isub(ib, es))
    ef = o.fma(o.i2f(es), h32(0x34000000), eoff)                          # e (the bits / 2^23)
    f = o.add(m, -1.0)
    p = o.horner(f, poly)
    if lg2:
        q = o.fma(f, h32(0x3FB8AA3B), o.mul(f, o.mul(f, p)))
        r = o.add(ef, q)
    else:
        q = o.fma(o.mul(f, p), f, f)
        r = o.fma(ef, h32(0x3F317218), q)
    return r, xs, ib


def _log_special(o: Ops, r, xs, ib):
    """+inf, NaN and negative inputs: x * inf + inf (inf, NaN, NaN); zeros: -inf."""
    fin = o.i("setp.lt.u32", o.i("cvt.u32.s32", ib), o.ci(0x7F800000, "u32"))
    r = o.sel(r, o.fma(xs, _INF, _INF), fin)
    return r


_LOG_POLY = tuple(h32(v) for v in (0xBF000000, 0x3EAAAA78, 0xBE7FFF22, 0x3E4CED0B, 0xBE2AD8B9,
                                   0x3E0F2955, 0xBDF8CDCC, 0x3E1039F6, 0xBE055027))
_LOG2_POLY = tuple(h32(v) for v in (0xBF38AA3B, 0x3EF6384A, 0xBEB8AA49, 0x3E93BF99, 0xBE763C8B,
                                    0x3E520BF4, 0xBE374E43, 0x3E2FCF2A, 0xBE2C7F30, 0x3DC6B27F))


def _log_form(b, x, dtype, poly: tuple, lg2: bool, scale: float | None = None):
    """log / log2 (``lg2``) / log10 (``scale``: times log10(e), contractible as CUDA's)."""
    o = Ops(b, dtype)
    r, xs, ib = _log_parts(o, x, poly, lg2)
    r = _log_special(o, r, xs, ib)
    if scale is not None:
        r = o.i("mul.f32", r, o.c(scale))
    return o.sel(-_INF, r, o.cmp("eq", xs, 0.0))


@cuda_form("log")
def log(b, x, *, dtype):
    return _log_form(b, x, dtype, _LOG_POLY, False)


@cuda_form("log2")
def log2(b, x, *, dtype):
    return _log_form(b, x, dtype, _LOG2_POLY, True)


@cuda_form("log10")
def log10(b, x, *, dtype):
    return _log_form(b, x, dtype, _LOG_POLY, False, h32(0x3EDE5BD9))


_LOG1P_POLY = tuple(h32(v) for v in (0xBF000000, 0x3EAAAAE6, 0xBE800042, 0x3E4CAF9E, 0xBE2A68DD,
                                     0x3E146475, 0xBE0778E0, 0x3DD80012, 0xBD39BF78))


@cuda_form("log1p")
def log1p(b, x, *, dtype):
    o = Ops(b, dtype)
    u = o.i("add.rz.f32", x, o.c(1.0))
    ub = o.i("bitcast.s32.b32", o.i("bitcast.b32.f32", u))
    e = o.i("bitcast.s32.b32", o.i("and.b32", o.i("bitcast.b32.s32", o.iadd(ub, -1061158912)),
                                     o.ci(-8388608 & 0xFFFFFFFF, "b32")))
    xb = o.bits(x)
    m = o.from_bits(o.isub(xb, e))                                       # x / 2^e
    s = o.from_bits(o.isub(o.ci(1082130432), e))                         # 4 / 2^e
    f = o.add(o.fma(0.25, s, -1.0), m)                                   # (1 + x) / 2^e - 1
    ef = o.mul(o.i2f(e), h32(0x34000000))
    p = o.horner(f, _LOG1P_POLY)
    r = o.fma(ef, h32(0x3F317218), o.fma(o.mul(f, p), f, f))
    fin = o.i("setp.lt.u32", o.i("cvt.u32.s32", xb), o.ci(0x7F800000, "u32"))
    neg_ok = o.i("setp.lt.s32", xb, o.ci(-1082130431))                  # -1 < x < -0 ... (bits)
    special = o.sel(r, o.fma(x, _INF, _INF), neg_ok)
    special = o.sel(x, special, o.cmp("eq", x, 0.0))                     # +-0 -> +-0
    return o.sel(r, special, fin)
