"""B copies of `rl.envs.lowrank_mdp.PlantedRankMDP` stepped as one array computation.

`PlantedRankVector` is the vector version of ``rl/PlantedRankMDP-v0``
(``gymnasium.make_vec``): copy ``i`` reproduces a single environment reset
with the same seed, draw for draw and bit for bit. It builds the model once
for all copies and tabulates, for every joint index (s, a), the reward and
the cumulative law of the latent component, computed with the same floating
point operations in the same order as the single environment's step; a step
then draws each stepping copy's uniforms from its own generator (as many, in
the same order, as the single environment draws) and one compiled kernel
(`rl.jit.kernel`) samples every stepping copy's next state from them by the
same inverse-CDF comparisons. It follows the contract of `rl.envs.vector` (autoreset
modes ``NEXT_STEP`` and ``DISABLED``, ``reset_mask``, ``step(actions,
active=mask)``; an inactive or ended copy consumes no randomness).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode
from numpy.typing import NDArray

from rl.envs.lowrank_mdp import PlantedRankMDP
from rl.envs.vector import CopiesVectorEnv
from rl.jit import kernel


def latent_cdf_table(env: PlantedRankMDP) -> NDArray[np.float64]:
    """Return the latent component's cumulative law at every joint index, shape (S * A, r + 1).

    Row ``ravel(s, a)`` equals the ``latent_cdf`` of the single environment's
    step from ``s`` with ``a`` bit for bit: the weights are the same products
    of factor rows, taken in the same order, then summed and accumulated the
    same way.
    """
    dims = env.state_dims + env.action_dims
    index = np.unravel_index(np.arange(math.prod(dims)), dims)
    weights = np.full((index[0].size, env.rank), env.mix_scale)
    for factor, i in zip(env.mix_factors, index, strict=True):
        weights = weights * factor[i]
    stay = 1.0 - weights.sum(axis=1, keepdims=True)
    return np.cumsum(np.concatenate([stay, weights], axis=1), axis=1)


class PlantedRankVector(CopiesVectorEnv):
    """B copies of `rl.envs.lowrank_mdp.PlantedRankMDP` (module docstring).

    Parameters
    ----------
    num_envs : int
        Number of copies B.
    autoreset_mode : AutoresetMode or str
        ``NEXT_STEP`` (default) or ``DISABLED``; see `rl.envs.vector`.
    max_episode_steps : int or None, default 100
        Truncation horizon of every copy (``None``: never truncate).
    **env_kwargs
        The arguments of `rl.envs.lowrank_mdp.PlantedRankMDP` (one model for all copies).
    """

    steps_active_only = True  # honours step(actions, active=mask) (rl.loop.replicas.ReplicaEnvs)
    state_dtype = np.int64

    def __init__(
        self,
        num_envs: int = 1,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        max_episode_steps: int | None = 100,
        **env_kwargs: Any,
    ) -> None:
        self.single_env = env = PlantedRankMDP(**env_kwargs)
        self.state_dim = len(env.state_dims)
        super().__init__(
            num_envs, max_episode_steps, autoreset_mode, env.observation_space, env.action_space
        )
        self._action_dims = np.asarray(env.action_dims)
        self._rewards_flat = env.reward.reshape(-1)
        self._latent_cdf = latent_cdf_table(env)
        self._law_cdf = np.stack(env._law_cdf)  # (D_S, r + 1, mode size)
        dims = env.state_dims + env.action_dims
        self._joint_strides = np.array(
            [math.prod(dims[n + 1 :]) for n in range(len(dims))], dtype=np.int64
        )
        self._draws_per_step = 1 + len(env.state_dims)
        self._initial_cdf = np.cumsum(env.initial_distribution.reshape(-1))

    def _initial_state(self, rng: np.random.Generator) -> tuple[np.intp, ...]:
        """Draw one copy's initial state as `rl.envs.factored.FactoredMDP.reset` does."""
        cdf = self._initial_cdf
        flat = min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), cdf.size - 1)
        return np.unravel_index(flat, self.single_env.state_dims)

    def step(
        self, actions: NDArray, active: NDArray[np.bool_] | None = None
    ) -> tuple[
        NDArray[np.int64],
        NDArray[np.float64],
        NDArray[np.bool_],
        NDArray[np.bool_],
        dict[str, Any],
    ]:
        """Step the copies (all, or those in ``active``) with one action vector each.

        Parameters
        ----------
        actions : array of int, shape (B, D_A)
            One action per copy; rows of copies that do not step are ignored.
        active : ndarray of bool, shape (B,), optional
            Copies to step (all when None); see `rl.envs.vector` for the others.

        Returns
        -------
        observations : ndarray of int64, shape (B, D_S)
        rewards : ndarray of float64, shape (B,)
        terminations, truncations : ndarray of bool, shape (B,)
        infos : dict
            Empty.
        """
        if any(rng is None for rng in self._rngs):
            raise RuntimeError("Call reset() before step().")
        actions = np.asarray(actions, dtype=np.int64).reshape(self.num_envs, -1)
        active = self._active(active)
        ended = active & (self._terminated | self._truncated)
        stepping = np.flatnonzero(active & ~ended)
        rewards = np.zeros(self.num_envs)
        if stepping.size:
            rewards[stepping] = self._advance(stepping, actions[stepping])
        return self._finish_step(rewards, ended)

    def _advance(self, copies: NDArray[np.int64], actions: NDArray[np.int64]) -> NDArray:
        """Step ``copies`` with ``actions``; return their rewards."""
        wrong = np.any((actions < 0) | (actions >= self._action_dims), axis=1)
        if wrong.any():
            bad = actions[np.flatnonzero(wrong)[0]]
            raise ValueError(f"Action {bad} outside {self.single_env.action_dims}.")
        draws = np.stack([self._rngs[i].random(self._draws_per_step) for i in copies])
        rewards = np.empty(copies.size)
        _sample_steps(
            self.state,
            copies,
            actions,
            draws,
            self._joint_strides,
            self._latent_cdf,
            self._law_cdf,
            self._rewards_flat,
            rewards,
        )
        self.elapsed_steps[copies] += 1
        if self.max_episode_steps is not None:
            self._truncated[copies] = self.elapsed_steps[copies] >= self.max_episode_steps
        return rewards


@kernel
def _sample_steps(
    state: NDArray[np.int64],
    copies: NDArray[np.int64],
    actions: NDArray[np.int64],
    draws: NDArray[np.float64],
    joint_strides: NDArray[np.int64],
    latent_cdf: NDArray[np.float64],
    law_cdf: NDArray[np.float64],
    rewards_flat: NDArray[np.float64],
    rewards: NDArray[np.float64],
) -> None:
    """Sample the next state of each copy in ``copies`` in place; write their rewards.

    Row k of ``draws`` holds copy ``copies[k]``'s uniforms: the first picks the
    latent component (inverse CDF, `rl.envs.factored.sample_categorical`), the
    others each next-state component from its law ``law_cdf[n, latent]``.
    """
    n_modes = state.shape[1]
    for k in range(copies.size):
        b = copies[k]
        joint = 0
        for n in range(n_modes):
            joint += state[b, n] * joint_strides[n]
        for m in range(actions.shape[1]):
            joint += actions[k, m] * joint_strides[n_modes + m]
        rewards[k] = rewards_flat[joint]
        latent = _inverse_cdf(latent_cdf[joint], draws[k, 0])
        for n in range(n_modes):
            state[b, n] = _inverse_cdf(law_cdf[n, latent], draws[k, 1 + n])


@kernel
def _inverse_cdf(cdf: NDArray[np.float64], u: float) -> int:
    """Return the number of entries of ``cdf`` at most ``u``, clipped to the last index."""
    count = 0
    for value in cdf:
        count += u >= value
    return min(count, cdf.size - 1)
