"""Semantic dedup: a new program whose outputs on a fixed probe of rows equal, bit for bit,
those of a program already scored is a duplicate and takes that program's loss; nothing is
built or run for it beyond the probe. This goes past the canonical-key dedup
(:func:`numptx.search.formula.canonical_keys`: equal stubs), which cannot see that
``x0 * x0 - x0 * x0`` and ``0`` or ``(x0 + x1) * x0`` and ``x0 * x0 + x1 * x0`` agree::

    from numptx.search.semantic import Semantic
    sem = Semantic(evaluator, rows=32, seed=0)      # the probe: 32 rows drawn with the seed
    scored, dups = sem.split(programs, keys)        # dups: key -> a loss, or the key whose
                                                    # loss it takes (scored in this batch)
    ...                                             # score `scored`, fill the cache
    sem.settle(cache)                               # the batch's new outputs, with their loss

The probe runs the batch interpreter (:func:`numptx.stack_ptx.interpret`'s C core) on the
probe rows, for the whole batch at once; each program's outputs there are hashed (blake2b,
16 bytes) into a table of output hash -> loss. Programs the interpreter does not run (a row
without C semantics, a read of ``cand``) are not probed: they are scored.

Exact or not: when the data has no more rows than the probe, the probe is every row and equal
outputs give equal losses bit for bit (on the CPU: the losses are a function of the outputs),
so a run with semantic dedup makes the same children, losses and results as one without; only
``evaluated`` is lower. With more rows, two programs that agree on the probe rows but not on
some other row are taken as one: the second gets the first's loss. The probe rows are drawn
from the run's seed, so a run (and its resume) is reproducible. ``resolve`` decides the
default (``semantic_dedup=None``): on where the probe costs much less than the scoring.
"""
from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._program.interpret import columns, reads_input, refused, run_cpu, subset, tapes
from .._program.ops import ProgramError
from .config import CACHE_MAX

__all__ = ["Semantic", "resolve", "PROBE_ROWS", "AUTO_MIN_ROWS"]

log = logging.getLogger(__name__)

#: the probe's rows when ``semantic_dedup=None`` resolves to on
PROBE_ROWS = 32
#: with the interpreter scoring (``evaluate="interpret"``), the default probe is on from this
#: many rows of data. The probe costs ~16 µs a program (its tape, 32 rows, a hash) and finds
#: ~8 % of the new children of a Nguyen-style run; scoring costs ~35 µs a program per 1,000
#: rows, so the probe pays from ~6,000 rows (measured: a loss at 1,000 and 5,000 rows, a gain
#: on the compiled path at 20; docs/search.md, "Semantic dedup")
AUTO_MIN_ROWS = 16384
_SALT = 0x5E3A_D1CE             # the probe's random stream: (seed, salt)


def resolve(semantic_dedup: int | None, mode: str, device: str, n_rows: int) -> int:
    """The probe's rows for a run: ``semantic_dedup`` when given (0: off), else
    :data:`PROBE_ROWS` when the programs are compiled to be scored (a compile costs ~100x a
    probe) or the CPU interpreter scores at least :data:`AUTO_MIN_ROWS` rows, else 0 (the GPU
    interpreter scores a program in less than the CPU probe costs)."""
    if semantic_dedup is not None:
        return semantic_dedup
    if mode == "compile":
        return PROBE_ROWS
    return PROBE_ROWS if device == "cpu" and n_rows >= AUTO_MIN_ROWS else 0


class Semantic:
    """The probe of one run (``evaluator``'s data, ``rows`` rows drawn with ``seed``) and its
    table of output hashes; ``hits`` counts the duplicates it found."""

    def __init__(self, evaluator: Any, rows: int, seed: int):
        n = evaluator.X.shape[0]
        k = min(int(rows), n)
        if k < n:
            rng = np.random.default_rng([int(seed) & 0xFFFF_FFFF_FFFF_FFFF, _SALT])
            self.rows = np.sort(rng.choice(n, k, replace=False))
        else:
            self.rows = np.arange(n)
        X = evaluator.X[self.rows]
        self.site = evaluator.site
        cols, self.n = columns({"cand": np.uint32(0)}
                               | {m: np.ascontiguousarray(X[:, j])
                                  for j, m in enumerate(evaluator.names)})
        self.by_name = {c.name: c for c in cols}
        self.table: dict[bytes, float] = {}
        self.pending: dict[bytes, bytes] = {}        # output hash -> key, scored this batch
        self.hits = 0

    def begin(self) -> None:
        """Start a batch: what an unfinished one left pending is dropped."""
        self.pending.clear()

    def hashes(self, programs: Sequence[Any]) -> list[bytes | None]:
        """Each program's output hash on the probe rows; None where it is not probed."""
        out: list[bytes | None] = [None] * len(programs)
        if not len(programs):
            return out
        try:
            tp = tapes(list(programs), site=self.site)
        except ProgramError as e:       # the scoring says what is wrong with the batch
            log.debug("numptx.search: no probe for a batch: %s", e)
            return out
        skip = np.zeros(len(tp), dtype=bool)
        skip[list(refused(tp))] = True
        skip |= reads_input(tp, list(tp.inputs).index("cand"))
        keep = np.flatnonzero(~skip)
        if not len(keep):
            return out
        order = [self.by_name[m.split("\x00")[0]] for m in tp.inputs]
        pred = run_cpu(subset(tp, keep), order, self.n)[next(iter(tp.outputs))]
        raw = np.ascontiguousarray(pred).view(np.uint8).reshape(len(keep), -1)
        blake = hashlib.blake2b
        for i, row in zip(keep.tolist(), raw):
            out[i] = blake(row.data, digest_size=16).digest()
        return out

    def split(self, programs: list, keys: list[bytes]
              ) -> tuple[list, list[bytes], dict[bytes, float | bytes]]:
        """(programs to score, their keys, duplicates): a duplicate's key maps to the loss
        of the scored program of equal outputs, or to that program's key when it is scored in
        this batch (:meth:`settle` then files its loss)."""
        hs = self.hashes(programs)
        new_p, new_k, dups = [], [], {}
        for p, k, h in zip(programs, keys, hs):
            if h is not None:
                seen = self.table.get(h)
                if seen is None:
                    seen = self.pending.get(h)
                if seen is not None:
                    dups[k] = seen
                    continue
                self.pending[h] = k
            new_p.append(p)
            new_k.append(k)
        self.hits += len(dups)
        return new_p, new_k, dups

    def settle(self, cache: dict[bytes, float]) -> None:
        """File the batch's new output hashes with the losses ``cache`` holds for their
        keys; the table is cleared first when they would take it past ``CACHE_MAX`` entries
        (a batch holds at most a population, ``POPULATION_MAX`` = ``CACHE_MAX``), so between
        batches it holds at most ``CACHE_MAX``: all of it goes into a checkpoint."""
        if len(self.table) + len(self.pending) > CACHE_MAX:
            self.table.clear()
        for h, k in self.pending.items():
            v = cache.get(k)
            if v is not None:
                self.table[h] = v
        self.pending.clear()
