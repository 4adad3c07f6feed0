"""Transcendental functions as sequences of instruction-table rows, written once against the
builder protocol of docs/design/dsl.md::

    from numptx.dsl import mathlib as M
    y = M.exp(M.EagerBuilder(), np.float32([0.5, 1.0]), dtype="f32", fastmath=False)

A function ``fn(b, x, *, dtype, fastmath)`` (binary ones ``fn(b, x, y, ...)``) calls only
``b.instr(name, *values)`` (a row of :data:`numptx.instructions.TABLE`) and
``b.const(value, type)``. The tracer's graph builder records the calls as primitive nodes;
:class:`EagerBuilder` runs each row's NumPy semantic at once, so an eager evaluation equals the
emulation of the lowered stub bit for bit. :func:`evaluate` is the eager shortcut.

Accurate mode (``fastmath=False``) uses only exact rows: ``.rn`` arithmetic, ``fma.rn``,
``div.rn``/``rcp.rn``/``sqrt.rn``, integer and bit operations, bit casts, conversions with an
explicit rounding, ``setp``/``selp``; no ``.approx`` row, so the emulated result is the GPU
result. The methods (all branch-free; special values are patched with ``selp`` at the end):

* exp, exp2, expm1, sinh/cosh/sigmoid/tanh through them: Cody-Waite reduction
  ``r = x - k ln2`` with ``k = rint(x log2 e)`` and ``ln2`` split in two parts (the first
  ``fma`` is exact), a minimax polynomial for ``e^r`` on [-ln2/2, ln2/2], and a scaling by
  ``2^k`` in two exact-exponent multiplications (so overflow gives inf and underflow rounds
  once into the subnormals).
* log, log2, log10, log1p: ``x = 2^e m`` with ``m`` in [sqrt(1/2), sqrt(2)) from the bits
  (subnormals pre-scaled by ``2^24``/``2^54``); ``log(1+f)``, ``f = m - 1`` exactly, by a
  polynomial in ``f`` (f32) or in ``s = f / (2 + f)`` with a correction term (f64);
  ``e ln2`` added in two parts with an exact Fast2Sum.
* sin, cos, tan: ``k = rint(x 2/pi)``, ``r = x - k pi/2`` with pi/2 in three parts (the first
  ``fma`` is exact, the second is added with 2Sum), polynomials for sin and cos on
  |r| <= 0.9 (pi/4 plus the misrounding of k at large |x|), quadrant by ``selp``; tan is
  the quotient of the two as double words. Accurate for |x| < 2^20 (f32) / 2^48 (f64);
  beyond that the result is meaningless but finite (see docs/dsl_accuracy.md).
* arctan: ``u = x`` or ``-1/x`` (one division), a polynomial on [-1, 1], ``pi/2`` added in two
  parts. cbrt: exponent divided by 3 with a multiply-high, Newton's iteration for ``m^-1/3``
  from a polynomial seed, one final correction with an exact residual. hypot: power-of-two
  scaling and ``sqrt(fma(a, a, b*b))``. pow: ``log2|x|`` in double-word arithmetic, times
  ``y`` with an exact product, ``exp2`` of the double-word result, then the C99 special cases.

Polynomial coefficients are weighted minimax fits of the relative error (``_fit_coefficients``
regenerates them: Remez exchange in 70-digit decimal arithmetic on the Taylor series of each
function), rounded to the working precision.

Fast mode (``fastmath=True``, f32 only; f64 falls back to the accurate sequence) uses the raw
PTX approximations: ``ex2.approx.ftz``, ``lg2.approx.ftz``, ``sin/cos.approx.ftz``,
``tanh.approx``, ``rcp.approx.ftz``, ``rsqrt.approx.ftz``, ``div.approx.ftz``. Functions with no
such form (expm1, log1p, arctan, arctan2, cbrt, hypot) use the accurate sequence in both
modes.
Measured accuracy: docs/dsl_accuracy.md (``python benchmarks/accuracy_dsl.py``).
"""
from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any, Callable

import numpy as np

from ..instructions import NP_DTYPE, TABLE

__all__ = [
    "EagerBuilder", "InstrCounter", "evaluate", "ulp_error", "FUNCTIONS", "FAST_FORMS", "DTYPES",
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "tanh",
    "sinh", "cosh", "arctan", "arctan2", "pow", "sigmoid", "hypot", "cbrt", "rsqrt", "rcp",
]

DTYPES = ("f32", "f64")
_INF = float("inf")
_NAN = float("nan")


# ============================================================================== builders
def _canonical(value: Any, t: str):
    """A Python/NumPy number as a NumPy scalar of value type ``t`` (floats round to nearest,
    integers wrap, pred is a bool)."""
    dt = NP_DTYPE[t]
    if t == "pred":
        return np.bool_(bool(value))
    if t in ("f16", "f32", "f64"):
        return dt.type(value)
    if t == "bf16":
        raise ValueError("mathlib: no bf16 constants (bf16 math is computed in f32)")
    bits = dt.itemsize * 8
    v = int(value) & ((1 << bits) - 1)
    if t[0] == "s" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return dt.type(v)


class EagerBuilder:
    """The builder protocol on NumPy values: ``instr`` applies the table row's semantic at once,
    ``const`` is a NumPy scalar in the canonical representation of its type. Operands must
    have the canonical dtype of the row's operand types (a mismatch raises TypeError)."""

    def instr(self, name: str, *args):
        row = TABLE[name]
        if len(args) != len(row.operands):
            raise TypeError(f"{name} takes {len(row.operands)} operand(s), got {len(args)}")
        vals = []
        for i, (a, t) in enumerate(zip(args, row.operand_types)):
            a = np.asarray(a)
            if a.dtype != NP_DTYPE[t]:
                raise TypeError(f"{name}: operand {i} has dtype {a.dtype}, the row takes {t} "
                                f"({NP_DTYPE[t]})")
            vals.append(a)
        out = np.asarray(row.apply(*vals))
        dt = NP_DTYPE[row.result_types[0]]
        return out if out.dtype == dt else out.astype(dt)

    def const(self, value: Any, dtype: str):
        return _canonical(value, dtype)


class _Tag:
    __slots__ = ("type", "key")

    def __init__(self, t, key):
        self.type, self.key = t, key


class InstrCounter:
    """A type-checking builder that only records: values are type tags, every ``instr`` call is
    checked against the row's operand types and counted (``calls``; ``names`` in call order).
    ``unique`` counts distinct (row, operands) pairs, i.e. what remains after the graph's
    hash-consing; ``const_only`` counts calls whose operands are all constants (the graph
    would fold them). ``input(t)`` makes an input value."""

    def __init__(self):
        self.names: list[str] = []
        self._seen: dict = {}
        self._n = 0
        self.const_only = 0

    def _new(self, t, key=None):
        self._n += 1
        return _Tag(t, key if key is not None else ("v", self._n))

    def input(self, t: str):
        return self._new(t)

    def const(self, value, dtype: str):
        v = _canonical(value, dtype)
        return self._new(dtype, ("c", dtype, v.tobytes()))

    def instr(self, name: str, *args):
        row = TABLE[name]
        want = row.operand_types
        if len(args) != len(want):
            raise TypeError(f"{name} takes {len(want)} operand(s), got {len(args)}")
        for i, (a, t) in enumerate(zip(args, want)):
            if not isinstance(a, _Tag) or a.type != t:
                got = a.type if isinstance(a, _Tag) else type(a).__name__
                raise TypeError(f"{name}: operand {i} is {got}, the row takes {t}")
        self.names.append(name)
        keys = [a.key for a in args]
        if keys and all(k[0] == "c" for k in keys):
            self.const_only += 1
        if "commutative" in row.flags:
            keys[:2] = sorted(keys[:2], key=repr)
        key = (name, *keys)
        tag = self._seen.get(key)
        if tag is None:
            tag = self._seen[key] = self._new(row.result_types[0])
        return tag

    @property
    def calls(self) -> int:
        return len(self.names)

    @property
    def unique(self) -> int:
        return len(self._seen)


def evaluate(fn: Callable | str, *args, dtype: str = "f32", fastmath: bool = False):
    """Eager evaluation: ``fn`` (a function or a FUNCTIONS name) on NumPy inputs cast to
    ``dtype``; returns an array of that dtype (the emulated result of the stub)."""
    f = FUNCTIONS[fn][0] if isinstance(fn, str) else fn
    dt = NP_DTYPE[dtype]
    vals = [np.asarray(a, dtype=dt) for a in args]
    out = np.asarray(f(EagerBuilder(), *vals, dtype=dtype, fastmath=fastmath))
    shape = np.broadcast_shapes(*(v.shape for v in vals))
    if out.size == math.prod(shape):
        return out.reshape(shape)
    return np.broadcast_to(out, shape).copy()


# ============================================================================== constants
def _hx(*s: str) -> tuple[float, ...]:
    return tuple(float.fromhex(v) for v in s)


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


def _round_bits(v: Fraction, bits: int) -> float:
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


def _parts(v: Fraction, bits: tuple[int, ...]) -> tuple[float, ...]:
    """Successive roundings of ``v``: part i has bits[i] significant bits of what is left."""
    out, rest = [], v
    for nb in bits:
        p = _round_bits(rest, nb)
        out.append(p)
        rest -= Fraction(p)
    return tuple(out)


_K = _const_table()
_LN2, _PI = _K["ln2"], _K["pi"]
_P = {24: "f32", 53: "f64"}


def _mk(prec: int) -> dict[str, Any]:
    """Per-precision constants (prec = 24 for f32, 53 for f64)."""
    f64 = prec == 53
    ebits = 11 if f64 else 8                    # |exponent| < 2^ebits: e * hi is exact
    c = {}
    c["LOG2E"] = _round_bits(1 / _LN2, prec)
    c["LN2_EXP"] = _parts(_LN2, (prec, prec))                       # Cody-Waite for exp
    c["LN2_LOG"] = _parts(_LN2, (prec - ebits - 1, prec))           # e * ln2 in log
    c["LOG2E_2"] = _parts(1 / _LN2, (prec, prec))
    c["LOG10E_2"] = _parts(_LN2 / _K["ln10"] / _LN2, (prec, prec))  # 1 / ln 10
    c["LG2_LOG"] = _parts(_LN2 / _K["ln10"], (prec - ebits - 1, prec))  # log10(2)
    c["TWO_OVER_PI"] = _round_bits(2 / _PI, prec)
    c["PIO2_3"] = _parts(_PI / 2, (prec, prec, prec))               # Cody-Waite for trig
    c["PIO2_2"] = _parts(_PI / 2, (prec, prec))
    c["C1_POW"] = _parts(2 / _LN2, (prec, prec))                    # log2 = C1 s + C3 s^3 ...
    c["C3_POW"] = _parts(Fraction(2, 3) / _LN2, (prec, prec))
    return c


_CONST = {"f32": _mk(24), "f64": _mk(53)}
# (name, dtype): c_0, c_1, ... from _fit_coefficients; the comment is the fit's max weighted
# (relative) error before rounding the coefficients
_COEFFS = {
    ("exp", "f32"): _hx(  # 2^-28.2
        "0x1.fffffc0000000p-2", "0x1.5554880000000p-3", "0x1.55591a0000000p-5",
        "0x1.12403a0000000p-7", "0x1.6a19ac0000000p-10",),
    ("exp", "f64"): _hx(  # 2^-57.8
        "0x1.000000000000bp-1", "0x1.55555555554f0p-3", "0x1.55555555501cep-5",
        "0x1.1111111129bf3p-7", "0x1.6c16c185b958fp-10", "0x1.a01a01229a547p-13",
        "0x1.a019959c726a1p-16", "0x1.71df2f8e62109p-19", "0x1.28b1b4b55f1aap-22",
        "0x1.ad7a63fd19699p-26",),
    ("expm1", "f32"): _hx(  # 2^-31.9
        "0x1.0000000000000p-1", "0x1.5555540000000p-3", "0x1.5554aa0000000p-5",
        "0x1.11118e0000000p-7", "0x1.6d79600000000p-10", "0x1.a033360000000p-13",),
    ("expm1", "f64"): _hx(  # 2^-61.6
        "0x1.0000000000000p-1", "0x1.5555555555559p-3", "0x1.555555555553cp-5",
        "0x1.111111110f489p-7", "0x1.6c16c16c1fc2ap-10", "0x1.a01a01b0dbe29p-13",
        "0x1.a01a017964fdbp-16", "0x1.71ddf5a57558ap-19", "0x1.27e538b53306bp-22",
        "0x1.af63d03fe0e9fp-26", "0x1.1ee86e6e7a666p-29",),
    ("exp2", "f32"): _hx(  # 2^-28.3
        "0x1.ebfbdc0000000p-3", "0x1.c6af880000000p-5", "0x1.3b2e0e0000000p-7",
        "0x1.5f04280000000p-10", "0x1.414e780000000p-13",),
    ("exp2", "f64"): _hx(  # 2^-57.9
        "0x1.ebfbdff82c5a1p-3", "0x1.c6b08d704a045p-5", "0x1.3b2ab6fba0757p-7",
        "0x1.5d87fe78c38bep-10", "0x1.4309130dd2928p-13", "0x1.ffcbfbc7701f9p-17",
        "0x1.62bfc9d14d1c1p-20", "0x1.b526534bd46d4p-24", "0x1.e617f7e2abdebp-28",
        "0x1.e7c6a4d996a6cp-32",),
    ("log1p", "f32"): _hx(  # 2^-27.4
        "0x1.5555540000000p-2", "-0x1.0002280000000p-2", "0x1.99a00e0000000p-3",
        "-0x1.5472340000000p-3", "0x1.22d9700000000p-3", "-0x1.0d85340000000p-3",
        "0x1.05607e0000000p-3", "-0x1.38c31a0000000p-4",),
    ("atanh", "f64"): _hx(  # 2^-59.5
        "0x1.5555555555592p-1", "0x1.999999997feb3p-2", "0x1.24924941e3f34p-2",
        "0x1.c71c52138761cp-3", "0x1.74663cede0a28p-3", "0x1.39a1eb31460aap-3",
        "0x1.2f03937492d7ap-3",),
    ("atanh5", "f32"): _hx(  # 2^-36.8
        "0x1.999a000000000p-2", "0x1.2452a60000000p-2", "0x1.df9a9e0000000p-3",),
    ("atanh5", "f64"): _hx(  # 2^-66.3
        "0x1.9999999999b2fp-2", "0x1.2492492457f6ap-2", "0x1.c71c722d3a560p-3",
        "0x1.745ce9f1cc41cp-3", "0x1.3b1ee98d445dbp-3", "0x1.0f80213898ed6p-3",
        "0x1.0e40bd2bf1354p-3",),
    ("sin", "f32"): _hx(  # 2^-26.4
        "-0x1.5555300000000p-3", "0x1.1100140000000p-7", "-0x1.9720fa0000000p-13",),
    ("sin", "f64"): _hx(  # 2^-65.6
        "-0x1.5555555555555p-3", "0x1.11111111110f1p-7", "-0x1.a01a01a014b0dp-13",
        "0x1.71de3a4ec2cf5p-19", "-0x1.ae644d8d37841p-26", "0x1.611dc510b7c50p-33",
        "-0x1.a96d043257611p-41",),
    ("cos", "f32"): _hx(  # 2^-31.0
        "0x1.55553c0000000p-5", "-0x1.6c04640000000p-10", "0x1.97f5a40000000p-16",),
    ("cos", "f64"): _hx(  # 2^-60.7
        "0x1.555555555551dp-5", "-0x1.6c16c16c0fa1ep-10", "0x1.a01a0195443a1p-16",
        "-0x1.27e4f3578ab8fp-22", "0x1.1ee71caebfa02p-29", "-0x1.8e6519e4a2bd2p-37",),
    ("atan", "f32"): _hx(  # 2^-28.5
        "-0x1.55553e0000000p-2", "0x1.9991fe0000000p-3", "-0x1.2421b60000000p-3",
        "0x1.c099fe0000000p-4", "-0x1.5834920000000p-4", "0x1.dac9e80000000p-5",
        "-0x1.fed1660000000p-6", "0x1.65a6620000000p-7", "-0x1.d62ff60000000p-10",),
    ("atan", "f64"): _hx(  # 2^-57.6
        "-0x1.5555555555526p-2", "0x1.9999999995549p-3", "-0x1.249249237e28fp-3",
        "0x1.c71c717f95944p-4", "-0x1.745d11ab02562p-4", "0x1.3b13667698ccap-4",
        "-0x1.110e5021327eep-4", "0x1.e1bb9b4bdcbc0p-5", "-0x1.ae5e44ea92991p-5",
        "0x1.82da4633c1a79p-5", "-0x1.59a298348a221p-5", "0x1.2c2ba795297d3p-5",
        "-0x1.e9f1de3fc3ecap-6", "0x1.68332779f14abp-6", "-0x1.c77e58a3f26a9p-7",
        "0x1.d7a14a631e8c3p-8", "-0x1.7a21cf516cd20p-9", "0x1.b3da27745fed0p-11",
        "-0x1.3f1ac5ec1cdfcp-13", "0x1.bbc29904353d1p-17",),
    ("tanh_f32", "f32"): _hx(  # 2^-29.8
        "-0x1.55554a0000000p-2", "0x1.110d260000000p-3", "-0x1.b9287a0000000p-5",
        "0x1.593d080000000p-6", "-0x1.9b30460000000p-8",),
    ("tanh_f64", "f64"): _hx(  # 2^-60.4
        "-0x1.5555555555548p-2", "0x1.111111110ebc1p-3", "-0x1.ba1ba1b59c5ecp-5",
        "0x1.664f466943ec9p-6", "-0x1.226daa478b96cp-7", "0x1.d6a9bb1339533p-9",
        "-0x1.79ebcd52ec120p-10", "0x1.076e2b3dfc21ep-11",),
    ("sinh", "f32"): _hx(  # 2^-34.2
        "0x1.5555560000000p-3", "0x1.1111340000000p-7", "0x1.9ffe920000000p-13",
        "0x1.7a15b40000000p-19",),
    ("sinh", "f64"): _hx(  # 2^-63.3
        "0x1.5555555555556p-3", "0x1.11111111110a6p-7", "0x1.a01a01a02899dp-13",
        "0x1.71de3a465b1e6p-19", "0x1.ae64671b18e4dp-26", "0x1.611a561d8bbe3p-33",
        "0x1.b4c75ab1fc5bdp-41",),
    ("rcbrt", "f32"): _hx(  # 2^-9.1
        "0x1.635e400000000p+0", "-0x1.eeec160000000p-2", "0x1.7e8ece0000000p-4",),
    ("rcbrt", "f64"): _hx(  # 2^-9.1
        "0x1.635e3f94c57bap+0", "-0x1.eeec167507a73p-2", "0x1.7e8eceb62cd53p-4",),
}


# the pow tails in log2 units
_COEFFS[("atanh52", "f32")] = tuple(float(np.float32(c / float(_LN2)))
                                    for c in _COEFFS[("atanh5", "f32")])
_COEFFS[("atanh52", "f64")] = tuple(c / float(_LN2) for c in _COEFFS[("atanh5", "f64")])


# ============================================================================== operations
class _Ops:
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
        self.K = _CONST[t]

    def C(self, name: str) -> tuple[float, ...]:
        return _COEFFS[(name, self.t)]

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


# ============================================================================== exponentials
# clamps keep k = rint(x log2 e) inside the two-step scaling range; beyond them the result is
# inf or 0 anyway (NaN passes through the selp clamps)
_EXP_CLAMP = {"f32": (-105.0, 89.5), "f64": (-746.0, 711.0)}
_EXP2_CLAMP = {"f32": (-152.0, 130.0), "f64": (-1080.0, 1030.0)}
_EXPM1_CLAMP = {"f32": (-18.0, 89.0), "f64": (-40.0, 710.0)}
_EXPM1_TINY = {"f32": 2.0 ** -25, "f64": 2.0 ** -54}   # below: expm1(x) rounds to x


def _reduce_ln2(o: _Ops, x):
    """(kf, r, rl): kf = rint(x log2 e), r + rl = x - kf ln2 (the first fma is exact, rl is
    the rounding error of the second)."""
    kf = o.rint(o.mul(x, o.K["LOG2E"]))
    l1, l2 = o.K["LN2_EXP"]
    r1 = o.fma(kf, -l1, x)
    r = o.fma(kf, -l2, r1)
    return kf, r, o.fma(kf, -l2, o.sub(r1, r))


def _one_plus(o: _Ops, v, lo):
    """1 + v + lo for |v| < 1 and a small lo, with one significant rounding: the rounding
    error of 1 + v is recovered exactly (Fast2Sum) and added to lo."""
    h = o.add(1.0, v)
    return o.add(h, o.add(o.add(o.sub(1.0, h), v), lo))


def _exp_parts(o: _Ops, x, kadj: int):
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


def _exp_core(o: _Ops, x, kadj: int = 0):
    """e^x * 2^kadj (kadj in {0, -1}) for any x, rounded once; NaN -> NaN."""
    h, l, k = _exp_parts(o, x, kadj)
    return o.scale(o.add(h, l), k)


def _exp_dw(o: _Ops, a, kadj: int = 0):
    """e^a 2^kadj as an unevaluated sum (hi, lo), |lo| <= ulp(hi) (hi overflows to inf
    past the threshold while lo stays finite)."""
    h, l, k = _exp_parts(o, a, kadj)
    hh = o.add(h, l)
    l = o.add(o.sub(h, hh), l)                                      # Fast2Sum: |h| >= |l|
    h = hh
    k1 = o.i("shr.s32", k, o.ci(1, "u32"))
    s1, s2 = o.pow2(k1), o.pow2(o.isub(k, k1))
    return o.mul(o.mul(h, s1), s2), o.mul(o.mul(l, s1), s2)


def _expm1_core(o: _Ops, x):
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


def _exp2_poly(o: _Ops, r):
    """2^r for |r| <= 1/2 + tiny: 1 + r ln2 + r^2 P(r), r ln2 as an exact product plus the low
    part of ln2."""
    c0, c0l = o.K["LN2_EXP"]
    m = o.mul(r, c0)
    ml = o.fma(r, c0, o.neg(m))
    lo = o.fma(o.mul(r, r), o.horner(r, o.C("exp2")), o.fma(r, c0l, ml))
    return _one_plus(o, m, lo)


def _div_dw(o: _Ops, num, den, denl, numl=None):
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


def exp(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """e^x."""
    if _f32_fast(fastmath, dtype):
        return _ex2_fast(b, _mulf(b, x, _CONST["f32"]["LOG2E"]))
    return _exp_core(_Ops(b, dtype), x)


def exp2(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """2^x."""
    if _f32_fast(fastmath, dtype):
        return _ex2_fast(b, x)
    o = _Ops(b, dtype)
    lo, hi = _EXP2_CLAMP[o.t]
    xc, _, _ = o.clamp(x, lo, hi)
    kf = o.rint(xc)
    r = o.sub(xc, kf)                                               # exact
    return o.scale(_exp2_poly(o, r), o.f2i(kf))


def expm1(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """e^x - 1 (no fast form: the accurate sequence in both modes)."""
    o = _Ops(b, dtype)
    res = _expm1_core(o, x)
    return o.sel(x, res, o.cmp("lt", o.abs(x), _EXPM1_TINY[o.t]))


def sigmoid(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """1 / (1 + e^-x), as e^-|x| over 1 + e^-|x| for x < 0 (no overflow, tiny results kept)."""
    if _f32_fast(fastmath, dtype):
        e = _ex2_fast(b, _mulf(b, x, -_CONST["f32"]["LOG2E"]))
        return b.instr("rcp.approx.ftz.f32", b.instr("add.rn.ftz.f32", e, b.const(1.0, "f32")))
    o = _Ops(b, dtype)
    e, el = _exp_dw(o, o.neg(o.abs(x)))
    pos = o.cmp("ge", x, 0.0)
    den = o.add(1.0, e)
    denl = o.add(o.add(o.sub(1.0, den), e), el)           # 1 + e + el = den + denl
    return _div_dw(o, o.sel(1.0, e, pos), den, denl, o.sel(0.0, el, pos))


def sinh(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """sinh x: an odd polynomial for |x| < 1, else h - 1/(4h) with h = e^|x| / 2."""
    o = _Ops(b, dtype)
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


def cosh(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """cosh x = h + 1/(4h), h = e^|x| / 2."""
    if _f32_fast(fastmath, dtype):
        a = b.instr("abs.ftz.f32", x)
        h = _ex2_fast(b, b.instr("fma.rn.ftz.f32", a, b.const(_CONST["f32"]["LOG2E"], "f32"),
                                 b.const(-1.0, "f32")))
        return b.instr("add.rn.ftz.f32", h, _mulf(b, b.instr("rcp.approx.ftz.f32", h), 0.25))
    o = _Ops(b, dtype)
    h, hl = _exp_dw(o, o.abs(x), -1)
    return o.add(h, o.add(hl, o.div(0.25, h)))


_TANH_SMALL = {"f32": 0.55, "f64": 0.3}
_TANH_CLAMP = {"f32": 10.0, "f64": 20.0}


def tanh(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """tanh x: an odd polynomial for small |x|, else t / (t + 2) with t = expm1(2|x|)."""
    if _f32_fast(fastmath, dtype):
        return b.instr("tanh.approx.f32", x)
    o = _Ops(b, dtype)
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


# ============================================================================== logarithms
def _log1p_reduced(o: _Ops, f):
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


def _log_combine(o: _Ops, ef, ph, pl, base):
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
    o = _Ops(b, dtype)
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


def log(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """Natural logarithm."""
    if _f32_fast(fastmath, dtype):
        return _lg2_fast(b, x, float(np.float32(float(_LN2))))
    return _log_any(b, x, dtype, "e")


def log2(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """Base-2 logarithm."""
    if _f32_fast(fastmath, dtype):
        return _lg2_fast(b, x, None)
    return _log_any(b, x, dtype, 2)


def log10(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """Base-10 logarithm."""
    if _f32_fast(fastmath, dtype):
        return _lg2_fast(b, x, float(np.float32(float(_LN2 / _K["ln10"]))))
    return _log_any(b, x, dtype, 10)


def log1p(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """log(1 + x) (no fast form): u = 1 + x is split as 2^e m; f = x when e = 0, else
    m - 1 plus the rounding error of 1 + x scaled by 2^-e / m."""
    o = _Ops(b, dtype)
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


# ============================================================================== trigonometry
def _trig_reduce(o: _Ops, x):
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


def _sin_parts(o: _Ops, r, rl, z, h):
    """sin(r + rl) = r + (r^3 S(z) + rl (1 - r^2/2)) as (r, tail), h = z/2."""
    return r, o.fma(o.mul(z, r), o.horner(z, o.C("sin")), o.fma(h, o.neg(rl), rl))


def _cos_parts(o: _Ops, r, rl, z, h):
    """cos(r + rl) = (1 - h) + (z^2 C(z) - r rl) as (w, tail), w = RN(1 - h)."""
    w = o.sub(1.0, h)
    tail = o.fma(o.mul(z, z), o.horner(z, o.C("cos")), o.sub(o.sub(1.0, w), h))
    return w, o.fma(r, o.neg(rl), tail)


def _sin_poly(o: _Ops, r, rl, z, h):
    return o.add(*_sin_parts(o, r, rl, z, h))


def _cos_poly(o: _Ops, r, rl, z, h):
    return o.add(*_cos_parts(o, r, rl, z, h))


def _sin_cos(b, x, dtype, shift: int):
    o = _Ops(b, dtype)
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


def sin(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """sin x (x in radians)."""
    if _f32_fast(fastmath, dtype):
        return b.instr("sin.approx.ftz.f32", x)
    return _sin_cos(b, x, dtype, 0)


def cos(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """cos x (x in radians)."""
    if _f32_fast(fastmath, dtype):
        return b.instr("cos.approx.ftz.f32", x)
    return _sin_cos(b, x, dtype, 1)


def tan(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """tan x = sin r / cos r (even quadrant) or -cos r / sin r (odd)."""
    if _f32_fast(fastmath, dtype):
        return b.instr("div.approx.ftz.f32", b.instr("sin.approx.ftz.f32", x),
                       b.instr("cos.approx.ftz.f32", x))
    o = _Ops(b, dtype)
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


def _atan_off(o: _Ops, v, vl, off_h, off_l):
    """off + atan(v + vl) for |v| <= 1 (vl tiny), off = off_h + off_l either 0 or >= pi/2:
    atan(v) = v + v^3 P(v^2), atan(v + vl) ~ atan(v) + vl (1 - v^2), Fast2Sum for off + v."""
    z = o.mul(v, v)
    vl = o.fma(z, o.neg(vl), vl)
    t = o.fma(o.mul(z, v), o.horner(z, o.C("atan")), o.add(off_l, vl))
    hi = o.add(off_h, v)
    err = o.add(o.sub(off_h, hi), v)                        # |off_h| >= |v| or off_h = 0
    return o.add(hi, o.add(err, t))


def arctan(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """arctan x (no fast form): v = |x| or -1/|x| (one division), v + vl exactly through the
    remainder, atan(v) by a polynomial on [-1, 1], plus pi/2 in two parts for |x| > 1; the
    sign of x at the end."""
    o = _Ops(b, dtype)
    a = o.abs(x)
    big = o.cmp("gt", a, 1.0)
    a = o.sel(2.0 ** 60, a, o.cmp("gt", a, 2.0 ** 60))   # atan(a) = pi/2 - 1/a; inf -> 2^60
    v = o.div(o.sel(-1.0, a, big), o.sel(a, 1.0, big))
    vl = o.sel(o.mul(o.fma(v, a, 1.0), v), 0.0, big)      # -1/a - v (exact remainder / a)
    h1, h2 = o.K["PIO2_2"]
    res = _atan_off(o, v, vl, o.sel(h1, 0.0, big), o.sel(h2, 0.0, big))
    return o.copysign(x, res)


def arctan2(b, y, x, *, dtype: str = "f32", fastmath: bool = False):
    """The angle of (x, y), as np.arctan2(y, x) (no fast form): v = min(|x|, |y|) /
    max(|x|, |y|) with its remainder, then off +- atan(v) with off in {0, pi/2, pi} by the
    octant, the sign of y at the end; C99 special cases (zeros and infinities) included."""
    o = _Ops(b, dtype)
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


# ============================================================================== pow, hypot, cbrt
_POW_CLAMP = {"f32": (-155.0, 135.0), "f64": (-1080.0, 1030.0)}


def _log2_dw(o: _Ops, ax):
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


def pow(b, x, y, *, dtype: str = "f32", fastmath: bool = False):
    """x^y with the C99 / NumPy special cases. Fast form: ex2(y lg2 x) (no special cases: NaN
    for x < 0, as CUDA's __powf)."""
    if _f32_fast(fastmath, dtype):
        return _ex2_fast(b, b.instr("mul.rn.ftz.f32", y, b.instr("lg2.approx.ftz.f32", x)))
    o = _Ops(b, dtype)
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


def hypot(b, x, y, *, dtype: str = "f32", fastmath: bool = False):
    """sqrt(x^2 + y^2) without overflow (no fast form): both scaled by a power of two chosen
    from the larger magnitude; inf if either is inf (even with a NaN), else NaN if either is."""
    o = _Ops(b, dtype)
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


def cbrt(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """Cube root (no fast form): |x| = 2^(3q + j) m, Newton's iteration for (2^j m)^(-1/3)
    from a quadratic seed, then y = (2^j m) r^2 corrected once with the exact residual."""
    o = _Ops(b, dtype)
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


def rsqrt(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """1 / sqrt(x): div.rn of 1 by sqrt.rn (fast: rsqrt.approx.ftz)."""
    if _f32_fast(fastmath, dtype):
        return b.instr("rsqrt.approx.ftz.f32", x)
    o = _Ops(b, dtype)
    return o.div(1.0, o.sqrt(x))


def rcp(b, x, *, dtype: str = "f32", fastmath: bool = False):
    """1 / x: rcp.rn (fast: rcp.approx.ftz)."""
    if _f32_fast(fastmath, dtype):
        return b.instr("rcp.approx.ftz.f32", x)
    return _Ops(b, dtype).rcp(x)


# ============================================================================== accuracy
_PREC_INFO = {"f32": (24, -126, np.float32, np.float64),
              "f64": (53, -1022, np.float64, np.longdouble)}


def ulp_error(result, reference, dtype: str) -> np.ndarray:
    """|result - reference| in units in the last place of ``dtype`` at the reference value
    (the spacing of ``dtype`` numbers at |reference|, subnormal spacing below the normal
    range). ``reference`` is the exact value in a wider type (float64 for f32, long double for
    f64). NaN against NaN counts 0, an infinite result counts 0 if the reference rounds to it;
    other NaN or infinite results, and finite results for an infinite reference, count inf
    (a finite result near the overflow threshold is measured as a number)."""
    prec, emin, narrow, wide = _PREC_INFO[dtype]
    y = np.asarray(result, narrow).astype(wide)
    ref = np.asarray(reference, wide)
    with np.errstate(all="ignore"):
        rounded = ref.astype(narrow).astype(wide)
        _, e = np.frexp(ref)
        ulp = np.ldexp(np.ones_like(ref), np.maximum(e - 1, emin) - (prec - 1))
        err = np.abs(y - ref) / ulp
    ny, nr = np.isnan(y), np.isnan(ref)
    special = ny | nr | np.isinf(y) | np.isinf(ref)
    same = (ny & nr) | (np.isinf(y) & (y == rounded))
    return np.where(special, np.where(same, 0.0, np.inf), err).astype(np.float64)


# ============================================================================== registry
def _np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _np_rsqrt(x):
    return 1 / np.sqrt(x)


def _np_rcp(x):
    return 1 / x


FUNCTIONS: dict[str, tuple[Callable, int, Callable]] = {
    "exp": (exp, 1, np.exp), "exp2": (exp2, 1, np.exp2), "expm1": (expm1, 1, np.expm1),
    "log": (log, 1, np.log), "log2": (log2, 1, np.log2), "log10": (log10, 1, np.log10),
    "log1p": (log1p, 1, np.log1p), "sin": (sin, 1, np.sin), "cos": (cos, 1, np.cos),
    "tan": (tan, 1, np.tan), "tanh": (tanh, 1, np.tanh), "sinh": (sinh, 1, np.sinh),
    "cosh": (cosh, 1, np.cosh), "arctan": (arctan, 1, np.arctan), "pow": (pow, 2, np.power),
    "sigmoid": (sigmoid, 1, _np_sigmoid), "hypot": (hypot, 2, np.hypot),
    "cbrt": (cbrt, 1, np.cbrt), "rsqrt": (rsqrt, 1, _np_rsqrt), "rcp": (rcp, 1, _np_rcp),
    "arctan2": (arctan2, 2, np.arctan2),
}
"""DSL name -> (implementation, arity, NumPy reference)."""

FAST_FORMS = frozenset({"exp", "exp2", "log", "log2", "log10", "sin", "cos", "tan", "tanh",
                        "sinh", "cosh", "pow", "sigmoid", "rsqrt", "rcp"})
"""Functions whose f32 ``fastmath=True`` form uses ``.approx`` rows (the others run the accurate
sequence in both modes)."""


# ============================================================================== coefficient fits
# Offline: ``python -m numptx.dsl.mathlib --fit [name ...]`` prints the fits behind _COEFFS.
# Each target is P(z) ~ g(z) minimizing max |w(z) (P(z) - g(z))|, w chosen so that the error is
# relative to the function (e.g. e^r = 1 + r + r^2 P(r): g = (e^r - 1 - r) / r^2,
# w = r^2 / e^r). g comes from the Taylor series (or the function) in 70-digit decimals.
_FIT_PREC = 70

def _pw(z, k):
    return z ** k if k else Decimal(1)


def _series(terms, eps):
    s = Decimal(0)
    for t in terms:
        s += t
        if abs(t) <= eps * (abs(s) + 1):
            return s
    raise ArithmeticError("series did not converge")


def _dsin(r, eps):
    return _series(((-1) ** n * _pw(r, 2 * n + 1) / math.factorial(2 * n + 1)
                    for n in range(400)), eps)


def _dcos(r, eps):
    return _series(((-1) ** n * _pw(r, 2 * n) / math.factorial(2 * n) for n in range(400)), eps)


def _datan(u, eps):
    # two argument halvings: atan(u) = 2 atan(u / (1 + sqrt(1 + u^2))), then the Taylor series
    for _ in range(2):
        u = u / (1 + (1 + u * u).sqrt())
    return 4 * _series(((-1) ** n * _pw(u, 2 * n + 1) / (2 * n + 1) for n in range(4000)), eps)


def _fit_targets():
    """name -> (g(z), weight(z), lo, hi): fit P ~ g minimizing max |weight * (P - g)|."""
    with localcontext() as ctx:
        ctx.prec = _FIT_PREC
        eps = Decimal(10) ** -(_FIT_PREC - 5)
        ln2 = Decimal(2).ln()
    zero = Decimal(0)

    def series(term, start):                    # sum_{n >= start} term(n)
        return lambda z: _series((term(n, z) for n in range(start, 20000)), eps)

    def rel_odd(F, k=3):                        # weight z^(k/2) / F(sqrt z): error relative to F
        return lambda z: (z.sqrt() ** k / F(z.sqrt(), eps)) if z else zero

    def tail_odd(F, z0):                        # (F(r) - r) / r^3 at z = r^2 (F odd, F(r) ~ r)
        return lambda z: ((F(z.sqrt(), eps) - z.sqrt()) / z.sqrt() ** 3
                          if z > Decimal("1e-30") else z0)

    def tanh(r, e):
        t = (2 * r).exp()
        return (t - 1) / (t + 1)

    def sinh(r, e):
        return (r.exp() - (-r).exp()) / 2

    def atanh2(s, e):                           # log((1 + s) / (1 - s))
        return ((1 + s) / (1 - s)).ln()

    fact = math.factorial
    T = {}
    # e^r = 1 + r + r^2 P(r), |r| <= ln2/2 (+ margin for the rounded reduction); expm1 fits the
    # same P with the weight relative to e^r - 1
    g_exp = series(lambda n, r: _pw(r, n - 2) / fact(n), 2)
    T["exp"] = (g_exp, lambda r: r * r / r.exp(), -0.3503, 0.3503)
    T["expm1"] = (g_exp, lambda r: (r * r / (r.exp() - 1)) if r else zero, -0.3503, 0.3503)
    # 2^r = 1 + r ln2 + r^2 P(r), |r| <= 1/2
    T["exp2"] = (series(lambda n, r: ln2 ** n * _pw(r, n - 2) / fact(n), 2),
                 lambda r: r * r / (ln2 * r).exp(), -0.5002, 0.5002)
    # log(1 + f) = f - f^2/2 + f^3 P(f), f in [sqrt(1/2) - 1, sqrt(2) - 1]
    T["log1p"] = (series(lambda n, f: (-1) ** (n + 1) * _pw(f, n - 3) / n, 3),
                  lambda f: (f ** 3 / (1 + f).ln()) if f else zero, -0.29293, 0.41422)
    # log((1+s)/(1-s)) = 2 s + s^3 P(s^2), |s| <= 3 - 2 sqrt(2); and its s^5 tail:
    # log((1+s)/(1-s)) = 2 s + 2/3 s^3 + s^5 P(s^2)
    s_max2 = 0.17158 ** 2
    T["atanh"] = (series(lambda n, z: 2 * _pw(z, n - 1) / (2 * n + 1), 1), rel_odd(atanh2),
                  0, s_max2)
    T["atanh5"] = (series(lambda n, z: 2 * _pw(z, n - 2) / (2 * n + 1), 2), rel_odd(atanh2, 5),
                   0, s_max2)
    # sin r = r + r^3 P(r^2), cos r = 1 - r^2/2 + r^4 P(r^2), |r| <= 0.9 (pi/4 plus the
    # misrounding of k at large |x|)
    T["sin"] = (series(lambda n, z: (-1) ** n * _pw(z, n - 1) / fact(2 * n + 1), 1),
                rel_odd(_dsin), 0, 0.81)
    T["cos"] = (series(lambda n, z: (-1) ** n * _pw(z, n - 2) / fact(2 * n), 2),
                lambda z: z * z / _dcos(z.sqrt(), eps), 0, 0.81)
    # atan u = u + u^3 P(u^2), |u| <= 1
    T["atan"] = (tail_odd(_datan, Decimal(-1) / 3), rel_odd(_datan), 0, 1.0)
    # tanh x = x + x^3 P(x^2) on [0, 0.55] (f32) / [0, 0.3] (f64)
    T["tanh_f32"] = (tail_odd(tanh, Decimal(-1) / 3), rel_odd(tanh), 0, 0.55 ** 2)
    T["tanh_f64"] = (tail_odd(tanh, Decimal(-1) / 3), rel_odd(tanh), 0, 0.3 ** 2)
    # sinh x = x + x^3 P(x^2) on [0, 1]
    T["sinh"] = (series(lambda n, z: _pw(z, n - 1) / fact(2 * n + 1), 1), rel_odd(sinh), 0, 1.0)
    # m^(-1/3) on [1, 2]: a rough seed for Newton's iteration
    T["rcbrt"] = (lambda m: 1 / m ** (Decimal(1) / 3), lambda m: m ** (Decimal(1) / 3), 1, 2)
    return T


def _solve(A, b):
    n = len(A)
    M = [row[:] + [bb] for row, bb in zip(A, b)]
    for i in range(n):
        p = max(range(i, n), key=lambda r: abs(M[r][i]))
        M[i], M[p] = M[p], M[i]
        for r in range(i + 1, n):
            f = M[r][i] / M[i][i]
            for k in range(i, n + 1):
                M[r][k] -= f * M[i][k]
    x = [Decimal(0)] * n
    for i in reversed(range(n)):
        x[i] = (M[i][n] - sum(M[i][k] * x[k] for k in range(i + 1, n))) / M[i][i]
    return x


def _remez(g, w, lo, hi, n, *, grid=3000, iters=30):
    """Weighted minimax polynomial sum_{j<n} c_j z^j ~ g(z) on [lo, hi] (discrete Remez exchange
    on a Chebyshev-spaced grid, Decimal arithmetic). Returns (coefficients, max weighted error)."""
    with localcontext() as ctx:
        ctx.prec = _FIT_PREC
        lo, hi = Decimal(lo), Decimal(hi)
        if w(lo) == 0:
            lo += (hi - lo) * Decimal("1e-12")
        zs = [(lo + hi) / 2 - (hi - lo) / 2 * Decimal(math.cos(math.pi * i / (grid - 1)))
              for i in range(grid)]
        G = [g(z) for z in zs]
        W = [abs(w(z)) for z in zs]
        m = n + 1
        ref = [round((grid - 1) * (1 - math.cos(math.pi * i / (m - 1))) / 2) for i in range(m)]
        best = None
        for _ in range(iters):
            A = [[_pw(zs[i], j) for j in range(n)] + [Decimal((-1) ** k) / W[i]]
                 for k, i in enumerate(ref)]
            sol = _solve(A, [G[i] for i in ref])
            c, E = sol[:n], sol[n]
            err = []
            for i in range(grid):
                acc = Decimal(0)
                for a in reversed(c):
                    acc = acc * zs[i] + a
                err.append(W[i] * (acc - G[i]))
            emax = max(abs(e) for e in err)
            if best is None or emax < best[1]:
                best = (c, emax)
            if emax <= abs(E) * Decimal("1.0001"):
                break
            cand, i = [], 0
            while i < grid:
                j, s = i, err[i] >= 0
                while j < grid and (err[j] >= 0) == s:
                    j += 1
                cand.append(max(range(i, j), key=lambda t: abs(err[t])))
                i = j
            while len(cand) > m:
                v = [abs(err[k]) for k in cand]
                s = min(range(len(cand)), key=v.__getitem__)
                if s in (0, len(cand) - 1) or len(cand) - m == 1:
                    cand.pop(0 if v[0] < v[-1] else -1)
                elif v[s - 1] < v[s + 1]:
                    del cand[s - 1:s + 1]
                else:
                    del cand[s:s + 2]
            if len(cand) < m:
                break
            ref = cand
        return best[0], float(best[1])


_FITS = {  # name -> {dtype: number of coefficients}
    "exp": {"f32": 5, "f64": 10}, "expm1": {"f32": 6, "f64": 11}, "exp2": {"f32": 5, "f64": 10},
    "log1p": {"f32": 8}, "atanh": {"f64": 7}, "atanh5": {"f32": 3, "f64": 7},
    "sin": {"f32": 3, "f64": 7}, "cos": {"f32": 3, "f64": 6}, "atan": {"f32": 9, "f64": 20},
    "tanh_f32": {"f32": 5}, "tanh_f64": {"f64": 8}, "sinh": {"f32": 4, "f64": 7},
    "rcbrt": {"f32": 3, "f64": 3},
}


def _fit_coefficients(names=None) -> dict:
    """Re-run the fits of _FITS (optionally only ``names``): {(name, dtype): (coefficients
    rounded to dtype, max weighted error before rounding)}."""
    targets = _fit_targets()
    out = {}
    for name, per in _FITS.items():
        if names and name not in names:
            continue
        g, w, lo, hi = targets[name]
        for dt, n in per.items():
            c, err = _remez(g, w, lo, hi, n)
            cast = float if dt == "f64" else (lambda v: float(np.float32(float(v))))
            out[(name, dt)] = (tuple(cast(v) for v in c), err)
    return out


def _print_coefficients(names=None) -> None:
    print("_COEFFS = {")
    for (name, dt), (cs, err) in _fit_coefficients(names).items():
        print(f'    ("{name}", "{dt}"): _hx(  # 2^{math.log2(err):.1f}')
        line = "       "
        for v in cs:
            item = f' "{v.hex()}",'
            if len(line) + len(item) > 98:
                print(line)
                line = "       "
            line += item
        print(line + "),")
    print("}")


if __name__ == "__main__":  # pragma: no cover - offline tool
    import sys
    if sys.argv[1:2] == ["--fit"]:
        _print_coefficients(sys.argv[2:] or None)
