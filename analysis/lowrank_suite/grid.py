"""The suite's grid: known-rank problem instances, agent set-ups and the exact reference.

An `Instance` is one `rl.envs.lowrank_mdp.PlantedRankMDP` (Q* of a chosen CP
rank, or of full rank), an `AgentSetup` one agent at one rank, and
`suite_plan` crosses them into the two axes of the suite's figures: Q* rank
at `RANK_AXIS_MODES` state modes, and state modes at Q* rank
`MODES_AXIS_RANK`, each at every discount. `ExactReference` holds what the
model gives exactly: Q*, the optimal and the uniformly random policy's
expected returns, and the normalized value gap of any greedy policy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import gymnasium
import numpy as np
from numpy.typing import NDArray

import rl  # noqa: F401  (registers the environments)
from rl.envs import greedy_policy
from rl.envs.lowrank_mdp import chain_values

ENV_ID = "rl/PlantedRankMDP-v0"
QSTAR_RANKS: tuple[int | None, ...] = (1, 3, 5, 9, 17, None)
"""CP ranks of Q* on the rank axis (None: full rank, kind ``"full"``)."""
STATE_MODES = (2, 3, 4, 5, 6)
"""Numbers of state modes on the modes axis."""
DISCOUNTS = (0.9, 0.99)
AGENT_RANKS = (1, 2, 5, 10, 20)
"""CP ranks of the tensor agents."""
TENSOR_AGENTS = (("teql", "stable"), ("teql", "released"), ("tlr", "paper"))
"""(agent, reading) of the tensor agents; each runs at every rank of `AGENT_RANKS`."""
RANK_AXIS_MODES = 4
"""State modes of the instances on the rank axis."""
MODES_AXIS_RANK = 5
"""Q* rank of the instances on the modes axis."""
MODE_SIZE = 3
ACTION_DIMS = (3, 3)
STEPS_PER_EPISODE = 100
"""Episode length of `rl.envs.lowrank_mdp.PlantedRankMDP` under ``gymnasium.make``."""
TARGET_GAP = 0.05
"""A greedy policy has reached the target when its normalized value gap is at most this."""


@dataclass(frozen=True)
class Instance:
    """One problem of the family: a `PlantedRankMDP` with Q* of rank ``qstar_rank``.

    ``qstar_rank`` None is the full-rank kind (no low-rank structure).
    """

    qstar_rank: int | None
    state_modes: int
    gamma: float
    mode_size: int = MODE_SIZE
    action_dims: tuple[int, ...] = ACTION_DIMS
    model_seed: int = 0

    @property
    def kind(self) -> str:
        """``"full"`` or ``"lowrank"``."""
        return "full" if self.qstar_rank is None else "lowrank"

    @property
    def key(self) -> str:
        """A short unique name, e.g. ``r5-m4-g0.9``."""
        rank = "full" if self.qstar_rank is None else f"r{self.qstar_rank}"
        return f"{rank}-m{self.state_modes}-g{self.gamma:g}"

    def env_kwargs(self) -> dict:
        """Return the constructor arguments of the environment."""
        kwargs = {
            "state_modes": self.state_modes,
            "mode_size": self.mode_size,
            "action_dims": list(self.action_dims),
            "kind": self.kind,
            "model_seed": self.model_seed,
            "gamma": self.gamma,
        }
        if self.qstar_rank is not None:
            kwargs["rank"] = self.qstar_rank
        return kwargs

    def make(self) -> gymnasium.Env:
        """Return the unwrapped environment."""
        return gymnasium.make(ENV_ID, **self.env_kwargs()).unwrapped

    @property
    def entries(self) -> int:
        """Entries of the Q-tensor (parameters of a table)."""
        return self.mode_size**self.state_modes * math.prod(self.action_dims)


@dataclass(frozen=True)
class AgentSetup:
    """One agent of the suite: name, reading and CP rank (None for tabular Q-learning)."""

    agent: str
    reading: str
    rank: int | None = None

    @property
    def key(self) -> str:
        """A short unique name, e.g. ``teql-stable-r5`` or ``tabular``."""
        if self.rank is None:
            return self.agent
        return f"{self.agent}-{self.reading}-r{self.rank}"

    def agent_params(self) -> dict:
        """Return the overrides of the agent's config (its rank)."""
        return {} if self.rank is None else {"rank": self.rank}


TABULAR = AgentSetup("tabular", "paper")


def agent_setups(
    agent_ranks: Sequence[int] = AGENT_RANKS,
    tensor_agents: Sequence[tuple[str, str]] = TENSOR_AGENTS,
) -> list[AgentSetup]:
    """Tabular Q-learning and every tensor agent at every rank."""
    setups = [TABULAR]
    for agent, reading in tensor_agents:
        setups += [AgentSetup(agent, reading, rank) for rank in agent_ranks]
    return setups


def suite_instances(
    qstar_ranks: Sequence[int | None] = QSTAR_RANKS,
    state_modes: Sequence[int] = STATE_MODES,
    discounts: Sequence[float] = DISCOUNTS,
) -> list[Instance]:
    """Return the instances of both axes (the shared one once), rank axis first."""
    instances: list[Instance] = []
    for gamma in discounts:
        instances += [Instance(r, RANK_AXIS_MODES, gamma) for r in qstar_ranks]
        instances += [Instance(MODES_AXIS_RANK, m, gamma) for m in state_modes]
    return list(dict.fromkeys(instances))


@dataclass(frozen=True)
class ExactReference:
    """The exact quantities of one instance: Q*, J* and the uniform random policy's J.

    J is the expected discounted return from the initial distribution,
    ``sum_s rho(s) V(s)``. The normalized value gap of a policy pi is
    ``(J* - J^pi) / (J* - J^random)``: 0 for an optimal policy, 1 for one no
    better than acting uniformly at random, whatever the reward's offset or scale.
    """

    env: gymnasium.Env
    q_star: NDArray[np.float64]
    j_star: float
    j_random: float

    @classmethod
    def of(cls, instance: Instance) -> ExactReference:
        """Compute the reference of ``instance`` from its model."""
        env = instance.make()
        q_star = env.q_star
        n_states = math.prod(env.state_dims)
        rho = env.initial_distribution.reshape(-1)
        k = env.rank + 1
        uniform = env.latent_weights().reshape(n_states, -1, k).mean(axis=1)
        reward = env.reward.reshape(n_states, -1).mean(axis=1)
        laws = env.latent_laws().reshape(k, n_states)
        random_values = chain_values(uniform[None], reward[None], laws, env.gamma)[0]
        j_star = float(greedy_returns(env, q_star[None])[0])
        return cls(env, q_star, j_star, float(rho @ random_values))

    def values(self, q: NDArray) -> NDArray[np.float64]:
        """Return J of the greedy policy of each ``q[b]`` (`greedy_returns`), shape (B,)."""
        return greedy_returns(self.env, q)

    def normalized_gap(self, j: float | NDArray) -> float | NDArray:
        """``(J* - J) / (J* - J^random)``."""
        return (self.j_star - j) / (self.j_star - self.j_random)


def greedy_returns(env: gymnasium.Env, q: NDArray) -> NDArray[np.float64]:
    """Return J of the greedy policy of each ``q[b]`` on ``env``, exactly, shape (B,).

    A solve of the size of the transitions' rank per policy
    (`rl.envs.lowrank_mdp.LowRankMDP.policy_values`).
    """
    modes = len(env.state_dims)
    policies = np.stack([greedy_policy(q_b, modes) for q_b in q])
    values = env.policy_values(policies).reshape(len(q), -1)
    return values @ env.initial_distribution.reshape(-1)
