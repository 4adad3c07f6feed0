"""The vocabulary of derivative rules: what the ``deriv`` column of the DSL operation table
(numptx/dsl/ops.py) is written in, and the tangent algebra ``nx.grad`` runs them with
(numptx/dsl/grad.py).

A rule is a :class:`Deriv`: the derivative as text (shown in docs/dsl.md's operation table)
and its forward-mode form ``jvp(xs, y, ts) -> tangent``: ``xs`` the operands and ``y`` the
result (traced values of the tracer underneath, so a rule is traced, lowered and shared like any
formula), ``ts`` the operands' tangents. A tangent is ``None`` (zero: the operand does not depend
on the variable), :data:`ONE` (exactly 1: the variable itself), a traced value of the operand's
type, or a :class:`Scaled` one (a Python constant times ONE or a traced value); the helpers
below keep zeros, ones and constant factors symbolic, so ``grad(f, wrt="x")`` of ``x * y`` is
``y``, not ``1.0 * y + 0.0 * x``, and of ``3 * (x * x)`` is ``x * 6``, one multiplication by a
constant where the derivative becomes a value (:func:`real`)::

    from numptx.dsl.grad_rules import D, partials, scaled
    SIN = partials("cos(a)", lambda x, y: D.cos(x))      # the ``sin`` row's rule
    RSQRT = partials("-0.5 y^3", lambda x, y: scaled(-0.5, y * y * y))

Most rules are :func:`partials` (one partial derivative per operand, ``1``/``-1`` for the
identity and its negation, ``None`` for "no dependence"); :func:`rule` takes a ``jvp`` as it is
(``where``, minimum/maximum...); :data:`PIECEWISE_CONSTANT` is 0 (floor, round, sign...).

Non-differentiable points take the mean of the one-sided derivatives (docs/dsl.md,
"Derivatives"): ``abs'(0) = 0``, ``max``/``min`` ties split 1/2 and 1/2 (a NaN result: 0 to both,
as JAX), ``hypot`` at (0, 0) is
0; a ``where`` passes the selected branch's tangent (its condition has none).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from .graph import Node, const_value
from .proxy import OPS, Proxy

__all__ = ["Deriv", "ONE", "Scaled", "scaled", "D", "partials", "rule", "PIECEWISE_CONSTANT", "lit",
           "real", "tmap", "tadd", "tsub", "tneg", "tmul", "tdiv", "minmax_jvp", "constant",
           "int_power", "accurate_power", "PLAIN_POWER"]


class _One:
    """The tangent of a variable w.r.t. itself: exactly 1, kept symbolic."""
    __slots__ = ()

    def __repr__(self) -> str:
        return "ONE"


ONE = _One()


class _Ops:
    """``D.cos(x)``: the DSL operation ``cos`` of the table, for rules (looked up at call time,
    the table being filled after this module loads)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return OPS[name]
        except KeyError:
            raise AttributeError(name) from None


D = _Ops()


@dataclass(frozen=True)
class Deriv:
    """One operation's derivative rule: ``text`` (docs/dsl.md) and ``jvp(xs, y, ts)``."""
    text: str
    jvp: Callable[..., Any]


# ---- the tangent algebra ------------------------------------------------------------------------
class Scaled:
    """A tangent ``c * v``: a Python number ``c`` (not 0 or 1) times ``v`` (:data:`ONE` or a
    traced value). Constant factors of a chain of rules multiply here, in Python, and reach the
    graph once, where the tangent becomes a value (:func:`real`): ``d(x*x)/dx`` is ``2 x``,
    ``d(rsqrt(x*x + b))/dx`` is ``-(x y^3)`` (2 * -0.5), not ``(x + x) * (y^3 * -0.5)``."""
    __slots__ = ("c", "v")

    def __init__(self, c: float, v: Any):
        self.c, self.v = c, v

    def __repr__(self) -> str:
        return f"Scaled({self.c!r}, {self.v!r})"


def scaled(c: float, v: Any) -> Any:
    """``c * v`` as a tangent (``v`` itself where ``c`` is 1)."""
    return v if c == 1 else Scaled(c, v)


def _parts(t: Any) -> tuple[float, Any]:
    return (t.c, t.v) if isinstance(t, Scaled) else (1.0, t)


def _same(a: Any, b: Any) -> bool:
    return a is b or (isinstance(a, Proxy) and isinstance(b, Proxy) and a.node is b.node)


def lit(value: float, like: Proxy) -> Proxy:
    """The constant ``value`` in the type (and trace) of ``like``."""
    tr = like.tracer
    return Proxy(tr.literal(value, like.dtype), tr)


def real(t: Any, like: Proxy) -> Proxy:
    """A tangent as a traced value (zero and one become constants of ``like``'s type, a
    :class:`Scaled` one multiplication, or a negation)."""
    if t is None:
        return lit(0.0, like)
    if t is ONE:
        return lit(1.0, like)
    if isinstance(t, Scaled):
        if t.v is ONE:
            return lit(t.c, like)
        return -t.v if t.c == -1 else t.v * t.c
    return t


def tmap(t: Any, fn: Callable[[Proxy], Proxy]) -> Any:
    """``t`` with ``fn`` applied to its traced part (a cast): None and ONE stay."""
    if t is None or t is ONE:
        return t
    c, v = _parts(t)
    return scaled(c, v if v is ONE else fn(v))


def tadd(a: Any, b: Any, like: Proxy) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    (ca, va), (cb, vb) = _parts(a), _parts(b)
    if _same(va, vb):
        return None if ca + cb == 0 else scaled(ca + cb, va)
    if ca == cb:
        return scaled(ca, real(va, like) + real(vb, like))
    if ca == -cb:
        return scaled(ca, real(va, like) - real(vb, like))
    if ca == 0 or cb == 0:
        return real(a, like) + real(b, like)
    if cb == -1 or ca == -1:           # c v_a - v_b: one fma, and no negation left for later
        return real(a, like) - real(vb, like) if cb == -1 else real(b, like) - real(va, like)
    # c (v_a + r v_b), one fma where r is exact; a factor 1 kept rather than another
    for c, v, r, w in sorted(((ca, va, cb / ca, vb), (cb, vb, ca / cb, va)),
                             key=lambda k: abs(k[0]) != 1):
        if _exact(r):
            return scaled(c, real(v, like) + (lit(r, like) if w is ONE else real(w, like) * r))
    return real(a, like) + real(b, like)


def _exact(r: float) -> bool:
    """Whether ``r`` has at most 8 significant bits and a normal f16 exponent (exact in every
    float type), so that scaling by it adds no rounding of its own."""
    m, e = math.frexp(r)
    return -13 < e < 16 and (m * 256).is_integer()


def tneg(t: Any, like: Proxy) -> Any:
    if t is None:
        return None
    c, v = _parts(t)
    return scaled(-c, v)


def tsub(a: Any, b: Any, like: Proxy) -> Any:
    return tadd(a, tneg(b, like), like)


def tmul(t: Any, p: Any, like: Proxy) -> Any:
    """Tangent ``t`` times the partial ``p`` (a traced value, a :class:`Scaled` one, or a
    Python number)."""
    if t is None:
        return None
    c, v = _parts(t)
    if isinstance(p, Proxy) and p.dtype.is_float:
        k = constant(p)                # a literal or bound constant joins the Python factor
        p = p if k is None else float(k)
    if not isinstance(p, (Proxy, Scaled)):
        return scaled(c * p, v)
    k, q = _parts(p)
    return scaled(c * k, q if v is ONE else q if q is ONE else v * q)


def tdiv(t: Any, p: Any, like: Proxy) -> Any:
    """Tangent ``t`` divided by ``p`` (a traced value)."""
    if t is None:
        return None
    c, v = _parts(t)
    return scaled(c, real(v, like) / p)


# ---- rule constructors --------------------------------------------------------------------------
def partials(text: str, *fns: Any) -> Deriv:
    """A rule from one partial derivative per operand: ``fn(*xs, y)`` -> a traced value, or
    ``1`` / ``-1`` (the tangent itself, negated), or ``None`` (the result does not depend on
    that operand). The tangent is the sum of ``partial_i * t_i`` over operands with one."""
    def jvp(xs: tuple, y: Proxy, ts: tuple) -> Any:
        acc = None
        for t, fn in zip(ts, fns):
            if t is None or fn is None:
                continue
            if fn == 1:
                term = t
            elif fn == -1:
                term = tneg(t, y)
            else:
                term = tmul(t, fn(*xs, y), y)
            acc = tadd(acc, term, y)
        return acc
    return Deriv(text, jvp)


def rule(text: str, jvp: Callable[..., Any]) -> Deriv:
    """A rule written as its forward-mode form ``jvp(xs, y, ts)``."""
    return Deriv(text, jvp)


PIECEWISE_CONSTANT = Deriv("0 (piecewise constant)", lambda xs, y, ts: None)


def minmax_jvp(a: Proxy, b: Proxy, y: Proxy, ta: Any, tb: Any) -> Any:
    """The tangent of ``y = min/max(a, b)`` (NaN-propagating or not): the tangent of the operand
    ``y`` equals (``==``, so -0 and +0 tie); 1/2 of each where both do (a tie: the mean of the
    one-sided derivatives); 0 where ``y`` equals neither, a NaN result (as JAX: maximum(NaN, 2)
    and fmax(NaN, NaN) have derivative 0 w.r.t. both operands; fmax(NaN, 2) is 2's)."""
    pa, pb = y == a, y == b
    half = tmul(tadd(ta, tb, y), 0.5, y)
    zero = lit(0.0, y)
    if ta is None:                     # one selp less where one operand is a constant (relu)
        rest = D.where(pb, real(tb, y), zero)
    elif tb is None:
        rest = D.where(pa, real(ta, y), zero)
    else:
        rest = D.where(pa, real(ta, y), D.where(pb, real(tb, y), zero))
    return D.where(pa & pb, real(half, y), rest)


def constant(p: Proxy) -> float | int | bool | None:
    """The value of ``p`` when it is a constant of a traced graph (a literal, a bound
    parameter), else None."""
    node = p.node
    return const_value(node) if isinstance(node, Node) and node.op == "const" else None


#: the exponents ``m`` whose ``x ** m`` the derivative of ``x ** (m + 1)`` takes from pow's own
#: lowering (repeated squaring, numptx/dsl/lowering.py): ``(m + 1) x^m`` stays within 4 ulp there
#: (measured over every f32 of [1, 2): 3.73 ulp at m = 5, 3.50 at m = -4; m = 6 gave 4.94 and
#: m = -5 3.95). Other exponents take :func:`accurate_power`.
PLAIN_POWER = (-4, 5)


def int_power(x: Proxy, n: int, factor: int = 1) -> Any:
    """``factor * x ** n`` for an integer ``n`` (``|n| <= 64``), for ``d(x**(n+1))/dx`` (``factor
    = n + 1``), as a tangent factor: pow's own lowering inside :data:`PLAIN_POWER` (shared with
    the value's squares; ``factor`` stays a Python constant, :class:`Scaled`), else
    :func:`accurate_power` with ``factor`` applied before the power is scaled back, so that a
    subnormal ``x ** n`` whose product with ``factor`` is normal loses nothing."""
    if n == 0:
        return scaled(factor, lit(1.0, x))
    if PLAIN_POWER[0] <= n <= PLAIN_POWER[1]:
        return scaled(factor, x ** lit(float(n), x))
    return accurate_power(x, n, factor)


def _dw_mul(a: tuple, b: tuple) -> tuple:
    """The product of two double-word values ``(hi, lo)`` (``lo`` None: exact ``hi``): the
    rounded product and its error (exact, by fma) plus the cross terms (``lo * lo`` dropped)."""
    (ah, al), (bh, bl) = a, b
    h = ah * bh
    low = D.fma(ah, bh, -h)
    if a is b:                                   # a square: 2 ah al
        return h, low if al is None else D.fma(ah, al, D.fma(ah, al, low))
    if bl is not None:
        low = D.fma(ah, bl, low)
    if al is not None:
        low = D.fma(al, bh, low)
    return h, low


#: per type, the power of two ``2^E`` that :func:`accurate_power` scales ``|x| ** n`` towards
#: (as numptx/dsl/lowering.py's negative powers: half the exponent range)
_RANGE_BITS = {"f32": 64, "f64": 512}


def accurate_power(x: Proxy, n: int, factor: int = 1) -> Proxy:
    """``factor * x ** n`` (``n`` a nonzero integer, ``|n| <= 64``; ``factor`` a small integer)
    within about 1 ulp: repeated squaring of ``|x|`` (of ``1 / |x|`` for ``n < 0``, with the
    reciprocal's own error as its low word) in double-word arithmetic, each product's rounding
    error kept by an fma and the words added once at the end; 3 to 4 instructions a product
    (n = 11: 18 in all). Where ``|x| ** n`` falls below 1 (``|x| < 1`` for ``n > 0``, ``|x| >= 1``
    for ``n < 0``), ``|x|`` is scaled by ``2^(+-E / |n|)`` first, so every partial power stays
    normal wherever ``factor * x ** n`` is (a subnormal partial power keeps neither word), and
    the result is scaled back by the power of two times ``factor``, exact, after the words are
    added. Where a partial power overflows (or ``x`` is 0 or infinite for ``n < 0``) the error
    words are NaN and the plain power of the high words is the answer (inf, or 0); the sign of
    ``x`` is restored for odd ``n``."""
    a = D.abs(x)
    back = lit(float(factor), x)
    j = _RANGE_BITS.get(x.dtype.name, 0) // abs(n)
    if j:
        shrinks = a < lit(1.0, x) if n > 0 else a >= lit(1.0, x)
        a = a * D.where(shrinks, lit(2.0 ** (j if n > 0 else -j), x), lit(1.0, x))
        back = D.where(shrinks, lit(factor * 2.0 ** (-j * abs(n)), x), back)
    if n < 0:
        h = 1.0 / a
        base: tuple = (h, D.fma(-a, h, lit(1.0, x)) * h)    # 1 / a = h + (1 - a h) / a
    else:
        base = (a, None)
    acc, e = None, abs(n)
    while e:
        if e & 1:
            acc = base if acc is None else _dw_mul(acc, base)
        e >>= 1
        if e:
            base = _dw_mul(base, base)
    hi, lo = acc
    if lo is None:
        r = hi
    else:
        s = hi + lo
        r = D.where(D.isnan(s), hi, s)
    r = D.copysign(r, x) if n & 1 else r
    return r if factor == 1 and not j else r * back
