"""The instruction table: validation, every entry's semantic against an independent reference
(exact rational arithmetic with fractions.Fraction and a hand-written IEEE rounding, Python
integers, math-module float64 for the documented bounds of approximate instructions), every
entry assembled by nvJitLink in one generated kernel, and the generated docs."""
from __future__ import annotations

import itertools
import math
import re
import struct
from fractions import Fraction as Q
from pathlib import Path

import numpy as np
import pytest

import numptx as nx
from numptx import instructions as I
from numptx.errors import NumptxError
from numptx.instructions import NP_DTYPE, REG_TYPE, TABLE, TYPES, Instr, Table, parse_type_spec

BUILTIN = list(TABLE)[:I.BUILTIN_ROWS]
NAN, INF = float("nan"), float("inf")
ROOT = Path(__file__).resolve().parent.parent


# ================================================================================ table basics
def test_types_and_maps():
    # the built-in types first (user stack types, defined by other tests, follow them)
    assert TYPES[:14] == ("pred", "f16", "f16x2", "bf16", "bf16x2", "f32", "f64", "s32", "u32",
                          "s64", "u64", "b16", "b32", "b64")
    assert set(REG_TYPE) == set(TYPES) == set(NP_DTYPE)
    assert REG_TYPE["f16"] == "b16" and REG_TYPE["bf16x2"] == "b32" and REG_TYPE["f32"] == "f32"
    assert NP_DTYPE["bf16"] == np.uint16 and NP_DTYPE["f16"] == np.float16
    assert NP_DTYPE["pred"] == np.bool_
    assert parse_type_spec("b32[4]") == ("b32", 4) and parse_type_spec("f32") == ("f32", 1)
    for bad in ("f31", "b32[0]", "b32[9]", "F32", "b32[x]", 5):
        with pytest.raises(I.InstructionError):
            parse_type_spec(bad)


def test_table_is_consistent():
    assert len(TABLE) >= 300
    names = [r.name for r in TABLE]
    assert len(set(names)) == len(names)
    # opcodes are unique among rows on built-in types (a row on a user stack type runs the PTX
    # of a built-in row: sp.retype)
    ops = [r.opcode for r in TABLE if not r.is_special and "bitcast" not in r.flags
           and not I.user_typed(r)]
    assert len(set(ops)) == len(ops)
    for i, r in enumerate(TABLE):
        assert TABLE.index(r.name) == i and TABLE[i] is r and TABLE[r.name] is r and r.name in TABLE
    for r in BUILTIN:                      # numptx's own rows (tests add rows of their own)
        assert sorted({int(m) for m in re.findall(r"\$(\d+)", r.fmt)}) == list(range(r.n_slots))
        assert 1 <= len(r.results) <= 4 and len(r.operands) <= 4
        assert all(1 <= w <= 8 for w in r.operand_widths + r.result_widths)
        assert r.doc and "\n" not in r.doc
        assert (r.accuracy == "exact") == ("approx" not in r.flags), r.name
        if r.is_special:
            assert r.name.startswith("%") and r.fmt.startswith("mov.") and r.name in r.fmt
            assert not r.operands and r.results[0] in ("u32", "u64", "b32", "pred", "u32[4]")
        elif "bitcast" in r.flags:
            assert r.name.split(".")[0] in ("bitcast", "pack", "unpack")
            assert r.opcode.startswith("mov.b")
            assert (sum(I.TYPE_BITS[t] for t in r.operand_types)
                    == sum(I.TYPE_BITS[t] for t in r.result_types))
        else:
            assert TABLE.by_opcode(r.opcode) is r
            assert r.opcode == r.name or r.opcode.startswith("mma.")
        if "ftz" in r.flags:
            assert ".ftz" in r.name
    mma = TABLE["mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"]
    assert mma.operand_widths == (4, 2, 4) and mma.result_widths == (4,) and mma.min_sm == 80
    assert mma.operand_type_ids == (I.TYPE_ID["b32"],) * 2 + (I.TYPE_ID["f32"],)
    assert TABLE["tanh.approx.f32"].min_sm == 75
    assert TABLE["%clock64"].is_volatile and TABLE["%clock64"].result_types == ("u64",)
    assert TABLE["fma.rn.f32"].is_commutative and not TABLE["sub.rn.f32"].is_commutative


def test_index_errors_suggest():
    with pytest.raises(I.UnknownInstructionError) as ei:
        TABLE.index("fma.rn.f3")
    assert isinstance(ei.value, KeyError) and isinstance(ei.value, NumptxError)
    assert "fma.rn.f32" in str(ei.value) and "fma.rn.f32" in ei.value.suggestions
    with pytest.raises(KeyError, match="did you mean"):
        TABLE.by_opcode("add.rn.f33")
    assert "nope" not in TABLE and 3 not in TABLE


def _ok_instr(**kw) -> Instr:
    base = dict(name="mad24.lo.u32", fmt="mad24.lo.u32 $0, $1, $2, $3;",
                operands=("u32", "u32", "u32"), results=("u32",),
                semantic=lambda a, b, c: (a & 0xFFFFFF) * (b & 0xFFFFFF) + c, doc="24-bit mad")
    base.update(kw)
    return Instr(**base)


def test_add_instruction_bumps_version_and_hash(monkeypatch):
    copy = Table(TABLE)
    assert copy.hash() == TABLE.hash() and len(copy) == len(TABLE)
    monkeypatch.setattr(I, "TABLE", copy)
    v, h = copy.version, copy.hash()
    idx = I.add_instruction(_ok_instr())
    assert idx == len(copy) - 1 and copy.version == v + 1 and copy.hash() != h
    assert copy.index("mad24.lo.u32") == idx and copy.by_opcode("mad24.lo.u32").name == "mad24.lo.u32"
    assert TABLE.version != copy.version or TABLE.hash() != copy.hash()
    # the emulator runs user instructions of the current table
    from numptx.dsl.emulator import emulate
    out = emulate("mad24.lo.u32 %d, %a, %b, %c;", {"a": np.uint32(0x1000003), "b": np.uint32(5),
                                                    "c": np.uint32(1)}, ["d"])
    assert out["d"] == 16


@pytest.mark.parametrize("kw, msg", [
    (dict(name="add.rn.f32"), "already has an entry"),
    (dict(name="x y"), "without spaces"),
    (dict(fmt="add.rn.f32 $0, $1, $2, $3;"), "opcode 'add.rn.f32' is already used"),
    (dict(fmt="mad24.lo.u32 $0, $1, $2;"), "need exactly"),
    (dict(fmt="mad24.lo.u32 $0, $1, $2, $3, $4;"), "need exactly"),
    (dict(operands=("u33", "u32", "u32")), "unknown type spec"),
    (dict(operands=("u32[9]", "u32", "u32")), "vector width"),
    (dict(operands=("u32",) * 5, fmt="m $0, $1, $2, $3, $4, $5;"), "at most 4 operands"),
    (dict(results=("u32",) * 5, fmt="m $0, $1, $2, $3, $4, $5, $6, $7;"), "at most 4 results"),
    (dict(results=(), fmt="m $0, $1, $2;"), "at least one result"),
    (dict(semantic=None), "callable"),
    (dict(accuracy=("ulps", 2)), "accuracy"),
    (dict(accuracy=("abs_or_rel", 1.0)), "accuracy"),
    (dict(flags=frozenset({"fast"})), "unknown flags"),
    (dict(min_sm="80"), "min_sm"),
    (dict(name="%myreg"), "special"),
    (dict(name="%myreg", flags=frozenset({"special"})), "special register entry"),
])
def test_bad_additions_raise(kw, msg):
    t = Table(BUILTIN[:40])
    v = t.version
    with pytest.raises(I.InstructionError, match=msg) as ei:
        t.add(_ok_instr(**kw))
    assert isinstance(ei.value, NumptxError) and t.version == v and len(t) == 40
    with pytest.raises(I.InstructionError):
        t.add("not an instr")


def test_special_entries_share_mov_opcodes():
    t = Table()
    for n in ("%tid.x", "%tid.y"):
        t.add(Instr(n, f"mov.u32 $0, {n};", (), ("u32",), lambda: np.uint32(0),
                    flags=frozenset({"special"}), doc="special"))
    assert len(t) == 2 and t.version == 2


def test_hash_cached_and_order_sensitive():
    a, b = Table(BUILTIN[:10]), Table(BUILTIN[1:10] + BUILTIN[:1])
    assert a.hash() == a.hash() and a.hash() != b.hash()
    assert re.fullmatch(r"[0-9a-f]{64}", a.hash())


def test_render_vectors():
    r = TABLE["fma.rn.f32"]
    assert r.render("%d", "%a", "%b", "%c") == "fma.rn.f32 %d, %a, %b, %c;"
    with pytest.raises(I.InstructionError):
        r.render("%d")


def test_docs_are_generated_from_the_table():
    text = I.markdown_table()
    assert (ROOT / "docs" / "instructions.md").read_text() == text, \
        "regenerate: python -m numptx.instructions > docs/instructions.md"
    for r in BUILTIN[:I.BUILTIN_ROWS]:
        assert f"`{r.name}`" in text
    assert "abs 2^-20.5" in text and "2 ulp" in text and "rel 2^-22.9" in text


# ================================================================================ independent reference
FMT = {"f16": (11, -14, 15), "bf16": (8, -126, 127), "f32": (24, -126, 127),
       "f64": (53, -1022, 1023), "tf32": (11, -126, 127)}


def pow2(e: int) -> Q:
    return Q(2) ** e


def _grid(a: Q, t: str) -> tuple[Q, Q, int]:
    """(ulp of format t at a > 0, a in ulps, its integer part)."""
    p, emin, _ = FMT[t]
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while a < pow2(e):
        e -= 1
    while a >= pow2(e + 1):
        e += 1
    ulp = pow2(max(e, emin) - p + 1)
    m = a / ulp
    return ulp, m, m.numerator // m.denominator


def round_q(q: Q, t: str, mode: str = "rne") -> float:
    """Exact rational -> nearest value of format t (ties to even, or away with 'rna'), as a
    Python float; overflow gives inf; a zero result keeps the sign of q."""
    p, emin, emax = FMT[t]
    if q == 0:
        return 0.0
    s = -1.0 if q < 0 else 1.0
    ulp, m, n = _grid(abs(q), t)
    rem = m - n
    if rem > Q(1, 2) or (rem == Q(1, 2) and (mode == "rna" or n % 2 == 1)):
        n += 1
    r = n * ulp
    if r >= pow2(emax + 1):
        return s * INF
    return s * float(r)


def round_dir(q: Q, t: str, mode: str) -> float:
    """Exact rational -> format t rounded toward zero (rz), -inf (rm) or +inf (rp); past the
    largest finite value: inf where the direction points away from zero, else the largest."""
    p, emin, emax = FMT[t]
    s = -1 if q < 0 else 1
    ulp, m, n = _grid(abs(q), t)
    up = (mode == "rp" and s > 0) or (mode == "rm" and s < 0)       # away from zero
    if up and m != n:
        n += 1
    r = n * ulp
    big = (2 - pow2(1 - p)) * pow2(emax)
    if r > big:
        return s * INF if up else s * float(big)
    return s * float(r)


def directed(op: str, xs, mode: str) -> float:
    """add/sub/mul/fma .rz/.rm/.rp.f32 from exact rationals (IEEE 754 6.3 for zero signs)."""
    if any(math.isnan(x) for x in xs):
        return NAN
    if op == "sub":
        return directed("add", (xs[0], -xs[1]), mode)
    if op == "mul":
        xs = (xs[0], xs[1], 0.0)
    elif op == "add":
        xs = (1.0, xs[0], xs[1])
    a, b, c = xs
    if any(math.isinf(v) for v in xs):
        return a * b + c if op != "mul" else a * b
    ex = Q(a) * Q(b) + Q(c)
    if ex == 0:
        if op == "mul":
            return a * b
        p = a * b
        if math.copysign(1, p) == math.copysign(1, c):
            return p + c                       # both zeros of one sign, or an exact zero sum
        return -0.0 if mode == "rm" else 0.0
    return round_dir(ex, "f32", mode)


def flush(x: float) -> float:
    return math.copysign(0.0, x) if (x == x and x != 0 and abs(x) < 2.0 ** -126) else x


def sqrt_q(a: float) -> Q:
    """sqrt(a) to within 2**-1200 (exact when it is representable), for rounding."""
    k = 1200
    q = Q(a) * 4 ** k
    assert q.denominator == 1
    n = math.isqrt(q.numerator)
    return Q(n, 2 ** k) if n * n == q.numerator else Q(2 * n + 1, 2 ** (k + 1))


def ieee(op: str, xs, t: str) -> float:
    """IEEE 754 round-to-nearest-even result of op on exactly representable inputs."""
    if any(math.isnan(x) for x in xs):
        return NAN
    if op == "sub":
        return ieee("add", (xs[0], -xs[1]), t)
    if op == "add":
        a, b = xs
        if math.isinf(a) or math.isinf(b):
            return a + b
        ex = Q(a) + Q(b)
        return a + b if ex == 0 else round_q(ex, t)
    if op == "mul":
        a, b = xs
        if math.isinf(a) or math.isinf(b) or a == 0 or b == 0:
            return a * b
        return round_q(Q(a) * Q(b), t)
    if op == "fma":
        a, b, c = xs
        if math.isinf(a) or math.isinf(b):
            return a * b + c
        if math.isinf(c):
            return c
        ex = Q(a) * Q(b) + Q(c)
        if ex == 0:
            return (a * b + c) if (a == 0 or b == 0) else 0.0
        return round_q(ex, t)
    if op == "div":
        a, b = xs
        if (math.isinf(a) and math.isinf(b)) or (a == 0 and b == 0):
            return NAN
        sign = math.copysign(1, a) * math.copysign(1, b)
        if math.isinf(a) or b == 0:
            return sign * INF
        if math.isinf(b) or a == 0:
            return sign * 0.0
        return round_q(Q(a) / Q(b), t)
    if op == "sqrt":
        (a,) = xs
        if a == 0 or a == INF:
            return a
        if a < 0:
            return NAN
        return round_q(sqrt_q(a), t)
    raise AssertionError(op)


def ptx_min(a, b):
    if math.isnan(a) and math.isnan(b):
        return NAN
    if math.isnan(a) or math.isnan(b):
        return b if math.isnan(a) else a
    if a == b == 0:
        return a if math.copysign(1, a) < 0 else b
    return a if a < b else b


def ptx_max(a, b):
    if math.isnan(a) and math.isnan(b):
        return NAN
    if math.isnan(a) or math.isnan(b):
        return b if math.isnan(a) else a
    if a == b == 0:
        return a if math.copysign(1, a) > 0 else b
    return a if a > b else b


INT = {"s32": (32, True), "u32": (32, False), "s64": (64, True), "u64": (64, False),
       "b16": (16, False), "b32": (32, False), "b64": (64, False)}


def wrap(v: int, t: str) -> int:
    bits, signed = INT[t]
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >> (bits - 1) else v


def tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


ROUND = {"rni": round, "rzi": math.trunc, "rmi": math.floor, "rpi": math.ceil}


def round_integral(x: float, m: str) -> float:
    if math.isnan(x) or math.isinf(x):
        return x
    r = float(ROUND[m](Q(x)))
    return math.copysign(r, x) if r == 0 else r


def f2i(x: float, src: str, dst: str, m: str) -> int:
    bits, signed = INT[dst]
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if math.isnan(x):
        if src != "f64" and bits == 32:
            return 0
        return lo if signed else 1 << (bits - 1)
    if math.isinf(x):
        return hi if x > 0 else lo
    return min(max(ROUND[m](Q(x)), lo), hi)


def cvt_float(x: float, dst: str) -> float:
    if math.isnan(x) or math.isinf(x) or x == 0:
        return x
    return round_q(Q(x), dst)


# ---- canonical <-> Python values (written independently of numptx.semantics)
def f16_from_bits(b: int) -> float:
    return struct.unpack("<e", struct.pack("<H", b & 0xFFFF))[0]


def bf16_from_bits(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", (b & 0xFFFF) << 16))[0]


def py(x, t):
    """An element of a canonical array -> Python value (packed pairs -> (low, high))."""
    if t in ("f16", "f32", "f64"):
        return float(x)
    if t == "bf16":
        return bf16_from_bits(int(x))
    if t in ("f16x2", "bf16x2"):
        conv = f16_from_bits if t == "f16x2" else bf16_from_bits
        return (conv(int(x) & 0xFFFF), conv(int(x) >> 16))
    if t == "pred":
        return bool(x)
    return int(x)


def same(got, exp) -> bool:
    if isinstance(exp, tuple):
        return len(got) == len(exp) and all(same(g, e) for g, e in zip(got, exp))
    if isinstance(exp, float):
        if math.isnan(exp):
            return isinstance(got, float) and math.isnan(got)
        return got == exp and math.copysign(1, got) == math.copysign(1, exp)
    return got == exp and type(got) is type(exp)


# ================================================================================ inputs
RNG = np.random.default_rng(20240611)
F32MAX = float(np.finfo(np.float32).max)
EDGE_VALUES = {
    "f32": [0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 0.5, 1.5, 3.0, -7.25, 2.0 ** -149, -2.0 ** -149,
            2.0 ** -126 - 2.0 ** -149, 2.0 ** -126, -2.0 ** -126, 2.0 ** -127, F32MAX, -F32MAX,
            1 + 2.0 ** -23, 1 - 2.0 ** -24, 0.1, 1e30, -1e-30, 2.5, 3.5, 2.0 ** 31, -2.0 ** 31,
            2.0 ** 32, 2.0 ** 63, 2.0 ** 64, -2.0 ** 63, 4294967040.0, 1.25 * 2.0 ** -126,
            -1.5 * 2.0 ** -126, 2.0 ** -100, 2.0 ** -30],
    "f64": [0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 0.5, 1.5, 2.5, -7.25, 5e-324, -5e-324,
            2.0 ** -1022, 2.2250738585072009e-308, 1.7976931348623157e308, -1.7976931348623157e308,
            1 + 2.0 ** -52, 1 - 2.0 ** -53, 0.1, 1e300, -1e-300, 2.0 ** 31 - 0.5, 2.0 ** 31,
            -2.0 ** 31 - 1, 2.0 ** 32, 2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 2.0 ** 64 - 2048,
            9007199254740993.0, 1e20, 65520.0, 65519.99, 1.25 * 2.0 ** -1022, -1.5 * 2.0 ** -1022,
            2.0 ** -1000, 2.0 ** -60],
    "f16": [0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 0.5, 1.5, 2.5, 2.0 ** -24, -2.0 ** -24,
            2.0 ** -14, 65504.0, -65504.0, 1 + 2.0 ** -10, 0.0999755859375, 1000.0, 3.0],
}
BF16_EDGE_BITS = [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x3F80, 0xBF80, 0x3F00, 0x3FC0, 0x0001,
                  0x8001, 0x0080, 0x007F, 0x7F7F, 0xFF7F, 0x3F81, 0x4049, 0x4F00, 0x5F00, 0xDF00]
INT_EDGE = [0, 1, -1, 2, -2, 3, -7, 7, 31, 32, 33, 63, 64, 65, 255, 0x7FFF,
            -(1 << 31), (1 << 31) - 1, -(1 << 31) + 1, 1 << 31, (1 << 32) - 1,
            -(1 << 63), (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 0x5555555555555555]


def edges(t: str) -> np.ndarray:
    dt = NP_DTYPE[t]
    if t in EDGE_VALUES:
        with np.errstate(over="ignore"):
            return np.array(EDGE_VALUES[t], dtype=np.float64).astype(dt)
    if t == "bf16":
        return np.array(BF16_EDGE_BITS, np.uint16)
    if t in ("f16x2", "bf16x2"):
        h = edges(t[:-2]).view(np.uint16).astype(np.uint32)
        return (h[:, None] | (h[None, ::-1] << np.uint32(16))).ravel()[:: 3]
    if t == "pred":
        return np.array([False, True])
    bits = dt.itemsize * 8
    return np.array([v % (1 << bits) for v in INT_EDGE], dtype=f"u{dt.itemsize}").view(dt)


def random_values(t: str, n: int) -> np.ndarray:
    dt = NP_DTYPE[t]
    if t == "pred":
        return RNG.integers(0, 2, n).astype(bool)
    size = dt.itemsize
    raw = RNG.integers(0, 2 ** 63, n, dtype=np.int64).astype(np.uint64)
    raw = (raw * np.uint64(0x9E3779B97F4A7C15) ^ (raw << np.uint64(7))).astype(np.uint64)
    bits = raw.astype(f"u{size}")
    if t in ("f32", "f64", "f16"):
        # a third random bit patterns, a third moderate values, a third short significands (ties)
        k = n // 3
        mod = (RNG.standard_normal(k) * 2.0 ** RNG.integers(-12, 12, k)).astype(dt)
        m = RNG.integers(1 << 11, 1 << 12, n - 2 * k) if t != "f16" else RNG.integers(32, 64, n - 2 * k)
        short = (m * 2.0 ** RNG.integers(-20, 5, n - 2 * k) * RNG.choice([-1, 1], n - 2 * k)).astype(dt)
        return np.concatenate([bits[:k].view(dt), mod, short])
    if t == "bf16":
        k = n // 2
        vals = (RNG.standard_normal(n - k) * 2.0 ** RNG.integers(-10, 10, n - k)).astype(np.float32)
        return np.concatenate([bits[:k].view(np.uint16), (vals.view(np.uint32) >> 16).astype(np.uint16)])
    if t in ("s32", "u32", "s64", "u64", "b32", "b64", "b16"):
        k = n // 2                             # half full-width, half small magnitudes
        small = RNG.integers(-300, 300, n - k).astype(np.int64).astype(f"u{size}")
        return np.concatenate([bits[:k], small]).view(dt)
    return bits.view(dt)


def sample(types: tuple[str, ...], n_random: int = 160, max_edges: int = 1500) -> list[np.ndarray]:
    """Every combination of edge values (a random subset of them for 3 operands) + random."""
    combos = list(itertools.product(*(range(len(edges(t))) for t in types)))
    if len(combos) > max_edges:
        pick = RNG.choice(len(combos), max_edges, replace=False)
        combos = [combos[i] for i in pick]
    cols = []
    for j, t in enumerate(types):
        e = edges(t)[[c[j] for c in combos]]
        cols.append(np.concatenate([e, random_values(t, n_random)]))
    return cols


def fma_hard(t: str, n: int = 300):
    """Products of short significands (often exact midpoints) plus tiny or cancelling addends."""
    dt = NP_DTYPE[t]
    bits = {"f32": 13, "f64": 27, "f16": 6, "bf16": 5}[t]
    m1 = RNG.integers(1 << (bits - 1), 1 << bits, n)
    m2 = RNG.integers(1 << (bits - 1), 1 << bits, n)
    e1, e2 = RNG.integers(-6, 6, n), RNG.integers(-6, 6, n)
    a = m1 * 2.0 ** (e1 - bits)
    b = m2 * 2.0 ** (e2 - bits) * RNG.choice([-1, 1], n)
    p = a * b
    choice = RNG.integers(0, 5, n)
    tiny = 2.0 ** (e1 + e2 - {"f32": 60, "f64": 120, "f16": 30, "bf16": 60}[t])
    c = np.select([choice == 0, choice == 1, choice == 2, choice == 3],
                  [tiny, -tiny, -p, -p * (1 + 2.0 ** -10)], 0.0)
    if t == "bf16":
        conv = lambda x: (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)  # noqa: E731
        return [conv(a), conv(b), conv(c)]
    return [a.astype(dt), b.astype(dt), c.astype(dt)]


PREC = {"f16": 11, "bf16": 8, "f32": 24, "f64": 53}


def tie_values(src: str, dst: str, n: int = 200) -> np.ndarray:
    """Values of type src at, just above and just below midpoints between neighbouring values of
    float type dst: a conversion that rounds twice gets some of them wrong."""
    p = PREC[dst]
    if src in INT:
        bits, signed = INT[src]
        e = RNG.integers(p + 1, bits - 1 if signed else bits, n)
        m = RNG.integers(1 << (p - 1), 1 << p, n).astype(object)
        mid = [int(mm) * 2 ** (int(ee) - p + 1) + 2 ** (int(ee) - p) for mm, ee in zip(m, e)]
        vals = [v + d for v in mid for d in (0, 1, -1)]
        vals = [v for v in vals if v < 2 ** (bits - 1 if signed else bits)]
        sign = RNG.choice([-1, 1], len(vals)) if signed else np.ones(len(vals), int)
        return np.array([int(s) * v for s, v in zip(sign, vals)], dtype=object).astype(NP_DTYPE[src])
    span = {"f16": (-14, 15), "bf16": (-120, 120), "f32": (-120, 120), "f64": (-120, 120)}
    lo, hi = max(span[dst][0], span[src][0]), min(span[dst][1], span[src][1])
    e = RNG.integers(lo, hi, n)
    m = RNG.integers(1 << (p - 1), 1 << p, n)
    mid = (m * 2.0 + 1) * 2.0 ** (e - p)
    sdt = NP_DTYPE[src].type if src != "bf16" else np.float32
    mid = mid.astype(sdt) * RNG.choice([-1, 1], n).astype(sdt)
    vals = np.concatenate([mid, np.nextafter(mid, sdt(np.inf)), np.nextafter(mid, sdt(-np.inf))])
    if src == "bf16":
        return (vals.view(np.uint32) >> 16).astype(np.uint16)
    return vals


# ================================================================================ references
_STRUCT = {"f16": "<e", "f32": "<f", "f64": "<d", "s32": "<i", "u32": "<I", "s64": "<q",
           "u64": "<Q", "b16": "<H", "b32": "<I", "b64": "<Q"}


def _to_bits(v, t) -> int:
    if t == "bf16":
        return struct.unpack("<I", struct.pack("<f", v))[0] >> 16
    if t in ("f16x2", "bf16x2"):
        h = "f16" if t == "f16x2" else "bf16"
        return _to_bits(v[0], h) | _to_bits(v[1], h) << 16
    return int.from_bytes(struct.pack(_STRUCT[t], v), "little")


def _from_bits(b: int, t):
    if t == "bf16":
        return struct.unpack("<f", struct.pack("<I", b << 16))[0]
    if t in ("f16x2", "bf16x2"):
        h = "f16" if t == "f16x2" else "bf16"
        return (_from_bits(b & 0xFFFF, h), _from_bits(b >> 16, h))
    size = struct.calcsize(_STRUCT[t])
    return struct.unpack(_STRUCT[t], b.to_bytes(size, "little"))[0]


# (exponent, mantissa) masks: a NaN has every exponent bit and some mantissa bit set
_NAN_BITS = {"f16": (0x7C00, 0x3FF), "bf16": (0x7F80, 0x7F), "f32": (0x7F800000, 0x7FFFFF),
             "f64": (0x7FF0000000000000, 0xFFFFFFFFFFFFF)}


def classify(name: str):
    """(reference function on Python values, special input generator or None)."""
    m = re.fullmatch(r"bitcast\.(\w+)\.(\w+)", name)
    if m:
        dst, src = m.group(1), m.group(2)
        gen = None
        if src in ("f16x2", "bf16x2"):
            # Python floats cannot carry NaN payloads through the reference: packed halves
            # here are never NaN (the bit-for-bit NaN case is covered by test_emulator)
            def gen(src=src):
                u = np.random.default_rng(7).integers(0, 1 << 32, 4096, dtype=np.uint64).astype(np.uint32)
                exp_mask = 0x7C00 if src == "f16x2" else 0x7F80
                ok = ((u & exp_mask) != exp_mask) & (((u >> 16) & exp_mask) != exp_mask)
                return [u[ok]]
        elif src in _NAN_BITS:
            # the same for scalar floats: a NaN input reaches the reference as Python's NaN
            def gen(src=src):
                (vals,) = sample((src,))
                bits = vals.view(f"u{vals.dtype.itemsize}")
                exp, man = (bits.dtype.type(m) for m in _NAN_BITS[src])
                return [vals[~(((bits & exp) == exp) & ((bits & man) != 0))]]
        return (lambda a: _from_bits(_to_bits(a, src), dst)), gen
    m = re.fullmatch(r"(add|sub|mul)(\.rn)?(\.ftz)?\.(f32|f64)", name)
    if m:
        op, z, t = m.group(1), bool(m.group(3)), m.group(4)
        return (lambda a, b: ieee_ftz(op, (a, b), t, z)), None
    m = re.fullmatch(r"(add|sub|mul|fma)\.(rz|rm|rp)\.f32", name)
    if m:
        op, mode = m.group(1), m.group(2)
        gen = None
        if op == "fma":
            gen = lambda: [np.concatenate(x) for x in zip(sample(("f32",) * 3), fma_hard("f32"),  # noqa: E731
                                                           fma_extreme("f32"))]
        return (lambda *xs: directed(op, xs, mode)), gen
    if name == "shf.l.wrap.b32":                 # funnel shift: the high word of (b:a) << (c % 32)
        return (lambda a, b, c: (((b << 32) | a) << (c % 32) >> 32) & 0xFFFFFFFF), None
    if name == "cvt.sat.f32.f32":
        return (lambda a: 0.0 if math.isnan(a) else min(max(a, 0.0), 1.0) + 0.0), None
    m = re.fullmatch(r"fma\.rn(\.ftz)?\.(f32|f64)", name)
    if m:
        z, t = bool(m.group(1)), m.group(2)
        return (lambda a, b, c: ieee_ftz("fma", (a, b, c), t, z)), \
            (lambda: [np.concatenate(x) for x in zip(sample((t,) * 3), fma_hard(t), fma_extreme(t))])
    m = re.fullmatch(r"(div|rcp|sqrt)\.rn(\.ftz)?\.(f32|f64)", name)
    if m:
        op, z, t = m.group(1), bool(m.group(2)), m.group(3)
        if op == "rcp":
            return (lambda a: ieee_ftz("div", (1.0, a), t, z, flush_first=(False, True))), None
        return (lambda *xs: ieee_ftz(op, xs, t, z)), None
    m = re.fullmatch(r"(abs|neg)(\.ftz)?\.(f32|f64)", name)
    if m:
        fn = abs if m.group(1) == "abs" else (lambda x: -x)
        z = bool(m.group(2))
        return (lambda a: nan_or(flush(fn(flush(a))) if z else fn(a))), None
    m = re.fullmatch(r"(min|max)(\.ftz)?\.(f32|f64)", name)
    if m:
        fn = ptx_min if m.group(1) == "min" else ptx_max
        z = bool(m.group(2))
        return (lambda a, b: flush(fn(flush(a), flush(b))) if z else fn(a, b)), None
    if name.startswith("copysign."):
        # a NaN sign source counts as + (semantics.copysign)
        return (lambda a, b: NAN if math.isnan(b) else
                math.copysign(b, 1.0 if math.isnan(a) else a)), None
    m = re.fullmatch(r"cvt\.(rni|rzi|rmi|rpi)\.(f32|f64)\.\2", name)
    if m:
        mode = m.group(1)
        return (lambda a: round_integral(a, mode)), None
    m = re.fullmatch(r"(add|sub|mul|fma)\.rn\.(f16|bf16)(x2)?", name)
    if m:
        op, t, x2 = m.group(1), m.group(2), bool(m.group(3))
        scalar = lambda *xs: ieee(op, xs, t)  # noqa: E731
        gen = None
        if op == "fma" and not x2:
            gen = lambda: [np.concatenate(x) for x in zip(sample((t,) * 3), fma_hard(t))]  # noqa: E731
        return (halves(scalar) if x2 else scalar), gen
    m = re.fullmatch(r"(neg|abs|min|max)\.(f16|bf16)(x2)?", name)
    if m:
        fn = {"neg": lambda a: nan_or(-a), "abs": lambda a: nan_or(abs(a)),
              "min": ptx_min, "max": ptx_max}[m.group(1)]
        return (halves(fn) if m.group(3) else fn), None
    m = re.fullmatch(r"(add|sub|mul\.lo|mad\.lo|div|rem|min|max|abs|neg|mul\.hi|mul\.wide)\."
                     r"(s32|u32|s64|u64)", name)
    if m:
        return int_ref(m.group(1), m.group(2)), None
    m = re.fullmatch(r"(and|or|xor|not|shl|shr|popc|clz|brev)\.(b32|b64|u32|s32|u64|s64)", name)
    if m:
        shift = m.group(1) in ("shl", "shr")
        return bit_ref(m.group(1), m.group(2)), (shift_inputs(m.group(2)) if shift else None)
    m = re.fullmatch(r"(and|or|xor|not)\.pred", name)
    if m:
        return {"and": lambda a, b: a and b, "or": lambda a, b: a or b,
                "xor": lambda a, b: a != b, "not": lambda a: not a}[m.group(1)], None
    m = re.fullmatch(r"setp\.(eq|ne|lt|le|gt|ge|nan|num)\.(f32|f64|s32|u32|s64|u64)", name)
    if m:
        return setp_ref(m.group(1), m.group(2)[0] == "f"), None
    if name.startswith("selp."):
        return (lambda a, b, p: a if p else b), None
    m = re.fullmatch(r"cvt(\.rn)?\.(f16|bf16|f32|f64)\.(f16|bf16|f32|f64)", name)
    if m:
        d, src = m.group(2), m.group(3)
        gen = (lambda: [np.concatenate([sample((src,))[0], tie_values(src, d)])]) \
            if PREC[d] < PREC[src] else None
        return (lambda a: cvt_float(a, d)), gen
    m = re.fullmatch(r"cvt\.(rni|rzi|rmi|rpi)\.(s32|u32|s64|u64)\.(f16|bf16|f32|f64)", name)
    if m:
        mode, d, src = m.groups()
        return (lambda a: f2i(a, src, d, mode)), None
    m = re.fullmatch(r"cvt\.rn\.(f16|bf16|f32|f64)\.(s32|u32|s64|u64)", name)
    if m:
        d, src = m.group(1), m.group(2)
        gen = (lambda: [np.concatenate([sample((src,))[0], tie_values(src, d)])]) \
            if PREC[d] < INT[src][0] - 1 and d != "f16" else None
        return (lambda a: round_q(Q(a), d) if a else 0.0), gen
    m = re.fullmatch(r"cvt\.(s32|u32|s64|u64)\.(s32|u32|s64|u64)", name)
    if m:
        d = m.group(1)
        return (lambda a: wrap(a, d)), None
    m = re.fullmatch(r"cvt\.rn\.(f16|bf16)x2\.f32", name)
    if m:
        t = m.group(1)
        return (lambda a, b: (cvt_float(b, t), cvt_float(a, t))), None
    if name == "cvt.rna.tf32.f32":
        return tf32_ref, None
    # ---- rows for mm-ptx parity (numptx/instructions_mmptx.py)
    m = re.fullmatch(r"setp\.(eq|ne|lt|le|gt|ge|nan|num)\.ftz\.f32", name)
    if m:
        ref = setp_ref(m.group(1), True)
        return (lambda a, b: ref(flush(a), flush(b))), None
    m = re.fullmatch(r"cvt\.(u32|s32|u64|s64)\.(u8|s8)", name)
    if m:
        d, sg = m.group(1), m.group(2) == "s8"
        return (lambda a: wrap(ext8(a, sg), d)), None
    m = re.fullmatch(r"cvt\.rn\.(f16|f32)\.(u8|s8)", name)
    if m:
        sg = m.group(2) == "s8"
        return (lambda a: float(ext8(a, sg))), None
    m = re.fullmatch(r"cvt(\.sat)?\.(u8|s8)\.(u32|s32)", name)
    if m:
        sat, sg = bool(m.group(1)), m.group(2) == "s8"
        lo, hi = (-128, 127) if sg else (0, 255)
        return (lambda a: ext8(min(max(a, lo), hi) if sat else a, sg)), None
    m = re.fullmatch(r"cvt\.(rni|rzi)\.(u8|s8)\.f32", name)
    if m:
        mode, sg = m.group(1), m.group(2) == "s8"
        lo, hi = (-128, 127) if sg else (0, 255)
        return (lambda a: 0 if math.isnan(a) else
                int(min(max(round_integral(a, mode), lo), hi))), None
    m = re.fullmatch(r"pack\.(f16|bf16)x2\.\1", name)
    if m:
        return (lambda a, b: (a, b)), None
    return None


def ext8(v: int, signed: bool) -> int:
    """The low byte of v as an unsigned (or two's-complement signed) 8-bit value."""
    b = v & 0xFF
    return b - 256 if signed and b >= 128 else b


def nan_or(x):
    return NAN if isinstance(x, float) and math.isnan(x) else x


def ieee_ftz(op, xs, t, z, flush_first=None):
    if z:
        xs = tuple(flush(x) if (flush_first is None or flush_first[i]) else x
                   for i, x in enumerate(xs))
    r = ieee(op, xs, t)
    return flush(r) if z else r


def halves(fn):
    def g(*xs):                              # xs: (low, high) pairs
        return (fn(*(x[0] for x in xs)), fn(*(x[1] for x in xs)))
    return g


def fma_extreme(t):
    """Magnitudes that defeat float64 error-free transformations (exercise exact fallbacks)."""
    if t != "f64":
        return [np.zeros(0, NP_DTYPE[t])] * 3
    rows = [(1e300, 1e10, -INF), (1e300, 1e300, 1.0), (1e300, -1e300, 1e308),
            (1e-160, 1e-160, 5e-324), (1e-160, -1e-160, 1e-320), (2.0 ** -600, 2.0 ** -500, 2.0 ** -1074),
            (2.0 ** 600, 2.0 ** 500, -1e308), (1e200, 1e-200, -1.0), (3e-300, 3e-300, -0.0),
            (1.5e-200, 3e-150, 7e-310), (1e308, 10.0, -1e308), (2.0 ** 1000, 1 + 2.0 ** -52, -(2.0 ** 1000)),
            (1e-300, 1e-300, -0.0), (-1e-300, 1e-300, 0.0), (2.0 ** -537, 2.0 ** -537, 2.0 ** -1074),
            (1 + 2.0 ** -30, 2.0 ** -1000, -(2.0 ** -1000))]
    a, b, c = (np.array(col) for col in zip(*rows))
    return [a, b, c]


def int_ref(op, t):
    bits, signed = INT[t]
    if op == "div":
        return lambda a, b: (-1 if signed else (1 << bits) - 1) if b == 0 else wrap(tdiv(a, b), t)
    if op == "rem":
        return lambda a, b: a if b == 0 else wrap(a - b * tdiv(a, b), t)
    if op == "mul.hi":
        return lambda a, b: wrap((a * b) >> bits, t)
    if op == "mul.wide":
        return lambda a, b: wrap(a * b, "s64" if signed else "u64")
    f = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul.lo": lambda a, b: a * b,
         "mad.lo": lambda a, b, c: a * b + c, "min": min, "max": max, "abs": abs,
         "neg": lambda a: -a}[op]
    return lambda *xs: wrap(f(*xs), t)


def bit_ref(op, t):
    bits, signed = INT[t]
    mask = (1 << bits) - 1
    return {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
            "not": lambda a: ~a & mask, "shl": lambda a, n: (a << min(n, bits)) & mask,
            "shr": lambda a, n: a >> min(n, bits),
            "popc": lambda a: bin(a & mask).count("1"),
            "clz": lambda a: bits - (a & mask).bit_length(),
            "brev": lambda a: int(f"{a & mask:0{bits}b}"[::-1], 2)}[op]


def shift_inputs(t):
    def gen():
        a, n = sample((t, "u32"))
        extra = np.arange(0, 70, dtype=np.uint32)
        return [np.concatenate([a, np.resize(a, extra.size)]), np.concatenate([n, extra])]
    return gen


def setp_ref(c, isfloat):
    def f(a, b):
        nan = isfloat and (math.isnan(a) or math.isnan(b))
        if c == "nan":
            return nan
        if c == "num":
            return not nan
        if nan:
            return False
        return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[c]
    return f


def tf32_ref(a):
    if math.isnan(a) or math.isinf(a) or a == 0:
        return a
    return round_q(Q(a), "tf32", "rna")


# ================================================================================ per-entry checks
EXACT = [r.name for r in BUILTIN if r.accuracy == "exact" and not r.is_special
         and not r.name.startswith("mma.") and len(r.results) == 1]
# several results (unpack.f16.f16x2 ...): tests/test_mmptx_instructions.py
MULTI = {r.name for r in BUILTIN if r.accuracy == "exact" and len(r.results) > 1}


@pytest.mark.parametrize("name", EXACT)
def test_exact_semantic_matches_reference(name):
    ins = TABLE[name]
    found = classify(name)
    assert found is not None, f"no independent reference for {name}"
    ref, gen = found
    types = ins.operand_types
    args = gen() if gen else sample(types)
    with np.errstate(all="ignore"):
        got = ins.apply(*args)
    rt = ins.result_types[0]
    got = np.asarray(got)
    assert got.dtype == NP_DTYPE[rt], f"{name} returns {got.dtype}, canonical is {NP_DTYPE[rt]}"
    assert got.shape == args[0].shape
    bad = []
    for k in range(len(got)):
        xs = [py(a[k], t) for a, t in zip(args, types)]
        exp = ref(*xs)
        g = py(got[k], rt)
        if name == "cvt.rna.tf32.f32":
            assert int(got[k]) & 0x1FFF == 0 or math.isnan(exp)
            g = struct.unpack("<f", struct.pack("<I", int(got[k])))[0]
        if not same(g, exp):
            bad.append((xs, g, exp))
    assert not bad, f"{name}: {len(bad)} mismatches, e.g. {bad[:4]}"


def test_every_entry_is_covered():
    approx = {r.name for r in BUILTIN if r.accuracy != "exact"}
    special = {r.name for r in BUILTIN if r.is_special}
    assert set(EXACT) | approx | special | MULTI == {r.name for r in BUILTIN}
    assert approx == set(APPROX_NAMES) | {"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
                                          "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32"}


# ---- approximate instructions: documented bound vs float64 math
DOCUMENTED = {  # PTX ISA 9.7.3 notes (the test's own copy)
    "div.approx": ("ulp", 2), "div.full": ("ulp", 2), "rcp.approx": ("ulp", 1),
    "sqrt.approx": ("rel", 2.0 ** -23), "rsqrt.approx": ("rel", 2.0 ** -22.9),
    "sin.approx": ("abs", 2.0 ** -20.5), "cos.approx": ("abs", 2.0 ** -20.5),
    "ex2.approx": ("ulp", 2), "lg2.approx": ("abs_or_rel", 2.0 ** -22, 2.0 ** -22),
    "tanh.approx": ("rel", 2.0 ** -11),
}
CORNERS = {  # documented corner cases (input -> result)
    "sin": [(-INF, NAN), (-0.0, -0.0), (0.0, 0.0), (INF, NAN), (NAN, NAN)],
    "cos": [(-INF, NAN), (-0.0, 1.0), (0.0, 1.0), (INF, NAN), (NAN, NAN)],
    "lg2": [(-INF, NAN), (-2.0, NAN), (-0.0, -INF), (0.0, -INF), (INF, INF), (NAN, NAN)],
    "ex2": [(-INF, 0.0), (-0.0, 1.0), (0.0, 1.0), (INF, INF), (NAN, NAN)],
    "tanh": [(-INF, -1.0), (-0.0, -0.0), (0.0, 0.0), (INF, 1.0), (NAN, NAN)],
    "sqrt": [(-INF, NAN), (-3.0, NAN), (-0.0, -0.0), (0.0, 0.0), (INF, INF), (NAN, NAN)],
    "rsqrt": [(-INF, NAN), (-3.0, NAN), (-0.0, -INF), (0.0, INF), (INF, 0.0), (NAN, NAN)],
    "rcp": [(-INF, -0.0), (-0.0, -INF), (0.0, INF), (INF, 0.0), (NAN, NAN)],
}
APPROX_NAMES = [r.name for r in BUILTIN if r.accuracy != "exact" and not r.name.startswith("mma.")]
_MATH64 = {"sin": np.sin, "cos": np.cos, "ex2": np.exp2, "lg2": np.log2, "tanh": np.tanh,
           "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "rcp": lambda x: 1 / x}


def _math(op):
    def f(x):
        with np.errstate(all="ignore"):
            return float(_MATH64[op](np.float64(x)))
    return f


MATH = {op: _math(op) for op in _MATH64}


def ulp32(v: float) -> float:
    e = math.frexp(v)[1] - 1 if v else -126
    return 2.0 ** (max(e, -126) - 23)


def within(acc, got: float, ref: float) -> bool:
    err = abs(got - ref)
    if acc[0] == "ulp":
        return err <= acc[1] * ulp32(ref)
    if acc[0] == "abs":
        return err <= acc[1]
    if acc[0] == "rel":
        return err <= acc[1] * abs(ref)
    return err <= max(acc[1], acc[2] * abs(ref))


@pytest.mark.parametrize("name", APPROX_NAMES)
def test_approx_within_documented_bound(name):
    ins = TABLE[name]
    family = name.split(".")[0] + "." + name.split(".")[1]
    op = name.split(".")[0]
    assert ins.accuracy == DOCUMENTED[family] and "approx" in ins.flags
    ftz = ".ftz." in name
    n = 4000
    if op in ("sin", "cos"):
        x = RNG.uniform(-2 * math.pi, 2 * math.pi, n)
    elif op == "lg2":
        x = np.concatenate([RNG.uniform(0.5, 2, n // 2), 2.0 ** RNG.uniform(-140, 127, n // 2)])
    elif op == "ex2":
        x = RNG.uniform(-150, 128, n)
    elif op == "tanh":
        x = np.concatenate([RNG.standard_normal(n // 2) * 4, 2.0 ** RNG.uniform(-149, 10, n // 2)])
    else:
        x = np.abs(RNG.standard_normal(n)) * 2.0 ** RNG.uniform(-125, 125, n)
    x = x.astype(np.float32)
    if op == "div":
        b = (RNG.choice([-1, 1], n) * 2.0 ** RNG.uniform(-126, 126, n)).astype(np.float32)
        a = (RNG.standard_normal(n) * 2.0 ** RNG.uniform(-60, 60, n)).astype(np.float32)
        got = np.asarray(ins.apply(a, b))
        refs = [float(p) / float(q) for p, q in zip(a, b)]
    else:
        got = np.asarray(ins.apply(x))
        refs = [MATH[op](float(v)) for v in (flush(float(v)) if ftz else float(v) for v in x)]
    assert got.dtype == np.float32
    bad = []
    for g, r in zip(got.tolist(), refs):
        if ftz:
            r = flush(r)
        if abs(r) > F32MAX * (1 - 2.0 ** -25):
            assert math.isinf(g) or abs(g) >= F32MAX * 0.99
            continue
        if math.isinf(r) or math.isnan(r):
            if not same(g, r):
                bad.append((g, r))
            continue
        if (ftz or DOCUMENTED[family][0] == "ulp") and abs(r) < 2.0 ** -126:
            continue                         # below the normal range only the flush/ulp rule holds
        if not within(ins.accuracy, g, r):
            bad.append((g, r))
    assert not bad, f"{name}: {len(bad)} results outside {ins.accuracy}: {bad[:3]}"
    # documented corner cases
    corners = CORNERS.get(op, [])
    if op in ("div",):
        big = np.float32([2.0 ** 127, -(2.0 ** 127), 3e38, 2.0 ** 127])
        a = np.float32([1.0, 1.0, INF, -5.0])
        r = np.asarray(ins.apply(a, big))
        assert (name.startswith("div.full") or
                (same(float(r[0]), 0.0) and same(float(r[1]), -0.0) and math.isnan(r[2])
                 and same(float(r[3]), -0.0)))
    for xin, xout in corners:
        g = float(np.asarray(ins.apply(np.float32([xin])))[0])
        assert same(g, xout), f"{name}({xin}) = {g}, documented {xout}"
    if ftz and op != "div":
        g = float(np.asarray(ins.apply(np.float32([2.0 ** -140])))[0])
        ref0 = {"lg2": -INF, "rsqrt": INF, "rcp": INF}.get(op, MATH[op](0.0))
        assert same(g, ref0), f"{name}: subnormal input must flush to +0 first"


# ---- special registers and mma
@pytest.mark.parametrize("name", [r.name for r in BUILTIN if r.is_special])
def test_special_register_semantic(name):
    ins = TABLE[name]
    v = ins.apply()
    if ins.result_widths == (4,):             # a vector register: mov.v4.u32 {...}, %tid
        assert len(v) == 4 and all(np.asarray(c).dtype == np.uint32 and c == 0 for c in v)
        assert ins.fmt == f"mov.v4.u32 $0, {name};"
        assert not ins.is_volatile
        return
    lane0 = {"%lanemask_eq": 1, "%lanemask_le": 1, "%lanemask_ge": 0xFFFFFFFF,
             "%lanemask_gt": 0xFFFFFFFE}          # the lane masks' value is lane 0's
    assert np.asarray(v).dtype == NP_DTYPE[ins.result_types[0]] and v == lane0.get(name, 0)
    assert ins.fmt == f"mov.{ins.result_types[0]} $0, {name};"
    volatile = {"%clock", "%clock64", "%clock_hi", "%globaltimer", "%globaltimer_lo",
                "%globaltimer_hi", "%smid", "%warpid"}
    assert ins.is_volatile == (name in volatile or re.fullmatch(r"%pm\d(_64)?", name) is not None)


def mma_reference(a, b, c):
    """Lane-by-lane scatter of the m16n8k8 tf32 fragments (PTX ISA figures), exact sums."""
    n = len(c[0])
    out = [np.zeros(n, np.float32) for _ in range(4)]
    for w0 in range(0, n, 32):
        A = [[0.0] * 8 for _ in range(16)]
        B = [[0.0] * 8 for _ in range(8)]
        C = [[0.0] * 8 for _ in range(16)]
        for lane in range(32):
            g, t = lane // 4, lane % 4
            tf = lambda x: struct.unpack("<f", struct.pack("<I", int(x) & 0xFFFFE000))[0]  # noqa: E731
            A[g][t], A[g + 8][t] = tf(a[0][w0 + lane]), tf(a[1][w0 + lane])
            A[g][t + 4], A[g + 8][t + 4] = tf(a[2][w0 + lane]), tf(a[3][w0 + lane])
            B[t][g], B[t + 4][g] = tf(b[0][w0 + lane]), tf(b[1][w0 + lane])
            C[g][2 * t], C[g][2 * t + 1] = float(c[0][w0 + lane]), float(c[1][w0 + lane])
            C[g + 8][2 * t], C[g + 8][2 * t + 1] = float(c[2][w0 + lane]), float(c[3][w0 + lane])
        for lane in range(32):
            g, t = lane // 4, lane % 4
            for k, (r, col) in enumerate(((g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1))):
                exact = sum(Q(A[r][i]) * Q(B[i][col]) for i in range(8)) + Q(C[r][col])
                out[k][w0 + lane] = round_q(exact, "f32")
    return out


def test_mma_semantic_against_lane_scatter():
    ins = TABLE["mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"]
    n = 64
    f = lambda: (RNG.standard_normal(n) * 4).astype(np.float32)  # noqa: E731
    a = tuple(f().view(np.uint32) for _ in range(4))
    b = tuple(f().view(np.uint32) for _ in range(2))
    c = tuple(f() for _ in range(4))
    got = ins.apply(a, b, c)
    assert isinstance(got, tuple) and len(got) == 4 and all(g.dtype == np.float32 for g in got)
    exp = mma_reference(a, b, c)
    for g, e in zip(got, exp):
        np.testing.assert_allclose(g, e, rtol=2.0 ** -22, atol=1e-6)
    with pytest.raises(ValueError, match="whole warps"):
        ins.apply(tuple(x[:40] for x in a), tuple(x[:40] for x in b), tuple(x[:40] for x in c))


# ================================================================================ assembly
C_TYPE = {"f16": "unsigned short", "bf16": "unsigned short", "b16": "unsigned short",
          "f16x2": "unsigned int", "bf16x2": "unsigned int", "b32": "unsigned int",
          "u32": "unsigned int", "s32": "int", "f32": "float", "f64": "double",
          "s64": "long long", "u64": "unsigned long long", "b64": "unsigned long long",
          "pred": "unsigned int"}


def site_for(idx: int, ins: Instr):
    """CUDA lines of one site exercising ``ins`` and its stub text."""
    ops, stub_pre, stub_post, decl, slots = [], [], [], [], []
    k = 0
    for role, specs in (("o", ins.results), ("i", ins.operands)):
        for j, spec in enumerate(specs):
            t, w = parse_type_spec(spec)
            regs = []
            for c in range(w):
                v = f"{role}{j}_{c}"
                site_t = "u32" if t == "pred" else t
                lv = f"*({C_TYPE[t]}*)&buf[{idx * 16 + k}]"
                k += 1
                ops.append(f"PTX_{'OUT' if role == 'o' else 'IN'}({site_t.upper()}, {v}, {lv})")
                if t == "pred":
                    decl.append(f".reg .pred %p{role}{j}_{c};")
                    if role == "i":
                        stub_pre.append(f"setp.ne.u32 %p{role}{j}_{c}, %v_{v}, 0;")
                    else:
                        stub_post.append(f"selp.u32 %v_{v}, 1, 0, %p{role}{j}_{c};")
                    regs.append(f"%p{role}{j}_{c}")
                else:
                    regs.append(f"%v_{v}")
            slots.append(regs if w > 1 else regs[0])
    cuda = f'    {{ PTX_INJECT("s{idx}"{", " if ops else ""}{", ".join(ops)}); }}'
    stub = "\n".join(["{"] + decl + stub_pre + [ins.render(*slots)] + stub_post + ["}"])
    return cuda, stub


def test_every_entry_assembles_in_one_kernel():
    sites = [site_for(i, ins) for i, ins in enumerate(BUILTIN)]
    src = ("extern \"C\" __global__ void all_instructions(unsigned long long* buf) {\n"
           + "\n".join(c for c, _ in sites) + "\n}\n")
    ptx = nx.cuda_to_ptx(src, arch="sm_90")
    inj = nx.PtxInject(ptx)
    assert list(inj.sites) == [f"s{i}" for i in range(len(BUILTIN))]
    rendered = inj.render([s for _, s in sites])
    for ins in BUILTIN[:5] + BUILTIN[-3:]:
        assert ins.opcode in rendered
    cubin = nx.ptx_to_cubin(rendered, arch="sm_90")
    assert cubin[:4] == b"\x7fELF"


def _raw_module(ins: Instr, arch: str) -> str:
    decl, slots, n = [], [], 0
    for spec in ins.results + ins.operands:
        t, w = parse_type_spec(spec)
        regs = []
        for _ in range(w):
            decl.append(f".reg .{REG_TYPE[t]} %r{n};")
            regs.append(f"%r{n}")
            n += 1
        slots.append(regs if w > 1 else regs[0])
    return (f".version 8.1\n.target {arch}\n.address_size 64\n.visible .entry k()\n{{\n"
            + "\n".join(decl) + f"\n{ins.render(*slots)}\nret;\n}}\n")


@pytest.mark.parametrize("name", [r.name for r in BUILTIN if r.min_sm >= 80])
def test_min_sm_is_tight(name):
    """Entries that need sm_80/sm_90 assemble there and are refused one architecture below."""
    ins = TABLE[name]
    assert nx.ptx_to_cubin(_raw_module(ins, f"sm_{ins.min_sm}"), arch=f"sm_{ins.min_sm}")
    lower = {80: "sm_75", 90: "sm_89"}[ins.min_sm]
    with pytest.raises(nx.LinkError):
        nx.ptx_to_cubin(_raw_module(ins, lower), arch=lower)
