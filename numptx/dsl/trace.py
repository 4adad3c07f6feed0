"""The tracers, and the graph tracer's fused fast paths.

Two tracers share the promotion policy of :class:`~numptx.dsl.promote.Tracer`:

* :class:`GraphTracer` builds a :class:`~numptx.dsl.graph.Graph` of table instructions (nodes
  are graph nodes);
* :class:`EagerTracer` evaluates each DSL operation at once with NumPy's own function on the
  declared dtypes (nodes are :class:`~numptx.dsl.proxy.EagerValue`) -- the reference evaluation.

::

    g = Graph("f")
    tr = GraphTracer(g)
    x = Proxy(g.input("x", "f32"), tr)
    y = x * x + 1.0              # Proxy.__mul__ / __add__: the fused fast paths below
    g.outputs = [("y", y.node)]

The Proxy operators and the ``nx.*`` functions are the fused fast paths (:func:`fused_binary`,
:func:`fused_unary`, :func:`fused_ternary`): for the common case (operands of one type, or a
value and a Python number, lowering to one plain table row) they do the policy check, the
literal and the hash-consing lookup in one frame and append the node through the graph's one
node route, :meth:`Graph.add_instr <numptx.dsl.graph.Graph.add_instr>`, which
:meth:`Graph.instr` also takes. Everything else goes through the tracer's ``apply``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import semantics as S
from . import types as T
from .graph import ON_TABLE_CHANGE, Graph, Node, RowInfo, canonical, refresh_rows, row_info
from .lowering import convert as _graph_convert, np_convert as _np_convert
from .modes import MODES
from .promote import FAST_TYPES, WHERE_TYPES, Tracer
from .proxy import (OPS, EagerValue, Proxy, TraceAttributeError, TraceError, trace_error,
                    user_frame)

__all__ = ["TraceError", "TraceAttributeError", "Proxy", "Tracer", "GraphTracer",
           "FramedGraphTracer", "EagerTracer", "EagerValue", "fused_binary", "fused_unary",
           "fused_ternary", "user_frame", "trace_error", "OPS", "FAST_TYPES"]


# ---- the tracers ------------------------------------------------------------------------------
class GraphTracer(Tracer):
    """Builds a :class:`Graph`; ``fastmath`` holds the math mode the operations lower in
    (``"cuda"``, ``"accurate"`` or ``"fast"``: numptx/dsl/lowering.py, ``MODES``)."""

    def __init__(self, graph: Graph, fastmath: str = "cuda"):
        if fastmath not in MODES:
            raise ValueError(f"GraphTracer: math mode {fastmath!r} is not one of {MODES}")
        self.graph, self.fastmath = graph, fastmath
        # the fused fast paths' direct handles: the CSE table and the one node route
        self.cse, self.add = graph.cse, graph.add_instr

    def dtype_of(self, node: Node) -> T.DType:
        return T.DTYPES[node.dtype]

    def eager(self) -> EagerTracer:
        return EagerTracer()

    framed = False          # record each node's source position (FramedGraphTracer)

    def begin(self) -> None:
        if self.framed:
            self.graph.frame = user_frame(2)

    def binary(self, op: Any, a: Any, b: Any) -> Any:
        """Two values (or a value and a Python float/int) of one type that the operation takes
        without conversion: lowered at once (the framed tracer, and lowerings of several rows);
        everything else goes through :meth:`apply`."""
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
                return self._lower(op, t, (na, nb))
        return self.apply(op, (a, b))

    def unary(self, op: Any, a: Any) -> Any:
        fast = op.fast_types
        if fast is not None and a.__class__ is Proxy and a.tracer is self:
            t = a.node.dtype
            if t in fast:
                return self._lower(op, t, (a.node,))
        return self.apply(op, (a,))

    def apply(self, op: Any, args: tuple) -> Any:
        """n-ary operations on values of one type (``where``: a predicate and two values) are
        lowered at once; the general policy otherwise (:meth:`Tracer.apply`)."""
        kind = op.kind
        fast = WHERE_TYPES if kind == "where" else op.fast_types
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
                if start:                           # where: select, never one plain row
                    if self.framed:
                        self.graph.frame = user_frame(2)
                    return Proxy(op.lower(self.graph, t, self.fastmath, *nodes), self)
                return self._lower(op, t, nodes)
        return Tracer.apply(self, op, args)

    def _lower(self, op: Any, t: str, nodes) -> Proxy:
        """``op`` on nodes of type ``t`` that it takes as they are: its single row when it has
        one (through :meth:`Graph.instr`), else its lowering."""
        g = self.graph
        if self.framed:
            g.frame = user_frame(3)
        row = op.rows.get((t, self.fastmath))
        if row is None:
            row = op.single_row(t, self.fastmath)
        if row:
            return Proxy(g.instr(row, *nodes), self)
        return Proxy(op.lower(g, t, self.fastmath, *nodes), self)

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
        return _graph_convert(self.graph, src.name, dst.name, node)


class FramedGraphTracer(GraphTracer):
    """A :class:`GraphTracer` that records the source position of every node (the fused fast
    paths, which skip that, step aside for it): used to re-trace a graph for display."""
    framed = True


class EagerTracer(Tracer):
    """Evaluates each operation at once with NumPy (nodes are :class:`EagerValue`)."""

    def dtype_of(self, node: EagerValue) -> T.DType:
        return node.dtype

    def eager(self) -> EagerTracer:
        return EagerTracer()

    def literal(self, value: Any, dtype: T.DType) -> EagerValue:
        return EagerValue(np.asarray(canonical(value, dtype.name)), dtype)

    def run(self, op: Any, t: T.DType, nodes: tuple) -> EagerValue:
        arrays = [n.value for n in nodes]
        with np.errstate(all="ignore"):
            out_t = T.pred if op.kind in ("cmp", "logical", "test") else t
            if t.name == "bf16" and not op.ref16:    # no bf16 in NumPy: f32, rounded once
                arrays = [S.bf16_to_f32(a).reshape(np.shape(a)) if n.dtype.name == "bf16"
                          else a for a, n in zip(arrays, nodes)]
                r = np.asarray(op.ref(T.f32, *arrays))
                if out_t.name == "bf16":
                    r = S.f64_to_bf16(np.asarray(r, np.float64)).reshape(np.shape(r))
            else:
                r = np.asarray(op.ref(t, *arrays))
        return EagerValue(np.asarray(r, dtype=out_t.np), out_t)

    def convert(self, node: EagerValue, src: T.DType, dst: T.DType) -> EagerValue:
        return EagerValue(np.asarray(_np_convert(node.value, src, dst), dtype=dst.np), dst)


# ---- the fused fast paths ----------------------------------------------------------------------
# Each ``nx.*`` function and Proxy operator is one of these closures. They skip the tracer's
# method calls, not its rules: the policy check is the fast-type test, the literal is the
# tracer's, and nodes enter the graph through Graph.add_instr like every other instruction.
_new = object.__new__
_FUSED: list = []          # per fused operation: {math mode: {type: RowInfo or False}}


def _fused_info(op_name: str, cache: dict, t: str, fm: str, arity: int) -> RowInfo | bool:
    """The row one application of ``op_name`` on ``t`` values is, when the fast path can build
    it directly (one plain row taking ``t`` operands), else False; cached in ``cache``."""
    refresh_rows()                                  # a new table clears every fused cache
    op = OPS[op_name]
    fast = op.fast_types
    info = False
    if fast is not None and t in fast:
        row = op.rows.get((t, fm))
        if row is None:
            row = op.single_row(t, fm)
        if row:
            i = row_info(row)
            if (arity == 2 and i.plain and i.op0 == t and i.op1 == t) or \
                    (arity == 1 and i.plain1 and i.op0 == t):
                info = i
    cache[t] = info
    return info


def _ternary_info(op_name: str, cache: dict, t: str, fm: str):
    """(RowInfo, operand order) when one application of the 3-operand ``op_name`` on ``t``
    values (``where``: a predicate and two ``t``) is one non-volatile row on its operands in
    some order; else False. Cached in ``cache``."""
    refresh_rows()
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
            info = (i, tuple(xs.index(a) for a in r.args))
    cache[t] = info
    return info


def _new_fused_caches() -> dict[str, dict]:
    caches = {m: {} for m in MODES}           # per math mode: {type: RowInfo or False}
    _FUSED.append(caches)
    return caches


def _clear_fused() -> None:
    for caches in _FUSED:
        for c in caches.values():
            c.clear()


ON_TABLE_CHANGE.append(_clear_fused)


def fused_binary(op_name: str, swap: bool = False, eager: Any = None):
    """``f(a, b)`` applying the DSL operation ``op_name`` (``swap``: to ``(b, a)``): the graph
    tracer's common case (one row on two values of one type, or a value and a Python number)
    in one frame, with no source position recorded (:meth:`Graph.format` re-traces to show
    them); everything else through ``tracer.binary`` (same frame depth); ``eager(args)``
    when neither is traced."""
    caches = _new_fused_caches()

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
            cache = caches[fm]
            info = cache.get(t)
            if info is None:
                info = _fused_info(op_name, cache, t, fm, 2)
            if info:
                key = (info.name, nb, na) if info.commutative and na.index > nb.index else \
                    (info.name, na, nb)
                node = tr.cse.get(key)
                if node is None:
                    node = tr.add(info, (na, nb), key)
                p = _new(Proxy)          # Proxy(node, tr) without the __init__ call
                p.node, p.tracer = node, tr
                return p
        return tr.binary(OPS[op_name], a, b)
    return f


def fused_unary(op_name: str, eager: Any = None):
    """``f(a)``: the unary counterpart of :func:`fused_binary`."""
    caches = _new_fused_caches()

    def f(a):
        if a.__class__ is not Proxy:
            return eager((a,))
        tr = a.tracer
        if tr.__class__ is GraphTracer:
            na = a.node
            if na.op != "const":
                t = na.dtype
                fm = tr.fastmath
                cache = caches[fm]
                info = cache.get(t)
                if info is None:
                    info = _fused_info(op_name, cache, t, fm, 1)
                if info:
                    key = (info.name, na)
                    node = tr.cse.get(key)
                    if node is None:
                        node = tr.add(info, (na,), key)
                    p = _new(Proxy)          # Proxy(node, tr) without the __init__ call
                    p.node, p.tracer = node, tr
                    return p
        return tr.unary(OPS[op_name], a)
    return f


def fused_ternary(op_name: str, eager: Any = None):
    """``f(a, b, c)``: :func:`fused_binary` for 3-operand operations (fma, where): traced values
    of one type (``where``: a traced predicate first) and Python numbers."""
    caches = _new_fused_caches()
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
                cache = caches[fm]
                info = cache.get(t)
                if info is None:
                    info = _ternary_info(op_name, cache, t, fm)
                if info:
                    i, perm = info
                    args = (nodes[perm[0]], nodes[perm[1]], nodes[perm[2]])
                    node = None
                    if i.simplify is not None:
                        node = i.simplify(tr.graph, i.name, args)
                    if node is None:
                        x, y, z = args
                        key = (i.name, y, x, z) if i.commutative and x.index > y.index else \
                            (i.name, x, y, z)
                        node = tr.cse.get(key)
                        if node is None:
                            node = tr.add(i, args, key)
                    p = _new(Proxy)          # Proxy(node, tr) without the __init__ call
                    p.node, p.tracer = node, tr
                    return p
        return tr.apply(OPS[op_name], args)
    return f


# ---- Proxy's operators: fused fast paths of the DSL operations ---------------------------------
_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "truediv",
           "floordiv": "floordiv", "mod": "mod", "and": "bitand", "or": "bitor", "xor": "bitxor",
           "lshift": "lshift", "rshift": "rshift"}
_COMPARE = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
_UNARY = {"neg": "neg", "pos": "pos", "abs": "abs", "invert": "invert", "floor": "floor",
          "ceil": "ceil", "trunc": "trunc"}


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
