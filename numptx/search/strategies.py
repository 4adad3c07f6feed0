"""How a search makes each generation: a selection strategy object per kind of search.

:class:`numptx.search.loop.Search` runs the generations; its :class:`Strategy` decides what one
generation does and what the run keeps:

- :class:`Evolutionary` (``regress``, ``evolve``): a population; tournament selection, children,
  survivors (``survivors="plus"`` or ``"children"``), and a fresh population after ``restart``
  generations without progress;
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
from typing import Protocol

from . import elites
from .config import Kind
from .results import Candidate
from .state import SearchState

__all__ = ["Strategy", "Evolutionary", "MapElites", "strategy_for"]

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

    def step(self, s: SearchState) -> list[Candidate]:
        stall = s.cfg.restart
        if stall and s.population and len(s.history) - s.improved_at >= stall:
            s.population, s.improved_at = [], len(s.history)
            s.restarts += 1
            log.info("numptx.search: no progress in %d generations: restart %d", stall,
                     s.restarts)
        if not s.population:
            cands = s.init_population()
            s.fit_constants_of(cands)
            s.population = cands
        else:
            s.population = s.next_population(s.population)
        return s.population


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


def strategy_for(kind: Kind) -> Strategy:
    """The strategy of a kind of search (``"regress"``, ``"evolve"``, ``"map_elites"``)."""
    return _STRATEGIES[kind]
