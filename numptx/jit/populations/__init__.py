"""numptx.jit.populations: Many candidates at once: packs (one module, picked at run time), run-time
constants, and ``nx.fitness`` (compiled, or interpreted on the CPU or the GPU) with its checks.

Nothing is imported here: each module at its first use."""
