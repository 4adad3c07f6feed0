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

import builtins as _builtins
import logging

from .annotate import process_cuda
from .dtypes import SiteType, get_dtype, register_type
from .errors import (AnnotationError, CompileError, LinkError, NumptxError, NumptxWarning,
                     PtxParseError, RenderError, StubNulWarning, ToolchainError, TypeRegistryError)
from .dsl.emulator import EmulationError, emulate
from ._program.interpret import InterpretError
from .dsl import PRECISIONS, BindError, PrecisionError, PtxExpr, TraceError, ptx_expr
from .dsl import GradError, grad, jacobian, value_and_grad
from .dsl import functions as _functions
from .dsl.functions import *  # noqa: F403 - every nx.* DSL function (nx.sqrt, nx.where, ...)
from .dsl.types import TYPE_NAMES as _TYPE_NAMES
from .dsl.types import DType, bf16, f16, f32, f64, pred, s32, s64, u32, u64
from .inject import PtxInject, Site, Variable
from .instructions import TABLE, Instr, add_instruction
from .jit.nvjitlink import ptx_to_cubin
from .jit.nvrtc import cuda_to_ptx, include_dir
from .jit.numba_site import SiteError, simulator_active, site
from .jit.template import BuildError, CudaTemplate, Template, Variant
from .jit.kernel import Kernel, KernelVariant, kernel
from .jit.cache import CubinCache, default_cache
from .jit.launch import LaunchError
from .jit.pack import Pack, PackError
from .jit.pack_kernels import PerKernel
from .jit.runtime_constants import ConstantsError
from .jit.fitness import fitness
from .jit.interpret_gpu import GpuInterpreter as _GpuInterpreter
from ._program.interpret import register_device as _register_device
from .jit.errors import CubinError, ToolMissingError
from .jit.resources import Resources, cubin_resources
from .jit.stub_checks import StubRuleError
from .jit.autotune import AutotuneError, AutotuneWarning, Excluded, Tuned, autotune
from .jit.autotune_decorator import Autotuned, autotuned
from . import search

from ._version import __version__

__all__ = [
    "PtxInject", "Site", "Variable", "cuda_to_ptx", "ptx_to_cubin", "process_cuda", "include_dir",
    "register_type", "get_dtype", "SiteType", "DType",
    "NumptxError", "PtxParseError", "RenderError", "AnnotationError", "CompileError", "LinkError",
    "ToolchainError", "TypeRegistryError", "EmulationError", "InterpretError", "NumptxWarning",
    "StubNulWarning",
    "__version__",
    "emulate", "TABLE", "Instr", "add_instruction",
    "ptx_expr", "PtxExpr", "TraceError", "BindError", "PrecisionError", "PRECISIONS", *_TYPE_NAMES,
    "grad", "value_and_grad", "jacobian", "GradError",
    "site", "simulator_active", "kernel", "Kernel", "KernelVariant", "CudaTemplate", "Template", "Variant",
    "BuildError", "SiteError", "LaunchError", "CubinCache", "default_cache",
    "Pack", "PackError", "PerKernel", "ConstantsError", "fitness", "StubRuleError",
    "Resources", "cubin_resources", "CubinError", "ToolMissingError",
    "autotune", "autotuned", "Autotuned", "Tuned", "AutotuneError", "AutotuneWarning", "Excluded",
    "search",
]
# the DSL functions (one list: numptx/dsl/functions.py); nx.abs, nx.pow and nx.round exist, but
# ``from numptx import *`` leaves the builtins of those names alone
__all__ += [_n for _n in _functions.__all__ if not hasattr(_builtins, _n)]

logging.getLogger(__name__).addHandler(logging.NullHandler())
_register_device("gpu", _GpuInterpreter())     # sp.interpret(device="gpu"); the fitness scorer
                                               # registers at numptx.jit.interpret_gpu's import
