"""The bridge to the C core (native/stack_ptx.h): compile requests (inputs, outputs, limits
as C structs, cached per signature), per-thread buffers, one program or a batch per call::

    from numptx._program import compile_words, const
    stub = compile_words("stack", [const(1.0, "f32")], None, {"y": "f32"})

``compile_lowered`` is the DSL's path: encoded words straight to the core.
"""
from __future__ import annotations

import re
import threading
from array import array
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from .._native import ffi, lib
from ..dtypes import get_dtype
from ..errors import TypeRegistryError
from ..instructions import TYPES
from ..valuetypes import USER
from ..opkinds import CONST64, INPUT
from .ctable import _status_name, _table
from .encoding import as_program, input_tag, _encode, _encode_fast, decode, routine_dialects
from .ops import DIALECTS, MARKER_MAGIC, MARKER_MASK, U64, ASTError, ProgramError
from .stub import DEFAULT_LIMITS, Limits, Stub, batch_stubs, diag_fields, meta_capacity

__all__ = ["compile_words", "compile_words_many", "compile_lowered"]

# the C core's ABI this module speaks (stackptx_limits with its dialect field, stackptx_table
# with the user stack types): a stale build of numptx/_native would read the structs short
_ABI_VERSION = 3
if getattr(lib, "STACKPTX_ABI_VERSION", 1) != _ABI_VERSION:
    raise ImportError(f"numptx's native module was built for C core ABI "
                      f"{getattr(lib, 'STACKPTX_ABI_VERSION', 1)}, this numptx needs "
                      f"{_ABI_VERSION}: rebuild it (pip install -e .)")

_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")
# a vector special register's read in a stub: mov.v4.u32 {%_s0, %_s1, %_s2, %_s3}, %tid;
_V4_SPECIAL = re.compile(r"^mov\.v4\.u32 \{(%[\w$]+), (%[\w$]+), (%[\w$]+), (%[\w$]+)\}, "
                         r"(%[a-z_]+);\n", re.M)
_TEMP = re.compile(r"_s\d+\Z")


class _IO:
    """Inputs and outputs of a compile request, as C arrays (cached per signature)."""
    __slots__ = ("c", "in_names", "out_types", "index", "tags", "clashes", "name_words", "ws_need",
                 "label", "_keep", "tag_set", "foreign")

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
        tags = [0 if "\x00" in n else input_tag(n) for n in in_prog_names]
        # two names with one CRC-32: neither binds by tag (a tagged word for them is an error)
        self.clashes = {t for t in tags if t and tags.count(t) > 1}
        self.tags = [0 if t in self.clashes else t for t in tags]
        self.tag_set = frozenset(self.tags)
        # an Encoded's input names -> the tags of those this compile lacks but binds by tag
        # (another name with the same CRC-32): the words that would read the wrong input
        self.foreign: dict[tuple, frozenset] = {}
        self.name_words = {n: U64.pack(INPUT | i << 16 | self.tags[i] << 32)
                           for n, i in self.index.items()}
        self.ws_need: dict = {}
        self.label = "the compile"      # or "site 'name'" (what errors call it)
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
            ffi.new("uint32_t[]", self.tags or [0]),
        )
        c.n_inputs, c.input_types, c.input_names, c.input_name_lens = len(in_regs), *arrays[:3]
        c.n_outputs, c.output_types, c.output_names, c.output_name_lens = len(out_regs), *arrays[3:6]
        c.input_tags = arrays[6]
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


def value_type(dtype: str, what: str) -> str:
    """Map a site dtype (built-in or registered) or a value type name to a stack type."""
    name = str(dtype).lower()
    if name in TYPES:
        return name
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
        # a name becomes a stack type's when one is defined: the count keeps keys current
        key = (len(USER), *inputs.items(), None, *outputs.items())
        io = _io_cache.get(key)
    except (AttributeError, TypeError):
        raise ProgramError("inputs and outputs map register names to value types, e.g. "
                           "{'x': 'f32'}") from None
    if io is None:
        in_t = [value_type(t, f"input {n!r}") for n, t in inputs.items()]
        out_t = [value_type(t, f"output {n!r}") for n, t in outputs.items()]
        io = _IO(list(inputs), list(inputs), in_t, list(outputs), out_t)
        _cache_put(key, io)
    return io


def input_words(site) -> dict[str, bytes]:
    """Each input name of ``site`` -> the 8 bytes its input op encodes to in a compile at the
    site (what :func:`batch_words` joins for op lists: a batch read in NumPy matches it)."""
    return _io_for(None, None, site).name_words


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


def _limits_c(limits: Limits | None, dialect: int = 0):
    """(cache key, C limits) for ``limits`` and the Stack PTX dialect (an index of
    DIALECTS, which the C core takes in its limits); the key is None for the defaults in
    numptx's dialect (hashing a Limits costs ~1 us)."""
    if limits is None and not dialect:
        c = _limits_cache.get(None)
        if c is None:
            _, c = _limits_c(DEFAULT_LIMITS)
            _limits_cache[None] = c
        return None, c
    lim = DEFAULT_LIMITS if limits is None else limits
    # (mm-ptx: the meta capacity may follow stack_capacity, which Limits' hash does not see)
    key = lim if not dialect else (lim, dialect, meta_capacity(lim, dialect))
    try:
        c = _limits_cache.get(key)
    except TypeError:                       # unhashable: a dict, a list...
        c = None
    if c is None:
        if not isinstance(lim, Limits):
            raise ProgramError(f"limits must be a numptx.stack_ptx.Limits, e.g. "
                               f"sp.Limits(max_steps=1000), not {type(lim).__name__}")
        c = ffi.new("stackptx_limits *", [lim.max_steps, lim.max_nodes, lim.max_depth,
                                          lim.stack_capacity, meta_capacity(lim, dialect), lim.n_slots,
                                          dialect])
        _limits_cache[key] = c
    return key, c


def name_hazard(names, io: _IO) -> frozenset:
    """The name tags through which an encoding that lists ``names`` could read the wrong input
    of this compile: those of its names the compile lacks that another input's tag matches
    (cached per names: the common case, none, costs one dict look-up)."""
    hazard = io.foreign.get(names) if names.__class__ is tuple else None
    if hazard is None:
        names = tuple(names)
        hazard = frozenset(t for t in (input_tag(n) for n in names if n not in io.index)
                           if t in io.tag_set)
        if len(io.foreign) > 256:
            io.foreign.clear()
        io.foreign[names] = hazard
    return hazard


def check_batch_names(programs: list, named: list[int], io: _IO) -> None:
    """:func:`check_names` for the programs ``named`` (indices of the batch's arrays that are
    no plain ndarray: ``Encoded``, whose ``.inputs`` may name them): an attribute read and a
    comparison a program where the names are those of the program before (the usual batch)
    and tag no hazard, so the check costs the batch compile little."""
    last = hazard = None
    for i in named:
        names = getattr(programs[i], "inputs", None)
        if not names:
            continue
        if names is not last and names != last:
            last, hazard = names, name_hazard(names, io)
        if hazard:
            check_names(programs[i], io, f"compile_many: program {i}")


def check_names(prog, io: _IO, what: str = "program", first_word: int = 0) -> None:
    """An encoding that remembers its input names (``Encoded.inputs``) and reads one this
    compile lacks, through a name tag (CRC-32) that another input of the compile has: an error
    naming both, where the C core would bind the word to that other input. Plain arrays carry
    only the tags (docs/design/programs.md, section 3: keep the Encoded, or sp.dumps)."""
    names = getattr(prog, "inputs", None)
    if not names:
        return
    if names.__class__ is not tuple:
        names = tuple(names)
    hazard = name_hazard(names, io)
    if not hazard:
        return
    w, i = prog.tolist(), 0
    while i < len(w):
        kind, a, tag = w[i] & 0xFF, (w[i] >> 16) & 0xFFFF, w[i] >> 32
        if kind == INPUT and tag in hazard:
            name = names[a] if a < len(names) and input_tag(names[a]) == tag else \
                next((n for n in names if input_tag(n) == tag), None)
            if name is not None and name not in io.index:
                other = next(n for n, k in io.index.items() if io.tags[k] == tag)
                known = ", ".join(repr(n) for n in io.index if "\x00" not in n)
                raise ProgramError(
                    f"{what}: word {i + first_word} reads input {name!r} (its encoding's name), "
                    f"which {io.label} does not have (inputs: {known}); {other!r} has the same "
                    f"name tag (CRC-32 0x{tag:08x}), so the word would read {other!r}: encode "
                    f"the program with this compile's names (sp.encode(prog, site=site)), or "
                    f"compile the ops")
        i += 2 if kind == CONST64 else 1


def _words(prog, io: _IO, what: str = "program", first_word: int = 0):
    if isinstance(prog, np.ndarray):
        if prog.dtype != np.uint64 or prog.ndim != 1:
            raise ProgramError(f"{what}: an encoded program is a 1-D uint64 array, not {prog.dtype} {prog.shape}")
        if prog.__class__ is not np.ndarray:
            check_names(prog, io, what, first_word)
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
            if r.__class__ is not np.ndarray and r.ndim == 1:
                check_names(r, io, f"routine {i}")
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


_DIAG_SIZE = ffi.sizeof("stackptx_diag")


def compile_words(mode: str, prog, inputs, outputs, *, site=None, routines=(), strict=False,
                  limits=None, dialect: int = 0, first_word: int = 0) -> Stub:
    """Compile one program with the Stack PTX (mode "stack") or AST PTX (mode "ast") core;
    ``dialect`` (Stack PTX): an index of DIALECTS; ``first_word``: the index word 0 of ``prog``
    has in what the user passed (1 when a dialect marker was stripped), for error messages."""
    io = _io_for(inputs, outputs, site)
    if prog.__class__ is not list:
        prog = as_program(prog)
    words, n, keep = _words(prog, io, first_word=first_word)
    rts, rkeep = _routines(routines, io) if routines else (ffi.NULL, None)
    try:
        return _compile_c(mode, io, limits, words, n, rts, strict, prog, dialect, first_word,
                          routines)
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
        key = (id(site), names, len(USER))
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
        key = (len(USER), *inputs.items(), None, *outputs.items(), None, *names)
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
             [value_type(v.dtype, f"{what} variable {v.name!r}") for v in ordered],
             [v.reg for v in outs],
             [value_type(v.dtype, f"{what} variable {v.name!r}") for v in outs])
    if site is not None:
        io.label = what
    io._keep = (io._keep, site)          # the id() in the key stays valid while cached
    _cache_put(key, io)
    return io


class _Reg:
    """A register of an ``inputs=``/``outputs=`` compile, shaped like a site variable."""
    __slots__ = ("name", "reg", "dtype")

    def __init__(self, name: str, reg: str, dtype: str):
        self.name, self.reg, self.dtype = name, reg, dtype


def _compile_c(mode: str, io: _IO, limits, words, n: int, rts, strict: bool, prog,
               dialect: int = 0, first_word: int = 0, routines=()) -> Stub:
    table = _table()
    lim_key, lim = _limits_c(limits, dialect)
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
    if diag.flags & lib.STACKPTX_D_UNKNOWN_INPUT:
        raise _unknown_input(prog, io, "program", first_word, routines)
    if st == lib.STACKPTX_OK:
        text = ffi.unpack(s.out, out_len[0]).decode()
        if dialect == 1:
            text = mmptx_special_movs(text)
        return Stub(text, io.in_names, io.out_types, d, DIALECTS[dialect])
    if st == lib.STACKPTX_ERR_STRICT_UNSATISFIED:
        raise ProgramError("strict compile: " + "; ".join(
            Stub("", io.in_names, io.out_types, d, DIALECTS[dialect]).diagnostics))
    error_word = diag_fields(d)[8]
    if mode == "ast" and error_word != 0xFFFFFFFF:
        ops = prog if prog is not None and not isinstance(prog, np.ndarray) else None
        shown = f" ({_op_at(ops, error_word)!r})" if ops is not None else ""
        index = _op_index(ops, error_word) if ops is not None else error_word
        what = _status_name(st)   # the core's text already names AST PTX ("AST PTX: ...")
        raise ASTError(f"{what if what.startswith('AST PTX') else 'AST PTX: ' + what} at op "
                       f"{index}{shown}", index=index, code=what)
    raise ProgramError(f"{mode} PTX compile failed: {_status_name(st)}")


def _unknown_input(prog, io: _IO, what: str, first_word: int = 0, routines=()) -> ProgramError:
    """The error for an INPUT word whose name tag no input of the compile has: the word (counted
    from ``first_word``) and, where the encoding remembers it (``Encoded.inputs``), the name;
    in ``prog``, else in the first of ``routines`` that has one."""
    known = ", ".join(repr(n) for n in io.index if "\x00" not in n) or "none"
    fix = (f"; encode it with this compile's names (sp.encode(prog, site=site) or "
           f"sp.encode(prog, [{known}]))")
    found = _unknown_word(prog, io, what, first_word, known, fix)
    if found is None and isinstance(routines, (list, tuple)):
        for i, r in enumerate(routines):
            if isinstance(r, (bytes, bytearray)) and len(r) % 8 == 0:
                r = np.frombuffer(bytes(r), dtype="<u8").astype(np.uint64)
            found = _unknown_word(r, io, f"routine {i}", 0, known, fix)
            if found is not None:
                break
    return found or ProgramError(f"{what} (or one of its routines) reads an encoded input "
                                 f"{io.label} does not have (inputs: {known}){fix}")


def _unknown_word(prog, io: _IO, what: str, first_word: int, known: str,
                  fix: str) -> ProgramError | None:
    """The error for the first INPUT word of ``prog`` whose tag no input has, or None."""
    if isinstance(prog, (list, tuple)):
        try:
            prog = np.frombuffer(_encode(prog, io.index, what), dtype=np.uint64)
        except ProgramError as e:
            return e
    if not isinstance(prog, np.ndarray):
        return None
    names = {input_tag(n): n for n in (getattr(prog, "inputs", None) or ())}
    w, i = prog.astype(np.uint64).tolist(), 0
    while i < len(w):
        kind, tag = w[i] & 0xFF, w[i] >> 32
        if kind == INPUT and tag and tag not in io.tags:
            name = names.get(tag)
            shown = f"input {name!r}" if name else f"an input (name tag 0x{tag:08x})"
            if tag in io.clashes:
                clash = [n for n in io.index if "\x00" not in n and input_tag(n) == tag]
                return ProgramError(
                    f"{what}: word {i + first_word} reads {shown}, but inputs {clash[0]!r} and "
                    f"{clash[1]!r} share that name tag (CRC-32), so an encoding cannot "
                    f"tell them apart: compile the program as a list of ops")
            return ProgramError(f"{what}: word {i + first_word} reads {shown}, which {io.label} "
                                f"does not have (inputs: {known}){fix}")
        i += 2 if kind == CONST64 else 1
    return None


def mmptx_special_movs(text: str) -> str:
    """An mm-ptx dialect stub's vector special register reads as mm-ptx writes them: a scalar
    ``mov.u32`` per component the stub uses (``%tid.x`` ... ``%tid.w``), none for the others
    (mm-ptx's ``_stack_ptx_compile_special``), in place of numptx's one ``mov.v4.u32``."""
    if "mov.v4.u32 {" not in text:
        return text
    from ..instructions_mmptx import VECTOR_SPECIALS

    def scalar(m: re.Match) -> str:
        if m.group(5) not in VECTOR_SPECIALS:
            return m.group(0)
        rest = text[:m.start()] + text[m.end():]
        movs = []
        for reg, c in zip(m.groups()[:4], "xyzw"):
            uses = len(re.findall(re.escape(reg) + r"(?![\w$])", rest))
            if uses > 1:                        # read somewhere, not only declared
                movs.append(f"mov.u32 {reg}, {m.group(5)}.{c};\n")
        return "".join(movs)
    return _V4_SPECIAL.sub(scalar, text)


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


def batch_words(programs: list, io: _IO, routines, dialect: int | None,
                what: str = "compile_many"):
    """(words, lengths, dialect, routines) of a batch of programs for one call of the C core:
    op lists encoded, arrays checked and joined, dialect markers stripped
    (:func:`_batch_dialect`); ``what`` names the caller in errors."""
    numptx_enc = []                 # Encoded as numptx: a dialect without a marker word
    named = []                      # arrays that may carry input names (Encoded)
    if all(isinstance(p, np.ndarray) for p in programs):
        for i, p in enumerate(programs):
            if p.dtype != np.uint64 or p.ndim != 1:
                raise ProgramError(f"{what}: encoded programs are 1-D uint64 arrays")
            if p.__class__ is not np.ndarray:
                named.append(i)
                if getattr(p, "_dialect", None) == "numptx":
                    numptx_enc.append(i)
        allw = np.concatenate(programs)
        lens = [len(p) for p in programs]
    else:
        parts: list[bytes] = []             # bytes joined once: one array for the batch
        name_raw = io.name_words
        if all(p.__class__ is list for p in programs):      # op lists: the search's batches
            try:
                parts = [b"".join([op.raw or name_raw[op.name] for op in p]) for p in programs]
            except (KeyError, AttributeError, TypeError):   # the loop below says which
                parts = []
        for i, p in enumerate(programs if not parts else ()):
            if isinstance(p, np.ndarray):
                if p.dtype.kind not in "iu" or p.ndim != 1:
                    raise ProgramError(f"{what}: program {i}: encoded programs are 1-D "
                                       f"uint64 arrays, not {p.dtype} {p.shape}")
                if p.__class__ is not np.ndarray:
                    named.append(i)
                    if getattr(p, "_dialect", None) == "numptx":
                        numptx_enc.append(i)
                parts.append(np.asarray(p, dtype=np.uint64).tobytes())
            else:
                try:                        # _encode_fast, inlined: the batch's hot loop
                    w = b"".join([op.raw or name_raw[op.name] for op in p])
                except (KeyError, AttributeError, TypeError):
                    w = None
                if w is None:
                    if not isinstance(p, (list, tuple)) and isinstance(p, Iterable) and \
                            not isinstance(p, (str, bytes, Mapping)):
                        # a one-shot iterator the fast path consumed: the ops are gone
                        raise ProgramError(f"{what}: program {i} holds an item that is "
                                           f"no op (or an unknown input); pass lists of ops")
                    w = _encode(p, io.index, f"{what}: program {i}").tobytes()
                parts.append(w)
        allw = np.frombuffer(b"".join(parts), dtype=np.uint64)
        lens = [len(p) >> 3 for p in parts]
    check_batch_names(programs, named, io)
    return _batch_dialect(allw, lens, numptx_enc, dialect, routines, what)


def compile_words_many(programs, inputs, outputs, *, site=None, routines=(), strict=False,
                       limits=None, dialect: int | None = 0) -> list[Stub]:
    """Compile a batch with one call of the C loop (which runs with the GIL released);
    ``dialect``: an index of DIALECTS, or None: the dialect the programs carry (marker words,
    ``Encoded.dialect``), else numptx; see :func:`_batch_dialect`."""
    io = _io_for(inputs, outputs, site)
    if not isinstance(programs, list):
        if isinstance(programs, (str, bytes, Mapping)) or not isinstance(programs, Iterable):
            raise ProgramError(f"compile_many: expected a list of programs (op lists or uint64 "
                               f"arrays), not {type(programs).__name__}")
        programs = list(programs)
    table = _table()
    n = len(programs)
    if n == 0:
        return []
    allw, lens, dialect, routines = batch_words(programs, io, routines, dialect)
    lim_key, lim = _limits_c(limits, dialect)
    offsets = np.zeros(n + 1, dtype=np.uint32)
    np.cumsum(lens, out=offsets[1:])
    rts, rkeep = _routines(routines, io)
    ws = ffi.new("char[]", io.workspace_size(lim_key, lim))
    diags = ffi.new("stackptx_diag[]", n)
    n_done = ffi.new("uint32_t *")
    cap = max(1 << 16, n * 512)
    texts: list[str] = []
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
    flags = np.frombuffer(raw, dtype=np.uint32)[::_DIAG_SIZE // 4]
    bad = np.flatnonzero(flags & lib.STACKPTX_D_UNKNOWN_INPUT)
    if len(bad):
        i = int(bad[0])
        raise _unknown_input(programs[i], io, f"compile_many: program {i}", routines=routines)
    if dialect == 1:
        texts = [mmptx_special_movs(t) for t in texts]
    stubs = batch_stubs(texts, io.in_names, io.out_types, raw, _DIAG_SIZE, DIALECTS[dialect])
    if strict:
        bad = [i for i, stub in enumerate(stubs) if stub.unsatisfied]
        if bad:
            raise ProgramError(f"strict compile of program {bad[0]}: " + "; ".join(stubs[bad[0]].diagnostics))
    return stubs


def _batch_dialect(allw: np.ndarray, lens, numptx_enc: list[int], dialect: int | None,
                   routines, what: str = "compile_many"):
    """(words, lengths, dialect, routines) of a batch with the dialect markers stripped. Each
    program's dialect is its marker word (found for the whole batch at once) or numptx when it
    was encoded so; one without takes ``dialect`` (None: numptx). A program whose dialect
    contradicts ``dialect``, or a batch mixing dialects, is an error naming the programs."""
    lens = np.asarray(lens, dtype=np.int64)
    starts = np.cumsum(lens) - lens
    has = lens > 0
    first = np.zeros(len(lens), dtype=np.uint64)
    first[has] = allw[starts[has]]
    marked = (first & np.uint64(MARKER_MASK)) == np.uint64(MARKER_MAGIC)
    if not marked.any() and not numptx_enc:
        d = dialect or 0
        d, routines = routine_dialects(routines, d if dialect is not None else None,
                                       "the programs", what)
        return allw, lens, d or 0, routines
    own = np.full(len(lens), -1, dtype=np.int64)
    own[marked] = (first[marked] >> np.uint64(32)).astype(np.int64) & 0xFF
    own[[i for i in numptx_enc if own[i] < 0]] = 0
    if dialect is not None:
        bad = np.flatnonzero((own >= 0) & (own != dialect))
        if len(bad):
            i = int(bad[0])
            raise ProgramError(f"{what}: program {i} is in the {DIALECTS[own[i]]} dialect "
                               f"(encode(dialect=); mm-ptx: its marker word) and is compiled "
                               f"with dialect={DIALECTS[dialect]!r}: compile it apart, or "
                               f"sp.convert it first")
        eff = dialect
    else:
        each = np.where(own < 0, 0, own)         # no dialect of its own: numptx
        clash = np.flatnonzero(each != each[0])
        if len(clash):
            j = int(clash[0])
            why = [DIALECTS[each[k]] + (" (none given: numptx)" if own[k] < 0 else "")
                   for k in (0, j)]
            raise ProgramError(f"{what}: the batch mixes dialects: program 0 is "
                               f"{why[0]}, program {j} is {why[1]}; compile each dialect apart "
                               f"(or pass dialect= for the programs that carry none)")
        eff = int(each[0])
    if marked.any():
        keep = np.ones(len(allw), dtype=bool)
        keep[starts[marked]] = False
        allw, lens = allw[keep], lens - marked
    eff, routines = routine_dialects(routines, eff, f"the programs ({DIALECTS[eff]})",
                                     what)
    return allw, lens, eff, routines
