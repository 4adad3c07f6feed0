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
PTX (:mod:`numptx.jit.templates.params`); by-value structs are refused.

The variant's cubin is loaded once per device in numba's context (rebuilt for the device's
architecture when it differs from the template's) and launched with ``cuda.core.launch``, as
numba's own kernels are. A CAI ``stream`` is synchronized before the launch unless
``NUMBA_CUDA_ARRAY_INTERFACE_SYNC=0``; with a stream, host-array copies back are asynchronous
(synchronize the stream before reading them). C++ cannot run in numba's simulator.

The first launch of a variant leaves a launch plan (:class:`CudaLaunch`): later launches with
the same argument types in the same context skip the GPU check, the module lookup and most of
:func:`marshal` (:class:`ArgPlan` converts them); anything else takes the full path, whose
results and errors are the ones given (``residency.LAUNCH_PLANS = False`` turns plans off).
"""
from __future__ import annotations

import ctypes
import logging
import math
import numbers
import operator
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ...semantics import bf16_bits
from ..numba import numba_site
from . import residency
from ..compile.arch import normalize_arch
from ..errors import LaunchError
from .params import Param, signature
from .residency import context_handle, keep_loaded, launch_config, loaded, plain_config

__all__ = ["ArgPlan", "CudaLaunch", "Marshalled", "marshal"]

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
    from ..numba.numba_compat import arg_hint_type
    return isinstance(a, arg_hint_type())


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
# launch plans: marshal's work, specialized to the argument types it saw
# ---------------------------------------------------------------------------------------------
class _Miss(Exception):
    """A fast converter's doubt: the caller runs :func:`marshal`, whose result or error counts."""


_2_64 = 1 << 64
#: 2**128 - 2**103, the smallest double that float32 rounds to infinity (round to even)
_F32_LIMIT = 3.4028235677973366e38
_NP_SCALARS = frozenset(t for t in set(np.sctypeDict.values())     # not timedelta64 (units)
                        if issubclass(t, (np.number, np.bool_))
                        and not issubclass(t, np.timedelta64))
_SCALAR_TYPES = frozenset({int, bool, float}) | _NP_SCALARS
_PLAIN_INDEX = operator.index
_MAX_TYPE_SETS = 64            # argument-type tuples remembered per plan (cleared beyond)
_UNSEEN = object()


def _is_integer_type(t: type) -> bool:
    return issubclass(t, (numbers.Integral, np.integer)) and not issubclass(t, (bool, np.bool_))


def _none_pointer(a, streams):
    return ctypes.c_uint64(0)


def _int_pointer(a, streams):
    v = int(a)
    if 0 <= v < _2_64:
        return ctypes.c_uint64(v)
    raise _Miss


def _cai_converter(p: Param):
    """Pointers from ``__cuda_array_interface__`` objects: marshal's checks, with the dtype
    verdict kept per typestr (a miss, e.g. an object without CAI, leaves it to marshal)."""
    ok: dict = {}                       # typestr -> itemsize, accepted for this parameter

    def cai_pointer(a, streams):
        cai = a.__cuda_array_interface__
        if cai.get("mask") is not None:
            raise _Miss
        ts = cai["typestr"]
        size = ok.get(ts)
        if size is None:
            dt = np.dtype(ts)
            _check_dtype("", p, dt)         # raises: marshal words the error
            size = ok[ts] = dt.itemsize
        shape, strides = tuple(cai["shape"]), cai.get("strides")     # as marshal reads them
        if strides is not None and not _contiguous(shape, tuple(strides), size):
            raise _Miss
        s = cai.get("stream")
        if s is not None:
            streams.append(int(s))
        return ctypes.c_uint64(int(cai["data"][0]))
    return cai_pointer


def _float_converter(where: str, p: Param, t: type):
    if issubclass(t, np.complexfloating):
        return None
    dt = p.dtype
    if dt == "float64":
        return lambda a, streams: ctypes.c_double(float(a))
    if dt == "float32":
        def f32(a, streams):
            x = float(a)
            # finite doubles past the limit overflow to inf, which marshal refuses
            if -_F32_LIMIT < x < _F32_LIMIT or not math.isfinite(x):
                return ctypes.c_float(x)     # the same rounding as np.float32(x)
            raise _Miss
        return f32
    return lambda a, streams: _scalar(where, p, a)      # float16 / bfloat16: marshal's own


def _int_converter(p: Param, t: type):
    if issubclass(t, (float, np.floating, np.complexfloating)):
        return None
    index = (lambda a: operator.index(bool(a))) if t is np.bool_ else _PLAIN_INDEX
    dt = p.dtype
    if dt == "bool":
        def to_bool(a, streams):
            v = index(a)
            if v == 0 or v == 1:
                return ctypes.c_bool(bool(v))
            raise _Miss
        return to_bool
    if dt is None:                      # PTX only: either sign fits, kept as unsigned bits
        if p.size not in _UNSIGNED:
            return None
        bits, unsigned = 8 * p.size, _UNSIGNED[p.size]
        lo, mask = -(1 << (bits - 1)), (1 << bits) - 1

        def to_bits(a, streams):
            v = index(a)
            if lo <= v <= mask:
                return unsigned(v & mask)
            raise _Miss
        return to_bits
    info = np.iinfo(dt)
    lo, hi, ctype = int(info.min), int(info.max), _CTYPES[dt]

    def to_int(a, streams):
        v = index(a)
        if lo <= v <= hi:
            return ctype(v)
        raise _Miss
    return to_int


def _converter(where: str, p: Param, t: type):
    """fn(arg, streams) -> ctypes value for arguments of exact type ``t`` at parameter ``p``,
    equal to marshal's or raising (then marshal decides); None: always leave it to marshal."""
    if p.dtype == "struct":
        return None
    if p.is_pointer or (p.is_pointer is None and not _is_integer_type(t)):
        if t is type(None):
            return _none_pointer
        if issubclass(t, (bool, np.bool_, np.ndarray)):
            return None                 # an error, or a host array to copy: marshal's job
        return _int_pointer if _is_integer_type(t) else _cai_converter(p)
    if t not in _SCALAR_TYPES:
        return None
    if p.dtype in _FLOAT_SIZES:
        return _float_converter(where, p, t)
    return _int_converter(p, t)


class ArgPlan:
    """:func:`marshal` for one kernel, specialized per tuple of argument types.

    ``prepare(args)`` returns ``(values, streams)`` equal to marshal's result without
    ``to_device`` (same ctypes types and bytes, same CAI streams), or None whenever any check
    is in doubt: a type it has no converter for (host arrays, DLPack, numba hints, structs,
    floats for integers...), a value out of range, an array whose dtype, strides or mask
    marshal would refuse, a wrong count. The caller then runs marshal, so every error is
    marshal's own. Converters are made per (parameter, exact type) the first time a tuple of
    argument types is seen; the last tuple is checked first (one tuple comparison).

    >>> plan = ArgPlan("k", tmpl.params)                       # doctest: +SKIP
    >>> plan.convert((d_out, d_a, d_b, 1000)).values           # doctest: +SKIP
    [c_ulong(140...), c_ulong(...), c_ulong(...), c_int(1000)]
    """

    def __init__(self, entry: str, params: Sequence[Param]):
        self.entry, self.params = entry, tuple(params)
        self._where = tuple(f"{entry}: parameter {i} '{p.name}' ({p.ctype})"
                            for i, p in enumerate(self.params))
        self._last: tuple = (None, None)        # (types, converters): one object, swapped whole
        self._by_types: dict = {}

    def converters(self, types: tuple) -> tuple | None:
        """The converters for arguments of exactly these types (None: marshal's job)."""
        last = self._last
        if last[0] == types:
            return last[1]
        convs = self._by_types.get(types, _UNSEEN)
        if convs is _UNSEEN:
            if len(types) != len(self.params):
                return None
            convs = tuple(_converter(w, p, t) for w, p, t in zip(self._where, self.params, types))
            if None in convs:
                convs = None
            if len(self._by_types) >= _MAX_TYPE_SETS:
                self._by_types.clear()
            self._by_types[types] = convs
        self._last = (types, convs)
        return convs

    def prepare(self, args: Sequence[Any]) -> tuple[list, list[int]] | None:
        """``(values, streams)`` as marshal makes them, or None (run marshal)."""
        convs = self.converters(tuple(map(type, args)))
        if convs is None:
            return None
        streams: list[int] = []
        try:
            values = [c(a, streams) for c, a in zip(convs, args)]
        except Exception:   # noqa: BLE001 - any doubt: marshal decides, and words the error
            return None
        return values, streams

    def convert(self, args: Sequence[Any]) -> Marshalled | None:
        """:meth:`prepare` as a :class:`Marshalled` (what marshal returns), or None."""
        got = self.prepare(args)
        return None if got is None else Marshalled(*got)


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
            "code": template.language}
    if numba_site.SIMULATOR:
        raise LaunchError(_IN_SIMULATOR.format(**fill))
    try:
        from numba import cuda
        available = cuda.is_available()
    except Exception:   # noqa: BLE001 - a broken driver reads as "no GPU"
        available = False
    if not available:
        raise LaunchError(_NO_GPU.format(**fill))


class _Plan:
    """What the full path resolved for one variant, reused by its next launches while the
    thread's context is ``hctx`` and the module :mod:`.residency` keeps under ``key`` is still
    ``entry`` (once unloaded, a reload is another entry)."""
    __slots__ = ("hctx", "ctx", "key", "entry", "kernel", "stream0", "args", "launch",
                 "to_stream", "make_config", "numba_config")

    def __init__(self, **kw: Any):
        for k, v in kw.items():
            setattr(self, k, v)


#: variant -> its launch plan (variants are weakly held: a plan goes with its variant)
_plans: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: plain (grid, block[, sharedmem]) -> [grid3, block3, sharedmem, None or (maker, config)]
_shapes: dict = {}
_MAX_SHAPES = 1024


class CudaLaunch:
    """``variant[grid, block, stream, sharedmem]``: call it with the kernel's arguments.

    The first launch of a variant takes the full path (GPU check, context, module load,
    :func:`marshal`) and leaves a plan: the loaded kernel, the context it is for and an
    :class:`ArgPlan`. Later launches check the context (one driver call) and that the module is
    still loaded, convert the arguments with the plan and launch; anything the plan does not
    cover (other context, unloaded module, a host array, a value marshal would refuse...) takes
    the full path, so results and errors are the full path's. Parsed configurations are kept
    per plain ``(grid, block, sharedmem)``, so ``variant[grid, block]`` is cheap to make.
    """

    def __init__(self, variant, config):
        self.variant = variant
        n = len(config) if type(config) is tuple else 0
        key = config[:2] + config[3:] if 2 <= n <= 4 else None      # the stream is taken as is
        shape = _shapes.get(key) if key is not None and plain_config(key) else None
        if shape is None:
            grid, block, stream, shared = launch_config(config)
            grid, block = _dims(grid, "grid"), _dims(block, "block")
            if not isinstance(shared, (numbers.Integral, np.integer)) or shared < 0:
                raise LaunchError(f"sharedmem is a number of bytes, got {shared!r}")
            shape = [grid, block, int(shared), None]
            if key is not None and plain_config(key):
                if len(_shapes) >= _MAX_SHAPES:
                    _shapes.clear()
                _shapes[key] = shape
        else:
            stream = config[2] if n >= 3 else 0
        self.grid, self.block, self.stream, self.sharedmem = shape[0], shape[1], stream, shape[2]
        self._shape = shape

    def __call__(self, *args: Any) -> None:
        plan = _plans.get(self.variant)
        if plan is not None and residency.LAUNCH_PLANS and not numba_site.SIMULATOR \
                and self._planned(plan, args):
            return
        self._full(args)

    def _config(self, make):
        """The cuda.core LaunchConfig (``make``'s), made once per plain shape."""
        shape = self._shape
        made = shape[3]
        if made is None or made[0] is not make:
            made = shape[3] = (make, make(grid=shape[0], block=shape[1], shmem_size=shape[2]))
        return made[1]

    def _planned(self, plan: _Plan, args: tuple) -> bool:
        """Launch as ``plan`` says; False, having done nothing, where it does not apply."""
        try:
            if context_handle() != plan.hctx or loaded(plan.key) is not plan.entry:
                return False
            s = self.stream
            stream = plan.stream0 if not s else plan.to_stream(s)
            got = plan.args.prepare(args)
        except Exception:   # noqa: BLE001 - the full path decides, and words any error
            return False
        if got is None:
            return False
        values, streams = got
        if streams and plan.numba_config.CUDA_ARRAY_INTERFACE_SYNC:
            for handle in dict.fromkeys(streams):
                plan.ctx.create_external_stream(handle).synchronize()
        plan.launch(stream, self._config(plan.make_config), plan.kernel, *values)
        return True

    def _full(self, args: tuple) -> None:
        """The full path: every check, the module loaded where needed, :func:`marshal`."""
        t = self.variant.template
        _require_gpu(t)
        from cuda.core import LaunchConfig, launch
        from ..numba.numba_compat import core_stream_converter, current_context, numba_config, wrap_arg
        config, _to_core_stream = numba_config(), core_stream_converter()

        params = t.params                     # parsed before any device work
        ctx = current_context()
        try:
            stream = _to_core_stream(self.stream)
        except TypeError as e:
            raise LaunchError(f"stream: {e}") from None
        key, entry = _load(self.variant, ctx)
        retr: list = []                       # numba's copy-back functors for host arrays

        def to_device(value) -> int:
            if self.stream and isinstance(value, np.ndarray):
                return _host_on_stream(value, stream, retr)
            return int(wrap_arg(value).to_device(retr, stream).ptr)

        m = marshal(t.entry, params, args, to_device=to_device)
        if m.streams and config.CUDA_ARRAY_INTERFACE_SYNC:
            for handle in dict.fromkeys(m.streams):
                ctx.create_external_stream(handle).synchronize()
        # what numba's _Kernel.launch does (without cooperative launches)
        launch(stream, self._config(LaunchConfig), entry[0].kernel, *m.values)
        for wb in retr:
            wb()
        if not residency.LAUNCH_PLANS:
            return
        old = _plans.get(self.variant)
        hctx = context_handle()
        if hctx and (old is None or old.hctx != hctx or old.entry is not entry):
            _plans[self.variant] = _Plan(
                hctx=hctx, ctx=ctx, key=key, entry=entry, kernel=entry[0].kernel,
                stream0=_to_core_stream(0), launch=launch, to_stream=_to_core_stream,
                make_config=LaunchConfig, numba_config=config,
                args=old.args if old is not None else ArgPlan(t.entry, params))


def _host_on_stream(host: np.ndarray, stream, retr: list) -> int:
    """Device address of a copy of ``host`` made on ``stream`` (a cuda.core stream), with its
    copy back (on the same stream) appended to ``retr``. numba-cuda's own path for host
    arguments asks NumPy for a view on the stream, which NumPy refuses for any stream but None
    ("NumPy only supports stream=None"); ``cuda.to_device`` copies from the host pointer."""
    from numba import cuda
    d = cuda.to_device(host, stream=stream)
    if host.flags.writeable:                 # what the kernel wrote, back in the caller's array
        retr.append(lambda: d.copy_to_host(host, stream=stream))
    else:
        retr.append(lambda: d)               # alive until the launch is enqueued
    # not d.__cuda_array_interface__: its "stream" entry calls int() on the cuda.core stream
    return int(d.device_ctypes_pointer.value or 0)


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


def loaded_entry(variant) -> tuple[tuple, tuple]:
    """``(key, (function, context, module))`` of ``variant`` loaded on the current device
    (built and loaded first if need be)."""
    from ..numba.numba_compat import current_context
    _require_gpu(variant.template)
    return _load(variant, current_context())


def _load(variant, ctx) -> tuple[tuple, tuple]:
    """``(key, entry)``: the residency key and entry (a numba CudaPythonFunction, the context,
    the module) of ``variant`` loaded on ``ctx``'s device."""
    from cuda.core import ObjectCode
    v = _for_device(variant, ctx.device.compute_capability)
    key = (v.key, ctx.device.id)
    hit = loaded(key)
    if hit is not None:
        return key, hit
    cubin = v.cubin                           # a bad stub raises its LinkError here
    # numba's create_module_image takes a cuda.core ObjectCode (it reads .handle)
    module = ctx.create_module_image(ObjectCode.from_cubin(cubin, name=f"{v.entry}.cubin"))
    cufunc = module.get_function(v.entry)
    return key, keep_loaded(key, (cufunc, ctx, module))
