"""The runner's B environment copies (replicas): one interface over a vector env or a list.

The runner advances B replicas (one per seed) in lockstep, each with its own
copy of the problem's environment. Environments with a NumPy vector version
(``problem.vectorized``: a registered ``vector_entry_point``) are created once
with ``gymnasium.make_vec`` in the ``vector_entry_point`` mode with autoreset
disabled, so that a copy whose episode ended stays frozen until it is reset;
a user's vector environment that does not declare that mode is not used.
Other environments (and those) are a list of copies (``problem.make_env()``),
of which only the active ones step, in a synchronous loop; Tuple and Dict
observations are flattened there (``problem.as_array``).

Either way `ReplicaEnvs` guarantees the same thing to the runner:

- ``reset(seeds, mask)`` resets only the masked copies (all when ``mask`` is
  None), copy i with ``seeds[i]``, and returns every copy's observation, so
  each replica can start its next episode while the others continue. A copy
  reset with a seed gives the observation ``gymnasium.make(id).reset(seed=)``
  gives, whatever the other copies do.
- ``step(env_actions, active)`` steps only the active copies; inactive ones
  are left exactly as they were and report their last observation, reward 0
  and both flags False. No inactive copy consumes randomness.

An exception raised by a copy's ``reset`` or ``step``, and an observation
whose shape is not the observation space's (`rl.problems.Problem.as_array`),
becomes `rl.problems.EnvFailure`: one line naming the environment, the replica
and its seed, with the original exception as its cause.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import gymnasium
import numpy as np
from numpy.typing import NDArray

from rl.envs.vector import NumpyVectorEnv
from rl.problems import EnvFailure, ObservationShapeError, Problem


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


def _make_vector(problem: Problem, copies: int) -> Any:
    """Return ``gymnasium.make_vec`` of the problem's vector entry point, or None if unfit.

    A user's vector environment is used only if it honours the contract: its
    ``metadata["autoreset_mode"]`` is ``AutoresetMode.DISABLED`` once made
    with that mode. Otherwise, and when its constructor raises (Gymnasium's
    own ``CartPoleVectorEnv`` rejects ``autoreset_mode``), the copies are
    stepped in a synchronous loop, which gives the same results; an error of
    the environment itself then shows when the single copies are made.
    """
    disabled = gymnasium.vector.AutoresetMode.DISABLED
    try:
        vector = gymnasium.make_vec(
            problem.env_id,
            num_envs=copies,
            vectorization_mode="vector_entry_point",
            autoreset_mode=disabled,
            **problem.env_kwargs,
        )
    except Exception:  # noqa: BLE001 - any constructor that cannot honour the contract
        return None
    if isinstance(vector, NumpyVectorEnv) or vector.metadata.get("autoreset_mode") == disabled:
        return vector
    vector.close()
    return None


def non_finite_error(
    env_id: str, replica: int, seed: int, reward: float, observation: Any
) -> ValueError:
    """Return the error for a non-finite reward or observation of one replica's copy."""
    return ValueError(
        f"Environment {env_id!r} returned a non-finite reward or observation for replica "
        f"{replica} (seed {seed}): reward {reward!r}, observation {observation!r}."
    )


class ReplicaEnvs:
    """B copies of a problem's environment, one per replica, behind ``reset`` / ``step``.

    Parameters
    ----------
    problem : Problem
        Gives the Gymnasium id, its keyword arguments and whether a native
        vector version exists.
    copies : int
        Number of copies B.
    seeds : sequence of int, optional
        The replicas' seeds, named in messages (default 0, 1, ..., B - 1).
    """

    def __init__(self, problem: Problem, copies: int, seeds: Sequence[int] | None = None) -> None:
        self.problem = problem
        self.copies = copies
        self.seeds = list(range(copies)) if seeds is None else [int(seed) for seed in seeds]
        self._vector: Any = None
        self._envs: list[gymnasium.Env] = []
        if problem.vectorized:
            self._vector = _make_vector(problem, copies)
        self._steps_active_only = isinstance(self._vector, NumpyVectorEnv) or getattr(
            self._vector, "steps_active_only", False
        )  # True: honours step(actions, active=mask) as rl.envs.vector does
        if self._vector is None:
            self._envs = [problem.make_env() for _ in range(copies)]
        self._last: NDArray | None = None

    @property
    def vector(self) -> Any:
        """The Gymnasium vector environment holding the copies, or None for a list of copies."""
        return self._vector

    def reset(
        self, seeds: Sequence[int | None] | NDArray, mask: NDArray[np.bool_] | None = None
    ) -> NDArray:
        """Reset the masked copies (all when ``mask`` is None), copy i with ``seeds[i]``.

        Parameters
        ----------
        seeds : sequence of int or None, shape (B,)
            One seed per copy; entries of copies not reset are ignored. None
            resets a copy without reseeding it (its own stream continues).
        mask : ndarray of bool, shape (B,), optional
            Copies to reset. The first call must reset every copy.

        Returns
        -------
        observations : ndarray, shape (B, ...)
            Every copy's observation: the new first observation of the copies
            reset, the last observation of the others.
        """
        if len(seeds) != self.copies:
            raise ValueError(f"Expected {self.copies} seeds, got {len(seeds)}.")
        if mask is None:
            mask = np.ones(self.copies, dtype=bool)
        else:
            mask = np.asarray(mask, dtype=bool)
            if mask.shape != (self.copies,):
                raise ValueError(
                    f"The 'mask' parameter must have shape ({self.copies},). "
                    f"Got {mask.shape} instead."
                )
            if self._last is None and not mask.all():
                raise RuntimeError("The first reset() must reset every copy.")
        chosen = np.flatnonzero(mask)
        seed_list: list[int | None] = [None] * self.copies
        for i in chosen:
            seed_list[i] = None if seeds[i] is None else int(seeds[i])
        if self._vector is not None:
            try:
                observations, _ = self._vector.reset(seed=seed_list, options={"reset_mask": mask})
                observations = self._checked_batch(np.asarray(observations))
            except Exception as error:  # noqa: BLE001 - any error of the user's code, reported
                raise self._failure("reset", None, error) from error
        else:
            first = [self._reset_copy(i, seed_list[i]) for i in chosen]
            if self._last is None:
                observations = np.stack(first)
            else:
                observations = self._last.copy()
                for i, obs in zip(chosen, first, strict=True):
                    observations[i] = obs
        self._last = observations
        return observations.copy()

    def _failure(self, call: str, copy: int | None, error: BaseException) -> EnvFailure:
        """Return the failure of ``call`` on one copy (None: the vector environment)."""
        if copy is None:
            seeds = f"{self.seeds[0]}..{self.seeds[-1]}" if self.copies > 1 else self.seeds[0]
            where = f"{call}() of its vector version (every replica, seeds {seeds})"
        else:
            where = f"{call}() of replica {copy} (seed {self.seeds[copy]})"
        return EnvFailure.during(self.problem.env_id, where, error)

    def _checked_batch(self, observations: NDArray) -> NDArray:
        expected = self.problem.observation_shape
        if expected is not None and observations.shape != (self.copies, *expected):
            raise ObservationShapeError(
                f"The observations have shape {observations.shape}; {self.copies} copies of the "
                f"observation space of {self.problem.env_id!r} have shape "
                f"{(self.copies, *expected)}."
            )
        return observations

    def _reset_copy(self, copy: int, seed: int | None) -> NDArray:
        try:
            return self.problem.as_array(self._envs[copy].reset(seed=seed)[0])
        except Exception as error:  # noqa: BLE001 - any error of the user's code, reported
            raise self._failure("reset", copy, error) from error

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
        if self._steps_active_only:  # rl.envs.vector leaves inactive copies untouched
            observations, rewards, terminated, truncated, _ = self._vector.step(
                env_actions, active=active
            )
        else:  # another vector env: it steps every copy that has not ended
            try:
                observations, rewards, terminated, truncated, _ = self._vector.step(env_actions)
                # a copy: the env may reuse its buffer
                observations = self._checked_batch(np.array(observations))
            except Exception as error:  # noqa: BLE001 - any error of the user's code, reported
                raise self._failure("step", None, error) from error
            rewards = np.asarray(rewards, dtype=np.float64)
            terminated = np.asarray(terminated, dtype=bool)
            truncated = np.asarray(truncated, dtype=bool)
        if not active.all():  # enforce the contract for inactive copies
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
            try:
                obs, reward, term, trunc, _ = self._envs[i].step(env_actions[i])
                observations[i] = self.problem.as_array(obs)
                rewards[i], terminated[i], truncated[i] = float(reward), bool(term), bool(trunc)
            except Exception as error:  # noqa: BLE001 - any error of the user's code, reported
                raise self._failure("step", int(i), error) from error
        return StepResult(observations, rewards, terminated, truncated)

    def close(self) -> None:
        """Close every copy."""
        if self._vector is not None:
            self._vector.close()
        for env in self._envs:
            env.close()
