"""The op kinds and meta operations of a program word, shared by Python and the C core.

A Stack PTX / AST PTX word keeps its kind in bits 0..7 and, for a META word, the meta
operation in bits 16..31 (docs/design/programs.md, section 3). The C enums ``STACKPTX_K_*``
and ``STACKPTX_M_*`` in ``native/stack_ptx_tables.h`` are generated from these tuples
(``python native/gen_tables.py``)::

    from numptx.opkinds import KIND_NAMES, META_OPS, CONST
    KIND_NAMES[CONST]               # 'const'
    META_OPS.index("swap")          # 2: the META word's operation field

This module imports nothing: the generator loads it without the rest of the package.
"""
from __future__ import annotations

__all__ = ["KIND_NAMES", "META_OPS", "NOP", "INPUT", "CONST", "CONST64", "INSTR", "META_CONST",
           "META", "ROUTINE", "STORE", "LOAD", "RETURN"]

# ORDER KINDS: a word's kind is the position of its name here. Append only.
KIND_NAMES: tuple[str, ...] = ("nop", "input", "const", "const64", "instr", "meta_const", "meta",
                               "routine", "store", "load", "return")
# ORDER META: a META word's operation is the position of its name here. Append only.
META_OPS: tuple[str, ...] = ("dup", "yank_dup", "swap", "swap_with", "replace", "drop", "clear",
                             "rotate", "reverse")

# plain ints (not an IntEnum): they are or-ed into words on the hot paths
(NOP, INPUT, CONST, CONST64, INSTR, META_CONST, META, ROUTINE, STORE, LOAD,
 RETURN) = range(len(KIND_NAMES))
