"""What tabular Q-learning and LoRa-VI share: values over the joint grid, acted on epsilon-greedily.

Both agents keep, per replica, a value for every (joint state, joint action)
pair of the problem's grid, with |S| = prod(state_dims) and |A| =
prod(action_dims), index vectors flattened with ``numpy.ravel_multi_index``
(C order); both explore epsilon-greedily on those values, ties among the
maximisers broken by the replica's ``explore`` stream, and act greedily on
the first maximiser.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from rl.agents._explore import greedy_indices
from rl.agents.base import Agent
from rl.problems import Problem
from rl.seeding import AgentRandom
from rl.validation import check_joint_actions


class JointTableAgent(Agent):
    """Base of the agents whose values cover the joint state and action grid.

    Parameters
    ----------
    problem : rl.problems.Problem
        Supplies ``state_dims`` and ``action_dims``.
    config : dataclass
        The subclass's config, with ``max_joint_actions``.
    streams : sequence of rl.seeding.AgentRandom
        One per replica.

    Attributes
    ----------
    replicas : int
        B.
    n_states, n_actions : int
        |S| and |A|, the joint state and action counts.
    epsilon_ : ndarray of float, shape (B,)
        Current exploration probabilities (set by the subclass).
    """

    label: ClassVar[str]
    """The agent's name in error messages."""
    epsilon_: NDArray[np.float64]

    def __init__(self, problem: Problem, config: Any, streams: Sequence[AgentRandom]) -> None:
        self.problem = problem
        self.config = config
        self.streams = list(streams)
        self.replicas = len(self.streams)
        if self.replicas < 1:
            raise ValueError("The 'streams' parameter must hold at least one AgentRandom.")
        # the explore generators for the compiled draws (`epsilon_greedy_rows`), state shared;
        # imported here, not with the module: ``import rl`` loads no Numba
        from rl.agents._explore_compiled import typed_generators

        self._generators = typed_generators([s.explore for s in self.streams])
        self.state_dims = tuple(int(d) for d in problem.state_dims)
        self.action_dims = tuple(int(d) for d in problem.action_dims)
        self.n_states = int(np.prod(self.state_dims, dtype=object))
        self.n_actions = check_joint_actions(self.label, self.action_dims, config.max_joint_actions)

    def _flat_states(self, states: NDArray[np.int64]) -> NDArray[np.int64]:
        return np.ravel_multi_index(tuple(np.asarray(states).T), self.state_dims)

    def _flat_actions(self, actions: NDArray[np.int64]) -> NDArray[np.int64]:
        return np.ravel_multi_index(tuple(np.asarray(actions).T), self.action_dims)

    def _action_vectors(self, flat: NDArray[np.int64]) -> NDArray[np.int64]:
        return np.stack(np.unravel_index(flat, self.action_dims), axis=1).astype(np.int64)

    def action_values(self, states: NDArray[np.int64]) -> NDArray[np.float64]:
        """Return the values over the joint actions, shape (B, |A|), for states (B, D_S)."""
        raise NotImplementedError

    def explore(self, states: NDArray[np.int64], active: NDArray[np.bool_]) -> NDArray[np.int64]:
        """Choose epsilon-greedy actions (B, D_A); ties broken by the explore stream."""
        from rl.agents._explore_compiled import epsilon_greedy_rows  # see __init__

        flat = epsilon_greedy_rows(
            self.action_values(states), self.epsilon_, active, self._generators
        )
        return self._action_vectors(flat)

    def greedy(self, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """Return the first maximising action of each replica, shape (B, D_A)."""
        return self._action_vectors(greedy_indices(self.action_values(states)))
