"""Shared machinery of Stack PTX and AST PTX (``numptx.stack_ptx``, ``numptx.ast_ptx``) and of
the DSL's lowering; the encoding, limits and stub format are docs/design/programs.md.

One module per job, each importing only those above it in this list:

* :mod:`.ops`: the :class:`Op` word and the calls that make ops (``input``, ``const``...);
* :mod:`.encoding`: ops <-> uint64 words (``encode``, ``decode``);
* :mod:`.stub`: what a compile returns (:class:`Stub`) and takes (:class:`Limits`);
* :mod:`.ctable`: the instruction table as C rows, the core's status texts;
* :mod:`.compile`: compile requests to the C core (``compile_words``, ``compile_lowered``...);
* :mod:`.dialects`: the Stack PTX dialects (numptx, mm-ptx) and ``convert`` between them;
* :mod:`.lower_dag`: the DSL's DAG record -> Stack PTX words, in C;
* :mod:`.tapes`: programs -> tapes, the records an interpreter runs (``sp.tapes``);
* :mod:`.interpret`: the CPU batch interpreter of tapes over columns (``sp.interpret``).

The kinds and meta operations are :mod:`numptx.opkinds`; this package re-exports what the
rest of numptx imports from it::

    from numptx._program import Op, const, encode, compile_words
"""
from __future__ import annotations

from ..opkinds import (CONST, CONST64, INPUT, INSTR, KIND_NAMES, LOAD, META, META_CONST, META_OPS,
                       NOP, RETURN, ROUTINE, STORE)
from .compile import _io_for, _limits_c, value_type, compile_lowered, compile_words, compile_words_many
from .ctable import _table
from .dialects import convert, resolve_dialect
from .encoding import as_program, _encode, _encode_fast, decode, encode, input_tag
from .lower_dag import ROOT_INPUT, lower_dag
from .ops import (DIALECTS, U64, ASTError, Op, ProgramError, const, dialect_id, input, instr,
                  special, type_id)
from .stub import DEFAULT_LIMITS, Limits, Stub

__all__ = [
    "NOP", "INPUT", "CONST", "CONST64", "INSTR", "META_CONST", "META", "ROUTINE", "STORE", "LOAD",
    "RETURN", "KIND_NAMES", "META_OPS", "ProgramError", "ASTError", "Op", "type_id", "input",
    "const", "instr", "special", "encode", "decode", "input_tag", "Stub", "Limits", "DEFAULT_LIMITS",
    "compile_words", "compile_words_many", "compile_lowered", "lower_dag", "ROOT_INPUT",
    "DIALECTS", "dialect_id", "convert", "resolve_dialect",
    # private helpers other numptx modules and the benchmarks import
    "U64", "as_program", "_encode", "_encode_fast", "value_type", "_io_for", "_limits_c",
    "_table",
]
