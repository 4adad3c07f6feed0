"""The Pareto front of a search and model selection (issue 26, item 2: numptx.search.front) on
real components: real regress runs on the CPU (the batch interpreter, re-scored by the stub
emulator), the C core's compiler for the complexities, checkpoints written and resumed."""
from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from numptx import search
from numptx import stack_ptx as sp
from numptx.search import CheckpointError, SearchError
from numptx.search import checkpoint, front as fr
from numptx.search.evaluate import Evaluator
from numptx.search.genes import Genes
from numptx.search.results import Candidate
from numptx.search.simplify import complexities

OPS = ["add", "sub", "mul"]


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    return X, (X[:, 0] * X[:, 1] + X[:, 0]).astype(np.float32)


def _run(**kw):
    X, y = _data()
    opts = dict(population=60, generations=4, seed=5, device="cpu")
    opts.update(kw)
    return search.regress(X, y, OPS, **opts)


def _words(prog):
    return [(op.word, op.extra, op.name) for op in prog]


def _monotone(front):
    ks = [c.complexity for c in front]
    losses = [c.loss for c in front]
    assert ks == sorted(set(ks)), ks                       # strictly more complex
    assert all(b < a for a, b in zip(losses, losses[1:])), losses   # strictly lower loss
    assert all(math.isfinite(v) for v in losses)


# ---- the front a run returns -----------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(), dict(linear_scaling=False, loss="mae"),
                                dict(evaluate="compile", islands=1)])
def test_the_front_is_monotone_holds_the_best_and_its_losses_rescore(kw):
    X, y = _data()
    r = _run(**kw)
    assert r.front, "a run that scored programs has a front"
    _monotone(r.front)
    # the best candidate is on it, with the lowest loss
    assert r.front[-1].loss == r.best.loss
    assert any(_words(c.program) == _words(r.best.program) for c in r.front)
    # each entry's complexity is the simplified expression's, its loss a re-score of its
    # program by the compiled path (the stub emulator), with no scaling: what a user deploys
    progs = [c.program for c in r.front]
    assert [c.complexity for c in r.front] == complexities(progs, r.genes).tolist()
    ev = Evaluator(X, y, loss=kw.get("loss", "mse"), device="cpu", evaluate="compile")
    assert ev.score(progs).tolist() == [c.loss for c in r.front]


def test_the_front_spans_simple_and_accurate_programs():
    """Without linear scaling (whose written a + b*f adds nodes to the simple programs) the
    simplest programs stay on the front: a leaf of complexity 1 first (an input or a number),
    then programs of more nodes and lower losses down to the best."""
    r = _run(linear_scaling=False, generations=6, population=100)
    _monotone(r.front)
    assert len(r.front) >= 3
    assert r.front[0].complexity == 1
    assert r.front[-1].loss == r.best.loss < r.front[0].loss


def test_a_hidden_target_is_on_the_front_and_picked():
    """The hidden formula x0*x1 + x0 is recovered (loss 0; with input weights off, whose fitted
    1.0s would leave rounding in it), it is on the front, and each rule picks it: "accuracy" by
    its loss, "best" by its +inf score, "mdl" by the shortest length."""
    r = _run(generations=8, population=100, input_weights=False)
    exact = [c for c in r.front if c.loss == 0.0]
    assert exact, [(c.complexity, c.loss, c.formula) for c in r.front]
    X, y = _data()
    assert np.array_equal(search.evaluate(exact[0].formula, X, r.genes), y)
    assert r.model is exact[0] and r.model_selection == "best"
    for rule in ("best", "accuracy", "mdl"):
        assert r.select(rule) is exact[0]


def test_map_elites_keeps_a_front_too():
    X, y = _data()
    r = search.map_elites(X, y, OPS, batch=60, generations=3, seed=2, device="cpu")
    _monotone(r.front)
    assert r.front[-1].loss == r.best.loss
    assert r.model is fr.select(r.front, "best")
    r = search.map_elites(X, y, OPS, batch=60, generations=2, seed=2, device="cpu",
                          model_selection="accuracy")
    assert r.model is r.front[-1]
    with pytest.raises(SearchError, match="map_elites: model_selection='aic'"):
        search.map_elites(X, y, OPS, batch=60, generations=1, model_selection="aic")


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


def test_evolve_keeps_a_front_of_its_fitness_and_has_no_mdl():
    """evolve's front (packs built for real by NVRTC and nvJitLink, each stub run by the
    emulator in the fitness): monotone in the fitness, the best on it; "mdl" needs data."""
    import numptx as nx
    tmpl = nx.CudaTemplate(_EVOLVE_SRC, entry="fit")
    site = tmpl.sites["f"]
    t = np.linspace(-1, 1, 16, dtype=np.float32)

    def fitness(packs):
        out = []
        for p in packs:
            for stub in p.candidates:
                got = nx.emulate(stub, {site["t"].reg: t, site["cand"].reg: np.uint32(0)},
                                 [site["p"].reg])[site["p"].reg]
                out.append(float(np.mean((got - (t * t - t)) ** 2)))
        return out
    r = search.evolve(tmpl, "f", fitness, ops=["add", "mul", "sub"], population=16,
                      generations=3, seed=0)
    _monotone(r.front)
    assert r.front[-1].loss == r.best.loss and r.model is fr.select(r.front, "best")
    with pytest.raises(SearchError, match="'mdl'.*data"):
        r.select("mdl")


def test_results_pickle_with_their_front():
    r = _run(generations=2)
    got = pickle.loads(pickle.dumps(r.front))
    assert [_words(c.program) for c in got] == [_words(c.program) for c in r.front]
    assert [(c.loss, c.complexity) for c in got] == [(c.loss, c.complexity) for c in r.front]


# ---- the rules, on fronts built by hand ------------------------------------------------------
def _front(rows, genes=None):
    """Candidates of the given (complexity, loss), each with a program of its own."""
    genes = genes or Genes(OPS, 1)
    out = []
    for k, loss in rows:
        c = Candidate([sp.input("x0")], loss, genes)
        c.remember_complexity(k)
        out.append(c)
    return out


def test_accuracy_picks_the_lowest_loss():
    f = _front([(1, 10.0), (3, 4.0), (5, 0.5)])
    assert fr.select(f, "accuracy") is f[-1]


def test_best_is_pysrs_highest_score_within_1_5_times_the_lowest_loss():
    # scores: -log(1/10)/1 = 2.30 (the highest), -log(0.5/1)/2 = 0.35, -log(0.1/0.5)/2 = 0.80;
    # only the losses <= 1.5 * 0.1 count: the last entry, though entry 1 scores higher
    f = _front([(1, 10.0), (2, 1.0), (4, 0.5), (6, 0.1)])
    s = fr.scores(f)
    assert s[0] == 0.0 and s[1] == pytest.approx(math.log(10))
    assert s[2] == pytest.approx(math.log(2) / 2) and s[3] == pytest.approx(math.log(5) / 2)
    assert fr.select(f, "best") is f[3]
    # within the ratio the highest score wins, not the lowest loss: 0.12 and 0.1 both count,
    # and the step to 0.12 (log(0.5/0.12)/1 = 1.43) beats the one to 0.1 (log(1.2)/5 = 0.04)
    f = _front([(1, 10.0), (2, 0.5), (3, 0.12), (8, 0.1)])
    assert fr.select(f, "best") is f[2]
    # a loss of 0 scores +inf; a tie of scores goes to the simpler entry
    f = _front([(1, 1.0), (2, 0.0)])
    assert math.isinf(fr.scores(f)[1]) and fr.select(f, "best") is f[1]
    f = _front([(1, 1.0), (2, 0.5), (3, 0.25)])      # equal scores log 2, both within 1.5x?
    assert fr.select(f, "best") is f[2]               # only 0.25 <= 0.375: no tie to break
    f = _front([(1, 0.3), (2, 0.2)])                 # 0.3 <= 1.5 * 0.2: score 0 against 0.41
    assert fr.select(f, "best") is f[1]
    assert fr.select([], "best") is None
    assert fr.select(_front([(4, 2.0)]), "best").complexity == 4


def test_mdl_is_the_published_length_and_prefers_the_true_formula():
    """y = 2.5*x0 + noise: the description length of c*x0 matches eq. 7 of Bartlett et al.
    computed by hand, and it is shorter than that of a longer program that fits the noise a
    little better."""
    rng = np.random.default_rng(1)
    X = rng.uniform(1, 2, (200, 1))
    y = 2.5 * X[:, 0] + rng.normal(0, 0.01, 200)
    genes = Genes(["add", "mul"], 1, dtype="f64")
    ev = Evaluator(X, y, loss="mse", device="cpu")
    theta = float(np.dot(X[:, 0], y) / np.dot(X[:, 0], X[:, 0]))
    lin = [sp.const(theta, "f64"), sp.input("x0"), *genes.op_words("mul")]
    # a longer program: c*x0 + d*x0*x0 with a least-squares (c, d)
    A = np.stack([X[:, 0], X[:, 0] ** 2], 1)
    c, d = np.linalg.lstsq(A, y, rcond=None)[0]
    quad = [sp.const(float(c), "f64"), sp.input("x0"), *genes.op_words("mul"),
            sp.const(float(d), "f64"), sp.input("x0"), sp.dup("f64"), *genes.op_words("mul"),
            *genes.op_words("mul"), *genes.op_words("add")]
    cands = [Candidate(p, float(v), genes) for p, v in zip([lin, quad], ev.score([lin, quad]))]
    assert cands[1].loss < cands[0].loss and cands[1].complexity > cands[0].complexity
    got = fr.description_lengths(cands, ev)
    # by hand for c*x0: Gaussian nll with the profiled variance, k log q (k nodes, q symbols:
    # *, x0, a number), and the parameter's cost from its Fisher information sum(x0**2)/var
    r = theta * X[:, 0] - y
    var = np.mean(r * r)
    nll = 0.5 * len(y) * (math.log(2 * math.pi * var) + 1)
    info = float(np.sum(X[:, 0] ** 2)) / var
    k = cands[0].complexity
    want = nll + k * math.log(3) + math.log(theta) + 0.5 * math.log(info) - 0.5 * math.log(3)
    assert got[0] == pytest.approx(want, rel=1e-6)
    assert got[0] < got[1]
    f = fr.pareto(cands)
    assert fr.select(f, "mdl", fr.description_lengths(f, ev)) is f[0]
    assert fr.select(f, "accuracy") is f[1]


def test_symbols_counts_the_distinct_symbols_of_a_formula():
    assert fr.symbols("x0*x1 + sin(x0)*2.5") == 6          # * + sin x0 x1 and a number
    assert fr.symbols("x0") == 1
    assert fr.symbols("(_t0 := x0*x0) + _t0") == 3         # * + x0: a binding is no symbol


# ---- the front a run keeps -------------------------------------------------------------------
def test_the_kept_front_files_only_what_beats_every_simpler_entry():
    genes = Genes(OPS, 2)
    front = fr.Front(genes)
    x0, x1 = [sp.input("x0")], [sp.input("x1")]
    mul = [*x0, *x1, *genes.op_words("mul")]                         # 3 nodes
    add = [*x0, *x1, *genes.op_words("mul"), *x0, *genes.op_words("add")]   # x0 once: 4
    assert complexities([x0, mul, add], genes).tolist() == [1, 3, 4]
    front.offer([Candidate(mul, 2.0, genes), Candidate(x0, 3.0, genes)])
    assert [(c.complexity, c.loss) for c in front.entries] == [(1, 3.0), (3, 2.0)]
    front.offer([Candidate(add, 2.5, genes)])                        # dominated by mul
    front.offer([Candidate(x1, 1.0, genes)])                         # dominates everything
    assert [(c.complexity, c.loss) for c in front.entries] == [(1, 1.0)]
    front.offer([Candidate(add, 0.0, genes), Candidate(mul, math.inf, genes)])
    assert [(c.complexity, c.loss) for c in front.entries] == [(1, 1.0), (4, 0.0)]
    # entries are copies: the run may change its own candidates in place
    assert all(c.program is not add for c in front.entries)


def test_a_bounded_front_measures_the_lowest_losses_and_the_shortest_programs():
    genes = Genes(OPS, 2)
    x0, x1 = [sp.input("x0")], [sp.input("x1")]
    mul = [*x0, *x1, *genes.op_words("mul")]
    long_ = [*x0, *x1, *genes.op_words("mul"), *x0, *genes.op_words("add"), *x1,
             *genes.op_words("sub")]
    cands = [Candidate(long_, 0.5, genes), Candidate(mul, 3.0, genes),
             Candidate(list(long_), 0.7, genes), Candidate(x0, 9.0, genes),
             Candidate(list(long_), 2.0, genes)]
    front = fr.Front(genes, lowest=1, shortest=1)
    front.offer(cands)
    # measured: the lowest loss (0.5) and the shortest of the rest (x0)
    assert front.measured == 2
    assert [c.known_complexity is not None for c in cands] == [True, False, False, True, False]
    assert [(c.complexity, c.loss) for c in front.entries] == [(1, 9.0), (5, 0.5)]
    every = fr.Front(genes, lowest=None, shortest=None)
    every.offer(cands)
    assert [(c.complexity, c.loss) for c in every.entries] == [(1, 9.0), (3, 3.0), (5, 0.5)]


def test_a_program_the_simplifier_refuses_is_left_off_the_front_and_logged(caplog):
    genes = Genes(OPS, 2)
    stray = Candidate([sp.input("z")], 0.5, genes)         # an input the genes do not have
    front = fr.Front(genes)
    with caplog.at_level("WARNING", logger="numptx.search.front"):
        front.offer([stray, Candidate([sp.input("x0")], 1.0, genes)])
    assert [(c.complexity, c.loss) for c in front.entries] == [(1, 1.0)]
    assert "left off the front" in caplog.text and "'z'" in caplog.text


def test_a_candidates_complexity_is_measured_again_for_a_new_program():
    genes = Genes(OPS, 2)
    c = Candidate([sp.input("x0")], 1.0, genes)
    assert c.known_complexity is None and c.complexity == 1 and c.known_complexity == 1
    c.program = [sp.input("x0"), sp.input("x1"), *genes.op_words("mul")]
    assert c.known_complexity is None and c.complexity == 3


def test_parsimony_counts_the_complexity():
    """Parsimony charges the front's complexity (front.sizes): measured once a program and
    only when parsimony > 0; a non-finite loss is not measured."""
    r = _run(generations=2, parsimony=0.5)
    s = r._search
    pop = s.population
    want = np.array([c.loss for c in pop]) + 0.5 * complexities(
        [c.program for c in pop], s.genes).astype(np.float64)
    assert s.penalized(pop).tolist() == want.tolist()
    assert all(c.known_complexity is not None for c in pop)        # kept on the candidates
    dead = Candidate(list(pop[0].program), math.inf, s.genes)
    assert fr.sizes([dead, pop[0], pop[0]]).tolist() == [0.0, pop[0].complexity,
                                                          pop[0].complexity]
    assert dead.known_complexity is None


# ---- the option and its bad values -----------------------------------------------------------
@pytest.mark.parametrize("bad", ["score", "BEST", "", None, 1, ("best",)])
def test_a_bad_model_selection_is_a_search_error_naming_it(bad):
    X, y = _data()
    with pytest.raises(SearchError, match="model_selection=.*'best', 'accuracy', 'mdl'"):
        search.regress(X, y, OPS, population=10, generations=1, model_selection=bad)
    with pytest.raises(SearchError, match="model_selection="):
        fr.check_rule(bad)


def test_select_applies_another_rule_and_refuses_a_bad_one():
    r = _run(generations=2, model_selection="accuracy")
    assert r.model is r.front[-1] and r.model_selection == "accuracy"
    assert r.select("best") is fr.select(r.front, "best")
    with pytest.raises(SearchError, match="model_selection='bic'"):
        r.select("bic")


# ---- checkpoints -----------------------------------------------------------------------------
def test_the_front_is_saved_and_a_resumed_run_keeps_it_exactly(tmp_path):
    full = _run(generations=5)
    part = _run(generations=2)
    path = tmp_path / "run.nxck"
    part.save(path)
    more = search.resume(path, generations=3)
    key = [(_words(c.program), c.loss, c.complexity) for c in full.front]
    assert [(_words(c.program), c.loss, c.complexity) for c in more.front] == key
    kept = [(_words(c.program), c.loss) for c in full._search.front.entries]
    assert [(_words(c.program), c.loss) for c in more._search.front.entries] == kept
    # the checkpoint's fields, checked as resume checks them, know the front
    from numptx.search.fields import Fields
    assert Fields(checkpoint.read(path), str(path)).keys() == "regress"
    # resumed for no generations: the saved front, as the part run returned it
    again = search.resume(path, generations=0)
    assert [(_words(c.program), c.loss) for c in again.front] == \
        [(_words(c.program), c.loss) for c in part.front]


def _rewrite(path, change):
    state = checkpoint.read(path)
    change(state)
    checkpoint.write(path, state)


def test_a_checkpoint_without_a_front_resumes_and_a_forged_one_is_refused(tmp_path):
    path = tmp_path / "run.nxck"
    _run(generations=2).save(path)
    _rewrite(path, lambda st: st.pop("front"))          # written before the front existed
    r = search.resume(path, generations=1)
    _monotone(r.front)
    _run(generations=2).save(path)

    def forge(st):
        st["front"][0][1] = float("inf")
    _rewrite(path, forge)
    with pytest.raises(CheckpointError, match=r"front\[0\]\.loss"):
        search.resume(path)
    _run(generations=2).save(path)
    _rewrite(path, lambda st: st.__setitem__("front", "x"))
    with pytest.raises(CheckpointError, match="front"):
        search.resume(path)
