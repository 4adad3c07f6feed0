"""CUDA-speed forms of the double-precision functions, ``precision="cuda"`` (f64).

Each is the algorithm of CUDA's own double-precision function (what NVRTC emits for ``exp2``,
``expm1``, ... with default options), as table rows; CUDA's branches are ``selp`` (the stub is
straight-line, every path computed). The 32-bit word work CUDA does with ``mov.b64 {lo, hi}``
is written with 64-bit shifts and conversions (``cvt.u32.u64`` of ``shr.u64``), which ptxas
turns back into register-half moves.

* exp2: ``k = rint(x)`` from a 1.5*2^52 shifter, ``r = (x - k) ln2`` in double-word, the
  degree-11 polynomial of ``exp``, ``2^k`` added to the exponent field; past |x| = 1023 the
  two-step scaling of ``exp``, past 1046 the limits.
* expm1: the exp reduction (no reduction below |x| = log 1.5), a degree-12 polynomial for
  ``e^r - 1 - r``, and ``2^k (e^r - 1) + (2^k - 1)`` in one fma (``k = 1024`` halved and the
  result doubled); 1 below x = -53 (rounded: -1), inf above 709.78.
* sinh: the expm1 sequence on ``|x|`` with ``k - 1`` (``(e^|x| - 1)/2``), then
  ``u + u / (2u + 1)``; an odd polynomial below |x| = 1.
* sigmoid: ``1.0 / (1.0 + exp(-x))`` as CUDA C++ writes it: the ``exp`` form, 1 added after
  its branches (NVRTC contracts nothing there) and ``rcp.rn.f64``; 0 below x = -709.78.
* log, log2, log10: ``x = 2^e m``, ``m`` in [sqrt(1/2), sqrt(2)), ``u = 2(m-1)/(m+1)`` with a
  refined reciprocal, ``u + u^3 P(u^2)`` plus u's low part, ``e ln2`` in double-word; log2 and
  log10 multiply by a double-word constant. log1p: ``2 atanh(x/(x+2))`` near 0 (one IEEE
  division), else ``log(1 + x)``.
* cosh: ``2 (e^|x|/4 + (4/e^|x|)/16)``; tanh: an odd polynomial, ``1 - 2/(e^2|x| + 1)`` above
  0.655; arctan: a degree-19 odd polynomial on ``|x|`` or ``1/|x|``; cbrt: an f32 seed from
  ``lg2``/``ex2.approx`` and one Halley step; hypot: scaled ``s * rsqrt(s)`` refined; pow:
  ``exp(y log|x|)`` with log|x| and the product as double words, C99's special cases.

CUDA's reciprocal and reciprocal-square-root seeds (``rcp.approx.ftz.f64``,
``rsqrt.approx.ftz.f64``) have no error bound in the PTX ISA, so the table has no rows for
them: the documented f32 approximations through ``cvt`` stand in (two more instructions each,
the same refined value to ~2^-66 after CUDA's Newton step). The other approximate rows (``ex2``,
``lg2`` f32 in cbrt and tanh) are emulated correctly rounded, so ``nx.emulate`` may differ from
the GPU in the last bit there; everything else is exact rows, and the emulated stub equals the
eager evaluation bit for bit. rsqrt has no form: CUDA's is the single ``rsqrt.approx.f64``,
whose error the PTX ISA does not bound either.
"""
from __future__ import annotations

from .core import Ops
from .cuda_exp import EXP64_POLY, add_hi, d64, h32, hi_f32
from .cuda_forms import cuda_form

__all__: list[str] = []

_INF = float("inf")
_SHIFT = d64(0x4338000000000000)                 # 1.5 * 2^52
_LN2_HI, _LN2_LO = d64(0x3FE62E42FEFA39EF), d64(0x3C7ABC9E3B39803F)
_LOG2E = d64(0x3FF71547652B82FE)


# ---------------------------------------------------------------------------- word helpers
def _lo_u32(o: Ops, v):
    """The low word of an f64 (u32)."""
    return o.i("cvt.u32.u64", o.i("bitcast.u64.b64", o.i("bitcast.b64.f64", v)))


def _hi_u32(o: Ops, v):
    """The high word of an f64 (u32)."""
    return o.i("cvt.u32.u64", o.i("shr.u64", o.i("bitcast.u64.b64", o.i("bitcast.b64.f64", v)),
                                   o.ci(32, "u32")))


def _s(o: Ops, u):
    """u32 -> s32 (same bits)."""
    return o.i("bitcast.s32.b32", o.i("bitcast.b32.u32", u))


def _u(o: Ops, s):
    """s32 -> u32 (same bits)."""
    return o.i("bitcast.u32.b32", o.i("bitcast.b32.s32", s))


def _shl20(o: Ops, s):
    """An s32 shifted into the exponent field of a high word (u32)."""
    return o.i("bitcast.u32.b32", o.i("shl.b32", o.i("bitcast.b32.s32", s), o.ci(20, "u32")))


def _from_hi(o: Ops, w32):
    """The f64 with high word ``w32`` (u32) and low word 0."""
    return o.i("bitcast.f64.b64", o.i("shl.b64", o.i("bitcast.b64.u64", o.i("cvt.u64.u32", w32)),
                                      o.ci(32, "u32")))


def _exp_scale(o: Ops, x, p, k, fast_lim: int, slow_lim: int, lim):
    """``p * 2^k`` selected branch-free as CUDA's exp/exp2 do: the exponent field added when
    |x| (high word as f32) < fast_lim, two exact-exponent steps below slow_lim, else ``lim``."""
    ks = _s(o, k)
    fast = add_hi(o, p, _shl20(o, ks))
    sgn = o.i("bitcast.s32.b32", o.i("shr.b32", o.i("bitcast.b32.u32", k), o.ci(31, "u32")))
    k1 = o.i("shr.s32", o.iadd(ks, sgn), o.ci(1, "u32"))                # k / 2 toward 0
    p1 = add_hi(o, p, _shl20(o, k1))
    s2 = add_hi(o, o.c(1.0), _shl20(o, o.isub(ks, k1)))                # 2^(k - k1)
    two = o.mul(p1, s2)
    ax = o.i("abs.f32", hi_f32(o, x))
    slow = o.sel(two, lim, o.i("setp.lt.f32", ax, o.bd.const(h32(slow_lim), "f32")))
    return o.sel(fast, slow, o.i("setp.lt.f32", ax, o.bd.const(h32(fast_lim), "f32")))


# ---------------------------------------------------------------------------------- exp2
@cuda_form("exp2", dtypes=("f64",))
def exp2_64(b, x, *, dtype):
    """CUDA's ``exp2``: k = rint(x), r = (x - k) ln2 (double-word ln2), exp's polynomial."""
    o = Ops(b, dtype)
    j = o.add(x, _SHIFT)
    kf = o.add(j, -_SHIFT)
    f = o.sub(x, kf)                                                     # exact
    r = o.fma(f, _LN2_HI, o.mul(f, _LN2_LO))
    p = o.horner(r, EXP64_POLY)
    lim = o.sel(0.0, o.add(x, _INF), o.cmp("lt", x, 0.0))                # 0, +inf or NaN
    return _exp_scale(o, x, p, _lo_u32(o, j), 0x408FF000, 0x4090CC00, lim)


# --------------------------------------------------------------------------------- expm1
_EXPM1_POLY = tuple(d64(v) for v in (
    0x3FE0000000000000, 0x3FC5555555555557, 0x3FA555555555554D, 0x3F8111111110F74D,
    0x3F56C16C16C1B5DD, 0x3F2A01A01B3B6940, 0x3EFA01A018D034E6, 0x3EC71DDE6C5F9DA1,
    0x3E927E5092BA033D, 0x3E5AF86D8EBD13CD, 0x3E21F4076ACD15B6))


def _expm1_core(o: Ops, x, hi, kadj: int, one: float):
    """CUDA's expm1 body on x (high word ``hi``): ``2^k' (e^r - 1) + (2^k' - one)`` with
    k' = k + kadj; returns (value, h2 == 0) where h2 = hi << 1."""
    j = o.fma(x, _LOG2E, _SHIFT)
    kw = _lo_u32(o, j)
    if kadj:
        kw = _u(o, o.iadd(_s(o, kw), kadj))
    kf = o.add(j, -_SHIFT)
    r = o.fma(kf, -_LN2_HI, x)
    r = o.fma(kf, -_LN2_LO, r)
    h2 = o.i("bitcast.u32.b32", o.i("shl.b32", o.i("bitcast.b32.u32", hi), o.ci(1, "u32")))
    tiny = o.i("setp.lt.u32", h2, o.ci(2142496327, "u32"))               # |x| < log(1.5)
    r = o.sel(x, r, tiny)
    k = o.i("selp.s32", o.ci(0), _s(o, kw), tiny)
    p = o.horner(r, _EXPM1_POLY)
    q = o.fma(o.i("mul.f64", r, p), r, r)                                # e^r - 1
    k1024 = o.i("setp.eq.s32", k, o.ci(1024))
    k = o.iadd(k, o.i("selp.s32", o.ci(-1), o.ci(0), k1024))
    s = add_hi(o, o.c(1.0), _shl20(o, k))                               # 2^k
    res = o.fma(q, s, o.sub(s, one))
    res = o.sel(o.add(res, res), res, k1024)
    zero = o.i("setp.eq.u32", h2, o.ci(0, "u32"))
    return o.sel(r, res, zero), zero


@cuda_form("expm1", dtypes=("f64",))
def expm1_64(b, x, *, dtype):
    o = Ops(b, dtype)
    hi = _hi_u32(o, x)
    res, _ = _expm1_core(o, x, hi, 0, 1.0)
    hf = o.i("bitcast.f32.b32", o.i("bitcast.b32.u32", hi))
    fast = o.pand(o.i("setp.lt.f32", hf, o.bd.const(h32(0x40862E43), "f32")),
                  o.i("setp.gt.f32", hf, o.bd.const(h32(0xC04A8000), "f32")))
    slow = o.sel(-1.0, o.add(x, _INF), o.cmp("lt", x, 0.0))              # -1, +inf or NaN
    return o.sel(res, slow, fast)


# ---------------------------------------------------------------------------------- sinh
_SINH_POLY = tuple(d64(v) for v in (
    0x3FC5555555555556, 0x3F811111111110A6, 0x3F2A01A01A02899D, 0x3EC71DE3A465B1E4,
    0x3E5AE64671B18F5C, 0x3DE611A561D87DEF, 0x3D6B4C75AB274C53))


@cuda_form("sinh", dtypes=("f64",))
def sinh_64(b, x, *, dtype):
    o = Ops(b, dtype)
    ax = o.abs(x)
    hi = _hi_u32(o, ax)
    z = o.i("mul.f64", ax, ax)
    small = o.fma(o.i("mul.f64", z, o.horner(z, _SINH_POLY)), ax, ax)   # |x| < 1
    u, _ = _expm1_core(o, ax, hi, -1, 0.5)                               # (e^|x| - 1) / 2
    big = o.add(u, o.div(u, o.fma(2.0, u, 1.0)))
    big = o.sel(_INF, big, o.cmp("ge", ax, d64(0x408633CE8FB9F87E)))
    res = o.sel(small, big, o.i("setp.lt.u32", hi, o.ci(0x3FF00000, "u32")))
    return o.copysign(x, res)


# ------------------------------------------------------------------------------- sigmoid
@cuda_form("sigmoid", dtypes=("f64",))
def sigmoid_64(b, x, *, dtype):
    """``1.0 / (1.0 + exp(-x))``: NVRTC adds 1 after exp's branches (no contraction there)
    and writes the quotient as ``rcp.rn.f64``. 0 below x = -709.78 (exp(-x) overflows)."""
    from .cuda_exp import exp64
    o = Ops(b, dtype)
    return o.rcp(o.add(exp64(b, o.neg(x), dtype=dtype), 1.0))


# ------------------------------------------------------------------------ the logarithms
def _rcp_seed(o: Ops, d):
    """A ~2^-23 reciprocal seed of an f64 within the f32 range. CUDA uses ``rcp.approx.ftz.f64``
    (MUFU.RCP64H), whose error the PTX ISA does not bound, so the table has no row for it; the
    documented ``rcp.approx.ftz.f32`` (1 ulp) through two conversions stands in. CUDA's Newton
    step that follows (error e -> e^3) makes the refined reciprocal the same to ~2^-66."""
    return o.i("cvt.f64.f32", o.i("rcp.approx.ftz.f32", o.i("cvt.rn.f32.f64", d)))


_LOG_POLY = tuple(d64(v) for v in (
    0x3FB5555555555554, 0x3F8999999999A3C4, 0x3F624924923BE72D, 0x3F3C71C72D1B5154,
    0x3F1745CBA9AB0956, 0x3EF3B2669F02676F, 0x3ED0EE258B7A8B04, 0x3EB1380B3AE80F1E))


def _log64(o: Ops, x):
    """CUDA's ``log``: x = 2^e m, m in [sqrt(1/2), sqrt(2)) (subnormals scaled by 2^54),
    ``u = 2(m - 1)/(m + 1)`` with a corrected reciprocal, ``log m = u + u^3 P(u^2)`` plus the
    low part of ``u``, ``e ln2`` added in double-word; inf, NaN, negatives through
    ``fma(x, inf, inf)``, zeros -inf."""
    hi0 = _s(o, _hi_u32(o, x))
    norm = o.i("setp.gt.s32", hi0, o.ci(1048575))
    xs = o.sel(x, o.mul(x, 2.0 ** 54), norm)
    e0 = o.isel(-1023, -1077, norm)
    hiu = _hi_u32(o, xs)
    hi = _s(o, hiu)
    mb = o.i("or.b64", o.i("and.b64", o.i("bitcast.b64.f64", xs),
                           o.ci(0x800FFFFFFFFFFFFF, "b64")), o.ci(0x3FF0000000000000, "b64"))
    m = o.i("bitcast.f64.b64", mb)
    big = o.i("setp.ge.s32", _s(o, _hi_u32(o, m)), o.ci(1073127583))    # m >= sqrt(2)
    m = o.sel(o.mul(m, 0.5), m, big)
    e = o.iadd(o.iadd(e0, _s(o, o.i("shr.u32", hiu, o.ci(20, "u32")))), o.isel(1, 0, big))
    d = o.add(m, 1.0)
    r = _rcp_seed(o, d)
    t = o.fma(o.neg(d), r, 1.0)
    r = o.fma(o.fma(t, t, t), r, r)
    f = o.add(m, -1.0)
    u = o.fma(f, r, o.i("mul.f64", f, r))                                # 2f / (m + 1)
    z = o.i("mul.f64", u, u)
    p = o.horner(z, _LOG_POLY)
    g = o.sub(f, u)
    c = o.fma(o.neg(u), f, o.add(g, g))
    lo = o.fma(o.i("mul.f64", z, p), u, o.i("mul.f64", r, c))
    ef = o.i2f(e)
    h = o.fma(ef, _LN2_HI, u)
    t = o.sub(o.fma(o.neg(ef), _LN2_HI, h), u)
    res = o.add(h, o.fma(ef, _LN2_LO, o.sub(lo, t)))
    fin = o.i("setp.lt.u32", _u(o, o.iadd(hi, -1)), o.ci(2146435071, "u32"))
    special = o.sel(-_INF, o.fma(xs, _INF, _INF),
                    o.i("setp.eq.f32", o.i("bitcast.f32.b32", o.i("bitcast.b32.s32", hi)),
                        o.bd.const(0.0, "f32")))
    return o.sel(res, special, fin)


@cuda_form("log", dtypes=("f64",))
def log_64(b, x, *, dtype):
    return _log64(Ops(b, dtype), x)


@cuda_form("log2", dtypes=("f64",))
def log2_64(b, x, *, dtype):
    """log(x) times log2(e) in double-word, as CUDA's ``log2``."""
    o = Ops(b, dtype)
    v = _log64(o, x)
    return o.fma(v, _LOG2E, o.i("mul.f64", v, o.c(d64(0x3C7777D0FFDA0D24))))


@cuda_form("log10", dtypes=("f64",))
def log10_64(b, x, *, dtype):
    """log(x) times log10(e) in double-word, as CUDA's ``log10``."""
    o = Ops(b, dtype)
    v = _log64(o, x)
    return o.fma(v, d64(0x3FDBCB7B1526E50E), o.i("mul.f64", v, o.c(d64(0x3C695355BAAAFAD3))))


_LOG1P_POLY = tuple(d64(v) for v in (
    0x3FB5555555555462, 0x3F899999999D70C4, 0x3F6249248FA4661F, 0x3F3C71C8DE3CE825,
    0x3F17457EFD51BAF8, 0x3EF3B9FF890F468C, 0x3ED087FFCEB2DC44, 0x3EB372FB2FBE14B5))


@cuda_form("log1p", dtypes=("f64",))
def log1p_64(b, x, *, dtype):
    """CUDA's ``log1p``: for x in (-0.4, 1.79) (high word as f32) ``2 atanh(x / (x + 2))``
    with one IEEE division and a degree-8 polynomial in its square; elsewhere ``log(1 + x)``."""
    o = Ops(b, dtype)
    hf = hi_f32(o, x)
    near = o.pand(o.i("setp.lt.f32", hf, o.bd.const(h32(0x3FE55555), "f32")),
                  o.i("setp.gt.f32", hf, o.bd.const(h32(0xBFD99999), "f32")))
    q = o.div(x, o.add(x, 2.0))
    w = o.mul(x, q)
    g = o.sub(x, w)                                                      # 2x / (x + 2)
    z = o.i("mul.f64", g, g)
    t = o.fma(o.i("mul.f64", z, o.horner(z, _LOG1P_POLY)), g, o.neg(w))
    small = o.add(x, t)
    return o.sel(small, _log64(o, o.add(x, 1.0)), near)


def _rcp_refined(o: Ops, d):
    """CUDA's reciprocal: a seed and one Newton step with the cubic term, ``r (1 + e + e^2)``."""
    r = _rcp_seed(o, d)
    t = o.fma(o.neg(d), r, 1.0)
    return o.fma(o.fma(t, t, t), r, r)


# ---------------------------------------------------------------------------------- cosh
@cuda_form("cosh", dtypes=("f64",))
def cosh_64(b, x, *, dtype):
    """CUDA's ``cosh``: ``q = e^|x| / 4`` by exp's sequence, ``2 (q + (1/q) / 16)``; inf past
    |x| = 710.48. (Where 1/q leaves the f32 range of the seed it is 0, and so negligible.)"""
    o = Ops(b, dtype)
    ax = o.abs(x)
    j = o.fma(ax, _LOG2E, _SHIFT)
    kf = o.add(j, -_SHIFT)
    r = o.fma(kf, -_LN2_HI, ax)
    r = o.fma(kf, -_LN2_LO, r)
    p = o.horner(r, EXP64_POLY)
    k = _s(o, _lo_u32(o, j))
    q = add_hi(o, p, _u(o, o.iadd(_s(o, _shl20(o, k)), -2097152)))       # 2^(k - 2) p
    res = o.fma(_rcp_refined(o, q), 0.0625, q)
    fast = o.i("setp.lt.u32", _hi_u32(o, ax), o.ci(1082536911, "u32"))
    slow = o.sel(_INF, x, o.cmp("le", x, _INF))                          # inf, or NaN
    res = o.sel(res, slow, fast)
    return o.add(res, res)


# ---------------------------------------------------------------------------------- tanh
_TANH_POLY = tuple(d64(v) for v in (
    0x0000000000000000, 0xBFD5555555555550, 0x3FC111111110FA4A, 0xBFABA1BA1B80AB40,
    0x3F9664F47EC0C8CF, 0xBF8226E1F3CF1EF5, 0x3F6D6D000D7AAD3D, 0xBF57D6E9674335B3,
    0x3F4337D1CEC4F033, 0xBF2DF9F0728C5D84, 0x3F14359F420AFC3D, 0xBEF0BC46E2F5E964))
_TANH_EXPM1 = tuple(d64(v) for v in (
    0x3FE0000000000005, 0x3FC5555555555540, 0x3FA555555555211A, 0x3F811111111173C4,
    0x3F56C16C17F2A71B, 0x3F2A01A017EED94F, 0x3EFA019A6B0AC45A, 0x3EC71DE715FF7E07,
    0x3E928A27F89B6999, 0x3E5AE904A4741B81))


@cuda_form("tanh", dtypes=("f64",))
def tanh_64(b, x, *, dtype):
    """CUDA's ``tanh``: an odd polynomial below |x| = 0.6549; above, ``1 - 2 / (e^2|x| + 1)``
    with ``k = rint(2|x| log2 e)`` found in f32, ``2^k`` from ``ex2.approx.ftz.f32`` (exact on
    integers), ``e^r - 1`` by a polynomial, a refined reciprocal; 1 past |x| = 19.6."""
    o = Ops(b, dtype)
    ax = o.abs(x)
    z = o.i("mul.f64", x, x)
    small = o.fma(o.horner(z, _TANH_POLY), x, x)
    t = o.add(ax, ax)
    k32 = o.i("cvt.rni.f32.f32", o.i("mul.rn.f32", o.i("cvt.rn.f32.f64", t),
                                     o.bd.const(h32(0x3FB8AA3B), "f32")))
    r = o.fma(o.neg(o.i("cvt.f64.f32", k32)), _LN2_HI, t)
    em1 = o.fma(o.i("mul.f64", r, o.horner(r, _TANH_EXPM1)), r, r)       # e^r - 1
    s = o.i("cvt.f64.f32", o.i("ex2.approx.ftz.f32", k32))               # 2^k
    d = o.sub(2.0, o.fma(o.neg(em1), s, o.sub(1.0, s)))                  # e^2|x| + 1
    big = o.fma(2.0, o.neg(_rcp_refined(o, d)), 1.0)
    big = o.sel(1.0, big, o.i("setp.gt.u32", _hi_u32(o, ax), o.ci(1077088193, "u32")))
    return o.sel(o.copysign(x, big), small, o.cmp("ge", ax, d64(0x3FE4F92224DD2F1A)))


# -------------------------------------------------------------------------------- arctan
_ATAN_POLY = tuple(d64(v) for v in (
    0xBFD555555555544C, 0x3FC99999999840D2, 0xBFC2492491FA1744, 0x3FBC71C709DFE927,
    0xBFB745D022F8DC5C, 0x3FB3B12B2DB51738, 0xBFB11089CA9A5BCD, 0x3FAE17813D66954F,
    0xBFAAD32AE04A9FD1, 0x3FA7EE3D3F36BB95, 0xBFA4F44D841450E4, 0x3FA171560CE4A489,
    0xBF9A7256FEB6FC6B, 0x3F9162B0B2A3BFDE, 0xBF82CF5AABC7CF0D, 0x3F6F9690C8249315,
    0xBF5312788DDE082E, 0x3F2D3B63DBB65B49, 0xBEF53E1D2A25FF7E))


@cuda_form("arctan", dtypes=("f64",))
def arctan_64(b, x, *, dtype):
    """CUDA's ``atan``: ``u = |x|`` or ``1/|x|`` (refined reciprocal; 0 for inf, and where the
    f32 seed underflows, |x| > 2^126, where 1/|x| is below half an ulp of pi/2), a degree-19
    odd polynomial, ``pi/2 - atan(u)`` above 1, the sign copied."""
    o = Ops(b, dtype)
    ax = o.abs(x)
    gt1 = o.cmp("gt", ax, 1.0)
    inv = o.sel(0.0, _rcp_refined(o, ax), o.cmp("eq", ax, _INF))
    u = o.sel(inv, ax, gt1)
    z = o.i("mul.f64", u, u)
    res = o.fma(o.i("mul.f64", z, o.horner(z, _ATAN_POLY)), u, u)
    res = o.sel(o.sub(d64(0x3FF921FB54442D18), res), res, gt1)
    return o.copysign(x, res)


# ---------------------------------------------------------------------------------- cbrt
@cuda_form("cbrt", dtypes=("f64",))
def cbrt_64(b, x, *, dtype):
    """CUDA's ``cbrt``: ``|x| = 2^(3k) m`` (k from the exponent times 1/3 in f32; subnormals
    scaled by 2^54), ``y = 2^(lg2(m)/3)`` from the f32 approximations, one Halley step
    ``y + y (m - y^3) / (2 y^3 + m)`` with a refined reciprocal, ``2^k`` added to the exponent;
    0, inf and NaN as ``x + x``."""
    o = Ops(b, dtype)
    f32 = lambda v: o.bd.const(h32(v), "f32")                             # noqa: E731
    ax = o.abs(x)
    sub = o.i("setp.eq.u32", o.i("shr.u32", _hi_u32(o, ax), o.ci(20, "u32")), o.ci(0, "u32"))
    xs = o.sel(o.mul(ax, 2.0 ** 54), ax, sub)
    adj = o.isel(18, 0, sub)
    e = _s(o, o.i("shr.u32", _hi_u32(o, xs), o.ci(20, "u32")))
    k = o.i("cvt.rni.s32.f32", o.i("mul.rn.f32", o.i("cvt.rn.f32.s32", o.iadd(e, -1022)),
                                    f32(0x3EAAAAAB)))
    m = add_hi(o, xs, _u(o, o.i("mul.lo.s32", k, o.ci(-3145728))))       # |x| / 2^(3k)
    y32 = o.i("ex2.approx.ftz.f32", o.i("mul.rn.f32", o.i("lg2.approx.ftz.f32",
                                                          o.i("cvt.rn.f32.f64", m)),
                                         f32(0x3EAAAAAB)))
    y = o.i("cvt.f64.f32", y32)
    y2 = o.mul(y, y)
    rr = _rcp_refined(o, o.fma(o.mul(y2, 2.0), y, m))                    # 1 / (2y^3 + m)
    res = o.fma(y, o.mul(rr, o.fma(y2, o.neg(y), m)), y)
    res = o.copysign(x, add_hi(o, res, _shl20(o, o.isub(k, adj))))
    t = o.add(x, x)
    keep = o.por(o.por(o.cmp("eq", t, x), o.cmp("nan", t, t)), o.cmp("nan", x, x))
    return o.sel(t, res, keep)


# --------------------------------------------------------------------------------- hypot
@cuda_form("hypot", dtypes=("f64",))
def hypot_64(b, x, y, *, dtype):
    """CUDA's ``hypot``: |x|, |y| ordered as integers, both scaled by a power of two from the
    larger one's exponent (its low two bits cleared), ``sqrt(hi^2 + lo^2)`` as the sum times
    a refined reciprocal square root, scaled back; ``hi`` where ``lo`` is 0, ``lo`` where it is
    inf or NaN. CUDA seeds with ``rsqrt.approx.ftz.f64``, whose error the PTX ISA does not
    bound; ``rsqrt.approx.ftz.f32`` (2^-22.9) stands in, its argument limited to FLT_MAX in
    f32 instead of the sum to DBL_MAX (finite operands give a sum below 2^10; an infinite sum
    still ends as inf through the Newton step)."""
    o = Ops(b, dtype)
    ab = o.i("bitcast.u64.b64", o.i("bitcast.b64.f64", o.abs(x)))
    bb = o.i("bitcast.u64.b64", o.i("bitcast.b64.f64", o.abs(y)))
    lo = o.i("bitcast.f64.b64", o.i("bitcast.b64.u64", o.i("min.u64", bb, ab)))
    hi = o.i("bitcast.f64.b64", o.i("bitcast.b64.u64", o.i("max.u64", bb, ab)))
    eh = o.i("and.b32", o.i("bitcast.b32.u32", _hi_u32(o, hi)), o.ci(0xFFC00000, "b32"))
    ehs = o.i("bitcast.s32.b32", eh)
    scale = _from_hi(o, _u(o, o.isub(o.ci(2144337920), ehs)))
    ls, hs = o.mul(scale, lo), o.mul(scale, hi)
    s = o.fma(hs, hs, o.mul(ls, ls))
    m = o.i("min.f32", o.i("cvt.rn.f32.f64", s), o.bd.const(h32(0x7F7FFFFF), "f32"))
    r = o.i("cvt.f64.f32", o.i("rsqrt.approx.ftz.f32", m))
    e = o.fma(s, o.neg(o.mul(r, r)), 1.0)
    r = o.fma(o.fma(0.375, e, 0.5), o.mul(e, r), r)
    back = _from_hi(o, o.i("bitcast.u32.b32", o.i("or.b32", eh, o.ci(1048576, "b32"))))
    res = o.mul(o.mul(s, r), back)
    res = o.sel(hi, res, o.cmp("eq", lo, 0.0))
    return o.sel(res, lo, o.i("setp.lt.u32", _hi_u32(o, lo), o.ci(0x7FF00000, "u32")))


# ----------------------------------------------------------------------------------- pow
_POW_LOG_POLY = tuple(d64(v) for v in (
    0x3F89999999999DFB, 0x3F6249249242B910, 0x3F3C71C7258A578B, 0x3F1745CDE4FAECD5,
    0x3EF3B20A75488A3F, 0x3ED0F5D241AD3B5A, 0x3EB0F5FF7D2CAFE2))


def _two_sum_fast(o: Ops, a, b):
    s = o.add(a, b)
    return s, o.add(b, o.sub(a, s))


def _pow_core(o: Ops, a, y):
    """CUDA's ``__internal_accurate_pow(|x|, y)``: log|x| in double-word (the log reduction,
    ``u + u^3 q(u^2)`` with u, u^2, u^3 and q as double words), times y (its exponent reduced
    when huge), exp of the high part, the low part applied as ``E + E t_lo``."""
    from .cuda_exp import exp64
    hi0 = _hi_u32(o, a)
    sub = o.i("setp.eq.u32", o.i("shr.u32", hi0, o.ci(20, "u32")), o.ci(0, "u32"))
    a = o.sel(o.mul(a, 2.0 ** 54), a, sub)
    hiu = _hi_u32(o, a)
    e = o.iadd(_s(o, o.i("shr.u32", hiu, o.ci(20, "u32"))), o.isel(-54, 0, sub))
    mb = o.i("or.b64", o.i("and.b64", o.i("bitcast.b64.f64", a), o.ci(0x800FFFFFFFFFFFFF, "b64")),
             o.ci(0x3FF0000000000000, "b64"))
    m = o.i("bitcast.f64.b64", mb)
    big = o.i("setp.ge.u32", _hi_u32(o, m), o.ci(1073127583, "u32"))    # m >= sqrt(2)
    m = o.sel(o.mul(m, 0.5), m, big)
    e = o.iadd(e, o.isel(-1022, -1023, big))
    r = _rcp_refined(o, o.add(m, 1.0))
    f = o.add(m, -1.0)
    u = o.fma(f, r, o.i("mul.f64", f, r))                                # 2f / (m + 1)
    z = o.i("mul.f64", u, u)
    p = o.horner(z, _POW_LOG_POLY)
    g = o.sub(f, u)
    ul = o.mul(r, o.fma(o.neg(u), f, o.add(g, g)))                       # u's low part
    c12 = d64(0x3FB5555555555555)
    qh = o.fma(z, p, c12)                                                # q = 1/12 + z P
    ql = o.add(o.add(o.fma(z, p, o.sub(c12, qh)), 0.0), d64(0xBC46A4CB00B9E7B0))
    qh, ql = _two_sum_fast(o, qh, ql)
    u2h = o.mul(u, u)
    u2l = o.fma(u, o.mul(ul, 2.0), o.fma(u, u, o.neg(u2h)))
    u3h = o.mul(u2h, u)
    u3l = o.fma(u2l, u, o.fma(u2h, ul, o.fma(u2h, u, o.neg(u3h))))
    sh = o.mul(qh, u3h)
    sl = o.fma(ql, u3h, o.fma(qh, u3l, o.fma(qh, u3h, o.neg(sh))))
    sh, sl = _two_sum_fast(o, sh, sl)
    th = o.add(u, sh)
    tl = o.add(sl, o.add(sh, o.sub(u, th)))
    lh, ll = _two_sum_fast(o, th, o.add(ul, tl))                         # log m
    ef = o.i2f(e)
    h = o.fma(ef, _LN2_HI, lh)
    t = o.sub(o.fma(o.neg(ef), _LN2_HI, h), lh)
    vh, vl = _two_sum_fast(o, h, o.fma(ef, _LN2_LO, o.sub(ll, t)))       # log |x|
    yh = _hi_u32(o, y)
    huge = o.i("setp.gt.u32", o.i("bitcast.u32.b32", o.i("shl.b32", o.i("bitcast.b32.u32", yh),
                                                          o.ci(1, "u32"))),
               o.ci(0xFDFFFFFF, "u32"))
    mask = o.i("selp.b64", o.ci(0xFF0FFFFFFFFFFFFF, "b64"), o.ci(0xFFFFFFFFFFFFFFFF, "b64"), huge)
    yr = o.i("bitcast.f64.b64", o.i("and.b64", o.i("bitcast.b64.f64", y), mask))  # |y| < 2^1009
    ph = o.mul(vh, yr)
    pl = o.fma(vl, yr, o.fma(vh, yr, o.neg(ph)))
    ph, pl = _two_sum_fast(o, ph, pl)
    ex = exp64(o.bd, ph, dtype="f64")
    return o.sel(ex, o.fma(ex, pl, ex), o.cmp("eq", o.abs(ex), _INF))


@cuda_form("pow", dtypes=("f64",))
def pow_64(b, x, y, *, dtype):
    """CUDA's ``pow``: the core on |x|, then C99's special cases as CUDA orders them (odd
    integer y from one 64-bit shift, x = 0, x < 0, inf and NaN operands, y = 0 or x = 1)."""
    o = Ops(b, dtype)
    ax = o.abs(x)
    res = _pow_core(o, ax, y)
    xh, yh = _hi_u32(o, x), _hi_u32(o, y)
    yb = o.i("bitcast.u64.b64", o.i("bitcast.b64.f64", y))
    sh = o.iadd(_s(o, o.i("shr.u32", o.i("bitcast.u32.b32", o.i(
        "and.b32", o.i("bitcast.b32.u32", yh), o.ci(0x7FF00000, "b32"))), o.ci(20, "u32"))), -1012)
    odd = o.i("setp.eq.u64", o.i("bitcast.u64.b64", o.i("shl.b64", o.i("bitcast.b64.u64", yb),
                                                         _u(o, sh))),
              o.ci(0x8000000000000000, "u64"))                           # y an odd integer
    odd = o.pand(odd, o.cmp("ne", o.abs(y), 0.5))
    neg = o.i("setp.lt.s32", _s(o, xh), o.ci(0))
    yneg = o.i("setp.lt.s32", _s(o, yh), o.ci(0))
    inf_hi = o.ci(0x7FF00000, "u32")
    zero_u = o.ci(0, "u32")
    # x = +-0: +-0 or +-inf
    zw = o.i("or.b32", o.i("bitcast.b32.u32", o.i("selp.u32", xh, zero_u, odd)),
             o.i("bitcast.b32.u32", o.i("selp.u32", inf_hi, zero_u, yneg)))
    zres = _from_hi(o, o.i("bitcast.u32.b32", zw))
    # x < 0: the sign of an odd power, NaN for a non-integer y
    nres = o.sel(o.neg(res), res, odd)
    nres = o.sel(nres, float("nan"), o.cmp("eq", o.i("cvt.rzi.f64.f64", y), y))
    res = o.sel(nres, res, neg)
    res = o.sel(zres, res, o.cmp("eq", x, 0.0))
    # inf and NaN operands (x + y not finite)
    s = o.add(x, y)
    special = o.i("setp.eq.u32", o.i("bitcast.u32.b32", o.i(
        "and.b32", o.i("bitcast.b32.u32", _hi_u32(o, s)), o.ci(0x7FF00000, "b32"))), inf_hi)
    gt1 = o.i("selp.u32", inf_hi, zero_u, o.cmp("gt", ax, 1.0))
    yinf = _from_hi(o, o.i("bitcast.u32.b32", o.i("xor.b32", o.i("bitcast.b32.u32", gt1),
                                                   o.i("bitcast.b32.u32",
                                                       o.i("selp.u32", inf_hi, zero_u, yneg)))))
    yinf = o.sel(1.0, yinf, o.cmp("eq", x, -1.0))
    aw = o.i("or.b32", o.i("bitcast.b32.u32", o.i("selp.u32", zero_u, inf_hi, yneg)),
             o.i("bitcast.b32.u32", o.i("selp.u32", o.ci(0x80000000, "u32"), zero_u,
                                        o.pand(neg, odd))))
    ainf = _from_hi(o, o.i("bitcast.u32.b32", aw))
    sp = o.sel(ainf, res, o.cmp("eq", ax, _INF))
    sp = o.sel(yinf, sp, o.cmp("eq", o.abs(y), _INF))
    sp = o.sel(s, sp, o.por(o.cmp("nan", x, x), o.cmp("nan", y, y)))
    res = o.sel(sp, res, special)
    return o.sel(1.0, res, o.por(o.cmp("eq", y, 0.0), o.cmp("eq", x, 1.0)))
