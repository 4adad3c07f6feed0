"""The constant-patch plans of a template: one owner for the state of each shape, and one proof.

:mod:`.patch` says how a plan is made and applied; this module keeps them. Each template owns a
:class:`PlanBook`: per *shape* (a variant's stubs with their f32/f64 constants taken out, see
:meth:`PlanBook.shape`) it remembers a :class:`~numptx.jit.compile.patch.Plan`, None (the shape is not
patchable) or :data:`SEEN` (one variant of it was assembled as written); :data:`UNKNOWN` is a
shape never met. A :class:`Proof` is the trial assemblies that decide a shape: both drivers
run the same proof, the synchronous one of ``variant.cubin`` (:meth:`PlanBook.patched`) and
the parallel one of ``build_many`` (:mod:`.build`, which sends the trials to its executor)::

    book = PlanBook()
    shape, why = book.split(stubs, key_of)       # None: no constant to patch (why says why)
    book.state(shape.key, cache, see=True)       # UNKNOWN the first time: assemble as written
    cubin, how = book.patched(shape, cache, assemble)  # later: proven once, then patched

    proof = Proof(shape)                         # what build_many does with its executor
    while trials := proof.trials():              # two stub lists per attempt
        for k, stubs in enumerate(trials):
            proof.record(k, assemble(stubs))
    book.keep(shape.key, proof.plan, cache, proof.why)

Each variant then reports how its cubin came to be (:class:`BuildInfo`), and each shape that is
not patched is logged once at INFO level with the reason.
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from ...errors import NumptxError
from ..errors import summary
from .patch import (ATTEMPTS, MAX_PLANS, SEEN, UNKNOWN, Plan, constant_roles, fix_constants,
                    halves_text, join_constants, kinds_of, literal, make_plan, nan_halves,
                    plan_key, sentinel_sets, shape_text, signs, split_constants, why_no_plan)

__all__ = ["PlanBook", "Proof", "Shape", "BuildInfo", "UNKNOWN", "SEEN", "library_flags",
           "FIRST"]

#: why the first variant of a shape is assembled as written
FIRST = "the first variant of its shape is assembled as written (the next one proves the shape)"

log = logging.getLogger(__name__)


class Shape(NamedTuple):
    """A variant's stubs split for patching: ``key`` (the shape's cache key), ``texts`` (each
    stub's text around the constants that vary: the user's; library constants and those that
    cannot be patched are part of the text) and ``values`` (their bit patterns)."""
    key: str
    texts: tuple
    values: tuple


class BuildInfo(NamedTuple):
    """How a variant's cubin came to be (``variant.build_info``): ``how`` is ``"assembled"``
    (one nvJitLink run), ``"patched"`` (its constants written into its shape's proven cubin),
    ``"proof"`` (patched, after proving its shape: two trial assemblies), ``"memory"`` or
    ``"disk"`` (a cubin cache hit); ``seconds`` the time it took; ``why`` says why an
    assembled variant was not patched (None otherwise)."""
    how: str
    seconds: float
    why: str | None = None

    def __str__(self) -> str:
        return f"{self.how} in {self.seconds * 1e3:.3g} ms" + (f" ({self.why})" if self.why else "")


def library_flags(stubs: Sequence[str], texts: Sequence[Sequence[str]], values: Sequence[int],
                  kinds: str) -> list[bool]:
    """Per constant of split ``stubs``: whether it is a math-library constant of its stub (a
    stub of a DSL formula carries ``library``: the literals its math library put in)."""
    flags, k = [], 0
    for stub, pieces in zip(stubs, texts):
        lib = getattr(stub, "library", None)
        for _ in pieces[1:]:
            flags.append(bool(lib) and literal(values[k], kinds[k]) in lib)
            k += 1
    return flags


class Proof:
    """The trial assemblies that decide one shape: up to ``ATTEMPTS`` pairs, each pair with
    fresh sentinel constants (:func:`~numptx.jit.compile.patch.sentinel_sets`). :meth:`trials` gives a
    pair's stubs, :meth:`record` takes each cubin (:meth:`fail` an assembly's error); ``plan``
    is the Plan once a pair proves one, else None."""

    __slots__ = ("shape", "kinds", "pattern", "plan", "sets", "cubins", "attempts", "failed",
                 "transient", "why", "halves")

    def __init__(self, shape: Shape):
        self.shape = shape
        self.kinds = kinds_of(shape.texts)
        self.pattern = signs(shape.values, self.kinds)
        self.halves = [nan_halves(v, k) for v, k in zip(shape.values, self.kinds)]
        self.plan: Plan | None = None
        self.sets: tuple[list[int], list[int]] | None = None
        self.cubins: list[bytes | None] = [None, None]
        self.attempts = 0
        self.failed = False        # an assembly failed, or the shape folds its constants
        self.transient = False     # ... because the executor failed: the outcome proves nothing
        self.why = ""              # why the last attempt made no plan

    def trials(self) -> list[list[str]]:
        """The stubs of the next pair of trial assemblies, or [] when the proof is over (a plan
        was made, an assembly failed or the attempts ran out). Constants ptxas could fold are
        part of the shape already (:func:`~numptx.jit.compile.patch.constant_roles`)."""
        if self.plan is not None or self.failed or self.attempts >= ATTEMPTS:
            return []
        self.attempts += 1
        self.sets = sentinel_sets(self.pattern, self.kinds, halves=self.halves)
        self.cubins = [None, None]
        return [join_constants(self.shape.texts, self.sets[0]),
                join_constants(self.shape.texts, self.sets[1])]

    def record(self, k: int, cubin: bytes) -> None:
        """The cubin of trial ``k`` (0 or 1) of the current pair; the second one in makes the
        plan (or not: then :meth:`trials` gives the next pair)."""
        self.cubins[k] = cubin
        if not self.failed and None not in self.cubins:
            self.plan = make_plan(self.kinds, self.cubins[0], self.cubins[1], self.sets)
            if self.plan is None:
                self.why = "its proof failed: " + why_no_plan(self.kinds, self.cubins[0],
                                                             self.cubins[1], self.sets)

    def fail(self, e: BaseException) -> None:
        """A trial assembly failed: the shape is not patchable, unless the executor failed."""
        if not self.failed:
            self.why = (f"a trial assembly of its proof failed: {summary(e)}"
                        if isinstance(e, NumptxError) else
                        f"the executor failed: {type(e).__name__}: {e}")
        self.failed = True
        self.transient = self.transient or not isinstance(e, NumptxError)


class PlanBook:
    """The plan state of each shape of one template (memory first, then plans other processes
    proved, from the cubin cache), the most recent ``MAX_PLANS`` shapes kept. Thread-safe:
    :meth:`patched` proves each shape once, whichever thread comes first."""

    def __init__(self) -> None:
        # shape key -> Plan, None (not patchable) or SEEN (one variant assembled as written)
        self._states: OrderedDict[str, Any] = OrderedDict()
        self._why: dict[str, str] = {}       # shape key -> why it is not patchable
        self._told: OrderedDict[str, None] = OrderedDict()   # kept-constant reasons logged
        self._proving: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def shape(self, stubs: Sequence[str], key_of: Callable[[Sequence[str]], str]) -> Shape | None:
        """The shape of ``stubs``, or None when they have no constant that may be patched."""
        return self.split(stubs, key_of)[0]

    def split(self, stubs: Sequence[str], key_of: Callable[[Sequence[str]], str],
              name: str = "") -> tuple[Shape | None, str]:
        """The shape of ``stubs`` (None when no constant of theirs varies), and why constants
        are not patched ("" when all are). ``key_of(stubs)`` is the template's variant key; a
        shape's key is that of its stubs with a placeholder for each varying constant (the
        others are part of the text: library constants, and those that cannot be patched,
        see :func:`~numptx.jit.compile.patch.constant_roles`), and the varying constants' signs."""
        texts, values = split_constants(stubs)
        if not values:
            return None, "no constant to patch"
        kinds = kinds_of(texts)
        vary, why = constant_roles(texts, values, kinds, library_flags(stubs, texts, values, kinds))
        user = [w for w in why.values() if w != "library"]
        if why:
            texts, values = fix_constants(texts, values, vary)
            kinds = kinds_of(texts)
        reason = ""
        if user:
            reason = f"{user[0]}" + (f" (and {len(user) - 1} more constants kept)"
                                     if len(user) > 1 else "")
        if not values:
            reason = reason or "its constants are all the math library's (part of the shape)"
            if user:
                self._tell(key_of(shape_text(split_constants(stubs)[0])), name,
                           f"no constant is patched: {reason}")
            return None, "no constant to patch: " + reason
        key = key_of([*shape_text(texts), signs(values, kinds) + halves_text(values, kinds)])
        return Shape(key, texts, values), reason

    def _tell(self, key: str, name: str, message: str) -> None:
        """Log ``message`` at INFO level, once per shape ``key`` (the most recent MAX_PLANS)."""
        with self._lock:
            if key in self._told:
                return
            self._told[key] = None
            while len(self._told) > MAX_PLANS:
                self._told.popitem(last=False)
        log.info("numptx: %s: shape %s: %s; its variants are assembled one by one", name or "?",
                 key[:12], message)

    def why(self, key: str) -> str:
        """Why the shape ``key`` is not patchable ("" if unknown)."""
        with self._lock:
            return self._why.get(key, "")

    def get(self, key: str) -> Any:
        """The state of a shape in memory (UNKNOWN if none); no cache look-up, no change."""
        with self._lock:
            return self._states.get(key, UNKNOWN)

    def plans(self) -> list[Plan]:
        """The plans in memory, least recently used first."""
        with self._lock:
            return [s for s in self._states.values() if isinstance(s, Plan)]

    def state(self, key: str, cache: Any, *, see: bool) -> Any:
        """The state of a shape (memory, then a plan another process proved, from ``cache``);
        ``see`` marks an unknown shape as seen once."""
        with self._lock:
            state = self._states.get(key, UNKNOWN)
            if state is not UNKNOWN:
                self._states.move_to_end(key)
                return state
        data = None if cache is None else cache.get(plan_key(key), count=False)
        plan = None if data is None else Plan.from_bytes(data)
        with self._lock:
            state = self._states.get(key, UNKNOWN)
            if state is UNKNOWN and (plan is not None or see):
                state = plan if plan is not None else UNKNOWN
                self._remember(key, plan if plan is not None else SEEN)
            return state

    def keep(self, key: str, plan: Plan | None, cache: Any, why: str = "",
             name: str = "") -> None:
        """Remember a proof's outcome; a plan also goes to ``cache`` for other processes. A
        shape that is not patchable is logged at INFO level with ``why``."""
        with self._lock:
            self._remember(key, plan)
            if plan is None:
                self._why[key] = why = why or "its proof failed"
        if plan is not None and cache is not None:
            cache.put(plan_key(key), plan.to_bytes())
        if plan is None:
            self._tell(key, name, f"not patchable: {why}")

    def _remember(self, key: str, state: Any) -> None:
        self._states[key] = state
        self._states.move_to_end(key)
        while len(self._states) > MAX_PLANS:
            old, _ = self._states.popitem(last=False)
            self._proving.pop(old, None)
            self._why.pop(old, None)

    # -- the synchronous driver (variant.cubin) ---------------------------------------------------
    def patched(self, shape: Shape, cache: Any, assemble: Callable[[list[str]], bytes],
                name: str = "") -> tuple[bytes | None, str]:
        """``(cubin, how)``: the cubin of the variant of ``shape`` by patching (``how``:
        ``"patched"``, or ``"proof"`` when this call proved the shape), or ``(None, why)``:
        assemble it as written (the first variant of a shape, or a shape that is not
        patchable). ``assemble(stubs)`` makes a cubin of the template with those stubs (the
        proof's trial assemblies)."""
        state = self.state(shape.key, cache, see=True)
        if state is UNKNOWN:             # first of its shape: ptxas sees its own constants
            return None, FIRST
        how = "patched"
        if state is SEEN:
            state, how = self.prove(shape, cache, assemble, name), "proof"
        if state is None:
            return None, f"its shape is not patchable: {self.why(shape.key) or 'see the log'}"
        return state.apply(shape.values), how

    def prove(self, shape: Shape, cache: Any, assemble: Callable[[list[str]], bytes],
              name: str = "") -> Plan | None:
        """Make (once, whichever thread comes first) the plan of a shape; None if the shape is
        not patchable or does not assemble."""
        with self._lock:
            lock = self._proving.setdefault(shape.key, threading.Lock())
        with lock:
            state = self.state(shape.key, cache, see=False)
            if state is not UNKNOWN and state is not SEEN:
                return state
            proof = Proof(shape)
            try:                          # the two assemblies at once: nvJitLink frees the GIL
                with ThreadPoolExecutor(1, thread_name_prefix="numptx-prove") as ex:
                    while trials := proof.trials():
                        second = ex.submit(assemble, trials[1])
                        proof.record(0, assemble(trials[0]))
                        proof.record(1, second.result())
            except NumptxError as e:      # the variants themselves will say what is wrong
                proof.fail(e)
            self.keep(shape.key, proof.plan, cache, proof.why, name)
            if proof.plan is not None:
                log.debug("numptx: %s: shape %s patchable", name, shape.key[:12])
            return proof.plan
