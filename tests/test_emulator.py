"""The stub emulator: the design's stub format, hand-written stubs, literals of every type,
vector operands (mma over whole warps), errors with line numbers, broadcasting, special
registers, and every table entry run through a stub."""
from __future__ import annotations

import numpy as np
import pytest

import numptx as nx
from numptx import NumptxError
from numptx import stack_ptx as sp
from numptx.dsl import emulator as E
from numptx.dsl.emulator import EmulationError, emulate
from numptx.instructions import BUILTIN_ROWS, NP_DTYPE, TABLE, parse_type_spec

RNG = np.random.default_rng(7)
MMA = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"


def bits32(x):
    return np.float32(x).view(np.uint32)


# ------------------------------------------------------------------ the design's stub format
DESIGN_STUB = """{
.reg .f32 %_s0;
.reg .f32 %_s1;
.reg .pred %_s2;
.reg .f32 %_s3;
.reg .f32 %_s4;
mov.f32 %_s0, 0f3F800000;
mul.rn.f32 %_s1, %x, %y;
setp.lt.f32 %_s2, %_s1, %_s0;
add.rn.f32 %_s3, %_s1, %_s0;
selp.f32 %_s4, %_s0, %_s3, %_s2;
mov.f32 %z, %_s4;
}"""


def test_design_format_stub():
    x = np.float32([0.25, 2.0, -3.0, 0.5])
    y = np.float32([2.0, 3.0, 1.0, 3.0])
    out = emulate(DESIGN_STUB, {"x": x, "y": y}, ["z"])
    p = x * y
    np.testing.assert_array_equal(out["z"], np.where(p < 1, np.float32(1), p + 1))
    assert out["z"].dtype == np.float32 and list(out) == ["z"]


def test_hand_written_stub_and_text_attribute():
    class Stub:
        text = "add.ftz.f32 %v_z, %v_x, %v_y;"
    tiny = np.float32(2.0 ** -130)
    out = emulate(Stub(), {"v_x": np.float32([1.5, tiny]), "v_y": np.float32([2.0, 0.0])}, ["v_z"])
    np.testing.assert_array_equal(out["v_z"], np.float32([3.5, 0.0]))
    assert emulate("add.f32 %v_z, %v_x, %v_y;", {"v_x": np.float32([tiny]), "v_y": 0.0},
                   ["v_z"])["v_z"][0] == tiny


def test_multiple_statements_comments_and_blocks():
    stub = """
    // leading comment
    {   .reg .s32 %t; /* block
    comment */ add.s32 %t, %a, 1; mul.lo.s32 %t, %t, %t;
        { sub.s32 %r, %t, %a; }   // nested block
    }
    """
    out = emulate(stub, {"a": np.int32([2, -5])}, ["r"])
    np.testing.assert_array_equal(out["r"], np.int32([7, 21]))


# ------------------------------------------------------------------ literals
@pytest.mark.parametrize("line, t, expected", [
    ("mov.f32 %o, 0f3F800000;", np.float32, 1.0),
    ("mov.f32 %o, 0fBF800000;", np.float32, -1.0),
    ("mov.f32 %o, 0f7FC00000;", np.float32, np.nan),
    ("mov.f32 %o, 1.5;", np.float32, 1.5),
    ("mov.f64 %o, 0d3FF0000000000000;", np.float64, 1.0),
    ("mov.f64 %o, 0dFFF0000000000000;", np.float64, -np.inf),
    ("mov.f64 %o, 0f3F800000;", np.float64, 1.0),
    ("mov.f64 %o, -2.5e3;", np.float64, -2500.0),
    ("mov.b16 %o, 0x3C00;", np.uint16, 0x3C00),
    ("mov.b16 %o, -1;", np.uint16, 0xFFFF),
    ("mov.b32 %o, 0x3C003C00;", np.uint32, 0x3C003C00),
    ("mov.b64 %o, 0x0123456789ABCDEF;", np.uint64, 0x0123456789ABCDEF),
    ("mov.s32 %o, -5;", np.int32, -5),
    ("mov.s32 %o, -2147483648;", np.int32, -2147483648),
    ("mov.s64 %o, -9223372036854775808;", np.int64, -9223372036854775808),
    ("mov.u32 %o, 4294967295;", np.uint32, 4294967295),
    ("mov.u64 %o, 18446744073709551615;", np.uint64, 18446744073709551615),
    ("mov.u32 %o, 5U;", np.uint32, 5),
    ("mov.u32 %o, 017;", np.uint32, 15),
    ("mov.u32 %o, 0b101;", np.uint32, 5),
    ("mov.u32 %o, 0;", np.uint32, 0),
    ("mov.pred %o, 1;", np.bool_, True),
    ("mov.pred %o, 0;", np.bool_, False),
    ("add.s32 %o, %x, 0x10;", np.int32, 17),
    ("add.rn.f32 %o, %xf, 0f40000000;", np.float32, 2.5),
    ("shl.b32 %o, %xb, 4;", np.uint32, 16),
])
def test_literals_of_every_type(line, t, expected):
    out = emulate(line, {"x": 1, "xf": np.float32(0.5), "xb": np.uint32(1)}, ["o"])["o"]
    assert out.dtype == t and out.shape == ()
    if isinstance(expected, float) and np.isnan(expected):
        assert np.isnan(out)
    else:
        assert out == expected


@pytest.mark.parametrize("line, msg", [
    ("mov.f32 %o, 1;", "no integer literal"),
    ("mov.f32 %o, 0f3F8000001;", "bad 0f literal"),
    ("mov.pred %o, 2;", "0 or 1"),
    ("mov.s32 %o, 1.5;", "not a literal"),
    ("mov.u32 %o, 0xZZ;", "not a literal"),
])
def test_bad_literals(line, msg):
    with pytest.raises(EmulationError, match=msg) as ei:
        emulate("{\n" + line + "\n}", {}, ["o"])
    assert ei.value.line == 2 and ei.value.text == line


# ------------------------------------------------------------------ values and types
def test_reinterpretation_rules():
    # a float32 array read as b32 gives its bits; a Python float for a bit type too
    out = emulate("and.b32 %o, %x, %m;", {"x": np.float32([1.0, -2.0]), "m": 0xFFFFFFFF}, ["o"])
    np.testing.assert_array_equal(out["o"], np.float32([1.0, -2.0]).view(np.uint32))
    assert emulate("mov.b32 %o, %x;", {"x": 1.0}, ["o"])["o"] == 0x3F800000
    # Python numbers and lists are values: converted by value for float/int reads
    assert emulate("add.rn.f32 %o, %x, %x;", {"x": 3}, ["o"])["o"] == 6.0
    np.testing.assert_array_equal(emulate("add.rn.f64 %o, %x, %x;", {"x": [1, 2]}, ["o"])["o"],
                                  [2.0, 4.0])
    # a NumPy int64 array read as f64 keeps its bits (same size), as f32 converts the value
    v = np.int64(0x3FF0000000000000)
    assert emulate("add.rn.f64 %o, %x, %x;", {"x": v}, ["o"])["o"] == 2.0
    assert emulate("add.rn.f32 %o, %x, %x;", {"x": np.int64(3)}, ["o"])["o"] == 6.0
    # bf16 operands from Python floats are rounded to bf16
    out = emulate("add.rn.bf16 %o, %x, %y;", {"x": 1.0, "y": 2.0 ** -7 + 2.0 ** -20}, ["o"])
    assert out["o"] == 0x3F81 and out["o"].dtype == np.uint16
    # f16 result in a b16 register comes back as float16; outputs can force a type
    out = emulate("add.rn.f16 %o, %x, %x;", {"x": np.float16(1.5)}, {"o": "b16"})
    assert out["o"] == np.float16(3.0).view(np.uint16) and out["o"].dtype == np.uint16
    out = emulate("add.rn.f16 %o, %x, %x;", {"x": np.float16(1.5)}, ["o"])
    assert out["o"] == 3.0 and out["o"].dtype == np.float16


def test_declared_type_decides_output_dtype():
    # declared at the top level: the site's scope, where outputs are read (not inside { })
    stub = ".reg .b32 %r;\n{\nadd.rn.f32 %r, %x, %x;\n}"
    out = emulate(stub, {"x": np.float32(1.0)}, ["r"])
    assert out["r"].dtype == np.uint32 and out["r"] == 0x40000000


def test_outputs_may_be_inputs_and_keep_their_values():
    out = emulate("add.s32 %acc, %acc, %x;", {"acc": np.int32([1, 2]), "x": np.int32(10)},
                  ["acc", "x", "%acc"])
    np.testing.assert_array_equal(out["acc"], [11, 12])
    np.testing.assert_array_equal(out["x"], [10, 10])
    np.testing.assert_array_equal(out["%acc"], [11, 12])


def test_broadcasting():
    out = emulate("fma.rn.f32 %o, %a, %b, %c;",
                  {"a": np.float32([[1], [2]]), "b": np.float32([1, 2, 3]), "c": 0.5}, ["o"])
    assert out["o"].shape == (2, 3)
    np.testing.assert_array_equal(out["o"], np.float32([[1.5, 2.5, 3.5], [2.5, 4.5, 6.5]]))
    with pytest.raises(EmulationError, match="broadcast"):
        emulate("add.f32 %o, %a, %b;", {"a": np.zeros(3, np.float32), "b": np.zeros(4, np.float32)}, ["o"])


def test_guards_and_pack_unpack():
    stub = """.reg .b16 %lo, %hi;
    {
    .reg .pred %p;
    setp.gt.s32 %p, %x, 0;
    mov.s32 %r, 7;
    @%p mov.s32 %r, %x;
    @!%p add.s32 %q, %x, 100;
    mov.b32 {%lo, %hi}, %w;
    mov.b32 %v, {%hi, %lo};
    mov.b64 %d, {%v, %w};
    }"""
    out = emulate(stub, {"x": np.int32([5, -5]), "w": np.uint32(0x12345678)},
                  ["r", "q", "lo", "hi", "v", "d"])
    np.testing.assert_array_equal(out["r"], [5, 7])
    np.testing.assert_array_equal(out["q"], [0, 95])       # unwritten lanes of a new register: 0
    assert (out["lo"] == 0x5678).all() and (out["hi"] == 0x1234).all()
    assert out["lo"].dtype == np.uint16
    assert (out["v"] == 0x56781234).all() and (out["d"] == 0x1234567856781234).all()


# ------------------------------------------------------------------ special registers
def test_special_registers():
    stub = """{
    mov.u32 %a, %tid.x;
    mov.u32 %b, %laneid;
    mov.u32 %c, %ctaid.x;
    mov.u64 %d, %clock64;
    mov.u32 %e, %ntid.x;
    }"""
    out = emulate(stub, {"x": np.zeros((2, 20))}, ["a", "b", "c", "d", "e"])
    lane = (np.arange(40) % 32).reshape(2, 20)
    np.testing.assert_array_equal(out["a"], lane)
    np.testing.assert_array_equal(out["b"], lane)
    assert (out["c"] == 0).all() and out["c"].dtype == np.uint32
    assert (out["d"] == 0).all() and out["d"].dtype == np.uint64
    out = emulate(stub, {"%tid.x": np.arange(5), "%ntid.x": 128, "%ctaid.x": np.uint32(3)},
                  ["a", "c", "e"])
    np.testing.assert_array_equal(out["a"], np.arange(5))
    assert (out["e"] == 128).all() and (out["c"] == 3).all()
    # the table's own fmt of every special register emulates
    for ins in list(TABLE)[:BUILTIN_ROWS]:
        if ins.is_special:
            regs = ["r"] if ins.result_widths == (1,) else [f"r{k}" for k in range(4)]
            slot = "%r" if len(regs) == 1 else ["%" + r for r in regs]
            got = emulate(ins.render(slot), {"%laneid": np.arange(3)}, regs)
            for r in got.values():
                assert r.dtype == NP_DTYPE[ins.result_types[0]] and r.shape == (3,)


# ------------------------------------------------------------------ mma over a warp
def tf32(x):
    return (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def scatter_warp(A, B, C):
    """Distribute 16x8 A, 8x8 B, 16x8 C over 32 lanes (PTX fragment layout of m16n8k8 tf32)."""
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    a = [A[g, t], A[g + 8, t], A[g, t + 4], A[g + 8, t + 4]]
    b = [B[t, g], B[t + 4, g]]
    c = [C[g, 2 * t], C[g, 2 * t + 1], C[g + 8, 2 * t], C[g + 8, 2 * t + 1]]
    return a, b, c


def gather_warp(d):
    D = np.zeros((16, 8), np.float32)
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1] = d
    return D


MMA_STUB = """.reg .f32 %d<4>;
{
.reg .b32 %a<4>;
.reg .b32 %b<2>;
.reg .f32 %c<4>;
mov.b32 %a0, %A0; mov.b32 %a1, %A1; mov.b32 %a2, %A2; mov.b32 %a3, %A3;
mov.b32 %b0, %B0; mov.b32 %b1, %B1;
mov.f32 %c0, %C0; mov.f32 %c1, %C1; mov.f32 %c2, %C2; mov.f32 %c3, %C3;
""" + MMA + """ {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%c0, %c1, %c2, %c3};
}"""


def test_mma_warp_against_numpy_matmul():
    warps = []
    inputs = {k: [] for k in ("A0", "A1", "A2", "A3", "B0", "B1", "C0", "C1", "C2", "C3")}
    for _ in range(2):                                   # two warps, 64 lanes
        A = (RNG.standard_normal((16, 8)) * 3).astype(np.float32)
        B = (RNG.standard_normal((8, 8)) * 3).astype(np.float32)
        C = (RNG.standard_normal((16, 8))).astype(np.float32)
        a, b, c = scatter_warp(A, B, C)
        for k in range(4):
            inputs[f"A{k}"].append(a[k].view(np.uint32))
            inputs[f"C{k}"].append(c[k])
        for k in range(2):
            inputs[f"B{k}"].append(b[k].view(np.uint32))
        warps.append((A, B, C))
    inputs = {k: np.concatenate(v) for k, v in inputs.items()}
    out = emulate(MMA_STUB, inputs, ["d0", "d1", "d2", "d3"])
    for w, (A, B, C) in enumerate(warps):
        D = gather_warp([out[f"d{k}"][32 * w: 32 * (w + 1)] for k in range(4)])
        ref = tf32(A).astype(np.float64) @ tf32(B).astype(np.float64) + C
        np.testing.assert_allclose(D, ref, rtol=1e-6, atol=1e-5)
        assert not np.allclose(D, A.astype(np.float64) @ B + C, rtol=1e-7, atol=0)  # tf32 matters


def test_mma_needs_whole_warps():
    inputs = {k: np.zeros(40, np.uint32 if k[0] in "AB" else np.float32)
              for k in ("A0", "A1", "A2", "A3", "B0", "B1", "C0", "C1", "C2", "C3")}
    with pytest.raises(EmulationError, match="whole warps") as ei:
        emulate(MMA_STUB, inputs, ["d0"])
    assert ei.value.line == 9


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("body, msg", [
    ("fma.rn.f3 %o, %x, %x, %x;", "unknown instruction 'fma.rn.f3'.*did you mean 'fma.rn.f32'"),
    ("add.f32 %o, %x, %nosuch;", r"register %nosuch is read before it is written"),
    ("add.f32 %o, %x;", "takes 3 operands"),
    ("add.f32 %o %x %x;", "takes 3 operands"),
    ("add.u32 5, %x, %x;", "must be a register"),
    (".global .f32 %g;", "unsupported directive"),
    (".reg .f128 %g;", "unsupported register type"),
    (".reg .f32 g;", "bad register declaration"),
    ("mov.q32 %o, %x;", "unsupported mov type"),
    ("add.f32 %o, {%x, %x}, %x;", "must be a single value"),
    (MMA + " %d, {%a, %a, %a, %a}, {%b, %b}, {%c, %c, %c, %c};", "vector of 4"),
    ("mov.b32 %o, {%x, %x;", "unbalanced"),
    ("mov.b32 %o, {%x, %x, %x};", "cannot pack"),
    ("mov.b16 %o, %x;", "cannot be read as b16"),
    ("cvt.rn.f64.u64 %o, %tid.x;", "%tid.x holds a u32 value and cannot be read as u64"),
])
def test_errors_name_the_line(body, msg):
    stub = "{\n.reg .f32 %t;\nadd.f32 %x, %in, %in;\n" + body + "\n}"
    with pytest.raises(EmulationError, match=msg) as ei:
        emulate(stub, {"in": np.float32(1)}, ["o"])
    err = ei.value
    assert isinstance(err, NumptxError) and err.line == 4 and err.text == body.strip()
    assert "stub line 4" in str(err)


def test_unknown_output_and_bad_inputs():
    with pytest.raises(EmulationError, match="unknown output 'zz'.*did you mean 'z'"):
        emulate("add.f32 %z, %x, %x;", {"x": 1.0}, ["zz"])
    with pytest.raises(EmulationError, match="unknown type"):
        emulate("add.f32 %z, %x, %x;", {"x": 1.0}, {"z": "f33"})
    with pytest.raises(EmulationError, match="numbers or numeric arrays"):
        emulate("add.f32 %z, %x, %x;", {"x": "one"}, ["z"])
    with pytest.raises(EmulationError, match="PTX text"):
        emulate(42, {}, [])


def test_arguments_of_the_wrong_kind_are_named():
    add = "add.f32 %z, %x, %x;"
    for inputs in ([1, 2], (1.0,), "x", 3):
        with pytest.raises(EmulationError, match=f"inputs must be a mapping .*not "
                                                 f"{type(inputs).__name__}"):
            emulate(add, inputs, ["z"])
    for outputs in (5, b"z", 1.5):
        with pytest.raises(EmulationError, match=f"outputs must be register names.*not "
                                                 f"{type(outputs).__name__}"):
            emulate(add, {"x": 1.0}, outputs)
    for outputs in ([5], ["z", None], [""], ["%"], {3: "f32"}):
        with pytest.raises(EmulationError, match="output names must be non-empty strings"):
            emulate(add, {"x": 1.0}, outputs)
    with pytest.raises(EmulationError, match="output 'z': the type is a name such as 'f32'"):
        emulate(add, {"x": 1.0}, {"z": 32})
    with pytest.raises(EmulationError, match="input names must be non-empty strings"):
        emulate(add, {1: 1.0}, ["z"])
    # still accepted: a single name, a tuple or any iterable of names, DSL types in a mapping
    from numptx import f64
    assert emulate(add, {"x": 1.0}, "z")["z"] == 2.0
    assert list(emulate(add, {"x": 1.0}, iter(("z", "x")))) == ["z", "x"]
    assert emulate(add, {"x": 1.0}, {"z": f64})["z"].dtype == np.float64
    assert emulate("mov.f32 %z, 1.0;", None, ["z"])["z"] == 1.0


# ------------------------------------------------------------------ block scoping (PTX's rules)
def test_an_inner_declaration_shadows_the_outer_register_until_its_block_closes():
    stub = """
    mov.f32 %a, 1.0;
    {
        .reg .f32 %a;
        mov.f32 %a, 2.0;
        { .reg .f32 %a; mov.f32 %a, 3.0; mov.f32 %in3, %a; }
        mov.f32 %in2, %a;
    }
    mov.f32 %out1, %a;
    """
    out = emulate(stub, {}, ["a", "in2", "in3", "out1"])
    assert [float(out[k]) for k in ("a", "in2", "in3", "out1")] == [1.0, 2.0, 3.0, 1.0]


def test_a_stub_that_shadows_its_output_leaves_it_unwritten():
    """On the GPU the site's %v_z is never written by this stub (ptxas assembles it): the
    emulator reports the output as unknown and says why, instead of computing a value."""
    stub = "{ .reg .f32 %v_z; add.rn.f32 %v_z, %v_x, %v_y; }"
    ins = {"v_x": np.float32([1]), "v_y": np.float32([2])}
    with pytest.raises(EmulationError, match=r"unknown output 'v_z'.*%v_z is declared inside a "
                                             r"\{ \} block \(stub line 1\), which shadows"):
        emulate(stub, ins, ["v_z"])
    # a shadowed input (or mod) keeps its value: writes go to the inner register
    out = emulate("{ .reg .f32 %v_x; mov.f32 %v_x, 5.0; add.rn.f32 %v_z, %v_x, %v_y; }", ins,
                  ["v_x", "v_z"])
    assert out["v_x"] == 1.0 and out["v_z"] == 7.0


def test_reading_an_inner_register_before_writing_it_is_an_error():
    """The inner register is a fresh one: it does not see the outer input of that name."""
    with pytest.raises(EmulationError, match=r"stub line 2: .*register %x is read before it is "
                                             r"written: it is the one declared in the enclosing"):
        emulate("{\n.reg .f32 %x; add.rn.f32 %z, %x, %x;\n}", {"x": np.float32(1)}, ["z"])


def test_a_declaration_takes_effect_where_it_appears():
    """As in ptxas (tests/test_simulator_checks.py compares the machine code): a write before
    the inner declaration reaches the outer register."""
    out = emulate("{ add.rn.f32 %z, %x, %x; .reg .f32 %z; mov.f32 %z, 1.0; }",
                  {"x": np.float32(3)}, ["z"])
    assert out["z"] == 6.0


def test_guards_and_vector_operands_resolve_in_scope():
    stub = """.reg .pred %p;
    setp.gt.s32 %p, %x, 0;
    {
        .reg .pred %p;
        setp.lt.s32 %p, %x, 0;
        .reg .b16 %lo;
        @%p mov.b32 {%lo, %hi}, %w;
        @%p mov.b16 %neg_lo, %lo;
    }
    @%p mov.s32 %pos, %x;
    """
    out = emulate(stub, {"x": np.int32([5, -5]), "w": np.uint32(0x12345678)},
                  ["neg_lo", "hi", "pos"])
    assert out["neg_lo"].tolist() == [0, 0x5678] and out["hi"].tolist() == [0, 0x1234]
    assert out["pos"].tolist() == [5, 0]


@pytest.mark.parametrize("stub, line, msg", [
    ("{ add.f32 %z, %x, %x; }\n}", 2, "'}' closes no block"),
    ("{\nadd.f32 %z, %x, %x;\n{ mov.f32 %z, %x; }", 1, "'{' is never closed"),
])
def test_unbalanced_braces(stub, line, msg):
    with pytest.raises(EmulationError, match=msg) as e:
        emulate(stub, {"x": 1.0}, ["z"])
    assert e.value.line == line


def test_parse_is_cached():
    E.parse.cache_clear()
    stub = "mul.rn.f32 %z, %x, %x;"
    for k in range(5):
        emulate(stub, {"x": np.float32(k)}, ["z"])
    info = E.parse.cache_info()
    assert info.misses == 1 and info.hits == 4


# ------------------------------------------------------------------ every table entry, via a stub
def _random(t: str, n: int) -> np.ndarray:
    dt = NP_DTYPE[t]
    if t == "pred":
        return RNG.integers(0, 2, n).astype(bool)
    if dt.kind == "f":
        return (RNG.standard_normal(n) * 8).astype(dt)
    if t in ("bf16", "bf16x2", "f16x2", "b16", "b32", "b64") and dt.itemsize >= 2:
        src = (RNG.standard_normal(n * (dt.itemsize // 2)) * 8).astype(np.float32)
        if t.startswith("bf"):
            halves = (src.view(np.uint32) >> 16).astype(np.uint16)
        else:
            halves = src.astype(np.float16).view(np.uint16)
        return halves.view(dt)
    return RNG.integers(np.iinfo(dt).min, np.iinfo(dt).max, n, dtype=dt, endpoint=True)


@pytest.mark.parametrize("name", [r.name for r in list(TABLE)[:BUILTIN_ROWS] if not r.is_special])
def test_every_entry_runs_in_a_stub(name):
    ins = TABLE[name]
    n = 64
    slots, inputs, outs = [], {}, []
    for role, specs in (("r", ins.results), ("a", ins.operands)):
        for j, spec in enumerate(specs):
            t, w = parse_type_spec(spec)
            regs = [f"%{role}{j}_{k}" for k in range(w)]
            slots.append(regs if w > 1 else regs[0])
            for reg in regs:
                if role == "a":
                    inputs[reg[1:]] = _random(t, n)
                else:
                    outs.append(reg[1:])
    got = emulate(ins.render(*slots), inputs, outs)
    args = []
    for j, spec in enumerate(ins.operands):
        t, w = parse_type_spec(spec)
        comps = tuple(inputs[f"a{j}_{k}"] for k in range(w))
        args.append(comps if w > 1 else comps[0])
    ref = ins.apply(*args)
    ref = (ref,) if len(ins.results) == 1 else ref
    for j, (spec, val) in enumerate(zip(ins.results, ref)):
        t, w = parse_type_spec(spec)
        comps = tuple(val) if w > 1 else (val,)
        for k, comp in enumerate(comps):
            g = got[f"r{j}_{k}"]
            if "bitcast" in ins.flags:               # a mov line: the emulator keeps the mov type
                assert g.dtype.itemsize == NP_DTYPE[t].itemsize
                g = g.view(NP_DTYPE[t])
            assert g.dtype == NP_DTYPE[t]
            u = f"u{g.itemsize}"
            bits = (lambda x, u=u: np.asarray(x).view(u)) if g.dtype.kind == "f" else np.asarray
            np.testing.assert_array_equal(bits(g), bits(comp))      # bit for bit (NaNs included)


def test_emulate_at_a_site_takes_special_registers_by_their_names():
    from numptx.jit.compile import nvrtc
    src = r'''extern "C" __global__ void k(float* o, const float* a) {
        float x = a[0], z;
        PTX_INJECT("s", PTX_IN(F32, x), PTX_OUT(F32, z));
        o[0] = z;
    }'''
    site = nx.PtxInject(nvrtc.cuda_to_ptx(src)).sites["s"]
    stub = sp.compile([sp.input("x"), sp.special("%tid.x"), sp.instr("cvt.rn.f32.u32"),
                       sp.instr("add.rn.f32")], site=site)
    got = nx.emulate(stub, {"x": np.float32([1, 2]), "%tid.x": np.uint32([5, 7])}, site=site)
    assert got["z"].tolist() == [6.0, 9.0]
    with pytest.raises(nx.EmulationError, match="go by their names, not their registers: 'x'"):
        nx.emulate(stub, {"%v_x": np.float32([1])}, site=site)


@pytest.mark.parametrize("guard", ["@!%q", "@ !%q", "@ ! %q", "@\t!\t%q"])
def test_guards_written_with_white_space_run_as_ptxas_assembles_them(guard):
    # ptxas takes white space inside a guard; the emulator computes what the build runs
    src = r'''extern "C" __global__ void k(float* o, const float* a) {
        float x = a[threadIdx.x], z;
        PTX_INJECT("s", PTX_IN(F32, x), PTX_OUT(F32, z));
        o[threadIdx.x] = z;
    }'''
    inj = nx.PtxInject(nx.cuda_to_ptx(src, arch="sm_90"))
    stub = ("{ .reg .pred %q; setp.gt.f32 %q, %v_x, 0f00000000; mov.f32 %v_z, 0f3F800000; "
            f"{guard} mov.f32 %v_z, 0fBF800000; }}")
    assert nx.ptx_to_cubin(inj.render({"s": stub}), arch="sm_90")[:4] == b"\x7fELF"
    got = nx.emulate(stub, {"v_x": np.float32([-1, 2])}, {"v_z": "f32"})["v_z"]
    np.testing.assert_array_equal(got, np.float32([-1, 1]))
