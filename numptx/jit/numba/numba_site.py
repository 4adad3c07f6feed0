"""``nx.site``: injection sites inside numba-cuda kernels.

::

    @cuda.jit
    def apply(out, a, b, acc):
        i = cuda.grid(1)
        z = nx.site("combine", x=a[i], y=b[i], out={"z": nx.f32})
        z, s = nx.site("step", x=z, out={"z": nx.f32}, mod={"acc": acc[i]})

Each call becomes one side-effecting inline-asm block with exactly the text that
``PTX_INJECT`` emits in CUDA C++ (:func:`numptx.annotate.site_asm_text`), so
:class:`numptx.PtxInject` parses numba templates like CUDA ones.

Arguments: the site name (a string constant), then the variables as keyword arguments in
declaration order: ``name=value`` is an input, ``out={"z": type, ...}`` declares outputs,
``mod={"acc": value, ...}`` read-and-written values (``out`` and ``mod`` are reserved words).
An input or mod value may carry an explicit type, ``x=(value, nx.u32)``; otherwise its type
follows the numba type of the value (float16 f16, bfloat16 bf16, float32 f32, float64 f64,
int32 s32, uint32 u32, int64 s64, uint64 u64, int16/uint16 b16; Python ints are int64). Types are
written as names (``"f32"``), numptx DSL type objects, numba or NumPy types (``.name``). The call
returns the outputs then the updated mods, in declaration order: one value alone, else a tuple.

How it works: numba types keyword arguments but not dictionaries on the GPU, so a numba IR
rewrite (``before-inference``, :mod:`numptx.jit.numba.numba_rewrite`, registered as soon as
``numba.cuda`` is imported, so that ``import numptx`` does not import numba; see
:func:`register`) turns each ``site(...)`` call into a call of an intrinsic generated for its name
and variables (:mod:`numptx.jit.numba.numba_intrinsic`), with the in/mod values as positional
arguments. Site names, variable names and types must therefore be compile-time
constants; ``out``/``mod`` must be dict literals in the same basic block as the call.

Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) ``site`` is a plain Python function
that evaluates the stub injected by the running variant (:mod:`numptx.jit.templates.template`). A
misused site raises there the :class:`SiteError` (class and message) that the rewrite raises
on the GPU build: both run :func:`check_variables` and share the messages of
:mod:`numptx.jit.numba.site_spec` (which this module re-exports its public names from); a value
given positionally or no name, a result used where nothing is returned or unpacked into the
wrong count (read from the caller's bytecode), one name at two signatures (per launch).
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ...errors import NumptxError
from .site_spec import (
    ALIASES,
    ONE_POSITIONAL,
    RESERVED,
    SiteError,
    SiteSpec,
    check_variables,
    declared_signature,
    dict_as_input,
    dtype_name,
    not_a_dict,
    nothing_returned,
    returned,
    two_signatures,
    unpacked,
)

__all__ = ["site", "SiteError", "SiteSpec", "dtype_name", "SIMULATOR", "simulator_active",
           "check_variables", "two_signatures", "register", "simulating", "site_errors"]

#: whether numba-cuda runs as its simulator in this process
SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def simulator_active() -> bool:
    """Whether numba-cuda runs as its simulator in this process (``NUMBA_ENABLE_CUDASIM=1`` in
    the environment when numptx was imported): kernels run on the CPU, ``nx.site`` evaluates
    the launched variant's stubs, and no PTX is compiled."""
    return SIMULATOR


class site_errors:
    """``with site_errors("apply"): <numba compile>``: a compile that fails on a malformed
    ``nx.site`` call (numba reports the rewrite's "numptx: ..." error with the kernel's source
    position) raises :class:`SiteError` with numba's whole message."""

    def __init__(self, kernel_name: str):
        self.kernel_name = kernel_name

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is not None and not isinstance(exc, NumptxError) and "numptx: " in str(exc):
            lines = [ln for ln in str(exc).strip().splitlines()          # numba's own framing
                     if not ln.startswith(("Failed in ", "During: "))]
            text = "\n".join(lines).strip().replace("numptx: ", "", 1)
            raise SiteError(f"kernel {self.kernel_name!r}: {text}") from exc
        return False


# ---------------------------------------------------------------------------------------------
# the Python function: the simulator's (and a clear error elsewhere)
# ---------------------------------------------------------------------------------------------
class _Nothing:
    """What a site with no out or mod variables returns under the simulator: using it as a
    value raises the SiteError that numba's rewrite raises on the GPU build."""
    __slots__ = ("site_name",)

    def __init__(self, site_name: str):
        self.site_name = site_name

    def _refuse(self, *args):
        raise SiteError(nothing_returned(self.site_name))

    __float__ = __int__ = __index__ = __bool__ = __complex__ = __array__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _refuse
    __rtruediv__ = __neg__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse

    def __repr__(self) -> str:
        return f"<nothing: site {self.site_name!r} returns no value>"


#: site name -> evaluator, set by a variant launch under the simulator (numptx.jit.numba.launch)
_sim_evaluators: dict[str, Callable] | None = None


#: (kernel name, note(error) or None, {site name: (declared signature, ...)}, lock) of the launch
_sim_launch: tuple | None = None


@contextlib.contextmanager
def simulating(evaluators: Mapping[str | None, Callable], *, kernel: str | None = None,
               note: Callable[[BaseException], None] | None = None):
    """While the block runs, ``nx.site(name, ...)`` under the simulator calls
    ``evaluators[name]`` (or ``evaluators[None]``, the missing="empty" no-op). The launcher
    holds its simulator lock around this: one simulated launch at a time. A misused site
    raises the :class:`SiteError` that numba's rewrite raises on the GPU build, naming
    ``kernel`` as the build does, and is passed to ``note`` (the launch raises it as is)."""
    global _sim_evaluators, _sim_launch
    _sim_evaluators = dict(evaluators)
    _sim_launch = (kernel, note, {}, threading.Lock())
    try:
        yield
    finally:
        _sim_evaluators = _sim_launch = None


def _result_use(depth: int = 2) -> int | str:
    """How the caller ``depth`` frames up uses the value of the call it is making: ``"unused"``
    (an expression statement), ``"stored"`` (assigned to a name: used or not, later),
    ``"used"``, or the count of a tuple unpacking."""
    frame = sys._getframe(depth)
    key = (frame.f_code, frame.f_lasti)
    use = _uses.get(key)
    if use is None:
        use = _uses[key] = _use_at(*key)
        if len(_uses) > 4096:
            _uses.clear()
    return use


#: (code, f_lasti) of a call -> how its value is used (``_result_use``)
_uses: dict = {}


def _use_at(code, lasti: int) -> int | str:
    nxt = _next_instruction(code).get(lasti)
    if nxt is None:
        return "stored"
    op, arg = nxt
    if op == "POP_TOP":
        return "unused"
    if op == "UNPACK_SEQUENCE":
        return arg
    if op.startswith("STORE_") and op != "STORE_SUBSCR" and op != "STORE_ATTR":
        return "stored"
    return "used"


@functools.lru_cache(maxsize=256)
def _next_instruction(code) -> dict[int, tuple[str, Any]]:
    """f_lasti of a frame calling a function (3.11: inside the CALL's caches) -> the next
    instruction (opname, argval)."""
    import dis
    ins = [i for i in dis.get_instructions(code)]
    out: dict[int, tuple[str, Any]] = {}
    for a, b in zip(ins, ins[1:]):
        if a.opname.startswith("CALL"):
            for off in range(a.offset, b.offset, 2):
                out[off] = (b.opname, b.argval)
    return out


def _sim_misuse(launch: tuple | None, message: str) -> SiteError:
    kernel, note = (launch[0], launch[1]) if launch else (None, None)
    e = SiteError(f"kernel {kernel!r}: {message}" if kernel else message)
    if note is not None:
        note(e)
    return e


def _split_value(spec_name: str, vname: str, value: Any) -> tuple[Any, str | None]:
    if isinstance(value, tuple):
        if len(value) != 2:
            raise SiteError(f"site {spec_name!r}: {vname}=(value, type) expects a pair")
        return value[0], dtype_name(value[1])
    return value, None


def _value_dtype(value: Any) -> str:
    """Site type of a simulator value, like numba would type it."""
    import numpy as np
    if isinstance(value, (bool, np.bool_)):
        raise SiteError("booleans cannot feed a site; convert to int32 or float32")
    if isinstance(value, int):
        return "s64"
    if isinstance(value, float):
        return "f64"
    name = np.asarray(value).dtype.name
    if name in ALIASES:
        return ALIASES[name]
    raise SiteError(f"a site value of type {name} is not supported; cast to a supported type")


def _sim_spec(name: Any, kwargs: Mapping[str, Any]) -> tuple[SiteSpec, dict[str, Any], tuple]:
    """(spec with each value's type, values, variables as declared: types named in the call)."""
    if not isinstance(name, str):
        raise SiteError("the site name must be a string constant")
    declared, values = [], {}
    for key, value in kwargs.items():
        if key in RESERVED and not isinstance(value, Mapping):
            raise SiteError(not_a_dict(name, key))
        if key == "out":
            for vname, t in value.items():
                if not isinstance(vname, str):
                    raise SiteError(f"site {name!r}: out= keys must be string constants")
                declared.append(("out", dtype_name(t), vname))
        elif key == "mod":
            for vname, v in value.items():
                if not isinstance(vname, str):
                    raise SiteError(f"site {name!r}: mod= keys must be string constants")
                v, t = _split_value(name, vname, v)
                declared.append(("mod", t, vname))
                values[vname] = v
        else:
            if isinstance(value, Mapping):
                raise SiteError(dict_as_input(name, key))
            v, t = _split_value(name, key, value)
            declared.append(("in", t, key))
            values[key] = v
    check_variables(name, declared)      # the rewrite's checks, before any value is typed
    variables = tuple((k, t or _value_dtype(values[n]), n) for k, t, n in declared)
    return SiteSpec(name, variables), values, tuple(declared)


#: a simulator call's shape (site name; per keyword its value's type, or the out types and mod
#: value types) -> (spec, variables as declared, what it returns): calls of that shape parse
#: as it did
_parsed: dict = {}
_MAX_PARSED = 1024
#: Python and NumPy number scalars: the type alone fixes the site type (``_value_dtype``)
_SCALARS = frozenset({int, float} | {t for t in set(np.sctypeDict.values())
                                     if issubclass(t, np.number)})


def _value_key(value: Any) -> Any:
    """What fixes the site type of a value and how ``_sim_spec`` splits it: its type (number
    scalars), its dtype (arrays), ``(value, type)`` pairs; raises KeyError for the rest."""
    t = type(value)
    if t in _SCALARS:
        return t
    if t is tuple and len(value) == 2:
        return (tuple, _value_key(value[0]), type(value[1]), value[1])
    if t is np.ndarray:
        return (t, value.dtype)
    raise KeyError(t)


def _parse_call(name: Any, kwargs: Mapping[str, Any]) -> tuple[SiteSpec, dict, tuple, list]:
    """``(spec, values, variables as declared, names returned)`` of a simulator call:
    ``_sim_spec``, its answer kept per call shape (the simulator calls a site once per thread
    and loop trip: the checks run for the first call of each shape). A call of another kind
    (another Mapping, a value of another type) takes ``_sim_spec``, which words any error."""
    try:
        values: dict[str, Any] = {}
        shape: list = [name]
        put = shape.append
        for key, value in kwargs.items():
            t = type(value)
            put(key)
            if t in _SCALARS:                   # the common case: a number
                put(t)
                values[key] = value
            elif t is not dict:
                if key in RESERVED:
                    raise KeyError(key)
                put(_value_key(value))
                values[key] = value[0] if t is tuple else value
            elif key == "out":
                put(len(value))
                for n, dt in value.items():
                    put(n)
                    put(dt)
                    put(type(dt))
            elif key == "mod":
                put(len(value))
                for n, v in value.items():
                    put(n)
                    put(_value_key(v))
                    values[n] = v[0] if type(v) is tuple else v
            else:
                raise KeyError(key)
        shape_t = tuple(shape)
        got = _parsed.get(shape_t)
    except (KeyError, TypeError):       # not a shape kept here (unhashable types, ...)
        spec, values, declared = _sim_spec(name, kwargs)
        return spec, values, declared, returned(declared)
    if got is None:
        spec, values, declared = _sim_spec(name, kwargs)
        if len(_parsed) >= _MAX_PARSED:
            _parsed.clear()
        got = _parsed[shape_t] = (spec, declared, returned(declared))
        return spec, values, declared, got[2]
    return got[0], values, got[1], got[2]


def site(*name: str, **variables: Any) -> Any:
    """Mark an injection site in a numba-cuda kernel (see the module documentation):
    ``site(name, var=value, ..., out={...}, mod={...})``.

    Inside ``@cuda.jit`` / ``@nx.kernel`` code this call is compiled into the site's inline asm.
    Under the CUDA simulator it evaluates the stub that the launched variant injects here; a
    misused site raises the :class:`SiteError` that the GPU build raises.
    """
    launch = _sim_launch
    try:
        if len(name) != 1:
            raise SiteError(ONE_POSITIONAL)
        name, = name
        spec, values, declared, returns = _parse_call(name, variables)
        use = _result_use() if launch is not None else "stored"
        if isinstance(use, int) and (len(returns) < 2 or use != len(returns)):
            raise SiteError(unpacked(name, declared, use))
        if not returns and use == "used":
            raise SiteError(nothing_returned(name))
        if launch is not None and launch[2].get(name, (None,))[0] is not declared:
            with launch[3]:
                first, typed = launch[2].setdefault(name, (declared, spec.variables))
            if first != declared:           # as numba's rewrite says it (one function)
                raise SiteError(two_signatures(name, declared_signature(name, first),
                                                declared_signature(name, declared)))
            if typed != spec.variables:     # as the build says it (the PTX's sites differ)
                raise SiteError(two_signatures(name))
    except SiteError as e:
        if launch is None:
            raise
        raise _sim_misuse(launch, str(e)) from None
    evaluators = _sim_evaluators
    if evaluators is None:
        if SIMULATOR:
            raise SiteError(f"site {name!r} ran under the simulator without a stub: launch a "
                            f"variant (kernel.inject({name}=...)[grid, block](...)), not the "
                            f"template")
        raise SiteError(f"nx.site({name!r}, ...) only works inside a numba-cuda kernel "
                        f"(@cuda.jit or @nx.kernel) or under the simulator "
                        f"(NUMBA_ENABLE_CUDASIM=1)")
    fn = evaluators.get(name) or evaluators.get(None)     # None: the missing="empty" no-op
    if fn is None:
        raise SiteError(f"site {name!r}: the launched variant has no stub for it "
                        f"(stubs for: {', '.join(sorted(filter(None, evaluators))) or 'none'})")
    result = fn(spec, values)
    if result is None and not any(k != "in" for k, _, _ in spec.variables):
        return _Nothing(name)
    return result


# ---------------------------------------------------------------------------------------------
# numba-cuda: the IR rewrite (numba_rewrite.py) and the intrinsics (numba_intrinsic.py)
# ---------------------------------------------------------------------------------------------
_registered = False
_register_lock = threading.Lock()


def register() -> None:
    """Teach numba-cuda about ``site``: register the IR rewrite. Idempotent and thread-safe, a
    no-op under the simulator. It runs by itself when ``numba.cuda`` is imported (or at import
    of this module if it already is) and before ``@nx.kernel`` compiles; calling it yourself
    only surfaces an error that the import hook turned into a warning.

        import numptx as nx
        nx.jit.numba_site.register()
    """
    if _registered or SIMULATOR:
        return
    import numba.cuda  # noqa: F401 - before the lock: its import hook calls _register_now
    _register_now()


def _register_now() -> None:
    global _registered
    with _register_lock:
        if not _registered:
            from .numba_rewrite import register as register_rewrite
            register_rewrite(site)        # numba's IR rewrite, for calls of this function
            _registered = True


# not at import: `import numptx` stays free of numba (~1 s); numba.cuda's import triggers it
if not SIMULATOR:
    from .after_import import when_imported
    when_imported("numba.cuda", _register_now)
