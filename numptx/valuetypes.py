"""The value types: one row per type, the single source of every per-type fact.

A value type is what a Stack PTX stack holds, an instruction operand is typed with, a site
variable carries and (for some) a DSL formula computes in. Everything per type that used to be
repeated across modules is a column here; the other tables are derived from :data:`ROWS`::

    from numptx.valuetypes import BY_NAME, NAMES
    NAMES[:3]                       # ('pred', 'f16', 'f16x2'): ids are positions (ORDER TYPES)
    t = BY_NAME["bf16"]
    t.id, t.reg, t.np, t.bits       # (3, 'b16', dtype('uint16'), 16)
    t.kind, t.wide, t.native        # ('float', False, False): NumPy holds bf16 as its bits
    t.site.constraint               # 'h': the inline-asm letter of a bf16 site variable

Derived elsewhere: ``instructions.TYPES/TYPE_ID/REG_TYPE/NP_DTYPE/TYPE_BITS``,
``dtypes.BUILTIN_DTYPES``, the DSL types of ``dsl/types.py``, the site aliases of
``jit/numba/numba_site.py`` and the C enum and arrays of ``native/stack_ptx_tables.h`` (written by
``python native/gen_tables.py``; ``tests/test_native_tables.py`` checks it is current).

This module imports only NumPy: the generator loads it without the rest of the package.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["SiteInfo", "ValueType", "ROWS", "NAMES", "BY_NAME", "WIDE", "FLOATS", "INTS",
           "WHOLE", "KINDS", "USER", "aliases", "add_user_row", "ptx_compatible"]

#: the values of :attr:`ValueType.kind`
KINDS = ("pred", "float", "signed", "unsigned", "bits")
# the NumPy dtype kind that holds a value of each kind itself (not its bit pattern)
_NATIVE_NP_KIND = {"pred": "b", "float": "f", "signed": "i", "unsigned": "u"}


@dataclass(frozen=True)
class SiteInfo:
    """How a value of the type travels into a site's inline asm and back (numptx/dtypes.py):
    ``mov`` the suffix of the ``mov`` that moves it, ``constraint`` the inline-asm letter,
    ``ctype`` the carrier C++ type, ``mode`` ``"value"`` (a C++ cast converts) or ``"bits"``
    (the object representation is copied)."""
    mov: str
    constraint: str
    ctype: str
    mode: str


@dataclass(frozen=True)
class ValueType:
    """One value type. ``id`` is its position in :data:`ROWS` (the C core and encoded programs
    depend on it), ``reg`` the PTX register type that holds it, ``np`` the NumPy dtype of its
    values in numptx (bf16 and the packed pairs live as bit patterns), ``bits`` its width
    (1 for pred), ``kind`` one of :data:`KINDS`, ``site`` its site-type data (None: no site
    carries it), ``dsl`` whether DSL formulas compute in it (``nx.f32``...), ``aliases`` the
    NumPy, C and numba spellings that name it, ``numba`` the numba type name of a site value
    (None: it travels as the carrier of its constraint)."""
    id: int
    name: str
    reg: str
    np: np.dtype
    bits: int
    kind: str
    site: SiteInfo | None
    dsl: bool
    aliases: tuple[str, ...]
    numba: str | None
    base: str | None = None     #: a user stack type's built-in type (its constants, NumPy dtype)

    @property
    def user(self) -> bool:
        """A user-defined stack type (:func:`numptx.stack_ptx.stack_type`), id 14 or more."""
        return self.base is not None

    @property
    def wide(self) -> bool:
        """64 bits: a constant takes two program words (CONST64)."""
        return self.bits == 64

    @property
    def native(self) -> bool:
        """Whether :attr:`np` holds the values themselves rather than their bit patterns."""
        return self.np.kind == _NATIVE_NP_KIND.get(self.kind)


_B, _V = "bits", "value"
# site data: (mov suffix, asm constraint, carrier C++ type, mode); the bit-copied rows share
# the carrier of their width
_S16, _S32, _S64 = ("b16", "h", "unsigned short", _B), ("b32", "r", "unsigned int", _B), \
    ("b64", "l", "unsigned long long", _B)

# ORDER TYPES: ids are positions (docs/design/programs.md, section 1). Append new types at the
# end: reordering changes every encoded program and the C core's ids.
_TABLE = (
    # name     reg     NumPy        bits  kind        DSL    numba
    #          site data (None: no site carries it)      aliases
    ("pred",   "pred", np.bool_,      1,  "pred",     True,  None,
               None,                                     ("bool", "bool_")),
    ("f16",    "b16",  np.float16,   16,  "float",    True,  "float16",
               _S16,                                     ("float16", "half")),
    ("f16x2",  "b32",  np.uint32,    32,  "float",    False, None,
               _S32,                                     ()),
    ("bf16",   "b16",  np.uint16,    16,  "float",    True,  "bfloat16",
               _S16,                                     ("bfloat16", "__nv_bfloat16")),
    ("bf16x2", "b32",  np.uint32,    32,  "float",    False, None,
               _S32,                                     ()),
    ("f32",    "f32",  np.float32,   32,  "float",    True,  "float32",
               ("f32", "f", "float", _V),                ("float32", "float")),
    ("f64",    "f64",  np.float64,   64,  "float",    True,  "float64",
               ("f64", "d", "double", _V),               ("float64", "double")),
    ("s32",    "s32",  np.int32,     32,  "signed",   True,  "int32",
               ("s32", "r", "int", _V),                  ("int32",)),
    ("u32",    "u32",  np.uint32,    32,  "unsigned", True,  "uint32",
               ("u32", "r", "unsigned int", _V),         ("uint32",)),
    ("s64",    "s64",  np.int64,     64,  "signed",   True,  "int64",
               ("s64", "l", "long long", _V),            ("int64",)),
    ("u64",    "u64",  np.uint64,    64,  "unsigned", True,  "uint64",
               ("u64", "l", "unsigned long long", _V),   ("uint64",)),
    ("b16",    "b16",  np.uint16,    16,  "bits",     False, None,
               _S16,                                     ("int16", "uint16")),
    ("b32",    "b32",  np.uint32,    32,  "bits",     False, None,
               _S32,                                     ()),
    ("b64",    "b64",  np.uint64,    64,  "bits",     False, None,
               _S64,                                     ()),
)

#: every value type, in ORDER TYPES (``ROWS[i].id == i``)
ROWS: tuple[ValueType, ...] = tuple(
    ValueType(i, name, reg, np.dtype(npt), bits, kind, SiteInfo(*site) if site else None, dsl,
              tuple(al), numba)
    for i, (name, reg, npt, bits, kind, dsl, numba, site, al) in enumerate(_TABLE))


class TypeNames(Sequence):
    """The type names by id, built-in first, then the user stack types as they are defined: a
    read-only sequence that grows (``names.index("f32")`` is a dict look-up; slices are tuples;
    it compares equal to a tuple or list of the same names)."""

    __slots__ = ("_names", "_ids")

    def __init__(self, names):
        self._names: list[str] = list(names)
        self._ids: dict[str, int] = {n: i for i, n in enumerate(self._names)}

    def __len__(self) -> int:
        return len(self._names)

    def __getitem__(self, i):
        return tuple(self._names[i]) if isinstance(i, slice) else self._names[i]

    def __iter__(self):
        return iter(self._names)

    def __contains__(self, name) -> bool:
        try:
            return name in self._ids
        except TypeError:                 # an unhashable value names no type
            return False

    def index(self, name, *_args) -> int:
        try:
            return self._ids[name]
        except (KeyError, TypeError):
            raise ValueError(f"{name!r} is not a value type") from None

    def __eq__(self, other) -> bool:
        return isinstance(other, (TypeNames, tuple, list)) and tuple(self) == tuple(other)

    __hash__ = None          # type: ignore[assignment]  # it grows

    def __repr__(self) -> str:
        return repr(tuple(self._names))

    def _append(self, name: str) -> None:
        self._ids[name] = len(self._names)
        self._names.append(name)


#: the type names in ORDER TYPES, then the user stack types (ids are positions)
NAMES: TypeNames = TypeNames(r.name for r in ROWS)
#: name -> row (user stack types included once defined)
BY_NAME: dict[str, ValueType] = {r.name: r for r in ROWS}
#: the 64-bit types (their constants are CONST64 ops), user stack types included
WIDE: set[str] = {r.name for r in ROWS if r.wide}
#: the user stack types, in id order (ids 14, 15, ...)
USER: list[ValueType] = []
#: the scalar float types (f16 bf16 f32 f64; the packed pairs are not scalars)
FLOATS: tuple[str, ...] = tuple(r.name for r in ROWS if r.kind == "float" and r.dsl)
#: the integer types (s32 u32 s64 u64)
INTS: tuple[str, ...] = tuple(r.name for r in ROWS if r.kind in ("signed", "unsigned"))
#: the types whose constants are whole numbers that wrap: integers and bit types
WHOLE: tuple[str, ...] = tuple(r.name for r in ROWS if r.kind in ("signed", "unsigned", "bits"))


def add_user_row(row: ValueType) -> None:
    """Append a user stack type's row (``numptx.stack_types`` validates and calls this; the
    other type maps of the package follow it there)."""
    NAMES._append(row.name)
    BY_NAME[row.name] = row
    USER.append(row)
    if row.wide:
        WIDE.add(row.name)


_PTX_TYPE = re.compile(r"(b|u|s|f|bf|tf)(8|16|32|64)(x2)?\Z")


def _ptx_class(t: str) -> tuple[str, int] | None:
    if t == "pred":
        return "pred", 1
    m = _PTX_TYPE.match(t)
    if m is None:
        return None
    kind = {"b": "bits", "u": "int", "s": "int"}.get(m.group(1), t)   # each float type its own
    return kind, int(m.group(2)) * (2 if m.group(3) else 1)


def ptx_compatible(instr_type: str, reg_type: str, *, wider: bool = False) -> bool:
    """Whether PTX lets an operand of instruction type ``instr_type`` (``add.u32``: u32) be a
    register declared ``.reg .<reg_type>``: the same type; a bit type (b16/b32/b64) with any
    type of its size, either way round; or signed and unsigned integers of one size; tf32
    takes b32 only. ``wider`` (``cvt``'s relaxed rule): a bit or integer register may also be
    wider than the type. ptxas refuses the rest
    (an f32 register to ``add.u32``), and so do ``sp.retype`` and the emulator::

        >>> ptx_compatible("u32", "b32"), ptx_compatible("s32", "u32"), ptx_compatible("u32", "f32")
        (True, True, False)
    """
    a, b = _ptx_class(instr_type), _ptx_class(reg_type)
    if a is None or b is None:
        return False
    if a[0] == "tf32":
        return b == ("bits", 32)
    if reg_type == "f16x2":
        # ptxas (sm_90, measured) takes an .f16x2 register for f16x2 and b32 instruction types,
        # and for some (not all) 32-bit integer and predicate operands: those are refused here
        return a in (("f16x2", 32), ("bits", 32))
    if a[0] == "pred" or b[0] == "pred":
        return a == b
    relaxed = "bits" in (a[0], b[0]) or a[0] == b[0] == "int"
    if not relaxed:
        return a == b                               # a float type: its own registers only
    return b[1] == a[1] or (wider and b[1] > a[1])


def aliases(rows: tuple[ValueType, ...] | list[ValueType]) -> dict[str, str]:
    """Alias -> type name over ``rows``, e.g. ``aliases([r for r in ROWS if r.dsl])``."""
    return {a: r.name for r in rows for a in r.aliases}


def _check() -> None:
    # a malformed row would surface far away (a C array out of step, a wrong alias): stop here
    seen: dict[str, str] = {}
    for r in ROWS:
        ok = (r.kind in KINDS and r.name not in seen and r.name.isidentifier()
              and r.bits == (1 if r.kind == "pred" else r.np.itemsize * 8)
              and (r.site is None) == (r.kind == "pred")
              and (r.site is None or r.site.mode in (_V, _B)))
        if not ok:
            raise ValueError(f"numptx.valuetypes: malformed row {r}")
        for a in (r.name, *r.aliases):
            if seen.setdefault(a, r.name) != r.name:
                raise ValueError(f"numptx.valuetypes: {a!r} names both {seen[a]} and {r.name}")


_check()
