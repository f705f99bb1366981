"""Environments of the TEQL paper and exact-model factored problems.

All are Gymnasium environments registered under the ``rl/`` namespace when
``rl`` is imported:

==========================  =====================  ==================
id                          class                  max_episode_steps
==========================  =====================  ==================
``rl/ContinuousCartPole-v0``  `ContinuousCartPole`   100 (vectorized)
``rl/BoundedPendulum-v0``     `BoundedPendulum`      100 (vectorized)
``rl/Highway-v0``             `Highway`              50
``rl/Inventory-v0``           `Inventory`            100
``rl/LowRankMDP-v0``          `LowRankMDP`           100
==========================  =====================  ==================

``highway-env`` (an optional extra) is imported only when a `Highway` is constructed.
"""

from __future__ import annotations

import gymnasium

from rl.envs.cartpole import ContinuousCartPole, ContinuousCartPoleVector
from rl.envs.highway import Highway
from rl.envs.inventory import Inventory
from rl.envs.lowrank_mdp import LowRankMDP
from rl.envs.pendulum import BoundedPendulum, BoundedPendulumVector
from rl.envs.value_iteration import (
    ExactModel,
    bellman_residual,
    greedy_policy,
    policy_value,
    value_iteration,
)

__all__ = [
    "ENV_IDS",
    "BoundedPendulum",
    "BoundedPendulumVector",
    "ContinuousCartPole",
    "ContinuousCartPoleVector",
    "ExactModel",
    "Highway",
    "Inventory",
    "LowRankMDP",
    "bellman_residual",
    "greedy_policy",
    "policy_value",
    "register_envs",
    "value_iteration",
]

#: Registered ids, mapped to (entry point, vector entry point or None, max_episode_steps).
ENV_IDS: dict[str, tuple[str, str | None, int]] = {
    "rl/ContinuousCartPole-v0": (
        "rl.envs.cartpole:ContinuousCartPole",
        "rl.envs.cartpole:ContinuousCartPoleVector",
        100,
    ),
    "rl/BoundedPendulum-v0": (
        "rl.envs.pendulum:BoundedPendulum",
        "rl.envs.pendulum:BoundedPendulumVector",
        100,
    ),
    "rl/Highway-v0": ("rl.envs.highway:Highway", None, 50),
    "rl/Inventory-v0": ("rl.envs.inventory:Inventory", None, 100),
    "rl/LowRankMDP-v0": ("rl.envs.lowrank_mdp:LowRankMDP", None, 100),
}


def register_envs() -> None:
    """Register every environment of `ENV_IDS` with Gymnasium (idempotent)."""
    for env_id, (entry_point, vector_entry_point, steps) in ENV_IDS.items():
        if env_id in gymnasium.registry:
            continue
        gymnasium.register(
            id=env_id,
            entry_point=entry_point,
            vector_entry_point=vector_entry_point,
            max_episode_steps=steps,
        )
