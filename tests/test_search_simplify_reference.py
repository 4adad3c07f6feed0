"""numptx.search.simplify and numptx.search.algebra against references of their own: each
complexity equals the distinct nodes of the full-precision text counted from its Python syntax
tree, the line-by-line statement reader finds what the stub pattern finds, the flattened lazy
keys order nodes as the nested keys of :func:`algebra.make_key` do, and the garbage collector
is left as it was found."""
from __future__ import annotations

import ast

import numpy as np
import pytest

from numptx import stack_ptx as sp
from numptx.search import algebra
from numptx.search import operators as O
from numptx.search.algebra import CALL, KEY_DEPTH, NUM, PROD, VAR, Alg, parse_stub
from numptx.search.genes import Genes, SearchError
from numptx.search.simplify import complexities, complexity, simplified

GENES = [Genes(["add", "sub", "mul", "div", "neg", "sq", "exp", "sin", "inv", "max", "abs", "fma"],
               2),
         Genes(["add", "sub", "mul", "div", "exp", "log", "sin", "cos"], 1),
         Genes(["add", "sub", "mul", "div", "exp", "log", "sin", "cos", "sq", "min"], 4),
         Genes(["add", "sub", "mul", "div", "neg", "abs", "sq", "inv", "sqrt", "max", "fma"], 3,
               dtype="f64")]


def _programs(g: Genes, seed: int, n: int, length=(2, 40)) -> list[list[sp.Op]]:
    """Random programs and children of them (crossover, mutation), as a search makes them."""
    rng = np.random.default_rng(seed)
    progs = [O.random_program(g, rng, length) for _ in range(n)]
    return progs + [O.mutate(O.crossover(a, b, rng), g, rng) for a, b in zip(progs, progs[1:])]


def _text_count(text: str) -> int:
    """The distinct nodes of a simplified text read as Python (the module docstring's rule):
    each input, number (a negative one too), operator, unary minus and call; ``x**n`` one node
    with its base, ``1/x`` one with its denominator; ``(_t0 := e)`` binds a name to ``e``."""
    bound: dict[str, str] = {}
    seen: set[str] = set()

    def visit(node: ast.AST) -> str:
        if isinstance(node, ast.NamedExpr):
            bound[node.target.id] = key = visit(node.value)
            return key
        if isinstance(node, ast.Name) and node.id in bound:
            return bound[node.id]
        if isinstance(node, ast.Name):
            key = f"var {node.id}"
        elif isinstance(node, ast.Constant):
            key = f"num {float(node.value)!r}"
        elif isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
            key = f"num {-float(node.operand.value)!r}"
        elif isinstance(node, ast.UnaryOp):
            key = f"neg({visit(node.operand)})"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            key = f"pow({visit(node.left)}, {node.right.value!r})"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) \
                and isinstance(node.left, ast.Constant) and node.left.value == 1:
            key = f"inv({visit(node.right)})"
        elif isinstance(node, ast.BinOp):
            key = f"{type(node.op).__name__}({visit(node.left)}, {visit(node.right)})"
        else:
            assert isinstance(node, ast.Call), ast.dump(node)
            key = f"{node.func.id}({', '.join(visit(a) for a in node.args)})"
        seen.add(key)
        return key
    visit(ast.parse(text, mode="eval").body)
    return len(seen)


@pytest.mark.parametrize("gi", range(len(GENES)))
def test_complexities_count_the_full_precision_texts_nodes(gi):
    """Property: on random programs and their children, complexities (one batch, a warm cache)
    equals the reference count of simplified(digits=17)'s text, and one program at a time."""
    g = GENES[gi]
    progs = _programs(g, 100 + gi, 150)
    got = complexities(progs, g)
    checked = 0
    for p, k in zip(progs, got.tolist()):
        text = simplified(p, g, digits=17)
        if "nan" in text or "inf" in text:       # NaN and inf print as names, -inf as -name
            continue
        assert k == _text_count(text), text
        checked += 1
    assert checked > 250
    assert [complexity(p, g) for p in progs[::10]] == got[::10].tolist()


def test_the_reference_count_reads_the_docstrings_examples():
    assert _text_count("x0*(0.5*x0 + 0.99999*sin(x1))") == 9
    assert _text_count("0.5*x0 + 0.5*x1") == 6
    assert _text_count("x0**3 - 1/x0 + -2*x0") == 7          # x0, **3, 1/, -, -2, *, +
    assert _text_count("(_t0 := sin(x0) + 1)*_t0") == 5


# ---- the statement reader ------------------------------------------------------------------------
def _read(how, text: str) -> list:
    return [(type(d[0]).__name__, str(d[0])) if len(d) == 2 else d for d in how(text)]


ODD = ["{\n.reg .f32 %_s0;\n\nmov.f32 %_s0, 0f3F800000;\n  mov.f32 %y, %_s0;\n}",
       "mov.f32 %_s0, 0f3F800000 ;\nmov.f32 %y, %_s0;",
       "mov.f32\t%_s0, 0f3F800000;\nmov.f32 %y, %_s0; mov.f32 %y, %x0;",
       "mov.f32 %_s0, 0f3F800000;mov.f32 %_s1, 0f3F800000;\nmov.f32 %y,\n %_s0;",
       "{\n.reg .f32 %_s0;\nret;\nmov.f32 %_s0, 0fZZ800000;\nmov.f32 %y, %_s0;",
       "{\n.reg .f32 %_s0;\nmov.f32 %_s0, 0f3F8000000;\nmov.f32 %y, %_s0;",
       "{\n.reg .f32 %_s0;\nbogus.op %_s0, %x0;\nmov.f32 %y, %_s0;",
       "{\n.reg .f32 %_s0;\nmov.f32 %_s0, 0f3F800000\n;\nmov.f32 %y, %_s0;",
       "\n\n{\n.reg .f32 %_s0;\n.reg .f32 %_s1;\nmov.f32 %_s0, 0f3F800000;\n}\n",
       "{\n.reg .f32 %_s0;\n\n.reg .f32 %_s1;\nmov.f32 %_s0, 0f3F800000;\nmov.f32 %y, %_s0;\n}",
       "{ mov.f32 %y, %x0;\n.reg .f32 %_s0;\nmov.f32 %y, %x0;\n}",
       "{\n.reg .f32 %_s0;\nmov.f32 %_s0, 0f3F800000;\nmov.f32 %_s2, %_s0, 0f3F800000;\n}",
       "{\n.reg .f32 %_s0;\nmov.f32 %_s0, 0f3F800000;\nmov.f32 %y, %_s0\n}"]


def test_the_line_reader_finds_what_the_pattern_finds():
    """Property: on compiled stubs (twice: the second reads from the caches) and on texts of
    odd layouts, the line reader gives the pattern's statements, errors where they come."""
    g = GENES[0]
    texts = [str(s) for s in sp.compile_many(_programs(g, 7, 60), g.inputs, g.outputs)] + ODD
    for text in texts + texts:
        assert _read(algebra._statements, text) == _read(algebra._statements_of, text), text


@pytest.mark.parametrize("text, error", [(ODD[4], "0fZZ800000"), (ODD[6], "bogus.op"),
                                         (ODD[8], "no output")])
def test_unreadable_statements_raise_where_they_come(text, error):
    with pytest.raises(SearchError, match=error):
        parse_stub(text, Alg(GENES[0]), {})


# ---- the canonical order ----------------------------------------------------------------------
def _nested_keys(alg: Alg) -> list[tuple]:
    """Each node's key as make_key builds it (children's keys nested), the reference order."""
    keys: list[tuple] = []
    for i, (kind, data) in enumerate(zip(alg.kind, alg.data)):
        if kind == NUM:
            keys.append((NUM, 0, algebra.fkey(float("nan") if data == "nan" else data)))
            continue
        if kind == VAR:
            keys.append((VAR, 0, alg.index[data]))
            continue
        if kind == PROD:
            shallow = (tuple((keys[b], e) for b, e in data),)
        elif kind == CALL:
            shallow = (data[0], tuple(keys[a] for a in data[1]))
        else:
            shallow = (tuple((keys[m], algebra.fkey(k)) for k, m in data[1]),
                       algebra.fkey(data[0]))
        alg.keyof(i)                                          # its depth, made with the key
        keys.append(algebra.make_key(kind, shallow, alg.depth[i], alg.digestof(i)))
    return keys


def test_lazy_flat_keys_order_nodes_as_nested_keys_do():
    """Property: over every node of random programs (and chains past KEY_DEPTH), sorting by
    Alg.keyof gives the order of make_key's nested keys; equal keys only for one node."""
    g = GENES[2]
    chain = [sp.instr("sin.approx.f32")] * (KEY_DEPTH + 3)
    progs = _programs(g, 11, 80) + [[sp.input("x0"), *chain, sp.input("x1"), *chain,
                                     *g.op_words("add")]]
    alg, memo = Alg(g), {}
    for s in sp.compile_many(progs, g.inputs, g.outputs):
        parse_stub(str(s), alg, memo)
    nested = _nested_keys(alg)
    assert any(k[1] == 1 for k in nested)                    # deep nodes too
    ids = list(range(len(alg.kind)))
    np.random.default_rng(3).shuffle(ids)
    assert sorted(ids, key=alg.keyof) == sorted(ids, key=nested.__getitem__)
    assert len({alg.keyof(i) for i in ids}) == len(ids)
