"""The GPU interpreter of Stack PTX tapes (numptx/jit/populations/interpret_gpu.py and _source.py): the
generated kernel built for real with NVRTC and nvJitLink (its jump table, its SASS per
record), the tape checks and their errors; on a GPU (tests marked ``gpu``) its results bit for
bit against the CPU interpreter, the emulator and compiled candidates, its fitness sums
against nx.fitness, and its throughput (printed)."""
from __future__ import annotations

import re
import time

import numpy as np
import pytest

import numptx as nx
from numptx import stack_ptx as sp
from numptx import valuetypes as VT
from numptx.instructions import TABLE
from numptx.jit.populations.interpret_gpu import (InterpretGpuError, fitness_sums_gpu, interp_variant,
                                      interpret_gpu, prepare_tapes, scores_from_sums)
from numptx.jit.populations.interpret_gpu_source import (CASE_CONST, CASE_INPUT, ENTRY, FIRST_ROW_CASE,
                                             Subset, row_asm, sass_profile, supported)

NO = 0xFFFFFFFF
GENE_ROWS = {t: [f"add.rn.{t}", f"sub.rn.{t}", f"mul.rn.{t}", f"div.rn.{t}", f"max.{t}",
                 f"min.{t}", f"fma.rn.{t}", f"neg.{t}", f"abs.{t}", f"rcp.rn.{t}",
                 f"sqrt.rn.{t}"] for t in ("f32", "f64")}
GENE_ROWS["f32"] += ["ex2.approx.f32", "lg2.approx.f32", "sin.approx.f32", "cos.approx.f32",
                     "tanh.approx.f32"]
PRED_ROWS = {t: [f"setp.lt.{t}", f"setp.ge.{t}", f"selp.{t}"] for t in ("f32", "f64")}


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit, a NaN equal to any NaN (the table leaves NaN bit patterns unspecified)."""
    bits = {4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    a, b = np.broadcast_arrays(a, b)
    return bool(np.all((a.view(bits) == b.view(bits)) | (np.isnan(a) & np.isnan(b))))


def _nvdisasm() -> None:
    from numptx.jit.compile.sass import find_tool
    try:
        find_tool("nvdisasm")
    except nx.NumptxError:
        pytest.skip("no nvdisasm: pip install 'numptx[tools]'")


# ---- tapes by hand (the TAPES format of native/stack_ptx.h) -----------------------------------
def rec(kind: int, type_: str, dst: int, w2: int = 0, w3: int = 0, ops=(), n_res: int = 1):
    w0 = kind | VT.BY_NAME[type_].id << 8 | len(ops) << 16 | n_res << 24
    return [w0, dst, w2, w3, *ops, *[NO] * (4 - len(ops))]


def inp(type_: str, dst: int, index: int):
    return rec(0, type_, dst, index)


def const(type_: str, dst: int, bits: int):
    return rec(1, type_, dst, bits & NO, bits >> 32)


def ins(name: str, dst: int, *ops: int):
    row = TABLE[TABLE.index(name)]
    return rec(2, row.results[0], dst, TABLE.index(name), 0, ops, len(row.results))


def tape(records, outs, n_slots=None):
    n = n_slots if n_slots is not None else len(records)
    return [n, len(records), len(outs), 0, *outs, *[w for r in records for w in r]]


def batch(*tapes):
    words = np.array([w for t in tapes for w in t], np.uint32)
    offsets = np.zeros(len(tapes) + 1, np.uint64)
    np.cumsum([len(t) for t in tapes], out=offsets[1:])
    return words, offsets


def good():
    """x0 * x1: a program every bad batch starts with (program 0)."""
    return tape([inp("f32", 0, 0), inp("f32", 1, 1), ins("mul.rn.f32", 2, 0, 1)], [2])


# ---- the layout the kernel reads --------------------------------------------------------------
def test_tapes_of_sp_give_the_subset_and_the_device_layout():
    progs = [[sp.input("x0"), sp.input("x1"), sp.instr("mul.rn.f32")],
             [sp.input("x0"), sp.instr("sin.approx.f32")],
             [sp.input("x0"), sp.const(2.5, "f32"), sp.instr("setp.lt.f32"), sp.input("x0"),
              sp.input("x1"), sp.instr("selp.f32")],
             []]
    tp = sp.tapes(progs, {"x0": "f32", "x1": "f32"}, {"y": "f32"})
    dev = prepare_tapes(tp.words, tp.offsets, 2, ["f32"])
    names = {"mul.rn.f32", "sin.approx.f32", "setp.lt.f32", "selp.f32"}
    assert sorted(dev.subset.rows) == sorted(TABLE.index(n) for n in names)
    assert (dev.subset.slot_bits, dev.subset.max_slots) == (32, 16)
    assert dev.input_types == ("f32", "f32") and dev.n_programs == 4
    assert all(int(o) % 8 == 0 for o in dev.offsets)
    # every record of every program: its case names its row, its slots are byte offsets
    for k in range(len(tp)):
        t, o = tp.tape(k), int(dev.offsets[k])
        n_rec, n_out = int(t[1]), int(t[2])
        d = dev.words[o:]
        assert list(d[:3]) == list(t[:3]) and list(d[8:8 + n_out]) == list(t[4:4 + n_out])
        recs = t[4 + n_out:].reshape(n_rec, 8)
        drecs = d[16:16 + 8 * n_rec].reshape(n_rec, 8)
        for r, dr in zip(recs, drecs):
            kind = r[0] & 0xFF
            if kind == 2:
                assert dev.subset.rows[dr[0] - FIRST_ROW_CASE] == r[2]
                n_ops = (r[0] >> 16) & 0xFF
                assert list(dr[4:4 + n_ops]) == [4 * s for s in r[4:4 + n_ops]]
            else:
                assert dr[0] == (CASE_INPUT if kind == 0 else CASE_CONST) and dr[2] == r[2]
            assert dr[1] == 4 * r[1]


def test_f64_values_take_64_bit_slots_and_constants_keep_their_high_word():
    bits = int(np.float64(1.25).view(np.uint64))
    words, offsets = batch(tape([inp("f64", 0, 0), const("f64", 1, bits),
                                 ins("add.rn.f64", 2, 0, 1)], [2]))
    dev = prepare_tapes(words, offsets, 1, ["f64"])
    assert dev.subset.slot_bits == 64
    assert list(dev.words[16 + 8:16 + 12]) == [CASE_CONST, 8, bits & NO, bits >> 32]


def test_rows_fixes_one_kernel_for_batches_that_use_different_rows():
    a = batch(good())
    b = batch(tape([inp("f32", 0, 0), ins("sin.approx.f32", 1, 0)], [1]))
    rows = GENE_ROWS["f32"]
    sa = prepare_tapes(*a, 2, ["f32"], rows=rows).subset
    sb = prepare_tapes(*b, 2, ["f32"], rows=rows).subset
    assert sa == sb and [TABLE[i].name for i in sa.rows] == rows
    assert interp_variant(sa).key == interp_variant(sb).key
    assert prepare_tapes(*a, 2, ["f32"]).subset != prepare_tapes(*b, 2, ["f32"]).subset


def test_slot_bound_is_the_next_power_of_two_from_16():
    recs = [inp("f32", 0, 0)] + [ins("neg.f32", k, k - 1) for k in range(1, 40)]
    dev = prepare_tapes(*batch(tape(recs, [39])), 1, ["f32"])
    assert dev.subset.max_slots == 64


def _walk(dev, inputs, n_rows):
    """The device tapes run in NumPy as the kernel walks them (case word, slot byte offsets,
    input index, constant words, output slots), each row by its NumPy semantic: the host's
    layout checked without a GPU."""
    sb = dev.subset.slot_bits // 8
    uint = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

    def decode(bits, t):
        if t == "pred":
            return bits.astype(np.uint32) != 0
        dt = VT.BY_NAME[t].np
        return bits.astype(uint[dt.itemsize]).view(dt)

    def encode(v, t):
        if t == "pred":
            return np.asarray(v, bool).astype(np.uint64)
        dt = VT.BY_NAME[t].np
        return np.broadcast_to(np.asarray(v, dt), (n_rows,)).view(uint[dt.itemsize]) \
            .astype(np.uint64)
    outs = [np.zeros((dev.n_programs, n_rows), VT.BY_NAME[t].np) for t in dev.output_types]
    for p in range(dev.n_programs):
        t = dev.words[int(dev.offsets[p]):]
        n_rec, n_out = int(t[1]), int(t[2])
        slots = {}
        at = 8 + (n_out + 7) // 8 * 8
        for r in t[at:at + 8 * n_rec].reshape(n_rec, 8):
            case, d = int(r[0]), int(r[1]) // sb
            if case == CASE_INPUT:
                slots[d] = encode(inputs[int(r[2])], dev.input_types[int(r[2])])
            elif case == CASE_CONST:
                slots[d] = np.full(n_rows, int(r[2]) | int(r[3]) << 32, np.uint64)
            else:
                row = TABLE[dev.subset.rows[case - FIRST_ROW_CASE]]
                args = [decode(slots[int(r[4 + j]) // sb], s) for j, s in enumerate(row.operands)]
                with np.errstate(all="ignore"):
                    got = row.semantic(*args)
                got = got if len(row.results) > 1 else (got,)
                for j, (v, s) in enumerate(zip(got, row.results)):
                    slots[d + j] = encode(v, s)
        for k, typ in enumerate(dev.output_types):
            o = int(t[8 + k])
            outs[k][p] = 0 if o == NO else decode(slots[o], typ)
    return outs


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_the_device_layout_computes_what_the_cpu_interpreter_does(dtype):
    """Walking the device tapes as the kernel does gives the CPU interpreter's bits: the case
    numbers, byte offsets, inputs, constants and outputs the host writes are right."""
    rows = GENE_ROWS[dtype] + PRED_ROWS[dtype]
    progs = _random_programs(np.random.default_rng(7), dtype, rows, 60, 12)
    progs.append([])                                        # no value: output reads 0
    X = _data(dtype, 64)
    tp = sp.tapes(progs, {"x0": dtype, "x1": dtype}, {"y": dtype})
    dev = prepare_tapes(tp.words, tp.offsets, 2, [dtype])
    y, = _walk(dev, [X[:, 0], X[:, 1]], len(X))
    cpu = sp.interpret(progs, {"x0": X[:, 0], "x1": X[:, 1]}, {"y": dtype}, device="cpu")["y"]
    assert same(y, cpu)


def test_the_device_layout_of_pred_and_two_result_rows():
    """A pred output and an unpack (two results at dst, dst + 1) through the walk."""
    h = [int(v) for v in np.float16([1.5, -2.0]).view(np.uint16)]
    a, b = np.float32([1, 2, 3]), np.float32([2, 2, 2])
    dev = prepare_tapes(*batch(tape([inp("f32", 0, 0), inp("f32", 1, 1),
                                     ins("setp.lt.f32", 2, 0, 1)], [2])), 2, ["pred"])
    p, = _walk(dev, [a, b], 3)
    assert p.tolist() == [[True, False, False]]
    dev = prepare_tapes(*batch(tape([const("f16x2", 0, h[0] | h[1] << 16),
                                     ins("unpack.f16.f16x2", 1, 0)], [1, 2], n_slots=3)),
                        0, ["f16", "f16"])
    lo, hi = _walk(dev, [], 2)
    assert lo.tolist() == [[1.5, 1.5]] and hi.tolist() == [[-2.0, -2.0]]


# ---- the kernel, built for real ---------------------------------------------------------------
@pytest.mark.parametrize("mode,dtype,bits", [("outputs", "f32", 32), ("fitness-mse", "f32", 32),
                                              ("fitness-pearson", "f64", 64),
                                              ("fitness-mae", "f64", 64)])
def test_the_kernel_compiles_and_links_for_sm_90(mode, dtype, bits):
    rows = tuple(TABLE.index(n) for n in GENE_ROWS[dtype] + PRED_ROWS[dtype])
    v = interp_variant(Subset(rows, bits, 32, mode, dtype))
    assert v.cubin[:4] == b"\x7fELF" and v.entry == ENTRY[mode]
    assert ".target sm_90" in v.ptx and v.ptx.count("brx.idx") == 1


def test_every_row_the_interpreter_accepts_assembles():
    """The generator's PTX for each supported row (pred wrappers, b16/f16 registers, two
    results, braces) is what ptxas takes: one kernel holding all of them."""
    rows = tuple(i for i in range(len(TABLE)) if supported(i) is None)
    assert len(rows) > 300
    v = interp_variant(Subset(rows, 64, 16))
    assert v.cubin[:4] == b"\x7fELF"
    refused = [TABLE[i].name for i in range(len(TABLE)) if supported(i)]
    assert "%tid.x" in refused and "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in refused


def test_the_jump_table_covers_exactly_the_subset_with_each_rows_own_ptx():
    names = ["mul.rn.f32", "sin.approx.f32", "selp.f32", "setp.lt.f32", "fma.rn.f32"]
    rows = tuple(TABLE.index(n) for n in names)
    v = interp_variant(Subset(rows, 32, 16))
    ptx = v.ptx
    targets = re.search(r"\.branchtargets\s+([^;]*);", ptx).group(1).split(",")
    assert [t.strip() for t in targets] == ["NX_INPUT", "NX_CONST"] + \
        [f"NX_R{k}" for k in range(len(rows))]
    for i in rows:                            # the row's fmt, its $k as registers
        assert row_asm(i) in ptx
    others = [TABLE[i].name for i in range(len(TABLE)) if i not in rows and
              supported(i) is None and TABLE[i].name.endswith(".f32")]
    assert not any(f"// row {TABLE.index(n)}:" in ptx for n in others)
    _nvdisasm()
    from numptx.jit.compile.sass import sass_instructions
    brx = [s for s in sass_instructions(v.cubin) if s.startswith("BRX")]
    assert len(brx) == 1                       # one jump, not a tree of compares
    assert brx[0].count(".L_x_") == 2 + len(rows)


def test_built_once_then_from_the_cache():
    s = Subset(tuple(TABLE.index(n) for n in GENE_ROWS["f32"]), 32, 16, "fitness-rmse")
    interp_variant(s).cubin
    again = interp_variant(s)
    again.cubin
    assert again.build_info.how in ("memory", "disk")


def test_sass_per_record_the_cpu_proxy():
    """SASS instructions per dispatched record, per row: the figure the H200 estimate uses."""
    _nvdisasm()
    rows = tuple(TABLE.index(n) for n in GENE_ROWS["f32"])
    s = Subset(rows, 32, 64, "fitness-mse")
    p = sass_profile(interp_variant(s).cubin, s)
    assert set(p["cases"]) == {"INPUT", "CONST", *GENE_ROWS["f32"]}
    assert p["head"] > 0 and p["tail"] > 0 and all(n > 0 for n in p["cases"].values())
    per = {k: p["head"] + n + p["tail"] for k, n in p["cases"].items()}
    print(f"\nSASS per record (head {p['head']} + case + tail {p['tail']}): {per}")
    assert per["mul.rn.f32"] < 40


# ---- bad tapes: InterpretGpuError naming the program, nothing launched ------------------------
def _bad_cases():
    f32 = lambda k: inp("f32", k, 0)      # noqa: E731
    return {
        "slot bound": (tape([f32(0)] + [ins("neg.f32", k, k - 1) for k in range(1, 40)], [39]),
                       {"max_slots": 32}, "over the bound of 32"),
        "unknown row": (tape([f32(0), rec(2, "f32", 1, 99999, 0, (0,))], [1]), {},
                        "row 99999 is unknown"),
        "special row": (tape([rec(2, "u32", 0, TABLE.index("%tid.x"), 0, ())], []), {"outs": []},
                        "special register"),
        "not in rows=": (tape([f32(0), ins("sin.approx.f32", 1, 0)], [1]),
                         {"rows": ["mul.rn.f32"]}, "not in the kernel's rows"),
        "operand count": (tape([f32(0), rec(2, "f32", 1, TABLE.index("mul.rn.f32"), 0, (0,))],
                               [1]), {}, "takes 2 operand"),
        "read before written": (tape([f32(0), ins("mul.rn.f32", 1, 0, 1)], [1]), {},
                                "not written before"),
        "operand type": (tape([inp("f64", 0, 2), ins("neg.f32", 1, 0)], [1]), {},
                         "holds f64"),
        "input index": (tape([inp("f32", 0, 7)], [0]), {}, "reads input 7"),
        "output type": (tape([inp("f32", 0, 0)], [0]), {"outs": ["f64"]}, "output 0 is f64"),
        "output count": (tape([inp("f32", 0, 0)], [0, 0]), {}, "2 output(s)"),
        "slot order": (tape([inp("f32", 1, 0), inp("f32", 0, 1)], [0]), {},
                       "numbered in record order"),
        "kind": (tape([rec(7, "f32", 0)], [0]), {}, "kind 7"),
        "truncated": (tape([f32(0), f32(1)], [1])[:-8], {}, "run past"),
    }


@pytest.mark.parametrize("case", sorted(_bad_cases()))
def test_bad_tapes_name_the_program(case):
    bad, kw, words = _bad_cases()[case]
    outs = kw.pop("outs", ["f32"])
    first = good() if outs == ["f32"] else tape([inp("f32", 0, 0)], [] if not outs else [0])
    if outs == ["f64"]:
        first = tape([inp("f64", 0, 2)], [0])
    w, o = batch(first, bad)
    with pytest.raises(InterpretGpuError) as ei:
        prepare_tapes(w, o, 3, outs, **kw)
    assert ei.value.program == 1 and "program 1" in str(ei.value) and words in str(ei.value)
    assert isinstance(ei.value, nx.InterpretError)
    # interpret_gpu checks first, with or without a GPU: nothing is launched
    cols = [np.ones(4, np.float32), np.ones(4, np.float32), np.ones(4)]
    with pytest.raises(InterpretGpuError):
        interpret_gpu(w, o, cols, outs, **kw)


def test_bad_inputs_are_refused_before_any_launch():
    w, o = batch(good())
    with pytest.raises(InterpretGpuError, match=r"inputs\[1\] holds float64"):
        interpret_gpu(w, o, [np.ones(4, np.float32), np.ones(4)], ["f32"])
    with pytest.raises(InterpretGpuError, match="ragged"):
        interpret_gpu(w, o, [np.ones(4, np.float32), np.ones(5, np.float32)], ["f32"], n_rows=4)
    with pytest.raises(InterpretGpuError, match="block="):
        interpret_gpu(w, o, [np.ones(4, np.float32)] * 2, ["f32"], block=100)
    with pytest.raises(InterpretGpuError, match="loss="):
        fitness_sums_gpu(w, o, [np.ones(4, np.float32)] * 2, np.ones(4, np.float32), "huber")


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_the_launch_arguments_fit_the_kernels_parameters(dtype):
    """What run() hands each kernel is what its parameters take (numptx's marshal, the real
    one, with a stand-in device address): pointer types and dtypes, scalars, the count."""
    from numptx.jit.templates.cuda_launch import marshal
    from numptx.jit.populations.interpret_gpu import plan_fitness, plan_interpret
    w, o = batch(tape([inp(dtype, 0, 0), inp(dtype, 1, 1), ins(f"mul.rn.{dtype}", 2, 0, 1)],
                      [2]))
    cols = [np.ones(8, VT.BY_NAME[dtype].np)] * 2
    for plan in (plan_interpret(w, o, cols, [dtype]),
                 plan_fitness(w, o, cols, cols[0], "pearson", dtype=dtype)):
        v = plan.variant
        m = marshal(v.entry, v.template.params, (*plan.args, 0), to_device=lambda a: 4096)
        assert len(m.values) == len(v.template.params) == len(plan.args) + 1
        wrong = (plan.args[0].astype(np.float32),) + plan.args[1:]
        with pytest.raises(nx.LaunchError):
            marshal(v.entry, v.template.params, (*wrong, 0), to_device=lambda a: 4096)


def test_without_a_gpu_a_good_batch_is_a_launch_error():
    from numptx.jit.populations.fitness import gpu_available
    if gpu_available():
        pytest.skip("a GPU is present")
    w, o = batch(good())
    with pytest.raises(nx.LaunchError, match="no CUDA GPU"):
        interpret_gpu(w, o, [np.ones(4, np.float32)] * 2, ["f32"])


def test_the_backend_sp_interpret_registers():
    from numptx.jit.populations.fitness import gpu_available
    from numptx.jit.populations.interpret_gpu import GpuInterpreter
    b = GpuInterpreter()
    assert b.available() == gpu_available()
    tp = sp.tapes([], {"x0": "f32"}, {"y": "f32", "p": "pred"})
    got = b.run(tp, [], 5)
    assert got["y"].shape == (0, 5) and got["p"].dtype == np.bool_


# ---- on a GPU ---------------------------------------------------------------------------------
def _random_programs(rng, dtype: str, rows: list[str], n: int, length: int) -> list:
    progs = []
    for _ in range(n):
        p = []
        for _ in range(length):
            r = rng.random()
            if r < 0.3:
                p.append(sp.input(f"x{int(rng.integers(2))}"))
            elif r < 0.4:
                p.append(sp.const(float(rng.normal() * 3), dtype))
            else:
                p.append(sp.instr(rows[int(rng.integers(len(rows)))]))
        progs.append(p)
    return progs


def _data(dtype: str, n: int = 1000):
    rng = np.random.default_rng(5)
    X = rng.uniform(-3, 3, (n, 2)).astype(VT.BY_NAME[dtype].np)
    X[:8] = np.array([[0, -0.0], [np.inf, 1], [-1, np.nan], [1e-40, 3], [2, 2], [-2, 0.5],
                      [1e30, -1e30], [5, 1e-30]], X.dtype)
    return X


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_gpu_equals_the_cpu_interpreter_and_the_emulator_bit_for_bit(dtype):
    """Exact rows (and setp/selp): the GPU's bits are the CPU interpreter's and nx.emulate's
    (NaN for NaN: the table leaves NaN bit patterns unspecified)."""
    rows = [r for r in GENE_ROWS[dtype] if "approx" not in r] + PRED_ROWS[dtype]
    progs = _random_programs(np.random.default_rng(1), dtype, rows, 300, 14)
    X = _data(dtype)
    ins_ = {"x0": X[:, 0], "x1": X[:, 1]}
    tp = sp.tapes(progs, {"x0": dtype, "x1": dtype}, {"y": dtype})
    y, = interpret_gpu(tp.words, tp.offsets, [X[:, 0], X[:, 1]], [dtype])
    cpu = sp.interpret(progs, ins_, {"y": dtype}, device="cpu")["y"]
    assert y.shape == (300, len(X)) and same(y, cpu)
    stubs = sp.compile_many(progs[:20], {"x0": dtype, "x1": dtype}, {"y": dtype})
    for k, st in enumerate(stubs):
        assert same(y[k], nx.emulate(st, ins_, outputs={"y": dtype})["y"]), k


@pytest.mark.gpu
def test_gpu_equals_compiled_candidates_bit_for_bit_approx_rows_too():
    """Every gene row, approximate ones included: the interpreter runs the rows' own PTX, so
    its bits are those of the programs compiled into a kernel."""
    rows = GENE_ROWS["f32"] + PRED_ROWS["f32"]
    progs = _random_programs(np.random.default_rng(2), "f32", rows, 40, 12)
    X = _data("f32", 512)
    src = r'''
extern "C" __global__ void kernel(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x0 = a[i], x1 = b[i], y;
        PTX_INJECT("f", PTX_IN(F32, x0), PTX_IN(F32, x1), PTX_OUT(F32, y));
        out[i] = y;
    }
}'''
    tmpl = nx.CudaTemplate(src, entry="kernel")
    tp = sp.tapes(progs, {"x0": "f32", "x1": "f32"}, {"y": "f32"})
    y, = interpret_gpu(tp.words, tp.offsets, [X[:, 0], X[:, 1]], ["f32"])
    a, b = np.ascontiguousarray(X[:, 0]), np.ascontiguousarray(X[:, 1])
    for k, prog in enumerate(progs):
        out = np.zeros(len(X), np.float32)
        tmpl.inject(f=prog)[(len(X) + 127) // 128, 128](out, a, b, len(X))
        assert np.array_equal(out.view(np.uint32), y[k].view(np.uint32)), k


@pytest.mark.gpu
@pytest.mark.parametrize("loss", ["mse", "mae", "pearson"])
def test_gpu_fitness_sums_give_nx_fitness_scores(loss):
    rows = GENE_ROWS["f32"]
    progs = _random_programs(np.random.default_rng(3), "f32", rows, 50, 10)
    X = _data("f32", 2000)[8:]
    t = (X[:, 0] * X[:, 1] + 1).astype(np.float32)
    tp = sp.tapes(progs, {"x0": "f32", "x1": "f32"}, {"y": "f32"})
    sums = fitness_sums_gpu(tp.words, tp.offsets, [X[:, 0], X[:, 1]], t, loss)
    want = nx.fitness(progs, X, t, loss=loss, device="gpu", evaluate="compile")
    got = scores_from_sums(sums, loss, t)
    fin = np.isfinite(want)
    assert np.array_equal(fin, np.isfinite(got))
    assert got[fin] == pytest.approx(want[fin], rel=1e-9, abs=1e-12)


def test_scores_from_sums_are_the_fitness_formulas():
    t = np.float32([1, 2, 3, 4])
    p = np.float32([1, 2, 3, 5])
    d = p.astype(np.float64) - t
    c = float(t.astype(np.float64).mean())
    q = p.astype(np.float64) - c
    sums = np.array([[np.sum(d * d), 0, 0, 0], [np.sum(d * d), 0, 0, 2],
                     [q.sum(), (q * q).sum(), (q * (t - c)).sum(), 0]])
    mse = scores_from_sums(sums[:2], "mse", t)
    assert mse[0] == pytest.approx(0.25) and np.isinf(mse[1])
    assert scores_from_sums(sums[:1], "rmse", t)[0] == pytest.approx(0.5)
    r = np.corrcoef(p, t)[0, 1]
    assert scores_from_sums(sums[2:], "pearson", t)[0] == pytest.approx(1 - r, rel=1e-9)


@pytest.mark.gpu
def test_gpu_throughput_row_ops_per_second():
    """Printed, not asserted: row-ops/s (records x rows / s) of the fitness kernel alone
    (CUDA events around the launch), and candidates/s of the whole call (host checks, layout
    and copies included)."""
    from numba import cuda
    rows = GENE_ROWS["f32"]
    progs = _random_programs(np.random.default_rng(4), "f32", rows, 20000, 40)
    X = _data("f32", 1000)[8:]
    t = X[:, 0].copy()
    tp = sp.tapes(progs, {"x0": "f32", "x1": "f32"}, {"y": "f32"})
    from numptx.jit.populations.fitness import device_arch
    from numptx.jit.populations.interpret_gpu import plan_fitness
    plan = plan_fitness(tp.words, tp.offsets, [X[:, 0], X[:, 1]], t, rows=rows,
                        arch=device_arch())
    dev = plan.tapes
    records = int(sum(dev.words[int(o) + 1] for o in dev.offsets))
    args = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in plan.args]
    n, block = len(t), 256
    launch = plan.variant[((n + block - 1) // block, len(progs)), block]
    launch(*args, 0)                                              # load the module
    start, end = cuda.event(), cuda.event()
    start.record()
    for _ in range(5):
        launch(*args, 0)
    end.record()
    end.synchronize()
    s = cuda.event_elapsed_time(start, end) / 1e3 / 5
    whole = time.perf_counter()
    fitness_sums_gpu(tp.words, tp.offsets, [X[:, 0], X[:, 1]], t, rows=rows)
    whole = time.perf_counter() - whole
    print(f"\nGPU interpreter: {len(progs)} programs, {records / len(progs):.1f} records each, "
          f"{n} rows: kernel {s * 1e3:.2f} ms = {records * n / s:.3g} row-ops/s, "
          f"{len(progs) / s:.3g} candidates/s; whole call {whole * 1e3:.1f} ms = "
          f"{len(progs) / whole:.3g} candidates/s")


@pytest.mark.gpu
@pytest.mark.parametrize("dialect", [None, "mm-ptx"])
def test_gpu_through_sp_interpret_two_outputs_a_pred_and_the_dialects(dialect):
    """sp.interpret(device="gpu") through the backend: an f32 and a pred output, and mm-ptx's
    unwritten outputs (slot 0xFFFFFFFF: 0), as the CPU interpreter gives them."""
    from numptx._program.interpret import register_device
    from numptx.jit.populations.interpret_gpu import GpuInterpreter
    register_device("gpu", GpuInterpreter())
    rows = GENE_ROWS["f32"] + PRED_ROWS["f32"]
    progs = _random_programs(np.random.default_rng(6), "f32", rows, 100, 10) + [[]]
    X = _data("f32", 300)
    cols = {"x0": X[:, 0], "x1": X[:, 1]}
    outs = {"y": "f32", "p": "pred"}
    gpu = sp.interpret(progs, cols, outs, device="gpu", dialect=dialect)
    cpu = sp.interpret(progs, cols, outs, device="cpu", dialect=dialect)
    assert same(gpu["y"], cpu["y"]) and np.array_equal(gpu["p"], cpu["p"])


def test_the_backend_checks_tapes_with_no_rows():
    """No rows refuses what rows refuse (a special-register row is no GPU interpreter row)."""
    from numptx._program.interpret import columns
    from numptx.jit.populations.interpret_gpu import GpuInterpreter, InterpretGpuError
    tp = sp.tapes([[sp.special("tid.x"), sp.instr("cvt.rn.f32.u32")]], {}, {"y": "f32"})
    cols, _ = columns({})
    with pytest.raises(InterpretGpuError, match="program 0"):
        GpuInterpreter().run(tp, cols, 0)


def test_a_search_keeps_one_kernel_for_its_genes_rows():
    """The search passes its genes' rows (Genes.rows): batches that use different rows plan
    the same kernel; a program with a row outside them plans its batch's own (not the whole
    batch to the compiled path)."""
    from numptx.jit.populations.interpret_gpu import plan_fitness_rows
    from numptx.search.genes import Genes
    genes = Genes(["add", "mul", "sin", "exp"], 1)
    assert {"add.rn.f32", "mul.rn.f32", "sin.approx.f32", "ex2.approx.f32"} <= set(genes.rows)
    x = np.linspace(0.1, 1.0, 16).astype(np.float32)
    y = np.float32(2) * x

    def plan(progs, rows):
        tp = sp.tapes(progs, {"x0": "f32"}, {"p": "f32"})
        return plan_fitness_rows(tp, [x], y, "mse", "f32", rows, "sm_90")

    a = plan([[sp.input("x0"), *genes.op_words("add")], [sp.input("x0"), sp.input("x0"),
                                                         *genes.op_words("add")]], genes.rows)
    b = plan([[sp.input("x0"), *genes.op_words("sin")]], genes.rows)
    assert a.tapes.subset == b.tapes.subset and a.variant.key == b.variant.key   # one build
    c = plan([[sp.input("x0"), sp.instr("sqrt.rn.f32")]], genes.rows)     # not a gene's row
    assert c.tapes.subset != a.tapes.subset
