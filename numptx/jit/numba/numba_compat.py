"""Every numba-cuda internal numptx touches, in one place.

numptx launches numba kernels with its own cubins, rewrites numba's IR for ``nx.site`` and runs
numba's simulator in waves. That takes names numba-cuda does not document: its driver layer
(``numba.cuda.cudadrv``), its vendored compiler core (``numba.cuda.core``), its dispatcher's
kernel objects, its simulator's classes, and a few underscored attributes. Each one is named
here, once, and the rest of numptx imports it from this module (``tests/test_numba_compat.py``
walks the package and fails on a numba internal used anywhere else, and checks that every entry
below resolves on the installed numba-cuda).

Checked against numba-cuda :data:`CHECKED` (the range ``pyproject.toml`` allows). When a new
numba-cuda moves one of these, the fix goes here, under a version check if need be::

    from numptx.jit import numba_compat
    numba_compat.missing()          # [] when every entry resolves (imports numba.cuda)

Nothing here imports numba at import time: each function imports what it returns on first use,
so ``import numptx`` stays free of numba.
"""
from __future__ import annotations

import functools
import importlib
from typing import Any, NamedTuple

__all__ = ["CHECKED", "ENTRIES", "SIMULATOR_ENTRIES", "ATTRIBUTES", "SIMULATOR_ATTRIBUTES",
           "RewriteAPI", "resolve", "missing",
           "current_context", "core_stream_converter", "host_to_device", "driver_version",
           "wrap_arg", "arg_hint_type", "numba_config", "normalize_signature",
           "dispatcher_class", "typeof_impl", "rewrite_api", "ir_definitions",
           "code_library", "set_code_library", "needs_more_linking", "has_numba_type_property",
           "declared_numba_type", "performance_warnings", "simulator_array_type",
           "simulator_kernel_module", "fake_cuda_shared_type", "simulator_thread_dims",
           "block_manager_parts"]

#: numba-cuda versions these entries were checked against (the tests pass with each). 0.30.0,
#: 0.30.2 and 0.30.3 do not import next to numba 0.68 (what pip installs with them).
CHECKED = ("0.30.4",)

#: entry name -> (module, attribute): the numba-cuda internals numptx reads, with a GPU or not
#: (attribute "": the module itself)
ENTRIES: dict[str, tuple[str, str]] = {
    "get_context": ("numba.cuda.cudadrv.devices", "get_context"),
    "to_core_stream": ("numba.cuda.cudadrv.driver", "_to_core_stream"),
    "host_to_device": ("numba.cuda.cudadrv.driver", "host_to_device"),
    "driver": ("numba.cuda.cudadrv.driver", "driver"),
    "wrap_arg": ("numba.cuda.args", "wrap_arg"),
    "ArgHint": ("numba.cuda.args", "ArgHint"),
    "config": ("numba.cuda.core.config", ""),
    "normalize_signature": ("numba.cuda.core.sigutils", "normalize_signature"),
    "CUDADispatcher": ("numba.cuda.dispatcher", "CUDADispatcher"),
    "typeof_impl": ("numba.cuda.typing.typeof", "typeof_impl"),
    "ir": ("numba.cuda.core.ir", ""),
    "UnsupportedError": ("numba.cuda.core.errors", "UnsupportedError"),
    "Rewrite": ("numba.cuda.core.rewrites", "Rewrite"),
    "register_rewrite": ("numba.cuda.core.rewrites", "register_rewrite"),
    "NumbaPerformanceWarning": ("numba.cuda.core.errors", "NumbaPerformanceWarning"),
}

#: entry name -> (module, attribute): the simulator's internals (``NUMBA_ENABLE_CUDASIM=1``)
SIMULATOR_ENTRIES: dict[str, tuple[str, str]] = {
    "FakeCUDAArray": ("numba.cuda.simulator.cudadrv.devicearray", "FakeCUDAArray"),
    "simulator_kernel": ("numba.cuda.simulator.kernel", ""),
    "BlockManager": ("numba.cuda.simulator.kernel", "BlockManager"),
    "BlockThread": ("numba.cuda.simulator.kernel", "BlockThread"),
    "FakeCUDAModule": ("numba.cuda.simulator.kernel", "FakeCUDAModule"),
    "FakeCUDAShared": ("numba.cuda.simulator.kernelapi", "FakeCUDAShared"),
}

#: private attribute -> (module, class or function) of numba-cuda that sets or reads it; the
#: test checks the code of each still names it
ATTRIBUTES: dict[str, tuple[str, str]] = {
    "_codelibrary": ("numba.cuda.dispatcher", "_Kernel"),
    "_linking_files": ("numba.cuda.codegen", "CUDACodeLibrary"),
    "_definitions": ("numba.cuda.core.ir", "FunctionIR"),
    "_numba_type_": ("numba.cuda.typing.typeof", "typeof_impl"),
}
#: the same for the simulator
SIMULATOR_ATTRIBUTES: dict[str, tuple[str, str]] = {
    "_manager": ("numba.cuda.simulator.kernel", "BlockThread"),
    "_grid_dim": ("numba.cuda.simulator.kernel", "BlockManager"),
    "_block_dim": ("numba.cuda.simulator.kernel", "BlockManager"),
    "_f": ("numba.cuda.simulator.kernel", "BlockManager"),
    "_debug": ("numba.cuda.simulator.kernel", "BlockManager"),
}


@functools.lru_cache(maxsize=None)
def resolve(name: str) -> Any:
    """The numba-cuda object of entry ``name`` (:data:`ENTRIES` or :data:`SIMULATOR_ENTRIES`),
    imported on first use.

        >>> resolve("normalize_signature").__name__                # doctest: +SKIP
        'normalize_signature'
    """
    module, attr = ENTRIES.get(name) or SIMULATOR_ENTRIES[name]
    importlib.import_module("numba.cuda")      # first: it sets up the numba.cuda namespace
    found = importlib.import_module(module)
    return getattr(found, attr) if attr else found


def missing(simulator: bool = False) -> list[str]:
    """The entries (``module.attribute: error``) that do not resolve on the installed
    numba-cuda: [] when numptx and numba-cuda agree. ``simulator=True`` checks the simulator's
    entries (in a process with ``NUMBA_ENABLE_CUDASIM=1``)."""
    out = []
    for name, (module, attr) in (SIMULATOR_ENTRIES if simulator else ENTRIES).items():
        try:
            resolve(name)
        except (ImportError, AttributeError) as e:
            out.append(f"{module}{'.' if attr else ''}{attr}: {type(e).__name__}: {e}")
    return out


# -- the driver layer (numba.cuda.cudadrv) ---------------------------------------------------
def current_context() -> Any:
    """numba's context of the current device (``numba.cuda.cudadrv.devices.get_context()``;
    checked against numba-cuda 0.30.4): ``.device``, ``.create_module_image``, ..."""
    return resolve("get_context")()


def core_stream_converter() -> Any:
    """numba-cuda's ``cudadrv.driver._to_core_stream``: fn(0, a numba Stream, a cuda.core
    Stream or GraphBuilder) -> a cuda.core Stream, raising TypeError otherwise. Returned as the
    function itself, for launch plans that keep it (checked against numba-cuda 0.30.4)."""
    return resolve("to_core_stream")


def host_to_device(ptr: Any, data: bytes, size: int) -> None:
    """Copy ``size`` bytes of ``data`` to device address ``ptr`` (numba-cuda's
    ``cudadrv.driver.host_to_device``; checked against numba-cuda 0.30.4)."""
    resolve("host_to_device")(ptr, data, size)


def driver_version() -> tuple[int, ...]:
    """The CUDA driver's version, e.g. ``(13, 0)`` (``cudadrv.driver.driver.get_version()``;
    checked against numba-cuda 0.30.4)."""
    return tuple(resolve("driver").get_version())


# -- arguments and types --------------------------------------------------------------------
def wrap_arg(value: Any) -> Any:
    """numba's argument wrapper of a kernel argument (``numba.cuda.args.wrap_arg``:
    ``.to_device(retr, stream)``; checked against numba-cuda 0.30.4)."""
    return resolve("wrap_arg")(value)


def arg_hint_type() -> type:
    """The base class of ``cuda.In``/``cuda.Out``/``cuda.InOut`` (``numba.cuda.args.ArgHint``;
    checked against numba-cuda 0.30.4)."""
    return resolve("ArgHint")


def numba_config() -> Any:
    """numba-cuda's configuration module (``numba.cuda.core.config``:
    ``CUDA_ARRAY_INTERFACE_SYNC``, ...; checked against numba-cuda 0.30.4)."""
    return resolve("config")


def normalize_signature(signature: Any) -> tuple:
    """``(argument types, return type)`` of a kernel signature (a string or numba types;
    ``numba.cuda.core.sigutils``; checked against numba-cuda 0.30.4). Raises what numba raises
    for a bad one (NameError, TypeError, SyntaxError, ...)."""
    return resolve("normalize_signature")(signature)


def dispatcher_class() -> type:
    """numba-cuda's dispatcher class (``numba.cuda.dispatcher.CUDADispatcher``; checked against
    numba-cuda 0.30.4)."""
    return resolve("CUDADispatcher")


def typeof_impl() -> Any:
    """numba-cuda's ``typeof`` single-dispatch function (``numba.cuda.typing.typeof``; checked
    against numba-cuda 0.30.4): ``typeof_impl().dispatch(cls)`` is the typer of ``cls``."""
    return resolve("typeof_impl")


def has_numba_type_property(cls: type) -> bool:
    """Whether instances of ``cls`` carry their numba type in a ``_numba_type_`` property (what
    numba-cuda's typeof reads first: its device arrays; checked against numba-cuda 0.30.4)."""
    return isinstance(getattr(cls, "_numba_type_", None), property)


def declared_numba_type(value: Any) -> Any:
    """``value``'s own ``_numba_type_`` (None where it has none; checked against numba-cuda
    0.30.4)."""
    return getattr(value, "_numba_type_", None)


# -- the IR rewrite of nx.site ----------------------------------------------------------------
class RewriteAPI(NamedTuple):
    """What the ``nx.site`` rewrite uses of numba-cuda's compiler (``numba.cuda.core``)."""
    ir: Any
    UnsupportedError: type
    Rewrite: type
    register_rewrite: Any


def rewrite_api() -> RewriteAPI:
    """numba-cuda's IR module, ``UnsupportedError`` and rewrite registry (``numba.cuda.core.ir``,
    ``.errors``, ``.rewrites``; checked against numba-cuda 0.30.4)."""
    return RewriteAPI(resolve("ir"), resolve("UnsupportedError"), resolve("Rewrite"),
                      resolve("register_rewrite"))


def ir_definitions(func_ir: Any) -> dict:
    """A FunctionIR's variable name -> list of definitions, which a rewrite keeps in step with
    the statements it changes (``FunctionIR._definitions``; checked against numba-cuda 0.30.4)."""
    return func_ir._definitions


# -- numba's compiled kernels ----------------------------------------------------------------
def code_library(kernel: Any) -> Any:
    """The code library of a compiled numba kernel (``_Kernel._codelibrary``: where its loaded
    cubin comes from, ``.get_cufunc()``; checked against numba-cuda 0.30.4)."""
    return kernel._codelibrary


def set_code_library(kernel: Any, library: Any) -> None:
    """Make ``kernel`` (a copy of a numba ``_Kernel``) launch from ``library`` (an object with
    ``get_cufunc()``; checked against numba-cuda 0.30.4)."""
    kernel._codelibrary = library


def needs_more_linking(library: Any) -> bool:
    """Whether a numba code library links more than its own code (``link=`` files, NRT, the
    device runtime for cooperative groups; checked against numba-cuda 0.30.4)."""
    return bool(getattr(library, "_linking_files", None)
                or getattr(library, "needs_cudadevrt", False))


def performance_warnings() -> tuple[type, ...]:
    """The warning classes numba-cuda's low-occupancy and host-copy warnings are raised as:
    numba-cuda's own ``numba.cuda.core.errors.NumbaPerformanceWarning`` (0.30.4), and numba's
    ``numba.core.errors`` one where it is importable (older numba-cuda raised that one)."""
    out = []
    for module in ("numba.cuda.core.errors", "numba.core.errors"):
        try:
            out.append(importlib.import_module(module).NumbaPerformanceWarning)
        except (ImportError, AttributeError):
            pass
    return tuple(dict.fromkeys(out))


# -- the simulator (NUMBA_ENABLE_CUDASIM=1) ---------------------------------------------------
def simulator_array_type() -> type:
    """The simulator's device array class (``numba.cuda.simulator.cudadrv.devicearray``;
    checked against numba-cuda 0.30.4)."""
    return resolve("FakeCUDAArray")


def simulator_kernel_module() -> Any:
    """The simulator's kernel module (``numba.cuda.simulator.kernel``: ``BlockManager``,
    ``BlockThread``, ``FakeCUDAModule``, which numptx subclasses and swaps in; checked against
    numba-cuda 0.30.4)."""
    return resolve("simulator_kernel")


def fake_cuda_shared_type() -> type:
    """The simulator's ``cuda.shared`` implementation (``numba.cuda.simulator.kernelapi``;
    checked against numba-cuda 0.30.4): ``FakeCUDAShared(dynshared_size)``."""
    return resolve("FakeCUDAShared")


def simulator_thread_dims(thread: Any) -> tuple[tuple, tuple] | None:
    """``(block dims, grid dims)`` of the launch a simulator thread belongs to (read from its
    ``BlockManager``), or None for any other thread (checked against numba-cuda 0.30.4)."""
    m = getattr(thread, "_manager", None)
    if m is None:
        return None
    return tuple(getattr(m, "_block_dim", ())), tuple(getattr(m, "_grid_dim", ()))


def block_manager_parts(manager: Any) -> tuple[Any, tuple, tuple, bool]:
    """``(kernel function, grid dims, block dims, debug)`` of a simulator ``BlockManager``: its
    constructor's arguments, in order (checked against numba-cuda 0.30.4)."""
    return manager._f, manager._grid_dim, manager._block_dim, manager._debug
