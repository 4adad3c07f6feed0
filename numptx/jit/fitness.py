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
found) each candidate runs on the CPU: formulas through their NumPy reference (bit for bit what
their stub computes), programs and PTX through the stub emulator (:func:`numptx.emulate`) —
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
from .template import CudaTemplate

__all__ = ["fitness", "FitnessError", "LOSSES", "fitness_template"]

log = logging.getLogger(__name__)

LOSSES = ("mse", "mae", "rmse", "pearson")
_TYPES = {np.dtype(np.float32): ("f32", "float", "F32"), np.dtype(np.float64): ("f64", "double", "F64")}


class FitnessError(NumptxError):
    """Bad arguments to :func:`fitness` (shapes, loss, names); ``candidate`` is None."""


def _loss_code(loss: Any) -> str:
    """The CUDA that turns prediction ``p`` and target ``t`` into the per-sample terms."""
    if loss in ("mse", "rmse"):
        return "T d = p - t; s0 = (double)d * (double)d;"
    if loss == "mae":
        return "T d = p - t; s0 = fabs((double)d);"
    if loss == "pearson":
        return "s0 = (double)p; s1 = (double)p * (double)p; s2 = (double)p * (double)t;"
    return ("T l;\n        PTX_INJECT(\"loss\", PTX_IN({TT}, p), PTX_IN({TT}, t), PTX_OUT({TT}, l));\n"
            "        s0 = (double)l; if (!isfinite(l)) bad = 1.0;")


@functools.lru_cache(maxsize=32)
def _source(d: int, names: tuple[str, ...], ctype: str, tt: str, loss_kind: str) -> str:
    loads = " ".join(f"{ctype} {n} = X[(size_t)i * {d} + {j}];" for j, n in enumerate(names))
    ins = ", ".join(f"PTX_IN({tt}, {n})" for n in names)
    body = _loss_code(loss_kind if loss_kind in LOSSES else "user").replace("{TT}", tt)
    return rf'''
typedef {ctype} T;
extern "C" __global__ void nx_fitness(double* acc, const T* X, const T* Y, int n) {{
    unsigned cand = blockIdx.y;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, bad = 0.0;
    if (i < n) {{
        {loads}
        T p;
        PTX_INJECT("f", PTX_IN(U32, cand), {ins}, PTX_OUT({tt}, p));
        T t = Y[i];
        if (!isfinite(p)) bad = 1.0;
        {body}
    }}
    for (int o = 16; o > 0; o >>= 1) {{
        s0 += __shfl_down_sync(0xffffffffu, s0, o);
        s1 += __shfl_down_sync(0xffffffffu, s1, o);
        s2 += __shfl_down_sync(0xffffffffu, s2, o);
        bad += __shfl_down_sync(0xffffffffu, bad, o);
    }}
    if ((threadIdx.x & 31) == 0) {{
        double* a = acc + 4 * (size_t)cand;
        atomicAdd(a, s0); atomicAdd(a + 1, s1); atomicAdd(a + 2, s2); atomicAdd(a + 3, bad);
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
    if len(names) != d or len(set(names)) != d or not all(
            isinstance(n, str) and n.isidentifier() for n in names) or "cand" in names:
        raise FitnessError(f"fitness: names= gives {d} distinct identifiers (not 'cand') for "
                           f"the columns, got {names!r}")
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
    vt = "f64" if X.dtype == np.float64 else "f32"
    loss_key = loss if isinstance(loss, str) else "user"
    tmpl = fitness_template(X.shape[1], names, vt, loss_key)
    if device == "auto":
        device = "gpu" if _gpu() else "cpu"
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


def _gpu() -> bool:
    try:
        from numba import cuda
        return bool(cuda.is_available())
    except Exception:   # noqa: BLE001 - no driver, no numba-cuda: the CPU it is
        return False


def _fitness_gpu(tmpl: CudaTemplate, cands: list, X: np.ndarray, y: np.ndarray, loss: Any,
                 per_module: int, executor: Executor | None, block: int) -> np.ndarray:
    from numba import cuda
    extra = {"loss": loss} if isinstance(loss, PtxExpr) else {}
    packs = tmpl.pack_many("f", cands, select="cand", per_module=per_module, executor=executor,
                           **extra)
    n = X.shape[0]
    dX, dy = cuda.to_device(X), cuda.to_device(y)
    acc = cuda.to_device(np.zeros((len(cands), 4)))
    for p in packs:
        sub = acc[p.offset:p.offset + len(p)]
        p[((n + block - 1) // block, len(p)), block](sub, dX, dy, n)
    sums = acc.copy_to_host()
    out = np.empty(len(cands))
    bad = {i for p in packs for i in p.errors}
    yy = y.astype(np.float64)
    for k in range(len(cands)):
        s0, s1, s2, nbad = sums[k]
        if k in bad or nbad > 0:
            out[k] = math.inf
            continue
        if loss in ("mse", "mae") or isinstance(loss, PtxExpr):
            s = s0 / n
        elif loss == "rmse":
            s = math.sqrt(s0 / n)
        else:           # pearson from sums: p, p^2, p*t
            mp, mt = s0 / n, yy.mean()
            vp, vt = s1 / n - mp * mp, yy.var()
            s = (math.inf if vp <= 0 or vt <= 0
                 else max(0.0, 1.0 - (s2 / n - mp * mt) / math.sqrt(vp * vt)))
        out[k] = s if math.isfinite(s) else math.inf
    return out
