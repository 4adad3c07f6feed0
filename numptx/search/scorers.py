"""What scores a search's programs: the seam between the loop and its fitness.

A search scores programs through a :class:`Scorer`: one loss per program, lower is better.
There are two:

- :class:`numptx.search.evaluate.Evaluator` for a data set (``regress``, ``map_elites``): the
  batch interpreter (``mode == "interpret"``) or the compiled path (``"compile"``: stubs
  emulated on the CPU, packed modules on a GPU);
- :class:`UserFitness` for ``evolve``: the programs packed for a site of the user's template
  and scored by the user's ``fitness(packs)``.

::

    from numptx.search.scorers import Scorer, UserFitness
    fit = UserFitness(template=tmpl, site="f", site_obj=tmpl.sites["f"], select="cand",
                      fitness=my_fitness, per_module=None, executor=None, build="full")
    isinstance(fit, Scorer)          # True: score(programs) -> one float64 loss each
    fit.score(programs)              # packed, built, then my_fitness(packs)
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from .._cores import usable_cores
from .. import stack_ptx as sp
from ..jit.populations.pack import pack_many
from .evaluate import check_scores
from .genes import SearchError

__all__ = ["Scorer", "UserFitness"]


@runtime_checkable
class Scorer(Protocol):
    """Scores programs: ``score(programs)`` is one float64 loss per program, in order (+inf
    for one that gives NaN/inf or fails to build)."""

    def score(self, programs: Sequence[Any]) -> np.ndarray: ...


@dataclass(frozen=True)
class UserFitness:
    """``evolve``'s scorer: the programs compiled for ``site`` of ``template`` (the site object
    ``site_obj``), packed (``select``: the site's candidate-index input; ``per_module``
    candidates a module, None: sized by the cores), built on ``executor`` at ``build``, and
    scored by ``fitness(packs)``."""
    template: Any
    site: str
    site_obj: Any
    select: str
    fitness: Callable[[list], Sequence[float]]
    per_module: int | None
    executor: Executor | None
    build: Literal["full", "fast"]

    def packs(self, programs: Sequence[Any], *, per_module: int | None = None,
              build: Literal["full", "fast"] | None = None) -> list:
        """The programs' packs (``per_module``/``build``: this scorer's unless given)."""
        stubs = sp.compile_many(list(programs), site=self.site_obj)
        per = per_module or self.per_module or int(
            min(256, max(16, -(-len(stubs) // (2 * usable_cores())))))
        mode = self.build if build is None else build
        return pack_many(self.template, self.site, stubs, select=self.select, per_module=per,
                         executor=self.executor, build="fast" if mode == "fast" else "full")

    def score(self, programs: Sequence[Any]) -> np.ndarray:
        """One loss per program: the user's fitness of their packs."""
        return check_scores(self.fitness(self.packs(programs)), len(programs), "evolve")

    def score_alone(self, programs: Sequence[Any], build: Literal["full", "fast"]) -> np.ndarray:
        """The programs packed one a module at ``build`` and scored (the re-score of a
        ``build="fast"`` run's best at the full build)."""
        packs = pack_many(self.template, self.site,
                          sp.compile_many(list(programs), site=self.site_obj),
                          select=self.select, per_module=1, executor=self.executor, build=build)
        try:
            return check_scores(self.fitness(packs), len(programs), "evolve")
        except SearchError as e:        # the run's calls were right: say which call was not
            raise SearchError(f"evolve: the best re-scored alone at the full build "
                              f"(build='fast'): {str(e).removeprefix('evolve: ')} (a pack of "
                              f"{len(programs)}; use build='full' to score the run's packs "
                              f"only)") from None
