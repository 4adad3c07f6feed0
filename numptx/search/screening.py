"""Screening children with a learned model (``predictor=``; issue 25, "learning in the loop").

Every child of a search is normally scored in full: its run over every row and, under
Levenberg–Marquardt, the fit of its constants (1 + k runs a round). With a predictor, a model
of :mod:`numptx.learn`, trained online on every candidate the search scores, ranks each
generation's new children first; only the best ``screen`` share of them (by predicted loss),
plus an ``explore`` share drawn at random from the rest, is scored and fitted. The others are
dropped unscored: they take the loss +inf in the generation's list of children (so islands and
positions stay aligned, and survivors drop them), are not cached (a later copy is scored), and
count in no evaluation.

A child's features (:func:`child_features`) are its run on a fixed probe of the training rows
through the CPU interpreter (the loss there, with linear scaling where the search uses it: a
cheap first look at the full loss) and its length; without data (``evolve``) its words
(:func:`numptx.learn.features`: hashed op n-grams, length, live ops, depth, constants).
The model learns ``log10`` of the loss relative to the variance of y (clipped), after the
constants are fitted: what a child becomes, not what it was made as. Until it has learned
from :func:`warmup` rows (the first population and generations: 1,000 at a population of 500,
at least 200) every child is scored.

The search reports the predictor's seconds (``result.timings["predict"]``) and, per
generation, the Spearman correlation between its predictions and the losses of the children it
let through (``result.rank_correlations``, one a generation: None while it learns)::

    from numptx import search
    r = search.regress(X, y, ops, population=500, predictor=True, screen=0.25, seed=0)
    r.evaluated, r.timings["predict"], r.rank_correlations[-1]
"""
from __future__ import annotations

import inspect
import math
import time
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import stack_ptx as sp
from ..learn import LearnError, features as word_features, spearman
from ..learn.models import MLP, Model, RandomFeatureRidge
from .config import CACHE_MAX
from .genes import Genes, SearchError
from .results import Candidate

__all__ = ["Screen", "screen_for", "make_model", "child_features", "target_of", "PREDICTORS", "WARMUP", "warmup",
           "PROBE_ROWS"]

#: the models ``predictor=`` names (True: "ridge")
PREDICTORS = ("ridge", "mlp")
#: rows the model learns from before it screens: twice the population, within these bounds
WARMUP = 1000
WARMUP_MIN = 200


def warmup(population: int) -> int:
    """Rows learned before a screen acts: 2 × ``population`` between WARMUP_MIN and WARMUP
    (a population's first generation or two)."""
    return min(WARMUP, max(WARMUP_MIN, 2 * population))
#: training rows of the probe the children run on (all rows when there are fewer)
PROBE_ROWS = 32
#: the learned target: log10(loss / var y) clipped to [LOW, HIGH]; a non-finite loss is HIGH + 1
LOW, HIGH = -12.0, 6.0


def make_model(spec: Any, seed: int) -> Model:
    """The model ``predictor=`` asks for: True or ``"ridge"`` a
    :class:`~numptx.learn.RandomFeatureRidge`, ``"mlp"`` an :class:`~numptx.learn.MLP`, or a
    model object itself (anything with ``partial_fit``, ``predict`` and ``rank``)."""
    if spec is True or spec == "ridge":
        return RandomFeatureRidge(seed=seed % (1 << 32))
    if spec == "mlp":
        return MLP(seed=seed % (1 << 32))
    if all(callable(getattr(type(spec), m, None)) for m in ("partial_fit", "predict", "rank")):
        return spec
    raise SearchError(f"predictor={spec!r}: give True, one of {', '.join(map(repr, PREDICTORS))}, "
                      f"or a model with partial_fit, predict and rank (numptx.learn)")


def target_of(losses: np.ndarray, var_y: float) -> np.ndarray:
    """What the model learns of losses: log10(loss / var y), clipped; non-finite: HIGH + 1."""
    losses = np.asarray(losses, np.float64)
    out = np.full(losses.shape, HIGH + 1.0)
    ok = np.isfinite(losses)
    with np.errstate(divide="ignore"):
        out[ok] = np.clip(np.log10(np.maximum(losses[ok], 0.0) / var_y), LOW, HIGH)
    return out


def _probe_losses(programs: list, genes: Genes, columns: dict, y: np.ndarray,
                  scaling: bool) -> np.ndarray:
    """Each program's mean squared error on the probe rows (after the best a + b·f when
    ``scaling``), as :func:`target_of` takes it: one column of the features."""
    out = sp.interpret(programs, columns, genes.outputs, device="cpu", on_limit="run")
    f = np.asarray(next(iter(out.values())), np.float64).reshape(len(programs), -1)
    with np.errstate(all="ignore"):
        if scaling:
            fc = f - f.mean(axis=1, keepdims=True)
            yc = y - y.mean()
            var = (fc * fc).sum(axis=1)
            b = np.where(var > 0, (fc @ yc) / np.where(var > 0, var, 1.0), 0.0)
            r = yc[None, :] - b[:, None] * fc
        else:
            r = y[None, :] - f
        mse = (r * r).mean(axis=1)
    return mse


def child_features(programs: list, genes: Genes, probe: dict | None, y_probe: np.ndarray | None,
                   var_y: float, scaling: bool) -> np.ndarray:
    """The features a screen ranks children by, one float32 row a program: with a probe,
    their loss on the probe rows (:func:`target_of`'s scale) and their length; without one
    (evolve: no data), their words (:func:`numptx.learn.features`). The words next to the
    probe loss made the ranking worse, not better (held-out Spearman 0.46-0.74 against
    0.60-0.85 with these two columns, at 2.6x the cost: benchmarks/README.md): 71 columns of
    words dilute the one column that carries most of the signal in the ridge's random
    features."""
    if probe is None or y_probe is None:
        return word_features(programs, genes)
    p = target_of(_probe_losses(programs, genes, probe, y_probe, scaling), var_y)
    n = np.fromiter((len(q) for q in programs), np.float64, len(programs))
    return np.stack([p, n], axis=1).astype(np.float32)


#: the genes (and whether a probe column followed the words) each model object last learned
#: with in this process: a model given to a search of other genes is refused, its features
#: would mean other things there (the issue's bad input; a model unpickled has no record)
_LEARNED_WITH: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class Screen:
    """A search's predictor: which new children to score, and what it learned from them."""

    def __init__(self, model: Model, genes: Genes, *, share: float, explore: float, seed: int,
                 X: np.ndarray | None = None, y: np.ndarray | None = None,
                 scaling: bool = False, population: int = 500) -> None:
        self.model, self.genes = model, genes
        self.warmup = warmup(population)
        self.share, self.explore = share, explore
        self.rng = np.random.default_rng([seed % (1 << 63), 25])
        self.scaling = scaling
        self.probe: dict | None = None
        self.y_probe: np.ndarray | None = None
        self.var_y = 1.0
        if X is not None and y is not None:
            n = X.shape[0]
            rows = np.sort(self.rng.choice(n, size=min(PROBE_ROWS, n), replace=False))
            self.probe = {name: np.ascontiguousarray(X[rows, j])
                          for j, name in enumerate(genes.names)}
            self.y_probe = np.asarray(y, np.float64)[rows]
            v = float(np.var(np.asarray(y, np.float64)))
            self.var_y = v if v > 0 and math.isfinite(v) else 1.0
        self._check_model()
        self.seen = 0
        self.seconds = 0.0
        self.pending: tuple[list, list[int], np.ndarray, np.ndarray | None] | None = None
        self.correlation: float | None = None
        #: per generation: the Spearman correlation of the predictions with the losses of the
        #: children let through (None while learning); ``result.rank_correlations``
        self.correlations: list[float | None] = []

    @property
    def ready(self) -> bool:
        """Whether the model has learned enough to screen (:func:`warmup` rows)."""
        return self.seen >= self.warmup

    def features(self, programs: list) -> np.ndarray:
        return child_features(programs, self.genes, self.probe, self.y_probe, self.var_y,
                              self.scaling)

    def _check_model(self) -> None:
        """A model that learned before must have learned this search's features."""
        n = getattr(self.model, "n_features", None)
        if n is not None and n != self.width():
            raise SearchError(f"predictor={self.model!r}: it learned from {n} features a row; "
                              f"this search's children have {self.width()}; give a fresh model")
        try:
            before = _LEARNED_WITH.get(self.model)
        except TypeError:                # a user's model that cannot be weakly referenced
            before = None
        if before is not None and before != (self.genes, self.probe is not None):
            raise SearchError(f"predictor={self.model!r}: it learned from a search of "
                              f"{before[0]!r}{'' if before[1] else ' (words only)'}; this "
                              f"search's genes are {self.genes!r}"
                              f"{'' if self.probe is not None else ' (words only)'}: its "
                              f"features mean other things here; give a fresh model")

    def width(self) -> int:
        """The columns of :meth:`features` (what the model's ``n_features`` is once fitted)."""
        return 2 if self.probe is not None else word_features([], self.genes).shape[1]

    def choose(self, programs: list, keys: list[bytes], cache: dict) -> list[int]:
        """The indices of ``programs`` to score: every one whose key is cached (its loss is
        known), and of the new keys (first copies) the predicted best ``share`` and a random
        ``explore`` share of the rest, with every copy of a chosen key."""
        t0 = time.perf_counter()
        first: dict[bytes, int] = {}
        for i, k in enumerate(keys):
            if k not in cache and k not in first:
                first[k] = i
        new = list(first.values())
        F = self.features([programs[i] for i in new]) if new else np.zeros((0, 0), np.float32)
        pred = None
        chosen = set(range(len(new)))
        if self.ready and len(new) > 1:
            pred = self._predicted(F)
            order = np.argsort(pred, kind="stable")
            top = max(1, math.ceil(self.share * len(new)))
            rest = order[top:]
            extra = self.rng.choice(rest, size=math.ceil(self.explore * len(rest)),
                                    replace=False) if len(rest) else rest
            chosen = set(order[:top].tolist()) | set(extra.tolist())
        keep_keys = {keys[new[j]] for j in chosen}
        picked = [i for i, k in enumerate(keys) if k in cache or k in keep_keys]
        js = sorted(chosen)
        self.pending = (programs, [new[j] for j in js], F[js],
                        None if pred is None else pred[js])
        self.seconds += time.perf_counter() - t0
        return picked

    def _predicted(self, F: np.ndarray) -> np.ndarray:
        """The model's predictions of the rows of ``F``: one finite number a row, or a
        SearchError naming ``predictor`` (a user's model that returns NaN, or the wrong
        count, would screen the children silently at random)."""
        got = self.model.predict(F)
        try:
            pred = np.asarray(got, np.float64)
        except (TypeError, ValueError):
            pred = np.full(0, np.nan)
        n = F.shape[0]
        if pred.shape != (n,) or not np.isfinite(pred).all():
            what = f"shape {pred.shape}" if pred.shape != (n,) else \
                f"{int((~np.isfinite(pred)).sum())} non-finite values"
            raise SearchError(f"predictor={self.model!r}: predict(F) of {n} children gave "
                              f"{what}; a model must return one finite number a row of F")
        return pred

    def children(self, s: Any, parents_a: list, parents_b: list) -> list:
        """The search ``s``'s children of the parent pairs, those :meth:`choose` picks scored,
        the others kept in place with the loss +inf (islands read the children by position)."""
        if len(s.cache) > CACHE_MAX:    # cleared before the children, as evaluate_chunks
            s.cache.clear()             # does: what a checkpoint keeps (review 25)
        progs: list = []
        keys: list = []
        for p, k in s.keyed_chunks(parents_a, parents_b, max(1, len(parents_a))):
            progs += p
            keys += k
        t = self.seconds
        picked = self.choose(progs, keys, s.cache)
        s.timings["predict"] += self.seconds - t
        _, losses = s.evaluate_chunks([([progs[i] for i in picked],
                                        [keys[i] for i in picked])], len(picked))
        out = [Candidate(p, math.inf, self.genes) for p in progs]
        for i, v in zip(picked, losses.tolist()):
            out[i].loss = v
        return out

    def observe(self, programs: list) -> None:
        """Learn from all of ``programs`` (a first population, scored in full) once fitted."""
        t0 = time.perf_counter()
        F = self.features(programs) if programs else np.zeros((0, 0), np.float32)
        self.pending = (programs, list(range(len(programs))), F, None)
        self.seconds += time.perf_counter() - t0

    def learn(self, cands: list) -> None:
        """Learn from the children :meth:`choose` let through, once their constants are fitted
        (``cands``: the generation's children, in the order of the programs chosen from)."""
        if self.pending is None:
            return
        t0 = time.perf_counter()
        _, idx, F, pred = self.pending
        self.pending = None
        if idx:
            y = target_of(np.array([cands[i].loss for i in idx]), self.var_y)
            self.correlation = None
            if pred is not None and len(idx) > 2:
                try:
                    r = spearman(pred, y)
                    self.correlation = None if math.isnan(r) else float(r)
                except LearnError:
                    self.correlation = None
            self.model.partial_fit(F, y)
            self.seen += len(idx)
            try:
                _LEARNED_WITH[self.model] = (self.genes, self.probe is not None)
            except TypeError:
                pass
        self.seconds += time.perf_counter() - t0


def screen_for(cfg: Any, genes: Genes, seed: int, ev: Any) -> Screen:
    """The screen of a run with options ``cfg`` (``predictor``, ``screen``, ``explore``), its
    evaluator ``ev`` (None: evolve's user fitness, words only)."""
    return Screen(make_model(cfg.predictor, seed), genes, share=cfg.screen, explore=cfg.explore,
                  seed=seed, X=None if ev is None else ev.X, y=None if ev is None else ev.y,
                  scaling=bool(ev is not None and ev.linear_scaling),
                  population=cfg.population)


# ---- checkpoints ------------------------------------------------------------------------------
#: the models a checkpoint can hold, by name (a user's model object cannot be saved)
_SAVED: dict[str, type] = {"RandomFeatureRidge": RandomFeatureRidge, "MLP": MLP}


def _encode(v: Any, where: str, encode_array: Callable[[np.ndarray], dict]) -> Any:
    """A model attribute as JSON: arrays and generators tagged, containers element-wise."""
    if isinstance(v, np.ndarray):
        return {"array": encode_array(v)}
    if isinstance(v, np.random.Generator):
        return {"rng": v.bit_generator.state}
    if isinstance(v, (np.integer, np.floating, np.bool_)):
        v = v.item()
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"float": repr(v)}
    if isinstance(v, (list, tuple)):
        return {"list" if isinstance(v, list) else "tuple":
                [_encode(x, where, encode_array) for x in v]}
    if isinstance(v, dict) and all(isinstance(k, str) for k in v):
        return {"dict": {k: _encode(x, f"{where}.{k}", encode_array) for k, x in v.items()}}
    raise SearchError(f"predictor: {where} is a {type(v).__name__}: a checkpoint keeps "
                      f"arrays, numbers, strings and containers of them")


def _decode(v: Any, decode_array: Callable[[dict, str], np.ndarray]) -> Any:
    if not isinstance(v, dict):
        return v
    (tag, x), = v.items()
    if tag == "array":
        return decode_array(x, "screen.model")
    if tag == "rng":
        g = np.random.default_rng()
        g.bit_generator.state = x
        return g
    if tag == "float":
        return float(x)
    if tag == "dict":
        return {k: _decode(y, decode_array) for k, y in x.items()}
    items = [_decode(y, decode_array) for y in x]
    return items if tag == "list" else tuple(items)


def screen_state(screen: Screen, encode_array: Callable[[np.ndarray], dict]) -> dict:
    """A screen's state for a checkpoint (arrays written by the checkpoint's
    ``encode_array``): its model's attributes (a numptx.learn model), what it has learned, its
    random state and correlations (the probe is drawn again from the run's seed)."""
    name = type(screen.model).__name__
    if _SAVED.get(name) is not type(screen.model):
        raise SearchError(f"predictor={screen.model!r}: a checkpoint keeps numptx.learn's "
                          f"models ({', '.join(_SAVED)}); save a run with predictor=True, "
                          f"'ridge' or 'mlp'")
    attrs = {k: _encode(v, k, encode_array) for k, v in vars(screen.model).items()}
    return {"model": name, "attributes": attrs,
            "seen": screen.seen, "rng": screen.rng.bit_generator.state,
            "seconds": screen.seconds, "correlation": screen.correlation,
            "correlations": list(screen.correlations)}


def restore_screen(screen: Screen, st: dict, history: int,
                   decode_array: Callable[[dict, str], np.ndarray]) -> None:
    """Put a checkpoint's :func:`screen_state` back into a run's fresh screen (``history``:
    the generations the run has made). A checkpoint can come from someone else: the model is
    rebuilt through its constructor (its checks and bounds), holds exactly the attributes a
    model of its class has, each of the type and shape its hyperparameters and the run's
    feature count give; anything else raises (the caller names the field)."""
    if not isinstance(st, dict) or set(st) != {"model", "attributes", "seen", "rng", "seconds",
                                               "correlation", "correlations"}:
        raise SearchError("expected the fields model, attributes, seen, rng, seconds, "
                          "correlation, correlations")
    if st["model"] != type(screen.model).__name__ or st["model"] not in _SAVED:
        raise SearchError(f"model {str(st['model'])[:40]!r} is not the run's predictor "
                          f"({type(screen.model).__name__})")
    model = _rebuilt(_SAVED[st["model"]], st["attributes"], screen.width(), decode_array)
    seen = st["seen"]
    if type(seen) is not int or not 0 <= seen <= model.n_seen:
        raise SearchError(f"seen {str(seen)[:40]} is not an int in [0, the model's n_seen]")
    screen.rng.bit_generator.state = st["rng"]
    seconds = st["seconds"]
    if type(seconds) not in (int, float) or not 0 <= seconds < math.inf:
        raise SearchError("seconds is not a finite number >= 0")
    corr = st["correlations"]
    if not isinstance(corr, list) or len(corr) != history:
        raise SearchError(f"correlations is not a list of {history} (one a generation)")
    screen.model, screen.seen, screen.seconds = model, seen, float(seconds)
    screen.correlation = _correlation(st["correlation"])
    screen.correlations = [_correlation(c) for c in corr]


def _correlation(c: Any) -> float | None:
    if c is None:
        return None
    if type(c) not in (int, float) or not -1.0 <= c <= 1.0:
        raise SearchError("a correlation is not None or a number in [-1, 1]")
    return float(c)


def _rebuilt(cls: type, saved: Any, width: int,
             decode_array: Callable[[dict, str], np.ndarray]) -> Any:
    """A model of ``cls`` with the saved attributes, checked (see :func:`restore_screen`)."""
    if not isinstance(saved, dict):
        raise SearchError("attributes is not an object")
    values = {k: _decode(v, decode_array) for k, v in saved.items()}
    params = [k for k in inspect.signature(cls).parameters]
    model = cls(**{k: values.get(k) for k in params})     # its checks (a LearnError)
    fresh = dict(vars(model))
    if set(values) != set(fresh):
        odd = sorted(set(values) ^ set(fresh))[:5]
        raise SearchError(f"attributes {', '.join(str(k)[:40] for k in odd)}: not the "
                          f"attributes of a {cls.__name__}")
    d = values["n_features"]
    if d is not None and (type(d) is not int or d != width):
        raise SearchError(f"n_features {str(d)[:40]} is not the run's {width} features")
    shapes = _shapes(model, d)
    for k, v in values.items():
        f = fresh[k]
        if k in params:
            if v != f:
                raise SearchError(f"{k}: {str(v)[:40]} is not a valid {k}")
        elif isinstance(f, (np.ndarray, list)):
            _check_arrays(k, v, f, shapes.get(k))
        elif isinstance(f, str):
            if v not in ("", "cholesky", "lstsq"):
                raise SearchError(f"{k}: not a solver's name")
        elif isinstance(f, float):
            if type(v) not in (int, float) or not math.isfinite(v):
                raise SearchError(f"{k}: not a finite number")
        elif k != "n_features" and (type(v) is not int or v < 0):
            raise SearchError(f"{k}: {str(v)[:40]} is not an int >= 0")
        setattr(model, k, v)
    _check_counters(model, d)
    return model


def _shapes(model: Any, d: int | None) -> dict[str, Any]:
    """The shapes of a fitted model's arrays (``d`` inputs; None: unfitted, a fresh model's)."""
    if d is None:
        return {k: ([a.shape for a in v] if isinstance(v, list) else v.shape)
                for k, v in vars(model).items() if isinstance(v, (np.ndarray, list))}
    if isinstance(model, RandomFeatureRidge):
        D = model.features
        return {"mean": (d,), "std": (d,), "W": (d, D), "b": (D,), "A": (D + 1, D + 1),
                "c": (D + 1,), "theta": (D + 1,)}
    sizes = (d, *model.hidden, 1)
    params = [s for a, b in zip(sizes[:-1], sizes[1:]) for s in ((a, b), (b,))]
    return {"params": params, "m": params, "v": params, "X": (model.store, d),
            "Y": (model.store,), "x_mean": (d,), "x_std": (d,),
            "last_losses": (model.steps,)}


def _check_arrays(k: str, v: Any, fresh: Any, shape: Any) -> None:
    if isinstance(fresh, list):
        if not isinstance(v, list) or len(v) != len(shape):
            raise SearchError(f"{k}: not a list of {len(shape)} arrays")
        for i, (a, s) in enumerate(zip(v, shape)):
            _check_arrays(f"{k}[{i}]", a, np.zeros(0, np.float32), s)
        return
    if not isinstance(v, np.ndarray) or v.dtype != fresh.dtype or v.shape != tuple(shape):
        raise SearchError(f"{k}: not a {fresh.dtype} array of shape {tuple(shape)}")


def _check_counters(model: Any, d: int | None) -> None:
    """What the counters of a model say agrees with its arrays."""
    if (model.n_seen > 0) != (d is not None):
        raise SearchError("n_seen and n_features disagree (a fitted model has both)")
    if isinstance(model, MLP):
        if not model.count <= model.store or not model.pos < model.store or \
                model.count > model.n_seen or not model.y_std > 0:
            raise SearchError("count, pos or y_std is out of range of the store")
