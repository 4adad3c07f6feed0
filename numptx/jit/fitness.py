"""Fitness of a population on a data set: one float per candidate formula, lower is better.

::

    import numpy as np, numptx as nx
    X = np.random.rand(10_000, 2).astype(np.float32)          # n samples, d input columns
    y = X[:, 0] * 2 + X[:, 1]
    scores = nx.fitness([f1, f2, prog3, "mov.f32 %v_y, %v_x0;"], X, y, loss="mse")

Candidates are ``@nx.ptx_expr`` formulas (parameters bind to the columns by name, or by
position when the names differ), Stack PTX programs over inputs ``x0 .. x{d-1}`` (the column
names, ``names=`` renames them) or PTX text over ``%v_x0 ..`` and ``%v_y``.

Losses: ``"mse"`` (mean squared error), ``"mae"`` (mean absolute error), ``"rmse"``,
``"pearson"`` (``1 - r``, r the Pearson correlation of prediction and target: 0 is a perfect
linear fit; a constant prediction scores +inf), or an ``@nx.ptx_expr`` ``loss(pred, target)``
whose mean over the samples is the score. A candidate that gives a NaN or an infinity on any
sample, or that does not build, scores ``+inf``.

**On a GPU** the population is packed (:meth:`Template.pack_many`, modules built in parallel)
into a generated kernel: one launch per module scores every candidate, sums reduced per warp
and added in float64 on the GPU. **Without one** (``device="cpu"``, the default when no GPU is
found) each candidate runs on the CPU: formulas through their NumPy reference (what a
``precision="accurate"`` stub computes, bit for bit, for exact operations; a default ``"cuda"``
stub contracts ``a*b + c`` into one fma and uses CUDA's function algorithms, within their
documented error of it), programs and PTX through the stub emulator (:func:`numptx.emulate`) —
correct and the same script, but some thousand times slower: use it for small data sets and
tests.
"""
from __future__ import annotations

import functools
import logging
import math
from collections.abc import Iterable, Sequence
from concurrent.futures import Executor
from typing import Any

import numpy as np

from .. import site_layout
from ..dsl.emulator import emulate
from ..dsl.expr import PtxExpr
from ..errors import NumptxError
from .pack import DEFAULT_PER_MODULE, Population, check_selector  # noqa: F401
from .stubs import resolve_stub
from .numba_site import SIMULATOR
from .template import CudaTemplate

__all__ = ["fitness", "FitnessError", "LOSSES", "fitness_template", "gpu_available", "device_arch"]

log = logging.getLogger(__name__)

LOSSES = ("mse", "mae", "rmse", "pearson")
# site variables of the generated kernel and C++ keywords: no column may take these names
_RESERVED = frozenset("""cand p t l alignas alignof and asm auto bool break case catch char
    class const constexpr continue decltype default delete do double else enum explicit export
    extern false float for friend goto if inline int long mutable namespace new noexcept not
    nullptr operator or private protected public register return short signed sizeof static
    struct switch template this throw true try typedef typeid typename union unsigned using
    virtual void volatile while xor size_t""".split())
_TYPES = {np.dtype(np.float32): ("f32", "float", "F32"), np.dtype(np.float64): ("f64", "double", "F64")}


class FitnessError(NumptxError):
    """Bad arguments to :func:`fitness` (shapes, loss, names); ``candidate`` is None."""


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


def _check(X: Any, y: Any, loss: Any, names: Sequence[str] | None):
    X, y = np.asarray(X), np.asarray(y)
    for what, a in (("X", X), ("y", y)):
        if a.dtype.kind not in "biuf":
            raise FitnessError(f"fitness: {what} holds {a.dtype} values; it takes real numbers")
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise FitnessError(f"fitness: X is an (n samples, d columns) array, got shape {X.shape}")
    if y.shape != (X.shape[0],):
        raise FitnessError(f"fitness: y has shape {y.shape}; it needs one target per sample "
                           f"({X.shape[0]},)")
    dt = np.result_type(X.dtype, y.dtype)
    dt = np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)
    if not (isinstance(loss, str) and loss in LOSSES) and not isinstance(loss, PtxExpr):
        raise FitnessError(f"fitness: loss={loss!r}: use one of {', '.join(LOSSES)} or an "
                           f"@nx.ptx_expr loss(pred, target)")
    d = X.shape[1]
    names = tuple(names) if names is not None else tuple(f"x{j}" for j in range(d))
    bad = [n for n in names if not isinstance(n, str) or not n.isidentifier() or
           not n.isascii() or n in _RESERVED or n.startswith("_nx_")]
    if len(names) != d or len(set(names)) != d or bad:
        raise FitnessError(f"fitness: names= gives {d} distinct identifiers for the columns, "
                           f"none of cand, p, t, l (the kernel's site variables), a C++ keyword "
                           f"or _nx_*; got {names!r}")
    return np.ascontiguousarray(X, dt), np.ascontiguousarray(y, dt), names


def _adapt(c: Any, names: tuple[str, ...], vt: str) -> Any:
    """A formula whose parameter names are not the columns' binds by position: its stub over
    the site registers (bind by name needs no help; programs and PTX use the names as given)."""
    if isinstance(c, PtxExpr) and not set(c.params) <= set(names) and len(c.params) == len(names):
        return c.stub(inputs={p: site_layout.reg_name(n) for p, n in zip(c.params, names)},
                      outputs={"out": site_layout.reg_name("p")})
    return c


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
            r = float(np.mean((p - p.mean()) * (tt - tt.mean())) / (sp_ * st)) if sp_ and st else None
            s = math.inf if r is None else max(0.0, 1.0 - r)
        else:
            s = float(np.mean(np.asarray(loss(pred, t), np.float64)))
    return s if math.isfinite(s) else math.inf


def _predict_cpu(c: Any, X: np.ndarray, names: tuple[str, ...], site) -> np.ndarray:
    cols = {n: X[:, j] for j, n in enumerate(names)}
    if isinstance(c, PtxExpr):
        # what the GPU build compiles, with its binding errors (a formula of other types)
        vt = "f64" if X.dtype == np.float64 else "f32"
        if any(t.name != vt for t in c.params.values()):
            raise NumptxError(f"{c.signature()}: the data are {vt}")
        resolve_stub(_adapt(c, names, vt), site)
        if set(c.params) <= set(names):
            out = c(**{k: cols[k] for k in c.params})
        elif len(c.params) == len(names):
            out = c(*cols.values())
        else:
            raise NumptxError(f"cannot bind {c.signature()} to the columns {', '.join(names)}")
        if isinstance(out, (tuple, list, dict)):
            raise NumptxError(f"{c.signature()}: a candidate gives one value")
        return np.broadcast_to(np.asarray(out), (X.shape[0],))
    text = resolve_stub(c, site)
    reg = site_layout.reg_name
    got = emulate(text, {reg(n): v for n, v in cols.items()} | {reg("cand"): np.uint32(0)},
                  {reg("p"): "f32" if X.dtype == np.float32 else "f64"})
    return np.broadcast_to(np.asarray(got[reg("p")]), (X.shape[0],))


def fitness(candidates: Iterable[Any], X: Any, y: Any, loss: Any = "mse", *,
            names: Sequence[str] | None = None, device: str = "auto",
            per_module: int = DEFAULT_PER_MODULE, executor: Executor | None = None,
            block: int = 256) -> np.ndarray:
    """Score each candidate on the data set ``X`` (n × d), ``y`` (n): an array of one float64
    per candidate, ``+inf`` for a candidate that fails to build or gives NaN/inf (see the
    module documentation). ``device``: ``"gpu"``, ``"cpu"`` or ``"auto"`` (the GPU when there
    is one)."""
    X, y, names = _check(X, y, loss, names)
    cands = list(candidates)
    if not cands:
        raise FitnessError("fitness: an empty population")
    if device not in ("auto", "cpu", "gpu"):
        raise FitnessError(f"fitness: device={device!r}: use 'auto', 'cpu' or 'gpu'")
    if isinstance(block, bool) or not isinstance(block, int) or block % 32 or not 32 <= block <= 1024:
        raise FitnessError(f"fitness: block={block!r}: a multiple of 32 from 32 to 1024 (the "
                           f"kernel reduces whole warps)")
    vt = "f64" if X.dtype == np.float64 else "f32"
    loss_key = loss if isinstance(loss, str) else "user"
    if device == "auto":
        device = "gpu" if gpu_available() else "cpu"
    tmpl = fitness_template(X.shape[1], names, vt, loss_key,
                            device_arch() if device == "gpu" else "sm_90")
    if device == "cpu":
        site = tmpl.sites["f"]
        out = np.empty(len(cands))
        for k, c in enumerate(cands):
            try:
                pred = _predict_cpu(c, X, names, site)
            except Exception as e:   # noqa: BLE001 - a candidate that does not run scores +inf
                log.debug("numptx.fitness: candidate %d: %s", k, e)
                out[k] = math.inf
                continue
            out[k] = _score(pred, y, loss)
        return out
    return _fitness_gpu(tmpl, [_adapt(c, names, vt) for c in cands], X, y, loss, per_module,
                        executor, block)


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


def _fitness_gpu(tmpl: CudaTemplate, cands: list, X: np.ndarray, y: np.ndarray, loss: Any,
                 per_module: int, executor: Executor | None, block: int) -> np.ndarray:
    from numba import cuda
    extra = {"loss": loss} if isinstance(loss, PtxExpr) else {}
    packs = tmpl.pack_many("f", cands, select="cand", per_module=per_module, executor=executor,
                           **extra)
    n = X.shape[0]
    yy = y.astype(np.float64)
    c = float(yy.mean())                      # pearson's moments are taken about it
    dX, dy = cuda.to_device(X), cuda.to_device(y)
    acc = cuda.to_device(np.zeros((len(cands), 4)))
    for p in packs:
        if p.empty:                           # no candidate of the module works: all +inf
            continue
        sub = acc[p.offset:p.offset + len(p)]
        p[((n + block - 1) // block, len(p)), block](sub, dX, dy, n, c)
    sums = acc.copy_to_host()
    out = np.empty(len(cands))
    bad = {i for p in packs for i in p.errors}
    for k in range(len(cands)):
        s0, s1, s2, nbad = sums[k]
        if k in bad or nbad > 0:
            out[k] = math.inf
            continue
        if loss in ("mse", "mae") or isinstance(loss, PtxExpr):
            s = s0 / n
        elif loss == "rmse":
            s = math.sqrt(s0 / n)
        else:           # pearson from moments of q = p - c, c the target mean
            mq, vt = s0 / n, yy.var()
            vq = s1 / n - mq * mq
            # a variance lost in rounding (constant predictions) is no variance
            s = (math.inf if vq <= 1e-12 * (s1 / n) or vt <= 0
                 else max(0.0, 1.0 - (s2 / n) / math.sqrt(vq * vt)))
        out[k] = s if math.isfinite(s) else math.inf
    return out
