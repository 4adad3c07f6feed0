"""Lowering a traced :class:`~numptx.dsl.graph.Graph` to Stack PTX and AST PTX programs.

    low = to_stack(graph, order)           # or to_ast(graph, order)
    prog = low.program({"x": "a", "y": "b"})  # inputs renamed to the names a compile uses
    stub = stack_ptx.compile(prog, inputs=..., outputs=..., limits=low.limits)

* Stack PTX: postorder from each output; a node used more than once is computed once, kept with
  ``dup`` + ``store(type, slot)`` and reused with ``load(type, slot)``, so the program is linear
  in the graph size. Outputs are pushed last-first (the first output takes the top).
* AST PTX: postorder with shared nodes evaluated again at each use (the C core's CSE merges
  the repeats): small shared subtrees are repeated inline, bigger ones become routines called
  where they are used, so the program stays linear while the executed words follow the
  expanded tree (capped at ``AST_CAP``; beyond, TraceError suggests ``backend="stack"``).
  Outputs are pushed first-first (bottom = first output).

``order`` lists what each program output is: an ``int`` (index into ``graph.outputs``) or a
``str`` (a pass-through input of that name, e.g. a site's ``mod`` variable the formula leaves
alone). Inputs are named by parameter (pass-throughs by ``"\\x01" + name``) and renamed per
binding with :meth:`Lowered.program`.
"""
from __future__ import annotations

from dataclasses import dataclass, field


from .._program import (U64, CONST, CONST64, INPUT, ROOT_INPUT, Limits, Op, instr, lower_dag,
                       type_id)
from ..instructions import TABLE
from ..stack_ptx import dup, load, routine, store
from ..valuetypes import WIDE as _WIDE
from .graph import Graph, Node
from .trace import TraceError

__all__ = ["Lowered", "to_stack", "to_ast", "AST_CAP", "PASS"]

AST_CAP = 1 << 20          # words an AST PTX program may execute (routines included)
ROUTINE_MIN = 4            # a shared subtree of more ops than this becomes an AST routine
PASS = "\x01"              # prefix of pass-through input names in a lowered program
_INSTR_OPS: dict[str, Op] = {}
_INPUT_OPS: dict[str, Op] = {}
_CONST_OPS: dict = {}
_META_OPS: dict = {}


@dataclass
class Lowered:
    """A lowered program, encoded: ``words`` (the main program's uint64 words, little-endian
    bytes) and ``routines`` (AST PTX: shared subtrees, encoded likewise), whose input words
    refer to ``input_names`` by position (a compile lays its inputs out in that order); the
    Limits it needs (None: the defaults) and the instruction count. ``ops`` decodes the words
    for display."""
    backend: str
    words: bytes
    input_names: tuple
    limits: Limits | None
    n_instructions: int
    routines: list = field(default_factory=list)

    @property
    def ops(self) -> list:
        """The main program as ops (inputs named by parameter)."""
        return self.program()

    def program(self, rename: dict[str, str] | None = None) -> list:
        """The main ops with input names replaced through ``rename`` (missing names stay)."""
        return _decode(self.words, self.input_names, rename)

    def routine_ops(self, k: int, rename: dict[str, str] | None = None) -> list:
        """Routine ``k`` as ops."""
        return _decode(self.routines[k], self.input_names, rename)


def _decode(words: bytes, names: tuple, rename: dict | None) -> list:
    import numpy as np
    from .._program import decode
    rename = rename or {}
    return decode(np.frombuffer(words, dtype=np.uint64), [rename.get(n, n) for n in names])


def input_op(name: str) -> Op:
    op = _INPUT_OPS.get(name)
    if op is None:
        op = _INPUT_OPS[name] = Op(INPUT, 0, name=name, text=f"input({name!r})")
    return op


def _instr_op(name: str) -> Op:
    op = _INSTR_OPS.get(name)
    if op is None:
        op = _INSTR_OPS[name] = instr(name)
    return op


def const_op(node: Node) -> Op:
    """The CONST/CONST64 op of a constant node, from its exact bits."""
    op = _CONST_OPS.get(node.key)
    if op is None:
        t = type_id(node.dtype)
        bits = int.from_bytes(node.key[2], "little")
        text = f"const({node.target.item()!r}, {node.dtype!r})"
        if node.dtype in _WIDE:
            op = Op(CONST64, t << 8, extra=bits, text=text)
        else:
            op = Op(CONST, t << 8 | bits << 32, text=text)
        _CONST_OPS[node.key] = op
    return op


_ROUTINE_OPS: dict[int, Op] = {}


def _routine_op(k: int) -> Op:
    op = _ROUTINE_OPS.get(k)
    if op is None:
        op = _ROUTINE_OPS[k] = routine(k)
    return op


def _meta(kind: str, dtype: str, slot: int | None = None) -> Op:
    key = (kind, dtype, slot)
    op = _META_OPS.get(key)
    if op is None:
        op = _META_OPS[key] = (dup(dtype) if kind == "dup" else
                               store(dtype, slot) if kind == "store" else load(dtype, slot))
    return op


def _pow2(n: int, floor: int) -> int:
    n = max(n, floor)
    return min(1 << (n - 1).bit_length(), 1 << 20)


def _limits(words: int, nodes: int, slots: int, depth: int) -> Limits | None:
    if words <= 4096 and nodes <= 4096 and slots <= 16 and depth <= 256:
        return None
    return Limits(max_steps=_pow2(words, 4096), max_nodes=_pow2(nodes + 8, 4096),
                  n_slots=_pow2(slots, 16), stack_capacity=_pow2(depth + 1, 256))


def _roots(graph: Graph, order) -> list:
    return [graph.outputs[o][1] if isinstance(o, int) else PASS + o for o in order]


def _output_uses(roots) -> dict:
    uses: dict = {}
    for r in roots:
        if r.__class__ is not str:
            uses[r] = uses.get(r, 0) + 1
    return uses


def _encode_ops(ops: list, names: dict) -> bytes:
    """Words of an op list; named inputs refer to their position in ``names`` (grown)."""
    parts = []
    for op in ops:
        if op.name is not None:
            k = names.get(op.name)
            if k is None:
                k = names[op.name] = len(names)
            parts.append(_input_raw(k))
        else:
            parts.append(op.raw)
    return b"".join(parts)


def _finish(backend: str, words: bytes, names: dict, graph: Graph, slots: int,
            n_instr: int, routines: list | None = None) -> Lowered:
    """Attach the Limits a program needs (None when the defaults do: no stack can be deeper
    than the number of words)."""
    n = len(words) >> 3
    if n <= 256 and slots <= 16:
        return Lowered(backend, words, tuple(names), None, n_instr, routines or [])
    return Lowered(backend, words, tuple(names), _limits(n, len(graph.nodes) + n, slots, n),
                   n_instr, routines or [])


_POST = object()           # to_stack's marker: the node below it has its operands done
_INPUT_RAW: list = []      # k -> the word of input k


def _input_raw(k: int) -> bytes:
    while len(_INPUT_RAW) <= k:
        _INPUT_RAW.append(U64.pack(INPUT | len(_INPUT_RAW) << 16))
    return _INPUT_RAW[k]
_RAW: dict = {}            # instruction name / constant key / (meta, type, slot) -> words
_RAW_VERSION = [None]


def _raw_cache() -> dict:
    """The encoded-word cache, emptied when the instruction table changes (indices move)."""
    v = (TABLE.uid, TABLE.version)
    if _RAW_VERSION[0] != v:
        _RAW.clear()
        _INSTR_OPS.clear()
        _RAW_VERSION[0] = v
    return _RAW


def _raw_of(n: Node) -> bytes:
    """The encoded word(s) of an instruction or constant node (cached)."""
    if n.op == "instr":
        raw = _RAW[n.target] = _instr_op(n.target).raw
    else:
        raw = _RAW[n.key] = const_op(n).raw
    return raw


def _raw_meta(kind: str, dtype: str, slot: int | None) -> bytes:
    key = (kind, dtype, slot)
    raw = _RAW.get(key)
    if raw is None:
        raw = _RAW[key] = _meta(kind, dtype, slot).raw
    return raw


def to_stack(graph: Graph, order: tuple | None = None) -> Lowered:
    """Stack PTX program for ``graph`` (outputs in ``order``; default: all, in order).

    The graph's creation record goes to the C lowering (native/dag_lower.h);
    :func:`to_stack_py` is the same algorithm in Python (used when the instruction table
    changed since the trace)."""
    if order is None:
        order = tuple(range(len(graph.outputs)))
    if graph.rec_version != (TABLE.uid, TABLE.version):
        return to_stack_py(graph, order)
    names = {name: k for k, name in enumerate(graph.inputs)}     # input -> its word's k
    roots = []
    for o in order:
        if o.__class__ is int:
            roots.append(graph.outputs[o][1].index)
        else:                                  # a pass-through input: numbered after the rest
            roots.append(ROOT_INPUT | names.setdefault(PASS + o, len(names)))
    words, n_slots, n_instr = lower_dag(graph.rec, roots, len(graph.nodes))
    return _finish("stack", words, names, graph, n_slots, n_instr)


def to_stack_py(graph: Graph, order: tuple | None = None) -> Lowered:
    """:func:`to_stack` in Python: the reference the C lowering is tested against."""
    if order is None:
        order = tuple(range(len(graph.outputs)))
    roots = _roots(graph, order)
    out_uses = _output_uses(roots)
    out_get = out_uses.get
    raw = _raw_cache()
    raw_get = raw.get
    slots: dict = {}
    slots_get = slots.get
    parts: list = []               # one bytes object per op (64-bit constants: 16 bytes)
    # input name -> its position in the compile's inputs: graph inputs in creation order, then
    # pass-through inputs (as the graph's record numbers them)
    names: dict = {name: k for k, name in enumerate(graph.inputs)}
    names_get = names.get
    append = parts.append
    n_instr = 0
    POST = _POST
    for root in reversed(roots):
        if root.__class__ is str:
            k = names_get(root)
            if k is None:
                k = names[root] = len(names)
            append(_input_raw(k))
            continue
        stack = [root]
        pop, push, extend = stack.pop, stack.append, stack.extend
        while stack:
            n = pop()
            if n is POST:                                 # the node below: operands are done
                n = pop()
                append(raw_get(n.target) or _raw_of(n))
                n_instr += 1
                if n.uses + out_get(n, 0) > 1:
                    slot = slots[n] = len(slots)
                    d = n.dtype
                    append(raw_get(("dup", d, None)) or _raw_meta("dup", d, None))
                    append(raw_get(("store", d, slot)) or _raw_meta("store", d, slot))
                continue
            op = n.op
            if op == "instr":
                slot = slots_get(n)
                if slot is None:
                    push(n)
                    push(POST)
                    extend(n.args[::-1])
                else:
                    append(raw_get(("load", n.dtype, slot)) or _raw_meta("load", n.dtype, slot))
            elif op == "input":
                name = n.target
                k = names_get(name)
                if k is None:
                    k = names[name] = len(names)
                append(_input_raw(k))
            else:
                append(raw_get(n.key) or _raw_of(n))
    return _finish("stack", b"".join(parts), names, graph, len(slots), n_instr)


def _ast_costs(nodes, shared) -> tuple[dict, dict]:
    """Per node: words executed to evaluate it (routine calls included) and routine nesting;
    one pass in creation order, which is topological."""
    cost: dict = {}
    depth: dict = {}
    for n in nodes:
        c, d = 1, 0
        for a in n.args:
            r = a in shared
            c += cost[a] + r
            da = depth[a] + r
            if da > d:
                d = da
        cost[n] = c
        depth[n] = d
    return cost, depth


def to_ast(graph: Graph, order: tuple | None = None, *, cap: int = AST_CAP) -> Lowered:
    """AST PTX program for ``graph``: the expression trees of the outputs, in order. A shared
    subtree of more than ``ROUTINE_MIN`` ops becomes a routine (called where it is used, run
    again each time: the C core's CSE merges the repeats); smaller ones are repeated inline.
    More than ``cap`` executed words raise TraceError suggesting ``backend="stack"``."""
    if order is None:
        order = tuple(range(len(graph.outputs)))
    roots = _roots(graph, order)
    out_uses = _output_uses(roots)
    candidates = {n for n in graph.nodes if n.op == "instr" and n.uses + out_uses.get(n, 0) > 1}
    cost, depth = _ast_costs(graph.nodes, ())
    shared = {n for n in candidates if cost.get(n, 0) > ROUTINE_MIN}
    cost, depth = _ast_costs(graph.nodes, shared)
    steps = sum(1 if r.__class__ is str else cost[r] + (r in shared) for r in roots)
    if steps > cap:
        raise TraceError(f"the AST PTX program of {graph.name!r} would execute {steps} words "
                         f"(over {cap}): shared subexpressions are evaluated again at each use",
                         fix='use backend="stack", which keeps shared values in slots')
    routine_of: dict = {}
    bodies: list = []          # (node, ops)
    n_instr = 0
    _raw_cache()
    instr_ops = _INSTR_OPS

    def emit(root, ops: list, inline_root: bool) -> None:
        nonlocal n_instr
        append = ops.append
        stack = [root]
        pop, push = stack.pop, stack.append
        first = inline_root
        while stack:
            n = pop()
            if n.__class__ is tuple:
                append(instr_ops.get(n[0].target) or _instr_op(n[0].target))
                n_instr += 1
                continue
            op = n.op
            if op == "instr":
                if n in shared and not first:
                    k = routine_of.get(n)
                    if k is None:
                        k = routine_of[n] = len(bodies)
                        bodies.append((n, []))
                    append(_routine_op(k))
                    continue
                first = False
                push((n,))
                args = n.args
                for i in range(len(args) - 1, -1, -1):
                    push(args[i])
            elif op == "input":
                append(input_op(n.target))
            else:
                append(const_op(n))
    ops: list = []
    for root in roots:
        if root.__class__ is str:
            ops.append(input_op(root))
        else:
            emit(root, ops, False)
    k = 0
    while k < len(bodies):                  # bodies may discover further routines
        node, body = bodies[k]
        emit(node, body, True)
        k += 1
    names: dict = {name: k for k, name in enumerate(graph.inputs)}
    words = _encode_ops(ops, names)
    routines = [_encode_ops(body, names) for _, body in bodies]
    low = _finish("ast", words, names, graph, 0, n_instr, routines=routines)
    if routines or steps > 4096:
        nest = max([depth[r] + (r in shared) for r in roots if r.__class__ is not str] or [0])
        low.limits = Limits(max_steps=_pow2(steps + 8, 4096),
                            max_nodes=_pow2(len(graph.nodes) + 8, 4096),
                            max_depth=min(_pow2(nest + 2, 8), 65536),
                            stack_capacity=_pow2(3 * len(graph.nodes) + 8, 256))
    return low
