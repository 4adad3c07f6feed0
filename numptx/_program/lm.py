"""Levenberg–Marquardt fits of tapes' float constants in C (``native/lm.h``): every round of a
fit in one call per thread, the GIL released, the 1 + k runs of a program (its trial point and
its k perturbations) as lanes of one loaded tape. What ``numptx.search.least_squares`` calls::

    sse = fit_tapes(tp, order, n_rows, y, FitArrays(param_off, theta, free, wide, mark_off,
                    mark_word, mark_param), FitOptions(steps=12, scaling=True))
    # theta (float64, flat) now holds each program's best point; sse[p]: its loss (+inf: none)

Parameter j of program p is ``theta[param_off[p] + j]``; the records holding it are the CONST
records at words ``mark_word[mark_off[p]:mark_off[p + 1]]`` of p's tape (offsets within the
tape) whose parameter is ``mark_param[...]``. The semantics, round by round, are lm.h's header.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import valuetypes as VT
from .._cores import usable_cores
from .._native import ffi, lib
from .interpret import Column, InterpretError, _failure, _the_ops
from .tapes import Tapes, executor

__all__ = ["FitArrays", "FitOptions", "fit_tapes", "fits_natively", "WORKSPACE_BUDGET"]

_BLOCK = 256                 # rows x lanes per interpreter block
_PARALLEL_WORK = 1 << 16     # record-rows per round below which one thread fits the batch
#: bytes of workspace the threads of one fit hold at once, at most (one thread at least runs)
WORKSPACE_BUDGET = 1 << 30


@dataclass(frozen=True)
class FitArrays:
    """The parameters and marks of a batch (flat arrays, per-program offsets; ``theta`` is
    written in place)."""

    param_off: np.ndarray   # uint32 (programs + 1)
    theta: np.ndarray       # float64
    free: np.ndarray        # uint8: 1 where the parameter moves
    wide: np.ndarray        # uint8: 1 for an f64 constant
    mark_off: np.ndarray    # uint32 (programs + 1)
    mark_word: np.ndarray   # uint32: a CONST record's first word, within its tape
    mark_param: np.ndarray  # uint32


@dataclass(frozen=True)
class FitOptions:
    """The fit's rounds and loss (lm.h's header)."""

    steps: int
    scaling: bool
    positive: bool = False
    flat: bool = False
    flat_rel: float = 1e-12
    lambda0: float = 1e-3
    root_eps32: float = float(np.sqrt(np.finfo(np.float32).eps))
    root_eps64: float = float(np.sqrt(np.finfo(np.float64).eps))


def fits_natively(tp: Tapes, n_rows: int) -> bool:
    """Whether :func:`fit_tapes` takes these tapes (a float first output, rows, few outputs)."""
    outs = list(tp.outputs.values())
    return (n_rows >= 1 and 1 <= len(outs) <= lib.NXLM_MAX_OUTPUTS
            and outs[0] in ("f32", "f64") and all(t in VT.BY_NAME for t in outs))


def _unwritten(tp: Tapes, cols: list[Column], n_rows: int) -> np.ndarray | None:
    """Output 0's column where a tape leaves it unwritten: the input of its name and type (the
    stub's register keeps it, as run_cpu says), else None (it reads 0)."""
    name, t = next(iter(tp.outputs.items()))
    for i, n in enumerate(tp.inputs):
        if n.split("\x00")[0] == name and cols[i].type == t:
            d = cols[i].data
            return np.ascontiguousarray(np.broadcast_to(d, (n_rows,)) if cols[i].scalar else d)
    return None


def fit_tapes(tp: Tapes, cols: list[Column], n_rows: int, y: np.ndarray, arrays: FitArrays,
              opt: FitOptions, *, threads: int | None = None,
              runs: np.ndarray | None = None) -> np.ndarray:
    """Fit every program of ``tp`` (columns in the tapes' input order); returns the best
    loss per program and leaves the best points in ``arrays.theta``. ``runs`` (a writable
    uint64 array, one per program): set to the runs over the rows each fit made (a round runs
    its trial point; the k perturbed lanes, its Jacobian, only when the trial is taken and
    another round follows). A tape the C core refuses: an InterpretError naming the program,
    ``arrays.theta`` and ``runs`` left as given."""
    y64 = _check_call(tp, cols, n_rows, y, arrays, opt, threads)
    n = len(tp)
    if runs is not None and not (isinstance(runs, np.ndarray) and runs.dtype == np.uint64
                                 and runs.shape == (n,) and runs.flags.c_contiguous
                                 and runs.flags.writeable):
        raise InterpretError(f"fit_tapes: runs: give a writable contiguous uint64 array of "
                             f"{n} (one per program), or None")
    sse = np.full(n, np.inf)
    if n == 0:
        return sse
    ops = _the_ops()
    keep = []
    col_c = ffi.new("nxi_column[]", max(1, len(cols)))
    for i, c in enumerate(cols):
        col_c[i].data = ffi.cast("void *", c.data.ctypes.data)
        col_c[i].type, col_c[i].scalar = VT.BY_NAME[c.type].id, 1 if c.scalar else 0
    out_types = np.array([VT.BY_NAME[t].id for t in tp.outputs.values()], np.uint32)
    unw = _unwritten(tp, cols, n_rows)
    d = ffi.new("nxlm_data *")
    d.row_op = ffi.cast("uint16_t *", ops.row_op.ctypes.data)
    d.n_rows_table = len(ops.row_op)
    d.op_types = ffi.cast("uint8_t *", ops.op_types.ctypes.data)
    d.type_size = ffi.cast("uint8_t *", ops.type_size.ctypes.data)
    d.n_types = len(ops.type_size)
    setattr(d, "in", col_c)              # (a C field named like a Python keyword)
    keep += [col_c, out_types, y64, unw]
    d.n_inputs = len(cols)
    d.out_types = ffi.cast("uint32_t *", out_types.ctypes.data)
    d.n_outputs = len(out_types)
    d.unwritten = ffi.NULL if unw is None else ffi.cast("void *", unw.ctypes.data)
    d.y = ffi.cast("double *", y64.ctypes.data)
    d.n_rows, d.block = n_rows, _BLOCK
    d.f32_type, d.f64_type = VT.BY_NAME["f32"].id, VT.BY_NAME["f64"].id
    o = ffi.new("nxlm_options *", (opt.steps, bool(opt.scaling), bool(opt.positive),
                                   bool(opt.flat), opt.flat_rel, opt.lambda0,
                                   opt.root_eps32, opt.root_eps64))
    job = _Job(tp, d, o, arrays, sse, keep, runs)
    cores = threads or usable_cores()
    spans = _spans(tp, arrays, n_rows, cores)
    given = arrays.theta.copy()
    given_runs = None if runs is None else runs.copy()
    if len(spans) == 1:
        failed = [job(*spans[0])]
    else:        # as many threads as cores, fewer when their workspaces would pass the budget
        workers = max(1, min(cores, len(spans), WORKSPACE_BUDGET // max(1, job.need(0, n))))
        failed = _spread(job, spans, workers)
    failed = [f for f in failed if f is not None]
    if failed:            # nothing half-done: the programs fitted before the refusal are undone
        arrays.theta[:] = given
        if given_runs is not None:
            runs[:] = given_runs
        raise min(failed, key=lambda e: -1 if e.program is None else e.program)
    return sse


_UINT32_MAX = (1 << 32) - 1


def _check_call(tp: Tapes, cols: list[Column], n_rows: int, y: np.ndarray, arrays: FitArrays,
                opt: FitOptions, threads: int | None) -> np.ndarray:
    """:func:`fit_tapes`'s arguments checked (the C core trusts lengths, dtypes and layouts);
    returns ``y`` as contiguous float64. A bad one: an InterpretError naming it."""
    where = "fit_tapes"
    if not isinstance(tp, Tapes):
        raise InterpretError(f"{where}: tp: a {type(tp).__name__}; give the batch's Tapes")
    if isinstance(n_rows, bool) or not isinstance(n_rows, (int, np.integer)) or \
            not fits_natively(tp, int(n_rows)):
        raise InterpretError(f"{where}: the tapes' first output must be f32 or f64, with rows "
                             f"(n_rows={n_rows!r})")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise InterpretError(f"{where}: threads={threads!r}: give a positive int (or None: "
                             f"every core)")
    if not isinstance(arrays, FitArrays):
        raise InterpretError(f"{where}: arrays: a {type(arrays).__name__}; give a FitArrays")
    _check_options(opt)
    _check(arrays, len(tp))
    try:
        y64 = np.ascontiguousarray(y, np.float64)
    except (TypeError, ValueError) as e:
        raise InterpretError(f"{where}: y: give one float target per row ({e})") from None
    if y64.shape != (n_rows,):
        raise InterpretError(f"{where}: y of shape {y64.shape}: give one target per row "
                             f"({n_rows})")
    _check_columns(tp, cols, int(n_rows))
    return y64


def _check_options(opt: FitOptions) -> None:
    """Every field of ``opt`` of its kind and range (lm.h reads them as uint32 and double)."""
    if not isinstance(opt, FitOptions):
        raise InterpretError(f"fit_tapes: opt: a {type(opt).__name__}; give a FitOptions")
    s = opt.steps
    if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 0 <= s <= _UINT32_MAX:
        raise InterpretError(f"fit_tapes: opt.steps={s!r}: give an int of rounds, 0 to "
                             f"{_UINT32_MAX:,}")
    for name in ("scaling", "positive", "flat"):
        if not isinstance(getattr(opt, name), (bool, np.bool_)):
            raise InterpretError(f"fit_tapes: opt.{name}={getattr(opt, name)!r}: give True or "
                                 f"False")
    for name, low, strict in (("flat_rel", 0.0, False), ("lambda0", 0.0, False),
                              ("root_eps32", 0.0, True), ("root_eps64", 0.0, True)):
        v = getattr(opt, name)
        ok = isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool) \
            and np.isfinite(v) and (v > low if strict else v >= low)
        if not ok:
            raise InterpretError(f"fit_tapes: opt.{name}={v!r}: give a finite float "
                                 f"{'>' if strict else '>='} {low}")


def _check_columns(tp: Tapes, cols: Any, n_rows: int) -> None:
    """One Column per input of ``tp``, each array of its type's dtype, contiguous and aligned
    (the C core reads n_rows typed elements from its first byte), n_rows long or one value."""
    if not isinstance(cols, (list, tuple)) or len(cols) != len(tp.inputs):
        raise InterpretError(f"fit_tapes: cols: one column of {n_rows} rows per input of the "
                             f"tapes ({list(tp.inputs)})")
    for i, c in enumerate(cols):
        if not isinstance(c, Column) or c.type not in VT.BY_NAME:
            raise InterpretError(f"fit_tapes: cols[{i}]: a {type(c).__name__}; give a Column "
                                 f"of a value type (numptx._program.interpret.columns)")
        dt, d = VT.BY_NAME[c.type].np, c.data
        where = f"fit_tapes: cols[{i}] ({c.name!r})"
        if not isinstance(d, np.ndarray) or not (d.flags.c_contiguous and d.flags.aligned):
            raise InterpretError(f"{where}: give a contiguous, aligned NumPy array "
                                 f"(np.ascontiguousarray), not a {type(d).__name__}"
                                 + ("" if not isinstance(d, np.ndarray) else " view"))
        if d.dtype != dt:
            raise InterpretError(f"{where}: a {d.dtype} array for a {c.type} input: give "
                                 f"{dt.name}")
        if d.shape != ((1,) if c.scalar else (n_rows,)):
            raise InterpretError(f"{where}: one column of {n_rows} rows per input of the "
                                 f"tapes ({list(tp.inputs)}); {c.name!r} is not")


_DTYPES = {"param_off": np.uint32, "theta": np.float64, "free": np.uint8, "wide": np.uint8,
           "mark_off": np.uint32, "mark_word": np.uint32, "mark_param": np.uint32}


def _check(a: FitArrays, n: int) -> None:
    """Every array of ``a`` of its dtype, 1-D and contiguous, the offsets rising from 0 to the
    lengths (the C core cannot see lengths): else an InterpretError naming the field."""
    for name, dt in _DTYPES.items():
        v = getattr(a, name)
        if not isinstance(v, np.ndarray) or v.dtype != dt or v.ndim != 1 or \
                not v.flags.c_contiguous or (name == "theta" and not v.flags.writeable):
            raise InterpretError(f"fit_tapes: arrays.{name}: give a contiguous 1-D "
                                 f"{np.dtype(dt).name} array")
    for off, ends in (("param_off", ("theta", "free", "wide")),
                      ("mark_off", ("mark_word", "mark_param"))):
        o = getattr(a, off).astype(np.int64)
        if len(o) != n + 1 or o[0] != 0 or (np.diff(o) < 0).any():
            raise InterpretError(f"fit_tapes: arrays.{off}: {n + 1} rising offsets from 0 "
                                 f"(one more than the {n} programs)")
        for e in ends:
            if len(getattr(a, e)) != o[-1]:
                raise InterpretError(f"fit_tapes: arrays.{e} has {len(getattr(a, e))} "
                                     f"entries, arrays.{off} ends at {o[-1]}")


def _spans(tp: Tapes, arrays: FitArrays, n_rows: int, cores: int) -> list[tuple[int, int]]:
    """Programs [p0, p1) per C call: one span on one core or little work, else about
    4 per core, of equal records x lanes."""
    n = len(tp)
    recs = tp.words[tp.offsets[:-1].astype(np.int64) + 1].astype(np.float64)
    po = arrays.param_off.astype(np.int64)
    cum = np.concatenate([[0], np.cumsum(arrays.free.astype(np.int64))])
    lanes = 1 + cum[po[1:]] - cum[po[:-1]]
    work = recs * lanes
    if cores == 1 or float(work.sum()) * n_rows < _PARALLEL_WORK:
        return [(0, n)]
    k = min(n, 4 * cores)
    cuts = np.searchsorted(np.cumsum(work), np.linspace(0, float(work.sum()), k + 1)[1:-1])
    bounds = sorted({0, n, *[int(c) + 1 for c in cuts if 0 < int(c) + 1 < n]})
    return list(zip(bounds, bounds[1:]))


def _spread(job: "_Job", spans: list, workers: int) -> list:
    """``job(*span)`` for every span, by ``workers`` threads of the pool, each taking the
    next span when done."""
    results: list = [None] * len(spans)
    todo = iter(range(len(spans)))
    lock = threading.Lock()

    def work(_):
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            results[i] = job(*spans[i])

    list(executor().map(work, range(workers)))
    return results


class _Job:
    """One C call over programs [p0, p1): its own workspace, the shared arrays."""

    def __init__(self, tp, d, o, a: FitArrays, sse, keep, runs=None):
        self.tp, self.d, self.o, self.a, self.sse, self.keep = tp, d, o, a, sse, keep
        self.runs = ffi.NULL if runs is None else ffi.cast("uint64_t *", runs.ctypes.data)
        heads = tp.offsets[:-1].astype(np.int64)
        self.slots, self.recs = tp.words[heads], tp.words[heads + 1]
        po = a.param_off.astype(np.int64)
        cum = np.concatenate([[0], np.cumsum(a.free.astype(np.int64))])
        self.K, self.nf = po[1:] - po[:-1], cum[po[1:]] - cum[po[:-1]]
        self.c = {name: ffi.cast(ct, arr.ctypes.data) for name, ct, arr in (
            ("words", "uint32_t *", tp.words), ("offsets", "uint64_t *", tp.offsets),
            ("param_off", "uint32_t *", a.param_off), ("theta", "double *", a.theta),
            ("free", "uint8_t *", a.free), ("wide", "uint8_t *", a.wide),
            ("mark_off", "uint32_t *", a.mark_off), ("mark_word", "uint32_t *", a.mark_word),
            ("mark_param", "uint32_t *", a.mark_param), ("sse", "double *", sse))}

    def need(self, p0: int, p1: int) -> int:
        """Bytes of workspace programs [p0, p1) take (0: too large for the C core)."""
        return lib.nxlm_workspace_size(int(self.slots[p0:p1].max()), int(self.recs[p0:p1].max()),
                                       int(self.K[p0:p1].max()), int(self.nf[p0:p1].max()),
                                       self.d.n_inputs, self.d.n_rows, self.d.block)

    def __call__(self, p0: int, p1: int) -> InterpretError | None:
        c, d = self.c, self.d
        need = self.need(p0, p1)
        if need == 0:
            return InterpretError(f"fit_tapes: programs {p0}..{p1 - 1}: too large a fit "
                                  f"(parameters, records or rows) for the C core", program=p0)
        ws = np.empty(need, np.uint8)
        fail = ffi.new("nxi_fail *")
        st = lib.nxlm_fit(d, self.o, c["words"], c["offsets"] + p0, p1 - p0, c["param_off"] + p0,
                          c["theta"], c["free"], c["wide"], c["mark_off"] + p0, c["mark_word"],
                          c["mark_param"], c["sse"] + p0,
                          self.runs if self.runs == ffi.NULL else self.runs + p0,
                          ffi.cast("void *", ws.ctypes.data),
                          len(ws), fail)
        if st == lib.NXI_OK:
            return None
        p = None if fail.program == 0xFFFFFFFF else p0 + fail.program
        if st == lib.NXI_ERR_ARGUMENT and p is not None and fail.record != 0xFFFFFFFF:
            return InterpretError(f"fit_tapes: program {p}: the mark at record {fail.record} "
                                  f"holds a constant of another width than its parameter's "
                                  f"(arrays.wide: 1 for an f64 CONST record, 0 for f32)",
                                  program=p)
        return _failure(st, p, fail.row, _the_ops())
