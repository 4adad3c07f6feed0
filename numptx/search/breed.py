"""The search loop's children: crossover and mutation on programs split into genes, fast.

:mod:`numptx.search.operators` is the public, checked form of the variation operators; this
module does the same variation for :class:`numptx.search.loop.Search`, where every program is
one the loop made or loaded, so nothing is validated again, and a generation makes thousands
of children from a few thousand parents (~5 µs a child, against ~17–30 µs through the
operators: ``benchmarks/bench_search.py --stages``). What makes it cheap:

- a program is varied as its list of genes (tuples of ops, :meth:`Genes.tokens` spans): a
  cut, an insertion or a deletion is a list slice, and op counts are kept, not recounted; a
  parent is split once, and a child keeps its split for when it is a parent;
- random numbers come from one stream a generation (a numpy call per 4,096 uniforms, not a
  Generator call, ~1 µs, per draw); integers are ``int(u * n)``, normals Box-Muller;
- gene tuples are shared (an input, an op's words, a listed constant); a new constant's op is
  made from the dtype's zero constant (the same op ``sp.const`` gives), once per value.

Under ``variation="linear"`` the odds are those of :func:`operators.crossover` and
:func:`operators.mutate` (a mutation is a point mutation, an insertion, a deletion or a
constant perturbation, uniformly; the draws differ, so a seed gives other children than the
operators would). Under ``"tree"`` the crossover swaps whole subexpressions and
a point mutation keeps the gene's arity (:class:`Breeder`). Two differences: a
child longer than ``max_length`` ops is cut at a gene boundary (a gene is never split), and
random programs (:meth:`Breeder.random_programs`) come from the same stream.

A child's split always equals ``genes.tokens`` of its ops: the split is the concatenation of
the parents' and the new genes, except where a gene shorter than a longer gene it starts
(``log2``'s ``lg2`` when ``log`` is a gene too) meets a cut, and such a child is split afresh.
So a run is a function of its programs and its random generator: a resumed run, which splits
the loaded programs afresh, continues as the uninterrupted one.

Duplicates: with ``revary=k`` (the searches' default 1), a child whose canonical key
(:func:`formula.canonical_keys`) was scored before or was made earlier in this generation is
mutated again, up to ``k`` times, before it is kept as a duplicate (which reuses the score:
nothing is built for it). Most duplicates come from a mutation of code whose value never
reaches the output, so the retry mutates a gene that feeds it (:meth:`Breeder.effective`: a
point mutation, insertion, deletion or perturbation there). A retry costs ~8-9 µs (the
stack walk, the mutation, a key) and makes a new program about a third of the time (a plain
mutation: 15-18 %), so a new program costs about as much Python as without retries and a
generation has ~1.6x as many: that pays on a GPU, where a generation's build ends with one
module assembling alone (``docs/search.md``)::

    import numpy as np
    from numptx.search.breed import Breeder
    from numptx.search.genes import Genes
    from numptx.search import operators as O

    genes = Genes(["add", "mul", "sin"], 2)
    rng = np.random.default_rng(0)
    parents = [O.random_program(genes, rng) for _ in range(100)]
    b = Breeder(genes, crossover=0.5, mutation=0.9, max_length=64, revary=1)
    for progs, keys in b.children(rng, parents[:50], parents[50:], size=16, scored=set()):
        ...                     # 16 children a chunk, with their canonical keys
"""
from __future__ import annotations

import math
import struct
import time
from collections.abc import Container, Iterator, Sequence
from itertools import accumulate, chain

import numpy as np

from .. import stack_ptx as sp
from ..instructions import TABLE
from ..opkinds import CONST, CONST64, INPUT, INSTR, META, META_OPS
from .config import BREEDS, Breed
from .formula import canonical_keys
from .genes import Genes, SearchError, check_int

__all__ = ["Breeder", "BLOCK"]

BLOCK = 64                 #: children made (and keyed) at a time: chunks of any size cut these
_DRAWS = 4096              # uniforms a numpy call
_CONSTS_MAX = 1 << 16      # constant genes kept by value before the memo is cleared
_F32, _F64, _U32, _U64 = (struct.Struct(f) for f in ("<f", "<d", "<I", "<Q"))
_TAU = 2.0 * math.pi


def _uniforms(rng: np.random.Generator) -> Iterator[float]:
    while True:
        yield from rng.random(_DRAWS).tolist()


class Breeder:
    """Children of parent programs (op lists) with the search's rates: with probability
    ``crossover`` a crossover, then with probability ``mutation`` one mutation; else one
    mutation of the first parent. A mutation is a point mutation, an insertion (not at
    ``max_length``), a deletion or (programs with constants) a constant perturbation, picked
    uniformly, as :func:`operators.mutate` picks.

    ``variation`` (:data:`numptx.search.config.BREEDS`; a search's ``"auto"`` is resolved by
    :func:`numptx.search.config.variation_for`): ``"tree"`` reads the postfix
    program as its expression: the crossover replaces a subtree of
    the first parent (the genes that make one value, :meth:`_subtree`) by one of the second,
    and a point mutation puts a gene of the same arity (:meth:`_like`); ``"linear"``: a
    two-point crossover at any gene boundaries, a point mutation puts
    any gene."""

    def __init__(self, genes: Genes, *, crossover: float, mutation: float, max_length: int,
                 revary: int = 0, variation: Breed = "linear"):
        self.genes, self.crossover, self.mutation = genes, float(crossover), float(mutation)
        if variation not in BREEDS:
            raise SearchError(f"Breeder: variation={variation!r}: use 'tree' or 'linear'")
        self.tree = variation == "tree"
        self.gene_arity: dict[int, tuple] = {}   # id(gene) -> (gene, consumed, produced)
        self.by_arity: dict[tuple, list[int]] = {}
        self.max_length = check_int("max_length", max_length, 1)
        self.revary = check_int("revary", revary, 0)
        self.inputs = [tuple(genes.input_words(n)) for n in genes.names]
        self.ops = [tuple(genes.op_words(n)) for n in genes.ops]
        self.zero = sp.const(0.0, genes.dtype)
        self.f64 = genes.dtype == "f64"
        self.const_tag = self.zero.word & 0xFFFF     # the low word of a constant of the dtype
        self.consts: dict[float, tuple] = {}
        self.direct = self._direct_works()
        # gene first op -> the longest multi-op gene it starts. A gene shorter than that where
        # one starts ("risky": log2's lg2 when log is a gene too, a constant of exactly log2 e)
        # may merge with what follows a cut (genes.tokens matches longest first): a child with
        # one is split afresh. Other genes need no look: the split is the concatenation's.
        self.longest: dict[bytes, int] = {}
        for w in self.ops:
            if len(w) > 1 and all(op.raw for op in w):
                self.longest[w[0].raw] = max(len(w), self.longest.get(w[0].raw, 0))
        self.risky_values: set[float] = set()
        self.hit = False                             # a risky gene was made since reset
        self.listed = [self._const_gene(v) for v in genes.constants]
        self.listed_risky = [v in self.risky_values for v in genes.constants]
        self.ops_risky = [self._risky(w) for w in self.ops]
        self.hit = False
        # id(ops) -> [ops, genes, boundaries (None until it is a parent), has a risky gene]
        self.split: dict[int, list] = {}
        # word -> (operands, results) of an instruction; dup: (-1, 1) (see effective)
        self.arity: dict[int, tuple[int, int]] = {}
        self.dup_code = META_OPS.index("dup")
        self.revaried = 0                            # extra mutations made for duplicates

    # ---- genes
    def _risky(self, x: tuple) -> bool:
        return len(x) < self.longest.get(x[0].raw, 0)

    def _const_gene(self, v: float) -> tuple:
        g = self.consts.get(v)
        if g is None:
            if len(self.consts) >= _CONSTS_MAX:
                self.consts.clear()
            g = self.consts[v] = (self._const_op(v) if self.direct else
                                  sp.const(v, self.genes.dtype),)
            if self._risky(g):
                self.risky_values.add(v)
        if v in self.risky_values:
            self.hit = True
        return g

    def _direct_works(self) -> bool:
        """Constant ops made from the zero's word are those sp.const makes (else sp.const is
        used: the encoding is the C core's to change)."""
        try:
            return all(self._const_op(v) == sp.const(v, self.genes.dtype) for v in
                       (1.5, -0.1, 3e38 if self.genes.dtype == "f32" else 1e300))
        except Exception:  # noqa: BLE001 - any failure: the checked constructor
            return False

    def _const_op(self, v: float) -> sp.Op:
        """``sp.const(v, dtype)`` (a finite value of the dtype), made from the zero constant's
        word: a perturbation makes a new value nearly every time, and sp.const checks and
        converts through NumPy (~3 µs)."""
        z = self.zero
        if self.f64:
            return sp.Op(z.word & 0xFF, z.word & ~0xFF, extra=_U64.unpack(_F64.pack(v))[0],
                         text=f"const({v!r}, 'f64')")
        return sp.Op(z.word & 0xFF, z.word & ~0xFF | _U32.unpack(_F32.pack(v))[0] << 32,
                     text=f"const({v!r}, 'f32')")

    def _round(self, v: float) -> float | None:
        """``v`` in the dtype (+0.0 for a zero), None when not finite there."""
        if not self.f64:
            try:
                v = _F32.unpack(_F32.pack(v))[0]
            except OverflowError:                     # beyond the f32 range: infinite
                return None
        return v + 0.0 if math.isfinite(v) else None

    def _value(self, op) -> float:
        return (_F64.unpack(_U64.pack(op.extra))[0] if self.f64
                else _F32.unpack(_U32.pack(op.word >> 32))[0])

    def _gene(self, u) -> tuple:
        """A random gene: an input (35 %), a constant (15 %: a listed one or a short random
        number, half and half) or an op's words (50 %), as :meth:`Genes.random_gene`."""
        r = u()
        if r < 0.35:
            return self.inputs[int(u() * len(self.inputs))]
        if r < 0.5:
            if self.listed and u() < 0.5:
                i = int(u() * len(self.listed))
                if self.listed_risky[i]:
                    self.hit = True
                return self.listed[i]
            z = math.sqrt(-2.0 * math.log(1.0 - u())) * math.cos(_TAU * u())
            return self._const_gene(self._round(round(2.0 * z, 2)))
        i = int(u() * len(self.ops))
        if self.ops_risky[i]:
            self.hit = True
        return self.ops[i]

    # ---- parents
    def parent(self, prog: list) -> list:
        """[ops, genes, boundaries, risky] of ``prog``: split once (by :meth:`Genes.tokens`),
        then found by identity for as long as the program is a parent."""
        e = self.split.get(id(prog))
        if e is None or e[0] is not prog:
            e = self._split(prog)
            self.split[id(prog)] = e
        elif e[2] is None:
            e[2] = list(accumulate(map(len, e[1]), initial=0))
        return e

    def _split(self, ops: list) -> list:
        b = self.genes.tokens(ops)
        g = [tuple(ops[i:j]) for i, j in zip(b, b[1:])]
        return [ops, g, b, any(map(self._risky, g)) if self.longest else False]

    # ---- effective genes
    def effective(self, g: Sequence[tuple]) -> list[int] | None:
        """The indices of the genes of ``g`` whose ops feed the output (the top of the
        stack at the end), found by running the stack on value ids: an instruction that lacks
        operands does nothing, as in the C core. None when something else decides (an op
        that is neither a push, an instruction nor ``dup``; or no value reaches the output).

        Most duplicate children come from a mutation of a gene outside these (a constant
        nothing reads, say, whose value the stub never shows): a duplicate is varied again at
        one of these (:meth:`children`)."""
        stack: list[int] = []
        gene_of: list[int] = []              # value id -> its gene
        deps: list[tuple] = []               # value id -> the value ids it reads
        arity = self.arity
        for gi, gene in enumerate(g):
            for op in gene:
                w = op.word
                a = arity.get(w)
                if a is None:
                    kind = w & 0xFF
                    if kind in (INPUT, CONST, CONST64):
                        gene_of.append(gi)
                        deps.append(())
                        stack.append(len(deps) - 1)
                        continue
                    if kind == INSTR:
                        row = TABLE[w >> 16]
                        a = arity[w] = (len(row.operand_types), len(row.result_types))
                    elif kind == META and w >> 16 & 0xFFFF == self.dup_code:
                        a = arity[w] = (-1, 1)
                    else:
                        return None
                k = a[0]
                if k < 0:                                    # dup: a copy of the top
                    if stack:
                        gene_of.append(gi)
                        deps.append((stack[-1],))
                        stack.append(len(deps) - 1)
                elif len(stack) >= k:
                    read = tuple(stack[len(stack) - k:])
                    del stack[len(stack) - k:]
                    for _ in range(a[1]):
                        gene_of.append(gi)
                        deps.append(read)
                        stack.append(len(deps) - 1)
        if not stack:
            return None
        live, todo, seen = set(), [stack[-1]], set()
        while todo:
            v = todo.pop()
            if v not in seen:
                seen.add(v)
                live.add(gene_of[v])
                todo.extend(deps[v])
        return sorted(live)

    def _revary(self, g: list, n: int, u) -> tuple[list, int]:
        """A mutation of a duplicate at an effective gene (:meth:`effective`): a point
        mutation, an insertion (before one, or at the end), a deletion of one or a constant
        perturbation of one, picked as :meth:`_mutate` picks; a plain mutation when no gene
        is known to be effective."""
        eff = self.effective(g)
        if not eff:
            return self._mutate(g, n, u)
        choices = (0, 2, 3) if n >= self.max_length else (0, 1, 2, 3)
        c = choices[int(u() * len(choices))]
        if c == 3:
            tag = self.const_tag
            consts = [i for i in eff if len(g[i]) == 1 and g[i][0].word & 0xFFFF == tag]
            if not consts:
                c = choices[int(u() * (len(choices) - 1))]
        if c == 0:
            new = self._gene(u)
            t = eff[int(u() * len(eff))]
            return g[:t] + [new] + g[t + 1:], n - len(g[t]) + len(new)
        if c == 1:
            new = self._gene(u)
            t = int(u() * (len(eff) + 1))
            t = eff[t] if t < len(eff) else len(g)
            return g[:t] + [new] + g[t:], n + len(new)
        if c == 2:
            t = eff[int(u() * len(eff))]
            return g[:t] + g[t + 1:], n - len(g[t])
        return self._perturb(g, n, consts, u)

    # ---- variation: (genes, op count) -> (genes, op count)
    def _crossover(self, ea: list, eb: list, u) -> tuple[list, int]:
        ga, ta, gb, tb = ea[1], ea[2], eb[1], eb[2]
        i, j = int(u() * len(ta)), int(u() * len(ta))
        k, m = int(u() * len(tb)), int(u() * len(tb))
        if i > j:
            i, j = j, i
        if k > m:
            k, m = m, k
        return ga[:i] + gb[k:m] + ga[j:], ta[i] + tb[m] - tb[k] + ta[-1] - ta[j]

    def _arity(self, gene: tuple) -> tuple[int, int]:
        """(values consumed, values produced) of a gene: its words run on a stack of
        unknown depth (a word that is neither a push, an instruction nor dup: (0, 0))."""
        got = self.gene_arity.get(id(gene))
        if got is not None and got[0] is gene:
            return got[1], got[2]
        depth = low = 0
        arity = self.arity
        for op in gene:
            w = op.word
            a = arity.get(w)
            if a is None:
                kind = w & 0xFF
                if kind in (INPUT, CONST, CONST64):
                    a = (0, 1)
                elif kind == INSTR:
                    row = TABLE[w >> 16]
                    a = arity[w] = (len(row.operand_types), len(row.result_types))
                elif kind == META and w >> 16 & 0xFFFF == self.dup_code:
                    a = arity[w] = (-1, 1)
                else:
                    a = (0, 0)
            if a[0] < 0:                      # dup reads the top and pushes a copy
                low = min(low, depth - 1)
                depth += 1
                continue
            depth -= a[0]
            low = min(low, depth)
            depth += a[1]
        if len(self.gene_arity) >= _CONSTS_MAX:
            self.gene_arity.clear()
        self.gene_arity[id(gene)] = (gene, -low, depth - low)
        return -low, depth - low

    def _like(self, gene: tuple, u) -> tuple:
        """A random gene of the same (consumed, produced) as ``gene``: a push for a push, an
        op of the same arity for an op (a random gene when no other op has it)."""
        a = self._arity(gene)
        if a == (0, 1):
            while True:
                new = self._gene(u)
                if self._arity(new) == (0, 1):
                    return new
        same = self.by_arity.get(a)
        if same is None:
            same = self.by_arity[a] = [i for i, w in enumerate(self.ops) if self._arity(w) == a]
        if len(same) < 2:
            return self._gene(u)
        i = same[int(u() * len(same))]
        if self.ops_risky[i]:
            self.hit = True
        return self.ops[i]

    def _subtree(self, g: list, u) -> tuple[int, int]:
        """The genes [start, end) of a random subtree of ``g``: its root drawn uniformly, a
        push redrawn once nine times in ten (Operon's 90 % internal nodes), its start found
        walking back until the root's operands are all made. (0, 0) for no genes."""
        count = len(g)
        if not count:
            return 0, 0
        end = int(u() * count)
        c, p = self._arity(g[end])
        if c == 0 and u() < 0.9:
            end = int(u() * count)
            c, p = self._arity(g[end])
        need, t = 1 - p + c, end
        while need > 0 and t > 0:
            t -= 1
            c, p = self._arity(g[t])
            need += c - p
        return t, end + 1

    def _subtree_crossover(self, ea: list, eb: list, u) -> tuple[list, int]:
        """A subtree of the first parent replaced by one of the second (tree GP's crossover
        on the postfix programs); of three draws in the second, the first that keeps the
        child within max_length ops, else the shortest."""
        ga, ta, gb, tb = ea[1], ea[2], eb[1], eb[2]
        i, j = self._subtree(ga, u)
        room = self.max_length - (ta[-1] - ta[j] + ta[i])
        best = None
        for _ in range(3):
            k, m = self._subtree(gb, u)
            if best is None or tb[m] - tb[k] < tb[best[1]] - tb[best[0]]:
                best = (k, m)
            if tb[m] - tb[k] <= room:
                break
        k, m = best
        return ga[:i] + gb[k:m] + ga[j:], ta[i] + tb[m] - tb[k] + ta[-1] - ta[j]

    def _mutate(self, g: list, n: int, u) -> tuple[list, int]:
        # 0 point, 1 insertion (not at max_length), 2 deletion, 3 perturbation (programs with
        # constants): uniform, as operators.mutate picks; the constants are looked for only
        # when 3 is drawn (none: a second uniform draw of the others, the same odds)
        choices = (0, 2, 3) if n >= self.max_length else (0, 1, 2, 3)
        c = choices[int(u() * len(choices))]
        if c == 3:
            tag = self.const_tag
            consts = [i for i, x in enumerate(g) if len(x) == 1 and x[0].word & 0xFFFF == tag]
            if not consts:
                c = choices[int(u() * (len(choices) - 1))]
        count = len(g)
        if c == 0:
            if self.tree and count:              # the gene first: its arity picks the new one
                t = int(u() * count)
                new = self._like(g[t], u)
                return g[:t] + [new] + g[t + 1:], n - len(g[t]) + len(new)
            new = self._gene(u)                  # (linear: the draws in the order they had)
            if not count:
                return [new], len(new)
            t = int(u() * count)
            return g[:t] + [new] + g[t + 1:], n - len(g[t]) + len(new)
        if c == 1:
            new = self._gene(u)
            t = int(u() * (count + 1))
            return g[:t] + [new] + g[t:], n + len(new)
        if c == 2:
            if not count:
                return [], 0
            d = 1 if u() < 0.75 else 1 + int(u() * min(4, count))
            t = int(u() * (count - d + 1))
            return g[:t] + g[t + d:], n - sum(map(len, g[t:t + d]))
        return self._perturb(g, n, consts, u)

    def _perturb(self, g: list, n: int, consts: list[int], u) -> tuple[list, int]:
        picked = [i for i in consts if u() < 0.5] or [consts[int(u() * len(consts))]]
        g = g[:]
        for i in picked:
            v = self._value(g[i][0])
            z = 0.1 * math.sqrt(-2.0 * math.log(1.0 - u())) * math.cos(_TAU * u())
            new = self._round(v * (1.0 + z) if u() < 0.5 else v + z)
            if new is not None:                  # a perturbation never makes an infinity
                g[i] = self._const_gene(new)
        return g, n

    def _finish(self, g: list, n: int, risky: bool) -> list:
        """The child's entry: cut to max_length at a gene boundary; split afresh when it may
        hold a risky gene, so that its split is genes.tokens of its ops."""
        if n > self.max_length:
            g, n = self._cut(g)
        ops = list(chain.from_iterable(g))
        if risky or self.hit:
            return self._split(ops)           # rare (none with the default genes)
        return [ops, g, None, False]

    def _cut(self, g: list) -> tuple[list, int]:
        """The genes that fit in max_length ops, whole, and their op count."""
        room, k = self.max_length, 0
        for x in g:
            if len(x) > room:
                break
            room -= len(x)
            k += 1
        return g[:k], self.max_length - room

    def _child(self, ea: list, eb: list, c0: float, c1: float, u) -> list:
        self.hit = False
        if c0 < self.crossover:
            g, n = (self._subtree_crossover if self.tree else self._crossover)(ea, eb, u)
            if n > self.max_length:
                g, n = self._cut(g)
            if c1 < self.mutation:
                g, n = self._mutate(g, n, u)
            return self._finish(g, n, ea[3] or eb[3])
        g, n = self._mutate(ea[1], ea[2][-1], u)
        return self._finish(g, n, ea[3])

    def random_programs(self, rng: np.random.Generator, count: int,
                        length: tuple[int, int]) -> Iterator[list]:
        """``count`` random programs of ``length`` = (low, high) genes (inclusive), as
        :func:`operators.random_program` makes them (the last gene of two or more is an op),
        made as they are asked for (the same ones however they are taken); their splits are
        kept for when they are parents."""
        u = _uniforms(rng).__next__
        lo, span = length[0], length[1] - length[0] + 1
        for _ in range(count):
            self.hit = False
            n = lo + int(u() * span)
            g = [self._gene(u) for _ in range(n - 1)]
            if n >= 2:   # end on an op: a final input or constant push would be the output
                i = int(u() * len(self.ops))
                self.hit = self.hit or self.ops_risky[i]
                g.append(self.ops[i])
            elif n == 1:
                g.append(self._gene(u))
            e = self._finish(g, 0, False)
            self.split[id(e[0])] = e
            yield e[0]

    # ---- a generation
    def children(self, rng: np.random.Generator, parents_a: Sequence[list],
                 parents_b: Sequence[list], *, size: int, scored: Container[bytes],
                 on_keys=None) -> Iterator[tuple[list, list[bytes]]]:
        """One child per pair of parents, in chunks of ``size``: (programs, canonical keys).

        Children are made and keyed :data:`BLOCK` at a time whatever ``size`` is, so the
        chunks cut the same children. ``scored``: keys scored before (a duplicate of one, or
        of a child made earlier in this generation, is mutated again, at an effective gene,
        up to ``revary`` times).
        ``on_keys(seconds)``, when given, is told the time spent computing keys."""
        size = check_int("size", size, 1)
        u = _uniforms(rng).__next__
        seen: set[bytes] = set()
        kept: dict[int, list] = {}
        get = self.split.get          # self.parent(p), inline: a parent is met many times
        side_a, side_b = ([e if (e := get(id(p))) is not None and e[0] is p and e[2] is not None
                           else self.parent(p) for p in ps] for ps in (parents_a, parents_b))
        parents = list(zip(side_a, side_b))
        out_p: list = []
        out_k: list = []
        keying = [0.0]

        def keys_of(entries: list) -> list[bytes]:
            t = time.perf_counter()
            got = canonical_keys([e[0] for e in entries], self.genes)
            keying[0] += time.perf_counter() - t
            return got
        for start in range(0, len(parents), BLOCK):
            block = [self._child(ea, eb, u(), u(), u)
                     for ea, eb in parents[start:start + BLOCK]]
            keying[0] = 0.0
            keys = keys_of(block)
            todo = list(range(len(block)))
            for attempt in range(self.revary + 1):
                again = []
                for i in todo:                 # in order: the first of equal keys is new
                    k = keys[i]
                    if k in seen or k in scored:
                        again.append(i)
                    else:
                        seen.add(k)
                if not again or attempt == self.revary:
                    break
                self.revaried += len(again)
                for i in again:                # a duplicate: mutated once more, where it
                    e = block[i]               # shows (an effective gene)
                    self.hit = False
                    block[i] = self._finish(*self._revary(e[1], len(e[0]), u), e[3])
                for i, k in zip(again, keys_of([block[i] for i in again])):
                    keys[i] = k
                todo = again
            if on_keys is not None:
                on_keys(keying[0])
            for e in block:
                kept[id(e[0])] = e
            out_p.extend(e[0] for e in block)
            out_k.extend(keys)
            while len(out_p) >= size:
                yield out_p[:size], out_k[:size]
                del out_p[:size], out_k[:size]
        if out_p:
            yield out_p, out_k
        self.split = kept      # the children are the next parents (elites: split again)
