"""numptx.search.breed: the loop's children. Every child compiles, its gene split is what
Genes.tokens finds in its ops (so a resumed run, which splits afresh, goes on as the
uninterrupted one), chunks do not change the children, and revary turns duplicates into new
programs. The compiles are the real C core's."""
from __future__ import annotations

import numpy as np
import pytest

from numptx import search
from numptx import stack_ptx as sp
from numptx.search import checkpoint as ck
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


@pytest.mark.parametrize("variation", ["tree", "linear"])
@pytest.mark.parametrize("genes", [RISKY, Genes(["add", "sub", "mul", "div", "sq"], 3,
                                                dtype="f64")], ids=["f32-risky", "f64"])
def test_children_compile_fit_and_split_as_tokens(genes, variation):
    splits, made = _generations(genes, 1, n=500, gens=10, revary=1, variation=variation)
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


# ---- subtree crossover -------------------------------------------------------------------
def _values(prog, genes, X):
    return sp.interpret([prog], {n: X[:, i] for i, n in enumerate(genes.names)},
                        genes.outputs, device="cpu")["y"][0]


def test_a_subtree_is_the_genes_that_make_one_value():
    """_subtree's span, run alone, pushes exactly one value: the root's (a whole expression
    of the postfix program, as a subtree of the tree is)."""
    genes = Genes(["add", "mul", "sin", "exp"], 2)
    b = _breeder(genes, variation="tree")
    rng = np.random.default_rng(3)
    u = iter(rng.random(100_000).tolist()).__next__
    progs = list(b.random_programs(rng, 200, (2, 12)))
    for prog in progs:
        g = b.parent(prog)[1]
        i, j = b._subtree(g, u)
        assert 0 <= i < j <= len(g)
        depth = 0
        for gene in g[i:j]:
            c, p = b._arity(gene)
            if depth < c:               # a root whose operands the program never made
                assert i == 0
                depth = c
            depth += p - c
        assert depth >= 1


def test_subtree_crossover_children_compile_fit_and_split_as_tokens():
    """Children of subtree crossover: within max_length, split as tokens, all compile."""
    splits, made = _generations(RISKY, 2, n=400, gens=8, revary=1, variation="tree", crossover=1.0)
    assert all(len(p) <= 24 for p in made[400:])
    stubs = sp.compile_many(made, RISKY.inputs, RISKY.outputs)
    assert len(stubs) == len(made)
    for e in splits:
        assert [op for x in e[1] for op in x] == e[0]
        assert list(np.cumsum([0] + [len(x) for x in e[1]])) == RISKY.tokens(e[0])


def test_subtree_crossover_swaps_whole_expressions():
    """(x0 + sin(x1)) crossed with (exp(x0) * x1) gives programs whose values are the first
    parent's with one of its subexpressions replaced by one of the second's."""
    genes = Genes(["add", "mul", "sin", "exp"], 2)
    a = [*genes.input_words("x0"), *genes.input_words("x1"), *genes.op_words("sin"),
         *genes.op_words("add")]
    c = [*genes.input_words("x0"), *genes.op_words("exp"), *genes.input_words("x1"),
         *genes.op_words("mul")]
    b = _breeder(genes, variation="tree", crossover=1.0, mutation=0.0)
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (16, 2)).astype(np.float32)
    x0, x1 = X[:, 0], X[:, 1]
    sub_c = [x0, np.exp(x0), x1, np.exp(x0) * x1]
    want = []
    for s in sub_c:                                  # a's subtree x0, x1, sin(x1), the root
        want += [s + np.sin(x1), x0 + np.sin(s), x0 + s, s]
    seen = set()
    for progs, _ in b.children(rng, [a] * 400, [c] * 400, size=400, scored=set()):
        for p in progs:
            v = _values(p, genes, X)
            hits = [k for k, w in enumerate(want) if np.allclose(v, w, rtol=1e-5, atol=1e-5)]
            assert hits, formula(p, genes)
            seen.update(hits)
    assert len(seen) >= 12                             # most of the 16 swaps are made


def test_tree_point_mutations_keep_the_arity():
    """Under "tree" a point mutation puts a push for a push and an op of as many operands for
    an op: a mutation-only child of one gene's change has its parent's arity profile."""
    genes = Genes(["add", "mul", "div", "sin", "exp"], 2)
    b = _breeder(genes, variation="tree", crossover=0.0, mutation=1.0, max_length=64)
    rng = np.random.default_rng(5)
    parents = list(b.random_programs(rng, 300, (3, 10)))
    profiles = {id(p): [b._arity(x) for x in b.parent(p)[1]] for p in parents}
    same = changed = 0
    for progs, _ in b.children(rng, parents, parents, size=300, scored=set()):
        for a, c in zip(parents, progs):
            pa, pc = profiles[id(a)], [b._arity(x) for x in b._split(c)[1]]
            if len(pa) == len(pc) and pa != pc:
                changed += 1
            elif pa == pc:
                same += 1
    assert same > 100 and changed == 0


def _words(prog):
    return [op.raw or op.name for op in prog]


@pytest.mark.parametrize("variation", ["tree", "linear"])
def test_variation_is_saved_and_resumes_as_it_ran(tmp_path, variation):
    """A checkpoint holds variation=: 2 generations, saved, resumed for 1, are the 3 of an
    uninterrupted run; the two variations make other populations."""
    X = np.random.default_rng(0).uniform(-1, 1, (64, 1)).astype(np.float32)
    y = X[:, 0] ** 3 + X[:, 0]
    run = dict(population=60, seed=3, device="cpu", variation=variation)
    full = search.regress(X, y, ["add", "mul", "sin"], generations=3, **run)
    part = search.regress(X, y, ["add", "mul", "sin"], generations=2, **run)
    path = tmp_path / "run.nxck"
    part.save(path)
    assert ck.read(str(path))["config"]["variation"] == variation
    more = search.resume(path, generations=1)
    assert more._search.cfg.variation == variation
    assert [_words(c.program) for c in more.population] == \
        [_words(c.program) for c in full.population]
    other = search.regress(X, y, ["add", "mul", "sin"], generations=3,
                           **(run | {"variation": {"tree": "linear", "linear": "tree"}[variation]}))
    assert [_words(c.program) for c in other.population] != \
        [_words(c.program) for c in full.population]


def test_a_checkpoint_from_before_variation_resumes_linear(tmp_path):
    X = np.random.default_rng(1).uniform(-1, 1, (64, 1)).astype(np.float32)
    y = X[:, 0] ** 2 - X[:, 0]
    run = dict(population=60, seed=4, device="cpu", variation="linear")
    full = search.regress(X, y, ["add", "sub", "mul"], generations=3, **run)
    part = search.regress(X, y, ["add", "sub", "mul"], generations=2, **run)
    path = tmp_path / "old.nxck"
    part.save(path)
    st = ck.read(str(path))
    del st["config"]["variation"]
    ck.write(str(path), st)
    more = search.resume(path, generations=1)
    assert more._search.cfg.variation == "linear"
    assert [_words(c.program) for c in more.population] == \
        [_words(c.program) for c in full.population]


@pytest.mark.parametrize("bad", ["subtree", None, 1])
def test_a_bad_variation_is_a_search_error_naming_it(bad):
    X = np.zeros((8, 1), np.float32)
    with pytest.raises(SearchError, match="variation="):
        search.regress(X, X[:, 0], ["add"], variation=bad, device="cpu")
    with pytest.raises(SearchError, match="variation="):
        Breeder(Genes(["add"], 1), crossover=0.5, mutation=0.5, max_length=8, variation=bad)


def test_auto_variation_is_tree_from_tree_rows_and_linear_below():
    """regress's default variation="auto": a run over TREE_ROWS rows or more is the tree run of
    the same seed, one over fewer the linear run, child for child."""
    from numptx.search.config import TREE_ROWS, variation_for
    assert (variation_for("auto", TREE_ROWS), variation_for("auto", TREE_ROWS - 1),
            variation_for("auto", None), variation_for("tree", 1),
            variation_for("linear", 10 ** 6)) == ("tree", "linear", "linear", "tree", "linear")
    for rows, same in ((TREE_ROWS, "tree"), (TREE_ROWS - 1, "linear")):
        X = np.random.default_rng(5).uniform(-1, 1, (rows, 1)).astype(np.float32)
        y = X[:, 0] ** 3 + X[:, 0]
        pops = {}
        for v in ("auto", "tree", "linear"):
            r = search.regress(X, y, ["add", "mul", "sin"], generations=3, population=60,
                               seed=2, device="cpu", variation=v)
            pops[v] = [_words(c.program) for c in r.population]
        assert pops["auto"] == pops[same]
        assert pops["tree"] != pops["linear"]


def test_a_bad_variation_names_the_choices():
    from numptx.search.config import variation_for
    for bad in ("Tree", None, 3):
        with pytest.raises(SearchError, match="variation=.*'auto', 'tree' or 'linear'"):
            variation_for(bad, 500)
    X = np.zeros((8, 1), np.float32)
    with pytest.raises(SearchError, match="variation='sideways'.*'auto'.*'tree'.*'linear'"):
        search.regress(X, X[:, 0], ["add"], variation="sideways", device="cpu")
    with pytest.raises(SearchError, match="'tree' or 'linear'"):
        Breeder(Genes(["add"], 1), crossover=0.5, mutation=0.5, max_length=8, variation="auto")


@pytest.mark.parametrize("rows", [120, 40])
def test_an_auto_run_saves_the_variation_it_ran_and_resumes_as_it_ran(tmp_path, rows):
    """The checkpoint of a variation="auto" run holds what "auto" resolved to (tree over 120
    rows, linear over 40), and 2 generations, saved, resumed for 1, are the 3 of an
    uninterrupted run (islands and restarts too)."""
    X = np.random.default_rng(6).uniform(-1, 1, (rows, 1)).astype(np.float32)
    y = X[:, 0] ** 3 - X[:, 0]
    for extra in ({}, {"islands": 3}, {"restart": 1}):
        run = dict(population=60, seed=7, device="cpu") | extra
        full = search.regress(X, y, ["add", "mul", "sin"], generations=3, **run)
        part = search.regress(X, y, ["add", "mul", "sin"], generations=2, **run)
        ran = "tree" if rows >= 100 else "linear"
        assert part._search.cfg.variation == ran and part._search.breeder.tree == (ran == "tree")
        path = tmp_path / f"auto{rows}{len(extra)}.nxck"
        part.save(path)
        assert ck.read(str(path))["config"]["variation"] == ran
        more = search.resume(path, generations=1)
        assert [_words(c.program) for c in more.population] == \
            [_words(c.program) for c in full.population]
