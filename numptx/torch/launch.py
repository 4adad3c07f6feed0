"""Launching :mod:`numptx.torch.cuda`'s variants on CUDA tensors: on torch's current stream
(through ``numba.cuda.external_stream``), with the tensors' device pointers (no copies, no
host sync: hyperparameters that are tensors are read on the device)::

    S, out = forward(f, A, B, hyper)                 # A, B: contiguous CUDA tensors
    dA, dB, dhyper = backward(f, A, B, S, G, hyper, want=("sigma",))
"""
from __future__ import annotations

from typing import Any, Sequence

import torch as _torch

from .cuda import BLOCK, TILE, back_tile, kernels
from .formulas import Formulas

__all__ = ["forward", "backward", "forward_args", "back_args", "dfinish_args", "splits",
           "split_plan"]


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


#: CUDA's bound on a grid's y dimension; the kernels' rows stride over it
GRID_Y_MAX = 65535


def _grid_y(rows: int) -> int:
    """Blocks along y for ``rows`` rows (a tile of :data:`~numptx.torch.cuda.TILE` each): as
    many as cover them, at most :data:`GRID_Y_MAX` (the kernels loop over the rest)."""
    return max(1, min(_cdiv(rows, TILE), GRID_Y_MAX))


def _arch(device: _torch.device) -> str:
    major, minor = _torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def _stream(device: _torch.device) -> Any:
    from numba import cuda
    return cuda.external_stream(_torch.cuda.current_stream(device).cuda_stream)


def _gpu(device: _torch.device) -> Any:
    from numba import cuda
    return cuda.gpus[device.index if device.index is not None else _torch.cuda.current_device()]


def _hyper(hyper: Sequence[Any], like: _torch.Tensor) -> _torch.Tensor | None:
    """The hyperparameters as one device array of the tensors' type (tensors stay on the
    device: no sync)."""
    if not hyper:
        return None
    parts = [v.detach().reshape(()).to(like.dtype) if isinstance(v, _torch.Tensor)
             else _torch.tensor(float(v), dtype=like.dtype, device=like.device) for v in hyper]
    return _torch.stack(parts)


def _ptr(t: _torch.Tensor | None) -> int:
    return 0 if t is None else t.data_ptr()


def forward_args(out: _torch.Tensor, S: _torch.Tensor | None, A: _torch.Tensor,
                 B: _torch.Tensor, hv: _torch.Tensor | None) -> tuple:
    """``pairwise_fwd``'s arguments: device pointers (ints) and sizes."""
    return (out.data_ptr(), _ptr(S), A.data_ptr(), B.data_ptr(), _ptr(hv), A.shape[0],
            B.shape[0], A.shape[1])


def back_args(dX: _torch.Tensor, X: _torch.Tensor, Y: _torch.Tensor, S: _torch.Tensor,
              H: _torch.Tensor, hv: _torch.Tensor | None, s_mine: int, s_other: int,
              q_chunk: int | None = None) -> tuple:
    """``pairwise_bwd``'s arguments (``X``: the rows of ``dX``; ``Y``: the other operand;
    ``q_chunk``: the other rows each split of the grid's z sums, all of them by default)."""
    return (dX.data_ptr(), X.data_ptr(), Y.data_ptr(), S.data_ptr(), H.data_ptr(), _ptr(hv),
            X.shape[0], Y.shape[0], X.shape[1], s_mine, s_other, S.shape[1] * S.shape[2],
            Y.shape[0] if q_chunk is None else q_chunk)


def splits(blocks: int, others: int, sms: int, bq: int) -> int:
    """Into how many parts the backward kernel splits the other operand's rows (the grid's
    z): enough for two blocks per SM where the output tiles alone are fewer (dA of 2048 x 64
    is 32 tiles), each part at least 4 q-tiles of work.

    >>> splits(32, 2048, 132, 16), splits(1024, 2048, 132, 16), splits(1, 40, 132, 16)
    (9, 1, 1)
    """
    want = _cdiv(2 * sms, blocks)
    return max(1, min(want, others // (4 * bq)))


def split_plan(blocks: int, others: int, sms: int, bq: int) -> tuple[int, int]:
    """``(q_chunk, parts)`` of the backward kernel's launch: the other rows each part of the
    grid's z sums (a multiple of ``bq``) and how many parts (:func:`splits`); ``others`` >= 1.

    >>> split_plan(32, 2048, 132, 16), split_plan(1, 40, 132, 16)
    ((240, 9), (48, 1))
    """
    chunk = _cdiv(_cdiv(others, splits(blocks, others, sms, bq)), bq) * bq
    return chunk, max(1, _cdiv(others, chunk))


def dfinish_args(H: _torch.Tensor, DH: _torch.Tensor | None, S: _torch.Tensor,
                 G: _torch.Tensor, hv: _torch.Tensor | None) -> tuple:
    """``pairwise_dfinish``'s arguments."""
    return (H.data_ptr(), _ptr(DH), S.data_ptr(), G.data_ptr(), _ptr(hv), G.numel())


def forward(f: Formulas, A: _torch.Tensor, B: _torch.Tensor, hyper: Sequence[Any],
            keep: bool = True) -> tuple[_torch.Tensor | None, _torch.Tensor]:
    """``(S, out)`` on the device of ``A`` and ``B`` (contiguous, one float type); ``S`` (the
    reductions, for the backward pass) only with ``keep``."""
    m, d = A.shape
    n = B.shape[0]
    out = _torch.empty((m, n), dtype=A.dtype, device=A.device)
    S = _torch.empty((f.n_acc, m, n), dtype=A.dtype, device=A.device) if keep else None
    if m and n:
        hv = _hyper(hyper, A)
        v = kernels(f, _arch(A.device)).forward
        with _gpu(A.device):
            v[(_cdiv(n, TILE), _grid_y(m)), BLOCK, _stream(A.device)](
                *forward_args(out, S, A, B, hv))
    return S, out


def _back(v: Any, f: Formulas, dX: _torch.Tensor, X: _torch.Tensor, Y: _torch.Tensor,
          S: _torch.Tensor, H: _torch.Tensor, hv: _torch.Tensor | None, s_mine: int,
          s_other: int) -> None:
    """Run a backward variant into ``dX`` (``W x rows x d``, or ``rows x d``): split over the
    other rows where the output tiles are too few for the GPU (:func:`splits`), the parts'
    partial sums added by torch (deterministic, no atomics)."""
    rows, d = X.shape
    others = Y.shape[0]
    if not (rows and d and others):     # no other rows: dX stays the caller's zeros
        return
    grid = (_cdiv(d, TILE), _grid_y(rows))
    sms = _torch.cuda.get_device_properties(X.device).multi_processor_count
    chunk, z = split_plan(grid[0] * grid[1], others, sms, back_tile(f.t, f.n_acc))
    out = dX if z == 1 else _torch.empty((z, *dX.shape), dtype=dX.dtype, device=dX.device)
    with _gpu(X.device):
        v[(*grid, z), BLOCK, _stream(X.device)](
            *back_args(out, X, Y, S, H, hv, s_mine, s_other, chunk))
    if z > 1:
        _torch.sum(out, dim=0, out=dX)


def backward(f: Formulas, A: _torch.Tensor, B: _torch.Tensor, S: _torch.Tensor,
             G: _torch.Tensor, hyper: Sequence[Any], want: tuple[str, ...]
             ) -> tuple[_torch.Tensor, _torch.Tensor, dict[str, _torch.Tensor]]:
    """``(dA, dB, {hyperparameter: gradient})`` for the output gradient ``G``."""
    m, d = A.shape
    n = B.shape[0]
    k = kernels(f, _arch(A.device))
    hv = _hyper(hyper, A)
    plane = m * n
    grads: dict[str, _torch.Tensor] = {}
    if f.finish is None:
        H = G.reshape(1, m, n)
    else:
        H = _torch.empty((f.n_acc, m, n), dtype=A.dtype, device=A.device)
        nh = len(f.finish_hyper)
        DH = _torch.empty((nh, m, n), dtype=A.dtype, device=A.device) if nh else None
        if plane:
            with _gpu(A.device):
                k.dfinish[_cdiv(plane, 256), 256, _stream(A.device)](
                    *dfinish_args(H, DH, S, G, hv))
        for q, h in enumerate(f.finish_hyper):
            if h in want:
                grads[h] = DH[q].sum()
    dA = _torch.zeros_like(A)
    dB = _torch.zeros_like(B)
    _back(k.back_a, f, dA, A, B, S, H, hv, n, 1)
    _back(k.back_b, f, dB, B, A, S, H, hv, 1, n)
    elem_want = [h for h in f.elem_hyper if h in want]
    if elem_want:
        W = len(f.elem_hyper)
        parts = _torch.zeros((W, m, d), dtype=A.dtype, device=A.device)
        _back(k.dhyper, f, parts, A, B, S, H, hv, n, 1)
        for q, h in enumerate(f.elem_hyper):
            if h in want:
                grads[h] = grads.get(h, 0) + parts[q].sum()
    return dA, dB, grads
