"""``nx.grad``, ``nx.value_and_grad``, ``nx.jacobian`` (issue 27 item 1): every derivative rule of
the operation table against sympy's derivative in float64 on dense samples, in every precision
mode (the bounds are docs/dsl.md's, "Derivatives"); random formulas against central
differences; grad of grad; the Lennard-Jones example through a real site (NVRTC, the emulator);
the shared subexpressions of value_and_grad; the conventions at non-differentiable points; and
the errors for what cannot be differentiated."""
from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

import numptx as nx
from numptx.dsl.grad import GradError
from numptx.dsl.proxy import OPS

sp = pytest.importorskip("sympy", reason="sympy is a test dependency (pip install numptx[test])")

a_, b_, c_ = sp.symbols("a b c", real=True)
# op -> (its sympy expression in a, b, c; the sampled domain of each operand)
SYMPY = {
    "add": (a_ + b_, [(-4, 4), (-4, 4)]), "sub": (a_ - b_, [(-4, 4), (-4, 4)]),
    "mul": (a_ * b_, [(-4, 4), (-4, 4)]), "truediv": (a_ / b_, [(-4, 4), (0.25, 4)]),
    "fma": (a_ * b_ + c_, [(-4, 4)] * 3), "neg": (-a_, [(-4, 4)]), "pos": (a_, [(-4, 4)]),
    "abs": (sp.Abs(a_), [(-4, 4)]), "square": (a_ * a_, [(-4, 4)]),
    "sqrt": (sp.sqrt(a_), [(0.01, 100)]), "rsqrt": (1 / sp.sqrt(a_), [(0.01, 100)]),
    "rcp": (1 / a_, [(0.1, 10)]), "exp": (sp.exp(a_), [(-10, 10)]),
    "exp2": (2 ** a_, [(-10, 10)]), "expm1": (sp.exp(a_) - 1, [(-10, 10)]),
    "log": (sp.log(a_), [(0.01, 100)]), "log2": (sp.log(a_, 2), [(0.01, 100)]),
    "log10": (sp.log(a_, 10), [(0.01, 100)]), "log1p": (sp.log(1 + a_), [(-0.9, 100)]),
    "sin": (sp.sin(a_), [(-10, 10)]), "cos": (sp.cos(a_), [(-10, 10)]),
    "tan": (sp.tan(a_), [(-1.5, 1.5)]), "sinh": (sp.sinh(a_), [(-5, 5)]),
    "cosh": (sp.cosh(a_), [(-5, 5)]), "tanh": (sp.tanh(a_), [(-5, 5)]),
    "sigmoid": (1 / (1 + sp.exp(-a_)), [(-10, 10)]), "arctan": (sp.atan(a_), [(-10, 10)]),
    "cbrt": (a_ ** sp.Rational(1, 3), [(0.01, 100)]),
    "hypot": (sp.sqrt(a_ * a_ + b_ * b_), [(-4, 4), (-4, 4)]),
    "pow": (a_ ** b_, [(0.1, 4), (-3, 3)]),
    "minimum": (sp.Min(a_, b_), [(-4, 4), (-4, 4)]), "maximum": (sp.Max(a_, b_), [(-4, 4), (-4, 4)]),
    "fmin": (sp.Min(a_, b_), [(-4, 4), (-4, 4)]), "fmax": (sp.Max(a_, b_), [(-4, 4), (-4, 4)]),
    "clip": (sp.Min(sp.Max(a_, b_), c_), [(-4, 4), (-3, -1), (1, 3)]),
    "copysign": (sp.Abs(a_) * sp.sign(b_), [(-4, 4), (-4, 4)]),
    "mod": (a_ - b_ * sp.floor(a_ / b_), [(-4, 4), (0.5, 3)]),
    "fmod": (a_ - b_ * sp.sign(a_ / b_) * sp.floor(sp.Abs(a_ / b_)), [(-4, 4), (0.5, 3)]),
    "floordiv": (sp.floor(a_ / b_), [(-4, 4), (0.5, 3)]),
    "floor": (sp.floor(a_), [(-4, 4)]), "ceil": (sp.ceiling(a_), [(-4, 4)]),
    "trunc": (sp.sign(a_) * sp.floor(sp.Abs(a_)), [(-4, 4)]),
    "round": (sp.floor(a_ + sp.Rational(1, 2)), [(-4, 4)]), "sign": (sp.sign(a_), [(-4, 4)]),
}
# the documented bounds (docs/dsl.md, "Derivatives"): units in the last place of the type,
# relative to the float64 sympy value; 1 - y^2 and y (1 - y) cancel where the derivative is
# small, so tanh and sigmoid are held to ulps of max(|d|, 1)
BOUND_ULP = {("f32", "cuda"): 4, ("f32", "accurate"): 4, ("f32", "fast"): 6,
             ("f64", "cuda"): 4, ("f64", "accurate"): 4, ("f64", "fast"): 4}
ABSOLUTE_BELOW_1 = {"tanh", "sigmoid"}
N = 1001


def _formula(name: str, t: str, mode: str):
    names = "abc"[:OPS[name].arity]
    src = (f"def f_{name}({', '.join(f'{v}: nx.{t}' for v in names)}):\n"
           f"    return OPS[{name!r}]({', '.join(names)})\n")
    ns = {"nx": nx, "OPS": OPS}
    exec(src, ns)                                         # noqa: S102 - the test's own source
    return nx.ptx_expr(ns[f"f_{name}"], precision=mode), names


def _sympy_derivative(expr, sym, syms):
    d = sp.diff(expr, sym).doit()
    # floor's derivative stays unevaluated and sign's is a DiracDelta: 0 off the jumps
    d = d.replace(lambda e: isinstance(e, (sp.Derivative, sp.Subs, sp.DiracDelta)),
                  lambda e: sp.Integer(0))
    return sp.lambdify(syms, d, "numpy")        # Heaviside(0) = 1/2: the tie convention


def test_every_float_operation_has_a_rule_and_a_sympy_check():
    with_float_results = [n for n, op in OPS.items() if op.kind in ("num", "float", "where")]
    assert [n for n in with_float_results if OPS[n].deriv is None] == []
    assert sorted(set(with_float_results) - {"where"}) == sorted(SYMPY)   # where: its own test


@pytest.mark.parametrize("t,mode", sorted(BOUND_ULP))
def test_each_rule_matches_sympy(t, mode):
    rng = np.random.default_rng(27)
    dt = np.dtype(np.float32 if t == "f32" else np.float64)
    eps = np.finfo(dt).eps
    worst = {}
    for name, (expr, domains) in SYMPY.items():
        f, names = _formula(name, t, mode)
        try:
            f.graph
        except nx.PrecisionError:
            assert (t, mode) == ("f64", "fast")        # no fast f64 transcendentals
            continue
        syms = (a_, b_, c_)[:len(names)]
        cols = {v: (np.linspace(lo, hi, N) if i == 0 else rng.uniform(lo, hi, N)).astype(dt)
                for i, (v, (lo, hi)) in enumerate(zip(names, domains))}
        x64 = [cols[v].astype(np.float64) for v in names]
        for i, v in enumerate(names):
            g = nx.grad(f, wrt=v)
            assert g.precision == mode
            got = nx.emulate(g.stub(), cols, ["out"])["out"].astype(np.float64)
            ref = np.broadcast_to(np.asarray(_sympy_derivative(expr, syms[i], syms)(*x64),
                                             np.float64), got.shape)
            ok = np.isfinite(ref)
            assert ok.mean() > 0.95, (name, v)
            floor = 1.0 if name in ABSOLUTE_BELOW_1 else np.finfo(dt).tiny
            err = np.abs(got - ref)[ok] / np.maximum(np.abs(ref[ok]), floor) / eps
            worst[(name, v)] = float(err.max())
    assert len(worst) >= (45 if (t, mode) != ("f64", "fast") else 30)
    bad = {k: e for k, e in worst.items() if not e <= BOUND_ULP[(t, mode)]}
    assert not bad, f"{t} {mode}: ulp errors over {BOUND_ULP[(t, mode)]}: {bad}"


def test_where_takes_the_selected_branch_derivative():
    @nx.ptx_expr
    def f(x: nx.f32, y: nx.f32):
        return nx.where(x > y, x * x, nx.sin(y) * x)
    x = np.float32([2.0, -1.0, 0.5])
    y = np.float32([1.0, 3.0, 0.5])
    dx = nx.grad(f, wrt="x")
    np.testing.assert_allclose(dx(x, y), np.where(x > y, 2 * x, np.sin(y)), rtol=1e-6)
    out = nx.emulate(dx.stub(), {"x": x, "y": y}, ["out"])["out"]
    np.testing.assert_allclose(out, np.where(x > y, 2 * x, np.sin(y)), rtol=1e-6)
    dy = nx.grad(f, wrt="y")
    np.testing.assert_allclose(dy(x, y), np.where(x > y, 0.0, np.cos(y) * x), rtol=1e-6)


def test_non_differentiable_points_take_the_mean_of_the_one_sided_derivatives():
    @nx.ptx_expr
    def f(x: nx.f32, y: nx.f32):
        return {"abs": abs(x), "max": nx.maximum(x, y), "min": nx.minimum(x, y),
                "fmax": nx.fmax(x, y), "clip": nx.clip(x, -1.0, 1.0), "hyp": nx.hypot(x, y),
                "floor": nx.floor(x), "sq": nx.sqrt(nx.abs(x))}
    J = nx.jacobian(f, wrt=("x", "y"))
    zero, one = np.float32(0.0), np.float32(1.0)
    for run in (lambda *v: J(*v), lambda x, y: nx.emulate(
            J.stub(), {"x": np.float32([x]), "y": np.float32([y])},
            [k for k, _ in J.graph.outputs])):
        r = {k: float(np.ravel(v)[0]) for k, v in run(zero, zero).items()}
        assert r["dabs_dx"] == 0.0                          # abs'(0) = sign(0) = 0
        assert r["dmax_dx"] == r["dmax_dy"] == 0.5          # a tie splits
        assert r["dmin_dx"] == r["dmin_dy"] == 0.5
        assert r["dfmax_dx"] == 0.5
        assert r["dhyp_dx"] == r["dhyp_dy"] == 0.0          # hypot at (0, 0)
        assert r["dfloor_dx"] == 0.0
        assert np.isnan(r["dsq_dx"])          # the chain rule: (0.5 / sqrt(0)) * sign(0) = inf * 0
        r = {k: float(np.ravel(v)[0]) for k, v in run(one, zero).items()}
        assert r["dclip_dx"] == 0.5                         # at the bound: min(., 1) ties
        assert r["dmax_dx"] == 1.0 and r["dmax_dy"] == 0.0
        assert r["dabs_dx"] == 1.0
    # fmax of a NaN: the other operand's derivative; maximum propagates the NaN
    r = J(np.float32(np.nan), np.float32(2.0))
    assert r["dfmax_dx"] == 0.0 and r["dfmax_dy"] == 1.0


def test_pow_derivatives_at_zero_and_in_the_exponent():
    @nx.ptx_expr(precision="accurate")
    def f(x: nx.f32, p: nx.f32):
        return x ** p
    dp = nx.grad(f, wrt="p")
    assert dp(np.float32(0.0), np.float32(2.0)) == 0.0      # 0^p is flat in p: log(0) not used
    np.testing.assert_allclose(dp(np.float32(3.0), np.float32(2.0)), 9 * np.log(3), rtol=1e-6)

    @nx.ptx_expr
    def g(x: nx.f32):
        return x ** 7 + x ** -6
    dg = nx.grad(g, wrt="x")                                # constant exponents: multiplications
    rows = [n.target for n in dg.graph.live() if n.op == "instr"]    # (double-word: the error
    assert all(r.split(".")[0] in ("mul", "div", "fma", "add", "rcp", "neg", "abs", "setp",
                                   "selp", "copysign") for r in rows), rows   # words; no mathlib)
    x = np.float32([0.5, 1.5, -2.0])
    np.testing.assert_allclose(dg(x), 7 * x.astype(float) ** 6 - 6 * x.astype(float) ** -7,
                               rtol=3e-6)
    assert nx.grad(nx.ptx_expr(lambda x: x ** 3), wrt="x")(np.float32(0.0)) == 0.0


# ---- random formulas against central differences ------------------------------------------------
def _random_f64(seed: int, n: int) -> list[str]:
    from test_dsl_random import _value      # the DSL's random formula generator
    r = random.Random(seed)
    out = []
    while len(out) < n:
        body = _value(r, r.randint(1, 5), "f64")
        if "nan" in body or "inf" in body:
            continue
        out.append(f"def f(x: nx.f64, y: nx.f64, z: nx.f64):\n    return {body}\n")
    return out


@pytest.mark.parametrize("seed,mode", [(0, "accurate"), (1, "accurate"), (2, "cuda"),
                                       (3, "cuda")])
def test_random_formulas_match_central_differences(seed, mode):
    rng = np.random.default_rng(seed)
    checked = 0
    for src in _random_f64(seed, 40):
        ns = {"nx": nx}
        exec(src, ns)                                      # noqa: S102 - generated here
        f = nx.ptx_expr(ns["f"], precision=mode)
        try:
            f.graph
        except nx.TraceError:
            continue                # nx.where(c, 1.0, 2.0): no type; an int literal too large
        if f.graph.outputs[0][1].dtype != "f64":
            continue                # a formula that is the Python int 7: an s32 output
        J = nx.grad(f, wrt=("x", "y", "z"))
        p = {k: rng.uniform(0.2, 3.0, 64) for k in "xyz"}
        emulated = nx.emulate(J.stub(), p, ["out0", "out1", "out2"])
        reference = J(**p)
        with np.errstate(all="ignore"):
            # rounding in f(x + h) - f(x - h): about eps |f| / h (x * 2^31 has a large |f|)
            noise = 50 * np.finfo(np.float64).eps * np.abs(np.asarray(f(**p), np.float64)) / 5e-6
        for i, k in enumerate("xyz"):
            cds = []
            for h in (1e-5, 5e-6):
                up, dn = dict(p), dict(p)
                up[k], dn[k] = p[k] + h, p[k] - h
                with np.errstate(all="ignore"):
                    cds.append((f(**up) - f(**dn)) / (2 * h))
            with np.errstate(all="ignore"):
                tol = 1e-5 * np.maximum(np.abs(cds[0]), 1.0) + noise
                smooth = np.isfinite(cds[0]) & (np.abs(cds[0] - cds[1]) < tol)
            got = emulated[f"out{i}"]
            if "sqrt" in src:       # sqrt(g) where g is 0 (-0.0 * x): inf * 0, NaN (as in JAX)
                smooth &= ~np.isnan(got)
            assert np.all(np.abs(got - cds[0])[smooth] <= 2 * tol[smooth]), src
            ref = np.broadcast_to(reference[i], got.shape)   # a constant derivative: 0-d
            tight = 1e-12 if mode == "accurate" else 1e-9       # cuda: contracted fmas
            np.testing.assert_allclose(ref[smooth], got[smooth], rtol=tight, atol=tight,
                                       err_msg=src)
            checked += int(smooth.sum())
    assert checked > 2000


# ---- higher derivatives, the example, sharing -------------------------------------------
@nx.ptx_expr
def lj(r: nx.f32, eps: nx.f32, sigma: nx.f32) -> nx.f32:
    s6 = (sigma / r) ** 6
    return 4 * eps * (s6 * s6 - s6)


def _lj_d(r, eps, sigma, order):
    r, eps, sigma = (np.float64(v) for v in (r, eps, sigma))
    a12, a6 = sigma ** 12, sigma ** 6
    if order == 1:
        return 4 * eps * (-12 * a12 * r ** -13 + 6 * a6 * r ** -7)
    return 4 * eps * (156 * a12 * r ** -14 - 42 * a6 * r ** -8)


def test_grad_of_grad():
    d2 = nx.grad(nx.grad(lj, wrt="r"), wrt="r")
    r = np.float32([0.9, 1.12, 1.5, 2.5])
    np.testing.assert_allclose(d2(r, 1.0, 1.0), _lj_d(r, 1.0, 1.0, 2), rtol=2e-5)
    emu = nx.emulate(d2.stub(), {"r": r, "eps": np.float32(1.0), "sigma": np.float32(1.0)},
                     ["out"])["out"]
    np.testing.assert_allclose(emu, _lj_d(r, 1.0, 1.0, 2), rtol=2e-5)

    @nx.ptx_expr
    def g(x: nx.f64, y: nx.f64):
        return nx.sin(x) * nx.exp(x * y)
    H = nx.jacobian(nx.grad(g, wrt=("x", "y")), wrt=("x", "y"))   # the Hessian, row-major
    x, y = 0.7, -0.4
    xs, ys = sp.symbols("x y")
    G = sp.sin(xs) * sp.exp(xs * ys)
    want = [float(sp.diff(G, u, v).subs({xs: x, ys: y})) for u in (xs, ys) for v in (xs, ys)]
    np.testing.assert_allclose(H(x, y), want, rtol=1e-13)
    assert H(x, y)[1] == H(x, y)[2]                     # d2/dxdy = d2/dydx here, exactly


def test_lennard_jones_through_a_site():
    force = nx.grad(lj, wrt="r")
    u_and_f = nx.value_and_grad(lj, wrt="r")
    r = np.float32([0.95, 1.0, 1.1224621, 1.5, 3.0])
    # (near the minimum, 2^(1/6), the force is a difference of nearly equal terms: atol)
    np.testing.assert_allclose(force(r, 1.0, 1.0), _lj_d(r, 1.0, 1.0, 1), rtol=1e-5, atol=1e-4)
    u, du = u_and_f(r, 1.0, 1.0)
    np.testing.assert_array_equal(u, lj(r, 1.0, 1.0))
    np.testing.assert_array_equal(du, force(r, 1.0, 1.0))
    inj = nx.PtxInject(nx.cuda_to_ptx(r'''
    extern "C" __global__ void k(float* uo, float* fo, const float* rs, float eps, float sigma) {
        float r = rs[threadIdx.x], u, f;
        PTX_INJECT("lj", PTX_IN(F32, r), PTX_IN(F32, eps), PTX_IN(F32, sigma),
                   PTX_OUT(F32, u), PTX_OUT(F32, f));
        uo[threadIdx.x] = u; fo[threadIdx.x] = -f;
    }''', arch="sm_90"))
    site = inj.sites["lj"]
    out = nx.emulate(u_and_f, {"r": r, "eps": np.float32(1.0), "sigma": np.float32(1.0)},
                     site=site)
    np.testing.assert_allclose(out["u"], lj(r, 1.0, 1.0), rtol=1e-6)
    np.testing.assert_allclose(out["f"], _lj_d(r, 1.0, 1.0, 1), rtol=1e-5, atol=1e-4)
    cubin = nx.ptx_to_cubin(inj.render({"lj": u_and_f.stub(site)}), arch="sm_90")
    assert cubin[:4] == b"\x7fELF"
    # eps bound: a constant, not an input; the force still follows it
    bound = force.bind(eps=2.0)
    assert list(bound.params) == ["r", "sigma"]
    np.testing.assert_allclose(bound(r, 1.0), 2 * force(r, 1.0, 1.0), rtol=1e-6)
    np.testing.assert_allclose(nx.grad(lj.bind(sigma=1.0), wrt="r")(r, 1.0),
                               force(r, 1.0, 1.0), rtol=1e-6)


def _instructions(expr) -> int:
    return sum(1 for n in expr.graph.live() if n.op == "instr")


def test_value_and_grad_shares_subexpressions():
    @nx.ptx_expr
    def gauss(x: nx.f32, y: nx.f32, s: nx.f32):
        d = x - y
        return nx.exp(-(d * d) / (2 * s * s)) + nx.tanh(x * s)
    for f in (lj, gauss):
        both = nx.value_and_grad(f, wrt=f.fn.__code__.co_varnames[0])
        apart = _instructions(f) + _instructions(nx.grad(f, wrt=f.fn.__code__.co_varnames[0]))
        assert _instructions(both) < apart
        # the value's nodes are reused by the derivative: the value output is one of them
        assert _instructions(both) <= _instructions(nx.grad(f, wrt=f.fn.__code__.co_varnames[0])) + 3


def test_precision_backend_and_forms_carry_over():
    @nx.ptx_expr(precision="fast", backend="ast")
    def f(x: nx.f32, y: nx.f32):
        return {"e": nx.exp(x) * y, "s": nx.sin(y)}
    J = nx.jacobian(f, wrt=("x", "y"))
    assert J.precision == "fast" and J.backend == "ast"
    assert [k for k, _ in J.graph.outputs] == ["de_dx", "de_dy", "ds_dx", "ds_dy"]
    assert J.graph.output_form == "dict"
    assert any(".approx" in n.target for n in J.graph.live() if n.op == "instr")
    vg = nx.value_and_grad(nx.ptx_expr(lambda x, y: x * y), wrt=("x", "y"))
    assert vg(np.float32(3), np.float32(4)) == (12.0, 4.0, 3.0)
    assert nx.grad(nx.ptx_expr(lambda x, y: x * y), wrt=("y",))(np.float32(3), 4) == (3.0,)
    print(J.graph)                                         # prints, with source lines
    assert "jacobian_f" in repr(J)


# ---- bad input ----------------------------------------------------------------------------------
def test_bad_wrt_is_named():
    @nx.ptx_expr
    def f(x: nx.f32, n: nx.s32, k: nx.f32):
        return x * nx.f32(n) * k
    line = f.fn.__code__.co_firstlineno
    for wrt, words in (("q", "no parameter 'q'"), ("n", "'n' is s32"), (3, "a parameter name"),
                       (("x", "x"), "named twice"), ((), "a parameter name")):
        with pytest.raises(GradError) as e:
            nx.grad(f, wrt=wrt)
        assert words in str(e.value) and "grad(f" in str(e.value)
        assert e.value.lineno == line and e.value.filename == __file__
    with pytest.raises(GradError, match="'fn' is a plain Python argument"):
        nx.grad(nx.ptx_expr(lambda x, fn=nx.exp: fn(x)), wrt="fn")
    assert nx.grad(nx.ptx_expr(lambda x, fn=nx.exp: fn(x)), wrt="x")(np.float32(0)) == 1.0
    with pytest.raises(GradError, match="'k' is bound to a constant"):
        nx.value_and_grad(f.bind(k=2.0), wrt="k")
    assert isinstance(GradError("x"), nx.NumptxError) and nx.GradError is GradError


def test_an_operation_without_a_rule_is_named_at_its_line():
    no_rule = replace(OPS["exp"], name="myexp", deriv=None)

    @nx.ptx_expr
    def f(x: nx.f32, y: nx.f32):
        u = x * y
        return no_rule(u) + no_rule(y * y)           # the second: fine for wrt="x"
    line = f.fn.__code__.co_firstlineno + 3
    with pytest.raises(GradError) as e:
        nx.grad(f, wrt="x")
    msg = str(e.value)
    assert "grad(f, wrt='x')" in msg and "'myexp' has no derivative rule" in msg
    assert e.value.lineno == line and "no_rule(u)" in msg
    with pytest.raises(GradError, match="wrt='y'"):
        nx.grad(f, wrt="y")


def test_integer_casts_and_outputs_are_named():
    @nx.ptx_expr
    def cast(x: nx.f32, y: nx.f32):
        k = nx.s32(x * 4.0)
        return nx.f32(k) * y
    with pytest.raises(GradError) as e:
        nx.grad(cast, wrt="x")
    assert "cast to s32" in str(e.value) and e.value.lineno == cast.fn.__code__.co_firstlineno + 2
    np.testing.assert_allclose(nx.grad(cast, wrt="y")(np.float32(1.3), 1.0), 5.0)  # k: no x

    @nx.ptx_expr
    def count(x: nx.f32, n: nx.s32):
        return x * x, n + 1
    with pytest.raises(GradError) as e:
        nx.jacobian(count, wrt="x")
    assert "output 'out1' is s32" in str(e.value)
    assert e.value.lineno == count.fn.__code__.co_firstlineno + 2
    with pytest.raises(GradError, match="has 2 outputs; grad"):
        nx.grad(nx.ptx_expr(lambda x: (x, x * x)), wrt="x")
    with pytest.raises(GradError, match="expects a formula"):
        nx.grad(3.0, wrt="x")
    with pytest.raises(GradError, match="'da_db_dc' would name two outputs"):
        nx.jacobian(nx.ptx_expr(lambda c, b_dc: {"a": c * b_dc, "a_db": c}), wrt=("b_dc", "c"))


def test_bitcast_of_values_that_do_not_depend_on_wrt():
    @nx.ptx_expr
    def f(x: nx.f32, n: nx.u32):
        return x * nx.bitcast(n, nx.f32)
    bits = np.float32(3.0).view(np.uint32)
    assert nx.grad(f, wrt="x")(np.float32(2), bits) == 3.0
    assert nx.emulate(nx.grad(f, wrt="x").stub(), {"x": np.float32([2]), "n": np.uint32([bits])},
                      ["out"])["out"][0] == 3.0

    @nx.ptx_expr
    def g(x: nx.f32):
        return nx.f32(nx.bitcast(x, nx.s32))
    with pytest.raises(GradError, match="bitcast of a value that depends on 'x'") as e:
        nx.grad(g, wrt="x")
    assert e.value.lineno == g.fn.__code__.co_firstlineno + 2


def test_derivatives_pack_and_autotune_like_any_formula(tmp_path):
    from conftest import SPINE_SRC
    from numptx.jit.tune.autotune import autotune

    @nx.ptx_expr
    def f(x: nx.f32, y: nx.f32):
        return nx.exp(x) * y + x * x
    d = nx.grad(f, wrt="x")                        # exp(x) y + 2 x
    tmpl = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=nx.CubinCache(str(tmp_path / "c")))
    best = autotune(tmpl, [{"combine": nx.grad(nx.grad(f, wrt="x"), wrt="y")},   # exp(x)
                           {"combine": d}], cost="sass", cache_dir=tmp_path / "t")
    assert best.ranking == (0, 1) and best.failed == {} and not best.excluded
    FIT = r'''
    extern "C" __global__ void fit(float* out, const float* X, int n) {
        unsigned cand = blockIdx.y;
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) {
            float x = X[i], y;
            PTX_INJECT("f", PTX_IN(U32, cand), PTX_IN(F32, x), PTX_OUT(F32, y));
            out[cand * n + i] = y;
        }
    }'''
    g = nx.ptx_expr(lambda x: nx.sin(x) * x)
    pack = nx.CudaTemplate(FIT, entry="fit", cache=False).pack(
        "f", [g, nx.grad(g, wrt="x"), nx.grad(nx.grad(g, wrt="x"), wrt="x")], select="cand")
    assert len(pack) == 3 and pack.errors == {} and pack.ok == [0, 1, 2]
    x, y = np.float32([0.5, 1.5]), np.float32([2.0, -1.0])
    site = nx.PtxInject(nx.cuda_to_ptx(SPINE_SRC, arch="sm_90")).sites["combine"]
    np.testing.assert_allclose(nx.emulate(d, {"x": x, "y": y}, site=site)["z"],
                               np.exp(x) * y + 2 * x, rtol=1e-6)
