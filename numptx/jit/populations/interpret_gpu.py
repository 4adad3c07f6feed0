"""The GPU interpreter of Stack PTX tapes: a batch of programs over columns of data in one launch,
with no assembly per program.

::

    from numptx import stack_ptx as sp
    from numptx.jit.populations.interpret_gpu import interpret_gpu, fitness_sums_gpu, scores_from_sums
    tp = sp.tapes(programs, {"x0": "f32", "x1": "f32"}, {"y": "f32"})
    y, = interpret_gpu(tp.words, tp.offsets, [x0, x1], ["f32"])
    y.shape                                          # (len(programs), len(x0))
    sums = fitness_sums_gpu(tp.words, tp.offsets, [x0, x1], target, "mse", rows=gene_rows)
    scores = scores_from_sums(sums, "mse", target)   # what nx.fitness gives

``sp.interpret(..., device="gpu")`` runs through :class:`GpuInterpreter` once it is
registered (``numptx._program.interpret.register_device("gpu", GpuInterpreter())``).

One thread runs one program over one data row: the grid is (ceil(n_rows / block),
programs). The kernel (:mod:`.interpret_gpu_source`) is generated per instruction subset (by
default the rows the batch uses; ``rows=`` a fixed superset, e.g. the genes' rows, so that one
kernel serves every generation), slot width and slot bound (the next power of two of the
batch's largest ``n_slots``, from 16), compiled with NVRTC once per process and its cubin kept
in the cubin cache: after the first batch a population costs no assembly.

Before any launch the tapes are checked (:func:`prepare_tapes`); what does not fit raises
:class:`InterpretGpuError` naming the program index (and record), and nothing is launched:
a header past the words, a count of outputs other than ``outputs``', a program with more slots
than the bound, a record of an unknown kind, a table row the table lacks or the GPU
interpreter does not run (special registers, vector operands: the reason is said), operand
and result counts or types that differ from the row's, a slot written out of record order or
read before it is written, an input index past ``inputs``, an input read as two types, an
output slot of another type than asked.

Inputs are ``inputs[i]`` for the tapes' input index ``i``: a 1-D array of ``n_rows`` values of
the input's type (NumPy's dtype of it: ``numptx.instructions.NP_DTYPE``) or a scalar
(broadcast). Outputs come back as ``(programs, n_rows)`` arrays of each output's NumPy dtype;
an output a program does not write reads 0 (the mm-ptx dialect's unsatisfied outputs).

:func:`fitness_sums_gpu` does not store outputs: per program it adds, over the rows, the
terms of :func:`numptx.jit.populations.fitness.fitness_template`'s kernel for output 0 against the
target ``y`` (``s0, s1, s2`` and the number of rows whose prediction or term is not finite),
so a score follows as :func:`numptx.fitness` makes it.
"""
from __future__ import annotations

import functools
import logging
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import valuetypes as VT
from ..._program.interpret import InterpretError, Tapes
from .fitness_interpret import register_gpu_scorer
from ...errors import NumptxError
from ...instructions import TABLE, parse_type_spec
from ..compile.arch import normalize_arch
from ..errors import LaunchError
from .interpret_gpu_source import (CASE_CONST, CASE_INPUT, ENTRY, FIRST_ROW_CASE, LOSSES,
                                   RECORD_WORDS, Subset, kernel_source, slot_bits_of,
                                   supported)
from ..templates.template import CudaTemplate, Variant

__all__ = ["InterpretGpuError", "DeviceTapes", "prepare_tapes", "interpret_gpu", "GpuInterpreter",
           "GpuLaunch", "plan_interpret", "plan_fitness",
           "fitness_sums_gpu", "scores_from_sums", "interp_variant", "MAX_SLOTS", "MIN_SLOTS",
           "fitness_losses", "plan_fitness_rows"]

log = logging.getLogger(__name__)

#: the largest slot bound a kernel is built with (Limits.max_nodes' default)
MAX_SLOTS = 4096
#: the smallest: bounds are powers of two from here, so few kernels serve every batch
MIN_SLOTS = 16
_NO_SLOT = 0xFFFFFFFF
_KINDS = ("INPUT", "CONST", "INSTR")
_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


class InterpretGpuError(InterpretError):
    """A tape, input or output the GPU interpreter refuses (an :class:`~numptx.InterpretError`);
    ``program`` is the index of the program at fault (None when the fault is no one
    program's), ``row`` the table row's name where one is at fault."""


@dataclass(frozen=True)
class DeviceTapes:
    """Checked tapes in the kernel's layout (:mod:`.interpret_gpu_source`): ``words`` and
    ``offsets`` (word index of each program, a multiple of 8), the kernel's ``subset`` (rows,
    slot width, slot bound), ``input_types`` (the type each input index is read as, None when
    no program reads it) and ``output_types``."""
    words: np.ndarray
    offsets: np.ndarray
    n_programs: int
    subset: Subset
    input_types: tuple[str | None, ...]
    output_types: tuple[str, ...]


# ---- the table, as arrays over row indices ---------------------------------------------------
@functools.lru_cache(maxsize=4)
def _row_facts(n_rows: int, arch_number: int) -> tuple[np.ndarray, ...]:
    """(runs, n_ops, n_res, op_types (n, 4), res_types (n, 4)) of the table's first ``n_rows``
    rows (255: no such operand)."""
    runs = np.zeros(n_rows, bool)
    n_ops = np.zeros(n_rows, np.int64)
    n_res = np.zeros(n_rows, np.int64)
    op_t = np.full((n_rows, 4), 255, np.int64)
    res_t = np.full((n_rows, 4), 255, np.int64)
    for i in range(n_rows):
        if supported(i, arch_number) is not None:
            continue
        row = TABLE[i]
        runs[i] = True
        n_ops[i], n_res[i] = len(row.operands), len(row.results)
        for j, s in enumerate(row.operands):
            op_t[i, j] = VT.BY_NAME[parse_type_spec(s)[0]].id
        for j, s in enumerate(row.results):
            res_t[i, j] = VT.BY_NAME[parse_type_spec(s)[0]].id
    return runs, n_ops, n_res, op_t, res_t


def _fail(message: str, program: int | None, row: str | None = None) -> InterpretGpuError:
    return InterpretGpuError(f"interpret_gpu: {message}", program=program, row=row)


def _first(bad: np.ndarray) -> int | None:
    idx = np.flatnonzero(bad)
    return int(idx[0]) if len(idx) else None


def _type_name(tid: int) -> str:
    return VT.NAMES[tid] if 0 <= tid < len(VT.ROWS) else f"type id {tid}"


# ---- the checks -------------------------------------------------------------------------------
def _words(tape_words: Any, tape_offsets: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(words, starts, ends): program ``p``'s tape is ``words[starts[p]:ends[p]]``
    (``tape_offsets`` has one more entry than there are programs, as ``sp.tapes`` gives)."""
    w = np.asarray(tape_words)
    o = np.asarray(tape_offsets)
    if w.ndim != 1 or w.dtype != np.uint32:
        raise _fail(f"tape_words is a 1-D uint32 array, got {w.dtype} of shape {w.shape}", None)
    if o.ndim != 1 or o.dtype.kind not in "ui" or len(o) < 1:
        raise _fail(f"tape_offsets is a 1-D integer array of programs + 1 entries, got "
                    f"{o.dtype} of shape {o.shape}", None)
    o = o.astype(np.int64)
    starts, ends = o[:-1], o[1:]
    p = _first((starts < 0) | (ends < starts) | (ends > len(w)))
    if p is not None:
        raise _fail(f"program {p}: its words [{int(starts[p])}, {int(ends[p])}) are not within "
                    f"the {len(w)} tape words", p)
    return w, starts, ends


def _headers(w: np.ndarray, o: np.ndarray, ends: np.ndarray, n_outputs: int, bound: int):
    p = _first(o + 4 > ends)
    if p is not None:
        raise _fail(f"program {p}: its tape has {int(ends[p] - o[p])} words, less than the "
                    f"4-word header", p)
    n_slots, n_rec, n_out = (w[o + k].astype(np.int64) for k in range(3))
    p = _first(n_out != n_outputs)
    if p is not None:
        raise _fail(f"program {p}: its tape has {int(n_out[p])} output(s) but outputs= names "
                    f"{n_outputs}", p)
    p = _first(o + 4 + n_out + RECORD_WORDS * n_rec > ends)
    if p is not None:
        raise _fail(f"program {p}: {int(n_rec[p])} records and {int(n_out[p])} outputs run "
                    f"past its {int(ends[p] - o[p])} tape words", p)
    p = _first(n_slots > bound)
    if p is not None:
        raise _fail(f"program {p}: it needs {int(n_slots[p])} slots, over the bound of "
                    f"{bound} (max_slots=): split the program or raise the bound (at most "
                    f"{MAX_SLOTS})", p)
    return n_slots, n_rec, n_out


def _records(w, o, n_rec, n_out) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(records (total, 8) uint32 as int64, program of each, its index in its program)."""
    total = int(n_rec.sum())
    prog = np.repeat(np.arange(len(o)), n_rec)
    first = np.cumsum(n_rec) - n_rec
    k = np.arange(total) - np.repeat(first, n_rec)
    at = (o + 4 + n_out)[prog] + RECORD_WORDS * k
    recs = w[at[:, None] + np.arange(RECORD_WORDS)].astype(np.int64)
    return recs, prog, k


def _where(prog: np.ndarray, k: np.ndarray, i: int) -> tuple[int, str]:
    return int(prog[i]), f"program {int(prog[i])}, record {int(k[i])}"


def _check_records(recs, prog, k, n_slots, facts, allowed, n_inputs, arch_number):
    """Kinds, rows, counts and types; returns (kind, row, width, type) per record."""
    runs, n_ops, n_res, op_t, res_t = facts
    kind, typ = recs[:, 0] & 0xFF, (recs[:, 0] >> 8) & 0xFF
    nops, nres, row = (recs[:, 0] >> 16) & 0xFF, recs[:, 0] >> 24, recs[:, 2]
    i = _first(kind > 2)
    if i is not None:
        p, at = _where(prog, k, i)
        raise _fail(f"{at}: kind {int(kind[i])} (the kinds are 0 INPUT, 1 CONST, 2 INSTR)", p)
    i = _first(typ >= len(VT.ROWS))
    if i is not None:
        p, at = _where(prog, k, i)
        raise _fail(f"{at}: {_type_name(int(typ[i]))} is no built-in value type (the GPU "
                    f"interpreter runs no user stack type)", p)
    instr = kind == 2
    i = _first(instr & (row >= len(runs)))
    if i is not None:
        p, at = _where(prog, k, i)
        raise _fail(f"{at}: table row {int(row[i])} is unknown (the table has {len(runs)} "
                    f"rows)", p)
    r = np.where(instr, row, 0)
    i = _first(instr & ~(runs[r] & allowed[r]))
    if i is not None:
        p, at = _where(prog, k, i)
        name, ri = TABLE[int(r[i])].name, int(r[i])
        why = (supported(ri, arch_number) or "it is not in the kernel's rows (rows=)")
        raise _fail(f"{at}: row {ri} ({name}) does not run on the GPU interpreter: {why}", p,
                    name)
    i = _first(instr & ((nops != n_ops[r]) | (nres != n_res[r]) | (typ != res_t[r, 0])))
    if i is not None:
        p, at = _where(prog, k, i)
        raise _fail(f"{at}: row {int(r[i])} ({TABLE[int(r[i])].name}) takes {int(n_ops[r[i]])} "
                    f"operand(s) and gives {int(n_res[r[i]])} result(s) of "
                    f"{_type_name(int(res_t[r[i], 0]))}; the record says {int(nops[i])}, "
                    f"{int(nres[i])}, {_type_name(int(typ[i]))}", p)
    i = _first((kind == 0) & (recs[:, 2] >= n_inputs))
    if i is not None:
        p, at = _where(prog, k, i)
        raise _fail(f"{at}: reads input {int(recs[i, 2])} but inputs= has {n_inputs}", p)
    width = np.where(instr, nres, 1)
    return kind, r, width, typ


def _check_slots(recs, prog, k, n_slots, kind, r, width, typ, facts):
    """Slots in record order, operands written before they are read and of the row's types;
    returns each slot's type id (flat, program after program) and the programs' first slot."""
    _, n_ops, _, op_t, res_t = facts
    total = np.bincount(prog, weights=width, minlength=len(n_slots)).astype(np.int64)
    expect = (np.cumsum(width) - width) - (np.cumsum(total) - total)[prog]
    dst = recs[:, 1]
    i = _first((dst != expect) | (dst + width > n_slots[prog]))
    if i is not None:
        p, at = _where(prog, k, i)
        raise _fail(f"{at}: writes slot {int(dst[i])} (width {int(width[i])}); slots are "
                    f"numbered in record order (this one is {int(expect[i])}) below the "
                    f"program's {int(n_slots[prog[i]])}", p)
    base = np.zeros(len(n_slots) + 1, np.int64)
    np.cumsum(n_slots, out=base[1:])
    at0 = base[prog] + dst                       # each record's first slot, flat
    slot_t = np.full(int(base[-1]), 255, np.int64)
    slot_t[at0] = typ
    for i in np.flatnonzero(width > 1):          # the further results of rows that give several
        slot_t[at0[i] + 1:at0[i] + width[i]] = res_t[r[i], 1:width[i]]
    n_ops_r = np.where(kind == 2, n_ops[r], 0)
    for j in range(int(n_ops_r.max(initial=0))):
        m = n_ops_r > j
        op = recs[:, 4 + j]
        i = _first(m & (op >= dst))
        if i is not None:
            p, at = _where(prog, k, i)
            raise _fail(f"{at}: operand {j} reads slot {int(op[i])}, not written before this "
                        f"record (slot {int(dst[i])})", p)
        got = slot_t[np.where(m, at0 - dst + op, 0)]
        i = _first(m & (got != op_t[r, j]))
        if i is not None:
            p, at = _where(prog, k, i)
            raise _fail(f"{at}: operand {j} of row {int(r[i])} ({TABLE[int(r[i])].name}) is "
                        f"{_type_name(int(op_t[r[i], j]))} but slot {int(op[i])} holds "
                        f"{_type_name(int(got[i]))}", p)
    return slot_t, base


def _input_types(recs, prog, k, kind, typ, n_inputs) -> tuple[str | None, ...]:
    out: list[str | None] = [None] * n_inputs
    m = kind == 0
    idx, t = recs[m, 2], typ[m]
    for i in range(n_inputs):
        ts = np.unique(t[idx == i])
        if len(ts) > 1:
            rec = np.flatnonzero(m)[np.flatnonzero((idx == i) & (t != ts[0]))[0]]
            p, at = _where(prog, k, rec)
            raise _fail(f"{at}: reads input {i} as {_type_name(int(typ[rec]))}, another "
                        f"program as {_type_name(int(ts[0]))}: an input has one type", p)
        if len(ts):
            out[i] = VT.NAMES[int(ts[0])]
    return tuple(out)


def _check_outputs(w, o, n_slots, outputs, slot_t, base) -> np.ndarray:
    n_out = len(outputs)
    outs = w[o[:, None] + 4 + np.arange(n_out)].astype(np.int64) if n_out else \
        np.zeros((len(o), 0), np.int64)
    for j, name in enumerate(outputs):
        s = outs[:, j]
        given = s != _NO_SLOT
        p = _first(given & (s >= n_slots))
        if p is not None:
            raise _fail(f"program {p}: output {j} reads slot {int(s[p])}, past its "
                        f"{int(n_slots[p])} slots", p)
        got = slot_t[np.where(given, base[:-1] + s, 0)] if len(slot_t) else np.zeros(len(s))
        p = _first(given & (got != VT.BY_NAME[name].id))
        if p is not None:
            raise _fail(f"program {p}: output {j} is {name} but its slot {int(s[p])} holds "
                        f"{_type_name(int(got[p]))}", p)
    return outs


def _types_of(names: Sequence[Any], what: str) -> tuple[str, ...]:
    out = []
    for j, t in enumerate(names):
        if not isinstance(t, str) or t not in VT.BY_NAME or VT.BY_NAME[t].user:
            raise _fail(f"{what}[{j}] = {t!r}: a built-in value type name "
                        f"({', '.join(VT.NAMES[:len(VT.ROWS)])})", None)
        out.append(t)
    return tuple(out)


def _bound(max_slots: int | None) -> int:
    if max_slots is None:
        return MAX_SLOTS
    if isinstance(max_slots, bool) or not isinstance(max_slots, int) or \
            not 1 <= max_slots <= MAX_SLOTS:
        raise _fail(f"max_slots={max_slots!r}: an int from 1 to {MAX_SLOTS}", None)
    return max_slots


def prepare_tapes(tape_words: Any, tape_offsets: Any, n_inputs: int, outputs: Sequence[str],
                  *, rows: Sequence[int | str] | None = None, max_slots: int | None = None,
                  mode: str = "outputs", dtype: str = "f32", arch: Any = "sm_90") -> DeviceTapes:
    """Check tapes (``stackptx_tape_many``'s words and offsets) and write them in the
    kernel's layout; :class:`InterpretGpuError` names the first program at fault.

    ``rows``: the table rows (indices or names) the kernel covers (default: the rows the
    tapes use); ``max_slots``: the largest ``n_slots`` a program may have (default
    :data:`MAX_SLOTS`; the kernel's bound is the next power of two of the batch's largest).

    >>> dev = prepare_tapes(words, offsets, 2, ["f32"])       # doctest: +SKIP
    >>> [TABLE[i].name for i in dev.subset.rows]               # doctest: +SKIP
    ['mul.rn.f32']
    """
    outputs = _types_of(outputs, "outputs")
    number = normalize_arch(arch)[0]
    w, o, ends = _words(tape_words, tape_offsets)
    bound = _bound(max_slots)
    n_slots, n_rec, n_out = _headers(w, o, ends, len(outputs), bound)
    facts = _row_facts(len(TABLE), number)
    allowed = np.ones(len(TABLE), bool)
    fixed = None
    if rows is not None:
        fixed = tuple(dict.fromkeys(_row_index(x, number) for x in rows))
        allowed[:] = False
        allowed[list(fixed)] = True
    recs, prog, k = _records(w, o, n_rec, n_out)
    kind, r, width, typ = _check_records(recs, prog, k, n_slots, facts, allowed, n_inputs,
                                         number)
    slot_t, base = _check_slots(recs, prog, k, n_slots, kind, r, width, typ, facts)
    in_types = _input_types(recs, prog, k, kind, typ, n_inputs)
    outs = _check_outputs(w, o, n_slots, outputs, slot_t, base)
    used = fixed if fixed is not None else tuple(int(x) for x in np.unique(r[kind == 2]))
    types = {VT.NAMES[int(t)] for t in np.unique(slot_t) if t != 255}
    types |= {t for t in in_types if t} | set(outputs)
    if fixed is not None:
        for i in fixed:
            types |= {parse_type_spec(s)[0] for s in TABLE[i].operands + TABLE[i].results}
    top = int(n_slots.max()) if len(n_slots) else 1
    subset = Subset(used, slot_bits_of(types), max(MIN_SLOTS, 1 << max(0, top - 1).bit_length()),
                    mode, dtype)
    words, offsets = _layout(recs, prog, kind, r, n_slots, n_rec, outs, subset, facts[1])
    return DeviceTapes(words, offsets, len(o), subset, in_types, outputs)


def _row_index(x: int | str, arch_number: int) -> int:
    if isinstance(x, str):
        try:
            i = TABLE.index(x)
        except NumptxError as e:
            raise _fail(f"rows=: {e}", None) from None
    else:
        i = operator.index(x)
    why = supported(i, arch_number) if 0 <= i < len(TABLE) else f"no table row {i}"
    if why:
        raise _fail(f"rows=: row {x!r} does not run on the GPU interpreter: {why}", None)
    return i


def _layout(recs, prog, kind, r, n_slots, n_rec, outs, subset,
            n_ops) -> tuple[np.ndarray, np.ndarray]:
    """The device tape (see :mod:`.interpret_gpu_source`): header, outputs, records."""
    sb = subset.slot_bits // 8
    n_out = outs.shape[1]
    head = 8 + (n_out + 7) // 8 * 8
    size = head + RECORD_WORDS * n_rec
    offsets = np.zeros(len(n_rec), np.uint64)
    if len(n_rec):
        offsets[1:] = np.cumsum(size)[:-1]
    off = offsets.astype(np.int64)
    words = np.zeros(int(size.sum()) or 8, np.uint32)
    words[off] = n_slots
    words[off + 1] = n_rec
    words[off + 2] = n_out
    for j in range(n_out):
        words[off + 8 + j] = outs[:, j]
    case_of = np.zeros(len(TABLE), np.int64)
    case_of[list(subset.rows)] = FIRST_ROW_CASE + np.arange(len(subset.rows))
    first = np.cumsum(n_rec) - n_rec
    at = (off[prog] + head) // RECORD_WORDS + (np.arange(len(prog)) - first[prog])
    block = np.zeros((len(prog), RECORD_WORDS), np.uint32)
    block[:, 0] = np.where(kind == 2, case_of[r], np.where(kind == 0, CASE_INPUT, CASE_CONST))
    block[:, 1] = recs[:, 1] * sb
    block[:, 2] = recs[:, 2] * (kind != 2)
    block[:, 3] = recs[:, 3] * (kind == 1)
    n_ops_r = np.where(kind == 2, n_ops[r], 0)
    block[:, 4:] = np.where(np.arange(4) < n_ops_r[:, None], recs[:, 4:] * sb, 0)
    words.reshape(-1, RECORD_WORDS)[at] = block          # one 32-byte row per record
    return words, offsets


# ---- the kernel and its launch ----------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _template(subset: Subset, arch: str) -> CudaTemplate:
    return CudaTemplate(kernel_source(subset), entry=ENTRY[subset.mode], arch=arch,
                        name="numptx_interpret.cu")


def interp_variant(subset: Subset, arch: Any = "sm_90") -> Variant:
    """The built kernel of ``subset`` for ``arch``: NVRTC once per process, the cubin from the
    cubin cache after the first build (``interp_variant(s).cubin``, ``.build_info``)."""
    number, suffix = normalize_arch(arch)
    return _template(subset, f"sm_{number}{suffix}").inject()


def _arch() -> str | None:
    """The GPU's architecture, None without one (the tapes are checked for sm_90 then)."""
    from .fitness import device_arch, gpu_available
    return device_arch() if gpu_available() else None


def _no_gpu() -> LaunchError:
    return LaunchError("interpret_gpu: no CUDA GPU is available here (numba-cuda finds no GPU "
                       "or driver, or its simulator is on): interpret on the CPU")


def _n_rows(inputs: Sequence[Any], n_rows: int | None) -> int:
    cols = {len(a) for a in inputs if np.ndim(a)}
    lens = cols - {0}
    if n_rows is None:
        if cols and not lens:
            raise _fail("the input columns have no rows: the GPU kernel runs 1 row or more "
                        "(sp.interpret returns empty results for none)", None)
        if not lens:
            raise _fail("n_rows= is needed when every input is a scalar", None)
        n_rows = min(lens)
    if isinstance(n_rows, bool) or not isinstance(n_rows, (int, np.integer)) or \
            not 1 <= n_rows < 1 << 31:
        raise _fail(f"n_rows={n_rows!r}: an int from 1 to 2**31 - 1", None)
    return int(n_rows)


def _column(i: int, a: Any, t: str | None, n_rows: int, slot: type) -> np.ndarray:
    """Input ``i`` as ``n_rows`` slot words (its bits, zero-extended)."""
    if t is None:                          # no program reads it
        return np.zeros(n_rows, slot)
    dt = VT.BY_NAME[t].np
    if isinstance(a, (bool, int, float)) and not isinstance(a, np.generic):
        # a Python number is a value of the input's type as the CPU interpreter takes it
        # (numptx._program.interpret.columns): a float an integer type does not hold
        # exactly, or a number past the type's range, is refused; a float past f32's is inf
        try:
            with np.errstate(all="ignore"):
                v = np.asarray(a, dt) if t != "pred" else np.asarray(bool(a))
        except (OverflowError, TypeError, ValueError) as e:
            raise _fail(f"inputs[{i}] = {a!r} does not fit {t}: {e}", None) from None
        if isinstance(a, float) and dt.kind != "f" and not v == a:
            raise _fail(f"inputs[{i}] = {a!r} is no {t} value (a float that the type does "
                        f"not hold exactly)", None)
        a = v
    a = np.asarray(a)
    if a.dtype != dt:
        raise _fail(f"inputs[{i}] holds {a.dtype} values but the programs read it as {t} "
                    f"({dt}): convert it first", None)
    if a.ndim > 1 or (a.ndim == 1 and len(a) != n_rows):
        raise _fail(f"inputs[{i}] has shape {a.shape}; a column of {n_rows} rows or a scalar "
                    f"(ragged columns are refused)", None)
    bits = a.view(_UINT[8 * dt.itemsize]).astype(slot)
    return np.broadcast_to(bits, (n_rows,))


def _columns(dev: DeviceTapes, inputs: Sequence[Any], n_rows: int) -> np.ndarray:
    slot = _UINT[dev.subset.slot_bits]
    m = np.zeros((max(1, len(inputs)), n_rows), slot)
    for i, (a, t) in enumerate(zip(inputs, dev.input_types)):
        m[i] = _column(i, a, t, n_rows, slot)
    return m


@dataclass(frozen=True)
class GpuLaunch:
    """A checked batch ready to launch: the tapes, the built kernel and its arguments in
    parameter order but the last (``prog0``, the first program of a launch): host arrays for
    the pointer parameters, the first being the result (each output's slot words, or the
    zeroed sums). :meth:`run` copies them to the GPU, launches over (row blocks, programs),
    at most 65,535 programs a launch, and returns the result from the device."""
    tapes: DeviceTapes
    variant: Variant
    args: tuple
    n_rows: int
    block: int

    def run(self) -> np.ndarray:
        from numba import cuda
        first, *rest = self.args
        out = (cuda.device_array(first.shape, first.dtype) if self.tapes.subset.mode == "outputs"
               else cuda.to_device(first))
        dev = [out] + [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in rest]
        grid_x = (self.n_rows + self.block - 1) // self.block
        n = self.tapes.n_programs
        for p0 in range(0, n, 65535):
            self.variant[(grid_x, min(65535, n - p0)), self.block](*dev, p0)
        return out.copy_to_host()


def _check_block(block: Any) -> int:
    if isinstance(block, bool) or not isinstance(block, int) or block % 32 or \
            not 32 <= block <= 1024:
        raise _fail(f"block={block!r}: a multiple of 32 from 32 to 1024", None)
    return block


def plan_interpret(tape_words: Any, tape_offsets: Any, inputs: Sequence[Any],
                   outputs: Sequence[str], n_rows: int | None = None, *,
                   rows: Sequence[int | str] | None = None, max_slots: int | None = None,
                   block: int = 256, arch: Any = "sm_90") -> GpuLaunch:
    """Every check of :func:`interpret_gpu` and the kernel built for ``arch``; no GPU needed
    (``plan.run()`` launches)."""
    block = _check_block(block)
    inputs = list(inputs)
    n_rows = _n_rows(inputs, n_rows)
    dev = prepare_tapes(tape_words, tape_offsets, len(inputs), outputs, rows=rows,
                        max_slots=max_slots, arch=arch)
    cols = _columns(dev, inputs, n_rows)
    P, n_out = dev.n_programs, len(dev.output_types)
    out = np.zeros(max(1, n_out * P * n_rows), _UINT[dev.subset.slot_bits])
    return GpuLaunch(dev, interp_variant(dev.subset, arch),
                     (out, dev.words, dev.offsets, cols, n_rows, P), n_rows, block)


def interpret_gpu(tape_words: Any, tape_offsets: Any, inputs: Sequence[Any],
                  outputs: Sequence[str], n_rows: int | None = None, *,
                  rows: Sequence[int | str] | None = None, max_slots: int | None = None,
                  block: int = 256) -> list[np.ndarray]:
    """Run every program of the tapes over ``n_rows`` rows on the GPU: one ``(programs,
    n_rows)`` array per output type of ``outputs`` (see the module documentation). Every
    check runs before the GPU is asked for.

    >>> y, = interpret_gpu(tp.words, tp.offsets, [x0, x1], ["f32"])   # doctest: +SKIP
    """
    arch = _arch()
    plan = plan_interpret(tape_words, tape_offsets, inputs, outputs, n_rows, rows=rows,
                          max_slots=max_slots, block=block, arch=arch or "sm_90")
    if arch is None:
        raise _no_gpu()
    P, n_out, n = plan.tapes.n_programs, len(plan.tapes.output_types), plan.n_rows
    got = plan.run()[:n_out * P * n].reshape(n_out, P, n)
    return [_narrow(got[j], t) for j, t in enumerate(plan.tapes.output_types)]


def _narrow(bits: np.ndarray, t: str) -> np.ndarray:
    """Slot words as values of type ``t`` (the low bits: a value narrower than its slot is
    stored in the low bytes, the rest of the slot undefined; a pred in 32 bits, 0 or 1)."""
    row = VT.BY_NAME[t]
    if t == "pred":
        return bits.astype(np.uint32) != 0
    return bits.astype(_UINT[8 * row.np.itemsize]).view(row.np)


def plan_fitness(tape_words: Any, tape_offsets: Any, inputs: Sequence[Any], y: Any,
                 loss: str = "mse", *, dtype: str = "f32",
                 rows: Sequence[int | str] | None = None, max_slots: int | None = None,
                 block: int = 256, arch: Any = "sm_90") -> GpuLaunch:
    """Every check of :func:`fitness_sums_gpu` and the kernel built for ``arch``; no GPU
    needed (``plan.run()`` launches)."""
    block = _check_block(block)
    if loss not in LOSSES:
        raise _fail(f"loss={loss!r}: one of {', '.join(LOSSES)}", None)
    if dtype not in ("f32", "f64"):
        raise _fail(f"dtype={dtype!r}: 'f32' or 'f64'", None)
    yy = np.ascontiguousarray(y)
    if yy.ndim != 1 or yy.dtype != VT.BY_NAME[dtype].np or not len(yy):
        raise _fail(f"y: a non-empty 1-D array of {VT.BY_NAME[dtype].np}, got {yy.dtype} of "
                    f"shape {yy.shape}", None)
    inputs = list(inputs)
    n_rows = _n_rows(inputs, len(yy))
    if n_rows != len(yy):
        raise _fail(f"y has {len(yy)} rows but n_rows is {n_rows}", None)
    dev = prepare_tapes(tape_words, tape_offsets, len(inputs), [dtype], rows=rows,
                        max_slots=max_slots, mode=f"fitness-{loss}", dtype=dtype, arch=arch)
    cols = _columns(dev, inputs, n_rows)
    c = float(yy.astype(np.float64).mean())       # pearson's moments are taken about it
    acc = np.zeros((max(1, dev.n_programs), 4))
    return GpuLaunch(dev, interp_variant(dev.subset, arch),
                     (acc, dev.words, dev.offsets, cols, yy, n_rows, c), n_rows, block)


def fitness_sums_gpu(tape_words: Any, tape_offsets: Any, inputs: Sequence[Any], y: Any,
                     loss: str = "mse", *, dtype: str = "f32",
                     rows: Sequence[int | str] | None = None, max_slots: int | None = None,
                     block: int = 256) -> np.ndarray:
    """Per program, the sums the fitness kernel reduces for output 0 (of type ``dtype``)
    against the target ``y``: an array ``(programs, 4)`` of ``s0, s1, s2`` and the count of
    rows with a non-finite prediction or term (``loss``: mse, mae, rmse, pearson; pearson's
    moments are taken about the target's mean, as :func:`numptx.fitness` takes them).

    >>> sums = fitness_sums_gpu(words, offsets, [x0, x1], y, "mse")   # doctest: +SKIP
    >>> scores = scores_from_sums(sums, "mse", y)                     # doctest: +SKIP
    """
    arch = _arch()
    plan = plan_fitness(tape_words, tape_offsets, inputs, y, loss, dtype=dtype, rows=rows,
                        max_slots=max_slots, block=block, arch=arch or "sm_90")
    if arch is None:
        raise _no_gpu()
    return plan.run()[:plan.tapes.n_programs]


def scores_from_sums(sums: np.ndarray, loss: str, y: np.ndarray) -> np.ndarray:
    """The scores :func:`numptx.fitness` gives from :func:`fitness_sums_gpu`'s sums (its GPU
    path's formulas, :func:`numptx.jit.populations.fitness.losses_from_sums`): +inf where a row was not
    finite; mse and mae ``s0 / n``, rmse its root, pearson ``1 - r`` from the moments about the
    target's mean (+inf for a constant prediction)."""
    from .fitness import losses_from_sums
    return losses_from_sums(sums, y, loss)


class GpuInterpreter:
    """The GPU backend of ``sp.interpret(device="gpu")`` (``numptx._program.interpret``'s
    ``DeviceInterpreter``): ``register_device("gpu", GpuInterpreter())``."""

    def available(self) -> bool:
        from .fitness import gpu_available
        return gpu_available()

    def run(self, tp: Tapes, columns: list, n_rows: int) -> dict[str, np.ndarray]:
        """``tp``'s programs over ``columns`` (``interpret.Column`` s in the tapes' input
        order): ``{output name: (programs, n_rows)}``."""
        names, types = list(tp.outputs), list(tp.outputs.values())
        if len(tp) == 0 or n_rows == 0:
            if len(tp):                 # no rows refuses what rows refuse
                prepare_tapes(tp.words, tp.offsets, len(columns), types)
            return {n: np.zeros((len(tp), n_rows), VT.BY_NAME[t].np) for n, t in tp.outputs.items()}
        inputs = [c.data[0] if c.scalar else c.data for c in columns]
        got = interpret_gpu(tp.words, tp.offsets, inputs, types, n_rows)
        return dict(zip(names, got))


def fitness_losses(tp: Tapes, cols: list, y: np.ndarray, loss: str, dtype: str,
                   rows: Sequence[str] | None = None) -> np.ndarray:
    """nx.fitness's losses of ``tp``'s programs (output 0) on ``cols`` (``interpret.Column`` s
    in the tapes' input order) against ``y``, by the fitness kernel of the interpreter;
    ``rows`` the kernel's rows (a search's genes: one kernel for every batch), or the batch's
    own when one of its programs uses another."""
    if len(tp) == 0:
        return np.empty(0)
    from .fitness import device_arch
    inputs = [c.data[0] if c.scalar else c.data for c in cols]
    plan = plan_fitness_rows(tp, inputs, y, loss, dtype, rows, device_arch())
    return scores_from_sums(plan.run()[:len(tp)], loss, y)


def plan_fitness_rows(tp: Tapes, inputs: list, y: np.ndarray, loss: str, dtype: str,
                      rows: Sequence[str] | None, arch: Any) -> GpuLaunch:
    """:func:`plan_fitness` with the kernel's ``rows`` where they cover the batch, else the
    batch's own rows (a program with a row the others lack: its kernel, not the whole batch
    to the compiled path)."""
    if rows is not None:
        try:
            return plan_fitness(tp.words, tp.offsets, inputs, y, loss, dtype=dtype, rows=rows,
                                arch=arch)
        except InterpretGpuError as e:
            if e.row is None:           # not a row outside rows=: the batch's own fault
                raise
    return plan_fitness(tp.words, tp.offsets, inputs, y, loss, dtype=dtype, arch=arch)


register_gpu_scorer(fitness_losses)
