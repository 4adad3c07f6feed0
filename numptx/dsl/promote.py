"""The promotion policy of DSL operations: which operand types an operation takes, how Python
numbers adopt a type, and the errors for the rest. :class:`Tracer` applies it; the concrete
tracers (numptx/dsl/trace.py) only say how to make nodes::

    class MyTracer(Tracer):          # what GraphTracer / EagerTracer implement
        def dtype_of(self, node): ...
        def literal(self, value, dtype): ...
        def run(self, op, t, nodes): ...
        def convert(self, node, src, dst): ...
        def eager(self): ...          # a reference-evaluation tracer (Python numbers only)

:data:`FAST_TYPES` (per operation kind, the operand types an operation takes as they are) is what
the graph tracer's fast paths may skip the policy for.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..valuetypes import FLOATS, INTS
from . import types as T
from .proxy import Proxy, trace_error as _err

__all__ = ["Tracer", "FAST_TYPES", "WHERE_TYPES"]

_WEAK = (bool, int, float)
_WEAK_CLASSES = frozenset(_WEAK)
_CHECKED = frozenset({"bits", "shift", "cmp"})
_FAST_TYPES = frozenset(FLOATS + INTS)
_FLOAT_TYPES = frozenset(FLOATS)
WHERE_TYPES = _FAST_TYPES | {"pred"}
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
    fastmath: str = "cuda"             # the math mode (numptx/dsl/lowering.py, MODES)

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

    def eager(self) -> Tracer:
        """A fresh reference-evaluation tracer (operations on Python numbers only run in it)."""
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
        ev = self.eager()
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
