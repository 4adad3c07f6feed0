"""numptx.jit.tune: ``nx.autotune`` and ``nx.autotuned``: options, arguments, the simulator path, results
and the ranking cache.

Nothing is imported here: each module at its first use."""
