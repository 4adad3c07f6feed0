"""Variation operators on Stack PTX programs (lists of :class:`numptx.stack_ptx.Op`).

Every operator is a pure function of its arguments and the ``rng`` it is given (a
``numpy.random.Generator``): the same seed gives the same programs. The result is a new list;
inputs are never modified. Because Stack PTX is resilient, every result compiles with
``sp.compile(prog, genes.inputs, genes.outputs)``::

    import numpy as np
    from numptx.search.genes import Genes
    from numptx.search import operators as ops

    genes = Genes(["add", "mul", "sin"], 2)
    rng = np.random.default_rng(0)
    a, b = ops.random_program(genes, rng), ops.random_program(genes, rng)
    child = ops.mutate(ops.crossover(a, b, rng), genes, rng, max_length=64)
    ops.constants_of(child)                      # float64 array of its constants, in order

Programs are sequences of ops; an op gene (e.g. ``exp``: const, mul, ex2) is several ops.
Variation works on genes found in place (:meth:`Genes.tokens`): a point mutation replaces a
whole gene, deletion removes whole genes, crossover cuts between genes and constant
perturbation leaves the constants inside a gene alone, so ``exp`` never decays into a stray
``* 1.4427`` scaling (a program from elsewhere is still fine: unmatched ops are genes of one op).
"""
from __future__ import annotations

import math
import struct
from collections.abc import Sequence

import numpy as np

from .. import stack_ptx as sp
from ..opkinds import CONST, CONST64
from ..stack_ptx import Op
from .genes import Genes, SearchError

__all__ = ["ConstantSlots", "random_program", "point_mutation", "insertion", "deletion", "perturb_constants",
           "crossover", "mutate", "constants_of", "has_constants", "with_constants", "MUTATIONS"]

_F_TYPES = {5: "f32", 6: "f64"}      # type ids of the float stacks a search program uses


def _check_rng(rng) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise SearchError(f"rng={rng!r}: give a numpy.random.Generator, e.g. "
                          f"np.random.default_rng(seed)")
    return rng


_ONLY_OPS = {Op}


def _check_prog(prog, arg: str = "prog") -> list[Op]:
    if prog.__class__ is list and set(map(type, prog)) <= _ONLY_OPS:
        return prog[:]                    # the common case, checked in C: a list of ops
    if isinstance(prog, (str, bytes)) or not isinstance(prog, Sequence):
        raise SearchError(f"{arg}={prog!r}: a program is a list of Stack PTX ops")
    out = list(prog)
    for op in out:
        if not isinstance(op, Op):
            raise SearchError(f"{arg}: {op!r} is not a Stack PTX op")
    return out


def _check_genes(genes) -> Genes:
    if not isinstance(genes, Genes):
        raise SearchError(f"genes={genes!r}: give a numptx.search.genes.Genes")
    return genes


def random_program(genes: Genes, rng: np.random.Generator,
                   length: int | tuple[int, int] = (4, 16)) -> list[Op]:
    """A program of ``length`` random genes (an int, or a (low, high) range, both inclusive);
    with two genes or more the last one is an op gene (so the output is not a bare push).

    Op genes expand to several ops, so the op count can exceed the gene count::

        prog = random_program(genes, np.random.default_rng(1), length=8)
    """
    _check_genes(genes)
    _check_rng(rng)
    if isinstance(length, (int, np.integer)) and not isinstance(length, bool):
        lo = hi = int(length)
    elif isinstance(length, tuple) and len(length) == 2 and \
            all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in length):
        lo, hi = int(length[0]), int(length[1])
    else:
        raise SearchError(f"length={length!r}: give an int or a (low, high) pair of ints")
    if lo < 0 or hi < lo:
        raise SearchError(f"length={length!r}: need 0 <= low <= high")
    n = int(rng.integers(lo, hi + 1))
    prog: list[Op] = []
    for _ in range(n - 1):
        prog.extend(genes.random_gene(rng))
    if n >= 2:      # end on an op: a final input or constant push would be the whole output
        prog.extend(genes.op_words(genes.ops[int(rng.integers(len(genes.ops)))]))
    elif n == 1:
        prog.extend(genes.random_gene(rng))
    return prog


def point_mutation(prog: Sequence[Op], genes: Genes, rng: np.random.Generator, *,
                   _tokens: list[int] | None = None) -> list[Op]:
    """Replace one gene by a random gene (an empty program gets one gene)."""
    prog = _check_prog(prog)
    _check_genes(genes)
    _check_rng(rng)
    if not prog:
        return genes.random_gene(rng)
    b = _tokens or genes.tokens(prog)
    t = int(rng.integers(len(b) - 1))
    return prog[:b[t]] + genes.random_gene(rng) + prog[b[t + 1]:]


def insertion(prog: Sequence[Op], genes: Genes, rng: np.random.Generator, *,
              _tokens: list[int] | None = None) -> list[Op]:
    """Insert a random gene at a random gene boundary (the end included)."""
    prog = _check_prog(prog)
    _check_genes(genes)
    _check_rng(rng)
    b = _tokens or genes.tokens(prog)
    i = b[int(rng.integers(len(b)))]
    return prog[:i] + genes.random_gene(rng) + prog[i:]


def deletion(prog: Sequence[Op], genes: Genes, rng: np.random.Generator, *,
             _tokens: list[int] | None = None) -> list[Op]:
    """Delete one gene, or (a quarter of the time) a run of up to 4 genes; [] stays []."""
    prog = _check_prog(prog)
    _check_genes(genes)
    _check_rng(rng)
    if not prog:
        return []
    b = _tokens or genes.tokens(prog)
    count = len(b) - 1
    n = 1 if rng.random() < 0.75 else int(rng.integers(1, min(4, count) + 1))
    t = int(rng.integers(count - n + 1))
    return prog[:b[t]] + prog[b[t + n]:]


def _const_value(op: Op) -> tuple[float, str] | None:
    """(value, dtype) of a float constant op, else None (struct, not NumPy scalars: the
    local optimizer reads every op of every child)."""
    w = op.word
    kind = w & 0xFF
    if kind == CONST and w >> 8 & 0xFF == 5:
        return _F32.unpack(_U32.pack(w >> 32 & 0xFFFF_FFFF))[0], "f32"
    if kind == CONST64 and w >> 8 & 0xFF == 6 and op.extra is not None:
        return _F64.unpack(_U64.pack(op.extra & 0xFFFF_FFFF_FFFF_FFFF))[0], "f64"
    return None


def perturb_constants(prog: Sequence[Op], genes: Genes, rng: np.random.Generator,
                      scale: float = 0.1, *, _tokens: list[int] | None = None) -> list[Op]:
    """Add noise to the float constants: each one (or, if none is picked, one at random) is
    multiplied by ``1 + scale * N(0, 1)`` or, half the time, gets ``scale * N(0, 1)`` added
    (additive noise moves a zero). A program without constants is returned unchanged."""
    prog = _check_prog(prog)
    _check_genes(genes)
    _check_rng(rng)
    if not isinstance(scale, (int, float, np.floating)) or not math.isfinite(scale) or scale < 0:
        raise SearchError(f"scale={scale!r}: give a finite non-negative float")
    b = _tokens or genes.tokens(prog)   # a constant inside a gene (exp's log2 e) is the gene's
    where = [i for i, j in zip(b, b[1:]) if j == i + 1 and _const_value(prog[i]) is not None]
    if not where:
        return prog
    picked = [i for i in where if rng.random() < 0.5] or [where[int(rng.integers(len(where)))]]
    out = list(prog)
    for i in picked:
        value, dtype = _const_value(out[i])
        noise = float(rng.normal(0.0, scale))
        new = value * (1.0 + noise) if rng.random() < 0.5 else value + noise
        new = _round(new, dtype) + 0.0          # never a negative zero (0 * (1 + noise))
        if math.isfinite(new):                # a perturbation never makes an infinity
            out[i] = sp.const(new, dtype)
    return out


def crossover(a: Sequence[Op], b: Sequence[Op], rng: np.random.Generator, *,
              max_length: int | None = None, genes: Genes | None = None) -> list[Op]:
    """Two-point crossover: ``a`` with a segment of it replaced by a segment of ``b``
    (segments may be empty); cut to ``max_length`` ops when given. With ``genes`` the cuts fall
    between genes (:meth:`Genes.tokens`), else anywhere."""
    a, b = _check_prog(a, "a"), _check_prog(b, "b")
    _check_rng(rng)
    if genes is not None:
        ta, tb = _check_genes(genes).tokens(a), genes.tokens(b)
    else:
        ta, tb = range(len(a) + 1), range(len(b) + 1)
    i, j = sorted(ta[int(v)] for v in rng.integers(0, len(ta), size=2))
    k, m = sorted(tb[int(v)] for v in rng.integers(0, len(tb), size=2))
    child = a[:i] + b[k:m] + a[j:]
    return child if max_length is None else _cap(child, max_length)


def _cap(prog: list[Op], max_length: int) -> list[Op]:
    if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)) \
            or max_length < 1:
        raise SearchError(f"max_length={max_length!r}: give a positive int")
    return prog[:int(max_length)]


MUTATIONS = (point_mutation, insertion, deletion, perturb_constants)


def mutate(prog: Sequence[Op], genes: Genes, rng: np.random.Generator, *,
           max_length: int = 64) -> list[Op]:
    """Apply one operator chosen at random from :data:`MUTATIONS` (perturb_constants only when
    the program has constants; insertion not when it is already at ``max_length``); the result
    is cut to ``max_length`` ops."""
    prog = _check_prog(prog)
    _check_genes(genes)
    _check_rng(rng)
    _cap([], max_length)                                  # validates max_length
    choices = [point_mutation, insertion, deletion]
    if len(prog) >= max_length:
        choices.remove(insertion)
    b = genes.tokens(prog)
    if any(j == i + 1 and _const_value(prog[i]) is not None for i, j in zip(b, b[1:])):
        choices.append(perturb_constants)
    op = choices[int(rng.integers(len(choices)))]
    return _cap(op(prog, genes, rng, _tokens=b), max_length)      # the boundaries found once


def constants_of(prog: Sequence[Op]) -> np.ndarray:
    """The float64 values of the program's float (f32/f64) constant ops, in program order."""
    prog = _check_prog(prog)
    return np.array([v[0] for op in prog if (v := _const_value(op)) is not None], np.float64)


def has_constants(prog: Sequence[Op]) -> bool:
    """Whether the program has a float (f32/f64) constant op: ``len(constants_of(prog)) > 0``,
    read only up to the first."""
    return any(_const_value(op) is not None for op in _check_prog(prog))


def _round(value: float, dtype: str) -> float:
    with np.errstate(over="ignore"):
        return float(np.float32(value)) if dtype == "f32" else float(value)


_F32, _U32, _F64, _U64 = (struct.Struct(f) for f in ("<f", "<I", "<d", "<Q"))


#: marker constant ops by (word, value, wide): ConstantSlots.marked
_MARKED: dict[tuple, Op] = {}


class ConstantSlots:
    """Where a program's float constants are (in :func:`constants_of`'s order), to set them
    many times: ``ConstantSlots(prog).program(values)`` equals ``with_constants(prog,
    values)`` (each value rounded to its constant's type) without re-checking the program, for
    the local optimizer, which sets thousands of trial vectors. ``values`` must be finite in
    the constants' types (the optimizer clips its trials to +-1e30); else a SearchError.
    ``written(bits)`` sets them from their bit patterns, unchecked, for a batch converted at
    once::

        slots = ConstantSlots(prog)
        slots.count                          # how many constants
        slots.program(np.array([0.5, 2.0]))  # == with_constants(prog, [0.5, 2.0])
        slots.written([0x3F000000, None])    # constant 0 set to 0.5 (f32), constant 1 kept
    """
    __slots__ = ("ops", "at")

    def __init__(self, prog: Sequence[Op]):
        self.ops = _check_prog(prog)
        self.at = [(i, w, k == CONST64) for i, op in enumerate(self.ops)
                   if ((k := (w := op.word) & 0xFF) == CONST and w >> 8 & 0xFF == 5)
                   or (k == CONST64 and w >> 8 & 0xFF == 6 and op.extra is not None)]

    @classmethod
    def located(cls, prog: list[Op], at: list[tuple[int, int, bool]]) -> "ConstantSlots":
        """The slots of ``prog`` (a list of ops, kept, not copied: :meth:`written` copies it)
        at ``at``, found by the caller as ``__init__`` finds them (the least-squares fit reads
        a whole batch's words at once), unchecked."""
        slots = cls.__new__(cls)
        slots.ops, slots.at = prog, at
        return slots

    def marked(self, base: float) -> list[Op]:
        """``program(base + arange(count))``: constant j set to ``base + j`` (exact in both
        float types for the local optimizer's markers), its ops shared from a cache: the
        optimizer marks every child of every generation."""
        out = self.ops.copy()
        for j, (i, word, wide) in enumerate(self.at):
            key = (word if wide else word & 0xFFFF_FFFF, base + j, wide)
            op = _MARKED.get(key)
            if op is None:
                if len(_MARKED) > 1 << 16:
                    _MARKED.clear()
                op = _MARKED[key] = ConstantSlots([self.ops[i]]).program([base + j])[0]
            out[i] = op
        return out

    @property
    def count(self) -> int:
        return len(self.at)

    def program(self, values: Sequence[float]) -> list[Op]:
        """The program with these constant values (the new ops' repr is the ``const(...)``
        call, derived when shown: the local optimizer writes thousands a generation)."""
        if len(values) != len(self.at):
            raise SearchError(f"values: the program has {len(self.at)} constants, got "
                              f"{len(values)} values")
        payloads: list[int | None] = []
        for n, ((_, _, wide), v) in enumerate(zip(self.at, values)):
            v = float(v)
            try:
                if wide:
                    if not math.isfinite(v):
                        raise OverflowError
                    payloads.append(_U64.unpack(_F64.pack(v))[0])
                    continue
                bits = _U32.unpack(_F32.pack(v))[0]
            except OverflowError:
                bits = None
            if bits is None or bits & 0x7F80_0000 == 0x7F80_0000:
                raise SearchError(f"values[{n}]={v!r}: not a finite "
                                  f"{'f64' if wide else 'f32'} constant")
            payloads.append(bits)
        return self.written(payloads)

    def written(self, payloads: Sequence[int | None]) -> list[Op]:
        """The program with constant j's bits set to ``payloads[j]`` (an f32's 32 bits, an
        f64's 64; None keeps the constant as it is), unchecked: the caller has the finite
        values in their types (the local optimizer's write-back, a batch's bits at once)."""
        out = self.ops.copy()
        for (i, word, wide), bits in zip(self.at, payloads):
            if bits is None:
                continue
            out[i] = (Op(word & 0xFF, word & ~0xFF, extra=bits) if wide else
                      Op(word & 0xFF, word & 0xFFFF_FFFF & ~0xFF | bits << 32))
        return out


def with_constants(prog: Sequence[Op], values) -> list[Op]:
    """The same program with its float constants (as :func:`constants_of` lists them) set to
    ``values``, each rounded to its constant's type. A non-finite value, or one that is out of
    an f32's range, raises SearchError naming ``values``."""
    prog = _check_prog(prog)
    try:
        vals = np.asarray(values, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise SearchError(f"values={values!r}: give a sequence of numbers") from None
    where = [i for i, op in enumerate(prog) if _const_value(op) is not None]
    if len(vals) != len(where):
        raise SearchError(f"values: the program has {len(where)} constants, got {len(vals)} values")
    out = list(prog)
    for n, i in enumerate(where):
        dtype = _const_value(out[i])[1]
        v = _round(float(vals[n]), dtype)
        if not math.isfinite(v):
            raise SearchError(f"values[{n}]={float(vals[n])!r}: not a finite {dtype} constant")
        out[i] = sp.const(v, dtype)
    return out
