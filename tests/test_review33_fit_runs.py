"""Review of d23e1d5 (fit_tapes(runs=)): a refused batch leaves nothing half-done, the runs
the caller passed included (the fitted points are undone; so are the counts)."""
from __future__ import annotations

import numpy as np
import pytest

from numptx import stack_ptx as sp
from numptx._program import lm as native_lm
from numptx._program.interpret import InterpretError, tapes
from numptx.jit.populations.fitness_interpret import data_columns


def _line():
    x = np.linspace(-1, 1, 30).astype(np.float32)
    progs = [[sp.const(1.0, "f32"), sp.input("x"), sp.instr("mul.rn.f32"), sp.const(0.0, "f32"),
              sp.instr("add.rn.f32")]] * 2
    tp = tapes(progs, {"x": "f32"}, {"y": "f32"})
    order, n = data_columns(tp, x[:, None], ("x",))
    head = 4 + len(tp.outputs)
    t0 = tp.tape(0)
    kinds = [int(t0[head + 8 * r]) & 0xFF for r in range((len(t0) - head) // 8)]
    consts = [r for r, k in enumerate(kinds) if k == 1]
    return tp, order, n, (2 * x + 3).astype(np.float64), head, consts, kinds.index(0)


def _arrays(head, records):
    return native_lm.FitArrays(
        param_off=np.array([0, 2, 4], np.uint32), theta=np.array([1.0, 0.0, 1.0, 0.0]),
        free=np.ones(4, np.uint8), wide=np.zeros(4, np.uint8),
        mark_off=np.array([0, 2, 4], np.uint32),
        mark_word=np.array([head + 8 * r for r in records], np.uint32),
        mark_param=np.array([0, 1, 0, 1], np.uint32))


def test_runs_are_counted_per_program():
    tp, order, n, y, head, consts, _ = _line()
    runs = np.zeros(2, np.uint64)
    native_lm.fit_tapes(tp, order, n, y, _arrays(head, consts + consts),
                        native_lm.FitOptions(steps=5, scaling=False), runs=runs)
    # 5 trials; each taken trial before the last round adds its 2 perturbed lanes
    assert (runs >= 5).all() and (runs <= 5 + 2 * 4).all() and runs[0] == runs[1]


def test_a_refused_batch_leaves_the_runs_as_given():
    tp, order, n, y, head, consts, inp = _line()
    a = _arrays(head, consts + [inp, consts[1]])      # program 1 marks its input: refused
    runs = np.full(2, 7, np.uint64)
    with pytest.raises(InterpretError) as e:
        native_lm.fit_tapes(tp, order, n, y, a, native_lm.FitOptions(steps=5, scaling=False),
                            runs=runs)
    assert e.value.program == 1
    np.testing.assert_array_equal(a.theta, [1.0, 0.0, 1.0, 0.0])   # program 0's fit undone
    np.testing.assert_array_equal(runs, [7, 7])                     # and its count (was 13)
