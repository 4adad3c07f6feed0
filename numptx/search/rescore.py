"""Re-scoring what a search returns with the compiled path, when the interpreter scored the
run (``evaluate="interpret"``, or ``"auto"`` on the CPU): what a user deploys is a compiled
stub, so ``result.best`` (and a MAP-Elites run's elites) carry the loss that stub gives, and
:class:`Rescore` (``result.rescored``) holds both losses::

    r = search.regress(X, y, evaluate="interpret", seed=0)
    r.rescored.interpreted[0], r.rescored.compiled[0]     # best's loss, both ways
    r.rescored.differing                                  # 0 on the CPU: bit for bit

On the CPU the interpreter and the emulator compute the same bits (the approximate rows
correctly rounded in both), so the losses must be equal: any difference is counted and warned
about (tolerance 0). On a GPU both paths run the hardware's instructions (the interpreter
kernel jumps to each row's own PTX), and the float64 sums over the rows are added in another
order: there a difference past ``|compiled - interpreted| <= RTOL_GPU * max(|compiled|,
|interpreted|) + ATOL_GPU`` is counted in ``differing`` and warned about
(:class:`numptx.errors.NumptxWarning`). +inf equals only +inf. ``result.rescored`` holds both
losses to judge by.

A run scored by the screening build (``build="fast"``, ``-Ofc=max``; or ``"auto"`` where
:data:`numptx.search.config.AUTO_BUILD` makes it fast) returns what the full build (the
template's -O3) makes of its programs: ``result.best`` and the elites are rebuilt and re-scored at
``build="full"``, and a difference is counted and warned about as above (on the CPU the
compiled path emulates, so both builds give the same losses).

``search.evolve(..., build="fast")`` builds its packs at -Ofc=max for ``fitness``; the returned
best is then packed alone at the full build and scored by ``fitness`` again, with the GPU's
tolerance (``"auto"``, evolve's default, is the full build: your fitness measures what it is
given, its speed too).

Semantic dedup on a probe of fewer rows than the data (:mod:`numptx.search.semantic`) gives a
program the loss of another whose outputs agree on the probe rows only: the run's loss of a
returned program may then not be its own, whichever path scored the run. Such a run is
re-scored too (on the compiled path as well), and a difference is warned about as semantic
dedup's.
"""
from __future__ import annotations

import dataclasses
import math
import os
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import NumptxWarning
from ..jit.populations.pack import PER_KERNEL, PackError
from ..jit.populations.pack_kernels import BuildMode, layout_target
from .config import check_build
from .genes import SearchError
from .scaling import written

__all__ = ["Rescore", "rescore", "returned", "tolerance", "RTOL_GPU", "ATOL_GPU", "user_build",
           "user_stacklevel"]

#: relative tolerance on a GPU: two float64 sums of n terms in different orders differ by at
#: most ~n * 2**-53 relative (2e-12 at 20,000 rows); 1e-9 leaves room for 1e6 rows, well
#: below what an instruction computing otherwise changes in a loss (an f32 ulp is 6e-8)
RTOL_GPU = 1e-9
#: absolute tolerance on a GPU, for losses near 0 (a perfect fit: 1e-15 against 1e-14)
ATOL_GPU = 1e-12


#: the numptx package's folder: frames from files under it are the library's, not the user's
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_stacklevel(stacklevel: int = 1) -> int:
    """The ``stacklevel`` for a ``warnings.warn`` made by the caller of this function that
    points at the user's line: the first frame, ``stacklevel`` or more out, whose file is not
    in the numptx package (so the same warning points at the line that called ``regress``, or
    ``SymbolicRegressor.fit``, or ``resume``, however deep the library's own frames go);
    ``stacklevel`` itself when every frame out is the library's::

        warnings.warn("...", stacklevel=user_stacklevel())
    """
    frame, level = sys._getframe(1), 1          # the caller, the one that warns: level 1
    while frame is not None and (level < stacklevel or
                                 os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE)):
        frame, level = frame.f_back, level + 1
    return level if frame is not None else stacklevel


def tolerance(device: str) -> tuple[float, float]:
    """(rtol, atol) of a re-score on ``device`` (``"cpu"``: exact; ``"gpu"``)."""
    return (RTOL_GPU, ATOL_GPU) if device == "gpu" else (0.0, 0.0)


@dataclass(frozen=True)
class Rescore:
    """The losses of a run's returned programs (``what``: ``"best"``, then
    ``"archive[cell]"`` for each MAP-Elites elite) as the run scored them (``interpreted``:
    the interpreter's, or semantic dedup's on a partial probe) and as the compiled path does
    (``compiled``); ``differing`` counts those past the tolerance (``rtol``, ``atol``:
    :func:`tolerance`), ``max_difference`` is the largest ``|compiled - interpreted|`` (inf
    when one is finite and the other not). ``build``: the build mode of the compiled
    losses (``"full"``: the template's options); ``scored_by``: the build the run scored
    with (``"fast"``, or ``"full"``; an interpreted run's compiled fallbacks used it)."""
    what: tuple[str, ...]
    interpreted: tuple[float, ...]
    compiled: tuple[float, ...]
    differing: int
    max_difference: float
    rtol: float = 0.0
    atol: float = 0.0
    build: str = "full"
    scored_by: str = "full"


def _differ(a: float, b: float, rtol: float, atol: float) -> tuple[bool, float]:
    if a == b:
        return False, 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return True, math.inf
    d = abs(a - b)
    return d > rtol * max(abs(a), abs(b)) + atol, d


def rescore(evaluator: Any, what: Sequence[str], programs: Sequence[Any],
            interpreted: Sequence[float], *, stacklevel: int = 4,
            probe: tuple[int, int] | None = None) -> Rescore:
    """The compiled path's losses of ``programs`` at the full build
    (``evaluator.score_compiled(build="full")``; not counted in ``evaluated``) against their
    ``interpreted`` losses (the run's); a warning when some differ, at the user's line: the
    first frame outside numptx at least ``stacklevel`` out (:func:`user_stacklevel`).
    ``probe``: (probe rows,
    data rows) when semantic dedup ran on a partial probe, which the warning then names as a
    cause."""
    got = evaluator.score_compiled(list(programs), build="full") if len(programs) else \
        np.empty(0)
    fast = evaluator.scoring_build == "fast"
    comp = tuple(float(v) for v in got)
    interp = tuple(float(v) for v in interpreted)
    rtol, atol = tolerance(evaluator.device)
    n_diff, worst, first = 0, 0.0, None
    for i, (a, b) in enumerate(zip(interp, comp)):
        bad, d = _differ(a, b, rtol, atol)
        worst = max(worst, d)
        if bad:
            n_diff += 1
            first = i if first is None else first
    if first is not None:
        by, was = (("the interpreter", "interpreted") if evaluator.mode == "interpret" else
                   ("the run's screening build (build='fast', -Ofc=max)" if fast else "the run",
                    "the run's loss"))
        if probe is not None:
            by = (f"{by} (semantic dedup gives a program the loss of one whose outputs equal "
                  f"its own on the {probe[0]} probe row(s) only, of {probe[1]}: raise "
                  f"semantic_dedup= to the data's rows for exact losses, or 0 for none)")
        warnings.warn(f"search: the compiled path scores {n_diff} of the {len(comp)} returned "
                      f"program(s) differently from {by} (e.g. {what[first]}: "
                      f"{was} {interp[first]!r}, compiled {comp[first]!r}; largest "
                      f"difference {worst:.3g}; tolerance on the {evaluator.device}: "
                      f"rtol={rtol:g}, atol={atol:g}). The result carries the compiled "
                      f"losses (the full build); result.rescored holds both", NumptxWarning,
                      stacklevel=user_stacklevel(stacklevel))
    return Rescore(tuple(what), interp, comp, n_diff, worst, rtol, atol, "full",
                   evaluator.scoring_build)


def user_build(template: Any, site: str, build: Any, where: str = "evolve",
               fix: str = "use build='full'") -> BuildMode:
    """evolve's build mode: ``"fast"`` for ``"fast"`` (refused, naming the argument, for a
    template that has no fast build: a numba kernel; ``fix`` says what to do instead); the
    template's own (``"full"``) for ``"auto"`` and ``"full"``::

        user_build(tmpl, "f", "auto")              # 'full'
    """
    if check_build(build, where) != "fast":
        return "full"
    try:
        layout_target(template, site, "function", PER_KERNEL, "fast", "inline")
    except PackError as e:
        raise SearchError(f"{where}: build='fast': {e}; {fix}") from None
    return "fast"


class _UserPacks:
    """evolve's scorer as :func:`rescore` scores with: the programs packed alone at a build
    mode and scored by the user's fitness (a GPU's tolerance: the user's kernel)."""
    device, mode, scoring_build = "gpu", "compile", "fast"

    def __init__(self, user: Any):
        self.user = user              # a numptx.search.scorers.UserFitness

    def score_compiled(self, programs: list, *, build: BuildMode) -> np.ndarray:
        return self.user.score_alone(programs, build)


def returned(search: Any, *, stacklevel: int = 6) -> tuple[Any, dict, Rescore | None]:
    """(best, archive, rescore) of a search (:class:`numptx.search.loop.Search`): when the
    interpreter or the screening build (``build="fast"``) scored it, or semantic dedup ran on
    fewer probe rows than the data has, ``best`` and the archive's elites as copies that
    carry the compiled path's losses at the full build, and
    their :class:`Rescore`; else themselves and None. Under linear scaling the scaling is then
    written into their programs (:func:`numptx.search.scaling.written`), and they carry those
    programs' own losses (re-scored, the compiled path's at the full build; the Rescore holds
    the run's scaled losses, re-scored before). The search keeps its own programs and
    losses."""
    ev, best, sem = search.evaluator, search.best, search.semantic
    cells = list(search.archive)
    cands = [best] + [search.archive[c] for c in cells]
    probe = None if ev is None or sem is None or len(sem.rows) >= ev.X.shape[0] else \
        (len(sem.rows), ev.X.shape[0])
    if ev is None and best is not None and search.user.build == "fast":
        r = rescore(_UserPacks(search.user), ["best"], [best.program], [best.loss],
                    stacklevel=stacklevel)
        return dataclasses.replace(best, program=list(best.program), loss=r.compiled[0]), \
            dict(search.archive), r
    if ev is None or best is None:
        return best, dict(search.archive), None
    r = None
    if ev.mode == "interpret" or probe is not None or ev.scoring_build == "fast":
        r = rescore(ev, ["best"] + [f"archive[{c}]" for c in cells], [c.program for c in cands],
                    [c.loss for c in cands], stacklevel=stacklevel, probe=probe)
        cands = [dataclasses.replace(c, program=list(c.program), loss=v)
                 for c, v in zip(cands, r.compiled)]
    if ev.linear_scaling:
        # the scaling written into the programs, which carry their own (plain) losses from
        # here on; ``r`` holds the run's scaled losses, re-scored before the writing
        cands = written(ev, search.genes, cands)
        if ev.mode == "interpret" or ev.scoring_build == "fast":
            # written scored them as the run did (the interpreter, the screening build)
            got = ev.plain().score_compiled([c.program for c in cands], build="full")
            cands = [dataclasses.replace(c, loss=float(v)) for c, v in zip(cands, got)]
    return cands[0], dict(zip(cells, cands[1:])), r
