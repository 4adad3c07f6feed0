"""numptx.jit.templates: CUDA C++ templates with ``PTX_INJECT`` sites: templates and variants, what a
stub may be and the checks the assembler does not make, kernel parameters, and launching
variants (residency, run-time constant tables).

Nothing is imported here: each module at its first use."""
