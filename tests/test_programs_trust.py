"""Stack PTX programs that must not compute something else without a word (issue 22, items 4, 5,
11, 18 and the dialects.md fence of item 15).

- A compile without ``outputs=`` (item 4): ``strict=True`` raises naming the fix; otherwise a
  program that computes values warns (:class:`numptx.stack_ptx.NoOutputsWarning`).
- ``sp.convert`` under the DAG node limit (item 5): the converted program is refused with an
  error naming the limit, or computes what the source computes under the same ``Limits``
  (checked on random programs and random limits through the emulator).
- INPUT words bind by the CRC-32 of the input name (item 11): an encoding that remembers its
  names (``Encoded.inputs``) refuses to bind a word to another input with the same tag
  (random names, the known pair ``s6l6mwll``/``ovbiasnc`` and pairs found by a birthday search).
- The mm-ptx dialect reads a vector special register as mm-ptx does (item 18): a scalar
  ``mov.u32`` per component it uses, ``%tid.w`` included, so its stub computes what mm-ptx's
  own stub computes (the stubs below, from mm-ptx's C core at ee2fa26); ``.w`` reads 0 in the
  emulator and the simulator, as on a GPU, whichever way a stub reads it.
- Review: a site with no out or mod variable is "no outputs" too; the simulator runs
  ``sp.encode`` arrays as the GPU build does; compile_many's name check on batches.
"""
from __future__ import annotations

import os
import random
import re
import warnings
import zlib

import numpy as np
import pytest

import numptx as nx
from numptx import stack_ptx as sp
from numptx.stack_ptx import NoOutputsWarning, ProgramError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MM, NX = "mm-ptx", "numptx"


# ============================================================================ item 4: no outputs
ADD1 = [sp.input("x"), sp.const(1.0, "f32"), sp.instr("add.f32")]


def test_strict_compile_without_outputs_raises_naming_the_fix():
    for call in (lambda: sp.compile(ADD1, inputs={"x": "f32"}, strict=True),
                 lambda: sp.compile(ADD1, {"x": "f32"}, {}, strict=True),
                 lambda: sp.compile_many([ADD1, ADD1], inputs={"x": "f32"}, strict=True)):
        with pytest.raises(ProgramError, match=r"no outputs= .*pass outputs=\{'y': 'f32'\}"):
            call()


def test_compile_without_outputs_warns_when_values_go_nowhere():
    with pytest.warns(NoOutputsWarning, match=r"compile: no outputs=.*stub is empty") as rec:
        stub = sp.compile(ADD1, inputs={"x": "f32"})
    assert stub == "{\n}\n" and rec[0].filename == __file__      # the user's line
    with pytest.warns(NoOutputsWarning, match="compile_many"):
        sp.compile_many([ADD1, []], inputs={"x": "f32"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sp.compile([], inputs={"x": "f32"}) == "{\n}\n"   # nothing computed: quiet
        sp.compile(ADD1, {"x": "f32"}, {"y": "f32"})                # outputs given: quiet
        sp.compile(ADD1, {"x": "f32"}, {"y": "f32"}, strict=True)


def test_a_site_with_no_out_or_mod_variable_is_no_outputs_either():
    """site= whose variables are all inputs gives the same empty stub as no outputs= at all:
    strict=True raised there and warned nowhere before (compile and compile_many)."""
    src = ('extern "C" __global__ void k(const float* a) {\n'
           '  float x = a[0]; PTX_INJECT("only_in", PTX_IN(F32, x));\n}\n')
    site = nx.PtxInject(nx.cuda_to_ptx(src, arch="sm_90")).sites["only_in"]
    for call in (lambda: sp.compile(ADD1, site=site, strict=True),
                 lambda: sp.compile_many([ADD1], site=site, strict=True)):
        with pytest.raises(ProgramError, match=r"site 'only_in' has no out or mod variable.*"
                                               r"PTX_OUT"):
            call()
    with pytest.warns(NoOutputsWarning, match="site 'only_in' has no out or mod") as rec:
        assert sp.compile(ADD1, site=site) == "{\n}\n"
    assert rec[0].filename == __file__
    with pytest.warns(NoOutputsWarning, match="compile_many: site 'only_in'"):
        sp.compile_many([ADD1, []], site=site)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sp.compile([], site=site) == "{\n}\n"              # nothing computed: quiet


# ============================================================================ item 15: the fence
def test_every_code_fence_in_the_docs_stands_on_its_own_line():
    """A fence followed by text (``` An unknown...) opens a block instead of closing one, and
    the rest of the page renders as code."""
    docs = ["README.md"] + [os.path.join("docs", f) for f in sorted(os.listdir(
        os.path.join(ROOT, "docs"))) if f.endswith(".md")]
    for path in docs:
        lines = open(os.path.join(ROOT, path), encoding="utf-8").read().splitlines()
        inside = False
        for no, line in enumerate(lines, 1):
            fence = re.match(r"\s*```(.*)", line)
            if not fence:
                continue
            rest = fence.group(1).strip()
            if inside:
                assert rest == "", f"{path}:{no}: text after a closing fence: {line!r}"
            else:
                assert re.fullmatch(r"[\w+-]*", rest), f"{path}:{no}: {line!r}"
            inside = not inside
        assert not inside, f"{path}: a code block is never closed"


# ============================================================================ item 18: %tid in mm-ptx
# mm-ptx's own stub for [tid, add.u32 x3, return] with requests out0, out1 (stack_ptx.h at
# ee2fa26, tests/stack_ptx_descriptions.json; its %_s1_<7> declaration spelled out)
MMPTX_STUB = """{
.reg .u32 %_s1_0;
.reg .u32 %_s1_1;
.reg .u32 %_s1_2;
.reg .u32 %_s1_3;
.reg .u32 %_s1_4;
.reg .u32 %_s1_5;
.reg .u32 %_s1_6;
mov.u32 %_s1_0, %tid.w;
mov.u32 %_s1_1, %tid.z;
add.u32 %_s1_2, %_s1_0, %_s1_1;
mov.u32 %_s1_3, %tid.y;
add.u32 %_s1_4, %_s1_2, %_s1_3;
mov.u32 %_s1_5, %tid.x;
add.u32 %_s1_6, %_s1_4, %_s1_5;
mov.u32 %out0, %_s1_6;
}
"""
TID_ADDS = [sp.special("tid")] + [sp.instr("add.u32")] * 3
OUTS = {"out0": "u32", "out1": "u32"}


def _run(stub, vals):
    got = nx.emulate(stub, vals, list(OUTS))
    return [int(got[k]) for k in OUTS]


def test_mm_ptx_dialect_reads_a_vector_special_register_as_mm_ptx():
    """Issue 22's case: mm-ptx's stub reads %tid with a scalar mov per component, .w included,
    and leaves out1 unwritten. Its 21 came from an emulator that took %tid.w = 3 as an input;
    a GPU's %tid.w reads 0 (PTX ISA), so both stubs give 5 + 6 + 7 = 18 there, and the
    emulator refuses an input for .w (test_a_vector_special_registers_w_reads_0_as_on_a_gpu)."""
    ours = sp.compile(TID_ADDS, outputs=OUTS, dialect=MM)
    theirs = sp.Stub(MMPTX_STUB, {}, OUTS, dialect=MM)
    assert "mov.v4" not in ours
    for c in "xyzw":
        assert f"%tid.{c};" in ours
    vals = {"%tid.x": np.uint32(5), "%tid.y": np.uint32(6), "%tid.z": np.uint32(7),
            "out1": np.uint32(5)}
    assert _run(theirs, vals) == [18, 5]
    assert _run(ours, vals) == [18, 5] and ours.unsatisfied == ("out1",)
    lanes = {"%tid.x": np.arange(64, dtype=np.uint32), "%tid.y": np.uint32(2),
             "%tid.z": np.uint32(9), "out1": np.uint32(1)}        # .w not given: it reads 0
    assert np.array_equal(nx.emulate(ours, lanes, ["out0"])["out0"],
                          nx.emulate(theirs, lanes, ["out0"])["out0"])
    # numptx's own dialect keeps its one mov.v4.u32 (whose .w is 0)
    assert "mov.v4.u32 {" in sp.compile(TID_ADDS, outputs=OUTS)


# mm-ptx's own stubs, verbatim (stack_ptx.h at ee2fa26 with tests/stack_ptx_descriptions.json,
# compiled with gcc; requests out0, out1; its ".reg .u32 %_s1_<n>;" declarations as it writes them)
_T, _ADD, _SUB = sp.special, sp.instr("add.u32"), sp.instr("sub.u32")
MMPTX_STUBS = [
    ([_T("ctaid"), _ADD],
     "{\n.reg .u32 %_s1_<4>;\nmov.u32 %_s1_0, %ctaid.y;\nmov.u32 %_s1_1, %ctaid.w;\n"
     "mov.u32 %_s1_2, %ctaid.z;\nadd.u32 %_s1_3, %_s1_1, %_s1_2;\nmov.u32 %out0, %_s1_3;\n"
     "mov.u32 %out1, %_s1_0;\n}\n"),
    ([_T("ntid")],
     "{\n.reg .u32 %_s1_<2>;\nmov.u32 %_s1_0, %ntid.z;\nmov.u32 %_s1_1, %ntid.w;\n"
     "mov.u32 %out0, %_s1_1;\nmov.u32 %out1, %_s1_0;\n}\n"),
    ([_T("tid.x"), _T("tid"), _SUB, _SUB],
     "{\n.reg .u32 %_s1_<6>;\nmov.u32 %_s1_0, %tid.x;\nmov.u32 %_s1_1, %tid.w;\n"
     "mov.u32 %_s1_2, %tid.z;\nsub.u32 %_s1_3, %_s1_1, %_s1_2;\nmov.u32 %_s1_4, %tid.y;\n"
     "sub.u32 %_s1_5, %_s1_3, %_s1_4;\nmov.u32 %out0, %_s1_5;\nmov.u32 %out1, %_s1_0;\n}\n"),
    ([_T("nctaid"), _SUB, _SUB, _T("nctaid"), _ADD],
     "{\n.reg .u32 %_s1_<4>;\nmov.u32 %_s1_0, %nctaid.y;\nmov.u32 %_s1_1, %nctaid.w;\n"
     "mov.u32 %_s1_2, %nctaid.z;\nadd.u32 %_s1_3, %_s1_1, %_s1_2;\nmov.u32 %out0, %_s1_3;\n"
     "mov.u32 %out1, %_s1_0;\n}\n"),
    ([_T("tid"), _T("ctaid"), _SUB, _ADD, _SUB],
     "{\n.reg .u32 %_s1_<8>;\nmov.u32 %_s1_0, %tid.w;\nmov.u32 %_s1_1, %ctaid.w;\n"
     "mov.u32 %_s1_2, %ctaid.z;\nsub.u32 %_s1_3, %_s1_1, %_s1_2;\nmov.u32 %_s1_4, %ctaid.y;\n"
     "add.u32 %_s1_5, %_s1_3, %_s1_4;\nmov.u32 %_s1_6, %ctaid.x;\nsub.u32 %_s1_7, %_s1_5, %_s1_6;\n"
     "mov.u32 %out0, %_s1_7;\nmov.u32 %out1, %_s1_0;\n}\n"),
]


@pytest.mark.parametrize("prog,theirs", MMPTX_STUBS)
def test_mm_ptx_dialect_stubs_compute_what_mm_ptxs_own_stubs_compute(prog, theirs):
    """The mm-ptx dialect reads the components mm-ptx's C core reads (no more, no fewer) and
    its stub computes what mm-ptx's computes, unwritten outputs included, on random values."""
    ours = sp.compile(prog, outputs=OUTS, dialect=MM)
    reads = re.compile(r"%(?:n?tid|n?ctaid)\.[xyzw]")
    assert sorted(reads.findall(ours)) == sorted(reads.findall(theirs))
    rng = np.random.default_rng(len(theirs))
    vals = {f"%{r}.{c}": rng.integers(0, 1 << 20, 64, dtype=np.uint32)
            for r in ("tid", "ntid", "ctaid", "nctaid") for c in "xyz"}
    vals |= {"out0": np.uint32(111), "out1": np.uint32(222)}
    want = nx.emulate(sp.Stub(theirs, {}, OUTS, dialect=MM), vals, list(OUTS))
    got = nx.emulate(ours, vals, list(OUTS))
    for k in OUTS:
        assert np.array_equal(got[k], want[k]), k


VECTORS = ("tid", "ntid", "ctaid", "nctaid", "clusterid", "nclusterid", "cluster_ctaid",
           "cluster_nctaid")


def test_a_vector_special_registers_w_reads_0_as_on_a_gpu():
    """A GPU's .w of a vector special register always reads 0 (PTX ISA). The emulator computed
    inputs['%tid.w'] for the mm-ptx dialect's scalar read and 0 for numptx's mov.v4.u32 of the
    same program: the two dialects' stubs disagreed on one input set. Now both read 0 and an
    input for .w is refused, naming why."""
    outs = {c: "u32" for c in "abcd"}
    for vec in VECTORS:
        stubs = [sp.compile([sp.special(vec)], outputs=outs, dialect=d) for d in (NX, MM)]
        assert f"mov.v4.u32" in stubs[0] and f"%{vec}.w;" in stubs[1]
        comps = {f"%{vec}.{c}": np.uint32(i + 2) for i, c in enumerate("xyz")}
        got = [{k: int(v) for k, v in nx.emulate(s, comps, list(outs)).items()} for s in stubs]
        assert got[0] == got[1] and got[0]["a"] == 0 and got[0]["d"] == 2      # .w on top
        for s in stubs:
            with pytest.raises(nx.EmulationError, match=rf"%{vec}\.w.*always reads 0"):
                nx.emulate(s, {**comps, f"%{vec}.w": np.uint32(3)}, list(outs))
        with pytest.raises(nx.EmulationError, match="always reads 0"):
            nx.emulate(f"mov.u32 %a, %{vec}.w;", {f"%{vec}.w": 1}, ["a"])
        assert int(nx.emulate(f"mov.u32 %a, %{vec}.w;", {}, ["a"])["a"]) == 0


def test_the_mm_ptx_dialects_scalar_reads_assemble_at_a_site():
    """The rewritten stub (a mov.u32 per used component, .w included, and the unused
    components' registers still declared) injects and assembles with nvJitLink."""
    src = ('extern "C" __global__ void k(unsigned* o) {\n'
           '  unsigned a, b; PTX_INJECT("t", PTX_OUT(U32, a), PTX_OUT(U32, b)); '
           'o[0] = a; o[1] = b;\n}\n')
    inj = nx.PtxInject(nx.cuda_to_ptx(src, arch="sm_90"))
    for prog in (TID_ADDS, [sp.special("ctaid"), sp.instr("add.u32")],
                 [sp.special("cluster_nctaid"), sp.instr("add.u32")] * 2):
        stub = sp.compile(prog, site=inj.sites["t"], dialect=MM)
        assert "mov.v4" not in stub and ".w;" in stub
        assert nx.ptx_to_cubin(inj.render({"t": stub}), arch="sm_90")[:4] == b"\x7fELF"


def test_mm_ptx_dialect_reads_only_the_components_it_uses():
    one = sp.compile([sp.special("ntid")], outputs={"w": "u32"}, dialect=MM)
    assert re.findall(r"mov\.u32 %\w+, %ntid\.(\w);", one) == ["w"]     # .w is on top
    two = sp.compile([sp.special("ctaid"), sp.instr("add.u32")], outputs={"a": "u32", "b": "u32"},
                     dialect=MM)                                   # [x, y, w + z]: x unused
    assert sorted(re.findall(r"%ctaid\.(\w);", two)) == ["w", "y", "z"]
    got = nx.emulate(two, {"%ctaid.x": np.uint32(4), "%ctaid.y": np.uint32(8),
                           "%ctaid.z": np.uint32(16)}, ["a", "b"])
    assert [int(got["a"]), int(got["b"])] == [16, 8]
    many = sp.compile_many([TID_ADDS, [sp.special("nctaid")]], outputs=OUTS, dialect=MM)
    assert all("mov.v4" not in s for s in many) and "%nctaid.w;" in many[1]


SIM_TID = r"""
import numpy as np, numptx as nx
from numba import cuda
from numptx import stack_ptx as sp

@nx.kernel
def k(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("t", out={"a": nx.u32})

prog = [sp.special("tid")] + [sp.instr("add.u32")] * 3          # x + y + z + w, w = 0
want = np.r_[np.arange(64), np.arange(6)].astype(np.uint32)
for d in ("numptx", "mm-ptx"):
    for stub in (sp.encode(prog, dialect=d), np.asarray(sp.encode(prog, dialect=d))):
        out = np.zeros(70, np.uint32)
        k.inject(t=stub)[2, 64](out)
        assert (out == want).all(), (d, type(stub).__name__, out)
print("SIM-TID-OK")
"""


def test_the_simulator_runs_encoded_programs_of_both_dialects(tmp_path):
    """numba's simulator takes what the GPU build takes: an ``sp.encode`` array (an Encoded,
    a subclass of ndarray, which the simulator refused by its type's name) and a plain one,
    in both dialects; %tid's .w reads 0 there too."""
    from conftest import run_script
    run_script(tmp_path, SIM_TID, simulator=True, marker="SIM-TID-OK")


# ============================================================================ item 11: name tags
def _colliding_pairs(n_names: int = 1 << 18, seed: int = 22) -> list[tuple[str, str]]:
    """Pairs of distinct 8-letter names with one CRC-32 (a birthday search: ~8 expected)."""
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    seen: dict[int, str] = {}
    pairs = []
    for _ in range(n_names):
        name = rng.choice(alphabet[:26]) + "".join(rng.choices(alphabet, k=7))   # PTX names
        tag = zlib.crc32(name.encode())
        other = seen.setdefault(tag, name)
        if other != name:
            pairs.append((other, name))
    return pairs


KNOWN = ("s6l6mwll", "ovbiasnc")


def _wrong_binding_refused(encoded_name: str, site_name: str, rng: random.Random) -> None:
    """A program encoded reading ``encoded_name`` (between other inputs), compiled where only
    ``site_name`` exists: every path that still knows the names raises, none reads the other."""
    others = [f"v{i}" for i in range(rng.randrange(3))]
    enc_names = others + [encoded_name]
    rng.shuffle(enc_names)
    prog = [sp.input(encoded_name), sp.const(1.0, "f32"), sp.instr("add.f32")]
    enc = sp.encode(prog, inputs=enc_names)
    site_ins = others + [site_name]
    rng.shuffle(site_ins)
    io = dict(inputs={n: "f32" for n in site_ins}, outputs={"y": "f32"})
    call = sp.routine(0)
    mm = sp.encode(prog, inputs=enc_names, dialect=MM)
    for attempt in (lambda: sp.compile(enc, **io),
                    lambda: sp.compile(enc[:2], **io),                # a slice keeps its names
                    lambda: sp.compile(mm, **io),                     # marker word stripped
                    lambda: sp.compile_many([enc, enc], **io),
                    lambda: sp.compile_many([prog[1:], enc], **io),
                    lambda: sp.compile([call], **io, routines=[enc]),
                    lambda: sp.compile(sp.decode(enc), **io),
                    lambda: sp.compile(sp.loads(sp.dumps(prog)), **io),
                    lambda: sp.convert(enc, NX, MM, **io)):
        with pytest.raises(ProgramError, match=re.escape(repr(encoded_name))):
            attempt()


def test_an_encoding_never_reads_an_input_with_the_same_name_tag():
    from numptx._program import input_tag
    assert input_tag(KNOWN[0]) == input_tag(KNOWN[1])                 # the pair
    pairs = [KNOWN] + _colliding_pairs()
    assert len(pairs) >= 3
    rng = random.Random(11)
    for a, b in pairs:
        assert zlib.crc32(a.encode()) == zlib.crc32(b.encode()) and a != b
        _wrong_binding_refused(a, b, rng)
        _wrong_binding_refused(b, a, rng)
    # random pairs (distinct tags, the usual case) are refused too
    for _ in range(40):
        a, b = (rng.choice("abxyz") + "".join(rng.choices("abcxyz_0123", k=rng.randrange(9)))
                for _ in range(2))
        if a != b:
            _wrong_binding_refused(a, b, rng)


def test_the_right_binding_still_compiles_through_a_tag():
    """Names that collide with nothing the program reads do not get in the way: the encoding
    lists a colliding name it never reads, and the compile has both names of a pair."""
    a, b = KNOWN
    prog = [sp.input("x"), sp.input(a), sp.instr("add.f32")]
    enc = sp.encode(prog, inputs=["x", b, a])
    stub = sp.compile(enc, {a: "f32", "x": "f32"}, {"y": "f32"})
    got = nx.emulate(stub, {"x": np.float32(1), a: np.float32(2)}, ["y"])
    assert float(got["y"]) == 3.0
    for words in (enc, np.asarray(enc)):                  # both names at one compile
        with pytest.raises(ProgramError, match="share that name tag"):
            sp.compile(words, {b: "f32", "x": "f32", a: "f32"}, {"y": "f32"})
    listed = sp.encode([sp.input(b)], inputs=["x", b])
    listed.inputs = list(listed.inputs)                                # a list of names works too
    with pytest.raises(ProgramError, match=rf"reads input '{b}'.*'{a}' has the same name tag"):
        sp.compile_many([listed], {"x": "f32", a: "f32"}, {"y": "f32"})
    only_x = sp.encode([sp.input("x")], inputs=["x", b])              # lists b, never reads it
    assert "%x" in sp.compile(only_x, {"x": "f32", a: "f32"}, {"y": "f32"})


def test_compile_many_checks_every_encoding_of_a_batch_that_shares_names():
    """compile_many checks names once per run of equal names (the batch's usual case): a
    program whose names tag a hazard but which reads nothing wrong is fine, and the next one
    with equal names (the same tuple or an equal one) that does read the wrong input is still
    refused, by its index; plain arrays and op lists in the batch are left as they are."""
    a, b = KNOWN
    io = dict(inputs={"x": "f32", b: "f32"}, outputs={"y": "f32"})
    names = ["x", a]
    ok = sp.encode([sp.input("x")], inputs=names)                     # lists a, never reads it
    bad = sp.encode([sp.input(a), sp.input("x"), sp.instr("add.f32")], inputs=names)
    for batch, index in (([ok, ok, bad], 2), ([ok, bad[:1], bad], 1),
                         ([np.asarray(bad), [sp.input("x")], ok, bad], 3)):
        with pytest.raises(ProgramError, match=rf"compile_many: program {index}: word 0 reads "
                                               rf"input '{a}'.*'{b}' has the same name tag"):
            sp.compile_many(batch, **io)
    stubs = sp.compile_many([ok, np.asarray(bad), ok], **io)          # plain: tags only
    assert f"%{b}" in stubs[1] and "%x" in stubs[0]


# ============================================================================ item 5: convert + limits
def _random_limits(rng: random.Random) -> sp.Limits:
    kw = {"max_nodes": rng.randrange(1, 40), "max_steps": rng.randrange(1, 80),
          "stack_capacity": rng.randrange(2, 16), "max_depth": rng.randrange(1, 4),
          "n_slots": rng.randrange(1, 4)}
    if rng.random() < 0.5:
        kw["meta_capacity"] = rng.randrange(1, 8)
    return sp.Limits(**{k: v for k, v in kw.items() if rng.random() < 0.7})


@pytest.mark.parametrize("src,dst", [(MM, NX), (NX, MM)])
def test_convert_under_random_limits_is_refused_or_computes_the_same(src, dst):
    """Random programs and random Limits: sp.convert either raises a ProgramError or gives a
    program that, compiled under the same Limits in ``dst``, computes what the source computes
    compiled under them in ``src`` (the emulator on random inputs)."""
    from test_dialects import INS, OUTS, _outputs, _random_program, _values
    rng, nrng = random.Random(22 + len(src)), np.random.default_rng(5)
    converted = refused = 0
    for _ in range(400):
        prog, routines = _random_program(rng)
        lim = _random_limits(rng)
        try:
            ported = sp.convert(prog, src, dst, INS, OUTS, routines=routines, limits=lim)
        except ProgramError:
            refused += 1
            continue
        want = sp.compile(prog, INS, OUTS, routines=routines, dialect=src, limits=lim)
        got = sp.compile(ported, INS, OUTS, dialect=dst, limits=lim)
        vals = _values(nrng)
        assert _outputs(got, vals) == _outputs(want, vals), (prog, routines, lim, ported)
        converted += 1
    assert converted > 100 and refused > 20


def test_convert_refuses_where_the_outputs_cost_nodes_the_source_did_not_spend():
    """The issue's case: numptx -> mm-ptx writes numptx's zero for an output as a pushed const,
    mm-ptx -> numptx pushes an untouched mod variable: each a node the source never made."""
    a = sp.input("a")
    io = dict(inputs={"a": "f32", "acc": "f32"}, outputs={"z": "f32", "acc": "f32"})
    prog = [a, sp.const(2.0, "f32"), sp.instr("mul.rn.f32")]         # 3 nodes; acc: no value
    lim = sp.Limits(max_nodes=3)
    for src, dst in ((NX, MM), (MM, NX)):
        with pytest.raises(ProgramError, match=rf"convert {src} -> {dst}: the converted program "
                           r"needs 4 DAG nodes, more than limits.max_nodes = 3.*max_nodes=4"):
            sp.convert(prog, src, dst, **io, limits=lim)
        ported = sp.convert(prog, src, dst, **io, limits=sp.Limits(max_nodes=4))
        vals = {"a": np.float32(1.5), "acc": np.float32(7)}
        want = nx.emulate(sp.compile(prog, **io, dialect=src, limits=lim), vals, ["z", "acc"])
        got = nx.emulate(sp.compile(ported, **io, dialect=dst, limits=sp.Limits(max_nodes=4)),
                         vals, ["z", "acc"])
        assert {k: float(v) for k, v in got.items()} == {k: float(v) for k, v in want.items()}
