"""The bridge to native/dag_lower.h: a DSL DAG record -> Stack PTX words, in C::

    from numptx._program import lower_dag
    words, n_slots, n_instr = lower_dag(record_words, roots, n_nodes)
"""
from __future__ import annotations

import threading
from array import array
from collections.abc import Sequence

from .._native import ffi, lib
from .ctable import _status_name, _table
from .ops import ProgramError

__all__ = ["lower_dag", "ROOT_INPUT"]

ROOT_INPUT: int = lib.DAGLOWER_ROOT_INPUT     # a root that pushes input k as it is (1 << 63)


class _LowerScratch(threading.local):
    def __init__(self):
        self.ws, self.ws_size = None, 0
        self.out, self.out_cap = None, 0
        self.cells = ffi.new("size_t[1]"), ffi.new("uint32_t[3]")


_lscratch = _LowerScratch()


def lower_dag(rec: Sequence[int], roots: Sequence[int], n_nodes: int) -> tuple[bytes, int, int]:
    """Stack PTX words for a DAG record (native/dag_lower.h): (words, slots, instructions)."""
    s = _lscratch
    n_rec = len(rec)
    ws_need = lib.dag_lower_workspace_size(min(n_rec, 0x10000000))
    if s.ws_size < ws_need:
        s.ws, s.ws_size = ffi.new("char[]", ws_need), ws_need
    cap = 9 * n_nodes + 2 * len(roots) + 8
    if s.out_cap < cap:
        s.out, s.out_cap = ffi.new("uint64_t[]", cap), cap
    out_len, cells = s.cells
    # (an array converts a list of ints far faster than ffi.new does)
    crec = ffi.from_buffer("uint64_t[]", array("Q", rec)) if rec else ffi.NULL
    croots = ffi.from_buffer("uint64_t[]", array("Q", roots)) if roots else ffi.NULL
    st = lib.dag_lower(_table(), crec, n_rec, croots, len(roots), s.ws, s.ws_size, s.out,
                       s.out_cap, out_len, cells, cells + 1, cells + 2)
    if st != lib.STACKPTX_OK:
        raise ProgramError(f"DAG lowering failed: {_status_name(st)} (record word or root "
                           f"{cells[2]})")
    return ffi.buffer(s.out, out_len[0] * 8)[:], cells[0], cells[1]
