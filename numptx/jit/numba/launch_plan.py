"""What a GPU launch of a numba variant keeps (:mod:`numptx.jit.numba.launch`): a :class:`GpuPlan`
per variant and context, the argument :func:`typers` it types later launches with (numba's
``typeof`` where a Python type, an int's range or a ``_numba_type_`` property fixes the answer,
without asking numba each time), and :class:`LoadedLibrary`, the stand-in code library that
hands numba's launcher the variant's loaded function.

>>> int_type = typers(Dispatcher(), [5])[0]         # doctest: +SKIP
>>> int_type(7) == int_type(2**31 - 1), int_type(2**40)    # doctest: +SKIP
(True, int64)
"""
from __future__ import annotations

import functools

import numpy as np

from .numba_compat import (core_stream_converter, declared_numba_type, dispatcher_class,
                           has_numba_type_property, typeof_impl)

__all__ = ["GpuPlan", "LoadedLibrary", "typers"]

_2_31, _2_63 = 1 << 31, 1 << 63


class LoadedLibrary:
    """Stands in for a numba code library in a copy of its kernel: hands out our function."""

    def __init__(self, cufunc, original):
        self._cufunc, self._original = cufunc, original

    def get_cufunc(self):
        return self._cufunc

    def __getattr__(self, name):
        return getattr(self._original, name)


class GpuPlan:
    """What a launch resolved for one KernelVariant in the context ``hctx``: per tuple of
    Python argument types, fns giving each argument's numba type (:func:`typers`); per numba
    signature, the residency key and entry of the loaded kernel (valid while
    :func:`~numptx.jit.templates.residency.loaded` returns that entry); per plain (grid, block), numba's
    normalized dims."""
    __slots__ = ("hctx", "disp", "typers", "entries", "dims", "stream0", "to_stream")

    def __init__(self, hctx: int, disp):
        to_core_stream = core_stream_converter()
        self.hctx, self.disp = hctx, disp
        self.typers: dict = {}
        self.entries: dict = {}         # ids of the numba types -> (types, key, entry)
        self.dims: dict = {}
        self.stream0, self.to_stream = to_core_stream(0), to_core_stream


def typers(disp, args) -> tuple:
    """Per argument, fn(value) -> ``disp.typeof_pyval(value)``, cheaper where numba's typeof
    is fixed by the Python type (bool, float, complex, None, NumPy number scalars), by the
    range of an int, or read from a ``_numba_type_`` property (numba's device arrays) before
    anything else; other values are typed by numba as they are."""
    generic = disp.typeof_pyval
    if type(disp).typeof_pyval is not dispatcher_class().typeof_pyval:
        return (generic,) * len(args)
    typeof = typeof_impl()
    fallback = typeof.dispatch(object)
    out = []
    for a in args:
        t = type(a)
        if t is int:
            out.append(_int_typer(generic))
        elif t in _FIXED_TYPES:
            out.append(functools.partial(_fixed, generic(a)))
        elif has_numba_type_property(t) and typeof.dispatch(t) is fallback:
            out.append(functools.partial(_numba_type, generic))
        else:
            out.append(generic)
    return tuple(out)


_FIXED_TYPES = frozenset({bool, float, complex, type(None)}) | frozenset(
    t for t in set(np.sctypeDict.values())
    if issubclass(t, (np.number, np.bool_)) and not issubclass(t, np.timedelta64))   # units vary


def _fixed(ty, value):
    return ty


def _int_typer(generic):
    small, big = generic(0), generic(1 << 40)

    def int_type(v):            # numba: under 32 bits intp, under 64 int64, else its own rule
        if -_2_31 < v < _2_31:
            return small
        if -_2_63 < v < _2_63:
            return big
        return generic(v)
    return int_type


def _numba_type(generic, value):
    ty = declared_numba_type(value)     # what numba's typeof reads first
    return ty if ty is not None else generic(value)
