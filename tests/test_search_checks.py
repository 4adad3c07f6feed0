"""numptx.search on edge cases a review found: all-infinite MAP-Elites generations, a constant
pearson target, sites that do not fit the programs, the dtype of mixed data, restarts with
negative fitness, signed zeros, checkpoint settings and files, and the messages of bad
arguments. Real components only (the emulator on the CPU, real CudaTemplate sites and packs)."""
from __future__ import annotations

import math
import os
import warnings

import numpy as np
import pytest

import numptx as nx
from numptx import search
from numptx import stack_ptx as sp
from numptx.search import CheckpointError, SearchError
from numptx.search import checkpoint as ck
from numptx.search import operators as O
from numptx.search.formula import evaluate, formula
from numptx.search.genes import Genes

from test_search_loop import _EVOLVE_SRC

OPS = ["add", "sub", "mul"]


def _data(n=16, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    return X, (X[:, 0] * X[:, 1] + 0.5).astype(np.float32)


def _site(decl: str, args: str) -> nx.Site:
    src = (r'extern "C" __global__ void k(float* out, const float* a, int n) { '
           r'int i = threadIdx.x; ' + decl + f' PTX_INJECT("g", {args}); out[i] = 0; }}')
    return nx.CudaTemplate(src, entry="k").sites["g"]


# ---- 1, 2: no finite loss ---------------------------------------------------------------------
def test_map_elites_with_no_finite_candidate_records_inf_and_goes_on():
    # every program over a zero column predicts a constant: pearson is +inf for all of them
    X = np.zeros((16, 1), np.float32)
    y = np.linspace(-1, 1, 16, dtype=np.float32)
    r = search.map_elites(X, y, loss="pearson", batch=20, generations=3, seed=0, device="cpu")
    assert r.generations == 3 and r.archive == {}
    assert all(g.best == math.inf and g.median == math.inf and g.filled == 0 for g in r.history)
    assert r.best is not None and r.best.loss == math.inf


@pytest.mark.parametrize("call", ["regress", "map_elites"])
def test_a_constant_target_with_pearson_is_a_search_error_naming_y(call):
    X, _ = _data()
    y = np.full(len(X), 2.0, np.float32)
    kw = {"population": 20} if call == "regress" else {"batch": 20}
    with pytest.raises(SearchError, match=r"y is constant .*pearson.* undefined") as e:
        getattr(search, call)(X, y, loss="pearson", generations=2, seed=0, device="cpu", **kw)
    assert isinstance(e.value, nx.NumptxError)
    # other losses take a constant target
    r = search.regress(X, y, population=20, generations=1, seed=0, device="cpu")
    assert math.isfinite(r.best.loss)


# ---- 3: sites that do not fit -----------------------------------------------------------------
@pytest.fixture(scope="module")
def best():
    X, y = _data()
    return search.regress(X, y, ["add", "mul"], population=40, generations=2, seed=0,
                          device="cpu").best


def test_a_stub_binds_by_name_at_any_site_that_fits(best):
    X, _ = _data()
    site = _site("float x1 = a[i], x0 = a[i+1], z; unsigned c = 0;",
                 "PTX_IN(U32, c), PTX_IN(F32, x1), PTX_IN(F32, x0), PTX_OUT(F32, z)")
    got = nx.emulate(best.stub(site), {"v_x1": X[:, 1], "v_x0": X[:, 0], "v_c": np.uint32(0)},
                     ["v_z"])["v_z"]
    np.testing.assert_array_equal(got, best.predict(X))


@pytest.mark.parametrize("decl, args, match", [
    ("double x0 = a[i], x1 = a[i+1], z;", "PTX_IN(F64, x0), PTX_IN(F64, x1), PTX_OUT(F64, z)",
     r"x0: f64, x1: f64"),
    ("float x0 = a[i], x1 = a[i+1], z, w;",
     "PTX_IN(F32, x0), PTX_IN(F32, x1), PTX_OUT(F32, z), PTX_OUT(F32, w)",
     r"exactly one out/mod variable of type f32; it has z: f32, w: f32"),
    ("float u = a[i], x1 = a[i+1], z;", "PTX_IN(F32, u), PTX_IN(F32, x1), PTX_OUT(F32, z)",
     r"x0 \(missing\)"),
    ("float x0 = a[i], x1 = a[i+1]; double z;",
     "PTX_IN(F32, x0), PTX_IN(F32, x1), PTX_OUT(F64, z)", r"it has z: f64"),
])
def test_a_stub_at_a_site_that_does_not_fit_is_a_search_error(best, decl, args, match):
    site = _site(decl, args)
    with pytest.raises(SearchError, match=match) as e:
        best.stub(site)
    assert "Candidate.stub: site 'g'" in str(e.value)


def test_a_stub_at_a_name_not_a_site_is_a_search_error(best):
    with pytest.raises(SearchError, match="give a numptx Site"):
        best.stub("g")


def test_evolve_rejects_a_site_whose_output_type_differs_from_its_inputs():
    src = r'''
    extern "C" __global__ void fit(double* out, const float* X, int n) {
        unsigned cand = blockIdx.y; int i = threadIdx.x;
        if (i < n) { float t = X[i]; double p;
            PTX_INJECT("f", PTX_IN(U32, cand), PTX_IN(F32, t), PTX_OUT(F64, p)); out[i] = p; }
    }'''
    tmpl = nx.CudaTemplate(src, entry="fit")
    with pytest.raises(SearchError, match=r"evolve: site 'f' .* type f32; it has p: f64"):
        search.evolve(tmpl, "f", lambda packs: [], population=8, generations=1, seed=0)


# ---- 4: the dtype follows X -------------------------------------------------------------------
def test_the_dtype_follows_x_and_y_is_cast_to_it():
    X, _ = _data()
    y64 = np.exp(X[:, 0].astype(np.float64))
    r = search.regress(X, y64, ["add", "exp"], population=20, generations=1, seed=0,
                       device="cpu")
    assert r.genes.dtype == "f32" and r._search.evaluator.y.dtype == np.float32
    with pytest.raises(SearchError, match=r"no f64 form.*X is float64"):
        search.regress(X.astype(np.float64), y64, ["add", "exp"], population=20,
                       generations=1, device="cpu")
    r = search.regress(X.astype(np.float64), y64, ["add", "exp"], dtype="f32", population=20,
                       generations=1, seed=0, device="cpu")
    assert r.genes.dtype == "f32"
    r = search.regress(X, y64, ["add"], dtype="f64", population=20, generations=1, seed=0,
                       device="cpu")
    assert r.genes.dtype == "f64" and r._search.evaluator.X.dtype == np.float64


@pytest.mark.parametrize("what", ["X", "y"])
def test_data_that_overflows_f32_is_a_search_error_without_a_warning(what):
    X, y = _data()
    X, y = X.astype(np.float64), y.astype(np.float64)
    if what == "X":
        X = X * 1e300
    else:
        y = y * 1e300
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # no RuntimeWarning from the cast
        with pytest.raises(SearchError, match=rf"{what} holds \d+ value.* overflow f32"):
            search.regress(X, y, dtype="f32", population=20, generations=1, device="cpu")
        if what == "y":       # float32 X: y follows it
            with pytest.raises(SearchError, match="y holds .* overflow f32"):
                search.regress(X.astype(np.float32), y, population=20, generations=1,
                               device="cpu")


# ---- 5: restarts with negative losses ---------------------------------------------------------
# the evolve() kernel of test_search_loop: one f32 input t, output p, candidate cand


@pytest.mark.parametrize("value", [-100.0, 0.0, 100.0])
def test_restart_fires_on_a_stalled_run_of_any_sign(value):
    tmpl = nx.CudaTemplate(_EVOLVE_SRC, entry="fit")
    r = search.evolve(tmpl, "f", lambda packs: [value] * sum(len(p) for p in packs),
                      population=8, generations=6, seed=0, restart=2)
    assert r._search.restarts == 2


def test_improvement_is_relative_to_the_magnitude():
    from numptx.search.loop import _improved
    assert _improved(-101.5, -100.0) and not _improved(-100.5, -100.0)
    assert _improved(98.0, 100.0) and not _improved(99.5, 100.0)
    assert _improved(-1e-30, 0.0) and not _improved(0.0, 0.0)
    assert _improved(5.0, math.inf) and not _improved(math.inf, math.inf)
    assert not _improved(math.nan, 1.0)


# ---- 7: signed zeros --------------------------------------------------------------------------
def test_random_and_perturbed_constants_are_never_negative_zero():
    g = Genes(OPS, 1, constants=())
    rng = np.random.default_rng(0)
    vals = [g.random_constant(rng) for _ in range(20000)]
    assert 0.0 in vals                                      # zeros are drawn ...
    assert not any(v == 0 and math.copysign(1, v) < 0 for v in vals)     # ... never -0.0
    prog = [sp.input("x0"), g.const(0.0), *g.op_words("mul")]
    for _ in range(300):
        for v in O.constants_of(O.perturb_constants(prog, g, rng, scale=3.0)):
            assert not (v == 0 and math.copysign(1, v) < 0)


@pytest.mark.parametrize("words", [
    ["one", "x0", "nz", "mul", "div"],          # 1/(x0*-0.0)
    ["one", "x0", "nz", "sub", "div"],          # 1/(x0 - -0.0) = 1/(x0 + 0)
    ["one", "x0", "pz", "add", "div"],          # 1/(x0 + 0): -0.0 + 0.0 is +0.0
    ["one", "x0", "nz", "add", "div"],          # 1/(x0 + -0.0) = 1/x0
])
def test_formulas_keep_the_sign_of_zero(words):
    g = Genes(["add", "sub", "mul", "div"], 1)
    named = {"one": g.const(1.0), "nz": g.const(-0.0), "pz": g.const(0.0), "x0": sp.input("x0")}
    prog = [w for n in words for w in ([named[n]] if n in named else g.op_words(n))]
    X = np.array([[0.0], [-0.0], [2.0], [-3.0]], np.float32)
    emu = nx.emulate(sp.compile(prog, g.inputs, g.outputs), {"x0": X[:, 0]}, {"y": "f32"})["y"]
    text = formula(prog, g)
    got = evaluate(text, X, g)
    np.testing.assert_array_equal(got, emu)
    assert np.array_equal(np.signbit(got), np.signbit(emu))        # infinities' signs too


# ---- 8: checkpoints ---------------------------------------------------------------------------
def _run(**kw):
    X, y = _data()
    return search.regress(X, y, OPS, population=20, generations=2, seed=0, device="cpu", **kw)


@pytest.mark.parametrize("edit, match", [
    (lambda s: s.update(kind="foo"), r"field kind='foo'"),
    (lambda s: s["config"].update(population=-3), r"field config: population=-3"),
    (lambda s: s["config"].update(tournament=0), r"field config: tournament=0"),
    (lambda s: s["config"].update(generations=1.5), r"field config: generations=1.5"),
    (lambda s: s["config"].update(init_length=[5, 2]), r"field config: init_length="),
    (lambda s: s["config"].update(crossover=2.0), r"field config: crossover=2.0"),
    (lambda s: s.update(population=[]), r"field population: holds 0 candidates"),
    (lambda s: s["cache"].update(keys="AAAA"), r"field cache"),
])
def test_a_checkpoint_with_bad_settings_names_the_path_and_field(tmp_path, edit, match):
    path = tmp_path / "run.nxck"
    _run().save(path)
    state = ck.read(path)
    edit(state)
    ck.write(path, state)
    with pytest.raises(CheckpointError, match=match) as e:
        search.resume(path, generations=1, device="cpu")
    assert str(path) in str(e.value) and e.value.path == str(path)


def test_saving_into_a_missing_folder_or_onto_a_folder_is_a_checkpoint_error(tmp_path):
    r = _run()
    with pytest.raises(CheckpointError, match="does not exist") as e:
        r.save(tmp_path / "nope" / "run.nxck")
    assert e.value.path == str(tmp_path / "nope" / "run.nxck")
    with pytest.raises(CheckpointError, match="is a folder"):
        r.save(tmp_path)
    assert os.listdir(tmp_path) == []                       # no temporary left behind


def test_a_checkpoint_gets_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        _run().save(tmp_path / "a.nxck")
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "a.nxck").st_mode & 0o777 == 0o640
    _run().save(tmp_path / "b.nxck")
    assert os.stat(tmp_path / "b.nxck").st_mode & 0o777 == 0o666 & ~old


def test_the_checkpoint_carries_the_score_cache_and_fits(tmp_path):
    r = _run(fit_top=4)
    r.save(tmp_path / "a.nxck")
    s = search.resume(tmp_path / "a.nxck", generations=0)._search
    assert s.cache == r._search.cache
    assert {k: (sp.dumps(p), v) for k, (p, v) in s.fits.items()} == \
        {k: (sp.dumps(p), v) for k, (p, v) in r._search.fits.items()}


# ---- 9 and minor: messages, seeds, generations=0 -----------------------------------------------
@pytest.mark.parametrize("call, kw, match", [
    ("map_elites", dict(batch=1), r"^batch=1"),
    ("regress", dict(init_length=(5, 2)), r"init_length=\(5, 2\).*low <= high"),
    ("regress", dict(executor=5), r"executor=5 is not a concurrent.futures.Executor"),
    ("regress", dict(per_module=0), r"per_module=0"),
    ("regress", dict(per_module=-5), r"per_module=-5"),
    ("regress", dict(dtype="f16"), r"dtype='f16'"),
    ("map_elites", dict(descriptors=[("d", lambda p, g: "a", 0, 1, 4)]),
     r"descriptor 'd' returned 'a' \(str\)"),
])
def test_bad_arguments_are_search_errors_naming_them(call, kw, match):
    X, y = _data()
    kw = {"generations": 1, "device": "cpu", **kw}
    kw.setdefault("batch" if call == "map_elites" else "population", 20)
    with pytest.raises(SearchError, match=match):
        getattr(search, call)(X, y, **kw)


def test_evolve_checks_executor_and_per_module():
    tmpl = nx.CudaTemplate(_EVOLVE_SRC, entry="fit")
    with pytest.raises(SearchError, match="executor=5"):
        search.evolve(tmpl, "f", lambda p: [], executor=5, population=8, generations=1)
    with pytest.raises(SearchError, match="per_module=0"):
        search.evolve(tmpl, "f", lambda p: [], per_module=0, population=8, generations=1)


def test_zero_generations_give_no_best_and_the_seed_is_reported():
    r = _run()
    assert r.seed == 0
    X, y = _data()
    r = search.regress(X, y, OPS, population=20, generations=0, device="cpu")
    assert r.best is None and r.history == [] and isinstance(r.seed, int)
    again = search.regress(X, y, OPS, population=20, generations=2, device="cpu", seed=r.seed)
    same = search.regress(X, y, OPS, population=20, generations=2, device="cpu", seed=r.seed)
    assert [g[:-1] for g in again.history] == [g[:-1] for g in same.history]
