"""Epsilon-greedy action selection and config checks shared by the value-table agents.

Used by `rl.agents.tabular.TabularQ` and `rl.agents.lora_vi.LoRaVI`; any agent
that picks actions epsilon-greedily from a (B, |A|) array of action values may
reuse it. Everything here works on flat action indices (one joint action per
column); agents convert to and from index vectors with ``numpy.ravel_multi_index``
and ``numpy.unravel_index``.

Randomness rules (see `rl.agents.base`): each replica draws only from its own
``explore`` generator, and an inactive replica draws nothing, so that B replicas
run together give bitwise the same numbers as each run alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray


def greedy_indices(action_values: NDArray[np.float64]) -> NDArray[np.int64]:
    """Return the first maximising action of every row, shape (B,); no randomness.

    Parameters
    ----------
    action_values : ndarray of float, shape (B, A)
        Action values of one state per replica.
    """
    return np.argmax(action_values, axis=1).astype(np.int64)


def epsilon_greedy(
    action_values: NDArray[np.float64],
    epsilon: NDArray[np.float64],
    active: NDArray[np.bool_],
    generators: Sequence[np.random.Generator],
) -> NDArray[np.int64]:
    """Choose epsilon-greedy actions, ties among maximisers broken uniformly at random.

    An active replica b draws ``u ~ U[0, 1)`` from ``generators[b]``; if
    ``u < epsilon[b]`` it takes a uniform random action, otherwise a maximiser of
    its action values, drawing once more only when several actions tie.
    Inactive replicas get the first maximiser and draw nothing.

    Parameters
    ----------
    action_values : ndarray of float, shape (B, A)
        Action values of the current state of each replica.
    epsilon : ndarray of float, shape (B,)
        Exploration probability of each replica.
    active : ndarray of bool, shape (B,)
        Replicas that choose an action now.
    generators : sequence of numpy.random.Generator, length B
        The replicas' exploration streams.

    Returns
    -------
    ndarray of int64, shape (B,)
        Flat action indices in ``[0, A)``.

    References
    ----------
    .. [1] Sutton, R. S. and Barto, A. G. "Reinforcement Learning: An
       Introduction", 2nd ed., Section 2.2 (epsilon-greedy action selection).
    """
    actions = greedy_indices(action_values)
    n_actions = action_values.shape[1]
    for b in np.flatnonzero(active):
        rng = generators[b]
        if rng.random() < epsilon[b]:
            actions[b] = rng.integers(n_actions)
            continue
        row = action_values[b]
        ties = np.flatnonzero(row == row[actions[b]])
        if ties.size > 1:
            actions[b] = ties[rng.integers(ties.size)]
    return actions


def decay_epsilon(
    epsilon: NDArray[np.float64], active: NDArray[np.bool_], decay: float, minimum: float
) -> None:
    """Multiply the active replicas' epsilon by ``decay``, not below ``minimum`` (in place)."""
    epsilon[active] = np.maximum(epsilon[active] * decay, minimum)


def check_int(name: str, value: object, minimum: int, maximum: int | None = None) -> None:
    """Raise ValueError unless ``value`` is an int in ``[minimum, maximum]``.

    The message has the house form "The 'rank' parameter must be an int >= 1.
    Got 0 instead.".
    """
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    ok = ok and value >= minimum and (maximum is None or value <= maximum)
    if not ok:
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"The {name!r} parameter must be an int {bound}. Got {value!r} instead.")


def check_real(
    name: str,
    value: object,
    low: float,
    high: float,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> None:
    """Raise ValueError unless ``value`` is a finite real number in the given interval."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok:
        value_f = float(value)  # type: ignore[arg-type]
        ok = math.isfinite(value_f)
        ok = ok and (value_f > low if low_open else value_f >= low)
        ok = ok and (value_f < high if high_open else value_f <= high)
    if not ok:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(
            f"The {name!r} parameter must be a real number in {interval}. Got {value!r} instead."
        )


def check_choice(name: str, value: object, choices: Sequence[str]) -> None:
    """Raise ValueError unless ``value`` is one of ``choices``."""
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"The {name!r} parameter must be one of {options}. Got {value!r} instead.")


def check_epsilon_schedule(epsilon_start: float, epsilon_decay: float, epsilon_min: float) -> None:
    """Validate an epsilon schedule: start and minimum in [0, 1], decay in (0, 1]."""
    check_real("epsilon_start", epsilon_start, 0.0, 1.0)
    check_real("epsilon_decay", epsilon_decay, 0.0, 1.0, low_open=True)
    check_real("epsilon_min", epsilon_min, 0.0, 1.0)
    if epsilon_min > epsilon_start:
        raise ValueError(
            f"The 'epsilon_min' parameter must be <= epsilon_start = {epsilon_start}. "
            f"Got {epsilon_min!r} instead."
        )


def generator_states(generators: Sequence[np.random.Generator]) -> list[dict]:
    """Return the bit-generator states of ``generators`` (for ``state_dict``)."""
    return [g.bit_generator.state for g in generators]


def set_generator_states(generators: Sequence[np.random.Generator], states: Sequence[dict]) -> None:
    """Restore bit-generator states saved by `generator_states`."""
    if len(states) != len(generators):
        raise ValueError(f"Expected {len(generators)} generator states, got {len(states)}.")
    for generator, state in zip(generators, states, strict=True):
        generator.bit_generator.state = state
