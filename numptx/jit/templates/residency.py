"""Which variant cubins are loaded on which device, and the launch configuration both launchers
take.

Both launch paths (numba kernels in :mod:`.launch`, CUDA C++ and PTX templates in
:mod:`.cuda_launch`) load a variant's cubin once per device and keep the loaded module here,
least recently launched first; modules beyond :data:`MAX_LOADED` are unloaded. Keys are the
launchers' own (a variant key and a device id); entries are ``(launchable, context, module)``::

    hit = loaded((variant.key, device_id))               # None: not loaded on that device yet
    hit = keep_loaded((variant.key, device_id), (fn, ctx, module))
    grid, block, stream, sharedmem = launch_config((128, 256))

Launch plans (what a launch resolved, reused by the next launches of the same variant: see
:mod:`.cuda_launch` and :mod:`.launch`) are checked against :func:`context_handle` and against
the entry kept here (:func:`loaded` returns another one, or None, once the module was unloaded
and loaded again); :data:`LAUNCH_PLANS` turns them off.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from ..errors import LaunchError

__all__ = ["LAUNCH_PLANS", "MAX_LOADED", "context_handle", "keep_loaded", "launch_config",
           "loaded", "plain_config"]

#: loaded modules kept across all devices; the least recently launched beyond it are unloaded
MAX_LOADED = 256

#: reuse launch plans (False: every launch takes the full path, as before plans; for debugging
#: and for benchmarks that time both)
LAUNCH_PLANS = True

_lock = threading.Lock()
#: key -> (launchable, context, module); least recently launched first
_loaded: OrderedDict = OrderedDict()


def loaded(key: Any) -> tuple | None:
    """The entry kept under ``key`` (now the most recently launched), or None."""
    with _lock:
        hit = _loaded.get(key)
        if hit is not None:
            _loaded.move_to_end(key)
    return hit


def keep_loaded(key: Any, entry: tuple) -> tuple:
    """Record ``entry`` = (launchable, context, module) under ``key`` and unload the least
    recently launched modules beyond MAX_LOADED. When another thread recorded the key first,
    its entry is kept (and returned) and ``entry``'s module is unloaded."""
    evicted = []
    with _lock:
        other = _loaded.get(key)
        if other is not None:
            evicted.append(entry)
            entry = other
        else:
            _loaded[key] = entry
            while len(_loaded) > MAX_LOADED:
                evicted.append(_loaded.popitem(last=False)[1])
    for _, old_ctx, old_module in evicted:
        try:
            old_ctx.synchronize()              # its kernels may still run on some stream
            old_ctx.unload_module(old_module)
        except Exception:   # noqa: BLE001 - the context may be gone already
            pass
    return entry


def launch_config(config: Any) -> tuple:
    """``variant[config]``'s configuration as (grid, block, stream, sharedmem): ``[grid,
    block]`` or ``[grid, block, stream, sharedmem]`` (stream and sharedmem default to 0)."""
    if not isinstance(config, tuple):
        config = (config,)
    if not 2 <= len(config) <= 4:
        raise LaunchError(f"launch configuration is [grid, block] or [grid, block, stream, "
                          f"sharedmem], got {len(config)} item(s)")
    grid, block, stream, shared = (tuple(config) + (0, 0))[:4]
    return grid, block, stream, shared


def plain_config(key: Any) -> bool:
    """True when ``key`` (a launch configuration or part of one) holds only exact ints and
    tuples of them: only then may it key a cache of parsed configurations, since ``1 == 1.0 ==
    True`` while the parsers accept only the first."""
    t = type(key)
    if t is int:
        return True
    if t is not tuple:
        return False
    for x in key:
        tx = type(x)
        if tx is not int:
            if tx is not tuple:
                return False
            for y in x:
                if type(y) is not int:
                    return False
    return True


_ctx_get_current = None


def context_handle() -> int:
    """The calling thread's current CUDA context as an int (0: none, or no driver): what launch
    plans are checked against. One driver call; numba's ``get_context()`` takes a lock and two
    (what it returns is decided by this handle, so equal handles mean the same context)."""
    global _ctx_get_current
    f = _ctx_get_current
    if f is None:
        try:
            from cuda.bindings import driver
        except Exception:   # noqa: BLE001 - no bindings: no context, so no plan applies
            return 0
        f = _ctx_get_current = driver.cuCtxGetCurrent
    try:
        err, handle = f()
        return 0 if err else int(handle)
    except Exception:   # noqa: BLE001 - no driver library: no context
        return 0
