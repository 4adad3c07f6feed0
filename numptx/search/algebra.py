"""The algebraic form of a compiled stub, for :mod:`numptx.search.simplify`.

A stub's statements are read in order into interned nodes of the algebra of real numbers
(:class:`Alg`): numbers, inputs, function calls, products of int powers and sums of terms with
coefficients, each with a structural key that orders them canonically. Constant-only
instructions fold bit-exactly with the instruction table's semantics; the op macros (``exp``:
``ex2`` of ``x*log2(e)``, ``log``: ``lg2(x)*ln(2)``) are recognised by their exact constants::

    alg, memo = Alg(genes), {}
    top = parse_stub(str(stub), alg, memo)          # a node of alg
    alg.kind[top], alg.data[top]

Nodes are interned by structure, so an :class:`Alg` and its ``memo`` may be kept across
programs (:mod:`numptx.search.simplify` keeps one per genes): what they hold never changes a
result. A node's key is made when an order first needs it (:meth:`Alg.keyof`): most nodes
(constants, partial sums) are never compared.
"""
from __future__ import annotations

import math
import re
import struct
import zlib
from collections.abc import Sequence

import numpy as np

from ..instructions import TABLE, UnknownInstructionError
from .formula import CVT, FUNCS
from .genes import LN2, LOG2E, Genes, SearchError

__all__ = ["Alg", "parse_stub", "reachable", "NUM", "VAR", "PROD", "CALL", "SUM", "fkey",
           "KEY_DEPTH", "digest", "fdig", "sdig", "make_key"]

NUM, VAR, PROD, CALL, SUM = 0, 1, 2, 3, 4     # ranks of the canonical order too


_FACTS: dict[tuple, tuple] = {}


def _genes_facts(genes: Genes) -> tuple:
    """(NumPy dtype, input name -> index, log2(e) and ln(2) in the dtype) of ``genes``."""
    k = (genes.dtype, genes.names)
    got = _FACTS.get(k)
    if got is None:
        if len(_FACTS) > 256:
            _FACTS.clear()
        got = _FACTS[k] = (np.float32 if genes.dtype == "f32" else np.float64,
                           {n: j for j, n in enumerate(genes.names)},
                           genes.round(LOG2E), genes.round(LN2))
    return got


def fkey(v: float) -> tuple:
    """A number's place in the total order (NaN last, -0.0 before 0.0)."""
    if v != v:
        return (True, 0.0, 1.0)
    return (False, v, -1.0 if v == 0 and math.copysign(1.0, v) < 0 else 1.0)


#: a node nested deeper than this is ordered by a digest of its structure, not by its
#: children's keys, so comparing two keys never recurses deeper than this (a 4,096-op chain)
KEY_DEPTH = 12


def digest(*parts) -> int:
    """A structural digest, the same in every process: ints, floats and digests only (a str's
    hash changes with PYTHONHASHSEED, a NaN's with its identity; :func:`fdig`, :func:`sdig`)."""
    return hash(parts)


def fdig(v: float) -> int:
    """A number's part of a digest (-0.0 and NaN included)."""
    return 0x7FF8 if v != v else hash((v, math.copysign(1.0, v)))


def sdig(name: str) -> int:
    """A name's part of a digest."""
    return zlib.crc32(name.encode())


def make_key(rank: int, shallow: tuple, depth: int, dig: int) -> tuple:
    """A node's key: ``(rank, 0, *shallow)`` (its children's keys inside) up to
    :data:`KEY_DEPTH`, ``(rank, 1, digest)`` deeper."""
    return (rank, 0, *shallow) if depth <= KEY_DEPTH else (rank, 1, dig)


# ---- the algebraic form ------------------------------------------------------------------------
class Alg:
    """Interned algebraic nodes. A node is a number, an input, a call ``(name, args)``, a
    product ``((base, exponent), ...)`` of nonzero int exponents (no coefficient; a base is a
number only where combining it would overflow float64: ``1e200*(1e200*x)``), or a sum
    ``(const, ((coeff, mono), ...))`` whose monos are neither numbers nor sums. Each node has a
    structural key (its place in the canonical order), equal only for equal nodes."""

    def __init__(self, genes: Genes):
        self.genes = genes
        self.np, self.index, self.log2e, self.ln2 = _genes_facts(genes)
        self.kind: list[int] = []
        self.data: list = []
        #: node -> its key, depth and digest, made when first asked for (:meth:`keyof`,
        #: :meth:`digestof`): most nodes are never compared (a sum's partial sums, numbers)
        self.key: dict[int, tuple] = {}
        self.depth: dict[int, int] = {}
        self.dig: dict[int, int] = {}
        self._intern: tuple[dict, ...] = ({}, {}, {}, {}, {})      # per kind: data -> node

    def _node(self, kind: int, data) -> int:
        intern = self._intern[kind]
        i = intern.get(data)
        if i is None:
            i = intern[data] = len(self.kind)
            self.kind.append(kind)
            self.data.append(data)
        return i

    def kids(self, i: int) -> Sequence[int]:
        """Node ``i``'s children (a sequence of nodes, each made before ``i``)."""
        kind, data = self.kind[i], self.data[i]
        if kind == SUM:
            return [m for _k, m in data[1]]
        if kind == PROD:
            return [b for b, _e in data]
        return data[1] if kind == CALL else ()

    def missing(self, top: int, have: dict) -> list[int]:
        """The nodes under ``top`` (``top`` too) not in ``have``, children first (ascending
        ids: a child is made before its parent), without recursion."""
        seen, todo = {top}, [top]
        kinds, datas = self.kind, self.data
        while todo:
            i = todo.pop()
            kind = kinds[i]
            if kind == SUM:
                kids = [m for _k, m in datas[i][1]]
            elif kind == PROD:
                kids = [b for b, _e in datas[i]]
            elif kind == CALL:
                kids = datas[i][1]
            else:
                continue
            for c in kids:
                if c not in have and c not in seen:
                    seen.add(c)
                    todo.append(c)
        return sorted(seen)

    def keyof(self, i: int) -> tuple:
        """Node ``i``'s structural key (:func:`make_key`: its place in the canonical order),
        made on first use with those of the nodes under it."""
        got = self.key.get(i)
        return got if got is not None else self._fill(i)

    def _fill(self, top: int) -> tuple:
        """Make the keys and depths of ``top`` and the nodes under it that lack them: keys as
        :func:`make_key`'s, flattened (fkeys spliced in, a product's or a sum's pairs in one
        flat tuple): the same order (items compare in turn) in fewer tuples."""
        key, dep, kids = self.key, self.depth, self.kids
        for c in kids(top):
            if c not in key:
                todo = self.missing(top, key)
                break
        else:
            todo = (top,)
        for i in todo:
            kind, data = self.kind[i], self.data[i]
            if kind == NUM:
                dep[i], key[i] = 0, (NUM, 0, *fkey(math.nan if data == "nan" else data))
                continue
            if kind == VAR:
                dep[i], key[i] = 0, (VAR, 0, self.index[data])
                continue
            if kind == SUM:
                flat, depth = [], 0
                for k, m in data[1]:             # fkey inline where k is neither 0 nor NaN
                    flat += (key[m], False, k, 1.0) if k == k and k != 0 else (key[m], *fkey(k))
                    depth = max(depth, dep[m])
                got = (SUM, 0, tuple(flat), *fkey(data[0]))
            elif kind == CALL:
                got = (CALL, 0, data[0], tuple([key[a] for a in data[1]]))
                depth = max([dep[a] for a in data[1]])
            else:
                got = (PROD, 0, tuple([x for b, e in data for x in (key[b], e)]))
                depth = max([dep[b] for b, _e in data])
            dep[i] = depth = depth + 1
            key[i] = got if depth <= KEY_DEPTH else (kind, 1, self.digestof(i))
        return key[top]

    def digestof(self, top: int) -> int:
        """Node ``top``'s structural digest (:func:`digest`), made on first use with those
        of the nodes under it."""
        dig = self.dig
        got = dig.get(top)
        if got is not None:
            return got
        for i in self.missing(top, dig):
            kind, data = self.kind[i], self.data[i]
            if kind == NUM:
                dig[i] = digest(NUM, fdig(math.nan if data == "nan" else data))
            elif kind == VAR:
                dig[i] = digest(VAR, self.index[data])
            elif kind == PROD:
                dig[i] = digest(PROD, *[(dig[b], e) for b, e in data])
            elif kind == CALL:
                dig[i] = digest(CALL, sdig(data[0]), *[dig[a] for a in data[1]])
            else:
                c, terms = data
                dig[i] = digest(SUM, fdig(c), *[(fdig(k), dig[m]) for k, m in terms])
        return dig[top]

    def num(self, v: float) -> int:
        v = float(v) + 0.0                       # -0.0 is 0 here (the algebra has no signed zero)
        return self._node(NUM, v if v == v else "nan")

    def var(self, name: str) -> int:
        return self._node(VAR, name)

    def finite(self, i: int) -> float | None:
        """Node ``i``'s value when it is a finite number."""
        if self.kind[i] == NUM:
            v = self.data[i]
            if v != "nan" and math.isfinite(v):
                return v
        return None

    # ---- linear form (const, {mono: coeff}) and product form (coeff, {base: exponent})
    def lin(self, i: int) -> tuple[float, dict[int, float]]:
        kind, data = self.kind[i], self.data[i]
        if kind == SUM:
            return data[0], {m: k for k, m in data[1]}
        if kind == NUM and data != "nan" and math.isfinite(data):
            return data, {}
        return 0.0, {i: 1.0}

    def prodform(self, i: int) -> tuple[float, dict[int, int]]:
        kind, data = self.kind[i], self.data[i]
        if kind == SUM:
            if data[0] == 0 and len(data[1]) == 1:
                k, m = data[1][0]
                return k, (dict(self.data[m]) if self.kind[m] == PROD else {m: 1})
        elif kind == PROD:
            return 1.0, dict(data)
        elif kind == NUM and data != "nan" and math.isfinite(data):
            return data, {}
        return 1.0, {i: 1}

    def _order(self, nodes: list[int]) -> list:
        """Values that sort distinct ``nodes`` as their keys do: their kinds where these all
        differ (a key starts with its node's kind), else their keys (made where missing)."""
        kind = self.kind
        kinds = [kind[m] for m in nodes]
        if len(set(kinds)) == len(kinds):
            return kinds
        key, fill = self.key, self._fill
        return [key.get(m) or fill(m) for m in nodes]

    def from_lin(self, c: float, terms: dict[int, float]) -> int:
        if len(terms) == 1:
            (m, k), = terms.items()
            if k == 0:
                return self.num(c)
            if c == 0 and k == 1:
                return m
            return self._node(SUM, (c + 0.0, ((k, m),)))
        ms = [m for m, k in terms.items() if k != 0]
        if not ms:
            return self.num(c)
        if c == 0 and len(ms) == 1 and terms[ms[0]] == 1:
            return ms[0]
        items = sorted([(o, terms[m], m) for o, m in zip(self._order(ms), ms)])
        return self._node(SUM, (c + 0.0, tuple([(k, m) for _o, k, m in items])))

    def from_prod(self, coeff: float, factors: dict[int, int]) -> int:
        if len(factors) == 1:
            (b, e), = factors.items()
            if e == 0:
                return self.num(coeff)
            mono = b if e == 1 else self._node(PROD, ((b, e),))
        else:
            bs = [b for b, e in factors.items() if e != 0]
            if not bs:
                return self.num(coeff)
            if len(bs) == 1 and factors[bs[0]] == 1:
                mono = bs[0]
            else:
                items = sorted(zip(self._order(bs), bs))
                mono = self._node(PROD, tuple([(b, factors[b]) for _o, b in items]))
        if coeff == 1:
            return mono
        if coeff == 0:
            return self.num(0.0)
        return self._node(SUM, (0.0, ((coeff, mono),)))   # from_lin's: 2*(x + 1) stays

    # ---- operations
    def add(self, a: int, b: int, sign: float = 1.0) -> int:
        kind = self.kind
        if (kind[a] == NUM) != (kind[b] == NUM):   # a number and a non-number
            got = self._add_number(a, b, sign)
            if got is not None:
                return got
        if a == b and sign == 1 and self.kind[a] == SUM and self.finite(a) is None:
            c, terms = self.data[a]
            if c != 0 or len(terms) > 1:         # s + s is 2*(x + y), not 2*x + 2*y
                return self.from_lin(0.0, {a: 2.0})
        ca, ta = self.lin(a)
        cb, tb = self.lin(b)
        for m, k in tb.items():
            ta[m] = ta.get(m, 0.0) + sign * k
        return self.from_lin(ca + sign * cb, ta)

    def _add_number(self, a: int, b: int, sign: float) -> int | None:
        """``a + sign*b`` where one of them is a finite number and the other no number, as
        the general :meth:`add` makes it (the same floats, the same order of the terms:
        a sum's terms are kept in their order, sorted already), without its dicts and
        sort; None where it does not apply (or the terms might sort otherwise)."""
        if sign not in (1.0, -1.0):            # a zero coefficient: the general path drops it
            return None
        if self.kind[b] == NUM:
            v = self.data[b]
            if v == "nan" or not math.isfinite(v):
                return None
            if self.kind[a] != SUM:                # lin(a) is (0.0, {a: 1.0})
                c = 0.0 + sign * v
                return a if c == 0 else self._node(SUM, (c + 0.0, ((1.0, a),)))
            c, terms = self.data[a]
            c = c + sign * v
        else:
            v = self.data[a]
            if v == "nan" or not math.isfinite(v):
                return None
            if self.kind[b] != SUM:                # lin(b) is (0.0, {b: 1.0})
                k, c = 0.0 + sign * 1.0, v + sign * 0.0
                return b if c == 0 and k == 1 else self._node(SUM, (c + 0.0, ((k, b),)))
            c, terms = self.data[b]
            if sign != 1 and len(terms) > 1:       # -k might break a tie of keys otherwise
                return None
            c, terms = v + sign * c, tuple([(0.0 + sign * k, m) for k, m in terms])
        if c == 0 and len(terms) == 1 and terms[0][0] == 1:
            return terms[0][1]
        return self._node(SUM, (c + 0.0, terms))

    def scale(self, a: int, s: float) -> int:
        c, terms = self.lin(a)
        return self.from_lin(c * s, {m: k * s for m, k in terms.items()})

    def mul(self, a: int, b: int) -> int:
        kind = self.kind
        ka, kb = kind[a], kind[b]
        if ka == NUM and (kb == VAR or kb == CALL) or kb == NUM and (ka == VAR or ka == CALL):
            n, m = (a, b) if ka == NUM else (b, a)
            c = self.data[n]
            if c != "nan" and math.isfinite(c):    # c*m, as from_prod(c, {m: 1}) makes it
                return m if c == 1 else self.num(0.0) if c == 0 else \
                    self._node(SUM, (0.0, ((c, m),)))
        ca, fa = self.prodform(a)
        cb, fb = self.prodform(b)
        if not math.isfinite(ca * cb) and math.isfinite(ca) and math.isfinite(cb):
            # 1e200*(1e200*x): the coefficients' product overflows float64, so the two stay
            # factors (a number may be a base), not inf*x
            return self._node(PROD, ((a, 2),) if a == b else
                              tuple(sorted(((a, 1), (b, 1)), key=lambda t: self.keyof(t[0]))))
        if fb:
            for f, e in fb.items():
                fa[f] = fa.get(f, 0) + e
        return self.from_prod(ca * cb, fa)

    def inv(self, a: int) -> int:
        c, f = self.prodform(a)
        if c == 0 or not math.isfinite(1.0 / c):  # x/0, x/(1e-310*y): stay divisions (1/c
            return self._node(PROD, ((a, -1),))    # would be 1/0 or overflow float64)
        return self.from_prod(1.0 / c, {b: -e for b, e in f.items()})

    def pow(self, a: int, n: int) -> int:
        c, f = self.prodform(a)
        try:
            cn = c ** n
        except OverflowError:
            cn = math.copysign(math.inf, c) if n % 2 else math.inf
        return self.from_prod(cn, {b: e * n for b, e in f.items()})

    def call(self, name: str, args: Sequence[int]) -> int:
        args = tuple(args)
        kind = self.kind
        for a in args:
            if kind[a] != NUM or self.finite(a) is None:
                break
        else:
            from .formula import EVAL_FUNCS
            vals = [np.asarray([self.finite(a)], np.float64) for a in args]
            with np.errstate(all="ignore"):
                return self.num(float(np.asarray(EVAL_FUNCS[name](*vals)).reshape(-1)[0]))
        if name in ("fmax", "fmin"):
            if args[0] == args[1]:
                return args[0]
            args = tuple(sorted(args, key=self.keyof))
        if name == "abs":
            return self._abs(args[0])
        return self._call(name, args)

    def _call(self, name: str, args: tuple[int, ...]) -> int:
        return self._node(CALL, (name, args))

    def _abs(self, a: int) -> int:
        """abs(c*m) is |c|*abs(m), abs(x**2) is x**2, abs(abs(x)) is abs(x); a quotient keeps
        its number inside (abs(2/x), not 2*abs(1/x): fewer nodes)."""
        c, f = self.prodform(a)
        if all(e % 2 == 0 for e in f.values()):
            return self.mul(self.num(abs(c)), self.from_prod(1.0, f))
        if any(e < 0 for e in f.values()):
            return self._call("abs", (self.from_prod(abs(c), f),))
        mono = self.from_prod(1.0, f)
        if not (self.kind[mono] == CALL and self.data[mono][0] == "abs"):
            mono = self._call("abs", (mono,))
        return self.mul(self.num(abs(c)), mono)


# ---- the stub read straight into the algebraic form ---------------------------------------------
_OPCODES: dict[str, tuple[str, object]] = {}      # opcode -> (what it computes, its table row)
_FOLDED: dict[tuple, float] = {}                   # (opcode, operand values) -> folded result
_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "min": "fmin",
           "max": "fmax"}


def _opcode(opcode: str) -> tuple[str, object]:
    """What a stub's instruction computes, as :func:`formula.formula` prints it."""
    got = _OPCODES.get(opcode)
    if got is not None:
        return got
    try:
        row = TABLE.by_opcode(opcode)
    except UnknownInstructionError:
        raise SearchError(f"simplified: the stub uses {opcode!r}, which has no formula form") \
            from None
    parts = row.name.split(".")
    base = parts[0]
    if len(row.results) != 1 or any(w != 1 for w in row.operand_widths):
        what = ""
    elif base in _BINARY or base in ("neg", "rcp", "rsqrt", "copysign", "ex2", "lg2", "fma"):
        what = _BINARY.get(base, base)
    elif base == "cvt" and parts[1] in CVT:
        what = CVT[parts[1]]
    else:
        what = FUNCS.get(base, "")
    if not what:
        raise SearchError(f"simplified: instruction {row.name!r} has no formula form")
    _OPCODES[opcode] = got = (what, row)
    return got


_ROUND_NEAREST = {"add.rn.f32": float.__add__, "sub.rn.f32": float.__sub__,
                  "mul.rn.f32": float.__mul__, "div.rn.f32": float.__truediv__,
                  "add.rn.f64": float.__add__, "sub.rn.f64": float.__sub__,
                  "mul.rn.f64": float.__mul__, "div.rn.f64": float.__truediv__}


def _fold(opcode: str, row, values: tuple[float, ...], npt) -> float:
    """The instruction on constants, with the table's semantics (bit-exact), cached. Finite
    ``.rn`` arithmetic of a finite result runs as Python floats: IEEE double, rounded once more
    to f32 for an f32 row (exact: double rounding is innocuous for + - * / from 53 to 24 bits);
    the rest (and any inf, NaN or f32 overflow) runs the table's semantics."""
    f = _ROUND_NEAREST.get(opcode)
    if f is not None and all(math.isfinite(v) for v in values):
        try:
            got = f(*values)
            if opcode[-3:] == "f32":
                got = struct.unpack(">f", struct.pack(">f", got))[0]
            if math.isfinite(got):
                return got
        except (ZeroDivisionError, OverflowError):
            pass
    key = (opcode, tuple(v.hex() for v in values))
    got = _FOLDED.get(key)
    if got is None:
        if len(_FOLDED) > 65536:
            _FOLDED.clear()
        out = row.apply(*[np.asarray([v], npt) for v in values])
        got = _FOLDED[key] = float(np.asarray(out).reshape(-1)[0])
    return got


def parse_stub(text: str, alg: Alg, memo: dict) -> int:
    """The algebraic form of a compiled stub (a node of ``alg``; ``memo`` maps (what, macro,
    *operand nodes) to the node an instruction made, kept as long as ``alg``): its statements in
    order, constant-only instructions folded bit-exactly (the table's semantics), the
    ``exp``/``log`` macros recognised by their exact constants (``ex2(x*log2(e))``,
    ``lg2(x)*ln(2)``), the rest built by :class:`Alg`."""
    regs = _Regs(alg)
    consts: dict[str, float] = {}                  # register -> its exact constant value
    scaled: dict[str, tuple] = {}                  # register -> (x, c): x * c, |c| = log2(e)
    out = None
    node, kind, data = alg._node, alg.kind, alg.data
    for d in _statements(text):
        if d[0] is None:                           # mov: (None, dest, source register, value)
            _, dest, src, v = d
            if src is not None:
                if src in consts:
                    consts[dest] = consts[src]
                value = regs[src]
            else:
                consts[dest] = v
                value = node(NUM, v + 0.0 if v == v else "nan")
            if dest == "%y":
                out = value
            regs[dest] = value
            continue
        if len(d) == 2:                            # (exception, None): a statement unread
            raise d[0]
        what, row, opcode, dest, args = d
        consts.pop(dest, None)
        if scaled:
            scaled.pop(dest, None)
        for r in args:
            if r not in consts:
                break
        else:
            consts[dest] = v = _fold(opcode, row, tuple([consts[r] for r in args]), alg.np)
            regs[dest] = node(NUM, v + 0.0 if v == v else "nan")
            continue
        a = [regs[r] for r in args]
        if what == "mul":                          # x*c, c*x with |c| log2(e) (finite)
            if kind[a[1]] == NUM and data[a[1]] != "nan" and abs(data[a[1]]) == alg.log2e:
                scaled[dest] = (a[0], data[a[1]])
            if kind[a[0]] == NUM and data[a[0]] != "nan" and abs(data[a[0]]) == alg.log2e:
                scaled[dest] = (a[1], data[a[0]])
        macro = scaled.get(args[0]) if what == "ex2" else None
        key = (what, macro, *a)
        got = memo.get(key)
        if got is None:
            got = memo[key] = _build(alg, what, a, macro)
        regs[dest] = got
    if out is None:
        raise SearchError("simplified: the stub writes no output %y")
    return out


_STATEMENT = re.compile(r"^\s*([a-z][\w.]*)\s+([^;]*?)\s*;", re.M)
_LINE = re.compile(r"([a-z][\w.]*)\s+([^;]*?)\s*;")         # one statement, one line
_CONSTANTS: dict[str, float] = {}
_LINES: dict[str, tuple] = {}                      # a stub's line -> what parse_stub reads
_MOV_HEADS: dict[str, str] = {}                    # 'mov.f32 %_s3' -> '%_s3' (its constants')
_SKIP = ()                                         # a line without a statement


def _statements(text: str) -> list[tuple]:
    """The statements ``_STATEMENT.findall`` finds in a stub, each as :func:`_decode` reads
    it; one that cannot be read is ``(exception, None)`` and ends the list (parse_stub raises
    it there). Read line by line, a line's reading cached (a constant's mov by its head), where
    each line is blank, starts with neither a space nor a statement (``{``, ``.reg ...;``) or
    is one statement (``add.rn.f32 %_s2, %_s0, %x0;``): there the pattern finds the same."""
    lines, heads, constant, out = _LINES, _MOV_HEADS, _constant, []
    try:
        for line in _body(text).split("\n"):
            d = lines.get(line)
            if d is None:
                k = line.rfind(", ")               # a constant's mov: 'mov.f32 %_s3, 0f3F800000;'
                src = line[k + 2:-1]
                dest = heads.get(line[:k]) if line[-1:] == ";" and src.isalnum() else None
                if dest is not None:
                    d = (None, dest, None, constant(src))
                else:
                    d = _line(line)
                    if d is None:
                        return _statements_of(text)
            if d:
                out.append(d)
    except Exception as e:                         # noqa: BLE001 - raised where it was met
        out.append((e, None))
    return out


def _body(text: str) -> str:
    """``text`` past its leading lines of declarations (``{``, ``.reg .f32 %_s0;``, ...) when
    no statement starts on them (each starts with ``{`` or ``.``), else all of it."""
    i = text.rfind("\n.reg ")
    if i < 0 or text[:1] not in ("{", "."):
        return text
    j = text.find("\n", i + 1)
    if j < 0 or text.count("\n", 0, j) != text.count("\n.", 0, j):
        return text
    return text[j + 1:]


def _line(line: str) -> tuple | None:
    """One line of a stub read (:func:`_statements`): its statement decoded, :data:`_SKIP`,
    or None where the line is not of the plain forms."""
    c = line[:1]
    if not c or not (c.isspace() or "a" <= c <= "z"):
        got = _SKIP                                # no statement starts on this line
    else:
        m = _LINE.fullmatch(line) if "a" <= c <= "z" and line.count(";") == 1 else None
        if m is None:
            return None
        got = _decode(m.group(1), m.group(2))
        if got[0] is None and got[2] is None:      # a constant's mov: not kept, its head is
            k = line.rfind(", ")
            if m.group(2) == got[1] + line[k:-1] and line[k + 2:-1].isalnum():
                if len(_MOV_HEADS) > 65536:
                    _MOV_HEADS.clear()
                _MOV_HEADS[line[:k]] = got[1]
            return got
    if len(_LINES) > 65536:
        _LINES.clear()
    _LINES[line] = got
    return got


def _statements_of(text: str) -> list[tuple]:
    """:func:`_statements` read by the pattern (no cache)."""
    out = []
    try:
        for opcode, rest in _STATEMENT.findall(text):
            out.append(_decode(opcode, rest))
    except Exception as e:                         # noqa: BLE001 - raised where it was met
        out.append((e, None))
    return out


def _decode(opcode: str, rest: str) -> tuple:
    """A statement as :func:`parse_stub` reads it: ``(None, dest, source register or None,
    constant or None)`` for a ``mov``, else ``(what, table row, opcode, dest, sources)``."""
    ops = rest.split(", ")
    if opcode[:4] == "mov.":
        dest, src = ops
        return (None, dest, src, None) if src[0] == "%" else (None, dest, None, _constant(src))
    what, row = _opcode(opcode)
    return what, row, opcode, ops[0], tuple(ops[1:])


class _Regs(dict):
    """Registers -> algebraic nodes; an input's register ``%name`` reads as the input."""

    def __init__(self, alg: Alg):
        super().__init__()
        self.alg = alg

    def __missing__(self, reg: str) -> int:
        name = reg[1:]
        if name not in self.alg.index:
            raise SearchError(f"simplified: the stub reads {reg!r}, which no instruction wrote")
        self[reg] = i = self.alg.var(name)
        return i


def _constant(src: str) -> float:
    """A stub's constant operand (``0f3F800000``, ``0d3FF0000000000000``) as a float."""
    got = _CONSTANTS.get(src)
    if got is None:
        if len(_CONSTANTS) > 65536:
            _CONSTANTS.clear()
        try:
            if src[:2] == "0f" and len(src) == 10:
                got = struct.unpack(">f", bytes.fromhex(src[2:]))[0]
            elif src[:2] == "0d" and len(src) == 18:
                got = struct.unpack(">d", bytes.fromhex(src[2:]))[0]
        except ValueError:
            pass
        if got is None:
            raise SearchError(f"simplified: unexpected constant {src!r} in the stub")
        _CONSTANTS[src] = got
    return got


def _build(alg: Alg, what: str, a: list[int], scaled: tuple | None) -> int:
    """One instruction (not all of its operands constants) in algebraic form; ``scaled``: its
    one operand is ``x*c`` with ``|c|`` log2(e) in the dtype (so ``ex2`` is ``exp(±x)``)."""
    if what == "mul":
        for x, c in ((0, 1), (1, 0)):        # lg2(v)*ln(2) is log(v), as the macro builds it
            if alg.kind[a[x]] == CALL and alg.data[a[x]][0] == "log2" \
                    and alg.finite(a[c]) == alg.ln2:
                return alg.call("log", alg.data[a[x]][1])
        return alg.mul(a[0], a[1])
    if what == "ex2":
        if scaled is not None:
            x, v = scaled
            return alg.call("exp", (x if v > 0 else alg.scale(x, -1.0),))
        return alg.call("exp2", a)
    if what == "lg2":
        return alg.call("log2", a)
    if what in ("add", "sub"):
        return alg.add(a[0], a[1], 1.0 if what == "add" else -1.0)
    if what == "div":
        return alg.mul(a[0], alg.inv(a[1]))
    if what == "neg":
        return alg.scale(a[0], -1.0)
    if what == "rcp":
        return alg.inv(a[0])
    if what == "rsqrt":
        return alg.inv(alg.call("sqrt", a))
    if what == "fma":
        return alg.add(alg.mul(a[0], a[1]), a[2])
    if what == "copysign":                       # PTX copysign d, a, b: b with a's sign
        return alg.call("copysign", (a[1], a[0]))
    return alg.call(what, a)


def reachable(alg: Alg, top: int) -> set[int]:
    """The nodes under ``top``, ``top`` too."""
    return set(alg.missing(top, {}))
