"""Review of issue 24's ``dup`` gene: what tests/test_search_dup_gene.py leaves out. Dedup keys
see the DAG (a dup spelling and the plain one are one program), the effective-gene walk
follows a copy, checkpoints keep and check dup programs and a resumed dup run continues as the
uninterrupted one, and a printed dup formula evaluates bit for bit as the emulated stub."""
from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest

import numptx as nx
from numptx import search
from numptx import stack_ptx as sp
from numptx.search import checkpoint as ck
from numptx.search import operators as O
from numptx.search.breed import Breeder
from numptx.search.checkpoint import CheckpointError
from numptx.search.genes import Genes

F = importlib.import_module("numptx.search.formula")


def _prog(g, *parts):
    out = []
    for p in parts:
        out += [sp.input(p)] if p in g.names else g.op_words(p)
    return out


def test_a_dup_spelling_and_the_plain_one_share_a_key():
    g = Genes(["add", "mul", "dup"], 1)
    with_dup = _prog(g, "x0", "dup", "mul", "dup", "add")                # 2 * x0**2
    plain = _prog(g, "x0", "x0", "mul", "x0", "x0", "mul", "add")        # the same DAG
    assert F.canonical_key(with_dup, g) == F.canonical_key(plain, g)
    assert F.canonical_keys([with_dup, plain], g) == [F.canonical_key(plain, g)] * 2
    other = _prog(g, "x0", "dup", "add", "dup", "add")                   # 4 * x0
    assert F.canonical_key(other, g) != F.canonical_key(with_dup, g)


def test_the_effective_walk_follows_a_copy():
    g = Genes(["add", "mul", "dup"], 2)
    b = Breeder(g, crossover=0.5, mutation=0.9, max_length=64, revary=1)
    x0, x1 = (sp.input("x0"),), (sp.input("x1"),)
    dup, mul = tuple(g.op_words("dup")), tuple(g.op_words("mul"))
    c = (sp.const(2.0, "f32"),)
    assert b.effective([x0, c, dup, mul]) == [1, 2, 3]          # c * c: x0 stays below
    assert b.effective([dup, x0]) == [1]                        # a dup of nothing does nothing
    assert b.effective([x0, dup, x1, mul]) == [0, 1, 2, 3]      # the copy of x0 feeds mul
    assert b.effective([x0, x1, dup, mul]) == [1, 2, 3]         # x1 * x1: x0 stays below
    assert b.effective([x0, dup, x1]) == [2]


def test_a_dup_run_resumes_as_the_uninterrupted_one(tmp_path):
    X = np.random.default_rng(0).uniform(-1, 1, (40, 2)).astype(np.float32)
    y = (X[:, 0] ** 4 + X[:, 1]).astype(np.float32)
    kw = dict(population=32, seed=3, device="cpu")
    ops = ["add", "mul", "dup", "sq"]              # dup starts sq: a gene split afresh
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = search.regress(X, y, ops, generations=4, **kw)
        half = search.regress(X, y, ops, generations=2, **kw)
        half.save(tmp_path / "h.nxck")
        res = search.resume(tmp_path / "h.nxck", generations=2, device="cpu")
    assert sp.dumps(res.best.program) == sp.dumps(full.best.program)
    assert res.best.loss == full.best.loss and res.evaluated == full.evaluated
    assert [g.best for g in res.history] == [g.best for g in full.history]
    assert any(op.kind == "meta" for c in full.population for op in c.program)


def test_a_checkpoint_refuses_a_dup_the_run_could_not_make(tmp_path):
    X = np.random.default_rng(1).uniform(-1, 1, (24, 1)).astype(np.float32)
    y = (2 * X[:, 0]).astype(np.float32)
    r = search.regress(X, y, ["add", "mul"], population=8, generations=1, seed=0,
                       device="cpu", fit_method="es")
    r.save(tmp_path / "r.nxck")
    state = ck.read(tmp_path / "r.nxck")
    g = r.genes
    state["best"][0] = ck.encode_program([sp.input("x0"), sp.dup("f32"), *g.op_words("mul")])
    ck.write(tmp_path / "forged.nxck", state)
    with pytest.raises(CheckpointError, match=r"field best.program: op 1 \(dup"):
        search.resume(tmp_path / "forged.nxck", generations=1, device="cpu")


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_property_a_dup_formula_evaluates_as_the_emulated_stub(dtype):
    g = Genes(["add", "sub", "mul", "div", "dup", "neg", "max", "abs"], 2, dtype=dtype,
              constants=(0.5, -0.0, 2.0))
    rng = np.random.default_rng(5)
    npt = np.float32 if dtype == "f32" else np.float64
    X = rng.uniform(-3, 3, (17, 2)).astype(npt)
    X[0], X[1, 0] = 0.0, -0.0
    bits = np.uint32 if dtype == "f32" else np.uint64
    dups = 0
    for _ in range(150):
        p = O.random_program(g, rng, length=(2, 16))
        dups += any(op.kind == "meta" for op in p)
        stub = sp.compile(p, g.inputs, g.outputs)
        ref = nx.emulate(stub, {"%x0": X[:, 0], "%x1": X[:, 1]}, ["%y"])["%y"]
        ref = np.broadcast_to(np.asarray(ref, npt), (len(X),))
        got = F.evaluate(p, X, g)
        assert np.array_equal(ref.view(bits), got.view(bits)), F.formula(p, g)
    assert dups > 30
