"""Builds say what they did (``variant.build_info``), and constant patching covers real formulas:
only the user's constants vary in a shape; the math library's constants, constants that cannot
be patched and constants ptxas could fold are part of it (issue 14, items 9 and 10). Real
NVRTC and nvJitLink assemblies, compared byte for byte with patching off."""
from __future__ import annotations

import logging
import struct

import numpy as np
import pytest
from numba import cuda

import numptx as nx
from conftest import Counting
from numptx.jit.compile.patch import constant_roles, fix_constants, kinds_of, split_constants
from numptx.jit.compile.plans import FIRST, BuildInfo

from conftest import SPINE_SRC

SRC = r'''
extern "C" __global__ void kernel(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = a[i], y = b[i], acc;
        PTX_INJECT("init", PTX_OUT(F32, acc));
        PTX_INJECT("k", PTX_IN(F32, x), PTX_IN(F32, y), PTX_MOD(F32, acc));
        out[i] = acc;
    }
}'''
ZERO = "mov.f32 %v_acc, 0f00000000;"


def f32(x: float) -> str:
    return "0f%08X" % struct.unpack("<I", struct.pack("<f", x))[0]


def laplace(precision):
    @nx.ptx_expr(precision=precision)
    def lap(x: nx.f32, y: nx.f32, acc: nx.f32, inv_sigma: nx.f32) -> nx.f32:
        return acc + nx.exp(-abs(x - y) * inv_sigma)
    return lap


def transcendental(precision):
    @nx.ptx_expr(precision=precision)
    def trig(x: nx.f32, y: nx.f32, acc: nx.f32, c: nx.f32) -> nx.f32:
        return acc + nx.tanh(x * c) + nx.sin(y * c) + nx.log(abs(x) + c)
    return trig


# ---- item 9: build_info ----------------------------------------------------------------------
def test_build_info_says_how_each_cubin_came_to_be(tmp_path):
    make = lambda c: f"mul.rn.f32 %v_z, %v_x, {f32(c)};"                 # noqa: E731
    tmpl = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=nx.CubinCache(str(tmp_path / "c")))
    vs = [tmpl.inject(combine=make(c)) for c in (1.5, 2.5, 3.5)]
    assert vs[0].build_info is None                       # nothing built yet
    infos = [v.cubin and v.build_info for v in vs]
    assert [i.how for i in infos] == ["assembled", "proof", "patched"]
    assert infos[0].why == FIRST and infos[1].why is None and infos[2].why is None
    assert all(isinstance(i, BuildInfo) and i.seconds > 0 for i in infos)
    assert "assembled in" in str(infos[0]) and "first variant" in str(infos[0])
    again = tmpl.inject(combine=make(2.5))
    again.cubin
    assert again.build_info.how == "memory"
    fresh = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=nx.CubinCache(str(tmp_path / "c")))
    v = fresh.inject(combine=make(2.5))                   # the proof: written to disk
    v.cubin
    assert v.build_info.how == "disk"
    v = fresh.inject(combine=make(3.5))                   # patched: kept in memory only,
    v.cubin                                               # patched again from the plan
    assert v.build_info.how == "patched"
    off = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=False, patch_constants=False)
    v = off.inject(combine=make(1.5))
    v.cubin
    assert v.build_info.how == "assembled" and "patch_constants=False" in v.build_info.why
    v = off.inject(combine="add.rn.f32 %v_z, %v_x, %v_y;")
    v.cubin
    assert v.build_info.why == "patching is off (patch_constants=False)"
    on = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=False)
    v = on.inject(combine="add.rn.f32 %v_z, %v_x, %v_y;")
    v.cubin
    assert v.build_info.why == "no constant to patch"


def test_a_division_by_a_constant_says_why_its_shape_is_not_patched_and_logs_once(caplog):
    """``x / c``: ptxas computes with c at compile time, so the proof fails; the variants and
    the log say so (before: no reason anywhere)."""
    tmpl = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=False)
    make = lambda c: f"div.rn.f32 %v_z, %v_x, {f32(c)};"                 # noqa: E731
    with caplog.at_level(logging.INFO, logger="numptx.jit.compile.plans"):
        vs = [tmpl.inject(combine=make(c)) for c in (1.7, 2.9, 5.3, 6.1)]
        infos = [v.cubin and v.build_info for v in vs]
    assert [i.how for i in infos] == ["assembled"] * 4
    assert all("divides by it at compile time" in i.why for i in infos)
    told = [r for r in caplog.records if r.levelno == logging.INFO and "divides" in r.message]
    assert len(told) == 1 and "no constant is patched" in told[0].message


@pytest.mark.parametrize("executor", ["threads", "inline"])
def test_build_many_reports_each_variant(tmp_path, executor):
    tmpl = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=nx.CubinCache(str(tmp_path / "c")))
    batch = [{"combine": f"fma.rn.f32 %v_z, %v_x, {f32(c)}, %v_y;"} for c in (1.1, 2.2, 3.3, 4.4)]
    batch += [{"combine": "add.rn.f32 %v_z, %v_x, %v_y;"},
              {"combine": f"sub.rn.f32 %v_z, %v_x, {f32(1.7)};"}]
    kw = {"max_workers": 1} if executor == "inline" else {}
    out = tmpl.build_many(batch, **kw)
    hows = [v.build_info.how for v in out]
    assert sorted(hows[:4]) == ["patched", "patched", "patched", "proof"]
    assert hows[4:] == ["assembled", "assembled"]
    assert out[4].build_info.why == "no constant to patch"
    assert out[5].build_info.why == FIRST
    assert all(v.build_info.seconds >= 0 for v in out)
    again = tmpl.build_many(batch[:2], **kw)
    assert [v.build_info.how for v in again] == ["memory", "memory"]


def _scale(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("s", x=a[i], out={"z": nx.f32})


def test_numba_variants_report_too():
    if nx.jit.numba_site.SIMULATOR:
        pytest.skip("needs the real numba-cuda")
    k = nx.kernel(_scale, cache=False)
    args = (np.zeros(8, np.float32), np.ones(8, np.float32))

    @nx.ptx_expr
    def affine(x: nx.f32, c: nx.f32) -> nx.f32:
        return nx.exp(x * c)

    vs = [k.inject(s=affine.bind(c=c)).specialize(*args) for c in (1.5, 2.5, 3.25)]
    assert [v.cubin and v.build_info.how for v in vs] == ["assembled", "proof", "patched"]


# ---- item 10: only the user's constants vary ---------------------------------------------------
@pytest.mark.parametrize("precision", ["cuda", "accurate"])
@pytest.mark.parametrize("formula", [laplace, transcendental])
def test_sweeps_of_real_formulas_patch_after_their_proof(monkeypatch, precision, formula):
    """The Laplace kernel sweep over ``inv_sigma`` and a formula with tanh, sin and log: the
    first variant is assembled, the second proves the shape, the rest are patched and equal
    ptxas's cubins (before: every variant assembled, the library's own constants such as
    0x3EFFFFFE, 0, inf, NaN and FLT_MIN failing the patch rules)."""
    f = formula(precision)
    tmpl = nx.CudaTemplate(SRC, arch="sm_90", cache=False)
    ref = nx.CudaTemplate(SRC, arch="sm_90", cache=False, patch_constants=False)
    values = [float(v) for v in np.linspace(0.05, 4.0, 12).astype(np.float32)]
    count = Counting(monkeypatch)
    vs = [tmpl.inject(init=ZERO, k=f.bind(**{list(f.params)[-1]: v})) for v in values]
    got = [v.cubin for v in vs]
    assert count.calls <= 1 + 2 * 2                        # as written, one proof (maybe retried)
    assert [v.build_info.how for v in vs[2:]] == ["patched"] * (len(values) - 2)
    shape = tmpl.shape(vs[5].stubs)
    assert shape.values == (struct.unpack("<I", struct.pack("<f", values[5]))[0],)  # the user's
    monkeypatch.undo()
    picks = [0, 1, 6, 11]
    assert [got[i] for i in picks] == [
        ref.inject(init=ZERO, k=f.bind(**{list(f.params)[-1]: values[i]})).cubin for i in picks]


def test_an_init_site_that_writes_a_constant_leaves_the_other_constants_patched(monkeypatch):
    """A site variable set to a constant (template code may fold it): that constant is part of
    the shape, the others still vary (before: patching off for every variant)."""
    tmpl = nx.CudaTemplate(SRC, arch="sm_90", cache=False)
    ref = nx.CudaTemplate(SRC, arch="sm_90", cache=False, patch_constants=False)
    init = f"mov.f32 %v_acc, {f32(1.25)};"
    make = lambda c: f"fma.rn.f32 %v_acc, %v_x, {f32(c)}, %v_acc;"      # noqa: E731
    cs = (1.7, 2.9, 5.3, 0.61)
    vs = [tmpl.inject(init=init, k=make(c)) for c in cs]
    got = [v.cubin for v in vs]
    assert [v.build_info.how for v in vs] == ["assembled", "proof", "patched", "patched"]
    shape = tmpl.shape(vs[0].stubs)
    assert len(shape.values) == 1 and f32(1.25)[2:] in shape.texts[0][0]
    assert got == [ref.inject(init=init, k=make(c)).cubin for c in cs]


def test_constant_roles():
    stubs = ["{ .reg .f32 %t; mov.f32 %t, 0f00800000; fma.rn.f32 %v_z, %v_x, 0f3FC00000, %t; }",
             "mov.f32 %v_w, 0f3F800000;",
             "{ .reg .f32 %s; add.rn.f32 %s, 0f40000000, 0f3F000000; mul.rn.f32 %v_z, %v_x, %s; }",
             "{ .reg .f32 %s; mov.f32 %s, 0f00000000; add.rn.f32 %s, %s, 0f3F000000; }",
             "mul.rn.f32 %v_z, %v_x, 0f40400000;"]
    texts, values = split_constants(stubs)
    vary, why = constant_roles(texts, values, kinds_of(texts), [False] * 7 + [True])
    assert vary == [False, True, False, False, False, False, False, False]
    assert "outside [2^-100, 2^100)" in why[0] and "%v_w is set to a constant" in why[2]
    assert "'add.rn.f32' computes on constants only" in why[3] == why[4]
    assert "a zero" in why[5] and "computes on constants only" in why[6]
    assert why[7] == "library"
    fixed, kept = fix_constants(texts, values, vary)
    assert kept == (0x3FC00000,) and "0f00800000" in fixed[0][0] and len(fixed[1]) == 1
    # a computation on fixed constants only is no reason to fix anything
    texts, values = split_constants(["{ .reg .f32 %s; add.rn.f32 %s, 0f00000000, 0f7F800000; "
                                     "fma.rn.f32 %v_z, %v_x, 0f3FC00000, %s; }"])
    assert constant_roles(texts, values, "fff")[0] == [False, False, True]


def test_a_constant_in_a_comment_is_part_of_the_shape(monkeypatch):
    """A literal in a comment never reaches the cubin: before, it failed every proof of the
    shape (with no reason); now it is part of the shape and the real constant is patched."""
    tmpl = nx.CudaTemplate(SPINE_SRC, arch="sm_90", cache=False)
    make = lambda c: f"mul.rn.f32 %v_z, %v_x, {f32(c)}; // was {f32(c)}"   # noqa: E731
    vs = [tmpl.inject(combine=make(c)) for c in (1.7, 2.9, 5.3)]
    assert [v.cubin and v.build_info.how for v in vs] == ["assembled", "assembled", "assembled"]
    assert "it is in a comment" in vs[0].build_info.why          # each its own shape
    make = lambda c: f"mul.rn.f32 %v_z, %v_x, {f32(c)}; // scale"        # noqa: E731
    vs = [tmpl.inject(combine=make(c)) for c in (1.7, 2.9, 5.3)]
    assert [v.cubin and v.build_info.how for v in vs] == ["assembled", "proof", "patched"]


def test_library_constants_are_known_per_formula():
    from numptx.jit.compile.patch import LibraryText, library_literals
    tmpl = nx.CudaTemplate(SRC, arch="sm_90", cache=False)
    lap = laplace("accurate").bind(inv_sigma=1.5)
    lib = library_literals(lap)
    assert "0f3EFFFFFE" in lib and f32(1.5) not in lib
    v = tmpl.inject(init=ZERO, k=lap)
    assert isinstance(v.stubs[1], LibraryText) and v.stubs[1].library == lib
    assert type(v.stubs[0]) is str                      # raw PTX: every literal is the user's

    @nx.ptx_expr
    def plain(x: nx.f32, y: nx.f32, acc: nx.f32, c: nx.f32) -> nx.f32:
        return acc + x * c + 0.5
    assert library_literals(plain.bind(c=2.0)) == frozenset()
    assert library_literals("mov.f32 %v_z, 0f3F800000;") == frozenset()


@pytest.mark.gpu
def test_gpu_patched_sweep_and_nan_half_constants_compute_like_numpy():
    """Patched variants (the Laplace sweep, and constants whose low half is an f16 NaN, a shape
    class of their own) run and match NumPy."""
    tmpl = nx.CudaTemplate(SRC, arch="sm_90")
    n = 1000
    a = (np.random.rand(n) * 4 - 2).astype(np.float32)
    b = np.random.rand(n).astype(np.float32)
    lap = laplace("accurate")
    for v in (0.5, 1.25, 3.9373016357421875, 2.0, 0.75, 3.9375):
        var = tmpl.inject(init=ZERO, k=lap.bind(inv_sigma=v))
        out = np.zeros(n, np.float32)
        var[(n + 255) // 256, 256](out, a, b, n)
        want = np.exp(-np.abs(a.astype(np.float64) - b) * np.float32(v))
        np.testing.assert_allclose(out, want, rtol=2e-6, atol=0)
    raw = lambda c: f"mul.rn.f32 %v_acc, %v_x, 0f{c:08X};"            # noqa: E731
    for c in (0x3F8A7D35, 0x3FC37E05, 0x40117D33, 0x3F9B7C11):     # low halves f16 NaNs
        var = tmpl.inject(init=ZERO, k=raw(c))
        out = np.zeros(n, np.float32)
        var[(n + 255) // 256, 256](out, a, b, n)
        assert var.build_info.how in ("assembled", "proof", "patched")
        np.testing.assert_array_equal(out, a * np.uint32(c).view(np.float32))
