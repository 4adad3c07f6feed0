"""The options of a search run (:func:`numptx.search.regress`, ``map_elites``, ``evolve``):
their defaults, bounds and checks, shared by the loop and by :func:`numptx.search.resume`
(which checks a checkpoint's settings as the API checks arguments, before anything is
allocated)::

    from numptx.search.config import check_config
    opts = check_config("regress", population=500, revary=1)    # a SearchOptions, checked
    opts.elitism, opts.fit_top                                   # defaults filled in: 5, 3
    opts.replace(revary=2)                                       # a new SearchOptions, checked
    check_config("regress", tournament=5_000_000_000)            # SearchError: <= population

Every option has an upper bound from what it means (:data:`BOUNDS`): ``tournament``,
``elitism`` and ``fit_top`` pick among the population, so they are at most its size; the
population is at most the score cache (:data:`CACHE_MAX`); ``max_length`` is at most the ops
the Stack PTX compiler runs (``sp.Limits().max_steps``). A value past its bound is a
:class:`SearchError` naming the option, the bound and why.
"""
from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .. import stack_ptx as sp
from .genes import SearchError, check_int, shown

#: score-cache entries a run keeps before clearing its cache. A checkpoint saves the whole cache
#: (at most this many 16-byte keys and losses: 24 MB), because re-variation (``revary``) makes
#: children depend on which programs were scored: a resumed run sees what the run saw.
CACHE_MAX = 1_000_000

#: the largest population (``batch`` of MAP-Elites): a generation's children must fit the
#: score cache, which is cleared past CACHE_MAX entries
POPULATION_MAX = CACHE_MAX
#: the most generations of a run: each keeps a history row (in memory and in a checkpoint)
GENERATIONS_MAX = 1_000_000
#: the longest program: the Stack PTX compiler runs a program's first max_steps ops
LENGTH_MAX = sp.Limits().max_steps
#: re-variations of a duplicate: the share of new children levels off after 2-3, and each
#: retry costs a mutation and a compile (~9 us) per duplicate child
REVARY_MAX = 16
#: rounds of the constant optimizer (each scores the whole trial batch)
FIT_STEPS_MAX = 10_000
#: fit_top x fit_trials trial programs are scored at once: no more than the largest population
FIT_BATCH_MAX = POPULATION_MAX
#: cells per MAP-Elites axis: the built-in axes take no more distinct values than the longest
#: program has ops
BINS_MAX = LENGTH_MAX

#: rows of a semantic-dedup probe (:mod:`numptx.search.semantic`): two programs whose outputs
#: agree on that many rows are one; more rows cost more than they tell apart
PROBE_MAX = 4096

#: the largest seed: a checkpoint stores it as a JSON number (at most 4,300 digits in Python);
#: the random generator's state is two 128-bit words, so a larger seed gives no more runs
SEED_MAX = (1 << 256) - 1

#: every option's bounds, as the docs state them (option -> (low, high, why))
BOUNDS: dict[str, tuple[Any, Any, str]] = {
    "population": (2, POPULATION_MAX, "a generation's children must fit the score cache"),
    "generations": (0, GENERATIONS_MAX, "each generation keeps a history row"),
    "tournament": (1, "population", "a tournament draws from the population"),
    "elitism": (0, "population - 1", "the elites are part of the population"),
    "parsimony": (0.0, "finite", "loss added per node of complexity in selection"),
    "crossover": (0.0, 1.0, "a rate"),
    "mutation": (0.0, 1.0, "a rate"),
    "max_length": (1, LENGTH_MAX, "the compiler runs a program's first Limits.max_steps ops"),
    "init_length": (1, LENGTH_MAX, "genes of a first program, at least an op each"),
    "fit_top": (0, "population", "the best new programs of a generation"),
    "fit_steps": (1, FIT_STEPS_MAX, "rounds of the constant optimizer"),
    "fit_trials": (1, f"{FIT_BATCH_MAX:,} / fit_top",
                   "fit_top x fit_trials programs are scored at once"),
    "target": (-math.inf, math.inf, "a loss (not NaN)"),
    "time_limit": (0.0, math.inf, "seconds"),
    "bins": (1, BINS_MAX, "cells per MAP-Elites axis"),
    "restart": (1, GENERATIONS_MAX, "generations without progress"),
    "revary": (0, REVARY_MAX, "re-variations of a duplicate child"),
    "semantic_dedup": (0, PROBE_MAX, "rows of the probe that finds programs of equal outputs"),
    "islands": (1, "population // 2", "subpopulations of at least 2 programs each"),
    "migration": (0, GENERATIONS_MAX, "generations between migrations (0: none)"),
    "screen": (0.0, 1.0, "the share of new children a predictor lets through (> 0)"),
    "explore": (0.0, 1.0, "the share of the screened-out children scored at random"),
}

__all__ = ["PREDICTORS", "SearchOptions", "Kind", "KINDS", "FitMethod", "Loss", "Device", "CACHE_MAX",
           "DEFAULTS", "BOUNDS", "POPULATION_MAX", "GENERATIONS_MAX", "LENGTH_MAX",
           "REVARY_MAX", "FIT_STEPS_MAX", "FIT_BATCH_MAX", "BINS_MAX", "PROBE_MAX", "check_config",
           "check_float", "check_seed", "check_generations", "SEED_MAX", "FIT_METHODS",
           "SURVIVORS", "Survivors", "Build", "BUILDS", "AUTO_BUILD", "check_build",
           "resolve_build", "MODEL_SELECTIONS", "ModelSelection", "VARIATIONS", "Variation",
           "BREEDS", "Breed", "TREE_ROWS", "variation_for", "first_lengths", "INIT_LENGTH_ONE",
           "INIT_LENGTH_MORE"]


#: how the compiled path's GPU modules are assembled: the values of ``build=``
Build = Literal["auto", "full", "fast"]
BUILDS: tuple[str, ...] = ("auto", "full", "fast")


def check_build(build: Any, where: str) -> str:
    """``build`` when it is one of :data:`BUILDS`; else a :class:`SearchError` naming it::

        check_build("fast", "regress")              # 'fast'
    """
    if not (isinstance(build, str) and build in BUILDS):
        raise SearchError(f"{where}: build={shown(build)}: use 'auto' (measured per device: "
                          f"full today), 'fast' (-Ofc=max: a screening build, the returned "
                          f"programs re-scored by the full one) or 'full' (the template's -O3)")
    return build


#: what ``build="auto"`` is on each device. Full on both: on the search's own modules (its
#: fitness kernel, 256 candidates a module as kernels of 128, programs of 2-12 ops) -Ofc=max
#: assembled 0.85-1.30x as fast as -O3 (slower in some runs, 6-30 % faster in others)
#: and gave 3-7x the SASS a candidate (benchmarks/README.md "Compile farm", ``--search``);
#: the compiled path runs on a GPU above GPU_INTERPRET_MAX_ROWS rows, where kernel time
#: counts. Measure again (``bench_populations.py --search``) before making it "fast".
AUTO_BUILD: dict[str, Literal["full", "fast"]] = {"cpu": "full", "gpu": "full"}


def resolve_build(build: str, device: str) -> Literal["full", "fast"]:
    """``build`` (checked) on the resolved ``device`` (``"cpu"``/``"gpu"``): ``"auto"`` is
    :data:`AUTO_BUILD`'s entry (``"full"`` today, measured); ``"fast"`` and ``"full"`` as
    given. On the CPU the compiled path emulates the search's stubs (nothing is assembled),
    so the mode changes no loss there."""
    if build == "auto":
        return AUTO_BUILD[device]
    return "fast" if build == "fast" else "full"


def check_float(name: str, v: Any, low: float, high: float = math.inf) -> float:
    """``v`` as a float in [low, high]; else a :class:`SearchError` naming ``name``."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                             np.floating)):
        raise SearchError(f"{name}={shown(v)}: give a number in [{low}, {high}]")
    try:
        f = float(v)
    except OverflowError:               # an int past the float range (copysign overflows too)
        f = math.inf if v > 0 else -math.inf
    if not low <= f <= high:
        raise SearchError(f"{name}={shown(v)}: give a number in [{low}, {high}]")
    return f


#: regress's default islands (``islands=None``): as many islands of at least ISLAND_SIZE
#: programs as the population holds, up to ISLANDS_MAX_DEFAULT (4 islands of 125 solved 67 of
#: the 85 runs of benchmarks/README.md's comparison with Operon, against 63 for one population)
ISLAND_SIZE = 100
ISLANDS_MAX_DEFAULT = 4

#: every option of a run and its default (None: derived from the others in check_config)
DEFAULTS = dict(population=1000, generations=100, tournament=None, elitism=None, parsimony=0.0,
                crossover=0.5, mutation=0.9, max_length=64, init_length=None, fit_top=None,
                fit_steps=12, fit_trials=4, target=None, time_limit=None, bins=None,
                descriptors=("length", "op_mix"), restart=None, revary=1, semantic_dedup=None,
                linear_scaling=None, fit_method="auto", input_weights=None, survivors=None,
                islands=None, migration=10, predictor=False, screen=0.25, explore=0.05,
                model_selection="best", variation="auto")

#: how children are varied (``variation=``, :mod:`numptx.search.breed`): ``"tree"`` reads a
#: program as the expression it computes: crossover swaps whole subexpressions (tree GP's
#: subtree crossover) and a point mutation keeps the arity (an input or constant for one, an
#: op for an op of as many operands); ``"linear"`` cuts anywhere between genes (a two-point
#: crossover of the op lists; a point mutation puts any gene); ``"auto"`` (the default) is
#: :func:`variation_for`: tree from :data:`TREE_ROWS` training rows, else linear. Tree fits
#: faster: on the 201-row Keijzer-4 its best loss after 60 generations is ~7x lower (~5x at
#: equal CPU), and on 20-point problems it reaches the training stop sooner, on
#: approximations that do not generalize (benchmarks/README.md, "Tree on larger data")
VARIATIONS = ("auto", "tree", "linear")
Variation = Literal["auto", "tree", "linear"]
#: what a Breeder takes (``"auto"`` resolved by :func:`variation_for`)
BREEDS = ("tree", "linear")
Breed = Literal["tree", "linear"]
#: the training rows from which ``variation="auto"`` is ``"tree"``: the comparison's
#: problems have 20 rows (Nguyen, Keijzer-11/-12: linear solved more) or 200-201 (Keijzer-4,
#: AI-Feynman: tree solved as many or more); the threshold between is not tuned
TREE_ROWS = 100


def variation_for(variation: Variation, rows: int | None) -> Breed:
    """The variation a run's children get: ``variation`` unless ``"auto"``, which is
    ``"tree"`` over at least :data:`TREE_ROWS` training rows and ``"linear"`` over fewer or
    without data (``evolve``'s user fitness)::

        variation_for("auto", 200), variation_for("auto", 20), variation_for("tree", 20)
        # ('tree', 'linear', 'tree')
    """
    if variation == "auto":
        return "tree" if rows is not None and rows >= TREE_ROWS else "linear"
    if variation in BREEDS:
        return "tree" if variation == "tree" else "linear"
    raise SearchError(f"variation={shown(variation)}: use 'auto', 'tree' or 'linear'")

#: the rules that pick ``result.model`` from the Pareto front (``model_selection=``;
#: :mod:`numptx.search.front` defines each)
MODEL_SELECTIONS = ("best", "accuracy", "mdl")
ModelSelection = Literal["best", "accuracy", "mdl"]

#: the models ``predictor=`` names (:mod:`numptx.search.screening`; True: "ridge")
PREDICTORS = ("ridge", "mlp")

#: how the constants of new programs are fitted (``fit_method=``): ``"lm"`` Levenberg–Marquardt
#: on the CPU interpreter (:mod:`numptx.search.least_squares`), ``"es"`` the (1+λ) evolution
#: strategy (:mod:`numptx.search.constants`), ``"auto"`` lm where it runs (a CPU interpreter
#: and a least-squares loss), else es
FIT_METHODS = ("auto", "lm", "es")
FitMethod = Literal["auto", "lm", "es"]

#: the losses a data search takes (``loss=``; the fitness kernel's ``numptx.jit.populations.fitness.LOSSES``,
#: which tests/test_search_seams.py holds equal to these)
Loss = Literal["mse", "mae", "rmse", "pearson"]
#: where a data search runs (``device=``)
Device = Literal["auto", "cpu", "gpu"]

#: the searches: what a checkpoint records and :func:`check_config`'s ``where``
KINDS = ("regress", "map_elites", "evolve")
Kind = Literal["regress", "map_elites", "evolve"]

#: who forms the next population (``survivors=``): ``"plus"`` the best ``population`` distinct
#: programs of the parents and their children (a (mu + lambda) step, Operon's keep-best
#: reinsertion; ``elitism`` is implied); ``"children"`` the ``elitism`` best parents and the
#: children (generational). None: "plus" for regress; "children" for evolve, whose fitness
#: (a user's kernels, often timed) may be noisy: a lucky score would survive for ever.
SURVIVORS = ("plus", "children")
Survivors = Literal["plus", "children"]


@dataclass(frozen=True)
class SearchOptions:
    """The checked options of one run (:func:`check_config` makes them; the search functions'
    docstrings say what each means). Frozen: :meth:`replace` gives a new, checked set, with
    the options the check derived from others (``tournament``, ``elitism``, ``fit_top``,
    ``survivors`` left None) derived again; built directly (``SearchOptions(...)``,
    ``dataclasses.replace``) the options are checked as :func:`check_config` checks them::

        opts = check_config("regress", population=200)
        opts.population, opts.tournament          # 200, 5
        opts.replace(generations=50).generations  # 50
        opts.replace(population=4).tournament     # 4: derived again
    """
    kind: Kind
    population: int
    generations: int
    tournament: int
    elitism: int
    parsimony: float
    crossover: float
    mutation: float
    max_length: int
    #: None: :func:`first_lengths` derives it from the inputs
    init_length: tuple[int, int] | None
    fit_top: int
    fit_steps: int
    fit_trials: int
    target: float | None
    time_limit: float | None
    bins: int | None
    descriptors: tuple
    restart: int | None
    revary: int
    semantic_dedup: int | None
    linear_scaling: bool | None
    fit_method: FitMethod
    input_weights: bool | None
    survivors: Survivors
    islands: int
    migration: int
    #: False, a model name of :data:`PREDICTORS`, or a model object (numptx.learn's protocol)
    predictor: Any
    screen: float
    explore: float
    model_selection: ModelSelection = "best"
    variation: Variation = "auto"
    #: the options check_config derived (given as None): :meth:`replace` derives them again
    derived: frozenset[str] = dataclasses.field(default=frozenset(), init=False, repr=False,
                                                compare=False)

    def __post_init__(self) -> None:
        # built directly (not by check_config, which builds through _checked): check it
        ok = check_config(self.kind, **self.to_dict())
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, getattr(ok, f.name))

    @classmethod
    def _checked(cls, kind: Kind, cfg: dict[str, Any], derived: frozenset[str]) -> SearchOptions:
        """Options check_config checked (no second check)."""
        opts = object.__new__(cls)
        for name, v in {"kind": kind, **cfg, "derived": derived}.items():
            object.__setattr__(opts, name, v)
        return opts

    def replace(self, **changes: Any) -> SearchOptions:
        """These options with ``changes``, checked again (an unknown or bad one is a
        :class:`SearchError`, as :func:`check_config` gives); an option the check derived
        (:attr:`derived`) and ``changes`` leaves alone is derived again: ``replace`` gives
        what :func:`check_config` gives for the options given to it and ``changes``."""
        given = {k: v for k, v in self.to_dict().items() if k not in self.derived}
        return check_config(self.kind, **(given | changes))

    def to_dict(self) -> dict[str, Any]:
        """Every option by name (``kind`` left out), e.g. for a checkpoint."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.init and f.name != "kind"}


#: the options check_config derives from the others when they are None
_DERIVED = ("tournament", "elitism", "fit_top", "survivors", "islands")


def _unknown(where: str, unknown: set) -> SearchError:
    valid = ", ".join(sorted(DEFAULTS))
    return SearchError(f"{where}: unknown option(s) {', '.join(map(repr, sorted(unknown)))}; "
                       f"the options are: {valid}")


def check_generations(v: Any, done: int = 0) -> int:
    """``v`` generations (more, after ``done``) within :data:`GENERATIONS_MAX` in all."""
    check_int("generations", v, 0)
    return check_int("generations", v, 0, GENERATIONS_MAX - done,
                     f"a run has at most {GENERATIONS_MAX:,} generations"
                     + (f"; {done:,} are done" if done else ""))


def check_config(where: Kind, **given: Any) -> SearchOptions:
    """Every option (``given`` over :data:`DEFAULTS`) checked against its bounds
    (:data:`BOUNDS`), derived defaults filled in, as a :class:`SearchOptions`; a bad or
    unknown one is a :class:`SearchError` naming it (``where``: the search, one of
    :data:`KINDS`; an unknown option's message lists the valid ones). The groups are checked
    in a fixed order, so a call with several bad options names the same one every time."""
    if where not in KINDS:
        raise SearchError(f"check_config: where={shown(where)}: use one of "
                          f"{', '.join(map(repr, KINDS))}")
    cfg = dict(DEFAULTS)
    unknown = set(given) - set(cfg)
    if unknown:
        raise _unknown(where, unknown)
    cfg.update({k: v for k, v in given.items()})
    # map_elites takes the population size as batch=
    pop_name = "batch" if where == "map_elites" else "population"
    pop = cfg["population"] = check_int(pop_name, cfg["population"], 2, POPULATION_MAX,
                                        BOUNDS["population"][2])
    _check_selection(cfg, pop, pop_name)
    _check_choices(where, cfg)
    _check_fitting(cfg, pop, pop_name)
    _check_stopping(cfg)
    _check_islands(where, cfg, pop, pop_name)
    _check_predictor(where, cfg)
    _check_descriptors(cfg)
    derived = frozenset(k for k in _DERIVED if given.get(k) is None)
    return SearchOptions._checked(where, cfg, derived)


def _check_selection(cfg: dict, pop: int, pop_name: str) -> None:
    """generations, the selection (tournament, elitism, parsimony) and the variation (rates,
    lengths), in ``cfg``."""
    cfg["generations"] = check_generations(cfg["generations"])
    cfg["tournament"] = (min(5, pop) if cfg["tournament"] is None else
                         check_int("tournament", cfg["tournament"], 1, pop,
                                   f"a tournament draws from the {pop_name} of {pop:,}"))
    cfg["elitism"] = (max(1, pop // 100) if cfg["elitism"] is None
                      else check_int("elitism", cfg["elitism"], 0, pop - 1,
                                     f"must be below {pop_name}={pop:,}"))
    cfg["parsimony"] = check_float("parsimony", cfg["parsimony"], 0.0, sys.float_info.max)
    cfg["crossover"] = check_float("crossover", cfg["crossover"], 0.0, 1.0)
    cfg["mutation"] = check_float("mutation", cfg["mutation"], 0.0, 1.0)
    cfg["max_length"] = check_int("max_length", cfg["max_length"], 1, LENGTH_MAX,
                                  BOUNDS["max_length"][2])
    cfg["init_length"] = _init_length(cfg["init_length"])


def _check_choices(where: Kind, cfg: dict) -> None:
    """The named choices (fit_method, survivors: None is the search's default) and the
    switches (linear_scaling, input_weights: True, False or None), in ``cfg``."""
    if cfg["fit_method"] not in FIT_METHODS:
        raise SearchError(f"{where}: fit_method={shown(cfg['fit_method'])}: use one of "
                          f"{', '.join(map(repr, FIT_METHODS))}")
    if cfg["model_selection"] not in MODEL_SELECTIONS:
        raise SearchError(f"{where}: model_selection={shown(cfg['model_selection'])}: use one "
                          f"of {', '.join(map(repr, MODEL_SELECTIONS))} ('best': PySR's rule, "
                          f"'accuracy': the lowest loss, 'mdl': the shortest description; "
                          f"numptx.search.front)")
    if cfg["variation"] not in VARIATIONS:
        raise SearchError(f"{where}: variation={shown(cfg['variation'])}: use 'auto' (tree from "
                          f"{TREE_ROWS} training rows, else linear), 'tree' (subtree crossover, "
                          f"arity-keeping point mutations) or 'linear' (cuts anywhere between "
                          f"genes)")
    if cfg["survivors"] is None:
        cfg["survivors"] = "plus" if where == "regress" else "children"
    if cfg["survivors"] not in SURVIVORS:
        raise SearchError(f"{where}: survivors={shown(cfg['survivors'])}: use one of "
                          f"{', '.join(map(repr, SURVIVORS))}")
    for name, why in (("linear_scaling", "on for loss='mse' or 'rmse'"),
                      ("input_weights", "on when fit_method is 'lm'")):
        v = cfg[name]
        if v is not None and not isinstance(v, (bool, np.bool_)):
            raise SearchError(f"{where}: {name}={shown(v)}: give True, False or None ({why})")
        cfg[name] = None if v is None else bool(v)


def _check_fitting(cfg: dict, pop: int, pop_name: str) -> None:
    """The constant fitting's sizes (fit_top, fit_steps, fit_trials), in ``cfg``."""
    # default: a few per generation on a CPU (each fit costs steps x trials evaluations), more
    # with the large populations a GPU scores
    cfg["fit_top"] = (max(2, min(64, pop // 128)) if cfg["fit_top"] is None
                      else check_int("fit_top", cfg["fit_top"], 0, pop,
                                     f"the best new programs of a {pop_name} of {pop:,}"))
    cfg["fit_steps"] = check_int("fit_steps", cfg["fit_steps"], 1, FIT_STEPS_MAX,
                                 BOUNDS["fit_steps"][2])
    # the evolution strategy scores fit_top x fit_trials programs at once; Levenberg–Marquardt
    # takes no trials (its fit_top is every child: a checkpoint of a large population resumes).
    # "auto" is checked again as the method the data search resolves it to
    # (numptx.search.prepare.resolve_fitting; a data run's checkpoint holds the resolved one)
    cfg["fit_trials"] = check_int("fit_trials", cfg["fit_trials"], 1,
                                  FIT_BATCH_MAX // (1 if cfg["fit_method"] in ("lm", "auto")
                                                    else max(1, cfg["fit_top"])),
                                  f"fit_top x fit_trials programs are scored at once, at most "
                                  f"{FIT_BATCH_MAX:,}")


def _check_stopping(cfg: dict) -> None:
    """When a run stops or starts again (target, time_limit, restart), and how it avoids
    duplicates (revary, semantic_dedup), in ``cfg``."""
    if cfg["target"] is not None:
        cfg["target"] = check_float("target", cfg["target"], -math.inf)
    if cfg["time_limit"] is not None:
        cfg["time_limit"] = check_float("time_limit", cfg["time_limit"], 0.0)
    if cfg["restart"] is not None:
        cfg["restart"] = check_int("restart", cfg["restart"], 1, GENERATIONS_MAX,
                                   BOUNDS["restart"][2])
    cfg["revary"] = check_int("revary", cfg["revary"], 0, REVARY_MAX, BOUNDS["revary"][2])
    if cfg["semantic_dedup"] is not None:       # None: the search decides (semantic.resolve)
        cfg["semantic_dedup"] = check_int("semantic_dedup", cfg["semantic_dedup"], 0,
                                          PROBE_MAX, BOUNDS["semantic_dedup"][2])


def _check_islands(where: Kind, cfg: dict, pop: int, pop_name: str) -> None:
    """islands (None: regress's default) and migration, in ``cfg``."""
    if cfg["islands"] is None:      # regress's: islands of ISLAND_SIZE programs or more, up to 4
        cfg["islands"] = (max(1, min(ISLANDS_MAX_DEFAULT, pop // ISLAND_SIZE))
                          if where == "regress" and cfg["survivors"] == "plus" else 1)
    cfg["islands"] = check_int("islands", cfg["islands"], 1, max(1, pop // 2),
                               f"subpopulations of at least 2 of the {pop_name} of {pop:,}")
    if cfg["islands"] > 1 and (where == "map_elites" or cfg["survivors"] != "plus"):
        raise SearchError(f"{where}: islands={cfg['islands']}: islands keep the best of their "
                          f"parents and children (survivors='plus', regress's default)"
                          + ("; MAP-Elites' archive is one" if where == "map_elites" else
                             f", not survivors={cfg['survivors']!r}"))
    cfg["migration"] = check_int("migration", cfg["migration"], 0, GENERATIONS_MAX,
                                 BOUNDS["migration"][2])


def _check_predictor(where: Kind, cfg: dict) -> None:
    """predictor (False, True -> "ridge", a name, or a model), screen and explore, in ``cfg``."""
    p = cfg["predictor"]
    if p is None or p is False:
        cfg["predictor"] = False
    elif p is True:
        cfg["predictor"] = "ridge"
    elif isinstance(p, str):
        if p not in PREDICTORS:
            raise SearchError(f"predictor={p!r}: give True, False, one of "
                              f"{', '.join(map(repr, PREDICTORS))} or a model object")
    elif not all(callable(getattr(type(p), m, None)) for m in ("partial_fit", "predict", "rank")):
        raise SearchError(f"predictor={shown(p)}: a model needs partial_fit, predict and rank "
                          f"(numptx.learn.Model); or give True or a name of "
                          f"{', '.join(map(repr, PREDICTORS))}")
    cfg["screen"] = check_float("screen", cfg["screen"], 0.0, 1.0)
    if cfg["screen"] <= 0.0:
        raise SearchError(f"screen={cfg['screen']!r}: give a share in (0, 1] of the new "
                          f"children to score")
    cfg["explore"] = check_float("explore", cfg["explore"], 0.0, 1.0)
    if cfg["predictor"] is not False and cfg["survivors"] != "plus" and where != "map_elites":
        raise SearchError(f"{where}: predictor={cfg['predictor']!r}: the children a predictor "
                          f"screens out are dropped, which needs survivors='plus' (the best of "
                          f"parents and children), not survivors={cfg['survivors']!r}")


def _check_descriptors(cfg: dict) -> None:
    """MAP-Elites' grid (bins, descriptors: a tuple), in ``cfg``."""
    if cfg["bins"] is not None:
        cfg["bins"] = check_int("bins", cfg["bins"], 1, BINS_MAX, BOUNDS["bins"][2])
    if isinstance(cfg["descriptors"], str):
        cfg["descriptors"] = (cfg["descriptors"],)
    if not isinstance(cfg["descriptors"], (tuple, list)):
        raise SearchError(f"descriptors={cfg['descriptors']!r}: give a sequence of descriptor "
                          f"names or Descriptor tuples")
    cfg["descriptors"] = tuple(cfg["descriptors"])


#: the genes of a first program when ``init_length`` is None: (2, 12) over one input, (2, 24)
#: over two or more (a program needs genes for each input it uses; on the comparison's
#: two-input Keijzer-12, 60-s runs, seeds 0-9, (2, 24) solved 6 of 10 against 2 for (2, 12);
#: on the one-input Nguyen-3/-4 fewer: benchmarks/README.md, "First programs")
INIT_LENGTH_ONE = (2, 12)
INIT_LENGTH_MORE = (2, 24)


def first_lengths(init_length: tuple[int, int] | None, n_inputs: int) -> tuple[int, int]:
    """The (low, high) genes of a run's first programs: ``init_length`` when given, else
    :data:`INIT_LENGTH_ONE` over one input and :data:`INIT_LENGTH_MORE` over more::

        first_lengths(None, 1), first_lengths(None, 3), first_lengths((4, 8), 3)
        # (2, 12), (2, 24), (4, 8)
    """
    if init_length is not None:
        low, high = init_length
        return low, high
    return INIT_LENGTH_ONE if n_inputs <= 1 else INIT_LENGTH_MORE


def _init_length(il: Any) -> tuple[int, int] | None:
    if il is None:
        return None
    if not (isinstance(il, (tuple, list)) and len(il) == 2):
        raise SearchError(f"init_length={il!r}: give a (low, high) pair of gene counts")
    why = BOUNDS["init_length"][2]
    low = check_int("init_length", il[0], 1, LENGTH_MAX, why)
    high = check_int("init_length", il[1], 1, LENGTH_MAX, why)
    if low > high:
        raise SearchError(f"init_length={il!r}: give (low, high) with low <= high")
    return low, high


def check_seed(seed: Any) -> int | None:
    """``seed`` as an int >= 0, or None (a seed is drawn)."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0 \
            or seed > SEED_MAX:
        raise SearchError(f"seed={shown(seed)}: give an int in [0, 2**256 - 1] (or None)")
    return int(seed)
