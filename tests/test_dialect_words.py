"""The mm-ptx dialect after review (issue 16, item 1): the dialect travels in the words (a
marker word), routines and batches resolve it, convert refuses what its depth replay cannot
follow, compiled mm-ptx stubs go through the unwritten-output check, mm-ptx's one capacity."""
from __future__ import annotations

import io
import pickle
import warnings

import numpy as np
import pytest

from numptx import ast_ptx, stack_ptx as sp
from numptx._native import lib
from numptx._program.ops import marker_dialect
from numptx.jit.numba.numba_site import SiteSpec
from numptx.jit.numba.sim_checks import site_for
from numptx.jit.templates.stub_checks import UnwrittenOutputError, UnwrittenOutputWarning
from numptx.jit.templates.stubs import resolve_stub
from numptx.stack_ptx import ProgramError

MM, NX = "mm-ptx", "numptx"
IO = dict(inputs={"a": "f32", "b": "f32"}, outputs={"z": "f32"})
SUB = [sp.input("a"), sp.input("b"), sp.instr("sub.f32")]
MM_SUB, NX_SUB = "sub.f32 %_s0, %b, %a;", "sub.f32 %_s0, %a, %b;"     # b - a, a - b


def _warnings(fn):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        fn()
    return [w.category for w in got]


# ======================================================== 1. compiled mm-ptx stubs are checked
def test_compiled_mm_ptx_stubs_warn_of_an_unwritten_out_variable():
    site = site_for(SiteSpec("s", (("in", "f32", "x"), ("mod", "u32", "acc"),
                                   ("out", "f32", "z"))))
    empty = sp.compile([], site=site, dialect=MM)          # z and acc left unwritten
    assert _warnings(lambda: resolve_stub(empty, site)) == [UnwrittenOutputWarning]
    with pytest.raises(UnwrittenOutputError, match=r"never writes out variable 'z'") as e:
        resolve_stub(empty, site, strict=True)
    assert e.value.variables == ("z",)                     # a mod variable may stay unwritten
    z_only = sp.compile([sp.input("x")], site=site, dialect=MM)   # acc unwritten: fine
    assert z_only.unsatisfied and _warnings(lambda: resolve_stub(z_only, site, strict=True)) == []
    assert _warnings(lambda: resolve_stub(sp.compile([], site=site), site, strict=True)) == []
    # programs compiled on the way (encoded, or an op list starting with the marker op)
    for prog in (sp.encode([], site=site, dialect=MM), [sp.dialect_marker(MM)]):
        assert _warnings(lambda: resolve_stub(prog, site)) == [UnwrittenOutputWarning]
        with pytest.raises(UnwrittenOutputError):
            resolve_stub(prog, site, strict=True)
    # a stub compiled for other outputs writes none of the site's
    other = sp.compile([sp.input("x")], inputs={"x": "f32"}, outputs={"w": "f32"}, dialect=MM)
    with pytest.raises(UnwrittenOutputError, match="'z'"):
        resolve_stub(other, site, strict=True)


# ============================================================= 2. convert and the node limit
def test_convert_refuses_a_source_that_hits_the_node_limit():
    lim = sp.Limits(max_nodes=2)             # a, b: two nodes; the sub is a no-op in the source
    assert sp.compile(SUB, **IO, dialect=MM, limits=lim).diagnostics[0].startswith(
        "DAG node limit reached")
    for src, dst in ((MM, NX), (NX, MM)):
        with pytest.raises(ProgramError, match=rf"convert {src} -> {dst}: op 2 \(instr\('sub.f32'\)"
                           rf"\) hits the DAG node limit \(limits.max_nodes = 2\).*max_nodes="):
            sp.convert(SUB, src, dst, **IO, limits=lim)
    assert sp.convert(SUB, MM, NX, **IO, limits=sp.Limits(max_nodes=3))     # within it: fine


# ========================================================= 3. the dialect travels in the words
def test_the_dialect_marker_travels_with_the_words():
    enc = sp.encode(SUB, dialect=MM)
    assert marker_dialect(int(enc[0])) == 1 and len(enc) == 4
    assert int(enc[0]) == 0x4E584401_D1A10000          # native/stack_ptx.h STACKPTX_MARKER_WORD(1)
    buf = io.BytesIO()
    np.save(buf, enc)
    buf.seek(0)
    copies = [np.asarray(enc), enc.view(np.ndarray), np.concatenate([enc, np.zeros(1, np.uint64)]),
              np.stack([enc, enc])[1], np.load(buf), pickle.loads(pickle.dumps(np.asarray(enc))),
              sp.encode(sp.decode(enc))]
    for w in copies:
        assert type(w) is not list and MM_SUB in sp.compile(w, **IO)
    assert [s.dialect for s in sp.compile_many([np.asarray(enc)] * 3, **IO)] == [MM] * 3
    # step counts do not see the marker
    assert sp.compile(enc, **IO).stats == sp.compile(SUB, **IO, dialect=MM).stats
    # decode: the marker as an op, so the list keeps the dialect and encodes back to the words
    ops = sp.decode(enc)
    assert ops == [sp.dialect_marker(MM), *SUB] and repr(ops[0]) == "dialect_marker('mm-ptx')"
    assert (sp.encode(ops) == enc).all() and sp.encode(ops).dialect == MM
    assert MM_SUB in sp.compile(ops, **IO) and MM_SUB in sp.compile_many([ops], **IO)[0]
    # Encoded.dialect follows the words; numptx encodings carry no marker
    assert enc.dialect == MM and enc[1:].dialect is None
    assert (sp.encode(SUB, dialect=NX) == sp.encode(SUB)).all()
    assert sp.encode(SUB, dialect=NX).dialect == NX and sp.encode(SUB).dialect is None
    with pytest.raises(ProgramError, match=r"dialect_marker\('mm-ptx'\) and dialect='numptx'"):
        sp.encode(ops, dialect=NX)
    # serialized: the header records the marker's dialect; AST PTX refuses it by name
    assert sp.dumps(ops) == sp.dumps(SUB, dialect=MM) and sp.loads(sp.dumps(ops), dialect=MM) == SUB
    with pytest.raises(sp.SerializationError, match="dialect='numptx' contradicts it"):
        sp.dumps(ops, dialect=NX)
    with pytest.raises(ProgramError, match="AST PTX has one dialect.*mm-ptx dialect marker"):
        ast_ptx.compile(enc, **IO)


def test_an_explicit_dialect_that_contradicts_the_marker_is_refused():
    enc = sp.encode(SUB, dialect=MM)
    for prog in (enc, np.asarray(enc), sp.decode(enc)):
        with pytest.raises(ProgramError, match=r"compile: the program is in the mm-ptx dialect "
                           r"\(its marker word.*dialect='numptx'.*dialect='mm-ptx'"):
            sp.compile(prog, **IO, dialect=NX)
    with pytest.raises(ProgramError, match=r"compile_many: program 1 is in the mm-ptx dialect "
                       r"\(encode\(dialect=\); mm-ptx: its marker word\).*dialect='numptx'"):
        sp.compile_many([SUB, np.asarray(enc)], **IO, dialect=NX)
    with pytest.raises(ProgramError, match=r"program 0 is in the numptx dialect.*dialect='mm-ptx'"):
        sp.compile_many([sp.encode(SUB, dialect=NX)], **IO, dialect=MM)
    assert MM_SUB in sp.compile(enc, **IO, dialect=MM)


# ===================================================================== 4. routines' dialect
def test_the_routines_dialect_is_resolved_and_checked():
    call = [sp.routine(0)]
    mm_routine = sp.encode(SUB, dialect=MM)
    assert MM_SUB in sp.compile(call, **IO, routines=[mm_routine])        # runs as mm-ptx
    assert MM_SUB in sp.compile(call, **IO, routines=[mm_routine.tobytes()])
    assert MM_SUB in sp.compile_many([call, call], **IO, routines=[mm_routine])[1]
    assert sp.compile(call, **IO, routines=[mm_routine]).stats == \
        sp.compile(call, **IO, routines=[SUB], dialect=MM).stats           # marker stripped
    with pytest.raises(ProgramError, match=r"compile: routine 0 is in the mm-ptx dialect, "
                       r"dialect='numptx' in numptx"):
        sp.compile(call, **IO, routines=[mm_routine], dialect=NX)
    with pytest.raises(ProgramError, match=r"routine 1 is in the numptx dialect, the program in "
                       r"mm-ptx"):
        sp.compile(sp.encode(call, dialect=MM), **IO,
                   routines=[SUB, sp.encode(SUB, dialect=NX)])
    with pytest.raises(ProgramError, match=r"routine 1 is in the numptx dialect, routine 0 in "
                       r"mm-ptx"):
        sp.compile(call, **IO, routines=[mm_routine, sp.encode(SUB, dialect=NX)])
    with pytest.raises(ProgramError, match=r"compile_many: routine 0 is in the mm-ptx dialect"):
        sp.compile_many([call], **IO, routines=[mm_routine], dialect=NX)
    # convert runs the routines in the source dialect, and refuses one of the other
    got = sp.convert(call, MM, NX, **IO, routines=[mm_routine])
    assert MM_SUB in sp.compile(got, **IO)          # b - a, as numptx ops
    with pytest.raises(ProgramError, match=r"convert: routine 0 is in the mm-ptx dialect, the "
                       r"source \(numptx\) in numptx"):
        sp.convert(call, NX, MM, **IO, routines=[mm_routine])


# ============================================================================= 5. batches
def test_a_batch_takes_one_dialect():
    enc = sp.encode(SUB, dialect=MM)
    assert [NX_SUB in s for s in sp.compile_many([SUB, SUB], **IO)] == [True, True]
    assert [MM_SUB in s for s in sp.compile_many([SUB, enc], **IO, dialect=MM)] == [True, True]
    with pytest.raises(ProgramError, match=r"mixes dialects: program 0 is mm-ptx, program 1 is "
                       r"numptx \(none given: numptx\)"):
        sp.compile_many([enc, SUB], **IO)
    with pytest.raises(ProgramError, match=r"program 0 is numptx \(none given: numptx\), "
                       r"program 2 is mm-ptx"):
        sp.compile_many([np.asarray(sp.encode(SUB)), SUB, enc], **IO)
    with pytest.raises(ProgramError, match="program 0 is numptx, program 1 is mm-ptx"):
        sp.compile_many([sp.encode(SUB, dialect=NX), enc], **IO)
    stubs = sp.compile_many([enc, enc[:1], enc], **IO)          # a bare marker: an empty program
    assert [s.dialect for s in stubs] == [MM] * 3 and stubs[1] == "{\n}\n"
    with pytest.raises(ProgramError, match="program 0 is mm-ptx, program 3 is numptx"):
        sp.compile_many([enc, enc, enc, []], **IO)          # [] carries none: numptx
    assert sp.compile_many([enc, []], **IO, dialect=MM)[1].dialect == MM


# ================================================================ 6. mm-ptx's one capacity
def test_mm_ptx_sizes_the_meta_stack_like_the_stacks():
    prog = [sp.meta(1)] * 3 + [sp.input("a")]
    over = "the meta stack overflowed"
    assert over in sp.compile(prog, **IO, dialect=MM, limits=sp.Limits(stack_capacity=2)).diagnostics
    assert over not in sp.compile(prog, **IO, limits=sp.Limits(stack_capacity=2)).diagnostics
    both = sp.Limits(stack_capacity=2, meta_capacity=8)
    assert over not in sp.compile(prog, **IO, dialect=MM, limits=both).diagnostics
    assert sp.Limits(stack_capacity=2) == sp.Limits(stack_capacity=2, meta_capacity=256)
    assert pickle.loads(pickle.dumps(sp.Limits(stack_capacity=2)))._given == {"stack_capacity"}


def test_mm_ptx_outputs_that_alias_inputs_read_the_inputs_before_any_write():
    """The row of docs/dialects.md: mm-ptx's own core writes the output movs one after another
    (mov %a, %b; mov %b, %a), numptx copies a clobbered input first in both dialects."""
    io2 = dict(inputs={"a": "f32", "b": "f32"}, outputs={"a": "f32", "b": "f32"})
    stub = sp.compile([sp.input("a"), sp.input("b")], **io2, dialect=MM)
    assert stub == "{\n.reg .f32 %_s0;\nmov.f32 %_s0, %a;\nmov.f32 %a, %b;\nmov.f32 %b, %_s0;\n}\n"


# ===================================================================================== 7. ABI
def test_the_c_core_abi_version():
    assert lib.STACKPTX_ABI_VERSION == 3


def test_an_unknown_input_is_named_at_its_index_in_a_marked_array():
    """The marker word is stripped before the C core runs; the error still counts it, so the
    index names the word in the array the user holds (word 2 here: marker, x, q)."""
    w = sp.encode([sp.input("x"), sp.input("q")], inputs=["x", "q"], dialect="mm-ptx")
    for prog in (w, np.asarray(w)):
        with pytest.raises(sp.ProgramError, match=r"^program: word 2 reads"):
            sp.compile(prog, inputs={"x": "f32"}, outputs={"y": "f32"})
    with pytest.raises(sp.ProgramError, match=r"program 0: word 2 reads"):
        sp.compile_many([np.asarray(w)], inputs={"x": "f32"}, outputs={"y": "f32"})
    plain = sp.encode([sp.input("x"), sp.input("q")], inputs=["x", "q"])
    with pytest.raises(sp.ProgramError, match=r"^program: word 1 reads"):
        sp.compile(np.asarray(plain), inputs={"x": "f32"}, outputs={"y": "f32"})
