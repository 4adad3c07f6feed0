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
``load``) is read, through instructions and copies, by an output: removing every other op
leaves what the program computes unchanged (:func:`live_ops` gives the ops). ``routine(k)``
is a no-op here (features take no routines). mm-ptx programs (a dialect marker) are refused:
``sp.convert`` them first.
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
from ..opkinds import (CONST, CONST64, INPUT, INSTR, KIND_NAMES, LOAD, META, META_CONST, META_OPS,
                       RETURN, STORE)
from ..stack_ptx import Op
from .errors import LearnError

__all__ = ["Probe", "ProgramSpace", "features", "live_ops", "projection", "WORD_COLUMNS", "MAX_BUCKETS",
           "MAX_NGRAM", "MAX_PROJECT"]

#: the names of the word columns after the n-gram buckets
WORD_COLUMNS = ("length", "live", "depth", "constants", "mean_log10", "max_log10")
MAX_BUCKETS = 1 << 20
MAX_NGRAM = 8
MAX_PROJECT = 4096

_FNV_OFFSET, _FNV_PRIME = np.uint64(0xcbf29ce484222325), np.uint64(0x100000001b3)
_LIMITS = sp.Limits()
_OPS = {Op}
_U64 = struct.Struct("<Q")
_CHUNK = 32768                # programs per block of the vectorized stack run


@runtime_checkable
class ProgramSpace(Protocol):
    """What :func:`features` needs of the genes: the programs' inputs and outputs, each a
    mapping of names to value types in order (``numptx.search.genes.Genes`` has both)."""

    @property
    def inputs(self) -> Mapping[str, str]: ...

    @property
    def outputs(self) -> Mapping[str, str]: ...


# ---- probes -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Probe:
    """Fixed probe rows the run features evaluate programs on: ``columns`` maps each input name
    to a 1-D float32 or float64 array, all of one length, finite::

        probe = Probe.from_data(X, ["x0", "x1"], rows=32, seed=0)
        probe.rows                                    # 32 (fewer when X has fewer rows)
        Probe({"x0": np.float32([0.5, 1.0])})         # by hand
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
    m = b.kind == INSTR
    rows, inv = np.unique(b.a[m], return_inverse=True)
    names_of = np.array([_crc(TABLE[int(r)].name) if r < len(TABLE) else _crc("?")
                         for r in rows.tolist()], np.uint64)
    th[m] = names_of[inv.reshape(-1)] if len(rows) else th[m]
    return th


def _ngrams(b: _Batch, th: np.ndarray, ngrams: tuple[int, ...], buckets: int) -> np.ndarray:
    length = b.counts[b.prog]
    keys = []
    for n in ngrams:
        at = np.flatnonzero(b.pos + n <= length)          # windows inside their program
        h = np.full(len(at), _FNV_OFFSET ^ np.uint64(n), np.uint64)
        for j in range(n):
            h = (h ^ th[at + j]) * _FNV_PRIME
        bucket = ((h ^ (h >> np.uint64(32))) % np.uint64(buckets)).astype(np.int64)
        keys.append(b.prog[at] * buckets + bucket)
    key = np.concatenate(keys)
    inv = 1.0 / np.maximum(b.counts, 1)
    out = np.bincount(key, weights=inv[key // buckets], minlength=b.n * buckets)
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
    idx = np.where(b.a < n_in, b.a, n_in)
    tagged = (b.kind == INPUT) & (b.hi != 0)
    if tagged.any():
        tags = np.array([input_tag(n) for n in names] + [-1], np.int64)
        mine = tags[idx[tagged]] == b.hi[tagged]
        by_tag = {t: i for i, t in reversed(list(enumerate(tags[:-1].tolist())))}
        found = np.array([by_tag.get(t, n_in) for t in b.hi[tagged].tolist()], np.int64)
        idx[tagged] = np.where(mine, idx[tagged], found)
    return idx


# ---- stacks: live ops and depth -----------------------------------------------------------------
# op classes of the vectorized run (_SWAP, _CLEAR, _RET: the specials of _Run1, last); _SLOW:
# a program holding one runs op by op in Python
_NOOP, _PUSH, _DUP, _DROP, _INSTR, _SWAP, _CLEAR, _RET, _SLOW = range(9)     # ORDER: specials last
_META_CLASS = {META_OPS.index("dup"): _DUP, META_OPS.index("swap"): _SWAP,
               META_OPS.index("drop"): _DROP, META_OPS.index("clear"): _CLEAR}


@dataclass
class _Rows:
    """The instruction rows a batch runs: per row (a dense index), its operand and result
    types and widths, as the C core's row cache reads them."""

    index: np.ndarray          # table row -> dense index (-1: not run)
    ops: list                  # dense index -> ((type, width) operands, (type, width) results)
    wide: np.ndarray           # dense index -> an operand or result wider than 1


def _rows(b: _Batch) -> _Rows:
    used = np.unique(b.a[b.kind == INSTR])
    used = used[used < len(TABLE)]
    index = np.full(int(used.max()) + 1 if len(used) else 1, -1, np.int64)
    ops, wide = [], []
    n_types = len(VT.ROWS)
    for r in used.tolist():
        row = TABLE[r]
        o = tuple(zip(row.operand_type_ids, row.operand_widths))
        res = tuple(zip(row.result_type_ids, row.result_widths))
        if any(t >= n_types for t, _ in o + res):
            continue                                   # a row the core refuses: a no-op
        index[r] = len(ops)
        ops.append((o, res))
        wide.append(any(w != 1 for _, w in o + res))
    return _Rows(index, ops, np.array(wide + [False], bool))


def _classes(b: _Batch, in_types: np.ndarray, rows: _Rows) -> tuple[np.ndarray, np.ndarray]:
    """Each op's class and pushed/meta type (-1 where none); sets ``b.row`` (each INSTR's
    dense row, -1 for others and rows the core refuses)."""
    n_types = len(VT.ROWS)
    by_kind = np.full(len(KIND_NAMES) + 1, _NOOP, np.int8)
    by_kind[[INPUT, CONST, CONST64]] = _PUSH
    by_kind[[META_CONST, STORE, LOAD]] = _SLOW
    by_kind[RETURN] = _RET
    kind = np.where((b.kind >= 0) & (b.kind < len(KIND_NAMES)), b.kind, len(KIND_NAMES))
    cls = by_kind[kind]
    typ = np.where(cls == _PUSH, b.typ, -1)
    at = np.flatnonzero(kind == INPUT)
    typ[at] = in_types[b.in_index[at]]                  # -1 for an unknown input
    at = np.flatnonzero(cls == _PUSH)
    cls[at[(typ[at] < 0) | (typ[at] >= n_types)]] = _NOOP
    at = np.flatnonzero(kind == META)
    by_meta = np.full(len(META_OPS) + 1, _SLOW, np.int8)
    for code, k in _META_CLASS.items():
        by_meta[code] = k
    by_meta[-1] = _NOOP
    ok = b.typ[at] < n_types
    cls[at] = np.where(ok, by_meta[np.minimum(b.a[at], len(META_OPS))], _NOOP)
    typ[at] = np.where(ok, b.typ[at], -1)
    row = np.full(len(kind), -1, np.int64)
    at = np.flatnonzero(kind == INSTR)
    a = b.a[at]
    r = np.where(a < len(rows.index), rows.index[np.minimum(a, len(rows.index) - 1)], -1)
    row[at] = r
    cls[at] = np.where(r < 0, _NOOP, np.where(rows.wide[r], _SLOW, _INSTR))
    b.row = row
    return cls, typ


def _meta_one(st: list, op: int, meta: list, g: int, deps: dict) -> None:
    """One META op of the numptx dialect on stack ``st`` (native/stack_ptx.h,
    stackptx__meta): a depth from the meta stack is consumed only by an op that ran."""
    name, n = META_OPS[op], len(st)
    if name in ("dup", "swap", "drop", "clear"):
        if name == "dup" and 0 < n < _LIMITS.stack_capacity:
            deps[g] = (st[-1],)
            st.append(g)
        elif name == "swap" and n >= 2:
            st[-1], st[-2] = st[-2], st[-1]
        elif name == "drop" and n:
            st.pop()
        elif name == "clear":
            st.clear()
        return
    if not meta:
        return
    d = meta[-1]
    if name == "yank_dup":
        if d >= n or n == _LIMITS.stack_capacity:
            return
        deps[g] = (st[n - 1 - d],)
        st.append(g)
    elif name == "swap_with":
        if d >= n:
            return
        st[-1], st[n - 1 - d] = st[n - 1 - d], st[-1]
    elif name == "replace":
        if n < 2 or d >= n - 1:
            return
        st[n - 2 - d] = st.pop()
    elif name == "rotate":
        if d >= n:
            return
        st.append(st.pop(n - 1 - d))
    else:                                               # reverse the top d
        if d > n:
            return
        st[n - d:] = st[n - d:][::-1]
    meta.pop()


def _instr_one(stacks: dict, row: tuple, g: int, deps: dict) -> None:
    """One INSTR (any widths): runs only when every operand is there and the results fit."""
    operands, results = row
    need: dict[int, int] = {}
    for t, w in operands:
        need[t] = need.get(t, 0) + w
    if any(len(stacks.get(t, ())) < k for t, k in need.items()):
        return
    push: dict[int, int] = {}
    for t, w in results:
        push[t] = push.get(t, 0) + w
    if any(len(stacks.get(t, ())) - need.get(t, 0) + k > _LIMITS.stack_capacity
           for t, k in push.items()):
        return
    read: list[int] = []
    for t, w in reversed(operands):
        st = stacks[t]
        read.extend(st[len(st) - w:])
        del st[len(st) - w:]
    deps[g] = tuple(read)
    for t, w in results:
        stacks.setdefault(t, []).extend([g] * w)


def _run_one(b: _Batch, k: int, cls: np.ndarray, typ: np.ndarray, rows: _Rows,
             outs: list[int], live: np.ndarray) -> int:
    """Program ``k`` op by op (any op); marks its live ops, returns its deepest stack."""
    stacks: dict[int, list[int]] = {}
    meta: list[int] = []
    slots: list = [None] * _LIMITS.n_slots
    deps: dict[int, tuple] = {}
    depth, s0 = 0, int(b.starts[k])
    for g in range(s0, s0 + min(int(b.counts[k]), _LIMITS.max_steps)):
        c, kind, a, t = int(cls[g]), int(b.kind[g]), int(b.a[g]), int(b.typ[g])
        if c == _RET:
            break
        if c == _PUSH:
            st = stacks.setdefault(int(typ[g]), [])
            if len(st) < _LIMITS.stack_capacity:
                st.append(g)
        elif c == _INSTR or (c == _SLOW and kind == INSTR):
            _instr_one(stacks, rows.ops[int(b.row[g])], g, deps)
        elif kind == META_CONST:
            if len(meta) < _LIMITS.meta_capacity:
                meta.append(a)
        elif kind == META and c != _NOOP:
            _meta_one(stacks.setdefault(t, []), a, meta, g, deps)
        elif kind == STORE and t < len(VT.ROWS) and a < len(slots) and stacks.get(t):
            slots[a] = (stacks[t].pop(), t)
        elif kind == LOAD and t < len(VT.ROWS) and a < len(slots) and slots[a] is not None \
                and slots[a][1] == t and len(stacks.get(t, ())) < _LIMITS.stack_capacity:
            deps[g] = (slots[a][0],)
            stacks.setdefault(t, []).append(g)
        depth = max(depth, max(map(len, stacks.values()), default=0))
    todo = [stacks[t].pop() for t in outs if stacks.get(t)]
    while todo:
        v = todo.pop()
        if not live[v]:
            live[v] = True
            todo.extend(deps.get(v, ()))
    return depth


class _Dense:
    """The rows of :class:`_Rows` as arrays over compact type indices, for the vectorized run:
    operand j's type and its depth below the top of its stack, result j's type and its
    place above the popped stack, the operands needed and results pushed per type."""

    def __init__(self, rows: _Rows, tmap: np.ndarray, n_t: int):
        n = len(rows.ops) + 1
        self.n_ops, self.n_res = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.ot, self.dt = np.zeros((n, 4), np.int64), np.zeros((n, 4), np.int64)
        self.rt, self.rr = np.zeros((n, 4), np.int64), np.zeros((n, 4), np.int64)
        self.need, self.push = np.zeros((n, n_t), np.int64), np.zeros((n, n_t), np.int64)
        for r, (operands, results) in enumerate(rows.ops):
            if rows.wide[r]:
                continue
            ts = [int(tmap[t]) for t, _ in operands]
            self.n_ops[r] = len(ts)
            for j, t in enumerate(ts):
                self.ot[r, j], self.dt[r, j] = t, ts[j + 1:].count(t)
                self.need[r, t] += 1
            ts = [int(tmap[t]) for t, _ in results]
            self.n_res[r] = len(ts)
            for j, t in enumerate(ts):
                self.rt[r, j], self.rr[r, j] = t, ts[:j].count(t)
                self.push[r, t] += 1


class _Run:
    """The stacks of a block of programs (``sel``, longest first) run column by column: op
    ``i`` of every program at once. ``S[p, t, k]`` is the op that pushed the value at depth
    ``k`` of program p's stack t; ``dep[g]`` the ops whose values op g read."""

    def __init__(self, b: _Batch, sel: np.ndarray, cls: np.ndarray, typ: np.ndarray,
                 dense: _Dense, n_t: int, dep: np.ndarray, pushes: int):
        m = len(sel)
        self.b, self.cls, self.typ, self.dense, self.dep = b, cls, typ, dense, dep
        self.lens = np.minimum(b.counts[sel], _LIMITS.max_steps)
        self.starts = b.starts[sel]
        # the deepest a stack can get: every value pushed (only values below sz are read)
        self.cap = int(min(_LIMITS.stack_capacity, pushes + 1))
        self.S = np.empty((m, n_t, self.cap), np.int32)
        self.sz = np.zeros((m, n_t), np.int64)
        self.depth = np.zeros(m, np.int64)
        self.stopped = np.zeros(m, bool)

    def forward(self) -> None:
        handlers = {_PUSH: self._push, _DUP: self._dup, _SWAP: self._swap, _DROP: self._drop,
                    _CLEAR: self._clear, _INSTR: self._instr, _RET: self._ret}
        neg = -self.lens
        for i in range(int(self.lens.max(initial=0))):
            act = int(np.searchsorted(neg, -i, side="left"))    # programs longer than i
            g = self.starts[:act] + i
            c = self.cls[g]
            c[self.stopped[:act]] = _NOOP
            counts = np.bincount(c, minlength=_SLOW + 1)
            for code, handle in handlers.items():
                if counts[code]:
                    p = np.flatnonzero(c == code)
                    handle(p, g[p])

    def _push(self, p, g) -> None:
        t = self.typ[g]
        n = self.sz[p, t]
        ok = n < self.cap
        p, g, t, n = p[ok], g[ok], t[ok], n[ok]
        self.S[p, t, n] = g
        self.sz[p, t] = n + 1
        self.depth[p] = np.maximum(self.depth[p], n + 1)

    def _dup(self, p, g) -> None:
        t = self.typ[g]
        n = self.sz[p, t]
        ok = (n > 0) & (n < self.cap)
        p, g, t, n = p[ok], g[ok], t[ok], n[ok]
        self.dep[g, 0] = self.S[p, t, n - 1]
        self.S[p, t, n] = g
        self.sz[p, t] = n + 1
        self.depth[p] = np.maximum(self.depth[p], n + 1)

    def _swap(self, p, g) -> None:
        t = self.typ[g]
        n = self.sz[p, t]
        ok = n >= 2
        p, t, n = p[ok], t[ok], n[ok]
        top = self.S[p, t, n - 1]
        self.S[p, t, n - 1] = self.S[p, t, n - 2]
        self.S[p, t, n - 2] = top

    def _drop(self, p, g) -> None:
        t = self.typ[g]
        self.sz[p, t] = np.maximum(self.sz[p, t] - 1, 0)

    def _clear(self, p, g) -> None:
        self.sz[p, self.typ[g]] = 0

    def _ret(self, p, g) -> None:
        self.stopped[p] = True

    def _instr(self, p, g) -> None:
        d = self.dense
        r = self.b.row[g]
        z = self.sz[p]
        ok = (z >= d.need[r]).all(1) & (z - d.need[r] + d.push[r] <= self.cap).all(1)
        if not ok.all():
            p, g, r, z = p[ok], g[ok], r[ok], z[ok]
        for j in range(int(d.n_ops[r].max(initial=0))):
            m = d.n_ops[r] > j
            t = d.ot[r[m], j]
            self.dep[g[m], j] = self.S[p[m], t, z[m, t] - 1 - d.dt[r[m], j]]
        z = z - d.need[r]
        for j in range(int(d.n_res[r].max(initial=0))):
            m = d.n_res[r] > j
            t = d.rt[r[m], j]
            self.S[p[m], t, z[m, t] + d.rr[r[m], j]] = g[m]
        z = z + d.push[r]
        self.sz[p] = z
        self.depth[p] = np.maximum(self.depth[p], z.max(1, initial=0))

    def backward(self, outs: list[int], live: np.ndarray) -> None:
        """Mark the ops whose values reach the outputs (outputs pop their stacks in order)."""
        every = np.arange(len(self.sz))
        for t in outs:
            n = self.sz[:, t]
            has = n > 0
            live[self.S[every[has], t, n[has] - 1]] = True
            self.sz[has, t] -= 1
        neg = -self.lens
        for i in range(int(self.lens.max(initial=0)) - 1, -1, -1):
            act = int(np.searchsorted(neg, -i, side="left"))
            g = self.starts[:act] + i
            g = g[live[g]]
            if len(g):
                d = self.dep[g].ravel()
                live[d[d >= 0]] = True



class _Run1(_Run):
    """:class:`_Run` for one stack type (a search's programs): each op as (operands needed,
    values popped, values pushed, values read), one column step for every class."""

    def __init__(self, *args, steps: tuple):
        super().__init__(*args)
        self.need, self.pop, self.push, self.read = steps
        self.flat = self.S.reshape(-1)
        self.sz1 = self.sz[:, 0]

    def forward(self) -> None:
        neg, flat, sz, cls = -self.lens, self.flat, self.sz1, self.cls
        room = self.cap - self.push + self.pop          # an op runs when need <= z <= room
        width = int(self.read.max(initial=0))
        cols = np.arange(width)
        for i in range(int(self.lens.max(initial=0))):
            act = int(np.searchsorted(neg, -i, side="left"))
            g = self.starts[:act] + i
            z = sz[:act]
            q = np.flatnonzero((z >= self.need[g]) & (z <= room[g]) & ~self.stopped[:act])
            g, z = g[q], z[q]
            base = q * self.cap + z
            read = self.read[g]
            if width:
                at = (base - read)[:, None] + cols
                got = flat[np.minimum(at, len(flat) - 1)]
                got[cols >= read[:, None]] = -1
                self.dep[g, :width] = got
            push, new = self.push[g], z - self.pop[g]
            low = base - self.pop[g]
            for j in range(int(push.max(initial=0))):
                m = push > j
                flat[low[m] + j] = g[m]
            new += push
            c = cls[g]
            if (c >= _SWAP).any():
                self._specials(q, c, base, new)
            sz[q] = new
            self.depth[q] = np.maximum(self.depth[q], new)

    def _specials(self, q, c, base, new) -> None:
        flat = self.flat
        m = c == _SWAP
        top = flat[base[m] - 1]
        flat[base[m] - 1] = flat[base[m] - 2]
        flat[base[m] - 2] = top
        new[c == _CLEAR] = 0
        self.stopped[q[c == _RET]] = True


def _steps(b: _Batch, cls: np.ndarray, d: _Dense) -> tuple[np.ndarray, ...]:
    """Each op's (operands needed, values popped, values pushed, values read) on one stack."""
    need, pop, push, read = (np.zeros((len(_META_CLASS) + 5,), np.int64) for _ in range(4))
    need[[_DUP, _DROP, _CLEAR]], need[_SWAP] = 1, 2
    push[[_PUSH, _DUP]] = read[_DUP] = pop[_DROP] = 1
    need, pop, push, read = need[cls], pop[cls], push[cls], read[cls]
    at = np.flatnonzero(cls == _INSTR)
    r = b.row[at]
    need[at] = pop[at] = read[at] = d.n_ops[r]
    push[at] = d.n_res[r]
    return need, pop, push, read


def _stacks(b: _Batch, in_types: np.ndarray, outs: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(each op is live, each program's deepest stack): programs of pushes, instructions of
    scalar operands, dup/swap/drop/clear and ret run vectorized, the rest op by op."""
    rows = _rows(b)
    cls, typ = _classes(b, in_types, rows)
    live = np.zeros(len(b.kind), bool)
    depth = np.zeros(b.n, np.int64)
    slow = np.zeros(b.n, bool)
    slow[b.prog[cls == _SLOW]] = True
    for k in np.flatnonzero(slow).tolist():
        depth[k] = _run_one(b, k, cls, typ, rows, outs, live)
    fast = np.flatnonzero(~slow & (b.counts > 0))
    if not len(fast):
        return live, depth
    in_fast = np.zeros(b.n, bool)
    in_fast[fast] = True
    used = {*np.unique(typ[in_fast[b.prog] & (typ >= 0)]).tolist(), *outs}
    for operands, results in rows.ops:
        used.update(t for t, _ in operands + results)
    tmap = np.full(len(VT.ROWS), -1, np.int64)
    tmap[sorted(used)] = np.arange(len(used))
    dense = _Dense(rows, tmap, len(used))
    ctyp = np.where(typ >= 0, tmap[np.maximum(typ, 0)], -1)
    couts = [int(tmap[t]) for t in outs]
    dep = np.full((len(b.kind), 4), -1, np.int64)
    fast = fast[np.argsort(-b.counts[fast], kind="stable")]
    steps = _steps(b, cls, dense)
    pushes = np.bincount(b.prog, weights=steps[2], minlength=b.n)
    for lo in range(0, len(fast), _CHUNK):
        sel = fast[lo:lo + _CHUNK]
        args = (b, sel, cls, ctyp, dense, len(used), dep, int(pushes[sel].max()))
        run = _Run1(*args, steps=steps) if len(used) == 1 else _Run(*args)
        run.forward()
        run.backward(couts, live)
        depth[sel] = run.depth
    return live, depth


def live_ops(programs: Sequence[Any], genes: ProgramSpace) -> list[np.ndarray]:
    """For each program, a bool array over its ops: True where the op's value reaches an
    output (the ``live`` word feature counts them)::

        keep = live_ops([prog], genes)[0]
        core = [op for op, k in zip(prog, keep) if k]     # computes what prog computes

    (A 64-bit constant is one op; an encoded program's ops are those ``sp.decode`` gives.)"""
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
    live, depth = _stacks(b, in_types, [t for _, t in outs])
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
    words = np.column_stack([_ngrams(b, th, ngrams, buckets), b.counts,
                             np.bincount(b.prog[live], minlength=b.n), depth, _constants(b)])
    if probe is None:
        return words.astype(np.float32)
    runs = _runs(programs, genes, probe, project, seed)
    return np.hstack([words, runs]).astype(np.float32)


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
