"""Templates and variants: a compiled kernel with sites, and that kernel with stubs injected.

::

    tmpl = nx.CudaTemplate(SRC, entry="kernel", arch="sm_90")     # NVRTC once
    v = tmpl.inject(combine="add.f32 %v_z, %v_x, %v_y;")           # a Variant
    v.ptx, v.cubin, v.sites, v.entry                                 # cubin: nvJitLink + cache
    v[grid, block](out, a, b, n)                                     # launch (numba-cuda, a GPU)
    variants = tmpl.build_many([{"combine": s} for s in stubs])      # in parallel

A stub may be PTX text (``str``, including Stack PTX stubs), a Stack PTX program (a list of
``numptx.stack_ptx`` ops or its uint64 encoding, compiled with ``sp.compile(prog, site=site)``),
or an object with a ``.stub(site)`` method (``@nx.ptx_expr`` expressions). Numba kernels
(:func:`numptx.kernel`) give templates of the same class. Variants of CUDA C++ and PTX templates
launch through numba-cuda (:mod:`numptx.jit.cuda_launch`; ``tmpl.params`` lists what the kernel
takes).
"""
from __future__ import annotations

import logging
import os
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ThreadPoolExecutor, wait
from functools import cached_property
from typing import Any

from ..errors import LinkError, NumptxError, RenderError
from ..inject import PtxInject, Site
from .arch import normalize_arch
from .cache import CubinCache, cache_option, default_cache, template_digest, variant_key
from .nvjitlink import ptx_to_cubin
from .options import option_list
from .patch import (Plan, folds_constants, join_constants, make_plan, patchable, sentinel_sets,
                    shape_text, signs, split_constants)
from .params import Param, kernel_params

__all__ = ["Template", "CudaTemplate", "Variant", "BuildError", "resolve_stub", "find_entries"]

log = logging.getLogger(__name__)

_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([A-Za-z_$.%][\w$.]*)", re.M)
_TARGET = re.compile(r"^\s*\.target\s+(sm_\d+[af]?)", re.M)
_EXTERN = re.compile(r"^\s*\.extern\s+\.func\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)", re.M)


class BuildError(NumptxError):
    """Some variants of a :meth:`Template.build_many` batch failed. ``errors`` maps each failing
    index to its exception; ``variants`` holds the built variants (None where one failed)."""

    def __init__(self, message: str, *, errors: dict[int, BaseException], variants: list):
        super().__init__(message)
        self.errors, self.variants = errors, variants


def find_entries(ptx: str) -> list[str]:
    """Names of the kernels (``.entry``) of a PTX text, in order."""
    return _ENTRY.findall(ptx)


def resolve_stub(stub: Any, site: Site) -> str:
    """PTX text of ``stub`` for ``site`` (see the module documentation for what a stub may be)."""
    if isinstance(stub, str):       # numptx's own compiled stubs (str subclasses) are well formed
        return _checked_text(stub, site.name) if type(stub) is str else str(stub)
    make = getattr(stub, "stub", None)
    if callable(make):
        out = make(site)
        text = getattr(out, "text", out)
        if not isinstance(text, str):
            raise NumptxError(f"site {site.name!r}: {type(stub).__name__}.stub(site) returned "
                              f"{type(out).__name__}, not PTX text")
        return str(text)
    if isinstance(stub, (list, tuple)) or type(stub).__name__ == "ndarray":
        from .. import stack_ptx as sp
        return str(sp.compile(stub, site=site))
    raise NumptxError(f"site {site.name!r}: a stub is PTX text, a Stack PTX program or an object "
                      f"with .stub(site), not {type(stub).__name__}")


_UNKNOWN, _SEEN = object(), object()     # plan states besides a Plan and None (not patchable)
_MAX_PLANS = 1024                        # shapes remembered per template (each holds a cubin)
# proofs per shape: ptxas picks between equivalent encodings by a constant's magnitude now and
# then, which fails a proof without making patching wrong; a second pair of constants settles it
_ATTEMPTS = 2

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def _checked_text(text: str, site: str) -> str:
    """A raw PTX stub, refused early where it cannot work in any template: text that is not
    UTF-8, or braces that do not pair (a stray ``}`` closes the kernel's own scope, and ptxas
    then blames lines the user never wrote)."""
    try:
        text.encode()
    except UnicodeEncodeError as e:
        raise RenderError(f"the stub of site {site!r} is not encodable text: {e}") from None
    if "{" in text or "}" in text:
        depth = 0
        for lineno, line in enumerate(_COMMENT.sub(lambda m: "\n" * m.group().count("\n"),
                                                   text).split("\n"), 1):
            for ch in line:
                depth += (ch == "{") - (ch == "}")
                if depth < 0:
                    raise LinkError(f"invalid stub for site {site!r}: stub line {lineno} "
                                    f"{text.splitlines()[lineno - 1].strip()!r} closes a '}}' "
                                    f"the stub did not open", site=site,
                                    stub_line=text.splitlines()[lineno - 1].strip())
        if depth:
            raise LinkError(f"invalid stub for site {site!r}: {depth} '{{' left open at the end "
                            f"of the stub", site=site)
    return text


def _merge(stubs: Mapping[str, Any] | None, kw: Mapping[str, Any]) -> dict[str, Any]:
    if stubs is not None and not isinstance(stubs, Mapping):
        raise RenderError(f"stubs are given as a mapping site name -> stub (or keywords), not "
                          f"{type(stubs).__name__}")
    both = dict(stubs or {})
    dup = both.keys() & kw.keys()
    if dup:
        raise RenderError(f"stub for site(s) {sorted(dup)} given twice")
    both.update(kw)
    return both


class Template:
    """PTX with injection sites, compiled once: ``ptx``, ``sites``, ``entry`` (the kernel name in
    the PTX), ``arch`` (what variants are assembled for) and the nvJitLink ``link_options``.

    ``bind=True`` (the default) renders each stub straight into the registers the kernel hands
    its site, without the site's copy frame, wherever the C core can show that changes nothing:
    ptxas assembles the same computation from fewer instructions, 10–30 % sooner on a 512-site
    GEMM. ``bind=False`` keeps the frames.

    ``patch_constants=True`` (the default) assembles variants that differ from an earlier one
    only in f32 constants by writing the constants into a proven cubin of their shape, in
    microseconds (see :mod:`numptx.jit.patch`); ``False`` assembles every variant."""

    def __init__(self, ptx: str, *, entry: str | None = None, arch: Any = None,
                 link_options: Iterable[str] = (), producer: str = "",
                 cache: CubinCache | None | bool = True, bind: bool = True,
                 patch_constants: bool = True):
        if not isinstance(ptx, str):
            raise NumptxError(f"a template is PTX text (str), not {type(ptx).__name__}")
        if entry is not None and not isinstance(entry, str):
            raise NumptxError(f"entry= names the kernel (str), not {type(entry).__name__}")
        self.ptx = ptx
        #: render stubs straight into the operand registers (see :meth:`PtxInject.render`)
        self.bind = bool(bind)
        #: variants that differ only in f32 constants are patched, not assembled
        self.patch_constants = bool(patch_constants)
        # shape key -> Plan, None (not patchable) or _SEEN (one variant assembled as written)
        self._plans: OrderedDict[str, Any] = OrderedDict()
        self._plan_locks: dict[str, threading.Lock] = {}
        self._plans_lock = threading.Lock()
        self.inj = PtxInject(ptx)
        entries = find_entries(ptx)
        if entry is None:
            if len(entries) != 1:
                raise NumptxError(f"the PTX has {len(entries)} kernels ({', '.join(entries) or 'none'}): "
                                  f"name one with entry=")
            entry = entries[0]
        elif entry not in entries:
            hint = (" (C++ names are mangled: declare the kernel extern \"C\")"
                    if any(entry in e for e in entries) else "")
            raise NumptxError(f"no kernel {entry!r} in the PTX; it has: "
                              f"{', '.join(entries) or 'none'}{hint}")
        self.entry = entry
        if arch is None:
            m = _TARGET.search(ptx)
            arch = m.group(1) if m else "sm_90"
        number, suffix = normalize_arch(arch)
        self.arch = f"sm_{number}{suffix}"
        self.link_options = option_list(link_options, "link_options")
        #: functions the PTX declares but does not define (numba links them from other files)
        self.externs = tuple(_EXTERN.findall(ptx))
        self.digest = template_digest(ptx, producer)
        self._cache_opt = cache_option(cache)

    @property
    def cache(self) -> CubinCache | None:
        c = self._cache_opt
        if c is True:
            return default_cache()
        return c or None

    @property
    def sites(self) -> Mapping[str, Site]:
        return self.inj.sites

    @property
    def name(self) -> str:
        """What messages call the kernel: its entry name here, the Python name for numba's."""
        return self.entry

    def _explain(self, e: BaseException) -> BaseException:
        """Add what the template lacks to a link error about undefined functions."""
        if isinstance(e, NumptxError) and self.externs and "Undefined reference" in str(e):
            e.args = (f"{e.args[0] if e.args else e}\nthe template calls functions defined "
                      f"elsewhere ({', '.join(self.externs[:5])}): numba links them from separate "
                      f"files (e.g. numba.cuda.bf16 helpers), which numptx variants do not link "
                      f"yet; avoid those calls in kernels with sites",) + tuple(e.args[1:])
        return e

    # -- constant patching (numptx.jit.patch) -----------------------------------------------------
    def _shape(self, stubs: Sequence[str]):
        """(shape key, texts, constants) of stubs, or None when they have no f32 constant or
        patching is off."""
        if not self.patch_constants:
            return None
        texts, values = split_constants(stubs)
        if not values or not patchable(values):
            return None
        key = variant_key(self.digest, [*shape_text(texts), signs(values)], self.arch,
                          self.link_options, bind=self.bind)
        return key, texts, values

    def _plan_state(self, key: str, *, see: bool):
        """The plan state of a shape; ``see`` marks an unknown shape as seen once."""
        with self._plans_lock:
            state = self._plans.get(key, _UNKNOWN)
            if state is _UNKNOWN and see:
                self._remember_plan(key, _SEEN)
            elif state is not _UNKNOWN:
                self._plans.move_to_end(key)
            return state

    def _remember_plan(self, key: str, state) -> None:
        self._plans[key] = state
        self._plans.move_to_end(key)
        while len(self._plans) > _MAX_PLANS:
            old, _ = self._plans.popitem(last=False)
            self._plan_locks.pop(old, None)

    def _assemble_texts(self, texts: list[str]) -> bytes:
        return ptx_to_cubin(self.inj.render(texts, bind=self.bind), self.arch,
                            options=self.link_options)

    def _prove(self, key: str, texts, pattern: str):
        """Make (once, whichever thread comes first) the plan of a shape; None if the shape is
        not patchable or does not assemble."""
        with self._plans_lock:
            lock = self._plan_locks.setdefault(key, threading.Lock())
        with lock:
            state = self._plan_state(key, see=False)
            if state is not _UNKNOWN and state is not _SEEN:
                return state
            sets = sentinel_sets(pattern)
            why = folds_constants(join_constants(texts, sets[0]))
            if why:
                log.debug("numptx: %s: constants not patchable (%s)", self.name, why)
                with self._plans_lock:
                    self._remember_plan(key, None)
                return None
            plan = None
            try:                          # the two assemblies at once: nvJitLink frees the GIL
                with ThreadPoolExecutor(1, thread_name_prefix="numptx-prove") as ex:
                    for attempt in range(_ATTEMPTS):
                        if attempt:
                            sets = sentinel_sets(pattern)
                        second = ex.submit(self._assemble_texts, join_constants(texts, sets[1]))
                        first = self._assemble_texts(join_constants(texts, sets[0]))
                        plan = make_plan(len(pattern), first, second.result(), sets)
                        if plan is not None:
                            break
            except NumptxError as e:      # the variants themselves will say what is wrong
                log.debug("numptx: %s: constants not patchable (%s)", self.name, _summary(e))
            with self._plans_lock:
                self._remember_plan(key, plan)
            log.debug("numptx: %s: shape %s %s", self.name, key[:12],
                      "patchable" if plan else "not patchable: assembled variant by variant")
            return plan

    def _sort_by_shape(self, pending: list[tuple[int, Variant]]):
        """build_many's split of the variants to build: those to assemble as written, and per
        shape those to patch (shapes already proven, seen before, or twice in the batch)."""
        plain: list[tuple[int, Variant]] = []
        proofs: dict[str, _Proof] = {}
        for i, v in pending:
            shape = self._shape(v.stubs)
            if shape is None:
                plain.append((i, v))
                continue
            key, texts, values = shape
            proof = proofs.get(key)
            if proof is None:
                state = self._plan_state(key, see=False)
                if state is None:
                    plain.append((i, v))
                    continue
                proof = proofs[key] = _Proof(key, texts, signs(values),
                                             _UNKNOWN if state is _SEEN else state)
                proof.members.append((i, v, values))
                proof.seen = state is _SEEN
            else:
                proof.members.append((i, v, values))
        for key, proof in list(proofs.items()):
            if proof.plan is _UNKNOWN and len(proof.members) == 1 and not proof.seen:
                self._plan_state(key, see=True)      # first of its shape: as written
                plain.append(proof.members[0][:2])
                del proofs[key]
        plain.sort(key=lambda iv: iv[0])            # jobs go out in batch order
        return plain, proofs

    def _patched(self, stubs: Sequence[str]) -> bytes | None:
        """The cubin of stubs by constant patching, or None (assemble them as written)."""
        shape = self._shape(stubs)
        if shape is None:
            return None
        key, texts, values = shape
        state = self._plan_state(key, see=True)
        if state is _UNKNOWN:             # first of its shape: ptxas sees its own constants
            return None
        if state is _SEEN:
            state = self._prove(key, texts, signs(values))
        return None if state is None else state.apply(values)

    @cached_property
    def params(self) -> tuple[Param, ...]:
        """The kernel's parameters, read from the PTX ``.entry`` (see :mod:`numptx.jit.params`)."""
        return kernel_params(self.ptx, self.entry)

    def _launcher(self, variant: Variant, config):
        from .cuda_launch import CudaLaunch
        return CudaLaunch(variant, config)

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.entry} {self.arch}: "
                f"{', '.join(s.signature for s in self.sites.values()) or 'no sites'}>")

    # -- variants ---------------------------------------------------------------------------------
    def resolve(self, stubs: Mapping[str, Any] | None = None, /, *, missing: str = "error",
                **kw: Any) -> list[str]:
        """Stub texts in site order (``missing="empty"`` leaves sites without one as no-ops)."""
        if missing not in ("error", "empty"):
            raise RenderError(f"missing={missing!r}: use 'error' or 'empty'")
        given = _merge(stubs, kw)
        unknown = [n for n in given if n not in self.sites]
        if unknown:
            raise RenderError(f"no site named {', '.join(map(repr, unknown))} "
                              f"(sites: {', '.join(map(repr, self.sites)) or 'none'})",
                              unknown=tuple(unknown))
        texts = []
        for name, site in self.sites.items():
            stub = given.get(name)
            if stub is None:
                if missing != "empty":
                    raise RenderError(f"no stub for site {name!r} (pass missing='empty' to leave "
                                      f"it a no-op)", missing=(name,))
                texts.append("")
            else:
                texts.append(resolve_stub(stub, site))
        return texts

    def inject(self, stubs: Mapping[str, Any] | None = None, /, *, missing: str = "error",
               **kw: Any) -> Variant:
        """A :class:`Variant`: this template with a stub at each site (by name, as a mapping
        and/or keywords). Rendering and assembly happen when ``.ptx``/``.cubin`` are read."""
        return Variant(self, self.resolve(stubs, missing=missing, **kw))

    def build_many(self, batch: Iterable[Mapping[str, Any]], *, executor: Executor | None = None,
                   progress: bool | Callable[[int, int], Any] = False, errors: str = "raise",
                   missing: str = "error", max_workers: int | None = None) -> list:
        """Build the cubins of a batch of stub dictionaries in parallel; return the variants in
        batch order, their ``cubin`` ready.

        The default executor is a thread pool (nvJitLink releases the GIL); any
        ``concurrent.futures.Executor`` works, process pools included (workers get PTX text and
        return cubin bytes). Cached variants are not rebuilt. A failing variant does not stop
        the others: with ``errors="raise"`` a :class:`BuildError` naming each failing index is
        raised once all are done, with ``errors="return"`` its exception takes its place in the
        list. ``progress``: True shows a tqdm bar (a counter on stderr without tqdm); a
        callable gets ``(done, total)``.
        """
        if errors not in ("raise", "return"):
            raise NumptxError(f"build_many(errors={errors!r}): use 'raise' or 'return'")
        if max_workers is not None and (not isinstance(max_workers, int) or isinstance(max_workers, bool)
                                        or max_workers < 1):
            raise NumptxError(f"build_many(max_workers={max_workers!r}): a positive int or None")
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
                v = self.inject(stubs, missing=missing)
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
        plain, proofs = self._sort_by_shape(pending)
        jobs = len(plain) + 2 * sum(1 for p in proofs.values() if p.plan is _UNKNOWN)
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
                    futures[pool.submit(_link, ptx, self.arch, self.link_options)] = (v, i)
                except Exception as e:   # noqa: BLE001 - a refused job fails its variant only
                    raise _numptx_error(e, "the executor did not take the job") from e
            except Exception as e:   # noqa: BLE001 - reported with the index
                finish(i, e)

        def prove(proof: _Proof) -> None:
            """Send a shape's two trial assemblies (with a fresh pair of constant sets)."""
            proof.attempts += 1
            proof.sets = sentinel_sets(proof.pattern)
            proof.left = 2
            if folds_constants(join_constants(proof.texts, proof.sets[0])):
                proof.failed, proof.left = True, 0
            for k in range(proof.left):
                try:
                    ptx = self.inj.render(join_constants(proof.texts, proof.sets[k]), bind=self.bind)
                    futures[pool.submit(_link, ptx, self.arch, self.link_options)] = (proof, k)
                except Exception:   # noqa: BLE001 - its variants then say what is wrong
                    proof.failed = True
                    proof.left -= 1
            if proof.left == 0:
                settle(proof)

        def settle(proof: _Proof) -> None:
            """Both assemblies of a shape are in: patch its variants, or assemble them."""
            plan = proof.plan if isinstance(proof.plan, Plan) else None
            if proof.plan is _UNKNOWN:
                plan = None if proof.failed else make_plan(proof.n, *proof.cubins, proof.sets)
                if plan is None and not proof.failed and proof.attempts < _ATTEMPTS:
                    prove(proof)
                    return
                with self._plans_lock:
                    self._remember_plan(proof.key, plan)
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
                if proof.plan is _UNKNOWN:
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
                        except Exception:   # noqa: BLE001 - its variants then say what is wrong
                            job.failed = True
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
            lines = [f"  variant {i}: {type(e).__name__}: {_summary(e)}"
                     for i, e in sorted(failed.items())[:10]]
            more = f"\n  ... and {len(failed) - 10} more" if len(failed) > 10 else ""
            raise BuildError(f"{len(failed)} of {total} variant(s) failed to build "
                             f"({self.name}, {self.arch}):\n" + "\n".join(lines) + more,
                             errors=failed, variants=results)
        return results


class _Proof:
    """build_many's record of a shape whose variants wait for its plan."""

    __slots__ = ("key", "texts", "pattern", "n", "members", "plan", "sets", "cubins", "left",
                 "failed", "seen", "attempts")

    def __init__(self, key: str, texts, pattern: str, plan):
        self.key, self.texts, self.pattern, self.n, self.plan = key, texts, pattern, len(pattern), plan
        self.members: list[tuple[int, Variant, tuple[int, ...]]] = []
        self.sets = None
        self.cubins: list[bytes | None] = [None, None]
        self.left, self.failed, self.seen, self.attempts = 2, False, False, 0


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


def _summary(e: BaseException) -> str:
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


class Variant:
    """A template with its stubs: ``ptx`` (rendered on first use), ``cubin`` (assembled by
    nvJitLink on first use, through the cubin cache), ``sites``, ``entry``, ``arch``, ``key``."""

    def __init__(self, template: Template, stubs: Sequence[str]):
        self.template = template
        self.stubs = tuple(stubs)
        self._ptx: str | None = None
        self._cubin: bytes | None = None
        self._key: str | None = None
        self._lock = threading.Lock()

    @property
    def sites(self) -> Mapping[str, Site]:
        return self.template.sites

    @property
    def entry(self) -> str:
        return self.template.entry

    @property
    def arch(self) -> str:
        return self.template.arch

    @property
    def stub_map(self) -> dict[str, str]:
        """Stub text by site name."""
        return dict(zip(self.template.sites, self.stubs))

    @property
    def key(self) -> str:
        """The cache key of this variant's cubin."""
        if self._key is None:
            t = self.template
            self._key = variant_key(t.digest, self.stubs, t.arch, t.link_options, bind=t.bind)
        return self._key

    @property
    def ptx(self) -> str:
        if self._ptx is None:
            self._ptx = self.template.inj.render(list(self.stubs), bind=self.template.bind)
        return self._ptx

    def _unbound(self, e: BaseException) -> bytes:
        """Assembly of the bound PTX failed with ``e``: assemble the plain rendering, whose
        error (if any) quotes the stub as written. Plain PTX that assembles means binding was
        wrong for this template: logged, and the plain cubin is used."""
        t = self.template
        if not (t.bind and isinstance(e, NumptxError)):
            raise t._explain(e)
        plain = t.inj.render(list(self.stubs))
        if plain == self.ptx:
            raise t._explain(e)
        try:
            cubin = ptx_to_cubin(plain, t.arch, options=t.link_options)
        except NumptxError as plain_error:
            raise t._explain(plain_error) from None
        log.warning("numptx: %s: the stubs bound to the operand registers did not assemble but "
                    "the plain rendering did; using it (please report this with the template): %s",
                    t.entry, _summary(e))
        self._ptx = plain
        return cubin

    def _lookup(self) -> bytes | None:
        if self._cubin is None:
            cache = self.template.cache
            if cache is not None:
                self._cubin = cache.get(self.key, context=f"{self.entry} {self.arch}, template "
                                        f"{self.template.digest[:12]}")
        return self._cubin

    def _store(self, cubin: bytes) -> None:
        self._cubin = cubin
        cache = self.template.cache
        if cache is not None:
            cache.put(self.key, cubin)

    @property
    def cubin(self) -> bytes:
        if self._cubin is None:
            with self._lock:
                if self._lookup() is None:
                    t = self.template
                    cubin = t._patched(self.stubs)
                    if cubin is None:
                        try:
                            cubin = ptx_to_cubin(self.ptx, t.arch, options=t.link_options)
                        except NumptxError as e:
                            cubin = self._unbound(e)
                    self._store(cubin)
        return self._cubin

    def __getitem__(self, config):
        return self.template._launcher(self, config)

    def __repr__(self) -> str:
        return f"<Variant {self.entry} {self.arch} key={self.key[:12]}>"


class CudaTemplate(Template):
    """A CUDA C++ kernel with sites, compiled once with NVRTC (:func:`numptx.cuda_to_ptx`).

    ``entry`` names the kernel (``extern "C"``; default ``"kernel"``, None: the only kernel in the
    PTX); variants are assembled for ``arch`` (default: the compile architecture). ``options``
    go to NVRTC, ``link_options`` to nvJitLink. ``params`` lists the kernel's parameters; ``variant[grid, block](*args)`` launches
    a variant on the GPU through numba-cuda (:mod:`numptx.jit.cuda_launch`).
    """

    def __init__(self, src: str, entry: str | None = "kernel", *, arch: Any = "sm_90",
                 options: Iterable[str] = (), link_options: Iterable[str] = (),
                 name: str = "numptx_template.cu", include_paths: Iterable[str] = (),
                 cache: CubinCache | None | bool = True, bind: bool = True,
                 patch_constants: bool = True):
        from .nvrtc import cuda_to_ptx, nvrtc_version
        self.src = src
        ptx = cuda_to_ptx(src, arch=arch, options=options, name=name, include_paths=include_paths)
        super().__init__(ptx, entry=entry, arch=arch, link_options=link_options,
                         producer=f"nvrtc {nvrtc_version()}", cache=cache, bind=bind,
                         patch_constants=patch_constants)

    @cached_property
    def params(self) -> tuple[Param, ...]:
        """The kernel's parameters: names and C types from the source, checked against the PTX
        (which decides where the source cannot be read, e.g. macros or templates)."""
        return kernel_params(self.ptx, self.entry, src=self.src)
