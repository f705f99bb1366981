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

Compiled loops (`rl.loop.copies`, `rl.loop.fused`) step the copies through
the compiled-environment protocol (`rl.envs.compiled`): `PhysicsVectorEnv`
allocates its system's `RowCopies` subclass (named by ``copies``), whose
reset draws the state uniformly from the system's ``reset_interval`` as
``reset(seed=)`` does and whose step is the system's one-copy kernel.
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

from rl.envs import seeding_kernels
from rl.envs.seeding_kernels import seed_pcg64, uniform_into
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


@kernel
def reset_row(copies: RowCopies, b: int, seed: int) -> None:
    """Reset copy ``b`` as ``reset(seed=seed)`` does: a uniform draw in [low, high)."""
    seed_pcg64(seed, copies.rng[b])
    uniform_into(copies.rng[b], copies.low, copies.high, copies.obs[b])


class RowCopies(NamedTuple):
    """B copies of a physical system as compiled loops step them (`rl.envs.compiled`).

    A system declares a subclass that names its ``step_kernel``, ``(copies, b,
    action) -> (reward, terminated)`` stepping the state row ``obs[b]`` in place,
    and adds its module to ``sources`` (`rl.envs.cartpole.CartPoleCopies`).

    Attributes
    ----------
    obs : ndarray of float64, shape (B, D)
        Every copy's state, which is its observation.
    rng : ndarray of uint64, shape (B, 4)
        PCG64 state scratch of every copy (`rl.envs.seeding_kernels`).
    low, high : float
        Initial states are uniform in [low, high) per coordinate.
    max_steps : int
        Truncation horizon (-1: none).
    """

    obs: NDArray[np.float64]
    rng: NDArray[np.uint64]
    low: float
    high: float
    max_steps: int

    reset_kernel = reset_row
    sources = (__file__, seeding_kernels.__file__)


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
    copies: type[RowCopies]
    """The system's `RowCopies` subclass (`compiled_copies`)."""

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

    def compiled_copies(self, copies: int) -> RowCopies:
        """Allocate ``copies`` copies for compiled loops (`rl.envs.compiled`): rows are states."""
        low, high = self.single_env.reset_interval
        horizon = -1 if self.max_episode_steps is None else int(self.max_episode_steps)
        return self.copies(
            np.zeros((copies, self.state_dim)), np.zeros((copies, 4), dtype=np.uint64),
            float(low), float(high), horizon,
        )  # fmt: skip
