"""The continuous-action cart-pole of Rozada et al. (2024), used by the TEQL paper.

It is not Gymnasium's ``CartPole-v1``: the action is a force ``30 a`` with
``a`` in [-1, 1], the reward penalises the pole angle, its angular velocity and
the effort, and an episode lasts at most 100 steps (registered
``max_episode_steps``).

Dynamics (Sutton-Barto cart-pole, explicit Euler, tau = 0.02 s)::

    F      = 30 a
    temp   = (F + m_p l theta_dot^2 sin theta) / (m_c + m_p)
    th_acc = (g sin theta - cos theta temp) / (l (4/3 - m_p cos^2 theta / (m_c + m_p)))
    x_acc  = temp - m_p l th_acc cos theta / (m_c + m_p)
    x' = x + tau x_dot,  x_dot' = x_dot + tau x_acc,
    theta' = theta + tau theta_dot,  theta_dot' = theta_dot + tau th_acc

with g = 9.8, m_c = 1.0, m_p = 0.1, l = 0.5 (half the pole length). The episode
terminates when |x'| > 2.4 or |theta'| > 12 degrees. The reward is computed
from the new state::

    r = 1 - theta'^2 - theta_dot'^2 - 10 a^2          (still alive)
    r = -theta'^2 - 0.1 theta_dot'^2 - 10 a^2         (terminating step)

References
----------
.. [1] S. Rozada, S. Paternain, A. G. Marques, "Tensor and matrix low-rank
   value-function approximation in reinforcement learning", IEEE Transactions
   on Signal Processing, 2024.
.. [2] A. G. Barto, R. S. Sutton, C. W. Anderson, "Neuronlike adaptive elements
   that can solve difficult learning control problems", IEEE SMC, 1983.
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

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_CART + MASS_POLE
HALF_LENGTH = 0.5
POLE_MASS_LENGTH = MASS_POLE * HALF_LENGTH
FORCE_MAG = 30.0
TAU = 0.02
X_THRESHOLD = 2.4
THETA_THRESHOLD = 12 * 2 * math.pi / 360
RESET_BOUND = 0.05

#: Bound on |theta_dot| (rad/s) assumed by `REWARD_BOUND`. Not a constraint of the dynamics:
#: while alive |theta| <= 12 deg and |theta_acc| <= 48 rad/s^2, so a sweep across the allowed
#: angle gives theta_dot^2 <= 2 * 48 * 0.42 (about 6.35^2); the largest values found over 10^6
#: random bang-bang episodes are 6.42 (alive) and 7.33 (terminating step). See docs/environments.md.
THETA_DOT_BOUND = 8.0
#: R_max. Alive: r = 1 - theta^2 - theta_dot^2 - 10 a^2 in [-(9 + thr^2 + w^2), 1];
#: terminating: |r| <= (thr + tau w)^2 + 0.1 w^2 + 10, smaller. About 73.04.
REWARD_BOUND = max(
    9.0 + THETA_THRESHOLD**2 + THETA_DOT_BOUND**2,
    10.0 + (THETA_THRESHOLD + TAU * THETA_DOT_BOUND) ** 2 + 0.1 * THETA_DOT_BOUND**2,
)

_OBS_HIGH = np.array([2 * X_THRESHOLD, np.inf, 2 * THETA_THRESHOLD, np.inf])


def cartpole_dynamics(xp: Any) -> Callable[..., Any]:
    """Return the cart-pole's one Euler step written with the array functions of ``xp``.

    The one definition of the dynamics: compiled by Numba for one copy
    (`cartpole_row`, with ``xp`` = `rl.envs.physics.SCALAR_OPS`) and run on
    whole batches by NumPy, PyTorch or JAX (``xp`` = ``numpy``, ``torch`` or
    ``jax.numpy``; `rl.envs.physics.PhysicsEnv.array_dynamics`).

    Parameters
    ----------
    xp : module
        Supplies ``sin``, ``cos``, ``clip`` and ``where``.

    Returns
    -------
    callable
        ``step(x, x_dot, theta, theta_dot, a) -> ((x', x_dot', theta', theta_dot'),
        reward, terminated)``, on floats or on (B,) arrays; ``a`` is the
        normalised force, clipped to [-1, 1].

    References
    ----------
    Rozada et al. (2024), continuous cart-pole; see the module docstring.
    """

    def step(x: Any, x_dot: Any, theta: Any, theta_dot: Any, a: Any) -> tuple:
        a = xp.clip(a, -1.0, 1.0)
        cos_t = xp.cos(theta)
        sin_t = xp.sin(theta)
        temp = (FORCE_MAG * a + POLE_MASS_LENGTH * theta_dot * theta_dot * sin_t) / TOTAL_MASS
        theta_acc = (GRAVITY * sin_t - cos_t * temp) / (
            HALF_LENGTH * (4.0 / 3.0 - MASS_POLE * cos_t * cos_t / TOTAL_MASS)
        )
        x_acc = temp - POLE_MASS_LENGTH * theta_acc * cos_t / TOTAL_MASS
        new_x = x + TAU * x_dot
        new_theta = theta + TAU * theta_dot
        new_theta_dot = theta_dot + TAU * theta_acc
        done = (abs(new_x) > X_THRESHOLD) | (abs(new_theta) > THETA_THRESHOLD)
        theta_sq = new_theta * new_theta
        theta_dot_sq = new_theta_dot * new_theta_dot
        effort = 10.0 * a * a
        reward = xp.where(
            done, -theta_sq - 0.1 * theta_dot_sq - effort, 1.0 - theta_sq - theta_dot_sq - effort
        )
        return (new_x, x_dot + TAU * x_acc, new_theta, new_theta_dot), reward, done

    return step


_scalar_step = kernel(cartpole_dynamics(SCALAR_OPS))


@kernel
def cartpole_row(state: NDArray[np.float64], a: float, out: NDArray[np.float64]) -> tuple:
    """Advance one cart-pole by one Euler step (`cartpole_dynamics`): ``out`` gets the next state.

    Parameters
    ----------
    state : ndarray of float64, shape (4,)
        (x, x_dot, theta, theta_dot).
    a : float
        Normalised force in [-1, 1] (clipped).
    out : ndarray of float64, shape (4,)
        Receives the next state (may be ``state`` itself).

    Returns
    -------
    reward : float
    terminated : bool
    """
    (out[0], out[1], out[2], out[3]), reward, done = _scalar_step(
        state[0], state[1], state[2], state[3], a
    )
    return reward, done


@kernel
def cartpole_step(
    state: NDArray[np.float64], action: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """Advance a batch of cart-poles by one Euler step (`cartpole_row` on every row).

    Each row is computed on its own, so a row does not depend on B (the single
    and the vector environment agree bit for bit).

    Parameters
    ----------
    state : ndarray of float64, shape (B, 4)
        Rows (x, x_dot, theta, theta_dot).
    action : ndarray of float64, shape (B, 1)
        Normalised force a in [-1, 1] (clipped).

    Returns
    -------
    next_state : ndarray, shape (B, 4)
    reward : ndarray of float64, shape (B,)
    terminated : ndarray of bool, shape (B,)
    """
    n_rows = state.shape[0]
    next_state = np.empty((n_rows, 4))
    reward = np.empty(n_rows)
    terminated = np.empty(n_rows, dtype=np.bool_)
    for i in range(n_rows):
        reward[i], terminated[i] = cartpole_row(state[i], action[i, 0], next_state[i])
    return next_state, reward, terminated


@kernel
def cartpole_copy(copies: CartPoleCopies, b: int, action: float) -> tuple:
    """Step copy ``b`` of ``copies`` in place (`cartpole_row`), for compiled loops."""
    return cartpole_row(copies.obs[b], action, copies.obs[b])


class CartPoleCopies(RowCopies):
    """B cart-poles as compiled loops step them (`rl.envs.physics.RowCopies`)."""

    step_kernel = cartpole_copy
    sources = (__file__, *RowCopies.sources)


class ContinuousCartPole(PhysicsEnv):
    """Cart-pole with a continuous force, the reward of Rozada et al. and 100-step episodes.

    Observation: float64 array (x, x_dot, theta, theta_dot). Action: float64
    array of shape (1,) in [-1, 1], force 30 a. The initial state is uniform in
    [-0.05, 0.05]^4. The per-step reward is a Python float; `reward_bound` is
    an upper bound on its absolute value (see `docs/environments.md`).

    References
    ----------
    .. [1] Rozada, Paternain, Marques, "Tensor and matrix low-rank value-function
       approximation in reinforcement learning", IEEE TSP, 2024.
    """

    reward_bound: float = REWARD_BOUND
    reset_interval = (-RESET_BOUND, RESET_BOUND)

    @staticmethod
    def _observation_space() -> spaces.Box:
        return spaces.Box(-_OBS_HIGH, _OBS_HIGH, dtype=np.float64)

    @staticmethod
    def _action_space() -> spaces.Box:
        return spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float64)

    @staticmethod
    def _initial_state(rng: np.random.Generator) -> NDArray[np.float64]:
        """Draw the initial state uniformly in [-0.05, 0.05]^4."""
        return rng.uniform(*ContinuousCartPole.reset_interval, size=(4,))

    #: Apply force 30 a for one step of 0.02 s (the compiled `cartpole_step`).
    _transition = staticmethod(cartpole_step)
    #: The dynamics over any array namespace (one definition; see `cartpole_dynamics`).
    dynamics = staticmethod(cartpole_dynamics)


class ContinuousCartPoleVector(PhysicsVectorEnv):
    """B copies of `ContinuousCartPole` stepped at once (the registered ``vector_entry_point``).

    Constructor parameters as in `PhysicsVectorEnv`.

    References
    ----------
    .. [1] Rozada, Paternain, Marques, IEEE TSP, 2024.
    """

    single_env = ContinuousCartPole
    copies = CartPoleCopies
    state_dim = 4
    reward_bound: float = REWARD_BOUND
