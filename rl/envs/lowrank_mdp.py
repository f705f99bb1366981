"""A random factored MDP whose transition and reward tensors have low CP rank.

States are vectors ``s = (s_1, ..., s_{D_S})`` and actions ``a = (a_1, ...,
a_{D_A})``; write ``i = (s, a)`` for the joint index with ``N = D_S + D_A``
components. With ``r = rank``, the model is::

    phi_k(s, a) = c prod_n g_n[i_n, k]                  k = 1..r, g > 0
    mu_k(s')    = prod_n m_{n,k}[s'_n]                  k = 0..r, each m a distribution
    P(s' | s, a) = (1 - sum_k phi_k(s, a)) mu_0(s') + sum_k phi_k(s, a) mu_k(s')
    R(s, a)     = sum_k w_k prod_n h_n[i_n, k],         scaled so that max |R| = 1

where ``c`` makes ``max_{s,a} sum_k phi_k = 1`` (a global constant, so each
``phi_k`` stays rank one). P is a CP tensor of rank r + 1 over (s, a, s') and
R has CP rank at most r, so

    Q*(s, a) = R(s, a) + gamma <mu_0, V*> + gamma sum_k phi_k(s, a) <mu_k - mu_0, V*>

has CP rank at most 2 r + 1 as a tensor over (s, a): the low-rank structure
that TEQL assumes (Assumption 1 with B_R = 0 at rank 2r + 1). Sampling a step
draws the latent k (0 with probability 1 - sum_k phi_k) and then each
next-state component independently from ``m_{n,k}``. The reward is
deterministic, the first state uniform, and the problem never terminates
(100 steps per episode with ``gymnasium.make``).

The model is drawn once from ``model_seed`` at construction; ``reset(seed=)``
seeds only the trajectory.

References
----------
.. [1] C. Jin, Z. Yang, Z. Wang, M. I. Jordan, "Provably efficient reinforcement
   learning with linear function approximation", COLT 2020 (low-rank MDPs).
.. [2] S. Rozada, S. Paternain, A. G. Marques, "Tensor and matrix low-rank
   value-function approximation in reinforcement learning", IEEE TSP, 2024.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from rl.envs.factored import FactoredMDP, sample_categorical
from rl.validation import MAX_BINS, MAX_RANK, check_int, check_ints, check_memory, check_real


def _rank_one(factors: Sequence[NDArray[np.float64]], k: int) -> NDArray[np.float64]:
    """Outer product of column k of each factor."""
    out = np.ones(())
    for factor in factors:
        out = np.multiply.outer(out, factor[:, k])
    return out


def chain_values(
    weights: NDArray[np.float64],
    rewards: NDArray[np.float64],
    laws: NDArray[np.float64],
    gamma: float,
) -> NDArray[np.float64]:
    """Discounted values of B Markov reward processes with transitions ``weights @ laws``.

    Solves ``V = rewards + gamma (weights @ laws) V`` for each process by the
    Woodbury identity (`LowRankMDP.policy_values`): a solve of size K per
    process, one process at a time, so that a process's values never depend
    on the others in the batch, bit for bit.

    Parameters
    ----------
    weights : ndarray, shape (B, n, K)
        Row s: the weights of the K laws from state s (nonnegative, summing to one).
    rewards : ndarray, shape (B, n)
        Expected reward per state.
    laws : ndarray, shape (K, n)
        The next-state laws.
    gamma : float
        Discount factor in [0, 1).

    Returns
    -------
    ndarray of float64, shape (B, n)
    """
    identity = np.eye(laws.shape[0])
    values = np.empty(np.shape(rewards))
    for b, (weight, reward) in enumerate(zip(weights, rewards, strict=True)):
        y = np.linalg.solve(identity - gamma * (laws @ weight), laws @ reward)  # M^T U, M^T r
        values[b] = reward + gamma * (weight @ y)
    return values


class LowRankMDP(FactoredMDP):
    """A seeded random MDP with rank-r factored transitions and rewards (exact model).

    Parameters
    ----------
    state_dims : sequence of int, default (4, 4, 4)
        Sizes of the state components.
    action_dims : sequence of int, default (3, 3)
        Sizes of the action components.
    rank : int, default 2
        Number r of latent transition and reward components; Q* has CP rank
        at most 2 r + 1.
    concentration : float, default 0.5
        Dirichlet concentration of the next-state component laws (smaller is
        more deterministic).
    model_seed : int, default 0
        Seed of the random model (fixed across episodes).
    gamma : float, default 0.9
        Default discount factor.

    Attributes
    ----------
    reward_bound : float
        1.0 (rewards are scaled to max |R| = 1).
    """

    reward_bound: float = 1.0

    def __init__(
        self,
        state_dims: Sequence[int] = (4, 4, 4),
        action_dims: Sequence[int] = (3, 3),
        rank: int = 2,
        concentration: float = 0.5,
        model_seed: int = 0,
        gamma: float = 0.9,
    ) -> None:
        state_dims = check_ints("state_dims", state_dims, 1, MAX_BINS)
        action_dims = check_ints("action_dims", action_dims, 1, MAX_BINS)
        entries = 8.0 * math.prod(state_dims) * math.prod(action_dims)
        check_memory("state_dims", 3 * entries, "the dense transition mix and reward tensors")
        self.rank = check_int("rank", rank, 1, MAX_RANK)
        self.concentration = check_real("concentration", concentration, 0.0, low_open=True)
        super().__init__(state_dims, action_dims, gamma)
        self.model_seed = model_seed
        rng = np.random.default_rng(model_seed)
        modes = self.state_dims + self.action_dims
        self.mix_factors = [rng.uniform(0.1, 1.0, size=(d, self.rank)) for d in modes]
        self.next_state_laws = [
            rng.dirichlet(np.full(d, self.concentration), size=self.rank + 1) for d in state_dims
        ]  # next_state_laws[n][k] = m_{n,k}, a distribution over component n
        self.reward_factors = [rng.uniform(-1.0, 1.0, size=(d, self.rank)) for d in modes]
        self.reward_weights = rng.uniform(0.5, 1.0, size=self.rank)
        mix = sum(_rank_one(self.mix_factors, k) for k in range(self.rank))
        self.mix_scale = 1.0 / float(mix.max())
        raw = sum(w * _rank_one(self.reward_factors, k) for k, w in enumerate(self.reward_weights))
        self.reward_scale = 1.0 / float(np.abs(raw).max())
        self._law_cdf = [np.cumsum(law, axis=-1) for law in self.next_state_laws]
        self._latent: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None

    @property
    def initial_distribution(self) -> NDArray[np.float64]:
        """Uniform over all states."""
        return np.full(self.state_dims, 1.0 / math.prod(self.state_dims))

    def mixing_weights(self, state: NDArray[np.int64], action: NDArray[np.int64]) -> NDArray:
        """phi_k(s, a) for k = 1..r, shape (r,)."""
        index = tuple(state) + tuple(action)
        weights = np.full(self.rank, self.mix_scale)
        for factor, i in zip(self.mix_factors, index, strict=True):
            weights = weights * factor[i]
        return weights

    def _sample(
        self, state: NDArray[np.int64], action: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], float]:
        index = tuple(state) + tuple(action)
        reward = self.reward_scale * float(
            np.sum(
                self.reward_weights
                * np.prod([f[i] for f, i in zip(self.reward_factors, index, strict=True)], axis=0)
            )
        )
        weights = self.mixing_weights(state, action)
        u = self.np_random.random(1 + len(self.state_dims))
        latent_cdf = np.cumsum(np.concatenate([[1.0 - weights.sum()], weights]))
        latent = int(sample_categorical(latent_cdf, u[0]))
        next_state = np.array(
            [sample_categorical(cdf[latent], u[1 + n]) for n, cdf in enumerate(self._law_cdf)],
            dtype=np.int64,
        )
        return next_state, reward

    def latent_laws(self) -> NDArray[np.float64]:
        """Return the next-state laws mu_0, ..., mu_r, shape (r + 1,) + state_dims."""
        return np.stack([
            _rank_one([law.T for law in self.next_state_laws], k) for k in range(self.rank + 1)
        ])  # fmt: skip

    def latent_weights(self) -> NDArray[np.float64]:
        """Return the weights of the laws, shape state_dims + action_dims + (r + 1,).

        ``P(s' | s, a) = sum_k weights[s, a, k] mu_k(s')``: weight 0 is
        ``1 - sum_k phi_k(s, a)``, weight k is phi_k(s, a) (module docstring).
        """
        phis = [self.mix_scale * _rank_one(self.mix_factors, k) for k in range(self.rank)]
        return np.stack([1.0 - sum(phis), *phis], axis=-1)

    def policy_values(
        self, policies: NDArray[np.int64], gamma: float | None = None
    ) -> NDArray[np.float64]:
        """Exact values V^pi of B deterministic policies, through the rank of the transitions.

        With ``P_pi = U M^T`` (U: the policy's `latent_weights`, n x (r + 1); M:
        the `latent_laws`, n x (r + 1)), the Woodbury identity turns the n x n
        system ``(I - gamma P_pi) V = r_pi`` into ``(I - gamma M^T U) y = M^T r_pi``
        of size r + 1 and ``V = r_pi + gamma U y``: O(n r^2) per policy instead
        of the O(n^3) dense solve of `rl.envs.policy_value`, which it equals up
        to rounding.

        Parameters
        ----------
        policies : int ndarray, shape (B,) + state_dims + (D_A,)
            Action index vector per state of each policy (`rl.envs.greedy_policy`).
        gamma : float, optional
            Discount factor; the model's when None.

        Returns
        -------
        ndarray of float64, shape (B,) + state_dims

        References
        ----------
        Puterman (1994), Section 6.1; M. A. Woodbury, "Inverting modified
        matrices", Memorandum Report 42, Princeton University (1950).
        """
        gamma = self.gamma if gamma is None else float(gamma)
        n_states = math.prod(self.state_dims)
        policies = np.asarray(policies, dtype=np.int64)
        expected = (*self.state_dims, len(self.action_dims))
        if policies.shape[1:] != expected:
            raise ValueError(
                f"The 'policies' parameter must have shape (B, {', '.join(map(str, expected))}). "
                f"Got {policies.shape} instead."
            )
        joint = np.ravel_multi_index(
            tuple(np.moveaxis(policies.reshape(len(policies), n_states, -1), -1, 0)),
            self.action_dims,
        )  # (B, n)
        if self._latent is None:
            k = self.rank + 1
            self._latent = (
                self.latent_weights().reshape(n_states, -1, k),
                self.latent_laws().reshape(k, n_states),
            )
        all_weights, laws = self._latent
        rows = np.arange(n_states)
        rewards = self.reward.reshape(n_states, -1)[rows, joint]
        values = chain_values(all_weights[rows, joint], rewards, laws, gamma)
        return values.reshape(len(policies), *self.state_dims)

    def _build_model(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        laws = self.latent_laws()  # laws[k] = mu_k, shape state_dims
        weights = self.latent_weights()
        transition = np.multiply.outer(weights[..., 0], laws[0])
        for k in range(self.rank):
            transition = transition + np.multiply.outer(weights[..., k + 1], laws[k + 1])
        reward = self.reward_scale * sum(
            w * _rank_one(self.reward_factors, k) for k, w in enumerate(self.reward_weights)
        )
        return transition, reward


#: Q* kinds of `PlantedRankMDP`: a rank-r CP tensor, that plus sparse spikes, or no structure.
PLANTED_KINDS = ("lowrank", "sparse", "full")


class PlantedRankMDP(LowRankMDP):
    """A factored MDP whose Q* is planted: its CP rank is the construction's, exactly.

    The transitions are those of `LowRankMDP` (``transition_rank`` latent
    components); the optimal Q-function is chosen first and the reward is
    solved from the Bellman optimality equation::

        Q*  = sum_{k=1..r} prod_n h_n[i_n, k]   (+ S, for kind "sparse")
        R(s, a) = Q*(s, a) - gamma sum_{s'} P(s' | s, a) max_{a'} Q*(s', a')

    so that Q* is the unique fixed point of the Bellman optimality operator
    (a gamma-contraction) of the MDP (P, R). Factors ``h`` are uniform on
    [0, 1): a nonnegative CP tensor, a common level with structured variation
    on top, as Q-functions of rewards of one sign are. Both Q* and R are then
    scaled by one constant so that max |R| = 1 (V* is positively homogeneous,
    so the scaled Q* is still optimal). The kinds are:

    * ``"lowrank"``: Q* has CP rank ``rank`` (generic factors of rank below
      the generic rank of the shape give exactly that rank);
    * ``"sparse"``: the rank-``rank`` tensor plus ``sparse_entries`` entries
      of +-``sparse_scale`` times its largest magnitude, at random positions
      (low rank plus a sparse perturbation of chosen size);
    * ``"full"``: independent uniform [0, 1) entries: no low-rank structure
      beyond the common level (the falsification case).

    Parameters
    ----------
    state_modes : int, default 3
        Number of state components D_S.
    mode_size : int, default 4
        Size of every state component.
    action_dims : sequence of int, default (3, 3)
        Sizes of the action components.
    rank : int, default 3
        CP rank of Q* (kinds ``"lowrank"`` and ``"sparse"``; ignored by ``"full"``).
    kind : {"lowrank", "sparse", "full"}, default "lowrank"
        Structure of Q* (above).
    sparse_entries : int, default 0
        Entries perturbed by kind ``"sparse"`` (>= 1 there).
    sparse_scale : float, default 1.0
        Size of each perturbation, relative to max |low-rank part|.
    transition_rank : int, default 2
        Latent components of the transitions (the ``rank`` of `LowRankMDP`).
    concentration : float, default 0.5
        Dirichlet concentration of the next-state component laws.
    model_seed : int, default 0
        Seed of the random model (transitions and Q*).
    gamma : float, default 0.9
        Discount factor with which Q* is planted (and the default of value iteration).

    Attributes
    ----------
    construction_rank : int or None
        The CP rank of the low-rank part (None for kind ``"full"``).
    """

    def __init__(
        self,
        state_modes: int = 3,
        mode_size: int = 4,
        action_dims: Sequence[int] = (3, 3),
        rank: int = 3,
        kind: str = "lowrank",
        sparse_entries: int = 0,
        sparse_scale: float = 1.0,
        transition_rank: int = 2,
        concentration: float = 0.5,
        model_seed: int = 0,
        gamma: float = 0.9,
    ) -> None:
        if kind not in PLANTED_KINDS:
            raise ValueError(
                f"The 'kind' parameter must be one of {PLANTED_KINDS}. Got {kind!r} instead."
            )
        state_modes = check_int("state_modes", state_modes, 1, 32)
        mode_size = check_int("mode_size", mode_size, 1, MAX_BINS)
        super().__init__(
            (mode_size,) * state_modes,
            action_dims,
            transition_rank,
            concentration,
            model_seed,
            gamma,
        )
        self.kind = kind
        self.planted_rank = check_int("rank", rank, 1, MAX_RANK)
        self.sparse_entries = check_int("sparse_entries", sparse_entries, 0, None)
        self.sparse_scale = check_real("sparse_scale", sparse_scale, 0.0, low_open=True)
        if kind == "sparse" and self.sparse_entries < 1:
            raise ValueError("Kind 'sparse' needs 'sparse_entries' >= 1; give the number.")
        self.construction_rank = None if kind == "full" else self.planted_rank
        self._q_star: NDArray[np.float64] | None = None

    @property
    def q_star(self) -> NDArray[np.float64]:
        """The planted Q* (for ``gamma``), shape state_dims + action_dims."""
        self._model()
        return self._q_star

    def _planted_q(self, rng: np.random.Generator) -> NDArray[np.float64]:
        shape = self.state_dims + self.action_dims
        if self.kind == "full":
            return rng.uniform(0.0, 1.0, size=shape)
        factors = [rng.uniform(0.0, 1.0, size=(d, self.planted_rank)) for d in shape]
        q = sum(_rank_one(factors, k) for k in range(self.planted_rank))
        if self.kind == "sparse":
            flat = rng.choice(q.size, size=min(self.sparse_entries, q.size), replace=False)
            signs = rng.choice([-1.0, 1.0], size=flat.size)
            spikes = np.zeros(q.size)
            spikes[flat] = signs * self.sparse_scale * float(np.abs(q).max())
            q = q + spikes.reshape(shape)
        return q

    def _sample(
        self, state: NDArray[np.int64], action: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], float]:
        next_state, _ = super()._sample(state, action)
        return next_state, float(self.reward[tuple(state) + tuple(action)])

    def _build_model(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        transition, _ = super()._build_model()
        q_star = self._planted_q(np.random.default_rng([self.model_seed, 1]))
        modes = len(self.state_dims)
        values = q_star.max(axis=tuple(range(modes, q_star.ndim)))
        reward = q_star - self.gamma * np.tensordot(transition, values, axes=modes)
        scale = 1.0 / float(np.abs(reward).max())
        self._q_star = scale * q_star
        return transition, scale * reward
