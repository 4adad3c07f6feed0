"""Resuming a saved search: :func:`resume` (the public call) and :func:`restore` (a checkpoint
file back into a running :class:`~numptx.search.loop.Search`)::

    from numptx import search
    result = search.regress(X, y, ops=["add", "mul"], generations=20)
    result.save("run.nxck")
    result = search.resume("run.nxck", generations=30)     # 30 more, exactly as if uninterrupted
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

from .. import stack_ptx as sp
from .checkpoint import CheckpointError, path_of, read
from .config import Build, Device, SearchOptions, check_build, check_generations
from .evaluate import (Evaluate, Evaluator, check_evaluate, check_executor, check_per_module,
                       resolve_device)
from .fields import Fields
from .genes import SearchError
from .loop import Candidate, Generation, Result, Search
from .sites import site_genes
from .rescore import user_build
from .scorers import UserFitness

__all__ = ["resume", "restore", "FRONT_MAX"]

#: entries a checkpoint's front may hold: one per complexity, and a program's complexity is
#: at most its ops and their operands (``max_length`` ops of at most 3 operands each)
FRONT_MAX = 4 * sp.Limits().max_steps


def resume(path: Any, *, generations: int | None = None, device: Device = "auto",
           executor: Executor | None = None, per_module: int | None = None,
           progress: bool | Callable[[Generation], Any] = False,
           template: Any = None, fitness: Callable | None = None,
           descriptors: Sequence[Any] | None = None, max_bytes: int | None = None,
           evaluate: Evaluate | None = None, build: Build | None = None) -> Result:
    """Continue the search saved at ``path`` (:meth:`Result.save`) for ``generations`` more
    (default: what is left of the original ``generations``). Runs of ``regress`` and
    ``map_elites`` carry their data; an ``evolve`` run needs ``template`` and ``fitness`` again,
    a MAP-Elites run with user descriptors needs ``descriptors`` again (``"learned"``, as
    ``map_elites`` takes it, is accepted and checked against the run's). A missing, corrupted or
    mismatched file raises :class:`~numptx.search.checkpoint.CheckpointError` naming it and
    the field at fault; ``max_bytes`` raises the size a body may inflate to (default
    ``checkpoint.MAX_BODY``, for a checkpoint you wrote with that much data). ``evaluate``:
    how programs are scored (see :func:`~numptx.search.regress`); None: as the run was (its
    checkpoint's ``evaluate``; ``"compile"`` for a checkpoint written before it existed).
    ``build``: the compiled path's build mode (``"auto"``, ``"full"``, ``"fast"``; see
    :func:`~numptx.search.regress` and :func:`~numptx.search.evolve`); None: as the run was
    (its checkpoint's; ``"full"`` for one written before it existed)::

        search.resume("evolve.nxck", template=tmpl, fitness=fit, build="full")
    """
    search = restore(path, device=device, executor=executor, per_module=per_module,
                     template=template, fitness=fitness, descriptors=descriptors,
                     max_bytes=max_bytes, evaluate=evaluate, build=build)
    done = len(search.history)
    more = (max(0, search.cfg.generations - done) if generations is None
            else check_generations(generations, done))
    search.cfg = search.cfg.replace(generations=done + more)
    return search.run(more, progress)


def _check_arguments(device: Any, executor: Any, per_module: Any, template: Any,
                     fitness: Any, descriptors: Any, evaluate: Any, build: Any = None) -> str:
    """resume's own arguments, checked before the file is read (as evolve checks them); the
    device resolved."""
    if evaluate is not None:
        check_evaluate(evaluate, "resume")
    if build is not None:
        check_build(build, "resume")
    device = resolve_device(device)
    check_executor(executor, "resume")
    if template is not None and getattr(template, "sites", None) is None:
        raise SearchError(f"resume: template={template!r} has no sites (give the evolve run's "
                          f"nx.CudaTemplate or kernel)")
    check_per_module(per_module, "resume")
    if fitness is not None and not callable(fitness):
        raise SearchError(f"resume: fitness={fitness!r} is not callable (it takes the built "
                          f"packs and returns one score per candidate)")
    if descriptors is not None and (isinstance(descriptors, (str, bytes))
                                    or not isinstance(descriptors, Sequence)) \
            and descriptors != "learned":
        raise SearchError(f"resume: descriptors={descriptors!r}: give a sequence of descriptor "
                          f"names or Descriptor tuples")
    return device


def restore(path: str | os.PathLike, *, device: str = "auto", executor: Any = None,
            per_module: int | None = None, template: Any = None, fitness: Any = None,
            descriptors: Any = None, max_bytes: int | None = None,
            evaluate: Evaluate | None = None, build: Build | None = None) -> Search:
    """The search (``loop.Search``) saved at ``path``, ready to run on. Every field is checked
    (:class:`numptx.search.fields.Fields`) before anything is built; every fault is a
    :class:`CheckpointError` naming the field (or a :class:`SearchError` for a bad or missing
    argument)."""
    device = _check_arguments(device, executor, per_module, template, fitness, descriptors,
                              evaluate, build)
    if descriptors == "learned":         # as map_elites takes it: the learned axes alone
        descriptors = ("learned",)
    spath = path_of(path, "resume")
    f = Fields(read(spath, max_bytes=max_bytes), spath)
    kind = f.keys()
    genes = f.genes()
    cfg = f.config(kind, descriptors)
    seed, rng = f.seed(), f.rng_state()
    history = f.history(cfg)
    counters = f.counters(len(history))
    progs = f.programs(genes, cfg)
    rows = f.list_("population", f.st["population"], cfg.population)
    population = [progs.row(f"population[{i}]", r) for i, r in enumerate(rows)]
    if kind != "map_elites" and history:
        _check_size(f, len(population), cfg)
    archive = _archive_rows(f, progs, kind)
    best = None if f.st["best"] is None else progs.row("best", f.st["best"])
    if history and best is None:
        f.fail("best", f"null after {len(history)} generations")
    cache, fits = f.cache(), f.fits(progs)
    # the Pareto front (numptx.search.front): a checkpoint written before it has none
    front = [progs.row(f"front[{i}]", r) for i, r in
             enumerate(f.list_("front", f.st.get("front", []), FRONT_MAX))]
    for i, (_, loss, _) in enumerate(front):
        if not abs(loss) < float("inf"):
            f.fail(f"front[{i}].loss", f"{loss}: a front holds finite losses only")
    try:
        if kind == "evolve":
            if evaluate == "interpret":
                raise SearchError("resume: evaluate='interpret': an evolve() run's fitness "
                                  "scores built packs; use 'auto' or 'compile'")
            search = _evolve_search(f, genes, cfg, seed, template, fitness, executor, build)
        else:
            d = f.data(genes)
            ev = Evaluator(d["X"], d["y"], loss=d["loss"], names=d["names"], device=device,
                           executor=executor, per_module=per_module, where="resume",
                           evaluate=d["evaluate"] if evaluate is None else evaluate,
                           linear_scaling=bool(cfg.linear_scaling),
                           build=d["build"] if build is None else build)
            search = Search(kind, genes, cfg, seed, evaluator=ev)
    except SearchError as e:       # the data's faults (the arguments are checked above)
        if spath in str(e):
            raise
        raise CheckpointError(f"checkpoint {spath!r}: {e}", path=spath) from None
    try:
        search.rng.bit_generator.state = rng
    except Exception as e:  # noqa: BLE001 - any fault of a (checked) state names the field
        f.fail("rng", f"not a PCG64 state ({type(e).__name__}: {e})")
    search.population = [Candidate(p, v, genes, fit) for p, v, fit in population]
    search.island_sizes = f.islands(cfg, len(population))
    search.archive = _archive(f, search, archive)
    search.best = None if best is None else Candidate(best[0], best[1], genes, best[2])
    search.front.restore([Candidate(p, v, genes, fit) for p, v, fit in front])
    search.history = [Generation(*g) for g in history]
    for k, v in counters.items():
        setattr(search, k, v)
    search.cache, search.fits = cache, fits
    table, hits = f.semantic()
    if search.semantic is not None:
        search.semantic.table, search.semantic.hits = table, hits
    _restore_screen(f, search)
    _restore_learned(f, search)
    return search


def _restore_learned(f: Fields, search: Search) -> None:
    """MAP-Elites' learned basis (``learned``), when the run's descriptors are learned."""
    st = f.st.get("learned")
    if (st is None) != (search.learned is None):
        f.fail("learned", "missing for a run of learned descriptors" if st is None else
               "present for a run whose descriptors are not learned")
    if st is None or search.learned is None:
        return
    from .checkpoint import decode_array
    try:
        if not isinstance(st, dict) or set(st) != {"mean", "basis", "low", "high", "fitted_at"}:
            raise ValueError("not an object of mean, basis, low, high and fitted_at")
        search.learned.restore(st, decode_array, len(search.history))
    except (ValueError, TypeError, KeyError, CheckpointError) as e:
        f.fail("learned", str(e))


def _restore_screen(f: Fields, search: Search) -> None:
    """The predictor's model and state (``screen``), when the run has one."""
    st = f.st.get("screen")
    if (st is None) != (search.screen is None):
        f.fail("screen", "missing for a run with a predictor" if st is None else
               "present for a run without a predictor (config.predictor is false)")
    if st is None or search.screen is None:
        return
    from .checkpoint import decode_array
    from .screening import restore_screen
    try:
        restore_screen(search.screen, st, len(search.history), decode_array)
    except Exception as e:  # noqa: BLE001 - any fault of the saved model names the field
        f.fail("screen", f"not a saved predictor ({type(e).__name__}: {e})")


def _check_size(f: Fields, n: int, cfg: SearchOptions) -> None:
    """A population after a generation holds ``cfg.population`` candidates; under
    ``survivors="plus"`` (islands included) it may hold fewer, down to 1: keep-best keeps
    distinct programs only, and a small search space (few ops, a short ``max_length``) or an
    island of few has fewer to keep."""
    plus = cfg.survivors == "plus"
    if n > cfg.population or n < 1 or (n < cfg.population and not plus):
        f.fail("population", f"holds {n} candidates; the run's population is {cfg.population}"
                             + (" (at most, and at least 1: survivors='plus' keeps distinct "
                                "programs only)" if plus else ""))


def _evolve_search(f: Fields, genes: Any, cfg: SearchOptions, seed: int, template: Any,
                   fitness: Any, executor: Any, build: Any = None) -> Search:
    if template is None or fitness is None:
        raise SearchError(f"resume: checkpoint {f.spath!r} is an evolve() run: pass "
                          f"template= and fitness= again")
    e = f.evolve()
    name, s, genes2 = site_genes(template, e["site"], e["select"], genes.ops, genes.constants)
    if genes2 != genes:
        raise SearchError(f"resume: template site {name!r} does not match checkpoint "
                          f"{f.spath!r} (inputs {genes2.names} vs {genes.names})")
    # a template with no fast build (a numba kernel): the argument's fault, not the file's
    fix = (f"pass build='full' to resume {f.spath!r}" if build is not None else
           f"checkpoint {f.spath!r} is a build='fast' run: pass build='full' to resume it at "
           f"the template's options")
    user = UserFitness(template=template, site=name, site_obj=s, select=e["select"],
                       fitness=fitness, per_module=e["per_module"], executor=executor,
                       build=user_build(template, name, e["build"] if build is None else build,
                                        "resume", fix))
    return Search("evolve", genes, cfg, seed, user=user)


def _archive_rows(f: Fields, progs: Any, kind: str) -> list:
    """The archive's rows ([cell, program, loss, fitted]); only MAP-Elites has one."""
    rows = f.list_("archive", f.st["archive"], 1 << 62)     # cells: checked in _archive
    if rows and kind != "map_elites":
        f.fail("archive", f"{len(rows)} cells in a {kind} checkpoint (only map_elites has one)")
    out = []
    for i, r in enumerate(rows):
        f.list_(f"archive[{i}]", r, 4, 4)
        out.append((r[0], *progs.row(f"archive[{i}]", r[1:])))
    return out


def _archive(f: Fields, search: Search, rows: list) -> dict:
    """The archive, each cell checked against the run's descriptors (one bin per axis)."""
    bins = [d.bins for d in search.descriptors]
    out: dict[tuple, Candidate] = {}
    for i, (cell, prog, loss, fitted) in enumerate(rows):
        field = f"archive[{i}].cell"
        f.list_(field, cell, len(bins), len(bins))
        at = tuple(f.int_(field, c, 0, b - 1) for c, b in zip(cell, bins))
        if at in out:
            f.fail(field, f"{list(at)} is filed twice")
        if not loss < float("inf"):
            f.fail(f"archive[{i}].loss", f"{loss}: an archive holds finite losses only")
        out[at] = Candidate(prog, loss, search.genes, fitted)
    return out
