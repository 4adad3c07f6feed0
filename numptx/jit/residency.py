"""Which variant cubins are loaded on which device, and the launch configuration both launchers
take.

Both launch paths (numba kernels in :mod:`.launch`, CUDA C++ and PTX templates in
:mod:`.cuda_launch`) load a variant's cubin once per device and keep the loaded module here,
least recently launched first; modules beyond :data:`MAX_LOADED` are unloaded. Keys are the
launchers' own (a variant key and a device id); entries are ``(launchable, context, module)``::

    hit = loaded((variant.key, device_id))               # None: not loaded on that device yet
    hit = keep_loaded((variant.key, device_id), (fn, ctx, module))
    grid, block, stream, sharedmem = launch_config((128, 256))
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from .errors import LaunchError

__all__ = ["MAX_LOADED", "loaded", "keep_loaded", "launch_config"]

#: loaded modules kept across all devices; the least recently launched beyond it are unloaded
MAX_LOADED = 256

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
