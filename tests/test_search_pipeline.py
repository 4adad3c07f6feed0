"""The pipelined GPU path of the search loop (numptx.search.pipeline, Evaluator.score_chunks,
Search.evaluate_chunks): packs built chunk by chunk equal one ``pack_many`` call's (real NVRTC
and nvJitLink, no GPU needed); a generation made in chunks gives the children and losses of
one made at once; the GPU test (marked ``gpu``) checks pipelined scores against the one-batch
path."""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import numptx as nx
from numptx import search
from numptx import stack_ptx as sp
from numptx.jit.populations.pack import PackError
from numptx.search import operators as O
from numptx.search.evaluate import Evaluator
from numptx.search.genes import Genes, SearchError
from numptx.search.config import check_config
from numptx.search.loop import Search
from numptx.search.pipeline import PackPipeline, pack_chunks

SRC = r'''
extern "C" __global__ void fit(double* acc, const float* X, int n) {
    unsigned cand = blockIdx.y;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x0 = X[2 * i], x1 = X[2 * i + 1], p;
        PTX_INJECT("f", PTX_IN(U32, cand), PTX_IN(F32, x0), PTX_IN(F32, x1), PTX_OUT(F32, p));
        atomicAdd(acc + cand, (double)p);
    }
}'''
BAD_PTXAS = "bogus.f32 %v_p, %v_x0;"        # resolves for the site; ptxas refuses it


def _bad_program():
    """A program over inputs the site lacks: it fails to compile for it (never assembled)."""
    g = Genes(["add"], names=["a", "b"])
    return O.random_program(g, np.random.default_rng(0), (3, 4))


@pytest.fixture(scope="module")
def ptx():
    return nx.cuda_to_ptx(SRC, arch="sm_90")


def _template(ptx):
    # no cache: every pack is assembled for real (a hit would make equal cubins trivial)
    return nx.Template(ptx, entry="fit", arch="sm_90", cache=False)


def _stubs(tmpl, n, seed=0):
    g, rng = Genes(["add", "mul", "sin"], 2), np.random.default_rng(seed)
    progs = [O.random_program(g, rng, (2, 8)) for _ in range(n)]
    return list(sp.compile_many(progs, site=tmpl.sites["f"]))


def _same(one, two):
    assert [(p.offset, len(p)) for p in one] == [(p.offset, len(p)) for p in two]
    for a, b in zip(one, two):
        assert a.candidates == b.candidates
        assert a.empty == b.empty
        if not a.empty:
            assert a.cubin == b.cubin
        assert {k: str(e) for k, e in a.errors.items()} == \
            {k: str(e) for k, e in b.errors.items()}
        assert a.ok == b.ok


# ---- the pipeline against pack_many ------------------------------------------------------------
def test_pipelined_packs_equal_one_pack_many_call(ptx):
    t1, t2 = _template(ptx), _template(ptx)
    stubs = _stubs(t1, 45)
    stubs[9], stubs[30] = BAD_PTXAS, _bad_program()
    one = t1.pack_many("f", stubs, select="cand", per_module=16)
    chunks = [stubs[:3], stubs[3:33], [], stubs[33:]]        # chunks across module edges
    two = pack_chunks(t2, "f", chunks, select="cand", per_module=16)
    _same(one, two)
    errors = {k for p in two for k in p.errors}
    assert errors == {9, 30}
    assert two[0].errors[9].candidate == 9 and "bogus" in str(two[0].errors[9])
    assert two[1].errors[30].candidate == 30 and "no input named" in str(two[1].errors[30])


def test_a_module_none_of_whose_candidates_fit_is_empty_with_each_error(ptx):
    t1, t2 = _template(ptx), _template(ptx)
    stubs = _stubs(t1, 10)
    stubs[4:8] = [BAD_PTXAS, _bad_program(), BAD_PTXAS, BAD_PTXAS]
    one = t1.pack_many("f", stubs, select="cand", per_module=4)
    two = pack_chunks(t2, "f", [stubs[:5], stubs[5:]], select="cand", per_module=4)
    _same(one, two)
    assert two[1].empty and set(two[1].errors) == {4, 5, 6, 7}
    assert two[0].ok == [0, 1, 2, 3] and two[2].ok == [8, 9]
    # the evaluator's reduction: +inf exactly where a candidate failed
    X, y = _data(n=4)
    got = Evaluator(X, y, device="cpu").losses_of(np.zeros((10, 4)),
                                                  {k for p in two for k in p.errors})
    assert [k for k in range(10) if math.isinf(got[k])] == [4, 5, 6, 7]


@pytest.mark.parametrize("chunks", [[], [[]], [[], []]])
def test_no_stub_no_pack(ptx, chunks):
    assert pack_chunks(_template(ptx), "f", chunks, select="cand", per_module=8) == []


def test_a_chunk_larger_than_the_modules_and_the_population(ptx):
    t1, t2, t3 = _template(ptx), _template(ptx), _template(ptx)
    stubs = _stubs(t1, 13)
    one = t1.pack_many("f", stubs, select="cand", per_module=5)
    _same(one, pack_chunks(t2, "f", [stubs], select="cand", per_module=5))
    # a module larger than all the stubs: one short module, as pack_many makes
    big = pack_chunks(t3, "f", [stubs[:2], stubs[2:]], select="cand", per_module=100)
    assert [(p.offset, len(p)) for p in big] == [(0, 13)] and not big[0].errors


def test_ready_hands_out_packs_in_order_and_finish_the_rest(ptx):
    tmpl = _template(ptx)
    stubs = _stubs(tmpl, 20)
    got = []
    with ThreadPoolExecutor(2) as ex:
        pipe = PackPipeline(tmpl, "f", select="cand", per_module=3, executor=ex)
        with pipe:
            for i in range(0, 20, 7):
                pipe.add(stubs[i:i + 7])
                got.extend(pipe.ready())
            assert pipe.total == 20
            got.extend(pipe.finish())
        # the given executor is not shut down by close()
        assert ex.submit(lambda: 1).result() == 1
    assert [p.offset for p in got] == list(range(0, 20, 3))
    assert [c for p in got for c in p.candidates] == stubs
    with pytest.raises(PackError, match="closed"):
        pipe.add(stubs[:1])


def test_a_tapered_pipeline_cuts_small_modules_at_the_end(ptx):
    """Past taper_at the modules (and the last one, cut up) have taper_size candidates; the
    candidates, their order and each error's index are those of one pack_many call."""
    t1, t2 = _template(ptx), _template(ptx)
    stubs = _stubs(t1, 45)
    stubs[40] = BAD_PTXAS
    one = t1.pack_many("f", stubs, select="cand", per_module=16)
    with PackPipeline(t2, "f", select="cand", per_module=16, taper_at=20, taper_size=4) as pipe:
        for i in range(0, 45, 10):
            pipe.add(stubs[i:i + 10])
        two = list(pipe.finish())
    assert [(p.offset, len(p)) for p in two] == \
        [(0, 16), (16, 16), (32, 4), (36, 4), (40, 4), (44, 1)]
    assert [c for p in two for c in p.candidates] == [c for p in one for c in p.candidates]
    assert {k for p in two for k in p.errors} == {k for p in one for k in p.errors} == {40}
    assert two[0].cubin == one[0].cubin                  # the same module, the same code
    # tapering from the start, and a remainder cut up
    with PackPipeline(_template(ptx), "f", select="cand", per_module=16, taper_at=0,
                      taper_size=5) as pipe:
        pipe.add(stubs[:12])
        assert [(p.offset, len(p)) for p in pipe.finish()] == [(0, 5), (5, 5), (10, 2)]


@pytest.mark.parametrize("kw, msg", [({"taper_at": -1}, "taper_at"),
                                     ({"taper_at": 1.5}, "taper_at"),
                                     ({"taper_size": 0}, "taper_size")])
def test_bad_taper(ptx, kw, msg):
    with pytest.raises(PackError, match=msg):
        PackPipeline(_template(ptx), "f", select="cand", per_module=8, **kw)


def test_the_loop_expects_its_last_share_of_new_programs():
    s = _search()
    assert s._new_share is None
    s.run(2, None)
    assert 0 < s._new_share <= 1


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, 20000])
def test_bad_module_sizes(ptx, bad):
    with pytest.raises(PackError, match="per_module"):
        PackPipeline(_template(ptx), "f", select="cand", per_module=bad)


def test_one_stub_is_not_a_chunk(ptx):
    with PackPipeline(_template(ptx), "f", select="cand", per_module=4) as pipe:
        with pytest.raises(PackError, match="list of candidates"):
            pipe.add("mov.f32 %v_p, %v_x0;")


# ---- the search loop in chunks -------------------------------------------------------------------
def _data(n=24, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    return X, (X[:, 0] ** 2 + X[:, 0] * X[:, 1]).astype(np.float32)


def _search(**kw):
    X, y = _data()
    genes = Genes(["add", "sub", "mul"], 2)
    ev = Evaluator(X, y, device="cpu", **kw)
    return Search("regress", genes, check_config("regress", population=40), 3, evaluator=ev)


def test_duplicates_across_chunks_are_scored_once_and_reuse_the_score():
    s = _search()
    s._gen_evaluated = 0
    rng = np.random.default_rng(1)
    a, b, c = (O.random_program(s.genes, rng, (3, 6)) for _ in range(3))
    progs, losses = s.evaluate_chunks(iter([[a, b], [list(a), c], [], [b, a]]), 7)
    assert [len(p) for p in progs] == [len(p) for p in (a, b, a, c, b, a)]
    assert s.evaluated == 3 and s.evaluator.evaluated == 3
    assert losses[0] == losses[2] == losses[5] and losses[1] == losses[4]
    flat = _search()
    flat._gen_evaluated = 0
    assert np.array_equal(flat.evaluate_programs(progs), losses)
    # a later call scores nothing it has seen
    s.evaluate_chunks(iter([[c, a]]), 2)
    assert s.evaluated == 3


def test_children_in_chunks_are_the_children_made_at_once():
    s1, s2 = _search(), _search()
    rng = np.random.default_rng(2)
    pa = [O.random_program(s1.genes, rng, (2, 8)) for _ in range(23)]
    pb = [O.random_program(s1.genes, rng, (2, 8)) for _ in range(23)]
    once = s1.make_children(pa, pb)
    chunked = [c for ch in s2.child_chunks(pa, pb, 5) for c in ch]
    assert [sp.dumps(p) for p in once] == [sp.dumps(p) for p in chunked]
    assert s1.children_made == s2.children_made == 23
    assert s2.timings["generate"] > 0 and s1.timings["generate"] == 0


@pytest.mark.parametrize("per_module", [1, 7, 10_000])
def test_a_run_does_not_depend_on_the_chunks(per_module):
    X, y = _data()
    opts = dict(population=40, generations=3, seed=4, device="cpu", fit_top=2, fit_steps=2,
                fit_trials=2)
    ref = search.regress(X, y, ["add", "sub", "mul"], per_module=64, **opts)
    got = search.regress(X, y, ["add", "sub", "mul"], per_module=per_module, **opts)
    assert [g[:-1] for g in got.history] == [g[:-1] for g in ref.history]
    assert [c.loss for c in got.population] == [c.loss for c in ref.population]


def test_losses_of_marks_failed_and_non_finite_candidates():
    X, y = _data(n=4)
    ev = Evaluator(X, y, device="cpu")
    sums = np.array([[2.0, 0, 0, 0], [1.0, 0, 0, 0], [1.0, 0, 0, 1], [math.inf, 0, 0, 0]])
    got = ev.losses_of(sums, {1})
    assert got[0] == 0.5 and math.isinf(got[1]) and math.isinf(got[2]) and math.isinf(got[3])


def test_the_pipeline_option():
    X, y = _data()
    assert not Evaluator(X, y, device="cpu").pipelined        # the emulator: nothing to pack
    with pytest.raises(SearchError, match="pipeline"):
        search.regress(X, y, ["add"], population=4, generations=1, device="cpu",
                       pipeline="yes")


# ---- GPU ---------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_pipelined_scores_equal_the_one_batch_scores_on_the_gpu():
    # 32 samples: one warp a candidate, one atomic add, so the sums are exact to compare
    X, y = _data(n=32)
    ev = Evaluator(X, y, device="gpu", per_module=8)
    assert ev.pipelined
    g, rng = Genes(["add", "sub", "mul", "div", "sin"], 2), np.random.default_rng(5)
    progs = [O.random_program(g, rng, (2, 10)) for _ in range(50)]
    chunks = [progs[:3], progs[3:20], [], progs[20:]]
    np.testing.assert_array_equal(ev.score_chunks(iter(chunks), 50), ev.score(progs))
    # a whole run, pipelined or not, for one seed
    opts = dict(population=64, generations=3, seed=0, device="gpu", per_module=16, fit_top=2,
                fit_steps=2, fit_trials=2)
    a = search.regress(X, y, ["add", "sub", "mul"], pipeline=True, **opts)
    b = search.regress(X, y, ["add", "sub", "mul"], pipeline=False, **opts)
    assert [g[:-1] for g in a.history] == [g[:-1] for g in b.history]
    assert [c.loss for c in a.population] == [c.loss for c in b.population]
