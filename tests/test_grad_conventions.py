"""The derivative conventions of docs/dsl.md ("Derivatives", "Points where a derivative is not
defined"): min/max with a NaN operand, ties (-0 and +0 included), and the window below which
rsqrt's derivative -0.5 y^3 overflows before the exact one does. Each through the emulated stub
and the NumPy reference."""
from __future__ import annotations

import numpy as np
import pytest

import numptx as nx

NAN = float("nan")


def _minmax_jacobian(mode: str) -> nx.PtxExpr:
    @nx.ptx_expr(precision=mode)
    def f(x: nx.f32, y: nx.f32):
        return {"max": nx.maximum(x, y), "min": nx.minimum(x, y), "fmax": nx.fmax(x, y),
                "fmin": nx.fmin(x, y), "clip": nx.clip(x, y, 3.0), "relu": nx.maximum(x, 0.0),
                "cap": nx.minimum(4.0, y)}
    return nx.jacobian(f, wrt=("x", "y"))


def _both(J: nx.PtxExpr, x: list, y: list) -> list[dict]:
    xs, ys = np.float32(x), np.float32(y)
    keys = [k for k, _ in J.graph.outputs]
    emulated = nx.emulate(J.stub(), {"x": xs, "y": ys}, keys)
    reference = J(xs, ys)
    return [{k: np.broadcast_to(v, xs.shape) for k, v in r.items()}
            for r in (emulated, reference)]


@pytest.mark.parametrize("mode", ["cuda", "accurate", "fast"])
def test_a_nan_result_of_min_or_max_has_derivative_zero(mode):
    # maximum(NaN, 2) is NaN: derivative 0 w.r.t. both operands (as JAX); it was the second
    # operand's tangent whichever operand was the NaN (maximum(NaN, 2): d/dy = 1)
    J = _minmax_jacobian(mode)
    for r in _both(J, [NAN, 2.0, NAN], [2.0, NAN, NAN]):
        for k in ("max", "min", "clip"):
            assert np.all(r[f"d{k}_dx"] == 0) and np.all(r[f"d{k}_dy"] == 0), (k, r)
        assert list(r["drelu_dx"]) == [0, 1, 0] and list(r["dcap_dy"]) == [1, 0, 0]
        # fmax/fmin: a NaN operand yields the other, and its derivative; both NaN: 0
        assert list(r["dfmax_dx"]) == [0, 1, 0] and list(r["dfmax_dy"]) == [1, 0, 0]
        assert list(r["dfmin_dx"]) == [0, 1, 0] and list(r["dfmin_dy"]) == [1, 0, 0]


@pytest.mark.parametrize("mode", ["cuda", "accurate"])
def test_ties_split_the_derivative_and_minus_zero_ties_with_zero(mode):
    J = _minmax_jacobian(mode)
    for r in _both(J, [-0.0, 0.0, 1.5, 3.0, 0.0], [0.0, -0.0, 1.5, 1.0, 1.0]):
        for k in ("max", "min", "fmax", "fmin"):
            assert list(r[f"d{k}_dx"][:3]) == [0.5] * 3 == list(r[f"d{k}_dy"][:3]), (k, r)
        assert list(r["dclip_dx"]) == [0.5, 0.5, 0.5, 0.5, 0.0]   # x = y (lo), x = 3 (hi)
        assert list(r["drelu_dx"]) == [0.5, 0.5, 1.0, 1.0, 0.5]   # relu'(0) = 1/2
    # the same value twice is one operand: maximum(x, x) has derivative 1
    @nx.ptx_expr(precision=mode)
    def same(x: nx.f32):
        return nx.maximum(x, x) + nx.minimum(x, x)
    assert nx.grad(same, wrt="x")(np.float32(1.25)) == 2.0


#: rsqrt's derivative -0.5 y^3: y^3 overflows below 2^-85.33 (f32), where the exact
#: -0.5 x^-1.5 stays finite down to 2^-86 (f64: 2^-682.67 and 2^-683.33)
WINDOW = {"f32": (-86.0, -85.3334), "f64": (-683.333, -682.6667)}


@pytest.mark.parametrize("t,mode", [("f32", "cuda"), ("f32", "accurate"), ("f32", "fast"),
                                    ("f64", "cuda"), ("f64", "accurate")])
def test_rsqrt_derivative_overflows_in_its_documented_window(t, mode):
    dt = np.float32 if t == "f32" else np.float64
    ns = {"nx": nx}
    exec(f"def f(x: nx.{t}):\n    return nx.rsqrt(x)\n", ns)       # noqa: S102 - the test's own
    g = nx.grad(nx.ptx_expr(ns["f"], precision=mode), wrt="x")
    lo, hi = WINDOW[t]
    inside = np.exp2(np.linspace(lo + 1e-4, hi - 1e-4, 257)).astype(dt)
    above = np.exp2(np.linspace(hi + 1e-3, hi + 2, 257)).astype(dt)
    below = np.exp2(np.linspace(lo - 2, lo - 1e-3, 257)).astype(dt)
    d = {k: nx.emulate(g.stub(), {"x": v}, ["out"])["out"]
         for k, v in (("inside", inside), ("above", above), ("below", below))}
    with np.errstate(over="ignore"):
        exact = {k: (-0.5 * v.astype(np.longdouble) ** -1.5).astype(dt)
                 for k, v in (("inside", inside), ("above", above), ("below", below))}
    assert np.all(np.isfinite(exact["inside"])) and np.all(d["inside"] == -np.inf)
    assert np.all(np.isfinite(d["above"]))
    np.testing.assert_allclose(d["above"], exact["above"], rtol=8 * np.finfo(dt).eps)
    assert np.all(exact["below"] == -np.inf) and np.all(d["below"] == -np.inf)
    assert nx.emulate(g.stub(), {"x": np.array([0.0], dt)}, ["out"])["out"][0] == -np.inf
