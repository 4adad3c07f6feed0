"""A scikit-learn estimator for symbolic regression: :class:`SymbolicRegressor` runs
:func:`numptx.search.regress` in ``fit`` and predicts with the formula it picked, so it drops
into a ``Pipeline``, ``GridSearchCV`` and ``cross_val_score``::

    import numpy as np
    from numptx.search import SymbolicRegressor
    X = np.random.default_rng(0).uniform(-1, 1, (200, 2))
    y = X[:, 0] * X[:, 1] + X[:, 1]
    model = SymbolicRegressor(ops=("add", "sub", "mul"), population=200, generations=20,
                              random_state=0, device="cpu").fit(X, y)
    model.best_.formula, model.score(X, y), model.predict(X[:3])
    [(c.complexity, c.loss, c.formula) for c in model.equations_]    # the Pareto front

The constructor takes :func:`~numptx.search.regress`'s options by the same names and defaults
(``random_state`` is its ``seed``, scikit-learn's name; the input names come from the data, not
an option) and stores them unchanged; ``fit`` checks them (a bad one is a
:class:`~numptx.search.SearchError`, a ``ValueError`` naming it). It is a scikit-learn
``BaseEstimator``, so scikit-learn is an optional extra (``pip install "numptx[sklearn]"``):
``import numptx.search`` does not import it; ``numptx.search.SymbolicRegressor`` (this module)
does, and without it is a SearchError naming the extra.

Scikit-learn's conventions hold: ``predict`` before ``fit`` is a ``NotFittedError``; NaN or
infinity in ``X`` or ``y`` is a ``ValueError`` ("Input X contains NaN."); ``X`` of another
width at ``predict`` is a ``ValueError`` naming both widths; a DataFrame's column names are
``feature_names_in_``; a fit that raises leaves the estimator unfitted. A fitted estimator
pickles (its ``executor`` left out as None, a ``progress`` that is not a module-level function,
a lambda, left out as False), and the unpickled one predicts on a machine with no GPU (the formula runs in
the stub emulator, :meth:`Candidate.predict`).
"""
from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

import numpy as np

from .genes import SearchError, op_dtypes

#: what ``pip`` installs for the estimator
EXTRA = 'pip install "numptx[sklearn]"'

try:
    from sklearn.base import BaseEstimator, RegressorMixin
    from sklearn.utils import validation
except ImportError:
    raise SearchError(f"numptx.search.SymbolicRegressor is a scikit-learn estimator: "
                      f"{EXTRA}") from None

__all__ = ["SymbolicRegressor", "EXTRA"]

log = logging.getLogger(__name__)


class SymbolicRegressor(RegressorMixin, BaseEstimator):
    """Symbolic regression as a scikit-learn regressor: ``fit(X, y)`` runs
    :func:`numptx.search.regress` with the constructor's options; ``predict`` evaluates the
    model it picked; ``score`` is R² (scikit-learn's ``r2_score``).

    Options: those of :func:`numptx.search.regress`, same names and defaults, except
    ``random_state`` (regress's ``seed``: an int, None for a drawn seed, or a NumPy
    ``RandomState`` that an int seed is drawn from) and ``dtype``: None searches in the
    dtype of ``X`` (float64 unless ``X`` is float32) unless an op has no float64 form
    (``sin``, ``exp``, ...: :data:`numptx.search.genes.OP_NAMES`' table), then in float32, X
    cast; ``"f32"``/``"f64"`` choose it. ``model_selection`` ("best", "accuracy" or "mdl")
    picks ``best_`` from the front, as regress's option documents. ``loss="pearson"`` is
    refused (a SearchError): it fits y only up to a + b·f; ``"mse"`` searches the same way
    under its linear scaling and writes a and b into the formula.

    Fitted attributes:

    - ``equations_``: the Pareto front, a list of :class:`~numptx.search.Candidate` by
      complexity (each with ``complexity``, ``loss``, ``formula``, ``predict``);
    - ``best_``: the candidate ``model_selection`` picked, what ``predict`` runs;
    - ``n_features_in_``: the number of columns of ``X``;
    - ``feature_names_in_``: the column names of a DataFrame ``X`` whose names are all
      strings (else not set, as scikit-learn does);
    - ``input_names_``: the names the formulas use for the columns
      (:func:`numptx.search.prepare.input_names` of the column names, else ``x0, x1, ...``;
      ``fit`` warns which columns it renamed);
    - ``history_``: a :class:`~numptx.search.Generation` per generation;
    - ``seed_``: the seed the search ran with (drawn when ``random_state`` is None);
    - ``stopped_``: why the search stopped (``"generations"``, ``"target"``,
      ``"time_limit"``).
    """

    def __init__(self, ops: Sequence[str] = ("add", "sub", "mul", "div"), *,
                 population: int = 1000, generations: int = 100, random_state: Any = None,
                 loss: str = "mse", model_selection: str = "best", dtype: str | None = None,
                 constants: Sequence[float] | None = None, tournament: int | None = None,
                 elitism: int | None = None, parsimony: float = 0.0, crossover: float = 0.5,
                 mutation: float = 0.9, max_length: int = 64, init_length: tuple | None = None,
                 fit_top: int | None = None, fit_steps: int = 12, fit_trials: int = 4,
                 target: float | None = None, time_limit: float | None = None,
                 restart: int | None = None, revary: int = 1, device: str = "auto",
                 executor: Executor | None = None, per_module: int | None = None,
                 pipeline: bool = True, evaluate: str = "auto",
                 semantic_dedup: int | None = None, linear_scaling: bool | None = None,
                 fit_method: str = "auto", input_weights: bool | None = None,
                 survivors: str = "plus", islands: int | None = None, migration: int = 10,
                 build: str = "auto", predictor: Any = False, screen: float = 0.25,
                 explore: float = 0.05, variation: str = "auto",
                 progress: bool | Callable = False):
        self.ops, self.population, self.generations = ops, population, generations
        self.random_state, self.loss, self.model_selection = random_state, loss, model_selection
        self.dtype, self.constants, self.tournament = dtype, constants, tournament
        self.elitism, self.parsimony, self.crossover = elitism, parsimony, crossover
        self.mutation, self.max_length, self.init_length = mutation, max_length, init_length
        self.fit_top, self.fit_steps, self.fit_trials = fit_top, fit_steps, fit_trials
        self.target, self.time_limit, self.restart = target, time_limit, restart
        self.revary, self.device, self.executor = revary, device, executor
        self.per_module, self.pipeline, self.evaluate = per_module, pipeline, evaluate
        self.semantic_dedup, self.linear_scaling = semantic_dedup, linear_scaling
        self.fit_method, self.input_weights = fit_method, input_weights
        self.survivors, self.islands, self.migration = survivors, islands, migration
        self.build, self.predictor, self.screen = build, predictor, screen
        self.explore, self.variation, self.progress = explore, variation, progress

    def __sklearn_clone__(self) -> SymbolicRegressor:
        """scikit-learn's clone (``GridSearchCV`` clones per fit), sharing ``executor``: an
        executor is a pool to share, and cannot be deep-copied."""
        from sklearn.base import clone
        params = self.get_params(deep=False)
        return type(self)(**{k: v if k == "executor" else clone(v, safe=False)
                             for k, v in params.items()})

    def __getstate__(self) -> dict:
        """The pickled state: ``executor`` and ``progress`` are run-time helpers, not the
        model: an executor (a pool) is left out (None), and so is a ``progress`` callable that
        is not a module-level function (a lambda, a closure: False). Decided by name, so this
        package never imports a deserializer (tests/test_search_trust.py)."""
        state = dict(super().__getstate__())       # a copy: it may be self.__dict__
        if state.get("executor") is not None:
            log.info("SymbolicRegressor: executor= is a run-time helper: left out of the pickle")
            state["executor"] = None
        if not _by_reference(state.get("progress", False)):
            log.info("SymbolicRegressor: progress= is not a module-level function: left out")
            state["progress"] = False
        return state

    # ---- fit, predict, score
    def fit(self, X: Any, y: Any) -> SymbolicRegressor:
        """Search for formulas of the columns of ``X`` that fit ``y`` (``regress``);
        returns self. A fit that raises leaves the estimator unfitted (no attribute of an
        earlier fit stays, so ``predict`` is a NotFittedError, not the old formula)."""
        try:
            return self._fit(X, y)
        except BaseException:
            for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("_")]:
                delattr(self, name)
            raise

    def _fit(self, X: Any, y: Any) -> SymbolicRegressor:
        from .searches import regress
        from .prepare import input_names, warn_renamed
        if self.loss == "pearson":
            raise SearchError("SymbolicRegressor: loss='pearson' scores a formula up to a + b·f, "
                              "so its formula does not predict y; use loss='mse' (its linear "
                              "scaling is the same scale-free search, with a and b written "
                              "into the formula)")
        X, y = validation.validate_data(self, X, y, y_numeric=True, ensure_min_samples=2,
                                        dtype=[np.float64, np.float32])
        names = getattr(self, "feature_names_in_", None)
        self.input_names_ = input_names(list(names)) if names is not None else \
            tuple(f"x{j}" for j in range(X.shape[1]))
        if names is not None:                    # regress gets them mapped: it cannot warn
            warn_renamed(list(names), self.input_names_, "SymbolicRegressor.fit", stacklevel=4)
        options = self.get_params()
        options.pop("random_state")
        options["dtype"] = self._dtype(X, y)
        result = regress(X, y, seed=self._seed(), names=self.input_names_, **options)
        if result.model is None and not result.history:
            raise SearchError(f"SymbolicRegressor.fit: the search stopped ({result.stopped}) "
                              f"before its first generation, so there is no formula; give "
                              f"time_limit= more than {self.time_limit!r} s")
        if result.model is None:                 # every loss inf or NaN: none on the front
            raise SearchError(f"SymbolicRegressor.fit: no formula scored a finite loss in "
                              f"{len(result.history)} generations (|y| reaches "
                              f"{float(np.abs(y).max()):.3g}, |X| {float(np.abs(X).max()):.3g}: "
                              f"squared errors past 1e308 overflow); rescale y (and X)")
        self.equations_, self.best_ = list(result.front), result.model
        self.history_, self.seed_, self.stopped_ = list(result.history), result.seed, \
            result.stopped
        log.info("SymbolicRegressor: %s (loss %.6g) after %d generations", result.model.formula,
                 result.model.loss, len(self.history_))
        return self

    def predict(self, X: Any) -> np.ndarray:
        """The picked formula's values on the rows of ``X`` (the stub emulator, on the CPU,
        in the search's dtype)."""
        validation.check_is_fitted(self, "best_")
        X = validation.validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        return self.best_.predict(X)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R² of ``predict(X)`` against ``y`` (scikit-learn's ``r2_score``), computed in
        float64: the predictions of an f32 search widened exactly, so data near float32's
        largest values (``y`` of 1e37) scores without overflowing its squares (scikit-learn
        would square float32 values in float32, warn, and return NaN)."""
        from sklearn.metrics import r2_score
        pred = np.asarray(self.predict(X), dtype=np.float64)
        return float(r2_score(np.asarray(y, dtype=np.float64), pred,
                              sample_weight=sample_weight))

    # ---- helpers
    def _seed(self) -> int | None:
        """regress's seed from ``random_state``: an int or None as it is, an int drawn from
        a RandomState (scikit-learn's rule for estimators that take a seed)."""
        rs = self.random_state
        if rs is None or isinstance(rs, (int, np.integer)) and not isinstance(rs, bool):
            return None if rs is None else int(rs)
        if isinstance(rs, np.random.RandomState):
            return int(rs.randint(np.iinfo(np.int32).max))
        raise SearchError(f"SymbolicRegressor: random_state={rs!r}: give an int, None or a "
                          f"numpy.random.RandomState")

    def _dtype(self, X: np.ndarray, y: np.ndarray) -> str | None:
        """The search's dtype: ``dtype`` when given; else f64 for float64 ``X`` when every
        op has an f64 form, f32 otherwise (float64 data past the f32 range is then a
        SearchError naming the op)."""
        if self.dtype is not None:
            return self.dtype
        ops = [self.ops] if isinstance(self.ops, str) else self.ops
        try:
            f32 = [op for op in ops if op_dtypes(op) and "f64" not in op_dtypes(op)]
        except TypeError:
            return None                                  # not a list of names: regress says
        if X.dtype == np.float64 and f32:
            log.info("SymbolicRegressor: %r has no f64 form, so the search runs in f32", f32[0])
            top = float(np.finfo(np.float32).max)
            for what, a in (("X", X), ("y", y)):
                if a.size and float(np.abs(a).max()) > top:
                    raise SearchError(f"SymbolicRegressor: op {f32[0]!r} has no f64 form, so "
                                      f"the search runs in f32, and {what} holds values past "
                                      f"the f32 range (largest |value| "
                                      f"{float(np.abs(a).max()):.3g}, the f32 maximum "
                                      f"{top:.3g}): rescale the data, or leave out the "
                                      f"f32-only ops to search in f64")
        return "f64" if X.dtype == np.float64 and not f32 else "f32"


def _by_reference(obj: Any) -> bool:
    """Whether ``obj`` pickles by reference: True, False, None, or a module-level function or
    class found again under its module and qualified name."""
    if obj is None or isinstance(obj, bool):
        return True
    name = getattr(obj, "__qualname__", None)
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    if not isinstance(name, str) or "<" in name or module is None:
        return False
    found: Any = module
    for part in name.split("."):
        found = getattr(found, part, None)
    return found is obj
