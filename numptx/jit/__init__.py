"""numptx.jit: the compile side of the pipeline, in subpackages in the pipeline's order.

* ``compile``: CUDA C++ -> PTX (:func:`~numptx.jit.compile.nvrtc.cuda_to_ptx`, NVRTC, once per
  template) -> cubin (:func:`~numptx.jit.compile.nvjitlink.ptx_to_cubin`, nvJitLink, once per
  variant); the cubin cache (memory + disk), constant patching (``patch``, ``plans``), batch
  builds (``build``) and the farm; what a cubin's kernels use (:func:`cubin_resources`, from the
  ELF, no tool) and their SASS (:func:`sass_text`, with ``numptx[tools]``);
* ``templates``: ``CudaTemplate`` and its variants (``template``), stubs and their checks,
  kernel parameters, launches (``cuda_launch``, ``residency``);
* ``numba``: ``nx.site`` (``numba_site``, its rewrite and intrinsic), ``@nx.kernel``
  (``kernel``), their launches and the simulator; every numba internal in ``numba_compat``;
* ``populations``: packs, run-time constants, ``nx.fitness`` (compiled or interpreted);
* ``tune``: ``nx.autotune``.

``errors`` (BuildError, LaunchError) and ``targets`` (the :class:`~numptx.jit.targets.Target`
seams that templates and kernels both satisfy) sit at the top; ``moved`` keeps the flat paths
of before (``numptx.jit.pack``) working as the same modules. Imports go one way module by
module (``tests/test_jit_layout.py`` checks there is no cycle); a subpackage is not a layer:
``template`` (templates) offers ``pack()`` from populations, the farm (compile) builds packed
kernels, and ``nx.site``'s module (numba) is below the CUDA C++ launcher, which reads its
simulator switch.
"""
from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING, Any

from . import moved as _moved

_moved.install()      # numptx.jit.pack and the other flat paths of before the subpackages

#: public name -> the module that defines it, imported at the name's first use (PEP 562), so
#: that ``numptx.jit.numba.after_import`` or ``numptx.jit.errors`` costs no NVRTC, nvJitLink or ELF
#: reader; tests/test_import_lazy.py checks it against the ``TYPE_CHECKING`` imports below
_LAZY: dict[str, str] = {
    "normalize_arch": "numptx.jit.compile.arch",
    "ptx_to_cubin": "numptx.jit.compile.nvjitlink", "nvjitlink_version": "numptx.jit.compile.nvjitlink",
    "cuda_to_ptx": "numptx.jit.compile.nvrtc", "nvrtc_version": "numptx.jit.compile.nvrtc",
    "Resources": "numptx.jit.compile.resources", "cubin_resources": "numptx.jit.compile.resources",
    "sass_instructions": "numptx.jit.compile.resources", "sass_text": "numptx.jit.compile.resources",
}

if TYPE_CHECKING:
    from .compile.arch import normalize_arch
    from .compile.nvjitlink import ptx_to_cubin, nvjitlink_version
    from .compile.nvrtc import cuda_to_ptx, nvrtc_version
    from .compile.resources import Resources, cubin_resources, sass_instructions, sass_text

__all__ = ["cuda_to_ptx", "ptx_to_cubin", "normalize_arch", "nvrtc_version", "nvjitlink_version",
           "Resources", "cubin_resources", "sass_text", "sass_instructions"]


def __getattr__(name: str) -> Any:
    """A public name or a submodule (``numptx.jit.numba.numba_site``) at its first use."""
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
