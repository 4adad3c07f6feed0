"""Launching variants of numba kernels: ``variant[grid, block, stream, sharedmem](*args)``.

On a GPU, numba-cuda compiles the kernel for the argument types and the device (its argument
marshalling, array transfers and launch code are used as they are); the cubin is the variant of
the kernel's own template for those argument types and the device's architecture
(``Kernel.template(*argtypes, cc=device)``: what ``build_many`` builds for that architecture is
launched as it is), assembled with nvJitLink through the cubin cache, loaded in the current
context and launched with numba's launcher. Kernels that need numba to link more code
(NRT, cooperative groups, ``link=[...]`` files) are refused.

Under the simulator (``NUMBA_ENABLE_CUDASIM=1``) the Python function runs on the CPU and each
``nx.site`` evaluates its stub: expressions with a ``.stub`` method are called with the site's
inputs (their NumPy reference), PTX text and Stack PTX programs run in the stub emulator
(:func:`numptx.emulate`). What the real build refuses is refused there too: stubs for sites the
kernel does not have (read from its bytecode before the launch), and, the first time a site
signature meets a stub, a formula that does not bind to the site or PTX that nvJitLink does not
assemble (:func:`numptx.jit.sim_checks.check_stub`; once per signature and text in a process).
"""
from __future__ import annotations

import copy
import functools
import logging
import re
import threading
import types
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..dsl.expr import PtxExpr
from ..errors import NumptxError
from . import numba_site
from .numba_site import SIMULATOR, SiteError, SiteSpec
from .sim_checks import _check_site_names, check_stub

__all__ = ["KernelLaunch", "LaunchError"]

log = logging.getLogger(__name__)


class LaunchError(NumptxError):
    """A variant that cannot be launched here (no GPU, unsupported kernel)."""


def _parse_config(config) -> tuple:
    if not isinstance(config, tuple):
        config = (config,)
    if not 2 <= len(config) <= 4:
        raise LaunchError(f"launch configuration is [grid, block] or [grid, block, stream, "
                          f"sharedmem], got {len(config)} item(s)")
    grid, block, stream, shared = (tuple(config) + (0, 0))[:4]
    return grid, block, stream, shared


class KernelLaunch:
    """``variant[config]``: call it with the kernel's arguments."""

    def __init__(self, kv, config):
        self.kv = kv
        self.config = _parse_config(config)

    def __call__(self, *args: Any) -> None:
        if SIMULATOR:
            return _launch_simulator(self.kv, self.config, args)
        return _launch_gpu(self.kv, self.config, args)


# ---------------------------------------------------------------------------------------------
# the simulator
# ---------------------------------------------------------------------------------------------
_sim_launch_lock = threading.Lock()


def _np_dtype(dtype_name: str) -> np.dtype:
    from ..instructions import NP_DTYPE
    from ..dtypes import get_dtype
    if dtype_name in NP_DTYPE:
        return NP_DTYPE[dtype_name]
    return {"h": np.dtype(np.uint16), "r": np.dtype(np.uint32), "l": np.dtype(np.uint64),
            "f": np.dtype(np.float32), "d": np.dtype(np.float64)}[get_dtype(dtype_name).constraint]


def _typed_inputs(spec: SiteSpec, values: dict) -> dict:
    out = {}
    for k, t, n in spec.variables:
        if k != "out":
            v = np.asarray(values[n])
            dt = _np_dtype(t)
            out[n] = (v.astype(dt) if v.dtype.kind != dt.kind or v.dtype.itemsize != dt.itemsize
                      else v)[()]
    return out


def _finish(spec: SiteSpec, got: dict):
    """The site's result: its outputs then its mods, in their types (one value alone)."""
    res = []
    for kind in ("out", "mod"):
        for k, t, n in spec.variables:
            if k == kind:
                res.append(np.asarray(got[n]).astype(_np_dtype(t)).reshape(())[()])
    return None if not res else res[0] if len(res) == 1 else tuple(res)


def _written(spec: SiteSpec) -> list[tuple[str, str]]:
    return [(n, t) for k, t, n in spec.variables if k != "in"]


def _is_expr(stub: Any) -> bool:
    return callable(getattr(stub, "stub", None)) and callable(stub)


def _expr_evaluator(stub: Any):
    """fn(spec, values) -> the site's result, from a formula's NumPy reference, bound like
    .stub(site) binds: parameters by name (else in declaration order), results by name (dict),
    in out/mod declaration order (tuple), or to the outputs alone."""
    params = getattr(stub, "params", None)

    def run_expr(spec, values):
        ins = _typed_inputs(spec, values)
        if isinstance(params, Mapping) and not set(params) <= set(ins):
            r = stub(*ins.values())
        else:
            r = stub(**ins)
        outs = _written(spec)
        if isinstance(r, Mapping):
            got = dict(r)
        else:
            seq = tuple(r) if isinstance(r, (tuple, list)) else (r,)
            only_outs = [(n, t) for k, t, n in spec.variables if k == "out"]
            if len(seq) == len(outs):
                got = {n: v for (n, _), v in zip(outs, seq)}
            elif len(seq) == len(only_outs):
                got = {n: v for (n, _), v in zip(only_outs, seq)}
            else:
                raise SiteError(f"site {spec.name!r}: the expression returned {len(seq)} "
                                f"value(s) for the output(s) {[n for n, _ in outs]}")
        for k, t, n in spec.variables:      # mods the formula does not return keep their value
            if k == "mod" and n not in got:
                got[n] = ins[n]
        missing = [n for n, _ in outs if n not in got]
        if missing:
            raise SiteError(f"site {spec.name!r}: the expression gave no value for {missing}")
        return _finish(spec, got)
    return run_expr


def _ptx_evaluator(text: str):
    """fn(spec, values) -> the site's result, from PTX text run in the stub emulator (the
    site's variables are the registers v_<name> of the stub's top-level scope)."""
    from ..dsl.emulator import emulate

    def run_ptx(spec, values):
        ins = {f"v_{n}": v for n, v in _typed_inputs(spec, values).items()}
        outs = {f"v_{n}": t for n, t in _written(spec)}
        res = emulate(text, ins, outs)
        return _finish(spec, {n: res[f"v_{n}"] for n, _ in _written(spec)})
    return run_ptx


def _empty_site(spec: SiteSpec, values: dict):
    """A site left without a stub (``missing="empty"``): mods keep their values and outputs
    read 0 (on a GPU they are whatever the register held)."""
    ins = _typed_inputs(spec, values)
    got = {n: ins[n] if k == "mod" else 0 for k, _, n in spec.variables if k != "in"}
    return _finish(spec, got)


class _SimLaunch:
    """The stubs of one simulator launch, each checked (:func:`check_stub`) the first time a
    site signature evaluates it (PTX text, Stack PTX programs and ``@nx.ptx_expr`` formulas;
    other objects with ``.stub`` only run their reference); the first check that fails is kept
    in ``error``."""

    def __init__(self, kv):
        k = kv.kernel
        self.arch = f"sm_{k.cc[0]}{k.cc[1]}{k._suffix}"
        self.stubs = kv.stubs
        self.missing = kv.missing
        for name, stub in self.stubs.items():
            if not (_is_expr(stub) or isinstance(stub, (str, list, tuple))
                    or type(stub).__name__ == "ndarray"):
                raise LaunchError(f"site {name!r}: the simulator cannot evaluate a stub of type "
                                  f"{type(stub).__name__}")
        self.exprs = {n: _expr_evaluator(s) for n, s in self.stubs.items() if _is_expr(s)}
        self.ready: dict[SiteSpec, Any] = {}
        self.failed: dict[SiteSpec, NumptxError] = {}
        self.lock = threading.Lock()
        self.error: NumptxError | None = None

    def evaluators(self) -> dict[str | None, Any]:
        out: dict[str | None, Any] = {name: functools.partial(self.run, name) for name in self.stubs}
        if self.missing == "empty":
            out[None] = _empty_site
        return out

    def run(self, name: str, spec: SiteSpec, values: dict):
        fn = self.ready.get(spec)
        if fn is None:
            fn = self._prepare(name, spec)
        return fn(spec, values)

    def _prepare(self, name: str, spec: SiteSpec):
        with self.lock:                 # the simulator's threads wait for the first one's check
            fn = self.ready.get(spec)
            if fn is not None:
                return fn
            err = self.failed.get(spec)
            if err is None:
                stub = self.stubs[name]
                if name in self.exprs and not isinstance(stub, PtxExpr):
                    # another object with .stub: its reference runs and no PTX is built for it
                    fn = self.ready[spec] = self.exprs[name]
                    return fn
                try:
                    text = check_stub(spec, stub, self.arch)
                except NumptxError as e:
                    err = self.failed[spec] = e
                    self.error = self.error or e
                else:
                    fn = self.ready[spec] = self.exprs.get(name) or _ptx_evaluator(text)
                    return fn
        raise err.with_traceback(None)


def _launch_simulator(kv, config, args) -> None:
    grid, block, stream, shared = config
    disp = kv.kernel.dispatcher
    with _sim_launch_lock:
        _check_site_names(kv)
        launch = _SimLaunch(kv)
        numba_site._sim_evaluators = launch.evaluators()
        try:
            disp[grid, block, stream, shared](*args)
        except Exception:
            # the simulator re-raises a thread's exception as type(e)(message): raise a failed
            # check as it was raised (its class, attributes and message)
            if launch.error is not None:
                raise launch.error from None
            raise
        finally:
            numba_site._sim_evaluators = None


# ---------------------------------------------------------------------------------------------
# a GPU
# ---------------------------------------------------------------------------------------------
_HOW_TO_SIMULATE = ("no CUDA GPU is available to launch this variant; run the kernel on the CPU "
                    "with numba-cuda's simulator: set NUMBA_ENABLE_CUDASIM=1 in the environment "
                    "before Python starts (e.g. NUMBA_ENABLE_CUDASIM=1 python script.py), where "
                    "nx.site evaluates the injected stubs")


class _LoadedLibrary:
    """Stands in for a numba code library in a copy of its kernel: hands out our function."""

    def __init__(self, cufunc, original):
        self._cufunc, self._original = cufunc, original

    def get_cufunc(self):
        return self._cufunc

    def __getattr__(self, name):
        return getattr(self._original, name)


_gpu_lock = threading.Lock()
_gpu_templates: dict = {}     # (kernel id, argtypes, cc) -> (numba _Kernel, NumbaTemplate)
#: (variant key, device id) -> (launchable numba _Kernel copy, context, module); least recently
#: launched first, modules beyond MAX_LOADED unloaded
_gpu_functions: OrderedDict = OrderedDict()
MAX_LOADED = 256


def keep_loaded(key, entry: tuple) -> tuple:
    """Record ``entry`` = (launchable, context, module) under ``key`` and unload the least
    recently launched modules beyond MAX_LOADED. When another thread recorded the key first,
    its entry is kept (and returned) and ``entry``'s module is unloaded."""
    evicted = []
    with _gpu_lock:
        other = _gpu_functions.get(key)
        if other is not None:
            evicted.append(entry)
            entry = other
        else:
            _gpu_functions[key] = entry
            while len(_gpu_functions) > MAX_LOADED:
                evicted.append(_gpu_functions.popitem(last=False)[1])
    for _, old_ctx, old_module in evicted:
        try:
            old_ctx.synchronize()              # its kernels may still run on some stream
            old_ctx.unload_module(old_module)
        except Exception:   # noqa: BLE001 - the context may be gone already
            pass
    return entry


def _launch_gpu(kv, config, args) -> None:
    from numba import cuda
    try:
        available = cuda.is_available()
    except Exception:   # noqa: BLE001 - a broken driver reads as "no GPU"
        available = False
    if not available:
        raise LaunchError(_HOW_TO_SIMULATE)
    from numba.cuda.cudadrv import devices

    k = kv.kernel
    disp = k.dispatcher
    argtypes = tuple(disp.typeof_pyval(a) for a in args)
    ctx = devices.get_context()
    cc = ctx.device.compute_capability
    tkey = (id(k), argtypes, cc)
    with _gpu_lock:
        entry = _gpu_templates.get(tkey)
    if entry is None:
        with numba_site.site_errors(k.__name__):
            nk = disp.compile(argtypes)
        lib = nk._codelibrary
        if getattr(lib, "_linking_files", None) or getattr(lib, "needs_cudadevrt", False):
            raise LaunchError(f"kernel {k.__name__!r} needs numba to link more code (NRT, "
                              f"cooperative groups or link= files), which numptx variants do not "
                              f"support yet")
        # numba's kernel marshals the arguments; the cubin comes from the kernel's own template
        # for the device (same argument types, so the same parameter layout): variants built
        # ahead with build_many for this architecture are launched as they are
        # (the kernel's arch suffix, sm_90a say, when its architecture is the device's)
        entry = (nk, k._template_for(argtypes, (cc[0], cc[1]),
                                     k._suffix if tuple(k.cc) == (cc[0], cc[1]) else ""))
        with _gpu_lock:
            _gpu_templates[tkey] = entry
    nk, tmpl = entry
    variant = kv.for_template(tmpl)
    fkey = (variant.key, ctx.device.id)
    with _gpu_lock:
        hit = _gpu_functions.get(fkey)
        if hit is not None:
            _gpu_functions.move_to_end(fkey)
    if hit is None:
        from cuda.core import ObjectCode
        # numba's create_module_image takes a cuda.core ObjectCode (it reads .handle)
        module = ctx.create_module_image(ObjectCode.from_cubin(variant.cubin,
                                                               name=f"{tmpl.entry}.cubin"))
        cufunc = module.get_function(tmpl.entry)
        # a shallow copy (numba kernels pickle through __reduce__, so copy.copy would rebuild)
        launchable = object.__new__(type(nk))
        launchable.__dict__.update(nk.__dict__)
        launchable._codelibrary = _LoadedLibrary(cufunc, nk._codelibrary)
        launchable.bind()
        hit = keep_loaded(fkey, (launchable, ctx, module))
    launchable = hit[0]
    cfg = disp.configure(*config)       # numba's checks of the dimensions and the stream
    launchable.launch(args, cfg.griddim, cfg.blockdim, cfg.stream, cfg.sharedmem)
