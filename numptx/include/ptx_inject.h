/*
 * ptx_inject.h -- numptx's PTX_INJECT header under mm-ptx's name, so a kernel written for mm-ptx
 * (`#include <ptx_inject.h>`) compiles unchanged: numptx.cuda_to_ptx and CudaTemplate serve this
 * file to NVRTC; with nvcc, pass -I to numptx.include_dir(). The macros are those of
 * ptx_inject.cuh (PTX_INJECT, PTX_IN, PTX_MOD, PTX_OUT with (TYPE, name[, expr])). mm-ptx's
 * custom type tokens (PTX_TYPE_INFO_DOG ...) work once the type is registered:
 *     numptx.register_type("DOG", "f32", "f32", "f")
 * mm-ptx's host-side C API (PTX_INJECT_IMPLEMENTATION) is not part of this header: numptx's
 * Python API (numptx.PtxInject) replaces it.
 */
#include "ptx_inject.cuh"
