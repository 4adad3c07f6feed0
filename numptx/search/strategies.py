"""How a search makes each generation: a selection strategy object per kind of search.

:class:`numptx.search.loop.Search` runs the generations; its :class:`Strategy` decides what one
generation does and what the run keeps:

- :class:`Evolutionary` (``regress``, ``evolve``): a population; tournament selection, children,
  survivors (``survivors="plus"`` or ``"children"``), and a fresh population after ``restart``
  generations without progress;
- :class:`Islands` (``regress(islands=k)``): k subpopulations of one run, each selecting and
  keeping its best on its own, with migrants along a ring every ``migration`` generations;
- :class:`MapElites` (``map_elites``): an archive of the best program of each behaviour cell
  (:mod:`numptx.search.elites`).

::

    from numptx.search.strategies import strategy_for
    strategy_for("map_elites").keeps_archive      # True
    strategy_for("regress").step(search)          # one generation: the pool best/median read
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from . import elites
from .config import Kind
from .results import Candidate, program_key
from .state import SearchState

__all__ = ["Strategy", "Evolutionary", "Islands", "MapElites", "strategy_for", "MIGRANTS"]

log = logging.getLogger(__name__)


class Strategy(Protocol):
    """One generation of a search, and whether the run keeps an archive of cells."""

    @property
    def keeps_archive(self) -> bool:
        """The run keeps ``search.archive`` (cells to elites) and returns it as
        ``result.archive`` (read-only: a frozen strategy satisfies it)."""
        ...

    def step(self, s: SearchState) -> list[Candidate]:
        """Make one generation of ``s``; the candidates its best and median are read from."""
        ...


@dataclass(frozen=True)
class Evolutionary:
    """A population, replaced each generation by :meth:`Search.next_population`; after
    ``restart`` generations without a 1 % better best, a fresh random population (the best so
    far stays in ``result.best``)."""
    keeps_archive: bool = False

    @staticmethod
    def restarted(s: SearchState) -> bool:
        """After ``restart`` generations without a 1 % better best, empty the population (the
        next step makes a fresh one) and say so."""
        stall = s.cfg.restart
        if stall and s.population and len(s.history) - s.improved_at >= stall:
            s.population, s.improved_at = [], len(s.history)
            s.restarts += 1
            log.info("numptx.search: no progress in %d generations: restart %d", stall,
                     s.restarts)
            return True
        return False

    def step(self, s: SearchState) -> list[Candidate]:
        self.restarted(s)
        if not s.population:
            cands = s.init_population()
            s.fit_constants_of(cands)
            s.population = cands
        else:
            s.population = s.next_population(s.population)
        return s.population


#: programs each island sends to the next one at a migration
MIGRANTS = 2


@dataclass(frozen=True)
class Islands:
    """``islands`` subpopulations, each a contiguous run of ``search.population``
    (``search.island_sizes`` long each): tournaments draw parents within an island, each island
    gets its share of the children (``population`` split evenly), keeps the best distinct
    programs of its parents and children (``survivors="plus"``), and every ``migration``
    generations sends copies of its :data:`MIGRANTS` best programs to the next island (a ring),
    where they replace the worst (both by the penalized loss selection uses). Restarts as
    :class:`Evolutionary`. One island is :class:`Evolutionary` itself."""
    keeps_archive: bool = False

    def step(self, s: SearchState) -> list[Candidate]:
        if Evolutionary.restarted(s) or not s.population:
            s.island_sizes = None
            return Evolutionary().step(s)
        k = s.cfg.islands
        pop = s.population
        sizes = s.island_sizes
        if sizes is None or len(sizes) != k or sum(sizes) != len(pop):
            sizes = [len(pop) * (i + 1) // k - len(pop) * i // k for i in range(k)]
        share = [s.cfg.population * (i + 1) // k - s.cfg.population * i // k for i in range(k)]
        parents_a, parents_b = s.island_parents(pop, sizes, share)
        kids = s.scored_children(parents_a, parents_b)
        s.fit_constants_of(kids)
        isles, lo, off = [], 0, 0
        for m, n in zip(sizes, share):
            isles.append(s.keep_best(pop[lo:lo + m] + kids[off:off + n], n))
            lo, off = lo + m, off + n
        every = s.cfg.migration
        if every and len(s.history) % every == every - 1:
            _migrate(isles, s.penalized)
        s.island_sizes = [len(isle) for isle in isles]
        s.population = [c for isle in isles for c in isle]
        return s.population


def _migrate(isles: list[list[Candidate]],
             rank: Callable[[Sequence[Candidate]], Any] | None = None) -> None:
    """Copies of each island's best programs replace the worst of the next island (those it
    does not hold already), in place; best and worst by ``rank`` (the search's ``penalized``:
    the order selection and survivors use; None: the raw loss)."""
    def ordered(isle: list[Candidate]) -> list[Candidate]:
        r = [c.loss for c in isle] if rank is None else list(rank(isle))
        return [isle[i] for i in sorted(range(len(isle)), key=r.__getitem__)]

    best = [ordered(isle)[:MIGRANTS] for isle in isles]
    for i, sent in enumerate(best):
        dst = isles[(i + 1) % len(isles)]
        dst[:] = ordered(dst)
        held = {program_key(c.program) for c in dst}
        # at most the island's size: an island never grows (its size is the run's)
        new = [c for c in sent if program_key(c.program) not in held][:len(dst)]
        if new:
            dst[len(dst) - len(new):] = new


@dataclass(frozen=True)
class MapElites:
    """An archive: each generation's children are filed in their behaviour cells
    (:func:`numptx.search.elites.step`). While the archive is empty (no finite loss yet) the
    generation's candidates stand in, so best and median read +inf."""
    keeps_archive: bool = True

    def step(self, s: SearchState) -> list[Candidate]:
        made = elites.step(s)
        return list(s.archive.values()) or made


_STRATEGIES: dict[str, Strategy] = {"regress": Evolutionary(), "evolve": Evolutionary(),
                                    "map_elites": MapElites()}


def strategy_for(kind: Kind, islands: int = 1) -> Strategy:
    """The strategy of a kind of search (``"regress"``, ``"evolve"``, ``"map_elites"``);
    ``islands`` > 1: :class:`Islands`."""
    return Islands() if islands > 1 else _STRATEGIES[kind]
