"""AST PTX: typed expression programs in postorder, checked strictly.

A program lists inputs, constants, table instructions and routine calls in postorder; every
instruction takes exactly its operands (types checked) and the values left at the end are the
outputs, first output at the bottom. Mistakes raise :class:`ASTError` naming the op index.

>>> from numptx import ast_ptx as ap
>>> prog = [ap.input("x"), ap.input("x"), ap.instr("mul.rn.f32"), ap.const(1.0, "f32"),
...         ap.instr("add.rn.f32")]
>>> stub = ap.compile(prog, inputs={"x": "f32"}, outputs={"y": "f32"})

Trees can be built with :func:`node` and flattened with :func:`postorder`::

    x = ap.leaf(ap.input("x"))
    prog = ap.postorder(ap.node("add.rn.f32", ap.node("mul.rn.f32", x, x), ap.leaf(ap.const(1.0, "f32"))))

The same DAG builder, CSE and emitter as Stack PTX compile it (``native/stack_ptx.h``).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ._program import (DEFAULT_LIMITS, ASTError, Limits, Op, ProgramError, Stub, compile_words,
                       const, input, instr, special)
from ._program.encoding import program_dialect
from ._program.ops import DIALECTS
from .stack_ptx import routine

__all__ = ["ASTError", "Limits", "Node", "compile", "const", "input", "instr", "leaf", "node",
           "postorder", "routine", "special"]


class Node:
    """A tree node: an op and its operand subtrees (operands in instruction order).

    Nodes are immutable, so a tree can share subtrees but never contain itself."""
    __slots__ = ("op", "children")
    op: Op
    children: tuple[Node, ...]

    def __init__(self, op: Op, children: Sequence[Node] = ()):
        if not isinstance(op, Op):
            raise ASTError(f"Node: {op!r} is not an op (make one with ap.input, ap.const, "
                           f"ap.instr or ap.routine)")
        if isinstance(children, Node) or not isinstance(children, Iterable):
            raise ASTError(f"Node({op!r}): children must be a sequence of ap.Node, not "
                           f"{type(children).__name__}")
        children = tuple(children)
        for i, c in enumerate(children):
            if not isinstance(c, Node):
                raise ASTError(f"Node({op!r}): operand {i} is {c!r}, not an ap.Node (wrap ops "
                               f"in ap.leaf(...))")
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "children", children)

    def __setattr__(self, name: str, value) -> None:
        raise ASTError(f"ap.Node is immutable (cannot set {name!r}): build a new node")

    def __delattr__(self, name: str) -> None:
        raise ASTError(f"ap.Node is immutable (cannot delete {name!r})")

    def __reduce__(self):
        return (Node, (self.op, self.children))

    def __repr__(self) -> str:
        inner = ", ".join(map(repr, self.children))
        return f"{self.op!r}" + (f"<{inner}>" if inner else "")


def leaf(op: Op) -> Node:
    """A node without operands (an input or a constant)."""
    return Node(op)


def node(name: str, *children: Node) -> Node:
    """A table instruction applied to operand subtrees: ``node("add.rn.f32", a, b)``."""
    return Node(instr(name), children)


def _sizes(root: Node, sizes: dict[Node, int]) -> int:
    """Op count of ``root``'s postorder (shared subtrees counted at each use), memoized per node
    in ``sizes``: linear in the distinct nodes however often they are shared. A node reachable
    from itself (only possible by bypassing the immutability) raises :class:`ASTError`."""
    if root in sizes:
        return sizes[root]
    open_: set[int] = set()           # ids of the nodes on the current path
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        n, done = stack.pop()
        if done:
            open_.discard(id(n))
            sizes[n] = 1 + sum([sizes[c] for c in n.children])
            continue
        if n in sizes:
            continue
        if not isinstance(n, Node):
            raise ASTError(f"postorder: {n!r} is not an ap.Node")
        if id(n) in open_:
            raise ASTError(f"postorder: the tree is cyclic: {n.op!r} is its own operand "
                           f"(directly or through its operands)")
        open_.add(id(n))
        stack.append((n, True))
        for c in n.children:
            if id(c) in open_:
                raise ASTError(f"postorder: the tree is cyclic: {c.op!r} is its own operand "
                               f"(directly or through its operands)")
            if c not in sizes:
                stack.append((c, False))
    return sizes[root]


_EXPANSION_CAP = 1 << 20          # ops postorder expands without limits=: the most Limits allow


def postorder(*roots: Node, limits: Limits | None = None) -> list[Op]:
    """Flatten trees into one postorder program (one output per root, in order).

    Shared subtrees are repeated at each use (the compiler merges them again), so a deep DAG
    can stand for an enormous program. With ``limits``, one longer than ``limits.max_steps``
    (what :func:`compile` will execute) raises :class:`ASTError` as soon as the expansion
    passes it; without, only one past 2**20 ops does (no Limits compile more, and the
    expansion would exhaust memory)."""
    lim = Limits(max_steps=_EXPANSION_CAP) if limits is None else limits
    if not isinstance(lim, Limits):
        raise ASTError(f"postorder: limits must be an ap.Limits, not {type(lim).__name__}")
    for i, root in enumerate(roots):
        if not isinstance(root, Node):
            raise ASTError(f"postorder: root {i} is {root!r}, not an ap.Node (build trees with "
                           f"ap.leaf and ap.node)")
    cap = lim.max_steps
    pushed = len(roots)         # nodes queued so far: each becomes one op (unless cyclic)
    if pushed > cap:
        _too_big(roots, lim)
    out: list[Op] = []
    for root in roots:
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            n, done = stack.pop()
            if done:
                out.append(n.op)
                continue
            stack.append((n, True))
            children = n.children
            if children:
                pushed += len(children)
                if pushed > cap:
                    _too_big(roots, lim)
                for child in reversed(children):
                    stack.append((child, False))
    return out


def _too_big(roots: tuple, lim: Limits) -> None:
    """Raise the error for trees whose postorder passes ``lim.max_steps``: a cycle, named, or
    the op count (computed on the DAG, without expanding it)."""
    sizes: dict[Node, int] = {}
    total = sum(_sizes(root, sizes) for root in roots)        # raises on a cycle
    raise ASTError(f"AST PTX: limit reached at op {lim.max_steps}: the trees expand to {total} "
                   f"ops in postorder (shared subtrees repeat at each use), more than "
                   f"Limits.max_steps={lim.max_steps}", index=lim.max_steps, code="limit reached")


def compile(prog: Sequence[Op] | np.ndarray, inputs: Mapping[str, str] | None = None,
            outputs: Mapping[str, str] | None = None, *, site=None, routines: Sequence = (),
            limits: Limits | None = None) -> Stub:
    """Compile an AST PTX program to a stub, or raise :class:`ASTError` (with ``.index``)."""
    own, _ = program_dialect(prog)
    if own:                           # (its marker would be a bad word 0: say why instead)
        raise ProgramError(f"AST PTX has one dialect (numptx); the program carries the "
                           f"{DIALECTS[own]} dialect marker (sp.encode(..., dialect=)): compile "
                           f"it with sp.compile")
    return compile_words("ast", prog, inputs, outputs, site=site, routines=routines, strict=True,
                         limits=limits)
