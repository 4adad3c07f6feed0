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
    return out


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


def written(evaluator: Any, genes: Any, cands: Sequence[Any]) -> list:
    """``cands`` (:class:`~numptx.search.loop.Candidate`) with their linear scaling written
    into their programs (module documentation) and their losses as the plain evaluator
    (``evaluator.plain()``) scores those programs. Without scaling: ``cands`` as they are."""
    if not evaluator.linear_scaling or not cands:
        return list(cands)
    from .config import LENGTH_MAX
    plain, dt = evaluator.plain(), genes.dtype
    progs = [list(c.program) for c in cands]
    y = evaluator.y.astype(np.float64)
    a, b, a0 = _fit(outputs(evaluator, progs), y)
    forms: list[list] = []
    for k, p in enumerate(progs):
        ok = np.isfinite([a[k], b[k], a0[k]]).all() and len(p) + 4 <= LENGTH_MAX
        fa, fb, fa0 = (genes.round(v) for v in (a[k], b[k], a0[k])) if ok else (0, 1, 0)
        ok = ok and np.isfinite([fa, fb, fa0]).all()
        forms.append([p, p + scale_ops(fa0, None, dt) if ok else p,
                      p + scale_ops(fa, fb, dt) if ok else p])
    losses = plain.score([f for three in forms for f in three]).reshape(len(progs), 3)
    floor = 1e-10 * float(y.var())
    out = []
    for c, three, L in zip(cands, forms, losses):
        # compared as mean squared errors (rmse: squared), so that the form kept is the
        # same for mse and rmse and does not depend on the units of y
        M = L * L if plain.loss == "rmse" else L
        best = float(np.min(M))
        pick = next(j for j in range(3) if M[j] <= best + max(_TOL * best, floor)
                    or M[j] == best)
        out.append(dataclasses.replace(c, program=three[pick], loss=float(L[pick])))
    return out
