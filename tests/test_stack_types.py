"""User-defined stack types (issue 16, item 3): sp.stack_type / sp.retype through the C core,
constants, meta ops, sites, the emulator, nvJitLink, serialization, and the bad inputs.

Stack types are process-wide (one definition per name), so the types here have names no other
test uses, and what needs a fresh process (an undefined type at load time, the type limit) runs
in one."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import numptx as nx
from numptx import ast_ptx as ap
from numptx import stack_ptx as sp
from numptx.errors import TypeRegistryError
from numptx.instructions import TABLE, InstructionError, parse_type_spec
from numptx.stack_ptx import SerializationError

# the types of this module: name -> register type
TYPES = {"st_word": "u32", "st_bits": "b32", "st_real": "f32", "st_wide": "s64", "st_half": "b16",
         "st_flag": "pred"}


@pytest.fixture(scope="module", autouse=True)
def types():
    rows = {n: sp.stack_type(n, r) for n, r in TYPES.items()}
    for name, src, mapping in (("add.st_word", "add.u32", {"u32": "st_word"}),
                               ("mul.lo.st_word", "mul.lo.u32", {"u32": "st_word"}),
                               ("st_word.to.u32", "bitcast.u32.b32", {"b32": "st_word"}),
                               ("add.st_real", "add.rn.f32", {"f32": "st_real"}),
                               ("xor.st_bits", "xor.b32", {"b32": "st_bits"}),
                               ("setp.lt.st_word", "setp.lt.u32", {"u32": "st_word",
                                                                    "pred": "st_flag"})):
        if name not in TABLE:
            sp.retype(src, mapping, name=name)
    return rows


# ================================================================================ definition
def test_a_stack_type_gets_the_next_id_and_its_registers_facts(types):
    w = types["st_word"]
    assert w.id >= 14 and w.user and w.reg == "u32" and w.base == "u32" and w.bits == 32
    assert sp.stack_type("st_word", "u32") is w                        # again: a no-op
    assert sp.stack_type("st_word", "u32", 32) is w
    assert [t.name for t in sp.stack_types()][-len(TYPES):] == list(TYPES)
    assert types["st_half"].base == "b16" and types["st_wide"].wide
    assert parse_type_spec("st_word[4]") == ("st_word", 4)
    # a site data type of the same name (a CUDA template declares PTX_IN(st_word, x))
    assert nx.get_dtype("st_word").reg == "u32" and nx.get_dtype("st_word").constraint == "r"
    assert nx.get_dtype("st_real").constraint == "f"


@pytest.mark.parametrize("args, msg", [
    (("F32x", "u32"), "lower case"),
    (("9lives", "u32"), "lower case"),
    (("f32", "f32"), "built-in value type 'f32'"),
    (("float", "f32"), "names the built-in type 'f32'"),
    (("half", "b16"), "names the built-in type 'f16'"),
    (("st_x8", "u8"), "not one mov copies"),
    (("st_xh", "f16"), "not one mov copies"),
    (("st_word", "b32"), "already a stack type on .u32"),
    (("st_x", "u32", 8), "no PTX register holds 8-bit values.*u32 registers"),
    (("st_x", "b64", 128), "no PTX register holds 128-bit"),
    (("st_x", "b32", 64), "width=64 but .b32 registers hold 32 bits"),
    (("st_x", "b32", "32"), "must be an int"),
])
def test_bad_definitions_name_the_type_and_the_fix(args, msg):
    with pytest.raises(TypeRegistryError, match=msg) as e:
        sp.stack_type(*args)
    assert f"stack_type({args[0]!r})" in str(e.value)
    assert isinstance(e.value, nx.NumptxError)


def test_a_site_type_on_other_registers_blocks_the_name():
    nx.register_type("st_taken", "b64", "b64", "l")
    with pytest.raises(TypeRegistryError, match="site data type on .b64"):
        sp.stack_type("st_taken", "u32")


@pytest.mark.parametrize("args, msg", [
    (("add.u32", {"u32": "st_wide"}), "u32 holds 32 bits and st_wide 64"),
    (("add.u32", {"u32": "nope"}), "unknown value type 'nope'"),
    (("add.u32", {"f32": "st_real"}), "no f32 operand or result"),
    (("add.u32", {}), "maps type names"),
    (("add.u32", {"u32": "st_word"}), "already has an entry"),
])
def test_bad_retypes(args, msg):
    name = "add.st_word" if msg.startswith("already") else "st_bad_row"
    with pytest.raises(InstructionError, match=msg):
        sp.retype(*args, name=name)


def test_a_retyped_row_shares_the_opcode_the_built_in_row_keeps():
    assert TABLE.by_opcode("add.u32").name == "add.u32"
    assert TABLE["add.st_word"].fmt == TABLE["add.u32"].fmt
    assert TABLE["add.st_word"].operands == ("st_word", "st_word")


# ================================================================================ the C core
def test_constants_take_their_base_types_form():
    outs = {"w": "st_word", "b": "st_bits", "r": "st_real", "s": "st_wide", "h": "st_half"}
    prog = [sp.const(7, "st_word"), sp.const(0xBEEF, "st_bits"), sp.const(1.5, "st_real"),
            sp.const(-2, "st_wide"), sp.const(0xABC, "st_half")]
    st = sp.compile(prog, outputs=outs)
    for line in ("mov.u32 %_s0, 7;", "mov.b32 %_s1, 0x0000BEEF;", "mov.f32 %_s2, 0f3FC00000;",
                 "mov.s64 %_s3, -2;", "mov.b16 %_s4, 0x0ABC;", ".reg .s64 %_s3;",
                 "mov.u32 %w, %_s0;", "mov.b16 %h, %_s4;"):
        assert line in st, (line, st)
    with pytest.raises(sp.ProgramError, match="out of range"):
        sp.const(1 << 32, "st_word")


def test_a_stack_type_is_a_stack_of_its_own():
    # u32 values do not feed an st_word instruction, nor the other way round
    st = sp.compile([sp.const(1, "u32"), sp.const(2, "u32"), sp.instr("add.st_word")],
                    outputs={"z": "st_word"})
    assert "add.u32" not in st and st.stats["noops"] == 1 and st.n_unsatisfied == 1
    st = sp.compile([sp.const(1, "st_word"), sp.const(2, "st_word"), sp.instr("add.u32")],
                    outputs={"z": "u32"})
    assert "add.u32" not in st and st.n_unsatisfied == 1


def test_meta_ops_slots_and_the_emulator_on_a_stack_type():
    prog = [sp.input("a"), sp.input("b"), sp.swap("st_word"), sp.store("st_word", 3),
            sp.dup("st_word"), sp.instr("mul.lo.st_word"), sp.load("st_word", 3),
            sp.instr("add.st_word"), sp.instr("st_word.to.u32")]
    st = sp.compile(prog, inputs={"a": "st_word", "b": "st_word"}, outputs={"z": "u32"})
    a, b = np.uint32([3, 5, 0xFFFFFFFF]), np.uint32([4, 6, 2])
    got = nx.emulate(st, {"a": a, "b": b}, outputs=["z"])["z"]
    # swap -> (b, a): a stored; b * b + a
    np.testing.assert_array_equal(got, (b.astype(np.uint64) ** 2 + a) & 0xFFFFFFFF)


def test_a_stack_type_on_pred_registers():
    prog = [sp.input("a"), sp.input("b"), sp.instr("setp.lt.st_word")]
    st = sp.compile(prog, inputs={"a": "st_word", "b": "st_word"}, outputs={"p": "st_flag"})
    assert "setp.lt.u32 %_s0, %a, %b;" in st and "mov.pred %p, %_s0;" in st


def test_compile_many_encode_decode_and_ast_ptx():
    prog = [sp.input("x"), sp.const(1, "st_word"), sp.instr("add.st_word")]
    io = dict(inputs={"x": "st_word"}, outputs={"y": "st_word"})
    one = sp.compile(prog, **io)
    enc = sp.encode(prog, inputs=["x"])
    assert sp.decode(enc, inputs=["x"]) == prog
    assert list(sp.compile_many([prog, enc], **io)) == [one, one]
    assert str(ap.compile(prog, **io)) == str(one)
    with pytest.raises(ap.ASTError):
        ap.compile(prog[:2] + [sp.instr("add.u32")], **io)


def test_the_mm_ptx_dialect_runs_stack_types_too():
    prog = [sp.const(2, "st_word"), sp.const(9, "st_word"), sp.instr("add.st_word"),
            sp.instr("st_word.to.u32")]
    st = sp.compile(prog, outputs={"z": "u32"}, dialect="mm-ptx")
    assert nx.emulate(st, {}, outputs=["z"])["z"] == 11


def test_an_unknown_type_id_in_words_is_refused():
    bad = np.array([2 | 31 << 8 | 1 << 32], np.uint64)            # CONST of type 31
    with pytest.raises(sp.ProgramError, match="unknown value type id 31"):
        sp.decode(bad)


# ================================================================================ sites, nvJitLink
SRC = r'''
extern "C" __global__ void k(unsigned* out, const unsigned* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned x = a[i], y;
        PTX_INJECT("f", PTX_IN(st_word, x), PTX_OUT(U32, y));
        out[i] = y;
    }
}'''


def test_a_cuda_site_declares_a_stack_type_variable_and_assembles():
    tmpl = nx.CudaTemplate(SRC, entry="k", arch="sm_90", cache=None)
    site = tmpl.sites["f"]
    assert site["x"].dtype == "st_word"
    prog = [sp.input("x"), sp.dup("st_word"), sp.instr("mul.lo.st_word"), sp.const(1, "st_word"),
            sp.instr("add.st_word"), sp.instr("st_word.to.u32")]
    st = sp.compile(prog, site=site)
    v = tmpl.inject(f=st)
    assert len(v.cubin) > 0
    x = np.uint32([0, 3, 70000])
    got = nx.emulate(st, {site["x"].reg: x}, outputs=[site["y"].reg])[site["y"].reg]
    np.testing.assert_array_equal(got, (x.astype(np.uint64) ** 2 + 1).astype(np.uint32))


@pytest.mark.gpu
def test_a_stack_type_kernel_on_the_gpu_matches_the_emulator():
    tmpl = nx.CudaTemplate(SRC, entry="k", arch="sm_90", cache=None)   # H100/H200
    site = tmpl.sites["f"]
    prog = [sp.input("x"), sp.dup("st_word"), sp.instr("mul.lo.st_word"), sp.const(1, "st_word"),
            sp.instr("add.st_word"), sp.instr("st_word.to.u32")]
    st = sp.compile(prog, site=site)
    v = tmpl.inject(f=st)
    x = np.arange(0, 1 << 20, 997, dtype=np.uint32) * np.uint32(4099)
    out = np.zeros_like(x)
    v[(len(x) + 127) // 128, 128](out, x, len(x))
    want = nx.emulate(st, {site["x"].reg: x}, outputs=[site["y"].reg])[site["y"].reg]
    np.testing.assert_array_equal(out, want)


# ================================================================================ serialization
def test_dumps_records_the_stack_types_and_loads_round_trips():
    prog = [sp.input("x"), sp.const(-5, "st_wide"), sp.const(3, "st_word"), sp.drop("st_bits")]
    data = sp.dumps(prog)
    assert data[4:6] == b"\x04\x00"                                 # format 4
    assert sp.loads(data) == prog
    assert sp.dumps([sp.input("x")])[4:6] == b"\x02\x00"            # no stack type: format 2


_CHILD = """
import sys
from numptx import stack_ptx as sp
data = bytes.fromhex(sys.argv[1])
{setup}
try:
    prog = sp.loads(data)
except sp.SerializationError as e:
    print("ERR", e)
else:
    print("OK", prog)
    print("STUB", sp.compile(prog, inputs={{"x": "u32"}}, outputs={{"y": "u32"}}).replace("\\n", "|"))
"""


def _child(data: bytes, setup: str) -> str:
    out = subprocess.run([sys.executable, "-c", _CHILD.format(setup=textwrap.dedent(setup)),
                          data.hex()], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_loads_maps_stack_types_to_this_process_ids_by_name():
    prog = [sp.const(5, "st_word"), sp.const(7, "st_word"), sp.instr("add.st_word"),
            sp.instr("st_word.to.u32")]
    want = sp.compile(prog, inputs={"x": "u32"}, outputs={"y": "u32"}).replace("\n", "|")
    # the child defines another type first and ours in reverse order, so every id differs
    # there; it replays the rows added here, in order (the table hash must match)
    setup = "\nsp.stack_type('other_first', 'b64')\n"
    setup += "".join(f"sp.stack_type({t.name!r}, {t.reg!r})\n" for t in reversed(sp.stack_types()))
    out = _child(sp.dumps(prog), setup + _replay_rows())
    assert out.startswith("OK"), out
    assert f"STUB {want}" in out


def _replay_rows() -> str:
    """Python lines that add this process's added rows to a fresh table, in the same order."""
    from numptx.instructions import BUILTIN_ROWS
    lines = ["from numptx.instructions import Instr, add_instruction"]
    for r in list(TABLE)[BUILTIN_ROWS:]:
        lines.append(f"add_instruction(Instr({r.name!r}, {r.fmt!r}, {r.operands!r}, "
                     f"{r.results!r}, lambda *a: 0, {r.accuracy!r}, "
                     f"frozenset({sorted(r.flags)!r}), {r.min_sm!r}, 'replayed'))")
    return "\n".join(lines) + "\n"


def test_loads_refuses_an_undefined_or_different_stack_type():
    data = sp.dumps([sp.const(5, "st_word")])
    out = _child(data, "")
    assert "ERR" in out and "stack type 'st_word' (.u32 registers)" in out \
        and "sp.stack_type('st_word', 'u32')" in out
    out = _child(data, "sp.stack_type('st_word', 'b32')")
    assert "ERR" in out and "on .u32 registers, this process's on .b32" in out


def test_corrupted_stack_type_sections_are_refused():
    import hashlib
    data = sp.dumps([sp.const(5, "st_word")])
    body = bytearray(data[:-8])
    i = body.index(b"st_word") - 2                   # the saved id byte
    body[i] = 3                                      # a built-in type's id
    bad = bytes(body) + hashlib.blake2b(bytes(body), digest_size=8).digest()
    with pytest.raises(SerializationError, match="no user stack type"):
        sp.loads(bad)
    short = bytes(body[:i + 3])
    with pytest.raises(SerializationError):
        sp.loads(short + hashlib.blake2b(short, digest_size=8).digest())


# ================================================================================ the limit
def test_the_type_limit_and_the_last_id_compile():
    code = """
    from numptx import stack_ptx as sp
    from numptx.errors import TypeRegistryError
    rows = [sp.stack_type(f"t{i}", "u32") for i in range(sp.MAX_USER_TYPES)]
    last = rows[-1]
    st = sp.compile([sp.const(3, last.name), sp.dup(last.name)], outputs={"a": last.name,
                    "b": last.name})
    assert "mov.u32 %a, %_s0;" in st and "mov.u32 %b, %_s0;" in st, st
    try:
        sp.stack_type("one_more", "u32")
    except TypeRegistryError as e:
        print("LIMIT", last.id, e)
    """
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("LIMIT 31 ") and "at most 18 stack types" in out.stdout


# ================================================================================ review fixes
@pytest.mark.parametrize("row, mapping", [
    ("add.u32", {"u32": "st_real"}),            # an integer add on f32 registers
    ("add.rn.f32", {"f32": "st_word"}),         # a float add on u32 registers
    ("%laneid", {"u32": "st_real"}),            # mov.u32 into an f32 register
    ("add.s32", {"s32": "st_real"}),
])
def test_retype_refuses_what_ptxas_refuses(row, mapping):
    with pytest.raises(InstructionError, match="ptxas does not let it take"):
        sp.retype(row, mapping, name="st_refused")
    assert "st_refused" not in TABLE


def test_retype_takes_what_ptxas_takes():
    # a bit type takes any register of its size; signed and unsigned integers trade places
    from numptx.valuetypes import ptx_compatible
    assert ptx_compatible("b32", "f32") and ptx_compatible("u32", "b32")
    assert ptx_compatible("s32", "u32") and not ptx_compatible("u32", "f32")
    assert not ptx_compatible("f16", "u16") and not ptx_compatible("pred", "b32")


def test_the_emulator_refuses_a_register_type_an_instruction_cannot_take():
    bad = ".reg .f32 %r;\nadd.u32 %r, %a, %b;\nmov.b32 %z, %r;"
    with pytest.raises(nx.EmulationError, match=r"%r is declared \.f32.*\.u32"):
        nx.emulate(bad, {"a": np.uint32(1), "b": np.uint32(2)}, outputs=["z"])
    with pytest.raises(nx.EmulationError, match="the destination of mov.u32"):
        nx.emulate(".reg .f32 %r;\nmov.u32 %r, %laneid;\nmov.b32 %z, %r;", {}, outputs=["z"])
    ok = ".reg .b32 %r;\nadd.u32 %r, %a, %b;\nmov.u32 %z, %r;"
    assert nx.emulate(ok, {"a": np.uint32(1), "b": np.uint32(2)}, outputs=["z"])["z"] == 3
    # and nvJitLink agrees: the refused form does not assemble
    with pytest.raises(nx.LinkError):
        nx.ptx_to_cubin(_kernel_ptx(bad), arch="sm_90")
    assert nx.ptx_to_cubin(_kernel_ptx(ok), arch="sm_90")


def _kernel_ptx(body: str) -> str:
    return (".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n"
            ".reg .u32 %a, %b, %z;\n.reg .u64 %q;\nmov.u32 %a, 1;\nmov.u32 %b, 2;\n{\n" + body
            + "\n}\nld.param.u64 %q, [p];\nst.global.u32 [%q], %z;\nret;\n}\n")


def test_a_site_type_that_becomes_a_stack_type_is_compiled_as_the_stack_type():
    nx.register_type("st_late", "u32", "u32", "r")
    io = dict(inputs={"x": "st_late"}, outputs={"y": "st_late"})
    assert "mov.u32 %y, %x;" in sp.compile([sp.input("x")], **io)     # the u32 stack, for now
    sp.stack_type("st_late", "u32")
    sp.retype("add.u32", {"u32": "st_late"}, name="add.st_late")
    st = sp.compile([sp.input("x"), sp.input("x"), sp.instr("add.st_late")], **io)
    assert "add.u32 %_s0, %x, %x;" in st                 # the same io, now the stack type's


def test_a_cast_site_type_of_the_name_is_kept():
    nx.register_type("st_cast", "u32", "u32", "r", "*(unsigned int*)&")
    row = sp.stack_type("st_cast", "u32")
    assert row.user and nx.get_dtype("st_cast").mode == "cast"


def test_long_names_and_rows_outside_the_table_are_refused_clearly():
    with pytest.raises(TypeRegistryError, match="at most 64"):
        sp.stack_type("x" * 65, "u32")
    with pytest.raises(SerializationError, match="op 1 runs instruction row 60000"):
        sp.dumps([sp.const(1, "u32"), sp.Op(4, 60000 << 16)])


def test_the_rows_stack_types_are_recorded_too():
    """A program that reaches a stack type only through a row (no typed word) still names it,
    so loading it where the type is on other registers is refused."""
    data = sp.dumps([sp.input("x"), sp.instr("st_word.to.u32")])
    assert data[4:6] == b"\x04\x00" and b"st_word" in data
    assert sp.loads(data) == [sp.input("x"), sp.instr("st_word.to.u32")]


def test_a_pickled_encoding_maps_its_stack_types_by_name_in_another_process():
    import pickle
    enc = sp.encode([sp.const(-5, "st_wide"), sp.const(9, "st_word")])
    blob = pickle.dumps(enc).hex()
    code = f"""
    import pickle, sys
    from numptx import stack_ptx as sp
    sp.stack_type("other_first", "b64")
    sp.stack_type("st_word", "u32")
    sp.stack_type("st_wide", "s64")
    enc = pickle.loads(bytes.fromhex({blob!r}))
    print(sp.compile(enc, outputs={{"a": "st_word", "b": "st_wide"}}).replace("\\n", "|"))
    """
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "mov.s64 %_s0, -5;|mov.u32 %_s1, 9;|mov.u32 %a, %_s1;|mov.s64 %b, %_s0;" in \
        out.stdout, out.stdout
    code = f"""
    import pickle
    from numptx import stack_ptx as sp
    try:
        pickle.loads(bytes.fromhex({blob!r}))
    except sp.ProgramError as e:
        print("ERR", e)
    """
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=120)
    assert "ERR unpickling an encoded program: the program uses the stack type" in out.stdout, \
        out.stdout + out.stderr


def test_the_simulator_copies_bits_into_a_stack_type_site_as_the_gpu_build_does(tmp_path):
    from conftest import run_script
    src = """
    import numpy as np, numptx as nx
    from numptx import stack_ptx as sp
    from numba import cuda
    sp.stack_type("sim_real", "f32")

    @nx.kernel
    def k(out, a):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = nx.site("f", x=(a[i], "sim_real"), out={"y": nx.u32})

    v = k.inject(f="mov.b32 %v_y, %v_x;")
    out = np.zeros(2, np.uint32)
    v[1, 2](out, np.array([1, 2], np.int32))           # an int32's bits, not 1.0's
    assert out.tolist() == [1, 2], out
    try:
        v[1, 2](out, np.array([1, 2], np.uint16))
    except nx.SiteError as e:
        assert "copies bits and needs a 32-bit value" in str(e)
        print("SIM-OK")
    """
    run_script(tmp_path, textwrap.dedent(src), simulator=True, marker="SIM-OK")


def test_a_pred_stack_type_is_no_site_type_and_says_so():
    with pytest.raises(TypeRegistryError, match="no site variable carries"):
        nx.get_dtype("st_flag")


# ================================================================================ second review
_LINKS = [
    # (stub, assembles?) - each checked with nvJitLink here, and the emulator must agree
    (".reg .u16 %h;\n.reg .b16 %o;\nmov.b16 %h, 0x3C00;\nadd.rn.f16 %o, %h, %h;\n"
     "mov.b32 %z, {%o, %o};", False),                       # f16 wants .b16/.f16, not .u16
    (".reg .b32 %r;\n.reg .f32 %f, %g;\nmov.b32 %f, %a;\ncvt.rn.f16.f32 %r, %f;\n"
     "cvt.f32.f16 %g, %r;\nmov.b32 %z, %g;", True),         # cvt: a wider bit register
    (".reg .s64 %d;\n.reg .f32 %f;\nmov.f32 %f, 0f40400000;\ncvt.rni.s32.f32 %d, %f;\n"
     "cvt.rn.f32.s32 %f, %d;\nmov.b32 %z, %f;", True),      # cvt: a wider integer register
    (".reg .b16 %h;\nmov.b16 %h, 0x1ff;\ncvt.u32.u8 %z, %h;", True),
    (".reg .u32 %t;\n.reg .f32 %f;\nmov.b32 %f, %a;\ncvt.rna.tf32.f32 %t, %f;\nmov.u32 %z, %t;",
     False),                                                # tf32 wants .b32 exactly
    (".reg .b32 %t;\n.reg .bf16 %h;\nmov.b32 %t, %a;\nmov.b32 %z, %t;", False),   # no .bf16 regs
    (".reg .b32 %p;\nmov.b32 %p, %a;\n@%p mov.u32 %z, 1;", False),               # guard: pred
    (".reg .b16 %h0, %h1;\nmov.b16 %h0, 1;\nmov.b16 %h1, 2;\nmov.u32 %z, {%h0, %h1};", False),
    (".reg .u16 %h0, %h1;\nmov.u16 %h0, 1;\nmov.u16 %h1, 2;\nmov.b32 %z, {%h0, %h1};", True),
]


@pytest.mark.parametrize("stub, links", _LINKS)
def test_the_emulator_accepts_what_nvjitlink_assembles(stub, links):
    try:
        nx.ptx_to_cubin(_kernel_ptx(stub), arch="sm_90")
        built = True
    except nx.LinkError:
        built = False
    assert built == links, "the expectation is nvJitLink's"
    try:
        nx.emulate(stub, {"a": np.uint32(0x3FC00000)}, outputs=["z"])
        emulated = True
    except nx.EmulationError:
        emulated = False
    assert emulated == links


@pytest.mark.parametrize("row, mapping, ok", [
    ("pack.f16x2.f16", {"f16": "st_half"}, True),          # mov.b32 {..}: any 16-bit parts
    ("bitcast.b32.f32", {"f32": "st_word"}, True),
    ("cvt.rna.tf32.f32", {"b32": "st_word"}, False),       # tf32: .b32 only
    ("cvt.rna.tf32.f32", {"b32": "st_bits"}, True),
    ("cvt.rn.f32.u32", {"u32": "st_word"}, True),
])
def test_retype_follows_the_rows_ptx_types(row, mapping, ok):
    name = f"st_rt_{abs(hash((row, tuple(mapping.items())))) % 10**8}"
    if ok:
        sp.retype(row, mapping, name=name)
        assert name in TABLE
    else:
        with pytest.raises(InstructionError, match="ptxas does not let it take"):
            sp.retype(row, mapping, name=name)


def test_a_pickled_encoding_maps_added_rows_by_name_in_another_process():
    import pickle
    enc = sp.encode([sp.const(3, "st_word"), sp.const(4, "st_word"), sp.instr("add.st_word")])
    blob = pickle.dumps(enc).hex()
    code = f"""
    import pickle
    from numptx import stack_ptx as sp
    sp.stack_type("st_word", "u32")
    sp.retype("mul.lo.u32", {{"u32": "st_word"}}, name="mul.lo.st_word")   # another order
    sp.retype("add.u32", {{"u32": "st_word"}}, name="add.st_word")
    enc = pickle.loads(bytes.fromhex({blob!r}))
    print(sp.decode(enc))
    """
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "instr('add.st_word')" in out.stdout, out.stdout


def test_a_pickled_view_that_starts_in_a_payload_still_pickles():
    import pickle
    e = sp.encode([sp.const(0xFF02, "u64")])[1:]
    assert pickle.loads(pickle.dumps(e)).tolist() == [0xFF02]
