"""The arguments :func:`numptx.autotune` launches candidates with: stream-less device views
of the caller's arrays, and snapshots that put them back as they were.

::

    dargs = device_args(args)       # host arrays copied to the device; CAI streams synced once
    snapshot = Snapshot(dargs)      # a copy of every writable array
    ...                              # candidates run on dargs (in place, for some)
    snapshot.restore()               # the caller's arrays as they were
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .autotune_types import AutotuneError

__all__: list[str] = []


def device_args(args: tuple) -> tuple:
    """``args`` as the candidates are launched with: host NumPy arrays copied to the device once
    (a launch would copy them in and out inside each timed interval), device arrays as numba
    views of the same memory without their ``__cuda_array_interface__`` stream.

    A launch synchronizes each argument's CAI stream on the host first (numba's
    ``CUDA_ARRAY_INTERFACE_SYNC``), which would let the spin kernel run out before the start
    event and time the launch's host cost again. So each stream is synchronized here, once, and
    the candidates get stream-less views; turning the setting off for the duration instead
    would change a global that other threads' launches read."""
    from numba import cuda
    out = []
    for a in args:
        cai = getattr(a, "__cuda_array_interface__", None)
        if isinstance(a, np.ndarray):
            a = cuda.to_device(a)
        elif isinstance(cai, Mapping) and cai.get("mask") is None:
            if cai.get("stream") is not None:
                cuda.external_stream(int(cai["stream"])).synchronize()
            a = cuda.from_cuda_array_interface({k: v for k, v in cai.items() if k != "stream"},
                                               owner=a, sync=False)
        out.append(a)
    return tuple(out)


def is_array(a: Any) -> bool:
    """Whether ``a`` is an array argument: NumPy, a CUDA array, or under numba-cuda's simulator
    its device array (which has no ``__cuda_array_interface__``)."""
    return isinstance(a, np.ndarray) or hasattr(a, "__cuda_array_interface__") \
        or _simulator_array(a)


def _simulator_array(a: Any) -> bool:
    from ..numba.numba_site import SIMULATOR
    if not SIMULATOR:
        return False
    from ..numba.numba_compat import simulator_array_type
    return isinstance(a, simulator_array_type())


def host_array(a: Any) -> np.ndarray:
    """A host copy of array ``a`` (device or NumPy)."""
    return a.copy() if isinstance(a, np.ndarray) else np.asarray(a.copy_to_host())


def _raw(a: Any) -> Any:
    """A contiguous byte view of the device memory array ``a`` spans (strided or not), or
    None for an empty array."""
    from numba import cuda
    cai = a.__cuda_array_interface__
    shape, size = tuple(cai["shape"]), np.dtype(cai["typestr"]).itemsize
    if 0 in shape:
        return None
    strides = cai.get("strides") or tuple(int(np.prod(shape[k + 1:])) * size
                                          for k in range(len(shape)))
    lo = sum(s * (n - 1) for s, n in zip(strides, shape) if s < 0)
    hi = sum(s * (n - 1) for s, n in zip(strides, shape) if s > 0) + size
    desc = {"shape": (hi - lo,), "typestr": "|u1", "data": (cai["data"][0] + lo, False),
            "strides": None, "version": 3}
    return cuda.from_cuda_array_interface(desc, owner=a, sync=False)


class Snapshot:
    """Copies of every writable array argument (NumPy: a copy; device: a device-to-device copy
    of the bytes it spans), taken before any candidate runs; :meth:`restore` writes them back.
    Candidates run on the caller's arrays, so without it an in-place kernel (``out += a``)
    would hand the caller what every timed launch added, and one checked candidate's writes to
    an input would become the next one's input."""

    def __init__(self, dargs: tuple):
        from numba import cuda
        self._saved: list[tuple[Any, Any]] = []
        for a in dargs:
            if isinstance(a, np.ndarray):
                if a.flags.writeable:
                    self._saved.append((a, a.copy()))
            elif is_array(a) and not a.__cuda_array_interface__["data"][1]:   # not read-only
                raw = _raw(a)
                if raw is not None:
                    copy = cuda.device_array(raw.shape, np.uint8)
                    copy.copy_to_device(raw)
                    self._saved.append((raw, copy))
        cuda.synchronize()

    def restore(self) -> None:
        from numba import cuda
        for a, copy in self._saved:
            if isinstance(a, np.ndarray):
                a[...] = copy
            else:
                a.copy_to_device(copy)
        cuda.synchronize()            # the caller's other streams see the restored contents


# the reference a checked candidate is compared with
def references(check: Any, dargs: tuple, outs: tuple[int, ...]) -> list[np.ndarray]:
    """The expected contents of each output argument, checked against their shapes."""
    if callable(check):
        host = tuple(host_array(a) if is_array(a) else a for a in dargs)
        try:
            ref = check(*host)
        except Exception as e:   # noqa: BLE001 - the user's reference failed: say where
            raise AutotuneError(f"autotune(check=): the reference function raised "
                                f"{type(e).__name__}: {e}") from e
    else:
        ref = check
    refs = list(ref) if len(outs) > 1 and isinstance(ref, (tuple, list)) else [ref]
    if len(refs) != len(outs):
        raise AutotuneError(f"autotune(check=): {len(outs)} output(s) {outs}, "
                            f"{len(refs)} reference(s)")
    out = []
    for j, r in zip(outs, refs):
        shape = tuple(dargs[j].shape)
        try:
            r = np.asarray(r)
            out.append(np.broadcast_to(r, shape))
        except (ValueError, TypeError) as e:
            raise AutotuneError(f"autotune(check=): the reference for argument {j} (shape "
                                f"{np.shape(r)}) does not fit the argument's shape "
                                f"{shape}: {e}") from None
    return out


def compare(i: int, j: int, got: np.ndarray, want: np.ndarray, rtol: float,
             atol: float) -> str | None:
    """Why candidate ``i``'s argument ``j`` is not the reference, or None."""
    try:
        ok = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    except TypeError:
        ok = got == want
    if np.all(ok):
        return None
    bad = np.flatnonzero(~np.asarray(ok))
    k = int(bad[0])
    return (f"candidate {i}: argument {j}: {bad.size} of {got.size} element(s) differ from the "
            f"reference beyond rtol={rtol:g}, atol={atol:g} (first at flat index {k}: got "
            f"{got.reshape(-1)[k]!r}, expected {want.reshape(-1)[k]!r})")
