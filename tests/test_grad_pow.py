"""``x ** n`` for a constant integer ``n`` over the whole float range, and its derivative: the
scaled negative powers of ``lower_pow`` (numptx/dsl/lowering.py, ``_negative_power``) and the
double-word powers of ``d(x**n)/dx`` (numptx/dsl/grad_rules.py, ``accurate_power``), against the
exact power (long double), NumPy's special values, and the NumPy reference of the formula."""
from __future__ import annotations

import numpy as np
import pytest

import numptx as nx
from numptx.dsl.grad_rules import PLAIN_POWER

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan]


def _power(n: int, t: str, mode: str) -> nx.PtxExpr:
    ns = {"nx": nx}
    exec(f"def f(x: nx.{t}):\n    return x ** {n}\n", ns)        # noqa: S102 - the test's own
    return nx.ptx_expr(ns["f"], precision=mode)


def _emulated(expr: nx.PtxExpr, x: np.ndarray) -> np.ndarray:
    return nx.emulate(expr.stub(), {"x": x}, ["out"])["out"]


def _every_binade(dt) -> np.ndarray:
    """64 random mantissas in each binade of ``dt`` (subnormals included), both signs."""
    info = np.finfo(dt)
    rng = np.random.default_rng(27)
    e = np.arange(np.log2(info.smallest_subnormal), info.maxexp, dtype=np.float64)
    x = (np.ldexp(1.0, e.astype(int))[:, None] * rng.uniform(1, 2, (len(e), 64))).ravel()
    with np.errstate(over="ignore"):
        x = x.astype(dt)
    x = x[np.isfinite(x) & (x != 0)]
    return np.concatenate([x, -x[::7]])


def _ulps(got: np.ndarray, exact: np.ndarray, dt) -> np.ndarray:
    """|got - exact| in ulps of ``dt`` at ``exact`` (the subnormal ulp below the normal range)."""
    info = np.finfo(dt)
    ex = np.abs(exact)
    e = np.floor(np.log2(np.maximum(ex, np.longdouble(info.tiny))))
    ulp = np.ldexp(np.longdouble(1), (e - info.nmant).astype(int))
    return np.abs(got.astype(np.longdouble) - exact) / ulp


@pytest.mark.parametrize("mode", ["cuda", "accurate"])
@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("n", [-1, -2, -3, -4])
def test_negative_powers_over_the_whole_range(n, t, mode):
    """x ** -k in every binade of the type: within 4 ulp where the result is normal, within one
    subnormal ulp and a fraction where it is subnormal, 0 and inf exactly where the
    exact power rounds to them; 0, inf and NaN as NumPy, signs included."""
    dt = np.float32 if t == "f32" else np.float64
    x = _every_binade(dt)
    got = _emulated(_power(n, t, mode), x)
    exact = x.astype(np.longdouble) ** n
    info = np.finfo(dt)
    with np.errstate(over="ignore"):
        rounded = exact.astype(dt)
    normal = np.isfinite(rounded) & (np.abs(exact) >= info.tiny)
    sub = np.isfinite(rounded) & ~normal
    assert normal.sum() > 100 and sub.sum() > 5
    assert _ulps(got[normal], exact[normal], dt).max() <= 4
    # the scaled power's relative error (<= 3.4 ulp of the type) is at most 1.7 ulp of the top
    # subnormal binade, plus the quotient's rounding
    assert _ulps(got[sub], exact[sub], dt).max() <= 2.2
    assert np.array_equal(np.isinf(got), np.isinf(rounded))
    assert np.array_equal(np.signbit(got), np.signbit(exact))
    s = np.array(SPECIAL, dt)
    with np.errstate(divide="ignore"):
        want = np.power(s, dt(n))
    assert np.array_equal(_emulated(_power(n, t, mode), s).view(f"u{s.itemsize}"),
                          want.view(f"u{s.itemsize}"))


def _derivative_truth(x: np.ndarray, n: int, dt) -> np.ndarray:
    with np.errstate(all="ignore"):
        return (n * np.power(x.astype(np.longdouble), n - 1)).astype(dt)


@pytest.mark.parametrize("mode", ["cuda", "accurate", "fast"])
@pytest.mark.parametrize("n", [7, 8, 12, 65, -4, -5, -6, -16])
def test_accurate_power_derivatives_at_the_special_values(n, mode):
    """n x^(n-1) outside PLAIN_POWER (double-word squaring) at 0, -0, +-inf, NaN, and where the
    power overflows or underflows: as NumPy's n * x ** (n-1), sign of zero included, in the
    emulated stub and in the NumPy reference (which evaluates b x^(b-1) with np.power)."""
    assert not PLAIN_POWER[0] <= n - 1 <= PLAIN_POWER[1]
    g = nx.grad(_power(n, "f32", mode), wrt="x")
    x = np.float32(SPECIAL + [1e30, -1e30, 1e-30, -1e-30, 3.0, -3.0])
    want = _derivative_truth(x, n, np.float32)
    for got in (_emulated(g, x), g(x)):
        finite, nan = np.isfinite(want) & (want != 0), np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got[~finite & ~nan], want[~finite & ~nan])
        np.testing.assert_array_equal(np.signbit(got[~nan]), np.signbit(want[~nan]))
        np.testing.assert_allclose(got[finite], want[finite], rtol=4e-7)


@pytest.mark.parametrize("n", [7, 12, -5, -8, 33])
def test_accurate_power_derivatives_in_f64(n):
    """The f64 derivative within 4 ulp of n x^(n-1) (long double), on [0.5, 2.5) and negated."""
    x = np.random.default_rng(abs(n) + 7).uniform(0.5, 2.5, 3000)
    x[::2] *= -1
    got = _emulated(nx.grad(_power(n, "f64", "accurate"), wrt="x"), x)
    exact = n * x.astype(np.longdouble) ** (n - 1)
    assert _ulps(got, exact, np.float64).max() <= 4


def test_second_derivative_of_a_large_power():
    """nx.grad of nx.grad through the double-word steps: 56 x^6 for x ** 8, within a few ulp."""
    f = _power(8, "f32", "accurate")
    g2 = nx.grad(nx.grad(f, wrt="x"), wrt="x")
    x = np.random.default_rng(5).uniform(0.5, 2.5, 4096).astype(np.float32)
    got = _emulated(g2, x)
    exact = 56 * x.astype(np.longdouble) ** 6
    assert _ulps(got, exact, np.float32).max() <= 8


def test_the_scales_of_a_negative_power_are_the_formulas_shape():
    """The powers of two of x ** -k are marked as the library's constants are, so that
    numptx.jit.compile.patch never takes them for the user's (a user's 3.0 stays the user's)."""
    from numptx.jit.compile.patch import library_literals
    lit = library_literals(_power(-4, "f32", "cuda"))
    assert lit == {"0f37800000", "0f47800000", "0f1F800000", "0f5F800000"}   # 2^-+16, 2^-+64
    ns = {"nx": nx}
    exec("def g(x: nx.f32):\n    return x ** -2 * 3.0\n", ns)   # noqa: S102 - the test's own
    assert "0f40400000" not in library_literals(nx.ptx_expr(ns["g"]))
