"""The instruction-table rows mm-ptx programs use (issue 16, item 2): .ftz comparisons, the tf32
m16n8k4 mma, 8-bit conversions, f16x2/bf16x2 pack/unpack and every PTX special register.

Each new row is emulated (checked here against independent references: Python integers,
exact fractions, a lane-by-lane fragment scatter) and assembles: injected into a kernel built by
NVRTC and assembled by nvJitLink for sm_90, and for sm_80 where the row exists there. mm-ptx's
spellings of instruction names are refused with the numptx name."""
from __future__ import annotations

import re
import struct
from fractions import Fraction as Q

import numpy as np
import pytest

import numptx as nx
from numptx import instructions as I
from numptx import instructions_mmptx as M
from numptx import stack_ptx as sp
from numptx.dsl.emulator import EmulationError, emulate
from numptx.errors import NumptxError
from numptx.instructions import NP_DTYPE, TABLE, parse_type_spec
from test_instructions import site_for


def _new_names() -> list[str]:
    names: list[str] = []
    M.add_rows(lambda name, *a, **k: names.append(name),
               {f: frozenset({f}) for f in ("commutative", "ftz", "approx", "special",
                                            "volatile", "bitcast")})
    return names


NEW = _new_names()
NEW_ROWS = [TABLE[n] for n in NEW]
RNG = np.random.default_rng(16)

# the PTX ISA's special registers (chapter "Special Registers", PTX 8.x), as this test knows them
VECTORS = ("tid", "ntid", "ctaid", "nctaid", "clusterid", "nclusterid", "cluster_ctaid",
           "cluster_nctaid")
ISA_SPECIALS = (
    {f"%{v}" for v in VECTORS} | {f"%{v}.{c}" for v in VECTORS for c in "xyz"}
    | {"%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid", "%gridid", "%cluster_ctarank",
       "%cluster_nctarank", "%is_explicit_cluster", "%clock", "%clock_hi", "%clock64",
       "%globaltimer", "%globaltimer_lo", "%globaltimer_hi", "%total_smem_size",
       "%dynamic_smem_size", "%aggr_smem_size", "%current_graph_exec",
       "%reserved_smem_offset_begin", "%reserved_smem_offset_end", "%reserved_smem_offset_cap",
       "%reserved_smem_offset_0", "%reserved_smem_offset_1"}
    | {f"%lanemask_{k}" for k in ("eq", "le", "lt", "ge", "gt")}
    | {f"%pm{i}" for i in range(8)} | {f"%pm{i}_64" for i in range(8)}
    | {f"%envreg{i}" for i in range(32)})


# ================================================================================ the table
def test_new_rows_are_appended_after_the_old_ones():
    first = TABLE.index(NEW[0])
    assert [TABLE.index(n) for n in NEW] == list(range(first, first + len(NEW)))
    assert first + len(NEW) == I.BUILTIN_ROWS       # the last of numptx's own rows
    assert first == 358                  # the table's size before them: old indices stay put
    assert TABLE[first - 1].name == "bitcast.u64.b64"


def test_every_isa_special_register_has_a_row():
    table = {r.name for r in TABLE if r.is_special}
    assert ISA_SPECIALS <= table, sorted(ISA_SPECIALS - table)
    for v in VECTORS:
        r = TABLE[f"%{v}"]
        assert r.results == ("u32[4]",) and r.fmt == f"mov.v4.u32 $0, %{v};"
    assert TABLE["%gridid"].results == ("u64",) and TABLE["%envreg7"].results == ("b32",)
    assert TABLE["%is_explicit_cluster"].results == ("pred",)
    assert TABLE["%clusterid.x"].min_sm == TABLE["%aggr_smem_size"].min_sm == 90
    assert TABLE["%reserved_smem_offset_cap"].min_sm == 80


def test_mmptx_description_names_are_all_rows():
    """The instructions and special registers of mm-ptx's example type descriptions
    (examples/type_descriptions/stack_ptx_descriptions.json) whose types numptx has."""
    ptx = ["add.u32", "sub.u32", "mul.lo.u32", "mad.lo.u32", "copysign.f32", "add.ftz.f32",
           "sub.ftz.f32", "mul.ftz.f32", "fma.rn.ftz.f32", "div.approx.ftz.f32", "abs.ftz.f32",
           "neg.ftz.f32", "min.ftz.f32", "max.ftz.f32", "rcp.approx.ftz.f32",
           "sqrt.approx.ftz.f32", "rsqrt.approx.ftz.f32", "sin.approx.ftz.f32",
           "cos.approx.ftz.f32", "lg2.approx.ftz.f32", "ex2.approx.ftz.f32", "tanh.approx.f32",
           "setp.lt.ftz.f32", "setp.eq.u32", "setp.ne.u32", "selp.f32", "cvt.rna.tf32.f32",
           "cvt.rn.f32.u32", "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32",
           "cvt.f32.f16", "cvt.u32.u8", "xor.b32", "mul.hi.u32"]
    special = ["tid", "tid.x", "tid.y", "tid.z", "ntid", "ntid.x", "ntid.y", "ntid.z", "laneid",
               "warpid", "nwarpid", "ctaid", "ctaid.x", "ctaid.y", "ctaid.z", "nctaid",
               "nctaid.x", "nctaid.y", "nctaid.z", "smid", "nsmid", "gridid", "lanemask_eq",
               "lanemask_le", "lanemask_lt", "lanemask_ge", "lanemask_gt", "clock", "clock_hi",
               "total_smem_size", "aggr_smem_size", "dynamic_smem_size"]
    for name in ptx:
        assert name in TABLE, name
    for name in special:
        assert TABLE[f"%{name}"].is_special
        assert sp.special(name) == sp.instr(f"%{name}")
    assert TABLE["unpack.f16.f16x2"].results == ("f16", "f16")      # mm-ptx's f16x2_to_v2_f16


# ================================================================================ semantics
def _f32(bits: int) -> np.float32:
    return np.uint32(bits).view(np.float32)


def test_setp_ftz_flushes_subnormals_first():
    tiny, neg_tiny = _f32(0x00000001), _f32(0x80000001)
    a = np.float32([tiny, neg_tiny, 1.0, np.nan, tiny])
    b = np.float32([0.0, tiny, 2.0, 1.0, _f32(0x00800000)])     # last: smallest normal
    got = {c: TABLE[f"setp.{c}.ftz.f32"].apply(a, b) for c in ("eq", "ne", "lt", "le", "gt",
                                                               "ge", "nan", "num")}
    np.testing.assert_array_equal(got["eq"], [True, True, False, False, False])
    np.testing.assert_array_equal(got["ne"], [False, False, True, False, True])
    np.testing.assert_array_equal(got["lt"], [False, False, True, False, True])
    np.testing.assert_array_equal(got["nan"], [False, False, False, True, False])
    np.testing.assert_array_equal(got["num"], ~got["nan"])
    plain = TABLE["setp.eq.f32"].apply(a, b)
    assert not plain[0] and "ftz" in TABLE["setp.eq.ftz.f32"].flags       # without .ftz: tiny != 0
    assert TABLE["setp.eq.ftz.f32"].is_commutative and not TABLE["setp.lt.ftz.f32"].is_commutative


INT8_CASES = [0, 1, 127, 128, 255, 256, 0x1FF, -1, -128, -129, 0x7FFFFFFF, -0x80000000, 0x12345680]


def _low8(v: int, signed: bool) -> int:
    b = v & 0xFF
    return b - 256 if signed and b >= 128 else b


@pytest.mark.parametrize("name", [n for n in NEW if re.fullmatch(r"cvt.*\.[us]8(\.\w+)?", n)])
def test_8bit_conversions(name):
    ins = TABLE[name]
    src_t, dst_t = ins.operand_types[0], ins.result_types[0]
    parts = name.split(".")
    if src_t == "f32":
        xs = [0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -1.5, 127.5, 128.0, 254.5, 255.5, 300.0, -200.0,
              1e30, -1e30, float("inf"), float("-inf"), float("nan"), 3.7, -3.7]
        arr = np.float32(xs)
    else:
        arr = np.array([v % (1 << 32) for v in INT8_CASES], np.uint32).view(NP_DTYPE[src_t])
    got = np.asarray(ins.apply(arr))
    assert got.dtype == NP_DTYPE[dst_t]
    for x, g in zip(arr.tolist(), got.tolist()):
        if parts[-1] in ("u8", "s8"):                           # from 8 bits
            v = _low8(int(x), parts[-1] == "s8")
            want = float(v) if dst_t in ("f16", "f32") else v % (1 << (8 * NP_DTYPE[dst_t].itemsize))
            if dst_t[0] == "s":
                bits = 8 * NP_DTYPE[dst_t].itemsize
                want = want - (1 << bits) if want >= 1 << (bits - 1) else want
        else:                                                   # to 8 bits
            dst8 = parts[-2]
            lo, hi = (-128, 127) if dst8 == "s8" else (0, 255)
            if src_t == "f32":
                if x != x:
                    v = 0
                else:
                    r = Q(x) if abs(x) != float("inf") else None
                    if r is None:
                        v = hi if x > 0 else lo
                    else:
                        v = round(r) if parts[1] == "rni" else int(r)   # round(): ties to even
                        v = min(max(v, lo), hi)
            else:
                v = min(max(int(x), lo), hi) if parts[1] == "sat" else int(x)
            want = _low8(v, dst8 == "s8")
        assert g == want, (name, x, g, want)
    # and the emulator runs the row's own text to the same values
    out = emulate(ins.render("%d", "%a"), {"a": arr}, ["d"])["d"]
    np.testing.assert_array_equal(out.view(got.dtype) if out.dtype != got.dtype else out, got)


def test_pack_and_unpack_halves():
    for t in ("f16", "bf16"):
        lo = RNG.integers(0, 1 << 16, 200, dtype=np.uint64).astype(np.uint16)
        hi = RNG.integers(0, 1 << 16, 200, dtype=np.uint64).astype(np.uint16)
        lo[:3] = (0x7E01, 0xFC00, 0x8000)                # NaN payload, -inf, -0 bit for bit
        hi[:3] = (0x8000, 0x7E01, 0x0001)
        dt = NP_DTYPE[t]
        packed = TABLE[f"pack.{t}x2.{t}"].apply(lo.view(dt), hi.view(dt))
        want = [int(a) | int(b) << 16 for a, b in zip(lo, hi)]
        assert packed.dtype == np.uint32 and packed.tolist() == want
        u_lo, u_hi = TABLE[f"unpack.{t}.{t}x2"].apply(packed)
        assert u_lo.dtype == u_hi.dtype == dt
        assert u_lo.view(np.uint16).tolist() == lo.tolist()
        assert u_hi.view(np.uint16).tolist() == hi.tolist()
        # the rows' mov text in the emulator: element 0 is the low half
        st = TABLE[f"unpack.{t}.{t}x2"].render("%l", "%h", "%x")
        assert st == "mov.b32 {%l, %h}, %x;"
        out = emulate(st, {"x": packed}, {"l": t, "h": t})
        assert out["l"].view(np.uint16).tolist() == lo.tolist()
        out = emulate(TABLE[f"pack.{t}x2.{t}"].render("%x", "%l", "%h"),
                      {"l": lo, "h": hi}, {"x": f"{t}x2"})
        assert out["x"].tolist() == want


def _tf(bits: int) -> Q:
    return Q(struct.unpack("<f", struct.pack("<I", int(bits) & 0xFFFFE000))[0])


def test_mma_m16n8k4_against_a_lane_scatter():
    ins = TABLE["mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32"]
    assert ins.operand_widths == (2, 1, 4) and ins.min_sm == 80 and "approx" in ins.flags
    n = 64
    f = lambda: (RNG.standard_normal(n) * 4).astype(np.float32)  # noqa: E731
    a = (f().view(np.uint32), f().view(np.uint32))
    b = f().view(np.uint32)
    c = tuple(f() for _ in range(4))
    got = ins.apply(a, b, c)
    for w0 in range(0, n, 32):
        A = [[Q(0)] * 4 for _ in range(16)]
        B = [[Q(0)] * 8 for _ in range(4)]
        for lane in range(32):
            g, t = lane // 4, lane % 4
            A[g][t], A[g + 8][t] = _tf(a[0][w0 + lane]), _tf(a[1][w0 + lane])
            B[t][g] = _tf(b[w0 + lane])
        for lane in range(32):
            g, t = lane // 4, lane % 4
            for k, (r, col) in enumerate(((g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t),
                                          (g + 8, 2 * t + 1))):
                exact = sum(A[r][i] * B[i][col] for i in range(4)) + Q(float(c[k][w0 + lane]))
                assert abs(float(got[k][w0 + lane]) - float(exact)) <= 2.0 ** -22 * abs(float(exact)) + 1e-30
    # the row's text (B written as {%b}) runs in the emulator
    st = ins.render(["%d0", "%d1", "%d2", "%d3"], ["%a0", "%a1"], "%b", ["%c0", "%c1", "%c2", "%c3"])
    assert ", {%b}, " in st
    out = emulate(st, {"a0": a[0], "a1": a[1], "b": b, **{f"c{k}": c[k] for k in range(4)}},
                  [f"d{k}" for k in range(4)])
    for k in range(4):
        np.testing.assert_array_equal(out[f"d{k}"], got[k])
    with pytest.raises(ValueError, match="whole warps"):
        ins.apply(tuple(x[:40] for x in a), b[:40], tuple(x[:40] for x in c))


# ================================================================================ special registers
def test_vector_special_reads_its_components():
    st = TABLE["%ntid"].render(["%a", "%b", "%c", "%d"])
    assert st == "mov.v4.u32 {%a, %b, %c, %d}, %ntid;"
    out = emulate(st, {"%ntid.x": 128, "%ntid.y": np.arange(3) + 1}, ["a", "b", "c", "d"])
    assert out["a"].tolist() == [128] * 3 and out["b"].tolist() == [1, 2, 3]
    assert out["c"].tolist() == out["d"].tolist() == [0, 0, 0]
    out = emulate(TABLE["%tid"].render(["%a", "%b", "%c", "%d"]), {"x": np.zeros(40)}, ["a"])
    assert out["a"].tolist() == [i % 32 for i in range(40)]          # %tid.x's lane default
    with pytest.raises(EmulationError, match=r"'%tid.x', '%tid.y', '%tid.z'") as ei:
        emulate(st, {"%tid": np.zeros(3)}, ["a"])
    assert isinstance(ei.value, NumptxError)
    with pytest.raises(EmulationError, match=r"mov.v4.u32"):
        emulate("mov.u32 %a, %tid;", {}, ["a"])


def test_derived_special_registers():
    lanes = np.arange(32)
    st = "\n".join(f"mov.u32 %{k}, %lanemask_{k};" for k in ("eq", "le", "lt", "ge", "gt"))
    out = emulate(st, {"%laneid": lanes}, ["eq", "le", "lt", "ge", "gt"])
    for lane in range(32):
        eq = 1 << lane
        assert out["eq"][lane] == eq and out["le"][lane] == 2 * eq - 1
        assert out["lt"][lane] == eq - 1 and out["ge"][lane] == 0xFFFFFFFF ^ (eq - 1)
        assert out["gt"][lane] == 0xFFFFFFFF ^ (2 * eq - 1)
    out = emulate(st, {"%lanemask_lt": np.uint32(5)}, ["lt"])      # given: the input wins
    assert out["lt"] == 5
    t = np.uint64([0x0123456789ABCDEF, 7])
    out = emulate("mov.u32 %h, %clock_hi;\nmov.u32 %gl, %globaltimer_lo;\n"
                  "mov.u32 %gh, %globaltimer_hi;", {"%clock64": t, "%globaltimer": t},
                  ["h", "gl", "gh"])
    assert out["h"].tolist() == [0x01234567, 0] == out["gh"].tolist()
    assert out["gl"].tolist() == [0x89ABCDEF, 7]
    out = emulate("mov.u32 %a, %nsmid;\nmov.b32 %e, %envreg3;\nmov.pred %p, %is_explicit_cluster;",
                  {"%nsmid": 132, "%envreg3": np.uint32(9), "x": np.zeros(2)}, ["a", "e", "p"])
    assert out["a"].tolist() == [132, 132] and out["e"].tolist() == [9, 9]
    assert out["p"].dtype == np.bool_ and not out["p"].any()


# ================================================================================ assembly
# one site per row, as tests/test_instructions.py builds them for the whole table
_site = site_for


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_every_new_row_injects_and_assembles(arch):
    rows = [r for r in NEW_ROWS if r.min_sm <= int(arch[3:])]
    assert len(rows) > 0.8 * len(NEW_ROWS)
    sites = [_site(i, r) for i, r in enumerate(rows)]
    src = ('extern "C" __global__ void mmptx_rows(unsigned long long* buf) {\n'
           + "\n".join(c for c, _ in sites) + "\n}\n")
    inj = nx.PtxInject(nx.cuda_to_ptx(src, arch=arch))
    assert list(inj.sites) == [f"s{i}" for i in range(len(rows))]
    rendered = inj.render([s for _, s in sites])
    assert "mov.v4.u32" in rendered and "m16n8k4" in rendered and "setp.gt.ftz.f32" in rendered
    assert nx.ptx_to_cubin(rendered, arch=arch)[:4] == b"\x7fELF"


def test_sm90_rows_are_refused_on_sm80():
    for name in ("%clusterid", "%cluster_ctarank", "%aggr_smem_size", "%is_explicit_cluster"):
        ins = TABLE[name]
        _, stub = _site(0, ins)
        src = f'extern "C" __global__ void k(unsigned long long* buf) {{\n{_site(0, ins)[0]}\n}}\n'
        inj = nx.PtxInject(nx.cuda_to_ptx(src, arch="sm_80"))
        with pytest.raises(nx.LinkError):
            nx.ptx_to_cubin(inj.render([stub]), arch="sm_80")


def test_new_rows_compile_as_stack_ptx_programs():
    """The C core takes the rows: a vector special pushes 4 values, mma k4 pops 2 + 1 + 4."""
    src = ('extern "C" __global__ void k(float* o, const float* a) {\n'
           '  { unsigned x, y, z, w; PTX_INJECT("tid", PTX_OUT(U32, x), PTX_OUT(U32, y), '
           'PTX_OUT(U32, z), PTX_OUT(U32, w)); o[0] = x + y + z + w; }\n'
           '  { float x = a[0], d0, d1, d2, d3; PTX_INJECT("mma", PTX_IN(F32, x), '
           'PTX_OUT(F32, d0), PTX_OUT(F32, d1), PTX_OUT(F32, d2), PTX_OUT(F32, d3)); '
           'o[1] = d0 + d1 + d2 + d3; }\n'
           '  { float x = a[0], y = a[1]; unsigned p; PTX_INJECT("cmp", PTX_IN(F32, x), '
           'PTX_IN(F32, y), PTX_OUT(U32, p)); o[2] = p; }\n}\n')
    inj = nx.PtxInject(nx.cuda_to_ptx(src, arch="sm_90"))
    tid = sp.compile([sp.instr("%tid")], site=inj.sites["tid"])
    assert "mov.v4.u32" in tid and not tid.unsatisfied
    tf = [sp.input("x"), sp.instr("cvt.rna.tf32.f32")]
    mma = sp.compile([*tf, *tf, *tf, sp.input("x"), sp.dup("f32"), sp.dup("f32"),
                      sp.dup("f32"), sp.instr("mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32")],
                     site=inj.sites["mma"])
    assert "m16n8k4" in mma and not mma.unsatisfied
    cmp_ = sp.compile([sp.input("x"), sp.input("y"), sp.instr("setp.lt.ftz.f32"),
                       sp.const(1, "u32"), sp.const(0, "u32"), sp.instr("selp.u32")],
                      site=inj.sites["cmp"])
    assert "setp.lt.ftz.f32" in cmp_
    assert nx.ptx_to_cubin(inj.render({"tid": tid, "mma": mma, "cmp": cmp_}), arch="sm_90")


# ================================================================================ mm-ptx spellings
@pytest.mark.parametrize("theirs, ours", [
    ("add_ftz_f32", "add.ftz.f32"), ("setp_lt_ftz_f32", "setp.lt.ftz.f32"),
    ("cvt_rna_tf32_f32", "cvt.rna.tf32.f32"),
    ("mma_sync_aligned_m16n8k4_row_col_f32_tf32_tf32_f32",
     "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32"),
    ("stack_ptx_encode_ptx_instruction_mul_lo_u32", "mul.lo.u32"),
    ("tid_x", "%tid.x"), ("tid.x", "%tid.x"), ("lanemask_eq", "%lanemask_eq"),
    ("f16x2_to_v2_f16", "unpack.f16.f16x2"), ("f16_to_f32", "cvt.f32.f16"),
])
def test_mmptx_spelling_names_the_numptx_one(theirs, ours):
    with pytest.raises(I.UnknownInstructionError) as ei:
        sp.instr(theirs)
    e = ei.value
    assert isinstance(e, NumptxError) and isinstance(e, KeyError)
    assert repr(theirs) in str(e) and f"instr({ours!r})" in str(e) and "mm-ptx" in str(e)
    assert e.suggestions == (ours,) and e.name == theirs
    assert TABLE[ours] is TABLE[e.suggestions[0]]


def test_mmptx_spelling_without_a_row_says_what_to_write():
    with pytest.raises(I.UnknownInstructionError, match=r"'u32_to_v4_u8'.*cvt\.u32\.u8"):
        sp.instr("u32_to_v4_u8")
    with pytest.raises(NumptxError, match=r"'%tid\.x'"):
        sp.special("tid_x")
    # not mm-ptx: the ordinary close-match hint
    with pytest.raises(I.UnknownInstructionError, match="did you mean") as ei:
        sp.instr("setp.lt.ftz.f3")
    assert "mm-ptx" not in str(ei.value)


def test_new_rows_in_ast_ptx_emulate():
    from numptx import ast_ptx as ap
    prog = [ap.input("x"), ap.input("y"), ap.instr("setp.lt.ftz.f32"), ap.input("h"),
            ap.instr("unpack.f16.f16x2"), ap.special("lanemask_lt"), ap.input("b"),
            ap.instr("cvt.s32.s8")]
    stub = ap.compile(prog, inputs={"x": "f32", "y": "f32", "h": "f16x2", "b": "s32"},
                      outputs={"p": "pred", "lo": "f16", "hi": "f16", "m": "u32", "s": "s32"})
    h = np.float16([1.5, -2.0]).view(np.uint16)
    got = emulate(stub, {"x": np.float32([_f32(1), 1.0]), "y": np.float32([0.0, 2.0]),
                         "h": np.uint32(int(h[0]) | int(h[1]) << 16), "%laneid": np.uint32([3, 31]),
                         "b": np.int32([0x1FF, 0x80])},
                  {"p": "pred", "lo": "f16", "hi": "f16", "m": "u32", "s": "s32"})
    assert got["p"].tolist() == [False, True]             # a subnormal x flushes to 0: not < 0
    assert got["lo"].tolist() == [1.5, 1.5] and got["hi"].tolist() == [-2.0, -2.0]
    assert got["m"].tolist() == [0b111, 0x7FFFFFFF] and got["s"].tolist() == [-1, -128]


GPU_SRC = r'''
extern "C" __global__ void rows(const float* f, const unsigned* u, float* d, unsigned* r) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned a0 = u[4 * i], a1 = u[4 * i + 1], b0 = u[4 * i + 2];
    int s = (int)u[4 * i + 3];
    float c0 = f[6 * i], c1 = f[6 * i + 1], c2 = f[6 * i + 2], c3 = f[6 * i + 3];
    float x = f[6 * i + 4], y = f[6 * i + 5];
    float d0, d1, d2, d3;
    unsigned lm, cu, p, tx, tw;
    int sx;
    PTX_INJECT("rows", PTX_IN(B32, a0), PTX_IN(B32, a1), PTX_IN(B32, b0), PTX_IN(F32, c0),
               PTX_IN(F32, c1), PTX_IN(F32, c2), PTX_IN(F32, c3), PTX_IN(F32, x), PTX_IN(F32, y),
               PTX_IN(S32, s), PTX_OUT(F32, d0), PTX_OUT(F32, d1), PTX_OUT(F32, d2),
               PTX_OUT(F32, d3), PTX_OUT(U32, lm), PTX_OUT(U32, cu), PTX_OUT(U32, p),
               PTX_OUT(S32, sx), PTX_OUT(U32, tx), PTX_OUT(U32, tw));
    d[4 * i] = d0; d[4 * i + 1] = d1; d[4 * i + 2] = d2; d[4 * i + 3] = d3;
    r[6 * i] = lm; r[6 * i + 1] = cu; r[6 * i + 2] = p; r[6 * i + 3] = (unsigned)sx;
    r[6 * i + 4] = tx; r[6 * i + 5] = tw;
}'''
GPU_STUB = """{
.reg .pred %pp;
.reg .u32 %ty, %tz;
mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32 {%v_d0, %v_d1, %v_d2, %v_d3}, {%v_a0, %v_a1}, {%v_b0}, {%v_c0, %v_c1, %v_c2, %v_c3};
mov.u32 %v_lm, %lanemask_lt;
cvt.rni.u8.f32 %v_cu, %v_x;
setp.lt.ftz.f32 %pp, %v_x, %v_y;
selp.u32 %v_p, 1, 0, %pp;
cvt.s32.s8 %v_sx, %v_s;
mov.v4.u32 {%v_tx, %ty, %tz, %v_tw}, %tid;
}"""


def _gpu_case():
    """The template variant with GPU_STUB, its inputs (one block of 2 warps) and what the
    emulator computes from them."""
    n = 64
    rng = np.random.default_rng(7)
    f = (rng.standard_normal((n, 6)) * 4).astype(np.float32)
    f[:8, 4] = [0.5, 1.5, 2.5, -3.0, 300.0, np.nan, _f32(1), 254.5]       # x: ties, clamps
    f[:8, 5] = [0.0, 2.0, 2.0, 0.0, 1.0, 1.0, _f32(2), 1.0]               # y
    u = rng.integers(0, 1 << 32, (n, 4), dtype=np.uint64).astype(np.uint32)
    u[:, :3] = (rng.standard_normal((n, 3)) * 4).astype(np.float32).view(np.uint32)
    v = nx.CudaTemplate(GPU_SRC, entry="rows", arch="sm_80", cache=False).inject(rows=GPU_STUB)
    inputs = {"v_a0": u[:, 0], "v_a1": u[:, 1], "v_b0": u[:, 2], "v_s": u[:, 3].view(np.int32),
              **{f"v_c{k}": f[:, k] for k in range(4)}, "v_x": f[:, 4], "v_y": f[:, 5],
              "%tid.x": np.arange(n, dtype=np.uint32)}
    regs = {**{f"v_d{k}": "f32" for k in range(4)}, "v_lm": "u32", "v_cu": "u32", "v_p": "u32",
            "v_sx": "s32", "v_tx": "u32", "v_tw": "u32"}
    return v, f, u, emulate(GPU_STUB, inputs, regs)


def test_gpu_check_builds_and_emulates():
    v, f, _, want = _gpu_case()
    assert v.cubin[:4] == b"\x7fELF"
    assert want["v_tx"].tolist() == list(range(64)) and not want["v_tw"].any()
    assert want["v_cu"][:8].tolist() == [0, 2, 2, 0, 255, 0, 0, 254]
    assert want["v_p"][:8].tolist() == [0, 1, 0, 1, 0, 0, 0, 0]       # 2^-149 < 2^-148: flushed
    assert want["v_lm"][:33].tolist() == [(1 << (i % 32)) - 1 for i in range(33)]


@pytest.mark.gpu
def test_new_rows_on_the_gpu_match_the_emulator():
    """The m16n8k4 fragment layout, 8-bit conversion, .ftz compare, lane mask and vector %tid
    as the GPU computes them, against the emulator on the same inputs."""
    from numba import cuda
    v, f, u, want = _gpu_case()
    n = len(f)
    d_d, d_r = cuda.device_array(4 * n, np.float32), cuda.device_array(6 * n, np.uint32)
    v[1, n](cuda.to_device(f.ravel()), cuda.to_device(u.ravel()), d_d, d_r)
    d, r = d_d.copy_to_host().reshape(n, 4), d_r.copy_to_host().reshape(n, 6)
    for k in range(4):
        np.testing.assert_allclose(d[:, k], want[f"v_d{k}"], rtol=2.0 ** -20, atol=1e-5)
    for j, name in enumerate(("v_lm", "v_cu", "v_p", "v_sx", "v_tx", "v_tw")):
        assert r[:, j].tolist() == want[name].astype(np.int64).astype(np.uint32).tolist(), name
