"""The search through the batch interpreter (issue 23, items 2 and 3): ``evaluate=`` on the
Evaluator and the searches, the compiled re-score of what a run returns, semantic dedup, and
their checkpoints. Everything here runs on the CPU (the interpreter's C core, the emulator)."""
import importlib
import math
import warnings

import numpy as np
import pytest

import numptx as nx
from numptx import search
from numptx import stack_ptx as sp
from numptx.errors import NumptxWarning
from numptx.search import checkpoint as ck
from numptx.search import operators as O
from numptx.search import rescore as R
from numptx.search import semantic as S
from numptx.search.breed import Breeder
from numptx.search.checkpoint import CheckpointError
from numptx.search.evaluate import Evaluator
from numptx.search.genes import Genes, SearchError
from numptx._program.interpret import interpreted_rows

E = importlib.import_module("numptx.search.evaluate")   # (search.evaluate: the formula's)

F32_OPS = ["add", "sub", "mul", "div", "max", "min", "fma", "neg", "abs", "sq", "inv", "sqrt",
           "exp", "exp2", "log", "log2", "sin", "cos", "tanh", "sigmoid"]


def _f64_ops() -> list[str]:
    """The genes' ops that have an f64 form in the table."""
    out = []
    for op in F32_OPS:
        try:
            Genes([op], 1, dtype="f64")
        except SearchError:
            continue
        out.append(op)
    return out


def _programs(genes: Genes, n: int, seed: int) -> list:
    b = Breeder(genes, crossover=0.5, mutation=0.9, max_length=64)
    return list(b.random_programs(np.random.default_rng(seed), n, (2, 12)))


def _data(n: int = 40, dtype=np.float32, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 2)).astype(dtype)
    return X, (X[:, 0] * X[:, 1] + X[:, 0]).astype(dtype)


# ---- the Evaluator -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("loss", ["mse", "pearson"])
def test_interpret_and_compile_give_equal_losses_on_200_random_programs(dtype, loss):
    ops = F32_OPS if dtype == "f32" else _f64_ops()
    genes = Genes(ops, 2, dtype=dtype)
    progs = _programs(genes, 200, seed=11)
    X, y = _data(dtype=np.float32 if dtype == "f32" else np.float64)
    ei = Evaluator(X, y, loss=loss, device="cpu", evaluate="interpret")
    ec = Evaluator(X, y, loss=loss, device="cpu", evaluate="compile")
    assert (ei.mode, ec.mode) == ("interpret", "compile")
    a, b = ei.score(progs), ec.score(progs)
    assert a.dtype == b.dtype == np.float64
    assert np.array_equal(a.view(np.uint64), b.view(np.uint64))     # bit for bit, inf too
    assert np.isfinite(a).sum() > 50 and np.isinf(a).any()           # both kinds occur
    assert ei.evaluated == ec.evaluated == 200


def test_auto_interprets_on_the_cpu_and_constant_fitting_goes_the_same_way():
    X, y = _data()
    ev = Evaluator(X, y, device="cpu")
    assert (ev.evaluate, ev.mode) == ("auto", "interpret")
    # on a GPU: the interpreter up to nx.fitness's crossover, the compiled path above
    assert E.resolve_evaluate("auto", "gpu", E.GPU_INTERPRET_MAX_ROWS) == "interpret"
    assert E.resolve_evaluate("auto", "gpu", E.GPU_INTERPRET_MAX_ROWS + 1) == "compile"
    assert E.resolve_evaluate("compile", "cpu", 20) == "compile"
    genes = Genes(["add", "mul"], 2)
    prog = [sp.input("x0"), genes.const(0.5), sp.instr("mul.rn.f32")]
    batch = ev.constant_batch([prog, prog])
    got = batch([np.array([1.0]), np.array([0.25])])
    want = Evaluator(X, y, device="cpu", evaluate="compile").score(batch.with_values(
        [np.array([1.0]), np.array([0.25])]))
    assert np.array_equal(got, want)


def test_programs_the_interpreter_refuses_are_scored_by_the_compiled_path():
    if "cvt.rn.f16.f32" in interpreted_rows():
        pytest.skip("cvt.rn.f16.f32 has C semantics now: no f32 program is refused")
    X, y = _data()
    plain = [sp.input("x0"), sp.input("x1"), sp.instr("mul.rn.f32"), sp.input("x0"),
             sp.instr("add.rn.f32")]
    half = [sp.input("x0"), sp.instr("cvt.rn.f16.f32"), sp.instr("cvt.f32.f16")]
    progs = [plain, half, plain]
    got = Evaluator(X, y, device="cpu", evaluate="interpret").score(progs)
    want = Evaluator(X, y, device="cpu", evaluate="compile").score(progs)
    assert np.array_equal(got, want) and got[0] == 0.0 and 0 < got[1] < math.inf


def test_a_program_reading_cand_keeps_its_index_in_the_module():
    X, y = _data()
    cand = [sp.input("cand"), sp.instr("cvt.rn.f32.u32"), sp.input("x0"), sp.instr("add.rn.f32")]
    plain = [sp.input("x0"), sp.input("x1"), sp.instr("mul.rn.f32")]
    progs = [plain, plain, plain, cand, plain]
    got = Evaluator(X, y, device="cpu", evaluate="interpret").score(progs)
    want = Evaluator(X, y, device="cpu", evaluate="compile").score(progs)
    assert np.array_equal(got, want)
    # cand is 3 there: the loss is that of x0 + 3, not of x0 + 0
    pred = X[:, 0] + np.float32(3)
    assert got[3] == pytest.approx(float(np.mean((pred.astype(np.float64) - y) ** 2)))


@pytest.mark.parametrize("bad", ["fast", "Interpret", None, 1, ("interpret",)])
def test_a_bad_evaluate_is_a_search_error_naming_the_argument(bad, tmp_path):
    X, y = _data()
    for call in (lambda: search.regress(X, y, ["add"], population=8, generations=1,
                                        device="cpu", evaluate=bad),
                 lambda: search.map_elites(X, y, ["add"], batch=8, generations=1,
                                           device="cpu", evaluate=bad),
                 lambda: Evaluator(X, y, device="cpu", evaluate=bad)):
        with pytest.raises(SearchError, match=r"evaluate=.*'auto'.*'interpret'.*'compile'") as e:
            call()
        assert isinstance(e.value, nx.NumptxError)
    if bad is None:
        return                            # resume's evaluate=None: as the run was
    r = search.regress(X, y, ["add"], population=8, generations=1, device="cpu", seed=0)
    r.save(tmp_path / "r.nxck")
    with pytest.raises(SearchError, match=r"^resume: evaluate=") as e:
        search.resume(tmp_path / "r.nxck", generations=1, evaluate=bad)
    assert not isinstance(e.value, CheckpointError)             # the argument, not the file


def test_evolve_refuses_evaluate_interpret_and_says_why():
    tmpl = nx.CudaTemplate("""
extern "C" __global__ void fit(float* out, const float* xs) {
    unsigned cand = blockIdx.y;
    float x = xs[threadIdx.x];
    float p;
    PTX_INJECT("f", PTX_IN(U32, cand), PTX_IN(F32, x), PTX_OUT(F32, p));
    out[cand] = p;
}""", entry="fit")
    with pytest.raises(SearchError, match=r"evolve: evaluate='interpret': evolve's fitness "
                                          r"scores built packs"):
        search.evolve(tmpl, "f", lambda packs: [], population=4, generations=1,
                      evaluate="interpret")
    with pytest.raises(SearchError, match=r"evolve: evaluate='nope'"):
        search.evolve(tmpl, "f", lambda packs: [], population=4, generations=1,
                      evaluate="nope")


# ---- the searches --------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["x0*x1 + x0", "x0**2 - x1"])
def test_regress_finds_hidden_targets_through_the_interpreter(target):
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, (50, 2)).astype(np.float32)
    x0, x1 = X[:, 0], X[:, 1]
    y = (x0 * x1 + x0) if target == "x0*x1 + x0" else (x0 * x0 - x1)
    r = search.regress(X, y.astype(np.float32), ["add", "sub", "mul"], population=200,
                       generations=30, seed=2, device="cpu", evaluate="interpret",
                       target=1e-12)
    assert r.evaluate == "interpret" and r.stopped == "target"
    assert r.best.loss <= 1e-12
    assert np.allclose(r.best.predict(X), y, atol=1e-6)
    # re-scored by the compiled path: the same loss, bit for bit, on the CPU (the run's
    # scaled loss); the program returned (its scaling written in) carries its own loss
    assert r.rescored.what == ("best",) and r.rescored.differing == 0
    assert r.rescored.compiled == r.rescored.interpreted
    assert r.best.loss == Evaluator(X, y.astype(np.float32), device="cpu",
                                    evaluate="compile").score([r.best.program])[0]


def test_compile_and_interpret_runs_are_the_same_run_on_the_cpu():
    X, y = _data()
    runs = [search.regress(X, y, ["add", "sub", "mul", "sin"], population=60, generations=4,
                           seed=9, device="cpu", evaluate=e, semantic_dedup=0)
            for e in ("interpret", "compile")]
    a, b = runs
    assert a.history and [g[:5] for g in a.history] == [g[:5] for g in b.history]
    assert [(c.program, c.loss) for c in a.population] == \
        [(c.program, c.loss) for c in b.population]
    assert (a.evaluate, b.evaluate, b.rescored) == ("interpret", "compile", None)


def test_map_elites_elites_are_rescored_by_the_compiled_path():
    X, y = _data()
    r = search.map_elites(X, y, ["add", "mul", "sin"], batch=60, generations=3, seed=4,
                          device="cpu", evaluate="interpret")
    assert r.archive and r.rescored.differing == 0
    assert r.rescored.what[0] == "best" and len(r.rescored.what) == 1 + len(r.archive)
    want = Evaluator(X, y, device="cpu", evaluate="compile").score(
        [c.program for c in r.archive.values()])
    assert [c.loss for c in r.archive.values()] == want.tolist()
    assert r.population == list(r.archive.values())


def test_a_loss_the_compiled_path_does_not_confirm_is_reported_and_warned(tmp_path):
    # a checkpoint whose best carries a loss its program does not give: resuming for 0
    # generations returns that best, and the compiled re-score tells
    X, y = _data()
    r = search.regress(X, y, ["add", "mul"], population=20, generations=2, seed=1,
                       device="cpu", evaluate="interpret")
    r.save(tmp_path / "r.nxck")
    state = ck.read(tmp_path / "r.nxck")
    true_loss = state["best"][1]
    state["best"][1] = true_loss / 2 - 1.0
    ck.write(tmp_path / "r.nxck", state)
    with pytest.warns(NumptxWarning, match=r"compiled path scores 1 of the 1 returned .*best: "
                                           r"interpreted"):
        got = search.resume(tmp_path / "r.nxck", generations=0, device="cpu")
    assert got.rescored.differing == 1 and got.rescored.max_difference > 0
    assert got.rescored.compiled == (true_loss,)             # the compiled path's loss
    assert got.rescored.interpreted == (true_loss / 2 - 1.0,)
    # returned with its scaling written in, and that program's own loss
    assert got.best.loss == Evaluator(X, y, device="cpu", evaluate="compile").score(
        [got.best.program])[0]


def test_equal_losses_raise_no_warning():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumptxWarning)
        r = search.regress(X, y, ["add", "mul", "exp"], population=40, generations=2, seed=3,
                           device="cpu", evaluate="interpret")
    assert r.rescored.differing == 0


# ---- checkpoints ---------------------------------------------------------------------------------
@pytest.mark.parametrize("evaluate", ["auto", "interpret", "compile"])
def test_a_checkpoint_keeps_evaluate(tmp_path, evaluate):
    X, y = _data()
    r = search.regress(X, y, ["add", "mul"], population=20, generations=2, seed=1,
                       device="cpu", evaluate=evaluate)
    r.save(tmp_path / "r.nxck")
    assert ck.read(tmp_path / "r.nxck")["data"]["evaluate"] == evaluate
    got = search.resume(tmp_path / "r.nxck", generations=1, device="cpu")
    assert got.evaluate == r.evaluate == ("compile" if evaluate == "compile" else "interpret")
    got.save(tmp_path / "s.nxck")
    assert ck.read(tmp_path / "s.nxck")["data"]["evaluate"] == evaluate
    other = search.resume(tmp_path / "r.nxck", generations=1, device="cpu",
                          evaluate="compile" if evaluate != "compile" else "interpret")
    assert other.evaluate != got.evaluate                     # resume's argument wins


def test_a_checkpoint_from_before_evaluate_resumes_as_compiled_and_a_forged_one_is_refused(
        tmp_path):
    X, y = _data()
    r = search.regress(X, y, ["add", "mul"], population=20, generations=1, seed=1,
                       device="cpu")
    r.save(tmp_path / "r.nxck")
    state = ck.read(tmp_path / "r.nxck")
    old = dict(state, data={k: v for k, v in state["data"].items() if k != "evaluate"},
               config={k: v for k, v in state["config"].items() if k != "semantic_dedup"})
    old.pop("semantic", None)
    ck.write(tmp_path / "old.nxck", old)
    got = search.resume(tmp_path / "old.nxck", generations=1, device="cpu")
    assert got.evaluate == "compile"
    got.save(tmp_path / "again.nxck")
    again = ck.read(tmp_path / "again.nxck")
    assert again["config"]["semantic_dedup"] == 0 and "semantic" not in again
    assert again["data"]["evaluate"] == "compile"
    for bad in ("fast", 3, None):
        state["data"]["evaluate"] = bad
        ck.write(tmp_path / "bad.nxck", state)
        with pytest.raises(CheckpointError, match=r"field data.evaluate: "):
            search.resume(tmp_path / "bad.nxck", generations=1, device="cpu")


def test_semantic_dedup_resumes_as_the_uninterrupted_run(tmp_path):
    X, y = _data(n=300)                              # more rows than the probe: it matters
    kw = dict(population=60, seed=6, device="cpu", evaluate="interpret", semantic_dedup=16)
    full = search.regress(X, y, ["add", "sub", "mul"], generations=6, **kw)
    half = search.regress(X, y, ["add", "sub", "mul"], generations=3, **kw)
    half.save(tmp_path / "h.nxck")
    assert len(ck.read(tmp_path / "h.nxck")["semantic"]["losses"]["shape"]) == 1
    more = search.resume(tmp_path / "h.nxck", generations=3, device="cpu")
    assert full.semantic_duplicates > 0
    assert [g[:5] for g in more.history] == [g[:5] for g in full.history]
    assert (more.semantic_duplicates, more.evaluated) == (full.semantic_duplicates,
                                                          full.evaluated)
    state = ck.read(tmp_path / "h.nxck")
    state["semantic"]["hits"] = -1
    ck.write(tmp_path / "h.nxck", state)
    with pytest.raises(CheckpointError, match=r"field semantic.hits: "):
        search.resume(tmp_path / "h.nxck", generations=1, device="cpu")


# ---- semantic dedup ------------------------------------------------------------------------------
def test_programs_of_equal_outputs_are_found_beyond_their_keys():
    X, y = _data()
    ev = Evaluator(X, y, device="cpu")
    genes = Genes(["add", "mul"], 2)
    twice = [sp.input("x0"), genes.const(2.0), sp.instr("mul.rn.f32")]
    plus = [sp.input("x0"), sp.input("x0"), sp.instr("add.rn.f32")]
    other = [sp.input("x1"), sp.input("x0"), sp.instr("add.rn.f32")]
    keys = search.formula_module.canonical_keys([twice, plus, other], genes)
    assert len(set(keys)) == 3                                  # the keys tell them apart
    sem = S.Semantic(ev, rows=16, seed=0)
    sem.begin()
    todo, todo_keys, dups = sem.split([twice, plus, other], keys)
    assert todo == [twice, other] and dups == {keys[1]: keys[0]}   # x0 + x0 is 2 * x0
    sem.settle({keys[0]: 1.5, keys[2]: 2.5})
    sem.begin()
    todo, _, dups = sem.split([plus], [b"k" * 16])
    assert todo == [] and dups == {b"k" * 16: 1.5} and sem.hits == 2


def test_the_probe_rows_follow_the_seed():
    X, y = _data(n=500)
    ev = Evaluator(X, y, device="cpu")
    a, b, c = (S.Semantic(ev, 32, s).rows for s in (7, 7, 8))
    assert len(a) == 32 and np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.array_equal(S.Semantic(Evaluator(*_data(n=20), device="cpu"), 32, 7).rows,
                          np.arange(20))                       # few rows: every row


def test_semantic_dedup_default_is_on_where_the_probe_is_cheaper():
    assert S.resolve(None, "compile", "cpu", 20) == S.PROBE_ROWS
    assert S.resolve(None, "compile", "gpu", 20_000) == S.PROBE_ROWS
    assert S.resolve(None, "interpret", "cpu", 20) == 0
    assert S.resolve(None, "interpret", "cpu", S.AUTO_MIN_ROWS) == S.PROBE_ROWS
    assert S.resolve(None, "interpret", "gpu", S.AUTO_MIN_ROWS) == 0
    assert S.resolve(0, "compile", "cpu", 10_000) == 0
    assert S.resolve(8, "interpret", "cpu", 20) == 8


def test_semantic_dedup_keeps_the_run_when_the_probe_is_every_row():
    # 20 rows, a probe of 32: equal outputs on the probe are equal outputs everywhere, so the
    # losses it reuses are the ones scoring would give: the same run, fewer programs scored
    X, y = _data(n=20)
    kw = dict(population=120, generations=6, seed=3, device="cpu", evaluate="interpret")
    on = search.regress(X, y, ["add", "sub", "mul", "div"], semantic_dedup=32, **kw)
    off = search.regress(X, y, ["add", "sub", "mul", "div"], semantic_dedup=0, **kw)
    assert on.semantic_duplicates > 0 and off.semantic_duplicates == 0
    assert on.evaluated + on.semantic_duplicates == off.evaluated
    assert [g[:3] for g in on.history] == [g[:3] for g in off.history]
    assert [(c.program, c.loss) for c in on.population] == \
        [(c.program, c.loss) for c in off.population]
    assert on.best.program == off.best.program and on.best.loss == off.best.loss


def test_semantic_dedup_is_a_checked_option():
    X, y = _data()
    for bad in (-1, 1.5, "32", 10 ** 9):
        with pytest.raises(SearchError, match=r"^semantic_dedup="):
            search.regress(X, y, ["add"], population=8, generations=1, device="cpu",
                           semantic_dedup=bad)


def test_the_rescore_tolerance_is_exact_on_the_cpu():
    assert R.tolerance("cpu") == (0.0, 0.0)
    assert R.tolerance("gpu") == (R.RTOL_GPU, R.ATOL_GPU)
    X, y = _data()
    r = search.regress(X, y, ["add", "mul"], population=20, generations=1, seed=1,
                       device="cpu", evaluate="interpret")
    assert (r.rescored.rtol, r.rescored.atol) == (0.0, 0.0)


# ---- GPU -----------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_on_the_gpu_the_interpreter_scores_and_the_packs_confirm():
    X, y = _data(n=2000)
    assert Evaluator(X, y, device="gpu").mode == "interpret"         # evaluate.gpu_auto
    progs = _programs(Genes(F32_OPS, 2), 200, seed=3)
    a = Evaluator(X, y, device="gpu", evaluate="interpret").score(progs)
    b = Evaluator(X, y, device="gpu", evaluate="compile").score(progs)
    assert np.array_equal(np.isinf(a), np.isinf(b))
    fin = np.isfinite(a)
    np.testing.assert_allclose(a[fin], b[fin], rtol=R.RTOL_GPU, atol=R.ATOL_GPU)
    r = search.map_elites(X, y, ["add", "mul", "sin", "exp"], batch=100, generations=3,
                          seed=0, device="gpu", evaluate="interpret")
    assert (r.device, r.evaluate) == ("gpu", "interpret")
    assert (r.rescored.rtol, r.rescored.atol) == (R.RTOL_GPU, R.ATOL_GPU)
    assert r.rescored.differing == 0 and r.best.loss == r.rescored.compiled[0]


def test_search_evaluate_is_the_formula_evaluator_not_the_scoring_module():
    # docs/search.md: search.evaluate(formula, X, genes); the submodule of that name once
    # took its place in the package
    X = np.array([[1.0], [2.0]], np.float32)
    assert search.evaluate is search.formula_module.evaluate
    assert search.evaluate("x0 + 1", X, Genes(["add"], 1)).tolist() == [2.0, 3.0]


# ---- constant fitting's fast path ----------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_constant_slots_set_what_with_constants_sets(dtype):
    genes = Genes(["add", "mul", "sub"], 2, dtype=dtype, constants=[0.5, -1.25, 3.0])
    rng = np.random.default_rng(1)
    for p in _programs(genes, 150, seed=4):
        s = O.ConstantSlots(p)
        assert s.count == len(O.constants_of(p))
        for vals in (rng.standard_normal(s.count) * 10.0 ** rng.uniform(-30, 30, s.count),
                     np.full(s.count, -0.0), np.full(s.count, 3.4028235e38)):
            got, want = s.program(vals), O.with_constants(p, vals)
            assert got == want and [repr(o) for o in got] == [repr(o) for o in want]
    one = O.ConstantSlots([genes.const(1.0)])
    for bad in ([math.inf], [math.nan]) + (([1e39],) if dtype == "f32" else ()):
        with pytest.raises(SearchError, match=rf"values\[0\]=.*not a finite {dtype} constant"):
            one.program(bad)
    with pytest.raises(SearchError, match=r"the program has 1 constants, got 2 values"):
        one.program([1.0, 2.0])
