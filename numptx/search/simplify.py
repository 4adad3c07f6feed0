"""Simplified formulas of search programs and their complexity (issue 26, item 3).

:func:`complexity` is the size of a program's simplified expression: the number of distinct
nodes of the expression the stub's DAG prints as (each operator or function that reaches the
output, each input, each number; a subexpression the program computes once and uses twice
counts once)::

    from numptx.search.simplify import complexity, complexities
    complexity(prog, genes)              # an int
    complexities(progs, genes)           # a numpy int64 array, one per program

(First version: the nodes of :func:`numptx.search.formula.formula`'s simplified DAG.)
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import stack_ptx as sp
from .formula import _parse_stub
from .genes import Genes, SearchError

__all__ = ["complexity", "complexities"]


def _check_genes(genes) -> Genes:
    if not isinstance(genes, Genes):
        raise SearchError(f"genes={genes!r}: give a numptx.search.genes.Genes")
    return genes


def _count(text: str, genes: Genes) -> int:
    dag, root = _parse_stub(text, genes, True)
    seen = {root}
    todo = [root]
    while todo:
        op, args, _v = dag.nodes[todo.pop()]
        if op in ("num", "var"):
            continue
        for a in args:
            if a not in seen:
                seen.add(a)
                todo.append(a)
    return len(seen)


def complexities(programs: Sequence, genes: Genes) -> np.ndarray:
    """:func:`complexity` of each program (lists of ops or ``sp.encode`` arrays), compiled in
    one ``sp.compile_many`` batch: an int64 array of ``len(programs)``."""
    _check_genes(genes)
    try:
        stubs = sp.compile_many(list(programs), genes.inputs, genes.outputs)
    except sp.ProgramError as e:
        raise SearchError(f"programs: {e}") from None
    return np.fromiter((_count(str(s), genes) for s in stubs), np.int64, len(stubs))


def complexity(program: Sequence, genes: Genes) -> int:
    """The number of nodes of ``program``'s simplified expression (see the module docstring)."""
    return int(complexities([program], genes)[0])
