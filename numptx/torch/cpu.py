"""The CPU path of :func:`numptx.torch.pairwise`: the same formulas the CUDA kernels inject,
evaluated by their NumPy references over ``(i, j, k)`` blocks of rows at once::

    S, out = forward(f, A, B, {"sigma": 0.5})          # f: a Formulas; A, B: NumPy arrays
    dA, dB, dhyper = backward(f, A, B, S, G, {"sigma": 0.5}, want_hyper=("sigma",))

``S`` holds the ``C`` reductions (``C x m x n``), which the backward pass reads.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .formulas import Formulas

__all__ = ["forward", "backward", "BLOCK_ELEMENTS"]

#: elements of one ``(rows, n, d)`` block evaluated at once (bounds the memory of a call)
BLOCK_ELEMENTS = 1 << 21


def _outs(ret: Any, shape: tuple) -> list[np.ndarray]:
    """A formula's outputs as arrays of ``shape`` (a constant output is a 0-d array)."""
    vals = list(ret) if isinstance(ret, tuple) else [ret]
    return [np.broadcast_to(np.asarray(v), shape) for v in vals]


def _rows(m: int, n: int, d: int) -> int:
    return max(1, BLOCK_ELEMENTS // max(1, n * d))


def forward(f: Formulas, A: np.ndarray, B: np.ndarray,
            hyper: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """``(S, out)``: the reductions ``S[c, i, j] = reduce_k elem_c(A[i, k], B[j, k])`` and
    ``out = finish(S)``."""
    m, d = A.shape
    n = B.shape[0]
    dt = A.dtype
    eh = [hyper[h] for h in f.elem_hyper]
    reduce = {"sum": np.sum, "max": np.max, "min": np.min}[f.spec.reduce]
    S = np.empty((f.n_acc, m, n), dt)
    if d == 0:
        S[...] = {"sum": 0.0, "max": -np.inf, "min": np.inf}[f.spec.reduce]
    step = _rows(m, n, d)
    for i0 in range(0, m if d else 0, step):
        a = A[i0:i0 + step, None, :]
        terms = _outs(f.elem(a, B[None, :, :], *eh), (a.shape[0], n, d))
        for c, t in enumerate(terms):
            S[c, i0:i0 + step] = reduce(t, axis=2)
    out = np.empty((m, n), dt)
    out[...] = _outs(f.finish_or_identity(*S, *[hyper[h] for h in f.hyper]), (m, n))[0]
    return S, out


def backward(f: Formulas, A: np.ndarray, B: np.ndarray, S: np.ndarray, G: np.ndarray,
             hyper: Mapping[str, float], want_hyper: tuple[str, ...] = ()
             ) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
    """``(dA, dB, {hyperparameter: gradient})`` for the output gradient ``G`` (``m x n``);
    gradients only of the hyperparameters in ``want_hyper``."""
    m, d = A.shape
    n = B.shape[0]
    hv = [hyper[h] for h in f.hyper]
    C = f.n_acc
    back = _outs(f.dfinish(*S, G, *hv), (m, n))
    H, dfin = np.stack(back[:C]), dict(zip(f.finish_hyper, back[C:]))
    dA = np.zeros_like(A)
    dB = np.zeros_like(B)
    grads = {h: float(np.sum(dfin[h], dtype=np.float64)) if h in dfin else 0.0
             for h in want_hyper}
    elem_want = [h for h in f.elem_hyper if h in want_hyper]
    step = _rows(m, n, d)
    for i0 in range(0, m if d else 0, step):
        sl = slice(i0, i0 + step)
        a, b = A[sl, None, :], B[None, :, :]
        shape = (a.shape[0], n, d)
        ss = [s[sl, :, None] for s in S]
        hs = [h[sl, :, None] for h in H]
        dA[sl] = _outs(f.back_a(a, b, *ss, *hs, *hv, 0.0), shape)[0].sum(axis=1)
        dB += _outs(f.back_b(a, b, *ss, *hs, *hv, 0.0), shape)[0].sum(axis=0)
        if elem_want:
            parts = _outs(f.dhyper(a, b, *ss, *hs, *hv, *[0.0] * len(f.elem_hyper)), shape)
            for h, p in zip(f.elem_hyper, parts):
                if h in grads:
                    grads[h] += float(np.sum(p, dtype=np.float64))
    return dA, dB, grads
