"""How numptx runs numba-cuda's simulator: blocks in waves, threads one at a time, each
``nx.site`` evaluated once for all the threads of a wave at it.

numba's simulator runs each CUDA thread as a Python thread and one block after another, its
block manager polling the threads in a busy loop. Under a numptx launch (``SIM_BATCH``,
:mod:`numptx.jit.numba.launch`) consecutive blocks run together as a *wave* (up to
:data:`WAVE_THREADS` threads), and their threads take turns: one thread runs (holds the turn)
until it reaches a site, a ``syncthreads`` or its end, then hands the turn to the next thread
in grid order. When no thread can run, the thread that stopped last evaluates the sites reached
(each (site, signature) once on the values of all its threads) and releases the barriers that
all live threads of a block wait at, and the turn goes round again. A site call thus costs its
thread one hand-over, not one emulator run.

What each thread gets is what it alone would get: stubs are elementwise, except that warp-level
instructions see consecutive groups of 32 values as warps; so each block's threads start at a
multiple of 32 in the arrays evaluated (as when a block ran alone), and a population's selector
splits by block. Each block has its own ``cuda.shared`` arrays (numba's simulator keeps one per
launch, since its blocks never overlap). Blocks of one wave run interleaved, in a fixed order
(grid order, threads by linear id): a launch gives the same results every time.

A thread that holds the turn for :data:`STALL_SECONDS` without reaching a site, a barrier or
its end may wait in a loop for another thread (a flag, a spin lock), which would never run. The
launch's threads then run freely, as numba's simulator runs them (a ``RuntimeWarning`` says
so): elementwise sites are evaluated per thread (those reached so far at once), warp-level
sites and packs once per block when none of its threads runs (the rounds of numptx's earlier
per-block manager). The results are the same; the rest of the launch is slower. numptx's own
work (a stub's first check, an evaluation) is no stall.

>>> simulator_classes()        # doctest: +SKIP
(<module 'numba.cuda.simulator.kernel'>, <class 'SiteBlockManager'>)
"""
from __future__ import annotations

import _thread
import contextlib
import functools
import logging
import sys
import threading
import time
import warnings
from collections import deque
from typing import Any

import numpy as np

from .numba_compat import block_manager_parts

__all__ = ["WAVE_THREADS", "CannotStart", "simulator_classes", "running", "evaluate",
           "own_work"]

#: the most threads that run together in one wave (whole blocks; at least one block)
WAVE_THREADS = 1024
#: seconds one thread may hold the turn before the wave's threads run freely (see _FREED)
STALL_SECONDS = 1.0
#: seconds without any thread reaching a site, a barrier or its end before a warning
ENDLESS_SECONDS = 60.0
log = logging.getLogger(__name__)
_FREED = ("numptx: a simulated thread ran for {s:g} s without reaching an nx.site, a "
          "syncthreads or its end while the other threads of its wave waited for their turn "
          "(it may wait in a loop for another thread: a flag, a spin lock). The threads of this "
          "launch now run freely, as numba's simulator runs them: the same results, slower "
          "(elementwise sites evaluated per thread, warp-level sites and packs per block)")
_ENDLESS = ("numptx: no simulated thread has reached an nx.site, a syncthreads or its end for "
            "{s:g} s: a thread may loop for ever (waiting for a thread that waits at a "
            "barrier or at a warp-level site, or for a later block)")


def _caller_level() -> int:
    """The ``stacklevel`` of a warning from the caller of this function's caller that names
    the first frame outside numptx and numba (the user's launch)."""
    import os

    from .numba_compat import simulator_kernel_module
    simk = simulator_kernel_module()
    skip = tuple(os.path.dirname(f) + os.sep for f in (__file__, simk.__file__))
    skip += (os.path.dirname(os.path.dirname(skip[0][:-1])) + os.sep,)  # numptx itself
    level, f = 2, sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(skip):
        level, f = level + 1, f.f_back
    return level


class CannotStart(RuntimeError):
    """The threads of a wave could not all be started (the system's limit on threads)."""


class Slot:
    """Where a site call's result (or error) goes."""
    __slots__ = ("value", "error")

    def __init__(self):
        self.value = self.error = None


def _warp_aligned(ws: list) -> list[list]:
    """``ws`` (in grid order) cut into parts evaluated as when each block was evaluated alone:
    warp-level instructions see groups of 32 consecutive values as warps, so blocks of whole
    warps share a part, and a block with part of a warp at the site is a part of its own (its
    error, if any, is the one it gave alone)."""
    parts, cur = [], []
    for block in _by_block(ws):
        if len(block) % 32:
            if cur:
                parts.append(cur)
                cur = []
            parts.append(block)
        else:
            cur += block
    if cur:
        parts.append(cur)
    return parts


def _by_block(ws: list) -> list[list]:
    parts: dict = {}
    for w in ws:
        parts.setdefault(w[0].numptx_block, []).append(w)
    return list(parts.values())


def evaluate(note, batch: list) -> None:
    """Fill the slots of ``batch`` ``(thread, key, fn, spec, values, slot)``: each (site,
    signature) evaluated once on the values of its threads, in grid order, where ``fn.batch``
    is ``"grid"`` (the default: elementwise); ``"warps"``: blocks of whole warps together, a
    block with part of a warp alone (values see their position: warp-level instructions,
    lanes); ``"block"``: once per block. An error goes to each thread of the evaluation, and
    to ``note``. ``"thread"``: each call alone, at once, by the thread that makes it (a cheap
    evaluator: the batch interpreter on one row)."""
    batch.sort(key=lambda w: w[0].numptx_order)
    groups: dict = {}
    for w in batch:
        groups.setdefault(w[1], []).append(w)
    for ws in groups.values():
        fn, spec = ws[0][2], ws[0][3]
        how = getattr(fn, "batch", "grid")
        for part in (_by_block(ws) if how == "block" else _warp_aligned(ws) if how == "warps"
                     else [ws]):
            try:
                results = fn(spec, [w[4] for w in part])
            except Exception as e:   # noqa: BLE001 - each thread of the part raises it
                note(e)
                for w in part:
                    w[5].error = e
                continue
            for w, r in zip(part, results):
                w[5].value = r


class _Wave:
    """Consecutive blocks whose threads take turns (see the module documentation), or, once a
    thread has held the turn for :data:`STALL_SECONDS` (``free``), run freely."""

    def __init__(self, note, blocks: list[list], free: bool = False):
        self.note = note
        self.blocks = blocks
        self.ready = deque(t for b in blocks for t in b)
        self.pending: list = []
        self.over = _thread.allocate_lock()
        self.over.acquire()
        self.mutex = threading.Lock()   # stop() against the watcher's switch to free running
        self.failed = None
        self.aborted = self.warned = False
        self.free = free
        self.turns = 0                  # hand-overs so far (the main thread watches them)
        self.busy = 0                   # numptx's own work under way (a check, an evaluation)
        self.left = sum(map(len, blocks))       # threads not ended
        self.moving = [0] * len(blocks)         # free: threads of each block running

    def run(self) -> bool:
        """Run the wave to its end (raise the first thread's error); raises
        :class:`CannotStart`, having run nothing, where the system starts no more threads.
        True where its threads ended up running freely."""
        started = []
        try:
            for b in self.blocks:
                for t in b:
                    t.start()
                    started.append(t)
        except RuntimeError as e:          # "can't start new thread": a limit of the system
            self.aborted = True
            self._abort(started)
            raise CannotStart(str(e)) from e
        with self.mutex:
            if self.free:
                self._set_free()
            else:
                self.ready.popleft().numptx_go.release()
        freed = self._watch()
        if self.failed is not None:
            self._abort([t for b in self.blocks for t in b if t.numptx_state != "done"])
            raise self.failed[0].with_traceback(self.failed[1])
        if freed:           # said once the wave has ended (a warning raised as an error too)
            warnings.warn(_FREED.format(s=STALL_SECONDS), RuntimeWarning,
                          stacklevel=_caller_level())
        return self.free

    def _watch(self) -> bool:
        """Wait for the wave's end; where no thread stops for STALL_SECONDS, let the threads
        run freely (a thread that holds the turn may wait for another): True where it did."""
        seen, since, freed = self.turns, time.monotonic(), False
        while not self.over.acquire(timeout=STALL_SECONDS / 4):
            now = time.monotonic()
            if self.turns != seen or self.busy:     # numptx's own work is no stall
                seen, since = self.turns, now
            elif now - since >= STALL_SECONDS and not self.free:
                with self.mutex:
                    if self.turns == seen and not self.aborted:
                        self._set_free()
                        freed = True
            elif now - since >= ENDLESS_SECONDS and not self.warned:
                self.warned = True
                warnings.warn(_ENDLESS.format(s=ENDLESS_SECONDS), RuntimeWarning,
                              stacklevel=_caller_level())
        return freed

    @staticmethod
    def _abort(threads: list) -> None:
        """Wake ``threads`` (each waits for its turn) to end: not yet run, they run nothing;
        at a site or barrier, they raise there (numba's own abort)."""
        for t in threads:
            t.abort = True
            t.syncthreads_blocked = False
            with contextlib.suppress(RuntimeError):     # woken already (free running)
                t.numptx_go.release()

    def stop(self, t, state: str, entry: tuple | None = None) -> None:
        """The running thread ``t`` stops at a site (``entry``, its call), a barrier or its
        end: the next thread runs (``t`` itself, without a hand-over, when it is next)."""
        with self.mutex:
            wait, nxt = self._stopped(t, state, entry)
        if nxt is not None:     # woken out of the mutex: it never waits for the mutex at once
            nxt.numptx_go.release()
        if wait:
            t.numptx_go.acquire()

    def _stopped(self, t, state: str, entry: tuple | None) -> tuple[bool, Any]:
        """stop() under the mutex: (whether ``t`` waits to be woken, the thread whose turn it
        is, to wake; marked running, so a switch to free running leaves it be)."""
        t.numptx_state = state
        self.turns += 1
        if self.aborted:
            return False, None
        if entry is not None:
            self.pending.append(entry)
        if state == "done":
            self.left -= 1
            if t.exception:
                self._fail(t.exception)
                return False, None
        try:
            if self.free:
                self._stopped_free(t)
                return state != "done", None
            if not self.ready:
                self._round()
        except BaseException as e:  # noqa: BLE001 - the launch raises it; no thread hangs
            self._fail((e, e.__traceback__))
            if state != "done":
                raise
            return False, None
        if not self.ready:          # every thread has ended
            self.over.release()
            return False, None
        nxt = self.ready.popleft()
        if nxt is t:
            t.numptx_state = "running"
            return False, None
        nxt.numptx_state = "running"
        return state != "done", nxt

    def _stopped_free(self, t) -> None:
        """Free running: the block's round when none of its threads runs."""
        b = t.numptx_block
        self.moving[b] -= 1
        if self.moving[b] == 0:
            self._wake(self._block_round(b))
        if self.left == 0:
            self.over.release()

    def _set_free(self) -> None:
        """From now on every thread that can run runs (under the mutex): those whose turn had
        not come yet start, and each block whose threads all wait has its round."""
        self.free = True
        moving = [t for t in self.ready if t.numptx_state != "running"]
        self.ready.clear()
        self.moving = [sum(t.numptx_state in ("running", "ready") for t in b)
                       for b in self.blocks]
        for t in moving:
            t.numptx_state = "running"
            t.numptx_go.release()
        alone = [w for w in self.pending if getattr(w[2], "batch", "grid") == "grid"]
        if alone:                       # elementwise: as each thread alone (one may hold a lock)
            self.pending = [w for w in self.pending if getattr(w[2], "batch", "grid") != "grid"]
            self._evaluate(alone)
            self._wake([w[0] for w in alone])
        for b, n in enumerate(self.moving):
            if n == 0:
                self._wake(self._block_round(b))

    def _wake(self, threads: list) -> None:
        for t in threads:
            t.numptx_state = "running"
            self.moving[t.numptx_block] += 1
            t.numptx_go.release()

    def _evaluate(self, batch: list) -> None:
        with self.own_work():
            evaluate(self.note, batch)

    @contextlib.contextmanager
    def own_work(self):
        """numptx's own work in the thread holding the turn (a stub's check, an evaluation):
        no stall, however long it takes."""
        self.busy += 1
        try:
            yield
        finally:
            self.busy -= 1
            self.turns += 1

    def _fail(self, error: tuple) -> None:
        self.failed, self.aborted = error, True
        self.over.release()

    def _round(self) -> None:
        """No thread can run: evaluate the sites reached and release each block whose live
        threads all wait at its barrier (a block with a thread at a site has one that does
        not: sites first, so no barrier is crossed early)."""
        woken = []
        if self.pending:
            batch, self.pending = self.pending, []
            self._evaluate(batch)
            woken += [w[0] for w in batch]
        for b in range(len(self.blocks)):
            woken += self._barrier(b)
        woken.sort(key=lambda t: t.numptx_order)
        for t in woken:
            t.numptx_state = "ready"
        self.ready.extend(woken)

    def _block_round(self, b: int) -> list:
        """Free running: block ``b``'s round (none of its threads runs): the threads woken."""
        mine = [w for w in self.pending if w[0].numptx_block == b]
        if mine:
            self.pending = [w for w in self.pending if w[0].numptx_block != b]
            self._evaluate(mine)
            return [w[0] for w in mine]
        return self._barrier(b)

    def _barrier(self, b: int) -> list:
        """The live threads of block ``b``, released from its barrier where all wait there."""
        live = [t for t in self.blocks[b] if t.numptx_state != "done"]
        if live and all(t.numptx_state == "sync" for t in live):
            for t in live:
                t.syncthreads_blocked = False
            return live
        return []


class _GridRun:
    """One launch's progress through its grid: the blocks already run in earlier waves."""

    def __init__(self, launch, note, dynshared: int):
        self.launch, self.note, self.dynshared = launch, note, dynshared
        self.done_until = 0             # blocks 0 .. done_until - 1 (numba's C order) ran
        self.wave_threads = WAVE_THREADS
        self.free = False               # a wave's threads ran freely: the next ones do too


_run: _GridRun | None = None


@contextlib.contextmanager
def running(launch, note, dynshared: int = 0):
    """While the block runs, the managers made by numba's simulator (``simulator_classes``)
    belong to ``launch`` and run its grid in waves; errors of evaluations go to ``note``. One
    launch at a time (the caller holds its simulator lock)."""
    global _run
    classes = simulator_classes()
    simk, manager = classes
    api = simk.FakeCUDAModule
    base_manager, base_shared = simk.BlockManager, api.shared
    simk.BlockManager, api.shared = manager, property(_shared_of_block(base_shared, dynshared))
    _run = _GridRun(launch, note, dynshared)
    try:
        yield
    finally:
        _run = None
        simk.BlockManager, api.shared = base_manager, base_shared


def own_work():
    """A context for numptx's own work in a simulated thread (a stub's first check): the
    wave does not take it for a thread that waits in a loop (no-op outside a wave)."""
    w = getattr(threading.current_thread(), "numptx_wave", None)
    return contextlib.nullcontext() if w is None or w.free else w.own_work()


def current_launch():
    """The launch whose grid runs now (None outside :func:`running`)."""
    return None if _run is None else _run.launch


def _shared_of_block(base, dynshared: int):
    """``FakeCUDAModule.shared`` per block: each block its own shared arrays (numba's simulator
    keeps one set per launch; its blocks run one after another)."""
    from .numba_compat import fake_cuda_shared_type
    FakeCUDAShared = fake_cuda_shared_type()

    def shared(module):
        m = getattr(threading.current_thread(), "numptx_manager", None)
        if m is None:
            return base.__get__(module)
        if m.numptx_shared is None:
            m.numptx_shared = FakeCUDAShared(dynshared)
        return m.numptx_shared
    return shared


@functools.lru_cache(maxsize=1)
def simulator_classes():
    """``(numba's simulator kernel module, block manager)``: numba's simulator with blocks run
    in waves whose threads take turns (see the module documentation). None where numba's
    simulator is not built this way (each thread then evaluates its sites alone)."""
    try:
        from .numba_compat import fake_cuda_shared_type, simulator_kernel_module
        simk = simulator_kernel_module()
        base_thread, base_manager = simk.BlockThread, simk.BlockManager
        base_manager.__init__, base_thread.syncthreads, simk.FakeCUDAModule.shared  # noqa: B018
        fake_cuda_shared_type()
    except (ImportError, AttributeError):
        return None
    return simk, _manager_class(base_manager, _thread_class(base_thread))


def _thread_class(base_thread):
    """numba's simulator thread, taking turns in a wave (see the module documentation)."""

    class SiteThread(base_thread):
        def __init__(self, f, manager, *args, **kw):
            super().__init__(f, manager, *args, **kw)
            self.numptx_manager = manager
            self.numptx_wave: _Wave | None = None
            self.numptx_order = self.numptx_block = 0
            self.numptx_state = "ready"
            self.numptx_go = _thread.allocate_lock()
            self.numptx_go.acquire()

        def run(self):
            self.numptx_go.acquire()            # its first turn
            try:
                if not self.abort:
                    super().run()               # numba's: keeps the error in .exception
            finally:
                self.numptx_wave.stop(self, "done")

        def syncthreads(self):
            if self.abort:
                raise RuntimeError("abort flag set on syncthreads call")
            self.syncthreads_blocked = True
            self.numptx_wave.stop(self, "sync")
            if self.abort:
                raise RuntimeError("abort flag set on syncthreads clear")

        def numptx_site(self, launch, key, fn, spec, values):
            slot = Slot()
            wave = self.numptx_wave
            how = getattr(fn, "batch", "grid")
            if how == "thread":
                wave.turns += 1             # progress for the watcher: no stall
            if how == "thread" or (wave.free and how == "grid"):
                evaluate(wave.note, [(self, key, fn, spec, values, slot)])     # alone
            else:
                wave.stop(self, "site", (self, key, fn, spec, values, slot))
            if self.abort:
                raise RuntimeError("another thread of the block failed")
            if slot.error is not None:
                raise slot.error
            return slot.value

    return SiteThread


def _manager_class(base_manager, SiteThread):
    """numba's simulator block manager, running its block and the next ones as a wave."""

    class SiteBlockManager(base_manager):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self.launch = current_launch()
            self.numptx_shared = None

        def run(self, grid_point, *args):
            grid = _run
            _, grid_dim, block_dim, _ = block_manager_parts(self)
            dims = tuple(grid_dim)
            first = int(np.ravel_multi_index(tuple(grid_point), dims))
            if first < grid.done_until:         # run in an earlier wave
                return
            per_block = max(int(np.prod(block_dim)), 1)
            count = min(max(1, grid.wave_threads // per_block), int(np.prod(dims)) - first)
            try:
                freed = self._wave(first, count, args).run()
            except CannotStart:
                if count == 1:
                    raise
                log.warning("numptx: the simulator could not start %d threads at once; it "
                            "runs one block at a time", count * per_block)
                grid.wave_threads = per_block
                count = 1
                freed = self._wave(first, count, args).run()
            grid.done_until = first + count
            grid.free = grid.free or freed      # the next waves run freely too

        def _wave(self, first: int, count: int, args) -> _Wave:
            """The wave of the blocks ``first`` .. ``first + count - 1`` (numba's C order), this
            manager's block first, each block with a manager of its own."""
            f, grid_dim, block_dim, debug = parts = block_manager_parts(self)
            dims = tuple(grid_dim)
            managers = [self] + [SiteBlockManager(*parts) for _ in range(count - 1)]

            def target():
                f(*args)
            blocks, per_block = [], max(int(np.prod(block_dim)), 1)
            for b, m in enumerate(managers):
                point = tuple(int(i) for i in np.unravel_index(first + b, dims))
                threads = [SiteThread(target, m, point, p, debug)
                           for p in np.ndindex(*block_dim)]
                # in linear thread id order (x fastest: warps and lanes), not ndindex's
                threads.sort(key=lambda t: t.thread_id)
                for t in threads:
                    t.numptx_order, t.numptx_block = b * per_block + t.thread_id, b
                blocks.append(threads)
            wave = _Wave(_run.note, blocks, free=_run.free)
            for threads in blocks:
                for t in threads:
                    t.numptx_wave = wave
            return wave

    return SiteBlockManager
