"""CUDA-side annotations: the comment form of injection sites, and checks of the macro form.

A CUDA C++ kernel marks injection sites either with the macros of ``ptx_inject.cuh``::

    PTX_INJECT("combine", PTX_IN(F32, x), PTX_MOD(F32, acc), PTX_OUT(F32, z));

or with a comment block, which :func:`process_cuda` rewrites into the same inline asm (so the
result compiles with plain NVRTC or nvcc, without numptx's header)::

    /* PTX_INJECT combine
        in  f32 x
        mod f32 acc
        out f32 z
        in  f32 xj = a[j]
    */

Each variable line is ``<kind> <type> <name>`` or ``<kind> <type> <name> = <expr>``; ``kind`` is
``in``, ``mod`` or ``out``, ``type`` a built-in or registered type (case-insensitive), ``expr``
any expression for ``in`` and an lvalue for ``mod``/``out`` (default: the variable ``name``).
Lines starting with ``//`` are skipped, a ``//`` after a variable is a comment, and a header
written ``/* // PTX_INJECT combine`` disables the whole site (the block stays a comment).

>>> from numptx.annotate import process_cuda
>>> out = process_cuda("/* PTX_INJECT s\\n  in f32 x\\n  out f32 y\\n*/ y += 1;")
>>> out.count("\\n"), "// PTX_INJECT_BEGIN s" in out
(3, True)

:func:`emit_site` is the one generator of a site's statement; the header's macros produce the
same asm text (``tests/test_annotate.py`` compiles both and compares the PTX).
"""
from __future__ import annotations

import bisect
import logging
import os
import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Union

from .dtypes import SiteType, get_dtype, user_dtypes
from . import site_layout as L
from .errors import AnnotationError, TypeRegistryError

__all__ = ["process_cuda", "check_macro_annotations", "emit_site", "site_asm_text",
           "user_type_defines", "SiteVar", "KINDS", "MAX_MACRO_OPERANDS", "BITS_PRELUDE"]

log = logging.getLogger(__name__)

#: variable kinds, in the words the markers use
KINDS = ("in", "mod", "out")
#: operands per ``PTX_INJECT(...)`` that ``ptx_inject.cuh`` supports
MAX_MACRO_OPERANDS = 32

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

#: file name the prelude's own lines carry in compiler messages
PRELUDE_NAME = "numptx_bits_prelude"
def _bits_prelude() -> str:
    """The bit-copy helpers for ``bits``-mode types, taken from the header (one copy of the C++):
    the block from ``#ifndef PTX_INJECT_DETAIL_HELPERS`` to its ``#endif``."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include", "ptx_inject.cuh")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start = text.index("#ifndef PTX_INJECT_DETAIL_HELPERS")
    end = text.index("#endif", text.index("} /* namespace ptx_inject_detail */", start))
    return text[start:end] + "#endif\n"


#: helpers for ``bits``-mode types (the header's own block, under the same guard).
BITS_PRELUDE = _bits_prelude()


class SiteVar(NamedTuple):
    """One variable of a site: ``kind`` (in/mod/out), ``dtype``, ``name`` (register ``v_<name>``)
    and the C++ ``expr`` it reads or writes (defaults to ``name``)."""
    kind: str
    dtype: SiteType
    name: str
    expr: str


VarSpec = Union[SiteVar, "tuple[str, SiteType | str, str, str | None]", "tuple[str, SiteType | str, str]"]


# ---------------------------------------------------------------------------------------------
# lexing: find comments and literals so that annotations are never matched inside strings
# ---------------------------------------------------------------------------------------------
_LEX = re.compile(r"""
    (?P<raw>\b(?:u8|u|U|L)?R"(?P<delim>[^()\\\s"]{0,16})\(.*?\)(?P=delim)")
  | (?P<str>"(?:\\.|[^"\\\n])*")
  | (?P<chr>'(?:\\.|[^'\\\n])*')
  | (?P<num>(?<![\w.])\.?\d(?:[eEpP][+-]|'\w|[\w.])*)
  | (?P<line>//(?:\\\n|[^\n])*)
  | (?P<block>/\*.*?\*/)
  | (?P<open>/\*)
""", re.S | re.X)
_COMMENT_HEAD = re.compile(r"/\*\s*PTX_INJECT\s")


def _line_of(src: str, pos: int) -> int:
    return src.count("\n", 0, pos) + 1


def _err(msg: str, line: int | None, source_name: str) -> AnnotationError:
    return AnnotationError(msg, line=line, source_name=source_name)


# ---------------------------------------------------------------------------------------------
# the generator
# ---------------------------------------------------------------------------------------------
def _resolve(name: str, variables: Iterable[VarSpec], *, lines: Sequence[int | None] | None = None,
             source_name: str = "<source>") -> list[SiteVar]:
    """Validate a site; return its variables with resolved dtypes."""
    if not isinstance(name, str) or not _IDENT.match(name):
        raise _err(f"site name {name!r} is not an identifier ([A-Za-z_][A-Za-z0-9_]*)",
                   lines[0] if lines else None, source_name)
    out: list[SiteVar] = []
    seen: set[str] = set()
    for i, v in enumerate(variables):
        line = lines[i + 1] if lines else None
        if len(v) == 3:
            kind, dt, vname = v
            expr = None
        elif len(v) == 4:
            kind, dt, vname, expr = v
        else:
            raise _err(f"site {name!r}: variable {v!r} is not (kind, dtype, name[, expr])",
                       line, source_name)
        if kind not in KINDS:
            raise _err(f"site {name!r}: unknown kind {kind!r} (expected in, mod or out)",
                       line, source_name)
        if not isinstance(dt, SiteType):
            try:
                dt = get_dtype(dt)
            except TypeRegistryError as e:
                raise _err(f"site {name!r}: {e}", line, source_name) from None
        if not isinstance(vname, str) or not _IDENT.match(vname):
            raise _err(f"site {name!r}: variable name {vname!r} is not an identifier",
                       line, source_name)
        if vname in seen:
            raise _err(f"site {name!r}: duplicate variable name {vname!r}", line, source_name)
        seen.add(vname)
        expr = vname if expr is None else str(expr).strip()
        if not expr:
            raise _err(f"site {name!r}: empty expression for variable {vname!r}", line, source_name)
        out.append(SiteVar(kind, dt, vname, expr))
    return out


def _asm_template_lines(name: str, vs: Sequence[SiteVar]) -> list[str]:
    """Lines of the asm template, in inline-asm syntax (``%%v_x`` registers, ``%0`` operands).

    Operand layout (n variables): outputs ``%0 .. %n-1``, one per variable in order (read-write
    for a mod variable, an unused dummy for an in variable); inputs ``%n .. %2n-1``, one per
    variable (an in variable's value, else a dummy immediate). In variables are plain inputs,
    so the compiler hands the site the value's own register instead of a copy the asm may
    clobber; only the frame's private copy may be written (binding keeps the frame of a stub
    that writes one). Mod copies come before in copies. Out and mod outputs are early-clobber:
    never an input's register."""
    n = len(vs)
    lines = ["{"]
    reg = {v.name: "%" + L.reg_ref(v.name) for v in vs}      # %% is one % in inline asm
    lines += [f".reg .{v.dtype.reg} {reg[v.name]};" for v in vs]
    lines += [f"mov.{v.dtype.mov} {reg[v.name]}, %{i};" for i, v in enumerate(vs) if v.kind == "mod"]
    lines += [f"mov.{v.dtype.mov} {reg[v.name]}, %{n + i};" for i, v in enumerate(vs) if v.kind == "in"]
    lines.append(L.begin_line(name))
    lines += [L.var_line(v.kind, v.dtype.name, v.dtype.reg, v.name) for v in vs]
    lines.append(L.end_line())
    lines += [f"mov.{v.dtype.mov} %{i}, {reg[v.name]};" for i, v in enumerate(vs) if v.kind != "in"]
    lines.append("}")
    return lines


def site_asm_text(name: str, variables: Iterable[VarSpec]) -> str:
    """The asm text a site produces, as it appears in PTX before operand substitution
    (``%v_x`` registers, ``%0`` operand placeholders), lines separated by ``\\n\\t``."""
    vs = _resolve(name, variables)
    return "\n\t".join(_asm_template_lines(name, vs)).replace("%%", "%")


def _load(v: SiteVar) -> str:
    dt = v.dtype
    if dt.mode == "value":
        return f"({dt.ctype})({v.expr})"
    if dt.mode == "bits":
        return f"::ptx_inject_detail::bits<{dt.ctype}>({v.expr})"
    return f"({dt.cast}({v.expr}))"


def _store(v: SiteVar, tmp: str) -> str:
    dt = v.dtype
    if dt.mode == "value":
        return f"({v.expr}) = {tmp};"
    if dt.mode == "bits":
        return f"::ptx_inject_detail::store(({v.expr}), {tmp});"
    return f"({dt.cast}({v.expr})) = {tmp};"


def emit_site(name: str, variables: Iterable[VarSpec]) -> str:
    """The C++ statement of one site, on one line, ending with ``;``.

    ``variables``: ``(kind, dtype, name)`` or ``(kind, dtype, name, expr)`` tuples (or
    :class:`SiteVar`), ``dtype`` a :class:`~numptx.dtypes.SiteType` or a type name. The statement
    is ``do { <temporaries> asm volatile("..." : <operands>); <write-backs> } while (0);``; the
    asm text is exactly what ``PTX_INJECT`` from ``ptx_inject.cuh`` emits. ``bits``-mode types
    call the helpers of :data:`BITS_PRELUDE` (or of the header), which must be defined earlier.

    >>> print(emit_site("s", [("in", "f32", "x")]))  # doctest: +ELLIPSIS
    do { float __nx_t0 = (float)(x); asm volatile("{\\n\\t.reg .f32 %%v_x;\\n\\t..." : "=f"(__nx_t0) : "f"(__nx_t0)); } while (0);
    """
    vs = _resolve(name, variables)
    decls = []
    for i, v in enumerate(vs):
        tmp = f"__nx_t{i}"
        if v.kind == "out":
            decls.append(f"{v.dtype.ctype} {tmp};")
        else:
            decls.append(f"{v.dtype.ctype} {tmp} = {_load(v)};")
    template = "\\n\\t".join(_asm_template_lines(name, vs))
    # out and mod outputs early-clobber: never an input's register (binding needs them apart)
    outs = ", ".join(f'"{ {"in": "=", "out": "=&", "mod": "+&"}[v.kind] }{v.dtype.constraint}"'
                     f'(__nx_t{i})' for i, v in enumerate(vs))
    ins = ", ".join(f'"{v.dtype.constraint}"(__nx_t{i})' if v.kind == "in" else '"n"(0)'
                    for i, v in enumerate(vs))
    stores = [_store(v, f"__nx_t{i}") for i, v in enumerate(vs) if v.kind != "in"]
    parts = ["do {", *decls, f'asm volatile("{template}" : {outs} : {ins});', *stores, "} while (0);"]
    return " ".join(parts)


def user_type_defines() -> str:
    """``#define`` lines that make the types registered with :func:`numptx.register_type` usable
    in the macro form (``PTX_IN(MYTYPE, x)``), under their lower- and upper-case names.

    Put them after ``#include "ptx_inject.cuh"`` or before it (they are plain ``#define``s);
    :func:`numptx.cuda_to_ptx` does it for you. Empty when no type is registered. Each line is
    ``#define PTX_INJECT_TYPE_<name> (dtype, reg, mov, constraint, carrier, mode, (cast))``.
    """
    lines = []
    for d in user_dtypes():
        cast = f"({d.cast})" if d.cast else "()"
        lines.append(f'#define PTX_INJECT_TYPE_{d.name} ("{d.name}", "{d.reg}", "{d.mov}", '
                     f'"{d.constraint}", {d.ctype}, ptx_inject_{d.mode}, {cast})')
        if d.name.upper() != d.name:
            lines.append(f"#define PTX_INJECT_TYPE_{d.name.upper()} PTX_INJECT_TYPE_{d.name}")
    return "".join(line + "\n" for line in lines)


# ---------------------------------------------------------------------------------------------
# the comment form
# ---------------------------------------------------------------------------------------------
def _parse_comment_site(src: str, start: int, text: str, source_name: str
                        ) -> tuple[str, list[SiteVar]]:
    """Parse one ``/* PTX_INJECT ... */`` block found at ``start``."""
    body = text[2:-2]
    kw = body.index("PTX_INJECT")
    first_line = _line_of(src, start) + body.count("\n", 0, kw)
    rows = body[kw + len("PTX_INJECT"):].split("\n")
    head = rows[0].split("//", 1)[0].split()
    if not head:
        raise _err("PTX_INJECT comment without a site name (expected /* PTX_INJECT <name>)",
                   first_line, source_name)
    name = head[0]
    if not _IDENT.match(name):
        raise _err(f"site name {name!r} is not an identifier ([A-Za-z_][A-Za-z0-9_]*)",
                   first_line, source_name)
    if len(head) > 1:
        raise _err(f"site {name!r}: unexpected text after the site name: {' '.join(head[1:])!r} "
                   f"(put each variable on its own line)", first_line, source_name)
    specs: list[tuple[str, str, str, str | None]] = []
    lines: list[int | None] = [first_line]
    for off, row in enumerate(rows[1:], start=1):
        line = first_line + off
        s = row.split("//", 1)[0].strip()
        if not s:
            continue  # blank, or commented out with //
        lhs, eq, rhs = s.partition("=")
        toks = lhs.split()
        kind = toks[0] if toks else ""
        if kind.lower() not in KINDS:
            raise _err(f"site {name!r}: unknown kind {kind!r} in {s!r} (expected in, mod or out)",
                       line, source_name)
        if len(toks) < 2:
            raise _err(f"site {name!r}: missing type and name in {s!r} "
                       f"(expected <kind> <type> <name> [= <expr>])", line, source_name)
        if len(toks) < 3:
            raise _err(f"site {name!r}: missing variable name in {s!r} "
                       f"(expected <kind> <type> <name> [= <expr>])", line, source_name)
        if len(toks) > 3:
            raise _err(f"site {name!r}: unexpected text {' '.join(toks[3:])!r} in {s!r} "
                       f"(expected <kind> <type> <name> [= <expr>])", line, source_name)
        expr = rhs.strip() if eq else None
        if eq and not expr:
            raise _err(f"site {name!r}: missing expression after '=' in {s!r}", line, source_name)
        specs.append((kind.lower(), toks[1], toks[2], expr))
        lines.append(line)
    return name, _resolve(name, specs, lines=lines, source_name=source_name)


def process_cuda(src: str, *, source_name: str = "<source>") -> str:
    """Rewrite the comment-form annotations of ``src`` into inline-asm statements.

    Each ``/* PTX_INJECT <site> ... */`` block becomes the statement of :func:`emit_site`,
    written on the block's first line and followed by as many newlines as the block held, so
    line numbers do not move. When a site uses a ``bits``-mode type (f16, b32, ...), the helper
    prelude :data:`BITS_PRELUDE` is put on top, between ``#line`` directives so that messages
    keep ``source_name`` and the user's line numbers (compile under that name). A source without
    comment annotations comes back unchanged; the macro form and everything else is untouched.

    Raises :class:`~numptx.errors.AnnotationError` (with ``source_name`` and the line) for an
    unknown kind or type, a missing or bad name, a duplicate variable or an unterminated block.

    >>> process_cuda("int x; // PTX_INJECT is not here") == "int x; // PTX_INJECT is not here"
    True
    """
    if "PTX_INJECT" not in src:
        return src
    pieces: list[str] = []
    last = 0
    nsites = 0
    need_bits = False
    for m in _LEX.finditer(src):
        group = m.lastgroup
        if group not in ("block", "open"):
            continue
        text = m.group()
        if group == "open":
            if _COMMENT_HEAD.match(src, m.start()):
                raise _err("unterminated /* PTX_INJECT comment (no closing */)",
                           _line_of(src, m.start()), source_name)
            break  # an unterminated ordinary comment runs to the end: nothing more to see
        if not _COMMENT_HEAD.match(text):
            continue
        name, vs = _parse_comment_site(src, m.start(), text, source_name)
        need_bits = need_bits or any(v.dtype.mode == "bits" for v in vs)
        pieces.append(src[last:m.start()])
        pieces.append(emit_site(name, vs) + "\n" * text.count("\n"))
        last = m.end()
        nsites += 1
    if not nsites:
        return src
    pieces.append(src[last:])
    out = "".join(pieces)
    if need_bits:
        # the prelude reports its own errors (a size mismatch) under its own name, then the
        # numbering of the user's lines starts again at 1
        name = source_name.replace("\\", "\\\\").replace('"', '\\"')
        out = f'#line 1 "{PRELUDE_NAME}"\n{BITS_PRELUDE}#line 1 "{name}"\n{out}'
    log.debug("%s: rewrote %d PTX_INJECT comment site(s)", source_name, nsites)
    return out


# ---------------------------------------------------------------------------------------------
# checks of the macro form
# ---------------------------------------------------------------------------------------------
_PREPROC = re.compile(r"^[ \t]*#(?:\\\n|[^\n])*", re.M)
_LINE_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*line[ \t]+(\d+)", re.M)
_MACRO_SITE = re.compile(r"\bPTX_INJECT\s*\(")
_MACRO_OPERAND = re.compile(r"\bPTX_(IN|MOD|OUT)\s*\(")
_SITE_STRING = re.compile(r'"([^"\\]*)"\Z')


def _spaces(m: re.Match) -> str:
    return re.sub(r"[^\n]", " ", m.group())


def _blank_comments(src: str) -> str:
    """``src`` with comments and literals replaced by spaces (newlines kept), so offsets and
    line numbers stay valid."""
    out = []
    last = 0
    for m in _LEX.finditer(src):
        if m.lastgroup == "num":
            continue
        out.append(src[last:m.start()])
        if m.lastgroup == "open":  # an unterminated comment runs to the end
            out.append(re.sub(r"[^\n]", " ", src[m.start():]))
            last = len(src)
            break
        out.append(_spaces(m))
        last = m.end()
    out.append(src[last:])
    return "".join(out)


def _split_args(blank: str, start: int, end: int) -> list[tuple[int, int]]:
    """Top-level comma-separated spans of ``blank[start:end]``."""
    spans, depth, s = [], 0, start
    for i in range(start, end):
        c = blank[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            spans.append((s, i))
            s = i + 1
    spans.append((s, end))
    return spans


def _close_paren(blank: str, open_pos: int) -> int | None:
    """Index of the bracket closing ``blank[open_pos]``; None when unbalanced."""
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    for i in range(open_pos, len(blank)):
        c = blank[i]
        if c in "([{":
            stack.append(c)
        elif c in pairs:
            if not stack or stack.pop() != pairs[c]:
                return None
            if not stack:
                return i
    return None


def unquoted_site_name(src: str) -> tuple[int, str] | None:
    """(line, name) of the first ``PTX_INJECT(name, ...)`` whose site name is a bare identifier
    rather than a string literal, or None. NVRTC's errors for it name the macros' temporaries
    (``__nx_t2``); the compile path asks this only after NVRTC failed, so a name that is a
    macro for a string stays legal."""
    if "PTX_INJECT" not in src:
        return None
    blank = _PREPROC.sub(_spaces, _blank_comments(src))
    for m in _MACRO_SITE.finditer(blank):
        close = _close_paren(blank, m.end() - 1)
        if close is None:
            continue
        a, b = _split_args(blank, m.end(), close)[0]
        name = src[a:b].strip()
        if _IDENT.match(name):
            return _line_of(src, m.start()), name
    return None


# mm-ptx defines a custom type token in the kernel source:
#   #define PTX_TYPE_INFO_DOG PTX_TYPES_DESC(f32, f32, f, ID)   (reg, mov, constraint, bind kind)
_MMPTX_TYPE = re.compile(r"#\s*define\s+PTX_TYPE_INFO_(\w+)\s+PTX_TYPES_DESC\s*\(\s*(\w+)\s*,"
                         r"\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*\)")
# mm-ptx's bind kinds: ID passes the value; U16/U32 view the lvalue as the carrier
_MMPTX_BIND = {"U16": "*(unsigned short*)&", "U32": "*(unsigned int*)&"}


def _mmptx_type_hint(src: str, token: str) -> str:
    """For a type token the source defines the mm-ptx way, the ``nx.register_type`` call that
    makes it a numptx type (empty when the source does not define it)."""
    for m in _MMPTX_TYPE.finditer(src):
        if m.group(1) == token:
            reg, mov, constraint, bind = m.group(2, 3, 4, 5)
            cast = _MMPTX_BIND.get(bind)
            extra = f", {cast!r}" if cast else ""
            return (f"; the source defines {token} for mm-ptx (PTX_TYPE_INFO_{token} "
                    f"PTX_TYPES_DESC({reg}, {mov}, {constraint}, {bind})): register it first: "
                    f"nx.register_type({token!r}, {reg!r}, {mov!r}, {constraint!r}{extra})")
    return ""


def check_macro_annotations(src: str, source_name: str = "<source>") -> None:
    """Check the macro-form sites of ``src`` before NVRTC sees them (its errors are cryptic).

    Raises :class:`~numptx.errors.AnnotationError` with the source line for an unknown type in
    ``PTX_IN``/``PTX_MOD``/``PTX_OUT`` (or one in mixed case, which the macros do not know),
    an operand without a name, a bad or duplicate variable name, a site name literal that is
    not an identifier and more than :data:`MAX_MACRO_OPERANDS` operands. Comments, literals and
    preprocessor lines (``#define``, the header itself) are ignored; ``#line`` directives are
    honoured for the reported line numbers.
    """
    if "PTX_" not in src:
        return
    checker = _MacroChecker(src, source_name)
    for m in _MACRO_OPERAND.finditer(checker.blank):
        checker.operand(m)
    for m in _MACRO_SITE.finditer(checker.blank):
        checker.site(m)


class _MacroChecker:
    """:func:`check_macro_annotations` of one source: ``blank`` is the source with comments,
    literals and preprocessor lines blanked (offsets kept), so matches in it point into
    ``src``; errors give the line as ``#line`` directives number it."""

    def __init__(self, src: str, source_name: str):
        self.src, self.source_name = src, source_name
        nocomments = _blank_comments(src)
        # also drop #define lines (and the header itself)
        self.blank = _PREPROC.sub(_spaces, nocomments)
        self.newlines = [m.start() for m in re.finditer("\n", src)]
        self.directives = [(_line_of(src, m.start()), int(m.group(1)))
                           for m in _LINE_DIRECTIVE.finditer(nocomments)]

    def line_at(self, pos: int) -> int:
        """The line number of offset ``pos``, as the ``#line`` directives before it say."""
        phys = bisect.bisect_left(self.newlines, pos) + 1
        k = bisect.bisect_left(self.directives, (phys, -1)) - 1
        if k < 0:
            return phys
        dline, num = self.directives[k]
        return num + (phys - dline - 1)

    def fail(self, msg: str, pos: int) -> AnnotationError:
        return _err(msg, self.line_at(pos), self.source_name)

    def operand(self, m: re.Match) -> tuple[str, int, str | None]:
        """Check one PTX_IN/MOD/OUT(...); return (macro, position, variable name)."""
        src, fail = self.src, self.fail
        macro = f"PTX_{m.group(1)}"
        close = _close_paren(self.blank, m.end() - 1)
        if close is None:
            raise fail(f"{macro}( without its closing parenthesis", m.start())
        args = [src[a:b].strip() for a, b in _split_args(self.blank, m.end(), close)]
        tname = args[0]
        if not re.fullmatch(r"[A-Za-z_]\w*", tname):
            raise fail(f"{macro}: expected a type name as first argument, got {tname!r}", m.start())
        try:
            get_dtype(tname)
        except TypeRegistryError as e:
            raise fail(f"{macro}: {e}{_mmptx_type_hint(src, tname)}", m.start()) from None
        if tname not in (tname.lower(), tname.upper()):
            raise fail(f"{macro}: write the type {tname!r} as {tname.lower()!r} or "
                       f"{tname.upper()!r}", m.start())
        if len(args) < 2 or not args[1]:
            raise fail(f"{macro}({tname}, ...): missing variable name", m.start())
        if len(args) > 3:
            raise fail(f"{macro}({tname}, {args[1]}, ...): too many arguments (an expression "
                       f"with a top-level comma needs parentheses)", m.start())
        if not _IDENT.match(args[1]):
            raise fail(f"{macro}: variable name {args[1]!r} is not an identifier", m.start())
        if len(args) == 3 and not args[2]:
            raise fail(f"{macro}({tname}, {args[1]}, ): empty expression", m.start())
        return macro, m.start(), args[1]

    def site(self, m: re.Match) -> None:
        """Check one PTX_INJECT(...): its name, its operand count, its variable names."""
        blank, fail = self.blank, self.fail
        close = _close_paren(blank, m.end() - 1)
        if close is None:
            raise fail("PTX_INJECT( without its closing parenthesis", m.start())
        spans = _split_args(blank, m.end(), close)
        site_src = self.src[spans[0][0]:spans[0][1]].strip()
        if not site_src:
            raise fail("PTX_INJECT without a site name (expected PTX_INJECT(\"name\", ...))",
                       m.start())
        sm = _SITE_STRING.match(site_src)
        site = sm.group(1) if sm else site_src
        if sm and not _IDENT.match(site):
            raise fail(f"PTX_INJECT: site name {site_src} is not an identifier "
                       f"([A-Za-z_][A-Za-z0-9_]*)", m.start())
        ops = [sp for sp in spans[1:] if blank[sp[0]:sp[1]].strip()]
        if len(ops) > MAX_MACRO_OPERANDS:
            raise fail(f"PTX_INJECT({site_src}): {len(ops)} operands, more than the "
                       f"{MAX_MACRO_OPERANDS} ptx_inject.cuh supports", m.start())
        seen: set[str] = set()
        for a, b in ops:
            seg = blank[a:b]
            om = _MACRO_OPERAND.match(blank, a + len(seg) - len(seg.lstrip()))
            if om is None:
                continue  # something else (a user macro): leave it to the compiler
            _, pos, vname = self.operand(om)
            if vname in seen:
                raise fail(f"PTX_INJECT({site_src}): duplicate variable name {vname!r}", pos)
            seen.add(vname)
