"""DSL value types: ``nx.f16, nx.bf16, nx.f32, nx.f64, nx.s32, nx.u32, nx.s64, nx.u64`` and the
predicate type ``nx.pred`` (what comparisons give).

A type is an annotation and a cast::

    @nx.ptx_expr
    def f(x: nx.f32, i: nx.s32) -> nx.f32:
        return x * nx.f32(i)          # s32 -> f32, rounded to nearest (cvt.rn.f32.s32)

Outside a trace the cast converts NumPy values (``nx.f32(3)`` is ``np.float32(3.0)``).
bf16 values live as their bit patterns in ``uint16`` arrays (NumPy has no bf16), as everywhere
in numptx (docs/design/programs.md, section 2).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .. import valuetypes as VT

__all__ = ["DType", "f16", "bf16", "f32", "f64", "s32", "u32", "s64", "u64", "pred", "DTYPES",
           "TYPE_NAMES", "FLOATS", "INTS", "as_dtype", "parse_annotation"]


class DType:
    """One DSL value type. ``name`` is the numptx value type (``"f32"``), ``np`` the canonical
    NumPy dtype, ``kind`` one of ``"f"`` (float), ``"s"``/``"u"`` (signed/unsigned int),
    ``"p"`` (predicate), ``bits`` the width. Calling it casts (see the module docstring)."""
    __slots__ = ("name", "np", "kind", "bits")

    def __init__(self, name: str, np_dtype, kind: str, bits: int):
        self.name, self.np, self.kind, self.bits = name, np.dtype(np_dtype), kind, bits

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "su"

    @property
    def is_signed(self) -> bool:
        return self.kind in "fs"

    def __call__(self, value: Any):
        """Cast ``value`` (a traced value, a NumPy value or a Python number) to this type."""
        return _cast_hook(self, value)

    def __repr__(self) -> str:
        return f"nx.{self.name}"

    __str__ = __repr__

    def __reduce__(self):
        return (as_dtype, (self.name,))


# The DSL types are the rows of numptx/valuetypes.py marked dsl, in ORDER TYPES with pred last
# (floats, ints, pred); the kind letter is f, s, u or p
_ROWS = sorted((v for v in VT.ROWS if v.dsl), key=lambda v: v.kind == "pred")
#: the DSL type names (each is ``nx.<name>``)
TYPE_NAMES: tuple[str, ...] = tuple(v.name for v in _ROWS)
DTYPES: dict[str, DType] = {v.name: DType(v.name, v.np, v.kind[0], v.bits) for v in _ROWS}
# module names for imports and type checkers (tests/test_native_tables.py: one per TYPE_NAMES)
f16, bf16, f32, f64 = DTYPES["f16"], DTYPES["bf16"], DTYPES["f32"], DTYPES["f64"]
s32, u32, s64, u64 = DTYPES["s32"], DTYPES["u32"], DTYPES["s64"], DTYPES["u64"]
pred = DTYPES["pred"]
FLOATS = tuple(t for t in DTYPES.values() if t.kind == "f")
INTS = tuple(t for t in DTYPES.values() if t.kind in "su")
# NumPy dtype -> type, where NumPy holds the values themselves (bf16 is bits in a uint16)
_BY_NP = {v.np: DTYPES[v.name] for v in _ROWS if v.native}
_ALIASES = {a: DTYPES[n] for a, n in VT.aliases(_ROWS).items()}


def _cast_hook_unset(dtype: DType, value: Any):    # replaced by numptx.dsl.ops at import
    raise RuntimeError("numptx.dsl.ops is not loaded")


_cast_hook: Callable[[DType, Any], Any] = _cast_hook_unset


def set_cast_hook(fn: Callable[[DType, Any], Any]) -> None:
    """Install the cast implementation (done by :mod:`numptx.dsl.ops`)."""
    global _cast_hook
    _cast_hook = fn


def as_dtype(t: Any) -> DType | None:
    """``nx.f32``, ``"f32"``, ``np.float32`` or ``np.dtype("float32")`` -> :class:`DType`;
    None if ``t`` names no DSL type."""
    if isinstance(t, DType):
        return t
    if isinstance(t, str):
        name = t.lower()
        return DTYPES.get(name) or _ALIASES.get(name)
    try:
        return _BY_NP.get(np.dtype(t))
    except TypeError:
        return None


_ANNOTATION_CACHE: dict[str, DType | None] = {}


def parse_annotation(ann: Any, globalns: dict | None = None) -> DType | None:
    """The DType an annotation means: a DType, a NumPy type, or a string such as ``"nx.f32"``
    (postponed annotations), resolved by its last dotted part first, then by ``eval`` in the
    function's globals. None when it is no DSL type."""
    if not isinstance(ann, str):
        return as_dtype(ann)
    hit = _ANNOTATION_CACHE.get(ann)
    if hit is not None:
        return hit
    t = as_dtype(ann.rsplit(".", 1)[-1].strip())
    if t is not None:
        _ANNOTATION_CACHE[ann] = t
        return t
    if globalns is not None:
        try:
            t = eval(ann, globalns)    # noqa: S307 - the user's own annotation
        except Exception:
            return None
        # x: "nx.f32" under `from __future__ import annotations` is the string "'nx.f32'"
        return parse_annotation(t) if isinstance(t, str) else as_dtype(t)
    return None
