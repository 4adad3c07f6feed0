"""Memory safety and hostile inputs (issue 14): a compile racing ``add_instruction``, disk
cache entries that are no regular files, site names that differ only in invalid UTF-8, and
PTX text the parser must refuse by name."""
from __future__ import annotations

import gc
import threading
import time
import weakref

import numpy as np
import pytest

import numptx as nx
from numptx import ast_ptx as ap
from numptx import stack_ptx as sp
from numptx._program import ctable
from numptx.instructions import Instr, Table, TABLE

F = {"x": "f32", "y": "f32"}
Z = {"z": "f32"}


def _user_instr(k: int) -> Instr:
    name = f"mad24.lo.u32.t{k}"
    return Instr(name, f"{name} $0, $1, $2, $3;", ("u32", "u32", "u32"), ("u32",),
                 lambda a, b, c: (a & 0xFFFFFF) * (b & 0xFFFFFF) + c, doc="user row")


@pytest.fixture
def own_table(monkeypatch):
    """The C core's view of a private copy of the table (added rows stay out of TABLE)."""
    copy = Table(TABLE)
    monkeypatch.setattr(ctable, "TABLE", copy)
    monkeypatch.setattr(ctable, "_ctable", None)
    return copy


def _programs(n: int) -> list[list]:
    ins = ["add.rn.f32", "mul.rn.f32", "sub.rn.f32", "max.f32", "min.f32"]
    rng = np.random.default_rng(7)
    progs = []
    for _ in range(n):
        p = [sp.input("x"), sp.input("y")]
        for _ in range(int(rng.integers(1, 12))):
            p += [sp.input("xy"[int(rng.integers(2))]) if rng.random() < 0.4 else
                  sp.const(float(rng.integers(-9, 9)), "f32"), sp.instr(ins[int(rng.integers(5))])]
        progs.append(p)
    return progs


def test_a_held_c_table_keeps_its_rows_after_add_instruction(own_table):
    t = ctable._table()
    w = weakref.ref(ctable._ctable._keep[0])     # the C rows
    own_table.add(_user_instr(0))
    ctable._table()                       # rebuilt: the old rows are no longer the current ones
    gc.collect()
    assert w() is not None, "the rows of a table still in use were freed"
    assert [ffi_fmt(t, i) for i in range(3)] == [TABLE[i].fmt for i in range(3)]
    del t
    gc.collect()
    assert w() is None                    # and nothing leaks once the compile is done


def ffi_fmt(t, i: int) -> str:
    from numptx._native import ffi
    return ffi.unpack(t.rows[i].fmt, t.rows[i].fmt_len).decode()


def test_compiles_racing_add_instruction_match_a_serial_compile(own_table):
    progs = _programs(60)
    aprog = [ap.input("x"), ap.input("y"), ap.instr("mul.rn.f32"), ap.const(1.0, "f32"),
             ap.instr("add.rn.f32")]
    want_many = sp.compile_many(progs, F, Z)
    want_one = [sp.compile(p, F, Z) for p in progs[:8]]
    want_ast = ap.compile(aprog, F, Z)

    @nx.ptx_expr
    def dist(x: nx.f32, y: nx.f32) -> nx.f32:
        return nx.sqrt(x * x + y * y) + nx.exp(-x)
    want_expr = str(dist.stub())
    stop, errors = threading.Event(), []

    def compiler():
        try:
            while not stop.is_set():
                assert sp.compile_many(progs, F, Z) == want_many
                assert [sp.compile(p, F, Z) for p in progs[:8]] == want_one
                assert ap.compile(aprog, F, Z) == want_ast
                assert str(dist.stub()) == want_expr
        except BaseException as e:          # noqa: BLE001 - reported below
            errors.append(e)
            stop.set()

    def adder():
        k = 0
        while not stop.is_set() and k < 400:
            k += 1
            own_table.add(_user_instr(k))
            ctable._table()
            junk = [bytearray(b"\xff" * 64) for _ in range(200)]   # reuse freed memory
            del junk

    threads = [threading.Thread(target=compiler) for _ in range(2)] + [threading.Thread(target=adder)]
    for th in threads:
        th.start()
    time.sleep(3.0)
    stop.set()
    for th in threads:
        th.join()
    assert not errors, repr(errors[0])


# -- the disk cache reads regular files only, bounded, without blocking --------------------------
def _get_within(cache, key: str, seconds: float = 20.0):
    """``cache.get(key)`` on a thread, failing (not hanging) if it blocks."""
    out: list = []
    th = threading.Thread(target=lambda: out.append(cache.get(key)), daemon=True)
    th.start()
    th.join(seconds)
    assert not th.is_alive(), "the cache read blocked"
    return out[0]


@pytest.mark.parametrize("kind", ["dev_zero", "fifo", "directory", "too_big"])
def test_a_cache_entry_that_is_no_regular_file_is_a_miss(tmp_path, caplog, monkeypatch, kind):
    import logging
    import os
    from numptx.jit.compile import cache as C
    cache = C.CubinCache(str(tmp_path / "c"))
    key = "ab" * 32
    path = cache.path(key)
    os.makedirs(os.path.dirname(path))
    if kind == "dev_zero":
        os.symlink("/dev/zero", path)          # reading it to the end never ends
    elif kind == "fifo":
        os.mkfifo(path)                        # opening it to read blocks without a writer
    elif kind == "directory":
        os.mkdir(path)
    else:
        monkeypatch.setattr(C, "_MAX_ENTRY", 1 << 16)
        with open(path, "wb") as f:
            f.truncate(1 << 17)
    with caplog.at_level(logging.WARNING, logger="numptx.jit.compile.cache"):
        assert _get_within(cache, key) is None
    assert key[:16] in caplog.text and path in caplog.text
    assert cache.misses == 1
    if kind != "directory":
        cache.put(key, b"\x7fELFcubin")        # replaced by a real entry
        assert C.CubinCache(str(tmp_path / "c")).get(key) == b"\x7fELFcubin"


def test_a_variant_over_a_fifo_entry_rebuilds(tmp_path, spine_ptx):
    import os
    from numptx.jit.compile.cache import CubinCache
    cache = CubinCache(str(tmp_path / "c"))
    good = nx.Template(spine_ptx, cache=cache).inject(combine="add.f32 %v_z, %v_x, %v_y;")
    cubin = good.cubin
    os.remove(cache.path(good.key))
    os.mkfifo(cache.path(good.key))
    fresh = CubinCache(str(tmp_path / "c"))
    v = nx.Template(spine_ptx, cache=fresh).inject(combine="add.f32 %v_z, %v_x, %v_y;")
    out: list = []
    th = threading.Thread(target=lambda: out.append(v.cubin), daemon=True)
    th.start()
    th.join(60)
    assert not th.is_alive(), "Variant.cubin blocked on a FIFO in the cache"
    assert out == [cubin]


# -- site names and PTX text the parser refuses by name ------------------------------------------
def _site(name: bytes, var: bytes = b"x") -> bytes:
    return (b"\t{\n\t.reg .f32 %v_" + var + b";\n\t.reg .f32 %v_z;\n"
            b"\t// PTX_INJECT_BEGIN " + name + b"\n"
            b"\t// PTX_INJECT_VAR in f32 f32 v_" + var + b" " + var + b"\n"
            b"\t// PTX_INJECT_VAR out f32 f32 v_z z\n"
            b"\t// PTX_INJECT_END\n\t}\n")


def _ptx(*sites: bytes) -> bytes:
    return b".version 8.0\n.target sm_80\n.address_size 64\n" + b"".join(sites)


def test_the_site_fixture_parses():
    inj = nx.PtxInject(_ptx(_site(b"a"), _site(b"b")))
    assert list(inj.sites) == ["a", "b"]
    crlf = nx.PtxInject(_ptx(_site(b"a")).replace(b"\n", b"\r\n"))
    assert list(crlf.sites) == ["a"]                       # CRLF is fine


def test_site_names_differing_only_in_invalid_utf8_never_merge():
    data = _ptx(_site(b"a\xff"), _site(b"a\xfe"))
    with pytest.raises(nx.PtxParseError, match=r"UTF-8") as ei:
        nx.PtxInject(data)
    assert ei.value.site is not None and ei.value.line == 7
    assert "a\\xff" in str(ei.value)
    with pytest.raises(nx.PtxParseError, match=r"UTF-8"):
        nx.PtxInject(_ptx(_site(b"a", var=b"x\xff")))       # a variable name, the same rule
    ok = nx.PtxInject(_ptx(_site("aé".encode()), _site("añ".encode())))   # valid UTF-8 is fine
    assert list(ok.sites) == ["aé", "añ"]


def test_a_lone_surrogate_in_ptx_text_is_a_parse_error():
    text = _ptx(_site(b"a")).decode() + "// bad \ud800 here\n"
    with pytest.raises(nx.PtxParseError, match=r"surrogate") as ei:
        nx.PtxInject(text)
    assert ei.value.line == 12 and not isinstance(ei.value, UnicodeError)
    # surrogate escapes (bytes decoded with errors="surrogateescape") go back byte for byte
    esc = _ptx(_site(b"a")).decode() + "// \udcff\n"
    assert list(nx.PtxInject(esc).sites) == ["a"]


def test_cr_only_line_endings_are_a_parse_error():
    data = _ptx(_site(b"a")).replace(b"\n", b"\r")
    with pytest.raises(nx.PtxParseError, match=r"carriage return") as ei:
        nx.PtxInject(data)
    assert ei.value.line == 1
    with pytest.raises(nx.PtxParseError, match=r"carriage return"):
        nx.PtxInject(data.decode())
    # one CR-only line in front of a marker hides it the same way
    mixed = _ptx(_site(b"a"), _site(b"b")).replace(b"// PTX_INJECT_BEGIN b\n", b"// PTX_INJECT_BEGIN b\r")
    with pytest.raises(nx.PtxParseError, match=r"carriage return") as ei:
        nx.PtxInject(mixed)
    assert ei.value.line == 15                             # the line the CR ends
    # a stray CR that hides no marker changes nothing
    assert list(nx.PtxInject(_ptx(b"// odd\rcomment\n", _site(b"a"))).sites) == ["a"]
