"""numptx.learn: small, fast, deterministic models for the search's own data (issue 25).

Learning in the loop at the search's time scale: a model trained online on every scored
candidate ranks the next generation's children in microseconds, so only the promising share
is scored in full; the same features give MAP-Elites learned behaviour descriptors.

* models (:mod:`.models`): :class:`RandomFeatureRidge` (ridge regression on random features,
  closed form, updated online from sufficient statistics) and :class:`MLP` (1-2 hidden
  layers, a few full-batch steps an update); ``partial_fit(F, y)``, ``predict(F)``,
  ``rank(F)``; seeded and picklable; NumPy only;
* features (:mod:`.features`): :func:`features` (programs -> a float32 matrix, one row a
  program: from their words, and from their outputs on probe rows through the interpreter);
* :func:`spearman`: the rank correlation the search reports.

::

    import numpy as np
    from numptx import learn
    rng = np.random.default_rng(0)
    F = rng.normal(size=(1000, 16)).astype(np.float32)
    y = F[:, 0] - 2 * F[:, 1] ** 2
    model = learn.RandomFeatureRidge(seed=0).partial_fit(F, y)
    order = model.rank(F)            # best (lowest predicted) first
"""
from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING, Any

from .errors import LearnError
# the function, not its module: importing numptx.learn.features binds the package's attribute
# ``features`` to the module, so the function is bound here, after that import
from .features import Probe, features

_LAZY: dict[str, str] = {
    "RandomFeatureRidge": "numptx.learn.models", "MLP": "numptx.learn.models",
    "Model": "numptx.learn.models", "spearman": "numptx.learn.models",
}

if TYPE_CHECKING:
    from .models import MLP, Model, RandomFeatureRidge, spearman

__all__ = ["LearnError", "RandomFeatureRidge", "MLP", "Model", "spearman", "features", "Probe"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
