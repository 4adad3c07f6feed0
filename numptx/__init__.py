"""numptx: GPU kernel variants in microseconds.

Compile a CUDA C++ (or numba) kernel template once, then make variants by injecting PTX stubs
at named sites and assembling each variant with nvJitLink::

    import numptx as nx
    ptx = nx.cuda_to_ptx(SRC, arch="sm_90")        # once per template (NVRTC)
    inj = nx.PtxInject(ptx)
    site = inj.sites["combine"]
    x, y, z = site["x"], site["y"], site["z"]
    cubin = nx.ptx_to_cubin(inj.render({"combine": f"add.f32 %{z.reg}, %{x.reg}, %{y.reg};"}),
                            arch="sm_90")           # once per variant (nvJitLink)
"""
from __future__ import annotations

import logging

from .annotate import process_cuda
from .dtypes import DType, get_dtype, register_type
from .errors import (AnnotationError, CompileError, LinkError, NumptxError, PtxParseError,
                     RenderError, ToolchainError, TypeRegistryError)
from .dsl.emulator import EmulationError, emulate
from .dsl import (BindError, PtxExpr, TraceError, ptx_expr, bf16, f16, f32, f64, pred, s32, s64,
                  u32, u64, abs, absolute, arctan, bitcast, cbrt, ceil, clip, copysign, cos, cosh,
                  exp, exp2, expm1, floor, floor_divide, fma, fmax, fmin, fmod, hypot, isfinite,
                  isinf, isnan, log, log1p, log2, log10, logical_and, logical_not, logical_or,
                  logical_xor, maximum, minimum, pow, power, rcp, remainder, rint, round, rsqrt,
                  sigmoid, sign, sin, sinh, sqrt, square, tan, tanh, trunc, where)
from .inject import PtxInject, Site, Variable
from .instructions import TABLE, Instr, add_instruction
from .jit.nvjitlink import ptx_to_cubin
from .jit.nvrtc import cuda_to_ptx, include_dir
from .jit.numba_site import SiteError, site
from .jit.template import BuildError, CudaTemplate, Template, Variant
from .jit.kernel import Kernel, KernelVariant, kernel
from .jit.cache import CubinCache, default_cache
from .jit.launch import LaunchError

__version__ = "0.1.0"

__all__ = [
    "PtxInject", "Site", "Variable", "cuda_to_ptx", "ptx_to_cubin", "process_cuda", "include_dir",
    "register_type", "get_dtype", "DType",
    "NumptxError", "PtxParseError", "RenderError", "AnnotationError", "CompileError", "LinkError",
    "ToolchainError", "TypeRegistryError", "EmulationError", "__version__",
    "emulate", "TABLE", "Instr", "add_instruction",
    "ptx_expr", "PtxExpr", "TraceError", "BindError",
    "f16", "bf16", "f32", "f64", "s32", "u32", "s64", "u64", "pred",
    "absolute", "arctan", "bitcast", "cbrt", "ceil", "clip", "copysign", "cos", "cosh", "exp",
    "exp2", "expm1", "floor", "floor_divide", "fma", "fmax", "fmin", "fmod", "hypot", "isfinite",
    "isinf", "isnan", "log", "log1p", "log2", "log10", "logical_and", "logical_not", "logical_or",
    "logical_xor", "maximum", "minimum", "power", "rcp", "remainder", "rint", "rsqrt", "sigmoid",
    "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh", "trunc", "where",
    "site", "kernel", "Kernel", "KernelVariant", "CudaTemplate", "Template", "Variant",
    "BuildError", "SiteError", "LaunchError", "CubinCache", "default_cache",
]

logging.getLogger(__name__).addHandler(logging.NullHandler())
