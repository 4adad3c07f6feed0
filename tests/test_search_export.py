"""numptx.search.export: a search's formulas as sympy, LaTeX, NumPy and @nx.ptx_expr, checked
on real searches, the real C core's stubs, the real emulator and the real NVRTC/nvJitLink."""
from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest

import numptx as nx
from numptx import search
from numptx import stack_ptx as sp
from numptx.search import operators as O
from numptx.search.export import NumpyFormula, latex_of, ptx_expr_of, sympy_of
from numptx.search.formula import evaluate
from numptx.search.genes import Genes, SearchError
from numptx.search.results import Candidate

sympy = pytest.importorskip("sympy")

# every function of the formula grammar: (text, positive inputs only, exact in ptx_expr)
GRAMMAR = [
    ("exp(x0)", False, False), ("exp2(x0)", False, False), ("log(x0)", True, False),
    ("log2(x0)", True, False), ("sin(x0)", False, False), ("cos(x0)", False, False),
    ("tanh(x0)", False, False), ("sqrt(x0)", True, True), ("abs(x0)", False, True),
    ("fmax(x0, x1)", False, True), ("fmin(x0, x1)", False, True),
    ("fma(x0, x1, 0.5)", False, True), ("copysign(x0, x1)", False, True),
    ("rint(x0)", False, True), ("trunc(x0)", False, True), ("floor(x0)", False, True),
    ("ceil(x0)", False, True), ("sat(x0)", False, True),
    ("x0**2 - x1/3 + -x0", False, True),
    ("(_t0 := x0*0.840067148 + x1)*_t0 - inf*0.0 + 1e-30", False, True),
]
ARITH = ["add", "sub", "mul", "div", "neg", "abs", "sq", "inv", "sqrt", "max", "min", "fma"]
FULL = ["copysign.f32", "cvt.rni.f32.f32", "cvt.rzi.f32.f32", "cvt.rmi.f32.f32",
        "cvt.rpi.f32.f32", "cvt.sat.f32.f32"]
TRANSC = ["add", "mul", "sub", "exp", "exp2", "log", "log2", "sin", "cos", "tanh", "sigmoid"]
G2 = Genes(["add", "mul"], 2)


def _data(n: int, positive: bool, seed: int = 0, dtype=np.float32) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.05, 3, (n, 2)) if positive else rng.uniform(-3, 3, (n, 2))
    if not positive:                     # halves (rint's ties), zeros, and a sign each way
        X[:6] = [[2.5, -0.0], [-1.5, 0.0], [0.5, 1.0], [-0.5, -2.0], [0.0, 3.0], [-0.0, -1.0]]
    return X.astype(dtype)


def _bits_equal(a: np.ndarray, b: np.ndarray, signed_zero: bool = True) -> bool:
    """Equal bit for bit, where any NaN equals any NaN (payloads are not compared); with
    ``signed_zero=False`` -0.0 equals 0.0 (see test_evaluate_sat_of_negative_zero)."""
    if not signed_zero:
        a, b = a + a.dtype.type(0), b + b.dtype.type(0)     # -0.0 + 0.0 is +0.0
    nan = np.isnan(a) & np.isnan(b)
    return a.dtype == b.dtype and bool(np.all(nan | (a.view(np.uint8).reshape(len(a), -1)
                                                      == b.view(np.uint8).reshape(len(b), -1))
                                              .all(axis=1)))


def _close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float = 0.0) -> bool:
    return bool(np.array_equal(np.isnan(a), np.isnan(b))
                and np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


# ---- recovered formulas, in sympy ------------------------------------------------------------
@pytest.mark.parametrize("target, ops", [
    ("x0*x1 + x0", ["add", "sub", "mul"]),
    ("x0**2 + x1", ["add", "mul", "sub"]),
    ("sin(x0) + x0*x1", ["add", "mul", "sin"]),
])
def test_a_recovered_formula_minus_the_target_simplifies_to_zero(target, ops):
    """A real search on a hidden-target problem; its best's sympy() is the target exactly."""
    X = _data(64, False, seed=1)
    x0, x1 = sympy.symbols("x0 x1")
    truth = sympy.sympify(target, locals={"x0": x0, "x1": x1})
    y = evaluate(target, X, Genes(ops, 2))                 # in f32, as the programs compute
    r = search.regress(X, y, ops, population=200, generations=30, seed=1, device="cpu",
                       target=1e-12, linear_scaling=False, fit_top=0, input_weights=False)
    c = r.best
    assert c.loss <= 1e-12, c.formula
    got = c.sympy()
    assert got.free_symbols <= {x0, x1}
    assert sympy.simplify(got - truth) == 0, (c.formula, got)
    # the numbers are exact integers where the formula's are (no 1.0*x0)
    assert not got.atoms(sympy.Float)


def test_numbers_in_sympy():
    names = ["x0"]
    e = sympy_of("2*x0 + 6.0 - x0*0.5", names)          # sympy combines the like terms
    assert e == sympy.Float(1.5) * sympy.Symbol("x0") + sympy.Integer(6) and str(e) == "1.5*x0 + 6"
    assert sympy_of("6.0", names) == sympy.Integer(6) and sympy_of("nan", names) is sympy.nan
    assert sympy_of("-inf", names) == -sympy.oo and sympy_of("inf", names) == sympy.oo
    # f32 numbers: the shortest decimal that rounds back to the f32 value
    f = sympy_of("0.840067148", names)
    assert isinstance(f, sympy.Float) and np.float32(float(f)) == np.float32(0.840067148)
    assert str(f).startswith("0.84006715")
    # f64: 17 digits kept
    d = sympy_of("0.12345678901234568", names, dtype="f64")
    assert float(d) == 0.12345678901234568
    # symbols= substitutes, by input name
    t = sympy.Symbol("t", positive=True)
    assert sympy_of("sqrt(x0**2)", names, symbols={"x0": t}) == t


# ---- every grammar function -------------------------------------------------------------------
@pytest.mark.parametrize("text, positive, exact", GRAMMAR)
def test_every_grammar_function_round_trips(text, positive, exact):
    """sympy (through lambdify), NumPy and the ptx_expr's emulated stub all compute what
    formula.evaluate computes from the same text."""
    g = Genes(["add", "mul", "max"], 2)
    X = _data(200, positive)
    ref = evaluate(text, X, g)
    # sympy: exact real arithmetic (no signed zeros: -0.0 inputs read as 0), in float64
    x0, x1 = sympy.symbols("x0 x1")
    expr = sympy_of(text, g.names)
    Xs = X + np.float32(0)
    got = np.asarray(sympy.lambdify([x0, x1], expr, "numpy")(
        Xs[:, 0].astype(np.float64), Xs[:, 1].astype(np.float64)), np.float64)
    got = np.broadcast_to(got, ref.shape)
    assert _close(got, evaluate(text, Xs, g).astype(np.float64), rtol=2e-6, atol=1e-6), text
    # NumPy: the same evaluation
    assert _bits_equal(NumpyFormula(text, g)(X), ref)
    # ptx_expr: the C core's stub, emulated
    e = ptx_expr_of(text, g, name="f")
    out = nx.emulate(e.stub(), {"x0": X[:, 0], "x1": X[:, 1]}, {"out": "f32"})["out"]
    out = np.broadcast_to(np.asarray(out, np.float32), ref.shape)
    if exact:       # sat: the stub's cvt.sat-like +0.0 where evaluate keeps -0.0 (see below)
        assert _bits_equal(out, ref, signed_zero="sat" not in text), text
    else:         # the DSL's accurate sequences against the .approx rows evaluate follows
        assert _close(out, ref, rtol=2e-6, atol=2e-6), text
    # LaTeX of it is sympy's, numbers to 6 digits
    assert latex_of(expr) == sympy.latex(expr.xreplace(
        {f: sympy.Float(f, 6) for f in expr.atoms(sympy.Float)}))


def test_derivatives_of_the_exported_formula_match_sympy():
    """nx.grad of the ptx_expr and sympy.diff of sympy() agree on each grammar function
    (away from kinks, where the two pick different one-sided values)."""
    g = Genes(["add", "mul", "max"], 2)
    x0, x1 = sympy.symbols("x0 x1", real=True)
    X = _data(64, True, seed=3)
    X[:, 1] += 4                                      # no ties of fmax/fmin, sat away from 0/1
    for text, _pos, _exact in GRAMMAR:
        if "inf" in text or "floor" in text or "ceil" in text:   # sympy: no d/dx floor
            continue
        d_nx = nx.grad(ptx_expr_of(text, g, name="f"), wrt="x0")
        got = np.broadcast_to(np.asarray(d_nx(X[:, 0], X[:, 1]), np.float64), (len(X),))
        expr = sympy_of(text, g.names, symbols={"x0": x0, "x1": x1})
        want = sympy.lambdify([x0, x1], sympy.diff(expr, x0), "numpy")(
            X[:, 0].astype(np.float64), X[:, 1].astype(np.float64))
        want = np.broadcast_to(np.asarray(want, np.float64), (len(X),))
        assert np.allclose(got, want, rtol=1e-4, atol=1e-5), text


def test_candidates_over_every_printed_function():
    """Programs of the full instruction names print every function; Candidate's exports read
    them."""
    g = Genes(["add", "mul", "exp", "log2", "sin", "tanh", "max", "min", "fma", "abs",
               "sqrt", *FULL], 2)
    X = _data(100, False, seed=5)
    seen = set()
    for op in g.ops:
        arity = {"fma": 3, "max": 2, "min": 2, "add": 2, "mul": 2, "copysign.f32": 2}.get(op, 1)
        prog = [sp.input("x0"), sp.input("x1"), g.const(0.25)][:arity] + g.op_words(op)
        c = Candidate(prog, 0.0, g)
        text = c.numpy().text
        seen.add(text.split("(")[0])
        assert _bits_equal(c.numpy()(X), c.predict(X), signed_zero=op != "cvt.sat.f32.f32"), text
        assert c.sympy().free_symbols <= set(sympy.symbols("x0 x1")), text
        assert isinstance(c.latex(), str) and c.latex()
    assert {"exp", "log2", "sin", "tanh", "fmax", "fmin", "fma", "abs", "sqrt", "copysign",
            "rint", "trunc", "floor", "ceil", "sat"} <= seen


def test_evaluate_sat_of_negative_zero():
    g = Genes(["add", "cvt.sat.f32.f32"], 1)
    c = Candidate([sp.input("x0"), *g.op_words("cvt.sat.f32.f32")], 0.0, g)
    X = np.float32([[-0.0], [np.nan], [-1.0], [0.5], [2.0]])
    assert _bits_equal(c.predict(X), np.float32([0.0, 0.0, 0.0, 0.5, 1.0]))
    assert _bits_equal(c.numpy()(X), c.predict(X))


# ---- NumPy and ptx_expr against predict on random programs ------------------------------------
@pytest.mark.parametrize("ops, dtype, exact", [
    (ARITH, "f32", True), (ARITH, "f64", False), (["add", "mul", *FULL[:-1]], "f32", True),
    (TRANSC, "f32", True)])
def test_numpy_matches_predict_on_random_programs(ops, dtype, exact):
    """numpy() is the emulator's result bit for bit for the search's op names; f64 fma rounds
    twice in NumPy (formula.py's exception): within an ulp there. Without sat: a -0.0 from
    evaluate's sat (test_evaluate_sat_of_negative_zero) turns into a sign through copysign."""
    g = Genes(ops, 2, dtype=dtype)
    rng = np.random.default_rng(26)
    X = _data(100, False, seed=7, dtype=np.float32 if dtype == "f32" else np.float64)
    nontrivial = 0
    for _ in range(120):
        c = Candidate(O.random_program(g, rng, (3, 20)), 0.0, g)
        f, want = c.numpy(), c.predict(X)
        got = f(X)
        nontrivial += len(set(np.round(want[np.isfinite(want)], 6))) > 3
        if exact or "fma" not in f.text:
            assert _bits_equal(got, want), f.text
        else:
            assert _close(got, want, rtol=1e-14, atol=1e-300), f.text
        assert _bits_equal(f(*X.T), got)
    assert nontrivial > 40                   # the property is not vacuous


@pytest.mark.parametrize("ops, dtype", [(ARITH, "f32"), (ARITH, "f64"),
                                        (["add", "sub", "mul", *FULL], "f32")])
def test_ptx_expr_matches_predict_bit_for_bit_on_random_programs(ops, dtype):
    """The exported ptx_expr (precision "accurate") compiles by the C core and, emulated,
    computes what the program computes, bit for bit, where only exact rows run."""
    g = Genes(ops, 2, dtype=dtype)
    rng = np.random.default_rng(62)
    X = _data(100, False, seed=8, dtype=np.float32 if dtype == "f32" else np.float64)
    for i in range(40):
        c = Candidate(O.random_program(g, rng, (3, 16)), 0.0, g)
        e = c.ptx_expr(name=f"p{i}")
        got = nx.emulate(e.stub(), {"x0": X[:, 0], "x1": X[:, 1]}, {"out": dtype})["out"]
        got = np.broadcast_to(np.asarray(got), (len(X),))
        assert _bits_equal(got, c.predict(X)), c.numpy().text


def test_ptx_expr_multiplies_powers_out_left_to_right():
    """x**n in the text is ((x*x)*x)*..., each product rounded (formula.evaluate's reading and
    the program's muls); the DSL's own ** squares repeatedly and rounds differently."""
    g = Genes(["add", "mul"], 1)
    X = _data(200, False, seed=4)[:, :1]
    products = "((x0*x0)*x0)*x0 + (((x0*x0)*x0)*x0)*x0*x0 + sqrt(x0*x0)"
    want = evaluate(products, X, g)
    e = ptx_expr_of("x0**4 + x0**5*x0 + sqrt(x0**2)", g)
    got = nx.emulate(e.stub(), {"x0": X[:, 0]}, {"out": "f32"})["out"]
    assert _bits_equal(np.asarray(got, np.float32), want)
    dsl = nx.ptx_expr(lambda x0: x0**4 + x0**5*x0, precision="accurate")
    squared = nx.emulate(dsl.stub(), {"x0": X[:, 0]}, {"out": "f32"})["out"]
    assert np.any(squared != evaluate("((x0*x0)*x0)*x0 + (((x0*x0)*x0)*x0)*x0*x0", X, g))


# ---- the ptx_expr in a kernel: injected by name, differentiated, autotuned --------------------
KERNEL = r'''
extern "C" __global__ void law(float* out, const float* X, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x0 = X[2 * i], x1 = X[2 * i + 1], y;
        PTX_INJECT("law", PTX_IN(F32, x0), PTX_IN(F32, x1), PTX_OUT(F32, y));
        out[i] = y;
    }
}'''


def test_ptx_expr_injects_differentiates_and_autotunes(tmp_path):
    c = Candidate([sp.input("x0"), sp.input("x1"), *G2.op_words("mul"), sp.input("x0"),
                   *G2.op_words("add")], 0.0, G2)
    law = c.ptx_expr(name="law")
    assert law.__name__ == "law" and list(law.params) == ["x0", "x1"]
    tmpl = nx.CudaTemplate(KERNEL, entry="law", arch="sm_90",
                           cache=nx.CubinCache(str(tmp_path / "cubins")))
    site = tmpl.sites["law"]
    X = _data(50, False, seed=9)
    vals = {"x0": X[:, 0], "x1": X[:, 1]}
    # bound to the site by the inputs' names; the emulated site stub is the program's output
    got = nx.emulate(law.stub(site), vals, site=site)["y"]
    assert _bits_equal(np.asarray(got, np.float32), c.predict(X))
    # real NVRTC + nvJitLink: the injected kernel assembles
    variant = tmpl.inject({"law": law})
    assert variant.cubin[:4] == b"\x7fELF" and "law" in variant.ptx
    # differentiated: d/dx0 (x0*x1 + x0) = x1 + 1
    d = nx.grad(law, wrt="x0")
    dv = nx.emulate(d.stub(), vals, {"out": "f32"})["out"]
    assert np.array_equal(np.asarray(dv), X[:, 1] + np.float32(1))
    # autotuned against a longer equivalent form
    slow = ptx_expr_of("x0*(x1 + 1) + 0*exp(x1)", G2, name="law")
    best = nx.autotune(tmpl, [{"law": slow}, {"law": law}], cost="sass",
                       cache_dir=tmp_path / "tune")
    assert best.index == 1


# ---- LaTeX -------------------------------------------------------------------------------------
def test_latex_text():
    assert Candidate([sp.input("x0"), sp.input("x1"), *G2.op_words("mul"), sp.input("x0"),
                      *G2.op_words("add")], 0.0, G2).latex() == "x_{0} x_{1} + x_{0}"
    e = sympy_of("0.840067148*sqrt(x0)", ["x0"])
    assert latex_of(e) == r"0.840067 \sqrt{x_{0}}"
    assert latex_of(e, digits=2) == r"0.84 \sqrt{x_{0}}"
    assert latex_of(sympy_of("exp(x0)/log2(x0)", ["x0"])) == \
        r"\frac{e^{x_{0}} \log{\left(2 \right)}}{\log{\left(x_{0} \right)}}"
    assert r"\operatorname{rint}" in latex_of(sympy_of("rint(x0)", ["x0"]))
    with pytest.raises(SearchError, match="digits"):
        latex_of(e, digits=0)


# ---- without sympy ----------------------------------------------------------------------------
def test_without_sympy_the_error_names_the_extra(monkeypatch):
    c = Candidate([sp.input("x0"), sp.input("x1"), *G2.op_words("mul")], 0.0, G2)
    monkeypatch.setitem(sys.modules, "sympy", None)       # import sympy raises ImportError
    for call in (c.sympy, c.latex, lambda: sympy_of("x0", ["x0"])):
        with pytest.raises(SearchError, match=r'pip install "numptx\[sympy\]"'):
            call()
    # the other exports need no sympy
    assert c.numpy()(np.float32([[2, 3]])).tolist() == [6.0]
    assert c.ptx_expr().stub() is not None


def test_the_export_module_imports_without_sympy():
    code = ("import sys; sys.modules['sympy'] = None\n"
            "import numpy as np\n"
            "from numptx.search.genes import Genes\n"
            "from numptx.search.export import NumpyFormula\n"
            "print(NumpyFormula('x0*x1', Genes(['mul'], 2))(np.float32([[2, 3]]))[0])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "6.0", out.stderr


# ---- pickling ----------------------------------------------------------------------------------
def test_pickle_round_trips(tmp_path):
    c = Candidate([sp.input("x0"), *G2.op_words("mul")], 0.0, G2)
    f = pickle.loads(pickle.dumps(c.numpy()))
    X = _data(10, False)
    assert _bits_equal(f(X), c.predict(X)) and f.names == ("x0", "x1")
    e = sympy_of("rint(x0) + trunc(x1)", ["x0", "x1"])
    assert pickle.loads(pickle.dumps(e)) == e
    # in a fresh process, rint and trunc are found by name (numptx.search.export.rint)
    path = tmp_path / "e.pkl"
    path.write_bytes(pickle.dumps(e))
    code = (f"import pickle; e = pickle.loads(open({str(path)!r}, 'rb').read()); "
            f"print(e.subs({{'x0': 2.5, 'x1': -1.7}}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "1", out.stderr


# ---- bad input ---------------------------------------------------------------------------------
def test_bad_input_names_the_argument():
    c = Candidate([sp.input("x0"), sp.input("x1"), *G2.op_words("mul")], 0.0, G2)
    for name in ("x0", "sin", "lambda", "2f", ""):
        with pytest.raises(SearchError, match="name="):
            c.ptx_expr(name=name)
    with pytest.raises(SearchError, match="precision="):
        c.ptx_expr(precision="exact")
    with pytest.raises(SearchError, match="symbols"):
        c.sympy(symbols={"z": sympy.Symbol("z")})
    with pytest.raises(SearchError, match=r"symbols\['x0'\]"):
        c.sympy(symbols={"x0": 1.5})
    f = c.numpy()
    with pytest.raises(SearchError, match="3 arrays"):
        f(1.0, 2.0, 3.0)
    with pytest.raises(SearchError, match="unknown 'z'"):
        f(x0=1.0, z=2.0)
    with pytest.raises(SearchError, match="missing 'x1'"):
        f(x0=1.0)
    with pytest.raises(SearchError, match="X:"):
        f(np.ones((4, 3)))
    # text outside the grammar never runs as Python
    for text in ("__import__('os').getcwd()", "x0.real", "[x0][0]", "(exp := x0)"):
        with pytest.raises(SearchError):
            ptx_expr_of(text, G2)
    with pytest.raises(SearchError, match="unknown function"):
        sympy_of("foo(x0)", ["x0"])
    with pytest.raises(SearchError, match="text="):
        NumpyFormula(None, G2)
