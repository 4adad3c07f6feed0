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
from .arch import normalize_arch
from .nvjitlink import ptx_to_cubin, nvjitlink_version
from .nvrtc import cuda_to_ptx, nvrtc_version
from .resources import Resources, cubin_resources, sass_instructions, sass_text

__all__ = ["cuda_to_ptx", "ptx_to_cubin", "normalize_arch", "nvrtc_version", "nvjitlink_version",
           "Resources", "cubin_resources", "sass_text", "sass_instructions"]
