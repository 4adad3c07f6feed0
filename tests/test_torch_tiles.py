"""The tiled CUDA templates of numptx.torch (numptx/torch/cuda.py) run on the CPU: their CUDA C++,
as generated, compiled by the host's C++ compiler against a small shim (each thread of a block
a host thread, ``__syncthreads`` a barrier, ``__shared__`` one array per block), the
``PTX_INJECT`` sites replaced by C++ functions of a test formula. This checks what the GPU build
cannot check here: the tiles' indices, the partial tiles (no padding value reaches a formula),
the rows striding over the grid's y, the accumulators' and the hyperparameters' order, and
both sides' strides of S and H. The sites themselves are checked by NVRTC/nvJitLink and the
stub emulator (tests/test_torch_pairwise.py)."""
from __future__ import annotations

import ctypes
import hashlib
import re
import shutil
import subprocess

import numpy as np
import pytest

pytest.importorskip("torch", reason="numptx.torch needs PyTorch: pip install numptx[torch]")
from numptx.torch import cuda as C  # noqa: E402 - after the skip

CXX = shutil.which("g++") or shutil.which("clang++")
pytestmark = pytest.mark.skipif(CXX is None, reason="needs a host C++ compiler (g++)")

SHIM = r"""
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>
#undef INFINITY
using std::min; using std::size_t;
struct dim3 { unsigned x = 1, y = 1, z = 1; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) double2 { double x, y; };
static thread_local dim3 threadIdx;
static dim3 blockIdx, blockDim, gridDim;
static std::barrier<>* bar_;
static inline void __syncthreads() { bar_->arrive_and_wait(); }
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long i) {
    double f; std::memcpy(&f, &i, 8); return f; }
#define __global__
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(n)
template <class K> static void launch_(unsigned gx, unsigned gy, K kernel, unsigned gz = 1) {
    gridDim = {gx, gy, gz}; blockDim = {16, 16, 1};
    for (unsigned bz = 0; bz < gz; ++bz)
    for (unsigned by = 0; by < gy; ++by) for (unsigned bx = 0; bx < gx; ++bx) {
        blockIdx = {bx, by, bz};
        std::barrier<> bar(256); bar_ = &bar;
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < 256; ++t)
            ts.emplace_back([&, t] { threadIdx = {t % 16, t / 16, 0}; kernel(); });
        for (auto& th : ts) th.join();
    }
}
"""

_SITE = re.compile(r'PTX_INJECT\("(\w+)",(.*?)\);', re.S)
_OPND = re.compile(r"PTX_(?:IN|MOD|OUT)\(\w+, \w+, ([^()]*?)\)")


def _host(src: str, sites: str = "") -> str:
    """The template's CUDA C++ with each site a call of ``site_<name>(operands...)``, those
    functions (``sites``) defined after its typedef of T."""
    src = _SITE.sub(lambda m: f"site_{m.group(1)}({', '.join(_OPND.findall(m.group(2)))});", src)
    at = src.index('extern "C"')
    return src[:at] + sites + src[at:]


_BUILT: dict[str, ctypes.CDLL] = {}


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tiles")


def _compile(code: str, tmp_path) -> ctypes.CDLL:
    """``code`` as a shared library (once per text in this session)."""
    name = hashlib.sha1(code.encode()).hexdigest()[:16]
    if name in _BUILT:
        return _BUILT[name]
    cpp, so = tmp_path / f"{name}.cpp", tmp_path / f"{name}.so"
    cpp.write_text(code)
    r = subprocess.run([CXX, "-std=c++20", "-O1", "-pthread", "-shared", "-fPIC",
                        "-Wno-unknown-pragmas", "-o", str(so), str(cpp)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    _BUILT[name] = ctypes.CDLL(str(so))
    return _BUILT[name]


def _ptr(a: np.ndarray | None):
    return None if a is None else a.ctypes.data_as(ctypes.c_void_p)


# the test formula: C terms e_c(a, b) with one hyperparameter h, their finish, and a back site
# using every operand (a, b, s_c, h_c, the hyperparameter, each accumulator)
def _elem(c: int, a, b, h):
    return [h * (a - b) * (a - b), a * b, a - 2 * b][c]


def _step_cpp(n_acc: int, reduce: str) -> str:
    accs = ", ".join(f"T& acc{c}" for c in range(n_acc))
    terms = ["hv * (a - b) * (a - b)", "a * b", "a - 2 * b"]
    body = " ".join(f"acc{c} = acc{c} + ({terms[c]});" if reduce == "sum" else
                    f"{{ T e = {terms[c]}; acc{c} = acc{c} > e ? acc{c} : e; }}"
                    for c in range(n_acc))
    fin = "s0 + 3 * s1 - s2" if n_acc == 3 else "2 * s0 + hv"
    ss = ", ".join(f"T s{c}" for c in range(n_acc))
    return (f"static inline void site_step(T a, T b, T hv, {accs}) {{ {body} }}\n"
            f"static inline void site_finish({ss}, T hv, T& o) {{ o = {fin}; }}\n")


def _back_cpp(n_acc: int, n_out: int) -> str:
    ss = ", ".join(f"T s{c}" for c in range(n_acc))
    hs = ", ".join(f"T h{c}" for c in range(n_acc))
    accs = ", ".join(f"T& acc{w}" for w in range(n_out))
    more = " + s1 * h1 - h2" if n_acc == 3 else ""
    body = " ".join(f"acc{w} += {w + 1} * (a * h0 + b * s0){more} + hv * a * b;"
                    for w in range(n_out))
    return f"static inline void site_back(T a, T b, {ss}, {hs}, T hv, {accs}) {{ {body} }}\n"


def _fwd_reference(A, B, h, n_acc, reduce):
    S = np.stack([_elem(c, A[:, None, :], B[None, :, :], h) for c in range(n_acc)])
    S = S.sum(-1) if reduce == "sum" else S.max(-1)
    out = S[0] + 3 * S[1] - S[2] if n_acc == 3 else 2 * S[0] + h
    return S, out


@pytest.mark.parametrize("t,n_acc,reduce,unrolled", [("f32", 3, "sum", 16), ("f64", 1, "max", 1),
                                                     ("f64", 3, "sum", 1)])
@pytest.mark.parametrize("m,n,d,gy", [(70, 67, 37, 1), (64, 64, 16, 1), (150, 5, 5, 2),
                                      (3, 130, 33, 4)])
def test_forward_tiles_compute_the_pairwise_reduction(build_dir, t, n_acc, reduce, unrolled,
                                                      m, n, d, gy):
    """Partial row, column and k tiles, an exact k tile, fewer row blocks than row tiles (the
    grid-y stride); out and S against NumPy."""
    ctype, dt = ("float", np.float32) if t == "f32" else ("double", np.float64)
    src = C.source("fwd", t, n_acc, ("h",), reduce=reduce, unrolled=unrolled)
    lib = _compile(SHIM + _host(src, _step_cpp(n_acc, reduce)) +
                   '\nextern "C" void run(T* o, T* S, const T* A, const T* B, const T* hy, '
                   "int m, int n, int d, int gx, int gy) { launch_(gx, gy, [&] { "
                   "pairwise_fwd(o, S, A, B, hy, m, n, d); }); }\n", build_dir)
    assert f"typedef {ctype} T;" in src
    rng = np.random.default_rng(m * n + d)
    A, B = (rng.standard_normal((r, d)).astype(dt) for r in (m, n))
    h = dt(0.75)
    out, S = np.full((m, n), np.nan, dt), np.full((n_acc, m, n), np.nan, dt)
    gx = -(-n // C.TILE)
    i = ctypes.c_int
    lib.run(_ptr(out), _ptr(S), _ptr(A), _ptr(B), _ptr(np.array([h], dt)), i(m), i(n), i(d),
            i(gx), i(gy))
    wS, wout = _fwd_reference(A.astype(np.float64), B.astype(np.float64), float(h), n_acc,
                              reduce)
    tol = 1e-4 if t == "f32" else 1e-11
    np.testing.assert_allclose(S, wS, rtol=tol, atol=tol)
    np.testing.assert_allclose(out, wout, rtol=tol, atol=tol * 10)
    # S may be absent (no backward pass): out alone
    out2 = np.full((m, n), np.nan, dt)
    lib.run(_ptr(out2), None, _ptr(A), _ptr(B), _ptr(np.array([h], dt)), i(m), i(n), i(d),
            i(gx), i(gy))
    np.testing.assert_array_equal(out2, out)


@pytest.mark.parametrize("t,n_acc,side,n_out,unrolled", [("f32", 1, "a", 1, 16),
                                                         ("f32", 3, "b", 2, 1),
                                                         ("f64", 3, "a", 1, 8),
                                                         ("f64", 1, "b", 1, 1)])
@pytest.mark.parametrize("m,n,d,gy,split", [(70, 37, 67, 1, False), (33, 150, 5, 1, True),
                                            (130, 17, 64, 1, False), (130, 75, 9, 1, True)])
def test_backward_tiles_sum_the_back_site_over_the_other_rows(build_dir, t, n_acc, side, n_out,
                                                              unrolled, m, n, d, gy, split):
    """dX[w, r, k] = sum_q back_w(a, b, S[:, i, j], H[:, i, j]) for side a (X = A, i = r) and b
    (X = B, j = r), partial tiles everywhere, the other rows in one part or split in parts of
    32 (a last partial one), against NumPy."""
    dt = np.float32 if t == "f32" else np.float64
    accs = tuple(f"acc{w}" for w in range(n_out))
    src = C.source("bwd", t, n_acc, ("h",), side=side, accs=accs, unrolled=unrolled)
    lib = _compile(SHIM + _host(src, _back_cpp(n_acc, n_out)) +
                   '\nextern "C" void run(T* dX, const T* X, const T* Y, const T* S, const T* H, '
                   "const T* hy, int rows, int others, int d, long long sm, long long so, "
                   "long long plane, int chunk, int gx, int gy, int gz) { launch_(gx, gy, [&] "
                   "{ pairwise_bwd(dX, X, Y, S, H, hy, rows, others, d, sm, so, plane, chunk); "
                   "}, gz); }\n", build_dir)
    rng = np.random.default_rng(m + n + d)
    A, B = rng.standard_normal((m, d)).astype(dt), rng.standard_normal((n, d)).astype(dt)
    S, H = (rng.standard_normal((n_acc, m, n)).astype(dt) for _ in range(2))
    h = dt(0.5)
    X, Y, rows, others = (A, B, m, n) if side == "a" else (B, A, n, m)
    s_mine, s_other = (n, 1) if side == "a" else (1, n)
    # split over the other rows (the grid's z, 32 rows a part) as the launch splits them
    # where the output tiles are few: plane z of the output holds part z's sums
    chunk = others if not split else 32
    gz = -(-others // chunk)
    parts = np.full((gz, n_out, rows, d), np.nan, dt)
    i, ll = ctypes.c_int, ctypes.c_longlong
    lib.run(_ptr(parts), _ptr(X), _ptr(Y), _ptr(S), _ptr(H), _ptr(np.array([h], dt)), i(rows),
            i(others), i(d), ll(s_mine), ll(s_other), ll(m * n), i(chunk), i(-(-d // C.TILE)),
            i(gy), i(gz))
    dX = parts.sum(0)
    x = X.astype(np.float64)[:, None, :]                    # (rows, 1, d)
    y = Y.astype(np.float64)[None, :, :]                    # (1, others, d)
    a, b = (x, y) if side == "a" else (y, x)
    s, hh = S.astype(np.float64), H.astype(np.float64)
    if side == "b":                                        # (c, others = m, rows = n) -> (c, r, q)
        s, hh = s.transpose(0, 2, 1), hh.transpose(0, 2, 1)
    more = (s[1] * hh[1] - hh[2])[..., None] if n_acc == 3 else 0.0
    for w in range(n_out):
        want = ((w + 1) * (a * hh[0][..., None] + b * s[0][..., None]) + more +
                float(h) * a * b).sum(1)
        tol = 2e-4 if t == "f32" else 1e-11
        np.testing.assert_allclose(dX[w], want, rtol=tol, atol=tol * 10)


def test_the_host_shim_turns_every_site_into_a_call():
    src = C.source("bwd", "f32", 3, ("sigma", "p"), side="b", accs=("acc0", "acc1"))
    host = _host(src)
    assert "PTX_INJECT" not in host and "PTX_IN(" not in host
    assert "site_back(y[v], x[u][v], s0[u], s1[u], s2[u], h0[u], h1[u], h2[u], hv0, hv1, " \
           "acc0[u][v], acc1[u][v]);" in host


# ---- on a GPU: the tiled kernels against numptx's own CPU path ---------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gpu_tiled_kernels_match_the_cpu_path_for_the_zoo(dtype):
    """Every zoo formula, forward and both gradients, on sizes leaving partial tiles (m, n, d =
    130, 67, 37): CUDA against the CPU
    path (NumPy and the references), f32 and f64."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    from numptx.torch import pairwise, zoo
    dt = getattr(torch, dtype)
    hyper = {"lp": {"p": 3.0}, "laplace": {"sigma": 2.0}, "laplace_l1": {"sigma": 8.0},
             "gaussian": {"sigma": 2.0}, "matern12": {"lengthscale": 2.0, "variance": 1.5}}
    g = torch.Generator().manual_seed(27)
    A0, B0 = torch.randn(130, 37, generator=g, dtype=dt), torch.randn(67, 37, generator=g, dtype=dt)
    tol = dict(rtol=2e-4, atol=2e-4) if dtype == "float32" else dict(rtol=1e-9, atol=1e-9)
    for name, z in zoo.ZOO.items():
        outs = []
        for dev in ("cpu", "cuda"):
            A, B = (x.to(dev).requires_grad_() for x in (A0, B0))
            out = pairwise(A, B, z, **hyper.get(name, {}))
            G = torch.linspace(-1, 1, out.numel(), dtype=dt, device=dev).reshape(out.shape)
            dA, dB = torch.autograd.grad(out, (A, B), G)
            outs.append([t.detach().cpu() for t in (out, dA, dB)])
        for what, c, gpu in zip(("out", "dA", "dB"), *outs):
            torch.testing.assert_close(gpu, c, **tol, msg=lambda m: f"{name} {what}: {m}")


def test_the_backward_splits_the_other_rows_only_where_the_tiles_are_few():
    """dA of 2048 x 64 is 32 output tiles: 9 parts over the 2048 rows of B give an H200's 132
    SMs two blocks each; 1024 tiles need none; a part is at least 4 q-tiles."""
    torch = pytest.importorskip("torch")                    # noqa: F841 - launch imports it
    from numptx.torch.launch import splits
    assert splits(32, 2048, 132, 16) == 9
    assert splits(1024, 2048, 132, 16) == 1
    assert splits(1, 40, 132, 16) == 1 and splits(1, 200, 132, 16) == 3
