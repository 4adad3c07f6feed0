"""Issue 11: the value types, op kinds and meta ops have one source (numptx/valuetypes.py,
numptx/opkinds.py). The C core's copies are generated into native/stack_ptx_tables.h; these
tests check that the committed header is what the generator writes now, that the compiled
library agrees with the Python tables, and that the Python users read the same rows."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import numptx as nx
from numptx import dtypes, opkinds
from numptx import stack_ptx as sp
from numptx import valuetypes as VT
from numptx._native import lib
from numptx.dsl import types as T
from numptx.errors import TypeRegistryError
from numptx.jit.numba import numba_intrinsic, numba_site

ROOT = Path(__file__).resolve().parent.parent
GEN = ROOT / "native" / "gen_tables.py"


def _gen():
    spec = importlib.util.spec_from_file_location("_test_gen_tables", GEN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_header_is_what_the_generator_writes():
    gen = _gen()
    committed = gen.HEADER.read_text()
    want = gen.header_text()
    if committed != want:
        import difflib
        diff = "".join(difflib.unified_diff(committed.splitlines(True), want.splitlines(True),
                                            "committed", "generated"))
        pytest.fail(f"native/stack_ptx_tables.h is stale: run python native/gen_tables.py\n{diff}")


def test_generator_runs_without_the_package():
    # `python native/gen_tables.py --check` must work before numptx._native is built
    code = ("import runpy, sys; sys.argv = ['gen_tables.py', '--check']\n"
            "try:\n    runpy.run_path(%r, run_name='__main__')\n"
            "except SystemExit as e:\n    rc = e.code\n"
            "assert 'numptx' not in sys.modules, 'the generator imported numptx'\n"
            "sys.exit(rc)\n") % str(GEN)
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_compiled_ids_are_the_python_positions():
    assert lib.STACKPTX_N_TYPES == len(VT.ROWS)
    for row in VT.ROWS:
        assert getattr(lib, f"STACKPTX_T_{row.name.upper()}") == row.id
    assert lib.STACKPTX_N_KINDS == len(opkinds.KIND_NAMES)
    for i, name in enumerate(opkinds.KIND_NAMES):
        assert getattr(lib, f"STACKPTX_K_{name.upper()}") == i
        assert getattr(opkinds, name.upper()) == i          # the Python constants too
    assert lib.STACKPTX_N_META_OPS == len(opkinds.META_OPS)
    for i, name in enumerate(opkinds.META_OPS):
        assert getattr(lib, f"STACKPTX_M_{name.upper()}") == i


def _literal(row, payload: int) -> str:
    """The PTX literal of a CONST word's payload as the type's value (independent oracle)."""
    bits = 64 if row.wide else row.bits
    v = payload & ((1 << bits) - 1) if row.bits > 1 else int(payload != 0)
    if row.name == "s64" and payload >> 31 & 1:          # the one sign-extended CONST payload
        v |= 0xFFFFFFFF00000000
    if row.kind == "pred":
        return str(v)
    if row.kind in ("signed", "unsigned"):
        return str(np.array(v, dtype=np.uint64).astype(f"u{bits // 8}").view(
            f"{'i' if row.kind == 'signed' else 'u'}{bits // 8}").item())
    if row.kind == "float" and row.native and bits in (32, 64):
        return ("0f" if bits == 32 else "0d") + f"{v:0{bits // 4}X}"
    return f"0x{v:0{bits // 4}X}"


@pytest.mark.parametrize("row", VT.ROWS, ids=VT.NAMES)
@pytest.mark.parametrize("payload", [0, 1, 0x7FFF, 0x8000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                                     0x12345678])
def test_compiled_core_declares_moves_and_writes_each_type(row, payload):
    # the generated arrays at work: declaration, mov, constant width and literal form
    words = np.array([opkinds.CONST | row.id << 8 | payload << 32], dtype=np.uint64)
    stub = str(sp.compile(words, outputs={"y": row.name}))
    assert stub == (f"{{\n.reg .{row.reg} %_s0;\nmov.{row.reg} %_s0, {_literal(row, payload)};\n"
                    f"mov.{row.reg} %y, %_s0;\n}}\n")


def _output_literals(stub: str) -> dict[str, str]:
    """output name -> the constant literal it gets, for a stub of constants only"""
    lits = dict(re.findall(r"mov\.\w+ %(_s\d+), ([^;%]+);", stub))
    return {o: lits[t] for o, t in re.findall(r"mov\.\w+ %(\w+), %(_s\d+);", stub)
            if not o.startswith("_s")}


def test_meta_ops_run_as_their_python_names_say():
    one, two = sp.const(1.0, "f32"), sp.const(2.0, "f32")
    out = {"a": "f32", "b": "f32"}
    plain = _output_literals(sp.compile([one, two], outputs=out))
    assert sorted(plain.values()) == ["0f3F800000", "0f40000000"]
    swapped = _output_literals(sp.compile([one, two, sp.swap("f32")], outputs=out))
    assert swapped == {"a": plain["b"], "b": plain["a"]}
    dropped = _output_literals(sp.compile([one, two, sp.drop("f32"), sp.dup("f32")], outputs=out))
    assert dropped == {"a": "0f3F800000", "b": "0f3F800000"}
    for i, name in enumerate(opkinds.META_OPS):
        assert getattr(sp, name)("f32").word == opkinds.META | VT.BY_NAME["f32"].id << 8 | i << 16


def test_dsl_types_are_the_dsl_rows():
    assert T.TYPE_NAMES == tuple(r.name for r in VT.ROWS if r.dsl and r.kind != "pred") + ("pred",)
    for name in T.TYPE_NAMES:
        t, row = T.DTYPES[name], VT.BY_NAME[name]
        assert getattr(T, name) is t and getattr(nx, name) is t      # nx.f32 is the same object
        assert (t.np, t.bits, t.kind) == (row.np, row.bits, row.kind[0])
        assert T.as_dtype(name) is t and T.as_dtype(name.upper()) is t
    assert T.as_dtype(np.float32) is T.f32 and T.as_dtype(np.uint16) is None   # bf16 is bits
    assert T.as_dtype("b32") is None                       # a value type, but no DSL type


def test_every_spelling_names_the_same_type_for_the_dsl_and_for_sites():
    for row in VT.ROWS:
        for alias in row.aliases:
            if row.dsl:
                assert T.as_dtype(alias).name == row.name, alias
            if row.site is not None:
                assert numba_site.dtype_name(alias) == row.name, alias
                assert dtypes.get_dtype(numba_site.dtype_name(alias)).reg == row.reg


def test_site_types_are_the_rows_with_site_data():
    assert [d.name for d in dtypes.BUILTIN_DTYPES] == [r.name for r in VT.ROWS if r.site]
    for row in VT.ROWS:
        if row.site is None:
            with pytest.raises(TypeRegistryError):
                dtypes.get_dtype(row.name)
            continue
        d = dtypes.get_dtype(row.name)
        assert isinstance(d, dtypes.SiteType) and d.builtin
        assert (d.reg, d.mov, d.constraint, d.ctype, d.mode) == (
            row.reg, row.site.mov, row.site.constraint, row.site.ctype, row.site.mode)
        assert d.size * 8 == row.bits                     # the carrier is the register's size


def test_wide_types_take_two_words():
    for row in VT.ROWS:
        value = True if row.kind == "pred" else (1.0, 2.0) if row.name.endswith("x2") else 1
        op = sp.const(value, row.name)
        assert (op.extra is not None) == row.wide == (row.name in VT.WIDE), row.name
        assert len(sp.encode([op])) == (2 if row.wide else 1)


def test_a_malformed_row_is_refused_at_import(monkeypatch):
    src = (ROOT / "numptx" / "valuetypes.py").read_text()
    bad = re.sub(r'(\("b16",\s+"b16",\s+np\.uint16,\s+)16,', r"\g<1>32,", src)
    assert bad != src                                   # b16 claims 32 bits in a uint16
    mod = types.ModuleType("valuetypes_bad")
    monkeypatch.setitem(sys.modules, mod.__name__, mod)  # dataclasses look their module up
    with pytest.raises(ValueError, match="malformed row"):
        exec(compile(bad, "valuetypes_bad.py", "exec"), mod.__dict__)


def test_numba_types_of_site_values_round_trip_to_the_same_type():
    pytest.importorskip("numba.cuda")
    for d in dtypes.BUILTIN_DTYPES:
        ty = numba_intrinsic.numba_type_of(d)
        if VT.BY_NAME[d.name].numba is not None:       # typed as itself: its name leads back
            assert numba_intrinsic.dtype_of_numba(ty) == d.name
        else:                                          # the carrier of its constraint
            assert ty.bitwidth == d.size * 8
