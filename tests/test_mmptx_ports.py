"""PTX Inject kernels written for mm-ptx port unchanged (issue 16, item 4): ``#include
<ptx_inject.h>`` names numptx's header, ``<stdint.h>``/``<cstdint>`` work under NVRTC without a
toolkit, mm-ptx's custom type tokens work once registered, and stubs ending in NUL bytes
(mm-ptx-py's) are trimmed with one warning before nvJitLink. Real NVRTC and nvJitLink."""
from __future__ import annotations

import os
import warnings

import pytest

import numptx as nx
from numptx.errors import NumptxError, NumptxWarning, StubNulWarning

from conftest import SPINE_SRC

# mm-ptx's examples/ptx_inject/02_custom_types kernel, as its users write it
DOG_SRC = r'''#include <ptx_inject.h>

#define PTX_TYPE_INFO_DOG PTX_TYPES_DESC(f32, f32, f, ID)

extern "C"
__global__
void
kernel(float* out) {
    float x = 5;
    float y = 3;
    float z;
    PTX_INJECT("func",
        PTX_OUT (DOG, z, z),
        PTX_MOD (DOG, x, x),
        PTX_IN  (DOG, y, y)
    );
    *out = z;
}
'''

SIMPLE = SPINE_SRC                 # the conftest's one-site kernel


# ================================================================================ the header name
@pytest.mark.parametrize("line", ["#include <ptx_inject.h>", '#include "ptx_inject.h"',
                                  '#include "ptx_inject.cuh"\n#include <ptx_inject.h>'])
def test_ptx_inject_h_is_numptx_header(line):
    plain = nx.cuda_to_ptx(SIMPLE, arch="sm_90")
    ported = nx.cuda_to_ptx(line + "\n" + SIMPLE, arch="sm_90")
    assert ported == plain                    # the same header: the same PTX, the same site
    site = nx.PtxInject(ported).sites["combine"]
    assert [v.name for v in site.variables] == ["x", "y", "z"]


def test_ptx_inject_h_file_for_nvcc_users():
    path = os.path.join(nx.include_dir(), "ptx_inject.h")
    with open(path) as f:
        text = f.read()
    assert '#include "ptx_inject.cuh"' in text and "register_type" in text
    assert not os.path.exists(os.path.join(nx.include_dir(), "stdint.h"))   # never shadows libc


def test_cuda_template_takes_an_mmptx_kernel():
    t = nx.CudaTemplate("#include <ptx_inject.h>\n#include <stdint.h>\n" + SIMPLE, cache=False)
    v = t.inject(combine="add.f32 %v_z, %v_x, %v_y;")
    assert v.cubin[:4] == b"\x7fELF"


# ================================================================================ stdint
STDINT_SRC = r'''
#include <cstdint>
#include <stdint.h>
static_assert(sizeof(int8_t) == 1 && sizeof(uint8_t) == 1 && sizeof(int16_t) == 2, "8/16");
static_assert(sizeof(int32_t) == 4 && sizeof(uint32_t) == 4, "32");
static_assert(sizeof(int64_t) == 8 && sizeof(uint64_t) == 8 && sizeof(intmax_t) == 8, "64");
static_assert(sizeof(uintptr_t) == sizeof(void*) && sizeof(intptr_t) == sizeof(void*), "ptr");
static_assert(sizeof(int_least16_t) == 2 && sizeof(uint_fast8_t) >= 1, "least/fast");
static_assert((int8_t)-1 < 0 && (int64_t)-1 < 0 && (uint32_t)-1 > 0 && (uint64_t)-1 > 0, "sign");
static_assert(UINT32_MAX == 4294967295u && INT32_MIN == -2147483647 - 1, "limits");
static_assert(INT64_MAX == 9223372036854775807LL && UINT64_C(1) << 63 != 0, "64 limits");
static_assert(UINT8_MAX == 255 && INT16_MAX == 32767 && INT8_MIN == -128, "small limits");
extern "C" __global__ void k(uint64_t* out, const std::uint32_t* a, std::int64_t b) {
    uint32_t x = a[threadIdx.x];
    uint32_t y;
    PTX_INJECT("s", PTX_IN(U32, x), PTX_OUT(U32, y));
    out[threadIdx.x] = (uint64_t)y + (uint64_t)b + (std::uint8_t)x;
}'''


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_fixed_width_integers_under_nvrtc(arch):
    ptx = nx.cuda_to_ptx(STDINT_SRC, arch=arch)
    assert ".param .u64 k_param_0" in ptx and ".param .u64 k_param_2" in ptx
    inj = nx.PtxInject(ptx)
    assert [v.dtype for v in inj.sites["s"].variables] == ["u32", "u32"]
    assert nx.ptx_to_cubin(inj.render({"s": "add.u32 %v_y, %v_x, 1;"}), arch=arch)


# ================================================================================ mm-ptx type tokens
def test_unregistered_mmptx_type_names_the_registration():
    src = DOG_SRC.replace("DOG", "CAT")
    with pytest.raises(nx.AnnotationError) as ei:
        nx.cuda_to_ptx(src)
    e = ei.value
    assert isinstance(e, NumptxError) and e.line == 13           # the PTX_OUT line
    assert "'CAT'" in str(e) and "nx.register_type('CAT', 'f32', 'f32', 'f')" in str(e)
    bits = src.replace("PTX_TYPES_DESC(f32, f32, f, ID)", "PTX_TYPES_DESC(b32, b32, r, U32)")
    with pytest.raises(nx.AnnotationError, match=r"register_type\('CAT', 'b32', 'b32', 'r', "
                                                 r"'\*\(unsigned int\*\)&'\)"):
        nx.cuda_to_ptx(bits)


@pytest.mark.parametrize("header", ["#include <ptx_inject.h>", '#include "ptx_inject.cuh"'])
def test_registered_mmptx_type_token_works(header):
    nx.register_type("DOG", "f32", "f32", "f")          # mm-ptx: PTX_TYPES_DESC(f32, f32, f, ID)
    src = DOG_SRC.replace("#include <ptx_inject.h>", header)
    inj = nx.PtxInject(nx.cuda_to_ptx(src, arch="sm_90"))
    site = inj.sites["func"]
    assert [(v.kind, v.dtype, v.name) for v in site.variables] == \
        [("out", "dog", "z"), ("mod", "dog", "x"), ("in", "dog", "y")]
    out = inj.render({"func": "add.f32 %v_z, %v_x, %v_y;"})
    assert nx.ptx_to_cubin(out, arch="sm_90")[:4] == b"\x7fELF"
    got = nx.emulate("add.f32 %v_z, %v_x, %v_y;", {"x": 5.0, "y": 3.0}, outputs=["z"], site=site)
    assert got["z"] == 8.0


def test_registered_mmptx_u32_bind_kind():
    # PTX_TYPES_DESC(b32, b32, r, U32): the lvalue viewed as unsigned int (numptx's cast mode)
    nx.register_type("H2PAIR", "b32", "b32", "r", "*(unsigned int*)&")
    src = r'''#include <ptx_inject.h>
#include <cuda_fp16.h>
extern "C" __global__ void k(__half2* io) {
    __half2 h = io[threadIdx.x];
    PTX_INJECT("neg", PTX_MOD(H2PAIR, h));
    io[threadIdx.x] = h;
}'''
    inj = nx.PtxInject(nx.cuda_to_ptx(src, arch="sm_90"))
    assert inj.sites["neg"].variables[0].dtype == "h2pair"
    assert nx.ptx_to_cubin(inj.render({"neg": "neg.f16x2 %v_h, %v_h;"}), arch="sm_90")


# ================================================================================ NUL-terminated stubs
def _nul_warnings(caught) -> list:
    return [w for w in caught if issubclass(w.category, StubNulWarning)]


@pytest.fixture(scope="module")
def simple_inj():
    return nx.PtxInject(nx.cuda_to_ptx(SIMPLE, arch="sm_90"))


def test_nul_terminated_stub_is_trimmed_with_one_warning(simple_inj):
    stub = "mov.f32 %v_z, %v_x;\x00\x00"                 # as mm-ptx-py returns it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = simple_inj.render({"combine": stub})
    got = _nul_warnings(caught)
    assert len(got) == 1 and issubclass(got[0].category, NumptxWarning)
    assert issubclass(StubNulWarning, UserWarning)
    assert "'combine'" in str(got[0].message) and "\\x00" in str(got[0].message)
    assert got[0].filename == __file__                    # attributed to the caller's line
    assert "\0" not in out and "mov.f32 %v_z, %v_x;" in out
    assert nx.ptx_to_cubin(out, arch="sm_90")[:4] == b"\x7fELF"
    # every render path trims: bytes, bind, a list in site order
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        raw = simple_inj.render_bytes({"combine": stub})
        bound = simple_inj.render([stub], bind=True)
    assert len(_nul_warnings(caught)) == 2 and b"\0" not in raw and "\0" not in bound
    assert nx.ptx_to_cubin(bound, arch="sm_90")


def test_nul_terminated_stub_builds_in_a_template():
    t = nx.CudaTemplate(SIMPLE, cache=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        v = t.inject(combine="mov.f32 %v_z, %v_x;\x00\x00")
        cubin = v.cubin
    assert len(_nul_warnings(caught)) == 1 and cubin[:4] == b"\x7fELF"
    assert _nul_warnings(caught)[0].filename == __file__


def test_nul_inside_a_stub_is_refused(simple_inj):
    with pytest.raises(nx.RenderError, match=r"site 'combine'.*NUL.*stub line 2") as ei:
        simple_inj.render({"combine": "{\nmov.f32 %v_z,\x00 %v_x;\n}\x00"})
    assert isinstance(ei.value, NumptxError)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # a clean stub warns nothing
        simple_inj.render({"combine": "mov.f32 %v_z, %v_y;"})


def test_numptx_warnings_can_be_made_errors(simple_inj):
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumptxWarning)
        with pytest.raises(StubNulWarning):
            simple_inj.render({"combine": "mov.f32 %v_z, %v_x;\x00"})
