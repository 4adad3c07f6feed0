"""Review of issue 27's derivatives (``nx.grad``) and of ``x ** n`` by multiplications: awkward
points (0, the ends of the float range), constant exponents, the reference against the stub."""
from __future__ import annotations

import numpy as np
import pytest

import numptx as nx


def _emulated(expr, **inputs):
    return nx.emulate(expr.stub(), inputs, ["out"])["out"]


@pytest.mark.parametrize("mode", ["cuda", "accurate"])
def test_derivative_of_x_to_the_zero_is_zero_everywhere(mode):
    # x ** 0 is 1 for every x (NumPy: 0**0 = inf**0 = nan**0 = 1), so its derivative is 0;
    # 0 * x^-1 gave NaN at x = 0 (both the stub and the reference), a runtime exponent 0 too
    @nx.ptx_expr(precision=mode)
    def c(x: nx.f32):
        return x ** 0

    @nx.ptx_expr(precision=mode)
    def r(x: nx.f32, b: nx.f32):
        return x ** b
    x = np.float32([0.0, -0.0, 1.5, -2.0, np.inf])
    zero = np.float32(0.0)
    dc, dr = nx.grad(c, wrt="x"), nx.grad(r, wrt="x")
    for got in (np.broadcast_to(dc(x), x.shape), _emulated(dc, x=x), dr(x, zero),
                _emulated(dr, x=x, b=np.zeros_like(x))):
        assert np.array_equal(got, np.zeros_like(x)), got
    # the rule is unchanged elsewhere: b x^(b-1), and a runtime b = 1 at 0 is 1
    np.testing.assert_allclose(dr(np.float32([0.0, 2.0]), np.float32(1.0)), [1.0, 1.0])
    np.testing.assert_allclose(dr(np.float32(2.0), np.float32(3.0)), 12.0, rtol=1e-6)


@pytest.mark.parametrize("mode", ["cuda", "accurate"])
@pytest.mark.parametrize("t", ["f32", "f64"])
def test_negative_constant_powers_do_not_underflow_early(t, mode):
    # 1 / x**n: x**n overflowed to inf (1 / inf = 0) where x**-n is a subnormal; now
    # 2^(jn) / (x 2^-j)^n, the scaled power normal (numptx/dsl/lowering.py, _negative_power)
    dt = np.float32 if t == "f32" else np.float64
    for n, x in ((-2, 1.9e19 if t == "f32" else 5.4e154), (-3, 7.1e12 if t == "f32" else 9e102),
                 (-4, 4.4e9 if t == "f32" else 4.7e77)):
        ns = {"nx": nx}
        exec(f"def f(x: nx.{t}):\n    return x ** {n}\n", ns)  # noqa: S102 - the test's own
        f = nx.ptx_expr(ns["f"], precision=mode)
        xs = np.array([x], dt)
        want = np.power(xs, dt(n))
        assert want[0] != 0                                    # a subnormal in NumPy
        got = _emulated(f, x=xs)
        np.testing.assert_allclose(got, want, rtol=1e-3, err_msg=f"{t} x**{n} at {x}")


@pytest.mark.parametrize("mode", ["cuda", "accurate"])
def test_negative_constant_powers_near_overflow_stay_within_4_ulp(mode):
    # 1 / x**n rounded x**n to a subnormal where x**-n is near the top of the range: 5.8 ulp
    # at n = -4 (f32, x in [2.3e-10, 3.3e-10]), past pow's documented 4 ulp
    rng = np.random.default_rng(3)
    worst = {}
    for n, lo, hi in ((-4, 2.33e-10, 3.3e-10), (-3, 1.43e-13, 2.3e-13), (-2, 5.43e-20, 1.09e-19)):
        ns = {"nx": nx}
        exec(f"def f(x: nx.f32):\n    return x ** {n}\n", ns)   # noqa: S102 - the test's own
        x = rng.uniform(lo, hi, 20000).astype(np.float32)
        got = _emulated(nx.ptx_expr(ns["f"], precision=mode), x=x)
        exact = x.astype(np.longdouble) ** n
        with np.errstate(over="ignore"):                       # beyond f32: not compared
            finite = np.isfinite(exact.astype(np.float32))
            ulp = np.spacing(np.abs(exact.astype(np.float32))).astype(np.longdouble)
        assert np.all(np.isfinite(got[finite]))
        worst[n] = float((np.abs(got.astype(np.longdouble) - exact) / ulp)[finite].max())
    assert all(e <= 4 for e in worst.values()), worst


@pytest.mark.parametrize("mode", ["cuda", "accurate", "fast"])
def test_constant_power_derivatives_stay_within_the_documented_4_ulp(mode):
    # n x^(n-1) by repeated squaring erred with n (7.2 ulp at n = 12, 48 at n = 64); outside
    # grad_rules.PLAIN_POWER it is double-word squaring now (grad_rules.accurate_power)
    rng = np.random.default_rng(27)
    x = rng.uniform(0.5, 2.5, 20000).astype(np.float32) * rng.choice(np.float32([-1, 1]), 20000)
    exact = x.astype(np.longdouble)
    worst = {}
    for n in (7, 8, 12, 33, 64, 65, -3, -4, -5, -6, -17, -63):
        ns = {"nx": nx}
        exec(f"def f(x: nx.f32):\n    return x ** {n}\n", ns)   # noqa: S102 - the test's own
        g = nx.grad(nx.ptx_expr(ns["f"], precision=mode), wrt="x")
        got = _emulated(g, x=x).astype(np.longdouble)
        want = n * exact ** (n - 1)
        ulp = np.spacing(np.abs(want.astype(np.float32))).astype(np.longdouble)
        worst[n] = float(np.max(np.abs(got - want) / ulp))
    assert all(e <= 4 for e in worst.values()), worst


def test_md_example_run_again_keeps_its_steps_and_picture_path(tmp_path, monkeypatch, capsys):
    # where numba was imported without the simulator (a test session on a machine without a
    # GPU), main() runs the script again in a fresh interpreter: that run ignored main's
    # steps= and out= (300 steps, a PNG in the working directory)
    import os
    import runpy
    numba_cuda = pytest.importorskip("numba.cuda")
    if numba_cuda.is_available():
        pytest.skip("a GPU: main() runs in this interpreter")
    from numptx.jit.numba.numba_site import SIMULATOR
    if SIMULATOR:
        pytest.skip("this session runs in numba-cuda's simulator already")
    monkeypatch.chdir(tmp_path)
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples",
                        "md_lennard_jones.py")
    m = runpy.run_path(path, run_name="md")
    out = tmp_path / "sub" / "e.png"
    out.parent.mkdir()
    m["main"](steps=3, out=str(out))
    text = capsys.readouterr().out
    assert "3 velocity-Verlet steps" in text, text
    assert not (tmp_path / "md_lennard_jones.png").exists()


@pytest.mark.parametrize("t", ["f64", "f16"])
def test_a_constant_output_keeps_the_formulas_output_type(t):
    # f returning a Python number, declared f64 (or f16): value_and_grad's value output was f32
    ns = {"nx": nx}
    exec(f"def c(x: nx.{t}) -> nx.{t}:\n    return 2.5\n"            # noqa: S102 - ours
         f"def k(x: nx.{t}, y: nx.{t}) -> (nx.{t}, nx.{t}):\n    return x * y, 2.5\n", ns)
    c, k = nx.ptx_expr(ns["c"]), nx.ptx_expr(ns["k"])
    assert [n.dtype for _, n in c.graph.outputs] == [t]
    v = nx.value_and_grad(c, wrt="x")
    assert [n.dtype for _, n in v.graph.outputs] == [t, t]
    assert [n.dtype for _, n in nx.jacobian(k, wrt="x").graph.outputs] == [t, t]
    if t == "f64":
        value, dv = v(np.float64(1.0))
        assert value.dtype == np.float64 and value == 2.5 and dv == 0.0
        out = nx.emulate(v.stub(), {"x": np.float64([1.0, 2.0])}, ["out0", "out1"])
        assert out["out0"].dtype == np.float64 and list(out["out0"]) == [2.5, 2.5]
