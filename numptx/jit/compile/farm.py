"""A compile farm on Dask: words in, cubins out.

Give ``build_many``, ``pack_many``, ``nx.fitness`` or the search a Dask ``Client`` (or
``client.get_executor()``) as ``executor=`` and the builds run on its workers, which need
``pip install numptx`` and no GPU or driver (nvJitLink assembles; docs/farm.md)::

    from numptx.jit.compile.farm import connect
    client = connect("tcp://scheduler:8786")            # FarmError when it cannot be reached
    packs = tmpl.pack_many("f", programs, select="cand", executor=client)

What travels:

- the template (its PTX, entry, architecture, options: a :class:`TemplateSpec`) once per
  worker, broadcast with ``client.scatter`` and kept by each worker process under its key;
- per task (:class:`Task`) only the stubs' source: a Stack PTX program as its encoded words
  (8 bytes a word), a pack's candidates likewise (:class:`WirePack`), anything else (a formula,
  PTX text) as its resolved stub text; the whole rendered PTX only where nothing smaller says
  it (a pack with run-time constants);
- back: the cubin and the seconds the worker took.

The worker renders exactly what the client would (the same :class:`~numptx.inject.PtxInject`
rendering, the same packed stubs) and links with the same options, so cubins are byte for byte
the local ones. A worker whose numptx or nvJitLink differs from the client's refuses the task
with a :class:`FarmError` naming both versions. A worker that dies mid-batch costs its tasks a
retry elsewhere (Dask reschedules them); each result is taken once.
"""
from __future__ import annotations

import logging
import re
import sys
import threading
import time
import weakref
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..._version import __version__
from ...errors import NumptxError
from ...files import digest
from ...inject import PtxInject, Site
from .nvjitlink import nvjitlink_version, ptx_to_cubin
from ..populations.pack_kernels import LayoutTarget, dispatch_text, merge_kernels, packed_runs
from ..templates.stubs import resolve_stub

__all__ = ["FarmError", "TemplateSpec", "Task", "WirePack", "Wireable", "Farm", "as_farm",
           "connect", "run_task", "template_spec", "task_of", "worker_templates"]

log = logging.getLogger(__name__)


class FarmError(NumptxError):
    """A farm that cannot build: a scheduler out of reach, a worker with another numptx, a
    template a worker cannot rebuild, workers that die. ``worker`` names the worker (or
    None)."""

    def __init__(self, message: str, *, worker: str | None = None):
        self.worker = worker
        super().__init__(message)


@dataclass(frozen=True)
class TemplateSpec:
    """What a worker rebuilds a template from (sent once per worker, kept under ``key``)."""
    key: str
    ptx: str
    entry: str
    sites: tuple[str, ...]
    arch: str
    link_options: tuple[str, ...]
    bind: bool
    strict: bool
    version: str
    nvjitlink: str


@dataclass(frozen=True)
class WirePack:
    """A pack's candidates on the wire: each ``("w", words)`` (a Stack PTX encoding's bytes),
    ``("g", text)`` (the text numptx compiled for it), ``("t", text)`` (its resolved raw stub
    text) or None (left out); ``select`` the selector."""
    select: str
    strict: bool
    items: tuple


@dataclass(frozen=True)
class Task:
    """One build: per site ``("t", text)``, ``("w", words)`` or a :class:`WirePack`;
    ``runs`` the pack's kernels (``layout="kernels"``) or None; ``options`` the link options
    where they are not the template's (``build="fast"``); ``ptx`` the whole text where nothing
    smaller says it."""
    sites: tuple
    runs: tuple | None = None
    kernels: bool = False
    site: str = ""
    options: tuple[str, ...] | None = None
    ptx: str | None = None


@runtime_checkable
class Wireable(Protocol):
    """A stub that travels as its source (a :class:`numptx.jit.populations.pack.Population`)."""

    def wire(self, site: Site) -> WirePack | None: ...


def template_spec(t: Any) -> TemplateSpec:
    """The :class:`TemplateSpec` of template ``t``."""
    nvj = ".".join(map(str, nvjitlink_version()))
    opts = tuple(t.link_options)
    key = digest(t.digest, t.entry, t.arch, str(len(opts)), *opts, str(t.bind), str(t.strict),
                 __version__, nvj, size=16)
    return TemplateSpec(key, t.ptx, t.entry, tuple(t.sites), t.arch, opts, bool(t.bind), bool(t.strict),
                        __version__, nvj)


def words_of(stub: Any) -> bytes | None:
    """A Stack PTX encoding's bytes (what a worker compiles again), or None."""
    if isinstance(stub, np.ndarray) and stub.ndim == 1 and stub.dtype == np.uint64:
        return np.ascontiguousarray(stub).tobytes()
    return None


def task_of(t: Any, stubs: Any, v: Any) -> tuple[Any, Task]:
    """(the template, the :class:`Task`) of variant ``v`` of target ``t`` made from the stub
    mapping ``stubs`` (as ``build_many`` got it)."""
    layout = isinstance(t, LayoutTarget)
    tmpl = t.template if layout else t
    options = tuple(t.link_options) if layout else None
    given = stubs or {}
    out = []
    for j, (name, site) in enumerate(tmpl.sites.items()):
        value = given.get(name)
        if isinstance(value, Wireable):
            w = value.wire(site)
            if w is None:
                return tmpl, Task((), options=options, ptx=v.ptx)
            out.append(w)
            continue
        b = words_of(value)
        out.append(("w", b) if b is not None else ("t", str.__str__(v.stubs[j])))
    runs = tuple(v.runs) if layout else None
    return tmpl, Task(tuple(out), runs, layout and t.layout == "kernels",
                      t.site if layout else "", options)


def texts_task(stubs: Any) -> Task:
    """The :class:`Task` of stub texts in site order (a constant-patch proof's trials)."""
    return Task(tuple(("t", str.__str__(s)) for s in stubs))


# ---- the worker side -------------------------------------------------------------------------
_TEMPLATES: dict[str, PtxInject] = {}
_TEMPLATES_LOCK = threading.Lock()


def _worker_name() -> str:
    try:
        from distributed import get_worker
        return get_worker().address
    except (ImportError, ValueError):
        return "this process"


def worker_templates() -> list[str]:
    """The keys of the templates this process keeps (run on a worker: ``client.run``)."""
    return sorted(_TEMPLATES)


def _template(spec: TemplateSpec) -> PtxInject:
    nvj = ".".join(map(str, nvjitlink_version()))
    if (spec.version, spec.nvjitlink) != (__version__, nvj):
        who = _worker_name()
        raise FarmError(f"worker {who} runs numptx {__version__} with nvJitLink {nvj}; the "
                        f"client runs numptx {spec.version} with nvJitLink {spec.nvjitlink}: "
                        f"install the client's (pip install numptx=={spec.version}) on every "
                        f"worker", worker=who)
    inj = _TEMPLATES.get(spec.key)
    if inj is None:
        with _TEMPLATES_LOCK:
            inj = _TEMPLATES.get(spec.key)
            if inj is None:
                try:
                    inj = PtxInject(spec.ptx)
                    got = tuple(inj.sites)
                    if got != spec.sites or not re.search(
                            rf"\.entry\s+{re.escape(spec.entry)}\s*\(", spec.ptx):
                        raise NumptxError(f"it finds sites {list(got)} and kernel "
                                          f"{spec.entry!r} {'not ' * (got == spec.sites)}in "
                                          f"the PTX; the client has sites {list(spec.sites)}")
                except Exception as e:   # noqa: BLE001 - named with the worker
                    who = _worker_name()
                    raise FarmError(f"worker {who} cannot rebuild template {spec.entry!r} "
                                    f"({spec.key[:12]}): {type(e).__name__}: {e}",
                                    worker=who) from None
                _TEMPLATES[spec.key] = inj
    return inj


def _resolved(source: Any, site: Site, strict: bool, packed: bool = False) -> str:
    kind, payload = source
    if kind == "w":
        return str(resolve_stub(np.frombuffer(payload, dtype=np.uint64), site, strict=strict,
                                packed=packed))
    return payload


def render_task(spec: TemplateSpec, task: Task) -> str:
    """The PTX a task stands for, rendered as the client renders it."""
    if task.ptx is not None:
        return task.ptx
    inj = _template(spec)
    sites = list(inj.sites.values())
    base: list[str] = []
    pack_at, pack_texts, pack = None, None, None
    for j, (source, site) in enumerate(zip(task.sites, sites)):
        if isinstance(source, WirePack):
            pack_at, pack = j, source
            pack_texts = [None if s is None else _resolved(s, site, source.strict, True)
                          for s in source.items]
            base.append("")
        else:
            base.append(_resolved(source, site, spec.strict))
    if pack is None:
        return inj.render(base, bind=spec.bind)
    site = sites[pack_at]
    if task.runs is None:                       # one function, as Population.stub packs
        stubs = [dispatch_text(site, pack.select, pack_texts)]
    else:                                       # a layout, as Population.kernel_stubs packs
        generated = [s is not None and s[0] in "wg" for s in pack.items]
        stubs = packed_runs(site, pack.select, pack_texts, generated, task.runs)[0]
    ptxs = []
    for stub in stubs:
        texts = list(base)
        texts[pack_at] = stub
        ptxs.append(inj.render(texts, bind=spec.bind))
    return merge_kernels(ptxs, spec.entry, site.name) if task.kernels else ptxs[0]


def run_task(spec: TemplateSpec, task: Task) -> tuple[bytes, float]:
    """The unit of work of a farm (on a worker): ``(cubin, seconds)``."""
    start = time.perf_counter()
    ptx = render_task(spec, task)
    options = spec.link_options if task.options is None else task.options
    cubin = ptx_to_cubin(ptx, spec.arch, options=options)
    return cubin, time.perf_counter() - start


# ---- the client side -------------------------------------------------------------------------
class Farm:
    """Builds on a Dask client's workers: :meth:`submit` gives a ``concurrent.futures.Future``
    of the cubin (what ``build_many`` waits on)."""

    def __init__(self, client: Any):
        self.client = client
        self.executor = client.get_executor(pure=False)
        self._specs: dict[str, Any] = {}
        self._lock = threading.Lock()

    def template(self, t: Any) -> Any:
        """The scattered :class:`TemplateSpec` of ``t`` (broadcast to every worker once)."""
        spec = template_spec(t)
        with self._lock:
            fut = self._specs.get(spec.key)
            if fut is None or fut.status != "finished":     # new, or lost with its workers
                status = getattr(self.client, "status", "running")
                if status != "running":
                    raise FarmError(f"the Dask client is not connected to its scheduler "
                                    f"(status {status!r}), so template {t.entry!r} cannot be "
                                    f"sent: connect again (numptx.jit.compile.farm.connect(address)) "
                                    f"or pass another executor")
                try:
                    fut = self.client.scatter(spec, broadcast=True, hash=False)
                except Exception as e:   # noqa: BLE001 - a scheduler gone, no workers
                    raise FarmError(f"the Dask scheduler did not take template {t.entry!r}: "
                                    f"{type(e).__name__}: {e}") from e
                self._specs[spec.key] = fut
        return fut

    def submit(self, t: Any, stubs: Any, v: Any) -> Future:
        tmpl, task = task_of(t, stubs, v)
        return self._send(tmpl, task)

    def submit_texts(self, t: Any, stubs: Any) -> Future:
        return self._send(t, texts_task(stubs))

    def _send(self, tmpl: Any, task: Task) -> Future:
        fut = self.executor.submit(run_task, self.template(tmpl), task)
        out: Future = Future()

        def done(f: Future) -> None:
            try:
                out.set_result(f.result()[0])
            except NumptxError as e:
                out.set_exception(e)
            except BaseException as e:   # noqa: BLE001 - a dead worker, a lost scheduler
                err = FarmError(f"the farm lost the task: {type(e).__name__}: {e}")
                err.__cause__ = e
                out.set_exception(err)
        fut.add_done_callback(done)
        return out


_FARMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def as_farm(executor: Any) -> Farm | None:
    """A :class:`Farm` for a Dask ``Client`` or ``ClientExecutor`` (which works through the
    default client, the last one made), else None. Dask is looked for only when imported."""
    mod = sys.modules.get("distributed")
    if mod is None or executor is None:
        return None
    if isinstance(executor, mod.Client):
        client = executor
    elif isinstance(executor, mod.client.ClientExecutor):
        client = mod.default_client()
    else:
        return None
    farm = _FARMS.get(client)
    if farm is None:
        farm = _FARMS[client] = Farm(client)
    return farm


def connect(address: str, *, timeout: float = 10.0) -> Any:
    """A Dask ``Client`` of the scheduler at ``address``; :class:`FarmError` when it cannot be
    reached within ``timeout`` seconds.

    >>> client = connect("tcp://10.0.0.5:8786")          # doctest: +SKIP
    """
    try:
        from distributed import Client
    except ImportError:
        raise FarmError("the compile farm runs on Dask: pip install 'numptx[farm]' (dask and "
                        "distributed)") from None
    try:
        return Client(address, timeout=timeout)
    except (OSError, TimeoutError) as e:
        raise FarmError(f"cannot reach the Dask scheduler at {address!r} within {timeout:g} s "
                        f"({type(e).__name__}: {e}); start one with `dask scheduler` and "
                        f"workers with `dask worker {address}`") from None
