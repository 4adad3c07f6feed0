"""Review of the GPU interpreter's host side (issue 23), without a GPU: what
``plan_interpret`` (every check of ``interpret_gpu`` and the kernel's arguments) accepts and
refuses against what the CPU interpreter does."""
from __future__ import annotations

import numpy as np
import pytest

import numptx as nx
from numptx import stack_ptx as sp
from numptx import valuetypes as VT
from numptx.jit.populations.interpret_gpu import plan_interpret

TYPES = ["f32", "f64", "s32", "u32", "s64", "u64", "b16", "pred"]
VALUES = [0, 3, -1, 2 ** 31, 2 ** 40, 2 ** 70, 2.5, 3.0, -0.0, 0.5, 1.0, 1e39, 1e300,
          float("inf"), float("nan"), True, False]


def _cpu(v, t):
    """The CPU interpreter's value of Python number ``v`` as a ``t`` input, or its error."""
    try:
        got = sp.interpret([[sp.input("a")]], {"a": v}, {"y": t}, types={"a": t},
                           device="cpu")["y"]
    except nx.InterpretError:
        return None
    return got[0, 0]


def _gpu(v, t):
    """plan_interpret's column of ``v`` (its slot bits), or None when it refuses it."""
    tp = sp.tapes([[sp.input("a")]], {"a": t}, {"y": t})
    try:
        plan = plan_interpret(tp.words, tp.offsets, [v], [t], n_rows=2)
    except nx.InterpretError:
        return None
    return plan.args[3][0][0]


@pytest.mark.parametrize("t", TYPES)
def test_a_python_number_is_taken_as_the_cpu_interpreter_takes_it(t):
    # 2.5 for an s32 input was truncated to 2 on the GPU and refused on the CPU
    for v in VALUES:
        cpu, gpu = _cpu(v, t), _gpu(v, t)
        assert (cpu is None) == (gpu is None), (v, t, cpu, gpu)
        if cpu is not None:
            dt = VT.BY_NAME[t].np
            bits = np.asarray(cpu, dt).view({1: np.uint8, 2: np.uint16, 4: np.uint32,
                                             8: np.uint64}[dt.itemsize])
            assert int(bits) == int(gpu), (v, t, cpu, gpu)


def test_columns_of_no_rows_are_named_as_such():
    tp = sp.tapes([[sp.input("a")]], {"a": "f32"}, {"y": "f32"})
    with pytest.raises(nx.InterpretError, match=r"input columns have no rows"):
        plan_interpret(tp.words, tp.offsets, [np.zeros(0, np.float32)], ["f32"])
    with pytest.raises(nx.InterpretError, match=r"n_rows= is needed when every input is a "
                                                 r"scalar"):
        plan_interpret(tp.words, tp.offsets, [np.float32(1)], ["f32"])
    # through sp.interpret no rows is an empty result, as on the CPU
    got = sp.interpret([[sp.input("a")]], {"a": np.zeros(0, np.float32)}, {"y": "f32"},
                       device="cpu")["y"]
    assert got.shape == (1, 0)


def test_a_row_past_the_arch_is_refused_for_the_arch():
    # add.rn.bf16 needs sm_90: on sm_80 it was refused as "not in the kernel's rows (rows=)"
    # though no rows= was given
    from numptx.instructions import TABLE
    from numptx.jit.populations.interpret_gpu import prepare_tapes
    row = TABLE[TABLE.index("add.rn.bf16")]
    assert row.min_sm == 90
    tp = sp.tapes([[sp.input("a"), sp.input("b"), sp.instr("add.rn.bf16")]],
                  {"a": "bf16", "b": "bf16"}, {"y": "bf16"})
    with pytest.raises(nx.InterpretError, match=r"add\.rn\.bf16\) does not run on the GPU "
                                                 r"interpreter: it needs sm_90 \(the kernel "
                                                 r"is built for sm_80\)") as e:
        prepare_tapes(tp.words, tp.offsets, 2, ["bf16"], arch="sm_80")
    assert e.value.program == 0
    assert prepare_tapes(tp.words, tp.offsets, 2, ["bf16"], arch="sm_90").subset.rows == (
        TABLE.index("add.rn.bf16"),)


def test_rows_past_the_arch_are_refused_before_the_build():
    # rows= naming an sm_90 row passed the checks on sm_80, and the kernel's build failed
    # in ptxas (a LinkError about the generated PTX)
    tp = sp.tapes([[sp.input("a"), sp.input("a"), sp.instr("add.rn.f32")]], {"a": "f32"},
                  {"y": "f32"})
    with pytest.raises(nx.InterpretError, match=r"rows=: row 'add\.rn\.bf16' does not run on "
                                                 r"the GPU interpreter: it needs sm_90"):
        plan_interpret(tp.words, tp.offsets, [np.ones(4, np.float32)], ["f32"],
                       rows=["add.rn.f32", "add.rn.bf16"], arch="sm_80")
