"""A slippery grid with one distant goal: the sparse-reward problem, with its exact model.

The agent starts in the corner ``(0, 0)`` of a ``rows`` x ``columns`` grid and
must reach the opposite corner ``(rows - 1, columns - 1)``. Observations are the
cell ``(row, column)`` (``MultiDiscrete([rows, columns])``, so the state has two
tensor modes); actions are ``Discrete(4)``: 0 left (column - 1), 1 down
(row + 1), 2 right (column + 1), 3 up (row - 1), FrozenLake's order. One step:

1. With probability ``slip`` the move goes in one of the three other
   directions instead, each with probability ``slip / 3``.
2. A move into the border leaves the agent where it is.
3. Entering the goal pays ``goal_reward`` and terminates the episode; every
   other step pays ``-step_cost``.

Episodes are truncated after 200 steps when made with
``gymnasium.make("rl/GoalGrid-v0")`` (a ``TimeLimit``; ``max_episode_steps=``
of ``gymnasium.make`` sets another cap, also through ``env_kwargs``).

With the defaults (10 x 10, slip 0.1, +10, -0.1 a step, 200 steps) the
shortest path takes 18 steps, so the best return is about 8.1 (8.3 without
slips), and an agent that never finds the goal scores -20. The only positive
reward lies 18 steps from the start; random play reaches it in about a fifth of
its episodes (mean return about -16): the problem tests exploration.

The exact model (`rl.envs.ExactModel`) makes the goal absorbing with reward 0
after it is entered, so value iteration's values are the expected discounted
returns of the episodic problem without the cap.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from rl.envs.factored import MAX_MODEL_ENTRIES
from rl.validation import MAX_BINS, check_ints, check_real

#: Moves of actions 0-3 (left, down, right, up) as (row, column) steps.
MOVES = np.array([[0, -1], [1, 0], [0, 1], [-1, 0]], dtype=np.int64)


class GoalGrid(gym.Env[NDArray[np.int64], int]):
    """A slippery ``rows`` x ``columns`` grid, start (0, 0), one terminal goal in the far corner.

    Parameters
    ----------
    shape : pair of int, default (10, 10)
        ``(rows, columns)``, each in [2, `rl.validation.MAX_BINS`].
    slip : float, default 0.1
        Probability in [0, 1] that a move goes in one of the three other
        directions (uniformly) instead.
    goal_reward : float, default 10.0
        Reward of the step that enters the goal (> 0).
    step_cost : float, default 0.1
        Cost of every other step (>= 0): its reward is ``-step_cost``.
    gamma : float, default 0.99
        Default discount factor of the exact model.

    Attributes
    ----------
    state_dims : tuple of int
        ``(rows, columns)``, the observation's modes.
    action_dims : tuple of int
        ``(4,)``.
    reward_bound : float
        ``max(goal_reward, step_cost)``, the largest |r| of one step.
    reward_size : float
        ``step_cost`` (``goal_reward`` without a step cost), the |r| of a typical step.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        shape: tuple[int, int] = (10, 10),
        slip: float = 0.1,
        goal_reward: float = 10.0,
        step_cost: float = 0.1,
        gamma: float = 0.99,
    ) -> None:
        dims = check_ints("shape", shape, 2, MAX_BINS)
        if len(dims) != 2:
            raise ValueError(
                f"The 'shape' parameter must be two ints (rows, columns). Got {shape!r} instead."
            )
        self.state_dims: tuple[int, ...] = dims
        self.action_dims: tuple[int, ...] = (len(MOVES),)
        self.slip = check_real("slip", slip, 0.0, 1.0)
        self.goal_reward = check_real("goal_reward", goal_reward, 0.0, low_open=True)
        self.step_cost = check_real("step_cost", step_cost, 0.0)
        self.gamma = check_real("gamma", gamma, 0.0, 1.0, high_open=True)
        self.reward_bound = max(self.goal_reward, self.step_cost)
        self.reward_size = self.step_cost or self.goal_reward
        self.goal = np.array(dims, dtype=np.int64) - 1
        self.observation_space = spaces.MultiDiscrete(dims, dtype=np.int64)
        self.action_space = spaces.Discrete(len(MOVES))
        self.state: NDArray[np.int64] | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[NDArray[np.int64], dict[str, Any]]:
        """Start in the corner (0, 0)."""
        super().reset(seed=seed)
        self.state = np.zeros(2, dtype=np.int64)
        return self.state.copy(), {}

    def step(self, action: int) -> tuple[NDArray[np.int64], float, bool, bool, dict[str, Any]]:
        """Move (slipping with probability ``slip``); +goal_reward and terminate at the goal."""
        if self.state is None:
            raise RuntimeError("Call reset() before step().")
        if not self.action_space.contains(action):
            raise ValueError(f"Action {action!r} outside {self.action_space}.")
        direction = int(action)
        u = self.np_random.random()
        if u < self.slip:  # one of the three other directions, from the same draw
            direction = (direction + 1 + min(int(3 * u / self.slip), 2)) % len(MOVES)
        self.state = self._moved(self.state, direction)
        terminated = bool(np.array_equal(self.state, self.goal))
        reward = self.goal_reward if terminated else -self.step_cost
        return self.state.copy(), float(reward), terminated, False, {}

    def _moved(self, cell: NDArray[np.int64], direction: int) -> NDArray[np.int64]:
        return np.clip(cell + MOVES[direction], 0, self.goal)

    # ----------------------------------------------------------------- model
    @property
    def initial_distribution(self) -> NDArray[np.float64]:
        """All mass on the start (0, 0)."""
        start = np.zeros(self.state_dims)
        start[0, 0] = 1.0
        return start

    @property
    def transition(self) -> NDArray[np.float64]:
        """P(s' | s, a), shape (rows, columns, 4, rows, columns); the goal is absorbing.

        Refused (ValueError) above `rl.envs.factored.MAX_MODEL_ENTRIES` entries.
        """
        rows, columns = self.state_dims
        moves = len(MOVES)
        entries = (rows * columns) ** 2 * moves
        if entries > MAX_MODEL_ENTRIES:
            raise ValueError(
                f"The dense model would hold {entries} transition entries "
                f"(limit {MAX_MODEL_ENTRIES}); choose a smaller shape."
            )
        transition = np.zeros((rows, columns, moves, rows, columns))
        for r in range(rows):
            for c in range(columns):
                cell = np.array([r, c])
                if np.array_equal(cell, self.goal):
                    transition[r, c, :, r, c] = 1.0
                    continue
                for action in range(moves):
                    for direction in range(moves):
                        p = 1.0 - self.slip if direction == action else self.slip / (moves - 1)
                        nr, nc = self._moved(cell, direction)
                        transition[r, c, action, nr, nc] += p
        return transition

    @property
    def reward(self) -> NDArray[np.float64]:
        """Expected reward r(s, a), shape (rows, columns, 4); 0 at the (absorbing) goal."""
        into_goal = self.transition[..., self.goal[0], self.goal[1]]
        reward = into_goal * self.goal_reward - (1.0 - into_goal) * self.step_cost
        reward[self.goal[0], self.goal[1]] = 0.0
        return reward
