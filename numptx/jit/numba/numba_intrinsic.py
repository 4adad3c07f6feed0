"""The numba-cuda intrinsic of one ``nx.site`` signature: typing and the inline asm it emits.

numba's IR rewrite (:mod:`numptx.jit.numba.numba_rewrite`) replaces each ``nx.site("name", ...)`` call
with a call of the intrinsic of its :class:`~numptx.jit.numba.site_spec.SiteSpec`, its in and mod
values passed positionally. The intrinsic types those values (a value's own type, or the type
the call names: ``x=(v, nx.u32)``), and emits one side-effecting inline-asm block with the text
``PTX_INJECT`` writes in CUDA C++, in its operand layout::

    from numptx.jit.numba.numba_intrinsic import intrinsic_for
    fn = intrinsic_for(SiteSpec("combine", (("in", None, "x"), ("out", "f32", "z"))))
    # numba calls it as fn(x) and types it as float32 -> float32

One intrinsic per spec, made on first use and kept (numba's typing context keeps it too). numba
is imported by the functions here, not at import of this module.
"""
from __future__ import annotations

import threading
from typing import Any, NamedTuple

from ... import valuetypes as VT
from ...dtypes import SiteType, get_dtype
from .site_spec import ALIASES, SiteError, SiteSpec, resolve_dtype

__all__ = ["intrinsic_for", "make_intrinsic", "numba_type_of", "dtype_of_numba"]

_intrinsics: dict[SiteSpec, Any] = {}
_intrinsics_lock = threading.Lock()


def intrinsic_for(spec: SiteSpec) -> Any:
    """The intrinsic of ``spec``, made once per spec (thread-safe)."""
    with _intrinsics_lock:
        fn = _intrinsics.get(spec)
        if fn is None:
            fn = _intrinsics[spec] = make_intrinsic(spec)
        return fn


def _numba_parts():
    from llvmlite import ir as llir
    from numba.cuda import types as nbt
    return llir, nbt


def numba_type_of(dt: SiteType) -> Any:
    """The numba type of a site type's values: the built-in value types as themselves
    (``f32`` -> float32), the others as the carrier of their constraint (``bf16`` -> uint16)."""
    _, nbt = _numba_parts()
    numba_name = VT.BY_NAME[dt.name].numba if dt.builtin else None
    if numba_name is not None:
        return getattr(nbt, numba_name)
    return {"h": nbt.uint16, "r": nbt.uint32, "l": nbt.uint64,
            "f": nbt.float32, "d": nbt.float64}[dt.constraint]


def dtype_of_numba(ty: Any) -> str | None:
    """The site type a value of numba type ``ty`` carries when the call names none (float32
    -> ``"f32"``); None for a type that cannot feed a site (booleans, arrays, ...)."""
    _, nbt = _numba_parts()
    ty = nbt.unliteral(ty)
    if isinstance(ty, nbt.Boolean):
        return None
    return ALIASES.get(str(ty)) if isinstance(ty, (nbt.Number,)) or ty == nbt.bfloat16 else None


class _Variable(NamedTuple):
    """One variable of a typed call: its site type, the numba type that comes in (in, mod) or
    goes out (out, mod), the carrier type the asm operand has, and whether the value converts
    to the carrier by value (a cast) rather than by its bits."""
    dtype: SiteType
    type: Any
    carrier: Any
    by_value: bool


def _variable(spec: SiteSpec, typingctx, kind: str, tname: str | None, vname: str,
              ty) -> _Variable:
    """How one variable of ``spec`` travels, given its value's numba type ``ty`` (None for an
    out variable); raises :class:`SiteError` for a value that cannot feed it."""
    _, nbt = _numba_parts()
    what = f"site {spec.name!r}, {kind} variable {vname!r}"
    if kind == "out":
        dt = resolve_dtype(tname, what)
        return _Variable(dt, numba_type_of(dt), numba_type_of(dt), False)
    ty = nbt.unliteral(ty)
    if tname is None:
        inferred = dtype_of_numba(ty)
        if inferred is None:
            raise SiteError(f"{what}: values of numba type {ty} cannot feed a site; cast "
                            f"them (float32(v), int32(v), ...) or give a type: {vname}=(v, nx.f32)")
        dt = get_dtype(inferred)
    else:
        dt = resolve_dtype(tname, what)
    carrier = numba_type_of(dt)
    if ty != carrier:
        if dt.mode == "value":
            if typingctx.can_convert(ty, carrier) is None:
                raise SiteError(f"{what}: cannot convert {ty} to {dt.name}")
        elif getattr(ty, "bitwidth", None) != dt.size * 8:
            raise SiteError(f"{what}: {dt.name} copies bits and needs a {dt.size * 8}-bit value, "
                            f"got {ty}")
    return _Variable(dt, ty, carrier, dt.mode == "value")


def _convert(context, builder, v, fromty, toty, by_value: bool):
    if fromty == toty:
        return v
    if by_value:
        return context.cast(builder, v, fromty, toty)
    return builder.bitcast(v, context.get_value_type(toty))


def _type_call(spec: SiteSpec, typingctx, args: tuple):
    """numba's typing of a call of the intrinsic of ``spec``: ``(signature, codegen)``, or None
    for a call with the wrong count of values."""
    _, nbt = _numba_parts()
    if len(args) != spec.n_values:
        return None
    it = iter(args)
    vs = [_variable(spec, typingctx, k, t, n, None if k == "out" else next(it))
          for k, t, n in spec.variables]
    order = ([i for i, v in enumerate(spec.variables) if v[0] == "out"]
             + [i for i, v in enumerate(spec.variables) if v[0] == "mod"])
    results = [vs[i].type for i in order]
    ret = nbt.none if not results else results[0] if len(results) == 1 else nbt.Tuple(results)
    text = spec.asm_text([v.dtype for v in vs])

    def codegen(context, builder, signature, llargs):
        return _emit(spec, vs, order, text, context, builder, signature, llargs)

    return ret(*args), codegen


def _emit(spec: SiteSpec, vs: list[_Variable], order: list[int], text: str, context, builder,
          signature, llargs):
    """The inline asm of one call, in ``PTX_INJECT``'s operand layout: outputs $0..$n-1, one
    per variable (an in variable's is unused), inputs $n..$2n-1: an in variable's value (a
    plain input: no copy), a mod variable's value tied to its output, an immediate 0 for an out
    variable. Returns the outputs then the mods: nothing, one value or a tuple."""
    llir, _ = _numba_parts()
    carriers = {"h": llir.IntType(16), "r": llir.IntType(32), "l": llir.IntType(64),
                "f": llir.FloatType(), "d": llir.DoubleType()}
    lltys = [carriers[v.dtype.constraint] for v in vs]
    # out and mod outputs early-clobber ("=&"): never an input's register
    ins, cons = [], [f"={'' if kind == 'in' else '&'}{v.dtype.constraint}"
                     for (kind, _, _), v in zip(spec.variables, vs)]
    vals = iter(llargs)
    for i, ((kind, _, _), v) in enumerate(zip(spec.variables, vs)):
        if kind == "out":
            ins.append(llir.Constant(llir.IntType(32), 0))
            cons.append("n")
            continue
        x = _convert(context, builder, next(vals), v.type, v.carrier, v.by_value)
        ins.append(x if x.type == lltys[i] else builder.bitcast(x, lltys[i]))
        cons.append(v.dtype.constraint if kind == "in" else str(i))
    rty = (llir.VoidType() if not lltys else lltys[0] if len(lltys) == 1
           else llir.LiteralStructType(lltys))
    asm = llir.InlineAsm(llir.FunctionType(rty, [x.type for x in ins]), text,
                         ",".join(cons), side_effect=True)
    res = builder.call(asm, ins)
    if not order:
        return context.get_dummy_value()
    outs = []
    for i in order:
        v = vs[i]
        x = res if len(lltys) == 1 else builder.extract_value(res, i)
        llty = context.get_value_type(v.carrier)
        x = x if x.type == llty else builder.bitcast(x, llty)
        outs.append(_convert(context, builder, x, v.carrier, v.type, v.by_value))
    if len(outs) == 1:
        return outs[0]
    return context.make_tuple(builder, signature.return_type, outs)


def make_intrinsic(spec: SiteSpec) -> Any:
    """A new numba intrinsic for calls of ``spec`` (:func:`intrinsic_for` keeps one per spec),
    named ``numptx_site_<site name>``."""
    from numba.cuda.extending import intrinsic

    def typer(typingctx, *args):
        return _type_call(spec, typingctx, args)

    # numba folds the call's arguments with the typer's signature: give it one name per value
    params = "".join(f", v{i}" for i in range(spec.n_values))
    ns: dict = {"_typer": typer}
    exec(f"def numptx_site_{spec.name}(typingctx{params}):\n"
         f"    return _typer(typingctx{params})\n", ns)
    return intrinsic(ns[f"numptx_site_{spec.name}"])
