"""Linear scaling written into what a search returns.

Under linear scaling (``regress(..., linear_scaling=True)``, the default for ``mse`` and
``rmse``; Keijzer 2003) a program f is scored by its best a + b·f, so the search looks for the
shape of the answer and leaves its offset and scale to a closed form. The programs in the
search stay as they are; the candidates a run returns carry the scaling as ops at their end::

    program  + [const(b), mul, const(a), add]      # printed: (f)*b + a

For each returned program, a and b are the least-squares best over the training data
(float64, then rounded to the program's float type), and of the three forms, f,
f + a and f·b + a, the simplest whose loss (the program's own, with no scaling: what a user
deploys) is within a hair of the best is kept: ``_TOL`` of the best loss, or 1e-10 of
var(y), compared as mean squared errors (under rmse too). A program that needs no scaling
(an exact formula) is returned as it was found.

::

    from numptx.search.scaling import written
    cands = written(evaluator, genes, cands)     # Candidates whose losses are the plain ones
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import stack_ptx as sp
from .._program.interpret import refused, run_cpu, tapes
from .._program.ops import ProgramError
from ..jit.populations.fitness_interpret import data_columns

__all__ = ["written", "scale_ops", "outputs"]

_TOL = 1e-6       #: a simpler form is kept within this share of the best form's loss


def scale_ops(a: float, b: float, dtype: str) -> list:
    """The ops that turn a program's output f into f·b + a (``b`` None: f + a)."""
    ops = []
    if b is not None:
        ops += [sp.const(b, dtype), sp.instr(f"mul.rn.{dtype}")]
    return ops + [sp.const(a, dtype), sp.instr(f"add.rn.{dtype}")]


def outputs(evaluator: Any, programs: Sequence[Sequence[Any]]) -> np.ndarray:
    """The programs' outputs (programs x rows, float64) over the evaluator's training data:
    the batch interpreter, bit for bit the compiled stub's; a program it does not run goes
    through the emulator (``evaluator.predict``)."""
    return _outputs(evaluator, programs)[0]


def _outputs(evaluator: Any, programs: Sequence[Sequence[Any]]) -> tuple[np.ndarray, list]:
    """(:func:`outputs`, the indices of the programs the emulator ran)."""
    n = len(programs)
    out = np.zeros((n, evaluator.X.shape[0]))
    todo = list(range(n))
    try:
        tp = tapes([list(p) for p in programs], site=evaluator.site)
        bad = refused(tp)
        cand = list(tp.inputs).index("cand")
        from .._program.interpret import reads_input
        bad.update({int(k): "cand" for k in np.flatnonzero(reads_input(tp, cand))})
        order, n_rows = data_columns(tp, evaluator.X, evaluator.names)
        with np.errstate(all="ignore"):
            got = next(iter(run_cpu(tp, order, n_rows).values()))
        out[:] = got
        todo = sorted(bad)
    except ProgramError:
        pass
    for k in todo:
        out[k] = evaluator.predict(programs[k])
    return out, todo


def _fit(F: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, a0): the least-squares a + b F and the best offset alone a0, per row."""
    with np.errstate(all="ignore"):
        fm = F.mean(axis=1)
        dF = F - fm[:, None]
        var = (dF * dF).sum(axis=1)
        b = np.where(var > 0, (dF @ (y - y.mean())) / var, 0.0)
        a = y.mean() - b * fm
        a0 = y.mean() - fm
    return a, b, a0


def _coefficients(genes: Any, F: np.ndarray, y: np.ndarray,
                  lengths: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(coefficients, ok): per program (fa, fb, fa0), the scaling's a, b and the offset alone
    rounded to the program's float type (as ``genes.round``), and whether the scaled forms
    exist (finite, and short enough; where not, all three forms are the program itself)."""
    from .config import LENGTH_MAX
    raw = np.stack(_fit(F, y), axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        coef = raw.astype(np.float32).astype(np.float64) if genes.dtype == "f32" else raw
    ok = np.isfinite(raw).all(axis=1) & np.isfinite(coef).all(axis=1) & \
        (np.asarray(lengths, np.int64) + 4 <= LENGTH_MAX)
    coef = np.where(ok[:, None], coef, 0.0)
    return coef, ok


def _form(p: list, coef: np.ndarray, j: Any, dtype: str) -> list:
    """Form ``j`` of program ``p`` (0: p, 1: p + a0, 2: p·b + a)."""
    fa, fb, fa0 = (float(v) for v in coef)
    return p if j == 0 else p + scale_ops(fa0, None, dtype) if j == 1 else \
        p + scale_ops(fa, fb, dtype)


def _pick(L: np.ndarray, loss: str, floor: float) -> int:
    """The simplest of the three forms whose loss is within a hair of the best (module
    documentation)."""
    # compared as mean squared errors (rmse: squared), so that the form kept is the same for
    # mse and rmse and does not depend on the units of y
    M = L * L if loss == "rmse" else L
    best = float(np.min(M))
    return next(j for j in range(3) if M[j] <= best + max(_TOL * best, floor) or M[j] == best)


def _form_losses(plain: Any, F: np.ndarray, coef: np.ndarray, ok: np.ndarray,
                 dtype: str) -> np.ndarray:
    """The three forms' losses (programs x 3) from the programs' outputs ``F``, as the CPU
    interpreter scores the forms (:func:`_direct`): the scaling ops are ``mul.rn`` and
    ``add.rn`` of the program's float type, each correctly rounded, as NumPy's arithmetic of
    that type is; the loss is the interpreter's own reduction
    (:func:`~numptx.jit.populations.fitness_interpret.losses_of_predictions`)."""
    from ..jit.populations.fitness_interpret import losses_of_predictions
    t = np.float32 if dtype == "f32" else np.float64
    P = F.astype(t)                      # exact: the outputs are values of that type
    fa, fb, fa0 = (coef[:, j].astype(t)[:, None] for j in range(3))
    with np.errstate(all="ignore"):
        forms = (P, P + fa0, P * fb + fa)
    L = np.stack([losses_of_predictions(f, plain.y, plain.loss) for f in forms], axis=1)
    L[~ok, 1:] = L[~ok, :1]              # no scaled forms: each is the program itself
    return L


def _direct(plain: Any) -> bool:
    """Whether the forms' losses come from the outputs (:func:`_form_losses`): the plain
    evaluator scores with the CPU interpreter, whose losses those are bit for bit (a GPU
    sums in another order; the compiled path scores them itself)."""
    return plain.mode == "interpret" and plain.device == "cpu"


#: outputs held at once by :func:`written` (programs x rows values, float64: 64 MB)
_CHUNK_VALUES = 1 << 23


def written(evaluator: Any, genes: Any, cands: Sequence[Any]) -> list:
    """``cands`` (:class:`~numptx.search.loop.Candidate`) with their linear scaling written
    into their programs (module documentation) and their losses as the plain evaluator
    (``evaluator.plain()``) scores those programs. Without scaling: ``cands`` as they are.

    Where the plain evaluator is the CPU interpreter, the forms' losses come from the
    programs' outputs, computed once (:func:`_form_losses`: the interpreter's losses bit for
    bit, one run of the programs instead of four); elsewhere the three forms of each program
    are scored by the plain evaluator."""
    if not evaluator.linear_scaling or not cands:
        return list(cands)
    plain, dt = evaluator.plain(), genes.dtype
    y = evaluator.y.astype(np.float64)
    floor = 1e-10 * float(y.var())
    per = max(1, _CHUNK_VALUES // max(1, evaluator.X.shape[0]))
    out = []
    for lo in range(0, len(cands), per):
        chunk = cands[lo:lo + per]
        progs = [list(c.program) for c in chunk]
        F, emulated = _outputs(evaluator, progs)
        coef, ok = _coefficients(genes, F, y, [len(p) for p in progs])
        if _direct(plain):
            losses = _form_losses(plain, F, coef, ok, dt)
            if emulated:           # the interpreter refused them: scored as the plain run does
                losses[emulated] = plain.score(
                    [_form(progs[k], coef[k], j * ok[k], dt) for k in emulated
                     for j in range(3)]
                ).reshape(len(emulated), 3)
        else:
            losses = plain.score([_form(p, coef[k], j * ok[k], dt)
                                  for k, p in enumerate(progs) for j in range(3)]
                                 ).reshape(len(progs), 3)
        for c, p, k, L in zip(chunk, progs, range(len(progs)), losses):
            j = _pick(L, plain.loss, floor) if ok[k] else 0
            out.append(dataclasses.replace(c, program=_form(p, coef[k], j, dt),
                                           loss=float(L[j])))
    return out
