"""The CUDA path of :func:`numptx.torch.pairwise`: three CUDA C++ templates whose sites take the
formulas of :class:`~numptx.torch.formulas.Formulas`, launched on torch's current stream with
the tensors' device pointers (no copies)::

    k = kernels(f, "sm_90")          # the variants: forward, back_a, back_b, dfinish (cached)
    k.forward.cubin                  # NVRTC once per template shape, nvJitLink once per formula

The two O(m n d) kernels are tiled as GEMM and cdist kernels are: a block of 16 x 16 threads
owns a :data:`TILE` x :data:`TILE` tile of outputs, each thread a 4 x 4 block of them in
registers, and the operands pass through shared memory a tile at a time, so that each thread
reads 4 + 4 values (two 16-byte shared loads) for 16 applications of the formula, where the
untiled kernel made 2 global loads per application.

- ``pairwise_fwd``: the ``step`` site runs ``acc_c <- acc_c (+, max, min) elem_c(A[i, k],
  B[j, k])`` for each ``k`` (tiles of :data:`BK`; the last partial tile runs only up to ``d``,
  so no padding value reaches a formula), then the ``finish`` site writes ``out[i, j]``; the
  reductions go to ``S`` (``C x m x n``) when the backward pass needs them.
- ``pairwise_bwd``: ``dA`` (or ``dB``) tiled over ``(r, k)``, summing the ``back`` site over the
  other operand's rows ``q`` in tiles of :func:`back_tile`: ``Y[q, k]`` and ``S[c]``, ``H[c]``
  at ``(r, q)`` pass through shared memory, ``X[r, k]`` stays in registers. ``S`` and ``H`` are
  read with strides, so one source serves both sides (the site names which element is ``a``;
  the tile load walks the contiguous index first). The grid's z splits the ``q`` range in
  parts of ``q_chunk`` rows, each writing its partial sums to its own plane of ``dX``
  (:func:`numptx.torch.launch.splits`: where the output tiles are too few for the GPU).
- ``pairwise_dfinish``: one thread per ``(i, j)``: ``H[c] = G * dfinish/ds_c`` and the finishing
  formula's hyperparameter terms.

The forward kernel's k loop unrolls in full for a short formula (:func:`unroll`), not at all
otherwise; the backward kernel's q loop never does; the 4 x 4 block always does (its
accumulators stay in registers). Hyperparameters reach every
kernel at run time, through a device array ``hyper`` read once per thread: one cubin serves
every value (a bandwidth learned step by step rebuilds nothing), and a hyperparameter that is
a CUDA tensor is read where it lies, without a sync.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numptx as nx

from .formulas import Formulas

__all__ = ["Kernels", "kernels", "source", "BLOCK", "TILE", "BK", "unroll", "back_tile"]

BLOCK = (16, 16)
#: outputs per block side (16 threads x 4 each), and the k-tile of the forward kernel
TILE, BK = 64, 16
_PAD = 4                   # shared rows of TILE + 4: 16-byte aligned, fewer bank conflicts
_C = {"f32": ("float", "F32"), "f64": ("double", "F64")}
_INIT = {"sum": "0", "max": "-INFINITY", "min": "INFINITY"}
#: 4 consecutive shared values into a register array, as 16-byte loads
_LD4 = {"f32": "#define LD4(d, p) { const float4 v_ = *reinterpret_cast<const float4*>(p); "
               "d[0] = v_.x; d[1] = v_.y; d[2] = v_.z; d[3] = v_.w; }\n",
        "f64": "#define LD4(d, p) { const double2 v_ = *reinterpret_cast<const double2*>(p), "
               "w_ = *reinterpret_cast<const double2*>((p) + 2); "
               "d[0] = v_.x; d[1] = v_.y; d[2] = w_.x; d[3] = w_.y; }\n"}
_SHARED_BUDGET = 40 * 1024  # bytes of static shared memory the backward tiles may take


def unroll(instructions: int, tile: int) -> int:
    """How far the forward k loop unrolls for a site of ``instructions`` traced instructions: in
    full (``tile``) for a short formula, whose own instructions the loop's would rival, else
    not at all (16 instances of a long formula per step already; ``tile`` times more would
    outgrow the instruction cache).

    >>> unroll(2, 16), unroll(40, 16)
    (16, 1)
    """
    return tile if instructions <= 12 else 1


def back_tile(t: str, n_acc: int) -> int:
    """The q-tile of the backward kernel: 16 rows of the other operand, fewer where the shared
    tiles (``Y``, and ``S`` and ``H`` for each of ``n_acc`` reductions) would pass 40 KiB
    (f64 with three reductions: 8).

    >>> back_tile("f32", 1), back_tile("f64", 3)
    (16, 8)
    """
    size = 8 if t == "f64" else 4
    bq = 16
    while bq > 2 and (1 + 2 * n_acc) * bq * (TILE + _PAD) * size > _SHARED_BUDGET:
        bq //= 2
    return bq


def _hyper(names: tuple[str, ...], ptx: str) -> tuple[list[str], list[str]]:
    """The loads of the hyperparameters and their site operands (site name = formula name)."""
    loads = [f"const T hv{q} = hyper[{q}];" for q in range(len(names))]
    opnds = [f"PTX_IN({ptx}, {h}, hv{q})" for q, h in enumerate(names)]
    return loads, opnds


def source(kind: str, t: str, n_acc: int, hyper: tuple[str, ...], *, reduce: str = "sum",
           side: str = "a", accs: tuple[str, ...] = ("acc",), n_dh: int = 0,
           unrolled: int = 1) -> str:
    """The CUDA C++ of one template: ``kind`` is "fwd", "bwd" or "dfinish"; ``t`` the element
    type, ``n_acc`` the number of terms, ``hyper`` the hyperparameter names; ``side`` (which
    operand's gradient) and ``accs`` (its accumulators) for "bwd", ``n_dh`` (the finishing
    formula's hyperparameters) for "dfinish"; ``unrolled``: the k (q) loop's unroll factor.

    >>> src = source("fwd", "f32", 1, (), unrolled=16)      # l2's forward kernel
    """
    ctype, ptx = _C[t]
    inf = "__int_as_float(0x7f800000)" if t == "f32" else \
        "__longlong_as_double(0x7ff0000000000000LL)"
    head = (f"#define INFINITY {inf}\ntypedef {ctype} T;\n#define TILE {TILE}\n"
            f"#define PAD {_PAD}\n{_LD4[t]}")
    loads, hy = _hyper(hyper, ptx)
    if kind == "fwd":
        return head + _fwd(ptx, range(n_acc), loads, hy, reduce, unrolled)
    if kind == "bwd":
        return head + _bwd(ptx, range(n_acc), loads, hy, side, accs, unrolled,
                           back_tile(t, n_acc))
    if kind == "dfinish":
        return head + _dfinish(ptx, range(n_acc), loads, hy, n_dh)
    raise ValueError(f"source: kind {kind!r} is not 'fwd', 'bwd' or 'dfinish'")


def _each(body: str) -> str:
    """``body`` for each of a thread's 4 x 4 outputs (u: its row, v: its column), unrolled."""
    return ("\n#pragma unroll\nfor (int u = 0; u < 4; ++u) {\n#pragma unroll\n"
            f"for (int v = 0; v < 4; ++v) {{ {body} }} }}\n")


def _fwd(ptx: str, C: range, loads: list[str], hy: list[str], reduce: str,
         unrolled: int) -> str:
    step = ", ".join([f"PTX_IN({ptx}, a, a[u])", f"PTX_IN({ptx}, b, b[v])", *hy,
                      *[f"PTX_MOD({ptx}, acc{c}, acc{c}[u][v])" for c in C]])
    fin = ", ".join([*[f"PTX_IN({ptx}, s{c}, acc{c}[u][v])" for c in C], *hy,
                     f"PTX_OUT({ptx}, out, o)"])
    one_k = ("{ T a[4], b[4]; LD4(a, &As[kk][ty * 4]); LD4(b, &Bs[kk][tx * 4]);" +
             _each(f'PTX_INJECT("step", {step});') + "}")
    init = _each(" ".join(f"acc{c}[u][v] = {_INIT[reduce]};" for c in C))
    saves = " ".join(f"S[{c} * plane + at] = acc{c}[u][v];" for c in C)
    store = _each("const int i = i0 + ty * 4 + u, j = j0 + tx * 4 + v;\n"
                  "if (i < m && j < n) { const size_t at = (size_t)i * n + j;\n"
                  f"if (S) {{ {saves} }}\n"
                  f'if (out) {{ T o; PTX_INJECT("finish", {fin}); out[at] = o; }} }}')
    return f'''
#define BK {BK}
extern "C" __global__ void __launch_bounds__(256) pairwise_fwd(
        T* out, T* S, const T* A, const T* B, const T* hyper, int m, int n, int d) {{
    __shared__ __align__(16) T As[BK][TILE + PAD];
    __shared__ __align__(16) T Bs[BK][TILE + PAD];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    const int j0 = blockIdx.x * TILE;
    const size_t plane = (size_t)m * n;
    {" ".join(loads)}
    // row tiles stride over the grid's y (at most 65,535 blocks there): any m launches
    for (int i0 = blockIdx.y * TILE; i0 < m; i0 += gridDim.y * TILE) {{
    {" ".join(f"T acc{c}[4][4];" for c in C)}
    {init}
    for (int k0 = 0; k0 < d; k0 += BK) {{
#pragma unroll
        for (int e = 0; e < TILE * BK / 256; ++e) {{      // both tiles, k fastest in memory
            const int idx = tid + e * 256, r = idx / BK, c = idx % BK, k = k0 + c;
            As[c][r] = (i0 + r < m && k < d) ? A[(size_t)(i0 + r) * d + k] : (T)0;
            Bs[c][r] = (j0 + r < n && k < d) ? B[(size_t)(j0 + r) * d + k] : (T)0;
        }}
        __syncthreads();
        if (d - k0 >= BK) {{
#pragma unroll {unrolled}
            for (int kk = 0; kk < BK; ++kk) {one_k}
        }} else {{                                           // the last, partial k-tile
#pragma unroll 1
            for (int kk = 0; kk < d - k0; ++kk) {one_k}
        }}
        __syncthreads();
    }}
    {store}
    }}
}}'''


def _bwd(ptx: str, C: range, loads: list[str], hy: list[str], side: str,
         accs: tuple[str, ...], unrolled: int, bq: int) -> str:
    ab = ["x[u][v]", "y[v]"] if side == "a" else ["y[v]", "x[u][v]"]
    back = ", ".join([f"PTX_IN({ptx}, a, {ab[0]})", f"PTX_IN({ptx}, b, {ab[1]})",
                      *[f"PTX_IN({ptx}, s{c}, s{c}[u])" for c in C],
                      *[f"PTX_IN({ptx}, h{c}, h{c}[u])" for c in C], *hy,
                      *[f"PTX_MOD({ptx}, {acc}, {acc}[u][v])" for acc in accs]])
    reads = " ".join(f"T s{c}[4], h{c}[4]; LD4(s{c}, &Ss[{c}][qq][ty * 4]); "
                     f"LD4(h{c}, &Hs[{c}][qq][ty * 4]);" for c in C)
    one_q = ("{ T y[4]; LD4(y, &Ys[qq][tx * 4]); " + reads +
             _each(f'PTX_INJECT("back", {back});') + "}")
    # S and H at (r, q): side a reads them along q (s_other = 1), side b along r (s_mine = 1)
    rq = ("const int qq = idx % BQ, rr = idx / BQ;" if side == "a" else
          "const int rr = idx % TILE, qq = idx / TILE;")
    fill = " ".join(f"Ss[{c}][qq][rr] = ok ? S[{c} * plane + at] : (T)0; "
                    f"Hs[{c}][qq][rr] = ok ? H[{c} * plane + at] : (T)0;" for c in C)
    n = len(C)
    return f'''
#define BQ {bq}
extern "C" __global__ void __launch_bounds__(256) pairwise_bwd(
        T* dX, const T* X, const T* Y, const T* S, const T* H, const T* hyper, int rows,
        int others, int d, long long s_mine, long long s_other, long long plane, int q_chunk) {{
    __shared__ __align__(16) T Ys[BQ][TILE + PAD];
    __shared__ __align__(16) T Ss[{n}][BQ][TILE + PAD];
    __shared__ __align__(16) T Hs[{n}][BQ][TILE + PAD];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    const int k0 = blockIdx.x * TILE;
    const size_t out_plane = (size_t)rows * d;
    // the other rows split over the grid's z (q_chunk each, a multiple of BQ): each split
    // writes its own partial sums, plane z of dX, which the launch adds up
    const int q_lo = blockIdx.z * q_chunk, q_hi = min(others, q_lo + q_chunk);
    dX += (size_t)blockIdx.z * {len(accs)} * out_plane;
    {" ".join(loads)}
    // row tiles stride over the grid's y (at most 65,535 blocks there): any number of rows
    for (int r0 = blockIdx.y * TILE; r0 < rows; r0 += gridDim.y * TILE) {{
    T x[4][4]; {" ".join(f"T {acc}[4][4];" for acc in accs)}
    {_each("const int r = r0 + ty * 4 + u, k = k0 + tx * 4 + v; "
           "x[u][v] = (r < rows && k < d) ? X[(size_t)r * d + k] : (T)0; " +
           " ".join(f"{acc}[u][v] = 0;" for acc in accs))}
    for (int q0 = q_lo; q0 < q_hi; q0 += BQ) {{
        for (int idx = tid; idx < BQ * TILE; idx += 256) {{
            {{ const int qq = idx / TILE, kk = idx % TILE, q = q0 + qq, k = k0 + kk;
              Ys[qq][kk] = (q < q_hi && k < d) ? Y[(size_t)q * d + k] : (T)0; }}
            {{ {rq} const int r = r0 + rr, q = q0 + qq;
              const bool ok = r < rows && q < q_hi;
              const size_t at = ok ? (size_t)r * s_mine + (size_t)q * s_other : 0;
              {fill} }}
        }}
        __syncthreads();
        if (q_hi - q0 >= BQ) {{
#pragma unroll {unrolled}
            for (int qq = 0; qq < BQ; ++qq) {one_q}
        }} else {{                                           // the last, partial q-tile
#pragma unroll 1
            for (int qq = 0; qq < q_hi - q0; ++qq) {one_q}
        }}
        __syncthreads();
    }}
    {_each("const int r = r0 + ty * 4 + u, k = k0 + tx * 4 + v; if (r < rows && k < d) { " +
           " ".join(f"dX[{q} * out_plane + (size_t)r * d + k] = {acc}[u][v];"
                    for q, acc in enumerate(accs)) + " }")}
    }}
}}'''


def _dfinish(ptx: str, C: range, loads: list[str], hy: list[str], n_dh: int) -> str:
    outs = [f"h{c}" for c in C] + [f"dh{q}" for q in range(n_dh)]
    site = ", ".join([*[f"PTX_IN({ptx}, s{c}, S[{c} * plane + at])" for c in C],
                      f"PTX_IN({ptx}, g, G[at])", *hy,
                      *[f"PTX_OUT({ptx}, {o})" for o in outs]])
    return f'''
extern "C" __global__ void pairwise_dfinish(T* H, T* DH, const T* S, const T* G, const T* hyper,
                                            long long plane) {{
    const size_t at = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (at >= (size_t)plane) return;
    {" ".join(loads)}
    {" ".join(f"T {o};" for o in outs)}
    PTX_INJECT("dfinish", {site});
    {" ".join(f"H[{c} * plane + at] = h{c};" for c in C)}
    {" ".join(f"DH[{q} * plane + at] = dh{q};" for q in range(n_dh))}
}}'''


def _instructions(expr: Any) -> int:
    """The traced instructions of a site's formula (what :func:`unroll` weighs)."""
    return sum(1 for n in expr.graph.live() if n.op == "instr")


@functools.lru_cache(maxsize=64)
def _template(src: str, entry: str, arch: str) -> Any:
    return nx.CudaTemplate(src, entry=entry, arch=arch)


@dataclass
class Kernels:
    """The variants of one :class:`Formulas` for one architecture (built on first use)."""
    f: Formulas
    arch: str

    def _variant(self, kind: str, stub: Any, **shape: Any) -> Any:
        f = self.f
        src = source(kind, f.t, f.n_acc, f.hyper, reduce=f.spec.reduce, **shape)
        entry = {"fwd": "pairwise_fwd", "bwd": "pairwise_bwd", "dfinish": "pairwise_dfinish"}
        return _template(src, entry[kind], self.arch).inject(stub)

    @functools.cached_property
    def forward(self) -> Any:
        return self._variant("fwd", {"step": self.f.step, "finish": self.f.finish_or_identity},
                             unrolled=unroll(_instructions(self.f.step), BK))

    def _back(self, back: Any, **shape: Any) -> Any:
        # the q loop stays rolled: unrolled, ptxas hoists each q's S and H loads and runs out
        # of registers (l1's back_a, unrolled 16 times: 255 registers and spills), for no
        # fewer instructions an application (l2: 3.6 unrolled, 3.4 + the tile loads rolled)
        return self._variant("bwd", {"back": back}, unrolled=1, **shape)

    @functools.cached_property
    def back_a(self) -> Any:
        return self._back(self.f.back_a, side="a")

    @functools.cached_property
    def back_b(self) -> Any:
        return self._back(self.f.back_b, side="b")

    @functools.cached_property
    def dhyper(self) -> Any:
        return self._back(self.f.dhyper, side="a",
                          accs=tuple(f"acc{q}" for q in range(len(self.f.elem_hyper))))

    @functools.cached_property
    def dfinish(self) -> Any:
        return self._variant("dfinish", {"dfinish": self.f.dfinish},
                             n_dh=len(self.f.finish_hyper) if self.f.finish is not None else 0)


@functools.lru_cache(maxsize=256)
def kernels(f: Formulas, arch: str) -> Kernels:
    """The (lazily built) variants of ``f`` for ``arch``."""
    return Kernels(f, arch)
