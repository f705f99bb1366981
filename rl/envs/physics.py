"""Small physical systems (CartPole, Pendulum) whose dynamics are written once, for any backend.

A subclass of `PhysicsEnv` supplies its dynamics once, as a function of an
array namespace (``dynamics(xp)``: the step written with ``xp.sin``,
``xp.cos``, ``xp.clip``, ``xp.where`` and arithmetic), which runs on Python
floats inside Numba kernels (``xp`` = `SCALAR_OPS`) and on whole batches in
NumPy, PyTorch or JAX (``xp`` = ``numpy``, ``torch``, ``jax.numpy``: the array
engine's environments on its device, `rl.loop.device_copies`). It also
supplies the two spaces, the initial-state sampler and the batched step kernel
``(state, action) -> (next_state, reward, terminated)`` on (B, ...) arrays (a
Numba kernel over the compiled one-copy step). `PhysicsEnv` makes it a single
Gymnasium environment that steps a batch of one, and a subclass of
`PhysicsVectorEnv` naming it as ``single_env`` makes B copies stepped at once
(see `rl.envs.vector`). Both run the same kernel on the same draws from
``np_random``, and the kernel computes each row on its own, so copy ``i`` of
the vector environment equals the single environment bit for bit.

Used by `rl.envs.cartpole` and `rl.envs.pendulum`.

The compiled-environment protocol. A vector environment whose copies compiled
loops (`rl.loop.fused`) can step declares ``compiled_layout()``, a
`CompiledLayout`: its one-copy step kernel and the sizes of its per-copy
arrays. `rl.envs.compiled` allocates those arrays (`rl.envs.compiled.compiled_state`)
and steps and resets any declared environment through one compiled call.
`PhysicsVectorEnv` declares its system's ``row_kernel``; the Highway twin
(`rl.envs.highway_twin`) declares its own.
"""

from __future__ import annotations

import abc
import math
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from numpy.typing import NDArray

from rl.envs.vector import NumpyVectorEnv
from rl.jit import kernel

Transition = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]


def _select(condition: bool, if_true: float, if_false: float) -> float:
    """``where`` on Python scalars."""
    return if_true if condition else if_false


def _clip(x: float, low: float, high: float) -> float:
    """``clip`` on Python scalars."""
    return min(max(x, low), high)


SCALAR_OPS = types.ModuleType("SCALAR_OPS", "The array functions of the dynamics on floats.")
"""The namespace a system's ``dynamics(xp)`` takes to run on Python floats, in Numba kernels.

``sin`` and ``cos`` are the `math` module's (which Numba compiles to the C
library's), ``where`` and ``clip`` compiled scalar versions of NumPy's.
"""
SCALAR_OPS.sin, SCALAR_OPS.cos = math.sin, math.cos
SCALAR_OPS.where, SCALAR_OPS.clip = kernel(_select), kernel(_clip)


class CompiledLayout(NamedTuple):
    """What a vector environment declares so that compiled loops can step its copies.

    Attributes
    ----------
    step_kernel : numba dispatcher
        The compiled one-copy step, one that `rl.envs.compiled` knows (a physical
        system's ``row_kernel``, the Highway twin's ``twin_step``).
    floats : int
        Length of a copy's float64 state row.
    observation : int
        Length of a copy's observation (0: the observation is the state row itself).
    params : tuple of float
        The environment's constants, read by its kernels (the initial-state
        interval of a physical system, the Highway twin's normalization).
    max_episode_steps : int
        Truncation horizon (-1: none).
    """

    step_kernel: Any
    floats: int
    observation: int
    params: tuple[float, ...]
    max_episode_steps: int


class PhysicsEnv(gym.Env[NDArray[np.float64], NDArray[np.float64]], abc.ABC):
    """One physical system, stepped as a batch of one through its compiled kernel.

    Observations are float64 copies of the state; actions are float64 arrays.
    The per-step reward is a Python float; `reward_bound` bounds its absolute
    value.
    """

    metadata: dict[str, Any] = {"render_modes": []}
    reward_bound: float
    reset_interval: tuple[float, float]
    """(low, high): `_initial_state` draws every coordinate uniformly from [low, high)."""
    dynamics: Callable[[Any], Callable[..., tuple]]
    """``dynamics(xp)``: the system's one step over the array namespace ``xp``,
    ``step(*state_coordinates, action) -> (next_coordinates, reward, terminated)``
    (the one definition, `rl.envs.cartpole.cartpole_dynamics`)."""
    row_kernel: Any
    """The compiled step of one copy, ``row_kernel(state, action, out) -> (reward,
    terminated)``, on which `_transition` loops; compiled loops (`rl.loop.fused`) call it
    through `rl.envs.compiled.step_copy` (see `PhysicsVectorEnv.compiled_layout`)."""

    def __init__(self) -> None:
        self.observation_space = self._observation_space()
        self.action_space = self._action_space()
        self.state: NDArray[np.float64] | None = None

    # ----------------------------------------------------------------- hooks
    @staticmethod
    @abc.abstractmethod
    def _observation_space() -> spaces.Box:
        """Return a fresh observation space of one copy."""

    @staticmethod
    @abc.abstractmethod
    def _action_space() -> spaces.Box:
        """Return a fresh action space of one copy."""

    @staticmethod
    @abc.abstractmethod
    def _initial_state(rng: np.random.Generator) -> NDArray[np.float64]:
        """Draw one initial state from ``rng``."""

    @staticmethod
    @abc.abstractmethod
    def _transition(state: NDArray[np.float64], action: NDArray[np.float64]) -> Transition:
        """Batched dynamics: (next_state, reward, terminated) for every row.

        Subclasses set it to their compiled kernel,
        ``_transition = staticmethod(kernel)``, shared with the vector version.
        """

    # -------------------------------------------------------------- interface
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[NDArray[np.float64], dict[str, Any]]:
        """Draw the initial state from ``np_random`` (see `_initial_state`)."""
        super().reset(seed=seed)
        self.state = self._initial_state(self.np_random)
        return self.state.copy(), {}

    def step(
        self, action: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], float, bool, bool, dict[str, Any]]:
        """Apply ``action`` for one step as a batch of one (see `_transition`)."""
        if self.state is None:
            raise RuntimeError("Call reset() before step().")
        action = np.asarray(action, dtype=np.float64).reshape(1, 1)
        next_state, reward, terminated = self._transition(self.state[None, :], action)
        self.state = next_state[0]
        return self.state.copy(), float(reward[0]), bool(terminated[0]), False, {}


class PhysicsVectorEnv(NumpyVectorEnv):
    """B copies of the `PhysicsEnv` named by ``single_env``, stepped at once.

    Parameters
    ----------
    num_envs : int
        Number of copies.
    max_episode_steps : int, default 100
        Truncation horizon (the registered value of both `rl.envs.cartpole` and
        `rl.envs.pendulum`).
    autoreset_mode : AutoresetMode, default NEXT_STEP
        ``NEXT_STEP`` or ``DISABLED``; see `rl.envs.vector`.
    """

    single_env: type[PhysicsEnv]

    def __init__(
        self,
        num_envs: int = 1,
        max_episode_steps: int | None = 100,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    ) -> None:
        super().__init__(
            num_envs,
            max_episode_steps,
            autoreset_mode,
            self.single_env._observation_space(),
            self.single_env._action_space(),
        )

    def _initial_state(self, rng: np.random.Generator) -> NDArray[np.float64]:
        return self.single_env._initial_state(rng)

    def _transition(self, state: NDArray[np.float64], action: NDArray[np.float64]) -> Transition:
        return self.single_env._transition(state, action)

    def compiled_layout(self) -> CompiledLayout:
        """Return how compiled loops step the copies: the state row is the observation."""
        low, high = self.single_env.reset_interval
        horizon = -1 if self.max_episode_steps is None else int(self.max_episode_steps)
        return CompiledLayout(
            self.single_env.row_kernel, self.state_dim, 0, (float(low), float(high)), horizon
        )
