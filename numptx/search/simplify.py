"""Simplified formulas of search programs and their complexity (issue 26, item 3).

:func:`simplified` prints a program as text in :mod:`numptx.search.formula`'s grammar (so
:func:`~numptx.search.formula.evaluate` and the exporters read it), in one of two modes::

    from numptx.search.simplify import simplified, complexity, complexities
    simplified(prog, genes)                  # 'x0*(0.5*x0 + 0.99999*sin(x1))'
    simplified(prog, genes, exact=True)      # 'x0*(0.595191*(0.840067*x0) + 0.99999*sin(x1))'
    complexity(prog, genes)                  # 9
    complexities(progs, genes)               # numpy int64 array, one per program

- ``exact=True``: :func:`~numptx.search.formula.formula`'s text (dead ops gone, constants folded
  with the instruction table's semantics, the op macros as ``exp``/``log``, the signed-zero
  rules) with rewrites that keep every bit: the operands of ``+``, ``*``, ``fmax``, ``fmin``
  and the product of ``fma`` in canonical order (``a - b`` read as ``a + -b``, IEEE's
  definition, so ``-0.09 - x`` and ``-x - 0.09`` are one text), and ``x*x**n`` as ``x**(n+1)``
  (``evaluate`` computes ``x**n`` as ``((x*x)*x)*...``, left to right, so ``x*(x*x)`` is
  ``x**3`` bit for bit, up to ``formula.MAX_POWER`` (64: ``x*x**64`` stays, since evaluate
  reads a larger power with ``numpy.power``); ``(x*x)*(x*x)`` rounds differently and stays
  ``(x**2)**2``). The text evaluates bit for bit like the program wherever ``formula``'s does
  (its docstring lists where not: directed rounding, ``.ftz``, the approximate rows, ``fma``
  in f64).
- ``exact=False`` (the default): the algebra of real numbers. Sums and products are flattened
  across their chains, like terms and like factors merged, constants combined in float64
  (where that would overflow, as ``1e200*(1e200*x)`` or ``x/(5e-324*y)``, they stay apart) and
  printed with ``digits`` digits (more where a number would print as a bare 1: ``1.000004*x``).
  These rewrites are *equal in exact arithmetic* but not bit for bit:

  ===================================  ===================================================
  rewrite                              where the text can differ from the program
  ===================================  ===================================================
  ``x*0.84*0.59`` -> ``0.4956*x``      rounding (one product for two)
  ``x/0.5`` -> ``2*x``                 rounding of the constant's reciprocal
  ``(x + y) - y`` -> ``x``             rounding; y = inf or NaN (the program gives NaN)
  ``x - x`` -> ``0``, ``0*x`` -> ``0``  x = inf or NaN (the program gives NaN)
  ``x/x`` -> ``1``, ``x/x**2`` ->       x = 0, inf or NaN (the program gives NaN, or inf
  ``1/x``                              for ``x/x**2`` at 0: same)
  ``fma(a, b, c)`` -> ``a*b + c``      rounding (two roundings for one)
  ``abs(-2*x)`` -> ``2*abs(x)``,       rounding
  ``abs(x**2)`` -> ``x**2``
  ``sin(x - x)`` -> ``0``              a function of constants folds in float64
  any zero                             its sign (``-0.0`` is ``0``)
  ``x + x`` -> ``2*x``, ``x*x*x`` ->    exact (as in ``exact=True``)
  ``x**3``, ``(x + 1)*2`` ->
  ``2*(x + 1)``
  ===================================  ===================================================

  A number times a sum stays a product (``2*(x + 1)``, never ``2*x + 2``: distributing adds
  nodes), as does a sum added to itself (``2*(x + 1)``); a sum added to another is merged term
  by term. A product of powers with a common exponent prints as one power (``(x*y)**2``,
  ``(x/y)**2``); a function's arguments are simplified and the function kept (``exp(log(x))``
  stays). A sum is led by its first term of positive coefficient (``y - x``), else by its
  number (``2 - x``), else by a term of coefficient other than -1 (``-2*y - x``).

Canonical order (both modes; a total order, so programs equal up to the order of commutative
operands print one text): numbers, then inputs (in the genes' order), then powers and
products, then function calls (by name, then arguments), then sums; a sum's number comes last
(``x0 + 1``), a product's first (``2*x0``).

:func:`complexity` is the number of distinct nodes of the ``exact=False`` expression as its text
reads: each input, each number, each operator (``+``, ``-``, ``*``, ``/``, unary ``-``), each
function call, ``x**n`` one node with its base (``n`` is no node), ``1/x`` one with its
denominator (the ``1`` is no node), a negative number one node; a subexpression that occurs
twice (the program computes it once and uses it twice, with ``dup``) counts once. So
``x0*(0.5*x0 + 0.99999*sin(x1))`` is 9 (x0, 0.5, 0.5*x0, 0.99999, x1, sin(x1),
0.99999*sin(x1), +, *) and programs that print the same text at full precision
(``digits=17``: every number round-trips) have the same complexity, whatever dead ops or
lengths they have. At fewer digits two numbers can print alike and still count as two: the
default text ``0.5*x0 + 0.5*x1`` is 6 nodes (one number used twice) when both are 0.5, and 7
when one is 0.500000119. A program of the search's op names counts at most its
live words (pushes, dups and instruction words that reach the output; 1 for an empty program)
plus one per ``fma`` (one word, two operations), except where ``dup`` feeds a sum into a sum
that contains it (``s + (t + s)`` with ``s = x + 1`` merges to ``2*x + t + 2``).

Cost: :func:`complexities` compiles its programs in one ``sp.compile_many`` batch and reads
each stub into the algebraic form (:mod:`numptx.search.algebra`) in Python. It keeps, per
genes, the subexpressions, stub lines and texts it has seen (bounded, thread-safe; results
never depend on it), so a child that shares subexpressions with its parents costs less; a
child whose constants were all refitted shares only its constant-free ones. Measured on one
CPU core of a shared 2-core development machine (CPU time): the 5,140 programs a 500x80 search's fronts measure
(in 81 batches, the cache warm from one batch to the next; Keijzer-11, Feynman-I.18.4,
Nguyen-4) cost 125-165 us a program; 500 final programs on a fresh cache (46-54
statements each) 175-275 us; ``sp.compile_many`` is about 4 us of it.
"""
from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import numpy as np

from .. import stack_ptx as sp
from .algebra import CALL, NUM, PROD, SUM, VAR, Alg, digest, fdig, fkey, make_key, parse_stub, sdig
from .formula import ATOM, MAX_POWER, MUL, POW, UNARY, Dag, Printer, check_digits, fmt_num, \
    stub_dag
from .genes import Genes, SearchError

__all__ = ["simplified", "simplified_of_stub", "complexity", "complexities"]


class _Cache:
    """One genes' algebraic nodes, kept across programs: a search's children share most of
    their subexpressions with their parents, so most instructions are found in ``memo``
    (``(what, macro, *operand nodes) -> node``) and most roots in ``count``. Results do not
    depend on what the cache holds (nodes are interned structurally)."""

    def __init__(self, genes: Genes):
        self.alg = Alg(genes)
        self.memo: dict[tuple, int] = {}
        self.low = _Lower(self.alg)
        self.count: dict[int, int] = {}
        self.by_text: dict[str, int] = {}
        self.lock = threading.Lock()


_CACHES: dict[tuple, _Cache] = {}
_CACHE_NODES = 100_000          # a cache past this many nodes is dropped and started afresh
_CACHE_TEXTS = 20_000           # stub texts remembered with their complexity (~10 MB)


def _cache(genes: Genes) -> _Cache:
    k = (genes.dtype, genes.names)
    got = _CACHES.get(k)
    if got is None or len(got.alg.kind) > _CACHE_NODES or len(got.low.dag.nodes) > _CACHE_NODES:
        if got is None and len(_CACHES) >= 8:
            _CACHES.clear()
        got = _CACHES[k] = _Cache(genes)
    return got


def _reachable(dag: Dag, root: int) -> set[int]:
    seen, todo = {root}, [root]
    nodes = dag.nodes
    while todo:
        for c in nodes[todo.pop()][1]:           # a number's or an input's args are ()
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return seen


# ---- back to text: a DAG the formula printer prints ------------------------------------------------
class _Nodes:
    """Interned (op, child ids, value) nodes, as :class:`formula.Dag` holds them for the
    printer, without its simplification."""

    def __init__(self):
        self.nodes: list[tuple] = []
        self._intern: dict[tuple, int] = {}

    def add(self, op: str, args: tuple[int, ...] = (), value=None) -> int:
        key = (op, args, value)
        i = self._intern.get(key)
        if i is None:
            i = self._intern[key] = len(self.nodes)
            self.nodes.append(key)
        return i

    def num(self, v: float) -> int:
        return self.add("num", (), v)


class _Lower:
    """The algebraic form as binary nodes (plus ``pow`` and ``inv``) the formula printer
    prints, sums and products left to right in canonical order."""

    def __init__(self, alg: Alg):
        self.alg = alg
        self.dag = _Nodes()
        self.memo: dict[int, int] = {}

    def lower(self, ids: Sequence[int]) -> None:
        """Lower nodes ``ids`` in turn, each after the nodes under it (ascending ids: a
        child's id is below its parent's); those lowered already are left."""
        memo, add, kinds, datas = self.memo, self.dag.add, self.alg.kind, self.alg.data
        for i in ids:
            if i in memo:
                continue
            kind, data = kinds[i], datas[i]
            if kind == SUM:
                c, terms = data
                k, m = terms[0]
                if c == 0 and len(terms) == 1 and k != 1 and k != -1 and kinds[m] != PROD:
                    r = add("*", (add("num", (), k), memo[m]))   # as term() makes k*m
                else:
                    r = self.sum(c, terms)
            elif kind == CALL:
                r = add("call", tuple([memo[a] for a in data[1]]), data[0])
            elif kind == PROD:
                r = self.product(1.0, data)
            elif kind == NUM:
                r = add("num", (), math.nan if data == "nan" else data)
            else:
                r = add("var", (), data)
            memo[i] = r

    def product(self, coeff: float, factors: tuple) -> int:
        """``coeff`` times the factors: ``c*a*b**2/(d*e)``; exponents of a common divisor
        g > 1 as one power, ``(x*y)**2`` (not ``x**2*y**2``), ``(x/y)**2``."""
        dag = self.dag
        g = math.gcd(*[e for _b, e in factors]) if len(factors) > 1 else 1
        if g > 1:
            inner = self.product(1.0, tuple((b, e // g) for b, e in factors))
            p = dag.add("pow", (inner,), g)
            return p if coeff == 1 else dag.add("*", (dag.num(coeff), p))
        up = [dag.add("num", (), coeff)] if coeff != 1 else []
        down = []
        memo = self.memo
        for b, e in factors:
            x = memo[b]
            p = x if abs(e) == 1 else dag.add("pow", (x,), abs(e))
            (up if e > 0 else down).append(p)
        top = self.chain("*", up)
        if not down:
            return top
        bottom = self.chain("*", down)
        return dag.add("inv", (bottom,)) if top is None else dag.add("/", (top, bottom))

    def chain(self, op: str, items: list[int]) -> int | None:
        acc = items[0] if items else None
        for x in items[1:]:
            acc = self.dag.add(op, (acc, x))
        return acc

    def term(self, k: float, m: int) -> int:
        if k == 1:
            return self.memo[m]
        if k == -1:
            return self.dag.add("neg", (self.memo[m],))
        if self.alg.kind[m] == PROD:
            return self.product(k, self.alg.data[m])
        add = self.dag.add
        return add("*", (add("num", (), k), self.memo[m]))

    def sum(self, c: float, terms: tuple) -> int:
        """The terms in canonical order and the number last (``x - y + 2``), but led by the
        first term of a positive coefficient (``y - x``), else by the number (``2 - x``),
        else by a term of a coefficient other than -1 (``-2*y - x``), so no sum starts with
        a negation it can do without."""
        add, term = self.dag.add, self.term
        lead = 0 if terms[0][0] > 0 else next((j for j, (k, _m) in enumerate(terms) if k > 0),
                                              None)
        if lead is None and c != 0:
            acc, rest, c = add("num", (), c), terms, 0.0
        else:
            if lead is None:                     # -4.2*x - y: a number's sign costs no node
                lead = next((j for j, (k, _m) in enumerate(terms) if k != -1), 0)
            acc, rest = term(*terms[lead]), terms[:lead] + terms[lead + 1:]
        for k, m in rest:
            acc = add("-", (acc, term(-k, m))) if k < 0 else add("+", (acc, term(k, m)))
        if c != 0:
            acc = add("-", (acc, add("num", (), -c))) if c < 0 else \
                add("+", (acc, add("num", (), c)))
        return acc


class _PowPrinter(Printer):
    """:class:`formula.Printer` with ``x**n`` (``pow``, n an int >= 2) and ``1/x`` (``inv``)."""

    def _emit(self, i: int, kids: list[tuple[str, int]]) -> tuple[str, int]:
        op, _args, v = self.dag.nodes[i]
        if op == "num" and abs(v) != 1:
            s = fmt_num(v, self.digits)
            d = self.digits
            while s in ("1", "-1") and d < 17:       # 1.000004*x never prints as 1*x
                d += 1
                s = fmt_num(v, d)
            return s, UNARY if s.startswith("-") else ATOM
        if op == "pow":
            t, p = kids[0]
            return (f"({t})**{v}" if p <= POW else f"{t}**{v}"), POW
        if op == "inv":
            t, p = kids[0]
            return (f"1/({t})" if p <= MUL else f"1/{t}"), MUL
        return super()._emit(i, kids)


# ---- the exact mode: the printer's DAG in canonical order ------------------------------------------
_COMMUTATIVE_CALLS = frozenset({"fmax", "fmin"})


class _Exact:
    """The canonical DAG of the exact mode: a :class:`formula.Dag` (no simplification) whose
    nodes carry structural keys (:func:`algebra.make_key`) for the canonical order."""

    def __init__(self, genes: Genes):
        self.index = {n: j for j, n in enumerate(genes.names)}
        self.dag = Dag(genes, False)
        self.key: dict[int, tuple] = {}
        self.depth: dict[int, int] = {}
        self.dig: dict[int, int] = {}

    def put(self, op: str, args: tuple[int, ...] = (), v=None) -> int:
        j = self.dag.add(op, args, v)
        if j not in self.key:
            key, dig = self.key, self.dig
            if op == "num":
                rank, shallow, part = NUM, (fkey(v),), fdig(v)
            elif op == "var":
                rank, shallow, part = VAR, (self.index[v],), self.index[v]
            elif op == "pow":
                rank, shallow, part = PROD, (key[args[0]], v), v
            elif op == "call":
                rank, shallow, part = CALL, (v, tuple(key[c] for c in args)), sdig(v)
            else:
                rank, shallow, part = SUM, (op, tuple(key[c] for c in args)), sdig(op)
            depth = 1 + max(self.depth[c] for c in args) if args else 0
            h = digest(rank, part, *[dig[c] for c in args])
            key[j], self.depth[j], dig[j] = make_key(rank, shallow, depth, h), depth, h
        return j

    def num(self, v: float) -> int:
        return self.put("num", (), v)


def _canonical_exact(dag: Dag, root: int, genes: Genes) -> tuple[Dag, int]:
    """``dag`` with commutative operands in canonical order and ``x*x**n`` as ``x**(n+1)``:
    rewrites that keep every bit (see the module docstring)."""
    ex = _Exact(genes)
    out: dict[int, int] = {}
    for i in sorted(_reachable(dag, root)):
        op, args, v = dag.nodes[i]
        a = [out[c] for c in args]
        if op in ("num", "var"):
            out[i] = ex.put(op, (), v)
        elif op == "sq":
            out[i] = ex.put("pow", (a[0],), 2)
        elif op in ("+", "-"):
            out[i] = _exact_sum(ex, op, a)
        elif op == "*":
            out[i] = _exact_product(ex, a)
        elif op == "call":
            if v in _COMMUTATIVE_CALLS or v == "fma":
                a[:2] = sorted(a[:2], key=ex.key.__getitem__)
            out[i] = ex.put("call", tuple(a), v)
        else:
            out[i] = ex.put(op, tuple(a), v)
    return ex.dag, out[root]


def _exact_product(ex: _Exact, a: list[int]) -> int:
    for x, y in ((a[0], a[1]), (a[1], a[0])):
        ny = ex.dag.nodes[y]
        # x * x**n is x**(n+1), bit for bit, as far as evaluate multiplies powers out
        if ny[0] == "pow" and ny[1][0] == x and ny[2] < MAX_POWER:
            return ex.put("pow", (x,), ny[2] + 1)
    return ex.put("*", tuple(sorted(a, key=ex.key.__getitem__)))     # numbers first: 2*x


def _exact_sum(ex: _Exact, op: str, a: list[int]) -> int:
    """``a0 + a1`` or ``a0 - a1`` as a sum of two signed terms in canonical order (IEEE's
    ``a - b`` is ``a + -b`` bit for bit): positive terms first, numbers last, so
    ``-0.09 + -x``, ``-x - 0.09`` and ``-x + -0.09`` all print ``-x - 0.09``."""
    terms = []
    for j, c in enumerate(a):
        node = ex.dag.nodes[c]
        neg = j == 1 and op == "-"
        if node[0] == "neg":
            neg, c = not neg, node[1][0]
        elif node[0] == "num" and not math.isnan(node[2]) and math.copysign(1.0, node[2]) < 0:
            neg, c = not neg, ex.num(-node[2])
        terms.append((neg, ex.key[c][0] == NUM, ex.key[c], c))
    (n0, _, _, c0), (n1, _, _, c1) = sorted(terms)
    if n0:
        node = ex.dag.nodes[c0]
        c0 = ex.num(-node[2]) if node[0] == "num" else ex.put("neg", (c0,))
    return ex.put("-" if n1 else "+", (c0, c1))


# ---- public ----------------------------------------------------------------------------------------
def _check_genes(genes) -> Genes:
    if not isinstance(genes, Genes):
        raise SearchError(f"genes={genes!r}: give a numptx.search.genes.Genes")
    return genes


def _stubs(programs, genes: Genes) -> list:
    if isinstance(programs, (str, bytes)) or not isinstance(programs, Sequence):
        raise SearchError(f"programs={programs!r}: give a sequence of programs (lists of "
                          f"Stack PTX ops or sp.encode arrays)")
    try:
        return sp.compile_many(list(programs), genes.inputs, genes.outputs)
    except (sp.ProgramError, TypeError, ValueError) as e:
        raise SearchError(f"programs: {e}") from None


def _lower_fresh(alg: Alg, top: int) -> tuple[_Nodes, int]:
    """The nodes that ``top`` reaches, lowered into a DAG of their own (for the printer)."""
    low = _Lower(alg)
    low.lower(alg.missing(top, {}))                # children first: no recursion
    return low.dag, low.memo[top]


def simplified_of_stub(stub, genes: Genes, *, digits: int = 6, exact: bool = False) -> str:
    """:func:`simplified` of an already compiled stub (``sp.compile(prog, genes.inputs,
    genes.outputs)`` or ``sp.compile_many``)."""
    _check_genes(genes)
    digits = check_digits(digits)
    if not isinstance(exact, (bool, np.bool_)):
        raise SearchError(f"exact={exact!r}: give True (bit-exact rewrites only) or False "
                          f"(the algebra of real numbers)")
    if exact:
        dag, root = stub_dag(str(stub), genes, True)
        dag, root = _canonical_exact(dag, root, genes)
    else:
        cache = _cache(genes)
        with cache.lock:
            top = parse_stub(str(stub), cache.alg, cache.memo)
            dag, root = _lower_fresh(cache.alg, top)
    return _PowPrinter(dag, root, digits).emit(root)[0]


def simplified(program: Sequence, genes: Genes, *, digits: int = 6, exact: bool = False) -> str:
    """``program`` as simplified formula text (see the module docstring): ``exact=True`` keeps
    every bit of :func:`~numptx.search.formula.formula`'s promise, ``exact=False`` applies the
    algebra of real numbers; ``digits`` significant digits per number::

        simplified(prog, genes)                # 'x0**3 + x0**2 + x0'-like text, canonical
    """
    _check_genes(genes)
    return simplified_of_stub(_stubs([program], genes)[0], genes, digits=digits, exact=exact)


def _count(text: str, cache: _Cache) -> int:
    got = cache.by_text.get(text)
    if got is not None:
        return got
    top = parse_stub(text, cache.alg, cache.memo)
    got = cache.count.get(top)
    if got is None:
        low = cache.low
        if top not in low.memo:                    # children first: no recursion
            low.lower(cache.alg.missing(top, low.memo))
        got = cache.count[top] = len(_reachable(low.dag, low.memo[top]))
    if len(cache.by_text) >= _CACHE_TEXTS:
        cache.by_text.clear()
    cache.by_text[text] = got
    return got


def complexities(programs: Sequence, genes: Genes) -> np.ndarray:
    """:func:`complexity` of each program (lists of ops or ``sp.encode`` arrays), compiled in
    one ``sp.compile_many`` batch: an int64 array of ``len(programs)``. Thread-safe; it keeps
    the subexpressions it has seen per genes (a bounded cache), so a search's children, which
    share most of theirs with their parents, cost a few microseconds each."""
    _check_genes(genes)
    stubs = _stubs(programs, genes)
    cache = _cache(genes)
    out = np.empty(len(stubs), np.int64)
    with cache.lock:
        for j, s in enumerate(stubs):
            out[j] = _count(str(s), cache)
    return out


def complexity(program: Sequence, genes: Genes) -> int:
    """The number of distinct nodes of ``program``'s simplified (``exact=False``) expression
    (see the module docstring)::

        complexity(prog, genes)                # 9 for x0*(0.5*x0 + 0.99999*sin(x1))
    """
    return int(complexities([program], genes)[0])
