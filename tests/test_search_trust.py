"""numptx.search on input from someone else (issue 22, items 10, 14, 15, 19 and 20): checkpoint
files that are nested, compressed "bombs", forged or mutated field by field; formulas nested
too deep for Python; option values past what they mean; stale temporaries of killed writers.
Everything bad ends as a NumptxError naming the field, the argument or the limit. Real
components only (the emulator on the CPU, real CudaTemplate sites and packs); the property
tests are seeded loops of a few seconds."""
from __future__ import annotations

import ast
import base64
import copy
import hashlib
import inspect
import json
import math
import os
import pathlib
import random
import re
import signal
import struct
import subprocess
import sys
import time
import tracemalloc
import warnings
import zlib

import numpy as np
import pytest

import numptx as nx
from numptx import search
from numptx import stack_ptx as sp
from numptx.search import CheckpointError, SearchError
from numptx.search import checkpoint as ck
from numptx.search import config as C
from numptx.search.formula import FormulaLimitError, evaluate
from numptx.search.genes import OP_NAMES, Genes

from test_search_loop import _EVOLVE_SRC

OPS = ["add", "sub", "mul", "exp"]
ROOT = pathlib.Path(__file__).resolve().parents[1]


def _data(n=16, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    return X, (X[:, 0] * X[:, 1] + 0.5).astype(np.float32)


def _regress(**kw):
    X, y = _data()
    opts = dict(population=20, generations=2, seed=0, device="cpu", fit_top=2, fit_steps=2,
                fit_trials=2)
    opts.update(kw)
    return search.regress(X, y, OPS, **opts)


def _raw_file(path, body: bytes, *, version: int = ck.VERSION) -> None:
    """A file with the documented layout (``NXCK``, version, flags, length, body, BLAKE2b-16 of
    header + body): a valid checksum around any body, as anyone can write one."""
    head = struct.pack("<4sHHQ", b"NXCK", version, 0, len(body))
    path.write_bytes(head + body + hashlib.blake2b(head + body, digest_size=16).digest())


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A real regress checkpoint and a real MAP-Elites one (the states as read)."""
    d = tmp_path_factory.mktemp("ck")
    _regress().save(d / "r.nxck")
    X, y = _data()
    search.map_elites(X, y, OPS, batch=20, generations=2, seed=1, device="cpu",
                      fit_top=0).save(d / "m.nxck")
    return {"regress": ck.read(d / "r.nxck"), "map_elites": ck.read(d / "m.nxck")}


# ---- 10: nested and compressed bodies ----------------------------------------------------------
@pytest.mark.parametrize("text, match", [
    (b"[" * 200_000, r"holds 200,000 lists and objects in 200,000 bytes"),      # 200 KB of [
    ((b"[" + b" " * 20) * 20_000, r"nests deeper than Python's JSON reader goes"),
    (b"[" + b"[]," * 300_000 + b"0]", r"holds 300,001 lists"),     # ~20x its size in memory
])
def test_a_deeply_nested_or_list_heavy_body_is_a_checkpoint_error(tmp_path, text, match):
    path = tmp_path / "deep.nxck"
    _raw_file(path, zlib.compress(text))
    with pytest.raises(CheckpointError, match=match) as e:
        search.resume(path, device="cpu")
    assert e.value.path == str(path)


def _bomb(inflated: int, text: bytes = b" ") -> bytes:
    """A zlib stream of ``inflated`` bytes of JSON whitespace (compresses ~1000:1)."""
    z = zlib.compressobj(9)
    chunk = text * (1 << 20)
    out = [z.compress(chunk[:min(len(chunk), inflated - i)])
           for i in range(0, inflated, len(chunk))]
    return b"".join(out) + z.flush()


def test_a_zlib_bomb_is_refused_without_inflating_it(tmp_path, monkeypatch):
    monkeypatch.setattr(ck, "MAX_BODY", 1 << 20)
    path = tmp_path / "bomb.nxck"
    body = _bomb(64 << 20)                       # 64 MiB inflated from ~64 KB
    assert len(body) < 100_000
    _raw_file(path, body)
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match=r"inflates past 1,048,576 bytes") as e:
            search.resume(path, device="cpu")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20                        # the bound, not the bomb
    assert "max_bytes" in str(e.value)


def test_the_body_bound_is_what_a_checkpoint_can_hold():
    # a full score cache (keys + losses as base64 JSON) and a full fit memo of 64-op programs
    # fit with room for a large population and data
    prog = [sp.input("x0"), *Genes(["add", "mul"], 1).op_words("mul")] * 21      # 63 ops
    fit_row = len(json.dumps([base64.b64encode(sp.encode(prog, ["x0"]).tobytes()).decode(),
                              ck.encode_program(prog), 0.123456789012345678]))
    cache = 4 * (16 * C.CACHE_MAX) // 3 + 4 * (8 * C.CACHE_MAX) // 3
    assert cache + ck.FITS_SAVED * fit_row < ck.MAX_BODY // 2
    assert ck.MAX_BODY == 256 << 20


def test_a_big_checkpoint_warns_at_save_and_resumes_with_max_bytes(tmp_path, monkeypatch):
    r = _regress()
    monkeypatch.setattr(ck, "MAX_BODY", 2000)
    with pytest.warns(nx.NumptxWarning, match=r"max_bytes=\d+"):
        r.save(tmp_path / "big.nxck")
    with pytest.raises(CheckpointError, match=r"2,000 bytes .*max_bytes"):
        search.resume(tmp_path / "big.nxck", device="cpu")
    more = search.resume(tmp_path / "big.nxck", generations=1, device="cpu",
                         max_bytes=1 << 20)
    assert more.generations == 3
    with pytest.raises(SearchError, match="max_bytes=0"):
        search.resume(tmp_path / "big.nxck", device="cpu", max_bytes=0)


def test_a_file_larger_than_any_body_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(ck, "MAX_BODY", 1000)
    path = tmp_path / "huge.nxck"
    _raw_file(path, os.urandom(5000))
    with pytest.raises(CheckpointError, match="5,032 bytes, more than a body"):
        ck.read(path)


def _nested(rng: random.Random) -> bytes:
    depth = int(10 ** rng.uniform(0, 5.5))
    opener = rng.choice([b"[", b'{"a":', b'{"kind":', b"[1,", b'{"kind":"regress","x":'])
    closer = {b"[": b"]", b"[1,": b"]"}.get(opener, b"}")
    inner = rng.choice([b"0", b'"x"', b"null", b"[]", b"{}", b"NaN", b"1e999", b""])
    text = opener * depth + inner + closer * rng.choice([depth, depth // 2, 0])
    return text


def test_property_random_nested_and_compressed_bodies_are_checkpoint_errors(tmp_path):
    """Random nesting (1 to ~300,000 levels, closed or not), random compression (zlib at any
    level, raw deflate, gzip, garbage, truncated or extended streams): every read is a dict
    or a CheckpointError, every resume a CheckpointError."""
    rng = random.Random(22)
    path = tmp_path / "fuzz.nxck"
    seen = set()
    for i in range(150):
        text = _nested(rng)
        how = rng.choice(["zlib", "raw", "gzip", "garbage", "cut", "tail", "zlib"])
        if how == "raw":
            z = zlib.compressobj(6, zlib.DEFLATED, -15)
            body = z.compress(text) + z.flush()
        elif how == "gzip":
            z = zlib.compressobj(6, zlib.DEFLATED, 31)
            body = z.compress(text) + z.flush()
        elif how == "garbage":
            body = rng.randbytes(rng.randrange(0, 300))
        else:
            body = zlib.compress(text, rng.randrange(0, 10))
            if how == "cut":
                body = body[:rng.randrange(0, len(body))]
            elif how == "tail":
                body += rng.randbytes(rng.randrange(1, 20))
        _raw_file(path, body)
        try:
            state = ck.read(path)
            assert isinstance(state, dict)
            seen.add("read")
        except CheckpointError as e:
            assert e.path == str(path)
            seen.add("refused")
        with pytest.raises(CheckpointError):
            search.resume(path, device="cpu")
    assert seen == {"read", "refused"}


def test_property_random_inflated_sizes_around_the_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(ck, "MAX_BODY", 64 << 10)
    rng = random.Random(5)
    path = tmp_path / "size.nxck"
    for _ in range(40):
        n = rng.randrange(20, 256 << 10)
        text = b'{"kind":"regress","pad":"' + b"a" * n + b'"}'
        _raw_file(path, zlib.compress(text, rng.randrange(1, 10)))
        if len(text) <= ck.MAX_BODY:
            assert ck.read(path)["kind"] == "regress"
            with pytest.raises(CheckpointError, match="field"):
                search.resume(path, device="cpu")
        else:
            with pytest.raises(CheckpointError, match="inflates past 65,536 bytes"):
                ck.read(path)


# ---- 10: what a checkpoint can do: no code, only data ------------------------------------------
def test_search_never_loads_code_from_data():
    """A checkpoint is JSON, base64 and Stack PTX bytes: nothing in numptx.search imports a
    deserializer that can run code, calls eval/exec, or lets NumPy unpickle."""
    banned_modules = {"pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle",
                      "joblib", "yaml"}
    for f in sorted((ROOT / "numptx" / "search").glob("*.py")):
        tree = ast.parse(f.read_text())
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                assert not {a.name.split(".")[0] for a in n.names} & banned_modules, f
            elif isinstance(n, ast.ImportFrom):
                assert (n.module or "").split(".")[0] not in banned_modules, f
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                assert n.func.id not in ("eval", "exec", "__import__"), (f, n.lineno)
            elif isinstance(n, ast.keyword):
                assert n.arg not in ("allow_pickle", "object_hook", "object_pairs_hook"), f
    # an object array cannot come back from a checkpoint either
    with pytest.raises(SearchError, match="dtype '|O' is not one of"):
        ck.decode_array({"dtype": "|O", "shape": [1], "data": "AAAAAAAAAAA="})


def test_the_docs_say_the_checksum_is_not_a_mac():
    text = (ROOT / "docs" / "search.md").read_text()
    assert "not a MAC" in text and "Checkpoints from someone else" in text
    assert "max_bytes" in text and "MAX_BODY" in text


# ---- 10: every field is checked ----------------------------------------------------------------
def _resume(tmp_path, state, **kw):
    path = tmp_path / "edit.nxck"
    ck.write(path, state)
    return search.resume(path, **{"generations": 1, "device": "cpu", **kw})


@pytest.mark.parametrize("edit, match", [
    # raw Python errors before: OverflowError, SyntaxError, TypeError later in the run
    (lambda s: s["rng"]["state"].update(state=2 ** 130), r"field rng.state.state"),
    (lambda s: s["rng"].update(has_uint32=-5), r"field rng.has_uint32"),
    (lambda s: s["rng"].update(bit_generator="MT19937"), r"field rng.bit_generator"),
    (lambda s: s["data"]["X"].update(dtype="(("), r"field data: data.X: dtype '\(\('"),
    (lambda s: s["data"]["X"].update(dtype="|O"), r"field data: data.X: dtype '\|O'"),
    (lambda s: s["data"]["X"].update(dtype="<f8"), r"field data"),
    (lambda s: s["data"]["y"].update(shape=[3, -1]), r"field data: data.y: shape"),
    (lambda s: s.update(seconds="1.5"), r"field seconds: '1.5' is not a number"),
    (lambda s: s["history"][0].__setitem__(1, "0.25"), r"field history\[0\].best"),
    (lambda s: s["history"][1].__setitem__(0, 7), r"field history\[1\].generation"),
    (lambda s: s["population"][3].__setitem__(1, "nan"), r"field population\[3\].loss"),
    (lambda s: s["population"][3].__setitem__(1, math.nan), r"field population\[3\].loss"),
    (lambda s: s["population"][3].__setitem__(2, 1), r"field population\[3\].fitted"),
    (lambda s: s["population"][0].__setitem__(0, 5), r"field population\[0\].program"),
    (lambda s: s.update(best=None), r"field best: null after 2 generations"),
    (lambda s: s.update(evaluated=-1), r"field evaluated"),
    (lambda s: s.update(improved_at=9), r"field improved_at"),
    (lambda s: s.update(seed=None), r"field seed"),
    (lambda s: s.update(seed="0"), r"field seed"),
    (lambda s: s["genes"].update(dtype="f16"), r"field genes: dtype='f16'"),
    (lambda s: s["data"].update(names=["x1", "x0"]), r"field data.names"),
    (lambda s: s["data"].update(loss="huber"), r"loss='huber'"),
    (lambda s: s["cache"]["losses"].update(dtype="<f4"), r"field cache"),
    (lambda s: s["fits"].append(["!!", s["fits"][0][1], 0.0]), r"field fits\[\d+\].key"),
    (lambda s: s.update(archive=[[[0], s["best"][0], 0.0, False]]), r"field archive"),
    (lambda s: s.update(extra=1), r"field extra: unknown"),
    (lambda s: s.pop("rng"), r"field rng: missing"),
    (lambda s: s["config"].update(init_length=3), r"field config: init_length=3"),
    (lambda s: s["config"].update(user_descriptors=["d"]), r"field config.user_descriptors"),
])
def test_every_field_is_checked_and_named(tmp_path, saved, edit, match):
    state = copy.deepcopy(saved["regress"])
    edit(state)
    with pytest.raises(CheckpointError, match=match) as e:
        _resume(tmp_path, state)
    assert e.value.path == str(tmp_path / "edit.nxck")


def _program_text(ops) -> str:
    return ck.encode_program(ops)


@pytest.mark.parametrize("prog, match", [
    ([sp.input("x0"), sp.instr("sqrt.rn.f32")], r"op 1 \(instr\('sqrt.rn.f32'\)\) is not one of"),
    ([sp.input("zz")], r"op 0 \(input\('zz'\)\)"),
    ([sp.input("x0"), sp.const(1.0, "f64")], r"op 1"),
    ([sp.input("x0"), sp.dup("f64")], r"op 1"),
    # 72: a first program of two inputs may have 24 genes of up to 3 ops (exp), past max_length
    ([sp.input("x0")] * 5000, r"a program of 5000 ops; this run makes at most 72"),
])
def test_a_program_must_be_made_of_the_genes(tmp_path, saved, prog, match):
    state = copy.deepcopy(saved["regress"])
    state["population"][2][0] = _program_text(prog)
    with pytest.raises(CheckpointError, match=r"field population\[2\].program: " + match):
        _resume(tmp_path, state)


def _random_run(rng: random.Random, i: int) -> tuple:
    """Random settings of a small run: kind, dtype, ops, lengths, rates, MAP-Elites axes."""
    f64 = rng.random() < 0.3
    pool = [o for o in OP_NAMES if not f64 or o in ("add", "sub", "mul", "div", "fma", "neg",
                                                      "abs", "sq", "inv", "sqrt", "max", "min")]
    X = np.random.default_rng(i).uniform(-1, 1, (12, rng.randrange(1, 4)))
    y = X.sum(1) ** 2
    X = X if f64 else X.astype(np.float32)
    kw = dict(generations=rng.randrange(2, 5), seed=i, device="cpu",
              max_length=rng.choice([1, 2, 5, 64]),
              init_length=(rng.randrange(1, 4), rng.randrange(4, 14)),
              revary=rng.randrange(0, 3), fit_top=rng.randrange(0, 3), fit_steps=2,
              fit_trials=2, parsimony=rng.choice([0.0, 0.01]))
    if rng.random() < 0.5:
        kw.update(population=rng.randrange(2, 30), restart=rng.choice([None, 1, 2]))
        if rng.random() < 0.5:
            kw["tournament"] = rng.randrange(1, kw["population"] + 1)
        call = search.regress
    else:
        kw.update(batch=rng.randrange(2, 30), bins=rng.choice([None, 1, 3]),
                  descriptors=rng.sample(["length", "op_mix", "inputs"], rng.randrange(1, 3)))
        call = search.map_elites
    return call, X, y, rng.sample(pool, rng.randrange(1, 6)), kw


def test_property_real_runs_of_random_settings_resume_exactly(tmp_path):
    """The checks refuse nothing a run writes (empty programs after a deletion, first programs
    longer than max_length, tournaments of the whole population, f64 genes ...): a run saved
    after one generation and resumed gives the uninterrupted run's history."""
    rng = random.Random(10)
    for i in range(20):
        call, X, y, ops, kw = _random_run(rng, i)
        full = call(X, y, ops, **kw)
        part = call(X, y, ops, **{**kw, "generations": 1})
        part.save(tmp_path / "p.nxck")
        more = search.resume(tmp_path / "p.nxck", generations=kw["generations"] - 1,
                             device="cpu")
        assert [g[:-1] for g in more.history] == [g[:-1] for g in full.history], (ops, kw)
        assert more.evaluated == full.evaluated


def test_a_run_with_an_empty_program_resumes(tmp_path):
    # a deletion can leave a program with no ops (it computes 0): a real state, not a fault
    X = np.random.default_rng(0).uniform(-1, 1, (16, 2)).astype(np.float32)
    y = X[:, 0] ** 2 + X[:, 1]
    r = search.regress(X, y, ["add", "sq", "sigmoid", "exp", "log", "pow2", "rsqrt.approx.f32"],
                       population=30, generations=3, seed=2, device="cpu", max_length=8,
                       init_length=(1, 12), linear_scaling=False, fit_method="es")
    assert any(len(c.program) == 0 for c in r.population)
    r.save(tmp_path / "e.nxck")
    assert search.resume(tmp_path / "e.nxck", generations=1, device="cpu").generations == 4


def test_the_map_elites_archive_is_checked_against_its_descriptors(tmp_path, saved):
    state = copy.deepcopy(saved["map_elites"])
    assert state["archive"]
    for cell, match in [([99, 0], r"archive\[0\].cell: 99 is not an int in \[0, 7\]"),
                        ([0], r"archive\[0\].cell: .* not a list of 2 items"),
                        (["a", 0], r"archive\[0\].cell")]:
        s = copy.deepcopy(state)
        s["archive"][0][0] = cell
        with pytest.raises(CheckpointError, match=match):
            _resume(tmp_path, s)
    s = copy.deepcopy(state)
    s["archive"].append(copy.deepcopy(s["archive"][0]))
    with pytest.raises(CheckpointError, match="filed twice"):
        _resume(tmp_path, s)


_JUNK = [None, True, False, 0, 1, -1, 3, 2 ** 31, 2 ** 64, 2 ** 130, -2 ** 70, 0.5, -0.0,
         1e308, math.inf, -math.inf, math.nan, "", "x", "nan", "<f4", "((", "|O", "PCG64",
         "AAAA", "!!", "regress", [], [0], [1, 2], [[]], ["x"], [0.5, 1.0, True], {},
         {"a": 1}, {"dtype": "<f4", "shape": [1], "data": "AAAAAA=="}]


def _paths(node, at=()):
    yield at
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, at + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node[:6]):
            yield from _paths(v, at + (i,))


def _mutate(state: dict, rng: random.Random) -> dict:
    """``state`` with one random change: a field replaced by junk or by another field's value,
    a number nudged, a key dropped or a list item dropped or doubled."""
    s = copy.deepcopy(state)
    paths = [p for p in _paths(s) if p]
    at = rng.choice(paths)
    parent = s
    for k in at[:-1]:
        parent = parent[k]
    key, old = at[-1], parent[at[-1]]
    how = rng.randrange(6)
    if how == 0 and isinstance(parent, dict):
        del parent[key]
    elif how == 1 and isinstance(parent, list):
        parent.insert(key, copy.deepcopy(old)) if rng.random() < 0.5 else parent.pop(key)
    elif how == 2 and type(old) in (int, float):
        parent[key] = old + rng.choice([1, -1, 0.5, 10 ** 6, -(10 ** 6)])
    elif how == 3:
        other = rng.choice(paths)
        v = s
        for k in other:
            v = v[k] if isinstance(v, (dict, list)) and (k in v if isinstance(v, dict)
                                                          else k < len(v)) else None
        parent[key] = copy.deepcopy(v)
    else:
        parent[key] = copy.deepcopy(rng.choice(_JUNK))
    return s


@pytest.mark.parametrize("kind, count", [("regress", 250), ("map_elites", 150)])
def test_property_a_mutated_checkpoint_resumes_or_is_a_checkpoint_error(tmp_path, saved,
                                                                        kind, count):
    """Random single-field mutations of a real checkpoint: each resumes and runs a generation,
    or raises CheckpointError naming the file; never any other exception."""
    rng = random.Random(len(kind))
    path = tmp_path / "m.nxck"
    outcomes = {"resumed": 0, "refused": 0}
    for i in range(count):
        state = _mutate(saved[kind], rng)
        ck.write(path, state)
        try:
            r = search.resume(path, generations=1, device="cpu")
        except CheckpointError as e:
            assert e.path == str(path)
            outcomes["refused"] += 1
            continue
        except Exception as e:          # noqa: BLE001 - the property under test
            pytest.fail(f"mutation {i}: {type(e).__name__}: {e}\n{json.dumps(state)[:2000]}")
        ran = 1 if r.stopped == "generations" else 0     # a mutated target or time_limit
        assert r.generations == len(state["history"]) + ran and r.best is not None
        outcomes["resumed"] += 1
    # (both outcomes occur often enough for the property to mean something)
    assert outcomes["resumed"] > count // 20 and outcomes["refused"] > count // 3, outcomes


def test_property_a_mutated_evolve_checkpoint_restores_or_is_a_checkpoint_error(tmp_path):
    tmpl = nx.CudaTemplate(_EVOLVE_SRC, entry="fit")

    def fitness(packs):
        return [float(i) for i in range(sum(len(p.candidates) for p in packs))]
    r = search.evolve(tmpl, "f", fitness, population=8, generations=1, seed=0)
    r.save(tmp_path / "e.nxck")
    base = ck.read(tmp_path / "e.nxck")
    rng = random.Random(9)
    path = tmp_path / "m.nxck"
    refused = 0
    for i in range(120):
        state = _mutate(base, rng)
        ck.write(path, state)
        try:
            search.resume(path, generations=0, template=tmpl, fitness=fitness, device="cpu")
        except CheckpointError:
            refused += 1
        except Exception as e:          # noqa: BLE001 - the property under test
            pytest.fail(f"mutation {i}: {type(e).__name__}: {e}\n{json.dumps(state)[:2000]}")
    assert 30 < refused < 120
    # one run on from an unmutated file: the packs are built for real
    more = search.resume(tmp_path / "e.nxck", generations=1, template=tmpl, fitness=fitness)
    assert more.generations == 2


# ---- 10: stale temporaries ---------------------------------------------------------------------
def _age(path):
    t = time.time() - 2 * ck.STALE_TMP_S
    os.utime(path, (t, t), follow_symlinks=False)


def test_stale_temporaries_are_swept_and_nothing_else(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.bin").write_bytes(b"x")
    d = tmp_path / "runs"
    d.mkdir()
    stale, fresh = d / ".nxck-abc123.tmp", d / ".nxck-live.tmp"
    other, named = d / ".other.tmp", d / "nxck-abc.tmp"
    link, folder = d / ".nxck-link.tmp", d / ".nxck-dir.tmp"
    for p in (stale, fresh, other, named):
        p.write_bytes(b"partial")
    link.symlink_to(outside / "keep.bin")
    folder.mkdir()
    for p in (stale, other, named, link, folder):
        _age(p)
    _regress().save(d / "run.nxck")
    left = sorted(os.listdir(d))
    assert left == sorted(["run.nxck", ".nxck-live.tmp", ".other.tmp", "nxck-abc.tmp",
                           ".nxck-link.tmp", ".nxck-dir.tmp"])
    assert (outside / "keep.bin").read_bytes() == b"x"


_KILLED_WRITER = r"""
import os, sys, time
import numpy as np
from numptx import search
X = np.linspace(-1, 1, 16, dtype=np.float32)[:, None]
r = search.regress(X, X[:, 0] * 2, ["add"], population=8, generations=1, seed=0, device="cpu")
def stuck(fd):
    print("writing", flush=True)
    time.sleep(60)
os.fsync = stuck
r.save(sys.argv[1])
"""


def test_a_killed_writer_leaves_a_temporary_that_the_next_save_sweeps(tmp_path):
    path = tmp_path / "run.nxck"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(path)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == "writing"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    tmps = [n for n in os.listdir(tmp_path) if n.startswith(".nxck-")]
    assert len(tmps) == 1 and not path.exists()          # the file itself: never half written
    _regress().save(path)
    assert sorted(os.listdir(tmp_path)) == sorted(tmps + ["run.nxck"])   # a live writer's age
    _age(tmp_path / tmps[0])
    _regress().save(path)
    assert os.listdir(tmp_path) == ["run.nxck"]


# ---- 19: formulas too deep, and resume's fitness ----------------------------------------------
@pytest.mark.parametrize("text, limit", [
    ("-" * 2000 + "x0", "MAX_DEPTH"),
    ("+".join(["x0"] * 5000), "MAX_DEPTH"),
    ("x0" + "**x0" * 3000, "MAX_DEPTH"),
    ("(" * 300 + "x0" + ")" * 300, "parentheses"),
    ("x0+" * 400_000 + "x0", "MAX_TEXT"),
])
def test_a_formula_past_the_limits_names_the_limit(text, limit):
    genes = Genes(["add"], 1)
    with pytest.raises(FormulaLimitError) as e:
        evaluate(text, np.ones((3, 1), np.float32), genes)
    assert isinstance(e.value, nx.NumptxError) and isinstance(e.value, SearchError)
    assert e.value.limit == limit
    assert (limit if limit != "parentheses" else "200 parentheses") in str(e.value)


def test_formulas_within_the_limits_still_evaluate():
    genes = Genes(["add"], 1)
    X = np.full((2, 1), 1.0, np.float32)
    assert evaluate("-" * 900 + "x0", X, genes).tolist() == [1.0, 1.0]
    assert evaluate("+".join(["x0"] * 500), X, genes).tolist() == [500.0, 500.0]
    assert evaluate("(" * 150 + "x0" + ")" * 150, X, genes).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("fitness", [3, "f", [1.0]])
def test_resume_checks_that_fitness_is_callable(tmp_path, fitness):
    tmpl = nx.CudaTemplate(_EVOLVE_SRC, entry="fit")
    r = search.evolve(tmpl, "f", lambda packs: [0.0] * sum(len(p.candidates) for p in packs),
                      population=8, generations=1, seed=0)
    r.save(tmp_path / "e.nxck")
    with pytest.raises(SearchError, match=re.escape(f"resume: fitness={fitness!r} is not callable")) as e:
        search.resume(tmp_path / "e.nxck", template=tmpl, fitness=fitness, generations=1)
    assert not isinstance(e.value, CheckpointError)             # the argument, not the file


# ---- 20: every option has an upper bound -------------------------------------------------------
def test_a_huge_tournament_is_refused_before_anything_is_allocated(tmp_path):
    X, y = _data()
    with pytest.raises(SearchError, match=r"tournament=5000000000: .* population of 20"):
        search.regress(X, y, OPS, population=20, tournament=5_000_000_000, generations=0,
                       device="cpu")
    r = search.regress(X, y, OPS, population=20, tournament=20, generations=1, device="cpu")
    assert r.generations == 1                                    # the bound itself is fine
    r.save(tmp_path / "t.nxck")
    state = ck.read(tmp_path / "t.nxck")
    state["config"]["tournament"] = 5_000_000_000
    ck.write(tmp_path / "t.nxck", state)
    with pytest.raises(CheckpointError, match=r"field config: tournament=5000000000"):
        search.resume(tmp_path / "t.nxck", generations=0, device="cpu")


def _out_of_bounds(rng: random.Random, option: str, pop: int) -> object:
    """A value just past, or far past, an option's upper bound (population ``pop``)."""
    high = {"population": C.POPULATION_MAX, "generations": C.GENERATIONS_MAX,
            "tournament": pop, "elitism": pop - 1, "max_length": C.LENGTH_MAX,
            "fit_top": pop, "fit_steps": C.FIT_STEPS_MAX, "restart": C.GENERATIONS_MAX,
            "revary": C.REVARY_MAX, "bins": C.BINS_MAX,
            "semantic_dedup": C.PROBE_MAX, "islands": pop // 2,
            "migration": C.GENERATIONS_MAX}.get(option)
    if option == "init_length":
        return (1, C.LENGTH_MAX + rng.choice([1, 10 ** rng.randrange(1, 12)]))
    if option == "fit_trials":       # past the bound of any fit_top (lm takes no trials: 1M)
        return C.FIT_BATCH_MAX + rng.choice([1, 10 ** rng.randrange(1, 12)])
    if option in ("crossover", "mutation", "screen", "explore"):    # shares in [0, 1]
        return rng.choice([1.0 + 1e-9, 2.0, 1e300, math.inf, math.nan])
    if option == "parsimony":
        return rng.choice([math.inf, math.nan, -1.0])
    return high + rng.choice([1, 10 ** rng.randrange(1, 12), 2 ** 64])


def test_property_out_of_bound_options_are_refused_at_the_api_and_in_a_checkpoint(tmp_path):
    X, y = _data()
    base = _regress(generations=1)
    base.save(tmp_path / "b.nxck")
    good = ck.read(tmp_path / "b.nxck")
    rng = random.Random(20)
    options = sorted(set(C.BOUNDS) - {"target", "time_limit"})
    assert set(options) | {"target", "time_limit"} == set(C.BOUNDS) <= set(C.DEFAULTS)
    for i in range(120):
        option = rng.choice(options)
        value = _out_of_bounds(rng, option, 20)
        kw = dict(population=20, generations=0, device="cpu", fit_top=2)
        kw[option] = value
        call = search.map_elites if option == "bins" else search.regress
        if call is search.map_elites:
            kw["batch"] = kw.pop("population")
        name = "batch" if (option == "population" and call is search.map_elites) else option
        with pytest.raises(SearchError, match=rf"^{name}=") as e:
            call(X, y, OPS, **kw)
        assert isinstance(e.value, nx.NumptxError)
        if option in ("population", "bins"):
            continue                    # a regress checkpoint: its population is fixed by data
        state = copy.deepcopy(good)
        state["config"][option] = list(value) if isinstance(value, tuple) else value
        ck.write(tmp_path / "c.nxck", state)
        with pytest.raises(CheckpointError, match=rf"field config: {option}="):
            search.resume(tmp_path / "c.nxck", generations=0, device="cpu")


def test_resume_bounds_the_generations_it_adds(tmp_path):
    _regress().save(tmp_path / "g.nxck")
    with pytest.raises(SearchError, match=r"generations=999999999: .*2 are done"):
        search.resume(tmp_path / "g.nxck", generations=999_999_999, device="cpu")


def test_per_module_and_descriptor_bins_have_bounds():
    X, y = _data()
    with pytest.raises(SearchError, match=r"per_module=10000000000"):
        search.regress(X, y, OPS, population=20, generations=0, device="cpu",
                       per_module=10 ** 10)
    d = search.Descriptor("d", lambda p, g: 0.0, 0.0, 1.0, 10 ** 9)
    with pytest.raises(SearchError, match=r"descriptor 'd' bins=1000000000"):
        search.map_elites(X, y, OPS, descriptors=[d], batch=20, generations=1, device="cpu")
    d = search.Descriptor("d", lambda p, g: 0.0, "a", 1.0, 4)
    with pytest.raises(SearchError, match=r"descriptor 'd' low='a'"):
        search.map_elites(X, y, OPS, descriptors=[d], batch=20, generations=1, device="cpu")


# ---- 14, 15: the stub's fix, the docs ----------------------------------------------------------
def test_a_stub_at_a_site_with_other_names_names_the_fix():
    best = _regress().best
    src = (r'extern "C" __global__ void k(float* out, const float* a, int n) { '
           r'int i = threadIdx.x; float u = a[i], v = a[i+1], z; unsigned c = 0; '
           r'PTX_INJECT("g", PTX_IN(U32, c), PTX_IN(F32, u), PTX_IN(F32, v), PTX_OUT(F32, z)); '
           r'out[i] = z; }')
    site = nx.CudaTemplate(src, entry="k").sites["g"]
    with pytest.raises(SearchError) as e:
        best.stub(site)
    msg = str(e.value)
    assert "x0 (missing)" in msg
    assert "regress(X, y, names=[...])" in msg and "f32 inputs u, v" in msg
    assert "or name the site's variables x0, x1" in msg


def test_the_docs_list_every_op_and_the_default_ops():
    text = (ROOT / "docs" / "search.md").read_text()
    ops_section = text[text.index("## Operators (genes)"):text.index("## Constants: linear scaling")]
    for name in OP_NAMES:
        assert f"`{name}`" in ops_section or f" {name} " in ops_section or \
            f" {name}`" in ops_section or f"`{name} " in ops_section, name
    default = inspect.signature(search.regress).parameters["ops"].default
    assert default == inspect.signature(search.map_elites).parameters["ops"].default == \
        inspect.signature(search.evolve).parameters["ops"].default
    assert f"`ops=` defaults to `{' '.join(default)}`" in text
