"""numptx.torch.pairwise (issue 27 item 2): the forward pass against torch ops (torch.cdist for
p = 1, 2, the zoo's formulas written in torch), gradients against torch.autograd.gradcheck in
float64 on the CPU (hyperparameter tensors included), bad input naming the argument, the CUDA
templates compiled and linked for sm_90 (NVRTC, nvJitLink; no GPU), their stubs emulated at the
templates' real sites against the CPU path, and the CUDA path itself on a GPU (``gpu``)."""
from __future__ import annotations

import os
import runpy

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="numptx.torch needs PyTorch: pip install numptx[torch]")

import numptx as nx                                                   # noqa: E402
from numptx.torch import Pairwise, PairwiseError, pairwise, zoo       # noqa: E402
from numptx.torch import cpu as tcpu                                  # noqa: E402
from numptx.torch.cuda import kernels                                 # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _data(m=7, n=6, d=5, dtype=torch.float64, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(m, d, generator=g, dtype=dtype).requires_grad_(grad)
    B = torch.randn(n, d, generator=g, dtype=dtype).requires_grad_(grad)
    return A, B


def _torch_zoo(name, A, B, **h):
    """Each zoo formula written in torch ops."""
    diff = A[:, None, :] - B[None, :, :]
    r2 = (diff ** 2).sum(-1)
    r = torch.cdist(A, B, p=2)
    return {
        "l1": lambda: torch.cdist(A, B, p=1),
        "l2": lambda: r,
        "sqeuclidean": lambda: r2,
        "lp": lambda: (diff.abs() ** h.get("p", 2.0)).sum(-1) ** (1 / h.get("p", 2.0)),
        "laplace": lambda: torch.exp(-r / h.get("sigma", 1.0)),
        "laplace_l1": lambda: torch.exp(-torch.cdist(A, B, p=1) / h.get("sigma", 1.0)),
        "gaussian": lambda: torch.exp(-r2 / (2 * h.get("sigma", 1.0) ** 2)),
        "matern12": lambda: h.get("variance", 1.0) * torch.exp(-r / h.get("lengthscale", 1.0)),
        "cosine": lambda: torch.nn.functional.cosine_similarity(A[:, None], B[None], dim=2),
    }[name]()


HYPER = {"lp": {"p": 3.0}, "laplace": {"sigma": 0.7}, "laplace_l1": {"sigma": 2.5},
         "gaussian": {"sigma": 1.3}, "matern12": {"lengthscale": 0.8, "variance": 1.7}}


# ---- forward ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.float64, 1e-12)])
@pytest.mark.parametrize("p", [1, 2])
def test_forward_matches_cdist(p, dtype, tol):
    A, B = _data(13, 9, 17, dtype)
    got = pairwise(A, B, zoo.l1 if p == 1 else zoo.l2)
    want = torch.cdist(A, B, p=p)
    assert got.dtype == dtype and got.shape == (13, 9)
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(zoo.ZOO))
def test_zoo_forward_matches_torch_ops(name):
    A, B = _data(8, 11, 6)
    h = HYPER.get(name, {})
    torch.testing.assert_close(pairwise(A, B, zoo.ZOO[name], **h), _torch_zoo(name, A, B, **h),
                               rtol=1e-12, atol=1e-12)


def test_every_zoo_formula_states_its_definition():
    for z in zoo.ZOO.values():
        assert "``" in z.doc and len(z.doc) > 40, z.name


@pytest.mark.parametrize("reduce,op", [("max", torch.amax), ("min", torch.amin)])
def test_max_and_min_reductions(reduce, op):
    A, B = _data(5, 4, 9)
    got = pairwise(A, B, lambda a, b: nx.abs(a - b), reduce)
    torch.testing.assert_close(got, op((A[:, None] - B[None]).abs(), dim=2))
    if reduce == "max":
        torch.testing.assert_close(got, torch.cdist(A, B, p=float("inf")))


def test_custom_formula_terms_and_finish():
    """Several terms per element, each reduced; finish combines them with a hyperparameter."""
    A, B = _data(6, 5, 4)

    @nx.ptx_expr
    def terms(a: nx.f32, b: nx.f32, w: nx.f32 = 2.0):
        return w * a * b, a + b

    got = pairwise(A, B, terms, finish=lambda s0, s1, c: s0 - c * s1, c=0.5)   # f32 -> f64
    want = 2.0 * A @ B.T - 0.5 * (A.sum(1)[:, None] + B.sum(1)[None, :])
    torch.testing.assert_close(got, want)


def test_float32_tensors_and_empty_shapes():
    A, B = _data(4, 3, 0, torch.float32)
    torch.testing.assert_close(pairwise(A, B, zoo.sqeuclidean), torch.zeros(4, 3))
    A, B = _data(0, 3, 5, torch.float32)
    assert pairwise(A, B, zoo.l2).shape == (0, 3)


# ---- gradients ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(zoo.ZOO))
def test_zoo_gradcheck(name):
    A, B = _data(5, 4, 3, grad=True)
    hv = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
          for k, v in HYPER.get(name, {}).items()}
    keys = list(hv)
    assert torch.autograd.gradcheck(
        lambda A, B, *h: pairwise(A, B, zoo.ZOO[name], **dict(zip(keys, h))),
        (A, B, *hv.values()))


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_max_min_gradcheck(reduce):
    A, B = _data(4, 5, 6, grad=True)
    assert torch.autograd.gradcheck(
        lambda A, B: pairwise(A, B, lambda a, b, p: nx.abs(a - b) ** p, reduce, p=1.5), (A, B))


def test_gradients_match_torch_autograd_and_zero_at_equal_rows():
    """Against autograd of the torch-ops formula; at x == y (a Gram matrix's diagonal) the
    distance's gradient is 0, as torch.cdist's, not NaN."""
    A, _ = _data(6, 6, 4, grad=True)
    sigma = torch.tensor(0.9, dtype=torch.float64, requires_grad=True)
    g1 = torch.autograd.grad(pairwise(A, A, zoo.laplace, sigma=sigma).sum(), (A, sigma))
    g2 = torch.autograd.grad(torch.exp(-torch.cdist(A, A) / sigma).sum(), (A, sigma))
    for x, y in zip(g1, g2):
        assert torch.isfinite(x).all()
        torch.testing.assert_close(x, y)


def test_hyperparameter_in_the_element_formula_gets_its_gradient():
    A, B = _data(4, 3, 5)
    p = torch.tensor(2.5, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(pairwise(A, B, zoo.lp, p=p).sum(), (p,))
    p2 = p.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(_torch_zoo("lp", A, B, p=p2).sum(), (p2,))
    torch.testing.assert_close(got, want)


# ---- bad input ----------------------------------------------------------------------------------
def _raises(argument, fn):
    with pytest.raises(PairwiseError) as e:
        fn()
    assert e.value.argument == argument, (e.value.argument, str(e.value))
    assert isinstance(e.value, nx.NumptxError)
    return str(e.value)


def test_bad_input_names_the_argument():
    A, B = _data(3, 4, 5)
    msg = _raises("B", lambda: pairwise(A, torch.zeros(4, 6, dtype=torch.float64), zoo.l1))
    assert "(3, 5)" in msg and "(4, 6)" in msg
    assert "ndarray" in _raises("A", lambda: pairwise(A.numpy(), B, zoo.l1))
    assert "2-d" in _raises("A", lambda: pairwise(A[None], B, zoo.l1))
    assert "float32 or" in _raises("B", lambda: pairwise(A, B.long(), zoo.l1))
    assert "one type" in _raises("B", lambda: pairwise(A, B.float(), zoo.l1))
    assert "takes 1 argument" in _raises("formula", lambda: pairwise(A, B, lambda a: a))
    assert "'mean'" in _raises("reduce", lambda: pairwise(A, B, lambda a, b: a, "mean"))
    assert "carries its own" in _raises("reduce", lambda: pairwise(A, B, zoo.l1, "max"))
    assert "'sigmaa'" in _raises("sigmaa", lambda: pairwise(A, B, zoo.laplace, sigmaa=1.0))
    assert "no value" in _raises("q", lambda: pairwise(A, B, lambda a, b, q: a * q))
    assert "one float" in _raises("sigma", lambda: pairwise(A, B, zoo.gaussian,
                                                           sigma=torch.ones(2)))
    assert "str" in _raises("sigma", lambda: pairwise(A, B, zoo.gaussian, sigma="1"))
    assert "finish=" in _raises("finish", lambda: pairwise(A, B, lambda a, b: (a, b)))
    assert "one output" in _raises("reduce", lambda: pairwise(A, B, lambda a, b: (a, b), "max",
                                                              finish=lambda s, t: s))
    assert "reserved" in _raises("acc0", lambda: pairwise(A, B, lambda a, b, acc0: a, acc0=1.0))
    assert "not int" in _raises("formula", lambda: pairwise(A, B, 3))

    @nx.ptx_expr
    def counted(a: nx.f32, b: nx.f32, n: nx.s32):
        return a * b
    assert "'n' is s32" in _raises("formula", lambda: pairwise(A, B, counted, n=1))


# ---- the CUDA path: templates built here, launched on a GPU -------------------------------------
@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("name", ["laplace", "cosine", "lp"])
def test_cuda_templates_compile_and_link_for_sm_90(name, t):
    f = zoo.ZOO[name].typed(t)
    k = kernels(f, "sm_90")
    built = {"forward": k.forward, "back_a": k.back_a, "back_b": k.back_b,
             "dfinish": k.dfinish}
    if f.elem_hyper:
        built["dhyper"] = k.dhyper
    for what, v in built.items():
        assert v.cubin[:4] == b"\x7fELF", what
        r = v.resources
        assert r.registers > 0 and r.spill_stores in (0, None), (what, r)


def test_cuda_max_reduction_links():
    f = Pairwise(lambda a, b: nx.abs(a - b), "max").typed("f32")
    k = kernels(f, "sm_90")
    assert all(v.cubin[:4] == b"\x7fELF" for v in (k.forward, k.back_a, k.back_b, k.dfinish))


def _emulate_forward(f, A, B, hyper):
    """The forward kernel's stubs, emulated at its real sites, k step by k step."""
    v = kernels(f, "sm_90").forward
    m, n, d = A.shape[0], B.shape[0], A.shape[1]
    dt = A.dtype
    accs = {f"acc{c}": np.zeros(m * n, dt) for c in range(f.n_acc)}
    hv = {h: np.full(m * n, hyper[h], dt) for h in f.hyper}
    for k in range(d):
        a, b = np.repeat(A[:, k], n), np.tile(B[:, k], m)
        accs = nx.emulate(f.step, {"a": a, "b": b, **hv, **accs}, site=v.sites["step"])
    s = {f"s{c}": accs[f"acc{c}"] for c in range(f.n_acc)}
    out = nx.emulate(f.finish_or_identity, {**s, **hv}, site=v.sites["finish"])["out"]
    return np.stack(list(s.values())).reshape(f.n_acc, m, n), out.reshape(m, n)


def _emulate_back(f, v, A, B, S, H, hyper, side):
    """A backward kernel's stub, emulated at its real site: one (row, k) per lane."""
    m, n, d = A.shape[0], B.shape[0], A.shape[1]
    X, Y, rows, others = (A, B, m, n) if side == "a" else (B, A, n, m)
    dt = A.dtype
    r, k = np.repeat(np.arange(rows), d), np.tile(np.arange(d), rows)
    acc = np.zeros(rows * d, dt)
    hv = {h: np.full(rows * d, hyper[h], dt) for h in f.hyper}
    for q in range(others):
        i, j = (r, q) if side == "a" else (q, r)
        a, b = (X[r, k], Y[q, k]) if side == "a" else (Y[q, k], X[r, k])
        ins = {"a": a, "b": b, "acc": acc, **hv}
        ins.update({f"s{c}": S[c, i, j] for c in range(f.n_acc)})
        ins.update({f"h{c}": H[c, i, j] for c in range(f.n_acc)})
        acc = nx.emulate(getattr(f, f"back_{side}"), ins, site=v.sites["back"])["acc"]
    return acc.reshape(rows, d)


@pytest.mark.parametrize("name", ["laplace", "cosine", "lp"])
def test_cuda_stubs_compute_what_the_cpu_path_does(name):
    """The injected stubs, run by the emulator at the templates' own sites (the PTX the GPU
    runs), against the NumPy path, forward and backward, f32."""
    f = zoo.ZOO[name].typed("f32")
    rng = np.random.default_rng(1)
    A = rng.standard_normal((5, 4)).astype(np.float32)
    B = rng.standard_normal((3, 4)).astype(np.float32)
    hyper = {h: HYPER.get(name, {}).get(h, f.defaults.get(h)) for h in f.hyper}
    S, out = tcpu.forward(f, A, B, hyper)
    eS, eout = _emulate_forward(f, A, B, hyper)
    np.testing.assert_allclose(eS, S, rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(eout, out, rtol=2e-5, atol=1e-5)
    G = rng.standard_normal((5, 3)).astype(np.float32)
    dA, dB, _ = tcpu.backward(f, A, B, S, G, hyper)
    k = kernels(f, "sm_90")
    back = f.dfinish(*S, G, *[hyper[h] for h in f.hyper])
    back = back if isinstance(back, tuple) else (back,)
    H = np.stack([np.broadcast_to(x, (5, 3)) for x in back[:f.n_acc]]).astype(np.float32)
    np.testing.assert_allclose(_emulate_back(f, k.back_a, A, B, S, H, hyper, "a"), dA,
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_emulate_back(f, k.back_b, A, B, S, H, hyper, "b"), dB,
                               rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("p", [1, 2])
def test_gpu_forward_backward_against_cdist(p):
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    A, B = (x.cuda() for x in _data(300, 200, 33, torch.float32, grad=False))
    A.requires_grad_()
    B.requires_grad_()
    got = pairwise(A, B, zoo.l1 if p == 1 else zoo.l2)
    want = torch.cdist(A, B, p=p)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    ga = torch.autograd.grad(got.sum(), (A, B))
    gb = torch.autograd.grad(want.sum(), (A, B))
    for x, y in zip(ga, gb):
        torch.testing.assert_close(x, y, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_gpu_runs_on_the_current_stream_without_copies():
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    A, B = (x.cuda() for x in _data(64, 48, 16, torch.float32))
    sigma = torch.tensor(0.5, device="cuda", requires_grad=True)
    pairwise(A, B, zoo.laplace, sigma=sigma)                     # build and load first
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        before = torch.cuda.memory_allocated()
        out = pairwise(A, B, zoo.laplace, sigma=sigma)
        grown = torch.cuda.memory_allocated() - before
    # out, the saved reductions S, the hyperparameter array: nothing of A's or B's size more
    assert grown < out.numel() * 4 * 2 + 4096
    s.synchronize()
    torch.testing.assert_close(out, torch.exp(-torch.cdist(A, B) / sigma), rtol=1e-4, atol=1e-5)
    (g,) = torch.autograd.grad(out.sum(), (sigma,))
    sigma2 = sigma.detach().clone().requires_grad_()
    (g2,) = torch.autograd.grad(torch.exp(-torch.cdist(A, B) / sigma2).sum(), (sigma2,))
    torch.testing.assert_close(g, g2, rtol=1e-3, atol=1e-3)


# ---- the example --------------------------------------------------------------------------------
def test_kernel_regression_example_runs(capsys):
    runpy.run_path(os.path.join(ROOT, "examples", "kernel_regression_torch.py"),
                   run_name="__main__")
    out = capsys.readouterr().out
    assert "against torch.cdist" in out and "held-out MSE" in out


@pytest.mark.parametrize("name", ["laplace", "lp", "cosine"])
def test_cuda_launch_arguments_marshal_against_the_kernels(name):
    """The argument lists numptx.torch.launch passes (pointers as ints, sizes) convert for the
    real kernels' parameters, read from their CUDA source and PTX (no GPU: marshal only)."""
    from numptx.jit.templates.cuda_launch import marshal
    from numptx.torch import launch
    f = zoo.ZOO[name].typed("f32")
    k = kernels(f, "sm_90")
    A, B = _data(5, 4, 3, torch.float32)
    S, H = torch.zeros(f.n_acc, 5, 4), torch.zeros(f.n_acc, 5, 4)
    hv = torch.ones(len(f.hyper)) if f.hyper else None
    cases = [(k.forward, launch.forward_args(torch.zeros(5, 4), S, A, B, hv)),
             (k.back_a, launch.back_args(torch.zeros(5, 3), A, B, S, H, hv, 4, 1)),
             (k.back_b, launch.back_args(torch.zeros(4, 3), B, A, S, H, hv, 1, 4)),
             (k.dfinish, launch.dfinish_args(H, None, S, torch.zeros(5, 4), hv))]
    for v, args in cases:
        values = marshal(v.entry, v.template.params, args).values
        assert len(values) == len(v.template.params)
