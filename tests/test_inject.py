"""PTX Inject end to end: annotated CUDA -> NVRTC -> sites -> render -> nvJitLink (all real)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import numptx as nx
from conftest import SPINE_SRC


def test_spine_acceptance(spine_ptx):
    inj = nx.PtxInject(spine_ptx)
    site = inj.sites["combine"]
    assert site.instances == 1
    assert [v.name for v in site.variables] == ["x", "y", "z"]
    x, y, z = site["x"], site["y"], site["z"]
    assert (z.kind, z.dtype) == ("out", "f32")
    assert (x.kind, x.dtype, x.reg_type) == ("in", "f32", "f32")
    assert not x.reg.startswith("%")
    stub = f"add.ftz.f32 %{z.reg}, %{x.reg}, %{y.reg};"
    out_ptx = inj.render({"combine": stub})
    assert stub in out_ptx and "PTX_INJECT_BEGIN" not in out_ptx
    cubin = nx.ptx_to_cubin(out_ptx, arch="sm_90")
    assert isinstance(cubin, bytes) and len(cubin) > 0
    assert cubin[:4] == b"\x7fELF"


def test_sites_mapping_order_and_signature():
    src = r'''
    extern "C" __global__ void k(float* o, const float* a) {
        float x = a[0], acc = a[1], z, w;
        PTX_INJECT("second", PTX_IN(F32, x), PTX_OUT(F32, w));
        PTX_INJECT("first", PTX_IN(F32, x), PTX_MOD(F32, acc), PTX_OUT(F32, z));
        o[0] = z + acc + w;
    }'''
    inj = nx.PtxInject(nx.cuda_to_ptx(src, arch="sm_80"))
    assert list(inj.sites) == ["second", "first"]          # first-appearance order
    assert len(inj.sites) == 2 and "first" in inj.sites and "nope" not in inj.sites
    first = inj.sites["first"]
    assert first.signature == "first(in f32 x, mod f32 acc, out f32 z)"
    assert [v.name for v in first.inputs] == ["x", "acc"]
    assert [v.name for v in first.outputs] == ["acc", "z"]
    with pytest.raises(nx.NumptxError, match="no variable 'q'.*first"):
        first["q"]
    with pytest.raises(KeyError):
        first["q"]
    with pytest.raises(nx.NumptxError, match="no site named 'nope'"):
        inj.sites["nope"]
    r = {n: v.reg for n, v in first._by_name.items()}
    w = inj.sites["second"]
    ptx = inj.render({
        "first": f"fma.rn.f32 %{r['acc']}, %{r['x']}, %{r['x']}, %{r['acc']};\nmov.f32 %{r['z']}, %{r['x']};",
        "second": f"neg.f32 %{w['w'].reg}, %{w['x'].reg};",
    })
    for arch in ("sm_80", "sm_90"):
        assert nx.ptx_to_cubin(ptx, arch=arch)


UNROLL_SRC = r'''
extern "C" __global__ void gemmish(float* c, const float* a, const float* b) {
    float acc = 0.0f;
    #pragma unroll
    for (int k = 0; k < 16; ++k) {
        float x = a[threadIdx.x * 16 + k], y = b[k];
        PTX_INJECT("mac", PTX_IN(F32, x), PTX_IN(F32, y), PTX_MOD(F32, acc));
    }
    c[threadIdx.x] = acc;
}'''


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_unrolled_loop_instances_normalized(arch):
    ptx = nx.cuda_to_ptx(UNROLL_SRC, arch=arch)
    inj = nx.PtxInject(ptx)
    site = inj.sites["mac"]
    assert site.instances == 16
    # before normalization every instance reads different template registers
    movs = re.findall(r"mov\.f32 %v_x, (%f\d+);", ptx)
    assert len(movs) == 16 and len(set(movs)) == 16
    x, y, acc = site["x"], site["y"], site["acc"]
    stub = f"fma.rn.f32 %{acc.reg}, %{x.reg}, %{y.reg}, %{acc.reg};"
    out = inj.render({"mac": stub})
    assert out.count(stub) == 16
    assert nx.ptx_to_cubin(out, arch=arch)


def test_expression_operands_array_and_vector():
    src = r'''
    extern "C" __global__ void k(float4* v4, float* acc, int* out, const float* a) {
        int j = threadIdx.x;
        float4 v = v4[j];
        PTX_INJECT("step", PTX_IN(F32, xj, a[j] * 2.0f), PTX_MOD(F32, acc_j, acc[j]),
                   PTX_MOD(F32, vw, v.w), PTX_OUT(S32, o0, out[0]));
        v4[j] = v;
    }'''
    inj = nx.PtxInject(nx.cuda_to_ptx(src))
    site = inj.sites["step"]
    assert [(v.kind, v.dtype, v.name) for v in site.variables] == [
        ("in", "f32", "xj"), ("mod", "f32", "acc_j"), ("mod", "f32", "vw"), ("out", "s32", "o0")]
    r = {v.name: v.reg for v in site.variables}
    stub = (f"add.f32 %{r['acc_j']}, %{r['acc_j']}, %{r['xj']};\n"
            f"mul.f32 %{r['vw']}, %{r['vw']}, %{r['xj']};\n"
            f"cvt.rzi.s32.f32 %{r['o0']}, %{r['xj']};")
    assert nx.ptx_to_cubin(inj.render({"step": stub}), arch="sm_90")


# one site per built-in type: the stub copies the input to the output with the type's mov
_C_TYPES = {"f16": "unsigned short", "f16x2": "unsigned int", "bf16": "unsigned short",
            "bf16x2": "unsigned int", "f32": "float", "f64": "double", "s32": "int",
            "u32": "unsigned int", "s64": "long long", "u64": "unsigned long long",
            "b16": "unsigned short", "b32": "unsigned int", "b64": "unsigned long long"}


@pytest.mark.parametrize("upper", [False, True])
def test_every_builtin_type(upper):
    body = []
    for i, (t, c) in enumerate(_C_TYPES.items()):
        tok = t.upper() if upper else t
        body.append(f"{{ {c} a_{i} = (({c}*)in)[{i}], b_{i}; "
                    f"PTX_INJECT(\"t_{t}\", PTX_IN({tok}, a_{i}), PTX_OUT({tok}, b_{i})); "
                    f"(({c}*)out)[{i}] = b_{i}; }}")
    src = ('extern "C" __global__ void k(unsigned long long* out, const unsigned long long* in) {\n'
           + "\n".join(body) + "\n}")
    inj = nx.PtxInject(nx.cuda_to_ptx(src))
    assert list(inj.sites) == [f"t_{t}" for t in _C_TYPES]
    stubs = {}
    for t in _C_TYPES:
        site = inj.sites[f"t_{t}"]
        a, b = site.variables
        dt = nx.get_dtype(t)
        assert (a.dtype, a.reg_type, b.kind) == (t, dt.reg, "out")
        stubs[site.name] = f"mov.{dt.mov} %{b.reg}, %{a.reg};"
    assert nx.ptx_to_cubin(inj.render(stubs), arch="sm_90")


def test_half_types_with_cuda_fp16_header():
    src = r'''
    #include <cuda_fp16.h>
    extern "C" __global__ void k(__half* o, const __half* a) {
        __half x = a[threadIdx.x], z;
        PTX_INJECT("h", PTX_IN(F16, x), PTX_OUT(F16, z));
        o[threadIdx.x] = z;
    }'''
    inj = nx.PtxInject(nx.cuda_to_ptx(src))
    s = inj.sites["h"]
    ptx = inj.render({"h": f"add.rn.f16 %{s['z'].reg}, %{s['x'].reg}, %{s['x'].reg};"})
    assert nx.ptx_to_cubin(ptx, arch="sm_90")


def test_custom_type_both_forms():
    nx.register_type("pairu16", "b32", "b32", "r")
    nx.register_type("pairu16", "b32", "b32", "r")           # same definition: no-op
    with pytest.raises(nx.TypeRegistryError, match="already"):
        nx.register_type("pairu16", "b64", "b64", "l")
    with pytest.raises(nx.TypeRegistryError, match="built-in"):
        nx.register_type("F32", "b32", "b32", "r")
    src = r'''
    struct Pair { unsigned short lo, hi; };
    extern "C" __global__ void k(Pair* o, const Pair* a) {
        Pair p = a[threadIdx.x], q, r;
        PTX_INJECT("macro_form", PTX_IN(PAIRU16, p), PTX_OUT(pairu16, q));
        /* PTX_INJECT comment_form
            in  pairu16 p
            out pairu16 r
        */
        o[threadIdx.x] = q; o[threadIdx.x + 1] = r;
    }'''
    inj = nx.PtxInject(nx.cuda_to_ptx(src))
    for name in ("macro_form", "comment_form"):
        site = inj.sites[name]
        assert [(v.dtype, v.reg_type) for v in site.variables] == [("pairu16", "b32")] * 2
    stubs = {n: f"prmt.b32 %{s.variables[1].reg}, %{s.variables[0].reg}, 0, 0x1032;"
             for n, s in inj.sites.items()}
    assert nx.ptx_to_cubin(inj.render(stubs), arch="sm_90")


def test_comment_form_through_cuda_to_ptx():
    src = r'''
    extern "C" __global__ void kernel(float* out, const float* a, const float* b, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) {
            float x = a[i], y = b[i], z;
            /* PTX_INJECT combine
                in  f32 x
                in  f32 y
            //  in  f32 skipped
                out f32 z
            */
            /* // PTX_INJECT disabled
                in f32 x
            */
            out[i] = z;
        }
    }'''
    inj = nx.PtxInject(nx.cuda_to_ptx(src))
    assert list(inj.sites) == ["combine"]
    assert [v.name for v in inj.sites["combine"].variables] == ["x", "y", "z"]
    macro = nx.PtxInject(nx.cuda_to_ptx(SPINE_SRC))
    assert macro.sites["combine"].variables == inj.sites["combine"].variables


def test_render_missing_and_unknown(spine_ptx):
    inj = nx.PtxInject(nx.cuda_to_ptx(UNROLL_SRC.replace("c[threadIdx.x] = acc;", r'''
        float q = acc, r;
        PTX_INJECT("post", PTX_IN(F32, q), PTX_OUT(F32, r));
        c[threadIdx.x] = r;''')))
    assert list(inj.sites) == ["mac", "post"]
    with pytest.raises(nx.RenderError, match="no stub for site.*'post'") as e:
        inj.render({"mac": ""})
    assert e.value.missing == ("post",)
    with pytest.raises(nx.RenderError, match="no site named 'typo'") as e:
        inj.render({"mac": "", "post": "", "typo": ""})
    assert e.value.unknown == ("typo",)
    with pytest.raises(nx.RenderError, match="mapping"):
        inj.render("mac")
    with pytest.raises(nx.RenderError, match="one stub per site"):
        inj.render(["mac"])
    assert inj.render(["// m", "// p"]) == inj.render({"post": "// p", "mac": "// m"})
    with pytest.raises(nx.RenderError, match="str"):
        inj.render({"mac": 3, "post": ""})
    # missing="empty": the site becomes a no-op and the PTX still assembles
    post = inj.sites["post"]
    out = inj.render({"post": f"mov.f32 %{post['r'].reg}, %{post['q'].reg};"}, missing="empty")
    assert "PTX_INJECT_BEGIN" not in out and nx.ptx_to_cubin(out)
    outs = inj.render_many([{"mac": "", "post": ""}, {"mac": "// a", "post": "// b"}])
    assert len(outs) == 2 and "// a" in outs[1] and "// a" not in outs[0]


def test_stub_syntax_error_quotes_stub_line(spine_ptx):
    inj = nx.PtxInject(spine_ptx)
    z, x = inj.sites["combine"]["z"], inj.sites["combine"]["x"]
    bad = f"mov.f32 %{z.reg}, %{x.reg};\nadd.f32 %{z.reg}, %{x.reg}, %nosuchreg;"
    with pytest.raises(nx.LinkError) as e:
        nx.ptx_to_cubin(inj.render({"combine": bad}), arch="sm_90")
    err = e.value
    assert err.site == "combine"
    assert err.stub_line == f"add.f32 %{z.reg}, %{x.reg}, %nosuchreg;"
    assert "stub line 2" in str(err) and "nosuchreg" in err.log


def test_a_stub_failing_in_every_instance_is_reported_once_per_line():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_inject import gemm_template
    inj = nx.PtxInject(nx.cuda_to_ptx(gemm_template(4, 4, 4), arch="sm_90"))
    with pytest.raises(nx.LinkError) as e:
        nx.ptx_to_cubin(inj.render(["add.f32 %v_acc, %v_acc, %nope;"]), arch="sm_90")
    text = str(e.value)
    assert "stub line 1 (64 instances, first at PTX line" in text
    assert text.count("stub of site 'mac'") == 2              # two ptxas messages, 64 times each
    assert len(text.splitlines()) < 30 and len(e.value.log.splitlines()) >= 128
    assert "more lines (LinkError.log has them all)" in text


def test_template_error_is_not_blamed_on_stub(spine_ptx):
    with pytest.raises(nx.LinkError) as e:
        nx.ptx_to_cubin(spine_ptx.replace("ld.global.f32", "ld.glibal.f32", 1), arch="sm_90")
    assert e.value.site is None and "PTX line" in str(e.value)
    with pytest.raises(nx.LinkError, match="empty"):
        nx.ptx_to_cubin("", arch="sm_90")
    with pytest.raises(nx.NumptxError, match="architecture"):
        nx.ptx_to_cubin(spine_ptx, arch="sm_9x")
    with pytest.raises(nx.LinkError, match="targets sm_90; compile the template for sm_80"):
        nx.ptx_to_cubin(spine_ptx, arch="sm_80")


def test_cuda_compile_error_carries_log():
    with pytest.raises(nx.CompileError) as e:
        nx.cuda_to_ptx('extern "C" __global__ void k() {\n  int x = ;\n}', name="bad.cu")
    assert "bad.cu(2)" in e.value.log and "bad.cu(2)" in str(e.value)


def test_unknown_type_in_annotations():
    src = 'extern "C" __global__ void k(float* o) {\n float x = o[0];\n PTX_INJECT("s", PTX_IN(F99, x));\n}'
    with pytest.raises(nx.AnnotationError, match=r":3:.*F99"):
        nx.cuda_to_ptx(src)
    src2 = 'extern "C" __global__ void k(float* o) {\n float x = o[0];\n /* PTX_INJECT s\n  in f99 x\n */\n}'
    with pytest.raises(nx.AnnotationError, match=r":4:.*f99"):
        nx.cuda_to_ptx(src2)


# ---- hand-made marker text: parse errors, CRLF, legacy format -----------------------------------

def _block(site, variables, indent="\t"):
    lines = [f"{indent}// PTX_INJECT_BEGIN {site}"]
    lines += [f"{indent}// PTX_INJECT_VAR {k} {t} {t} v_{n} {n}" for k, t, n in variables]
    return "\n".join(lines + [f"{indent}// PTX_INJECT_END"]) + "\n"


def test_missing_end_marker(spine_ptx):
    begin = spine_ptx.index("// PTX_INJECT_BEGIN")
    line = spine_ptx[:begin].count("\n") + 1
    # the PTX ends inside the block: the error points at the BEGIN line
    truncated = spine_ptx[:spine_ptx.index("// PTX_INJECT_END")]
    with pytest.raises(nx.PtxParseError) as e:
        nx.PtxInject(truncated)
    assert e.value.line == line and e.value.code == "missing_end" and e.value.site == "combine"
    assert f"PTX line {line}" in str(e.value) and "PTX_INJECT_END" in str(e.value)
    # END deleted: the first line that is no variable line is at fault
    bad = spine_ptx.replace("// PTX_INJECT_END\n", "")
    with pytest.raises(nx.PtxParseError) as e:
        nx.PtxInject(bad)
    assert e.value.code == "malformed_marker" and e.value.site == "combine"
    assert e.value.line == line + 4 and "mov.f32" in str(e.value)


def test_inconsistent_instances():
    text = ".version 8.0\n" + _block("s", [("in", "f32", "x")]) + "add.f32 %f1, %f1, %f1;\n" \
        + _block("s", [("in", "f32", "x"), ("out", "f32", "y")])
    with pytest.raises(nx.PtxParseError) as e:
        nx.PtxInject(text)
    assert e.value.code == "inconsistent_instances" and e.value.site == "s"
    assert e.value.line in (4, 5, 6, 7)


@pytest.mark.parametrize("text,code", [
    ("// PTX_INJECT_END\n", "unexpected_end"),
    ("// PTX_INJECT_BEGIN\n// PTX_INJECT_END\n", "malformed_marker"),
    ("// PTX_INJECT_BEGIN a b\n// PTX_INJECT_END\n", "malformed_marker"),
    ("// PTX_INJECT_BEGIN a\n// PTX_INJECT_VAR in f32 f32 v_x\n// PTX_INJECT_END\n", "malformed_marker"),
    ("// PTX_INJECT_BEGIN a\n// PTX_INJECT_VAR inout f32 f32 v_x x\n// PTX_INJECT_END\n", "malformed_marker"),
    ("// PTX_INJECT_BEGIN a\nadd.f32 %f1, %f2, %f3;\n// PTX_INJECT_END\n", "malformed_marker"),
    ("// PTX_INJECT_BEGIN a\n// PTX_INJECT_BEGIN b\n// PTX_INJECT_END\n", "nested_site"),
    ("// PTX_INJECT_BEGIN a\n// PTX_INJECT_VAR in f32 f32 v_x x\n// PTX_INJECT_VAR out f32 f32 v_x x\n"
     "// PTX_INJECT_END\n", "duplicate_variable"),
])
def test_parse_error_codes(text, code):
    with pytest.raises(nx.PtxParseError) as e:
        nx.PtxInject(text)
    assert e.value.code == code and e.value.line is not None


def test_crlf_line_endings(spine_ptx):
    crlf = spine_ptx.replace("\n", "\r\n")
    inj = nx.PtxInject(crlf)
    site = inj.sites["combine"]
    assert [v.name for v in site.variables] == ["x", "y", "z"]
    assert site["z"].reg == nx.PtxInject(spine_ptx).sites["combine"]["z"].reg   # no stray '\r'
    out = inj.render({"combine": f"add.f32 %{site['z'].reg}, %{site['x'].reg}, %{site['y'].reg};"})
    assert nx.ptx_to_cubin(out, arch="sm_90")


def test_empty_and_garbage_ptx():
    assert len(nx.PtxInject("").sites) == 0
    assert nx.PtxInject("").render({}) == ""
    garbage = bytes(range(256)) * 50 + b"\n// PTX_INJECT_BEGIN \xff\xfe\n\x00"
    with pytest.raises(nx.PtxParseError):
        nx.PtxInject(garbage)
    assert len(nx.PtxInject(bytes(range(256)) * 50).sites) == 0
    # a marker keyword in the middle of a line is an ordinary comment
    assert len(nx.PtxInject(b"\xfe\xff// PTX_INJECT_BEGIN a\n\x00").sites) == 0
    with pytest.raises(nx.NumptxError):
        nx.PtxInject(12345)


def test_very_long_names():
    long_site, long_var = "s" * 20000, "v" * 5000
    src = f'''extern "C" __global__ void k(float* o) {{
        float {long_var} = o[0], z;
        PTX_INJECT("{long_site}", PTX_IN(F32, {long_var}), PTX_OUT(F32, z));
        o[1] = z;
    }}'''
    inj = nx.PtxInject(nx.cuda_to_ptx(src))
    site = inj.sites[long_site]
    v, z = site[long_var], site["z"]
    ptx = inj.render({long_site: f"mov.f32 %{z.reg}, %{v.reg};"})
    assert nx.ptx_to_cubin(ptx, arch="sm_90")
    with pytest.raises(nx.RenderError) as e:
        inj.render({long_site + "x": ""})
    assert len(str(e.value)) < 100_000


def test_mmptx_legacy_markers():
    text = ("\t{\n\t.reg .f32 %_x0;\n\t.reg .f32 %_x1;\n\tmov.f32 %_x0, %f1;\n"
            "\t// PTX_INJECT_START legacy\n\t// _x0 i f32 F32 x\n\t// _x1 m f32 F32 acc\n"
            "\t// PTX_INJECT_END\n\tmov.f32 %f2, %_x1;\n\t}\n")
    inj = nx.PtxInject(text * 3)
    site = inj.sites["legacy"]
    assert site.instances == 3
    assert [(v.name, v.kind, v.dtype, v.reg) for v in site.variables] == [
        ("x", "in", "f32", "_x0"), ("acc", "mod", "f32", "_x1")]
    out = inj.render({"legacy": "add.f32 %_x1, %_x1, %_x0;"})
    assert out.count("add.f32 %_x1, %_x1, %_x0;") == 3 and "PTX_INJECT_START" not in out


def test_rendered_ptx_reparses_without_sites(spine_ptx):
    inj = nx.PtxInject(spine_ptx)
    s = inj.sites["combine"]
    out = inj.render({"combine": f"mov.f32 %{s['z'].reg}, %{s['x'].reg};"})
    assert len(nx.PtxInject(out).sites) == 0


@pytest.mark.gpu
def test_gpu_launch_injected_kernel(spine_ptx):
    """Launch the injected cubin through the CUDA driver and compare with NumPy."""
    import ctypes

    from cuda.bindings import driver
    from numba import cuda

    inj = nx.PtxInject(spine_ptx)
    s = inj.sites["combine"]
    x, y, z = s["x"].reg, s["y"].reg, s["z"].reg
    stub = f"{{\n.reg .f32 %t;\nmul.rn.f32 %t, %{y}, %{y};\nfma.rn.f32 %{z}, %{x}, %{x}, %t;\n}}"
    cc = cuda.get_current_device().compute_capability
    cubin = nx.ptx_to_cubin(inj.render({"combine": stub}), arch=cc)
    cuda.current_context()                       # numba creates and binds the primary context
    err, module = driver.cuModuleLoadData(cubin)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    err, fn = driver.cuModuleGetFunction(module, b"kernel")
    assert err == driver.CUresult.CUDA_SUCCESS, err
    n = 1000
    rng = np.random.default_rng(0)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    da, db, dout = cuda.to_device(a), cuda.to_device(b), cuda.device_array(n, np.float32)
    ptrs = [ctypes.c_void_p(int(d.device_ctypes_pointer.value)) for d in (dout, da, db)]
    params = (ptrs + [ctypes.c_int(n)])
    argv = (ctypes.c_void_p * 4)(*[ctypes.addressof(p) for p in params])
    (err,) = driver.cuLaunchKernel(fn, (n + 255) // 256, 1, 1, 256, 1, 1, 0, 0, ctypes.addressof(argv), 0)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    cuda.synchronize()
    expect = (a.astype(np.float64) ** 2 + b.astype(np.float64) ** 2).astype(np.float32)
    np.testing.assert_allclose(dout.copy_to_host(), expect, rtol=1e-6)
    driver.cuModuleUnload(module)


def test_render_bytes_matches_render(spine_ptx):
    """The C renderer (one measured buffer) and the str join plan give the same text."""
    inj = nx.PtxInject(nx.cuda_to_ptx(UNROLL_SRC.replace("c[threadIdx.x] = acc;", r'''
        float q = acc, r;
        PTX_INJECT("post", PTX_IN(F32, q), PTX_OUT(F32, r));
        c[threadIdx.x] = r;''')))
    for stubs in ({"mac": "// one line", "post": "// two\n// lines\n"}, {"mac": "", "post": ""},
                  {"mac": "fma.rn.f32 %v_acc, %v_x, %v_y, %v_acc;"}):
        missing = "empty" if len(stubs) == 1 else "error"
        text = inj.render(stubs, missing=missing)
        assert inj.render_bytes(stubs, missing=missing) == text.encode()
    assert nx.ptx_to_cubin(inj.render_bytes({"mac": "", "post": "mov.f32 %v_r, %v_q;"}))


# ---- robustness: mutated marker text never crashes, only NumptxError -------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_PIECES = ["// PTX_INJECT_BEGIN s\n", "// PTX_INJECT_BEGIN t\n", "// PTX_INJECT_END\n",
           "// PTX_INJECT_VAR in f32 f32 v_x x\n", "// PTX_INJECT_VAR out f32 f32 v_y y\n",
           "// PTX_INJECT_VAR mod b32 b32 v_x x\n", "// PTX_INJECT_START s\n", "// _x0 i f32 F32 x\n",
           "add.f32 %f1, %f2, %f3;\n", "\n", "\r\n", "//", "PTX_INJECT_", "\x00", "\xff", " ", "\t"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), max_size=40), st.binary(max_size=16))
def test_fuzz_marker_text(pieces, noise):
    text = "".join(pieces).encode("utf-8", "surrogateescape") + noise
    try:
        inj = nx.PtxInject(text)
    except nx.PtxParseError as e:
        assert e.code and (e.line is None or e.line >= 1)
        return
    stubs = {name: f"// stub {i}" for i, name in enumerate(inj.sites)}
    out = inj.render(stubs)
    assert inj.render_bytes(stubs) == out.encode("utf-8", "surrogateescape")
    assert len(nx.PtxInject(out).sites) == 0
    for name, site in inj.sites.items():
        assert out.count(f"// PTX_INJECT_STUB {name}\n") == site.instances


def test_nvrtc_leaves_python_objects_alone(spine_ptx):
    """NVRTC writes its log and PTX into buffers numptx hands it: they must be fresh. (A
    one-byte ``b" " * 1`` is the interpreter's shared object: an empty log once overwrote it,
    and ``' '.encode()`` returned ``b'\\x00'`` for the rest of the process.)"""
    from conftest import SPINE_SRC
    for _ in range(3):
        nx.cuda_to_ptx(SPINE_SRC, arch="sm_90")
    # (compare byte values: every spelling of b" " is that same shared object)
    assert " ".encode()[0] == 32 and list(b"x y") == [120, 32, 121]
    assert "A B".encode("ascii").split()[1] == "B".encode()
