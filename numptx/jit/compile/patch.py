"""Constant patching: variants that differ only in their f32 and f64 constants share one assembly.

Autotuning and symbolic regression make many variants of one formula that differ only in its
constants (``c * x + 0.5`` with a new ``c`` each time). ptxas writes an f32 constant that it does
not fold as the constant's own 32 bits, in an instruction's immediate field or in a constant
bank, and an f64 one as its two 32-bit words. So a template keeps, per *shape* (its stubs with
every ``0f``/``0d`` literal taken out), a
:class:`Plan`: the cubin of the shape assembled with random constants, and the byte offsets where
each constant (or its negation) landed. A new variant of the shape is that cubin with its own
constants written in, in microseconds instead of one nvJitLink run.

A plan is only made when it is proven on the shape itself: the shape is assembled twice, with two
sets of random constants of the variant's signs (a shape includes its constants' signs), one set
below 2**-100 and one above 2**100 in magnitude, and writing the second set into the first cubin
must give the second cubin byte for byte. Only constants between the two sets are patched
(:func:`patchable`), so a comparison ptxas folds against any threshold that could tell a patched
value from the proof's constants makes the proof fail. A shape where ptxas folds a constant,
splits it or chooses code by its value fails that check and is assembled as written, variant by
variant.

Only the user's constants vary in a shape (:func:`constant_roles`): the math library's own
constants (a DSL stub is a :class:`LibraryText` that knows them), constants that cannot be
patched (zero, inf, NaN, FLT_MIN...) and constants ptxas could fold (computed on with constants
only, a divisor, a site variable's final value, anything in a stub that branches) are written
into the shape's text, so they are the same in every variant of it. The
patched cubin is the code ptxas makes for generic values of the constants; for special values
(1, powers of two) ptxas on its own might have picked an equivalent shorter instruction.

>>> texts, values = split_constants(["mul.rn.f32 %v_z, %v_x, 0f3FC00000;"])
>>> values
(1069547520,)
>>> join_constants(texts, (0x40000000,))
['mul.rn.f32 %v_z, %v_x, 0f40000000;']
"""
from __future__ import annotations

import random
import re
import struct
import weakref
from collections.abc import Sequence
from typing import Any

from ..._text import split_top
from ...files import digest

__all__ = ["Plan", "LibraryText", "library_literals", "split_constants", "join_constants",
           "kinds_of", "shape_text", "patchable", "signs", "words", "nan_halves", "halves_text",
           "literal", "constant_roles", "fix_constants", "folds_constants", "sentinel_sets",
           "make_plan", "why_no_plan", "plan_key"]

# an f32 (0f + 8 hex digits) or f64 (0d + 16) literal, not part of a longer name or number
_LIT = re.compile(r"(?<![\w$%.])0(?:[fF]([0-9A-Fa-f]{8})|[dD]([0-9A-Fa-f]{16}))(?!\w)")
_SIGN = 0x80000000
_PLAN_MAGIC = b"NXP2"

#: plan states of a shape besides a Plan and None (not patchable): never seen, seen once
UNKNOWN, SEEN = object(), object()
#: shapes remembered per template (each plan holds a cubin)
MAX_PLANS = 1024
#: proofs per shape: ptxas picks between equivalent encodings by a constant's magnitude now and
#: then, which fails a proof without making patching wrong; a second pair of constants settles it
ATTEMPTS = 2


class LibraryText(str):
    """A stub's text that knows its math-library constants: ``library`` holds their
    :func:`literal` spellings (a DSL formula's stub: :func:`library_literals`). Those are part
    of a shape; only the other constants, the user's, are patched."""

    def __new__(cls, text: str, library: frozenset):
        self = super().__new__(cls, text)
        self.library = library
        return self


_LIBRARY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def library_literals(expr: Any) -> frozenset:
    """The literals (``0f...``/``0d...``) of the math library's constants in the traced graph
    of a DSL formula (what its ``exp``, ``sin``... brought in; the DSL records them as
    ``graph.library``); empty for anything else."""
    try:
        g = expr.graph
        keys = g.library
    except Exception:        # noqa: BLE001 - not a DSL formula, or one that does not trace
        return frozenset()
    if not keys:
        return frozenset()
    try:
        hit = _LIBRARY.get(g)
    except TypeError:
        hit = None
    if hit is None or hit[0] != len(keys):
        try:
            lits = frozenset(literal(int.from_bytes(bits, "little"), "f" if t == "f32" else "d")
                             for _, t, bits in keys
                             if t in ("f32", "f64") and isinstance(bits, bytes))
        except (TypeError, ValueError):      # not the DSL's constant keys
            return frozenset()
        hit = (len(keys), lits)
        try:
            _LIBRARY[g] = hit
        except TypeError:
            pass
    return hit[1]


def split_constants(stubs: Sequence[str]) -> tuple[tuple[tuple[str, ...], ...], tuple[int, ...]]:
    """Each stub as the text around its f32 and f64 literals (each piece before a literal ends
    with its ``0f``/``0d``, so the kinds are part of the text), and the literals' bit patterns."""
    texts, values = [], []
    for s in stubs:
        if "0f" not in s and "0F" not in s and "0d" not in s and "0D" not in s:
            texts.append((s,))
            continue
        pieces, last = [], 0
        for m in _LIT.finditer(s):
            pieces.append(s[last:m.start() + 2])
            values.append(int(m.group(1) or m.group(2), 16))
            last = m.end()
        pieces.append(s[last:])
        texts.append(tuple(pieces))
    return tuple(texts), tuple(values)


def kinds_of(texts: Sequence[Sequence[str]]) -> str:
    """The kind of each literal of split stubs: ``f`` (f32) or ``d`` (f64)."""
    return "".join(p[-1].lower() for pieces in texts for p in pieces[:-1])


def join_constants(texts: Sequence[Sequence[str]], values: Sequence[int]) -> list[str]:
    """The stubs of ``texts`` with ``values`` written in as literals (inverse of split)."""
    out, it = [], iter(values)
    for pieces in texts:
        if len(pieces) == 1:
            out.append(pieces[0])
            continue
        parts = [pieces[0]]
        for prev, p in zip(pieces, pieces[1:]):
            parts.append(f"{next(it):0{16 if prev[-1] in 'dD' else 8}X}{p}")
        out.append("".join(parts))
    return out


def shape_text(texts: Sequence[Sequence[str]]) -> list[str]:
    """The stubs of a shape with a placeholder where each constant goes (for cache keys)."""
    return ["\0".join(pieces) for pieces in texts]


_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_LABEL = re.compile(r"^\s*[\w$]+\s*:(?!:)", re.M)
_LITERAL = re.compile(r"-?(?:0[fFdD][0-9A-Fa-f]+|0[xX][0-9A-Fa-f]+U?|\d+U?|\d*\.\d+(?:[eE][-+]?\d+)?)\Z")


def _operands(text: str) -> list[str]:
    """Comma-separated operands, commas inside ``{}`` and ``[]`` kept."""
    return [o for o in split_top(text, "{[", "}]") if o]


_TOKEN = re.compile(r"\x01(\d+)\x01")          # a varying constant in the analysis text


def _fold_analysis(texts: Sequence[Sequence[str]], values: Sequence[int],
                   vary: Sequence[bool]) -> dict[int, str]:
    """Which varying constants ptxas could evaluate at compile time, each with why: those an
    instruction computes on with constants only (literals, or registers holding them), those
    a site variable is left holding (template code after the site may compare it), and every
    one of a stub with branches, labels or calls (the flow is unknown). Fixed constants (part
    of the shape) may be computed on freely: ptxas folds them the same way in every variant."""
    found: dict[int, str] = {}
    k = 0
    for pieces in texts:
        parts, idx = [pieces[0]], []
        for prev, p in zip(pieces, pieces[1:]):
            if vary[k]:
                parts[-1] = parts[-1][:-2]                 # the token replaces 0f/0d too
                parts.append(f"\x01{k}\x01{p}")
                idx.append(k)
            else:
                parts.append(f"{values[k]:0{16 if prev[-1] in 'dD' else 8}X}{p}")
            k += 1
        if not idx:
            continue
        text = _COMMENTS.sub(" ", "".join(parts))
        for i in idx:                     # not in the cubin at all: nothing to patch
            if f"\x01{i}\x01" not in text:
                found[i] = "it is in a comment"
        if _LABEL.search(text) or re.search(r"\bbra(?:\.uni)?\b|\bcall\b", text):
            found.update((i, "the stub branches or calls") for i in idx)
            continue
        known: dict[str, frozenset] = {}   # register -> the varying constants it was made of
        for stmt in text.split(";"):
            stmt = stmt.strip()
            while stmt[:1] in "{}" and stmt:
                stmt = stmt[1:].strip()
            if not stmt or stmt.startswith("."):
                continue
            guarded = stmt.startswith("@")
            parts = stmt.split(None, 2 if guarded else 1)[1 if guarded else 0:]
            if not parts:
                continue
            head, rest = parts[0], parts[1] if len(parts) > 1 else ""
            ops = _operands(rest)
            if not ops:
                continue
            dests = [d.strip() for d in ops[0].split("|")]
            srcs = ops[1:]
            deps: set[int] = set()
            const = bool(srcs)
            for o in srcs:
                m = _TOKEN.fullmatch(o.lstrip("-"))
                if m:
                    deps.add(int(m.group(1)))
                elif o in known:
                    deps |= known[o]
                elif not _LITERAL.match(o):
                    const = False
                    break
            if const and deps and head.split(".")[0] != "mov":
                for i in deps:
                    found.setdefault(i, f"{head!r} computes on constants only")
            elif head.startswith("div.") and len(srcs) == 2:
                m = _TOKEN.fullmatch(srcs[1])
                for i in ({int(m.group(1))} if m else known.get(srcs[1], ())):
                    found.setdefault(i, f"ptxas divides by it at compile time ({head!r} by a "
                                        f"constant becomes a multiplication by its reciprocal)")
            for d in dests:
                if const and not guarded:
                    known[d] = frozenset(deps)
                else:
                    known.pop(d, None)
        for r, deps in sorted(known.items()):
            if r.startswith("%v_"):        # template code after the site could fold it
                for i in deps:
                    found.setdefault(i, f"the site variable {r} is set to a constant")
    return found


def folds_constants(stubs: Sequence[str]) -> str | None:
    """Why ptxas could evaluate one of the constants of these stubs at compile time, were all
    of them to vary (see :func:`constant_roles`), or None."""
    texts, values = split_constants(stubs)
    found = _fold_analysis(texts, values, [True] * len(values))
    return found[min(found)] if found else None


def literal(value: int, kind: str) -> str:
    """A constant as PTX writes it: ``0f3F800000`` or ``0d3FF0000000000000``."""
    return f"0{kind}{value:0{8 if kind == 'f' else 16}X}"


def constant_roles(texts: Sequence[Sequence[str]], values: Sequence[int], kinds: str,
                   library: Sequence[bool] = ()) -> tuple[list[bool], dict[int, str]]:
    """Which constants of split stubs vary in their shape, and why each other one is part of
    the shape: a library constant (``library[i]`` true: the math library's own, the same in
    every variant of a formula), one that is not :func:`patchable`
    (zero, infinity, NaN, FLT_MIN, an f16-NaN half...), or one ptxas could compute with at
    compile time (:func:`_fold_analysis`). Only the others, the user's, are patched."""
    why: dict[int, str] = {}
    for i, (v, k) in enumerate(zip(values, kinds)):
        if i < len(library) and library[i]:
            why[i] = "library"
        elif not patchable([v], k):
            why[i] = _unpatchable(v, k)
    # the fold analysis depends on the text and on which constants vary (a fixed one's value
    # only matters as a literal): cached, since a sweep meets the same shape again and again
    key = (tuple(texts), tuple(why))
    found = _ROLES.get(key)
    if found is None:
        found, vary = {}, [i not in why for i in range(len(values))]
        while more := _fold_analysis(texts, values, vary):
            found.update(more)
            vary = [v and i not in more for i, v in enumerate(vary)]
        if len(_ROLES) >= MAX_PLANS:
            try:                           # oldest out (another thread may be at it too)
                del _ROLES[next(iter(_ROLES))]
            except (KeyError, RuntimeError, StopIteration):
                pass
        _ROLES[key] = found
    why.update(found)
    return [i not in why for i in range(len(values))], why


_ROLES: dict = {}     # (texts, the constants fixed before the fold analysis) -> its findings


def _unpatchable(v: int, kind: str) -> str:
    ebits, mbits, bias = _FORMAT[kind]
    e = (v >> mbits) & ((1 << ebits) - 1)
    m = v & ((1 << mbits) - 1)
    top = (1 << ebits) - 1
    what = ("a zero" if e == 0 and not m else "a subnormal" if e == 0 else
            "an infinity" if e == top and not m else "a NaN" if e == top else
            "outside [2^-100, 2^100)" if not -_HULL + bias <= e <= _HULL - 1 + bias else
            "a value with a 16-bit piece 0x7FFF (the f16 NaN of an f16x2 add)")
    return f"{literal(v, kind)} is {what}: not patchable"


def fix_constants(texts: Sequence[Sequence[str]], values: Sequence[int],
                  vary: Sequence[bool]) -> tuple[tuple[tuple[str, ...], ...], tuple[int, ...]]:
    """Split stubs with the constants that do not vary written back into the text (part of the
    shape): the texts around the varying ones, and their values."""
    out, kept, k = [], [], 0
    for pieces in texts:
        merged = [pieces[0]]
        for prev, p in zip(pieces, pieces[1:]):
            if vary[k]:
                merged.append(p)
                kept.append(values[k])
            else:
                merged[-1] += f"{values[k]:0{16 if prev[-1] in 'dD' else 8}X}{p}"
            k += 1
        out.append(tuple(merged))
    return tuple(out), tuple(kept)


#: the constants that are patched: 2**-100 <= |c| < 2**100. The proof's constants lie outside,
#: below 2**-100 and above 2**100, so a comparison that ptxas folds (in a stub, or in template
#: code after it) with any threshold between them comes out differently in the two trial
#: assemblies and fails the proof, and one with a threshold outside cannot separate patched
#: values from the proof's.
_HULL = 100
#: per kind: exponent bits, mantissa bits, exponent bias
_FORMAT = {"f": (8, 23, 127), "d": (11, 52, 1023)}


def _f16_nan(half: int) -> bool:
    return (half >> 10) & 0x1F == 0x1F and bool(half & 0x3FF)


def nan_halves(v: int, kind: str) -> int:
    """The 16-bit pieces of ``v`` (bit k: bits 16k..16k+15) that are f16 NaNs."""
    return sum(1 << k for k in range(2 if kind == "f" else 4) if _f16_nan(v >> 16 * k & 0xFFFF))


def _ok(v: int, kind: str, lo: int, hi: int, halves: int | None = 0) -> bool:
    """``v`` a normal number of ``kind`` with an unbiased exponent in [lo, hi] whose f16-NaN
    pieces are ``halves`` (None: any)."""
    ebits, mbits, bias = _FORMAT[kind]
    e = (v >> mbits) & ((1 << ebits) - 1)
    return (lo + bias <= e <= hi + bias and (halves is None or nan_halves(v, kind) == halves)
            and not _canonical_nan_piece(v, kind))


def _canonical_nan_piece(v: int, kind: str) -> bool:
    """Whether a 16-bit piece below the exponent is 0x7FFF, the f16 NaN that an f16x2 add
    returns: ptxas may load such a constant either way, so it is never patched."""
    return any(v >> 16 * k & 0xFFFF == 0x7FFF for k in range(1 if kind == "f" else 3))


def patchable(values: Sequence[int], kinds: str | None = None) -> bool:
    """Whether constants (f32 unless ``kinds`` says ``d`` for f64) may be written into a plan:
    normal numbers with 2**-100 <= |c| < 2**100. Zeros, infinities, NaNs and subnormals ptxas
    may treat in ways a plan made from ordinary numbers does not show. A value with a 16-bit
    piece that is an f16 NaN is patched only into a plan proven for such values (its
    :func:`halves_text` is part of the shape): ptxas loads an ordinary constant into a register
    with an f16x2 add of its pieces, which would turn a NaN piece into the canonical NaN
    0x7FFF, and picks another instruction for such values. A piece that is 0x7FFF itself
    survives the add, so ptxas may use either form: never patched."""
    kinds = kinds or "f" * len(values)
    return all(_ok(v, k, -_HULL, _HULL - 1, None) for v, k in zip(values, kinds))


def halves_text(values: Sequence[int], kinds: str) -> str:
    """The f16-NaN pieces of each constant, part of a shape's key ("" when none has any)."""
    masks = [nan_halves(v, k) for v, k in zip(values, kinds)]
    return ":" + "".join(f"{m:x}" for m in masks) if any(masks) else ""


def signs(values: Sequence[int], kinds: str | None = None) -> str:
    """The constants' signs, part of a shape: ptxas may encode an instruction by the sign of
    its constant (an FFMA addend does), so each sign pattern is proven on its own."""
    kinds = kinds or "f" * len(values)
    return "".join("-" if v >> (31 if k == "f" else 63) & 1 else "+" for v, k in zip(values, kinds))


def words(values: Sequence[int], kinds: str) -> list[int]:
    """The 32-bit words constants sit in a cubin as: an f32 whole, an f64 as low then high."""
    out: list[int] = []
    for v, k in zip(values, kinds):
        out += [v] if k == "f" else [v & 0xFFFFFFFF, v >> 32]
    return out


def _negatable(kinds: str) -> list[bool]:
    """Per word: whether it may sit in the cubin negated (an f64's low word has no sign)."""
    return [flag for k in kinds for flag in ((True,) if k == "f" else (False, True))]


def _impose(v: int, kind: str, halves: int) -> int:
    """``v`` with exactly the f16-NaN pieces ``halves`` (below the exponent): forced to NaN
    (exponent bits set, a mantissa bit set) or out of it (its top exponent bit cleared)."""
    for k in range(3 if kind == "d" else 1):
        if halves >> k & 1:
            v |= (0x1F << 16 * k + 10) | (1 << 16 * k)
        elif _f16_nan(v >> 16 * k & 0xFFFF):
            v &= ~(1 << 16 * k + 14)
    return v


def _sentinel(kind: str, sign: str, rng: random.Random, exponents: range, avoid: set[int],
              halves: int = 0) -> int:
    """A random normal ``kind`` bit pattern of ``sign`` and an exponent from ``exponents``, with
    a full mantissa (a value whose low bits are zero could take a short immediate form), the
    f16-NaN pieces ``halves`` and no others, and no word (or negated word) in ``avoid``; its
    words join ``avoid``."""
    ebits, mbits, bias = _FORMAT[kind]
    while True:
        v = _impose(((bias + rng.choice(exponents)) << mbits) | rng.getrandbits(mbits) | 0x1001
                    | (1 << (ebits + mbits) if sign == "-" else 0), kind, halves)
        ws = words([v], kind)
        if (_ok(v, kind, exponents.start, exponents.stop - 1, halves)
                and not any(w in avoid or w ^ _SIGN in avoid for w in ws)):
            avoid.update(ws)
            return v


class Plan:
    """A shape's cubin and where each constant sits in it: ``apply(values)`` writes them in.
    ``kinds`` has an ``f`` (f32: one word) or ``d`` (f64: a low and a high word) per constant;
    ``slots`` has, per word, the offsets of its bits and of its negation's bits."""

    __slots__ = ("base", "slots", "kinds")

    def __init__(self, base: bytes, slots: Sequence[tuple[tuple[int, ...], tuple[int, ...]]],
                 kinds: str | None = None):
        self.base = base
        self.slots = tuple(slots)
        self.kinds = kinds if kinds is not None else "f" * len(self.slots)

    def apply(self, values: Sequence[int]) -> bytes:
        out = bytearray(self.base)
        for (plain, negated), w in zip(self.slots, words(values, self.kinds)):
            if plain:
                b = w.to_bytes(4, "little")
                for p in plain:
                    out[p:p + 4] = b
            if negated:
                b = (w ^ _SIGN).to_bytes(4, "little")
                for p in negated:
                    out[p:p + 4] = b
        return bytes(out)

    # -- on disk: the cubin first (the cache checks for an ELF file), then the offsets ----------
    def to_bytes(self) -> bytes:
        """``base``, then per word its two offset lists, the kinds, then a 20-byte trailer."""
        ws: list[int] = []
        for plain, negated in self.slots:
            ws += [len(plain), len(negated), *plain, *negated]
        kinds = self.kinds.encode()
        return (self.base + struct.pack(f"<{len(ws)}I", *ws) + kinds
                + struct.pack("<4sIIII", _PLAN_MAGIC, len(self.slots), len(ws), len(self.base),
                              len(kinds)))

    @classmethod
    def from_bytes(cls, data: bytes) -> Plan | None:
        """The plan :meth:`to_bytes` wrote, or None for anything else."""
        if len(data) < 20:
            return None
        magic, n, nwords, nbase, nkinds = struct.unpack_from("<4sIIII", data, len(data) - 20)
        if magic != _PLAN_MAGIC or nbase + 4 * nwords + nkinds + 20 != len(data):
            return None
        kinds = bytes(data[nbase + 4 * nwords:nbase + 4 * nwords + nkinds]).decode("ascii", "replace")
        if set(kinds) - set("fd") or len(words([0] * len(kinds), kinds)) != n:
            return None
        ws = struct.unpack_from(f"<{nwords}I", data, nbase)
        slots, i = [], 0
        for _ in range(n):
            if i + 2 > nwords:
                return None
            a, b = ws[i], ws[i + 1]
            plain, negated = ws[i + 2:i + 2 + a], ws[i + 2 + a:i + 2 + a + b]
            i += 2 + a + b
            if i > nwords or any(p + 4 > nbase for p in plain + negated):
                return None
            slots.append((tuple(plain), tuple(negated)))
        return cls(bytes(data[:nbase]), slots, kinds) if i == nwords else None


def plan_key(shape_key: str) -> str:
    """The cache key a shape's plan is kept under (never a variant's key)."""
    return digest("numptx-plan", shape_key)


def _offsets(data: bytes, pattern: bytes) -> tuple[int, ...]:
    found, i = [], data.find(pattern)
    while i >= 0:
        found.append(i)
        i = data.find(pattern, i + 1)
    return tuple(found)


def _locate(cubin: bytes, ws: Sequence[int], negatable: Sequence[bool], kinds: str) -> Plan | None:
    slots, taken = [], set()
    for w, neg in zip(ws, negatable):
        plain = _offsets(cubin, w.to_bytes(4, "little"))
        negated = _offsets(cubin, (w ^ _SIGN).to_bytes(4, "little")) if neg else ()
        for p in plain + negated:
            span = range(p, p + 4)
            if taken.intersection(span):         # two constants claim the same bytes
                return None
            taken.update(span)
        slots.append((plain, negated))
    return Plan(cubin, slots, kinds)


def sentinel_sets(pattern: str, kinds: str | None = None, seed: int | None = None,
                  halves: Sequence[int] | None = None) -> tuple[list[int], list[int]]:
    """Two sets of random constants with the signs of ``pattern`` (and the kinds of ``kinds``,
    f32 by default; the f16-NaN pieces of ``halves``, none by default) for proving a plan: the
    first with magnitudes in [2**-120, 2**-100), the second in [2**100, 2**120), on either side
    of every value that is patched; the second set orders the constants of each kind the other
    way round, so any comparison of two of them comes out differently too. No 32-bit word (or
    its negation) appears twice."""
    kinds = kinds or "f" * len(pattern)
    halves = list(halves) if halves is not None else [0] * len(kinds)
    rng = random.Random(seed)
    while True:
        avoid: set[int] = set()
        first = [_sentinel(k, sg, rng, range(-_HULL - 20, -_HULL), avoid, h)
                 for k, sg, h in zip(kinds, pattern, halves)]
        second = [_sentinel(k, sg, rng, range(_HULL, _HULL + 20), avoid, h)
                  for k, sg, h in zip(kinds, pattern, halves)]
        # reverse the order of magnitudes per kind: the largest of the first set gets the
        # smallest of the second (same-kind bit patterns without the sign order like their
        # magnitudes), then each gets its own NaN pieces back
        for kind in "fd":
            idx = [i for i, k in enumerate(kinds) if k == kind]
            sign = 1 << (31 if kind == "f" else 63)
            mags = sorted((second[i] & ~sign for i in idx), reverse=True)
            for i, m in zip(sorted(idx, key=lambda i: first[i] & ~sign), mags):
                second[i] = _impose(m | (second[i] & sign), kind, halves[i])
        if _reversed(first, second, kinds) and _distinct(first + second, kinds + kinds):
            return first, second


def _reversed(first: list[int], second: list[int], kinds: str) -> bool:
    """Whether the constants of each kind are in opposite orders of magnitude in the sets."""
    for kind in "fd":
        idx = [i for i, k in enumerate(kinds) if k == kind]
        sign = 1 << (31 if kind == "f" else 63)
        up = sorted(idx, key=lambda i: first[i] & ~sign)
        if [second[i] & ~sign for i in up] != sorted((second[i] & ~sign for i in idx),
                                                      reverse=True):
            return False
        if len({second[i] & ~sign for i in idx}) != len(idx):
            return False
    return True


def _distinct(values: list[int], kinds: str) -> bool:
    ws = [w & ~_SIGN for w in words(values, kinds)]
    return len(set(ws)) == len(ws)


def make_plan(kinds: str | int, first: bytes, second: bytes,
              sentinels: tuple[list[int], list[int]]) -> Plan | None:
    """The plan of a shape with constants of ``kinds`` (or a count of f32 ones) from its cubins
    ``first`` and ``second``, assembled with the two ``sentinels`` sets; None unless it
    reproduces ``second`` exactly."""
    kinds = "f" * kinds if isinstance(kinds, int) else kinds
    s1, s2 = sentinels
    if len(first) != len(second) or len(s1) != len(kinds) or len(s2) != len(kinds):
        return None
    plan = _locate(first, words(s1, kinds), _negatable(kinds), kinds)
    # every word must sit in the cubin as itself (one that vanished was folded into
    # something), and writing the second set in must give the second assembly exactly
    if plan is None or not all(p or m for p, m in plan.slots) or plan.apply(s2) != second:
        return None
    return plan

def why_no_plan(kinds: str, first: bytes, second: bytes,
                sentinels: tuple[list[int], list[int]]) -> str:
    """Why :func:`make_plan` made no plan of these trial cubins, in words."""
    s1, _ = sentinels
    if len(first) != len(second):
        return ("ptxas made code of another size for other values of the constants (it chose "
                "instructions by a constant's value)")
    ws, neg = words(s1, kinds), _negatable(kinds)
    k = 0
    for i, kind in enumerate(kinds):
        n = 1 if kind == "f" else 2
        if not all(_offsets(first, w.to_bytes(4, "little")) or
                   (m and _offsets(first, (w ^ _SIGN).to_bytes(4, "little")))
                   for w, m in zip(ws[k:k + n], neg[k:k + n])):
            return (f"constant {i + 1} of the shape is not in the cubin as written: ptxas "
                    f"computed with it at compile time (a division by a constant, or an "
                    f"operation on constants only, is evaluated by ptxas); bind it as a runtime "
                    f"input to patch it")
        k += n
    if _locate(first, ws, neg, kinds) is None:
        return "two constants share bytes in the cubin"
    return ("the two trial cubins differ beyond the constants: ptxas chose code by a "
            "constant's value (a comparison it could evaluate, in the stub or in the template)")
