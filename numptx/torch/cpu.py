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


def _blocks(m: int, n: int, d: int):
    """``(rows of A, rows of B)`` slices covering ``m x n``, each block of at most
    :data:`BLOCK_ELEMENTS` ``(i, j, k)`` elements (one pair of rows where ``d`` alone is more)."""
    nj = max(1, min(n, BLOCK_ELEMENTS // max(1, d)))
    ni = max(1, BLOCK_ELEMENTS // max(1, nj * d))
    for i0 in range(0, m if d else 0, ni):
        for j0 in range(0, n, nj):
            yield slice(i0, i0 + ni), slice(j0, j0 + nj)


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
    for si, sj in _blocks(m, n, d):
        a, b = A[si, None, :], B[None, sj, :]
        terms = _outs(f.elem(a, b, *eh), (a.shape[0], b.shape[1], d))
        for c, t in enumerate(terms):
            S[c, si, sj] = reduce(t, axis=2)
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
    for si, sj in _blocks(m, n, d):
        a, b = A[si, None, :], B[None, sj, :]
        shape = (a.shape[0], b.shape[1], d)
        ss = [s[si, sj, None] for s in S]
        hs = [h[si, sj, None] for h in H]
        dA[si] += _outs(f.back_a(a, b, *ss, *hs, *hv, 0.0), shape)[0].sum(axis=1)
        dB[sj] += _outs(f.back_b(a, b, *ss, *hs, *hv, 0.0), shape)[0].sum(axis=0)
        if elem_want:
            parts = _outs(f.dhyper(a, b, *ss, *hs, *hv, *[0.0] * len(f.elem_hyper)), shape)
            for h, p in zip(f.elem_hyper, parts):
                if h in grads:
                    grads[h] += float(np.sum(p, dtype=np.float64))
    return dA, dB, grads
