"""The cubin cache's size cap (NUMPTX_CACHE_MAX, max_bytes=): least recently used entries are
removed after writes take the disk past the cap, and processes sharing the folder may write,
read and evict at once (an entry another one removed is a miss, never an error). Real cubins:
NVRTC and nvJitLink run here."""
from __future__ import annotations

import multiprocessing
import os
import random
import time

import pytest

import numptx as nx
from conftest import SPINE_SRC
from numptx.jit.compile.cache import CubinCache

F32 = "0f{:08X}"
CONSTANTS = (1.5, 2.5, 3.5, 4.5, 5.5, 6.5)


def _stub(c: float) -> str:
    import struct
    return f"mul.rn.f32 %v_z, %v_x, {F32.format(struct.unpack('<I', struct.pack('<f', c))[0])};"


@pytest.fixture(scope="module")
def cubins() -> list[tuple[str, bytes]]:
    """Six real (key, cubin) pairs: the spine template with six constants, assembled."""
    tmpl = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=False, patch_constants=False)
    out = []
    for c in CONSTANTS:
        v = tmpl.inject(combine=_stub(c))
        out.append((v.key, v.cubin))
    return out


def _entry_size(cache: CubinCache, key: str) -> int:
    return os.path.getsize(cache.path(key))


def _age(cache: CubinCache, key: str, seconds_ago: float) -> None:
    t = time.time() - seconds_ago
    os.utime(cache.path(key), (t, t))


def test_the_least_recently_used_entries_go_first(tmp_path, cubins):
    """Four entries, the oldest read since (a disk hit refreshes it): a write past the cap
    removes the two least recently used, and the disk ends within the cap."""
    cache = CubinCache(str(tmp_path), memory_entries=0, max_bytes=None)
    for i, (key, cubin) in enumerate(cubins[:4]):
        cache.put(key, cubin)
        _age(cache, key, 100 - 10 * i)          # 0 oldest ... 3 newest
    size = _entry_size(cache, cubins[0][0])
    assert CubinCache(str(tmp_path), memory_entries=0).get(cubins[0][0]) == cubins[0][1]
    cache.max_bytes = 4 * size                    # room for four: the fifth write evicts
    cache.put(*cubins[4])
    cache.settle()
    present = [os.path.exists(cache.path(k)) for k, _ in cubins[:5]]
    assert present == [True, False, False, True, True]
    assert cache.info().bytes <= 4 * size


def test_writes_keep_the_disk_within_numptx_cache_max(tmp_path, monkeypatch, cubins):
    """A template writing variants through the default cap ("env": NUMPTX_CACHE_MAX, read at
    each write): the disk stays within it, evicted variants are misses and build again to the
    same bytes."""
    monkeypatch.setenv("NUMPTX_CACHE_MAX", "12K")
    cache = CubinCache(str(tmp_path))
    tmpl = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=cache, patch_constants=False)
    for c in CONSTANTS:
        tmpl.inject(combine=_stub(c)).cubin
        cache.settle()
        assert cache.info().bytes <= 12 << 10
    on_disk = [os.path.exists(cache.path(k)) for k, _ in cubins]
    assert on_disk[-1] and not all(on_disk)       # the newest kept, some evicted
    fresh = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=CubinCache(str(tmp_path)),
                            patch_constants=False)
    vs = [fresh.inject(combine=_stub(c)) for c in CONSTANTS]
    assert [v.key for v in vs] == [k for k, _ in cubins]
    assert [v.lookup() for v in vs] == [c if here else None for (_, c), here in zip(cubins, on_disk)]
    assert [v.cubin for v in vs] == [c for _, c in cubins]   # an evicted one builds again


def test_no_cap_keeps_everything(tmp_path, monkeypatch, cubins):
    monkeypatch.setenv("NUMPTX_CACHE_MAX", "none")
    cache = CubinCache(str(tmp_path))
    for key, cubin in cubins:
        cache.put(key, cubin)
    cache.settle()
    assert cache.cap() is None and cache.info().entries == len(cubins)
    assert cache.evict(0) == 0 and cache.info().entries == len(cubins)   # 0: no cap


def test_evict_leaves_what_is_not_numptxs_and_removes_stale_temporaries(tmp_path, cubins):
    cache = CubinCache(str(tmp_path), max_bytes=None)
    key, cubin = cubins[0]
    cache.put(key, cubin)
    shard = os.path.dirname(cache.path(key))
    mine = os.path.join(shard, "notes.txt")
    open(mine, "w").write("the user's")
    stale, fresh = os.path.join(shard, ".abcd.x1.tmp"), os.path.join(shard, ".abcd.x2.tmp")
    for p in (stale, fresh):
        open(p, "wb").write(b"half")
    old = time.time() - 7200
    os.utime(stale, (old, old))
    assert cache.evict(1) == 1                    # a cap below one entry: it goes
    assert sorted(os.listdir(shard)) == [".abcd.x2.tmp", "notes.txt"]


def test_an_entry_removed_by_another_process_is_a_miss(tmp_path, cubins, monkeypatch):
    """Another process evicts the entry between the folder's look-up and the file's open (and
    between the census and the removal): misses and no-ops, never errors."""
    key, cubin = cubins[0]
    cache = CubinCache(str(tmp_path), memory_entries=0, max_bytes=None)
    cache.put(key, cubin)
    real = os.open

    def racing(path, flags, *a, **kw):
        if os.fsdecode(path).endswith(f"{key}.cubin") and os.path.exists(cache.path(key)):
            os.unlink(cache.path(key))
        return real(path, flags, *a, **kw)
    monkeypatch.setattr(os, "open", racing)
    assert cache.get(key) is None
    monkeypatch.undo()
    cache.put(key, cubin)
    real_lstat = os.stat
    calls = []

    def vanishing(path, *a, **kw):               # the census counts it, then it is gone
        st = real_lstat(path, *a, **kw)
        if os.fsdecode(path).endswith(f"{key}.cubin"):
            calls.append(path)
            if len(calls) == 2 and os.path.exists(cache.path(key)):
                os.unlink(cache.path(key))
        return st
    monkeypatch.setattr(os, "stat", vanishing)
    assert cache.evict(1) == 0                    # nothing left to remove, no error
    monkeypatch.undo()
    assert not os.path.exists(cache.path(key))


def test_the_size_estimate_reads_a_sample_and_is_exact_when_small(tmp_path, monkeypatch):
    """The background thread's first look is an estimate from shards taken at random: exact
    when it sees every entry, close for a big cache while reading a fraction of it."""
    rng = random.Random(7)
    cache = CubinCache(str(tmp_path), max_bytes=None)
    sizes = {}
    for i in range(3000):
        key = f"{rng.getrandbits(256):064x}"
        path = cache.path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        n = rng.randrange(500, 1500)
        with open(path, "wb") as f:
            f.write(bytes(n))
        sizes[key] = n
    total = sum(sizes.values())
    assert cache.estimate_bytes(enough=10**6) == total              # every shard read: exact
    random.seed(3)
    est = [cache.estimate_bytes(enough=200) for _ in range(5)]
    assert all(abs(e - total) < 0.25 * total for e in est), (est, total)
    assert cache.evict(None) == 0 and cache.info().bytes == total
    # a write far below the cap: the background look reads a sample, not all 3000 entries
    writer = CubinCache(str(tmp_path), max_bytes="1G")
    real, calls = os.stat, []

    def counting(*a, **kw):
        calls.append(a[0])
        return real(*a, **kw)
    monkeypatch.setattr(os, "stat", counting)
    writer.put("ab" * 32, b"\x7fELF" + bytes(100))
    writer.settle()
    monkeypatch.undo()
    assert 0 < len(calls) < 1000


def _worker(folder: str, pairs: list[tuple[str, bytes]], cap: int, seed: int, q) -> None:
    """Write, read and evict in the shared folder; report what went wrong (nothing)."""
    try:
        rng = random.Random(seed)
        cache = CubinCache(folder, memory_entries=0, max_bytes=cap)
        cubin_of = dict(pairs)
        bad = []
        for i in range(60):
            key, cubin = pairs[rng.randrange(len(pairs))]
            if rng.random() < 0.6:
                cache.put(key, cubin)
            else:
                got = cache.get(key)
                if got is not None and got != cubin_of[key]:
                    bad.append(f"{key[:8]}: wrong bytes")
            if i % 7 == 0:
                cache.evict()
        cache.settle()
        q.put(bad)
    except BaseException as e:   # noqa: BLE001 - the parent asserts on it
        q.put([f"{type(e).__name__}: {e}"])


def test_two_processes_write_read_and_evict_at_once(tmp_path, cubins):
    """Two processes share a folder with a cap of about three entries: every read is a whole,
    right cubin or a miss, nothing raises, and an eviction afterwards leaves it within the
    cap."""
    keys = [(f"{i:02x}" + k[2:], c) for i in range(4) for k, c in cubins]   # 24 keys, 8 shards
    size = len(cubins[0][1]) + 40
    cap = 3 * size
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(tmp_path), keys, cap, s, q)) for s in (1, 2)]
    for p in procs:
        p.start()
    results = [q.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(60)
    assert results == [[], []]
    cache = CubinCache(str(tmp_path), max_bytes=cap)
    cache.evict()
    assert cache.info().bytes <= cap
