"""``@nx.kernel``: a numba-cuda kernel with injection sites (:func:`numptx.site`).

::

    @nx.kernel                                   # or @nx.kernel(cc=(8, 0)), @nx.kernel("void(...)")
    def apply(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})

    ptx = apply.ptx(out, a, b)                   # template PTX for these argument types
    v = apply.inject(combine=stub)               # a KernelVariant
    v.ptx, v.cubin, v.sites                      # for the last compiled (or declared) signature
    v[blocks, threads](out, a, b)                # launch through numba-cuda (or the simulator)

numba compiles the template once per argument-type signature and architecture (``cc``, default
(9, 0)); the kernel name is read from the PTX ``.entry`` (numba mangles it).
"""
from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from ...errors import CompileError, NumptxError, PtxParseError
from ..compile.arch import normalize_arch
from ..compile.cache import CubinCache, cache_option
from .launch import KernelLaunch
from .launch import loaded_entry as _loaded_entry
from .numba_site import SIMULATOR, SiteError, register, site_errors, two_signatures
from ..compile.options import option_list
from ..populations.pack import DEFAULT_PER_MODULE, Pack
from ..populations.pack import pack as _pack
from ..populations.pack import pack_many as _pack_many
from ..compile.resources import CubinInspection
from ..templates.stubs import merge_stubs
from ..targets import Language
from ..templates.template import Template, Variant

__all__ = ["kernel", "Kernel", "KernelVariant", "NumbaTemplate", "NoSignatureError"]


class NoSignatureError(NumptxError):
    """A numba kernel asked for its default signature (``k.ptx()``, ``k.template()``,
    ``k.build_template()``) before one was declared or compiled: the message says how to give
    one."""


def _cc(arch: Any) -> tuple[tuple[int, int], str]:
    number, suffix = normalize_arch(arch)
    return (number // 10, number % 10), suffix


def _numba_types():
    from numba.cuda import types
    return types


def _numba_failure(name: str, argtypes: tuple, e: Exception) -> CompileError:
    """numba-cuda's failure to compile kernel ``name`` as a CompileError, with a hint where
    the usual cause of the message is an ``nx.site`` call numba saw unrewritten."""
    text = str(e).strip()
    hint = ""
    if "Module(<module 'numptx'" in text or "DICT_MERGE" in text:
        hint = ("\nnx.site's arguments are rewritten before numba types them: write out= and "
                "mod= as dict literals in the call (out={'z': nx.f32}), pass each variable as "
                "name=value, and no **kwargs")
    return CompileError(f"numba-cuda could not compile kernel {name!r} for "
                        f"({', '.join(map(str, argtypes))}): {type(e).__name__}: {text}{hint}")


class NumbaTemplate(Template):
    """The PTX numba-cuda made for one signature of a :class:`Kernel`; ``argtypes`` are the
    numba argument types."""

    language: Language = "Python"

    def __init__(self, kernel: Kernel, argtypes: tuple, ptx: str, *, arch: str, producer: str):
        self.kernel, self.argtypes = kernel, argtypes
        super().__init__(ptx, arch=arch, link_options=kernel.link_options, producer=producer,
                         cache=kernel._cache_opt, bind=kernel.bind,
                         patch_constants=kernel.patch_constants, strict=kernel.strict)

    @property
    def name(self) -> str:
        return self.kernel.__name__

    def _kernel_variant(self, variant: Variant) -> KernelVariant:
        """One KernelVariant per variant (its launch plans are reused), holding the variant."""
        kv = variant.launch_state
        if kv is None:
            kv = variant.launch_state = KernelVariant(self.kernel, variant.stub_map)
            kv.adopt(variant)
        return kv

    def _launcher(self, variant: Variant, config):
        return self._kernel_variant(variant)[config]

    def _loaded_entry(self, variant: Variant, args: tuple):
        return self._kernel_variant(variant).loaded_entry(args)

    def __repr__(self) -> str:
        return f"<NumbaTemplate {self.kernel.__name__}{tuple(map(str, self.argtypes))} {self.arch}>"


class Kernel:
    """A numba-cuda kernel with sites: compile templates with :meth:`template`/:meth:`ptx`, make
    variants with :meth:`inject` and :meth:`build_many`. Options: ``cc`` (architecture of the
    templates, default (9, 0)), ``fastmath``, ``lineinfo``, ``opt`` (numba's), ``link_options``
    (nvJitLink's), ``cache`` (True: the default cubin cache, None/False: none, or a
    :class:`~numptx.jit.compile.cache.CubinCache`), ``bind`` (stubs written straight into the site's
    registers) and ``patch_constants`` (variants that differ only in f32/f64 constants patched,
    not assembled; both see :class:`~numptx.jit.templates.template.Template`), ``strict`` (a raw PTX
    stub that never writes an out variable of its site raises
    :class:`~numptx.jit.templates.stub_checks.UnwrittenOutputError`, on the GPU build and under the
    simulator, instead of warning), ``simulate`` (what an
    ``@nx.ptx_expr`` site runs under numba-cuda's simulator: ``"stub"``, the default, its PTX
    stub in the emulator, or ``"reference"``, its NumPy reference).

    A kernel is a :class:`~numptx.jit.targets.Target` (what ``pack``, ``autotune``, fitness and
    the search take) with ``per_signature`` True: :meth:`build_template` is the template of a
    launch's argument types."""

    #: what the kernel was written in (:data:`numptx.jit.targets.Language`)
    language: Language = "Python"
    #: numba-cuda compiles one template per argument-type signature
    per_signature = True

    def __init__(self, py_func, signature=None, *, cc: Any = (9, 0), fastmath: bool = False,
                 lineinfo: bool = False, opt: bool = True, link_options: Iterable[str] = (),
                 cache: CubinCache | None | bool = True, bind: bool = True,
                 patch_constants: bool = True, simulate: str = "stub", strict: bool = False):
        if not callable(py_func):
            raise NumptxError(f"nx.kernel decorates a Python function, not {type(py_func).__name__}")
        self.py_func = py_func
        self.__name__ = getattr(py_func, "__name__", "kernel")
        self.__doc__ = getattr(py_func, "__doc__", None)
        self.cc, self._suffix = _cc(cc)
        self.options = {"fastmath": fastmath, "lineinfo": lineinfo, "opt": opt}
        self.link_options = option_list(link_options, "link_options")
        self.bind = bool(bind)
        self.patch_constants = bool(patch_constants)
        self.strict = bool(strict)
        if simulate not in ("stub", "reference"):
            raise NumptxError(f"nx.kernel {self.__name__!r}: simulate={simulate!r}; it is \"stub\" "
                              f"(the PTX stub in the emulator) or \"reference\" (the formula's "
                              f"NumPy reference)")
        self.simulate = simulate
        self._cache_opt = cache_option(cache)
        self._templates: dict[tuple, NumbaTemplate] = {}
        self._lock = threading.RLock()
        self._dispatcher = None
        self._last: tuple | None = None
        self._declared: tuple | None = None
        if signature is not None:
            self._declared = self._parse_signature(signature)

    def __repr__(self) -> str:
        return f"<nx.kernel {self.__name__} cc={self.cc}>"

    @property
    def name(self) -> str:
        """What messages call the kernel: its Python name (as its templates' ``name``)."""
        return self.__name__

    def build_template(self, *args: Any, device: tuple[int, int] | None = None) -> NumbaTemplate:
        """The template that builds the variants of a launch with ``args`` (none: the declared
        or most recently compiled signature): :meth:`template`, or with ``device`` (a compute
        capability) :meth:`template_for_device`, which leaves the default signature as it is.

        >>> apply.build_template(out, a, b).argtypes          # doctest: +SKIP
        (array(float32, 1d, C), array(float32, 1d, C), array(float32, 1d, C))
        """
        if device is None:
            return self.template(*args)
        return self.template_for_device(self.argtypes(*args), device)

    # -- signatures -------------------------------------------------------------------------------
    @staticmethod
    def _parse_signature(signature) -> tuple:
        from .numba_compat import normalize_signature
        try:
            args, ret = normalize_signature(signature)
        except Exception as e:   # noqa: BLE001 - numba raises NameError, TypeError, SyntaxError...
            raise NumptxError(f"bad kernel signature {signature!r}: {type(e).__name__}: {e} (write "
                              f"it like 'void(float32[:], float32[:])')") from None
        if ret is not None and ret != _numba_types().none:
            raise NumptxError(f"a kernel returns nothing; signature {signature!r} returns {ret}")
        return tuple(args)

    @property
    def dispatcher(self):
        """The numba-cuda dispatcher of the Python function (made on first use)."""
        if self._dispatcher is None:
            register()          # normally done by numba.cuda's import; raises what went wrong
            from numba import cuda
            opts = {} if SIMULATOR else {"fastmath": self.options["fastmath"],
                                         "lineinfo": self.options["lineinfo"],
                                         "opt": self.options["opt"]}
            self._dispatcher = cuda.jit(**opts)(self.py_func)
        return self._dispatcher

    def argtypes(self, *args: Any, signature=None) -> tuple:
        """Numba argument types of example arguments (values, or numba types as they are), or
        of ``signature``; with neither, the declared or most recently compiled signature."""
        if signature is not None:
            if args:
                raise NumptxError("give example arguments or signature=, not both")
            return self._parse_signature(signature)
        if not args:
            sig = self._declared or self._last
            if sig is None:
                raise NoSignatureError(f"kernel {self.__name__!r} has no signature yet: call "
                                       f"{self.__name__}.ptx(*example_args) (or .template), or "
                                       f"declare one with @nx.kernel('void(float32[:], ...)')")
            return sig
        nparams = self._nparams()
        if nparams is not None and len(args) != nparams:
            raise NumptxError(f"kernel {self.__name__!r} takes {nparams} argument(s), "
                              f"{len(args)} given")
        types = _numba_types()
        disp = self.dispatcher
        out = []
        for i, a in enumerate(args):
            if isinstance(a, types.Type):
                out.append(a)
                continue
            try:
                out.append(disp.typeof_pyval(a))
            except Exception as e:   # noqa: BLE001 - numba's message varies by version
                raise NumptxError(f"kernel {self.__name__!r}: argument {i} ({type(a).__name__}) has "
                                  f"no numba type: pass arrays, scalars or numba types") from e
        return tuple(out)

    def _nparams(self) -> int | None:
        """The number of parameters of the Python function (None when it can't be read)."""
        import inspect
        try:
            params = inspect.signature(self.py_func).parameters.values()
        except (TypeError, ValueError):
            return None
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
            return None
        return len(params)

    # -- templates --------------------------------------------------------------------------------
    def template(self, *args: Any, signature=None, cc: Any = None) -> NumbaTemplate:
        """The template for these argument types, compiled by numba-cuda on first use."""
        if SIMULATOR:
            raise NumptxError("numba-cuda's simulator (NUMBA_ENABLE_CUDASIM=1) compiles no PTX: "
                              "templates, .ptx and .cubin need the real numba-cuda (no GPU needed); "
                              "launching a variant works in the simulator")
        argtypes = self.argtypes(*args, signature=signature)
        ccv, suffix = (self.cc, self._suffix) if cc is None else _cc(cc)
        t = self._template_for(argtypes, ccv, suffix)
        if args or signature is not None:
            self._last = argtypes
        return t

    @property
    def arch(self) -> str:
        """The architecture templates are compiled for by default (``cc`` and its suffix,
        ``"sm_90a"`` say)."""
        return f"sm_{self.cc[0]}{self.cc[1]}{self._suffix}"

    def template_for_device(self, argtypes: tuple, cc: tuple[int, int]) -> NumbaTemplate:
        """The template of these numba argument types for a device of compute capability
        ``cc`` (what a launch runs): the kernel's own architecture suffix (``sm_90a``) when
        ``cc`` is the kernel's ``cc``, none otherwise. No change to the default signature."""
        suffix = self._suffix if tuple(self.cc) == tuple(cc) else ""
        return self._template_for(argtypes, cc, suffix)

    def _template_for(self, argtypes: tuple, cc: tuple[int, int], suffix: str) -> NumbaTemplate:
        """The template of these numba argument types (no change to the default signature)."""
        key = (argtypes, cc, suffix)
        with self._lock:
            t = self._templates.get(key)
            if t is None:
                t = self._templates[key] = self._compile(argtypes, cc, suffix)
        return t

    def _compile(self, argtypes: tuple, cc: tuple[int, int], suffix: str) -> NumbaTemplate:
        register()
        from numba import cuda
        import numba_cuda
        try:
            with site_errors(self.__name__):
                ptx, _ = cuda.compile_ptx(self.py_func, argtypes, cc=cc, **self.options)
        except NumptxError:
            raise
        except Exception as e:   # noqa: BLE001 - numba's typing and lowering errors
            raise _numba_failure(self.__name__, argtypes, e) from e
        try:
            return NumbaTemplate(self, argtypes, ptx, arch=f"sm_{cc[0]}{cc[1]}{suffix}",
                                 producer=f"numba-cuda {numba_cuda.__version__} {self.options}")
        except PtxParseError as e:
            # one site name at two signatures across device functions or value types (the
            # rewrite catches it within one function): say so as the simulator does
            m = re.search(r"instances of a site differ \(site '([^']*)'\)", str(e))
            if m is None:
                raise
            raise SiteError(f"kernel {self.__name__!r}: {two_signatures(m.group(1))} ({e})") from e

    def ptx(self, *args: Any, signature=None, cc: Any = None) -> str:
        """Template PTX for example arguments (or ``signature``)."""
        return self.template(*args, signature=signature, cc=cc).ptx

    def sites(self, *args: Any, signature=None) -> Mapping:
        """``{name: Site}`` of the kernel's sites for these argument types (or ``signature``).
        Under the simulator, where no PTX is compiled, from the ``nx.site`` calls as thread 0
        of a one-thread launch on copies of ``args`` makes them
        (:func:`~numptx.jit.numba.launch.simulated_sites`)."""
        if SIMULATOR:
            if signature is not None or not args:
                raise NumptxError(f"kernel {self.__name__!r}: under the simulator the sites are "
                                  f"read by running the kernel once: pass example arguments, "
                                  f"{self.__name__}.sites(*args), not a signature")
            from .launch import simulated_sites
            return simulated_sites(self, args)
        return self.template(*args, signature=signature).sites

    # -- variants ---------------------------------------------------------------------------------
    def inject(self, stubs: Mapping[str, Any] | None = None, /, *, missing: str = "error",
               **kw: Any) -> KernelVariant:
        """A :class:`KernelVariant`: this kernel with stubs at its sites. Its ``ptx``/``cubin``
        are for the declared or most recently compiled signature; a launch picks the template
        for the launch's argument types."""
        return KernelVariant(self, merge_stubs(stubs, kw), missing=missing)

    def build_many(self, batch: Iterable[Mapping[str, Any]], *, args: tuple = (), signature=None,
                   **kw: Any) -> list:
        """:meth:`Template.build_many` on the template of ``args`` / ``signature`` (default:
        the declared or most recently compiled one)."""
        return self.template(*args, signature=signature).build_many(batch, **kw)

    def pack(self, site: str, candidates: Iterable[Any], *, select: str, errors: str = "keep",
             missing: str = "error", constants: str = "inline", **stubs: Any) -> Pack:
        """:meth:`Template.pack <numptx.jit.templates.template.Template.pack>` for this kernel: the
        population's variant is a :class:`KernelVariant` (each launch's signature gets its
        build; under the simulator each candidate runs where the selector names it)."""
        return _pack(self, site, candidates, select=select, errors=errors, missing=missing,
                     stubs=stubs, constants=constants)

    def pack_many(self, site: str, candidates: Iterable[Any], *, select: str,
                  per_module: int = DEFAULT_PER_MODULE, args: tuple = (), signature=None,
                  **kw: Any) -> list[Pack]:
        """:meth:`Template.pack_many <numptx.jit.templates.template.Template.pack_many>`, the modules
        built for the template of ``args`` / ``signature`` (default: the declared or most
        recently compiled one)."""
        return _pack_many(_KernelBuilds(self, args, signature), site, candidates, select=select,
                          per_module=per_module, **kw)

    def __getitem__(self, config):
        raise NumptxError(f"kernel {self.__name__!r} has injection sites: launch a variant, "
                          f"{self.__name__}.inject(site=stub, ...)[grid, block](...)")

    def __call__(self, *args, **kwargs):
        raise NumptxError(f"kernel {self.__name__!r} is launched as a variant: "
                          f"{self.__name__}.inject(...)[grid, block](...)")


class KernelVariant(CubinInspection):
    """A :class:`Kernel` with its stubs. ``specialize(*args)`` gives the :class:`Variant` of one
    signature; ``ptx``, ``cubin``, ``sites``, ``entry``, ``arch``, ``key``, ``resources`` and
    ``sass()`` (:mod:`numptx.jit.compile.resources`) are those of the kernel's declared or most recently
    compiled signature; ``variant[grid, block](*args)`` launches through numba-cuda (or runs in
    the simulator)."""

    def __init__(self, kernel: Kernel, stubs: dict[str, Any], *, missing: str = "error"):
        self.kernel, self.stubs, self.missing = kernel, stubs, missing
        self._variants: dict[int, Variant] = {}

    def specialize(self, *args: Any, signature=None, cc: Any = None) -> Variant:
        """The :class:`Variant` for these argument types (see :meth:`Kernel.template`)."""
        return self.for_template(self.kernel.template(*args, signature=signature, cc=cc))

    def for_template(self, template: Template) -> Variant:
        v = self._variants.get(id(template))
        if v is None or v.template is not template:
            v = self._variants[id(template)] = template.inject(self.stubs, missing=self.missing)
        return v

    def loaded_entry(self, args: tuple) -> tuple[tuple, tuple]:
        """``(key, (launchable, context, module))``: the module a launch with ``args`` runs on
        the current device, loaded (GPU only)."""
        return _loaded_entry(self, args)

    def adopt(self, variant: Variant) -> None:
        """Use ``variant`` (built elsewhere, e.g. by ``build_many``) for its template."""
        self._variants[id(variant.template)] = variant

    @property
    def variant(self) -> Variant:
        return self.specialize()

    ptx = property(lambda self: self.variant.ptx, doc="rendered PTX (default signature)")
    cubin = property(lambda self: self.variant.cubin, doc="cubin (default signature)")
    sites = property(lambda self: self.variant.sites)
    entry = property(lambda self: self.variant.entry)
    arch = property(lambda self: self.variant.arch)
    key = property(lambda self: self.variant.key)
    build_info = property(lambda self: self.variant.build_info,
                          doc="how the cubin was built (default signature; plans.BuildInfo)")

    def __getitem__(self, config):
        return KernelLaunch(self, config)

    def __repr__(self) -> str:
        return f"<KernelVariant {self.kernel.__name__} stubs for {', '.join(self.stubs) or 'none'}>"


class _KernelBuilds:
    """A kernel as :func:`~numptx.jit.populations.pack.pack_many` builds it: variants are KernelVariants,
    their cubins built by the template of one signature."""

    language: Language = "Python"
    per_signature = True

    def __init__(self, kernel: Kernel, args: tuple, signature):
        self.kernel, self.args, self.signature = kernel, args, signature
        self.strict = kernel.strict

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def arch(self) -> str:
        return self.kernel.arch

    def inject(self, stubs, *, missing: str = "error") -> KernelVariant:
        return self.kernel.inject(stubs, missing=missing)

    def build_many(self, batch, **kw: Any) -> list:
        return self.kernel.build_many(batch, args=self.args, signature=self.signature, **kw)

    def build_template(self, *args: Any, device: tuple[int, int] | None = None) -> Template:
        """The template the modules are built by (that of ``args`` or ``device`` where they are
        given: :meth:`Kernel.build_template`)."""
        if args or device is not None:
            return self.kernel.build_template(*args, device=device)
        return self.kernel.template(*self.args, signature=self.signature)


def kernel(fn=None, /, signature=None, **options: Any):
    """Decorate a Python function as a :class:`Kernel` (``@nx.kernel``, ``@nx.kernel(cc=(8, 0))``
    or ``@nx.kernel("void(float32[:], float32[:])")``)."""
    unknown = sorted(set(options) - _KERNEL_OPTIONS)
    if unknown:
        hint = "; pass cc=(8, 0) (a compute capability), not arch=" if "arch" in unknown else ""
        raise NumptxError(f"nx.kernel: unknown option(s) {', '.join(unknown)}; it takes "
                          f"{', '.join(sorted(_KERNEL_OPTIONS))}{hint}")
    if fn is not None and not callable(fn):
        fn, signature = None, fn
    if fn is None:
        if signature is not None:
            Kernel._parse_signature(signature)      # a bad signature fails at the decorator
        return lambda f: Kernel(f, signature, **options)
    return Kernel(fn, signature, **options)


_KERNEL_OPTIONS = frozenset({"cc", "fastmath", "lineinfo", "opt", "link_options", "cache", "bind",
                             "patch_constants", "simulate", "strict"})
