"""nx.fitness and the data and population it is given (issue 22 items 1, 3, 14, 15, 21): the
kernel's float type comes from the candidates (or dtype=), float64 data never make f32
candidates score as something else, a candidate that reads an input the data lack or is of
the other type is refused by index, one program is refused where a population is expected,
device="gpu" without a GPU is a numptx error. Real emulator, NVRTC and nvJitLink; no GPU."""
from __future__ import annotations

import logging
import random
import re

import numpy as np
import pytest

import numptx as nx
from numptx import site_layout, stack_ptx as sp
from numptx.jit.populations import fitness as F
from numptx.jit.populations.fitness import FitnessError
from numptx.jit.templates.stub_checks import UnwrittenOutputWarning

from conftest import run_script

RNG = np.random.default_rng(5)
X64 = RNG.uniform(-1, 1, (200, 2))                     # NumPy's default: float64
Y64 = X64[:, 0] * 2 + X64[:, 1]
X32, Y32 = X64.astype(np.float32), Y64.astype(np.float32)
ROWS32 = ["add.rn.f32", "sub.rn.f32", "mul.rn.f32", "min.f32", "max.f32"]


def _program(r: random.Random, rows: list[str], dtype: str, size: int = 5) -> list:
    prog, depth = [], 0
    for _ in range(size):
        while depth < 2 or r.random() < 0.3:
            prog.append(sp.input(r.choice(["x0", "x1"])) if r.random() < 0.75
                        else sp.const(round(r.uniform(-2, 2), 2), dtype))
            depth += 1
        prog.append(sp.instr(r.choice(rows)))
        depth -= 1
    return prog


def _numpy_f32(prog: list, X: np.ndarray) -> np.ndarray:
    """What an f32 program of ROWS32 computes, by NumPy in float32 (an independent reading of
    the stack: every op here finds its operands, as _program builds them)."""
    ops = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "min": np.minimum,
           "max": np.maximum}
    stack = []
    for op in prog:
        text = repr(op)
        if text.startswith("input("):
            stack.append(X[:, int(text[8])].astype(np.float32))
        elif text.startswith("const("):
            stack.append(np.float32(float(text[6:text.index(",")])))
        else:
            b, a = stack.pop(), stack.pop()
            stack.append(ops[text[7:10]](a, b))
    return np.broadcast_to(stack[-1], (X.shape[0],))


def _mse(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((pred.astype(np.float64) - y.astype(np.float64)) ** 2))


# ---- item 1: the float type ------------------------------------------------------------------
def test_float64_data_score_f32_programs_as_f32_data_do():
    """Seeded random f32 programs: float64 X and y, Python lists, f32 X with f64 y all score
    what the f32 data score, and that is NumPy's float32 evaluation (before the fix every
    program scored as if it returned an input, all alike)."""
    r = random.Random(4)
    progs = [_program(r, ROWS32, "f32") for _ in range(25)]
    want = [_mse(_numpy_f32(p, X32), Y32) for p in progs]
    assert len(set(want)) > 20
    for X, y in ((X32, Y32), (X64, Y64), (X64.tolist(), Y64.tolist()), (X32, Y64)):
        got = nx.fitness(progs, X, y, device="cpu")
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def test_f32_formula_and_ptx_on_float64_data():
    @nx.ptx_expr(precision="accurate")
    def good(x0: nx.f32, x1: nx.f32) -> nx.f32:
        return x0 * 2 + x1

    got = nx.fitness([good, "mov.f32 %v_p, %v_x1;"], X64, Y64, device="cpu")
    want = [_mse(X32[:, 0] * np.float32(2) + X32[:, 1], Y32), _mse(X32[:, 1], Y32)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert F.prepare([good], X64, Y64).dtype == "f32"


def test_f64_candidates_run_in_f64_on_f32_data():
    @nx.ptx_expr
    def wide(x0: nx.f64, x1: nx.f64) -> nx.f64:
        return x0 - x1

    prog = [sp.input("x0"), sp.input("x1"), sp.instr("mul.rn.f64")]
    got = nx.fitness([wide, prog, "mov.f64 %v_p, %v_x0;"], X32, Y32, device="cpu")
    x, y = X32.astype(np.float64), Y32.astype(np.float64)
    want = [_mse(x[:, 0] - x[:, 1], y), _mse(x[:, 0] * x[:, 1], y), _mse(x[:, 0], y)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert F.prepare([prog], X32, Y32).dtype == "f64"


def test_candidates_without_a_float_type_follow_the_data_as_search_does():
    prog = [sp.input("x1")]                              # no instruction, no constant
    assert F.prepare([prog], X64, Y64).dtype == "f64"
    assert F.prepare([prog], X32, Y64).dtype == "f32"
    assert F.prepare([prog], X64, Y64, dtype="f32").dtype == "f32"
    # a program of f32 and f64 rows whose value reaches %v_p in both types alike is of
    # neither (one that reaches it in one type only is of that type: the test of SQ below)
    both = [sp.input("x0"), sp.instr("neg.f32"), sp.input("x1"), sp.instr("neg.f64")]
    assert F.prepare([both], X32, Y32).dtype == "f32"


def test_a_candidate_of_the_other_type_is_refused_by_index():
    progs = [[sp.input("x0")], [sp.input("x0"), sp.input("x1"), sp.instr("add.rn.f32")]]
    with pytest.raises(FitnessError, match=r"candidate 1 is written in f32 .*add\.rn\.f32.* "
                                           r"dtype='f64'") as e:
        nx.fitness(progs, X64, Y64, dtype="f64", device="cpu")
    assert e.value.candidate == 1
    with pytest.raises(FitnessError, match=r"candidate 0 is written in f64 .*mov\.f64"):
        nx.fitness(["mov.f64 %v_p, %v_x0;"], X32, Y32, dtype="f32", device="cpu")
    with pytest.raises(FitnessError, match="dtype='f16'"):
        nx.fitness(progs, X32, Y32, dtype="f16", device="cpu")


def test_a_population_of_both_types_is_refused():
    @nx.ptx_expr
    def wide(x0: nx.f64, x1: nx.f64) -> nx.f64:
        return x0 + x1

    pop = [[sp.input("x0"), sp.const(1.0, "f32"), sp.instr("add.rn.f32")], wide]
    with pytest.raises(FitnessError, match=r"candidate 0 is f32 .*candidate 1 is f64 .*two "
                                           r"calls") as e:
        nx.fitness(pop, X32, Y32, device="cpu")
    assert e.value.candidate == 1

    @nx.ptx_expr
    def mixed(x0: nx.f32, x1: nx.f64) -> nx.f32:
        return x0 + nx.f32(x1)

    with pytest.raises(FitnessError, match=r"candidate 0, mixed.*one float type") as e:
        nx.fitness([mixed], X32, Y32, device="cpu")
    assert e.value.candidate == 0


def test_inputs_the_data_lack_are_refused_by_index_and_name():
    enc = sp.encode([sp.input("q"), sp.input("x0"), sp.instr("add.rn.f32")], ["q", "x0"])
    cases = {
        "a program": [sp.input("x0"), sp.input("q"), sp.instr("add.rn.f32")],
        "an encoding that names it": enc,
        "a bare copy of the words": np.asarray(enc).copy(),
        "PTX text": "add.rn.f32 %v_p, %v_x0, %v_q;",
    }
    for what, cand in cases.items():
        with pytest.raises(FitnessError, match=r"candidate 1 reads .*(q|tag 0x).*the data "
                                               r"lack") as e:
            nx.fitness(["mov.f32 %v_p, %v_x0;", cand], X32, Y32, device="cpu")
        assert e.value.candidate == 1, what
    # the same inputs, present: they score
    ok = nx.fitness([enc, "add.rn.f32 %v_p, %v_x0, %v_q;"], X32, Y32, names=["x0", "q"],
                    device="cpu")
    np.testing.assert_allclose(ok, [_mse(X32[:, 1] + X32[:, 0], Y32),
                                    _mse(X32[:, 0] + X32[:, 1], Y32)], rtol=1e-12)
    # a register the text declares itself is no input
    own = ".reg .f32 %v_tmp;\nadd.rn.f32 %v_tmp, %v_x0, %v_x1;\nmov.f32 %v_p, %v_tmp;"
    assert nx.fitness([own], X32, Y32, device="cpu")[0] == _mse(X32[:, 0] + X32[:, 1], Y32)


def test_formula_parameters_that_name_no_column_are_refused():
    @nx.ptx_expr
    def partial(x1: nx.f32, q: nx.f32) -> nx.f32:       # x1 by name: q never by position
        return x1 - q

    @nx.ptx_expr
    def three(a: nx.f32, b: nx.f32, c: nx.f32) -> nx.f32:
        return a + b + c

    @nx.ptx_expr
    def by_pos(a: nx.f32, b: nx.f32) -> nx.f32:
        return a - b

    @nx.ptx_expr
    def with_default(x0: nx.f32, k: nx.f32 = 3.0) -> nx.f32:
        return x0 * k

    for f, why in ((partial, "'x1' binds by name"), (three, "3 parameter")):
        with pytest.raises(FitnessError, match=rf"candidate 0, {f.__name__}.*'(q|a)'.* name no "
                                               rf"column.*{why}") as e:
            nx.fitness([f], X32, Y32, device="cpu")
        assert e.value.candidate == 0
    got = nx.fitness([by_pos, with_default], X32, Y32, device="cpu")
    np.testing.assert_allclose(got, [_mse(X32[:, 0] - X32[:, 1], Y32),
                                     _mse(X32[:, 0] * np.float32(3), Y32)], rtol=1e-12)


def test_stubs_compiled_for_other_registers_are_refused():
    site = F.fitness_template(2, ("x0", "x1"), "f32").sites["f"]
    prog = [sp.input("x0"), sp.input("x1"), sp.instr("add.rn.f32")]
    good = sp.compile(prog, site=site)
    want = _mse(X32[:, 0] + X32[:, 1], Y32)
    assert nx.fitness([good], X32, Y32, device="cpu")[0] == want
    other = sp.compile(prog, inputs={"x0": "f32", "x1": "f32"}, outputs={"p": "f32"})
    with pytest.raises(FitnessError, match=r"candidate 0 is a stub compiled for other "
                                           r"registers.*%x0"):
        nx.fitness([other], X32, Y32, device="cpu")
    wide = sp.compile([sp.input("x0")], site=F.fitness_template(2, ("x0", "x1"), "f64")
                      .sites["f"])
    with pytest.raises(FitnessError, match="candidate 1 is written in f64"):
        nx.fitness([good, wide], X32, Y32, dtype="f32", device="cpu")


def test_data_that_every_candidate_would_score_inf_on_are_refused():
    bad = Y64.copy()
    bad[7] = np.nan
    with pytest.raises(FitnessError, match=r"y holds 1 non-finite value.*index \(7,\)"):
        nx.fitness([[sp.input("x0")]], X64, bad, device="cpu")
    big = X64 * 1e39                                       # past the f32 range
    with pytest.raises(FitnessError, match="X holds .* past the f32 range"):
        nx.fitness([[sp.input("x0"), sp.instr("neg.f32")]], big, Y64, device="cpu")
    got = nx.fitness([[sp.input("x0"), sp.instr("neg.f64")]], big, Y64, device="cpu")
    assert np.isfinite(got).all()


def test_a_user_loss_binds_as_the_kernel_binds_it():
    @nx.ptx_expr
    def under(t: nx.f32, p: nx.f32) -> nx.f32:          # by name: p is the prediction
        return nx.maximum(t - p, nx.f32(0))

    @nx.ptx_expr
    def under_pos(pred: nx.f32, target: nx.f32) -> nx.f32:   # in order
        return nx.maximum(target - pred, nx.f32(0))

    @nx.ptx_expr
    def half(pred: nx.f32, t: nx.f32) -> nx.f32:
        return pred - t

    pred = X32[:, 1]
    want = float(np.mean(np.maximum(Y32 - pred, 0).astype(np.float64)))
    for loss in (under, under_pos):
        got = nx.fitness(["mov.f32 %v_p, %v_x1;"], X64, Y64, loss, device="cpu")
        np.testing.assert_allclose(got, [want], rtol=1e-6)
    with pytest.raises(FitnessError, match="loss=half"):
        nx.fitness(["mov.f32 %v_p, %v_x1;"], X32, Y32, half, device="cpu")
    t = F.fitness_template(2, ("x0", "x1"), "f32", "user")        # the GPU build binds it too
    pack = t.pack("f", ["mov.f32 %v_p, %v_x1;"], select="cand", loss=under)
    assert pack.errors == {} and pack.cubin[:4] == b"\x7fELF"


def test_the_gpu_pack_of_float64_data_keeps_the_f32_instructions():
    """The GPU path packs prepare()'s candidates into fitness_template(..., prepare's dtype):
    built here by NVRTC and nvJitLink, the f32 instructions are in the module (in an f64
    kernel they were no-ops and the pack computed an input)."""
    progs = [[sp.input("x0"), sp.input("x1"), sp.instr(r)] for r in ROWS32]
    job = F.prepare(progs, X64, Y64)
    assert job.dtype == "f32" and job.X.dtype == np.float32 and job.y.dtype == np.float32
    tmpl = F.fitness_template(2, job.names, job.dtype, "mse")
    (pack,) = tmpl.pack_many("f", job.candidates, select="cand", per_module=16)
    assert pack.errors == {} and pack.cubin[:4] == b"\x7fELF"
    for r in ROWS32:
        assert re.search(rf"\b{re.escape(r)}\b", pack.ptx), r


def test_the_cpu_path_computes_what_the_packed_module_does():
    """On a GPU candidate k of a population runs in module k // per_module with %v_cand = its
    index there, and %v_p reads 0 where it is not written (the pack zero-fills it): the CPU
    path gives the same (before: %v_cand was always 0, an unwritten %v_p scored +inf)."""
    reads = "cvt.rn.f32.u32 %v_p, %v_cand;"
    unwritten = ".reg .f32 %q;\nmov.f32 %q, %v_x0;"
    pop = [reads] * 5 + [unwritten]
    with pytest.warns(UnwrittenOutputWarning):
        got = nx.fitness(pop, X32, Y32, device="cpu", per_module=2)
    want = [_mse(np.full(len(Y32), k % 2, np.float32), Y32) for k in range(5)]
    np.testing.assert_allclose(got, want + [_mse(np.zeros_like(Y32), Y32)], rtol=1e-12)
    tmpl = F.fitness_template(2, ("x0", "x1"), "f32", "mse")
    with pytest.warns(UnwrittenOutputWarning):
        packs = tmpl.pack_many("f", pop, select="cand", per_module=2)
    assert [p.offset for p in packs] == [0, 2, 4] and all(not p.errors for p in packs)
    zero = packs[2].ptx.index("mov.f32 %v_p, 0f00000000")      # before the dispatch
    assert zero < packs[2].ptx.index("brx.idx")
    with pytest.raises(FitnessError, match="per_module=0"):
        nx.fitness(pop, X32, Y32, device="cpu", per_module=0)


# ---- item 3: one program where a population is expected --------------------------------------
@pytest.mark.parametrize("one", [
    [sp.input("x0"), sp.input("x1"), sp.instr("add.rn.f32")],
    sp.encode([sp.input("x0"), sp.input("x1"), sp.instr("add.rn.f32")], ["x0", "x1"]),
    "mov.f32 %v_p, %v_x0;",
])
def test_one_program_is_refused_with_the_fix(one):
    with pytest.raises(FitnessError, match=r"not a population.*\[prog\]"):
        nx.fitness(one, X32, Y32, device="cpu")


def test_one_formula_and_stray_ops_are_refused():
    @nx.ptx_expr
    def f(x0: nx.f32) -> nx.f32:
        return x0

    with pytest.raises(FitnessError, match=r"one formula.*\[prog\]"):
        nx.fitness(f, X32, Y32, device="cpu")
    with pytest.raises(FitnessError, match=r"candidate 1 is one op") as e:
        nx.fitness([[sp.input("x0")], sp.input("x1")], X32, Y32, device="cpu")
    assert e.value.candidate == 1
    with pytest.raises(FitnessError, match="not a population"):
        nx.fitness(3, X32, Y32, device="cpu")


# ---- item 14: device="gpu" without a GPU -----------------------------------------------------
@pytest.mark.skipif(F.gpu_available(), reason="a CUDA GPU is here: device='gpu' runs")
def test_device_gpu_without_a_gpu_is_a_numptx_error_naming_the_fix():
    with pytest.raises(nx.LaunchError, match=r"no CUDA GPU.*device='cpu'.*device='auto'") as e:
        nx.fitness(["mov.f32 %v_p, %v_x0;"], X32, Y32, device="gpu")
    assert isinstance(e.value, nx.NumptxError)


SIM_GPU = '''
import numpy as np, numptx as nx
X = np.linspace(-1, 1, 8).astype(np.float32)
try:
    nx.fitness(["mov.f32 %v_p, %v_x0;"], X, X, device="gpu")
except nx.LaunchError as e:
    assert "simulator" in str(e) and "device='cpu'" in str(e), e
    print("SIM-GPU-OK")
assert nx.fitness(["mov.f32 %v_p, %v_x0;"], X, X).tolist() == [0.0]     # auto: the CPU
'''


def test_device_gpu_under_the_simulator_says_why(tmp_path):
    run_script(tmp_path, SIM_GPU, simulator=True, marker="SIM-GPU-OK")


# ---- item 15: the documented PTX candidates write %v_p ---------------------------------------
def test_the_docstring_ptx_candidates_score():
    doc = F.__doc__
    assert "%v_y" not in doc and "%v_p" in doc
    texts = re.findall(r'"(mov\.f32 [^"]*)"', doc)
    assert texts
    got = nx.fitness(texts, X32, Y32, device="cpu")
    assert np.isfinite(got).all()


# ---- item 21: a candidate that leaves early --------------------------------------------------
EARLY = ["mov.f32 %v_p, %v_x0;\nret;", "exit;\nmov.f32 %v_p, %v_x0;",
         "{\n.reg .pred %q;\nsetp.lt.f32 %q, %v_x0, 0f00000000;\n@%q ret;\n}\n"
         "mov.f32 %v_p, %v_x0;"]
OUT = ["mov.f32 %v_p, %v_x0;\nbra.uni $L_elsewhere;"]      # a branch out of the candidate


def _reasons(records) -> dict[int, str]:
    out = {}
    for r in records:
        m = re.match(r"numptx\.fitness: candidate (\d+): (.*)", r.getMessage(), re.S)
        if m:
            out[int(m.group(1))] = m.group(2)
    return out


def test_ret_and_exit_score_inf_on_the_cpu_for_the_pack_s_reason(caplog):
    """The CPU path refuses what the GPU path's pack refuses, for the same reason (before, the
    emulator's 'unknown instruction'); the candidate scores +inf, its reason logged."""
    good = "mov.f32 %v_p, %v_x0;"
    with caplog.at_level(logging.DEBUG, logger="numptx.jit.populations.fitness"):
        got = nx.fitness([good] + EARLY + OUT, X32, Y32, device="cpu")
    assert got[0] == _mse(X32[:, 0], Y32) and np.isinf(got[1:]).all()
    reasons = _reasons(caplog.records)
    tmpl = F.fitness_template(2, ("x0", "x1"), "f32", "mse")
    pack = tmpl.pack("f", [good] + EARLY + OUT, select="cand")
    for k in range(1, len(EARLY) + 1):
        assert re.search(r"may not hold '(ret|exit)'", reasons[k]), reasons[k]
    assert "only to labels it defines" in reasons[len(EARLY) + 1]
    for k, why in reasons.items():
        assert why in str(pack.errors[k]), (k, why, str(pack.errors[k]))


def test_ret_and_exit_are_refused_in_the_gpu_pack():
    """The GPU path's modules: the candidates before the kernel's whole-warp shuffles must
    not leave early (undefined behaviour); the pack lists them in errors (fitness: +inf) and
    builds the rest, by nvJitLink."""
    tmpl = F.fitness_template(2, ("x0", "x1"), "f32", "mse")
    pack = tmpl.pack("f", ["mov.f32 %v_p, %v_x0;"] + EARLY, select="cand")
    assert sorted(pack.errors) == list(range(1, len(EARLY) + 1))
    for k, e in pack.errors.items():
        assert re.search(r"\b(ret|exit)\b", str(e)), (k, str(e))
    assert pack.cubin[:4] == b"\x7fELF" and pack.ok == [0]


# ---- review of issue 22: converting programs, text ptxas refuses ------------------------------
SQ = [sp.input("x0"), sp.instr("cvt.f64.f32"), sp.input("x0"), sp.instr("cvt.f64.f32"),
      sp.instr("mul.rn.f64"), sp.instr("cvt.rn.f32.f64")]      # f32 in, f64 math, f32 out
WIDEN = [sp.input("x0"), sp.instr("cvt.f64.f32"), sp.instr("neg.f64")]   # f32 in, f64 out


def test_a_program_that_converts_runs_in_the_type_its_value_reaches_p_in():
    """A program with f32 and f64 instructions runs in the kernel type where its value reaches
    %v_p (the compiler, both ways): on NumPy's default float64 data SQ squares x0 in f64 and
    gives f32, as on f32 data (before: an f64 kernel, its cvt.f64.f32 found no operand, p got no
    value and it scored as the zero prediction without a word)."""
    x = X32[:, 0].astype(np.float64)
    want = _mse((x * x).astype(np.float32), Y32)
    for X, y in ((X32, Y32), (X64, Y64), (X64.tolist(), Y64.tolist())):
        np.testing.assert_allclose(nx.fitness([SQ], X, y, device="cpu"), [want], rtol=1e-12)
    assert F.prepare([SQ], X64, Y64).dtype == "f32"
    # WIDEN gives f64: in an f32 kernel p got no value (zero); it runs in f64, on f32 data too
    assert F.prepare([WIDEN], X32, Y32).dtype == "f64"
    np.testing.assert_allclose(nx.fitness([WIDEN], X32, Y32, device="cpu"),
                               [_mse(-x, Y32.astype(np.float64))], rtol=1e-12)
    f32 = [sp.input("x0"), sp.input("x1"), sp.instr("add.rn.f32")]
    with pytest.raises(FitnessError, match=r"candidate 1 is written in f64 .*reaches %v_p in "
                                           r"f64") as e:
        nx.fitness([f32, WIDEN], X32, Y32, dtype="f32", device="cpu")
    assert e.value.candidate == 1
    # a program that converts there and back again fits both: it follows the data
    both = [sp.input("x0"), sp.instr("neg.f32"), sp.input("x1"), sp.instr("neg.f64")]
    assert F.prepare([both], X64, Y64).dtype == "f64"
    assert F.prepare([both], X32, Y32).dtype == "f32"


BAD_TEXT = {"f32": ["add.f32 %v_p, %v_x0, %v_cand;",          # a u32 register in an f32 add
                    "cvt.rn.f32.f64 %v_p, %v_x0;",            # %v_x0 is no f64
                    "mov.f32 %v_p, %v_cand;"],                 # a u32 register in an f32 mov
            "f64": ["add.f64 %v_p, %v_x0, %v_cand;",          # a u32 register in an f64 add
                    "cvt.f64.f32 %v_p, %v_x0;"]}              # %v_x0 is no f32


@pytest.mark.parametrize("dt", ["f32", "f64"])
def test_ptx_text_that_ptxas_refuses_scores_inf_on_the_cpu_as_in_the_pack(dt, caplog):
    """Raw PTX whose operand types ptxas refuses for the kernel's registers does not build in
    the pack (+inf on a GPU); the CPU path gives +inf too, with the pack's reason (before: the
    emulator ran it and the score was finite: a bit pattern, or the input)."""
    good = f"mov.{dt} %v_p, %v_x0;"
    pop = [good] + BAD_TEXT[dt]
    X, y = (X32, Y32) if dt == "f32" else (X64, Y64)
    with caplog.at_level(logging.DEBUG, logger="numptx.jit.populations.fitness"):
        got = nx.fitness(pop, X, y, dtype=dt, device="cpu")
    xx = X[:, 0].astype(np.float64)
    assert got[0] == _mse(xx, y) and np.isinf(got[1:]).all(), got
    pack = F.fitness_template(2, ("x0", "x1"), dt, "mse").pack("f", pop, select="cand")
    assert pack.cubin[:4] == b"\x7fELF" and pack.ok == [0]
    reasons = _reasons(caplog.records)
    for k in range(1, len(pop)):
        assert reasons[k] in str(pack.errors[k]) or str(pack.errors[k]) in reasons[k], \
            (k, reasons[k])


def test_python_errors_in_a_formula_or_loss_or_names_are_numptx_errors():
    """A formula whose Python body raises while it is traced scores +inf, as the pack lists it
    in errors (before: the ValueError escaped nx.fitness); a loss that raises is a FitnessError
    naming loss=; unhashable names= are refused like other bad names (before: TypeError)."""
    @nx.ptx_expr
    def raises(x0: nx.f32) -> nx.f32:
        raise ValueError("boom")

    @nx.ptx_expr
    def bad_loss(p: nx.f32, t: nx.f32) -> nx.f32:
        raise ValueError("boom")

    got = nx.fitness([raises, "mov.f32 %v_p, %v_x0;"], X32, Y32, device="cpu")
    assert np.isinf(got[0]) and got[1] == _mse(X32[:, 0], Y32)
    pack = F.fitness_template(2, ("x0", "x1"), "f32").pack("f", [raises], select="cand")
    assert "ValueError: boom" in str(pack.errors[0])
    with pytest.raises(FitnessError, match=r"loss=bad_loss does not trace: ValueError: boom"):
        nx.fitness(["mov.f32 %v_p, %v_x0;"], X32, Y32, bad_loss, device="cpu")
    with pytest.raises(FitnessError, match=r"names= gives 2 distinct identifiers"):
        nx.fitness(["mov.f32 %v_p, %v_x0;"], X32, Y32, names=[[1], [2]], device="cpu")


def test_formulas_with_a_named_or_tuple_result_score_as_their_stub_computes():
    """A formula's results bind to the kernel's p by the rules of stub(site) (a dict by name, a
    tuple in order), on both paths, its parameters by name or in order (before: the CPU
    scored a one-value tuple or a dict {"p": ...} +inf, and a formula bound in order with a
    dict result made the GPU path's _adapt raise BindError for the whole population). One
    whose Python body raises is that candidate's +inf on both paths."""
    @nx.ptx_expr
    def named(x0: nx.f32, x1: nx.f32):
        return {"p": x0 - x1}

    @nx.ptx_expr
    def tup(a: nx.f32, b: nx.f32):
        return (a - b,)

    @nx.ptx_expr
    def other_name(a: nx.f32, b: nx.f32):           # a dict binds by name: no p
        return {"y": a - b}

    @nx.ptx_expr
    def two(x0: nx.f32, x1: nx.f32):                 # two results for one variable
        return x0 - x1, x0

    @nx.ptx_expr
    def raises(a: nx.f32, b: nx.f32) -> nx.f32:
        raise ValueError("boom")

    pop = [named, tup, other_name, two, raises]
    got = nx.fitness(pop, X32, Y32, device="cpu")
    want = _mse(X32[:, 0] - X32[:, 1], Y32)
    np.testing.assert_allclose(got[:2], [want] * 2, rtol=1e-12)
    assert np.isinf(got[2:]).all()
    names = ("x0", "x1")
    job = F.prepare(pop, X32, Y32)
    pack = F.fitness_template(2, names, "f32").pack(
        "f", [F._adapt(c, names) for c in job.candidates], select="cand")
    assert pack.cubin[:4] == b"\x7fELF" and pack.ok == [0, 1]
    assert "ValueError: boom" in str(pack.errors[4])


@pytest.mark.parametrize("seed", [1, 2])
def test_the_cpu_path_scores_what_each_packed_candidate_computes(seed):
    """Seeded mixed populations (programs, an encoding, a converting program, formulas by name,
    in order and with a default, PTX that reads %v_cand or leaves %v_p unwritten or that ptxas
    refuses) on float64 data: the CPU score of each candidate is the score of its text as the
    GPU path packs it (prepare, fitness_template, pack_many; built by nvJitLink), run by the
    emulator with %v_cand its index in the module; a candidate the pack refuses is +inf."""
    @nx.ptx_expr(precision="accurate")
    def f1(x0: nx.f32, x1: nx.f32) -> nx.f32:
        return x0 * x1 + 1.0

    @nx.ptx_expr(precision="accurate")
    def f2(a: nx.f32, b: nx.f32):
        return (a - b * 2.0,)

    @nx.ptx_expr(precision="accurate")
    def f3(x1: nx.f32, k: nx.f32 = 3.0) -> nx.f32:
        return x1 * k

    r = random.Random(seed)
    pop = [_program(r, ROWS32, "f32") for _ in range(5)] + [
        f1, f2, f3, SQ, sp.encode(_program(r, ROWS32, "f32"), ["x0", "x1"]),
        "cvt.rn.f32.u32 %v_p, %v_cand;", ".reg .f32 %q;\nmov.f32 %q, %v_x0;",
        BAD_TEXT["f32"][0], "mov.f32 %v_p, %v_x1;\nret;"]
    r.shuffle(pop)
    per_module = 4
    with pytest.warns(UnwrittenOutputWarning):
        cpu = nx.fitness(pop, X64, Y64, device="cpu", per_module=per_module)
    job = F.prepare(pop, X64, Y64)
    tmpl = F.fitness_template(2, job.names, job.dtype, "mse")
    site = tmpl.sites["f"]
    reg = site_layout.reg_name
    with pytest.warns(UnwrittenOutputWarning):
        packs = tmpl.pack_many("f", [F._adapt(c, job.names) for c in job.candidates],
                               select="cand", per_module=per_module)
    checked = 0
    for p in packs:
        if not p.empty:
            assert p.cubin[:4] == b"\x7fELF"
        texts = p.population.texts(site)
        for i in range(len(p)):
            k = p.offset + i
            if k in p.errors:
                assert np.isinf(cpu[k]), k
                continue
            got = nx.emulate(texts[i], {reg("x0"): job.X[:, 0], reg("x1"): job.X[:, 1],
                                        reg("cand"): np.uint32(i),
                                        reg("p"): np.zeros((), job.X.dtype)},
                             {reg("p"): job.dtype})[reg("p")]
            want = _mse(np.broadcast_to(got, job.y.shape), job.y)
            np.testing.assert_allclose(cpu[k], want, rtol=1e-12, err_msg=str(k))
            checked += 1
    assert checked >= len(pop) - 2


def test_a_stub_that_reads_a_column_in_another_type_than_it_gives_p_is_refused():
    """A stub compiled to read %v_x0 as f32 and give %v_p as f64 fits no kernel (ptxas refuses
    its cvt in the f64 kernel's pack: +inf on a GPU); the CPU path emulated it and gave a
    finite score. Refused by index; one that lists such a register but never reads it runs."""
    prog = [sp.input("v_x0"), sp.instr("cvt.f64.f32"), sp.instr("neg.f64")]
    st = sp.compile(prog, inputs={"v_x0": "f32"}, outputs={"v_p": "f64"})
    pack = F.fitness_template(2, ("x0", "x1"), "f64").pack("f", [st], select="cand")
    with pytest.raises(nx.NumptxError):
        pack.cubin
    assert 0 in pack.errors
    with pytest.raises(FitnessError, match=r"candidate 1 is a stub compiled to read %v_x0 "
                                           r"\(f32\) and give %v_p in f64") as e:
        nx.fitness(["mov.f64 %v_p, %v_x1;", st], X64, Y64, device="cpu")
    assert e.value.candidate == 1
    unused = sp.compile([sp.input("v_x1"), sp.instr("neg.f64")],
                        inputs={"v_x0": "f32", "v_x1": "f64"}, outputs={"v_p": "f64"})
    assert nx.fitness([unused], X64, Y64, device="cpu")[0] == _mse(-X64[:, 1], Y64)


def test_a_user_loss_s_result_binds_to_l_by_the_site_rules_on_both_paths():
    """A loss may give its value as {"l": ...} or a one-value tuple: its loss-site stub takes
    it (the GPU pack builds) and the CPU evaluates it by the same binding (before: the CPU
    raised a raw TypeError for the dict). A dict under another name fits no loss site: a
    FitnessError naming loss= on either device (before: a BindError from the pack)."""
    @nx.ptx_expr
    def as_dict(p: nx.f32, t: nx.f32):
        return {"l": (p - t) * (p - t)}

    @nx.ptx_expr
    def as_tuple(p: nx.f32, t: nx.f32):
        return ((p - t) * (p - t),)

    @nx.ptx_expr
    def misnamed(p: nx.f32, t: nx.f32):
        return {"y": (p - t) * (p - t)}

    want = float(np.mean((X32[:, 0].astype(np.float64) - Y32) ** 2))
    tmpl = F.fitness_template(2, ("x0", "x1"), "f32", "user")
    for loss in (as_dict, as_tuple):
        got = nx.fitness(["mov.f32 %v_p, %v_x0;", [sp.input("x0")]], X32, Y32, loss,
                         device="cpu")
        np.testing.assert_allclose(got, [want, want], rtol=1e-6)
        pack = tmpl.pack("f", ["mov.f32 %v_p, %v_x0;"], select="cand", loss=loss)
        assert pack.cubin[:4] == b"\x7fELF" and not pack.errors
    for pop in (["mov.f32 %v_p, %v_x0;"], [[sp.input("x0")]]):
        with pytest.raises(FitnessError, match=r"loss=misnamed does not fit the kernel's loss "
                                               r"site.*'l'"):
            nx.fitness(pop, X32, Y32, misnamed, device="cpu")


def test_formula_defaults_bind_as_stub_site_binds_them():
    """At a site of exactly the columns, stub(site) binds parameters none of which is a column
    by position when the counts match, defaults or not (issue 22 item 2's one set of rules):
    nx.fitness does the same (before: it baked both defaults in and scored the constant 2.0
    without a word, where the docs say "by position")."""
    @nx.ptx_expr(precision="accurate")
    def f(a: nx.f32 = 1.0, b: nx.f32 = 2.0) -> nx.f32:
        return a * b

    inj = nx.PtxInject(nx.cuda_to_ptx(r'''
    extern "C" __global__ void k(float* o, const float* a) {
        float x0 = a[0], x1 = a[1], p;
        PTX_INJECT("s", PTX_IN(F32, x0), PTX_IN(F32, x1), PTX_OUT(F32, p));
        o[0] = p;
    }''', arch="sm_90"))
    assert f.binding(inj.sites["s"]).inputs == {"a": "x0", "b": "x1"}
    got = nx.fitness([f], X32, Y32, device="cpu")
    np.testing.assert_allclose(got, [_mse(X32[:, 0] * X32[:, 1], Y32)], rtol=1e-12)

    @nx.ptx_expr
    def g(x0: nx.f32, b: nx.f32, c: nx.f32 = 2.0) -> nx.f32:   # partial: b needs a name
        return x0 + b * c

    with pytest.raises(FitnessError, match=r"candidate 0, g.*parameter\(s\) 'b' name no "
                                           r"column"):
        nx.fitness([g], X32, Y32, device="cpu")


def test_a_program_that_reads_inputs_by_position_is_refused():
    """The fitness kernel's inputs are cand, x0, x1: [sp.input(0), sp.input(1), add] read cand
    (a u32) and x0, its f32 add found one operand and did nothing, and it scored as x0
    without a word (a user reads input 0 as the first column). Refused by index, naming what
    the index reads and the fix; by name it scores x0 + x1."""
    for i, what in ((0, "cand, the candidate's index"), (1, "column 'x0'"), (7, "no input")):
        prog = [sp.input(i), sp.input("x1"), sp.instr("add.rn.f32")]
        with pytest.raises(FitnessError, match=rf"candidate 1 reads input {i} by position.*"
                                               rf"so it reads {what}; name the input it means, "
                                               rf"sp.input\('x0'\)") as e:
            nx.fitness([[sp.input("x0")], prog], X32, Y32, device="cpu")
        assert e.value.candidate == 1
    named = [sp.input("x0"), sp.input("x1"), sp.instr("add.rn.f32")]
    assert nx.fitness([named], X32, Y32, device="cpu")[0] == _mse(X32[:, 0] + X32[:, 1], Y32)


def test_ptx_that_writes_p_as_bits_runs_in_the_float_type_of_that_size():
    """mov.b32 %v_p fits only an f32 register (ptxas refuses it in the f64 kernel's pack): on
    float64 data it runs in f32 (before: an f64 kernel, +inf on a GPU, a bit pattern on the
    CPU); mov.b64 in f64."""
    one32 = "mov.b32 %v_p, 1065353216;"                   # 1.0f
    one64 = "mov.b64 %v_p, 4607182418800017408;"           # 1.0
    assert F.prepare([one32], X64, Y64).dtype == "f32"
    assert F.prepare([one64], X32, Y32).dtype == "f64"
    ones = np.ones_like(Y64)
    np.testing.assert_allclose(nx.fitness([one32], X64, Y64, device="cpu"),
                               [_mse(ones, Y32)], rtol=1e-12)
    np.testing.assert_allclose(nx.fitness([one64], X32, Y32, device="cpu"),
                               [_mse(ones, Y32.astype(np.float64))], rtol=1e-12)
