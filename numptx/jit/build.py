"""Parallel builds: ``Template.build_many`` assembles a batch of variants on an executor.

Cached variants are skipped; variants that differ only in f32 constants from a proven shape are
patched (:mod:`numptx.jit.patch`), and each shape still to be proven sends its two trial
assemblies along with the other jobs; the rest go to nvJitLink, one job per variant. Jobs are
module-level (:func:`_link`: PTX text in, cubin bytes out), so process pools work too.

>>> variants = tmpl.build_many([{"combine": s} for s in stubs])     # doctest: +SKIP
"""
from __future__ import annotations

import operator
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from ..errors import NumptxError
from .nvjitlink import ptx_to_cubin
from .patch import (ATTEMPTS, SEEN, UNKNOWN, Plan, folds_constants, join_constants, kinds_of,
                    make_plan, sentinel_sets, signs)

if TYPE_CHECKING:
    from .template import Template, Variant

__all__ = ["BuildError", "build_many"]


class BuildError(NumptxError):
    """Some variants of a :meth:`Template.build_many` batch failed. ``errors`` maps each failing
    index to its exception; ``variants`` holds the built variants (None where one failed)."""

    def __init__(self, message: str, *, errors: dict[int, BaseException], variants: list):
        super().__init__(message)
        self.errors, self.variants = errors, variants


def build_many(t: Template, batch: Iterable[Mapping[str, Any]], *, executor: Executor | None = None,
               progress: bool | Callable[[int, int], Any] = False, errors: str = "raise",
               missing: str = "error", max_workers: int | None = None) -> list:
    """:meth:`Template.build_many <numptx.jit.template.Template.build_many>` of template ``t``."""
    if errors not in ("raise", "return"):
        raise NumptxError(f"build_many(errors={errors!r}): use 'raise' or 'return'")
    if max_workers is not None:
        given = max_workers
        try:
            max_workers = -1 if isinstance(given, bool) else operator.index(given)
        except TypeError:
            max_workers = -1
        if max_workers < 1:
            raise NumptxError(f"build_many(max_workers={given!r}): a positive int or None")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise NumptxError(f"build_many(executor=): a concurrent.futures.Executor, not "
                          f"{type(executor).__name__}")
    if isinstance(batch, Mapping):
        raise NumptxError("build_many takes a list of stub mappings (one per variant), not one "
                          "mapping: build_many([{...}, {...}])")
    try:
        batch = list(batch)
    except TypeError:
        raise NumptxError(f"build_many takes a list of stub mappings, not "
                          f"{type(batch).__name__}") from None
    total = len(batch)
    results: list = [None] * total
    failed: dict[int, BaseException] = {}
    report = _progress(progress, total)
    done = 0
    pending: list[tuple[int, Variant]] = []
    for i, stubs in enumerate(batch):
        try:
            v = t.inject(stubs, missing=missing)
            cached = v._lookup() is not None
        except Exception as e:   # noqa: BLE001 - reported with the index
            failed[i] = _numptx_error(e)
            done += 1
            report(done)
            continue
        results[i] = v
        if cached:
            done += 1
            report(done)
        else:
            pending.append((i, v))
    plain, proofs = _sort_by_shape(t, pending)
    jobs = len(plain) + 2 * sum(1 for p in proofs.values() if p.plan is UNKNOWN)
    own = executor is None and jobs > 1
    pool = executor if executor is not None else (
        ThreadPoolExecutor(max_workers=max_workers or min(32, os.cpu_count() or 1),
                           thread_name_prefix="numptx-build") if own else _Inline())
    futures: dict = {}           # future -> (variant, its index) or (proof, 0 | 1)

    def finish(i: int, err: BaseException | None = None) -> None:
        nonlocal done
        if err is not None:
            failed[i] = _numptx_error(err)
        done += 1
        report(done)

    def assemble(i: int, v: Variant) -> None:
        try:
            ptx = v.ptx
            try:
                futures[pool.submit(_link, ptx, t.arch, t.link_options)] = (v, i)
            except Exception as e:   # noqa: BLE001 - a refused job fails its variant only
                raise _numptx_error(e, "the executor did not take the job") from e
        except Exception as e:   # noqa: BLE001 - reported with the index
            finish(i, e)

    def prove(proof: _Proof) -> None:
        """Send a shape's two trial assemblies (with a fresh pair of constant sets)."""
        proof.attempts += 1
        proof.sets = sentinel_sets(proof.pattern, proof.kinds)
        proof.left = 2
        if folds_constants(join_constants(proof.texts, proof.sets[0])):
            proof.failed, proof.left = True, 0
        for k in range(proof.left):
            try:
                ptx = t.inj.render(join_constants(proof.texts, proof.sets[k]), bind=t.bind)
                futures[pool.submit(_link, ptx, t.arch, t.link_options)] = (proof, k)
            except Exception as e:   # noqa: BLE001 - its variants then say what is wrong
                proof.fail(e)
                proof.left -= 1
        if proof.left == 0:
            settle(proof)

    def settle(proof: _Proof) -> None:
        """Both assemblies of a shape are in: patch its variants, or assemble them."""
        plan = proof.plan if isinstance(proof.plan, Plan) else None
        if proof.plan is UNKNOWN:
            plan = None if proof.failed else make_plan(proof.kinds, *proof.cubins, proof.sets)
            if plan is None and not proof.failed and proof.attempts < ATTEMPTS:
                prove(proof)
                return
            if not proof.transient:           # a refused job or a dead worker proves nothing
                t._keep_plan(proof.key, plan)
        for i, v, values in proof.members:
            if plan is None:
                assemble(i, v)
            else:
                v._store(plan.apply(values))
                finish(i)

    try:
        for i, v in plain:
            assemble(i, v)
        for proof in proofs.values():
            if proof.plan is UNKNOWN:
                prove(proof)
            else:                                 # proven before: patch now
                settle(proof)
        while futures:
            finished, _ = wait(list(futures), return_when=FIRST_COMPLETED)
            for fut in finished:
                job, k = futures.pop(fut)
                if isinstance(job, _Proof):
                    try:
                        job.cubins[k] = fut.result()
                    except Exception as e:   # noqa: BLE001 - its variants then say what is wrong
                        job.fail(e)
                    job.left -= 1
                    if job.left == 0:
                        settle(job)
                    continue
                try:
                    job._store(fut.result())
                except Exception as e:   # noqa: BLE001
                    _retry_plain(job, e, failed, k)
                finish(k)
    finally:
        if own:
            pool.shutdown(wait=True)
        report(None)
    for i in failed:
        results[i] = failed[i] if errors == "return" else None
    if failed and errors == "raise":
        lines = [f"  variant {i}: {type(e).__name__}: {summary(e)}"
                 for i, e in sorted(failed.items())[:10]]
        more = f"\n  ... and {len(failed) - 10} more" if len(failed) > 10 else ""
        raise BuildError(f"{len(failed)} of {total} variant(s) failed to build "
                         f"({t.name}, {t.arch}):\n" + "\n".join(lines) + more,
                         errors=failed, variants=results)
    return results


def _sort_by_shape(t: Template, pending: list[tuple[int, Variant]]):
    """build_many's split of the variants to build: those to assemble as written, and per
    shape those to patch (shapes already proven, seen before, or twice in the batch)."""
    plain: list[tuple[int, Variant]] = []
    proofs: dict[str, _Proof] = {}
    for i, v in pending:
        shape = t._shape(v.stubs)
        if shape is None:
            plain.append((i, v))
            continue
        key, texts, values = shape
        proof = proofs.get(key)
        if proof is None:
            state = t._plan_state(key, see=False)
            if state is None:
                plain.append((i, v))
                continue
            proof = proofs[key] = _Proof(key, texts, signs(values, kinds_of(texts)),
                                         UNKNOWN if state is SEEN else state)
            proof.members.append((i, v, values))
            proof.seen = state is SEEN
        else:
            proof.members.append((i, v, values))
    for key, proof in list(proofs.items()):
        if proof.plan is UNKNOWN and len(proof.members) == 1 and not proof.seen:
            t._plan_state(key, see=True)      # first of its shape: as written
            plain.append(proof.members[0][:2])
            del proofs[key]
    plain.sort(key=lambda iv: iv[0])            # jobs go out in batch order
    return plain, proofs


class _Proof:
    """build_many's record of a shape whose variants wait for its plan."""

    __slots__ = ("key", "texts", "pattern", "kinds", "members", "plan", "sets", "cubins", "left",
                 "failed", "seen", "attempts", "transient")

    def __init__(self, key: str, texts, pattern: str, plan):
        self.key, self.texts, self.pattern, self.plan = key, texts, pattern, plan
        self.kinds = kinds_of(texts)
        self.members: list[tuple[int, Variant, tuple[int, ...]]] = []
        self.sets = None
        self.cubins: list[bytes | None] = [None, None]
        self.left, self.failed, self.seen, self.attempts = 2, False, False, 0
        self.transient = False

    def fail(self, e: BaseException) -> None:
        """A trial assembly failed: the shape is not patchable, unless the executor failed."""
        self.failed = True
        self.transient = self.transient or not isinstance(e, NumptxError)


class _Inline:
    """An executor that runs each job as it is submitted (a batch of one job)."""

    def submit(self, fn, *args):
        fut: Future = Future()
        try:
            fut.set_result(fn(*args))
        except BaseException as e:   # noqa: BLE001 - handed over like a pool's future
            fut.set_exception(e)
        return fut


def _retry_plain(v: Variant, e: BaseException, failed: dict, i: int) -> None:
    """build_many's failure path: the plain rendering's cubin, or its error in ``failed``."""
    try:
        v._store(v._unbound(e))
    except Exception as err:   # noqa: BLE001 - reported with the index
        failed[i] = _numptx_error(err)


def _numptx_error(e: Exception, what: str = "") -> NumptxError:
    """``e`` as it goes into a BuildError: numptx's own errors as they are, anything else (a
    broken executor, a dead worker) wrapped, the original kept as ``__cause__``."""
    if isinstance(e, NumptxError):
        return e
    err = NumptxError(f"{what + ': ' if what else ''}{type(e).__name__}: {e}")
    err.__cause__ = e
    return err


def summary(e: BaseException) -> str:
    """One line for a failed variant: the message's first line, and the next one when the
    first only introduces it (a LinkError's "invalid stub for site ...:" + the stub line)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    if not lines:
        return ""
    if lines[0].endswith(":") and len(lines) > 1 and not lines[1].startswith("---"):
        return f"{lines[0]} {lines[1]}"
    return lines[0]


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
