"""Exact dynamic programming on factored finite MDPs: Q*, greedy policies, policy values.

A model is anything with the attributes of `ExactModel` (the `Inventory` and
`LowRankMDP` environments, or their ``gymnasium.make`` wrappers). Q-functions
are tensors with one mode per state component followed by one mode per action
component, the layout of the TEQL Q-tensor, so that ``||Q - Q*||`` can be read
off directly during learning.

References
----------
.. [1] R. Bellman, "Dynamic Programming", Princeton University Press, 1957.
.. [2] M. L. Puterman, "Markov Decision Processes", Wiley, 1994, Sections 6.3
   (value iteration) and 6.1 (policy evaluation).
"""

from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from rl.validation import check_real


@runtime_checkable
class ExactModel(Protocol):
    """An environment that exposes its model: the one protocol for value iteration and Q*.

    The bundled `Inventory` and `LowRankMDP` implement it (through
    `rl.envs.factored.FactoredMDP`), and so can any user's environment: give the
    unwrapped environment these five attributes (plain attributes or
    properties) and it gets `value_iteration`, `policy_value`,
    `rl.problems.exact_model` and the ``analysis`` tools with no extra code.
    Its modes must be those of its `rl.problems.Problem` (``MultiDiscrete``
    spaces starting at 0 give exactly that).

    Attributes
    ----------
    state_dims, action_dims : tuple of int
        Sizes of the state and action components (the Q-tensor's modes).
    transition : ndarray, shape state_dims + action_dims + state_dims
        P(s' | s, a); sums to 1 over the trailing state modes.
    reward : ndarray, shape state_dims + action_dims
        Expected one-step reward r(s, a).
    gamma : float
        Default discount factor in [0, 1).

    Notes
    -----
    Optional: ``initial_distribution`` (ndarray, shape state_dims), the
    distribution of the first state, with which ``(initial_distribution *
    V).sum()`` is the expected return from the start; and ``reward_bound``
    (R_max), which `rl.problems.make_problem` reads.
    """

    state_dims: tuple[int, ...]
    action_dims: tuple[int, ...]
    gamma: float

    @property
    def transition(self) -> NDArray[np.float64]: ...  # noqa: D102

    @property
    def reward(self) -> NDArray[np.float64]: ...  # noqa: D102


MODEL_MEMBERS = ("state_dims", "action_dims", "transition", "reward", "gamma")
"""The attributes of `ExactModel`."""


def missing_model_members(model: Any) -> list[str]:
    """Return the `ExactModel` attributes that ``model`` (or its unwrapped env) lacks."""
    model = getattr(model, "unwrapped", model)
    return [name for name in MODEL_MEMBERS if not hasattr(model, name)]


def is_exact_model(model: Any) -> bool:
    """Whether ``model`` (or its unwrapped environment) implements `ExactModel`."""
    return not missing_model_members(model)


def _model(model: Any) -> ExactModel:
    return getattr(model, "unwrapped", model)


def _gamma(model: ExactModel, gamma: float | None) -> float:
    gamma = model.gamma if gamma is None else gamma
    return check_real("gamma", gamma, 0.0, 1.0, high_open=True)


def _flat(model: ExactModel) -> tuple[NDArray[np.float64], NDArray[np.float64], int, int]:
    n_states = math.prod(model.state_dims)
    n_actions = math.prod(model.action_dims)
    transition = np.asarray(model.transition, dtype=np.float64).reshape(
        n_states, n_actions, n_states
    )
    reward = np.asarray(model.reward, dtype=np.float64).reshape(n_states, n_actions)
    return transition, reward, n_states, n_actions


def bellman_optimality(model: Any, q: NDArray, gamma: float | None = None) -> NDArray[np.float64]:
    """Apply the Bellman optimality operator, (T Q)(s, a) = r(s, a) + gamma E[max_a' Q(s', a')].

    Parameters
    ----------
    model : ExactModel
        The MDP (an environment or its wrapper).
    q : ndarray, shape state_dims + action_dims
    gamma : float, optional
        Discount factor; the model's default when None.

    Returns
    -------
    ndarray, shape state_dims + action_dims
    """
    model = _model(model)
    gamma = _gamma(model, gamma)
    transition, reward, n_states, n_actions = _flat(model)
    values = np.asarray(q, dtype=np.float64).reshape(n_states, n_actions).max(axis=1)
    return (reward + gamma * transition @ values).reshape(model.state_dims + model.action_dims)


def bellman_residual(model: Any, q: NDArray, gamma: float | None = None) -> float:
    """Return the sup-norm Bellman optimality residual ``max |T Q - Q|``."""
    return float(np.max(np.abs(bellman_optimality(model, q, gamma) - q)))


def value_iteration(
    model: Any, gamma: float | None = None, tol: float = 1e-10, max_iter: int = 100_000
) -> NDArray[np.float64]:
    """Compute Q* by value iteration.

    Iterates Q <- T Q from Q = 0 until two iterates differ by less than
    ``tol`` in sup norm; the returned Q then satisfies
    ``max |T Q - Q| <= gamma * tol`` and ``max |Q - Q*| <= gamma tol / (1 - gamma)``.

    Parameters
    ----------
    model : ExactModel
        The MDP (an environment such as ``gymnasium.make("rl/Inventory-v0")``
        or its unwrapped env).
    gamma : float, optional
        Discount factor in [0, 1); the model's ``gamma`` when None.
    tol : float, default 1e-10
        Stopping tolerance on successive iterates.
    max_iter : int, default 100000
        Iteration budget.

    Returns
    -------
    ndarray of float64, shape state_dims + action_dims
        Q*, one mode per state component followed by one per action component.
        V* is ``Q.max(axis=tuple(range(len(state_dims), Q.ndim)))``.

    Raises
    ------
    RuntimeError
        If ``max_iter`` iterations do not reach ``tol``.

    References
    ----------
    Bellman (1957); Puterman (1994), Section 6.3.
    """
    model = _model(model)
    gamma = _gamma(model, gamma)
    check_real("tol", tol, 0.0, low_open=True)
    transition, reward, n_states, n_actions = _flat(model)
    q = np.zeros((n_states, n_actions))
    for _ in range(max_iter):
        q_next = reward + gamma * (transition @ q.max(axis=1))
        delta = np.max(np.abs(q_next - q))
        q = q_next
        if delta < tol:
            return q.reshape(model.state_dims + model.action_dims)
    raise RuntimeError(f"Value iteration did not reach tol={tol} in {max_iter} iterations.")


def greedy_policy(q: NDArray, n_state_modes: int) -> NDArray[np.int64]:
    """Return the greedy deterministic policy of a Q-tensor.

    Parameters
    ----------
    q : ndarray, shape state_dims + action_dims
    n_state_modes : int
        Number of leading state modes D_S.

    Returns
    -------
    ndarray of int64, shape state_dims + (D_A,)
        The action index vector chosen in each state (ties: lowest joint index).
    """
    q = np.asarray(q)
    state_dims, action_dims = q.shape[:n_state_modes], q.shape[n_state_modes:]
    flat = q.reshape(state_dims + (-1,)).argmax(axis=-1)
    return np.stack(np.unravel_index(flat, action_dims), axis=-1).astype(np.int64)


def policy_value(model: Any, policy: NDArray, gamma: float | None = None) -> NDArray[np.float64]:
    """Exact value V^pi of a deterministic policy, by solving (I - gamma P_pi) V = r_pi.

    Parameters
    ----------
    model : ExactModel
        The MDP.
    policy : int ndarray, shape state_dims + (D_A,)
        Action index vector per state (as returned by `greedy_policy`).
    gamma : float, optional
        Discount factor; the model's default when None.

    Returns
    -------
    ndarray of float64, shape state_dims
        V^pi. The expected return from the start is
        ``(model.initial_distribution * V).sum()``.

    References
    ----------
    Puterman (1994), Section 6.1.
    """
    model = _model(model)
    gamma = _gamma(model, gamma)
    transition, reward, n_states, _ = _flat(model)
    policy = np.asarray(policy)
    expected = tuple(model.state_dims) + (len(model.action_dims),)
    if policy.shape != expected:
        raise ValueError(
            f"The 'policy' parameter must have shape {expected}. Got {policy.shape} instead."
        )
    joint = np.ravel_multi_index(
        tuple(np.moveaxis(policy.reshape(n_states, -1), -1, 0)), model.action_dims
    )
    rows = np.arange(n_states)
    system = np.eye(n_states) - gamma * transition[rows, joint]
    values = np.linalg.solve(system, reward[rows, joint])
    return values.reshape(model.state_dims)
