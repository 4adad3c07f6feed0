"""Levenberg–Marquardt fitting of programs' constants on the batch interpreter.

What Operon does to every child, on numptx's tapes: each program's float constants
(``operators.constants_of``, less the op macros' own) are the parameters θ of its output
f(x; θ), and a damped Gauss–Newton step lowers the sum of squared residuals over the data.
Under linear scaling (``Evaluator.linear_scaling``) the residual is a + b·f(x; θ) - y with a
and b the closed-form best for the current θ (variable projection: a step never has to find
them).

How it runs, for a batch of programs at once:

1. each program is made into a tape once, with marker constants (4096 + j for constant j,
   exact in f32 and f64), and the tape records that hold a marker are its parameter slots;
2. every round, each program's tape is run 1 + k times (k its parameters): at the trial point
   θ' and at θ' + h_j e_j for each j, the forward differences giving the Jacobian (the step
   h_j ~ sqrt(eps) |θ_j| of the program's float type, taken as the difference the float type
   can represent);
3. a trial that lowers the loss is taken (and the damping λ shrinks ×1/3); else λ grows ×4
   and the step is solved again from the last point. ``steps`` rounds in all.

Every round of a batch runs in C (``native/lm.h`` through :mod:`numptx._program.lm`): one
call per thread for the whole fit, the GIL released. A program's tape is loaded once; its
1 + k runs are lanes of it (the marked slots filled per lane): side by side in one block when
the rows are few, else the trial point in full and each perturbed lane only through the
instructions its parameter reaches (the others' values are the trial's, bit for bit). The k
perturbed lanes run only when the trial is taken and another round follows: a rejected
trial's Jacobian is never read, so skipping it changes no result (a fit costs 0.76-0.79 of
running them every round, ``benchmarks/README.md``; the runs a fit reports are those it
made, which the NumPy reference, running every lane, exceeds). A solve
that fails (a zero pivot) is a zero step: the trial repeats the best point, is not taken, and
λ grows. ``_fit_numpy`` keeps the NumPy rounds (:class:`_Fit`) as the reference the C fit is
tested and measured against (``benchmarks/bench_fit.py``), and for tapes the C fit does not
take (an output neither f32 nor f64).

The losses are computed in float64 from the interpreter's outputs, which are bit for bit
those of the compiled stub; the search then scores the fitted programs with its evaluator,
so a candidate's loss is always the evaluator's. Derivative-free where it must be: a row
without a derivative (min/max, comparisons, approximations) still has forward differences.

::

    from numptx.search.least_squares import fit_least_squares
    programs, losses, rounds = fit_least_squares(evaluator, programs, steps=10,
                                                 protect=(1.4426950408889634,))
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._program.interpret import records, refused, run_cpu, subset, tapes
from .._program.lm import FitArrays, FitOptions, fit_tapes, fits_natively
from .._program.compile import input_words
from .._program.ops import ProgramError
from ..opkinds import CONST
from ..valuetypes import BY_NAME
from ..jit.populations.fitness_interpret import (PEARSON_FLAT, data_columns, flat_share,
                                                 pearson_flat)
from .config import FIT_STEPS_MAX
from .evaluate import Evaluator
from .genes import SearchError, check_int, shown

__all__ = ["fit_least_squares", "ParameterTapes", "STEPS", "CHUNK_VALUES"]

STEPS = 10             #: rounds of Levenberg–Marquardt per fit
_MARK = 4096.0         #: marker constants 4096 + j: exact in f32 and f64 for j < 2**11
_LAMBDA0 = 1e-3
_CONST = 1             # STACKPTX_TAPE_CONST
_OP_CONST = np.uint64(CONST)   # an op word's kind: an inline (32-bit) constant
_F32_ID, _F64_ID = BY_NAME["f32"].id, BY_NAME["f64"].id
#: outputs (variant runs x rows) one batch of a fit holds at once (64 MB of float64)
CHUNK_VALUES = 1 << 23
_ROOT_EPS32 = float(np.sqrt(np.finfo(np.float32).eps))
_ROOT_EPS64 = float(np.sqrt(np.finfo(np.float64).eps))


_F32, _U32, _F64, _U64 = (struct.Struct(f) for f in ("<f", "<I", "<d", "<Q"))


def _values(slots: Any) -> np.ndarray:
    """The float64 values of a program's constants (``operators.constants_of``'s, from the
    ops its ``ConstantSlots`` found: the program is not read twice)."""
    return np.array([_F64.unpack(_U64.pack(slots.ops[i].extra))[0] if wide else
                     _F32.unpack(_U32.pack(word >> 32 & 0xFFFFFFFF))[0]
                     for i, word, wide in slots.at], np.float64)


def _marked_batch(programs: Sequence[Sequence[Any]], site: Any) -> tuple | None:
    """(marked programs, slots, theta) of :class:`ParameterTapes`, read from the batch's words
    in NumPy: what ``ConstantSlots(p)``, ``_values`` and ``marked(_MARK)`` give one program at
    a time, for a batch of op lists whose every op is one word (no 64-bit constant; else
    None, and the per-program path runs). The marked programs are the words a compile at
    ``site`` encodes the op lists to (its own input words), with each f32 constant j's value
    replaced by the marker ``_MARK + j``."""
    from .operators import ConstantSlots
    name_raw = input_words(site)
    try:
        parts = [b"".join([op.raw or name_raw[op.name] for op in p]) for p in programs]
    except (KeyError, AttributeError, TypeError):     # not op lists: the checked path says
        return None
    lens = np.fromiter((len(b) >> 3 for b in parts), np.int64, len(parts))
    if not len(parts) or not np.array_equal(lens, [len(p) for p in programs]):
        return None
    words = np.frombuffer(b"".join(parts), np.uint64)
    starts = np.concatenate([[0], np.cumsum(lens)])
    pos = np.flatnonzero((words & np.uint64(0xFF) == _OP_CONST)
                         & ((words >> np.uint64(8)) & np.uint64(0xFF) == _F32_ID))
    owner = np.searchsorted(starts[1:], pos, "right")
    counts = np.bincount(owner, minlength=len(parts))
    first = np.cumsum(counts) - counts
    j = np.arange(len(pos)) - first[owner]
    bits = (words[pos] >> np.uint64(32)).astype(np.uint32)
    with np.errstate(invalid="ignore"):         # a signalling NaN's bits: quiet, as struct does
        theta = bits.view(np.float32).astype(np.float64)
    mark = (_MARK + j).astype(np.float32).view(np.uint32).astype(np.uint64)
    marked = words.copy()
    marked[pos] = (words[pos] & np.uint64(0xFFFF_FFFF)) | (mark << np.uint64(32))
    cuts = starts[1:-1]
    local, wlist = (pos - starts[owner]).tolist(), words[pos].tolist()
    at_of = np.concatenate([[0], np.cumsum(counts)]).tolist()
    slots = [ConstantSlots.located(list(p), [(i, w, False)   # a copy, as __init__ makes
                                             for i, w in zip(local[a:b], wlist[a:b])])
             for p, a, b in zip(programs, at_of, at_of[1:])]
    return np.split(marked, cuts), slots, np.split(theta, np.cumsum(counts)[:-1])


class ParameterTapes:
    """The tapes of ``programs`` at ``evaluator``'s site with their constants as parameters:
    :meth:`run` gives the outputs over the evaluator's data for any parameter values, with no
    new program or tape. ``ok[i]``: program i runs in the interpreter (one that reads
    ``cand``, or has a row without C semantics, is left out); ``theta[i]``: its constants."""

    def __init__(self, evaluator: Any, programs: Sequence[Sequence[Any]]):
        from .operators import ConstantSlots
        self.ev = evaluator
        batch = _marked_batch(programs, evaluator.site)
        if batch is not None:               # the whole batch's words at once (the common case)
            marked, self.slots, self.theta = batch
        else:
            #: per program, where its constants are (what writes the fitted values back)
            self.slots = [ConstantSlots(p) for p in programs]
            self.theta = [_values(s) for s in self.slots]
            marked = [s.marked(_MARK) if len(t) else list(p)
                      for s, p, t in zip(self.slots, programs, self.theta)]
        n = len(programs)
        self.ok = np.zeros(n, bool)
        try:
            self.tp = tapes(marked, site=evaluator.site)
        except ProgramError:                   # nothing to fit: the search keeps them as they are
            self.tp = None
            return
        bad = set(refused(self.tp))
        cand = list(self.tp.inputs).index("cand")
        prog, at = records(self.tp)
        words = self.tp.words
        reads_cand = prog[((words[at] & 0xFF) == 0) & (words[at + 2] == cand)]
        bad.update(reads_cand.tolist())
        self.ok[:] = True
        self.ok[list(bad)] = False
        self.order, self.n_rows = data_columns(self.tp, evaluator.X, evaluator.names)
        self._slots(prog, at)

    def _slots(self, prog: np.ndarray, at: np.ndarray) -> None:
        """Per record that holds a marker: its word, program, parameter and width."""
        w = self.tp.words
        kind, typ = w[at] & 0xFF, (w[at] >> 8) & 0xFF
        const = at[(kind == _CONST) & ((typ == _F32_ID) | (typ == _F64_ID))]
        owner = prog[(kind == _CONST) & ((typ == _F32_ID) | (typ == _F64_ID))]
        wide = ((w[const] >> 8) & 0xFF) == _F64_ID
        lo, hi = w[const + 2].astype(np.uint64), w[const + 3].astype(np.uint64)
        val = np.where(wide, (lo | (hi << np.uint64(32))).view(np.float64),
                       lo.astype(np.uint32).view(np.float32).astype(np.float64))
        j = val - _MARK
        counts = np.array([len(t) for t in self.theta], np.int64)
        mark = (j == np.round(j)) & (j >= 0) & (j < counts[owner])
        self.slot_word = const[mark] - self.tp.offsets[owner[mark]].astype(np.int64)
        self.slot_prog, self.slot_param = owner[mark], j[mark].astype(np.int64)
        self.slot_wide = wide[mark]

    def variants(self, ks: np.ndarray) -> "Variants":
        """A batch running program ``ks[v]`` as variant v (a program may repeat)."""
        return Variants(self, np.asarray(ks, np.int64))


class Variants:
    """``run(thetas)``: the outputs (variants x rows, float64) of the variants with
    ``thetas[v]`` (padded rows: parameter j of variant v) written into their slots."""

    def __init__(self, pt: ParameterTapes, ks: np.ndarray):
        self.pt, self.ks = pt, ks
        self.tp = subset(pt.tp, ks)
        # the slots of every variant: its own copy of its program's slots, moved to its tape
        start = self.tp.offsets[:-1].astype(np.int64)
        by_prog = np.argsort(pt.slot_prog, kind="stable")
        sp_sorted = pt.slot_prog[by_prog]
        first = np.searchsorted(sp_sorted, ks, "left")
        last = np.searchsorted(sp_sorted, ks, "right")
        per = last - first
        v_of = np.repeat(np.arange(len(ks)), per)
        idx = by_prog[np.repeat(first, per) + (np.arange(per.sum()) - np.repeat(
            np.cumsum(per) - per, per))] if per.sum() else np.zeros(0, np.int64)
        self.word = start[v_of] + pt.slot_word[idx] + 2
        self.v, self.param, self.wide = v_of, pt.slot_param[idx], pt.slot_wide[idx]

    def run(self, thetas: np.ndarray) -> np.ndarray:
        vals = thetas[self.v, self.param]
        w = self.tp.words
        if len(vals):
            f32 = ~self.wide
            w[self.word[f32]] = vals[f32].astype(np.float32).view(np.uint32)
            bits = vals[self.wide].view(np.uint64)
            w[self.word[self.wide]] = (bits & np.uint64(0xFFFFFFFF)).astype(np.uint32)
            w[self.word[self.wide] + 1] = (bits >> np.uint64(32)).astype(np.uint32)
        out = run_cpu(self.tp, self.pt.order, self.pt.n_rows)
        return next(iter(out.values())).astype(np.float64)


def _sse(F: np.ndarray, y: np.ndarray, scaling: bool, positive: bool = False,
         flat: bool = False, share: float = PEARSON_FLAT) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sse, a, b) per row of ``F``: the sum of squared residuals of a + b F - y with a, b
    the least-squares best under scaling (else 0 and 1); non-finite rows: +inf.
    ``positive``: b >= 0 (pearson's loss 1 - r is signed: an anti-correlated f is no better
    than a constant, whose sse n var(y) does not move with f). ``flat``: a constant f
    (no variance) is +inf, as the evaluator's pearson (and scaled) losses score it (``share``:
    the flat rule's, :func:`~numptx.jit.populations.fitness_interpret.flat_share`)."""
    with np.errstate(all="ignore"):
        if scaling:
            fm = F.mean(axis=1, keepdims=True)
            dF = F - fm
            var = (dF * dF).sum(axis=1)
            b = np.where(var > 0, (dF @ (y - y.mean())) / var, 0.0)
            b = np.maximum(b, 0.0) if positive else b
            # a constant f, up to rounding, as the evaluator's reductions judge it
            varies = ~pearson_flat(var / F.shape[1], (F * F).mean(axis=1), share) \
                | (not flat)
            a = y.mean() - b * fm[:, 0]
        else:
            a, b = np.zeros(len(F)), np.ones(len(F))
        r = a[:, None] + b[:, None] * F - y
        sse = (r * r).sum(axis=1)
        if scaling:
            sse = np.where(varies, sse, np.inf)
    return np.where(np.isfinite(sse), sse, np.inf), a, b


def _steps(theta: np.ndarray, hv: np.ndarray, out: np.ndarray, lay: "_Layout", a: np.ndarray,
           b: np.ndarray, y: np.ndarray, lam: np.ndarray, scaling: bool) -> np.ndarray:
    """The next trial point of every program: a damped Gauss–Newton step from ``theta`` (its
    runs ``out`` in the variant layout, their perturbations ``hv``), one batch per count of
    free parameters (no padding)."""
    new = theta.copy()
    with np.errstate(all="ignore"):
        for rows, idx, cols in lay.groups:
            F0 = out[lay.base[rows]]                                     # (G, n)
            Jf = (out[idx] - F0[:, None, :]) / hv[idx][:, :, None]         # (G, k, n)
            Jf = np.where(np.isfinite(Jf), Jf, 0.0) * b[rows, None, None]
            r = a[rows, None] + b[rows, None] * F0 - y                     # (G, n)
            if scaling:      # a and b join the step (their closed form follows at the trial)
                Jf = np.concatenate([Jf, np.ones_like(F0)[:, None, :], F0[:, None, :]], axis=1)
            H = np.einsum("gkn,gjn->gkj", Jf, Jf)
            g = np.einsum("gkn,gn->gk", Jf, r)
            d = np.diagonal(H, axis1=1, axis2=2)
            A = H + (lam[rows, None, None] * np.eye(H.shape[1])) * (d[:, :, None] + 1e-12)
            try:
                delta = -np.linalg.solve(A, g[:, :, None])[:, :, 0]
            except np.linalg.LinAlgError:
                delta = -np.stack([np.linalg.lstsq(A_, g_, rcond=None)[0]
                                   for A_, g_ in zip(A, g)])
            k = cols.shape[1]
            step = np.where(np.isfinite(delta[:, :k]), delta[:, :k], 0.0)
            # only the free parameters move (and are clipped): the others stay exact
            new[rows[:, None], cols] = np.clip(theta[rows[:, None], cols] + step, -1e30, 1e30)
    return new


class _Layout:
    """The variant runs of a fit: program r at its trial point (row ``base[r]``), then once
    per free parameter ``vj[v]`` perturbed; ``groups``: per count k of free parameters, the
    programs (G,), their perturbed rows (G, k) and parameter indices (G, k)."""

    def __init__(self, free: np.ndarray):
        nfree = free.sum(axis=1)
        self.vprog = np.repeat(np.arange(len(free)), 1 + nfree)
        self.vj = np.concatenate([np.concatenate([[-1], np.flatnonzero(f)]) for f in free]
                                 ).astype(np.int64)
        self.base = np.cumsum(1 + nfree) - (1 + nfree)
        self.pert = self.vj >= 0
        self.groups = []
        for k in np.unique(nfree):
            rows = np.flatnonzero(nfree == k)
            idx = self.base[rows][:, None] + 1 + np.arange(k)[None, :]
            self.groups.append((rows, idx, self.vj[idx]))


def _check_args(evaluator: Any, programs: Any, steps: Any, protect: Any,
                scaling: Any) -> tuple[list[list[Any]], np.ndarray]:
    """The programs (lists) and ``protect`` (float64) of :func:`fit_least_squares`'s
    arguments; a bad one: a SearchError naming it."""
    where = "fit_least_squares"
    if not isinstance(evaluator, Evaluator):
        raise SearchError(f"{where}: evaluator={shown(evaluator)}: give a "
                          f"numptx.search.evaluate.Evaluator (its data and loss)")
    if isinstance(programs, (str, bytes)) or not isinstance(programs, Sequence):
        raise SearchError(f"{where}: programs={shown(programs)}: give a list of programs "
                          f"(lists of Stack PTX ops)")
    check_int("steps", steps, 0, FIT_STEPS_MAX, "rounds of Levenberg-Marquardt")
    try:
        prot = np.asarray(protect, np.float64)
    except (TypeError, ValueError):
        prot = None
    if prot is None or prot.ndim != 1:
        raise SearchError(f"{where}: protect={shown(protect)}: give a sequence of the "
                          f"constant values that are not fitted")
    if scaling is not None and not isinstance(scaling, (bool, np.bool_)):
        raise SearchError(f"{where}: scaling={shown(scaling)}: give True, False or None "
                          f"(the evaluator's)")
    out = []
    for k, p in enumerate(programs):
        if isinstance(p, (str, bytes)) or not isinstance(p, Sequence):
            raise SearchError(f"{where}: programs[{k}]={shown(p)}: a program is a list of "
                              f"Stack PTX ops")
        out.append(list(p))
    return out, prot


def _payloads(theta: np.ndarray, wide: np.ndarray, keep: np.ndarray) -> list:
    """Each value's bits in its constant's type (an f32's 32, an f64's 64; one conversion for
    a batch), or None where the constant stays as it is (``keep``, or not finite in its
    type): what :meth:`ConstantSlots.written` takes."""
    with np.errstate(over="ignore", invalid="ignore"):
        f32 = theta.astype(np.float32)
    bits = np.where(wide, theta.view(np.uint64), f32.view(np.uint32).astype(np.uint64))
    ok = ~keep & np.where(wide, np.isfinite(theta), np.isfinite(f32))
    return [b if o else None for b, o in zip(bits.tolist(), ok.tolist())]


def _written_back(pt: ParameterTapes, i: int, values: np.ndarray, free: np.ndarray) -> list:
    """Program ``i`` with its free constants set to ``values``; the others (protected,
    non-finite) are its own ops, exactly."""
    slots = pt.slots[i]
    wide = np.array([w for _, _, w in slots.at], bool)
    return slots.written(_payloads(np.asarray(values, np.float64), wide, ~np.asarray(free)))


def fit_least_squares(evaluator: Any, programs: Sequence[Sequence[Any]], *,
                      steps: int = STEPS, protect: Sequence[float] = (),
                      scaling: bool | None = None) -> tuple[list[list[Any]], np.ndarray, int]:
    """Fit the constants of ``programs`` by Levenberg–Marquardt (module documentation) on
    ``evaluator``'s data (an :class:`~numptx.search.evaluate.Evaluator`; the C interpreter
    runs the programs whatever the evaluator's device). ``scaling``: whether the residual is
    a + b·f - y (default: the evaluator's ``linear_scaling``, or its loss is pearson's,
    which is scale-free; under pearson b >= 0). Constants equal to a value in ``protect``,
    and non-finite ones, stay as they are; each constant is stepped and rounded in its own
    float type (an f32 constant of an f64 search too). Memory is bounded whatever the batch:
    each thread of the C fit holds one program's runs at a time (about (3 k + 5) x rows
    float64 for k free constants, plus the interpreter's blocks), and fewer threads run when
    their workspaces would pass ``numptx._program.lm.WORKSPACE_BUDGET``; the NumPy
    reference holds at most :data:`CHUNK_VALUES` outputs at once. Returns the programs with
    the constants found (unchanged where nothing better was found, or the program cannot be
    interpreted), their float64 sums of squared residuals (+inf where not fitted), and the
    variant runs made (the evaluations a fit cost). Bad arguments: a SearchError."""
    return _fit(evaluator, programs, steps, protect, scaling, native=True)


def _fit_numpy(evaluator: Any, programs: Sequence[Sequence[Any]], *, steps: int = STEPS,
               protect: Sequence[float] = (), scaling: bool | None = None
               ) -> tuple[list[list[Any]], np.ndarray, int]:
    """:func:`fit_least_squares` by the NumPy rounds (:class:`_Fit`): the reference the C fit
    is tested and measured against (tests/test_search_lm_native.py, benchmarks/bench_fit.py),
    and the path of tapes the C fit does not take (an output neither f32 nor f64)."""
    return _fit(evaluator, programs, steps, protect, scaling, native=False)


def _fit(evaluator: Any, programs: Any, steps: Any, protect: Any, scaling: Any,
         native: bool) -> tuple[list[list[Any]], np.ndarray, int]:
    programs, prot = _check_args(evaluator, programs, steps, protect, scaling)
    pt = ParameterTapes(evaluator, programs)
    n = len(programs)
    sse_out = np.full(n, np.inf)
    # one isin over every program's constants (a call a program cost more than the fit's C)
    every = np.concatenate(pt.theta) if pt.theta else np.zeros(0)
    free_all = np.isfinite(every) & ~np.isin(every, prot)
    frees = np.split(free_all, np.cumsum([len(t) for t in pt.theta])[:-1]) if n else []
    todo = [i for i in range(n) if pt.ok[i] and frees[i].any()]
    if not todo or steps < 1:
        return programs, sse_out, 0
    scaled = (bool(evaluator.linear_scaling) or evaluator.loss == "pearson"
              if scaling is None else bool(scaling))
    if native and fits_natively(pt.tp, pt.n_rows):
        return programs, sse_out, _fit_native(pt, evaluator, frees, steps, scaled, todo,
                                               programs, sse_out)
    fit = _Fit(pt, evaluator, frees, steps, scaled)
    runs, chunk, held = 0, [], 0
    for i in todo + [-1]:
        size = (1 + int(frees[i].sum())) * max(1, pt.n_rows) if i >= 0 else 0
        if chunk and (i < 0 or held + size > CHUNK_VALUES):
            runs += fit.run(chunk, programs, sse_out)
            chunk, held = [], 0
        chunk.append(i)
        held += size
    return programs, sse_out, runs


def _fit_native(pt: ParameterTapes, evaluator: Any, frees: list, steps: int, scaling: bool,
                todo: list[int], programs: list, sse_out: np.ndarray) -> int:
    """Every round of the fit of ``todo`` in C (native/lm.h, through numptx._program.lm):
    writes the programs and sums as :meth:`_Fit.run` does; returns the runs made."""
    ks = np.asarray(todo, np.int64)
    counts = np.array([len(pt.theta[i]) for i in todo], np.int64)
    param_off = np.concatenate([[0], np.cumsum(counts)]).astype(np.uint32)
    by_prog = np.argsort(pt.slot_prog, kind="stable")
    sp_sorted = pt.slot_prog[by_prog]
    first = np.searchsorted(sp_sorted, ks, "left")
    per = np.searchsorted(sp_sorted, ks, "right") - first
    idx = by_prog[np.repeat(first, per) + (np.arange(per.sum()) - np.repeat(
        np.cumsum(per) - per, per))] if per.sum() else np.zeros(0, np.int64)
    arrays = FitArrays(
        param_off=param_off,
        theta=np.concatenate([pt.theta[i] for i in todo]).astype(np.float64),
        free=np.concatenate([frees[i] for i in todo]).astype(np.uint8),
        wide=np.concatenate([[w for _, _, w in pt.slots[i].at] for i in todo]).astype(np.uint8),
        mark_off=np.concatenate([[0], np.cumsum(per)]).astype(np.uint32),
        mark_word=pt.slot_word[idx].astype(np.uint32),
        mark_param=pt.slot_param[idx].astype(np.uint32))
    opt = FitOptions(steps=steps, scaling=scaling, positive=evaluator.loss == "pearson",
                     flat=evaluator.kernel_loss == "pearson", flat_rel=flat_share(evaluator.y.dtype),
                     lambda0=_LAMBDA0, root_eps32=_ROOT_EPS32, root_eps64=_ROOT_EPS64)
    made = np.zeros(len(todo), np.uint64)
    sse = fit_tapes(subset(pt.tp, ks), pt.order, pt.n_rows, evaluator.y, arrays, opt, runs=made)
    before = np.concatenate([pt.theta[i] for i in todo])
    same = (arrays.theta == before) | (np.isnan(arrays.theta) & np.isnan(before))
    moved = np.add.reduceat(~same, param_off[:-1].astype(np.int64)) > 0
    bits = _payloads(arrays.theta, arrays.wide.astype(bool), ~arrays.free.astype(bool))
    at = param_off.tolist()
    for r, (i, m, e) in enumerate(zip(todo, moved.tolist(), np.isfinite(sse).tolist())):
        if m and e:
            programs[i] = pt.slots[i].written(bits[at[r]:at[r + 1]])
        sse_out[i] = sse[r]
    return int(made.sum())


class _Fit:
    """The Levenberg–Marquardt rounds of :func:`fit_least_squares` over one batch of
    programs (``run``: fits them, writes their programs and sums, returns the runs made)."""

    def __init__(self, pt: ParameterTapes, evaluator: Any, frees: list, steps: int,
                 scaling: bool):
        self.pt, self.frees, self.steps, self.scaling = pt, frees, steps, scaling
        self.y = evaluator.y.astype(np.float64)
        self.positive = evaluator.loss == "pearson"
        self.flat = evaluator.kernel_loss == "pearson"   # a constant output: +inf, as scored
        self.share = flat_share(evaluator.y.dtype)

    def run(self, todo: list[int], programs: list, sse_out: np.ndarray) -> int:
        pt, y, scaling = self.pt, self.y, self.scaling
        K, P = max(len(pt.theta[i]) for i in todo), len(todo)
        theta = np.zeros((P, K))
        free, wide = np.zeros((P, K), bool), np.ones((P, K), bool)
        for r, i in enumerate(todo):
            k = len(pt.theta[i])
            theta[r, :k], free[r, :k] = pt.theta[i], self.frees[i]
            wide[r, :k] = [w for _, _, w in pt.slots[i].at]
        lay = _Layout(free)
        var = pt.variants(np.asarray(todo)[lay.vprog])

        def typed(v: np.ndarray) -> np.ndarray:        # each value in its constant's type
            return np.where(wide, v, v.astype(np.float32).astype(np.float64))

        root = np.where(wide, _ROOT_EPS64, _ROOT_EPS32)
        best_sse, best_theta = np.full(P, np.inf), theta.copy()
        best_out, best_hv = np.zeros((len(lay.vprog), pt.n_rows)), np.ones(len(lay.vprog))
        a, b, lam = np.zeros(P), np.ones(P), np.full(P, _LAMBDA0)
        trial = theta
        pert, vprog, vj = lay.pert, lay.vprog, lay.vj
        for _ in range(self.steps):
            with np.errstate(all="ignore"):           # non-finite fixed constants: not stepped
                trial = typed(trial)
                up = typed(trial + root * np.maximum(np.abs(trial), 1e-3))
                hv = np.ones(len(vprog))
                hv[pert] = (up - trial)[vprog[pert], vj[pert]]
            th = trial[vprog]
            th[pert, vj[pert]] += hv[pert]
            out = var.run(th)
            sse, a_t, b_t = _sse(out[lay.base], y, scaling, self.positive, self.flat,
                                   self.share)
            took = sse < best_sse
            best_sse = np.where(took, sse, best_sse)
            best_theta[took] = trial[took]
            vt = took[vprog]
            best_out[vt], best_hv[vt] = out[vt], hv[vt]
            a, b = np.where(took, a_t, a), np.where(took, b_t, b)
            lam = np.where(took, lam / 3.0, lam * 4.0)
            trial = _steps(best_theta, best_hv, best_out, lay, a, b, y, lam, scaling)
        for r, i in enumerate(todo):
            k = len(pt.theta[i])
            if np.isfinite(best_sse[r]) and not np.array_equal(best_theta[r, :k], pt.theta[i],
                                                               equal_nan=True):
                programs[i] = _written_back(pt, i, best_theta[r, :k], free[r, :k])
            sse_out[i] = best_sse[r]
        return self.steps * len(vprog)
