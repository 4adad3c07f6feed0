"""Genes: the building blocks evolutionary search assembles Stack PTX programs from.

A :class:`Genes` object fixes the value type (``f32`` or ``f64``), the program inputs, the
constants and the op set. Every gene is a short list of Stack PTX ops: an input push, a constant
push, or the words of one op. Because Stack PTX is resilient (an instruction lacking operands is
a no-op, an empty output reads 0), any concatenation of genes compiles::

    import numpy as np
    from numptx import stack_ptx as sp
    from numptx.search.genes import Genes

    genes = Genes(["add", "mul", "exp"], 2)          # inputs x0, x1; value type f32
    prog = [*genes.op_words("exp")]                  # const(log2 e), mul.rn.f32, ex2.approx.f32
    prog = [sp.input("x0"), *prog, sp.input("x1"), *genes.op_words("add")]
    stub = sp.compile(prog, genes.inputs, genes.outputs)   # y = exp(x0) + x1

Op names (short names; ``-`` means the dtype has no form and asking for it raises SearchError).
Macros use their argument once, so they work on a stack; ``dup`` copies the top (as a gene of
its own, ``dup`` lets one subexpression feed two ops: ``E dup mul`` is E², the program a DAG).

=========  ==================  =====================================  ===================
name       computes            f32 words                              f64 words
=========  ==================  =====================================  ===================
add        a + b               add.rn.f32                             add.rn.f64
sub        a - b               sub.rn.f32                             sub.rn.f64
mul        a * b               mul.rn.f32                             mul.rn.f64
div        a / b               div.rn.f32                             div.rn.f64
fma        a * b + c           fma.rn.f32                             fma.rn.f64
neg        -a                  neg.f32                                neg.f64
abs        abs(a)              abs.f32                                abs.f64
sq         a ** 2              dup, mul.rn.f32                        dup, mul.rn.f64
dup        a, a                dup (the stack's top, twice)           dup
inv        1 / a               rcp.rn.f32                             rcp.rn.f64
sqrt       sqrt(a)             sqrt.rn.f32                            sqrt.rn.f64
max, min   fmax(a,b), fmin     max.f32, min.f32                       max.f64, min.f64
exp        exp(a)              const log2(e), mul.rn, ex2.approx      -
exp2/pow2  2 ** a              ex2.approx.f32                         -
log        log(a)              lg2.approx.f32, const ln(2), mul.rn    -
log2       log2(a)             lg2.approx.f32                         -
sin, cos   sin(a), cos(a)      sin.approx.f32, cos.approx.f32         -
tanh       tanh(a)             tanh.approx.f32                        -
sigmoid    1 / (1 + exp(-a))   const -log2(e), mul.rn, ex2.approx,    -
                               const 1, add.rn, rcp.rn
sqrtabs    sqrt(abs(a))        abs, sqrt.rn                           abs, sqrt.rn
logabs     log(abs(a))         abs, lg2.approx, const ln(2), mul.rn   -
aq         a / sqrt(1 + b**2)  dup, mul.rn, const 1, abs, add.rn,     the same in f64
                               sqrt.rn, div.rn
=========  ==================  =====================================  ===================

Protected forms (:data:`PROTECTED`): ``sqrtabs``, ``logabs`` and ``aq`` (the analytic
quotient of Ni, Drieberg and Rockett, 2013, Operon's ``aq``) are the forms of ``sqrt``, ``log``
and ``div`` that give no NaN for a finite argument: use them where a formula must stay defined
outside the range it was fitted on (``sqrt(cos(x))`` is NaN wherever cos x < 0,
``sqrtabs(cos(x))`` is not). ``logabs(0)`` is -inf, as ``log(0)``; ``aq`` is finite everywhere
(its 1 is a constant the fitting may move, kept positive by the ``abs``: ``a / sqrt(|c| +
b**2)``, infinite only if the fit drives c to 0 and b is 0; with any c it stays one gene,
which variation never cuts, so no bare ``sqrt`` or ``/`` comes out of it). They print as what they compute
(``sqrt(abs(x))``, ``log(abs(x))``, ``x0/sqrt(x1**2 + 1)``). gplearn's protected operators
instead switch to a fixed value near a pole (``div`` gives 1 for ``|b| < 0.001``); numptx's
forms are Operon's, with no branch, so they keep derivatives for the constant fitting.

A full instruction-table name (``"fma.rn.ftz.f32"``, ``"rsqrt.approx.f32"``) is accepted as an op
too when all its operands and results have the genes' dtype.
"""
from __future__ import annotations

import difflib
import keyword
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .. import stack_ptx as sp
from ..errors import NumptxError
from ..instructions import TABLE
from ..stack_ptx import Op

__all__ = ["SearchError", "Genes", "OP_NAMES", "DTYPES", "LOG2E", "LN2", "RESERVED_NAMES",
           "PROTECTED", "MACRO_CONSTANTS", "check_int", "shown", "op_dtypes"]

DTYPES = ("f32", "f64")
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453

# words per op as (kind, value) pairs; "{t}" in an instruction name is the dtype
_BINARY = {"add": "add.rn.{t}", "sub": "sub.rn.{t}", "mul": "mul.rn.{t}", "div": "div.rn.{t}",
           "max": "max.{t}", "min": "min.{t}"}
_MACROS: dict[str, tuple[tuple[str, Any], ...]] = {
    **{k: (("i", v),) for k, v in _BINARY.items()},
    "fma": (("i", "fma.rn.{t}"),),
    "neg": (("i", "neg.{t}"),),
    "abs": (("i", "abs.{t}"),),
    "sq": (("dup", None), ("i", "mul.rn.{t}")),
    "dup": (("dup", None),),
    "inv": (("i", "rcp.rn.{t}"),),
    "sqrt": (("i", "sqrt.rn.{t}"),),
    "exp": (("c", LOG2E), ("i", "mul.rn.{t}"), ("i", "ex2.approx.{t}")),
    "exp2": (("i", "ex2.approx.{t}"),),
    "pow2": (("i", "ex2.approx.{t}"),),
    "log": (("i", "lg2.approx.{t}"), ("c", LN2), ("i", "mul.rn.{t}")),
    "log2": (("i", "lg2.approx.{t}"),),
    "sin": (("i", "sin.approx.{t}"),),
    "cos": (("i", "cos.approx.{t}"),),
    "tanh": (("i", "tanh.approx.{t}"),),
    "sigmoid": (("c", -LOG2E), ("i", "mul.rn.{t}"), ("i", "ex2.approx.{t}"), ("c", 1.0),
                ("i", "add.rn.{t}"), ("i", "rcp.rn.{t}")),
    # the protected forms (PROTECTED)
    "sqrtabs": (("i", "abs.{t}"), ("i", "sqrt.rn.{t}")),
    "logabs": (("i", "abs.{t}"), ("i", "lg2.approx.{t}"), ("c", LN2), ("i", "mul.rn.{t}")),
    "aq": (("dup", None), ("i", "mul.rn.{t}"), ("c", 1.0), ("i", "abs.{t}"), ("i", "add.rn.{t}"),
           ("i", "sqrt.rn.{t}"), ("i", "div.rn.{t}")),
}
OP_NAMES: tuple[str, ...] = tuple(_MACROS)
#: the protected form of each op that can give NaN (or divide by 0) for a finite argument:
#: ``ops=[PROTECTED.get(o, o) for o in ops]`` protects an op set (module docstring)
PROTECTED: Mapping[str, str] = {"sqrt": "sqrtabs", "log": "logabs", "div": "aq"}
_CONST_KINDS = (sp.CONST, sp.CONST64)

# names a formula uses for functions and numbers: an input may not shadow them. ``y`` is not
# one: an input named y shares the register %y with the output of a stub compiled without a
# site (Stack PTX reads every input before it writes the output, so the stub computes the same)
RESERVED_NAMES = frozenset({"exp", "exp2", "log", "log2", "sin", "cos", "tanh", "sqrt", "abs",
                            "fmax", "fmin", "fma", "copysign", "rint", "trunc", "floor", "ceil",
                            "sat", "nan", "inf"})


#: the op macros' own constants, which the search does not fit (exp: log2 e, log: ln 2)
MACRO_CONSTANTS = (LOG2E, -LOG2E, LN2)


def _matches(prog: Sequence[Op], i: int, parts: tuple) -> bool:
    """Whether ``prog[i:]`` starts with a macro's ops (``parts``: each op's bytes, None for
    any constant)."""
    if i + len(parts) > len(prog):
        return False
    return all(prog[i + k].raw == p if p is not None else prog[i + k].word & 0xFF in _CONST_KINDS
               for k, p in enumerate(parts))


class SearchError(NumptxError, ValueError):
    """A bad argument to :mod:`numptx.search` (the message names the argument)."""


def shown(v: Any) -> str:
    """``repr(v)`` for a message; an int too long to print (Python prints at most 4,300
    digits) by its size: ``shown(10 ** 5000)`` is ``'an int of 16610 bits'``."""
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 256:
        return f"an int of {v.bit_length()} bits"
    return repr(v)


def check_int(name: str, v: Any, low: int, high: int | None = None, why: str = "") -> int:
    """``v`` as an int in [low, high] (no upper bound when ``high`` is None); else a
    :class:`SearchError` naming ``name``, the bounds and ``why`` (what the upper bound is)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
        top = "" if high is None else f" and <= {high:,}"
        raise SearchError(f"{name}={shown(v)}: give an int >= {low}{top}")
    if high is not None and v > high:
        raise SearchError(f"{name}={shown(int(v))}: give an int in [{low}, {high:,}]"
                          + (f" ({why})" if why else ""))
    return int(v)


def _table_fits(name: str, dtype: str) -> bool:
    try:
        row = TABLE[name]
    except KeyError:
        return False
    if row.is_special or "bitcast" in row.flags or "volatile" in row.flags:
        return False
    return (all(t == dtype for t in row.operand_types) and all(t == dtype for t in row.result_types)
            and all(w == 1 for w in row.operand_widths + row.result_widths))


def _words(name: str, dtype: str) -> list[Op]:
    """The ops of short op ``name`` for ``dtype`` (KeyError when a table row is missing)."""
    out = []
    for kind, value in _MACROS[name]:
        if kind == "i":
            iname = value.format(t=dtype)
            TABLE.index(iname)                      # raises when the dtype has no such row
            out.append(sp.instr(iname))
        elif kind == "c":
            out.append(sp.const(value, dtype))
        else:
            out.append(sp.dup(dtype))
    return out


def _supports(name: str, dtype: str) -> bool:
    try:
        _words(name, dtype)
        return True
    except KeyError:
        return False


def op_dtypes(name: str) -> tuple[str, ...]:
    """The dtypes of :data:`DTYPES` that op ``name`` (a short name or an instruction-table
    name) has a form in: ``op_dtypes("sin")`` is ``('f32',)``, ``op_dtypes("add")``
    ``('f32', 'f64')``; ``()`` for an unknown name."""
    if name in _MACROS:
        return tuple(t for t in DTYPES if _supports(name, t))
    return tuple(t for t in DTYPES if _table_fits(name, t))


class Genes:
    """The building blocks of programs for one value type: input, constant and op genes.

    ``ops`` are short op names (see the module docstring's table) or full instruction names;
    ``n_inputs`` gives inputs ``x0..x{n-1}``, or ``names=`` names them (ASCII Python
    identifiers other than the formula's function names; ``y`` too: the output's register
    ``%y`` is then that input's, read before the output is written);
    ``constants`` are the constant genes random programs draw from (besides random values);
    ``weights=True`` makes each input gene a weighted input, ``const(1.0) x mul`` (Operon's
    leaves: the weight is a constant the local optimizer fits)::

        genes = Genes(["add", "mul", "sin"], names=["t", "v"], constants=(0.5, 3.0))
        sp.compile(prog, genes.inputs, genes.outputs)        # stub with inputs %t, %v; output %y
        Genes(["add"], 1, weights=True).input_words("x0")   # [const(1.0), input x0, mul]
    """

    def __init__(self, ops: Sequence[str], n_inputs: int | None = None, *,
                 names: Sequence[str] | None = None, dtype: str = "f32",
                 constants: Sequence[float] = (0.5, 1.0, 2.0), weights: bool = False):
        if not isinstance(dtype, str) or dtype.lower() not in DTYPES:
            raise SearchError(f"dtype={dtype!r}: search programs use one of {', '.join(DTYPES)}")
        self.dtype: str = dtype.lower()
        self.names: tuple[str, ...] = self._check_names(n_inputs, names)
        self.ops: tuple[str, ...] = self._check_ops(ops)
        self.constants: tuple[float, ...] = self._check_constants(constants)
        if not isinstance(weights, (bool, np.bool_)):
            raise SearchError(f"weights={shown(weights)}: give True (weighted input genes) or "
                              f"False")
        self.weights: bool = bool(weights)
        # the mul of a weighted input gene (what tokens() matches), None without weights
        self._weight_mul = self.input_words(self.names[0])[2].raw if self.weights else None
        self.inputs: dict[str, str] = {n: self.dtype for n in self.names}
        self.outputs: dict[str, str] = {"y": self.dtype}
        self._words = {name: self._expand(name) for name in self.ops}
        # multi-op genes by their first op's encoded bytes (hashing bytes is far cheaper than
        # an Op): what tokens() matches, longest first, as (length, all the ops' bytes, and
        # each op's bytes with None for a constant the search fits, aq's 1: any value matches)
        self._macros: dict[bytes, list[tuple[int, bytes, tuple | None]]] = {}
        for w in sorted(set(self._words.values()), key=len, reverse=True):
            if len(w) > 1 and all(op.raw for op in w):
                parts = tuple(None if k and op.word & 0xFF in _CONST_KINDS
                              and self._fitted_const(op) else op.raw for k, op in enumerate(w))
                self._macros.setdefault(w[0].raw, []).append(
                    (len(w), b"".join(op.raw for op in w), parts if None in parts else None))

    @property
    def rows(self) -> tuple[str, ...]:
        """The instruction-table rows the genes' words use (sorted names): the rows of every
        program made of them, so a GPU interpreter kernel built for them serves a whole search
        (``numptx.jit.populations.interpret_gpu``'s ``rows=``)."""
        return tuple(sorted({TABLE[(op.word >> 16) & 0xFFFF].name
                             for words in self._words.values() for op in words
                             if (op.word & 0xFF) == sp.INSTR}))

    # ---- validation
    @staticmethod
    def _check_names(n_inputs, names) -> tuple[str, ...]:
        if n_inputs is not None and (isinstance(n_inputs, bool)
                                     or not isinstance(n_inputs, (int, np.integer))
                                     or n_inputs < 1):
            raise SearchError(f"n_inputs={n_inputs!r}: give a positive int (the number of inputs)")
        if names is None:
            if n_inputs is None:
                raise SearchError("Genes: give n_inputs= (inputs x0, x1, ...) or names=")
            return tuple(f"x{i}" for i in range(int(n_inputs)))
        if isinstance(names, str) or not isinstance(names, Sequence):
            raise SearchError(f"names={names!r}: give a sequence of input names, e.g. ['x', 't']")
        names = tuple(names)
        if not names:
            raise SearchError("names=(): a program needs at least one input")
        if n_inputs is not None and int(n_inputs) != len(names):
            raise SearchError(f"n_inputs={n_inputs} but names= has {len(names)} names")
        for n in names:
            fix = ("; numptx.search.prepare.input_names(names) maps any names to usable ones, "
                   "as regress does for a DataFrame's columns")
            if not isinstance(n, str) or not n.isidentifier() or not n.isascii() \
                    or keyword.iskeyword(n) or n.startswith("_"):
                raise SearchError(f"names=: {n!r} is not a usable input name (an ASCII Python "
                                  f"identifier, not a keyword, not starting with '_'){fix}")
            if n in RESERVED_NAMES:
                raise SearchError(f"names=: {n!r} is reserved (a formula function or number "
                                  f"name); pick another input name{fix}")
        if len(set(names)) != len(names):
            raise SearchError(f"names={list(names)!r}: input names must be unique")
        return names

    def _check_ops(self, ops) -> tuple[str, ...]:
        if isinstance(ops, str) or not isinstance(ops, Sequence):
            raise SearchError(f"ops={ops!r}: give a sequence of op names, e.g. ['add', 'mul']")
        ops = tuple(ops)
        if not ops:
            raise SearchError(f"ops=(): the op set is empty; use some of {', '.join(OP_NAMES)}")
        for name in ops:
            if not isinstance(name, str):
                raise SearchError(f"ops=: {name!r} is not an op name")
            if name in _MACROS:
                if not _supports(name, self.dtype):
                    need = [t for t in DTYPES if _supports(name, t)]
                    raise SearchError(f"ops=: op {name!r} has no {self.dtype} form (it needs "
                                      f"dtype {' or '.join(repr(t) for t in need)})")
            elif name in TABLE:
                if not _table_fits(name, self.dtype):
                    row = TABLE[name]
                    raise SearchError(f"ops=: instruction {name!r} ({', '.join(row.operands)} -> "
                                      f"{', '.join(row.results)}) does not take and give only "
                                      f"{self.dtype} values")
            else:
                valid = [n for n in OP_NAMES if _supports(n, self.dtype)]
                rows = [r.name for r in TABLE if _table_fits(r.name, self.dtype)]
                close = difflib.get_close_matches(name, valid + rows, n=4, cutoff=0.6)
                hint = (f"did you mean {', '.join(map(repr, close))}? " if close else "")
                raise SearchError(f"ops=: unknown op {name!r}; {hint}valid {self.dtype} op names: "
                                  f"{', '.join(valid)} (or a full instruction name)")
        if len(set(ops)) != len(ops):
            raise SearchError(f"ops={list(ops)!r}: an op is listed twice")
        return ops

    def _check_constants(self, constants) -> tuple[float, ...]:
        if isinstance(constants, (str, bytes)) or not isinstance(constants, Sequence):
            raise SearchError(f"constants={constants!r}: give a sequence of numbers")
        out = []
        for c in constants:
            try:                 # an int past the float range raises OverflowError in float()
                finite = math.isfinite(float(c))
            except (OverflowError, TypeError, ValueError):
                finite = False
            if isinstance(c, (bool, np.bool_)) or not isinstance(c, (int, float, np.number)) \
                    or not finite:
                raise SearchError(f"constants=: {shown(c)} is not a finite number")
            v = self.round(float(c))
            if not math.isfinite(v):
                raise SearchError(f"constants=: {c!r} is out of the {self.dtype} range")
            out.append(v)
        return tuple(out)

    def _expand(self, name: str) -> tuple[Op, ...]:
        return tuple(_words(name, self.dtype)) if name in _MACROS else (sp.instr(name),)

    # ---- genes
    def round(self, value: float) -> float:
        """``value`` rounded to the genes' dtype, as a Python float."""
        with np.errstate(over="ignore"):
            return float(np.float32(value)) if self.dtype == "f32" else float(value)

    def op_words(self, name: str) -> list[Op]:
        """The Stack PTX ops op gene ``name`` expands to (a fresh list)."""
        try:
            return list(self._words[name])
        except (KeyError, TypeError):
            raise SearchError(f"op_words({name!r}): not an op of these genes; they have "
                              f"{', '.join(self.ops)}") from None

    def const(self, value: float) -> Op:
        """A constant op of the genes' dtype (``value`` rounded to it)."""
        return sp.const(self.round(value), self.dtype)

    def random_constant(self, rng: np.random.Generator) -> float:
        """A constant gene value: one of ``constants`` half the time, else a random short number."""
        if self.constants and rng.random() < 0.5:
            return self.constants[int(rng.integers(len(self.constants)))]
        # + 0.0: a tiny negative draw rounds to -0.0; a gene is never a negative zero
        return self.round(float(np.round(rng.normal(0.0, 2.0), 2))) + 0.0

    def input_words(self, name: str) -> list[Op]:
        """The ops of the input gene of ``name``: its push, or with ``weights`` the weighted
        input ``const(1.0), input, mul``."""
        if not self.weights:
            return [sp.input(name)]
        return [sp.const(1.0, self.dtype), sp.input(name),
                sp.instr(_BINARY["mul"].format(t=self.dtype))]

    def random_gene(self, rng: np.random.Generator) -> list[Op]:
        """One random gene: an input (35%), a constant push (15%) or an op's words (50%)."""
        u = rng.random()
        if u < 0.35:
            return self.input_words(self.names[int(rng.integers(len(self.names)))])
        if u < 0.5:
            return [self.const(self.random_constant(rng))]
        return list(self._words[self.ops[int(rng.integers(len(self.ops)))]])

    def tokens(self, prog: Sequence[Op]) -> list[int]:
        """The gene boundaries of ``prog``: ``[0, b1, ..., len(prog)]``, where each span is
        one op or a whole multi-op gene (``exp``: const log2 e, mul, ex2) found in place.
        Variation cuts only there, so it never splits an ``exp`` into a stray scaling::

            genes.tokens([input("x0"), *genes.op_words("exp")])    # [0, 1, 4]

        With ``weights``, a weighted input (a constant of any value, an input, ``mul``) is one
        gene: the optimizer changes its weight, and variation keeps it whole.
        """
        macros, bounds, i, n = self._macros, [0], 0, len(prog)
        mul = self._weight_mul
        while i < n:
            step = 1
            if mul is not None and i + 2 < n and prog[i].word & 0xFF in _CONST_KINDS \
                    and prog[i + 1].word & 0xFF == sp.INPUT and prog[i + 2].raw == mul:
                i += 3
                bounds.append(i)
                continue
            found = macros.get(prog[i].raw)
            if found:
                for length, raw, parts in found:
                    if b"".join([op.raw for op in prog[i:i + length]]) == raw or \
                            parts is not None and _matches(prog, i, parts):
                        step = length
                        break
            i += step
            bounds.append(i)
        return bounds

    def _fitted_const(self, op: Op) -> bool:
        """Whether constant ``op`` of a macro is one the search fits (aq's and sigmoid's 1),
        not one of the op's own (exp's log2 e, log's ln 2: :data:`MACRO_CONSTANTS`)."""
        return all(op.raw != self.const(v).raw for v in MACRO_CONSTANTS)

    def check_site(self, site: Any, where: str) -> None:
        """Raise :class:`SearchError` (naming ``where`` and the site) unless programs of these
        genes fit ``site`` (a :class:`numptx.Site`): its inputs (in/mod variables) include
        every input name with the genes' dtype, and it has exactly one output (out/mod
        variable), of the genes' dtype, which takes the program's result. Extra inputs (a
        ``u32`` candidate index, say) are fine: programs do not read them."""
        ins, outs = getattr(site, "inputs", None), getattr(site, "outputs", None)
        if ins is None or outs is None or not isinstance(getattr(site, "name", None), str):
            raise SearchError(f"{where}: site={site!r}: give a numptx Site (template.sites[name])")
        have = {v.name: v.dtype for v in ins}
        bad = [f"{n} (missing)" if n not in have else f"{n}: {have[n]}"
               for n in self.names if have.get(n) != self.dtype]
        if bad:
            fix = ""
            if any(n not in have for n in self.names):
                same = [v.name for v in ins if v.dtype == self.dtype]
                fix = (f". Programs read their inputs by name: run the search with names= "
                       f"naming the columns of X as the site's variables (regress(X, y, "
                       f"names=[...]): one per column, in X's order"
                       + (f", from the site's {self.dtype} inputs {', '.join(same)}" if same
                          else "") + f"), or name the site's variables "
                       f"{', '.join(self.names)}")
            raise SearchError(f"{where}: site {site.name!r} does not fit these programs: they "
                              f"read {self.dtype} inputs {', '.join(self.names)}; the site has "
                              f"{', '.join(bad)} (its inputs: "
                              f"{', '.join(f'{v.name}: {v.dtype}' for v in ins) or 'none'})"
                              + fix)
        if len(outs) != 1 or outs[0].dtype != self.dtype:
            raise SearchError(f"{where}: site {site.name!r} does not fit these programs: they "
                              f"give one {self.dtype} result, so the site needs exactly one "
                              f"out/mod variable of type {self.dtype}; it has "
                              f"{', '.join(f'{v.name}: {v.dtype}' for v in outs) or 'none'}")

    # ---- serialization
    def to_dict(self) -> dict:
        """A JSON-able description: ``Genes.from_dict(g.to_dict()) == g``."""
        d = {"ops": list(self.ops), "names": list(self.names), "dtype": self.dtype,
             "constants": list(self.constants)}
        return d | {"weights": True} if self.weights else d

    @classmethod
    def from_dict(cls, d: Mapping) -> Genes:
        """Inverse of :meth:`to_dict` (a bad dict raises SearchError naming ``d``)."""
        if not isinstance(d, Mapping) or not {"ops", "names", "dtype"} <= set(d):
            raise SearchError(f"Genes.from_dict(d): d needs keys 'ops', 'names', 'dtype' "
                              f"(and optionally 'constants', 'weights'), got {d!r}")
        extra = set(d) - {"ops", "names", "dtype", "constants", "weights"}
        if extra:
            raise SearchError(f"Genes.from_dict(d): unknown keys {sorted(extra)}")
        return cls(d["ops"], names=d["names"], dtype=d["dtype"],
                   constants=d.get("constants", (0.5, 1.0, 2.0)),
                   weights=d.get("weights", False))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Genes) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.ops, self.names, self.dtype, self.constants, self.weights))

    def __repr__(self) -> str:
        return (f"Genes(ops={list(self.ops)!r}, names={list(self.names)!r}, dtype={self.dtype!r}, "
                f"constants={self.constants!r}" + (", weights=True)" if self.weights else ")"))
