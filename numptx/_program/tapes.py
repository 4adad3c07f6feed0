"""Tapes: what a Stack PTX or AST PTX program computes, as records an interpreter runs (the
C core's ``stackptx_tape_many`` / ``astptx_tape``; the format is TAPES in
``native/stack_ptx.h``)::

    from numptx import stack_ptx as sp
    tp = sp.tapes([[sp.input("x"), sp.const(2.0, "f32"), sp.instr("mul.rn.f32")]],
                  {"x": "f32"}, {"y": "f32"})
    tp.tape(0)         # uint32 words: header, output slots, records of 8 words

A tape is the DAG of the stub the program compiles to: the same execution as ``sp.compile``
(meta ops, no-ops, limits, dialects, unsatisfied outputs), only what reaches an output, in the
stub's order. The interpreters (:mod:`numptx._program.interpret` on the CPU,
``numptx.jit.populations.interpret_gpu`` on a GPU) run them.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._cores import usable_cores
from .._native import ffi, lib
from ..instructions import TYPES
from .compile import _io_for, _limits_c, _routines, _unknown_input, batch_words
from .ctable import _status_name, _table
from .ops import DIALECTS, ProgramError, dialect_id
from .stub import Limits

__all__ = ["InterpretError", "Tapes", "tapes", "tape_lowered", "records", "reads_input",
           "subset", "executor", "as_list", "input_types"]

_PARALLEL_TAPES = 4096        # programs below which one thread writes the tapes


class InterpretError(ProgramError):
    """A batch the interpreter cannot run: the message names the argument or the program
    index (``.program``) and, for an instruction, the table row (``.row``)."""

    def __init__(self, message: str, *, program: int | None = None, row: str | None = None):
        self.program, self.row = program, row
        super().__init__(message)



@dataclass(frozen=True)
class Tapes:
    """The tapes of a batch: program ``k``'s is ``words[offsets[k]:offsets[k + 1]]`` (uint32;
    the format is native/stack_ptx.h's TAPES). ``inputs`` / ``outputs`` map the program's input
    and output names to value types, in the order tapes index them."""

    words: np.ndarray
    offsets: np.ndarray
    inputs: dict
    outputs: dict
    dialect: str

    def __post_init__(self):
        # the C interpreter reads words and offsets through raw pointers and trusts offsets to
        # lie inside words: a hand-made Tapes is checked here (integer arrays are converted)
        w, o = self.words, self.offsets
        if not isinstance(w, np.ndarray) or w.ndim != 1 or w.dtype.kind not in "iu":
            raise InterpretError(f"Tapes.words: a 1-D uint32 array, not "
                                 f"{getattr(w, 'dtype', type(w).__name__)} "
                                 f"{getattr(w, 'shape', '')}")
        o = np.asarray(o)
        if o.ndim != 1 or len(o) < 1 or o.dtype.kind not in "iu":
            raise InterpretError(f"Tapes.offsets: a 1-D integer array of programs + 1 "
                                 f"offsets, not {o.dtype} {o.shape}")
        if w.dtype != np.uint32 or not w.flags.c_contiguous or not w.flags.aligned:
            if w.dtype != np.uint32 and len(w) and (w.min() < 0 or w.max() > 0xFFFFFFFF):
                raise InterpretError("Tapes.words: values past uint32")
            w = np.require(w, np.uint32, ("C", "A"))
        spans = np.diff(o.astype(np.int64))
        if len(o) and (int(o.min()) < 0 or int(o[-1]) > len(w) or
                       (len(spans) and int(spans.min()) < 4)):
            raise InterpretError(f"Tapes.offsets: each program's tape is words[offsets[k]:"
                                 f"offsets[k + 1]], at least its 4-word header, inside the "
                                 f"{len(w)} words")
        if o.dtype != np.uint64 or not o.flags.c_contiguous or not o.flags.aligned:
            o = np.require(o, np.uint64, ("C", "A"))
        object.__setattr__(self, "words", w)
        object.__setattr__(self, "offsets", o)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def tape(self, k: int) -> np.ndarray:
        return self.words[int(self.offsets[k]):int(self.offsets[k + 1])]

    @property
    def n_slots(self) -> np.ndarray:
        """Each program's slot count (header word 0)."""
        return self.words[self.offsets[:-1].astype(np.int64)]

    @property
    def flags(self) -> np.ndarray:
        """Each program's diag flags (header word 3: the limits it hit, ...)."""
        return self.words[self.offsets[:-1].astype(np.int64) + 3]


def tapes(programs: Iterable[Sequence[Any] | np.ndarray], inputs: Mapping[str, str] | None = None,
          outputs: Mapping[str, str] | None = None, *, site: Any = None, routines: Sequence = (),
          limits: Limits | None = None, dialect: str | None = None) -> Tapes:
    """Compile a batch to tapes (one C call, GIL released): what ``sp.compile_many`` takes,
    with the DAGs as records instead of stub text."""
    io = _io_for(inputs, outputs, site)
    programs = as_list(programs, "tapes")
    d = None if dialect is None else dialect_id(dialect, "tapes")
    ins = input_types(io)
    outs = dict(zip(_out_names(outputs, site, io), io.out_types.values()))
    if not programs:
        return Tapes(np.zeros(0, np.uint32), np.zeros(1, np.uint64), ins, outs,
                     DIALECTS[d or 0])
    allw, lens, d, routines = batch_words(programs, io, routines, d, "tapes")
    n = len(programs)
    lim_key, lim = _limits_c(limits, d)
    offsets = np.zeros(n + 1, dtype=np.uint32)
    np.cumsum(lens, out=offsets[1:])
    rts, rkeep = _routines(routines, io)
    span = _Span(io, lim, io.workspace_size(lim_key, lim), allw, offsets, rts)
    cores = usable_cores()
    k = 1 if cores == 1 or n < _PARALLEL_TAPES else min(4 * cores, n // 512)
    cuts = [n * j // k for j in range(k + 1)]
    spans = list(zip(cuts, cuts[1:]))
    got = [span(*spans[0])] if k == 1 else list(executor().map(lambda c: span(*c), spans))
    del rkeep
    flags = np.concatenate([f for _, _, f in got])
    bad = np.flatnonzero(flags & lib.STACKPTX_D_UNKNOWN_INPUT)
    if len(bad):
        i = int(bad[0])
        e = _unknown_input(programs[i], io, f"tapes: program {i}", routines=routines)
        raise InterpretError(str(e), program=i) from None
    if k == 1:
        words, out_off = got[0][0], got[0][1]
    else:
        words = np.concatenate([w for w, _, _ in got])
        out_off = np.zeros(n + 1, dtype=np.uint64)
        base = 0
        for (lo, hi), (w, off, _) in zip(spans, got):
            out_off[lo + 1:hi + 1] = off[1:] + np.uint64(base)
            base += len(w)
    return Tapes(words, out_off, ins, outs, DIALECTS[d])


class _Span:
    """Tapes of programs [lo, hi) of a batch, one C call (GIL released) with a workspace of
    its own: (words, offsets from 0, diag flags)."""

    def __init__(self, io, lim, ws_size: int, allw: np.ndarray, offsets: np.ndarray, rts):
        self.io, self.lim, self.ws_size, self.rts = io, lim, ws_size, rts
        self.allw, self.offsets, self.table = allw, offsets, _table()
        self.wptr = ffi.from_buffer("uint64_t[]", allw) if len(allw) else ffi.NULL

    def __call__(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = hi - lo
        ws = ffi.new("char[]", self.ws_size)
        diags = ffi.new("stackptx_diag[]", max(1, n))
        n_done = ffi.new("uint32_t *")
        out_off = np.zeros(n + 1, dtype=np.uint64)
        cap = max(1 << 12, 64 * n + int(self.offsets[hi] - self.offsets[lo]) * 24)
        parts, done = [], 0
        while done < n:
            buf = np.empty(cap, dtype=np.uint32)
            base = int(out_off[done])
            st = lib.stackptx_tape_many(
                self.table, self.io.c, self.lim, self.wptr,
                ffi.from_buffer("uint32_t[]", self.offsets[lo + done:]), n - done, self.rts, ws,
                len(ws), ffi.from_buffer("uint32_t[]", buf), cap,
                ffi.from_buffer("uint64_t[]", out_off[done:]), diags + done, n_done)
            k = n_done[0]
            parts.append(buf[:int(out_off[done + k]) - base])
            done += k
            if st == lib.STACKPTX_OK:
                break
            if st != lib.STACKPTX_ERR_BUFFER_TOO_SMALL:
                raise InterpretError(f"tapes: the C core failed at program {lo + done}: "
                                     f"{_status_name(st)}", program=lo + done)
            cap *= 2 if k else 4
        size = ffi.sizeof("stackptx_diag")
        flags = np.frombuffer(ffi.buffer(diags, n * size), dtype=np.uint32)[::size // 4].copy()
        return (np.concatenate(parts) if len(parts) > 1 else parts[0]), out_off, flags


def as_list(programs, what: str) -> list:
    if isinstance(programs, list):
        return programs
    if isinstance(programs, (str, bytes, Mapping)) or not isinstance(programs, Iterable):
        raise InterpretError(f"{what}: expected a list of programs (op lists or uint64 arrays), "
                             f"not {type(programs).__name__}")
    return list(programs)


def input_types(io) -> dict[str, str]:
    """Each program input name -> its value type, in the order tapes index inputs. (Not
    ``io.in_names``: that maps registers, and two inputs on one register, a mod variable's
    pass-through ``name\\x00k``, are one entry there.)"""
    return {n: TYPES[io.c.input_types[i]] for n, i in io.index.items()}


def _out_names(outputs, site, io) -> list[str]:
    """The names results are returned under: the outputs' keys, or the site's variables."""
    return list(outputs or {}) if site is None else [v.name for v in site.outputs]


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(usable_cores(), thread_name_prefix="numptx-interp")
        return _pool



# ---- what a batch holds -------------------------------------------------------------------------
def records(tp: Tapes) -> tuple[np.ndarray, np.ndarray]:
    """(program, start): for every record of every tape, its program and the index of its
    first word in ``tp.words`` (records in order). Found once per ``Tapes`` (kept on it: a
    batch is checked for refused rows and for inputs it reads from the same index)."""
    hit = tp.__dict__.get("_records")
    if hit is None:
        hit = _records(tp)
        tp.__dict__["_records"] = hit          # (frozen fields: a cache beside them)
    return hit


def _records(tp: Tapes) -> tuple[np.ndarray, np.ndarray]:
    heads = tp.offsets[:-1].astype(np.int64)
    nrec = tp.words[heads + 1].astype(np.int64)
    starts = heads + 4 + tp.words[heads + 2].astype(np.int64)
    bad = np.flatnonzero(starts + 8 * nrec != tp.offsets[1:].astype(np.int64))
    if len(bad):                # the header's counts do not fill its span: nothing to walk
        k = int(bad[0])
        raise InterpretError(f"tapes: program {k}: a malformed tape (its header's output and "
                             f"record counts do not fill its {int(tp.offsets[k + 1]) - heads[k]}"
                             f" words)", program=k)
    total = int(nrec.sum())
    if total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    first = np.cumsum(nrec) - nrec
    within = np.arange(total) - np.repeat(first, nrec)
    return np.repeat(np.arange(len(tp)), nrec), np.repeat(starts, nrec) + 8 * within


def reads_input(tp: Tapes, index: int) -> np.ndarray:
    """Per program: whether its tape reads input ``index``."""
    prog, at = records(tp)
    hit = ((tp.words[at] & 0xFF) == 0) & (tp.words[at + 2] == index)
    out = np.zeros(len(tp), dtype=bool)
    out[prog[hit]] = True
    return out


def subset(tp: Tapes, ks: np.ndarray) -> Tapes:
    """The tapes of programs ``ks`` (a contiguous run shares ``tp``'s words)."""
    ks = np.asarray(ks, dtype=np.int64)
    if len(ks) and int(ks[-1]) - int(ks[0]) == len(ks) - 1 and \
            bool(np.all(np.diff(ks) == 1)):
        lo, hi = int(ks[0]), int(ks[-1]) + 1
        return Tapes(tp.words, tp.offsets[lo:hi + 1], tp.inputs, tp.outputs, tp.dialect)
    parts = [tp.tape(int(k)) for k in ks]
    offsets = np.zeros(len(parts) + 1, dtype=np.uint64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    words = np.concatenate(parts) if parts else np.zeros(0, np.uint32)
    return Tapes(words, offsets, tp.inputs, tp.outputs, tp.dialect)


# ---- one program, one row at a time (the simulator's site calls) --------------------------------
def tape_lowered(mode: str, words: bytes, input_names: Sequence[str], rename: Mapping | None,
                 *, site: Any, routines: Sequence[bytes] = (), limits: Limits | None = None
                 ) -> Tapes:
    """The tape of what ``compile_lowered(mode, words, input_names, rename, None, None,
    site=site, routines=routines, strict=True, limits=limits)`` compiles (the DSL's stub at a
    site): the same io, the same words."""
    from .compile import _io_ordered
    if rename:
        input_names = tuple([rename.get(n, n) for n in input_names])
    io = _io_ordered(None, None, site, tuple(input_names))
    lim_key, lim = _limits_c(limits, 0)
    ws = ffi.new("char[]", io.workspace_size(lim_key, lim))
    rts, rkeep = _routines(routines, io) if routines else (ffi.NULL, None)
    cw = ffi.from_buffer("uint64_t[]", words)
    n_words = len(words) >> 3
    cap = 64 + n_words * 24
    out_len = ffi.new("size_t *")
    diag = ffi.new("stackptx_diag *")
    for _ in range(16):
        buf = np.empty(cap, dtype=np.uint32)
        if mode == "stack":
            offs = np.array([0, n_words], dtype=np.uint32)
            out_off = np.zeros(2, dtype=np.uint64)
            n_done = ffi.new("uint32_t *")
            st = lib.stackptx_tape_many(_table(), io.c, lim, cw, ffi.from_buffer("uint32_t[]", offs),
                                        1, rts, ws, len(ws), ffi.from_buffer("uint32_t[]", buf),
                                        cap, ffi.from_buffer("uint64_t[]", out_off), diag, n_done)
            out_len[0] = int(out_off[1])     # (0 when it did not fit: no size reported)
        else:
            st = lib.astptx_tape(_table(), io.c, lim, cw, n_words, rts, ws, len(ws),
                                 ffi.from_buffer("uint32_t[]", buf), cap, out_len, diag)
        if st != lib.STACKPTX_ERR_BUFFER_TOO_SMALL:
            break
        cap = max(int(out_len[0]) + 64, 4 * cap)
    del rkeep
    if st != lib.STACKPTX_OK:
        raise InterpretError(f"tape: the C core refused the program: {_status_name(st)}")
    return Tapes(buf[:int(out_len[0])].copy(), np.array([0, int(out_len[0])], np.uint64),
                 input_types(io),
                 dict(zip([v.name for v in site.outputs], io.out_types.values())), "numptx")
