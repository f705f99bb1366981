"""The one protocol every agent implements, and the transition batch it learns from.

All agents hold B independent replicas (one per seed) that advance in lockstep.
States and actions are integer index vectors (see `rl.problems.Problem`):
``states`` has shape (B, D_S), ``actions`` shape (B, D_A). A boolean
``active`` mask of shape (B,) says which replicas take part in a call; an
inactive replica's state, random streams and outputs must be left exactly as
they were, so that B replicas run together give the same numbers as each run
alone.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, NamedTuple

import numpy as np
from numpy.typing import NDArray

#: The discount factor gamma of every agent config where a reading gives none.
DEFAULT_GAMMA = 0.99


class Transitions(NamedTuple):
    """One environment step of every replica.

    Attributes
    ----------
    states, next_states : ndarray of int, shape (B, D_S)
    actions : ndarray of int, shape (B, D_A)
    rewards : ndarray of float, shape (B,)
    terminated : ndarray of bool, shape (B,)
        True where the episode ended in a terminal state: the target is the
        reward alone. A time-limit truncation is not termination and keeps
        bootstrapping.
    active : ndarray of bool, shape (B,)
        Replicas that actually stepped; the others must not learn.
    """

    states: NDArray[np.int64]
    actions: NDArray[np.int64]
    rewards: NDArray[np.float64]
    next_states: NDArray[np.int64]
    terminated: NDArray[np.bool_]
    active: NDArray[np.bool_]


class ContinuousActions(NamedTuple):
    """Actions to execute as continuous values instead of their bin's value.

    The released code executes a random exploratory action as drawn from the
    environment's action interval and credits it to the grid index of
    endpoint rounding ("The authors' code and this one", docs/authors-code.md). An
    agent that does so sets `Agent.continuous_actions_` in `Agent.act`; the
    runner then sends ``values[b]`` to the environment for every replica b in
    ``mask`` and ``problem.decode(actions)`` for the others.

    Attributes
    ----------
    mask : ndarray of bool, shape (B,)
        Replicas whose last action is executed as ``values``.
    values : ndarray of float, shape (B, D_A)
        The drawn continuous actions (rows outside ``mask`` are meaningless).
    """

    mask: NDArray[np.bool_]
    values: NDArray[np.float64]


class Agent(abc.ABC):
    """Protocol shared by TEQL, TLR, LoRa-VI, DQN, discrete SAC and tabular Q-learning.

    Subclasses take ``(problem, config, streams)`` in their constructor:
    ``problem`` a `rl.problems.Problem`, ``config`` the agent's frozen config
    dataclass and ``streams`` a sequence of `rl.seeding.AgentRandom`, one per
    replica (its length is B). An agent whose ``per_replica`` names config
    fields also takes ``replica_settings``, B values for each of them
    (`rl.agents.replica_settings`).

    Attributes
    ----------
    per_replica : frozenset of str
        The config fields whose values may differ between replicas (none here).
    continuous_actions_ : ContinuousActions or None
        Set by `act` where some replicas' actions are to be executed as
        continuous values (see `ContinuousActions`); None: execute the bins.
    """

    per_replica: ClassVar[frozenset[str]] = frozenset()
    replicas: int
    continuous_actions_: ContinuousActions | None = None

    @classmethod
    def batch_group(cls, config: Any) -> tuple[Any, ...]:
        """Return what the replicas of one batch must share beyond their shapes (none here).

        Two configs whose values of the ``per_replica`` fields make the agent
        take different paths (not only different numbers) return different
        groups, and train in different batches (`rl.sweep`).
        """
        return ()

    def act(
        self,
        states: NDArray[np.int64],
        active: NDArray[np.bool_],
        greedy: NDArray[np.bool_] | None = None,
    ) -> NDArray[np.int64]:
        """Choose the actions of one lockstep step, shape (B, D_A).

        Replicas in ``active & ~greedy`` are on a training episode and explore
        (`explore`); replicas in ``greedy`` are on a greedy evaluation episode
        and take `greedy` actions, drawing no randomness and advancing no
        counter. Rows of inactive replicas are arbitrary valid indices.

        Parameters
        ----------
        states : ndarray of int, shape (B, D_S)
        active : ndarray of bool, shape (B,)
            Replicas that step now.
        greedy : ndarray of bool, shape (B,), optional
            Replicas that act greedily (a subset of ``active``); None means none.

        Notes
        -----
        This default calls `explore` and, when some replica is greedy, `greedy`
        for all rows; an agent with a fused path (TEQL, TLR) overrides it.
        """
        if greedy is None or not greedy.any():
            return self.explore(states, active)
        actions = self.explore(states, active & ~greedy)
        return np.where(greedy[:, None], self.greedy(states), actions)

    @abc.abstractmethod
    def explore(self, states: NDArray[np.int64], active: NDArray[np.bool_]) -> NDArray[np.int64]:
        """Choose exploratory training actions, shape (B, D_A), for the active replicas.

        Rows of inactive replicas are arbitrary valid indices and consume no randomness.
        """

    @abc.abstractmethod
    def greedy(self, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """Return the greedy actions, shape (B, D_A); no exploration, no randomness."""

    @abc.abstractmethod
    def observe(self, batch: Transitions) -> None:
        """Learn from one transition per active replica."""

    def end_episode(self, active: NDArray[np.bool_]) -> None:  # noqa: B027
        """Run after every training episode of the active replicas (default: nothing)."""

    @property
    @abc.abstractmethod
    def n_params(self) -> int:
        """Number of learnable parameters of one replica."""

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bitwise-identically (parameters, counters, RNG states).

        Values are numpy arrays, Python scalars, strings or nested dicts/lists of
        those, so that the runner can pickle them.
        """

    @abc.abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
