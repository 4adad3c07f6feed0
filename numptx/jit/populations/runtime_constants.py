"""Constants at run time: a pack's f32/f64 literals read from a table in the module.

A pack built with ``constants="runtime"`` has no float literal in its code: each candidate's
``0f``/``0d`` literals become registers loaded from a table ``__nx_kc`` that the packed stub
declares (8 bytes a slot, candidate after candidate; ``__nx_kc_<site>``), so new constants for the same candidates
are a copy into the loaded module, not a new assembly::

    pack = tmpl.pack("f", formulas, select="cand", constants="runtime")
    pack.constants[3]                    # candidate 3's constants (float64 array), in text order
    pack.set_constants({3: [0.5, 2.0]})  # or a list with one array per candidate
    pack[grid, block](...)               # the launch copies a changed table in first

Use it for constant fitting of a fixed population (one module, re-launched with new tables);
use constant patching (:mod:`numptx.jit.compile.patch`, the default for variants) when each constant set
is its own variant. Literal loads cost a load per constant per thread where ptxas would have used
an immediate.

The table is declared at module scope (``.visible .global``: the packed stub is a
``site_layout.GeneratedStub`` that declares it in ``module_lines``, and rendering hoists it
there; no stub text can), so the loaded module finds it by name (:func:`table_name`); every
instance of the site reads the one table.
"""
from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import NumptxError
from ..compile.patch import join_constants, split_constants

__all__ = ["table_name", "Lifted", "lift", "table_symbols", "table_bytes", "ConstantsError"]

_PREFIX = "__nx_kc_"


def table_name(site: str) -> str:
    """The module-scope name of the constant table of ``site``'s pack."""
    if site.isidentifier() and site.isascii():
        return _PREFIX + site
    return _PREFIX + hashlib.blake2b(site.encode(), digest_size=6).hexdigest()


class ConstantsError(NumptxError):
    """A constant table of the wrong shape; ``candidate`` names the index at fault."""

    def __init__(self, message: str, *, candidate: int | None = None):
        self.candidate = candidate
        super().__init__(message)


class Lifted:
    """One candidate's text with its literals lifted: ``text`` (loads, then the code),
    ``kinds`` (``f``/``d`` per constant), ``bits`` (the literals' bit patterns), ``base`` (its
    first table slot), ``pieces`` (the text around the literals, for :meth:`with_values`)."""
    __slots__ = ("text", "kinds", "bits", "base", "pieces")

    def __init__(self, text: str, kinds: str, bits: tuple[int, ...], base: int, pieces):
        self.text, self.kinds, self.bits, self.base, self.pieces = text, kinds, bits, base, pieces

    def with_values(self, bits: Sequence[int]) -> str:
        """The candidate's original text with ``bits`` as its literals (the simulator runs it)."""
        return join_constants([self.pieces], list(bits))[0]


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def lift(text: str, base: int, table: str = _PREFIX) -> Lifted:
    """Lift ``text``'s f32/f64 literals into loads from slots ``base ...`` of ``table``
    (comments are dropped first: a literal in a comment is no constant)."""
    if "/" in text:
        text = _COMMENT.sub(lambda m: "\n" * m.group().count("\n"), text)
    (pieces,), bits = split_constants([text])
    kinds = "".join(p[-1].lower() for p in pieces[:-1])
    if not kinds:
        return Lifted(text, "", (), base, pieces)
    decl, loads, body = [], [], []
    for i, k in enumerate(kinds):
        t = "f32" if k == "f" else "f64"
        decl.append(f".reg .{t} %__nx_c{i};")
        loads.append(f"ld.global.{t} %__nx_c{i}, [{table}+{8 * (base + i)}];")
    for i, piece in enumerate(pieces[:-1]):
        body.append(piece[:-2] + f"%__nx_c{i}")      # the piece ends with its "0f"/"0d"
    body.append(pieces[-1])
    return Lifted("\n".join(decl + loads) + "\n" + "".join(body), kinds, tuple(bits), base,
                  pieces)


def table_bytes(lifted: Sequence[Lifted | None], values: Mapping[int, Sequence[int]]) -> bytes:
    """The table: slot ``base + i`` holds constant i of a candidate (f32 in its low 4 bytes),
    from ``values`` (candidate -> bit patterns) or the candidate's own literals."""
    total = sum(len(x.kinds) for x in lifted if x is not None)
    out = bytearray(8 * max(total, 1))
    for k, x in enumerate(lifted):
        if x is None:
            continue
        for i, (kind, b) in enumerate(zip(x.kinds, values.get(k, x.bits))):
            struct.pack_into("<I" if kind == "f" else "<Q", out, 8 * (x.base + i), b)
    return bytes(out)


def to_bits(k: int, kinds: str, given: Any) -> tuple[int, ...]:
    """Candidate ``k``'s new constants (numbers, in text order: a flat sequence, or one number
    for a candidate of one constant) as bit patterns; anything else is a
    :class:`ConstantsError` naming the candidate (None, bools, complex numbers, text, dates
    and masked values included, which NumPy would turn into numbers without a word)."""
    arr = _numbers(k, given)
    if arr.ndim > 1:
        raise ConstantsError(f"candidate {k}: its constants are one flat sequence, got an array "
                             f"of shape {arr.shape}: give one row per candidate (the list form "
                             f"or a mapping), not a table", candidate=k)
    arr = arr.reshape(-1)
    if arr.shape != (len(kinds),):
        raise ConstantsError(f"candidate {k}: it has {len(kinds)} constant(s) "
                             f"({kinds.replace('f', 'f32 ').replace('d', 'f64 ').strip() or 'none'}"
                             f"), got {arr.size} value(s)", candidate=k)
    for i, (v, kind) in enumerate(zip(arr, kinds)):
        if kind == "f" and np.isfinite(v) and abs(v) >= 2.0 ** 128 - 2.0 ** 103:
            raise ConstantsError(f"candidate {k}: constant {i} ({v!r}) overflows f32",
                                 candidate=k)
    return tuple(int(np.float32(v).view(np.uint32)) if kind == "f"
                 else int(np.float64(v).view(np.uint64)) for v, kind in zip(arr, kinds))


_NUMBER_KINDS = "iuf"        # NumPy dtype kinds taken as numbers: ints, unsigned, floats


def _numbers(k: int, given: Any) -> np.ndarray:
    """``given`` as a float64 array, refusing what is not a real number (see :func:`to_bits`)."""
    def refuse(what: str) -> ConstantsError:
        return ConstantsError(f"candidate {k}: constants are numbers; {what}, got "
                              f"{_short(given)}", candidate=k)
    if isinstance(given, np.ma.MaskedArray) and np.ma.is_masked(given):
        raise refuse("masked values have no number")
    if isinstance(given, (str, bytes, bool, np.bool_)) or given is None:
        raise refuse(f"a {type(given).__name__} is not one")
    try:
        raw = np.asarray(given)
    except (TypeError, ValueError):
        raise refuse("a ragged or unreadable sequence") from None
    if raw.dtype.kind == "O":           # Python objects: big ints, Decimal, Fraction, mixes
        for i, v in enumerate(raw.reshape(-1)):
            if v is None or isinstance(v, (bool, np.bool_, str, bytes, complex,
                                           np.complexfloating)):
                raise refuse(f"constant {i} is {'None' if v is None else 'a ' + type(v).__name__}")
    elif raw.dtype.kind not in _NUMBER_KINDS:
        kind = {"b": "bool", "c": "complex", "U": "text", "S": "text", "M": "date",
                "m": "time span"}.get(raw.dtype.kind, str(raw.dtype))
        raise refuse(f"{kind} values are not numbers ({raw.dtype})")
    elif isinstance(given, (list, tuple)):          # NumPy upcasts [True, 1.0] to floats
        for i, v in enumerate(given):
            if isinstance(v, (bool, np.bool_)):
                raise refuse(f"constant {i} is a bool")
    try:
        with np.errstate(over="ignore"):
            arr = np.asarray(raw, dtype=np.float64)
    except OverflowError:
        arr = None
    except (TypeError, ValueError):
        raise refuse("not all of them are numbers") from None
    if arr is None or (raw.dtype.kind == "f" and raw.dtype.itemsize > 8 and
                       np.any(np.isfinite(raw) & ~np.isfinite(arr))):
        raise ConstantsError(f"candidate {k}: a constant is too large for f64 (a float64 holds "
                             f"magnitudes up to about 1.8e308), got {_short(given)}",
                             candidate=k)
    return arr


def _short(given: Any) -> str:
    text = repr(given)
    return text if len(text) <= 80 else text[:77] + "..."


def from_bits(kinds: str, bits: Sequence[int]) -> np.ndarray:
    """Bit patterns -> float64 values."""
    return np.array([float(np.uint32(b).view(np.float32)) if k == "f"
                     else float(np.uint64(b).view(np.float64)) for k, b in zip(kinds, bits)],
                    dtype=np.float64)


def table_symbols(cubin: bytes) -> list[str]:
    """The names of the constant tables in ``cubin`` (its ELF symbol table)."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise NumptxError("table_symbols: not an ELF64 cubin")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize)
               for i in range(shnum)]
    names = []
    for _, kind, _, _, off, size, link, _, _, entsize in headers:
        if kind != 2 or not entsize:                 # SHT_SYMTAB
            continue
        strtab = headers[link][4]
        for j in range(size // entsize):
            name_off, = struct.unpack_from("<I", cubin, off + j * entsize)
            start = strtab + name_off
            name = cubin[start:cubin.index(b"\0", start)].decode(errors="replace")
            if name.startswith(_PREFIX):
                names.append(name)
    return sorted(set(names))
