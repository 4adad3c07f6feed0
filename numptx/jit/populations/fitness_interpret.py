"""Fitness without assembling: Stack PTX candidates run by the batch interpreter
(:func:`numptx.stack_ptx.interpret`) at the fitness kernel's site, their losses reduced in
NumPy the way :func:`numptx.fitness`'s CPU path reduces each candidate's::

    from numptx.jit.populations.fitness_interpret import interpret_losses
    losses, rest = interpret_losses(programs, X, y, names, "mse", tmpl.sites["f"])
    # losses[k] for every k not in rest; rest: the candidates the compiled path must score

``nx.fitness(..., evaluate="interpret")`` is the public door. What the interpreter leaves to
the compiled path (``rest``): programs that read ``cand`` (the candidate's index in its module
differs per candidate), rows without C semantics, and batches the C core refuses as a whole
(mixed dialects). The scores equal the compiled path's on the CPU bit for bit (the
predictions are the emulator's, the reductions the same NumPy calls, row by row).
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from ..._program import Op
from ..._program.interpret import (InterpretError, Tapes, columns, reads_input, refused,
                                  run_cpu, subset, tapes)
from ..._program.ops import ProgramError, marker_dialect

__all__ = ["interpret_losses", "losses_of_predictions", "is_program", "GpuScorer",
           "register_gpu_scorer", "GPU_INTERPRET_MAX_ROWS", "data_columns", "PEARSON_FLAT",
           "PEARSON_FLAT_F64", "flat_share", "pearson_flat"]

log = logging.getLogger(__name__)

_CHUNK_VALUES = 1 << 23      # predictions held at once (64 MB of float64)
_LOSS_BLOCK = 64             # predictions reduced at once (a block of rows stays in cache)
#: on a GPU, evaluate="auto" interprets up to this many rows, and packs and assembles above:
#: an estimate (docs/interpret.md, "The crossover") until a GPU measures it
GPU_INTERPRET_MAX_ROWS = 1_000_000


def is_program(c: Any) -> bool:
    """Whether a fitness candidate (one :func:`numptx.jit.populations.fitness.prepare` accepted) is a
    Stack PTX program: an op list or encoded words."""
    if isinstance(c, np.ndarray):     # as sp.compile takes them (another dtype: refused there)
        return c.ndim == 1 and c.dtype == np.uint64
    return isinstance(c, (list, tuple)) and (not c or isinstance(c[0], Op))


def _dialect_of(c: Any) -> int:
    """A program's own dialect (its marker word or op first; numptx without one)."""
    if not len(c):
        return 0
    word = int(c[0]) if isinstance(c, np.ndarray) else getattr(c[0], "word", None)
    return (marker_dialect(word) if word is not None else None) or 0


#: a prediction whose variance is at most this share of its own mean square (about zero) is
#: constant up to rounding: its correlation with the target is undefined, and pearson scores
#: it +inf. One rule for every reduction (the CPU's, the interpreter's, the GPU kernel's sums
#: and the fits'), so the paths agree on it. (About the target's mean, the rule before, a
#: target of a large offset, y = 1e7 + f(x), made every program of inputs of unit scale
#: flat: the search returned a constant)
PEARSON_FLAT = 1e-12
#: the share on float64 data (a standard deviation of 1e-12 of the root mean square, some
#: thousands of float64 ulps): float64 resolves what float32 cannot, and an input at a large
#: offset (x0 = 1e7 + U(0, 1), a variance 1e-15 of its mean square) varies, not constant
PEARSON_FLAT_F64 = 1e-24


def flat_share(dtype: Any) -> float:
    """The flat rule's share for data of ``dtype``: :data:`PEARSON_FLAT_F64` for float64,
    :data:`PEARSON_FLAT` otherwise::

        flat_share(np.float64)          # 1e-24
    """
    return PEARSON_FLAT_F64 if np.dtype(dtype) == np.float64 else PEARSON_FLAT


def pearson_flat(var_p: Any, ms_q: Any, share: float = PEARSON_FLAT) -> Any:
    """Whether predictions of variance ``var_p`` and mean square ``ms_q`` (their own, about
    zero) are constant up to rounding (at most ``share`` of it: :func:`flat_share` of the
    data's dtype); arrays element-wise::

        pearson_flat(0.0, 4.0)          # True
    """
    return ~(np.asarray(var_p) > share * np.asarray(ms_q))


def losses_of_predictions(pred: np.ndarray, y: np.ndarray, loss: str) -> np.ndarray:
    """One loss per row of ``pred`` (k, n) against ``y`` (n): ``+inf`` where a prediction is
    not finite. The same arithmetic as ``fitness``'s per-candidate ``_score``, row by row (in
    blocks of rows that stay in cache)."""
    if len(pred) > _LOSS_BLOCK:
        return np.concatenate([losses_of_predictions(pred[i:i + _LOSS_BLOCK], y, loss)
                               for i in range(0, len(pred), _LOSS_BLOCK)])
    with np.errstate(all="ignore"):
        p = pred.astype(np.float64)
        ok = np.isfinite(p).all(axis=1)
        tt = y.astype(np.float64)
        if loss in ("mse", "rmse"):
            s = np.mean((p - tt) ** 2, axis=1)
            if loss == "rmse":
                s = np.sqrt(s)
        elif loss == "mae":
            s = np.mean(np.abs(p - tt), axis=1)
        elif loss == "pearson":
            sp_, st = p.std(axis=1), tt.std()
            dev = p - p.mean(axis=1, keepdims=True)
            r = np.mean(dev * (tt - tt.mean()), axis=1) / (sp_ * st)
            flat = pearson_flat(sp_ * sp_, np.mean(p * p, axis=1), flat_share(y.dtype))
            # (r not finite: moments that overflowed, no correlation to score)
            s = np.where((sp_ != 0) & (st != 0) & ~flat & np.isfinite(r),
                         np.maximum(0.0, 1.0 - r), np.inf)
        else:
            raise InterpretError(f"loss={loss!r}: the interpreter scores the built-in losses")
        s = np.where(ok & np.isfinite(s), s, np.inf)
    return s


def data_columns(tp: Tapes, X: np.ndarray, names: Sequence[str]) -> tuple[list, int]:
    """The columns of ``X`` (named ``names``) and ``cand`` (0) in the order ``tp``'s inputs
    index them, and the row count: what :func:`numptx._program.interpret.run_cpu` takes for
    tapes made at the fitness kernel's site. Tapes of the same site share one order::

        order, n = data_columns(tp, X, ("x0", "x1"))
        pred = run_cpu(tp, order, n)["p"]          # (programs, rows)
    """
    cols, n_rows = columns({"cand": np.uint32(0)} | {m: X[:, j] for j, m in enumerate(names)})
    by = {c.name: c for c in cols}
    return [by[m.split("\x00")[0]] for m in tp.inputs], n_rows


class GpuScorer(Protocol):
    """The GPU interpreter's losses of a batch of tapes (numptx.jit.populations.interpret_gpu registers
    one): ``scorer(tapes, columns, y, loss, dtype)`` -> one loss per tape."""

    def __call__(self, tp: Tapes, cols: list, y: np.ndarray, loss: str, dtype: str,
                 rows: Sequence[str] | None = None) -> np.ndarray: ...


_gpu: list[GpuScorer] = []


def register_gpu_scorer(scorer: GpuScorer) -> None:
    """Score ``device="gpu"`` batches with ``scorer`` (called by numptx.jit.populations.interpret_gpu)."""
    _gpu[:] = [scorer]


def interpret_losses(programs: Sequence[Any], X: np.ndarray, y: np.ndarray,
                     names: tuple[str, ...], loss: str, site: Any, *,
                     threads: int | None = None, device: str = "cpu",
                     rows: Sequence[str] | None = None) -> tuple[np.ndarray, dict[int, str]]:
    """(losses, rest): the losses of ``programs`` at the fitness kernel's ``site``, and the
    candidates left to the compiled path (index -> why; their loss is NaN here). ``device``:
    ``"cpu"`` (the C interpreter) or ``"gpu"`` (the generated kernel, when registered);
    ``rows``: on a GPU, the table rows the kernel covers (the genes': one kernel for a whole
    search; default, the rows of the batch)."""
    n = len(programs)
    out = np.full(n, np.nan)
    if n == 0:
        return out, {}
    try:
        tp = tapes(list(programs), site=site)
    except ProgramError as e:
        ds = [_dialect_of(c) for c in programs]
        if len(set(ds)) == 1:
            return out, dict.fromkeys(range(n), f"the batch does not compile to tapes: {e}")
        rest: dict[int, str] = {}           # a batch mixing dialects: each dialect apart
        for d in sorted(set(ds)):
            ks = [k for k in range(n) if ds[k] == d]
            got, left = interpret_losses([programs[k] for k in ks], X, y, names, loss, site,
                                         threads=threads, device=device)
            out[ks] = got
            rest.update({ks[j]: why for j, why in left.items()})
        return out, rest
    order, n_rows = data_columns(tp, X, names)
    rest = {} if device == "gpu" else {
        k: f"the interpreter does not run {row!r}" for k, row in refused(tp).items()}
    for k in np.flatnonzero(reads_input(tp, list(tp.inputs).index("cand"))).tolist():
        rest.setdefault(k, "it reads cand (its index in its module)")
    keep = np.array([k for k in range(n) if k not in rest], dtype=np.int64)
    if device == "gpu":
        if not _gpu:
            return out, dict.fromkeys(range(n), "no GPU interpreter is registered")
        dtype = "f64" if y.dtype == np.float64 else "f32"
        try:
            out[keep] = _gpu[0](subset(tp, keep), order, y, loss, dtype, rows)
        except InterpretError as e:         # a row the kernel lacks: the compiled path
            return out, dict.fromkeys(range(n), f"the GPU interpreter refused the batch: {e}")
        return out, rest
    per = max(1, _CHUNK_VALUES // max(1, n_rows))
    out_name = next(iter(tp.outputs))
    for a in range(0, len(keep), per):
        ks = keep[a:a + per]
        pred = run_cpu(subset(tp, ks), order, n_rows, threads=threads)[out_name]
        out[ks] = losses_of_predictions(pred, y, loss)
    if rest:
        log.debug("numptx.fitness: %d candidate(s) left to the compiled path, e.g. %d: %s",
                  len(rest), *next(iter(rest.items())))
    return out, rest
