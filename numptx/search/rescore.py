"""Re-scoring what a search returns with the compiled path, when the interpreter scored the
run (``evaluate="interpret"``, or ``"auto"`` on the CPU): what a user deploys is a compiled
stub, so ``result.best`` (and a MAP-Elites run's elites) carry the loss that stub gives, and
:class:`Rescore` (``result.rescored``) holds both losses::

    r = search.regress(X, y, evaluate="interpret", seed=0)
    r.rescored.interpreted[0], r.rescored.compiled[0]     # best's loss, both ways
    r.rescored.differing                                  # 0 on the CPU: bit for bit

On the CPU the interpreter and the emulator compute the same bits (the approximate rows
correctly rounded in both), so the losses are equal. On a GPU the compiled path runs the
hardware's approximate instructions (``sin.approx``, ``ex2.approx``: a few ulp), so the
losses of programs with those rows differ a little. A difference past
``|compiled - interpreted| <= RTOL * max(|compiled|, |interpreted|) + ATOL`` (:data:`RTOL`,
:data:`ATOL`; +inf equals only +inf) is counted in ``differing`` and warned about
(:class:`numptx.errors.NumptxWarning`).
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import NumptxWarning

__all__ = ["Rescore", "rescore", "RTOL", "ATOL"]

#: relative tolerance between the two losses of a program: the approximate f32 rows are
#: within 2 ulp (2**-22 ~ 2.4e-7) of the correctly rounded value, and a loss sums squares of
#: errors; 1e-5 leaves room for that, and for nothing that changes which program is best
RTOL = 1e-5
#: absolute tolerance, for losses near 0 (a perfect fit: 0 vs 1e-15)
ATOL = 1e-12


@dataclass(frozen=True)
class Rescore:
    """The losses of a run's returned programs (``what``: ``"best"``, then
    ``"archive[cell]"`` for each MAP-Elites elite) as the interpreter scored them and as the
    compiled path does; ``differing`` counts those past the tolerance (:data:`RTOL`,
    :data:`ATOL`), ``max_difference`` is the largest ``|compiled - interpreted|`` (inf when
    one is finite and the other not)."""
    what: tuple[str, ...]
    interpreted: tuple[float, ...]
    compiled: tuple[float, ...]
    differing: int
    max_difference: float


def _differ(a: float, b: float) -> tuple[bool, float]:
    if a == b:
        return False, 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return True, math.inf
    d = abs(a - b)
    return d > RTOL * max(abs(a), abs(b)) + ATOL, d


def rescore(evaluator: Any, what: Sequence[str], programs: Sequence[Any],
            interpreted: Sequence[float], *, stacklevel: int = 4) -> Rescore:
    """The compiled path's losses of ``programs`` (``evaluator.score_compiled``; not counted
    in ``evaluated``) against their ``interpreted`` losses; a warning when some differ."""
    got = evaluator.score_compiled(list(programs)) if len(programs) else np.empty(0)
    comp = tuple(float(v) for v in got)
    interp = tuple(float(v) for v in interpreted)
    n_diff, worst, first = 0, 0.0, None
    for i, (a, b) in enumerate(zip(interp, comp)):
        bad, d = _differ(a, b)
        worst = max(worst, d)
        if bad:
            n_diff += 1
            first = i if first is None else first
    if first is not None:
        warnings.warn(f"search: the compiled path scores {n_diff} of the {len(comp)} returned "
                      f"program(s) differently from the interpreter (e.g. {what[first]}: "
                      f"interpreted {interp[first]!r}, compiled {comp[first]!r}; largest "
                      f"difference {worst:.3g}, tolerance rtol={RTOL:g}, atol={ATOL:g}). The "
                      f"result carries the compiled losses; result.rescored holds both",
                      NumptxWarning, stacklevel=stacklevel)
    return Rescore(tuple(what), interp, comp, n_diff, worst)
