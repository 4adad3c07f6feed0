"""Programs as uint64 words: :func:`encode` (ops -> words), :func:`decode` (words -> ops,
validated word by word) and the encoders the compile paths use::

    from numptx._program import const, decode, encode, input
    words = encode([input("x"), const(2.0, "f32")], inputs=["x"])
    decode(words, ["x"])            # [input('x'), const(0x40000000, 'f32')]
"""
from __future__ import annotations

import zlib
from array import array
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..instructions import BUILTIN_ROWS, TABLE, TYPES
from ..opkinds import (CONST, CONST64, INPUT, INSTR, KIND_NAMES, LOAD, META, META_CONST, META_OPS,
                       NOP, RETURN, ROUTINE, STORE)
from ..valuetypes import BY_NAME, ROWS, WIDE
from .ops import (DIALECTS, MARKER_MASK, MARKER_MAGIC, Op, ProgramError, dialect_id,
                  dialect_marker, input, instr, marker_dialect)

__all__ = ["encode", "decode", "Encoded", "input_tag", "program_dialect", "routine_dialects",
           "typed_ids", "row_ids", "remap_types", "user_type_ids", "added_row_ids"]


class Encoded(np.ndarray):
    """A uint64 array from :func:`encode` that also remembers, in order, the input names its
    INPUT words number (``.inputs``; :func:`decode` reads them back). The binding itself
    needs no attribute: each INPUT word carries its name's tag (:func:`input_tag`), so any
    copy of the words (``np.asarray``, ``np.save``/``np.load``, ``np.concatenate``) still reads
    the right variables at any site that has them, in any input order (within one process: a
    stack type's id and an added row's index are the process's; a pickle of an ``Encoded``
    names them and maps them by name, and so does :func:`numptx.stack_ptx.dumps` - use those
    across processes, not raw copies). A tag is a CRC-32, which distinct names can share
    (``s6l6mwll``, ``ovbiasnc``): a compile checks ``.inputs`` and refuses a word whose name it
    lacks where another input has that tag; a plain copy has no names to check. ``.dialect`` is the Stack
    PTX dialect it was encoded for (``encode(..., dialect=)``; None: not recorded), which a
    compile then runs (and a compile naming another dialect refuses). An mm-ptx program's
    dialect is in its words (a marker word first), so plain copies keep it too; ``.dialect``
    reads it from there."""

    inputs: tuple[str, ...] | None
    _dialect: str | None             # "numptx" when encoded so (numptx words carry no marker)

    def __array_finalize__(self, obj) -> None:
        self.inputs = getattr(obj, "inputs", None)
        self._dialect = getattr(obj, "_dialect", None)

    @property
    def dialect(self) -> str | None:
        d = marker_dialect(int(self[0])) if self.ndim == 1 and self.size else None
        return DIALECTS[d] if d is not None and d < len(DIALECTS) else \
            ("numptx" if self._dialect == "numptx" else None)

    def __reduce__(self):
        fn, args, state = super().__reduce__()
        # stack type ids and added rows' indices are the process's: the pickle names those
        # its words use, and unpickling maps them by name
        users: tuple = ()
        rows: tuple = ()
        if self.ndim == 1:
            users = tuple((t, TYPES[t], BY_NAME[TYPES[t]].reg) for t in sorted(typed_ids(self))
                          if len(ROWS) <= t < len(TYPES))
            rows = tuple((r, TABLE[r].name) for r in sorted(row_ids(self))
                         if BUILTIN_ROWS <= r < len(TABLE))
        return fn, args, (state, self.inputs, 3, self._dialect, users, rows)

    def __setstate__(self, state) -> None:
        base, self.inputs = state[:2]
        self._dialect = state[3] if len(state) > 3 else None
        super().__setstate__(base)
        if len(state) == 2 and self.inputs:      # pickled before the words carried name tags
            words = _encode(decode(self, self.inputs), _input_index(self.inputs))
            self[...] = np.frombuffer(words, dtype=np.uint64)
        types = user_type_ids(state[4], "unpickling an encoded program") \
            if len(state) > 4 and state[4] else {}
        rows = added_row_ids(state[5], "unpickling an encoded program") \
            if len(state) > 5 and state[5] else {}
        if any(a != b for a, b in (*types.items(), *rows.items())):
            self[...] = remap_types(np.asarray(self), types, rows)


_TYPED = (CONST, CONST64, META, STORE, LOAD)      # the kinds whose type field names a stack


def row_ids(words) -> set[int]:
    """The table rows the INSTR words of ``words`` run."""
    w, out, i = [int(x) for x in np.asarray(words, np.uint64).ravel()], set(), 0
    while i < len(w):
        kind = w[i] & 0xFF
        if kind == INSTR:
            out.add((w[i] >> 16) & 0xFFFF)
        i += 2 if kind == CONST64 else 1
    return out


def added_row_ids(saved, what: str) -> dict[int, int]:
    """Saved index -> this table's index for rows added after numptx's own (``(index, name)``
    each: ``add_instruction``, ``sp.retype``), matched by name; a name the table lacks is an
    error naming it."""
    remap: dict[int, int] = {}
    for r, name in saved:
        if name not in TABLE:
            raise ProgramError(f"{what}: the program runs the instruction {name!r}, which this "
                               f"table does not have: add it (nx.add_instruction, "
                               f"sp.retype) first")
        remap[r] = TABLE.index(name)
    return remap


def typed_ids(words) -> set[int]:
    """The type ids the typed words (CONST, CONST64, META, STORE, LOAD) of ``words`` name
    (a CONST64's data word is a payload, not a word)."""
    w, out, i = [int(x) for x in np.asarray(words, np.uint64).ravel()], set(), 0
    while i < len(w):
        kind = w[i] & 0xFF
        if kind in _TYPED:
            out.add((w[i] >> 8) & 0xFF)
        i += 2 if kind == CONST64 else 1
    return out


def remap_types(words: np.ndarray, remap: dict[int, int],
                rows: dict[int, int] | None = None) -> np.ndarray:
    """A copy of ``words`` whose typed words name ``remap[t]`` for type ``t``, and whose INSTR
    words run ``rows[r]`` for row ``r`` (saved ids moved to this process's)."""
    out = np.array(words, np.uint64)
    rows = rows or {}
    i = 0
    while i < len(out):
        w = int(out[i])
        kind, t, a = w & 0xFF, (w >> 8) & 0xFF, (w >> 16) & 0xFFFF
        if kind in _TYPED and t in remap:
            out[i] = np.uint64(w & ~0xFF00 | remap[t] << 8)
        elif kind == INSTR and a in rows:
            out[i] = np.uint64(w & ~0xFFFF0000 | rows[a] << 16)
        i += 2 if kind == CONST64 else 1
    return out


def user_type_ids(saved, what: str) -> dict[int, int]:
    """Saved id -> this process's id for the stack types ``saved`` ((id, name, register type)
    each), matched by name; a type not defined here, or on other registers, is an error naming
    the fix (``sp.stack_type``)."""
    remap: dict[int, int] = {}
    for t, name, reg in saved:
        row = BY_NAME.get(name)
        if row is None or not row.user:
            raise ProgramError(f"{what}: the program uses the stack type {name!r} (.{reg} "
                               f"registers), which is not defined here: call "
                               f"sp.stack_type({name!r}, {reg!r}) first")
        if row.reg != reg:
            raise ProgramError(f"{what}: the program's stack type {name!r} is on .{reg} "
                               f"registers, this process's on .{row.reg}")
        if not isinstance(t, int) or t < len(ROWS) or t in remap:
            raise ProgramError(f"{what}: stack type {name!r} has the id {t!r}, which is no "
                               f"user stack type's (corrupted data)")
        remap[t] = row.id
    return remap


def input_tag(name: str) -> int:
    """The 32-bit tag an INPUT word carries for the input ``name`` (its b field): the CRC-32
    of the UTF-8 name, 0 taken as 1 (0 marks a positional word). The C core binds a tagged
    word to the compile's input with that tag, so words bind by name in any input order."""
    return zlib.crc32(name.encode("utf-8", "surrogatepass")) or 1


def _input_index(inputs) -> dict[str, int]:
    if inputs is None:
        return {}
    _check_names(inputs)
    return {name: i for i, name in enumerate(inputs)}


def _check_names(inputs) -> None:
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Iterable):
        raise ProgramError(f"inputs={inputs!r}: give the input names in order (a list, or a "
                           f"dict of name -> type)")


def as_program(prog, what: str = "program"):
    """``prog`` as a list/tuple of ops or the uint64 array itself (a one-shot iterator becomes
    a list, so an error can name the op); anything else is an error naming ``what``."""
    if isinstance(prog, (list, tuple, np.ndarray)):
        return prog
    if not isinstance(prog, (str, bytes, bytearray, Mapping)) and isinstance(prog, Iterable):
        return list(prog)
    raise ProgramError(f"{what}: expected a list of ops (or a uint64 array from encode()), "
                       f"not {type(prog).__name__}")


def encode(prog: Sequence[Op], inputs: Sequence[str] | Mapping[str, str] | None = None, *,
           site=None, dialect: str | None = None) -> Encoded:
    """The program as a uint64 array (one word per op, two for 64-bit constants), an
    :class:`Encoded` that carries the input names. Inputs named in the program are numbered by
    their position in ``inputs``; ``site=`` takes the site's in/mod variable names; with neither,
    the names the program reads, in order of first use. Each INPUT word also carries its
    name's tag (:func:`input_tag`), and a compile binds by it: the words read the right
    variables at any site that has them, whatever its input order, even as a plain array.
    Inputs given by index (``input(0)``) stay positional. ``dialect=`` (``"numptx"``,
    ``"mm-ptx"``) is recorded as ``.dialect``: compiles run the program in it. ``"mm-ptx"``
    starts the words with a marker word (:func:`~numptx._program.ops.dialect_marker`), so any
    copy of the array (``np.asarray``, ``np.save``, ``np.concatenate`` as its first part) keeps
    the dialect; numptx programs get no marker (the default dialect)."""
    if dialect is not None:
        d = dialect_id(dialect, "encode")
        prog = as_program(prog, "encode")
        own = marker_dialect(prog[0].word) if len(prog) and isinstance(prog[0], Op) else None
        if own is not None and own != d:
            raise ProgramError(f"encode: the program starts with dialect_marker("
                               f"{DIALECTS[own]!r}) and dialect={dialect!r} contradicts it")
        if d and own is None:                    # the marker: the dialect travels in the words
            prog = [dialect_marker(dialect), *prog]
    if site is not None:
        if inputs is not None:
            raise ProgramError("encode: pass inputs= or site=, not both")
        names = getattr(site, "inputs", None)
        if names is None or isinstance(site, str):
            hint = f" (pass inj.sites[{site!r}])" if isinstance(site, str) else ""
            raise ProgramError(f"encode: site= takes a numptx Site, not "
                               f"{type(site).__name__}{hint}")
        inputs = [v.name for v in names]
    elif inputs is None:
        inputs = []
        for op in as_program(prog, "encode"):
            name = getattr(op, "name", None)
            if name is not None and name not in inputs:
                inputs.append(name)
    index = _input_index(inputs)
    out = np.frombuffer(_encode(prog, index), dtype=np.uint64).copy().view(Encoded)
    out.inputs = tuple(index)
    out._dialect = dialect
    return out


def program_dialect(prog):
    """(dialect index or None, the program without its marker word): the dialect a program
    carries (its marker word 0; an :class:`Encoded` encoded as numptx). One compare per program."""
    if isinstance(prog, np.ndarray):
        if prog.ndim == 1 and prog.size and prog.dtype == np.uint64 and \
                int(prog[0]) & MARKER_MASK == MARKER_MAGIC:
            return int(prog[0]) >> 32 & 0xFF, prog[1:]
        return (0 if getattr(prog, "_dialect", None) == "numptx" else None), prog
    if isinstance(prog, (bytes, bytearray)):
        if len(prog) >= 8 and int.from_bytes(prog[:8], "little") & MARKER_MASK == MARKER_MAGIC:
            return prog[4], prog[8:]
        return None, prog
    if isinstance(prog, (list, tuple)) and prog and prog[0].__class__ is Op and \
            prog[0].word & MARKER_MASK == MARKER_MAGIC:
        return prog[0].word >> 32 & 0xFF, prog[1:]
    return None, prog


def _encode_fast(prog, name_raw: dict[str, bytes]) -> bytes | None:
    """Encode with inputs resolved through ``name_raw`` (name -> the word's bytes): a join of
    precomputed bytes, no per-word integer conversion. None when something needs the slow path."""
    try:
        return b"".join([op.raw or name_raw[op.name] for op in prog])
    except (KeyError, AttributeError, TypeError):
        return None


def _encode(prog, index: dict[str, int], what: str = "program") -> array:
    prog = as_program(prog, what)
    words = array("Q")
    append = words.append
    try:
        for op in prog:
            if op.name is not None:
                try:
                    append(op.word | index[op.name] << 16 | input_tag(op.name) << 32)
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
    of a word that is no valid op under the current instruction table). A dialect marker word
    becomes a ``dialect_marker(...)`` op, so ``encode(decode(w))`` gives ``w`` back and the
    decoded list still compiles in its dialect."""
    types = TYPES              # (a local: read once per word below)
    if inputs is None:
        inputs = getattr(words, "inputs", None)       # an Encoded knows its names
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
        if word & MARKER_MASK == MARKER_MAGIC and b & 0xFF < len(DIALECTS):
            out.append(dialect_marker(DIALECTS[b & 0xFF]))   # encode() writes it back as is
            i += 1
            continue
        if kind in (CONST, CONST64, META, STORE, LOAD) and t >= len(types):
            raise ProgramError(f"{where}: unknown value type id {t}")
        if kind == INPUT:
            op = _decode_input(a, b, names)
        elif kind == CONST:
            if types[t] in WIDE:
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
        if (kind not in (CONST, INPUT) and b) or (kind in (NOP, RETURN, INPUT, INSTR, ROUTINE, META_CONST) and t):
            raise ProgramError(f"{where}: stray bits in unused fields")
        out.append(op)
        i += 1
    return out


def _decode_input(a: int, tag: int, names: list[str] | None) -> Op:
    """The op of INPUT word ``a`` with name tag ``tag`` (0: positional) given the input
    ``names``: the name whose tag it carries; a tag none of them has (or no names) keeps the
    word as it is, ``input(a, tag=...)``, which a compile binds by that tag."""
    if not tag:
        return input(names[a]) if names is not None and a < len(names) else input(a)
    if names is not None:
        if a < len(names) and input_tag(names[a]) == tag:
            return input(names[a])
        for name in names:
            if input_tag(name) == tag:
                return input(name)
    return input(a, tag=tag)


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


def routine_dialects(routines, d: int | None, whose: str, what: str):
    """(dialect, routines without markers): the routines' dialect must match ``d`` (None:
    the first routine that carries one decides)."""
    if not routines or not isinstance(routines, (list, tuple)):
        return d, routines         # (no routines, or a wrong type that _routines refuses)
    out = list(routines)
    for i, r in enumerate(out):
        rd, out[i] = program_dialect(r)
        if rd is None:
            continue
        if d is not None and rd != d:
            raise ProgramError(f"{what}: routine {i} is in the {DIALECTS[rd]} dialect, "
                               f"{whose} in {DIALECTS[d]}; a routine runs in its caller's "
                               f"dialect: encode it with dialect={DIALECTS[d]!r} (or "
                               f"sp.convert it)")
        if d is None:
            d, whose = rd, f"routine {i}"
    return d, out
