"""The formulas behind :func:`numptx.torch.pairwise`: a :class:`Pairwise` spec (the element
formula, the reduction, the finishing formula) typed for the tensors' dtype, and the formulas
derived from it by :func:`numptx.grad` that the backward pass runs::

    spec = Pairwise(elem=lambda a, b: (a - b) ** 2, finish=lambda s: nx.sqrt(s), name="l2")
    f = spec.typed("f64")            # Formulas: step, finish, back_a, back_b, dfinish, ...
    f.step                           # acc_c <- acc_c + elem_c(a, b, hyper...) (or max / min)

``out[i, j] = finish(reduce_k elem(A[i, k], B[j, k], hyper...), hyper...)``. The element
formula takes the two elements first, then hyperparameters; it returns one term, or a tuple of
``C`` terms each reduced on its own (the cosine: ``a*b, a*a, b*b``); ``finish`` takes the ``C``
reductions first, then hyperparameters, and returns the output (none: the one reduction is the
output). Hyperparameters are named by parameter name, shared between the two.

With ``H[c][i, j] = G[i, j] * d finish / d s_c`` (``dfinish``), the gradients are
``dA[i, k] = sum_j back_a(A[i, k], B[j, k], S[., i, j], H[., i, j])`` and ``dB`` alike
(``back_b``): ``back_a = sum_c h_c * d elem_c / da``; for max and min only the ``k`` whose term
equals the reduction (every one of a tie) passes the gradient on.
"""
from __future__ import annotations

import functools
import re
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import numptx as nx
from numptx.dsl.expr import PtxExpr

from .errors import PairwiseError

__all__ = ["Pairwise", "Formulas", "REDUCES"]

Reduce = Literal["sum", "max", "min"]
REDUCES: tuple[str, ...] = ("sum", "max", "min")
FLOAT_TYPES = {"f32": nx.f32, "f64": nx.f64}


@dataclass(frozen=True)
class Pairwise:
    """``out[i, j] = finish(reduce_k elem(A[i, k], B[j, k], **hyper), **hyper)``.

    ``elem`` and ``finish`` are ``@nx.ptx_expr`` formulas or plain Python functions; their
    float parameters take the tensors' type (f32 or f64) when :meth:`typed`, their precision
    mode stays. ``hyper`` holds default hyperparameter values (the formulas' own defaults are
    used too)."""
    elem: Any
    reduce: Reduce = "sum"
    finish: Any = None
    name: str = ""
    doc: str = ""
    hyper: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.reduce not in REDUCES:
            raise PairwiseError(f"pairwise: reduce={self.reduce!r} is not one of "
                                f"{', '.join(map(repr, REDUCES))}", argument="reduce")
        for what, f in (("formula", self.elem), ("finish", self.finish)):
            if f is not None and not isinstance(f, PtxExpr) and not \
                    (callable(f) and hasattr(f, "__code__")):
                raise PairwiseError(f"pairwise: {what}= takes an @nx.ptx_expr formula or a "
                                    f"Python function, not {type(f).__name__}", argument=what)

    def typed(self, t: str) -> Formulas:
        """The formulas for element type ``t`` ("f32" or "f64"), cached."""
        return _typed(self, t)


@dataclass(frozen=True, eq=False)
class Formulas:
    """A :class:`Pairwise` spec typed for one float type: the formulas each pass runs."""
    spec: Pairwise
    t: str
    elem: PtxExpr            # (a, b, hyper...) -> C terms
    n_acc: int               # C
    hyper: tuple[str, ...]   # hyperparameter names, in kernel order (elem's, then finish's)
    defaults: dict           # hyperparameter defaults from the formulas
    elem_hyper: tuple[str, ...]
    finish_hyper: tuple[str, ...]
    finish: PtxExpr | None   # (s0.., hyper...) -> out

    @functools.cached_property
    def step(self) -> PtxExpr:
        """``(a, b, hyper..., acc0..) -> acc_c + elem_c`` (or maximum / minimum)."""
        accs = _names("acc", self.n_acc)
        op = {"sum": lambda x, y: x + y, "max": nx.maximum, "min": nx.minimum}[self.spec.reduce]

        def body(v: dict):
            terms = _terms(self.elem.fn(v["a"], v["b"], *[v[h] for h in self._elem_args]))
            out = tuple(op(v[acc], t) for acc, t in zip(accs, terms))
            return out[0] if len(out) == 1 else out
        return self._make("step", ["a", "b", *self.hyper, *accs], body)

    @functools.cached_property
    def finish_or_identity(self) -> PtxExpr:
        """``(s0.., hyper...) -> out``: the finishing formula (the one reduction without one)."""
        ss = _names("s", self.n_acc)

        def body(v: dict):
            if self.finish is None:
                return v["s0"]
            return self.finish.fn(*[v[s] for s in ss], *[v[h] for h in self._finish_args])
        return self._make("finish", [*ss, *self.hyper], body)

    @functools.cached_property
    def dfinish(self) -> PtxExpr:
        """``(s0.., g, hyper...) -> (g * dfinish/ds_c.., g * dfinish/dh..)``: the output's
        gradient ``g`` taken back through ``finish`` to each reduction and hyperparameter."""
        ss = _names("s", self.n_acc)
        wrt = (*ss, *self.finish_hyper)
        jac = nx.jacobian(self.finish_or_identity, wrt=wrt) if self.finish is not None else None

        def body(v: dict):
            if jac is None:
                return v["g"]
            d = jac.fn(*[v[s] for s in ss], *[v[h] for h in self.hyper])
            d = d if isinstance(d, tuple) else (d,)
            out = tuple(v["g"] * x for x in d)
            return out[0] if len(out) == 1 else out
        return self._make("dfinish", [*ss, "g", *self.hyper], body)

    @functools.cached_property
    def back_a(self) -> PtxExpr:
        """``(a, b, s0.., h0.., hyper..., acc) -> acc + sum_c h_c d elem_c/da``."""
        return self._back("a")

    @functools.cached_property
    def back_b(self) -> PtxExpr:
        """``(a, b, s0.., h0.., hyper..., acc) -> acc + sum_c h_c d elem_c/db``."""
        return self._back("b")

    @functools.cached_property
    def dhyper(self) -> PtxExpr:
        """``(a, b, s0.., h0.., hyper..., acc_q..) -> acc_q + sum_c h_c d elem_c/d hyper_q``
        for each of the element formula's hyperparameters (their gradients: summed over
        ``i, j`` by the caller)."""
        return self._back(None)

    def _back(self, x: str | None) -> PtxExpr:
        wrt = (x,) if x is not None else self.elem_hyper
        jac = nx.value_and_grad(self.elem, wrt=wrt) if self.n_acc == 1 else \
            nx.jacobian(self.elem, wrt=wrt)
        ss, hs = _names("s", self.n_acc), _names("h", self.n_acc)
        accs = ["acc"] if x is not None else _names("acc", len(wrt))
        reduce, C, W = self.spec.reduce, self.n_acc, len(wrt)

        def body(v: dict):
            d = jac.fn(v["a"], v["b"], *[v[h] for h in self._elem_args])
            d = d if isinstance(d, tuple) else (d,)
            if C == 1:
                value, d = d[0], d[1:]
            out = []
            for q in range(W):
                total = None
                for c in range(C):
                    term = v[hs[c]] * d[c * W + q]
                    total = term if total is None else total + term
                if reduce != "sum":     # the k that gave the max / min: its term is the value
                    total = nx.where(value == v["s0"], total, 0.0)
                out.append(v[accs[q]] + total)
            return out[0] if len(out) == 1 else tuple(out)
        return self._make(f"back_{x or 'hyper'}", ["a", "b", *ss, *hs, *self.hyper, *accs], body)

    @property
    def _elem_args(self) -> tuple[str, ...]:
        return self.elem_hyper

    @property
    def _finish_args(self) -> tuple[str, ...]:
        return self.finish_hyper

    def _make(self, what: str, names: list[str], body: Callable) -> PtxExpr:
        """A formula ``<name>_<what>(names...)`` of type ``t`` running ``body`` on a dict of
        its traced parameters, in the element formula's precision."""
        name = re.sub(r"\W", "_", f"{self.spec.name or self.elem.__name__}_{what}")
        src = f"def {name}({', '.join(names)}):\n    return _body(dict(zip(_names, " \
              f"({', '.join(names)},))))\n"
        ns: dict = {"_body": body, "_names": names}
        exec(compile(src, f"<numptx.torch {name}>", "exec"), ns)       # noqa: S102 - ours
        fn = ns[name]
        fn.__annotations__ = {n: FLOAT_TYPES[self.t] for n in names}
        return nx.ptx_expr(fn, precision=self.elem.precision)


def _names(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{c}" for c in range(n)]


def _terms(ret: Any) -> tuple:
    if isinstance(ret, dict):
        return tuple(ret.values())
    return tuple(ret) if isinstance(ret, tuple) else (ret,)


def retype(f: Any, t: str, what: str) -> tuple[PtxExpr, dict]:
    """``f`` (a formula or a Python function) with every parameter of float type ``t``, its
    precision kept, and the values it bound with ``.bind`` (hyperparameter defaults here)."""
    if isinstance(f, PtxExpr):
        fn, precision, bound = f.fn, f.precision, dict(f.bound)
        declared = f.all_params
    else:
        fn, precision, bound = f, None, {}
        declared = nx.ptx_expr(f).all_params
    for k, d in declared.items():
        if not d.is_float:
            raise PairwiseError(f"pairwise: {what} {getattr(fn, '__name__', '?')} parameter "
                                f"{k!r} is {d.name}; pairwise formulas take floats only",
                                argument=what)
    ann = {k: FLOAT_TYPES[t] for k in declared}
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__annotations__ = {**getattr(fn, "__annotations__", {}), **ann}
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__doc__ = fn.__doc__
    return nx.ptx_expr(copy, precision=precision), bound


@functools.lru_cache(maxsize=256)
def _typed(spec: Pairwise, t: str) -> Formulas:
    elem, bound = retype(spec.elem, t, "formula")
    params = list(elem.params)
    if len(params) < 2:
        raise PairwiseError(f"pairwise: formula {elem.signature()} takes "
                            f"{len(params)} argument(s); it takes the two elements "
                            f"A[i, k] and B[j, k] first, then hyperparameters",
                            argument="formula")
    outs = elem.graph.outputs
    for k, n in outs:
        if n.dtype != t:
            raise PairwiseError(f"pairwise: formula {elem.signature()} output {k!r} is "
                                f"{n.dtype}, not the tensors' {t}", argument="formula")
    n_acc = len(outs)
    if spec.reduce != "sum" and n_acc != 1:
        raise PairwiseError(f"pairwise: reduce={spec.reduce!r} takes a formula of one output; "
                            f"{elem.__name__} has {n_acc}", argument="reduce")
    elem_hyper = tuple(params[2:])
    finish, finish_hyper = None, ()
    if spec.finish is not None:
        finish, fbound = retype(spec.finish, t, "finish")
        bound = {**bound, **fbound}
        fp = list(finish.params)
        if len(fp) < n_acc or len(finish.graph.outputs) != 1:
            raise PairwiseError(f"pairwise: finish {finish.signature()} takes the formula's "
                                f"{n_acc} reduction(s) first and returns one value",
                                argument="finish")
        for k, n in finish.graph.outputs:       # the backward pass multiplies it by G (type t)
            if n.dtype != t:
                raise PairwiseError(f"pairwise: finish {finish.signature()} output {k!r} is "
                                    f"{n.dtype}, not the tensors' {t} (a constant output: "
                                    f"compute it from the reductions, or cast it)",
                                    argument="finish")
        finish_hyper = tuple(fp[n_acc:])
    elif n_acc != 1:
        raise PairwiseError(f"pairwise: formula {elem.signature()} returns {n_acc} terms; "
                            f"give finish= to combine their reductions", argument="finish")
    hyper = tuple(dict.fromkeys((*elem_hyper, *finish_hyper)))
    for h in hyper:
        if h in ("a", "b", "g", "out") or re.fullmatch(r"(acc|s|h|dh)\d+", h):
            raise PairwiseError(f"pairwise: hyperparameter name {h!r} is reserved; rename it",
                                argument=h)
    defaults = {**{k: v for k, v in elem.defaults.items() if k in hyper},
                **{k: v for k, v in (finish.defaults if finish else {}).items() if k in hyper},
                **{k: v for k, v in bound.items() if k in hyper}}
    return Formulas(spec, t, elem, n_acc, hyper, defaults, elem_hyper, finish_hyper, finish)
