"""numptx.search genes and variation operators: validation, reproducibility, and the property that
every program they make compiles with the real C core (sp.compile_many)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import numptx as nx
from numptx import NumptxError
from numptx import stack_ptx as sp
from numptx.search import operators as O
from numptx.search.formula import evaluate, formula_of_stub
from numptx.search.genes import LOG2E, OP_NAMES, Genes, SearchError

ALL_F64 = ["add", "sub", "mul", "div", "neg", "abs", "sq", "dup", "inv", "sqrt", "max", "min",
           "fma", "sqrtabs", "aq"]
ALL_F32 = ALL_F64 + ["exp", "exp2", "log", "log2", "sin", "cos", "tanh", "sigmoid", "logabs"]


# ---- genes ---------------------------------------------------------------------------------------
def test_genes_defaults_and_names():
    g = Genes(["add", "mul"], 3)
    assert g.names == ("x0", "x1", "x2") and g.dtype == "f32" and g.ops == ("add", "mul")
    assert g.inputs == {"x0": "f32", "x1": "f32", "x2": "f32"} and g.outputs == {"y": "f32"}
    assert g.constants == (0.5, 1.0, 2.0)
    g = Genes(["add"], names=["t", "v"], dtype="f64", constants=(0.1,))
    assert g.inputs == {"t": "f64", "v": "f64"} and g.constants == (0.1,)
    assert Genes(["add"], names=["a"], constants=(0.1,)).constants == (float(np.float32(0.1)),)


@pytest.mark.parametrize("kwargs, needle", [
    (dict(ops=["add"], n_inputs=2, dtype="f16"), "dtype="),
    (dict(ops=["add"]), "n_inputs="),
    (dict(ops=["add"], n_inputs=0), "n_inputs="),
    (dict(ops=["add"], n_inputs=2, names=["a"]), "names="),
    (dict(ops=["add"], names=["a", "a"]), "unique"),
    (dict(ops=["add"], names=["1x"]), "names="),
    (dict(ops=["add"], names=["exp"]), "reserved"),
    (dict(ops=["add"], names=["é"]), "ASCII"),          # y is an input name now (issue 26)
    (dict(ops=["add"], names=["_t0"]), "names="),
    (dict(ops=[], n_inputs=1), "ops=(): the op set is empty"),
    (dict(ops="add", n_inputs=1), "ops="),
    (dict(ops=["add", "add"], n_inputs=1), "twice"),
    (dict(ops=["ad"], n_inputs=1), "did you mean 'add'"),
    (dict(ops=["bogus"], n_inputs=1), "valid f32 op names"),
    (dict(ops=["sin"], n_inputs=1, dtype="f64"), "needs dtype 'f32'"),
    (dict(ops=["setp.lt.f32"], n_inputs=1), "only f32"),
    (dict(ops=["add.rn.f64"], n_inputs=1), "only f32"),
    (dict(ops=["add"], n_inputs=1, constants=[float("nan")]), "constants="),
    (dict(ops=["add"], n_inputs=1, constants=[1e39]), "constants="),
    (dict(ops=["add"], n_inputs=1, constants=["1"]), "constants="),
])
def test_genes_errors_name_the_argument(kwargs, needle):
    with pytest.raises(SearchError) as e:
        Genes(**kwargs)
    assert needle in str(e.value)
    assert isinstance(e.value, NumptxError)


def test_unknown_op_message_names_op_and_argument():
    with pytest.raises(SearchError, match=r"ops=: unknown op 'sinh'.*'sin'"):
        Genes(["sinh"], 1)


def test_every_short_op_has_words_for_its_dtypes():
    g32, g64 = Genes(ALL_F32, 1), Genes(ALL_F64, 1, dtype="f64")
    assert set(ALL_F32) | {"pow2"} == set(OP_NAMES)
    for g in (g32, g64):
        for name in g.ops:
            words = g.op_words(name)
            assert words and all(isinstance(w, sp.Op) for w in words)
            sp.compile([sp.input("x0"), *words], g.inputs, g.outputs)
    assert g32.op_words("exp") == [sp.const(LOG2E, "f32"), sp.instr("mul.rn.f32"),
                                   sp.instr("ex2.approx.f32")]
    assert g64.op_words("sq") == [sp.dup("f64"), sp.instr("mul.rn.f64")]
    with pytest.raises(SearchError, match="op_words"):
        g32.op_words("pow2")


def test_full_instruction_names_are_genes():
    g = Genes(["fma.rn.ftz.f32", "rsqrt.approx.f32", "add"], 2)
    assert g.op_words("rsqrt.approx.f32") == [sp.instr("rsqrt.approx.f32")]


def test_genes_dict_round_trip_through_json():
    g = Genes(["add", "sin", "fma.rn.f32"], names=["a", "b"], constants=(0.25, 3.0))
    d = json.loads(json.dumps(g.to_dict()))
    assert Genes.from_dict(d) == g and hash(Genes.from_dict(d)) == hash(g)
    with pytest.raises(SearchError, match="from_dict"):
        Genes.from_dict({"ops": ["add"]})
    with pytest.raises(SearchError, match="unknown keys"):
        Genes.from_dict({**d, "extra": 1})


def test_random_gene_is_reproducible_and_typed():
    g = Genes(ALL_F32, 2)
    a = [g.random_gene(np.random.default_rng(5)) for _ in range(3)]
    b = [g.random_gene(np.random.default_rng(5)) for _ in range(3)]
    assert a == b
    rng = np.random.default_rng(0)
    kinds = {g.random_gene(rng)[0].kind for _ in range(300)}
    assert {"input", "const", "instr"} <= kinds


# ---- operators -----------------------------------------------------------------------------------
def _progs(seed: int, genes: Genes, n: int) -> list[list[sp.Op]]:
    rng = np.random.default_rng(seed)
    return [O.random_program(genes, rng) for _ in range(n)]


def test_random_program_length_and_errors():
    g = Genes(["add"], 1)
    rng = np.random.default_rng(0)
    assert len(O.random_program(g, rng, 5)) == 5          # one op per gene for these genes
    assert O.random_program(g, rng, 0) == []
    for n in (len(O.random_program(g, rng, (2, 3))) for _ in range(20)):
        assert 2 <= n <= 3
    for bad in ((3, 2), (-1, 2), "4", (1, 2, 3), 1.5):
        with pytest.raises(SearchError, match="length="):
            O.random_program(g, rng, bad)
    with pytest.raises(SearchError, match="rng="):
        O.random_program(g, 0)
    with pytest.raises(SearchError, match="genes="):
        O.random_program(None, rng)


def test_operators_are_pure_and_reproducible():
    g = Genes(ALL_F32, 3)
    base = _progs(1, g, 20)
    frozen = [list(p) for p in base]
    for op in (O.point_mutation, O.insertion, O.deletion, O.perturb_constants, O.mutate):
        r1, r2 = np.random.default_rng(9), np.random.default_rng(9)
        assert [op(p, g, r1) for p in base] == [op(p, g, r2) for p in base]
    r1, r2 = np.random.default_rng(3), np.random.default_rng(3)
    assert [O.crossover(a, b, r1) for a, b in zip(base, base[1:])] == \
           [O.crossover(a, b, r2) for a, b in zip(base, base[1:])]
    assert base == frozen                                   # inputs untouched
    assert _progs(7, g, 5) == _progs(7, g, 5)


def test_point_insertion_deletion_shapes():
    g = Genes(["add"], 1, constants=())
    rng = np.random.default_rng(0)
    p = [sp.input("x0")] * 5
    assert len(O.insertion(p, g, rng)) == 6
    assert len(O.point_mutation(p, g, rng)) == 5
    assert 1 <= len(p) - len(O.deletion(p, g, rng)) <= 4
    assert O.deletion([], g, rng) == []
    assert len(O.point_mutation([], g, rng)) == 1


def test_crossover_is_two_point():
    rng = np.random.default_rng(0)
    a = [sp.input(i) for i in range(10)]
    b = [sp.const(float(i), "f32") for i in range(10)]
    for _ in range(50):
        c = O.crossover(a, b, rng)
        i = next((n for n, op in enumerate(c) if op.kind == "const"), None)
        if i is None:                                      # an empty segment of b
            i = next((n for n in range(len(c)) if c[n] != a[n]), len(c))
        seg = [op for op in c if op.kind == "const"]
        rest = c[i + len(seg):]
        assert c[:i] == a[:i] and rest == a[len(a) - len(rest):]        # prefix and suffix of a
        assert i <= len(a) - len(rest)
        k = b.index(seg[0]) if seg else 0
        assert c[i:i + len(seg)] == seg == b[k:k + len(seg)]           # a segment of b
    assert len(O.crossover(a, b, rng, max_length=3)) <= 3


def test_mutate_caps_length():
    g = Genes(ALL_F32, 2)
    rng = np.random.default_rng(2)
    p = O.random_program(g, rng, 40)
    for _ in range(200):
        p = O.mutate(p, g, rng, max_length=24)
        assert len(p) <= 24
    with pytest.raises(SearchError, match="max_length="):
        O.mutate(p, g, rng, max_length=0)


def test_constants_of_and_with_constants():
    g = Genes(["add", "exp"], 1)
    p = [sp.input("x0"), sp.const(0.5, "f32"), *g.op_words("add"), *g.op_words("exp"),
         sp.const(2.0, "f64"), sp.const(3, "s32")]
    c = O.constants_of(p)
    assert c.dtype == np.float64 and c.tolist() == [0.5, float(np.float32(LOG2E)), 2.0]
    q = O.with_constants(p, [0.1, 1.0, 0.1])
    assert O.constants_of(q).tolist() == [float(np.float32(0.1)), 1.0, 0.1]
    assert [op.kind for op in q] == [op.kind for op in p] and q[-1] == p[-1]
    with pytest.raises(SearchError, match=r"values\[1\]"):
        O.with_constants(p, [0.1, float("inf"), 0.1])
    with pytest.raises(SearchError, match=r"values\[0\]"):
        O.with_constants(p, [1e39, 1.0, 0.1])              # beyond f32: infinite
    with pytest.raises(SearchError, match="3 constants, got 2"):
        O.with_constants(p, [0.1, 1.0])
    assert O.constants_of([]).shape == (0,)


def test_perturb_constants_moves_only_constants():
    g = Genes(["add"], 1)
    rng = np.random.default_rng(4)
    p = [sp.input("x0"), sp.const(0.0, "f32"), sp.instr("add.rn.f32"), sp.const(1.5, "f32")]
    moved = 0
    for _ in range(50):
        q = O.perturb_constants(p, g, rng, scale=0.5)
        assert [op.kind for op in q] == [op.kind for op in p] and q[0] == p[0] and q[2] == p[2]
        moved += q != p
    assert moved > 40
    no_consts = [sp.input("x0")]
    assert O.perturb_constants(no_consts, g, rng) == no_consts
    with pytest.raises(SearchError, match="scale="):
        O.perturb_constants(p, g, rng, scale=-1.0)


def test_bad_programs_raise_search_errors():
    g = Genes(["add"], 1)
    rng = np.random.default_rng(0)
    with pytest.raises(SearchError, match="prog"):
        O.mutate("abc", g, rng)
    with pytest.raises(SearchError, match="prog"):
        O.deletion([1, 2], g, rng)
    with pytest.raises(SearchError, match="b="):
        O.crossover([], None, rng)


@pytest.mark.parametrize("ops, dtype", [(ALL_F32, "f32"), (ALL_F64, "f64")])
def test_ten_thousand_variations_all_compile(ops, dtype):
    """Property: random programs, then 10,000 mutations and crossovers, all compile with the C
    core (in compile_many batches) and print as formulas; the whole run is seed-reproducible."""
    def run(seed: int) -> list[list[sp.Op]]:
        g = Genes(ops, 3, dtype=dtype)
        rng = np.random.default_rng(seed)
        pop = [O.random_program(g, rng) for _ in range(100)]
        made = []
        while len(made) < 10_000:
            a, b = (pop[int(i)] for i in rng.integers(len(pop), size=2))
            child = O.crossover(a, b, rng, max_length=64) if rng.random() < 0.3 else \
                O.mutate(a, g, rng, max_length=64)
            pop[int(rng.integers(len(pop)))] = child
            made.append(child)
        return made

    g = Genes(ops, 3, dtype=dtype)
    made = run(11)
    assert all(len(p) <= 64 for p in made)
    npd = np.float32 if dtype == "f32" else np.float64
    X = np.array([[0.5, -1.25, 2.0], [3.0, 0.25, -0.75]], npd)
    cols = {n: X[:, j] for j, n in enumerate(g.names)}
    checked = 0
    for start in range(0, len(made), 1000):
        batch = made[start:start + 1000]
        stubs = sp.compile_many(batch, g.inputs, g.outputs)
        assert len(stubs) == len(batch)
        for k, (prog, stub) in enumerate(zip(batch, stubs)):
            text = formula_of_stub(stub, g)                # every built program prints
            if k % 20:
                continue
            # every 20th: the batch stub is the single compile's, it runs in the emulator and
            # the formula evaluates to what it computes
            assert str(stub) == str(sp.compile(prog, g.inputs, g.outputs))
            got = np.broadcast_to(nx.emulate(stub, cols, {"y": dtype})["y"], (2,))
            want = evaluate(formula_of_stub(stub, g, digits=9 if dtype == "f32" else 17), X, g)
            assert np.allclose(got, want, rtol=1e-4, atol=1e-6, equal_nan=True), (text, got, want)
            checked += 1
    assert checked == len(made) // 20
    assert run(11)[-50:] == made[-50:]


def test_variation_keeps_multi_op_genes_whole():
    """exp is const(log2 e), mul, ex2: no operator splits it or perturbs its constant, so a
    population never decays into stray * 1.4427 scalings (it did before gene-aware cuts)."""
    import numpy as np
    from numptx import stack_ptx as sp
    from numptx.search import operators as O
    from numptx.search.genes import Genes
    genes = Genes(["add", "mul", "exp", "log"], 2)
    exp, log = tuple(genes.op_words("exp")), tuple(genes.op_words("log"))
    assert genes.tokens([sp.input("x0"), *exp, *log, sp.input("x1")]) == [0, 1, 4, 7, 8]
    rng = np.random.default_rng(0)
    pop = [O.random_program(genes, rng, (4, 12)) for _ in range(200)]

    def whole(prog):             # every log2 e / ln 2 constant sits inside its own gene
        b = genes.tokens(prog)
        spans = [tuple(prog[i:j]) for i, j in zip(b, b[1:])]
        loose = [s for s in spans if len(s) == 1 and s[0] in (exp[0], log[1])]
        return not loose
    assert all(whole(p) for p in pop)
    for _ in range(3000):
        a, b = pop[int(rng.integers(len(pop)))], pop[int(rng.integers(len(pop)))]
        child = O.mutate(O.crossover(a, b, rng, genes=genes, max_length=200), genes, rng,
                         max_length=200)
        assert whole(child), child
        pop[int(rng.integers(len(pop)))] = child


def test_has_constants_agrees_with_constants_of():
    from numptx.search.operators import constants_of, has_constants, random_program
    g = Genes(["add", "mul", "exp"], 2, weights=True)
    rng = np.random.default_rng(5)
    progs = [random_program(g, rng, (1, 8)) for _ in range(200)]
    assert any(has_constants(p) for p in progs)
    progs += [[sp.input("x0")], [], [sp.input("x0"), sp.const(2.0, "f32"), sp.instr("mul.rn.f32")]]
    for p in progs:
        assert has_constants(p) == (len(constants_of(p)) > 0)
    assert not has_constants([sp.input("x0")])
    with pytest.raises(SearchError):
        has_constants("add")


def test_marked_programs_equal_program_of_the_markers_and_share_ops():
    from numptx.search.operators import ConstantSlots, random_program
    rng = np.random.default_rng(11)
    for dtype in ("f32", "f64"):
        g = Genes(["add", "mul", "sin"] if dtype == "f32" else ["add", "mul"], 2,
                  dtype=dtype, weights=True)
        progs = [random_program(g, rng, (1, 10)) for _ in range(100)]
        progs.append([sp.const(1.5, "f32"), sp.const(2.5, "f64"), sp.input("x0")])
        for p in progs:
            s = ConstantSlots(p)
            want = s.program(4096.0 + np.arange(s.count))
            assert sp.encode(s.marked(4096.0), ["x0", "x1"]).tobytes() == \
                sp.encode(want, ["x0", "x1"]).tobytes()
        a, b = ConstantSlots(progs[-1]).marked(4096.0), ConstantSlots(progs[-1]).marked(4096.0)
        assert a[0] is b[0] and a[1] is b[1]             # the marker ops are shared


def test_written_sets_bits_and_keeps_none_and_shows_the_constant():
    # before: ConstantSlots had no bit-pattern write-back (the fit wrote values one struct
    # call at a time) and an op made without its text showed as Op(0x...)
    from numptx.search.operators import ConstantSlots, constants_of
    prog = [sp.const(1.5, "f32"), sp.input("x0"), sp.instr("mul.rn.f32"),
            sp.const(2.5, "f64"), sp.const(-3.0, "f32")]
    s = ConstantSlots(prog)
    half = int(np.float32(0.5).view(np.uint32))
    out = s.written([half, int(np.float64(0.25).view(np.uint64)), None])
    assert list(constants_of(out)) == [0.5, 0.25, -3.0]
    assert out[4] is prog[4] and out[1] is prog[1]
    assert out == s.program([0.5, 0.25, -3.0])
    assert repr(out[0]) == "const(0.5, 'f32')" and repr(out[3]) == "const(0.25, 'f64')"
    assert sp.encode(out, ["x0"]).tobytes() == sp.encode(
        [sp.const(0.5, "f32"), sp.input("x0"), sp.instr("mul.rn.f32"), sp.const(0.25, "f64"),
         sp.const(-3.0, "f32")], ["x0"]).tobytes()
