"""A search set up before its first generation, its arguments checked in a fixed order (so a
call with several bad arguments names the same one every time): on a data set
(:func:`prepare`, for :func:`numptx.search.regress` and :func:`numptx.search.map_elites`: the
constant fitting the options leave to the search resolved, the genes and the
:class:`~numptx.search.evaluate.Evaluator` made) or on a template's site (:func:`prepare_evolve`,
for :func:`numptx.search.evolve`: the genes of the site and the user's fitness)::

    import numpy as np
    from numptx.search.prepare import prepare
    X = np.random.default_rng(0).uniform(-1, 1, (200, 1)).astype(np.float32)
    y = X[:, 0] ** 2
    genes, cfg, evaluator = prepare("regress", X, y, ["add", "mul"], names=None, dtype=None,
                                    constants=None, loss="mse", device="cpu", executor=None,
                                    per_module=None, population=200)
    cfg.fit_method, cfg.linear_scaling, cfg.input_weights     # ('lm', True, True)
"""
from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Any

import numpy as np

from .config import Kind, SearchOptions, check_config
from .evaluate import (SCALED_LOSSES, Evaluator, check_data, check_evaluate, check_executor,
                       check_per_module, resolve_device)
from .genes import Genes, SearchError
from .rescore import user_build
from .scorers import UserFitness
from .sites import site_genes

__all__ = ["prepare", "prepare_evolve", "resolve_fitting", "fit_top_lm"]


def prepare(kind: Kind, X: Any, y: Any, ops: Sequence[str], *, names: Sequence[str] | None,
            dtype: str | None, constants: Sequence[float] | None, loss: str, device: str,
            executor: Executor | None, per_module: int | None, pipeline: Any = True,
            evaluate: Any = "auto", build: Any = "auto",
            **options: Any) -> tuple[Genes, SearchOptions, Evaluator]:
    """The genes, the checked options (``options``: :func:`~numptx.search.config.check_config`'s,
    the fitting resolved by :func:`resolve_fitting`) and the evaluator of a ``kind`` search on
    ``X``, ``y``; a bad argument is a :class:`SearchError` naming it."""
    check_evaluate(evaluate, kind)
    # the dtype follows X (y is cast to it), or dtype= when given
    Xc, yc = check_data(X, y, where=kind, dtype=dtype)
    data_dtype = "f64" if Xc.dtype == np.float64 else "f32"
    cfg = check_config(kind, **options)
    if not isinstance(pipeline, bool):
        raise SearchError(f"{kind}: pipeline={pipeline!r}: give True or False")
    cfg = resolve_fitting(cfg, loss, yc, resolve_device(device), options)
    try:
        genes = Genes(ops, Xc.shape[1], names=names, dtype=data_dtype,
                      weights=bool(cfg.input_weights),       # resolved: a bool
                      **({} if constants is None else {"constants": constants}))
    except SearchError as e:
        if dtype is None and data_dtype == "f64" and "no f64 form" in str(e):
            raise SearchError(f"{kind}: {e}; X is float64, so the search runs in f64: pass X "
                              f"as float32 (or dtype='f32') to use that op") from None
        raise
    ev = Evaluator(Xc, yc, loss=loss, names=genes.names, device=device, executor=executor,
                   per_module=per_module, where=kind, pipeline=pipeline, evaluate=evaluate,
                   rows=genes.rows, linear_scaling=bool(cfg.linear_scaling), build=build)
    return genes, cfg, ev


def resolve_fitting(cfg: SearchOptions, loss: str, y: np.ndarray, device: str,
                    given: dict) -> SearchOptions:
    """The options with the constant fitting left to the search (None / "auto") filled in:
    ``linear_scaling`` on for mse and rmse when y varies; ``fit_method`` "lm" on the CPU for
    a least-squares loss (mse, rmse, pearson), else "es"; under lm, ``input_weights`` on and
    ``fit_top`` :func:`fit_top_lm` unless given (``given``: the options as passed)."""
    change: dict[str, Any] = {}
    if cfg.linear_scaling is None:
        change["linear_scaling"] = loss in SCALED_LOSSES and bool(y.min() != y.max())
    if cfg.fit_method == "lm" and loss not in (*SCALED_LOSSES, "pearson"):
        raise SearchError(f"fit_method='lm' with loss={loss!r}: Levenberg–Marquardt minimizes "
                          f"squared errors (mse, rmse, pearson); use fit_method='es' or 'auto'")
    method = cfg.fit_method
    if method == "auto":
        lm = device == "cpu" and loss in (*SCALED_LOSSES, "pearson")
        method = change["fit_method"] = "lm" if lm else "es"
        if lm and given.get("fit_top") is None:
            change["fit_top"] = fit_top_lm(cfg.population)
    if cfg.input_weights is None:
        change["input_weights"] = method == "lm"
    return cfg.replace(**change) if change else cfg


def fit_top_lm(population: int) -> int:
    """The default ``fit_top`` under Levenberg–Marquardt: every child, as Operon fits every
    child (the C fit made that affordable; fitting all solved more runs in the same time
    than the best quarter: benchmarks/README.md, "Search against Operon")."""
    return population


def prepare_evolve(template: Any, site: Any, fitness: Any, *, ops: Sequence[str], select: str,
                   constants: Sequence[float] | None, per_module: int | None,
                   executor: Executor | None, evaluate: Any, build: Any,
                   **options: Any) -> tuple[Genes, SearchOptions, UserFitness]:
    """The genes, the checked options (``options``: :func:`~numptx.search.config.check_config`'s;
    no constant fitting) and the :class:`~numptx.search.scorers.UserFitness` of an
    :func:`numptx.search.evolve` run on ``site`` of ``template``; a bad argument is a
    :class:`SearchError` naming it."""
    if check_evaluate(evaluate, "evolve") == "interpret":
        raise SearchError("evolve: evaluate='interpret': evolve's fitness scores built packs "
                          "(your kernel runs them), so there is nothing to interpret; use "
                          "'auto' or 'compile' (or search.regress for a data set)")
    if not callable(fitness):
        raise SearchError(f"evolve: fitness={fitness!r} is not callable (it takes the built packs "
                          f"and returns one score per candidate)")
    name, s, genes = site_genes(template, site, select, ops, constants)
    cfg = check_config("evolve", fit_top=0, **options)
    user = UserFitness(template=template, site=name, site_obj=s, select=select,
                       fitness=fitness, per_module=check_per_module(per_module, "evolve"),
                       executor=check_executor(executor, "evolve"),
                       build=user_build(template, name, build))
    return genes, cfg, user
