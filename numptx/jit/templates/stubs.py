"""Stubs as the build takes them: what a stub may be, and its PTX text for one site.

A stub is PTX text (``str``, Stack PTX stubs included), a Stack PTX program (a list of
:mod:`numptx.stack_ptx` ops or its uint64 encoding, compiled for the site), or an object with a
``.stub(site)`` method (``@nx.ptx_expr`` formulas). The templates (:mod:`.template`) and the
simulator's build checks (:mod:`.sim_checks`) both resolve stubs here, so the two accept the
same stubs. Raw text (any ``str`` numptx did not compile) keeps the stub contract of
:func:`~numptx.jit.templates.stub_checks.check_stub_rules` (docs/templates.md, "What a stub may
contain"), else a ``StubRuleError`` names the site and the line::

    >>> import numptx as nx
    >>> inj = nx.PtxInject(ptx)                                          # doctest: +SKIP
    >>> resolve_stub("add.f32 %v_z, %v_x, %v_y;", inj.sites["combine"])  # doctest: +SKIP
    'add.f32 %v_z, %v_x, %v_y;'
    >>> merge_stubs({"combine": "..."}, {"post": "..."})
    {'combine': '...', 'post': '...'}
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from ... import stack_ptx as sp
from ...errors import (LinkError, NumptxError, RenderError, StubNulWarning, trim_stub_nul,
                      warn_from_caller)
from ...inject import Site
from ...site_layout import GeneratedStub
from ..compile.patch import LibraryText, library_literals
from .stub_checks import blank_comments, check_outputs_written, check_stub_rules

__all__ = ["resolve_stub", "merge_stubs", "checked_text"]


def resolve_stub(stub: Any, site: Site, *, strict: bool = False, packed: bool = False) -> str:
    """PTX text of ``stub`` for ``site`` (see the module documentation for what a stub may be).
    A raw PTX stub that never writes an out variable of the site warns
    (:class:`~numptx.jit.templates.stub_checks.UnwrittenOutputWarning`); with ``strict`` it raises
    :class:`~numptx.jit.templates.stub_checks.UnwrittenOutputError`. Raw text (any ``str`` numptx did
    not compile, and the text a user object's ``.stub(site)`` returns) must keep the stub
    contract (:func:`~numptx.jit.templates.stub_checks.check_stub_rules`; ``packed``: a candidate of a
    pack, which may not ``ret``/``exit`` either), else :class:`StubRuleError`."""
    if isinstance(stub, str):
        if _generated(stub):        # numptx's own compiled stubs are well formed
            # a compiled mm-ptx stub leaves unsatisfied outputs unwritten: check against the
            # site from its diagnostics (no parse); numptx's zero-fills every output
            if getattr(stub, "dialect", "numptx") != "numptx":
                check_outputs_written(stub, site, strict=strict)
            return stub if type(stub) is GeneratedStub else str(stub)
        stub = str.__str__(stub)     # np.str_ and other str types: raw text like any other
        if "\0" in stub:             # mm-ptx-py's stubs end in a C string's NUL: trim, warn
            stub = _trimmed(stub, site.name)
        check_stub_rules(stub, site.name, packed=packed, registers=_site_registers(site))
        if "%" in stub:
            _check_registers(stub, site)
        check_outputs_written(stub, site, strict=strict)   # an unwritten out: warn or raise
        return checked_text(stub, site.name)
    make = getattr(stub, "stub", None)
    if callable(make):
        out = make(site)
        if type(out) is GeneratedStub:       # a packed population (numptx.jit.populations.pack)
            return out
        text = getattr(out, "text", out)
        if not isinstance(text, str):
            raise NumptxError(f"site {site.name!r}: {type(stub).__name__}.stub(site) returned "
                              f"{type(out).__name__}, not PTX text")
        if not _generated(out):            # a user object's text: raw text like any other
            text = str.__str__(text)
            check_stub_rules(text, site.name, packed=packed, registers=_site_registers(site))
            text = checked_text(text, site.name)
        library = library_literals(stub)      # a formula's math-library constants: not patched
        return LibraryText(text, library) if library else str(text)
    if isinstance(stub, (list, tuple, np.ndarray)):      # sp.encode's arrays included
        out = sp.compile(stub, site=site)
        if out.dialect != "numptx":         # (an mm-ptx program may leave an out unwritten)
            check_outputs_written(out, site, strict=strict)
        return str(out)
    if callable(stub) and hasattr(stub, "__code__"):
        name = getattr(stub, "__name__", "f")
        raise NumptxError(f"site {site.name!r}: the stub is the plain function {name!r}; a "
                          f"Python formula becomes a stub when decorated with @nx.ptx_expr "
                          f"(@nx.ptx_expr above 'def {name}', or pass nx.ptx_expr({name}))")
    raise NumptxError(f"site {site.name!r}: a stub is PTX text, a Stack PTX program or an object "
                      f"with .stub(site), not {type(stub).__name__}")


def _site_registers(site: Site) -> frozenset[str]:
    """The registers of ``site``'s variables (``v_x`` ...): what a stub may use undeclared."""
    return frozenset(v.reg for v in site.variables)


def _generated(stub: Any) -> bool:
    """Whether ``stub`` is text numptx generated: a compiled Stack PTX stub (``sp.Stub``, made
    by ``sp.compile``, ``@ptx_expr``) or a packed population. Other ``str`` types (user
    subclasses, ``np.str_``) are raw text and checked as such."""
    return type(stub) is sp.Stub or type(stub) is GeneratedStub


def _trimmed(text: str, site: str) -> str:
    text, trimmed = trim_stub_nul(text, site)
    if trimmed:
        warn_from_caller(f"the stub of site {site!r} ends in NUL bytes (as mm-ptx-py returns "
                         f"its stubs); numptx trimmed them: pass the text without the "
                         f"trailing '\\x00' to silence this", StubNulWarning)
    return text


_PERCENT = re.compile(r"%([A-Za-z_$][\w$]*)(?![\w$.])")     # %tid.x: a special register
_REG_DECL = re.compile(r"\.reg\s+\.\w+\s+([^;]*);")


def _check_registers(text: str, site: Site) -> None:
    """A raw stub that names a site variable ``%z`` instead of its register ``%v_z`` (and does
    not declare ``%z`` itself) is refused with the rule: ptxas would say only "Unknown symbol"."""
    names = {v.name: v.reg for v in site.variables if v.name != v.reg}
    if not names:
        return
    text = blank_comments(text)[0]              # a comment may say anything
    used = set(_PERCENT.findall(text))
    bad = sorted(used & names.keys())
    if not bad:
        return
    declared = set(_PERCENT.findall(" ".join(_REG_DECL.findall(text))))
    bad = [n for n in bad if n not in declared]
    if bad:
        n = bad[0]
        regs = ", ".join(f"%{v.reg}" for v in site.variables)
        line = next((ln.strip() for ln in text.splitlines() if re.search(rf"%{n}\b", ln)), "")
        raise LinkError(f"invalid stub for site {site.name!r}: %{n} is not a register of the "
                        f"site; a stub names each site variable by its register %v_<name> "
                        f"({regs}): write %{names[n]}", site=site.name, stub_line=line)




def _find_all(text: str, ch: str) -> list[tuple[int, str]]:
    """(position, ch) of each ``ch`` in ``text`` (str.find: C speed, one call per hit)."""
    out, i = [], text.find(ch)
    while i >= 0:
        out.append((i, ch))
        i = text.find(ch, i + 1)
    return out


def checked_text(text: str, site: str) -> str:
    """A raw PTX stub for site ``site``, refused early where it cannot work in any template:
    text that is not UTF-8, or braces that do not pair (a stray ``}`` closes the kernel's own
    scope, and ptxas then blames lines the user never wrote). Runs on every inject: only the
    braces are walked."""
    try:
        text.encode()
    except UnicodeEncodeError as e:
        raise RenderError(f"the stub of site {site!r} is not encodable text: {e}") from None
    if "{" not in text and "}" not in text:
        return text
    code = blank_comments(text)[0]            # one pass (a regex is quadratic on '/* /* ...')
    depth = 0
    for pos, ch in sorted(_find_all(code, "{") + _find_all(code, "}")):
        depth += 1 if ch == "{" else -1
        if depth < 0:
            lineno = code.count("\n", 0, pos) + 1
            line = text.split("\n")[lineno - 1].strip()      # lines as ptxas counts them
            raise LinkError(f"invalid stub for site {site!r}: stub line {lineno} {line!r} closes "
                            f"a '}}' the stub did not open", site=site, stub_line=line)
    if depth:
        raise LinkError(f"invalid stub for site {site!r}: {depth} '{{' left open at the end "
                        f"of the stub", site=site)
    return text


def merge_stubs(stubs: Mapping[str, Any] | None, kw: Mapping[str, Any]) -> dict[str, Any]:
    """Stubs given as a mapping and as keywords (``inject({...}, post=...)``), in one dict; a
    site named in both is an error."""
    if stubs is not None and not isinstance(stubs, Mapping):
        raise RenderError(f"stubs are given as a mapping site name -> stub (or keywords), not "
                          f"{type(stubs).__name__}")
    both = dict(stubs or {})
    dup = both.keys() & kw.keys()
    if dup:
        raise RenderError(f"stub for site(s) {sorted(dup)} given twice")
    both.update(kw)
    return both
