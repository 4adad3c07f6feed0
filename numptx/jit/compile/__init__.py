"""numptx.jit.compile: CUDA C++ -> PTX (NVRTC) -> cubin (nvJitLink): compile and link options, GPU
architectures, the cubin cache and its folders, constant patching and its plans, batch builds
and the compile farm, and reading cubins (ELF, resources, SASS).

Nothing is imported here: each module at its first use."""
