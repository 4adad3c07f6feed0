"""The seams between the kernels and what builds, packs and tunes them: :class:`Target` (what
:class:`~numptx.jit.templates.template.Template` and an ``@nx.kernel``
:class:`~numptx.jit.numba.kernel.Kernel` both offer) and :class:`TargetVariant` (what their
variants, ``Variant`` and ``KernelVariant``, both offer). :mod:`numptx.jit.populations.pack`,
:mod:`numptx.jit.tune.autotune`, :mod:`numptx.jit.populations.fitness` and
:mod:`numptx.search.sites` are typed against them, and refuse an object that lacks a member
with a :class:`TargetError` naming it::

    from numptx.jit.targets import Target, require_target
    isinstance(tmpl, Target), isinstance(kern, Target)     # True, True
    require_target(obj, "pack")       # TargetError: ... lacks build_many, build_template ...

Where the two differ on purpose, each says so through a member of its own, not through which
attributes it happens to have:

``per_signature``
    False for a template (one compiled kernel); True for a numba kernel, which numba-cuda
    compiles once per argument-type signature: its variants build and launch the template of
    each launch's arguments, its ``sites`` is a method of those arguments (not a mapping).
``language``
    What the kernel was written in (:data:`Language`): ``"PTX"``, ``"CUDA C++"`` (both launched
    with the CUDA driver's calling convention) or ``"Python"`` (numba's: an array is several
    parameters).
``TargetVariant.specialize(*args)`` / ``adopt(built)``
    The built variant a launch with ``args`` runs (a template's variant: itself), and taking a
    build made elsewhere (``build_many``'s) as one's own (a numba variant keeps it for its
    template, one per signature).

Nothing here imports a template, a kernel or the build (they import this module's users).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, Protocol, runtime_checkable

from ..errors import NumptxError
from ..inject import Site
from .compile.plans import BuildInfo

__all__ = ["Target", "SiteTarget", "TargetVariant", "TargetError", "Language", "LANGUAGES",
           "missing_members", "require_target"]

#: what a target's kernel was written in
Language = Literal["PTX", "CUDA C++", "Python"]
LANGUAGES: tuple[Language, ...] = ("PTX", "CUDA C++", "Python")


class TargetError(NumptxError):
    """An object given as a template or kernel that lacks what the call uses (the message
    names the members): :func:`require_target`'s error unless the call names its own."""


class TargetVariant(Protocol):
    """A template's or a numba kernel's variant (``Variant``, ``KernelVariant``): the stubs
    injected, built on first use. A numba variant's ``ptx``, ``cubin``, ``sites``, ``entry``,
    ``arch``, ``key`` and ``build_info`` are those of its kernel's declared or most recently
    compiled signature. Not runtime-checkable: on Python < 3.12 ``isinstance`` would read the
    properties, and so build the variant (:func:`missing_members` reads nothing)."""

    @property
    def ptx(self) -> str: ...
    @property
    def cubin(self) -> bytes: ...
    @property
    def sites(self) -> Mapping[str, Site]: ...
    @property
    def entry(self) -> str: ...
    @property
    def arch(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def build_info(self) -> BuildInfo | None: ...

    def specialize(self, *args: Any) -> TargetVariant:
        """The built variant a launch with ``args`` runs: a numba variant's for their
        argument types; a template's variant: itself."""
        ...

    def adopt(self, variant: Any) -> None:
        """Take ``variant`` (the same stubs, built elsewhere: ``build_many``'s) as this
        variant's build: a numba variant keeps it for its template (one per signature), a
        template's variant takes its cubin."""
        ...

    def __getitem__(self, config: Any) -> Callable[..., Any]:
        """``variant[grid, block](*args)``: the launch."""
        ...


@runtime_checkable
class Target(Protocol):
    """A template or a numba kernel, as :func:`~numptx.jit.populations.pack.pack`,
    :func:`~numptx.jit.tune.autotune.autotune`, fitness and the search take it (``Template``,
    ``CudaTemplate``, ``@nx.kernel``)."""

    @property
    def language(self) -> Language:
        """What the kernel was written in (:data:`Language`)."""
        ...

    @property
    def per_signature(self) -> bool:
        """True for a numba kernel: one template per argument-type signature."""
        ...

    @property
    def strict(self) -> bool:
        """A raw stub that never writes an out variable of its site: an error, not a warning."""
        ...

    @property
    def name(self) -> str:
        """What messages call the kernel."""
        ...

    @property
    def arch(self) -> str:
        """The architecture variants are built for (a numba kernel's default)."""
        ...

    def inject(self, stubs: Mapping[str, Any] | None = None, /, *,
               missing: str = "error") -> TargetVariant:
        """A variant: a stub at each site (by name)."""
        ...

    def build_many(self, batch: Iterable[Mapping[str, Any]], *, executor: Any = None,
                   progress: Any = False, errors: str = "raise", missing: str = "error",
                   max_workers: int | None = None) -> list[Any]:
        """The variants of a batch of stub mappings, built in parallel (by
        :meth:`build_template`'s template)."""
        ...

    def build_template(self, *args: Any,
                       device: tuple[int, int] | None = None) -> Target:
        """The template that builds the variants (a ``Template``, and so also what
        :func:`~numptx.jit.compile.build.build_many` takes): a template itself; a numba kernel's for
        the argument types of ``args`` (none: its declared or most recently compiled
        signature), compiled for a device of compute capability ``device`` where one is
        given (what a launch there runs)."""
        ...


@runtime_checkable
class SiteTarget(Target, Protocol):
    """A target whose sites are known before any launch: a template (a numba kernel is one
    template per signature, its ``sites`` a method of example arguments; its
    ``template(*args)`` is one). What :func:`numptx.search.evolve` evolves a site of."""

    @property
    def sites(self) -> Mapping[str, Site]:
        """``{name: Site}``, in the kernel's order."""
        ...


def _members(protocol: type) -> tuple[str, ...]:
    """The names a protocol declares: its annotations, methods and properties."""
    names: dict[str, None] = {}
    for cls in reversed(protocol.__mro__):
        if cls is object or cls.__name__ in ("Protocol", "Generic"):
            continue
        for name in (*getattr(cls, "__annotations__", {}), *vars(cls)):
            if not name.startswith("_") or name in ("__getitem__", "__call__"):
                names[name] = None
    return tuple(names)


def missing_members(obj: Any, protocol: type) -> tuple[str, ...]:
    """The members of ``protocol`` (:class:`Target` or :class:`TargetVariant`) that ``obj``
    lacks, found without reading any (no property runs: nothing is compiled or built); a
    class with a ``__getattr__`` (a delegating wrapper) is asked for the names it lacks
    otherwise.

    >>> missing_members(object(), Target)[:3]
    ('language', 'per_signature', 'strict')
    """
    return tuple(n for n in _members(protocol) if _absent(obj, n))


def _absent(obj: Any, name: str) -> bool:
    try:
        inspect.getattr_static(obj, name)
    except AttributeError:
        # a class that provides attributes through __getattr__ (a user's delegating wrapper)
        # is asked: only such a class runs code here, never a template's properties
        try:
            inspect.getattr_static(type(obj), "__getattr__")
        except AttributeError:
            return True
        return not hasattr(obj, name)
    return False


def require_target(obj: Any, where: str,
                   error: Callable[[str], NumptxError] = TargetError) -> Target:
    """``obj`` as a :class:`Target`, or ``error`` (the call's own: ``PackError``,
    ``AutotuneError``; default :class:`TargetError`) naming what it lacks and what ``where``
    (the call: ``"pack"``, ``"autotune"``) takes.

    >>> require_target(object(), "pack")          # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    numptx.jit.targets.TargetError: pack: object is not a template or a kernel: it lacks language, ...
    """
    lacking = missing_members(obj, Target)
    if lacking:
        raise error(f"{where}: {type(obj).__name__} is not a template or a kernel: it lacks "
                    f"{', '.join(lacking)} (give an nx.CudaTemplate, a Template or an "
                    f"@nx.kernel kernel; numptx.jit.targets.Target lists what one offers)")
    return obj
