"""The stub parser of the emulator (:mod:`numptx.dsl.emulator`): PTX stub text to a
:class:`Program` of :class:`Step` s, cached per text and table version::

    from numptx.dsl.ptx_parse import parse
    prog = parse("add.rn.f32 %z, %x, %y;", TABLE.uid, TABLE.version)
    prog.steps[0].instr.name, prog.steps[0].dests        # ('add.rn.f32', (('z',),))

What a stub may hold, and how values read and convert, is the emulator's documentation; a
stub it cannot take raises :class:`EmulationError` naming the line.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from .. import semantics as S
from .._text import split_top
from ..errors import NumptxError
from .. import instructions as _instructions
from ..instructions import NP_DTYPE, TYPES, UnknownInstructionError, parse_type_spec
from ..instruction_model import ptx_slot_types
from ..instructions_mmptx import VECTOR_SPECIALS
from ..valuetypes import FLOATS, INTS, ptx_compatible

__all__ = ["EmulationError", "Const", "Reg", "Operand", "Step", "Program", "parse", "convert",
           "reg_shown", "LANE_DEFAULT"]


class EmulationError(NumptxError):
    """A stub the emulator cannot run; ``line`` (1-based) and ``text`` locate the stub line."""

    def __init__(self, message: str, *, line: int | None = None, text: str | None = None):
        self.line, self.text = line, text
        where = f"stub line {line}: {text!r}: " if line is not None else ""
        super().__init__(where + message)


# PTX type suffixes of mov and .reg -> numptx type (u16/s16 use the 16-bit bit type)
_PTX_TYPE = {t: t for t in TYPES}
_PTX_TYPE.update({"u16": "b16", "s16": "b16"})
_BIT_TYPES = ("b16", "b32", "b64", "f16x2", "bf16x2")
_FLOAT_TYPES = FLOATS
_INT_TYPES = INTS
_FLOAT_OF_SIZE = {2: np.float16, 4: np.float32, 8: np.float64}
LANE_DEFAULT = ("%laneid", "%tid.x")

_REG = re.compile(r"^%[A-Za-z_$][\w$.]*$")
_DECL = re.compile(r"^(%[A-Za-z_$][\w$]*)(?:<(\d+)>)?$")
_GUARD = re.compile(r"^@\s*(!?)\s*(%[A-Za-z_$][\w$.]*)\s+(.*)$", re.S)   # ptxas takes "@ ! %p" too
_INT_LIT = re.compile(r"^[+-]?(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)[uU]?$")
_FLOAT_LIT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")


# ------------------------------------------------------------------------------ parsed program
@dataclass(frozen=True)
class Const:
    value: np.ndarray        # 1-element array, canonical dtype of the reading type


@dataclass(frozen=True)
class Reg:
    name: str                # without '%'
    special: bool = False    # a special register (%tid.x ...): value from inputs or default


Operand = Any  # Const | Reg


@dataclass(frozen=True)
class Step:
    line: int
    text: str
    kind: str                            # "instr" | "mov"
    instr: Any                           # Instr for kind == "instr"
    dests: tuple                         # per result slot: tuple of register names
    dest_types: tuple                    # per result slot: type name
    srcs: tuple                          # per operand slot: tuple of Operand
    src_types: tuple                     # per operand slot: type name (of each component)
    guard: tuple | None = None           # (register name, negate)
    src_widths: tuple = ()               # per operand slot: vector width (1 = scalar)
    dest_widths: tuple = ()              # per result slot


@dataclass(frozen=True)
class Program:
    steps: tuple
    declared: Mapping[str, str]          # register (without %) -> numptx type
    inner: Mapping[str, int]             # name declared inside a block -> first such stub line


# an inner declaration's register: "<name>#<k>" ('#' never occurs in PTX names)
def reg_shown(key: str) -> str:
    """A register key as PTX shows it (an inner declaration's "name#k" -> "name")."""
    return key.split("#", 1)[0]


class _Scopes:
    """PTX block scoping while parsing: a ``.reg`` inside ``{ }`` gets a register of its own
    (``name#k``), which the names in that block resolve to until its ``}``. Top-level
    declarations are the outer registers themselves (the site's scope)."""

    def __init__(self):
        self.stack: list[dict[str, str]] = []       # one dict per open block
        self.opened: list[tuple[int, str]] = []     # (line, text) of each open '{'
        self.serial = 0
        self.inner: dict[str, int] = {}
        self.ptx_types: dict[str, str] = {}         # register key -> its .reg type as written

    def open(self, lineno: int, line: str) -> None:
        self.stack.append({})
        self.opened.append((lineno, line.strip()))

    def close(self, lineno: int, line: str) -> None:
        if not self.stack:
            raise EmulationError("'}' closes no block", line=lineno, text=line.strip())
        self.stack.pop()
        self.opened.pop()

    def declare(self, name: str, lineno: int) -> str:
        if not self.stack:
            return name
        self.serial += 1
        key = f"{name}#{self.serial}"
        self.stack[-1][name] = key
        self.inner.setdefault(name, lineno)
        return key

    def resolve(self, name: str) -> str:
        for scope in reversed(self.stack):
            key = scope.get(name)
            if key is not None:
                return key
        return name


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.split("\n"))


def _split_top(s: str) -> list[str]:
    """Split operands on commas outside braces."""
    return split_top(s, "{", "}")


def _literal_value(tok: str, t: str) -> np.ndarray:
    """A literal token as a 1-element array of type t's canonical dtype (ValueError if bad)."""
    dt = NP_DTYPE[t]
    low = tok.lower()
    body = low.lstrip("+-")
    neg = low.startswith("-")
    if body.startswith(("0f", "0d")) and len(body) > 2:
        nbits = 32 if body[1] == "f" else 64
        digits = body[2:]
        if not re.fullmatch(r"[0-9a-f]+", digits) or len(digits) > nbits // 4:
            raise ValueError(f"bad {'0f' if nbits == 32 else '0d'} literal")
        src = np.array([int(digits, 16)], np.uint32 if nbits == 32 else np.uint64)
        src = src.view(np.float32 if nbits == 32 else np.float64)
        if neg:
            src = -src
        return convert(src, t, as_value=False)
    if _INT_LIT.match(low):
        digits = body.rstrip("u")
        v = int(digits, 8) if re.fullmatch(r"0[0-7]+", digits) else int(digits, 0)
        v = -v if neg else v
        if t in ("f32", "f64"):
            raise ValueError("PTX takes no integer literal for f32/f64 operands: write 0f.../0d... "
                             "or a decimal like 1.0")
        if t == "pred":
            if v not in (0, 1):
                raise ValueError("a predicate literal is 0 or 1")
            return np.array([bool(v)])
        bits = dt.itemsize * 8
        u = v % (1 << bits)
        udt = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
        return np.array([u], udt).view(dt)
    if _FLOAT_LIT.match(low) and t in _FLOAT_TYPES:
        return convert(np.array([float(low)]), t, as_value=True)
    raise ValueError(f"not a literal of type {t}")


def convert(arr: np.ndarray, t: str, *, as_value: bool) -> np.ndarray:
    """Read ``arr`` as type t: bit reinterpretation when the sizes match and ``as_value`` is
    false, else a value conversion."""
    dt = NP_DTYPE[t]
    if arr.dtype == dt:
        return arr
    if arr.dtype.kind in "OUSV" or arr.dtype.kind == "c":
        raise TypeError(f"cannot use an array of dtype {arr.dtype} as {t}")
    if t == "pred":
        return arr != 0
    if not as_value and arr.dtype.itemsize == dt.itemsize and arr.dtype != np.bool_:
        return arr.view(dt)
    kind = arr.dtype.kind
    if t in _BIT_TYPES:
        if kind == "f":                                  # the bits of that float at t's width
            return arr.astype(_FLOAT_OF_SIZE[dt.itemsize]).view(dt)
        return arr.astype(dt)
    if t == "bf16":
        if kind in "iu":
            return S.int_to_float(arr.astype(np.int64 if kind == "i" else np.uint64),
                                  "s64" if kind == "i" else "u64", "bf16")
        return S.from_float(arr.astype(np.float64), "bf16")
    if t in _INT_TYPES and kind in "iub" or t in ("f16", "f32", "f64"):
        return arr.astype(dt)
    with np.errstate(invalid="ignore"):
        return arr.astype(dt)                            # float -> int: C truncation


def _operand(tok: str, t: str, scopes: _Scopes) -> Operand:
    if tok.startswith("%"):
        if not _REG.match(tok):
            raise ValueError(f"bad register name {tok!r}")
        table = _instructions.TABLE
        special = tok in table and table[tok].is_special
        return Reg(tok, True) if special else Reg(scopes.resolve(tok[1:]))
    try:
        return Const(_literal_value(tok, t))
    except ValueError as e:
        raise ValueError(f"bad operand {tok!r} for type {t}: {e}") from None


def _check_fit(ops, t: str, scopes: "_Scopes", what: str, *, wider: bool = False) -> None:
    """Refuse a register declared in the stub whose type an operand of PTX type ``t`` may not
    be (``add.u32`` on a ``.reg .f32``; ``wider``: cvt's relaxed rule): ptxas refuses it.
    Registers the stub does not declare (the site's) are not known here."""
    for o in ops:
        if isinstance(o, Reg) and not o.special:
            have = scopes.ptx_types.get(o.name)
            if have is not None and not ptx_compatible(t, have, wider=wider):
                raise ValueError(f"{what}: register %{reg_shown(o.name)} is declared .{have}, "
                                 f"which an operand of type .{t} cannot be (ptxas refuses it "
                                 f"too)")


def _slot_tokens(tok: str) -> list[str]:
    tok = tok.strip()
    if tok.startswith("{"):
        if not tok.endswith("}"):
            raise ValueError(f"unbalanced braces in {tok!r}")
        return [p.strip() for p in tok[1:-1].split(",")]
    return [tok]


def _parse_statement(stmt: str, lineno: int, line: str, declared: dict,
                     scopes: _Scopes) -> Step | None:
    err = functools.partial(EmulationError, line=lineno, text=line.strip())
    stmt = stmt.strip()
    while stmt[:1] in ("{", "}"):
        if stmt[0] == "{":
            scopes.open(lineno, line)
        else:
            scopes.close(lineno, line)
        stmt = stmt[1:].strip()
    if not stmt:
        return None
    if stmt.startswith("."):
        parts = stmt.split(None, 2)
        if parts[0] != ".reg" or len(parts) < 3 or not parts[1].startswith("."):
            raise err(f"unsupported directive {parts[0]!r} (only '.reg .<type> %name, ...;')")
        raw = parts[1][1:]
        t = _PTX_TYPE.get(raw)
        if raw in ("bf16", "bf16x2"):
            raise err(f"ptxas has no .{raw} registers: declare .b{16 if raw == 'bf16' else 32}")
        if t is None:
            raise err(f"unsupported register type {parts[1]!r}")
        for name in _split_top(parts[2]):
            m = _DECL.match(name)
            if not m:
                raise err(f"bad register declaration {name!r}")
            names = ([f"{m.group(1)[1:]}{k}" for k in range(int(m.group(2)))] if m.group(2)
                     else [m.group(1)[1:]])
            for n in names:
                key = scopes.declare(n, lineno)
                declared[key], scopes.ptx_types[key] = t, raw
        return None
    guard = None
    g = _GUARD.match(stmt)
    if g:
        guard = (scopes.resolve(g.group(2)[1:]), g.group(1) == "!")
        if scopes.ptx_types.get(guard[0], "pred") != "pred":
            raise err(f"a guard is a predicate: {g.group(2)} is declared "
                      f".{scopes.ptx_types[guard[0]]}")
        stmt = g.group(3).strip()
    parts = stmt.split(None, 1)
    opcode, rest = parts[0], (parts[1] if len(parts) > 1 else "")
    toks = _split_top(rest) if rest.strip() else []
    try:
        if opcode.startswith("mov."):
            return _parse_mov(opcode, toks, lineno, line, guard, scopes)
        try:
            ins = _instructions.TABLE.by_opcode(opcode)
        except UnknownInstructionError as e:
            raise err(str(e)) from None
        if len(toks) != ins.n_slots:
            raise err(f"{opcode} takes {ins.n_slots} operands ({len(ins.results)} result(s) then "
                      f"{len(ins.operands)} source(s)), got {len(toks)}")
        specs = [parse_type_spec(s) for s in ins.results + ins.operands]
        ptx_types = ptx_slot_types(ins)
        slots = []
        for k, (tok, (t, w)) in enumerate(zip(toks, specs)):
            parts_ = _slot_tokens(tok)
            vec = tok.strip().startswith("{") and not (w == 1 and f"{{${k}}}" in ins.fmt)
            if (w > 1) != vec or len(parts_) != w:
                raise err(f"operand {k} ({tok!r}) of {opcode} must be "
                          + (f"a vector of {w} registers {{...}}" if w > 1 else "a single value"))
            slots.append(tuple(_operand(p, t, scopes) for p in parts_))
            ptx_t, wider = ptx_types[k]
            _check_fit(slots[-1], ptx_t, scopes, f"operand {k} of {opcode}", wider=wider)
        nres = len(ins.results)
        dests = []
        for k in range(nres):
            if not all(isinstance(o, Reg) and not o.special for o in slots[k]):
                raise err(f"result operand {k} of {opcode} must be a register")
            dests.append(tuple(o.name for o in slots[k]))
        return Step(lineno, line.strip(), "instr", ins, tuple(dests),
                     tuple(t for t, _ in specs[:nres]), tuple(slots[nres:]),
                     tuple(t for t, _ in specs[nres:]), guard,
                     tuple(w for _, w in specs[nres:]), tuple(w for _, w in specs[:nres]))
    except ValueError as e:
        raise err(str(e)) from None


def _parse_vector_special(opcode: str, toks: list[str], guard, lineno: int, line: str,
                          scopes: _Scopes) -> Step:
    """``mov.v4.u32 {%a, %b, %c, %d}, %tid;``: a vector special register read as its components
    (``%tid.x``, ``%tid.y``, ``%tid.z``; the 4th reads 0)."""
    m = re.fullmatch(r"mov\.v(2|4)\.(\w+)", opcode)
    t = _PTX_TYPE.get(m.group(2)) if m else None
    if t is None or len(toks) != 2:
        raise ValueError(f"unsupported mov {opcode!r} (a vector mov reads a vector special "
                         f"register: 'mov.v4.u32 {{%a, %b, %c, %d}}, %tid;')")
    comps = VECTOR_SPECIALS.get(toks[1].strip())
    d_parts = _slot_tokens(toks[0])
    k = int(m.group(1))
    if comps is None or len(d_parts) != k:
        raise ValueError(f"{opcode}: the source must be a vector special register "
                         f"({', '.join(sorted(VECTOR_SPECIALS))}) and the destination "
                         f"{{...}} of {k} registers")
    dests = tuple(_operand(p, t, scopes) for p in d_parts)
    if not all(isinstance(o, Reg) and not o.special for o in dests):
        raise ValueError(f"the destination of {opcode} must be registers")
    _check_fit(dests, m.group(2), scopes, f"the destination of {opcode}")
    srcs = tuple(Reg(c, True) for c in comps[:k])
    srcs += tuple(Const(np.zeros(1, NP_DTYPE[t])) for _ in range(k - len(srcs)))
    return Step(lineno, line.strip(), "mov", None, (tuple(o.name for o in dests),), (t,),
                 (srcs,), (t,), guard)


def _parse_mov(opcode: str, toks: list[str], lineno: int, line: str, guard,
               scopes: _Scopes) -> Step:
    if opcode.startswith("mov.v"):
        return _parse_vector_special(opcode, toks, guard, lineno, line, scopes)
    raw = opcode[4:]
    t = _PTX_TYPE.get(raw)
    if t is None:
        raise ValueError(f"unsupported mov type {opcode!r}")
    if len(toks) != 2:
        raise ValueError(f"{opcode} takes 2 operands, got {len(toks)}")
    d_parts, s_parts = _slot_tokens(toks[0]), _slot_tokens(toks[1])
    if len(d_parts) > 1 and len(s_parts) > 1:
        raise ValueError("mov cannot have vectors on both sides")
    k = max(len(d_parts), len(s_parts))
    if k > 1:                                  # pack / unpack: components of width/k bits
        width = NP_DTYPE[t].itemsize * 8 if t != "pred" else 0
        comp = {16: "b16", 32: "b32"}.get(width // k) if width % k == 0 else None
        if raw not in ("b32", "b64") or comp is None:      # PTX packs with mov.b32/.b64 only
            raise ValueError(f"{opcode}: cannot pack/unpack {k} components (PTX packs and "
                             f"unpacks with mov.b32 / mov.b64)")
    else:
        comp = t
    dtype = comp if len(d_parts) > 1 else t
    stype = comp if len(s_parts) > 1 else t
    dests = tuple(_operand(p, dtype, scopes) for p in d_parts)
    if not all(isinstance(o, Reg) and not o.special for o in dests):
        raise ValueError(f"the destination of {opcode} must be a register")
    srcs = tuple(_operand(p, stype, scopes) for p in s_parts)
    part = f"b{width // k}" if k > 1 else raw
    _check_fit(dests, part if len(d_parts) > 1 else raw, scopes, f"the destination of {opcode}")
    _check_fit(srcs, part if len(s_parts) > 1 else raw, scopes, f"the source of {opcode}")
    return Step(lineno, line.strip(), "mov", None, (tuple(o.name for o in dests),), (dtype,),
                 (srcs,), (stype,), guard)


@functools.lru_cache(maxsize=512)
def parse(text: str, table_uid: int, table_version: int) -> Program:
    steps: list[Step] = []
    declared: dict[str, str] = {}
    scopes = _Scopes()
    raw_lines = text.split("\n")
    for lineno, line in enumerate(_strip_comments(text).split("\n"), 1):
        if not line.strip():
            continue
        for stmt in line.split(";"):
            step = _parse_statement(stmt, lineno, raw_lines[lineno - 1], declared, scopes)
            if step is not None:
                steps.append(step)
    if scopes.opened:
        lineno, line = scopes.opened[-1]
        raise EmulationError("'{' is never closed", line=lineno, text=line)
    return Program(tuple(steps), declared, scopes.inner)
