"""Issue 27, derivatives at work: examples/md_lennard_jones.py (the force from
``nx.value_and_grad`` in a numba kernel, energy conserved over velocity-Verlet steps in the CPU
simulator), the picture's raster, and the constant integer powers that the derivatives and the
example lean on (``x ** n`` by repeated squaring for -4 <= n <= 6, within pow's 4 ulp)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import numptx as nx
from numptx.dsl.lowering import POW_BY_MULTIPLICATION

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples",
                       "md_lennard_jones.py")


def _in_simulator(code: str) -> str:
    """Run ``code`` (with ``m``, the example's namespace) in a fresh interpreter under
    NUMBA_ENABLE_CUDASIM=1; its last stdout line."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    src = f"import runpy\nm = runpy.run_path({EXAMPLE!r}, run_name='md')\n{code}\n"
    r = subprocess.run([sys.executable, "-c", src], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip().splitlines()[-1]


def test_md_energy_is_conserved_with_the_derived_force(tmp_path):
    out = tmp_path / "e.png"
    line = _in_simulator(
        "import json\n"
        f"r = m['main'](steps=120, out={str(out)!r})\n"
        "k = m['forces'].inject(lj=m['lj_and_force'])\n"
        "import numpy as np\n"
        "pos, _ = m['cluster']()\n"
        "f, p = np.zeros((8, 3), np.float32), np.zeros(8, np.float32)\n"
        "k[1, 32](pos.astype(np.float32), f, p, np.float32(1), np.float32(1))\n"
        "print(json.dumps({'energy': r['energy'].tolist(), 'drift': r['drift'],\n"
        "                  'writer': r['writer'], 'pos': pos.tolist(), 'f': f.tolist(),\n"
        "                  'pot': p.tolist()}))")
    res = json.loads(line)
    energy = np.array(res["energy"])
    assert len(energy) == 121 and res["drift"] < 1e-3
    assert np.ptp(energy) > 0                 # a real trajectory, the energy not a constant
    # the kernel's force and energy against the analytic Lennard-Jones in float64
    pos = np.array(res["pos"])
    d = pos[:, None, :] - pos[None, :, :]
    r = np.sqrt((d * d).sum(-1)) + np.eye(8)
    s6 = r ** -6.0
    u = np.where(np.eye(8, dtype=bool), 0.0, 4 * (s6 * s6 - s6))
    du_dr = np.where(np.eye(8, dtype=bool), 0.0, (-48 * s6 * s6 + 24 * s6) / r)
    force = (-du_dr / r)[:, :, None] * d
    np.testing.assert_allclose(np.array(res["f"]), force.sum(1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.array(res["pot"]), 0.5 * u.sum(1), rtol=1e-5, atol=1e-5)
    assert (res["writer"] is None) == (not out.exists())


def test_md_picture_raster():
    """The Pillow fallback's line plot: the highest point on the top margin row, the lowest on
    the bottom one, the axes grey."""
    line = _in_simulator(
        "import numpy as np\n"
        "img = m['raster'](np.array([0.0, 1.0, 0.0, -1.0]), width=60, height=30)\n"
        "print(img.shape, img.dtype, int((img == 0).sum()), int(img[8, 22]), int(img[21, 51]),"
        " int(img[15, 7]), int(img[0, 0]))")
    assert line.startswith("(30, 60) uint8 ")
    black, top, bottom, axis, corner = map(int, line.split()[3:])
    assert black > 40 and top == 0 and bottom == 0 and axis == 128 and corner == 255


def _ulp_errors(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units in the last place of f32 at ``exact`` (normal range)."""
    ulp = 2.0 ** (np.floor(np.log2(np.abs(exact))) - 23)
    return np.abs(got.astype(np.float64) - exact) / ulp


def _instructions(f) -> list[str]:
    return [str(m.target) for m in f.graph.live() if m.op == "instr"]


#: multiplications (and a division for n < 0) of x ** n by repeated squaring; n < 0 scales x by a
#: power of two first (abs, setp, two selp, mul: lowering._negative_power)
SQUARING = {-4: 8, -3: 8, -2: 7, 3: 2, 4: 2, 5: 3, 6: 3}


@pytest.mark.parametrize("n", sorted(SQUARING))
def test_constant_integer_powers_multiply_within_4_ulp(n):
    """x ** n for -4 <= n <= 6 lowers to repeated squaring (x**6: x2, x4, x4*x2), emulated
    within pow's documented 4 ulp of the exact power, on 2^16 mantissas of [1, 2), scaled and
    negated."""
    @nx.ptx_expr
    def f(x: nx.f32) -> nx.f32:
        return x ** n
    assert POW_BY_MULTIPLICATION == (-4, 6)
    ins = _instructions(f)
    assert len(ins) == SQUARING[n] and set(ins) <= {"mul.rn.f32", "div.rn.f32", "abs.f32",
                                                    "setp.ge.f32", "selp.f32"}, ins
    mant = (np.arange(1 << 16, dtype=np.uint32) << 7 | np.uint32(0x3F800000)).view(np.float32)
    x = np.concatenate([mant, mant * np.float32(2.0 ** -9), -mant * np.float32(8.0)])
    got = nx.emulate(f.stub(), {"x": x}, outputs={"out": "f32"})["out"]
    err = _ulp_errors(got, x.astype(np.float64) ** n)
    assert err.max() <= 4.0, (n, float(err.max()))


@pytest.mark.parametrize("n", [-4, 5, 6])
def test_constant_integer_powers_f64_within_4_ulp(n):
    """The same in f64 (the bound is the same number of ulps in every precision), against the
    exact power of each sample (fractions), 3000 random mantissas."""
    from fractions import Fraction

    @nx.ptx_expr
    def f(x: nx.f64) -> nx.f64:
        return x ** n
    assert len(_instructions(f)) == SQUARING[n]
    x = 1 + np.random.default_rng(n + 10).random(3000)
    got = nx.emulate(f.stub(), {"x": x}, outputs={"out": "f64"})["out"]
    worst = 0.0
    for xi, gi in zip(x.tolist(), got.tolist()):
        exact = Fraction(xi) ** n
        e = math.floor(math.log2(float(exact)))
        e -= Fraction(2) ** e > exact              # float() rounded up to a power of two
        ulp = Fraction(2) ** (e - 52)
        worst = max(worst, float(abs(Fraction(gi) - exact) / ulp))
    assert worst <= 4.0, (n, worst)


@pytest.mark.parametrize("n", [7, -5, -6])
def test_powers_beyond_the_bound_keep_mathlib_pow(n):
    """n = 7 and n = -5 can pass 4 ulp by multiplications: they stay mathlib's pow."""
    @nx.ptx_expr
    def f(x: nx.f32) -> nx.f32:
        return x ** n
    assert len(_instructions(f)) > 50
    x = np.float32([1.5, 0.75, 3.0, -2.5])
    got = nx.emulate(f.stub(), {"x": x}, outputs={"out": "f32"})["out"]
    assert np.all(_ulp_errors(got, x.astype(np.float64) ** n) <= 2)


# ---- constant factors of derivative rules: collected in Python, in the graph once ---------------
sp = pytest.importorskip("sympy", reason="sympy is a test dependency (pip install numptx[test])")
X, A, B = sp.symbols("x a b", real=True)


def _lj(x, a, b):
    s6 = (b / x) ** 6
    return 4 * a * (s6 * s6 - s6)


def _coulomb(x, a, b):
    return a * nx.rsqrt(x * x + b)


def _morse(x, a, b):
    return 1.5 * (1 - nx.exp(-a * (x - b))) ** 2


def _poly(x, a, b):
    return (((((0.5 * x - 1.25) * x + a) * x + 2.0) * x - b) * x + 0.75) * x + 3.0


def _rational(x, a, b):
    return (x * x + a * x + 1) / (x * x + b * x + 2)


# name -> (formula, sympy, sampled x range, a, b, graph instructions of value_and_grad (cuda))
ZOO = {
    "lj": (_lj, 4 * A * ((B / X) ** 12 - (B / X) ** 6), (0.95, 2.5), 1.0, 1.0, 15),
    "coulomb": (_coulomb, A / sp.sqrt(X * X + B), (-4, 4), 2.0, 0.01, 8),
    # morse 22: the value's 1 - e is fma(-e', s, 1) as in morse's own stub (its neg is an
    # operand modifier in SASS: 38 instructions either way); e stays a mul for d/dx
    "morse": (_morse, sp.Rational(3, 2) * (1 - sp.exp(-A * (X - B))) ** 2, (0.5, 4), 1.3, 1.2, 22),
    "poly": (_poly, (((((X / 2 - sp.Rational(5, 4)) * X + A) * X + 2) * X - B) * X
                     + sp.Rational(3, 4)) * X + 3, (-2, 2), 0.3, 0.7, 12),
    "rational": (_rational, (X * X + A * X + 1) / (X * X + B * X + 2), (-3, 3), 0.5, 1.5, 11),
}


def _typed(fn, precision="cuda"):
    def f(x, a, b):
        return fn(x, a, b)
    f.__name__ = fn.__name__.strip("_")
    f.__annotations__ = {"x": nx.f32, "a": nx.f32, "b": nx.f32, "return": nx.f32}
    return nx.ptx_expr(f, precision=precision)


@pytest.mark.parametrize("name", sorted(ZOO))
def test_value_and_grad_collects_constant_factors(name):
    """Constant factors (the 2 of x*x, -0.5 of rsqrt, n of x**n, literals) multiply in Python
    and reach the graph at most once: the instruction counts that bring benchmarks/bench_grad.py
    within 5 % of hand-written CUDA (before: Lennard-Jones 18, Coulomb 9, Morse 23)."""
    fn, _, _, _, _, count = ZOO[name]
    vg = nx.value_and_grad(_typed(fn), wrt="x")
    ins = _instructions(vg)
    assert len(ins) <= count, (len(ins), ins)
    if name == "coulomb":                  # -(x y^3) a: no x + x, no * -0.5
        g = str(vg.graph)
        assert "add.rn.f32(%x, %x)" not in g and "-0.5" not in g, g


@pytest.mark.parametrize("precision", ["cuda", "accurate", "fast"])
@pytest.mark.parametrize("name", sorted(ZOO))
def test_value_and_grad_against_sympy(name, precision):
    """value_and_grad of each formula, emulated, against sympy's value and derivative in
    float64 on 2001 points: relative to max(|d|, 1), within 2^-18 (a few rounding steps)."""
    fn, expr, (lo, hi), a, b, _ = ZOO[name]
    vg = nx.value_and_grad(_typed(fn, precision), wrt="x")
    x = np.linspace(lo, hi, 2001).astype(np.float32)
    got = nx.emulate(vg.stub(), {"x": x, "a": np.float32(a), "b": np.float32(b)},
                     outputs={"out0": "f32", "out1": "f32"})
    subs = {A: float(np.float32(a)), B: float(np.float32(b))}
    u = sp.lambdify(X, expr.subs(subs), "numpy")
    du = sp.lambdify(X, sp.diff(expr, X).subs(subs), "numpy")
    xs = x.astype(np.float64)
    for out, want in (("out0", u(xs)), ("out1", du(xs))):
        err = np.abs(got[out].astype(np.float64) - want) / np.maximum(np.abs(want), 1.0)
        assert err.max() < 2.0 ** -18, (out, float(err.max()), float(xs[err.argmax()]))
