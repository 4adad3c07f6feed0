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
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from functools import cached_property
from typing import Any

from ..errors import LinkError, NumptxError, RenderError
from ..inject import PtxInject, Site
from .arch import normalize_arch
from .build import BuildError, build_many, summary
from .cache import CubinCache, cache_option, default_cache, template_digest, variant_key
from .nvjitlink import ptx_to_cubin
from .options import option_list
from .params import Param, kernel_params
from . import patch as _patch
from .patch import (ATTEMPTS, SEEN, UNKNOWN, Plan, folds_constants, join_constants, kinds_of,
                    make_plan, patchable, plan_key, sentinel_sets, shape_text, signs,
                    split_constants)

__all__ = ["Template", "CudaTemplate", "Variant", "BuildError", "resolve_stub", "find_entries"]

log = logging.getLogger(__name__)

_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([A-Za-z_$.%][\w$.]*)", re.M)
_TARGET = re.compile(r"^\s*\.target\s+(sm_\d+[af]?)", re.M)
_EXTERN = re.compile(r"^\s*\.extern\s+\.func\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)", re.M)


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


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def _find_all(text: str, ch: str) -> list[tuple[int, str]]:
    """(position, ch) of each ``ch`` in ``text`` (str.find: C speed, one call per hit)."""
    out, i = [], text.find(ch)
    while i >= 0:
        out.append((i, ch))
        i = text.find(ch, i + 1)
    return out


def _checked_text(text: str, site: str) -> str:
    """A raw PTX stub, refused early where it cannot work in any template: text that is not
    UTF-8, or braces that do not pair (a stray ``}`` closes the kernel's own scope, and ptxas
    then blames lines the user never wrote). Runs on every inject: only the braces are walked."""
    try:
        text.encode()
    except UnicodeEncodeError as e:
        raise RenderError(f"the stub of site {site!r} is not encodable text: {e}") from None
    if "{" not in text and "}" not in text:
        return text
    code = _COMMENT.sub(lambda m: "\n" * m.group().count("\n"), text) if "/" in text else text
    depth = 0
    for pos, ch in sorted(_find_all(code, "{") + _find_all(code, "}")):
        depth += 1 if ch == "{" else -1
        if depth < 0:
            lineno = code.count("\n", 0, pos) + 1
            line = text.splitlines()[lineno - 1].strip()
            raise LinkError(f"invalid stub for site {site!r}: stub line {lineno} {line!r} closes "
                            f"a '}}' the stub did not open", site=site, stub_line=line)
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
    only in f32 or f64 constants by writing the constants into a proven cubin of their shape, in
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
        #: variants that differ only in f32/f64 constants are patched, not assembled
        self.patch_constants = bool(patch_constants)
        # shape key -> Plan, None (not patchable) or SEEN (one variant assembled as written)
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
        """(shape key, texts, constants) of stubs, or None when they have no float constant or
        patching is off."""
        if not self.patch_constants:
            return None
        texts, values = split_constants(stubs)
        kinds = kinds_of(texts)
        if not values or not patchable(values, kinds):
            return None
        key = variant_key(self.digest, [*shape_text(texts), signs(values, kinds)], self.arch,
                          self.link_options, bind=self.bind)
        return key, texts, values

    def _plan_state(self, key: str, *, see: bool):
        """The plan state of a shape (memory, then a plan another process proved, from the
        cache); ``see`` marks an unknown shape as seen once."""
        with self._plans_lock:
            state = self._plans.get(key, UNKNOWN)
            if state is not UNKNOWN:
                self._plans.move_to_end(key)
                return state
        cache = self.cache
        data = None if cache is None else cache.get(plan_key(key), count=False)
        plan = None if data is None else Plan.from_bytes(data)
        with self._plans_lock:
            state = self._plans.get(key, UNKNOWN)
            if state is UNKNOWN and (plan is not None or see):
                state = plan if plan is not None else UNKNOWN
                self._remember_plan(key, plan if plan is not None else SEEN)
            return state

    def _keep_plan(self, key: str, plan) -> None:
        """Remember a proof's outcome; a plan also goes to the cache for other processes."""
        with self._plans_lock:
            self._remember_plan(key, plan)
        if plan is not None and self.cache is not None:
            self.cache.put(plan_key(key), plan.to_bytes())

    def _remember_plan(self, key: str, state) -> None:
        self._plans[key] = state
        self._plans.move_to_end(key)
        while len(self._plans) > _patch.MAX_PLANS:
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
            if state is not UNKNOWN and state is not SEEN:
                return state
            kinds = kinds_of(texts)
            sets = sentinel_sets(pattern, kinds)
            why = folds_constants(join_constants(texts, sets[0]))
            if why:
                log.debug("numptx: %s: constants not patchable (%s)", self.name, why)
                with self._plans_lock:
                    self._remember_plan(key, None)
                return None
            plan = None
            try:                          # the two assemblies at once: nvJitLink frees the GIL
                with ThreadPoolExecutor(1, thread_name_prefix="numptx-prove") as ex:
                    for attempt in range(ATTEMPTS):
                        if attempt:
                            sets = sentinel_sets(pattern, kinds)
                        second = ex.submit(self._assemble_texts, join_constants(texts, sets[1]))
                        first = self._assemble_texts(join_constants(texts, sets[0]))
                        plan = make_plan(kinds, first, second.result(), sets)
                        if plan is not None:
                            break
            except NumptxError as e:      # the variants themselves will say what is wrong
                log.debug("numptx: %s: constants not patchable (%s)", self.name, summary(e))
            self._keep_plan(key, plan)
            log.debug("numptx: %s: shape %s %s", self.name, key[:12],
                      "patchable" if plan else "not patchable: assembled variant by variant")
            return plan

    def _patched(self, stubs: Sequence[str]) -> bytes | None:
        """The cubin of stubs by constant patching, or None (assemble them as written)."""
        shape = self._shape(stubs)
        if shape is None:
            return None
        key, texts, values = shape
        state = self._plan_state(key, see=True)
        if state is UNKNOWN:             # first of its shape: ptxas sees its own constants
            return None
        if state is SEEN:
            state = self._prove(key, texts, signs(values, kinds_of(texts)))
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
        return build_many(self, batch, executor=executor, progress=progress, errors=errors,
                          missing=missing, max_workers=max_workers)


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
                    t.entry, summary(e))
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
