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

**Parts planned first.** ``nx.value_and_grad`` / ``grad`` / ``jacobian`` trace ``f`` and its
derivatives into one graph; the derivative gives some of ``f``'s products other uses, and by
the rule over the whole graph their sums would round differently from ``f``'s own. So the
derivative marks ``f``'s value nodes (:func:`plan_first`) and the fusions are planned part by
part: first the subgraph of the first marked roots, with uses counted among its nodes only (the
fusions ``f`` alone gets, bit for bit), then each further part, then the whole graph; a sum is
decided in the first part that holds it. A product fused in an earlier part that has a use
other than a sum in a later one stays as its own ``mul.rn`` for the uses not fused::

    plan_first(g, [value_node])   # while tracing; contract(g) then plans its subgraph first
"""
from __future__ import annotations

import weakref
from typing import Sequence

import numpy as np

from .graph import Graph, Node

__all__ = ["contract", "plan_first", "CONTRACTED_TYPES"]

CONTRACTED_TYPES = ("f32", "f64")
_ADD = {f"add.{t}": t for t in CONTRACTED_TYPES}
_SUB = {f"sub.{t}": t for t in CONTRACTED_TYPES}
_MUL = {f"mul.{t}": t for t in CONTRACTED_TYPES}
_RN = {name: name.replace(".", ".rn.", 1) for d in (_ADD, _SUB, _MUL) for name in d}

#: graph -> its parts' roots, in marking order (plan_first); taken by contract
_FIRST: "weakref.WeakKeyDictionary[Graph, list[tuple[Node, ...]]]" = weakref.WeakKeyDictionary()


def plan_first(g: Graph, roots: Sequence[Node]) -> None:
    """Have :func:`contract` plan the fusions of the subgraph of ``roots`` (nodes of ``g``)
    before the rest, as if they were a formula's outputs: what ``nx.value_and_grad`` marks while
    tracing, so the value rounds as ``f``'s own stub. Parts marked earlier are planned first::

        plan_first(graph, [value.node])
    """
    _FIRST.setdefault(g, []).append(tuple(roots))


def _subgraph(nodes: list[Node], roots: set[int]) -> tuple[list[bool], dict[int, list[Node]]]:
    """Which nodes ``roots`` depend on, and each one's users among them."""
    member = [False] * len(nodes)
    for i in roots:
        member[i] = True
    uses: dict[int, list[Node]] = {}
    for n in reversed(nodes):          # creation order is topological: one backward sweep
        if member[n.index]:
            for a in n.args:
                member[a.index] = True
                uses.setdefault(a.index, []).append(n)
    return member, uses


def _fusable(m: Node, t: str, uses: dict[int, list[Node]], roots: set[int]) -> bool:
    """A product of type ``t``, not a root, used only by sums and differences of type ``t``."""
    if m.op != "instr" or _MUL.get(m.target) != t or m.index in roots:
        return False
    return all(_ADD.get(u.target) == t or _SUB.get(u.target) == t for u in uses[m.index])


def _plan(g: Graph, parts: list[tuple[Node, ...]]) -> dict[int, int]:
    """Node index of each add/sub that absorbs a product -> that operand's position. Part by
    part (``parts``, then the outputs): the sums of each part's subgraph not decided before,
    with uses counted within it and every root so far kept as a value."""
    nodes = g.nodes
    plan: dict[int, int] = {}
    roots: set[int] = set()
    decided = [False] * len(nodes)
    for part in (*parts, tuple(n for _, n in g.outputs)):
        roots.update(n.index for n in part if n.index < len(nodes) and nodes[n.index] is n)
        member, uses = _subgraph(nodes, roots)
        for n in nodes:
            if not member[n.index] or decided[n.index] or n.op != "instr":
                continue
            t = _ADD.get(n.target) or _SUB.get(n.target)
            if t is None:
                continue
            cands = [i for i, a in enumerate(n.args) if _fusable(a, t, uses, roots)]
            if cands:                       # fewer uses first; min keeps the first on a tie
                plan[n.index] = min(cands, key=lambda i: len(uses[n.args[i].index]))
        decided = member
    return plan


def contract(g: Graph) -> Graph:
    """``g`` with its contractible sums as ``fma.rn`` and the other contractible rows as ``.rn``,
    rewritten in place (nodes keep their identity; a ``neg`` node is inserted where a
    difference needs one); the parts marked with :func:`plan_first` are planned first."""
    nodes = g.nodes
    parts = _FIRST.pop(g, [])
    if not any(n.target in _RN for n in nodes if n.op == "instr"):
        return g
    plan = _plan(g, parts)
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
