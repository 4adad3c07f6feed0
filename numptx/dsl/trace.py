"""Tracing Python formulas with proxy values.

A :class:`Proxy` holds only ``(node, tracer)``. Its operators and the ``nx.*`` functions call
``tracer.apply(op, args)``, where the policy lives: type promotion, literals, errors. Two tracers
share that policy:

* :class:`GraphTracer` builds a :class:`~numptx.dsl.graph.Graph` of table instructions (nodes
  are graph nodes);
* :class:`EagerTracer` evaluates each DSL operation at once with NumPy's own function on the
  declared dtypes (nodes are :class:`EagerValue`) -- the reference evaluation.

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
from ..instructions import TABLE
from .graph import (_ROWS_VERSION, ON_TABLE_CHANGE, Frame, Graph, Node, frame_source,
                    row_info)

__all__ = ["TraceError", "TraceAttributeError", "Proxy", "Tracer", "GraphTracer",
           "FramedGraphTracer", "EagerTracer",
           "EagerValue", "fused_binary", "fused_unary", "fused_ternary",
           "user_frame", "OPS"]

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_INTERNAL: dict = {}          # code file name -> inside numptx's package

# DSL operations by name, filled by numptx.dsl.ops (the one table of DSL operations)
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


def _err(message: str, fix: str | None = None) -> TraceError:
    """A TraceError located at the innermost user frame (numptx's own frames are skipped)."""
    return TraceError(message, frame=user_frame(2), fix=fix)


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

    def __init__(self, node: Any, tracer: Tracer):
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

_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "truediv",
           "floordiv": "floordiv", "mod": "mod", "and": "bitand", "or": "bitor", "xor": "bitxor",
           "lshift": "lshift", "rshift": "rshift"}
_COMPARE = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
_UNARY = {"neg": "neg", "pos": "pos", "abs": "abs", "invert": "invert", "floor": "floor",
          "ceil": "ceil", "trunc": "trunc"}


_new = object.__new__
_FUSED: list = []          # per fused operation: ({type: row info}, same with fastmath)


def _fused_info(op_name: str, cache: dict, t: str, fm: bool, arity: int):
    """The row one application of ``op_name`` on ``t`` values is, when the fast path can build
    it directly (one plain row taking ``t`` operands), else False; cached in ``cache``."""
    if _ROWS_VERSION[0] != (TABLE.uid, TABLE.version):
        row_info("add.rn.f32")                   # a new table: refreshes every cache
    op = OPS[op_name]
    fast = op.fast_types
    info = False
    if fast is not None and t in fast:
        row = op.rows.get((t, fm))
        if row is None:
            row = op.single_row(t, fm)
        if row:
            i = row_info(row)
            if arity == 2 and i.plain and i.op0 == t and i.op1 == t:
                info = (row, i.result, i.commutative, i.word)
            elif arity == 1 and i.plain1 and i.op0 == t:
                info = (row, i.result, False, i.word)
    cache[t] = info
    return info


def _new_fused_caches() -> tuple[dict, dict]:
    caches = ({}, {})
    _FUSED.append(caches)
    return caches


def _clear_fused() -> None:
    for a, b in _FUSED:
        a.clear()
        b.clear()


ON_TABLE_CHANGE.append(_clear_fused)


def fused_binary(op_name: str, swap: bool = False, eager: Any = None):
    """``f(a, b)`` applying the DSL operation ``op_name`` (``swap``: to ``(b, a)``): the graph
    tracer's common case (one row on two values of one type, or a value and a Python number)
    in one frame, with no source position recorded (:meth:`Graph.format` re-traces to show
    them); everything else through ``tracer.binary`` (same frame depth); ``eager(args)``
    when neither is traced."""
    plain, fast = _new_fused_caches()

    def f(a, b):
        if swap:
            a, b = b, a
        if a.__class__ is Proxy:
            tr = a.tracer
            if tr.__class__ is not GraphTracer:
                return tr.binary(OPS[op_name], a, b)
            na = a.node
            t = na.dtype
            cb = b.__class__
            if cb is Proxy:
                nb = b.node if b.tracer is tr else None
            elif cb is float or cb is int:
                nb = tr._fast_literal(b, t)
            else:
                nb = None
        elif b.__class__ is Proxy:
            tr = b.tracer
            if tr.__class__ is not GraphTracer:
                return tr.binary(OPS[op_name], a, b)
            nb = b.node
            t = nb.dtype
            ca = a.__class__
            na = tr._fast_literal(a, t) if ca is float or ca is int else None
        else:
            return eager((a, b))
        if na is not None and nb is not None and na.dtype == t and nb.dtype == t and \
                (na.op != "const" or nb.op != "const"):
            fm = tr.fastmath
            cache = fast if fm else plain
            info = cache.get(t)
            if info is None:
                info = _fused_info(op_name, cache, t, fm, 2)
            if info:
                row, result, commutative, word = info
                ia, ib = na.index, nb.index
                key = (row, nb, na) if commutative and ia > ib else (row, na, nb)
                cse = tr.cse
                node = cse.get(key)
                if node is None:
                    nodes = tr.nodes
                    node = Node("instr", row, (na, nb), result, len(nodes), None)
                    na.uses += 1
                    nb.uses += 1
                    tr.rec += (word, ia, ib)
                    nodes.append(node)
                    cse[key] = node
                p = _new(Proxy)          # Proxy(node, tr) without the __init__ call
                p.node, p.tracer = node, tr
                return p
        return tr.binary(OPS[op_name], a, b)
    return f


def fused_unary(op_name: str, eager: Any = None):
    """``f(a)``: the unary counterpart of :func:`fused_binary`."""
    plain, fast = _new_fused_caches()

    def f(a):
        if a.__class__ is not Proxy:
            return eager((a,))
        tr = a.tracer
        if tr.__class__ is GraphTracer:
            na = a.node
            if na.op != "const":
                t = na.dtype
                fm = tr.fastmath
                cache = fast if fm else plain
                info = cache.get(t)
                if info is None:
                    info = _fused_info(op_name, cache, t, fm, 1)
                if info:
                    row = info[0]
                    key = (row, na)
                    cse = tr.cse
                    node = cse.get(key)
                    if node is None:
                        nodes = tr.nodes
                        node = Node("instr", row, (na,), info[1], len(nodes), None)
                        na.uses += 1
                        tr.rec += (info[3], na.index)
                        nodes.append(node)
                        cse[key] = node
                    p = _new(Proxy)          # Proxy(node, tr) without the __init__ call
                    p.node, p.tracer = node, tr
                    return p
        return tr.unary(OPS[op_name], a)
    return f


def _ternary_info(op_name: str, cache: dict, t: str, fm: bool):
    """(row, result type, commutative, word, operand order, simplifier) when one application
    of the 3-operand ``op_name`` on ``t`` values (``where``: a predicate and two ``t``) is one
    non-volatile row on its operands in some order; else False. Cached in ``cache``."""
    if _ROWS_VERSION[0] != (TABLE.uid, TABLE.version):
        row_info("add.rn.f32")
    op = OPS[op_name]
    info = False
    types = ("pred", t, t) if op.kind == "where" else (t, t, t)
    g = Graph()
    xs = [g.input(f"a{i}", ty) for i, ty in enumerate(types)]
    try:
        r = op.lower(g, t, fm, *xs)
    except Exception:       # noqa: BLE001 - no single row: the general path reports errors
        r = None
    if r is not None and r.op == "instr" and len(g.nodes) == 4 and sorted(
            map(id, r.args)) == sorted(map(id, xs)):
        i = row_info(r.target)
        if not i.volatile:
            info = (r.target, i.result, i.commutative, i.word,
                    tuple(xs.index(a) for a in r.args), i.simplify)
    cache[t] = info
    return info


def fused_ternary(op_name: str, eager: Any = None):
    """``f(a, b, c)``: :func:`fused_binary` for 3-operand operations (fma, where): traced values
    of one type (``where``: a traced predicate first) and Python numbers."""
    plain, fast = _new_fused_caches()
    is_where = OPS[op_name].kind == "where"

    def f(*args):
        if len(args) != 3:
            for v in args:
                if v.__class__ is Proxy:
                    return v.tracer.apply(OPS[op_name], args)     # reports the arity
            return eager(args)
        a, b, c = args
        tr = a.tracer if a.__class__ is Proxy else b.tracer if b.__class__ is Proxy else \
            c.tracer if c.__class__ is Proxy else None
        if tr is None:
            return eager(args)
        if tr.__class__ is GraphTracer:
            vals = (b, c) if is_where else (a, b, c)
            t = None
            for v in vals:
                if v.__class__ is Proxy:
                    t = v.node.dtype
                    break
            ok = t is not None and (not is_where or (
                a.__class__ is Proxy and a.tracer is tr and a.node.dtype == "pred"))
            nodes = [a.node] if is_where and ok else []
            if ok:
                for v in vals:
                    if v.__class__ is Proxy:
                        n = v.node if v.tracer is tr and v.node.dtype == t else None
                    else:
                        c_ = v.__class__
                        n = tr._fast_literal(v, t) if c_ is float or c_ is int else None
                    if n is None:
                        ok = False
                        break
                    nodes.append(n)
            if ok and (nodes[0].op != "const" or nodes[1].op != "const" or
                       nodes[2].op != "const"):
                fm = tr.fastmath
                cache = fast if fm else plain
                info = cache.get(t)
                if info is None:
                    info = _ternary_info(op_name, cache, t, fm)
                if info:
                    row, result, commutative, word, perm, simplify = info
                    args = (nodes[perm[0]], nodes[perm[1]], nodes[perm[2]])
                    if simplify is not None:
                        node = simplify(tr.graph, row, args)
                        if node is not None:
                            p = _new(Proxy)          # Proxy(node, tr) without the __init__ call
                            p.node, p.tracer = node, tr
                            return p
                    x, y, z = args
                    key = (row, y, x, z) if commutative and x.index > y.index else \
                        (row, x, y, z)
                    cse = tr.cse
                    node = cse.get(key)
                    if node is None:
                        nodes_ = tr.nodes
                        node = Node("instr", row, args, result, len(nodes_), None)
                        x.uses += 1
                        y.uses += 1
                        z.uses += 1
                        tr.rec += (word, x.index, y.index, z.index)
                        nodes_.append(node)
                        cse[key] = node
                    p = _new(Proxy)          # Proxy(node, tr) without the __init__ call
                    p.node, p.tracer = node, tr
                    return p
        return tr.apply(OPS[op_name], args)
    return f


def _install_operators() -> None:
    for dunder, op_name in _BINARY.items():
        fwd, rev = fused_binary(op_name), fused_binary(op_name, True)
        fwd.__name__, rev.__name__ = f"__{dunder}__", f"__r{dunder}__"
        setattr(Proxy, f"__{dunder}__", fwd)
        setattr(Proxy, f"__r{dunder}__", rev)
    for dunder, op_name in _COMPARE.items():
        fwd = fused_binary(op_name)
        fwd.__name__ = f"__{dunder}__"
        setattr(Proxy, f"__{dunder}__", fwd)
    for dunder, op_name in _UNARY.items():
        un = fused_unary(op_name)
        un.__name__ = f"__{dunder}__"
        setattr(Proxy, f"__{dunder}__", un)


_install_operators()


# ---- the tracers: promotion policy -----------------------------------------------------------
_WEAK = (bool, int, float)
_WEAK_CLASSES = frozenset(_WEAK)
_CHECKED = frozenset({"bits", "shift", "cmp"})
_FAST_TYPES = frozenset({"f16", "bf16", "f32", "f64", "s32", "u32", "s64", "u64"})
_FLOAT_TYPES = frozenset({"f16", "bf16", "f32", "f64"})
_WHERE_TYPES = _FAST_TYPES | {"pred"}
FAST_TYPES = {"num": _FAST_TYPES, "cmp": _FAST_TYPES, "float": _FLOAT_TYPES,
              "test": _FAST_TYPES}


def _describe(v: Any) -> str:
    if isinstance(v, Proxy):
        return f"a traced {v.dtype.name} value"
    if isinstance(v, np.generic):
        return f"a NumPy {v.dtype} scalar"
    return f"a Python {type(v).__name__} ({v!r})"


class Tracer:
    """The promotion policy shared by both tracers (docs/dsl.md, "Types and promotion"):

    * operands of one operation must have one type; a Python number adopts the type of the
      traced operand (NumPy 2 / NEP 50: ``x * 2.0`` stays f32 for an f32 ``x``; an int literal
      out of range raises); NumPy scalars are typed (``np.float64(2) * x`` mixes types);
    * mixed types raise ``mixed types need a cast`` where NumPy would promote (``f32 + s32``,
      ``f32 + f64``, ``s32 * 0.5``) -- write the cast;
    * float functions of integers compute in f64 as in NumPy (``nx.sqrt(i)``, ``i / j``);
    * predicates are not numbers: ``p + 1`` raises (use ``nx.where(p, 1, 0)`` or ``nx.s32(p)``).
    """
    fastmath: bool = False

    def dtype_of(self, node: Any) -> T.DType:
        raise NotImplementedError

    def literal(self, value: Any, dtype: T.DType) -> Any:
        """A node for a Python/NumPy number converted to ``dtype``."""
        raise NotImplementedError

    def run(self, op: Any, t: T.DType, nodes: tuple) -> Any:
        """Evaluate ``op`` on nodes all of type ``t``; returns the result node."""
        raise NotImplementedError

    def convert(self, node: Any, src: T.DType, dst: T.DType) -> Any:
        """Cast a node from ``src`` to ``dst`` (the semantics of ``nx.<dst>(value)``)."""
        raise NotImplementedError

    def begin(self) -> None:
        """Called at the start of each DSL operation (the graph tracer records the frame)."""

    def binary(self, op: Any, a: Any, b: Any) -> Any:
        """``apply(op, (a, b))``; the graph tracer has a fast path for the common cases."""
        return self.apply(op, (a, b))

    def unary(self, op: Any, a: Any) -> Any:
        return self.apply(op, (a,))

    # --------------------------------------------------------------------------------------------
    def strong_type(self, v: Any) -> T.DType | None:
        if isinstance(v, Proxy):
            if v.tracer is not self:
                raise _err("a traced value from another trace (or a reference evaluation) was "
                           "used here", "do not keep traced values across calls")
            return self.dtype_of(v.node)
        if isinstance(v, np.generic):            # before _WEAK: np.float64 is a float
            t = T.as_dtype(v.dtype)
            if t is not None:
                return t
        elif isinstance(v, _WEAK):
            return None
        if isinstance(v, np.ndarray):
            raise _err("a NumPy array inside a traced formula (a closure or default?)",
                       "pass it as a parameter, or use a Python/NumPy scalar constant")
        raise _err(f"unsupported operand {_describe(v)} in a traced formula",
                   "use traced values, Python numbers or NumPy scalars")

    def to_node(self, v: Any, t: T.DType) -> Any:
        """Operand ``v`` (already type-checked) as a node of type ``t``."""
        if isinstance(v, Proxy):
            return v.node
        if isinstance(v, np.generic):
            v = v.item() if t.name != "bf16" else float(v)
        return self.literal(v, t)

    def check_weak(self, op: Any, v: Any, t: T.DType) -> None:
        if isinstance(v, bool):
            if t.kind == "p" or t.kind in "su" or t.kind == "f":
                return
        elif isinstance(v, int):
            if t.kind in "su":
                info = np.iinfo(t.np)
                if not info.min <= v <= info.max:
                    raise _err(f"{op.name}: the Python int {v} is out of range for {t.name} "
                               f"(NumPy 2 raises OverflowError too)",
                               f"use a value in [{info.min}, {info.max}] or cast to a wider "
                               f"type first")
                return
            if t.kind == "f":
                return
        elif isinstance(v, float):
            if t.kind == "f":
                return
            if t.kind in "su":
                raise _err(f"mixed types need a cast: {op.name} of a {t.name} value and a "
                           f"Python float ({v!r}); NumPy would compute in f64",
                           f"cast the integer: nx.f32(x) or nx.f64(x)")
        if t.kind == "p":
            raise _err(f"{op.name}: a predicate is not a number ({_describe(v)} with a pred)",
                       "turn it into a number with nx.where(p, 1.0, 0.0) or nx.s32(p)")

    def unify(self, op: Any, vals: tuple) -> T.DType | None:
        """The common type of ``vals`` (None when all are Python numbers)."""
        t = None
        weak = False
        for v in vals:
            if v.__class__ is Proxy and v.tracer is self:
                s = self.dtype_of(v.node)
            elif v.__class__ in _WEAK_CLASSES:
                weak = True
                continue
            else:
                s = self.strong_type(v)
                if s is None:
                    weak = True
                    continue
            if s is not t:
                if t is not None:
                    raise _err(f"mixed types need a cast: {op.name} of {t.name} and {s.name} "
                               f"(NumPy would promote)",
                               f"cast one operand, e.g. nx.{t.name}(value) or nx.{s.name}(value)")
                t = s
        if t is None:
            return None
        if weak:
            for v in vals:
                if isinstance(v, _WEAK) and not isinstance(v, np.generic):
                    self.check_weak(op, v, t)
        if t.kind == "p" and op.kind not in ("where", "bits", "cmp", "logical"):
            raise _err(f"{op.name}: a predicate is not a number",
                       "turn it into a number with nx.where(p, 1.0, 0.0) or nx.s32(p)")
        return t

    def as_pred(self, v: Any) -> Any:
        """Operand ``v`` as a predicate node (numbers: ``v != 0`` as in NumPy)."""
        t = self.strong_type(v)
        if t is None:
            return self.literal(bool(v), T.pred)
        node = v.node if isinstance(v, Proxy) else self.literal(v, t)
        return node if t.kind == "p" else self.convert(node, t, T.pred)

    def apply(self, op: Any, args: tuple) -> Any:
        """Run DSL operation ``op`` on operands (proxies, Python numbers, NumPy scalars)."""
        if len(args) != op.arity:
            raise _err(f"{op.name} takes {op.arity} operand(s), got {len(args)}")
        self.begin()
        kind = op.kind
        if kind == "logical":
            nodes = [self.as_pred(a) for a in args]
            return Proxy(self.run(op, T.pred, nodes), self)
        if kind == "where":
            cond, vals = args[0], args[1:]
        else:
            cond, vals = None, args
        t = self.unify(op, vals)
        if t is None:
            if cond is not None and isinstance(cond, Proxy):
                raise _err("nx.where(cond, a, b) with Python numbers for both a and b: the result "
                           "type is ambiguous (NumPy would give f64/s64)",
                           "type one value, e.g. nx.where(cond, nx.f32(1.0), 0.0), or cast the "
                           "predicate: nx.f32(cond)")
            return self.python_only(op, args)
        if kind in _CHECKED:
            self.check_kind(op, t)
        nodes = [v.node if v.__class__ is Proxy else self.to_node(v, t) for v in vals]
        if kind == "float" and t.kind in "su":        # NumPy: float functions of ints give f64
            nodes = [self.convert(n, t, T.f64) for n in nodes]
            t = T.f64
        if cond is not None:
            nodes.insert(0, self.as_pred(cond))
        return Proxy(self.run(op, t, nodes), self)

    def check_kind(self, op: Any, t: T.DType) -> None:
        kind = op.kind
        if kind == "bits" and t.kind == "f":
            raise _err(f"{op.name} needs integers or predicates, not {t.name}",
                       "bit operations work on s32/u32/s64/u64 (and & | ^ ~ on predicates); "
                       "reinterpret floats with nx.bitcast(x, nx.u32) if you mean their bits")
        if kind == "shift" and t.kind not in "su":
            raise _err(f"{op.name} needs integers, not {t.name}")
        if kind == "cmp" and t.kind == "p" and op.name not in ("eq", "ne"):
            raise _err(f"{op.name}: predicates are not ordered", "compare numbers")

    def python_only(self, op: Any, args: tuple) -> Any:
        """All operands are Python numbers: evaluate now with NumPy and return a Python number
        (weak, like ``math.*``), so ``x * nx.sqrt(2.0)`` stays in x's type."""
        vals = args[1:] if op.kind == "where" else args
        t = T.f64 if any(isinstance(v, float) for v in vals) else \
            T.s64 if any(isinstance(v, int) and not isinstance(v, bool) for v in vals) else T.pred
        if op.kind == "logical":
            t = T.pred
        ev = EagerTracer()
        wrapped = tuple(Proxy(ev.literal(v, t if op.kind != "logical" else T.pred), ev)
                        if not (op.kind == "where" and i == 0) else bool(v)
                        for i, v in enumerate(args))
        out = ev.apply(op, wrapped).node.value
        return out.item()

    def cast(self, value: Any, dst: T.DType) -> Any:
        """``nx.<dst>(value)`` of a traced value."""
        self.begin()
        src = self.strong_type(value)
        if src is None:
            return Proxy(self.literal(value, dst), self)
        node = self.to_node(value, src)
        return Proxy(node if src is dst else self.convert(node, src, dst), self)


class GraphTracer(Tracer):
    """Builds a :class:`Graph`; ``fastmath`` selects the .approx/.ftz lowerings."""

    def __init__(self, graph: Graph, fastmath: bool = False):
        self.graph, self.fastmath = graph, fastmath
        # the fast paths' direct handles
        self.cse, self.nodes, self.rec = graph._cse, graph.nodes, graph.rec

    def dtype_of(self, node: Node) -> T.DType:
        return T.DTYPES[node.dtype]

    framed = False          # record each node's source position (FramedGraphTracer)

    def begin(self) -> None:
        if self.framed:
            self.graph.frame = user_frame(2)

    def binary(self, op: Any, a: Any, b: Any) -> Any:
        """Fast path: two values (or a value and a Python float/int) of one type that the
        operation takes without conversion; everything else goes through :meth:`apply`."""
        fast = op.fast_types
        if fast is not None:
            if a.__class__ is Proxy and a.tracer is self:
                na = a.node
                t = na.dtype
                nb = b.node if b.__class__ is Proxy and b.tracer is self else \
                    self._fast_literal(b, t)
            elif b.__class__ is Proxy and b.tracer is self:
                nb = b.node
                t = nb.dtype
                na = self._fast_literal(a, t)
            else:
                na = nb = None
            if nb is not None and na is not None and nb.dtype == t and t in fast:
                g = self.graph
                if self.framed:
                    f = sys._getframe(2)
                    code = f.f_code
                    g.frame = (code, f.f_lineno) if _INTERNAL.get(code.co_filename) is False \
                        else user_frame(2)
                row = op.rows.get((t, self.fastmath))
                if row is None:
                    row = op.single_row(t, self.fastmath)
                if row:
                    return Proxy(g.instr(row, na, nb), self)
                return Proxy(op.lower(g, t, self.fastmath, na, nb), self)
        return self.apply(op, (a, b))

    def unary(self, op: Any, a: Any) -> Any:
        fast = op.fast_types
        if fast is not None and a.__class__ is Proxy and a.tracer is self:
            na = a.node
            t = na.dtype
            if t in fast:
                g = self.graph
                if self.framed:
                    f = sys._getframe(2)
                    code = f.f_code
                    g.frame = (code, f.f_lineno) if _INTERNAL.get(code.co_filename) is False \
                        else user_frame(2)
                row = op.rows.get((t, self.fastmath))
                if row is None:
                    row = op.single_row(t, self.fastmath)
                if row:
                    return Proxy(g.instr(row, na), self)
                return Proxy(op.lower(g, t, self.fastmath, na), self)
        return self.apply(op, (a,))

    def apply(self, op: Any, args: tuple) -> Any:
        """Fast path for n-ary operations on values of one type (``where``: a predicate and two
        values); the general policy otherwise (:meth:`Tracer.apply`)."""
        kind = op.kind
        fast = _WHERE_TYPES if kind == "where" else op.fast_types
        if fast is not None and len(args) == op.arity:
            start = kind == "where"
            if start:
                c = args[0]
                if not (c.__class__ is Proxy and c.tracer is self and c.node.dtype == "pred"):
                    return Tracer.apply(self, op, args)
            t = None
            for a in args[start:]:
                if a.__class__ is Proxy:
                    if a.tracer is not self or (t is not None and a.node.dtype != t):
                        return Tracer.apply(self, op, args)
                    t = a.node.dtype
            if t is not None and t in fast:
                nodes = [args[0].node] if start else []
                for a in args[start:]:
                    n = a.node if a.__class__ is Proxy else self._fast_literal(a, t)
                    if n is None:
                        return Tracer.apply(self, op, args)
                    nodes.append(n)
                g = self.graph
                if self.framed:
                    g.frame = user_frame(2)
                if not start:                       # one table row on the operands (fma)?
                    row = op.rows.get((t, self.fastmath))
                    if row is None:
                        row = op.single_row(t, self.fastmath)
                    if row:
                        return Proxy(g.instr(row, *nodes), self)
                return Proxy(op.lower(g, t, self.fastmath, *nodes), self)
        return Tracer.apply(self, op, args)

    def _fast_literal(self, v: Any, t: str) -> Node | None:
        c = v.__class__
        if c is float:
            return self.graph.const(v, t) if t[0] == "f" or t == "bf16" else None
        if c is int:
            if t[0] == "f" or t == "bf16" or (t[0] == "s" and -0x80000000 <= v < 0x80000000) \
                    or (t[0] == "u" and 0 <= v < 0x100000000):
                return self.graph.const(v, t)
        return None

    def literal(self, value: Any, dtype: T.DType) -> Node:
        return self.graph.const(value, dtype.name)

    def run(self, op: Any, t: T.DType, nodes: list) -> Node:
        return op.lower(self.graph, t.name, self.fastmath, *nodes)

    def convert(self, node: Node, src: T.DType, dst: T.DType) -> Node:
        return CONVERT[0](self.graph, src.name, dst.name, node)


class FramedGraphTracer(GraphTracer):
    """A :class:`GraphTracer` that records the source position of every node (the fused fast
    paths, which skip that, step aside for it): used to re-trace a graph for display."""
    framed = True


class EagerTracer(Tracer):
    """Evaluates each operation at once with NumPy (nodes are :class:`EagerValue`)."""

    def dtype_of(self, node: EagerValue) -> T.DType:
        return node.dtype

    def literal(self, value: Any, dtype: T.DType) -> EagerValue:
        from .graph import canonical
        return EagerValue(np.asarray(canonical(value, dtype.name)), dtype)

    def run(self, op: Any, t: T.DType, nodes: tuple) -> EagerValue:
        arrays = [n.value for n in nodes]
        with np.errstate(all="ignore"):
            out_t = T.pred if op.kind in ("cmp", "logical", "test") else t
            if t.name == "bf16" and not op.ref16:    # no bf16 in NumPy: f32, rounded once
                arrays = [_bf16_to_f32(a) if n.dtype.name == "bf16" else a
                          for a, n in zip(arrays, nodes)]
                r = np.asarray(op.ref(T.f32, *arrays))
                if out_t.name == "bf16":
                    r = _f32_to_bf16(r)
            else:
                r = np.asarray(op.ref(t, *arrays))
        return EagerValue(np.asarray(r, dtype=out_t.np), out_t)

    def convert(self, node: EagerValue, src: T.DType, dst: T.DType) -> EagerValue:
        return EagerValue(np.asarray(CONVERT[1](node.value, src, dst), dtype=dst.np), dst)


def _bf16_to_f32(a):
    from .. import semantics as S
    return S.bf16_to_f32(a).reshape(np.shape(a))


def _f32_to_bf16(a):
    from .. import semantics as S
    return S.f64_to_bf16(np.asarray(a, np.float64)).reshape(np.shape(a))


# (graph conversion, NumPy conversion), installed by numptx.dsl.ops
CONVERT: list = [None, None]
