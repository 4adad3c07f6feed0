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

from ...errors import LinkError, NumptxError
from ...site_layout import REG_PREFIX, RESERVED

__all__ = ["unwritten_outputs", "check_outputs_written", "UnwrittenOutputError",
           "UnwrittenOutputWarning", "StubRuleError", "check_stub_rules", "check_reserved",
           "blank_comments",
           "STUB_DIRECTIVES", "PACK_REFUSED"]


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
    from ..._text import split_top
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
    from ...dsl.emulator import EmulationError, registers_written
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


# -- what a raw stub may contain (docs/templates.md, "What a stub may contain") ------------------

class StubRuleError(LinkError):
    """A raw stub that breaks the stub contract (module-scope or state-space directives, numptx's
    reserved names, a branch out of the stub, a register of the kernel, a ``/*`` left open,
    ``ret``/``exit`` in a pack). ``site`` names the site, ``line`` the stub line (from 1),
    ``stub_line`` its text, ``rule`` what it breaks (``"directive"``, ``"reserved"``,
    ``"branch"``, ``"register"``, ``"comment"``, ``"control"``)."""

    def __init__(self, message: str, *, site: str | None = None, line: int = 0,
                 stub_line: str = "", rule: str = ""):
        super().__init__(message, site=site, stub_line=stub_line)
        self.line, self.rule = line, rule


#: the only directive a raw stub may hold: register declarations (what Stack PTX and
#: ``@ptx_expr`` stubs hold too); every other one (``.global``, ``.extern``, ``.entry``, ...) is
#: refused: module scope and memory belong to the template
STUB_DIRECTIVES = frozenset({".reg"})
#: instructions a packed candidate may not hold: they leave the candidate's code other than by
#: its end (the pack's dispatch, and the full-warp shuffles after it in nx.fitness, then run
#: with threads missing: undefined behaviour on a GPU) or stop the whole launch
PACK_REFUSED = frozenset({"ret", "exit", "trap", "brkpt"})

_NOT_NL = re.compile(r"[^\n]")


def blank_comments(text: str) -> tuple[str, int]:
    r"""(``text`` with each comment blanked to spaces, its line breaks kept; the position of a
    ``/*`` left open, else -1). One pass with ``str.find``: a regex's lazy ``/\*.*?\*/``
    scans to the end from each unclosed ``/*``, quadratic in the text (48 KB of ``/* `` took
    6 s)."""
    if "/" not in text:
        return text, -1
    out, i, n = [], 0, len(text)
    while True:
        j = text.find("/", i)
        while 0 <= j < n - 1 and text[j + 1] not in "/*":
            j = text.find("/", j + 1)
        if j < 0 or j >= n - 1:
            out.append(text[i:])
            return "".join(out), -1
        out.append(text[i:j])
        if text[j + 1] == "/":
            e = text.find("\n", j)
            e = n if e < 0 else e
            out.append(" " * (e - j))
        else:
            e = text.find("*/", j + 2)
            if e < 0:
                out.append(text[j:])
                return "".join(out), j
            e += 2
            out.append(_NOT_NL.sub(" ", text[j:e]))
        i = e
_CHUNK = re.compile(r"[^;{}]+|[{}]")
_LABELS = re.compile(r"\s*((?:[A-Za-z_$%][\w$]*\s*:(?!:)\s*)+)")
_LABEL_NAME = re.compile(r"([A-Za-z_$%][\w$]*)\s*:")
# ptxas takes white space (line breaks included) on either side of the '!': "@ ! %p bra L;"
_GUARD = re.compile(r"@\s*!?\s*%?[\w$.]+\s+")
_TARGET = re.compile(r"[A-Za-z_$%][\w$]*")


def _refuse(site: str, text: str, pos: int, what: str, rule: str) -> None:
    # lines as ptxas counts them: "\n" ends a line; "\r", "\x85", "\u2028" ... do not
    lineno = text.count("\n", 0, pos) + 1
    line = text.split("\n")[lineno - 1].strip() if text else ""
    raise StubRuleError(f"invalid stub for site {site!r}: stub line {lineno} {line!r}: {what}",
                        site=site, line=lineno, stub_line=line, rule=rule)


def _statements(code: str):
    """(position, labels, guard-stripped statement, guard, scope) of each statement of
    comment-free ``code``; ``scope`` is the chain of ``{ }`` blocks (ids, outermost first) it
    lies in."""
    chain, blocks = (0,), 0
    for m in _CHUNK.finditer(code):
        chunk = m.group()
        if chunk == "{":
            blocks += 1
            chain += (blocks,)
            continue
        if chunk == "}":
            chain = chain[:-1] if len(chain) > 1 else chain    # unpaired: checked_text refuses
            continue
        lab = _LABELS.match(chunk)
        labels = _LABEL_NAME.findall(lab.group(1)) if lab else []
        rest = chunk[lab.end():] if lab else chunk
        stripped = rest.lstrip()
        start = m.start() + (len(chunk) - len(stripped) if stripped else 0)
        g = _GUARD.match(stripped)
        yield start, labels, stripped[g.end():] if g else stripped, g.group() if g else "", chain


class _Registers:
    """The ``%`` registers a stub declares (per ``{ }`` block) and uses, to find the uses that
    are neither the site's, nor special, nor declared where they are used."""

    def __init__(self, site_regs: frozenset[str] | None):
        self.site = site_regs
        self.declared: dict[int, set[str]] = {}
        self.ranges: dict[int, dict[str, int]] = {}      # %r<4>: prefix -> count
        self.uses: list[tuple[int, str, tuple[int, ...]]] = []

    def see(self, pos: int, op: str, stmt: str, guard: str, chain: tuple[int, ...]) -> None:
        if self.site is None:
            return
        if op == ".reg":
            for name, count in _DECL.findall(stmt):
                if count:
                    self.ranges.setdefault(chain[-1], {})[name] = int(count)
                else:
                    self.declared.setdefault(chain[-1], set()).add(name)
            return
        for name in _REG.findall(guard + " " + stmt) if "%" in stmt or guard else ():
            if name not in self.site:
                self.uses.append((pos, name, chain))

    def _visible(self, name: str, chain: tuple[int, ...]) -> bool:
        for b in chain:
            if name in self.declared.get(b, ()):
                return True
            for prefix, count in self.ranges.get(b, {}).items():
                tail = name[len(prefix):]
                if name.startswith(prefix) and tail.isdigit() and int(tail) < count and \
                        (tail == "0" or not tail.startswith("0")):
                    return True
        return False

    def foreign(self):
        """(position, name) of each use of a register that is not the stub's."""
        specials = _special_registers()
        for pos, name, chain in self.uses:
            if name not in specials and not self._visible(name, chain):
                yield pos, name


#: the largest N of a parameterized register declaration ``.reg .b32 %r<N>;``
MAX_REGISTER_RANGE = 1 << 16
_RANGE = re.compile(r"<\s*(\d+)\s*>")
_DECL = re.compile(r"%([A-Za-z_$][\w$]*)(?:\s*<\s*(\d+)\s*>)?")
#: PTX's special registers (the instruction table may add more: read at check time)
_SPECIALS = frozenset(
    "tid ntid laneid warpid nwarpid ctaid nctaid smid nsmid gridid lanemask_eq lanemask_le "
    "lanemask_lt lanemask_ge lanemask_gt clock clock_hi clock64 globaltimer globaltimer_lo "
    "globaltimer_hi total_smem_size aggr_smem_size dynamic_smem_size is_explicit_cluster "
    "clusterid nclusterid cluster_ctaid cluster_nctaid cluster_ctarank cluster_nctarank "
    "current_graph_exec reserved_smem_offset_begin reserved_smem_offset_end "
    "reserved_smem_offset_cap reserved_smem_offset_0 reserved_smem_offset_1".split()
    + [f"envreg{i}" for i in range(32)] + [f"pm{i}" for i in range(8)]
    + [f"pm{i}_64" for i in range(8)])


_SPECIAL_CACHE: dict[int, frozenset[str]] = {}


def _special_registers() -> frozenset[str]:
    from ...instructions import TABLE
    got = _SPECIAL_CACHE.get(TABLE.version)
    if got is None:
        got = _SPECIALS | {n[1:].split(".", 1)[0] for n in TABLE.names if n.startswith("%")}
        _SPECIAL_CACHE.clear()
        _SPECIAL_CACHE[TABLE.version] = got
    return got


def check_reserved(text: str, site: str) -> None:
    """Refuse ``text`` holding what numptx reserves (``site_layout.RESERVED``, comments
    included). A few substring searches: packs run it on every candidate, compiled or not."""
    for word in RESERVED:
        at = text.find(word)
        if at >= 0:
            _refuse(site, text, at, f"{word!r} is reserved by numptx (its own registers, labels "
                    f"and marks; comments included): rename it or remove the comment", "reserved")


def check_stub_rules(text: str, site: str, *, packed: bool = False,
                     registers: frozenset[str] | None = None) -> None:
    r"""Refuse (:class:`StubRuleError`, naming ``site`` and the stub line) raw stub ``text``
    that breaks the stub contract: text numptx reserves (``site_layout.RESERVED``, comments
    included), a directive other than ``.reg`` (module-scope and state-space declarations:
    ``.global``, ``.extern``, ``.entry``, ``.pragma``, ``.branchtargets`` ...), an indirect
    branch (``brx.idx``), a branch to a label the stub does not define (or defines only in a
    ``{ }`` block the branch is not inside), a ``/*`` comment left open; with ``packed`` (a
    candidate of a pack, or of ``nx.fitness``) also ``ret``, ``exit``, ``trap`` and ``brkpt``.
    With ``registers`` (the site's registers, ``v_x`` ...), also a ``%`` register that is
    neither the site's, nor a special register, nor one the stub declares where it is used: the
    kernel's own registers (``%r1``, ``%rd2`` ...) are not the stub's to read or write.

    >>> check_stub_rules("@%p bra L;\nadd.f32 %v_z, %v_x, %v_x;\nL:", "f")      # passes
    >>> check_stub_rules("bra.uni $L__BB0_2;", "f")      # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    StubRuleError: invalid stub for site 'f': stub line 1 'bra.uni $L__BB0_2;': ...
    """
    check_reserved(text, site)
    code, opened = blank_comments(text)
    if opened >= 0:                   # it runs on past the stub, over the code after it
        _refuse(site, text, opened, "a '/*' comment the stub does not close: it would run on "
                "over the code after the stub (the kernel's, another site's or candidate's) "
                "up to the next '*/'; close it with '*/' in the stub", "comment")
    defined: dict[int, set[str]] = {}           # block id -> the labels defined in it
    branches: list[tuple[int, str, tuple[int, ...]]] = []
    regs = _Registers(registers)
    for pos, labels, stmt, guard, chain in _statements(code):
        if labels:
            defined.setdefault(chain[-1], set()).update(labels)
        if not stmt:
            continue
        op = stmt.split(None, 1)[0]
        base = op.split(".", 1)[0]
        regs.see(pos, op, stmt if base != "bra" else "", guard, chain)
        if op == ".reg" and "<" in stmt and any(int(n) > MAX_REGISTER_RANGE
                                                for n in _RANGE.findall(stmt)):
            _refuse(site, text, pos, f"a register range over {MAX_REGISTER_RANGE} (%r<N>): "
                    f"nvJitLink spends time and memory on each (10**7 took half a minute "
                    f"and 1.4 GB); declare the registers the stub uses", "register")
        if op.startswith("."):
            if op not in STUB_DIRECTIVES:
                _refuse(site, text, pos, f"a stub may not hold the directive {op!r} (a stub "
                        f"holds instructions, .reg declarations and labels of its own; module "
                        f"scope and memory belong to the template)", "directive")
        elif base == "brx":
            _refuse(site, text, pos, "a stub may not branch indirectly (brx.idx): branch to "
                    "labels it defines with bra", "branch")
        elif base == "bra":
            parts = stmt.split(None, 1)
            target = _TARGET.match(parts[1].strip()) if len(parts) > 1 else None
            branches.append((pos, target.group() if target else "", chain))
        elif packed and base in PACK_REFUSED:
            _refuse(site, text, pos, f"a candidate of a pack may not hold {base!r}: it must "
                    f"run to its end, where the pack's code goes on (threads that leave early "
                    f"break the pack's dispatch and nx.fitness's warp reduction)", "control")
    for pos, target, chain in branches:
        # PTX labels are scoped by { } blocks: a branch sees the labels of its own block and of
        # the blocks around it; one defined only in an inner or sibling block is not seen, and
        # ptxas would resolve the name outside the stub (the kernel's own labels)
        if any(target in defined.get(b, ()) for b in chain):
            continue
        inner = any(target in names for names in defined.values())
        _refuse(site, text, pos, f"a stub may branch only to labels it defines; "
                f"{target or 'the target'!r} is not defined in the stub" + (
                    " where the branch can see it (it is defined in a { } block the branch is "
                    "not inside, and PTX would resolve the name outside the stub: define it in "
                    "the branch's block or one around it)" if inner else ""), "branch")
    for pos, name in regs.foreign():
        hint = (f": write %{REG_PREFIX}{name} for the site variable {name!r}"
                if REG_PREFIX + name in registers else "")
        _refuse(site, text, pos, f"%{name} is not a register of the stub: a stub uses the site's "
                f"registers (%v_<name>), special registers and registers it declares (.reg) "
                f"in its own {{ }} block or one around the use; the kernel's own registers are "
                f"not the stub's to read or write{hint}", "register")
