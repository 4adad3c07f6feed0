"""CUDA-side annotations: the ptx_inject.cuh macros and the comment form (numptx.annotate),
compiled with the real NVRTC; the PTX markers are parsed back and checked."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = os.path.join(ROOT, "numptx", "include")
HEADER = os.path.join(INCLUDE, "ptx_inject.cuh")


from numptx import annotate, dtypes, errors
from numptx.jit.compile.nvrtc import cuda_to_ptx as _cuda_to_ptx

AnnotationError = errors.AnnotationError

# ---------------------------------------------------------------------------------------------
# compiling
# ---------------------------------------------------------------------------------------------
try:
    from cuda.pathfinder import find_nvidia_header_directory
    CUDA_INCLUDE = find_nvidia_header_directory("cudart")
except Exception:  # pragma: no cover
    CUDA_INCLUDE = None
HAVE_FP16 = bool(CUDA_INCLUDE and os.path.exists(os.path.join(CUDA_INCLUDE, "cuda_fp16.h")))


class NvrtcFailed(Exception):
    pass


def nvrtc_raw(src: str, *, name: str = "test.cu", include_header: bool = False,
              std: str = "c++17") -> str:
    """Plain NVRTC, compute_90: no processing, numptx's header only on the include path."""
    from cuda.bindings import nvrtc
    err, prog = nvrtc.nvrtcCreateProgram(src.encode(), name.encode(), 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    opts = [b"--gpu-architecture=compute_90", f"--std={std}".encode()]
    if include_header:
        opts.append(f"-I{INCLUDE}".encode())
    if CUDA_INCLUDE:
        opts.append(f"-I{CUDA_INCLUDE}".encode())
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        buf = bytearray(max(size, 1))       # fresh buffers: NVRTC writes into them
        nvrtc.nvrtcGetProgramLog(prog, buf)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise NvrtcFailed(bytes(buf).rstrip(b"\0").decode(errors="replace"))
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        ptx = bytearray(max(size, 1))
        nvrtc.nvrtcGetPTX(prog, ptx)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return bytes(ptx).rstrip(b"\0").decode()


def compile_ptx(src: str, *, name: str = "test.cu") -> str:
    """The numptx pipeline: header included, comment form rewritten, user types defined."""
    if _cuda_to_ptx is not None:
        return _cuda_to_ptx(src, arch="sm_90", name=name)
    processed = annotate.process_cuda(src, source_name=name)  # pragma: no cover
    annotate.check_macro_annotations(processed, source_name=name)
    return nvrtc_raw('#include "ptx_inject.cuh"\n' + annotate.user_type_defines()
                     + f'#line 1 "{name}"\n' + processed, name=name, include_header=True)


# ---------------------------------------------------------------------------------------------
# reading the PTX back
# ---------------------------------------------------------------------------------------------
_ASM_BLOCK = re.compile(r"// begin inline asm\n(.*?)\n\s*// end inline asm", re.S)


class PtxSite:
    def __init__(self, lines: list[str]):
        self.lines = lines
        begin = next(i for i, l in enumerate(lines) if l.startswith("// PTX_INJECT_BEGIN "))
        end = lines.index("// PTX_INJECT_END")
        self.name = lines[begin].split()[2]
        assert lines[0] == "{" and lines[-1] == "}"
        self.regs = [l for l in lines[1:begin] if l.startswith(".reg")]
        self.movs_in = [l for l in lines[1:begin] if l.startswith("mov.")]
        assert len(self.regs) + len(self.movs_in) == begin - 1
        # the .reg declarations come first
        assert all(l.startswith(".reg") for l in lines[1:1 + len(self.regs)])
        self.vars = [tuple(l.split()[2:]) for l in lines[begin + 1:end]]
        assert all(l.startswith("// PTX_INJECT_VAR ") for l in lines[begin + 1:end])
        self.movs_out = lines[end + 1:-1]
        assert all(l.startswith("mov.") for l in self.movs_out)

    def names(self) -> list[str]:
        return [v[4] for v in self.vars]


def ptx_sites(ptx: str) -> list[PtxSite]:
    out = []
    for m in _ASM_BLOCK.finditer(ptx):
        lines = [l.strip() for l in m.group(1).split("\n") if l.strip()]
        if any(l.startswith("// PTX_INJECT_BEGIN") for l in lines):
            out.append(PtxSite(lines))
    return out


def asm_blocks(ptx: str) -> list[str]:
    """The inline-asm texts holding markers, with operand registers normalized."""
    return [re.sub(r"%(?:rs|rd|r|fd|f|p)\d+", "%OPND", m.group(1))
            for m in _ASM_BLOCK.finditer(ptx) if "PTX_INJECT_BEGIN" in m.group(1)]


def check_site(site: PtxSite, name: str, variables: list[tuple[str, str, str]]) -> None:
    """Assert the exact marker layout for (kind, dtype, var name) triples."""
    assert site.name == name
    dts = {kind_dt_name[2]: dtypes.get_dtype(kind_dt_name[1]) for kind_dt_name in variables}
    assert site.regs == [f".reg .{dts[n].reg} %v_{n};" for _, _, n in variables]
    assert site.vars == [(k, dts[n].name, dts[n].reg, f"v_{n}", n) for k, _, n in variables]
    # copies in: mod variables first, then in variables (see annotate._asm_template_lines)
    ins = [(k, n) for k, _, n in variables if k == "mod"] + [(k, n) for k, _, n in variables if k == "in"]
    outs = [(k, n) for k, _, n in variables if k != "in"]
    assert len(site.movs_in) == len(ins) and len(site.movs_out) == len(outs)
    for line, (_, n) in zip(site.movs_in, ins):
        assert re.fullmatch(rf"mov\.{dts[n].mov} %v_{n}, (%\w+|[-\w.]+);", line), line
    for line, (_, n) in zip(site.movs_out, outs):
        assert re.fullmatch(rf"mov\.{dts[n].mov} %\w+, %v_{n};", line), line


COMBINE = [("in", "f32", "x"), ("mod", "f32", "acc"), ("out", "f32", "z")]


# ---------------------------------------------------------------------------------------------
# the header itself
# ---------------------------------------------------------------------------------------------
def _header_text() -> str:
    with open(HEADER) as f:
        return f.read()


def test_header_dtype_table_matches_python():
    text = _header_text()
    start = text.index("ORDER DTYPES")
    table = text[start:text.index("END DTYPES", start)]
    rows = re.findall(r'#define PTX_INJECT_TYPE_(\w+) \("(\w+)", "(\w+)", "(\w+)", "(\w)", '
                      r'([\w ]+), ptx_inject_(\w+), \(\)\)', table)
    assert [r[0] for r in rows] == [r[1] for r in rows]
    got = [(n, reg, mov, c, ct, mode) for _, n, reg, mov, c, ct, mode in rows]
    want = [(d.name, d.reg, d.mov, d.constraint, d.ctype, d.mode) for d in dtypes.BUILTIN_DTYPES]
    assert got == want
    for d in dtypes.BUILTIN_DTYPES:  # upper-case spellings
        assert f"#define PTX_INJECT_TYPE_{d.name.upper()} PTX_INJECT_TYPE_{d.name}\n" in text


def test_header_defines_only_prefixed_macros():
    text = _header_text()
    defined = re.findall(r"^\s*#\s*define\s+(\w+)", text, re.M)
    assert "NUMPTX_PTX_INJECT_CUH" in defined and text.count("#ifndef NUMPTX_PTX_INJECT_CUH") == 1
    assert all(n.startswith("PTX_") or n == "NUMPTX_PTX_INJECT_CUH" for n in defined)
    for short in ("F32", "f32", "IN", "OUT", "MOD", "in", "out", "mod"):
        assert short not in defined
    assert "#include" not in re.sub(r"/\*.*?\*/", "", text, flags=re.S)  # needs no includes


def test_header_included_twice_and_with_short_names_in_use():
    src = r'''
#include "ptx_inject.cuh"
#include "ptx_inject.cuh"
extern "C" __global__ void k(float* o) {
    float F32 = o[0], in = o[1], out;
    PTX_INJECT("s", PTX_IN(F32, F32), PTX_IN(F32, in), PTX_OUT(F32, out));
    o[2] = out;
}'''
    (site,) = ptx_sites(nvrtc_raw(src, include_header=True))
    check_site(site, "s", [("in", "f32", "F32"), ("in", "f32", "in"), ("out", "f32", "out")])


# ---------------------------------------------------------------------------------------------
# macro form
# ---------------------------------------------------------------------------------------------
MACRO_COMBINE = r'''
extern "C" __global__ void k(const float* a, float* o) {
    float x = a[0], acc = a[1], z;
    PTX_INJECT("combine", PTX_IN(F32, x), PTX_MOD(F32, acc), PTX_OUT(F32, z));
    o[0] = acc + z;
}'''

COMMENT_COMBINE = r'''
extern "C" __global__ void k(const float* a, float* o) {
    float x = a[0], acc = a[1], z;
    /* PTX_INJECT combine
        in  f32 x
        mod f32 acc
        out f32 z
    */
    o[0] = acc + z;
}'''


def test_macro_one_site_exact_text():
    ptx = compile_ptx(MACRO_COMBINE)
    (site,) = ptx_sites(ptx)
    check_site(site, "combine", COMBINE)
    assert site.movs_in[1].startswith("mov.f32 %v_x, %f")
    # the whole block, as documented
    (block,) = asm_blocks(ptx)
    assert [l.strip() for l in block.split("\n")] == [
        "{", ".reg .f32 %v_x;", ".reg .f32 %v_acc;", ".reg .f32 %v_z;",
        "mov.f32 %v_acc, %OPND;", "mov.f32 %v_x, %OPND;",
        "// PTX_INJECT_BEGIN combine", "// PTX_INJECT_VAR in f32 f32 v_x x",
        "// PTX_INJECT_VAR mod f32 f32 v_acc acc", "// PTX_INJECT_VAR out f32 f32 v_z z",
        "// PTX_INJECT_END", "mov.f32 %OPND, %v_acc;", "mov.f32 %OPND, %v_z;", "}"]
    # mod goes in and out through the same register
    reg_in = site.movs_in[0].split(", ")[1].rstrip(";")
    reg_out = site.movs_out[0].split()[1].rstrip(",")
    assert reg_in == reg_out


def test_macro_two_sites_and_mixed_kinds():
    src = r'''
extern "C" __global__ void k(const float* a, int* b, float* o) {
    float x = a[0], y = a[1], acc = 0.0f, z;
    int n = b[0], m;
    PTX_INJECT("first", PTX_OUT(F32, z), PTX_IN(f32, x), PTX_MOD(F32, acc), PTX_IN(s32, n));
    PTX_INJECT("second", PTX_MOD(S32, n), PTX_OUT(s32, m), PTX_IN(F32, y), PTX_IN(F32, z));
    o[0] = acc + z; b[1] = n + m;
}'''
    sites = ptx_sites(compile_ptx(src))
    assert [s.name for s in sites] == ["first", "second"]
    check_site(sites[0], "first", [("out", "f32", "z"), ("in", "f32", "x"), ("mod", "f32", "acc"),
                                   ("in", "s32", "n")])
    check_site(sites[1], "second", [("mod", "s32", "n"), ("out", "s32", "m"), ("in", "f32", "y"),
                                    ("in", "f32", "z")])


def test_macro_three_argument_form():
    src = r'''
struct V { float x, y, z, w; };
extern "C" __global__ void k(const float* a, float* acc, int* out, V* pv) {
    V v = pv[0];
    int j = threadIdx.x;
    PTX_INJECT("step", PTX_IN(F32, xj, a[j] * 3.0f), PTX_MOD(F32, accj, acc[j]),
               PTX_MOD(f32, acc_w, v.w), PTX_OUT(S32, out0, out[0]), PTX_IN(S32, jj, j + 1));
    pv[1] = v;
}'''
    ptx = compile_ptx(src)
    (site,) = ptx_sites(ptx)
    check_site(site, "step", [("in", "f32", "xj"), ("mod", "f32", "accj"), ("mod", "f32", "acc_w"),
                              ("out", "s32", "out0"), ("in", "s32", "jj")])
    assert "mul.f32" in ptx  # the expression is evaluated before the asm
    # write-backs reach memory: acc[j], out[0] and v.w are stored after the site
    after = ptx[ptx.index("PTX_INJECT_END"):]
    assert after.count("st.global.f32") >= 2 and "st.global.u32" in after


def test_macro_zero_operands():
    src = r'''extern "C" __global__ void k() { PTX_INJECT("nothing"); }'''
    (site,) = ptx_sites(compile_ptx(src))
    assert site.name == "nothing" and site.lines == [
        "{", "// PTX_INJECT_BEGIN nothing", "// PTX_INJECT_END", "}"]


def test_macro_statement_in_unbraced_if():
    src = r'''
extern "C" __global__ void k(float* o) {
    float x = o[0];
    if (x > 0.0f) PTX_INJECT("pos", PTX_MOD(F32, x)); else PTX_INJECT("neg", PTX_MOD(F32, x));
    o[0] = x;
}'''
    assert sorted(s.name for s in ptx_sites(compile_ptx(src))) == ["neg", "pos"]


# C++ declarations to carry each built-in type in the macro and comment forms
_DECLS = {
    "f16": "unsigned short", "f16x2": "unsigned int", "bf16": "unsigned short",
    "bf16x2": "unsigned int", "f32": "float", "f64": "double", "s32": "int",
    "u32": "unsigned int", "s64": "long long", "u64": "unsigned long long",
    "b16": "unsigned short", "b32": "unsigned int", "b64": "unsigned long long",
}


def _all_types_kernel(form: str, kinds=("in", "mod", "out")) -> tuple[str, list]:
    decls, ops, variables, stores = [], [], [], []
    for i, d in enumerate(dtypes.BUILTIN_DTYPES):
        ctype = _DECLS[d.name]
        for kind in kinds:
            n = f"{kind}_{d.name}"
            decls.append(f"    {ctype} {n} = ({ctype})p[{i}];" if kind != "out" else f"    {ctype} {n};")
            tok = d.name.upper() if i % 2 else d.name
            ops.append(f"PTX_{kind.upper()}({tok}, {n})" if form == "macro" else f"        {kind} {tok} {n}")
            variables.append((kind, d.name, n))
            if kind != "in":
                stores.append(f"    q[{len(stores)}] = (double){n};")
    if form == "macro":
        body = ["    PTX_INJECT(\"types\", " + ", ".join(ops[:30]) + ");",
                "    PTX_INJECT(\"types2\", " + ", ".join(ops[30:]) + ");"]
    else:
        body = ["    /* PTX_INJECT types", *ops[:30], "    */", "    /* PTX_INJECT types2",
                *ops[30:], "    */"]
    src = ("extern \"C\" __global__ void k(const long long* p, double* q) {\n"
           + "\n".join(decls + body + stores) + "\n}\n")
    return src, variables


@pytest.mark.parametrize("form", ["macro", "comment"])
def test_every_builtin_type(form):
    src, variables = _all_types_kernel(form)
    sites = ptx_sites(compile_ptx(src))
    assert [s.name for s in sites] == ["types", "types2"]
    check_site(sites[0], "types", variables[:30])
    check_site(sites[1], "types2", variables[30:])
    regs = {v[4]: v[2] for s in sites for v in s.vars}
    assert regs["in_f16"] == "b16" and regs["mod_bf16x2"] == "b32" and regs["out_f64"] == "f64"


@pytest.mark.skipif(not HAVE_FP16, reason="cuda_fp16.h / cuda_bf16.h not found")
@pytest.mark.parametrize("form", ["macro", "comment"])
def test_half_types_copy_bits(form):
    src = r'''
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void k(__half* h, __half2* h2, __nv_bfloat16* b, float* f) {
    __half x = h[0], y;
    __half2 x2 = h2[0];
    __nv_bfloat16 bb = b[0];
''' + ('''
    PTX_INJECT("half", PTX_IN(F16, x), PTX_IN(F16, hx, __float2half(f[0])), PTX_OUT(f16, y),
               PTX_MOD(F16X2, x2), PTX_MOD(BF16, bb), PTX_OUT(B16, raw, h[3]));
''' if form == "macro" else '''
    /* PTX_INJECT half
        in  F16 x
        in  F16 hx = __float2half(f[0])
        out f16 y
        mod F16X2 x2
        mod BF16 bb
        out B16 raw = h[3]
    */
''') + r'''
    h[1] = y; h2[1] = x2; b[1] = bb;
}'''
    ptx = compile_ptx(src)
    (site,) = ptx_sites(ptx)
    check_site(site, "half", [("in", "f16", "x"), ("in", "f16", "hx"), ("out", "f16", "y"),
                              ("mod", "f16x2", "x2"), ("mod", "bf16", "bb"), ("out", "b16", "raw")])
    assert "cvt.rn.f16.f32" in ptx
    # the bits move as 16-bit loads/stores, not byte by byte
    assert "ld.global.u8" not in ptx and "st.global.u8" not in ptx


def _many_operands(n: int, form: str) -> str:
    decls = "\n".join(f"    float v{i} = a[{i}];" for i in range(n))
    kinds = ["in", "mod", "out"]
    if form == "macro":
        ops = ", ".join(f"PTX_{kinds[i % 3].upper()}(F32, v{i})" for i in range(n))
        site = f'    PTX_INJECT("wide", {ops});'
    else:
        site = "    /* PTX_INJECT wide\n" + "\n".join(
            f"        {kinds[i % 3]} f32 v{i}" for i in range(n)) + "\n    */"
    stores = "\n".join(f"    a[{i}] = v{i};" for i in range(n))
    return f'extern "C" __global__ void k(float* a) {{\n{decls}\n{site}\n{stores}\n}}\n'


@pytest.mark.parametrize("form", ["macro", "comment"])
def test_32_operands(form):
    kinds = ["in", "mod", "out"]
    (site,) = ptx_sites(compile_ptx(_many_operands(32, form)))
    check_site(site, "wide", [(kinds[i % 3], "f32", f"v{i}") for i in range(32)])


def test_33_operands_is_an_annotation_error():
    with pytest.raises(AnnotationError, match="33 operands"):
        annotate.check_macro_annotations(_many_operands(33, "macro"))


def test_operand_numbering_in_template():
    # outputs %0..%2 in declaration order (mod read-write, in a write-only slot), inputs %3..%5
    text = annotate.site_asm_text("s", [("out", "f32", "a"), ("in", "s32", "b"), ("mod", "u64", "c")])
    assert text.split("\n\t") == [
        "{", ".reg .f32 %v_a;", ".reg .s32 %v_b;", ".reg .u64 %v_c;",
        "mov.u64 %v_c, %2;", "mov.s32 %v_b, %4;",
        "// PTX_INJECT_BEGIN s", "// PTX_INJECT_VAR out f32 f32 v_a a",
        "// PTX_INJECT_VAR in s32 s32 v_b b", "// PTX_INJECT_VAR mod u64 u64 v_c c",
        "// PTX_INJECT_END", "mov.f32 %0, %v_a;", "mov.u64 %2, %v_c;", "}"]
    stmt = annotate.emit_site("s", [("out", "f32", "a"), ("in", "s32", "b"), ("mod", "u64", "c")])
    assert '"=&f"(__nx_t0), "=r"(__nx_t1), "+&l"(__nx_t2) : "n"(0), "r"(__nx_t1), "n"(0)' in stmt
    assert stmt.startswith("do { ") and stmt.endswith("} while (0);") and "\n" not in stmt


@pytest.mark.parametrize("form", ["macro", "comment"])
def test_unrolled_loop_gives_16_instances(form):
    site = ('PTX_INJECT("body", PTX_IN(F32, x, a[j]), PTX_MOD(F32, acc));' if form == "macro"
            else "/* PTX_INJECT body\n            in f32 x = a[j]\n            mod f32 acc\n        */")
    src = f'''
extern "C" __global__ void k(const float* a, float* o) {{
    float acc = 0.0f;
    #pragma unroll
    for (int j = 0; j < 16; ++j) {{
        {site}
    }}
    o[0] = acc;
}}'''
    sites = ptx_sites(compile_ptx(src))
    assert len(sites) == 16 and all(s.name == "body" for s in sites)
    for s in sites:
        check_site(s, "body", [("in", "f32", "x"), ("mod", "f32", "acc")])
    # each instance reads its own element: 16 different loads feed the sites
    assert len(set(s.movs_in[1] for s in sites)) == 16


@pytest.mark.parametrize("form", ["macro", "comment"])
def test_unused_outputs_and_inputs_stay(form):
    site = ('PTX_INJECT("dead", PTX_IN(F32, x), PTX_OUT(F32, unused));' if form == "macro"
            else "/* PTX_INJECT dead\n        in f32 x\n        out f32 unused\n    */")
    src = f'''
extern "C" __global__ void k(float x) {{
    float unused;
    {site}
}}'''
    ptx = compile_ptx(src)
    (s,) = ptx_sites(ptx)
    check_site(s, "dead", [("in", "f32", "x"), ("out", "f32", "unused")])


def test_macro_and_comment_forms_emit_identical_asm():
    a = asm_blocks(compile_ptx(MACRO_COMBINE))
    b = asm_blocks(compile_ptx(COMMENT_COMBINE))
    assert a == b and len(a) == 1
    src, _ = _all_types_kernel("macro")
    src2, _ = _all_types_kernel("comment")
    a, b = asm_blocks(compile_ptx(src)), asm_blocks(compile_ptx(src2))
    assert a == b and len(a) == 2
    # ... and site_asm_text describes that text
    want = annotate.site_asm_text("combine", COMBINE)
    got = re.sub(r"%OPND", "%N", asm_blocks(compile_ptx(MACRO_COMBINE))[0])
    assert [l.strip() for l in got.split("\n")] == [
        re.sub(r"%\d+", "%N", l.strip()) for l in want.split("\n")]


@pytest.mark.parametrize("form", ["macro", "comment"])
def test_cxx11(form):
    src, variables = _all_types_kernel(form)
    if form == "macro":
        src = '#include "ptx_inject.cuh"\n' + src
    else:
        src = annotate.process_cuda(src)
    sites = ptx_sites(nvrtc_raw(src, include_header=True, std="c++11"))
    check_site(sites[1], "types2", variables[30:])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_nvcc_compiles_both_forms(tmp_path):
    """Plain nvcc (host and device passes, C++11): the header, and process_cuda's output."""
    macro_src, variables = _all_types_kernel("macro")
    comment_src, _ = _all_types_kernel("comment")
    files = {"macro.cu": '#include "ptx_inject.cuh"\n' + macro_src,
             "comment.cu": annotate.process_cuda(comment_src, source_name="comment.cu")}
    blocks = []
    for fname, text in files.items():
        (tmp_path / fname).write_text(text)
        for what, out in (("-ptx", "k.ptx"), ("-c", "k.o")):
            r = subprocess.run(["nvcc", "-std=c++11", "-arch=sm_90", what, f"-I{INCLUDE}", fname,
                                "-o", out], cwd=tmp_path, capture_output=True, text=True,
                               timeout=300)
            assert r.returncode == 0, r.stderr
        ptx = (tmp_path / "k.ptx").read_text()
        sites = ptx_sites(ptx)
        check_site(sites[0], "types", variables[:30])
        check_site(sites[1], "types2", variables[30:])
        blocks.append(asm_blocks(ptx))
    assert blocks[0] == blocks[1]


# ---------------------------------------------------------------------------------------------
# comment form
# ---------------------------------------------------------------------------------------------
def test_comment_form_compiles_without_the_header():
    out = annotate.process_cuda(COMMENT_COMBINE)
    assert "ptx_inject_detail" not in out  # no bits type: no prelude
    (site,) = ptx_sites(nvrtc_raw(out))
    check_site(site, "combine", COMBINE)


def test_comment_form_with_bits_types_compiles_without_the_header():
    src, variables = _all_types_kernel("comment")
    out = annotate.process_cuda(src)
    assert out.startswith(f'#line 1 "{annotate.PRELUDE_NAME}"\n' + annotate.BITS_PRELUDE)
    assert out.count("#ifndef PTX_INJECT_DETAIL_HELPERS") == 1
    sites = ptx_sites(nvrtc_raw(out))
    check_site(sites[0], "types", variables[:30])
    # the prelude coexists with the header, in either order
    nvrtc_raw('#include "ptx_inject.cuh"\n' + out, include_header=True)
    nvrtc_raw(out + '\n#include "ptx_inject.cuh"\n', include_header=True)


def test_comment_form_all_features():
    src = r'''
extern "C" __global__ void k(const float* a, float* o, int* out) {
    float acc = 0.0f, z, w = 1.0f;
    struct { float w; } v; v.w = a[5];
    int j = threadIdx.x;
    /* PTX_INJECT step
        in  f32 xj = a[j] * 2.0f
        // in f32 skipped
        mod F32 acc_w = v.w     // a trailing comment

        out S32 out0=out[0]
        mod f32 acc
        out f32 z
    */
    /* // PTX_INJECT disabled
        in f32 w
    */
    /*PTX_INJECT tight
    in f32 w */
    o[0] = acc + z + v.w;
}'''
    out = annotate.process_cuda(src)
    assert "/* // PTX_INJECT disabled" in out and "PTX_INJECT_BEGIN disabled" not in out
    ptx = compile_ptx(src)
    sites = ptx_sites(ptx)
    assert [s.name for s in sites] == ["step", "tight"]
    check_site(sites[0], "step", [("in", "f32", "xj"), ("mod", "f32", "acc_w"),
                                  ("out", "s32", "out0"), ("mod", "f32", "acc"),
                                  ("out", "f32", "z")])
    check_site(sites[1], "tight", [("in", "f32", "w")])
    assert "skipped" not in ptx


def test_comment_form_preserves_lines():
    src = r'''// line 1
extern "C" __global__ void k(const float* a, float* o) {
    float x = a[0], acc = a[1], z;
    /* PTX_INJECT combine
        in  f32 x
        mod f32 acc

        out f32 z
    */ o[0] = acc + z;   // code after the block stays on its line
    /* PTX_INJECT h
       in b16 hb = (unsigned short)7 */
    o[1] = z;
}
'''
    out = annotate.process_cuda(src, source_name="lines.cu")
    src_lines, out_lines = src.split("\n"), out.split("\n")
    # the bits type brings a prelude that ends with #line 1 "lines.cu"
    body = out_lines[out_lines.index('#line 1 "lines.cu"') + 1:]
    assert len(body) == len(src_lines)
    for i, (s, o) in enumerate(zip(src_lines, body)):
        if 3 <= i <= 8 or 9 <= i <= 10:
            continue
        assert s == o, (i, s, o)
    assert body[3].lstrip().startswith("do {") and "PTX_INJECT_BEGIN combine" in body[3]
    assert body[8].strip() == "o[0] = acc + z;   // code after the block stays on its line"
    assert body[4:8] == ["", "", "", ""]
    assert "PTX_INJECT_BEGIN h" in body[9] and body[10] == ""


def test_compile_errors_point_at_user_lines():
    src = "extern \"C\" __global__ void k(float* o) {\n    float x = o[0];\n" \
          "    /* PTX_INJECT s\n        in f16 x2 = o[1]\n    */\n    undefined_thing();\n}\n"
    # f16 is bits mode: float is 4 bytes, not 2 -> static_assert fires; the undefined call is line 6
    out = annotate.process_cuda(src, source_name="user.cu")
    with pytest.raises(NvrtcFailed) as ei:
        nvrtc_raw(out, name="user.cu")
    log = str(ei.value)
    assert re.search(r"user\.cu\(6\): error: identifier \"undefined_thing\" is undefined", log)
    # the size mismatch is reported in the prelude, instantiated from the user's line 3
    assert re.search(r"numptx_bits_prelude\(\d+\): error: static assertion failed", log)
    assert re.search(r"\[with C=unsigned short, T=float\]\" at line 3 of user\.cu", log)
    assert not re.search(r"user\.cu\((?!2\)|6\))\d+\)", log)  # no other user.cu lines


@pytest.mark.parametrize("src", [
    "",
    "extern \"C\" __global__ void k(float* o) { o[0] = 1.0f; }\n",
    MACRO_COMBINE,
    '/* a comment */ const char* s = "/* PTX_INJECT fake\\n in f32 x */"; // /* PTX_INJECT no\n',
    "// /* PTX_INJECT commented out\n// in f32 x */\n",
    "/* PTX_INJECT_BEGIN x */ /* PTX_INJECTED */ /*PTX_INJECT*/\n",
    "R\"raw(/* PTX_INJECT inraw\n in f32 x */)raw\"; char c = '\"'; int n = 1'000;\n",
    "/* unterminated ordinary comment PTX_INJECT\n",
])
def test_identity_without_comment_sites(src):
    assert annotate.process_cuda(src) == src


def test_comment_block_after_tricky_literals_is_found():
    src = "char c = '\"'; int n = 1'000'000; const char* s = \"*/\\\"\";\n" \
          "/* PTX_INJECT s\n in f32 x\n*/\n"
    out = annotate.process_cuda(src)
    assert out.startswith(src.split("\n")[0]) and "PTX_INJECT_BEGIN s" in out


def test_emit_site_accepts_dtype_objects_and_expressions():
    f32 = dtypes.get_dtype("f32")
    stmt = annotate.emit_site("s", [annotate.SiteVar("mod", f32, "y", "v.w"), ("in", "U64", "i", "j + 1")])
    assert "float __nx_t0 = (float)(v.w);" in stmt and "(v.w) = __nx_t0;" in stmt
    assert "unsigned long long __nx_t1 = (unsigned long long)(j + 1);" in stmt


# ---------------------------------------------------------------------------------------------
# user types
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def user_types():
    bits = dtypes.register_type("nxpair", "b32", "b32", "r")
    cast = dtypes.register_type("nxview", "b32", "b32", "r", "*(unsigned int*)&")
    wide = dtypes.register_type("NxWide", "f64", "f64", "d")
    return bits, cast, wide


def test_user_type_defines(user_types):
    text = annotate.user_type_defines()
    assert '#define PTX_INJECT_TYPE_nxpair ("nxpair", "b32", "b32", "r", unsigned int, ptx_inject_bits, ())\n' in text
    assert "#define PTX_INJECT_TYPE_NXPAIR PTX_INJECT_TYPE_nxpair\n" in text
    assert ('#define PTX_INJECT_TYPE_nxview ("nxview", "b32", "b32", "r", unsigned int, '
            'ptx_inject_cast, (*(unsigned int*)&))\n') in text
    assert "#define PTX_INJECT_TYPE_NXWIDE PTX_INJECT_TYPE_nxwide\n" in text
    assert text.endswith("\n")


_USER_SRC = r'''
struct Pair { short a, b; };
extern "C" __global__ void k(Pair* p, float* f, double* d) {
    Pair pr = p[0];
    float fv = f[0];
    double dv = d[0];
    unsigned int raw;
''' + "{SITE}" + r'''
    p[1] = pr; f[1] = fv; d[1] = dv; p[2] = *(Pair*)&raw;
}'''


@pytest.mark.parametrize("form", ["macro", "comment"])
def test_user_types_in_both_forms(user_types, form):
    if form == "macro":
        site = ('    PTX_INJECT("user", PTX_MOD(nxpair, pr), PTX_MOD(NXVIEW, fv), '
                'PTX_IN(nxwide, dv), PTX_OUT(NXPAIR, raw));')
    else:
        site = ("    /* PTX_INJECT user\n        mod nxpair pr\n        mod NxView fv\n"
                "        in nxwide dv\n        out NXPAIR raw\n    */")
    src = _USER_SRC.replace("{SITE}", site)
    ptx = compile_ptx(src)
    (s,) = ptx_sites(ptx)
    check_site(s, "user", [("mod", "nxpair", "pr"), ("mod", "nxview", "fv"), ("in", "nxwide", "dv"),
                           ("out", "nxpair", "raw")])
    assert s.vars[1] == ("mod", "nxview", "b32", "v_fv", "fv")
    if form == "comment":
        # without numptx's header: needs only the prelude that process_cuda adds
        (s2,) = ptx_sites(nvrtc_raw(annotate.process_cuda(src)))
        assert s2.vars == s.vars


def test_user_type_cast_mode_code(user_types):
    stmt = annotate.emit_site("u", [("mod", "nxview", "fv")])
    assert "unsigned int __nx_t0 = (*(unsigned int*)&(fv));" in stmt
    assert "(*(unsigned int*)&(fv)) = __nx_t0;" in stmt


def test_user_type_macro_form_needs_defines(user_types):
    src = _USER_SRC.replace("{SITE}", '    PTX_INJECT("user", PTX_MOD(nxpair, pr));')
    with pytest.raises(NvrtcFailed):
        nvrtc_raw('#include "ptx_inject.cuh"\n' + src, include_header=True)
    ptx = nvrtc_raw('#include "ptx_inject.cuh"\n' + annotate.user_type_defines() + src,
                    include_header=True)
    (s,) = ptx_sites(ptx)
    check_site(s, "user", [("mod", "nxpair", "pr")])


# ---------------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------------
def _comment_error(body: str, **kw) -> AnnotationError:
    src = "__global__ void k() {\n    float x;\n" + body + "\n}\n"
    with pytest.raises(AnnotationError) as ei:
        annotate.process_cuda(src, source_name="bad.cu", **kw)
    return ei.value


@pytest.mark.parametrize("body, line, pattern", [
    ("    /* PTX_INJECT s\n        in f32 x\n        inout f32 y\n    */", 5, "unknown kind 'inout'"),
    ("    /* PTX_INJECT s\n        in f33 x\n    */", 4, "unknown data type 'f33'"),
    ("    /* PTX_INJECT s\n        in f32\n    */", 4, "missing variable name"),
    ("    /* PTX_INJECT s\n        in\n    */", 4, "missing type"),
    ("    /* PTX_INJECT s\n        in f32 = x\n    */", 4, "missing variable name"),
    ("    /* PTX_INJECT s\n        in f32 x\n\n        out f32 x\n    */", 6, "duplicate variable name 'x'"),
    ("    /* PTX_INJECT s\n        in f32 1x\n    */", 4, "'1x' is not an identifier"),
    ("    /* PTX_INJECT s\n        in f32 a.b\n    */", 4, "'a.b' is not an identifier"),
    ("    /* PTX_INJECT s\n        in f32 x y\n    */", 4, "unexpected text 'y'"),
    ("    /* PTX_INJECT s\n        in f32 x =\n    */", 4, "missing expression"),
    ("    /* PTX_INJECT 9lives\n        in f32 x\n    */", 3, "site name '9lives' is not an identifier"),
    ("    /* PTX_INJECT my-site\n    */", 3, "not an identifier"),
    ("    /* PTX_INJECT\n        in f32 x\n    */", 3, "without a site name"),
    ("    /* PTX_INJECT s extra\n    */", 3, "unexpected text after the site name"),
    ("    /* PTX_INJECT s\n        in f32 x\n", 3, "unterminated"),
])
def test_comment_errors_carry_the_line(body, line, pattern):
    e = _comment_error(body)
    assert e.line == line
    assert str(e).startswith(f"bad.cu:{line}: ")
    assert re.search(pattern, str(e)), str(e)


def test_unknown_type_message_lists_known_types():
    e = _comment_error("    /* PTX_INJECT s\n        in floaty x\n    */")
    assert "site 's'" in str(e) and "f32" in str(e) and "register_type" in str(e)


def test_emit_site_validates():
    with pytest.raises(AnnotationError, match="unknown kind"):
        annotate.emit_site("s", [("inout", "f32", "x")])
    with pytest.raises(AnnotationError, match="duplicate"):
        annotate.emit_site("s", [("in", "f32", "x"), ("out", "f32", "x")])
    with pytest.raises(AnnotationError, match="not an identifier"):
        annotate.emit_site("bad name", [])
    with pytest.raises(AnnotationError, match="unknown data type"):
        annotate.emit_site("s", [("in", "nope", "x")])


@pytest.mark.parametrize("src, line, pattern", [
    ("k() {\n  PTX_INJECT(\"s\", PTX_IN(F33, x));\n}", 2, r"PTX_IN: unknown data type 'F33'"),
    ("k() {\n\n  PTX_INJECT(\"s\",\n    PTX_IN(F32, x),\n    PTX_OUT(G32, y));\n}", 5, "PTX_OUT: unknown data type 'G32'"),
    ("k() {\n  PTX_INJECT(\"s\", PTX_MOD(f16X2, x));\n}", 2, "write the type 'f16X2' as 'f16x2' or 'F16X2'"),
    ("k() {\n  PTX_INJECT(\"s\", PTX_IN(F32, x), PTX_OUT(F32, x));\n}", 2, "duplicate variable name 'x'"),
    ("k() {\n  PTX_INJECT(\"s\", PTX_IN(F32));\n}", 2, "missing variable name"),
    ("k() {\n  PTX_INJECT(\"s\", PTX_IN(F32, a[0]));\n}", 2, r"'a\[0\]' is not an identifier"),
    ("k() {\n  PTX_INJECT(\"s\", PTX_IN(F32, x, f(a, b), c));\n}", 2, "too many arguments"),
    ("k() {\n  PTX_INJECT(\"bad site\", PTX_IN(F32, x));\n}", 2, "site name \"bad site\" is not an identifier"),
    ("k() {\n  PTX_INJECT(\"s\", PTX_IN(F32, x);\n}", 2, "without its closing parenthesis"),
    ("k() {\n  PTX_INJECT();\n}", 2, "without a site name"),
    ("#line 1\nk() {\n  PTX_INJECT(\"s\", PTX_IN(Q, x));\n}", 2, "unknown data type 'Q'"),
    ("#define A 1\n#line 40 \"f.cu\"\nk() {\n  PTX_INJECT(\"s\", PTX_IN(Q, x));\n}", 41, "unknown data type 'Q'"),
])
def test_macro_check_errors(src, line, pattern):
    with pytest.raises(AnnotationError) as ei:
        annotate.check_macro_annotations(src, source_name="m.cu")
    assert ei.value.line == line, str(ei.value)
    assert str(ei.value).startswith(f"m.cu:{line}: ")
    assert re.search(pattern, str(ei.value)), str(ei.value)


def test_macro_check_ignores_header_defines_comments_and_strings(user_types):
    annotate.check_macro_annotations(_header_text(), source_name="ptx_inject.cuh")
    src = r'''
#define MY_SITE(v) PTX_INJECT("m", PTX_IN(NOPE, v))
#define LONG_ONE \
    PTX_IN(NOPE2, x)
// PTX_IN(NOPE3, x) in a comment
/* PTX_OUT(NOPE4, y) in a block comment */
const char* s = "PTX_MOD(NOPE5, z)";
__global__ void k(float x, float y) {
    PTX_INJECT("ok", PTX_IN(F32, x), PTX_IN(f32, y), PTX_OUT(nxpair, p), PTX_IN(NXVIEW, v, w[0]));
    PTX_INJECT(SITE_NAME_MACRO, PTX_IN(B64, x));
}'''
    annotate.check_macro_annotations(src)
    annotate.check_macro_annotations(MACRO_COMBINE)
    annotate.check_macro_annotations(_many_operands(32, "macro"))


def test_processed_source_passes_the_macro_check():
    src, _ = _all_types_kernel("comment")
    annotate.check_macro_annotations(annotate.process_cuda(src))


def test_macro_check_line_through_process_cuda_prelude():
    src = ("/* PTX_INJECT h\n in b16 x = (unsigned short)1\n*/\n"
           "k() {\n  PTX_INJECT(\"s\", PTX_IN(Q, x));\n}")
    out = annotate.process_cuda(src)
    assert out.startswith("#line 1 ") and "#ifndef" in out
    with pytest.raises(AnnotationError) as ei:
        annotate.check_macro_annotations(out)
    assert ei.value.line == 5


def test_pipeline_reports_annotation_errors_not_nvrtc():
    src = MACRO_COMBINE.replace("PTX_IN(F32, x)", "PTX_IN(F23, x)")
    with pytest.raises(AnnotationError) as ei:
        compile_ptx(src, name="pipe.cu")
    assert ei.value.line == 4 and "pipe.cu:4:" in str(ei.value)
