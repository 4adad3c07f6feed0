"""Run Stack PTX programs without assembling them: tapes from the C core, then the batch
interpreter of ``native/interp.h`` over columns of data (``sp.interpret``)::

    import numpy as np
    from numptx import stack_ptx as sp
    X = np.random.default_rng(0).uniform(-1, 1, (1000, 2)).astype(np.float32)
    progs = [[sp.input("x0"), sp.input("x1"), sp.instr("mul.rn.f32")],
             [sp.input("x0"), sp.instr("sin.approx.f32")]]
    out = sp.interpret(progs, {"x0": X[:, 0], "x1": X[:, 1]}, {"y": "f32"}, device="cpu")
    out["y"].shape        # (2, 1000); row k is what nx.emulate gives for progs[k]'s stub

A *tape* (``sp.tapes``, :mod:`numptx._program.tapes`) is the DAG of the stub a program
compiles to, so a tape computes what the stub computes. Each
instruction runs as the C expression of its table row (``numptx/instructions.py``, column
``c``), a tight loop over a block of rows; the batch is split over threads, with the GIL
released. Rows without a C expression (f16, packed, vector rows, special registers...) are an
:class:`InterpretError` naming the program and the row.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from .._cores import usable_cores
from .. import valuetypes as VT
from .._native import ffi, lib
from ..instructions import TABLE
from .ctable import _version
from .ops import ProgramError
from .stub import Limits
from .compile import _io_for
from .tapes import (InterpretError, Tapes, as_list, executor, input_types,  # noqa: F401
                    reads_input, records, subset, tape_lowered, tapes)

__all__ = ["InterpretError", "Tapes", "tapes", "interpret", "INTERP_TYPES", "interpreted_rows",
           "DeviceInterpreter", "register_device", "columns", "Column", "run_cpu", "refused",
           "RowRunner", "records", "reads_input", "subset", "tape_lowered"]

#: the value types the CPU interpreter stores (native/gen_interp.py's C_TYPE; a test compares)
INTERP_TYPES = ("pred", "b16", "f32", "f64", "s32", "u32", "b32", "s64", "u64", "b64")
#: diag flags of a limit (stack_ptx.h: STEP, NODE, DEPTH, STACK_OVERFLOW, META_OVERFLOW)
_LIMIT_FLAGS = 1 | 2 | 4 | 8 | 16
_LIMIT_TEXT = ((1, "the step limit"), (2, "the DAG node limit"), (4, "the routine depth limit"),
               (8, "a stack's capacity"), (16, "the meta stack's capacity"))
_DTYPE_TYPE = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
               np.dtype(np.int32): "s32", np.dtype(np.uint32): "u32",
               np.dtype(np.int64): "s64", np.dtype(np.uint64): "u64",
               np.dtype(np.bool_): "pred", np.dtype(np.uint16): "b16"}
_BLOCK = 256                  # rows per block: the value slots of a program stay in L2
_PARALLEL_WORK = 1 << 17      # row-ops below which one thread runs the whole batch


class DeviceInterpreter(Protocol):
    """What a device backend offers ``interpret`` (numptx.jit registers the GPU's)."""

    def available(self) -> bool: ...

    def run(self, tp: "Tapes", columns: list, n_rows: int) -> dict[str, np.ndarray]: ...


_devices: dict[str, DeviceInterpreter] = {}


def register_device(name: Literal["gpu"], backend: DeviceInterpreter) -> None:
    """Make ``device=name`` run through ``backend`` (called by numptx.jit at import)."""
    _devices[name] = backend


# ---- the interpreter's ops, per table version --------------------------------------------------
class _Ops:
    """Table row -> interpreter op, each op's value types, and each type's element size."""

    def __init__(self):
        self.version = _version()
        n_ops = lib.nxi_n_ops()
        self.names = [ffi.string(lib.nxi_op_name(k)).decode() for k in range(n_ops)]
        self.row_op = np.full(max(1, len(TABLE)), lib.NXI_NO_OP, dtype=np.uint16)
        self.op_types = np.full(4 * max(1, n_ops), 0xFF, dtype=np.uint8)
        for k, name in enumerate(self.names):
            i = TABLE.index(name)
            row = TABLE[i]
            self.row_op[i] = k
            ids = (*row.result_type_ids[:1], *row.operand_type_ids)
            self.op_types[4 * k:4 * k + len(ids)] = ids
        n_types = len(VT.NAMES)
        self.type_size = np.zeros(max(n_types, 1), dtype=np.uint8)
        for r in VT.ROWS:
            if r.name in INTERP_TYPES:
                self.type_size[r.id] = r.np.itemsize
        self.rows = frozenset(self.names)


_ops_lock = threading.Lock()
_ops: _Ops | None = None


def _the_ops() -> _Ops:
    global _ops
    o = _ops
    if o is None or o.version != _version():
        with _ops_lock:
            if _ops is None or _ops.version != _version():
                _ops = _Ops()
            o = _ops
    return o


def interpreted_rows() -> frozenset[str]:
    """The names of the table rows the CPU interpreter runs."""
    return _the_ops().rows


# ---- columns ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Column:
    """One input: its value type, and its data (a contiguous 1-D array, or one value)."""

    name: str
    type: str
    data: np.ndarray
    scalar: bool


def _type_of(name: str, v: Any, declared: Mapping[str, str]) -> str:
    if name in declared:
        t = declared[name]
        if t not in INTERP_TYPES:
            raise InterpretError(f"types[{name!r}] = {t!r}: the interpreter runs the types "
                                 f"{', '.join(INTERP_TYPES)}")
        return t
    if isinstance(v, bool):
        return "pred"
    if isinstance(v, int) and not isinstance(v, np.generic):
        return "s32"
    if isinstance(v, float) and not isinstance(v, np.generic):     # np.float64 is a float
        return "f32"
    dt = np.asarray(v).dtype
    if dt not in _DTYPE_TYPE:
        raise InterpretError(f"inputs[{name!r}]: a {dt} column has no value type the "
                             f"interpreter runs (float32 f32, float64 f64, int32 s32, uint32 "
                             f"u32, int64 s64, uint64 u64, bool pred, uint16 b16)")
    return _DTYPE_TYPE[dt]


def columns(inputs: Mapping[str, Any], declared: Mapping[str, str] | None = None
            ) -> tuple[list[Column], int]:
    """The inputs as :class:`Column` s and the row count: every array is 1-D, all of one
    length; an array must have its type's dtype (``declared`` types, else the dtype names it);
    Python numbers are values converted to their type (float: f32, int: s32, bool: pred)."""
    if not isinstance(inputs, Mapping):
        raise InterpretError(f"inputs: expected a mapping of input names to 1-D arrays or "
                             f"scalars, not {type(inputs).__name__}")
    if declared is not None and not isinstance(declared, Mapping):
        raise InterpretError(f"types: expected a mapping of input names to value types, e.g. "
                             f"{{'k': 'f32'}}, not {type(declared).__name__}")
    declared = dict(declared or {})
    unknown = [n for n in declared if n not in inputs]
    if unknown:
        raise InterpretError(f"types names {unknown[0]!r}, which inputs does not give")
    cols, n_rows, first = [], None, None
    for name, v in inputs.items():
        if not isinstance(name, str):
            raise InterpretError(f"inputs: the key {name!r} is not an input name (a str)")
        if not isinstance(v, (np.ndarray, np.generic, int, float)):
            raise InterpretError(f"inputs[{name!r}]: a {type(v).__name__}; give a 1-D NumPy "
                                 f"array (np.asarray(..., np.float32)) or a scalar")
        t = _type_of(name, v, declared)
        dt = VT.BY_NAME[t].np
        if isinstance(v, np.ndarray):
            if v.ndim > 1:
                raise InterpretError(f"inputs[{name!r}]: a {v.ndim}-D array {v.shape}; give "
                                     f"one 1-D column per input (X[:, j])")
            if v.dtype != dt:
                raise InterpretError(f"inputs[{name!r}]: a {v.dtype} column for the {t} input "
                                     f"{name!r}: pass .astype(np.{dt.name})")
            if v.ndim == 1:
                if n_rows is not None and len(v) != n_rows:
                    raise InterpretError(f"inputs: ragged columns: {first!r} has {n_rows} rows, "
                                         f"{name!r} has {len(v)}")
                n_rows, first = len(v), name
                # the C rows read typed pointers: a misaligned view (a packed record's
                # field, np.frombuffer at an odd offset) is copied, as a strided one is
                cols.append(Column(name, t, np.require(v, dt, ("C", "A")), False))
                continue
            v = v[()]
        if isinstance(v, np.generic) and v.dtype != dt:
            raise InterpretError(f"inputs[{name!r}]: a {v.dtype} value for the {t} input "
                                 f"{name!r}: pass np.{dt.name}(...)")
        try:
            with np.errstate(all="ignore"):
                data = np.array([v], dtype=dt)
        except (TypeError, ValueError, OverflowError) as e:
            raise InterpretError(f"inputs[{name!r}]: {v!r} is no {t} value ({e})") from None
        if isinstance(v, float) and dt.kind != "f" and not data[0] == v:
            raise InterpretError(f"inputs[{name!r}]: {v!r} is no {t} value (a float that "
                                 f"the type does not hold exactly)")
        cols.append(Column(name, t, data, True))
    return cols, 1 if n_rows is None else n_rows


# ---- interpret ----------------------------------------------------------------------------------
def interpret(programs: Iterable[Sequence[Any] | np.ndarray], inputs: Mapping[str, Any],
              outputs: Mapping[str, str] | None = None, *,
              device: Literal["auto", "cpu", "gpu"] = "auto", dialect: str | None = None,
              limits: Limits | None = None, site: Any = None, types: Mapping[str, str] | None = None,
              routines: Sequence = (), on_limit: Literal["raise", "run"] = "raise",
              threads: int | None = None) -> dict[str, np.ndarray]:
    """Run each program over every row of ``inputs``; ``{output name: array (programs, rows)}``.

    ``programs`` are what ``sp.compile_many`` takes (op lists or encoded arrays); ``inputs``
    maps each program input name to a 1-D column (all of one length) or a scalar; ``outputs``
    maps output names to value types as in ``sp.compile`` (or ``site=``: the site's variables,
    whose types the columns must have). ``types`` declares input types where the dtype does not
    say (Python numbers). Row ``k`` of each result equals, bit for bit, what ``nx.emulate`` gives
    for ``sp.compile(programs[k], ...)``. A program that hits a limit (steps, nodes, routine
    depth, a stack's capacity) is an :class:`InterpretError`; ``on_limit="run"`` runs it as the
    compiler does (the stub of the words that fit). ``device``: ``"cpu"`` (the C interpreter,
    ``threads`` threads, default every core), ``"gpu"`` (the generated interpreter kernel, when
    numptx.jit provides one and a GPU is present), ``"auto"``: the GPU when there is one.
    """
    if device not in ("auto", "cpu", "gpu"):
        raise InterpretError(f"device={device!r}: use 'auto', 'cpu' or 'gpu'")
    if on_limit not in ("raise", "run"):
        raise InterpretError(f"on_limit={on_limit!r}: use 'raise' or 'run'")
    if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool)
                                or threads < 1):
        raise InterpretError(f"threads={threads!r}: give a positive int (or None: every core)")
    programs = as_list(programs, "interpret")
    cols, n_rows = columns(inputs, _declared(inputs, types, site))
    if site is None and outputs is None:
        raise InterpretError("interpret: outputs= maps the result names to value types, e.g. "
                             "{'y': 'f32'} (or pass site=)")
    if outputs is not None and not isinstance(outputs, Mapping):
        raise InterpretError(f"outputs: expected a mapping of output names to value types, "
                             f"e.g. {{'y': 'f32'}}, not {type(outputs).__name__}")
    for name, t in (outputs or {}).items():
        if t not in INTERP_TYPES:
            raise InterpretError(f"outputs[{name!r}] = {t!r}: the interpreter runs the types "
                                 f"{', '.join(INTERP_TYPES)}")
    try:
        tp = tapes(programs, None if site is not None else {c.name: c.type for c in cols},
                   outputs, site=site, routines=routines, limits=limits, dialect=dialect)
    except ProgramError as e:
        msg = str(e).replace("tapes:", "interpret:", 1)
        at = re.match(r"interpret: program (\d+)\b", msg)     # batch_words names it so
        k = e.program if isinstance(e, InterpretError) else int(at[1]) if at else None
        raise InterpretError(msg, program=k) from None
    ordered = _bind(tp, cols, site)
    if on_limit == "raise":
        _check_limits(tp)
    backend = _devices.get("gpu")
    if device == "gpu" and (backend is None or not backend.available()):
        raise InterpretError("device='gpu': no GPU interpreter here (no CUDA GPU found); use "
                             "device='cpu' or 'auto'")
    if device == "gpu" or (device == "auto" and backend is not None and backend.available()):
        return _unwritten_keep_inputs(tp, ordered, backend.run(tp, ordered, n_rows))
    return run_cpu(tp, ordered, n_rows, threads=threads)


def _declared(inputs: Any, types: Any, site: Any) -> Any:
    """``types``, and with ``site=`` the site variable's type for each Python number (whose
    own type would be f32 / s32 / pred): the site's variable types rule."""
    if site is None or not isinstance(inputs, Mapping) or \
            (types is not None and not isinstance(types, Mapping)):
        return types                    # (columns() and tapes() report what is wrong)
    try:
        io = _io_for(None, None, site)
    except ProgramError:
        return types
    of = {n.split("\x00")[0]: t for n, t in input_types(io).items() if t in INTERP_TYPES}
    nums = {n: of[n] for n, v in inputs.items() if n in of and
            isinstance(v, (bool, int, float)) and not isinstance(v, np.generic)}
    return nums | dict(types or {})


def _unwritten_keep_inputs(tp: Tapes, cols: list[Column], outs: dict) -> dict:
    """An output a program leaves unwritten (the mm-ptx dialect) keeps its register's value:
    0 in ``outs``, except where the output is also an input (a site's mod variable, an output
    named like an input): there the stub's register still holds that input's column."""
    first: dict[str, int] = {}
    for i, name in enumerate(tp.inputs):
        first.setdefault(name.split("\x00")[0], i)
    heads = tp.offsets[:-1].astype(np.int64)
    for k, (name, t) in enumerate(tp.outputs.items()):
        i = first.get(name)
        if i is None or cols[i].type != t or not len(heads):
            continue
        ks = np.flatnonzero(tp.words[heads + 4 + k] == 0xFFFFFFFF)
        if len(ks):
            outs[name][ks] = cols[i].data
    return outs


def _bind(tp: Tapes, cols: list[Column], site: Any) -> list[Column]:
    """The columns in the tapes' input order, each checked against its input's type."""
    by = {c.name: c for c in cols}
    wanted = {n.split("\x00")[0] for n in tp.inputs}
    extra = [c.name for c in cols if c.name not in wanted]
    if extra:
        known = ", ".join(map(repr, sorted(wanted))) or "none"
        raise InterpretError(f"inputs[{extra[0]!r}]: no input of "
                             f"{'site ' + repr(site.name) if site is not None else 'the programs'}"
                             f" is named {extra[0]!r} (inputs: {known})")
    ordered = []
    for name, t in tp.inputs.items():
        base = name.split("\x00")[0]
        c = by.get(base)
        if c is None:
            raise InterpretError(f"inputs: no column for the input {base!r} (site "
                                 f"{site.name!r} reads it)" if site is not None else
                                 f"inputs: no column for the input {base!r}")
        if c.type != t:
            raise InterpretError(f"inputs[{base!r}]: a {c.type} column for the {t} input "
                                 f"{base!r}: pass .astype(np.{VT.BY_NAME[t].np.name})")
        ordered.append(c)
    for name, t in tp.outputs.items():
        if t not in INTERP_TYPES:
            raise InterpretError(f"output {name!r} is of type {t}, which the interpreter does "
                                 f"not run (it runs {', '.join(INTERP_TYPES)})")
    return ordered


def _check_limits(tp: Tapes) -> None:
    hit = np.flatnonzero(tp.flags & _LIMIT_FLAGS)
    if len(hit):
        k = int(hit[0])
        f = int(tp.flags[k])
        what = " and ".join(t for bit, t in _LIMIT_TEXT if f & bit)
        raise InterpretError(f"interpret: program {k} reaches {what} (sp.Limits); raise the "
                             f"limit, or pass on_limit='run' to run what the compiler keeps",
                             program=k)


def run_cpu(tp: Tapes, cols: list[Column], n_rows: int, *, threads: int | None = None,
            block: int = _BLOCK) -> dict[str, np.ndarray]:
    """Run ``tp`` over the columns (in the tapes' input order) with the C interpreter."""
    if isinstance(block, bool) or not isinstance(block, int) or \
            not 1 <= block <= lib.NXI_MAX_BLOCK:
        raise InterpretError(f"block={block!r}: rows per block, an int from 1 to "
                             f"{lib.NXI_MAX_BLOCK}")
    bad = [(name, t) for name, t in tp.outputs.items() if t not in INTERP_TYPES]
    if bad:
        raise InterpretError(f"output {bad[0][0]!r} is of type {bad[0][1]}, which the "
                             f"interpreter does not store")
    n = len(tp)
    outs = {name: np.zeros((n, n_rows), VT.BY_NAME[t].np) for name, t in tp.outputs.items()}
    if n == 0:           # (no rows still runs: every tape is checked, as with rows)
        return outs
    heads = tp.offsets[:-1].astype(np.int64)
    slots, recs = tp.words[heads], tp.words[heads + 1]
    work = float(recs.sum()) * n_rows
    cores = threads or usable_cores()
    k = 1 if cores == 1 or work < _PARALLEL_WORK else min(n, 4 * cores)
    cuts = np.searchsorted(np.cumsum(recs, dtype=np.float64),
                           np.linspace(0, float(recs.sum()), k + 1)[1:-1]).tolist()
    bounds = sorted({0, n, *[int(c) + 1 for c in cuts if 0 < int(c) + 1 < n]})
    job = _Job(tp, cols, outs, n_rows, block, slots, recs)
    spans = list(zip(bounds, bounds[1:]))
    if len(spans) == 1:
        results = [job(*spans[0])]
    else:
        results = _spread(job, spans, min(cores, len(spans)))
    failed = [r for r in results if r is not None]
    if failed:
        raise min(failed, key=lambda e: -1 if e.program is None else e.program)
    return _unwritten_keep_inputs(tp, cols, outs)


def _spread(job, spans: list, workers: int) -> list:
    """``job(*span)`` for every span, in order, by at most ``workers`` threads of the pool
    (each takes the next span when it is done: ``threads=`` bounds the threads, not the
    spans)."""
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
    """One C call over programs [p0, p1) of a batch."""

    def __init__(self, tp, cols, outs, n_rows, block, slots, recs):
        self.ops = _the_ops()
        self.tp, self.n_rows, self.block, self.slots, self.recs = tp, n_rows, block, slots, recs
        self.cols = cols
        self.col_c = ffi.new("nxi_column[]", max(1, len(cols)))
        for i, c in enumerate(cols):
            self.col_c[i].data = ffi.cast("void *", c.data.ctypes.data)
            self.col_c[i].type = VT.BY_NAME[c.type].id
            self.col_c[i].scalar = 1 if c.scalar else 0
        self.outs = [(a, VT.BY_NAME[t].id) for a, t in zip(outs.values(), tp.outputs.values())]
        self.words = ffi.cast("uint32_t *", tp.words.ctypes.data)
        self.offsets = ffi.cast("uint64_t *", tp.offsets.ctypes.data)

    def __call__(self, p0: int, p1: int) -> InterpretError | None:
        ops, n_rows = self.ops, self.n_rows
        need = lib.nxi_workspace_size(int(self.slots[p0:p1].max()), int(self.recs[p0:p1].max()),
                                      self.block)
        ws = np.empty(max(need, 1), dtype=np.uint8)
        out_c = ffi.new("nxi_output[]", max(1, len(self.outs)))
        for k, (a, t) in enumerate(self.outs):
            out_c[k].data = ffi.cast("void *", a.ctypes.data + p0 * n_rows * a.itemsize)
            out_c[k].type = t
        fail = ffi.new("nxi_fail *")
        st = lib.nxi_run(self.words, self.offsets + p0, p1 - p0,
                         ffi.cast("uint16_t *", ops.row_op.ctypes.data), len(ops.row_op),
                         ffi.cast("uint8_t *", ops.op_types.ctypes.data),
                         ffi.cast("uint8_t *", ops.type_size.ctypes.data), len(ops.type_size),
                         self.col_c, len(self.cols), out_c, len(self.outs), n_rows, self.block,
                         ffi.cast("void *", ws.ctypes.data), len(ws), fail)
        if st == lib.NXI_OK:
            return None
        if st == lib.NXI_ERR_WORKSPACE:     # refused before any program ran: the largest header
            k = p0 + int(np.argmax(self.slots[p0:p1].astype(np.uint64) +
                                   self.recs[p0:p1].astype(np.uint64)))
            return InterpretError(f"interpret: program {k}: a malformed tape (its header claims "
                                  f"{int(self.slots[k])} slots and {int(self.recs[k])} records)",
                                  program=k)
        return _failure(st, None if fail.program == 0xFFFFFFFF else p0 + fail.program,
                        fail.row, ops)


def _failure(st: int, p: int | None, row: int, ops: _Ops) -> InterpretError:
    name = TABLE[row].name if row < len(TABLE) else None
    if st == lib.NXI_ERR_ROW and name is not None:
        why = ("it has no C semantics in the table (column c); sp.interpreted_rows() lists the "
               "rows the interpreter runs" if name not in ops.rows else
               "the interpreter runs rows of one result and 1 to 3 scalar operands")
        return InterpretError(f"interpret: program {p} uses {name!r} (table row {row}): {why}; "
                              f"score it with the compiled path (evaluate='compile')",
                              program=p, row=name)
    what = {lib.NXI_ERR_TAPE: "a malformed tape", lib.NXI_ERR_TYPE: "a type mismatch",
            lib.NXI_ERR_WORKSPACE: "the workspace", lib.NXI_ERR_ARGUMENT: "an argument"}.get(
        st, f"status {st}")
    where = "the batch" if p is None else f"program {p}"
    return InterpretError(f"interpret: {where}: the interpreter refused {what}"
                          + (f" at {name!r}" if name else ""), program=p, row=name)


# ---- one program, one row at a time (the simulator's site calls) -----------------------------
def refused(tp: Tapes) -> dict[int, str]:
    """The programs of ``tp`` the CPU interpreter refuses, each with the first table row it
    does not run (program index -> row name)."""
    prog, at = records(tp)
    if not len(at):
        return {}
    ops = _the_ops()
    w0 = tp.words[at]
    instr = (w0 & 0xFF) == 2
    rows = tp.words[at + 2].astype(np.int64)
    known = np.where(instr & (rows < len(ops.row_op)),
                     ops.row_op[np.minimum(rows, len(ops.row_op) - 1)], lib.NXI_NO_OP)
    n_ops, n_res = (w0 >> 16) & 0xFF, w0 >> 24
    bad = instr & ((known == lib.NXI_NO_OP) | (n_res != 1) | (n_ops < 1) | (n_ops > 3))
    out: dict[int, str] = {}
    for i in np.flatnonzero(bad).tolist():
        p = int(prog[i])
        if p not in out:
            r = int(rows[i])
            out[p] = TABLE[r].name if r < len(TABLE) else f"row {r}"
    return out



class RowRunner:
    """One program's tape run on one row at a time, its C arguments made once::

        run = RowRunner(tp)                   # tp: one program (refused rows raise here)
        run.inputs["x"][0] = 2.0              # the inputs' one-element buffers
        run()                                 # -> run.outputs["y"][0]

    What the simulator calls per thread reaching a site (no batch to wait for)."""

    def __init__(self, tp: Tapes):
        if len(tp) != 1:
            raise InterpretError("RowRunner: one program's tape")
        bad = refused(tp)
        if bad:
            raise InterpretError(f"the interpreter does not run {bad[0]!r}", program=0,
                                 row=bad[0])
        for what, types in (("input", tp.inputs), ("output", tp.outputs)):
            for name, t in types.items():
                if t not in INTERP_TYPES:
                    raise InterpretError(f"{what} {name!r} is of type {t}, which the "
                                         f"interpreter does not store")
        ops = self._ops = _the_ops()
        self._tp = tp
        self.inputs = {n.split("\x00")[0]: np.zeros(1, VT.BY_NAME[t].np)
                       for n, t in tp.inputs.items()}
        self.outputs = {n: np.zeros(1, VT.BY_NAME[t].np) for n, t in tp.outputs.items()}
        cols = ffi.new("nxi_column[]", max(1, len(tp.inputs)))
        for i, (n, t) in enumerate(tp.inputs.items()):
            cols[i].data = ffi.cast("void *", self.inputs[n.split("\x00")[0]].ctypes.data)
            cols[i].type, cols[i].scalar = VT.BY_NAME[t].id, 0
        outs = ffi.new("nxi_output[]", max(1, len(tp.outputs)))
        for k, (n, t) in enumerate(tp.outputs.items()):
            outs[k].data = ffi.cast("void *", self.outputs[n].ctypes.data)
            outs[k].type = VT.BY_NAME[t].id
        head = tp.tape(0)
        self._ws = np.empty(max(1, lib.nxi_workspace_size(int(head[0]), int(head[1]), 1)),
                            np.uint8)
        self._fail = ffi.new("nxi_fail *")
        self._args = (ffi.cast("uint32_t *", tp.words.ctypes.data),
                      ffi.cast("uint64_t *", tp.offsets.ctypes.data), 1,
                      ffi.cast("uint16_t *", ops.row_op.ctypes.data), len(ops.row_op),
                      ffi.cast("uint8_t *", ops.op_types.ctypes.data),
                      ffi.cast("uint8_t *", ops.type_size.ctypes.data), len(ops.type_size),
                      cols, len(tp.inputs), outs, len(tp.outputs), 1, 1,
                      ffi.cast("void *", self._ws.ctypes.data), len(self._ws), self._fail)
        self._keep = (cols, outs)

    def __call__(self) -> None:
        st = lib.nxi_run(*self._args)
        if st != lib.NXI_OK:
            raise _failure(st, 0, self._fail.row, self._ops)
