"""What one candidate's code says, read without building it: the float type it writes the
prediction in, and the inputs it reads that the site lacks (:class:`Facts`). The exact paths of
:mod:`numptx.jit.populations.fitness_checks`, which :func:`numptx.fitness` runs on each population::

    from numptx.jit.populations.fitness_facts import program_facts, scan_text, text_facts
    import numptx.stack_ptx as sp
    prog = [sp.input("x0"), sp.const(2.0, "f32"), sp.instr("mul.rn.f32")]
    program_facts(prog, ("cand", "x0")).dtype                          # 'f32'
    variables = frozenset({"cand", "p", "x0"})
    scan_text("mov.f64 %v_p, %v_x0;", variables).dtype                # 'f64' (tentative)
    text_facts("mov.f32 %v_p, %v_y;", variables).missing              # ("'y'",)

A Stack PTX program is read op by op (:func:`program_facts`: the reference that the word scan
over a whole population, :func:`numptx.jit.populations.fitness_checks.inspect`, agrees with); one of f32
and f64 instructions is compiled both ways. A PTX text is scanned, not parsed
(:func:`scan_text`: the statements that name a ``%v_`` register); the scan agrees with the
emulator's parser on every text the parser takes, and where it decides the text is parsed to
confirm (:func:`text_facts`). Texts' facts are cached by text (:func:`bounded_cache`).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ... import site_layout
from ... import stack_ptx as sp
from ..._program import Op, decode, input_tag
from ..._text import split_top
from ...dsl.ptx_parse import parse
from ...errors import NumptxError
from ...instructions import NP_DTYPE, TABLE, TYPES, UnknownInstructionError, parse_type_spec
from ...opkinds import CONST, CONST64, INPUT, INSTR
from ...valuetypes import BY_NAME

__all__ = ["Float", "FLOATS", "Facts", "NO_FACTS", "float_of", "row_floats", "program_facts",
           "scan_text", "text_facts", "bounded_cache", "clear_text_cache"]

Float = Literal["f32", "f64"]
FLOATS: tuple[Float, ...] = ("f32", "f64")
_P = site_layout.reg_name("p")            # the prediction's register
_PREFIX = site_layout.reg_name("")        # every site variable's register starts so
_BITS = {"b32": "f32", "b64": "f64"}      # the float register a bit-size write fits


@dataclass(frozen=True)
class Facts:
    """A candidate's float type (None: either fits), what says so (``why``; "" where it is
    worked out only for a message, :func:`decide`'s ``why``), the inputs it reads that the
    data lack, and the inputs a program reads by position (``sp.input(i)``). ``tentative``:
    from the scan of a PTX text, true only if the emulator's parser takes the text
    (:func:`text_facts` confirms)."""
    dtype: Float | None = None
    why: str = ""
    missing: tuple[str, ...] = ()
    positional: tuple[int, ...] = ()
    tentative: bool = False


#: the facts of a candidate that decides nothing (no float type, reads nothing missing)
NO_FACTS = Facts()


# ---- float types of types, rows and words ----------------------------------------------------
@functools.lru_cache(maxsize=None)
def float_of(t: str) -> Float | None:
    """``t``'s float type (a user stack type's base) when it is f32 or f64, else None."""
    vt = BY_NAME.get(t)
    base = (vt.base if vt is not None and vt.base else t)
    return base if base in FLOATS else None      # type: ignore[return-value]


def row_floats(index: int) -> tuple[Float, ...]:
    """The float types instruction row ``index`` reads or gives."""
    if index >= len(TABLE):
        return ()
    row = TABLE[index]
    return tuple(dict.fromkeys(f for t in (*row.operands, *row.results) if (f := float_of(t))))


# ---- caches: one context at a time --------------------------------------------------------------
_CACHE_SIZE = 1 << 14              # entries (programs of ~50 words: ~8 MB; texts ~1 KB: ~16 MB)
_text_cache: dict[tuple, dict] = {}         # (table, site variables) -> text -> Facts


def bounded_cache(caches: dict[tuple, dict], context: tuple) -> dict:
    """The cache of one context (a table version, a site) in ``caches``, emptied when it grows
    past ``_CACHE_SIZE`` entries; one context at a time."""
    cache = caches.get(context)
    if cache is None or len(cache) >= _CACHE_SIZE:
        caches.clear()
        cache = caches[context] = {}
    return cache


def clear_text_cache() -> None:
    """Forget the facts of every text scanned (a benchmark's cold start)."""
    _text_cache.clear()


# ---- Stack PTX programs: the exact path, op by op --------------------------------------------
def _one_type(seen: dict[str, str], missing: list[str]) -> Facts:
    """``seen``: float type -> the first thing written in it."""
    if len(seen) == 1:
        (t, why), = seen.items()
        return Facts(t, why, tuple(missing))      # type: ignore[arg-type]
    return Facts(None, "", tuple(missing))   # no float type, or both (converts): either


def program_facts(prog: Any, inputs: tuple[str, ...]) -> Facts:
    """A Stack PTX program, op by op: the float types of its instructions and constants, the
    inputs it reads that ``inputs`` (the site's) lack (what :func:`inspect` decides for the
    whole population at once, with its reasons)."""
    try:
        if isinstance(prog, np.ndarray):     # names from the encoding, else the site's by tag
            ops = decode(prog, getattr(prog, "inputs", None) or inputs)
        else:
            ops = prog
    except NumptxError:
        return NO_FACTS                         # it does not compile: it scores +inf
    seen: dict[str, str] = {}
    missing: list[str] = []
    positional: list[int] = []
    tags = {input_tag(n) for n in inputs}
    for op in ops:
        if op.__class__ is not Op:
            continue
        word = op.word
        kind = word & 0xFF
        if kind == INSTR:
            for f in row_floats(word >> 16 & 0xFFFF):
                seen.setdefault(f, repr(op))
        elif kind == INPUT:
            if op.name is not None:
                if op.name not in inputs:
                    missing.append(repr(op.name))
            elif word >> 32:
                if word >> 32 not in tags:
                    missing.append(f"an input with name tag 0x{word >> 32:08x}")
            else:             # by position: the kernel's input 0 is cand, not x0
                positional.append(word >> 16 & 0xFFFF)
        elif kind == CONST or kind == CONST64:
            f = float_of(TYPES[word >> 8 & 0xFF]) if word >> 8 & 0xFF < len(TYPES) else None
            if f:
                seen.setdefault(f, repr(op))
    if positional:
        return Facts(positional=tuple(dict.fromkeys(positional)))
    if len(seen) == 2 and not missing:
        return _converting(prog, inputs, seen)
    return _one_type(seen, missing)


def _converting(prog: Any, inputs: tuple[str, ...], seen: dict[str, str]) -> Facts:
    """A program of f32 and f64 instructions (it converts): the kernel type in which its
    value reaches ``%v_p`` with the fewest instructions left without operands, by the
    compiler, both ways; either where both (or neither) fit alike."""
    fit = {}
    for t in FLOATS:
        try:
            stub = sp.compile(prog, {n: "u32" if n == "cand" else t for n in inputs}, {"p": t})
        except NumptxError:
            return NO_FACTS                     # it does not compile: it scores +inf
        fit[t] = (not stub.unsatisfied, -stub.stats["noops"])
    if fit["f32"] == fit["f64"]:
        return NO_FACTS
    t = max(FLOATS, key=fit.__getitem__)
    return Facts(t, f"it converts ({seen['f32']}, {seen['f64']}); its value reaches %v_p "
                    f"in {t}")


# ---- PTX text ----------------------------------------------------------------------------------
# what the emulator's parser (numptx.dsl.ptx_parse) reads, for the statements the scan looks at
_PTX_TYPE = {t: t for t in TYPES}
_PTX_TYPE.update({"u16": "b16", "s16": "b16"})
_DECL = re.compile(r"^(%[A-Za-z_$][\w$]*)(?:<(\d+)>)?$")
_GUARD = re.compile(r"^@(!?)(%[A-Za-z_$][\w$.]*)\s+(.*)$", re.S)
_VEC_MOV = re.compile(r"mov\.v(2|4)\.(\w+)")
_VREG = "%" + _PREFIX
_VTOK = re.compile(re.escape(_VREG) + r"([\w$.]*)")               # a site register's name
_VDECL = re.compile(r"\.reg[^;\n]*" + re.escape(_VREG))          # a .reg that may declare one
# a statement (the parser splits lines at ';') that names %v_p
_P_STATEMENT = re.compile(r"(?:^|(?<=;))[^;\n]*" + re.escape(_VREG) + r"p(?![\w$.])[^;\n]*", re.M)


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.split("\n"))


def _slot(tok: str) -> list[str] | None:
    tok = tok.strip()
    if tok.startswith("{"):
        return [p.strip() for p in tok[1:-1].split(",")] if tok.endswith("}") else None
    return [tok]


@functools.lru_cache(maxsize=4096)
def _opcode(opcode: str, uid: int, version: int) -> tuple[int, int, tuple[str, ...]] | None:
    """(operand slots, result slots, result types) of a table opcode; None: not in the table."""
    try:
        ins = TABLE.by_opcode(opcode)
    except UnknownInstructionError:
        return None
    return ins.n_slots, len(ins.results), tuple(parse_type_spec(s)[0] for s in ins.results)


_FAIL = object()        # the parser refuses the text


def _statement(s: str) -> Any:
    """(dest slots as (registers, type), source tokens) of a statement, or _FAIL."""
    g = _GUARD.match(s)
    if g:
        s = g.group(3).strip()
    parts = s.split(None, 1)
    opcode, rest = parts[0], (parts[1] if len(parts) > 1 else "")
    toks = ([] if not rest.strip() else split_top(rest, "{", "}") if "{" in rest or "}" in rest
            else [t.strip() for t in rest.split(",")])
    if opcode.startswith("mov.v"):
        m = _VEC_MOV.fullmatch(opcode)
        t = _PTX_TYPE.get(m.group(2)) if m else None
        dest = _slot(toks[0]) if t and len(toks) == 2 else None
        return _FAIL if dest is None else ([(dest, t)], [])
    if opcode.startswith("mov."):
        t = _PTX_TYPE.get(opcode[4:])
        if t is None or len(toks) != 2:
            return _FAIL
        d, s_ = _slot(toks[0]), _slot(toks[1])
        if d is None or s_ is None:
            return _FAIL
        k = max(len(d), len(s_))
        if k > 1:
            width = NP_DTYPE[t].itemsize * 8 if t != "pred" else 0
            comp = {16: "b16", 32: "b32"}.get(width // k) if width % k == 0 else None
            if comp is None:
                return _FAIL
        return [(d, comp if len(d) > 1 else t)], s_
    info = _opcode(opcode, TABLE.uid, TABLE.version)
    if info is None or len(toks) != info[0]:
        return _FAIL
    slots = [_slot(tok) for tok in toks]
    if None in slots:
        return _FAIL
    nres, types = info[1], info[2]
    return list(zip(slots[:nres], types)), [r for sl in slots[nres:] for r in sl]


def scan_text(text: str, variables: frozenset[str]) -> Facts:
    """PTX text, scanned: the float type it writes ``%v_p`` with, the ``%v_*`` registers it
    reads that are no site variable and that it does not declare; ``tentative`` (what the
    parser would say if it takes the text), or the empty facts of a text it refuses."""
    cache = bounded_cache(_text_cache, (TABLE.uid, TABLE.version, variables))
    hit = cache.get(text)
    if hit is None:
        hit = cache[text] = _scan(text, variables)
    return hit


def _scan(text: str, variables: frozenset[str]) -> Facts:
    body = _strip_comments(text) if "/" in text else text
    # all of its %v_ registers site variables, none declared: only what writes %v_p matters
    fast = set(_VTOK.findall(body)) <= variables and not _VDECL.search(body)
    statements = (m.group(0) for m in _P_STATEMENT.finditer(body)) if fast else \
        (s for line in body.split("\n") for s in line.split(";"))
    blocks: list[set[str]] = []               # registers declared in each open block
    declared: set[str] = set()
    seen: dict[str, bool] = {}
    reads: list[str] = []
    for s in statements:
        s = s.strip()
        while s[:1] in ("{", "}"):
            if fast:
                pass
            elif s[0] == "{":
                blocks.append(set())
            elif not blocks:
                return NO_FACTS                   # '}' closes no block
            else:
                blocks.pop()
            s = s[1:].strip()
        if not s or _VREG not in s:
            continue
        if s[0] == "." and not fast:
            if not _declare(s, blocks[-1] if blocks else declared):
                return NO_FACTS
            continue
        got = _statement(s)
        if got is _FAIL:
            return NO_FACTS
        for regs, t in got[0]:
            if _VREG + "p" in regs and not any(_P in b for b in blocks):
                f = float_of(t) or _BITS.get(t)     # mov.b32 %v_p fits an f32 register
                if f:
                    seen.setdefault(f, True)
        reads += [r[1:] for r in got[1] if r.startswith(_VREG) and not fast and
                  not (r in TABLE and TABLE[r].is_special) and not any(r[1:] in b for b in blocks)]
    if blocks:
        return NO_FACTS                           # '{' never closed
    n = len(_PREFIX)
    missing = tuple(dict.fromkeys(repr(r[n:]) for r in reads
                                  if r not in declared and r[n:] not in variables))
    return Facts(next(iter(seen)) if len(seen) == 1 else None, "", missing,  # type: ignore[arg-type]
                 tentative=True)


def _declare(s: str, into: set[str]) -> bool:
    """A ``.reg`` statement's registers into ``into``; False: the parser refuses it."""
    parts = s.split(None, 2)
    if parts[0] != ".reg" or len(parts) < 3 or not parts[1].startswith("."):
        return False
    for name in split_top(parts[2], "{", "}"):
        m = _DECL.match(name)
        if not m:
            return False
        into.update([f"{m.group(1)[1:]}{k}" for k in range(int(m.group(2)))] if m.group(2)
                    else [m.group(1)[1:]])
    return True


def text_facts(text: str, variables: frozenset[str]) -> Facts:
    """PTX text, parsed by the emulator's parser (what :func:`scan_text` 's tentative facts
    stand for, with the line that writes ``%v_p`` as ``why``): the empty facts of a text it
    refuses."""
    reg = site_layout.reg_name
    try:
        prog = parse(text, TABLE.uid, TABLE.version)
    except NumptxError:
        return NO_FACTS                         # the emulator and ptxas say what is wrong: +inf
    seen: dict[str, str] = {}
    missing: list[str] = []
    for step in prog.steps:
        for names, t in zip(step.dests, step.dest_types):
            f = float_of(t) or _BITS.get(t)      # mov.b32 %v_p fits an f32 register only
            if f and reg("p") in names:
                seen.setdefault(f, step.text.strip())
        for slot in step.srcs:
            for o in slot:
                name = getattr(o, "name", None)
                if (isinstance(name, str) and not getattr(o, "special", False)
                        and name.startswith(_PREFIX) and "#" not in name
                        and name not in prog.declared and name[len(_PREFIX):] not in variables
                        and repr(name[len(_PREFIX):]) not in missing):
                    missing.append(repr(name[len(_PREFIX):]))
    return _one_type(seen, missing)
