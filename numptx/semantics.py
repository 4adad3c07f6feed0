"""NumPy building blocks for the PTX semantics of :mod:`numptx.instructions`.

Everything here is vectorized (no Python loop over elements, except the exact fallback of
:func:`fma_f64` for operands whose magnitudes make the error-free transformations unsafe).
Arrays use the canonical representation of the design (docs/design/programs.md, section 2):
f16 -> float16, bf16 -> uint16 bits, f16x2/bf16x2/b32 -> uint32 bits, f32 -> float32, ...

Rounding is IEEE round-to-nearest-even throughout. Two tools make single roundings exact:

* ``two_sum(a, b)`` (Knuth) returns ``s = RN(a + b)`` and the exact error ``e`` with
  ``s + e == a + b`` exactly (float64, finite, no overflow).
* round-to-odd: rounding the exact value ``s + e`` to 53 bits *to odd* and then once more to
  nearest-even at ``p <= 51`` bits is the correctly rounded result at ``p`` bits (Boldo and
  Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to
  odd", IEEE Trans. Computers 57(4), 2008). This gives exact fma for f32/f16/bf16 and exact
  int64 -> float conversions.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from .valuetypes import ROWS

__all__ = [
    "F32_TINY", "F64_TINY", "round_f32_directed", "directed_f32", "F32_CANONICAL_NAN", "two_sum", "two_prod", "round_to_odd64",
    "round_sum", "ftz32", "f32_to_bf16", "bf16_to_f32", "f64_to_bf16", "bf16_bits", "f64_to_f32_odd",
    "to_float", "from_float", "tf32", "fma_f32", "fma_f64", "fma_small", "fmin", "fmax",
    "float_to_int", "int_to_float", "int_div", "int_rem", "shl", "shr", "popc", "clz", "brev",
    "mul_hi", "split16", "pack16", "ordered", "copysign",
]

F32_TINY = np.float32(2.0 ** -126)          # smallest normal f32: .ftz flushes anything below
F64_TINY = np.float64(2.0 ** -1022)
F32_CANONICAL_NAN = np.uint32(0x7FFFFFFF)   # PTX canonical f32 NaN
_F32_MAX = np.float32(np.finfo(np.float32).max)


def _a(x, dtype=None):
    """At-least-1-d array (numpy scalar arithmetic warns on integer wrap; arrays do not)."""
    return np.atleast_1d(np.asarray(x, dtype))


# ---------------------------------------------------------------- error-free transformations
def two_sum(a, b):
    """s = RN(a + b) and e with s + e == a + b exactly (Knuth's branch-free TwoSum)."""
    a, b = _a(a, np.float64), _a(b, np.float64)
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def _split(a):
    """Veltkamp split of a float64 into two 26-bit halves (|a| < 2**995)."""
    c = a * 134217729.0  # 2**27 + 1
    hi = c - (c - a)
    return hi, a - hi


def two_prod(a, b):
    """p = RN(a * b) and e with p + e == a * b exactly (Dekker; needs moderate exponents)."""
    a, b = _a(a, np.float64), _a(b, np.float64)
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def round_to_odd64(s, e):
    """The exact value s + e (s = RN(s + e), e its exact error) rounded to 53 bits *to odd*."""
    s, e = _a(s, np.float64), _a(e, np.float64)
    inexact = (e != 0) & np.isfinite(s)
    even = (s.view(np.uint64) & np.uint64(1)) == 0
    toward = np.where(e > 0, np.inf, -np.inf)
    return np.where(inexact & even, np.nextafter(s, toward), s)


def f64_to_f32_odd(x):
    """float64 -> float32 rounded to odd (finite overflow gives +-FLT_MAX, which is odd)."""
    x = _a(x, np.float64)
    y = x.astype(np.float32)
    inexact = np.isfinite(x) & (y.astype(np.float64) != x)
    big = inexact & np.isinf(y)
    y = np.where(big, np.copysign(_F32_MAX, y), y).astype(np.float32)
    even = (y.view(np.uint32) & np.uint32(1)) == 0
    toward = np.where(x > y, np.float32(np.inf), np.float32(-np.inf)).astype(np.float32)
    return np.where(inexact & ~big & even, np.nextafter(y, toward), y).astype(np.float32)


# ---------------------------------------------------------------- bf16, f16, tf32
def f32_to_bf16(x):
    """float32 -> bf16 bits (uint16), round to nearest even; NaN stays a (quiet) NaN."""
    x = _a(x, np.float32)
    b = x.view(np.uint32)
    r = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    q = (b >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(np.isnan(x), q, r).astype(np.uint16)


def bf16_to_f32(bits):
    """bf16 bits (uint16) -> float32 (exact)."""
    return (_a(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f64_to_bf16(x):
    """float64 -> bf16 bits, correctly rounded (round to odd at 24 bits, then to nearest even)."""
    return f32_to_bf16(f64_to_f32_odd(x))


def bf16_bits(value) -> int:
    """One number -> its bf16 bit pattern, rounded once from the exact value (as
    :func:`f64_to_bf16`): the only scalar bf16 rounding in numptx (DSL constants, Stack PTX
    constants and kernel arguments use it).

    >>> hex(bf16_bits(1 + 2**-8 + 2**-30))     # rounding through f32 first would give 0x3f80
    '0x3f81'
    """
    return int(f64_to_bf16(np.float64(value)).reshape(-1)[0])


def tf32(bits):
    """b32 bits of a .tf32 operand -> float32 with the low 13 mantissa bits cleared."""
    return (_a(bits).astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def mma_lanes(a0) -> tuple:
    """(warps, g, t) of an mma.sync fragment array: lane = index % 32, g = lane >> 2 (the
    groupID of the PTX ISA's fragment layouts), t = lane % 4 (threadID_in_group). A size that
    is no whole number of warps is an error: mma.sync is a warp-level instruction."""
    n = np.asarray(a0).size
    if n % 32:
        raise ValueError(f"mma.sync is a warp-level instruction: the emulated arrays must hold "
                         f"whole warps of 32 lanes (got {n} elements)")
    lane = np.arange(32)
    return n // 32, lane >> 2, lane & 3


def to_float(x, t):
    """Canonical array of float type t ('f16', 'bf16', 'f32', 'f64') -> float64 (exact)."""
    if t == "bf16":
        return bf16_to_f32(x).astype(np.float64)
    return _a(x).astype(np.float64)


def round_sum(s, e, t):
    """The exact value s + e (s = RN(s + e) in float64, e its exact error: see two_sum),
    correctly rounded to float type t, in t's canonical representation."""
    if t == "f64":
        return _a(s, np.float64)
    o = round_to_odd64(s, e)
    if t == "f32":
        return o.astype(np.float32)
    if t == "f16":
        return o.astype(np.float16)      # NumPy rounds float64 -> float16 directly (once)
    if t == "bf16":
        return f64_to_bf16(o)
    raise ValueError(f"round_sum: not a float type: {t!r}")


def from_float(x, t):
    """A float64 array correctly rounded to float type t (canonical representation)."""
    x = _a(x, np.float64)
    return round_sum(x, np.zeros_like(x), t)


def split16(x):
    """uint32 -> (low, high) uint16 halves (element 0 is the low half)."""
    x = _a(x).astype(np.uint32)
    return (x & np.uint32(0xFFFF)).astype(np.uint16), (x >> np.uint32(16)).astype(np.uint16)


def pack16(lo, hi):
    """Two uint16 (bit patterns) -> uint32, ``lo`` in bits 0..15."""
    return (_a(lo).view(np.uint16).astype(np.uint32)
            | (_a(hi).view(np.uint16).astype(np.uint32) << np.uint32(16)))


# ---------------------------------------------------------------- f32 helpers
def ftz32(x):
    """Flush f32 subnormals to sign-preserving zero (PTX .ftz)."""
    x = _a(x, np.float32)
    return np.where(np.abs(x) < F32_TINY, np.copysign(np.float32(0), x), x).astype(np.float32)


def fma_small(a, b, c, t):
    """a * b + c with a single rounding for t in ('f32', 'f16', 'bf16'): the product of two such
    values is exact in float64, two_sum makes the sum exact, round_sum rounds once."""
    a, b, c = to_float(a, t), to_float(b, t), to_float(c, t)
    p = a * b
    s, e = two_sum(p, c)
    r = round_sum(s, e, t)
    special = ~(np.isfinite(a) & np.isfinite(b) & np.isfinite(c))
    if special.any():                     # inf/NaN operands: IEEE rules of a*b+c in float64
        r = np.where(special, from_float(p + c, t), r)
    return r


def round_f32_directed(s, e, mode: str, p=None, c=None):
    """The exact value s + e (s = RN(s + e) in float64, e its exact error) rounded to f32
    toward zero (``rz``), -inf (``rm``) or +inf (``rp``). Rounding to odd at 53 bits first keeps
    the value on the same side of every f32, so one directed step from RN32 is exact. ``p`` and
    ``c`` are the two addends (for the sign of an exact zero: -0 under ``rm`` unless both are
    +0, IEEE 754 6.3)."""
    o = round_to_odd64(s, e)
    with np.errstate(all="ignore"):
        y = o.astype(np.float32)
        yd = y.astype(np.float64)
        if mode == "rm":
            step = yd > o
            toward = np.float32(-np.inf)
        elif mode == "rp":
            step = yd < o
            toward = np.float32(np.inf)
        elif mode == "rz":
            step = np.abs(yd) > np.abs(o)
            toward = np.float32(0)
        else:
            raise ValueError(f"round_f32_directed: mode must be rz, rm or rp, not {mode!r}")
        step &= ~np.isnan(o)
        y = np.where(step, np.nextafter(y, toward), y).astype(np.float32)
    if mode == "rm" and p is not None:
        zero = (o == 0)
        both_pos = ~np.signbit(_a(p, np.float64)) & ~np.signbit(_a(c, np.float64))
        y = np.where(zero, np.where(both_pos, np.float32(0.0), np.float32(-0.0)), y)
    return y.astype(np.float32)


def directed_f32(kind: str, mode: str):
    """The semantic of ``add``/``sub``/``mul``/``fma`` ``.rz/.rm/.rp.f32``: exact in float64
    (the product of two f32 is exact there, TwoSum makes the sum exact), rounded once."""
    def op(*xs):
        v = [to_float(x, "f32") for x in xs]
        if kind == "mul":
            p, c = v[0] * v[1], np.zeros_like(v[0] * v[1])
        elif kind == "fma":
            p, c = v[0] * v[1], v[2]
        else:
            p, c = v[0], (-v[1] if kind == "sub" else v[1])
        with np.errstate(all="ignore"):
            s, e = two_sum(p, c)
            r = round_f32_directed(s, e, mode, p, c)
            special = ~(np.isfinite(p) & np.isfinite(c))    # inf/NaN operands: IEEE rules
            if special.any():
                r = np.where(special, (p + c).astype(np.float32), r)
        if kind == "mul":                    # x * 0 signs: IEEE sign of a product
            zero = (v[0] * v[1]) == 0
            r = np.where(zero, (v[0] * v[1]).astype(np.float32), r)
        return r.astype(np.float32)
    return op


def fma_f32(a, b, c, ftz=False):
    """fma.rn.f32 (bit exact). With ftz, subnormal inputs and results flush to signed zero."""
    if ftz:
        a, b, c = ftz32(a), ftz32(b), ftz32(c)
    r = fma_small(a, b, c, "f32")
    return ftz32(r) if ftz else r


def _fma64_exact(a: float, b: float, c: float) -> float:
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return a * b + c                  # IEEE signed-zero rules; a*b is exact here
    try:
        return float(exact)               # int / int true division: correctly rounded
    except OverflowError:
        return float("inf") if exact > 0 else float("-inf")


def fma_f64(a, b, c):
    """fma.rn.f64 (bit exact): Dekker's product, Knuth's sum and Boldo-Melquiond's
    round-to-odd emulation of fma; operands whose exponents could make the error-free
    transformations overflow or underflow take an exact Fraction path (rare)."""
    a, b, c = np.broadcast_arrays(_a(a, np.float64), _a(b, np.float64), _a(c, np.float64))
    a, b, c = a.copy(), b.copy(), c.copy()
    uh, ul = two_prod(a, b)
    th, tl = two_sum(c, uh)
    v, ve = two_sum(tl, ul)
    r = th + round_to_odd64(v, ve)
    fin = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    mag = lambda x, lo, hi: (np.abs(x) >= lo) & (np.abs(x) <= hi)  # noqa: E731
    safe = fin & mag(a, 2.0 ** -450, 2.0 ** 450) & mag(b, 2.0 ** -450, 2.0 ** 450) \
        & (np.abs(c) <= 2.0 ** 1000)
    zero_prod = fin & ((a == 0) | (b == 0))
    naive = a * b + c
    r = np.where(safe, r, naive)
    # finite product with an infinite/NaN c: the exact product is finite, so the result is c
    r = np.where(np.isfinite(a) & np.isfinite(b) & ~np.isfinite(c), c, r)
    r = np.where(zero_prod, naive, r)
    hard = np.flatnonzero(fin & ~safe & ~zero_prod)
    if hard.size:
        r = r.copy()
        for i in hard:
            r.flat[i] = _fma64_exact(float(a.flat[i]), float(b.flat[i]), float(c.flat[i]))
    return r


def _less(x, y):
    """x < y with -0.0 < +0.0."""
    return (x < y) | ((x == y) & np.signbit(x) & ~np.signbit(y))


def fmin(x, y, nan_bits):
    """PTX min: a NaN operand yields the other operand; two NaNs yield the canonical NaN;
    -0.0 < +0.0."""
    x, y = np.broadcast_arrays(_a(x), _a(y))
    r = np.where(_less(y, x), y, x)
    r = np.where(np.isnan(x), y, r)
    r = np.where(np.isnan(y) & ~np.isnan(x), x, r)
    nan = np.array(nan_bits, dtype=f"u{x.dtype.itemsize}").view(x.dtype)
    return np.where(np.isnan(x) & np.isnan(y), nan, r).astype(x.dtype)


def fmax(x, y, nan_bits):
    """PTX max: NaN rules of :func:`fmin`; +0.0 > -0.0."""
    x, y = np.broadcast_arrays(_a(x), _a(y))
    r = np.where(_less(x, y), y, x)
    r = np.where(np.isnan(x), y, r)
    r = np.where(np.isnan(y) & ~np.isnan(x), x, r)
    nan = np.array(nan_bits, dtype=f"u{x.dtype.itemsize}").view(x.dtype)
    return np.where(np.isnan(x) & np.isnan(y), nan, r).astype(x.dtype)


def copysign(magnitude, sign):
    """PTX copysign: ``magnitude`` with the sign of ``sign``; a NaN ``sign`` counts as +. A
    NaN's sign is not specified (the GPU's results are its canonical NaN, +; NumPy's and libm's
    invalid results are -NaN on x86 or +NaN elsewhere): so the emulator, the interpreter and
    the GPU agree on NaNs that operations produce."""
    sign = _a(sign)
    with np.errstate(invalid="ignore"):
        return np.copysign(magnitude, np.where(np.isnan(sign), np.ones_like(sign), sign))


def ordered(op, a, b):
    """Ordered float comparison (false when either operand is NaN; PTX setp eq..ge, ne too)."""
    with np.errstate(invalid="ignore"):
        r = op(a, b)
    return r & ~(np.isnan(a) | np.isnan(b))


# ---------------------------------------------------------------- conversions
_INT_INFO = {r.name: (r.np.type, r.bits, r.kind == "signed")  # type -> (dtype, bits, signed)
             for r in ROWS if r.kind in ("signed", "unsigned")}
_ROUND = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}


def float_to_int(x, src, dst, mode):
    """cvt.<mode>.<dst>.<src>: round to an integer (mode rni/rzi/rmi/rpi), then clamp to the
    destination range (PTX: float-to-integer conversions saturate by default). NaN gives 0,
    except 1 << (width - 1) when the source is f64 or the destination is 64-bit (PTX ISA,
    cvt, Integer Notes)."""
    dtype, bits, signed = _INT_INFO[dst]
    with np.errstate(invalid="ignore"):
        r = _ROUND[mode](to_float(x, src))
    lo = -(2.0 ** (bits - 1)) if signed else 0.0
    hi = 2.0 ** (bits - 1) if signed else 2.0 ** bits    # first value too large
    nan = np.isnan(r)
    over = ~nan & (r >= hi)
    under = ~nan & (r < lo)
    mid = ~(nan | over | under)
    out = np.where(mid, r, 0.0).astype(dtype)
    info = np.iinfo(dtype)
    out = np.where(over, dtype(info.max), out)
    out = np.where(under, dtype(info.min), out)
    if src != "f64" and bits == 32:
        nan_val = dtype(0)
    else:                                     # 1 << (width - 1): MIN for signed types
        nan_val = dtype(info.min) if signed else dtype(1 << (bits - 1))
    return np.where(nan, nan_val, out).astype(dtype)


def int_to_float(x, src, dst):
    """cvt.rn.<dst>.<src> for integer src: correctly rounded (an int64 is split into two exact
    float64 halves and summed with two_sum; round_sum rounds once)."""
    dtype, bits, signed = _INT_INFO[src]
    x = _a(x).astype(dtype)
    if bits == 32:
        f = x.astype(np.float64)
        return round_sum(f, np.zeros_like(f), dst)
    if signed:
        hi = (x >> np.int64(32)).astype(np.float64)
    else:
        hi = (x >> np.uint64(32)).astype(np.float64)
    lo = (x.view(np.uint64) & np.uint64(0xFFFFFFFF)).astype(np.float64)
    s, e = two_sum(hi * 4294967296.0, lo)
    return round_sum(s, e, dst)


# ---------------------------------------------------------------- integers
def int_div(a, b):
    """PTX div.s/u: quotient truncated toward zero, wrapping (MIN / -1 == MIN). Division by zero
    is unspecified in PTX; numptx defines it as all bits set (u: MAX, s: -1)."""
    a, b = np.broadcast_arrays(_a(a), _a(b))
    dt = a.dtype
    zero = b == 0
    signed = np.issubdtype(dt, np.signedinteger)
    ovf = (a == np.iinfo(dt).min) & (b == -1) if signed else np.zeros(a.shape, bool)
    bb = np.where(zero | ovf, dt.type(1), b).astype(dt)
    if signed:
        rem = np.fmod(a, bb)
        q = ((a - rem) // bb).astype(dt)
        q = np.where(ovf, a, q)
    else:
        q = a // bb
    return np.where(zero, dt.type(-1) if signed else np.iinfo(dt).max, q).astype(dt)


def int_rem(a, b):
    """PTX rem.s/u: remainder of the truncated division (sign of the dividend). By zero
    (unspecified in PTX) numptx returns the dividend; MIN rem -1 == 0."""
    a, b = np.broadcast_arrays(_a(a), _a(b))
    dt = a.dtype
    zero = b == 0
    signed = np.issubdtype(dt, np.signedinteger)
    bb = np.where(zero, dt.type(1), b).astype(dt)
    if signed:
        bb = np.where(bb == -1, dt.type(1), bb).astype(dt)   # x rem -1 == 0 == x rem 1
        r = np.fmod(a, bb)
    else:
        r = a % bb
    return np.where(zero, a, r).astype(dt)


def mul_hi(a, b):
    """High half of the full product of two 32-bit integers."""
    a, b = _a(a), _a(b)
    wide = np.int64 if a.dtype == np.int32 else np.uint64
    p = a.astype(wide) * b.astype(wide)
    return (p >> wide(32)).astype(a.dtype)


def shl(a, n):
    """shl: shift left; amounts >= the width give 0 (PTX clamps the amount to the width)."""
    a, n = _a(a), _a(n).astype(np.uint32)
    w = a.dtype.itemsize * 8
    big = n >= w
    s = np.where(big, 0, n).astype(a.dtype)
    return np.where(big, a.dtype.type(0), a << s).astype(a.dtype)


def shr(a, n):
    """shr: logical for unsigned/bit types, arithmetic (sign fill) for signed; amounts >= the
    width are clamped to the width (0 or all sign bits)."""
    a, n = _a(a), _a(n).astype(np.uint32)
    w = a.dtype.itemsize * 8
    s = np.minimum(n, w - 1).astype(a.dtype)
    r = a >> s
    if not np.issubdtype(a.dtype, np.signedinteger):
        r = np.where(n >= w, a.dtype.type(0), r)
    return r.astype(a.dtype)


_M1 = (0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F)


def popc(x):
    """Population count (SWAR), as uint32."""
    x = _a(x)
    u = np.uint64 if x.dtype.itemsize == 8 else np.uint32
    x = x.view(u) if x.dtype.itemsize in (4, 8) else x.astype(u)
    m1, m2, m4 = (u(m & int(np.iinfo(u).max)) for m in _M1)
    x = x - ((x >> u(1)) & m1)
    x = (x & m2) + ((x >> u(2)) & m2)
    x = (x + (x >> u(4))) & m4
    x = (x * u(0x0101010101010101 & int(np.iinfo(u).max))) >> u(8 * x.dtype.itemsize - 8)
    return x.astype(np.uint32)


def clz(x):
    """Count leading zeros (clz(0) == width), as uint32."""
    x = _a(x)
    u = np.uint64 if x.dtype.itemsize == 8 else np.uint32
    x = x.view(u).copy()
    for s in (1, 2, 4, 8, 16, 32)[: 5 + (u is np.uint64)]:
        x |= x >> u(s)
    return (np.uint32(8 * x.dtype.itemsize) - popc(x)).astype(np.uint32)


def brev(x):
    """Bit reversal."""
    x = _a(x)
    dt = x.dtype
    u = np.uint64 if dt.itemsize == 8 else np.uint32
    x = x.view(u).copy()
    full = int(np.iinfo(u).max)
    for s, m in ((1, 0x5555555555555555), (2, 0x3333333333333333), (4, 0x0F0F0F0F0F0F0F0F),
                 (8, 0x00FF00FF00FF00FF), (16, 0x0000FFFF0000FFFF), (32, 0x00000000FFFFFFFF)):
        if s >= 8 * dt.itemsize:
            break
        mm = u(m & full)
        x = ((x >> u(s)) & mm) | ((x & mm) << u(s))
    return x.view(dt)
