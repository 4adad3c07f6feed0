"""Templates and variants: a compiled kernel with sites, and that kernel with stubs injected.

::

    tmpl = nx.CudaTemplate(SRC, entry="kernel", arch="sm_90")     # NVRTC once
    v = tmpl.inject(combine="add.f32 %v_z, %v_x, %v_y;")           # a Variant
    v.ptx, v.cubin, v.sites, v.entry                                 # cubin: nvJitLink + cache
    v[grid, block](out, a, b, n)                                     # launch (numba-cuda, a GPU)
    v.for_arch("sm_100")                                             # the same stubs, for sm_100
    variants = tmpl.build_many([{"combine": s} for s in stubs])      # in parallel

A stub may be PTX text (``str``, including Stack PTX stubs), a Stack PTX program (a list of
``numptx.stack_ptx`` ops or its uint64 encoding, compiled with ``sp.compile(prog, site=site)``),
or an object with a ``.stub(site)`` method (``@nx.ptx_expr`` expressions). Numba kernels
(:func:`numptx.kernel`) give templates of the same class. Variants of CUDA C++ and PTX templates
launch through numba-cuda (:mod:`numptx.jit.templates.cuda_launch`; ``tmpl.params`` lists what the kernel
takes).
"""
from __future__ import annotations

import copy
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from functools import cached_property
from typing import Any

from ...errors import NumptxError, RenderError
from ...inject import PtxInject, Site
from ...site_layout import GeneratedStub, hoist_module_lines
from ..compile.arch import normalize_arch
from ..compile.build import build_many
from ..compile.cache import CubinCache, cache_option, default_cache, template_digest, variant_key
from .cuda_launch import CudaLaunch, loaded_entry
from ..errors import BuildError, summary
from ..compile.nvjitlink import ptx_to_cubin
from ..compile.nvrtc import cuda_to_ptx, nvrtc_version
from ..compile.options import option_list
from ..populations.pack import DEFAULT_PER_MODULE, PER_KERNEL, Pack
from ..populations.pack import pack as _pack
from ..populations.pack import pack_many as _pack_many
from .params import Param, kernel_params
from ..compile.plans import BuildInfo, PlanBook, Shape
from ..compile.resources import CubinInspection
from .stubs import merge_stubs, resolve_stub
from ..targets import Language

# BuildError and resolve_stub are defined in .errors and .stubs; imported from here as ever
__all__ = ["Template", "CudaTemplate", "Variant", "BuildError", "resolve_stub", "find_entries"]

log = logging.getLogger(__name__)

_ARCH_LIKE = re.compile(r"(?:sm|compute|lto)_\d+[af]?\Z")    # an arch given as the entry
_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([A-Za-z_$.%][\w$.]*)", re.M)
_TARGET = re.compile(r"^\s*\.target\s+(sm_\d+[af]?)", re.M)
_EXTERN = re.compile(r"^\s*\.extern\s+\.func\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)", re.M)


def _declares_module_lines(stubs: Sequence[str]) -> bool:
    """A packed stub with a run-time constant table among ``stubs``: its constants live in the
    table, and a patch proof's trial texts (plain text) would lose the table's declaration."""
    return any(type(s) is GeneratedStub and s.module_lines for s in stubs)


def find_entries(ptx: str) -> list[str]:
    """Names of the kernels (``.entry``) of a PTX text, in order."""
    return _ENTRY.findall(ptx)


class Template:
    """PTX with injection sites, compiled once: ``ptx``, ``sites``, ``entry`` (the kernel name in
    the PTX), ``arch`` (what variants are assembled for) and the nvJitLink ``link_options``.

    ``bind=True`` (the default) renders each stub straight into the registers the kernel hands
    its site, without the site's copy frame, wherever the C core can show that changes nothing:
    ptxas assembles the same computation from fewer instructions, 10–30 % sooner on a 512-site
    GEMM. ``bind=False`` keeps the frames.

    ``patch_constants=True`` (the default) assembles variants that differ from an earlier one
    only in f32 or f64 constants by writing the constants into a proven cubin of their shape, in
    microseconds (see :mod:`numptx.jit.compile.patch`); ``False`` assembles every variant. The plans
    live in ``plans`` (a :class:`~numptx.jit.compile.plans.PlanBook`), used by ``variant.cubin`` and
    :meth:`build_many` alike.

    ``strict=True`` makes a raw PTX stub that never writes an out variable of its site an
    error (:class:`~numptx.jit.templates.stub_checks.UnwrittenOutputError`) when it is injected; by
    default it is a warning (:class:`~numptx.jit.templates.stub_checks.UnwrittenOutputWarning`): on a GPU
    the kernel would read whatever the register held.

    A template is a :class:`~numptx.jit.targets.Target` (what ``pack``, ``autotune``, fitness
    and the search take): ``language`` says what it was written in, ``per_signature`` is False
    (one compiled kernel) and :meth:`build_template` is itself."""

    #: what the kernel was written in (:data:`numptx.jit.targets.Language`)
    language: Language = "PTX"
    #: one compiled kernel (a numba kernel is one template per argument-type signature)
    per_signature = False

    def __init__(self, ptx: str, *, entry: str | None = None, arch: Any = None,
                 link_options: Iterable[str] = (), producer: str = "",
                 cache: CubinCache | None | bool = True, bind: bool = True,
                 patch_constants: bool = True, strict: bool = False):
        if not isinstance(ptx, str):
            raise NumptxError(f"a template is PTX text (str), not {type(ptx).__name__}")
        if entry is not None and not isinstance(entry, str):
            hint = (f"; {entry!r} looks like an architecture: pass arch={entry!r}"
                    if isinstance(entry, (int, tuple)) else "")
            raise NumptxError(f"entry= names the kernel (str), not {type(entry).__name__}{hint}")
        self.ptx = ptx
        #: render stubs straight into the operand registers (see :meth:`PtxInject.render`)
        self.bind = bool(bind)
        #: variants that differ only in f32/f64 constants are patched, not assembled
        self.patch_constants = bool(patch_constants)
        #: a raw stub that never writes an out variable: an error, not a warning
        self.strict = bool(strict)
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
        self._start(f"sm_{number}{suffix}")
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

    def build_template(self, *args: Any, device: tuple[int, int] | None = None) -> Template:
        """The template that builds this target's variants: itself, whatever the launch's
        arguments or device (:meth:`numptx.jit.targets.Target.build_template`)."""
        return self

    def _explain(self, e: BaseException) -> BaseException:
        """Add what the template lacks to a link error about undefined functions."""
        if isinstance(e, NumptxError) and self.externs and "Undefined reference" in str(e):
            e.args = (f"{e.args[0] if e.args else e}\nthe template calls functions defined "
                      f"elsewhere ({', '.join(self.externs[:5])}): numba links them from separate "
                      f"files (e.g. numba.cuda.bf16 helpers), which numptx variants do not link "
                      f"yet; avoid those calls in kernels with sites",) + tuple(e.args[1:])
        return e

    def _start(self, arch: str) -> None:
        """The state of a template for ``arch`` of its own: made by ``__init__`` and by
        :meth:`for_arch` (which shares everything else)."""
        self.arch = arch
        #: the constant-patch plans of this template's shapes (see :mod:`numptx.jit.compile.plans`)
        self.plans = PlanBook()
        self._retargets: dict[str, Template] = {}
        self._retarget_lock = threading.Lock()

    def for_arch(self, arch: Any) -> Template:
        """This template assembling its variants for ``arch``: the same PTX, sites and options
        (nvJitLink takes PTX to newer architectures; the arch is part of every cache key). Made
        once per architecture; ``self`` for its own."""
        number, suffix = normalize_arch(arch)
        name = f"sm_{number}{suffix}"
        if name == self.arch:
            return self
        with self._retarget_lock:
            t = self._retargets.get(name)
            if t is None:
                # a shallow copy shares the parsed PTX (and a subclass's source or kernel);
                # _start gives it plans and retargets of its own
                t = copy.copy(self)
                t._start(name)
                self._retargets[name] = t
        return t

    def key_of(self, stubs: Sequence[str]) -> str:
        """The cache key of this template's variant with ``stubs`` (texts in site order)."""
        return variant_key(self.digest, stubs, self.arch, self.link_options, bind=self.bind)

    def render(self, stubs: Sequence[str], *, bind: bool | None = None) -> str:
        """The PTX of the variant with ``stubs`` (texts in site order), bound to the operand
        registers unless ``bind`` (default: the template's ``bind``) is false. Module-scope
        lines come only from the ``module_lines`` of numptx's own packed stubs
        (:class:`~numptx.site_layout.GeneratedStub`), never from stub text."""
        stubs = list(stubs)
        ptx = self.inj.render(stubs, bind=self.bind if bind is None else bind)
        if _declares_module_lines(stubs):           # a packed stub's constant table
            ptx = hoist_module_lines(ptx, stubs)
        return ptx

    # -- constant patching (numptx.jit.compile.plans) -----------------------------------------------------
    def shape(self, stubs: Sequence[str]) -> Shape | None:
        """The constant-patch shape of the variant with ``stubs`` (see :mod:`numptx.jit.compile.plans`),
        or None when they have no float constant to patch or patching is off."""
        if not self.patch_constants or _declares_module_lines(stubs):
            return None
        return self.plans.shape(stubs, self.key_of)

    def split(self, stubs: Sequence[str]) -> tuple[Shape | None, str]:
        """:meth:`shape`, and why constants are not patched ("" when all are)."""
        if not self.patch_constants:
            return None, "patching is off (patch_constants=False)"
        if _declares_module_lines(stubs):
            return None, "a packed stub reads its constants from a run-time table"
        return self.plans.split(stubs, self.key_of, self.name)

    def _assemble_texts(self, texts: list[str]) -> bytes:
        return ptx_to_cubin(self.render(texts), self.arch, options=self.link_options)

    def _patched(self, stubs: Sequence[str]) -> tuple[bytes | None, str]:
        """``(cubin, how)`` of stubs by constant patching (``"patched"`` or ``"proof"``), or
        ``(None, why)``: assemble them as written."""
        shape, why = self.split(stubs)
        if shape is None:
            return None, why
        cubin, how = self.plans.patched(shape, self.cache, self._assemble_texts, self.name)
        return cubin, (how + f"; kept in the shape: {why}" if cubin is None and why else how)

    @cached_property
    def params(self) -> tuple[Param, ...]:
        """The kernel's parameters, read from the PTX ``.entry`` (see :mod:`numptx.jit.templates.params`)."""
        return kernel_params(self.ptx, self.entry)

    def _launcher(self, variant: Variant, config):
        return CudaLaunch(variant, config)

    def _loaded_entry(self, variant: Variant, args: tuple):
        return loaded_entry(variant)

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.entry} {self.arch}: "
                f"{', '.join(s.signature for s in self.sites.values()) or 'no sites'}>")

    # -- variants ---------------------------------------------------------------------------------
    def resolve(self, stubs: Mapping[str, Any] | None = None, /, *, missing: str = "error",
                **kw: Any) -> list[str]:
        """Stub texts in site order (``missing="empty"`` leaves sites without one as no-ops)."""
        if missing not in ("error", "empty"):
            raise RenderError(f"missing={missing!r}: use 'error' or 'empty'")
        given = merge_stubs(stubs, kw)
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
                texts.append(resolve_stub(stub, site, strict=self.strict))
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

    # -- populations (numptx.jit.populations.pack) ------------------------------------------------------------
    def pack(self, site: str, candidates: Iterable[Any], *, select: str, errors: str = "keep",
             missing: str = "error", constants: str = "inline", layout: str = "function",
             per_kernel: int = PER_KERNEL, build: str = "full", **stubs: Any) -> Pack:
        """A :class:`~numptx.jit.populations.pack.Pack`: every candidate (stubs of any kind) at ``site`` in
        one module, candidate ``k`` running where the site input ``select`` (u32/s32) reads
        ``k``; one assembly, one load, one launch for all. Other sites' stubs come as keywords.
        A candidate that does not fit is left out (``pack.errors``) unless ``errors="raise"``.
        ``constants="runtime"`` reads the candidates' f32/f64 literals from a table in the
        module that ``pack.set_constants`` changes without a new assembly
        (:mod:`numptx.jit.populations.runtime_constants`). ``layout="kernels"`` makes the module one kernel
        per ``per_kernel`` candidates, ``build="fast"`` a screening build
        (:mod:`numptx.jit.populations.pack_kernels`).

        >>> pack = tmpl.pack("f", [prog_a, prog_b], select="cand")     # doctest: +SKIP
        >>> len(pack), len(pack.cubin) > 0
        (2, True)
        """
        return _pack(self, site, candidates, select=select, errors=errors, missing=missing,
                     stubs=stubs, constants=constants, layout=layout, per_kernel=per_kernel,
                     build=build)

    def pack_many(self, site: str, candidates: Iterable[Any], *, select: str,
                  per_module: int = DEFAULT_PER_MODULE, executor: Executor | None = None,
                  progress: bool | Callable[[int, int], Any] = False, errors: str = "keep",
                  missing: str = "error", max_workers: int | None = None,
                  constants: str = "inline", layout: str = "function",
                  per_kernel: int = PER_KERNEL, build: str = "full", **stubs: Any) -> list[Pack]:
        """:meth:`pack` in modules of ``per_module`` candidates, built in parallel like
        :meth:`build_many` (threads by default; any Executor). ``packs[m].offset`` is the
        global index of module ``m``'s candidate 0; ``pack.errors`` use global indices."""
        return _pack_many(self, site, candidates, select=select, per_module=per_module,
                          executor=executor, progress=progress, errors=errors, missing=missing,
                          max_workers=max_workers, stubs=stubs, constants=constants,
                          layout=layout, per_kernel=per_kernel, build=build)


class Variant(CubinInspection):
    """A template with its stubs: ``ptx`` (rendered on first use), ``cubin`` (assembled by
    nvJitLink on first use, through the cubin cache), ``sites``, ``entry``, ``arch``, ``key``;
    ``resources`` and ``sass()`` (numptx/jit/compile/resources.py)."""

    def __init__(self, template: Template, stubs: Sequence[str]):
        self.template = template
        self.stubs = tuple(stubs)
        self._ptx: str | None = None
        self._cubin: bytes | None = None
        self._key: str | None = None
        self._lock = threading.Lock()
        self._info: BuildInfo | None = None
        #: what the template's launcher keeps with this variant between launches
        self.launch_state: Any = None

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
            self._key = self.template.key_of(self.stubs)
        return self._key

    @property
    def ptx(self) -> str:
        if self._ptx is None:
            self._ptx = self.template.render(self.stubs)
        return self._ptx

    def specialize(self, *args: Any) -> Variant:
        """The built variant a launch with ``args`` runs: this one (a template has one
        signature; a numba kernel's variant picks the template of the arguments' types)."""
        return self

    def adopt(self, variant: Variant) -> None:
        """Take ``variant``'s build (the same template and stubs, built elsewhere: by
        ``build_many``) as this variant's: its PTX, cubin and build info."""
        if variant.template is not self.template or variant.stubs != self.stubs:
            raise NumptxError(f"{self.entry}: adopt() takes a variant of the same template with "
                              f"the same stubs; {variant!r} is another")
        cubin = variant.cubin
        with self._lock:
            self._ptx, self._cubin, self._info = variant._ptx, cubin, variant._info

    def for_arch(self, arch: Any) -> Variant:
        """The same stubs in the template assembling for ``arch`` (:meth:`Template.for_arch`);
        ``self`` for its own architecture.

        >>> v.for_arch("sm_100").arch                        # doctest: +SKIP
        'sm_100'
        """
        t = self.template.for_arch(arch)
        return self if t is self.template else Variant(t, self.stubs)

    def lookup(self) -> bytes | None:
        """The cubin if it is built already (here, or in the cubin cache), else None; builds
        nothing. ``build_many`` skips the variants it finds."""
        if self._cubin is None:
            cache = self.template.cache
            if cache is not None:
                start = time.perf_counter()
                where = "memory" if cache.in_memory(self.key) else "disk"
                self._cubin = cache.get(self.key, context=f"{self.entry} {self.arch}, template "
                                        f"{self.template.digest[:12]}")
                if self._cubin is not None:
                    self._info = BuildInfo(where, time.perf_counter() - start)
        return self._cubin

    @property
    def build_info(self) -> BuildInfo | None:
        """How this variant's cubin came to be (a :class:`~numptx.jit.compile.plans.BuildInfo`:
        assembled, patched, proof, or a memory or disk cache hit; the seconds it took; why an
        assembled variant was not patched), or None before it is built.

        >>> v.cubin; v.build_info                                 # doctest: +SKIP
        BuildInfo(how='patched', seconds=4.1e-05, why=None)
        """
        return self._info

    def store(self, cubin: bytes, info: BuildInfo | None = None) -> None:
        """Take ``cubin`` as this variant's (built elsewhere: ``build_many``'s jobs or a
        constant-patch plan) and put it in the cubin cache; ``info`` says how it was made. A
        patched cubin stays in memory: patching it again from its shape's plan (on disk) is
        cheaper than writing it."""
        self._cubin = cubin
        if info is not None:
            self._info = info
        cache = self.template.cache
        if cache is not None:
            cache.put(self.key, cubin, disk=info is None or info.how != "patched")

    def recover(self, e: BaseException) -> bytes:
        """Assembly of the bound PTX failed with ``e``: store and return the cubin of the plain
        rendering, or raise the error to show (the plain rendering's, which quotes the stub as
        written, else ``e``). Plain PTX that assembles means binding was wrong for this
        template: logged, and the plain cubin is used."""
        t = self.template
        if not (t.bind and isinstance(e, NumptxError)):
            raise t._explain(e)
        plain = t.render(self.stubs, bind=False)
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
        self.store(cubin)
        return cubin

    @property
    def cubin(self) -> bytes:
        if self._cubin is None:
            with self._lock:
                if self.lookup() is None:
                    t = self.template
                    start = time.perf_counter()
                    cubin, how = t._patched(self.stubs)
                    why = None
                    if cubin is None:
                        why, how = how, "assembled"
                        try:
                            cubin = ptx_to_cubin(self.ptx, t.arch, options=t.link_options)
                        except NumptxError as e:
                            self.recover(e)                 # stores the plain cubin, or raises
                            self._info = BuildInfo(how, time.perf_counter() - start, why)
                            return self._cubin
                    self.store(cubin, BuildInfo(how, time.perf_counter() - start, why))
        return self._cubin

    def __getitem__(self, config):
        return self.template._launcher(self, config)

    def loaded_entry(self, args: tuple = ()) -> tuple[tuple, tuple]:
        """``(key, (function, context, module))``: this variant loaded on the current device
        (GPU only; built and loaded first if need be). ``args`` are a launch's (unused: a
        CUDA C++ variant's module does not depend on them)."""
        return self.template._loaded_entry(self, args)

    def __repr__(self) -> str:
        return f"<Variant {self.entry} {self.arch} key={self.key[:12]}>"


class CudaTemplate(Template):
    """A CUDA C++ kernel with sites, compiled once with NVRTC (:func:`numptx.cuda_to_ptx`).

    ``entry`` names the kernel (``extern "C"``; default ``"kernel"``, None: the only kernel in the
    PTX); variants are assembled for ``arch`` (default: the compile architecture). ``options``
    go to NVRTC, ``link_options`` to nvJitLink; ``cache``, ``bind``, ``patch_constants`` and
    ``strict`` (a raw stub that never writes an out variable: an error, not a warning) are
    :class:`Template`'s. ``params`` lists the kernel's parameters; ``variant[grid, block](*args)`` launches
    a variant on the GPU through numba-cuda (:mod:`numptx.jit.templates.cuda_launch`).
    """

    language: Language = "CUDA C++"

    def __init__(self, src: str, entry: str | None = "kernel", *, arch: Any = "sm_90",
                 options: Iterable[str] = (), link_options: Iterable[str] = (),
                 name: str = "numptx_template.cu", include_paths: Iterable[str] = (),
                 cache: CubinCache | None | bool = True, bind: bool = True,
                 patch_constants: bool = True, strict: bool = False):
        self.src = src
        if isinstance(entry, str) and _ARCH_LIKE.match(entry) and \
                not re.search(rf"\b{entry}\s*\(", src if isinstance(src, str) else ""):
            raise NumptxError(f"CudaTemplate(src, {entry!r}): the second argument names the "
                              f"kernel (entry), and {entry!r} looks like an architecture; pass "
                              f"it as arch={entry!r} (CudaTemplate(src, arch={entry!r}), "
                              f"entry='kernel_name')")
        ptx = cuda_to_ptx(src, arch=arch, options=options, name=name, include_paths=include_paths)
        super().__init__(ptx, entry=entry, arch=arch, link_options=link_options,
                         producer=f"nvrtc {nvrtc_version()}", cache=cache, bind=bind,
                         patch_constants=patch_constants, strict=strict)

    @cached_property
    def params(self) -> tuple[Param, ...]:
        """The kernel's parameters: names and C types from the source, checked against the PTX
        (which decides where the source cannot be read, e.g. macros or templates)."""
        return kernel_params(self.ptx, self.entry, src=self.src)
