"""What a search returns: :class:`Result` (``best``, the population, the history, timings),
its :class:`Candidate` s (a program with its loss, as formula, stub and predictions) and a
:class:`Generation` per generation of the history::

    r = search.regress(X, y, ["add", "mul"], population=64, generations=3, seed=0)
    r.best.formula, r.best.loss, r.history[-1].best, r.best.predict(X)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from .. import stack_ptx as sp
from .genes import Genes
from .rescore import Rescore

__all__ = ["Result", "Candidate", "Generation", "program_key"]


def _formula_mod():
    # the module (the package's ``formula`` attribute is the function of that name)
    import importlib
    return importlib.import_module(__package__ + ".formula")


def _export():
    import importlib
    return importlib.import_module(__package__ + ".export")


# ---- results ------------------------------------------------------------------------------
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

    @property
    def formula(self) -> str:
        return _formula_mod().formula(self.program, self.genes)

    @property
    def length(self) -> int:
        return len(self.program)

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
    None).
    ``save(path)`` writes a checkpoint that :func:`resume` continues."""
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
    _search: Any = field(default=None, repr=False)

    def save(self, path: Any) -> None:
        """Write the search's state to ``path`` (versioned, checksummed, atomic)."""
        self._search.save(path)

    @property
    def candidates_per_second(self) -> float:
        """Candidates evaluated (scored after dedup, constant-fit trials included) per second
        of the run, end to end (:attr:`evaluated` / :attr:`seconds`)."""
        return self.evaluated / self.seconds if self.seconds > 0 else 0.0

    @property
    def children_per_second(self) -> float:
        """Children made (generated, deduplicated or scored, selected) per second, end to end."""
        n = self._search.children_made
        return n / self.seconds if self.seconds > 0 else 0.0
