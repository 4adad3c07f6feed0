"""An ``nx.site(...)`` call as numptx reads it: its spec, the types it carries, and the checks
and misuse messages that numba's IR rewrite (the GPU build, :mod:`numptx.jit.numba.numba_rewrite`)
and the simulator (:func:`numptx.jit.numba.numba_site.site`) share, so that both refuse a misused site
with the same :class:`SiteError` and the same words.

    >>> from numptx.jit.numba.site_spec import SiteSpec, check_variables, dtype_name
    >>> dtype_name("float32"), dtype_name("F32")
    ('f32', 'f32')
    >>> spec = SiteSpec("combine", (("in", "f32", "x"), ("out", "f32", "z")))
    >>> spec.n_values                            # values the call passes: its in and mod ones
    1
    >>> check_variables("combine", [("in", None, "x"), ("out", "f32", "x")])
    Traceback (most recent call last):
    ...
    numptx.jit.numba.site_spec.SiteError: site 'combine': duplicate variable name 'x'

No numba here: :mod:`numptx.jit.numba.numba_site` re-exports the public names.
"""
from __future__ import annotations

import difflib
import re
from typing import Any, NamedTuple

from ... import valuetypes as VT
from ...annotate import site_asm_text
from ...dtypes import SiteType, get_dtype
from ...errors import NumptxError

__all__ = ["SiteError", "SiteSpec", "dtype_name", "resolve_dtype", "check_variables",
           "two_signatures", "RESERVED", "ALIASES"]

#: the keyword arguments of ``nx.site`` that declare variables rather than pass a value
RESERVED = ("out", "mod")


class SiteError(NumptxError):
    """A malformed ``nx.site(...)`` call, or a site evaluated where no stub is available."""


# ---------------------------------------------------------------------------------------------
# types
# ---------------------------------------------------------------------------------------------
#: NumPy, C and numba spellings of the value types that sites carry (numptx/valuetypes.py)
ALIASES = VT.aliases([v for v in VT.ROWS if v.site is not None])


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
    return ALIASES.get(name, name)


def resolve_dtype(obj: Any, what: str) -> SiteType:
    """The site type ``obj`` names; an unknown one raises :class:`SiteError` naming ``what``
    (the site and variable)."""
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
def not_a_dict(site_name: str, key: str) -> str:
    example = "{'z': nx.f32}" if key == "out" else "{'acc': acc[i]}"
    return (f"site {site_name!r}: {key}= must be a dict literal, e.g. {key}={example} (or a "
            f"variable assigned one dict literal in the kernel)")


def dict_as_input(site_name: str, key: str) -> str:
    close = difflib.get_close_matches(key, RESERVED, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]}=? " if close else ""
    return (f"site {site_name!r}: {key}= is given a dict, but a variable takes one value "
            f"({key}=a[i]); {hint}outputs are declared with out={{'z': nx.f32}}, read-and-written "
            f"values with mod={{'acc': acc[i]}}")


def nothing_returned(site_name: str) -> str:
    return (f"site {site_name!r} has no out= or mod= variables, so it returns nothing, but its "
            f"result is used: declare what it returns, e.g. out={{'z': nx.f32}} (the value) or "
            f"mod={{'acc': acc[i]}}")


def _check_name(spec_name: str, vname: str, what: str) -> None:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", vname or ""):
        raise SiteError(f"site {spec_name!r}: {what} name {vname!r} is not an identifier")


ONE_POSITIONAL = ("site(name, var=value, ..., out={...}, mod={...}) takes the site name as its "
                  "only positional argument")


def declared_signature(name: str, variables) -> str:
    """A site's signature as its call declares it, ``s(in x, out f32 z)``: a type shows where
    the call names it (out variables, ``x=(v, nx.u32)``), not where it follows the value."""
    return f"{name}({', '.join(f'{k} {t} {n}' if t else f'{k} {n}' for k, t, n in variables)})"


def two_signatures(name: str, first: str = "", second: str = "") -> str:
    detail = f": {first} and {second}" if first else ""
    return (f"site {name!r} is called with two different signatures{detail}; a site name has "
            f"one signature (the same variables, kinds and types at each call), since one stub "
            f"is injected into all of its calls: give one of them another site name")


def returned(variables) -> list[str]:
    return ([n for k, _, n in variables if k == "out"]
            + [n for k, _, n in variables if k == "mod"])


def unpacked(name: str, variables, count: int) -> str:
    names = returned(variables)
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
            resolve_dtype(t, f"site {name!r}, variable {vname!r}")
    try:
        site_asm_text(name, [(k, t or "b32", n) for k, t, n in variables])
    except SiteError:
        raise
    except NumptxError as e:
        raise SiteError(str(e)) from None

