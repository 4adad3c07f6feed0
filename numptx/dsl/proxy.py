"""The traced value: :class:`Proxy`, and how tracing reports what it cannot do.

A :class:`Proxy` holds only ``(node, tracer)``. Its operators and the ``nx.*`` functions call the
tracer (numptx/dsl/trace.py), where the policy lives (numptx/dsl/promote.py)::

    @nx.ptx_expr
    def f(x: nx.f32):
        return x * 2.0 + np.sqrt(x)     # Proxy operators and a NumPy ufunc with a DSL counterpart

What a traced value cannot do raises :class:`TraceError` pointing at the user's line:

* ``if x > 0:`` / ``while`` / ``and`` / ``or`` / ``not`` / ``bool(x)`` -- the value is unknown
  until the kernel runs. Fix: ``nx.where(x > 0, a, b)``, ``&``/``|``/``~`` (or
  ``nx.logical_and``), or branch on Python constants (loops over ``range(3)`` unroll);
* ``len(x)``, ``for v in x``, ``x[0]`` -- a traced value is one scalar per thread;
* ``float(x)``, ``math.sqrt(x)``, NumPy functions without a DSL counterpart -- use ``nx.*``;
* mixing types (``f32 + s32``, ``s32 * 0.5``) -- cast one side: ``nx.f32(i) * x``.
"""
from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from ..errors import NumptxError
from . import types as T
from .graph import Frame, frame_source

__all__ = ["TraceError", "TraceAttributeError", "Proxy", "EagerValue", "OPS", "user_frame",
           "trace_error"]

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_INTERNAL: dict = {}          # code file name -> inside numptx's package

#: DSL operations by name, filled by numptx.dsl.ops (the one table of DSL operations)
OPS: dict = {}


def user_frame(depth: int = 2) -> Frame | None:
    """(code, line) of the innermost caller outside numptx's own files; cheap (no formatting)."""
    f = sys._getframe(depth)
    internal = _INTERNAL
    while f is not None:
        code = f.f_code
        name = code.co_filename
        inside = internal.get(name)       # by file name: a str caches its hash, a code does not
        if inside is None:
            inside = internal[name] = name.startswith(_PKG_DIR)
        if not inside:
            return (code, f.f_lineno)
        f = f.f_back
    return None


class TraceError(NumptxError):
    """A formula that cannot be traced. ``frame`` is the user's (code, line); ``fix`` says what
    to write instead. ``str()`` gives ``path:line: message``, the source line and the fix."""

    def __init__(self, message: str, *, frame: Frame | None = None, fix: str | None = None):
        self.reason, self.frame, self.fix = message, frame, fix
        super().__init__(message)

    @property
    def filename(self) -> str | None:
        return self.frame[0].co_filename if self.frame else None

    @property
    def lineno(self) -> int | None:
        return self.frame[1] if self.frame else None

    def __str__(self) -> str:
        text = self.reason
        if self.frame is not None:
            text = f"{self.frame[0].co_filename}:{self.frame[1]}: {text}"
            src = frame_source(self.frame)
            if src:
                text += f"\n    {src}"
        if self.fix:
            text += f"\n  fix: {self.fix}"
        return text


class PrecisionError(TraceError, ValueError):
    """A math mode that does not exist, or a function with no implementation in the requested
    mode for its type (``exp`` of an f64 under ``fastmath=True``); the message names the
    function, type and mode and the modes that exist."""


class TraceAttributeError(TraceError, AttributeError):
    """An attribute a traced value does not have (``x.astype``, ``x.real``); also an
    AttributeError, so ``getattr(x, name, default)`` and ``hasattr`` keep working."""


# what to write instead of a NumPy attribute a traced value lacks
_ATTR_FIX = {
    "astype": "cast with the type: nx.f64(x), nx.s32(x), ...",
    "real": "a traced value is a real scalar: use x itself",
    "imag": "a traced value is a real scalar: its imaginary part is 0",
    "item": "a traced value exists only when the kernel runs: use x itself",
    "shape": "a traced value is one scalar per thread (shape ())",
    "ndim": "a traced value is one scalar per thread (ndim 0)",
}


def trace_error(message: str, fix: str | None = None) -> TraceError:
    """A TraceError located at the innermost user frame (numptx's own frames are skipped)."""
    return TraceError(message, frame=user_frame(2), fix=fix)


_err = trace_error


class EagerValue:
    """A reference-evaluation value: a NumPy array (canonical representation) and its DType."""
    __slots__ = ("value", "dtype")

    def __init__(self, value: np.ndarray, dtype: T.DType):
        self.value, self.dtype = value, dtype


# ---- the proxy ---------------------------------------------------------------------------------
_NO_BOOL_FIX = ("select with nx.where(cond, a, b); combine conditions with & | ~ (or "
                "nx.logical_and/or/not); or branch on Python constants")


class Proxy:
    """A traced scalar: ``(node, tracer)``. Supports ``+ - * / // % **``, unary ``-``/``+``,
    ``abs``, ``round``, ``math.floor/ceil/trunc``, comparisons (giving predicates), ``& | ^ ~
    << >>`` (integers and predicates) and NumPy ufuncs that have a DSL counterpart
    (``np.sqrt(x)`` is ``nx.sqrt(x)``).

    Not supported (each raises :class:`TraceError` with the fix): ``bool()`` and therefore
    data-dependent ``if``/``while``/``and``/``or``/``not`` (use ``nx.where``, ``&``, ``|``,
    ``~``); ``len``, iteration and indexing; ``float()``/``int()`` (use ``nx.f32(x)`` casts or
    ``nx.*`` functions instead of ``math.*``).
    """
    __slots__ = ("node", "tracer")
    __array_priority__ = 1000

    def __init__(self, node: Any, tracer: Any):     # a promote.Tracer (which imports this module)
        self.node = node
        self.tracer = tracer

    @property
    def dtype(self) -> T.DType:
        """The value's DSL type."""
        return self.tracer.dtype_of(self.node)

    def __getattr__(self, name: str):
        # only called when normal lookup fails: no cost on the tracing path. Protocol probes
        # (dunders) and unset slots stay plain AttributeErrors.
        if name.startswith("__") or name in Proxy.__slots__:
            raise AttributeError(name)
        frame = user_frame(1)
        where = f" (in {frame[0].co_name})" if frame is not None else ""
        raise TraceAttributeError(
            f"a traced value has no attribute {name!r}{where}", frame=frame,
            fix=_ATTR_FIX.get(name, "a traced value supports arithmetic, comparisons, casts "
                                    "(nx.f32(x)), .dtype and the nx.* functions"))

    def __repr__(self) -> str:
        return f"<Proxy {self.dtype.name} {self.node!r}>"

    __hash__ = object.__hash__

    # -- control flow and conversions: not while tracing
    def __bool__(self):
        raise _err("a traced value has no Python truth value: data-dependent if/while/and/or/not "
                   "and bool() need the value, which exists only when the kernel runs",
                   _NO_BOOL_FIX)

    def __len__(self):
        raise _err("len() of a traced value: it is one scalar per thread, not a sequence",
                   "pass separate parameters (def f(x0, x1, x2)) or loop over range(n) with a "
                   "Python constant n")

    def __iter__(self):
        raise _err("iterating over a traced value: it is one scalar per thread, not a sequence",
                   "pass separate parameters or loop over range(n) with a Python constant n")

    def __getitem__(self, key):
        raise _err("indexing a traced value: it is one scalar per thread",
                   "pass separate parameters, or return a tuple/dict of outputs")

    def __float__(self):
        raise _err("float() of a traced value (math.* functions call it)",
                   "use the nx.* function (nx.sqrt, nx.exp, ...) or a cast such as nx.f32(x)")

    def __int__(self):
        raise _err("int() of a traced value", "use a cast such as nx.s32(x)")

    def __format__(self, spec: str) -> str:
        if not spec:                  # f"{x}", print(x): the proxy's own text, for debugging
            return repr(self)
        raise _err(f"formatting a traced value (f-string or format() with {spec!r}): it has no "
                   f"number until the kernel runs",
                   "format the values the formula returns, after the call (f(a, b) gives them)")

    __index__ = __int__
    __complex__ = __float__

    def __array__(self, *args, **kwargs):
        raise _err("a traced value cannot become a NumPy array",
                   "use nx.* functions or the NumPy ufuncs the DSL maps (np.sqrt, np.add, ...)")

    def __round__(self, ndigits=None):
        if ndigits is not None:
            raise _err("round(x, ndigits) is not supported while tracing",
                       "scale explicitly: nx.round(x * 100) / 100")
        return self.tracer.apply(OPS["round"], (self,))

    def __pow__(self, other, modulo=None):
        if modulo is not None:
            raise _err("pow(x, y, mod) is not supported", "use (x ** y) % mod")
        return self.tracer.apply(OPS["pow"], (self, other))

    def __rpow__(self, other):
        return self.tracer.apply(OPS["pow"], (other, self))

    def __divmod__(self, other):
        return (self // other, self % other)

    def __rdivmod__(self, other):
        return (other // self, other % self)

    # -- NumPy interoperability
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = getattr(ufunc, "__name__", str(ufunc))
        op = OPS.get(_UFUNC_ALIASES.get(name, name)) if method == "__call__" else None
        if op is None or kwargs or op.arity != len(inputs):
            extra = f" with {', '.join(kwargs)}=" if kwargs else ""
            how = f".{method}" if method != "__call__" else ""
            raise _err(f"NumPy function np.{name}{how}{extra} has no DSL counterpart for traced "
                       f"values", "use the nx.* operations listed in docs/dsl.md")
        return self.tracer.apply(op, inputs)

    def __array_function__(self, func, types, args, kwargs):
        name = getattr(func, "__name__", str(func))
        op = OPS.get(_FUNC_ALIASES.get(name, "")) if not kwargs else None
        if op is None or op.arity != len(args):
            raise _err(f"NumPy function np.{name} is not supported for traced values",
                       "use the nx.* operations listed in docs/dsl.md")
        return self.tracer.apply(op, args)


_UFUNC_ALIASES = {
    "add": "add", "subtract": "sub", "multiply": "mul", "true_divide": "truediv",
    "divide": "truediv", "floor_divide": "floordiv", "remainder": "mod", "mod": "mod",
    "power": "pow", "float_power": "", "negative": "neg", "positive": "pos", "absolute": "abs",
    "fabs": "abs", "rint": "round", "bitwise_and": "bitand", "bitwise_or": "bitor",
    "bitwise_xor": "bitxor", "invert": "invert", "bitwise_not": "invert", "bitwise_invert": "invert",
    "left_shift": "lshift", "right_shift": "rshift", "equal": "eq", "not_equal": "ne",
    "less": "lt", "less_equal": "le", "greater": "gt", "greater_equal": "ge",
    "reciprocal": "rcp", "arctan": "arctan", "atan": "arctan",
}
_FUNC_ALIASES = {"where": "where", "clip": "clip", "round": "round", "around": "round",
                 "fix": "trunc"}
