"""Constant patching: variants that differ only in their f32 constants share one assembly.

Autotuning and symbolic regression make many variants of one formula that differ only in its
constants (``c * x + 0.5`` with a new ``c`` each time). ptxas writes an f32 constant that it does
not fold as the constant's own 32 bits, in an instruction's immediate field or in a constant
bank. So a template keeps, per *shape* (its stubs with every ``0fXXXXXXXX`` literal taken out), a
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

__all__ = ["Plan", "split_constants", "join_constants", "shape_text", "patchable", "signs",
           "folds_constants", "sentinel_sets", "make_plan", "plan_key"]

# an f32 literal, not part of a longer name or number
_F32 = re.compile(r"(?<![\w$%.])0[fF]([0-9A-Fa-f]{8})(?!\w)")
_SIGN = 0x80000000
_PLAN_MAGIC = b"NXPL"

#: plan states of a shape besides a Plan and None (not patchable): never seen, seen once
UNKNOWN, SEEN = object(), object()
#: shapes remembered per template (each plan holds a cubin)
MAX_PLANS = 1024
#: proofs per shape: ptxas picks between equivalent encodings by a constant's magnitude now and
#: then, which fails a proof without making patching wrong; a second pair of constants settles it
ATTEMPTS = 2


def split_constants(stubs: Sequence[str]) -> tuple[tuple[tuple[str, ...], ...], tuple[int, ...]]:
    """Each stub as the text between its f32 literals, and the literals' bit patterns in order."""
    texts, values = [], []
    for s in stubs:
        if "0f" not in s and "0F" not in s:
            texts.append((s,))
            continue
        parts = _F32.split(s)            # text, hex, text, hex, ..., text
        texts.append(tuple(parts[0::2]))
        values.extend(int(h, 16) for h in parts[1::2])
    return tuple(texts), tuple(values)


def join_constants(texts: Sequence[Sequence[str]], values: Sequence[int]) -> list[str]:
    """The stubs of ``texts`` with ``values`` written in as f32 literals (inverse of split)."""
    out, it = [], iter(values)
    for pieces in texts:
        if len(pieces) == 1:
            out.append(pieces[0])
        else:
            out.append("".join(p if i == 0 else f"0f{next(it):08X}{p}" for i, p in enumerate(pieces)))
    return out


def shape_text(texts: Sequence[Sequence[str]]) -> list[str]:
    """The stubs of a shape with a placeholder where each constant goes (for cache keys)."""
    return ["\0f".join(pieces) for pieces in texts]


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


#: biased exponents of the constants that are patched: 2**-100 <= |c| < 2**100. The proof's
#: constants lie outside, below 2**-100 and above 2**100, so a comparison that ptxas folds (in a
#: stub, or in template code after it) with any threshold between them comes out differently
#: in the two trial assemblies and fails the proof, and one with a threshold outside cannot
#: separate patched values from the proof's.
_EXP_LO, _EXP_HI = 127 - 100, 127 + 99


def _f16_nan(half: int) -> bool:
    return (half >> 10) & 0x1F == 0x1F and bool(half & 0x3FF)


def patchable(values: Sequence[int]) -> bool:
    """Whether constants may be written into a plan: normal numbers with 2**-100 <= |c| <
    2**100 whose 16-bit halves are not f16 NaNs. ptxas loads a constant into a register with
    an f16x2 add of its two halves, which would turn a NaN half into a canonical NaN, and picks
    another instruction for such values; zeros, infinities, NaNs and subnormals it may treat
    in other ways a plan made from ordinary numbers does not show."""
    return all(_EXP_LO <= (v >> 23) & 0xFF <= _EXP_HI and not _f16_nan(v & 0xFFFF)
               and not _f16_nan(v >> 16 & 0x7FFF) for v in values)


def signs(values: Sequence[int]) -> str:
    """The constants' signs, part of a shape: ptxas may encode an instruction by the sign of
    its constant (an FFMA addend does), so each sign pattern is proven on its own."""
    return "".join("-" if v & _SIGN else "+" for v in values)


def _sentinels(pattern: str, rng: random.Random, exponents: range, avoid: set[int]) -> list[int]:
    """Distinct normal f32 bit patterns with the signs of ``pattern`` and exponents from
    ``exponents``, with a full mantissa (a value whose low bits are zero could take a short
    immediate form) and no f16-NaN half."""
    out: list[int] = []
    for sign in pattern:
        while True:
            mantissa = rng.getrandbits(23) | 0x1001    # low bits set, never a round number
            v = ((127 + rng.choice(exponents)) << 23) | mantissa | (_SIGN if sign == "-" else 0)
            if (v not in avoid and v ^ _SIGN not in avoid and (v >> 10) & 0x1F != 0x1F
                    and (v >> 26) & 0x1F != 0x1F):
                avoid.add(v)
                out.append(v)
                break
    return out


class Plan:
    """A shape's cubin and where each constant sits in it: ``apply(values)`` writes them in."""

    __slots__ = ("base", "slots")

    def __init__(self, base: bytes, slots: Sequence[tuple[tuple[int, ...], tuple[int, ...]]]):
        self.base = base
        #: per constant: offsets of its bits, offsets of its negation's bits
        self.slots = tuple(slots)

    def apply(self, values: Sequence[int]) -> bytes:
        out = bytearray(self.base)
        for (plain, negated), v in zip(self.slots, values):
            if plain:
                b = v.to_bytes(4, "little")
                for p in plain:
                    out[p:p + 4] = b
            if negated:
                b = (v ^ _SIGN).to_bytes(4, "little")
                for p in negated:
                    out[p:p + 4] = b
        return bytes(out)

    # -- on disk: the cubin first (the cache checks for an ELF file), then the offsets ----------
    def to_bytes(self) -> bytes:
        """``base``, then per constant its two offset lists, then a 16-byte trailer."""
        words: list[int] = []
        for plain, negated in self.slots:
            words += [len(plain), len(negated), *plain, *negated]
        return (self.base + struct.pack(f"<{len(words)}I", *words)
                + struct.pack("<4sIII", _PLAN_MAGIC, len(self.slots), len(words), len(self.base)))

    @classmethod
    def from_bytes(cls, data: bytes) -> Plan | None:
        """The plan :meth:`to_bytes` wrote, or None for anything else."""
        if len(data) < 16:
            return None
        magic, n, nwords, nbase = struct.unpack_from("<4sIII", data, len(data) - 16)
        if magic != _PLAN_MAGIC or nbase + 4 * nwords + 16 != len(data):
            return None
        words = struct.unpack_from(f"<{nwords}I", data, nbase)
        slots, i = [], 0
        for _ in range(n):
            if i + 2 > nwords:
                return None
            a, b = words[i], words[i + 1]
            plain, negated = words[i + 2:i + 2 + a], words[i + 2 + a:i + 2 + a + b]
            i += 2 + a + b
            if i > nwords or any(p + 4 > nbase for p in plain + negated):
                return None
            slots.append((tuple(plain), tuple(negated)))
        return cls(bytes(data[:nbase]), slots) if i == nwords else None


def plan_key(shape_key: str) -> str:
    """The cache key a shape's plan is kept under (never a variant's key)."""
    return hashlib.blake2b(b"numptx-plan\0" + shape_key.encode(), digest_size=32).hexdigest()


def _offsets(data: bytes, pattern: bytes) -> tuple[int, ...]:
    found, i = [], data.find(pattern)
    while i >= 0:
        found.append(i)
        i = data.find(pattern, i + 1)
    return tuple(found)


def _locate(cubin: bytes, values: Sequence[int]) -> Plan | None:
    slots, taken = [], set()
    for v in values:
        plain = _offsets(cubin, v.to_bytes(4, "little"))
        negated = _offsets(cubin, (v ^ _SIGN).to_bytes(4, "little"))
        for p in plain + negated:
            span = range(p, p + 4)
            if taken.intersection(span):         # two constants claim the same bytes
                return None
            taken.update(span)
        slots.append((plain, negated))
    return Plan(cubin, slots)


def sentinel_sets(pattern: str, seed: int | None = None) -> tuple[list[int], list[int]]:
    """Two sets of random constants with the signs of ``pattern`` for proving a plan: the first
    with magnitudes in [2**-120, 2**-100), the second in [2**100, 2**120), on either side of
    every value that is patched; and the second set orders the constants the other way round,
    so any comparison of two of them comes out differently too. No value (or its negation)
    appears twice."""
    rng = random.Random(seed)
    avoid: set[int] = set()
    first = _sentinels(pattern, rng, range(-120, -100), avoid)
    second = _sentinels(pattern, rng, range(100, 120), avoid)
    # reverse the order of magnitudes: the largest of the first set gets the smallest of the second
    by_first = sorted(range(len(first)), key=lambda k: first[k] & ~_SIGN)
    mags = sorted((v & ~_SIGN for v in second), reverse=True)
    second = [0] * len(first)
    for k, m in zip(by_first, mags):
        second[k] = m | (_SIGN if pattern[k] == "-" else 0)
    return first, second


def make_plan(n: int, first: bytes, second: bytes, sentinels: tuple[list[int], list[int]]) -> Plan | None:
    """The plan of a shape with ``n`` constants from its cubins ``first`` and ``second``,
    assembled with the two ``sentinels`` sets; None unless it reproduces ``second`` exactly."""
    s1, s2 = sentinels
    if len(first) != len(second) or len(s1) != n or len(s2) != n:
        return None
    plan = _locate(first, s1)
    # every constant must sit in the cubin as itself (one that vanished was folded into
    # something), and writing the second set in must give the second assembly exactly
    if plan is None or not all(p or m for p, m in plan.slots) or plan.apply(s2) != second:
        return None
    return plan
