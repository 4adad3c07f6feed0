"""Bad input to templates, variants, builds, the cache and the toolchain wrappers raises a numptx
error that names what is wrong (real NVRTC, nvJitLink and numba-cuda; no GPU)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from numba import cuda

import numptx as nx
from numptx.jit.compile.arch import normalize_arch

from conftest import SPINE_SRC

ADD = "add.f32 %v_z, %v_x, %v_y;"

TWO_SITES = r'''
extern "C" __global__ void kernel(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = a[i], y = b[i], z, w;
        PTX_INJECT("first",  PTX_IN(F32, x), PTX_IN(F32, y), PTX_OUT(F32, z));
        PTX_INJECT("second", PTX_IN(F32, z), PTX_OUT(F32, w));
        out[i] = w;
    }
}'''


@pytest.fixture(scope="module")
def two_sites():
    return nx.CudaTemplate(TWO_SITES, arch="sm_90", cache=False)


@pytest.fixture(scope="module")
def spine_tmpl(spine_ptx):
    return nx.Template(spine_ptx, cache=False)


# ---- stubs that do not assemble name their site and line ----------------------------------------
@pytest.mark.parametrize("bind", [True, False])
def test_a_missing_semicolon_is_blamed_on_the_stubs_last_line(bind):
    tmpl = nx.CudaTemplate(TWO_SITES, arch="sm_90", cache=False, bind=bind)
    with pytest.raises(nx.LinkError) as e:
        tmpl.inject(first="add.f32 %v_z, %v_x, %v_y", second="mov.f32 %v_w, %v_z;").cubin
    assert e.value.site == "first" and e.value.stub_line == "add.f32 %v_z, %v_x, %v_y"
    assert "missing ';'" in str(e.value) and "invalid stub for site 'first'" in str(e.value)


def test_a_parse_error_inside_a_stub_names_it(two_sites):
    with pytest.raises(nx.LinkError) as e:
        two_sites.inject(first=ADD, second="mov.f32 %v_w %v_z;").cubin
    assert e.value.site == "second" and e.value.stub_line == "mov.f32 %v_w %v_z;"
    assert "Parsing error" in str(e.value)


@pytest.mark.parametrize("stub, match", [
    ("add.f32 %v_z, %v_x, %v_y;}", r"stub line 1 .* closes a '\}' the stub did not open"),
    ("{\n.reg .f32 %t;\nadd.f32 %v_z, %v_x, %v_y;", r"1 '\{' left open"),
    ("add.f32 %v_z, %v_x, %v_y; // }\n}", r"stub line 2 '\}' closes"),
])
def test_unpaired_braces_are_refused_before_assembly(two_sites, stub, match):
    with pytest.raises(nx.LinkError, match=match) as e:
        two_sites.inject(first=stub, second="mov.f32 %v_w, %v_z;")
    assert e.value.site == "first"


def test_braces_in_comments_and_vector_operands_are_fine(two_sites):
    stub = "/* { */ { .reg .f32 %t; add.f32 %t, %v_x, %v_y; mov.f32 %v_z, %t; } // }"
    assert two_sites.inject(first=stub, second="mov.f32 %v_w, %v_z;").cubin[:4] == b"\x7fELF"


def test_a_stub_that_is_not_text_is_refused_with_its_site(spine_tmpl):
    with pytest.raises(nx.RenderError, match="stub of site 'combine' is not encodable"):
        spine_tmpl.inject(combine="add.f32 %v_z, %v_x, %v_y; // \ud800")


# ---- site names and the missing= option -----------------------------------------------------------
def test_unknown_and_missing_sites_are_render_errors(two_sites):
    with pytest.raises(nx.RenderError) as e:
        two_sites.inject(first=ADD, second=ADD, nope=ADD)
    assert e.value.unknown == ("nope",)
    with pytest.raises(nx.RenderError) as e:
        two_sites.inject(first=ADD)
    assert e.value.missing == ("second",)
    with pytest.raises(nx.RenderError, match="missing='emtpy': use 'error' or 'empty'"):
        two_sites.inject(first=ADD, missing="emtpy")


# ---- build_many keeps going and keeps the index ---------------------------------------------------
class _Refusing:
    """An executor whose cluster went away: every submit raises."""

    def submit(self, *args, **kwargs):
        raise RuntimeError("executor is shut down")


def test_build_many_with_an_executor_that_refuses_jobs(spine_tmpl):
    batch = [{"combine": f"add.f32 %v_z, %v_x, 0f{0x3F800000 + i:08X};"} for i in range(3)]
    with pytest.raises(nx.BuildError) as e:
        spine_tmpl.build_many(batch, executor=_Refusing())
    assert sorted(e.value.errors) == [0, 1, 2]
    err = e.value.errors[1]
    assert isinstance(err, nx.NumptxError) and "executor did not take the job" in str(err)
    assert isinstance(err.__cause__, RuntimeError)


def test_build_many_keeps_the_index_of_an_unencodable_stub(spine_tmpl):
    batch = [{"combine": ADD}, {"combine": ADD + " // \ud800"}, {"combine": "sub.f32 %v_z, %v_x, %v_y;"}]
    out = spine_tmpl.build_many(batch, errors="return")
    assert isinstance(out[1], nx.RenderError)
    assert out[0].cubin[:4] == out[2].cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("kwargs, match", [
    ({"batch": 5}, "a list of stub mappings, not int"),
    ({"batch": {"combine": ADD}}, r"not one mapping: build_many\(\[\{...\}"),
    ({"batch": [], "max_workers": -1}, "max_workers=-1"),
    ({"batch": [], "max_workers": 1.5}, "max_workers=1.5"),
    ({"batch": [], "executor": "threads"}, "a concurrent.futures.Executor, not str"),
])
def test_build_many_arguments(spine_tmpl, kwargs, match):
    batch = kwargs.pop("batch")
    with pytest.raises(nx.NumptxError, match=match):
        spine_tmpl.build_many(batch, **kwargs)


# ---- architectures, options, sources --------------------------------------------------------------
@pytest.mark.parametrize("arch", [(9, 10), (8, 10), (-1, 5), (100, 0), (9, True), (True, 0), 1299,
                                  "sm_1000", "sm_09", 9.0, None, "sm90x"])
def test_architectures_out_of_range_are_refused(arch):
    with pytest.raises(nx.NumptxError, match="unknown GPU architecture"):
        normalize_arch(arch)


@pytest.mark.parametrize("arch, want", [((9, 0), (90, "")), ((12, 1), (121, "")), ((9, 0, "a"), (90, "a")),
                                        (100, (100, "")), (" SM_90A ", (90, "a")), ("compute_75", (75, ""))])
def test_architectures_in_range(arch, want):
    assert normalize_arch(arch) == want


def test_a_nul_in_cuda_source_is_refused_with_its_line():
    src = 'extern "C" __global__ void first(float* o) { o[0] = 1; }\n// \0\nnot C++ at all'
    with pytest.raises(nx.CompileError, match=r"numptx_template.cu:2: the source contains a NUL"):
        nx.cuda_to_ptx(src)


def test_one_string_is_one_option(tmp_path, spine_ptx):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "myhdr.h").write_text("#define SCALE 2.0f\n")
    src = SPINE_SRC.replace("out[i] = z;", "out[i] = z * SCALE;")
    ptx = nx.cuda_to_ptx('#include "myhdr.h"\n' + src, include_paths=str(inc), options="-lineinfo")
    assert ".loc" in ptx                                   # -lineinfo reached NVRTC whole
    tmpl = nx.Template(spine_ptx, link_options="-lineinfo", cache=False)
    assert tmpl.link_options == ("-lineinfo",)
    assert nx.ptx_to_cubin(spine_ptx, options="-O3")[:4] == b"\x7fELF"


@pytest.mark.parametrize("call, match", [
    (lambda p: nx.Template(p, link_options=[5]), r"link_options\[0\] is int 5"),
    (lambda p: nx.Template(p, link_options=5), "link_options takes a string or a list of strings"),
    (lambda p: nx.Template(p, entry=5), "entry= names the kernel"),
    (lambda p: nx.Template(p.encode()), r"a template is PTX text \(str\), not bytes"),
    (lambda p: nx.Template(p, cache=5), "cache= takes True, False, None, a folder or a CubinCache"),
    (lambda p: nx.CubinCache(5), r"CubinCache\(directory=\) is a folder path"),
    (lambda p: nx.cuda_to_ptx(SPINE_SRC, options=[5]), r"cuda_to_ptx\(options=\)\[0\] is int"),
    (lambda p: nx.ptx_to_cubin(None), r"ptx_to_cubin takes PTX text \(str or bytes\), not NoneType"),
])
def test_argument_types_are_checked(spine_ptx, call, match):
    with pytest.raises(nx.NumptxError, match=match):
        call(spine_ptx)


def test_cache_may_be_a_folder(tmp_path, spine_ptx):
    tmpl = nx.Template(spine_ptx, cache=str(tmp_path / "c"))
    v = tmpl.inject(combine=ADD)
    assert v.cubin[:4] == b"\x7fELF"
    assert os.path.exists(tmpl.cache.path(v.key))


# ---- numba kernels --------------------------------------------------------------------------------
def _k_dsl_type_as_a_cast(out, a):
    i = cuda.grid(1)
    if i < out.size:                        # a numptx object numba cannot type (issue 14: a
        out[i] = nx.site("s", x=nx.f32(a[i]), out={"z": nx.f32})   # dict variable now works)


def test_numba_compile_failures_are_compile_errors_with_a_hint():
    k = nx.kernel(_k_dsl_type_as_a_cast)
    args = (np.zeros(8, np.float32), np.ones(8, np.float32))
    with pytest.raises(nx.CompileError) as e:
        k.ptx(*args)
    msg = str(e.value)
    assert "could not compile kernel '_k_dsl_type_as_a_cast'" in msg
    assert "write out= and mod= as dict literals in the call" in msg
    assert e.value.__cause__ is not None                   # numba's own error, kept


def _apply(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = nx.site("s", x=a[i], out={"z": nx.f32})


def test_numba_kernel_arguments_and_signatures():
    k = nx.kernel(_apply)
    with pytest.raises(nx.NumptxError, match=r"kernel '_apply' takes 2 argument\(s\), 1 given"):
        k.ptx(np.zeros(8, np.float32))
    with pytest.raises(nx.NumptxError, match=r"bad kernel signature .*flot32"):
        k.ptx(signature="void(flot32[:], float32[:])")
    with pytest.raises(nx.NumptxError, match="argument 1 .* has no numba type"):
        k.ptx(np.zeros(8, np.float32), object())


def test_numba_build_many_names_the_python_kernel():
    k = nx.kernel(_apply)
    args = (np.zeros(8, np.float32), np.ones(8, np.float32))
    with pytest.raises(nx.BuildError) as e:
        k.build_many([{"s": "mov.f32 %v_z, %v_x;"}, {"s": "bogus.f32 %v_z;"}], args=args)
    assert str(e.value).startswith("1 of 2 variant(s) failed to build (_apply, sm_90)")


def test_nx_kernel_checks_its_options_and_signature_at_the_decorator():
    with pytest.raises(nx.NumptxError, match="unknown option.*ccc.*it takes bind, cache, cc"):
        nx.kernel(ccc=(8, 0))
    with pytest.raises(nx.NumptxError, match="bad kernel signature 'void\\(garbage\\)'"):
        nx.kernel("void(garbage)")
    assert isinstance(nx.kernel(cc=(8, 0), patch_constants=False)(_apply), nx.Kernel)


def test_numpy_integers_are_integers(spine_tmpl):
    """Review finding: NumPy ints worked before argument checking came in."""
    v = spine_tmpl.build_many([{"combine": ADD}], max_workers=np.int64(2))
    assert v[0].cubin[:4] == b"\x7fELF"
    assert nx.CubinCache(None, memory_entries=np.int32(4), disk=False).memory_entries == 4
    with pytest.raises(nx.NumptxError, match="max_workers=True"):
        spine_tmpl.build_many([], max_workers=True)


def test_constant_plan_lookups_are_not_counted_as_misses(spine_ptx):
    cache = nx.CubinCache(None, disk=False)
    tmpl = nx.Template(spine_ptx, cache=cache)
    tmpl.inject(combine="mul.rn.f32 %v_z, %v_x, 0f3FC00000;").cubin
    info = cache.info()
    assert (info.hits, info.misses) == (0, 1)
