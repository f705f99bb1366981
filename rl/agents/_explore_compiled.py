"""Compiled (Numba) twins of the exploration rules of `rl.agents._explore`.

Random draws are those of the references: per active replica, ``random()``
for the epsilon test, ``integers(0, |A|)`` for a random action, and
``integers(0, k)`` to break a k-way tie, drawn from a ``numba.typed.List`` of
the replicas' ``numpy.random.Generator`` objects (`typed_generators`), which
shares their state with Python. ``tests/rl/test_compiled_engine.py`` checks them
against the references.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from numba import njit
from numba.typed import List
from numpy.typing import NDArray


@njit(cache=True)
def generator_list(first):
    """Return a typed list holding ``first`` (built compiled, so the build is cached)."""
    out = List()
    out.append(first)
    return out


@njit(cache=True)
def generator_append(generators, generator):
    """Append one more generator to a list made by `generator_list`."""
    generators.append(generator)


@njit(cache=True)
def first_argmax(values):
    """np.argmax: the first maximizer, the first NaN if any."""
    best = 0
    for i in range(values.shape[0]):
        if np.isnan(values[i]):
            return i
        if values[i] > values[best]:
            best = i
    return best


@njit(cache=True)
def tie_count(values, top):
    """Return how many entries of ``values`` equal ``top`` (the k of a k-way tie)."""
    ties = 0
    for i in range(values.shape[0]):
        if values[i] == top:
            ties += 1
    return ties


@njit(cache=True)
def argmax_random_ties(values, generator):
    """Return the maximizer of ``values``, a k-way tie broken by ``integers(0, k)``.

    Below two `tie_count` of the `first_argmax` it draws nothing, so a caller
    can test that before it reads a generator (a typed list's item costs an
    atomic reference-count update).
    """
    best = first_argmax(values)
    top = values[best]
    ties = tie_count(values, top)
    if ties <= 1:
        return best
    pick = generator.integers(0, ties)
    for i in range(values.shape[0]):
        if values[i] == top:
            if pick == 0:
                return i
            pick -= 1
    return best


@njit(cache=True)
def epsilon_greedy(values, epsilon, generator):
    """Random action with probability epsilon, else a maximizer with random ties."""
    if generator.random() < epsilon:
        return generator.integers(0, values.shape[0])
    return argmax_random_ties(values, generator)


@njit(cache=True)
def _epsilon_greedy_rows(values, epsilon, active, generators, out):
    """`epsilon_greedy` of every active row of ``values`` (B, A) into ``out``; see below."""
    for b in range(values.shape[0]):
        if active[b]:
            out[b] = epsilon_greedy(values[b], epsilon[b], generators[b])
        else:
            out[b] = first_argmax(values[b])


def epsilon_greedy_rows(
    values: NDArray[np.float64],
    epsilon: NDArray[np.float64],
    active: NDArray[np.bool_],
    generators: Any,
) -> NDArray[np.int64]:
    """Return `rl.agents._explore.epsilon_greedy` of B replicas, flat actions (B,), compiled.

    Replica b draws from ``generators[b]`` (`typed_generators`) what the
    reference draws, in the same order; inactive replicas take the first
    maximizer and draw nothing. One compiled call instead of a Python loop
    over the replicas (tabular Q-learning and LoRa-VI).
    """
    out = np.empty(len(values), dtype=np.int64)
    _epsilon_greedy_rows(
        np.ascontiguousarray(values, dtype=np.float64),
        np.ascontiguousarray(epsilon, dtype=np.float64),
        np.ascontiguousarray(active, dtype=np.bool_),
        generators,
        out,
    )
    return out


@njit(cache=True)
def epsilon_continuous(values, epsilon, generator, dims, n_state, low, high, drawn):
    """Epsilon-greedy whose random action is drawn from the continuous action interval.

    With probability epsilon each action component k is drawn as
    ``low[k] + (high[k] - low[k]) * random()`` into ``drawn[k]`` and credited to
    the grid index ``rint((a - low) / (high - low) (d - 1))`` (the released code's
    endpoint rounding); returns (flat joint index, True). Otherwise a maximizer
    with random ties and False. The reference is the tensor step's
    ``random_actions`` (``rl/agents/tensor/step.py``).
    """
    if generator.random() < epsilon:
        flat = 0
        for n in range(n_state, dims.shape[0]):
            k = n - n_state
            value = low[k] + (high[k] - low[k]) * generator.random()
            drawn[k] = value
            index = np.rint((value - low[k]) / (high[k] - low[k]) * (dims[n] - 1))
            index = min(max(index, 0.0), dims[n] - 1.0)
            flat = flat * dims[n] + np.int64(index)
        return flat, True
    return argmax_random_ties(values, generator), False


def typed_generators(generators: Sequence[np.random.Generator]) -> Any:
    """Return a ``numba.typed.List`` holding ``generators`` (sharing their state)."""
    from numba.core.errors import NumbaPendingDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumbaPendingDeprecationWarning)
        typed = generator_list(generators[0])
        for generator in generators[1:]:
            generator_append(typed, generator)
    return typed
