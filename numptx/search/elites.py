"""MAP-Elites (:func:`numptx.search.searches.map_elites`): an archive keeps the best program of each cell of a
behaviour grid (:class:`Descriptor` axes; built in: :data:`DESCRIPTORS`)::

    from numptx import search
    r = search.map_elites(X, y, ["add", "mul", "sin"], descriptors=("length", "op_mix"),
                          batch=500, generations=50, seed=0)
    r.archive            # cell index tuple -> Candidate

The generation step (:func:`step`) runs inside :class:`numptx.search.loop.Search`.
"""
from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from ..instructions import TABLE
from .config import BINS_MAX, SearchOptions, check_float
from .genes import Genes, SearchError, check_int
from .learned_cells import AXES, check_learned, descriptor_bins, is_learned
from .results import Candidate
from .state import SearchState

__all__ = ["Descriptor", "DESCRIPTORS", "descriptors", "cell", "step"]

_LINEAR = {"add", "sub", "mul", "neg", "abs", "max", "min", "fma", "mov"}


class Descriptor(NamedTuple):
    """A MAP-Elites behaviour axis: ``fn(program, genes) -> float`` binned into ``bins`` equal
    cells over ``[low, high]`` (values outside go to the end cells)."""
    name: str
    fn: Callable[[list, Genes], float]
    low: float
    high: float
    bins: int


def _length(prog: list, genes: Genes) -> float:
    return float(len(prog))


def _op_mix(prog: list, genes: Genes) -> float:
    """The share of instructions that are not linear (exp, log, sin, div, ...)."""
    names = [TABLE[op.word >> 16].name for op in prog if op.kind == "instr"]
    if not names:
        return 0.0
    return sum(n.split(".")[0] not in _LINEAR for n in names) / len(names)


def _input_share(prog: list, genes: Genes) -> float:
    return sum(op.kind == "input" for op in prog) / max(1, len(prog))


#: built-in descriptors by name (``length`` takes its range from ``max_length``)
DESCRIPTORS = {"length": Descriptor("length", _length, 0, 64, 8),
               "op_mix": Descriptor("op_mix", _op_mix, 0.0, 1.0, 5),
               "inputs": Descriptor("inputs", _input_share, 0.0, 1.0, 5)}



def _learned_axis(prog: list, genes: Genes) -> float:
    raise SearchError("map_elites: a learned axis is read by the run's LearnedCells, not "
                      "program by program")


def descriptors(cfg: SearchOptions) -> list[Descriptor]:
    check_learned(cfg.descriptors)
    if is_learned(cfg.descriptors):          # two axes of a learned basis (learned_cells)
        bins = descriptor_bins(cfg.bins)
        return [Descriptor(a, _learned_axis, 0.0, 1.0, bins) for a in AXES]
    out = []
    for d in cfg.descriptors:
        if isinstance(d, str):
            if d not in DESCRIPTORS:
                raise SearchError(f"map_elites: descriptors: unknown {d!r}; built in: "
                                  f"{', '.join(DESCRIPTORS)}, or a Descriptor(name, fn, low, "
                                  f"high, bins)")
            d = DESCRIPTORS[d]
            if d.name == "length":
                d = d._replace(high=cfg.max_length)
        elif isinstance(d, tuple) and len(d) == 5 and callable(d[1]):
            d = Descriptor(*d)
            check_int(f"map_elites: descriptor {d.name!r} bins", d.bins, 1, BINS_MAX,
                      "cells per axis")
            for what in ("low", "high"):
                check_float(f"map_elites: descriptor {d.name!r} {what}", getattr(d, what),
                            -sys.float_info.max, sys.float_info.max)
            if not float(d.low) < float(d.high):       # else every program is in one cell
                raise SearchError(f"map_elites: descriptor {d.name!r}: low={d.low!r} is not "
                                  f"below high={d.high!r}; give the range its values span")
            d = d._replace(low=float(d.low), high=float(d.high))
        else:
            raise SearchError(f"map_elites: descriptors: {d!r} is neither a built-in name nor "
                              f"a Descriptor(name, fn, low, high, bins)")
        if cfg.bins is not None:
            d = d._replace(bins=check_int("bins", cfg.bins, 1, BINS_MAX, "cells per axis"))
        out.append(d)
    if not out:
        raise SearchError("map_elites: descriptors= is empty")
    return out


def cell(s: SearchState, prog: list) -> tuple:
    """The archive cell of ``prog`` (one bin index per descriptor of the search ``s``)."""
    out = []
    for d in s.descriptors:
        got = d.fn(prog, s.genes)
        if isinstance(got, np.ndarray) and got.ndim == 0:
            got = got[()]
        if isinstance(got, (bool, np.bool_)) or not isinstance(got, (int, float, np.number)) \
                or isinstance(got, np.complexfloating):
            raise SearchError(f"map_elites: descriptor {d.name!r} returned {got!r} "
                              f"({type(got).__name__}); it must return a number")
        out.append(_bin(d, got))
    return tuple(out)


def _bin(d: Descriptor, got: Any) -> int:
    """The bin of value ``got`` on axis ``d``: values below ``low`` (and NaN) in the first,
    values above ``high`` (and +inf) in the last; any float or int, however large."""
    try:
        v = float(got)
    except OverflowError:                    # an int past the float range
        v = math.inf if got > 0 else -math.inf
    if not v > d.low:                        # (NaN too)
        return 0
    if v >= d.high:
        return d.bins - 1
    span = d.high - d.low
    if math.isinf(span):                     # low and high far apart: halves do not overflow
        frac = (v / 2 - d.low / 2) / (d.high / 2 - d.low / 2)
    else:
        frac = (v - d.low) / span
    return int(min(d.bins - 1, max(0, math.floor(frac * d.bins))))


def step(s: SearchState) -> list[Candidate]:
    """One MAP-Elites generation of the search ``s`` (:class:`numptx.search.loop.Search`):
    ``batch`` children of uniformly drawn elites (the first generation, or while the archive
    is empty: random programs), scored, fitted and filed. Returns the generation's candidates
    (the archive holds only finite ones; when none is finite the archive stays empty and the
    next generation starts from random programs again)."""
    cfg = s.cfg
    if not s.archive:
        cands = s.init_population()
    else:
        t0 = time.perf_counter()
        elites = list(s.archive.values())
        idx = s.rng.integers(0, len(elites), size=(cfg.population, 2))
        s.timings["select"] += time.perf_counter() - t0
        cands = s.scored_children([elites[i].program for i in idx[:, 0].tolist()],
                                  [elites[i].program for i in idx[:, 1].tolist()])
    s.fit_constants_of(cands)
    t0 = time.perf_counter()
    pen = s.penalized(cands)
    learned = s.learned
    cells: Iterator[tuple] | None = None
    if learned is not None:                  # the learned basis: fitted again, archive refiled
        finite = [c.program for c in cands if math.isfinite(c.loss)]
        if learned.due(len(s.history)) and (s.archive or finite):
            kept = [c.program for c in s.archive.values()]
            # n elites span n - 1 directions: no more than the axes span no grid (one elite:
            # a zero basis, one cell for ever); the generation's children join (review 25b)
            learned.fit(kept if len(kept) > len(AXES) else kept + finite, len(s.history))
            s.archive = learned.refile(s.archive, s.penalized)
        cells = iter(learned.cells(finite))
    for c, f in zip(cands, pen):
        if not math.isfinite(c.loss):
            continue
        at = next(cells) if cells is not None else cell(s, c.program)
        old = s.archive.get(at)
        if old is None or f < s.penalized([old])[0]:
            s.archive[at] = c
    s.timings["select"] += time.perf_counter() - t0
    return cands
