"""Data types that injection sites can carry: the built-in PTX types and user-registered ones.

Each type says how a C++ value travels into the inline asm of a site and back:

=========  ========  =====  ==========  ====================  ======
name       register  mov    constraint  carrier C++ type      mode
=========  ========  =====  ==========  ====================  ======
f16        b16       b16    h           unsigned short        bits
f32        f32       f32    f           float                 value
=========  ========  =====  ==========  ====================  ======

``value`` types convert with a C++ cast (an ``int`` expression feeds an ``f32`` site);
``bits`` types copy the object representation (``__half`` into ``unsigned short``), so any
2/4/8-byte type fits. User types registered with :func:`register_type` may instead give a
``cast`` prefix that views an lvalue as the carrier, as in ``*(unsigned int*)&``::

    nx.register_type("myhalf2", "b32", "b32", "r", "*(unsigned int*)&")

Type names are case-insensitive in annotations (``F32`` and ``f32`` are the same type);
the canonical name is lower case. The built-in rows are the value types of
:mod:`numptx.valuetypes` that have site data (all but ``pred``).
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from . import valuetypes as VT
from .errors import TypeRegistryError

__all__ = ["SiteType", "register_type", "get_dtype", "all_dtypes", "user_dtypes", "BUILTIN_DTYPES"]

# constraint letter -> carrier C++ type used by the emitted temporaries
_CARRIER = {"h": "unsigned short", "r": "unsigned int", "l": "unsigned long long",
            "f": "float", "d": "double"}
# the .reg types ptxas declares (it has no .bf16/.bf16x2 registers: those live in .b16/.b32)
_REG_TYPES = {"b16", "b32", "b64", "u16", "u32", "u64", "s16", "s32", "s64",
              "f16", "f16x2", "f32", "f64", "pred"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class SiteType:
    """One site data type. ``reg`` is the PTX register type (no dot), ``mov`` the suffix of
    the ``mov`` that moves it, ``constraint`` the inline-asm letter, ``ctype`` the carrier C++
    type, ``mode`` one of ``value``/``bits``/``cast``, ``cast`` the lvalue-view prefix for
    ``cast`` mode. (The DSL's value types, ``nx.f32``..., are another class.)

    >>> get_dtype("f32").ctype, get_dtype("f16").mode
    ('float', 'bits')
    """
    name: str
    reg: str
    mov: str
    constraint: str
    ctype: str
    mode: str
    cast: str | None = None
    builtin: bool = False

    @property
    def size(self) -> int:
        """Size in bytes of the register."""
        return {"h": 2, "r": 4, "f": 4, "l": 8, "d": 8}[self.constraint]


# ORDER DTYPES: the value types that have site data, in ORDER TYPES (numptx/valuetypes.py);
# numptx/include/ptx_inject.cuh defines the same rows (tests/test_annotate.py diffs them)
BUILTIN_DTYPES: tuple[SiteType, ...] = tuple(
    SiteType(v.name, v.reg, v.site.mov, v.site.constraint, v.site.ctype, v.site.mode, builtin=True)
    for v in VT.ROWS if v.site is not None)

_lock = threading.Lock()
_registry: dict[str, SiteType] = {d.name: d for d in BUILTIN_DTYPES}


def register_type(name: str, reg: str, mov: str, constraint: str, cast: str | None = None) -> SiteType:
    """Register a user data type usable in both annotation forms and in ``cuda_to_ptx``.

    ``name``: identifier used in annotations (case-insensitive); ``reg``: PTX register type
    without the dot (``b32``); ``mov``: suffix of the ``mov`` instruction (``b32``);
    ``constraint``: inline-asm constraint letter (``h``, ``r``, ``l``, ``f``, ``d``);
    ``cast``: optional C++ prefix viewing an lvalue as the carrier (``*(unsigned int*)&``).
    Without ``cast`` the value's bytes are copied, so any type of the right size works.

    >>> import numptx as nx
    >>> nx.register_type("pair16", "b32", "b32", "r").ctype
    'unsigned int'

    Registering the same definition twice is a no-op; redefining a name raises.
    """
    if not isinstance(name, str) or not _IDENT.match(name):
        raise TypeRegistryError(f"register_type: type name {name!r} is not a C identifier")
    key = name.lower()
    reg, mov = str(reg).lstrip("."), str(mov).lstrip(".")
    if reg not in _REG_TYPES:
        raise TypeRegistryError(f"register_type({name!r}): unknown PTX register type {reg!r}; "
                                f"expected one of {sorted(_REG_TYPES)}")
    if not re.fullmatch(r"[a-z0-9]+", mov):
        raise TypeRegistryError(f"register_type({name!r}): bad mov suffix {mov!r}")
    if constraint not in _CARRIER:
        raise TypeRegistryError(f"register_type({name!r}): asm constraint {constraint!r} is not "
                                f"one of {sorted(_CARRIER)}")
    if cast is not None and ("\n" in cast or not cast.strip()):
        raise TypeRegistryError(f"register_type({name!r}): cast must be a one-line C++ prefix")
    dt = SiteType(key, reg, mov, constraint, _CARRIER[constraint], "cast" if cast else "bits",
                  cast.strip() if cast else None)
    with _lock:
        old = _registry.get(key)
        if old is not None and old != dt:
            kind = "built-in" if old.builtin else "registered"
            raise TypeRegistryError(f"register_type: {name!r} is already a {kind} type ({old})")
        _registry[key] = dt
    return dt


def get_dtype(name: str, *, context: str = "") -> SiteType:
    """Look up a type by name (case-insensitive); raise :class:`TypeRegistryError` naming it."""
    dt = _registry.get(str(name).lower())
    if dt is None:
        where = f"{context}: " if context else ""
        row = VT.BY_NAME.get(str(name).lower())
        if row is not None and row.kind == "pred":
            raise TypeRegistryError(f"{where}{name!r} is a type on .pred registers, which no "
                                    f"site variable carries (move a predicate through selp)")
        raise TypeRegistryError(f"{where}unknown data type {name!r}; known types: "
                                f"{', '.join(sorted(_registry))} (add one with nx.register_type)")
    return dt


def all_dtypes() -> dict[str, SiteType]:
    """All known types, built-in first, by canonical name."""
    with _lock:
        return dict(_registry)


def user_dtypes() -> list[SiteType]:
    """The types added with :func:`register_type`, in registration order."""
    with _lock:
        return [d for d in _registry.values() if not d.builtin]

