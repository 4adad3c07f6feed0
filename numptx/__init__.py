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

``import numptx`` loads only the errors and the post-import hooks (numptx.jit.numba.after_import):
every other name (``nx.ptx_expr``, ``nx.f32``, ``nx.Template``, ``nx.search``, the ``nx.*`` DSL
functions, any submodule) is imported at its first use (PEP 562), from the module that defines
it (:data:`_LAZY`), so ``from numptx import stack_ptx`` pays for the stack programs only. What
the eager import registered (``nx.site``'s numba rewrite, the GPU interpreter and GPU fitness
scorer) registers when the module it registers with is imported. ``benchmarks/bench_import.py``
measures the cost.
"""
from __future__ import annotations

import builtins as _builtins
import importlib as _importlib
import importlib.util as _importlib_util
import logging
import typing as _typing

from ._version import __version__
from .errors import (AnnotationError, CompileError, LinkError, NumptxError, NumptxWarning,
                     PtxParseError, RenderError, StubNulWarning, ToolchainError, TypeRegistryError)

#: public name -> the module that defines it, imported at the name's first use. One table, read
#: by ``__getattr__``, ``__dir__`` and the tests (tests/test_import_lazy.py checks it against the
#: ``TYPE_CHECKING`` imports below, which type checkers and tests/test_jit_layout.py read).
_LAZY: dict[str, str] = {
    "process_cuda": "numptx.annotate",
    "SiteType": "numptx.dtypes", "get_dtype": "numptx.dtypes", "register_type": "numptx.dtypes",
    "EmulationError": "numptx.dsl.ptx_parse", "emulate": "numptx.dsl.emulator",
    "InterpretError": "numptx._program.tapes",
    "PRECISIONS": "numptx.dsl.expr", "BindError": "numptx.dsl.expr", "PtxExpr": "numptx.dsl.expr",
    "ptx_expr": "numptx.dsl.expr",
    "PrecisionError": "numptx.dsl.proxy", "TraceError": "numptx.dsl.proxy",
    "GradError": "numptx.dsl.grad", "grad": "numptx.dsl.grad", "jacobian": "numptx.dsl.grad",
    "value_and_grad": "numptx.dsl.grad",
    "DType": "numptx.dsl.types", "f16": "numptx.dsl.types", "bf16": "numptx.dsl.types",
    "f32": "numptx.dsl.types", "f64": "numptx.dsl.types", "s32": "numptx.dsl.types",
    "u32": "numptx.dsl.types", "s64": "numptx.dsl.types", "u64": "numptx.dsl.types",
    "pred": "numptx.dsl.types",
    "PtxInject": "numptx.inject", "Site": "numptx.inject", "Variable": "numptx.inject",
    "TABLE": "numptx.instructions", "add_instruction": "numptx.instructions",
    "Instr": "numptx.instruction_model",
    "ptx_to_cubin": "numptx.jit.compile.nvjitlink",
    "cuda_to_ptx": "numptx.jit.compile.nvrtc", "include_dir": "numptx.jit.compile.nvrtc",
    "SiteError": "numptx.jit.numba.numba_site", "simulator_active": "numptx.jit.numba.numba_site",
    "site": "numptx.jit.numba.numba_site",
    "CudaTemplate": "numptx.jit.templates.template", "Template": "numptx.jit.templates.template",
    "Variant": "numptx.jit.templates.template",
    "Kernel": "numptx.jit.numba.kernel", "KernelVariant": "numptx.jit.numba.kernel",
    "kernel": "numptx.jit.numba.kernel",
    "CubinCache": "numptx.jit.compile.cache", "default_cache": "numptx.jit.compile.cache",
    "BuildError": "numptx.jit.errors", "LaunchError": "numptx.jit.errors",
    "CubinError": "numptx.jit.errors", "ToolMissingError": "numptx.jit.errors",
    "Pack": "numptx.jit.populations.pack",
    "PackError": "numptx.jit.populations.pack_kernels", "PerKernel": "numptx.jit.populations.pack_kernels",
    "ConstantsError": "numptx.jit.populations.runtime_constants",
    "fitness": "numptx.jit.populations.fitness",
    "Resources": "numptx.jit.compile.resources", "cubin_resources": "numptx.jit.compile.resources",
    "StubRuleError": "numptx.jit.templates.stub_checks",
    "autotune": "numptx.jit.tune.autotune",
    "AutotuneError": "numptx.jit.tune.autotune_types", "AutotuneWarning": "numptx.jit.tune.autotune_types",
    "Excluded": "numptx.jit.tune.autotune_types", "Tuned": "numptx.jit.tune.autotune_types",
    "Autotuned": "numptx.jit.tune.autotune_decorator", "autotuned": "numptx.jit.tune.autotune_decorator",
    "ConfigError": "numptx.config",
}
#: the ``nx.*`` DSL functions (nx.sqrt, nx.where, ...) come from this module's ``__all__``
_DSL_FUNCTIONS = "numptx.dsl.functions"
#: every submodule is an attribute at its first use (``nx.jit``, ``nx.stack_ptx``), except these,
#: which need an optional extra (``import numptx.torch`` says which)
_EXTRAS = frozenset({"torch"})

if _typing.TYPE_CHECKING:       # what the table resolves to, for type checkers and the layout test
    from . import search
    from .annotate import process_cuda
    from .dtypes import SiteType, get_dtype, register_type
    from .dsl.ptx_parse import EmulationError
    from .dsl.emulator import emulate
    from ._program.tapes import InterpretError
    from .dsl.expr import PRECISIONS, BindError, PtxExpr, ptx_expr
    from .dsl.proxy import PrecisionError, TraceError
    from .dsl.grad import GradError, grad, jacobian, value_and_grad
    from .dsl.functions import *  # noqa: F403
    from .dsl.types import DType, bf16, f16, f32, f64, pred, s32, s64, u32, u64
    from .inject import PtxInject, Site, Variable
    from .instructions import TABLE, add_instruction
    from .instruction_model import Instr
    from .jit.compile.nvjitlink import ptx_to_cubin
    from .jit.compile.nvrtc import cuda_to_ptx, include_dir
    from .jit.numba.numba_site import SiteError, simulator_active, site
    from .jit.templates.template import CudaTemplate, Template, Variant
    from .jit.numba.kernel import Kernel, KernelVariant, kernel
    from .jit.compile.cache import CubinCache, default_cache
    from .jit.errors import BuildError, CubinError, LaunchError, ToolMissingError
    from .jit.populations.pack import Pack
    from .jit.populations.pack_kernels import PackError, PerKernel
    from .jit.populations.runtime_constants import ConstantsError
    from .jit.populations.fitness import fitness
    from .jit.compile.resources import Resources, cubin_resources
    from .jit.templates.stub_checks import StubRuleError
    from .jit.tune.autotune import autotune
    from .jit.tune.autotune_types import AutotuneError, AutotuneWarning, Excluded, Tuned
    from .jit.tune.autotune_decorator import Autotuned, autotuned
    from .config import ConfigError

_ERRORS = ["NumptxError", "PtxParseError", "RenderError", "AnnotationError", "CompileError",
           "LinkError", "ToolchainError", "TypeRegistryError", "NumptxWarning", "StubNulWarning"]


def _all() -> list[str]:
    """``__all__``: the table's names, the errors, ``search`` and the DSL functions but those
    that shadow a builtin (``from numptx import *`` leaves abs, pow and round alone)."""
    functions = _importlib.import_module(_DSL_FUNCTIONS)
    return [*_LAZY, *_ERRORS, "__version__", "search",
            *(n for n in functions.__all__ if not hasattr(_builtins, n))]


def __getattr__(name: str) -> _typing.Any:
    """A public name at its first use: imported from its module, then kept as an attribute."""
    if name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name]), name)
    elif name == "__all__":
        value = _all()
    elif name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    elif name not in _EXTRAS and _importlib_util.find_spec(f"{__name__}.{name}") is not None:
        return _importlib.import_module(f"{__name__}.{name}")   # sets the attribute itself
    else:
        functions = None if name.startswith("_") else _importlib.import_module(_DSL_FUNCTIONS)
        if functions is None or name not in functions.__all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(functions, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    import pkgutil
    functions = _importlib.import_module(_DSL_FUNCTIONS)
    modules = {m.name for m in pkgutil.iter_modules(__path__)
               if not m.name.startswith("_") and m.name not in _EXTRAS}
    return sorted({*globals(), *_LAZY, *modules, *functions.__all__})


class _GpuOnDemand:
    """``sp.interpret(device="gpu")``'s backend (``numptx._program.interpret``'s
    ``DeviceInterpreter``), registered once the interpreter is imported: it imports numptx.jit's
    :class:`~numptx.jit.populations.interpret_gpu.GpuInterpreter` at its first use."""

    def __init__(self) -> None:
        self._real: _typing.Any = None

    def _backend(self) -> _typing.Any:
        if self._real is None:
            from .jit.populations.interpret_gpu import GpuInterpreter
            self._real = GpuInterpreter()
        return self._real

    def available(self) -> bool:
        return self._backend().available()

    def run(self, tp: _typing.Any, columns: list, n_rows: int) -> dict:
        return self._backend().run(tp, columns, n_rows)


def _gpu_losses(*args: _typing.Any, **kwargs: _typing.Any) -> _typing.Any:
    """The GPU fitness scorer (numptx.jit.populations.interpret_gpu's, which registers itself at its
    import), registered on demand for search and ``nx.fitness`` scoring with ``device="gpu"``."""
    from .jit.populations.interpret_gpu import fitness_losses
    return fitness_losses(*args, **kwargs)


def _register_device() -> None:
    from ._program.interpret import register_device
    register_device("gpu", _GpuOnDemand())


def _register_scorer() -> None:
    from .jit.populations.fitness_interpret import register_gpu_scorer
    register_gpu_scorer(_gpu_losses)     # interpret_gpu's own replaces it at its import


def _register_site() -> None:
    from .jit.numba.numba_site import register
    register()                           # nx.site's numba IR rewrite (a no-op in the simulator)


def _hooks() -> None:
    """Registrations that ran at ``import numptx`` when it imported everything now run when
    the module they register with is imported (numptx.jit.numba.after_import)."""
    from .jit.numba.after_import import when_imported
    when_imported("numptx._program.interpret", _register_device)
    when_imported("numptx.jit.populations.fitness_interpret", _register_scorer)
    when_imported("numba.cuda", _register_site)


logging.getLogger(__name__).addHandler(logging.NullHandler())
_hooks()
