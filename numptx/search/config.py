"""The options of a search run (:func:`numptx.search.regress`, ``map_elites``, ``evolve``):
their defaults and checks, shared by the loop and by :func:`numptx.search.resume` (which checks
a checkpoint's settings as the API checks arguments)::

    from numptx.search.config import check_config
    cfg = check_config("regress", population=500, revary=1)     # every option, checked
    cfg["elitism"], cfg["fit_top"]                               # defaults filled in: 5, 3
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .genes import SearchError, check_int

#: score-cache entries a run keeps before clearing its cache. A checkpoint saves the whole cache
#: (at most this many 16-byte keys and losses: 24 MB), because re-variation (``revary``) makes
#: children depend on which programs were scored: a resumed run sees what the run saw.
CACHE_MAX = 1_000_000

__all__ = ["CACHE_MAX", "DEFAULTS", "check_config", "check_float", "check_seed"]


def check_float(name: str, v: Any, low: float, high: float = math.inf) -> float:
    """``v`` as a float in [low, high]; else a :class:`SearchError` naming ``name``."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or \
            not low <= float(v) <= high:
        raise SearchError(f"{name}={v!r}: give a number in [{low}, {high}]")
    return float(v)


#: every option of a run and its default (None: derived from the others in check_config)
DEFAULTS = dict(population=1000, generations=100, tournament=5, elitism=None, parsimony=0.0,
                crossover=0.5, mutation=0.9, max_length=64, init_length=(2, 12), fit_top=None,
                fit_steps=12, fit_trials=4, target=None, time_limit=None, bins=None,
                descriptors=("length", "op_mix"), restart=None, revary=1)


def check_config(where: str, **given: Any) -> dict:
    """Every option (``given`` over :data:`DEFAULTS`) checked, derived defaults filled in;
    a bad or unknown one is a :class:`SearchError` naming it (``where``: the API function)."""
    cfg = dict(DEFAULTS)
    unknown = set(given) - set(cfg)
    if unknown:
        raise SearchError(f"{where}: unknown option(s) {sorted(unknown)}")
    cfg.update({k: v for k, v in given.items()})
    # map_elites takes the population size as batch=
    cfg["population"] = check_int("batch" if where == "map_elites" else "population",
                                  cfg["population"], 2)
    cfg["generations"] = check_int("generations", cfg["generations"], 0)
    cfg["tournament"] = check_int("tournament", cfg["tournament"], 1)
    cfg["elitism"] = (max(1, cfg["population"] // 100) if cfg["elitism"] is None
                      else check_int("elitism", cfg["elitism"], 0))
    if cfg["elitism"] >= cfg["population"]:
        raise SearchError(f"elitism={cfg['elitism']}: must be below population="
                          f"{cfg['population']}")
    cfg["parsimony"] = check_float("parsimony", cfg["parsimony"], 0.0)
    cfg["crossover"] = check_float("crossover", cfg["crossover"], 0.0, 1.0)
    cfg["mutation"] = check_float("mutation", cfg["mutation"], 0.0, 1.0)
    cfg["max_length"] = check_int("max_length", cfg["max_length"], 1)
    il = cfg["init_length"]
    if not (isinstance(il, (tuple, list)) and len(il) == 2):
        raise SearchError(f"init_length={il!r}: give a (low, high) pair of gene counts")
    cfg["init_length"] = (check_int("init_length", il[0], 1), check_int("init_length", il[1], 1))
    if cfg["init_length"][0] > cfg["init_length"][1]:
        raise SearchError(f"init_length={il!r}: give (low, high) with low <= high")
    # default: a few per generation on a CPU (each fit costs steps x trials evaluations), more
    # with the large populations a GPU scores
    cfg["fit_top"] = (max(2, min(64, cfg["population"] // 128)) if cfg["fit_top"] is None
                      else check_int("fit_top", cfg["fit_top"], 0))
    cfg["fit_steps"] = check_int("fit_steps", cfg["fit_steps"], 1)
    cfg["fit_trials"] = check_int("fit_trials", cfg["fit_trials"], 1)
    if cfg["target"] is not None:
        cfg["target"] = check_float("target", cfg["target"], -math.inf)
    if cfg["time_limit"] is not None:
        cfg["time_limit"] = check_float("time_limit", cfg["time_limit"], 0.0)
    if cfg["restart"] is not None:
        cfg["restart"] = check_int("restart", cfg["restart"], 1)
    cfg["revary"] = check_int("revary", cfg["revary"], 0)
    if cfg["bins"] is not None:
        cfg["bins"] = check_int("bins", cfg["bins"], 1)
    if isinstance(cfg["descriptors"], str):
        cfg["descriptors"] = (cfg["descriptors"],)
    if not isinstance(cfg["descriptors"], (tuple, list)):
        raise SearchError(f"descriptors={cfg['descriptors']!r}: give a sequence of descriptor "
                          f"names or Descriptor tuples")
    cfg["descriptors"] = tuple(cfg["descriptors"])
    return cfg


def check_seed(seed: Any) -> int | None:
    """``seed`` as an int >= 0, or None (a seed is drawn)."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise SearchError(f"seed={seed!r}: give a non-negative int (or None)")
    return int(seed)
