"""The yardstick: a plain single-agent Python/NumPy loop of TEQL, no environment.

What a careful researcher would write first: one agent, factors as NumPy
arrays, dict visit tables keyed by the state tuple, EUGE (eq. (euge)) over the
action fibre, Algorithm 1 with I_max = 1 (modes in sequence, one gradient step
each, eq. (gradient), with the visit count including the current visit so that
the loss stays convex on random targets), and synthetic transitions (uniform random next states and
rewards) instead of an environment. The performance issue's targets are ratios
against this loop measured in the same run, so that a noisy machine cancels.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np


def plain_loop_us(
    shape: tuple[int, ...],
    n_state_modes: int,
    *,
    rank: int = 10,
    steps: int = 2000,
    seed: int = 0,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Return microseconds per agent-step of the plain loop on a grid of ``shape``.

    Parameters
    ----------
    shape : tuple of int
        State modes followed by one action mode.
    n_state_modes : int
        How many leading modes are state modes (the rest is one action mode).
    rank : int
        CP rank R.
    steps : int
        Timed steps (after 100 untimed warm-up steps).
    seed : int
        Seed of the factors and the synthetic transitions.
    clock : callable
        The clock read before and after the timed steps, in seconds (wall time
        by default; ``time.process_time`` for the process's CPU time).
    """
    rng = np.random.default_rng(seed)
    factors = [rng.uniform(0.0, 1.0, size=(d, rank)) for d in shape]
    state_dims, n_actions = shape[:n_state_modes], shape[-1]
    counts: dict[tuple[int, ...], np.ndarray] = {}
    delta: dict[tuple[int, ...], np.ndarray] = {}
    gamma, alpha, lam, eps, c = 0.99, 0.005, 1e-3, 1e-4, 2.0

    def state_product(state: tuple[int, ...]) -> np.ndarray:
        product = np.ones(rank)
        for mode, index in enumerate(state):
            product = product * factors[mode][index]
        return product

    def step(state: tuple[int, ...]) -> tuple[int, ...]:
        values = factors[-1] @ state_product(state)
        visits = counts.get(state, np.zeros(n_actions))
        errors = delta.get(state, np.zeros(n_actions))
        log_total = math.log(max(visits.sum(), 1.0))
        scores = values + c * (errors + np.sqrt(log_total / (visits + 1.0)))
        action = int(np.argmax(scores))
        reward = rng.uniform(-1.0, 1.0)
        next_state = tuple(int(rng.integers(d)) for d in state_dims)
        target = reward + gamma * float(np.max(factors[-1] @ state_product(next_state)))
        index = (*state, action)
        rows = [factors[mode][i].copy() for mode, i in enumerate(index)]
        before = float(np.prod(rows, axis=0).sum())
        weight = lam / (visits[action] + 1.0 + eps)  # count incl. this visit: the loss stays convex
        entry = before
        for mode in range(len(rows)):
            direction = np.prod([r for m, r in enumerate(rows) if m != mode], axis=0)
            gradient = (entry - target) - 2.0 * weight * entry
            rows[mode] = rows[mode] - alpha * gradient * direction
            entry = float(rows[mode] @ direction)
        for mode, i in enumerate(index):
            factors[mode][i] = rows[mode]
        visits = counts.setdefault(state, np.zeros(n_actions))
        errors = delta.setdefault(state, np.zeros(n_actions))
        errors[action] = abs(entry - before)
        visits[action] += 1.0
        return next_state

    state = tuple(int(rng.integers(d)) for d in state_dims)
    for _ in range(100):
        state = step(state)
    start = clock()
    for _ in range(steps):
        state = step(state)
    return 1e6 * (clock() - start) / steps
