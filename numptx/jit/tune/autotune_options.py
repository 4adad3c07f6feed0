"""What :func:`numptx.autotune` is asked: its settings as one frozen, checked
:class:`AutotuneOptions`, the :class:`Benchmark` seam that measures candidates, and the input
checks (each error an :class:`~numptx.jit.tune.autotune_types.AutotuneError` naming its option).
Re-exported by :mod:`numptx.jit.tune.autotune`.

>>> AutotuneOptions(cost="registers", cache=False).repeats
10
>>> AutotuneOptions.of({"cost": "sass", "warmup": 0}).warmup
0
>>> check_dims((4, 2), "block")
(4, 2, 1)

A benchmark is any callable taking a :class:`BenchRun` and returning ``{index: cost}`` (an
exception for a candidate that failed to run), as Triton's autotuner takes a ``do_bench``::

    def by_registers(run: BenchRun) -> dict[int, float | BaseException]:
        return {i: float(v.resources.registers) for i, v in run.variants.items()}

    nx.autotune(tmpl, cands, cost="registers", bench=by_registers)
"""
from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Protocol

import numpy as np

from ... import config
from .autotune_args import is_array
from .autotune_types import COSTS, AutotuneError
from ..compile.cache import default_cache_dir
from .tune_cache import TuneCache

__all__ = ["AutotuneOptions", "Benchmark", "BenchRun", "Cost", "Missing", "check_candidates",
           "check_dims", "check_outputs", "check_settings", "arg_signature"]

#: what candidates are ranked by (:data:`~numptx.jit.tune.autotune_types.COSTS` gives each unit)
Cost = Literal["time", "sass", "registers"]
#: what a site without a stub is: an error, or a no-op
Missing = Literal["error", "empty"]


@dataclass(frozen=True)
class BenchRun:
    """What a :class:`Benchmark` measures: the built candidates still in the running
    (``variants``: index -> Variant, cubins built), and how :func:`autotune` was asked to
    measure them. ``args`` are the device arguments (``cost="time"``; the arrays restored by
    autotune afterwards) or None; ``config`` is ``(grid, block)`` as 3-tuples (or None each);
    ``arch`` the architecture the candidates were built for."""
    variants: Mapping[int, Any]
    cost: str
    args: tuple | None
    config: tuple
    repeats: int
    warmup: int
    arch: str
    max_workers: int | None


class Benchmark(Protocol):
    """Measures candidates: ``bench(run)`` returns a cost for every index of ``run.variants``
    (a real number >= 0, lower is better, in the unit of ``run.cost``), or the exception that
    candidate failed with (it is then excluded, at stage ``"launch"`` for ``cost="time"``,
    ``"measure"`` otherwise). The default times launches with CUDA events (``cost="time"``) or
    reads static costs from the cubins; one passed as ``bench=`` replaces it (its costs are
    neither read from nor written to the ranking cache)."""

    def __call__(self, run: BenchRun, /) -> Mapping[int, float | BaseException]: ...


def check_candidates(candidates: Any) -> list[Mapping[str, Any]]:
    """``candidates`` as a list of stub mappings (one per candidate), or an AutotuneError."""
    if isinstance(candidates, Mapping):
        raise AutotuneError("autotune(candidates=) is a list of stub mappings, one per "
                            "candidate ([{'f': f1}, {'f': f2}]), not one mapping")
    if isinstance(candidates, (str, bytes)) or not isinstance(candidates, Iterable):
        raise AutotuneError(f"autotune(candidates=) is a list of stub mappings, not "
                            f"{type(candidates).__name__}")
    cands = list(candidates)
    if not cands:
        raise AutotuneError("autotune(candidates=[]): give at least one candidate")
    for i, c in enumerate(cands):
        if not isinstance(c, Mapping):
            raise AutotuneError(f"candidate {i}: a mapping of site name to stub ({{'f': stub}}), "
                                f"not {type(c).__name__}")
        bad = [k for k in c if not isinstance(k, str)]
        if bad:
            raise AutotuneError(f"candidate {i}: site names are strings, not {bad[0]!r}")
    return cands


def _count(value: Any, what: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)) \
            or int(value) < least:
        raise AutotuneError(f"autotune({what}={value!r}): an int >= {least}")
    return int(value)


def _tolerance(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not float(value) >= 0:
        raise AutotuneError(f"autotune({what}={value!r}): a real number >= 0")
    return float(value)


def check_dims(d: Any, what: str) -> tuple[int, int, int]:
    """A grid or block (an int, or 1 to 3 of them) as a 3-tuple, or an AutotuneError."""
    t = tuple(d) if isinstance(d, (tuple, list)) else (d,)
    if not 1 <= len(t) <= 3 or not all(isinstance(x, (numbers.Integral, np.integer))
                                       and not isinstance(x, bool) and int(x) >= 1 for x in t):
        raise AutotuneError(f"autotune({what}={d!r}): a positive int or a tuple of 1 to 3 of them")
    x, y, z = (*(int(v) for v in t), 1, 1)[:3]
    return x, y, z


def _tune_cache(cache: Any, cache_dir: Any) -> tuple[TuneCache | None, bool]:
    """(the cache or None, whether to read it) for ``cache=`` and ``cache_dir=``."""
    if not (isinstance(cache, bool) or isinstance(cache, str) and cache == "refresh"):
        raise AutotuneError(f"autotune(cache={cache!r}): use True, False or 'refresh'")
    if cache is False:
        return None, False
    if cache_dir is not None:
        if not isinstance(cache_dir, (str, os.PathLike)):
            raise AutotuneError(f"autotune(cache_dir=) is a folder path, not "
                                f"{type(cache_dir).__name__}")
        return TuneCache(cache_dir), cache is True
    if not config.cache_enabled():
        return None, False                    # the user keeps numptx off the disk
    return TuneCache(default_cache_dir()), cache is True


@dataclass(frozen=True, eq=False)       # check= may be an array: compared by identity
class AutotuneOptions:
    """:func:`autotune`'s settings (its keyword arguments but ``args``, ``grid`` and
    ``block``), checked when made: a bad one is an AutotuneError naming it. ``repeats``,
    ``warmup``, ``rtol`` and ``atol`` come out as int and float; ``store`` (the ranking cache
    or None) and ``read`` (whether to read it) follow from ``cache``, ``cache_dir``, ``bench``
    and ``NUMPTX_CACHE``.

    >>> AutotuneOptions(cost="fast")
    Traceback (most recent call last):
        ...
    numptx.jit.tune.autotune_types.AutotuneError: autotune(cost='fast'): use one of 'time', 'sass', 'registers'
    """
    cost: Cost = "time"
    check: Any = None
    output: int | Sequence[int] = 0
    rtol: float = 1e-5
    atol: float = 1e-8
    repeats: int = 10
    warmup: int = 2
    cache: bool | Literal["refresh"] = True
    cache_dir: str | os.PathLike | None = None
    executor: Executor | None = None
    max_workers: int | None = None
    missing: Missing = "error"
    bench: Benchmark | None = None
    store: TuneCache | None = field(init=False, repr=False, compare=False, default=None)
    read: bool = field(init=False, repr=False, compare=False, default=False)

    def __post_init__(self) -> None:
        cost, missing, check = self.cost, self.missing, self.check
        if not isinstance(cost, str) or cost not in COSTS:
            raise AutotuneError(f"autotune(cost={cost!r}): use one of "
                                f"{', '.join(map(repr, COSTS))}")
        if not isinstance(missing, str) or missing not in ("error", "empty"):
            raise AutotuneError(f"autotune(missing={missing!r}): use 'error' or 'empty'")
        put = object.__setattr__             # frozen: normalized once, here
        put(self, "repeats", _count(self.repeats, "repeats", 1))
        put(self, "warmup", _count(self.warmup, "warmup", 0))
        put(self, "rtol", _tolerance(self.rtol, "rtol"))
        put(self, "atol", _tolerance(self.atol, "atol"))
        # a Python scalar is a reference as np.float32(1) is: broadcast to the output's shape
        if not (check is None or callable(check)
                or isinstance(check, (list, tuple, numbers.Number)) or hasattr(check, "__array__")):
            raise AutotuneError(f"autotune(check=): an array, a number, a callable or None, not "
                                f"{type(check).__name__}")
        for j in self.output if isinstance(self.output, (tuple, list)) else (self.output,):
            if isinstance(j, bool) or not isinstance(j, (numbers.Integral, np.integer)):
                raise AutotuneError(f"autotune(output={self.output!r}): argument indices "
                                    f"(ints), not {j!r}")
        if self.executor is not None and not isinstance(self.executor, Executor):
            raise AutotuneError(f"autotune(executor=): a concurrent.futures.Executor or None, "
                                f"not {type(self.executor).__name__}")
        if self.max_workers is not None:
            _count(self.max_workers, "max_workers", 1)
        if self.bench is not None and not callable(self.bench):
            raise AutotuneError(f"autotune(bench=): a callable taking a BenchRun and returning "
                                f"{{index: cost}} (see numptx.jit.tune.autotune.Benchmark), not "
                                f"{type(self.bench).__name__}")
        store, read = _tune_cache(self.cache, self.cache_dir)
        if self.bench is not None:           # its costs are not the cache's to keep
            store, read = None, False
        put(self, "store", store)
        put(self, "read", read)

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> AutotuneOptions:
        """Options from a mapping of option names (``@nx.autotuned``'s keywords, a config
        file); an unknown name is an AutotuneError listing the valid ones."""
        names = [f.name for f in fields(cls) if f.init]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise AutotuneError(f"autotune: unknown option(s) {', '.join(map(str, unknown))}; "
                                f"it takes {', '.join(sorted(names))}")
        return cls(**options)


def check_settings(cost: Any, check: Any, output: Any, rtol: Any, atol: Any, repeats: Any,
                   warmup: Any, cache: Any, cache_dir: Any, executor: Any, max_workers: Any,
                   missing: Any, bench: Any = None
                   ) -> tuple[int, int, float, float, TuneCache | None, bool]:
    """:func:`autotune`'s options checked, each error naming its option (also at decoration
    time, by :class:`~numptx.jit.tune.autotune_decorator.Autotuned`): (repeats, warmup, rtol, atol,
    the cache, whether to read). :class:`AutotuneOptions` does the checking."""
    o = AutotuneOptions(cost=cost, check=check, output=output, rtol=rtol, atol=atol,
                        repeats=repeats, warmup=warmup, cache=cache, cache_dir=cache_dir,
                        executor=executor, max_workers=max_workers, missing=missing, bench=bench)
    return o.repeats, o.warmup, o.rtol, o.atol, o.store, o.read


def check_outputs(output: Any, args: tuple) -> tuple[int, ...]:
    """``output`` (an argument index, or several) as non-negative indices of array arguments
    in ``args``, or an AutotuneError naming the index."""
    outs = output if isinstance(output, (tuple, list)) else (output,)
    if not outs:
        raise AutotuneError("autotune(output=()): name at least one output argument")
    for j in outs:
        if isinstance(j, bool) or not isinstance(j, (numbers.Integral, np.integer)) \
                or not -len(args) <= int(j) < len(args):
            raise AutotuneError(f"autotune(output={output!r}): {j!r} is no index into the "
                                f"{len(args)} argument(s)")
        if not is_array(args[j]):
            raise AutotuneError(f"autotune(output={output!r}): argument {int(j)} is a "
                                f"{type(args[j]).__name__}, not an array the kernel writes")
    return tuple(int(j) % len(args) for j in outs)


def arg_signature(args: Sequence[Any]) -> list[str]:
    """What the ranking cache keys on for each argument: an array's dtype, shape and strides;
    an integer's type and value (sizes change timings); other values' types.

    >>> arg_signature((np.zeros((2, 3), np.float32), 7, 0.5))
    ['array <f4 (2, 3) (12, 4)', 'int 7', 'float']
    """
    out = []
    for a in args:
        cai = getattr(a, "__cuda_array_interface__", None)
        if isinstance(cai, Mapping):
            out.append(f"array {cai.get('typestr')} {tuple(cai.get('shape', ()))} "
                       f"{tuple(cai['strides']) if cai.get('strides') else None}")
        elif isinstance(a, np.ndarray):
            out.append(f"array {a.dtype.str} {a.shape} {a.strides}")
        elif isinstance(a, (bool, np.bool_)) or a is None:
            out.append(repr(a))
        elif isinstance(a, (numbers.Integral, np.integer)):
            out.append(f"{type(a).__name__} {int(a)}")
        else:
            out.append(type(a).__name__)
    return out
