"""numptx.jit: the compile side of the pipeline.

* :func:`numptx.jit.nvrtc.cuda_to_ptx` — CUDA C++ template -> PTX (NVRTC, once per template);
* :func:`numptx.jit.nvjitlink.ptx_to_cubin` — injected PTX -> cubin (nvJitLink, once per variant).

``numba_site`` (``nx.site`` in numba kernels), ``kernel`` (``@nx.kernel``), ``template``
(``CudaTemplate``, ``build_many``), ``cache`` (memory + disk cubin cache) and ``launch`` build
and run variants. ``resources`` reads what a cubin's kernels use (:func:`cubin_resources`, from
the ELF, no tool) and their SASS (:func:`sass_text`, :func:`sass_instructions`, with
``numptx[tools]``).

Imports go one way (``tests/test_jit_layout.py`` checks it, no cycle): ``errors`` (BuildError,
LaunchError), ``stubs`` (what a stub may be), ``patch`` and ``plans`` (constant patching),
``residency`` (loaded modules, launch configurations) and ``sim_checks`` sit below ``build``,
``cuda_launch`` and ``launch``; ``template`` uses those; ``kernel`` comes last. ``cubin_elf``
(the ELF reader), ``sass`` (nvdisasm) and ``resources`` sit below ``pack``, ``template`` and
``kernel``, whose variants inherit ``resources`` and ``sass()`` from ``CubinInspection``.
"""
from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING, Any

#: public name -> the module that defines it, imported at the name's first use (PEP 562), so
#: that ``numptx.jit.after_import`` or ``numptx.jit.errors`` costs no NVRTC, nvJitLink or ELF
#: reader; tests/test_import_lazy.py checks it against the ``TYPE_CHECKING`` imports below
_LAZY: dict[str, str] = {
    "normalize_arch": "numptx.jit.arch",
    "ptx_to_cubin": "numptx.jit.nvjitlink", "nvjitlink_version": "numptx.jit.nvjitlink",
    "cuda_to_ptx": "numptx.jit.nvrtc", "nvrtc_version": "numptx.jit.nvrtc",
    "Resources": "numptx.jit.resources", "cubin_resources": "numptx.jit.resources",
    "sass_instructions": "numptx.jit.resources", "sass_text": "numptx.jit.resources",
}

if TYPE_CHECKING:
    from .arch import normalize_arch
    from .nvjitlink import ptx_to_cubin, nvjitlink_version
    from .nvrtc import cuda_to_ptx, nvrtc_version
    from .resources import Resources, cubin_resources, sass_instructions, sass_text

__all__ = ["cuda_to_ptx", "ptx_to_cubin", "normalize_arch", "nvrtc_version", "nvjitlink_version",
           "Resources", "cubin_resources", "sass_text", "sass_instructions"]


def __getattr__(name: str) -> Any:
    """A public name or a submodule (``numptx.jit.numba_site``) at its first use."""
    if name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if not name.startswith("__"):
        try:
            return _importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
