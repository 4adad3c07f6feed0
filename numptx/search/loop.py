"""The search loop: one run's state and its generations (:class:`Search`), for the search
functions of :mod:`numptx.search.searches` (symbolic regression, MAP-Elites and evolution of
any template's site)::

    import numpy as np
    from numptx import search
    X = np.random.default_rng(0).uniform(-1, 1, (200, 1)).astype(np.float32)
    y = X[:, 0] ** 3 + X[:, 0] ** 2 + X[:, 0]
    result = search.regress(X, y, ops=["add", "sub", "mul"], population=300, generations=50,
                            seed=0, target=1e-9)
    result.best.formula, result.best.loss, result.history[-1].best
    result.save("run.nxck"); more = search.resume("run.nxck", generations=20)

One generation: tournament selection (penalized loss ``loss + parsimony * complexity``), crossover and
mutation (:mod:`numptx.search.breed`: the operators of :mod:`numptx.search.operators`, fast),
deduplication by canonical key (a duplicate is mutated again, up to ``revary`` times; a
program whose stub equals one already scored reuses that score: nothing is compiled, built or
run for it), one batched evaluation of the new programs
(:class:`numptx.search.evaluate.Evaluator`: the emulator on a CPU, packed modules on a GPU),
constant fitting of the best new programs (:mod:`numptx.search.constants`), then the elites
and the children form the next population.
With a seed the run is reproducible; the state saved by :meth:`Result.save` holds the random
generator, so a resumed run continues exactly as the uninterrupted one.
"""
from __future__ import annotations

import itertools
import logging
import math
import sys
import time
import typing
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .. import stack_ptx as sp
from . import checkpoint as ck
from . import elites
from . import operators as O
from . import semantic
from .breed import Breeder
from .config import CACHE_MAX, Kind, SearchOptions, first_lengths, variation_for
from .constants import fit_constants
from .least_squares import fit_least_squares
from .evaluate import Evaluator
from .genes import MACRO_CONSTANTS, Genes, check_int
from .rescore import Rescore, returned
from .results import Candidate, Generation, Result, program_key
from .front import Front, sizes as front_sizes, with_front
from .scaling import written
from .scorers import Scorer, UserFitness
from .strategies import Strategy, strategy_for
from .learned_cells import LearnedCells, is_learned

if typing.TYPE_CHECKING:
    from .screening import Screen

__all__ = ["Search", "Result", "Candidate", "Generation", "check_int", "FINISH_WRITE",
           "FINISH_WRITE_SECONDS"]

log = logging.getLogger(__name__)

#: a program written with its linear scaling (:func:`numptx.search.scaling.written`: its
#: outputs, the fit and three losses) costs about this many scorings of it, plus
#: :data:`FINISH_WRITE_SECONDS` (measured on one core, the CPU interpreter, population 1000:
#: 0.05 s written against 0.012 ms a program scored at 20 rows; 0.28 s against 0.135 ms at
#: 5,000 rows)
FINISH_WRITE = 2.0
FINISH_WRITE_SECONDS = 3e-5


def _formula_mod():
    # the module (the package's ``formula`` attribute is the function of that name)
    import importlib
    return importlib.import_module(__package__ + ".formula")


# ---- the search state ---------------------------------------------------------------------
def _exact_key(prog: list, raw: dict[tuple, bytes], names: list[str]) -> bytes:
    """``sp.encode(prog, names).tobytes()`` (the fit memo's key), joined from the ops' own
    bytes: ``raw`` holds each input op's word by (word, name), encoded when first met."""
    for _ in range(2):
        try:
            return b"".join([op.raw or raw[op.word, op.name] for op in prog])
        except KeyError:
            for op in prog:
                if isinstance(op, sp.Op) and not op.raw and (op.word, op.name) not in raw:
                    raw[op.word, op.name] = sp.encode([op], names).tobytes()
        except (AttributeError, TypeError):
            break
    return sp.encode(prog, names).tobytes()       # no op somewhere: the encoder names it


class Search:
    """The state one run carries from generation to generation (and into a checkpoint)."""

    def __init__(self, kind: Kind, genes: Genes, cfg: SearchOptions, seed: int | None, *,
                 evaluator: Evaluator | None = None, user: UserFitness | None = None):
        self.kind, self.genes, self.cfg = kind, genes, cfg
        entropy = typing.cast(int, np.random.SeedSequence().entropy)    # an int when drawn
        self.seed = entropy % (1 << 63) if seed is None else seed
        self.rng = np.random.default_rng(self.seed)
        self.breeder = Breeder(genes, crossover=cfg.crossover, mutation=cfg.mutation,
                               max_length=cfg.max_length, revary=cfg.revary,
                               variation=variation_for(cfg.variation, None if evaluator is None
                                                       else evaluator.X.shape[0]))
        self.evaluator, self.user = evaluator, user
        #: what one generation does (a population, or MAP-Elites' archive)
        self.strategy: Strategy = strategy_for(kind, cfg.islands)
        #: islands (``cfg.islands`` > 1): the sizes of the population's runs, island by island
        self.island_sizes: list[int] | None = None
        probe = 0 if evaluator is None else semantic.resolve(
            cfg.semantic_dedup, evaluator.mode, evaluator.device, evaluator.X.shape[0])
        self.semantic = semantic.Semantic(evaluator, probe, self.seed) if probe else None
        #: the predictor that screens children (``predictor=``), None without one
        self.screen: Screen | None = None
        if cfg.predictor:                # numptx.learn is imported for a predictor only
            from .screening import screen_for
            self.screen = screen_for(cfg, genes, self.seed, evaluator)
        self.population: list[Candidate] = []
        self.archive: dict[tuple, Candidate] = {}
        self.history: list[Generation] = []
        self.cache: dict[bytes, float] = {}
        self._new_share: float | None = None   # new programs / children, last evaluation
        self.fits: dict[bytes, tuple[list, float]] = {}
        self._input_words: dict[tuple, bytes] = {}     # _exact_key's input words, as met
        self.best: Candidate | None = None
        self.front = Front(genes)      # the best program of each complexity (front.py)
        self.evaluated = self.children_made = 0
        self.seconds = 0.0
        self.timings = {"generate": 0.0, "dedup": 0.0, "evaluate": 0.0, "fit": 0.0, "select": 0.0,
                        **({"predict": 0.0} if self.screen is not None else {})}
        self.descriptors = elites.descriptors(cfg) if self.strategy.keeps_archive else []
        #: MAP-Elites' learned descriptors (``descriptors="learned"``): the probe and basis
        self.learned: LearnedCells | None = None
        if self.descriptors and evaluator is not None and is_learned(cfg.descriptors):
            self.learned = LearnedCells(genes, evaluator.X, self.descriptors[0].bins, self.seed)
        #: seconds and programs of this process's scoring (evaluate_chunks): the rate the
        #: finishing's estimate reads (not checkpointed: a resumed run measures again)
        self._scoring = [0.0, 0]
        #: the compiled path's (seconds, programs) of one re-score, timed once when a time limit
        #: needs it (:meth:`finish_estimate`)
        self._compiled_rate: tuple[float, int] | None = None
        self.stopped = "generations"
        self.improved_at = 0          # the generation the best last improved by 1 % or more
        self.restarts = 0
        # the op macros' own constants (exp: log2 e, log: ln 2) are not fitted
        self._macro_constants = [genes.round(v) for v in MACRO_CONSTANTS]

    # -- scoring --------------------------------------------------------------------------
    @property
    def scorer(self) -> Scorer:
        """What scores the programs: the data's :class:`Evaluator`, or evolve's
        :class:`UserFitness`."""
        scorer = self.evaluator if self.evaluator is not None else self.user
        assert scorer is not None, "a Search has an evaluator or a user fitness"
        return scorer

    def _score(self, programs: list) -> np.ndarray:
        return self.scorer.score(programs)

    def candidate(self, program: list, loss: float) -> Candidate:
        """A :class:`Candidate` of this search's genes."""
        return Candidate(program, loss, self.genes)

    def evaluate_programs(self, programs: list) -> np.ndarray:
        """Losses of ``programs``: cached by canonical key; the new keys scored in one batch
        (on the GPU: pipelined, chunk by chunk, see :meth:`evaluate_chunks`)."""
        size = self._chunk_size(len(programs))
        return self.evaluate_chunks((programs[i:i + size]
                                     for i in range(0, len(programs), size)),
                                    len(programs))[1]

    def _chunk_size(self, total: int) -> int:
        # a chunk a module: each chunk's new programs fill about one module of the GPU
        # pipeline (on the CPU the chunks are joined and scored at once: the same losses)
        ev = self.evaluator
        return max(1, ev.module_size(total) if ev is not None else total)

    def evaluate_chunks(self, chunks: Iterable[list | tuple[list, list]],
                        total: int) -> tuple[list, np.ndarray]:
        """The programs of ``chunks`` (consumed here; on the GPU each chunk's new programs are
        compiled and sent to assembly before the next chunk is made) and their losses: cached
        by canonical key, a key first met in this call (in any chunk) scored once, in order of
        first appearance, so the losses equal those of one :meth:`evaluate_programs` call on
        all the programs. ``total``: an upper bound on the programs (sizes the modules). A
        chunk is a list of programs or a (programs, keys) pair (:meth:`keyed_chunks`)."""
        t0 = time.perf_counter()
        # chunks made (and keyed) by a generator that times itself
        gen0, dd0 = self.timings["generate"], self.timings["dedup"]
        if len(self.cache) > CACHE_MAX:
            self.cache.clear()
        if self.semantic is not None:
            self.semantic.begin()
        programs: list = []
        keys: list[bytes] = []
        todo: dict[bytes, None] = {}
        dups: dict[bytes, float | bytes] = {}    # semantic duplicates: a loss or a key
        spent = [0.0]

        def new_ones():
            for chunk in chunks:
                t = time.perf_counter()
                if isinstance(chunk, tuple):          # (programs, keys): keyed when made
                    chunk, ks = chunk
                else:
                    ks = _formula_mod().canonical_keys(chunk, self.genes) if len(chunk) else []
                fresh, fresh_keys, met = [], [], set()
                for p, k in zip(chunk, ks):
                    if k not in self.cache and k not in todo and k not in dups \
                            and k not in met:
                        met.add(k)
                        fresh.append(p)
                        fresh_keys.append(k)
                if self.semantic is not None and fresh:
                    # a program of the outputs of one scored before takes its loss
                    fresh, fresh_keys, more = self.semantic.split(fresh, fresh_keys)
                    dups.update(more)
                todo.update(dict.fromkeys(fresh_keys))
                programs.extend(chunk)
                keys.extend(ks)
                spent[0] += time.perf_counter() - t
                yield fresh
        if self.evaluator is not None:
            # the last call's share of new programs: how many to expect (tapers the modules)
            expected = None if self._new_share is None else round(total * self._new_share)
            got = self.evaluator.score_chunks(new_ones(), total, expected)
        else:
            fresh = [p for chunk in new_ones() for p in chunk]
            got = self._score(fresh) if fresh else np.empty(0)
        self.cache.update(zip(todo, (float(v) for v in got)))
        if self.semantic is not None:
            self.semantic.settle(self.cache)
            for k, v in dups.items():
                self.cache[k] = self.cache[v] if isinstance(v, bytes) else v
        if programs:
            self._new_share = len(todo) / len(programs)
        self.evaluated += len(todo)
        self._gen_evaluated += len(todo)
        made = self.timings["generate"] - gen0 + self.timings["dedup"] - dd0
        self.timings["dedup"] += spent[0]
        took = time.perf_counter() - t0 - spent[0] - made
        self.timings["evaluate"] += took
        self._scoring[0] += took
        self._scoring[1] += len(todo)
        return programs, np.array([self.cache[k] for k in keys])

    def fit_constants_of(self, cands: list[Candidate]) -> None:
        """Fit the constants of the best ``fit_top`` unfitted candidates (in place); the
        predictor (``predictor=``) then learns from the children it let through."""
        self._fit_constants(cands)
        self.front.offer(cands)
        if self.screen is not None:
            t = self.screen.seconds
            self.screen.learn(cands)
            self.timings["predict"] += self.screen.seconds - t

    def _fit_constants(self, cands: list[Candidate]) -> None:
        top = self.cfg.fit_top
        if self.evaluator is None or not top:
            return
        t0 = time.perf_counter()
        order = sorted((i for i, c in enumerate(cands) if not c.fitted and math.isfinite(c.loss)),
                       key=lambda i: cands[i].loss)
        picked: list[tuple[int, bytes]] = []
        same: dict[bytes, list[int]] = {}       # copies of one program take its fit
        names = list(self.genes.names)
        for i in order:
            exact = _exact_key(cands[i].program, self._input_words, names)
            cands[i].fitted = True
            if exact in same:
                same[exact].append(i)
                continue
            same[exact] = [i]
            # fitting is a function of the program: a fit made before is reused (below)
            if exact not in self.fits and O.has_constants(cands[i].program):
                picked.append((i, exact))
            if len(picked) >= top:
                break
        if picked:
            progs, losses, n = self._fit([cands[i].program for i, _ in picked],
                                         [cands[i].loss for i, _ in picked],
                                         [e for _, e in picked])
            self.evaluated += n
            self._gen_evaluated += n
            keys = _formula_mod().canonical_keys(progs, self.genes)
            for (i, exact), p, loss, k in zip(picked, progs, losses, keys):
                self.fits[exact] = (p, float(loss))
                self.cache.setdefault(k, float(loss))
        for exact, idx in same.items():
            memo = self.fits.get(exact)
            if memo is not None:
                for j in idx:
                    cands[j].program, cands[j].loss = list(memo[0]), memo[1]
        if len(self.fits) > CACHE_MAX:
            self.fits.clear()
        self.timings["fit"] += time.perf_counter() - t0

    def _fit(self, programs: list, losses: list, keys: list) -> tuple[list, np.ndarray, int]:
        """(programs, losses, evaluations) of one constant fit by ``fit_method``."""
        cfg = self.cfg
        if cfg.fit_method != "lm":
            progs, got = fit_constants(self.evaluator, programs, losses, keys, seed=self.seed,
                                       steps=cfg.fit_steps, trials=cfg.fit_trials,
                                       protect=self._macro_constants)
            return progs, got, len(programs) * cfg.fit_trials * cfg.fit_steps
        progs, _, runs = fit_least_squares(self.evaluator, programs, steps=cfg.fit_steps,
                                           protect=self._macro_constants)
        moved = [k for k, (p, q) in enumerate(zip(progs, programs)) if p is not q and p != q]
        got = np.asarray(losses, np.float64).copy()
        if moved:      # the evaluator's own losses: a fit is kept only where it scores better
            new = self.scorer.score([progs[k] for k in moved])
            for k, v in zip(moved, new.tolist()):
                if v < got[k]:
                    got[k] = v
                else:
                    progs[k] = programs[k]
        return progs, got, runs + len(moved)

    # -- variation ------------------------------------------------------------------------
    def make_children(self, parents_a: list, parents_b: list) -> list:
        """One child per pair of parents (crossover and/or mutation), in order."""
        return [c for chunk in self.child_chunks(parents_a, parents_b, max(1, len(parents_a)),
                                                 timed=False) for c in chunk]

    def child_chunks(self, parents_a: list, parents_b: list, size: int, *,
                     timed: bool = True) -> Iterator[list]:
        """:meth:`make_children` in chunks of ``size``, made as they are asked for: the same
        children whatever the chunks (:class:`numptx.search.breed.Breeder`). ``timed``: the
        time making them goes to ``timings["generate"]``, their keys' to ``["dedup"]``."""
        for progs, _ in self.keyed_chunks(parents_a, parents_b, size, timed=timed):
            yield progs

    def keyed_chunks(self, parents_a: list, parents_b: list, size: int, *,
                     timed: bool = True) -> Iterator[tuple[list, list]]:
        """:meth:`child_chunks` with the children's canonical keys: (programs, keys) chunks
        that :meth:`evaluate_chunks` takes without keying the programs again."""
        keyed = [0.0]

        def on_keys(sec: float) -> None:
            keyed[0] += sec
        it = self.breeder.children(self.rng, parents_a, parents_b, size=size,
                                   scored=self.cache, on_keys=on_keys)
        while True:
            t0, k0 = time.perf_counter(), keyed[0]
            chunk = next(it, None)
            if timed:
                self.timings["dedup"] += keyed[0] - k0
                self.timings["generate"] += time.perf_counter() - t0 - (keyed[0] - k0)
            if chunk is None:
                return
            self.children_made += len(chunk[0])
            yield chunk

    def scored_children(self, parents_a: list, parents_b: list) -> list[Candidate]:
        """One child per pair of parents, scored: made, keyed and deduplicated chunk by chunk
        (on the GPU each chunk's modules assemble while the next is made; the same children
        and losses as all at once)."""
        n = len(parents_a)
        if self.screen is not None:       # the picked children scored, the others +inf
            return self.screen.children(self, parents_a, parents_b)
        progs, losses = self.evaluate_chunks(
            self.keyed_chunks(parents_a, parents_b, self._chunk_size(n)), n)
        return [Candidate(p, v, self.genes) for p, v in zip(progs, losses.tolist())]

    def penalized(self, cands: Sequence[Candidate]) -> np.ndarray:
        loss = np.array([c.loss for c in cands])
        if self.cfg.parsimony:       # a large (finite) parsimony gives +inf, not a warning
            with np.errstate(over="ignore", invalid="ignore"):    # complexity: front.sizes
                loss = loss + self.cfg.parsimony * front_sizes(list(cands))
        return loss

    def init_population(self) -> list[Candidate]:
        n = self.cfg.population
        size = self._chunk_size(n)

        def chunks():          # made as the pipeline asks: the same draws in the same order
            made = self.breeder.random_programs(
                self.rng, n, first_lengths(self.cfg.init_length, len(self.genes.names)))
            for start in range(0, n, size):
                t0 = time.perf_counter()
                out = list(itertools.islice(made, size))
                self.children_made += len(out)
                self.timings["generate"] += time.perf_counter() - t0
                yield out
        progs, losses = self.evaluate_chunks(chunks(), n)
        if self.screen is not None:       # learned from once fitted (fit_constants_of)
            t = self.screen.seconds
            self.screen.observe(progs)
            self.timings["predict"] += self.screen.seconds - t
        return [Candidate(p, float(v), self.genes) for p, v in zip(progs, losses)]

    # -- one generation -------------------------------------------------------------------
    def step(self) -> Generation:
        t_start = time.perf_counter()
        self._gen_evaluated = 0
        pool = self.strategy.step(self)
        self._note_best(pool)
        losses = np.array([c.loss for c in pool])
        assert self.best is not None, "a generation has candidates"
        g = Generation(len(self.history), float(self.best.loss), float(np.median(losses)),
                       self._gen_evaluated, float(np.mean([len(c.program) for c in pool])),
                       len(self.archive) if self.strategy.keeps_archive else len(pool),
                       time.perf_counter() - t_start)
        if self.screen is not None:
            self.screen.correlations.append(self.screen.correlation)
        self.history.append(g)
        self.seconds += g.seconds
        return g

    def next_population(self, pop: list[Candidate]) -> list[Candidate]:
        """Tournament-selected parents, their children (scored, the best fitted), and the
        survivors (``survivors``: the best distinct programs of both, or the elites and
        the children)."""
        cfg = self.cfg
        t0 = time.perf_counter()
        fit = self.penalized(pop)
        plus = cfg.survivors == "plus"
        n_el = 0 if plus else min(cfg.elitism, len(pop))
        elite = np.argsort(fit, kind="stable")[:n_el]
        n_child = cfg.population - n_el
        idx = self.rng.integers(0, len(pop), size=(2 * n_child, cfg.tournament))
        win = idx[np.arange(2 * n_child), np.argmin(fit[idx], axis=1)].tolist()
        parents = [pop[i].program for i in win]     # (Python ints: numpy's are slow)
        self.timings["select"] += time.perf_counter() - t0
        kids = self.scored_children(parents[:n_child], parents[n_child:])
        self.fit_constants_of(kids)
        if not plus:
            return [pop[i] for i in elite] + kids
        return self.keep_best(pop + kids, cfg.population)

    def island_parents(self, pop: list[Candidate], sizes: Sequence[int],
                       share: Sequence[int]) -> tuple[list, list]:
        """Tournament-selected parent pairs island by island: ``share[i]`` pairs drawn from
        the ``sizes[i]`` programs of island i (a contiguous run of ``pop``)."""
        t0 = time.perf_counter()
        fit = self.penalized(pop)
        a: list = []
        b: list = []
        lo = 0
        for m, n in zip(sizes, share):
            idx = self.rng.integers(lo, lo + m, size=(2 * n, self.cfg.tournament))
            win = idx[np.arange(2 * n), np.argmin(fit[idx], axis=1)].tolist()
            a += [pop[i].program for i in win[:n]]
            b += [pop[i].program for i in win[n:]]
            lo += m
        self.timings["select"] += time.perf_counter() - t0
        return a, b

    def keep_best(self, both: list[Candidate], n: int) -> list[Candidate]:
        """The best ``n`` distinct programs of ``both`` by penalized loss (ties: in order):
        ``survivors="plus"``'s step, Operon's keep-best."""
        t0 = time.perf_counter()
        keep: list[Candidate] = []
        seen: set[tuple] = set()
        for i in np.argsort(self.penalized(both), kind="stable").tolist():
            # copies of a program would crowd out the variety; programs that differ but
            # compute the same stay (neutral variants: one per (loss, length) solved fewer
            # runs, benchmarks/README.md). The key: each op's words, or an input's name
            # (~4 us a program; sp.encode ~12)
            exact = program_key(both[i].program)
            if exact not in seen:
                seen.add(exact)
                keep.append(both[i])
                if len(keep) == n:
                    break
        self.timings["select"] += time.perf_counter() - t0
        return keep

    def _note_best(self, pool: Sequence[Candidate]) -> None:
        old = math.inf if self.best is None else self.best.loss
        for c in pool:
            b = self.best
            if b is None or c.loss < b.loss or (c.loss == b.loss and
                                                 len(c.program) < len(b.program)):
                self.best = Candidate(list(c.program), c.loss, self.genes, c.fitted)
        if self.best is not None and _improved(self.best.loss, old):
            self.improved_at = len(self.history)

    # -- running --------------------------------------------------------------------------
    def run(self, generations: int, progress: Any) -> Result:
        t0 = time.perf_counter()
        target = self.cfg.target
        self.stopped = "generations"
        for _ in range(generations):
            if target is not None and self.best is not None and self.best.loss <= target:
                self.stopped = "target"
                break
            if self.out_of_time(time.perf_counter() - t0):
                self.stopped = "time_limit"
                break
            g = self.step()
            _report(progress, g, self)
        else:
            if target is not None and self.best is not None and self.best.loss <= target:
                self.stopped = "target"
        return self.result()

    # -- the time limit -------------------------------------------------------------------
    def out_of_time(self, elapsed: float) -> bool:
        """Whether a run ``elapsed`` seconds in must stop for ``time_limit``: the next
        generation (judged to take as long as the last) and then the finishing
        (:meth:`finish_estimate`) would end past it. The first generation always runs (a
        result needs one), unless the limit is already past::

            s.out_of_time(0.0)        # False without a time limit
        """
        limit = self.cfg.time_limit
        if limit is None:
            return False
        if not self.history:
            return elapsed > limit
        return elapsed + self.history[-1].seconds + self.finish_estimate() > limit

    def finish_estimate(self) -> float:
        """Seconds :meth:`result` is estimated to take (what :meth:`out_of_time` leaves it):
        the programs it runs through the evaluator (under linear scaling the population, the
        best, the archive and the front written, :data:`FINISH_WRITE` scorings and
        :data:`FINISH_WRITE_SECONDS` each; the "mdl" rule's probes) at this run's own seconds
        per scored program; the front's entries measured again at the front's own rate; and,
        where the result is re-scored by the compiled path (:mod:`numptx.search.rescore`),
        its calls at the rate of one such call timed once (:meth:`_compiled_seconds`). The
        plain evaluator the writing scores with is made here, once, in the run's time. 0
        before the first generation and for :func:`~numptx.search.searches.evolve` (its
        finishing re-scores at most the best, by the user's fitness; not estimated)::

            s.finish_estimate()       # e.g. 0.1 (population 1000, 20 rows, one CPU core)
        """
        ev = self.evaluator
        if ev is None or not self.history:
            return 0.0
        rate = self._scoring[0] / max(1, self._scoring[1])
        n_best = 1 + len(self.archive)
        n_front = len(self.front.entries)
        n_pop = 0 if self.strategy.keeps_archive else len(self.population)
        n_write = n_pop + n_best + n_front if ev.linear_scaling else 0
        if n_write:
            ev.plain()           # made now (it compiles a kernel), in the run's time
        runs = FINISH_WRITE * n_write
        if self.cfg.model_selection == "mdl":
            runs += sum(1 + len(O.constants_of(c.program)) for c in self.front.entries) + 1
        front = self.front
        est = rate * runs + FINISH_WRITE_SECONDS * n_write + \
            (n_front + 1) * front.seconds / max(1, front.measured)
        if self._rescores():
            calls = [n_best, n_front] + ([n_best] if ev.linear_scaling else [])
            est += sum(self._compiled_seconds(n) for n in calls if n)
        return est

    def _rescores(self) -> bool:
        """Whether :meth:`result` re-scores by the compiled path (:mod:`.rescore`)."""
        ev, sem = self.evaluator, self.semantic
        return ev is not None and (ev.mode == "interpret" or ev.scoring_build == "fast" or (
            sem is not None and len(sem.rows) < ev.X.shape[0]))

    def _compiled_seconds(self, n: int) -> float:
        """The estimated seconds of one compiled re-score of ``n`` programs: one call timed
        once (the best and up to 7 front entries, at the full build; its losses unused), at
        least its time per call (a call builds a module on a GPU), else per program."""
        if self._compiled_rate is None:
            ev = self.evaluator
            assert ev is not None and self.best is not None, "after a generation"
            progs = [self.best.program] + [c.program for c in self.front.entries[:7]]
            t = time.perf_counter()
            ev.score_compiled(progs, build="full")
            self._compiled_rate = (time.perf_counter() - t, len(progs))
        sec, m = self._compiled_rate
        return sec * max(1.0, n / m)

    def result(self) -> Result:
        best, archive, rescored = self.rescored()
        ev = self.evaluator
        keeps = self.strategy.keeps_archive
        pop = list(archive.values()) if keeps else \
            written(ev, self.genes, self.population) if ev is not None else \
            list(self.population)
        return with_front(self, Result(
            best=best, population=pop, history=list(self.history), genes=self.genes,
            generations=len(self.history), stopped=self.stopped, evaluated=self.evaluated,
            seconds=self.seconds, device=ev.device if ev else "template",
            timings=dict(self.timings, front=self.front.seconds),
            archive=archive if keeps else None, seed=self.seed,
            evaluate=ev.mode if ev else "compile", rescored=rescored,
            semantic_duplicates=self.semantic.hits if self.semantic else 0,
            rank_correlations=None if self.screen is None else list(self.screen.correlations),
            _search=self))

    def rescored(self) -> tuple[Candidate | None, dict, Rescore | None]:
        """(best, archive, rescore): see :func:`numptx.search.rescore.returned`."""
        return returned(self, stacklevel=7)      # warns the caller of regress/resume

    # -- checkpoints ----------------------------------------------------------------------
    def save(self, path: Any) -> None:
        ck.write(path, ck.state_of(self))


def _improved(new: float, old: float) -> bool:
    """``new`` is better than ``old`` by 1 % of ``|old|`` (any sign); from +inf any finite
    value is; an ``old`` of 0 needs a negative ``new``."""
    if math.isnan(new) or new >= old:
        return False
    if not math.isfinite(old):
        return True                     # +inf to anything lower (-inf: never reached here)
    return new < old - 0.01 * abs(old)


def _report(progress: Any, g: Generation, s: Search) -> None:
    if not progress:
        return
    if callable(progress):
        progress(g)
        return
    print(f"numptx.search: gen {g.generation:4d}  best {g.best:.6g}  median {g.median:.4g}  "
          f"evaluated {g.evaluated:6d}  len {g.mean_length:5.1f}  {g.seconds * 1e3:7.1f} ms",
          file=sys.stderr, flush=True)
