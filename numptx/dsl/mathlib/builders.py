"""Builders for mathlib's sequences, and the accuracy measure.

The builder protocol (docs/design/dsl.md): ``b.instr(row, *values)`` applies one row of
:data:`numptx.instructions.TABLE`, ``b.const(value, type)`` makes a constant. Besides the
tracer's :class:`~numptx.dsl.graph.Graph`, mathlib has two builders of its own::

    from numptx.dsl.mathlib import EagerBuilder, InstrCounter, exp
    y = exp(EagerBuilder(), np.float32([0.5, 1.0]), dtype="f32", fastmath=False)  # NumPy values
    c = InstrCounter()
    exp(c, c.input("f32"), dtype="f32", fastmath=False)                          # counts rows
    print(c.calls, c.unique)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...instructions import NP_DTYPE, TABLE

__all__ = ["EagerBuilder", "InstrCounter", "canonical_scalar", "ulp_error", "ulp_steps"]


def canonical_scalar(value: Any, t: str):
    """A Python/NumPy number as a NumPy scalar of value type ``t`` (floats round to nearest,
    integers wrap, pred is a bool)."""
    dt = NP_DTYPE[t]
    if t == "pred":
        return np.bool_(bool(value))
    if t in ("f16", "f32", "f64"):
        return dt.type(value)
    if t == "bf16":
        raise ValueError("mathlib: no bf16 constants (bf16 math is computed in f32)")
    bits = dt.itemsize * 8
    v = int(value) & ((1 << bits) - 1)
    if t[0] == "s" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return dt.type(v)


class EagerBuilder:
    """The builder protocol on NumPy values: ``instr`` applies the table row's semantic at once,
    ``const`` is a NumPy scalar in the canonical representation of its type. Operands must
    have the canonical dtype of the row's operand types (a mismatch raises TypeError)."""

    def instr(self, name: str, *args):
        row = TABLE[name]
        if len(args) != len(row.operands):
            raise TypeError(f"{name} takes {len(row.operands)} operand(s), got {len(args)}")
        vals = []
        for i, (a, t) in enumerate(zip(args, row.operand_types)):
            a = np.asarray(a)
            if a.dtype != NP_DTYPE[t]:
                raise TypeError(f"{name}: operand {i} has dtype {a.dtype}, the row takes {t} "
                                f"({NP_DTYPE[t]})")
            vals.append(a)
        out = np.asarray(row.apply(*vals))
        dt = NP_DTYPE[row.result_types[0]]
        return out if out.dtype == dt else out.astype(dt)

    def const(self, value: Any, dtype: str):
        return canonical_scalar(value, dtype)


class _Tag:
    __slots__ = ("type", "key")

    def __init__(self, t, key):
        self.type, self.key = t, key


class InstrCounter:
    """A type-checking builder that only records: values are type tags, every ``instr`` call is
    checked against the row's operand types and counted (``calls``; ``names`` in call order).
    ``unique`` counts distinct (row, operands) pairs, i.e. what remains after the graph's
    hash-consing; ``const_only`` counts calls whose operands are all constants (the graph
    would fold them). ``input(t)`` makes an input value."""

    def __init__(self):
        self.names: list[str] = []
        self._seen: dict = {}
        self._n = 0
        self.const_only = 0

    def _new(self, t, key=None):
        self._n += 1
        return _Tag(t, key if key is not None else ("v", self._n))

    def input(self, t: str):
        return self._new(t)

    def const(self, value, dtype: str):
        v = canonical_scalar(value, dtype)
        return self._new(dtype, ("c", dtype, v.tobytes()))

    def instr(self, name: str, *args):
        row = TABLE[name]
        want = row.operand_types
        if len(args) != len(want):
            raise TypeError(f"{name} takes {len(want)} operand(s), got {len(args)}")
        for i, (a, t) in enumerate(zip(args, want)):
            if not isinstance(a, _Tag) or a.type != t:
                got = a.type if isinstance(a, _Tag) else type(a).__name__
                raise TypeError(f"{name}: operand {i} is {got}, the row takes {t}")
        self.names.append(name)
        keys = [a.key for a in args]
        if keys and all(k[0] == "c" for k in keys):
            self.const_only += 1
        if "commutative" in row.flags:
            keys[:2] = sorted(keys[:2], key=repr)
        key = (name, *keys)
        tag = self._seen.get(key)
        if tag is None:
            tag = self._seen[key] = self._new(row.result_types[0])
        return tag

    @property
    def calls(self) -> int:
        return len(self.names)

    @property
    def unique(self) -> int:
        return len(self._seen)


_PREC_INFO = {"f32": (24, -126, np.float32, np.float64),
              "f64": (53, -1022, np.float64, np.longdouble)}


def ulp_error(result, reference, dtype: str) -> np.ndarray:
    """|result - reference| in units in the last place of ``dtype`` at the reference value
    (the spacing of ``dtype`` numbers at |reference|, subnormal spacing below the normal
    range). ``reference`` is the exact value in a wider type (float64 for f32, long double for
    f64). NaN against NaN counts 0, an infinite result counts 0 if the reference rounds to it;
    other NaN or infinite results, and finite results for an infinite reference, count inf
    (a finite result near the overflow threshold is measured as a number)."""
    prec, emin, narrow, wide = _PREC_INFO[dtype]
    y = np.asarray(result, narrow).astype(wide)
    ref = np.asarray(reference, wide)
    with np.errstate(all="ignore"):
        rounded = ref.astype(narrow).astype(wide)
        _, e = np.frexp(ref)
        ulp = np.ldexp(np.ones_like(ref), np.maximum(e - 1, emin) - (prec - 1))
        err = np.abs(y - ref) / ulp
    ny, nr = np.isnan(y), np.isnan(ref)
    special = ny | nr | np.isinf(y) | np.isinf(ref)
    same = (ny & nr) | (np.isinf(y) & (y == rounded))
    return np.where(special, np.where(same, 0.0, np.inf), err).astype(np.float64)


def ulp_steps(result, rounded, dtype: str) -> np.ndarray:
    """How many ``dtype`` values lie between ``result`` and ``rounded`` (the correctly rounded
    reference): CUDA's measure of its functions' error, in which the largest finite value and
    inf are one step apart. NaN against NaN counts 0, NaN against a number inf."""
    narrow, ints = (np.float32, np.int32) if dtype == "f32" else (np.float64, np.int64)
    mask = np.int64(0x7FFFFFFF) if dtype == "f32" else np.int64(0x7FFFFFFFFFFFFFFF)

    def ordered(v):
        b = np.asarray(v, narrow).view(ints).astype(np.int64)
        return np.where(b < 0, -(b & mask), b)
    got, ref = np.asarray(result, narrow), np.asarray(rounded, narrow)
    a, b = ordered(got), ordered(ref)
    same = (a >= 0) == (b >= 0)             # same side: the int64 difference is exact
    d = np.where(same, np.abs(np.where(same, a - b, 0)).astype(np.float64),
                 np.abs(a).astype(np.float64) + np.abs(b).astype(np.float64))
    nan = np.isnan(got) | np.isnan(ref)
    return np.where(nan, np.where(np.isnan(got) & np.isnan(ref), 0.0, np.inf), d)
