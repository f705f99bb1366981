"""A compiled twin of the paper's Highway task: B copies of ``highway-v0`` in Numba.

`HighwayTwinVector` steps B copies of `rl.envs.highway.Highway` (highway-env
**1.12.1**'s ``highway-v0`` with `rl.envs.highway.PAPER_CONFIG`) through the
kernels of `rl.envs.highway_twin_kernels`, and `HighwayTwin` is one copy as a
single Gymnasium environment. From the same seed and the same actions they
give highway-env's observations, rewards, terminations and truncations: each
copy owns a PCG64 generator seeded as Gymnasium seeds ``np_random``
(``PCG64(SeedSequence(seed))``), draws the scene exactly as highway-env does,
and keeps its stream across resets without a seed, as the single environment
does. Equality is tested to 1e-9 per step (``tests/rl/test_highway_twin.py``);
transcendental functions may differ from NumPy's in the last bit (see
`rl.envs.highway_twin_kernels`).

The vector environment follows the contract of `rl.envs.vector` (seeds
``s + i`` or one per copy, ``AutoresetMode.NEXT_STEP`` or ``DISABLED``,
``options={"reset_mask": mask}``, ``step(actions, active=mask)``); it is
registered as ``rl/HighwayTwin-v0`` and selected by
``make_problem("highway", env_kwargs={"engine": "twin"})``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from numba import njit
from numpy.typing import NDArray

from rl.envs import highway_twin_kernels as kernels
from rl.envs import seeding_kernels
from rl.envs.highway import NORMALIZATIONS, reward_bound
from rl.envs.seeding_kernels import seed_pcg64
from rl.envs.vector import check_autoreset_mode, copy_seeds, reset_mask
from rl.jit import drop_stale
from rl.seeding import MAX_SEED
from rl.validation import check_int

drop_stale(__file__, [kernels.__file__, seeding_kernels.__file__])

OBS_DIM = 9
N_ACTIONS = 5


@njit(cache=True)
def reward(vehicles: NDArray[np.float64]) -> float:
    """``HighwayEnv._reward`` with the paper's weights (collision -1, high speed 0.4)."""
    forward_speed = vehicles[0, kernels.F_SPEED] * vehicles[0, kernels.F_COS]
    scaled = 0 + (forward_speed - 10) * 1 / 20
    crashed = vehicles[0, kernels.F_CRASHED]
    right_lane = vehicles[0, kernels.F_TARGET_LANE] / 2
    total = 0 + -1 * crashed + 0 * right_lane + 0.4 * kernels._clip(scaled, 0.0, 1.0)
    total = total + 0.0  # on_road_reward, weight 0
    x, y = vehicles[0, kernels.F_X], vehicles[0, kernels.F_Y]
    on_road = 1.0 if kernels.on_lane(x, y, int(vehicles[0, kernels.F_LANE]), 0.0) else 0.0
    return total * on_road


@njit(cache=True)
def twin_reset(vehicles, rng, buffer, informative, obs):
    """Draw a new scene from the copy's generator (``rng``, ``buffer``) and observe it."""
    kernels.reset_scene(vehicles, rng, buffer)
    kernels.observe(vehicles, informative, obs)


@njit(cache=True)
def twin_step(vehicles, action, informative, obs):
    """One policy step of one copy: observe into ``obs``; return (reward, terminated).

    Truncation after `rl.envs.highway_twin_kernels.DURATION` steps is the caller's.
    """
    kernels.simulate_step(vehicles, action)
    kernels.observe(vehicles, informative, obs)
    return reward(vehicles), vehicles[0, kernels.F_CRASHED] != 0.0


@njit(cache=True)
def twin_reset_copy(copies, b, seed):
    """Reset copy ``b`` of `TwinCopies` as ``reset(seed=seed)`` does (a fresh generator)."""
    seed_pcg64(seed, copies.rng[b])
    copies.buffers[b, 0] = 0
    copies.buffers[b, 1] = 0
    twin_reset(copies.vehicles[b], copies.rng[b], copies.buffers[b], copies.informative,
               copies.obs[b])  # fmt: skip


@njit(cache=True)
def twin_step_copy(copies, b, action):
    """Step copy ``b`` of `TwinCopies` with the meta-action ``action`` (`twin_step`)."""
    return twin_step(copies.vehicles[b], int(action), copies.informative, copies.obs[b])


class TwinCopies(NamedTuple):
    """B copies of the Highway twin as compiled loops step them (`rl.envs.compiled`).

    Attributes
    ----------
    vehicles : ndarray of float64, shape (B, N_VEHICLES, N_FIELDS)
        Every copy's vehicle table (`rl.envs.highway_twin_kernels`).
    rng, buffers : ndarray of uint64, shapes (B, 4) and (B, 2)
        Every copy's ``np_random``: PCG64 state and buffered 32-bit draw.
    obs : ndarray of float32, shape (B, 9)
        Every copy's observation, float32 as highway-env returns it (and as the
        vector env's kernels write it, so the fused loop shares their compiled code).
    informative : bool
        highway-env's normalization (else the paper's).
    max_steps : int
        Truncation horizon (the task's 50 steps).
    """

    vehicles: NDArray[np.float64]
    rng: NDArray[np.uint64]
    buffers: NDArray[np.uint64]
    obs: NDArray[np.float32]
    informative: bool
    max_steps: int

    reset_kernel = twin_reset_copy
    step_kernel = twin_step_copy
    sources = (__file__, kernels.__file__, seeding_kernels.__file__)


@njit(cache=True)
def _reset_copies(
    vehicles, rng, buffers, steps, terminated, truncated, seeds, seeded, mask, informative, obs
):
    """Reset the masked copies: reseed those in ``seeded``, draw a scene, observe."""
    for b in range(vehicles.shape[0]):
        if not mask[b]:
            continue
        if seeded[b]:
            seed_pcg64(seeds[b], rng[b])
            buffers[b, 0] = 0
            buffers[b, 1] = 0
        twin_reset(vehicles[b], rng[b], buffers[b], informative, obs[b])
        steps[b] = 0
        terminated[b] = False
        truncated[b] = False


@njit(cache=True)
def _step_copies(
    vehicles,
    rng,
    buffers,
    steps,
    terminated,
    truncated,
    actions,
    active,
    next_step,
    informative,
    obs,
    rewards,
):
    """One policy step of every active copy (auto-reset of ended ones in NEXT_STEP mode)."""
    for b in range(vehicles.shape[0]):
        rewards[b] = 0.0
        if not active[b]:
            continue
        if terminated[b] or truncated[b]:
            if next_step:
                twin_reset(vehicles[b], rng[b], buffers[b], informative, obs[b])
                steps[b] = 0
                terminated[b] = False
                truncated[b] = False
            continue
        rewards[b], terminated[b] = twin_step(vehicles[b], actions[b], informative, obs[b])
        steps[b] += 1
        truncated[b] = 1.0 * steps[b] >= kernels.DURATION


def _check_normalization(normalization: str) -> str:
    if normalization not in NORMALIZATIONS:
        raise ValueError(
            f"The 'normalization' parameter must be one of {NORMALIZATIONS}. "
            f"Got {normalization!r} instead."
        )
    return normalization


class HighwayTwinVector(VectorEnv):
    """B compiled copies of the paper's Highway task.

    Parameters
    ----------
    num_envs : int
        Number of copies B.
    normalization : {"paper", "informative"}, default "paper"
        Observation scaling, as in `rl.envs.highway.Highway`.
    autoreset_mode : AutoresetMode or str
        ``NEXT_STEP`` (default) or ``DISABLED``; see `rl.envs.vector`.
    max_episode_steps : int, default 50
        Accepted for ``gymnasium.make_vec``; must be 50, the task's own
        truncation (``duration`` 50 s at 1 Hz).
    engine : {"twin"}, default "twin"
        Accepted so that `rl.problems.make_problem`'s ``env_kwargs`` pass through.
    """

    steps_active_only = True  # honours step(actions, active=mask) (rl.loop.replicas.ReplicaEnvs)

    def __init__(
        self,
        num_envs: int = 1,
        normalization: str = "paper",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        max_episode_steps: int | None = kernels.DURATION,
        engine: str = "twin",
    ) -> None:
        self.num_envs = check_int("num_envs", num_envs, 1)
        self.normalization = _check_normalization(normalization)
        if max_episode_steps not in (None, kernels.DURATION) or engine != "twin":
            raise ValueError(
                f"HighwayTwinVector is highway-v0 with the paper's 50-step episodes (engine "
                f"'twin'). Got max_episode_steps={max_episode_steps!r}, engine={engine!r}."
            )
        self.max_episode_steps = kernels.DURATION
        self.autoreset_mode = check_autoreset_mode(autoreset_mode)
        self.metadata = {"autoreset_mode": self.autoreset_mode, "render_modes": []}
        self.render_mode = None
        self.reward_bound = reward_bound()
        self.single_observation_space = spaces.Box(-1.0, 1.0, shape=(OBS_DIM,), dtype=np.float32)
        self.single_action_space = spaces.Discrete(N_ACTIONS)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        b = self.num_envs
        self.vehicles = np.zeros((b, kernels.N_VEHICLES, kernels.N_FIELDS))
        self._rng = np.zeros((b, 4), dtype=np.uint64)
        self._buffers = np.zeros((b, 2), dtype=np.uint64)
        self._has_rng = np.zeros(b, dtype=np.bool_)
        self.elapsed_steps = np.zeros(b, dtype=np.int64)
        self._terminated = np.zeros(b, dtype=np.bool_)
        self._truncated = np.zeros(b, dtype=np.bool_)
        self._obs = np.zeros((b, OBS_DIM), dtype=np.float32)
        self._rewards = np.zeros(b, dtype=np.float64)
        self._all_active = np.ones(b, dtype=np.bool_)

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Reset all copies, or those in ``options["reset_mask"]`` (see `rl.envs.vector`)."""
        seeds, mask = copy_seeds(seed, self.num_envs), reset_mask(options, self.num_envs)
        seeded = np.array([s is not None for s in seeds], dtype=np.bool_) | ~self._has_rng
        for i in np.flatnonzero(mask & seeded):
            if seeds[i] is None:  # a first reset without a seed: fresh entropy, as Gymnasium
                seeds[i] = int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> 1)
            elif not 0 <= int(seeds[i]) <= MAX_SEED:
                raise ValueError(f"Seeds must be ints in [0, 2**63 - 1]. Got {seeds[i]!r} instead.")
        seed_array = np.array([0 if s is None else int(s) for s in seeds], dtype=np.int64)
        self._has_rng |= mask
        _reset_copies(
            self.vehicles,
            self._rng,
            self._buffers,
            self.elapsed_steps,
            self._terminated,
            self._truncated,
            seed_array,
            seeded,
            mask,
            self.normalization == "informative",
            self._obs,
        )
        return self._obs.copy(), {}

    def step(
        self, actions: NDArray, active: NDArray[np.bool_] | None = None
    ) -> tuple[
        NDArray[np.float32],
        NDArray[np.float64],
        NDArray[np.bool_],
        NDArray[np.bool_],
        dict[str, Any],
    ]:
        """One meta-action per copy (0 left, 1 idle, 2 right, 3 faster, 4 slower).

        ``active`` (optional, shape (B,)) steps only the masked copies; see
        `rl.envs.vector` for ended and inactive copies.
        """
        actions = np.asarray(actions, dtype=np.int64).reshape(self.num_envs)
        if actions.size and (actions.min() < 0 or actions.max() >= N_ACTIONS):
            raise ValueError(f"Highway actions must be ints in [0, {N_ACTIONS}).")
        if active is None:
            active = self._all_active
        else:
            active = np.asarray(active, dtype=np.bool_)
            if active.shape != (self.num_envs,):
                raise ValueError(
                    f"The 'active' parameter must have shape ({self.num_envs},). "
                    f"Got {active.shape} instead."
                )
        if not self._has_rng.all():
            raise RuntimeError("Call reset() before step().")
        _step_copies(
            self.vehicles,
            self._rng,
            self._buffers,
            self.elapsed_steps,
            self._terminated,
            self._truncated,
            actions,
            active,
            self.autoreset_mode == AutoresetMode.NEXT_STEP,
            self.normalization == "informative",
            self._obs,
            self._rewards,
        )
        return (
            self._obs.copy(),
            self._rewards.copy(),
            self._terminated.copy(),
            self._truncated.copy(),
            {},
        )

    def compiled_copies(self, copies: int) -> TwinCopies:
        """Allocate ``copies`` copies for compiled loops (`rl.envs.compiled`)."""
        return TwinCopies(
            vehicles=np.zeros((copies, kernels.N_VEHICLES, kernels.N_FIELDS)),
            rng=np.zeros((copies, 4), dtype=np.uint64),
            buffers=np.zeros((copies, 2), dtype=np.uint64),
            obs=np.zeros((copies, OBS_DIM), dtype=np.float32),
            informative=self.normalization == "informative",
            max_steps=kernels.DURATION,
        )


class HighwayTwin(gym.Env[NDArray[np.float32], np.int64]):
    """One compiled copy of the paper's Highway task (`HighwayTwinVector` of one).

    Parameters
    ----------
    normalization : {"paper", "informative"}, default "paper"
        Observation scaling, as in `rl.envs.highway.Highway`.
    engine : {"twin"}, default "twin"
        Accepted so that `rl.problems.make_problem`'s ``env_kwargs`` pass through.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, normalization: str = "paper", engine: str = "twin") -> None:
        self._vector = HighwayTwinVector(1, normalization, AutoresetMode.DISABLED, engine=engine)
        self.normalization = normalization
        self.observation_space = self._vector.single_observation_space
        self.action_space = self._vector.single_action_space
        self.reward_bound = self._vector.reward_bound

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        """Draw a new scene; ``seed`` seeds the copy's generator (else its stream continues)."""
        super().reset(seed=seed)  # Gymnasium's np_random, unused: the copy draws from its own
        obs, _ = self._vector.reset(seed=[seed])
        return obs[0], {}

    def step(
        self, action: int | np.integer
    ) -> tuple[NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        """Apply one meta-action (one policy step of 1 s)."""
        obs, rewards, terminated, truncated, _ = self._vector.step(np.array([action]))
        return obs[0], float(rewards[0]), bool(terminated[0]), bool(truncated[0]), {}
