"""``precision="cuda"``: products contracted into fma after tracing, by the rule NVRTC follows.

NVRTC (``-fmad=true``, its default) turns ``a*b + c``, ``a*b - c`` and ``c - a*b`` into one
``fma`` when the product is used only by additions and subtractions (then the product itself
disappears); one other use keeps every use of it rounded twice. Of two product operands it
contracts the one with fewer uses (the first on a tie).

In ``cuda`` mode the DSL's ``+ - *`` on f32/f64 lower to the contractible rows (``add.f32``,
``mul.f32``, ...), as do the final multiplications of the CUDA-speed math forms where CUDA's
own are contractible; mathlib's internal arithmetic uses ``.rn`` rows, which never contract.
This pass fuses the contractible pairs by NVRTC's rule (rewriting the traced graph in place) and
writes every contractible row left as its ``.rn`` form, so ptxas contracts nothing else: the stub's SASS is the hand-written
kernel's and ``nx.emulate`` computes what the GPU computes, bit for bit::

    g = contract(graph)          # what precision="cuda" traces to

The NumPy reference evaluation (``expr(x)``) is not contracted: it rounds twice, like NumPy.
"""
from __future__ import annotations

import numpy as np

from .graph import Graph, Node

__all__ = ["contract", "CONTRACTED_TYPES"]

CONTRACTED_TYPES = ("f32", "f64")
_ADD = {f"add.{t}": t for t in CONTRACTED_TYPES}
_SUB = {f"sub.{t}": t for t in CONTRACTED_TYPES}
_MUL = {f"mul.{t}": t for t in CONTRACTED_TYPES}
_RN = {name: name.replace(".", ".rn.", 1) for d in (_ADD, _SUB, _MUL) for name in d}


def _plan(g: Graph) -> dict[int, int]:
    """Node index of each add/sub that absorbs a product -> that operand's position."""
    nodes = g.nodes
    alive = [False] * len(nodes)
    for _, n in g.outputs:
        alive[n.index] = True
    uses: dict[int, list[Node]] = {}
    for n in reversed(nodes):          # creation order is topological: one backward sweep
        if alive[n.index]:
            for a in n.args:
                alive[a.index] = True
                uses.setdefault(a.index, []).append(n)
    outputs = {n.index for _, n in g.outputs}

    def fusable(m: Node, t: str) -> bool:
        if m.op != "instr" or _MUL.get(m.target) != t or m.index in outputs:
            return False
        return all(_ADD.get(u.target) == t or _SUB.get(u.target) == t for u in uses[m.index])

    plan: dict[int, int] = {}
    for n in nodes:
        if not alive[n.index] or n.op != "instr":
            continue
        t = _ADD.get(n.target) or _SUB.get(n.target)
        if t is None:
            continue
        cands = [i for i, a in enumerate(n.args) if fusable(a, t)]
        if cands:                           # fewer uses first; min keeps the first on a tie
            plan[n.index] = min(cands, key=lambda i: len(uses[n.args[i].index]))
    return plan


def contract(g: Graph) -> Graph:
    """``g`` with its contractible sums as ``fma.rn`` and the other contractible rows as ``.rn``,
    rewritten in place (nodes keep their identity; a ``neg`` node is inserted where a
    difference needs one)."""
    nodes = g.nodes
    if not any(n.target in _RN for n in nodes if n.op == "instr"):
        return g
    plan = _plan(g)
    out: list[Node] = []
    for n in nodes:
        if n.op == "instr":
            i = plan.get(n.index)
            if i is None:
                n.target = _RN.get(n.target, n.target)
            else:
                t = _ADD.get(n.target) or _SUB[n.target]
                prod, other = n.args[i], n.args[1 - i]
                a, b = prod.args
                if n.target in _SUB:
                    if i == 0:                                  # a*b - c
                        other = _negated(other, t, n.frame, out)
                    else:                                       # c - a*b
                        a = _negated(a, t, n.frame, out)
                n.target, n.args = f"fma.rn.{t}", (a, b, other)
        out.append(n)
    g.renumber(out)
    return g


def _negated(x: Node, t: str, frame, out: list) -> Node:
    """``-x`` as a new node appended to ``out`` (a constant when ``x`` is one)."""
    if x.op == "const":
        v = np.negative(x.target)
        node = Node("const", v, (), t, 0, frame, ("c", t, v.tobytes()))
    else:
        node = Node("instr", f"neg.{t}", (x,), t, 0, frame)
    out.append(node)
    return node
