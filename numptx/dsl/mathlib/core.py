"""Constants and the typed shorthands (:class:`Ops`) the mathlib sequences are written with.

    o = Ops(b, "f32")                   # over any builder b
    r = o.fma(o.mul(x, x), 0.5, x)      # Python numbers become f32 constants
    p = o.horner(r, o.C("exp"))         # a fitted polynomial (numptx/dsl/mathlib/coeffs.py)

``EXACT`` holds ln 2, ln 10 and pi as exact fractions (60 correct digits); ``CONST[dtype]`` the
per-precision constants split into parts for Cody-Waite reductions.
"""
from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

from .coeffs import COEFFS

__all__ = ["DTYPES", "EXACT", "LN2", "PI", "CONST", "Ops", "round_bits", "parts"]

DTYPES = ("f32", "f64")


def _const_table() -> dict[str, Fraction]:
    """ln 2, ln 10 and pi to 60 digits (Decimal's ln is correctly rounded; pi by Machin's
    formula), as exact fractions."""
    with localcontext() as ctx:
        ctx.prec = 80

        def acot(n: int) -> Decimal:
            x, n2 = Decimal(1) / n, Decimal(n) * n
            s, t, k, sign = Decimal(0), x, 1, 1
            while t > Decimal(10) ** -78:
                s += sign * t / k
                t /= n2
                k, sign = k + 2, -sign
            return s
        pi = 4 * (4 * acot(5) - acot(239))
        return {"ln2": Fraction(Decimal(2).ln()), "ln10": Fraction(Decimal(10).ln()),
                "pi": Fraction(pi)}


def round_bits(v: Fraction, bits: int) -> float:
    """``v`` rounded to nearest (ties to even) with ``bits`` significant bits."""
    if v == 0:
        return 0.0
    e = math.floor(math.log2(abs(v)))
    if Fraction(2) ** e > abs(v):
        e -= 1
    elif Fraction(2) ** (e + 1) <= abs(v):
        e += 1
    scale = Fraction(2) ** (bits - 1 - e)
    return float(Fraction(round(v * scale)) / scale)


def parts(v: Fraction, bits: tuple[int, ...]) -> tuple[float, ...]:
    """Successive roundings of ``v``: part i has bits[i] significant bits of what is left."""
    out, rest = [], v
    for nb in bits:
        p = round_bits(rest, nb)
        out.append(p)
        rest -= Fraction(p)
    return tuple(out)


EXACT = _const_table()
LN2, PI = EXACT["ln2"], EXACT["pi"]


def _mk(prec: int) -> dict[str, Any]:
    """Per-precision constants (prec = 24 for f32, 53 for f64)."""
    f64 = prec == 53
    ebits = 11 if f64 else 8                    # |exponent| < 2^ebits: e * hi is exact
    c = {}
    c["LOG2E"] = round_bits(1 / LN2, prec)
    c["LN2_EXP"] = parts(LN2, (prec, prec))                       # Cody-Waite for exp
    c["LN2_LOG"] = parts(LN2, (prec - ebits - 1, prec))           # e * ln2 in log
    c["LOG2E_2"] = parts(1 / LN2, (prec, prec))
    c["LOG10E_2"] = parts(LN2 / EXACT["ln10"] / LN2, (prec, prec))  # 1 / ln 10
    c["LG2_LOG"] = parts(LN2 / EXACT["ln10"], (prec - ebits - 1, prec))  # log10(2)
    c["TWO_OVER_PI"] = round_bits(2 / PI, prec)
    c["PIO2_3"] = parts(PI / 2, (prec, prec, prec))               # Cody-Waite for trig
    c["PIO2_2"] = parts(PI / 2, (prec, prec))
    c["C1_POW"] = parts(2 / LN2, (prec, prec))                    # log2 = C1 s + C3 s^3 ...
    c["C3_POW"] = parts(Fraction(2, 3) / LN2, (prec, prec))
    return c


CONST = {"f32": _mk(24), "f64": _mk(53)}


class Ops:
    """Typed shorthands over a builder for one float type (``f32``/``f64``); Python numbers given
    as float operands become constants of that type. Integer exponents are ``s32``; bit-level
    work on the float's own width uses ``s32``/``b32`` or ``s64``/``b64``."""

    def __init__(self, b, t: str):
        if t not in DTYPES:
            raise ValueError(f"mathlib: dtype must be 'f32' or 'f64', got {t!r} (f16/bf16 are "
                             f"computed in f32 by the caller)")
        self.bd, self.t = b, t
        self.f64 = t == "f64"
        self.W = 64 if self.f64 else 32
        self.sW, self.bW = f"s{self.W}", f"b{self.W}"
        self.MANT = 52 if self.f64 else 23
        self.BIAS = 1023 if self.f64 else 127
        self.TINY = 2.0 ** -1022 if self.f64 else 2.0 ** -126
        self.PRESCALE = 54 if self.f64 else 24          # subnormals: times 2^PRESCALE
        self.K = CONST[t]

    def C(self, name: str) -> tuple[float, ...]:
        return COEFFS[(name, self.t)]

    # ---- values
    def i(self, name: str, *args):
        return self.bd.instr(name, *args)

    def c(self, v: float):
        return self.bd.const(v, self.t)

    def ci(self, v: int, t: str = "s32"):
        return self.bd.const(v, t)

    def _f(self, v):
        return self.c(v) if type(v) in (int, float) else v

    # ---- float arithmetic (round to nearest even)
    def add(self, a, b):
        return self.i(f"add.rn.{self.t}", self._f(a), self._f(b))

    def sub(self, a, b):
        return self.i(f"sub.rn.{self.t}", self._f(a), self._f(b))

    def mul(self, a, b):
        return self.i(f"mul.rn.{self.t}", self._f(a), self._f(b))

    def fma(self, a, b, c):
        return self.i(f"fma.rn.{self.t}", self._f(a), self._f(b), self._f(c))

    def div(self, a, b):
        return self.i(f"div.rn.{self.t}", self._f(a), self._f(b))

    def rcp(self, a):
        return self.i(f"rcp.rn.{self.t}", a)

    def sqrt(self, a):
        return self.i(f"sqrt.rn.{self.t}", a)

    def neg(self, a):
        return self.i(f"neg.{self.t}", a)

    def abs(self, a):
        return self.i(f"abs.{self.t}", a)

    def copysign(self, sign_of, mag):
        return self.i(f"copysign.{self.t}", sign_of, mag)

    def rint(self, a):
        return self.i(f"cvt.rni.{self.t}.{self.t}", a)

    def horner(self, z, coeffs):
        acc = self.c(coeffs[-1])
        for cc in reversed(coeffs[:-1]):
            acc = self.fma(acc, z, cc)
        return acc

    # ---- comparisons and selection
    def cmp(self, op: str, a, b):
        return self.i(f"setp.{op}.{self.t}", self._f(a), self._f(b))

    def sel(self, a, b, p):
        """p ? a : b."""
        return self.i(f"selp.{self.t}", self._f(a), self._f(b), p)

    def isel(self, a, b, p):
        return self.i("selp.s32", self.ci(a) if isinstance(a, int) else a,
                      self.ci(b) if isinstance(b, int) else b, p)

    def por(self, p, q):
        return self.i("or.pred", p, q)

    def pand(self, p, q):
        return self.i("and.pred", p, q)

    def clamp(self, x, lo: float, hi: float):
        """x limited to [lo, hi]; NaN stays NaN. Returns (value, above, below)."""
        above, below = self.cmp("gt", x, hi), self.cmp("lt", x, lo)
        return self.sel(lo, self.sel(hi, x, above), below), above, below

    # ---- integers
    def iadd(self, a, v):
        return self.i("add.s32", a, self.ci(v) if isinstance(v, int) else v)

    def isub(self, a, v):
        return self.i("sub.s32", a, self.ci(v) if isinstance(v, int) else v)

    def f2i(self, a):
        """An integral float to s32 (rounded to nearest; saturating)."""
        return self.i(f"cvt.rni.s32.{self.t}", a)

    def i2f(self, k):
        return self.i(f"cvt.rn.{self.t}.s32", k)

    def bits(self, x):
        """The float's bits as sW."""
        return self.i(f"bitcast.{self.sW}.{self.bW}", self.i(f"bitcast.{self.bW}.{self.t}", x))

    def from_bits(self, w):
        """sW bits -> float."""
        return self.i(f"bitcast.{self.t}.{self.bW}", self.i(f"bitcast.{self.bW}.{self.sW}", w))

    def wide(self, k):
        """s32 -> sW (sign-extending)."""
        return self.i("cvt.s64.s32", k) if self.f64 else k

    def narrow(self, w):
        return self.i("cvt.s32.s64", w) if self.f64 else w

    def wadd(self, a, b):
        return self.i(f"add.{self.sW}", a, self.ci(b, self.sW) if isinstance(b, int) else b)

    def wsub(self, a, b):
        return self.i(f"sub.{self.sW}", a, self.ci(b, self.sW) if isinstance(b, int) else b)

    def wshl(self, w, n: int):
        bw = self.i(f"bitcast.{self.bW}.{self.sW}", w)
        return self.i(f"bitcast.{self.sW}.{self.bW}",
                      self.i(f"shl.{self.bW}", bw, self.ci(n, "u32")))

    def wsar(self, w, n: int):
        return self.i(f"shr.{self.sW}", w, self.ci(n, "u32"))

    def wand(self, w, mask: int):
        bw = self.i(f"bitcast.{self.bW}.{self.sW}", w)
        return self.i(f"bitcast.{self.sW}.{self.bW}",
                      self.i(f"and.{self.bW}", bw, self.ci(mask, self.bW)))

    def signbit(self, x):
        return self.i(f"setp.lt.{self.sW}", self.bits(x), self.ci(0, self.sW))

    def bit_set(self, k, bit: int):
        """pred: bit ``bit`` of the s32 ``k`` is set."""
        kb = self.i("bitcast.b32.s32", k)
        m = self.i("and.b32", kb, self.ci(1 << bit, "b32"))
        return self.i("setp.ne.u32", self.i("bitcast.u32.b32", m), self.ci(0, "u32"))

    # ---- exponent work
    def pow2(self, k):
        """2^k for an s32 k in the normal range."""
        bw = self.i(f"bitcast.{self.bW}.{self.sW}", self.wide(self.iadd(k, self.BIAS)))
        return self.i(f"bitcast.{self.t}.{self.bW}",
                      self.i(f"shl.{self.bW}", bw, self.ci(self.MANT, "u32")))

    def scale(self, p, k):
        """p * 2^k, k in [-2*(BIAS-1), 2*BIAS]: two multiplications by normal powers of two, the
        first exact, so the result is rounded once (overflow -> inf, gradual underflow)."""
        k1 = self.i("shr.s32", k, self.ci(1, "u32"))
        k2 = self.isub(k, k1)
        return self.mul(self.mul(p, self.pow2(k1)), self.pow2(k2))

    def prescale(self, a):
        """(a', shift): subnormal a scaled by 2^PRESCALE (exact), shift = PRESCALE or 0."""
        small = self.cmp("lt", a, self.TINY)
        return (self.sel(self.mul(a, 2.0 ** self.PRESCALE), a, small),
                self.isel(self.PRESCALE, 0, small))

    def frexp_sqrt2(self, a):
        """a = 2^e * m with m in [sqrt(1/2), sqrt(2)) for a positive normal a: (e as s32, m)."""
        c = 0x3FE6A09E667F3BCD if self.f64 else 0x3F3504F3      # bits of sqrt(1/2)
        ia = self.bits(a)
        ib = self.wsub(ia, c)
        e = self.wsar(ib, self.MANT)
        m = self.from_bits(self.wsub(ia, self.wshl(e, self.MANT)))
        return self.narrow(e), m
