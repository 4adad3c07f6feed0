"""Packed populations: many candidate stubs for one site in one module, picked at run time.

A population is a list of candidates for one site (each anything a stub may be: PTX text, a
Stack PTX program, an ``@nx.ptx_expr`` formula). Packed, they become one stub that jumps on a
*selector*, a u32/s32 input of the site, to candidate ``k``'s code: the whole population is
rendered once, assembled by one nvJitLink run, loaded once and launched once::

    tmpl = nx.CudaTemplate(FIT, entry="fit")           # PTX_IN(U32, cand) at site "f"
    pack = tmpl.pack("f", programs, select="cand")     # one module, one assembly
    len(pack), pack.ptx, pack.cubin, pack.errors
    pack[(blocks, len(pack)), 256](err, X, Y, n)       # every candidate in one launch (GPU)
    packs = tmpl.pack_many("f", programs_10k, select="cand", per_module=512)   # in parallel

The packed stub (PTX ``brx.idx`` over a ``.branchtargets`` table, each candidate in a scope of
its own; measured against a branch tree in benchmarks/bench_populations.py: ptxas assembles the
table sooner, and it costs one indirect branch at run time)::

    {
    .reg .pred %__nx_pk_oob;  .reg .u32 %__nx_pk_i;
    mov.f32 %v_y, 0f00000000;                   out variables read 0 unless a candidate runs
    mov.b32 %__nx_pk_i, %v_cand;
    setp.ge.u32 %__nx_pk_oob, %__nx_pk_i, N;    a selector >= N (or < 0) runs no candidate
    @%__nx_pk_oob bra $__nx_pk_end;
    $__nx_pk_tab: .branchtargets $__nx_pk_0, ...;
    brx.idx %__nx_pk_i, $__nx_pk_tab;
    $__nx_pk_0: { candidate 0 } bra.uni $__nx_pk_end;
    ...
    $__nx_pk_end:
    }

**Selector out of range, failed candidates.** A selector that names no candidate (``>= N``,
or negative for an s32 selector) runs nothing: mod variables keep their values and out
variables are 0, as at a site left empty (``missing="empty"``); the simulator does the same. A
candidate whose stub does not fit the site (it fails to compile for it, or ptxas refuses it)
is left out the same way and listed in ``pack.errors`` (index -> the numptx error); the other
candidates still build. ``errors="raise"`` raises a :class:`BuildError` instead.

**Isolation.** Raw PTX candidates keep the stub contract
(:func:`~numptx.jit.templates.stub_checks.check_stub_rules` with ``packed=True``): no pack mark, label
or register (``__nx_``), no branch to a label the candidate does not define, no directive but
``.reg``, no ``ret``/``exit``/``trap``. One that breaks it fails alone (a ``StubRuleError`` in
``pack.errors``), so the marks above each candidate, which attribute ptxas's errors, cannot be
forged. The packed stub is a :class:`~numptx.site_layout.GeneratedStub`: its run-time constant
table is the only module-scope line, and it travels in ``module_lines``, not in text.
"""
from __future__ import annotations

import itertools
import logging
import operator
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import Executor
from typing import Any

import numpy as np

from ...errors import LinkError, NumptxError
from ...inject import Site
from ..._program import Stub
from ...stack_ptx import Op
from . import runtime_constants as RT
from ..compile.build import build_many
from ..templates.device_tables import write_table
from ..errors import BuildError, summary
from ..compile.farm import WirePack, words_of
from ..numba.numba_site import SIMULATOR
from .pack_kernels import (LABEL, MARK, PER_KERNEL, BuildMode, Layout, LayoutVariant, PackError,
                           PackKernel, PerKernel, check_selector, dispatch_text, layout_target,
                           packed_runs)
from ..compile.resources import CubinInspection
from ..templates.stub_checks import check_reserved
from ..templates.stubs import resolve_stub
from ..targets import Target, TargetVariant

__all__ = ["Population", "Pack", "PackError", "pack", "pack_many", "DEFAULT_PER_MODULE",
           "MAX_CANDIDATES", "PackKernel", "PerKernel", "PER_KERNEL",
           "check_selector", "with_index",
           "dispatch_text"]

log = logging.getLogger(__name__)

#: candidates per module of :func:`pack_many` (benchmarks/bench_populations.py measures it)
DEFAULT_PER_MODULE = 256
#: ptxas's limit on the targets of one indirect branch ("Indirect branch table is too large to
#: encode: ... exceed the maximum of 16380 targets"): the most candidates one pack holds
MAX_CANDIDATES = 16380
_LOG_MSG = re.compile(r"line (\d+); (?:error|fatal)\s*:\s*(.*)")
_MARK_LINE = re.compile(re.escape(MARK) + r"(\d+)\s*$")



class Population:
    """The candidates of one site, as one stub (``stub(site)`` gives the packed text). Each
    candidate is resolved for the site on first use; one that does not fit is kept out and its
    error recorded in ``errors`` (index -> numptx error; indices count from ``offset``)."""

    def __init__(self, candidates: Iterable[Any], select: str, *, offset: int = 0,
                 constants: str = "inline", strict: bool = False):
        self.strict = bool(strict)   # a raw stub that never writes an out variable: fails
        if isinstance(candidates, (str, bytes, Mapping)):
            raise PackError("a population is a list of candidates (stubs), not one "
                            f"{type(candidates).__name__}")
        try:
            self.candidates = list(candidates)
        except TypeError:
            raise PackError(f"a population is a list of candidates, not "
                            f"{type(candidates).__name__}") from None
        if not self.candidates:
            raise PackError("an empty population: give at least one candidate")
        check_not_one_program(candidates, self.candidates)
        if len(self.candidates) > MAX_CANDIDATES:
            raise PackError(f"a pack holds at most {MAX_CANDIDATES} candidates (ptxas's limit on "
                            f"the targets of one indirect branch), got {len(self.candidates)}: "
                            f"use pack_many(..., per_module=...) to split it into modules")
        if not isinstance(select, str) or not select:
            raise PackError(f"select= names the site input that picks the candidate (str), not "
                            f"{select!r}")
        if constants not in ("inline", "runtime"):
            raise PackError(f"constants={constants!r}: use 'inline' (literals in the code) or "
                            f"'runtime' (read from a table set at launch)")
        self.select, self.offset, self.constants = select, offset, constants
        #: candidate (local index) -> its constants' bit patterns, where set_constants set them
        self.values: dict[int, tuple[int, ...]] = {}
        self.errors: dict[int, NumptxError] = {}
        self._texts: dict[tuple, list[str | None]] = {}   # per site signature
        self.last_site: Site | None = None                # the last site resolved for
        self._lock = threading.Lock()
        #: candidate -> declaration lines its packed text lacks (shared registers)
        self._taken: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.candidates)

    def __repr__(self) -> str:
        return f"<Population of {len(self)} at selector {self.select!r}, {len(self.errors)} failed>"

    def fail(self, k: int, error: NumptxError) -> None:
        """Leave candidate ``k`` (local index) out from now on, with ``error`` as the reason."""
        with self._lock:
            self.errors.setdefault(self.offset + k, error)
            for texts in self._texts.values():
                texts[k] = None

    def texts(self, site: Site) -> list[str | None]:
        """Each candidate's PTX text for ``site`` (None: left out)."""
        key = (site.name, site.signature)
        got = self._texts.get(key)
        if got is not None:
            return got
        check_selector(site, self.select)
        out: list[str | None] = []
        failed: dict[int, NumptxError] = {}
        for k, c in enumerate(self.candidates):
            if self.offset + k in self.errors:
                out.append(None)
                continue
            try:
                text = resolve_stub(c, site, strict=self.strict, packed=True)
                check_reserved(text, site.name)   # whatever made it: no mark, no pack label
                out.append(text)
            except NumptxError as e:
                failed[k] = with_index(e, self.offset + k)
                out.append(None)
            except Exception as e:   # noqa: BLE001 - a user object's .stub failed: name the index
                failed[k] = with_index(NumptxError(f"{type(e).__name__}: {e}"), self.offset + k)
                out.append(None)
        with self._lock:
            for k, e in failed.items():
                self.errors.setdefault(self.offset + k, e)
            self.last_site = site
            return self._texts.setdefault(key, out)

    def lifted(self, site: Site) -> list[RT.Lifted | None]:
        """With ``constants="runtime"``: each candidate's text with its literals lifted into
        table loads, slots laid out candidate after candidate (None: left out)."""
        out, base = [], 0
        for t in self.texts(site):
            if t is None:
                out.append(None)
                continue
            x = RT.lift(t, base, RT.table_name(site.name))
            base += len(x.kinds)
            out.append(x)
        return out

    def stub(self, site: Site) -> str:
        """The packed stub for ``site`` (what a template injects)."""
        texts = self.texts(site)
        if all(t is None for t in texts):
            raise BuildError(f"site {site.name!r}: none of the {len(texts)} candidates fits "
                             f"(first: {summary(next(iter(self.errors.values())))})",
                             errors=dict(self.errors), variants=[])
        if self.constants == "runtime":
            lifted = self.lifted(site)
            slots = sum(len(x.kinds) for x in lifted if x is not None)
            return dispatch_text(site, self.select, [x and x.text for x in lifted],
                                 table_slots=slots)
        return dispatch_text(site, self.select, texts)

    def kernel_stubs(self, site: Site, runs: Sequence[tuple[int, int]]) -> list[str]:
        """The packed stub of each run ``(start, stop)`` of candidates (one per kernel of
        ``layout="kernels"``, :mod:`numptx.jit.populations.pack_kernels`); constants in the code."""
        texts = self.texts(site)
        if all(t is None for t in texts):
            self.stub(site)                  # raises: no candidate fits
        stubs, self._taken = packed_runs(site, self.select, texts, self.generated(), runs)
        return stubs

    def generated(self) -> list[bool]:
        """Whether numptx compiled each candidate's text (a Stack PTX program or a compiled
        stub): what :func:`~numptx.jit.populations.pack_kernels.share_registers` may change."""
        return [isinstance(c, (list, tuple, np.ndarray)) or type(c) is Stub
                for c in self.candidates]

    def wire(self, site: Site) -> WirePack | None:
        """The population as a farm sends it (:mod:`numptx.jit.compile.farm`): each candidate as its
        Stack PTX words where it is an encoding, else its resolved text; None with run-time
        constants (the whole rendering travels then)."""
        if self.constants != "inline":
            return None
        items = []
        for c, t, g in zip(self.candidates, self.texts(site), self.generated()):
            b = None if t is None else words_of(c)
            items.append(None if t is None else ("w", b) if b is not None else
                         ("g" if g else "t", str.__str__(t)))
        return WirePack(self.select, self.strict, tuple(items))

    def sim_stub(self, k: int, site: Site) -> Any:
        """What the simulator runs for candidate ``k``: the candidate, or with run-time
        constants its text with the current table values written in."""
        if self.constants != "runtime":
            return self.candidates[k]
        x = RT.lift(self.texts(site)[k] or "", 0)
        return x.with_values(self.values.get(k, x.bits))

    def culprits(self, ptx: str, log_text: str) -> dict[int, list[str]]:
        """The candidates (local index -> what ptxas said of their lines) that the failing
        lines of an nvJitLink log lie in, found from the candidate marks above those lines in
        the rendered ``ptx`` (candidates cannot hold a mark or a pack label: the stub contract
        refuses them). Each message reads ``stub line j: 'text': message``, j counted in the
        candidate's own text (before its literals were lifted, with run-time constants)."""
        lines = ptx.split("\n")   # as ptxas counts lines ("\r", "\u2028"... end none)
        found: dict[int, list[str]] = {}
        seen: set[tuple[int, str]] = set()
        owner = self._owners(lines) if _LOG_MSG.search(log_text) else []
        for m in _LOG_MSG.finditer(log_text):
            at = int(m.group(1)) - 1
            if not 0 <= at < len(lines) or owner[at] is None:
                continue
            k, i = owner[at]
            # the mark, then "{", then the candidate's first line
            j, text = self._own_line(k, at - i - 1, lines[at].strip())
            msg = f"stub line {j}: {text!r}: {m.group(2).strip()}"
            if (k, msg) not in seen:
                seen.add((k, msg))
                found.setdefault(k, []).append(msg)
        return found

    def _owners(self, lines: list[str]) -> list[tuple[int, int] | None]:
        """For each line: (candidate, its mark's line) of the candidate mark nearest above it
        (the line itself included), None past the pack's end or table lines or outside a
        pack. One pass: a walk back per ptxas message was quadratic (8,000 failing lines of one
        candidate took 38 s)."""
        out: list[tuple[int, int] | None] = []
        cur = None
        for i, line in enumerate(lines):
            s = line.lstrip()
            if s.startswith("//"):
                mark = _MARK_LINE.match(s)
                if mark:
                    k = int(mark.group(1))
                    cur = (k, i) if 0 <= k < len(self.candidates) else None
            elif s.startswith(LABEL + "_end:") or s.startswith(LABEL + "_tab:"):
                cur = None
            out.append(cur)
        return out

    def _own_line(self, k: int, j: int, text: str) -> tuple[int, str]:
        """Line ``j`` of candidate ``k``'s packed text as a line of its own text: with run-time
        constants the packed text starts with a declaration and a load per constant."""
        site = self.last_site
        if self._taken.get(k) and j >= 2:       # its declarations went to the pack's top
            n = self._taken[k]
            own = (self.texts(site)[k] or "").split("\n") if site is not None else []
            return (j + n, own[j + n - 1].strip()) if j + n <= len(own) else (j, text)
        if self.constants != "runtime" or site is None:
            return j, text
        own = self.texts(site)[k]
        if own is None:
            return j, text
        n = len(RT.lift(own, 0).kinds)
        j -= 2 * n if n else 0
        lines = own.split("\n")
        return (j, lines[j - 1].strip()) if 0 < j <= len(lines) else (j + 2 * n, text)


def _in_order(values: Any) -> list:
    """The list form of :meth:`Pack.set_constants`: one entry per candidate, in order."""
    if isinstance(values, AbstractSet):
        raise RT.ConstantsError("set_constants: a set has no order: give a mapping index -> "
                                "constants, or a sequence with one entry per candidate")
    try:
        return list(values)
    except TypeError:
        raise RT.ConstantsError(f"set_constants: give a mapping index -> constants, or a "
                                f"sequence with one entry per candidate (None keeps one), not "
                                f"{type(values).__name__}") from None


def check_not_one_program(given: Any, candidates: list) -> None:
    """Refuse one Stack PTX program (a list of ops, or its uint64 encoding) given where a
    population (a list of candidates) is expected: each op would be taken as a candidate."""
    ops = all(isinstance(c, Op) for c in candidates)
    words = isinstance(given, np.ndarray) and given.ndim == 1 and given.dtype.kind in "ui"
    if ops or words:
        what = "a list of ops" if ops else "its uint64 encoding"
        raise PackError(f"the population is one Stack PTX program ({what}, {len(candidates)} "
                        f"{'ops' if ops else 'words'}), not a list of candidates: pass [prog] "
                        f"for a population of one, or a list of programs")


def with_index(e: NumptxError, index: int) -> NumptxError:
    """``e`` (a copy: one exception may be raised for several candidates) with the candidate
    index in front of its message and as ``.candidate``; an error whose text does not come
    from its args (e.g. a TraceError's ``reason``) is wrapped in a :class:`PackError`."""
    # a copy made by hand: copy.copy goes through __reduce_ex__, which libraries patch (tblib,
    # installed by dask's distributed, makes it share the instance dict)
    dup = type(e).__new__(type(e))
    dup.__dict__.update(e.__dict__)
    dup.args, dup.__cause__ = e.args, e.__cause__
    e = dup
    e.candidate = index
    if e.args and isinstance(e.args[0], str) and not e.args[0].startswith("candidate "):
        e.args = (f"candidate {index}: {e.args[0]}",) + tuple(e.args[1:])
    if not str(e).startswith(f"candidate {index}:"):
        wrapped = PackError(f"candidate {index}: {e}")
        wrapped.candidate, wrapped.__cause__ = index, e
        return wrapped
    return e


class Pack(CubinInspection):
    """A built population: candidate ``k`` runs where the selector reads ``k``. ``len(pack)``,
    ``ptx``, ``cubin`` (one assembly; a candidate ptxas refuses is left out and the rest
    assembled again), ``errors`` (global index -> error; read it after ``cubin``), ``ok``,
    ``offset`` (the global index of candidate 0, for :func:`pack_many`'s modules),
    ``variant``, ``empty`` (no candidate works: nothing to build or launch), ``entry``,
    ``resources`` and ``sass()`` (the module's one kernel, :mod:`numptx.jit.compile.resources`), and
    ``pack[grid, block](*args)`` launches all candidates at once."""

    def __init__(self, make: Callable[[Population], TargetVariant], population: Population, *,
                 errors: str = "keep", site: str = ""):
        self._make = make
        self.population = population
        self.errors_mode = errors
        self._lock = threading.Lock()
        self._site_name = site
        self._table_version = 0             # bumped by set_constants
        self._none_fit: BuildError | None = None
        self.variant: TargetVariant | None = self._new_variant()

    def _new_variant(self) -> TargetVariant | None:
        try:
            return self._make(self.population)
        except BuildError as e:             # Population.stub: no candidate fits
            if e.errors != self.population.errors:
                raise
            self._none_fit = e
            return None

    @property
    def empty(self) -> bool:
        """No candidate works (each is in ``errors``): nothing to build or launch."""
        return self.variant is None

    def _require(self) -> TargetVariant:
        if self.variant is None:
            raise self._none_fit.with_traceback(None)
        return self.variant

    def __len__(self) -> int:
        return len(self.population)

    @property
    def offset(self) -> int:
        return self.population.offset

    @property
    def select(self) -> str:
        return self.population.select

    @property
    def candidates(self) -> list:
        return self.population.candidates

    @property
    def errors(self) -> dict[int, NumptxError]:
        return self.population.errors

    @property
    def ok(self) -> list[int]:
        """Global indices of the candidates that run."""
        return [self.offset + k for k in range(len(self)) if self.offset + k not in self.errors]

    @property
    def ptx(self) -> str:
        return self._require().ptx

    @property
    def key(self) -> str:
        return self._require().key

    @property
    def entry(self) -> str:
        """The name of the module's kernel."""
        return self._require().entry

    @property
    def kernels(self) -> tuple[PackKernel, ...]:
        """The module's kernels and the candidates each runs (one with ``layout="function"``;
        :mod:`numptx.jit.populations.pack_kernels`)."""
        v = self._require()
        if isinstance(v, LayoutVariant):
            return v.kernels
        return (PackKernel(0, v.entry, 0, len(self)),)

    def kernel_of(self, index: int) -> tuple[PackKernel, int]:
        """Global candidate ``index`` -> (its kernel, the selector value that runs it there).

        >>> pack.kernel_of(pack.offset + 300)          # doctest: +SKIP
        (PackKernel(index=2, entry='fit__nx_k2', start=256, stop=384), 44)
        """
        k = operator.index(index) - self.offset
        if not 0 <= k < len(self):
            raise PackError(f"candidate {index}: not in this pack (candidates {self.offset}.."
                            f"{self.offset + len(self) - 1})", site=self._site_name)
        kernel = next(x for x in self.kernels if x.start <= k < x.stop)
        return kernel, k - kernel.start

    @property
    def cubin(self) -> bytes:
        """The module (of a numba kernel's default signature), failed candidates left out."""
        with self._lock:
            cubin = self._built(lambda v: v)
        self._report()
        return cubin

    def _built(self, pick: Callable[[TargetVariant], TargetVariant]) -> bytes:
        """Assemble ``pick(variant)`` (the variant, or a numba kernel's for one signature),
        leaving out the candidates ptxas refuses; its cubin."""
        while True:
            v = pick(self._require())
            try:
                return v.cubin
            except LinkError as e:
                if not self._drop(e, v.ptx):
                    raise

    def _drop(self, e: LinkError, ptx: str) -> bool:
        """Leave out the candidates a link error blames, for a new variant; False if it
        blames none that still run (the error is not theirs)."""
        blamed = self.population.culprits(ptx, e.log)
        bad = {k: m for k, m in blamed.items() if self.offset + k not in self.errors}
        if not bad:
            return False
        site = e.site
        for k, msgs in sorted(bad.items()):
            err = LinkError(f"invalid stub for site {site!r}: " + "; ".join(msgs[:3]),
                            log=e.log, options=e.options, site=site,
                            stub_line=msgs[0].split(": ", 2)[1].strip("'"))
            self.population.fail(k, with_index(err, self.offset + k))
        log.info("numptx: pack at offset %d: %d candidate(s) refused by ptxas, assembling the "
                 "rest", self.offset, len(bad))
        self.variant = self._new_variant()       # its stub text leaves them out
        return True

    def _report(self) -> None:
        if self.errors and self.errors_mode == "raise":
            raise failed_candidates(self.errors, len(self), [self])

    # -- run-time constants (numptx.jit.populations.runtime_constants) ----------------------------------------
    def _site(self) -> Site:
        if not SIMULATOR:
            try:
                return self._require().sites[self._site_name]
            except BuildError:
                raise
            except NumptxError:             # a numba kernel with no signature compiled yet
                pass
        # no template to read: the site as the population last resolved it
        site = self.population.last_site
        if site is None:
            raise PackError("the pack's site variables are not known yet: launch it once (or "
                            "compile a signature of the kernel) before reading or setting "
                            "constants")
        return site

    @property
    def constants(self) -> list[np.ndarray | None]:
        """Each candidate's constants now (float64, in text order; None: left out). Only with
        ``constants="runtime"``."""
        self._need_runtime("constants")
        pop = self.population
        return [None if x is None else RT.from_bits(x.kinds, pop.values.get(k, x.bits))
                for k, x in enumerate(pop.lifted(self._site()))]

    def set_constants(self, values: Mapping[int, Any] | Sequence[Any]) -> None:
        """New constants, by global candidate index (a mapping) or for every candidate in order
        (a sequence; None keeps a candidate's): each an array of that candidate's constant
        count. The next launch copies the table in; nothing is assembled again."""
        self._need_runtime("set_constants")
        lifted = self.population.lifted(self._site())
        if isinstance(values, Mapping):
            items = []
            for i, v in values.items():
                try:
                    if isinstance(i, (bool, np.bool_)):
                        raise TypeError
                    items.append((operator.index(i) - self.offset, v))
                except TypeError:
                    raise RT.ConstantsError(f"set_constants: candidate indices are ints, not "
                                            f"{i!r}") from None
                if v is None:
                    raise RT.ConstantsError(f"candidate {i}: give its constants (None keeps a "
                                            f"candidate's only in the list form)", candidate=i)
        else:
            values = _in_order(values)
            if len(values) != len(self):
                raise RT.ConstantsError(f"set_constants: {len(values)} entries for a pack of "
                                        f"{len(self)} candidates")
            items = [(k, v) for k, v in enumerate(values) if v is not None]
        new = {}
        for k, v in items:
            if not 0 <= k < len(self):
                raise RT.ConstantsError(f"candidate {k + self.offset}: not in this pack "
                                        f"(candidates {self.offset}..{self.offset + len(self) - 1})",
                                        candidate=k + self.offset)
            x = lifted[k]
            if x is None:
                raise RT.ConstantsError(f"candidate {k + self.offset}: it failed to build "
                                        f"({summary(self.errors[k + self.offset])})",
                                        candidate=k + self.offset)
            new[k] = RT.to_bits(k + self.offset, x.kinds, v)
        self.population.values.update(new)
        self._table_version += 1

    def _slots(self) -> int:
        return sum(len(x.kinds) for x in self.population.lifted(self._site()) if x is not None)

    def table(self) -> bytes:
        """The constant table as the module holds it after the next launch."""
        self._need_runtime("table")
        return RT.table_bytes(self.population.lifted(self._site()), self.population.values)

    def _need_runtime(self, what: str) -> None:
        if self.population.constants != "runtime":
            raise PackError(f"pack.{what}: the pack was built with its constants in the code; "
                            f"pack(..., constants='runtime') reads them from a table")

    def __getitem__(self, config):
        v = self._require()
        if SIMULATOR:         # the simulator builds nothing: it checks each candidate alone
            return v[config]
        return _PackLaunch(self, config)

    def __repr__(self) -> str:
        return (f"<Pack of {len(self)} at offset {self.offset}, selector {self.select!r}, "
                f"{len(self.errors)} failed>")


class _PackLaunch:
    """``pack[config](*args)``: the module for these arguments built with failed candidates
    left out (a numba kernel's for their signature), the run-time constant table copied in
    where it changed, then the launch."""

    def __init__(self, pack: Pack, config):
        self.pack, self.config = pack, config

    def __call__(self, *args: Any) -> None:
        p = self.pack
        with p._lock:
            # a numba kernel's variant: the build of these arguments' types; a template's: itself
            p._built(lambda v: v.specialize(*args))
        p._report()
        v = p._require()
        if p.population.constants == "runtime" and p._slots():
            write_table(v, args, _TABLE_TOKENS.setdefault(p, next(_TOKENS)), p._table_version,
                        p.table, RT.table_name(p._site_name))
        if isinstance(v, LayoutVariant):
            return v[self.config](*args)
        one = p.kernels[0]                      # one function: PerKernel values for it
        config = self.config.value(one) if isinstance(self.config, PerKernel) else self.config
        return v[config](*(a.value(one) if isinstance(a, PerKernel) else a for a in args))


#: one token per pack with run-time constants: the loaded module records whose table it holds
_TABLE_TOKENS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_TOKENS = itertools.count(1)


def _check_errors_mode(errors: str) -> None:
    if errors not in ("keep", "raise"):
        raise PackError(f"errors={errors!r}: use 'keep' (failed candidates listed in "
                        f"pack.errors) or 'raise'")


def pack(target: Target, site: str, candidates: Iterable[Any], *, select: str,
         errors: str = "keep", missing: str = "error", stubs: Mapping[str, Any] | None = None,
         offset: int = 0, constants: str = "inline", layout: Layout = "function",
         per_kernel: int = PER_KERNEL, build: BuildMode = "full") -> Pack:
    """:meth:`Template.pack <numptx.jit.templates.template.Template.pack>` of ``target`` (a template or a
    numba kernel: a :class:`~numptx.jit.targets.Target`; an object that lacks a member of one
    is a :class:`PackError` naming it). ``layout``, ``per_kernel`` and
    ``build``: :mod:`numptx.jit.populations.pack_kernels`."""
    _check_errors_mode(errors)
    shaped = layout_target(target, site, layout, per_kernel, build, constants)
    if not isinstance(site, str):
        raise PackError(f"pack: the site is named by a str, not {type(site).__name__}")
    other = dict(stubs or {})
    if site in other:
        raise PackError(f"pack: site {site!r} gets the population; give other sites' stubs only",
                        site=site)
    pop = Population(candidates, select, offset=offset, constants=constants,
                     strict=target.strict)

    def make(p: Population) -> TargetVariant:
        return (shaped or target).inject({**other, site: p}, missing=missing)
    return Pack(make, pop, errors=errors, site=site)


def pack_many(target: Target, site: str, candidates: Iterable[Any], *, select: str,
              per_module: int = DEFAULT_PER_MODULE, executor: Executor | None = None,
              progress: bool | Callable[[int, int], Any] = False, errors: str = "keep",
              missing: str = "error", max_workers: int | None = None,
              stubs: Mapping[str, Any] | None = None, constants: str = "inline",
              layout: Layout = "function", per_kernel: int = PER_KERNEL,
              build: BuildMode = "full") -> list[Pack]:
    """:meth:`Template.pack_many <numptx.jit.templates.template.Template.pack_many>` of ``target``."""
    _check_errors_mode(errors)
    shaped = layout_target(target, site, layout, per_kernel, build, constants)
    if isinstance(per_module, bool) or not isinstance(per_module, int) or \
            not 1 <= per_module <= MAX_CANDIDATES:
        raise PackError(f"per_module={per_module!r}: an int from 1 to {MAX_CANDIDATES} (ptxas's "
                        f"limit on the targets of one indirect branch)")
    if isinstance(candidates, (str, bytes, Mapping)):
        raise PackError("a population is a list of candidates (stubs), not one "
                        f"{type(candidates).__name__}")
    cands = list(candidates)
    if not cands:
        raise PackError("an empty population: give at least one candidate")
    check_not_one_program(candidates, cands)
    packs = [pack(target, site, cands[i:i + per_module], select=select, missing=missing,
                  stubs=stubs, offset=i, constants=constants, layout=layout,
                  per_kernel=per_kernel, build=build)
             for i in range(0, len(cands), per_module)]
    todo = [i for i, p in enumerate(packs) if not p.empty]
    while todo:
        batch = [{**(stubs or {}), site: packs[i].population} for i in todo]
        kw = dict(executor=executor, progress=progress, errors="return", missing=missing,
                  max_workers=max_workers)
        built = (build_many(shaped, batch, **kw) if shaped is not None
                 else target.build_many(batch, **kw))
        again = []
        for i, stub_map, got in zip(todo, batch, built):
            p = packs[i]
            if isinstance(got, LinkError):
                builder = shaped or target.build_template()
                if not p._drop(got, builder.inject(stub_map, missing=missing).ptx):
                    raise got
                if not p.empty:
                    again.append(i)
            elif isinstance(got, BuildError) and got.errors == p.population.errors:
                p.variant, p._none_fit = None, got      # no candidate of this module fits
            elif isinstance(got, BaseException):
                raise got
            else:       # a numba kernel's variant keeps it for its template; a template's takes it
                p._require().adopt(got)
        todo, progress = again, False
    all_errors = {i: e for p in packs for i, e in p.errors.items()}
    if all_errors and errors == "raise":
        raise failed_candidates(all_errors, len(cands), packs)
    return packs


def failed_candidates(errors: Mapping[int, NumptxError], total: int, packs: list) -> BuildError:
    """The BuildError of ``errors="raise"``: how many failed, the first five by index."""
    first = sorted(errors.items())[:5]
    listed = "\n".join(f"  candidate {i}: {summary(e)}" for i, e in first)
    more = f"\n  ... and {len(errors) - 5} more" if len(errors) > 5 else ""
    return BuildError(f"{len(errors)} of {total} candidates failed:\n{listed}{more}",
                      errors=dict(errors), variants=packs)
