"""A formula's signature, read from its Python function: parameter types from annotations
(``nx.f32``..., NumPy types, strings such as ``"nx.f32"``; ``float``/``int``/``bool`` as NumPy
reads them), defaults, and the output types a return annotation declares. What a fresh
:class:`~numptx.dsl.expr.PtxExpr` needs, which caches it per function.

>>> import numptx as nx
>>> def dist(x: nx.f32, y: "nx.f64" = 2.0) -> nx.f32: return x
>>> defaults, types, positional, ret, outs, _ = analyse(dist, dist.__code__, (2.0,),
...                                                     dist.__annotations__)
>>> defaults, {k: t.name for k, t in types.items()}, positional, [t.name for t in outs]
({'y': 2.0}, {'x': 'f32', 'y': 'f64'}, 1, ['f32'])
"""
from __future__ import annotations

import keyword
import typing
from collections.abc import Callable
from typing import Any

import numpy as np

from . import types as T
from .trace import TraceError

__all__ = ["analyse", "def_frame", "make_function"]

_BAD = object()          # a string annotation that does not evaluate

_PYTHON_TYPES = {"float": float, "int": int, "bool": bool}


def _parse(a: Any, glb: dict | None) -> T.DType | None:
    """The DType of a parameter or return annotation. The Python types mean what NumPy makes of
    them (``float`` f64, ``int`` s64, ``bool`` pred) whether the annotation is the type itself or
    the string ``"float"`` that ``from __future__ import annotations`` leaves (which would
    otherwise read as the CUDA C alias ``float`` = f32)."""
    if isinstance(a, str):
        name = a.strip()
        if len(name) >= 2 and name[0] == name[-1] and name[0] in "'\"":
            name = name[1:-1].strip()           # x: "float" under postponed annotations
        if name in _PYTHON_TYPES:
            a = (glb or {}).get(name, _PYTHON_TYPES[name])     # a module may rebind the name
    return T.parse_annotation(a, glb)


def analyse(fn, code, defaults: tuple, ann: dict) -> tuple:
    """(defaults by name, parameter types, positional count, return annotation, the output
    types it declares or None, an empty dict for the bindings to sites) of formula ``fn``
    (its ``code``, positional ``defaults`` and annotations ``ann``): what a fresh ``PtxExpr``
    of ``fn`` needs, cached per function while its code, defaults and annotations stay the
    same. A parameter or return annotation that is no numptx type is a TraceError at the
    ``def``."""
    names = code.co_varnames[:code.co_argcount]
    defaults = dict(zip(names[len(names) - len(defaults):], defaults))
    # a parameter whose default is not a number (a function, a flag object...) is a plain
    # Python argument: not traced, not an input; the formula sees its default
    names = tuple(n for n in names if n not in defaults
                  or isinstance(defaults[n], (bool, int, float, np.generic)))
    if code.co_flags & 0x0C:                  # *args / **kwargs
        raise TraceError("ptx_expr formulas take named parameters (no *args/**kwargs)",
                         frame=def_frame(fn), fix="list the parameters: def f(x, y)")
    # keyword-only parameters are never passed: one without a default could not be called
    kwonly = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    kwdefaults = getattr(fn, "__kwdefaults__", None) or {}
    missing = [n for n in kwonly if n not in kwdefaults]
    if missing:
        raise TraceError(f"keyword-only parameter {missing[0]!r} has no default: ptx_expr "
                         f"passes the inputs by position", frame=def_frame(fn),
                         fix="make it an ordinary parameter (def f(x, y)) or give it a default")
    glb = getattr(fn, "__globals__", None)
    types: dict[str, T.DType] = {}
    for n in names:
        a = ann.get(n)
        t = T.f32 if a is None else _parse(a, glb)
        if t is None:
            raise TraceError(f"parameter {n!r}: annotation {a!r} is not a numptx type",
                             frame=def_frame(fn),
                             fix="annotate with nx.f16, nx.bf16, nx.f32, nx.f64, nx.s32, "
                                 "nx.u32, nx.s64, nx.u64 (or leave it out for f32)")
        types[n] = t
    ret = ann.get("return")
    # the last item: bindings of this signature's expressions to sites, (id(site), outputs)
    # -> (site, rename, order), shared by every fresh expression of the function
    return (defaults, types, sum(1 for n in names if n not in defaults), ret,
            _return_types(ret, glb, fn), {})


def _return_types(r: Any, glb: dict | None, fn: Any = None) -> list | None:
    """The DTypes a return annotation declares (None: no annotation, or one that names no
    numptx type, such as ``dict[str, nx.f32]``, ``typing.Any`` or ``float``). A string that
    names nothing, or a ``tuple[...]`` mixing numptx types with unknown names, is an error."""
    if r is None:
        return None
    shown = r
    if isinstance(r, str):
        t = _parse(r, glb)
        if t is not None:
            return [t]
        try:
            r = eval(r, glb or {})   # noqa: S307 - user annotation
        except Exception:
            r = _BAD
        if isinstance(r, str):       # a quoted string under `from __future__ import annotations`
            shown = r
            t = _parse(r, glb)
            if t is not None:
                return [t]
            r = _BAD
    t = T.as_dtype(r) if not isinstance(r, (tuple, list, str)) and r is not _BAD else None
    if t is not None:
        return [t]
    origin = typing.get_origin(r)
    if origin is tuple or isinstance(r, (tuple, list)):
        args = tuple(typing.get_args(r) if origin is tuple else r)
        if not args:                                        # bare typing.Tuple
            return None
        open_ = len(args) == 2 and args[1] is Ellipsis      # tuple[nx.f32, ...]: any count
        elems = [a.__forward_arg__ if isinstance(a, typing.ForwardRef) else a   # Tuple["nx.f32"]
                 for a in (args[:1] if open_ else args)]
        ts = [_parse(a, glb) for a in elems]
        if all(t is not None for t in ts):
            return None if open_ else ts
        if not any(t is not None or isinstance(a, str) for a, t in zip(elems, ts)):
            return None           # tuple[float, float]: no numptx type named, ignored as ever
        shown = f"{shown!r} (element {elems[ts.index(None)]!r})"
    elif r is not _BAD:
        return None               # typing constructs and Python types are not numptx's to check
    else:
        shown = repr(shown)
    raise TraceError(f"return annotation {shown} is not a numptx type",
                     frame=def_frame(fn) if fn is not None else None,
                     fix="annotate with nx.f32, nx.s32, ... (a tuple[...] of them for several "
                         "outputs) or leave it out")



def def_frame(fn) -> tuple:
    """(code, first line) of a formula: where its errors point."""
    code = fn.__code__
    return (code, code.co_firstlineno)


def make_function(name: str, params: dict, impl: Callable, *, defaults: dict | None = None,
                  like: Callable | None = None) -> Callable:
    """A Python function ``name(p1, p2, ...)`` returning ``impl(p1, p2, ...)``, with ``params``
    (name -> type) as its annotations and ``defaults``: a formula whose signature
    :class:`~numptx.dsl.expr.PtxExpr` reads, built from names rather than source (the
    derivatives of ``nx.grad``, a discovered formula of ``numptx.search``). Its code carries
    ``like``'s file and first line, so messages about it point at the user's formula. Names
    must be identifiers and not keywords (a ``ValueError`` otherwise): nothing but the names
    is compiled::

        f = make_function("area", {"w": nx.f32, "h": nx.f32}, lambda w, h: w * h)
        nx.ptx_expr(f)
    """
    names = list(params)
    for n in [name, *names]:
        if not (isinstance(n, str) and n.isidentifier() and not keyword.iskeyword(n)):
            raise ValueError(f"make_function: {n!r} is not a usable Python identifier")
    call = "_impl"
    while call in names or call == name:
        call += "_"
    src = f"def {name}({', '.join(names)}):\n    return {call}({', '.join(names)})\n"
    ns: dict = {call: impl}
    where = "<numptx.dsl make_function>" if like is None else like.__code__.co_filename
    exec(compile(src, where, "exec"), ns)      # noqa: S102 - identifiers only, checked above
    fn = ns[name]
    if like is not None:
        fn.__code__ = fn.__code__.replace(co_firstlineno=like.__code__.co_firstlineno)
    fn.__annotations__ = dict(params)
    defaults = defaults or {}
    fn.__defaults__ = tuple(defaults[n] for n in names if n in defaults) or None
    fn.__doc__ = (f"{name}: generated by numptx.dsl" + (f" from {like.__qualname__}"
                                                        if like is not None else ""))
    return fn
