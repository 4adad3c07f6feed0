"""The search loop of issue 15 (numptx.search: regress, map_elites, evolve, resume) on real
components: the fitness kernel's site, the stub emulator on the CPU, real CudaTemplate packs
built with NVRTC and nvJitLink; the GPU test is marked ``gpu``."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

import numptx as nx
from numptx import search
from numptx import stack_ptx as sp
from numptx.search import CheckpointError, SearchError
from numptx.search.constants import fit_constants
from numptx.search.evaluate import Evaluator

OPS = ["add", "sub", "mul"]


def _data(n=24, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
    x = X[:, 0]
    return X, (x ** 2 + x).astype(np.float32)


def _small(**kw):
    X, y = _data()
    opts = dict(population=40, generations=4, seed=3, device="cpu", fit_top=2, fit_steps=2,
                fit_trials=2)
    opts.update(kw)
    return search.regress(X, y, OPS, **opts)


def _rows(history):
    """History without the wall time (the evaluation counts included: a checkpoint carries the
    score cache and the fit memo, so a resumed run scores what the uninterrupted one does)."""
    return [(g.generation, g.best, g.median, g.evaluated, g.mean_length, g.filled)
            for g in history]


def _words(prog):
    return [(op.word, op.extra, op.name) for op in prog]


# ---- reproducibility and checkpoints ---------------------------------------------------------
def test_a_seed_reproduces_the_run():
    a, b = _small(), _small()
    assert [g[:-1] for g in a.history] == [g[:-1] for g in b.history]
    assert _words(a.best.program) == _words(b.best.program) and a.best.loss == b.best.loss
    c = _small(seed=4)
    assert _words(c.best.program) != _words(a.best.program) or _rows(c.history) != _rows(a.history)


def test_resume_continues_exactly(tmp_path):
    full = _small(generations=5)
    part = _small(generations=2)
    path = tmp_path / "run.nxck"
    part.save(path)
    assert not [f for f in os.listdir(tmp_path) if f != "run.nxck"]     # no temporary left
    more = search.resume(path, generations=3)
    assert _rows(more.history) == _rows(full.history)
    assert more.evaluated == full.evaluated
    assert more._search.children_made == full._search.children_made
    assert _words(more.best.program) == _words(full.best.program)
    assert more.best.loss == full.best.loss
    assert [_words(c.program) for c in more.population] == \
        [_words(c.program) for c in full.population]
    # nothing left of the original 2 generations: resume() with no count runs none
    assert search.resume(path).generations == 2
    # the checkpoint holds the whole score cache: re-variation after a resume sees every
    # program the run scored (a truncated cache changed the children)
    from numptx.search import checkpoint
    assert checkpoint.CACHE_SAVED >= search.config.CACHE_MAX
    assert set(search.resume(path)._search.cache) == set(part._search.cache)


def test_map_elites_resume_with_a_user_descriptor(tmp_path):
    X, y = _data()
    depth = search.Descriptor("consts", lambda p, g: sum(op.kind == "const" for op in p), 0, 4, 4)
    kw = dict(descriptors=["length", depth], batch=30, seed=1, device="cpu", fit_top=0)
    full = search.map_elites(X, y, OPS, generations=4, **kw)
    part = search.map_elites(X, y, OPS, generations=2, **kw)
    part.save(tmp_path / "me.nxck")
    with pytest.raises(SearchError, match="descriptors"):
        search.resume(tmp_path / "me.nxck", generations=2)
    more = search.resume(tmp_path / "me.nxck", generations=2, descriptors=["length", depth])
    assert _rows(more.history) == _rows(full.history)
    assert more.evaluated == full.evaluated
    assert sorted(more.archive) == sorted(full.archive)


@pytest.mark.parametrize("damage", ["flip", "truncate", "magic", "version", "missing", "kind"])
def test_a_bad_checkpoint_is_a_numptx_error_naming_the_file(tmp_path, damage):
    r = _small(generations=1)
    path = tmp_path / "run.nxck"
    r.save(path)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x40
    elif damage == "truncate":
        data = data[:-10]
    elif damage == "magic":
        data[:4] = b"XXXX"
    elif damage == "version":
        data[4] = 99
    elif damage == "missing":
        path = tmp_path / "nowhere.nxck"
    if damage == "kind":
        from numptx.search import checkpoint
        state = checkpoint.read(path)
        state["population"] = [["not base64!", 1.0, False]]
        checkpoint.write(path, state)
    elif damage != "missing":
        path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError) as e:
        search.resume(path)
    assert str(path) in str(e.value) and e.value.path == str(path)
    assert isinstance(e.value, nx.NumptxError)
    expect = {"flip": "checksum", "truncate": "bytes", "magic": "not a numptx", "version":
              "version 99", "missing": "cannot read", "kind": "program"}[damage]
    assert expect in str(e.value)


# ---- MAP-Elites, parsimony, dedup ------------------------------------------------------------
def test_map_elites_fills_its_archive():
    X, y = _data()
    r = search.map_elites(X, y, OPS + ["sin"], descriptors=("length", "op_mix"), batch=60,
                          generations=6, seed=0, device="cpu", fit_top=0, max_length=24,
                          linear_scaling=False)    # (scaling ops would lengthen the elites)
    cells = r.archive
    assert len(cells) >= 6
    assert r.history[-1].filled == len(cells)
    assert [g.filled for g in r.history] == sorted(g.filled for g in r.history)   # never shrinks
    ls = search.DESCRIPTORS["length"]
    for cell, c in cells.items():
        assert cell[0] == min(ls.bins - 1, int(len(c.program) / 24 * ls.bins))
        assert math.isfinite(c.loss)
    assert r.best.loss == min(c.loss for c in cells.values())


def test_parsimony_makes_programs_shorter():
    plain = _small(generations=8, population=60, parsimony=0.0, max_length=48)
    lean = _small(generations=8, population=60, parsimony=0.05, max_length=48)
    assert lean.history[-1].mean_length < plain.history[-1].mean_length


def test_dedup_scores_each_distinct_program_once():
    X, y = _data()
    # one input, one op, two ops at most: few distinct stubs, many children
    for survivors, elites, variation in (("children", 1, "tree"), ("plus", 0, "tree"),
                                         ("plus", 0, "linear")):
        r = search.regress(X, y, ["add"], population=50, generations=5, seed=0, device="cpu",
                           max_length=2, init_length=(1, 2), fit_top=0, constants=(1.0,),
                           survivors=survivors, variation=variation)
        made = r._search.children_made
        # a generation makes population - elites children (plus: no elites, the parents
        # compete with their children)
        assert r._search.cfg.elitism == 1
        assert made == 50 * 5 - 4 * elites
        assert r.evaluated == len(r._search.cache) < made / 4


# ---- evaluation and the local optimizer ------------------------------------------------------
def test_a_nan_candidate_scores_inf_and_never_stops_the_run():
    X = np.linspace(-2, -1, 16, dtype=np.float32)[:, None]
    y = X[:, 0] * 2
    ev = Evaluator(X, y, device="cpu")
    nan_prog = [sp.input("x0"), sp.instr("lg2.approx.f32")]          # log2 of a negative: NaN
    got = ev.score([nan_prog, [sp.input("x0"), sp.input("x0"), sp.instr("add.rn.f32")]])
    assert got[0] == math.inf and got[1] == 0.0
    r = search.regress(X, y, ["log", "div", "sqrt"], population=30, generations=3, seed=0,
                       device="cpu", fit_top=1, fit_steps=1, fit_trials=1)
    assert all(c.loss >= 0 for c in r.population) and r.generations == 3


def test_the_local_optimizer_fits_constants():
    X, _ = _data(n=32)
    y = (2.5 * X[:, 0] + 0.25).astype(np.float32)
    ev = Evaluator(X, y, device="cpu")
    prog = [sp.input("x0"), sp.const(1.0, "f32"), sp.instr("mul.rn.f32"), sp.const(1.0, "f32"),
            sp.instr("add.rn.f32")]
    (loss0,) = ev.score([prog])
    from numptx.search.formula import canonical_key
    from numptx.search.genes import Genes
    key = canonical_key(prog, Genes(OPS, 1))
    progs, losses = fit_constants(ev, [prog], [loss0], [key], seed=0, steps=40, trials=8)
    assert losses[0] < 1e-3 * loss0
    assert ev.score(progs)[0] == losses[0]                      # the returned program scores so
    again = fit_constants(ev, [prog], [loss0], [key], seed=0, steps=40, trials=8)
    assert _words(again[0][0]) == _words(progs[0])               # a function of the program


# ---- the result's candidate -----------------------------------------------------------------
def test_the_best_candidate_is_formula_stub_and_program(spine_ptx):
    r = _small(generations=6, population=60)
    best = r.best
    assert isinstance(best.formula, str) and "x0" in best.formula
    assert sp.loads(sp.dumps(best.program)) == best.program
    X, y = _data()
    pred = best.predict(X)
    assert np.isclose(float(np.mean((pred.astype(np.float64) - y) ** 2)), best.loss,
                      rtol=1e-5, atol=1e-9)
    # a stub for a template site whose inputs are named as the genes' inputs
    src = r'''
    extern "C" __global__ void k(float* out, const float* a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) { float x0 = a[i], z;
            PTX_INJECT("g", PTX_IN(F32, x0), PTX_OUT(F32, z)); out[i] = z; }
    }'''
    tmpl = nx.CudaTemplate(src, entry="k")
    stub = best.stub(tmpl.sites["g"])
    got = nx.emulate(stub, {"v_x0": X[:, 0]}, ["v_z"])["v_z"]
    np.testing.assert_array_equal(got, pred)
    assert len(r.history) == 6 and all(h.best >= r.best.loss for h in r.history)
    assert r.history[-1].best == r.best.loss


# ---- evolve() on a real template -----------------------------------------------------------
_EVOLVE_SRC = r'''
extern "C" __global__ void fit(float* out, const float* X, int n) {
    unsigned cand = blockIdx.y;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float t = X[i], p;
        PTX_INJECT("f", PTX_IN(U32, cand), PTX_IN(F32, t), PTX_OUT(F32, p));
        out[(size_t)cand * n + i] = p;
    }
}'''


def test_evolve_with_a_user_fitness_on_a_real_template():
    tmpl = nx.CudaTemplate(_EVOLVE_SRC, entry="fit")
    site = tmpl.sites["f"]
    t = np.linspace(-1, 1, 16, dtype=np.float32)
    target = t * t - t
    seen = []

    def fitness(packs):        # CPU-side: each packed candidate's stub run by the emulator
        scores = []
        for p in packs:
            assert p.cubin[:4] == b"\x7fELF"                  # built for real
            for stub in p.candidates:
                seen.append(str(stub))
                out = nx.emulate(stub, {site["t"].reg: t, site["cand"].reg: np.uint32(0)},
                                 [site["p"].reg])[site["p"].reg]
                scores.append(float(np.mean((out - target) ** 2)))
        return scores

    r = search.evolve(tmpl, "f", fitness, ops=["add", "sub", "mul"], population=48,
                      generations=4, seed=0, per_module=32)
    assert r.best.loss == min(g.best for g in r.history)
    assert r.best.genes.names == ("t",)
    assert len(seen) == len(set(seen)) == r.evaluated       # no program built twice
    assert r.evaluated < r._search.children_made

    with pytest.raises(SearchError, match="fitness= returned 1 scores"):
        search.evolve(tmpl, "f", lambda packs: [0.0], population=8, generations=1, seed=0)
    with pytest.raises(SearchError, match="select='idx'"):
        search.evolve(tmpl, "f", fitness, select="idx", population=8, generations=1)
    with pytest.raises(SearchError, match="site='nope'"):
        search.evolve(tmpl, "nope", fitness, population=8, generations=1)


# ---- bad input --------------------------------------------------------------------------------
@pytest.mark.parametrize("case, match", [
    ("shape", r"y has shape \(23,\)"),
    ("nan_x", "X holds 1 non-finite"),
    ("inf_y", "y holds 1 non-finite"),
    ("empty_ops", "ops=.*empty"),
    ("unknown_op", "unknown op 'tan'"),
    ("dtype_op", "op 'sin' has no f64 form"),
    ("text_x", "X holds"),
    ("population", "population=1"),
    ("seed", "seed=-1"),
    ("loss", "loss='huber'"),
    ("device", "device='tpu'"),
])
def test_bad_input_is_a_search_error_naming_the_argument(case, match):
    X, y = _data()
    kw = dict(population=8, generations=1, device="cpu")
    ops = OPS
    if case == "shape":
        y = y[:-1]
    elif case == "nan_x":
        X = X.copy()
        X[3, 0] = np.nan
    elif case == "inf_y":
        y = y.copy()
        y[0] = np.inf
    elif case == "empty_ops":
        ops = []
    elif case == "unknown_op":
        ops = ["add", "tan"]
    elif case == "dtype_op":
        X, y, ops = X.astype(np.float64), y.astype(np.float64), ["add", "sin"]
    elif case == "text_x":
        X = np.array([["a"]] * len(y))
    elif case == "population":
        kw["population"] = 1
    elif case == "seed":
        kw["seed"] = -1
    elif case == "loss":
        kw["loss"] = "huber"
    elif case == "device":
        kw["device"] = "tpu"
    with pytest.raises(SearchError, match=match) as e:
        search.regress(X, y, ops, **kw)
    assert isinstance(e.value, nx.NumptxError)


# ---- GPU -----------------------------------------------------------------------------------
@pytest.mark.gpu
def test_regress_on_the_gpu_agrees_with_the_cpu():
    X, y = _data(n=2000)
    r = search.regress(X, y, OPS, population=200, generations=5, seed=0, device="gpu",
                       per_module=64, fit_top=4)
    assert r.device == "gpu" and math.isfinite(r.best.loss)
    ev = Evaluator(X, y, device="cpu")
    cpu = ev.score([c.program for c in r.population[:50]])
    gpu = np.array([c.loss for c in r.population[:50]])
    assert np.array_equal(np.isinf(cpu), np.isinf(gpu))
    fin = np.isfinite(cpu)
    np.testing.assert_allclose(gpu[fin], cpu[fin], rtol=1e-6, atol=1e-9)
    # constants fitted through run-time tables give the loss the CPU computes for them
    fitted = [c for c in r.population if c.fitted and len(search.operators.constants_of(c.program))]
    if fitted:
        np.testing.assert_allclose(ev.score([c.program for c in fitted]),
                                   [c.loss for c in fitted], rtol=1e-6, atol=1e-9)


# ---- progress, executors, restarts -----------------------------------------------------------
def test_progress_callback_and_stderr_lines(capsys):
    got = []
    r = _small(progress=got.append)
    assert got == r.history
    _small(generations=2, progress=True)
    err = capsys.readouterr().err
    assert err.count("numptx.search: gen") == 2 and "best" in err


def test_an_executor_gives_the_same_run():
    from concurrent.futures import ThreadPoolExecutor
    X, y = _data()
    kw = dict(population=300, generations=2, seed=5, device="cpu", fit_top=1, fit_steps=2)
    plain = search.regress(X, y, OPS, **kw)
    with ThreadPoolExecutor(2) as pool:
        spread = search.regress(X, y, OPS, executor=pool, **kw)
    assert _rows(spread.history) == _rows(plain.history)
    assert _words(spread.best.program) == _words(plain.best.program)


def test_a_dask_executor_gives_the_same_run():
    """The documented Dask form: client.get_executor() spreads the emulator's chunks."""
    distributed = pytest.importorskip("distributed")
    X, y = _data()
    kw = dict(population=300, generations=2, seed=5, device="cpu", fit_top=1, fit_steps=2)
    plain = search.regress(X, y, OPS, **kw)
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2,
                            dashboard_address=None) as client:
        spread = search.regress(X, y, OPS, executor=client.get_executor(), **kw)
    assert _rows(spread.history) == _rows(plain.history)
    assert _words(spread.best.program) == _words(plain.best.program)


def test_restart_reseeds_a_stalled_population(tmp_path):
    # no target: these settings find the exact formula within a few generations, and the
    # population then stalls (it cannot improve on a loss of 0)
    r = _small(generations=8, restart=2)
    assert r._search.restarts >= 1
    assert r.best.loss == min(g.best for g in r.history)
    r.save(tmp_path / "r.nxck")
    full = _small(generations=10, restart=2)
    more = search.resume(tmp_path / "r.nxck", generations=2)
    assert _rows(more.history) == _rows(full.history)
    assert more.evaluated == full.evaluated
