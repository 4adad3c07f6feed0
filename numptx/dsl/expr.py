"""``@nx.ptx_expr``: a Python formula as a PTX stub generator with a NumPy reference.

    import numpy as np, numptx as nx

    @nx.ptx_expr                   # or @nx.ptx_expr(precision="accurate"), (fastmath=True, backend="ast")
    def dist(x: nx.f32, y: nx.f32) -> nx.f32:
        return nx.sqrt(x * x + y * y)

    dist(np.float32(3), np.float32(4))             # 5.0: NumPy reference on the declared dtypes
    print(dist.graph)                              # the traced graph, one line per instruction
    stub = dist.stub(inj.sites["combine"])         # x, y -> the site's in variables, z <- result
    stub = dist.stub()                             # registers %x, %y -> %out
    half = dist.bind(y=0.5)                        # y baked in as a constant
    dist.binding(inj.sites["combine"])             # the rules stub(site) and the simulator use

Parameters are typed by annotations (``nx.f32`` ..., NumPy types, or strings such as ``"nx.f32"``)
and default to f32; ``float``/``int``/``bool`` are f64/s64/pred as in NumPy, postponed or not.
A formula returns one value, a tuple or a dict of named outputs. The traced graph is cached
per math mode (``precision``) and the lowered program per backend and output order, so
``stub(site)`` for a new site only binds names and runs the C compiler.
"""
from __future__ import annotations

import weakref
from collections.abc import Mapping as _Mapping
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

from .._program import value_type, compile_lowered
from .._program.interpret import tape_lowered
from . import types as T
from .contract import contract
from .graph import Graph, canonical
from .lower import PASS, Lowered, to_ast, to_stack
from .modes import MODES
from .proxy import PrecisionError
from .signature import analyse, def_frame
from .trace import (EagerTracer, EagerValue, FramedGraphTracer, GraphTracer, Proxy, TraceError,
                    Tracer)

__all__ = ["PtxExpr", "ptx_expr", "BindError", "ArgumentError", "PrecisionError", "PRECISIONS",
           "SiteBinding", "output_order"]

BACKENDS = ("stack", "ast")
_MAX_BINDS = 256            # bound expressions kept per expression (bind() results)
_BINDINGS: dict = {}        # signatures + site variables -> (None, rename, order)


class BindError(TraceError):
    """A formula whose parameters/outputs do not fit a site (count or types); the message shows
    both signatures."""


class ArgumentError(TraceError, TypeError, ValueError):
    """A bad argument to ``ptx_expr`` or a :class:`PtxExpr` method (not a function, an unknown
    backend or keyword, a wrong call of the reference evaluation). Also a TypeError and a
    ValueError: what these mistakes raised before."""


def _check_backend(backend: Any, what: str) -> None:
    if backend not in BACKENDS:
        raise ArgumentError(f"{what}: backend must be one of {', '.join(map(repr, BACKENDS))}, "
                            f"not {backend!r}")


def _flag(value: Any, what: str) -> bool:
    """A bool option (fastmath=); a string or other object is a mistake, not a truth value."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer))
                                               and value in (0, 1)):
        return bool(value)
    raise ArgumentError(f"{what}: fastmath must be True or False, not {value!r}")


PRECISIONS = MODES
"""The math modes ``precision=`` takes: ``"cuda"`` (the default: CUDA C++'s speed and error
bounds, a product and a sum contracted into one fma), ``"accurate"`` (<= 1 ulp, every operation
rounded once, bit-exact in ``nx.emulate``) and ``"fast"`` (``fastmath=True``: ``.approx`` and
``.ftz``, like ``--use_fast_math``). docs/dsl.md, "Precision"."""


def _mode(precision: Any, fastmath: Any, what: str, default: str = "cuda") -> str:
    """The math mode of ``precision=``/``fastmath=`` (None: not given)."""
    fm = None if fastmath is None else _flag(fastmath, what)
    if precision is None:
        return "fast" if fm else (default if default != "fast" or fm is None else "cuda")
    if precision not in MODES:
        raise PrecisionError(f"{what}: unknown precision {precision!r}; the modes are "
                             f"{', '.join(map(repr, MODES))}",
                             fix="precision='cuda' (default), 'accurate' or 'fast'")
    if fm and precision != "fast":
        raise ArgumentError(f"{what}: fastmath=True is precision='fast'; it contradicts "
                            f"precision={precision!r}: pass one of them")
    return precision


def ptx_expr(fn: Callable | None = None, *, precision: str | None = None,
             fastmath: bool = False, backend: str = "stack", **unknown: Any) -> Any:
    """Decorator: ``@nx.ptx_expr`` or ``@nx.ptx_expr(precision="accurate", backend="ast")``.

    ``precision`` is the math mode (:data:`PRECISIONS`): ``"cuda"`` (default) computes as
    CUDA C++ does with NVRTC's default options (a product and a sum contract into one fma; the
    transcendentals are CUDA's own algorithms on the hardware's approximate units, within
    CUDA's documented error); ``"accurate"`` rounds every operation once (no contraction) and
    uses <= 1 ulp sequences, bit-exact in ``nx.emulate``; ``fastmath=True`` (``"fast"``)
    lowers + - * to the contractible ``.ftz`` forms, / sqrt rcp rsqrt to ``.approx.ftz`` and
    the transcendentals to the raw ``.approx`` rows. ``backend`` picks the program form the
    stubs are compiled from (``"stack"``: Stack PTX, ``"ast"``: AST PTX).
    """
    if unknown:
        raise ArgumentError(f"ptx_expr: unknown option {next(iter(unknown))!r}; the options are "
                            f"precision={'/'.join(map(repr, MODES))}, fastmath=True/False and "
                            f"backend={' or '.join(map(repr, BACKENDS))}")
    _check_backend(backend, "ptx_expr")
    mode = _mode(precision, fastmath, "ptx_expr")
    if fn is None:
        return lambda f: PtxExpr(f, precision=mode, backend=backend)
    return PtxExpr(fn, precision=mode, backend=backend)


# function -> (check, analysis): see signature.analyse. Keyed by the function (weakly), not its code:
# closures of one ``def`` differ in their defaults and in what string annotations resolve to.
_SIGNATURES = weakref.WeakKeyDictionary()


class PtxExpr:
    """A traced formula (see the module docstring). Attributes: ``fn``, ``params`` (name ->
    DType of the runtime inputs, in order), ``bound`` (name -> constant), ``precision`` (the
    math mode), ``fastmath`` (``precision == "fast"``), ``backend``."""

    def __init__(self, fn: Callable, *, precision: str | None = None, fastmath: bool = False,
                 backend: str = "stack", bound: Mapping[str, Any] | None = None):
        code = getattr(fn, "__code__", None)
        if code is None:
            raise ArgumentError(f"ptx_expr needs a Python function (def or lambda), not "
                                f"{type(fn).__name__}",
                                fix="decorate a def: @nx.ptx_expr or @nx.ptx_expr(fastmath=True)")
        if backend not in BACKENDS:
            _check_backend(backend, "ptx_expr")
        self.fn, self.backend = fn, backend
        self.precision = _mode(precision, fastmath, "ptx_expr")
        self.__name__ = getattr(fn, "__name__", "expr")
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        ann = getattr(fn, "__annotations__", {}) or {}
        defaults = fn.__defaults__ or ()
        try:
            hit = _SIGNATURES.get(fn)
        except TypeError:                         # not weakly referenceable: no cache
            hit = None
        # the same code, defaults tuple and annotations (by identity: -0.0 == 0.0)
        if hit is None or hit[0][0] is not code or hit[0][1] is not defaults or \
                len(hit[0][2]) != len(ann) or any(
                    ka != kb or va is not vb for (ka, va), (kb, vb) in zip(hit[0][2], ann.items())):
            hit = ((code, defaults, tuple(ann.items())), *analyse(fn, code, defaults, ann))
            try:
                _SIGNATURES[fn] = hit
            except TypeError:
                pass
        _, self.defaults, types, self._n_positional, self.returns, self._want, self._shared = hit
        self.defaults = dict(self.defaults)
        self.all_params = types = dict(types)
        self.bound: dict[str, Any] = {}
        for k, v in (bound or {}).items():
            if k not in types:
                raise TraceError(f"bind: {self.__name__} has no parameter {k!r} (it has "
                                 f"{', '.join(types)})", frame=def_frame(fn))
            self.bound[k] = v
        self.params = {k: t for k, t in types.items() if k not in self.bound} if self.bound \
            else dict(types)
        self._graphs: dict[str, Graph] = {}
        self._lowered: dict[tuple, Lowered] = {}
        self._binds: dict[tuple, PtxExpr] = {}
        self._sites: dict[tuple, tuple] = {}

    @property
    def fastmath(self) -> bool:
        """Whether the math mode is ``"fast"`` (``fastmath=True``)."""
        return self.precision == "fast"

    def _pick(self, fastmath: Any, precision: Any, what: str) -> str:
        """The math mode of a call's ``fastmath=``/``precision=`` (the formula's own if
        neither is given; ``fastmath=False`` keeps a non-fast mode, else is ``"cuda"``)."""
        if precision is None:
            if fastmath is None:
                return self.precision
            if fastmath.__class__ is bool:
                return "fast" if fastmath else ("cuda" if self.precision == "fast"
                                                else self.precision)
        if precision.__class__ is str and fastmath is None and precision in MODES:
            return precision
        return _mode(precision, fastmath, what,
                     default="cuda" if self.precision == "fast" else self.precision)

    # ---- tracing ----------------------------------------------------------------------------------
    def trace(self, fastmath: bool | None = None, precision: str | None = None) -> Graph:
        """The traced graph (cached per math mode)."""
        fm = self._pick(fastmath, precision, "trace")
        g = self._graphs.get(fm)
        if g is None:
            g = self._graphs[fm] = self._trace_new(fm, False)
            ref = weakref.ref(self)
            # source lines are recorded on demand (printing): the fast path skips them
            g.retrace = lambda: (lambda e: e._trace_new(fm, True) if e is not None else None)(ref())
        return g

    def _trace_new(self, fm: str, framed: bool) -> Graph:
        g = Graph(self.__name__)
        tr = (FramedGraphTracer if framed else GraphTracer)(g, fm)
        args = []
        for name, t in self.all_params.items():
            if name in self.bound:
                node = g.const_canonical(self._bound_scalar(name, t), t.name)
            else:
                node = g.input(name, t.name)
            args.append(Proxy(node, tr))
        g.frame = None
        try:
            ret = self._call(args)
        except RecursionError:
            raise self._too_deep() from None
        g.frame = def_frame(self.fn)
        form, outs = self._outputs(ret, tr)
        g.output_form = form
        g.outputs = [(k, v) for k, v in outs]
        return contract(g) if fm == "cuda" else g

    def _too_deep(self) -> TraceError:
        return TraceError(f"tracing {self.__name__} exceeded Python's recursion limit",
                          frame=def_frame(self.fn),
                          fix="a formula cannot call itself: the recursion never ends while "
                              "tracing (loop over range(n) with a Python constant n instead)")

    def _call(self, args: list) -> Any:
        k = self._n_positional
        if k == len(args):
            return self.fn(*args)
        return self.fn(*args[:k], **dict(zip(list(self.all_params)[k:], args[k:])))

    @property
    def graph(self) -> Graph:
        """The traced graph of this expression (print it to see every instruction)."""
        return self.trace()

    def _bound_scalar(self, name: str, t: T.DType):
        v = self.bound[name]
        if isinstance(v, Proxy) or not isinstance(v, (bool, int, float, np.generic)):
            raise TraceError(f"bind({name}=...): a bound value is a Python or NumPy number, "
                             f"not {type(v).__name__}", frame=def_frame(self.fn))
        if isinstance(v, np.generic):
            v = v.item()
        return canonical(v, t.name)

    def _outputs(self, ret: Any, tr: Tracer) -> tuple[str, list]:
        """Normalize the returned value(s) to (form, [(name, node)])."""
        frame = def_frame(self.fn)
        if isinstance(ret, dict):
            form, items = "dict", list(ret.items())
            for k, _ in items:
                if not isinstance(k, str) or not k.isidentifier():
                    raise TraceError(f"{self.__name__} returns a dict with key {k!r}; output "
                                     f"names are identifiers", frame=frame)
        elif isinstance(ret, (tuple, list)):
            form, items = "tuple", [(f"out{i}", v) for i, v in enumerate(ret)]
        else:
            form, items = "single", [("out", ret)]
        if not items:
            raise TraceError(f"{self.__name__} returns nothing", frame=frame,
                             fix="return a value, a tuple or a dict of outputs")
        want = self._want
        if want is not None and len(want) != len(items):
            want = None if form == "dict" else want
            if want is not None:
                raise TraceError(f"{self.__name__} returns {len(items)} value(s) but is annotated "
                                 f"with {len(want)}", frame=frame)
        out = []
        for i, (name, v) in enumerate(items):
            t = want[i] if want is not None else None
            if isinstance(v, Proxy):
                if v.tracer is not tr:
                    raise TraceError(f"output {name!r} comes from another trace", frame=frame)
                got = v.dtype
                if t is not None and got is not t:
                    raise TraceError(f"output {name!r} is {got.name} but {self.__name__} is "
                                     f"annotated -> {t.name}", frame=frame,
                                     fix=f"cast it: nx.{t.name}(value)")
                out.append((name, v.node))
            elif isinstance(v, (bool, int, float, np.generic)):
                if t is None:
                    t = (T.as_dtype(v.dtype) if isinstance(v, np.generic) else
                         T.pred if isinstance(v, bool) else T.s32 if isinstance(v, int) else T.f32)
                out.append((name, tr.cast(v, t).node))
            else:
                raise TraceError(f"{self.__name__} returns {type(v).__name__} for output "
                                 f"{name!r}; return traced values or numbers (one, a tuple or "
                                 f"a dict)", frame=frame)
        return form, out

    # ---- reference evaluation ------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Evaluate on the CPU with NumPy's own functions on the declared dtypes; arguments
        are scalars or arrays (broadcast), converted to the parameter types (bf16: float values
        are rounded, uint16 arrays are taken as bit patterns)."""
        names = list(self.params)
        if len(args) > len(names):
            raise ArgumentError(f"{self.__name__}() takes {len(names)} argument(s) "
                                f"({', '.join(names)}), got {len(args)}")
        values = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in self.params or k in values:
                raise ArgumentError(f"{self.__name__}() got an unexpected or repeated argument "
                                    f"{k!r} (parameters: {', '.join(names)})")
            values[k] = v
        ev = EagerTracer()
        proxies, scalar = [], True
        for name, t in self.all_params.items():
            if name in self.bound:
                v = self.bound[name]
            elif name in values:
                v = values[name]
            elif name in self.defaults:
                v = self.defaults[name]
            else:
                raise ArgumentError(f"{self.__name__}() missing argument {name!r}")
            arr = _as_array(v, t, name)
            scalar = scalar and arr.ndim == 0
            proxies.append(Proxy(EagerValue(arr, t), ev))
        if not scalar:
            try:
                np.broadcast_shapes(*[p.node.value.shape for p in proxies])
            except ValueError:
                shapes = ", ".join(f"{k}: {p.node.value.shape}"
                                   for k, p in zip(self.all_params, proxies))
                raise ArgumentError(f"{self.__name__}(): the argument shapes do not broadcast "
                                    f"({shapes})") from None
        try:
            ret = self._call(proxies)
        except RecursionError:
            raise self._too_deep() from None
        form, outs = self._outputs(ret, ev)
        vals = [n.value[()] if scalar else n.value for _, n in outs]
        if form == "single":
            return vals[0]
        if form == "tuple":
            return tuple(vals)
        return {k: v for (k, _), v in zip(outs, vals)}

    # ---- binding -----------------------------------------------------------------------------------
    def bind(self, *args: Any, **values: Any) -> PtxExpr:
        """A new expression with these parameters baked in as constants (of their declared
        types); the others stay runtime inputs."""
        if args:
            raise ArgumentError(f"bind takes parameters by name: {self.__name__}.bind("
                                f"{next(iter(self.all_params), 'x')}=1.0)")
        key = tuple(sorted((k, repr(v)) for k, v in values.items()))
        binds = self._binds
        hit = binds.pop(key, None)
        if hit is None:
            hit = PtxExpr(self.fn, precision=self.precision, backend=self.backend,
                          bound={**self.bound, **values})
            for k in values:
                hit._bound_scalar(k, self.all_params[k])       # validate now
            if len(binds) >= _MAX_BINDS:        # a search binds thousands of constants: keep
                del binds[next(iter(binds))]    # the most recent ones (least recent out)
        binds[key] = hit
        return hit

    def signature(self) -> str:
        """``dist(x: f32, y: f32) -> out: f32`` (runtime parameters and traced outputs)."""
        g = self.graph
        params = ", ".join(f"{k}: {t.name}" for k, t in self.params.items())
        outs = ", ".join(f"{k}: {n.dtype}" for k, n in g.outputs)
        return f"{self.__name__}({params}) -> {outs}"

    def lowered(self, backend: str | None = None, order: tuple | None = None,
                fastmath: bool | None = None, precision: str | None = None) -> Lowered:
        """The lowered program (cached per math mode, backend and output order)."""
        backend = backend or self.backend
        if backend not in BACKENDS:
            _check_backend(backend, f"{self.__name__}.lowered")
        fm = self._pick(fastmath, precision, f"{self.__name__}.lowered")
        g = self.trace(precision=fm)
        if order is None:
            order = tuple(range(len(g.outputs)))
        key = (fm, backend, order)
        low = self._lowered.get(key)
        if low is None:
            low = (to_stack if backend == "stack" else to_ast)(g, order)
            self._lowered[key] = low
        return low

    def program(self, backend: str | None = None) -> list:
        """The Stack PTX / AST PTX ops (inputs named by parameter, outputs in return order)."""
        return self.lowered(backend).ops

    def stub(self, site: Any = None, *, inputs: Mapping[str, str] | None = None,
             outputs: Mapping[Any, str] | None = None, backend: str | None = None,
             fastmath: bool | None = None, precision: str | None = None):
        """Compile a stub.

        * ``stub(site)``: parameters bind to the site's in/mod variables by name (by
          declaration order when no name matches and the counts match, never when some
          names match and others do not; parameters with
          defaults that the site lacks are baked in); outputs bind to its out/mod variables
          (a dict by name, a tuple in order, a single value to the single output; ``mod``
          variables the formula does not return keep their value). Mismatches raise
          :class:`BindError` showing both signatures.
        * ``stub()``: over registers named after the parameters and outputs (``out`` for a
          single value, ``out0, out1, ...`` for a tuple, the keys of a dict); ``inputs=`` /
          ``outputs=`` rename them (parameter or output name -> register name).
        """
        backend = backend or self.backend
        if backend not in BACKENDS:
            _check_backend(backend, f"{self.__name__}.stub")
        mode = "stack" if backend == "stack" else "ast"
        if site is not None:
            if inputs is not None or outputs is not None:
                raise BindError("pass either a site or inputs=/outputs=, not both")
            if isinstance(site, str):
                raise BindError(f"stub({site!r}): pass the Site itself, inj.sites[{site!r}], or "
                                f"name the registers with inputs=/outputs=")
            # binding(site) without its SiteBinding: ~3 % of a stub for another site
            expr, rename, order = self._bind_site(site)
            low = expr.lowered(backend, order, fastmath, precision)
            return compile_lowered(mode, low.words, low.input_names, rename, None, None, site=site,
                                   routines=low.routines, strict=True, limits=low.limits)
        for what, m in (("inputs", inputs), ("outputs", outputs)):
            if m is not None and not isinstance(m, _Mapping):
                raise BindError(f"{what}= maps {'parameter' if what == 'inputs' else 'output'} "
                                f"names to register names, e.g. {what}={{'x': 'a'}}; not "
                                f"{type(m).__name__}")
        low = self.lowered(backend, None, fastmath, precision)
        g = self.trace(fastmath, precision)
        inputs = dict(inputs or {})
        outputs = dict(outputs or {})
        for k in inputs:
            if k not in self.params:
                raise BindError(f"inputs=: {k!r} is not a parameter of {self.signature()}")
        out_names = [k for k, _ in g.outputs]
        for k in outputs:
            if k not in out_names and not (isinstance(k, int) and 0 <= k < len(out_names)):
                raise BindError(f"outputs=: {k!r} is not an output of {self.signature()}")
        regs_in = {inputs.get(k, k): t.name for k, t in self.params.items()}
        regs_out = {}
        for i, (k, n) in enumerate(g.outputs):
            regs_out[outputs.get(k, outputs.get(i, k))] = n.dtype
        return compile_lowered(mode, low.words, low.input_names, inputs, regs_in, regs_out,
                               routines=low.routines, strict=True, limits=low.limits)

    def tape(self, site: Any, *, backend: str | None = None, fastmath: bool | None = None,
             precision: str | None = None) -> Any:
        """The tape (:func:`numptx.stack_ptx.tapes`) of what :meth:`stub` compiles for
        ``site``: the interpreter's form of the same stub."""
        backend = backend or self.backend
        if backend not in BACKENDS:
            _check_backend(backend, f"{self.__name__}.tape")
        expr, rename, order = self._bind_site(site)
        low = expr.lowered(backend, order, fastmath, precision)
        return tape_lowered("stack" if backend == "stack" else "ast", low.words,
                            low.input_names, rename, site=site, routines=low.routines,
                            limits=low.limits)

    def binding(self, site: Any) -> SiteBinding:
        """How this formula binds to ``site`` (a :class:`SiteBinding`): the one set of rules
        that :meth:`stub` compiles by and numba-cuda's simulator evaluates by (see :meth:`stub`
        for them; a site variable no parameter reads is left unused, and a parameter baked in
        with ``.bind`` is no input, whatever the site has). Raises :class:`BindError`, showing
        both signatures, where the formula does not fit. Cached per site signature."""
        expr, rename, order = self._bind_site(site)
        # a copy: the cached rename is shared by every formula of the same signature
        return SiteBinding(expr, dict(rename), order, site)

    def _bind_site(self, site: Any) -> tuple[PtxExpr, dict, tuple]:
        """:meth:`binding` as (expr, rename, order), which :meth:`stub` compiles by; cached per
        site variable list (sites declaring the same variables bind alike)."""
        g = self.graph
        # fresh expressions of one function (with the same parameters bound) bind alike
        fast_key = (id(site), tuple(self.bound), g.output_form,
                    *[(k, n.dtype) for k, n in g.outputs])
        hit = self._shared.get(fast_key)
        if hit is not None and hit[0] is site:
            return self, hit[1], hit[2]
        try:
            key = site.variables
        except AttributeError:
            raise BindError(f"stub(site): expected a numptx Site (inj.sites[name]), not "
                            f"{type(site).__name__}; or name the registers with "
                            f"inputs=/outputs=") from None
        hit = self._sites.get(key)
        if hit is not None:
            return (self, hit[1], hit[2]) if hit[0] is None else hit
        # the binding depends only on the signatures: share it between expressions
        shape = (tuple((k, t.name) for k, t in self.params.items()),
                 tuple(self.defaults), g.output_form,
                 tuple((k, n.dtype) for k, n in g.outputs), key)
        shared = _BINDINGS.get(shape)
        if shared is not None and shared[0] is None:
            hit = (self, shared[1], shared[2])
        else:
            hit = self._bind_site_uncached(site)
            if hit[0] is self:
                if len(_BINDINGS) > 4096:
                    _BINDINGS.clear()
                _BINDINGS[shape] = (None, hit[1], hit[2])
        # (self is stored as None: no reference cycle, a dropped expression is freed at once)
        self._sites[key] = (None, hit[1], hit[2]) if hit[0] is self else hit
        if hit[0] is self:
            if len(self._shared) > 1024:
                self._shared.clear()
            self._shared[fast_key] = (site, hit[1], hit[2])
        return hit

    def _bind_site_uncached(self, site: Any) -> tuple[PtxExpr, dict, tuple]:
        ins, outs = site.inputs, site.outputs
        in_names = [v.name for v in ins]
        params = list(self.params)

        def fail(why: str) -> BindError:
            return BindError(f"cannot bind {self.signature()} to site {site.signature}: {why}",
                             frame=def_frame(self.fn))
        missing = [p for p in params if p not in in_names]
        if not missing:
            mapping = {p: p for p in params}
        elif len(missing) == len(params) and len(params) == len(ins):
            mapping = dict(zip(params, in_names))      # no name in common: declaration order
        elif all(p in self.defaults for p in missing):
            return self.bind(**{p: self.defaults[p] for p in missing})._bind_site(site)
        elif len(missing) < len(params) and any(v not in params for v in in_names):
            # some names match: the rest are never bound by position (f(accum, r) at
            # force(in r, mod acc) must not read acc as r)
            free = [v for v in in_names if v not in params]
            named = [repr(p) for p in params if p not in missing]
            need = [p for p in missing if p not in self.defaults]    # defaults are baked in
            baked = [p for p in missing if p in self.defaults]
            raise fail(f"parameter(s) {', '.join(map(repr, need))} match no site variable "
                       f"while {', '.join(named)} bind{'s' if len(named) == 1 else ''} by "
                       f"name, so none binds by position; rename "
                       f"{'it' if len(need) == 1 else 'them'} after the site's "
                       f"{', '.join(map(repr, free))}"
                       + (f" ({', '.join(map(repr, baked))}, with a default, is baked in "
                          f"where the site lacks it)" if baked else ""))
        else:
            raise fail(f"{len(params)} parameter(s) for {len(ins)} in/mod variable(s) and "
                       f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not in "
                       f"the site")
        by_name = {v.name: v for v in ins}
        for p, var in mapping.items():
            vt = value_type(by_name[var].dtype, f"site {site.name!r} variable {var!r}")
            if vt != self.params[p].name:
                raise fail(f"parameter {p!r} is {self.params[p].name}, site variable {var!r} is "
                           f"{by_name[var].dtype}")
        g = self.graph
        gout = g.outputs
        try:
            order = output_order(g.output_form, [k for k, _ in gout], outs)
        except BindError as e:
            raise fail(e.reason) from None
        for v, o in zip(outs, order):
            if isinstance(o, int):
                vt = value_type(v.dtype, f"site {site.name!r} variable {v.name!r}")
                if vt != gout[o][1].dtype:
                    raise fail(f"output {gout[o][0]!r} is {gout[o][1].dtype}, site variable "
                               f"{v.name!r} is {v.dtype}")
        rename = dict(mapping)
        for o in order:
            if isinstance(o, str):
                rename[PASS + o] = o
        return self, rename, tuple(order)

    def __repr__(self) -> str:
        params = ", ".join(f"{k}: {t.name}" for k, t in self.params.items())
        extra = "".join(f", {k}={v!r}" for k, v in self.bound.items())
        return f"<ptx_expr {self.__name__}({params}{extra}) precision={self.precision!r} " \
               f"backend={self.backend!r}>"


def output_order(form: str, names: Sequence[str], outputs: Sequence[Any]) -> tuple:
    """The output rule of :meth:`PtxExpr.binding`: per site out/mod variable of ``outputs``
    (with ``.name``, ``.kind``), the index of the formula output it takes, or its own name (a
    mod not returned keeps its value). ``form``: ``"dict"`` (``names`` are the keys), else
    ``"tuple"``/``"single"`` (positions count). Raises :class:`BindError` saying why not.

    >>> from numptx.inject import Variable as V
    >>> output_order("single", ["out"], [V("z", "out", "f32", "f32", "v_z"),
    ...                                  V("acc", "mod", "f32", "f32", "v_acc")])
    (0, 'acc')
    """
    if form == "dict":
        pos = {k: i for i, k in enumerate(names)}
        out_vars = {v.name for v in outputs}
        unknown = [k for k in pos if k not in out_vars]
        if unknown:
            raise BindError(f"output(s) {', '.join(unknown)} are not out/mod variables of the site")
        order: list = []
        for v in outputs:
            if v.name in pos:
                order.append(pos[v.name])
            elif v.kind == "mod":
                order.append(v.name)
            else:
                raise BindError(f"site output {v.name!r} is not returned")
        return tuple(order)
    if len(names) == len(outputs):
        return tuple(range(len(names)))
    if len(names) == sum(v.kind == "out" for v in outputs):
        k = iter(range(len(names)))
        return tuple(next(k) if v.kind == "out" else v.name for v in outputs)
    raise BindError(f"{len(names)} output(s) for {len(outputs)} out/mod variable(s)")


class SiteBinding(NamedTuple):
    """How a formula binds to a site (:meth:`PtxExpr.binding`): what ``expr.stub(site)``
    compiles and numba-cuda's simulator evaluates. ``expr``: the formula compiled there (with
    defaults the site lacks baked in); ``rename``: parameter -> site variable (plus passed-
    through mods, for the lowering; shared, don't change it); ``order``: per ``site.outputs``
    variable, the formula output's index or the variable's own name (a mod not returned)::

        b = dist.binding(inj.sites["combine"])       # combine(in f32 x, in f32 y, out f32 z)
        b.inputs, b.outputs, b.constants             # {'x': 'x', 'y': 'y'}, {'z': 0}, {}
        b.evaluate({"x": 3.0, "y": 4.0})             # {'z': 5.0}
    """
    expr: PtxExpr
    rename: dict
    order: tuple
    site: Any

    @property
    def inputs(self) -> dict[str, str]:
        """Runtime parameter -> the site in/mod variable that feeds it."""
        return {p: v for p, v in self.rename.items() if not p.startswith(PASS)}

    @property
    def outputs(self) -> dict[str, int | None]:
        """Site out/mod variable -> the index of the formula output it takes (None: a mod
        variable the formula does not return, which keeps its value)."""
        return {v.name: o if isinstance(o, int) else None
                for v, o in zip(self.site.outputs, self.order)}

    @property
    def constants(self) -> dict[str, Any]:
        """Parameters baked in as constants (``.bind(...)``, and defaults the site lacks)."""
        return dict(self.expr.bound)

    def evaluate(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The site's out/mod values from its in/mod ``values`` (by variable name; scalars or
        arrays) by the formula's NumPy reference: what the stub computes at the site."""
        expr = self.expr
        r = expr(**{p: values[v] for p, v in self.inputs.items()})
        form = expr.graph.output_form
        results = ([r[k] for k, _ in expr.graph.outputs] if form == "dict" else
                   list(r) if form == "tuple" else [r])
        return {v.name: results[o] if isinstance(o, int) else values[o]
                for v, o in zip(self.site.outputs, self.order)}


def _as_array(v: Any, t: T.DType, name: str = "") -> np.ndarray:
    """A call argument as an array of ``t``'s canonical dtype."""
    if isinstance(v, Proxy):
        raise TraceError("a traced value passed to a reference evaluation",
                         fix="call the formula with NumPy values")
    try:
        return _convert(v, t)
    except (TypeError, ValueError, OverflowError) as e:
        raise ArgumentError(f"argument {name!r}: cannot convert {v!r:.60} to {t.name} ({e})",
                            fix="pass numbers or NumPy arrays") from None


def _convert(v: Any, t: T.DType) -> np.ndarray:
    arr = np.asarray(v)
    kind = arr.dtype.kind
    if kind not in "biuf" and not (kind == "O" and all(
            isinstance(x, (int, float, np.number)) and not isinstance(x, np.complexfloating)
            for x in arr.flat)):                  # (Python ints beyond 64 bits are objects)
        raise TypeError("not a real number" if arr.ndim == 0 else f"{arr.dtype} values")
    if t.name == "bf16":
        if arr.dtype == np.uint16:
            return arr
        from .. import semantics as S
        return S.f64_to_bf16(arr.astype(np.float64)).reshape(arr.shape)
    if arr.dtype != t.np:
        with np.errstate(all="ignore"):
            arr = arr.astype(t.np)
    return arr
