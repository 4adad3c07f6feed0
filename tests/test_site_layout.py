"""The site layout lives in numptx/site_layout.py; the C core and the CUDA header keep text
copies. These tests compare the copies with the module and check the real components (the
C renderer, NVRTC on the header's macro, the comment form) write exactly that layout."""
from __future__ import annotations

import re
from pathlib import Path

import numptx as nx
from numptx import site_layout as L

ROOT = Path(__file__).resolve().parent.parent
C_CORE = (ROOT / "native" / "ptx_inject.h").read_text()
CUH = (Path(nx.include_dir()) / "ptx_inject.cuh").read_text()


def _c_define(name: str) -> str:
    m = re.search(rf'#define {name} "((?:[^"\\]|\\.)*)"', C_CORE)
    assert m, name
    return m.group(1).encode().decode("unicode_escape")


def test_c_core_strings_match_the_module():
    assert _c_define("PTXINJ__PREFIX") == L.MARKER_PREFIX
    assert _c_define("PTXINJ__TAG") == L.STUB_TAG_OPEN
    assert _c_define("PTXINJ__TAG_END") == L.STUB_TAG_CLOSE
    # the keywords the C parser recognizes after the prefix
    kws = set(re.findall(r'w = "([A-Z]+)"', C_CORE))
    marks = {m[len("// " + L.MARKER_PREFIX):] for m in (L.BEGIN, L.VAR, L.END, L.LEGACY_START)}
    assert kws == marks


def test_c_renderer_writes_the_stub_tags():
    ptx = "\n".join(["{", L.begin_line("s"), L.var_line("out", "f32", "f32", "y"), L.end_line(),
                     "}"])
    inj = nx.PtxInject(f".reg .f32 {L.reg_ref('y')};\n{ptx}\n")
    out = inj.render({"s": "mov.f32 %v_y, 0f3F800000;"}, bind=False)
    want = L.STUB_TAG_OPEN + "s\n" + "mov.f32 %v_y, 0f3F800000;" + L.STUB_TAG_CLOSE
    assert want in out


def _frame(ptx: str, site: str) -> list[str]:
    lines = [ln.strip() for ln in ptx.splitlines()]
    b = lines.index(L.begin_line(site))
    e = lines.index(L.end_line(), b)
    return lines[b:e + 1]


def test_cuda_header_macro_writes_the_layout():
    src = r'''
    extern "C" __global__ void k(float* o, const float* a) {
        float x = a[0], acc = a[1], z;
        PTX_INJECT("combine", PTX_IN(F32, x), PTX_MOD(F32, acc), PTX_OUT(F32, z));
        o[0] = z + acc;
    }'''
    ptx = nx.cuda_to_ptx(src, arch="sm_90")
    assert _frame(ptx, "combine") == [
        L.begin_line("combine"), L.var_line("in", "f32", "f32", "x"),
        L.var_line("mod", "f32", "f32", "acc"), L.var_line("out", "f32", "f32", "z"),
        L.end_line()]
    for v in ("x", "acc", "z"):
        assert f".reg .f32 {L.reg_ref(v)};" in ptx
    # the header's documented example is the same layout
    assert L.var_line("in", "f32", "f32", "x") in CUH


def test_comment_form_writes_the_same_layout():
    src = r'''
    extern "C" __global__ void k(float* o, const float* a) {
        float x = a[0], acc = a[1], z;
        /* PTX_INJECT combine
            in f32 x
            mod f32 acc
            out f32 z
        */
        o[0] = z + acc;
    }'''
    ptx = nx.cuda_to_ptx(src, arch="sm_90")
    assert _frame(ptx, "combine")[1] == L.var_line("in", "f32", "f32", "x")
    site = nx.PtxInject(ptx).sites["combine"]
    assert [v.reg for v in site] == [L.reg_name(n) for n in ("x", "acc", "z")]


def test_reg_helpers_round_trip():
    for name in ("x", "acc_j", "o0"):
        assert L.var_of_reg(L.reg_name(name)) == name
        assert L.var_of_reg(L.reg_ref(name)) == name
    assert L.var_of_reg("%f3") is None and L.var_of_reg("v_") is None
