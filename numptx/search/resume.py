"""Resuming a saved search: :func:`resume` (the public call) and :func:`restore` (a checkpoint
file back into a running :class:`~numptx.search.loop.Search`)::

    from numptx import search
    result = search.regress(X, y, ops=["add", "mul"], generations=20)
    result.save("run.nxck")
    result = search.resume("run.nxck", generations=30)     # 30 more, exactly as if uninterrupted
"""
from __future__ import annotations

import base64
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

from .checkpoint import CheckpointError, decode_array, decode_program, programs_from, read
from .evaluate import Evaluator
from .genes import Genes, SearchError
from .loop import Candidate, Generation, Result, Search, check_config, check_int, site_genes

_KINDS = ("regress", "map_elites", "evolve")

__all__ = ["resume", "restore"]


def resume(path: Any, *, generations: int | None = None, device: str = "auto",
           executor: Executor | None = None, per_module: int | None = None,
           progress: bool | Callable[[Generation], Any] = False,
           template: Any = None, fitness: Callable | None = None,
           descriptors: Sequence[Any] | None = None) -> Result:
    """Continue the search saved at ``path`` (:meth:`Result.save`) for ``generations`` more
    (default: what is left of the original ``generations``). Runs of ``regress`` and
    ``map_elites`` carry their data; an ``evolve`` run needs ``template`` and ``fitness`` again,
    a MAP-Elites run with user descriptors needs ``descriptors`` again. A missing, corrupted or
    mismatched file raises :class:`~numptx.search.checkpoint.CheckpointError` naming it."""
    search = restore(path, device=device, executor=executor, per_module=per_module,
                        template=template, fitness=fitness, descriptors=descriptors)
    more = (max(0, search.cfg["generations"] - len(search.history)) if generations is None
            else check_int("generations", generations, 0))
    search.cfg["generations"] = len(search.history) + more
    return search.run(more, progress)


def restore(path: str | os.PathLike, *, device: str = "auto", executor: Any = None,
            per_module: int | None = None, template: Any = None, fitness: Any = None,
            descriptors: Any = None) -> Any:
    """The search (``loop.Search``) saved at ``path``, ready to run on; every fault is a
    :class:`CheckpointError` (or a :class:`SearchError` for a missing argument) naming it."""
    spath = os.fspath(path)
    st = read(spath)
    try:
        kind = st["kind"]
        if kind not in _KINDS:
            raise CheckpointError(f"checkpoint {spath!r}: field kind={kind!r}: not one of "
                                  f"{', '.join(_KINDS)}", path=spath)
        genes = Genes.from_dict(st["genes"])
        cfg = dict(st["config"])
        cfg.pop("user_descriptors", None)
        if descriptors is not None:
            cfg["descriptors"] = tuple(descriptors)
        elif "user_descriptors" in st["config"]:
            raise SearchError(f"resume: checkpoint {spath!r} uses user descriptors "
                              f"{st['config']['user_descriptors']}; pass descriptors= again")
        cfg = {k: (tuple(v) if k in ("init_length", "descriptors") else v)
               for k, v in cfg.items()}
        try:                   # the same checks as the API's (a hand-edited file, say)
            cfg = check_config(kind, **cfg)
        except SearchError as e:
            raise CheckpointError(f"checkpoint {spath!r}: field config: {e}", path=spath) \
                from None
        if kind == "evolve":
            if template is None or fitness is None:
                raise SearchError(f"resume: checkpoint {spath!r} is an evolve() run: pass "
                                  f"template= and fitness= again")
            e = st["evolve"]
            name, s, genes2 = site_genes(template, e["site"], e["select"], genes.ops,
                                          genes.constants)
            if genes2 != genes:
                raise SearchError(f"resume: template site {name!r} does not match checkpoint "
                                  f"{spath!r} (inputs {genes2.names} vs {genes.names})")
            user = {"template": template, "site": name, "site_obj": s, "select": e["select"],
                    "fitness": fitness, "per_module": e["per_module"], "executor": executor}
            search = Search(kind, genes, cfg, st["seed"], user=user)
        else:
            d = st["data"]
            ev = Evaluator(decode_array(d["X"]), decode_array(d["y"]), loss=d["loss"],
                           names=d["names"], device=device, executor=executor,
                           per_module=per_module, where="resume")
            search = Search(kind, genes, cfg, st["seed"], evaluator=ev)
        search.rng.bit_generator.state = st["rng"]

        def cands(rows):
            progs = programs_from([r[0] for r in rows], spath)
            return [Candidate(p, float(r[1]), genes, bool(r[2])) for p, r in zip(progs, rows)]
        search.population = cands(st["population"])
        if kind != "map_elites" and st["history"] and \
                len(search.population) != cfg["population"]:
            raise CheckpointError(f"checkpoint {spath!r}: field population holds "
                                  f"{len(search.population)} candidates; the run's population "
                                  f"is {cfg['population']}", path=spath)
        search.archive = {tuple(r[0]): c for r, c in
                          zip(st["archive"], cands([r[1:] for r in st["archive"]]))}
        search.best = cands([st["best"]])[0] if st["best"] else None
        search.history = [Generation(*g) for g in st["history"]]
        search.evaluated, search.children_made = st["evaluated"], st["children_made"]
        search.seconds = st["seconds"]
        search.improved_at, search.restarts = st["improved_at"], st["restarts"]
        _restore_memo(search, st, spath)
    except CheckpointError:
        raise
    except SearchError as e:
        if spath in str(e):
            raise
        raise CheckpointError(f"checkpoint {spath!r}: {e}", path=spath) from None
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise CheckpointError(f"checkpoint {spath!r}: missing or malformed field "
                              f"({type(e).__name__}: {e})", path=spath) from None
    return search


def _restore_memo(search: Search, st: dict, spath: str) -> None:
    """The score cache and the constant-fit memo (older checkpoints: none, and a resumed run
    may then score some programs again)."""
    c = st.get("cache")
    if c is not None:
        raw = base64.b64decode(c["keys"], validate=True)
        losses = decode_array(c["losses"])
        if len(raw) != 16 * len(losses):
            raise CheckpointError(f"checkpoint {spath!r}: field cache: {len(raw)} key bytes for "
                                  f"{len(losses)} losses", path=spath)
        search.cache = {raw[16 * i:16 * i + 16]: float(v) for i, v in enumerate(losses)}
    for k, prog, loss in st.get("fits", ()):
        try:
            p = decode_program(prog)
        except Exception as e:  # noqa: BLE001 - any decoding fault names the file
            raise CheckpointError(f"checkpoint {spath!r}: field fits: a program does not load "
                                  f"({e})", path=spath) from None
        search.fits[base64.b64decode(k, validate=True)] = (p, float(loss))
