"""The Pareto front of a search (accuracy against complexity) and the rules that pick a model
from it (``model_selection=``).

A run keeps, for each complexity, the program of lowest loss, as long as it is lower than the
loss of every simpler program kept: a *front* where more complexity always buys a strictly
lower loss. The complexity of a program is :func:`numptx.search.simplify.complexity`, the
nodes of its simplified expression (the ops that reach the output, its inputs and numbers),
so programs that print the same formula (at full precision: :mod:`numptx.search.simplify`)
have the same complexity whatever dead ops they carry::

    r = search.regress(X, y, ["add", "mul", "sin"], seed=0)
    for c in r.front:                     # simplest first, the loss falling
        print(c.complexity, c.loss, c.formula)
    r.model                               # the candidate model_selection picked ("best")
    r.select("accuracy") is r.front[-1]   # the lowest loss
    r.select("mdl")                       # the shortest description (needs the run's data)

What a run offers the front: every new candidate of every generation once its constants are
fitted (children, and each fresh population), with its loss as scored. A candidate whose loss
is not finite, or not below the loss of the front's simplest entry when that entry has the
least complexity there is (1), cannot enter and is not measured. Of the others, the
:data:`MEASURE_LOWEST` lowest losses and the :data:`MEASURE_SHORTEST` shortest programs of
the rest are measured, in one batch a generation (:meth:`Front.offer`; ``timings["front"]``
holds the time it takes). So the front is exact over the candidates measured: a program of
middling loss and many dead ops that simplifies to few nodes can be missed (its short
equivalents are measured when the search makes them). Figures (one CPU core, regress with
population 1000 on benchmarks/sr_compare.py's Nguyen-7, 8 generations, seeds 0-2): measuring
every candidate let through (830-850 a generation) took 48-59 % of the run (0.35-0.6 s a
generation); 32 + 32 took 6-8 % (33-41 ms a generation) and kept all but 2-3 middle entries of
12-14 (some a little worse) and the same ``"best"`` model; returning the front costs 0.1-0.2 s
once a run.

What :attr:`Result.front` returns: the kept programs as :attr:`Result.best` is returned
(re-scored by the compiled path where the run was scored by the interpreter, the screening
build or a partial semantic-dedup probe; under linear scaling the scaling written into each
program, which then carries its plain loss; :func:`numptx.search.rescore.returned`; an
``evolve(build="fast")`` run's entries keep the screening build's losses, but for ``best``:
scoring them again would call the user's fitness again), with
``best`` among them, measured again (the written scaling adds up to 4 nodes: ``f*b + a``) and
made a front again: sorted by complexity, each entry's loss strictly below the one before. So
``result.front[-1]`` has the lowest loss; it is ``result.best`` unless a simpler program
scores exactly as well once written.

Parsimony (``parsimony=p``) adds ``p * complexity`` to each candidate's loss in selection
(:func:`sizes`): the same complexity, measured once a program (kept on its candidate) and
only when ``p > 0``, so a run without parsimony pays nothing for it (with it, every new
child is measured: ~150-250 µs each, 1.4-1.8x the CPU of a generation of 1000 on Nguyen-7
against counting ops, 2026-11-29). A candidate of
non-finite loss is not measured (its penalized loss is non-finite anyway), and a program the
simplifier refuses counts its ops.

The rules (:data:`MODEL_SELECTIONS`), each picking one entry of the front:

- ``"accuracy"``: the lowest loss (the last entry).
- ``"best"`` (the default): PySR's rule (``PySRRegressor(model_selection="best")``, PySR
  0.10 and later): among the entries whose loss is at most 1.5 times the lowest loss, the one
  of highest *score*, where the score of entry i is ``-log(loss_i / loss_{i-1}) / (c_i -
  c_{i-1})`` (the drop of the log-loss per unit of complexity from the entry before; 0 for the
  simplest entry, +inf for a loss of 0). Ties go to the simpler entry. The 1.5 applies to the
  run's loss as it is (PySR's is its loss too: an rmse ratio of 1.5 is an mse ratio of 2.25).
  A front with a negative loss (an evolve fitness may have any sign) has no log-loss: there
  ``"best"`` is ``"accuracy"``, as PySR falls back to it where it has no scores.
- ``"mdl"``: the minimum description length of Bartlett, Desmond & Ferreira ("Exhaustive
  Symbolic Regression", IEEE Trans. Evol. Comput. 2023, arXiv:2211.11461), in the form
  Operon's ``MinimumDescriptionLength`` implements (citing arXiv:2304.06333, sec. 2.2); a
  front searched for accuracy and size, then selected by description length, is what
  Kronberger et al. (arXiv:2605.22374) found to generalize best::

      L = nll + k log(q) + sum_j log|c_j| + sum_i (log|theta_i| + log(I_ii) / 2 - log(3) / 2)

  in nats, where ``nll`` is the Gaussian negative log-likelihood of the residuals over the
  training rows with the noise profiled (``sigma**2`` = their mean square, as Operon does; at
  least ``(eps * rms(y))**2``, eps the data's float epsilon, so an exact fit has a finite
  length), ``k`` the complexity, ``q`` the number of distinct symbols of the simplified
  formula (each operator or function, each input, one for numbers), ``c_j`` the program's
  constants that are whole numbers (no parameters: ``log|c|``, nothing for 0 or 1),
  ``theta_i`` the others (the fitted parameters) and ``I_ii`` the diagonal of their Fisher
  information, ``sum_rows J_ri**2 / sigma**2`` with ``J`` the forward-difference derivative of
  the output by each parameter (the interpreter's outputs, a step of sqrt(eps) relative). A
  parameter known to better than its own size is charged; one whose precision
  ``sqrt(12 / I_ii)`` exceeds ``|theta_i|`` (or that the output does not depend on) is taken as
  zero and charged nothing, as the paper does. The lowest length wins (ties: the simpler
  entry). It reads the data: a run of :func:`numptx.search.evolve` has no ``"mdl"``.
"""
from __future__ import annotations

import ast
import dataclasses
import logging
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .config import MODEL_SELECTIONS, ModelSelection
from .genes import LN2, LOG2E, Genes, SearchError, shown
from .results import Candidate, complexities_of, program_key

log = logging.getLogger(__name__)

__all__ = ["Front", "MODEL_SELECTIONS", "ModelSelection", "BEST_LOSS_RATIO", "check_rule",
           "pareto", "scores", "select", "symbols", "description_lengths", "returned_front",
           "with_front",
           "SearchError"]

#: ``"best"`` considers the entries whose loss is at most this many times the lowest (PySR's)
BEST_LOSS_RATIO = 1.5
#: candidates measured per offer (a generation's), of those the loss filter lets through: the
#: lowest losses (the accurate end of the front) and, of the others, the shortest programs (the
#: simple end: a program has no more nodes than live words); None: all of them. Measuring a
#: candidate cost 0.2-1.5 ms when this was chosen (125-165 us since 2026-11-29), so measuring
#: all of a population of 1000 doubled a generation; 32 + 32 cost 6-8 % of it and kept nearly
#: the same front.
#: Deterministic: the same candidates every run.
MEASURE_LOWEST: int | None = 32
MEASURE_SHORTEST: int | None = 32


def check_rule(rule: Any, where: str = "model_selection") -> str:
    """``rule`` when it is one of :data:`MODEL_SELECTIONS`; else a :class:`SearchError` naming
    the argument::

        check_rule("mdl")              # 'mdl'
        check_rule("score")            # SearchError: model_selection='score': use one of ...
    """
    if not (isinstance(rule, str) and rule in MODEL_SELECTIONS):
        raise SearchError(f"{where}={shown(rule)}: use one of "
                          f"{', '.join(map(repr, MODEL_SELECTIONS))} ('best': PySR's rule, "
                          f"'accuracy': the lowest loss, 'mdl': the shortest description; "
                          f"numptx.search.front)")
    return rule


# ---- the front a run keeps ----------------------------------------------------------------
class Front:
    """The best program of each complexity that beats every simpler one: ``entries``, sorted
    by complexity, losses strictly falling. :meth:`offer` files a generation's candidates::

        front = Front(genes)
        front.offer(cands)             # copies of the ones that enter
        [c.complexity for c in front.entries]
    """

    def __init__(self, genes: Genes, lowest: int | None = MEASURE_LOWEST,
                 shortest: int | None = MEASURE_SHORTEST):
        self.genes, self.lowest, self.shortest = genes, lowest, shortest
        self.entries: list[Candidate] = []
        #: candidates measured (their complexity computed) and the seconds offers took
        self.measured = 0
        self.seconds = 0.0

    def offer(self, cands: Sequence[Candidate]) -> None:
        """File the candidates that enter (copies: the run may change its own in place).
        Only those whose loss is finite and below the simplest entry's (unless that entry is
        more complex than 1, when any might be simpler) are measured, in one batch."""
        t0 = time.perf_counter()
        first = self.entries[0] if self.entries else None
        worst = math.inf if first is None or first.complexity > 1 else first.loss
        todo = self._picked([c for c in cands if c.loss < worst and math.isfinite(c.loss)])
        if todo:
            self.measured += sum(c.known_complexity is None for c in todo)
            for c, k in sorted(_measured(todo), key=lambda t: (t[1], t[0].loss)):
                self._file(c, k)
        self.seconds += time.perf_counter() - t0

    def _picked(self, todo: list[Candidate]) -> list[Candidate]:
        """The candidates to measure: all, or the :data:`MEASURE_LOWEST` lowest losses and
        the :data:`MEASURE_SHORTEST` shortest programs of the others (ties: in order)."""
        if self.lowest is None or self.shortest is None or \
                len(todo) <= self.lowest + self.shortest:
            return todo
        order = sorted(range(len(todo)), key=lambda i: todo[i].loss)
        low, rest = order[:self.lowest], order[self.lowest:]
        short = sorted(rest, key=lambda i: (len(todo[i].program), todo[i].loss, i))
        return [todo[i] for i in sorted(low + short[:self.shortest])]

    def _file(self, c: Candidate, k: int) -> None:
        """Put ``c`` (of complexity ``k``) on the front if it beats every entry of complexity
        <= k; drop the entries it makes redundant."""
        es = self.entries
        i = 0
        while i < len(es) and es[i].complexity <= k:
            i += 1
        if i and es[i - 1].loss <= c.loss:
            return                               # a simpler (or as simple) entry does as well
        j = i
        while j < len(es) and es[j].loss >= c.loss:
            j += 1
        keep = Candidate(list(c.program), c.loss, self.genes, c.fitted)
        keep.remember_complexity(k)
        start = i - 1 if i and es[i - 1].complexity == k else i
        es[start:j] = [keep]

    def restore(self, cands: Sequence[Candidate]) -> None:
        """The entries of a checkpoint (in their order): filed again, measured again."""
        self.entries = []
        for c, k in sorted(_measured(list(cands)), key=lambda t: (t[1], t[0].loss)):
            self._file(c, k)


def _measured(cands: list[Candidate]) -> list[tuple[Candidate, int]]:
    """(candidate, complexity) pairs; a program the simplifier refuses (a SearchError) is left
    off the front, logged, rather than ending the run."""
    try:
        return list(zip(cands, complexities_of(cands).tolist()))
    except SearchError:
        out = []
        for c in cands:
            try:
                out.append((c, c.complexity))
            except SearchError as e:
                log.warning("numptx.search.front: a program left off the front: %s", e)
        return out


def pareto(cands: Sequence[Candidate]) -> list[Candidate]:
    """The front of ``cands``: sorted by complexity, each loss strictly below the one before
    (ties of complexity and loss: the first given). Non-finite losses are left out."""
    ok = [c for c in cands if math.isfinite(c.loss)]
    ks = complexities_of(ok).tolist() if ok else []
    order = sorted(range(len(ok)), key=lambda i: (ks[i], ok[i].loss, i))
    out: list[Candidate] = []
    for i in order:
        if not out or ok[i].loss < out[-1].loss:
            if out and ks[i] == out[-1].complexity:
                continue
            out.append(ok[i])
    return out


# ---- the rules ----------------------------------------------------------------------------
def scores(front: Sequence[Candidate]) -> np.ndarray:
    """PySR's score of each entry of a front: ``-log(loss_i / loss_{i-1}) / (c_i - c_{i-1})``
    (0 for the first, +inf for a loss of 0)."""
    out = np.zeros(len(front))
    if any(c.loss < 0 for c in front):
        raise SearchError("front.scores: a loss is negative; the score is a drop of log-loss")
    for i in range(1, len(front)):
        a, b = front[i - 1], front[i]
        out[i] = math.inf if b.loss <= 0 else \
            -math.log(b.loss / a.loss) / (b.complexity - a.complexity)
    return out


def select(front: Sequence[Candidate], rule: str,
           lengths: Sequence[float] | None = None) -> Candidate | None:
    """The entry of ``front`` that ``rule`` picks (module docstring); None for an empty front.
    ``"mdl"`` needs ``lengths`` (:func:`description_lengths` of the front)."""
    check_rule(rule)
    if not front:
        return None
    low = min(c.loss for c in front)
    if rule == "accuracy" or (rule == "best" and low < 0):
        return min(front, key=lambda c: c.loss)       # the last: losses fall along a front
    if rule == "best":
        s = scores(front)
        ok = [i for i, c in enumerate(front) if c.loss <= BEST_LOSS_RATIO * low]
        return front[max(ok, key=lambda i: (s[i], -i))]
    if lengths is None or len(lengths) != len(front):
        raise SearchError("model_selection='mdl': the description lengths of the front are "
                          "needed (front.description_lengths(front, evaluator))")
    finite = [i for i, v in enumerate(lengths) if math.isfinite(v)]
    if not finite:
        return front[-1]
    return front[min(finite, key=lambda i: (lengths[i], i))]


# ---- the minimum description length -------------------------------------------------------
def symbols(text: str) -> int:
    """The distinct symbols of a formula's text (formula.py's grammar): each operator and
    function, each input, one for all numbers (``:=`` bindings are not symbols)::

        symbols("x0*x1 + sin(x0)*2.5")      # 6: * + sin x0 x1 and a number
    """
    tree = ast.parse(text, mode="eval")
    bound = {n.target.id for n in ast.walk(tree) if isinstance(n, ast.NamedExpr)}
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    seen: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            seen.add("fn:" + n.func.id)
        elif isinstance(n, ast.Name) and id(n) not in called and n.id not in bound:
            seen.add("num" if n.id in ("nan", "inf") else "in:" + n.id)
        elif isinstance(n, ast.Constant):
            seen.add("num")
        elif isinstance(n, (ast.BinOp, ast.UnaryOp)):
            seen.add("op:" + type(n.op).__name__)
    return max(1, len(seen))


def _text(c: Candidate) -> str:
    """The simplified formula (:func:`numptx.search.simplify.simplified` when it is there)."""
    import importlib
    simplify = importlib.import_module(__package__ + ".simplify")
    show = getattr(simplify, "simplified", None)
    return show(c.program, c.genes) if show is not None else c.formula


def _probes(c: Candidate, eps: float) -> tuple[list, list[float], list[float]]:
    """The programs whose outputs a length reads (the candidate, then the candidate with each
    of its constants moved by a forward-difference step), the constants and the steps."""
    from . import operators as O
    macro = {c.genes.round(v) for v in (LOG2E, -LOG2E, LN2)}
    theta = O.constants_of(c.program)
    free = [i for i, v in enumerate(theta) if v not in macro]   # the op macros' own: not
    progs, steps = [list(c.program)], []
    for i in free:
        moved = theta.copy()
        step = math.sqrt(eps) * max(abs(theta[i]), 1.0)
        moved[i] = c.genes.round(theta[i] + step)
        if not math.isfinite(moved[i]):         # near the dtype's largest: a backward step
            moved[i] = c.genes.round(theta[i] - step)
        steps.append(moved[i] - theta[i])
        progs.append(O.with_constants(c.program, moved))
    return progs, [float(theta[i]) for i in free], steps


def _length(c: Candidate, F: np.ndarray, y: np.ndarray, theta: list, steps: list,
            floor: float) -> float:
    """One candidate's description length (module docstring) from the outputs ``F`` of its
    :func:`_probes`."""
    r = F[0] - y
    sse = float(np.sum(r * r))
    var = max(sse / len(y), floor)
    total = 0.5 * len(y) * math.log(2 * math.pi * var) + 0.5 * sse / var
    total += c.complexity * math.log(symbols(_text(c)))
    for j, (t, h) in enumerate(zip(theta, steps)):
        J = (F[1 + j] - F[0]) / h
        info = float(np.sum(J * J)) / var
        if not (math.isfinite(info) and info > 0):
            continue                             # the output does not read it
        if t == round(t):
            total += math.log(abs(t)) if abs(t) > 1 else 0.0      # a whole number: log|c|
        elif abs(t) * math.sqrt(info / 12) >= 1:
            total += math.log(abs(t)) + 0.5 * math.log(info) - 0.5 * math.log(3)
    return total


def description_lengths(front: Sequence[Candidate], evaluator: Any) -> np.ndarray:
    """The minimum description length (nats; module docstring) of each candidate over the
    evaluator's training data (``evaluator.X``, ``evaluator.y``; the interpreter's outputs, of
    all the candidates' probes in one batch); NaN where it is not finite (or the formula's
    text does not parse)::

        lengths = description_lengths(front, evaluator)     # the run's Evaluator
    """
    from .scaling import outputs
    y = np.asarray(evaluator.y, np.float64)
    out = np.full(len(front), np.nan)
    if not front:
        return out
    eps = float(np.finfo(np.float32 if front[0].genes.dtype == "f32" else np.float64).eps)
    floor = (eps * max(float(np.sqrt(np.mean(y * y))), 1e-300)) ** 2
    probes = [_probes(c, eps) for c in front]
    F = outputs(evaluator, [p for progs, _, _ in probes for p in progs])
    at = 0
    for k, (c, (progs, theta, steps)) in enumerate(zip(front, probes)):
        rows, at = F[at:at + len(progs)], at + len(progs)
        try:
            with np.errstate(all="ignore"):
                v = _length(c, rows, y, theta, steps, floor)
        except (SyntaxError, RecursionError, ValueError):
            continue                      # a formula Python's parser cannot read
        out[k] = v if math.isfinite(v) else np.nan
    return out


# ---- what a result returns ----------------------------------------------------------------
def returned_front(search: Any, best: Candidate | None) -> list[Candidate]:
    """:attr:`Result.front` of ``search`` (a :class:`numptx.search.loop.Search`) whose
    returned best is ``best``: the entries re-scored and written as ``best`` is (module
    docstring), ``best`` among them, made a front again. An entry of the search's own best
    program is ``best`` itself (written and re-scored once). Under linear scaling the entries
    are written first and then re-scored once by the compiled path (their scaled losses, which
    the writing replaces, are not re-scored); the re-score is one batch."""
    own = None if search.best is None or best is None else program_key(search.best.program)
    entries = [dataclasses.replace(c, program=list(c.program)) for c in search.front.entries
               if own is None or program_key(c.program) != own]
    ev = search.evaluator
    if ev is None:          # evolve: scored by the user's fitness, which is not called again
        return pareto(([best] if best is not None else []) + entries)
    from .scaling import written
    sem = search.semantic
    partial = sem is not None and len(sem.rows) < ev.X.shape[0]
    compiled = ev.mode == "interpret" or partial or ev.scoring_build == "fast"
    if entries and ev.linear_scaling:
        entries = written(ev, search.genes, entries)
        # written scored them as the run does (the interpreter, the screening build); a
        # partial probe's losses are replaced by written's own scoring
        compiled = ev.mode == "interpret" or ev.scoring_build == "fast"
        ev = ev.plain()
    if entries and compiled:
        got = ev.score_compiled([c.program for c in entries], build="full")
        entries = [dataclasses.replace(c, loss=float(v)) for c, v in zip(entries, got)]
    pool = ([best] if best is not None else []) + entries
    seen: set[tuple] = set()
    unique = []
    for c in pool:
        key = program_key(c.program)
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return pareto(unique)


def with_front(search: Any, result: Any) -> Any:
    """``result`` (a :class:`~numptx.search.results.Result` of ``search``) with its
    :attr:`front` and the :attr:`model` the run's ``model_selection`` picks."""
    result.front = returned_front(search, result.best)
    result.model_selection = search.cfg.model_selection
    result.model = result.select(result.model_selection)
    return result


def sizes(cands: Sequence[Candidate]) -> np.ndarray:
    """What parsimony charges each candidate for: its complexity (float64; measured in one
    batch for those not measured yet, kept on them); 0 for a non-finite loss (not measured);
    the op count of a program the simplifier refuses."""
    out = np.zeros(len(cands))
    pos: dict[int, list[int]] = {}
    for i, c in enumerate(cands):
        if math.isfinite(c.loss):
            out[i] = len(c.program)          # what a refused program keeps
            pos.setdefault(id(c), []).append(i)
    firsts = [cands[ix[0]] for ix in pos.values()]
    for c, k in _measured(firsts):
        out[pos[id(c)]] = k
    return out
