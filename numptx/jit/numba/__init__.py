"""numptx.jit.numba: numba-cuda kernels with sites: ``nx.site`` and its rewrite, ``@nx.kernel``, launching
their variants, the simulator's checks and waves, and every numba internal numptx touches
(``numba_compat``).

Nothing is imported here: each module at its first use."""
