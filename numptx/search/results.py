"""What a search returns: :class:`Result` (``best``, the population, the history, timings),
its :class:`Candidate` s (a program with its loss, as formula, stub and predictions) and a
:class:`Generation` per generation of the history::

    r = search.regress(X, y, ["add", "mul"], population=64, generations=3, seed=0)
    r.best.formula, r.best.loss, r.history[-1].best, r.best.predict(X)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .. import stack_ptx as sp
from .genes import Genes, SearchError
from .rescore import Rescore

__all__ = ["Result", "Candidate", "Generation", "program_key", "complexities_of"]


def _formula_mod():
    # the module (the package's ``formula`` attribute is the function of that name)
    import importlib
    return importlib.import_module(__package__ + ".formula")


def _export():
    import importlib
    return importlib.import_module(__package__ + ".export")


# ---- results ------------------------------------------------------------------------------
def complexities_of(cands: Sequence[Candidate]) -> np.ndarray:
    """Each candidate's :attr:`~Candidate.complexity` (int64): those not measured yet measured
    in one batch per genes (:func:`numptx.search.simplify.complexities`) and kept on the
    candidate."""
    out = np.array([c.known_complexity if c.known_complexity is not None else -1
                    for c in cands], np.int64)
    groups: dict[int, list[int]] = {}          # one batch per genes: each compiles with its own
    for i in np.flatnonzero(out < 0).tolist():
        groups.setdefault(id(cands[i].genes), []).append(i)
    if groups:
        import importlib
        simplify = importlib.import_module(__package__ + ".simplify")
    for todo in groups.values():
        got = simplify.complexities([cands[i].program for i in todo], cands[todo[0]].genes)
        for i, k in zip(todo, got.tolist()):
            cands[i].remember_complexity(k)
            out[i] = k
    return out


def program_key(program: Any) -> tuple:
    """A program's identity as its words: each op's encoded bytes, or an input's name (~4 µs a
    program; ``sp.encode`` ~12). Two programs with one key are one program."""
    return tuple(op.raw or op.name for op in program)


class Generation(NamedTuple):
    """One row of :attr:`Result.history`."""
    generation: int
    best: float            #: lowest loss so far
    median: float          #: median loss of the population (MAP-Elites: of the archive)
    evaluated: int         #: programs scored this generation (after dedup; constant fits count)
    mean_length: float     #: mean program length (ops) of the population
    filled: int            #: MAP-Elites: archive cells filled; else the population size
    seconds: float         #: wall time of the generation


@dataclass
class Candidate:
    """A program with its loss. ``formula`` is readable infix text; ``stub(site)`` the PTX to
    inject at ``site`` (a :class:`numptx.Site` whose inputs include the genes' input names with
    the genes' dtype and whose one out/mod variable, of that dtype, takes the result: else a
    SearchError; no site: a stub over registers ``%x0..`` and ``%y``); ``program`` works with
    ``sp.dumps``."""
    program: list
    loss: float
    genes: Genes
    fitted: bool = False
    #: (program, complexity) once measured: :attr:`complexity` (kept while ``program`` is the
    #: same list; a copy made by ``dataclasses.replace`` measures again)
    _complexity: tuple | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def formula(self) -> str:
        return _formula_mod().formula(self.program, self.genes)

    def simplified(self, exact: bool = False, digits: int = 6) -> str:
        """The formula simplified (:func:`numptx.search.simplify.simplified`): by the algebra
        of real numbers (like terms merged, constants combined, ``x/x`` as 1: equal to the
        program in exact arithmetic), or with ``exact=True`` only the rewrites that keep every
        bit (canonical order of commutative operands, ``x**n``)::

            r.best.simplified()        # 'x0*(0.5*x0 + 0.99999*sin(x1))'
        """
        import importlib
        simplify = importlib.import_module(__package__ + ".simplify")
        return simplify.simplified(self.program, self.genes, exact=exact, digits=digits)

    @property
    def length(self) -> int:
        return len(self.program)

    @property
    def complexity(self) -> int:
        """The nodes of the simplified expression (:func:`numptx.search.simplify.complexity`:
        each op that reaches the output, each input, each number), measured once."""
        k = self.known_complexity
        if k is None:
            k = int(complexities_of([self])[0])
        return k

    @property
    def known_complexity(self) -> int | None:
        """:attr:`complexity` when it has been measured for the current program, else None."""
        memo = self._complexity
        return memo[1] if memo is not None and memo[0] is self.program else None

    def remember_complexity(self, k: int) -> None:
        """Keep ``k`` as the complexity of the current program (what the front measured)."""
        self._complexity = (self.program, int(k))

    def stub(self, site: Any = None) -> sp.Stub:
        if site is None:
            return sp.compile(self.program, self.genes.inputs, self.genes.outputs)
        self.genes.check_site(site, "Candidate.stub")
        return sp.compile(self.program, site=site)

    def predict(self, X: Any) -> np.ndarray:
        """The program's output on ``X`` (n x d), run by the stub emulator on the CPU."""
        from ..dsl.emulator import emulate
        X = np.asarray(X, np.float64 if self.genes.dtype == "f64" else np.float32)
        X = X[:, None] if X.ndim == 1 else X
        d = len(self.genes.names)
        if X.ndim != 2 or X.shape[1] != d:
            raise SearchError(f"Candidate.predict: X of shape {X.shape}: give one column per "
                              f"input, {d} ({', '.join(self.genes.names)}), in that order")
        with np.errstate(all="ignore"):
            got = emulate(self.stub(), {n: X[:, j] for j, n in enumerate(self.genes.names)},
                          {"y": self.genes.dtype})["y"]
        return np.broadcast_to(np.asarray(got), (X.shape[0],)).copy()

    # ---- export (numptx/search/export.py: what each form reads and computes) ----
    def sympy(self, symbols: Any = None) -> Any:
        """The formula as a sympy expression over Symbols named like the inputs (or the
        expressions ``symbols`` maps a name to); sympy: ``pip install "numptx[sympy]"``."""
        ex = _export()
        return ex.sympy_of(ex.readable_text(self.program, self.genes), self.genes.names,
                           dtype=self.genes.dtype, symbols=symbols)

    def latex(self, digits: int = 6) -> str:
        """The formula as LaTeX (sympy's printer; numbers to ``digits`` significant digits)."""
        return _export().latex_of(self.sympy(), digits=digits)

    def numpy(self) -> Any:
        """A picklable NumPy function ``f(X)`` / ``f(x0, x1, ...)`` of the formula, in the
        genes' dtype (it agrees with :meth:`predict` as numptx/search/formula.py says)."""
        ex = _export()
        return ex.NumpyFormula(ex.exact_text(self.program, self.genes), self.genes)

    def ptx_expr(self, name: str = "formula", precision: str = "accurate") -> Any:
        """The formula as an ``@nx.ptx_expr`` named ``name`` over the inputs: inject it with
        ``stub(site)``, differentiate it with ``nx.grad``, autotune it."""
        ex = _export()
        return ex.ptx_expr_of(ex.exact_text(self.program, self.genes), self.genes, name=name,
                              precision=precision)

    def __repr__(self) -> str:
        try:
            text = self.formula
        except Exception:   # noqa: BLE001 - a repr never fails
            text = f"<{len(self.program)} ops>"
        return f"Candidate(loss={self.loss:.6g}, {text})"


@dataclass
class Result:
    """What a search returns: ``best`` (the lowest raw loss seen, ties to the shorter program;
    ``parsimony`` only steers selection, it is not in ``best``'s choice; None when no
    generation ran), ``population`` (the last one; MAP-Elites: the archive's elites),
    ``history`` (a :class:`Generation` per generation), ``archive`` (MAP-Elites: cell ->
    :class:`Candidate`), ``generations`` done, ``stopped`` (why: ``"generations"``,
    ``"target"``, ``"time_limit"``), ``evaluated`` (programs scored), ``seconds``, ``timings``
    (seconds per stage), ``device``, ``seed`` (the one used: drawn when none was given),
    ``evaluate`` (what scored the run: ``"interpret"`` or ``"compile"``), ``rescored`` (when the
    interpreter scored it, or semantic dedup ran on a probe of fewer rows than the data:
    ``best`` and the elites re-scored by the compiled path, whose losses they carry; a
    :class:`~numptx.search.rescore.Rescore`, else None),
    ``semantic_duplicates`` (children that took the loss of a program of equal outputs on the
    probe rows, :mod:`numptx.search.semantic`), ``rank_correlations`` (with ``predictor=``:
    one a generation, the Spearman correlation of the predictor's ranking with the losses of
    the children it let through, None while it learns; :mod:`numptx.search.screening`; else
    None), ``front`` (the Pareto front: per complexity the lowest loss, simplest first, each
    loss below the one before; returned as ``best`` is, so ``front[-1]`` has the lowest loss),
    ``model`` (the entry of the front that ``model_selection`` picks: ``"best"``,
    ``"accuracy"`` or ``"mdl"``, :mod:`numptx.search.front`; :meth:`select` applies another
    rule). ``save(path)`` writes a checkpoint that :func:`resume` continues."""
    best: Candidate | None
    population: list[Candidate]
    history: list[Generation]
    genes: Genes
    generations: int
    stopped: str
    evaluated: int
    seconds: float
    device: str
    timings: dict = field(default_factory=dict)
    archive: dict | None = None
    seed: int | None = None
    evaluate: str = "compile"
    rescored: Rescore | None = None
    semantic_duplicates: int = 0
    rank_correlations: list | None = None
    front: list[Candidate] = field(default_factory=list)
    model: Candidate | None = None
    model_selection: str = "best"
    _search: Any = field(default=None, repr=False)
    _lengths: Any = field(default=None, repr=False)

    def select(self, rule: str) -> Candidate | None:
        """The entry of :attr:`front` that ``rule`` picks (``"best"``, ``"accuracy"``,
        ``"mdl"``: :mod:`numptx.search.front`; another is a SearchError); ``"mdl"`` reads the
        run's data (measured once)::

            r.select("accuracy") is r.front[-1]      # True
        """
        import importlib
        front = importlib.import_module(__package__ + ".front")
        if front.check_rule(rule) != "mdl" or not self.front:
            return front.select(self.front, rule)
        if self._lengths is None:
            ev = getattr(self._search, "evaluator", None)
            if ev is None:
                raise front.SearchError("model_selection='mdl': the description length reads "
                                        "the run's data, and this result has none (an evolve "
                                        "run, or a Result without its search); use 'best' or "
                                        "'accuracy'")
            self._lengths = front.description_lengths(self.front, ev)
        return front.select(self.front, rule, self._lengths)

    def save(self, path: Any) -> None:
        """Write the search's state to ``path`` (versioned, checksummed, atomic)."""
        if self._search is None:
            from .genes import SearchError
            raise SearchError("Result.save: this result has no search state (it was "
                              "unpickled: a pickle keeps the result, not the run); save the "
                              "run's own result, or pickle it")
        self._search.save(path)

    def __getstate__(self) -> dict:
        """The pickled state: the result without its search (the run's data, compiled
        modules and pools, which do not pickle): ``save`` needs the run's own result, and
        ``select("mdl")`` the description lengths measured before pickling (a run of
        ``model_selection="mdl"`` has them; ``r.select("mdl")`` before pickling measures
        them)."""
        state = dict(self.__dict__)
        search = state.pop("_search", None)
        state["_search"] = None
        state["_children_made"] = getattr(search, "children_made",
                                          self.__dict__.get("_children_made", 0))
        return state

    def __copy__(self) -> Result:
        """A shallow copy shares the search (``save`` works on it), unlike a pickle."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        return new

    @property
    def candidates_per_second(self) -> float:
        """Candidates evaluated (scored after dedup, constant-fit trials included) per second
        of the run, end to end (:attr:`evaluated` / :attr:`seconds`)."""
        return self.evaluated / self.seconds if self.seconds > 0 else 0.0

    @property
    def children_per_second(self) -> float:
        """Children made (generated, deduplicated or scored, selected) per second, end to end."""
        n = self._search.children_made if self._search is not None else \
            self.__dict__.get("_children_made", 0)
        return n / self.seconds if self.seconds > 0 else 0.0
