"""Random Stack PTX programs over the rows the interpreter runs, for the interpreter's
agreement checks (tests/test_interpret.py, benchmarks/bench_interpret.py --exact): inputs,
constants (special values too), instructions, meta ops, stores and loads, routines."""
from __future__ import annotations

import numpy as np

from numptx import stack_ptx as sp
from numptx.instructions import TABLE

_META = (sp.dup, sp.swap, sp.drop, sp.rotate, sp.reverse, sp.clear, sp.yank_dup, sp.swap_with,
         sp.replace)
SPECIAL = {"f32": [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 1e-40, 3e38, float("inf"), float("nan")],
           "f64": [0.0, -0.0, 1.0, -2.5, 1e-310, 1e308, float("inf"), float("nan")]}


def rows_for(dtype: str) -> list[str]:
    """The interpreted rows whose operands and result are all ``dtype`` or pred, plus
    setp/selp of it."""
    out = []
    for name in sorted(sp.interpreted_rows()):
        r = TABLE[TABLE.index(name)]
        types = set(r.operands) | set(r.results)
        if dtype in types and types <= {dtype, "pred"}:
            out.append(name)
    return out


def random_program(rng: np.random.Generator, dtype: str, names: list[str], rows: list[str],
                   length: int, *, meta: bool = True) -> list:
    """A program of about ``length`` ops."""
    prog: list = []
    for _ in range(length):
        r = rng.random()
        if r < 0.28:
            prog.append(sp.input(names[int(rng.integers(len(names)))]))
        elif r < 0.38:
            v = (float(rng.choice(SPECIAL[dtype])) if rng.random() < 0.3
                 else float(rng.normal() * 4))
            prog.append(sp.const(v, dtype))
        elif r < 0.48 and meta:
            m = _META[int(rng.integers(len(_META)))]
            if m in (sp.yank_dup, sp.swap_with, sp.replace, sp.rotate, sp.reverse, sp.drop):
                prog.append(sp.meta(int(rng.integers(0, 4))))
            prog.append(m(dtype if rng.random() < 0.85 else "pred"))
        elif r < 0.52 and meta:
            slot = int(rng.integers(0, 3))
            prog.append(sp.store(dtype, slot) if rng.random() < 0.5 else sp.load(dtype, slot))
        elif r < 0.54 and meta:
            prog.append(sp.routine(0))
        else:
            prog.append(sp.instr(rows[int(rng.integers(len(rows)))]))
    return prog


def routine(dtype: str) -> list:
    """The routine random programs call: ``a * a`` (the top of the stack squared)."""
    return [sp.dup(dtype), sp.instr(f"mul.rn.{dtype}")]


def data(rng: np.random.Generator, dtype: str, names: list[str], n: int) -> dict:
    """Columns of ``n`` rows: mostly ordinary values, some special ones."""
    dt = np.float32 if dtype == "f32" else np.float64
    cols = {}
    for name in names:
        v = rng.normal(size=n) * rng.choice([0.5, 2.0, 100.0], size=n)
        special = rng.random(n) < 0.08
        v[special] = rng.choice(SPECIAL[dtype], size=int(special.sum()))
        cols[name] = v.astype(dt)
    return cols
