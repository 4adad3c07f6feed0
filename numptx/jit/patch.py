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
variant; shapes that compute on constants alone are not tried (:func:`folds_constants`). The
patched cubin is the code ptxas makes for generic values of the constants; for special values
(1, powers of two) ptxas on its own might have picked an equivalent shorter instruction.

>>> texts, values = split_constants(["mul.rn.f32 %v_z, %v_x, 0f3FC00000;"])
>>> values
(1069547520,)
>>> join_constants(texts, (0x40000000,))
['mul.rn.f32 %v_z, %v_x, 0f40000000;']
"""
from __future__ import annotations

import hashlib
import random
import re
import struct
from collections.abc import Sequence

from .._text import split_top

__all__ = ["Plan", "split_constants", "join_constants", "kinds_of", "shape_text", "patchable",
           "signs", "words",
           "folds_constants", "sentinel_sets", "make_plan", "plan_key"]

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


def folds_constants(stubs: Sequence[str]) -> str | None:
    """Why ptxas could evaluate part of these stubs at compile time (an instruction whose
    inputs are all literals or registers holding them, or a site variable set to a constant
    that template code may compare), or None. A folded constant can steer
    code in ways two trial assemblies need not show, so such shapes are never patched. Branches
    and labels make the flow unknown: also refused."""
    for stub in stubs:
        text = _COMMENTS.sub(" ", stub)
        if _LABEL.search(text) or re.search(r"\bbra(?:\.uni)?\b|\bcall\b", text):
            return "branches or calls"
        known: set[str] = set()            # registers holding a compile-time constant
        for stmt in text.split(";"):
            stmt = stmt.strip().lstrip("{}").strip()
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
            const = bool(srcs) and all(_LITERAL.match(o) or o in known for o in srcs)
            if const and head.split(".")[0] != "mov":
                return f"{head!r} computes on constants only"
            for d in dests:
                if const and not guarded:
                    known.add(d)
                else:
                    known.discard(d)
        fixed = sorted(r for r in known if r.startswith("%v_"))
        if fixed:          # template code after the site could fold a comparison with it
            return f"the site variable {fixed[0]} is set to a constant"
    return None


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


def _ok(v: int, kind: str, lo: int, hi: int) -> bool:
    """``v`` a normal number of ``kind`` with an unbiased exponent in [lo, hi], no 16-bit piece
    of it an f16 NaN."""
    ebits, mbits, bias = _FORMAT[kind]
    e = (v >> mbits) & ((1 << ebits) - 1)
    return lo + bias <= e <= hi + bias and not any(
        _f16_nan(v >> k & 0xFFFF) for k in range(0, 32 if kind == "f" else 64, 16))


def patchable(values: Sequence[int], kinds: str | None = None) -> bool:
    """Whether constants (f32 unless ``kinds`` says ``d`` for f64) may be written into a plan:
    normal numbers with 2**-100 <= |c| < 2**100 and no 16-bit piece that is an f16 NaN. ptxas
    loads a constant into a register with an f16x2 add of two such pieces, which would turn a
    NaN piece into a canonical NaN, and picks another instruction for such values; zeros,
    infinities, NaNs and subnormals it may treat in other ways a plan made from ordinary numbers
    does not show."""
    kinds = kinds or "f" * len(values)
    return all(_ok(v, k, -_HULL, _HULL - 1) for v, k in zip(values, kinds))


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


def _sentinel(kind: str, sign: str, rng: random.Random, exponents: range, avoid: set[int]) -> int:
    """A random normal ``kind`` bit pattern of ``sign`` and an exponent from ``exponents``, with
    a full mantissa (a value whose low bits are zero could take a short immediate form), no
    f16-NaN piece, and no word (or negated word) in ``avoid``; its words join ``avoid``."""
    ebits, mbits, bias = _FORMAT[kind]
    while True:
        v = (((bias + rng.choice(exponents)) << mbits) | rng.getrandbits(mbits) | 0x1001
             | (1 << (ebits + mbits) if sign == "-" else 0))
        ws = words([v], kind)
        if (_ok(v, kind, exponents.start, exponents.stop - 1)
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
    return hashlib.blake2b(b"numptx-plan\0" + shape_key.encode(), digest_size=32).hexdigest()


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


def sentinel_sets(pattern: str, kinds: str | None = None,
                  seed: int | None = None) -> tuple[list[int], list[int]]:
    """Two sets of random constants with the signs of ``pattern`` (and the kinds of ``kinds``,
    f32 by default) for proving a plan: the first with magnitudes in [2**-120, 2**-100), the
    second in [2**100, 2**120), on either side of every value that is patched; the second set
    orders the constants of each kind the other way round, so any comparison of two of them
    comes out differently too. No 32-bit word (or its negation) appears twice."""
    kinds = kinds or "f" * len(pattern)
    rng = random.Random(seed)
    avoid: set[int] = set()
    first = [_sentinel(k, sg, rng, range(-_HULL - 20, -_HULL), avoid) for k, sg in zip(kinds, pattern)]
    second = [_sentinel(k, sg, rng, range(_HULL, _HULL + 20), avoid) for k, sg in zip(kinds, pattern)]
    # reverse the order of magnitudes per kind: the largest of the first set gets the smallest
    # of the second (same-kind bit patterns without the sign order like their magnitudes)
    for kind in "fd":
        idx = [i for i, k in enumerate(kinds) if k == kind]
        sign = 1 << (31 if kind == "f" else 63)
        mags = sorted((second[i] & ~sign for i in idx), reverse=True)
        for i, m in zip(sorted(idx, key=lambda i: first[i] & ~sign), mags):
            second[i] = m | (second[i] & sign)
    return first, second


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