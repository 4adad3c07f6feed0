"""The least-squares fit's batch paths: ParameterTapes read from a whole batch's words at once
(``least_squares._marked_batch``) and the fit memo's keys joined from the ops' bytes
(``loop._exact_key``), each equal to the per-program path it replaces."""
from __future__ import annotations

import numpy as np
import pytest

from numptx import stack_ptx as sp
from numptx.search.evaluate import Evaluator
from numptx.search.genes import Genes
from numptx.search.least_squares import ParameterTapes


def c(v, t="f32"):
    return sp.const(v, t)


def i(name):
    return sp.instr(name)


def x(j=0):
    return sp.input(f"x{j}")


def _data(f, n=40, d=1, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d)).astype(dtype)
    return X, f(X).astype(dtype)


def _per_program(ev, programs):
    """ParameterTapes' per-program path (the batch path switched off for the call)."""
    import numptx.search.least_squares as ls
    keep = ls._marked_batch
    ls._marked_batch = lambda programs, site: None
    try:
        return ParameterTapes(ev, programs)
    finally:
        ls._marked_batch = keep


@pytest.mark.parametrize("d", [1, 3])
def test_parameter_tapes_batch_path_equals_the_per_program_path(d):
    from numptx.search import operators as O
    from numptx.search.least_squares import _marked_batch
    X, y = _data(lambda X: X.sum(axis=1), n=24, d=d)
    ev = Evaluator(X, y, loss="mse", device="cpu", evaluate="interpret")
    genes = Genes(["add", "sub", "mul", "div", "exp", "sin"], d)
    rng = np.random.default_rng(7)
    programs = [O.random_program(genes, rng, length=(1, 30)) for _ in range(300)]
    programs += [[x()], [], [c(1.5), c(-2.0), i("add.rn.f32")]]
    assert _marked_batch(programs, ev.site) is not None        # the batch path runs here
    fast, slow = ParameterTapes(ev, programs), _per_program(ev, programs)
    np.testing.assert_array_equal(fast.tp.words, slow.tp.words)
    np.testing.assert_array_equal(fast.tp.offsets, slow.tp.offsets)
    np.testing.assert_array_equal(fast.ok, slow.ok)
    for name in ("slot_word", "slot_prog", "slot_param", "slot_wide"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name))
    for a, b in zip(fast.theta, slow.theta):
        np.testing.assert_array_equal(a, b)
    assert [s.at for s in fast.slots] == [s.at for s in slow.slots]
    vals = [np.arange(len(t), dtype=np.float64) / 7 + 0.25 for t in fast.theta]
    assert [s.program(v) for s, v in zip(fast.slots, vals)] == \
        [s.program(v) for s, v in zip(slow.slots, vals)]


def test_parameter_tapes_take_the_per_program_path_for_wide_constants():
    from numptx.search.least_squares import _marked_batch
    X, y = _data(lambda X: X[:, 0], dtype=np.float64)
    ev = Evaluator(X, y, loss="mse", device="cpu", evaluate="interpret")
    prog = [x(), c(2.0, "f64"), i("mul.rn.f64")]
    assert _marked_batch([prog], ev.site) is None                # a 64-bit constant: two words
    pt = ParameterTapes(ev, [prog])
    assert pt.ok.all() and pt.theta[0].tolist() == [2.0]


def test_exact_key_is_the_encoded_program():
    from numptx.search import operators as O
    from numptx.search.loop import _exact_key
    genes = Genes(["add", "mul", "exp", "log", "sin"], 3)
    names = list(genes.names)
    rng = np.random.default_rng(3)
    raw: dict = {}
    progs = [O.random_program(genes, rng, length=(1, 24)) for _ in range(200)]
    progs += [[], [x(2), x(0), i("add.rn.f32")], [sp.const(2.0, "f64")]]
    for p in progs:
        assert _exact_key(p, raw, names) == sp.encode(p, names).tobytes()
    assert set(n for _, n in raw) <= set(names)


def test_batch_path_reads_a_signalling_nan_quietly_and_copies_the_programs():
    from numptx.opkinds import CONST
    X, y = _data(lambda X: X[:, 0], n=16)
    ev = Evaluator(X, y, loss="mse", device="cpu", evaluate="interpret")
    snan = sp.Op(CONST, 5 << 8 | 0x7F800001 << 32)
    prog = (x(), snan, i("add.rn.f32"), c(2.0), i("mul.rn.f32"))       # a tuple program
    with np.errstate(all="raise"):
        pt = ParameterTapes(ev, [prog])
    assert np.isnan(pt.theta[0][0]) and pt.theta[0][1] == 2.0
    got = pt.slots[0].written([None, 0x40400000])                     # constant 1 set to 3.0
    assert isinstance(got, list) and got[1] is snan and got[3] == c(3.0)


def test_exact_key_of_a_non_op_is_the_encoders_error():
    from numptx.search.loop import _exact_key
    with pytest.raises(sp.ProgramError, match="item 1"):
        _exact_key([x(), "mul"], {}, ["x0"])
