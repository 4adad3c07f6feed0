"""Instruction-table rows that mm-ptx programs use (issue 16, item 2), and mm-ptx's spellings.

:mod:`numptx.instructions` appends these rows after its own (so earlier row indices stay where
they were) by calling :func:`add_rows` with its row factory; the rows are ordinary table rows
from then on (``TABLE["setp.lt.ftz.f32"]``)::

    from numptx.instructions import TABLE
    TABLE["%tid"].render(["%a", "%b", "%c", "%d"])   # 'mov.v4.u32 {%a, %b, %c, %d}, %tid;'

What is here (facts from the PTX ISA; each row assembles with ptxas through nvJitLink):

* ``setp.<cmp>.ftz.f32`` for every f32 comparison of the table (eq ne lt le gt ge nan num):
  subnormal operands flush to zero before comparing.
* The warp-level ``mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32`` (A: 2 registers, B: 1
  register written ``{%b}``, C/D: 4 f32), next to the table's ``cvt.rna.tf32.f32``.
* 8-bit conversions. numptx has no 8-bit value type, and PTX lets ``cvt`` read an 8-bit source
  from the low byte of a wider register and write an 8-bit result zero- (u8) or sign- (s8)
  extended into a wider one, so these rows hold 8-bit values in u32 (u8) and s32 (s8)
  registers: ``cvt.u32.u8`` keeps the low byte; ``cvt.u8.s32`` truncates; ``cvt.sat.u8.s32``
  clamps; ``cvt.rni.u8.f32`` rounds and clamps (NaN -> 0); ``cvt.rn.f32.u8`` is exact.
* f16x2/bf16x2 pack and unpack (``mov.b32 %r, {%lo, %hi}`` and back): ``pack.f16x2.f16`` takes
  the low half first; ``unpack.f16.f16x2`` gives the low half first.
* Every PTX special register ptxas accepts for sm_90 (PTX ISA, chapter "Special Registers"):
  the vector forms ``%tid %ntid %ctaid %nctaid %clusterid %nclusterid %cluster_ctaid
  %cluster_nctaid`` (``mov.v4.u32``, .w reads 0) and their .x/.y/.z/.w components, ``%nwarpid
  %nsmid %gridid``, ``%lanemask_eq/le/lt/ge/gt``, ``%clock_hi``, ``%globaltimer_lo/_hi``,
  ``%pm0..7``, ``%pm0_64..7_64``, ``%envreg0..31``, ``%total_smem_size %dynamic_smem_size
  %aggr_smem_size``, ``%reserved_smem_offset_begin/end/cap/0/1``, ``%current_graph_exec``,
  ``%cluster_ctarank %cluster_nctarank %is_explicit_cluster``.

The emulator reads special registers from its inputs by PTX name (``{"%nsmid": 132}``); the
ones the ISA defines from others are derived when not given (:data:`DERIVED`): the lane masks
from ``%laneid``, ``%clock_hi`` from ``%clock64``, ``%globaltimer_lo/_hi`` from
``%globaltimer``, and a vector register's components from ``%tid.x`` ... (``.w`` is 0).

mm-ptx names instructions by their PTX text with ``_`` for ``.`` (``add_ftz_f32``,
``stack_ptx_encode_ptx_instruction_cvt_rna_tf32_f32``), special registers without ``%``
(``tid.x``, ``tid_x``) and a few by display names (``f16x2_to_v2_f16``); :func:`numptx_spelling`
maps those to the numptx name, which ``TABLE.index`` puts in its error.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import numpy as np

from . import semantics as S

__all__ = ["add_rows", "DERIVED", "VECTOR_SPECIALS", "numptx_spelling", "MMPTX_DISPLAY_NAMES"]

_F32, _F64 = np.float32, np.float64
_U32, _S32 = np.uint32, np.int32
_FTZ_DOC = "; subnormal operands flush to sign-preserving 0 first"
_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
        "gt": np.greater, "ge": np.greater_equal}

#: vector special registers -> their component names (``.w``, which reads 0, has a row of its
#: own, ``%tid.w``: the mm-ptx dialect's stubs read it, as mm-ptx's do)
VECTOR_SPECIALS: dict[str, tuple[str, ...]] = {
    f"%{r}": tuple(f"%{r}.{c}" for c in "xyz")
    for r in ("tid", "ntid", "ctaid", "nctaid", "clusterid", "nclusterid", "cluster_ctaid",
              "cluster_nctaid")}


# ------------------------------------------------------------------------------ semantics
def _setp_ftz(fn: Callable | None, kind: str) -> Callable:
    def op(a, b):
        a, b = S.ftz32(a), S.ftz32(b)
        if kind == "nan":
            return np.isnan(a) | np.isnan(b)
        if kind == "num":
            return ~(np.isnan(a) | np.isnan(b))
        return S.ordered(fn, a, b)
    return op


#: C expressions of the setp .ftz rows (native/interp_ops.h): both operands flushed, then
#: C's ordered comparisons (a float ne is written ordered: C's != is true for NaN)
_SETP_FTZ_C = {k: e.format(a="nx_ftz32(a)", b="nx_ftz32(b)") for k, e in {
    "eq": "{a} == {b}", "ne": "{a} < {b} || {a} > {b}", "lt": "{a} < {b}", "le": "{a} <= {b}",
    "gt": "{a} > {b}", "ge": "{a} >= {b}", "nan": "isnan({a}) || isnan({b})",
    "num": "!isnan({a}) && !isnan({b})"}.items()}


def _low8_c(signed: bool) -> str:
    """C: the low byte of operand ``a``, zero- or sign-extended (:func:`_low8`)."""
    return "nx_sx8((uint32_t)a)" if signed else "(uint8_t)a"


def _low8(a: Any, signed: bool) -> np.ndarray:
    """The low byte of ``a``, zero- or sign-extended to 32 bits (as uint32 or int32)."""
    b = np.asarray(a).astype(np.int64) & 0xFF
    if signed:
        return np.where(b >= 0x80, b - 0x100, b).astype(_S32)
    return b.astype(_U32)


def _widen8(src_signed: bool, dst: np.dtype) -> Callable:
    """cvt.<dst>.<u8|s8>: the 8-bit value in the low byte, extended by the source's sign."""
    return lambda a: _low8(a, src_signed).astype(np.int64).astype(dst)


def _narrow8(dst_signed: bool, sat: bool, src_signed: bool) -> Callable:
    """cvt[.sat].<u8|s8>.<u32|s32>: truncate (or clamp) to 8 bits, then extend into the 32-bit
    result register by the destination's sign (PTX: a wider destination register is sign-
    extended for signed types, zero-extended otherwise)."""
    lo, hi = (-128, 127) if dst_signed else (0, 255)

    def op(a):
        v = np.asarray(a).astype(_S32 if src_signed else _U32).astype(np.int64)
        if sat:
            v = np.clip(v, lo, hi)
        return _low8(v, dst_signed)
    return op


def _float_to8(mode: str, dst_signed: bool) -> Callable:
    """cvt.<rni|rzi>.<u8|s8>.f32: round, clamp to the 8-bit range (float-to-integer conversions
    saturate), NaN -> 0; the result extended into the 32-bit register."""
    lo, hi = (-128.0, 127.0) if dst_signed else (0.0, 255.0)
    rnd = np.rint if mode == "rni" else np.trunc

    def op(a):
        with np.errstate(invalid="ignore"):
            r = rnd(np.asarray(a, _F32).astype(_F64))
            r = np.where(np.isnan(r), 0.0, np.clip(r, lo, hi))
        return r.astype(np.int64).astype(_S32 if dst_signed else _U32)
    return op


def _int8_to_float(src_signed: bool, dst: str) -> Callable:
    return lambda a: S.from_float(_low8(a, src_signed).astype(_F64), dst)


def _mma_m16n8k4_tf32(a, b, c):
    """mma.sync m16n8k4 row.col f32.tf32.tf32.f32 over whole warps (lane = index % 32). Fragment
    layout (PTX ISA, "Matrix Fragments for mma.m16n8k4", .tf32), g = lane >> 2, t = lane % 4:
    A (16x4): a0 (g, t), a1 (g+8, t); B (4x8): b0 (t, g); C, D (16x8): c0 (g, 2t),
    c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1)."""
    w, g, t = S.mma_lanes(a[0])

    def tf(x):
        return S.tf32(np.asarray(x).ravel()).astype(_F64).reshape(w, 32)
    A = np.zeros((w, 16, 4))
    B = np.zeros((w, 4, 8))
    C = np.zeros((w, 16, 8))
    A[:, g, t] = tf(a[0])
    A[:, g + 8, t] = tf(a[1])
    B[:, t, g] = tf(b)
    dpos = ((g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1))
    for k, (r, col) in enumerate(dpos):
        C[:, r, col] = np.asarray(c[k]).reshape(w, 32).astype(_F64)
    with np.errstate(all="ignore"):
        D = np.matmul(A, B) + C
    return tuple(D[:, r, col].astype(_F32).ravel() for r, col in dpos)


def _pack(a, b):
    return S.pack16(np.asarray(a).view(np.uint16), np.asarray(b).view(np.uint16))


def _unpack(half: np.dtype) -> Callable:
    return lambda x: tuple(h.view(half) for h in S.split16(x))


# ------------------------------------------------------------------------------ derived specials
def _lanemask(kind: str) -> Callable:
    def op(lane):
        lane = np.asarray(lane).astype(np.uint64) & np.uint64(31)
        one = np.uint64(1)
        eq = one << lane
        v = {"eq": eq, "le": (eq << one) - one, "lt": eq - one,
             "ge": ~(eq - one), "gt": ~((eq << one) - one)}[kind]
        return (v & np.uint64(0xFFFFFFFF)).astype(_U32)
    return op


def _hi32(x):
    return (np.asarray(x).astype(np.uint64) >> np.uint64(32)).astype(_U32)


def _lo32(x):
    return (np.asarray(x).astype(np.uint64) & np.uint64(0xFFFFFFFF)).astype(_U32)


#: special register -> (the registers it is computed from, function of their values); the
#: emulator uses it when the register itself is not among the inputs
DERIVED: dict[str, tuple[tuple[str, ...], Callable]] = {
    **{f"%lanemask_{k}": (("%laneid",), _lanemask(k)) for k in ("eq", "le", "lt", "ge", "gt")},
    "%clock_hi": (("%clock64",), _hi32),
    "%globaltimer_lo": (("%globaltimer",), _lo32),
    "%globaltimer_hi": (("%globaltimer",), _hi32),
}


def _specials() -> list[tuple[str, str, int, bool, str]]:
    """(name, result spec, min sm, volatile, doc) of every special register row added here."""
    out: list[tuple[str, str, int, bool, str]] = []
    what = {"tid": "thread index in the CTA", "ntid": "CTA size",
            "ctaid": "CTA index in the grid", "nctaid": "grid size in CTAs",
            "clusterid": "cluster index in the grid", "nclusterid": "grid size in clusters",
            "cluster_ctaid": "CTA index in the cluster", "cluster_nctaid": "cluster size in CTAs"}
    for r, d in what.items():
        sm = 90 if "cluster" in r else 10
        out.append((f"%{r}", "u32[4]", sm, False, f"{d} as a vector (x, y, z, w = 0)"))
        if sm == 90:
            out += [(f"%{r}.{c}", "u32", sm, False, f"{d} ({c})") for c in "xyz"]
    out += [("%nwarpid", "u32", 20, False, "number of warp ids (the bound of %warpid)"),
            ("%nsmid", "u32", 20, False, "number of SM ids (the bound of %smid)"),
            ("%gridid", "u64", 10, False, "temporal grid launch number"),
            ("%cluster_ctarank", "u32", 90, False, "CTA rank in the cluster"),
            ("%cluster_nctarank", "u32", 90, False, "number of CTAs in the cluster"),
            ("%is_explicit_cluster", "pred", 90, False, "whether the launch named a cluster")]
    masks = {"eq": "lane == laneid", "le": "lanes <= laneid", "lt": "lanes < laneid",
             "ge": "lanes >= laneid", "gt": "lanes > laneid"}
    out += [(f"%lanemask_{k}", "u32", 20, False, f"32-bit mask of the {d} (the row's value "
             f"is lane 0's)") for k, d in masks.items()]
    out += [("%clock_hi", "u32", 20, True, "upper 32 bits of %clock64"),
            ("%globaltimer_lo", "u32", 30, True, "lower 32 bits of %globaltimer"),
            ("%globaltimer_hi", "u32", 30, True, "upper 32 bits of %globaltimer")]
    out += [(f"%pm{i}", "u32", 10, True, f"performance monitoring counter {i}") for i in range(8)]
    out += [(f"%pm{i}_64", "u64", 50, True, f"64-bit performance monitoring counter {i}")
            for i in range(8)]
    out += [(f"%envreg{i}", "b32", 10, False, f"driver-defined environment register {i}")
            for i in range(32)]
    out += [("%total_smem_size", "u32", 20, False, "shared memory of the CTA (static + dynamic "
             "+ reserved), bytes"),
            ("%dynamic_smem_size", "u32", 20, False, "dynamic shared memory of the CTA, bytes"),
            ("%aggr_smem_size", "u32", 90, False, "shared memory of the CTA including the "
             "aggregate of the cluster's reserved regions, bytes")]
    out += [(f"%reserved_smem_offset_{k}", "b32", 80, False, f"reserved shared memory: {d}")
            for k, d in (("begin", "start offset"), ("end", "end offset"),
                         ("cap", "capacity"), ("0", "offset 0"), ("1", "offset 1"))]
    out += [("%current_graph_exec", "u64", 50, False, "handle of the CUDA graph executing the "
             "kernel (0 outside graphs)")]
    return out


def _special_default(name: str, spec: str) -> Callable:
    if spec == "u32[4]":
        return lambda: tuple(_U32(0) for _ in range(4))
    if name in DERIVED and name.startswith("%lanemask_"):
        fn = DERIVED[name][1]
        return lambda: _U32(fn(np.zeros(1, _U32))[0])
    dt = {"u32": _U32, "u64": np.uint64, "b32": _U32, "pred": np.bool_}[spec]
    return lambda: dt(0)


# ------------------------------------------------------------------------------ the rows
def add_rows(row: Callable[..., None], flags: Mapping[str, frozenset]) -> None:
    """Append this module's rows through ``row`` (numptx.instructions' ``_row`` factory:
    ``row(name, operands, results, semantic, *, fmt, acc, flags, sm, doc)``); ``flags`` maps
    flag names to the table's frozensets."""
    comm, ftz, approx = flags["commutative"], flags["ftz"], flags["approx"]
    special, volatile, bitcast = flags["special"], flags["volatile"], flags["bitcast"]
    # ---- setp .ftz forms of every f32 comparison the table has
    for c in ("eq", "ne", "lt", "le", "gt", "ge", "nan", "num"):
        doc = {"nan": "a or b is NaN", "num": "neither a nor b is NaN"}.get(
            c, f"a {c} b (ordered: false if a or b is NaN)")
        row(f"setp.{c}.ftz.f32", ("f32", "f32"), ("pred",), _setp_ftz(_CMP.get(c), c),
            flags=ftz | (comm if c in ("eq", "ne", "nan", "num") else frozenset()),
            doc=doc + _FTZ_DOC, c=_SETP_FTZ_C[c])
    # ---- tf32 m16n8k4 mma (the B fragment is one register, written as a 1-vector)
    name = "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32"
    row(name, ("b32[2]", "b32", "f32[4]"), ("f32[4]",), _mma_m16n8k4_tf32,
        fmt=f"{name} $0, $1, {{$2}}, $3;", acc=("rel", 2.0 ** -22), flags=approx, sm=80,
        doc="warp-level D = A * B + C, 16x8x4, tf32 inputs (low 13 bits ignored), f32 "
            "accumulate (order/rounding of the sums: implementation-defined)")
    # ---- 8-bit conversions (u8 values live in u32 registers, s8 values in s32 registers)
    for s8 in (False, True):
        src, reg = ("s8", "s32") if s8 else ("u8", "u32")
        for dst, dt in (("u32", _U32), ("s32", _S32), ("u64", np.uint64), ("s64", np.int64)):
            row(f"cvt.{dst}.{src}", (reg,), (dst,), _widen8(s8, np.dtype(dt)),
                doc=f"the {src} in the low byte of a -> {dst} "
                    f"({'sign' if s8 else 'zero'}-extended)", c=_low8_c(s8))
        for dst in ("f16", "f32"):
            row(f"cvt.rn.{dst}.{src}", (reg,), (dst,), _int8_to_float(s8, dst),
                doc=f"the {src} in the low byte of a -> {dst} (exact)",
                c=f"(float){_low8_c(s8)}" if dst == "f32" else "")
    for s8 in (False, True):
        dst, reg = ("s8", "s32") if s8 else ("u8", "u32")
        ext = "sign" if s8 else "zero"
        for src in ("u32", "s32"):
            row(f"cvt.{dst}.{src}", (src,), (reg,), _narrow8(s8, False, src == "s32"),
                doc=f"low byte of a as {dst}, {ext}-extended into the {reg} result",
                c=_low8_c(s8))
            row(f"cvt.sat.{dst}.{src}", (src,), (reg,), _narrow8(s8, True, src == "s32"),
                doc=f"a clamped to the {dst} range, {ext}-extended into the {reg} result",
                c=f"nx_clamp64((int64_t)a, {-128 if s8 else 0}, {127 if s8 else 255})")
        for mode, how in (("rni", "rounded to nearest even"), ("rzi", "rounded toward zero")):
            row(f"cvt.{mode}.{dst}.f32", ("f32",), (reg,), _float_to8(mode, s8),
                doc=f"f32 -> {dst}, {how}, clamped to the {dst} range; NaN -> 0; "
                    f"{ext}-extended into the {reg} result",
                c=f"nx_sat8({'rint' if mode == 'rni' else 'trunc'}((double)a), "
                  f"{'-128.0, 127.0' if s8 else '0.0, 255.0'})")
    # ---- f16x2 / bf16x2 pack and unpack (mov.b32 with a 2-vector of 16-bit halves)
    for t in ("f16", "bf16"):
        half = np.dtype(np.float16 if t == "f16" else np.uint16)
        row(f"pack.{t}x2.{t}", (t, t), (f"{t}x2",), _pack, fmt="mov.b32 $0, {$1, $2};",
            flags=bitcast, doc=f"two {t} as one {t}x2: a -> low half (element 0), b -> high")
        row(f"unpack.{t}.{t}x2", (f"{t}x2",), (t, t), _unpack(half), fmt="mov.b32 {$0, $1}, $2;",
            flags=bitcast, doc=f"the halves of a {t}x2: low half (element 0) first, then high")
    # ---- special registers
    for name, spec, sm, vol, doc in _specials():
        mov = "mov.v4.u32" if spec == "u32[4]" else f"mov.{spec}"
        if spec == "u32[4]":
            where = f"inputs['{name}.x'], ['{name}.y'], ['{name}.z']; w = 0"
        elif name in DERIVED:
            where = f"inputs['{name}'], else from {', '.join(DERIVED[name][0])}"
        else:
            where = f"inputs['{name}']"
        row(name, (), (spec,), _special_default(name, spec), fmt=f"{mov} $0, {name};",
            flags=special | (volatile if vol else frozenset()), sm=sm,
            doc=f"special register: {doc} (emulator: {where})")
    # ---- the 4th components (appended last: the rows above keep their indices). The PTX ISA
    # says a vector special register's .w reads 0; ptxas takes `mov.u32 %r, %tid.w;`, which is
    # how mm-ptx's stubs read it (the mm-ptx dialect's stubs read each component so too)
    for vec in VECTOR_SPECIALS:
        sm = 90 if "cluster" in vec else 10
        row(f"{vec}.w", (), ("u32",), _special_default(f"{vec}.w", "u32"),
            fmt=f"mov.u32 $0, {vec}.w;", flags=special, sm=sm,
            doc=f"special register: the 4th component of {vec}, always 0 (the emulator "
                f"reads 0 too and refuses an input for it)")


# ------------------------------------------------------------------------------ mm-ptx spellings
#: mm-ptx display names -> the numptx row (None: no single row; the value of
#: :data:`_NO_ROW` says what to write instead)
MMPTX_DISPLAY_NAMES: dict[str, str | None] = {
    "f16x2_to_v2_f16": "unpack.f16.f16x2",
    "f16_to_f32": "cvt.f32.f16",
    "u32_to_v4_u8": None,
}
_NO_ROW = {
    "u32_to_v4_u8": "numptx has no 8-bit stack: take byte k of a u32 with shr.u32 by 8*k, then "
                    "cvt.u32.u8 (u8 values live in u32 registers)",
}
_PREFIXES = ("stack_ptx_encode_ptx_instruction_", "stack_ptx_encode_special_register_",
             "STACK_PTX_PTX_INSTRUCTION_", "STACK_PTX_SPECIAL_REGISTER_")


def _norm(name: str) -> str:
    return name.lstrip("%").replace(".", "_").lower()


def numptx_spelling(name: Any, names: Iterable[str]) -> tuple[str | None, str]:
    """``(numptx name or None, explanation)`` when ``name`` is mm-ptx's spelling of a row of
    ``names`` (or of something numptx writes otherwise); ``(None, "")`` when it is not."""
    if not isinstance(name, str) or not name:
        return None, ""
    key = name
    for p in _PREFIXES:
        if key.startswith(p):
            key = key[len(p):]
            break
    if key in MMPTX_DISPLAY_NAMES:
        target = MMPTX_DISPLAY_NAMES[key]
        return target, ("" if target else _NO_ROW[key])
    want = _norm(key)
    hits = sorted(n for n in names if _norm(n) == want and n != name)
    if len(hits) == 1:
        return hits[0], ""
    return None, ""
