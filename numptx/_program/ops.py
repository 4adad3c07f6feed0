"""Program ops: the :class:`Op` word and the calls that make them (``input``, ``const``,
``instr``, ``special``), shared by Stack PTX and AST PTX::

    from numptx._program import const, instr
    prog = [const(1.5, "f32"), const(2.0, "f32"), instr("add.rn.f32")]
    prog[0].word == 2 | 5 << 8 | 0x3FC00000 << 32      # CONST, type f32, the bits

The word layout is docs/design/programs.md, section 3; the kinds are numptx/opkinds.py.
"""
from __future__ import annotations

import math
import struct

import numpy as np

from ..errors import NumptxError
from ..instructions import TABLE, TYPE_ID, TYPES
from ..opkinds import CONST, CONST64, INPUT, INSTR, KIND_NAMES
from ..semantics import bf16_bits
from ..valuetypes import BY_NAME, WIDE

__all__ = ["ProgramError", "ASTError", "Op", "type_id", "input", "const", "instr", "special",
           "DIALECTS", "dialect_id", "dialect_marker", "marker_dialect"]

U64 = struct.Struct("<Q")


class ProgramError(NumptxError):
    """A bad Stack PTX / AST PTX program, op or compile request."""


class ASTError(ProgramError):
    """A strict AST PTX error; ``index`` is the index of the op at fault (or None)."""

    def __init__(self, message: str, *, index: int | None = None, code: str | None = None):
        self.index, self.code = index, code
        super().__init__(message)


# The Stack PTX dialects, in the C core's order (stackptx_limits.dialect): numptx's own
# semantics, and mm-ptx's (docs/dialects.md). Append only.
DIALECTS: tuple[str, ...] = ("numptx", "mm-ptx")


def dialect_id(dialect: str, context: str = "") -> int:
    """Index of a Stack PTX dialect in :data:`DIALECTS` (``"mm-ptx"`` -> 1)."""
    try:
        return DIALECTS.index(dialect)
    except (ValueError, TypeError):
        where = f"{context}: " if context else ""
        raise ProgramError(f"{where}unknown dialect {dialect!r}; the dialects are "
                           f"{', '.join(map(repr, DIALECTS))} (numptx is the default; mm-ptx runs "
                           f"programs written for MetaMachines' mm-ptx)") from None


# A program's dialect travels in its words: word 0 is a marker, a NOP (which every core runs
# as a no-op) whose unused a/b fields hold MARKER_MAGIC and the dialect id in b's low byte
# (native/stack_ptx.h, WORDS; docs/design/programs.md). Compiles strip it before the C core, so
# step counts do not change; numptx-dialect encodings carry none (their words are unchanged).
MARKER_MASK = 0xFFFFFF00_FFFFFFFF                  # every bit but the dialect id
MARKER_MAGIC = 0x4E584400_D1A10000                 # b = "NXD" << 8 | id, a = 0xD1A1, kind NOP


def marker_dialect(word: int) -> int | None:
    """The dialect index a marker word names, or None for any other word."""
    return (word >> 32) & 0xFF if word & MARKER_MASK == MARKER_MAGIC else None


def dialect_marker(dialect: str) -> Op:
    """The marker op that makes a program's dialect part of its words (``sp.encode(...,
    dialect="mm-ptx")`` starts with it; :func:`decode` returns it). Only word 0 counts."""
    d = dialect_id(dialect, "dialect_marker")
    return Op(MARKER_MAGIC | d << 32, 0, text=f"dialect_marker({dialect!r})")


def type_id(dtype: str, context: str = "") -> int:
    """Index of a value type in ORDER TYPES (``"f32"`` -> 5)."""
    try:
        return TYPE_ID[str(dtype).lower()]
    except KeyError:
        where = f"{context}: " if context else ""
        raise ProgramError(f"{where}unknown value type {dtype!r}; use one of {', '.join(TYPES)}") from None


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
                    U64.pack(self.word) if extra is None else U64.pack(self.word) + U64.pack(extra))

    @property
    def kind(self) -> str:
        return KIND_NAMES[self.word & 0xFF] if (self.word & 0xFF) < len(KIND_NAMES) else "?"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Op) and self.word == other.word and self.extra == other.extra
                and self.name == other.name)

    def __hash__(self) -> int:
        return hash((self.word, self.extra, self.name))

    def __repr__(self) -> str:
        return self.text or _shown(self)


_F32_ID, _F64_ID = TYPE_ID["f32"], TYPE_ID["f64"]
_F32S, _U32S, _F64S = struct.Struct("<f"), struct.Struct("<I"), struct.Struct("<d")


def _shown(op: Op) -> str:
    """The repr of an op made without its text: an f32 or f64 constant shows the
    ``const(...)`` call that makes it (ops the search writes in bulk carry no text: formatting
    a float costs more than the op), anything else its word."""
    kind, t = op.word & 0xFF, op.word >> 8 & 0xFF
    if kind == CONST and t == _F32_ID:
        v = _F32S.unpack(_U32S.pack(op.word >> 32 & 0xFFFF_FFFF))[0]
        return f"const({v!r}, 'f32')"
    if kind == CONST64 and t == _F64_ID and op.extra is not None:
        return f"const({_F64S.unpack(U64.pack(op.extra))[0]!r}, 'f64')"
    return f"Op(0x{op.word:016x})"


def input(ref: str | int, *, tag: int | None = None) -> Op:
    """Push an input, by name (resolved against ``inputs=`` at compile time) or by index.
    ``tag=`` (with an index) is the name tag an encoded word carries (what :func:`decode` gives
    for a tagged word whose name it was not told): the compile binds it by that tag."""
    if isinstance(ref, str):
        if not ref:
            raise ProgramError("input(''): an input needs a name")
        if tag is not None:
            raise ProgramError(f"input({ref!r}, tag=...): a named input gets its tag from its name")
        return Op(INPUT, 0, name=ref, text=f"input({ref!r})")
    if isinstance(ref, (int, np.integer)) and not isinstance(ref, bool) and 0 <= int(ref) < 1 << 16:
        if tag is None or tag == 0:
            return Op(INPUT, int(ref) << 16, text=f"input({int(ref)})")
        if isinstance(tag, (int, np.integer)) and not isinstance(tag, bool) and 0 < tag < 1 << 32:
            return Op(INPUT, int(ref) << 16 | int(tag) << 32,
                      text=f"input({int(ref)}, tag=0x{int(tag):08x})")
        raise ProgramError(f"input({ref!r}, tag={tag!r}): a tag is an int in [1, 2**32)")
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
    text = f"const({value!r}, {TYPES[t]!r})"
    name = BY_NAME[TYPES[t]].base or TYPES[t]      # a stack type's constants are its base's
    if name in WIDE:
        if name == "f64":
            bits = int(np.float64(_float_value(value, name, text)).view(np.uint64))
        else:
            bits = _int_payload(value, 64, BY_NAME[name].kind == "signed", TYPES[t])
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
    else:                                            # the integer and bit types: s32, b16...
        payload = _int_payload(value, BY_NAME[name].bits, BY_NAME[name].kind == "signed", TYPES[t])
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
