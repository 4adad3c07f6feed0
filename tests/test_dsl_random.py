"""Random formulas through the DSL's fast paths: the graph the fused operator paths build equals
the one the slow, line-recording paths build (FramedGraphTracer, used for printing), the C
lowering (native/dag_lower.h) writes what the Python lowering writes, and both backends compile.
The corpus (test_dsl_corpus.py) checks values; this checks structure over many shapes."""
from __future__ import annotations

import random

import pytest

import numptx as nx
from numptx.dsl.contract import contract
from numptx.dsl.graph import Graph
from numptx.dsl.lower import to_stack, to_stack_py
from numptx.dsl.trace import FramedGraphTracer, Proxy, TraceError

TYPES = ["f32", "f64", "f16", "bf16", "s32", "u32", "s64", "u64"]
FLOATS = ["0.0", "-0.0", "1.0", "2.5", "float('nan')", "float('inf')", "1e-45", "0.1", "3.0"]
INTS = ["0", "1", "-1", "2", "7", "(1 << 31)", "4294967295", "65536", "True"]


def _value(r: random.Random, depth: int, t: str) -> str:
    if depth <= 0 or r.random() < 0.2:
        c = r.random()
        if c < 0.6:
            return r.choice("xyz")
        return r.choice(INTS if t[0] in "su" or c < 0.8 else FLOATS)
    v = lambda: _value(r, depth - 1, t)       # noqa: E731
    k = r.random()
    if k < 0.35:
        return f"({v()} {r.choice('+-*')} {v()})"
    if k < 0.42:
        return f"({v()} / {v()})" if t[0] in "fb" else f"({v()} // {v()})"
    if k < 0.52:
        return f"nx.fma({v()}, {v()}, {v()})"
    if k < 0.68:
        return f"nx.where({_cond(r, depth - 1, t)}, {v()}, {v()})"
    if k < 0.76:
        return f"(-{v()})"
    if k < 0.82:
        return f"nx.abs({v()})"
    if k < 0.88:
        return f"nx.minimum({v()}, {v()})"
    if k < 0.94:
        return f"nx.clip({v()}, {v()}, {v()})"
    return f"nx.sqrt({v()})" if t[0] in "fb" else f"({v()} & {v()})"


def _cond(r: random.Random, depth: int, t: str) -> str:
    k = r.random()
    if k < 0.75:
        return f"({_value(r, depth, t)} {r.choice(['<', '>', '==', '!=', '<=', '>='])} " \
               f"{_value(r, depth, t)})"
    if k < 0.9:
        return f"({_cond(r, depth - 1, t)} & {_cond(r, depth - 1, t)})"
    return f"nx.logical_not({_cond(r, depth - 1, t)})"


def _formulas(seed: int, n: int) -> list[tuple[str, str]]:
    r = random.Random(seed)
    out = []
    for _ in range(n):
        t = r.choice(TYPES)
        body = _value(r, r.randint(1, 5), t)
        if r.random() < 0.3:
            body = f"({body}, {_value(r, 3, t)}, x)"
        out.append((t, f"def f(x: nx.{t}, y: nx.{t}, z: nx.{t}):\n    return {body}\n"))
    return out


def _shape(g: Graph) -> list:
    return [(n.op, n.dtype, n.target if n.op != "const" else n.key, [a.index for a in n.args])
            for n in g.nodes] + [("out", k, n.index) for k, n in g.outputs]


def _framed(expr, fm: str) -> Graph:
    """The graph the slow, line-recording paths build for the same formula."""
    g = Graph(expr.__name__)
    tr = FramedGraphTracer(g, fm)
    args = [Proxy(g.input(name, t.name), tr) for name, t in expr.all_params.items()]
    form, outs = expr._outputs(expr.fn(*args), tr)
    g.outputs = list(outs)
    return contract(g) if fm == "cuda" else g


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")   # literals NumPy rounds to inf
@pytest.mark.parametrize("seed", range(4))
def test_random_formulas_fast_paths_and_c_lowering(seed):
    traced = 0
    for t, src in _formulas(seed, 120):
        ns = {"nx": nx}
        exec(src, ns)
        for fm in nx.PRECISIONS:
            expr = nx.ptx_expr(ns["f"], precision=fm)
            try:
                g = expr.graph
            except (TraceError, ZeroDivisionError):
                continue          # an int literal out of the type's range; Python's own 0.0 / 0.0
            traced += 1
            assert _shape(g) == _shape(_framed(expr, fm)), src
            n = len(g.outputs)
            for order in (tuple(range(n)), tuple(reversed(range(n)))):
                a, b = to_stack(g, order), to_stack_py(g, order)
                assert a.words == b.words and a.input_names == b.input_names, (src, order)
            assert expr.stub().inputs and nx.ptx_expr(ns["f"], backend="ast").stub().outputs, src
    assert traced > 150
