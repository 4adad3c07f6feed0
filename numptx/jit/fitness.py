"""Fitness of a population on a data set: one float per candidate formula, lower is better.

::

    import numpy as np, numptx as nx
    X = np.random.rand(10_000, 2).astype(np.float32)          # n samples, d input columns
    y = X[:, 0] * 2 + X[:, 1]
    scores = nx.fitness([f1, f2, prog3, "mov.f32 %v_p, %v_x0;"], X, y, loss="mse")
    nx.fitness([prog], X, y)                  # one program: a population of one (never prog)

Candidates are ``@nx.ptx_expr`` formulas (parameters bind to the columns by name, or by
position when no name matches and the counts match), Stack PTX programs over inputs
``x0 .. x{d-1}`` (the column names, ``names=`` renames them) or PTX text that reads
``%v_x0 ..`` and writes the prediction to ``%v_p`` (which reads 0 until written);
``%v_cand`` is the candidate's index in its module (``k % per_module``), on either device.

**One float type.** The kernel reads the columns and gives the prediction in one type, f32 or
f64: ``dtype=`` when given, else the type the candidates are written in (a formula's parameter
and result types; a program's float instructions and constants, or where it converts
between the two the type in which its value reaches ``%v_p``; the type a PTX text writes
``%v_p`` with; a user loss's types), else the data's (f64 only when ``X`` is float64, as
``search.regress`` decides). ``X`` and ``y`` are converted to it: float64 data (NumPy's
default, Python lists) round to f32 for f32 candidates, and a value past the f32 range, a NaN
or an infinity in the data is a :class:`FitnessError`. A candidate written in the other type
(in an f64 kernel an f32 program's instructions would find no operands and do nothing), a
population that mixes f32 and f64 candidates without ``dtype=``, and a candidate that reads an
input the data lack (a formula parameter, a program's ``sp.input``, a PTX ``%v_`` register that
is no column) or a program input by position (``sp.input(i)``: the kernel's input 0 is
``cand``) raise :class:`FitnessError` naming the candidate (``.candidate``, its index) and
the type or input: a candidate is never scored in a type it was not written for.

Losses: ``"mse"`` (mean squared error), ``"mae"`` (mean absolute error), ``"rmse"``,
``"pearson"`` (``1 - r``, r the Pearson correlation of prediction and target: 0 is a perfect
linear fit; a constant prediction scores +inf), or an ``@nx.ptx_expr`` ``loss(p, t)`` (by name,
else by position) whose mean over the samples is the score. A candidate that gives a NaN or an
infinity on any sample, or that does not build, scores ``+inf`` (the reason is logged at DEBUG
on ``numptx.jit.fitness``; on a GPU, :meth:`Template.pack_many` 's ``errors`` hold it). Raw PTX
that leaves the candidate early (``ret``, ``exit``) does not build: the kernel reduces whole
warps after it.

**On a GPU** the population is packed (:meth:`Template.pack_many`, modules built in parallel)
into a generated kernel: one launch per module scores every candidate, sums reduced per warp
and added in float64 on the GPU. **Without one** (``device="cpu"``, the default when no GPU is
found) each candidate runs on the CPU: formulas through their NumPy reference (what a
``precision="accurate"`` stub computes, bit for bit, for exact operations; a default ``"cuda"``
stub contracts ``a*b + c`` into one fma and uses CUDA's function algorithms, within their
documented error of it), programs and PTX through the stub emulator (:func:`numptx.emulate`) —
correct and the same script, but some thousand times slower: use it for small data sets and
tests. Raw PTX text is also packed there as on a GPU (nvJitLink, no GPU needed): what ptxas
refuses (operand types that do not fit the kernel's registers) scores ``+inf`` on both. ``device="gpu"`` where there is no GPU raises :class:`~numptx.LaunchError`.
"""
from __future__ import annotations

import functools
import logging
import math
import re
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import site_layout
from .. import stack_ptx as sp
from .._program import Op, Stub, decode, input_tag
from ..dsl.emulator import emulate
from ..dsl.expr import PtxExpr, SiteBinding, output_order
from ..dsl.ptx_parse import parse
from ..errors import NumptxError
from ..instructions import TABLE, TYPES
from ..opkinds import CONST, CONST64, INPUT, INSTR
from ..valuetypes import BY_NAME
from .errors import LaunchError
from .pack import (DEFAULT_PER_MODULE, MAX_CANDIDATES, Population,  # noqa: F401
                   check_selector)
from .stubs import resolve_stub
from .numba_site import SIMULATOR
from .template import CudaTemplate

__all__ = ["fitness", "prepare", "Prepared", "FitnessError", "LOSSES", "fitness_template",
           "gpu_available", "device_arch"]

log = logging.getLogger(__name__)

LOSSES = ("mse", "mae", "rmse", "pearson")
FLOATS = ("f32", "f64")
# site variables of the generated kernel and C++ keywords: no column may take these names
_RESERVED = frozenset("""cand p t l alignas alignof and asm auto bool break case catch char
    class const constexpr continue decltype default delete do double else enum explicit export
    extern false float for friend goto if inline int long mutable namespace new noexcept not
    nullptr operator or private protected public register return short signed sizeof static
    struct switch template this throw true try typedef typeid typename union unsigned using
    virtual void volatile while xor size_t""".split())
_NP = {"f32": np.dtype(np.float32), "f64": np.dtype(np.float64)}
_P = site_layout.reg_name("p")            # the prediction's register
_CAND = site_layout.reg_name("cand")      # the candidate's index (u32)
_BITS = {"b32": "f32", "b64": "f64"}      # the float register a bit-size write fits


class FitnessError(NumptxError):
    """Bad arguments to :func:`fitness` (shapes, loss, names, dtype, data), or a candidate that
    does not fit the data (its type, an input the data lack): ``candidate`` is its index in
    the population, None for the arguments."""

    def __init__(self, message: str, *, candidate: int | None = None):
        self.candidate = candidate
        super().__init__(message)


def _loss_code(loss: Any) -> str:
    """The CUDA that turns prediction ``p`` and target ``t`` into the per-sample terms."""
    if loss in ("mse", "rmse"):
        return "double _nx_d = (double)p - (double)t; _nx_s0 = _nx_d * _nx_d;"
    if loss == "mae":
        return "_nx_s0 = fabs((double)p - (double)t);"
    if loss == "pearson":       # moments about the target mean _nx_c: no cancellation near it
        return ("double _nx_q = (double)p - _nx_c; _nx_s0 = _nx_q; _nx_s1 = _nx_q * _nx_q; "
                "_nx_s2 = _nx_q * ((double)t - _nx_c);")
    return ("_nx_T l;\n        PTX_INJECT(\"loss\", PTX_IN({TT}, p), PTX_IN({TT}, t), "
            "PTX_OUT({TT}, l));\n        _nx_s0 = (double)l; if (!isfinite(l)) _nx_bad = 1.0;")


@functools.lru_cache(maxsize=32)
def _source(d: int, names: tuple[str, ...], ctype: str, tt: str, loss_kind: str) -> str:
    loads = " ".join(f"{ctype} {n} = _nx_X[(size_t)_nx_i * {d} + {j}];"
                     for j, n in enumerate(names))
    ins = ", ".join(f"PTX_IN({tt}, {n})" for n in names)
    body = _loss_code(loss_kind if loss_kind in LOSSES else "user").replace("{TT}", tt)
    # locals are _nx_-prefixed (column names may not be): site variables cand, p, t, l are
    # the names candidates' PTX uses (%v_p)
    return rf'''
typedef {ctype} _nx_T;
extern "C" __global__ void nx_fitness(double* _nx_acc, const _nx_T* _nx_X, const _nx_T* _nx_Y,
                                      int _nx_n, double _nx_c) {{
    unsigned cand = blockIdx.y;
    int _nx_i = blockIdx.x * blockDim.x + threadIdx.x;
    double _nx_s0 = 0.0, _nx_s1 = 0.0, _nx_s2 = 0.0, _nx_bad = 0.0;
    if (_nx_i < _nx_n) {{
        {loads}
        _nx_T p;
        PTX_INJECT("f", PTX_IN(U32, cand), {ins}, PTX_OUT({tt}, p));
        _nx_T t = _nx_Y[_nx_i];
        if (!isfinite(p)) _nx_bad = 1.0;
        {body}
        if (!isfinite(_nx_s0)) _nx_bad = 1.0;
    }}
    for (int _nx_o = 16; _nx_o > 0; _nx_o >>= 1) {{
        _nx_s0 += __shfl_down_sync(0xffffffffu, _nx_s0, _nx_o);
        _nx_s1 += __shfl_down_sync(0xffffffffu, _nx_s1, _nx_o);
        _nx_s2 += __shfl_down_sync(0xffffffffu, _nx_s2, _nx_o);
        _nx_bad += __shfl_down_sync(0xffffffffu, _nx_bad, _nx_o);
    }}
    if ((threadIdx.x & 31) == 0) {{
        double* _nx_a = _nx_acc + 4 * (size_t)cand;
        atomicAdd(_nx_a, _nx_s0); atomicAdd(_nx_a + 1, _nx_s1); atomicAdd(_nx_a + 2, _nx_s2);
        atomicAdd(_nx_a + 3, _nx_bad);
    }}
}}'''


@functools.lru_cache(maxsize=32)
def fitness_template(d: int, names: tuple[str, ...] | None = None, dtype: str = "f32",
                     loss: str = "mse", arch: str = "sm_90") -> CudaTemplate:
    """The generated CUDA kernel :func:`fitness` packs candidates into (NVRTC once per
    shape): site ``f`` takes ``cand`` (u32) and the d columns, gives ``p``; a user loss is site
    ``loss`` (``p``, ``t`` -> ``l``). ``acc[4 * k ...]`` gets candidate k's sums."""
    names = names or tuple(f"x{j}" for j in range(d))
    ctype, tt = {"f32": ("float", "F32"), "f64": ("double", "F64")}[dtype]
    src = _source(d, names, ctype, tt, loss if loss in LOSSES else "user")
    return CudaTemplate(src, entry="nx_fitness", arch=arch)


# ---- the data --------------------------------------------------------------------------------
def _check(X: Any, y: Any, loss: Any, names: Sequence[str] | None):
    """X (n, d) and y (n,) as arrays (not yet converted), the column names."""
    try:
        X, y = np.asarray(X), np.asarray(y)
    except Exception as e:   # noqa: BLE001 - ragged lists and the like
        raise FitnessError(f"fitness: X and y must be numeric arrays ({e})") from None
    for what, a in (("X", X), ("y", y)):
        if a.dtype.kind not in "biuf":
            raise FitnessError(f"fitness: {what} holds {a.dtype} values; it takes real numbers")
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise FitnessError(f"fitness: X is an (n samples, d columns) array, got shape {X.shape}")
    if y.shape != (X.shape[0],):
        raise FitnessError(f"fitness: y has shape {y.shape}; it needs one target per sample "
                           f"({X.shape[0]},)")
    if not (isinstance(loss, str) and loss in LOSSES) and not isinstance(loss, PtxExpr):
        raise FitnessError(f"fitness: loss={loss!r}: use one of {', '.join(LOSSES)} or an "
                           f"@nx.ptx_expr loss(p, t)")
    d = X.shape[1]
    names = tuple(names) if names is not None else tuple(f"x{j}" for j in range(d))
    bad = [n for n in names if not isinstance(n, str) or not n.isidentifier() or
           not n.isascii() or n in _RESERVED or n.startswith("_nx_")]
    if bad or len(names) != d or len(set(names)) != d:
        raise FitnessError(f"fitness: names= gives {d} distinct identifiers for the columns, "
                           f"none of cand, p, t, l (the kernel's site variables), a C++ keyword "
                           f"or _nx_*; got {names!r}")
    return X, y, names


def _convert(what: str, a: np.ndarray, dtype: str) -> np.ndarray:
    """``a`` as C-contiguous ``dtype``; NaN, infinity and values past its range are refused
    (every candidate would score +inf on them)."""
    def first(bad: np.ndarray) -> str:
        return f"the first at index {tuple(int(i) for i in np.argwhere(bad)[0])}"
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a)
        if bad.any():
            raise FitnessError(f"fitness: {what} holds {int(bad.sum())} non-finite value(s) "
                               f"(NaN or inf; {first(bad)}): every candidate would score +inf; "
                               f"drop or impute them first")
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.ascontiguousarray(a, _NP[dtype])
    over = ~np.isfinite(out)
    if over.any():
        big = float(np.max(np.abs(a[over].astype(np.float64))))
        raise FitnessError(f"fitness: {what} holds {int(over.sum())} value(s) past the {dtype} "
                           f"range ({first(over)}, largest |value| {big:.3g}): the kernel runs "
                           f"in {dtype}; rescale the data, or score f64 candidates "
                           f"(dtype='f64')")
    return out


# ---- the population --------------------------------------------------------------------------
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


def _population(candidates: Any) -> list:
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


# ---- what each candidate is written in, and what it reads ------------------------------------
@dataclass(frozen=True)
class _Typed:
    """A candidate's float type (None: either fits), what says so, the inputs it reads
    that the data lack, and the inputs a program reads by position (``sp.input(i)``)."""
    dtype: str | None = None
    why: str = ""
    missing: tuple[str, ...] = ()
    positional: tuple[int, ...] = ()


@functools.lru_cache(maxsize=None)
def _float_of(t: str) -> str | None:
    """``t``'s float type (a user stack type's base) when it is f32 or f64, else None."""
    vt = BY_NAME.get(t)
    base = (vt.base if vt is not None and vt.base else t)
    return base if base in FLOATS else None


@functools.lru_cache(maxsize=4096)
def _row_floats(index: int, version: int) -> tuple[str, ...]:
    """The float types (f32, f64) instruction row ``index`` reads or gives."""
    if index >= len(TABLE):
        return ()
    row = TABLE[index]
    return tuple(dict.fromkeys(f for t in (*row.operands, *row.results) if (f := _float_of(t))))


def _one_type(seen: dict[str, str], missing: list[str]) -> _Typed:
    """``seen``: float type -> the first thing written in it."""
    if len(seen) == 1:
        (t, why), = seen.items()
        return _Typed(t, why, tuple(missing))
    return _Typed(None, "", tuple(missing))   # no float type, or both (converts): either


def _program_facts(prog: Any, inputs: tuple[str, ...]) -> _Typed:
    """A Stack PTX program: the float types of its instructions and constants, the inputs it
    reads that ``inputs`` (the site's) lack."""
    try:
        if isinstance(prog, np.ndarray):     # names from the encoding, else the site's by tag
            ops = decode(prog, getattr(prog, "inputs", None) or inputs)
        else:
            ops = prog
    except NumptxError:
        return _Typed()                      # it does not compile: it scores +inf
    seen: dict[str, str] = {}
    missing: list[str] = []
    positional: list[int] = []
    version = TABLE.version
    for op in ops:
        if op.__class__ is not Op:
            continue
        word = op.word
        kind = word & 0xFF
        if kind == INSTR:
            for f in _row_floats(word >> 16 & 0xFFFF, version):
                if f not in seen:
                    seen[f] = repr(op)
        elif kind == INPUT:
            if op.name is not None:
                if op.name not in inputs:
                    missing.append(repr(op.name))
            elif word >> 32:
                if word >> 32 not in {input_tag(n) for n in inputs}:
                    missing.append(f"an input with name tag 0x{word >> 32:08x}")
            else:             # by position: the kernel's input 0 is cand, not x0
                positional.append(word >> 16 & 0xFFFF)
        elif kind == CONST or kind == CONST64:
            f = _float_of(TYPES[word >> 8 & 0xFF]) if word >> 8 & 0xFF < len(TYPES) else None
            if f and f not in seen:
                seen[f] = repr(op)
    if positional:
        return _Typed(positional=tuple(dict.fromkeys(positional)))
    if len(seen) == 2 and not missing:
        return _converting(prog, inputs, seen)
    return _one_type(seen, missing)


def _converting(prog: Any, inputs: tuple[str, ...], seen: dict[str, str]) -> _Typed:
    """A program of f32 and f64 instructions (it converts): the kernel type in which its
    value reaches ``%v_p`` with the fewest instructions left without operands, by the
    compiler, both ways; either where both (or neither) fit alike."""
    fit = {}
    for t in FLOATS:
        try:
            stub = sp.compile(prog, {n: "u32" if n == "cand" else t for n in inputs}, {"p": t})
        except NumptxError:
            return _Typed()                  # it does not compile: it scores +inf
        fit[t] = (not stub.unsatisfied, -stub.stats["noops"])
    if fit["f32"] == fit["f64"]:
        return _Typed()
    t = max(FLOATS, key=fit.__getitem__)
    return _Typed(t, f"it converts ({seen['f32']}, {seen['f64']}); its value reaches %v_p "
                     f"in {t}")


def _text_facts(text: str, variables: frozenset[str]) -> _Typed:
    """PTX text: the float type it writes ``%v_p`` with, the ``%v_*`` registers it reads that
    are no site variable and that it does not declare."""
    reg = site_layout.reg_name
    try:
        prog = parse(text, TABLE.uid, TABLE.version)
    except NumptxError:
        return _Typed()                      # the emulator and ptxas say what is wrong: +inf
    seen: dict[str, str] = {}
    missing: list[str] = []
    prefix = reg("")
    for step in prog.steps:
        for names, t in zip(step.dests, step.dest_types):
            f = _float_of(t) or _BITS.get(t)      # mov.b32 %v_p fits an f32 register only
            if f and reg("p") in names:
                seen.setdefault(f, step.text.strip())
        for slot in step.srcs:
            for o in slot:
                name = getattr(o, "name", None)
                if (isinstance(name, str) and not getattr(o, "special", False)
                        and name.startswith(prefix) and "#" not in name
                        and name not in prog.declared and name[len(prefix):] not in variables
                        and repr(name[len(prefix):]) not in missing):
                    missing.append(repr(name[len(prefix):]))
    return _one_type(seen, missing)


def _reads(text: str, reg: str) -> bool:
    """Whether ``text`` names register ``%reg``."""
    return re.search("%" + re.escape(reg) + r"(?![\w$])", text) is not None


def _stub_facts(k: int, stub: Stub, regs: frozenset[str]) -> _Typed:
    """A compiled stub: the type it was compiled to give ``%v_p`` in. One compiled for other
    registers than the kernel's (``regs``) that it reads, or that does not give ``%v_p``,
    raises: the kernel would read ``p`` unwritten."""
    t = _float_of(stub.outputs.get(_P, ""))
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
        return _Typed(t, "a compiled stub")
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
    return _Typed(t, "a compiled stub" if t else "")


def _formula(k: int, c: PtxExpr, names: tuple[str, ...]) -> tuple[PtxExpr, _Typed]:
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
    t = kinds.pop()
    return c, _Typed(t, sig)


def _facts(k: int, c: Any, names: tuple[str, ...], variables: frozenset[str],
           regs: frozenset[str]) -> tuple[Any, _Typed]:
    """Candidate ``k`` (formulas with defaults baked in) and what it is written in; an input
    the data lack raises."""
    if isinstance(c, Stub):                   # the search's stubs, thousands a generation
        return c, _stub_facts(k, c, regs)
    if isinstance(c, PtxExpr):
        try:
            return _formula(k, c, names)
        except FitnessError:
            raise
        except Exception as e:   # noqa: BLE001 - a formula that does not trace scores +inf,
            log.debug("numptx.fitness: candidate %d: %s", k, e)     # as in a pack
            return c, _Typed()
    if isinstance(c, str):
        facts = _text_facts(c, variables)
    elif isinstance(c, (list, tuple, np.ndarray)):
        facts = _program_facts(c, ("cand",) + names)
    else:
        return c, _Typed()
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
    return c, facts


def _loss_facts(loss: Any) -> _Typed:
    if not isinstance(loss, PtxExpr):
        return _Typed()
    try:
        loss.graph                               # traced here: its errors name the loss
    except Exception as e:   # noqa: BLE001 - the user's function raised while tracing
        raise FitnessError(f"fitness: loss={loss.__name__} does not trace: "
                           f"{type(e).__name__}: {e}") from None
    p = list(loss.params)
    if len(p) != 2 or (len(set(p) & {"p", "t"}) == 1):
        raise FitnessError(f"fitness: loss={loss.signature()}: a loss takes two parameters, "
                           f"the prediction and the target: named p and t, or any two other "
                           f"names (bound in that order)")
    kinds = {t.name for t in loss.params.values()} | {n.dtype for _, n in loss.graph.outputs}
    if len(kinds) != 1 or not kinds <= set(FLOATS) or len(loss.graph.outputs) != 1:
        raise FitnessError(f"fitness: loss={loss.signature()}: a loss takes and gives one "
                           f"float type (f32 or f64), one value")
    return _Typed(kinds.pop(), f"loss {loss.signature()}")


def _decide(typed: list[tuple[str, _Typed]], dtype: str | None, X: np.ndarray) -> str:
    """The kernel's float type (see the module documentation); a candidate of another type
    raises, naming it."""
    given = dtype is not None
    if not given:
        kinds = {f.dtype for _, f in typed if f.dtype}
        if len(kinds) == 2:
            a, b = (next((w, f) for w, f in typed if f.dtype == t) for t in FLOATS)
            raise FitnessError(f"fitness: {a[0]} is f32 ({a[1].why}) and {b[0]} is f64 "
                               f"({b[1].why}): the kernel runs one float type; score them in "
                               f"two calls", candidate=_index(b[0]))
        dtype = kinds.pop() if kinds else ("f64" if X.dtype == np.float64 else "f32")
    for who, f in typed:
        if f.dtype and f.dtype != dtype:
            raise FitnessError(f"fitness: {who} is written in {f.dtype} ({f.why}) but "
                               f"dtype={dtype!r}: it does not run in an {dtype} kernel (a "
                               f"program's {f.dtype} instructions find no operands there and "
                               f"do nothing); pass dtype={f.dtype!r} (the data are converted) "
                               f"or write it in {dtype}", candidate=_index(who))
    return dtype


def _index(who: str) -> int | None:
    return int(who.split()[1]) if who.startswith("candidate ") else None


@dataclass(frozen=True)
class Prepared:
    """What :func:`fitness` scores, after its checks: the candidates (formulas with the
    defaults of parameters the columns lack baked in), the data converted to ``dtype`` and the
    column names. ``fitness_template(X.shape[1], names, dtype, ...)`` is the kernel."""
    candidates: list
    X: np.ndarray
    y: np.ndarray
    names: tuple[str, ...]
    dtype: str


def prepare(candidates: Iterable[Any], X: Any, y: Any, loss: Any = "mse", *,
            names: Sequence[str] | None = None, dtype: str | None = None) -> Prepared:
    """Check a population and a data set as :func:`fitness` does and decide the kernel's
    float type (the module documentation says how): ``prepare(pop, X, y).dtype``."""
    X, y, names = _check(X, y, loss, names)
    if dtype is not None and not (isinstance(dtype, str) and dtype.lower() in FLOATS):
        raise FitnessError(f"fitness: dtype={dtype!r}: the kernel runs in 'f32' or 'f64' (or "
                           f"None: the candidates' type)")
    cands = _population(candidates)
    typed: list[tuple[str, _Typed]] = [("the loss", _loss_facts(loss))]
    variables = frozenset(("cand", "p") + names)
    regs = frozenset(site_layout.reg_name(v) for v in variables)
    for k, c in enumerate(cands):
        cands[k], facts = _facts(k, c, names, variables, regs)
        typed.append((f"candidate {k}", facts))
    dt = _decide(typed, dtype.lower() if dtype else None, X)
    return Prepared(cands, _convert("X", X, dt), _convert("y", y, dt), names, dt)


def _by_position(c: PtxExpr, names: tuple[str, ...], site: Any) -> SiteBinding:
    """A formula whose parameters name no column, bound to the columns in order (prepare
    checked the counts); its results to ``p`` by the rules of ``stub(site)``."""
    g = c.graph
    order = output_order(g.output_form, [k for k, _ in g.outputs], site.outputs)
    return SiteBinding(c, dict(zip(c.params, names)), order, site)


@dataclass(frozen=True)
class _ByPosition:
    """:func:`_by_position` as a pack's candidate: compiled when the pack asks, so that its
    errors (a body that raises, results that do not fit) are the candidate's."""
    expr: PtxExpr
    names: tuple[str, ...]

    @property
    def graph(self) -> Any:                  # the math library's constants (jit.patch)
        return self.expr.graph

    def stub(self, site: Any) -> str:
        b, reg = _by_position(self.expr, self.names, site), site_layout.reg_name
        return self.expr.stub(inputs={p: reg(v) for p, v in b.inputs.items()},
                              outputs={o: reg(v) for v, o in b.outputs.items()})


def _adapt(c: Any, names: tuple[str, ...]) -> Any:
    """A formula whose parameters are no column binds by position (:class:`_ByPosition`)."""
    if isinstance(c, PtxExpr) and not set(c.params) <= set(names):
        return _ByPosition(c, names)
    return c


# ---- scoring on the CPU ----------------------------------------------------------------------
def _loss_binding(loss: Any, tmpl: CudaTemplate) -> SiteBinding | None:
    """A user loss bound to the kernel's ``loss`` site by the rules of its ``stub(site)``
    (what the GPU compiles and the CPU evaluates); one that does not fit is refused."""
    if not isinstance(loss, PtxExpr):
        return None
    try:
        return loss.binding(tmpl.sites["loss"])
    except NumptxError as e:
        raise FitnessError(f"fitness: loss={loss.__name__} does not fit the kernel's loss site "
                           f"(p, t -> l; a dict result binds by name, so {{'l': ...}}): "
                           f"{e}") from None


def _score(pred: np.ndarray, t: np.ndarray, loss: Any) -> float:
    with np.errstate(all="ignore"):
        p = pred.astype(np.float64)
        if not np.all(np.isfinite(p)):
            return math.inf
        tt = t.astype(np.float64)
        if loss == "mse":
            s = float(np.mean((p - tt) ** 2))
        elif loss == "rmse":
            s = math.sqrt(float(np.mean((p - tt) ** 2)))
        elif loss == "mae":
            s = float(np.mean(np.abs(p - tt)))
        elif loss == "pearson":
            sp_, st = p.std(), tt.std()
            r = float(np.mean((p - p.mean()) * (tt - tt.mean())) / (sp_ * st)) if sp_ and st else None
            s = math.inf if r is None else max(0.0, 1.0 - r)
        else:       # a user loss's SiteBinding: as the kernel's loss site binds it
            s = float(np.mean(np.asarray(loss.evaluate({"p": pred, "t": t})["l"], np.float64)))
    return s if math.isfinite(s) else math.inf


def _predict_cpu(c: Any, X: np.ndarray, names: tuple[str, ...], site, cand: int) -> np.ndarray:
    """Candidate ``c``'s predictions, as its module on a GPU computes them: ``cand`` is its
    index in the module, and ``p`` reads 0 where the candidate does not write it (the pack
    zero-fills out variables before its dispatch)."""
    cols = {n: X[:, j] for j, n in enumerate(names)}
    vt = "f64" if X.dtype == np.float64 else "f32"
    if isinstance(c, PtxExpr):
        # what the GPU build compiles, with its binding errors
        resolve_stub(_adapt(c, names), site, packed=True)
        # the rules stub(site) compiles by: parameters by name, else in order
        b = c.binding(site) if set(c.params) <= set(names) else _by_position(c, names, site)
        out = b.evaluate(cols | {"cand": np.uint32(cand)})["p"]
        return np.broadcast_to(np.asarray(out), (X.shape[0],))
    # refused as a pack refuses it (raw text that leaves early, branches out, ...): +inf
    text = resolve_stub(c, site, packed=True)
    reg = site_layout.reg_name
    got = emulate(text, {reg(n): v for n, v in cols.items()} |
                  {reg("cand"): np.uint32(cand), reg("p"): np.zeros((), X.dtype)},
                  {reg("p"): vt})
    return np.broadcast_to(np.asarray(got[reg("p")]), (X.shape[0],))


def fitness(candidates: Iterable[Any], X: Any, y: Any, loss: Any = "mse", *,
            names: Sequence[str] | None = None, dtype: str | None = None,
            device: str = "auto", per_module: int = DEFAULT_PER_MODULE,
            executor: Executor | None = None, block: int = 256) -> np.ndarray:
    """Score each candidate on the data set ``X`` (n × d), ``y`` (n): an array of one float64
    per candidate, ``+inf`` for a candidate that fails to build or gives NaN/inf (see the
    module documentation)::

        scores = nx.fitness([f, prog, "mov.f32 %v_p, %v_x1;"], X, y, loss="mae")

    ``dtype``: ``"f32"`` or ``"f64"``, the kernel's float type (default: the candidates'; a
    candidate of the other type raises :class:`FitnessError`). ``device``: ``"gpu"``,
    ``"cpu"`` or ``"auto"`` (the GPU when there is one)."""
    if device not in ("auto", "cpu", "gpu"):
        raise FitnessError(f"fitness: device={device!r}: use 'auto', 'cpu' or 'gpu'")
    if isinstance(block, bool) or not isinstance(block, int) or block % 32 or not 32 <= block <= 1024:
        raise FitnessError(f"fitness: block={block!r}: a multiple of 32 from 32 to 1024 (the "
                           f"kernel reduces whole warps)")
    if isinstance(per_module, bool) or not isinstance(per_module, int) or \
            not 1 <= per_module <= MAX_CANDIDATES:
        raise FitnessError(f"fitness: per_module={per_module!r}: an int from 1 to "
                           f"{MAX_CANDIDATES} (candidates a module)")
    if device == "gpu" and not gpu_available():
        why = ("numba-cuda's simulator (NUMBA_ENABLE_CUDASIM=1) runs no CUDA C++" if SIMULATOR
               else "numba-cuda finds no CUDA GPU or driver")
        raise LaunchError(f"fitness: device='gpu' but no CUDA GPU is available here ({why}): "
                          f"use device='cpu' (the emulator: the same scores, slower) or "
                          f"device='auto' (the GPU when there is one)")
    job = prepare(candidates, X, y, loss, names=names, dtype=dtype)
    cands, X, y, names = job.candidates, job.X, job.y, job.names
    loss_key = loss if isinstance(loss, str) else "user"
    if device == "auto":
        device = "gpu" if gpu_available() else "cpu"
    tmpl = fitness_template(X.shape[1], names, job.dtype, loss_key,
                            device_arch() if device == "gpu" else "sm_90")
    bound = _loss_binding(loss, tmpl)
    if device == "cpu":
        return _fitness_cpu(tmpl, cands, X, y, names, loss, bound or loss, per_module,
                            executor)
    return _fitness_gpu(tmpl, [_adapt(c, names) for c in cands], X, y, loss, per_module,
                        executor, block)


def _packs(tmpl: CudaTemplate, cands: list, loss: Any, per_module: int,
           executor: Executor | None) -> list:
    extra = {"loss": loss} if isinstance(loss, PtxExpr) else {}
    return tmpl.pack_many("f", cands, select="cand", per_module=per_module, executor=executor,
                          **extra)


def _refused_by_the_build(tmpl: CudaTemplate, cands: list, names: tuple[str, ...], loss: Any,
                          per_module: int, executor: Executor | None) -> dict[int, Exception]:
    """The CPU path's candidates that the GPU path's packs refuse (index -> the pack's
    error). Raw PTX (text numptx did not compile: a ``str``, a user object's ``.stub``) is
    packed as on a GPU, by nvJitLink: ptxas refuses operand types that do not fit the
    kernel's registers, which the emulator does not check. Numptx's own stubs fit by
    construction: no build when there is no raw text."""
    if all(isinstance(c, (PtxExpr, list, tuple, np.ndarray)) or type(c) is Stub
           for c in cands):
        return {}
    with warnings.catch_warnings():     # the CPU path's own resolve_stub warns of the same
        warnings.simplefilter("ignore")
        packs = _packs(tmpl, [_adapt(c, names) for c in cands], loss, per_module, executor)
        for p in packs:
            if not p.empty:
                try:
                    p.cubin                   # ptxas: the candidates it refuses join errors
                except NumptxError as e:      # none fits: each is in errors
                    log.debug("numptx.fitness: module at %d: %s", p.offset, e)
    return {k: e for p in packs for k, e in p.errors.items()}


def _fitness_cpu(tmpl: CudaTemplate, cands: list, X: np.ndarray, y: np.ndarray,
                 names: tuple[str, ...], loss: Any, scorer: Any, per_module: int,
                 executor: Executor | None) -> np.ndarray:
    """Each candidate on the CPU (see the module documentation), as its module on a GPU;
    ``scorer``: a built-in loss's name or a user loss's :class:`SiteBinding`."""
    site = tmpl.sites["f"]
    refused = _refused_by_the_build(tmpl, cands, names, loss, per_module, executor)
    out = np.empty(len(cands))
    for k, c in enumerate(cands):
        if k in refused:                    # what the GPU's pack refuses: +inf there too
            why = str(refused[k])               # "candidate k: ...", the pack's words
            log.debug("numptx.fitness: %s", why if why.startswith(f"candidate {k}:")
                      else f"candidate {k}: {why}")
            out[k] = math.inf
            continue
        try:
            pred = _predict_cpu(c, X, names, site, k % per_module)
        except Exception as e:   # noqa: BLE001 - a candidate that does not run scores +inf
            log.debug("numptx.fitness: candidate %d: %s", k, e)
            out[k] = math.inf
            continue
        out[k] = _score(pred, y, scorer)
    return out


def gpu_available() -> bool:
    """Whether a CUDA GPU runs the generated kernel (never under numba-cuda's simulator)."""
    if SIMULATOR:               # numba-cuda's simulator runs no CUDA C++
        return False
    try:
        from numba import cuda
        return bool(cuda.is_available())
    except Exception:   # noqa: BLE001 - no driver, no numba-cuda: the CPU it is
        return False


def device_arch() -> str:
    """The current GPU's architecture: the generated kernel is compiled for it."""
    from numba import cuda
    cc = cuda.get_current_device().compute_capability
    return f"sm_{cc[0]}{cc[1]}"


def _fitness_gpu(tmpl: CudaTemplate, cands: list, X: np.ndarray, y: np.ndarray, loss: Any,
                 per_module: int, executor: Executor | None, block: int) -> np.ndarray:
    from numba import cuda
    packs = _packs(tmpl, cands, loss, per_module, executor)
    n = X.shape[0]
    yy = y.astype(np.float64)
    c = float(yy.mean())                      # pearson's moments are taken about it
    dX, dy = cuda.to_device(X), cuda.to_device(y)
    acc = cuda.to_device(np.zeros((len(cands), 4)))
    for p in packs:
        if p.empty:                           # no candidate of the module works: all +inf
            continue
        sub = acc[p.offset:p.offset + len(p)]
        p[((n + block - 1) // block, len(p)), block](sub, dX, dy, n, c)
    sums = acc.copy_to_host()
    out = np.empty(len(cands))
    bad = {i for p in packs for i in p.errors}
    for k in range(len(cands)):
        s0, s1, s2, nbad = sums[k]
        if k in bad or nbad > 0:
            out[k] = math.inf
            continue
        if loss in ("mse", "mae") or isinstance(loss, PtxExpr):
            s = s0 / n
        elif loss == "rmse":
            s = math.sqrt(s0 / n)
        else:           # pearson from moments of q = p - c, c the target mean
            mq, vt = s0 / n, yy.var()
            vq = s1 / n - mq * mq
            # a variance lost in rounding (constant predictions) is no variance
            s = (math.inf if vq <= 1e-12 * (s1 / n) or vt <= 0
                 else max(0.0, 1.0 - (s2 / n) / math.sqrt(vq * vt)))
        out[k] = s if math.isfinite(s) else math.inf
    return out
