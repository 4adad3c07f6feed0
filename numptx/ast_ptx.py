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

from collections.abc import Mapping, Sequence

import numpy as np

from ._program import (ASTError, Limits, Op, ProgramError, Stub, compile_words, const, input, instr,
                       special)
from .stack_ptx import routine

__all__ = ["ASTError", "Node", "compile", "const", "input", "instr", "leaf", "node", "postorder",
           "routine", "special"]


class Node:
    """A tree node: an op and its operand subtrees (operands in instruction order)."""
    __slots__ = ("op", "children")

    def __init__(self, op: Op, children: Sequence[Node] = ()):
        if not isinstance(op, Op):
            raise ProgramError(f"Node: {op!r} is not an op")
        self.op, self.children = op, tuple(children)

    def __repr__(self) -> str:
        inner = ", ".join(map(repr, self.children))
        return f"{self.op!r}" + (f"<{inner}>" if inner else "")


def leaf(op: Op) -> Node:
    """A node without operands (an input or a constant)."""
    return Node(op)


def node(name: str, *children: Node) -> Node:
    """A table instruction applied to operand subtrees: ``node("add.rn.f32", a, b)``."""
    return Node(instr(name), children)


def postorder(*roots: Node) -> list[Op]:
    """Flatten trees into one postorder program (one output per root, in order)."""
    out: list[Op] = []
    for root in roots:
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            n, done = stack.pop()
            if done:
                out.append(n.op)
                continue
            stack.append((n, True))
            for child in reversed(n.children):
                stack.append((child, False))
    return out


def compile(prog: Sequence[Op] | np.ndarray, inputs: Mapping[str, str] | None = None,
            outputs: Mapping[str, str] | None = None, *, site=None, routines: Sequence = (),
            limits: Limits | None = None) -> Stub:
    """Compile an AST PTX program to a stub, or raise :class:`ASTError` (with ``.index``)."""
    return compile_words("ast", prog, inputs, outputs, site=site, routines=routines, strict=True,
                         limits=limits)
