"""precision="cuda", the DSL's default: CUDA's own algorithms for the transcendentals (f32),
``a*b + c`` contracted into one fma as NVRTC does, the reference evaluation contracting too;
and the refusals of modes that do not exist.

Accuracy runs eagerly on the table semantics (the emulated stub); the approximate rows are
emulated correctly rounded, so a GPU may add their documented error (docs/dsl_accuracy.md).
Instruction counts are compared with the same kernel written in CUDA C++ where the SASS tool is
installed (``numptx[tools]``)."""
from __future__ import annotations

import numpy as np
import pytest

import numptx as nx
from numptx import semantics as S
from numptx.dsl import mathlib as M
from numptx.dsl.emulator import emulate
from numptx.dsl.mathlib.cuda_forms import CUDA_FORMS, CUDA_ULP, CUDA_ULP_F64

from test_mathlib import StubBuilder, sample, special_inputs, same_values

CUDA_F32 = sorted(n for n, t in CUDA_FORMS if t == "f32")
RNG = np.random.default_rng(2026)


def cuda(name, *args):
    with np.errstate(all="ignore"):
        return M.evaluate(name, *args, dtype="f32", mode="cuda")


def wide(name, args):
    with np.errstate(all="ignore"):
        return M.FUNCTIONS[name][2](*(np.asarray(a, np.float64) for a in args))


def _domain(name, n=60000):
    args = sample(name, "f32", n, RNG)
    args = tuple(np.asarray(a, np.float32) for a in args)
    if name == "sigmoid":                       # 1/(1+expf(-x)) is 0 below -88.72, as in CUDA
        args = (args[0][args[0] >= -88.7],)
    return args


@pytest.mark.parametrize("name", CUDA_F32)
def test_within_cuda_documented_error(name):
    """CUDA counts ulps from the correctly rounded result (CUDA C++ Programming Guide,
    "Mathematical Functions"): so do we here."""
    args = _domain(name)
    with np.errstate(all="ignore"):
        rounded = np.asarray(wide(name, args)).astype(np.float32)
    err = M.ulp_steps(cuda(name, *args), rounded, "f32")
    worst = int(np.argmax(err))
    assert err.max() <= CUDA_ULP[name], (name, [a[worst] for a in args], err.max())


@pytest.mark.parametrize("name", [n for n in CUDA_F32 if M.FUNCTIONS[n][1] == 1])
def test_special_values_match_numpy(name):
    x = special_inputs("f32")
    if name == "sigmoid":
        x = x[~(x < -88.7)]
    got = cuda(name, x)
    with np.errstate(all="ignore"):
        want = np.asarray(wide(name, (x,))).astype(np.float32)
    m = ~np.isfinite(x) | (x == 0) | ~np.isfinite(want) | (want == 0)
    assert np.all(same_values(got[m], want[m])), (name, x[m], got[m], want[m])


@pytest.mark.parametrize("name", CUDA_F32)
def test_eager_equals_emulated_stub(name):
    arity = M.FUNCTIONS[name][1]
    args = tuple(np.asarray(a[:300], np.float32) for a in sample(name, "f32", 600, RNG))
    sp = special_inputs("f32")
    args = tuple(np.concatenate([a, sp if i == 0 else np.resize(sp[::-1], len(sp))])
                 for i, a in enumerate(args))
    sb = StubBuilder()
    names = ["x", "y"][:arity]
    out = M.implementation(name, "f32", "cuda")(sb, *(sb.input(nm, "f32") for nm in names))
    got = emulate(sb.text(out), dict(zip(names, args)), {"out": "f32"})["out"]
    eager = cuda(name, *args)
    same = (got.view(np.uint32) == eager.view(np.uint32)) | (np.isnan(got) & np.isnan(eager))
    assert same.all(), (name, [a[~same][:3] for a in args])


def test_implementation_per_mode():
    assert M.implementation("exp", "f32", "fast") is not None
    assert M.implementation("exp", "f64", "fast") is None           # no f64 .approx forms
    for mode in nx.PRECISIONS[:2]:
        assert M.implementation("exp", "f64", mode) is not None
    x = np.float32([0.5, -3.0, 40.0])
    assert np.array_equal(M.evaluate("exp", x, mode="accurate"), M.evaluate("exp", x))
    assert np.array_equal(M.evaluate("expm1", x, mode="fast"), M.evaluate("expm1", x, mode="cuda"))
    with pytest.raises(ValueError, match="no f64 form"):
        M.evaluate("exp", x, dtype="f64", mode="fast")


# ------------------------------------------------------------------------- modes in the DSL
def gauss(acc: nx.f32, x: nx.f32, y: nx.f32) -> nx.f32:
    d = x - y
    return acc + nx.exp(-d * d)


def test_default_is_cuda_and_modes_lower_differently():
    c, a, f = nx.ptx_expr(gauss), nx.ptx_expr(gauss, precision="accurate"), \
        nx.ptx_expr(gauss, fastmath=True)
    assert (c.precision, a.precision, f.precision) == ("cuda", "accurate", "fast")
    assert "precision='cuda'" in repr(c) and not c.fastmath and f.fastmath
    rows = lambda e: [n.target for n in e.graph.live() if n.op == "instr"]  # noqa: E731
    assert "fma.rm.f32" in rows(c) and "ex2.approx.ftz.f32" in rows(c)
    assert not any("approx" in r for r in rows(a))
    assert rows(c)[-1] == "fma.rn.f32"                 # acc + 2^k * ex2(r): one fma
    assert str(a.stub(precision="cuda")) == str(c.stub())
    assert nx.ptx_expr(gauss, precision="fast").stub() == f.stub()


def _rows(e):
    return [n.target for n in e.graph.live() if n.op == "instr"]


def test_contraction_follows_nvrtcs_rule():
    """A product used only by sums contracts (all its uses); one other use keeps it; of two
    products the one with fewer uses contracts (the first on a tie)."""
    @nx.ptx_expr
    def f(a: nx.f32, b: nx.f32, c: nx.f32):
        return a * b + c, c - a * b, (b * c) * c - a * c   # the last: (b*c)*c, the first on a tie
    assert _rows(f).count("fma.rn.f32") == 3 and _rows(f).count("mul.rn.f32") == 2

    @nx.ptx_expr
    def kept(a: nx.f32, b: nx.f32, c: nx.f32):
        p = a * b
        return p + c, p                          # the product is an output too: no fma
    assert "fma.rn.f32" not in _rows(kept)

    @nx.ptx_expr
    def kept2(a: nx.f32, b: nx.f32, c: nx.f32):
        p = a * b
        return p + c, p * c                      # a mul use: every use rounds twice
    assert "fma.rn.f32" not in _rows(kept2)

    @nx.ptx_expr
    def two(a: nx.f32, b: nx.f32, c: nx.f32, d: nx.f32):
        p, q = a * b, c * d
        return p + q, p - c                      # p has two uses, q one: q contracts into p + q
    g = two.graph
    fm = [n for n in g.live() if n.target == "fma.rn.f32"]
    assert len(fm) == 2 and {fm[0].args[0].target, fm[1].args[0].target} >= {"c"}

    @nx.ptx_expr
    def sq(x: nx.f32, y: nx.f32) -> nx.f32:
        return x ** 2 + nx.square(y) - 1.0       # products from pow and square contract too
    assert _rows(sq) == ["mul.rn.f32", "fma.rn.f32", "sub.rn.f32"]   # fma(x, x, y*y) - 1


def test_emulated_stub_equals_fma_semantics_reference_rounds_twice():
    @nx.ptx_expr
    def f(a: nx.f32, b: nx.f32, c: nx.f32) -> nx.f32:
        return a * b + c

    @nx.ptx_expr
    def g(a: nx.f64, b: nx.f64, c: nx.f64) -> nx.f64:
        return c - a * b

    for e, t, fma in ((f, np.float32, S.fma_f32), (g, np.float64, None)):
        vals = {k: RNG.standard_normal(500).astype(t) * 1e3 for k in "abc"}
        got = emulate(e.stub(), vals, {"out": e.graph.outputs[0][1].dtype})["out"]
        if fma is not None:
            assert np.array_equal(got, fma(vals["a"], vals["b"], vals["c"]))
        else:
            assert np.array_equal(got, S.fma_f64(-vals["a"], vals["b"], vals["c"]))
    a, b, c = (np.float32(v) for v in (1 + 2 ** -12, 1 + 2 ** -12, -(1 + 2 ** -11)))
    assert f(a, b, c) == 0.0                                    # NumPy: rounded twice
    out = emulate(f.stub(), {"a": a, "b": b, "c": c}, {"out": "f32"})["out"]
    assert out.reshape(-1)[0] == np.float32(2.0 ** -24)         # the GPU: one fma
    assert nx.ptx_expr(f.fn, precision="accurate").stub().count("fma") == 0


def test_bound_constants_fold_before_contraction():
    @nx.ptx_expr
    def g(a: nx.f32, b: nx.f32, x: nx.f32) -> nx.f32:
        return a * b + x
    h = g.bind(a=1.1, b=3.3)                     # the product folds: a plain add remains
    assert _rows(h) == ["add.rn.f32"]
    x = np.float32([-3.63, 1.0])
    assert np.array_equal(h(x), emulate(h.stub(), {"x": x}, {"out": "f32"})["out"])


def test_only_f32_f64_are_contracted_and_mathlib_internals_never():
    @nx.ptx_expr
    def f(a: nx.s32, b: nx.s32, c: nx.s32) -> nx.s32:
        return a * b + c

    @nx.ptx_expr
    def h(a: nx.f16, b: nx.f16, c: nx.f16) -> nx.f16:
        return a * b + c                         # (CUDA's __half a*b + c is one HFMA2)
    assert "fma" not in str(f.graph) and _rows(h) == ["mul.rn.f16", "add.rn.f16"]

    @nx.ptx_expr
    def lg(x: nx.f64) -> nx.f64:
        return nx.sin(x)                         # f64 sin: the accurate sequence, .rn throughout
    acc = nx.ptx_expr(lg.fn, precision="accurate")
    assert _rows(lg) == _rows(acc)
    assert not any(r in ("add.f32", "sub.f32", "mul.f32", "add.f64", "sub.f64", "mul.f64")
                   for r in _rows(lg) + _rows(nx.ptx_expr(gauss)))   # no contractible row left


# ------------------------------------------------------------------------------ refusals
def test_unknown_precision_names_the_modes():
    with pytest.raises(nx.PrecisionError, match="'cuda', 'accurate', 'fast'"):
        nx.ptx_expr(gauss, precision="exact")
    with pytest.raises(nx.PrecisionError, match="unknown precision"):
        nx.ptx_expr(gauss).stub(precision="ieee")
    with pytest.raises(nx.NumptxError, match="contradicts"):
        nx.ptx_expr(gauss, precision="accurate", fastmath=True)


def test_f64_function_without_fast_form_names_function_type_and_modes():
    @nx.ptx_expr(fastmath=True)
    def f(x: nx.f64) -> nx.f64:
        return x + nx.tanh(x)
    with pytest.raises(nx.PrecisionError) as e:
        f.stub()
    msg = str(e.value)
    for part in ("nx.tanh", "f64", "'fast'", "'cuda', 'accurate'", "test_cuda_math.py"):
        assert part in msg, part
    assert f.stub(precision="cuda") and f.stub(fastmath=False)


# -------------------------------------------------------------------------- SASS parity
PAIR = r'''typedef float T;
extern "C" __global__ void pair(T* out, const T* A, const T* B, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; int j = blockIdx.y;
  if (i >= n) return;
  T acc = 0;
  #pragma unroll 8
  for (int k = 0; k < 64; ++k) { T x = A[i * 64 + k], y = B[j * 64 + k];
    BODY }
  out[j * n + i] = acc; }'''
KERNELS = {
    "gauss": ("acc = acc + expf(-(x - y) * (x - y));", gauss),
    "tanh": ("acc = acc + tanhf(x * y + 0.5f);",
             lambda acc, x, y: acc + nx.tanh(x * y + 0.5)),
    "log": ("acc = acc + logf(x * y + 2.0f);", lambda acc, x, y: acc + nx.log(x * y + 2.0)),
    "sinh": ("acc = acc + sinhf(x - y);", lambda acc, x, y: acc + nx.sinh(x - y)),
}


@pytest.fixture(scope="module")
def pair_template():
    pytest.importorskip("numptx.jit.compile.sass")
    from numptx.jit.compile.sass import find_tool
    try:
        find_tool("nvdisasm")
    except nx.NumptxError:
        pytest.skip("no nvdisasm: pip install 'numptx[tools]'")
    site = 'PTX_INJECT("f", PTX_MOD(F32, acc), PTX_IN(F32, x), PTX_IN(F32, y));'
    return nx.CudaTemplate(PAIR.replace("BODY", site), entry="pair", arch="sm_90", cache=False)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_sass_within_5_percent_of_cuda(kernel, pair_template):
    from numptx.jit.compile.resources import cubin_resources
    from numptx.jit.compile.sass import sass_instructions
    src, fn = KERNELS[kernel]
    hand = nx.ptx_to_cubin(nx.cuda_to_ptx(PAIR.replace("BODY", src), arch="sm_90"), arch="sm_90")

    def f(acc: nx.f32, x: nx.f32, y: nx.f32) -> nx.f32:
        return fn(acc, x, y)
    v = pair_template.inject(f=nx.ptx_expr(f))
    n_hand, n_ours = len(sass_instructions(hand, "pair")), len(sass_instructions(v.cubin, "pair"))
    assert abs(n_ours - n_hand) <= 0.05 * n_hand, (kernel, n_ours, n_hand)
    assert cubin_resources(v.cubin)["pair"].registers <= cubin_resources(hand)["pair"].registers


# ----------------------------------------------------------------------------- f64 forms
CUDA_F64 = sorted(n for n, t in CUDA_FORMS if t == "f64" and M.FUNCTIONS[n][1] == 1)


@pytest.mark.parametrize("name", CUDA_F64)
def test_f64_forms(name):
    # the evaluate(mode="cuda") path; test_cuda_f64 checks each form densely (edges included)
    (x,) = sample(name, "f64", 8000, RNG)
    x = np.concatenate([x, special_inputs("f64"), [709.78, 709.79, -708.4, -708.5, -745.1]])
    with np.errstate(all="ignore"):
        got = M.evaluate(name, x, dtype="f64", mode="cuda")
        ref = M.FUNCTIONS[name][2](x.astype(np.longdouble))
    with np.errstate(all="ignore"):
        rounded = np.asarray(ref).astype(np.float64).astype(np.longdouble)
    assert M.ulp_error(got, rounded, "f64").max() <= CUDA_ULP_F64[name]
    m = ~np.isfinite(x) | (x == 0)
    assert np.all(same_values(got[m], np.asarray(ref[m]).astype(np.float64)))
    sb = StubBuilder()
    out = M.implementation(name, "f64", "cuda")(sb, sb.input("x", "f64"))
    emu = emulate(sb.text(out), {"x": x}, {"out": "f64"})["out"]
    assert np.array_equal(emu.view(np.uint64), got.view(np.uint64)) or \
        np.all((emu == got) | (np.isnan(emu) & np.isnan(got)))


# --------------------------------------------------------------------------------- GPU
UNARY = r'''typedef TYPE T;
extern "C" __global__ void k(T* out, const T* a, const T* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { T x = a[i], y = b[i], z; BODY out[i] = z; } }'''
CUDA_CALL = {"sigmoid": "z = 1 / (1 + exp{f}(-x));", "rsqrt": "z = rsqrt{f}(x);",
             "arctan": "z = atan{f}(x);", "arctan2": "z = atan2{f}(x, y);",
             "pow": "z = pow{f}(x, y);", "hypot": "z = hypot{f}(x, y);"}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_gpu_modes_against_cudas_own_functions(dtype):
    """Per function: the GPU result of each mode against CUDA's own function on the same
    inputs. cuda: within CUDA's error + 0.5 ulp of the correctly rounded value; accurate: equal
    to nx.emulate bit for bit (exact rows only); fast: runs."""
    from numba import cuda as ncuda
    t, f = ("float", "f") if dtype == "f32" else ("double", "")
    npt = np.float32 if dtype == "f32" else np.float64
    tt = "F32" if dtype == "f32" else "F64"
    site = f'PTX_INJECT("f", PTX_IN({tt}, x), PTX_IN({tt}, y), PTX_OUT({tt}, z));'
    tmpl = nx.CudaTemplate(UNARY.replace("TYPE", t).replace("BODY", site), entry="k",
                           cache=False)
    arch = tmpl.arch
    for name, (fn, arity, ref) in sorted(M.FUNCTIONS.items()):
        if not hasattr(nx, name) or name == "rcp":          # arctan2: no nx.* function
            continue
        args = [np.asarray(a[:20000], npt) for a in sample(name, dtype, 40000, RNG)]
        x = args[0]
        y = args[1] if arity == 2 else np.zeros_like(x)
        call = CUDA_CALL.get(name, "z = {n}{f}(x);").format(n=name, f=f)
        hand = nx.CudaTemplate(UNARY.replace("TYPE", t).replace("BODY", call), entry="k",
                               arch=arch, cache=False).inject()
        dx, dy = ncuda.to_device(x), ncuda.to_device(y)
        d_out = ncuda.device_array_like(x)
        hand[(len(x) + 255) // 256, 256](d_out, dx, dy, len(x))
        theirs = d_out.copy_to_host()
        with np.errstate(all="ignore"):
            exact = np.asarray(ref(*(np.asarray(a, np.longdouble) for a in args[:arity])))
            rounded = exact.astype(npt).astype(np.longdouble)
        their_err = M.ulp_error(theirs, rounded, dtype)
        for mode in nx.PRECISIONS:
            if mode == "fast" and dtype == "f64":
                continue
            src = ("def g(x: nx.{t}, y: nx.{t}) -> nx.{t}:\n    return nx.{n}({a})\n"
                   .format(t=dtype, n=name, a="x, y" if arity == 2 else "x"))
            ns = {"nx": nx}
            exec(src, ns)
            e = nx.ptx_expr(ns["g"], precision=mode)
            tmpl.inject(f=e)[(len(x) + 255) // 256, 256](d_out, dx, dy, len(x))
            ours = d_out.copy_to_host()
            if mode == "accurate":
                emu = emulate(e.stub(), {"x": x, "y": y}, {"out": dtype})["out"]
                same = (ours == emu) | (np.isnan(ours) & np.isnan(emu))
                assert same.all(), (name, dtype, x[~same][:3])
            elif mode == "cuda":
                err = M.ulp_error(ours, rounded, dtype)
                fin = np.isfinite(err) & np.isfinite(their_err)
                assert np.all(err[fin] <= np.maximum(their_err[fin].max(),
                                                     CUDA_ULP.get(name, 2)) + 0.5), (name, dtype)
