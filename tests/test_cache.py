"""The cubin cache: keys, memory and disk, atomic writes, corruption, the CLI (real nvJitLink)."""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import threading

import pytest

import numptx as nx
from numptx.cli import main
from numptx.jit.compile.cache import CubinCache, default_cache, template_digest, variant_key

from conftest import SPINE_SRC

ADD = "add.f32 %v_z, %v_x, %v_y;"
MUL = "mul.f32 %v_z, %v_x, %v_y;"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMPTX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NUMPTX_CACHE", raising=False)


@pytest.fixture(scope="module")
def spine_ptx():
    return nx.cuda_to_ptx(SPINE_SRC, arch="sm_90")


def test_key_covers_template_stubs_arch_and_options():
    t = template_digest("ptx", "nvrtc (13, 0)")
    base = variant_key(t, [ADD], "sm_90")
    assert base == variant_key(t, [ADD], "sm_90")
    assert len(base) == 64
    others = {variant_key(t, [MUL], "sm_90"), variant_key(t, [ADD], "sm_80"),
              variant_key(t, [ADD], "sm_90", ["-O3"]), variant_key(t, [ADD, ""], "sm_90"),
              variant_key(template_digest("ptx2", "nvrtc (13, 0)"), [ADD], "sm_90"),
              variant_key(template_digest("ptx", "nvrtc (12, 0)"), [ADD], "sm_90")}
    assert base not in others and len(others) == 6
    # stubs are length-prefixed: moving text between sites changes the key
    assert variant_key(t, ["ab", "c"], "sm_90") != variant_key(t, ["a", "bc"], "sm_90")
    # equivalent option spellings collide
    assert variant_key(t, [ADD], "sm_90", ["-maxrregcount 64"]) == \
        variant_key(t, [ADD], "sm_90", ["-maxrregcount=64"])


def test_memory_and_disk_round_trip(tmp_path):
    cache = CubinCache(str(tmp_path / "c"))
    key = "ab" * 32
    assert cache.get(key) is None
    cache.put(key, b"\x7fELFpayload")
    assert cache.get(key) == b"\x7fELFpayload"
    path = cache.path(key)
    raw = open(path, "rb").read()
    assert raw.startswith(b"\x7fELFpayload")                  # raw cubin first (cuobjdump reads it)
    assert raw[len(b"\x7fELFpayload"):][:8] == b"NXCUBIN3"
    fresh = CubinCache(str(tmp_path / "c"))                   # another process, same folder
    assert fresh.get(key) == b"\x7fELFpayload"
    assert fresh.info().entries == 1 and fresh.info().hits == 1
    assert not [n for n in os.listdir(os.path.dirname(path)) if n.endswith(".tmp")]
    assert fresh.clear() == 1 and fresh.get(key) is None


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty"])
def test_corrupt_entry_is_a_miss_and_is_rebuilt(tmp_path, spine_ptx, caplog, damage):
    cache = CubinCache(str(tmp_path / "c"))
    tmpl = nx.Template(spine_ptx, cache=cache)
    v = tmpl.inject(combine=ADD)
    good = v.cubin
    path = cache.path(v.key)
    raw = bytearray(open(path, "rb").read())
    if damage == "flip":
        raw[100] ^= 0xFF
    elif damage == "truncate":
        raw = raw[:-5]
    else:
        raw = bytearray()
    with open(path, "wb") as f:
        f.write(raw)
    fresh = CubinCache(str(tmp_path / "c"))
    with caplog.at_level(logging.DEBUG, logger="numptx.jit.compile.cache"):
        assert fresh.get(v.key) is None
    assert "corrupt" in caplog.text and v.key[:16] in caplog.text
    assert not os.path.exists(path)
    again = nx.Template(spine_ptx, cache=fresh).inject(combine=ADD)
    assert again.cubin == good and os.path.exists(path)


def test_variants_hit_the_cache(tmp_path, spine_ptx, caplog):
    cache = CubinCache(str(tmp_path / "c"))
    tmpl = nx.Template(spine_ptx, cache=cache)
    with caplog.at_level(logging.DEBUG, logger="numptx.jit.compile.cache"):
        first = tmpl.inject(combine=ADD).cubin
    assert "cubin cache miss" in caplog.text and "no file" in caplog.text
    assert cache.misses == 1
    v = tmpl.inject(combine=ADD)
    assert v.cubin == first and v._ptx is None               # neither rendered nor linked
    assert cache.hits == 1
    disk_only = CubinCache(str(tmp_path / "c"), memory_entries=0)
    v2 = nx.Template(spine_ptx, cache=disk_only).inject(combine=ADD)
    assert v2.cubin == first and v2._ptx is None and disk_only.hits == 1
    assert tmpl.inject(combine=MUL).cubin != first


def test_concurrent_writers_leave_one_whole_entry(tmp_path):
    cache = CubinCache(str(tmp_path / "c"))
    key = "cd" * 32
    payloads = [b"\x7fELF" + bytes([i]) * 50000 for i in range(8)]
    threads = [threading.Thread(target=cache.put, args=(key, p)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = CubinCache(str(tmp_path / "c")).get(key)
    assert got in payloads
    folder = os.path.dirname(cache.path(key))
    assert os.listdir(folder) == [key + ".cubin"]


def test_default_cache_follows_the_environment(tmp_path, monkeypatch):
    assert default_cache().directory == str(tmp_path / "cache")
    monkeypatch.setenv("NUMPTX_CACHE_DIR", str(tmp_path / "other"))
    assert default_cache().directory == str(tmp_path / "other")
    monkeypatch.setenv("NUMPTX_CACHE", "0")
    c = default_cache()
    assert c.directory is None
    c.put("ef" * 32, b"x")
    assert c.get("ef" * 32) == b"x"                            # memory still works
    assert not (tmp_path / "other").exists()


def test_cli_cache_info_and_clear(tmp_path, spine_ptx, capsys):
    v = nx.Template(spine_ptx).inject(combine=ADD)
    v.cubin
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path / "cache") in out and "entries:   1" in out
    assert main(["cache", "clear"]) == 0
    assert "removed 1 entry" in capsys.readouterr().out
    assert main(["cache", "info"]) == 0
    assert "entries:   0" in capsys.readouterr().out


def test_entry_checksum_is_blake2b_of_the_key_and_the_cubin(tmp_path, spine_ptx):
    cache = CubinCache(str(tmp_path / "c"))
    v = nx.Template(spine_ptx, cache=cache).inject(combine=ADD)
    cubin = v.cubin
    raw = open(cache.path(v.key), "rb").read()
    body, magic, digest = raw[:-40], raw[-40:-32], raw[-32:]
    assert body == cubin and magic == b"NXCUBIN3"
    assert digest == hashlib.blake2b(v.key.encode() + body, digest_size=32).digest()


def test_an_entry_under_another_keys_name_or_not_elf_is_a_miss(tmp_path, caplog):
    cache = CubinCache(str(tmp_path / "c"))
    a, b, c = "aa" * 32, "bb" * 32, "cc" * 32
    cache.put(a, b"\x7fELFcubin of a")
    os.makedirs(os.path.dirname(cache.path(b)), exist_ok=True)
    shutil.copy(cache.path(a), cache.path(b))                 # a valid entry, the wrong name
    cache.put(c, b"not an ELF file")
    fresh = CubinCache(str(tmp_path / "c"))
    with caplog.at_level(logging.DEBUG, logger="numptx.jit.compile.cache"):
        assert fresh.get(a) == b"\x7fELFcubin of a"
        assert fresh.get(b) is None and fresh.get(c) is None
    assert "corrupt" in caplog.text
    assert not os.path.exists(cache.path(b)) and not os.path.exists(cache.path(c))


def test_clear_removes_entries_of_older_cache_formats(tmp_path):
    cache = CubinCache(str(tmp_path / "c"))
    old = tmp_path / "c" / "cubin-v1" / "ab"
    old.mkdir(parents=True)
    (old / ("ab" * 32 + ".cubin")).write_bytes(b"\x7fELFold" + b"\0" * 40)
    cache.put("cd" * 32, b"\x7fELFnew")
    assert cache.info().entries == 1                          # info counts this format's entries
    assert cache.clear() == 2 and not list(old.iterdir())


_WRITER = r'''
import sys, time
from numptx.jit.compile.cache import CubinCache
folder, key, k, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
while time.time() < start:            # all writers go at once
    pass
cache = CubinCache(folder)
for _ in range(20):
    cache.put(key, b"\x7fELF" + bytes([k]) * 200000)
    got = CubinCache(folder).get(key)  # a fresh reader: disk only
    assert got is not None and len(got) == 200004 and len(set(got[4:])) == 1, "torn entry"
print("ok")
'''


def test_processes_writing_one_key_at_once(tmp_path):
    """Several processes put and read the same key concurrently: every read sees one whole
    entry (never a torn or mixed one), and no temporary file is left behind."""
    import subprocess
    import sys
    import time
    folder, key = str(tmp_path / "c"), "ef" * 32
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    start = time.time() + 2.0
    procs = [subprocess.Popen([sys.executable, str(script), folder, key, str(k), str(start)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 and o.strip() == "ok" for p, (o, _) in zip(procs, outs)), outs
    got = CubinCache(folder).get(key)
    assert got in [b"\x7fELF" + bytes([k]) * 200000 for k in range(4)]
    assert os.listdir(os.path.dirname(CubinCache(folder).path(key))) == [key + ".cubin"]
