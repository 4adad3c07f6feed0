"""The CUDA path of :func:`numptx.torch.pairwise`: three CUDA C++ templates whose sites take the
formulas of :class:`~numptx.torch.formulas.Formulas`, launched on torch's current stream with
the tensors' device pointers (no copies)::

    k = kernels(f, "sm_90")          # the variants: forward, back_a, back_b, dfinish (cached)
    k.forward.cubin                  # NVRTC once per template shape, nvJitLink once per formula

- ``pairwise_fwd``: one thread per ``(i, j)``; the ``step`` site runs ``acc_c <- acc_c (+,
  max, min) elem_c(A[i, k], B[j, k])`` for each ``k``, then the ``finish`` site writes
  ``out[i, j]``; the reductions go to ``S`` (``C x m x n``) when the backward pass needs them.
- ``pairwise_bwd``: one thread per ``(r, k)`` of ``dA`` (or ``dB``), summing the ``back`` site
  over the other operand's rows; ``S`` and ``H`` are read with strides, so one source serves
  both sides (the site names which element is ``a``).
- ``pairwise_dfinish``: one thread per ``(i, j)``: ``H[c] = G * dfinish/ds_c`` and the finishing
  formula's hyperparameter terms.

Hyperparameters reach every kernel at run time, through a device array ``hyper`` read once per
thread: one cubin serves every value (a bandwidth learned step by step rebuilds nothing), and
a hyperparameter that is a CUDA tensor is read where it lies, without a sync.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numptx as nx

from .formulas import Formulas

__all__ = ["Kernels", "kernels", "source", "BLOCK"]

BLOCK = (16, 16)
_C = {"f32": ("float", "F32"), "f64": ("double", "F64")}
_INIT = {"sum": "0", "max": "-INFINITY", "min": "INFINITY"}


def _hyper(names: tuple[str, ...], ptx: str) -> tuple[list[str], list[str]]:
    """The loads of the hyperparameters and their site operands (site name = formula name)."""
    loads = [f"const T hv{q} = hyper[{q}];" for q in range(len(names))]
    opnds = [f"PTX_IN({ptx}, {h}, hv{q})" for q, h in enumerate(names)]
    return loads, opnds


def source(kind: str, t: str, n_acc: int, hyper: tuple[str, ...], *, reduce: str = "sum",
           side: str = "a", accs: tuple[str, ...] = ("acc",), n_dh: int = 0) -> str:
    """The CUDA C++ of one template: ``kind`` is "fwd", "bwd" or "dfinish"; ``t`` the element
    type, ``n_acc`` the number of terms, ``hyper`` the hyperparameter names; ``side`` (which
    operand's gradient) and ``accs`` (its accumulators) for "bwd", ``n_dh`` (the finishing
    formula's hyperparameters) for "dfinish"."""
    ctype, ptx = _C[t]
    inf = "__int_as_float(0x7f800000)" if t == "f32" else \
        "__longlong_as_double(0x7ff0000000000000LL)"
    head = f"#define INFINITY {inf}\ntypedef {ctype} T;\n"
    loads, hy = _hyper(hyper, ptx)
    if kind == "fwd":
        return head + _fwd(ptx, range(n_acc), loads, hy, reduce)
    if kind == "bwd":
        return head + _bwd(ptx, range(n_acc), loads, hy, side, accs)
    if kind == "dfinish":
        return head + _dfinish(ptx, range(n_acc), loads, hy, n_dh)
    raise ValueError(f"source: kind {kind!r} is not 'fwd', 'bwd' or 'dfinish'")


def _fwd(ptx: str, C: range, loads: list[str], hy: list[str], reduce: str) -> str:
    step = ", ".join([f"PTX_IN({ptx}, a)", f"PTX_IN({ptx}, b)", *hy,
                      *[f"PTX_MOD({ptx}, acc{c})" for c in C]])
    fin = ", ".join([*[f"PTX_IN({ptx}, s{c}, acc{c})" for c in C], *hy,
                     f"PTX_OUT({ptx}, out, o)"])
    return f'''
extern "C" __global__ void pairwise_fwd(T* out, T* S, const T* A, const T* B, const T* hyper,
                                        int m, int n, int d) {{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    {" ".join(loads)}
    // rows stride over the grid's y (at most 65,535 blocks there): any m launches
    for (int i = blockIdx.y * blockDim.y + threadIdx.y; i < m; i += gridDim.y * blockDim.y) {{
    {" ".join(f"T acc{c} = {_INIT[reduce]};" for c in C)}
    const T* Ai = A + (size_t)i * d;
    const T* Bj = B + (size_t)j * d;
    for (int k = 0; k < d; ++k) {{
        const T a = Ai[k], b = Bj[k];
        PTX_INJECT("step", {step});
    }}
    const size_t at = (size_t)i * n + j, plane = (size_t)m * n;
    if (S) {{ {" ".join(f"S[{c} * plane + at] = acc{c};" for c in C)} }}
    if (out) {{
        T o;
        PTX_INJECT("finish", {fin});
        out[at] = o;
    }}
    }}
}}'''


def _bwd(ptx: str, C: range, loads: list[str], hy: list[str], side: str,
         accs: tuple[str, ...]) -> str:
    ab = ["x", "y"] if side == "a" else ["y", "x"]
    back = ", ".join([f"PTX_IN({ptx}, a, {ab[0]})", f"PTX_IN({ptx}, b, {ab[1]})",
                      *[f"PTX_IN({ptx}, s{c}, S[{c} * plane + at])" for c in C],
                      *[f"PTX_IN({ptx}, h{c}, H[{c} * plane + at])" for c in C], *hy,
                      *[f"PTX_MOD({ptx}, {acc})" for acc in accs]])
    return f'''
extern "C" __global__ void pairwise_bwd(T* dX, const T* X, const T* Y, const T* S, const T* H,
                                        const T* hyper, int rows, int others, int d,
                                        long long s_mine, long long s_other, long long plane) {{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= d) return;
    {" ".join(loads)}
    // rows stride over the grid's y (at most 65,535 blocks there): any number of rows launches
    for (int r = blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += gridDim.y * blockDim.y) {{
    const T x = X[(size_t)r * d + k];
    {" ".join(f"T {acc} = 0;" for acc in accs)}
    for (int q = 0; q < others; ++q) {{
        const T y = Y[(size_t)q * d + k];
        const size_t at = (size_t)r * s_mine + (size_t)q * s_other;
        PTX_INJECT("back", {back});
    }}
    const size_t out_plane = (size_t)rows * d;
    {" ".join(f"dX[{q} * out_plane + (size_t)r * d + k] = {acc};" for q, acc in enumerate(accs))}
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
        return self._variant("fwd", {"step": self.f.step, "finish": self.f.finish_or_identity})

    @functools.cached_property
    def back_a(self) -> Any:
        return self._variant("bwd", {"back": self.f.back_a}, side="a")

    @functools.cached_property
    def back_b(self) -> Any:
        return self._variant("bwd", {"back": self.f.back_b}, side="b")

    @functools.cached_property
    def dhyper(self) -> Any:
        return self._variant("bwd", {"back": self.f.dhyper}, side="a",
                             accs=tuple(f"acc{q}" for q in range(len(self.f.elem_hyper))))

    @functools.cached_property
    def dfinish(self) -> Any:
        return self._variant("dfinish", {"dfinish": self.f.dfinish},
                             n_dh=len(self.f.finish_hyper) if self.f.finish is not None else 0)


@functools.lru_cache(maxsize=256)
def kernels(f: Formulas, arch: str) -> Kernels:
    """The (lazily built) variants of ``f`` for ``arch``."""
    return Kernels(f, arch)
