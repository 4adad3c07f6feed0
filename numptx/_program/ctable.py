"""The instruction table as the C core sees it (rebuilt when the Python table changes), and
the core's status texts: shared by the compile paths and the DAG lowering."""
from __future__ import annotations

import threading

from .. import valuetypes as VT
from .._native import ffi, lib
from ..instructions import TABLE, TYPE_ID
from .ops import ProgramError

__all__ = ["_table", "_status_name"]


class _CTable:
    """The instruction table as C rows and the user stack types (rebuilt when ``TABLE.version``
    or the number of stack types changes).

    ``table`` owns its rows: it keeps the rows and format strings alive for as long as anyone
    holds it, so a compile running with the GIL released keeps reading the table it
    started with while ``add_instruction`` swaps in a new one."""

    def __init__(self):
        self.version = _version()
        n = len(TABLE)
        rows = ffi.new("stackptx_instr[]", max(n, 1))
        keep = []
        for i in range(n):
            ins, row = TABLE[i], rows[i]
            fmt = ffi.new("char[]", ins.fmt.encode())
            keep.append(fmt)
            row.fmt, row.fmt_len = fmt, len(fmt) - 1         # bytes, not characters
            row.n_results, row.n_operands = len(ins.results), len(ins.operands)
            for k, (t, w) in enumerate(zip(ins.result_type_ids, ins.result_widths)):
                row.result_type[k], row.result_width[k] = t, w
            for k, (t, w) in enumerate(zip(ins.operand_type_ids, ins.operand_widths)):
                row.operand_type[k], row.operand_width[k] = t, w
            row.flags = (1 if "volatile" in ins.flags else 0) | (2 if "commutative" in ins.flags else 0)
        table = ffi.new("stackptx_table *")
        table.rows, table.n_rows = rows, n
        table.reg_type_names = ffi.NULL
        users = list(VT.USER)
        bases = ffi.new("uint8_t[]", [TYPE_ID[u.base] for u in users] or [0])
        regs = [ffi.new("char[]", u.reg.encode()) for u in users]
        reg_ptrs = ffi.new("char *[]", regs or [ffi.NULL])
        table.n_user_types = len(users)
        table.user_type_base, table.user_reg_names = bases, reg_ptrs
        keep += [bases, reg_ptrs, *regs]
        bad = ffi.new("uint32_t *")
        if lib.stackptx_check_table(table, bad) != lib.STACKPTX_OK:
            raise ProgramError(f"instruction table row {bad[0]} is not usable by the C core")
        self._keep = (rows, keep)
        # a cdata pointing at ``table`` whose (no-op) destructor holds the rows: every holder
        # of the pointer holds them (cffi keeps the destructor until the cdata is freed)
        self.table = ffi.gc(table, lambda _p, _keep=(table, rows, keep): None)


_ctable_lock = threading.Lock()
_ctable: _CTable | None = None


def _version() -> tuple[int, int]:
    return TABLE.version, len(VT.USER)


def _table():
    global _ctable
    t = _ctable
    if t is None or t.version != _version():
        with _ctable_lock:
            if _ctable is None or _ctable.version != _version():
                _ctable = _CTable()
            t = _ctable
    return t.table


def _status_name(code: int) -> str:
    return ffi.string(lib.stackptx_status_string(code)).decode()
