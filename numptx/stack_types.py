"""User-defined stack types: values a Stack PTX program keeps on a stack of their own.

A stack type is a name, the PTX register type that holds its values and their width. Its values
never mix with the built-in stacks (a random program cannot add a Philox key word to a loop
counter), yet its registers are ordinary PTX registers, so the instructions that work on it are
ordinary PTX too::

    from numptx import stack_ptx as sp
    sp.stack_type("philox", "u32")                       # id 14: u32 registers, a stack of its own
    sp.retype("add.u32", {"u32": "philox"}, name="add.philox")     # add.u32 on the philox stack
    sp.retype("bitcast.u32.b32", {"b32": "philox"}, name="philox.to.u32")
    prog = [sp.const(5, "philox"), sp.const(7, "philox"), sp.instr("add.philox"),
            sp.instr("philox.to.u32")]
    stub = sp.compile(prog, outputs={"z": "u32"})       # add.u32 ... ; mov.b32 ... ; mov.u32 %z

Where a type can be named, a stack type can: ``const``, the meta operations, ``store``/``load``,
instruction rows (``nx.Instr`` operands and results, or :func:`retype` of a table row),
``inputs=``/``outputs=`` of a compile, and site variables (defining the type also registers it
as a site data type, :func:`numptx.register_type`, so a CUDA template declares
``PTX_IN(philox, k0, k0)`` and a numba site ``{"k0": "philox"}``). ``nx.emulate`` runs the
stubs (they are plain PTX on the type's registers); :func:`numptx.stack_ptx.dumps` records the
stack types a program uses and :func:`~numptx.stack_ptx.loads` maps them to this process's ids
by name. Up to :data:`MAX_USER_TYPES` types, one definition per name for the life of the
process (defining the same type again is a no-op).
"""
from __future__ import annotations

import re
import threading

from . import valuetypes as VT
from ._native import lib
from .dtypes import all_dtypes, register_type
from .errors import TypeRegistryError
from .instruction_model import (REG_TYPE, TYPE_BITS, Instr, InstructionError, note_user_type,
                                parse_type_spec, ptx_slot_types)

__all__ = ["stack_type", "stack_types", "retype", "MAX_USER_TYPES", "REGISTER_TYPES"]

#: how many stack types may be defined (the C core's STACKPTX_MAX_TYPES less the built-in 14)
MAX_USER_TYPES: int = lib.STACKPTX_MAX_TYPES - len(VT.ROWS)

#: register type -> (width in bits, the built-in type whose constants and NumPy values the stack
#: type takes). These are the types ``mov`` has, so a stub can copy the values in and out.
REGISTER_TYPES: dict[str, tuple[int, str]] = {
    "pred": (1, "pred"), "b16": (16, "b16"), "u16": (16, "b16"), "s16": (16, "b16"),
    "b32": (32, "b32"), "u32": (32, "u32"), "s32": (32, "s32"), "f32": (32, "f32"),
    "b64": (64, "b64"), "u64": (64, "u64"), "s64": (64, "s64"), "f64": (64, "f64"),
}
# a site variable of the type travels through this inline-asm constraint
_CONSTRAINT = {"f32": "f", "f64": "d", 16: "h", 32: "r", 64: "l"}
_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
_lock = threading.Lock()


def _fail(name, msg: str) -> TypeRegistryError:
    return TypeRegistryError(f"stack_type({name!r}): {msg}")


def stack_type(name: str, reg: str, width: int | None = None) -> VT.ValueType:
    """Define the stack type ``name`` on PTX registers of type ``reg`` (``"u32"``, ``"b64"``,
    ``"f32"``, ... see :data:`REGISTER_TYPES`); ``width`` (bits) is the register's and may be
    given as a check. Returns its row (``.id`` 14, 15, ... in definition order)::

        >>> from numptx import stack_ptx as sp
        >>> sp.stack_type("seed", "u64").bits
        64

    Its constants are written as those of the built-in type of the same register kind (u32
    decimal, b32 hex, f32 ``0f...``); its NumPy values (``nx.emulate``) are that type's. It is
    also a site data type of the same name (a type on ``pred`` registers is not: no site
    variable is a predicate); a site type of that name registered before on the same registers
    (:func:`numptx.register_type`, e.g. with a ``cast``) is kept as it is.
    Raises :class:`~numptx.TypeRegistryError` for a name that is not lower-case
    ``[a-z][a-z0-9_]*``, a name a built-in type or alias (or a site type on other registers)
    has, a register type ``mov`` lacks, a width no register holds, a second definition that
    differs, or more than :data:`MAX_USER_TYPES` types.
    """
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > 64:
        raise _fail(name, "a stack type's name is lower case [a-z][a-z0-9_]*, at most 64 "
                          "characters (it appears in type specs like 'name[4]')")
    if not isinstance(reg, str) or reg.lstrip(".") not in REGISTER_TYPES:
        raise _fail(name, f"register type {reg!r} is not one mov copies; use one of "
                          f"{', '.join(REGISTER_TYPES)}")
    reg = reg.lstrip(".")
    bits, base = REGISTER_TYPES[reg]
    if width is not None:
        if isinstance(width, bool) or not isinstance(width, int):
            raise _fail(name, f"width={width!r} must be an int (bits)")
        if width != bits:
            holds = sorted({b for b, _ in REGISTER_TYPES.values()})
            hint = ("" if width in holds else
                    f"; no PTX register holds {width}-bit values (registers hold "
                    f"{', '.join(map(str, holds))} bits" + (
                        "; keep 8-bit values in u32 registers, as numptx's cvt .u8 rows do)"
                        if width == 8 else ")"))
            raise _fail(name, f"width={width} but .{reg} registers hold {bits} bits{hint}")
    with _lock:
        old = VT.BY_NAME.get(name)
        if old is not None:
            if old.user and old.reg == reg:
                return old
            what = (f"the built-in value type {name!r}" if not old.user else
                    f"already a stack type on .{old.reg} registers (one definition per name)")
            raise _fail(name, f"{what}; pick another name")
        clash = VT.aliases(VT.ROWS).get(name)
        if clash is not None:
            raise _fail(name, f"{name!r} names the built-in type {clash!r}; pick another name")
        site = all_dtypes().get(name)
        if site is not None and (site.builtin or site.reg != reg):
            raise _fail(name, f"{name!r} is a site data type on .{site.reg} registers "
                              f"(nx.register_type); pick another name or register type")
        if len(VT.USER) >= MAX_USER_TYPES:
            raise _fail(name, f"at most {MAX_USER_TYPES} stack types can be defined (the C "
                              f"core holds {lib.STACKPTX_MAX_TYPES} types); already defined: "
                              f"{', '.join(r.name for r in VT.USER)}")
        b = VT.BY_NAME[base]
        site_info = None
        if reg != "pred":
            letter = _CONSTRAINT.get(reg) or _CONSTRAINT[bits]
            site_info = VT.SiteInfo(reg, letter, b.site.ctype if b.site else "", "bits")
        row = VT.ValueType(len(VT.NAMES), name, reg, b.np, bits, b.kind, site_info, False, (),
                           None, base)
        if site_info is not None and site is None:
            register_type(name, reg, reg, site_info.constraint)
        VT.add_user_row(row)
        note_user_type(row)
    return row


def stack_types() -> list[VT.ValueType]:
    """The stack types defined so far, in id order."""
    return list(VT.USER)


def retype(row: str | Instr, types: dict[str, str], *, name: str, doc: str = "") -> int:
    """Add a copy of table row ``row`` whose operands and results of the types in ``types`` are
    of the mapped types instead (same PTX text, same semantics, so the widths must match);
    returns the new row's index::

        sp.retype("mul.hi.u32", {"u32": "philox"}, name="mul.hi.philox")
        sp.retype("xor.b32", {"b32": "philox"}, name="xor.philox")   # b32 ops take u32 registers

    Raises :class:`~numptx.instructions.InstructionError` for an unknown type, a mapping
    between types of different widths, or a name the table has.
    """
    from .instructions import TABLE, add_instruction
    src = TABLE[row] if isinstance(row, str) else row
    if not isinstance(src, Instr):
        raise InstructionError(f"retype({row!r}): give a table row name or an Instr")
    if not isinstance(types, dict) or not types:
        raise InstructionError(f"retype({src.name!r}): types maps type names to type names, "
                               f"e.g. {{'u32': 'philox'}}")
    for a, b in types.items():
        for t in (a, b):
            if not isinstance(t, str) or t not in TYPE_BITS:
                raise InstructionError(f"retype({src.name!r}): unknown value type {t!r}")
        if TYPE_BITS[a] != TYPE_BITS[b]:
            raise InstructionError(f"retype({src.name!r}): {a} holds {TYPE_BITS[a]} bits and "
                                   f"{b} {TYPE_BITS[b]}: the PTX text cannot take both")
        if not any(parse_type_spec(s)[0] == a for s in src.operands + src.results):
            raise InstructionError(f"retype({src.name!r}): the row has no {a} operand or result")
    # each slot's registers must be ones ptxas lets the row's PTX take (the slot's PTX type:
    # cvt.u32.u8 reads a u8, mov.b32 {...} takes any 16-bit parts)
    for k, (slot, (want, wider)) in enumerate(zip(src.results + src.operands,
                                                  ptx_slot_types(src))):
        held = types.get(parse_type_spec(slot)[0])
        if held is not None and not VT.ptx_compatible(want, REG_TYPE[held], wider=wider):
            raise InstructionError(f"retype({src.name!r}): its slot ${k} takes .{want} values and "
                                   f"{held} lives in .{REG_TYPE[held]} registers, which ptxas does "
                                   f"not let it take (a bit type of the same size, or signed "
                                   f"for unsigned, would)")

    def spec(s: str) -> str:
        t, w = parse_type_spec(s)
        t = types.get(t, t)
        return t if w == 1 else f"{t}[{w}]"

    new = Instr(name, src.fmt, tuple(spec(s) for s in src.operands),
                tuple(spec(s) for s in src.results), src.semantic, src.accuracy, src.flags,
                src.min_sm, doc or f"{src.name} on the {', '.join(types.values())} stack")
    return add_instruction(new)
