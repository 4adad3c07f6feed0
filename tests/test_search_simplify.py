"""numptx.search.simplify: complexity counts the nodes of the simplified expression the real C
core's stub prints as."""
from __future__ import annotations

import numpy as np
import pytest

from numptx import stack_ptx as sp
from numptx.search import operators as O
from numptx.search.genes import Genes, SearchError
from numptx.search.simplify import complexities, complexity

G = Genes(["add", "sub", "mul", "div", "neg", "sq", "exp", "sin"], 2)


def W(g: Genes, *names) -> list[sp.Op]:
    """The words of several op genes, or inputs/constants given as str/float."""
    out: list[sp.Op] = []
    for n in names:
        if isinstance(n, float):
            out.append(g.const(n))
        elif n in g.names:
            out.append(sp.input(n))
        else:
            out.extend(g.op_words(n))
    return out


@pytest.mark.parametrize("words, n", [
    (("x0",), 1),
    (("x0", "exp"), 2),                        # exp(x0): the macro's constant is no node
    (("x0", "x1", "add"), 3),
    (("x0", "sq"), 2),                         # x0**2
    (("x0", "x1", "mul", "x1", "mul", "sin", "x1", "add", "x0", "mul", "neg"), 8),
    (("add", "x0", "x1"), 1),                  # dead ops count nothing: x1
])
def test_known_complexities(words, n):
    assert complexity(W(G, *words), G) == n


def test_complexities_batch_equals_one_at_a_time():
    rng = np.random.default_rng(5)
    progs = [O.random_program(G, rng, (3, 20)) for _ in range(50)]
    got = complexities(progs, G)
    assert got.dtype == np.int64 and got.shape == (50,)
    assert list(got) == [complexity(p, G) for p in progs]
    assert list(complexities([sp.encode(p) for p in progs], G)) == list(got)


def test_bad_genes():
    with pytest.raises(SearchError, match="genes="):
        complexity([], "f32")
