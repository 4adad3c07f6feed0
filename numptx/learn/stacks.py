"""Live ops and stack depth of a batch of Stack PTX programs, for :mod:`numptx.learn.features`.

The programs' stacks run as the C core runs them in the numptx dialect (native/stack_ptx.h,
``stackptx__stack_run``: one stack per value type, an instruction lacking operands or room
does nothing, the meta operations with their depths from the meta stack, scratch slots, a
top-level ``ret()`` stops, the default :class:`numptx.stack_ptx.Limits`), tracking which op
pushed each value and which values each op read; the outputs pop their stacks in order and
the ops whose values they reach, through reads, are live::

    live, depth = live_and_depth(batch, in_types, out_types)

``batch`` is :mod:`numptx.learn.features`' decoded batch (``kind``, ``typ``, ``a``,
``in_index``, ``prog``, ``counts``, ``starts``: one entry per op or program). Programs of
pushes, scalar instructions, ``dup``/``swap``/``drop``/``clear`` and ``ret()`` (a search's)
run vectorized, op ``i`` of every program at once; a program with any other op (a meta
depth, a slot, a vector operand) runs op by op in Python. The node limit (which the core's
sharing of equal nodes decides) is not modelled.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import stack_ptx as sp
from .. import valuetypes as VT
from ..instructions import TABLE
from ..opkinds import (CONST, CONST64, INPUT, INSTR, KIND_NAMES, LOAD, META, META_CONST, META_OPS,
                       RETURN, STORE)

__all__ = ["live_and_depth"]

_LIMITS = sp.Limits()
_CHUNK = 32768                # programs per block of the vectorized run


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


def _rows(b: Any) -> _Rows:
    a = b.a[b.kind == INSTR]
    used = np.flatnonzero(np.bincount(a)) if len(a) else a
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


def _classes(b: Any, in_types: np.ndarray, rows: _Rows) -> tuple[np.ndarray, np.ndarray]:
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


def _run_one(b: Any, k: int, cls: np.ndarray, typ: np.ndarray, rows: _Rows,
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

    def __init__(self, b: Any, sel: np.ndarray, cls: np.ndarray, typ: np.ndarray,
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
        every, roots = np.arange(len(self.sz)), []
        for t in outs:
            n = self.sz[:, t]
            has = n > 0
            roots.append(self.S[every[has], t, n[has] - 1].astype(np.int64))
            self.sz[has, t] -= 1
        g = np.concatenate(roots) if roots else np.zeros(0, np.int64)
        live[g] = True
        while len(g):                      # each round: the ops the last round's ops read
            d = self.dep[g].ravel()
            d = d[d >= 0]
            g = d[~live[d]]
            live[g] = True


class _Run1(_Run):
    """:class:`_Run` for one stack type (a search's programs): each op as (operands needed,
    values popped, values pushed, values read), one column step for every class."""

    def __init__(self, *args, code: np.ndarray):
        super().__init__(*args)
        self.code = code
        self.flat = self.S.reshape(-1)
        self.sz1 = self.sz[:, 0]

    def forward(self) -> None:
        neg, flat, sz, code, cap = -self.lens, self.flat, self.sz1, self.code, self.cap
        width = int((code >> 24 & 0xFF).max(initial=0))
        cols = np.arange(width)
        rowbase = np.arange(len(sz)) * cap
        for i in range(int(self.lens.max(initial=0))):
            act = int(np.searchsorted(neg, -i, side="left"))
            g = self.starts[:act] + i
            c = code[g]
            z = sz[:act]
            pop, push = c >> 8 & 0xFF, c >> 16 & 0xFF
            ok = (z >= (c & 0xFF)) & (z - pop + push <= cap) & ~self.stopped[:act]
            c *= ok                                 # an op that does not run: a no-op
            pop *= ok
            push *= ok
            base = rowbase[:act] + z
            r = np.flatnonzero(c & 0xFF000000)      # ops reading values
            if len(r):
                read = c[r] >> 24 & 0xFF
                got = flat[np.minimum((base[r] - read)[:, None] + cols, len(flat) - 1)]
                got[cols >= read[:, None]] = -1
                self.dep[g[r], :width] = got
            w = np.flatnonzero(push)
            low = base[w] - pop[w]
            flat[low] = g[w]
            for j in range(1, int(push[w].max(initial=0))):
                m = push[w] > j
                flat[low[m] + j] = g[w][m]
            new = z - pop + push
            if (c >= _SWAP << 32).any():
                self._specials(np.flatnonzero(c >= _SWAP << 32), c >> 32, base, new)
            sz[:act] = new
            np.maximum(self.depth[:act], new, out=self.depth[:act])

    def _specials(self, q, c, base, new) -> None:
        """swap, clear and ret at rows ``q`` (``c``: every row's class)."""
        flat, c = self.flat, c[q]
        at = base[q[c == _SWAP]]
        top = flat[at - 1]
        flat[at - 1] = flat[at - 2]
        flat[at - 2] = top
        new[q[c == _CLEAR]] = 0
        self.stopped[q[c == _RET]] = True


def _steps(b: Any, cls: np.ndarray, d: _Dense) -> np.ndarray:
    """Each op on one stack as one int: operands needed | values popped << 8 | values pushed
    << 16 | values read << 24 | its class << 32."""
    need, pop, push, read = (np.zeros(_SLOW + 1, np.int64) for _ in range(4))
    need[[_DUP, _DROP, _CLEAR]], need[_SWAP] = 1, 2
    push[[_PUSH, _DUP]] = read[_DUP] = pop[_DROP] = 1
    by_cls = need | pop << 8 | push << 16 | read << 24 | np.arange(_SLOW + 1) << 32
    code = by_cls[cls]
    at = np.flatnonzero(cls == _INSTR)
    r = b.row[at]
    n = d.n_ops[r]
    code[at] = n | n << 8 | d.n_res[r] << 16 | n << 24 | _INSTR << 32
    return code


def live_and_depth(b: Any, in_types: np.ndarray, outs: list[int]) -> tuple[np.ndarray, np.ndarray]:
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
    if len(fast) < b.n:
        in_fast = np.zeros(b.n, bool)
        in_fast[fast] = True
        typs = typ[in_fast[b.prog]]
    else:
        typs = typ
    used = {*np.flatnonzero(np.bincount(typs + 1, minlength=1)[1:]).tolist(), *outs}
    for operands, results in rows.ops:
        used.update(t for t, _ in operands + results)
    tmap = np.full(len(VT.ROWS), -1, np.int64)
    tmap[sorted(used)] = np.arange(len(used))
    dense = _Dense(rows, tmap, len(used))
    ctyp = np.where(typ >= 0, tmap[np.maximum(typ, 0)], -1)
    couts = [int(tmap[t]) for t in outs]
    dep = np.full((len(b.kind), 4), -1, np.int64)
    fast = fast[np.argsort(-b.counts[fast], kind="stable")]
    code = _steps(b, cls, dense)
    pushes = np.bincount(b.prog, weights=code >> 16 & 0xFF, minlength=b.n)
    for lo in range(0, len(fast), _CHUNK):
        sel = fast[lo:lo + _CHUNK]
        args = (b, sel, cls, ctyp, dense, len(used), dep, int(pushes[sel].max()))
        run = _Run1(*args, code=code) if len(used) == 1 else _Run(*args)
        run.forward()
        run.backward(couts, live)
        depth[sel] = run.depth
    return live, depth
