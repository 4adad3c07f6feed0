"""numptx.search.breed: the loop's children. Every child compiles, its gene split is what
Genes.tokens finds in its ops (so a resumed run, which splits afresh, goes on as the
uninterrupted one), chunks do not change the children, and revary turns duplicates into new
programs. The compiles are the real C core's."""
from __future__ import annotations

import numpy as np
import pytest

from numptx import search
from numptx import stack_ptx as sp
from numptx.search import operators as O
from numptx.search.breed import BLOCK, Breeder
from numptx.search.formula import canonical_keys, formula
from numptx.search.genes import LN2, LOG2E, Genes, SearchError

# log2 (lg2) starts log (lg2, ln 2, mul) and a constant of log2 e starts exp (then mul, ex2 =
# exp2): "risky" genes, which merge with what a cut or an insertion puts after them into one
# longer gene; the few ops and listed constants make that happen many times a run
RISKY = Genes(["mul", "exp", "exp2", "log", "log2", "sigmoid", "sq"], 1,
              constants=(LOG2E, -LOG2E, LN2))


def _breeder(genes: Genes, **kw) -> Breeder:
    opts = dict(crossover=0.5, mutation=0.9, max_length=24, revary=0)
    return Breeder(genes, **(opts | kw))


def _generations(genes: Genes, seed: int, n: int = 300, gens: int = 6, **kw):
    """Children of children, ``gens`` generations of ``n``: (the splits the breeder kept of
    each child, every child made)."""
    b = _breeder(genes, **kw)
    rng = np.random.default_rng(seed)
    pop = list(b.random_programs(rng, n, (2, 10)))
    made, splits = list(pop), list(b.split.values())
    scored: set = set()
    for _ in range(gens):
        pa = [pop[i] for i in rng.integers(n, size=n)]
        pb = [pop[i] for i in rng.integers(n, size=n)]
        pop = []
        for progs, keys in b.children(rng, pa, pb, size=50, scored=scored):
            pop += progs
            scored.update(keys)
        made += pop
        splits += b.split.values()
    return splits, made


@pytest.mark.parametrize("genes", [RISKY, Genes(["add", "sub", "mul", "div", "sq"], 3,
                                                dtype="f64")], ids=["f32-risky", "f64"])
def test_children_compile_fit_and_split_as_tokens(genes):
    splits, made = _generations(genes, 1, n=500, gens=10, revary=1)
    assert all(len(p) <= 24 for p in made[500:])
    stubs = sp.compile_many(made, genes.inputs, genes.outputs)
    assert len(stubs) == len(made)
    for p in made[::7]:
        assert str(sp.compile(p, genes.inputs, genes.outputs)) == str(stubs[made.index(p)])
    # the split each child keeps is genes.tokens of its ops (with RISKY, a concatenation of
    # the parents' genes would differ for some children: lg2 + ln 2 + mul is one log gene)
    assert len(splits) == len(made)
    for e in splits:
        assert [op for x in e[1] for op in x] == e[0]
        want = genes.tokens(e[0])
        assert list(np.cumsum([0] + [len(x) for x in e[1]])) == want
    # no child cuts a gene: every multi-op span is a whole gene of the genes
    words = {tuple(genes.op_words(n)) for n in genes.ops}
    for p in made:
        t = genes.tokens(p)
        assert all(j - i == 1 or tuple(p[i:j]) in words for i, j in zip(t, t[1:]))


def test_the_same_seed_gives_the_same_children_whatever_the_chunks():
    g = Genes(["add", "mul", "exp", "sin"], 2)
    runs = []
    for size in (1, 7, BLOCK, 10_000):
        b = _breeder(g, revary=2)
        rng = np.random.default_rng(3)
        pop = list(b.random_programs(rng, 150, (2, 8)))
        got = [(sp.dumps(p), k) for progs, keys in
               b.children(rng, pop, pop[::-1], size=size, scored=set())
               for p, k in zip(progs, keys)]
        runs.append((got, rng.bit_generator.state["state"]))
    assert all(r == runs[0] for r in runs[1:])
    assert len(runs[0][0]) == 150


def test_keys_are_the_canonical_keys_and_revary_makes_more_new_children():
    g = Genes(["add", "sub", "mul"], 1)
    news = []
    for revary in (0, 2):
        b = _breeder(g, revary=revary)
        rng = np.random.default_rng(0)
        pop = list(b.random_programs(rng, 200, (2, 6)))
        scored = set(canonical_keys(pop, g))         # the parents are scored
        progs, keys = [], []
        for p, k in b.children(rng, pop, pop[1:] + pop[:1], size=64, scored=scored):
            progs += p
            keys += k
        assert keys == canonical_keys(progs, g)
        news.append(len(set(keys) - scored))
        assert (b.revaried > 0) == (revary > 0)
    assert news[1] > news[0]


def test_random_programs_end_on_an_op_and_keep_their_length():
    g = Genes(["add", "exp"], 2)
    b = _breeder(g)
    progs = list(b.random_programs(np.random.default_rng(2), 200, (1, 5)))
    words = [tuple(g.op_words(n)) for n in g.ops]
    for p in progs:
        t = g.tokens(p)
        assert 1 <= len(t) - 1 <= 5
        if len(t) > 2:
            assert tuple(p[t[-2]:]) in words
    # made as asked for: taking them in pieces gives the same programs
    it = b.random_programs(np.random.default_rng(2), 200, (1, 5))
    assert [sp.dumps(p) for p in progs] == [sp.dumps(next(it)) for _ in range(200)]


def test_constants_are_those_of_sp_const_and_never_negative_zero():
    for dtype in ("f32", "f64"):
        g = Genes(["add"], 1, dtype=dtype, constants=(0.0, 1.0))
        _, made = _generations(g, 5, n=100, gens=4)
        consts = [op for p in made for op in p if len(O.constants_of([op]))]
        assert len(consts) > 100
        for op in consts[::5]:
            v = float(O.constants_of([op])[0])
            assert op == sp.const(v, dtype) and repr(op) == repr(sp.const(v, dtype))
            assert not (v == 0 and np.signbit(v))


def test_revary_is_an_option_of_the_api():
    X = np.linspace(-1, 1, 20, dtype=np.float32)[:, None]
    y = X[:, 0] ** 2
    r = search.regress(X, y, ["add", "mul"], population=40, generations=2, seed=0,
                       device="cpu", revary=0)
    assert r._search.cfg.revary == 0 and r._search.breeder.revaried == 0
    for bad in (-1, 1.5, True):
        with pytest.raises(SearchError, match="revary="):
            search.regress(X, y, ["add"], population=4, generations=1, device="cpu",
                           revary=bad)


def test_effective_genes_are_those_that_feed_the_output():
    g = Genes(["add", "mul", "sq", "exp"], 2)
    b = _breeder(g)
    x0, x1 = (sp.input("x0"),), (sp.input("x1"),)
    add, mul, sq, exp = (tuple(g.op_words(n)) for n in ("add", "mul", "sq", "exp"))
    c = (sp.const(2.0, "f32"),)
    assert b.effective([x0, x1, add]) == [0, 1, 2]
    assert b.effective([x0, x1, add, c]) == [3]                  # the last push is the output
    assert b.effective([c, x0, x1, mul]) == [1, 2, 3]            # 2.0 stays below, unread
    assert b.effective([x0, mul]) == [0]                         # mul lacks an operand: no-op
    assert b.effective([x1, x0, sq, exp]) == [1, 2, 3]           # dup, mul; const, mul, ex2
    assert b.effective([]) is None and b.effective([x0, (sp.drop("f32"),)]) is None
    # property: a push (input or constant) that is not effective, replaced by another push,
    # changes nothing the program computes
    # (its formula: the stub's DAG; the stub text itself may differ, as a dead constant equal
    # to a live one can be the one the DAG interned first)
    rng = np.random.default_rng(4)
    progs = list(b.random_programs(rng, 400, (3, 10)))
    checked = 0
    for p in progs:
        genes = b.parent(p)[1]
        eff = b.effective(genes)
        for i, x in enumerate(genes if eff is not None else ()):
            if i not in eff and len(x) == 1 and x[0].kind in ("input", "const"):
                q = [op for y in genes[:i] + [(sp.const(123.25, "f32"),)] + genes[i + 1:]
                     for op in y]
                assert formula(p, g) == formula(q, g)
                checked += 1
    assert checked > 100
