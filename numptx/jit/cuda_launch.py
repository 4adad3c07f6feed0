"""Launching variants of CUDA C++ (and raw PTX) templates through numba-cuda.

::

    tmpl = nx.CudaTemplate(SRC, entry="kernel")
    tmpl.params                        # (Param(name='out', ctype='float*', ...), ...)
    v = tmpl.inject(combine=stub)
    v[grid, block](out, a, b, n)       # or v[grid, block, stream, sharedmem](...)

Pointer parameters take any ``__cuda_array_interface__`` object (numba device arrays, CuPy,
PyTorch), numba's ``cuda.In/Out/InOut`` hints, DLPack device arrays, host NumPy arrays (copied
to the device before the launch and back after it, as numba does), ``None`` (a null pointer) or an
int (a raw device address). Scalar parameters take Python or NumPy numbers, converted to the
declared C type with range checks. The kernel's parameters come from the CUDA source and the
PTX (:mod:`numptx.jit.params`); by-value structs are refused.

The variant's cubin is loaded once per device in numba's context (rebuilt for the device's
architecture when it differs from the template's) and launched with ``cuda.core.launch``, as
numba's own kernels are. A CAI ``stream`` is synchronized before the launch unless
``NUMBA_CUDA_ARRAY_INTERFACE_SYNC=0``; with a stream, host-array copies back are asynchronous
(synchronize the stream before reading them). C++ cannot run in numba's simulator.
"""
from __future__ import annotations

import ctypes
import logging
import math
import numbers
import operator
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..semantics import bf16_bits
from . import numba_site
from .arch import normalize_arch
from .errors import LaunchError
from .params import Param, signature
from .residency import keep_loaded, launch_config, loaded

__all__ = ["CudaLaunch", "Marshalled", "marshal"]

log = logging.getLogger(__name__)

_CTYPES = {"bool": ctypes.c_bool, "int8": ctypes.c_int8, "uint8": ctypes.c_uint8,
           "int16": ctypes.c_int16, "uint16": ctypes.c_uint16, "int32": ctypes.c_int32,
           "uint32": ctypes.c_uint32, "int64": ctypes.c_int64, "uint64": ctypes.c_uint64}
_UNSIGNED = {1: ctypes.c_uint8, 2: ctypes.c_uint16, 4: ctypes.c_uint32, 8: ctypes.c_uint64}
_FLOAT_SIZES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
_DLPACK_ON_GPU = (2, 3, 13)      # kDLCUDA, kDLCUDAHost, kDLCUDAManaged
_HOST_PROTOCOLS = ("__array_interface__", "__array__", "__dlpack__")


class Marshalled(NamedTuple):
    """What :func:`marshal` makes of the arguments."""
    values: list          # ctypes scalars in parameter order: what cuda.core's launch() takes
    streams: list[int]    # CAI "stream" handles to synchronize before the launch


# ---------------------------------------------------------------------------------------------
# arguments -> ctypes values
# ---------------------------------------------------------------------------------------------
def marshal(entry: str, params: Sequence[Param], args: Sequence[Any], *,
            to_device: Callable[[Any], int] | None = None) -> Marshalled:
    """Convert ``args`` for kernel ``entry`` with ``params``.

    ``to_device(value)`` puts a host array (or a numba ``In/Out/InOut`` hint, or a DLPack device
    array) on the device and returns its address; None refuses them. Raises
    :class:`LaunchError` naming the parameter at fault.

    >>> marshal("k", tmpl.params, (d_out, 3)).values       # doctest: +SKIP
    [c_ulong(140...), c_int(3)]
    """
    if len(args) != len(params):
        raise LaunchError(f"{signature(entry, params)} takes {len(params)} argument(s), "
                          f"got {len(args)}")
    values: list = []
    streams: list[int] = []
    for i, (p, a) in enumerate(zip(params, args)):
        where = f"{entry}: parameter {i} '{p.name}' ({p.ctype})"
        if p.dtype == "struct":
            raise LaunchError(f"{where} is a {p.size}-byte struct passed by value, which numptx "
                              f"cannot marshal; take a pointer to it in the kernel instead")
        if p.is_pointer or (p.is_pointer is None and not _is_integer(a)):
            values.append(ctypes.c_uint64(_pointer(where, p, a, to_device, streams)))
        else:
            values.append(_scalar(where, p, a))
    return Marshalled(values, streams)


def _is_integer(a: Any) -> bool:
    return isinstance(a, (numbers.Integral, np.integer)) and not isinstance(a, (bool, np.bool_))


def _check_dtype(where: str, p: Param, dt: np.dtype) -> None:
    """The array's elements must be what the kernel reads (void* and char* take anything)."""
    want = p.dtype
    if want is None or want == "bool" or want.endswith("int8"):
        return
    if want in _FLOAT_SIZES:        # NumPy has no bfloat16 kind: its size is checked alone
        ok = dt.itemsize == _FLOAT_SIZES[want] and (dt.kind == "f" or want == "bfloat16")
    else:
        ok = dt.itemsize == np.dtype(want).itemsize and dt.kind in "iu"
    if not ok:
        raise LaunchError(f"{where}: got an array of {dt}, but the kernel reads {want} "
                          f"(convert it, e.g. a.astype(np.{want}), or view its bytes)")


def _cai_pointer(where: str, p: Param, cai: dict, streams: list[int]) -> int:
    if cai.get("mask") is not None:
        raise LaunchError(f"{where}: masked arrays (a CAI 'mask') cannot be passed to a kernel")
    dt = np.dtype(cai["typestr"])
    _check_dtype(where, p, dt)
    shape, strides = tuple(cai["shape"]), cai.get("strides")
    if strides is not None and not _contiguous(shape, tuple(strides), dt.itemsize):
        raise LaunchError(f"{where}: the array is not contiguous (strides {tuple(strides)}); "
                          f"the kernel gets a bare pointer, so pass a contiguous copy")
    if cai.get("stream") is not None:
        streams.append(int(cai["stream"]))
    return int(cai["data"][0])


def _contiguous(shape: tuple, strides: tuple, itemsize: int) -> bool:
    if 0 in shape:
        return True
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]

    def packed(order):
        step = itemsize
        for n, s in order:
            if s != step:
                return False
            step *= n
        return True
    return packed(reversed(dims)) or packed(dims)          # C or Fortran order


def _pointer(where: str, p: Param, a: Any, to_device: Callable[[Any], int] | None,
             streams: list[int]) -> int:
    if a is None:
        return 0
    if isinstance(a, (bool, np.bool_)):
        raise LaunchError(f"{where}: takes an array or a device address, got {a!r}")
    if _is_integer(a):
        if not 0 <= int(a) < 1 << 64:
            raise LaunchError(f"{where}: device address {int(a)} is out of range")
        return int(a)
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None:
        return _cai_pointer(where, p, cai, streams)
    host = None
    if _is_arg_hint(a):
        value = a.value
        dt = getattr(value, "dtype", None)
        if dt is not None:
            _check_dtype(where, p, np.dtype(dt))
    elif hasattr(a, "__dlpack__") and not isinstance(a, np.ndarray) and \
            _dlpack_device(a) in _DLPACK_ON_GPU:
        dt = getattr(a, "dtype", None)
        if isinstance(dt, np.dtype):
            _check_dtype(where, p, dt)
    elif isinstance(a, np.ndarray) or any(hasattr(a, k) for k in _HOST_PROTOCOLS):
        host = _host_array(where, a)
        if host.dtype.hasobject:
            raise LaunchError(f"{where}: got an array of Python objects")
        _check_dtype(where, p, host.dtype)
        if not (host.flags.c_contiguous or host.flags.f_contiguous):
            raise LaunchError(f"{where}: the array is not contiguous; the kernel gets a bare "
                              f"pointer, so pass np.ascontiguousarray(a)")
    else:
        raise LaunchError(f"{where}: takes a device array (__cuda_array_interface__), a NumPy "
                          f"array, None or a device address, not {type(a).__name__}")
    if to_device is None:
        raise LaunchError(f"{where}: a {type(a).__name__} cannot be passed without a GPU (host "
                          f"arrays are copied to it)")
    return int(to_device(a if host is None else host))


def _host_array(where: str, a: Any) -> np.ndarray:
    """A NumPy view of host memory (a copy only where the object cannot share its memory, in
    which case the kernel's writes do not reach it)."""
    if isinstance(a, np.ndarray):
        return a
    try:
        if hasattr(a, "__array_interface__") or hasattr(a, "__array__"):
            return np.asarray(a)
        return np.from_dlpack(a)
    except Exception as e:   # noqa: BLE001 - reported with the parameter
        raise LaunchError(f"{where}: cannot read the {type(a).__name__} as an array: {e}") from e


def _is_arg_hint(a: Any) -> bool:
    if not type(a).__module__.startswith("numba"):
        return False
    from numba.cuda.args import ArgHint
    return isinstance(a, ArgHint)


def _dlpack_device(a: Any) -> int | None:
    try:
        return int(a.__dlpack_device__()[0])
    except Exception:   # noqa: BLE001 - no usable device: treated as host memory
        return None


def _scalar(where: str, p: Param, a: Any) -> ctypes._SimpleCData:
    if isinstance(a, np.ndarray) or hasattr(a, "__cuda_array_interface__"):
        raise LaunchError(f"{where}: takes a number, got an array")
    dt = p.dtype
    if dt in _FLOAT_SIZES:
        if not isinstance(a, (numbers.Real, np.number, np.bool_)) or \
                isinstance(a, np.complexfloating):
            raise LaunchError(f"{where}: takes a real number, got {type(a).__name__}")
        x = float(a)
        if dt == "float64":
            return ctypes.c_double(x)
        with np.errstate(over="ignore"):
            y = np.float16(x) if dt == "float16" else np.float32(x)
        bits = bf16_bits(x) if dt == "bfloat16" else None
        if math.isfinite(x) and (math.isinf(y) or bits is not None and bits & 0x7FFF == 0x7F80):
            raise LaunchError(f"{where}: {a!r} overflows {dt}")
        if dt == "float32":
            return ctypes.c_float(float(y))
        return ctypes.c_uint16(int(y.view(np.uint16)) if bits is None else bits)
    try:
        v = operator.index(bool(a) if isinstance(a, np.bool_) else a)   # ints, not floats
    except TypeError:
        raise LaunchError(f"{where}: takes an integer, got {type(a).__name__} {a!r}") from None
    if dt == "bool":
        if v not in (0, 1):
            raise LaunchError(f"{where}: takes a bool, got {a!r}")
        return ctypes.c_bool(bool(v))
    if dt is None:                  # PTX only: the signedness is unknown, either range is fine
        if p.size not in _UNSIGNED:
            raise LaunchError(f"{where}: numptx cannot pass a {p.size}-byte value")
        bits = 8 * p.size
        lo, hi = -(1 << (bits - 1)), (1 << bits) - 1
        if not lo <= v <= hi:
            raise LaunchError(f"{where}: {v} does not fit in {bits} bits")
        return _UNSIGNED[p.size](v & hi)
    info = np.iinfo(dt)
    if not info.min <= v <= info.max:
        raise LaunchError(f"{where}: {v} is out of range for {dt} [{info.min}, {info.max}]")
    return _CTYPES[dt](v)


# ---------------------------------------------------------------------------------------------
# the launch
# ---------------------------------------------------------------------------------------------
_NO_GPU = ("no CUDA GPU is available to launch this {kind} variant ({entry}): {code} runs only "
           "on a GPU, and numba-cuda's simulator (NUMBA_ENABLE_CUDASIM=1) runs Python kernels, "
           "not {code}. Variants still build here (v.ptx, v.cubin); to run stubs on the CPU, write "
           "the kernel in Python with @nx.kernel and nx.site, whose variants run in the "
           "simulator")
_IN_SIMULATOR = ("numba-cuda's simulator (NUMBA_ENABLE_CUDASIM=1) cannot run {code}: this "
                 "{kind} variant ({entry}) needs a GPU. Kernels written in Python with @nx.kernel "
                 "and nx.site run in the simulator, their stubs evaluated on the CPU")


def _dims(d: Any, what: str) -> tuple[int, int, int]:
    t = tuple(d) if isinstance(d, (tuple, list)) else (d,)
    if not 1 <= len(t) <= 3 or not all(
            isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, bool) and x >= 1
            for x in t):
        raise LaunchError(f"{what} is a positive int or a tuple of 1 to 3 of them, got {d!r}")
    return tuple(int(x) for x in t) + (1,) * (3 - len(t))


def _require_gpu(template) -> None:
    fill = {"kind": type(template).__name__, "entry": template.entry,
            "code": "CUDA C++" if hasattr(template, "src") else "PTX"}
    if numba_site.SIMULATOR:
        raise LaunchError(_IN_SIMULATOR.format(**fill))
    try:
        from numba import cuda
        available = cuda.is_available()
    except Exception:   # noqa: BLE001 - a broken driver reads as "no GPU"
        available = False
    if not available:
        raise LaunchError(_NO_GPU.format(**fill))


class CudaLaunch:
    """``variant[grid, block, stream, sharedmem]``: call it with the kernel's arguments."""

    def __init__(self, variant, config):
        self.variant = variant
        grid, block, self.stream, shared = launch_config(config)
        self.grid, self.block = _dims(grid, "grid"), _dims(block, "block")
        if not isinstance(shared, (numbers.Integral, np.integer)) or shared < 0:
            raise LaunchError(f"sharedmem is a number of bytes, got {shared!r}")
        self.sharedmem = int(shared)

    def __call__(self, *args: Any) -> None:
        t = self.variant.template
        _require_gpu(t)
        from cuda.core import LaunchConfig, launch
        from numba.cuda.args import wrap_arg
        from numba.cuda.core import config
        from numba.cuda.cudadrv import devices
        from numba.cuda.cudadrv.driver import _to_core_stream

        params = t.params                     # parsed before any device work
        ctx = devices.get_context()
        try:
            stream = _to_core_stream(self.stream)
        except TypeError as e:
            raise LaunchError(f"stream: {e}") from None
        cufunc = _function(self.variant, ctx)
        retr: list = []                       # numba's copy-back functors for host arrays

        def to_device(value) -> int:
            return int(wrap_arg(value).to_device(retr, stream).ptr)

        m = marshal(t.entry, params, args, to_device=to_device)
        if m.streams and config.CUDA_ARRAY_INTERFACE_SYNC:
            for handle in dict.fromkeys(m.streams):
                ctx.create_external_stream(handle).synchronize()
        # what numba's _Kernel.launch does (without cooperative launches)
        cfg = LaunchConfig(grid=self.grid, block=self.block, shmem_size=self.sharedmem)
        launch(stream, cfg, cufunc.kernel, *m.values)
        for wb in retr:
            wb()


# ---------------------------------------------------------------------------------------------
# loading, once per (cubin, device)
# ---------------------------------------------------------------------------------------------
def _for_device(variant, cc: tuple[int, int]):
    """The variant, or the same stubs assembled for the device's architecture (nvJitLink takes
    PTX to newer architectures; older ones need the template compiled for them)."""
    t = variant.template
    number, suffix = normalize_arch(t.arch)
    dev = cc[0] * 10 + cc[1]
    if dev == number:
        return variant
    if suffix or dev < number:
        raise LaunchError(f"the variant is built for {t.arch}, which cannot run on this "
                          f"sm_{dev} device: make the template with arch='sm_{dev}'")
    log.debug("assembling %s for sm_%d (the template targets %s)", t.entry, dev, t.arch)
    return variant.for_arch(f"sm_{dev}")


def _function(variant, ctx):
    """The loaded kernel (a numba CudaPythonFunction) of ``variant`` on ``ctx``'s device."""
    from cuda.core import ObjectCode
    v = _for_device(variant, ctx.device.compute_capability)
    key = (v.key, ctx.device.id)
    hit = loaded(key)
    if hit is not None:
        return hit[0]
    cubin = v.cubin                           # a bad stub raises its LinkError here
    # numba's create_module_image takes a cuda.core ObjectCode (it reads .handle)
    module = ctx.create_module_image(ObjectCode.from_cubin(cubin, name=f"{v.entry}.cubin"))
    cufunc = module.get_function(v.entry)
    return keep_loaded(key, (cufunc, ctx, module))[0]
