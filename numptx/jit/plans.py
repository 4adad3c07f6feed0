"""The constant-patch plans of a template: one owner for the state of each shape, and one proof.

:mod:`.patch` says how a plan is made and applied; this module keeps them. Each template owns a
:class:`PlanBook`: per *shape* (a variant's stubs with their f32/f64 constants taken out, see
:meth:`PlanBook.shape`) it remembers a :class:`~numptx.jit.patch.Plan`, None (the shape is not
patchable) or :data:`SEEN` (one variant of it was assembled as written); :data:`UNKNOWN` is a
shape never met. A :class:`Proof` is the trial assemblies that decide a shape: both drivers
run the same proof, the synchronous one of ``variant.cubin`` (:meth:`PlanBook.patched`) and
the parallel one of ``build_many`` (:mod:`.build`, which sends the trials to its executor)::

    book = PlanBook()
    shape = book.shape(stubs, key_of)            # None: no constant to patch
    book.state(shape.key, cache, see=True)       # UNKNOWN the first time: assemble as written
    cubin = book.patched(shape, cache, assemble) # later: proven once, then patched

    proof = Proof(shape)                         # what build_many does with its executor
    while trials := proof.trials():              # two stub lists per attempt
        for k, stubs in enumerate(trials):
            proof.record(k, assemble(stubs))
    book.keep(shape.key, proof.plan, cache)
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from ..errors import NumptxError
from .errors import summary
from .patch import (ATTEMPTS, MAX_PLANS, SEEN, UNKNOWN, Plan, folds_constants, join_constants,
                    kinds_of, make_plan, patchable, plan_key, sentinel_sets, shape_text, signs,
                    split_constants)

__all__ = ["PlanBook", "Proof", "Shape", "UNKNOWN", "SEEN"]

log = logging.getLogger(__name__)


class Shape(NamedTuple):
    """A variant's stubs split for patching: ``key`` (the shape's cache key), ``texts`` (each
    stub's text around its constants) and ``values`` (the constants' bit patterns)."""
    key: str
    texts: tuple
    values: tuple


class Proof:
    """The trial assemblies that decide one shape: up to ``ATTEMPTS`` pairs, each pair with
    fresh sentinel constants (:func:`~numptx.jit.patch.sentinel_sets`). :meth:`trials` gives a
    pair's stubs, :meth:`record` takes each cubin (:meth:`fail` an assembly's error); ``plan``
    is the Plan once a pair proves one, else None."""

    __slots__ = ("shape", "kinds", "pattern", "plan", "sets", "cubins", "attempts", "failed",
                 "transient")

    def __init__(self, shape: Shape):
        self.shape = shape
        self.kinds = kinds_of(shape.texts)
        self.pattern = signs(shape.values, self.kinds)
        self.plan: Plan | None = None
        self.sets: tuple[list[int], list[int]] | None = None
        self.cubins: list[bytes | None] = [None, None]
        self.attempts = 0
        self.failed = False        # an assembly failed, or the shape folds its constants
        self.transient = False     # ... because the executor failed: the outcome proves nothing

    def trials(self) -> list[list[str]]:
        """The stubs of the next pair of trial assemblies, or [] when the proof is over (a plan
        was made, an assembly failed, the attempts ran out, or ptxas could fold the constants,
        which :func:`~numptx.jit.patch.folds_constants` refuses before any assembly)."""
        if self.plan is not None or self.failed or self.attempts >= ATTEMPTS:
            return []
        self.attempts += 1
        self.sets = sentinel_sets(self.pattern, self.kinds)
        self.cubins = [None, None]
        first = join_constants(self.shape.texts, self.sets[0])
        why = folds_constants(first)
        if why:
            log.debug("numptx: shape %s: constants not patchable (%s)", self.shape.key[:12], why)
            self.failed = True
            return []
        return [first, join_constants(self.shape.texts, self.sets[1])]

    def record(self, k: int, cubin: bytes) -> None:
        """The cubin of trial ``k`` (0 or 1) of the current pair; the second one in makes the
        plan (or not: then :meth:`trials` gives the next pair)."""
        self.cubins[k] = cubin
        if not self.failed and None not in self.cubins:
            self.plan = make_plan(self.kinds, self.cubins[0], self.cubins[1], self.sets)

    def fail(self, e: BaseException) -> None:
        """A trial assembly failed: the shape is not patchable, unless the executor failed."""
        if not self.failed and isinstance(e, NumptxError):
            log.debug("numptx: shape %s: constants not patchable (%s)", self.shape.key[:12],
                      summary(e))
        self.failed = True
        self.transient = self.transient or not isinstance(e, NumptxError)


class PlanBook:
    """The plan state of each shape of one template (memory first, then plans other processes
    proved, from the cubin cache), the most recent ``MAX_PLANS`` shapes kept. Thread-safe:
    :meth:`patched` proves each shape once, whichever thread comes first."""

    def __init__(self) -> None:
        # shape key -> Plan, None (not patchable) or SEEN (one variant assembled as written)
        self._states: OrderedDict[str, Any] = OrderedDict()
        self._proving: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    @staticmethod
    def shape(stubs: Sequence[str], key_of: Callable[[Sequence[str]], str]) -> Shape | None:
        """The shape of ``stubs``, or None when they have no constant that may be patched.
        ``key_of(stubs)`` is the template's variant key; a shape's key is that of its stubs
        with a placeholder for each constant, and the constants' signs."""
        texts, values = split_constants(stubs)
        kinds = kinds_of(texts)
        if not values or not patchable(values, kinds):
            return None
        return Shape(key_of([*shape_text(texts), signs(values, kinds)]), texts, values)

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

    def keep(self, key: str, plan: Plan | None, cache: Any) -> None:
        """Remember a proof's outcome; a plan also goes to ``cache`` for other processes."""
        with self._lock:
            self._remember(key, plan)
        if plan is not None and cache is not None:
            cache.put(plan_key(key), plan.to_bytes())

    def _remember(self, key: str, state: Any) -> None:
        self._states[key] = state
        self._states.move_to_end(key)
        while len(self._states) > MAX_PLANS:
            old, _ = self._states.popitem(last=False)
            self._proving.pop(old, None)

    # -- the synchronous driver (variant.cubin) ---------------------------------------------------
    def patched(self, shape: Shape, cache: Any, assemble: Callable[[list[str]], bytes],
                name: str = "") -> bytes | None:
        """The cubin of the variant of ``shape`` by patching, or None (assemble it as written:
        the first variant of a shape, or a shape that is not patchable). ``assemble(stubs)``
        makes a cubin of the template with those stubs (the proof's trial assemblies)."""
        state = self.state(shape.key, cache, see=True)
        if state is UNKNOWN:             # first of its shape: ptxas sees its own constants
            return None
        if state is SEEN:
            state = self.prove(shape, cache, assemble, name)
        return None if state is None else state.apply(shape.values)

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
            self.keep(shape.key, proof.plan, cache)
            log.debug("numptx: %s: shape %s %s", name, shape.key[:12],
                      "patchable" if proof.plan else "not patchable: assembled variant by variant")
            return proof.plan
