"""What a generation's strategy may read and change of a running search: the
:class:`SearchState` Protocol, which :class:`numptx.search.loop.Search` satisfies.

:mod:`numptx.search.strategies` and :mod:`numptx.search.elites` are typed against it, not
against the loop (which imports them)::

    from numptx.search.state import SearchState
    def my_step(s: SearchState) -> list:          # one generation of a search
        kids = s.scored_children(parents_a, parents_b)
        s.fit_constants_of(kids)
        return kids
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .config import SearchOptions
from .genes import Genes
from .results import Candidate, Generation

__all__ = ["SearchState"]


@runtime_checkable
class SearchState(Protocol):
    """The state and steps a generation uses (see :class:`numptx.search.loop.Search`)."""
    cfg: SearchOptions
    genes: Genes
    rng: np.random.Generator
    population: list[Candidate]
    archive: dict[tuple, Candidate]
    history: list[Generation]
    descriptors: list
    timings: dict[str, float]
    improved_at: int
    restarts: int
    island_sizes: list[int] | None
    #: MAP-Elites' learned descriptors (``descriptors="learned"``), else None
    learned: Any

    def init_population(self) -> list[Candidate]:
        """A scored random population."""
        ...

    def next_population(self, pop: list[Candidate]) -> list[Candidate]:
        """The population after one generation of selection, children and survivors."""
        ...

    def island_parents(self, pop: list[Candidate], sizes: Sequence[int],
                       share: Sequence[int]) -> tuple[list, list]:
        """Tournament-selected parent pairs drawn island by island."""
        ...

    def keep_best(self, both: list[Candidate], n: int) -> list[Candidate]:
        """The best ``n`` distinct programs of ``both``."""
        ...

    def scored_children(self, parents_a: list, parents_b: list) -> list[Candidate]:
        """One scored child per pair of parents."""
        ...

    def fit_constants_of(self, cands: list[Candidate]) -> None:
        """Fit the constants of new candidates, in place."""
        ...

    def penalized(self, cands: Sequence[Candidate]) -> np.ndarray:
        """The candidates' losses with the parsimony penalty."""
        ...

    def candidate(self, program: list, loss: float) -> Any:
        """A candidate of this search's genes."""
        ...
