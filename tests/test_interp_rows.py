"""The batch interpreter's per-row C semantics against the instruction table's NumPy semantics.

Each table row with a ``c`` expression (numptx/instructions.py) is one interpreter op, generated
into native/interp_rows.h by native/gen_interp.py (helpers: native/interp_ops.h). Here every op
the C side exports runs through ``lib.nxi_apply`` on seeded random operands (random bit patterns,
log-uniform magnitudes over the whole exponent range, small values) and on every combination of
special values (signed zeros, infinities, NaNs, subnormals, FLT_MIN/MAX, integer MIN/MAX, zero
divisors, shift counts past the width, rounding ties, conversion bounds); the results must equal
the row's semantic bit for bit, except that any NaN matches any NaN (PTX leaves payloads open).
"""
from __future__ import annotations

import importlib.util
import itertools
import zlib
from pathlib import Path

import numpy as np
import pytest

from numptx import stack_ptx as sp
from numptx._native import ffi, lib
from numptx.instructions import BUILTIN_ROWS, NP_DTYPE, TABLE
from numptx.search.genes import DTYPES, OP_NAMES, Genes, SearchError

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("gen_interp", ROOT / "native" / "gen_interp.py")
gen_interp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_interp)

OPS = {ffi.string(lib.nxi_op_name(k)).decode(): k for k in range(lib.nxi_n_ops())}
N_RANDOM = 3000

_F32 = np.finfo(np.float32)
_F64 = np.finfo(np.float64)
_FLOAT_SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, 0.1, np.pi, 2.0, 255.5,
                   127.5, -128.5, -0.7, 0.49999997, 2.0 ** 24, 2.0 ** 31, -(2.0 ** 31), 2.0 ** 32,
                   4294967040.0, 2.0 ** 63, -(2.0 ** 63), 2.0 ** 64, 2.0 ** 126, -(2.0 ** 127),
                   np.inf, -np.inf, np.nan, -np.nan]
SPECIALS = {
    "f32": np.array(_FLOAT_SPECIALS + [
        _F32.tiny, -_F32.tiny, _F32.smallest_subnormal, -_F32.smallest_subnormal,
        _F32.tiny - _F32.smallest_subnormal, _F32.max, -_F32.max], np.float32),
    "f64": np.array(_FLOAT_SPECIALS + [
        _F64.tiny, -_F64.tiny, _F64.smallest_subnormal, float(_F32.tiny),
        float(_F32.smallest_subnormal), 2.0 ** -460, 2.0 ** 460, 2.0 ** 1000, 2147483647.5,
        9007199254740993.0, _F64.max, -_F64.max], np.float64),
}
for _t, _bits in (("s32", 32), ("u32", 32), ("s64", 64), ("u64", 64)):
    _info = np.iinfo(NP_DTYPE[_t])
    # an f32 tie plus a sticky bit: rounding through f64 first would round it wrong
    _tie = tuple((1 << (_bits - k)) | (1 << (_bits - 24 - k)) | 1 for k in (1, 2))
    _vals = [0, 1, 2, 3, 7, 31, 32, 33, 63, 64, 65, 127, 128, 255, 256, 2 ** 31 - 1,
             _info.max, _info.max - 1, _info.min, _info.min + 1, 1 << (_bits - 1), *_tie]
    if _t[0] == "s":
        _vals += [-1, -2, -7, -128, -129, -(2 ** 31), -_tie[1]]
    SPECIALS[_t] = np.array([v for v in _vals if _info.min <= v <= _info.max], NP_DTYPE[_t])
SPECIALS["b32"], SPECIALS["b64"] = SPECIALS["u32"], SPECIALS["u64"]
SPECIALS["b16"] = np.array([0, 1, 0x7FFF, 0x8000, 0xFFFF], np.uint16)
SPECIALS["pred"] = np.array([0, 1], np.uint8)


def storage(t: str) -> np.dtype:
    """The C storage of one element of value type ``t`` (gen_interp.C_TYPE)."""
    return np.dtype(np.uint8) if t == "pred" else np.dtype(NP_DTYPE[t])


def random_column(t: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """n operands of type t: a quarter each of random bits, log-uniform magnitudes over the
    type's range (floats) or small values (integers), values in [-8, 8], special values."""
    dt = storage(t)
    if t == "pred":
        return rng.integers(0, 2, n).astype(np.uint8)
    bits = rng.integers(0, 2 ** 63, n, dtype=np.uint64) * np.uint64(2) + \
        rng.integers(0, 2, n, dtype=np.uint64)
    out = bits.astype(f"u{dt.itemsize}").view(dt).copy()
    k = n // 4
    if dt.kind == "f":
        top = 128 if t == "f32" else 1024
        mag = np.exp2(rng.uniform(-top - 24, top, k)) * rng.choice([-1.0, 1.0], k)
        out[:k] = mag.astype(dt)
    else:
        lo = max(np.iinfo(dt).min, -70)
        out[:k] = rng.integers(lo, 71, k).astype(dt)
    out[k:2 * k] = rng.uniform(-8, 8, k).astype(dt)
    if dt.kind == "f":
        out[k:2 * k][::3] = np.rint(out[k:2 * k][::3] * 2) / 2      # ties for the roundings
    out[2 * k:3 * k] = rng.choice(SPECIALS[t], k)
    return rng.permutation(out)


def operands(row, rng: np.random.Generator) -> list[np.ndarray]:
    """Random columns for each operand of ``row``, then every combination of special values
    (for three operands: the specials of the third against a sample of the first two)."""
    types = row.operand_types
    cols = [random_column(t, N_RANDOM, rng) for t in types]
    if len(types) <= 2:
        combos = list(itertools.product(*(SPECIALS[t] for t in types)))
    else:
        pairs = list(itertools.product(SPECIALS[types[0]], SPECIALS[types[1]]))
        combos = [(*pairs[i], z) for i in rng.choice(len(pairs), min(len(pairs), 400), False)
                  for z in SPECIALS[types[2]]]
    for j, t in enumerate(types):
        cols[j] = np.concatenate([cols[j], np.array([c[j] for c in combos], storage(t))])
    if row.opcode.startswith("fma.") or row.opcode.startswith("mad."):
        cols = [np.concatenate([c, x]) for c, x in zip(cols, cancelling(types[0], rng))]
    return cols


def cancelling(t: str, rng: np.random.Generator, n: int = 1000) -> list[np.ndarray]:
    """a, b, c with c within a few ulps (or units) of -(a * b): the sum cancels, so the
    product's low bits decide the result (fma's single rounding)."""
    dt = storage(t)
    if dt.kind == "f":
        top = 60 if t == "f32" else 500
        a, b = np.exp2(rng.uniform(-top, top, (2, n))) * rng.choice([-1.0, 1.0], (2, n))
        a, b = a.astype(dt), b.astype(dt)
        c = -(a.astype(np.float64) * b).astype(dt)
    else:
        a, b = random_column(t, n, rng), random_column(t, n, rng)
        c = (np.zeros(n, dt) - a * b) if dt.kind == "u" else -(a * b)
    it = f"i{dt.itemsize}"
    nudge = rng.integers(-3, 4, n).astype(it)
    return [a, b, (c.view(it) + nudge).view(dt)]


def run_c(row, cols: list[np.ndarray]) -> np.ndarray:
    n = len(cols[0])
    d = np.zeros(n, storage(row.result_types[0]))
    ptrs = [ffi.from_buffer(np.ascontiguousarray(c)) for c in cols] + [ffi.NULL] * (3 - len(cols))
    assert lib.nxi_apply(OPS[row.name], n, ffi.from_buffer(d), *ptrs) == 0
    return d


def run_numpy(row, cols: list[np.ndarray]) -> np.ndarray:
    args = [c.astype(bool) if t == "pred" else c for c, t in zip(cols, row.operand_types)]
    with np.errstate(all="ignore"):
        r = np.asarray(row.semantic(*args))
    return np.broadcast_to(r, (len(cols[0]),)).astype(storage(row.result_types[0]))


def mismatches(want: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Indices where the bits differ and not both are NaN."""
    u = f"u{want.dtype.itemsize}"
    bad = want.view(u) != got.view(u)
    if want.dtype.kind == "f":
        bad &= ~(np.isnan(want) & np.isnan(got))
    return np.flatnonzero(bad)


def test_header_is_current():
    text = (ROOT / "native" / "interp_rows.h").read_text()
    assert text == gen_interp.header_text(), "run: python native/gen_interp.py"


def test_ops_are_the_rows_with_c():
    rows = [TABLE[i].name for i in range(BUILTIN_ROWS) if TABLE[i].c]
    assert list(OPS) == rows, "rebuild the extension: pip install -e ."
    assert lib.nxi_op_name(lib.nxi_n_ops()) == ffi.NULL
    d = np.zeros(1, np.float32)
    assert lib.nxi_apply(lib.nxi_n_ops(), 1, ffi.from_buffer(d), ffi.NULL, ffi.NULL,
                         ffi.NULL) == -1


@pytest.mark.parametrize("name", list(OPS))
def test_row_bits_equal_semantic(name):
    row = TABLE[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    cols = operands(row, rng)
    want, got = run_numpy(row, cols), run_c(row, cols)
    bad = mismatches(want, got)
    if bad.size:
        i = bad[0]
        raise AssertionError(
            f"{name}: {bad.size} of {len(want)} rows differ; first at operands "
            f"{[c[i] for c in cols]}: semantic {want[i]!r}, C {got[i]!r}")


def gene_rows(dtype: str) -> set[str]:
    """The table rows the search's op genes of ``dtype`` expand to."""
    by_op = {sp.instr(TABLE[i].name): TABLE[i].name for i in range(BUILTIN_ROWS)
             if not TABLE[i].is_special}
    names = set()
    for op in OP_NAMES:
        try:
            genes = Genes([op], 1, dtype=dtype)
        except SearchError:                  # the dtype has no form of this op
            continue
        names |= {by_op[w] for w in genes.op_words(op) if w.kind == "instr"}
    return names


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_gene_row_is_covered(dtype):
    rows = gene_rows(dtype)
    assert {f"add.rn.{dtype}", f"div.rn.{dtype}", f"sqrt.rn.{dtype}"} <= rows
    assert sorted(rows - set(OPS)) == []


def test_generator_refuses_an_expression_reading_a_missing_operand():
    row = TABLE["neg.f32"]
    gen_interp.check_row(row)
    bad = type(row)(row.name, row.fmt, row.operands, row.results, row.semantic, c="a + b")
    with pytest.raises(SystemExit, match=r"neg\.f32: its c expression 'a \+ b' reads a, b"):
        gen_interp.check_row(bad)
