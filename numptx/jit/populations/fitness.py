"""Fitness of a population on a data set: one float per candidate formula, lower is better.

::

    import numpy as np, numptx as nx
    X = np.random.rand(10_000, 2).astype(np.float32)          # n samples, d input columns
    y = X[:, 0] * 2 + X[:, 1]
    scores = nx.fitness([f1, f2, prog3, "mov.f32 %v_p, %v_x0;"], X, y, loss="mse")
    nx.fitness([prog], X, y)                  # one program: a population of one (never prog)

Candidates are ``@nx.ptx_expr`` formulas (parameters bind to the columns by name, or by
position when no name matches and the counts match), Stack PTX programs over inputs
``x0 .. x{d-1}`` (the column names, ``names=`` renames them) or PTX text that reads
``%v_x0 ..`` and writes the prediction to ``%v_p`` (which reads 0 until written);
``%v_cand`` is the candidate's index in its module (``k % per_module``; with
``layout="kernels"`` in its kernel, ``k % per_module % 128``), on either device.

**One float type.** The kernel reads the columns and gives the prediction in one type, f32 or
f64: ``dtype=`` when given, else the type the candidates are written in (a formula's parameter
and result types; a program's float instructions and constants, or where it converts
between the two the type in which its value reaches ``%v_p``; the type a PTX text writes
``%v_p`` with; a user loss's types), else the data's (f64 only when ``X`` is float64, as
``search.regress`` decides). ``X`` and ``y`` are converted to it: float64 data (NumPy's
default, Python lists) round to f32 for f32 candidates, and a value past the f32 range, a NaN
or an infinity in the data is a :class:`FitnessError`. A candidate written in the other type
(in an f64 kernel an f32 program's instructions would find no operands and do nothing), a
population that mixes f32 and f64 candidates without ``dtype=``, and a candidate that reads an
input the data lack (a formula parameter, a program's ``sp.input``, a PTX ``%v_`` register that
is no column) or a program input by position (``sp.input(i)``: the kernel's input 0 is
``cand``) raise :class:`FitnessError` naming the candidate (``.candidate``, its index) and
the type or input: a candidate is never scored in a type it was not written for.

Losses: ``"mse"`` (mean squared error), ``"mae"`` (mean absolute error), ``"rmse"``,
``"pearson"`` (``1 - r``, r the Pearson correlation of prediction and target: 0 is a perfect
linear fit; a constant prediction scores +inf), or an ``@nx.ptx_expr`` ``loss(p, t)`` (by name,
else by position) whose mean over the samples is the score. A candidate that gives a NaN or an
infinity on any sample, or that does not build, scores ``+inf`` (the reason is logged at DEBUG
on ``numptx.jit.populations.fitness``; on a GPU, :meth:`Template.pack_many` 's ``errors`` hold it). Raw PTX
that leaves the candidate early (``ret``, ``exit``) does not build: the kernel reduces whole
warps after it.

**On a GPU** the population is packed (:meth:`Template.pack_many`, modules built in parallel)
into a generated kernel: one launch per module scores every candidate, sums reduced per warp
and added in float64 on the GPU. **Without one** (``device="cpu"``, the default when no GPU is
found) each candidate runs on the CPU: formulas through their NumPy reference (what a
``precision="accurate"`` stub computes, bit for bit, for exact operations; a default ``"cuda"``
stub contracts ``a*b + c`` into one fma and uses CUDA's function algorithms, within their
documented error of it), programs and PTX through the stub emulator (:func:`numptx.emulate`) —
correct and the same script, but some thousand times slower: use it for small data sets and
tests. Raw PTX text is also packed there as on a GPU (nvJitLink, no GPU needed): what ptxas
refuses (operand types that do not fit the kernel's registers) scores ``+inf`` on both. ``device="gpu"`` where there is no GPU raises :class:`~numptx.LaunchError`.
"""
from __future__ import annotations

import functools
import logging
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import site_layout
from ..._program import Stub
from ...data import check_xy, finite, to_float
from ...dsl.emulator import emulate
from ...dsl.expr import PtxExpr, SiteBinding, output_order
from ...errors import NumptxError
from ..errors import LaunchError
from .fitness_interpret import (GPU_INTERPRET_MAX_ROWS, PEARSON_FLAT, interpret_losses,
                                flat_share, is_program, pearson_flat)
from .fitness_checks import Checked, FitnessError, inspect, population
from .fitness_facts import FLOATS, Facts, Float, program_facts, text_facts
from .pack import (DEFAULT_PER_MODULE, MAX_CANDIDATES, PER_KERNEL,  # noqa: F401
                   Population, check_selector, pack_many)
from .pack_kernels import BuildMode, Layout, PerKernel
from ..templates.stubs import resolve_stub
from ..numba.numba_site import SIMULATOR
from ..targets import SiteTarget
from ..templates.template import CudaTemplate

__all__ = ["fitness", "prepare", "Prepared", "FitnessError", "LOSSES", "fitness_template",
           "gpu_available", "device_arch", "losses_from_sums", "PEARSON_FLAT", "pearson_flat"]

log = logging.getLogger(__name__)


LOSSES = ("mse", "mae", "rmse", "pearson")
# site variables of the generated kernel and C++ keywords: no column may take these names
RESERVED_NAMES = frozenset("""cand p t l alignas alignof and asm auto bool break case catch char
    class const constexpr continue decltype default delete do double else enum explicit export
    extern false float for friend goto if inline int long mutable namespace new noexcept not
    nullptr operator or private protected public register return short signed sizeof static
    struct switch template this throw true try typedef typeid typename union unsigned using
    virtual void volatile while xor size_t""".split())
_NP = {"f32": np.dtype(np.float32), "f64": np.dtype(np.float64)}


def _loss_code(loss: Any) -> str:
    """The CUDA that turns prediction ``p`` and target ``t`` into the per-sample terms."""
    if loss in ("mse", "rmse"):
        return "double _nx_d = (double)p - (double)t; _nx_s0 = _nx_d * _nx_d;"
    if loss == "mae":
        return "_nx_s0 = fabs((double)p - (double)t);"
    if loss == "pearson":       # moments about the target mean _nx_c: no cancellation near it
        return ("double _nx_q = (double)p - _nx_c; _nx_s0 = _nx_q; _nx_s1 = _nx_q * _nx_q; "
                "_nx_s2 = _nx_q * ((double)t - _nx_c);")
    return ("_nx_T l;\n        PTX_INJECT(\"loss\", PTX_IN({TT}, p), PTX_IN({TT}, t), "
            "PTX_OUT({TT}, l));\n        _nx_s0 = (double)l; if (!isfinite(l)) _nx_bad = 1.0;")


@functools.lru_cache(maxsize=32)
def _source(d: int, names: tuple[str, ...], ctype: str, tt: str, loss_kind: str) -> str:
    loads = " ".join(f"{ctype} {n} = _nx_X[(size_t)_nx_i * {d} + {j}];"
                     for j, n in enumerate(names))
    ins = ", ".join(f"PTX_IN({tt}, {n})" for n in names)
    body = _loss_code(loss_kind if loss_kind in LOSSES else "user").replace("{TT}", tt)
    # locals are _nx_-prefixed (column names may not be): site variables cand, p, t, l are
    # the names candidates' PTX uses (%v_p)
    return rf'''
typedef {ctype} _nx_T;
extern "C" __global__ void nx_fitness(double* _nx_acc, const _nx_T* _nx_X, const _nx_T* _nx_Y,
                                      int _nx_n, double _nx_c) {{
    unsigned cand = blockIdx.y;
    int _nx_i = blockIdx.x * blockDim.x + threadIdx.x;
    double _nx_s0 = 0.0, _nx_s1 = 0.0, _nx_s2 = 0.0, _nx_bad = 0.0;
    if (_nx_i < _nx_n) {{
        {loads}
        _nx_T p;
        PTX_INJECT("f", PTX_IN(U32, cand), {ins}, PTX_OUT({tt}, p));
        _nx_T t = _nx_Y[_nx_i];
        if (!isfinite(p)) _nx_bad = 1.0;
        {body}
        if (!isfinite(_nx_s0)) _nx_bad = 1.0;
    }}
    for (int _nx_o = 16; _nx_o > 0; _nx_o >>= 1) {{
        _nx_s0 += __shfl_down_sync(0xffffffffu, _nx_s0, _nx_o);
        _nx_s1 += __shfl_down_sync(0xffffffffu, _nx_s1, _nx_o);
        _nx_s2 += __shfl_down_sync(0xffffffffu, _nx_s2, _nx_o);
        _nx_bad += __shfl_down_sync(0xffffffffu, _nx_bad, _nx_o);
    }}
    if ((threadIdx.x & 31) == 0) {{
        double* _nx_a = _nx_acc + 4 * (size_t)cand;
        atomicAdd(_nx_a, _nx_s0); atomicAdd(_nx_a + 1, _nx_s1); atomicAdd(_nx_a + 2, _nx_s2);
        atomicAdd(_nx_a + 3, _nx_bad);
    }}
}}'''


@functools.lru_cache(maxsize=32)
def fitness_template(d: int, names: tuple[str, ...] | None = None, dtype: str = "f32",
                     loss: str = "mse", arch: str = "sm_90") -> CudaTemplate:
    """The generated CUDA kernel :func:`fitness` packs candidates into (NVRTC once per
    shape): site ``f`` takes ``cand`` (u32) and the d columns, gives ``p``; a user loss is site
    ``loss`` (``p``, ``t`` -> ``l``). ``acc[4 * k ...]`` gets candidate k's sums."""
    names = names or tuple(f"x{j}" for j in range(d))
    ctype, tt = {"f32": ("float", "F32"), "f64": ("double", "F64")}[dtype]
    src = _source(d, names, ctype, tt, loss if loss in LOSSES else "user")
    return CudaTemplate(src, entry="nx_fitness", arch=arch)


# ---- the data --------------------------------------------------------------------------------
def _check(X: Any, y: Any, loss: Any, names: Sequence[str] | None):
    """X (n, d) and y (n,) as arrays (not yet converted), the column names."""
    X, y = check_xy(X, y, where="fitness", error=FitnessError)
    if not (isinstance(loss, str) and loss in LOSSES) and not isinstance(loss, PtxExpr):
        raise FitnessError(f"fitness: loss={loss!r}: use one of {', '.join(LOSSES)} or an "
                           f"@nx.ptx_expr loss(p, t)")
    d = X.shape[1]
    names = tuple(names) if names is not None else tuple(f"x{j}" for j in range(d))
    bad = [n for n in names if not isinstance(n, str) or not n.isidentifier() or
           not n.isascii() or n in RESERVED_NAMES or n.startswith("_nx_")]
    if bad or len(names) != d or len(set(names)) != d:
        raise FitnessError(f"fitness: names= gives {d} distinct identifiers for the columns, "
                           f"none of cand, p, t, l (the kernel's site variables), a C++ keyword "
                           f"or _nx_*; got {names!r}")
    return X, y, names


def _loss_facts(loss: Any) -> Facts:
    """A user loss's float type (a built-in loss's name: none); one that does not trace or
    does not take (p, t) and give one float is a :class:`FitnessError` naming ``loss=``."""
    if not isinstance(loss, PtxExpr):
        return Facts()
    try:
        loss.graph                               # traced here: its errors name the loss
    except Exception as e:   # noqa: BLE001 - the user's function raised while tracing
        raise FitnessError(f"fitness: loss={loss.__name__} does not trace: "
                           f"{type(e).__name__}: {e}") from None
    p = list(loss.params)
    if len(p) != 2 or (len(set(p) & {"p", "t"}) == 1):
        raise FitnessError(f"fitness: loss={loss.signature()}: a loss takes two parameters, "
                           f"the prediction and the target: named p and t, or any two other "
                           f"names (bound in that order)")
    kinds = {t.name for t in loss.params.values()} | {n.dtype for _, n in loss.graph.outputs}
    if len(kinds) != 1 or not kinds <= set(FLOATS) or len(loss.graph.outputs) != 1:
        raise FitnessError(f"fitness: loss={loss.signature()}: a loss takes and gives one "
                           f"float type (f32 or f64), one value")
    return Facts(kinds.pop(), f"loss {loss.signature()}")


def _convert(what: str, a: np.ndarray, dtype: str) -> np.ndarray:
    """``a`` as C-contiguous ``dtype``; NaN, infinity and values past its range are refused
    (every candidate would score +inf on them): :mod:`numptx.data`'s checks."""
    finite(what, a, where="fitness", error=FitnessError, why="every candidate would score +inf")
    return to_float(what, a, _NP[dtype], where="fitness", error=FitnessError,
                    hint=f"the kernel runs in {dtype}; rescale the data, or score f64 "
                         f"candidates (dtype='f64')")


@dataclass(frozen=True)
class Prepared:
    """What :func:`fitness` scores, after its checks: the candidates (formulas with the
    defaults of parameters the columns lack baked in), the data converted to ``dtype`` and the
    column names. ``fitness_template(X.shape[1], names, dtype, ...)`` is the kernel."""
    candidates: list
    X: np.ndarray
    y: np.ndarray
    names: tuple[str, ...]
    dtype: str


def prepare(candidates: Iterable[Any], X: Any, y: Any, loss: Any = "mse", *,
            names: Sequence[str] | None = None, dtype: str | None = None) -> Prepared:
    """Check a population and a data set as :func:`fitness` does and decide the kernel's
    float type (the module documentation says how): ``prepare(pop, X, y).dtype``."""
    X, y, names = _check(X, y, loss, names)
    if dtype is not None and not (isinstance(dtype, str) and dtype.lower() in FLOATS):
        raise FitnessError(f"fitness: dtype={dtype!r}: the kernel runs in 'f32' or 'f64' (or "
                           f"None: the candidates' type)")
    lf = _loss_facts(loss)
    checked = inspect(population(candidates), names)
    dt = _decide(checked, lf, dtype.lower() if dtype else None,     # type: ignore[arg-type]
                "f64" if X.dtype == np.float64 else "f32", names)
    return Prepared(checked.candidates, _convert("X", X, dt), _convert("y", y, dt), names, dt)


def _decide(checked: Checked, loss: Facts, dtype: Float | None, data: Float,
           names: tuple[str, ...]) -> Float:
    """The kernel's float type: ``dtype`` when given, else the candidates' (and the loss's),
    else ``data`` (the data's); a candidate of another type, or f32 and f64 candidates
    together, raise naming them. Tentative facts are confirmed where they decide."""
    cands, facts = checked.candidates, checked.facts
    variables = frozenset(("cand", "p") + names)

    def of(i: int) -> Facts:                  # -1: the loss
        if i < 0:
            return loss
        if facts[i].tentative:
            facts[i] = text_facts(cands[i], variables)
        return facts[i]

    def first(fits: Callable[[str], bool]) -> int | None:
        for i in range(-1, len(facts)):
            f = loss if i < 0 else facts[i]
            if f.dtype and fits(f.dtype):
                t = of(i).dtype               # a text the parser refuses has no type
                if t and fits(t):
                    return i
        return None

    def why(i: int) -> str:
        f = of(i)
        if f.why or i < 0:
            return f.why
        c = cands[i]
        return (text_facts(c, variables) if isinstance(c, str) else
                program_facts(c, ("cand",) + names)).why

    who = (lambda i: "the loss" if i < 0 else f"candidate {i}")
    present = {f.dtype for f in facts} | {loss.dtype}
    if dtype is None:
        a, b = (first(t.__eq__) if t in present else None for t in FLOATS)
        if a is not None and b is not None:
            raise FitnessError(f"fitness: {who(a)} is f32 ({why(a)}) and {who(b)} is f64 "
                               f"({why(b)}): the kernel runs one float type; score them in "
                               f"two calls", candidate=b if b >= 0 else None)
        dtype = "f32" if a is not None else "f64" if b is not None else data
    i = first(dtype.__ne__) if present - {None, dtype} else None
    if i is not None:
        t = of(i).dtype
        raise FitnessError(f"fitness: {who(i)} is written in {t} ({why(i)}) but "
                           f"dtype={dtype!r}: it does not run in an {dtype} kernel (a "
                           f"program's {t} instructions find no operands there and "
                           f"do nothing); pass dtype={t!r} (the data are converted) "
                           f"or write it in {dtype}", candidate=i if i >= 0 else None)
    return dtype


def _by_position(c: PtxExpr, names: tuple[str, ...], site: Any) -> SiteBinding:
    """A formula whose parameters name no column, bound to the columns in order (prepare
    checked the counts); its results to ``p`` by the rules of ``stub(site)``."""
    g = c.graph
    order = output_order(g.output_form, [k for k, _ in g.outputs], site.outputs)
    return SiteBinding(c, dict(zip(c.params, names)), order, site)


@dataclass(frozen=True)
class _ByPosition:
    """:func:`_by_position` as a pack's candidate: compiled when the pack asks, so that its
    errors (a body that raises, results that do not fit) are the candidate's."""
    expr: PtxExpr
    names: tuple[str, ...]

    @property
    def graph(self) -> Any:                  # the math library's constants (jit.patch)
        return self.expr.graph

    def stub(self, site: Any) -> str:
        b, reg = _by_position(self.expr, self.names, site), site_layout.reg_name
        return self.expr.stub(inputs={p: reg(v) for p, v in b.inputs.items()},
                              outputs={o: reg(v) for v, o in b.outputs.items()})


def _adapt(c: Any, names: tuple[str, ...]) -> Any:
    """A formula whose parameters are no column binds by position (:class:`_ByPosition`)."""
    if isinstance(c, PtxExpr) and not set(c.params) <= set(names):
        return _ByPosition(c, names)
    return c


# ---- scoring on the CPU ----------------------------------------------------------------------
def _loss_binding(loss: Any, tmpl: SiteTarget) -> SiteBinding | None:
    """A user loss bound to the kernel's ``loss`` site by the rules of its ``stub(site)``
    (what the GPU compiles and the CPU evaluates); one that does not fit is refused."""
    if not isinstance(loss, PtxExpr):
        return None
    try:
        return loss.binding(tmpl.sites["loss"])
    except NumptxError as e:
        raise FitnessError(f"fitness: loss={loss.__name__} does not fit the kernel's loss site "
                           f"(p, t -> l; a dict result binds by name, so {{'l': ...}}): "
                           f"{e}") from None


def _score(pred: np.ndarray, t: np.ndarray, loss: Any) -> float:
    with np.errstate(all="ignore"):
        p = pred.astype(np.float64)
        if not np.all(np.isfinite(p)):
            return math.inf
        tt = t.astype(np.float64)
        if loss == "mse":
            s = float(np.mean((p - tt) ** 2))
        elif loss == "rmse":
            s = math.sqrt(float(np.mean((p - tt) ** 2)))
        elif loss == "mae":
            s = float(np.mean(np.abs(p - tt)))
        elif loss == "pearson":
            sp_, st = p.std(), tt.std()
            flat = pearson_flat(sp_ * sp_, np.mean(p * p), flat_share(t.dtype))
            r = float(np.mean((p - p.mean()) * (tt - tt.mean())) / (sp_ * st)) \
                if sp_ and st and not flat else None
            # (r not finite: moments that overflowed; max(0.0, 1.0 - nan) would be a perfect 0.0)
            s = math.inf if r is None or not math.isfinite(r) else max(0.0, 1.0 - r)
        else:       # a user loss's SiteBinding: as the kernel's loss site binds it
            s = float(np.mean(np.asarray(loss.evaluate({"p": pred, "t": t})["l"], np.float64)))
    return s if math.isfinite(s) else math.inf


def _predict_cpu(c: Any, X: np.ndarray, names: tuple[str, ...], site, cand: int) -> np.ndarray:
    """Candidate ``c``'s predictions, as its module on a GPU computes them: ``cand`` is its
    index in the module, and ``p`` reads 0 where the candidate does not write it (the pack
    zero-fills out variables before its dispatch)."""
    cols = {n: X[:, j] for j, n in enumerate(names)}
    vt = "f64" if X.dtype == np.float64 else "f32"
    if isinstance(c, PtxExpr):
        # what the GPU build compiles, with its binding errors
        resolve_stub(_adapt(c, names), site, packed=True)
        # the rules stub(site) compiles by: parameters by name, else in order
        b = c.binding(site) if set(c.params) <= set(names) else _by_position(c, names, site)
        out = b.evaluate(cols | {"cand": np.uint32(cand)})["p"]
        return np.broadcast_to(np.asarray(out), (X.shape[0],))
    # refused as a pack refuses it (raw text that leaves early, branches out, ...): +inf
    text = resolve_stub(c, site, packed=True)
    reg = site_layout.reg_name
    got = emulate(text, {reg(n): v for n, v in cols.items()} |
                  {reg("cand"): np.uint32(cand), reg("p"): np.zeros((), X.dtype)},
                  {reg("p"): vt})
    return np.broadcast_to(np.asarray(got[reg("p")]), (X.shape[0],))


def fitness(candidates: Iterable[Any], X: Any, y: Any, loss: Any = "mse", *,
            names: Sequence[str] | None = None, dtype: str | None = None,
            device: str = "auto", per_module: int = DEFAULT_PER_MODULE,
            executor: Executor | None = None, block: int = 256,
            evaluate: str = "auto", layout: Layout = "function",
            build: BuildMode = "full") -> np.ndarray:
    """Score each candidate on the data set ``X`` (n × d), ``y`` (n): an array of one float64
    per candidate, ``+inf`` for a candidate that fails to build or gives NaN/inf (see the
    module documentation)::

        scores = nx.fitness([f, prog, "mov.f32 %v_p, %v_x1;"], X, y, loss="mae")

    ``dtype``: ``"f32"`` or ``"f64"``, the kernel's float type (default: the candidates'; a
    candidate of the other type raises :class:`FitnessError`). ``device``: ``"gpu"``,
    ``"cpu"`` or ``"auto"`` (the GPU when there is one). ``evaluate``: ``"compile"`` (each
    candidate's stub: packed and assembled on a GPU, emulated on the CPU), ``"interpret"``
    (Stack PTX programs run by the batch interpreter, :func:`numptx.stack_ptx.interpret`, no
    assembly; any other candidate, a user loss or a row the interpreter lacks raises) or
    ``"auto"``: the interpreter for the programs it runs (on a GPU up to
    ``GPU_INTERPRET_MAX_ROWS`` rows, docs/interpret.md "The crossover") and the compiled path
    for the rest. ``layout`` and ``build``: how each module is made (``"kernels"``: one kernel
    per 128 candidates; ``"fast"``: a screening build; :mod:`numptx.jit.populations.pack_kernels`).
    ``executor``: an Executor, or a Dask ``Client`` (:mod:`numptx.jit.compile.farm`)."""
    if device not in ("auto", "cpu", "gpu"):
        raise FitnessError(f"fitness: device={device!r}: use 'auto', 'cpu' or 'gpu'")
    if evaluate not in ("auto", "interpret", "compile"):
        raise FitnessError(f"fitness: evaluate={evaluate!r}: use 'auto', 'interpret' or "
                           f"'compile'")
    if isinstance(block, bool) or not isinstance(block, int) or block % 32 or not 32 <= block <= 1024:
        raise FitnessError(f"fitness: block={block!r}: a multiple of 32 from 32 to 1024 (the "
                           f"kernel reduces whole warps)")
    if isinstance(per_module, bool) or not isinstance(per_module, int) or \
            not 1 <= per_module <= MAX_CANDIDATES:
        raise FitnessError(f"fitness: per_module={per_module!r}: an int from 1 to "
                           f"{MAX_CANDIDATES} (candidates a module)")
    if device == "gpu" and not gpu_available():
        why = ("numba-cuda's simulator (NUMBA_ENABLE_CUDASIM=1) runs no CUDA C++" if SIMULATOR
               else "numba-cuda finds no CUDA GPU or driver")
        raise LaunchError(f"fitness: device='gpu' but no CUDA GPU is available here ({why}): "
                          f"use device='cpu' (the emulator: the same scores, slower) or "
                          f"device='auto' (the GPU when there is one)")
    if layout not in ("function", "kernels") or build not in ("full", "fast"):
        raise FitnessError(f"fitness: layout={layout!r}, build={build!r}: layout 'function' or "
                           f"'kernels', build 'full' or 'fast'")
    shape = _Modules(per_module, executor, layout, build)
    job = prepare(candidates, X, y, loss, names=names, dtype=dtype)
    cands, X, y, names = job.candidates, job.X, job.y, job.names
    loss_key = loss if isinstance(loss, str) else "user"
    if device == "auto":
        device = "gpu" if gpu_available() else "cpu"
    tmpl = fitness_template(X.shape[1], names, job.dtype, loss_key,
                            device_arch() if device == "gpu" else "sm_90")
    bound = _loss_binding(loss, tmpl)
    out = None
    if evaluate == "interpret" or (evaluate == "auto" and (
            device == "cpu" or X.shape[0] <= GPU_INTERPRET_MAX_ROWS)):
        out = _interpreted(cands, X, y, names, loss, tmpl, strict=evaluate == "interpret",
                           device=device)
        if out is not None and not np.isnan(out).any():
            return out
    if device == "cpu":
        left = None if out is None else np.flatnonzero(np.isnan(out)).tolist()
        got = _fitness_cpu(tmpl, cands, X, y, names, loss, bound or loss, shape, left)
        if out is None:
            return got
        out[left] = got
        return out
    got = _fitness_gpu(tmpl, [_adapt(c, names) for c in cands], X, y, loss, shape, block)
    if out is None:
        return got
    left = np.isnan(out)                 # (module positions decide cand: the whole batch ran)
    out[left] = got[left]
    return out


def _interpreted(cands: list, X: np.ndarray, y: np.ndarray, names: tuple[str, ...], loss: Any,
                 tmpl: SiteTarget, strict: bool, device: str = "cpu") -> np.ndarray | None:
    """The losses the batch interpreter gives (NaN: left to the compiled path), or None when
    it scores none; ``strict`` (evaluate="interpret"): what it cannot score raises."""
    progs = [k for k, c in enumerate(cands) if is_program(c)]
    if strict:
        is_prog = set(progs)
        other = next((k for k in range(len(cands)) if k not in is_prog), None)
        if other is not None:
            raise FitnessError(f"fitness: evaluate='interpret' runs Stack PTX programs; "
                               f"candidate {other} is a {type(cands[other]).__name__}: use "
                               f"evaluate='auto' (the interpreter where it can) or 'compile'",
                               candidate=other)
        if not isinstance(loss, str):
            raise FitnessError("fitness: evaluate='interpret' scores the built-in losses "
                               f"({', '.join(LOSSES)}); a user loss needs evaluate='compile'")
    if not progs or not isinstance(loss, str):
        return None
    got, rest = interpret_losses([cands[k] for k in progs], X, y, names, loss, tmpl.sites["f"],
                                 device=device)
    if strict and rest:
        j, why = next(iter(rest.items()))
        raise FitnessError(f"fitness: evaluate='interpret': candidate {progs[j]}: {why}; use "
                           f"evaluate='auto' to score it with the compiled path",
                           candidate=progs[j])
    out = np.full(len(cands), np.nan)
    out[progs] = got
    return out


@dataclass(frozen=True)
class _Modules:
    """How fitness builds its modules: candidates a module, the executor, layout and build."""
    per_module: int
    executor: Any
    layout: Layout
    build: BuildMode


def _packs(tmpl: SiteTarget, cands: list, loss: Any, m: _Modules) -> list:
    extra = {"loss": loss} if isinstance(loss, PtxExpr) else {}
    return pack_many(tmpl, "f", cands, select="cand", per_module=m.per_module,
                     executor=m.executor, layout=m.layout, build=m.build, stubs=extra)


def _refused_by_the_build(tmpl: SiteTarget, cands: list, names: tuple[str, ...], loss: Any,
                          m: _Modules) -> dict[int, Exception]:
    """The CPU path's candidates that the GPU path's packs refuse (index -> the pack's
    error). Raw PTX (text numptx did not compile: a ``str``, a user object's ``.stub``) is
    packed as on a GPU, by nvJitLink: ptxas refuses operand types that do not fit the
    kernel's registers, which the emulator does not check. Numptx's own stubs fit by
    construction: no build when there is no raw text."""
    if all(isinstance(c, (PtxExpr, list, tuple, np.ndarray)) or type(c) is Stub
           for c in cands):
        return {}
    with warnings.catch_warnings():     # the CPU path's own resolve_stub warns of the same
        warnings.simplefilter("ignore")
        packs = _packs(tmpl, [_adapt(c, names) for c in cands], loss, m)
        for p in packs:
            if not p.empty:
                try:
                    p.cubin                   # ptxas: the candidates it refuses join errors
                except NumptxError as e:      # none fits: each is in errors
                    log.debug("numptx.fitness: module at %d: %s", p.offset, e)
    return {k: e for p in packs for k, e in p.errors.items()}


def _fitness_cpu(tmpl: SiteTarget, cands: list, X: np.ndarray, y: np.ndarray,
                 names: tuple[str, ...], loss: Any, scorer: Any, m: _Modules,
                 only: list[int] | None = None) -> np.ndarray:
    """Each candidate on the CPU (see the module documentation), as its module on a GPU;
    ``scorer``: a built-in loss's name or a user loss's :class:`SiteBinding`. ``only``: the
    indices to score (their losses, in order), each still at its own index."""
    site = tmpl.sites["f"]
    refused = _refused_by_the_build(tmpl, cands, names, loss, m)
    ks = range(len(cands)) if only is None else only
    out = np.empty(len(ks))
    for j, k in enumerate(ks):
        c = cands[k]
        if k in refused:                    # what the GPU's pack refuses: +inf there too
            why = str(refused[k])               # "candidate k: ...", the pack's words
            log.debug("numptx.fitness: %s", why if why.startswith(f"candidate {k}:")
                      else f"candidate {k}: {why}")
            out[j] = math.inf
            continue
        try:
            pred = _predict_cpu(c, X, names, site, _selector(k, m))
        except Exception as e:   # noqa: BLE001 - a candidate that does not run scores +inf
            log.debug("numptx.fitness: candidate %d: %s", k, e)
            out[j] = math.inf
            continue
        out[j] = _score(pred, y, scorer)
    return out


def gpu_available() -> bool:
    """Whether a CUDA GPU runs the generated kernel (never under numba-cuda's simulator)."""
    if SIMULATOR:               # numba-cuda's simulator runs no CUDA C++
        return False
    try:
        from numba import cuda
        return bool(cuda.is_available())
    except Exception:   # noqa: BLE001 - no driver, no numba-cuda: the CPU it is
        return False


def device_arch() -> str:
    """The current GPU's architecture: the generated kernel is compiled for it."""
    from numba import cuda
    cc = cuda.get_current_device().compute_capability
    return f"sm_{cc[0]}{cc[1]}"


def _selector(k: int, m: _Modules) -> int:
    """What ``%v_cand`` reads for candidate ``k``: its index in its module, or in its kernel
    (``layout="kernels"``)."""
    k %= m.per_module
    return k % PER_KERNEL if m.layout == "kernels" else k


def _fitness_gpu(tmpl: SiteTarget, cands: list, X: np.ndarray, y: np.ndarray, loss: Any,
                 m: _Modules, block: int) -> np.ndarray:
    from numba import cuda
    packs = _packs(tmpl, cands, loss, m)
    n = X.shape[0]
    yy = y.astype(np.float64)
    c = float(yy.mean())                      # pearson's moments are taken about it
    dX, dy = cuda.to_device(X), cuda.to_device(y)
    acc = cuda.to_device(np.zeros((len(cands), 4)))
    for p in packs:
        if p.empty:                           # no candidate of the module works: all +inf
            continue
        at = p.offset
        p[PerKernel(lambda k: (((n + block - 1) // block, len(k)), block))](
            PerKernel(lambda k, at=at: acc[at + k.start:at + k.stop]), dX, dy, n, c)
    return losses_from_sums(acc.copy_to_host(), y, loss if isinstance(loss, str) else "mse",
                            {i for p in packs for i in p.errors})


#: the least share of their mean square a variance taken from the kernel's float64 sums about
#: the target's mean must have to be read: its rounding (some epsilons of the mean square) moves
#: pearson's loss by about epsilon / share, so 1e6 float64 epsilons keep a loss within ~1e-6
#: of the interpreter's two-pass moments (64 epsilons, before, let y = 3e6 + f(x) score its
#: exact program 0.0046, the interpreter 2e-16)
SUMS_ROUNDING = 1e6 * float(np.finfo(np.float64).eps)


def losses_from_sums(sums: np.ndarray, y: np.ndarray, loss: str,
                     bad: Iterable[int] = ()) -> np.ndarray:
    """The losses from the fitness kernel's per-candidate sums (``sums[k]``: s0, s1, s2 and
    the count of non-finite rows; a user loss reduces as ``"mse"``: the mean of s0): +inf for
    the candidates in ``bad`` and where a row was not finite. Pearson's moments are taken
    about the target's mean."""
    n = len(y)
    var_t = float(np.asarray(y, np.float64).var())
    c = float(np.asarray(y, np.float64).mean())         # the kernel's shift (fitness_sums)
    share = flat_share(np.asarray(y).dtype)             # the flat rule's, y of the data's type
    bad = set(bad)
    out = np.full(len(sums), math.inf)
    for k, (s0, s1, s2, nbad) in enumerate(np.asarray(sums, np.float64).tolist()):
        if k in bad or nbad > 0:
            continue
        if loss in ("mse", "mae"):
            s = s0 / n
        elif loss == "rmse":
            s = math.sqrt(s0 / n)
        else:           # pearson from moments of q = p - c, c the target mean
            mq = s0 / n
            vq = s1 / n - mq * mq
            # a variance lost in rounding (constant predictions) is no variance; moments
            # that overflow (NaN) are none either (max(0.0, nan) would score a perfect 0.0)
            ms_p = s1 / n + 2.0 * c * mq + c * c          # p = q + c: E[p^2]
            # vq = E[q^2] - E[q]^2 cancels: below SUMS_ROUNDING of E[q^2] the sums cannot
            # tell a variance from its rounding (a prediction of unit scale against a
            # target at 1e7 + ..., which the interpreter's two-pass moments still resolve)
            lost = vq <= SUMS_ROUNDING * (s1 / n)
            r = (math.nan if pearson_flat(vq, ms_p, share) or lost or var_t <= 0
                 else (s2 / n) / math.sqrt(vq * var_t))
            s = max(0.0, 1.0 - r) if math.isfinite(r) else math.inf
        out[k] = s if math.isfinite(s) else math.inf
    return out
