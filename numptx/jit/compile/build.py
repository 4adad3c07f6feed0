"""Parallel builds: ``Template.build_many`` assembles a batch of variants on an executor.

Cached variants are skipped; variants that differ only in f32/f64 constants from a proven shape
are patched (:mod:`numptx.jit.compile.plans`), and each shape still to be proven sends the trial
assemblies of its :class:`~numptx.jit.compile.plans.Proof` along with the other jobs; the rest go to
nvJitLink, one job per variant. Jobs are module-level (:func:`_link`: PTX text in, cubin bytes
out), so process pools work too. A Dask ``Client`` (or ``client.get_executor()``) as the
executor sends the template once per worker and each job as its stubs' source
(:mod:`numptx.jit.compile.farm`: words in, cubins out).

>>> variants = tmpl.build_many([{"combine": s} for s in stubs])     # doctest: +SKIP

The template is taken as a :class:`BuildTarget` (what :class:`numptx.jit.templates.template.Template`
offers), so this module does not import the templates that call it.
"""
from __future__ import annotations

import operator
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ThreadPoolExecutor, wait
from typing import Any, Protocol

from ..._cores import usable_cores
from ...errors import NumptxError
from ..errors import BuildError, summary
from .farm import as_farm
from .nvjitlink import ptx_to_cubin
from .plans import FIRST, SEEN, UNKNOWN, BuildInfo, PlanBook, Proof, Shape

__all__ = ["BuildError", "BuildTarget", "build_many"]


class BuildVariant(Protocol):
    """What build_many uses of a variant (a :class:`numptx.jit.templates.template.Variant`)."""
    stubs: tuple[str, ...]

    @property
    def ptx(self) -> str: ...
    def lookup(self) -> bytes | None: ...
    def store(self, cubin: bytes, info: BuildInfo | None = None) -> None: ...
    def recover(self, e: BaseException) -> bytes: ...


class BuildTarget(Protocol):
    """What build_many uses of a template (a :class:`numptx.jit.templates.template.Template`)."""
    arch: str
    link_options: tuple[str, ...]
    plans: PlanBook

    @property
    def name(self) -> str: ...
    @property
    def cache(self) -> Any: ...
    def inject(self, stubs: Mapping[str, Any] | None = None, /, *,
               missing: str = "error") -> BuildVariant: ...
    def render(self, stubs: Sequence[str]) -> str: ...
    def shape(self, stubs: Sequence[str]) -> Shape | None: ...
    def split(self, stubs: Sequence[str]) -> tuple[Shape | None, str]: ...


def build_many(t: BuildTarget, batch: Iterable[Mapping[str, Any]], *,
               executor: Executor | None = None,
               progress: bool | Callable[[int, int], Any] = False, errors: str = "raise",
               missing: str = "error", max_workers: int | None = None) -> list:
    """:meth:`Template.build_many <numptx.jit.templates.template.Template.build_many>` of template ``t``."""
    _check_options(errors, max_workers, executor)
    batch = _as_batch(batch)
    job = _BatchBuild(t, batch, _progress(progress, len(batch)))
    job.look_up(missing)
    job.run(executor, max_workers)
    return job.outcome(errors)


def _check_options(errors: str, max_workers: int | None, executor: Executor | None) -> None:
    """build_many's options, refused with a NumptxError naming the option and the fix."""
    if errors not in ("raise", "return"):
        raise NumptxError(f"build_many(errors={errors!r}): use 'raise' or 'return'")
    if max_workers is not None:
        try:
            n = -1 if isinstance(max_workers, bool) else operator.index(max_workers)
        except TypeError:
            n = -1
        if n < 1:
            raise NumptxError(f"build_many(max_workers={max_workers!r}): a positive int or None")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise NumptxError(f"build_many(executor=): a concurrent.futures.Executor, not "
                          f"{type(executor).__name__}")


def _as_batch(batch: Iterable[Mapping[str, Any]]) -> list:
    """build_many's batch as a list of stub mappings (one mapping alone is refused)."""
    if isinstance(batch, Mapping):
        raise NumptxError("build_many takes a list of stub mappings (one per variant), not one "
                          "mapping: build_many([{...}, {...}])")
    try:
        return list(batch)
    except TypeError:
        raise NumptxError(f"build_many takes a list of stub mappings, not "
                          f"{type(batch).__name__}") from None


class _BatchBuild:
    """One build_many call, in stages: :meth:`look_up` (inject each item, skip the cached),
    :meth:`run` (assemble, prove and patch on an executor), :meth:`outcome` (the variants, or a
    BuildError). Jobs in flight are in ``futures``: a future -> (variant, its index) or (shape
    group, trial 0 | 1)."""

    def __init__(self, t: BuildTarget, batch: list, report: Callable[[int | None], None]):
        self.t, self.batch, self.report = t, batch, report
        self.results: list = [None] * len(batch)
        self.failed: dict[int, BaseException] = {}
        self.done = 0
        self.pending: list[tuple[int, BuildVariant]] = []
        self.futures: dict = {}
        self.sent: dict = {}      # a variant's future -> (when it was sent, why not patched)
        self.farm: Any = None
        self.pool: Any = None

    def finish(self, i: int, err: BaseException | None = None) -> None:
        """Variant ``i`` is over (built, or failed with ``err``): count it."""
        if err is not None:
            self.failed[i] = _numptx_error(err)
        self.done += 1
        self.report(self.done)

    def look_up(self, missing: str) -> None:
        """Inject each batch item; cached variants are done, the others ``pending``."""
        for i, stubs in enumerate(self.batch):
            try:
                v = self.t.inject(stubs, missing=missing)
                cached = v.lookup() is not None
            except Exception as e:   # noqa: BLE001 - reported with the index
                self.finish(i, e)
                continue
            self.results[i] = v
            if cached:
                self.finish(i)
            else:
                self.pending.append((i, v))

    def run(self, executor: Executor | None, max_workers: int | None) -> None:
        """Build the pending variants on ``executor`` (a thread pool of its own by default)."""
        plain, groups = _sort_by_shape(self.t, self.pending)
        jobs = len(plain) + 2 * sum(1 for g in groups.values() if g.proof is not None)
        self.farm = as_farm(executor)       # a Dask client: stub sources in, cubins out
        own = executor is None and jobs > 1
        self.pool = executor if executor is not None else (
            ThreadPoolExecutor(max_workers=max_workers or min(32, usable_cores()),
                               thread_name_prefix="numptx-build") if own else _Inline())
        try:
            for i, v, why in plain:
                self.assemble(i, v, why)
            for group in groups.values():
                if group.proof is not None:
                    self.prove(group)
                else:                             # proven before: patch now
                    self.settle(group)
            while self.futures:
                finished, _ = wait(list(self.futures), return_when=FIRST_COMPLETED)
                for fut in finished:
                    self.collect(fut)
        finally:
            if own:
                self.pool.shutdown(wait=True)
            self.report(None)

    def assemble(self, i: int, v: BuildVariant, why: str) -> None:
        """Send variant ``i`` to nvJitLink as written (``why``: why it is not patched)."""
        t = self.t
        try:
            try:
                fut = (self.farm.submit(t, self.batch[i], v) if self.farm is not None
                       else self.pool.submit(_link, v.ptx, t.arch, t.link_options))
                self.futures[fut] = (v, i)
                self.sent[fut] = (time.perf_counter(), why)
            except Exception as e:   # noqa: BLE001 - a refused job fails its variant only
                raise _numptx_error(e, "the executor did not take the job") from e
        except Exception as e:   # noqa: BLE001 - reported with the index
            self.finish(i, e)

    def prove(self, group: _Group) -> None:
        """Send the next pair of trial assemblies of a shape's proof, or settle the shape."""
        t, proof = self.t, group.proof
        trials = proof.trials()
        group.left = len(trials)
        for k, stubs in enumerate(trials):
            try:
                fut = (self.farm.submit_texts(t, stubs) if self.farm is not None
                       else self.pool.submit(_link, t.render(stubs), t.arch, t.link_options))
                self.futures[fut] = (group, k)
                if group.started is None:
                    group.started = time.perf_counter()
            except Exception as e:   # noqa: BLE001 - its variants then say what is wrong
                proof.fail(e)
                group.left -= 1
        if group.left == 0:
            if trials:
                self.prove(group)        # failed to send: the proof is over
            else:
                self.settle(group)

    def settle(self, group: _Group) -> None:
        """A shape's plan is known (or its proof is over): patch its variants, or assemble
        them."""
        t = self.t
        plan, why = group.plan, ""
        proved = group.proof is not None
        if proved:
            plan = group.proof.plan
            why = group.proof.why or "its proof failed"
            if not group.proof.transient:     # a refused job or a dead worker proves nothing
                t.plans.keep(group.shape.key, plan, t.cache, why, t.name)
        for n, (i, v, values) in enumerate(group.members):
            if plan is None:
                self.assemble(i, v, f"its shape is not patchable: {why}")
            else:
                start = time.perf_counter()
                cubin = plan.apply(values)
                now = time.perf_counter()
                first = proved and n == 0 and group.started is not None
                v.store(cubin, BuildInfo("proof" if first else "patched",
                                         now - (group.started if first else start)))
                self.finish(i)

    def collect(self, fut: Future) -> None:
        """A finished job: a proof's trial (record it; the pair done, go on) or a variant's
        cubin (store it, or recover the plain rendering)."""
        job, k = self.futures.pop(fut)
        if isinstance(job, _Group):
            try:
                job.proof.record(k, fut.result())
            except Exception as e:   # noqa: BLE001 - its variants then say what is wrong
                job.proof.fail(e)
            job.left -= 1
            if job.left == 0:
                self.prove(job)
            return
        when, why = self.sent.pop(fut)
        info = BuildInfo("assembled", time.perf_counter() - when, why or None)
        try:
            job.store(fut.result(), info)
        except Exception as e:   # noqa: BLE001
            _retry_plain(job, e, self.failed, k, info)
        self.finish(k)

    def outcome(self, errors: str) -> list:
        """The variants in batch order; failures as their errors (``errors="return"``), or
        a BuildError listing them (``"raise"``)."""
        results, failed, t = self.results, self.failed, self.t
        for i in failed:
            results[i] = failed[i] if errors == "return" else None
        if failed and errors == "raise":
            lines = [f"  variant {i}: {type(e).__name__}: {summary(e)}"
                     for i, e in sorted(failed.items())[:10]]
            more = f"\n  ... and {len(failed) - 10} more" if len(failed) > 10 else ""
            raise BuildError(f"{len(failed)} of {len(results)} variant(s) failed to build "
                             f"({t.name}, {t.arch}):\n" + "\n".join(lines) + more,
                             errors=failed, variants=results)
        return results


def _sort_by_shape(t: BuildTarget, pending: list[tuple[int, BuildVariant]]):
    """build_many's split of the variants to build: those to assemble as written, and per
    shape those to patch (shapes already proven, seen before, or twice in the batch)."""
    plain: list[tuple[int, BuildVariant, str]] = []
    groups: dict[str, _Group] = {}
    cache = t.cache
    for i, v in pending:
        shape, why = t.split(v.stubs)
        if shape is None:
            plain.append((i, v, why))
            continue
        group = groups.get(shape.key)
        if group is None:
            state = t.plans.state(shape.key, cache, see=False)
            if state is None:
                plain.append((i, v, "its shape is not patchable: "
                              + (t.plans.why(shape.key) or "its proof failed")))
                continue
            group = groups[shape.key] = _Group(shape, state)
            group.why = why
        group.members.append((i, v, shape.values))
    for key, group in list(groups.items()):
        if group.proof is not None and len(group.members) == 1 and not group.seen:
            t.plans.state(key, cache, see=True)   # first of its shape: as written
            plain.append((*group.members[0][:2], FIRST + (f"; kept in the shape: {group.why}"
                                                          if group.why else "")))
            del groups[key]
    plain.sort(key=lambda iv: iv[0])            # jobs go out in batch order
    return plain, groups


class _Group:
    """build_many's variants of one shape: their plan (proven before) or the proof they wait
    for (``left``: its trial assemblies in flight)."""

    __slots__ = ("shape", "members", "plan", "proof", "seen", "left", "why", "started")

    def __init__(self, shape: Shape, state: Any):
        self.shape = shape
        self.members: list[tuple[int, BuildVariant, tuple[int, ...]]] = []
        self.seen = state is SEEN
        known = state is not SEEN and state is not UNKNOWN
        self.plan = state if known else None
        self.proof = None if known else Proof(shape)
        self.left = 0
        self.why = ""                   # why constants are kept in the shape
        self.started: float | None = None   # when its proof's first trial was sent


class _Inline:
    """An executor that runs each job as it is submitted (a batch of one job)."""

    def submit(self, fn, *args):
        fut: Future = Future()
        try:
            fut.set_result(fn(*args))
        except BaseException as e:   # noqa: BLE001 - handed over like a pool's future
            fut.set_exception(e)
        return fut


def _retry_plain(v: BuildVariant, e: BaseException, failed: dict, i: int,
                 info: BuildInfo | None = None) -> None:
    """build_many's failure path: the plain rendering's cubin, or its error in ``failed``."""
    try:
        cubin = v.recover(e)
    except Exception as err:   # noqa: BLE001 - reported with the index
        failed[i] = _numptx_error(err)
    else:
        if info is not None:
            v.store(cubin, info)


def _numptx_error(e: Exception, what: str = "") -> NumptxError:
    """``e`` as it goes into a BuildError: numptx's own errors as they are, anything else (a
    broken executor, a dead worker) wrapped, the original kept as ``__cause__``."""
    if isinstance(e, NumptxError):
        return e
    err = NumptxError(f"{what + ': ' if what else ''}{type(e).__name__}: {e}")
    err.__cause__ = e
    return err


def _link(ptx: str, arch: str, options: Sequence[str]) -> bytes:
    """The unit of work of build_many (module-level so process pools can run it)."""
    return ptx_to_cubin(ptx, arch, options=options)


def _progress(progress, total: int) -> Callable[[int | None], None]:
    """report(done) per finished variant, report(None) at the end: a callable gets (done,
    total); True shows a tqdm bar (a counter on stderr without tqdm)."""
    if callable(progress):
        return lambda done: None if done is None else progress(done, total)
    if not progress:
        return lambda done: None
    lock = threading.Lock()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        tqdm = None
    if tqdm is not None:
        bar = tqdm(total=total, desc="numptx build", unit="variant")

        def advance(done):
            with lock:
                if done is None:
                    bar.close()
                else:
                    bar.update(done - bar.n)
        return advance

    def show(done):
        with lock:
            if done is None:
                sys.stderr.write("\n")
            else:
                sys.stderr.write(f"\rnumptx: built {done}/{total} variant(s)")
            sys.stderr.flush()
    return show
