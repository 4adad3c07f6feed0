"""Transcendental functions as sequences of instruction-table rows, written once against the
builder protocol of docs/design/dsl.md::

    from numptx.dsl import mathlib as M
    y = M.exp(M.EagerBuilder(), np.float32([0.5, 1.0]), dtype="f32", fastmath=False)

A function ``fn(b, x, *, dtype, fastmath)`` (binary ones ``fn(b, x, y, ...)``) calls only
``b.instr(name, *values)`` (a row of :data:`numptx.instructions.TABLE`) and
``b.const(value, type)``. The tracer's graph builder records the calls as primitive nodes;
:class:`EagerBuilder` runs each row's NumPy semantic at once, so an eager evaluation equals the
emulation of the lowered stub bit for bit. :func:`evaluate` is the eager shortcut.

Accurate mode (``fastmath=False``) uses only exact rows: ``.rn`` arithmetic, ``fma.rn``,
``div.rn``/``rcp.rn``/``sqrt.rn``, integer and bit operations, bit casts, conversions with an
explicit rounding, ``setp``/``selp``; no ``.approx`` row, so the emulated result is the GPU
result. The methods (all branch-free; special values are patched with ``selp`` at the end):

* exp, exp2, expm1, sinh/cosh/sigmoid/tanh through them: Cody-Waite reduction
  ``r = x - k ln2`` with ``k = rint(x log2 e)`` and ``ln2`` split in two parts (the first
  ``fma`` is exact), a minimax polynomial for ``e^r`` on [-ln2/2, ln2/2], and a scaling by
  ``2^k`` in two exact-exponent multiplications (so overflow gives inf and underflow rounds
  once into the subnormals).
* log, log2, log10, log1p: ``x = 2^e m`` with ``m`` in [sqrt(1/2), sqrt(2)) from the bits
  (subnormals pre-scaled by ``2^24``/``2^54``); ``log(1+f)``, ``f = m - 1`` exactly, by a
  polynomial in ``f`` (f32) or in ``s = f / (2 + f)`` with a correction term (f64);
  ``e ln2`` added in two parts with an exact Fast2Sum.
* sin, cos, tan: ``k = rint(x 2/pi)``, ``r = x - k pi/2`` with pi/2 in three parts (the first
  ``fma`` is exact, the second is added with 2Sum), polynomials for sin and cos on
  |r| <= 0.9 (pi/4 plus the misrounding of k at large |x|), quadrant by ``selp``; tan is
  the quotient of the two as double words. Accurate for |x| < 2^20 (f32) / 2^48 (f64);
  beyond that the result is meaningless but finite (see docs/dsl_accuracy.md).
* arctan: ``u = x`` or ``-1/x`` (one division), a polynomial on [-1, 1], ``pi/2`` added in two
  parts. cbrt: exponent divided by 3 with a multiply-high, Newton's iteration for ``m^-1/3``
  from a polynomial seed, one final correction with an exact residual. hypot: power-of-two
  scaling and ``sqrt(fma(a, a, b*b))``. pow: ``log2|x|`` in double-word arithmetic, times
  ``y`` with an exact product, ``exp2`` of the double-word result, then the C99 special cases.

Polynomial coefficients are weighted minimax fits of the relative error, rounded to the working
precision: the data module ``coeffs.py``, written by ``python tools/remez.py`` (Remez exchange in
70-digit decimal arithmetic on the Taylor series of each function; ``--check`` re-fits and
compares).

Fast mode (``fastmath=True``, f32 only; f64 has none: :func:`implementation` returns None, the
DSL raises ``nx.PrecisionError``) uses the raw
PTX approximations: ``ex2.approx.ftz``, ``lg2.approx.ftz``, ``sin/cos.approx.ftz``,
``tanh.approx``, ``rcp.approx.ftz``, ``rsqrt.approx.ftz``, ``div.approx.ftz``. Functions with no
such form (expm1, log1p, arctan, arctan2, cbrt, hypot) use their ``cuda`` form there
(:func:`implementation`). CUDA mode (``precision="cuda"``, the DSL's default): cuda_exp.py,
cuda_trig.py.
Measured accuracy: docs/dsl_accuracy.md (``python benchmarks/accuracy_dsl.py``).

The package: ``builders`` (:class:`EagerBuilder`, :class:`InstrCounter`, :func:`ulp_error`),
``core`` (constants and the :class:`~numptx.dsl.mathlib.core.Ops` shorthands), ``coeffs``
(generated data), ``functions`` (the sequences and their registry :data:`FUNCTIONS`). A new
sequence is one decorated function in ``functions.py`` (docs/design/dsl_functions.md).
"""
from __future__ import annotations
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ...instructions import NP_DTYPE
from .builders import EagerBuilder, InstrCounter, ulp_error, ulp_steps
from .core import DTYPES
from .functions import *  # noqa: F403 - every registered sequence (exp, sin, ...)
from .functions import FAST_FORMS, FUNCTIONS, __all__ as _SEQUENCES
from ..modes import MODES
from .cuda_forms import CUDA_FORMS, CUDA_ULP, CUDA_ULP_F64
from . import cuda_exp as _cuda_exp  # noqa: F401 - registers the CUDA-speed forms
from . import cuda_trig as _cuda_trig  # noqa: F401
from . import cuda_f64 as _cuda_f64  # noqa: F401

__all__ = ["EagerBuilder", "InstrCounter", "evaluate", "implementation", "ulp_error", "ulp_steps",
           "DTYPES",
           "MODES", "CUDA_FORMS", *_SEQUENCES]



def implementation(name: str, dtype: str, mode: str = "accurate") -> Callable | None:
    """The sequence ``fn(b, *xs)`` that computes FUNCTIONS[name] on ``dtype`` in ``mode``, or
    None when that mode has none for the type::

        implementation("exp", "f32", "cuda")(EagerBuilder(), np.float32([1.0]))

    * ``accurate``: the exact sequence (<= 1 ulp, bit-exact in the emulator);
    * ``cuda``: the CUDA-speed form (CUDA_FORMS) where one exists, else the accurate sequence
      (f64, and functions whose CUDA form is no faster);
    * ``fast``: the f32 ``.approx`` form (FAST_FORMS); an f32 function without one uses its
      ``cuda`` form, as ``--use_fast_math`` leaves such functions alone; f64: None.
    """
    fn = FUNCTIONS[name][0]
    if mode == "accurate":
        return lambda b, *xs: fn(b, *xs, dtype=dtype, fastmath=False)
    if mode == "fast":
        if dtype != "f32":
            return None
        if name in FAST_FORMS:
            return lambda b, *xs: fn(b, *xs, dtype=dtype, fastmath=True)
        mode = "cuda"
    if mode == "cuda":
        form = CUDA_FORMS.get((name, dtype))
        if form is not None:
            return lambda b, *xs: form(b, *xs, dtype=dtype)
        return lambda b, *xs: fn(b, *xs, dtype=dtype, fastmath=False)
    raise ValueError(f"mathlib: mode must be one of {MODES}, not {mode!r}")


def evaluate(fn: Callable | str, *args, dtype: str = "f32", fastmath: bool = False,
             mode: str | None = None):
    """Eager evaluation: ``fn`` (a function or a FUNCTIONS name) on NumPy inputs cast to
    ``dtype``; returns an array of that dtype (the emulated result of the stub). ``mode``
    (a FUNCTIONS name only) picks the math mode's sequence (:func:`implementation`)::

        evaluate("exp", [0.0, 1.0], dtype="f64")                # array([1., 2.71828183])
        evaluate("exp", [0.0, 1.0], dtype="f32", mode="cuda")   # CUDA's expf algorithm
    """
    dt = NP_DTYPE[dtype]
    vals = [np.asarray(a, dtype=dt) for a in args]
    if mode is not None:
        if not isinstance(fn, str):
            raise TypeError("mathlib.evaluate: mode= takes a FUNCTIONS name, not a function")
        impl = implementation(fn, dtype, mode)
        if impl is None:
            raise ValueError(f"mathlib: {fn} has no {dtype} form in mode {mode!r}")
        out = np.asarray(impl(EagerBuilder(), *vals))
    else:
        f = FUNCTIONS[fn][0] if isinstance(fn, str) else fn
        out = np.asarray(f(EagerBuilder(), *vals, dtype=dtype, fastmath=fastmath))
    shape = np.broadcast_shapes(*(v.shape for v in vals))
    if out.size == math.prod(shape):
        return out.reshape(shape)
    return np.broadcast_to(out, shape).copy()
