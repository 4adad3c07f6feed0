"""sp.interpret: the batch interpreter (native/interp.h) against the emulator of the same
programs' stubs, row for row and bit for bit; its refusals; malformed tapes."""
from __future__ import annotations

import numpy as np
import pytest

import numptx as nx
from numptx import stack_ptx as sp
from numptx._program.interpret import Tapes, columns, run_cpu

from interp_programs import data, random_program, routine, rows_for

F2 = {"x0": "f32", "x1": "f32"}


def emulated(prog, cols, types, outputs, **kw):
    stub = sp.compile(prog, types, outputs, **kw)
    n = len(next(iter(cols.values())))
    with np.errstate(all="ignore"):
        got = nx.emulate(stub, cols, list(outputs))
    return {k: np.broadcast_to(np.asarray(v), (n,)) for k, v in got.items()}


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-identical, except that any NaN matches any NaN (payloads are unspecified)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f":
        nan = np.isnan(a) & np.isnan(b)
        w = a.dtype.itemsize * 8
        return bool(np.all(nan | (a.view(f"u{w // 8}") == b.view(f"u{w // 8}"))))
    return bool(np.array_equal(a, b))


def test_acceptance_example():
    X = np.random.default_rng(0).uniform(-1, 1, (1000, 2)).astype(np.float32)
    progs = [[sp.input("x0"), sp.input("x1"), sp.instr("mul.rn.f32")],
             [sp.input("x0"), sp.input("x0"), sp.instr("add.rn.f32")]]
    out = sp.interpret(progs, {"x0": X[:, 0], "x1": X[:, 1]}, {"y": "f32"}, device="cpu")
    assert out["y"].shape == (2, 1000) and out["y"].dtype == np.float32
    for k, p in enumerate(progs):
        e = emulated(p, {"x0": X[:, 0], "x1": X[:, 1]}, F2, {"y": "f32"})["y"]
        assert same_bits(out["y"][k], e)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("dialect", ["numptx", "mm-ptx"])
def test_random_programs_match_the_emulator(dtype, dialect):
    rng = np.random.default_rng(7 if dtype == "f32" else 8)
    names = ["a", "b", "c"]
    rows = rows_for(dtype)
    assert len(rows) >= 3
    cols = data(rng, dtype, names, 97)          # not a multiple of the block: a partial block
    types = dict.fromkeys(names, dtype)
    outs = {"y": dtype, "z": dtype}
    progs = [random_program(rng, dtype, names, rows, int(rng.integers(1, 40)))
             for _ in range(150)]
    kw = dict(routines=[routine(dtype)], dialect=dialect)
    got = sp.interpret(progs, cols, outs, device="cpu", on_limit="run", **kw)
    for k, p in enumerate(progs):
        want = emulated(p, cols, types, outs, **kw) if dialect == "numptx" else None
        if dialect == "mm-ptx":       # an unwritten output reads 0 (the emulator has none)
            stub = sp.compile(p, types, outs, **kw)
            with np.errstate(all="ignore"):
                e = nx.emulate(stub, {**cols, "y": np.zeros(97, cols["a"].dtype),
                                      "z": np.zeros(97, cols["a"].dtype)}, list(outs))
            want = {o: np.broadcast_to(np.asarray(v), (97,)) for o, v in e.items()}
        for o in outs:
            assert same_bits(got[o][k], want[o]), (k, o, p)


def test_threads_and_blocks_agree():
    rng = np.random.default_rng(3)
    rows = rows_for("f32")
    cols = data(rng, "f32", ["a", "b"], 3000)
    progs = [random_program(rng, "f32", ["a", "b"], rows, 25, meta=False) for _ in range(64)]
    one = sp.interpret(progs, cols, {"y": "f32"}, device="cpu", threads=1)["y"]
    many = sp.interpret(progs, cols, {"y": "f32"}, device="cpu", threads=4)["y"]
    assert same_bits(one, many)
    tp = sp.tapes(progs, {"a": "f32", "b": "f32"}, {"y": "f32"})
    c, n = columns(cols)
    for block in (1, 7, 4096):
        assert same_bits(run_cpu(tp, c, n, block=block)["y"], one)


def test_scalars_broadcast_and_python_numbers():
    progs = [[sp.input("x"), sp.input("k"), sp.instr("mul.rn.f32")]]
    x = np.float32([1, 2, 3])
    got = sp.interpret(progs, {"x": x, "k": 2.5}, {"y": "f32"}, device="cpu")["y"]
    assert got.tolist() == [[2.5, 5.0, 7.5]]
    got = sp.interpret(progs, {"x": np.float32(2), "k": np.float32(3)}, {"y": "f32"},
                       device="cpu")["y"]
    assert got.shape == (1, 1) and got[0, 0] == 6


def test_unsatisfied_outputs_read_zero_and_empty_batches():
    got = sp.interpret([[sp.input("x")], []], {"x": np.float32([1, 2])},
                       {"y": "f32", "z": "f32"}, device="cpu")
    assert got["y"].tolist() == [[1, 2], [0, 0]] and got["z"].tolist() == [[0, 0], [0, 0]]
    got = sp.interpret([], {"x": np.float32([1, 2])}, {"y": "f32"}, device="cpu")
    assert got["y"].shape == (0, 2)


def test_site_binding_names_the_site_variables():
    src = r'''
    extern "C" __global__ void k(float* out, const float* a) {
        float x = a[0], y;
        PTX_INJECT("f", PTX_IN(F32, x), PTX_OUT(F32, y));
        out[0] = y;
    }'''
    site = nx.CudaTemplate(src, entry="k").sites["f"]
    prog = [sp.input("x"), sp.input("x"), sp.instr("add.rn.f32")]
    got = sp.interpret([prog], {"x": np.float32([1, 4])}, site=site, device="cpu")
    assert got["y"].tolist() == [[2, 8]]
    with pytest.raises(nx.InterpretError, match=r"a f64 column for the f32 input 'x'"):
        sp.interpret([prog], {"x": np.float64([1, 4])}, site=site, device="cpu",
                     types={"x": "f64"})


@pytest.mark.parametrize("inputs, outputs, match", [
    ({"x": np.float32([1, 2]), "k": np.float32([1, 2, 3])}, {"y": "f32"}, r"ragged columns"),
    ({"x": np.float32([[1, 2]])}, {"y": "f32"}, r"2-D array"),
    ({"x": np.float16([1, 2])}, {"y": "f32"}, r"float16 column"),
    ({"x": np.float32([1, 2])}, {"y": "f16"}, r"outputs\['y'\] = 'f16'"),
    ({"x": np.float32([1, 2])}, None, r"outputs= maps"),
    ([1, 2], {"y": "f32"}, r"expected a mapping"),
])
def test_bad_arguments_are_named(inputs, outputs, match):
    prog = [sp.input("x"), sp.input("x"), sp.instr("add.rn.f32")]
    with pytest.raises(nx.InterpretError, match=match):
        sp.interpret([prog], inputs, outputs, device="cpu")


def test_unknown_input_names_the_program():
    progs = [[sp.input("x")], [sp.input("nope")]]
    with pytest.raises(nx.InterpretError, match=r"program 1.*nope|nope.*program 1"):
        sp.interpret(progs, {"x": np.float32([1])}, {"y": "f32"}, device="cpu")


def test_a_typed_column_must_match_its_declared_type():
    with pytest.raises(nx.InterpretError, match=r"float32 column for the f64 input 'x'"):
        sp.interpret([[sp.input("x")]], {"x": np.float32([1])}, {"y": "f64"}, device="cpu",
                     types={"x": "f64"})


def test_rows_without_c_semantics_name_program_and_row():
    progs = [[sp.input("x")],
             [sp.input("x"), sp.instr("cvt.rn.f16.f32"), sp.instr("cvt.f32.f16")]]
    with pytest.raises(nx.InterpretError, match=r"program 1 uses 'cvt.rn.f16.f32'") as e:
        sp.interpret(progs, {"x": np.float32([1])}, {"y": "f32"}, device="cpu")
    assert e.value.program == 1 and e.value.row == "cvt.rn.f16.f32"


def test_limits_raise_or_run_like_the_compiler():
    prog = [sp.input("x")] + [sp.dup("f32"), sp.instr("add.rn.f32")] * 10
    lim = sp.Limits(max_steps=8)
    with pytest.raises(nx.InterpretError, match=r"program 0 reaches the step limit"):
        sp.interpret([prog], {"x": np.float32([1])}, {"y": "f32"}, device="cpu", limits=lim)
    got = sp.interpret([prog], {"x": np.float32([1.5])}, {"y": "f32"}, device="cpu",
                       limits=lim, on_limit="run")["y"]
    want = emulated(prog, {"x": np.float32([1.5])}, {"x": "f32"}, {"y": "f32"}, limits=lim)
    assert same_bits(got[0], want["y"])
    with pytest.raises(nx.InterpretError, match=r"stack's capacity"):
        sp.interpret([[sp.input("x")] * 10], {"x": np.float32([1])}, {"y": "f32"},
                     device="cpu", limits=sp.Limits(stack_capacity=4))


def test_user_stack_types_are_refused_not_misread():
    # a retyped row has no C semantics: refused with its name
    t = sp.stack_type("interp_seed", "u32")
    assert t.id >= 14
    with pytest.raises(nx.InterpretError, match="the interpreter runs the types"):
        sp.interpret([[sp.input("s")]], {"s": np.uint32([1])}, {"y": "interp_seed"},
                     device="cpu")


def test_device_argument():
    with pytest.raises(nx.InterpretError, match="device="):
        sp.interpret([[]], {"x": np.float32([1])}, {"y": "f32"}, device="tpu")


def _tape_batch(progs, n=5):
    tp = sp.tapes(progs, {"x": "f32"}, {"y": "f32"})
    c, rows = columns({"x": np.arange(n, dtype=np.float32)})
    return tp, c, rows


def test_malformed_tapes_are_refused_without_reading_out_of_bounds():
    """Every single-word corruption of a valid tape: refused with InterpretError or run; the
    C core never crashes (under the sanitizers, `make -C native test` runs the same idea)."""
    prog = [sp.input("x"), sp.const(2.0, "f32"), sp.instr("mul.rn.f32"), sp.input("x"),
            sp.instr("add.rn.f32")]
    tp, c, n = _tape_batch([prog])
    assert len(tp.words) == 4 + 1 + 8 * 4
    rng = np.random.default_rng(0)
    for i in range(len(tp.words)):
        for v in (0, 1, 2, 5, 0xFF, 0xFFFFFFFF, int(rng.integers(1 << 32))):
            w = tp.words.copy()
            w[i] = v
            bad = Tapes(w, tp.offsets, tp.inputs, tp.outputs, tp.dialect)
            try:
                run_cpu(bad, c, n)
            except nx.InterpretError:
                pass


def test_tape_format():
    prog = [sp.input("x"), sp.const(2.0, "f32"), sp.instr("mul.rn.f32")]
    tp = sp.tapes([prog], {"x": "f32"}, {"y": "f32"})
    w = tp.tape(0)
    n_slots, n_rec, n_out, flags = w[:4]
    assert (n_slots, n_rec, n_out, flags) == (3, 3, 1, 0)
    assert w[4] == 2                              # y is slot 2
    recs = w[5:].reshape(-1, 8)
    assert [r[0] & 0xFF for r in recs] == [1, 0, 2]     # the const, the input, the mul
    assert recs[0][2] == np.float32(2.0).view(np.uint32)
    from numptx.instructions import TABLE
    assert recs[2][2] == TABLE.index("mul.rn.f32") and list(recs[2][4:6]) == [1, 0]


def test_tapes_written_in_parallel_equal_one_call(monkeypatch):
    import numptx._program.tapes as I
    rng = np.random.default_rng(5)
    rows = rows_for("f32")
    progs = [random_program(rng, "f32", ["a", "b"], rows, 12) for _ in range(1500)]
    one = sp.tapes(progs, {"a": "f32", "b": "f32"}, {"y": "f32"})
    monkeypatch.setattr(I, "_PARALLEL_TAPES", 100)
    many = sp.tapes(progs, {"a": "f32", "b": "f32"}, {"y": "f32"})
    assert np.array_equal(one.words, many.words) and np.array_equal(one.offsets, many.offsets)


def test_interp_types_are_the_generators():
    import importlib.util
    from pathlib import Path
    from numptx._program.interpret import INTERP_TYPES
    path = Path(__file__).resolve().parents[1] / "native" / "gen_interp.py"
    spec = importlib.util.spec_from_file_location("_gen_interp", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert set(INTERP_TYPES) == set(mod.C_TYPE)
    import numptx.valuetypes as VT
    for t, c in mod.C_TYPE.items():       # one storage size per type, as NumPy's
        size = {"uint8_t": 1, "uint16_t": 2, "float": 4, "int32_t": 4, "uint32_t": 4,
                "double": 8, "int64_t": 8, "uint64_t": 8}[c]
        assert VT.BY_NAME[t].np.itemsize == size, t
