"""Checks of raw PTX stubs that the assembler does not make: an out variable the stub never
writes assembles (ptxas reads an undefined register without a word) and the kernel stores
whatever the register held.

    >>> unwritten_outputs("add.rn.f32 %v_y, %v_x, %v_x;", site)   # site: in x, out z  # doctest: +SKIP
    ('z',)
    >>> check_outputs_written(text, site)                  # an UnwrittenOutputWarning  # doctest: +SKIP
    >>> check_outputs_written(text, site, strict=True)     # an UnwrittenOutputError    # doctest: +SKIP

Where the text parses as the emulator parses it (instructions of the table, PTX block scoping)
that parse decides, so a write to an inner ``.reg`` of the same name (which shadows the site's
register) does not count; otherwise each statement's first operand counts as written (outside
``[...]`` addresses), which never reports a written variable."""
from __future__ import annotations

import re
import warnings
from typing import Any

from ..errors import NumptxError

__all__ = ["unwritten_outputs", "check_outputs_written", "UnwrittenOutputError",
           "UnwrittenOutputWarning"]


class UnwrittenOutputError(NumptxError):
    """A stub that never writes an out variable of its site (``strict=True``);
    ``site`` and ``variables`` name them."""

    def __init__(self, message: str, *, site: str = "", variables: tuple = ()):
        super().__init__(message)
        self.site, self.variables = site, variables


class UnwrittenOutputWarning(UserWarning):
    """A stub that never writes an out variable of its site (the build goes on)."""


_NO_RESULT = ("st.", "st ", "red.", "bar", "bra", "ret", "exit", "membar", "fence", "prefetch",
              "trap", "call", "brkpt", "nanosleep", "griddepcontrol", "barrier", "cp.async",
              "mbarrier.init", "mbarrier.arrive.noComplete")
_REG = re.compile(r"%([A-Za-z_$][\w$]*)")


def _written_by_text(text: str) -> set[str]:
    from .._text import split_top
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = " ".join(line.split("//", 1)[0] for line in text.split("\n"))
    out: set[str] = set()
    for stmt in text.split(";"):
        stmt = stmt.strip().lstrip("{}").strip()
        stmt = re.sub(r"^@!?%[\w$.]+\s+", "", stmt)
        if not stmt or stmt.startswith(".") or stmt.startswith(_NO_RESULT):
            continue
        parts = stmt.split(None, 1)
        if len(parts) < 2:
            continue
        first = split_top(parts[1], "{", "}")[0]
        out.update(_REG.findall(re.sub(r"\[[^\]]*\]", "", first)))
    return out


def _written(text: str) -> tuple[set[str], dict[str, int]]:
    """(registers the stub's top level writes, names declared in inner blocks -> line)."""
    from ..dsl.emulator import EmulationError, registers_written
    try:
        written, inner = registers_written(text)
    except EmulationError:
        return _written_by_text(text), {}
    return set(written), inner


def unwritten_outputs(text: str, site: Any) -> tuple[str, ...]:
    """Names of the out variables of ``site`` that ``text`` never writes (mods may pass
    through unwritten)."""
    written, _ = _written(text)
    return tuple(v.name for v in site.variables if v.kind == "out" and v.reg not in written)


def check_outputs_written(text: str, site: Any, *, strict: bool = False) -> None:
    """Warn (:class:`UnwrittenOutputWarning`), or with ``strict`` raise
    :class:`UnwrittenOutputError`, where ``text`` never writes an out variable of ``site``."""
    unsat = _compiled_unwritten(text)
    if unsat is not None:         # a compiled Stub knows what it left unwritten: no parse
        outs = text.outputs       # (a stub compiled for other outputs writes none of the site's)
        missing = [v for v in site.variables
                   if v.kind == "out" and (v.reg in unsat or v.reg not in outs)]
        if missing:
            report_unwritten(missing, site, {}, strict=strict, stacklevel=4)
        return
    written, inner = _written(text)
    missing = [v for v in site.variables if v.kind == "out" and v.reg not in written]
    if missing:
        report_unwritten(missing, site, inner, strict=strict, stacklevel=4)


def _compiled_unwritten(text: Any):
    """The registers a compiled Stack PTX stub left unwritten, or None where only a parse can
    tell (raw text; a stub with more than 32 unsatisfied outputs, past its mask)."""
    outs = getattr(text, "outputs", None)
    if not hasattr(text, "unsatisfied") or not isinstance(outs, dict):
        return None
    unsat = set(text.unsatisfied)
    if text.n_unsatisfied > len(unsat):
        return None
    return unsat


def report_unwritten(missing: list, site: Any, inner: dict, *, strict: bool,
                     stacklevel: int = 3) -> None:
    """Warn, or with ``strict`` raise, for the out variables ``missing`` of ``site``."""
    names = ", ".join(f"{v.name!r} (%{v.reg})" for v in missing)
    shadow = [v for v in missing if v.reg in inner]
    hint = "".join(f"; %{v.reg} is declared inside a {{ }} block (stub line {inner[v.reg]}), "
                   f"which shadows the site's register there" for v in shadow)
    v = missing[0]
    msg = (f"site {site.name!r}: the stub never writes out variable{'s' if len(missing) > 1 else ''} "
           f"{names}: on a GPU the kernel reads whatever the register held{hint}; write it "
           f"(e.g. mov.{v.reg_type} %{v.reg}, ...;) or declare the variable mod")
    if strict:
        raise UnwrittenOutputError(msg, site=site.name, variables=tuple(v.name for v in missing))
    warnings.warn(msg, UnwrittenOutputWarning, stacklevel=stacklevel)
