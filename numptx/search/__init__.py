"""Evolutionary search over Stack PTX programs (issue 15): symbolic regression, MAP-Elites and
the evolution of any template's site, with genes, operators and formula printing.

::

    import numpy as np
    from numptx import search
    X = np.random.uniform(-1, 1, (2000, 2)).astype(np.float32)
    y = (1 / (1 + X[:, 0] ** -4) + 1 / (1 + X[:, 1] ** -4)).astype(np.float32)      # Pagie-1
    result = search.regress(X, y, ops=["add", "sub", "mul", "div", "exp", "log", "sin", "cos"],
                            population=1000, generations=50, seed=0)
    result.best.formula, result.best.loss, result.history[-1]
    result.best.stub(site)          # PTX for any site with inputs x0, x1 and one f32 output
    result.save("run.nxck"); result = search.resume("run.nxck", generations=50)

See docs/search.md. Modules: :mod:`.genes` (building blocks), :mod:`.operators` (variation),
:mod:`.formula` (printing, keys), :mod:`.evaluate` (scoring on CPU/GPU: the interpreter or the
compiled path), :mod:`.semantic` (dedup by outputs on probe rows), :mod:`.rescore` (what the
interpreter scored, re-scored by the compiled path), :mod:`.constants` (the local optimizer), :mod:`.searches` (the search functions), :mod:`.loop` (a run's generations), :mod:`.config` (options, their defaults and
bounds), :mod:`.elites` (MAP-Elites), :mod:`.checkpoint` (files), :mod:`.fields` (the checks of
a checkpoint's fields), :mod:`.resume` (continuing a saved run), :mod:`.estimator`
(``SymbolicRegressor``, the scikit-learn estimator: ``numptx.search.SymbolicRegressor`` imports
scikit-learn when it is asked for, so this package imports without it).
"""
from . import genes, operators, formula as formula_module  # noqa: F401
from .checkpoint import CheckpointError
from .formula import FormulaLimitError, canonical_key, evaluate, formula
from .genes import Genes, SearchError
from .elites import DESCRIPTORS, Descriptor
from .loop import Candidate, Generation, Result
from .searches import evolve, map_elites, regress
from .rescore import Rescore
from .simplify import complexities, complexity, simplified
from .resume import resume
# the formula evaluator, again: importing the submodule numptx.search.evaluate (the loop
# scores through it) set the package's ``evaluate`` to that module
from .formula import evaluate  # noqa: E402,F811

__all__ = ["regress", "map_elites", "evolve", "resume", "Result", "Candidate", "Generation",
           "Rescore", "Descriptor", "DESCRIPTORS", "Genes", "SearchError", "CheckpointError", "formula",
           "FormulaLimitError", "evaluate", "canonical_key", "genes", "operators", "simplified",
           "complexity", "complexities"]


def __getattr__(name: str):   # SymbolicRegressor: scikit-learn is imported when it is asked for
    if name == "SymbolicRegressor":
        from .estimator import SymbolicRegressor
        return SymbolicRegressor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
