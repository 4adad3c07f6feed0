"""Adversarial review of the batch interpreter (issue 23): each test is a defect found by
review, checked against the real components (the C core, the emulator of the compiled stub,
numba-cuda's simulator in a fresh process)."""
from __future__ import annotations

import numpy as np
import pytest

import numptx as nx
from numptx import stack_ptx as sp
from numptx._program.interpret import RowRunner

from conftest import run_script

MOD_SITE = r'''
extern "C" __global__ void k(float* out, const float* a) {
    float x = a[0], acc = a[1], z;
    PTX_INJECT("f", PTX_IN(F32, x), PTX_MOD(F32, acc), PTX_OUT(F32, z));
    out[0] = z + acc;
}'''


def test_mm_ptx_unwritten_output_that_is_an_input_keeps_the_input():
    """mm-ptx leaves an unsatisfied output unwritten: where the output is also an input (a
    mod variable; an output named like an input) the stub's register keeps the input's
    value, as the emulator of the stub (and the GPU) give it, not 0."""
    b, x = np.float32([1.5, -2.5, np.inf]), np.float32([3, 4, 5])
    outs = {"y": "f32", "b": "f32"}
    for p in ([sp.input("x")], [], [sp.input("b"), sp.input("x"), sp.instr("add.rn.f32")]):
        stub = sp.compile(p, {"b": "f32", "x": "f32"}, outs, dialect="mm-ptx")
        want = nx.emulate(stub, {"b": b, "x": x, "y": np.zeros(3, np.float32)}, list(outs))
        got = sp.interpret([p, p], {"b": b, "x": x}, outs, dialect="mm-ptx", device="cpu")
        for o in outs:
            w = np.broadcast_to(np.asarray(want[o]), (3,))
            assert np.array_equal(got[o], [w, w]), (p, o, got[o], w)
    # a scalar input broadcasts into the kept output
    got = sp.interpret([[]], {"b": 7.0, "x": x}, outs, dialect="mm-ptx", device="cpu")
    assert got["b"].tolist() == [[7, 7, 7]] and got["y"].tolist() == [[0, 0, 0]]
    # at a site: an unwritten PTX_MOD variable keeps its value, an out variable reads 0
    site = nx.CudaTemplate(MOD_SITE, entry="k").sites["f"]
    assert [v.name for v in site.outputs] == ["acc", "z"]
    got = sp.interpret([[], [sp.input("x")]], {"x": x, "acc": b}, site=site, dialect="mm-ptx",
                       device="cpu")
    assert np.array_equal(got["acc"], [b, x]) and not got["z"].any()


def test_a_formula_whose_mod_variable_passes_through_has_a_tape():
    """A formula that does not write a site's mod variable compiles to ``mov %v_acc, %v_acc``:
    two inputs on one register (``acc`` and ``acc\\x00k``). The tape must list both, or the
    tape reads an input index its Tapes lacks (a malformed tape, under the simulator an
    InterpretError inside every thread)."""
    from numptx.jit.numba.numba_site import SiteSpec
    from numptx.jit.numba.sim_checks import site_for

    @nx.ptx_expr
    def step(x: nx.f32, acc: nx.f64, k: nx.s32):
        return {"w": nx.f64(x) * 2.0 + acc, "m": k + 3, "z": x * x}

    spec = SiteSpec("s", (("in", "f32", "x"), ("in", "s32", "k"), ("out", "f32", "z"),
                          ("out", "f64", "w"), ("out", "s32", "m"), ("mod", "f64", "acc")))
    site = site_for(spec)
    tp = step.tape(site)
    assert len(tp.inputs) == 4 and list(tp.inputs.values()).count("f64") == 2
    run = RowRunner(tp)
    run.inputs["x"][0], run.inputs["acc"][0], run.inputs["k"][0] = 1.5, -0.25, 40
    run()
    got = {n: b[0] for n, b in run.outputs.items()}
    assert got == {"z": np.float32(2.25), "w": 2.75, "m": 43, "acc": -0.25}


SIM_MOD = r'''
import numpy as np, numptx as nx, warnings
import numptx.jit.numba.launch as L
from numba import cuda

@nx.ptx_expr
def step(x: nx.f32, acc: nx.f64, k: nx.s32):
    return {"w": nx.f64(x) * 2.0 + acc, "m": k + 3, "z": x * x}

@nx.kernel
def body(out, outw, outm, a, accs, ks):
    i = cuda.grid(1)
    if i < a.shape[0]:
        acc = accs[i]
        z, w, m, acc = nx.site("s", x=a[i], k=ks[i], out={"z": nx.f32, "w": nx.f64, "m": nx.s32},
                               mod={"acc": acc})
        out[i] = z; outw[i] = w + acc; outm[i] = m

n = 70
rng = np.random.default_rng(0)
a = rng.uniform(-3, 3, n).astype(np.float32)
accs = rng.uniform(-3, 3, n)
ks = rng.integers(-100, 100, n).astype(np.int32)
res = {}
for tapes in (True, False):
    L.SIM_TAPES = tapes
    out = np.zeros(n, np.float32); outw = np.zeros(n); outm = np.zeros(n, np.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        body.inject(s=step)[2, 64](out, outw, outm, a, accs, ks)
    res[tapes] = (out, outw, outm)
for x, y in zip(res[True], res[False]):
    assert np.array_equal(x, y), (x[:4], y[:4])
assert np.array_equal(res[True][2], ks + 3)
print("MOD-OK")
'''


def test_simulator_formula_site_with_a_mod_variable_it_does_not_write(tmp_path):
    run_script(tmp_path, SIM_MOD, simulator=True, marker="MOD-OK")


def test_a_numpy_float64_scalar_is_an_f64_value():
    """np.float64 subclasses Python's float: it was typed f32 and then refused as "a float64
    value for the f32 input: pass np.float32(...)" for a program whose input is f64."""
    prog = [sp.input("x"), sp.input("k"), sp.instr("mul.rn.f64")]
    x = np.float64([1, 2, 3])
    got = sp.interpret([prog], {"x": x, "k": np.float64(0.1)}, {"y": "f64"}, device="cpu")
    assert np.array_equal(got["y"][0], x * 0.1)
    got = sp.interpret([[sp.input("k")]], {"k": 0.1}, {"y": "f32"}, device="cpu")  # a float: f32
    assert got["y"][0, 0] == np.float32(0.1)


@pytest.mark.parametrize("value", [[1.0, 2.0, 3.0], (1, 2), None, "1.5", {"a": 1}])
def test_a_column_that_is_no_array_or_number_is_refused(value):
    """A list was taken for a scalar: every row read its first element."""
    with pytest.raises(nx.InterpretError, match=r"inputs\['x'\]: a (list|tuple|NoneType|str|"
                                                r"dict); give a 1-D NumPy array"):
        sp.interpret([[sp.input("x")]], {"x": value, "z": np.zeros(3)}, {"y": "f64"},
                     device="cpu")


@pytest.mark.parametrize("value, t", [(1.5, "s32"), (-1.0, "u32"), (2.0, "pred"),
                                      (float("nan"), "s64"), (1e30, "u64")])
def test_a_float_an_integer_type_does_not_hold_is_refused(value, t):
    """types={'k': 's32'} with k=1.5 ran k=1 (silently truncated)."""
    with pytest.raises(nx.InterpretError, match=rf"inputs\['k'\]: .* is no {t} value"):
        sp.interpret([[sp.input("k")]], {"k": value}, {"y": t}, types={"k": t}, device="cpu")
    got = sp.interpret([[sp.input("k")]], {"k": 3.0}, {"y": "s32"}, types={"k": "s32"},
                       device="cpu")
    assert got["y"].tolist() == [[3]]


def test_misaligned_columns_are_copied_for_the_c_rows():
    """The C rows read columns through typed pointers: a misaligned view is undefined
    behaviour there (x86 tolerates it, other targets trap); columns() copies it."""
    from numptx._program.interpret import columns
    buf = np.zeros(8 * 300 + 8, np.uint8)
    a = np.frombuffer(buf.data, np.float64, 300, 1)
    a[:] = np.linspace(-3, 3, 300)
    assert not a.flags.aligned
    b = np.arange(300.0)
    cols, n = columns({"a": a, "b": b})
    assert n == 300 and all(c.data.flags.aligned and c.data.flags.c_contiguous for c in cols)
    assert cols[1].data is b                                  # an aligned column: no copy
    got = sp.interpret([[sp.input("a"), sp.input("b"), sp.instr("add.rn.f64")]],
                       {"a": a, "b": b}, {"y": "f64"}, device="cpu")
    assert np.array_equal(got["y"][0], a + b)


def _two_tapes():
    from numptx._program.interpret import columns
    prog = [sp.input("x"), sp.const(2.0, "f32"), sp.instr("mul.rn.f32"), sp.input("x"),
            sp.instr("add.rn.f32")]
    tp = sp.tapes([prog, prog], {"x": "f32"}, {"y": "f32"})
    c, n = columns({"x": np.arange(5, dtype=np.float32)})
    return tp, c, n


@pytest.mark.parametrize("words, offsets, match", [
    (lambda w: w, lambda o: np.array([0, 37, 200], np.uint64), r"Tapes\.offsets: each"),
    (lambda w: w, lambda o: np.array([37, 0, 74], np.uint64), r"Tapes\.offsets: each"),
    (lambda w: w[:0], lambda o: np.array([0, 0], np.uint64), r"Tapes\.offsets: each"),
    (lambda w: w.astype(np.float32), lambda o: o, r"Tapes\.words: a 1-D uint32 array"),
    (lambda w: list(w), lambda o: o, r"Tapes\.words: a 1-D uint32 array"),
    (lambda w: w, lambda o: o.reshape(1, -1), r"Tapes\.offsets: a 1-D integer array"),
    (lambda w: w, lambda o: o.astype(float), r"Tapes\.offsets: a 1-D integer array"),
])
def test_hand_made_tapes_are_checked_against_their_words(words, offsets, match):
    """The C core trusts offsets to lie inside words and reads words / offsets through raw
    pointers (uint32 / uint64): offsets past the words read out of bounds, an empty one was an
    IndexError, float words ran as garbage."""
    from numptx._program.interpret import Tapes
    tp, _, _ = _two_tapes()
    with pytest.raises(nx.InterpretError, match=match):
        Tapes(words(tp.words), offsets(tp.offsets), tp.inputs, tp.outputs, tp.dialect)


@pytest.mark.parametrize("how", ["offsets uint32", "offsets int64", "offsets list",
                                 "words int64", "words strided", "words reversed copy"])
def test_hand_made_tapes_of_other_integer_layouts_run_the_same(how):
    """uint32 offsets were read as uint64 by the C core (a malformed-tape refusal), int64
    words as pairs of uint32, a strided view through its base pointer."""
    from numptx._program.interpret import Tapes, run_cpu
    tp, c, n = _two_tapes()
    want = run_cpu(tp, c, n)["y"]
    w, o = tp.words, tp.offsets
    w, o = {"offsets uint32": (w, o.astype(np.uint32)), "offsets int64": (w, o.astype(np.int64)),
            "offsets list": (w, [int(v) for v in o]), "words int64": (w.astype(np.int64), o),
            "words strided": (np.repeat(w, 2)[::2], o),
            "words reversed copy": (w[::-1].copy()[::-1], o)}[how]
    got = run_cpu(Tapes(w, o, tp.inputs, tp.outputs, tp.dialect), c, n)["y"]
    assert np.array_equal(got, want) and want[0].tolist() == [0, 3, 6, 9, 12]


def test_a_garbage_header_names_its_program():
    """A header whose counts do not fill its span made records() allocate tens of GiB
    (MemoryError from refused() and RowRunner); a header claiming 2^28 slots was reported as
    'program 4294967295: the interpreter refused the workspace'."""
    from numptx._program.interpret import RowRunner, Tapes, refused, run_cpu, subset
    tp, c, n = _two_tapes()
    w = tp.words.copy()
    w[int(tp.offsets[1]) + 1] = 0xFFFFFFFF           # program 1: records
    bad = Tapes(w, tp.offsets, tp.inputs, tp.outputs, tp.dialect)
    for call in (lambda: refused(bad), lambda: RowRunner(subset(bad, np.array([1])))):
        with pytest.raises(nx.InterpretError, match=r"program \d: a malformed tape") as e:
            call()
    with pytest.raises(nx.InterpretError, match=r"program 1: ") as e:
        run_cpu(bad, c, n)
    assert e.value.program == 1
    w = tp.words.copy()
    w[int(tp.offsets[1])] = 0x0FFFFFFF               # program 1: slots past any workspace
    with pytest.raises(nx.InterpretError, match=r"program 1: a malformed tape \(its header "
                                                r"claims 268435455 slots") as e:
        run_cpu(Tapes(w, tp.offsets, tp.inputs, tp.outputs, tp.dialect), c, n)
    assert e.value.program == 1


@pytest.mark.parametrize("kw, match", [
    (dict(outputs=["y"]), r"outputs: expected a mapping .* not list"),
    (dict(types=["f32"]), r"types: expected a mapping .* not list"),
    (dict(types=[("x", "f32")]), r"types: expected a mapping .* not list"),
])
def test_outputs_and_types_that_are_no_mapping_are_named(kw, match):
    """outputs=['y'] escaped as AttributeError, types=['f32'] as ValueError."""
    args = dict(outputs={"y": "f32"}) | kw
    with pytest.raises(nx.InterpretError, match=match):
        sp.interpret([[sp.input("x")]], {"x": np.float32([1, 2])}, args.pop("outputs"),
                     device="cpu", **args)


def test_a_stack_tape_larger_than_its_first_buffer_is_written():
    """tape_lowered's stack mode retried with the size tape_many reports, but tape_many
    reports none when a tape does not fit (out_offsets[1] untouched): the retry got 64 words
    and failed again ('output buffer too small'). Twelve unsatisfied outputs of distinct
    types need twelve zero-constant records from an empty program."""
    from numptx._program.interpret import tape_lowered
    from numptx.jit.numba.numba_site import SiteSpec
    from numptx.jit.numba.sim_checks import site_for
    ts = ["f32", "f64", "s32", "u32", "s64", "u64", "b16", "b32", "b64", "f16", "bf16", "f16x2"]
    spec = SiteSpec("s", (("in", "f32", "x"),) +
                    tuple(("out", t, f"y{k}") for k, t in enumerate(ts)))
    tp = tape_lowered("stack", b"", ("x",), None, site=site_for(spec))
    assert len(tp.words) == 4 + 12 + 8 * 12 and list(tp.outputs) == [f"y{k}" for k in range(12)]
    assert len(set(tp.tape(0)[4:16].tolist())) == 12           # one zero constant per type


def _xy():
    X = np.random.default_rng(0).uniform(-1, 1, (50, 2)).astype(np.float32)
    return X, X[:, 0] * X[:, 1]


P_MUL = [sp.input("x0"), sp.input("x1"), sp.instr("mul.rn.f32")]
P_ADD = [sp.input("x0"), sp.input("x0"), sp.instr("add.rn.f32")]


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32])
def test_fitness_an_array_the_compiler_refuses_scores_inf_in_every_mode(dtype):
    """sp.compile takes 1-D uint64 arrays only, so the compiled path scores an int32 array
    +inf; the interpreter took any integer array as words and scored it (0.16 here)."""
    X, y = _xy()
    cands = [P_MUL, np.zeros(3, dtype)]
    want = nx.fitness(cands, X, y, evaluate="compile", device="cpu")
    assert want[0] == 0 and want[1] == np.inf
    assert np.array_equal(nx.fitness(cands, X, y, evaluate="auto", device="cpu"), want)
    from numptx.jit.populations.fitness_checks import FitnessError
    with pytest.raises(FitnessError, match="candidate 1 is a ndarray"):
        nx.fitness(cands, X, y, evaluate="interpret", device="cpu")


def test_fitness_interprets_a_population_mixing_dialects():
    """A batch of numptx and mm-ptx programs made the tapes call fail as a whole: 'auto' sent
    every candidate to the compiled path, 'interpret' raised naming candidate 0. Each dialect
    now runs apart, with the losses of the compiled path."""
    import numptx.jit.populations.fitness as F
    from numptx.jit.populations.fitness_interpret import interpret_losses
    X, y = _xy()
    cands = [sp.encode(P_MUL, dialect="mm-ptx"), P_ADD, sp.encode(P_ADD, dialect="mm-ptx"),
             [sp.dialect_marker("mm-ptx"), *P_ADD], P_MUL, sp.encode(P_MUL)]
    want = nx.fitness(cands, X, y, evaluate="compile", device="cpu")
    got = nx.fitness(cands, X, y, evaluate="interpret", device="cpu")
    assert np.array_equal(got, want) and want[0] == 0
    job = F.prepare(cands, X, y)
    tmpl = F.fitness_template(2, job.names, "f32", "mse", "sm_90")
    losses, rest = interpret_losses(job.candidates, job.X, job.y, job.names, "mse",
                                    tmpl.sites["f"])
    assert rest == {} and np.array_equal(losses, want)


@pytest.mark.parametrize("bad, match", [
    ([sp.input("nope")], r"program 2: input\('nope'\)"),
    (sp.encode([sp.input("nope")]), r"program 2: word 0 reads input 'nope'"),
    ([1], r"program 2 item 0 is 1"),
    ("ab", r"program 2: expected a list of ops"),
])
def test_program_errors_carry_the_program_index(bad, match):
    """The message named the program, but .program was None (InterpretError documents it)."""
    progs = [[sp.input("x")], sp.encode([sp.input("x")]), bad]
    with pytest.raises(nx.InterpretError, match="interpret: " + match) as e:
        sp.interpret(progs, {"x": np.float32([1])}, {"y": "f32"}, device="cpu")
    assert e.value.program == 2


def test_no_rows_refuses_what_rows_refuse():
    """With 0 rows run_cpu returned zeros before the C core saw a tape: a row without C
    semantics passed with 0 rows and was refused with 1."""
    p = [sp.input("x"), sp.instr("cvt.rn.f16.f32"), sp.instr("cvt.f32.f16")]
    for n in (0, 1):
        with pytest.raises(nx.InterpretError, match=r"program 1 uses 'cvt.rn.f16.f32'"):
            sp.interpret([[sp.input("x")], p], {"x": np.zeros(n, np.float32)}, {"y": "f32"},
                         device="cpu")
    got = sp.interpret([[sp.input("x")], []], {"x": np.zeros(0, np.float32), "k": 1.0},
                       {"y": "f32", "z": "pred"}, device="cpu", dialect="mm-ptx")
    assert got["y"].shape == (2, 0) and got["z"].shape == (2, 0) and got["z"].dtype == bool


def test_threads_bounds_the_threads_not_the_spans(monkeypatch):
    """run_cpu cut a batch into up to 4 * threads spans and handed every span to the shared
    pool (os.cpu_count() workers): threads=2 ran on up to 8 threads at once."""
    import threading
    from concurrent.futures import ThreadPoolExecutor
    import numptx._program.interpret as I
    from interp_programs import data, random_program, rows_for
    pool = ThreadPoolExecutor(16)
    submitted = []

    class Recording:
        def map(self, fn, items):
            items = list(items)
            submitted.append(len(items))
            return pool.map(fn, items)

    monkeypatch.setattr(I, "executor", lambda: Recording())
    rng = np.random.default_rng(4)
    cols = data(rng, "f32", ["a", "b"], 2000)
    progs = [random_program(rng, "f32", ["a", "b"], rows_for("f32"), 20, meta=False)
             for _ in range(64)]
    one = sp.interpret(progs, cols, {"y": "f32"}, device="cpu", threads=1)["y"]
    assert submitted == []                          # one thread: the caller's
    seen = set()
    job_call = I._Job.__call__

    def recording_call(self, p0, p1):
        seen.add(threading.get_ident())
        return job_call(self, p0, p1)

    monkeypatch.setattr(I._Job, "__call__", recording_call)
    two = sp.interpret(progs, cols, {"y": "f32"}, device="cpu", threads=2)["y"]
    assert submitted and max(submitted) <= 2 and len(seen) <= 2
    assert np.array_equal(one.view(np.uint32), two.view(np.uint32))
    pool.shutdown()


F64_SITE = r'''
extern "C" __global__ void k(double* out, const double* a, int n) {
    double x = a[0], y; int m = n;
    PTX_INJECT("f", PTX_IN(F64, x), PTX_IN(S32, m), PTX_OUT(F64, y));
    out[0] = y;
}'''


def test_with_a_site_python_numbers_take_the_site_variables_types():
    """docs/interpret.md: 'with site= the site's variable types rule'; a Python float for an
    f64 variable was typed f32 and refused ('a f32 column for the f64 input: pass
    .astype(np.float64)', which a float does not have)."""
    site = nx.CudaTemplate(F64_SITE, entry="k").sites["f"]
    prog = [sp.input("x"), sp.input("x"), sp.instr("add.rn.f64"), sp.input("m"),
            sp.instr("cvt.rn.f64.s32"), sp.instr("add.rn.f64")]
    got = sp.interpret([prog], {"x": 0.1, "m": 3}, site=site, device="cpu")
    assert got["y"].tolist() == [[0.1 + 0.1 + 3]]                 # 0.1 as f64, not f32
    got = sp.interpret([prog], {"x": np.float64([1, 2]), "m": 3.0}, site=site, device="cpu")
    assert got["y"].tolist() == [[5, 7]]
    with pytest.raises(nx.InterpretError, match=r"inputs\['m'\]: 3.5 is no s32 value"):
        sp.interpret([prog], {"x": 0.1, "m": 3.5}, site=site, device="cpu")


def test_pearson_of_predictions_whose_sums_overflow_is_inf_on_both_paths():
    """A constant 1e308 prediction: its mean overflows, r is NaN, and the compiled path's
    max(0.0, 1.0 - nan) scored it 0.0 -- a perfect fit -- where the interpreter's NumPy
    maximum gave NaN, so +inf."""
    X = np.random.default_rng(0).uniform(-1, 1, (20, 2))
    y = X[:, 0] * X[:, 1]
    cands = [[sp.const(1e308, "f64")],
             [sp.const(1e308, "f64"), sp.input("x0"), sp.instr("add.rn.f64")],
             [sp.input("x0"), sp.input("x1"), sp.instr("mul.rn.f64")]]
    with np.errstate(all="ignore"):
        for ev in ("compile", "interpret"):
            got = nx.fitness(cands, X, y, "pearson", evaluate=ev, device="cpu")
            assert got[0] == got[1] == np.inf and got[2] == 0, (ev, got)


SIM_BIG_INT = r'''
import numpy as np, numptx as nx
import numptx.jit.numba.launch as L
from numba import cuda

@nx.ptx_expr
def f(x: nx.f32, w: nx.f64) -> nx.f32:
    return x * nx.f32(w / w)

BIG = 2**60 + 2**36 + 1       # f32: int64 -> f32 rounds up; through f64 first it ties to even

@nx.kernel
def body(oy):
    i = cuda.grid(1)
    if i < oy.shape[0]:
        oy[i] = nx.site("s", x=(BIG + i, nx.f32), w=(BIG * 8 + i, nx.f64), out={"y": nx.f32})

res = {}
for tapes in (True, False):
    L.SIM_TAPES = tapes
    oy = np.zeros(4, np.float32)
    body.inject(s=f)[1, 32](oy)
    res[tapes] = oy
assert np.array_equal(res[True], res[False]), res
assert res[True][0] == np.asarray(BIG).astype(np.float32)
print("BIG-INT-OK")
'''


def test_simulator_tape_site_converts_a_python_int_as_the_emulator_does(tmp_path):
    """_ThreadFn stored a Python int into an f32 buffer with buf[0] = v, which NumPy rounds
    through float64 (twice); the stub emulator's inputs (and the GPU's cvt) round int64 -> f32
    once: 2**60 + 2**36 + 1 gave 1.1529215e18 on the tape, 1.1529216e18 in the emulator."""
    run_script(tmp_path, SIM_BIG_INT, simulator=True, marker="BIG-INT-OK")


@pytest.mark.parametrize("block", [0, 5000, 1.5, True])
def test_run_cpu_names_a_bad_block(block):
    """block=0 reached the C core (NXI_ERR_ARGUMENT before any program), reported as 'program
    4294967295: the interpreter refused an argument'; a float block a TypeError in cffi."""
    from numptx._program.interpret import run_cpu
    tp, c, n = _two_tapes()
    with pytest.raises(nx.InterpretError, match=r"block=.*an int from 1 to 4096"):
        run_cpu(tp, c, n, block=block)


@pytest.mark.parametrize("t", ["f16", "nope"])
def test_run_cpu_names_an_output_type_it_does_not_store(t):
    """A Tapes whose outputs name a type without C storage: 'nope' escaped as KeyError, f16
    reached the C core as 'program 4294967295: the interpreter refused an argument'."""
    from numptx._program.interpret import Tapes, run_cpu
    tp, c, n = _two_tapes()
    bad = Tapes(tp.words, tp.offsets, tp.inputs, {"y": t}, tp.dialect)
    with pytest.raises(nx.InterpretError, match=rf"output 'y' is of type {t}, which the "
                                                r"interpreter does not store"):
        run_cpu(bad, c, n)


@pytest.mark.parametrize("ks", [[0, 0, 2], [1, 1, 1], [2, 0, 2], [0, 3, 2, 3]])
def test_subset_takes_exactly_the_programs_asked(ks):
    """subset() took any ks whose last minus first is len - 1 for a contiguous run: [0, 0, 2]
    gave programs 0, 1, 2."""
    from numptx._program.interpret import subset
    progs = [[sp.const(float(k), "f32")] for k in range(4)]
    tp = sp.tapes(progs, {}, {"y": "f32"})
    sub = subset(tp, np.array(ks))
    assert len(sub) == len(ks)
    assert [sub.tape(j).tolist() for j in range(len(ks))] == [tp.tape(k).tolist() for k in ks]


def test_gpu_pearson_reduction_of_overflowed_moments_is_inf():
    """losses_from_sums (the GPU paths' reduction of the fitness kernel's sums): moments that
    overflowed gave vq = inf - inf = NaN, which passed the 'no variance' test, and
    max(0.0, 1.0 - nan) scored a perfect 0.0; an infinite cross moment gave max(0.0, -inf)."""
    from numptx.jit.populations.fitness import losses_from_sums
    y = np.linspace(-1, 1, 20)
    sums = np.array([[np.inf, np.inf, np.inf, 0],
                     [1.0, 1e30, np.inf, 0],
                     [0.0, 20.0, 0.3 * 20, 0]])
    with np.errstate(all="ignore"):
        got = losses_from_sums(sums, y, "pearson")
    assert got[0] == got[1] == np.inf
    assert got[2] == max(0.0, 1.0 - 0.3 / np.sqrt(1.0 * y.var()))      # unchanged
