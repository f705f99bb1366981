"""Each replica's own random draws, for all the replicas of a lockstep step in one call.

The deep agents (`rl.agents.deep.dqn`, `rl.agents.deep.sac`) draw from every taking-part
replica's exploration generator, in the order a replica alone would: DQN's
epsilon test and random action, SAC's policy sample, and the mini-batch
indices of both. A Python loop over the generators costs about a microsecond
per replica and call, a tenth of a DQN agent-step at B = 100; these kernels
loop over a ``numba.typed.List`` of the same generators
(`rl.agents._explore_compiled.typed_generators`, which shares their state), so
they draw the same numbers from the same streams, and the Python generators
stay the state that checkpoints save. ``tests/rl/test_deep_stacked.py``
checks them against the Python draws.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from rl.jit import kernel


@kernel
def epsilon_draws(
    generators: Any,
    rows: NDArray[np.int64],
    epsilon: NDArray[np.float64],
    n_actions: int,
    joint: NDArray[np.int64],
    explored: NDArray[np.bool_],
) -> None:
    """Epsilon tests and random actions of the replicas ``rows``, in order.

    Replica i = rows[k] draws ``random()``; below ``epsilon[i]`` it draws its
    action ``integers(0, n_actions)`` into ``joint[i]`` and sets ``explored[k]``.
    """
    for k in range(rows.shape[0]):
        i = rows[k]
        generator = generators[i]
        if generator.random() < epsilon[i]:
            joint[i] = generator.integers(0, n_actions)
            explored[k] = True


@kernel
def uniforms(generators: Any, rows: NDArray[np.int64], out: NDArray[np.float64]) -> None:
    """Fill ``out[k]`` (R, n) with n ``random()`` draws of replica rows[k]'s generator."""
    for k in range(rows.shape[0]):
        generator = generators[rows[k]]
        for j in range(out.shape[1]):
            out[k, j] = generator.random()
