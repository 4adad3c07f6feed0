"""numptx.learn.features (issue 25, item 2): program features from words and from runs.

Closed forms where there are some: the n-gram counts of a hand-worked program against the
documented hash computed here in plain Python, the run columns against a direct
``sp.interpret``, the projection against its seeded matrix product; the live ops against the
interpreter (a program without its dead ops computes the same bits) and the vectorized stack
run against the op-by-op one."""
from __future__ import annotations

import hashlib
import math
import pickle
import subprocess
import sys
import zlib

import numpy as np
import pytest

from numptx import stack_ptx as sp
from numptx.learn import LearnError
from numptx.learn.features import (WORD_COLUMNS, Probe, ProgramSpace, features, live_ops,
                                   projection)
from numptx.search import operators as O
from numptx.search.genes import Genes

GENES = Genes(["add", "sub", "mul", "fma", "sin", "exp", "sq", "dup", "sigmoid"], 2)
X = np.random.default_rng(7).uniform(-2, 2, (300, 2))
PROBE = Probe.from_data(X, ["x0", "x1"], rows=16, seed=3)
W = len(WORD_COLUMNS)
x0, x1 = sp.input("x0"), sp.input("x1")
ADD, MUL, SIN = sp.instr("add.rn.f32"), sp.instr("mul.rn.f32"), sp.instr("sin.approx.f32")
F32 = "f32"


def _programs(n: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [O.random_program(GENES, rng) for _ in range(n)]


def _words(progs, genes=GENES, buckets=8) -> np.ndarray:
    """The six word columns after the n-gram buckets."""
    return features(progs, genes, buckets=buckets)[:, buckets:]


def _transformed(progs, probe=PROBE, genes=GENES) -> np.ndarray:
    cols = {n: probe.columns[n].astype(np.float32) for n in genes.inputs}
    v = sp.interpret(progs, cols, genes.outputs, device="cpu")["y"].astype(np.float64)
    bad = ~np.isfinite(v)
    with np.errstate(all="ignore"):
        return np.where(bad, 0.0, np.sign(v) * np.log1p(np.abs(v))), bad.mean(1)


# ---- shape, dtype, determinism ------------------------------------------------------------------
def test_shape_and_dtype():
    progs = _programs(20)
    F = features(progs, GENES)
    assert F.dtype == np.float32 and F.shape == (20, 64 + W)
    assert features(progs, GENES, buckets=5, ngrams=(1, 2, 3)).shape == (20, 5 + W)
    F = features(progs, GENES, PROBE)
    assert F.dtype == np.float32 and F.shape == (20, 64 + W + 16 + 1)
    assert features(progs, GENES, PROBE, project=4).shape == (20, 64 + W + 4 + 1)
    assert features([], GENES).shape == (0, 64 + W)
    assert features([], GENES, PROBE, project=3).shape == (0, 64 + W + 3 + 1)
    assert np.isfinite(features(progs, GENES, PROBE)).all()


def test_same_arguments_same_bits():
    progs = _programs(50, seed=1)
    a = features(progs, GENES, PROBE, project=6, seed=4)
    b = features(progs, GENES, PROBE, project=6, seed=4)
    assert a.tobytes() == b.tobytes()
    c = features(progs, GENES, PROBE, project=6, seed=5)
    assert np.array_equal(a[:, :64 + W], c[:, :64 + W]) and not np.array_equal(a, c)


_CHILD = """
import hashlib, numpy as np
from numptx.learn.features import features
from numptx.search import operators as O
from numptx.search.genes import Genes
g = Genes(["add", "sub", "mul", "fma", "sin", "exp", "sq", "dup", "sigmoid"], 2)
rng = np.random.default_rng(11)
progs = [O.random_program(g, rng) for _ in range(40)]
print(hashlib.sha256(features(progs, g, buckets=32, ngrams=(1, 2, 3)).tobytes()).hexdigest())
"""


def test_the_hash_is_stable_across_processes():
    """A fresh interpreter (another PYTHONHASHSEED) gives the same bits: no Python hash()."""
    rng = np.random.default_rng(11)
    progs = [O.random_program(GENES, rng) for _ in range(40)]
    here = hashlib.sha256(features(progs, GENES, buckets=32, ngrams=(1, 2, 3)).tobytes())
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                             check=True, env={**__import__("os").environ, "PYTHONHASHSEED": seed})
        assert out.stdout.strip() == here.hexdigest()


# ---- the words ----------------------------------------------------------------------------------
def _ngram_bucket(tokens: list[str], buckets: int) -> int:
    """The documented n-gram hash, in plain Python integers."""
    h = 0xcbf29ce484222325 ^ len(tokens)
    for t in tokens:
        h = ((h ^ zlib.crc32(t.encode())) * 0x100000001b3) % 2 ** 64
    return (h ^ (h >> 32)) % buckets


def test_ngram_counts_of_a_hand_worked_program():
    prog = [x0, x1, ADD, x0, x1, ADD]          # (x0 + x1) twice: length 6
    tokens = ["in:x0", "in:x1", "add.rn.f32"] * 2
    for buckets in (4096, 7):
        want = np.zeros(buckets)
        for n in (1, 2):                        # 6 unigrams, 5 bigrams
            for i in range(len(tokens) - n + 1):
                want[_ngram_bucket(tokens[i:i + n], buckets)] += 1 / 6
        got = features([prog], GENES, buckets=buckets)[0, :buckets]
        np.testing.assert_allclose(got, want, rtol=1e-6)
    # with one bucket every n-gram lands in it: (6 + 5) / 6; unigrams only: 6 / 6
    assert features([prog], GENES, buckets=1)[0, 0] == np.float32(11 / 6)
    assert features([prog], GENES, buckets=1, ngrams=(1,))[0, 0] == 1.0
    # the bigram (x0, x1) twice, (x1, add) twice, (add, x0) once
    b = 1 << 16
    big = features([prog], GENES, buckets=b, ngrams=(2,))[0, :b]
    assert big[_ngram_bucket(["in:x0", "in:x1"], b)] == np.float32(2 / 6)
    assert big[_ngram_bucket(["add.rn.f32", "in:x0"], b)] == np.float32(1 / 6)
    assert np.isclose(big.sum(), 5 / 6)


def test_meta_and_other_tokens():
    b = 1 << 16
    got = features([[x0, sp.dup(F32), MUL, sp.meta(1), sp.ret()]], GENES, buckets=b,
                   ngrams=(1,))[0, :b]
    for t in ("in:x0", "dup", "mul.rn.f32", "meta_const", "return"):
        assert got[_ngram_bucket([t], b)] == np.float32(1 / 5), t


def test_word_columns_hand_worked():
    progs = [[x0, x1, MUL],                                     # x0 * x1
             [sp.const(1000.0, F32), x0, sp.dup(F32), MUL],     # x0 ** 2; 1000 left below
             [x0, x1, ADD, x1],                                 # x1 (the sum is dead)
             [sp.const(0.1, F32), sp.const(1000.0, F32), ADD],
             [],
             [ADD, SIN]]                                        # no operands: nothing runs
    got = _words(progs)
    lg = [math.log10(abs(float(np.float32(0.1))) + 1e-30), 3.0]
    want = [[3, 3, 2, 0, 0, 0],
            [4, 3, 3, 1, 3, 3],
            [4, 1, 2, 0, 0, 0],
            [3, 3, 2, 2, sum(lg) / 2, 3],
            [0, 0, 0, 0, 0, 0],
            [2, 0, 0, 0, 0, 0]]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert live_ops(progs, GENES)[1].tolist() == [False, True, True, True]
    assert live_ops(progs, GENES)[2].tolist() == [False, False, False, True]


def test_f64_constants_and_genes():
    g = Genes(["add", "mul"], 1, dtype="f64")
    prog = [sp.const(1e-5, "f64"), sp.input("x0"), sp.instr("mul.rn.f64"),
            sp.const(2.0 ** 70, "f64"), sp.instr("add.rn.f64")]
    got = _words([prog], g)[0]
    lg = [math.log10(1e-5 + 1e-30), math.log10(2.0 ** 70)]
    np.testing.assert_allclose(got, [5, 5, 2, 2, sum(lg) / 2, lg[1]], rtol=1e-6)


def test_meta_slots_and_return_run_as_the_core_does():
    """Programs that run op by op (meta depths, slots): hand-worked, and their outputs
    through the interpreter are the live values named."""
    progs = [[x0, x1, sp.meta(1), sp.yank_dup(F32)],            # x0, x1, x0: output x0
             [x0, x1, sp.swap(F32)],                            # x1, x0: output x0
             [x0, sp.store(F32, 0), x1, sp.load(F32, 0), ADD],  # x1 + x0
             [x0, x1, sp.ret(), ADD],                           # x1
             [x0, x1, sp.meta(0), sp.rotate(F32), SIN]]         # rotate(0) is a no-op: sin(x1)
    got = _words(progs)
    np.testing.assert_array_equal(got[:, 1], [2, 1, 4, 1, 2])   # live
    np.testing.assert_array_equal(got[:, 2], [3, 2, 2, 2, 2])   # depth
    assert [k.tolist() for k in live_ops(progs, GENES)] == [
        [True, False, False, True], [True, False, False], [True, False, True, True, True],
        [False, True, False, False], [False, True, False, False, True]]
    cols = {n: PROBE.columns[n].astype(np.float32) for n in GENES.inputs}
    y = sp.interpret(progs, cols, GENES.outputs, device="cpu")["y"]
    assert np.array_equal(y[0], cols["x0"]) and np.array_equal(y[1], cols["x0"])
    assert np.array_equal(y[3], cols["x1"])


_POOL = [x0, x1, sp.const(0.5, F32), sp.const(-3.0, F32), ADD, MUL, SIN,
         sp.instr("fma.rn.f32"), sp.instr("sub.rn.f32"), sp.dup(F32)]
_META = [sp.swap(F32), sp.drop(F32), sp.clear(F32), sp.ret()]
_PRED = [sp.instr("setp.lt.f32"), sp.instr("selp.f32"), sp.dup("pred"), sp.swap("pred")]
# two results of one type (unpack), operands in order (sub), back to the output's type
_HALF = [sp.const((1.0, 2.0), "f16x2"), sp.instr("unpack.f16.f16x2"), sp.instr("sub.rn.f16"),
         sp.instr("cvt.f32.f16"), sp.dup("f16"), sp.swap("f16")]


def _random(rng, pool, n, length=(0, 30)) -> list:
    return [[pool[i] for i in rng.integers(0, len(pool), rng.integers(*length))]
            for _ in range(n)]


@pytest.mark.parametrize("extra", [[], _META[:3], _META, _PRED, _PRED + _META, _HALF * 2])
def test_vectorized_and_op_by_op_runs_agree(extra):
    """A trailing meta(0) sends a program to the op-by-op run without changing its stacks:
    live ops and depth must be the same either way (one stack type, and pred besides)."""
    rng = np.random.default_rng(len(extra))
    pool = _POOL * 3 + extra
    progs = _random(rng, pool, 400)
    slow = [p + [sp.meta(0)] for p in progs]
    a, b = _words(progs), _words(slow)
    np.testing.assert_array_equal(a[:, 1:3], b[:, 1:3])
    assert all(np.array_equal(x, y[:-1]) for x, y in
               zip(live_ops(progs, GENES), live_ops(slow, GENES)))


def test_a_program_without_its_dead_ops_computes_the_same():
    """The live ops are exactly what the output needs: dropping the others changes no bit of
    what the interpreter computes, and every live op's removal is visible (it was read)."""
    progs = _programs(300, seed=5) + _random(np.random.default_rng(5), _POOL, 300)
    keep = live_ops(progs, GENES)
    core = [[op for op, k in zip(p, m) if k] for p, m in zip(progs, keep)]
    cols = {n: PROBE.columns[n].astype(np.float32) for n in GENES.inputs}
    a = sp.interpret(progs, cols, GENES.outputs, device="cpu")["y"]
    b = sp.interpret(core, cols, GENES.outputs, device="cpu")["y"]
    assert np.array_equal(a, b, equal_nan=True)
    assert np.array_equal(_words(core)[:, 1], [sum(m) for m in keep])
    assert np.array_equal(_words(core)[:, 0], _words(core)[:, 1])   # nothing dead is left
    assert sum(map(sum, keep)) < sum(map(len, progs))              # there was dead code


def test_encoded_programs_and_markers():
    progs = _programs(30, seed=2)
    F = features(progs, GENES, PROBE)
    enc = [sp.encode(p, GENES.inputs) for p in progs]
    assert np.array_equal(features(enc, GENES, PROBE), F)
    plain = [np.asarray(e).copy() for e in enc]             # tags bind the inputs by name
    assert np.array_equal(features(plain, GENES, PROBE), F)
    marked = [[sp.dialect_marker("numptx"), *p] for p in progs]
    assert np.array_equal(features(marked, GENES, PROBE), F)
    with pytest.raises(LearnError, match=r"programs\[1\]: an mm-ptx program"):
        features([progs[0], [sp.dialect_marker("mm-ptx"), *progs[1]]], GENES)


# ---- the runs -----------------------------------------------------------------------------------
def test_run_columns_are_the_transformed_interpreter_outputs():
    progs = _programs(60, seed=3) + [[x0, sp.const(0.0, F32), sp.instr("div.rn.f32")],
                                     [sp.const(0.0, F32), sp.dup(F32), sp.instr("div.rn.f32")]]
    F = features(progs, GENES, PROBE, buckets=8)
    v, share = _transformed(progs)
    np.testing.assert_array_equal(F[:, 8 + W:-1], v.astype(np.float32))
    np.testing.assert_array_equal(F[:, -1], share.astype(np.float32))
    assert F[-2, -1] == 1.0 and F[-1, -1] == 1.0             # x/0 = inf, 0/0 = nan
    assert not F[-2, 8 + W:-1].any()


def test_the_projection_is_the_seeded_matrix_product():
    progs = _programs(40, seed=4)
    v, share = _transformed(progs)
    for k, seed in ((3, 0), (8, 9)):
        R = np.random.default_rng(seed).standard_normal((PROBE.rows, k)) / math.sqrt(PROBE.rows)
        np.testing.assert_array_equal(projection(PROBE.rows, k, seed), R)
        F = features(progs, GENES, PROBE, buckets=8, project=k, seed=seed)
        np.testing.assert_allclose(F[:, 8 + W:-1], v @ R, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(F[:, -1], share.astype(np.float32))


def test_dead_ops_do_not_change_the_run_features():
    progs = _programs(50, seed=6)
    tail = [sp.const(7.0, F32), x1, SIN, sp.drop(F32), sp.drop(F32), x0, sp.drop(F32)]
    dead = [[*p, *tail] for p in progs]                  # pushed, computed, dropped
    a = features(progs, GENES, PROBE, buckets=8)
    b = features(dead, GENES, PROBE, buckets=8)
    np.testing.assert_array_equal(a[:, 8 + W:], b[:, 8 + W:])
    np.testing.assert_array_equal(a[:, 8 + 1], b[:, 8 + 1])        # the live ops too
    assert (b[:, 8] == a[:, 8] + 7).all()                          # not the length
    np.testing.assert_array_equal(features(progs, GENES, PROBE, project=5)[:, -6:],
                                  features(dead, GENES, PROBE, project=5)[:, -6:])


def test_probe_columns_are_cast_to_the_genes_types():
    g = Genes(["add", "mul"], 2, dtype="f64")
    progs = [[sp.input("x0"), sp.input("x1"), sp.instr("mul.rn.f64")]]
    F = features(progs, g, PROBE, buckets=4)
    a, b = PROBE.columns["x0"], PROBE.columns["x1"]
    v = a * b
    np.testing.assert_array_equal(F[0, 4 + W:-1], (np.sign(v) * np.log1p(np.abs(v))).astype(np.float32))


# ---- probes -------------------------------------------------------------------------------------
def test_probe_from_data():
    p = Probe.from_data(X, ["x0", "x1"], rows=16, seed=3)
    assert p.rows == 16 and p.columns["x0"].dtype == np.float64
    rows = [np.flatnonzero(X[:, 0] == v)[0] for v in p.columns["x0"]]
    assert len(set(rows)) == 16 and rows == sorted(rows)             # distinct, in X's order
    assert np.array_equal(X[rows, 1], p.columns["x1"])
    q = Probe.from_data(X, ["x0", "x1"], rows=16, seed=3)
    assert all(np.array_equal(p.columns[n], q.columns[n]) for n in p.columns)
    assert not np.array_equal(Probe.from_data(X, ["x0", "x1"], 16, seed=4).columns["x0"],
                              p.columns["x0"])
    small = Probe.from_data(X[:5].astype(np.float32), ["x0", "x1"], rows=32)
    assert small.rows == 5 and np.array_equal(small.columns["x1"], X[:5, 1].astype(np.float32))
    assert pickle.loads(pickle.dumps(p)).columns.keys() == p.columns.keys()
    assert isinstance(GENES, ProgramSpace)


# ---- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize("programs, match", [
    (5, r"programs: give a sequence"),
    ("abc", r"programs: give a sequence"),
    (np.zeros((2, 3), np.uint64), r"programs: give a sequence"),
    ([[x0], 7], r"programs\[1\]: a program is a sequence"),
    ([[x0], [x0, x1, "add"]], r"programs\[1\]: item 2 is 'add'"),
    ([[x0], (x0, None)], r"programs\[1\]: item 1 is None"),
    ([[x0], [sp.input("t")]], r"programs\[1\]: it reads the input 't'"),
    ([np.zeros(2, np.float32)], r"programs\[0\]: an encoded program is a 1-D uint64"),
])
def test_bad_programs(programs, match):
    with pytest.raises(LearnError, match=match):
        features(programs, GENES)


@pytest.mark.parametrize("kw, match", [
    (dict(buckets=0), r"buckets=0"), (dict(buckets=2 ** 21), r"buckets="),
    (dict(buckets=True), r"buckets=True"), (dict(buckets=2.0), r"buckets=2.0"),
    (dict(ngrams=()), r"ngrams=\(\)"), (dict(ngrams=(0,)), r"ngrams="),
    (dict(ngrams=(9,)), r"ngrams="), (dict(ngrams=(1, 1)), r"ngrams="),
    (dict(ngrams="12"), r"ngrams="), (dict(ngrams=(1.0,)), r"ngrams="),
    (dict(project=2), r"project=2: .*probe="),
    (dict(seed=-1), r"seed=-1"),
])
def test_bad_options(kw, match):
    with pytest.raises(LearnError, match=match):
        features(_programs(2), GENES, **kw)


@pytest.mark.parametrize("project", [0, 5000, True, 1.5])
def test_bad_project(project):
    with pytest.raises(LearnError, match=r"project="):
        features(_programs(2), GENES, PROBE, project=project)


def test_bad_probes():
    progs = _programs(2)
    with pytest.raises(LearnError, match=r"no column for the input 'x1'"):
        features(progs, GENES, Probe({"x0": np.zeros(3)}))
    with pytest.raises(LearnError, match=r"probe: give a numptx.learn.features.Probe"):
        features(progs, GENES, {"x0": np.zeros(3), "x1": np.zeros(3)})
    with pytest.raises(LearnError, match=r"'x1' has 2 rows, 'x0' has 3"):
        Probe({"x0": np.zeros(3), "x1": np.zeros(2)})
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(LearnError, match=r"probe columns\['x1'\]: row 1 is"):
            Probe({"x0": np.zeros(3), "x1": np.array([0.0, bad, 1.0])})
    with pytest.raises(LearnError, match=r"probe columns\['x0'\]: give a 1-D float32"):
        Probe({"x0": np.zeros(3, np.int32)})
    with pytest.raises(LearnError, match=r"probe columns\['x0'\]: give a 1-D"):
        Probe({"x0": np.zeros((3, 1))})
    with pytest.raises(LearnError, match=r"no rows"):
        Probe({"x0": np.zeros(0)})
    with pytest.raises(LearnError, match=r"probe columns: give a non-empty mapping"):
        Probe({})
    with pytest.raises(LearnError, match=r"X: give a 2-D float32"):
        Probe.from_data(np.zeros(3), ["x0"])
    with pytest.raises(LearnError, match=r"names: give 2 input names"):
        Probe.from_data(X, ["x0"])
    with pytest.raises(LearnError, match=r"rows=0"):
        Probe.from_data(X, ["x0", "x1"], rows=0)
    with pytest.raises(LearnError, match=r"probe columns\['x0'\]: row"):
        Probe.from_data(np.full((4, 2), np.nan), ["x0", "x1"])


def test_bad_genes():
    class NoInputs:
        outputs = {"y": "f32"}

    class BadType:
        inputs, outputs = {"x0": "float9"}, {"y": "f32"}

    with pytest.raises(LearnError, match=r"genes: NoInputs has no .inputs mapping"):
        features(_programs(2), NoInputs())
    with pytest.raises(LearnError, match=r"genes.inputs\['x0'\] = 'float9'"):
        features(_programs(2), BadType())

    class Halves:
        inputs, outputs = {"x0": "f16"}, {"y": "f16"}

    with pytest.raises(LearnError, match=r"genes.inputs\['x0'\] is f16: run features"):
        features([[sp.input("x0")]], Halves(), Probe({"x0": np.zeros(3)}))


def test_a_row_the_interpreter_does_not_run_names_the_program():
    progs = [[x0], [sp.special("tid.x"), sp.instr("cvt.rn.f32.u32")]]
    assert features(progs, GENES).shape == (2, 64 + W)              # the words need no run
    with pytest.raises(LearnError, match=r"programs\[1\]: the run features: .*'%tid.x'"):
        features(progs, GENES, PROBE)
