"""What :func:`numptx.fitness` checks of each candidate before it scores a population: the
float type it is written in, the inputs it reads that the data lack, and whether the
"population" is one program. :func:`numptx.jit.populations.fitness.prepare` runs it::

    from numptx.jit.populations.fitness_checks import inspect, population
    cands = population([prog_a, prog_b, "mov.f32 %v_p, %v_x0;"])
    checked = inspect(cands, ("x0", "x1"))      # FitnessError at the first refused candidate
    checked.facts[2].dtype                       # 'f32': the type %v_p is written in

(``prepare`` decides the kernel's float type from these facts.)

Cheap enough for every generation of a search (thousands of candidates): Stack PTX programs
(op lists, ``sp.encode`` arrays) are read word by word with NumPy over the whole population
(docs/design/programs.md, section 3), op by op only where a candidate is refused, converts
(compiled both ways) or is no numptx encoding (:func:`numptx.jit.populations.fitness_facts.program_facts`);
PTX text is scanned, not parsed (:mod:`numptx.jit.populations.fitness_facts`: the statements that name a
``%v_`` register), and parsed to confirm where the scan decides (``Facts.tentative``). Both
are cached, by the program's words and by text.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import site_layout
from ..._program import Op, Stub, input_tag
from ..._program.ops import DIALECTS, MARKER_MAGIC, MARKER_MASK
from ...dsl.expr import PtxExpr
from ...errors import NumptxError
from ...instructions import TABLE, TYPES
from ...opkinds import (CONST, CONST64, INPUT, INSTR, KIND_NAMES, LOAD, META, META_CONST, META_OPS,
                       NOP, RETURN, ROUTINE, STORE)
from ...valuetypes import WIDE
from .fitness_facts import (FLOATS, NO_FACTS, Facts, Float, bounded_cache, clear_text_cache,
                            float_of, program_facts, row_floats, scan_text, text_facts)

__all__ = ["FitnessError", "Float", "FLOATS", "Facts", "Checked", "population", "inspect",
           "clear_caches", "program_facts", "text_facts", "scan_text"]

log = logging.getLogger("numptx.jit.populations.fitness")

_P = site_layout.reg_name("p")            # the prediction's register
_CAND = site_layout.reg_name("cand")      # the candidate's index (u32)


class FitnessError(NumptxError):
    """Bad arguments to :func:`fitness` (shapes, loss, names, dtype, data), or a candidate that
    does not fit the data (its type, an input the data lack): ``candidate`` is its index in
    the population, None for the arguments."""

    def __init__(self, message: str, *, candidate: int | None = None):
        self.candidate = candidate
        super().__init__(message)


@dataclass(frozen=True)
class Checked:
    """:func:`inspect`'s result: the candidates (formulas with the defaults of parameters the
    columns lack baked in) and the facts of each, in order."""
    candidates: list
    facts: list[Facts]


# ---- one program where a population is expected ----------------------------------------------
def _one_candidate(given: Any) -> str | None:
    """What ``given`` is when it is one candidate where a population is expected, else None."""
    if isinstance(given, (str, bytes)):
        return "one PTX text (a str)" if isinstance(given, str) else "bytes"
    if isinstance(given, Op):
        return "one Stack PTX op"
    if isinstance(given, np.ndarray) and given.ndim == 1 and given.dtype.kind in "ui":
        return f"one encoded Stack PTX program ({given.size} uint64 words)"
    if isinstance(given, (list, tuple)) and given and all(isinstance(c, Op) for c in given):
        return f"one Stack PTX program (a list of {len(given)} ops)"
    if isinstance(given, PtxExpr) or callable(getattr(given, "stub", None)):
        return f"one formula ({type(given).__name__})"
    return None


def population(candidates: Any) -> list:
    """The candidates as a list; one candidate (a program, a text, a formula) where a
    population is expected, an empty one, or an op as a candidate is a :class:`FitnessError`
    naming the fix (``[prog]``)."""
    one = _one_candidate(candidates)
    if one:
        raise FitnessError(f"fitness: the candidates are {one}, not a population (a list of "
                           f"candidates): pass [prog] to score one, nx.fitness([prog], X, y) "
                           f"(else each {'character' if isinstance(candidates, str) else 'item'} "
                           f"would be taken as a candidate)")
    try:
        cands = list(candidates)
    except TypeError:
        raise FitnessError(f"fitness: the candidates are a {type(candidates).__name__}, not a "
                           f"population (a list of formulas, Stack PTX programs or PTX "
                           f"texts)") from None
    if not cands:
        raise FitnessError("fitness: an empty population")
    for k, c in enumerate(cands):
        if isinstance(c, Op):
            raise FitnessError(f"fitness: candidate {k} is one op ({c!r}), not a program: a "
                               f"Stack PTX program is a list of ops (pass [prog] to score one "
                               f"program)", candidate=k)
    return cands


# ---- float bits of rows and words, for the word scan ----------------------------------------
_lookup_cache: dict[tuple, tuple[np.ndarray, ...]] = {}


def _lookup() -> tuple[np.ndarray, ...]:
    """For the word scan, per table version and type count: the float bits (1 f32, 2 f64) of
    each table row; indexed by a word's kind and type fields (16 bits), the float bits of a
    constant and whether :func:`decode` refuses the word for them; per kind, the bound of
    its ``a`` field."""
    key = (TABLE.uid, TABLE.version, len(TABLE), len(TYPES), len(WIDE))
    if key not in _lookup_cache:
        bit = {"f32": 1, "f64": 2}
        rows = np.zeros(1 << 16, np.uint8)
        for i in range(min(len(TABLE), 1 << 16)):
            rows[i] = sum(bit[f] for f in row_floats(i))
        kind, t = np.arange(1 << 16) & 0xFF, np.arange(1 << 16) >> 8
        types = np.array([bit.get(float_of(x) or "", 0) for x in TYPES[:256]] +
                         [0] * (256 - min(len(TYPES), 256)), np.uint8)
        wide = np.array([x in WIDE for x in TYPES[:256]] + [False] * (256 - min(len(TYPES), 256)))
        const = (kind == CONST) | (kind == CONST64)
        bad = (kind >= len(KIND_NAMES)) | (_TYPED_KIND[kind] & (t >= len(TYPES))) | \
            ((kind == CONST) & wide[t]) | (_T_UNUSED[kind] & (t != 0))
        bound = np.full(256, 1 << 16, np.uint32)
        bound[INSTR], bound[META] = len(TABLE), len(META_OPS)
        _lookup_cache.clear()
        _lookup_cache[key] = (rows, np.where(const, types[t], 0).astype(np.uint8), bad, bound)
    return _lookup_cache[key]


# ---- Stack PTX programs: the whole population at once ----------------------------------------
_program_cache: dict[tuple, dict] = {}      # (table, types, site inputs) -> words -> Facts


def clear_caches() -> None:
    """Forget every cached result (a benchmark's cold start)."""
    _program_cache.clear()
    clear_text_cache()


def _op_bytes(prog: Sequence, name_raw: dict[str, bytes]) -> bytes | None:
    """An op list as its words' bytes (``Op.raw``: a 64-bit constant's data word included),
    named inputs numbered and tagged as the site's (None: an item that is no op, or a name
    the site lacks: the op-by-op path says what)."""
    try:
        return b"".join([o.raw or name_raw[o.name] for o in prog])
    except (AttributeError, KeyError, TypeError):
        return None


_U64 = np.dtype(np.uint64).str
_names_ok: dict[tuple, bool] = {}


def _encoded_ok(prog: np.ndarray) -> bool:
    """Whether the word scan reads ``prog`` as :func:`decode` does (uint64 words, 1-D, input
    names that are a tuple of str or none)."""
    names = getattr(prog, "inputs", None)
    if prog.dtype.str != _U64 or prog.ndim != 1:
        return False
    if not names:
        return True
    ok = _names_ok.get(names) if isinstance(names, tuple) else False
    if ok is None:
        ok = _names_ok[names] = all(isinstance(n, str) for n in names)
        if len(_names_ok) > 4096:
            _names_ok.clear()
    return ok


def _payload(kind: np.ndarray, first: np.ndarray) -> np.ndarray:
    """The data words of CONST64 words (each CONST64 word is followed by one), ``first``:
    each program's first word. In a run of words of kind CONST64, every other is data."""
    n = kind.size
    k64 = kind == CONST64
    prev = np.zeros(n, bool)
    prev[1:] = k64[:-1]
    prev[first] = False
    start = k64 & ~prev
    idx = np.arange(n)
    run_at = np.maximum.accumulate(np.where(start, idx, 0))
    header = k64 & ((idx - run_at) & 1 == 0)
    after = np.zeros(n, bool)
    after[1:] = header[:-1]
    after[first] = False
    return (k64 & ~header) | (after & ~k64)


def _scan_words(words: np.ndarray, lengths: np.ndarray, encoded: bool,
                bad_input: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, ...]:
    """Per program (``lengths`` words each, concatenated in ``words``): whether it has f32
    and f64 instructions or constants, whether an INPUT word needs the op-by-op path
    (``bad_input`` of the INPUT words), and (``encoded`` words) whether decode refuses it."""
    row_bits, const_bits, kt_bad, a_bound = _lookup()
    le = np.ascontiguousarray(words, "<u8")           # the fields as views, no copies
    kind, kt = le.view(np.uint8)[0::8], le.view("<u2")[0::4]
    a, b = le.view("<u2")[1::4], le.view("<u4")[1::2]
    starts = (np.cumsum(lengths) - lengths)[lengths > 0]

    def any_of(mask: np.ndarray) -> np.ndarray:       # per program: any word of mask
        out = np.zeros(lengths.size, bool)
        if starts.size:
            out[lengths > 0] = np.logical_or.reduceat(mask, starts)
        return out
    real = ~_payload(kind, starts) if (kind == CONST64).any() else None
    invalid = np.zeros(lengths.size, bool)
    if encoded:
        marker = ((le & MARKER_MASK) == MARKER_MAGIC) & ((b & 0xFF) < len(DIALECTS))
        real = ~marker if real is None else real & ~marker
        wrong = (kt_bad[kt] | (a >= a_bound[kind]) | (_B_UNUSED[kind] & (b != 0))) & real
        last = starts + lengths[lengths > 0] - 1
        wrong[last] |= real[last] & (kind[last] == CONST64)     # a CONST64 without its data
        invalid = any_of(wrong)
    three = np.uint8(3)                               # both float bits
    bits = const_bits[kt] | row_bits[a] & (kind == INSTR).view(np.uint8) * three
    inputs = kind == INPUT
    if real is not None:
        bits &= real.view(np.uint8) * three
        inputs &= real
    odd = np.zeros(words.size, bool)
    odd[inputs] = bad_input(le[inputs])
    return any_of(bits & 1 > 0), any_of(bits & 2 > 0), any_of(odd), invalid


def _kinds(*kinds: int) -> np.ndarray:
    out = np.zeros(256, bool)
    out[list(kinds)] = True
    return out


# per kind, as decode checks words: its type field names a stack type; b, t unused
_TYPED_KIND = _kinds(CONST, CONST64, META, STORE, LOAD)
_B_UNUSED = ~_kinds(CONST, INPUT)
_T_UNUSED = _kinds(NOP, RETURN, INPUT, INSTR, ROUTINE, META_CONST)


def _resolver(names: tuple[str, ...], inputs: tuple[str, ...]) -> Callable[[np.ndarray], np.ndarray]:
    """Which INPUT words of an encoding with input ``names`` read what ``inputs`` lack (or by
    position): as :func:`decode` names them."""
    tags = {input_tag(n) for n in inputs}
    index = {}
    for i, n in enumerate(names):
        index.setdefault(input_tag(n), n)

    def bad(word: int) -> bool:
        a, tag = word >> 16 & 0xFFFF, word >> 32
        if not tag:
            return a >= len(names) or names[a] not in inputs
        name = names[a] if a < len(names) and input_tag(names[a]) == tag else index.get(tag)
        return name not in inputs if name is not None else tag not in tags

    def check(words: np.ndarray) -> np.ndarray:
        uniq, inv = np.unique(words, return_inverse=True)
        return np.array([bad(int(w)) for w in uniq], bool)[inv.ravel()]
    return check


def _program_batch(items: list[tuple[int, Any]], inputs: tuple[str, ...]) -> dict[int, Facts]:
    """Facts of the programs ``(index, program)``: the word scan for all, the op-by-op path
    for the few that need it (see the module documentation)."""
    out: dict[int, Facts] = {}
    progs = dict(items)
    cache = bounded_cache(_program_cache, (TABLE.uid, TABLE.version, len(TYPES), inputs))
    tags = np.array(sorted({input_tag(n) for n in inputs}), np.uint64)
    name_raw = {n: (INPUT | i << 16 | input_tag(n) << 32).to_bytes(8, "little")
                for i, n in enumerate(inputs)}
    groups: dict[Any, list] = {}              # names (None: op lists) -> [(index, key, words)]
    for k, prog in items:
        if isinstance(prog, np.ndarray):
            if not _encoded_ok(prog):
                out[k] = program_facts(prog, inputs)
                continue
            names = getattr(prog, "inputs", None) or inputs
            item = (k, (prog.tobytes(), names), prog)
            group: Any = names
        else:
            raw = _op_bytes(prog, name_raw)
            if raw is None:
                out[k] = program_facts(prog, inputs)
                continue
            item, group = (k, raw, raw), None
        hit = cache.get(item[1])
        if hit is not None:
            out[k] = hit
        else:
            groups.setdefault(group, []).append(item)
    for names, todo in groups.items():
        if names is not None:
            lengths = np.array([it[2].size for it in todo], np.intp)
            flat = np.concatenate([it[2] for it in todo])
            bad = _resolver(names, inputs)
        else:
            lengths = np.array([len(it[2]) >> 3 for it in todo], np.intp)
            flat = np.frombuffer(b"".join([it[2] for it in todo]), "<u8").astype(np.uint64)
            bad = (lambda w: ((w >> 32) == 0) | ~np.isin(w >> 32, tags))
        f32, f64, odd, invalid = _scan_words(flat, lengths, names is not None, bad)
        code = (f32 * 1 + f64 * 2 + odd * 4 + invalid * 8).tolist()
        for c, (k, key, _) in zip(code, todo):
            if c & 8:
                facts = NO_FACTS                 # decode refuses it: it scores +inf
            elif c & 4 or c == 3:
                facts = program_facts(progs[k], inputs)
            else:
                facts = _BY_CODE[c]
            out[k] = cache[key] = facts
    return out


_BY_CODE = (NO_FACTS, Facts("f32"), Facts("f64"))


# ---- compiled stubs and formulas ---------------------------------------------------------------
def _reads(text: str, reg: str) -> bool:
    """Whether ``text`` names register ``%reg``."""
    return re.search("%" + re.escape(reg) + r"(?![\w$])", text) is not None


def _stub_facts(k: int, stub: Stub, regs: frozenset[str]) -> Facts:
    """A compiled stub: the type it was compiled to give ``%v_p`` in. One compiled for other
    registers than the kernel's (``regs``) that it reads, or that does not give ``%v_p``,
    raises: the kernel would read ``p`` unwritten."""
    t = float_of(stub.outputs.get(_P, ""))
    ins = stub.inputs
    # a column register it reads in another type than p's: no kernel has both (ptxas refuses
    # the operands; the emulator would run them)
    other = [f"%{r} ({ty})" for r, ty in ins.items() if r != _CAND and r in regs and
             ty != stub.outputs.get(_P) and _reads(stub, r)]
    if other:
        raise FitnessError(f"fitness: candidate {k} is a stub compiled to read "
                           f"{', '.join(other)} and give %{_P} in "
                           f"{stub.outputs.get(_P)}: the kernel reads the columns and gives p "
                           f"in one float type; pass the program itself, or compile it with "
                           f"site=fitness_template(...).sites['f']", candidate=k)
    if t and ins.keys() <= regs:              # compiled for this site: the common case
        return _STUB[t]
    extra = [r for r in ins if r not in regs and _reads(stub, r)]
    if extra or _P not in stub.outputs:
        used = [f"reads %{r}" for r in extra] + \
            ([] if _P in stub.outputs else [f"writes {', '.join('%' + r for r in stub.outputs)}"
                                             f", not %{_P}"])
        raise FitnessError(f"fitness: candidate {k} is a stub compiled for other registers "
                           f"than the kernel's ({'; '.join(used)}; the kernel's are "
                           f"{', '.join('%' + r for r in sorted(regs))}): pass the program "
                           f"itself, or compile it with site=fitness_template(...).sites['f']",
                           candidate=k)
    return _STUB[t] if t else NO_FACTS


_STUB = {t: Facts(t, "a compiled stub") for t in FLOATS}


def _formula(k: int, c: PtxExpr, names: tuple[str, ...]) -> tuple[PtxExpr, Facts]:
    """A formula with the defaults of parameters the columns lack baked in; its float type.
    Parameters bind as ``stub(site)`` binds them at a site of the columns: all by position
    when none is a column and the counts match, else by name (defaults baked in)."""
    sig = c.signature()
    missing = [p for p in c.params if p not in names]
    by_position = len(missing) == len(c.params) == len(names)
    if missing and not by_position and all(p in c.defaults for p in missing):
        c, missing = c.bind(**{p: c.defaults[p] for p in missing}), []
    if missing and not by_position:
        named = [p for p in c.params if p not in missing]
        missing = [p for p in missing if p not in c.defaults] or missing
        why = (f"{', '.join(map(repr, named))} bind{'s' if len(named) == 1 else ''} by name, so "
               f"none binds by position" if named else
               f"{len(c.params)} parameter(s) for {len(names)} column(s)")
        raise FitnessError(f"fitness: candidate {k}, {sig}: parameter(s) "
                           f"{', '.join(map(repr, missing))} name no column (columns: "
                           f"{', '.join(names)}) and {why}; rename the parameters after the "
                           f"columns, or the columns with names=", candidate=k)
    types = {p: t.name for p, t in c.params.items()}
    types.update({f"result {o}": n.dtype for o, n in c.graph.outputs})
    kinds = set(types.values())
    if len(kinds) != 1 or not kinds <= set(FLOATS):
        raise FitnessError(f"fitness: candidate {k}, {sig}: the kernel reads the columns and "
                           f"gives the prediction in one float type (f32 or f64); this formula "
                           f"takes or gives {', '.join(sorted(kinds))}", candidate=k)
    return c, Facts(kinds.pop(), sig)


# ---- the population ----------------------------------------------------------------------------
def _refuse(k: int, facts: Facts, names: tuple[str, ...]) -> None:
    """Candidate ``k`` reads by position or reads what the data lack: a FitnessError."""
    if facts.positional:
        i = facts.positional[0]
        what = "cand, the candidate's index" if i == 0 else \
            f"column {names[i - 1]!r}" if i <= len(names) else "no input"
        raise FitnessError(f"fitness: candidate {k} reads input {i} by position "
                           f"(sp.input({i})): the kernel's inputs are cand, "
                           f"{', '.join(names)}, so it reads {what}; name the input it means, "
                           f"sp.input({names[0]!r}) for the first column", candidate=k)
    if facts.missing:
        raise FitnessError(f"fitness: candidate {k} reads {', '.join(facts.missing)}, which "
                           f"the data lack (the columns: {', '.join(names)}; the kernel's "
                           f"input cand is the candidate's index): name the columns with "
                           f"names=, or fix the candidate", candidate=k)


def _variables(names: tuple[str, ...]) -> frozenset[str]:
    return frozenset(("cand", "p") + names)


def inspect(cands: list, names: tuple[str, ...]) -> Checked:
    """Each candidate's :class:`Facts` at a site of the columns ``names``; the first (in
    order) that reads an input the data lack, reads one by position, is a stub for other
    registers or a formula that does not fit is a :class:`FitnessError` naming it."""
    variables = _variables(names)
    regs = frozenset(site_layout.reg_name(v) for v in variables)
    inputs = ("cand",) + names
    progs = _program_batch([(k, c) for k, c in enumerate(cands)
                            if isinstance(c, (list, tuple, np.ndarray))], inputs)
    out, facts = list(cands), []
    for k, c in enumerate(cands):
        f = progs.get(k)
        if f is not None:
            pass
        elif isinstance(c, Stub):             # the search's stubs, thousands a generation
            f = _stub_facts(k, c, regs)
        elif isinstance(c, PtxExpr):
            try:
                out[k], f = _formula(k, c, names)
            except FitnessError:
                raise
            except Exception as e:   # noqa: BLE001 - a formula that does not trace scores
                log.debug("numptx.fitness: candidate %d: %s", k, e)   # +inf, as in a pack
                f = NO_FACTS
        elif isinstance(c, str):
            f = scan_text(c, variables)
            if f.missing:                     # refused only if the parser takes the text
                f = text_facts(c, variables)
        else:
            f = NO_FACTS
        if f.missing or f.positional:
            _refuse(k, f, names)
        facts.append(f)
    return Checked(out, facts)
