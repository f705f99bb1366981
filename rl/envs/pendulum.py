"""The bounded pendulum of Rozada et al. (2024), used by the TEQL paper.

Gymnasium's pendulum dynamics (g = 10, m = 1, l = 1, dt = 0.05, max speed 8,
torque u in [-2, 2]) with three differences from ``Pendulum-v1``: the
observation is (theta, theta_dot) rather than (cos, sin, theta_dot), the
episode terminates when |theta| > pi/4 (the pendulum must stay near the top),
and the initial state is close to upright, theta and theta_dot uniform in
[0, 0.01). One step::

    r           = 1 - (norm(theta)^2 + 0.1 theta_dot^2 + 0.1 u^2)    (state before the step)
    theta_dot'  = theta_dot + (3 g / (2 l) sin theta + 3 / (m l^2) u) dt
    theta'      = theta + theta_dot' dt                              (uses the new velocity)
    theta_dot'  = clip(theta_dot', -8, 8)                            (clipped after theta moved)

with norm(theta) = ((theta + pi) mod 2 pi) - pi in [-pi, pi). Episodes last at
most 100 steps (registered ``max_episode_steps``).

References
----------
.. [1] S. Rozada, S. Paternain, A. G. Marques, "Tensor and matrix low-rank
   value-function approximation in reinforcement learning", IEEE Transactions
   on Signal Processing, 2024.
.. [2] Gymnasium ``Pendulum-v1`` (``gymnasium/envs/classic_control/pendulum.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from rl.envs import physics
from rl.envs.physics import SCALAR_OPS, PhysicsEnv, PhysicsVectorEnv, RowCopies
from rl.jit import drop_stale, kernel

drop_stale(__file__, [physics.__file__])  # the kernels compile in SCALAR_OPS

GRAVITY = 10.0
MASS = 1.0
LENGTH = 1.0
DT = 0.05
MAX_SPEED = 8.0
MAX_TORQUE = 2.0
THETA_THRESHOLD = math.pi / 4
RESET_HIGH = 0.01

#: R_max: r = 1 - (theta^2 + 0.1 theta_dot^2 + 0.1 u^2) is computed from a state before a step,
#: which is never terminal, so |theta| <= pi/4; |theta_dot| <= 8 and |u| <= 2 give
#: r in [1 - (pi/4)^2 - 6.4 - 0.4, 1], hence |r| <= (pi/4)^2 + 5.8 (about 6.417).
REWARD_BOUND = THETA_THRESHOLD**2 + 0.1 * MAX_SPEED**2 + 0.1 * MAX_TORQUE**2 - 1.0

_OBS_HIGH = np.array([math.pi, MAX_SPEED])


def pendulum_dynamics(xp: Any) -> Callable[..., Any]:
    """Return the bounded pendulum's one step written with the array functions of ``xp``.

    The one definition of the dynamics: compiled by Numba for one copy
    (`pendulum_row`, with ``xp`` = `rl.envs.physics.SCALAR_OPS`) and run on
    whole batches by NumPy, PyTorch or JAX (``xp`` = ``numpy``, ``torch`` or
    ``jax.numpy``; `rl.envs.physics.PhysicsEnv.array_dynamics`).

    Parameters
    ----------
    xp : module
        Supplies ``sin`` and ``clip``.

    Returns
    -------
    callable
        ``step(theta, theta_dot, u) -> ((theta', theta_dot'), reward, terminated)``,
        on floats or on (B,) arrays; the torque ``u`` is clipped to [-2, 2], the
        reward is computed from the state before the step, and the episode
        terminates when |theta'| > pi/4.

    References
    ----------
    Rozada et al. (2024), bounded pendulum; see the module docstring.
    """

    def step(theta: Any, theta_dot: Any, u: Any) -> tuple:
        u = xp.clip(u, -MAX_TORQUE, MAX_TORQUE)
        wrapped = ((theta + math.pi) % (2.0 * math.pi)) - math.pi  # norm(theta), in [-pi, pi)
        reward = 1.0 - (wrapped * wrapped + 0.1 * theta_dot * theta_dot + 0.1 * u * u)
        new_theta_dot = (
            theta_dot
            + (3.0 * GRAVITY / (2.0 * LENGTH) * xp.sin(theta) + 3.0 / (MASS * LENGTH**2) * u) * DT
        )
        new_theta = theta + new_theta_dot * DT
        clipped = xp.clip(new_theta_dot, -MAX_SPEED, MAX_SPEED)
        return (new_theta, clipped), reward, abs(new_theta) > THETA_THRESHOLD

    return step


_scalar_step = kernel(pendulum_dynamics(SCALAR_OPS))


@kernel
def pendulum_row(state: NDArray[np.float64], u: float, out: NDArray[np.float64]) -> tuple:
    """Advance one bounded pendulum by one step (`pendulum_dynamics`): ``out`` gets the next state.

    Parameters
    ----------
    state : ndarray of float64, shape (2,)
        (theta, theta_dot).
    u : float
        Torque (clipped to [-2, 2]).
    out : ndarray of float64, shape (2,)
        Receives the next state (may be ``state`` itself).

    Returns
    -------
    reward : float
        Computed from the state before the step.
    terminated : bool
        |theta'| > pi/4.
    """
    (out[0], out[1]), reward, done = _scalar_step(state[0], state[1], u)
    return reward, done


@kernel
def pendulum_step(
    state: NDArray[np.float64], action: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """Advance a batch of bounded pendulums by one step (`pendulum_row` on every row).

    Each row is computed on its own, so a row does not depend on B (the single
    and the vector environment agree bit for bit).

    Parameters
    ----------
    state : ndarray of float64, shape (B, 2)
        Rows (theta, theta_dot).
    action : ndarray of float64, shape (B, 1)
        Torque u (clipped to [-2, 2]).

    Returns
    -------
    next_state : ndarray, shape (B, 2)
    reward : ndarray of float64, shape (B,)
    terminated : ndarray of bool, shape (B,)
    """
    n_rows = state.shape[0]
    next_state = np.empty((n_rows, 2))
    reward = np.empty(n_rows)
    terminated = np.empty(n_rows, dtype=np.bool_)
    for i in range(n_rows):
        reward[i], terminated[i] = pendulum_row(state[i], action[i, 0], next_state[i])
    return next_state, reward, terminated


@kernel
def pendulum_copy(copies: PendulumCopies, b: int, action: float) -> tuple:
    """Step copy ``b`` of ``copies`` in place (`pendulum_row`), for compiled loops."""
    return pendulum_row(copies.obs[b], action, copies.obs[b])


class PendulumCopies(RowCopies):
    """B bounded pendulums as compiled loops step them (`rl.envs.physics.RowCopies`)."""

    step_kernel = pendulum_copy
    sources = (__file__, *RowCopies.sources)


class BoundedPendulum(PhysicsEnv):
    """Pendulum kept near upright: observation (theta, theta_dot), termination at |theta| > pi/4.

    Observation: float64 array (theta, theta_dot); theta stays within
    pi/4 + 9.05 dt < pi before termination. Action: float64 array of shape
    (1,) in [-2, 2]. The per-step reward is a Python float; `reward_bound`
    bounds its absolute value.

    References
    ----------
    .. [1] Rozada, Paternain, Marques, "Tensor and matrix low-rank value-function
       approximation in reinforcement learning", IEEE TSP, 2024.
    """

    reward_bound: float = REWARD_BOUND
    reset_interval = (0.0, RESET_HIGH)

    @staticmethod
    def _observation_space() -> spaces.Box:
        return spaces.Box(-_OBS_HIGH, _OBS_HIGH, dtype=np.float64)

    @staticmethod
    def _action_space() -> spaces.Box:
        return spaces.Box(-MAX_TORQUE, MAX_TORQUE, shape=(1,), dtype=np.float64)

    @staticmethod
    def _initial_state(rng: np.random.Generator) -> NDArray[np.float64]:
        """Draw theta and theta_dot uniformly in [0, 0.01)."""
        return rng.uniform(*BoundedPendulum.reset_interval, size=(2,))

    #: Apply torque u for dt = 0.05 s (the compiled `pendulum_step`).
    _transition = staticmethod(pendulum_step)
    #: The dynamics over any array namespace (one definition; see `pendulum_dynamics`).
    dynamics = staticmethod(pendulum_dynamics)


class BoundedPendulumVector(PhysicsVectorEnv):
    """B copies of `BoundedPendulum` stepped at once (the registered ``vector_entry_point``).

    Constructor parameters as in `PhysicsVectorEnv`.

    References
    ----------
    .. [1] Rozada, Paternain, Marques, IEEE TSP, 2024.
    """

    single_env = BoundedPendulum
    copies = PendulumCopies
    state_dim = 2
    reward_bound: float = REWARD_BOUND
