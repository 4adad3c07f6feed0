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
rewrite (``before-inference``, registered as soon as ``numba.cuda`` is imported, so that
``import numptx`` does not import numba; see :func:`register`) turns each ``site(...)`` call into
a call of an intrinsic generated for its name and variables, with the in/mod values as
positional arguments. Site names, variable names and types must therefore be compile-time
constants; ``out``/``mod`` must be dict literals in the same basic block as the call.

Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) ``site`` is a plain Python function
that evaluates the stub injected by the running variant (:mod:`numptx.jit.template`). A
misused site raises there the :class:`SiteError` (class and message) that the rewrite raises
on the GPU build: both run :func:`check_variables` and share the messages below; a value
given positionally or no name, a result used where nothing is returned or unpacked into the
wrong count (read from the caller's bytecode), one name at two signatures (per launch).
"""
from __future__ import annotations

import contextlib
import difflib
import functools
import os
import re
import sys
import threading
import types as _pytypes
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from .. import valuetypes as VT
from ..annotate import site_asm_text
from ..dtypes import SiteType, get_dtype
from ..errors import NumptxError

__all__ = ["site", "SiteError", "SiteSpec", "dtype_name", "SIMULATOR", "simulator_active"]

#: whether numba-cuda runs as its simulator in this process
SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def simulator_active() -> bool:
    """Whether numba-cuda runs as its simulator in this process (``NUMBA_ENABLE_CUDASIM=1`` in
    the environment when numptx was imported): kernels run on the CPU, ``nx.site`` evaluates
    the launched variant's stubs, and no PTX is compiled."""
    return SIMULATOR

_RESERVED = ("out", "mod")


class SiteError(NumptxError):
    """A malformed ``nx.site(...)`` call, or a site evaluated where no stub is available."""


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
# types
# ---------------------------------------------------------------------------------------------
# NumPy, C and numba spellings of the value types that sites carry (numptx/valuetypes.py)
_ALIASES = VT.aliases([v for v in VT.ROWS if v.site is not None])


def dtype_name(obj: Any) -> str:
    """The site type named by ``obj``: a type name (``"f32"``), an object whose ``.name`` is
    one (DSL types, numba and NumPy types), or anything whose ``str()`` is one."""
    if isinstance(obj, SiteType):
        return obj.name
    if isinstance(obj, str):
        name = obj
    elif isinstance(getattr(obj, "name", None), str):
        name = obj.name
    elif isinstance(obj, type) and hasattr(obj, "__name__"):
        name = obj.__name__            # np.float32
    else:
        name = str(obj)
    name = name.strip().lower()
    return _ALIASES.get(name, name)


def _resolve_dtype(obj: Any, what: str) -> SiteType:
    try:
        return get_dtype(dtype_name(obj))
    except NumptxError as e:
        raise SiteError(f"{what}: {e}") from None


class SiteSpec(NamedTuple):
    """A site as called: its name and variables ``(kind, dtype or None, name)`` in declaration
    order; ``None`` means the type follows the value's type."""
    name: str
    variables: tuple

    def asm_text(self, dtypes: list[SiteType]) -> str:
        """The asm template with numba operand placeholders (``$0``...)."""
        vs = [(k, dt, n) for (k, _, n), dt in zip(self.variables, dtypes)]
        return re.sub(r"%(\d+)", r"$\1", site_asm_text(self.name, vs))

    @property
    def n_values(self) -> int:
        return sum(1 for k, _, _ in self.variables if k != "out")


# -- misuse: one message per mistake, the same from numba's rewrite and from the simulator ------
def _not_a_dict(site_name: str, key: str) -> str:
    example = "{'z': nx.f32}" if key == "out" else "{'acc': acc[i]}"
    return (f"site {site_name!r}: {key}= must be a dict literal, e.g. {key}={example} (or a "
            f"variable assigned one dict literal in the kernel)")


def _dict_as_input(site_name: str, key: str) -> str:
    close = difflib.get_close_matches(key, _RESERVED, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]}=? " if close else ""
    return (f"site {site_name!r}: {key}= is given a dict, but a variable takes one value "
            f"({key}=a[i]); {hint}outputs are declared with out={{'z': nx.f32}}, read-and-written "
            f"values with mod={{'acc': acc[i]}}")


def _nothing_returned(site_name: str) -> str:
    return (f"site {site_name!r} has no out= or mod= variables, so it returns nothing, but its "
            f"result is used: declare what it returns, e.g. out={{'z': nx.f32}} (the value) or "
            f"mod={{'acc': acc[i]}}")


class _Nothing:
    """What a site with no out or mod variables returns under the simulator: using it as a
    value raises the SiteError that numba's rewrite raises on the GPU build."""
    __slots__ = ("site_name",)

    def __init__(self, site_name: str):
        self.site_name = site_name

    def _refuse(self, *args):
        raise SiteError(_nothing_returned(self.site_name))

    __float__ = __int__ = __index__ = __bool__ = __complex__ = __array__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _refuse
    __rtruediv__ = __neg__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse

    def __repr__(self) -> str:
        return f"<nothing: site {self.site_name!r} returns no value>"


def _check_name(spec_name: str, vname: str, what: str) -> None:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", vname or ""):
        raise SiteError(f"site {spec_name!r}: {what} name {vname!r} is not an identifier")


_ONE_POSITIONAL = ("site(name, var=value, ..., out={...}, mod={...}) takes the site name as its "
                   "only positional argument")


def _declared(name: str, variables) -> str:
    """A site's signature as its call declares it, ``s(in x, out f32 z)``: a type shows where
    the call names it (out variables, ``x=(v, nx.u32)``), not where it follows the value."""
    return f"{name}({', '.join(f'{k} {t} {n}' if t else f'{k} {n}' for k, t, n in variables)})"


def two_signatures(name: str, first: str = "", second: str = "") -> str:
    detail = f": {first} and {second}" if first else ""
    return (f"site {name!r} is called with two different signatures{detail}; a site name has "
            f"one signature (the same variables, kinds and types at each call), since one stub "
            f"is injected into all of its calls: give one of them another site name")


def _returned(variables) -> list[str]:
    return ([n for k, _, n in variables if k == "out"]
            + [n for k, _, n in variables if k == "mod"])


def _unpacked(name: str, variables, count: int) -> str:
    names = _returned(variables)
    what = (f"returns {len(names)} values ({', '.join(names)}: its out variables, then its mod "
            f"variables)" if len(names) > 1 else
            f"returns one value ({names[0]}), not a tuple" if names else "returns nothing")
    fix = (f"unpack {len(names)} names, e.g. {', '.join(names)} = nx.site({name!r}, ...)"
           if len(names) > 1 else f"assign it to one name, e.g. {names[0]} = nx.site({name!r}, ...)"
           if names else "declare what it returns with out={'z': nx.f32} or mod={'acc': acc[i]}")
    return f"site {name!r} {what}, but its result is unpacked into {count} names: {fix}"


def check_variables(name: str, variables) -> None:
    """The checks of a site's name and variables ``(kind, type or None, name)`` that numba's
    rewrite (GPU build) and the simulator share: identifiers, known types, a layout
    ``PTX_INJECT`` can write (no variable declared twice, e.g. both in and out)."""
    _check_name(name, name, "site")
    for _, t, vname in variables:
        _check_name(name, vname, "variable")
        if t is not None:
            _resolve_dtype(t, f"site {name!r}, variable {vname!r}")
    try:
        site_asm_text(name, [(k, t or "b32", n) for k, t, n in variables])
    except SiteError:
        raise
    except NumptxError as e:
        raise SiteError(str(e)) from None


# ---------------------------------------------------------------------------------------------
# the Python function: the simulator's (and a clear error elsewhere)
# ---------------------------------------------------------------------------------------------
#: site name -> evaluator, set by a variant launch under the simulator (numptx.jit.launch)
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
    if name in _ALIASES:
        return _ALIASES[name]
    raise SiteError(f"a site value of type {name} is not supported; cast to a supported type")


def _sim_spec(name: Any, kwargs: Mapping[str, Any]) -> tuple[SiteSpec, dict[str, Any], tuple]:
    """(spec with each value's type, values, variables as declared: types named in the call)."""
    if not isinstance(name, str):
        raise SiteError("the site name must be a string constant")
    declared, values = [], {}
    for key, value in kwargs.items():
        if key in _RESERVED and not isinstance(value, Mapping):
            raise SiteError(_not_a_dict(name, key))
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
                raise SiteError(_dict_as_input(name, key))
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
                if key in _RESERVED:
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
        return spec, values, declared, _returned(declared)
    if got is None:
        spec, values, declared = _sim_spec(name, kwargs)
        if len(_parsed) >= _MAX_PARSED:
            _parsed.clear()
        got = _parsed[shape_t] = (spec, declared, _returned(declared))
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
            raise SiteError(_ONE_POSITIONAL)
        name, = name
        spec, values, declared, returns = _parse_call(name, variables)
        use = _result_use() if launch is not None else "stored"
        if isinstance(use, int) and (len(returns) < 2 or use != len(returns)):
            raise SiteError(_unpacked(name, declared, use))
        if not returns and use == "used":
            raise SiteError(_nothing_returned(name))
        if launch is not None and launch[2].get(name, (None,))[0] is not declared:
            with launch[3]:
                first, typed = launch[2].setdefault(name, (declared, spec.variables))
            if first != declared:           # as numba's rewrite says it (one function)
                raise SiteError(two_signatures(name, _declared(name, first),
                                                _declared(name, declared)))
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
                        f"(@cuda.jit or @nx.kernel) or under the simulator (NUMBA_ENABLE_CUDASIM=1)")
    fn = evaluators.get(name) or evaluators.get(None)     # None: the missing="empty" no-op
    if fn is None:
        raise SiteError(f"site {name!r}: the launched variant has no stub for it "
                        f"(stubs for: {', '.join(sorted(filter(None, evaluators))) or 'none'})")
    result = fn(spec, values)
    if result is None and not any(k != "in" for k, _, _ in spec.variables):
        return _Nothing(name)
    return result


# ---------------------------------------------------------------------------------------------
# numba-cuda: the intrinsic and the IR rewrite
# ---------------------------------------------------------------------------------------------
_intrinsics: dict[SiteSpec, Any] = {}
_intrinsics_lock = threading.Lock()


def _numba_parts():
    from llvmlite import ir as llir
    from numba.cuda import types as nbt
    return llir, nbt


# numba type of the built-in value types; the others travel as the carrier of their constraint
def _numba_type_of(dt: SiteType):
    _, nbt = _numba_parts()
    numba_name = VT.BY_NAME[dt.name].numba if dt.builtin else None
    if numba_name is not None:
        return getattr(nbt, numba_name)
    return {"h": nbt.uint16, "r": nbt.uint32, "l": nbt.uint64,
            "f": nbt.float32, "d": nbt.float64}[dt.constraint]


def _dtype_of_numba(ty) -> str | None:
    _, nbt = _numba_parts()
    ty = nbt.unliteral(ty)
    if isinstance(ty, nbt.Boolean):
        return None
    return _ALIASES.get(str(ty)) if isinstance(ty, (nbt.Number,)) or ty == nbt.bfloat16 else None


def _make_intrinsic(spec: SiteSpec):
    from numba.cuda import types as nbt
    from numba.cuda.extending import intrinsic
    llir, _ = _numba_parts()
    carriers = {"h": llir.IntType(16), "r": llir.IntType(32), "l": llir.IntType(64),
                "f": llir.FloatType(), "d": llir.DoubleType()}

    def variable(typingctx, kind, tname, vname, ty):
        """(dtype, value type, carrier type, convert?) of one variable; value type is what
        comes in (in, mod) or goes out (out, mod)."""
        what = f"site {spec.name!r}, {kind} variable {vname!r}"
        if kind == "out":
            dt = _resolve_dtype(tname, what)
            return dt, _numba_type_of(dt), _numba_type_of(dt), False
        ty = nbt.unliteral(ty)
        if tname is None:
            inferred = _dtype_of_numba(ty)
            if inferred is None:
                raise SiteError(f"{what}: values of numba type {ty} cannot feed a site; cast "
                                f"them (float32(v), int32(v), ...) or give a type: {vname}=(v, nx.f32)")
            dt = get_dtype(inferred)
        else:
            dt = _resolve_dtype(tname, what)
        carrier = _numba_type_of(dt)
        if ty != carrier:
            if dt.mode == "value":
                if typingctx.can_convert(ty, carrier) is None:
                    raise SiteError(f"{what}: cannot convert {ty} to {dt.name}")
            elif getattr(ty, "bitwidth", None) != dt.size * 8:
                raise SiteError(f"{what}: {dt.name} copies bits and needs a {dt.size * 8}-bit value, "
                                f"got {ty}")
        return dt, ty, carrier, dt.mode == "value"

    def convert(context, builder, v, fromty, toty, by_value):
        if fromty == toty:
            return v
        if by_value:
            return context.cast(builder, v, fromty, toty)
        return builder.bitcast(v, context.get_value_type(toty))

    def typer(typingctx, *args):
        if len(args) != spec.n_values:
            return None
        it = iter(args)
        vs = [variable(typingctx, k, t, n, None if k == "out" else next(it))
              for k, t, n in spec.variables]
        order = ([i for i, v in enumerate(spec.variables) if v[0] == "out"]
                 + [i for i, v in enumerate(spec.variables) if v[0] == "mod"])
        results = [vs[i][1] for i in order]
        ret = nbt.none if not results else results[0] if len(results) == 1 else nbt.Tuple(results)
        text = spec.asm_text([v[0] for v in vs])

        def codegen(context, builder, signature, llargs):
            # PTX_INJECT's operand layout: outputs $0..$n-1, one per variable (an in variable's
            # is unused), inputs $n..$2n-1: an in variable's value (a plain input: no copy),
            # a mod variable's value tied to its output, an immediate 0 for an out variable
            lltys = [carriers[dt.constraint] for dt, _, _, _ in vs]
            # out and mod outputs early-clobber ("=&"): never an input's register
            ins, cons = [], [f"={'' if kind == 'in' else '&'}{dt.constraint}"
                             for (kind, _, _), (dt, _, _, _) in zip(spec.variables, vs)]
            vals = iter(llargs)
            for i, ((kind, _, _), (dt, ty, carrier, by_value)) in enumerate(zip(spec.variables, vs)):
                if kind == "out":
                    ins.append(llir.Constant(llir.IntType(32), 0))
                    cons.append("n")
                    continue
                v = convert(context, builder, next(vals), ty, carrier, by_value)
                ins.append(v if v.type == lltys[i] else builder.bitcast(v, lltys[i]))
                cons.append(dt.constraint if kind == "in" else str(i))
            rty = (llir.VoidType() if not lltys else lltys[0] if len(lltys) == 1
                   else llir.LiteralStructType(lltys))
            asm = llir.InlineAsm(llir.FunctionType(rty, [v.type for v in ins]), text,
                                 ",".join(cons), side_effect=True)
            res = builder.call(asm, ins)
            if not order:
                return context.get_dummy_value()
            outs = []
            for i in order:
                dt, ty, carrier, by_value = vs[i]
                v = res if len(lltys) == 1 else builder.extract_value(res, i)
                llty = context.get_value_type(carrier)
                v = v if v.type == llty else builder.bitcast(v, llty)
                outs.append(convert(context, builder, v, carrier, ty, by_value))
            if len(outs) == 1:
                return outs[0]
            return context.make_tuple(builder, signature.return_type, outs)

        return ret(*args), codegen

    # numba folds the call's arguments with the typer's signature: give it one name per value
    params = "".join(f", v{i}" for i in range(spec.n_values))
    ns: dict = {"_typer": typer}
    exec(f"def numptx_site_{spec.name}(typingctx{params}):\n"
         f"    return _typer(typingctx{params})\n", ns)
    return intrinsic(ns[f"numptx_site_{spec.name}"])


def _intrinsic_for(spec: SiteSpec):
    with _intrinsics_lock:
        fn = _intrinsics.get(spec)
        if fn is None:
            fn = _intrinsics[spec] = _make_intrinsic(spec)
        return fn


def _register_rewrite() -> None:
    from .numba_compat import ir_definitions, rewrite_api
    ir, UnsupportedError, Rewrite, register_rewrite = rewrite_api()

    _PURE = (ir.Global, ir.FreeVar, ir.Const)

    def value_of(func_ir, var, depth=0):
        """The compile-time Python value of ``var`` (a constant, a global or module attribute);
        raises KeyError when it has none."""
        if depth > 8:
            raise KeyError(var)
        try:
            d = func_ir.get_definition(var)
        except Exception:
            raise KeyError(var) from None
        if isinstance(d, _PURE):
            return d.value
        if isinstance(d, ir.Expr) and d.op == "getattr":
            base = value_of(func_ir, d.value, depth + 1)
            if isinstance(base, (_pytypes.ModuleType, type)):    # no user getattr code runs
                try:
                    return getattr(base, d.attr)
                except AttributeError:
                    raise KeyError(var) from None
        if isinstance(d, ir.Var):
            return value_of(func_ir, d, depth + 1)
        raise KeyError(var)

    def is_site_call(func_ir, expr) -> bool:
        if not (isinstance(expr, ir.Expr) and expr.op == "call"):
            return False
        try:
            return value_of(func_ir, expr.func) is site
        except KeyError:
            return False

    def definition(func_ir, var):
        try:
            return func_ir.get_definition(var)
        except Exception:
            return None

    def split_typed(func_ir, var, site_name, vname, loc):
        """``value`` or ``(value, type)`` -> (value var, type name or None, dead vars)."""
        d = definition(func_ir, var)
        if isinstance(d, ir.Expr) and d.op == "build_tuple" and len(d.items) == 2:
            try:
                t = value_of(func_ir, d.items[1])
            except KeyError:
                raise UnsupportedError(f"numptx: site {site_name!r}: {vname}=(value, type) needs a "
                                       f"constant type", loc) from None
            return d.items[0], dtype_name(t), [var, d.items[1]]
        return var, None, []

    class SiteRewrite(Rewrite):
        """``site("name", x=..., out={...}, mod={...})`` -> ``<intrinsic>(x, ..., mod values)``."""

        def __init__(self, state=None):
            super().__init__(state)
            self.state = state

        def match(self, func_ir, block, typemap, calltypes):
            self.func_ir, self.block = func_ir, block
            self.calls = [st for st in block.body if isinstance(st, ir.Assign)
                          and is_site_call(func_ir, st.value)]
            return bool(self.calls)

        def _spec(self, call):
            func_ir, loc = self.func_ir, call.loc
            if call.vararg is not None or getattr(call, "varkwarg", None) is not None:
                raise UnsupportedError("numptx: site(...) does not take *args or **kwargs", loc)
            if len(call.args) != 1:
                raise UnsupportedError("numptx: site(name, var=value, ..., out={...}, mod={...}) "
                                       "takes the site name as its only positional argument", loc)
            try:
                name = value_of(func_ir, call.args[0])
            except KeyError:
                name = None
            if not isinstance(name, str):
                raise UnsupportedError("numptx: the site name must be a string constant", loc)
            variables, args, dead = [], [], [call.func, call.args[0]]
            for key, var in call.kws:
                if key in _RESERVED:
                    d = definition(func_ir, var)
                    if not (isinstance(d, ir.Expr) and d.op == "build_map"):
                        raise UnsupportedError(f"numptx: {_not_a_dict(name, key)}", loc)
                    dead.append(var)
                    for kvar, vvar in d.items:
                        try:
                            vname = value_of(func_ir, kvar)
                        except KeyError:
                            vname = None
                        if not isinstance(vname, str):
                            raise UnsupportedError(f"numptx: site {name!r}: {key}= keys must be "
                                                   f"string constants", loc)
                        dead.append(kvar)
                        if key == "out":
                            try:
                                t = value_of(func_ir, vvar)
                            except KeyError:
                                raise UnsupportedError(f"numptx: site {name!r}: out={{{vname!r}: "
                                                       f"...}} needs a constant type such as "
                                                       f"nx.f32 or 'f32'", loc) from None
                            variables.append(("out", dtype_name(t), vname))
                            dead.append(vvar)
                        else:
                            v, t, more = split_typed(func_ir, vvar, name, vname, loc)
                            variables.append(("mod", t, vname))
                            args.append(v)
                            dead += more
                else:
                    d = definition(func_ir, var)
                    if isinstance(d, ir.Expr) and d.op == "build_map":
                        raise UnsupportedError(f"numptx: {_dict_as_input(name, key)}", loc)
                    v, t, more = split_typed(func_ir, var, name, key, loc)
                    variables.append(("in", t, key))
                    args.append(v)
                    dead += more
            spec = SiteSpec(name, tuple(variables))
            try:
                check_variables(name, variables)        # shared with the simulator
            except NumptxError as e:
                raise UnsupportedError(f"numptx: {e}", loc) from None
            # one signature per site name in a function (the simulator checks it per launch)
            seen = self.func_ir.__dict__.setdefault("_numptx_sites", {})
            first = seen.setdefault(name, spec.variables)
            if first != spec.variables:
                raise UnsupportedError(f"numptx: {two_signatures(name, _declared(name, first), _declared(name, spec.variables))}", loc)
            return spec, args, dead

        def apply(self):
            func_ir, block = self.func_ir, self.block
            new = block.copy()
            new.clear()
            dead = []
            targets = {id(st) for st in self.calls}
            for st in block.body:
                if id(st) not in targets:
                    new.append(st)
                    continue
                call = st.value
                spec, args, more = self._spec(call)
                count = self._unpacked(st.target.name)
                if count is not None and (len(_returned(spec.variables)) < 2
                                          or count != len(_returned(spec.variables))):
                    raise UnsupportedError(f"numptx: {_unpacked(spec.name, spec.variables, count)}",
                                           call.loc)
                if not any(k != "in" for k, _, _ in spec.variables) \
                        and self._used(st.target.name):
                    raise UnsupportedError(f"numptx: {_nothing_returned(spec.name)}", call.loc)
                dead += more
                fvar = ir.Var(block.scope, block.scope.redefine("$numptx_site", call.loc).name,
                              call.loc)
                g = ir.Global(f"numptx_site_{spec.name}", _intrinsic_for(spec), call.loc)
                new.append(ir.Assign(g, fvar, call.loc))
                ir_definitions(func_ir)[fvar.name] = [g]
                expr = ir.Expr.call(fvar, args, (), call.loc)
                defs = ir_definitions(func_ir).get(st.target.name)
                if defs is not None:
                    defs[:] = [expr if x is call else x for x in defs]
                new.append(ir.Assign(expr, st.target, st.loc))
            self._drop_dead(new, {v.name for v in dead})
            # intrinsics made during this compile: let the typing context see them
            typingctx = getattr(self.state, "typingctx", None)
            if typingctx is not None:
                typingctx.refresh()
            return new

        def _unpacked(self, name: str) -> int | None:
            """The count of a tuple unpacking of the variable ``name`` (``a, b = site(...)``)."""
            for blk in self.func_ir.blocks.values():
                for st in blk.body:
                    if (isinstance(st, ir.Assign) and isinstance(st.value, ir.Expr)
                            and st.value.op == "exhaust_iter" and st.value.value.name == name):
                        return st.value.count
            return None

        def _used(self, name: str) -> bool:
            """Whether any statement of the function reads the variable ``name``."""
            for blk in self.func_ir.blocks.values():
                for st in blk.body:
                    if isinstance(st, ir.Del):
                        continue
                    vs = (([st.value] if isinstance(st.value, ir.Var) else
                           st.value.list_vars() if isinstance(st.value, ir.Expr) else [])
                          if isinstance(st, ir.Assign) else st.list_vars())
                    if any(v.name == name for v in vs):
                        return True
            return False

        def _drop_dead(self, block, candidates):
            """Remove the now unused definitions of the site function, dicts and types (in
            any block: a dict variable may be assigned before the block of its call)."""
            def read(val):
                return [val] if isinstance(val, ir.Var) else val.list_vars() if isinstance(val, ir.Expr) else []

            def uses():
                used = {}
                for label, blk in self.func_ir.blocks.items():
                    for st in (block if blk is self.block else blk).body:
                        for v in (read(st.value) if isinstance(st, ir.Assign) else st.list_vars()):
                            used[v.name] = used.get(v.name, 0) + 1
                return used
            bodies = [block] + [blk for blk in self.func_ir.blocks.values()
                                if blk is not self.block]
            changed = True
            while changed and candidates:
                changed = False
                used = uses()
                for body in bodies:
                    for st in list(body.body):
                        if (isinstance(st, ir.Assign) and st.target.name in candidates
                                and not used.get(st.target.name)
                                and (isinstance(st.value, _PURE + (ir.Var,))
                                     or (isinstance(st.value, ir.Expr) and st.value.op
                                         in ("getattr", "build_map", "build_tuple")))):
                            body.body.remove(st)
                            candidates.discard(st.target.name)
                            candidates.update(v.name for v in read(st.value))
                            defs = ir_definitions(self.func_ir).get(st.target.name)
                            if defs and st.value in defs:
                                defs.remove(st.value)
                            changed = True
                        elif (isinstance(st, ir.Del) and st.value in candidates
                              and not used.get(st.value)):
                            body.body.remove(st)

    register_rewrite("before-inference")(SiteRewrite)


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
            _register_rewrite()
            _registered = True


# not at import: `import numptx` stays free of numba (~1 s); numba.cuda's import triggers it
if not SIMULATOR:
    from .after_import import when_imported
    when_imported("numba.cuda", _register_now)
