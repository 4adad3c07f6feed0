"""Reading a cubin: the ELF64 file nvJitLink writes, parsed with ``struct`` (no CUDA tool).

>>> elf = CubinElf(cubin)                                   # doctest: +SKIP
>>> elf.arch, [s.name for s in elf.kernels()]               # doctest: +SKIP
('sm_90', ['kernel'])
>>> elf.function_values(EIATTR_REGCOUNT)                    # doctest: +SKIP
{8: 30}

What a cubin holds, as far as numptx reads it (checked against ``cuobjdump -elf`` and
``cuobjdump --dump-resource-usage`` of CUDA 13.5 on sm_75 to sm_121 cubins):

- ``.text.<f>``: the code of function ``f`` (16-byte instructions from sm_70 on);
- ``.nv.info``: per-function records, each keyed by the function's symbol index
  (``EIATTR_REGCOUNT``, ``EIATTR_FRAME_SIZE``, ``EIATTR_MIN_STACK_SIZE``);
- ``.nv.info.<k>``: kernel ``k``'s records (``EIATTR_MAX_THREADS``, ``EIATTR_REQNTID``,
  ``EIATTR_CBANK_PARAM_SIZE``, ``EIATTR_ANNOTATIONS``, ...);
- ``.nv.shared.<k>``, ``.nv.local.<k>``: static shared / local memory (no bytes in the file);
- ``.nv.constant<N>.<k>`` (a kernel's bank ``N``: 0 holds its parameters) and ``.nv.constant<N>``
  (the module's: 3 holds ``__constant__`` variables);
- ``.note.nv.tkinfo``: the tools that made the file (``ptxas``, its CUDA release);
- the symbol table: kernels are functions marked ``STO_CUDA_ENTRY``.

An ``.nv.info`` record is ``u8 format, u8 attribute, u16 value``; for the format ``EIFMT_SVAL``
the u16 is the size of a payload that follows. Every read is bounds-checked: bytes that are not
a cubin, or a truncated one, raise :class:`~numptx.jit.errors.CubinError`, never ``IndexError``
or ``struct.error``.
"""
from __future__ import annotations

import re
import struct
from typing import NamedTuple

from ..errors import CubinError

__all__ = ["CubinElf", "Section", "Symbol", "Record", "EIATTR_MAX_THREADS", "EIATTR_REQNTID",
           "EIATTR_FRAME_SIZE", "EIATTR_MIN_STACK_SIZE", "EIATTR_CBANK_PARAM_SIZE",
           "EIATTR_REGCOUNT", "EIATTR_ANNOTATIONS", "EIFMT_SVAL", "SHT_NOBITS"]

# .nv.info attributes numptx reads (the numbering of NVIDIA's EIATTR enum, as cuobjdump names them)
EIATTR_MAX_THREADS = 0x05        # SVAL: u32 x, y, z (``.maxntid`` / __launch_bounds__)
EIATTR_REQNTID = 0x10            # SVAL: u32 x, y, z (``.reqntid``)
EIATTR_FRAME_SIZE = 0x11         # SVAL: u32 symbol, u32 bytes (the function's own stack frame)
EIATTR_MIN_STACK_SIZE = 0x12     # SVAL: u32 symbol, u32 bytes (frame + deepest callee chain)
EIATTR_CBANK_PARAM_SIZE = 0x19   # HVAL: bytes of kernel parameters
EIATTR_REGCOUNT = 0x2f           # SVAL: u32 symbol, u32 registers (callees included)
EIATTR_ANNOTATIONS = 0x55        # SVAL: (u32 kind, u32 code offset) pairs; kind 1: SpillRefill
EIFMT_SVAL = 4

SHT_SYMTAB, SHT_NOBITS = 2, 8
STT_FUNC = 2
STO_CUDA_ENTRY = 0x10
EM_CUDA = 190

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_PHDR = struct.Struct("<IIQQQQQQ")
_SYM = struct.Struct("<IBBHQQ")
_PTXAS = re.compile(rb"\x00ptxas\x00[^\x00]*?release (\d+)\.(\d+)")


class Section(NamedTuple):
    name: str
    index: int
    type: int
    offset: int
    size: int
    link: int
    info: int


class Symbol(NamedTuple):
    name: str
    index: int
    type: int
    other: int
    shndx: int
    value: int
    size: int


class Record(NamedTuple):
    """One ``.nv.info`` record: ``value`` is the u16 (the payload's size for ``EIFMT_SVAL``)."""
    format: int
    attr: int
    value: int
    payload: bytes


class CubinElf:
    """The sections, symbols and ``.nv.info`` records of a cubin (``bytes``-like)."""

    def __init__(self, data: bytes | bytearray | memoryview):
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise CubinError(f"a cubin is bytes, not {type(data).__name__}")
        self.data = bytes(data)
        if self.data[:4] != b"\x7fELF":
            what = "a fatbin" if self.data[:4] == b"\x50\xed\x55\xba" else (
                "empty" if not self.data else f"starts {self.data[:4]!r}")
            raise CubinError(f"not a cubin: an ELF file starts b'\\x7fELF', this is {what}",
                             offset=0)
        (ident, _, machine, _, _, phoff, shoff, flags, _, phentsize, phnum, shentsize, shnum,
         shstrndx) = self._unpack(_EHDR, 0, "the ELF header")
        if ident[4] != 2 or ident[5] != 1:
            raise CubinError("not a cubin: numptx reads 64-bit little-endian ELF files "
                             f"(class {ident[4]}, data {ident[5]})", offset=4)
        if machine != EM_CUDA:
            raise CubinError(f"not a cubin: the ELF file is for machine {machine}, not CUDA "
                             f"({EM_CUDA})", offset=18)
        if shentsize != _SHDR.size:
            raise CubinError(f"section headers of {shentsize} bytes (ELF64 has {_SHDR.size})",
                             offset=58)
        #: the SM number the code is for (``sm_90``; the ``a``/``f`` suffix is not recorded)
        sm = (flags >> 8) & 0xFF if ident[8] >= 8 else flags & 0xFF
        self.arch: str | None = f"sm_{sm}" if sm >= 20 else None
        for i in range(phnum if phentsize == _PHDR.size else 0):   # the segments: a whole file
            _, _, off, _, _, filesz, _, _ = self._unpack(_PHDR, phoff + i * _PHDR.size,
                                                         f"program header {i}")
            self._check_span(off, filesz, f"segment {i}")
        raw = [self._unpack(_SHDR, shoff + i * _SHDR.size, f"section header {i}")
               for i in range(shnum)]
        if not 0 <= shstrndx < shnum:
            raise CubinError(f"the section name table is section {shstrndx} of {shnum}",
                             offset=62)
        names = raw[shstrndx]
        self._check_span(names[4], names[5], "the section name table")
        self.sections: list[Section] = []
        for i, (name, typ, _, _, off, size, link, info, _, _) in enumerate(raw):
            sec = Section(self._string(names[4], names[5], name), i, typ, off, size, link, info)
            if typ != SHT_NOBITS:
                self._check_span(off, size, f"section {sec.name or i}")
            self.sections.append(sec)
        self._by_name = {s.name: s for s in self.sections}
        self.symbols: list[Symbol] = self._symbols()

    # -- bounds-checked reads ---------------------------------------------------------------------
    def _unpack(self, st: struct.Struct, offset: int, what: str) -> tuple:
        if offset < 0 or offset + st.size > len(self.data):
            raise CubinError(f"truncated cubin: {what} needs bytes {offset:#x}..{offset + st.size:#x}"
                             f" of a {len(self.data)}-byte file", offset=offset)
        return st.unpack_from(self.data, offset)

    def _check_span(self, offset: int, size: int, what: str) -> None:
        if offset < 0 or size < 0 or offset + size > len(self.data):
            raise CubinError(f"truncated cubin: {what} spans bytes {offset:#x}..{offset + size:#x}"
                             f" of a {len(self.data)}-byte file", offset=offset)

    def _string(self, table_off: int, table_size: int, index: int) -> str:
        if index >= table_size:
            raise CubinError(f"a name at {index} past its string table ({table_size} bytes)",
                             offset=table_off)
        start = table_off + index
        end = self.data.find(b"\0", start, table_off + table_size)
        if end < 0:
            raise CubinError("a name without its terminating NUL", offset=start)
        return self.data[start:end].decode("utf-8", errors="replace")

    def _symbols(self) -> list[Symbol]:
        tabs = [s for s in self.sections if s.type == SHT_SYMTAB]
        if not tabs:
            return []
        tab = tabs[0]
        if not 0 <= tab.link < len(self.sections):
            raise CubinError(f"the symbol table names string section {tab.link}", offset=tab.offset)
        strings = self.sections[tab.link]
        syms = []
        for i in range(tab.size // _SYM.size):
            name, info, other, shndx, value, size = self._unpack(
                _SYM, tab.offset + i * _SYM.size, f"symbol {i}")
            syms.append(Symbol(self._string(strings.offset, strings.size, name), i, info & 0xF,
                               other, shndx, value, size))
        return syms

    # -- what the readers use ---------------------------------------------------------------------
    def section(self, name: str) -> Section | None:
        return self._by_name.get(name)

    def bytes_of(self, sec: Section) -> bytes:
        """The contents of a section (empty for ``SHT_NOBITS``: shared and local memory)."""
        return b"" if sec.type == SHT_NOBITS else self.data[sec.offset:sec.offset + sec.size]

    def symbol(self, name: str) -> Symbol | None:
        return next((s for s in self.symbols if s.name == name), None)

    def kernels(self) -> list[Symbol]:
        """The kernels (``.entry`` functions, ``STO_CUDA_ENTRY``), in symbol-table order."""
        return [s for s in self.symbols if s.type == STT_FUNC and s.other & STO_CUDA_ENTRY
                and 0 < s.shndx < len(self.sections)]

    def records(self, name: str) -> list[Record]:
        """The records of ``.nv.info`` section ``name`` (none when it is absent)."""
        sec = self.section(name)
        if sec is None:
            return []
        if sec.type == SHT_NOBITS:              # no contents in the file (and none checked)
            raise CubinError(f"{name}: an info section without contents (SHT_NOBITS)",
                             offset=sec.offset)
        out, pos, end = [], sec.offset, sec.offset + sec.size
        while pos + 4 <= end:
            fmt, attr, value = struct.unpack_from("<BBH", self.data, pos)
            payload = b""
            if fmt == EIFMT_SVAL:
                if pos + 4 + value > end:
                    raise CubinError(f"{name}: a record of {value} bytes overruns the section",
                                     offset=pos)
                payload = self.data[pos + 4:pos + 4 + value]
                pos += value
            out.append(Record(fmt, attr, value, payload))
            pos += 4
        return out

    def function_values(self, attr: int) -> dict[int, int]:
        """Symbol index -> value of the per-function ``.nv.info`` records ``attr``
        (``EIATTR_REGCOUNT``, ``EIATTR_FRAME_SIZE``, ``EIATTR_MIN_STACK_SIZE``)."""
        out = {}
        for r in self.records(".nv.info"):
            if r.attr == attr and r.format == EIFMT_SVAL and len(r.payload) >= 8:
                sym, value = struct.unpack_from("<II", r.payload)
                out[sym] = value
        return out

    def ptxas_release(self) -> tuple[int, int] | None:
        """(major, minor) CUDA release of the ptxas that assembled the code, from
        ``.note.nv.tkinfo``; None when the note does not say."""
        sec = self.section(".note.nv.tkinfo")
        m = _PTXAS.search(self.bytes_of(sec)) if sec is not None else None
        return (int(m.group(1)), int(m.group(2))) if m else None
