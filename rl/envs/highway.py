"""highway-env's ``highway-v0`` configured as in the TEQL paper's Highway experiment.

The ego vehicle drives on a 3-lane highway among 10 other vehicles and picks
one of five meta-actions (0 lane left, 1 idle, 2 lane right, 3 faster,
4 slower). The observation is highway-env's Kinematics observation of the ego
vehicle and the 2 nearest vehicles with features (x, y, vx), others relative
to the ego vehicle, flattened to 9 numbers and scaled in one of two ways:

``"paper"`` (default, the authors' choice)
    raw features divided by 100 and clipped to [-1, 1]. The ego vehicle's
    absolute x is then always 1.0, and the lanes (y = 0, 4, 8 m) fall into one
    bin of a 20-bin grid over [-1, 1].
``"informative"``
    highway-env's own normalisation (x in [-200, 200] m, y in [-12, 12] m,
    vx in [-80, 80] m/s mapped to [-1, 1] and clipped), which separates lanes.

Reward (highway-env, ``normalize_reward=False``)::

    r = on_road * (-1 * crashed + 0.4 * clip((v - 10) / (30 - 10), 0, 1))

so holding 20 m/s for 50 steps returns 10, and |r| <= 1. The episode
terminates on a collision and is truncated after 50 steps (duration 50 s at
policy frequency 1 Hz, simulation frequency 5 Hz).

highway-env is an optional dependency, imported when the environment is built.

References
----------
.. [1] E. Leurent, "An environment for autonomous driving decision-making",
   GitHub repository ``Farama-Foundation/HighwayEnv``, 2018.
.. [2] S. Rozada, S. Paternain, A. G. Marques, "Tensor and matrix low-rank
   value-function approximation in reinforcement learning", IEEE TSP, 2024.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

NORMALIZATIONS = ("paper", "informative")

#: The paper's highway-env configuration (merged into highway-v0's defaults).
PAPER_CONFIG: dict[str, Any] = {
    "observation": {
        "type": "Kinematics",
        "vehicles_count": 3,
        "features": ["x", "y", "vx"],
        "absolute": False,
        "normalize": False,
        "clip": False,
    },
    "action": {"type": "DiscreteMetaAction"},
    "lanes_count": 3,
    "vehicles_count": 10,
    "simulation_frequency": 5,
    "policy_frequency": 1,
    "duration": 50,
    "collision_reward": -1,
    "high_speed_reward": 0.4,
    "reward_speed_range": [10, 30],
    "right_lane_reward": 0,
    "lane_change_reward": 0,
    "normalize_reward": False,
    "offroad_terminal": False,
}

#: The paper's scale: observations are divided by this and clipped to [-1, 1].
PAPER_SCALE = 100.0


def reward_bound(config: dict[str, Any] | None = None) -> float:
    """R_max of the Highway reward: max(|collision_reward|, |high_speed_reward|).

    Valid with ``normalize_reward=False``, zero right-lane and lane-change
    rewards (the paper's setting), where r = on_road (collision_reward crashed
    + high_speed_reward s) with s in [0, 1].
    """
    merged = {**PAPER_CONFIG, **(config or {})}
    return float(max(abs(merged["collision_reward"]), abs(merged["high_speed_reward"])))


def _import_highway_env() -> Any:
    try:
        from highway_env.envs.highway_env import HighwayEnv
    except ImportError as error:  # pragma: no cover - depends on the installation
        raise ImportError(
            "rl/Highway-v0 needs highway-env, an optional dependency: pip install teql[highway]"
        ) from error
    return HighwayEnv


class Highway(gym.Env[NDArray[np.float32], np.int64]):
    """The paper's Highway task: 9 scaled kinematic features, 5 discrete meta-actions.

    Parameters
    ----------
    normalization : {"paper", "informative"}, default "paper"
        Observation scaling; see the module docstring.
    config : dict, optional
        Extra highway-env configuration merged over `PAPER_CONFIG` (for
        experiments beyond the paper).
    render_mode : str, optional
        Passed to highway-env (``"rgb_array"`` or ``"human"``).

    Attributes
    ----------
    reward_bound : float
        max(|collision_reward|, high_speed_reward) = 1.0.

    References
    ----------
    .. [1] Leurent, highway-env, 2018.
    """

    metadata: dict[str, Any] = {"render_modes": ["human", "rgb_array"]}

    def __init__(
        self,
        normalization: str = "paper",
        config: dict[str, Any] | None = None,
        render_mode: str | None = None,
    ) -> None:
        if normalization not in NORMALIZATIONS:
            raise ValueError(
                f"The 'normalization' parameter must be one of {NORMALIZATIONS}. "
                f"Got {normalization!r} instead."
            )
        highway_env_class = _import_highway_env()
        self.normalization = normalization
        full_config = copy.deepcopy(PAPER_CONFIG)
        if normalization == "informative":
            full_config["observation"].update({"normalize": True, "clip": True})
        for key, value in (config or {}).items():
            if isinstance(value, dict) and isinstance(full_config.get(key), dict):
                full_config[key].update(value)
            else:
                full_config[key] = value
        self.config = full_config
        self.render_mode = render_mode
        self._env = highway_env_class(config=full_config, render_mode=render_mode)
        n_features = full_config["observation"]["vehicles_count"] * len(
            full_config["observation"]["features"]
        )
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(n_features,), dtype=np.float32)
        self.action_space = spaces.Discrete(self._env.action_space.n)
        self.reward_bound = reward_bound(full_config)

    def _observe(self, raw: NDArray) -> NDArray[np.float32]:
        flat = np.asarray(raw, dtype=np.float32).reshape(-1)
        if self.normalization == "paper":
            flat = np.clip(flat / np.float32(PAPER_SCALE), -1.0, 1.0)
        return flat.astype(np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Reset the traffic scene; ``seed`` seeds highway-env's generator."""
        super().reset(seed=seed)
        raw, info = self._env.reset(seed=seed, options=options)
        return self._observe(raw), info

    def step(
        self, action: int | np.integer
    ) -> tuple[NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        """Apply one meta-action (one policy step of 1 s)."""
        raw, reward, terminated, truncated, info = self._env.step(int(action))
        return self._observe(raw), float(reward), bool(terminated), bool(truncated), info

    def render(self) -> Any:
        """Render with highway-env."""
        return self._env.render()

    def close(self) -> None:
        """Close highway-env."""
        self._env.close()
