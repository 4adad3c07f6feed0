"""Shared machinery of Stack PTX and AST PTX: ops and their uint64 encoding, the compiled
:class:`Stub`, and the bridge to the C core (``native/stack_ptx.h``).

The encoding, limits and stub format are specified in ``docs/design/programs.md``.
"""
from __future__ import annotations

import math
import re
import struct
import threading
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields

import numpy as np

from ._native import ffi, lib
from .errors import NumptxError
from .instructions import TABLE, TYPES
from .semantics import bf16_bits

# ORDER KINDS: docs/design/programs.md section 3 and native/stack_ptx.h
NOP, INPUT, CONST, CONST64, INSTR, META_CONST, META, ROUTINE, STORE, LOAD, RETURN = range(11)
KIND_NAMES = ("nop", "input", "const", "const64", "instr", "meta_const", "meta", "routine",
              "store", "load", "return")
META_OPS = ("dup", "yank_dup", "swap", "swap_with", "replace", "drop", "clear", "rotate", "reverse")
_WIDE = {"f64", "s64", "u64", "b64"}
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")
_TEMP = re.compile(r"_s\d+\Z")
_U64 = struct.Struct("<Q")


class ProgramError(NumptxError):
    """A bad Stack PTX / AST PTX program, op or compile request."""


class ASTError(ProgramError):
    """A strict AST PTX error; ``index`` is the index of the op at fault (or None)."""

    def __init__(self, message: str, *, index: int | None = None, code: str | None = None):
        self.index, self.code = index, code
        super().__init__(message)


def _types():
    return TYPES


def type_id(dtype: str, context: str = "") -> int:
    """Index of a value type in ORDER TYPES (``"f32"`` -> 5)."""
    types = _types()
    try:
        return types.index(str(dtype).lower())
    except ValueError:
        where = f"{context}: " if context else ""
        raise ProgramError(f"{where}unknown value type {dtype!r}; use one of {', '.join(types)}") from None


class Op:
    """One program instruction: its uint64 word (and a second data word for 64-bit constants).

    Ops compare equal when they encode the same; ``repr`` shows the call that makes them.
    """
    __slots__ = ("word", "extra", "name", "text", "raw")

    def __init__(self, kind: int, rest: int, *, extra: int | None = None, name: str | None = None,
                 text: str = ""):
        self.word = kind | rest
        self.extra = extra
        self.name = name          # input referenced by name, resolved when encoded
        self.text = text
        # the encoded little-endian bytes; empty for an input named by name (resolved per compile)
        self.raw = (b"" if name is not None else
                    _U64.pack(self.word) if extra is None else _U64.pack(self.word) + _U64.pack(extra))

    @property
    def kind(self) -> str:
        return KIND_NAMES[self.word & 0xFF] if (self.word & 0xFF) < len(KIND_NAMES) else "?"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Op) and self.word == other.word and self.extra == other.extra
                and self.name == other.name)

    def __hash__(self) -> int:
        return hash((self.word, self.extra, self.name))

    def __repr__(self) -> str:
        return self.text or f"Op(0x{self.word:016x})"


def input(ref: str | int) -> Op:
    """Push an input, by name (resolved against ``inputs=`` at compile time) or by index."""
    if isinstance(ref, str):
        if not ref:
            raise ProgramError("input(''): an input needs a name")
        return Op(INPUT, 0, name=ref, text=f"input({ref!r})")
    if isinstance(ref, (int, np.integer)) and 0 <= int(ref) < 1 << 16:
        return Op(INPUT, int(ref) << 16, text=f"input({int(ref)})")
    raise ProgramError(f"input({ref!r}): give an input name (str) or index in [0, 65535]")


# finite values at or beyond these magnitudes round to infinity (round to nearest even)
_FLOAT_EDGE = {"f32": 2.0 ** 128 - 2.0 ** 103, "bf16": 2.0 ** 128 - 2.0 ** 119,
               "f16": 65520.0}


def _float_value(value, dtype: str, text: str) -> float:
    """``value`` as a Python float for a ``dtype`` constant; a finite value the type cannot hold
    is an error (NumPy would make it an infinity with only a warning). inf/nan pass as given."""
    if value.__class__ is float and -1e4 < value < 1e4:      # the common case, quickly
        return value
    if isinstance(value, (bool, np.bool_, complex, np.complexfloating)) or \
            not isinstance(value, (int, float, np.number)):
        raise ProgramError(f"{text}: an {dtype} constant needs a real number")
    try:
        v = float(value)
    except OverflowError:                     # an int beyond the f64 range
        v = math.inf
        finite = True
    else:
        finite = math.isfinite(v)
    edge = _FLOAT_EDGE.get(dtype, math.inf)
    if finite and not abs(v) < edge:
        raise ProgramError(f"{text}: {value!r} is out of the {dtype} range (it would become "
                           f"infinity; write float('inf') if that is meant)")
    return v


def _int_payload(value, bits: int, signed: bool, dtype: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ProgramError(f"const({value!r}, {dtype!r}): an integer constant needs an int")
    v = int(value)
    lo = -(1 << (bits - 1)) if signed else -(1 << (bits - 1))   # accept two's complement spellings
    if not lo <= v < 1 << bits:
        raise ProgramError(f"const({value!r}, {dtype!r}): out of range for {bits}-bit {dtype}")
    return v & ((1 << bits) - 1)


def const(value, dtype: str) -> Op:
    """Push a constant of value type ``dtype``: Python/NumPy numbers for f16, bf16, f32, f64 and
    the integer types, a bool for pred, a pair of floats (or an int bit pattern) for f16x2/bf16x2.
    """
    t = type_id(dtype, f"const({value!r}, {dtype!r})")
    name = _types()[t]
    text = f"const({value!r}, {name!r})"
    if name in _WIDE:
        if name == "f64":
            bits = int(np.float64(_float_value(value, name, text)).view(np.uint64))
        else:
            bits = _int_payload(value, 64, name == "s64", name)
        return Op(CONST64, t << 8, extra=bits, text=text)
    if name == "pred":
        if not isinstance(value, (bool, np.bool_, int)) or int(value) not in (0, 1):
            raise ProgramError(f"{text}: a pred constant is True/False")
        payload = int(bool(value))
    elif name == "f32":
        payload = int(np.float32(_float_value(value, name, text)).view(np.uint32))
    elif name in ("f16", "bf16"):
        v = _float_value(value, name, text)
        payload = (int(np.float16(v).view(np.uint16)) if name == "f16" else bf16_bits(v))
    elif name in ("f16x2", "bf16x2"):
        half = name[:-2]
        if isinstance(value, (tuple, list)):
            if len(value) != 2:
                raise ProgramError(f"{text}: an {name} constant is a pair (element 0, element 1) "
                                   f"of numbers or an int bit pattern, not {len(value)} values")
            lo, hi = (_float_value(v, half, f"{text} element {i}") for i, v in enumerate(value))
            conv = (lambda v: int(np.float16(v).view(np.uint16))) if half == "f16" else bf16_bits
            payload = conv(lo) | conv(hi) << 16                     # element 0 in the low half
        elif isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise ProgramError(f"{text}: an {name} constant is a pair (element 0, element 1) of "
                               f"numbers or an int bit pattern, not {type(value).__name__}")
        else:
            payload = _int_payload(value, 32, False, name)
    elif name == "b16":
        payload = _int_payload(value, 16, False, name)
    else:                                                        # s32, u32, b32
        payload = _int_payload(value, 32, name == "s32", name)
    return Op(CONST, t << 8 | payload << 32, text=text)


def instr(name: str) -> Op:
    """Execute the table instruction ``name`` (``"add.rn.f32"``, ``"setp.lt.f32"``, ``"%tid.x"``)."""
    index = TABLE.index(name)
    return Op(INSTR, index << 16, text=f"instr({name!r})")


def special(register: str) -> Op:
    """Push a special register: ``special("tid.x")`` or ``special("%clock64")``."""
    if not isinstance(register, str):
        raise ProgramError(f"special({register!r}): name a special register, e.g. "
                           f"special('tid.x')")
    return instr(register if register.startswith("%") else "%" + register)


# ---- encoding ---------------------------------------------------------------------------------
def _input_index(inputs) -> dict[str, int]:
    if inputs is None:
        return {}
    _check_names(inputs)
    return {name: i for i, name in enumerate(inputs)}


def _check_names(inputs) -> None:
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Iterable):
        raise ProgramError(f"inputs={inputs!r}: give the input names in order (a list, or a "
                           f"dict of name -> type)")


def _as_program(prog, what: str = "program"):
    """``prog`` as a list/tuple of ops or the uint64 array itself (a one-shot iterator becomes
    a list, so an error can name the op); anything else is an error naming ``what``."""
    if isinstance(prog, (list, tuple, np.ndarray)):
        return prog
    if not isinstance(prog, (str, bytes, bytearray, Mapping)) and isinstance(prog, Iterable):
        return list(prog)
    raise ProgramError(f"{what}: expected a list of ops (or a uint64 array from encode()), "
                       f"not {type(prog).__name__}")


def encode(prog: Sequence[Op], inputs: Sequence[str] | Mapping[str, str] | None = None) -> np.ndarray:
    """The program as a uint64 array (one word per op, two for 64-bit constants). Inputs named in
    the program are numbered by their position in ``inputs``."""
    return np.frombuffer(_encode(prog, _input_index(inputs)), dtype=np.uint64).copy()


def _encode_fast(prog, name_raw: dict[str, bytes]) -> bytes | None:
    """Encode with inputs resolved through ``name_raw`` (name -> the word's bytes): a join of
    precomputed bytes, no per-word integer conversion. None when something needs the slow path."""
    try:
        return b"".join([op.raw or name_raw[op.name] for op in prog])
    except (KeyError, AttributeError, TypeError):
        return None


def _encode(prog, index: dict[str, int], what: str = "program") -> array:
    prog = _as_program(prog, what)
    words = array("Q")
    append = words.append
    try:
        for op in prog:
            if op.name is not None:
                try:
                    append(op.word | index[op.name] << 16)
                except KeyError:
                    known = ", ".join(map(repr, index)) or "none"
                    raise ProgramError(f"{what}: {op!r}: no input named {op.name!r} (inputs: "
                                       f"{known})") from None
            else:
                append(op.word)
                if op.extra is not None:
                    append(op.extra)
    except AttributeError:
        bad, item = next((i, op) for i, op in enumerate(prog) if not isinstance(op, Op))
        raise ProgramError(f"{what} item {bad} is {item!r}, not a Stack PTX op") from None
    return words


def decode(words: np.ndarray | Sequence[int], inputs: Sequence[str] | None = None) -> list[Op]:
    """Ops of an encoded program, validated word by word (a :class:`ProgramError` names the index
    of a word that is no valid op under the current instruction table)."""
    types = _types()
    if inputs is not None:
        _check_names(inputs)
    names = list(inputs) if inputs is not None else None
    w = [int(x) for x in _as_words(words).ravel()]
    out: list[Op] = []
    i = 0
    while i < len(w):
        word = w[i]
        kind, t, a, b = word & 0xFF, (word >> 8) & 0xFF, (word >> 16) & 0xFFFF, word >> 32
        where = f"word {i} (0x{word:016x})"
        if kind >= len(KIND_NAMES):
            raise ProgramError(f"{where}: unknown kind {kind}")
        if kind in (CONST, CONST64, META, STORE, LOAD) and t >= len(types):
            raise ProgramError(f"{where}: unknown value type id {t}")
        if kind == INPUT:
            op = input(names[a]) if names is not None and a < len(names) else input(a)
        elif kind == CONST:
            if types[t] in _WIDE:
                raise ProgramError(f"{where}: {types[t]} constants take two words (CONST64)")
            op = Op(CONST, t << 8 | b << 32, text=f"const(0x{b:x}, {types[t]!r})")
        elif kind == CONST64:
            if i + 1 >= len(w):
                raise ProgramError(f"{where}: CONST64 without its data word")
            i += 1
            op = Op(CONST64, t << 8, extra=w[i], text=f"const(0x{w[i]:x}, {types[t]!r})")
        elif kind == INSTR:
            if a >= len(TABLE):
                raise ProgramError(f"{where}: instruction index {a} outside the table ({len(TABLE)} entries)")
            op = instr(TABLE[a].name)
        elif kind == META_CONST:
            op = Op(META_CONST, a << 16, text=f"meta({a})")
        elif kind == META:
            if a >= len(META_OPS):
                raise ProgramError(f"{where}: unknown meta operation {a}")
            op = Op(META, t << 8 | a << 16, text=f"{META_OPS[a]}({types[t]!r})")
        elif kind in (STORE, LOAD):
            op = Op(kind, t << 8 | a << 16, text=f"{KIND_NAMES[kind]}({types[t]!r}, {a})")
        elif kind == ROUTINE:
            op = Op(ROUTINE, a << 16, text=f"routine({a})")
        else:
            op = Op(kind, 0, text=f"{KIND_NAMES[kind]}()" if kind != RETURN else "ret()")
        if (kind not in (CONST,) and b) or (kind in (NOP, RETURN, INPUT, INSTR, ROUTINE, META_CONST) and t):
            raise ProgramError(f"{where}: stray bits in unused fields")
        out.append(op)
        i += 1
    return out


def _as_words(words) -> np.ndarray:
    """Encoded words as a uint64 array; a value that is no 64-bit word is an error."""
    if isinstance(words, np.ndarray) and words.dtype == np.uint64:
        return words
    if words is None or isinstance(words, (str, bytes, Mapping)):
        raise ProgramError(f"decode: expected a sequence of uint64 words, not "
                           f"{type(words).__name__}")
    try:
        arr = np.asarray(words)
    except (TypeError, ValueError) as e:
        raise ProgramError(f"decode: expected a sequence of uint64 words ({e})") from None
    if arr.size == 0:
        return arr.astype(np.uint64)
    if arr.dtype == object:             # Python ints beyond int64: check each
        bad = [(i, x) for i, x in enumerate(arr.ravel())
               if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer))
               or not 0 <= int(x) < 1 << 64]
        if bad:
            i, x = bad[0]
            raise ProgramError(f"decode: word {i} is {x!r}, not a uint64 word")
        return np.array([int(x) for x in arr.ravel()], dtype=np.uint64)
    if arr.dtype.kind not in "iu":
        raise ProgramError(f"decode: words must be integers (uint64), not {arr.dtype}")
    if arr.dtype.kind == "i" and (arr < 0).any():
        i = int(np.argmax(arr.ravel() < 0))
        raise ProgramError(f"decode: word {i} is {int(arr.ravel()[i])}, not a uint64 word")
    return arr.astype(np.uint64)


# ---- compiled stubs -----------------------------------------------------------------------------
_DIAG_FLAGS = ((1, "step limit reached"), (2, "DAG node limit reached"),
               (4, "routine depth limit reached"), (8, "a stack overflowed"),
               (16, "the meta stack overflowed"), (32, "malformed words were skipped"))


_DIAG = struct.Struct("<9I")


def _diag_fields(raw) -> tuple:
    return _DIAG.unpack(raw) if isinstance(raw, (bytes, bytearray)) else tuple(raw)


class Stub(str):
    """A compiled PTX stub: the text itself (a ``str``), plus what the compiler noticed.

    ``stub.diagnostics`` lists limits hit and outputs that got a zero value;
    ``stub.unsatisfied`` names those outputs; ``stub.stats`` counts steps, DAG nodes, emitted
    instructions and no-ops; ``stub.inputs`` / ``stub.outputs`` map register names to types.
    """

    def __new__(cls, text: str, inputs: dict, outputs: dict, diag=bytes(36)):
        self = super().__new__(cls, text)
        self._meta = (inputs, outputs, diag)          # diag: raw stackptx_diag bytes
        return self

    @property
    def text(self) -> str:
        return str.__str__(self)

    @property
    def inputs(self) -> dict:
        return self._meta[0]

    @property
    def outputs(self) -> dict:
        return self._meta[1]

    @property
    def _diag(self) -> tuple:
        return _diag_fields(self._meta[2])

    @property
    def unsatisfied(self) -> tuple[str, ...]:
        mask = self._diag[3]
        return tuple(n for i, n in enumerate(self.outputs) if i < 32 and mask >> i & 1)

    @property
    def stats(self) -> dict[str, int]:
        d = self._diag
        return {"steps": d[4], "nodes": d[5], "emitted": d[6], "noops": d[1]}

    @property
    def diagnostics(self) -> tuple[str, ...]:
        d = self._diag
        flags, msgs = d[0], []
        for bit, text in _DIAG_FLAGS:
            if flags & bit:
                at = f" (at word {d[7]})" if bit <= 4 and d[7] != 0xFFFFFFFF else ""
                msgs.append(text + at)
        unsat = self.unsatisfied
        for name in unsat:
            msgs.append(f"output {name!r} ({self.outputs[name]}) got no value: set to zero")
        if d[2] > len(unsat):
            msgs.append(f"{d[2] - len(unsat)} more output(s) beyond the 32nd got no value")
        return tuple(msgs)

    def __reduce__(self):
        inputs, outputs, diag = self._meta
        return (Stub, (self.text, inputs, outputs, bytes(diag)))

    def __repr__(self) -> str:
        return f"Stub({str.__repr__(self)})"


@dataclass(frozen=True)
class Limits:
    """Compile limits (docs/design/programs.md); hitting one is reported in ``stub.diagnostics``."""
    max_steps: int = 4096
    max_nodes: int = 4096
    max_depth: int = 8
    stack_capacity: int = 256
    meta_capacity: int = 256
    n_slots: int = 16

    def __new__(cls, *args, **kwargs):
        # a misspelled field would be a bare TypeError from the generated __init__
        unknown = [k for k in kwargs if k not in _LIMIT_FIELDS]
        if unknown or len(args) > len(_LIMIT_FIELDS):
            what = f"unknown field {unknown[0]!r}" if unknown else f"{len(args)} positional values"
            raise ProgramError(f"Limits: {what}; the fields are {', '.join(_LIMIT_FIELDS)}")
        return super().__new__(cls)

    def __post_init__(self):
        for k, v in self.__dict__.items():
            if not isinstance(v, int) or not 1 <= v <= 1 << 20:
                raise ProgramError(f"Limits.{k} = {v!r}: must be an int in [1, 1048576]")


_LIMIT_FIELDS = tuple(f.name for f in fields(Limits))
DEFAULT_LIMITS = Limits()


# ---- the bridge to the C core ------------------------------------------------------------------
class _CTable:
    """The instruction table as C rows (rebuilt when ``TABLE.version`` changes)."""

    def __init__(self):
        self.version = TABLE.version
        n = len(TABLE)
        rows = ffi.new("stackptx_instr[]", max(n, 1))
        keep = []
        for i in range(n):
            ins, row = TABLE[i], rows[i]
            fmt = ffi.new("char[]", ins.fmt.encode())
            keep.append(fmt)
            row.fmt, row.fmt_len = fmt, len(ins.fmt)
            row.n_results, row.n_operands = len(ins.results), len(ins.operands)
            for k, (t, w) in enumerate(zip(ins.result_type_ids, ins.result_widths)):
                row.result_type[k], row.result_width[k] = t, w
            for k, (t, w) in enumerate(zip(ins.operand_type_ids, ins.operand_widths)):
                row.operand_type[k], row.operand_width[k] = t, w
            row.flags = (1 if "volatile" in ins.flags else 0) | (2 if "commutative" in ins.flags else 0)
        self.table = ffi.new("stackptx_table *")
        self.table.rows, self.table.n_rows = rows, n
        self.table.reg_type_names = ffi.NULL
        bad = ffi.new("uint32_t *")
        if lib.stackptx_check_table(self.table, bad) != lib.STACKPTX_OK:
            raise ProgramError(f"instruction table row {bad[0]} is not usable by the C core")
        self._keep = (rows, keep)


_ctable_lock = threading.Lock()
_ctable: _CTable | None = None


def _table():
    global _ctable
    t = _ctable
    if t is None or t.version != TABLE.version:
        with _ctable_lock:
            if _ctable is None or _ctable.version != TABLE.version:
                _ctable = _CTable()
            t = _ctable
    return t.table


class _IO:
    """Inputs and outputs of a compile request, as C arrays (cached per signature)."""
    __slots__ = ("c", "in_names", "out_types", "index", "name_words", "ws_need", "_keep")

    def __init__(self, in_prog_names, in_regs, in_types, out_regs, out_types):
        for reg in (*in_regs, *out_regs):
            if not isinstance(reg, str) or not _IDENT.match(reg) or _TEMP.match(reg):
                raise ProgramError(f"register name {reg!r} is not usable in a stub: it must be a PTX "
                                   f"identifier and not of the form _s<number> (stub temporaries)")
        if len(set(out_regs)) != len(out_regs):
            raise ProgramError(f"outputs name a register twice: {out_regs}")
        if len(set(in_prog_names)) != len(in_prog_names):
            raise ProgramError(f"inputs name a variable twice: {in_prog_names}")
        self.in_names = dict(zip(in_regs, in_types))
        self.out_types = dict(zip(out_regs, out_types))
        self.index = {n: i for i, n in enumerate(in_prog_names)}
        self.name_words = {n: _U64.pack(INPUT | i << 16) for n, i in self.index.items()}
        self.ws_need: dict = {}
        c = ffi.new("stackptx_io *")
        enc_in = [ffi.new("char[]", r.encode()) for r in in_regs]
        enc_out = [ffi.new("char[]", r.encode()) for r in out_regs]
        arrays = (
            ffi.new("uint8_t[]", [TYPES.index(t) for t in in_types] or [0]),
            ffi.new("char *[]", enc_in or [ffi.NULL]),
            ffi.new("uint32_t[]", [len(r.encode()) for r in in_regs] or [0]),
            ffi.new("uint8_t[]", [TYPES.index(t) for t in out_types] or [0]),
            ffi.new("char *[]", enc_out or [ffi.NULL]),
            ffi.new("uint32_t[]", [len(r.encode()) for r in out_regs] or [0]),
        )
        c.n_inputs, c.input_types, c.input_names, c.input_name_lens = len(in_regs), *arrays[:3]
        c.n_outputs, c.output_types, c.output_names, c.output_name_lens = len(out_regs), *arrays[3:]
        self.c = c
        self._keep = (enc_in, enc_out, arrays)

    def workspace_size(self, lim_key, lim_c) -> int:
        need = self.ws_need.get(lim_key)
        if need is None:
            need = self.ws_need[lim_key] = lib.stackptx_workspace_size(lim_c, self.c)
            if need == 0:
                raise ProgramError("limits or inputs/outputs out of the C core's range")
        return need


_io_cache: dict = {}


def _value_type(dtype: str, what: str) -> str:
    """Map a site dtype (built-in or registered) or a value type name to a stack type."""
    name = str(dtype).lower()
    if name in TYPES:
        return name
    from .dtypes import get_dtype
    from .errors import TypeRegistryError
    try:
        reg = get_dtype(name).reg
    except TypeRegistryError:
        raise ProgramError(f"{what}: unknown type {dtype!r}; value types are {', '.join(TYPES)}") from None
    if reg not in TYPES:
        raise ProgramError(f"{what}: type {dtype!r} lives in .{reg} registers, which no stack holds")
    return reg


def _io_for(inputs, outputs, site) -> _IO:
    if site is not None:
        if inputs is not None or outputs is not None:
            raise ProgramError("pass either site= or inputs=/outputs=, not both")
        return _io_ordered(None, None, site, ())          # the site's own input order
    if inputs is None:
        inputs = {}
    if outputs is None:
        outputs = {}
    try:
        key = (*inputs.items(), None, *outputs.items())
        io = _io_cache.get(key)
    except (AttributeError, TypeError):
        raise ProgramError("inputs and outputs map register names to value types, e.g. "
                           "{'x': 'f32'}") from None
    if io is None:
        in_t = [_value_type(t, f"input {n!r}") for n, t in inputs.items()]
        out_t = [_value_type(t, f"output {n!r}") for n, t in outputs.items()]
        io = _IO(list(inputs), list(inputs), in_t, list(outputs), out_t)
        _cache_put(key, io)
    return io


def _cache_put(key, io) -> None:
    if len(_io_cache) > 4096:
        _io_cache.clear()
    _io_cache[key] = io


class _Scratch(threading.local):
    """Per-thread workspace, output buffer and result cells, grown on demand."""

    def __init__(self):
        self.ws, self.ws_size = None, 0
        self.out, self.out_size = None, 0
        self.diag = ffi.new("stackptx_diag *")
        self.out_len = ffi.new("size_t *")


_scratch = _Scratch()
_limits_cache: dict = {}


def _limits_c(limits: Limits | None):
    """(cache key, C limits); the key is None for the defaults (hashing a Limits costs ~1 us)."""
    if limits is None:
        c = _limits_cache.get(None)
        if c is None:
            _, c = _limits_c(DEFAULT_LIMITS)
            _limits_cache[None] = c
        return None, c
    lim = limits
    try:
        c = _limits_cache.get(lim)
    except TypeError:                       # unhashable: a dict, a list...
        c = None
    if c is None:
        if not isinstance(lim, Limits):
            raise ProgramError(f"limits must be a numptx.stack_ptx.Limits, e.g. "
                               f"sp.Limits(max_steps=1000), not {type(lim).__name__}")
        c = ffi.new("stackptx_limits *", [lim.max_steps, lim.max_nodes, lim.max_depth,
                                          lim.stack_capacity, lim.meta_capacity, lim.n_slots])
        _limits_cache[lim] = c
    return lim, c


def _words(prog, io: _IO, what: str = "program"):
    if isinstance(prog, np.ndarray):
        if prog.dtype != np.uint64 or prog.ndim != 1:
            raise ProgramError(f"{what}: an encoded program is a 1-D uint64 array, not {prog.dtype} {prog.shape}")
        arr = np.ascontiguousarray(prog)
        return ffi.from_buffer("uint64_t[]", arr), len(arr), arr
    words = _encode_fast(prog, io.name_words)
    if words is None:
        words = _encode(prog, io.index, what).tobytes()   # raises the precise error
    return ffi.from_buffer("uint64_t[]", words), len(words) >> 3, words


def _routines(routines, io: _IO):
    """C routines from encoded words (bytes), uint64 arrays or op lists."""
    if not routines:
        return ffi.NULL, None
    if isinstance(routines, (str, bytes, bytearray, Mapping, np.ndarray)) or \
            not isinstance(routines, Iterable):
        raise ProgramError(f"routines=: expected a list of routines (op lists, encoded bytes or "
                           f"uint64 arrays), not {type(routines).__name__}")
    parts = []
    for i, r in enumerate(routines):
        if isinstance(r, (bytes, bytearray)):
            if len(r) % 8:
                raise ProgramError(f"routine {i}: {len(r)} bytes is no whole number of 64-bit "
                                   f"words")
            parts.append(bytes(r))
        elif isinstance(r, np.ndarray):
            if r.dtype.kind not in "iu":
                raise ProgramError(f"routine {i}: an encoded routine is a uint64 array, not "
                                   f"{r.dtype}")
            parts.append(np.ascontiguousarray(r, dtype=np.uint64).tobytes())
        else:
            parts.append(_encode(r, io.index, f"routine {i}").tobytes())
    words = b"".join(parts)
    offsets = array("I", [0])
    total = 0
    for part in parts:
        total += len(part) >> 3
        offsets.append(total)
    c = ffi.new("stackptx_routines *")
    keep = (words, offsets)
    c.words = ffi.from_buffer("uint64_t[]", words) if words else ffi.NULL
    c.offsets = ffi.from_buffer("uint32_t[]", offsets)
    c.n = len(parts)
    return c, keep


def _status_name(code: int) -> str:
    return ffi.string(lib.stackptx_status_string(code)).decode()


_DIAG_SIZE = ffi.sizeof("stackptx_diag")


def compile_words(mode: str, prog, inputs, outputs, *, site=None, routines=(), strict=False,
                  limits=None) -> Stub:
    """Compile one program with the Stack PTX (mode "stack") or AST PTX (mode "ast") core."""
    io = _io_for(inputs, outputs, site)
    if prog.__class__ is not list:
        prog = _as_program(prog)
    words, n, keep = _words(prog, io)
    rts, rkeep = _routines(routines, io) if routines else (ffi.NULL, None)
    try:
        return _compile_c(mode, io, limits, words, n, rts, strict, prog)
    finally:
        del keep, rkeep


def compile_lowered(mode: str, words: bytes, input_names: Sequence[str],
                    rename: Mapping | None, inputs, outputs, *, site=None,
                    routines: Sequence[bytes] = (), strict: bool = False, limits=None) -> Stub:
    """Compile an encoded program whose input words refer to ``input_names`` by position
    (after ``rename``: each is a site variable or an ``inputs`` register). The compile's
    inputs are laid out in that order, so the words go to the C core as they are: the DSL's
    path, no op objects on the way."""
    if rename:
        input_names = tuple([rename.get(n, n) for n in input_names])
    io = _io_ordered(inputs, outputs, site, input_names)
    cw = ffi.from_buffer("uint64_t[]", words)
    rts, rkeep = _routines(routines, io) if routines else (ffi.NULL, None)
    try:
        return _compile_c(mode, io, limits, cw, len(words) >> 3, rts, strict, None)
    finally:
        del rkeep


def _io_ordered(inputs, outputs, site, names: tuple) -> _IO:
    """Like :func:`_io_for`, with the inputs ``names`` first, in that order."""
    if site is not None:
        key = (id(site), names)
        io = _io_cache.get(key)
        if io is not None and io._keep[1] is site:
            return io
        if isinstance(site, str) or not hasattr(site, "inputs") or not hasattr(site, "outputs"):
            hint = f" (pass inj.sites[{site!r}])" if isinstance(site, str) else ""
            raise ProgramError(f"site= takes a numptx Site, not {type(site).__name__}{hint}; or "
                               f"pass inputs=/outputs=")
        ins, outs = list(site.inputs), site.outputs
        what = f"site {site.name!r}"
    else:
        inputs, outputs = dict(inputs or {}), dict(outputs or {})
        key = (*inputs.items(), None, *outputs.items(), None, *names)
        io = _io_cache.get(key)
        if io is not None:
            return io
        ins = [_Reg(n, n, t) for n, t in inputs.items()]
        outs = [_Reg(n, n, t) for n, t in outputs.items()]
        what = "inputs"
    by_name = {v.name: v for v in ins}
    missing = [n for n in names if n not in by_name]
    if missing:
        known = ", ".join(map(repr, by_name)) or "none"
        raise ProgramError(f"input({missing[0]!r}): no input named {missing[0]!r} in {what} "
                           f"(inputs: {known})")
    ordered = [by_name[n] for n in names] + [v for v in ins if v.name not in names]
    # a name the program reads at two positions (a parameter and the pass-through of the same
    # mod variable; two parameters bound to one register) gets a second input on the same
    # register under a private program name
    prog_names, seen = [], set()
    for k, v in enumerate(ordered):
        prog_names.append(v.name if v.name not in seen else f"{v.name}\x00{k}")
        seen.add(v.name)
    io = _IO(prog_names, [v.reg for v in ordered],
             [_value_type(v.dtype, f"{what} variable {v.name!r}") for v in ordered],
             [v.reg for v in outs],
             [_value_type(v.dtype, f"{what} variable {v.name!r}") for v in outs])
    io._keep = (io._keep, site)          # the id() in the key stays valid while cached
    _cache_put(key, io)
    return io


class _Reg:
    """A register of an ``inputs=``/``outputs=`` compile, shaped like a site variable."""
    __slots__ = ("name", "reg", "dtype")

    def __init__(self, name: str, reg: str, dtype: str):
        self.name, self.reg, self.dtype = name, reg, dtype


def _compile_c(mode: str, io: _IO, limits, words, n: int, rts, strict: bool, prog) -> Stub:
    table = _table()
    lim_key, lim = _limits_c(limits)
    s = _scratch
    need = io.workspace_size(lim_key, lim)
    if s.ws_size < need:
        s.ws, s.ws_size = ffi.new("char[]", need), need
    if s.out is None:
        s.out, s.out_size = ffi.new("char[]", 1 << 14), 1 << 14
    diag, out_len = s.diag, s.out_len
    for _ in range(2):
        if mode == "stack":
            st = lib.stackptx_compile(table, io.c, lim, words, n, rts, 1 if strict else 0, s.ws,
                                      s.ws_size, s.out, s.out_size, out_len, diag)
        else:
            st = lib.astptx_compile(table, io.c, lim, words, n, rts, s.ws, s.ws_size, s.out,
                                    s.out_size, out_len, diag)
        if st != lib.STACKPTX_ERR_BUFFER_TOO_SMALL:
            break
        s.out_size = out_len[0] + 4096
        s.out = ffi.new("char[]", s.out_size)
    d = ffi.buffer(diag, _DIAG_SIZE)[:]
    if st == lib.STACKPTX_OK:
        return Stub(ffi.unpack(s.out, out_len[0]).decode(), io.in_names, io.out_types, d)
    if st == lib.STACKPTX_ERR_STRICT_UNSATISFIED:
        raise ProgramError("strict compile: " + "; ".join(Stub("", io.in_names, io.out_types, d).diagnostics))
    error_word = _diag_fields(d)[8]
    if mode == "ast" and error_word != 0xFFFFFFFF:
        ops = prog if prog is not None and not isinstance(prog, np.ndarray) else None
        shown = f" ({_op_at(ops, error_word)!r})" if ops is not None else ""
        index = _op_index(ops, error_word) if ops is not None else error_word
        what = _status_name(st)   # the core's text already names AST PTX ("AST PTX: ...")
        raise ASTError(f"{what if what.startswith('AST PTX') else 'AST PTX: ' + what} at op "
                       f"{index}{shown}", index=index, code=what)
    raise ProgramError(f"{mode} PTX compile failed: {_status_name(st)}")


ROOT_INPUT = 1 << 63       # a dag_lower root that pushes input k as it is


class _LowerScratch(threading.local):
    def __init__(self):
        self.ws, self.ws_size = None, 0
        self.out, self.out_cap = None, 0
        self.cells = ffi.new("size_t[1]"), ffi.new("uint32_t[3]")


_lscratch = _LowerScratch()


def lower_dag(rec: Sequence[int], roots: Sequence[int], n_nodes: int) -> tuple[bytes, int, int]:
    """Stack PTX words for a DAG record (native/dag_lower.h): (words, slots, instructions)."""
    s = _lscratch
    n_rec = len(rec)
    ws_need = lib.dag_lower_workspace_size(min(n_rec, 0x10000000))
    if s.ws_size < ws_need:
        s.ws, s.ws_size = ffi.new("char[]", ws_need), ws_need
    cap = 9 * n_nodes + 2 * len(roots) + 8
    if s.out_cap < cap:
        s.out, s.out_cap = ffi.new("uint64_t[]", cap), cap
    out_len, cells = s.cells
    # (an array converts a list of ints far faster than ffi.new does)
    crec = ffi.from_buffer("uint64_t[]", array("Q", rec)) if rec else ffi.NULL
    croots = ffi.from_buffer("uint64_t[]", array("Q", roots)) if roots else ffi.NULL
    st = lib.dag_lower(_table(), crec, n_rec, croots, len(roots), s.ws, s.ws_size, s.out,
                       s.out_cap, out_len, cells, cells + 1, cells + 2)
    if st != lib.STACKPTX_OK:
        raise ProgramError(f"DAG lowering failed: {_status_name(st)} (record word or root "
                           f"{cells[2]})")
    return ffi.buffer(s.out, out_len[0] * 8)[:], cells[0], cells[1]


def _op_index(ops, word_index: int) -> int:
    """Index in ``ops`` of the op that encodes word ``word_index`` (64-bit constants take two)."""
    w = 0
    for i, op in enumerate(ops):
        if w >= word_index:
            return i
        w += 1 + (op.extra is not None)
    return len(ops)


def _op_at(ops, word_index: int):
    i = _op_index(ops, word_index)
    return ops[i] if i < len(ops) else "end of program"


def compile_words_many(programs, inputs, outputs, *, site=None, routines=(), strict=False,
                       limits=None) -> list[Stub]:
    """Compile a batch with one call of the C loop (which runs with the GIL released)."""
    io = _io_for(inputs, outputs, site)
    if not isinstance(programs, list):
        if isinstance(programs, (str, bytes, Mapping)) or not isinstance(programs, Iterable):
            raise ProgramError(f"compile_many: expected a list of programs (op lists or uint64 "
                               f"arrays), not {type(programs).__name__}")
        programs = list(programs)
    table = _table()
    lim_key, lim = _limits_c(limits)
    n = len(programs)
    if n == 0:
        return []
    if all(isinstance(p, np.ndarray) for p in programs):
        for p in programs:
            if p.dtype != np.uint64 or p.ndim != 1:
                raise ProgramError("compile_many: encoded programs are 1-D uint64 arrays")
        allw = np.concatenate(programs)
        lens = [len(p) for p in programs]
    else:
        parts = []
        for i, p in enumerate(programs):
            if isinstance(p, np.ndarray):
                if p.dtype.kind not in "iu" or p.ndim != 1:
                    raise ProgramError(f"compile_many: program {i}: encoded programs are 1-D "
                                       f"uint64 arrays, not {p.dtype} {p.shape}")
                parts.append(np.asarray(p, dtype=np.uint64))
            else:
                w = _encode_fast(p, io.name_words)
                if w is None:
                    if not isinstance(p, (list, tuple)) and isinstance(p, Iterable) and \
                            not isinstance(p, (str, bytes, Mapping)):
                        # a one-shot iterator the fast path consumed: the ops are gone
                        raise ProgramError(f"compile_many: program {i} holds an item that is "
                                           f"no op (or an unknown input); pass lists of ops")
                    w = _encode(p, io.index, f"compile_many: program {i}").tobytes()
                parts.append(np.frombuffer(w, dtype=np.uint64))
        allw = np.concatenate(parts)
        lens = [len(p) for p in parts]
    offsets = np.zeros(n + 1, dtype=np.uint32)
    np.cumsum(lens, out=offsets[1:])
    rts, rkeep = _routines(routines, io)
    ws = ffi.new("char[]", io.workspace_size(lim_key, lim))
    diags = ffi.new("stackptx_diag[]", n)
    n_done = ffi.new("uint32_t *")
    cap = max(1 << 16, n * 512)
    texts: list[str] = []
    bounds: list[int] = []
    done = 0
    wptr = ffi.from_buffer("uint64_t[]", allw) if len(allw) else ffi.NULL
    while done < n:
        out = ffi.new("char[]", cap)
        oo = np.zeros(n - done + 1, dtype=np.uint32)
        st = lib.stackptx_compile_many(table, io.c, lim, wptr, ffi.from_buffer("uint32_t[]", offsets[done:]),
                                       n - done, rts, 1 if strict else 0, ws, len(ws), out, cap,
                                       ffi.from_buffer("uint32_t[]", oo), diags + done, n_done)
        k = n_done[0] if st != lib.STACKPTX_ERR_STRICT_UNSATISFIED else n - done
        if k:
            text = ffi.unpack(out, int(oo[k])).decode()
            ends = oo[:k + 1].tolist()
            texts += [text[a:b] for a, b in zip(ends, ends[1:])]
        done += k
        if st in (lib.STACKPTX_OK, lib.STACKPTX_ERR_STRICT_UNSATISFIED):
            break
        if st == lib.STACKPTX_ERR_BUFFER_TOO_SMALL:
            cap *= 2 if k else 4
            continue
        raise ProgramError(f"compile_many failed at program {done}: {_status_name(st)}")
    del rkeep
    raw = ffi.buffer(diags, n * _DIAG_SIZE)[:]
    in_names, out_types = io.in_names, io.out_types
    new, size, stubs = str.__new__, _DIAG_SIZE, []
    append = stubs.append
    for i, text in enumerate(texts):           # Stub(...) inlined: this loop is per program
        stub = new(Stub, text)
        stub._meta = (in_names, out_types, raw[i * size:(i + 1) * size])
        append(stub)
    if strict:
        bad = [i for i, stub in enumerate(stubs) if stub.unsatisfied]
        if bad:
            raise ProgramError(f"strict compile of program {bad[0]}: " + "; ".join(stubs[bad[0]].diagnostics))
    return stubs
