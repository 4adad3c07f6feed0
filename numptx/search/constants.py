"""The local optimizer of a candidate's constants: a batched (1+λ) evolution strategy.

Every candidate is a Stack PTX program whose ``f32``/``f64`` constants (``operators.constants_of``,
in program order) are the parameters θ. For each candidate to fit, independently:

1. ``trials`` (λ) trial vectors θ' = θ + σ·(|θ| + 1)·z, z ~ N(0, I): a step relative to
   the constant's magnitude, so 0.5 and 3000.0 move alike;
2. all trials of all candidates are scored in **one batch** (on a GPU: one module built once
   with run-time constant tables, each step a table copy and a launch; on a CPU: the programs
   re-evaluated with the constants written in);
3. the best trial replaces θ when it lowers the loss, and σ grows (×1.5, at most 2); otherwise σ
   shrinks (×0.5): the 1/5th-success rule's two-state form;
4. ``steps`` rounds, or until every σ is below ``1e-7``.

Derivative-free on purpose: a program may use any instruction of the table (min/max,
comparisons, approximations) where a gradient is not defined. The random draws of a candidate
come from a generator seeded by ``(seed, the program's canonical key)``, so the fitted constants
are a function of the program alone: a search that meets the same program again (or resumes
from a checkpoint) fits it the same way.

::

    from numptx.search.constants import fit_constants
    new_programs, new_losses = fit_constants(evaluator, programs, losses, keys, seed=0)
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["fit_constants", "STEPS", "TRIALS", "SIGMA"]

STEPS = 12         #: rounds of the (1+λ)-ES per fit
TRIALS = 4         #: λ, trial vectors per candidate and round
SIGMA = 0.3        #: the starting relative step
_SIGMA_MAX, _SIGMA_MIN = 2.0, 1e-7


def _rng(seed: int, key: bytes) -> np.random.Generator:
    h = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")
    return np.random.default_rng([int(seed) & 0xFFFFFFFFFFFFFFFF, h])


def fit_constants(evaluator: Any, programs: Sequence[Sequence[Any]], losses: Sequence[float],
                  keys: Sequence[bytes], *, seed: int = 0, steps: int = STEPS,
                  trials: int = TRIALS, sigma: float = SIGMA,
                  protect: Sequence[float] = ()) -> tuple[list[list[Any]], np.ndarray]:
    """Fit the constants of ``programs`` (their current ``losses``, their canonical ``keys``
    for the random streams) on ``evaluator`` (:class:`numptx.search.evaluate.Evaluator`).
    Returns the programs with the best constants found and their losses (a program with no
    constant, or none better, comes back as it was). Constants equal to a value in ``protect``
    stay as they are (the search passes the op macros' own constants, log2(e) and ln(2):
    fitting them turns ``exp`` into an arbitrary ``exp2(c*x)``)."""
    from .operators import constants_of, with_constants
    programs = [list(p) for p in programs]
    theta = [np.asarray(constants_of(p), np.float64) for p in programs]
    free = [~np.isin(t, np.asarray(protect, np.float64)) for t in theta]
    best = np.asarray(losses, np.float64).copy()
    todo = [i for i, t in enumerate(theta) if free[i].any() and np.isfinite(best[i])]
    if not todo or steps < 1 or trials < 1:
        return programs, best
    rngs = {i: _rng(seed, keys[i]) for i in todo}
    sig = {i: float(sigma) for i in todo}
    # one batch of trials x candidates, built once (on a GPU: one module with run-time tables)
    batch = evaluator.constant_batch([programs[i] for i in todo for _ in range(trials)])
    improved = set()
    for _ in range(steps):
        live = [i for i in todo if sig[i] >= _SIGMA_MIN]
        if not live:
            break
        trial_theta = []
        for i in todo:
            t = theta[i]
            z = rngs[i].standard_normal((trials, len(t))) * free[i]
            # clipped: a trial out of the f32 range would not be a constant
            trial_theta.extend(np.clip(t + sig[i] * (np.abs(t) + 1.0) * z, -1e30, 1e30) + 0.0)
        got = batch(trial_theta).reshape(len(todo), trials)
        for row, i in enumerate(todo):
            j = int(np.argmin(got[row]))
            if got[row, j] < best[i]:
                best[i], theta[i] = float(got[row, j]), trial_theta[row * trials + j]
                sig[i] = min(sig[i] * 1.5, _SIGMA_MAX)
                improved.add(i)
            else:
                sig[i] *= 0.5
    for i in improved:
        programs[i] = with_constants(programs[i], theta[i])
    return programs, best
