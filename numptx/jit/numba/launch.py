"""Launching variants of numba kernels: ``variant[grid, block, stream, sharedmem](*args)``.

On a GPU, numba-cuda compiles the kernel for the argument types and the device (its argument
marshalling, array transfers and launch code are used as they are); the cubin is the variant of
the kernel's own template for those argument types and the device's architecture
(``Kernel.template(*argtypes, cc=device)``: what ``build_many`` builds for that architecture is
launched as it is), assembled with nvJitLink through the cubin cache, loaded in the current
context and launched with numba's launcher. Kernels that need numba to link more code
(NRT, cooperative groups, ``link=[...]`` files) are refused. What a launch resolved (the
loaded kernel per numba signature, the dimensions) is kept per variant and context and reused
by later launches whose arguments have the same numba types (``_launch_planned``; the plan
and its argument typers: :mod:`numptx.jit.numba.launch_plan`); anything else takes the full path
(``residency.LAUNCH_PLANS = False`` turns plans off).

Under the simulator (``NUMBA_ENABLE_CUDASIM=1``) the Python function runs on the CPU and each
``nx.site`` evaluates its stub: PTX text, Stack PTX programs and ``@nx.ptx_expr`` formulas (their
stub, bound to the site as the build binds it) run in the stub emulator (:func:`numptx.emulate`),
or with ``nx.kernel(..., simulate="reference")`` a formula runs its NumPy reference
(:meth:`PtxExpr.binding <numptx.dsl.expr.PtxExpr.binding>`); other objects with a ``.stub``
method are called with the site's inputs by name. Blocks run in waves whose threads take turns,
and the threads of a wave evaluate a site together, once per site signature and round on arrays
(:mod:`numptx.jit.numba.sim_waves`); each gets what it alone would get. What the real build
refuses is refused there too: stubs for sites the kernel does not have (read from its bytecode
before the launch), and, the first time a site signature meets a stub, a formula that does not
bind to the site or PTX that nvJitLink does not assemble
(:func:`numptx.jit.numba.sim_checks.check_stub`: bound, then assembled; once per signature and text in a process).
"""
from __future__ import annotations

import contextlib
import functools
import logging
import operator
import re
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from ... import site_layout
from ...dsl.expr import BindError, PtxExpr, SiteBinding, output_order
from ...dsl.emulator import emulate
from ...dtypes import get_dtype
from ...errors import NumptxError
from ...instructions import NP_DTYPE
from . import numba_site, sim_waves
from ..templates import residency
from ..errors import LaunchError
from .launch_plan import GpuPlan as _GpuPlan, LoadedLibrary as _LoadedLibrary
from .launch_plan import typers as _typers
from .numba_compat import (code_library, current_context, needs_more_linking,
                           set_code_library, simulator_thread_dims)
from .numba_site import SIMULATOR, SiteError, SiteSpec
from ..._program.interpret import RowRunner
from ..populations.pack import Population, check_selector, with_index
from ..templates.residency import MAX_LOADED, keep_loaded, launch_config, loaded  # noqa: F401
from ..templates.residency import context_handle, plain_config
from .sim_checks import bind_stub, check_assembles, check_site_names, site_for

# LaunchError (.errors) and keep_loaded, MAX_LOADED (.residency) are imported from here as ever
__all__ = ["KernelLaunch", "LaunchError", "simulated_sites"]

log = logging.getLogger(__name__)


class KernelLaunch:
    """``variant[config]``: call it with the kernel's arguments."""

    def __init__(self, kv, config):
        self.kv = kv
        self.config = launch_config(config)

    def __call__(self, *args: Any) -> None:
        if SIMULATOR:
            return _launch_simulator(self.kv, self.config, args)
        if residency.LAUNCH_PLANS and _launch_planned(self.kv, self.config, args):
            return None
        return _launch_gpu(self.kv, self.config, args)


# ---------------------------------------------------------------------------------------------
# the simulator
# ---------------------------------------------------------------------------------------------
_sim_launch_lock = threading.Lock()


def _np_dtype(dtype_name: str) -> np.dtype:
    if dtype_name in NP_DTYPE:
        return NP_DTYPE[dtype_name]
    return {"h": np.dtype(np.uint16), "r": np.dtype(np.uint32), "l": np.dtype(np.uint64),
            "f": np.dtype(np.float32), "d": np.dtype(np.float64)}[get_dtype(dtype_name).constraint]


def _typed_inputs(spec: SiteSpec, values: dict) -> dict:
    """The in/mod values of one site call in their types, as the GPU build makes them: a
    ``value`` type converts, a bit-copying type (``bits``/``cast``: f16, b32, the stack
    types...) takes the bits of a value of its size and refuses another size."""
    out = {}
    for k, t, n in spec.variables:
        if k != "out":
            v = np.asarray(values[n])
            dt = _np_dtype(t)
            if v.dtype.kind != dt.kind or v.dtype.itemsize != dt.itemsize:
                site_t = get_dtype(t)
                if site_t.mode == "value":
                    v = v.astype(dt)
                elif v.dtype.itemsize == dt.itemsize and v.dtype.kind in "biuf":
                    v = v.view(dt)
                else:
                    raise SiteError(f"site {spec.name!r}, {k} variable {n!r}: {site_t.name} "
                                    f"copies bits and needs a {dt.itemsize * 8}-bit value, "
                                    f"got {v.dtype}")
            out[n] = v[()]
    return out


def _stacked(spec: SiteSpec, batch: list) -> dict:
    """The in/mod values of a batch of site calls (one per thread), typed, one array per
    variable."""
    out = {}
    for k, tn, n in spec.variables:
        if k != "out":
            dt = _np_dtype(tn)
            col = list(map(operator.itemgetter(n), batch))
            if set(map(type, col)) == {dt.type}:        # in their type already: as they are
                out[n] = np.array(col, dt)
            else:
                out = None
                break
    if out is not None:
        return out
    typed = [_typed_inputs(spec, values) for values in batch]
    return {n: np.array([t[n] for t in typed], _np_dtype(tn))
            for k, tn, n in spec.variables if k != "out"}


def _finish(spec: SiteSpec, got: dict):
    """The site's result: its outputs then its mods, in their types (one value alone)."""
    return _finish_batch(spec, got, 1)[0]


def _finish_batch(spec: SiteSpec, got: dict, n: int) -> list:
    """Per call of a batch of ``n``, the site's result from ``got`` (variable -> scalar or
    array of ``n``): its outputs then its mods, in their types (one value alone)."""
    cols = [np.broadcast_to(np.asarray(got[name]).astype(_np_dtype(t)).reshape(-1), (n,))
            for kind in ("out", "mod") for k, t, name in spec.variables if k == kind]
    if not cols:
        return [None] * n
    if len(cols) == 1:
        return list(cols[0])
    return list(zip(*cols))


def _is_expr(stub: Any) -> bool:
    return callable(getattr(stub, "stub", None)) and callable(stub)


# Evaluators: fn(spec, batch) -> results, for a batch of calls of one site signature (the in
# and mod values of each thread that reached it); see numptx.jit.numba.sim_waves.


def _binding_evaluator(binding: SiteBinding):
    """A formula's NumPy reference, bound to the site as its stub is
    (:meth:`PtxExpr.binding <numptx.dsl.expr.PtxExpr.binding>`): ``simulate="reference"``."""
    def run_expr(spec, batch):
        return _finish_batch(spec, binding.evaluate(_stacked(spec, batch)), len(batch))
    return run_expr


def _object_evaluator(stub: Any, spec: SiteSpec):
    """Another object with ``.stub`` and a NumPy reference (its ``.stub(site)`` decides the
    build, so no formula binding is known): called per thread with the site's in/mod values by
    name (in order, where it has ``params`` the site lacks), its results taken as a formula's
    are (:func:`~numptx.dsl.expr.output_order`)."""
    params = getattr(stub, "params", None)
    outs = site_for(spec).outputs
    out_names = {v.name for v in outs}

    def run_one(spec, values):
        ins = _typed_inputs(spec, values)
        if isinstance(params, Mapping) and not set(params) <= set(ins):
            r = stub(*ins.values())
        else:
            r = stub(**ins)
        if isinstance(r, Mapping):
            # keys the site lacks are the object's own business: its .stub(site) decided the
            # build, which never reads them
            r = {k: v for k, v in r.items() if k in out_names}
            form, names, results = "dict", list(r), list(r.values())
        else:
            results = list(r) if isinstance(r, (tuple, list)) else [r]
            form, names = "tuple", range(len(results))
        try:
            order = output_order(form, names, outs)
        except BindError as e:
            raise SiteError(f"site {spec.name!r}: the expression's results do not fit: "
                            f"{e.reason}") from None
        return _finish(spec, {v.name: results[o] if isinstance(o, int) else ins[o]
                              for v, o in zip(outs, order)})

    def run_object(spec, batch):
        return [run_one(spec, values) for values in batch]
    return run_object


_SPECIAL = "%special"      # the key of a call's special registers in its values (see run)


def _special_registers(thread: Any) -> dict | None:
    """The PTX special registers of a simulator thread (``%tid.x`` ... ``%nctaid.z``,
    ``%laneid``, ``%warpid``), or None outside numba's simulator threads."""
    t, bi = getattr(thread, "threadIdx", None), getattr(thread, "blockIdx", None)
    dims = simulator_thread_dims(thread)
    if t is None or bi is None or dims is None:
        return None
    b, g = dims[0] + (1, 1, 1), dims[1] + (1, 1, 1)
    regs = {"tid": (t.x, t.y, t.z), "ctaid": (bi.x, bi.y, bi.z), "ntid": b[:3], "nctaid": g[:3]}
    out = {f"%{r}.{a}": int(v[i]) for r, v in regs.items() for i, a in enumerate("xyz")}
    linear = t.x + b[0] * (t.y + b[1] * t.z)
    out["%laneid"], out["%warpid"] = linear % 32, linear // 32
    return out


#: what in a stub makes a value depend on its position in the emulated arrays: warp-level
#: instructions (32 consecutive values are a warp) and lane registers the emulator derives
_POSITIONAL = re.compile(r"\bmma\b|\bwmma\b|\bshfl\b|\bvote\b|\bredux\b|\bmatch\b|"
                         r"\bactivemask\b|%lane")


def _ptx_evaluator(text: str):
    """PTX text run in the stub emulator, once for the whole batch (the site's variables are
    the registers of the stub's top-level scope, site_layout.reg_name; special registers are
    each thread's own)."""
    reg = site_layout.reg_name
    reads_special = "%" in text and any(f"%{r}" in text for r in (     # %lanemask_*: %laneid
        "tid", "ntid", "ctaid", "nctaid", "laneid", "lanemask", "warpid"))

    def run_ptx(spec, batch):
        ins = {reg(n): v for n, v in _stacked(spec, batch).items()}
        if reads_special:
            sp = [values.get(_SPECIAL) for values in batch]
            if all(v is not None for v in sp):
                ins.update({k: np.array([v[k] for v in sp], np.uint32) for k in sp[0]})
        outs = {reg(n): t for k, t, n in spec.variables if k != "in"}
        res = emulate(text, ins, outs)
        return _finish_batch(spec, {n: res[reg(n)] for k, _, n in spec.variables if k != "in"},
                             len(batch))
    # a value's position in the batch decides its warp and lane: evaluated as each block alone
    run_ptx.batch = "warps" if _POSITIONAL.search(text) else "grid"
    return run_ptx


#: whether a formula's site calls run on its tape in the batch interpreter, each thread at
#: once (no hand-over), where the interpreter runs every row of its stub and every variable is
#: a value type (False: the stub emulator on each wave's batch)
SIM_TAPES = True


def _tape_evaluator(expr: PtxExpr, spec: SiteSpec, text: str):
    """The formula's stub run by the batch interpreter on one thread's values
    (:class:`~numptx._program.interpret.RowRunner`): what the emulator computes on ``text``,
    bit for bit (the tape is the stub's DAG), without the wave's hand-over. None where it
    does not apply: another stub text (a binding the tape does not share), a row the
    interpreter lacks, or a site variable that copies bits."""
    if not SIM_TAPES:
        return None
    site = site_for(spec)
    for _, t, _ in spec.variables:
        if get_dtype(t).mode != "value":
            return None
    try:
        if str(expr.stub(site)) != str(text):
            return None
        runner = RowRunner(expr.tape(site))
    except NumptxError as e:
        log.debug("site %r: no tape (%s): the stub emulator runs it", spec.name, e)
        return None
    ins = [(n, runner.inputs[n]) for k, _, n in spec.variables if k != "out"]
    outs = [runner.outputs[n] for kind in ("out", "mod")
            for k, _, n in spec.variables if k == kind]
    return _ThreadFn(runner, ins, outs)


class _ThreadFn:
    """fn(spec, batch) of a formula's tape (:func:`_tape_evaluator`): each call evaluated by
    the thread that makes it, at once (``batch = "thread"``)."""
    batch = "thread"

    def __init__(self, runner: RowRunner, ins: list, outs: list):
        self.runner, self.ins, self.outs = runner, ins, outs
        self.lock = threading.Lock()     # the buffers are shared; free-running threads race

    def __call__(self, spec: SiteSpec, batch) -> list:
        results, outs = [], self.outs
        with self.lock:
            for values in batch:
                for n, buf in self.ins:
                    v = values[n]
                    # a Python int into a float converts as an int64 (as _typed_inputs and the
                    # build do), not through float64 (buf[0] = v rounds twice past 2**53)
                    if v.__class__ is not int or buf.dtype.kind != "f":
                        try:
                            buf[0] = v
                            continue
                        except (OverflowError, TypeError, ValueError):
                            pass
                    with np.errstate(all="ignore"):     # as _typed_inputs converts
                        buf[0] = np.asarray(v).astype(buf.dtype)[()]
                self.runner()
                results.append(outs[0][0] if len(outs) == 1 else
                               tuple(b[0] for b in outs) if outs else None)
        return results


def _empty_site(spec: SiteSpec, values: dict):
    """A site left without a stub (``missing="empty"``): mods keep their values and outputs
    read 0 (on a GPU they are whatever the register held)."""
    ins = _typed_inputs(spec, values)
    got = {n: ins[n] if k == "mod" else 0 for k, _, n in spec.variables if k != "in"}
    return _finish(spec, got)


# -- batches: one evaluation per site signature for the threads of a wave (sim_waves) --------
#: whether the simulator runs blocks in waves whose threads evaluate a site together (one
#: emulator run on arrays, numptx.jit.numba.sim_waves); False: numba's own block manager, each thread
#: evaluates its sites alone (the same results for elementwise stubs, slower; a warp-level stub
#: such as mma then sees one lane, not its warp)
SIM_BATCH = True


class _SimLaunch:
    """The stubs of one simulator launch, each checked (:func:`check_stub`) the first time a
    site signature evaluates it (PTX text, Stack PTX programs and ``@nx.ptx_expr`` formulas;
    other objects with ``.stub`` only run their reference); the first check or evaluation that
    fails is kept in ``error``. ``@nx.ptx_expr`` formulas run their stub in the emulator
    (``simulate="stub"``, the kernel's default) or their NumPy reference
    (``simulate="reference"``)."""

    def __init__(self, kv):
        self.arch = kv.kernel.arch
        self.stubs = kv.stubs
        self.missing = kv.missing
        self.reference = kv.kernel.simulate == "reference"
        self.strict = kv.kernel.strict
        for name, stub in self.stubs.items():
            if not (_is_expr(stub) or isinstance(stub, (str, list, tuple, Population,
                                                         np.ndarray))):
                raise LaunchError(f"site {name!r}: the simulator cannot evaluate a stub of type "
                                  f"{type(stub).__name__}")
        self.ready: dict[SiteSpec, Any] = {}
        self.by_id: dict[int, tuple] = {}       # id(spec) -> (spec, fn): fn of a spec seen
        self.failed: dict[SiteSpec, NumptxError] = {}
        self.lock = threading.Lock()
        self.error: NumptxError | None = None

    def note(self, e: BaseException) -> None:
        if isinstance(e, NumptxError) and self.error is None:
            self.error = e

    def evaluators(self) -> dict[str | None, Any]:
        out: dict[str | None, Any] = {name: functools.partial(self.run, name)
                                      for name in self.stubs}
        if self.missing == "empty":
            out[None] = _empty_site
        return out

    def run(self, name: str, spec: SiteSpec, values: dict):
        hit = self.by_id.get(id(spec))          # a parsed call's spec is one object: no hash
        if hit is not None and hit[0] is spec:
            fn = hit[1]
        else:
            fn = self.ready.get(spec)
            if fn is None:
                with sim_waves.own_work():      # a check may take long: no stall
                    fn = self._prepare(name, spec)
            self.by_id[id(spec)] = (spec, fn)
        me = threading.current_thread()
        if fn.__class__ is _ThreadFn:       # at once, in this thread (no special registers)
            wave = me.__dict__.get("numptx_wave")
            if wave is not None:
                wave.turns += 1             # progress for the stall watcher
            try:
                return fn(spec, (values,))[0]
            except NumptxError as e:
                self.note(e)
                raise
        special = me.__dict__.get("numptx_special", _SPECIAL)
        if special is _SPECIAL:             # a thread's special registers never change
            special = me.__dict__["numptx_special"] = _special_registers(me)
        if special is not None:
            values = {**values, _SPECIAL: special}
        if SIM_BATCH and getattr(me, "numptx_manager", None) is not None \
                and me.numptx_manager.launch is self:
            return me.numptx_site(self, fn, fn, spec, values)     # one fn per (name, spec)
        try:
            return fn(spec, [values])[0]
        except NumptxError as e:
            self.note(e)
            raise

    def _prepare(self, name: str, spec: SiteSpec):
        with self.lock:                 # the simulator's threads wait for the first one's check
            fn = self.ready.get(spec)
            if fn is not None:
                return fn
            err = self.failed.get(spec)
            if err is None:
                stub = self.stubs[name]
                try:
                    fn = (self._pack_evaluator(stub, spec) if isinstance(stub, Population)
                          else self._evaluator(stub, spec))
                except NumptxError as e:
                    err = self.failed[spec] = e
                    self.note(e)
                else:
                    self.ready[spec] = fn
                    return fn
        raise err.with_traceback(None)

    def _evaluator(self, stub: Any, spec: SiteSpec):
        """fn(spec, batch) for one stub, checked as the build checks it (raises if it fails)."""
        if _is_expr(stub) and not isinstance(stub, PtxExpr):
            # another object with .stub: its reference runs and no PTX is built for it
            return _object_evaluator(stub, spec)
        # bound as the build binds it (nx.kernel(strict=True) holds every stub to strict, as
        # the build does), then assembled as the build assembles it
        text = bind_stub(spec, stub, self.arch, strict=self.strict)
        check_assembles(spec, text, self.arch)
        if isinstance(stub, PtxExpr) and self.reference:
            return _binding_evaluator(stub.binding(site_for(spec)))
        fn = _tape_evaluator(stub, spec, text) if isinstance(stub, PtxExpr) else None
        return fn or _ptx_evaluator(text)     # the stub the build injects, bound as it binds it

    def _pack_evaluator(self, pop: Population, spec: SiteSpec):
        """fn(spec, batch) for a packed population: the candidate the selector names runs; a
        selector out of range, or a candidate that fails the build's checks (then recorded in
        the population's errors, as the build records it), runs nothing (as an empty site)."""
        site = site_for(spec)
        check_selector(site, pop.select)
        texts = pop.texts(site)         # records the candidates that do not compile for the site
        fns: dict[int, Any] = {}
        lock = threading.Lock()

        def candidate(k: int):
            with lock:
                if k not in fns:
                    fns[k] = None
                    if texts[k] is not None:
                        try:
                            fns[k] = self._evaluator(pop.sim_stub(k, site), spec)
                        except NumptxError as e:
                            pop.fail(k, with_index(e, pop.offset + k))
                return fns[k]

        def run_pack(spec, batch):
            picks: dict[int, list[int]] = {}
            for i, values in enumerate(batch):
                picks.setdefault(int(_typed_inputs(spec, values)[pop.select]), []).append(i)
            out: list = [None] * len(batch)
            for k, idx in picks.items():
                fn = (candidate(k) if 0 <= k < len(pop) and pop.offset + k not in pop.errors
                      else None)
                sub = [batch[i] for i in idx]
                got = ([_empty_site(spec, v) for v in sub] if fn is None else fn(spec, sub))
                for i, r in zip(idx, got):
                    out[i] = r
            return out
        run_pack.batch = "block"        # the selector splits a block's threads: by block
        return run_pack


def _launch_simulator(kv, config, args) -> None:
    grid, block, stream, shared = config
    disp = kv.kernel.dispatcher
    with _sim_launch_lock:
        check_site_names(kv)
        launch = _SimLaunch(kv)
        batched = SIM_BATCH and sim_waves.simulator_classes() is not None
        try:
            # blocks run in waves whose threads take turns, each site evaluated once a turn
            with (sim_waves.running(launch, launch.note, int(shared or 0)) if batched
                  else contextlib.nullcontext()), \
                    numba_site.simulating(launch.evaluators(), kernel=kv.kernel.__name__,
                                          note=launch.note):
                disp[grid, block, stream, shared](*args)
        except Exception:
            # the simulator re-raises a thread's exception as type(e)(message): raise a failed
            # check as it was raised (its class, attributes and message)
            if launch.error is not None:
                raise launch.error from None
            raise


def simulated_sites(kernel, args: tuple) -> dict:
    """``{name: Site}`` of ``kernel``'s sites under the simulator, where no PTX is compiled: the
    kernel runs on copies of ``args`` as one thread (``[1, 1]``) with every site a no-op, and
    each ``nx.site`` call reached gives its signature as called (types from the values, as
    numba types them). Sites thread 0 does not reach are left out, with a warning."""
    import warnings
    from .sim_checks import site_names
    copies = tuple(a.copy() if isinstance(a, np.ndarray) else
                   np.array(a.copy_to_host()) if callable(getattr(a, "copy_to_host", None)) else a
                   for a in args)
    specs: dict[str, SiteSpec] = {}

    def record(spec, values):
        specs.setdefault(spec.name, spec)
        return _empty_site(spec, values)
    disp = kernel.dispatcher
    misuse: list[BaseException] = []
    with _sim_launch_lock:
        try:
            with numba_site.simulating({None: record}, kernel=kernel.__name__,
                                       note=misuse.append):
                disp[1, 1](*copies)
        except Exception:
            if misuse:                  # a misused site: the build's SiteError, as it is
                raise misuse[0] from None
            raise
    names = site_names(kernel.py_func) or tuple(specs)
    missed = [n for n in names if n not in specs]
    if missed:
        warnings.warn(f"kernel {kernel.__name__!r}: under the simulator the sites are read by "
                      f"running thread 0 of a [1, 1] launch with these arguments, which did not "
                      f"reach {', '.join(map(repr, missed))}", stacklevel=3)
    return {n: site_for(specs[n]) for n in [*names, *specs] if n in specs}


# ---------------------------------------------------------------------------------------------
# a GPU
# ---------------------------------------------------------------------------------------------
_HOW_TO_SIMULATE = ("no CUDA GPU is available to launch this variant; run the kernel on the CPU "
                    "with numba-cuda's simulator: set NUMBA_ENABLE_CUDASIM=1 in the environment "
                    "before Python starts (e.g. NUMBA_ENABLE_CUDASIM=1 python script.py), where "
                    "nx.site evaluates the injected stubs")


_templates_lock = threading.Lock()
_gpu_templates: dict = {}     # (kernel id, argtypes, cc) -> (numba _Kernel, NumbaTemplate)


def _launch_gpu(kv, config, args) -> None:
    disp, argtypes, fkey, hit = _resolve_gpu(kv, args)
    launchable = hit[0]
    cfg = disp.configure(*config)       # numba's checks of the dimensions and the stream
    launchable.launch(args, cfg.griddim, cfg.blockdim, cfg.stream, cfg.sharedmem)
    if residency.LAUNCH_PLANS:
        _remember(kv, disp, argtypes, fkey, hit, config, cfg)


def loaded_entry(kv, args: tuple) -> tuple[tuple, tuple]:
    """``(key, (launchable, context, module))``: the module that launching ``kv`` with ``args``
    on the current device runs, loaded (built first if need be)."""
    _, _, fkey, hit = _resolve_gpu(kv, args)
    return fkey, hit


def _resolve_gpu(kv, args: tuple):
    """What a launch of ``kv`` with ``args`` runs: numba's dispatcher, the argument types,
    the residency key and the loaded entry."""
    from numba import cuda
    try:
        available = cuda.is_available()
    except Exception:   # noqa: BLE001 - a broken driver reads as "no GPU"
        available = False
    if not available:
        raise LaunchError(_HOW_TO_SIMULATE)
    k = kv.kernel
    disp = k.dispatcher
    argtypes = tuple(disp.typeof_pyval(a) for a in args)
    ctx = current_context()
    cc = ctx.device.compute_capability
    tkey = (id(k), argtypes, cc)
    with _templates_lock:
        entry = _gpu_templates.get(tkey)
    if entry is None:
        with numba_site.site_errors(k.__name__):
            nk = disp.compile(argtypes)
        if needs_more_linking(code_library(nk)):
            raise LaunchError(f"kernel {k.__name__!r} needs numba to link more code (NRT, "
                              f"cooperative groups or link= files), which numptx variants do not "
                              f"support yet")
        # numba's kernel marshals the arguments; the cubin comes from the kernel's own template
        # for the device (same argument types, so the same parameter layout): variants built
        # ahead with build_many for this architecture are launched as they are
        entry = (nk, k.template_for_device(argtypes, (cc[0], cc[1])))
        with _templates_lock:
            _gpu_templates[tkey] = entry
    nk, tmpl = entry
    variant = kv.for_template(tmpl)
    fkey = (variant.key, ctx.device.id)
    hit = loaded(fkey)
    if hit is None:
        from cuda.core import ObjectCode
        # numba's create_module_image takes a cuda.core ObjectCode (it reads .handle)
        module = ctx.create_module_image(ObjectCode.from_cubin(variant.cubin,
                                                               name=f"{tmpl.entry}.cubin"))
        cufunc = module.get_function(tmpl.entry)
        # a shallow copy (numba kernels pickle through __reduce__, so copy.copy would rebuild)
        launchable = object.__new__(type(nk))
        launchable.__dict__.update(nk.__dict__)
        set_code_library(launchable, _LoadedLibrary(cufunc, code_library(nk)))
        launchable.bind()
        hit = keep_loaded(fkey, (launchable, ctx, module))
    return disp, argtypes, fkey, hit


# ---------------------------------------------------------------------------------------------
# launch plans: what _launch_gpu resolved, per KernelVariant and context
# ---------------------------------------------------------------------------------------------
#: KernelVariant -> its plan (weakly held: a plan goes with its variant)
_gpu_plans: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_MAX_PLAN_ITEMS = 64            # per dict of a plan (cleared beyond)


def _put(d: dict, key, value) -> None:
    if len(d) >= _MAX_PLAN_ITEMS:
        d.clear()
    d[key] = value


def _remember(kv, disp, argtypes: tuple, fkey, hit, config, cfg) -> None:
    hctx = context_handle()
    if not hctx:
        return
    plan = _gpu_plans.get(kv)
    if plan is None or plan.hctx != hctx:
        plan = _GpuPlan(hctx, disp)
        _gpu_plans[kv] = plan
    _put(plan.entries, tuple(map(id, argtypes)), (argtypes, fkey, hit))
    if plain_config(config[:2]):
        _put(plan.dims, config[:2], (cfg.griddim, cfg.blockdim))


def _launch_planned(kv, config, args) -> bool:
    """Launch ``kv`` as its plan says; False, having done nothing, where the plan does not
    apply (then :func:`_launch_gpu` takes the full path and gives any error). numba's own
    argument marshalling runs either way. Numba's low-occupancy warning comes from the full
    path alone, once per (variant, grid, block) and context."""
    plan = _gpu_plans.get(kv)
    if plan is None:
        return False
    grid, block, stream, shared = config
    try:
        if context_handle() != plan.hctx:
            return False
        types = tuple(map(type, args))
        typers = plan.typers.get(types)
        if typers is None:
            typers = _typers(plan.disp, args)
            _put(plan.typers, types, typers)
        argtypes = tuple([f(a) for f, a in zip(typers, args)])
        got = plan.entries.get(tuple(map(id, argtypes)))
        if got is None or got[0] != argtypes or loaded(got[1]) is not got[2]:
            return False
        dims = plan.dims.get((grid, block)) if plain_config((grid, block)) else None
        if dims is None:
            return False
        core_stream = plan.stream0 if not stream else plan.to_stream(stream)
    except Exception:   # noqa: BLE001 - the full path decides, and words any error
        return False
    got[2][0].launch(args, dims[0], dims[1], core_stream, shared)
    return True
