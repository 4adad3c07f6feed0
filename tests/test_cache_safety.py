"""Nothing outside a cache folder is read, written or removed: the cubin cache and the autotune
ranking cache follow no symlink under their folder (issue 22 item 6), and a ranking entry of any
content is a miss, never an exception (item 9).

Real components: real folders, files and symlinks under pytest's tmp_path; the real CLI."""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numptx as nx
from numptx.cli import main
from numptx.jit.compile.cache import SCHEMA as CUBIN_SCHEMA, CubinCache, entry_digest
from numptx.jit.tune.tune_cache import SCHEMA as TUNE_SCHEMA, STALE_TMP_S, TuneCache

pytestmark = pytest.mark.skipif(not hasattr(os, "symlink") or sys.platform == "win32",
                                reason="symlinks need a POSIX file system")

KEY = "ab" * 32
CUBIN = b"\x7fELF outside cubin"
OLD = time.time() - 10 * STALE_TMP_S          # a stale temporary file's mtime


def cubin_entry(key: str = KEY, cubin: bytes = CUBIN) -> bytes:
    """A whole, valid cubin cache entry for ``key``."""
    return cubin + b"NXCUBIN3" + entry_digest(key, cubin)


def tune_entry(key: str = KEY, value: float = 7.0) -> str:
    return json.dumps({"schema": TUNE_SCHEMA, "key": key, "value": value, "context": {}})


def outside_tree(root) -> None:
    """Files a cache must never touch, each a valid entry for KEY where it can be one, and
    temporary files old enough to be swept."""
    (root / "sub").mkdir(parents=True)
    for folder in (root, root / "sub"):
        (folder / f"{KEY}.cubin").write_bytes(cubin_entry())
        (folder / f"{KEY}.json").write_text(tune_entry())
        (folder / "precious.cubin").write_bytes(b"user data")
        for name in ("job.tmp", f".{KEY[:16]}.x.tmp"):
            (folder / name).write_bytes(b"user temp")
            os.utime(folder / name, (OLD, OLD))


def snapshot(root) -> dict:
    """Every path under ``root`` (no link followed): its kind, content digest and mtime."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            st_ = os.lstat(p)
            if os.path.islink(p):
                out[p] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[p] = ("dir",)
            else:
                out[p] = ("file", hashlib.sha256(open(p, "rb").read()).hexdigest(), st_.st_mtime)
    return out


@pytest.fixture
def outside(tmp_path):
    root = tmp_path / "outside"
    outside_tree(root)
    return root


# ------------------------------------------------------------------ the reported break-out
def test_clear_does_not_follow_a_symlinked_schema_folder(tmp_path, outside):
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    os.symlink(outside, cache_dir / f"cubin-v{CUBIN_SCHEMA}")
    os.symlink(outside, cache_dir / "cubin-v1")
    before = snapshot(outside)
    cache = CubinCache(str(cache_dir))
    assert cache.info().entries == 0                    # the link's target is not counted
    assert cache.clear() == 0
    assert snapshot(outside) == before                  # nothing deleted out there
    assert not os.listdir(cache_dir)                    # the links themselves are gone


def test_cli_cache_clear_leaves_a_symlinks_target_alone(tmp_path, outside, monkeypatch, capsys):
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    os.symlink(outside, cache_dir / f"cubin-v{CUBIN_SCHEMA}")
    (cache_dir / "cubin-v2").mkdir()
    os.symlink(outside / "sub", cache_dir / "cubin-v2" / "ab")
    before = snapshot(outside)
    monkeypatch.setenv("NUMPTX_CACHE_DIR", str(cache_dir))
    monkeypatch.delenv("NUMPTX_CACHE", raising=False)
    assert main(["cache", "clear"]) == 0
    assert "removed 0 entries" in capsys.readouterr().out
    assert snapshot(outside) == before
    # the command line as a user types it, in a fresh process
    os.symlink(outside, cache_dir / "cubin-v1")
    env = {**os.environ, "NUMPTX_CACHE_DIR": str(cache_dir)}
    r = subprocess.run([sys.executable, "-m", "numptx.cli", "cache", "clear"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert snapshot(outside) == before


def test_a_symlinked_entry_or_folder_is_a_miss_and_no_write_goes_through_it(tmp_path, outside,
                                                                            caplog):
    cache_dir = tmp_path / "cache"
    sub = cache_dir / f"cubin-v{CUBIN_SCHEMA}"
    sub.mkdir(parents=True)
    os.symlink(outside, sub / KEY[:2])                  # the <ab> folder leads out
    before = snapshot(outside)
    cache = CubinCache(str(cache_dir), memory_entries=0)
    with caplog.at_level(logging.WARNING, logger="numptx.jit.compile.cache"):
        assert cache.get(KEY) is None                   # a valid entry out there is not read
        cache.put(KEY, b"\x7fELF mine")                 # refused, logged: not written out there
    assert "symlink" in caplog.text
    assert snapshot(outside) == before
    os.remove(sub / KEY[:2])
    (sub / KEY[:2]).mkdir()
    os.symlink(outside / f"{KEY}.cubin", cache.path(KEY))    # the entry itself is a link
    assert cache.get(KEY) is None
    cache.put(KEY, b"\x7fELF mine")                     # replaces the link, not its target
    assert not os.path.islink(cache.path(KEY)) and cache.get(KEY) == b"\x7fELF mine"
    assert cache.info().entries == 1
    assert snapshot(outside) == before


def test_info_counts_no_symlinked_entry(tmp_path, outside):
    cache = CubinCache(str(tmp_path / "cache"))
    cache.put("cd" * 32, b"\x7fELF" + b"x" * 100)
    folder = os.path.dirname(cache.path(KEY))
    os.makedirs(folder)
    os.symlink(outside / "precious.cubin", cache.path(KEY))
    info = cache.info()
    assert info.entries == 1 and info.bytes == 104 + 40


def test_a_cache_root_that_is_a_symlink_is_used(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "link")
    cache = CubinCache(str(tmp_path / "link"), memory_entries=0)
    cache.put(KEY, b"\x7fELF mine")
    assert cache.get(KEY) == b"\x7fELF mine" and cache.info().entries == 1
    assert (real / f"cubin-v{CUBIN_SCHEMA}" / "ab" / f"{KEY}.cubin").is_file()
    assert cache.clear() == 1
    tune = TuneCache(tmp_path / "link")
    tune.put(KEY, 1.5, {})
    assert tune.get(KEY) == 1.5


def test_keys_name_no_path_outside_the_folder(tmp_path):
    for bad in ("../../etc/passwd", "..", "AB" * 32, "", 5, "a/b" * 10):
        with pytest.raises(nx.NumptxError, match="hex"):
            CubinCache(str(tmp_path / "c")).path(bad)
        with pytest.raises(nx.NumptxError, match="hex"):
            TuneCache(tmp_path / "t").get(bad)
    with pytest.raises(nx.NumptxError, match="hex"):
        CubinCache(str(tmp_path / "c")).put("../x", b"\x7fELF")
    assert not (tmp_path / "x").exists()


def test_tune_cache_follows_no_symlink(tmp_path, outside, caplog):
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    os.symlink(outside, cache_dir / f"autotune-v{TUNE_SCHEMA}")
    before = snapshot(outside)
    tune = TuneCache(cache_dir)
    with caplog.at_level(logging.WARNING, logger="numptx.jit.tune.tune_cache"):
        assert tune.get(KEY) is None                    # the valid entry out there is not read
        tune.put(KEY, 3.0, {})                          # nor written, nor swept
    assert "symlink" in caplog.text
    assert snapshot(outside) == before
    # the <ab> folder a link to a folder holding stale temporary files: no sweep there
    os.remove(cache_dir / f"autotune-v{TUNE_SCHEMA}")
    (cache_dir / f"autotune-v{TUNE_SCHEMA}").mkdir()
    os.symlink(outside, cache_dir / f"autotune-v{TUNE_SCHEMA}" / KEY[:2])
    tune.put(KEY, 3.0, {})
    assert tune.get(KEY) is None
    assert snapshot(outside) == before
    # the entry a link to a valid entry: a miss; a write replaces the link
    os.remove(cache_dir / f"autotune-v{TUNE_SCHEMA}" / KEY[:2])
    os.makedirs(os.path.dirname(tune.path(KEY)))
    os.symlink(outside / f"{KEY}.json", tune.path(KEY))
    assert tune.get(KEY) is None
    tune.put(KEY, 3.0, {})
    assert tune.get(KEY) == 3.0 and not os.path.islink(tune.path(KEY))
    assert snapshot(outside) == before


# ------------------------------------------------------------------ random symlink layouts
_KINDS = ["dir", "file", "out_dir", "out_file", "out_sub", "dangling", "loop", "self", "inner"]
_SLOTS = [f"cubin-v{CUBIN_SCHEMA}", "cubin-v1", f"autotune-v{TUNE_SCHEMA}",
          f"cubin-v{CUBIN_SCHEMA}/ab", f"cubin-v1/ab", f"autotune-v{TUNE_SCHEMA}/ab",
          f"cubin-v{CUBIN_SCHEMA}/ab/{KEY}.cubin", f"autotune-v{TUNE_SCHEMA}/ab/{KEY}.json",
          f"cubin-v{CUBIN_SCHEMA}/ab/.{KEY[:16]}.q.tmp", f"autotune-v{TUNE_SCHEMA}/ab/.x.tmp",
          f"cubin-v{CUBIN_SCHEMA}/ab/deep", f"cubin-v{CUBIN_SCHEMA}/ab/deep/z.cubin"]


def _place(cache, outside, rel: str, kind: str) -> None:
    p = cache / rel
    if not p.parent.is_dir() or p.parent.is_symlink() or os.path.lexists(p):
        return                          # a parent that is no real folder: nothing under it
    if kind == "dir":
        p.mkdir()
    elif kind == "file":
        p.write_bytes(b"junk")
    else:
        target = {"out_dir": outside, "out_file": outside / f"{KEY}.cubin",
                  "out_sub": outside / "sub", "dangling": outside / "missing",
                  "loop": p.parent, "self": p, "inner": cache}[kind]
        os.symlink(target, p)


def _operations(cache_dir: str, order: list[int]) -> None:
    """Every read, write and delete path of both caches, in a drawn order; none raises."""
    def cubin_ops(c: CubinCache):
        assert c.get(KEY) in (None, b"\x7fELF mine")
        c.put(KEY, b"\x7fELF mine")
        c.get(KEY)
        c.info()

    def tune_ops(t: TuneCache):
        assert t.get(KEY) in (None, 2.5)
        t.put(KEY, 2.5, {"drawn": True})
        assert t.get(KEY) in (None, 2.5)

    ops = [lambda: cubin_ops(CubinCache(cache_dir, memory_entries=0)),
           lambda: tune_ops(TuneCache(cache_dir)),
           lambda: CubinCache(cache_dir).clear(),
           lambda: CubinCache(cache_dir).info()]
    for k in order:
        ops[k % len(ops)]()


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(layout=st.lists(st.tuples(st.sampled_from(_SLOTS), st.sampled_from(_KINDS)),
                       min_size=1, max_size=14),
       order=st.lists(st.integers(0, 3), min_size=1, max_size=8),
       root_link=st.booleans())
def test_random_symlink_layouts_touch_nothing_outside(layout, order, root_link):
    with tempfile.TemporaryDirectory() as tmp:
        from pathlib import Path
        tmp = Path(tmp)
        outside = tmp / "outside"
        outside_tree(outside)
        real = tmp / "cache"
        real.mkdir()
        for rel, kind in sorted(layout, key=lambda x: x[0].count("/")):
            _place(real, outside, rel, kind)
        cache_dir = tmp / "root-link" if root_link else real
        if root_link:                   # the user's own choice of folder: followed
            os.symlink(real, cache_dir)
        before = snapshot(outside)
        _operations(str(cache_dir), order)
        assert snapshot(outside) == before, (layout, order)
        # whatever was found, the cache works inside its folder afterwards, unless a file
        # numptx did not write stands where its folder goes: that file is left alone
        CubinCache(str(cache_dir)).clear()
        c = CubinCache(str(cache_dir), memory_entries=0)
        c.put("cd" * 32, b"\x7fELF fine")
        blocked = real / f"cubin-v{CUBIN_SCHEMA}"
        if blocked.is_file() and not blocked.is_symlink():
            assert c.get("cd" * 32) is None and blocked.read_bytes() == b"junk"
        else:
            assert c.get("cd" * 32) == b"\x7fELF fine"
        assert snapshot(outside) == before


# ------------------------------------------------------------------ item 9: corrupt entries
def _write_raw(tune: TuneCache, key: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(tune.path(key)), exist_ok=True)
    with open(tune.path(key), "wb") as f:
        f.write(data)


def test_deeply_nested_entry_is_a_corrupt_miss(tmp_path, caplog):
    tune = TuneCache(tmp_path)
    for body in (b"[" * 200_000, b"{\"a\":" * 100_000, b"[" * 200_000 + b"]" * 200_000):
        _write_raw(tune, KEY, body)
        with caplog.at_level(logging.WARNING, logger="numptx.jit.tune.tune_cache"):
            assert tune.get(KEY) is None
        assert "corrupt" in caplog.text and "nested" in caplog.text
        caplog.clear()
    tune.put(KEY, 4.0, {})                          # the next measurement replaces it
    assert tune.get(KEY) == 4.0


def test_deep_entries_never_reach_the_parser_even_with_a_high_recursion_limit(tmp_path):
    tune = TuneCache(tmp_path)
    _write_raw(tune, KEY, b"[" * 500_000)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(10**6)     # the parser would recurse until the C stack ran out
    try:
        assert tune.get(KEY) is None
    finally:
        sys.setrecursionlimit(old)


def _random_json(rng: random.Random, depth: int):
    r = rng.random()
    if depth <= 0 or r < 0.3:
        return rng.choice([None, True, False, 0, -1, 1.5, 10**400, float("nan"), "s", "",
                           KEY, TUNE_SCHEMA, [], {}])
    if r < 0.6:
        return [_random_json(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    keys = ["schema", "key", "value", "context", "x"]
    return {rng.choice(keys): _random_json(rng, depth - 1) for _ in range(rng.randint(0, 4))}


def test_fuzzed_entries_are_misses_never_exceptions(tmp_path, caplog):
    """Random JSON (nested, wrong types, huge ints, NaN), garbage bytes, deep nesting and
    truncations of a valid entry: get() returns None or the valid value, and logs the rest."""
    rng = random.Random(22)
    tune = TuneCache(tmp_path)
    valid = tune_entry(KEY, 3.25).encode()
    bodies = [valid[:k] for k in range(0, len(valid), 7)]
    bodies += [rng.randbytes(rng.randint(0, 300)) for _ in range(60)]
    bodies += [json.dumps(_random_json(rng, rng.randint(0, 8))).encode() for _ in range(150)]
    for _ in range(40):
        entry = json.loads(valid)
        entry[rng.choice(["schema", "key", "value"])] = _random_json(rng, 3)
        bodies.append(json.dumps(entry).encode())
    bodies += [b"[" * rng.randint(30, 3000) + b"1" + b"]" * rng.randint(0, 3000)
               for _ in range(20)]
    bodies += [b'{"value": ' + b"9" * 5000 + b"}", b"\xff\xfe", b'"\\ud800"', b"NaN",
               b'{"schema": 2, "key": "' + KEY.encode() + b'", "value": 1e999}']
    misses = 0
    with caplog.at_level(logging.WARNING, logger="numptx.jit.tune.tune_cache"):
        for body in bodies:
            _write_raw(tune, KEY, body)
            got, want = tune.get(KEY), _expected(body)
            assert got == want, body[:80]
            misses += want is None
    assert caplog.text.count("corrupt") == misses > len(bodies) // 2


def _expected(body: bytes) -> float | None:
    """What a valid entry holds (an oracle written apart from TuneCache's checks)."""
    try:
        e = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(e, dict) or e.get("schema") != TUNE_SCHEMA or e.get("key") != KEY:
        return None
    v = e.get("value")
    try:
        finite = type(v) in (int, float) and abs(float(v)) < float("inf")
    except OverflowError:           # an int beyond a float's range
        finite = False
    return float(v) if finite and v >= 0 else None


# ------------------------------------------------------------------ review: only numptx's files
def test_clear_removes_only_what_numptx_writes(tmp_path):
    """A cache folder that also holds the user's files (NUMPTX_CACHE_DIR=~/work, say): clear()
    removes numptx's entries and temporary files, at the places numptx writes them, and the
    symlinks standing there; nothing else, whatever its name."""
    root = tmp_path / "work"
    cache = CubinCache(str(root), memory_entries=0)
    cache.put(KEY, b"\x7fELF mine")
    shard = root / f"cubin-v{CUBIN_SCHEMA}" / KEY[:2]
    (shard / f".{KEY[:16]}.abc123.tmp").write_bytes(b"a killed writer's")
    os.symlink(tmp_path / "elsewhere", shard / f"{'cd' * 32}.cubin")
    user = {"x.cubin": b"u", ".a.tmp": b"u", "cubin-v9": b"a file of the user's",
            f"cubin-v{CUBIN_SCHEMA}/README.txt": b"u", f"cubin-v{CUBIN_SCHEMA}/ab/notes.txt": b"u",
            f"cubin-v{CUBIN_SCHEMA}/ab/deep/z.cubin": b"u", "cubin-v2/kernels/k.cubin": b"u",
            "cubin-v2/src/a.cu": b"u", f"cubin-v{CUBIN_SCHEMA}/Ab/{'ab' * 32}.cubin": b"u",
            f"cubin-v{CUBIN_SCHEMA}/ab/{'ab' * 32}.cubin.bak": b"u",
            f"cubin-v{CUBIN_SCHEMA}/ab/{'cd' * 32}x.cubin": b"u"}
    for rel, data in user.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    assert cache.clear() == 1
    left = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    assert left == set(user)


def _swap(folder, outside) -> None:
    """Replace ``folder`` with a symlink to ``outside`` (what another process may do at any
    moment), keeping its contents inside the cache under another name."""
    os.rename(folder, f"{folder}.moved")
    os.symlink(outside, folder)


def _hook_open(monkeypatch, when, action) -> None:
    """Run ``action`` once, just before the first os.open whose path and flags match ``when``."""
    real, done = os.open, []

    def hooked(path, flags, *args, **kw):
        if not done and when(os.fsdecode(path), flags):
            done.append(True)
            action()
        return real(path, flags, *args, **kw)
    monkeypatch.setattr(os, "open", hooked)


@pytest.mark.parametrize("kind", ["cubin", "tune"])
def test_a_folder_swapped_for_a_symlink_mid_write_is_not_followed(tmp_path, outside, kind,
                                                                  monkeypatch):
    """The race: the <ab> folder checked, then replaced by a link out of the cache before the
    temporary file is made. The write lands inside the cache (the folder it checked) or
    nowhere, never out there."""
    cache = (CubinCache(str(tmp_path / "c"), memory_entries=0) if kind == "cubin"
             else TuneCache(tmp_path / "c"))
    os.makedirs(os.path.dirname(cache.path(KEY)))
    before = snapshot(outside)
    _hook_open(monkeypatch, lambda p, fl: p.endswith(".tmp") and fl & os.O_CREAT,
               lambda: _swap(os.path.dirname(cache.path(KEY)), outside))
    if kind == "cubin":
        cache.put(KEY, b"\x7fELF mine")
    else:
        cache.put(KEY, 9.0, {})
    monkeypatch.undo()
    assert snapshot(outside) == before


@pytest.mark.parametrize("kind", ["cubin", "tune"])
def test_a_folder_swapped_for_a_symlink_mid_read_is_not_followed(tmp_path, outside, kind,
                                                                 monkeypatch):
    """The race on reads: the entry's folder checked, then swapped for a link to a folder
    that holds a valid entry for the key: that entry is never read."""
    cache = (CubinCache(str(tmp_path / "c"), memory_entries=0) if kind == "cubin"
             else TuneCache(tmp_path / "c"))
    if kind == "cubin":
        cache.put(KEY, b"\x7fELF mine")
    else:
        cache.put(KEY, 9.0, {})
    name = os.path.basename(cache.path(KEY))
    _hook_open(monkeypatch, lambda p, fl: p.endswith(name),
               lambda: _swap(os.path.dirname(cache.path(KEY)), outside))
    got = cache.get(KEY)
    monkeypatch.undo()
    assert got in ((None, b"\x7fELF mine") if kind == "cubin" else (None, 9.0))


def test_a_folder_swapped_for_a_symlink_mid_clear_is_not_followed(tmp_path, outside,
                                                                  monkeypatch):
    """The race on clear(): a folder listed, then swapped for a link out of the cache before
    its entries are removed: nothing out there is removed."""
    cache = CubinCache(str(tmp_path / "c"), memory_entries=0)
    cache.put(KEY, b"\x7fELF mine")
    before = snapshot(outside)
    shard = os.path.dirname(cache.path(KEY))
    real, done = os.scandir, []

    def hooked(*args):
        with real(*args) as it:
            items = list(it)
        if not done and any(e.name == f"{KEY}.cubin" for e in items):
            done.append(True)
            _swap(shard, outside)
        return contextlib.nullcontext(iter(items))
    monkeypatch.setattr(os, "scandir", hooked)
    cache.clear()
    monkeypatch.undo()
    assert snapshot(outside) == before


def test_sweep_of_a_folder_swapped_for_a_symlink_removes_nothing_out_there(tmp_path, outside,
                                                                         monkeypatch):
    """TuneCache's sweep of stale temporary files: its folder swapped for a link between the
    write and the sweep: no stale-looking file out there is removed."""
    tune = TuneCache(tmp_path / "c")
    before = snapshot(outside)
    real = os.replace

    def hooked(src, dst, *args, **kw):
        real(src, dst, *args, **kw)
        _swap(os.path.dirname(tune.path(KEY)), outside)
    monkeypatch.setattr(os, "replace", hooked)
    tune.put(KEY, 9.0, {})
    monkeypatch.undo()
    assert snapshot(outside) == before


_ESCAPED_QUOTES = r'''
import os, sys
from numptx.jit.tune.tune_cache import TuneCache
key = "ab" * 32
tune = TuneCache(sys.argv[1])
os.makedirs(os.path.dirname(tune.path(key)), exist_ok=True)
for body in (b'"' + b'\\"' * 500_000, b'["' + b'\\"[' * 300_000, b'"\\' * 500_000):
    with open(tune.path(key), "wb") as f:
        f.write(body)
    assert tune.get(key) is None
print("ESCAPED-OK")
'''


def test_a_megabyte_of_escaped_quotes_is_a_prompt_miss(tmp_path):
    """An entry of escaped quotes that never closes its string: each ``"`` once started a
    string scan to the end of the file (quadratic, hours for 1 MB). Linear now: a miss, in a
    process given far more time than a linear scan needs (a guard against a hang, not a
    measurement)."""
    script = tmp_path / "escaped.py"
    script.write_text(_ESCAPED_QUOTES)
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "c")], capture_output=True,
                       text=True, timeout=240)
    assert r.returncode == 0 and "ESCAPED-OK" in r.stdout, r.stderr[-2000:]


def test_a_cache_folder_that_is_a_file_is_said_and_left_alone(tmp_path, caplog, monkeypatch):
    """NUMPTX_CACHE_DIR naming a file (or a device): reads miss, writes are logged saying the
    folder is no folder (not "File exists"), info and clear find nothing, the file is kept."""
    f = tmp_path / "notes.txt"
    f.write_bytes(b"the user's")
    monkeypatch.setenv("NUMPTX_CACHE_DIR", str(f))
    monkeypatch.delenv("NUMPTX_CACHE", raising=False)
    for folder in (str(f), os.devnull):
        cache, tune = CubinCache(folder, memory_entries=0), TuneCache(folder)
        with caplog.at_level(logging.WARNING):
            assert cache.get(KEY) is None and tune.get(KEY) is None
            cache.put(KEY, b"\x7fELF mine")
            tune.put(KEY, 1.0, {})
            tune.put(KEY, 1.0, {"bad key": {(1, 2): 3}})       # a context json cannot take
        assert cache.info().entries == 0 and cache.clear() == 0
        assert caplog.text.count("is not a folder") == 2, caplog.text
        caplog.clear()
    assert main(["cache", "clear"]) == 0
    assert f.read_bytes() == b"the user's"


_TOP_NAMES = [f"cubin-v{CUBIN_SCHEMA}", "cubin-v1", "cubin-v12", "cubin-vx", "mine",
              f"cubin-v{CUBIN_SCHEMA}.bak", f"autotune-v{TUNE_SCHEMA}"]
_SHARD_NAMES = ["ab", "cd", "AB", "a", "abc", "zz", "notes"]
_FILE_NAMES = [f"{KEY}.cubin", f"{'cd' * 32}.cubin", "ab.cubin", ".abababab.x1_Z.tmp",
               ".ab.q.tmp", "x.cubin", "notes.txt", ".a.tmp", f"{KEY}.cubin.bak", ".AB.x.tmp"]


def _numptxs(rel: str) -> str | None:
    """Whether numptx wrote the file at ``rel`` (an oracle apart from the cache's own code):
    "entry", "temp" or None."""
    parts = rel.split("/")
    if len(parts) != 3 or not parts[0].startswith("cubin-v") or not parts[0][7:].isdigit():
        return None
    shard, name = parts[1], parts[2]
    if len(shard) != 2 or any(c not in "0123456789abcdef" for c in shard):
        return None
    stem = name[:-len(".cubin")] if name.endswith(".cubin") else None
    if stem and stem.startswith(shard) and all(c in "0123456789abcdef" for c in stem):
        return "entry"
    bits = name.split(".")
    if (len(bits) == 4 and bits[0] == "" and bits[3] == "tmp" and 1 <= len(bits[1]) <= 16
            and all(c in "0123456789abcdef" for c in bits[1]) and bits[2]):
        return "temp"
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(files=st.lists(st.tuples(st.sampled_from(_TOP_NAMES), st.sampled_from(_SHARD_NAMES + [""]),
                                st.sampled_from(_FILE_NAMES), st.booleans()),
                      min_size=1, max_size=20))
def test_clear_and_info_find_exactly_numptxs_files(files):
    """Random files of the user's and numptx's in one folder: info() counts exactly this
    format's entries, clear() removes exactly numptx's entries and temporary files (every
    format's) and counts the entries."""
    with tempfile.TemporaryDirectory() as tmp:
        from pathlib import Path
        root = Path(tmp)
        made = set()
        for top, shard, name, deeper in files:
            rel = "/".join(p for p in (top, shard, "deep" if deeper and shard else "", name) if p)
            path = root / rel
            if any(q.is_file() for q in list(path.parents)[:-1]) or path.is_dir():
                continue                       # a file stands where a folder goes
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x")
            made.add(rel)
        (root / "toplevel.cubin").write_bytes(b"x")
        made.add("toplevel.cubin")
        ours = {rel: _numptxs(rel) for rel in made}
        cache = CubinCache(tmp)
        this = sum(kind == "entry" and rel.startswith(f"cubin-v{CUBIN_SCHEMA}/")
                   for rel, kind in ours.items())
        assert cache.info().entries == this
        assert cache.clear() == sum(kind == "entry" for kind in ours.values())
        left = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
        assert left == {rel for rel, kind in ours.items() if kind is None}


def test_a_hard_linked_entry_is_replaced_or_unlinked_never_written_through(tmp_path, outside):
    """An entry that is a hard link to a file out there (same inode): a write replaces the
    name, a corrupt read and clear() unlink the name; the file out there keeps its bytes."""
    cache = CubinCache(str(tmp_path / "c"), memory_entries=0)
    tune = TuneCache(tmp_path / "c")
    for path, target in ((cache.path(KEY), outside / "precious.cubin"),
                         (tune.path(KEY), outside / "sub" / "precious.cubin")):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.link(target, path)
    before = snapshot(outside)
    assert cache.get(KEY) is None and tune.get(KEY) is None      # not entries: misses
    cache.put(KEY, b"\x7fELF mine")
    tune.put(KEY, 2.0, {})
    assert cache.get(KEY) == b"\x7fELF mine" and tune.get(KEY) == 2.0
    os.remove(cache.path(KEY))
    os.link(outside / "precious.cubin", cache.path(KEY))
    assert cache.clear() == 1
    assert snapshot(outside) == before


def _stack_depth() -> int:
    f, n = sys._getframe(), 0
    while f is not None:
        f, n = f.f_back, n + 1
    return n


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(prefix=st.integers(0, 60),
       text=st.text(alphabet='[]{}"\\ a:,1', max_size=300))
def test_the_depth_check_never_lets_deep_json_reach_the_parser(prefix, text):
    """Whatever the quotes, escapes and brackets: a text the depth check lets through parses
    within a recursion limit of the check's bound (plus a margin), so no entry can make the
    parser recurse deeply, and a valid text's true depth is never underestimated."""
    from numptx.jit.tune.tune_cache import _MAX_DEPTH, _depth
    body = "[" * prefix + text
    depth = _depth(body)
    if depth > _MAX_DEPTH:
        return
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(_stack_depth() + _MAX_DEPTH + 20)
    try:
        value = json.loads(body)
    except RecursionError:
        raise AssertionError(f"{body!r}: depth {depth} let through, the parser recursed deeper")
    except ValueError:
        return
    finally:
        sys.setrecursionlimit(old)

    def true_depth(v) -> int:
        if isinstance(v, list):
            return 1 + max(map(true_depth, v), default=0)
        if isinstance(v, dict):
            return 1 + max(map(true_depth, v.values()), default=0)
        return 0
    assert true_depth(value) <= depth


@pytest.mark.parametrize("denied", ["open", "mkdir", "scandir"])
def test_permission_errors_are_logged_misses(tmp_path, caplog, monkeypatch, denied):
    """A cache folder or entry the user may not read or write (EACCES, raised as the kernel
    raises it for a read-only or unreadable folder; the tests may run as root, whom chmod does
    not stop): every read is a miss, every write a logged warning, nothing raises."""
    import errno
    cache, tune = CubinCache(str(tmp_path), memory_entries=0), TuneCache(tmp_path)
    cache.put(KEY, b"\x7fELF mine")
    tune.put(KEY, 2.0, {})

    def deny(*args, **kw):
        raise PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(os, denied, deny)
    with caplog.at_level(logging.WARNING):
        assert cache.get(KEY) in (None, b"\x7fELF mine")
        assert tune.get(KEY) in (None, 2.0)
        cache.put("cd" * 32, b"\x7fELF new")
        tune.put("cd" * 32, 3.0, {})
        cache.info()
        cache.clear()
    monkeypatch.undo()
    if denied != "scandir":
        assert "Permission denied" in caplog.text
