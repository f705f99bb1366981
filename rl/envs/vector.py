"""A NumPy vector environment base: B independent copies stepped as one array computation.

Subclasses supply three pure pieces (the initial-state sampler, the batched
transition kernel and the spaces); this class owns seeding, episode counters
and the two supported autoreset modes, so that every vector environment of
``rl.envs`` behaves the same way.

Contract
--------
- ``reset(seed=s)`` seeds copy ``i`` with ``s + i`` (an int) or ``s[i]`` (a
  sequence), each copy with its own ``numpy.random.Generator`` created exactly
  as `gymnasium.Env.reset` creates ``np_random``, so copy ``i`` reproduces a
  single environment reset with the same seed, draw for draw.
- ``AutoresetMode.NEXT_STEP`` (default, Gymnasium's convention): the step after
  a copy terminated or was truncated resets it (its action is ignored) and
  returns the first observation, reward 0 and both flags False.
- ``AutoresetMode.DISABLED``: a copy that terminated or was truncated is frozen
  until it is reset: stepping it leaves its state unchanged, returns its last
  observation, reward 0.0, re-reports its flags and consumes no randomness.
  ``reset(options={"reset_mask": mask})`` resets only the masked copies;
  a plain ``reset()`` resets all of them.
- Truncation reproduces `gymnasium.wrappers.TimeLimit`: a copy is truncated
  when its step count reaches ``max_episode_steps`` (possibly together with
  termination).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from numpy.typing import NDArray

_SUPPORTED_MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED)


def _check_autoreset_mode(mode: AutoresetMode | str) -> AutoresetMode:
    try:
        mode = AutoresetMode(mode)
    except ValueError:
        mode = None
    if mode not in _SUPPORTED_MODES:
        raise ValueError(
            "The 'autoreset_mode' parameter must be AutoresetMode.NEXT_STEP or "
            f"AutoresetMode.DISABLED. Got {mode!r} instead."
        )
    return mode


class NumpyVectorEnv(VectorEnv, abc.ABC):
    """B copies of a small physical system with per-copy random streams.

    Parameters
    ----------
    num_envs : int
        Number of copies B.
    max_episode_steps : int or None
        Truncation horizon of every copy (``None``: never truncate).
    autoreset_mode : AutoresetMode or str
        ``NEXT_STEP`` (default) or ``DISABLED``; see the module docstring.
    single_observation_space, single_action_space : gymnasium.spaces.Box
        Spaces of one copy.
    """

    state_dim: int

    def __init__(
        self,
        num_envs: int,
        max_episode_steps: int | None,
        autoreset_mode: AutoresetMode | str,
        single_observation_space: spaces.Box,
        single_action_space: spaces.Box,
    ) -> None:
        if not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(
                f"The 'num_envs' parameter must be an int >= 1. Got {num_envs!r} instead."
            )
        if max_episode_steps is not None and (
            not isinstance(max_episode_steps, (int, np.integer)) or max_episode_steps < 1
        ):
            raise ValueError(
                "The 'max_episode_steps' parameter must be an int >= 1 or None. "
                f"Got {max_episode_steps!r} instead."
            )
        self.num_envs = int(num_envs)
        self.max_episode_steps = max_episode_steps
        self.autoreset_mode = _check_autoreset_mode(autoreset_mode)
        self.metadata = {"autoreset_mode": self.autoreset_mode, "render_modes": []}
        self.render_mode = None
        self.single_observation_space = single_observation_space
        self.single_action_space = single_action_space
        self.observation_space = batch_space(single_observation_space, self.num_envs)
        self.action_space = batch_space(single_action_space, self.num_envs)
        self._rngs: list[np.random.Generator | None] = [None] * self.num_envs
        self.state = np.zeros((self.num_envs, self.state_dim), dtype=np.float64)
        self.elapsed_steps = np.zeros(self.num_envs, dtype=np.int64)
        self._terminated = np.zeros(self.num_envs, dtype=np.bool_)
        self._truncated = np.zeros(self.num_envs, dtype=np.bool_)

    # ----------------------------------------------------------------- hooks
    @abc.abstractmethod
    def _initial_state(self, rng: np.random.Generator) -> NDArray[np.float64]:
        """Draw one copy's initial state exactly as the single environment does."""

    @abc.abstractmethod
    def _transition(
        self, state: NDArray[np.float64], action: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
        """Batched dynamics: (next_state, reward, terminated) for every row."""

    # ---------------------------------------------------------------- seeding
    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, (int, np.integer)):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(
                f"The 'seed' parameter must have one entry per copy ({self.num_envs}). "
                f"Got {len(seeds)} instead."
            )
        return seeds

    def _reset_copy(self, i: int, seed: int | None) -> None:
        if seed is not None or self._rngs[i] is None:
            self._rngs[i], _ = seeding.np_random(seed)
        self.state[i] = self._initial_state(self._rngs[i])
        self.elapsed_steps[i] = 0
        self._terminated[i] = False
        self._truncated[i] = False

    # -------------------------------------------------------------- interface
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[NDArray[np.float64], dict[str, Any]]:
        """Reset all copies, or those in ``options["reset_mask"]``.

        Parameters
        ----------
        seed : int, sequence of int or None
            An int seeds copy ``i`` with ``seed + i``; a sequence gives one seed
            (or ``None``) per copy. Unseeded copies continue their own stream.
        options : dict, optional
            ``{"reset_mask": bool array (B,)}`` resets only the masked copies;
            the others keep their state, counters and flags.

        Returns
        -------
        observations : ndarray, shape (B, obs_dim)
        infos : dict
            Empty.
        """
        seeds = self._seeds(seed)
        mask = np.ones(self.num_envs, dtype=np.bool_)
        if options is not None and options.get("reset_mask") is not None:
            mask = np.asarray(options["reset_mask"], dtype=np.bool_)
            if mask.shape != (self.num_envs,):
                raise ValueError(
                    f"The 'reset_mask' option must have shape ({self.num_envs},). "
                    f"Got {mask.shape} instead."
                )
        for i in np.flatnonzero(mask):
            self._reset_copy(int(i), seeds[i])
        return self.state.copy(), {}

    def step(
        self, actions: NDArray
    ) -> tuple[
        NDArray[np.float64],
        NDArray[np.float64],
        NDArray[np.bool_],
        NDArray[np.bool_],
        dict[str, Any],
    ]:
        """Step every copy once (see the module docstring for ended copies).

        Parameters
        ----------
        actions : array, shape (B,) + single action shape
            One action per copy; rows of copies that are being reset or are
            frozen are ignored.

        Returns
        -------
        observations : ndarray, shape (B, obs_dim)
        rewards : ndarray of float64, shape (B,)
        terminations, truncations : ndarray of bool, shape (B,)
        infos : dict
            Empty.
        """
        actions = np.asarray(actions, dtype=np.float64).reshape(self.num_envs, -1)
        ended = self._terminated | self._truncated
        next_state, rewards, terminated = self._transition(self.state, actions)
        if not ended.any():
            self.state = next_state
            self.elapsed_steps += 1
        else:
            active = ~ended
            self.state[active] = next_state[active]
            self.elapsed_steps[active] += 1
            rewards = np.where(active, rewards, 0.0)
            terminated = np.where(active, terminated, self._terminated)
        truncated = (
            self._truncated.copy()
            if self.max_episode_steps is None
            else self.elapsed_steps >= self.max_episode_steps
        )
        if ended.any():
            truncated = np.where(ended, self._truncated, truncated)
            if self.autoreset_mode == AutoresetMode.NEXT_STEP:
                for i in np.flatnonzero(ended):
                    self._reset_copy(int(i), None)
                terminated = np.where(ended, False, terminated)
                truncated = np.where(ended, False, truncated)
        self._terminated = np.asarray(terminated, dtype=np.bool_)
        self._truncated = np.asarray(truncated, dtype=np.bool_)
        return (
            self.state.copy(),
            np.asarray(rewards, dtype=np.float64),
            self._terminated.copy(),
            self._truncated.copy(),
            {},
        )
