"""A factored discrete view of an environment, shared by every agent and the runner.

Agents never see raw observations or environment actions: they work on integer
index vectors, one index per state component and one per action component
(the modes of the Q-tensor). A `Problem` holds the maps between the two worlds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class Problem:
    """An environment together with its discretization.

    Attributes
    ----------
    name : str
        Short name (``"cartpole"``) or Gymnasium id.
    env_id : str
        Gymnasium id passed to ``gymnasium.make`` / ``gymnasium.make_vec``.
    env_kwargs : dict
        Keyword arguments for the environment constructor.
    state_dims : tuple of int
        Number of bins of each state component (the state modes d_1..d_{D_S}).
    action_dims : tuple of int
        Number of bins of each action component (the action modes).
    reward_bound : float
        R_max, an upper bound on |r| for one step; V_max = R_max / (1 - gamma).
    encode : callable
        Batch of observations, shape (B, obs_dim...) -> int array (B, D_S).
    decode : callable
        Int array of action indices (B, D_A) -> batch of environment actions.
    vectorized : bool
        Whether ``env_id`` has a native NumPy vector version (``make_vec``).
    """

    name: str
    env_id: str
    env_kwargs: dict
    state_dims: tuple[int, ...]
    action_dims: tuple[int, ...]
    reward_bound: float
    encode: Callable[[NDArray], NDArray[np.int64]]
    decode: Callable[[NDArray[np.int64]], NDArray]
    vectorized: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the Q-tensor: state modes followed by action modes."""
        return self.state_dims + self.action_dims
