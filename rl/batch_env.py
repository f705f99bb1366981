"""One interface over B environment copies, native vector env or a list of single envs.

The runner steps B replicas in lockstep. Environments with a NumPy vector
version (``problem.vectorized``) are created once with ``gymnasium.make_vec``
in the ``vector_entry_point`` mode with autoreset disabled, so that a copy
whose episode ended stays frozen until the next ``reset``. Other environments
are a list of ``gymnasium.make`` copies, of which only the active ones step.

Either way `BatchEnv` guarantees the same thing to the runner: rows of inactive
copies come back unchanged (last observation, reward 0, both flags False), and
no inactive copy consumes randomness.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import gymnasium
import numpy as np
from numpy.typing import NDArray

from rl.problem import Problem


class StepResult(NamedTuple):
    """What one step of B copies returns.

    Attributes
    ----------
    observations : ndarray, shape (B, ...)
        Next observations; rows of inactive copies are their last observation.
    rewards : ndarray of float64, shape (B,)
        Rewards; 0 for inactive copies.
    terminated, truncated : ndarray of bool, shape (B,)
        Episode-end flags; False for inactive copies.
    """

    observations: NDArray
    rewards: NDArray[np.float64]
    terminated: NDArray[np.bool_]
    truncated: NDArray[np.bool_]


class BatchEnv:
    """B copies of a problem's environment behind one ``reset`` / ``step`` interface.

    Parameters
    ----------
    problem : Problem
        Gives the Gymnasium id, its keyword arguments and whether a native
        vector version exists.
    copies : int
        Number of copies B.
    """

    def __init__(self, problem: Problem, copies: int) -> None:
        self.problem = problem
        self.copies = copies
        self._vector: Any = None
        self._envs: list[gymnasium.Env] = []
        if problem.vectorized:
            self._vector = gymnasium.make_vec(
                problem.env_id,
                num_envs=copies,
                vectorization_mode="vector_entry_point",
                autoreset_mode=gymnasium.vector.AutoresetMode.DISABLED,
                **problem.env_kwargs,
            )
        else:
            self._envs = [
                gymnasium.make(problem.env_id, **problem.env_kwargs) for _ in range(copies)
            ]
        self._last: NDArray | None = None

    def reset(self, seeds: Sequence[int]) -> NDArray:
        """Reset every copy, copy i with ``seeds[i]``, and return the observations (B, ...)."""
        seeds = [int(seed) for seed in seeds]
        if len(seeds) != self.copies:
            raise ValueError(f"Expected {self.copies} seeds, got {len(seeds)}.")
        if self._vector is not None:
            observations, _ = self._vector.reset(seed=seeds)
            observations = np.asarray(observations)
        else:
            observations = np.stack(
                [
                    np.asarray(env.reset(seed=seed)[0])
                    for env, seed in zip(self._envs, seeds, strict=True)
                ]
            )
        self._last = observations.copy()
        return observations

    def step(self, env_actions: Any, active: NDArray[np.bool_]) -> StepResult:
        """Step the active copies with their rows of ``env_actions``.

        Parameters
        ----------
        env_actions : array-like, shape (B, ...)
            One environment action per copy (rows of inactive copies are ignored).
        active : ndarray of bool, shape (B,)
            Copies that step.

        Returns
        -------
        StepResult
        """
        if self._last is None:
            raise RuntimeError("Call reset() before step().")
        if self._vector is not None:
            result = self._step_vector(env_actions, active)
        else:
            result = self._step_list(env_actions, active)
        self._last = result.observations  # a fresh array, never written to afterwards
        return result

    def _step_vector(self, env_actions: Any, active: NDArray[np.bool_]) -> StepResult:
        observations, rewards, terminated, truncated, _ = self._vector.step(env_actions)
        observations = np.array(observations)  # a copy: the env may reuse its buffer
        rewards = np.asarray(rewards, dtype=np.float64)
        terminated = np.asarray(terminated, dtype=bool)
        truncated = np.asarray(truncated, dtype=bool)
        if not active.all():  # frozen copies: enforce the contract whatever the env returned
            idle = ~active
            observations[idle] = self._last[idle]
            rewards = np.where(active, rewards, 0.0)
            terminated, truncated = terminated & active, truncated & active
        return StepResult(observations, rewards, terminated, truncated)

    def _step_list(self, env_actions: Any, active: NDArray[np.bool_]) -> StepResult:
        observations = self._last.copy()
        rewards = np.zeros(self.copies)
        terminated = np.zeros(self.copies, dtype=bool)
        truncated = np.zeros(self.copies, dtype=bool)
        for i in np.flatnonzero(active):
            obs, reward, term, trunc, _ = self._envs[i].step(env_actions[i])
            observations[i] = np.asarray(obs)
            rewards[i], terminated[i], truncated[i] = float(reward), bool(term), bool(trunc)
        return StepResult(observations, rewards, terminated, truncated)

    def close(self) -> None:
        """Close every copy."""
        if self._vector is not None:
            self._vector.close()
        for env in self._envs:
            env.close()
