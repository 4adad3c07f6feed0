"""The registry of the CUDA-speed sequences (``precision="cuda"``, the DSL's default).

A CUDA-speed form computes a function the way CUDA's own math library does, on the hardware's
approximate units (``ex2.approx``, ``lg2.approx``, ``rcp.approx``, ...) with correction steps,
so an injected formula runs at the speed of the hand-written kernel and stays within CUDA's
documented error bounds::

    @cuda_form("exp")                     # f32 only unless dtypes= says otherwise
    def exp(b, x, *, dtype):
        ...                               # b.instr(...) / b.const(...), or Ops(b, dtype)

Functions and types with no CUDA-speed form use the accurate sequence in ``cuda`` mode (f64:
CUDA's double-precision functions are polynomial sequences of the same cost).
"""
from __future__ import annotations

from typing import Callable

__all__ = ["CUDA_FORMS", "cuda_form"]

CUDA_FORMS: dict[tuple[str, str], Callable] = {}
"""(function name, dtype) -> the CUDA-speed sequence ``fn(b, *xs, dtype)``."""


def cuda_form(name: str, dtypes: tuple[str, ...] = ("f32",)) -> Callable[[Callable], Callable]:
    """Register the decorated sequence as the CUDA-speed form of ``name`` for ``dtypes``."""
    def register(fn: Callable) -> Callable:
        for t in dtypes:
            CUDA_FORMS[(name, t)] = fn
        return fn
    return register
