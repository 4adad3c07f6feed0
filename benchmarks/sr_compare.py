"""Symbolic regression side by side: numptx's search against Operon (issue 23, item 4).

``python benchmarks/bench_search.py --compare`` runs this. The problems, the data rule, the
two engines' runners and the tables live here; ``bench_search.py`` parses the flags.

- **Problems** (:data:`PROBLEMS`): Nguyen-1..8, Keijzer-4, -11, -12 and six AI-Feynman
  equations of 2-4 variables, with the sampling ranges the benchmark's sources publish (each
  entry says its source). Training data follow the published rule; the test set is 1,000 rows
  drawn uniformly from the same ranges (Keijzer-4: its published shifted grid), with a seed of
  its own. Both engines get the same training and test data for a (problem, seed).
- **Solved**: R² on the test set > :data:`SOLVED_R2` (0.999999). A run stops early when its
  best model's training 1 - R² <= :data:`STOP` (1e-7), or at the time cap.
- **numptx**: ``search.regress`` on the CPU, f32 data, ``evaluate="interpret"`` (the C batch
  interpreter) when the installed numptx has the argument; else the emulator, which the table
  says. The run's ``target`` is ``STOP * var(y_train)`` (its loss is the MSE).
- **Operon** (``pip install pyoperon``; skipped with a message when absent): its genetic
  programming algorithm built from pyoperon's components as its scikit-learn wrapper builds
  them, with that wrapper's defaults (R² objective with linear scaling, balanced tree
  creator, tournament selection of 5, keep-best reinsertion, the eight mutations, no local
  search iterations unless ``--operon-local``), the same operator set, the same population,
  one thread, and a per-generation callback that stops the run at the same threshold.
- **Evaluations/s**: numptx ``Result.evaluated / seconds`` (programs scored after dedup,
  constant-fit trials included); Operon ``ResidualEvaluations / seconds`` (each a model run
  over the training rows, local-search steps included; ``CallCount``, the candidates, is kept
  in the JSON beside it).

- **Probes** (not the protocol): ``--engines numptx`` runs one engine; ``--numptx-args``
  passes more ``regress`` arguments; ``--operon-population`` gives Operon another population.
  The summary's mean log10(1 - test R²) separates short probes that the solved count cannot.

::

    python benchmarks/bench_search.py --compare --seeds 0 1 --time-cap 10
    python benchmarks/bench_search.py --compare --problems Nguyen-1 Keijzer-11 --seeds 0
    python benchmarks/bench_search.py --compare --engines numptx --time-cap 15 \
        --problems Keijzer Feynman-I.18.4 --numptx-args '{"population": 250}'
"""
from __future__ import annotations

import inspect
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

SOLVED_R2 = 0.999999     #: a run is solved when its model's test R² is above this
STOP = 1e-7              #: both engines stop when the training 1 - R² is at most this
N_TEST = 1000            #: rows of every test set (Keijzer-4: its grid)
OPS = ("add", "sub", "mul", "div", "exp", "log", "sin", "cos")   #: Nguyen's function set


@dataclass(frozen=True)
class Problem:
    """A benchmark function ``f`` of the columns of X (n x d, float64), sampled uniformly from
    ``[lo[j], hi[j]]`` for ``n_train`` training rows; ``grid`` (start, stop, step): a fixed
    training grid of one variable instead, and the test grid the same shifted by one step
    (see :func:`data`)."""
    name: str
    f: Callable[[np.ndarray], np.ndarray]
    lo: tuple[float, ...]
    hi: tuple[float, ...]
    n_train: int
    source: str
    grid: tuple[float, float, float] | None = None


def _x(X, j=0):
    return X[:, j]


_NGUYEN = ("Uy et al. 2011 (Nguyen), ranges as in McDermott et al. 2012, "
           "'Genetic programming needs better benchmarks'")
_KEIJZER = ("Keijzer 2003, 'Improving symbolic regression with interval arithmetic and "
            "linear scaling'")
_FEYNMAN = ("Udrescu & Tegmark 2020, AI Feynman: FeynmanEquations.csv of the Feynman Symbolic "
            "Regression Database (every variable here is sampled from U[1, 5])")

#: name -> problem. Nguyen: 20 random training points (Nguyen-7 on [0, 2], Nguyen-8 on [0, 4]).
#: Keijzer-4: the grid x = 0, 0.05, ..., 10 for training and 0.05, ..., 10.05 for testing;
#: Keijzer-11/12: 20 random training points on [-3, 3]^2 (the published test set is a 0.01
#: grid of 360,000 rows; here 1,000 random rows of the same square). AI-Feynman: 200 training
#: rows (the database has 10^5 rows a file, drawn from these same ranges).
PROBLEMS: dict[str, Problem] = {p.name: p for p in [
    Problem("Nguyen-1", lambda X: _x(X) ** 3 + _x(X) ** 2 + _x(X), (-1,), (1,), 20, _NGUYEN),
    Problem("Nguyen-2", lambda X: _x(X) ** 4 + _x(X) ** 3 + _x(X) ** 2 + _x(X), (-1,), (1,), 20,
            _NGUYEN),
    Problem("Nguyen-3", lambda X: sum(_x(X) ** k for k in range(1, 6)), (-1,), (1,), 20, _NGUYEN),
    Problem("Nguyen-4", lambda X: sum(_x(X) ** k for k in range(1, 7)), (-1,), (1,), 20, _NGUYEN),
    Problem("Nguyen-5", lambda X: np.sin(_x(X) ** 2) * np.cos(_x(X)) - 1, (-1,), (1,), 20,
            _NGUYEN),
    Problem("Nguyen-6", lambda X: np.sin(_x(X)) + np.sin(_x(X) + _x(X) ** 2), (-1,), (1,), 20,
            _NGUYEN),
    Problem("Nguyen-7", lambda X: np.log(_x(X) + 1) + np.log(_x(X) ** 2 + 1), (0,), (2,), 20,
            _NGUYEN),
    Problem("Nguyen-8", lambda X: np.sqrt(_x(X)), (0,), (4,), 20, _NGUYEN),
    Problem("Keijzer-4", lambda X: (_x(X) ** 3 * np.exp(-_x(X)) * np.cos(_x(X)) * np.sin(_x(X))
                                    * (np.sin(_x(X)) ** 2 * np.cos(_x(X)) - 1)),
            (0,), (10,), 201, _KEIJZER, grid=(0.0, 10.0, 0.05)),
    Problem("Keijzer-11", lambda X: _x(X, 0) * _x(X, 1) + np.sin((_x(X, 0) - 1) * (_x(X, 1) - 1)),
            (-3, -3), (3, 3), 20, _KEIJZER),
    Problem("Keijzer-12", lambda X: (_x(X, 0) ** 4 - _x(X, 0) ** 3 + _x(X, 1) ** 2 / 2
                                     - _x(X, 1)), (-3, -3), (3, 3), 20, _KEIJZER),
    # F = mu * Nn (friction force)
    Problem("Feynman-I.12.1", lambda X: _x(X, 0) * _x(X, 1), (1, 1), (5, 5), 200, _FEYNMAN),
    # U = m * g * z (potential energy)
    Problem("Feynman-I.14.3", lambda X: _x(X, 0) * _x(X, 1) * _x(X, 2), (1,) * 3, (5,) * 3, 200,
            _FEYNMAN),
    # r = (m1 r1 + m2 r2) / (m1 + m2) (centre of mass); columns m1, m2, r1, r2
    Problem("Feynman-I.18.4", lambda X: ((_x(X, 0) * _x(X, 2) + _x(X, 1) * _x(X, 3))
                                         / (_x(X, 0) + _x(X, 1))), (1,) * 4, (5,) * 4, 200,
            _FEYNMAN),
    # Ve = q / C (voltage of a capacitor)
    Problem("Feynman-I.25.13", lambda X: _x(X, 0) / _x(X, 1), (1, 1), (5, 5), 200, _FEYNMAN),
    # E = 3/2 pr V (energy of an ideal gas)
    Problem("Feynman-I.39.1", lambda X: 1.5 * _x(X, 0) * _x(X, 1), (1, 1), (5, 5), 200,
            _FEYNMAN),
    # flux = Pwr / (4 pi r^2) (intensity of a point source)
    Problem("Feynman-II.3.24", lambda X: _x(X, 0) / (4 * np.pi * _x(X, 1) ** 2), (1, 1), (5, 5),
            200, _FEYNMAN),
]}


def data(p: Problem, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(X_train, y_train, X_test, y_test), float64, the same for every engine::

        Xtr, ytr, Xte, yte = data(PROBLEMS["Nguyen-7"], 0)     # 20 and 1,000 rows on [0, 2]
    """
    if p.grid is not None:
        a, b, h = p.grid
        xtr = a + h * np.arange(round((b - a) / h) + 1)
        Xtr, Xte = xtr[:, None], (xtr + h)[:, None]
    else:
        lo, hi = np.array(p.lo, float), np.array(p.hi, float)
        Xtr = np.random.default_rng([seed, 1]).uniform(lo, hi, (p.n_train, len(lo)))
        Xte = np.random.default_rng([seed, 2]).uniform(lo, hi, (N_TEST, len(lo)))
    return Xtr, p.f(Xtr), Xte, p.f(Xte)


def r2(y: np.ndarray, pred: np.ndarray) -> float:
    """R² of ``pred`` against ``y`` in float64 (-inf when pred has NaN or inf)."""
    y, pred = np.asarray(y, np.float64), np.asarray(pred, np.float64)
    if pred.shape != y.shape or not np.all(np.isfinite(pred)):
        return -math.inf
    ss = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - float(np.sum((y - pred) ** 2)) / ss if ss > 0 else -math.inf


@dataclass
class Run:
    """One engine's run of one (problem, seed)."""
    engine: str
    problem: str
    seed: int
    solved: bool
    test_r2: float
    seconds: float        #: wall time of the run, to its stop (the threshold or the cap)
    evaluations: int      #: numptx: Result.evaluated; Operon: ResidualEvaluations
    candidates: int       #: numptx: Result.evaluated; Operon: CallCount
    generations: int
    mode: str             #: how the engine scored candidates
    model: str
    timings: dict | None = None   #: numptx: Result.timings (seconds per stage)

    @property
    def evals_per_s(self) -> float:
        return self.evaluations / self.seconds if self.seconds > 0 else 0.0


# ---- numptx ---------------------------------------------------------------------------------
def numptx_mode(requested: str) -> str:
    """What the numptx side scores with: ``requested`` ("interpret" or "compile", the latter
    the emulator on a CPU) when ``search.regress`` takes ``evaluate=``; else "emulator (no
    evaluate= in this numptx)"."""
    from numptx import search
    if "evaluate" in inspect.signature(search.regress).parameters:
        return requested
    return "emulator (no evaluate= in this numptx)"


def run_numptx(name: str, seed: int, *, ops: Sequence[str], population: int,
               time_cap: float, evaluate: str, extra: dict | None = None) -> Run:
    """numptx's ``search.regress`` on the CPU (f32 data) until the training 1 - R² <= STOP or
    ``time_cap`` seconds; ``extra``: more ``regress`` arguments (a probe's, ``--numptx-args``)."""
    from numptx import search
    Xtr, ytr, Xte, yte = data(PROBLEMS[name], seed)
    X32, y32 = Xtr.astype(np.float32), ytr.astype(np.float32)
    mode = numptx_mode(evaluate)
    kw = dict(population=population, generations=10 ** 6, seed=seed,
              target=STOP * float(np.var(y32.astype(np.float64))), time_limit=time_cap,
              device="cpu", restart=20, **({"evaluate": evaluate} if mode == evaluate else {}))
    kw.update(extra or {})                     # a probe's arguments replace the protocol's
    t0 = time.perf_counter()
    r = search.regress(X32, y32, list(ops), **kw)
    dt = time.perf_counter() - t0
    score = r2(yte, r.best.predict(Xte)) if r.best is not None else -math.inf
    if extra:                                  # a probe's JSON says what it changed
        mode = f"{mode}, probe {json.dumps(extra, sort_keys=True)}"
    return Run("numptx", name, seed, score > SOLVED_R2, score, dt, r.evaluated, r.evaluated,
               r.generations, mode, r.best.formula if r.best is not None else "",
               {k: round(v, 3) for k, v in r.timings.items()})


# ---- Operon ---------------------------------------------------------------------------------
def operon_missing() -> str | None:
    """None when pyoperon imports; else the message the benchmark prints."""
    try:
        import pyoperon
        del pyoperon
    except ImportError as e:
        return (f"pyoperon is not installed ({e}): the Operon side is skipped "
                f"(pip install pyoperon)")
    return None


_MUTATIONS = ("onepoint", "multipoint", "discretepoint", "changevar", "changefunc",
              "insertsubtree", "replacesubtree", "removesubtree")


def _operon_mutation(op, kind: str, inputs, pset, creator, coeff, max_depth, max_length):
    """One of Operon's eight mutations, parameterized as its scikit-learn wrapper does."""
    if kind in ("onepoint", "multipoint"):
        m = op.NormalOnePointMutation() if kind == "onepoint" else op.NormalMultiPointMutation()
        m.ParameterizeDistribution(0, 1)
        return m
    if kind == "discretepoint":
        m = op.DiscretePointMutation()
        for c in op.Math.Constants:
            m.Add(c, 1.0)
        return m
    if kind == "changevar":
        return op.ChangeVariableMutation(inputs)
    if kind == "changefunc":
        return op.ChangeFunctionMutation(pset)
    if kind == "removesubtree":
        return op.RemoveSubtreeMutation(pset)
    cls = op.InsertSubtreeMutation if kind == "insertsubtree" else op.ReplaceSubtreeMutation
    return cls(creator, coeff, max_depth, max_length)


def run_operon(name: str, seed: int, *, ops: Sequence[str], population: int,
               time_cap: float, local_iterations: int = 0, threads: int = 1,
               max_length: int = 50, max_depth: int = 10) -> Run:
    """Operon's GP (pyoperon) until its best model's training 1 - R² <= STOP (checked after
    each generation) or ``time_cap`` seconds; the model is linearly scaled on the training
    rows, as Operon's R² objective scores it, and then tested."""
    import pyoperon as op
    Xtr, ytr, Xte, yte = data(PROBLEMS[name], seed)
    t0 = time.perf_counter()
    ds = op.Dataset(np.asfortranarray(np.column_stack((Xtr, ytr))))
    target = max(ds.Variables, key=lambda v: v.Index)
    inputs = [v.Hash for v in sorted(ds.Variables, key=lambda v: v.Index) if v.Hash != target.Hash]
    names = {v.Hash: f"x{v.Index}" for v in ds.Variables if v.Hash != target.Hash}
    train = op.Range(0, ds.Rows)
    problem = op.Problem(ds)
    problem.TrainingRange, problem.TestRange = train, op.Range(ds.Rows - 1, ds.Rows)
    problem.Target, problem.InputHashes = target, inputs
    config = 0
    for s in (*ops, "constant", "variable"):
        config |= int(getattr(op.NodeType, s.capitalize()))
    problem.ConfigurePrimitiveSet(config)
    pset = problem.PrimitiveSet
    creator = op.BalancedTreeCreator(pset, inputs, 0.0)
    coeff = op.NormalCoefficientInitializer()
    coeff.ParameterizeDistribution(0, 1)
    dtable = op.DispatchTable()
    optimizer = op.LMOptimizer(dtable, problem, local_iterations, 0)
    evaluator = op.Evaluator(problem, dtable, op.R2(), True)
    evaluator.Budget = 10 ** 12
    comparison = op.SingleObjectiveComparison(0)
    selector = op.TournamentSelector(comparison)
    selector.TournamentSize = 5
    reinserter = op.KeepBestReinserter(comparison)
    cx = op.SubtreeCrossover(0.9, max_depth, max_length)
    mut, keep = op.MultiMutation(), []
    for kind in _MUTATIONS:
        m = _operon_mutation(op, kind, inputs, pset, creator, coeff, max_depth, max_length)
        mut.Add(m, 1.0)
        keep.append(m)                       # MultiMutation holds pointers
    coeff_opt = op.CoefficientOptimizer(optimizer)
    generator = op.BasicOffspringGenerator(evaluator, cx, mut, selector, selector, coeff_opt)
    init = op.UniformLengthTreeInitializer(creator)
    init.ParameterizeDistribution(pset.FunctionArityLimits()[0] + 1, min(10, max_length))
    init.MinDepth, init.MaxDepth = 1, 1000
    cfg = op.GeneticAlgorithmConfig(
        generations=10 ** 6, max_evaluations=10 ** 12, local_iterations=local_iterations,
        population_size=population, pool_size=population, p_crossover=1.0, p_mutation=0.25,
        p_local=1.0, p_lamarck=1.0, epsilon=1e-5, seed=seed, max_time=max(1, round(time_cap)))
    gp = op.GeneticProgrammingAlgorithm(cfg, problem, init, coeff, generator, reinserter)

    def fit_of(tree) -> tuple[np.ndarray, float]:
        pred = np.asarray(op.Evaluate(dtable, tree, ds, train), np.float64)
        A = np.column_stack((pred, np.ones_like(pred)))
        if not np.all(np.isfinite(pred)):
            return np.array([0.0, 0.0]), -math.inf
        coef = np.linalg.lstsq(A, ytr, rcond=None)[0]
        return coef, r2(ytr, A @ coef)

    def report() -> None:
        if fit_of(gp.BestModel.Genotype)[1] >= 1 - STOP:
            evaluator.Budget = 0              # the generator stops at an exhausted budget
    gp.Run(op.RandomGenerator(np.uint64(seed)), report, threads)
    dt = time.perf_counter() - t0
    tree = gp.BestModel.Genotype
    coef, _ = fit_of(tree)
    pred = np.asarray(op.Evaluate(dtable, tree, op.Dataset(np.asfortranarray(
        np.column_stack((Xte, yte)))), op.Range(0, len(yte))), np.float64)
    score = r2(yte, coef[0] * pred + coef[1])
    text = f"{coef[0]:.6g} * ({op.InfixFormatter.Format(tree, names, 6)}) + {coef[1]:.6g}"
    return Run("Operon", name, seed, score > SOLVED_R2, score, dt, evaluator.ResidualEvaluations,
               evaluator.CallCount, gp.Generation, f"pyoperon, {threads} thread(s), "
               f"{local_iterations} local iterations", text)


# ---- the side-by-side run and its tables ----------------------------------------------------
def pick(names: Sequence[str] | None) -> list[str]:
    """The problems named (a full name, or a prefix: ``Feynman`` takes all six); None: all."""
    if not names:
        return list(PROBLEMS)
    out = []
    for n in names:
        hit = [k for k in PROBLEMS if k == n] or [k for k in PROBLEMS if k.startswith(n)]
        if not hit:
            raise SystemExit(f"--problems: {n!r} is none of {', '.join(PROBLEMS)}")
        out += [k for k in hit if k not in out]
    return out


def pin(cpus: int) -> str:
    """Pin this process to ``cpus`` of the CPUs it may run on (0: leave it); what was done."""
    have = sorted(os.sched_getaffinity(0))
    if cpus <= 0 or cpus >= len(have):
        return f"not pinned ({len(have)} CPUs)"
    os.sched_setaffinity(0, have[:cpus])
    return f"pinned to CPU {', '.join(map(str, have[:cpus]))} of {len(have)}"


def _med(xs: Sequence[float], fmt: str) -> str:
    return format(statistics.median(xs), fmt) if xs else "-"


def _row(label: str, runs: list[Run], engines: Sequence[str], n: int) -> str:
    by = {e: [r for r in runs if r.engine == e] for e in engines}
    cells = [f"{sum(r.solved for r in by[e])}/{n}" for e in engines]
    cells += [_med([r.seconds for r in by[e] if r.solved], ".2f") for e in engines]
    cells += [_med([r.evals_per_s for r in by[e]], ",.0f") for e in engines]
    cells += [_med([r.test_r2 for r in by[e]], ".6f") for e in engines]
    return f"| {label} | " + " | ".join(cells) + " |"


def table(runs: list[Run], engines: Sequence[str], problems: Sequence[str], seeds: int) -> str:
    """The markdown table: per problem, then overall: solved runs, the median seconds of the
    solved runs, the median evaluations/s and the median test R² of every run."""
    head = ([f"{e} solved" for e in engines] + [f"{e} median s (solved)" for e in engines]
            + [f"{e} median evals/s" for e in engines] + [f"{e} median test R²" for e in engines])
    lines = ["| problem | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for p in problems:
        lines.append(_row(p, [r for r in runs if r.problem == p], engines, seeds))
    lines.append(_row("**all**", runs, engines, seeds * len(problems)))
    return "\n".join(lines)


def summary(runs: list[Run], engines: Sequence[str]) -> str:
    """Lines under the table: each engine's evaluations/s (median of runs, and all its
    evaluations over all its seconds), Operon's candidates/s (``CallCount``), where numptx's
    time went (its ``Result.timings``, summed over the runs), and the mean of
    log10(1 - test R²) over the runs (1e-12 at least; a finer measure than the solved count
    for short probes)."""
    out = []
    for e in engines:
        rs = [r for r in runs if r.engine == e]
        sec = sum(r.seconds for r in rs)
        if not rs or sec <= 0:
            continue
        err = [math.log10(max(1e-12, 1.0 - r.test_r2)) if math.isfinite(r.test_r2) else 12.0
               for r in rs]
        line = (f"- {e}: evaluations/s median {_med([r.evals_per_s for r in rs], ',.0f')}, "
                f"pooled {sum(r.evaluations for r in rs) / sec:,.0f} ({sec:.0f} s of runs); "
                f"mean log10(1 - test R²) {sum(err) / len(err):.2f}")
        if e == "Operon":
            line += (f"; candidates (CallCount)/s median "
                     f"{_med([r.candidates / r.seconds for r in rs if r.seconds > 0], ',.0f')}"
                     f", pooled {sum(r.candidates for r in rs) / sec:,.0f}; "
                     f"{sum(r.evaluations for r in rs) / max(1, sum(r.candidates for r in rs)):.1f}"
                     f" evaluations a candidate")
        stages: dict[str, float] = {}
        for r in rs:
            for k, v in (r.timings or {}).items():
                stages[k] = stages.get(k, 0.0) + v
        if stages:
            line += "; time: " + ", ".join(f"{k} {100 * v / sec:.0f} %" for k, v in stages.items())
        out.append(line)
    return "\n".join(out)


def replay(path: str) -> None:
    """The tables of the runs saved by ``--json`` (``bench_search.py --compare --replay``)."""
    with open(path) as fh:
        runs = [Run(**d) for d in json.load(fh)]
    engines = list(dict.fromkeys(r.engine for r in runs))
    problems = list(dict.fromkeys(r.problem for r in runs))
    seeds = sorted({r.seed for r in runs})
    print(f"\n### {path}: {len(problems)} problems x seeds {seeds}\n")
    print(table(runs, engines, problems, len(seeds)))
    print("\n" + summary(runs, engines))


def compare(problems: Sequence[str], seeds: Sequence[int], *, ops: Sequence[str],
            population: int, time_cap: float, evaluate: str, operon_local: int,
            cpus: int, json_path: str | None, engines: Sequence[str] = ("numptx", "Operon"),
            numptx_args: dict | None = None, operon_population: int | None = None
            ) -> list[Run]:
    """Each (problem, seed) run by numptx and by Operon, one after the other, the order
    alternating from run to run; a line per run on stderr, the tables on stdout. Probes:
    ``engines`` (one alone), ``numptx_args`` (more ``regress`` arguments, e.g. another
    population), ``operon_population`` (Operon's, default ``population``)."""
    missing = operon_missing() if "Operon" in engines else None
    if missing:
        print(f"\n> {missing}\n", flush=True)
    engines = [e for e in ("numptx", "Operon") if e in engines and not (e == "Operon" and missing)]
    if numptx_args:
        print(f"numptx probe arguments: {numptx_args}", flush=True)
    op_pop = operon_population or population
    pinned = pin(cpus)
    # the populations the engines run with (a probe's own replaces the protocol's)
    pops = {"numptx": (numptx_args or {}).get("population", population), "Operon": op_pop}
    print(f"\n### {' against '.join(engines) or 'no engine'}: {len(problems)} problems x seeds "
          f"{list(seeds)}, {time_cap:g} s a run, population "
          f"{', '.join(f'{e} {pops[e]}' for e in engines)}, ops {' '.join(ops)}\n")
    print(f"numptx: search.regress, device cpu, evaluate: {numptx_mode(evaluate)}; Operon: "
          f"{'-' if missing else f'1 thread, {operon_local} local (LM) iterations'}; {pinned}; "
          f"load average at start {os.getloadavg()[0]:.2f}; solved: test R² > {SOLVED_R2}; "
          f"stop: training 1 - R² <= {STOP:g}\n", flush=True)
    # warm-up (imports, the interpreter's tables, first allocations), not recorded
    if "numptx" in engines:
        run_numptx("Nguyen-1", 99, ops=ops, population=64, time_cap=1.0, evaluate=evaluate)
    if "Operon" in engines:
        run_operon("Nguyen-1", 99, ops=ops, population=64, time_cap=1.0)
    runs: list[Run] = []
    turn = 0
    for p in problems:
        for seed in seeds:
            order = engines if turn % 2 == 0 else engines[::-1]
            turn += 1
            for e in order:
                if e == "numptx":
                    r = run_numptx(p, seed, ops=ops, population=population, time_cap=time_cap,
                                   evaluate=evaluate, extra=numptx_args)
                else:
                    r = run_operon(p, seed, ops=ops, population=op_pop, time_cap=time_cap,
                                   local_iterations=operon_local)
                runs.append(r)
                print(f"  {p} seed {seed} {e}: {'solved' if r.solved else 'unsolved'} "
                      f"R² {r.test_r2:.7f} in {r.seconds:.2f} s, {r.generations} gens, "
                      f"{r.evals_per_s:,.0f} evals/s: {r.model[:70]}", file=sys.stderr,
                      flush=True)
                if json_path:
                    with open(json_path, "w") as fh:
                        json.dump([asdict(x) for x in runs], fh, indent=1)
    print(table(runs, engines, problems, len(seeds)))
    print("\n" + summary(runs, engines))
    print(f"\nload average at end {os.getloadavg()[0]:.2f}")
    return runs
