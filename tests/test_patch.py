"""Constant patching (numptx.jit.compile.patch): variants that differ only in f32 constants get the cubin
ptxas makes, without running it again. Checked against real nvJitLink assemblies, byte for byte."""
from __future__ import annotations

import os
import random
import struct
import sys

import numpy as np
import pytest
from numba import cuda

import numptx as nx
from conftest import Counting
from numptx.jit.compile.patch import (Plan, folds_constants, halves_text, join_constants, kinds_of,
                              make_plan, nan_halves, patchable, plan_key, sentinel_sets, signs,
                              split_constants, words)

from conftest import SPINE_SRC

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/benchmarks")
from bench_inject import gemm_template  # noqa: E402


def f32(x: float) -> str:
    return "0f%08X" % struct.unpack("<I", struct.pack("<f", x))[0]


def bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


@pytest.fixture
def pair():
    """The spine template with patching, and one without (the reference assemblies)."""
    return (nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=False),
            nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=False, patch_constants=False))


# ---- the pieces -------------------------------------------------------------------------------------
def test_split_and_join_constants():
    stubs = ["fma.rn.f32 %v_z, %v_x, 0f3FC00000, 0F40000000;", "mov.f32 %v_w, %v_z;",
             "add.f32 %r0f12345678, %x_0f1, 0f3F800000; // 0f3F800000"]
    texts, values = split_constants(stubs)
    assert values == (0x3FC00000, 0x40000000, 0x3F800000, 0x3F800000)
    assert texts[1] == ("mov.f32 %v_w, %v_z;",)          # register names are not constants
    assert join_constants(texts, values) == stubs
    texts, values = split_constants(["fma.rn.f64 %v_z, %v_x, 0d3FF8000000000000, 0f3F800000;"])
    assert values == (0x3FF8000000000000, 0x3F800000) and kinds_of(texts) == "df"
    assert join_constants(texts, (0x4000000000000001, 0x40000000)) == [
        "fma.rn.f64 %v_z, %v_x, 0d4000000000000001, 0f40000000;"]
    assert split_constants(["mov.b64 %rd1, 0d3FF0000000000000;"])[1] == (0x3FF0000000000000,)
    assert split_constants(["add.s32 %r1, %r2, 0x3F800000;"])[1] == ()      # not a float literal


def test_which_constants_are_patched_and_signs_are_part_of_a_shape():
    assert patchable([bits(1.5), bits(-3e-30), bits(1.0), bits(2.0 ** -100), bits(-1.9 * 2.0 ** 99)])
    for special in (0.0, -0.0, float("inf"), float("nan"), 1e-40,
                    2.0 ** -101, 2.0 ** 100, 3e38):            # outside the proof's hull
        assert not patchable([bits(1.5), bits(special)]), special
    # low half an f16 NaN: ptxas loads it another way, so it is patched only into a plan
    # proven with such halves (part of the shape, see halves_text)
    assert patchable([0x3F807C01]) and halves_text([0x3F807C01, bits(1.5)], "ff") == ":10"
    assert patchable([0x3F807C00, 0x3F807BFF])  # an f16 infinity or an ordinary half is fine
    assert halves_text([0x3F807C00, 0x3F807BFF], "ff") == ""
    assert signs([bits(1.0), bits(-2.0)]) == "+-"


@pytest.mark.parametrize("stub, why", [
    ("mul.rn.f32 %v_z, %v_x, 0f3FC00000;", None),
    ("{ .reg .f32 %t; mov.f32 %t, 0f3FC00000; mul.rn.f32 %v_z, %v_x, %t; }", None),
    ("{ .reg .pred %p; setp.lt.f32 %p, %v_x, 0f3F800000; selp.f32 %v_z, %v_y, 0f40000000, %p; }", None),
    ("{ .reg .f32 %t; add.rn.f32 %t, 0f3F800000, 0f40000000; mul.rn.f32 %v_z, %v_x, %t; }", "add.rn.f32"),
    ("{ .reg .f32 %t; mov.f32 %t, 0f3F800000; sqrt.rn.f32 %t, %t; mul.rn.f32 %v_z, %v_x, %t; }", "sqrt"),
    ("{ .reg .f32 %t; mov.f32 %t, 0f3F800000; mov.f32 %t, %v_x; sqrt.rn.f32 %v_z, %t; }", None),
    ("{ .reg .pred %p; setp.gt.f32 %p, 0f3F800000, 0f40000000; selp.f32 %v_z, %v_x, %v_y, %p; }", "setp"),
    ("@%p bra $L1;\n$L1:\nmov.f32 %v_z, 0f3F800000;", "branches"),
    ("{ .reg .s32 %r; cvt.rzi.s32.f32\t%r, 0f49742400; }", "cvt.rzi.s32.f32"),   # tabs
    ("@%p\tmul.rn.f32\t%v_z, %v_x, 0f3F800000;", None),
    ("mov.f32 %v_z, 0f3F800000;", "%v_z is set to a constant"),   # template code may fold it
])
def test_compile_time_arithmetic_on_constants_is_found(stub, why):
    got = folds_constants([stub])
    assert (got is None) if why is None else (why in got)


def test_sentinel_sets_keep_signs_lie_on_either_side_of_all_patched_values_and_reverse_the_order():
    for seed in range(50):
        a, b = sentinel_sets("+-++-", seed=seed)
        fa = [struct.unpack("<f", struct.pack("<I", v))[0] for v in a]
        fb = [struct.unpack("<f", struct.pack("<I", v))[0] for v in b]
        assert signs(a) == signs(b) == "+-++-"
        assert all(2.0 ** -120 <= abs(x) < 2.0 ** -100 for x in fa)
        assert all(2.0 ** 100 <= abs(x) < 2.0 ** 120 for x in fb)
        assert all((v >> 10) & 0x1F != 0x1F and (v >> 26) & 0x1F != 0x1F for v in a + b)
        assert len({v & 0x7FFFFFFF for v in a + b}) == 10      # no value or negation twice
        order_a = sorted(range(5), key=lambda k: abs(fa[k]))
        order_b = sorted(range(5), key=lambda k: abs(fb[k]))
        assert order_a == order_b[::-1]


def test_a_plan_must_reproduce_the_second_assembly():
    s1, s2 = [0x3D315FB7, 0x3D053E97], [0x443E32E1, 0x447598B3]
    le = lambda v: v.to_bytes(4, "little")                       # noqa: E731
    first = b"\x7fELF" + le(s1[0]) + b"...." + le(s1[1] ^ 0x80000000) + b"tail"
    second = b"\x7fELF" + le(s2[0]) + b"...." + le(s2[1] ^ 0x80000000) + b"tail"
    plan = make_plan(2, first, second, (s1, s2))
    assert isinstance(plan, Plan) and plan.slots == (((4,), ()), ((), (12,)))   # a negation found
    assert plan.apply([bits(2.5), bits(-1.0)]) == b"\x7fELF" + le(bits(2.5)) + b"...." + le(bits(1.0)) + b"tail"
    assert make_plan(2, first, second[:-1] + b"X", (s1, s2)) is None        # another byte changed
    assert make_plan(2, first, second + b"x", (s1, s2)) is None             # lengths differ
    gone = b"\x7fELF" + le(s1[0]) + b"........tail"                          # slot 2 folded away
    assert make_plan(2, gone, b"\x7fELF" + le(s2[0]) + b"........tail", (s1, s2)) is None


# ---- real assemblies ---------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda c, d: f"mul.rn.f32 %v_z, %v_x, {f32(c)};",
    lambda c, d: f"sub.rn.f32 %v_z, %v_x, {f32(c)};",                   # ptxas adds -c
    lambda c, d: f"fma.rn.f32 %v_z, %v_x, {f32(c)}, {f32(d)};",
    lambda c, d: f"{{ .reg .pred %p; setp.lt.f32 %p, %v_x, {f32(c)}; selp.f32 %v_z, %v_y, {f32(d)}, %p; }}",
    lambda c, d: f"{{ .reg .f32 %t; max.f32 %t, %v_x, {f32(c)}; fma.rn.f32 %v_z, %t, %v_y, {f32(d)}; }}",
])
def test_patched_cubins_equal_ptxas_for_generic_constants(pair, monkeypatch, make):
    patched, reference = pair
    rng = random.Random(7)
    values = [(rng.uniform(0.1, 20) * rng.choice((1, -1)), rng.uniform(0.1, 20)) for _ in range(6)]
    values = [(abs(c), d) for c, d in values[:3]] + [(c, d) for c, d in values[3:]]
    want = [reference.inject(combine=make(c, d)).cubin for c, d in values]
    count = Counting(monkeypatch)
    got = [patched.inject(combine=make(c, d)).cubin for c, d in values]
    assert got == want
    assert count.calls <= 2 + 2 * 2 * 2         # per sign pattern: as written, then one proof


def test_the_first_of_a_shape_is_assembled_then_one_proof_then_none(pair, monkeypatch):
    patched, _ = pair
    count = Counting(monkeypatch)
    patched.inject(combine=f"mul.rn.f32 %v_z, %v_x, {f32(1.7)};").cubin
    assert count.calls == 1                     # as written: a lone variant of its shape
    patched.inject(combine=f"mul.rn.f32 %v_z, %v_x, {f32(2.9)};").cubin
    assert count.calls in (3, 5)                # the proof: two assemblies (four on a retry)
    before = count.calls
    for c in (0.3, 11.0, 1234.5, 1.0, 2.0):     # 1.0 and 2.0 too: normal numbers
        patched.inject(combine=f"mul.rn.f32 %v_z, %v_x, {f32(c)};").cubin
    assert count.calls == before
    patched.inject(combine=f"mul.rn.f32 %v_z, %v_x, {f32(0.0)};").cubin
    assert count.calls == before + 1            # zero: assembled as written


def test_shapes_that_fold_constants_are_assembled_every_time(pair, monkeypatch):
    patched, reference = pair
    make = lambda c: f"div.rn.f32 %v_z, %v_x, {f32(c)};"        # noqa: E731 - ptxas rewrites c
    for c in (1.7, 2.9, 5.3):
        assert patched.inject(combine=make(c)).cubin == reference.inject(combine=make(c)).cubin
    fold = lambda c: (f"{{ .reg .f32 %t; add.rn.f32 %t, {f32(c)}, 0f3F800000; "   # noqa: E731
                      f"mul.rn.f32 %v_z, %v_x, %t; }}")
    for c in (1.7, 2.9):
        patched.inject(combine=fold(c)).cubin
    count = Counting(monkeypatch)
    for c in (3.1, 4.7):
        assert patched.inject(combine=fold(c)).cubin == reference.inject(combine=fold(c)).cubin
    assert count.calls == 4                     # 2 here, 2 for the reference: no patching


def test_constants_with_an_f16_nan_half_are_patched_only_within_their_class(pair):
    """ptxas loads such a constant with a MOV, others with an f16x2 add of the halves (review
    finding: patching one into the latter would canonicalize the NaN half). Which pieces are
    NaNs is part of the shape, and the proof of such a shape uses sentinels with the same NaN
    pieces (issue 14: a sweep no longer assembles ~3 % of its values)."""
    patched, reference = pair
    make = lambda c: f"fma.rn.f32 %v_z, %v_x, 0f{c:08X}, 0f3FC00001;"     # noqa: E731
    values = (0x3F8A1235, 0x3F9B5677, 0x3F807C01, 0x3FC37E05, 0x40117D33, 0x3E0A7FFF, 0x3F8A1236)
    got = [patched.inject(combine=make(c)) for c in values]
    assert [v.cubin for v in got] == [reference.inject(combine=make(c)).cubin for c in values]
    assert [v.build_info.how for v in got] == ["assembled", "proof", "assembled", "proof",
                                               "patched", "assembled", "patched"]
    assert "0x7FFF" in got[5].build_info.why        # the NaN an f16x2 add returns: either form
    assert patched.shape(got[2].stubs).key != patched.shape(got[0].stubs).key
    for seed in range(30):
        a, b = sentinel_sets("+-", "fd", seed=seed, halves=[1, 5])
        assert [nan_halves(v, k) for v, k in zip(a + b, "fdfd")] == [1, 5, 1, 5]


THRESHOLD_SRC = r'''
extern "C" __global__ void kernel(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = a[i], y = b[i], z;
        PTX_INJECT("combine", PTX_IN(F32, x), PTX_IN(F32, y), PTX_IN(F32, s, 1e6f), PTX_OUT(F32, z));
        out[i] = (z > 1e-10f) ? z : -x;
    }
}'''


def test_comparisons_ptxas_folds_outside_the_stub_are_not_patched_wrongly():
    """Template code that compares a site output with a threshold, and a site input that is a
    literal in the template: a patched variant on the other side of the threshold must get
    the code ptxas makes for it (review findings)."""
    tmpl = nx.CudaTemplate(THRESHOLD_SRC, arch="sm_90", cache=False)
    ref = nx.CudaTemplate(THRESHOLD_SRC, arch="sm_90", cache=False, patch_constants=False)
    out_const = lambda c: f"mov.f32 %v_z, {f32(c)};"                     # noqa: E731
    compare = lambda c: (f"{{ .reg .pred %p; setp.lt.f32 %p, %v_s, {f32(c)}; "   # noqa: E731
                         f"{{ .reg .f32 %t; mul.rn.f32 %t, %v_y, {f32(c)}; selp.f32 %v_z, %v_x, %t, %p; }} }}")
    for make in (out_const, compare):
        for c in (2.5, 3.5, 1e-20, 1e7, 1e5, 4.5):
            assert tmpl.inject(combine=make(c)).cubin == ref.inject(combine=make(c)).cubin, (make, c)


F64_SRC = r'''
extern "C" __global__ void kernel(double* out, const double* a, const double* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        double x = a[i], y = b[i], z;
        PTX_INJECT("combine", PTX_IN(F64, x), PTX_IN(F64, y), PTX_OUT(F64, z));
        out[i] = (z > 1e-10) ? z : -x;
    }
}'''


def f64(x: float) -> str:
    return "0d%016X" % struct.unpack("<Q", struct.pack("<d", x))[0]


def bits64(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def test_f64_constants_are_patched_in_two_words():
    assert patchable([bits64(1.5), bits64(-0.75), bits64(2.0 ** -100)], "ddd")
    for special in (0.0, float("inf"), 2.0 ** -101, 2.0 ** 100, 1e-310):
        assert not patchable([bits64(special)], "d"), special
    assert patchable([0x3FF0000000007C01], "d")            # a NaN f16 piece: its own class
    assert nan_halves(0x3FF0000000007C01, "d") == 1
    assert signs([bits64(-1.0), bits(2.0)], "df") == "-+"
    assert words([bits64(1.5), bits(2.0)], "df") == [0, 0x3FF80000, 0x40000000]
    for seed in range(30):
        a, b = sentinel_sets("+-+", "dfd", seed=seed)
        fa = [struct.unpack("<d", struct.pack("<Q", a[0]))[0], struct.unpack("<d", struct.pack("<Q", a[2]))[0]]
        fb = [struct.unpack("<d", struct.pack("<Q", b[0]))[0], struct.unpack("<d", struct.pack("<Q", b[2]))[0]]
        assert all(2.0 ** -120 <= abs(x) < 2.0 ** -100 for x in fa) and all(2.0 ** 100 <= abs(x) < 2.0 ** 120 for x in fb)
        assert signs(a, "dfd") == signs(b, "dfd") == "+-+"
        ws = words(a + b, "dfd" * 2)
        assert len({w & 0x7FFFFFFF for w in ws}) == len(ws)    # every word unique, sign aside
        assert (abs(fa[0]) < abs(fa[1])) == (abs(fb[0]) > abs(fb[1]))    # order reversed


@pytest.mark.parametrize("make", [
    lambda c, d: f"mul.rn.f64 %v_z, %v_x, {f64(c)};",
    lambda c, d: f"sub.rn.f64 %v_z, %v_x, {f64(c)};",
    lambda c, d: f"fma.rn.f64 %v_z, %v_x, {f64(c)}, {f64(d)};",
    lambda c, d: f"{{ .reg .pred %p; setp.lt.f64 %p, %v_x, {f64(c)}; selp.f64 %v_z, %v_y, {f64(d)}, %p; }}",
    lambda c, d: (f"{{ .reg .f32 %s; .reg .f64 %t; cvt.rn.f32.f64 %s, %v_x; mul.rn.f32 %s, %s, {f32(c)}; "
                  f"cvt.f64.f32 %t, %s; fma.rn.f64 %v_z, %t, {f64(d)}, %v_y; }}"),      # f32 and f64
])
def test_patched_f64_cubins_equal_ptxas_for_generic_constants(monkeypatch, make):
    tmpl = nx.CudaTemplate(F64_SRC, arch="sm_90", cache=False)
    ref = nx.CudaTemplate(F64_SRC, arch="sm_90", cache=False, patch_constants=False)
    rng = random.Random(11)
    values = [(rng.uniform(0.01, 1e6), rng.uniform(0.01, 1e6)) for _ in range(5)]
    want = [ref.inject(combine=make(c, d)).cubin for c, d in values]
    count = Counting(monkeypatch)
    assert [tmpl.inject(combine=make(c, d)).cubin for c, d in values] == want
    assert count.calls <= 1 + 2 * 2             # as written, then one proof (maybe retried)


def test_dsl_f64_formulas_patch():
    @nx.ptx_expr
    def affine(x: nx.f64, y: nx.f64, c: nx.f64) -> nx.f64:
        return x * c + y

    tmpl = nx.CudaTemplate(F64_SRC, arch="sm_90", cache=False)
    ref = nx.CudaTemplate(F64_SRC, arch="sm_90", cache=False, patch_constants=False)
    cs = [1.000123, 3.75391, 17.0625001, 0.3331]
    got = [tmpl.inject(combine=affine.bind(c=c)).cubin for c in cs]
    assert tmpl.plans.plans()
    assert got == [ref.inject(combine=affine.bind(c=c)).cubin for c in cs]


def test_patching_off_assembles_every_variant(monkeypatch):
    tmpl = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=False, patch_constants=False)
    count = Counting(monkeypatch)
    for c in (1.5, 2.5, 3.5):
        tmpl.inject(combine=f"mul.rn.f32 %v_z, %v_x, {f32(c)};").cubin
    assert count.calls == 3


def test_dsl_formulas_with_constants_on_the_gemm(monkeypatch):
    """The 512-site GEMM with a traced formula: after the first two, a new constant costs no
    assembly, and the cubins are the ones ptxas makes."""
    @nx.ptx_expr
    def mac(a: nx.f32, b: nx.f32, acc: nx.f32, c: nx.f32) -> nx.f32:
        return nx.fma(a, b * c, acc)

    tmpl = nx.CudaTemplate(gemm_template(), entry="gemm", arch="sm_90", cache=False)
    ref = nx.CudaTemplate(gemm_template(), entry="gemm", arch="sm_90", cache=False,
                          patch_constants=False)
    cs = [0.75, 1.3, 1.9, 0.61]
    got = [tmpl.inject(mac=mac.bind(c=c)).cubin for c in cs[:2]]
    count = Counting(monkeypatch)
    got += [tmpl.inject(mac=mac.bind(c=c)).cubin for c in cs[2:]]
    assert count.calls == 0
    monkeypatch.undo()
    assert got == [ref.inject(mac=mac.bind(c=c)).cubin for c in cs]


@pytest.mark.parametrize("executor", ["threads", "inline"])
def test_build_many_proves_each_shape_once_and_patches_the_rest(monkeypatch, executor):
    tmpl = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=False)
    ref = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=False, patch_constants=False)
    rng = random.Random(3)
    cs = [rng.uniform(0.1, 30) for _ in range(12)]
    batch = [{"combine": f"fma.rn.f32 %v_z, %v_x, {f32(c)}, %v_y;"} for c in cs]
    batch += [{"combine": "add.f32 %v_z, %v_x, %v_y;"}, {"combine": "bogus.f32 %v_z;"}]
    count = Counting(monkeypatch)
    kw = {"max_workers": 1} if executor == "inline" else {}
    out = tmpl.build_many(batch, errors="return", **kw)
    assert count.calls <= 2 * 2 + 2            # one proof (maybe retried) + the two others
    assert isinstance(out[-1], nx.LinkError)
    monkeypatch.undo()
    assert [v.cubin for v in out[:-1]] == [ref.inject(b).cubin for b in batch[:-1]]
    again = tmpl.build_many([{"combine": f"fma.rn.f32 %v_z, %v_x, {f32(4.25)}, %v_y;"}])
    assert again[0].cubin == ref.inject(combine=f"fma.rn.f32 %v_z, %v_x, {f32(4.25)}, %v_y;").cubin


def test_build_many_with_a_lone_new_shape_assembles_it_as_written(monkeypatch):
    tmpl = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=False)
    count = Counting(monkeypatch)
    tmpl.build_many([{"combine": f"mul.rn.f32 %v_z, %v_x, {f32(1.25)};"}])
    assert count.calls == 1
    tmpl.build_many([{"combine": f"mul.rn.f32 %v_z, %v_x, {f32(c)};"} for c in (2.5, 3.5, 4.5)])
    assert count.calls in (3, 5)               # seen before: one proof for all three


def test_patched_variants_stay_in_memory_and_are_patched_again_from_the_plan(tmp_path,
                                                                              monkeypatch):
    """The assembled variant and the proof go to the disk cache, a patched one stays in memory
    (patching it again from the plan on disk is cheaper than writing it): another process
    patches it again, to the same bytes, without assembling."""
    cache = nx.CubinCache(str(tmp_path / "c"))
    tmpl = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=cache)
    make = lambda c: f"mul.rn.f32 %v_z, %v_x, {f32(c)};"                 # noqa: E731
    vs = [tmpl.inject(combine=make(c)) for c in (1.5, 2.5, 3.5, 4.5)]
    cubins = [v.cubin for v in vs]
    assert [v.build_info.how for v in vs] == ["assembled", "proof", "patched", "patched"]
    assert all(cache.in_memory(v.key) for v in vs)
    on_disk = [os.path.exists(cache.path(v.key)) for v in vs]
    assert on_disk == [True, True, False, False]
    fresh = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=nx.CubinCache(str(tmp_path / "c")))
    again = [fresh.inject(combine=make(c)) for c in (1.5, 2.5, 3.5, 4.5)]
    assert [v.lookup() for v in again[:2]] == cubins[:2]
    count = Counting(monkeypatch)
    assert [v.cubin for v in again[2:]] == cubins[2:]
    assert count.calls == 0 and [v.build_info.how for v in again[2:]] == ["patched"] * 2


def test_build_many_keeps_patched_variants_off_the_disk(tmp_path):
    cache = nx.CubinCache(str(tmp_path / "c"))
    tmpl = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=cache)
    tmpl.inject(combine=f"mul.rn.f32 %v_z, %v_x, {f32(0.5)};").cubin      # the shape seen
    vs = tmpl.build_many([{"combine": f"mul.rn.f32 %v_z, %v_x, {f32(c)};"}
                          for c in (1.5, 2.5, 3.5, 4.5, 5.5)])
    hows = [v.build_info.how for v in vs]
    assert hows.count("patched") >= 3
    assert [os.path.exists(cache.path(v.key)) for v in vs] == [h != "patched" for h in hows]


def test_plans_round_trip_through_bytes_and_refuse_garbage():
    plan = Plan(b"\x7fELF" + bytes(60), [((4, 20), ()), ((), (40,)), ((), ())])
    back = Plan.from_bytes(plan.to_bytes())
    assert back.base == plan.base and back.slots == plan.slots
    data = plan.to_bytes()
    for bad in (data[:-1], data[:10], b"\x7fELF" + bytes(100), data[:-16] + b"NXPX" + data[-12:],
                plan.base + struct.pack("<3I", 1, 5, 99) + struct.pack("<4sIII", b"NXPL", 1, 3, 64)):
        assert Plan.from_bytes(bad) is None


def test_a_proven_plan_serves_other_processes_through_the_cache(tmp_path, monkeypatch):
    """A template in another process (a fresh CubinCache on the same folder) patches the first
    variant of a known shape without assembling anything."""
    make = lambda c: f"fma.rn.f32 %v_z, %v_x, {f32(c)}, %v_y;"            # noqa: E731
    first = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=nx.CubinCache(str(tmp_path / "c")))
    for c in (1.5, 2.5):
        first.inject(combine=make(c)).cubin
    other = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=nx.CubinCache(str(tmp_path / "c")))
    ref = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=False, patch_constants=False)
    count = Counting(monkeypatch)
    got = other.inject(combine=make(3.25)).cubin
    assert count.calls == 0
    monkeypatch.undo()
    assert got == ref.inject(combine=make(3.25)).cubin
    # a damaged plan file is a miss: the shape is proven again
    shape_key = other.shape([make(1.0)]).key
    path = other.cache.path(plan_key(shape_key))
    raw = bytearray(open(path, "rb").read())
    raw[100] ^= 0xFF
    open(path, "wb").write(bytes(raw))
    third = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=nx.CubinCache(str(tmp_path / "c")))
    count = Counting(monkeypatch)
    assert third.inject(combine=make(4.75)).cubin == ref.inject(combine=make(4.75)).cubin
    assert count.calls == 2                     # as written, and the reference


def _scale(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("s", x=a[i], out={"z": nx.f32})


def test_numba_templates_patch_too(monkeypatch):
    k = nx.kernel(_scale, cache=False)
    args = (np.zeros(8, np.float32), np.ones(8, np.float32))

    @nx.ptx_expr
    def affine(x: nx.f32, c: nx.f32) -> nx.f32:
        return x * c + 0.5

    cs = (1.5, 2.5, 3.25, 7.0)
    got = [k.inject(s=affine.bind(c=c)).specialize(*args).cubin for c in cs]
    tmpl = k.template(*args)
    assert tmpl.plans.plans()
    tmpl.patch_constants = False               # the same template, every variant assembled
    assert got == [k.inject(s=affine.bind(c=c)).specialize(*args).cubin for c in cs]


@pytest.mark.gpu
def test_gpu_patched_f64_variants_compute_every_normal_constant():
    """f64 constants ptxas would encode in short forms (2, 0.5, 1) patched into the generic
    two-word form, run and matched against NumPy."""
    tmpl = nx.CudaTemplate(F64_SRC, arch="sm_90")
    n = 1000
    a, b = np.random.rand(n) * 4 + 0.5, np.random.rand(n)
    for c in (1.7, 2.9, 2.0, 0.5, 1.0, 1e30, 1e-29, 3.0):
        v = tmpl.inject(combine=f"fma.rn.f64 %v_z, %v_x, {f64(c)}, %v_y;")
        out = np.zeros(n)
        v[(n + 255) // 256, 256](out, a, b, n)
        z = a * c + b
        np.testing.assert_allclose(out, np.where(z > 1e-10, z, -a), rtol=1e-15, atol=0)


@pytest.mark.gpu
def test_gpu_patched_variants_compute_every_normal_constant():
    """Patched cubins with constants ptxas would special-case (1, 2, 0.5, -1, huge, tiny) run and
    match NumPy."""
    tmpl = nx.CudaTemplate(SPINE_SRC, arch="sm_90")
    n = 1000
    a = np.random.rand(n).astype(np.float32) * 4 - 2
    b = np.random.rand(n).astype(np.float32)
    for c in (1.7, 2.9, 1.0, 2.0, 0.5, 3.0e38, 1.5e-38, 4.0):
        for sign in (1, -1):
            v = tmpl.inject(combine=f"fma.rn.f32 %v_z, %v_x, {f32(sign * c)}, %v_y;")
            out = np.zeros(n, np.float32)
            v[(n + 255) // 256, 256](out, a, b, n)
            want = (a.astype(np.float64) * np.float32(sign * c) + b).astype(np.float32)
            np.testing.assert_allclose(out, want, rtol=1e-6, atol=0)
