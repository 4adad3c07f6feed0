"""CUDA-speed forms of the trigonometric and power functions (f32), ``precision="cuda"``.

Each is the fast path of CUDA's own single-precision function (what NVRTC 13 emits for
``sinf``, ``atanf``, ``powf``, ... with default options), as table rows with CUDA's constants;
CUDA's branches become ``selp``::

    from numptx.dsl.mathlib import EagerBuilder, implementation
    implementation("sin", "f32", "cuda")(EagerBuilder(), np.float32([1e30]))

* sin, cos, tan: ``j = rint(x 2/pi)``, ``r = x - j pi/2`` in three fmas (CUDA's Cody-Waite,
  good for |x| < 105615), CUDA's polynomials on [-pi/4, pi/4] picked by the quadrant, ``-1/t``
  by ``rcp.approx`` in tan's odd quadrants. Above 105615 CUDA branches to a Payne-Hanek
  reduction with a local-memory table (free when not taken); a straight-line stub pays for
  everything it holds, so the registered forms use a branch-free Payne-Hanek for |x| >= 2^16:
  the 96 bits of 2/pi that the exponent of x needs come from seven 32-bit constants, four
  picked by ``selp`` (two levels, on two exponent bits) and joined by three funnel shifts
  (``shf.l.wrap``); three integer multiplies give ``|x| 2/pi mod 4`` to 2^-62, ample since no
  f32 lies closer than 2^-29.86 quadrants to a multiple of pi/2 (16367173 * 2^72, found by
  scanning every f32 >= 2^16). The fraction becomes ``r`` through an int-to-f32 conversion
  plus its exact remainder and a two-part pi/2, so ``r`` is good to ~2^-50 relative, as CUDA's
  f64 product gives. Both reductions run on |x|; the sign goes back with one ``xor``. Below
  2^16 the result is CUDA's bit for bit.
  Cost (sm_90 SASS by ptxas 13.0, executed instructions net of the loads and the store):
  sin 60, cos 60, tan 56 against CUDA's fast path 28, 29, 25. ``sin_fast_path``,
  ``cos_fast_path`` and ``tan_fast_path`` (not registered) are the fast path alone, CUDA's
  result bit for bit, NaN for |x| >= FAST_PATH_LIMIT (and inf, NaN): 23, 24, 20.
* arctan: CUDA's: ``z = |x|`` or ``rcp.approx(|x|)``, an odd polynomial, ``pi/2 - p`` with pi/2
  the exact product of two constants (fma). arctan2: the same on ``min / max`` (IEEE
  division), the octant by ``selp``, C99 zeros and infinities as CUDA handles them.
* pow: CUDA's: ``log2|x|`` as a double-f32 from ``2(m-1)/(m+1)`` (``rcp.approx`` and an exact
  correction), times ``y`` exactly (fma), ``2^f`` by a polynomial and the scaling in two exact
  multiplications; the C99 special cases (``pow(x, 0)``, ``pow(1, y)``, zeros, infinities,
  negative x with integer or non-integer y) by ``selp`` in the order of CUDA's branches.
* rsqrt: ``rsqrt.approx`` (CUDA's ``rsqrtf`` is that one instruction). cbrt: CUDA's:
  ``y = |x| 2^(-2/3 lg2|x|)`` from ``lg2.approx``/``ex2.approx``, one Newton step, the sign,
  and ``x + x`` for zeros, infinities and NaN. hypot: CUDA's: both scaled by a power of two
  from the larger one's exponent, ``sqrt.rn(fma(a, a, b*b))``, scaled back.

Executed SASS (same measure) of the others: arctan 19 (CUDA 19), arctan2 38 (43), pow 82 (88
for x > 0), rsqrt 4 (4), cbrt 16 (16), hypot 25 (25).

The approximate rows are emulated correctly rounded from float64; on the GPU they may deviate
by the bounds the PTX ISA documents (``rcp`` 1 ulp, ``ex2`` 2 ulp, ``lg2`` 2^-22, ``rsqrt``
2^-22.9 relative), which is how far ``nx.emulate`` can be from the GPU for tan, arctan, pow,
cbrt and rsqrt; sin, cos, arctan2 and hypot use exact rows only. Error against float64:
tests/test_cuda_trig.py checks CUDA's documented bounds (sinf, cosf 2 ulp, tanf 4, atanf 2,
atan2f 3, powf 4, rsqrtf 2, cbrtf 1, hypotf 3; distance to the correctly rounded result),
also with every approximate row pushed to its PTX bound.
"""
from __future__ import annotations

import struct

from .core import PI, Ops, parts
from .cuda_forms import cuda_form

__all__ = ["sin_fast_path", "cos_fast_path", "tan_fast_path", "FAST_PATH_LIMIT"]

_INF, _NAN = float("inf"), float("nan")
FAST_PATH_LIMIT = 105615.0
"""CUDA's Cody-Waite bound: the ``*_fast_path`` forms return NaN for |x| >= this."""


def _h(bits: int) -> float:
    """The f32 of an IEEE bit pattern (CUDA's constants are bit patterns)."""
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _two_over_pi_words() -> tuple[int, ...]:
    """W[j] = bits 32j-8 .. 32j+23 of 2/pi (bit i weighs 2^-i; W[0] starts with nine zero
    bits), j = 0..6. The reduction of a biased exponent e in [143, 254] needs the 96 bits from
    bit e - 151 on; with this origin they lie in W[k..k+3], k = (e - 143) >> 5, shifted left by
    (e - 143) mod 32. pi by Machin's formula in integers (about 100 guard bits)."""
    n = 320

    def atan_inv(k: int) -> int:                     # atan(1/k) * 2^n
        s, t, i, sign = 0, (1 << n) // k, 1, 1
        while t:
            s += sign * (t // i)
            t //= k * k
            i, sign = i + 2, -sign
        return s
    pi = 16 * atan_inv(5) - 4 * atan_inv(239)
    t = (1 << (2 * n + 1)) // pi                      # 2/pi * 2^n, within a few units
    return tuple((t >> (n - 32 * j - 23)) & 0xFFFFFFFF for j in range(7))


_W = _two_over_pi_words()
_PIO2_H, _PIO2_L = parts(PI / 2, (24, 24))                  # pi/2 = H + L + O(2^-49)


# ================================================================== trigonometry
def _cw(o: Ops, a, nan_for_inf: bool = False):
    """CUDA's reduction: (r, j) with r = a - j pi/2, j = rint(a 2/pi) as s32 (three fmas,
    accurate for |a| < 105615). ``nan_for_inf`` rounds in f32 first (cvt.rni.f32, then
    cvt.rzi.s32; same count) so that inf gives r = NaN; only for a >= +0 (rint(-0) = -0
    would turn -0 into +0)."""
    t = o.mul(a, _h(0x3F22F983))
    if nan_for_inf:
        jf = o.rint(t)
        j = o.i("cvt.rzi.s32.f32", jf)
    else:
        j = o.f2i(t)
        jf = o.i2f(j)
    r = o.fma(jf, _h(0xBFC90FDA), a)
    r = o.fma(jf, _h(0xB3A22168), r)
    return o.fma(jf, _h(0xA7C234C5), r), j


def _b32(o: Ops, v: int):
    return o.ci(v, "b32")


def _u32(o: Ops, v: int):
    return o.ci(v, "u32")


def _bit(o: Ops, j, mask: int):
    """pred: j & mask != 0 (j: u32)."""
    jb = o.i("bitcast.b32.u32", j)
    return o.i("setp.ne.u32", o.i("bitcast.u32.b32", o.i("and.b32", jb, _b32(o, mask))),
               _u32(o, 0))


def _payne_hanek(o: Ops, ia):
    """(r, j, ok) for |x| with bits ``ia`` (u32): r = |x| - j pi/2 in [-pi/4, pi/4], j mod 4
    as u32; ok: 2^16 <= |x| < inf, where the result is valid."""
    e = o.i("sub.u32", o.i("shr.u32", ia, _u32(o, 23)), _u32(o, 143))   # 0..111 when ok
    ok = o.i("setp.lt.u32", e, _u32(o, 112))
    m = o.i("or.b32", o.i("and.b32", o.i("bitcast.b32.u32", ia), _b32(o, 0x7FFFFF)),
            _b32(o, 0x800000))
    # words W[k..k+3], k = e >> 5, in two selp levels, then shifted left by e mod 32
    k2, k1 = _bit(o, e, 64), _bit(o, e, 32)
    lv = [o.i("selp.b32", _b32(o, _W[i + 2]), _b32(o, _W[i]), k2) for i in range(5)]
    w = [o.i("selp.b32", lv[i + 1], lv[i], k1) for i in range(4)]
    win = [o.i("bitcast.u32.b32", o.i("shf.l.wrap.b32", w[i + 1], w[i], e)) for i in range(3)]
    # m * win: bit 94 weighs 1 (bits 95, 94 = j mod 4), bits 93..32 the fraction
    mu = o.i("bitcast.u32.b32", m)
    mid = o.i("add.u64", o.i("mul.wide.u32", mu, win[1]),
              o.i("cvt.u64.u32", o.i("mul.hi.u32", mu, win[2])))
    p1 = o.i("cvt.u32.u64", mid)
    p2 = o.i("mad.lo.u32", mu, win[0], o.i("cvt.u32.u64", o.i("shr.u64", mid, _u32(o, 32))))
    j = o.i("shr.u32", o.i("add.u32", p2, _u32(o, 1 << 29)), _u32(o, 30))  # nearest quadrant
    # the fraction in [-1/2, 1/2): hi (s32) * 2^-32 + lo (u32) * 2^-64. hi rounded to f32 plus
    # its exact remainder: r within 2^-26 relative before its last rounding even where lo
    # cancels part of hi (lo * 2^-64 < 2^-32, and |fraction| >= 2^-29.86)
    p1b, p2b = o.i("bitcast.b32.u32", p1), o.i("bitcast.b32.u32", p2)
    hi = o.i("bitcast.s32.b32", o.i("shf.l.wrap.b32", p1b, p2b, _u32(o, 2)))
    lo = o.i("bitcast.u32.b32", o.i("shl.b32", p1b, _u32(o, 2)))
    a = o.i("cvt.rn.f32.s32", hi)
    rem = o.i("sub.s32", hi, o.i("cvt.rni.s32.f32", a))
    fl = o.fma(o.i("cvt.rn.f32.s32", rem), 2.0 ** 32, o.i("cvt.rn.f32.u32", lo))  # x 2^-64
    r = o.fma(a, _PIO2_H * 2.0 ** -32,
              o.fma(a, _PIO2_L * 2.0 ** -32, o.mul(fl, _PIO2_H * 2.0 ** -64)))
    return r, j, ok


def _reduce_full(o: Ops, x):
    """(r, j as u32) for |x|, any |x|: CUDA's Cody-Waite below 2^16, Payne-Hanek above."""
    a = o.abs(x)
    r, j = _cw(o, a, nan_for_inf=True)
    ia = o.i("bitcast.u32.b32", o.i("bitcast.b32.f32", a))
    rp, jp, big = _payne_hanek(o, ia)
    return o.sel(rp, r, big), o.i("selp.u32", jp, o.i("cvt.u32.s32", j), big)


def _sin_poly(o: Ops, r, j):
    """sin(r + j pi/2) up to the sign of quadrants 2 and 3, CUDA's polynomials."""
    odd = _bit(o, j, 1)
    t = o.sel(1.0, r, odd)
    s = o.mul(r, r)
    p = o.sel(o.fma(_h(0x37CBAC00), s, _h(0xBAB607ED)), _h(0xB94D4153), odd)
    p = o.fma(p, s, o.sel(_h(0x3D2AAABB), _h(0x3C0885E4), odd))
    p = o.fma(p, s, o.sel(_h(0xBEFFFFFF), _h(0xBE2AAAA8), odd))
    return o.fma(p, o.fma(s, t, 0.0), t)


def _tan_poly(o: Ops, r, j):
    """tan(r + j pi/2), CUDA's polynomial; -1/t by rcp.approx in odd quadrants."""
    s = o.mul(r, r)
    p = o.fma(_h(0x3C190000), s, _h(0x3B560000))
    for c in (0x3CC70000, 0x3D5B0000, 0x3E089438, 0x3EAAAA88):
        p = o.fma(p, s, _h(c))
    t = o.fma(p, o.mul(s, r), r)
    t = o.sel(r, t, o.cmp("eq", o.abs(r), _h(0x3A00B43C)))     # CUDA's patch of one value
    return o.sel(o.i("rcp.approx.ftz.f32", o.neg(t)), t, _bit(o, j, 1))


def _xor_sign(o: Ops, v, sign_bits):
    """v with its sign bit xor-ed with bit 31 of ``sign_bits`` (b32)."""
    vb = o.i("bitcast.b32.f32", v)
    s = o.i("and.b32", sign_bits, _b32(o, 0x80000000))
    return o.i("bitcast.f32.b32", o.i("xor.b32", vb, s))


def _sincos_full(o: Ops, x, shift: int, odd_fn: bool):
    r, j = _reduce_full(o, x)
    if shift:
        j = o.i("add.u32", j, _u32(o, shift))
    res = _sin_poly(o, r, j)
    # quadrants 2, 3 negate; sin is odd in x (the reduction ran on |x|)
    sign = o.i("shl.b32", o.i("bitcast.b32.u32", j), _u32(o, 30))
    if odd_fn:
        sign = o.i("xor.b32", sign, o.i("bitcast.b32.f32", x))
    return _xor_sign(o, res, sign)


@cuda_form("sin")
def sin(b, x, *, dtype):
    """sinf, full range."""
    return _sincos_full(Ops(b, dtype), x, 0, True)


@cuda_form("cos")
def cos(b, x, *, dtype):
    """cosf, full range."""
    return _sincos_full(Ops(b, dtype), x, 1, False)


@cuda_form("tan")
def tan(b, x, *, dtype):
    """tanf, full range."""
    o = Ops(b, dtype)
    r, j = _reduce_full(o, x)
    return _xor_sign(o, _tan_poly(o, r, j), o.i("bitcast.b32.f32", x))


def _fast_path(o: Ops, x, res):
    return o.sel(res, _NAN, o.cmp("lt", o.abs(x), FAST_PATH_LIMIT))


def _sincos_fast(o: Ops, x, shift: int):
    r, j = _cw(o, x)
    j = o.i("cvt.u32.s32", j)
    if shift:
        j = o.i("add.u32", j, _u32(o, shift))
    res = _sin_poly(o, r, j)
    res = o.sel(o.fma(res, -1.0, 0.0), res, _bit(o, j, 2))
    return _fast_path(o, x, res)


def sin_fast_path(b, x, *, dtype="f32"):
    """sinf's fast path alone (CUDA's result bit for bit); NaN for |x| >= 105615."""
    return _sincos_fast(Ops(b, dtype), x, 0)


def cos_fast_path(b, x, *, dtype="f32"):
    """cosf's fast path alone (CUDA's result bit for bit); NaN for |x| >= 105615."""
    return _sincos_fast(Ops(b, dtype), x, 1)


def tan_fast_path(b, x, *, dtype="f32"):
    """tanf's fast path alone (CUDA's result bit for bit); NaN for |x| >= 105615."""
    o = Ops(b, dtype)
    r, j = _cw(o, x)
    return _fast_path(o, x, _tan_poly(o, r, o.i("cvt.u32.s32", j)))


# ================================================================== inverse trigonometry
_ATAN = (0xBC6BE14F, 0x3D23397E, 0xBD948A7A, 0x3DD76B21, 0xBE111E88, 0x3E4CAF60, 0xBEAAAA27)
_ATAN2 = (0xBC807748, 0x3D2CDAB2, 0xBD992D10, 0x3DD9EA6C, 0xBE117CB1, 0x3E4CBCE0, 0xBEAAAA7D)
_PI_A, _PIO2_B, _PI_B = _h(0x3FD774EB), _h(0x3F6EE581), _h(0x3FEEE581)   # pi/2 = B*A, pi = 2B*A


def _atan_poly(o: Ops, z, c0: int, cs):
    """atan(z) on [0, 1]: z + z s P(s), s = z^2."""
    s = o.mul(z, z)
    p = o.fma(_h(c0), s, _h(cs[0]))
    for c in cs[1:]:
        p = o.fma(p, s, _h(c))
    return o.fma(o.mul(s, p), z, z)


@cuda_form("arctan")
def arctan(b, x, *, dtype):
    """atanf."""
    o = Ops(b, dtype)
    a = o.abs(x)
    big = o.cmp("gt", a, 1.0)
    r = _atan_poly(o, o.sel(o.i("rcp.approx.ftz.f32", a), a, big), 0x3B2090AA, _ATAN)
    r = o.sel(o.fma(_PIO2_B, _PI_A, o.neg(r)), r, big)       # pi/2 - atan(1/|x|)
    return o.sel(o.copysign(x, r), r, o.cmp("le", a, _INF))  # NaN passes unsigned


@cuda_form("arctan2")
def arctan2(b, y, x, *, dtype):
    """atan2f(y, x)."""
    o = Ops(b, dtype)
    ax, ay = o.abs(x), o.abs(y)
    swap = o.cmp("gt", ay, ax)
    big = o.sel(ay, ax, swap)
    r = _atan_poly(o, o.div(o.sel(ax, ay, swap), big), 0x3B33710B, _ATAN2)
    xneg = o.signbit(x)
    nr = o.neg(r)
    # |y| > |x|: pi/2 -+ r; else x < 0: pi - r
    r = o.sel(o.fma(_PIO2_B, _PI_A, o.sel(r, nr, xneg)), o.sel(o.fma(_PI_B, _PI_A, nr), r, xneg),
              swap)
    r = o.sel(o.sel(_h(0x4016CBE4), _h(0x3F490FDB), xneg), r, o.cmp("eq", ax, ay))  # 3pi/4, pi/4
    r = o.sel(o.sel(_h(0x40490FDB), 0.0, xneg), r, o.cmp("eq", big, 0.0))          # pi, 0
    s = o.add(ax, ay)
    return o.sel(s, o.copysign(y, r), o.cmp("nan", s, s))


# ================================================================== powers and roots
_LOG2_POLY = (0x3A2C32E4, 0x3B52E7DB, 0x3C93BB73, 0x3DF6384F)
_EXP2_POLY = (0x391FCB8E, 0x3AAF85ED, 0x3C1D9856, 0x3D6357BB, 0x3E75FDEC, 0x3F317218)


def _pow_core(o: Ops, ax, y):
    """|x|^y for finite positive |x| (CUDA's algorithm; 0 and inf beyond the exponent range)."""
    tiny = o.cmp("lt", ax, 2.0 ** -126)
    a = o.sel(o.mul(ax, 2.0 ** 24), ax, tiny)
    ia = o.bits(a)
    eb = o.i("bitcast.s32.b32", o.i("and.b32", o.i("bitcast.b32.s32", o.isub(ia, 0x3F3504F3)),
                                    _b32(o, 0xFF800000)))
    m = o.from_bits(o.isub(ia, eb))                            # [sqrt(1/2), sqrt(2))
    e = o.fma(o.i2f(eb), 2.0 ** -23, o.sel(-24.0, 0.0, tiny))
    f = o.sub(m, 1.0)
    inv = o.i("rcp.approx.ftz.f32", o.add(m, 1.0))
    u = o.mul(o.add(f, f), inv)                                # 2f / (m + 1)
    u2 = o.mul(u, u)
    d = o.sub(f, u)
    ul = o.mul(inv, o.fma(o.neg(u), f, o.add(d, d)))           # its rounding error
    p = o.fma(_h(_LOG2_POLY[0]), u2, _h(_LOG2_POLY[1]))
    for c in _LOG2_POLY[2:]:
        p = o.fma(p, u2, _h(c))
    p = o.mul(p, u2)
    log2e, log2e_l = _h(0x3FB8AA3B), _h(0x32A55E34)
    hi = o.fma(u, log2e, e)
    t = o.fma(u, log2e, o.sub(e, hi))
    t = o.fma(ul, log2e, t)
    t = o.fma(u, log2e_l, t)
    t = o.fma(o.mul(p, 3.0), ul, t)
    t = o.fma(p, u, t)
    lh = o.add(hi, t)                                          # log2|x| = lh + ll
    ll = o.add(t, o.neg(o.add(lh, o.neg(hi))))
    ph = o.mul(lh, y)                                          # y log2|x| = ph + pl
    pl = o.fma(ll, y, o.fma(lh, y, o.neg(ph)))
    k = o.rint(ph)
    f = o.add(pl, o.sub(ph, k))
    q = o.fma(_h(_EXP2_POLY[0]), f, _h(_EXP2_POLY[1]))
    for c in _EXP2_POLY[2:]:
        q = o.fma(q, f, _h(c))
    q = o.fma(q, f, 1.0)
    # 2^k in two factors: 2^127 or 2^-123, and the rest
    off = o.isel(0, 0x83000000, o.cmp("gt", k, 0.0))
    s1 = o.from_bits(o.iadd(off, 0x7F000000))
    s2 = o.from_bits(o.isub(o.wshl(o.i("cvt.rzi.s32.f32", k), 23), off))
    res = o.mul(o.mul(q, s1), s2)
    far = o.cmp("gt", o.abs(ph), 152.0)
    return o.sel(o.sel(0.0, _INF, o.cmp("lt", ph, 0.0)), res, far)


@cuda_form("pow")
def pow(b, x, y, *, dtype):
    """powf(x, y) with the C99 special cases."""
    o = Ops(b, dtype)
    ax = o.abs(x)
    res = _pow_core(o, ax, y)
    yh = o.i("cvt.rzi.f32.f32", o.mul(y, 0.5))
    odd = o.cmp("eq", o.abs(o.sub(y, o.add(yh, yh))), 1.0)     # y an odd integer
    # x < 0: -res for odd y, NaN for non-integer y
    neg = o.sel(_NAN, o.sel(o.neg(res), res, odd), o.cmp("ne", o.i("cvt.rmi.f32.f32", y), y))
    res = o.sel(neg, res, o.cmp("lt", x, 0.0))
    res = o.sel(1.0, res, o.pand(o.cmp("eq", x, -1.0), o.cmp("eq", o.abs(y), _INF)))
    # x = +-0 or +-inf: 0 or inf (x + x, flipped for y < 0), signed for odd y
    zb = o.i("bitcast.b32.f32", o.add(x, x))
    zb = o.i("selp.b32", o.i("xor.b32", zb, _b32(o, 0x7F800000)), zb, o.cmp("lt", y, 0.0))
    zb = o.i("selp.b32", zb, o.i("and.b32", zb, _b32(o, 0x7FFFFFFF)), odd)
    res = o.sel(o.i("bitcast.f32.b32", zb), res,
                o.por(o.cmp("eq", x, 0.0), o.cmp("eq", ax, _INF)))
    res = o.sel(o.add(x, y), res, o.cmp("nan", x, y))
    return o.sel(1.0, res, o.por(o.cmp("eq", x, 1.0), o.cmp("eq", y, 0.0)))


@cuda_form("rsqrt")
def rsqrt(b, x, *, dtype):
    """rsqrtf: rsqrt.approx.f32 (2 ulp)."""
    return b.instr("rsqrt.approx.f32", x)


@cuda_form("cbrt")
def cbrt(b, x, *, dtype):
    """cbrtf."""
    o = Ops(b, dtype)
    a = o.abs(x)
    r = o.i("ex2.approx.ftz.f32", o.mul(o.i("lg2.approx.f32", a), _h(0xBF2AAAAB)))  # a^(-2/3)
    yv = o.mul(a, r)                                            # a^(1/3)
    e = o.fma(yv, o.neg(o.mul(r, yv)), 1.0)                     # 1 - r y^2
    yv = o.fma(yv, o.mul(e, _h(0x3EAAAAAB)), yv)                # y (1 + e/3): one Newton step
    yv = o.sel(o.neg(yv), yv, o.cmp("lt", x, 0.0))
    xx = o.add(x, x)
    return o.sel(xx, yv, o.cmp("eq", xx, x))                    # 0, inf (NaN fails the test)


@cuda_form("hypot")
def hypot(b, x, y, *, dtype):
    """hypotf."""
    o = Ops(b, dtype)
    ia, ib = o.bits(o.abs(x)), o.bits(o.abs(y))
    lo, hi = o.i("min.s32", ib, ia), o.i("max.s32", ib, ia)
    eb = o.i("bitcast.s32.b32", o.i("and.b32", o.i("bitcast.b32.s32", hi), _b32(o, 0xFE000000)))
    scale = o.from_bits(o.isub(o.ci(0x7E800000), eb))           # 2^-e, e even-ish, exact
    ls, hs = o.mul(o.from_bits(lo), scale), o.mul(o.from_bits(hi), scale)
    res = o.sqrt(o.fma(hs, hs, o.mul(ls, ls)))
    eb1 = o.i("bitcast.s32.b32", o.i("or.b32", o.i("bitcast.b32.s32", eb), _b32(o, 0x800000)))
    res = o.mul(res, o.from_bits(eb1))
    lof = o.from_bits(lo)
    res = o.sel(o.from_bits(hi), res, o.cmp("eq", lof, 0.0))
    return o.sel(_INF, res, o.cmp("eq", lof, _INF))
