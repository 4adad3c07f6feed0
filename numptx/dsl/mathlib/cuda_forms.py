"""The registry of the CUDA-speed sequences (``precision="cuda"``, the DSL's default).

A CUDA-speed form computes a function the way CUDA's own math library does, on the hardware's
approximate units (``ex2.approx``, ``lg2.approx``, ``rcp.approx``, ...) with correction steps,
so an injected formula runs at the speed of the hand-written kernel and stays within CUDA's
documented error bounds::

    @cuda_form("exp")                     # f32 only unless dtypes= says otherwise
    def exp(b, x, *, dtype):
        ...                               # b.instr(...) / b.const(...), or Ops(b, dtype)

Functions and types with no CUDA-speed form use the accurate sequence in ``cuda`` mode (f64:
sin, cos, tan, arctan2 and rsqrt, whose CUDA forms rest on rows the PTX ISA gives no error
bound for, or on a slow path a straight-line stub would always pay for).
"""
from __future__ import annotations

from typing import Callable

__all__ = ["CUDA_FORMS", "CUDA_ULP", "CUDA_ULP_F64", "cuda_form"]

CUDA_ULP: dict[str, float] = {
    "exp": 2, "exp2": 2, "expm1": 1, "log": 1, "log2": 1, "log10": 2, "log1p": 1,
    "sin": 2, "cos": 2, "tan": 4, "sinh": 3, "cosh": 2, "tanh": 2, "arctan": 2, "arctan2": 3,
    "pow": 4, "rsqrt": 2, "cbrt": 1, "hypot": 3, "rcp": 0, "sigmoid": 4,
}
"""Maximum ulp error CUDA documents for its single-precision functions (CUDA C++ Programming
Guide / CUDA Math API, "Single-Precision Floating-Point Functions", full range, default
options), counted as CUDA counts them: from the correctly rounded result (so the error against
the exact value may reach the bound plus 0.5); sigmoid has no CUDA function: 4 ulp bounds ``1 / (1 + expf(-x))`` (2 of expf, 2 of
the rest) away from the region where ``expf(-x)`` overflows (x < -88.72, result < 2^-126).
The CUDA-speed forms are tested against these bounds (tests/test_cuda_math.py)."""

CUDA_ULP_F64: dict[str, float] = {
    "exp": 1, "exp2": 2, "expm1": 1, "log": 1, "log2": 1, "log10": 2, "log1p": 1, "sinh": 2,
    "cosh": 2, "tanh": 2, "arctan": 2, "cbrt": 1, "hypot": 2, "pow": 2, "sigmoid": 3,
}
"""The same for the double-precision functions that have a CUDA-speed form (CUDA Math API,
"Double-Precision Floating-Point Functions"); sigmoid: 1 of exp plus 2 for the sum and the
reciprocal, above x = -709.78 where exp(-x) overflows."""

CUDA_FORMS: dict[tuple[str, str], Callable] = {}
"""(function name, dtype) -> the CUDA-speed sequence ``fn(b, *xs, dtype)``."""


def cuda_form(name: str, dtypes: tuple[str, ...] = ("f32",)) -> Callable[[Callable], Callable]:
    """Register the decorated sequence as the CUDA-speed form of ``name`` for ``dtypes``."""
    def register(fn: Callable) -> Callable:
        for t in dtypes:
            CUDA_FORMS[(name, t)] = fn
        return fn
    return register
