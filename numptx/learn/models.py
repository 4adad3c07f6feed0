"""Models of :mod:`numptx.learn`: the :class:`Model` seam, ridge regression on random features
(:class:`RandomFeatureRidge`, the default), the small MLP (:class:`MLP`, in :mod:`.mlp`) and
:func:`spearman`.

A model learns online: ``partial_fit(F, y)`` adds rows (``F``: features, one row a candidate;
``y``: its loss), ``predict(F)`` estimates losses, ``rank(F)`` orders candidates best (lowest)
first. Everything is seeded (``np.random.default_rng(seed)``) and picklable (plain
attributes: a pickled model predicts and keeps learning exactly as the original)::

    >>> import numpy as np
    >>> from numptx.learn.models import RandomFeatureRidge, spearman
    >>> rng = np.random.default_rng(0)
    >>> F = rng.normal(size=(2000, 2))
    >>> y = np.sin(F[:, 0]) + F[:, 1] ** 2
    >>> model = RandomFeatureRidge(features=128, seed=0)
    >>> for chunk in range(0, 1500, 500):           # online: three batches
    ...     _ = model.partial_fit(F[chunk:chunk + 500], y[chunk:chunk + 500])
    >>> model.n_seen, model.n_features
    (1500, 2)
    >>> bool(spearman(model.predict(F[1500:]), y[1500:]) > 0.95)
    True
    >>> order = model.rank(F[1500:])                  # best (lowest predicted loss) first
"""
from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

import numpy as np

from . import checks
from .checks import rank_order
from .errors import LearnError
from .mlp import MLP

__all__ = ["Model", "RandomFeatureRidge", "MLP", "spearman", "rank_order"]

KINDS = ("fourier", "relu")
#: standardized inputs are clipped to +-ZMAX standard deviations (a row far outside the first
#: batch's spread, or one that would overflow float32, still gives finite features)
ZMAX = 1e6


@runtime_checkable
class Model(Protocol):
    """What a search needs of a fitness predictor: learn rows online, predict, rank.

    ``partial_fit`` returns the model itself; ``predict`` gives one float64 a row;
    ``rank`` gives int64 row indices, lowest prediction first (ties by index);
    ``n_seen`` counts the rows learned; ``n_features`` is the feature count of the first
    fit (``None`` before)."""

    n_seen: int
    n_features: int | None

    def partial_fit(self, F: Any, y: Any) -> Model: ...

    def predict(self, F: Any) -> np.ndarray: ...

    def rank(self, F: Any) -> np.ndarray: ...


def _average_ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    xs = x[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    ends = np.r_[starts[1:], len(xs)]
    mean_rank = (starts + ends - 1) / 2.0  # the average 0-based position of each tie group
    ranks = np.empty(len(x))
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def spearman(a: Any, b: Any) -> float:
    """Spearman's rank correlation of ``a`` and ``b`` (1-D, the same length, finite): the
    Pearson correlation of their ranks, tied values given their average rank. ``nan`` when
    either side is constant (or has fewer than 2 values)::

        >>> spearman([1, 2, 3, 4], [10, 20, 30, 40])
        1.0
        >>> spearman([1, 2, 2, 3], [3, 2, 2, 1])
        -1.0
    """
    xa = checks.vector(a, "a", "one value a candidate")
    xb = checks.vector(b, "b", "one value a candidate")
    if len(xa) != len(xb):
        raise LearnError(f"spearman: a has {len(xa)} values but b has {len(xb)}; give one "
                         "value a candidate on each side")
    if len(xa) < 2:
        return math.nan
    ra, rb = _average_ranks(xa), _average_ranks(xb)
    ra -= ra.mean()
    rb -= rb.mean()
    den = math.sqrt(float(ra @ ra) * float(rb @ rb))
    if den == 0.0:
        return math.nan
    return float(max(-1.0, min(1.0, float(ra @ rb) / den)))


def _mean_std(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column's mean and std, float64; a column whose sums or squares overflow (values
    past ~1e154) by its values divided by its largest magnitude (finite whatever the values)."""
    with np.errstate(over="ignore", invalid="ignore"):
        mean = X.mean(axis=0, dtype=np.float64)
        std = X.std(axis=0, dtype=np.float64)
    bad = ~(np.isfinite(mean) & np.isfinite(std))
    if bad.any():
        top = np.abs(X[:, bad]).max(axis=0).astype(np.float64)
        S = X[:, bad].astype(np.float64) / top
        mean[bad] = S.mean(axis=0) * top
        std[bad] = S.std(axis=0) * top
    return mean, std


class RandomFeatureRidge:
    """Ridge regression on ``features`` random features of the standardized inputs, solved in
    closed form from sufficient statistics that each ``partial_fit`` updates.

    * features: ``phi(F) = cos(Z W + b) * sqrt(2 / D)`` (``kind="fourier"``: random Fourier
      features of a Gaussian kernel, ``b ~ U[0, 2 pi)``) or ``relu(Z W + b) * sqrt(2 / D)``
      (``kind="relu"``, ``b ~ N(0, 1)``), ``W ~ N(0, scale^2 / d)`` (``d`` inputs: ``scale``
      is the inverse length scale in units of ``sqrt(d)`` standard deviations), plus a
      constant column, which is not penalized (it carries the target's mean);
    * standardization: ``Z = (F - mean) / std`` with ``mean`` and ``std`` fixed from the first
      ``partial_fit`` batch (a constant column's std taken as 1), clipped to ``+-ZMAX``
      (1e6); ``W`` and ``b`` are drawn then, from ``seed``;
    * precision: the random features are computed in float32 (``Z W + b`` and its ``cos``:
      the bulk of a prediction's time), the statistics, the solve and ``theta`` in float64;
      a prediction is the float32 features times ``theta`` rounded to float32 (~1e-6 of the
      terms' magnitude: plenty for ranking candidates);
    * the fit: ``A = sum phi^T phi``, ``c = sum phi^T y`` over every row learned; the weights
      solve ``(A + alpha P) theta = c`` (``P``: the identity without the constant column),
      checked positive definite by a Cholesky factorization, a least-squares solve if it is
      not; with ``decay < 1`` each ``partial_fit``
      first multiplies ``A`` and ``c`` by ``decay`` (a row learned k batches ago weighs
      ``decay**k``: forgetting, for a search whose losses drift).

    An update costs ``O(rows * D * (d + D))`` whatever the rows learned before; a prediction
    ``O(rows * D * d)``.

    ::

        >>> import numpy as np
        >>> F = np.random.default_rng(1).uniform(-2, 2, size=(500, 3))
        >>> model = RandomFeatureRidge(features=64, alpha=1e-3).partial_fit(F, F.sum(axis=1))
        >>> bool(abs(model.predict([[0.5, 0.5, 0.5]])[0] - 1.5) < 0.05)
        True
    """

    def __init__(self, features: int = 128, alpha: float = 1e-2, kind: str = "fourier",
                 scale: float = 1.0, decay: float = 1.0, seed: int = 0) -> None:
        self.features = checks.integer(features, "features", 1, 65536)
        self.alpha = checks.real(alpha, "alpha", 0.0, low_open=True)
        self.kind = checks.choice(kind, "kind", KINDS)
        self.scale = checks.real(scale, "scale", 0.0, low_open=True)
        self.decay = checks.real(decay, "decay", 0.0, 1.0, low_open=True)
        self.seed = checks.integer(seed, "seed", 0)
        self.n_seen = 0
        self.n_features: int | None = None
        # the state (empty until the first fit)
        self.mean = np.zeros(0)                # (d,) float64
        self.std = np.ones(0)                  # (d,) float64
        self.W = np.zeros((0, 0), np.float32)  # (d, D) float32, drawn at the first fit
        self.b = np.zeros(0, np.float32)       # (D,) float32
        self.A = np.zeros((0, 0))              # (D + 1, D + 1): sum of phi^T phi, decayed
        self.c = np.zeros(0)                   # (D + 1,): sum of phi^T y, decayed
        self.theta = np.zeros(0)               # (D + 1,): the solution
        self.solver = ""                       # "cholesky" or "lstsq": how theta was found

    def __repr__(self) -> str:
        return (f"RandomFeatureRidge(features={self.features}, alpha={self.alpha:g}, "
                f"kind={self.kind!r}, scale={self.scale:g}, decay={self.decay:g}, "
                f"seed={self.seed}; n_seen={self.n_seen})")

    def _start(self, X: np.ndarray) -> None:
        d, D = X.shape[1], self.features
        self.mean, std = _mean_std(X)
        self.std = np.where(std > 0, std, 1.0)
        rng = np.random.default_rng(self.seed)
        self.W = rng.normal(0.0, self.scale / math.sqrt(d), size=(d, D)).astype(np.float32)
        if self.kind == "fourier":
            self.b = rng.uniform(0.0, 2.0 * math.pi, size=D).astype(np.float32)
        else:
            self.b = rng.normal(0.0, 1.0, size=D).astype(np.float32)
        self.A = np.zeros((D + 1, D + 1))
        self.c = np.zeros(D + 1)
        self.n_features = d

    def transform(self, F: Any) -> np.ndarray:
        """The feature map ``phi(F)``: (rows, D + 1) float64, the constant column last."""
        if self.n_features is None:
            raise LearnError("RandomFeatureRidge.transform: the model has not been fitted; "
                             "call partial_fit(F, y) first")
        return self._phi(checks.matrix(F, "F", self.n_features, float32_ok=True))

    def _unscaled(self, X: np.ndarray) -> np.ndarray:
        """``cos`` or ``relu`` of ``Z W + b``: (rows, D) float32 (float32 features: NumPy's
        float32 ``cos`` is SIMD, ~20x its float64 one; the fit itself is float64)."""
        with np.errstate(over="ignore"):              # inf, then clipped
            Z = X - self.mean.astype(X.dtype)          # in X's precision
            Z *= (1.0 / self.std).astype(X.dtype)
        np.clip(Z, -ZMAX, ZMAX, out=Z)
        out = Z.astype(np.float32, copy=False) @ self.W
        out += self.b
        if self.kind == "fourier":
            return np.cos(out, out=out)
        return np.maximum(out, 0.0, out=out)

    def _phi(self, X: np.ndarray) -> np.ndarray:
        out = np.empty((X.shape[0], self.features + 1))
        np.multiply(self._unscaled(X), math.sqrt(2.0 / self.features), out=out[:, :-1])
        out[:, -1] = 1.0
        return out

    def partial_fit(self, F: Any, y: Any) -> RandomFeatureRidge:
        """Learn the rows ``F`` (rows, features) with targets ``y`` (rows,); returns ``self``.
        An empty batch after the first fit changes nothing (the decay is not applied)."""
        X = checks.matrix(F, "F", self.n_features, float32_ok=True)
        t = checks.target(y, X.shape[0], "y")
        if X.shape[0] == 0:
            if self.n_features is None:
                raise LearnError("F: 0 rows; the first partial_fit needs at least one row "
                                 "(its mean and std standardize the inputs)")
            return self
        if X.shape[1] == 0:
            raise LearnError("F: 0 columns; give at least one feature a row")
        if self.n_features is None:
            self._start(X)
        Phi = self._phi(X)
        keep = self.decay if self.n_seen else 1.0
        with np.errstate(over="ignore", invalid="ignore"):
            c = self.c * keep + Phi.T @ t
        if not np.isfinite(c).all():          # the model is left as it was
            raise LearnError(f"y: the fit's sums overflow float64 (|y| up to "
                             f"{float(np.abs(t).max()):.3g}); scale the targets")
        if keep != 1.0:
            self.A *= keep
        self.A += Phi.T @ Phi
        self.c = c
        self.n_seen += X.shape[0]
        self.theta, self.solver = self._solve()
        return self

    def penalty(self) -> np.ndarray:
        """The diagonal of ``alpha P``: ``alpha`` for each random feature, 0 for the constant."""
        pen = np.full(self.features + 1, self.alpha)
        pen[-1] = 0.0
        return pen

    def _solve(self) -> tuple[np.ndarray, str]:
        M = self.A + np.diag(self.penalty())
        try:
            # Cholesky proves M positive definite (NumPy has no triangular solve: two LU
            # solves of L would cost more than one of M, which is as stable here)
            np.linalg.cholesky(M)
            theta = np.linalg.solve(M, self.c)
            if np.isfinite(theta).all():
                return theta, "cholesky"
        except np.linalg.LinAlgError:
            pass
        return np.linalg.lstsq(M, self.c, rcond=None)[0], "lstsq"

    def predict(self, F: Any) -> np.ndarray:
        """The predicted target of each row of ``F``: float64, (rows,)."""
        if self.n_features is None:
            raise LearnError("RandomFeatureRidge.predict: the model has not been fitted; "
                             "call partial_fit(F, y) first")
        X = checks.matrix(F, "F", self.n_features, float32_ok=True)
        w = self.theta[:-1] * math.sqrt(2.0 / self.features)
        U = self._unscaled(X)
        if np.abs(w).max() < 1e30:      # float32 weights (targets past 1e30: float64 ones)
            return (U @ w.astype(np.float32)).astype(np.float64) + self.theta[-1]
        return U.astype(np.float64) @ w + self.theta[-1]

    def rank(self, F: Any) -> np.ndarray:
        """Row indices of ``F``, lowest prediction first (ties by index): int64, (rows,)."""
        if self.n_features is None:
            raise LearnError("RandomFeatureRidge.rank: the model has not been fitted; "
                             "call partial_fit(F, y) first")
        return rank_order(self.predict(F))

