"""Derivatives of formulas: ``nx.grad``, ``nx.value_and_grad`` and ``nx.jacobian`` each return a
new ``@nx.ptx_expr`` whose outputs are derivatives (and the value), traced into one graph with
the formula, so value and derivative share their common subexpressions::

    @nx.ptx_expr
    def lj(r: nx.f32, eps: nx.f32, sigma: nx.f32) -> nx.f32:
        s6 = (sigma / r) ** 6
        return 4 * eps * (s6 * s6 - s6)

    du = nx.grad(lj, wrt="r")                 # du/dr(r, eps, sigma): one output
    u_du = nx.value_and_grad(lj, wrt="r")     # (u, du/dr): the value first
    both = nx.grad(lj, wrt=("r", "sigma"))    # (du/dr, du/dsigma)
    du(1.2, 1.0, 1.0); du.stub(site); nx.grad(du, wrt="r")      # like any formula

How: the formula runs once more on dual values (:class:`DiffTracer`): each DSL operation is
applied to the values underneath (so it is lowered as usual) and its derivative rule, from the
``deriv`` column of its row in the operation table (numptx/dsl/ops.py; the vocabulary is
numptx/dsl/grad_rules.py), computes the tangent from those values and the result (forward mode,
one tangent per ``wrt`` parameter, zeros and ones kept symbolic). The tracer underneath is the
result's own: the graph tracer in the result's math mode (the formula's ``precision``), NumPy for
the reference evaluation, or another :class:`DiffTracer` (``nx.grad`` of ``nx.grad``). In
precision "cuda" the value's nodes are marked (:func:`~numptx.dsl.contract.plan_first`) so
the fma contraction plans them as ``f`` alone: the value is ``f``'s stub's, bit for bit.

Output forms: a formula returning a dict gives a dict (value keys first, then ``d<out>_d<wrt>``);
otherwise one value where there is one (``grad`` with ``wrt`` a name, of a one-output formula),
else a tuple: the value first (``value_and_grad``), then the derivatives, output by output and
within an output in ``wrt`` order. Errors are :class:`GradError` (docs/dsl.md, "Derivatives").
"""
from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import numpy as np

from . import types as T
from .contract import plan_first
from .expr import PtxExpr, ptx_expr
from .grad_rules import ONE, real, tmap
from .ops import bitcast
from .graph import Frame
from .promote import Tracer
from .proxy import Proxy, TraceError, user_frame
from .signature import make_function
from .trace import GraphTracer

__all__ = ["grad", "value_and_grad", "jacobian", "GradError", "DiffTracer", "Dual"]


class GradError(TraceError):
    """A derivative numptx cannot take: ``wrt`` naming no runtime float parameter of the
    formula, an operation without a derivative rule or an integer cast of a value that depends
    on ``wrt``, an integer or predicate output. The message names the function, the parameter
    and the formula's line (``frame``)."""


class Dual:
    """A value and its tangents (one per ``wrt`` parameter: None for zero, ``ONE``, or a traced
    value of the tracer underneath)."""
    __slots__ = ("primal", "tangents")

    def __init__(self, primal: Proxy, tangents: tuple):
        self.primal, self.tangents = primal, tangents


class _Spec:
    """What the errors of one derivative name: the API function, the formula and ``wrt``."""
    __slots__ = ("what", "name", "wrt")

    def __init__(self, what: str, name: str, wrt: tuple[str, ...]):
        self.what, self.name, self.wrt = what, name, wrt

    def head(self, k: int | None = None) -> str:
        w = self.wrt if k is None else self.wrt[k]
        return f"{self.what}({self.name}, wrt={w!r})"


class DiffTracer(Tracer):
    """Forward-mode differentiation over another tracer (``inner``): nodes are :class:`Dual`;
    each operation runs on the primal values through ``inner`` and its row's ``deriv`` rule
    gives the tangents. The promotion policy is :class:`~numptx.dsl.promote.Tracer`'s."""

    def __init__(self, inner: Tracer, spec: _Spec):
        self.inner, self.spec = inner, spec
        self.fastmath = inner.fastmath
        self.zero = (None,) * len(spec.wrt)

    def dtype_of(self, node: Dual) -> T.DType:
        return node.primal.dtype

    def eager(self) -> Tracer:
        return self.inner.eager()

    def begin(self) -> None:
        self.inner.begin()

    def literal(self, value: Any, dtype: T.DType) -> Dual:
        return Dual(Proxy(self.inner.literal(value, dtype), self.inner), self.zero)

    def run(self, op: Any, t: T.DType, nodes: Sequence[Dual]) -> Dual:
        xs = tuple(n.primal for n in nodes)
        y = self.inner.apply(op, xs)
        if not y.dtype.is_float:                # predicates, integers: no derivative
            return Dual(y, self.zero)
        rule = op.deriv
        tangents = []
        for k in range(len(self.zero)):
            ts = tuple(n.tangents[k] for n in nodes)
            if all(t_ is None for t_ in ts):
                tangents.append(None)
                continue
            if rule is None:
                raise GradError(f"{self.spec.head(k)}: the operation {op.name!r} has no "
                                f"derivative rule (its 'deriv' in numptx/dsl/ops.py)",
                                frame=user_frame(2),
                                fix="write this step with operations that have one (docs/dsl.md, "
                                    "'Derivatives'), or compute it from parameters not in wrt")
            tangents.append(rule.jvp(xs, y, ts))
        return Dual(y, tuple(tangents))

    def convert(self, node: Dual, src: T.DType, dst: T.DType) -> Dual:
        inner = self.inner
        y = Proxy(inner.convert(node.primal.node, src, dst), inner)
        if not (src.is_float and dst.is_float):
            if dst.kind in "su":
                for k, t in enumerate(node.tangents):
                    if t is not None:
                        raise GradError(
                            f"{self.spec.head(k)}: a cast to {dst.name} of a value that depends "
                            f"on {self.spec.wrt[k]!r}: integers have no derivative",
                            frame=user_frame(2),
                            fix="keep it a float (nx.floor(x) has derivative 0), or compute the "
                                "integer from parameters not in wrt")
            return Dual(y, self.zero)
        return Dual(y, tuple(tmap(t, lambda v: Proxy(inner.convert(v.node, src, dst), inner))
                             for t in node.tangents))

    def bitcast(self, x: Proxy, dst: T.DType) -> Proxy:
        """``nx.bitcast(x, dst)`` (numptx/dsl/ops.py): of a value that does not depend on
        ``wrt``; bits have no derivative."""
        d = x.node
        for k, t in enumerate(d.tangents):
            if t is not None:
                raise GradError(f"{self.spec.head(k)}: nx.bitcast of a value that depends on "
                                f"{self.spec.wrt[k]!r}: bits have no derivative",
                                frame=user_frame(2),
                                fix="compute it with arithmetic, or from parameters not in wrt")
        return Proxy(Dual(bitcast(d.primal, dst), self.zero), self)


# ---- the API ------------------------------------------------------------------------------------
def grad(f: Any, wrt: str | Sequence[str]) -> PtxExpr:
    """The derivative of a one-output formula ``f`` w.r.t. the parameter ``wrt`` (a name: one
    output), or w.r.t. each of several (a tuple of names: a tuple of outputs, in that order)::

        force = nx.grad(lj, wrt="r")              # dU/dr(r, eps, sigma)

    The result is a formula with ``f``'s parameters, precision and backend (``.bind()``
    constants stay constants): call it, ``stub()`` it, pack it, tune it, ``nx.grad`` it.
    """
    return _derive("grad", f, wrt, value=False)


def value_and_grad(f: Any, wrt: str | Sequence[str]) -> PtxExpr:
    """``f``'s value and its derivatives, as one formula: outputs ``(value, d_wrt...)`` (a dict
    ``{key: value, "d<key>_d<wrt>": ...}`` when ``f`` returns a dict). Value and derivatives
    share their common subexpressions::

        u_and_du = nx.value_and_grad(lj, wrt="r")     # (u, du/dr)
    """
    return _derive("value_and_grad", f, wrt, value=True)


def jacobian(f: Any, wrt: str | Sequence[str]) -> PtxExpr:
    """The derivatives of every output of ``f`` w.r.t. every ``wrt`` parameter: output ``i``'s
    w.r.t. ``wrt[j]`` at position ``i * len(wrt) + j`` (a dict with keys ``d<out>_d<wrt>``
    when ``f`` returns a dict); one output is a single value::

        J = nx.jacobian(polar, wrt=("r", "phi"))     # (dx/dr, dx/dphi, dy/dr, dy/dphi)
    """
    return _derive("jacobian", f, wrt, value=False)


def _def_frame(fn: Callable) -> Frame:
    code = fn.__code__
    return (code, code.co_firstlineno)


def _formula(f: Any, what: str) -> PtxExpr:
    if isinstance(f, PtxExpr):
        return f
    if callable(f) and hasattr(f, "__code__"):
        return ptx_expr(f)
    raise GradError(f"{what}: expects a formula (@nx.ptx_expr, or a Python function), not "
                    f"{type(f).__name__}", frame=user_frame(2))


def _wrt_names(expr: PtxExpr, wrt: Any, what: str) -> tuple[tuple[str, ...], bool]:
    """``wrt`` as a tuple of names (and whether it was one name), each a runtime float
    parameter of ``expr``."""
    single = isinstance(wrt, str)
    names = (wrt,) if single else tuple(wrt) if isinstance(wrt, (tuple, list)) else None
    frame = _def_frame(expr.fn)
    if not names or not all(isinstance(n, str) for n in names):
        raise GradError(f"{what}({expr.__name__}, wrt={wrt!r}): wrt is a parameter name or a "
                        f"tuple of them", frame=frame,
                        fix=f"e.g. wrt={next(iter(expr.all_params), 'x')!r}")
    for n in names:
        head = f"{what}({expr.__name__}, wrt={n!r})"
        if names.count(n) > 1:
            raise GradError(f"{head}: {n!r} is named twice", frame=frame)
        t = expr.all_params.get(n)
        if t is None and n in expr.fn.__code__.co_varnames[:expr.fn.__code__.co_argcount]:
            raise GradError(f"{head}: {n!r} is a plain Python argument of {expr.__name__} (its "
                            f"default is not a number), not a traced parameter", frame=frame)
        if t is None:
            raise GradError(f"{head}: {expr.__name__} has no parameter {n!r} (its parameters: "
                            f"{', '.join(expr.all_params) or 'none'})", frame=frame)
        if n in expr.bound:
            raise GradError(f"{head}: {n!r} is bound to a constant (.bind), so nothing depends "
                            f"on it at run time", frame=frame,
                            fix="differentiate before binding: nx.grad(f, ...).bind(...)")
        if not t.is_float:
            raise GradError(f"{head}: {n!r} is {t.name}; derivatives are w.r.t. float "
                            f"parameters", frame=frame,
                            fix="declare it as a float (nx.f32) if it varies continuously")
    return names, single


def _check_outputs(expr: PtxExpr, what: str, wrt: tuple, one: bool) -> list:
    """``expr``'s outputs as (name, DType); each must be a float (and one only, for ``one``)."""
    g = expr.graph
    outs = [(k, T.DTYPES[n.dtype]) for k, n in g.outputs]
    head = f"{what}({expr.__name__}, wrt={wrt[0] if len(wrt) == 1 else wrt!r})"
    for k, n in g.outputs:
        if not T.DTYPES[n.dtype].is_float:
            g.fill_frames()
            raise GradError(f"{head}: output {k!r} is {n.dtype}; only float outputs have "
                            f"derivatives", frame=n.frame or _def_frame(expr.fn),
                            fix="return it from another formula, or cast it to a float if it "
                                "is one")
    if one and len(outs) != 1:
        raise GradError(f"{head}: {expr.__name__} has {len(outs)} outputs; {what} takes the "
                        f"derivative of one", frame=_def_frame(expr.fn),
                        fix="use nx.jacobian for several outputs")
    return outs


def _derive(what: str, f: Any, wrt: Any, value: bool) -> PtxExpr:
    expr = _formula(f, what)
    names, single = _wrt_names(expr, wrt, what)
    outs = _check_outputs(expr, what, names, what != "jacobian")
    form = expr.graph.output_form
    keys = ([k for k, _ in outs] if value else []) + \
        [f"d{k}_d{w}" for k, _ in outs for w in names]
    if form == "dict":
        out_form = "dict"
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise GradError(f"{what}({expr.__name__}, wrt={wrt!r}): the output name "
                            f"{twice[0]!r} would name two outputs",
                            frame=_def_frame(expr.fn),
                            fix="rename the output (derivatives are named d<output>_d<wrt>)")
    else:
        out_form = "single" if len(keys) == 1 and single else "tuple"
    spec = _Spec(what, expr.__name__, names)
    params = dict(expr.all_params)
    impl = _runner(expr, spec, params, outs, form, out_form, keys, value)
    fn = make_function(re.sub(r"\W", "_", f"{what}_{expr.__name__}"), params, impl,
                       defaults=expr.defaults, like=expr.fn)
    result = PtxExpr(fn, precision=expr.precision, backend=expr.backend, bound=dict(expr.bound))
    result.graph                       # trace now: a missing rule is reported here, not later
    return result


def _runner(expr: PtxExpr, spec: _Spec, params: dict, outs: list, form: str, out_form: str,
            keys: list, value: bool) -> Callable:
    """The body of the derivative formula: ``f`` on dual values, then the outputs."""
    names = list(params)
    n_pos = sum(1 for n in names if n not in expr.defaults)
    wrt = spec.wrt

    def run(*args: Any) -> Any:
        tr = args[0].tracer
        dt = DiffTracer(tr, spec)
        duals = [Proxy(Dual(a, tuple(ONE if n == w else None for w in wrt)), dt)
                 for n, a in zip(names, args)]
        ret = expr.fn(*duals[:n_pos], **dict(zip(names[n_pos:], duals[n_pos:])))
        items = list(ret.values()) if form == "dict" else \
            list(ret) if form == "tuple" else [ret]
        vals, ders = [], []
        for v, (_, t) in zip(items, outs):
            if isinstance(v, Proxy) and v.tracer is dt:
                primal, tangents = v.node.primal, v.node.tangents
            elif isinstance(v, (bool, int, float, np.generic)):   # a constant output: in
                primal, tangents = Proxy(tr.literal(v, t), tr), dt.zero    # f's output type
            else:
                raise GradError(f"{spec.head()}: {spec.name} returns {type(v).__name__}",
                                frame=_def_frame(expr.fn))
            like = Proxy(tr.literal(0.0, t), tr)
            vals.append(primal)
            ders += [real(tk, like) for tk in tangents]
        _value_first(vals)
        results = (vals if value else []) + ders
        if out_form == "dict":
            return dict(zip(keys, results))
        return results[0] if out_form == "single" else tuple(results)
    return run


def _value_first(vals: list[Proxy]) -> None:
    """In a graph traced in precision "cuda": ``f``'s value nodes (under any derivative
    tracers) are contracted first, as ``f`` alone (numptx/dsl/contract.py, ``plan_first``), so
    the value, and every intermediate the derivative reads, rounds as in ``f``'s own stub."""
    nodes = []
    for v in vals:
        while isinstance(v.tracer, DiffTracer):
            v = v.node.primal
        if isinstance(v.tracer, GraphTracer) and v.tracer.fastmath == "cuda":
            nodes.append(v.node)
            graph = v.tracer.graph
    if nodes:
        plan_first(graph, nodes)
