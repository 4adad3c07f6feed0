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
    best = nx.autotune(tmpl, cands, cost="registers", bench=my_bench)   # your own measurement

    @nx.autotuned(candidates=[{"f": f1}, {"f": f2}])  # the decorator form, on @nx.kernel
    @nx.kernel
    def apply(out, a, b): ...
    apply[grid, block](out, a, b)     # tunes once per argument types, shapes, grid and block

A call is a staged job (:class:`AutotuneJob`): candidates (each injected; one whose stubs do
not fit is excluded) -> ranking cache look-up -> builds (one parallel
:func:`~numptx.jit.compile.build.build_many` batch) -> checks -> measuring (the :class:`Benchmark`,
``bench=``) -> caching and ranking. Its settings are one frozen, checked
:class:`AutotuneOptions`. The default benchmark (:func:`default_bench`) times with CUDA events
(seconds, best of ``repeats`` after ``warmup``), a spin kernel queued before each start event
keeping the host's launch cost out of the interval, or reads a static cost from each cubin.
``check=`` runs each candidate once and excludes those that differ from the reference (every
call: checks are not cached). A candidate that fails to build or launch is excluded too
(``failed``). Every array argument is copied before the first launch and restored after the
last (and before each checked candidate), so the caller's arrays come back as they were, even
for in-place kernels. Measured costs are cached on disk, one JSON file per candidate
(:class:`TuneCache`), keyed by the cost, the kernel (entry), the device (name, compute
capability, driver), the variant's cubin key (template digest, architecture, link options, stub
texts, numptx and nvJitLink versions), nvdisasm's version for ``cost="sass"``, the argument
types, shapes and integer values, grid and block: a changed candidate list measures only new
candidates (costs from a ``bench=`` of your own are not cached). Without a GPU,
``cost="time"`` raises :class:`~numptx.jit.errors.LaunchError`; ``cost="sass"`` (needs
``numptx[tools]``) and ``cost="registers"`` rank on the CPU, keyed without device, grid or
arguments. Excluded candidates are listed in one :class:`AutotuneWarning` per call. Under
numba-cuda's simulator an ``@nx.kernel`` kernel ranks by its sites' static costs
(:mod:`numptx.jit.tune.autotune_sim`). The guide: docs/autotune.md.
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

from ..._cores import usable_cores
from ...errors import NumptxError
from ..numba import numba_site
from ..compile.arch import normalize_arch
from ..compile.build import build_many
from ..errors import LaunchError, ToolMissingError, summary
from ..numba.kernel import Kernel, NoSignatureError
from ..targets import Target, require_target
from ..templates.template import CudaTemplate, Template, Variant
from .autotune_args import compare, device_args, host_array, references, Snapshot
from .autotune_options import (AutotuneOptions, Benchmark, BenchRun, Cost, Missing,
                               arg_signature, check_candidates, check_dims, check_outputs,
                               check_settings)
from .autotune_sim import autotune_simulated
from .autotune_types import (COSTS, AutotuneError, AutotuneWarning, Excluded, Stage, Tuned,
                             warn_excluded)
from .tune_cache import TuneCache, entry_key

__all__ = ["autotune", "Tuned", "TuneCache", "AutotuneError", "AutotuneWarning", "Excluded",
           "COSTS", "AutotuneOptions", "AutotuneJob", "Benchmark", "BenchRun", "default_bench",
           "Cost", "Missing", "arg_signature", "check_candidates", "check_dims",
           "check_settings"]

log = logging.getLogger(__name__)

#: cycles the spin kernel runs before each timed launch (about 0.5 ms at 2 GHz: longer than the
#: host needs to record an event and launch)
SPIN_CYCLES = 1_000_000
SPIN_SRC = r'''extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}'''

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
        from ..numba.numba_compat import driver_version
        version = ".".join(map(str, driver_version()))
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
    from ..compile.sass import sass_instructions
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
    from ..compile.sass import find_tool
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


def _template_of(target: Target, args: tuple | None, cc: tuple[int, int] | None) -> Template:
    """The template the candidates are built by (``target.build_template``): a kernel's for
    the argument types (and the device), a template as given (for the device's architecture
    when launching)."""
    if target.per_signature:
        try:
            t = target.build_template(*(args or ()), device=cc)
        except NoSignatureError:
            raise AutotuneError(f"autotune(args=): kernel {target.name!r} has no signature "
                                f"yet: pass args= (example arguments; host NumPy arrays will "
                                f"do) or declare one with @nx.kernel('void(float32[:], ...)')"
                                ) from None
        return t if cc is None else _on_device(t, cc)
    t = target.build_template()
    if args is not None and t.language != "Python":
        # a numba template's PTX takes several parameters per array: its kernel checked them
        try:
            params = t.params
        except NumptxError:           # parameters that cannot be read: the launch decides
            params = None
        if params is not None and len(args) != len(params):
            names = ", ".join(p.name for p in params)
            raise AutotuneError(f"autotune(args=): {len(args)} value(s), but kernel "
                                f"{t.entry!r} takes {len(params)} ({names})")
    return t if cc is None else _on_device(t, cc)


def _need_gpu(cost: str, template: Target) -> None:
    """A :class:`LaunchError` saying what to do instead when nothing can launch here."""
    if gpu_available():
        return
    if numba_site.SIMULATOR:
        where = "numba-cuda's simulator (NUMBA_ENABLE_CUDASIM=1) is on"
        fix = ("cost='registers' (or 'sass') ranks the kernel's sites assembled alone, and "
               "check= then runs in the simulator; @nx.autotuned falls back to cost='registers' "
               "by itself" if template.per_signature else
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


def _simulated(kernel: Kernel, cands: list, args: tuple | None, config: tuple,
               o: AutotuneOptions) -> Tuned:
    """:func:`autotune_simulated` once its own inputs are checked."""
    if args is None:
        raise AutotuneError(f"autotune(args=): under numba-cuda's simulator the sites of kernel "
                            f"{kernel.__name__!r} are read by running it once: pass args= "
                            f"(example arguments)")
    if o.bench is not None:
        raise AutotuneError(f"autotune(bench=): under numba-cuda's simulator kernel "
                            f"{kernel.__name__!r} is ranked by each site assembled alone, with "
                            f"no whole-kernel cubin for a benchmark to measure: leave bench= "
                            f"out, or run without NUMBA_ENABLE_CUDASIM=1")
    outs = None
    if o.check is not None:
        if None in config:
            raise AutotuneError("autotune: grid= and block= are needed to run the candidates "
                                "in the simulator for check=")
        outs = check_outputs(o.output, args)
    return autotune_simulated(kernel, cands, args=args, config=config, check=o.check, outs=outs,
                              rtol=o.rtol, atol=o.atol, cost=o.cost, missing=o.missing)


# measuring
def default_bench(run: BenchRun) -> dict[int, float | BaseException]:
    """The :class:`Benchmark` autotune uses unless given one: for ``cost="time"`` the
    best-of-``repeats`` seconds of each candidate's launch (CUDA events, interleaved rounds, a
    spin kernel before each); for ``"sass"`` and ``"registers"`` the static cost read from each
    cubin (nvdisasm runs in parallel threads)."""
    if run.cost == "time":
        return _time(run.variants, run.args, run.config, run.repeats, run.warmup, run.arch)
    return _measure_static(run.variants, run.cost, run.max_workers)


def _bench_costs(got: Any, todo: Mapping[int, Variant]) -> dict[int, float | BaseException]:
    """A benchmark's answer checked: a cost (a real number >= 0) or an exception for every
    candidate it was given, and nothing else; an AutotuneError saying what is wrong."""
    if not isinstance(got, Mapping):
        raise AutotuneError(f"autotune(bench=): the benchmark returned a "
                            f"{type(got).__name__}, not a mapping of candidate index to cost")
    lost, extra = sorted(set(todo) - set(got)), sorted(set(got) - set(todo), key=repr)
    if lost or extra:
        raise AutotuneError("autotune(bench=): the benchmark returned "
                            + (f"no cost for candidate(s) {', '.join(map(str, lost))}"
                               if lost else "")
                            + ("; " if lost and extra else "")
                            + (f"costs for {', '.join(map(repr, extra))}, which it was not "
                               f"given" if extra else "")
                            + f" (it was given {', '.join(map(str, sorted(todo)))})")
    out: dict[int, float | BaseException] = {}
    for i in todo:
        value = got[i]
        if isinstance(value, BaseException):
            out[i] = value
        elif isinstance(value, bool) or not isinstance(value, numbers.Real) \
                or not value >= 0:
            raise AutotuneError(f"autotune(bench=): candidate {i}: {value!r} is not a cost: "
                                f"return a real number >= 0 (lower is better), or the "
                                f"exception the candidate failed with")
        else:
            out[i] = float(value)
    return out


class AutotuneJob:
    """One :func:`autotune` call, in stages (:meth:`run` runs them in order):
    :meth:`target` (what is launched and where), :meth:`inject` (one variant per candidate),
    :meth:`look_up` (the ranking cache), :meth:`build`, :meth:`measure` (checks, then the
    benchmark), :meth:`record` (costs kept, and cached) and :meth:`rank`. A candidate that
    fails a stage is excluded there (:meth:`exclude`) and goes no further.

    >>> job = AutotuneJob(tmpl, [{"f": f1}, {"f": f2}], None, (None, None),
    ...                   AutotuneOptions(cost="registers"))              # doctest: +SKIP
    >>> job.run().ranking                                                 # doctest: +SKIP
    (1, 0)
    """

    def __init__(self, template: Target, cands: Sequence[Mapping[str, Any]],
                 args: tuple | None, config: tuple, options: AutotuneOptions):
        self.template, self.cands, self.args, self.config = template, cands, args, config
        self.opts = options
        self.launching = options.cost == "time" or options.check is not None
        n = len(cands)
        self.failed: dict[int, str] = {}
        self.stage: dict[int, Stage] = {}
        self.variants: dict[int, Variant] = {}
        self.keys: list[str | None] = [None] * n
        self.costs = [math.inf] * n
        self.from_cache = [False] * n
        self.device: dict[str, str] | None = None
        self.outs: tuple[int, ...] | None = None
        self.context: dict[str, Any] = {}
        self.t: Any = None                    # the template the candidates are built by

    def run(self) -> Tuned:
        """All stages: the :class:`Tuned` of the best candidate."""
        self.target()
        self.inject()
        self.look_up()
        self.build()
        got = self.measure()
        self.record(got)
        return self.rank(got)

    def exclude(self, i: int, stage: Stage, why: str) -> None:
        """Candidate ``i`` failed at ``stage``: out of the running, with why."""
        self.failed[i], self.stage[i] = why, stage

    @property
    def alive(self) -> dict[int, Variant]:
        """The candidates not excluded yet, by index."""
        return {i: v for i, v in self.variants.items() if i not in self.failed}

    def target(self) -> None:
        """What is needed to launch (a GPU, args, grid, block) when launching, then the
        template the candidates are built by (for the device's architecture)."""
        o, args = self.opts, self.args
        if self.launching:
            if o.check is not None and args is not None:
                check_outputs(o.output, args)   # a wrong value is wrong with or without a device
            _need_gpu(o.cost, self.template)    # then: without a device, no argument helps
            if args is None or None in self.config:
                raise AutotuneError("autotune: args=, grid= and block= are needed to launch the "
                                    "candidates (cost='time' or check=)")
            if o.check is not None:
                self.outs = check_outputs(o.output, args)
            self.device = _device()
        cc = tuple(int(x) for x in self.device["cc"].split(".")) if self.device else None
        self.t = _template_of(self.template, args, cc)

    def inject(self) -> None:
        """One variant per candidate; a candidate whose stubs do not fit is excluded."""
        for i, c in enumerate(self.cands):
            try:
                self.variants[i] = self.t.inject(c, missing=self.opts.missing)
            except Exception as e:   # noqa: BLE001 - any stub object may raise; named by index
                self.exclude(i, "stubs", _failure(i, e))

    def look_up(self) -> None:
        """Each candidate's ranking-cache key, and its cost where the cache has it. A
        ``bench=`` of the caller's own is keyed nowhere (its costs are not cached)."""
        o, t = self.opts, self.t
        if o.bench is not None:
            return
        # the entry: two kernels of one module share cubins (variant keys), not costs
        self.context = {"cost": o.cost, "entry": t.entry}
        if o.cost == "sass":
            self.context["nvdisasm"] = _nvdisasm_version()
        if o.cost == "time":
            self.context.update(self.device, args=arg_signature(self.args),
                                grid=self.config[0], block=self.config[1])
        for i, v in self.variants.items():
            self.keys[i] = entry_key(o.cost, self.context, v.key)
            if o.read:
                hit = o.store.get(self.keys[i])
                if hit is not None:
                    self.costs[i], self.from_cache[i] = hit, True

    def build(self) -> None:
        """Build in parallel what is measured or checked (cubins in the cubin cache come from
        it); a candidate that fails to build is excluded."""
        o = self.opts
        need = sorted(self.variants) if o.check is not None else \
            [i for i in self.variants if not self.from_cache[i]]
        if not need:
            return
        built = build_many(_Prepared(self.t, self.variants), need, executor=o.executor,
                           errors="return", missing=o.missing, max_workers=o.max_workers)
        for i, b in zip(need, built):
            if isinstance(b, BaseException):
                self.exclude(i, "build", _failure(i, b))

    def measure(self) -> dict[int, float | BaseException]:
        """Check each candidate (``check=``), then measure those without a cached cost: the
        benchmark's answer. Launches run on the caller's arrays, restored whatever happens."""
        o = self.opts
        if not self.launching:
            return self._bench(None)
        if o.check is None and all(self.from_cache[i] for i in self.alive):
            return {}                         # nothing to launch: every cost is cached
        dargs = device_args(self.args)
        refs = references(o.check, dargs, self.outs) if o.check is not None else []
        snapshot = Snapshot(dargs)
        try:
            if o.check is not None:
                for i, (where, why) in _check(self.alive, dargs, snapshot, self.outs, refs,
                                              self.config, o.rtol, o.atol).items():
                    self.exclude(i, where, why)
            if o.cost == "time":
                return self._bench(dargs)
        finally:
            snapshot.restore()
        return self._bench(None)

    def _bench(self, dargs: tuple | None) -> dict[int, float | BaseException]:
        """The benchmark's costs of the candidates alive and not from the cache."""
        o = self.opts
        todo = {i: v for i, v in self.alive.items() if not self.from_cache[i]}
        if not todo:
            return {}
        run = BenchRun(todo, o.cost, dargs, self.config, o.repeats, o.warmup, self.t.arch,
                       o.max_workers)
        if o.bench is None:
            return _bench_costs(default_bench(run), todo)
        try:
            got = o.bench(run)
        except NumptxError:
            raise
        except Exception as e:   # noqa: BLE001 - the caller's code: named, kept as the cause
            raise AutotuneError(f"autotune(bench=): the benchmark raised "
                                f"{type(e).__name__}: {e}") from e
        return _bench_costs(got, todo)

    def record(self, got: Mapping[int, float | BaseException]) -> None:
        """Keep each measured cost (and cache it); a candidate that failed to run is
        excluded (at ``"launch"`` for ``cost="time"``, ``"measure"`` otherwise)."""
        o, t = self.opts, self.t
        for i, value in got.items():
            if isinstance(value, BaseException):
                self.exclude(i, "launch" if o.cost == "time" else "measure", _failure(i, value))
                continue
            self.costs[i] = value
            if o.store is not None:
                o.store.put(self.keys[i], value, {**self.context, "entry": t.entry,
                                                  "arch": t.arch, "template": t.digest[:16],
                                                  "candidate": i})

    def rank(self, got: Mapping[int, float | BaseException]) -> Tuned:
        """The ranking (cost, then index) of the candidates left, and the winner; an
        AutotuneError when none is left, one AutotuneWarning listing those excluded."""
        t, n, failed, costs, o = self.t, len(self.cands), self.failed, self.costs, self.opts
        for i in failed:
            costs[i], self.from_cache[i] = math.inf, False
            log.warning("numptx: autotune %s: %s: excluded", t.name, failed[i])
        ranking = tuple(sorted((i for i in range(n) if i not in failed),
                               key=lambda i: (costs[i], i)))
        if not ranking:
            lines = "\n".join(f"  {failed[i]}" for i in sorted(failed)[:10])
            raise AutotuneError(f"autotune {t.name}: no candidate left: all {n} failed:\n{lines}",
                                failed=failed)
        excluded = tuple(Excluded(i, self.stage[i], failed[i]) for i in sorted(failed))
        warn_excluded(t.name, excluded, n)
        best = ranking[0]
        winner: Any = self.variants[best]
        if self.template.per_signature:       # launches pick the template of their own args
            winner = self.template.inject(self.cands[best], missing=o.missing)
            winner.adopt(self.variants[best])
        measured = tuple(sorted(i for i in got if i not in failed))
        log.info("numptx: autotune %s (%s): %d candidate(s), %d measured, %d from the cache, "
                 "%d failed; best %d (%g %s)", t.name, o.cost, n, len(measured),
                 sum(self.from_cache), len(failed), best, costs[best], COSTS[o.cost])
        return Tuned(variant=winner, index=best, candidate=self.cands[best], costs=tuple(costs),
                     ranking=ranking, failed=dict(sorted(failed.items())),
                     from_cache=tuple(self.from_cache), measured=measured, cost=o.cost,
                     keys=tuple(self.keys), excluded=excluded)


def autotune(template: Target, candidates: Iterable[Mapping[str, Any]], *,
             args: Sequence[Any] | None = None, grid: Any = None, block: Any = None,
             check: Any = None, output: int | Sequence[int] = 0, rtol: float = 1e-5,
             atol: float = 1e-8, repeats: int = 10, warmup: int = 2, cost: Cost = "time",
             cache: bool | str = True, cache_dir: str | os.PathLike | None = None,
             executor: Executor | None = None, max_workers: int | None = None,
             missing: Missing = "error", bench: Benchmark | None = None) -> Tuned:
    """The best of ``candidates`` (stub mappings, as ``template.inject`` takes them) for a
    launch of ``template`` (a :class:`~numptx.jit.templates.template.Template`, ``nx.CudaTemplate`` or
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
    :func:`~numptx.jit.compile.build.build_many`; ``missing="empty"`` leaves sites without a stub
    no-ops. ``bench``: a :class:`Benchmark` measuring the built candidates in place of
    :func:`default_bench` (a deterministic one in tests, a profiler's metric); its costs are
    not cached. The options are checked as :class:`AutotuneOptions`; the stages are
    :class:`AutotuneJob`'s.

    >>> best = autotune(tmpl, [{"f": f1}, {"f": f2}], args=(out, a, b, n), grid=blocks,
    ...                 block=256, check=lambda out, a, b, n: a + b)     # doctest: +SKIP
    >>> best.index, best.times                                      # doctest: +SKIP
    (1, (3.1e-05, 1.8e-05))
    """
    require_target(template, "autotune(template=)", AutotuneError)
    cands = check_candidates(candidates)
    options = AutotuneOptions(cost=cost, check=check, output=output, rtol=rtol, atol=atol,
                              repeats=repeats, warmup=warmup, cache=cache, cache_dir=cache_dir,
                              executor=executor, max_workers=max_workers, missing=missing,
                              bench=bench)
    if args is not None:
        if isinstance(args, (str, bytes, Mapping)) or not isinstance(args, (tuple, list)):
            raise AutotuneError(f"autotune(args=) is a tuple of the kernel's arguments, not "
                                f"{type(args).__name__}")
        args = tuple(args)
    # checked for every cost: a static ranking must not accept what a launch would refuse
    config = (None if grid is None else check_dims(grid, "grid"),
              None if block is None else check_dims(block, "block"))
    if numba_site.SIMULATOR and template.per_signature and cost != "time":
        return _simulated(template, cands, args, config, options)
    return AutotuneJob(template, cands, args, config, options).run()
