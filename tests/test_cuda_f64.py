"""precision="cuda" for f64: CUDA's double-precision algorithms (numptx/dsl/mathlib/cuda_f64.py).

Per function: the error on dense samples (edges, thresholds, subnormals included) against the
long-double reference, counted as CUDA counts it (steps from the correctly rounded value), within
CUDA's documented double-precision bound; special values equal NumPy's; the emulated stub equals
the eager evaluation bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from numptx.dsl import mathlib as M
from numptx.dsl.emulator import emulate
from numptx.dsl.mathlib import cuda_f64  # noqa: F401 - registers the f64 forms

from test_mathlib import StubBuilder, sample, special_inputs, same_values

CUDA_ULP_F64 = {"log": 1, "log2": 1, "log10": 2, "log1p": 1, "expm1": 1, "exp2": 2, "sinh": 2,
                "cosh": 2, "tanh": 2, "arctan": 2, "cbrt": 1, "hypot": 2, "pow": 2,
                "sigmoid": 3}
"""CUDA Math API, "Double-Precision Floating-Point Functions" (full range, default options);
sigmoid has no CUDA function: 3 ulp bounds ``1.0 / (1.0 + exp(-x))`` (1 of exp, 2 of the rest)
where exp(-x) does not overflow (x > -709.78)."""

RNG = np.random.default_rng(2064)

# per function: a uniform range covering the thresholds, and the thresholds themselves
RANGE = {"exp2": (-1080, 1030), "expm1": (-60, 712), "sinh": (-712, 712),
         "sigmoid": (-709.7, 760),
         "log": (0, 1e4), "log2": (0, 1e4), "log10": (0, 1e4), "log1p": (-1, 10),
         "cosh": (-712, 712), "tanh": (-25, 25), "arctan": (-30, 30), "cbrt": (-1e6, 1e6)}
EDGES = {
    "exp2": [1022.9, 1023.0, 1023.5, -1022.5, -1074.0, -1075.0, -1045.9, 1024.0, -1046.1, 1046.1],
    "expm1": [709.78, 709.79, -53.0, -52.9, -54.0, 0.4054, 0.4055, -0.4055, 1e-300, -1e-300,
              5e-324, 1e-17],
    "sinh": [710.47, 710.48, 709.78, 0.99999, 1.0, 1.00001, -1.0, 1e-300, 5e-324, 0.4055],
    "sigmoid": [-709.7, 36.0, 37.5, 40.0, 745.2, 800.0],
    "log1p": [-0.4, -0.39999, 1.79, 1.8, -1.0, -0.9999999999, 1e-300, -1e-300, 5e-324],
    "log": [np.sqrt(2.0), np.nextafter(np.sqrt(2.0), 0), 2.0 ** -1022, 2.0 ** -1023,
            1.0 - 2 ** -53],
}
EDGES["cosh"] = [710.47, 710.48, 709.78, -710.47, 1e-300, 5e-324, 44.0, 89.0, 90.0, 45.0]
EDGES["tanh"] = [0.6549, 0.655, -0.655, 19.6, 19.7, 1e-300, 5e-324, 22.0]
EDGES["arctan"] = [1.0, -1.0, np.nextafter(1.0, 2), 2.0 ** 126, 2.0 ** 128, 2.0 ** 64, 1e300,
                   5e-324]
EDGES["cbrt"] = [5e-324, 2.0 ** -1022, 8.0, 27.0, -27.0, 1e308, 2.0 ** -1050, 0.125]
EDGES["log2"] = EDGES["log10"] = EDGES["log"]
NAMES = sorted(n for n in CUDA_ULP_F64 if M.FUNCTIONS[n][1] == 1)
BINARY = sorted(n for n in CUDA_ULP_F64 if M.FUNCTIONS[n][1] == 2)


def inputs(name, n=30000):
    (x,) = sample(name, "f64", n, RNG)
    lo, hi = RANGE[name]
    sm = RNG.uniform(-2, 2, n) * 10.0 ** RNG.uniform(-300, 0, n)
    x = np.concatenate([x, RNG.uniform(lo, hi, n), sm, special_inputs("f64"), EDGES.get(name, [])])
    if name == "sigmoid":                       # exp(-x) overflows: 0 where the result is tiny
        x = x[~(x < -709.7)]
    return x


def evaluate(name, x):
    with np.errstate(all="ignore"):
        got = M.implementation(name, "f64", "cuda")(M.EagerBuilder(), x)
        ref = np.asarray(M.FUNCTIONS[name][2](x.astype(np.longdouble))).astype(np.float64)
    return np.asarray(got, np.float64), ref


def test_forms_registered():
    for name in NAMES:
        assert M.implementation(name, "f64", "cuda") is not None, name


@pytest.mark.parametrize("name", NAMES)
def test_within_cuda_documented_error(name):
    x = inputs(name, 20000)
    got, ref = evaluate(name, x)
    err = M.ulp_steps(got, ref, "f64")
    worst = int(np.argmax(err))
    assert err.max() <= CUDA_ULP_F64[name], (name, x[worst], got[worst], ref[worst], err.max())


@pytest.mark.parametrize("name", NAMES)
def test_special_values_match_numpy(name):
    x = special_inputs("f64")
    if name == "sigmoid":
        x = x[~(x < -709.7)]
    got, ref = evaluate(name, x)
    m = ~np.isfinite(x) | (x == 0) | ~np.isfinite(ref) | (ref == 0)
    assert np.all(same_values(got[m], ref[m])), (name, x[m], got[m], ref[m])


@pytest.mark.parametrize("name", NAMES)
def test_stub_equals_eager(name):
    x = inputs(name, 5000)      # the dense error check above takes 30,000 of each kind
    got, _ = evaluate(name, x)
    sb = StubBuilder()
    out = M.implementation(name, "f64", "cuda")(sb, sb.input("x", "f64"))
    emu = emulate(sb.text(out), {"x": x}, {"out": "f64"})["out"]
    assert np.array_equal(emu.view(np.uint64), got.view(np.uint64))


# ------------------------------------------------------------------------- binary functions
def inputs2(name, n=30000):
    x, y = sample(name, "f64", n, RNG)
    sp = special_inputs("f64")
    X, Y = np.meshgrid(sp, sp)
    u, v = RNG.uniform(-10, 10, (2, n))
    neg = -RNG.uniform(0.1, 10, n)                      # negative bases, integer exponents
    k = RNG.integers(-300, 300, n).astype(np.float64)
    return np.concatenate([x, X.ravel(), u, neg]), np.concatenate([y, Y.ravel(), v, k]), None


def evaluate2(name, x, y):
    with np.errstate(all="ignore"):
        got = M.implementation(name, "f64", "cuda")(M.EagerBuilder(), x, y)
        ref = M.FUNCTIONS[name][2](x.astype(np.longdouble), y.astype(np.longdouble))
        ref = np.asarray(ref).astype(np.float64)
    return np.asarray(got, np.float64), ref


@pytest.mark.parametrize("name", BINARY)
def test_binary_within_error_and_specials(name):
    x, y, _ = inputs2(name)
    got, ref = evaluate2(name, x, y)
    err = M.ulp_steps(got, ref, "f64")
    worst = int(np.argmax(err))
    assert err.max() <= CUDA_ULP_F64[name], (name, x[worst], y[worst], got[worst], ref[worst])
    m = ~np.isfinite(x) | (x == 0) | ~np.isfinite(y) | (y == 0)
    assert np.all(same_values(got[m], ref[m])), (name, x[m], y[m], got[m], ref[m])


@pytest.mark.parametrize("name", BINARY)
def test_binary_stub_equals_eager(name):
    x, y, _ = inputs2(name, 20000)
    got, _ = evaluate2(name, x, y)
    sb = StubBuilder()
    out = M.implementation(name, "f64", "cuda")(sb, sb.input("x", "f64"), sb.input("y", "f64"))
    emu = emulate(sb.text(out), {"x": x, "y": y}, {"out": "f64"})["out"]
    assert np.array_equal(emu.view(np.uint64), got.view(np.uint64))
