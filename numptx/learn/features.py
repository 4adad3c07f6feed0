"""Features of programs for the models of :mod:`numptx.learn`: one float32 row a program.

``features(programs, genes, probe=None)`` reads each program two ways:

* **words** (always): hashed op n-grams, counted into ``buckets`` columns and divided by the
  program's length; then six columns: the length (ops), the live ops (ops whose value
  reaches an output), the deepest any one stack gets, the constant count, and the mean and
  the largest ``log10(|c| + 1e-30)`` over the constants (0 without constants);
* **runs** (with ``probe=``): each program's outputs on the probe rows through the CPU
  interpreter (``sp.interpret``), as ``sign(v) * log1p(|v|)`` with non-finite values as 0
  (``project=k``: a seeded Gaussian random projection of them to ``k`` columns), then one
  column, the share of non-finite outputs.

::

    import numpy as np
    from numptx import stack_ptx as sp
    from numptx.learn.features import Probe, features
    from numptx.search.genes import Genes           # (any object with .inputs and .outputs)

    genes = Genes(["add", "mul", "sin"], 2)
    progs = [[sp.input("x0"), sp.input("x1"), sp.instr("mul.rn.f32")],
             [sp.input("x0"), sp.instr("sin.approx.f32")]]
    X = np.random.default_rng(0).uniform(-1, 1, (500, 2))
    probe = Probe.from_data(X, ["x0", "x1"], rows=32, seed=0)
    F = features(progs, genes, probe)               # float32, shape (2, 64 + 6 + 32 + 1)
    F = features(progs, genes, probe, project=8)    # (2, 64 + 6 + 8 + 1)

Layout of a row: ``buckets`` n-gram columns, ``length, live, depth, constants,
mean_log10, max_log10``, then (with a probe) the run columns, ``n_outputs * rows`` of them
(output by output, row by row) or ``project``, and last the non-finite share.

**The n-gram hash** is stable across processes and platforms (no Python ``hash()``): an op's
token is the instruction's table name (``"add.rn.f32"``), ``"in:<name>"`` for an input push,
``"const"`` for a constant, the meta operation's name (``"dup"``, ``"swap"`` ...) and the
kind's name for the rest (``"meta_const"``, ``"store"``, ``"load"``, ``"routine"``, ``"return"``,
``"nop"``; ``"?"`` for a malformed word); ``t = zlib.crc32(token.encode())``. An n-gram of
tokens ``t1..tn`` hashes, in uint64 arithmetic, as ``h = 0xcbf29ce484222325 ^ n``, then for
each token ``h = (h ^ t) * 0x100000001b3``; its bucket is ``(h ^ (h >> 32)) % buckets``.
Every n of ``ngrams`` counts into the same buckets.

**Live ops and depth** come from running the program's stacks as the C core does in the numptx
dialect (``docs/design/programs.md``: one stack per value type, an instruction lacking operands
does nothing, meta operations, scratch slots, a top-level ``ret()`` stops) with the default
:class:`numptx.stack_ptx.Limits` (step limit, stack and meta capacity, slots; the node limit,
which the core's sharing of equal nodes decides, is not modelled). An op is live when a value
it pushes (an input, a constant, an instruction's result, a ``dup``/``yank_dup`` copy, a
``load``) is read, through instructions and copies, by an output. In a program whose only
meta operation is ``dup`` (a search's programs), removing every other op leaves what it
computes unchanged; ``swap``, ``drop``, ``rotate``, ``clear`` and the like push no value, so
they are never live, though removing one can change what later ops read
(:func:`live_ops` gives the ops; :mod:`numptx.learn.stacks` runs the stacks).
``routine(k)`` is a no-op here (features take no routines). mm-ptx programs (a dialect
marker) are refused: ``sp.convert`` them first.
"""
from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .. import stack_ptx as sp
from .. import valuetypes as VT
from .._program.encoding import input_tag
from .._program.ops import MARKER_MAGIC, MARKER_MASK
from ..errors import NumptxError
from ..instructions import TABLE, TYPE_ID
from ..opkinds import (CONST, CONST64, INPUT, INSTR, KIND_NAMES, META, META_OPS)
from ..stack_ptx import Op
from .errors import LearnError
from .stacks import live_and_depth

__all__ = ["Probe", "ProgramSpace", "features", "live_ops", "projection", "WORD_COLUMNS", "MAX_BUCKETS",
           "MAX_NGRAM", "MAX_PROJECT"]

#: the names of the word columns after the n-gram buckets
WORD_COLUMNS = ("length", "live", "depth", "constants", "mean_log10", "max_log10")
MAX_BUCKETS = 1 << 20
MAX_NGRAM = 8
MAX_PROJECT = 4096

_FNV_OFFSET, _FNV_PRIME = np.uint64(0xcbf29ce484222325), np.uint64(0x100000001b3)
_OPS = {Op}
_U64 = struct.Struct("<Q")


@runtime_checkable
class ProgramSpace(Protocol):
    """What :func:`features` needs of the genes: the programs' inputs and outputs, each a
    mapping of names to value types in order (``numptx.search.genes.Genes`` has both)."""

    @property
    def inputs(self) -> Mapping[str, str]: ...

    @property
    def outputs(self) -> Mapping[str, str]: ...


# ---- probes -------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Probe:
    """Fixed probe rows the run features evaluate programs on: ``columns`` maps each input name
    to a 1-D float32 or float64 array, all of one length, finite::

        probe = Probe.from_data(X, ["x0", "x1"], rows=32, seed=0)
        probe.rows                                    # 32 (fewer when X has fewer rows)
        Probe({"x0": np.float32([0.5, 1.0])})         # by hand

    The columns are read-only copies; probes compare by identity (``eq=False``).
    """

    columns: dict[str, np.ndarray]

    def __post_init__(self) -> None:
        cols = self.columns
        if not isinstance(cols, Mapping) or not cols:
            raise LearnError(f"probe columns: give a non-empty mapping of input names to 1-D "
                             f"float arrays, not {cols!r:.80}")
        out: dict[str, np.ndarray] = {}
        n = None
        for name, v in cols.items():
            if not isinstance(name, str):
                raise LearnError(f"probe columns: the key {name!r} is not an input name (a str)")
            if not isinstance(v, np.ndarray) or v.ndim != 1 or \
                    v.dtype not in (np.float32, np.float64):
                raise LearnError(f"probe columns[{name!r}]: give a 1-D float32 or float64 "
                                 f"array, not {getattr(v, 'dtype', type(v).__name__)} "
                                 f"{getattr(v, 'shape', '')}")
            if n is not None and len(v) != n:
                raise LearnError(f"probe columns: {name!r} has {len(v)} rows, "
                                 f"{next(iter(out))!r} has {n}: give columns of one length")
            n = len(v)
            bad = np.flatnonzero(~np.isfinite(v))
            if len(bad):
                raise LearnError(f"probe columns[{name!r}]: row {int(bad[0])} is {v[bad[0]]!r}; "
                                 f"probe rows must be finite (drop or impute that row)")
            c = np.array(v, copy=True)
            c.flags.writeable = False
            out[name] = c
        if not n:
            raise LearnError("probe columns: the columns have no rows; give at least one")
        object.__setattr__(self, "columns", out)

    @property
    def rows(self) -> int:
        """The number of probe rows."""
        return len(next(iter(self.columns.values())))

    @classmethod
    def from_data(cls, X: Any, names: Sequence[str], rows: int = 32, seed: int = 0) -> "Probe":
        """``rows`` rows of ``X`` (n x d, float32 or float64), drawn without replacement under
        ``seed`` (kept in their order in ``X``; every row when ``X`` has fewer), one column per
        name of ``names`` (d names)."""
        if not isinstance(X, np.ndarray) or X.ndim != 2 or X.dtype not in (np.float32,
                                                                              np.float64):
            raise LearnError(f"X: give a 2-D float32 or float64 array (rows x inputs), not "
                             f"{getattr(X, 'dtype', type(X).__name__)} {getattr(X, 'shape', '')}")
        if isinstance(names, str) or not isinstance(names, Sequence) or len(names) != X.shape[1]:
            raise LearnError(f"names: give {X.shape[1]} input names, one per column of X, not "
                             f"{names!r:.80}")
        rows = _int("rows", rows, 1, 1 << 24)
        seed = _int("seed", seed, 0, None)
        n = X.shape[0]
        if n == 0:
            raise LearnError("X: it has no rows; a probe needs at least one")
        take = np.arange(n) if rows >= n else \
            np.sort(np.random.default_rng(seed).choice(n, rows, replace=False))
        return cls({name: np.ascontiguousarray(X[take, j]) for j, name in enumerate(names)})


# ---- argument checks ----------------------------------------------------------------------------
def _int(name: str, v: Any, low: int, high: int | None) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low or \
            (high is not None and v > high):
        top = "" if high is None else f" and <= {high}"
        raise LearnError(f"{name}={v!r:.60}: give an int >= {low}{top}")
    return int(v)


def _check_ngrams(ngrams: Any) -> tuple[int, ...]:
    if isinstance(ngrams, (str, bytes)) or not isinstance(ngrams, Sequence) or not ngrams or \
            any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or
                not 1 <= n <= MAX_NGRAM for n in ngrams) or len(set(ngrams)) != len(ngrams):
        raise LearnError(f"ngrams={ngrams!r:.60}: give distinct n-gram sizes, ints in "
                         f"[1, {MAX_NGRAM}], e.g. (1, 2)")
    return tuple(int(n) for n in ngrams)


def _types(genes: Any, what: str) -> list[tuple[str, int]]:
    m = getattr(genes, what, None)
    if not isinstance(m, Mapping):
        raise LearnError(f"genes: {type(genes).__name__} has no .{what} mapping (names to "
                         f"value types); give a numptx.search.genes.Genes or a ProgramSpace")
    out = []
    for name, t in m.items():
        tid = TYPE_ID.get(str(t).lower()) if isinstance(name, str) else None
        if tid is None:
            raise LearnError(f"genes.{what}[{name!r}] = {t!r}: not a value type name")
        out.append((name, tid))
    return out


def _as_ops(p: Any, k: int) -> Sequence[Op]:
    """Program ``k`` as a sequence of ops (an encoded array is decoded)."""
    if isinstance(p, np.ndarray):
        if p.ndim != 1 or p.dtype.kind not in "iu":
            raise LearnError(f"programs[{k}]: an encoded program is a 1-D uint64 array, not "
                             f"{p.dtype} {p.shape}")
        try:
            return sp.decode(p)
        except NumptxError as e:
            raise LearnError(f"programs[{k}]: {e}") from None
    if isinstance(p, (str, bytes)) or not isinstance(p, Sequence):
        raise LearnError(f"programs[{k}]: a program is a sequence of Stack PTX ops, not "
                         f"{type(p).__name__}")
    for j, op in enumerate(p):
        if not isinstance(op, Op):
            raise LearnError(f"programs[{k}]: item {j} is {op!r:.60}, not a Stack PTX op")
    return p


# ---- the batch's words --------------------------------------------------------------------------
class _Batch:
    """The programs' ops as flat arrays: ``prog`` (the program of each op), ``pos`` (its index
    in the program), ``kind``, ``typ``, ``a`` (bits 16..31), ``hi`` (bits 32..63) and ``extra``
    (a CONST64's data word); ``counts`` / ``starts`` per program."""

    def __init__(self, programs: Sequence[Any], names: Sequence[str]):
        self.n = len(programs)
        raw = {n: _U64.pack(INPUT | i << 16) for i, n in enumerate(names)}
        try:                  # the common case: lists of ops (a bad item fails the join)
            if programs.__class__ is not list or not set(map(type, programs)) <= {list}:
                raise TypeError
            parts = [b"".join([op.raw or raw[op.name] for op in p]) for p in programs]
        except (KeyError, AttributeError, TypeError):
            parts = [self._encode(p, k, raw, names) for k, p in enumerate(programs)]
        w = np.frombuffer(b"".join(parts), np.uint64)
        wl = np.fromiter(map(len, parts), np.int64, self.n) >> 3
        self._ops(w, wl)
        self._markers()

    @staticmethod
    def _encode(p: Any, k: int, raw: dict, names: Sequence[str]) -> bytes:
        """Program ``k``'s words, each item checked (the errors name the program)."""
        p = _as_ops(p, k)
        try:
            return b"".join([op.raw or raw[op.name] for op in p])
        except KeyError as e:
            raise LearnError(f"programs[{k}]: it reads the input {e.args[0]!r}, which "
                             f"genes.inputs does not have (inputs: "
                             f"{', '.join(map(repr, names)) or 'none'})") from None

    def _ops(self, w: np.ndarray, wl: np.ndarray) -> None:
        c64 = (w & np.uint64(0xFF)) == CONST64
        data = np.zeros(len(w), bool)
        if c64.any():
            first = np.zeros(len(w), bool)
            first[(np.cumsum(wl) - wl)[wl > 0]] = True
            while True:               # a word after a CONST64 op (not after its data) is data
                nxt = np.zeros(len(w), bool)
                nxt[1:] = (c64 & ~data)[:-1]
                nxt &= ~first
                if np.array_equal(nxt, data):
                    break
                data = nxt
        at = np.flatnonzero(~data) if len(w) and data.any() else np.arange(len(w))
        self._w, self._data = w, data
        self._set(at, np.repeat(np.arange(self.n), wl)[at])

    def _set(self, at: np.ndarray, prog: np.ndarray) -> None:
        w = self._w
        ow = w[at].view(np.int64)
        self.prog, self._at = prog, at
        self.counts = np.bincount(prog, minlength=self.n).astype(np.int64)
        self.starts = np.cumsum(self.counts) - self.counts
        self.pos = np.arange(len(at)) - self.starts[prog]
        self.kind = ow & 0xFF
        self.typ = ow >> 8 & 0xFF
        self.a = ow >> 16 & 0xFFFF
        self.hi = ow >> 32 & 0xFFFFFFFF
        self.extra = np.zeros(len(at), np.uint64)
        c64 = np.flatnonzero(self.kind == CONST64)
        if len(c64):
            nxt = at[c64] + 1
            has = nxt < len(w)
            has[has] = self._data[nxt[has]]
            self.extra[c64[has]] = w[nxt[has]]
            self.kind[c64[~has]] = -1                      # no data word: malformed

    def _markers(self) -> None:
        """Word 0 of a program may be a dialect marker: numptx's is dropped, mm-ptx's refused."""
        ow = self._w[self._at]
        mark = ((ow & np.uint64(MARKER_MASK)) == np.uint64(MARKER_MAGIC)) & (self.pos == 0)
        if not mark.any():
            return
        d = (ow[mark] >> np.uint64(32)) & np.uint64(0xFF)
        if (d != 0).any():
            k = int(self.prog[np.flatnonzero(mark)[np.flatnonzero(d != 0)[0]]])
            raise LearnError(f"programs[{k}]: an mm-ptx program (it starts with the dialect "
                             f"marker); features reads numptx programs: pass "
                             f"sp.convert(prog, 'mm-ptx', 'numptx', genes.inputs, "
                             f"genes.outputs)")
        keep = ~mark
        self._set(self._at[keep], self.prog[keep])


# ---- tokens and n-grams -------------------------------------------------------------------------
def _crc(token: str) -> int:
    return zlib.crc32(token.encode("utf-8", "surrogatepass"))


def _token_hashes(b: _Batch, names: Sequence[str], in_index: np.ndarray) -> np.ndarray:
    """Each op's token hash (uint64 holding a CRC-32)."""
    by_kind = np.array([_crc(n) for n in KIND_NAMES] + [_crc("?")], np.uint64)
    by_kind[[CONST, CONST64]] = _crc("const")
    th = by_kind[np.where((b.kind >= 0) & (b.kind < len(KIND_NAMES)), b.kind, len(KIND_NAMES))]
    m = b.kind == INPUT
    ins = np.array([_crc(f"in:{n}") for n in names] + [_crc("?")], np.uint64)
    th[m] = ins[in_index[m]]
    m = b.kind == META
    metas = np.array([_crc(n) for n in META_OPS] + [_crc("?")], np.uint64)
    th[m] = metas[np.minimum(b.a[m], len(META_OPS))]
    m = np.flatnonzero(b.kind == INSTR)
    if len(m):
        a = b.a[m]
        names_of = np.full(int(a.max()) + 1, _crc("?"), np.uint64)
        for r in np.flatnonzero(np.bincount(a)).tolist():
            if r < len(TABLE):
                names_of[r] = _crc(TABLE[r].name)
        th[m] = names_of[a]
    return th


def _ngrams(b: _Batch, th: np.ndarray, ngrams: tuple[int, ...], buckets: int) -> np.ndarray:
    left = b.counts[b.prog] - b.pos                     # ops from each op to its program's end
    keys, weights = [], []
    inv = 1.0 / np.maximum(b.counts, 1)
    mask = np.uint64(buckets - 1) if buckets & (buckets - 1) == 0 else None
    for n in ngrams:
        at = np.flatnonzero(left >= n)                  # windows inside their program
        h = np.full(len(at), _FNV_OFFSET ^ np.uint64(n), np.uint64)
        for j in range(n):
            h ^= th[at + j]
            h *= _FNV_PRIME
        h ^= h >> np.uint64(32)
        h = h & mask if mask is not None else h % np.uint64(buckets)
        prog = b.prog[at]
        keys.append(prog * buckets + h.view(np.int64))
        weights.append(inv[prog])
    out = np.bincount(np.concatenate(keys), weights=np.concatenate(weights),
                      minlength=b.n * buckets)
    return out.reshape(b.n, buckets)


# ---- constants ----------------------------------------------------------------------------------
def _constant_values(b: _Batch, m: np.ndarray) -> np.ndarray:
    """The values of the constant ops ``m`` (a packed pair: element 0) as float64."""
    base = np.array([VT.NAMES.index(r.base) if r.base else r.id for r in VT.ROWS]
                    + [-1] * 256, np.int64)
    t = base[np.minimum(b.typ[m], len(base) - 1)]
    lo, ex = b.hi[m].astype(np.uint64), b.extra[m]
    is64 = b.kind[m] == CONST64
    v = lo.astype(np.float64)
    u32 = lo.astype(np.uint32)
    for name, val in (("f32", u32.view(np.float32)),
                      ("f16", (u32 & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16)),
                      ("f16x2", (u32 & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16)),
                      ("bf16", (u32 << np.uint32(16)).view(np.float32)),
                      ("bf16x2", (u32 << np.uint32(16)).view(np.float32)),
                      ("s32", u32.view(np.int32)), ("s64", u32.view(np.int32))):
        sel = t == VT.BY_NAME[name].id
        v[sel] = val[sel]
    v[is64] = ex[is64].astype(np.float64)
    for name, view in (("f64", np.float64), ("s64", np.int64)):
        sel = is64 & (t == VT.BY_NAME[name].id)
        v[sel] = ex[sel].view(view)
    return v


def _constants(b: _Batch) -> np.ndarray:
    """(n, 3): the constant count, the mean and the largest log10(|c| + 1e-30)."""
    m = (b.kind == CONST) | (b.kind == CONST64)
    out = np.zeros((b.n, 3))
    if not m.any():
        return out
    with np.errstate(all="ignore"):
        lg = np.log10(np.abs(_constant_values(b, m)) + 1e-30)
    lg = np.nan_to_num(lg, nan=0.0, posinf=math.log10(np.finfo(np.float64).max))
    prog = b.prog[m]
    count = np.bincount(prog, minlength=b.n)
    out[:, 0] = count
    out[:, 1] = np.bincount(prog, weights=lg, minlength=b.n) / np.maximum(count, 1)
    top = np.full(b.n, -np.inf)
    np.maximum.at(top, prog, lg)
    out[:, 2] = np.where(count > 0, top, 0.0)
    return out


def _input_index(b: _Batch, names: Sequence[str]) -> np.ndarray:
    """Each op's input (for INPUT ops; ``len(names)``: no such input, a malformed word): a
    tagged word binds by its name's tag, as the C core binds it."""
    n_in = len(names)
    idx = np.full(len(b.a), n_in, np.int64)
    at = np.flatnonzero(b.kind == INPUT)
    idx[at] = np.minimum(b.a[at], n_in)
    tagged = np.zeros(len(b.a), bool)
    tagged[at] = b.hi[at] != 0
    if tagged.any():
        tags = np.array([input_tag(n) for n in names] + [-1], np.int64)
        mine = tags[idx[tagged]] == b.hi[tagged]
        by_tag = {t: i for i, t in reversed(list(enumerate(tags[:-1].tolist())))}
        found = np.array([by_tag.get(t, n_in) for t in b.hi[tagged].tolist()], np.int64)
        idx[tagged] = np.where(mine, idx[tagged], found)
    return idx


def live_ops(programs: Sequence[Any], genes: ProgramSpace) -> list[np.ndarray]:
    """For each program, a bool array over its ops: True where the op's value reaches an
    output (the ``live`` word feature counts them)::

        keep = live_ops([prog], genes)[0]
        core = [op for op, k in zip(prog, keep) if k]     # computes what prog computes

    (``core`` computes the same when ``dup`` is the program's only meta operation, as in a
    search's programs; a ``swap``, ``drop``, ``rotate`` or ``clear`` pushes no value and is
    never live, but removing one can change what later ops read. A 64-bit constant is one
    op; an encoded program's ops are those ``sp.decode`` gives.)"""
    b, live, _ = _words_of(programs, genes)
    return np.split(live, b.starts[1:].tolist()) if b.n else []


def _words_of(programs: Any, genes: Any) -> tuple[_Batch, np.ndarray, np.ndarray]:
    """The batch, each op's liveness and each program's deepest stack."""
    if isinstance(programs, (str, bytes, np.ndarray)) or not isinstance(programs, Sequence):
        raise LearnError(f"programs: give a sequence of programs (lists of Stack PTX ops), "
                         f"not {type(programs).__name__}")
    ins, outs = _types(genes, "inputs"), _types(genes, "outputs")
    names = [n for n, _ in ins]
    b = _Batch(programs, names)
    b.in_index = _input_index(b, names)
    in_types = np.array([t for _, t in ins] + [-1], np.int64)
    live, depth = live_and_depth(b, in_types, [t for _, t in outs])
    return b, live, depth


# ---- features -----------------------------------------------------------------------------------
def features(programs: Sequence[Any], genes: ProgramSpace, probe: Probe | None = None, *,
             buckets: int = 64, ngrams: Sequence[int] = (1, 2), project: int | None = None,
             seed: int = 0) -> np.ndarray:
    """The features of ``programs`` (lists of Stack PTX ops, or encoded uint64 arrays): a
    float32 array of shape ``(len(programs), d)``, one row a program, the same bits for the
    same arguments (the layout is the module docstring's)::

        F = features(progs, genes)                               # words: (n, buckets + 6)
        F = features(progs, genes, probe, project=16, seed=1)    # + 16 + 1 run columns

    ``genes``: the programs' inputs and outputs (a :class:`ProgramSpace`, e.g. a search's
    ``Genes``); ``probe``: rows for the run features (every input of ``genes``, in float: a
    column is cast to its input's type, f32 or f64); ``buckets`` n-gram columns over the
    n-gram sizes ``ngrams``; ``project=k``: the run outputs through a Gaussian random
    projection (``seed``) to ``k`` columns. A bad argument is a :class:`LearnError` naming it.
    """
    buckets = _int("buckets", buckets, 1, MAX_BUCKETS)
    ngrams = _check_ngrams(ngrams)
    seed = _int("seed", seed, 0, None)
    if project is not None:
        project = _int("project", project, 1, MAX_PROJECT)
        if probe is None:
            raise LearnError(f"project={project}: the projection is of the run outputs; pass "
                             f"probe= (Probe.from_data(X, names)) or project=None")
    if probe is not None and not isinstance(probe, Probe):
        raise LearnError(f"probe: give a numptx.learn.features.Probe (Probe.from_data(X, "
                         f"names)), not {type(probe).__name__}")
    b, live, depth = _words_of(programs, genes)
    names = [n for n, _ in _types(genes, "inputs")]
    th = _token_hashes(b, names, b.in_index)
    runs = None if probe is None else _runs(programs, genes, probe, project, seed)
    out = np.empty((b.n, buckets + len(WORD_COLUMNS) + (0 if runs is None else runs.shape[1])),
                   np.float32)
    out[:, :buckets] = _ngrams(b, th, ngrams, buckets)
    out[:, buckets] = b.counts
    out[:, buckets + 1] = np.bincount(b.prog[live], minlength=b.n)
    out[:, buckets + 2] = depth
    out[:, buckets + 3:buckets + len(WORD_COLUMNS)] = _constants(b)
    if runs is not None:
        out[:, buckets + len(WORD_COLUMNS):] = runs
    return out


def _probe_columns(genes: Any, probe: Probe) -> dict[str, np.ndarray]:
    """The probe's column for each input of ``genes``, as the input's type's dtype."""
    cols = {}
    for name, t in _types(genes, "inputs"):
        if name not in probe.columns:
            raise LearnError(f"probe: no column for the input {name!r} of genes (the probe "
                             f"has {', '.join(map(repr, probe.columns))}); build it with "
                             f"every input: Probe.from_data(X, {list(genes.inputs)!r})")
        if VT.ROWS[t].name not in ("f32", "f64"):
            raise LearnError(f"genes.inputs[{name!r}] is {VT.ROWS[t].name}: run features "
                             f"read f32 and f64 inputs; pass probe=None")
        cols[name] = probe.columns[name].astype(VT.ROWS[t].np, copy=False)
    return cols


def _runs(programs: Sequence[Any], genes: Any, probe: Probe, project: int | None,
          seed: int) -> np.ndarray:
    """The run columns: transformed outputs (or their projection) and the non-finite share."""
    cols = _probe_columns(genes, probe)
    progs = list(programs)
    if not progs:
        width = project if project is not None else len(genes.outputs) * probe.rows
        return np.zeros((0, width + 1))
    try:
        out = sp.interpret(progs, cols, dict(genes.outputs), device="cpu", on_limit="run")
    except NumptxError as e:
        k = getattr(e, "program", None)
        where = f"programs[{k}]: " if k is not None else ""
        raise LearnError(f"{where}the run features: {e}; pass probe=None for words "
                         f"only") from None
    v = np.hstack([np.asarray(out[name], np.float64) for name in genes.outputs])
    bad = ~np.isfinite(v)
    with np.errstate(all="ignore"):
        v = np.where(bad, 0.0, np.sign(v) * np.log1p(np.abs(v)))
    if project is not None:
        v = v @ projection(v.shape[1], project, seed)
    return np.column_stack([v, bad.mean(1)])


def projection(width: int, k: int, seed: int) -> np.ndarray:
    """The run features' projection: a ``(width, k)`` float64 matrix of standard normals
    from ``np.random.default_rng(seed)``, divided by ``sqrt(width)`` (``width``: outputs
    times probe rows)."""
    return np.random.default_rng(seed).standard_normal((width, k)) / math.sqrt(width)
