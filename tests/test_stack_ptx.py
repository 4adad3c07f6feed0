"""Stack PTX and AST PTX from Python: compile (C core), emulate (NumPy), inject and assemble
(real NVRTC and nvJitLink)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numptx as nx
from numptx import ast_ptx as ap
from numptx import stack_ptx as sp
from numptx.instructions import NP_DTYPE, TABLE

F = {"x": "f32", "y": "f32"}
Z = {"z": "f32"}


def run(prog, inputs=F, outputs=Z, values=None, **kw):
    stub = sp.compile(prog, inputs, outputs, **kw)
    values = values or {"x": np.float32([2, 3, -1.5]), "y": np.float32([4, 5, 0.25])}
    return stub, nx.emulate(stub, values, outputs=list(outputs))


def test_acceptance_example():
    prog = [sp.input("x"), sp.input("y"), sp.instr("mul.ftz.f32"),
            sp.const(1.0, "f32"), sp.instr("add.ftz.f32")]
    stub = sp.compile(prog, inputs={"x": "f32", "y": "f32"}, outputs={"z": "f32"})
    got = nx.emulate(stub, {"x": np.float32([2, 3]), "y": np.float32([4, 5])}, outputs=["z"])
    assert np.allclose(got["z"], [9, 16])
    assert isinstance(stub, str) and stub.diagnostics == () and stub.startswith("{")


def test_postfix_operand_order_and_outputs_order():
    _, got = run([sp.input("x"), sp.input("y"), sp.instr("sub.rn.f32")])
    assert got["z"].tolist() == [-2.0, -2.0, -1.75]
    # two outputs of one type: the first takes the top of the stack
    _, got = run([sp.input("x"), sp.input("y")], outputs={"a": "f32", "b": "f32"})
    assert got["a"].tolist() == [4, 5, 0.25] and got["b"].tolist() == [2, 3, -1.5]


def test_missing_operands_are_noops_and_unsatisfied_output_is_zero():
    stub, got = run([sp.instr("add.rn.f32"), sp.input("x"), sp.instr("mul.rn.f32")])
    assert got["z"].tolist() == [2, 3, -1.5]           # the add and the mul had nothing to work on
    assert stub.stats["noops"] == 2
    stub, got = run([sp.input("x")], outputs={"z": "f32", "w": "f32"})
    assert got["w"].tolist() == [0, 0, 0] and stub.unsatisfied == ("w",)
    assert any("'w'" in d and "zero" in d for d in stub.diagnostics)
    with pytest.raises(nx.NumptxError, match="'w'"):
        sp.compile([sp.input("x")], F, {"z": "f32", "w": "f32"}, strict=True)


def test_shared_value_emitted_once_and_dead_code_dropped():
    prog = [sp.input("x"), sp.input("y"), sp.instr("add.rn.f32"), sp.dup("f32"),
            sp.instr("mul.rn.f32"), sp.input("x"), sp.instr("sqrt.rn.f32"), sp.drop("f32")]
    stub, got = run(prog)
    assert stub.count("add.rn.f32") == 1 and "sqrt" not in stub
    assert np.allclose(got["z"], (np.float32([2, 3, -1.5]) + np.float32([4, 5, 0.25])) ** 2)
    # the same subexpression built twice is merged
    twice = [sp.input("x"), sp.input("y"), sp.instr("add.rn.f32"), sp.input("x"), sp.input("y"),
             sp.instr("add.rn.f32"), sp.instr("mul.rn.f32")]
    assert sp.compile(twice, F, Z).count("add.rn.f32") == 1


def _stack_after(prog, n_out=4):
    """Values left on the s32 stack (top first) after pushing 10, 20, 30, 40 and running prog."""
    base = [sp.const(v, "s32") for v in (10, 20, 30, 40)]
    outs = {f"o{i}": "s32" for i in range(n_out)}
    stub = sp.compile(base + prog, {}, outs)
    got = nx.emulate(stub, {}, outputs=list(outs))
    return [int(got[f"o{i}"]) for i in range(n_out)], stub


@pytest.mark.parametrize("prog,expect", [
    ([sp.dup("s32")], [40, 40, 30, 20]),
    ([sp.swap("s32")], [30, 40, 20, 10]),
    ([sp.drop("s32")], [30, 20, 10, 0]),
    ([sp.clear("s32")], [0, 0, 0, 0]),
    ([sp.meta(2), sp.yank_dup("s32")], [20, 40, 30, 20]),
    ([sp.meta(3), sp.swap_with("s32")], [10, 30, 20, 40]),
    ([sp.meta(1), sp.replace("s32")], [30, 40, 10, 0]),       # pop 40, it overwrites 20 (depth 1 of the rest)
    ([sp.meta(2), sp.rotate("s32")], [20, 40, 30, 10]),
    ([sp.meta(3), sp.reverse("s32")], [20, 30, 40, 10]),
    # edge cases: depth past the end, missing meta constant, meta of another op consumed once
    ([sp.meta(9), sp.yank_dup("s32")], [40, 30, 20, 10]),
    ([sp.yank_dup("s32")], [40, 30, 20, 10]),
    ([sp.meta(9), sp.swap_with("s32")], [40, 30, 20, 10]),
    ([sp.meta(0), sp.meta(1), sp.yank_dup("s32"), sp.yank_dup("s32")], [30, 30, 40, 30]),
    ([sp.dup("f32"), sp.swap("f32"), sp.drop("f32")], [40, 30, 20, 10]),   # other stacks empty
])
def test_meta_operations(prog, expect):
    got, _ = _stack_after(prog)
    assert got == expect


def test_meta_on_empty_and_full_stacks():
    stub = sp.compile([sp.dup("s32"), sp.swap("s32"), sp.drop("s32"), sp.clear("s32")], {}, {"o": "s32"})
    assert stub.unsatisfied == ("o",) and stub.stats["noops"] == 4
    lim = sp.Limits(stack_capacity=2)
    stub = sp.compile([sp.const(1, "s32"), sp.const(2, "s32"), sp.const(3, "s32"), sp.dup("s32")],
                      {}, {"o": "s32"}, limits=lim)
    assert int(nx.emulate(stub, {}, ["o"])["o"]) == 2
    assert any("stack overflowed" in d for d in stub.diagnostics)


def test_routines_store_load_and_return():
    square = [sp.dup("f32"), sp.instr("mul.rn.f32")]
    prog = [sp.input("x"), sp.routine(0), sp.store("f32", 3), sp.input("y"), sp.load("f32", 3),
            sp.instr("add.rn.f32"), sp.ret(), sp.instr("neg.f32")]
    _, got = run(prog, routines=[square])
    x, y = np.float32([2, 3, -1.5]), np.float32([4, 5, 0.25])
    assert got["z"].tolist() == (y + x * x).tolist()
    # recursion is bounded by the depth limit and reported
    stub = sp.compile([sp.input("x"), sp.routine(0)], F, Z, routines=[[sp.dup("f32"), sp.routine(0)]])
    assert any("depth limit" in d for d in stub.diagnostics)
    # unknown routine / empty slot: no-ops
    stub, got = run([sp.input("x"), sp.routine(5), sp.load("f32", 1)])
    assert got["z"].tolist() == [2, 3, -1.5]


def test_step_limit_reported():
    prog = [sp.input("x")] + [sp.dup("f32"), sp.instr("add.rn.f32")] * 50
    stub = sp.compile(prog, F, Z, limits=sp.Limits(max_steps=21))
    assert any("step limit" in d for d in stub.diagnostics)
    assert int(nx.emulate(stub, {"x": np.float32(1)}, ["z"])["z"]) == 1024


def test_clobber_rule_swapping_mod_variables():
    # outputs write the same registers the inputs are read from: a <- b, b <- a
    stub = sp.compile([sp.input("a"), sp.input("b")], {"a": "f32", "b": "f32"}, {"a": "f32", "b": "f32"})
    assert stub.count("mov.f32 %_s") == 1             # one copy saves a before it is overwritten
    got = nx.emulate(stub, {"a": np.float32(1), "b": np.float32(2)}, ["a", "b"])
    assert (float(got["a"]), float(got["b"])) == (2.0, 1.0)


def test_constants_of_every_type():
    cases = [(True, "pred"), (1.5, "f16"), (-2.25, "bf16"), (3.5, "f32"), (-1e300, "f64"),
             (-7, "s32"), (4000000000, "u32"), (-(1 << 40), "s64"), ((1 << 64) - 1, "u64"),
             (0xBEEF, "b16"), (0xDEADBEEF, "b32"), (0x0123456789ABCDEF, "b64"),
             ((1.0, -2.0), "f16x2"), ((0.5, 4.0), "bf16x2")]
    for value, t in cases:
        stub = sp.compile([sp.const(value, t)], {}, {"o": t})
        got = np.asarray(nx.emulate(stub, {}, ["o"])["o"])
        want_dt = NP_DTYPE[t]
        if got.dtype != want_dt:                       # 16/32-bit float types live in .b registers
            assert got.dtype.itemsize == want_dt.itemsize, t
            got = got.view(want_dt)
        if t == "pred":
            assert bool(got) is True
        elif t in ("f16x2", "bf16x2"):
            assert int(got) == sp.const(value, t).word >> 32
        elif t == "bf16":
            assert int(got) == 0xC010                      # -2.25 in bf16
        else:
            assert got == np.array(value).astype(want_dt), t
    with pytest.raises(nx.NumptxError, match="out of range"):
        sp.const(1 << 33, "u32")
    with pytest.raises(nx.NumptxError, match="unknown value type"):
        sp.const(1, "f8")
    with pytest.raises(nx.NumptxError, match="needs an int"):
        sp.const(1.5, "s32")


def test_bind_to_site_and_assemble():
    src = r'''
    extern "C" __global__ void k(float* o, const float* a) {
        float x = a[threadIdx.x], acc = a[0], z;
        PTX_INJECT("step", PTX_IN(F32, x), PTX_MOD(F32, acc), PTX_OUT(F32, z));
        o[threadIdx.x] = z + acc;
    }'''
    inj = nx.PtxInject(nx.cuda_to_ptx(src))
    site = inj.sites["step"]
    # outputs in declaration order: acc (mod) takes the top, z the next
    prog = [sp.input("x"), sp.input("acc"), sp.instr("add.rn.f32"), sp.input("x"), sp.instr("mul.rn.f32"),
            sp.input("x")]                       # acc <- x, z <- (x + acc) * x
    stub = sp.compile(prog, site=site)
    assert "%v_x" in stub and "mov.f32 %v_acc" in stub and "mov.f32 %v_z" in stub
    got = nx.emulate(stub, {"v_x": np.float32(3), "v_acc": np.float32(1)}, ["v_z", "v_acc"])
    assert (float(got["v_z"]), float(got["v_acc"])) == (12.0, 3.0)
    assert nx.ptx_to_cubin(inj.render({"step": stub}))
    with pytest.raises(nx.NumptxError, match="no input named 'q'"):
        sp.compile([sp.input("q")], site=site)


def test_errors_name_the_problem():
    with pytest.raises(nx.NumptxError, match="add.rn.f32"):
        sp.instr("add.rn.f23")
    with pytest.raises(nx.NumptxError, match="not a Stack PTX op"):
        sp.compile([sp.input("x"), "add"], F, Z)
    with pytest.raises(nx.NumptxError, match="_s<number>"):
        sp.compile([], {"_s1": "f32"}, Z)
    with pytest.raises(nx.NumptxError, match="unknown type"):
        sp.compile([], {"x": "float"}, Z)


# ---- every table instruction through Stack PTX, injected and assembled ---------------------------
_C = {"pred": "bool", "f16": "unsigned short", "bf16": "unsigned short", "b16": "unsigned short",
      "f16x2": "unsigned int", "bf16x2": "unsigned int", "b32": "unsigned int", "u32": "unsigned int",
      "s32": "int", "f32": "float", "f64": "double", "s64": "long long", "u64": "unsigned long long",
      "b64": "unsigned long long"}


def _slots(specs, prefix):
    out = []
    for k, (t, w) in enumerate(specs):
        out += [(f"{prefix}{k}_{c}", t) for c in range(w)]
    return out


def _ctype_ok(t):
    return t != "pred"         # predicates cannot be site variables: move them through selp


@pytest.fixture(scope="module")
def every_instruction():
    """One template with one site per table row; operand/result variables of the row's types
    (predicates are made or consumed with setp/selp inside the program)."""
    lines, progs = [], {}
    from numptx.instructions import BUILTIN_ROWS
    for i in range(BUILTIN_ROWS):           # numptx's rows (not those tests add)
        ins = TABLE[i]
        ops = _slots(list(zip(ins.operand_types, ins.operand_widths)), "a")
        res = _slots(list(zip(ins.result_types, ins.result_widths)), "r")
        prog, ins_vars, outs_vars = [], [], []
        for name, t in ops:
            if t == "pred":
                # p = (x < y) on f32 inputs
                ins_vars += [(f"{name}_l", "f32"), (f"{name}_r", "f32")]
                prog += [sp.input(f"{name}_l"), sp.input(f"{name}_r"), sp.instr("setp.lt.f32")]
            else:
                ins_vars.append((name, t))
                prog.append(sp.input(name))
        prog.append(sp.instr(ins.name))
        for name, t in reversed(res):
            if t == "pred":
                prog += [sp.const(1.0, "f32"), sp.swap("f32"), sp.const(0.0, "f32"), sp.swap("f32")]
                prog += [sp.instr("selp.f32")]
                outs_vars.insert(0, (name, "f32"))
            else:
                outs_vars.insert(0, (name, t))
        decl = "; ".join(f"{_C[t]} {n} = ({_C[t]})a[{j}]" for j, (n, t) in enumerate(ins_vars))
        decl += "; " + "; ".join(f"{_C[t]} {n}" for n, t in outs_vars)
        operands = ", ".join([f"PTX_IN({t}, {n})" for n, t in ins_vars] +
                             [f"PTX_OUT({t}, {n})" for n, t in outs_vars])
        store = " ".join(f"o[{j}] = (double){n};" for j, (n, t) in enumerate(outs_vars))
        lines.append(f"    {{ {decl}; PTX_INJECT(\"i{i}\"{', ' if operands else ''}{operands}); {store} }}")
        progs[f"i{i}"] = (ins, prog, ins_vars, outs_vars)
    src = ('extern "C" __global__ void k(double* o, const double* a) {\n' + "\n".join(lines) + "\n}\n")
    inj = nx.PtxInject(nx.cuda_to_ptx(src, arch="sm_90"))
    return inj, progs


def test_every_instruction_compiles_injects_and_assembles(every_instruction):
    inj, progs = every_instruction
    stubs = {}
    for name, (ins, prog, _, _) in progs.items():
        stub = sp.compile(prog, site=inj.sites[name])
        assert not stub.unsatisfied, (ins.name, stub.diagnostics)
        assert ins.opcode in stub, ins.name
        stubs[name] = stub
    assert nx.ptx_to_cubin(inj.render(stubs), arch="sm_90")


def test_every_instruction_emulates_like_its_semantic(every_instruction):
    inj, progs = every_instruction
    rng = np.random.default_rng(1)
    n = 64
    for name, (ins, prog, ins_vars, outs_vars) in progs.items():
        if any(t == "pred" for t in ins.operand_types + ins.result_types):
            continue          # covered by tests/test_instructions.py and the selp/setp rows here
        site = inj.sites[name]
        stub = sp.compile(prog, site=site)
        values = {}
        for (vname, t) in ins_vars:
            dt = NP_DTYPE[t]
            if dt.kind == "f":
                values[vname] = (rng.standard_normal(n) * 4).astype(dt)
            else:
                values[vname] = rng.integers(0, 1 << min(dt.itemsize * 8, 62), n, dtype=np.uint64).astype(dt)
        got = nx.emulate(stub, {site[v].reg: values[v] for v, _ in ins_vars},
                         outputs=[site[v].reg for v, _ in outs_vars])
        args, k = [], 0
        for t, w in zip(ins.operand_types, ins.operand_widths):
            vals = [values[ins_vars[k + c][0]] for c in range(w)]
            args.append(vals[0] if w == 1 else tuple(vals))
            k += w
        want = ins.apply(*args)
        want = want if isinstance(want, tuple) and len(ins.results) > 1 else (want,)
        pushed = []                               # (type, value) in push order
        for wv, wd, wt in zip(want, ins.result_widths, ins.result_types):
            pushed += [(wt, v) for v in (list(wv) if wd > 1 else [wv])]
        flat = []                                 # each output pops the top of its type's stack
        for _, t in outs_vars:
            k = max(j for j, (pt, _) in enumerate(pushed) if pt == t)
            flat.append(pushed.pop(k)[1])
        for (vname, _), expect in zip(outs_vars, flat):
            a, b = np.asarray(got[site[vname].reg]), np.asarray(expect)
            if a.dtype != b.dtype and a.dtype.itemsize == b.dtype.itemsize:
                a = a.view(b.dtype)                    # f16 values come back as .b16 bits
            same = a.tobytes() == b.astype(a.dtype).tobytes()
            assert same or (a.dtype.kind == "f" and np.allclose(a, b, equal_nan=True)), ins.name


# ---- random programs ------------------------------------------------------------------------------
POOL = ([sp.input("x"), sp.input("y"), sp.const(0.5, "f32"), sp.const(2.0, "f32"), sp.const(3, "s32")]
        + [sp.instr(n) for n in ("add.rn.f32", "sub.rn.f32", "mul.rn.f32", "fma.rn.f32", "min.f32",
                                 "max.f32", "abs.f32", "neg.f32", "setp.lt.f32", "selp.f32",
                                 "cvt.rzi.s32.f32", "cvt.rn.f32.s32", "add.s32", "mul.lo.s32",
                                 "and.pred", "not.pred", "%tid.x", "cvt.rn.f32.u32")]
        + [sp.dup("f32"), sp.swap("f32"), sp.drop("f32"), sp.dup("s32"), sp.meta(1), sp.meta(0),
           sp.yank_dup("f32"), sp.rotate("f32"), sp.swap_with("s32"), sp.reverse("f32"),
           sp.store("f32", 0), sp.load("f32", 0), sp.routine(0), sp.ret(), sp.nop()])
ROUTINE = [sp.dup("f32"), sp.instr("mul.rn.f32")]
N_SITES = 24


@pytest.fixture(scope="module")
def many_sites():
    body = "\n".join(f'    {{ float x = a[{i}], y = a[{i} + 1], z; int w; '
                     f'PTX_INJECT("s{i}", PTX_IN(F32, x), PTX_IN(F32, y), PTX_OUT(F32, z), PTX_OUT(S32, w)); '
                     f'o[{i}] = z + w; }}' for i in range(N_SITES))
    src = 'extern "C" __global__ void k(float* o, const float* a) {\n' + body + "\n}\n"
    return nx.PtxInject(nx.cuda_to_ptx(src, arch="sm_90"))


program_st = st.lists(st.sampled_from(POOL), max_size=60)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(program_st, min_size=N_SITES, max_size=N_SITES))
def test_random_programs_compile_assemble_and_emulate(many_sites, programs):
    inj = many_sites
    stubs = {}
    x, y = np.float32([1.5, -2, 0, 7]), np.float32([3, 0.5, -1, 2])
    for i, prog in enumerate(programs):
        site = inj.sites[f"s{i}"]
        stub = sp.compile(prog, site=site, routines=[ROUTINE])
        got = nx.emulate(stub, {"v_x": x, "v_y": y}, outputs=["v_z", "v_w"])
        assert got["v_z"].dtype == np.float32 and got["v_w"].dtype == np.int32
        stubs[site.name] = stub
    batch = sp.compile_many(programs, site=inj.sites["s0"], routines=[ROUTINE])
    assert [str(b) for b in batch] == [str(s) for s in stubs.values()]
    assert nx.ptx_to_cubin(inj.render(stubs), arch="sm_90")


def test_compile_many_matches_single_compiles_and_grows_its_buffer():
    rng = np.random.default_rng(3)
    progs = [[POOL[i] for i in rng.integers(0, len(POOL), 80)] for _ in range(300)]
    enc = [sp.encode(p, ["x", "y"]) for p in progs]
    outs = {"z": "f32", "w": "s32"}
    singles = [sp.compile(p, F, outs, routines=[ROUTINE]) for p in progs]
    for batch in (sp.compile_many(progs, F, outs, routines=[ROUTINE]),
                  sp.compile_many(enc, F, outs, routines=[ROUTINE])):
        assert [str(s) for s in batch] == [str(s) for s in singles]
        assert [s.diagnostics for s in batch] == [s.diagnostics for s in singles]
    assert sp.compile_many([], F, outs) == []


# ---- encoding and serialization ------------------------------------------------------------------
def test_encode_decode_roundtrip():
    prog = [sp.input("x"), sp.const(2.5, "f64"), sp.const(-3, "s64"), sp.instr("fma.rn.f32"),
            sp.meta(7), sp.rotate("b32"), sp.store("u32", 9), sp.load("u32", 9), sp.routine(2), sp.ret()]
    words = sp.encode(prog, ["x"])
    assert words.dtype == np.uint64 and len(words) == len(prog) + 2      # two CONST64 data words
    assert sp.decode(words, ["x"]) == prog
    with pytest.raises(nx.NumptxError, match="word 0"):
        sp.decode(np.array([200], dtype=np.uint64))
    with pytest.raises(nx.NumptxError, match="CONST64 without"):
        sp.decode(words[:2])


def test_dumps_loads_roundtrip_and_rejects_corruption():
    prog = [sp.input("x"), sp.input("y"), sp.instr("mul.rn.f32"), sp.const(1.0, "f32"),
            sp.instr("add.rn.f32"), sp.const(7, "u64")]
    data = sp.dumps(prog)
    assert sp.loads(data) == prog
    assert str(sp.compile(sp.loads(data), F, Z)) == str(sp.compile(prog, F, Z))
    for bad in (data[:-1], data[:10], b"", data[:-9] + bytes([data[-9] ^ 1]) + data[-8:],
                b"XXXX" + data[4:], bytes(len(data))):
        with pytest.raises(sp.SerializationError):
            sp.loads(bad)
    with pytest.raises(sp.SerializationError):
        sp.loads("not bytes")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_loads_never_crashes_on_hostile_bytes(data):
    try:
        sp.loads(data)
    except sp.SerializationError:
        pass


# ---- AST PTX --------------------------------------------------------------------------------------
def test_ast_and_stack_agree_on_a_formula():
    x, y = ap.leaf(ap.input("x")), ap.leaf(ap.input("y"))
    tree = ap.node("sqrt.rn.f32", ap.node("fma.rn.f32", x, x, ap.node("mul.rn.f32", y, y)))
    a_stub = ap.compile(ap.postorder(tree), F, Z)
    s_prog = [sp.input("x"), sp.dup("f32"), sp.input("y"), sp.dup("f32"), sp.instr("mul.rn.f32"),
              sp.instr("fma.rn.f32"), sp.instr("sqrt.rn.f32")]
    s_stub = sp.compile(s_prog, F, Z)
    vals = {"x": np.float32([3, 1e-3, -2]), "y": np.float32([4, 7, 0.5])}
    assert nx.emulate(a_stub, vals, ["z"])["z"].tobytes() == nx.emulate(s_stub, vals, ["z"])["z"].tobytes()


@pytest.mark.parametrize("prog,code,index", [
    ([ap.input("x"), ap.instr("add.rn.f32")], "underflow", 1),
    ([ap.input("x"), ap.const(1, "s32"), ap.instr("add.rn.f32")], "type", 2),
    ([ap.input("x"), ap.input("y")], "left", 1),
    ([], "few", 0),
    ([ap.const(1, "s32")], "output", 0),
])
def test_ast_strict_errors_name_the_op(prog, code, index):
    with pytest.raises(ap.ASTError) as e:
        ap.compile(prog, F, Z)
    assert e.value.index == index and code in str(e.value).lower()
    assert f"at op {index}" in str(e.value)


def test_ast_rejects_stack_only_ops():
    with pytest.raises(ap.ASTError):
        ap.compile([ap.input("x"), sp.dup("f32")], F, Z)


def test_a_program_saved_under_a_table_that_since_gained_rows_loads():
    """sp.dumps records the table's hash; rows appended later (new instructions) leave the old
    rows' indices alone, so the program loads; a changed row does not."""
    import hashlib
    from numptx.instructions import TABLE
    prog = [sp.input("x"), sp.input("y"), sp.instr(TABLE[3].name)]
    n = 10                                        # the table as it stood with 10 rows
    h = hashlib.blake2b(digest_size=32)
    for r in list(TABLE)[:n]:
        h.update("\x1f".join((r.name, r.fmt, ",".join(r.operands), ",".join(r.results),
                              ",".join(sorted(r.flags)))).encode() + b"\x1e")

    def saved_under(digest: bytes) -> bytes:
        body = bytearray(sp.dumps(prog)[:-8])
        body[8:24] = digest[:16]                  # magic, version, flags, then the table hash
        return bytes(body) + hashlib.blake2b(bytes(body), digest_size=8).digest()

    assert sp.loads(saved_under(h.digest())) == prog
    assert TABLE.prefix_rows(h.hexdigest()) == n
    with pytest.raises(sp.SerializationError, match="different instruction table"):
        sp.loads(saved_under(hashlib.blake2b(b"another table", digest_size=32).digest()))
