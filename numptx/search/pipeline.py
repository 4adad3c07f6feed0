"""Pipelined packing: packed modules assemble in threads while the caller makes the next chunk.

::

    from numptx.search.pipeline import PackPipeline, pack_chunks
    with PackPipeline(tmpl, "f", select="cand", per_module=128) as pipe:
        for chunk in chunks:              # stubs, made chunk by chunk on this thread
            pipe.add(chunk)               # each full module goes to a thread at once
            for p in pipe.ready():        # the modules built so far, in order
                launch(p)
        for p in pipe.finish():           # the rest, in order, each as soon as it is built
            launch(p)

    packs = pack_chunks(tmpl, "f", chunks, select="cand", per_module=128)   # all of them

The stubs are cut into modules exactly as one :func:`numptx.jit.populations.pack.pack_many` call cuts
them all (``per_module`` candidates a module from the first, the last one shorter, however the
chunks fall), so the packs equal that call's: the same candidates and offsets, the same cubins,
the same errors under the same global indices (with ``taper_at``, the modules past it are
smaller: the same candidates, in order, other cuts). Each module is packed
(:func:`numptx.jit.populations.pack.pack`) and assembled (``pack.cubin``: a candidate that ptxas refuses is
left out and the rest assembled again) by one job on a thread pool. nvJitLink releases the GIL,
so the jobs assemble while the calling thread makes, deduplicates and compiles the next chunk
(the search loop's GPU path, :meth:`numptx.search.evaluate.Evaluator.score_chunks`).
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

from .._cores import usable_cores
from ..jit.errors import BuildError
from ..jit.populations.pack import MAX_CANDIDATES, Pack, PackError, pack
from ..jit.populations.pack_kernels import PER_KERNEL, BuildMode, Layout, layout_target

__all__ = ["PackPipeline", "pack_chunks"]


def _build(target: Any, site: str, stubs: list, select: str, offset: int, constants: str,
           other: Mapping[str, Any] | None, layout: Layout = "function",
           build: BuildMode = "full") -> Pack:
    """One module: packed and assembled (the job a pipeline sends to its threads)."""
    p = pack(target, site, stubs, select=select, offset=offset, constants=constants,
             stubs=other, layout=layout, build=build)
    if not p.empty:
        try:
            p.cubin                # noqa: B018 - assemble here, in the worker thread
        except BuildError:
            if not p.empty:        # ptxas refused every candidate: an empty pack, as
                raise              # pack_many leaves it
    return p


class PackPipeline:
    """Packs of ``site`` of ``target`` (a template: what :func:`numptx.jit.populations.pack.pack` takes)
    built from stubs given chunk by chunk (see the module documentation).

    ``executor``: the thread pool the modules build on (the jobs share the template and hand
    back :class:`~numptx.jit.populations.pack.Pack` objects, so it must run them in this process); None:
    one of its own with ``max_workers`` threads (default: the cores, at most 32), shut down by
    :meth:`close`. ``constants``, ``stubs`` (other sites' stubs), ``layout`` and ``build``
    (:mod:`numptx.jit.populations.pack_kernels`) are :func:`pack`'s; a bad one is refused here, before
    any module is sent.

    ``taper_at``: once that many candidates are in modules, the rest (and the last, short
    one) go in modules of ``taper_size``: the modules still assembling when the caller runs
    out of candidates are small, so the end waits for one small module, not a full one
    (nvJitLink's time grows with a module; the cores are idle then). Only the cuts change
    (the packs then differ from one ``pack_many`` call's), never a candidate's code.
    """

    def __init__(self, target: Any, site: str, *, select: str, per_module: int = 256,
                 executor: Executor | None = None, max_workers: int | None = None,
                 constants: str = "inline", stubs: Mapping[str, Any] | None = None,
                 taper_at: int | None = None, taper_size: int = 32,
                 layout: Layout = "function", build: BuildMode = "full"):
        layout_target(target, site, layout, PER_KERNEL, build, constants)   # refused here
        self.layout, self.build = layout, build
        for name, v in (("per_module", per_module), ("taper_size", taper_size)):
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_CANDIDATES:
                raise PackError(f"{name}={v!r}: an int from 1 to {MAX_CANDIDATES}")
        if taper_at is not None and (isinstance(taper_at, bool) or not isinstance(taper_at, int)
                                     or taper_at < 0):
            raise PackError(f"taper_at={taper_at!r}: a number of candidates (int >= 0) or None")
        self.taper_at, self.taper_size = taper_at, taper_size
        if executor is not None and not callable(getattr(executor, "submit", None)):
            raise PackError(f"executor={executor!r} is not a concurrent.futures.Executor")
        self.target, self.site, self.select = target, site, select
        self.per_module, self.constants, self.stubs = per_module, constants, stubs
        self._own = executor is None
        self._pool: Any = executor if executor is not None else ThreadPoolExecutor(
            max_workers=max_workers or min(32, usable_cores()),
            thread_name_prefix="numptx-pipeline")
        self._buffer: list = []          # stubs not yet in a module
        self._sent = 0                   # candidates sent in modules (the next offset)
        self._futures: deque[Future] = deque()
        self._closed = False

    @property
    def total(self) -> int:
        """Candidates added so far."""
        return self._sent + len(self._buffer)

    def add(self, stubs: Iterable[Any]) -> None:
        """Take the next candidates; each module that fills goes to a thread now."""
        if self._closed:
            raise PackError("PackPipeline.add: the pipeline is closed")
        if isinstance(stubs, (str, bytes, Mapping)):
            raise PackError("PackPipeline.add takes a list of candidates (stubs), not one "
                            f"{type(stubs).__name__}")
        self._buffer.extend(stubs)
        while len(self._buffer) >= self._size():
            size = self._size()
            self._send(self._buffer[:size])
            del self._buffer[:size]

    def _size(self) -> int:
        """Candidates in the next module (per_module, or taper_size once tapering)."""
        tapering = self.taper_at is not None and self._sent >= self.taper_at
        return self.taper_size if tapering else self.per_module

    def _send(self, stubs: list) -> None:
        fut = self._pool.submit(_build, self.target, self.site, stubs, self.select, self._sent,
                                self.constants, self.stubs, self.layout, self.build)
        self._futures.append(fut)
        self._sent += len(stubs)

    def ready(self) -> Iterator[Pack]:
        """The packs built since the last call, in order, up to the first still building
        (never waits). A module whose job failed raises its error here."""
        while self._futures and self._futures[0].done():
            yield self._futures.popleft().result()

    def finish(self) -> Iterator[Pack]:
        """Send the last (shorter) module; then each pack not yet handed out, in order, as
        soon as it is built."""
        step = self.taper_size if self.taper_at is not None else len(self._buffer)
        for i in range(0, len(self._buffer), max(1, step)):
            self._send(self._buffer[i:i + step])
        self._buffer.clear()
        self._closed = True
        return self._drain()

    def _drain(self) -> Iterator[Pack]:
        while self._futures:
            yield self._futures.popleft().result()

    def close(self) -> None:
        """Drop the modules not yet started and shut down the pipeline's own thread pool
        (a given executor is left running)."""
        self._closed = True
        for f in self._futures:
            f.cancel()
        if self._own:
            self._pool.shutdown(wait=True)

    def __enter__(self) -> PackPipeline:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def pack_chunks(target: Any, site: str, chunks: Iterable[Sequence[Any]], *, select: str,
                per_module: int = 256, executor: Executor | None = None,
                max_workers: int | None = None, constants: str = "inline",
                stubs: Mapping[str, Any] | None = None, layout: Layout = "function",
                build: BuildMode = "full") -> list[Pack]:
    """All the packs of ``chunks`` (an iterable of stub lists, consumed while earlier modules
    assemble), in order: what ``pack_many(target, site, <the chunks joined>, ...)`` gives
    (with the same ``layout`` and ``build``);
    ``[]`` when the chunks hold no stub."""
    with PackPipeline(target, site, select=select, per_module=per_module, executor=executor,
                      max_workers=max_workers, constants=constants, stubs=stubs,
                      layout=layout, build=build) as pipe:
        out: list[Pack] = []
        for chunk in chunks:
            pipe.add(chunk)
            out.extend(pipe.ready())
        out.extend(pipe.finish())
    return out
