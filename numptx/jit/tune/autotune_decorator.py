"""``nx.autotuned``: the decorator form of :func:`numptx.jit.tune.autotune.autotune`.

::

    @nx.autotuned(candidates=[{"f": f1}, {"f": f2}], check=reference)
    @nx.kernel
    def apply(out, a, b): ...
    apply[grid, block](out, a, b)     # tunes once per argument types, shapes, grid and block

Tuning restores every array argument afterwards (see ``autotune``), then the winner is launched
once on them, so a launch computes what the winner alone would, tuned or not. Re-exported by
:mod:`numptx.jit.tune.autotune`.

Under numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``) nothing can be timed: an
``@nx.kernel`` kernel tuned with ``cost="time"`` (the default) is ranked by
``cost="registers"`` instead (each site's stubs assembled by nvJitLink, see
:mod:`numptx.jit.tune.autotune_sim`), with an :class:`~numptx.jit.tune.autotune_types.AutotuneWarning`
once per tuning, so a kernel written for the GPU runs unchanged in the simulator. ``check=``
then runs each candidate in the simulator.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ...errors import warn_from_caller
from .autotune import AutotuneError, Tuned, check_candidates, check_dims, check_settings, arg_signature, autotune
from .autotune_types import AutotuneWarning
from ..numba.numba_site import SIMULATOR
from ..targets import Target, require_target

__all__ = ["Autotuned", "autotuned"]

#: autotune's options, as the decorator takes them, with autotune's defaults
DEFAULTS: dict[str, Any] = {"check": None, "output": 0, "rtol": 1e-5, "atol": 1e-8,
                            "repeats": 10, "warmup": 2, "cost": "time", "cache": True,
                            "cache_dir": None, "executor": None, "max_workers": None,
                            "missing": "error", "bench": None}


def _check_options(options: Mapping[str, Any]) -> None:
    """Bad options fail at decoration, not at the first launch."""
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise AutotuneError(f"nx.autotuned: unknown option(s) {', '.join(unknown)}; it takes "
                            f"{', '.join(sorted(DEFAULTS))}")
    try:
        check_settings(**{**DEFAULTS, **options})
    except AutotuneError as e:
        raise AutotuneError(f"nx.autotuned: {e}") from None


class Autotuned:
    """A template or ``@nx.kernel`` kernel that launches the best of ``candidates``:
    ``tuned[grid, block](*args)`` runs :func:`autotune` on the first launch of each argument
    signature (types, shapes, integer values), grid and block, then launches its winner.
    ``tune(*args, grid=, block=)`` returns that :class:`Tuned` without launching; ``tunings``
    holds those made so far. Tunings are made one at a time (a lock): two threads never time
    on the GPU together, nor tune one launch twice.

    >>> @autotuned(candidates=[{"f": f1}, {"f": f2}])      # doctest: +SKIP
    ... @nx.kernel
    ... def apply(out, a, b): ...
    >>> apply[blocks, 256](out, a, b)                      # doctest: +SKIP
    """

    def __init__(self, target: Target, candidates: Iterable[Mapping[str, Any]],
                 **options: Any):
        require_target(target, "nx.autotuned (put @nx.autotuned above @nx.kernel)",
                       AutotuneError)
        _check_options(options)
        self.target = target
        self.candidates = check_candidates(candidates)
        self.options = options
        self.tunings: dict[tuple, Tuned] = {}
        self._lock = threading.Lock()
        self.__name__ = target.name
        self.__doc__ = getattr(target, "__doc__", None)

    def __repr__(self) -> str:
        return f"<nx.autotuned {self.__name__}: {len(self.candidates)} candidate(s)>"

    def tune(self, *args: Any, grid: Any = None, block: Any = None) -> Tuned:
        """The :class:`Tuned` of a launch with ``args`` on ``grid`` x ``block`` (made on first
        use, then kept)."""
        key = (tuple(arg_signature(args)),
               None if grid is None else check_dims(grid, "grid"),
               None if block is None else check_dims(block, "block"))
        tuned = self.tunings.get(key)
        if tuned is None:
            with self._lock:
                tuned = self.tunings.get(key)      # another thread may have tuned it meanwhile
                if tuned is None:
                    tuned = self.tunings[key] = autotune(self.target, self.candidates, args=args,
                                                         grid=grid, block=block,
                                                         **self._options())
        return tuned

    def _options(self) -> dict[str, Any]:
        """autotune's options for this process: under the simulator an ``@nx.kernel`` kernel's
        ``cost="time"`` becomes ``cost="registers"`` (warned), nothing being timed there."""
        if not (SIMULATOR and self.target.per_signature
                and self.options.get("cost", DEFAULTS["cost"]) == "time"):
            return self.options
        warn_from_caller(f"nx.autotuned {self.__name__}: numba-cuda's simulator "
                         f"(NUMBA_ENABLE_CUDASIM=1) times nothing: the candidates are ranked by "
                         f"cost='registers' (each site's stubs assembled by nvJitLink) instead "
                         f"of cost='time'; on a GPU they are timed", AutotuneWarning)
        return {**self.options, "cost": "registers"}

    def __getitem__(self, config: Any) -> Callable[..., None]:
        if not isinstance(config, tuple) or len(config) != 2:
            raise AutotuneError(f"{self.__name__}[grid, block](*args): an autotuned kernel "
                                f"launches with a grid and a block only, got {config!r}")
        grid, block = config

        def launch(*args: Any) -> None:
            # tuning leaves args as they were: the winner's one launch is the only one seen
            self.tune(*args, grid=grid, block=block).variant[grid, block](*args)
        return launch

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise AutotuneError(f"an autotuned kernel is launched with a grid and a block: "
                            f"{self.__name__}[grid, block](*args)")


def autotuned(target: Target | None = None, /, *,
              candidates: Iterable[Mapping[str, Any]] | None = None, **options: Any):
    """An :class:`Autotuned` kernel: ``nx.autotuned(tmpl, candidates=[...], **options)``, or as
    a decorator above ``@nx.kernel``::

        @nx.autotuned(candidates=[{"f": f1}, {"f": f2}], check=reference)
        @nx.kernel
        def apply(out, a, b): ...

    ``options`` are :func:`autotune`'s (``check``, ``output``, ``rtol``, ``atol``, ``repeats``,
    ``warmup``, ``cost``, ``cache``, ``cache_dir``, ``executor``, ``max_workers``,
    ``missing``), checked here."""
    if candidates is None:            # bare @nx.autotuned, or candidates forgotten
        raise AutotuneError("nx.autotuned needs candidates=: @nx.autotuned(candidates=[{'f': "
                            "f1}, {'f': f2}]) above @nx.kernel, or nx.autotuned(tmpl, "
                            "candidates=[...])")
    cands = check_candidates(candidates)
    _check_options(options)
    if target is None:
        return lambda t: Autotuned(t, cands, **options)
    return Autotuned(target, cands, **options)
