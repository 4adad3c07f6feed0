"""``nx.autotune`` of an ``@nx.kernel`` kernel under numba-cuda's simulator
(``NUMBA_ENABLE_CUDASIM=1``), where numba compiles no PTX and nothing can be timed.

::

    best = nx.autotune(kern, cands, args=args, cost="registers")   # or cost="sass"
    best.simulated                       # True: ranked by each site assembled alone
    best.variant[grid, block](*args)     # runs in the simulator

A static cost is read from each candidate's sites as the simulator checks them: every stub is
bound to its site as the real build binds it and assembled by nvJitLink in the site's check
kernel (:func:`~numptx.jit.numba.sim_checks.site_cubin`, the site laid out as numba lays it out).
``cost="registers"`` is the most registers any of those kernels takes, ``cost="sass"`` the sum
of their SASS instructions: the stubs' own costs, without the rest of the kernel (the real
build, on a machine without the simulator, ranks whole kernels and may rank close candidates
differently). A candidate the real build would refuse (a stub that does not bind or assemble,
a stub for a site the kernel lacks, a site without a stub) is excluded the same way, at the same
stage: ``"stubs"`` for what the build refuses when it injects (:func:`site_texts`), ``"build"``
for what nvJitLink refuses (:func:`site_cost`). ``check=`` runs each remaining candidate in the
simulator on its own copies of the arguments (NumPy or the simulator's device arrays, the
caller's left alone) and excludes those whose output differs from the reference. Nothing is read from or written to the
ranking cache (these costs are not the kernel's). ``cost="time"`` is refused by ``autotune``
(nothing to time); ``@nx.autotuned`` falls back to ``cost="registers"`` with a warning.
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import NumptxError, RenderError, ToolchainError
from .autotune_args import compare, host_array, is_array, references
from .autotune_types import AutotuneError, Excluded, Stage, Tuned, warn_excluded
from ..errors import ToolMissingError, summary
from ..numba.numba_site import SiteSpec
from ..compile.resources import kernel_resources
from ..numba.sim_checks import CHECK_ENTRY, bind_stub, check_assembles, check_site_names, site_cubin

__all__ = ["autotune_simulated", "site_specs", "site_texts", "site_cost"]


def site_specs(kernel: Any, args: tuple) -> dict[str, SiteSpec]:
    """``{name: SiteSpec}`` of the kernel's sites, read by running it once in the simulator
    (``kernel.sites(*args)``)."""
    return {name: SiteSpec(name, tuple((v.kind, v.dtype, v.name) for v in site.variables))
            for name, site in kernel.sites(*args).items()}


def site_texts(kv: Any, specs: Mapping[str, SiteSpec]) -> dict[str, str]:
    """``{site: text}`` of variant ``kv``'s stubs, each bound to its site as the real build
    binds it when it injects stubs (the kernel's ``strict`` too; a site without a stub is left
    out under ``missing="empty"``). Raises what the build raises there (stage ``"stubs"``)."""
    check_site_names(kv)
    texts = {}
    for name, spec in specs.items():
        stub = kv.stubs.get(name)
        if stub is None:
            if kv.missing == "empty":
                continue
            raise RenderError(f"no stub for site {name!r} (pass missing='empty' to leave sites "
                              f"without a stub no-ops)")
        texts[name] = bind_stub(spec, stub, kv.kernel.arch, strict=kv.kernel.strict)
    return texts


def site_cost(texts: Mapping[str, str], specs: Mapping[str, SiteSpec], arch: str,
              cost: str) -> float:
    """The static ``cost`` of bound stub ``texts`` (:func:`site_texts`): each assembled in its
    site's check kernel for ``arch``; the most registers of any site, or the sum of SASS
    instructions. Raises what the real build's assembling raises (stage ``"build"``)."""
    total = 0
    for name, text in texts.items():
        spec = specs[name]
        check_assembles(spec, text, arch)
        cubin = site_cubin(spec, text, arch)
        if cubin is None:
            raise ToolchainError("nvJitLink is unavailable: under the simulator static costs "
                                 "are read from cubins it assembles")
        if cost == "registers":
            total = max(total, kernel_resources(cubin, CHECK_ENTRY).registers)
        else:
            from ..compile.sass import sass_instructions
            total += len(sass_instructions(cubin, CHECK_ENTRY))
    return float(total)


def _failure(i: int, e: BaseException) -> str:
    return f"candidate {i}: {type(e).__name__}: {summary(e)}"


def _copies(host: tuple) -> tuple:
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in host)


def _host(kernel: Any, args: tuple) -> tuple:
    """``args`` with every array as a host NumPy copy (the simulator's device arrays too, so
    each candidate runs on its own copy and the caller's arrays are left alone); too many or
    too few arguments are an :class:`AutotuneError`, as the real build's count check is."""
    try:
        inspect.signature(kernel.py_func).bind(*args)
    except TypeError:
        n = len(inspect.signature(kernel.py_func).parameters)
        raise AutotuneError(f"autotune(args=): kernel {kernel.__name__!r} takes {n} "
                            f"argument(s), {len(args)} given") from None
    return tuple(host_array(a) if is_array(a) else a for a in args)


def _check(variants: Mapping[int, Any], host: tuple, config: tuple, outs: tuple[int, ...],
           refs: list, rtol: float, atol: float) -> dict[int, tuple[Stage, str]]:
    """Each candidate run once in the simulator on copies of the arguments, then compared."""
    failed: dict[int, tuple[Stage, str]] = {}
    for i, kv in variants.items():
        args = _copies(host)
        try:
            kv[config](*args)
        except Exception as e:   # noqa: BLE001 - any launch error; named by index
            failed[i] = ("launch", _failure(i, e))
            continue
        for j, want in zip(outs, refs):
            why = compare(i, j, np.asarray(args[j]), want, rtol, atol)
            if why is not None:
                failed[i] = ("check", why)
                break
    return failed


def autotune_simulated(kernel: Any, cands: Sequence[Mapping[str, Any]], *, args: tuple,
                       config: tuple, check: Any, outs: tuple[int, ...] | None, rtol: float,
                       atol: float, cost: str, missing: str) -> Tuned:
    """:func:`~numptx.jit.tune.autotune.autotune` of ``kernel`` (an ``@nx.kernel`` kernel) under the
    simulator, its options checked: see the module's docstring."""
    if cost not in ("registers", "sass"):
        raise AutotuneError(f"autotune(cost={cost!r}) under the simulator: use 'registers' or "
                            f"'sass'")
    host = _host(kernel, args)
    specs = site_specs(kernel, _copies(host))
    n = len(cands)
    failed: dict[int, tuple[Stage, str]] = {}
    variants: dict[int, Any] = {}
    for i, c in enumerate(cands):
        try:
            variants[i] = kernel.inject(c, missing=missing)
        except Exception as e:   # noqa: BLE001 - any stub object may raise; named by index
            failed[i] = ("stubs", _failure(i, e))
    costs = [math.inf] * n
    for i, kv in variants.items():
        stage: Stage = "stubs"        # where the real build refuses: injecting, then building
        try:
            texts = site_texts(kv, specs)
            stage = "build"
            costs[i] = site_cost(texts, specs, kv.kernel.arch, cost)
        except ToolMissingError:
            raise                     # not this candidate's fault: say what to install
        except NumptxError as e:
            failed[i] = (stage, _failure(i, e))
    alive = {i: kv for i, kv in variants.items() if i not in failed}
    if check is not None and alive:
        refs = references(check, host, outs)
        failed.update(_check(alive, host, config, outs, refs, rtol, atol))
    for i in failed:
        costs[i] = math.inf
    ranking = tuple(sorted((i for i in range(n) if i not in failed), key=lambda i: (costs[i], i)))
    excluded = tuple(Excluded(i, *failed[i]) for i in sorted(failed))
    if not ranking:
        lines = "\n".join(f"  {e.reason}" for e in excluded[:10])
        raise AutotuneError(f"autotune {kernel.__name__} (simulator): no candidate left: all {n} "
                            f"failed:\n{lines}", failed={e.index: e.reason for e in excluded})
    warn_excluded(f"{kernel.__name__} (simulator)", excluded, n)
    best = ranking[0]
    return Tuned(variant=variants[best], index=best, candidate=cands[best], costs=tuple(costs),
                 ranking=ranking, failed={e.index: e.reason for e in excluded},
                 from_cache=(False,) * n, measured=ranking, cost=cost, keys=(None,) * n,
                 excluded=excluded, simulated=True)

