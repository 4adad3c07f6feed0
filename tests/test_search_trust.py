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
    ([sp.input("x0")] * 5000, r"a program of 5000 ops; this run makes at most 64"),
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
                       init_length=(1, 12))
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
    assert outcomes["resumed"] > count // 10 and outcomes["refused"] > count // 3, outcomes


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
            "revary": C.REVARY_MAX, "bins": C.BINS_MAX}.get(option)
    if option == "init_length":
        return (1, C.LENGTH_MAX + rng.choice([1, 10 ** rng.randrange(1, 12)]))
    if option == "fit_trials":
        return C.FIT_BATCH_MAX // 2 + rng.choice([1, 10 ** rng.randrange(1, 12)])
    if option in ("crossover", "mutation"):
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
    ops_section = text[text.index("## Operators (genes)"):text.index("## The local optimizer")]
    for name in OP_NAMES:
        assert f"`{name}`" in ops_section or f" {name} " in ops_section or \
            f" {name}`" in ops_section or f"`{name} " in ops_section, name
    default = inspect.signature(search.regress).parameters["ops"].default
    assert default == inspect.signature(search.map_elites).parameters["ops"].default == \
        inspect.signature(search.evolve).parameters["ops"].default
    assert f"`ops=` defaults to `{' '.join(default)}`" in text


# ---- review (issue 22, adversarial pass): paths, huge numbers, formula text, threads -----------
_READ_IN_A_BOX = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))       # 1 GiB: /dev/zero read whole
from numptx.search import checkpoint as ck
try:
    ck.read(sys.argv[1])
except ck.CheckpointError as e:
    print("CheckpointError", e)
except BaseException as e:
    print("RAW", type(e).__name__, e)
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX: FIFOs and /dev/zero")
@pytest.mark.parametrize("what", ["/dev/zero", "fifo", "folder"])
def test_a_path_that_is_not_a_regular_file_is_refused_unread(tmp_path, what):
    # /dev/zero was read whole (MemoryError after filling the address space); a FIFO blocked
    # open() for ever, waiting for a writer
    path = {"/dev/zero": "/dev/zero", "folder": str(tmp_path)}.get(what, str(tmp_path / "f"))
    if what == "fifo":
        os.mkfifo(path)
    try:
        out = subprocess.run([sys.executable, "-c", _READ_IN_A_BOX, path], capture_output=True,
                             text=True, timeout=60, cwd=ROOT).stdout
    except subprocess.TimeoutExpired:
        pytest.fail(f"checkpoint.read({path!r}) hangs")
    assert out.startswith("CheckpointError"), out
    assert path in out
    if what != "folder":
        assert "not a regular file" in out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX: FIFOs")
def test_saving_over_a_fifo_or_a_device_is_refused_and_leaves_it(tmp_path):
    # os.replace put a regular file in its place (as root, save("/dev/null") replaced /dev/null)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    r = _regress(generations=1)
    with pytest.raises(CheckpointError, match=r"is a device, a pipe or a socket"):
        r.save(fifo)
    assert stat_is_fifo(fifo)
    dev = tmp_path / "null"
    try:
        os.mknod(dev, 0o666 | __import__("stat").S_IFCHR, os.makedev(1, 3))
    except (OSError, AttributeError):
        return                                   # not root: a FIFO is the case that remains
    with pytest.raises(CheckpointError, match=r"is a device"):
        r.save(dev)
    assert __import__("stat").S_ISCHR(os.lstat(dev).st_mode)


def stat_is_fifo(path) -> bool:
    import stat
    return stat.S_ISFIFO(os.lstat(path).st_mode)


@pytest.mark.parametrize("edit, match", [
    # JSON reads a 401-digit number as an int; float() of it raised OverflowError
    (lambda s: s["history"][0].__setitem__(1, 10 ** 400), r"field history\[0\].best: .*float"),
    (lambda s: s["population"][0].__setitem__(1, 10 ** 400), r"field population\[0\].loss"),
    (lambda s: s["best"].__setitem__(1, -10 ** 400), r"field best.loss"),
    (lambda s: s["fits"][0].__setitem__(2, 10 ** 400), r"field fits\[0\].loss"),
    (lambda s: s["genes"].update(constants=[10 ** 400]), r"field genes: constants=: an int of"),
    (lambda s: s["config"].update(crossover=10 ** 400), r"field config: crossover=an int of"),
    (lambda s: s["config"].update(parsimony=10 ** 400), r"field config: parsimony=an int of"),
    (lambda s: s.update(seed=2 ** 256), r"field seed: seed=an int of 257 bits"),
])
def test_a_number_past_the_float_range_is_a_checkpoint_error(tmp_path, saved, edit, match):
    state = copy.deepcopy(saved["regress"])
    assert state["fits"]
    edit(state)
    with pytest.raises(CheckpointError, match=match):
        _resume(tmp_path, state)


@pytest.mark.parametrize("kw, match", [
    (dict(crossover=10 ** 400), r"^crossover=an int of 1329 bits: give a number in \[0.0, 1.0\]"),
    (dict(parsimony=-10 ** 400), r"^parsimony=an int of"),
    (dict(constants=[10 ** 400]), r"constants=: an int of 1329 bits is not a finite number"),
    (dict(population=10 ** 5000), r"^population=an int of 16610 bits: give an int in \[2, "),
    (dict(tournament=-10 ** 5000), r"^tournament=an int of 16610 bits: give an int >= 1"),
    (dict(seed=10 ** 5000), r"^seed=an int of 16610 bits: give an int in \[0, 2\*\*256 - 1\]"),
])
def test_huge_ints_are_search_errors_at_the_api(kw, match):
    # OverflowError (float of the int) and ValueError (printing an int of > 4,300 digits) before;
    # a seed of 5,000 digits ran, and then save() failed with ValueError in json.dumps
    X, y = _data()
    with pytest.raises(SearchError, match=match):
        search.regress(X, y, OPS, **{"population": 20, "generations": 1, "device": "cpu", **kw})


def test_huge_but_finite_settings_still_run():
    X, y = _data()
    r = search.regress(X, y, OPS, population=20, generations=1, device="cpu",
                       target=-10 ** 400, time_limit=10 ** 400, seed=2 ** 256 - 1)
    assert r.generations == 1 and r.seed == 2 ** 256 - 1


@pytest.mark.parametrize("text, want", [
    ("1" + "0" * 400 + "*x0", math.inf),             # an int literal past the float range
    ("0x" + "f" * 300, math.inf),
    ("1e400*x0", math.inf),                          # as Python reads it
    ("-" + "1" * 4000, -math.inf),
    ("x0" + "**2" * 3, 1.0),
])
def test_formula_numbers_past_the_float_range_read_as_inf(text, want):
    # OverflowError (int too large to convert to float) before
    out = evaluate(text, np.ones((2, 1), np.float32), Genes(["add"], 1))
    assert out.tolist() == [want, want]


@pytest.mark.parametrize("text", ["x0\ud800", "\udfff"])
def test_a_formula_python_cannot_encode_is_a_search_error(text):
    # UnicodeEncodeError from ast.parse before
    with pytest.raises(SearchError, match=r"is not a formula \('utf-8' codec"):
        evaluate(text, np.ones((2, 1), np.float32), Genes(["add"], 1))


def test_evaluate_in_threads_leaves_the_recursion_limit_alone():
    # evaluate raised the process's recursion limit and restored the value it had read: two
    # threads interleaving left it raised for good (3000 after a run of this test), and a
    # thread deep in a formula could see another thread lower it under its feet
    import threading
    genes, X = Genes(["add"], 1), np.ones((2, 1), np.float32)
    before, errors = sys.getrecursionlimit(), []

    def work(k):
        for i in range(20):
            try:
                got = evaluate("-" * (990 + (k + i) % 9) + "x0", X, genes)
                assert got.tolist() == [(-1.0) ** (990 + (k + i) % 9)] * 2
            except BaseException as e:          # noqa: BLE001 - the property under test
                errors.append(repr(e))
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == [] and sys.getrecursionlimit() == before


def test_per_module_is_bounded_by_what_a_pack_holds(tmp_path):
    # per_module was allowed up to 1,000,000 at the API and in a checkpoint; a pack holds at
    # most jit.pack.MAX_CANDIDATES (ptxas's limit), so 20,000 failed later, at the first build
    from numptx.jit.pack import MAX_CANDIDATES
    tmpl = nx.CudaTemplate(_EVOLVE_SRC, entry="fit")

    def fitness(packs):
        return [0.0] * sum(len(p.candidates) for p in packs)
    with pytest.raises(SearchError, match=rf"evolve: per_module={MAX_CANDIDATES + 1}: give an "
                                          rf"int in \[1, 16,380\]"):
        search.evolve(tmpl, "f", fitness, population=8, generations=1, seed=0,
                      per_module=MAX_CANDIDATES + 1)
    r = search.evolve(tmpl, "f", fitness, population=8, generations=1, seed=0,
                      per_module=MAX_CANDIDATES)
    r.save(tmp_path / "e.nxck")
    state = ck.read(tmp_path / "e.nxck")
    state["evolve"]["per_module"] = MAX_CANDIDATES + 1
    ck.write(tmp_path / "e.nxck", state)
    with pytest.raises(CheckpointError, match=r"field evolve.per_module: 16381 is not an int in "
                                              r"\[1, 16,380\]"):
        search.resume(tmp_path / "e.nxck", generations=1, template=tmpl, fitness=fitness)
    with pytest.raises(SearchError, match=r"resume: per_module=16381"):
        search.resume(tmp_path / "e.nxck", generations=1, template=tmpl, fitness=fitness,
                      per_module=MAX_CANDIDATES + 1)
    text = (ROOT / "docs" / "search.md").read_text()
    assert "| `per_module` | 1 to 16,380 |" in text


def _bindings(n: int) -> str:
    """A balanced sum of ``n`` ``:=`` bindings (shallow: the depth limit does not stop it)."""
    terms = [f"(a{i}:=x0+1)" for i in range(n)]
    while len(terms) > 1:
        terms = [f"({a}+{b})" for a, b in zip(terms[::2], terms[1::2])] + \
            (terms[-1:] if len(terms) % 2 else [])
    return terms[0]


def test_a_formula_binds_at_most_max_names():
    # each := keeps an array of len(X) values to the end: 55,000 of them in 0.9 MB of text
    # took 4 GB on 20,000 rows and ended in a raw MemoryError
    from numptx.search.formula import MAX_NAMES
    genes, X = Genes(["add"], 1), np.ones((2, 1), np.float32)
    assert MAX_NAMES == sp.Limits().max_steps          # one binding per op of a program at most
    assert evaluate(_bindings(MAX_NAMES), X, genes).tolist() == [2.0 * MAX_NAMES] * 2
    with pytest.raises(FormulaLimitError, match=r"binds more than formula.MAX_NAMES = 4,096") as e:
        evaluate(_bindings(MAX_NAMES + 1), X, genes)
    assert e.value.limit == "MAX_NAMES"


_EVALUATE_IN_A_BOX = r"""
import resource, sys
import numpy as np
sys.path.insert(0, "tests")
from test_search_trust import _bindings
from numptx.search.formula import evaluate, FormulaLimitError
from numptx.search.genes import Genes
X = np.ones((100_000, 1), np.float32)            # 4,096 bindings of 400 KB: 1.6 GB
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
try:
    evaluate(_bindings(4096), X, Genes(["add"], 1))
    print("evaluated")
except FormulaLimitError as e:
    print("FormulaLimitError", e.limit, e)
except BaseException as e:
    print("RAW", type(e).__name__, e)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS bounds numpy's allocations")
def test_a_formula_past_the_memory_there_is_names_the_limit():
    out = subprocess.run([sys.executable, "-c", _EVALUATE_IN_A_BOX], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.stdout.startswith("FormulaLimitError memory"), out.stdout + out.stderr[-2000:]
    assert "100,000 rows" in out.stdout


def test_a_long_printed_program_evaluates_or_names_the_limit():
    # max_length may be 4,096: a chain of 300 sin() prints past Python's 200 parentheses;
    # evaluate names that limit (never a raw error) and predict() runs the program
    genes = Genes(["sin", "add"], 1)
    X = np.linspace(-1, 1, 4, dtype=np.float32)[:, None]
    chain = [sp.input("x0")] + [w for _ in range(300) for w in genes.op_words("sin")]
    with pytest.raises(FormulaLimitError, match=r"200 parentheses") as e:
        evaluate(chain, X, genes)
    assert e.value.limit == "parentheses"
    from numptx.search.loop import Candidate
    got = Candidate(chain, 0.0, genes, False).predict(X)
    want = X[:, 0].astype(np.float64)
    for _ in range(300):
        want = np.sin(want)
    assert np.allclose(got, want, atol=1e-5)


def test_the_largest_parsimony_runs_without_a_numpy_warning():
    # parsimony is bounded by the float range: 1e308 x a program's length overflowed with
    # "RuntimeWarning: overflow encountered in multiply" from inside the loop
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = search.regress(X, y, OPS, population=20, generations=2, seed=0, device="cpu",
                           parsimony=1e308)
    assert r.generations == 2 and r.best is not None


@pytest.mark.parametrize("max_bytes", [2 ** 40 + 1, 2 ** 62, 2 ** 63, 10 ** 30])
def test_max_bytes_is_bounded(tmp_path, max_bytes):
    # OverflowError (zlib's bound is a C ssize_t) or MemoryError before
    _regress(generations=1).save(tmp_path / "r.nxck")
    with pytest.raises(SearchError, match=rf"max_bytes={max_bytes}: give an int in \[1, 2\*\*40\]"):
        search.resume(tmp_path / "r.nxck", generations=0, device="cpu", max_bytes=max_bytes)
    assert ck.read(tmp_path / "r.nxck", max_bytes=ck.MAX_BYTES_MAX)["kind"] == "regress"


_READ_SMALL_IN_A_BOX = r"""
import resource, sys
from numptx.search import checkpoint as ck
with open("/proc/self/status") as f:
    vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (vm + (96 << 20), vm + (96 << 20)))
try:
    print(ck.read(sys.argv[1])["kind"])                # MAX_BODY (256 MiB) is not reserved
except BaseException as e:
    print("RAW", type(e).__name__, e)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux: VmSize")
def test_reading_a_small_checkpoint_reserves_only_its_size(tmp_path):
    _regress(generations=1).save(tmp_path / "r.nxck")
    out = subprocess.run([sys.executable, "-c", _READ_SMALL_IN_A_BOX, str(tmp_path / "r.nxck")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.stdout.strip() == "regress", out.stdout + out.stderr[-2000:]


_FORMULA_IN_A_SMALL_THREAD = r"""
import sys, threading
from numptx import stack_ptx as sp
from numptx.search.formula import formula
from numptx.search.genes import Genes
genes = Genes(["sin", "add"], 1)
chain = [sp.input("x0")] + [w for _ in range(4095) for w in genes.op_words("sin")]
threading.stack_size(512 << 10)                  # macOS's default for a new thread
out = []
t = threading.Thread(target=lambda: out.append(formula(chain, genes)))
t.start()
t.join()
print(len(out[0]), out[0][:12], sys.getrecursionlimit())
"""


def test_a_4096_op_chain_prints_in_a_thread_with_a_small_stack():
    # the printer recursed once a level under a recursion limit raised to 4 x nodes + 1000:
    # a legitimate 4,096-op program (max_length=4096) crashed the process (SIGSEGV) in a
    # thread with a 512 KB or 1 MB stack, where Python's own limit would have stopped it
    out = subprocess.run([sys.executable, "-c", _FORMULA_IN_A_SMALL_THREAD], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert out.stdout.split() == ["20477", "sin(sin(sin(", "1000"]


@pytest.mark.parametrize("value, at", [(-1e308, 0), (1e308, 3), (10 ** 400, 3), (-10 ** 400, 0),
                                       (math.inf, 3), (-math.inf, 0), (math.nan, 0),
                                       (0.3, 1), (1.0, 3)],
                         ids=["-1e308", "1e308", "10**400", "-10**400", "inf", "-inf", "nan",
                              "0.3", "1.0"])
def test_a_descriptor_value_of_any_size_is_binned(value, at):
    # floor(-1e308 x bins) and float(10**400) raised OverflowError in the run; +inf went to the
    # first cell, not the last ("values outside go to the end cells")
    X, y = _data()
    d = search.Descriptor("d", lambda p, g: value, 0.0, 1.0, 4)
    r = search.map_elites(X, y, OPS, descriptors=[d], batch=8, generations=2, seed=0,
                          device="cpu", fit_top=0)
    assert list(r.archive) == [(at,)]


def test_a_descriptor_range_must_not_be_empty_and_may_be_huge():
    X, y = _data()
    for low, high in [(1.0, 1.0), (2.0, 1.0)]:
        d = search.Descriptor("d", lambda p, g: 0.5, low, high, 4)
        with pytest.raises(SearchError, match=rf"descriptor 'd': low={low} is not below "
                                              rf"high={high}"):
            search.map_elites(X, y, OPS, descriptors=[d], batch=8, generations=1, device="cpu")
    d = search.Descriptor("d", lambda p, g: 0.0, -1e308, 1e308, 4)      # high - low overflows
    r = search.map_elites(X, y, OPS, descriptors=[d], batch=8, generations=1, seed=0,
                          device="cpu", fit_top=0)
    assert list(r.archive) == [(2,)]


def _evolve_scores(scores):
    tmpl = nx.CudaTemplate(_EVOLVE_SRC, entry="fit")

    def fitness(packs):
        n = sum(len(p.candidates) for p in packs)
        return scores(n)
    return search.evolve(tmpl, "f", fitness, population=8, generations=2, seed=0)


@pytest.mark.parametrize("scores, match", [
    (lambda n: ["1"] * n, r"returned '1' \(str\) for candidate 0; give a number"),
    (lambda n: [0.0] * (n - 1) + [None], r"returned None \(NoneType\) for candidate \d+"),
    (lambda n: [True] * n, r"returned True \(bool\) for candidate 0"),
    (lambda n: [1j] * n, r"returned 1j \(complex\) for candidate 0"),
    (lambda n: np.ones(n, bool), r"returned np.True_ \(bool\) for candidate 0"),
    (lambda n: np.zeros((n, 1)), r"returned an array of shape \(\d+, 1\) for \d+ candidates"),
    (lambda n: set(range(n)), r"returned set; it must return one number per candidate"),
    (lambda n: "0" * n, r"returned str"),
], ids=["text", "None", "bool", "complex", "bool-array", "2-D", "set", "str"])
def test_evolve_refuses_scores_numpy_would_make_up(scores, match):
    # np.asarray(got, float64) parsed text, took None as NaN, True as 1.0, flattened a 2-D
    # array; an int past the float range raised OverflowError
    with pytest.raises(SearchError, match=r"evolve: fitness= " + match):
        _evolve_scores(scores)


def test_evolve_takes_any_real_number_as_a_score():
    from decimal import Decimal
    from fractions import Fraction
    r = _evolve_scores(lambda n: [10 ** 400, -10 ** 400, math.nan, Fraction(1, 3), Decimal(2),
                                  np.float16(1), np.int64(3), -1e308][:n] + [5.0] * (n - 8))
    assert r.best.loss == -math.inf                      # -10**400: past the float range
    r = _evolve_scores(lambda n: np.arange(n, dtype=np.int32))
    assert r.best.loss == 0.0


def test_resume_refuses_descriptors_other_than_the_runs(tmp_path):
    # the archive's cells are bins of the run's axes: other descriptors (another user axis, the
    # same ones in another order, a built-in swapped) resumed without a word and filed the
    # archive by axes it was not made with
    X, y = _data()
    d = search.Descriptor("nconst", lambda p, g: sum(op.kind == "const" for op in p), 0, 6, 6)
    e = search.Descriptor("other", lambda p, g: 0.5, 0, 1, 6)
    r = search.map_elites(X, y, OPS, descriptors=["length", d], batch=12, generations=2, seed=0,
                          device="cpu", fit_top=0)
    r.save(tmp_path / "m.nxck")
    for given in (["length", e], [d, "length"], ["op_mix", d]):
        with pytest.raises(SearchError, match=r"was run with descriptors \['length', 'nconst'\] "
                                              r"\(in that order\)") as err:
            search.resume(tmp_path / "m.nxck", generations=1, device="cpu", descriptors=given)
        assert not isinstance(err.value, CheckpointError)            # the argument's fault
    full = search.map_elites(X, y, OPS, descriptors=["length", d], batch=12, generations=3,
                             seed=0, device="cpu", fit_top=0)
    more = search.resume(tmp_path / "m.nxck", generations=1, device="cpu",
                         descriptors=["length", d])
    assert [g[:-1] for g in more.history] == [g[:-1] for g in full.history]


@pytest.mark.parametrize("path, match", [(3, r"path=3: give a file path"),
                                         (None, r"path=None: give a file path"),
                                         ("a\x00b", r"path='a\\x00b': a path holds no NUL")])
def test_a_path_that_is_no_path_is_a_search_error(tmp_path, path, match):
    # os.fspath's TypeError and os.open's ValueError ("embedded null byte") escaped
    with pytest.raises(SearchError, match=r"resume: " + match):
        search.resume(path, generations=0, device="cpu")
    r = _regress(generations=1)
    with pytest.raises(SearchError, match=r"save: " + match):
        r.save(path)
    r.save(os.fsencode(tmp_path / "b.nxck"))                     # bytes are a path
    assert search.resume(os.fsencode(tmp_path / "b.nxck"), generations=0,
                         device="cpu").generations == 1
