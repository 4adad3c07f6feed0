"""The packed stub's text (:func:`dispatch_text`), and pack layouts and build modes: a large
pack as several kernels of one module; the fast build. :mod:`numptx.jit.populations.pack` uses them.

A pack is one packed stub (:mod:`numptx.jit.populations.pack`) in the template's kernel. Two choices change
how its module is made, not what a candidate computes:

``layout="kernels"`` (``per_kernel=128``)
    The module holds one entry function per run of at most ``per_kernel`` candidates: the
    template's kernel again, renamed ``<entry>__nx_k<j>``, its site holding a jump table over
    that run only. ptxas allocates registers and schedules one function at a time, so the work
    per candidate stays that of a 128-candidate pack however many candidates the module holds
    (one 2,048-candidate jump table costs ~30 % more core time a candidate, with 47 % more L1
    data-cache misses in ptxas; benchmarks/README.md "Compile farm"). In kernel ``j`` the
    selector reads the candidate's index *in that kernel*: candidate ``start + s`` runs where
    the selector reads ``s``. ``layout="function"`` (the default) is one jump table.
``build="fast"``
    Assembles with ``-Ofc=max`` (ptxas's fast-compile level): 1.5-1.8x less core time a
    candidate, about twice the machine code. A screening build: rebuild the survivors with
    ``build="full"`` (the template's options) before relying on their speed.

::

    pack = tmpl.pack("f", programs, select="cand", layout="kernels", build="fast")
    pack.kernels                       # (PackKernel(index=0, entry='fit__nx_k0', start=0, stop=128), ...)
    pack.kernel_of(300)                # (PackKernel(index=2, ...), 44): kernel 2, selector 44
    pack[PerKernel(lambda k: ((blocks, len(k)), 256))](
        PerKernel(lambda k: err[k.start:k.stop]), X, Y, n)     # every kernel, one call (GPU)

A :class:`PerKernel` value (in the launch configuration or among the arguments) is computed
for each kernel; everything else is passed to every kernel as given.

The layouts take CUDA C++ and PTX templates (:class:`~numptx.jit.templates.template.Template`); a numba
kernel's pack is one function, as before.
"""
from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ...errors import NumptxError, RenderError
from ...inject import Site
from ...site_layout import MODULE_LINE, GeneratedStub
from . import runtime_constants as RT
from ..compile.cache import variant_key
from ..templates.cuda_launch import CudaLaunch
from ..compile.nvjitlink import ptx_to_cubin
from ..compile.plans import BuildInfo
from ..compile.resources import CubinInspection
from ..targets import Target, require_target

__all__ = ["PackError", "check_selector", "layout_target", "dispatch_text", "share_registers", "packed_runs", "PER_KERNEL", "FAST_LINK_OPTIONS", "Layout", "BuildMode", "PackKernel", "PerKernel",
           "spans", "merge_kernels", "kernel_name", "LayoutTarget", "LayoutVariant"]

log = logging.getLogger(__name__)

#: candidates per kernel of ``layout="kernels"`` (benchmarks/bench_populations.py --layouts)
PER_KERNEL = 128
#: what ``build="fast"`` assembles with, in place of the template's optimization level
FAST_LINK_OPTIONS = ("-Ofc=max",)
Layout = Literal["function", "kernels"]
BuildMode = Literal["full", "fast"]
_SUFFIX = "__nx_k"
LABEL = "$__nx_pk"                 # label prefix: scoped to the packed stub's block
MARK = "// numptx candidate "      # before each candidate: maps ptxas's line numbers back to it
_SELECTOR_TYPES = ("u32", "s32")
ZERO = {"f32": "0f00000000", "f64": "0d0000000000000000"}
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


class PackError(NumptxError):
    """A population that cannot be packed: empty, a selector that is no u32/s32 input of the
    site, bad arguments. ``site`` names the site (or None)."""

    def __init__(self, message: str, *, site: str | None = None):
        self.site = site
        super().__init__(message)


def check_selector(site: Site, select: str) -> None:
    if select not in site:
        ins = [v.name for v in site if v.kind == "in"]
        raise PackError(f"site {site.name!r} has no input {select!r} to select candidates by "
                        f"(its inputs: {', '.join(ins) or 'none'}); add PTX_IN(U32, {select}) "
                        f"or name one with select=", site=site.name)
    v = site[select]
    if v.kind != "in" or v.dtype not in _SELECTOR_TYPES:
        raise PackError(f"site {site.name!r}: the selector {select!r} is {v.kind} {v.dtype}; it "
                        f"must be an input of type u32 or s32", site=site.name)


@dataclass(frozen=True)
class PackKernel:
    """One kernel of a pack's module: its ``index``, ``entry`` name, and the candidates it runs
    (``start`` .. ``stop - 1``, local to the pack: add ``pack.offset`` for global indices)."""
    index: int
    entry: str
    start: int
    stop: int

    def __len__(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class PerKernel:
    """A launch value computed per kernel of a pack: ``value(kernel)`` (a :class:`PackKernel`)
    gives that kernel's launch configuration or argument.

    >>> PerKernel(lambda k: (4, len(k))).value(PackKernel(0, "fit", 0, 128))
    (4, 128)
    """
    value: Callable[[PackKernel], Any]


def _zero(var) -> str:
    """The instruction that sets an out variable to 0 before the jump."""
    t, reg = var.reg_type, "%" + var.reg
    if t == "pred":
        return f"setp.ne.u32 {reg}, 0, 0;"
    return f"mov.{t if t in ZERO else 'b' + t[1:]} {reg}, {ZERO.get(t, '0')};"


def dispatch_text(site: Site, select: str, texts: Sequence[str | None], *,
                  table_slots: int = 0, first: int = 0,
                  registers: Sequence[str] = ()) -> GeneratedStub:
    """The packed stub for ``site``: a jump on input ``select`` to ``texts[k]`` (None: no
    candidate there; see the module documentation). ``table_slots``: the 8-byte slots of the
    run-time constant table the texts load from (:mod:`numptx.jit.populations.runtime_constants`), which
    the stub declares at module scope (``module_lines``: rendering hoists them there). The
    texts keep the stub contract (:func:`~numptx.jit.templates.stub_checks.check_stub_rules`), so none
    holds a mark or a label of the pack. ``first``: the pack's index of ``texts[0]`` (what its
    mark says: one kernel of several, :mod:`numptx.jit.populations.pack_kernels`). ``registers``:
    declarations the texts share (:func:`share_registers`), made once for the whole pack."""
    n = len(texts)
    # the table is module scope, found by name when the module is loaded; the text shows it
    module = ([f".visible .global .align 8 .b8 {RT.table_name(site.name)}[{8 * table_slots}];"]
              if table_slots else [])
    out = ["{", ".reg .pred %__nx_pk_oob;", ".reg .u32 %__nx_pk_i;", *registers]
    out += [MODULE_LINE + d for d in module]
    out += [_zero(v) for v in site if v.kind == "out"]
    out += [f"mov.b32 %__nx_pk_i, %{site[select].reg};",
            f"setp.ge.u32 %__nx_pk_oob, %__nx_pk_i, {n};",
            f"@%__nx_pk_oob bra {LABEL}_end;",
            f"{LABEL}_tab: .branchtargets "
            + ", ".join(f"{LABEL}_{k}" if t is not None else f"{LABEL}_end" for k, t in enumerate(texts))
            + ";",
            f"brx.idx %__nx_pk_i, {LABEL}_tab;"]
    for k, t in enumerate(texts):
        if t is not None:
            out += [f"{LABEL}_{k}:", f"{MARK}{first + k}", "{", t, "}", f"bra.uni {LABEL}_end;"]
    out += [f"{LABEL}_end:", "}"]
    return GeneratedStub("\n".join(out), module)


_SCRATCH = re.compile(r"^\.reg \.(\w+) (%_s\d+);\n", re.M)


def share_registers(texts: Sequence[str | None], generated: Sequence[bool]
                    ) -> tuple[list[str | None], list[str], dict[int, int]]:
    """The value registers of compiled Stack PTX stubs declared once for a pack: ``(texts
    without their declarations, the shared declarations, candidate -> lines taken out)``.

    A text is changed only where numptx compiled it (``generated[k]``), it is one scope (one
    ``{`` ... ``}``: no inner block that could shadow a register) and each of its scratch
    registers ``%_sN`` has the type the pack's earlier candidates gave it; the others keep
    their own declarations. The candidates run one at a time, so sharing a register changes
    nothing they compute: ptxas makes the same SASS (``tests/test_pack_layout.py``) from a
    shorter text (one ``.reg`` line a type), in 5-9 % less time at 128 candidates.

    >>> t = "{\\n.reg .f32 %_s0;\\nmov.f32 %v_y, %_s0;\\n}"
    >>> share_registers([t, t], [True, True])[1:]
    (['.reg .f32 %_s0;'], {0: 1, 1: 1})
    """
    pool: dict[str, str] = {}
    out: list[str | None] = []
    taken: dict[int, int] = {}
    for k, (t, g) in enumerate(zip(texts, generated)):
        if t is None or not g or t.count("{") != 1 or t.count("}") != 1:
            out.append(t)
            continue
        decls = _SCRATCH.findall(t)
        if not decls or any(pool.get(n, ty) != ty for ty, n in decls):
            out.append(t)
            continue
        for ty, n in decls:
            pool[n] = ty
        out.append(_SCRATCH.sub("", t))
        taken[k] = len(decls)
    by_type: dict[str, list[str]] = {}
    for n, ty in pool.items():
        by_type.setdefault(ty, []).append(n)
    return out, [f".reg .{ty} {', '.join(ns)};" for ty, ns in by_type.items()], taken


def packed_runs(site: Site, select: str, texts: Sequence[str | None],
                generated: Sequence[bool], runs: Sequence[tuple[int, int]]
                ) -> tuple[list[GeneratedStub], dict[int, int]]:
    """The packed stub of each run of candidates, their value registers shared per run
    (:func:`share_registers`); and candidate -> declaration lines taken out of its text."""
    stubs, taken = [], {}
    for a, b in runs:
        own, decls, gone = share_registers(texts[a:b], generated[a:b])
        stubs.append(dispatch_text(site, select, own, first=a, registers=decls))
        taken.update({a + k: n for k, n in gone.items()})
    return stubs, taken


_OPT_LEVEL = re.compile(r"(?:-Xptxas=)?(?:-O[1-3]|-Ofc=\w+|--Ofast-compile=\w+)\Z")


def fast_options(options: Sequence[str]) -> tuple[str, ...]:
    """The link options of ``build="fast"``: ``options`` with ``-Ofc=max`` in place of their
    optimization level (ptxas refuses -O1..-O3 next to it: "Conflicting options").

    >>> fast_options(["-O3", "-lineinfo"])
    ('-lineinfo', '-Ofc=max')
    """
    return tuple(o for o in options if not _OPT_LEVEL.match(o)) + FAST_LINK_OPTIONS


def spans(n: int, per_kernel: int) -> list[tuple[int, int]]:
    """The candidates ``(start, stop)`` of each kernel of a pack of ``n``.

    >>> spans(300, 128)
    [(0, 128), (128, 256), (256, 300)]
    """
    return [(i, min(n, i + per_kernel)) for i in range(0, n, per_kernel)]


def kernel_name(entry: str, j: int) -> str:
    return f"{entry}{_SUFFIX}{j}"


def _entry_span(ptx: str, entry: str) -> tuple[int, int]:
    """Where the definition of kernel ``entry`` lies in ``ptx``: from its ``.entry`` line to
    the brace that closes its body (comments skipped when braces are counted)."""
    m = re.search(rf"^[ \t]*(?:\.visible[ \t]+|\.weak[ \t]+)?\.entry[ \t]+{re.escape(entry)}"
                  rf"[ \t]*\(", ptx, re.M)
    if m is None:
        raise NumptxError(f"no kernel {entry!r} in the rendered PTX")
    depth, i, n = 0, ptx.index(")", m.end()), len(ptx)
    code = _COMMENT.sub(lambda c: " " * len(c.group(0)), ptx)   # same offsets, no comments
    while i < n:
        ch = code[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return m.start(), i + 1
        i += 1
    raise NumptxError(f"kernel {entry!r}: its body does not close in the rendered PTX")


def merge_kernels(ptxs: Sequence[str], entry: str, site: str) -> str:
    """One module from the renderings ``ptxs`` of one template (each with another run of a
    pack's candidates at ``site``): the first rendering, its kernel ``entry`` renamed
    ``<entry>__nx_k0``, then the kernel of each other rendering, renamed ``__nx_k<j>``. The
    renderings must differ inside the kernel only (the site lies in it, not in a function it
    calls), else a :class:`NumptxError` names the site."""
    head = re.compile(rf"(\.entry[ \t]+){re.escape(entry)}(?=[ \t]*\()")
    start, stop = _entry_span(ptxs[0], entry)
    before, after = ptxs[0][:start], ptxs[0][stop:]
    parts = [before]
    for j, ptx in enumerate(ptxs):
        a, b = (start, stop) if j == 0 else _entry_span(ptx, entry)
        if j and (ptx[:a] != before or ptx[b:] != after):
            raise NumptxError(f"site {site!r} lies outside kernel {entry!r} (in a function it "
                              f"calls): layout='kernels' needs the site in the kernel; use "
                              f"layout='function'")
        body = head.sub(lambda m: m.group(1) + kernel_name(entry, j), ptx[a:b], count=1)
        parts += [body, "\n\n"] if j < len(ptxs) - 1 else [body]
    parts.append(after)
    return "".join(parts)


class Chunked(Protocol):
    """What a layout takes at the pack's site (a :class:`numptx.jit.populations.pack.Population`)."""

    def __len__(self) -> int: ...
    def kernel_stubs(self, site: Site, runs: Sequence[tuple[int, int]]) -> list[str]: ...


def layout_target(target: Target, site: str, layout: str, per_kernel: Any, build: str,
                   constants: str) -> LayoutTarget | None:
    """The target that builds ``target``'s packs in ``layout`` and ``build`` mode, or None for
    the default (one function, the template's options). ``target`` lacking a member of
    :class:`~numptx.jit.targets.Target` is a :class:`PackError` naming it."""
    require_target(target, "pack", PackError)
    if layout not in ("function", "kernels"):
        raise PackError(f"layout={layout!r}: use 'function' (one jump table) or 'kernels' "
                        f"(entry functions of per_kernel candidates)", site=site)
    if build not in ("full", "fast"):
        raise PackError(f"build={build!r}: use 'full' (the template's options) or 'fast' "
                        f"(-Ofc=max, a screening build)", site=site)
    if isinstance(per_kernel, bool) or not isinstance(per_kernel, int) or per_kernel < 1:
        raise PackError(f"per_kernel={per_kernel!r}: a positive int (candidates a kernel)",
                        site=site)
    if layout == "function" and build == "full":
        return None
    if target.language == "Python":          # numba's calling convention: its own launch
        raise PackError(f"layout={layout!r}, build={build!r}: packs of CUDA C++ and PTX "
                        f"templates only; a numba kernel's pack is one function at its own "
                        f"options", site=site)
    if constants != "inline":
        raise PackError(f"layout={layout!r}, build={build!r}: constants='runtime' packs are "
                        f"one function; use constants='inline'", site=site)
    # the template that builds the variants (a template itself; a user's Target's own)
    return LayoutTarget(target.build_template(), site, layout, per_kernel, build)


class LayoutTarget:
    """A template building packs in a layout and build mode: what :func:`pack` makes variants
    with and :func:`~numptx.jit.compile.build.build_many` builds (a :class:`~numptx.jit.compile.build.
    BuildTarget`). Packs are assembled as written (no constant patching)."""

    def __init__(self, template: Any, site: str, layout: Layout = "function",
                 per_kernel: int = PER_KERNEL, build: BuildMode = "full"):
        self.template, self.site, self.layout = template, site, layout
        self.per_kernel, self.build = per_kernel, build
        self.arch = template.arch
        self.link_options = (fast_options(template.link_options) if build == "fast"
                             else tuple(template.link_options))
        self.plans = template.plans

    @property
    def name(self) -> str:
        return self.template.name

    @property
    def cache(self) -> Any:
        return self.template.cache

    def for_arch(self, arch: Any) -> LayoutTarget:
        return LayoutTarget(self.template.for_arch(arch), self.site, self.layout,
                            self.per_kernel, self.build)

    def inject(self, stubs: Mapping[str, Any] | None = None, /, *,
               missing: str = "error") -> LayoutVariant:
        stubs = dict(stubs or {})
        pop = stubs.pop(self.site)
        t = self.template
        lacking = [n for n in t.sites if n != self.site and stubs.get(n) is None]
        if lacking and missing == "error":
            raise RenderError(f"no stub for site {lacking[0]!r} (pass missing='empty' to leave "
                              f"it a no-op)", missing=tuple(lacking))
        texts = t.resolve(stubs, missing="empty")
        at = list(self.template.sites).index(self.site)
        runs = (spans(len(pop), self.per_kernel) if self.layout == "kernels"
                else [(0, len(pop))])
        return LayoutVariant(self, texts, at, pop.kernel_stubs(self.template.sites[self.site],
                                                               runs), runs)

    def render(self, stubs: Sequence[str]) -> str:
        return self.template.render(stubs)

    def shape(self, stubs: Sequence[str]) -> None:
        return None

    def split(self, stubs: Sequence[str]) -> tuple[None, str]:
        return None, f"a pack in layout {self.layout!r}, build {self.build!r}"


class LayoutVariant(CubinInspection):
    """A pack's module in a layout and build mode: ``ptx`` (the renderings merged), ``cubin``
    (one nvJitLink run, through the cubin cache), ``key``, ``entry`` (kernel 0's), ``kernels``;
    ``variant[config](*args)`` launches every kernel (:class:`PerKernel` values per kernel)."""

    def __init__(self, target: LayoutTarget, texts: Sequence[str], at: int,
                 chunks: Sequence[str], runs: Sequence[tuple[int, int]]):
        self.target, self.template = target, target.template
        self.base, self.at = tuple(texts), at
        self.chunks, self.runs = tuple(chunks), tuple(runs)
        t = self.template
        many = target.layout == "kernels"
        self.kernels = tuple(PackKernel(j, kernel_name(t.entry, j) if many else t.entry, a, b)
                             for j, (a, b) in enumerate(self.runs))
        #: what build_many reads: the site texts (the site's: kernel 0's run)
        self.stubs = self.base[:at] + (self.chunks[0],) + self.base[at + 1:]
        self._ptx: str | None = None
        self._cubin: bytes | None = None
        self._key: str | None = None
        self._info: BuildInfo | None = None
        self._lock = threading.Lock()
        self._views: list[_KernelView] | None = None
        self.launch_state: Any = None

    @property
    def sites(self) -> Mapping[str, Site]:
        return self.template.sites

    @property
    def arch(self) -> str:
        return self.template.arch

    @property
    def entry(self) -> str:
        return self.kernels[0].entry

    @property
    def build_info(self) -> BuildInfo | None:
        return self._info

    def specialize(self, *args: Any) -> LayoutVariant:
        """The variant a launch with ``args`` runs: this one (a template's)."""
        return self

    def adopt(self, variant: LayoutVariant) -> None:
        """Take ``variant``'s build (the same pack, built elsewhere: by ``build_many``)."""
        if variant.key != self.key:
            raise NumptxError(f"{self.entry}: adopt() takes a build of the same pack; "
                              f"{variant.entry} {variant.key[:12]} is another")
        cubin = variant.cubin
        with self._lock:
            self._ptx, self._cubin, self._info = variant._ptx, cubin, variant._info

    def _texts(self, j: int) -> list[str]:
        return [*self.base[:self.at], self.chunks[j], *self.base[self.at + 1:]]

    def render(self, bind: bool | None = None) -> str:
        t = self.template
        ptxs = [t.render(self._texts(j), bind=bind) for j in range(len(self.chunks))]
        if self.target.layout != "kernels":
            return ptxs[0]
        return merge_kernels(ptxs, t.entry, self.target.site)

    @property
    def ptx(self) -> str:
        if self._ptx is None:
            self._ptx = self.render()
        return self._ptx

    @property
    def key(self) -> str:
        if self._key is None:
            t, tg = self.template, self.target
            mark = f"numptx pack layout={tg.layout} per_kernel={tg.per_kernel}"
            self._key = variant_key(t.digest, [mark, *self.base, *self.chunks], t.arch,
                                    tg.link_options, bind=t.bind)
        return self._key

    def lookup(self) -> bytes | None:
        if self._cubin is None:
            cache = self.template.cache
            if cache is not None:
                start = time.perf_counter()
                where = "memory" if cache.in_memory(self.key) else "disk"
                self._cubin = cache.get(self.key, context=f"{self.entry} {self.arch} pack")
                if self._cubin is not None:
                    self._info = BuildInfo(where, time.perf_counter() - start)
        return self._cubin

    def store(self, cubin: bytes, info: BuildInfo | None = None) -> None:
        self._cubin = cubin
        if info is not None:
            self._info = info
        cache = self.template.cache
        if cache is not None:
            cache.put(self.key, cubin)

    def recover(self, e: BaseException) -> bytes:
        """Assembly of the bound PTX failed: the plain rendering's cubin (see
        :meth:`numptx.jit.templates.template.Variant.recover`), or ``e``."""
        if not (self.template.bind and isinstance(e, NumptxError)):
            raise e
        plain = self.render(bind=False)
        if plain == self.ptx:
            raise e
        cubin = ptx_to_cubin(plain, self.arch, options=self.target.link_options)
        log.warning("numptx: %s: the bound pack did not assemble but the plain rendering did",
                    self.entry)
        self._ptx = plain
        self.store(cubin)
        return cubin

    @property
    def cubin(self) -> bytes:
        if self._cubin is None:
            with self._lock:
                if self.lookup() is None:
                    start = time.perf_counter()
                    try:
                        cubin = ptx_to_cubin(self.ptx, self.arch,
                                             options=self.target.link_options)
                    except NumptxError as e:
                        return self.recover(e)
                    self.store(cubin, BuildInfo("assembled", time.perf_counter() - start,
                                                "a pack in a layout or build mode"))
        return self._cubin

    def for_arch(self, arch: Any) -> LayoutVariant:
        target = self.target.for_arch(arch)
        if target.template is self.template:
            return self
        return LayoutVariant(target, self.base, self.at, self.chunks, self.runs)

    def views(self) -> list[_KernelView]:
        """One launchable view per kernel (made once: launch plans are kept per view)."""
        if self._views is None:
            self._views = [_KernelView(self, k) for k in self.kernels]
        return self._views

    def __getitem__(self, config) -> _Launch:
        return _Launch(self, config)


class _KernelView:
    """Kernel ``kernel`` of a :class:`LayoutVariant`'s module, as a launch takes a variant."""

    def __init__(self, whole: LayoutVariant, kernel: PackKernel):
        self.whole, self.kernel = whole, kernel
        self.template = whole.template
        self.entry = kernel.entry
        self.key = f"{whole.key}#{kernel.index}"       # residency: one loaded entry per kernel
        self.launch_state: Any = None

    @property
    def cubin(self) -> bytes:
        return self.whole.cubin

    def for_arch(self, arch: Any) -> _KernelView:
        other = self.whole.for_arch(arch)
        return self if other is self.whole else other.views()[self.kernel.index]


class _Launch:
    """``variant[config](*args)``: each kernel launched with ``config`` and ``args``, a
    :class:`PerKernel` value computed for it."""

    def __init__(self, variant: LayoutVariant, config: Any):
        self.variant, self.config = variant, config

    def __call__(self, *args: Any) -> None:
        for view in self.variant.views():
            k = view.kernel
            config = self.config.value(k) if isinstance(self.config, PerKernel) else self.config
            got = tuple(a.value(k) if isinstance(a, PerKernel) else a for a in args)
            CudaLaunch(view, config)(*got)
