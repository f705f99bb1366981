"""Action selection shared by the agents: argmax with random tie-breaking, epsilon-greedy.

Used by TabularQ and LoRa-VI (the tensor agents draw the same way, batched, in
`rl.agents.tensor.step`); any agent that picks actions from a (B, |A|) array of
scores may reuse it. Everything here works on flat action indices (one joint action per
column); agents convert to and from index vectors with ``numpy.ravel_multi_index``
and ``numpy.unravel_index``.

Randomness rules (see `rl.agents.base`): each replica draws only from its own
``explore`` generator, and an inactive replica draws nothing, so that B replicas
run together give bitwise the same numbers as each run alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

import numpy as np
from numpy.typing import NDArray

#: Tabular Q-learning's epsilon schedule (`rl.agents.tables.tabular.TabularQConfig`), also TLR's on
#: a problem without a paper setting (`rl.agents.readings`): epsilon from 1 by a factor
#: 0.9999 per step (about 0.37 after 10^4 steps) down to a floor of 0.05 (after 30,000).
EPSILON_SCHEDULE = MappingProxyType(
    {"epsilon_start": 1.0, "epsilon_decay": 0.9999, "epsilon_min": 0.05}
)


def greedy_indices(action_values: NDArray[np.float64]) -> NDArray[np.int64]:
    """Return the first maximising action of every row, shape (B,); no randomness.

    Parameters
    ----------
    action_values : ndarray of float, shape (B, A)
        Action values of one state per replica.
    """
    return np.argmax(action_values, axis=1).astype(np.int64)


def argmax_random_ties(
    action_values: NDArray[np.float64],
    generators: Sequence[np.random.Generator],
    active: NDArray[np.bool_],
) -> NDArray[np.int64]:
    """Row-wise argmax with ties broken uniformly by each replica's generator.

    Parameters
    ----------
    action_values : ndarray of float, shape (B, A)
    generators : sequence of numpy.random.Generator, length B
        Replica b draws once from ``generators[b]``, and only when its row has
        several maximisers and it is active, so inactive replicas draw nothing.
    active : ndarray of bool, shape (B,)

    Returns
    -------
    ndarray of int64, shape (B,)
        The chosen column per replica (the first maximiser for inactive replicas).
    """
    choice = greedy_indices(action_values)
    best = np.take_along_axis(action_values, choice[:, None], axis=1)
    is_best = action_values == best
    tied = active & (is_best.sum(axis=1) > 1)
    for b in np.flatnonzero(tied).tolist():
        candidates = np.flatnonzero(is_best[b])
        choice[b] = candidates[generators[b].integers(candidates.size)]
    return choice


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
    explored = np.zeros(len(action_values), dtype=bool)
    random_actions = np.zeros(len(action_values), dtype=np.int64)
    n_actions = action_values.shape[1]
    for b in np.flatnonzero(active):
        rng = generators[b]
        if rng.random() < epsilon[b]:
            explored[b] = True
            random_actions[b] = rng.integers(n_actions)
    greedy = argmax_random_ties(action_values, generators, active & ~explored)
    return np.where(explored, random_actions, greedy)


def decay_epsilon(
    epsilon: NDArray[np.float64], active: NDArray[np.bool_], decay: float, minimum: float
) -> None:
    """Multiply the active replicas' epsilon by ``decay``, not below ``minimum`` (in place)."""
    epsilon[active] = np.maximum(epsilon[active] * decay, minimum)


def generator_states(generators: Sequence[np.random.Generator]) -> list[dict]:
    """Return the bit-generator states of ``generators`` (for ``state_dict``)."""
    return [g.bit_generator.state for g in generators]


def set_generator_states(generators: Sequence[np.random.Generator], states: Sequence[dict]) -> None:
    """Restore bit-generator states saved by `generator_states`."""
    if len(states) != len(generators):
        raise ValueError(f"Expected {len(generators)} generator states, got {len(states)}.")
    for generator, state in zip(generators, states, strict=True):
        generator.bit_generator.state = state
