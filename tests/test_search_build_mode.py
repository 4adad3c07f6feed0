"""The search's build modes and layouts (issue 28, items 3 and 4, the search's side): the
compiled path's GPU modules built at ``build="fast"`` (-Ofc=max) for scoring, in
``layout="kernels"`` above 128 candidates a module, and what a run returns re-scored by the
full build. Modules are built with the real NVRTC and nvJitLink (no GPU needed); the GPU
tests (marked ``gpu``) launch them."""
from __future__ import annotations

import numpy as np
import pytest

import numptx as nx
from numptx import search
from numptx import stack_ptx as sp
from numptx.jit.populations.pack_kernels import FAST_LINK_OPTIONS, PER_KERNEL
from numptx.jit.compile.sass import sass_instructions
from numptx.search import checkpoint as ck
from numptx.search import operators as O
from numptx.search.checkpoint import CheckpointError
from numptx.search.config import AUTO_BUILD
from numptx.search.evaluate import Evaluator, check_build, layout_for, resolve_build
from numptx.search.genes import Genes, SearchError
from numptx.search.pipeline import PackPipeline, pack_chunks


def _data(n: int = 48):
    rng = np.random.default_rng(3)
    X = rng.uniform(0.5, 2.0, (n, 2)).astype(np.float32)
    return X, (X[:, 0] * 2 + X[:, 1]).astype(np.float32)


def _programs(n: int, seed: int = 5) -> list:
    g, rng = Genes(["add", "sub", "mul", "div"], 2), np.random.default_rng(seed)
    return [O.random_program(g, rng, (2, 10)) for _ in range(n)]


def _cand_program() -> list:
    """p = x0 + float(cand): its loss tells which cand the candidate read."""
    return [sp.input("cand"), sp.instr("cvt.rn.f32.u32"), sp.input("x0"), sp.instr("add.rn.f32")]


# ---- the option ---------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["O3", "slow", None, 1, True])
def test_a_bad_build_is_refused_naming_it(bad):
    X, y = _data()
    with pytest.raises(SearchError, match=r"regress: build=.*'auto'.*'fast'.*'full'"):
        search.regress(X, y, ["add"], population=4, generations=1, device="cpu", build=bad)
    with pytest.raises(SearchError, match="map_elites: build="):
        search.map_elites(X, y, ["add"], batch=4, generations=1, device="cpu", build=bad)
    with pytest.raises(SearchError, match="build="):
        check_build(bad, "x")


def test_auto_is_the_measured_build_of_the_device():
    # full on both today: -Ofc=max did not pay on the search's modules (AUTO_BUILD's note)
    assert AUTO_BUILD == {"cpu": "full", "gpu": "full"}
    assert [resolve_build("auto", d) for d in ("cpu", "gpu")] == ["full", "full"]
    assert [resolve_build(b, d) for b in ("fast", "full") for d in ("cpu", "gpu")] == \
        ["fast", "fast", "full", "full"]
    X, y = _data()
    assert Evaluator(X, y, device="cpu").scoring_build == "full"
    assert Evaluator(X, y, device="cpu", build="fast").scoring_build == "fast"


def test_modules_above_128_candidates_are_kernels_of_128():
    assert PER_KERNEL == 128
    assert layout_for(128) == "function" and layout_for(129) == "kernels"
    assert layout_for(16) == "function" and layout_for(256) == "kernels"


# ---- the modules the GPU path launches, built here -----------------------------------------
def test_the_fast_build_assembles_the_scoring_modules_with_ofc_max():
    X, y = _data()
    progs = _programs(40)
    ev = Evaluator(X, y, device="cpu", build="fast", per_module=40)
    fast = ev.packs(progs)
    full = ev.packs(progs, build="full")
    assert len(fast) == len(full) == 1
    f, o = fast[0], full[0]
    assert f.kernels == o.kernels and len(f.kernels) == 1         # 40: one function
    assert f.key != o.key and f.cubin != o.cubin
    # exactly what nvJitLink makes of the module's text at -Ofc=max
    assert f.cubin == nx.ptx_to_cubin(f.ptx, ev.template.arch, options=list(FAST_LINK_OPTIONS))
    assert len(sass_instructions(f.cubin, f.entry)) > len(sass_instructions(o.cubin, o.entry))


def test_the_scoring_modules_above_128_are_kernels_of_128():
    X, y = _data()
    progs = _programs(300)
    ev = Evaluator(X, y, device="cpu", build="fast", per_module=200)
    packs = ev.packs(progs)
    assert [(p.offset, len(p)) for p in packs] == [(0, 200), (200, 100)]
    assert [(k.start, k.stop) for k in packs[0].kernels] == [(0, 128), (128, 200)]
    assert [(k.start, k.stop) for k in packs[1].kernels] == [(0, 100)]
    assert packs[0].kernels[1].entry.endswith("__nx_k1")
    assert all(not p.errors for p in packs)
    # kernel 1 of the first module runs candidates 128..199 at -Ofc=max: more SASS than the
    # full build of the same kernel
    full = ev.packs(progs, build="full")
    e = packs[0].kernels[1].entry
    assert len(sass_instructions(packs[0].cubin, e)) > len(sass_instructions(full[0].cubin, e))


def test_the_pipeline_builds_in_the_layout_and_build_it_is_given():
    X, y = _data()
    ev = Evaluator(X, y, device="cpu", build="fast", per_module=150)
    stubs = ev.stubs(_programs(300))
    t = ev._packing_template()
    chunks = [stubs[:70], stubs[70:220], stubs[220:]]
    got = pack_chunks(t, "f", chunks, select="cand", per_module=150, max_workers=1,
                      layout="kernels", build="fast")
    one = t.pack_many("f", stubs, select="cand", per_module=150, layout="kernels",
                      build="fast", max_workers=1)
    assert [p.key for p in got] == [p.key for p in one]
    assert [p.cubin for p in got] == [p.cubin for p in one]
    assert [len(p.kernels) for p in got] == [2, 2]
    plain = pack_chunks(t, "f", chunks, select="cand", per_module=150, max_workers=1)
    assert plain[0].cubin != got[0].cubin and len(plain[0].kernels) == 1


@pytest.mark.parametrize("kw, msg", [({"build": "O3"}, "build='O3'"),
                                     ({"layout": "many"}, "layout='many'")])
def test_a_pipeline_refuses_a_bad_layout_or_build_before_any_module(kw, msg):
    X, y = _data()
    ev = Evaluator(X, y, device="cpu")
    with pytest.raises(nx.NumptxError, match=msg):
        PackPipeline(ev._packing_template(), "f", select="cand", **kw)


def test_cand_reads_the_index_in_its_kernel_on_the_cpu_as_on_the_gpu():
    """Above 128 candidates a module the search's modules are kernels of 128: the emulator
    gives cand the value the kernels layout gives it (the index in the candidate's kernel),
    with or without an executor spreading the emulation."""
    X, y = _data()
    progs = _programs(170) + [_cand_program()] + _programs(129, seed=6)   # cand program: 170

    def mse_at(cand: int) -> float:
        pred = (X[:, 0] + np.float32(cand)).astype(np.float64)
        return float(np.mean((pred - y) ** 2))
    ev = Evaluator(X, y, device="cpu", evaluate="compile", per_module=200)
    assert ev.score(progs)[170] == pytest.approx(mse_at(170 % 128), rel=1e-6)    # kernel 1: 42
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(2) as pool:
        spread = Evaluator(X, y, device="cpu", evaluate="compile", per_module=200,
                           executor=pool)
        np.testing.assert_array_equal(spread.score(progs), ev.score(progs))
    # at 100 a module: one function a module, cand is the index in the module (70)
    small = Evaluator(X, y, device="cpu", evaluate="compile", per_module=100).score(progs)
    assert small[170] == pytest.approx(mse_at(70), rel=1e-6)


def test_cand_in_modules_of_the_executors_chunks():
    """The emulation spread over an executor cuts the batch at module boundaries: a
    candidate's cand is its index in its GPU module, not in a chunk of 128."""
    X, y = _data()
    progs = _programs(100) + [_cand_program()] + _programs(199, seed=7)    # cand program: 100
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(2) as pool:
        ev = Evaluator(X, y, device="cpu", evaluate="compile", per_module=50, executor=pool)
        got = ev.score(progs)[100]
    pred = (X[:, 0] + np.float32(100 % 50)).astype(np.float64)          # module 2, index 0
    assert got == pytest.approx(float(np.mean((pred - y) ** 2)), rel=1e-6)


# ---- what a run returns: re-scored by the full build ----------------------------------------
def test_a_fast_run_returns_programs_re_scored_by_the_full_build():
    X, y = _data()
    opts = dict(population=32, generations=2, seed=1, device="cpu", evaluate="compile",
                fit_top=0, semantic_dedup=0)      # no probe: only the build re-scores
    r = search.regress(X, y, ["add", "mul"], build="fast", **opts)
    rs = r.rescored
    assert rs is not None and rs.what == ("best",)
    assert (rs.build, rs.scored_by) == ("full", "fast")
    assert rs.differing == 0 and rs.compiled == rs.interpreted    # the CPU emulates both
    # a full run keeps today's result: nothing to re-score
    full = search.regress(X, y, ["add", "mul"], build="full", **opts)
    assert full.rescored is None
    assert [c.loss for c in full.population] == [c.loss for c in r.population]
    assert r.best.loss == full.best.loss


def test_map_elites_elites_are_re_scored_by_the_full_build():
    X, y = _data()
    r = search.map_elites(X, y, ["add", "mul"], batch=24, generations=2, seed=2,
                          device="cpu", evaluate="compile", build="fast", fit_top=0,
                          semantic_dedup=0)
    rs = r.rescored
    assert rs is not None and rs.scored_by == "fast" and rs.build == "full"
    assert rs.what == ("best",) + tuple(f"archive[{c}]" for c in r.archive)
    assert rs.differing == 0


def test_an_interpreted_run_is_re_scored_by_the_full_build():
    X, y = _data()
    r = search.regress(X, y, ["add", "mul"], population=16, generations=1, seed=0,
                       device="cpu", evaluate="interpret", build="fast", fit_top=0)
    assert r.rescored is not None and r.rescored.build == "full"


# ---- evolve: the user's fitness scores fast packs; the best re-scored at the full build ----
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


def _evolve_fitness(tmpl, seen: list):
    """A CPU-side fitness: each pack's options recorded, each stub run by the emulator."""
    site = tmpl.sites["f"]
    t = np.linspace(-1, 1, 16, dtype=np.float32)
    target = t * t - t

    def fitness(packs):
        scores = []
        for p in packs:
            assert p.cubin[:4] == b"\x7fELF"                  # built for real
            seen.append((len(p), p.variant.target.link_options
                         if hasattr(p.variant, "target") else tuple(tmpl.link_options)))
            for stub in p.candidates:
                out = nx.emulate(stub, {site["t"].reg: t, site["cand"].reg: np.uint32(0)},
                                 [site["p"].reg])[site["p"].reg]
                scores.append(float(np.mean((out - target) ** 2)))
        return scores
    return fitness


def test_evolve_fast_packs_for_fitness_and_the_best_scored_again_at_the_full_build(tmp_path):
    tmpl = nx.CudaTemplate(_EVOLVE_SRC, entry="fit")
    seen: list = []
    kw = dict(ops=["add", "mul", "sub"], population=16, generations=2, seed=0)
    r = search.evolve(tmpl, "f", _evolve_fitness(tmpl, seen), build="fast", **kw)
    *run, last = seen
    assert run and all(opts == FAST_LINK_OPTIONS for _, opts in run)
    assert last == (1, tuple(tmpl.link_options))          # the best alone, at the full build
    rs = r.rescored
    assert rs is not None and rs.what == ("best",) and (rs.scored_by, rs.build) == ("fast", "full")
    assert rs.differing == 0 and r.best.loss == rs.compiled[0]
    # auto: the full build throughout, no second scoring
    seen.clear()
    auto = search.evolve(tmpl, "f", _evolve_fitness(tmpl, seen), **kw)
    assert auto.rescored is None and all(o == tuple(tmpl.link_options) for _, o in seen)
    assert auto.best.loss == r.best.loss
    # a checkpoint keeps it; one written before the option resumes at the full build
    r.save(tmp_path / "e.nxck")
    state = ck.read(tmp_path / "e.nxck")
    assert state["evolve"]["build"] == "fast"
    got = search.resume(tmp_path / "e.nxck", generations=1, template=tmpl,
                        fitness=_evolve_fitness(tmpl, []))
    assert got.rescored is not None
    old = dict(state, evolve={k: v for k, v in state["evolve"].items() if k != "build"})
    ck.write(tmp_path / "old.nxck", old)
    got = search.resume(tmp_path / "old.nxck", generations=1, template=tmpl,
                        fitness=_evolve_fitness(tmpl, []))
    assert got.rescored is None
    state["evolve"]["build"] = "O3"
    ck.write(tmp_path / "bad.nxck", state)
    with pytest.raises(CheckpointError, match="field evolve.build: "):
        search.resume(tmp_path / "bad.nxck", generations=1, template=tmpl,
                      fitness=_evolve_fitness(tmpl, []))


def test_evolve_refuses_a_bad_build_and_a_fast_build_of_a_numba_kernel():
    tmpl = nx.CudaTemplate(_EVOLVE_SRC, entry="fit")
    with pytest.raises(SearchError, match=r"evolve: build='O3'"):
        search.evolve(tmpl, "f", lambda packs: [], build="O3", population=4, generations=1)
    cuda = pytest.importorskip("numba").cuda

    @nx.kernel
    def k(out, X, ncand):
        i = cuda.grid(1)
        if i < X.shape[0]:
            for c in range(ncand):
                out[c, i] = nx.site("f", cand=np.uint32(c), x=X[i], out={"y": nx.f32})
    t = k.template(np.zeros((2, 4), np.float32), np.zeros(4, np.float32), 2)
    with pytest.raises(SearchError, match=r"evolve: build='fast': .*numba.*build='full'"):
        search.evolve(t, "f", lambda packs: [], build="fast", population=4, generations=1)


# ---- checkpoints ---------------------------------------------------------------------------
def test_a_checkpoint_keeps_the_build_and_an_old_one_resumes_at_the_full_build(tmp_path):
    X, y = _data()
    kw = dict(population=16, seed=1, device="cpu", evaluate="compile", fit_top=0,
              semantic_dedup=0)
    r = search.regress(X, y, ["add", "mul"], generations=1, build="fast", **kw)
    r.save(tmp_path / "r.nxck")
    state = ck.read(tmp_path / "r.nxck")
    assert state["data"]["build"] == "fast"
    got = search.resume(tmp_path / "r.nxck", generations=1, device="cpu")
    assert got.rescored is not None and got.rescored.scored_by == "fast"
    # written before the option: resumed as it was scored, at the full build (no re-score)
    old = dict(state, data={k: v for k, v in state["data"].items() if k != "build"})
    ck.write(tmp_path / "old.nxck", old)
    got = search.resume(tmp_path / "old.nxck", generations=1, device="cpu")
    assert got.rescored is None
    got.save(tmp_path / "again.nxck")
    assert ck.read(tmp_path / "again.nxck")["data"]["build"] == "full"
    for bad in ("O3", 3, None):
        state["data"]["build"] = bad
        ck.write(tmp_path / "bad.nxck", state)
        with pytest.raises(CheckpointError, match=r"field data.build: "):
            search.resume(tmp_path / "bad.nxck", generations=1, device="cpu")


# ---- GPU -------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_fast_and_full_builds_score_alike_on_the_gpu():
    # 32 samples: one warp a candidate, so the sums are exact to compare
    X, y = _data(n=32)
    progs = _programs(300) + [_cand_program()]
    fast = Evaluator(X, y, device="gpu", evaluate="compile", per_module=200, build="fast")
    assert fast.scoring_build == "fast"
    full = Evaluator(X, y, device="gpu", evaluate="compile", per_module=200, build="full")
    cpu = Evaluator(X, y, device="cpu", evaluate="compile", per_module=200)
    np.testing.assert_allclose(fast.score(progs), full.score(progs), rtol=1e-6)
    np.testing.assert_allclose(full.score(progs), cpu.score(progs), rtol=1e-5)
    chunks = [progs[:90], progs[90:]]
    np.testing.assert_array_equal(fast.score_chunks(iter(chunks), len(progs)),
                                  fast.score(progs))
    r = search.regress(X, y, ["add", "mul"], population=256, generations=2, seed=0,
                       device="gpu", evaluate="compile", fit_top=0, build="fast")
    assert r.rescored is not None and r.rescored.scored_by == "fast"


def test_evolve_of_a_kernel_itself_is_a_search_error_naming_its_template():
    cuda = pytest.importorskip("numba").cuda

    @nx.kernel
    def k(out, X, ncand):
        i = cuda.grid(1)
        if i < X.shape[0]:
            for c in range(ncand):
                out[c, i] = nx.site("f", cand=np.uint32(c), x=X[i], out={"y": nx.f32})
    with pytest.raises(SearchError, match=r"nx.kernel.*k.template\(\*args\)"):
        search.evolve(k, "f", lambda packs: [], population=4, generations=1)
    with pytest.raises(SearchError, match=r"has no sites"):
        search.evolve(object(), "f", lambda packs: [], population=4, generations=1)


# ---- review (issue 28): what a fast run returns ----------------------------------------------
def test_evolve_names_the_full_rebuild_when_fitness_returns_the_wrong_count_there():
    """A fitness that scores the run's packs but returns the wrong count for the best packed
    alone at the full build: the SearchError says it was that re-scoring (the run's calls all
    returned the right count), and how to avoid it."""
    tmpl = nx.CudaTemplate(_EVOLVE_SRC, entry="fit")
    inner = _evolve_fitness(tmpl, [])

    def fitness(packs):
        got = inner(packs)
        return got + [0.0] if [len(p) for p in packs] == [1] else got
    with pytest.raises(SearchError, match=r"evolve: the best re-scored alone at the full build "
                                          r"\(build='fast'\): fitness= returned 2 scores for 1 "
                                          r"candidate.*build='full'"):
        search.evolve(tmpl, "f", fitness, build="fast", ops=["add", "mul"], population=16,
                      generations=1, seed=0)


def test_a_fast_run_under_linear_scaling_returns_the_full_builds_losses(monkeypatch):
    """Under linear scaling the returned programs carry the scaling written in; their losses
    are the full build's too (were the screening build's: the written forms were scored by
    the plain evaluator at the run's build)."""
    import importlib
    E = importlib.import_module("numptx.search.evaluate")
    X, y = _data()
    seen: list = []
    real = E.Evaluator._compiled_kernel_losses

    def spy(self, programs, build=None):
        seen.append((self.linear_scaling, self.scoring_build if build is None else build))
        return real(self, programs, build)
    monkeypatch.setattr(E.Evaluator, "_compiled_kernel_losses", spy)
    opts = dict(population=16, generations=1, seed=1, device="cpu", evaluate="compile",
                fit_top=0, semantic_dedup=0, linear_scaling=True)
    r = search.regress(X, y, ["add", "mul"], build="fast", **opts)
    assert r.rescored is not None and r.rescored.scored_by == "fast"
    assert (False, "full") in seen             # the written best, scored as plain, at full
    full = search.regress(X, y, ["add", "mul"], build="full", **opts)
    assert r.best.program == full.best.program and r.best.loss == full.best.loss


def test_resume_takes_build_and_a_fast_evolve_checkpoint_with_a_numba_kernel_says_so(tmp_path):
    """A fast evolve checkpoint resumed with a numba kernel (no fast build): a SearchError
    naming the checkpoint and ``build='full'``, which resume takes (was a CheckpointError
    blaming the file, advising an argument resume did not have); ``build=`` overrides the
    checkpoint's for regress runs too, and a bad one is refused naming it."""
    cuda = pytest.importorskip("numba").cuda
    tmpl = nx.CudaTemplate(_EVOLVE_SRC, entry="fit")
    kw = dict(ops=["add", "mul"], population=16, generations=1, seed=0)
    search.evolve(tmpl, "f", _evolve_fitness(tmpl, []), build="fast", **kw).save(
        tmp_path / "e.nxck")

    @nx.kernel
    def k(out, X, ncand):
        i = cuda.grid(1)
        if i < X.shape[0]:
            for c in range(ncand):
                out[c, i] = nx.site("f", cand=np.uint32(c), t=X[i], out={"p": nx.f32})
    t = k.template(np.zeros((2, 4), np.float32), np.zeros(4, np.float32), 2)

    def fit(packs):
        return [0.0] * sum(len(p) for p in packs)
    with pytest.raises(SearchError, match=r"resume: build='fast': .*numba.*e\.nxck' is a "
                                          r"build='fast' run: pass build='full'"):
        search.resume(tmp_path / "e.nxck", generations=1, template=t, fitness=fit)
    with pytest.raises(SearchError, match=r"resume: build='fast': .*pass build='full'"):
        search.resume(tmp_path / "e.nxck", generations=1, template=t, fitness=fit,
                      build="fast")
    got = search.resume(tmp_path / "e.nxck", generations=1, template=t, fitness=fit,
                        build="full")
    assert got.rescored is None and got.generations == 2
    got = search.resume(tmp_path / "e.nxck", generations=1, template=tmpl,
                        fitness=_evolve_fitness(tmpl, []), build="full")
    assert got.rescored is None
    got.save(tmp_path / "full.nxck")
    assert ck.read(tmp_path / "full.nxck")["evolve"]["build"] == "full"
    X, y = _data()
    search.regress(X, y, ["add", "mul"], population=16, generations=1, seed=1, device="cpu",
                   evaluate="compile", fit_top=0, semantic_dedup=0).save(tmp_path / "r.nxck")
    got = search.resume(tmp_path / "r.nxck", generations=1, device="cpu", build="fast")
    assert got.rescored is not None and got.rescored.scored_by == "fast"
    for bad in ("O3", 1):
        with pytest.raises(SearchError, match=r"resume: build="):
            search.resume(tmp_path / "r.nxck", generations=1, device="cpu", build=bad)


@pytest.mark.parametrize("per", [1, 2, 127, 128, 129, 200, 256, 257])
def test_cand_on_the_cpu_is_the_selector_the_gpu_module_gives_at_every_size(per):
    """For every module size around the kernel size (1 .. 2 * 128 + 1) and a batch of two
    modules and a tapered last one: the cand the emulator gives each candidate (read from its
    loss) is the selector its GPU module runs it at (``kernel_of``), and in the module's real
    PTX each kernel's jump table holds exactly its span's candidates, in order (what the
    launch's PerKernel slices ``acc[offset + start:offset + stop]`` assume)."""
    import re
    from concurrent.futures import ThreadPoolExecutor
    from numptx.jit.populations.pack import pack
    from numptx.jit.populations.pack_kernels import MARK
    X, y = _data()
    n = max(2 * per + 1, 2 * PER_KERNEL + 1)
    progs = [_cand_program()] * n
    mse = {float(np.mean(((X[:, 0] + np.float32(c)).astype(np.float64) - y) ** 2)): c
           for c in range(min(per, PER_KERNEL))}
    ev = Evaluator(X, y, device="cpu", evaluate="compile", per_module=per)
    cpu = [mse[v] for v in ev.score(progs)]
    with ThreadPoolExecutor(2) as pool:
        spread = Evaluator(X, y, device="cpu", evaluate="compile", per_module=per,
                           executor=pool)
        assert [mse[v] for v in spread.score(progs)] == cpu
    stubs, gpu = ev.stubs(progs), []
    for i in range(0, n, per):
        p = pack(ev._packing_template(), "f", stubs[i:i + per], select="cand", offset=i,
                 layout=layout_for(per))
        gpu += [p.kernel_of(i + j)[1] for j in range(len(p))]
        ks = p.kernels
        assert [(k.start, k.stop) for k in ks] == \
            [(a, min(len(p), a + PER_KERNEL)) for a in range(0, len(p), PER_KERNEL)] \
            if len(p) > PER_KERNEL and per > PER_KERNEL else len(ks) == 1
        bodies = re.split(r"\.entry\s+", p.ptx)[1:]
        assert [b.split("(")[0].strip() for b in bodies] == [k.entry for k in ks]
        for k, body in zip(ks, bodies):
            marks = [int(m) for m in re.findall(re.escape(MARK) + r"(\d+)", body)]
            assert marks == list(range(k.start, k.stop))
    assert cpu == gpu
