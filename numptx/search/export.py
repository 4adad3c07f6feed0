"""Export of a search's formulas: to sympy, LaTeX, a NumPy callable and an ``@nx.ptx_expr``.

A :class:`~numptx.search.results.Candidate` has one method per form; each reads the candidate's
formula text (the grammar at the top of :mod:`numptx.search.formula`)::

    r = search.regress(X, y, ["add", "mul", "sin"], seed=0)
    c = r.best
    c.sympy()                  # x0*x1 + x0: sympy Symbols named like the inputs
    c.latex()                  # 'x_{0} x_{1} + x_{0}' (numbers to 6 significant digits)
    f = c.numpy(); f(X)        # or f(x0, x1), f(x0=..., x1=...): NumPy, in the genes' dtype
    e = c.ptx_expr(name="law") # an @nx.ptx_expr: e.stub(site), nx.grad(e, wrt="x0"), autotune

The same functions take formula text directly: :func:`sympy_of`, :func:`latex_of`,
:class:`NumpyFormula`, :func:`ptx_expr_of`.

Which text each form reads. ``sympy()`` and ``latex()`` read the most readable text there is
(:func:`numptx.search.simplify.simplified` where that module exists, else the printer's
:func:`~numptx.search.formula.formula`), with every number at the precision of the genes'
dtype (9 significant digits for f32, 17 for f64: each number round-trips). ``numpy()`` and
``ptx_expr()`` compute, so they read the printer's text at that precision, which evaluates
like the program where :mod:`numptx.search.formula` says it does.

**sympy** (an optional extra: ``pip install "numptx[sympy]"``; without it a
:class:`~numptx.search.genes.SearchError` naming the extra). Numbers: a float that is an
integer of magnitude below 2**53 becomes a sympy ``Integer`` (``2*x0``, not ``2.0*x0``, so
``sympy.simplify(c.sympy() - target)`` is 0 for integer targets); other numbers are sympy
``Float`` s of the shortest decimal that rounds back to the same value in the dtype, at 15
digits' precision (17 for f64); ``nan`` is ``sympy.nan``, ``inf`` ``sympy.oo``. A ``:=``
binding is substituted where it is used (sympy shares the subexpression). The functions:

===============  ===============================================================
formula          sympy
===============  ===============================================================
exp, log         ``exp``, ``log``
exp2, log2       ``2**a``, ``log(a, 2)`` (= log(a)/log(2))
sin cos tanh     ``sin``, ``cos``, ``tanh``
sqrt, abs        ``sqrt``, ``Abs``
fmax, fmin       ``Max``, ``Min`` (of a ``nan``: the other operand, as PTX's max/min)
fma(a, b, c)     ``a*b + c``
copysign(a, b)   ``Piecewise((Abs(a), b >= 0), (-Abs(a), True))``
floor, ceil      ``floor``, ``ceiling``
rint, trunc      ``rint``, ``trunc``: functions of this module (round half to even; toward
                 zero), evaluated on numbers, derivative 0, printed by ``sympy.lambdify``
                 as ``numpy.rint``/``numpy.trunc``
sat(a)           ``Min(Max(a, 0), 1)`` (``sat(nan)`` is 0, as ``cvt.sat``)
===============  ===============================================================

sympy computes in exact real arithmetic, so its expression is the formula's mathematics, not
its floating-point behaviour: no rounding, no signed zero (``-0.0`` is 0, ``copysign(a, -0.0)``
is ``Abs(a)``), and ``Max``/``Min`` without PTX's rule that a NaN operand yields the other
where the NaN is a symbol's value (a ``nan`` in the formula is applied: ``fmax(x0, nan)`` is
``x0``); an operand sympy cannot compare (``zoo``, ``I``) leaves ``Max``/``Min`` unevaluated,
and what sympy refuses to build is a SearchError. sympy's own evaluation simplifies a little
(``x0 + x0`` is ``2*x0``); ``sympy.simplify`` is left to the caller, as is
``sympy.nsimplify`` to turn fitted floats into rationals.

**LaTeX**: sympy's printer (``sympy.latex``) on that expression with each ``Float`` shown to
``digits`` significant digits. There is no second, sympy-free printer: the same call would
then print different text depending on what is installed.

**NumPy**: :class:`NumpyFormula`, a picklable callable that runs
:func:`numptx.search.formula.evaluate` on the text: it agrees with ``Candidate.predict`` (the
emulator) bit for bit for the search's op names, except where formula.py lists otherwise
(directed-rounding and ``.ftz`` rows, ``.approx`` rows printed as the exact function, ``fma``
rounded twice in f64 or through f64 in f32: an ulp).

**ptx_expr**: a Python function ``def <name>(<inputs>): return <text>`` over the ``nx.*``
functions (``sat`` as ``nx.fmin(nx.fmax(a, 0.0), 1.0)``, which maps NaN to 0 like ``cvt.sat``),
annotated with the genes' dtype and traced by ``nx.ptx_expr`` in ``precision`` (default
``"accurate"``: every operation rounded once, never contracted, so arithmetic, ``sqrt``,
``abs``, ``fmax``/``fmin``, ``fma``, ``copysign`` and the roundings compute what the search's
program does, bit for bit; ``exp exp2 log log2 sin cos tanh`` are the DSL's accurate
sequences, not the ``.approx`` rows the search ran, so they differ from ``Candidate.predict``
by those rows' documented error). ``precision="fast"`` uses the ``.approx`` rows (with
``.ftz`` arithmetic) and ``"cuda"`` CUDA's own algorithms with fma contraction. Text that
Python's parser cannot read (a chain of more than 200 nested calls) is a SearchError: inject
the program itself with ``Candidate.stub(site)``.
"""
from __future__ import annotations

import ast
import fractions
import importlib
import importlib.util
import keyword
import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .formula import MAX_POWER, Eval, parse_text, evaluate, formula
from .genes import RESERVED_NAMES, Genes, SearchError, check_int

__all__ = ["sympy_of", "latex_of", "NumpyFormula", "ptx_expr_of", "readable_text", "exact_text",
           "SYMPY_EXTRA"]

#: how to install sympy, named by the error when it is missing
SYMPY_EXTRA = 'pip install "numptx[sympy]"'


def _full_digits(genes: Genes) -> int:
    """Significant digits that round-trip every number of the genes' dtype."""
    return 9 if genes.dtype == "f32" else 17


def _simplified():
    """:func:`numptx.search.simplify.simplified` where that module has it, else None."""
    if importlib.util.find_spec(__package__ + ".simplify") is None:
        return None
    return getattr(importlib.import_module(__package__ + ".simplify"), "simplified", None)


def exact_text(program: Sequence, genes: Genes) -> str:
    """The text of ``program`` that evaluates like it (``simplified(..., exact=True)``, else
    the printer's :func:`~numptx.search.formula.formula`), with round-tripping numbers: what
    ``numpy()`` and ``ptx_expr()`` read."""
    simplified = _simplified()
    if simplified is None:
        return formula(program, genes, digits=_full_digits(genes))
    return simplified(program, genes, digits=_full_digits(genes), exact=True)


def readable_text(program: Sequence, genes: Genes) -> str:
    """The simplified text of ``program`` (``simplified(...)``, the algebra of real numbers,
    else :func:`exact_text`), with round-tripping numbers: what ``sympy()`` reads."""
    simplified = _simplified()
    if simplified is None:
        return exact_text(program, genes)
    return simplified(program, genes, digits=_full_digits(genes))


# ---- sympy ------------------------------------------------------------------------------------
def _sympy(what: str):
    try:
        import sympy
    except ImportError:
        raise SearchError(f"{what} needs sympy, an optional extra: {SYMPY_EXTRA}") from None
    return sympy


_CLASSES: dict[str, Any] = {}
_CLASSES_LOCK = threading.Lock()


def _rounding_functions(sp) -> dict[str, Any]:
    """sympy functions ``rint`` (half to even) and ``trunc`` (toward zero), made once."""
    with _CLASSES_LOCK:                                # one class each, in any thread
        if not _CLASSES:
            _CLASSES.update(_make_rounding_functions(sp))
    return _CLASSES


def _make_rounding_functions(sp) -> dict[str, Any]:
    def rounding(name: str, to_int, doc: str):
        def eval_(cls, a):
            if a.is_integer or a in (sp.oo, -sp.oo, sp.nan):
                return a
            if a.is_Rational or a.is_Float:
                q = sp.Rational(a)
                return sp.Integer(to_int(fractions.Fraction(int(q.p), int(q.q))))
            return None

        def numpycode(self, printer):
            return f"numpy.{name}({printer.doprint(self.args[0])})"     # lambdify's numpy

        return type(name, (sp.Function,), {
            "__doc__": doc, "__module__": __name__, "eval": classmethod(eval_),
            "fdiff": lambda self, argindex=1: sp.S.Zero, "_numpycode": numpycode})

    return {"rint": rounding("rint", round, "Round half to even (PTX cvt.rni, numpy.rint)."),
            "trunc": rounding("trunc", int, "Round toward zero (PTX cvt.rzi, numpy.trunc).")}


def __getattr__(name: str) -> Any:
    # a pickled sympy expression names its rint/trunc as attributes of this module
    if name in ("rint", "trunc"):
        return _rounding_functions(_sympy(f"numptx.search.export.{name}"))[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _sympy_functions(sp) -> dict[str, Any]:
    rounding = _rounding_functions(sp)

    def copysign(a, b):
        if b.is_number and (b is sp.nan or b.is_extended_real is False):
            return sp.Abs(a)                      # a NaN sign is + (as the PTX row gives)
        return sp.Piecewise((sp.Abs(a), b >= 0), (-sp.Abs(a), True))

    def nan_is_the_other(f):
        def g(a, b):                              # PTX's max/min: a NaN operand gives the other
            if a is sp.nan or b is sp.nan:
                return b if a is sp.nan else a
            try:
                return f(a, b)
            except ValueError:                    # zoo, I: not comparable; kept unevaluated
                return f(a, b, evaluate=False)
        return g

    fmax, fmin = nan_is_the_other(sp.Max), nan_is_the_other(sp.Min)
    return {"exp": sp.exp, "exp2": lambda a: sp.Integer(2) ** a, "log": sp.log,
            "log2": lambda a: sp.log(a, 2), "sin": sp.sin, "cos": sp.cos, "tanh": sp.tanh,
            "sqrt": sp.sqrt, "abs": sp.Abs, "fmax": fmax, "fmin": fmin,
            "fma": lambda a, b, c: a * b + c, "copysign": copysign, "floor": sp.floor,
            "ceil": sp.ceiling, "rint": rounding["rint"], "trunc": rounding["trunc"],
            "sat": lambda a: fmin(fmax(a, sp.Integer(0)), sp.Integer(1))}


class _ToSympy(Eval):
    """formula.py's evaluator (its syntax checks, no recursion) building sympy objects."""

    def __init__(self, text: str, env: dict, sp, f32: bool):
        super().__init__(text, env, None)
        self.sp, self.f32, self.funcs = sp, f32, _sympy_functions(sp)

    def _leaf(self, node):
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                self.fail(f"unsupported literal {v!r}")
            return self.number(v)
        if node.id in self.env:
            return self.env[node.id]
        if node.id in ("nan", "inf"):
            return self.number(float(node.id))
        self.fail(f"unknown name {node.id!r}")

    def number(self, v: int | float):
        sp = self.sp
        if isinstance(v, int):
            return sp.Integer(v)
        if math.isnan(v):
            return sp.nan
        if math.isinf(v):
            return sp.oo if v > 0 else -sp.oo
        if v.is_integer() and abs(v) < 2.0 ** 53:
            return sp.Integer(int(v))
        return sp.Float(str(np.float32(v)) if self.f32 else repr(v), 15 if self.f32 else 17)

    def _apply(self, node, args: list):
        if isinstance(node, (ast.Expression, ast.NamedExpr)):
            return super()._apply(node, args)
        if isinstance(node, ast.UnaryOp):
            return -args[0] if isinstance(node.op, ast.USub) else args[0]
        if isinstance(node, ast.BinOp):
            a, b = args
            op = type(node.op)
            return (a + b if op is ast.Add else a - b if op is ast.Sub else a * b
                    if op is ast.Mult else a / b if op is ast.Div else a ** b)
        return self.funcs[node.func.id](*args)


def sympy_of(text: str, names: Sequence[str], *, dtype: str = "f32",
             symbols: Mapping[str, Any] | None = None) -> Any:
    """The sympy expression of formula ``text`` over inputs ``names`` (sympy ``Symbol`` s of
    those names, or the sympy expressions ``symbols`` maps a name to); numbers as the module
    docstring says, ``dtype`` (``"f32"``/``"f64"``) the precision they round-trip in::

        sympy_of("x0*x1 + x0", ["x0", "x1"])          # x0*x1 + x0
    """
    sp = _sympy("sympy()")
    if not isinstance(text, str):
        raise SearchError(f"text={text!r}: give formula text (numptx.search.formula's grammar)")
    env = {n: sp.Symbol(n) for n in names}
    if symbols is not None:
        if not isinstance(symbols, Mapping):
            raise SearchError(f"symbols={symbols!r}: give a dict of input name -> sympy "
                              f"expression (the inputs are {', '.join(names)})")
        for k, v in symbols.items():
            if k not in env:
                raise SearchError(f"symbols: {k!r} is no input (the inputs are "
                                  f"{', '.join(names)})")
            if not isinstance(v, sp.Basic):
                raise SearchError(f"symbols[{k!r}]={v!r}: give a sympy expression, e.g. "
                                  f"sympy.Symbol({k!r}, real=True)")
            env[k] = v
    tree = parse_text(text)
    try:
        return _ToSympy(text, env, sp, dtype == "f32").run(tree)
    except SearchError:
        raise
    except (TypeError, ValueError, ArithmeticError) as e:     # sympy's own refusals
        shown = text if len(text) <= 80 else f"{text[:60]}... ({len(text):,} characters)"
        raise SearchError(f"sympy(): sympy cannot build the formula {shown!r} "
                          f"({type(e).__name__}: {e})") from None


def latex_of(expr: Any, *, digits: int = 6) -> str:
    """LaTeX of a sympy expression (``sympy.latex``) with each float shown to ``digits``
    significant digits::

        latex_of(sympy_of("0.840067148*sqrt(x0)", ["x0"]))    # '0.840067 \\sqrt{x_{0}}'
    """
    sp = _sympy("latex()")
    digits = check_int("digits", digits, 1, 17)
    if not isinstance(expr, sp.Basic):
        raise SearchError(f"expr={expr!r}: give a sympy expression (Candidate.sympy())")
    return sp.latex(expr.xreplace({f: sp.Float(f, digits) for f in expr.atoms(sp.Float)}))


# ---- NumPy ------------------------------------------------------------------------------------
class NumpyFormula:
    """A formula as a NumPy function of the inputs (``Candidate.numpy()``): ``f(X)`` with ``X``
    n x d (columns in the inputs' order), ``f(x0, x1, ...)`` one array (or scalar) per input,
    or ``f(x0=..., x1=...)`` by name; returns n values in the genes' dtype, computed by
    :func:`numptx.search.formula.evaluate`. Picklable (``text`` and ``genes``)::

        f = NumpyFormula("x0*x1 + x0", Genes(["add", "mul"], 2))
        f(np.ones((3, 2))), f(np.arange(3.0), 2.0), f(x0=1.0, x1=2.0)
    """

    def __init__(self, text: str, genes: Genes):
        if not isinstance(genes, Genes):
            raise SearchError(f"genes={genes!r}: give a numptx.search.genes.Genes")
        if not isinstance(text, str):
            raise SearchError(f"text={text!r}: give formula text (numptx.search.formula's "
                              f"grammar)")
        parse_text(text)                                   # bad text fails here, not at a call
        self.text, self.genes = text, genes

    @property
    def names(self) -> tuple[str, ...]:
        return self.genes.names

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32 if self.genes.dtype == "f32" else np.float64)

    def __call__(self, *arrays: Any, **named: Any) -> np.ndarray:
        return evaluate(self.text, self._matrix(arrays, named), self.genes)

    def _matrix(self, arrays: tuple, named: dict) -> Any:
        names = self.names
        if named:
            if arrays:
                raise SearchError("numpy(): give the inputs by position or by name, not both")
            unknown = [k for k in named if k not in names]
            missing = [n for n in names if n not in named]
            if unknown or missing:
                raise SearchError(f"numpy(): inputs {', '.join(names)} by name: "
                                  + (f"unknown {unknown[0]!r}" if unknown else
                                     f"missing {missing[0]!r}"))
            arrays = tuple(named[n] for n in names)
        elif len(arrays) == 1:
            return arrays[0]                           # X: evaluate checks its shape
        elif len(arrays) != len(names):
            raise SearchError(f"numpy(): give X (n x {len(names)}) or one array per input "
                              f"({', '.join(names)}), not {len(arrays)} arrays")
        try:
            cols = np.broadcast_arrays(*[np.asarray(a, self.dtype) for a in arrays])
        except (TypeError, ValueError) as e:
            raise SearchError(f"numpy(): the inputs {', '.join(names)} must be numbers or "
                              f"1-D arrays of one length ({e})") from None
        if cols[0].ndim > 1:
            raise SearchError(f"numpy(): one array per input must be 1-D, not of shape "
                              f"{cols[0].shape}")
        return np.stack([np.atleast_1d(c) for c in cols], axis=1)

    def __repr__(self) -> str:
        return f"NumpyFormula(({', '.join(self.names)}) -> {self.text})"


# ---- @nx.ptx_expr -----------------------------------------------------------------------------
_BOUND: Any = None         # what _Checked keeps for a name: that it is bound


class _Checked(Eval):
    """formula.py's syntax checks over the whole text, computing nothing: names are the inputs,
    ``nan``/``inf`` or ``:=`` bindings made before (of names other than those)."""

    def _leaf(self, node):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                self.fail(f"unsupported literal {node.value!r}")
        elif node.id not in self.env and node.id not in ("nan", "inf"):
            self.fail(f"unknown name {node.id!r}")

    def _apply(self, node, args: list):
        if isinstance(node, ast.NamedExpr):
            if node.target.id in self.env or node.target.id in RESERVED_NAMES:
                self.fail(f"{node.target.id!r} is bound with := but names an input or a "
                          f"function")
            self.env[node.target.id] = _BOUND


def _dsl_namespace() -> dict[str, Any]:
    from ..dsl import functions as F
    return {"exp": F.exp, "exp2": F.exp2, "log": F.log, "log2": F.log2, "sin": F.sin,
            "cos": F.cos, "tanh": F.tanh, "sqrt": F.sqrt, "abs": F.abs, "fmax": F.fmax,
            "fmin": F.fmin, "fma": F.fma, "copysign": F.copysign, "rint": F.rint,
            "trunc": F.trunc, "floor": F.floor, "ceil": F.ceil,
            "sat": lambda a: F.fmin(F.fmax(a, 0.0), 1.0),
            "nan": math.nan, "inf": math.inf}


def _power(a: Any, n: int) -> Any:
    """``a**n`` as formula.evaluate computes it: ``((a*a)*a)*...``, each product rounded."""
    r = a
    for _ in range(n - 1):
        r = r * a
    return r


class _Traced(Eval):
    """Evaluates checked formula text on the DSL's traced values, node by node (formula.py's
    walk): what the exported ``@nx.ptx_expr`` computes, with no text compiled. ``a**n`` (an
    int 2 <= n <= 64) is multiplied out left to right as formula.evaluate does (the DSL's
    ``**`` squares repeatedly, which rounds differently from n = 4 on)."""

    def __init__(self, text: str, env: dict[str, Any]) -> None:
        super().__init__(text, env, None)
        self.funcs = _dsl_namespace()

    def _leaf(self, node):
        if isinstance(node, ast.Constant):
            v = node.value
            return math.inf if isinstance(v, int) and abs(v) > 1e308 else v
        return self.env[node.id] if node.id in self.env else self.funcs[node.id]

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
            if type(b) is int and 2 <= b <= MAX_POWER and isinstance(node.right, ast.Constant):
                return _power(a, b)
            return a ** b
        return self.funcs[node.func.id](*args)


def ptx_expr_of(text: str, genes: Genes, *, name: str = "formula",
                precision: str = "accurate") -> Any:
    """An ``@nx.ptx_expr`` computing formula ``text`` of ``genes``' inputs, named ``name``
    (its parameters are the inputs, of the genes' dtype; its one output that dtype), traced in
    math mode ``precision`` (see the module docstring)::

        law = ptx_expr_of("x0*x1 + x0", Genes(["add", "mul"], 2), name="law")
        law.stub(site); nx.grad(law, wrt="x0")
    """
    from ..dsl import types as T
    from ..dsl.expr import ptx_expr
    from ..dsl.modes import MODES
    from ..dsl.signature import make_function
    if not isinstance(genes, Genes):
        raise SearchError(f"genes={genes!r}: give a numptx.search.genes.Genes")
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) \
            or name in genes.names or name in RESERVED_NAMES:
        raise SearchError(f"name={name!r}: give a Python identifier other than a keyword, an "
                          f"input ({', '.join(genes.names)}) or a formula function")
    if precision not in MODES:
        raise SearchError(f"precision={precision!r}: give one of {', '.join(map(repr, MODES))}")
    if not isinstance(text, str):
        raise SearchError(f"text={text!r}: give formula text (numptx.search.formula's grammar)")
    tree = parse_text(text)
    _Checked(text, dict.fromkeys(genes.names, _BOUND), None).run(tree)   # no other code runs
    names = list(genes.names)

    def traced(*values: Any) -> Any:
        return _Traced(text, dict(zip(names, values))).run(tree)

    t = T.f32 if genes.dtype == "f32" else T.f64
    fn = make_function(name, {n: t for n in names}, traced)
    fn.__annotations__["return"] = t
    fn.__doc__ = f"{name}({', '.join(names)}) = {text} (numptx.search export)"
    return ptx_expr(fn, precision=precision)
