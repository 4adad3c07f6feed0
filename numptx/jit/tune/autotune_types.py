"""What :func:`numptx.autotune` returns and raises: :class:`Tuned`, :class:`Excluded`,
:class:`AutotuneError`, :class:`AutotuneWarning` (re-exported by :mod:`numptx.jit.tune.autotune`).

>>> COSTS["registers"]
'registers'
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ...errors import NumptxError, NumptxWarning, warn_from_caller

__all__ = ["AutotuneError", "AutotuneWarning", "Excluded", "Tuned", "COSTS", "Stage", "warn_excluded"]

#: what a candidate can be ranked by, and the unit of its cost
COSTS = {"time": "s", "sass": "instructions", "registers": "registers"}


class AutotuneWarning(NumptxWarning):
    """Candidates :func:`autotune` excluded (each listed, also in ``Tuned.excluded``), or a
    ranking made another way than asked (``@nx.autotuned`` under numba-cuda's simulator)."""


#: where a candidate was excluded: its stubs did not fit the sites, its cubin did not build,
#: it failed to launch, its output differed from the reference, its cost could not be read
Stage = Literal["stubs", "build", "launch", "check", "measure"]


@dataclass(frozen=True)
class Excluded:
    """One candidate :func:`autotune` left out: its ``index``, the ``stage`` it failed at and
    why (``reason``, starting ``candidate <index>:``).

    >>> Excluded(2, "check", "candidate 2: argument 0: 3 of 8 element(s) differ ...").stage
    'check'
    """
    index: int
    stage: Stage
    reason: str


class AutotuneError(NumptxError):
    """Bad input to :func:`autotune` (naming the argument or candidate index), or no candidate
    left to rank. ``failed`` maps each excluded candidate's index to why."""

    def __init__(self, message: str, *, failed: Mapping[int, str] | None = None):
        self.failed = dict(failed or {})
        super().__init__(message)


@dataclass(frozen=True)
class Tuned:
    """What :func:`autotune` found: the winner ``variant`` (a Variant, a KernelVariant for an
    ``@nx.kernel`` kernel), its ``index`` and ``candidate``; ``costs[i]`` in ``unit`` (seconds
    for ``cost="time"``; instructions or registers), ``math.inf`` where candidate ``i`` failed;
    ``ranking`` (best first, ties by index); ``failed`` (index: why); ``excluded`` (the same
    candidates as :class:`Excluded` records: index, stage, reason); ``from_cache[i]``;
    ``measured`` (the indices this call measured); ``simulated`` (True: ranked under numba-cuda's
    simulator by each site assembled alone, see docs/autotune.md).

    >>> best.index, best.times[best.index], best.ranking      # doctest: +SKIP
    (1, 1.9e-05, (1, 2, 0))
    """
    variant: Any
    index: int
    candidate: Mapping[str, Any]
    costs: tuple[float, ...]
    ranking: tuple[int, ...]
    failed: Mapping[int, str]
    from_cache: tuple[bool, ...]
    measured: tuple[int, ...]
    cost: str
    keys: tuple[str | None, ...] = field(repr=False, default=())
    excluded: tuple[Excluded, ...] = ()
    simulated: bool = False

    @property
    def unit(self) -> str:
        """``"s"``, ``"instructions"`` or ``"registers"``."""
        return COSTS[self.cost]

    @property
    def times(self) -> tuple[float, ...]:
        """``costs``: seconds per candidate under ``cost="time"`` (the static cost otherwise,
        in ``unit``)."""
        return self.costs

    def table(self) -> str:
        """A Markdown table of the candidates, best first, then the failed ones."""
        unit = "µs" if self.cost == "time" else self.unit
        rows = [f"| rank | candidate | {unit} | cached |", "|---|---|---|---|"]
        for r, i in enumerate(self.ranking, 1):
            c = self.costs[i]
            shown = f"{c * 1e6:.2f}" if self.cost == "time" else f"{c:g}"
            rows.append(f"| {r} | {i} | {shown} | {'yes' if self.from_cache[i] else 'no'} |")
        for i, why in sorted(self.failed.items()):
            rows.append(f"| — | {i} | failed: {why[:80]} | |")
        return "\n".join(rows)


def warn_excluded(name: str, excluded: Sequence[Excluded], total: int) -> None:
    """One :class:`AutotuneWarning` listing the candidates :func:`autotune` left out (none: no
    warning), attributed to the user's line."""
    if not excluded:
        return
    lines = "\n".join(f"  [{e.stage}] {e.reason[:300]}" for e in excluded[:10])
    more = f"\n  ... and {len(excluded) - 10} more" if len(excluded) > 10 else ""
    warn_from_caller(f"autotune {name}: {len(excluded)} of {total} candidate(s) excluded "
                     f"(Tuned.excluded lists them):\n{lines}{more}", AutotuneWarning)
