"""Levenberg–Marquardt in C (native/lm.h through numptx._program.lm): the fit of
``numptx.search.least_squares.fit_least_squares`` runs every round in one C call per thread,
with the same semantics as the NumPy rounds it replaced (``_fit_numpy``, kept as the
reference): the same runs, the same programs fitted, the same accepted losses up to the
rounding of sums taken in another order."""
from __future__ import annotations

import numpy as np
import pytest

from numptx import stack_ptx as sp
from numptx._program import lm as native_lm
from numptx._program.interpret import InterpretError, tapes
from numptx.jit.populations.fitness_interpret import data_columns
from numptx.search import least_squares as ls
from numptx.search.evaluate import Evaluator
from numptx.search.genes import Genes, op_dtypes
from numptx.search.operators import random_program


def _case(dtype, rows, loss="mse", scaling=False, seed=3, n=40):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (rows, 2)).astype(dtype)
    y = (np.sin(2 * X[:, 0]) * 1.5 + X[:, 1] * 0.7 - 0.2).astype(dtype)
    ev = Evaluator(X, y, loss=loss, device="cpu", evaluate="interpret", linear_scaling=scaling)
    ops = ["add", "sub", "mul", "div"] + (["sin"] if dtype == np.float32 else [])
    g = Genes(ops, 2, weights=True, dtype="f32" if dtype == np.float32 else "f64")
    return ev, [random_program(g, rng, int(rng.integers(3, 14))) for _ in range(n)]


@pytest.mark.parametrize("rows", [20, 300])       # lanes side by side; lanes where they differ
@pytest.mark.parametrize("loss,scaling", [("mse", False), ("mse", True), ("pearson", False)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_c_fit_is_the_numpy_rounds(dtype, loss, scaling, rows):
    ev, progs = _case(dtype, rows, loss, scaling)
    got_p, got, got_runs = ls.fit_least_squares(ev, progs, steps=8)
    ref_p, ref, ref_runs = ls._fit_numpy(ev, progs, steps=8)
    # the same rounds; C runs a trial's Jacobian only when the trial is taken and a step follows
    assert 0 < got_runs < ref_runs
    fin = np.isfinite(ref)
    np.testing.assert_array_equal(np.isfinite(got), fin)
    assert fin.sum() > len(progs) // 2
    rel = np.abs(got[fin] - ref[fin]) / np.maximum(np.abs(ref[fin]), 1e-300)
    assert np.median(rel) < 1e-12
    if dtype == np.float32:     # each trial rounded to f32: the same points, the same programs
        assert rel.max() < 1e-6
        assert sum(a != b for a, b in zip(got_p, ref_p)) <= len(progs) // 20
    else:                       # f64 steps differ in their last bits, fits may drift apart
        assert rel.max() < 1e-3


def test_a_fit_runs_the_jacobian_only_after_a_taken_trial():
    # before: every round ran its k perturbed lanes, taken or not (steps x (1 + k) runs)
    from numptx.search.operators import constants_of
    ev, progs = _case(np.float32, 20, n=30)
    seen = 0
    for p in progs:
        k = int(np.isfinite(constants_of(p)).sum())
        if not k:
            continue
        _, sse, one = ls.fit_least_squares(ev, [p], steps=1)
        _, _, two = ls.fit_least_squares(ev, [p], steps=2)
        if not np.isfinite(sse[0]):
            continue
        # round 0's trial is taken (the best is +inf): its Jacobian runs, as a step follows;
        # the last round runs its trial alone
        assert (one, two) == (1, 2 + k)
        seen += 1
    assert seen >= 10


def test_the_fit_runs_no_numpy_round(monkeypatch):
    # before: every round was a Variants.run (tapes rewritten, one C call) and NumPy steps
    ev, progs = _case(np.float32, 20)

    def refuse(*a, **k):
        raise AssertionError("a NumPy round ran")

    monkeypatch.setattr(ls.Variants, "run", refuse)
    monkeypatch.setattr(ls, "_steps", refuse)
    _, sse, runs = ls.fit_least_squares(ev, progs, steps=5)
    assert runs > 0 and np.isfinite(sse).sum() > len(progs) // 2


def test_threads_change_nothing(monkeypatch):
    ev, progs = _case(np.float32, 50, "mse", True, seed=5, n=60)
    monkeypatch.setattr(native_lm, "usable_cores", lambda: 1)
    one = ls.fit_least_squares(ev, progs, steps=6)
    monkeypatch.setattr(native_lm, "usable_cores", lambda: 4)
    monkeypatch.setattr(native_lm, "_PARALLEL_WORK", 0)
    spans = []
    real = native_lm._spans
    monkeypatch.setattr(native_lm, "_spans", lambda *a: spans.append(real(*a)) or spans[-1])
    many = ls.fit_least_squares(ev, progs, steps=6)
    assert len(spans[0]) > 1                                  # split over threads
    assert one[0] == many[0] and one[2] == many[2]
    np.testing.assert_array_equal(one[1], many[1])
    # a workspace budget of one thread's: one thread runs every span, the same fit
    monkeypatch.setattr(native_lm, "WORKSPACE_BUDGET", 1)
    workers = []
    real_spread = native_lm._spread
    monkeypatch.setattr(native_lm, "_spread",
                        lambda job, sp_, w: workers.append(w) or real_spread(job, sp_, w))
    budget = ls.fit_least_squares(ev, progs, steps=6)
    assert workers == [1] and budget[0] == one[0]
    np.testing.assert_array_equal(budget[1], one[1])


def _line_tapes():
    x = np.linspace(-1, 1, 30).astype(np.float32)
    progs = [[sp.const(1.0, "f32"), sp.input("x"), sp.instr("mul.rn.f32"), sp.const(0.0, "f32"),
              sp.instr("add.rn.f32")]] * 2
    tp = tapes(progs, {"x": "f32"}, {"y": "f32"})
    order, n = data_columns(tp, x[:, None], ("x",))
    return tp, order, n, (2 * x + 3).astype(np.float64)


def _arrays(tp, words):
    head = 4 + len(tp.outputs)
    return native_lm.FitArrays(
        param_off=np.array([0, 2, 4], np.uint32), theta=np.array([1.0, 0.0, 1.0, 0.0]),
        free=np.ones(4, np.uint8), wide=np.zeros(4, np.uint8),
        mark_off=np.array([0, 2, 4], np.uint32),
        mark_word=np.array([head + 8 * w for w in words], np.uint32),
        mark_param=np.array([0, 1, 0, 1], np.uint32))


def test_fit_tapes_fits_and_a_bad_mark_is_an_error_naming_the_program():
    tp, order, n, y = _line_tapes()
    prog0 = tp.tape(0)
    head = 4 + len(tp.outputs)
    kinds = [int(prog0[head + 8 * r]) & 0xFF for r in range((len(prog0) - head) // 8)]
    consts = [r for r, k in enumerate(kinds) if k == 1]
    inp = kinds.index(0)
    a = _arrays(tp, consts + consts)
    sse = native_lm.fit_tapes(tp, order, n, y, a, native_lm.FitOptions(steps=15, scaling=False))
    assert (sse < 1e-8).all()
    np.testing.assert_allclose(a.theta, [2, 3, 2, 3], atol=1e-4)
    bad = _arrays(tp, consts + [inp, consts[1]])          # program 1 marks its input
    with pytest.raises(InterpretError) as e:
        native_lm.fit_tapes(tp, order, n, y, bad, native_lm.FitOptions(steps=3, scaling=False))
    assert e.value.program == 1 and "program 1" in str(e.value)


def test_an_unwritten_output_keeps_its_input_as_run_cpu_does():
    # mm-ptx: an output a program leaves unwritten keeps the register's value, here the input
    # of the same name; the fit's f is then that column, as the interpreter's run gives it
    from numptx._program.interpret import columns, run_cpu
    tp = tapes([[], [sp.input("x"), sp.const(1.5, "f32"), sp.instr("mul.rn.f32")]],
               {"x": "f32", "y": "f32"}, {"y": "f32"}, dialect="mm-ptx")
    x = np.linspace(-1, 1, 30).astype(np.float32)
    cols, n = columns({"x": x, "y": (x * x).astype(np.float32)})
    order = [{c.name: c for c in cols}[m.split("\x00")[0]] for m in tp.inputs]
    f = run_cpu(tp, order, n)["y"].astype(np.float64)
    target = np.cos(x).astype(np.float64)
    head = 4 + len(tp.outputs)
    t1 = tp.tape(1)
    const = [r for r in range((len(t1) - head) // 8) if int(t1[head + 8 * r]) & 0xFF == 1]
    a = native_lm.FitArrays(
        param_off=np.array([0, 1, 2], np.uint32), theta=np.array([7.0, 1.5]),
        free=np.ones(2, np.uint8), wide=np.zeros(2, np.uint8),
        mark_off=np.array([0, 0, 1], np.uint32),           # program 0: a parameter, no slot
        mark_word=np.array([head + 8 * const[0]], np.uint32), mark_param=np.zeros(1, np.uint32))
    sse = native_lm.fit_tapes(tp, order, n, target, a, native_lm.FitOptions(steps=1,
                                                                             scaling=False))
    np.testing.assert_allclose(sse, ((f - target) ** 2).sum(axis=1), rtol=1e-12)
    assert a.theta[0] == 7.0                                  # nothing moved it


@pytest.mark.parametrize("field,value,match", [
    ("theta", np.zeros(3), "arrays.theta has 3 entries"),
    ("param_off", np.array([0, 2, 1], np.uint32), "rising offsets"),
    ("mark_word", np.zeros(4, np.int64), "arrays.mark_word: give a contiguous 1-D uint32"),
    ("mark_off", np.array([0, 2, 9], np.uint32), "arrays.mark_word has 4 entries"),
])
def test_fit_tapes_refuses_arrays_the_c_core_would_read_past(field, value, match):
    import dataclasses
    tp, order, n, y = _line_tapes()
    head = 4 + len(tp.outputs)
    prog0 = tp.tape(0)
    consts = [r for r in range((len(prog0) - head) // 8) if int(prog0[head + 8 * r]) & 0xFF == 1]
    a = dataclasses.replace(_arrays(tp, consts + consts), **{field: value})
    with pytest.raises(InterpretError, match=match):
        native_lm.fit_tapes(tp, order, n, y, a, native_lm.FitOptions(steps=2, scaling=False))


def test_fit_tapes_refuses_a_target_or_column_of_other_rows():
    tp, order, n, y = _line_tapes()
    head = 4 + len(tp.outputs)
    prog0 = tp.tape(0)
    consts = [r for r in range((len(prog0) - head) // 8) if int(prog0[head + 8 * r]) & 0xFF == 1]
    opt = native_lm.FitOptions(steps=2, scaling=False)
    with pytest.raises(InterpretError, match="one target per row"):
        native_lm.fit_tapes(tp, order, n, y[:-1], _arrays(tp, consts + consts), opt)
    with pytest.raises(InterpretError, match="one column of 29 rows"):
        native_lm.fit_tapes(tp, order, n - 1, y[:-1], _arrays(tp, consts + consts), opt)


# ---- review: the wrapper's arguments (each failed before its fix) ------------------------------
def _line_arrays():
    tp, order, n, y = _line_tapes()
    head = 4 + len(tp.outputs)
    prog0 = tp.tape(0)
    consts = [r for r in range((len(prog0) - head) // 8) if int(prog0[head + 8 * r]) & 0xFF == 1]
    return tp, order, n, y, _arrays(tp, consts + consts)


@pytest.mark.parametrize("how,match", [
    ("reversed", "cols\\[0\\] \\('x'\\).*contiguous"),     # before: read before the array's start
    ("strided", "cols\\[0\\] \\('x'\\).*contiguous"),      # before: every other row, silently
    ("float64", "cols\\[0\\] \\('x'\\).*float32"),         # before: f64 bits read as f32 rows
    ("list", "cols\\[0\\] \\('x'\\).*contiguous"),         # before: AttributeError
    ("scalar float16", "cols\\[0\\] \\('x'\\).*float32"),  # before: 4 bytes read of 2
    ("not a Column", "cols\\[0\\]: "),
])
def test_fit_tapes_refuses_a_column_the_c_core_would_misread(how, match):
    from numptx._program.interpret import Column
    tp, order, n, y, a = _line_arrays()
    c = order[0]
    bad = {"reversed": lambda: Column(c.name, c.type, c.data[::-1], False),
           "strided": lambda: Column(c.name, c.type, np.repeat(c.data, 2)[::2], False),
           "float64": lambda: Column(c.name, c.type, c.data.astype(np.float64), False),
           "list": lambda: Column(c.name, c.type, list(c.data), False),
           "scalar float16": lambda: Column(c.name, c.type, np.ones(1, np.float16), True),
           "not a Column": lambda: c.data}[how]()
    before = a.theta.copy()
    with pytest.raises(InterpretError, match=match):
        native_lm.fit_tapes(tp, [bad], n, y, a, native_lm.FitOptions(steps=2, scaling=False))
    np.testing.assert_array_equal(a.theta, before)


@pytest.mark.parametrize("kw,match", [
    ({"threads": -1}, "threads=-1"), ({"threads": 2.5}, "threads=2.5"),
    ({"threads": True}, "threads=True"),
    ({"opt": {"steps": -1}}, "opt.steps=-1"), ({"opt": {"steps": 2 ** 33}}, "opt.steps="),
    ({"opt": {"steps": 1.5}}, "opt.steps=1.5"),
    ({"opt": {"lambda0": float("nan")}}, "opt.lambda0=nan"),  # before: a NaN-damped fit, silently
    ({"opt": {"lambda0": "a"}}, "opt.lambda0='a'"),
    ({"opt": {"flat_rel": -1.0}}, "opt.flat_rel=-1.0"),
    ({"opt": {"root_eps32": 0.0}}, "opt.root_eps32=0.0"),
    ({"opt": {"scaling": "yes"}}, "opt.scaling='yes'"),
    ({"y": ["a"] * 30}, "y: "), ({"opt": None}, "opt: "), ({"arrays": None}, "arrays: "),
    ({"tp": None}, "tp: "), ({"cols": None}, "cols: "),
])
def test_fit_tapes_names_a_bad_argument(kw, match):
    import dataclasses
    tp, order, n, y, a = _line_arrays()
    opt = native_lm.FitOptions(steps=2, scaling=False)
    if isinstance(kw.get("opt"), dict):
        kw = {"opt": dataclasses.replace(opt, **kw["opt"])}
    args = {"tp": tp, "cols": order, "n_rows": n, "y": y, "arrays": a, "opt": opt} | kw
    threads = args.pop("threads", None)
    with pytest.raises(InterpretError, match=match):
        native_lm.fit_tapes(*args.values(), threads=threads)


@pytest.mark.parametrize("threads", [1, 3])
def test_a_refused_program_leaves_every_parameter_as_it_was(threads, monkeypatch):
    # program 1 marks its input record: the error names it, and program 0's parameters, which
    # the C core had fitted before reaching program 1, are as given (before: fitted, then the
    # error: a half-done batch)
    tp, order, n, y, a = _line_arrays()
    monkeypatch.setattr(native_lm, "_PARALLEL_WORK", 0)
    head = 4 + len(tp.outputs)
    kinds = [int(tp.tape(1)[head + 8 * r]) & 0xFF for r in range((len(tp.tape(1)) - head) // 8)]
    a.mark_word[2] = head + 8 * kinds.index(0)
    before = a.theta.copy()
    with pytest.raises(InterpretError) as e:
        native_lm.fit_tapes(tp, order, n, y, a, native_lm.FitOptions(steps=4, scaling=False),
                            threads=threads)
    assert e.value.program == 1
    np.testing.assert_array_equal(a.theta, before)


def test_a_mark_of_another_width_than_its_parameter_is_refused():
    # parameter 1 of program 0 says f64 (wide) while its record holds an f32: before, the fit
    # stepped it by f64 steps the f32 record rounded away (a zero Jacobian column, silently)
    tp, order, n, y, a = _line_arrays()
    a.wide[1] = 1
    before = a.theta.copy()
    with pytest.raises(InterpretError, match="program 0: the mark at record 3 .*arrays.wide"):
        native_lm.fit_tapes(tp, order, n, y, a, native_lm.FitOptions(steps=3, scaling=False))
    np.testing.assert_array_equal(a.theta, before)




def _random_fit_case(dtype, seed, n_prog=60, rows=300):
    """Random programs over every row the interpreter runs for ``dtype`` (meta ops, routines,
    setp/selp with predicates, cvt across widths, int rows), every f32/f64 CONST record a
    parameter (non-finite ones fixed), as FitArrays."""
    import interp_programs as IP
    from numptx._program.interpret import columns, records, refused
    from numptx._program.tapes import subset
    from numptx.search.genes import OP_NAMES
    rng = np.random.default_rng(seed)
    other = "f64" if dtype == "f32" else "f32"
    g = Genes([o for o in OP_NAMES if dtype == "f32" or dtype in op_dtypes(o)], 2, weights=True,
              dtype=dtype)
    progs = []
    for k in range(n_prog):
        if k % 2:                       # any row, meta ops, routines
            p = IP.random_program(rng, dtype, ["x0", "x1"], IP.rows_for(dtype),
                                  int(rng.integers(3, 16)))
        else:                           # the search's genes (weights: constants that matter)
            p = random_program(g, rng, int(rng.integers(3, 14))) + [
                sp.input("x0"), sp.const(float(rng.normal()), dtype),
                sp.instr(f"setp.{rng.choice(['lt', 'ge', 'ne'])}.{dtype}"),
                sp.instr(f"selp.{dtype}")]
        if rng.random() < 0.5:          # an f32 constant in an f64 program, and vice versa
            p += [sp.const(float(rng.normal()), other),
                  sp.instr("cvt.f64.f32" if dtype == "f64" else "cvt.rn.f32.f64"),
                  sp.instr(f"add.rn.{dtype}")]
        if rng.random() < 0.3:          # an int row between
            p += [sp.const(3, "s32"), sp.input("x1"), sp.instr(f"cvt.rzi.s32.{dtype}"),
                  sp.instr("add.s32"), sp.instr(f"cvt.rn.{dtype}.s32"), sp.instr(f"mul.rn.{dtype}")]
        progs.append(p)
    tp = tapes(progs, {"x0": dtype, "x1": dtype}, {"y": dtype}, routines=[IP.routine(dtype)])
    bad = refused(tp)
    tp = subset(tp, np.array([i for i in range(len(progs)) if i not in bad]))
    dt = np.float32 if dtype == "f32" else np.float64
    data = {k: rng.uniform(0.2, 2, rows).astype(dt) for k in ("x0", "x1")}
    cols, n = columns(data)
    order = [{c.name: c for c in cols}[m.split("\x00")[0]] for m in tp.inputs]
    y = np.sin(data["x0"].astype(float)) * 2 + data["x1"] * 0.5
    prog, at = records(tp)
    w = tp.words
    from numptx import valuetypes as VT
    f32, f64 = VT.BY_NAME["f32"].id, VT.BY_NAME["f64"].id
    typ = (w[at] >> 8) & 0xFF
    is_c = ((w[at] & 0xFF) == 1) & ((typ == f32) | (typ == f64))
    po, th, fr, wd, mo, mw, mp = [0], [], [], [], [0], [], []
    for p in range(len(tp)):
        for j, a in enumerate(at[is_c & (prog == p)]):
            wide = ((w[a] >> 8) & 0xFF) == f64
            bits = np.array([int(w[a + 2]) | int(w[a + 3]) << 32], np.uint64)
            v = bits.view(np.float64)[0] if wide else \
                float(bits.astype(np.uint32).view(np.float32)[0])
            th.append(v)
            fr.append(np.isfinite(v) and rng.random() < 0.85)
            wd.append(wide)
            mw.append(a - int(tp.offsets[p]))
            mp.append(j)
        po.append(len(th))
        mo.append(len(mw))

    def arrays():
        return native_lm.FitArrays(
            np.array(po, np.uint32), np.array(th, np.float64), np.array(fr, np.uint8),
            np.array(wd, np.uint8), np.array(mo, np.uint32), np.array(mw, np.uint32),
            np.array(mp, np.uint32))
    return tp, order, n, y, arrays


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_lanes_where_they_differ_are_whole_runs_bit_for_bit(dtype, monkeypatch):
    # 300 rows: blocks of 256 run lane 0 whole and each perturbed lane only where its
    # parameter reaches; blocks of 4096 run every lane whole, side by side. The fits agree
    # bit for bit, for every row kind the programs use.
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    tp, order, n, y, arrays = _random_fit_case(dtype, 11)
    for opt in (native_lm.FitOptions(steps=4, scaling=False),
                native_lm.FitOptions(steps=4, scaling=True, positive=True, flat=True)):
        got = []
        for block in (256, 4096):
            monkeypatch.setattr(native_lm, "_BLOCK", block)
            a = arrays()
            sse = native_lm.fit_tapes(tp, order, n, y, a, opt, threads=1)
            got.append((a.theta.view(np.uint64), sse.view(np.uint64)))
        np.testing.assert_array_equal(got[0][0], got[1][0])
        np.testing.assert_array_equal(got[0][1], got[1][1])
    moved = (got[0][0] != arrays().theta.view(np.uint64)).sum()
    assert np.isfinite(sse).sum() > len(tp) // 2 and moved > 10
