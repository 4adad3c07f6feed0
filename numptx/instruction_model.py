"""The instruction model: :class:`Instr` (one row), :class:`Table` (rows, lookup, hash), the
value-type maps, flags and type specs. The rows themselves are :mod:`numptx.instructions`, the one
table, which re-exports everything here::

    from numptx.instructions import TABLE, Instr      # the usual import
    from numptx.instruction_model import parse_type_spec
    parse_type_spec("b32[4]")                           # ('b32', 4)
"""
from __future__ import annotations

import difflib
import functools
import hashlib
import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import valuetypes as VT
from .errors import NumptxError

__all__ = [
    "TYPES", "TYPE_ID", "REG_TYPE", "NP_DTYPE", "TYPE_BITS", "FLAGS", "COMMUTATIVE", "VOLATILE",
    "APPROX", "FTZ", "SPECIAL", "BITCAST", "Instr", "Table", "parse_type_spec",
    "InstructionError", "UnknownInstructionError", "format_accuracy", "MAX_OPERANDS",
    "MAX_RESULTS", "MAX_WIDTH", "note_user_type", "user_typed", "ptx_slot_types",
]

# ORDER TYPES: derived from numptx/valuetypes.py, which owns every per-type fact (ids are
# positions; docs/design/programs.md, section 1). The user stack types join these maps when
# they are defined (numptx/stack_types.py): TYPES is valuetypes' live TypeNames.
TYPES: VT.TypeNames = VT.NAMES
TYPE_ID: dict[str, int] = {r.name: r.id for r in VT.ROWS}
REG_TYPE: dict[str, str] = {r.name: r.reg for r in VT.ROWS}
NP_DTYPE: dict[str, np.dtype] = {r.name: r.np for r in VT.ROWS}
TYPE_BITS: dict[str, int] = {r.name: r.bits for r in VT.ROWS}

FLAGS = frozenset({"commutative", "volatile", "approx", "ftz", "special", "bitcast"})
COMMUTATIVE = frozenset({"commutative"})
VOLATILE = frozenset({"volatile"})
APPROX = frozenset({"approx"})
FTZ = frozenset({"ftz"})
SPECIAL = frozenset({"special"})
BITCAST = frozenset({"bitcast"})

MAX_OPERANDS = 4
MAX_RESULTS = 4
MAX_WIDTH = 8

_SPEC = re.compile(r"^([a-z0-9_]+)(?:\[(\d+)\])?$")
_SLOT = re.compile(r"\$(\d+)")
_TABLE_UIDS = itertools.count()


class InstructionError(NumptxError, ValueError):
    """An invalid :class:`Instr`, or one that conflicts with the table."""


class UnknownInstructionError(NumptxError, KeyError):
    """No table entry of that name (or opcode); the message suggests close matches."""

    def __init__(self, message: str, *, name: str = "", suggestions: tuple[str, ...] = ()):
        self.name, self.suggestions = name, suggestions
        super().__init__(message)

    def __str__(self) -> str:            # KeyError would repr() the message
        return str(self.args[0])


def note_user_type(row: VT.ValueType) -> None:
    """Enter a user stack type (already in valuetypes) into the maps of this module."""
    TYPE_ID[row.name] = row.id
    REG_TYPE[row.name] = row.reg
    NP_DTYPE[row.name] = row.np
    TYPE_BITS[row.name] = row.bits


def user_typed(ins: "Instr") -> bool:
    """Whether a row reads or writes a user stack type."""
    return any(TYPE_ID[t] >= len(VT.ROWS) for t in ins.operand_types + ins.result_types)


_PTX_NAME = re.compile(r"(?:b|u|s|f)(?:8|16|32|64)|f16x2|bf16x2|bf16|tf32|pred")
_BRACES = re.compile(r"\{([^}]*)\}")


def ptx_slot_types(ins: "Instr") -> tuple[tuple[str, bool], ...]:
    """Per slot of ``ins`` (results first, then operands): the PTX type its registers are
    checked against and whether a wider register is allowed (``cvt``'s relaxed rule), for
    :func:`numptx.valuetypes.ptx_compatible`. The type comes from the PTX text where the row's
    value types say less: ``cvt.<dst>.<src>`` (``cvt.u32.u8`` reads a u8), ``mma``'s
    ``.d.a.b.c`` types (tf32), a ``mov.b<n>``'s whole and its ``{...}`` parts; else it is the
    row's value type (a stack type: its register type)."""
    tokens = ins.opcode.split(".")
    types = [t for t in tokens if _PTX_NAME.fullmatch(t)]
    n_res, n_ops = len(ins.results), len(ins.operands)
    if tokens[0] == "cvt" and len(types) >= 2 and n_res == 1:
        # ptxas (sm_90) relaxes a cvt's register widths unless bf16, bf16x2 or tf32 is in it
        wider = not {"bf16", "bf16x2", "tf32"} & {types[-2], types[-1]}
        return ((types[-2], wider),) + ((types[-1], wider),) * n_ops
    if tokens[0] == "mma" and len(types) >= 4 and n_res == 1 and n_ops == 3:
        return tuple((t, False) for t in types[-4:])
    if tokens[0] == "mov" and types and not ins.is_special:
        t, out = types[-1], []
        parts: dict[int, str] = {}
        for group in _BRACES.findall(ins.fmt):
            slots = [int(k) for k in _SLOT.findall(group)]
            if len(slots) > 1:
                for k in slots:
                    parts[k] = f"b{_ptx_bits(t) // len(slots)}"
        for k in range(n_res + n_ops):
            out.append((parts.get(k, t), False))
        return tuple(out)
    out = []
    for spec in ins.results + ins.operands:
        name = parse_type_spec(spec)[0]
        row = VT.BY_NAME[name]
        out.append((row.reg if row.user else name, False))
    return tuple(out)


def _ptx_bits(t: str) -> int:
    """Bits of a PTX type name (``b32`` -> 32, ``f16x2`` -> 32)."""
    m = re.fullmatch(r"[a-z]+?(8|16|32|64)(x2)?", t)
    return int(m.group(1)) * (2 if m.group(2) else 1) if m else 0


def parse_type_spec(spec: str) -> tuple[str, int]:
    """``"f32"`` -> ("f32", 1); ``"b32[4]"`` -> ("b32", 4). Raises InstructionError."""
    if isinstance(spec, str):
        return _parse_spec(spec)
    raise InstructionError(f"unknown type spec {spec!r}: expected a string like 'f32' or 'b32[4]'")


@functools.lru_cache(maxsize=None)
def _parse_spec(spec: str) -> tuple[str, int]:
    m = _SPEC.match(spec) if isinstance(spec, str) else None
    if not m or m.group(1) not in TYPE_ID:
        raise InstructionError(f"unknown type spec {spec!r}: expected one of {', '.join(TYPES)}, "
                               f"optionally with a vector width like 'b32[4]'")
    width = int(m.group(2)) if m.group(2) else 1
    if not 1 <= width <= MAX_WIDTH:
        raise InstructionError(f"type spec {spec!r}: vector width must be 1..{MAX_WIDTH}")
    return m.group(1), width


def _check_accuracy(acc: Any) -> bool:
    if acc == "exact":
        return True
    if not isinstance(acc, tuple) or not acc:
        return False
    nums = acc[1:]
    ok_nums = all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in nums)
    return ok_nums and ((acc[0] in ("ulp", "abs", "rel") and len(acc) == 2)
                        or (acc[0] == "abs_or_rel" and len(acc) == 3))


@dataclass(frozen=True)
class Instr:
    """One table row (docs/design/programs.md, section 2).

    ``semantic(*operands)`` takes one array per operand (a tuple of arrays for a vector operand)
    in the canonical representation of its type and returns the result (a tuple when there are
    several results; a vector result is a tuple of arrays).

    ``c`` is the same semantics as a C expression over the operands ``a``, ``b``, ``c`` (helpers
    of ``native/interp_ops.h``), for the batch interpreter (``native/interp.h``, generated into
    ``native/interp_rows.h`` by ``native/gen_interp.py``); empty: the interpreter refuses the
    row. ``tests/test_interp_rows.py`` holds the two to the same bits.
    """

    name: str
    fmt: str
    operands: tuple[str, ...]
    results: tuple[str, ...]
    semantic: Callable[..., Any] = field(compare=False, repr=False)
    accuracy: Any = "exact"
    flags: frozenset[str] = frozenset()
    min_sm: int = 10
    doc: str = ""
    c: str = field(default="", compare=False)

    def __post_init__(self):
        object.__setattr__(self, "operands", tuple(self.operands))
        object.__setattr__(self, "results", tuple(self.results))
        object.__setattr__(self, "flags", frozenset(self.flags))

    # ---- derived views
    @property
    def opcode(self) -> str:
        """The first whitespace-delimited token of ``fmt`` (``fma.rn.f32``)."""
        parts = self.fmt.split()
        return parts[0] if parts else ""

    @property
    def operand_types(self) -> tuple[str, ...]:
        return tuple(parse_type_spec(s)[0] for s in self.operands)

    @property
    def operand_type_ids(self) -> tuple[int, ...]:
        return tuple(TYPE_ID[t] for t in self.operand_types)

    @property
    def operand_widths(self) -> tuple[int, ...]:
        return tuple(parse_type_spec(s)[1] for s in self.operands)

    @property
    def result_types(self) -> tuple[str, ...]:
        return tuple(parse_type_spec(s)[0] for s in self.results)

    @property
    def result_type_ids(self) -> tuple[int, ...]:
        return tuple(TYPE_ID[t] for t in self.result_types)

    @property
    def result_widths(self) -> tuple[int, ...]:
        return tuple(parse_type_spec(s)[1] for s in self.results)

    @property
    def n_slots(self) -> int:
        return len(self.results) + len(self.operands)

    @property
    def is_special(self) -> bool:
        return "special" in self.flags

    @property
    def is_volatile(self) -> bool:
        return "volatile" in self.flags

    @property
    def is_commutative(self) -> bool:
        return "commutative" in self.flags

    @property
    def is_exact(self) -> bool:
        return self.accuracy == "exact"

    def apply(self, *operands):
        """``semantic(*operands)`` with NumPy's floating-point warnings silenced (overflow to inf,
        NaN from inf - inf ... are the intended IEEE results)."""
        with np.errstate(all="ignore"):
            return self.semantic(*operands)

    def render(self, *slots: str | tuple[str, ...] | list[str]) -> str:
        """Substitute register names for ``$0..$k`` (results first); a vector slot takes a
        sequence and renders as ``{%a, %b}``."""
        if len(slots) != self.n_slots:
            raise InstructionError(f"{self.name}: render needs {self.n_slots} slots, "
                                   f"got {len(slots)}")
        text = [s if isinstance(s, str) else "{" + ", ".join(s) + "}" for s in slots]
        return _SLOT.sub(lambda m: text[int(m.group(1))], self.fmt)


def _bitcast_ok(ins: Instr) -> bool:
    """A bitcast row: ``mov.b<bits>`` between two scalar types of that size, or packing k equal
    scalar parts into one (``$0, {$1, $2}``) or unpacking one into k (``{$0, $1}, $2``)."""
    digits = ins.opcode[5:] if ins.opcode.startswith("mov.b") else ""
    if not digits.isdigit() or any(w != 1 for w in ins.operand_widths + ins.result_widths):
        return False
    bits = int(digits)
    ops, res = ins.operand_types, ins.result_types
    if len(ops) == 1 and len(res) == 1:
        return TYPE_BITS[ops[0]] == TYPE_BITS[res[0]] == bits
    whole, parts = (res, ops) if len(res) == 1 else (ops, res)
    if len(whole) != 1 or len(set(parts)) != 1 or TYPE_BITS[whole[0]] != bits \
            or TYPE_BITS[parts[0]] * len(parts) != bits:
        return False
    k = len(parts)
    vec = "{" + ", ".join(f"${i + (1 if len(res) == 1 else 0)}" for i in range(k)) + "}"
    want = (f"{ins.opcode} $0, {vec};" if len(res) == 1 else f"{ins.opcode} {vec}, ${k};")
    return ins.fmt == want


def format_accuracy(acc: Any) -> str:
    """Human-readable accuracy: 'exact', '2 ulp', 'abs 2^-20.5', 'abs 2^-22 or rel 2^-22'."""
    def num(x: float) -> str:
        if x > 0:
            e = math.log2(x)
            if abs(e * 10 - round(e * 10)) < 1e-9:
                return f"2^{round(e * 10) / 10:g}"
        return f"{x:g}"
    if acc == "exact":
        return "exact"
    if acc[0] == "ulp":
        return f"{acc[1]:g} ulp"
    if acc[0] == "abs_or_rel":
        return f"abs {num(acc[1])} or rel {num(acc[2])}"
    return f"{acc[0]} {num(acc[1])}"


class Table:
    """Ordered instruction registry: ``len``, ``table[i]``, ``table.index(name)``, ``in``."""

    def __init__(self, instrs=()):
        self._rows: list[Instr] = []
        self._by_name: dict[str, int] = {}
        self._by_opcode: dict[str, int] = {}
        self.version = 0
        self.uid = next(_TABLE_UIDS)       # distinguishes tables in caches keyed on (uid, version)
        self._hash: tuple | None = None      # (version, prefix digests -> rows, digest)
        for ins in instrs:
            self.add(ins)

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self):
        return iter(self._rows)

    def __getitem__(self, i: int | str) -> Instr:
        if isinstance(i, str):
            return self._rows[self.index(i)]
        return self._rows[i]

    def __contains__(self, item) -> bool:
        if isinstance(item, Instr):
            return self._by_name.get(item.name) is not None and self[item.name] == item
        return item in self._by_name

    def __repr__(self) -> str:
        return f"<Table of {len(self)} instructions, version {self.version}>"

    @property
    def names(self) -> list[str]:
        return [r.name for r in self._rows]

    def index(self, name: str) -> int:
        """Index of the entry called ``name``; UnknownInstructionError (a KeyError) otherwise."""
        try:
            return self._by_name[name]
        except (KeyError, TypeError):
            pass
        from .instructions_mmptx import numptx_spelling
        ours, why = numptx_spelling(name, self._by_name)
        if ours is not None or why:
            fix = (f"numptx spells it {ours!r}: write instr({ours!r})" if ours is not None
                   else why)
            raise UnknownInstructionError(f"no instruction named {name!r} in the table: that is "
                                          f"mm-ptx's spelling; {fix}", name=str(name),
                                          suggestions=(ours,) if ours else ())
        close = tuple(difflib.get_close_matches(str(name), self._by_name, n=4, cutoff=0.6))
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise UnknownInstructionError(f"no instruction named {name!r} in the table{hint}",
                                      name=str(name), suggestions=close)

    def by_opcode(self, opcode: str) -> Instr:
        """The (non-special) entry whose fmt starts with ``opcode``; special registers are
        looked up by name (``%tid.x``). UnknownInstructionError with suggestions otherwise."""
        i = self._by_opcode.get(opcode)
        if i is not None:
            return self._rows[i]
        close = tuple(difflib.get_close_matches(opcode, self._by_opcode, n=4, cutoff=0.6))
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise UnknownInstructionError(f"unknown instruction {opcode!r} (not in the numptx "
                                      f"instruction table){hint}", name=opcode, suggestions=close)

    def _validate(self, ins: Instr) -> None:
        if not isinstance(ins, Instr):
            raise InstructionError(f"expected an Instr, got {type(ins).__name__}")
        where = f"instruction {ins.name!r}"
        if not isinstance(ins.name, str) or not ins.name or any(c.isspace() for c in ins.name):
            raise InstructionError(f"{where}: name must be a non-empty string without spaces")
        if ins.name in self._by_name:
            raise InstructionError(f"{where}: the table already has an entry of that name "
                                   f"(index {self._by_name[ins.name]})")
        if not isinstance(ins.fmt, str) or not ins.opcode:
            raise InstructionError(f"{where}: fmt must be PTX text like 'add.f32 $0, $1, $2;'")
        for label, specs, limit in (("operands", ins.operands, MAX_OPERANDS),
                                    ("results", ins.results, MAX_RESULTS)):
            if len(specs) > limit:
                raise InstructionError(f"{where}: at most {limit} {label}, got {len(specs)}")
            for s in specs:
                try:
                    parse_type_spec(s)
                except InstructionError as e:
                    raise InstructionError(f"{where}: {label}: {e}") from None
        if not ins.results:
            raise InstructionError(f"{where}: needs at least one result")
        used = {int(m) for m in _SLOT.findall(ins.fmt)}
        want = set(range(ins.n_slots))
        if used != want:
            raise InstructionError(
                f"{where}: fmt {ins.fmt!r} uses slots {sorted(used)} but {len(ins.results)} "
                f"result(s) + {len(ins.operands)} operand(s) need exactly $0..${ins.n_slots - 1}")
        if not callable(ins.semantic):
            raise InstructionError(f"{where}: semantic must be callable")
        if not _check_accuracy(ins.accuracy):
            raise InstructionError(f"{where}: accuracy must be 'exact', ('ulp', n), ('abs', e), "
                                   f"('rel', e) or ('abs_or_rel', a, r), got {ins.accuracy!r}")
        bad = set(ins.flags) - FLAGS
        if bad:
            raise InstructionError(f"{where}: unknown flags {sorted(bad)}; known: {sorted(FLAGS)}")
        if not isinstance(ins.min_sm, int) or isinstance(ins.min_sm, bool) or ins.min_sm < 0:
            raise InstructionError(f"{where}: min_sm must be a non-negative int like 80")
        if "bitcast" in ins.flags:
            if not _bitcast_ok(ins):
                raise InstructionError(f"{where}: a bitcast entry is 'mov.b<bits> $0, $1;' between "
                                       f"two scalar types of that size, or a pack "
                                       f"'mov.b<bits> $0, {{$1, ...}};' / unpack "
                                       f"'mov.b<bits> {{$0, ...}}, $k;' of equal-size parts")
        elif ins.is_special:
            if ins.operands or len(ins.results) != 1 or not ins.name.startswith("%"):
                raise InstructionError(f"{where}: a special register entry is named '%reg', has "
                                       f"no operands and one result")
        else:
            if ins.name.startswith("%"):
                raise InstructionError(f"{where}: names starting with '%' are special registers "
                                       f"(add the 'special' flag)")
            if ins.opcode in self._by_opcode and not user_typed(ins):
                other = self._rows[self._by_opcode[ins.opcode]].name
                raise InstructionError(f"{where}: opcode {ins.opcode!r} is already used by "
                                       f"{other!r} (opcodes are unique except special registers)")

    def add(self, ins: Instr) -> int:
        """Validate and append ``ins``; returns its index and bumps :attr:`version`."""
        self._validate(ins)
        idx = len(self._rows)
        self._rows.append(ins)
        self._by_name[ins.name] = idx
        # a user-typed row runs the PTX of a built-in one (add.u32 on a "philox" stack): the
        # opcode keeps naming the built-in row, which the emulator's semantics come from
        if not ins.is_special and "bitcast" not in ins.flags and ins.opcode not in self._by_opcode:
            self._by_opcode[ins.opcode] = idx
        self.version += 1
        return idx

    def hash(self) -> str:
        """blake2b hex digest of (name, fmt, operands, results, flags) of every entry, in order."""
        return self._hashes()[2]

    def prefix_hash(self, n: int) -> str:
        """:meth:`hash` of the table's first ``n`` rows (what a program that indexes only those
        rows records: a later change to another row does not concern it)."""
        if not 0 <= n <= len(self._rows):
            raise InstructionError(f"prefix_hash({n}): the table has {len(self._rows)} rows")
        return self._hashes()[3][n]

    def prefix_rows(self, digest: str) -> int | None:
        """How many leading rows of this table hash to ``digest`` (a :meth:`hash` of an earlier
        table, or its first 32 hex digits), or None: a table that only gained rows at its end
        still holds every program saved under it."""
        return self._hashes()[1].get(digest[:32])

    def _hashes(self):
        if self._hash is None or self._hash[0] != self.version:
            h = hashlib.blake2b(digest_size=32)
            digests = [h.hexdigest()]
            for r in self._rows:
                rec = "\x1f".join((r.name, r.fmt, ",".join(r.operands), ",".join(r.results),
                                   ",".join(sorted(r.flags))))
                h.update(rec.encode() + b"\x1e")
                digests.append(h.hexdigest())
            prefixes: dict[str, int] = {}
            for i, d in enumerate(digests):
                prefixes.setdefault(d[:32], i)
            self._hash = (self.version, prefixes, digests[-1], digests)
        return self._hash
