"""What the simulator checks the way the real build does, once per stub and kernel.

Under numba-cuda's simulator no PTX is built, so a stub the real build would refuse could run in
the stub emulator and give numbers. :func:`check_stub` binds each (site signature, stub) as the
build binds it and assembles its text with nvJitLink in a small kernel with the site's numba
layout (:func:`site_check_ptx`); :func:`site_names` reads a kernel's site names from its bytecode,
so stubs for sites it lacks are refused before the launch.

>>> check_stub(spec, "add.rn.f32 %v_z, %v_x, %v_y;", "sm_90")        # doctest: +SKIP
'add.rn.f32 %v_z, %v_x, %v_y;'
"""
from __future__ import annotations

import copy
import dis
import functools
import logging
import re
import threading
import types
import weakref
from collections import OrderedDict
from typing import Any

from ...dtypes import get_dtype
from ...errors import LinkError, RenderError, ToolchainError
from ...inject import PtxInject, Site, Variable
from ...site_layout import reg_name
from .numba_site import SiteSpec
from .numba_site import site as nx_site
from ..compile.nvjitlink import ptx_to_cubin
from ..templates.stubs import resolve_stub

__all__ = ["bind_stub", "check_assembles", "check_stub", "check_site_names", "site_check_ptx",
           "site_cubin", "site_for", "site_names", "CHECK_ENTRY"]

log = logging.getLogger(__name__)


def site_for(spec: SiteSpec) -> Site:
    """The :class:`~numptx.inject.Site` of an ``nx.site`` call as called (one instance), what
    stubs are bound to under the simulator where no PTX is parsed."""
    variables = tuple(Variable(n, k, t, get_dtype(t).reg, reg_name(n))
                      for k, t, n in spec.variables)
    return Site(spec.name, variables, 1)


# -- what the real build checks, checked once under the simulator -----------------------------
# Each (site signature, stub) is bound to the site as the real build binds it (resolve_stub:
# BindError for a formula that does not fit) and its text assembled by nvJitLink in a minimal
# kernel that lays the site out as numba does: a stub the real build refuses (wrong types,
# unknown instructions) raises the same LinkError instead of running in the emulator.

#: (register type, register prefix) of an inline-asm operand, per constraint letter, as NVVM
#: declares them
_OPERAND_REGS = {"h": ("b16", "rs"), "r": ("b32", "r"), "l": ("b64", "rd"), "f": ("f32", "f"),
                 "d": ("f64", "fd")}
_CHECK_ENTRY = "numptx_site_check"
#: the entry of a site's check kernel (:func:`site_cubin`)
CHECK_ENTRY = _CHECK_ENTRY


@functools.lru_cache(maxsize=None)
def _ptx_isa_version(arch: str) -> str | None:
    """The newest PTX ISA version this nvJitLink reads (its error for a newer one names it);
    None when nvJitLink is unavailable or does not say."""
    probe = (f".version 99.9\n.target {arch}\n.address_size 64\n"
             f".visible .entry {_CHECK_ENTRY}()\n{{\nret;\n}}\n")
    try:
        ptx_to_cubin(probe, arch)
    except ToolchainError as e:
        log.debug("numptx: the simulator does not assemble stubs (%s)", e)
        return None
    except LinkError as e:
        m = re.search(r"current version is '(\d+\.\d+)'", e.log)
        if m:
            return m.group(1)
        log.debug("numptx: no PTX ISA version in nvJitLink's log; the simulator does not "
                  "assemble stubs: %s", e.log)
    return None


def site_check_ptx(spec: SiteSpec, arch: str, version: str) -> str:
    """A kernel with the one site ``spec``, laid out as in a numba kernel (the intrinsic's asm
    text, operands in registers of their constraint's class): in and mod values loaded from
    a buffer (8 bytes per variable), out and mod values stored back."""
    dts = [get_dtype(t) for _, t, _ in spec.variables]
    n = len(dts)
    count = dict.fromkeys(_OPERAND_REGS, 0)
    regs = []
    for dt in dts:
        count[dt.constraint] += 1
        regs.append(f"%{_OPERAND_REGS[dt.constraint][1]}{count[dt.constraint]}")
    # operands $0..$n-1 are the outputs, $n..$2n-1 the inputs (see SiteSpec.asm_text)
    ops = {i: r for i, r in enumerate(regs)}
    ops.update({n + i: r if kind == "in" else "0"
                for i, ((kind, _, _), r) in enumerate(zip(spec.variables, regs))})
    asm = re.sub(r"\$(\d+)", lambda m: ops[int(m.group(1))], spec.asm_text(dts))
    loads, stores = [], []
    for i, ((kind, _, _), dt, r) in enumerate(zip(spec.variables, dts, regs)):
        rtype = _OPERAND_REGS[dt.constraint][0]
        if kind != "out":
            loads.append(f"\tld.global.{rtype} \t{r}, [%rd_buf+{8 * i}];")
        if kind != "in":
            stores.append(f"\tst.global.{rtype} \t[%rd_buf+{8 * i}], {r};")
    decls = [f"\t.reg .{rt} \t%{prefix}<{count[c] + 1}>;"
             for c, (rt, prefix) in _OPERAND_REGS.items() if count[c]]
    return "\n".join([
        f".version {version}", f".target {arch}", ".address_size 64", "",
        f".visible .entry {_CHECK_ENTRY}(", f"\t.param .u64 {_CHECK_ENTRY}_param_0", ")", "{",
        *decls, "\t.reg .b64 \t%rd_buf;", "",
        f"\tld.param.u64 \t%rd_buf, [{_CHECK_ENTRY}_param_0];",
        "\tcvta.to.global.u64 \t%rd_buf, %rd_buf;", *loads,
        "\t// begin inline asm", "\t" + asm, "\t// end inline asm", *stores, "\tret;", "}", ""])


_check_lock = threading.Lock()
#: an f32 or f64 literal (0f3F800000, 0d3FF0000000000000) -> its prefix
_FLOAT_LITERAL = re.compile(r"\b0([fFdD])[0-9a-fA-F]{8,16}\b")
#: (spec, arch) -> PtxInject of the site's check kernel (None: no nvJitLink to assemble it)
_check_frames: OrderedDict = OrderedDict()
#: (spec, arch, stub text) -> None (it assembles) or the LinkError, and (spec, arch, text with
#: its float literals blanked) -> None for texts that assemble; least recent first
_verdicts: OrderedDict = OrderedDict()
MAX_VERDICTS = 4096


def _remember(cache: OrderedDict, key, value) -> None:
    with _check_lock:
        cache[key] = value
        while len(cache) > MAX_VERDICTS:
            cache.popitem(last=False)


def _check_frame(spec: SiteSpec, arch: str):
    """The PtxInject of the check kernel of ``spec`` (None when stubs are not assembled here)."""
    key = (spec, arch)
    with _check_lock:
        if key in _check_frames:
            return _check_frames[key]
    version = _ptx_isa_version(arch)
    inj = None if version is None else PtxInject(site_check_ptx(spec, arch, version))
    _remember(_check_frames, key, inj)
    return inj


def check_stub(spec: SiteSpec, stub: Any, arch: str) -> str:
    """The stub's text for the site ``spec`` after the real build's checks: bound to the site
    as the build binds it (:func:`~numptx.jit.templates.stubs.resolve_stub`), and assembled by nvJitLink
    for ``arch`` in the site's check kernel (once per signature and text; skipped, with a debug
    log line, where nvJitLink is unavailable). Raises what the build would raise."""
    text = bind_stub(spec, stub, arch)
    check_assembles(spec, text, arch)
    return text


def bind_stub(spec: SiteSpec, stub: Any, arch: str, *, strict: bool = False) -> str:
    """The first half of :func:`check_stub`: the stub's text bound to the site ``spec`` as the
    build binds it when it injects stubs (what the build refuses there, this raises)."""
    inj = _check_frame(spec, arch)
    site = site_for(spec) if inj is None else inj.sites[spec.name]
    # warns of an out variable a raw stub never writes (raises under strict)
    return resolve_stub(stub, site, strict=strict)


def check_assembles(spec: SiteSpec, text: str, arch: str) -> None:
    """The second half of :func:`check_stub`: the :class:`LinkError` of ``text`` (a bound stub)
    assembled at the site ``spec`` in its check kernel, as the build assembles it."""
    inj = _check_frame(spec, arch)
    if inj is None:
        return
    key = (spec, arch, text)
    # f32/f64 constants never decide whether a text assembles: a text that differs from one
    # that assembled only in them assembles too (constant sweeps assemble once)
    shape = ("shape", spec, arch, _FLOAT_LITERAL.sub(r"0\1", text))
    with _check_lock:
        hit = _verdicts.get(key, _verdicts)
        if hit is _verdicts and _verdicts.get(shape, _verdicts) is None:
            hit = None
        if hit is not _verdicts:
            _verdicts.move_to_end(key if key in _verdicts else shape)
    if hit is _verdicts:
        try:
            ptx_to_cubin(inj.render({spec.name: text}), arch)
            hit = None
        except LinkError as e:
            hit = LinkError(f"{e}\n(under the simulator: site {spec.name!r} assembled alone in a "
                            f"minimal kernel for {arch}, as the real build would assemble it)",
                            log=e.log, options=e.options, site=e.site, stub_line=e.stub_line)
        _remember(_verdicts, key, hit)
        if hit is None:
            _remember(_verdicts, shape, None)
    if hit is not None:
        raise copy.copy(hit)


def site_cubin(spec: SiteSpec, text: str, arch: str) -> bytes | None:
    """The cubin of the check kernel of ``spec`` (entry :data:`CHECK_ENTRY`) with ``text`` (a
    stub :func:`check_stub` returned) at the site; None where nvJitLink is unavailable. What
    ``nx.autotune`` reads static costs from under the simulator, where no kernel PTX exists."""
    inj = _check_frame(spec, arch)
    return None if inj is None else ptx_to_cubin(inj.render({spec.name: text}), arch)


# -- the sites of a kernel, read from its bytecode ----------------------------------------------
_NOT_READ = object()
_SKIPPED_OPS = frozenset({"PUSH_NULL", "CACHE", "EXTENDED_ARG", "NOP"})
_MAX_TABLE = 256
_MAX_FUNCTIONS = 256
#: kernel function -> its site names (None: not all readable)
_kernel_sites: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _code_objects(code: types.CodeType):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _code_objects(c)


def _is_function(value: Any) -> bool:
    return isinstance(value, types.FunctionType) or isinstance(getattr(value, "py_func", None),
                                                               types.FunctionType)


def _callees(value: Any) -> list:
    """Functions (device functions: numba dispatchers or plain ones) ``value`` refers to."""
    if isinstance(value, (tuple, list, dict)):
        if len(value) > _MAX_TABLE:         # a data table, not one of functions
            return []
        return [v for v in (value.values() if isinstance(value, dict) else value)
                if _is_function(v)]
    return [value] if _is_function(value) else []


def site_names(fn: Any) -> tuple[str, ...] | None:
    """Names of the ``nx.site`` calls of ``fn`` and of the functions it refers to (device
    functions, also through tuples, lists and dicts; nested code), read from the bytecode the
    way numba's rewrite reads them: the name is a constant, a global or closure value or a
    module or class attribute. None when some call's name (or something named ``site``) cannot
    be read that way: the real build then decides."""
    names: dict[str, None] = {}
    seen: set[int] = set()
    todo = [fn]
    while todo:
        f = todo.pop()
        f = getattr(f, "py_func", f)
        code = getattr(f, "__code__", None)
        if not isinstance(code, types.CodeType) or id(code) in seen:
            continue
        if len(seen) >= _MAX_FUNCTIONS:     # a library reached through globals: give up
            return None
        seen.add(id(code))
        glb = getattr(f, "__globals__", {})
        cells = dict(zip(code.co_freevars, getattr(f, "__closure__", None) or ()))

        def load(ins) -> Any:
            if ins.opname == "LOAD_CONST":
                return ins.argval
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                return glb.get(ins.argval, _NOT_READ)
            if ins.opname in ("LOAD_DEREF", "LOAD_CLASSDEREF") and ins.argval in cells:
                try:
                    return cells[ins.argval].cell_contents
                except ValueError:          # an empty cell
                    return _NOT_READ
            return _NOT_READ if ins.opname.startswith("LOAD_") else None

        for c in _code_objects(code):
            instrs = [i for i in dis.get_instructions(c) if i.opname not in _SKIPPED_OPS]
            # each maximal load chain (a load then attribute loads) -> (value, last name)
            chains: list = []
            i = 0
            while i < len(instrs):
                v = load(instrs[i])
                if v is None:
                    chains.append(None)
                    i += 1
                    continue
                label = instrs[i].argval
                i += 1
                while i < len(instrs) and instrs[i].opname in ("LOAD_ATTR", "LOAD_METHOD"):
                    label = instrs[i].argval
                    v = (getattr(v, label, _NOT_READ) if isinstance(v, (types.ModuleType, type))
                         else _NOT_READ)
                    i += 1
                chains.append((v, label))
            for k, chain in enumerate(chains):
                if chain is None:
                    continue
                v, label = chain
                if v is nx_site:
                    arg = chains[k + 1] if k + 1 < len(chains) else None
                    if arg is None or not isinstance(arg[0], str):
                        return None
                    names[arg[0]] = None
                elif v is _NOT_READ:
                    if label == "site":
                        return None
                else:
                    todo.extend(_callees(v))
    return tuple(names)


def check_site_names(kv) -> None:
    """Stubs for sites the kernel does not have: the real build's RenderError, before launching."""
    fn = kv.kernel.py_func
    try:
        names = _kernel_sites[fn]
    except (KeyError, TypeError):
        names = site_names(fn)
        try:
            _kernel_sites[fn] = names
        except TypeError:                   # not weakly referenceable: no cache
            pass
    if names is None:
        log.debug("numptx: %s: site names not read from the bytecode; stubs for unknown sites "
                  "are not reported under the simulator", kv.kernel.__name__)
        return
    unknown = [n for n in kv.stubs if n not in names]
    if unknown:
        raise RenderError(f"no site named {', '.join(map(repr, unknown))} "
                          f"(sites: {', '.join(map(repr, names)) or 'none'})",
                          unknown=tuple(unknown))
