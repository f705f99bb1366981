"""An agent that acts uniformly at random and learns nothing: a baseline and a test double.

Training actions are drawn uniformly over every action mode from each
replica's ``explore`` stream (only for active replicas, so replicas stay
independent).

`RandomAgent.greedy` is a fixed, deterministic policy drawn at random: a key
per replica is drawn once at construction from a generator spawned from the
replica's ``init`` stream, and the "greedy" action of a state is a hash of
(key, state). This is the one agent whose greedy policy comes from a random
draw. It is a function of the state, not a stream that advances on every
call, for a reason: ``greedy`` has no ``active`` mask, so a stream would advance
for every replica as long as the longest evaluation episode lasts, and
B replicas run together would no longer equal each run alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rl.agents._explore import generator_states, set_generator_states
from rl.agents._restore import check_generator_states, saved_array
from rl.agents.base import DEFAULT_GAMMA, Agent, Transitions
from rl.agents.registry import AgentSpec
from rl.problems import Problem
from rl.seeding import AgentRandom


@dataclass(frozen=True)
class RandomConfig:
    """Hyperparameters of the random agent (none that change its behaviour)."""

    gamma: float = DEFAULT_GAMMA
    """Discount factor in [0, 1]; unused, kept so every agent config has one."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(
                f"The 'gamma' parameter must be a float in [0, 1]. Got {self.gamma!r} instead."
            )


def _mix(values: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """Apply the splitmix64 finaliser elementwise (wrapping uint64 arithmetic)."""
    values = values ^ (values >> np.uint64(30))
    values = values * np.uint64(0xBF58476D1CE4E5B9)
    values = values ^ (values >> np.uint64(27))
    values = values * np.uint64(0x94D049BB133111EB)
    return values ^ (values >> np.uint64(31))


class RandomAgent(Agent):
    """Uniformly random actions; a fixed random deterministic greedy policy.

    Parameters
    ----------
    problem : rl.problems.Problem
        Only ``action_dims`` is used.
    config : RandomConfig
        Unused apart from validation.
    streams : sequence of rl.seeding.AgentRandom
        ``explore`` draws training actions; a child spawned once from ``init``
        draws the key of the greedy policy.
    """

    def __init__(self, problem: Problem, config: RandomConfig, streams: Sequence[AgentRandom]):
        self.problem = problem
        self.config = config
        self.streams = list(streams)
        self.replicas = len(self.streams)
        self.action_dims = np.asarray(problem.action_dims, dtype=np.int64)
        self.greedy_keys_ = np.array(
            [s.init.spawn(1)[0].integers(0, 2**63, dtype=np.uint64) for s in self.streams],
            dtype=np.uint64,
        )

    def explore(self, states: NDArray[np.int64], active: NDArray[np.bool_]) -> NDArray[np.int64]:
        """Draw uniform actions (B, D_A) for the active replicas; zeros for the others."""
        actions = np.zeros((self.replicas, len(self.action_dims)), dtype=np.int64)
        for i in np.flatnonzero(active):
            actions[i] = self.streams[i].explore.integers(0, self.action_dims)
        return actions

    def greedy(self, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """Return the fixed random policy's actions (B, D_A): a hash of (key, state)."""
        states = np.asarray(states, dtype=np.int64).astype(np.uint64)
        hashed = self.greedy_keys_.copy()
        for column in states.T:
            hashed = _mix(hashed ^ (column + np.uint64(0x9E3779B97F4A7C15)))
        actions = np.empty((self.replicas, len(self.action_dims)), dtype=np.int64)
        for k, size in enumerate(self.action_dims):
            hashed = _mix(hashed + np.uint64(k + 1))
            actions[:, k] = (hashed % np.uint64(size)).astype(np.int64)
        return actions

    def observe(self, batch: Transitions) -> None:
        """Learn nothing."""

    @property
    def n_params(self) -> int:
        """Zero: nothing is learned."""
        return 0

    def state_dict(self) -> dict[str, Any]:
        """Bit-generator states of the explore streams and the greedy keys."""
        return {
            "explore": generator_states([s.explore for s in self.streams]),
            "greedy_keys": self.greedy_keys_.copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned; ValueError if a shape or dtype is wrong."""
        greedy_keys = saved_array(state, "greedy_keys", self.greedy_keys_)
        check_generator_states(state["explore"], len(self.streams), "explore")
        set_generator_states([s.explore for s in self.streams], state["explore"])
        self.greedy_keys_ = greedy_keys.copy()


SPEC = AgentSpec("random", RandomAgent, RandomConfig)
"""What the runner needs of this agent; its readings are `rl.agents.readings.READINGS["random"]`."""
