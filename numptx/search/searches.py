"""The search functions: :func:`regress` (symbolic regression), :func:`map_elites` and
:func:`evolve` (any template's site). Each checks its options (:mod:`numptx.search.config`),
sets up the data or the template (:mod:`numptx.search.prepare`) and runs a
:class:`numptx.search.loop.Search`::

    import numpy as np
    from numptx import search
    X = np.random.default_rng(0).uniform(-1, 1, (200, 1)).astype(np.float32)
    r = search.regress(X, X[:, 0] ** 2 + X[:, 0], ["add", "mul"], population=200,
                       generations=20, seed=0)
    r.best.formula
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

from .config import (Device, FitMethod, Kind, Loss, ModelSelection, Survivors, Variation,
                     check_seed)
from .evaluate import Build, Evaluate
from .loop import Search
from .prepare import prepare, prepare_evolve
from .results import Generation, Result

__all__ = ["regress", "map_elites", "evolve"]


def _regression_search(kind: Kind, X: Any, y: Any, ops: Sequence[str], *, seed: Any,
                       **kw: Any) -> Search:
    """A ``kind`` search on ``X``, ``y``, set up by :func:`numptx.search.prepare.prepare`."""
    genes, cfg, ev = prepare(kind, X, y, ops, **kw)
    return Search(kind, genes, cfg, check_seed(seed), evaluator=ev)


def regress(X: Any, y: Any, ops: Sequence[str] = ("add", "sub", "mul", "div"), *,
            population: int = 1000, generations: int = 100, seed: int | None = None,
            loss: Loss = "mse", names: Sequence[str] | None = None, dtype: str | None = None,
            constants: Sequence[float] | None = None, tournament: int | None = None,
            elitism: int | None = None, parsimony: float = 0.0, crossover: float = 0.5,
            mutation: float = 0.9, max_length: int = 64, init_length: tuple | None = None,
            fit_top: int | None = None, fit_steps: int = 12, fit_trials: int = 4,
            target: float | None = None, time_limit: float | None = None,
            restart: int | None = None, revary: int = 1, device: Device = "auto",
            executor: Executor | None = None, per_module: int | None = None,
            pipeline: bool = True, evaluate: Evaluate = "auto",
            semantic_dedup: int | None = None, linear_scaling: bool | None = None,
            fit_method: FitMethod = "auto", input_weights: bool | None = None,
            survivors: Survivors = "plus", islands: int | None = None, migration: int = 10,
            build: Build = "auto", predictor: Any = False, screen: float = 0.25,
            explore: float = 0.05, model_selection: ModelSelection = "best",
            variation: Variation = "auto", progress: bool | Callable[[Generation], Any] = False) -> Result:
    """Symbolic regression: find a program over the columns of ``X`` (named ``x0..``, or ``names``)
    whose output fits ``y`` under ``loss`` (``mse``, ``mae``, ``rmse``, ``pearson``). Tournament
    selection of size ``tournament`` (default 5, or the population when smaller) with ``elitism``
    elites (default 1 %; ``survivors="children"``); ``parsimony`` adds that much loss per node of
    complexity in selection (:mod:`numptx.search.front`); ``survivors``: ``"plus"`` (the next
    population is the best ``population`` distinct programs of the parents and the children,
    Operon's keep-best) or ``"children"`` (the elites and the children); ``crossover``/``mutation``
    are the rates. ``islands=k`` splits the population into k subpopulations (each selects and keeps
    its best on its own; every ``migration`` generations each sends copies of its 2 best programs to
    the next, replacing its worst; :class:`numptx.search.strategies.Islands`; needs
    ``survivors="plus"``; None: one island per 100 programs, at most 4, e.g. 4 for a population of
    500; 1 under ``"children"``). ``linear_scaling`` (None: on for mse and rmse when y varies)
    scores a program by its best a + b * program, written into the programs returned
    (:mod:`numptx.search.scaling`). The ``fit_top`` best new programs of each generation get their
    constants fitted by ``fit_method``: ``"lm"`` (Levenberg–Marquardt on the CPU interpreter,
    ``fit_steps`` rounds; :mod:`numptx.search.least_squares`; default ``fit_top`` every child),
    ``"es"`` (:mod:`numptx.search.constants`: ``fit_steps`` rounds of ``fit_trials`` trials; default
    ``fit_top`` population // 128, from 2 to 64) or ``"auto"`` (lm on the CPU for mse, rmse and
    pearson, else es); 0: off. ``input_weights`` (None: on under lm) makes each input gene
    ``const(1.0) x mul``. Stops: ``generations``, a loss <= ``target``, or ``time_limit`` seconds:
    no generation starts that would end past it with the finishing after it (re-scoring, scaling
    written, front; estimated by ``Search.finish_estimate``); the set-up (0.15 s in a new process),
    the first generation and one longer than the last stay outside (population 1000, CPU, 5 seeds,
    ``time_limit=3``: none past it at 20 or 5,000 rows, before up to 0.9 s; docs/search.md).
    ``restart=k``: after k generations without a 1 % better best, start again from a random
    population (the best found stays the result's; a guard against a population stuck on an
    approximation). ``revary=k``: a child whose canonical key was scored before, or made earlier in
    the generation, is mutated again at a gene that feeds its output, up to k times, before it is
    kept as a duplicate (0: kept at once; see :mod:`numptx.search.breed`). ``device``: ``auto`` (a
    GPU when present), ``cpu`` (the emulator) or ``gpu``; ``executor`` (any
    ``concurrent.futures.Executor``) builds the GPU modules or spreads the CPU emulation.
    ``pipeline`` (GPU): each chunk of children is compiled and its modules assembled in threads
    while the next chunk is made (the same losses; False: made first, then built in one batch; a
    process-pool executor never pipelines). ``evaluate``: ``"interpret"`` (the batch interpreter: no
    stub, no emulator, no assembly), ``"compile"`` (each program's stub, emulated on the CPU,
    assembled in modules on a GPU) or ``"auto"`` (the interpreter on the CPU; on a GPU the
    interpreter up to ``GPU_INTERPRET_MAX_ROWS`` rows, the compiled path above); when the
    interpreter scored the run, or semantic dedup ran on fewer probe rows than the data has,
    ``result.best`` is re-scored by the compiled path (``result.rescored``). ``build``: how the
    compiled path's GPU modules are assembled, ``"fast"`` (-Ofc=max, a screening build: the returned
    programs re-scored by the full build, ``result.rescored``), ``"full"`` (-O3) or ``"auto"`` (what
    measured best on the device, ``config.AUTO_BUILD``: full today; :mod:`numptx.search.evaluate`).
    ``semantic_dedup=k``: a new child whose outputs on k probe rows (drawn with the seed) equal a
    scored program's takes its loss (0: off; None: 32 where the probe is cheaper than the scoring,
    see :mod:`numptx.search.semantic`). ``progress``: True prints a line per generation to stderr; a
    callable gets each :class:`Generation`. ``predictor`` (True, ``"ridge"``, ``"mlp"`` or a
    :mod:`numptx.learn` model) learns from every scored child and screens the next: only the
    predicted best ``screen`` share of the new children, and a random ``explore`` share of the rest,
    is scored (:mod:`numptx.search.screening`). ``model_selection`` picks ``result.model`` from
    ``result.front`` (:mod:`.front`); ``variation``: ``"auto"`` (tree from 100 rows, else
    linear), ``"tree"`` or ``"linear"`` (:mod:`numptx.search.breed`, docs/search.md)."""
    s = _regression_search(
        "regress", X, y, ops, names=names, dtype=dtype, constants=constants, loss=loss,
        device=device, executor=executor, per_module=per_module, seed=seed, pipeline=pipeline,
        evaluate=evaluate, semantic_dedup=semantic_dedup, population=population,
        generations=generations, tournament=tournament, elitism=elitism, parsimony=parsimony,
        crossover=crossover, mutation=mutation, max_length=max_length, init_length=init_length,
        fit_top=fit_top, fit_steps=fit_steps, fit_trials=fit_trials, target=target,
        time_limit=time_limit, restart=restart, revary=revary, linear_scaling=linear_scaling,
        fit_method=fit_method, input_weights=input_weights, survivors=survivors, islands=islands,
        migration=migration, build=build, predictor=predictor, screen=screen, explore=explore,
        model_selection=model_selection, variation=variation)
    return s.run(s.cfg.generations, progress)


def evolve(template: Any, site: Any, fitness: Callable[[list], Sequence[float]], *,
           ops: Sequence[str] = ("add", "sub", "mul", "div"), select: str = "cand",
           population: int = 256, generations: int = 20, seed: int | None = None,
           constants: Sequence[float] | None = None, tournament: int | None = None,
           elitism: int | None = None, parsimony: float = 0.0, crossover: float = 0.5,
           mutation: float = 0.9, max_length: int = 64, init_length: tuple | None = None,
           target: float | None = None, time_limit: float | None = None,
           restart: int | None = None, revary: int = 1, executor: Executor | None = None,
           per_module: int | None = None, evaluate: Evaluate = "auto", build: Build = "auto",
           survivors: Survivors | None = None, predictor: Any = False, screen: float = 0.25,
           explore: float = 0.05, variation: Variation = "linear",
           progress: bool | Callable[[Generation], Any] = False) -> Result:
    """Evolve programs for ``site`` of any ``template`` (``nx.CudaTemplate`` or a numba kernel).

    The site needs a u32 input ``select`` (the candidate index of a packed module), float
    inputs of one type (f32 or f64; in or mod variables) the programs read, and exactly one
    out/mod variable, of that type, for the result (else a SearchError). Each generation the
    new programs (deduplicated) are packed and built (``template.pack_many``, on ``executor``),
    and ``fitness(packs)`` returns one score per candidate in order (lower is better; NaN
    counts as +inf)::

        def fitness(packs):
            scores = []
            for p in packs:          # launch p[(grid, len(p)), block](...) on a GPU, read back
                ...
            return scores
        result = search.evolve(tmpl, "f", fitness, ops=["add", "mul"], population=128)

    ``evaluate``: ``"auto"`` or ``"compile"`` (the same: ``fitness`` scores built packs;
    ``"interpret"`` is a SearchError, there is no data to interpret the programs on).
    ``build``: ``"auto"``/``"full"`` (the template's options: your fitness measures what it
    gets) or ``"fast"`` (packs at -Ofc=max; the best is packed again at the full build and
    scored by ``fitness`` once more, ``result.rescored``; CUDA C++ and PTX templates).
    ``survivors`` (default ``"children"``: a noisy fitness must not keep a lucky score for
    ever; ``"plus"`` as regress). ``predictor`` (with ``survivors="plus"``) screens children
    by their words alone (no data to probe). The other options (selection, rates,
    ``restart``, ``revary``, ``screen``, ``explore``, ``variation``: ``"linear"`` by default,
    as "auto" is without data) are :func:`regress`'s."""
    genes, cfg, user = prepare_evolve(
        template, site, fitness, ops=ops, select=select, constants=constants,
        per_module=per_module, executor=executor, evaluate=evaluate, build=build,
        population=population, generations=generations, tournament=tournament,
        elitism=elitism, parsimony=parsimony, crossover=crossover, mutation=mutation,
        max_length=max_length, init_length=init_length, target=target, time_limit=time_limit,
        restart=restart, revary=revary, survivors=survivors, predictor=predictor,
        screen=screen, explore=explore, variation=variation)
    search = Search("evolve", genes, cfg, check_seed(seed), user=user)
    return search.run(cfg.generations, progress)


def map_elites(X: Any, y: Any, ops: Sequence[str] = ("add", "sub", "mul", "div"), *,
               descriptors: Sequence[Any] = ("length", "op_mix"), bins: int | None = None,
               batch: int = 500, generations: int = 100, seed: int | None = None,
               loss: Loss = "mse", names: Sequence[str] | None = None, dtype: str | None = None,
               constants: Sequence[float] | None = None, parsimony: float = 0.0,
               crossover: float = 0.3, mutation: float = 0.9, max_length: int = 64,
               init_length: tuple | None = None, fit_top: int | None = None, fit_steps: int = 12,
               fit_trials: int = 4, target: float | None = None,
               time_limit: float | None = None, revary: int = 1, device: Device = "auto",
               executor: Executor | None = None, per_module: int | None = None,
               pipeline: bool = True, evaluate: Evaluate = "auto",
               semantic_dedup: int | None = None, linear_scaling: bool | None = None,
               fit_method: FitMethod = "auto", input_weights: bool | None = None,
               build: Build = "auto", predictor: Any = False, screen: float = 0.25,
               explore: float = 0.05, model_selection: ModelSelection = "best",
               variation: Variation = "linear", progress: bool | Callable[[Generation], Any] = False) -> Result:
    """MAP-Elites: an archive keeps the best program of each cell of a behaviour grid; each
    generation makes ``batch`` children of uniformly drawn elites and files each in its cell
    when it beats the cell's elite. ``descriptors``: built-in names (``length``: program length
    over [0, max_length], 8 bins; ``op_mix``: share of non-linear instructions, 5 bins;
    ``inputs``: share of input pushes, 5 bins) or :class:`Descriptor` tuples
    ``(name, fn(program, genes) -> float, low, high, bins)``, or ``"learned"`` alone (two
    axes from the outputs on probe rows, :mod:`numptx.search.learned_cells`); ``bins``
    overrides every axis' count. ``result.archive`` maps cell index tuples to candidates (re-scored by the compiled
    path when the interpreter scored the run, as ``best`` is). Other options as
    :func:`regress` (``variation`` defaults to ``"linear"`` here)."""
    s = _regression_search("map_elites", X, y, ops, names=names, dtype=dtype,
                           constants=constants, loss=loss, device=device, executor=executor,
                           per_module=per_module, seed=seed, pipeline=pipeline,
                           evaluate=evaluate, semantic_dedup=semantic_dedup,
                           population=batch,
                           generations=generations, parsimony=parsimony, crossover=crossover,
                           mutation=mutation, max_length=max_length, init_length=init_length,
                           fit_top=fit_top, fit_steps=fit_steps, fit_trials=fit_trials,
                           target=target, time_limit=time_limit, descriptors=descriptors,
                           bins=bins, elitism=0, revary=revary, model_selection=model_selection,
                           linear_scaling=linear_scaling, fit_method=fit_method,
                           input_weights=input_weights, build=build, predictor=predictor,
                           screen=screen, explore=explore, variation=variation)
    return s.run(s.cfg.generations, progress)

