"""The checks of regression data (X, y) that the fitness kernels and the search share.

    from numptx.data import check_xy, finite, to_float
    X, y = check_xy(X, y, where="regress", error=SearchError)   # (n, d) and (n,), real numbers
    finite("X", X, where="regress", error=SearchError)           # no NaN or inf (index named)
    X = to_float("X", X, np.float32, where="regress", error=SearchError, hint="rescale it")

Each check raises the caller's :class:`~numptx.errors.NumptxError` subclass (``error``) with a
message that starts with ``where`` and names the argument at fault, its shape or the index of
the first bad value, and the fix.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import NumptxError

__all__ = ["check_xy", "finite", "to_float"]


def check_xy(X: Any, y: Any, *, where: str,
             error: type[NumptxError] = NumptxError) -> tuple[np.ndarray, np.ndarray]:
    """``X`` as an (n, d) array (a 1-D ``X`` is one column) and ``y`` as (n,), both of real
    numbers (bool, int or float; not converted yet); ``error`` otherwise.

    >>> X, y = check_xy([1.0, 2.0, 3.0], [2, 4, 6], where="fit")
    >>> X.shape, y.shape
    ((3, 1), (3,))
    """
    try:
        X, y = np.asarray(X), np.asarray(y)
    except Exception as e:   # noqa: BLE001 - ragged lists and the like
        raise error(f"{where}: X and y must be numeric arrays ({e})") from None
    for what, a in (("X", X), ("y", y)):
        if a.dtype.kind not in "biuf":
            raise error(f"{where}: {what} holds {a.dtype} values; it takes real numbers")
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise error(f"{where}: X must be an (n samples, d columns) array with n, d >= 1; got "
                    f"shape {X.shape}")
    if y.shape != (X.shape[0],):
        raise error(f"{where}: y has shape {y.shape}; X has {X.shape[0]} samples, so y must "
                    f"have shape ({X.shape[0]},): one target per sample")
    return X, y


def _first(bad: np.ndarray) -> str:
    return f"the first at index {tuple(int(i) for i in np.argwhere(bad)[0])}"


def finite(what: str, a: np.ndarray, *, where: str, error: type[NumptxError] = NumptxError,
           why: str = "") -> None:
    """Refuse NaN and infinity in ``a`` (the argument ``what``), naming how many and the
    first's index; ``why`` says what they would do.

    >>> finite("y", np.array([1.0, np.nan]), where="fit")     # doctest: +ELLIPSIS
    Traceback (most recent call last):
    numptx.errors.NumptxError: fit: y holds 1 non-finite value(s) (NaN or inf; the first at ...
    """
    if a.dtype.kind != "f":
        return
    bad = ~np.isfinite(a)
    if bad.any():
        raise error(f"{where}: {what} holds {int(bad.sum())} non-finite value(s) (NaN or inf; "
                    f"{_first(bad)}){': ' + why if why else ''}; drop or impute them first")


def to_float(what: str, a: np.ndarray, dtype: Any, *, where: str,
             error: type[NumptxError] = NumptxError, hint: str = "rescale the data") -> np.ndarray:
    """``a`` (finite: see :func:`finite`) as a C-contiguous array of the float ``dtype``;
    values past its range are refused, naming how many, the first's index and the largest,
    and ``hint``.

    >>> to_float("X", np.array([1e39]), np.float32, where="fit")     # doctest: +ELLIPSIS
    Traceback (most recent call last):
    numptx.errors.NumptxError: fit: X holds 1 value(s) that overflow f32, past the f32 range ...
    """
    dt = np.dtype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.ascontiguousarray(a, dt)
    over = ~np.isfinite(out)
    if over.any():
        big = float(np.max(np.abs(np.asarray(a)[over].astype(np.float64))))
        name = f"f{8 * dt.itemsize}"
        raise error(f"{where}: {what} holds {int(over.sum())} value(s) that overflow {name}, "
                    f"past the {name} range ({_first(over)}, largest |value| {big:.3g}; the "
                    f"{name} maximum is {float(np.finfo(dt).max):.3g}): {hint}")
    return out
