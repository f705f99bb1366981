"""Base class of the exact-model factored environments (`Inventory`, `LowRankMDP`).

A factored MDP has states that are integer vectors (one entry per state
component) and actions that are integer vectors (one entry per action
component). Subclasses simulate one step and build the exact model arrays;
this class provides the Gymnasium plumbing, the ``MultiDiscrete`` spaces,
sampling of the initial state and a size guard on the dense model.
"""

from __future__ import annotations

import abc
import math
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from rl.validation import check_real

#: Largest dense transition array (entries) that `FactoredMDP.transition` builds.
MAX_MODEL_ENTRIES = 50_000_000


class FactoredMDP(gym.Env[NDArray[np.int64], NDArray[np.int64]], abc.ABC):
    """A finite MDP over integer state and action vectors, with its exact model.

    Attributes
    ----------
    state_dims, action_dims : tuple of int
        Sizes of the state and action components.
    gamma : float
        Default discount factor for value iteration.
    reward_bound : float
        Upper bound on |r| of one step.
    transition : ndarray, shape state_dims + action_dims + state_dims
        P(s' | s, a), built on first access (refused above `MAX_MODEL_ENTRIES`).
    reward : ndarray, shape state_dims + action_dims
        Expected one-step reward r(s, a).
    initial_distribution : ndarray, shape state_dims
        Distribution of the first state.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self, state_dims: tuple[int, ...], action_dims: tuple[int, ...], gamma: float
    ) -> None:
        self.gamma = check_real("gamma", gamma, 0.0, 1.0, high_open=True)
        self.state_dims = tuple(int(d) for d in state_dims)
        self.action_dims = tuple(int(d) for d in action_dims)
        self.observation_space = spaces.MultiDiscrete(self.state_dims, dtype=np.int64)
        self.action_space = spaces.MultiDiscrete(self.action_dims, dtype=np.int64)
        self.state: NDArray[np.int64] | None = None
        self._transition: NDArray[np.float64] | None = None
        self._reward: NDArray[np.float64] | None = None

    # ----------------------------------------------------------------- hooks
    @abc.abstractmethod
    def _sample(
        self, state: NDArray[np.int64], action: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], float]:
        """Simulate one step from ``state`` with ``self.np_random``: (next_state, reward)."""

    @abc.abstractmethod
    def _build_model(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Return the dense (transition, expected reward) arrays."""

    @property
    @abc.abstractmethod
    def initial_distribution(self) -> NDArray[np.float64]:
        """Distribution of the first state, shape state_dims."""

    # ----------------------------------------------------------------- model
    def _model(self) -> None:
        if self._transition is None:
            entries = math.prod(self.state_dims) ** 2 * math.prod(self.action_dims)
            if entries > MAX_MODEL_ENTRIES:
                raise ValueError(
                    f"The dense model would hold {entries} transition entries "
                    f"(limit {MAX_MODEL_ENTRIES}); choose smaller sizes."
                )
            self._transition, self._reward = self._build_model()

    @property
    def transition(self) -> NDArray[np.float64]:
        """P(s' | s, a), shape state_dims + action_dims + state_dims."""
        self._model()
        return self._transition

    @property
    def reward(self) -> NDArray[np.float64]:
        """Expected reward r(s, a), shape state_dims + action_dims."""
        self._model()
        return self._reward

    # ------------------------------------------------------------- interface
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[NDArray[np.int64], dict[str, Any]]:
        """Draw the first state from `initial_distribution`."""
        super().reset(seed=seed)
        cdf = np.cumsum(self.initial_distribution.reshape(-1))
        flat = min(
            int(np.searchsorted(cdf, self.np_random.random() * cdf[-1], side="right")), cdf.size - 1
        )
        self.state = np.array(np.unravel_index(flat, self.state_dims), dtype=np.int64)
        return self.state.copy(), {}

    def step(
        self, action: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], float, bool, bool, dict[str, Any]]:
        """Simulate one step; these problems never terminate (episodes end by truncation)."""
        if self.state is None:
            raise RuntimeError("Call reset() before step().")
        action = np.asarray(action, dtype=np.int64).reshape(len(self.action_dims))
        if np.any(action < 0) or np.any(action >= np.asarray(self.action_dims)):
            raise ValueError(f"Action {action} outside {self.action_dims}.")
        self.state, reward = self._sample(self.state, action)
        return self.state.copy(), float(reward), False, False, {}


def sample_categorical(cdf: NDArray[np.float64], u: float | NDArray) -> NDArray[np.int64]:
    """Inverse-CDF sampling along the last axis: smallest i with u < cdf[i] (clipped)."""
    index = (np.asarray(u)[..., None] >= cdf).sum(axis=-1)
    return np.minimum(index, cdf.shape[-1] - 1)
