"""``precision="cuda"``: products contracted into fma after tracing, by the rule NVRTC follows.

NVRTC (``-fmad=true``, its default) turns ``a*b + c``, ``a*b - c`` and ``c - a*b`` into one
``fma`` when the product is used only by additions and subtractions (then the product itself
disappears); one other use keeps every use of it rounded twice. Of two product operands it
contracts the one with fewer uses (the first on a tie).

In ``cuda`` mode the DSL's ``+ - *`` on f32/f64 lower to the contractible rows (``add.f32``,
``mul.f32``, ...), as do the final multiplications of the CUDA-speed math forms where CUDA's
own are contractible; mathlib's internal arithmetic uses ``.rn`` rows, which never contract.
This pass fuses the contractible pairs by NVRTC's rule and writes every contractible row left
as its ``.rn`` form, so ptxas contracts nothing else: the stub's SASS is the hand-written
kernel's and ``nx.emulate`` computes what the GPU computes, bit for bit::

    g = contract(graph)          # what precision="cuda" traces to

The NumPy reference evaluation (``expr(x)``) is not contracted: it rounds twice, like NumPy.
"""
from __future__ import annotations

from .graph import Graph, Node, row_info as _ROW_INFO

__all__ = ["contract", "CONTRACTED_TYPES"]

CONTRACTED_TYPES = ("f32", "f64")
_ADD = {f"add.{t}": t for t in CONTRACTED_TYPES}
_SUB = {f"sub.{t}": t for t in CONTRACTED_TYPES}
_MUL = {f"mul.{t}": t for t in CONTRACTED_TYPES}
_RN = {name: name.replace(".", ".rn.", 1) for d in (_ADD, _SUB, _MUL) for name in d}


def _plan(g: Graph, live: list[Node]) -> dict[int, int]:
    """Node index of each add/sub that absorbs a product -> that operand's position."""
    uses: dict[int, list[Node]] = {}
    for n in live:
        for a in n.args:
            uses.setdefault(a.index, []).append(n)
    outputs = {n.index for _, n in g.outputs}

    def fusable(m: Node, t: str) -> bool:
        if m.op != "instr" or _MUL.get(m.target) != t or m.index in outputs:
            return False
        return all(_ADD.get(u.target) == t or _SUB.get(u.target) == t for u in uses[m.index])

    plan: dict[int, int] = {}
    for n in live:
        if n.op != "instr":
            continue
        t = _ADD.get(n.target) or _SUB.get(n.target)
        if t is None:
            continue
        cands = [i for i, a in enumerate(n.args) if fusable(a, t)]
        if cands:                           # fewer uses first; min keeps the first on a tie
            plan[n.index] = min(cands, key=lambda i: len(uses[n.args[i].index]))
    return plan


def contract(g: Graph) -> Graph:
    """``g`` with its contractible sums as ``fma.rn`` and the other contractible rows as ``.rn``
    (a new graph; ``g`` if it has no contractible row)."""
    nodes = g.nodes
    if not any(n.target in _RN for n in nodes if n.op == "instr"):
        return g
    live = g.live()
    plan = _plan(g, live)
    new = Graph(g.name)
    m: list = [None] * len(nodes)
    for n in nodes:
        if n.op == "input":
            new.frame = n.frame
            m[n.index] = new.input(n.target, n.dtype)
    add = new.add_instr
    for n in live:                      # already folded and merged: copy without the checks
        op = n.op
        if op == "input":
            continue
        new.frame = n.frame
        if op == "const":
            m[n.index] = new.const_canonical(n.target, n.dtype, n.key[2])
            continue
        i = plan.get(n.index)
        if i is None:
            target = _RN.get(n.target, n.target)
            m[n.index] = add(_ROW_INFO(target), tuple(m[a.index] for a in n.args), None)
            continue
        t = _ADD.get(n.target) or _SUB[n.target]
        prod, other = n.args[i], m[n.args[1 - i].index]
        a, b = m[prod.args[0].index], m[prod.args[1].index]
        if n.target in _SUB:
            if i == 0:                                          # a*b - c
                other = new.instr(f"neg.{t}", other)
            else:                                               # c - a*b
                a = new.instr(f"neg.{t}", a)
        m[n.index] = new.instr(f"fma.rn.{t}", a, b, other)
    new.params = dict(g.params)
    new.outputs = [(k, m[v.index]) for k, v in g.outputs]
    new.output_form = g.output_form
    new.frame = g.frame
    new.library = getattr(g, "library", None)     # the math library's constants (lowering.py)
    return new
