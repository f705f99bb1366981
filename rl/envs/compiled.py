"""The compiled environments behind one compiled call: their state arrays, reset and step.

A vector environment whose copies compiled loops (`rl.loop.fused`) can step
declares ``compiled_layout()`` (`rl.envs.physics.CompiledLayout`): its
one-copy step kernel and the sizes of its per-copy arrays. `compiled_state`
allocates the arrays of B copies as a named tuple with at least two fields,
``obs`` (B, D), every copy's observation (float64, or float32 where the
environment returns float32), and ``max_steps``, the
truncation horizon (-1: none); `reset_copy` and `step_copy` reset and step copy
``b`` of any of them. A compiled loop reads nothing else, so it steps every
declared environment without knowing which:

- `RowState`, a physical system (`rl.envs.physics.PhysicsVectorEnv`: CartPole,
  Pendulum): the state row is the observation; a reset draws it uniformly from
  the system's ``reset_interval`` as ``reset(seed=)`` does; a step is the
  system's ``row_kernel`` (`ROW_KERNELS`, dispatched on ``kind``);
- `TwinState`, the Highway twin (`rl.envs.highway_twin`): the vehicle table,
  the copy's generator (kept across steps), and a reset draws the scene as
  ``reset(seed=)`` does (`rl.envs.highway_twin.twin_reset`, ``twin_step``).

`reset_copy` and `step_copy` are resolved by the state's type when a loop is
compiled (``numba.extending.overload``), so a loop compiled for one kind holds
that kind's code only (the Highway simulator does not lengthen CartPole's
compile). Numba's on-disk cache cannot key a function on a compiled function
passed as an argument, hence this explicit registry: a new compiled environment
adds its state type and its two overloads here.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import types
from numba.extending import overload
from numpy.typing import NDArray

from rl.envs import cartpole, highway_twin, highway_twin_kernels, pendulum, seeding_kernels
from rl.envs.cartpole import cartpole_row
from rl.envs.highway_twin import twin_reset, twin_step
from rl.envs.highway_twin_kernels import N_FIELDS, N_VEHICLES
from rl.envs.pendulum import pendulum_row
from rl.envs.seeding_kernels import seed_pcg64, uniform_into

DEPENDENCIES = [
    m.__file__ for m in (cartpole, pendulum, highway_twin, highway_twin_kernels, seeding_kernels)
]
"""The files whose kernels compiled loops compile in through this module (`rl.jit`)."""

ROW_KERNELS = (cartpole_row, pendulum_row)
"""The physical systems' row kernels; a system's ``RowState.kind`` is its position here."""
CARTPOLE_KIND, PENDULUM_KIND = (ROW_KERNELS.index(k) for k in (cartpole_row, pendulum_row))
"""The kinds `step_copy` dispatches on (a new system adds its kind and a branch there)."""


class RowState(NamedTuple):
    """B copies of a physical system (`rl.envs.physics.PhysicsVectorEnv`).

    Attributes
    ----------
    kind : int
        The position of the system's ``row_kernel`` in `ROW_KERNELS`.
    obs : ndarray of float64, shape (B, D)
        Every copy's state, which is its observation.
    rng : ndarray of uint64, shape (B, 4)
        PCG64 state scratch of every copy (`rl.envs.seeding_kernels`).
    low, high : float
        Initial states are uniform in [low, high) per coordinate.
    max_steps : int
        Truncation horizon (-1: none).
    """

    kind: int
    obs: NDArray[np.float64]
    rng: NDArray[np.uint64]
    low: float
    high: float
    max_steps: int


class TwinState(NamedTuple):
    """B copies of the Highway twin (`rl.envs.highway_twin.HighwayTwinVector`).

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


def compiled_state(vector: Any, copies: int) -> RowState | TwinState | None:
    """Allocate the arrays of ``copies`` copies of ``vector``'s compiled environment.

    Returns None when ``vector`` declares no compiled step kernel known here.
    """
    declare = getattr(vector, "compiled_layout", None)
    if declare is None:
        return None
    layout = declare()
    rng = np.zeros((copies, 4), dtype=np.uint64)
    kind = next((k for k, kernel in enumerate(ROW_KERNELS) if kernel is layout.step_kernel), None)
    if kind is not None:
        low, high = layout.params
        obs = np.zeros((copies, layout.floats))
        return RowState(kind, obs, rng, float(low), float(high), layout.max_episode_steps)
    if layout.step_kernel is twin_step:
        return TwinState(
            vehicles=np.zeros((copies, N_VEHICLES, N_FIELDS)),
            rng=rng,
            buffers=np.zeros((copies, 2), dtype=np.uint64),
            obs=np.zeros((copies, layout.observation), dtype=np.float32),
            informative=bool(layout.params[0]),
            max_steps=layout.max_episode_steps,
        )
    return None


def _is(state_type: Any, cls: type) -> bool:
    return isinstance(state_type, types.BaseNamedTuple) and state_type.instance_class is cls


def reset_copy(env: RowState | TwinState, b: int, seed: int) -> None:
    """Reset copy ``b`` as the environment's ``reset(seed=seed)`` does, observing into ``obs[b]``.

    Compiled code only (an overload per state type).
    """
    raise NotImplementedError("reset_copy is called from compiled code only.")


def step_copy(env: RowState | TwinState, b: int, action: float) -> tuple[float, bool]:
    """Step copy ``b`` with ``action`` (an index, as a float, for discrete actions).

    Writes the next observation into ``obs[b]`` and returns (reward, terminated);
    truncation (``max_steps``) is the caller's. Compiled code only (an overload
    per state type).
    """
    raise NotImplementedError("step_copy is called from compiled code only.")


@overload(reset_copy)
def _reset_copy(env, b, seed):
    if _is(env, RowState):

        def reset_row(env, b, seed):
            seed_pcg64(seed, env.rng[b])
            uniform_into(env.rng[b], env.low, env.high, env.obs[b])

        return reset_row
    if _is(env, TwinState):

        def reset_twin(env, b, seed):
            seed_pcg64(seed, env.rng[b])
            env.buffers[b, 0] = 0
            env.buffers[b, 1] = 0
            twin_reset(env.vehicles[b], env.rng[b], env.buffers[b], env.informative, env.obs[b])

        return reset_twin
    return None


@overload(step_copy)
def _step_copy(env, b, action):
    if _is(env, RowState):

        def step_row(env, b, action):
            if env.kind == CARTPOLE_KIND:
                return cartpole_row(env.obs[b], action, env.obs[b])
            assert env.kind == PENDULUM_KIND
            return pendulum_row(env.obs[b], action, env.obs[b])

        return step_row
    if _is(env, TwinState):

        def step_twin(env, b, action):
            return twin_step(env.vehicles[b], int(action), env.informative, env.obs[b])

        return step_twin
    return None
