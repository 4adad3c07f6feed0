"""numptx.jit: the compile side of the pipeline.

* :func:`numptx.jit.nvrtc.cuda_to_ptx` — CUDA C++ template -> PTX (NVRTC, once per template);
* :func:`numptx.jit.nvjitlink.ptx_to_cubin` — injected PTX -> cubin (nvJitLink, once per variant).

``numba_site`` (``nx.site`` in numba kernels), ``kernel`` (``@nx.kernel``), ``template``
(``CudaTemplate``, ``build_many``), ``cache`` (memory + disk cubin cache) and ``launch`` build
and run variants.

Imports go one way (``tests/test_jit_layout.py`` checks it, no cycle): ``errors`` (BuildError,
LaunchError), ``stubs`` (what a stub may be), ``patch`` and ``plans`` (constant patching),
``residency`` (loaded modules, launch configurations) and ``sim_checks`` sit below ``build``,
``cuda_launch`` and ``launch``; ``template`` uses those; ``kernel`` comes last.
"""
from .arch import normalize_arch
from .nvjitlink import ptx_to_cubin, nvjitlink_version
from .nvrtc import cuda_to_ptx, nvrtc_version

__all__ = ["cuda_to_ptx", "ptx_to_cubin", "normalize_arch", "nvrtc_version", "nvjitlink_version"]
