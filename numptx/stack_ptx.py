"""Stack PTX: programs of small typed-stack instructions that always compile to a valid PTX stub.

>>> import numpy as np, numptx as nx
>>> from numptx import stack_ptx as sp
>>> prog = [sp.input("x"), sp.input("y"), sp.instr("mul.ftz.f32"),
...         sp.const(1.0, "f32"), sp.instr("add.ftz.f32")]
>>> stub = sp.compile(prog, inputs={"x": "f32", "y": "f32"}, outputs={"z": "f32"})
>>> got = nx.emulate(stub, {"x": np.float32([2, 3]), "y": np.float32([4, 5])}, outputs=["z"])
>>> got["z"].tolist()
[9.0, 16.0]

There is one stack per value type (``pred``, ``f16`` ... ``b64``). Operands are postfix, as in
RPN: ``[a, b, sp.instr("sub.f32")]`` computes a - b. An instruction whose operands are missing
does nothing, so every mutation of a program is still a valid program. Execution builds a DAG;
only what the outputs need is emitted and a shared value is emitted once. With several outputs of
one type, the first output takes the top of the stack. The encoding (``encode``), the limits and
the stub format are specified in ``docs/design/programs.md``; the compiler is the C core
``native/stack_ptx.h``.

Programs written for mm-ptx (MetaMachines' Stack PTX) compile with ``dialect="mm-ptx"``: its
operand order (the first operand on top), meta operations, unwritten unsatisfied outputs and
step count; :func:`convert` rewrites a program from one dialect to the other
(``docs/dialects.md``).
"""
from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ._program import (ASTError, CONST, CONST64, DIALECTS, INPUT, INSTR, LOAD, META, META_CONST,
                       META_OPS, NOP, RETURN, ROUTINE, STORE, Limits, Op, ProgramError, Stub,
                       as_program, compile_words, compile_words_many, const, convert, decode,
                       dialect_id, encode, input, instr, resolve_dialect, special, type_id)
from ._program.encoding import program_dialect, remap_types, typed_ids, user_type_ids
from ._program.interpret import InterpretError, Tapes, interpret, interpreted_rows, tapes
from ._program.ops import MARKER_MAGIC as _MARK, MARKER_MASK as _MARK_MASK, dialect_marker
from . import valuetypes as VT
from .errors import NumptxError, NumptxWarning
from .stack_types import MAX_USER_TYPES, retype, stack_type, stack_types

__all__ = [
    "Op", "Stub", "Limits", "ProgramError", "input", "const", "instr", "special", "meta", "dup",
    "yank_dup", "swap", "swap_with", "replace", "drop", "clear", "rotate", "reverse", "routine",
    "store", "load", "ret", "nop", "encode", "decode", "compile", "compile_many", "dumps", "loads",
    "DIALECTS", "convert", "dialect_marker", "stack_type", "stack_types", "retype",
    "MAX_USER_TYPES", "NoOutputsWarning", "interpret", "tapes", "Tapes", "InterpretError",
    "interpreted_rows",
]


def meta(n: int) -> Op:
    """Push the meta constant ``n`` (a depth for yank_dup, swap_with, replace, rotate, reverse)."""
    if not isinstance(n, (int, np.integer)) or not 0 <= int(n) < 1 << 16:
        raise ProgramError(f"meta({n!r}): the meta constant must be an int in [0, 65535]")
    return Op(META_CONST, int(n) << 16, text=f"meta({int(n)})")


def _meta_op(op_name: str):
    code = META_OPS.index(op_name)

    def make(dtype: str) -> Op:
        t = type_id(dtype, f"sp.{op_name}")
        return Op(META, t << 8 | code << 16, text=f"{op_name}({dtype!r})")
    make.__name__ = op_name
    make.__doc__ = f"Meta operation ``{op_name}`` on the ``dtype`` stack (see docs/design/programs.md)."
    return make


dup = _meta_op("dup")
yank_dup = _meta_op("yank_dup")
swap = _meta_op("swap")
swap_with = _meta_op("swap_with")
replace = _meta_op("replace")
drop = _meta_op("drop")
clear = _meta_op("clear")
rotate = _meta_op("rotate")
reverse = _meta_op("reverse")


def routine(index: int) -> Op:
    """Run routine ``index`` (from ``compile(..., routines=[...])``) inline."""
    if not isinstance(index, (int, np.integer)) or not 0 <= int(index) < 1 << 16:
        raise ProgramError(f"routine({index!r}): the index must be an int in [0, 65535]")
    return Op(ROUTINE, int(index) << 16, text=f"routine({int(index)})")


def store(dtype: str, slot: int) -> Op:
    """Pop the top of the ``dtype`` stack into scratch slot ``slot`` (slots hold one value of
    any type)."""
    return Op(STORE, type_id(dtype, "sp.store") << 8 | _slot(slot) << 16, text=f"store({dtype!r}, {slot})")


def load(dtype: str, slot: int) -> Op:
    """Push the value of scratch slot ``slot`` onto the ``dtype`` stack (a no-op when the slot
    holds another type; the mm-ptx dialect ignores ``dtype``: mm-ptx's load names no type)."""
    return Op(LOAD, type_id(dtype, "sp.load") << 8 | _slot(slot) << 16, text=f"load({dtype!r}, {slot})")


def _slot(slot) -> int:
    if not isinstance(slot, (int, np.integer)) or not 0 <= int(slot) < 1 << 16:
        raise ProgramError(f"scratch slot {slot!r} must be an int in [0, 65535]")
    return int(slot)


def ret() -> Op:
    """Stop the program (inside a routine: return from it)."""
    return Op(RETURN, 0, text="ret()")


def nop() -> Op:
    """Do nothing (a placeholder mutation operators may use)."""
    return Op(NOP, 0, text="nop()")


class NoOutputsWarning(NumptxWarning):
    """A Stack PTX compile without ``outputs=`` (or ``site=``), or at a site with no out or
    mod variable, of a program that computes values: they reach no register and the stub is
    empty."""


def _writes_nothing(outputs, site) -> bool:
    """No register to write: no outputs= (or an empty mapping) and no site=, or a site with no
    out or mod variable (``site.outputs`` empty)."""
    if site is not None:
        return not getattr(site, "outputs", True)
    return outputs is None or (isinstance(outputs, Mapping) and not outputs)


def _why_nothing(site) -> str:
    if site is None:
        return "no outputs= (and no site=) were given"
    return f"site {getattr(site, 'name', '?')!r} has no out or mod variable"


def _fix_nothing(site) -> str:
    if site is None:
        return "pass outputs={'y': 'f32'} (register name -> value type) or site="
    return "give the site a PTX_OUT or PTX_MOD variable, or compile for another site"


def _no_outputs(strict: bool, what: str, site=None) -> None:
    """``strict=True`` without outputs checks nothing and writes nothing: an error naming the fix."""
    if strict:
        raise ProgramError(f"{what}: strict=True, but {_why_nothing(site)}: the stub would "
                           f"write no register, so nothing could be checked; {_fix_nothing(site)}")


def _warn_no_outputs(what: str, whose: str, site=None) -> None:
    from .errors import warn_from_caller
    warn_from_caller(f"{what}: {_why_nothing(site)}, so {whose} reach no register and the "
                     f"stub is empty; {_fix_nothing(site)}", NoOutputsWarning)


def compile(prog: Sequence[Op] | np.ndarray, inputs: Mapping[str, str] | None = None,
            outputs: Mapping[str, str] | None = None, *, site=None, routines: Sequence = (),
            strict: bool = False, limits: Limits | None = None,
            dialect: str | None = None) -> Stub:
    """Compile a Stack PTX program to a PTX stub (a ``str`` subclass with ``.diagnostics``).

    ``inputs``/``outputs`` map the register names the stub uses (no ``%``) to value types, in
    order; or ``site=`` binds to a :class:`numptx.Site`: inputs are its in/mod variables (programs
    name them by variable name), outputs its out/mod variables, and the stub uses the site's
    registers. An output no value reaches gets the zero of its type and is listed in
    ``stub.diagnostics`` (``strict=True`` raises :class:`ProgramError` instead). Without
    ``outputs=`` and ``site=``, or at a site with no out or mod variable, the stub writes
    nothing: ``strict=True`` then raises, and a program that computes values warns
    (:class:`NoOutputsWarning`).

    ``dialect="mm-ptx"`` runs the program with mm-ptx's semantics (``docs/dialects.md``); there
    an output no value reaches is not written at all (no ``mov``: the register keeps what it
    held; an ``out`` variable of a site is then undefined, which injection warns of). The
    default is the dialect ``prog`` carries (``encode(..., dialect="mm-ptx")`` starts the words
    with a marker word, :func:`dialect_marker`), else its routines', else numptx; a program or
    routine that contradicts ``dialect=`` or each other is a :class:`ProgramError`.
    """
    # the common case (an op list without a marker op, no routines) skips the look-up
    first = 0
    if dialect is None and prog.__class__ is list and not routines and \
            (not prog or prog[0].__class__ is not Op or prog[0].word & _MARK_MASK != _MARK):
        d = 0
    else:
        n = len(prog) if hasattr(prog, "__len__") else None
        d, prog, routines = resolve_dialect(dialect, prog, routines, "compile")
        if n is not None and hasattr(prog, "__len__") and len(prog) != n:
            first = 1                      # the marker word went: errors count it back in
    if _writes_nothing(outputs, site):
        _no_outputs(strict, "compile", site)
    stub = compile_words("stack", prog, inputs, outputs, site=site, routines=routines,
                         strict=strict, limits=limits, dialect=d, first_word=first)
    if _writes_nothing(outputs, site) and stub.stats["nodes"]:
        _warn_no_outputs("compile", "the program's values", site)
    return stub



def compile_many(programs: Iterable[Sequence[Op] | np.ndarray], inputs: Mapping[str, str] | None = None,
                 outputs: Mapping[str, str] | None = None, *, site=None, routines: Sequence = (),
                 strict: bool = False, limits: Limits | None = None,
                 dialect: str | None = None) -> list[Stub]:
    """Compile a batch of programs in one C loop with the GIL released.

    Programs may be lists of ops or uint64 arrays from :func:`encode` (the fast form: evolutionary
    search keeps its population encoded). ``dialect`` as in :func:`compile`, one per batch: a
    program that carries no dialect (marker word) runs in ``dialect`` (default numptx); a batch
    whose programs' dialects differ is a :class:`ProgramError` naming two of them.
    """
    if not isinstance(programs, list) and isinstance(programs, Iterable) and \
            not isinstance(programs, (str, bytes, Mapping)):
        programs = list(programs)
    d = None if dialect is None else dialect_id(dialect, "compile_many")
    if _writes_nothing(outputs, site):
        _no_outputs(strict, "compile_many", site)
    stubs = compile_words_many(programs, inputs, outputs, site=site, routines=routines,
                               strict=strict, limits=limits, dialect=d)
    if _writes_nothing(outputs, site) and any(s.stats["nodes"] for s in stubs):
        _warn_no_outputs("compile_many", "the programs' values", site)
    return stubs


# ---- serialization ------------------------------------------------------------------------------
_MAGIC = b"NXSP"
_VERSION = 2          # 2: INPUT words carry name tags (1 is read too)
# 3: format 2 with the program's dialect in the flags field. numptx programs are still written
# as format 2 (flags 0), which older numptx reads; an mm-ptx program is format 3, which older
# numptx refuses rather than run it with numptx's semantics.
_VERSION_DIALECT = 3
# 4: format 3 plus the user stack types the program names (id, name, register type), after the
# input names: loads maps them to this process's ids by name. Written only when there are any.
_VERSION_TYPES = 4
_HEADER = struct.Struct("<4sHH16sI")      # magic, version, flags, table hash (16 bytes), n_names


class SerializationError(NumptxError):
    """Bytes that are not a valid serialized Stack PTX program."""


def dumps(prog: Sequence[Op], *, dialect: str | None = None) -> bytes:
    """Serialize a program: versioned, little-endian, checksummed bytes that carry the hash of the
    instruction table's rows the program can index (so loading under a table whose rows there
    differ is refused), the user stack types it names (``stack_type``) and the
    program's Stack PTX ``dialect`` (so loading it as the other dialect is refused)::

        data = sp.dumps(prog); assert sp.loads(data) == prog
        data = sp.dumps(prog, dialect="mm-ptx"); sp.loads(data, dialect="mm-ptx")

    ``dialect`` defaults to the program's marker op (:func:`dialect_marker`, which the header
    then records in its place), else numptx."""
    import hashlib
    from .instructions import TABLE
    try:
        d = 0 if dialect is None else dialect_id(dialect, "dumps")
    except ProgramError as e:
        raise SerializationError(str(e)) from None
    try:
        prog = as_program(prog, "dumps")
    except ProgramError as e:
        raise SerializationError(str(e)) from None
    if isinstance(prog, np.ndarray):
        raise SerializationError("dumps: takes a list of ops; decode() an encoded program first")
    own, prog = program_dialect(prog)
    if own is not None:
        if dialect is not None and own != d:
            raise SerializationError(f"dumps: the program starts with dialect_marker("
                                     f"{DIALECTS[own]!r}) and dialect={dialect!r} contradicts it")
        d = own
    names: list[str] = []
    for op in prog:
        if not isinstance(op, Op):
            raise SerializationError(f"dumps: {op!r} is not a Stack PTX op")
        if op.name is not None and op.name not in names:
            names.append(op.name)
    words = encode(prog, inputs=names)
    rows = [(i, (op.word >> 16) & 0xFFFF) for i, op in enumerate(prog) if op.word & 0xFF == INSTR]
    for i, r in rows:
        if r >= len(TABLE):
            raise SerializationError(f"dumps: op {i} runs instruction row {r}, outside the table "
                                     f"({len(TABLE)} rows)")
    # the stack types the words name, and those of the rows they run
    found = {t for t in typed_ids(words) if t >= len(VT.ROWS)}
    found |= {VT.NAMES.index(t) for r in {r for _, r in rows}
              for t in TABLE[r].operand_types + TABLE[r].result_types if VT.BY_NAME[t].user}
    users = sorted(found)
    version = _VERSION_TYPES if users else _VERSION_DIALECT if d else _VERSION
    # the hash of the rows the program can index (up to its highest INSTR): a table that
    # differs only after them, or gained rows, still runs the program as saved
    used = max((r for _, r in rows), default=-1)
    parts = [_HEADER.pack(_MAGIC, version, d, bytes.fromhex(TABLE.prefix_hash(used + 1))[:16],
                          len(names))]
    for n in names:
        raw = n.encode()
        parts.append(struct.pack("<H", len(raw)) + raw)
    if users:
        parts.append(struct.pack("<H", len(users)))
        for t in users:
            row = VT.BY_NAME[VT.NAMES[t]]
            parts.append(struct.pack("<BB", t, len(row.name)) + row.name.encode()
                         + struct.pack("<B", len(row.reg)) + row.reg.encode())
    parts.append(struct.pack("<I", len(words)))
    parts.append(words.astype("<u8").tobytes())
    body = b"".join(parts)
    return body + hashlib.blake2b(body, digest_size=8).digest()


def loads(data: bytes, *, dialect: str = "numptx", check_table: bool = True) -> list[Op]:
    """Inverse of :func:`dumps`. Truncated, corrupted or hostile bytes raise
    :class:`SerializationError`; a program saved under another instruction table raises unless
    ``check_table=False``; a program saved in another dialect than ``dialect`` raises (its words
    would compute something else: load it as its own dialect, then :func:`convert` it)."""
    import hashlib
    from .instructions import TABLE
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SerializationError(f"loads: expected bytes, not {type(data).__name__}")
    data = bytes(data)
    if len(data) < _HEADER.size + 4 + 8:
        raise SerializationError(f"loads: {len(data)} bytes is too short for a Stack PTX program")
    body, digest = data[:-8], data[-8:]
    if hashlib.blake2b(body, digest_size=8).digest() != digest:
        raise SerializationError("loads: checksum mismatch (truncated or corrupted data)")
    magic, version, flags, table_hash, n_names = _HEADER.unpack_from(body, 0)
    if magic != _MAGIC:
        raise SerializationError(f"loads: bad magic {magic!r}; not a numptx Stack PTX program")
    if version not in (1, _VERSION, _VERSION_DIALECT, _VERSION_TYPES):
        raise SerializationError(f"loads: format version {version} is not supported (this numptx "
                                 f"reads 1 to {_VERSION_TYPES})")
    try:
        want = dialect_id(dialect, "loads")
    except ProgramError as e:
        raise SerializationError(str(e)) from None
    saved = flags if version >= _VERSION_DIALECT else 0       # formats 1 and 2: numptx
    if saved >= len(DIALECTS):
        raise SerializationError(f"loads: the program's dialect id {saved} is unknown to this "
                                 f"numptx (it knows {', '.join(DIALECTS)})")
    if saved != want:
        src = DIALECTS[saved]
        raise SerializationError(
            f"loads: the program was saved in the {src} dialect, not {dialect}: its words compute "
            f"something else under {dialect}'s rules; load it with sp.loads(data, dialect={src!r}) "
            f"and compile it with dialect={src!r}, or sp.convert(prog, {src!r}, {dialect!r}, ...)")
    # a table that only gained rows at its end holds the program as saved (its rows kept
    # their indices); any other change is refused
    if check_table and TABLE.prefix_rows(table_hash.hex()) is None:
        raise SerializationError("loads: the program was saved under a different instruction table "
                                 "(pass check_table=False to load it anyway)")
    pos = _HEADER.size
    names = []
    for i in range(n_names):
        if pos + 2 > len(body):
            raise SerializationError(f"loads: truncated input name {i}")
        (ln,) = struct.unpack_from("<H", body, pos)
        pos += 2
        if pos + ln > len(body):
            raise SerializationError(f"loads: truncated input name {i}")
        try:
            names.append(body[pos:pos + ln].decode())
        except UnicodeDecodeError:
            raise SerializationError(f"loads: input name {i} is not UTF-8") from None
        pos += ln
    remap, pos = _read_user_types(body, pos) if version == _VERSION_TYPES else ({}, pos)
    if pos + 4 > len(body):
        raise SerializationError("loads: truncated word count")
    (n_words,) = struct.unpack_from("<I", body, pos)
    pos += 4
    if len(body) - pos != 8 * n_words:
        raise SerializationError(f"loads: {n_words} words announced, {(len(body) - pos) / 8:g} present")
    words = np.frombuffer(body, dtype="<u8", count=n_words, offset=pos).astype(np.uint64)
    if remap:
        words = remap_types(words, remap)
    try:
        return decode(words, inputs=names)
    except ProgramError as e:
        raise SerializationError(f"loads: {e}") from None


def _read_user_types(body: bytes, pos: int) -> tuple[dict[int, int], int]:
    """The stack-type section of format 4: saved id -> this process's id of the same name and
    register type (a type not defined here, or defined on other registers, is refused)."""
    def take(n: int, what: str) -> bytes:
        nonlocal pos
        if pos + n > len(body):
            raise SerializationError(f"loads: truncated {what}")
        pos += n
        return body[pos - n:pos]

    (n,) = struct.unpack("<H", take(2, "stack type count"))
    saved = []
    for i in range(n):
        t, ln = take(2, f"stack type {i}")
        try:
            name = take(ln, f"stack type {i}").decode()
            reg = take(take(1, f"stack type {i}")[0], f"stack type {i}").decode()
        except UnicodeDecodeError:
            raise SerializationError(f"loads: stack type {i} is not UTF-8") from None
        saved.append((t, name, reg))
    try:
        return user_type_ids(saved, "loads"), pos
    except ProgramError as e:
        raise SerializationError(str(e)) from None
