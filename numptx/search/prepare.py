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

The input names: ``names=`` when given (each an ASCII identifier that is neither a formula
function nor a name the fitness kernel uses for itself: else a SearchError with the fix), else a
pandas DataFrame's column names, mapped by :func:`input_names` where they are not usable as
they are (a warning lists what was renamed), else ``x0, x1, ...``::

    input_names(["mass (kg)", "v", "class", "2nd", "y"])  # ('mass_kg', 'v', 'class_', 'x2nd', 'y')
"""
from __future__ import annotations

import keyword
import math
import re
import unicodedata
import warnings
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Any

import numpy as np

from .config import Kind, SearchOptions, check_config, variation_for
from .evaluate import (SCALED_LOSSES, Evaluator, check_data, check_evaluate, check_executor,
                       check_per_module, resolve_device)
from ..jit.populations.fitness import RESERVED_NAMES as KERNEL_NAMES
from .genes import RESERVED_NAMES, Genes, SearchError
from .rescore import user_build, user_stacklevel
from .scorers import UserFitness
from .sites import site_genes

__all__ = ["prepare", "prepare_evolve", "resolve_fitting", "fit_top_lm", "input_names",
           "data_names", "warn_renamed", "check_scale", "HUGE_ROWS_SCALE", "TINY_SPREAD"]

#: float64's largest finite value and smallest normal one
_F64_MAX, _F64_TINY = float(np.finfo(np.float64).max), float(np.finfo(np.float64).tiny)
#: y's largest ``|value|`` on n rows is at most ``HUGE_ROWS_SCALE / sqrt(n)``: the search
#: squares y's deviations in float64 (its variance, the squared errors of mse, pearson's
#: moments), and n squares of twice that size stay finite (about 4.7e152 at 200 rows)
HUGE_ROWS_SCALE = math.sqrt(_F64_MAX / 4)
#: y's spread (standard deviation) under a squared loss (mse, rmse, pearson, linear scaling)
#: is at least this: its variance a normal float64 (past 2.2e-308), else the squared errors
#: underflow and every formula near y scores 0, a constant as well as the answer
TINY_SPREAD = math.sqrt(_F64_TINY)


def prepare(kind: Kind, X: Any, y: Any, ops: Sequence[str], *, names: Sequence[str] | None,
            dtype: str | None, constants: Sequence[float] | None, loss: str, device: str,
            executor: Executor | None, per_module: int | None, pipeline: Any = True,
            evaluate: Any = "auto", build: Any = "auto",
            **options: Any) -> tuple[Genes, SearchOptions, Evaluator]:
    """The genes, the checked options (``options``: :func:`~numptx.search.config.check_config`'s,
    the fitting resolved by :func:`resolve_fitting`) and the evaluator of a ``kind`` search on
    ``X``, ``y``; a bad argument is a :class:`SearchError` naming it."""
    check_evaluate(evaluate, kind)
    names = data_names(X, names, kind)
    # the dtype follows X (y is cast to it), or dtype= when given
    Xc, yc = check_data(X, y, where=kind, dtype=dtype)
    check_scale(Xc, yc, loss, kind, names)
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


def check_scale(X: np.ndarray, y: np.ndarray, loss: str, where: str,
                names: Sequence[str] | None = None) -> None:
    """Refuse data whose magnitude the search's float64 sums cannot hold, naming ``y`` and the
    fix (a :class:`SearchError`), before a NumPy overflow warning or a silent constant:

    - ``y`` past ``HUGE_ROWS_SCALE / sqrt(n)`` (~1e152): its squares overflow; divide y by a
      power of ten and multiply the formula by it;
    - ``y`` of spread below :data:`TINY_SPREAD` (~1.5e-154) under a squared loss (mse, rmse,
      pearson), or below float64's smallest normal number under mae, while not constant: the
      squared errors underflow to 0 (every formula "fits"); multiply y by a power of ten.

    ``X`` columns past the same limit (or below it, not all 0) only warn (``UserWarning``, at
    the user's line): a formula that squares or multiplies them overflows (or underflows) and
    scores inf, but one that divides them may still fit::

        check_scale(X, y, "mse", "regress")       # None, or a SearchError naming y
    """
    n = len(y)
    limit = HUGE_ROWS_SCALE / math.sqrt(n)
    yy = y.astype(np.float64)
    top = float(np.abs(yy).max())
    if top > limit:
        k = math.floor(math.log10(top))
        raise SearchError(f"{where}: y reaches |{top:.3g}|: the search squares y's deviations "
                          f"in float64 (its variance, the squared errors), and past about "
                          f"{limit:.2g} on {n} rows they overflow; rescale y: search y / 1e{k} "
                          f"and multiply the formula by 1e{k}")
    spread = top * float(np.std(yy / top)) if top > 0 else 0.0
    least = _F64_TINY if loss == "mae" else TINY_SPREAD
    if 0.0 < spread < least:
        k = -math.floor(math.log10(spread))
        raise SearchError(f"{where}: y varies by only {spread:.3g} (its standard deviation): "
                          f"the search's {'absolute' if loss == 'mae' else 'squared'} errors "
                          f"of that size underflow float64 (below {least:.2g}), so every "
                          f"formula near y, a constant too, would score 0; rescale y: search "
                          f"y * 1e{k} and divide the formula by 1e{k}")
    _warn_columns(X, limit, where, names)


def _warn_columns(X: np.ndarray, limit: float, where: str,
                  names: Sequence[str] | None) -> None:
    """Warn which columns of ``X`` are past ``limit`` or, not all 0, below
    :data:`TINY_SPREAD` in magnitude (see :func:`check_scale`)."""
    tops = np.abs(X.astype(np.float64)).max(axis=0) if X.size else np.zeros(0)
    label = list(names) if names is not None else [f"x{j}" for j in range(X.shape[1])]
    odd = [f"{label[j]} (|{t:.3g}|)" for j, t in enumerate(tops.tolist())
           if t > limit or 0.0 < t < TINY_SPREAD]
    if odd:
        warnings.warn(f"{where}: X's column(s) {', '.join(odd)} lie past float64's squares "
                      f"(products of them overflow past {limit:.2g} or underflow below "
                      f"{TINY_SPREAD:.2g}, and a formula doing so scores inf or loses them); "
                      f"rescale X (each column to about 1) to search them fully",
                      stacklevel=user_stacklevel(2))


def input_names(columns: Sequence[Any]) -> tuple[str, ...]:
    """Usable input names for ``columns`` (any names: a DataFrame's columns), in order: each
    one as it is where it can be (an ASCII identifier that is not a Python keyword, a formula
    function or number name, or a name the fitness kernel uses: ``cand p t l``, C++ keywords),
    else made one: accents dropped, other characters outside ``[A-Za-z0-9_]`` as ``_``, no
    leading ``_``, an ``x`` before a leading digit, a ``_`` after a keyword or reserved name,
    ``x{j}`` for one left empty (or not a str), ``_2``, ``_3``... after a repeated name::

        input_names(["mass (kg)", "int", "", "a", "a"])   # ('mass_kg', 'int_', 'x2', 'a', 'a_2')
    """
    out: list[str] = []
    for j, c in enumerate(columns):
        text = unicodedata.normalize("NFKD", c).encode("ascii", "ignore").decode() \
            if isinstance(c, str) else ""
        n = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", text)).strip("_") or f"x{j}"
        if n[0].isdigit():
            n = "x" + n
        if keyword.iskeyword(n) or n in RESERVED_NAMES or n in KERNEL_NAMES:
            n += "_"
        base, k = n, 2
        while n in out:
            n, k = f"{base}_{k}", k + 1
        out.append(n)
    return tuple(out)


def data_names(X: Any, names: Sequence[str] | None, where: str) -> Sequence[str] | None:
    """The input names of a search on ``X``: ``names`` when given (one the fitness kernel
    cannot take is a SearchError with the fix), else a DataFrame's string column names through
    :func:`input_names` (warning about the renamed), else None (``x0, x1, ...``)."""
    if names is not None:
        if not isinstance(names, str) and isinstance(names, Sequence):
            bad = [n for n in names if isinstance(n, str) and n in KERNEL_NAMES]
            if bad:
                raise SearchError(f"{where}: names=: {bad[0]!r} is a name the fitness kernel "
                                  f"uses (cand, p, t, l or a C++ keyword); pick another, or "
                                  f"use numptx.search.prepare.input_names(names) "
                                  f"({list(input_names(names))!r})")
        return names
    columns = getattr(X, "columns", None)         # pandas (no import): string names only
    if columns is None or not all(isinstance(c, str) for c in columns):
        return None
    mapped = input_names(list(columns))
    warn_renamed(list(columns), mapped, where, stacklevel=6)
    return mapped


def warn_renamed(columns: Sequence[Any], mapped: Sequence[str], where: str,
                 stacklevel: int) -> None:
    """Warn (``UserWarning``, at the user's line: the first frame outside numptx at least
    ``stacklevel`` out, as ``warnings.warn`` counts them here) which of ``columns``
    :func:`input_names` renamed (``mapped``); nothing when none was."""
    renamed = [f"{c!r} as {n!r}" for c, n in zip(columns, mapped) if c != n]
    if renamed:
        warnings.warn(f"{where}: X's columns {', '.join(renamed)} (input names are ASCII "
                      f"identifiers the formula and the kernel can use; pass names= to choose "
                      f"them)", stacklevel=user_stacklevel(stacklevel))


def resolve_fitting(cfg: SearchOptions, loss: str, y: np.ndarray, device: str,
                    given: dict) -> SearchOptions:
    """The options with the constant fitting left to the search (None / "auto") filled in:
    ``linear_scaling`` on for mse and rmse when y varies; ``fit_method`` "lm" on the CPU for
    a least-squares loss (mse, rmse, pearson), else "es"; under lm, ``input_weights`` on and
    ``fit_top`` :func:`fit_top_lm` unless given (``given``: the options as passed); and
    ``variation="auto"`` by the training rows (:func:`~numptx.search.config.variation_for`),
    so a checkpoint holds the variation that ran."""
    change: dict[str, Any] = {}
    if cfg.variation == "auto":
        change["variation"] = variation_for("auto", len(y))
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
