"""The numba IR rewrite behind ``nx.site``: each ``site("name", x=..., out={...}, mod={...})`` call
becomes a call of the intrinsic of its signature (:mod:`numptx.jit.numba.numba_intrinsic`) with the in
and mod values as positional arguments.

numba types keyword arguments but not dictionaries on the GPU, so the rewrite runs
``before-inference``: it reads the site name, the variable names and the types from the IR as
compile-time constants (``out``/``mod`` must be dict literals, possibly assigned to a variable
earlier in the kernel), checks the call as the simulator does (:mod:`numptx.jit.numba.site_spec`),
and drops the definitions the call no longer needs. A misused site raises numba's
``UnsupportedError`` with a ``"numptx: "`` message at the call's source position.

This module imports numba-cuda's compiler (through :mod:`numptx.jit.numba.numba_compat`), so only
:func:`numptx.jit.numba.numba_site.register` imports it, once ``numba.cuda`` is imported::

    from numptx.jit import numba_rewrite
    numba_rewrite.register(nx.site)       # what numba_site.register() does, once
"""
from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ...errors import NumptxError
from .numba_compat import ir_definitions, rewrite_api
from .numba_intrinsic import intrinsic_for
from .site_spec import (
    RESERVED,
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

__all__ = ["SiteRewrite", "register", "value_of"]

#: site functions whose registration waits for the end of this module's import (see register)
_pending: list[Callable[..., Any]] = []


def register(site_function: Callable[..., Any]) -> None:
    """Register :class:`SiteRewrite` with numba-cuda's compiler for calls of ``site_function``
    (``nx.site``). Call it once: :func:`numptx.jit.numba.numba_site.register` does."""
    if "SiteRewrite" not in globals():
        # numba.cuda's post-import hook, run by this module's own import of numba (rewrite_api
        # below) when this module is imported first: defined before that import, so the hook
        # finds it; the registration happens at the end of this module's import
        _pending.append(site_function)
        return
    SiteRewrite.site_function = site_function
    register_rewrite("before-inference")(SiteRewrite)


ir, UnsupportedError, Rewrite, register_rewrite = rewrite_api()

#: IR values whose Python value is known at compile time
_PURE = (ir.Global, ir.FreeVar, ir.Const)


def value_of(func_ir, var, depth: int = 0) -> Any:
    """The compile-time Python value of ``var`` (a constant, a global or module attribute);
    raises KeyError when it has none."""
    if depth > 8:
        raise KeyError(var)
    try:
        d = func_ir.get_definition(var)
    except Exception:   # noqa: BLE001 - numba's KeyError today; any failure: no known value
        raise KeyError(var) from None
    if isinstance(d, _PURE):
        return d.value
    if isinstance(d, ir.Expr) and d.op == "getattr":
        base = value_of(func_ir, d.value, depth + 1)
        if isinstance(base, (types.ModuleType, type)):    # no user getattr code runs
            try:
                return getattr(base, d.attr)
            except AttributeError:
                raise KeyError(var) from None
    if isinstance(d, ir.Var):
        return value_of(func_ir, d, depth + 1)
    raise KeyError(var)


def _constant(func_ir, var) -> Any:
    """``var``'s compile-time value, or None when it has none."""
    try:
        return value_of(func_ir, var)
    except KeyError:
        return None


def _definition(func_ir, var):
    try:
        return func_ir.get_definition(var)
    except Exception:   # noqa: BLE001 - numba's KeyError today; any failure: no definition
        return None


def _is_dict(d) -> bool:
    return isinstance(d, ir.Expr) and d.op == "build_map"


def _split_typed(func_ir, var, site_name: str, vname: str, loc):
    """``value`` or ``(value, type)`` -> (value var, type name or None, dead vars)."""
    d = _definition(func_ir, var)
    if isinstance(d, ir.Expr) and d.op == "build_tuple" and len(d.items) == 2:
        try:
            t = value_of(func_ir, d.items[1])
        except KeyError:
            raise UnsupportedError(f"numptx: site {site_name!r}: {vname}=(value, type) needs a "
                                   f"constant type", loc) from None
        return d.items[0], dtype_name(t), [var, d.items[1]]
    return var, None, []


def _read(val) -> list:
    """The variables an assignment's value reads."""
    return ([val] if isinstance(val, ir.Var) else
            val.list_vars() if isinstance(val, ir.Expr) else [])


class _Call:
    """What the rewrite reads of one site call: its variables ``(kind, type or None, name)``,
    the value variables it passes (in and mod, in order) and the variables it leaves dead."""

    def __init__(self, func_ir, call, name: str):
        self.func_ir, self.loc, self.name = func_ir, call.loc, name
        self.variables: list[tuple] = []
        self.args: list = []
        self.dead: list = [call.func, call.args[0]]

    def value(self, kind: str, vname: str, var) -> None:
        """An in or mod variable: ``value`` or ``(value, type)``."""
        v, t, more = _split_typed(self.func_ir, var, self.name, vname, self.loc)
        self.variables.append((kind, t, vname))
        self.args.append(v)
        self.dead += more

    def declared_dict(self, key: str, d) -> None:
        """The ``out={...}`` or ``mod={...}`` dict literal ``d``."""
        for kvar, vvar in d.items:
            vname = _constant(self.func_ir, kvar)
            if not isinstance(vname, str):
                raise UnsupportedError(f"numptx: site {self.name!r}: {key}= keys must be "
                                       f"string constants", self.loc)
            self.dead.append(kvar)
            if key != "out":
                self.value("mod", vname, vvar)
                continue
            try:
                t = value_of(self.func_ir, vvar)
            except KeyError:
                raise UnsupportedError(f"numptx: site {self.name!r}: out={{{vname!r}: "
                                       f"...}} needs a constant type such as "
                                       f"nx.f32 or 'f32'", self.loc) from None
            self.variables.append(("out", dtype_name(t), vname))
            self.dead.append(vvar)


class SiteRewrite(Rewrite):
    """``site("name", x=..., out={...}, mod={...})`` -> ``<intrinsic>(x, ..., mod values)``."""

    #: the function whose calls are sites (``nx.site``; set by :func:`register`)
    site_function: Callable[..., Any] | None = None

    def __init__(self, state=None):
        super().__init__(state)
        self.state = state

    def match(self, func_ir, block, typemap, calltypes):
        self.func_ir, self.block = func_ir, block
        self.calls = [st for st in block.body if isinstance(st, ir.Assign)
                      and self._is_site_call(st.value)]
        return bool(self.calls)

    def _is_site_call(self, expr) -> bool:
        if not (isinstance(expr, ir.Expr) and expr.op == "call"):
            return False
        try:
            return value_of(self.func_ir, expr.func) is type(self).site_function
        except KeyError:
            return False

    def _spec(self, call) -> tuple[SiteSpec, list, list]:
        """(spec, value variables, dead variables) of a site call; raises UnsupportedError
        for a malformed one."""
        func_ir, loc = self.func_ir, call.loc
        if call.vararg is not None or getattr(call, "varkwarg", None) is not None:
            raise UnsupportedError("numptx: site(...) does not take *args or **kwargs", loc)
        if len(call.args) != 1:
            raise UnsupportedError("numptx: site(name, var=value, ..., out={...}, mod={...}) "
                                   "takes the site name as its only positional argument", loc)
        name = _constant(func_ir, call.args[0])
        if not isinstance(name, str):
            raise UnsupportedError("numptx: the site name must be a string constant", loc)
        parsed = _Call(func_ir, call, name)
        for key, var in call.kws:
            d = _definition(func_ir, var)
            if key in RESERVED:
                if not _is_dict(d):
                    raise UnsupportedError(f"numptx: {not_a_dict(name, key)}", loc)
                parsed.dead.append(var)
                parsed.declared_dict(key, d)
            elif _is_dict(d):
                raise UnsupportedError(f"numptx: {dict_as_input(name, key)}", loc)
            else:
                parsed.value("in", key, var)
        spec = SiteSpec(name, tuple(parsed.variables))
        self._check(spec, loc)
        return spec, parsed.args, parsed.dead

    def _check(self, spec: SiteSpec, loc) -> None:
        """The checks the simulator shares, and one signature per site name in a function
        (the simulator checks that per launch)."""
        name = spec.name
        try:
            check_variables(name, list(spec.variables))
        except NumptxError as e:
            raise UnsupportedError(f"numptx: {e}", loc) from None
        seen = self.func_ir.__dict__.setdefault("_numptx_sites", {})
        first = seen.setdefault(name, spec.variables)
        if first != spec.variables:
            both = two_signatures(name, declared_signature(name, first),
                                  declared_signature(name, spec.variables))
            raise UnsupportedError(f"numptx: {both}", loc)

    def _check_use(self, spec: SiteSpec, target: str, loc) -> None:
        """The call's result is used as the site returns it: unpacked into as many names as
        it returns (two or more), and not used at all when it returns nothing."""
        count = self._unpacked(target)
        names = returned(spec.variables)
        if count is not None and (len(names) < 2 or count != len(names)):
            raise UnsupportedError(f"numptx: {unpacked(spec.name, spec.variables, count)}", loc)
        if not any(k != "in" for k, _, _ in spec.variables) and self._used(target):
            raise UnsupportedError(f"numptx: {nothing_returned(spec.name)}", loc)

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
            self._check_use(spec, st.target.name, call.loc)
            dead += more
            fvar = ir.Var(block.scope, block.scope.redefine("$numptx_site", call.loc).name,
                          call.loc)
            g = ir.Global(f"numptx_site_{spec.name}", intrinsic_for(spec), call.loc)
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

    def _uses(self, block) -> dict[str, int]:
        """Variable name -> how many statements read it, with ``block`` (the rewritten one)
        in place of the block being rewritten."""
        used: dict[str, int] = {}
        for blk in self.func_ir.blocks.values():
            for st in (block if blk is self.block else blk).body:
                for v in (_read(st.value) if isinstance(st, ir.Assign) else st.list_vars()):
                    used[v.name] = used.get(v.name, 0) + 1
        return used

    def _drop_dead(self, block, candidates: set[str]) -> None:
        """Remove the now unused definitions of the site function, dicts and types (in
        any block: a dict variable may be assigned before the block of its call)."""
        bodies = [block] + [blk for blk in self.func_ir.blocks.values()
                            if blk is not self.block]
        changed = True
        while changed and candidates:
            changed = False
            used = self._uses(block)
            for body in bodies:
                for st in list(body.body):
                    if (isinstance(st, ir.Assign) and st.target.name in candidates
                            and not used.get(st.target.name) and _droppable(st.value)):
                        body.body.remove(st)
                        candidates.discard(st.target.name)
                        candidates.update(v.name for v in _read(st.value))
                        defs = ir_definitions(self.func_ir).get(st.target.name)
                        if defs and st.value in defs:
                            defs.remove(st.value)
                        changed = True
                    elif (isinstance(st, ir.Del) and st.value in candidates
                          and not used.get(st.value)):
                        body.body.remove(st)


def _droppable(value) -> bool:
    """A definition that may go once nothing reads it: no side effect."""
    return (isinstance(value, _PURE + (ir.Var,))
            or (isinstance(value, ir.Expr) and value.op in ("getattr", "build_map", "build_tuple")))


while _pending:             # registrations asked for during this module's import (see register)
    register(_pending.pop(0))
