"""A NumPy vector environment base: B independent copies stepped as one array computation.

`CopiesVectorEnv` owns what every vector environment of ``rl.envs`` shares:
seeding, episode counters and the two supported autoreset modes, so that they
all behave the same way. `NumpyVectorEnv` subclasses supply three pure pieces
(the initial-state sampler, the batched transition kernel and the spaces).

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
- ``step(actions, active=mask)`` (an extension of Gymnasium's signature, used
  by `rl.loop.replicas.ReplicaEnvs`) steps only the copies where ``mask`` is True;
  the others are left exactly as they are (state, counter and flags), earn
  reward 0.0, re-report their flags and are never auto-reset.

The bookkeeping after the transition (commit the new state of the copies
that step, count steps, set the flags) is one compiled kernel, `_commit_step`,
so a step costs a handful of calls whatever B is.
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

from rl.jit import kernel
from rl.validation import check_int

_SUPPORTED_MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED)


def check_autoreset_mode(mode: AutoresetMode | str) -> AutoresetMode:
    """Return ``mode`` as an `AutoresetMode`; refuse a mode the vector environments lack."""
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


def copy_seeds(seed: int | Sequence[int | None] | None, num_envs: int) -> list[int | None]:
    """Return one seed (or None) per copy: ``seed + i`` for an int, the sequence as given."""
    if seed is None:
        return [None] * num_envs
    if isinstance(seed, (int, np.integer)):
        return [int(seed) + i for i in range(num_envs)]
    seeds = list(seed)
    if len(seeds) != num_envs:
        raise ValueError(
            f"The 'seed' parameter must have one entry per copy ({num_envs}). "
            f"Got {len(seeds)} instead."
        )
    return seeds


def reset_mask(options: dict[str, Any] | None, num_envs: int) -> NDArray[np.bool_]:
    """Return the copies a ``reset`` resets: ``options["reset_mask"]``, or all of them."""
    if options is None or options.get("reset_mask") is None:
        return np.ones(num_envs, dtype=np.bool_)
    mask = np.asarray(options["reset_mask"], dtype=np.bool_)
    if mask.shape != (num_envs,):
        raise ValueError(
            f"The 'reset_mask' option must have shape ({num_envs},). Got {mask.shape} instead."
        )
    return mask


@kernel
def _commit_step(
    state: NDArray[np.float64],
    elapsed_steps: NDArray[np.int64],
    terminated_flags: NDArray[np.bool_],
    truncated_flags: NDArray[np.bool_],
    active: NDArray[np.bool_],
    next_state: NDArray[np.float64],
    rewards: NDArray[np.float64],
    terminated: NDArray[np.bool_],
    max_episode_steps: int,
) -> NDArray[np.bool_]:
    """Commit one transition in place for the copies that step.

    A copy steps when it is active and has neither terminated nor been
    truncated: its state becomes ``next_state``, its counter advances and its
    flags are set (truncated once the counter reaches ``max_episode_steps``;
    never when that is negative). The others keep state, counter and flags and
    get reward 0.0 (``rewards`` is written in place). Returns the mask of
    active copies that had already ended (to be auto-reset in NEXT_STEP mode).
    """
    n_copies = state.shape[0]
    ended = np.zeros(n_copies, dtype=np.bool_)
    for i in range(n_copies):
        if not active[i]:
            rewards[i] = 0.0
        elif terminated_flags[i] or truncated_flags[i]:
            ended[i] = True
            rewards[i] = 0.0
        else:
            state[i, :] = next_state[i, :]
            elapsed_steps[i] += 1
            terminated_flags[i] = terminated[i]
            truncated_flags[i] = max_episode_steps >= 0 and elapsed_steps[i] >= max_episode_steps
    return ended


class CopiesVectorEnv(VectorEnv, abc.ABC):
    """B copies with their own random streams, step counters and flags: the contract's bookkeeping.

    Subclasses give the initial-state sampler (`_initial_state`) and their
    ``step``; this class owns the spaces, seeding, ``reset`` (with
    ``reset_mask``), the check of ``step``'s ``active`` mask (`_active`) and
    the auto-reset of ended copies (`_finish_step`).

    Parameters
    ----------
    num_envs : int
        Number of copies B.
    max_episode_steps : int or None
        Truncation horizon of every copy (``None``: never truncate).
    autoreset_mode : AutoresetMode or str
        ``NEXT_STEP`` (default) or ``DISABLED``; see the module docstring.
    single_observation_space, single_action_space : gymnasium.spaces.Space
        Spaces of one copy.
    """

    state_dim: int
    state_dtype: type = np.float64

    def __init__(
        self,
        num_envs: int,
        max_episode_steps: int | None,
        autoreset_mode: AutoresetMode | str,
        single_observation_space: spaces.Space,
        single_action_space: spaces.Space,
    ) -> None:
        self.num_envs = check_int("num_envs", num_envs, 1)
        if max_episode_steps is not None:
            max_episode_steps = check_int("max_episode_steps", max_episode_steps, 1)
        self.max_episode_steps = max_episode_steps
        self.autoreset_mode = check_autoreset_mode(autoreset_mode)
        self.metadata = {"autoreset_mode": self.autoreset_mode, "render_modes": []}
        self.render_mode = None
        self.single_observation_space = single_observation_space
        self.single_action_space = single_action_space
        self.observation_space = batch_space(single_observation_space, self.num_envs)
        self.action_space = batch_space(single_action_space, self.num_envs)
        self._rngs: list[np.random.Generator | None] = [None] * self.num_envs
        self.state = np.zeros((self.num_envs, self.state_dim), dtype=self.state_dtype)
        self.elapsed_steps = np.zeros(self.num_envs, dtype=np.int64)
        self._terminated = np.zeros(self.num_envs, dtype=np.bool_)
        self._truncated = np.zeros(self.num_envs, dtype=np.bool_)
        self._all_active = np.ones(self.num_envs, dtype=np.bool_)

    @abc.abstractmethod
    def _initial_state(self, rng: np.random.Generator) -> NDArray[Any]:
        """Draw one copy's initial state exactly as the single environment does."""

    def _reset_copy(self, i: int, seed: int | None) -> None:
        if seed is not None or self._rngs[i] is None:
            self._rngs[i], _ = seeding.np_random(seed)
        self.state[i] = self._initial_state(self._rngs[i])
        self.elapsed_steps[i] = 0
        self._terminated[i] = False
        self._truncated[i] = False

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[NDArray[Any], dict[str, Any]]:
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
        observations : ndarray, shape (B, state_dim)
        infos : dict
            Empty.
        """
        seeds, mask = copy_seeds(seed, self.num_envs), reset_mask(options, self.num_envs)
        for i in np.flatnonzero(mask):
            self._reset_copy(int(i), seeds[i])
        return self.state.copy(), {}

    def _active(self, active: NDArray[np.bool_] | None) -> NDArray[np.bool_]:
        """Return ``step``'s ``active`` mask checked (every copy when None)."""
        if active is None:
            return self._all_active
        active = np.asarray(active, dtype=np.bool_)
        if active.shape != (self.num_envs,):
            raise ValueError(
                f"The 'active' parameter must have shape ({self.num_envs},). "
                f"Got {active.shape} instead."
            )
        return active

    def _finish_step(
        self, rewards: NDArray[np.float64], ended: NDArray[np.bool_]
    ) -> tuple[
        NDArray[Any],
        NDArray[np.float64],
        NDArray[np.bool_],
        NDArray[np.bool_],
        dict[str, Any],
    ]:
        """Auto-reset the ``ended`` copies (``NEXT_STEP``); return ``step``'s five values."""
        if self.autoreset_mode == AutoresetMode.NEXT_STEP and ended.any():
            for i in np.flatnonzero(ended):
                self._reset_copy(int(i), None)  # reports reward 0 and both flags False
        return (
            self.state.copy(),
            rewards,
            self._terminated.copy(),
            self._truncated.copy(),
            {},
        )


class NumpyVectorEnv(CopiesVectorEnv):
    """B copies of a small physical system: a batched transition kernel and `_commit_step`.

    Parameters
    ----------
    num_envs, max_episode_steps, autoreset_mode, single_observation_space, single_action_space
        As in `CopiesVectorEnv`.
    """

    @abc.abstractmethod
    def _transition(
        self, state: NDArray[np.float64], action: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
        """Batched dynamics: (next_state, reward, terminated) for every row."""

    def step(
        self, actions: NDArray, active: NDArray[np.bool_] | None = None
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
            One action per copy; rows of copies that are being reset, frozen
            or inactive are ignored.
        active : ndarray of bool, shape (B,), optional
            Copies to step (all when None); the others are left as they are,
            earn reward 0.0 and re-report their flags.

        Returns
        -------
        observations : ndarray, shape (B, obs_dim)
        rewards : ndarray of float64, shape (B,)
        terminations, truncations : ndarray of bool, shape (B,)
        infos : dict
            Empty.
        """
        actions = np.asarray(actions, dtype=np.float64).reshape(self.num_envs, -1)
        active = self._active(active)
        next_state, rewards, terminated = self._transition(self.state, actions)
        max_steps = -1 if self.max_episode_steps is None else int(self.max_episode_steps)
        ended = _commit_step(
            self.state,
            self.elapsed_steps,
            self._terminated,
            self._truncated,
            active,
            next_state,
            rewards,
            terminated,
            max_steps,
        )
        return self._finish_step(rewards, ended)
