"""Learned behaviour descriptors for MAP-Elites (``map_elites(..., descriptors="learned")``;
issue 25, the roadmap's "behavioural descriptors").

A program's behaviour is its outputs on a fixed probe of the training rows (the CPU
interpreter, :data:`PROBE_ROWS` rows drawn with the run's seed), each output as
``sign(v)·log1p(|v|)`` (non-finite: 0). The two principal components of the archive's outputs
are the axes (PCA by SVD of the centred outputs); each axis is cut into ``bins`` equal cells
between the 1st and 99th percentiles of the archive's projections (values outside go to the
end cells; a component of negligible variance is zero, its bin the first). The basis is
fitted on the first generation's programs and fitted again every :data:`REFIT` generations on
the archive's elites (with that generation's children while the archive holds fewer elites
than 3), which are then filed again under the new basis (two elites in one cell: the lower
penalized loss stays). A run's basis is part of its checkpoint, so a resumed run files
programs as the uninterrupted one does::

    from numptx import search
    r = search.map_elites(X, y, ["add", "mul", "sin"], descriptors="learned", bins=6,
                          batch=300, generations=30, seed=0)
    r.archive           # (i, j) cell -> Candidate: similar outputs, similar cells
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import stack_ptx as sp
from .genes import Genes, SearchError

__all__ = ["LearnedCells", "PROBE_ROWS", "REFIT", "AXES", "check_probe"]

#: rows of the probe the behaviour is read on (all rows when the data have fewer)
PROBE_ROWS = 32
#: generations between two fits of the basis (the archive is filed again after each)
REFIT = 10
#: the learned axes
AXES = ("latent0", "latent1")
#: the largest transformed output, log1p of the float64 maximum (a checkpoint's mean is within)
OUTPUT_MAX = float(np.log1p(np.finfo(np.float64).max))


def check_probe(n_rows: int) -> None:
    """A learned basis needs at least two probe rows (two components of the outputs)."""
    if n_rows < 2:
        raise SearchError(f"map_elites: descriptors='learned': the data have {n_rows} row(s); "
                          f"learned descriptors read the outputs on probe rows and need at "
                          f"least 2 (or give descriptors by name)")


class LearnedCells:
    """The probe, the basis and the ranges of a run's learned descriptors."""

    def __init__(self, genes: Genes, X: np.ndarray, bins: int, seed: int) -> None:
        check_probe(X.shape[0])
        self.genes, self.bins = genes, bins
        rng = np.random.default_rng([seed % (1 << 63), 26])
        rows = np.sort(rng.choice(X.shape[0], size=min(PROBE_ROWS, X.shape[0]), replace=False))
        self.probe = {n: np.ascontiguousarray(X[rows, j]) for j, n in enumerate(genes.names)}
        r = len(rows)
        self.mean = np.zeros(r)
        self.basis = np.zeros((len(AXES), r))
        self.low = np.zeros(len(AXES))
        self.high = np.ones(len(AXES))
        self.fitted_at = -1              # the generation the basis was last fitted (-1: never)

    def outputs(self, programs: list) -> np.ndarray:
        """The programs' behaviour: their outputs on the probe rows, transformed."""
        out = sp.interpret(programs, self.probe, self.genes.outputs, device="cpu",
                           on_limit="run")
        f = np.asarray(next(iter(out.values())), np.float64).reshape(len(programs), -1)
        with np.errstate(all="ignore"):
            v = np.sign(f) * np.log1p(np.abs(f))
        v[~np.isfinite(v)] = 0.0
        return v

    def fit(self, programs: list, generation: int) -> None:
        """The basis and ranges from ``programs``' outputs (the archive's, or a first batch)."""
        V = self.outputs(programs)
        self.mean = V.mean(axis=0)
        C = V - self.mean
        basis = np.zeros_like(self.basis)
        if len(programs) > 1:
            _, sv, vt = np.linalg.svd(C, full_matrices=False)
            # a component of a negligible singular value is rounding noise, no axis: it
            # stays zero (every program in its first bin; review 25b)
            tol = sv[0] * max(C.shape) * np.finfo(np.float64).eps if len(sv) else 0.0
            k = min(len(AXES), int(np.count_nonzero(sv > tol)))
            basis[:k] = vt[:k]
            for i in range(k):          # a sign convention: the largest loading is positive
                if basis[i, np.argmax(np.abs(basis[i]))] < 0:
                    basis[i] = -basis[i]
        self.basis = basis
        Z = C @ basis.T
        lo, hi = np.percentile(Z, 1, axis=0), np.percentile(Z, 99, axis=0)
        self.low, self.high = lo, np.where(hi > lo, hi, lo + 1.0)
        self.fitted_at = generation

    def cells(self, programs: list) -> list[tuple]:
        """Each program's cell: its projection on the basis, binned between the ranges."""
        if not programs:
            return []
        Z = (self.outputs(programs) - self.mean) @ self.basis.T
        frac = (Z - self.low) / (self.high - self.low)
        b = np.clip(np.floor(frac * self.bins), 0, self.bins - 1).astype(np.int64)
        return [tuple(row) for row in b.tolist()]

    def due(self, generation: int) -> bool:
        """Whether the basis is fitted again at ``generation`` (never fitted, or REFIT since)."""
        return self.fitted_at < 0 or generation - self.fitted_at >= REFIT

    def refile(self, archive: dict, penalized: Callable[[list], Any]) -> dict:
        """The archive's elites filed again under the current basis (collisions: the lower
        penalized loss; ties: the earlier cell's)."""
        elites = list(archive.values())
        out: dict[tuple, Any] = {}
        pen = penalized(elites) if elites else []
        best: dict[tuple, float] = {}
        for c, at, f in zip(elites, self.cells([c.program for c in elites]), pen):
            if at not in out or f < best[at]:
                out[at], best[at] = c, float(f)
        return out

    # -- checkpoints ------------------------------------------------------------------------
    def state(self, encode_array: Callable[[np.ndarray], dict]) -> dict:
        return {"mean": encode_array(self.mean), "basis": encode_array(self.basis),
                "low": encode_array(self.low), "high": encode_array(self.high),
                "fitted_at": self.fitted_at}

    def restore(self, st: dict, decode_array: Callable[[dict, str], np.ndarray],
                generations: int) -> None:
        """A checkpoint's state, checked against this run's probe (a fault raises
        ValueError naming the part)."""
        r = len(self.mean)
        got = {k: np.asarray(decode_array(st[k], f"learned.{k}"), np.float64)
               for k in ("mean", "basis", "low", "high")}
        want = {"mean": (r,), "basis": (len(AXES), r), "low": (len(AXES),),
                "high": (len(AXES),)}
        for k, shape in want.items():
            if got[k].shape != shape or not np.all(np.isfinite(got[k])):
                raise ValueError(f"learned.{k}: not {shape} finite numbers")
        if not np.all(got["high"] > got["low"]):
            raise ValueError("learned.high: not above learned.low")
        # what a fit can give (else the projection overflows to NaN cells): basis rows of
        # norm 1 or 0, a mean of outputs within log1p(float64 max) (review 25b)
        with np.errstate(over="ignore"):
            norms = np.linalg.norm(got["basis"], axis=1)
        if not np.all(norms <= 1.0 + 1e-9):
            raise ValueError("learned.basis: a row's norm is above 1 (a PCA basis has unit rows)")
        if not np.all(np.abs(got["mean"]) <= OUTPUT_MAX):
            raise ValueError(f"learned.mean: beyond ±{OUTPUT_MAX} (the outputs' range)")
        at = st["fitted_at"]
        if type(at) is not int or not -1 <= at <= generations:
            raise ValueError(f"learned.fitted_at: {at!r} is not an int in [-1, {generations}]")
        self.mean, self.basis, self.low, self.high = (got["mean"], got["basis"], got["low"],
                                                      got["high"])
        self.fitted_at = at


def descriptor_bins(bins: int | None) -> int:
    """Cells per learned axis (``bins``, default 8)."""
    return 8 if bins is None else bins


def is_learned(descriptors: Any) -> bool:
    """Whether a run's descriptors are the learned ones (``"learned"`` alone)."""
    return tuple(descriptors) == ("learned",)


def check_learned(descriptors: tuple) -> None:
    """``"learned"`` stands alone: its two axes are the grid."""
    if "learned" in descriptors and len(descriptors) != 1:
        raise SearchError(f"map_elites: descriptors={list(descriptors)!r}: 'learned' gives both "
                          f"axes of the grid; give it alone (descriptors='learned')")

