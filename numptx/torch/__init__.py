"""numptx for PyTorch (``pip install "numptx[torch]"``): pairwise "semiring" kernels written as
formulas, with autograd::

    import torch, numptx as nx
    from numptx.torch import pairwise, zoo

    K = pairwise(X, Z, zoo.laplace, sigma=2.0)      # exp(-||x_i - z_j||_2 / 2), m x n
    D = pairwise(X, Z, lambda a, b: nx.abs(a - b))  # the L1 distance: sum_k |a - b|
    D = pairwise(X, Z, lambda a, b: nx.abs(a - b), reduce="max")       # Chebyshev
    K.sum().backward()                              # dX, dZ (and d sigma, if a tensor)

``out[i, j] = finish(reduce_k formula(A[i, k], B[j, k], **hyper), **hyper)``: ``formula`` is an
``@nx.ptx_expr`` (or a plain Python function) of the two elements and then hyperparameters,
returning one term or a tuple of terms reduced separately; ``reduce`` is "sum", "max" or
"min"; ``finish`` (optional) maps the reductions, then hyperparameters, to the output. The
backward pass runs the formulas' derivatives (:func:`numptx.grad`) in the same kind of kernels.

On CUDA tensors the formulas are injected into CUDA C++ templates (:mod:`numptx.torch.cuda`)
launched on torch's current stream, on the tensors' memory; on CPU tensors their NumPy
references run instead (:mod:`numptx.torch.cpu`), so the same code runs anywhere. The float
parameters of a formula take the tensors' type (float32 or float64). See docs/torch.md.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable

import numpy as np

try:
    import torch as _torch
except ImportError as _e:                       # the optional extra is missing
    raise ImportError(f"numptx.torch needs PyTorch: pip install \"numptx[torch]\" ({_e})") from _e

from . import cpu as _cpu
from . import zoo
from .errors import PairwiseError
from .formulas import REDUCES, Formulas, Pairwise

__all__ = ["pairwise", "Pairwise", "PairwiseError", "zoo", "REDUCES"]

_TYPES = {_torch.float32: "f32", _torch.float64: "f64"}


def pairwise(A: _torch.Tensor, B: _torch.Tensor, formula: Pairwise | Callable, reduce: str = "sum",
             *, finish: Callable | None = None, **hyper: Any) -> _torch.Tensor:
    """``out[i, j] = finish(reduce_k formula(A[i, k], B[j, k], **hyper), **hyper)`` for ``A``
    (``m x d``) and ``B`` (``n x d``), float32 or float64 tensors on one device; an ``m x n``
    tensor, differentiable w.r.t. ``A``, ``B`` and the hyperparameters given as tensors::

        pairwise(X, Z, zoo.gaussian, sigma=0.5)
        pairwise(X, Z, lambda a, b, p: nx.abs(a - b) ** p, finish=lambda s, p: s ** (1 / p), p=3.0)

    ``formula`` is a :class:`Pairwise` (the :mod:`~numptx.torch.zoo`'s, whose ``reduce`` and
    ``finish`` it carries), an ``@nx.ptx_expr`` formula or a Python function. Hyperparameters
    are keyword arguments: numbers, or one-element tensors (on the tensors' device; with
    ``requires_grad`` they get gradients). Raises :class:`PairwiseError` naming the argument
    at fault.
    """
    spec = _spec(formula, reduce, finish)
    t = _check_tensors(A, B)
    f = spec.typed(t)
    names = f.hyper
    for k in hyper:
        if k not in names:
            raise PairwiseError(f"pairwise: {k!r} is not a hyperparameter of "
                                f"{f.elem.signature()}"
                                + (f" or {f.finish.signature()}" if f.finish else "")
                                + f" (hyperparameters: {', '.join(names) or 'none'})",
                                argument=k)
    values = []
    for h in names:
        v = hyper.get(h, spec.hyper.get(h, f.defaults.get(h)))
        if v is None:
            raise PairwiseError(f"pairwise: hyperparameter {h!r} has no value and no default; "
                                f"pass {h}=...", argument=h)
        values.append(_check_hyper(h, v, A))
    return _PairwiseFn.apply(f, A, B, *values)


def _spec(formula: Any, reduce: str, finish: Any) -> Pairwise:
    if isinstance(formula, Pairwise):
        if reduce != "sum" or finish is not None:
            raise PairwiseError(f"pairwise: {formula.name or 'the Pairwise'} carries its own "
                                f"reduce and finish; pass neither",
                                argument="reduce" if reduce != "sum" else "finish")
        return formula
    if not isinstance(reduce, str) or reduce not in REDUCES:
        raise PairwiseError(f"pairwise: reduce={reduce!r} is not one of "
                            f"{', '.join(map(repr, REDUCES))}", argument="reduce")
    return _spec_cached(formula, reduce, finish)


_SPECS: dict = {}


def _spec_cached(formula: Any, reduce: str, finish: Any) -> Pairwise:
    """One :class:`Pairwise` per (formula, reduce, finish): its typed formulas and kernels are
    cached with it."""
    key = (formula, reduce, finish)
    try:
        hit = _SPECS.get(key)
    except TypeError:
        hit = None
    if hit is None:
        hit = Pairwise(formula, reduce, finish, getattr(formula, "__name__", ""))
        if len(_SPECS) > 256:
            _SPECS.clear()
        try:
            _SPECS[key] = hit
        except TypeError:
            pass
    return hit


def _check_tensors(A: Any, B: Any) -> str:
    for name, x in (("A", A), ("B", B)):
        if not isinstance(x, _torch.Tensor):
            raise PairwiseError(f"pairwise: {name} must be a torch.Tensor, not "
                                f"{type(x).__name__}", argument=name)
        if x.dim() != 2:
            raise PairwiseError(f"pairwise: {name} must be 2-d (rows x features), not of shape "
                                f"{tuple(x.shape)}", argument=name)
        if x.layout != _torch.strided or x.device.type not in ("cpu", "cuda"):
            raise PairwiseError(f"pairwise: {name} is a {x.layout} tensor on {x.device}; "
                                f"pairwise takes dense tensors on the CPU or a CUDA device "
                                f"(e.g. {name}.to_dense().cpu())", argument=name)
        if x.dtype not in _TYPES:
            raise PairwiseError(f"pairwise: {name} is {x.dtype}; pairwise takes float32 or "
                                f"float64 (convert it, e.g. {name}.float())", argument=name)
    if A.shape[1] != B.shape[1]:
        raise PairwiseError(f"pairwise: A is {tuple(A.shape)} and B is {tuple(B.shape)}: their "
                            f"rows must have the same length (features)", argument="B")
    if A.dtype != B.dtype:
        raise PairwiseError(f"pairwise: A is {A.dtype} and B is {B.dtype}; give both one type",
                            argument="B")
    if A.device != B.device:
        raise PairwiseError(f"pairwise: A is on {A.device} and B on {B.device}; put both on one "
                            f"device", argument="B")
    return _TYPES[A.dtype]


def _check_hyper(name: str, v: Any, A: _torch.Tensor) -> Any:
    if isinstance(v, _torch.Tensor):
        if v.numel() != 1 or not v.dtype.is_floating_point:
            raise PairwiseError(f"pairwise: hyperparameter {name!r} is a tensor of "
                                f"{v.numel()} {v.dtype} element(s); it takes one float",
                                argument=name)
        if v.device != A.device:
            raise PairwiseError(f"pairwise: hyperparameter {name!r} is on {v.device}, the "
                                f"tensors on {A.device}", argument=name)
        return v
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, np.number)):
        raise PairwiseError(f"pairwise: hyperparameter {name!r} takes a number or a one-element "
                            f"tensor, not {type(v).__name__}", argument=name)
    return float(v)


class _PairwiseFn(_torch.autograd.Function):
    """The autograd node: forward and backward on the CPU (NumPy) or the GPU (CUDA)."""

    @staticmethod
    def forward(ctx: Any, f: Formulas, A: _torch.Tensor, B: _torch.Tensor,
                *hyper: Any) -> _torch.Tensor:
        A_in, B_in = A, B
        A, B = A.detach().contiguous(), B.detach().contiguous()
        if A.is_cuda:
            from . import launch
            S, out = launch.forward(f, A, B, hyper, keep=any(ctx.needs_input_grad))
        else:
            hv = {h: float(v) for h, v in zip(f.hyper, hyper)}
            S_np, out_np = _cpu.forward(f, A.numpy(), B.numpy(), hv)
            S, out = _torch.from_numpy(S_np), _torch.from_numpy(out_np)
        ctx.f = f
        ctx.hyper = hyper
        ctx.save_for_backward(A, B, S, A_in, B_in)
        return out

    @staticmethod
    def backward(ctx: Any, G: _torch.Tensor) -> tuple:
        """First derivatives only: under ``create_graph=True`` the gradients carry a node that
        raises if they are differentiated again (:class:`_FirstOnly`), rather than arriving
        as constants whose own derivatives would silently count as 0."""
        A, B, S, A_in, B_in = ctx.saved_tensors
        with _torch.no_grad():
            grads = _PairwiseFn._gradients(ctx, A, B, S, G)
        if _torch.is_grad_enabled():
            deps = [t for t in (A_in, B_in, G, *ctx.hyper)
                    if isinstance(t, _torch.Tensor) and t.requires_grad]
            if deps:
                grads = tuple(g if g is None else _FirstOnly.apply(g, *deps) for g in grads)
        return grads

    @staticmethod
    def _gradients(ctx: Any, A: _torch.Tensor, B: _torch.Tensor, S: _torch.Tensor,
                   G: _torch.Tensor) -> tuple:
        f = ctx.f
        need = ctx.needs_input_grad
        want = tuple(h for h, n in zip(f.hyper, need[3:]) if n)
        G = G.contiguous()
        if A.is_cuda:
            from . import launch
            dA, dB, dh = launch.backward(f, A, B, S, G, ctx.hyper, want)
        else:
            hv = {h: float(v) for h, v in zip(f.hyper, ctx.hyper)}
            dA_np, dB_np, grads = _cpu.backward(f, A.numpy(), B.numpy(), S.numpy(),
                                                G.numpy(), hv, want)
            dA, dB = _torch.from_numpy(dA_np), _torch.from_numpy(dB_np)
            dh = {h: _torch.tensor(g, dtype=A.dtype) for h, g in grads.items()}
        hyper_grads = []
        for h, v in zip(f.hyper, ctx.hyper):
            g = dh.get(h)
            hyper_grads.append(None if g is None else g.reshape(v.shape).to(v.dtype))
        return (None, dA if need[1] else None, dB if need[2] else None, *hyper_grads)


class _FirstOnly(_torch.autograd.Function):
    """``pairwise``'s gradient ``g`` as it is, tied to what it depends on (``deps``) so that
    differentiating it again raises instead of counting its derivative as 0."""

    @staticmethod
    def forward(ctx: Any, g: _torch.Tensor, *deps: _torch.Tensor) -> _torch.Tensor:
        return g.clone()

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        raise PairwiseError("pairwise: first derivatives only (once_differentiable): its "
                            "gradients cannot be differentiated again (create_graph=True, then "
                            "a backward through them); write that term in torch ops, or "
                            "detach() the gradient if its derivative is not wanted",
                            argument="formula")
