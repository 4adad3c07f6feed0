"""The small MLP of :mod:`numptx.learn` (:class:`MLP`): 1 or 2 hidden layers, trained online by
a few full-batch Adam steps a ``partial_fit`` over a ring buffer of the latest rows (or, with
``batch=``, over the new rows and a replay sample of the buffer: a bounded update); NumPy only.

:func:`loss_and_grad` is its loss and analytic gradient, a plain function of the parameters
(what ``tests/test_learn_models.py`` holds to finite differences)::

    >>> import numpy as np
    >>> from numptx.learn.mlp import MLP
    >>> rng = np.random.default_rng(0)
    >>> F = rng.uniform(-2, 2, size=(1000, 2))
    >>> y = np.sin(F[:, 0]) + F[:, 1] ** 2
    >>> model = MLP(hidden=(32,), steps=200, lr=2e-2, seed=0).partial_fit(F, y)
    >>> r2 = 1 - np.mean((model.predict(F) - y) ** 2) / np.var(y)
    >>> bool(r2 > 0.9)
    True
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from . import checks
from .errors import LearnError

__all__ = ["MLP", "loss_and_grad", "ACTIVATIONS"]

ACTIVATIONS = ("tanh", "relu")
MAX_UNITS = 256
BETA1, BETA2, EPS = 0.9, 0.999, 1e-8   # Adam's constants
ZMAX = 1e6   # a prediction's standardized inputs are clipped to +-ZMAX standard deviations


def _forward(params: Sequence[np.ndarray], X: np.ndarray, activation: str
             ) -> tuple[np.ndarray, list[np.ndarray]]:
    """The output (rows,) and each hidden layer's activations (the input first)."""
    acts = [X]
    a = X
    for W, b in zip(params[0:-2:2], params[1:-2:2]):
        a = a @ W
        a += b
        if activation == "tanh":
            np.tanh(a, out=a)
        else:
            np.maximum(a, 0.0, out=a)
        acts.append(a)
    out = a @ params[-2]
    out += params[-1]
    return out[:, 0], acts


def loss_and_grad(params: Sequence[np.ndarray], X: np.ndarray, y: np.ndarray,
                  activation: str = "tanh", weight_decay: float = 0.0
                  ) -> tuple[float, list[np.ndarray]]:
    """``0.5 * mean((net(X) - y)**2) + 0.5 * weight_decay * sum(W**2 over the weight
    matrices)`` and its gradient, one array a parameter. ``params``: ``[W1, b1, ..., Wo, bo]``
    (``W``: (in, out), ``b``: (out,); the last pair maps to a single output, no activation).
    """
    out, acts = _forward(params, X, activation)
    n = X.shape[0]
    r = out - y
    weights = params[0::2]
    loss = 0.5 * float(r @ r) / n + 0.5 * weight_decay * sum(float((W * W).sum())
                                                              for W in weights)
    delta = (r / n)[:, None]
    grads: list[np.ndarray] = [np.empty(0)] * len(params)
    for layer in range(len(weights) - 1, -1, -1):
        W = params[2 * layer]
        a_in = acts[layer]
        grads[2 * layer] = a_in.T @ delta + weight_decay * W
        grads[2 * layer + 1] = delta.sum(axis=0)
        if layer == 0:
            break
        delta = delta @ W.T
        if activation == "tanh":
            delta *= 1.0 - a_in * a_in
        else:
            delta *= a_in > 0.0
    return loss, grads


def _hidden(hidden: Any) -> tuple[int, ...]:
    layers = (hidden,) if isinstance(hidden, int) and not isinstance(hidden, bool) else hidden
    try:
        if isinstance(layers, (str, bytes)):
            raise TypeError
        layers = tuple(layers)
    except TypeError:
        raise LearnError(f"hidden={hidden!r}: expected 1 or 2 layer sizes, e.g. (64,) or "
                         "(64, 32)") from None
    if not 1 <= len(layers) <= 2:
        raise LearnError(f"hidden={hidden!r}: {len(layers)} layers; expected 1 or 2 layer "
                         f"sizes, each in [1, {MAX_UNITS}]")
    return tuple(checks.integer(h, f"hidden[{i}]", 1, MAX_UNITS) for i, h in enumerate(layers))


def _check_float32(X: np.ndarray) -> None:
    """The MLP keeps its rows in float32: a value past float32's range is a LearnError (it
    would be stored as inf, and every prediction would be NaN)."""
    if X.dtype == np.float32 or not X.size:
        return
    big = np.abs(X) > np.finfo(np.float32).max
    if big.any():
        row, col = (int(i) for i in np.argwhere(big)[0])
        raise LearnError(f"F: row {row}, column {col} is {X[row, col]!r}, past float32's range "
                         f"(the MLP keeps its rows in float32); scale that feature (or use "
                         f"RandomFeatureRidge)")


class MLP:
    """A small MLP regressor trained online: each ``partial_fit`` adds its rows to a ring
    buffer of the latest ``store`` rows, then takes ``steps`` full-batch Adam steps (rate
    ``lr``; ``weight_decay``: an L2 penalty on the weight matrices) over the whole buffer, or,
    with ``batch=k``, over the new rows and a replay sample of older rows of the buffer drawn at
    random (seeded by ``seed`` and the steps taken), ``k`` rows in all: an update whose cost
    does not grow with the buffer (new rows past ``k``: the latest ``k``)::

        model = MLP(batch=1024, steps=5)    # ~7 ms an update of 1,000 rows over 10,000

    Many small updates with ``batch=`` revisit the buffer as a minibatch optimizer would.

    * layers: ``hidden`` sizes (1 or 2 layers, each <= 256 units), ``activation`` ``"tanh"``
      or ``"relu"``, a linear output; weights drawn from ``seed`` at the first fit
      (``N(0, g / fan_in)``, ``g`` = 1 for tanh, 2 for relu), biases 0;
    * standardization: the inputs and the target are standardized by the buffer's mean and std
      before each ``partial_fit``'s steps (a constant column's std taken as 1); ``predict``
      uses the last fit's;
    * Adam's moments carry over from one ``partial_fit`` to the next (and through a pickle);
    * precision: the weights, the buffer and the steps are float32 (twice float64's speed;
      :func:`loss_and_grad` itself computes in the dtype of what it is given).

    ``last_losses``: the loss (standardized units) before each step of the last
    ``partial_fit``.
    """

    def __init__(self, hidden: Any = (64,), steps: int = 20, lr: float = 1e-2,
                 store: int = 10_000, weight_decay: float = 0.0, activation: str = "tanh",
                 seed: int = 0, batch: int | None = None) -> None:
        self.hidden = _hidden(hidden)
        self.steps = checks.integer(steps, "steps", 0, 1_000_000)
        self.lr = checks.real(lr, "lr", 0.0, 1.0, low_open=True)
        self.store = checks.integer(store, "store", 1, 10_000_000)
        self.weight_decay = checks.real(weight_decay, "weight_decay", 0.0)
        self.activation = checks.choice(activation, "activation", ACTIVATIONS)
        self.seed = checks.integer(seed, "seed", 0)
        self.batch = None if batch is None else checks.integer(batch, "batch", 1, 10_000_000)
        self.n_seen = 0
        self.n_features: int | None = None
        self.params: list[np.ndarray] = []
        self.m: list[np.ndarray] = []            # Adam's first moments
        self.v: list[np.ndarray] = []            # Adam's second moments
        self.t = 0                               # Adam steps taken
        self.X = np.zeros((0, 0), np.float32)    # the ring buffer: (store, d) float32
        self.Y = np.zeros(0)                     # (store,)
        self.count = 0                           # rows in the buffer
        self.pos = 0                             # where the next row goes
        self.x_mean = np.zeros(0)                # the standardization of the last fit
        self.x_std = np.ones(0)
        self.y_mean, self.y_std = 0.0, 1.0
        self.last_losses = np.zeros(0)

    def __repr__(self) -> str:
        return (f"MLP(hidden={self.hidden}, steps={self.steps}, lr={self.lr:g}, "
                f"store={self.store}, weight_decay={self.weight_decay:g}, "
                f"activation={self.activation!r}, seed={self.seed}"
                + ("" if self.batch is None else f", batch={self.batch}")
                + f"; n_seen={self.n_seen})")

    def _start(self, d: int) -> None:
        rng = np.random.default_rng(self.seed)
        gain = 2.0 if self.activation == "relu" else 1.0
        sizes = (d, *self.hidden, 1)
        self.params = []
        for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            g = 1.0 if i == len(sizes) - 2 else gain
            W = rng.normal(0.0, math.sqrt(g / fan_in), size=(fan_in, fan_out))
            self.params += [W.astype(np.float32), np.zeros(fan_out, np.float32)]
        self.m = [np.zeros_like(p) for p in self.params]
        self.v = [np.zeros_like(p) for p in self.params]
        self.X = np.zeros((self.store, d), np.float32)
        self.Y = np.zeros(self.store)
        self.n_features = d

    def _remember(self, X: np.ndarray, t: np.ndarray) -> None:
        if X.shape[0] >= self.store:
            X, t = X[-self.store:], t[-self.store:]
        idx = (self.pos + np.arange(X.shape[0])) % self.store
        self.X[idx] = X
        self.Y[idx] = t
        self.pos = int((self.pos + X.shape[0]) % self.store)
        self.count = min(self.count + X.shape[0], self.store)

    def partial_fit(self, F: Any, y: Any) -> MLP:
        """Learn the rows ``F`` (rows, features) with targets ``y`` (rows,); returns ``self``.
        An empty batch after the first fit changes nothing."""
        X = checks.matrix(F, "F", self.n_features, float32_ok=True)
        t = checks.target(y, X.shape[0], "y")
        if X.shape[0] == 0:
            if self.n_features is None:
                raise LearnError("F: 0 rows; the first partial_fit needs at least one row")
            return self
        if X.shape[1] == 0:
            raise LearnError("F: 0 columns; give at least one feature a row")
        _check_float32(X)
        if self.n_features is None:
            self._start(X.shape[1])
        self._remember(X, t)
        self.n_seen += X.shape[0]
        self._train(min(X.shape[0], self.store))
        return self

    def _rows(self, new: int) -> np.ndarray | None:
        """The buffer rows this update's steps train on: None for all of them (no ``batch``,
        or a buffer of at most ``batch`` rows); else the ``new`` latest rows (at most
        ``batch``) and a seeded sample of the older ones, ``batch`` rows in all."""
        if self.batch is None or self.count <= self.batch:
            return None
        new = min(new, self.batch)
        latest = (self.pos - 1 - np.arange(new)) % self.store
        if new == self.batch:
            return latest
        older = (self.pos - 1 - new - np.arange(self.count - new)) % self.store
        rng = np.random.default_rng([self.seed, self.t])
        return np.concatenate([latest, rng.choice(older, self.batch - new, replace=False)])

    def _train(self, new: int) -> None:
        Xb, Yb = self.X[:self.count], self.Y[:self.count]
        self.x_mean = Xb.mean(axis=0, dtype=np.float64)
        Xs = Xb - self.x_mean.astype(np.float32)
        x_std = np.sqrt(np.einsum("ij,ij->j", Xs, Xs, dtype=np.float64) / self.count)
        self.x_std = np.where(x_std > 0, x_std, 1.0)
        with np.errstate(over="ignore"):
            y_std = float(Yb.std())
        if not math.isfinite(y_std):          # squares past float64 (|y| > ~1e154): scaled
            top = float(np.abs(Yb).max())
            y_std = float((Yb / top).std()) * top
        self.y_mean, self.y_std = float(Yb.mean()), (y_std if y_std > 0 else 1.0)
        rows = self._rows(new)
        if rows is not None:                  # the statistics are the buffer's, the steps the rows'
            Xs, Yb = Xs[rows], Yb[rows]
        Xs *= (1.0 / self.x_std).astype(np.float32)
        Ys = ((Yb - self.y_mean) / self.y_std).astype(np.float32)
        losses = np.empty(self.steps)
        for k in range(self.steps):
            losses[k], grads = loss_and_grad(self.params, Xs, Ys, self.activation,
                                             self.weight_decay)
            self._adam(grads)
        self.last_losses = losses

    def _adam(self, grads: list[np.ndarray]) -> None:
        self.t += 1
        c1 = 1.0 - BETA1 ** self.t
        c2 = 1.0 - BETA2 ** self.t
        for p, g, m, v in zip(self.params, grads, self.m, self.v):
            m *= BETA1
            m += (1.0 - BETA1) * g
            v *= BETA2
            v += (1.0 - BETA2) * (g * g)
            p -= self.lr * (m / c1) / (np.sqrt(v / c2) + EPS)

    def predict(self, F: Any) -> np.ndarray:
        """The predicted target of each row of ``F``: float64, (rows,)."""
        if self.n_features is None:
            raise LearnError("MLP.predict: the model has not been fitted; call "
                             "partial_fit(F, y) first")
        X = checks.matrix(F, "F", self.n_features, float32_ok=True)
        with np.errstate(over="ignore"):              # inf, then clipped
            Xs = X - self.x_mean.astype(X.dtype)
            Xs *= (1.0 / self.x_std).astype(X.dtype)
        np.clip(Xs, -ZMAX, ZMAX, out=Xs)          # finite in float32 whatever the row
        out, _ = _forward(self.params, Xs.astype(np.float32, copy=False), self.activation)
        return out.astype(np.float64) * self.y_std + self.y_mean

    def rank(self, F: Any) -> np.ndarray:
        """Row indices of ``F``, lowest prediction first (ties by index): int64, (rows,)."""
        if self.n_features is None:
            raise LearnError("MLP.rank: the model has not been fitted; call "
                             "partial_fit(F, y) first")
        return checks.rank_order(self.predict(F))
