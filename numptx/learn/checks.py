"""Input checks of :mod:`numptx.learn`: feature matrices, targets and constructor arguments.

Each check returns the value in the form the models compute with (a C-contiguous float64
array, an ``int``, a ``float``) or raises :class:`~numptx.learn.LearnError` naming the
argument, where it is bad (row, column), and the fix::

    >>> import numpy as np
    >>> from numptx.learn.checks import matrix
    >>> matrix([[1, 2], [3, 4]], "F").dtype
    dtype('float64')
    >>> matrix([[1, 2], [3, float("nan")]], "F")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    numptx.learn.errors.LearnError: F: row 1, column 1 is nan: features must be finite ...
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from .errors import LearnError

__all__ = ["matrix", "vector", "target", "rank_order", "integer", "real", "choice"]


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def matrix(F: Any, name: str = "F", n_features: int | None = None, *,
           float32_ok: bool = False) -> np.ndarray:
    """``F`` as a 2-D float64 array (rows, features), every value finite; ``n_features`` (when
    given) is the column count a fitted model expects; ``float32_ok``: a float32 array stays
    float32 (a model that computes in float32 saves the conversion)."""
    try:
        arr = np.asarray(F)
    except Exception as e:  # noqa: BLE001 (ragged input: re-raised as a LearnError)
        raise LearnError(f"{name}: not an array ({e}); give a 2-D array (rows, features)") \
            from None
    if arr.ndim != 2:
        raise LearnError(f"{name}: expected a 2-D array (rows, features), got {arr.ndim}-D "
                         f"of shape {arr.shape}; reshape a single row with F[None, :]")
    if arr.dtype.kind not in "biuf":
        raise LearnError(f"{name}: dtype {arr.dtype} is not a real number type; give float32 "
                         "or float64 features")
    keep = float32_ok and arr.dtype == np.float32
    arr = np.ascontiguousarray(arr, dtype=np.float32 if keep else np.float64)
    if n_features is not None and arr.shape[1] != n_features:
        raise LearnError(f"{name}: {arr.shape[1]} columns, but the model was fitted with "
                         f"{n_features} features; give the same features it learned from "
                         "(or a new model)")
    finite = np.isfinite(arr)
    if not finite.all():
        row, col = (int(i) for i in np.argwhere(~finite)[0])
        raise LearnError(f"{name}: row {row}, column {col} is {arr[row, col]}: features must "
                         "be finite (drop or impute that row)")
    return arr


def vector(v: Any, name: str, what: str = "one value a row of F") -> np.ndarray:
    """``v`` as a 1-D float64 array of finite values."""
    try:
        arr = np.asarray(v)
    except Exception as e:  # noqa: BLE001 (ragged input: re-raised as a LearnError)
        raise LearnError(f"{name}: not an array ({e}); give a 1-D array, {what}") from None
    if arr.ndim != 1:
        raise LearnError(f"{name}: expected a 1-D array ({what}), got {arr.ndim}-D of shape "
                         f"{arr.shape}")
    if arr.dtype.kind not in "biuf":
        raise LearnError(f"{name}: dtype {arr.dtype} is not a real number type")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    finite = np.isfinite(arr)
    if not finite.all():
        row = int(np.argmin(finite))
        raise LearnError(f"{name}: row {row} is {arr[row]}: values must be finite (give "
                         "failed candidates a large finite loss, or leave them out)")
    return arr


def target(y: Any, rows: int, name: str = "y") -> np.ndarray:
    """``y`` as a 1-D float64 array of ``rows`` finite values (one a row of ``F``)."""
    arr = vector(y, name)
    if len(arr) != rows:
        raise LearnError(f"{name}: {len(arr)} values, but F has {rows} rows; give one "
                         "target a row")
    return arr


def rank_order(pred: np.ndarray) -> np.ndarray:
    """Row indices of ``pred``, lowest first, ties in index order (a stable sort), int64."""
    return np.argsort(pred, kind="stable").astype(np.int64, copy=False)


def integer(value: Any, name: str, low: int, high: int | None = None) -> int:
    """``value`` as an ``int`` in ``[low, high]`` (``high=None``: no upper bound)."""
    span = f"[{low}, {high}]" if high is not None else f">= {low}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise LearnError(f"{name}={_brief(value)}: expected an integer {span}")
    v = int(value)
    if v < low or (high is not None and v > high):
        raise LearnError(f"{name}={v}: out of range; expected an integer {span}")
    return v


def real(value: Any, name: str, low: float, high: float = math.inf, *,
         low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a finite ``float`` in the interval from ``low`` to ``high`` (each end
    closed unless ``*_open``)."""
    span = ("(" if low_open else "[") + f"{low:g}, {high:g}" + (")" if high_open else "]")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise LearnError(f"{name}={_brief(value)}: expected a real number in {span}")
    v = float(value)
    bad = (not math.isfinite(v) or v < low or v > high or (low_open and v == low)
           or (high_open and v == high))
    if bad:
        raise LearnError(f"{name}={v!r}: out of range; expected a finite number in {span}")
    return v


def choice(value: Any, name: str, options: tuple[str, ...]) -> str:
    """``value``, one of the strings ``options``."""
    if not isinstance(value, str) or value not in options:
        raise LearnError(f"{name}={_brief(value)}: expected one of "
                         + ", ".join(repr(o) for o in options))
    return value
