"""Readable formulas of search programs, their NumPy evaluation, and a dedup key.

:func:`formula` prints what a program computes *as built*: the program is compiled by the C core
(``sp.compile(prog, genes.inputs, genes.outputs)``) and the stub's DAG is printed, so no-ops and
dead code never show. Op macros are recognised (``mul`` by log2(e) then ``ex2`` prints as
``exp(x)``, ``lg2`` then ``mul`` by ln(2) as ``log(x)``), ``x*x`` prints as ``x**2``, ``*1``,
``/1``, ``- 0.0`` and ``+ -0.0`` are dropped (``+ 0.0`` only after a term that is never -0.0: a
square, abs, exp; else ``x + 0`` stays, since -0.0 + 0.0 is +0.0) and constant-only subtrees are
folded with the instruction table's own semantics (so folding is bit-exact). Signed zeros are
kept: a -0.0 constant prints as ``-0.0`` (``1/(x*-0.0)`` is not ``1/(x*0)``)::

    import numpy as np
    from numptx import stack_ptx as sp
    from numptx.search.genes import Genes
    from numptx.search.formula import formula, evaluate, canonical_key

    genes = Genes(["add", "mul", "exp"], 2)
    prog = [sp.input("x0"), *genes.op_words("exp"), sp.input("x1"), sp.dup("f32"),
            *genes.op_words("mul"), *genes.op_words("add")]
    formula(prog, genes)                                  # 'exp(x0) + x1**2'
    evaluate("exp(x0) + x1**2", np.ones((4, 2)), genes)   # float32 array of 4 values

The text is a Python expression over the input names, numbers (``nan``, ``inf`` included) and
the functions ``exp exp2 log log2 sin cos tanh sqrt abs fmax fmin fma copysign rint trunc floor
ceil sat`` (NumPy's names; ``fma(a, b, c)`` is a*b+c rounded once, ``sat`` clamps to [0, 1] with
NaN -> 0); ``x**n`` of an int 2 <= n <= 64 is ``((x*x)*x)*...``, rounded after each product
as the program's ``mul`` s are (:mod:`numptx.search.simplify` prints ``x**3``). A
subexpression shared by a large formula is bound once with ``(_t0 := ...)`` so the text stays
linear in the program size.

:func:`evaluate` reads text of at most :data:`MAX_TEXT` characters nested at most
:data:`MAX_DEPTH` levels (and Python's 200 parentheses) with at most :data:`MAX_NAMES` ``:=``
bindings; past that (or past the memory there is) it raises :class:`FormulaLimitError` naming
the limit. A program printed by :func:`formula` nests a function call per op of a chain of
them: one with more than 200 in a chain (``max_length`` over 200) prints text that Python's
parser cannot read; ``Candidate.predict`` runs any program.

It matches the stub (the emulator) bit for bit for the search's op names, with these
exceptions, where the text cannot say what the instruction does:

- directed-rounding forms (``add.rz.f32``, ``.rm``, ``.rp``) and ``.ftz`` forms print as the
  plain operation (round to nearest, subnormals kept), so results can differ in the last bit or
  on subnormal inputs/results (``.ftz`` flushes them to zero);
- approximate rows print as the exact function: ``rsqrt.approx`` as ``1/sqrt(x)``,
  ``div.approx``/``div.full`` as ``a/b`` (on the device and in the emulator these give 0 for
  ``|b| > 2**126``), ``rcp.approx`` as ``1/x``: a few ulps apart;
- ``fma`` in f64 is evaluated as ``a*b + c`` with two roundings (NumPy has no fused form), in
  f32 through f64 (one rounding in f64, then to f32): either may differ from the fused result
  by an ulp.
"""
from __future__ import annotations

import ast
import hashlib
import math
import re
import sys
import threading
from collections.abc import Sequence

import numpy as np

from .. import stack_ptx as sp
from ..instructions import TABLE, UnknownInstructionError
from .genes import LN2, LOG2E, Genes, SearchError

__all__ = ["formula", "formula_of_stub", "evaluate", "canonical_key", "canonical_keys",
           "FormulaLimitError", "MAX_TEXT", "MAX_DEPTH", "MAX_NAMES", "MAX_POWER"]

#: the longest formula text :func:`evaluate` reads (characters); a printed program of
#: max_length ops stays far below (shared subexpressions are bound once with :=)
MAX_TEXT = 1_000_000
#: the deepest formula :func:`evaluate` reads (levels of its syntax tree: an operator, a call or
#: a sign each add one); Python's own parser stops near this depth too
MAX_DEPTH = 1000
#: the most ``:=`` bindings :func:`evaluate` reads: each keeps an array of ``len(X)`` values to
#: the end, so the bindings bound the memory; a printed program binds at most one per op
#: (``sp.Limits().max_steps``)
MAX_NAMES = sp.Limits().max_steps


class FormulaLimitError(SearchError):
    """A formula past what :func:`evaluate` reads: longer than :data:`MAX_TEXT` characters,
    nested deeper than :data:`MAX_DEPTH` levels or 200 parentheses, with more than
    :data:`MAX_NAMES` ``:=`` bindings, or past the memory there is (``limit``: ``"MAX_TEXT"``,
    ``"MAX_DEPTH"``, ``"parentheses"``, ``"MAX_NAMES"`` or ``"memory"``)."""

    def __init__(self, message: str, *, limit: str):
        self.limit = limit
        super().__init__(message)

# precedence levels of the printed text (Python's)
_ADD, MUL, UNARY, POW, ATOM = 1, 2, 3, 4, 5
_BIN = {"+": _ADD, "-": _ADD, "*": MUL, "/": MUL}
_BIND_SIZE = 40          # a shared subexpression longer than this is bound with :=

# instruction base name -> formula function; binary arithmetic is handled separately
FUNCS = {"sqrt": "sqrt", "sin": "sin", "cos": "cos", "tanh": "tanh", "ex2": "exp2",
          "lg2": "log2", "abs": "abs", "min": "fmin", "max": "fmax", "fma": "fma"}
CVT = {"rni": "rint", "rzi": "trunc", "rmi": "floor", "rpi": "ceil", "sat": "sat"}
_LINE = re.compile(r"^\s*([\w.]+)\s+(.*?);\s*$")


class Dag:
    """Interned expression nodes: (op, child ids, value); ids are topologically ordered."""

    def __init__(self, genes: Genes, simplify: bool):
        self.genes, self.simplify = genes, simplify
        self.np = np.float32 if genes.dtype == "f32" else np.float64
        self.nodes: list[tuple] = []
        self._nnz: list[bool] = []
        self._intern: dict[tuple, int] = {}
        self.log2e, self.ln2 = genes.round(LOG2E), genes.round(LN2)

    def add(self, op: str, args: tuple[int, ...] = (), value=None) -> int:
        # floats keyed by their bits: 0.0 and -0.0 differ, NaN equals NaN
        key = (op, args, value.hex() if isinstance(value, float) else value)
        i = self._intern.get(key)
        if i is None:
            i = self._intern[key] = len(self.nodes)
            self.nodes.append((op, args, value))
            self._nnz.append(not _is_zero(value, -1.0) if op == "num" else
                             op == "sq" or (op == "call" and value in ("abs", "exp", "exp2"))
                             or (op == "+" and any(self._nnz[a] for a in args)))
        return i

    def num(self, v: float) -> int:
        return self.add("num", (), float(v))

    def value(self, i: int) -> float | None:
        op, _, v = self.nodes[i]
        return v if op == "num" else None

    def is_num(self, i: int, v: float) -> bool:
        """Node ``i`` is the number ``v`` (a nonzero value)."""
        x = self.value(i)
        return x is not None and x == v

    # ---- building with simplification
    def instr(self, row, args: list[int]) -> int:
        if self.simplify and all(self.value(a) is not None for a in args):
            ops = [np.asarray([self.value(a)], self.np) for a in args]
            return self.num(float(np.asarray(row.apply(*ops)).reshape(-1)[0]))
        parts = row.name.split(".")
        base = parts[0]
        if base in ("add", "sub", "mul", "div"):
            return self.binop({"add": "+", "sub": "-", "mul": "*", "div": "/"}[base], *args)
        if base == "neg":
            return self.neg(args[0])
        if base == "rcp":
            return self.binop("/", self.num(1.0), args[0])
        if base == "rsqrt":
            return self.binop("/", self.num(1.0), self.call("sqrt", args[0]))
        if base == "copysign":                       # PTX copysign d, a, b: b with a's sign
            return self.call("copysign", args[1], args[0])
        if base == "cvt" and parts[1] in CVT:
            return self.call(CVT[parts[1]], *args)
        if base == "ex2":
            return self.exp2(args[0])
        if base in ("min", "max") and self.simplify and args[0] == args[1]:
            return args[0]
        if base in FUNCS:
            return self.call(FUNCS[base], *args)
        raise SearchError(f"formula: instruction {row.name!r} has no formula form")

    def call(self, name: str, *args: int) -> int:
        return self.add("call", tuple(args), name)

    def neg(self, a: int) -> int:
        if self.simplify and self.nodes[a][0] == "neg":
            return self.nodes[a][1][0]
        return self.add("neg", (a,))

    def exp2(self, a: int) -> int:
        if self.simplify and self.nodes[a][0] == "*":
            p, q = self.nodes[a][1]
            for x, c in ((p, q), (q, p)):
                if self.is_num(c, self.log2e):
                    return self.call("exp", x)
                if self.is_num(c, -self.log2e):
                    return self.call("exp", self.neg(x))
        return self.call("exp2", a)

    def never_negative_zero(self, i: int) -> bool:
        """Node ``i`` is never -0.0 (so ``i + 0.0`` is ``i``): a square, abs, exp, exp2, a
        number other than -0.0, or a sum with such a term (round to nearest: a sum is -0.0 only
        when both terms are). Set as each node is made (children first: no recursion)."""
        return self._nnz[i]

    def binop(self, op: str, a: int, b: int) -> int:
        if not self.simplify:
            return self.add(op, (a, b))
        na, nb = self.nodes[a], self.nodes[b]
        va, vb = self.value(a), self.value(b)
        # exact rewrites only, signed zeros included (a + 0.0 is not a when a is -0.0, but
        # a + -0.0 and a - 0.0 are), so evaluating the formula matches the stub bit for bit
        if op == "+":
            if _is_zero(vb, -1.0) or (_is_zero(vb, 1.0) and self.never_negative_zero(a)):
                return a
            if _is_zero(va, -1.0) or (_is_zero(va, 1.0) and self.never_negative_zero(b)):
                return b
            if a == b:
                return self.add("*", (self.num(2.0), a))
            if nb[0] == "neg":
                return self.binop("-", a, nb[1][0])
            if _negative(vb):                                  # a + -c prints as a - c
                return self.binop("-", a, self.num(-vb))
            if na[0] == "neg":
                return self.binop("-", b, na[1][0])
        elif op == "-":
            if _is_zero(vb, 1.0):
                return a
            if nb[0] == "neg":
                return self.binop("+", a, nb[1][0])
            if _negative(vb):                                  # a - -c is a + c
                return self.binop("+", a, self.num(-vb))
        elif op == "*":
            for x, y in ((a, b), (b, a)):
                if self.is_num(y, 1.0):
                    return x
                if self.is_num(y, -1.0):
                    return self.neg(x)
            if a == b:
                return self.add("sq", (a,))
            for x, y in ((a, b), (b, a)):     # lg2(v) * ln2 is log(v) (as evaluate computes it)
                nx_ = self.nodes[x]
                if nx_[0] == "call" and nx_[2] == "log2" and self.is_num(y, self.ln2):
                    return self.call("log", nx_[1][0])
        elif op == "/":
            if self.is_num(b, 1.0):
                return a
        return self.add(op, (a, b))


def _is_zero(v: float | None, sign: float) -> bool:
    """``v`` is a zero of the sign of ``sign``."""
    return v is not None and v == 0 and math.copysign(1.0, v) == sign


def _negative(v: float | None) -> bool:
    """``v`` is a number with its sign bit set (-0.0 included; NaN never)."""
    return v is not None and not math.isnan(v) and math.copysign(1.0, v) < 0


def stub_dag(text: str, genes: Genes, simplify: bool) -> tuple[Dag, int]:
    """The DAG of a compiled stub and its output node."""
    dag = Dag(genes, simplify)
    regs: dict[str, int] = {f"%{n}": dag.add("var", (), n) for n in genes.names}
    out = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line in "{}" or line.startswith(".reg") or line.startswith("//"):
            continue
        m = _LINE.match(line)
        if not m:
            raise SearchError(f"formula: cannot read stub line {line!r}")
        opcode, operands = m.group(1), [s.strip() for s in m.group(2).split(",")]
        if opcode.startswith("mov."):
            dest, src = operands
            if src.startswith("%"):
                value = regs[src]
            elif src.startswith("0f"):
                value = dag.num(float(np.uint32(int(src[2:], 16)).view(np.float32)))
            elif src.startswith("0d"):
                value = dag.num(float(np.uint64(int(src[2:], 16)).view(np.float64)))
            else:
                raise SearchError(f"formula: unexpected constant {src!r} in stub line {line!r}")
            if dest == "%y":
                out = value
            regs[dest] = value
            continue
        try:
            row = TABLE.by_opcode(opcode)
        except UnknownInstructionError:
            raise SearchError(f"formula: the stub uses {opcode!r}, which has no formula form") \
                from None
        if len(row.results) != 1 or any(w != 1 for w in row.operand_widths):
            raise SearchError(f"formula: instruction {row.name!r} has no formula form")
        regs[operands[0]] = dag.instr(row, [regs[o] for o in operands[1:]])
    if out is None:
        raise SearchError("formula: the stub writes no output %y")
    return dag, out


def fmt_num(v: float, digits: int) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    s = format(v, f".{digits}g")
    return "-0.0" if s == "-0" else s   # a negative zero keeps its sign: 1/-0.0 is -inf


class Printer:
    def __init__(self, dag: Dag, root: int, digits: int):
        self.dag, self.digits = dag, digits
        nodes = dag.nodes
        refs = [0] * len(nodes)
        size = [0] * len(nodes)
        reach = [False] * len(nodes)
        reach[root] = True
        for i in range(root, -1, -1):             # children have smaller ids than parents
            if reach[i]:
                for c in nodes[i][1]:
                    reach[c] = True
                    refs[c] += 1
        for i, (op, args, _v) in enumerate(nodes):
            size[i] = 8 + sum(size[c] for c in args)
        self.bind = {i for i in range(len(nodes)) if reach[i] and refs[i] > 1
                     and size[i] > _BIND_SIZE and nodes[i][0] not in ("num", "var")}
        self.bound: dict[int, str] = {}

    def emit(self, root: int) -> tuple[str, int]:
        """The text and precedence of node ``root``, children left to right (a shared node is
        bound with := where it is first printed). No recursion: an explicit stack, so a chain
        of 4,096 calls needs neither a raised recursion limit nor a thread's C stack."""
        nodes, todo, done = self.dag.nodes, [(root, False)], []
        while todo:
            i, ready = todo.pop()
            if not ready:
                if i in self.bound:
                    done.append((self.bound[i], ATOM))
                    continue
                args = nodes[i][1] if nodes[i][0] not in ("num", "var") else ()
                todo.append((i, True))
                todo.extend((a, False) for a in reversed(args))
                continue
            n = len(nodes[i][1]) if nodes[i][0] not in ("num", "var") else 0
            kids = done[len(done) - n:]
            del done[len(done) - n:]
            text, prec = self._emit(i, kids)
            if i in self.bind:
                name = f"_t{len(self.bound)}"
                self.bound[i] = name
                text, prec = f"({name} := {text})", ATOM
            done.append((text, prec))
        return done[0]

    def _emit(self, i: int, kids: list[tuple[str, int]]) -> tuple[str, int]:
        """Node ``i`` printed from its children's (text, precedence) ``kids``."""
        op, args, v = self.dag.nodes[i]
        if op == "num":
            s = fmt_num(v, self.digits)
            return s, UNARY if s.startswith("-") else ATOM
        if op == "var":
            return v, ATOM
        if op == "call":
            return f"{v}({', '.join(t for t, _p in kids)})", ATOM
        if op == "neg":
            t, p = kids[0]
            return (f"-({t})" if p < UNARY else f"-{t}"), UNARY
        if op == "sq":
            t, p = kids[0]
            return (f"({t})**2" if p <= POW else f"{t}**2"), POW
        prec = _BIN[op]
        (lt, lp), (rt, rp) = kids
        lt = f"({lt})" if lp < prec else lt
        rt = f"({rt})" if rp <= prec else rt          # float + and * are not associative
        sep = " " if prec == _ADD else ""
        return f"{lt}{sep}{op}{sep}{rt}", prec


def check_digits(digits) -> int:
    if isinstance(digits, bool) or not isinstance(digits, (int, np.integer)) \
            or not 1 <= digits <= 17:
        raise SearchError(f"digits={digits!r}: give an int in [1, 17]")
    return int(digits)


def formula_of_stub(stub: str, genes: Genes, *, simplify: bool = True, digits: int = 6) -> str:
    """:func:`formula` of an already compiled stub (from ``sp.compile(prog, genes.inputs,
    genes.outputs)`` or ``sp.compile_many``)."""
    if not isinstance(genes, Genes):
        raise SearchError(f"genes={genes!r}: give a numptx.search.genes.Genes")
    digits = check_digits(digits)
    dag, root = stub_dag(str(stub), genes, bool(simplify))
    return Printer(dag, root, digits).emit(root)[0]


def _compile(prog, genes: Genes):
    if not isinstance(genes, Genes):
        raise SearchError(f"genes={genes!r}: give a numptx.search.genes.Genes")
    try:
        return sp.compile(prog, genes.inputs, genes.outputs)
    except sp.ProgramError as e:
        raise SearchError(f"prog: {e}") from None


def formula(prog: Sequence[sp.Op], genes: Genes, *, simplify: bool = True, digits: int = 6) -> str:
    """Readable infix text of what ``prog`` computes as built (see the module docstring);
    ``digits`` significant digits per number, ``simplify=False`` prints the stub's DAG as is."""
    return formula_of_stub(_compile(prog, genes), genes, simplify=simplify, digits=digits)


def canonical_key(prog: Sequence[sp.Op], genes: Genes) -> bytes:
    """A 16-byte key equal for programs whose built stubs are equal (a hash of the stub text),
    to skip building programs equivalent to one already built."""
    return hashlib.blake2b(str(_compile(prog, genes)).encode(), digest_size=16).digest()


def canonical_keys(progs: Sequence[Sequence[sp.Op]], genes: Genes) -> list[bytes]:
    """:func:`canonical_key` of many programs, compiled in one ``sp.compile_many`` batch."""
    if not isinstance(genes, Genes):
        raise SearchError(f"genes={genes!r}: give a numptx.search.genes.Genes")
    stubs = sp.compile_many(progs, genes.inputs, genes.outputs)
    return [hashlib.blake2b(str(s).encode(), digest_size=16).digest() for s in stubs]


# ---- evaluation ---------------------------------------------------------------------------------
def _via_f64(f):
    def g(x):
        return f(np.asarray(x, np.float64)).astype(x.dtype)
    return g


def _fma(a, b, c):
    if a.dtype == np.float32:       # the f32 product is exact in f64: one rounding (in f64)
        return (a.astype(np.float64) * b + c).astype(np.float32)
    return a * b + c                # f64: no NumPy fma; two roundings


def _sat(a):
    # as cvt.sat computes it: NaN -> +0, -0.0 -> +0 (x + 0.0 is +0.0 for either zero)
    return (np.where(np.isnan(a), a.dtype.type(0), np.clip(a, 0, 1)) + a.dtype.type(0)) \
        .astype(a.dtype)


def _exp(a):
    # as the exp macro computes it: ex2 of a*log2(e) rounded to the dtype, so evaluate()
    # reproduces the built kernel instead of drifting from it where exp amplifies rounding
    c = a.dtype.type(LOG2E)
    return np.exp2((a * c).astype(np.float64)).astype(a.dtype)


def _log(a):
    # as the log macro computes it: lg2 rounded to the dtype, then times ln(2) rounded
    return np.log2(a.astype(np.float64)).astype(a.dtype) * a.dtype.type(LN2)


def _row(name: str, swap: bool = False):
    """The instruction table's ``name.f32``/``.f64`` row on the arguments (``swap``: in PTX's
    operand order, the reverse of the formula's): PTX's signed zeros (max(+0, -0) is +0, min
    -0, in either order; NumPy's fmax/fmin give either), NaN rules (two NaNs: the canonical
    NaN) and copysign's NaN sign (+; NumPy's copysign reads the NaN's sign bit)."""
    def f(a, b):
        row = TABLE[f"{name}.{'f32' if a.dtype == np.float32 else 'f64'}"]
        return np.asarray(row.apply(*((b, a) if swap else (a, b))), a.dtype)
    return f


EVAL_FUNCS = {
    "exp": _exp, "exp2": _via_f64(np.exp2), "log": _log,
    "log2": _via_f64(np.log2), "sin": _via_f64(np.sin), "cos": _via_f64(np.cos),
    "tanh": _via_f64(np.tanh), "sqrt": np.sqrt, "abs": np.abs, "fmax": _row("max"),
    "fmin": _row("min"), "fma": _fma, "copysign": _row("copysign", swap=True),
    "rint": np.rint, "trunc": np.trunc,
    "floor": np.floor, "ceil": np.ceil, "sat": _sat,
}
_ARITY = {"fmax": 2, "fmin": 2, "copysign": 2, "fma": 3}
#: ``x**n`` of an int 2 <= n <= this is read as n-1 products, left to right (the program's
#: ``mul`` s); a larger n is ``numpy.power`` (so the simplifier prints no larger power in its
#: exact text)
MAX_POWER = 64


class Eval:
    """Evaluates a parsed formula without recursion (an explicit stack, children left to
    right, so a ``:=`` binds before the names after it read it): no recursion limit to raise,
    in any thread."""

    def __init__(self, text: str, env: dict[str, np.ndarray], dtype):
        self.text, self.env, self.dtype = text, env, dtype

    def fail(self, what: str):
        shown = repr(self.text) if len(self.text) <= 80 else \
            f"{self.text[:60]!r}... ({len(self.text):,} characters)"
        raise SearchError(f"evaluate: text_or_prog={shown}: {what}")

    def run(self, root):
        todo, values = [(root, False)], []
        while todo:
            node, ready = todo.pop()
            if ready:                         # its children's values are on top of values
                n = len(self._children(node))
                args = values[len(values) - n:]
                del values[len(values) - n:]
                values.append(self._apply(node, args))
                continue
            kids = self._children(node)
            if not kids:
                values.append(self._leaf(node))
                continue
            todo.append((node, True))
            todo.extend((k, False) for k in reversed(kids))
        return values[0]

    def _children(self, node) -> list:
        """The sub-expressions ``node`` computes from (its syntax checked here)."""
        if isinstance(node, ast.Expression):
            return [node.body]
        if isinstance(node, (ast.Constant, ast.Name)):
            return []
        if isinstance(node, ast.NamedExpr):
            return [node.value]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return [node.operand]
        if isinstance(node, ast.BinOp):
            if not isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
                self.fail(f"unsupported operator {type(node.op).__name__}")
            return [node.left, node.right]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            name = node.func.id
            if name not in EVAL_FUNCS:
                self.fail(f"unknown function {name!r}")
            if len(node.args) != _ARITY.get(name, 1):
                self.fail(f"{name}() takes {_ARITY.get(name, 1)} arguments")
            if any(isinstance(a, ast.Starred) for a in node.args):
                self.fail("unsupported syntax Starred")
            return list(node.args)
        self.fail(f"unsupported syntax {type(node).__name__}")

    def _leaf(self, node):
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                self.fail(f"unsupported literal {v!r}")
            if isinstance(v, int) and abs(v) > sys.float_info.max:
                v = math.inf                  # as 1e400 reads (an int literal is >= 0)
            return np.asarray(v, self.dtype)
        if node.id in self.env:
            return self.env[node.id]
        if node.id in ("nan", "inf"):
            return np.asarray(float(node.id), self.dtype)
        self.fail(f"unknown name {node.id!r}")

    def _apply(self, node, args: list):
        if isinstance(node, ast.Expression):
            return args[0]
        if isinstance(node, ast.NamedExpr):
            self.env[node.target.id] = args[0]
            return args[0]
        if isinstance(node, ast.UnaryOp):
            return -args[0] if isinstance(node.op, ast.USub) else args[0]
        if isinstance(node, ast.BinOp):
            a, b = args
            op = node.op
            if isinstance(op, ast.Add):
                return a + b
            if isinstance(op, ast.Sub):
                return a - b
            if isinstance(op, ast.Mult):
                return a * b
            if isinstance(op, ast.Div):
                return a / b
            n = node.right.value if isinstance(node.right, ast.Constant) else None
            if n == 2 or (type(n) is int and 3 <= n <= MAX_POWER):
                out = a * a             # x**n is ((x*x)*x)*..., as the program's muls round
                for _ in range(int(n) - 2):
                    out = out * a
                return out
            return np.power(a, b)
        f = EVAL_FUNCS[node.func.id]
        args = np.broadcast_arrays(*args)
        return np.asarray(f(*[np.asarray(a, self.dtype) for a in args]), self.dtype)


def evaluate(text_or_prog: str | Sequence[sp.Op], X: np.ndarray, genes: Genes) -> np.ndarray:
    """Evaluate a formula (text from :func:`formula`, or a program, printed at full precision)
    with NumPy on the rows of ``X`` (n x len(genes.names), one column per input), in the genes'
    dtype: arithmetic rounds like the GPU's ``.rn`` instructions, functions are computed in
    float64 and rounded, ``exp``/``log`` the way their op macros compute them (``exp2`` of
    ``x*log2(e)``, ``log2(x)*ln(2)``, each step rounded), so the result follows the built kernel.
    Returns an array of n values::

        evaluate("sin(x0) * 2", np.linspace(0, 1, 5)[:, None], Genes(["sin", "mul"], 1))
    """
    if not isinstance(genes, Genes):
        raise SearchError(f"genes={genes!r}: give a numptx.search.genes.Genes")
    dtype = np.float32 if genes.dtype == "f32" else np.float64
    if isinstance(text_or_prog, str):
        text = text_or_prog
    else:
        text = formula(text_or_prog, genes, digits=9 if genes.dtype == "f32" else 17)
    try:
        X = np.asarray(X, dtype=dtype)
    except (TypeError, ValueError):
        raise SearchError(f"X: expected a numeric array of shape (n, {len(genes.names)})") from None
    if X.ndim == 1 and len(genes.names) == 1:
        X = X[:, None]
    if X.ndim != 2 or X.shape[1] != len(genes.names):
        raise SearchError(f"X: shape {X.shape} does not fit (n, {len(genes.names)}): one column "
                          f"per input {', '.join(genes.names)}")
    tree = parse_text(text)
    env = {n: X[:, j] for j, n in enumerate(genes.names)}
    try:
        with np.errstate(all="ignore"):  # no recursion: no limit raised (threads share it)
            out = Eval(text, env, dtype).run(tree)
    except MemoryError:
        raise FormulaLimitError(f"evaluate: the formula's values on {X.shape[0]:,} rows do not "
                                f"fit in memory (evaluate fewer rows at a time)",
                                limit="memory") from None
    return np.broadcast_to(np.asarray(out, dtype), (X.shape[0],)).copy()


_PARSE_LOCK = threading.Lock()


def parse_text(text: str) -> ast.Expression:
    """The syntax tree of a formula within :data:`MAX_TEXT` and :data:`MAX_DEPTH`."""
    shown = repr(text) if len(text) <= 80 else f"{text[:60]!r}... ({len(text):,} characters)"
    if len(text) > MAX_TEXT:
        raise FormulaLimitError(f"evaluate: text_or_prog={shown}: longer than "
                                f"formula.MAX_TEXT = {MAX_TEXT:,} characters", limit="MAX_TEXT")
    deep = (f"evaluate: text_or_prog={shown}: nests deeper than formula.MAX_DEPTH = "
            f"{MAX_DEPTH} levels")
    try:
        # one parse at a time: CPython < 3.13 counts the AST constructor's depth in state the
        # threads share, and two parses at once raise "AST constructor recursion depth mismatch"
        with _PARSE_LOCK:
            tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        if "too many nested parentheses" in str(e.msg):     # the tokenizer's own limit (200)
            raise FormulaLimitError(f"evaluate: text_or_prog={shown}: nests more than 200 "
                                    f"parentheses, the most Python's parser reads",
                                    limit="parentheses") from None
        raise SearchError(f"evaluate: text_or_prog={shown} is not a formula ({e.msg})") \
            from None
    except (RecursionError, MemoryError):       # the parser's stack: deep nesting, not size
        raise FormulaLimitError(f"{deep} (Python's parser ran out of stack)",
                                limit="MAX_DEPTH") from None
    except ValueError as e:          # text Python cannot encode (a lone surrogate, say)
        raise SearchError(f"evaluate: text_or_prog={shown} is not a formula ({e})") from None
    todo, depth, names = [(tree, 0)], 0, 0
    while todo:                                 # no recursion: the depth of any tree
        node, d = todo.pop()
        depth = max(depth, d)
        if depth > MAX_DEPTH:
            raise FormulaLimitError(deep, limit="MAX_DEPTH")
        names += isinstance(node, ast.NamedExpr)
        if names > MAX_NAMES:
            raise FormulaLimitError(f"evaluate: text_or_prog={shown}: binds more than "
                                    f"formula.MAX_NAMES = {MAX_NAMES:,} names with := (each "
                                    f"keeps an array of len(X) values)", limit="MAX_NAMES")
        todo.extend((c, d + 1) for c in ast.iter_child_nodes(node))
    return tree
