"""Stack PTX dialects (issue 16, item 1): ``dialect="mm-ptx"`` runs programs with mm-ptx's
semantics, ``sp.convert`` rewrites programs between the dialects, serialized and encoded
programs remember theirs.

Expected results come from mm-ptx's STACK_PTX.md where it says (rotate: "abc becomes bca",
reverse: "abcd becomes dcba", the first popped value is the first operand) and otherwise from its
source, stack_ptx.h at ee2fa26 (_stack_ptx_ast_run_ptx, _stack_ptx_ast_run_meta, _stack_ptx_ast_run,
_stack_ptx_compile): which meta ops pop the meta stack and when, replace's depth, drop's count,
what a request with no value emits, what counts as a step. The numbers of the meta(2) rows are
the ones issue 16 measured with mm-ptx's own C core."""
from __future__ import annotations

import pickle
import random
import warnings

import numpy as np
import pytest

import numptx as nx
from numptx import stack_ptx as sp
from numptx.stack_ptx import ProgramError, SerializationError

MM, NX = "mm-ptx", "numptx"


# ============================================================================ the stack, by dialect
def stack_after(ops, dialect, n=5, *, limits=None):
    """The u32 stack, top first, after pushing 1..n (n on top) and running ``ops``; read through
    n outputs o0..o4 (the first output pops the top). None: an output the stub leaves unwritten
    (mm-ptx), where numptx writes 0."""
    ins = {f"v{i}": "u32" for i in range(n)} | {f"o{i}": "u32" for i in range(n)}
    outs = {f"o{i}": "u32" for i in range(n)}
    stub = sp.compile([sp.input(f"v{i}") for i in range(n)] + list(ops), ins, outs,
                      dialect=dialect, limits=limits)
    vals = {f"v{i}": np.uint32(i + 1) for i in range(n)}
    vals |= {f"o{i}": np.uint32(99) for i in range(n)}
    got = nx.emulate(stub, vals, list(outs))
    return [None if int(got[o]) == 99 else int(got[o]) for o in outs]


def m(name):
    return getattr(sp, name)("u32")


META_CASES = [
    # ops after 1..5, mm-ptx's stack, numptx's stack
    ("reverse, no meta value", [m("reverse")], [1, 2, 3, 4, 5], [5, 4, 3, 2, 1]),
    ("rotate, no meta value", [m("rotate")], [4, 3, 5, 2, 1], [5, 4, 3, 2, 1]),
    ("drop, no meta value", [m("drop")], [5, 4, 3, 2, 1], [4, 3, 2, 1, 0]),
    ("meta(2) rotate", [sp.meta(2), m("rotate")], [4, 3, 5, 2, 1], [3, 5, 4, 2, 1]),
    ("meta(2) drop", [sp.meta(2), m("drop")], [3, 2, 1, None, None], [4, 3, 2, 1, 0]),
    ("meta(2) replace", [sp.meta(2), m("replace")], [4, 5, 2, 1, None], [4, 3, 5, 1, 0]),
    ("meta(2) yank_dup", [sp.meta(2), m("yank_dup")], [3, 5, 4, 3, 2], [3, 5, 4, 3, 2]),
    ("meta(2) swap_with", [sp.meta(2), m("swap_with")], [3, 4, 5, 2, 1], [3, 4, 5, 2, 1]),
    ("meta(3) reverse", [sp.meta(3), m("reverse")], [1, 2, 3, 4, 5], [3, 4, 5, 2, 1]),
    ("meta(0) replace", [sp.meta(0), m("replace")], [4, 3, 2, 1, None], [5, 3, 2, 1, 0]),
    ("meta(0) swap_with", [sp.meta(0), m("swap_with")], [5, 4, 3, 2, 1], [5, 4, 3, 2, 1]),
    # rotate and reverse take no meta value in mm-ptx: the next drop finds it
    ("meta(2) rotate drop", [sp.meta(2), m("rotate"), m("drop")], [5, 2, 1, None, None],
     [5, 4, 2, 1, 0]),
    ("meta(1) reverse drop", [sp.meta(1), m("reverse"), m("drop")], [2, 3, 4, 5, None],
     [4, 3, 2, 1, 0]),
    # a meta value is consumed even when its op cannot run (mm-ptx); numptx keeps it
    ("yank_dup past the end, then yank_dup", [sp.meta(1), sp.meta(9), m("yank_dup"),
                                              m("yank_dup")], [4, 5, 4, 3, 2], [5, 4, 3, 2, 1]),
    ("swap_with past the end, then swap_with", [sp.meta(1), sp.meta(9), m("swap_with"),
                                                m("swap_with")], [4, 5, 3, 2, 1], [5, 4, 3, 2, 1]),
    ("replace past the end, then drop", [sp.meta(9), m("replace"), m("drop")],
     [5, 4, 3, 2, 1], [4, 3, 2, 1, 0]),
    ("drop of all 5 (needs more), then drop", [sp.meta(1), sp.meta(5), m("drop"), m("drop")],
     [4, 3, 2, 1, None], [3, 2, 1, 0, 0]),
    ("meta(4) drop", [sp.meta(4), m("drop")], [1, None, None, None, None], [4, 3, 2, 1, 0]),
    ("meta(3) reverse rotate", [sp.meta(3), m("reverse"), m("rotate")],
     [2, 3, 1, 4, 5], [3, 4, 5, 2, 1]),
    # the same in both
    ("dup", [m("dup")], [5, 5, 4, 3, 2], [5, 5, 4, 3, 2]),
    ("swap", [m("swap")], [4, 5, 3, 2, 1], [4, 5, 3, 2, 1]),
    ("clear", [m("clear")], [None] * 5, [0] * 5),
    ("meta ops on an empty stack", [m("clear"), m("reverse"), m("rotate"), m("swap"), m("dup")],
     [None] * 5, [0] * 5),
]


@pytest.mark.parametrize("what,ops,want_mm,want_nx", META_CASES, ids=[c[0] for c in META_CASES])
def test_meta_ops_in_both_dialects(what, ops, want_mm, want_nx):
    assert stack_after(ops, MM) == want_mm
    assert stack_after(ops, NX) == want_nx


def test_the_docs_examples_of_mmptx():
    """STACK_PTX.md: rotate "moves the top of the stack two positions down (abc becomes bca)";
    reverse "abcd becomes dcba"; yank_dup/swap_with/replace/drop take their depth from the meta
    stack, and an op without enough values is a no-op."""
    assert stack_after([m("rotate")], MM, n=3) == [2, 1, 3]
    assert stack_after([m("reverse")], MM, n=4) == [1, 2, 3, 4]
    assert stack_after([m("rotate")], MM, n=2) == [2, 1]
    assert stack_after([sp.meta(1), m("swap_with")], MM, n=3) == [2, 3, 1]


def test_full_stack_quirks_of_mmptx():
    """mm-ptx runs yank_dup, swap_with and replace only below its stack size (taking the value
    anyway); an instruction whose results find the stack full drops them (numptx: a no-op)."""
    lim = sp.Limits(stack_capacity=5)
    for op in ("swap_with", "replace", "yank_dup"):
        assert stack_after([sp.meta(1), m(op)], MM, limits=lim) == [5, 4, 3, 2, 1], op
    assert stack_after([sp.meta(1), m("swap_with")], NX, limits=lim) == [4, 5, 3, 2, 1]
    lim = sp.Limits(stack_capacity=1)
    ins, outs = {"v": "f16x2"}, {"lo": "f16", "hi": "f16"}
    prog = [sp.input("v"), sp.instr("unpack.f16.f16x2")]
    mm = sp.compile(prog, ins, outs, dialect=MM, limits=lim)
    assert "mov.b32 {%_s0, %_s1}, %v;" in mm and "mov.b16 %lo, %_s1;" in mm and "%hi" not in mm
    assert any("stack overflowed" in d for d in mm.diagnostics)
    assert sp.compile(prog, ins, outs, dialect=NX, limits=lim).stats["noops"] == 1


# ================================================================================ operand order
def test_operand_order_stubs():
    io = dict(inputs={"in0": "f32", "in1": "f32", "in2": "f32", "p": "pred"},
              outputs={"z": "f32"})
    sub = [sp.input("in0"), sp.input("in1"), sp.instr("sub.f32")]
    assert "sub.f32 %_s0, %in1, %in0;" in sp.compile(sub, **io, dialect=MM)    # as mm-ptx's stub
    assert "sub.f32 %_s0, %in0, %in1;" in sp.compile(sub, **io)
    fma = [sp.input("in0"), sp.input("in1"), sp.input("in2"), sp.instr("fma.rn.f32")]
    assert "fma.rn.f32 %_s0, %in2, %in1, %in0;" in sp.compile(fma, **io, dialect=MM)
    # each operand from its own type's stack: the f32 ones top first
    selp = [sp.input("in0"), sp.input("p"), sp.input("in1"), sp.instr("selp.f32")]
    assert "selp.f32 %_s0, %in1, %in0, %p;" in sp.compile(selp, **io, dialect=MM)
    assert "selp.f32 %_s0, %in0, %in1, %p;" in sp.compile(selp, **io)


def test_vector_operands_and_results_top_first():
    """A vector operand's component 0 is the top (mm-ptx pops operand 0, component 0 first);
    result 0 / component 0 ends on top; a special register pushes .x first (so .w is on top)."""
    ins = {"b": "b32", "a1": "b32", "a0": "b32"} | {f"c{i}": "f32" for i in (3, 2, 1, 0)}
    outs = {f"d{i}": "f32" for i in range(4)}
    mma = sp.instr("mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32")
    prog = [sp.input(n) for n in ins] + [mma]
    mm = sp.compile(prog, ins, outs, dialect=MM)       # pushed last-operand first: in order
    assert "{%_s0, %_s1, %_s2, %_s3}, {%a0, %a1}, {%b}, {%c0, %c1, %c2, %c3};" in mm
    assert "mov.f32 %d0, %_s0;\nmov.f32 %d1, %_s1;" in mm
    nxs = sp.compile(prog, ins, outs)
    assert "{%b, %a1}, {%a0}, {%c3, %c2, %c1, %c0};" in nxs and "mov.f32 %d0, %_s3;" in nxs
    outs = {k: "u32" for k in "abcd"}
    vals = {"%tid.x": np.uint32(1), "%tid.y": np.uint32(2), "%tid.z": np.uint32(3)}
    for dialect in (MM, NX):
        stub = sp.compile([sp.special("%tid")], outputs=outs, dialect=dialect)
        got = nx.emulate(stub, vals, list(outs))
        assert [int(got[k]) for k in "abcd"] == [0, 3, 2, 1], dialect          # .w on top
    two = [sp.const(1.0, "f16"), sp.const(2.0, "f16"), sp.instr("pack.f16x2.f16"),
           sp.instr("unpack.f16.f16x2")]
    outs = {"first": "f16", "second": "f16"}
    for dialect in (MM, NX):
        got = nx.emulate(sp.compile(two, outputs=outs, dialect=dialect), {}, list(outs))
        # mm-ptx: pack takes 2.0 (the top) as its low half; unpack leaves the low half on top.
        # numptx: pack takes 1.0 as the low half; unpack leaves the high half on top. Either
        # way the first output reads 2.0
        halves = [float(np.uint16(got[k]).view(np.float16)) for k in outs]
        assert halves == [2.0, 1.0], dialect


# ============================================================================ unsatisfied requests
def test_an_unsatisfied_request_is_not_written():
    ins, outs = {"x": "f32", "acc": "f32"}, {"z": "f32", "acc": "f32"}
    mm = sp.compile([sp.input("x")], ins, outs, dialect=MM)
    assert mm == "{\nmov.f32 %z, %x;\n}\n"                     # no mov for acc
    assert mm.dialect == MM and mm.unsatisfied == ("acc",)
    assert mm.diagnostics == ("output 'acc' (f32) got no value: left unwritten (mm-ptx dialect: "
                              "the register keeps what it held)",)
    got = nx.emulate(mm, {"x": np.float32(1), "acc": np.float32(7)}, ["z", "acc"])
    assert float(got["acc"]) == 7.0                             # untouched
    nxs = sp.compile([sp.input("x")], ins, outs)
    assert "mov.f32 %_s0, 0f00000000;" in nxs and "mov.f32 %acc, %_s0;" in nxs
    assert nxs.dialect == NX
    with pytest.raises(ProgramError, match="strict compile: output 'acc'.*left unwritten"):
        sp.compile([sp.input("x")], ins, outs, dialect=MM, strict=True)
    assert sp.compile([], ins, outs, dialect=MM) == "{\n}\n"
    many = sp.compile_many([[sp.input("x")], []], ins, outs, dialect=MM)
    assert [s.unsatisfied for s in many] == [("acc",), ("z", "acc")] and many[0].dialect == MM


def _site(*variables):
    from numptx.jit.numba.numba_site import SiteSpec
    from numptx.jit.numba.sim_checks import site_for
    return site_for(SiteSpec("s", tuple(variables)))


def test_an_unwritten_out_variable_is_reported_and_a_mod_passes_through():
    """At a site, an unwritten mod variable keeps its value (mm-ptx's "untouched"); an unwritten
    out variable is undefined in the kernel, which injection's stub check warns of."""
    from numptx.jit.templates.stub_checks import UnwrittenOutputWarning, check_outputs_written
    site = _site(("in", "f32", "x"), ("out", "f32", "z"), ("mod", "f32", "acc"))
    stub = sp.compile([sp.input("x")], site=site, dialect=MM)          # z gets x, acc nothing
    assert stub == "{\nmov.f32 %v_z, %v_x;\n}\n"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_outputs_written(stub, site)                                # acc: a mod, fine
    assert nx.emulate(stub, {"x": 2.0, "acc": 5.0}, site=site) == {"z": 2.0, "acc": 5.0}
    empty = sp.compile([], site=site, dialect=MM)
    with pytest.warns(UnwrittenOutputWarning, match="never writes out variable 'z'"):
        check_outputs_written(empty, site)


# ========================================================================================= limits
def test_the_step_limit_counts_routine_ends_in_mmptx():
    """mm-ptx's routines end in a RETURN word, one step of its execution limit."""
    io = dict(inputs={"a": "f32", "b": "f32"}, outputs={"z": "f32"})
    prog, routines = [sp.routine(0), sp.input("b")], [[sp.input("a")]]
    assert sp.compile(prog, **io, routines=routines, dialect=MM).stats["steps"] == 4
    assert sp.compile(prog, **io, routines=routines).stats["steps"] == 3
    lim = sp.Limits(max_steps=3)
    mm = sp.compile(prog, **io, routines=routines, dialect=MM, limits=lim)
    assert "mov.f32 %z, %a;" in mm and any("step limit" in d for d in mm.diagnostics)
    assert "mov.f32 %z, %b;" in sp.compile(prog, **io, routines=routines, limits=lim)
    ret = [sp.routine(0), sp.input("b")]               # an explicit ret is one step in both
    stub = sp.compile(ret, **io, routines=[[sp.input("a"), sp.ret()]], dialect=MM)
    assert stub.stats["steps"] == 4


def test_load_names_no_type_in_mmptx():
    io = dict(inputs={"a": "f32"}, outputs={"z": "f32"})
    prog = [sp.input("a"), sp.store("f32", 0), sp.load("u32", 0)]
    assert "mov.f32 %z, %a;" in sp.compile(prog, **io, dialect=MM)
    assert sp.compile(prog, **io).unsatisfied == ("z",)


# ======================================================================== encode, dumps, errors
def test_unknown_dialect_is_refused_everywhere():
    prog = [sp.input("a")]
    io = dict(inputs={"a": "f32"}, outputs={"z": "f32"})
    msg = r"unknown dialect 'mmptx'; the dialects are 'numptx', 'mm-ptx'"
    for call in (lambda: sp.compile(prog, **io, dialect="mmptx"),
                 lambda: sp.compile_many([prog], **io, dialect="mmptx"),
                 lambda: sp.encode(prog, dialect="mmptx"),
                 lambda: sp.convert(prog, "mmptx", NX, **io),
                 lambda: sp.convert(prog, NX, "mmptx", **io)):
        with pytest.raises(ProgramError, match=msg):
            call()
    with pytest.raises(SerializationError, match=msg):
        sp.dumps(prog, dialect="mmptx")
    with pytest.raises(SerializationError, match=msg):
        sp.loads(sp.dumps(prog), dialect="mmptx")


def test_serialized_programs_remember_their_dialect():
    prog = [sp.input("a"), sp.input("b"), sp.instr("sub.f32"), sp.meta(2), sp.rotate("f32")]
    mm = sp.dumps(prog, dialect=MM)
    assert sp.loads(mm, dialect=MM) == prog
    assert sp.loads(sp.dumps(prog)) == prog and sp.dumps(prog) == sp.dumps(prog, dialect=NX)
    assert mm[4:8] == b"\x03\x00\x01\x00"                    # format 3, flags = dialect 1
    assert sp.dumps(prog)[4:8] == b"\x02\x00\x00\x00"        # numptx: still format 2
    with pytest.raises(SerializationError, match=r"saved in the mm-ptx dialect, not numptx.*"
                       r"sp.loads\(data, dialect='mm-ptx'\).*sp.convert\(prog, 'mm-ptx', 'numptx'"):
        sp.loads(mm)
    with pytest.raises(SerializationError, match="saved in the numptx dialect, not mm-ptx"):
        sp.loads(sp.dumps(prog), dialect=MM)
    import hashlib
    body = bytearray(mm[:-8])
    body[6] = 9                                              # a dialect this numptx lacks
    with pytest.raises(SerializationError, match="dialect id 9 is unknown"):
        sp.loads(bytes(body) + hashlib.blake2b(bytes(body), digest_size=8).digest(), dialect=MM)


def test_encoded_programs_remember_their_dialect():
    io = dict(inputs={"a": "f32", "b": "f32"}, outputs={"z": "f32"})
    prog = [sp.input("a"), sp.input("b"), sp.instr("sub.f32")]
    enc = sp.encode(prog, dialect=MM)
    assert enc.dialect == MM and pickle.loads(pickle.dumps(enc)).dialect == MM
    assert "%_s0, %b, %a" in sp.compile(enc, **io)                  # runs as mm-ptx
    assert "%_s0, %b, %a" in sp.compile_many([enc, enc], **io)[1]
    assert "%_s0, %b, %a" in sp.compile(np.asarray(enc), **io)      # the marker word travels
    assert sp.encode(prog).dialect is None
    with pytest.raises(ProgramError, match=r"in the mm-ptx dialect \(its marker word, from "
                       r"encode\(dialect=\)\) and is compiled with dialect='numptx'; compile it "
                       r"with dialect='mm-ptx'"):
        sp.compile(enc, **io, dialect=NX)
    with pytest.raises(ProgramError, match="mixes dialects: program 0 is mm-ptx, program 1 is "
                                           "numptx"):
        sp.compile_many([enc, sp.encode(prog, dialect=NX)], **io)
    stub = sp.compile(enc, **io)
    assert pickle.loads(pickle.dumps(stub)).dialect == MM


# ================================================================================== convert
IN_F32 = ("a", "b", "c", "acc", "y")
INS = {n: "f32" for n in IN_F32} | {"n": "u32", "k": "u32", "p": "pred"}
OUTS = {"acc": "f32", "y": "f32", "k": "u32"}         # each is an input too (a mod variable)
INSTRS = ["sub.f32", "div.rn.f32", "fma.rn.f32", "min.f32", "selp.f32", "setp.lt.f32", "sub.u32",
          "mad.lo.u32", "cvt.rn.f32.u32", "cvt.rn.f16.f32", "pack.f16x2.f16", "unpack.f16.f16x2",
          "cvt.f32.f16", "%tid"]
STACKS = ["f32", "u32", "f16", "pred"]
METAS = ["dup", "yank_dup", "swap", "swap_with", "replace", "drop", "clear", "rotate", "reverse"]


def _random_op(rng: random.Random, n_routines: int):
    r = rng.random()
    if r < 0.22:
        return sp.input(rng.choice(list(INS)))
    if r < 0.30:
        return rng.choice([sp.const(rng.choice([1.5, -2.0, 0.25]), "f32"),
                           sp.const(rng.choice([3, 7]), "u32")])
    if r < 0.52:
        return sp.instr(rng.choice(INSTRS))
    if r < 0.64:
        return sp.meta(rng.randrange(6))
    if r < 0.88:
        return getattr(sp, rng.choice(METAS))(rng.choice(STACKS))
    if r < 0.93:
        t = rng.choice(["f32", "u32"])
        return (sp.store if rng.random() < 0.5 else sp.load)(t, rng.randrange(3))
    if r < 0.97 and n_routines:
        return sp.routine(rng.randrange(n_routines))
    return rng.choice([sp.nop(), sp.ret()]) if rng.random() < 0.3 else sp.input("a")


def _random_program(rng: random.Random):
    routines = [[_random_op(rng, 0) for _ in range(rng.randrange(6))]
                for _ in range(rng.randrange(3))]
    return [_random_op(rng, len(routines)) for _ in range(rng.randrange(4, 40))], routines


def _values(rng: np.random.Generator, lanes: int = 8) -> dict:
    vals = {n: rng.normal(size=lanes).astype(np.float32) for n in IN_F32}
    vals |= {"n": rng.integers(0, 50, lanes, dtype=np.uint32),
             "k": rng.integers(0, 50, lanes, dtype=np.uint32), "p": rng.random(lanes) < 0.5,
             "%tid.x": np.arange(lanes, dtype=np.uint32), "%tid.y": np.uint32(2),
             "%tid.z": np.uint32(3)}
    return vals


def _outputs(stub, vals) -> dict:
    got = nx.emulate(stub, vals, list(OUTS))
    return {k: np.asarray(v).view(np.uint32).tolist() for k, v in got.items()}   # NaN-safe


@pytest.mark.parametrize("src,dst", [(MM, NX), (NX, MM)])
def test_convert_computes_the_same_values(src, dst):
    """Random programs (meta ops, several stacks, multi-result and vector rows, slots, routines)
    compiled in ``src``, converted, compiled in ``dst``, and back: the emulator agrees on random
    inputs."""
    rng, nrng = random.Random(16 + len(src)), np.random.default_rng(1)
    checked = 0
    for _ in range(250):
        prog, routines = _random_program(rng)
        want = sp.compile(prog, INS, OUTS, routines=routines, dialect=src)
        ported = sp.convert(prog, src, dst, INS, OUTS, routines=routines)
        got = sp.compile(ported, INS, OUTS, dialect=dst)
        back = sp.compile(sp.convert(ported, dst, src, INS, OUTS), INS, OUTS, dialect=src)
        vals = _values(nrng)
        expect = _outputs(want, vals)
        assert _outputs(got, vals) == expect, (prog, routines, ported)
        assert _outputs(back, vals) == expect, (prog, routines, ported)
        checked += want.stats["noops"] < want.stats["steps"]
    assert checked > 200


def test_convert_examples():
    io = dict(inputs={"a": "f32", "b": "f32", "c": "f32"}, outputs={"z": "f32"})
    a, b, c = sp.input("a"), sp.input("b"), sp.input("c")
    assert sp.convert([a, b, sp.instr("sub.f32")], MM, NX, **io) == \
        [a, b, sp.meta(2), sp.reverse("f32"), sp.instr("sub.f32")]
    assert sp.convert([a, b, sp.instr("sub.f32")], NX, MM, **io) == \
        [a, b, sp.swap("f32"), sp.instr("sub.f32")]
    # mm-ptx's reverse of the whole stack: a depth convert knows from the program
    assert sp.convert([a, b, c, sp.reverse("f32")], MM, NX, **io) == \
        [a, b, c, sp.meta(3), sp.reverse("f32")]
    # meta values go right before the op that takes them; ops that do nothing are left out
    assert sp.convert([a, sp.meta(3), sp.meta(0), b, sp.replace("f32"), sp.drop("f32")], MM, NX,
                      **io) == [a, b, sp.drop("f32")]
    assert sp.convert([a, b, c, sp.meta(2), sp.rotate("f32")], NX, MM, **io) == \
        [a, b, c, sp.swap("f32"), sp.meta(2), sp.swap_with("f32")]
    assert sp.convert([a, b, sp.drop("f32"), sp.drop("f32")], NX, MM, **io) == \
        [a, b, sp.meta(1), sp.drop("f32"), sp.clear("f32"), sp.const(0.0, "f32")]
    # an output numptx sets to zero: mm-ptx gets the zero pushed under the values
    assert sp.convert([], NX, MM, inputs={}, outputs={"z": "f32", "w": "f32"}) == \
        [sp.const(0.0, "f32"), sp.const(0.0, "f32")]
    assert sp.convert([a, sp.meta(1)], NX, MM, **io) == [a]
    assert sp.convert([a, b], MM, MM, **io) == [a, b]
    # what the source never runs is left out (after a top-level ret, past the step limit)
    assert sp.convert([a, sp.ret(), b], MM, NX, **io) == [a]
    assert sp.convert([a, b, c], MM, NX, **io, limits=sp.Limits(max_steps=2)) == [a, b]


def test_convert_passes_an_untouched_mod_variable_through():
    prog = [sp.const(2.0, "f32")]
    site = _site(("in", "f32", "x"), ("mod", "f32", "acc"), ("out", "f32", "z"))
    with pytest.raises(ProgramError, match=r"output 'z' gets no value.*mm-ptx leaves unwritten"):
        sp.convert(prog, MM, NX, site=site)                 # acc gets 2.0, the out z nothing
    site2 = _site(("in", "f32", "x"), ("out", "f32", "z"), ("mod", "f32", "acc"))
    ported = sp.convert(prog, MM, NX, site=site2)            # z gets 2.0, the mod acc nothing
    assert ported == [sp.const(2.0, "f32"), sp.input("acc"), sp.meta(2), sp.reverse("f32")]
    for stub in (sp.compile(prog, site=site2, dialect=MM), sp.compile(ported, site=site2)):
        assert nx.emulate(stub, {"x": 1.0, "acc": 5.0}, ["acc"], site=site2) == {"acc": 5.0}


def test_convert_refuses_what_it_cannot_keep():
    io = dict(inputs={"a": "f32"}, outputs={"z": "f32"})
    a = sp.input("a")
    with pytest.raises(ProgramError, match=r"convert mm-ptx -> numptx: the outputs: output 'z' "
                       r"gets no value.*make it an input too"):
        sp.convert([], MM, NX, **io)
    with pytest.raises(ProgramError, match=r"op 3 \(input\('a'\)\): the f32 stack reaches its "
                       r"capacity \(4\).*stack_capacity"):
        sp.convert([a, a, a, a], NX, MM, **io, limits=sp.Limits(stack_capacity=4))
    with pytest.raises(ProgramError, match=r"op 0 > routine 0 op 1 \(input\('a'\)\): the f32 "
                       r"stack reaches"):
        sp.convert([sp.routine(0)], NX, MM, **io, routines=[[a, a]],
                   limits=sp.Limits(stack_capacity=2))
    with pytest.raises(ProgramError, match=r"takes 5 steps, more than limits.max_steps \(4\).*"
                       r"Limits\(max_steps=5\)"):
        sp.convert([a, a, a, sp.reverse("f32")], MM, NX, **io, limits=sp.Limits(max_steps=4))
    with pytest.raises(ProgramError, match=r"op 0 \(input\('q'\)\): no input named 'q'"):
        sp.convert([sp.input("q")], MM, NX, **io)
    with pytest.raises(ProgramError, match="item 1 is 3, not a Stack PTX op"):
        sp.convert([a, 3], MM, NX, **io)
    enc = sp.encode([a, a, sp.instr("sub.f32")], dialect=MM)
    with pytest.raises(ProgramError, match=r"in the mm-ptx dialect \(its marker word.*\), not numptx"):
        sp.convert(enc, NX, MM, **io)
    assert sp.convert(enc, MM, NX, **io) == [a, a, sp.meta(2), sp.reverse("f32"),
                                             sp.instr("sub.f32")]
