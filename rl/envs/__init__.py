"""Environments of the TEQL paper and exact-model factored problems.

`ContinuousCartPole` and `BoundedPendulum` (physical systems whose dynamics
are one compiled kernel, `rl.envs.physics`, with NumPy vector versions,
`rl.envs.vector`), `Highway` (highway-env, imported only when a `Highway` is
constructed), the exact-model problems `Inventory`, `LowRankMDP` and `PlantedRankMDP` with
value iteration, and `GoalGrid`, a slippery grid with one distant goal (sparse rewards).

Their Gymnasium ids, entry points and episode lengths are listed once, in
`rl.problems.ENVIRONMENTS`; ``import rl`` registers them under the ``rl/``
namespace (`rl.problems.register_envs`).
"""

from __future__ import annotations

from rl.envs.cartpole import ContinuousCartPole, ContinuousCartPoleVector
from rl.envs.goal_grid import GoalGrid
from rl.envs.highway import Highway
from rl.envs.inventory import Inventory
from rl.envs.lowrank_mdp import LowRankMDP, PlantedRankMDP
from rl.envs.pendulum import BoundedPendulum, BoundedPendulumVector
from rl.envs.value_iteration import (
    ExactModel,
    bellman_residual,
    greedy_policy,
    is_exact_model,
    policy_value,
    value_iteration,
)

__all__ = [
    "BoundedPendulum",
    "BoundedPendulumVector",
    "ContinuousCartPole",
    "ContinuousCartPoleVector",
    "ExactModel",
    "GoalGrid",
    "Highway",
    "Inventory",
    "LowRankMDP",
    "PlantedRankMDP",
    "bellman_residual",
    "greedy_policy",
    "is_exact_model",
    "policy_value",
    "value_iteration",
]
