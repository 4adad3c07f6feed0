"""The DSL's math modes: one tuple that the tracer, the lowerings, mathlib and ``precision=``
share.

    from numptx.dsl.modes import MODES      # ("cuda", "accurate", "fast")

``cuda`` (the default) computes as CUDA C++ does with NVRTC's default options: IEEE arithmetic,
a product followed by a sum contracted into one ``fma.rn``, the transcendentals at CUDA's speed
and error (numptx/dsl/mathlib/cuda_forms.py). ``accurate``: every operation rounded once, the
<= 1 ulp mathlib sequences, bit-exact in ``nx.emulate``. ``fast`` (``fastmath=True``): ``.ftz``
contractible arithmetic and the ``.approx`` rows, as ``--use_fast_math``.
"""
from __future__ import annotations

__all__ = ["MODES", "DEFAULT"]

MODES: tuple[str, ...] = ("cuda", "accurate", "fast")
DEFAULT = "cuda"
