"""Copying a pack's run-time constant table into its loaded module (GPU only).

:class:`~numptx.jit.populations.pack.Pack` launches with ``constants="runtime"`` call :func:`write_table`
first: it finds the module the launch will run (loading it if need be, exactly as the launch
would), and when that module holds an older table than the pack's, waits for the device's work
in flight (a running kernel may still read the table) and copies the table in. An unchanged
table costs a dictionary lookup.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..errors import LaunchError

__all__ = ["write_table"]


#: residency key -> (the loaded entry, the pack token, its table version) the module holds.
#: Packs that differ only in run-time constants share one module (one key): the table in it is
#: whichever pack copied last, so the record is per module, not per pack. The entry is kept to
#: tell a reloaded module (a new entry) from the one that got the copy.
_HELD: dict = {}
_held_lock = threading.Lock()


def write_table(variant: Any, args: tuple, token: int, version: int,
                table: Callable[[], bytes], name: str) -> None:
    """Make the module that launching ``variant`` with ``args`` runs hold ``table()`` (version
    ``version`` of the pack ``token``) in its global ``name``."""
    key, entry = variant.loaded_entry(args)   # Variant or KernelVariant
    _, ctx, module = entry
    with _held_lock:
        held = _HELD.get(key)
    if held is not None and held[0] is entry and held[1:] == (token, version):
        return
    from ..numba.numba_compat import host_to_device
    data = table()
    try:
        ptr, size = module.get_global_symbol(name)
    except Exception as e:   # noqa: BLE001 - the driver's error, with what was looked for
        raise LaunchError(f"the pack's constant table {name!r} is not in its loaded module "
                          f"({e})") from None
    if size < len(data):
        raise LaunchError(f"the pack's constant table {name!r} holds {size} bytes, the table "
                          f"has {len(data)}")
    ctx.synchronize()                       # a kernel in flight may still read the old table
    host_to_device(ptr, data, len(data))
    with _held_lock:
        _HELD[key] = (entry, token, version)
