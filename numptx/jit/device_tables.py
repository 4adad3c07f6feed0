"""Copying a pack's run-time constant table into its loaded module (GPU only).

:class:`~numptx.jit.pack.Pack` launches with ``constants="runtime"`` call :func:`write_table`
first: it finds the module the launch will run (loading it if need be, exactly as the launch
would), and when that module holds an older table than the pack's, waits for the device's work
in flight (a running kernel may still read the table) and copies the table in. An unchanged
table costs a dictionary lookup.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import LaunchError

__all__ = ["write_table"]


def write_table(variant: Any, args: tuple, uploaded: dict, version: int,
                table: Callable[[], bytes], name: str) -> None:
    """Make the module that launching ``variant`` with ``args`` runs hold ``table()`` in its
    global ``name``; ``uploaded`` maps residency keys to the (version, module) copied there."""
    key, entry = variant.loaded_entry(args)   # Variant or KernelVariant
    _, ctx, module = entry
    if uploaded.get(key) == (version, id(module)):
        return
    from numba.cuda.cudadrv import driver
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
    driver.host_to_device(ptr, data, len(data))
    uploaded[key] = (version, id(module))
