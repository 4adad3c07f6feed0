"""``nx.autotune``: the fastest of several candidates (stub sets) of one template, on the device.

::

    best = nx.autotune(tmpl, [{"f": f1}, {"f": f2}, {"f": f3}], args=(out, a, b, n),
                       grid=grid, block=block, check=reference)     # or check=None
    best.variant[grid, block](out, a, b, n)     # the winner, built
    best.index, best.times, best.ranking        # seconds per candidate (inf: failed)
    best.failed                                 # {index: why} for excluded candidates
    best.excluded                               # (Excluded(index, stage, reason), ...)

    best = nx.autotune(tmpl, cands, cost="sass")     # no GPU: static SASS instruction count
    best = nx.autotune(tmpl, cands, cost="registers")

    @nx.autotuned(candidates=[{"f": f1}, {"f": f2}])  # the decorator form, on @nx.kernel
    @nx.kernel
    def apply(out, a, b): ...
    apply[grid, block](out, a, b)     # tunes once per argument types, shapes, grid and block

The candidates are built in one parallel :func:`~numptx.jit.build.build_many` batch; times are
CUDA events (seconds, best of ``repeats`` after ``warmup``), a spin kernel queued before each
start event keeping the host's launch cost out of the interval; ``check=`` runs each candidate
once and excludes those that differ from the reference (every call: checks are not cached). A
candidate that fails to build or launch is excluded too (``failed``). Every array argument is
copied before the first launch and restored after the last (and before each checked
candidate), so the caller's arrays come back as they were, even for in-place kernels.
Measured costs are cached on disk, one JSON file per candidate (:class:`TuneCache`), keyed by
the cost, the kernel (entry), the device (name, compute capability, driver), the variant's cubin
key (template digest, architecture, link options, stub texts, numptx and nvJitLink versions),
nvdisasm's version for ``cost="sass"``, the argument
types, shapes and integer values, grid and block: a changed candidate list measures only new
candidates. Without a GPU, ``cost="time"`` raises :class:`~numptx.jit.errors.LaunchError`;
``cost="sass"`` (needs ``numptx[tools]``) and ``cost="registers"`` rank on the CPU, keyed
without device, grid or arguments. Excluded candidates are listed in one
:class:`AutotuneWarning` per call. Under numba-cuda's simulator an ``@nx.kernel`` kernel ranks
by its sites' static costs (:mod:`numptx.jit.autotune_sim`). The guide: docs/autotune.md.
"""
from __future__ import annotations

import functools
import logging
import math
import numbers
import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

import numpy as np

from .._cores import usable_cores
from ..errors import NumptxError
from . import numba_site
from .arch import normalize_arch
from .build import build_many
from .cache import default_cache_dir
from .errors import LaunchError, ToolMissingError, summary
from .kernel import Kernel, NumbaTemplate
from .template import CudaTemplate, Template, Variant
from .autotune_args import compare, device_args, host_array, is_array, references, Snapshot
from .autotune_sim import autotune_simulated
from .autotune_types import (COSTS, AutotuneError, AutotuneWarning, Excluded, Stage, Tuned,
                             warn_excluded)
from .tune_cache import TuneCache, entry_key

__all__ = ["autotune", "Tuned", "TuneCache", "AutotuneError", "AutotuneWarning", "Excluded",
           "COSTS"]

log = logging.getLogger(__name__)

#: cycles the spin kernel runs before each timed launch (about 0.5 ms at 2 GHz: longer than the
#: host needs to record an event and launch)
SPIN_CYCLES = 1_000_000
SPIN_SRC = r'''extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}'''


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
    if os.environ.get("NUMPTX_CACHE", "1").strip().lower() in ("0", "off", "no", "false"):
        return None, False                    # the user keeps numptx off the disk
    return TuneCache(default_cache_dir()), cache is True


# input checks
def check_candidates(candidates: Any) -> list[Mapping[str, Any]]:
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
            or value < least:
        raise AutotuneError(f"autotune({what}={value!r}): an int >= {least}")
    return int(value)


def _tolerance(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
        raise AutotuneError(f"autotune({what}={value!r}): a real number >= 0")
    return float(value)


def check_dims(d: Any, what: str) -> tuple[int, int, int]:
    t = tuple(d) if isinstance(d, (tuple, list)) else (d,)
    if not 1 <= len(t) <= 3 or not all(isinstance(x, (numbers.Integral, np.integer))
                                       and not isinstance(x, bool) and x >= 1 for x in t):
        raise AutotuneError(f"autotune({what}={d!r}): a positive int or a tuple of 1 to 3 of them")
    return tuple(int(x) for x in t) + (1,) * (3 - len(t))


def check_settings(cost: Any, check: Any, output: Any, rtol: Any, atol: Any, repeats: Any,
              warmup: Any, cache: Any, cache_dir: Any, executor: Any, max_workers: Any,
              missing: Any) -> tuple[int, int, float, float, TuneCache | None, bool]:
    """:func:`autotune`'s options checked, each error naming its option (also at decoration
    time, by :class:`Autotuned`): (repeats, warmup, rtol, atol, the cache, whether to read)."""
    if not isinstance(cost, str) or cost not in COSTS:
        raise AutotuneError(f"autotune(cost={cost!r}): use one of {', '.join(map(repr, COSTS))}")
    if not isinstance(missing, str) or missing not in ("error", "empty"):
        raise AutotuneError(f"autotune(missing={missing!r}): use 'error' or 'empty'")
    repeats, warmup = _count(repeats, "repeats", 1), _count(warmup, "warmup", 0)
    rtol, atol = _tolerance(rtol, "rtol"), _tolerance(atol, "atol")
    # a Python scalar is a reference as np.float32(1) is: broadcast to the output's shape
    if not (check is None or callable(check) or isinstance(check, (list, tuple, numbers.Number))
            or hasattr(check, "__array__")):
        raise AutotuneError(f"autotune(check=): an array, a number, a callable or None, not "
                            f"{type(check).__name__}")
    for j in output if isinstance(output, (tuple, list)) else (output,):
        if isinstance(j, bool) or not isinstance(j, (numbers.Integral, np.integer)):
            raise AutotuneError(f"autotune(output={output!r}): argument indices (ints), not "
                                f"{j!r}")
    if executor is not None and not isinstance(executor, Executor):
        raise AutotuneError(f"autotune(executor=): a concurrent.futures.Executor or None, not "
                            f"{type(executor).__name__}")
    if max_workers is not None:
        _count(max_workers, "max_workers", 1)
    return (repeats, warmup, rtol, atol) + _tune_cache(cache, cache_dir)


def _outputs(output: Any, args: tuple) -> tuple[int, ...]:
    outs = output if isinstance(output, (tuple, list)) else (output,)
    if not outs:
        raise AutotuneError("autotune(output=()): name at least one output argument")
    for j in outs:
        if isinstance(j, bool) or not isinstance(j, (numbers.Integral, np.integer)) \
                or not -len(args) <= j < len(args):
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


# the device
def gpu_available() -> bool:
    """Whether a CUDA GPU can run CUDA C++ here (not numba-cuda's simulator)."""
    if numba_site.SIMULATOR:
        return False
    try:
        from numba import cuda
        return bool(cuda.is_available())
    except Exception:   # noqa: BLE001 - no driver, no numba-cuda: no GPU
        return False


def _device() -> dict[str, str]:
    """Name, compute capability and driver version of the current device."""
    from numba import cuda
    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    cc = dev.compute_capability
    try:
        from numba.cuda.cudadrv import driver
        version = ".".join(map(str, driver.driver.get_version()))
    except Exception:   # noqa: BLE001 - an older numba-cuda: the runtime's view of it
        version = "unknown"
    return {"device": name, "cc": f"{cc[0]}.{cc[1]}", "driver": version}


_spins: dict[str, Variant] = {}


def _spin(arch: str) -> Variant:
    v = _spins.get(arch)
    if v is None:
        v = _spins[arch] = CudaTemplate(SPIN_SRC, entry="spin", arch=arch).inject()
    return v


def _on_device(t: Template, cc: tuple[int, int]) -> Template:
    """``t`` assembling for the device's architecture where nvJitLink can take it there, so
    the parallel build makes the cubins the launches load (else each launch would rebuild)."""
    number, suffix = normalize_arch(t.arch)
    dev = cc[0] * 10 + cc[1]
    return t.for_arch(f"sm_{dev}") if dev > number and not suffix else t


# measuring: static costs, checks, times
def _static_cost(v: Variant, cost: str) -> float:
    if cost == "registers":
        return float(v.resources.registers)
    from .sass import sass_instructions
    return float(len(sass_instructions(v.cubin, v.entry)))


@functools.lru_cache(maxsize=None)
def _tool_version(path: str) -> str:
    try:
        r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
        return " ".join(r.stdout.split()) or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _nvdisasm_version() -> str:
    """What ``cost="sass"`` counts with (another nvdisasm may print another listing);
    :class:`ToolMissingError` without one."""
    from .sass import find_tool
    return _tool_version(find_tool("nvdisasm"))


def _measure_static(variants: Mapping[int, Variant], cost: str,
                    max_workers: int | None) -> dict[int, float | BaseException]:
    """Static costs, nvdisasm runs in parallel threads (subprocesses release the GIL)."""
    out: dict[int, float | BaseException] = {}
    workers = max(1, min(len(variants), max_workers or min(32, usable_cores())))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="numptx-autotune") as pool:
        futs = {i: pool.submit(_static_cost, v, cost) for i, v in variants.items()}
        for i, f in futs.items():
            try:
                out[i] = f.result()
            except ToolMissingError:
                raise                 # not this candidate's fault: say what to install
            except NumptxError as e:
                out[i] = e
    return out


def _failure(i: int, e: BaseException) -> str:
    return f"candidate {i}: {type(e).__name__}: {summary(e)}"


def _check(variants: Mapping[int, Variant], dargs: tuple, snapshot: Snapshot,
           outs: tuple[int, ...], refs: list[np.ndarray], config: tuple, rtol: float,
           atol: float) -> dict[int, tuple[Stage, str]]:
    """Run each candidate once from the arguments' initial contents and compare; one that
    fails to launch (too many registers for the block, say) is excluded, not fatal."""
    from numba import cuda
    failed: dict[int, tuple[Stage, str]] = {}
    for i, v in variants.items():
        snapshot.restore()
        try:
            v[config](*dargs)
            cuda.synchronize()
        except Exception as e:   # noqa: BLE001 - any launch error; named by index
            failed[i] = ("launch", _failure(i, e))
            continue
        for j, want in zip(outs, refs):
            why = compare(i, j, host_array(dargs[j]), want, rtol, atol)
            if why is not None:
                failed[i] = ("check", why)
                break
    return failed


def _time(variants: Mapping[int, Variant], dargs: tuple, config: tuple, repeats: int,
          warmup: int, arch: str) -> dict[int, float | BaseException]:
    """Best-of-``repeats`` seconds per candidate (the error for one that fails to launch):
    interleaved rounds, each launch between two events on stream 0 with a spin kernel queued
    first, so the host's launch cost falls inside the spin, not the interval."""
    if not variants:
        return {}
    from numba import cuda
    spin = _spin(arch)[1, 1]
    out: dict[int, float | BaseException] = {}
    launches = {}
    for i, v in variants.items():
        try:
            launch = v[config]
            # loads the module, fills caches and clocks; at least once (warmup=0 too), so no
            # module load is timed
            for _ in range(max(1, warmup)):
                launch(*dargs)
            cuda.synchronize()        # an asynchronous launch error surfaces here, named
            launches[i] = launch
        except Exception as e:   # noqa: BLE001 - any launch error; named by index
            out[i] = e
    spin(SPIN_CYCLES)
    cuda.synchronize()
    start, stop = cuda.event(), cuda.event()
    best = {i: math.inf for i in launches}
    for _ in range(repeats):
        for i, launch in list(launches.items()):
            try:
                spin(SPIN_CYCLES)
                start.record(stream=0)
                launch(*dargs)
                stop.record(stream=0)
                stop.synchronize()
            except Exception as e:   # noqa: BLE001 - any launch error; named by index
                out[i] = e
                del launches[i], best[i]
                continue
            best[i] = min(best[i], cuda.event_elapsed_time(start, stop) / 1e3)
    return {**out, **best}


# autotune
class _Prepared:
    """A template as :func:`build_many` takes it, whose batch items are indices of variants
    injected already (so stubs are resolved once, and their warnings given once)."""

    def __init__(self, template: Template, variants: Mapping[int, Variant]):
        self._template, self._variants = template, variants

    def inject(self, token: int, /, *, missing: str = "error") -> Variant:
        return self._variants[token]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._template, name)


def _template_of(target: Any, args: tuple | None, cc: tuple[int, int] | None) -> Template:
    """The template the candidates are built by: a kernel's for the argument types (and the
    device), a template as given (for the device's architecture when launching)."""
    if isinstance(target, Kernel):
        if cc is None:
            if not args and getattr(target, "_declared", None) is None \
                    and getattr(target, "_last", None) is None:
                raise AutotuneError(f"autotune(args=): kernel {target.__name__!r} has no "
                                    f"signature yet: pass args= (example arguments; host "
                                    f"NumPy arrays will do) or declare one with "
                                    f"@nx.kernel('void(float32[:], ...)')")
            return target.template(*(args or ()))
        return _on_device(target.template_for_device(target.argtypes(*args), cc), cc)
    if args is not None and not isinstance(target, NumbaTemplate):
        # a numba template's PTX takes several parameters per array: its kernel checked them
        try:
            params = target.params
        except NumptxError:           # parameters that cannot be read: the launch decides
            params = None
        if params is not None and len(args) != len(params):
            names = ", ".join(p.name for p in params)
            raise AutotuneError(f"autotune(args=): {len(args)} value(s), but kernel "
                                f"{target.entry!r} takes {len(params)} ({names})")
    return target if cc is None else _on_device(target, cc)


def _need_gpu(cost: str, template: Any) -> None:
    """A :class:`LaunchError` saying what to do instead when nothing can launch here."""
    if gpu_available():
        return
    if numba_site.SIMULATOR:
        where = "numba-cuda's simulator (NUMBA_ENABLE_CUDASIM=1) is on"
        fix = ("cost='registers' (or 'sass') ranks the kernel's sites assembled alone, and "
               "check= then runs in the simulator; @nx.autotuned falls back to cost='registers' "
               "by itself" if isinstance(template, Kernel) else
               "cost='registers' or cost='sass' ranks by a static cost; only @nx.kernel kernels "
               "launch under the simulator")
    else:
        where, fix = "no CUDA GPU is available", ""
    if cost == "time":
        raise LaunchError(f"autotune: cost='time' times each candidate on the device, but "
                          f"{where}: " + (fix or "pass cost='sass' (SASS instruction count) or "
                                          "cost='registers' to rank candidates by a static "
                                          "cost without one"))
    raise LaunchError(f"autotune: check= runs each candidate on the device, but {where}: "
                      + (fix or "pass check=None to rank by a static cost without one"))


def _simulated(kernel: Kernel, cands: list, args: tuple | None, config: tuple, check: Any,
               output: Any, rtol: float, atol: float, cost: str, missing: str) -> Tuned:
    """:func:`autotune_simulated` once its own inputs are checked."""
    if args is None:
        raise AutotuneError(f"autotune(args=): under numba-cuda's simulator the sites of kernel "
                            f"{kernel.__name__!r} are read by running it once: pass args= "
                            f"(example arguments)")
    outs = None
    if check is not None:
        if None in config:
            raise AutotuneError("autotune: grid= and block= are needed to run the candidates "
                                "in the simulator for check=")
        outs = _outputs(output, args)
    return autotune_simulated(kernel, cands, args=args, config=config, check=check, outs=outs,
                              rtol=rtol, atol=atol, cost=cost, missing=missing)


def autotune(template: Template | Kernel, candidates: Iterable[Mapping[str, Any]], *,
             args: Sequence[Any] | None = None, grid: Any = None, block: Any = None,
             check: Any = None, output: int | Sequence[int] = 0, rtol: float = 1e-5,
             atol: float = 1e-8, repeats: int = 10, warmup: int = 2, cost: str = "time",
             cache: bool | str = True, cache_dir: str | os.PathLike | None = None,
             executor: Executor | None = None, max_workers: int | None = None,
             missing: str = "error") -> Tuned:
    """The best of ``candidates`` (stub mappings, as ``template.inject`` takes them) for a
    launch of ``template`` (a :class:`~numptx.jit.template.Template`, ``nx.CudaTemplate`` or
    ``@nx.kernel`` kernel) with ``args`` on ``grid`` x ``block``.

    ``cost``: ``"time"`` (CUDA events on the GPU, seconds, best of ``repeats`` after
    ``warmup`` launches), ``"sass"`` (SASS instructions of the kernel) or ``"registers"``; the
    static costs need no GPU (nor grid, block or, for CUDA C++, args). ``check``: the expected
    contents of ``args[output]`` (an array, or a callable taking host copies of the arguments
    and returning it; a tuple of them for several outputs), compared with ``rtol``/``atol``;
    a candidate that differs, or fails to build or launch, is excluded and listed in
    ``failed``. Every array in ``args`` is copied first and restored before each checked
    candidate and at the end, so afterwards it holds what it held before (the copies take the
    arrays' memory once more on the device). ``warmup=0`` still launches each candidate once,
    untimed, to load it. ``cache``: True (read and write
    the ranking cache under ``cache_dir``, default numptx's cache folder), ``"refresh"``
    (measure again, write), False. ``executor``/``max_workers`` go to
    :func:`~numptx.jit.build.build_many`; ``missing="empty"`` leaves sites without a stub
    no-ops.

    >>> best = autotune(tmpl, [{"f": f1}, {"f": f2}], args=(out, a, b, n), grid=blocks,
    ...                 block=256, check=lambda out, a, b, n: a + b)     # doctest: +SKIP
    >>> best.index, best.times                                      # doctest: +SKIP
    (1, (3.1e-05, 1.8e-05))
    """
    if not isinstance(template, (Template, Kernel)):
        raise AutotuneError(f"autotune(template=): a CudaTemplate, Template or @nx.kernel "
                            f"kernel, not {type(template).__name__}")
    cands = check_candidates(candidates)
    repeats, warmup, rtol, atol, store, read = check_settings(
        cost, check, output, rtol, atol, repeats, warmup, cache, cache_dir, executor,
        max_workers, missing)
    if args is not None:
        if isinstance(args, (str, bytes, Mapping)) or not isinstance(args, (tuple, list)):
            raise AutotuneError(f"autotune(args=) is a tuple of the kernel's arguments, not "
                                f"{type(args).__name__}")
        args = tuple(args)
    # checked for every cost: a static ranking must not accept what a launch would refuse
    config = (None if grid is None else check_dims(grid, "grid"),
              None if block is None else check_dims(block, "block"))
    launching = cost == "time" or check is not None
    if numba_site.SIMULATOR and isinstance(template, Kernel) and cost != "time":
        return _simulated(template, cands, args, config, check, output, rtol, atol, cost,
                          missing)
    outs = None
    if launching:
        if check is not None and args is not None:
            _outputs(output, args)      # a wrong value is wrong with or without a device
        _need_gpu(cost, template)       # then: without a device, no missing argument helps
        if args is None or grid is None or block is None:
            raise AutotuneError("autotune: args=, grid= and block= are needed to launch the "
                                "candidates (cost='time' or check=)")
        if check is not None:
            outs = _outputs(output, args)
    device = _device() if launching else None
    cc = tuple(int(x) for x in device["cc"].split(".")) if device else None
    t = _template_of(template, args, cc)

    # one variant per candidate; a candidate whose stubs do not fit is excluded, with its index
    n = len(cands)
    failed: dict[int, str] = {}
    stage: dict[int, Stage] = {}
    variants: dict[int, Variant] = {}
    for i, c in enumerate(cands):
        try:
            variants[i] = t.inject(c, missing=missing)
        except Exception as e:   # noqa: BLE001 - any stub object may raise; named by index
            failed[i], stage[i] = _failure(i, e), "stubs"

    # the entry: two kernels of one module share cubins (variant keys), not costs
    context: dict[str, Any] = {"cost": cost, "entry": t.entry}
    if cost == "sass":
        context["nvdisasm"] = _nvdisasm_version()
    if cost == "time":
        context.update(device, args=arg_signature(args), grid=config[0], block=config[1])
    keys: list[str | None] = [None] * n
    costs = [math.inf] * n
    from_cache = [False] * n
    for i, v in variants.items():
        keys[i] = entry_key(cost, context, v.key)
        if read:
            hit = store.get(keys[i])
            if hit is not None:
                costs[i], from_cache[i] = hit, True
    todo = [i for i in variants if not from_cache[i]]

    # build in parallel what is measured or checked (cubins in the cubin cache come from it)
    need = sorted(variants) if check is not None else todo
    if need:
        built = build_many(_Prepared(t, variants), need, executor=executor, errors="return",
                           missing=missing, max_workers=max_workers)
        for i, b in zip(need, built):
            if isinstance(b, BaseException):
                failed[i], stage[i] = _failure(i, b), "build"
    alive = {i: v for i, v in variants.items() if i not in failed}

    got: Mapping[int, float | BaseException] = {}
    if launching and (check is not None or any(not from_cache[i] for i in alive)):
        dargs = device_args(args)            # nothing to launch when every cost is cached
        refs = references(check, dargs, outs) if check is not None else []
        # candidates run on the caller's arrays: restored after, whatever happens
        snapshot = Snapshot(dargs)
        try:
            if check is not None:
                for i, (where, why) in _check(alive, dargs, snapshot, outs, refs, config, rtol,
                                              atol).items():
                    failed[i], stage[i] = why, where
                alive = {i: v for i, v in alive.items() if i not in failed}
            if cost == "time":
                got = _time({i: v for i, v in alive.items() if not from_cache[i]}, dargs,
                            config, repeats, warmup, t.arch)
        finally:
            snapshot.restore()
    if cost != "time":
        got = _measure_static({i: v for i, v in alive.items() if not from_cache[i]}, cost,
                              max_workers)
    for i, value in got.items():
        if isinstance(value, BaseException):
            failed[i], stage[i] = _failure(i, value), "launch" if cost == "time" else "measure"
            continue
        costs[i] = value
        if store is not None:
            store.put(keys[i], value, {**context, "entry": t.entry, "arch": t.arch,
                                       "template": t.digest[:16], "candidate": i})
    for i in failed:
        costs[i], from_cache[i] = math.inf, False
        log.warning("numptx: autotune %s: %s: excluded", t.name, failed[i])
    ranking = tuple(sorted((i for i in range(n) if i not in failed), key=lambda i: (costs[i], i)))
    if not ranking:
        lines = "\n".join(f"  {failed[i]}" for i in sorted(failed)[:10])
        raise AutotuneError(f"autotune {t.name}: no candidate left: all {n} failed:\n{lines}",
                            failed=failed)
    excluded = tuple(Excluded(i, stage[i], failed[i]) for i in sorted(failed))
    warn_excluded(t.name, excluded, n)
    best = ranking[0]
    winner: Any = variants[best]
    if isinstance(template, Kernel):          # launches pick the template of their own args
        winner = template.inject(cands[best], missing=missing)
        winner.adopt(variants[best])
    measured = tuple(sorted(i for i in got if i not in failed))
    log.info("numptx: autotune %s (%s): %d candidate(s), %d measured, %d from the cache, "
             "%d failed; best %d (%g %s)", t.name, cost, n, len(measured), sum(from_cache),
             len(failed), best, costs[best], COSTS[cost])
    return Tuned(variant=winner, index=best, candidate=cands[best], costs=tuple(costs),
                 ranking=ranking, failed=dict(sorted(failed.items())),
                 from_cache=tuple(from_cache), measured=measured, cost=cost, keys=tuple(keys),
                 excluded=excluded)
