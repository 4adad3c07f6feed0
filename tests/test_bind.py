"""Stubs bound to the operand registers (``bind=True``, the C core's PTXINJ_RENDER_BIND): the
bound PTX has no copy frames; ptxas makes the same machine code from it (byte for byte in the
cases checked here; in general register allocation may differ, so the GEMM corpus is checked
against an independent Python rendering instead)."""
from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import pytest

import numptx as nx
from numptx import dtypes

from conftest import SPINE_SRC, elf_sections

cuda = pytest.importorskip("numba.cuda")
from numba.cuda import types as nbt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_inject import gemm_template  # noqa: E402


def machine_code(cubin: bytes) -> list[bytes]:
    """Code and kernel-info sections in file order, without their (kernel-named) titles."""
    return [v for k, v in elf_sections(cubin).items() if k.startswith((".text", ".nv.info"))]


_FRAME_OPEN = re.compile(r"\{\s*\n\s*\.reg \.\w+ %v_")
# NVRTC and NVVM keep integers in .b32/.b64 registers: s32/u32/s64/u64 variables (declared
# .s32 ... in the frame) do not bind, since a stub could type-check differently without the frame
UNBOUND_REG_TYPES = {"s32", "u32", "s64", "u64"}


def same_code(inj: nx.PtxInject, stubs, archs=("sm_90",), kept: int = 0) -> str:
    """Render plain and bound, check binding happened except for ``kept`` frames and changed no
    machine code; return the bound PTX."""
    plain, bound = inj.render(stubs), inj.render(stubs, bind=True)
    assert len(_FRAME_OPEN.findall(bound)) == kept < len(_FRAME_OPEN.findall(plain))
    assert len(bound) < len(plain)
    for arch in archs:
        a, b = machine_code(nx.ptx_to_cubin(plain, arch)), machine_code(nx.ptx_to_cubin(bound, arch))
        assert len(a) >= 2 and a == b, arch
    return bound


# an independent rendering of binding, for the frames numptx's annotations emit
_FRAME = re.compile(r"^[ \t]*\{\n((?:[ \t]*\.reg [^\n]*\n)*)((?:[ \t]*mov\.[^\n]*\n)*)"
                    r"[ \t]*// PTX_INJECT_BEGIN (\S+)\n(?:[ \t]*// PTX_INJECT_VAR [^\n]*\n)*"
                    r"[ \t]*// PTX_INJECT_END\n((?:[ \t]*mov\.[^\n]*\n)*)[ \t]*\}\n", re.M)
_MOV = re.compile(r"mov\.\w+ (%[\w$]+), (%[\w$]+);")


def reference_bind(ptx: str, stubs: dict[str, str]) -> str:
    def bind(m: re.Match) -> str:
        ops = {dst: src for dst, src in _MOV.findall(m.group(2))}
        ops.update({src: dst for dst, src in _MOV.findall(m.group(4))})
        stub = re.sub(r"%v_[\w$]+", lambda r: ops[r.group(0)], stubs[m.group(3)])
        tagged = f"\t// PTX_INJECT_STUB {m.group(3)}\n{stub}\n\t// PTX_INJECT_STUB_END\n"
        # a stub that is not one {...} block keeps the frame's scope
        one_block = re.fullmatch(r"\s*\{.*\}\s*", stub, re.S) and stub.count("{") == stub.count("}")
        return tagged if one_block else f"\t{{\n{tagged}\t}}\n"
    return _FRAME.sub(bind, ptx)


NUMBA_TYPES = [("f16", nbt.float16), ("f32", nbt.float32), ("f64", nbt.float64),
               ("s32", nbt.int32), ("u32", nbt.uint32), ("s64", nbt.int64), ("u64", nbt.uint64)]


@pytest.mark.parametrize("tname,nbtype", NUMBA_TYPES, ids=[t for t, _ in NUMBA_TYPES])
def test_numba_sites_of_every_type_bind_to_the_same_machine_code(tname, nbtype):
    T = getattr(nx, tname)

    def k(out, a, acc):
        i = cuda.grid(1)
        for j in range(2):                       # two instances of the site
            z, m = nx.site("s", x=a[i + j], out={"z": T}, mod={"m": acc[i]})
            out[i + j] = z
            acc[i] = m

    arr = nbtype[:]
    ptx, _ = cuda.compile_ptx(k, (arr, arr, arr), cc=(8, 0))
    inj = nx.PtxInject(ptx)
    mov = nx.get_dtype(tname).mov

    def twice(x, m):
        return x + x, m + x
    twice.__annotations__ = {"x": T, "m": T}
    if nx.get_dtype(tname).reg in UNBOUND_REG_TYPES:
        stub = f"mov.{mov} %v_z, %v_x;\nmov.{mov} %v_m, %v_x;"
        assert inj.render([stub], bind=True) == inj.render([stub])
        return
    for stub in (f"mov.{mov} %v_z, %v_x;\nmov.{mov} %v_m, %v_x;",
                 nx.ptx_expr(twice).stub(inj.sites["s"])):
        same_code(inj, [str(stub)], archs=("sm_80", "sm_90"))


def test_cuda_sites_of_every_builtin_type_bind_to_the_same_machine_code():
    # one site per type: y = x, read from and written to global memory as raw bits
    lines, stubs = [], []
    for i, d in enumerate(dtypes.BUILTIN_DTYPES):
        c = d.ctype
        lines.append(f"{{ {c} x = (({c}*)p)[{i}], y; "
                     f"PTX_INJECT(\"s{i}\", PTX_IN({d.name.upper()}, x, ::ptx_inject_detail::bits<{c}>(x)), "
                     f"PTX_OUT({d.name.upper()}, y)); (({c}*)p)[{i + 16}] = "
                     f"::ptx_inject_detail::bits<{c}>(y); }}")
        stubs.append(f"mov.{d.mov} %v_y, %v_x;")
    src = 'extern "C" __global__ void k(unsigned long long* p) {\n' + "\n".join(lines) + "\n}"
    inj = nx.PtxInject(nx.cuda_to_ptx(src, arch="sm_80"))
    assert len(inj.sites) == len(dtypes.BUILTIN_DTYPES)
    kept = sum(d.reg in UNBOUND_REG_TYPES for d in dtypes.BUILTIN_DTYPES)
    assert 0 < kept < len(dtypes.BUILTIN_DTYPES)
    same_code(inj, stubs, archs=("sm_80", "sm_90"), kept=kept)


def _random_mac(r: random.Random) -> str:
    ops = ["a * b + acc", "nx.fma(a, b, acc)", "acc + nx.sqrt(nx.fabs(a * b))",
           "nx.where(a > b, acc + a, acc - b)", "nx.fmax(acc, a * b)", "acc + a / (b + 2.0)",
           "acc + nx.exp(-a * a) * b", "nx.fmin(acc + a, b * 3.0)"]
    return r.choice(ops)


def test_gemm_template_with_dsl_formulas_binds_like_the_reference():
    ptx = nx.cuda_to_ptx(gemm_template(4, 4, 4), arch="sm_90")
    inj = nx.PtxInject(ptx)
    r = random.Random(5)
    for k in range(6):
        body = _random_mac(r)
        ns = {"nx": nx}
        exec(f"def mac(a: nx.f32, b: nx.f32, acc: nx.f32) -> nx.f32:\n    return {body}\n", ns)
        stub = str(nx.ptx_expr(ns["mac"]).stub(inj.sites["mac"]))
        bound = inj.render([stub], bind=True)
        assert bound == reference_bind(ptx, {"mac": stub}), body
        assert bound.count("PTX_INJECT_STUB mac") == inj.sites["mac"].instances == 64
        assert "%v_" not in bound
        assert nx.ptx_to_cubin(bound, "sm_90")[:4] == b"\x7fELF"


def test_a_stub_that_writes_an_input_keeps_its_frame():
    inj = nx.PtxInject(nx.cuda_to_ptx(SPINE_SRC, arch="sm_90"))
    writes_x = "add.f32 %v_x, %v_x, %v_y;\nmov.f32 %v_z, %v_x;"
    assert inj.render([writes_x], bind=True) == inj.render([writes_x])
    reads = "add.f32 %v_z, %v_x, %v_y;"
    assert inj.render([reads], bind=True) != inj.render([reads])
    assert inj.render([reads], bind=True).encode() == inj.render_bytes([reads], bind=True)


def test_a_stub_declaring_an_operand_register_keeps_its_frame():
    inj = nx.PtxInject(nx.cuda_to_ptx(SPINE_SRC, arch="sm_90"))
    shadow = "{\n.reg .f32 %f<100>;\nadd.f32 %f1, %v_x, %v_y;\nmov.f32 %v_z, %f1;\n}"
    assert inj.render([shadow], bind=True) == inj.render([shadow])
    own = "{\n.reg .f32 %t<2>;\nadd.f32 %t1, %v_x, %v_y;\nmov.f32 %v_z, %t1;\n}"
    same_code(inj, [own])


def test_templates_bind_by_default_and_keep_the_keys_apart():
    bound = nx.CudaTemplate(SPINE_SRC, entry="kernel", arch="sm_90", cache=False)
    plain = nx.CudaTemplate(SPINE_SRC, entry="kernel", arch="sm_90", cache=False, bind=False)
    assert bound.bind and not plain.bind
    add = "add.f32 %v_z, %v_x, %v_y;"
    vb, vp = bound.inject(combine=add), plain.inject(combine=add)
    assert "%v_" not in vb.ptx and "%v_" in vp.ptx and vb.key != vp.key
    assert machine_code(vb.cubin) == machine_code(vp.cubin)
    built = bound.build_many([{"combine": add}, {"combine": "sub.f32 %v_z, %v_x, %v_y;"}])
    assert machine_code(built[0].cubin) == machine_code(vp.cubin)


def test_an_invalid_stub_reports_the_stub_as_written():
    tmpl = nx.CudaTemplate(SPINE_SRC, entry="kernel", arch="sm_90", cache=False)
    bad = "add.f32 %v_z, %v_x, %v_nope;"
    with pytest.raises(nx.NumptxError, match="combine") as e:
        tmpl.inject(combine=bad).cubin
    assert "%v_nope" in str(e.value)
    with pytest.raises(nx.BuildError, match="variant 1"):
        tmpl.build_many([{"combine": "add.f32 %v_z, %v_x, %v_y;"}, {"combine": bad}])


def test_numba_kernels_bind_and_can_opt_out():
    def body(out, a):
        i = cuda.grid(1)
        out[i] = nx.site("s", x=a[i], out={"z": nx.f32})

    sig = "void(float32[:], float32[:])"
    on, off = nx.kernel(sig, cache=False)(body), nx.kernel(sig, cache=False, bind=False)(body)
    stub = "mul.f32 %v_z, %v_x, %v_x;"
    von, voff = on.inject(s=stub), off.inject(s=stub)
    assert "%v_" not in von.ptx and "%v_" in voff.ptx
    assert machine_code(von.cubin) == machine_code(voff.cubin)


def test_stubs_without_braces_keep_a_scope_per_instance():
    # 64 instances of one site; the stub declares a register and a label at its top level
    inj = nx.PtxInject(nx.cuda_to_ptx(gemm_template(4, 4, 4), arch="sm_90"))
    stub = (".reg .f32 %t;\n.reg .pred %p;\nmul.f32 %t, %v_a, %v_b;\nsetp.gt.f32 %p, %t, 0f00000000;\n"
            "@%p bra SKIP;\nadd.f32 %v_acc, %v_acc, %t;\nSKIP:\n")
    bound = inj.render([stub], bind=True)
    assert "%v_" not in bound and bound.count("\t{\n\t// PTX_INJECT_STUB mac") == 64
    assert bound == reference_bind(inj.ptx, {"mac": stub})
    assert nx.ptx_to_cubin(bound, "sm_90")[:4] == b"\x7fELF"


# the layout sites had before in variables became plain inputs: every variable a read-write
# ("+") or write-only ("=") operand numbered in declaration order, copied in from %i
_OLD_SITE = ('asm volatile("{\\n\\t.reg .f32 %%v_a;\\n\\t.reg .f32 %%v_b;\\n\\t.reg .f32 %%v_acc;\\n\\t'
             'mov.f32 %%v_a, %0;\\n\\tmov.f32 %%v_b, %1;\\n\\tmov.f32 %%v_acc, %2;\\n\\t'
             '// PTX_INJECT_BEGIN mac\\n\\t// PTX_INJECT_VAR in f32 f32 v_a a\\n\\t'
             '// PTX_INJECT_VAR in f32 f32 v_b b\\n\\t// PTX_INJECT_VAR mod f32 f32 v_acc acc\\n\\t'
             '// PTX_INJECT_END\\n\\tmov.f32 %2, %%v_acc;\\n\\t}" : "+f"(ta), "+f"(tb), "+f"(acc[i][j]));')
_SITE = 'PTX_INJECT("mac", PTX_IN(F32, a, a[i]), PTX_IN(F32, b, b[j]), PTX_MOD(F32, acc, acc[i][j]));'
_LOOP = r'''extern "C" __global__ void k(const float* A, const float* B, float* C, int n) {
    float acc[4][4] = {};
    #pragma unroll 1
    for (int k0 = 0; k0 < n; k0 += 4) {
        float a[4], b[4];
        #pragma unroll
        for (int t = 0; t < 4; ++t) { a[t] = A[k0 + t]; b[t] = B[k0 + t]; }
        #pragma unroll
        for (int i = 0; i < 4; ++i) {
            #pragma unroll
            for (int j = 0; j < 4; ++j) { float ta = a[i], tb = b[j]; SITE }
        }
    }
    for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) C[i * 4 + j] = acc[i][j];
}'''


def test_plain_input_operands_make_the_same_machine_code_as_read_write_ones():
    new = nx.PtxInject(nx.cuda_to_ptx(_LOOP.replace("SITE", _SITE), arch="sm_90"))
    old = nx.PtxInject(nx.cuda_to_ptx(_LOOP.replace("SITE", _OLD_SITE), arch="sm_90"))
    assert new.sites["mac"].instances == old.sites["mac"].instances == 16
    assert len(new.ptx) < len(old.ptx)                      # no copies of a and b
    for stub in ("fma.rn.f32 %v_acc, %v_a, %v_b, %v_acc;",
                 "{\n.reg .f32 %t;\nmul.rn.f32 %t, %v_a, %v_a;\nsub.rn.f32 %v_acc, %v_acc, %t;\n}"):
        codes = {machine_code(nx.ptx_to_cubin(inj.render([stub], bind=bind), "sm_90"))[0]
                 for inj in (new, old) for bind in (False, True)}
        assert len(codes) == 1, stub


def test_a_range_shadowing_a_variable_register_keeps_the_frame():
    src = r'''extern "C" __global__ void k(float* out, const float* a) {
        int i = threadIdx.x; float acc0 = a[i];
        PTX_INJECT("s", PTX_MOD(F32, acc0));
        out[i] = acc0;
    }'''
    inj = nx.PtxInject(nx.cuda_to_ptx(src, arch="sm_90"))
    shadow = "{\n.reg .f32 %v_acc<2>;\nmov.f32 %v_acc0, 0f12345678;\n}"   # writes its own %v_acc0
    assert inj.render([shadow], bind=True) == inj.render([shadow])
    same_code(inj, ["{\n.reg .f32 %t<2>;\nadd.f32 %t0, %v_acc0, %v_acc0;\nmov.f32 %v_acc0, %t0;\n}"])


def test_integer_sites_keep_their_frames_so_type_errors_still_show():
    src = r'''extern "C" __global__ void k(unsigned* out, const unsigned* a) {
        int i = threadIdx.x; unsigned x = a[i], z;
        PTX_INJECT("s", PTX_IN(U32, x), PTX_OUT(U32, z));
        out[i] = z;
    }'''
    tmpl = nx.CudaTemplate(src, entry="k", arch="sm_90", cache=False)
    wrong = "add.f32 %v_z, %v_x, 0f3F800000;"          # a float add on u32 registers
    assert tmpl.inj.render([wrong], bind=True) == tmpl.inj.render([wrong])
    with pytest.raises(nx.LinkError, match="Arguments mismatch"):
        tmpl.inject(s=wrong).cubin
    assert tmpl.inject(s="add.u32 %v_z, %v_x, 1;").cubin[:4] == b"\x7fELF"


def test_loop_carried_sites_bind():
    # x = site(x) in a loop: the output must not share the input's register, or binding
    # would have to keep the frame (outputs are early-clobber operands)
    src = r'''extern "C" __global__ void k(float* out, const float* a, int n) {
        int i = threadIdx.x; float x = a[i], y;
        for (int t = 0; t < n; ++t) { PTX_INJECT("s", PTX_IN(F32, x), PTX_OUT(F32, y)); x = y; }
        out[i] = x;
    }'''
    inj = nx.PtxInject(nx.cuda_to_ptx(src, arch="sm_90"))
    same_code(inj, ["mul.rn.f32 %v_y, %v_x, %v_x;"])

    def body(out, a, n):
        i = cuda.grid(1)
        x = a[i]
        for _ in range(n):
            x = nx.site("s", x=x, out={"y": nx.f32})
        out[i] = x

    ptx, _ = cuda.compile_ptx(body, (nbt.float32[:], nbt.float32[:], nbt.int32), cc=(9, 0))
    same_code(nx.PtxInject(ptx), ["mul.rn.f32 %v_y, %v_x, %v_x;"])


def test_render_many_binds_and_text_that_cannot_be_encoded_is_a_render_error():
    inj = nx.PtxInject(nx.cuda_to_ptx(SPINE_SRC, arch="sm_90"))
    stubs = [{"combine": "add.f32 %v_z, %v_x, %v_y;"}, {"combine": "sub.f32 %v_z, %v_x, %v_y;"}]
    assert inj.render_many(stubs, bind=True) == [inj.render(s, bind=True) for s in stubs]
    assert all("%v_" not in p for p in inj.render_many(stubs, bind=True))
    with pytest.raises(nx.RenderError, match="not valid text"):
        inj.render(["add.f32 %v_z, %v_x, %v_y; // \ud800"], bind=True)


_LOOP_MOD_SRC = r'''extern "C" __global__ void k(float* out, const float* a, int n, int steps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i], acc = 0.0f, y;
    for (int t = 0; t < steps; ++t) {
        PTX_INJECT("s", PTX_IN(F32, x), PTX_MOD(F32, acc), PTX_OUT(F32, y));
        x = y;
    }
    out[i] = acc + x;
}'''
_LOOP_MOD_STUB = "fma.rn.f32 %v_acc, %v_x, 0f3F000000, %v_acc;\nmul.rn.f32 %v_y, %v_x, 0f3F7D70A4;"


def test_a_loop_with_in_mod_and_out_binds_to_the_same_machine_code():
    same_code(nx.PtxInject(nx.cuda_to_ptx(_LOOP_MOD_SRC, arch="sm_90")), [_LOOP_MOD_STUB])


@pytest.mark.gpu
def test_gpu_bound_and_plain_variants_compute_the_same():
    import numpy as np
    a = np.linspace(-2, 2, 1000).astype(np.float32)
    outs = []
    for bind in (True, False):
        tmpl = nx.CudaTemplate(_LOOP_MOD_SRC, entry="k", arch="sm_90", cache=False, bind=bind)
        v = tmpl.inject(s=_LOOP_MOD_STUB)
        assert ("%v_" in v.ptx) != bind
        out = np.zeros_like(a)
        v[4, 256](out, a, a.size, 7)
        outs.append(out)
    x, acc = a.astype(np.float64), np.zeros(a.size)
    for _ in range(7):
        acc, x = acc + 0.5 * x, x * np.float32(0.99)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], acc + x, rtol=1e-5)
