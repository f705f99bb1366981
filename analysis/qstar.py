"""Q-tensors to analyse: Q* of the paper's problems and the Q of finished runs.

Every function returns a `QTensor`: a dense array with one mode per state
component followed by one per action component (the layout of the TEQL
Q-tensor), with the discount, the number of state modes and a description of
where it came from.

* ``inventory`` and ``lowrank`` have an exact model: Q* by value iteration
  (`rl.envs.value_iteration`), with the problem's gamma (0.9) unless another is
  asked for.
* ``cartpole`` and ``pendulum`` are continuous: Q* of the *discretized*
  problem on the paper's grid, from an estimated model (`estimate_model`).
  For every grid cell and action, ``samples`` states are drawn uniformly
  inside the cell, stepped once with the environment's batched step function
  (``cartpole_step`` / ``pendulum_step``, the kernel of the NumPy vector
  environments) at the action's bin centre, and binned again; the sample
  means give the reward r(s, a) and the transition P(s' | s, a) of the cell
  MDP, a terminating sample contributing its reward and no continuation.
  Value iteration on that model gives Q*. Only states inside the grid's range
  are drawn, though the edge cells also receive out-of-range states by
  clipping. The paper's gamma is 0.99, the released code's 0.9.
* ``qtensor_from_run`` reads a run directory through `rl.runs.checkpoint.load_checkpoint`:
  the Q-table of a tabular run, or the dense Q of a TEQL or TLR replica.

References
----------
.. [1] TEQL paper, Assumption 1 (Q* of the discretized problem is the tensor
   whose rank-R approximation error is B_R) and the Numerical Study (grids,
   gamma 0.99); docs/authors-code.md (released gamma 0.9).
.. [2] M. L. Puterman, "Markov Decision Processes", Wiley, 1994, Section 6.3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse
import tensorly
from numpy.typing import NDArray
from tensorly.cp_tensor import CPTensor

from analysis._numpy import numpy_backend

EXACT_ENVS = ("inventory", "lowrank")
"""Problems with an exact model (Q* by value iteration on the model)."""
GRID_ENVS = ("cartpole", "pendulum")
"""Continuous problems whose grid MDP is estimated by sampling."""
PAPER_GAMMA = 0.99
"""Discount of the paper's hyperparameter table."""
DEFAULT_MAX_ENTRIES = 50_000_000
"""Largest dense tensor `qtensor_from_run` builds (400 MB of float64)."""

_CHUNK_CELLS = 2048  # cells sampled per vectorized block; fixed so draws never depend on it
_BYTES_PER_SAMPLE = 48  # row, column, weight of a sampled transition (8 bytes each), held twice


@dataclass(frozen=True)
class QTensor:
    """A dense Q-tensor and what it is.

    Attributes
    ----------
    tensor : ndarray of float64 or CPTensor, shape state_dims + action_dims
        Q(s, a), state modes first: dense, or (a tensor agent's Q too large to
        build densely, `qtensor_from_run`) its CP factors, which
        `analysis.rank.rank_profile` and `analysis.spectral.spectral_energy`
        accept.
    gamma : float or None
        Discount it belongs to (None when unknown).
    n_state_modes : int
        Number of leading state modes D_S.
    source : str
        One line saying where it came from (problem, method, samples, run).
    reward_bound : float
        R_max of the problem, so that V_max = R_max / (1 - gamma).
    env : str or None
        Short problem name (``"cartpole"``), when known.
    """

    tensor: NDArray[np.float64] | CPTensor
    gamma: float | None
    n_state_modes: int
    source: str
    reward_bound: float
    env: str | None = None

    @property
    def state_dims(self) -> tuple[int, ...]:
        """Sizes of the state modes."""
        return tuple(self.tensor.shape[: self.n_state_modes])

    @property
    def action_dims(self) -> tuple[int, ...]:
        """Sizes of the action modes."""
        return tuple(self.tensor.shape[self.n_state_modes :])

    @property
    def v_max(self) -> float | None:
        """V_max = R_max / (1 - gamma), None without a gamma."""
        return None if self.gamma is None else self.reward_bound / (1.0 - self.gamma)


@dataclass(frozen=True)
class SampledModel:
    """The estimated model of a discretized continuous problem (see `estimate_model`).

    Attributes
    ----------
    state_dims, action_dims : tuple of int
        Grid sizes.
    reward : ndarray of float64, shape (n_cells, n_actions)
        Mean sampled reward r(s, a).
    continuation : scipy.sparse.csr_matrix, shape (n_cells * n_actions, n_cells)
        Row (s, a) holds P(s' | s, a) times the probability of not terminating.
    terminal_share : float
        Fraction of samples that terminated.
    samples : int
        Samples per cell and action.
    """

    state_dims: tuple[int, ...]
    action_dims: tuple[int, ...]
    reward: NDArray[np.float64]
    continuation: scipy.sparse.csr_matrix
    terminal_share: float
    samples: int


def _check_gamma(gamma: float) -> float:
    if not isinstance(gamma, (int, float, np.floating)) or not 0.0 < gamma < 1.0:
        raise ValueError(f"The 'gamma' parameter must be a float in (0, 1). Got {gamma!r} instead.")
    return float(gamma)


def _step_function(name: str) -> Any:
    from rl.envs.cartpole import cartpole_step
    from rl.envs.pendulum import pendulum_step

    return {"cartpole": cartpole_step, "pendulum": pendulum_step}[name]


def _cell_bounds(grid: Any) -> tuple[list[NDArray], list[NDArray]]:
    """Per dimension, the lower and upper edge of every cell inside [low, high]."""
    lowers, uppers = [], []
    for d, bins in enumerate(grid.dims):
        low, high = grid.low[d], grid.high[d]
        width = (high - low) / (bins if grid.rule == "centre" else max(bins - 1, 1))
        index = np.zeros((bins, grid.ndim), dtype=np.int64)
        index[:, d] = np.arange(bins)
        centre = grid.value(index)[:, d]
        lowers.append(np.maximum(centre - width / 2, low))
        uppers.append(np.minimum(centre + width / 2, high))
    return lowers, uppers


def estimate_model(
    env: str,
    *,
    samples: int = 20,
    rng: np.random.Generator | None = None,
    index_rule: str = "centre",
) -> SampledModel:
    """Estimate the grid MDP of CartPole or Pendulum by sampling inside every cell.

    For each cell of the paper's state grid and each action bin, ``samples``
    states are drawn uniformly inside the cell and stepped once at the
    action's bin centre. All draws of a block of cells are one vectorized
    call of the environment's batched step function.

    Parameters
    ----------
    env : {"cartpole", "pendulum"}
        The problem (the paper's grid, `rl.problems.discretize.PRESETS`).
    samples : int, default 20
        Samples per cell and action (>= 1); the sampled transitions must fit
        `rl.validation.memory_budget` (48 bytes each).
    rng : numpy.random.Generator, optional
        Source of the draws; ``numpy.random.default_rng(0)`` when None.
    index_rule : {"centre", "endpoint"}, default "centre"
        State index rule of the grid (`rl.problems.discretize.UniformGrid`).

    Returns
    -------
    SampledModel

    References
    ----------
    Rozada et al. (2024) and the TEQL paper, Numerical Study (the grids).
    """
    from rl.problems import make_problem

    if env not in GRID_ENVS:
        raise ValueError(f"The 'env' parameter must be one of {GRID_ENVS}. Got {env!r} instead.")
    if not isinstance(samples, (int, np.integer)) or samples < 1:
        raise ValueError(f"The 'samples' parameter must be an int >= 1. Got {samples!r} instead.")
    rng = np.random.default_rng(0) if rng is None else rng
    from rl.problems.discretize import PRESETS
    from rl.validation import check_memory

    problem = make_problem(env, index_rule=index_rule)
    grid = PRESETS[env].state_grid(index_rule)
    step = _step_function(env)
    state_dims, action_dims = problem.state_dims, problem.action_dims
    n_cells, n_actions = math.prod(state_dims), math.prod(action_dims)
    n_bytes = float(n_cells) * n_actions * samples * _BYTES_PER_SAMPLE
    check_memory("samples", n_bytes, f"the sampled model of {env} ({samples} per cell and action)")
    actions = problem.decode(np.arange(n_actions)[:, None])  # (A, 1) bin centres
    lowers, uppers = _cell_bounds(grid)
    reward = np.empty((n_cells, n_actions))
    rows, cols, weights = [], [], []
    terminated_total = 0
    for start in range(0, n_cells, _CHUNK_CELLS):
        cells = np.arange(start, min(start + _CHUNK_CELLS, n_cells))
        index = np.unravel_index(cells, state_dims)
        low = np.stack([lowers[d][index[d]] for d in range(len(state_dims))], axis=-1)
        high = np.stack([uppers[d][index[d]] for d in range(len(state_dims))], axis=-1)
        shape = (len(cells), n_actions, samples, len(state_dims))
        states = rng.uniform(low[:, None, None, :], high[:, None, None, :], size=shape)
        action = np.broadcast_to(actions[None, :, None, :], shape[:3] + (actions.shape[1],))
        next_states, rewards, terminated = step(
            np.ascontiguousarray(states.reshape(-1, len(state_dims))),
            np.ascontiguousarray(action.reshape(-1, actions.shape[1]), dtype=np.float64),
        )
        reward[cells] = rewards.reshape(shape[:3]).mean(axis=-1)
        next_cells = np.ravel_multi_index(tuple(problem.encode(next_states).T), state_dims)
        alive = ~terminated
        terminated_total += int(terminated.sum())
        row = (cells[:, None, None] * n_actions + np.arange(n_actions)[None, :, None]).repeat(
            samples, axis=-1
        )
        rows.append(row.reshape(-1)[alive])
        cols.append(next_cells[alive])
        weights.append(np.full(int(alive.sum()), 1.0 / samples))
    continuation = scipy.sparse.coo_matrix(
        (np.concatenate(weights), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n_cells * n_actions, n_cells),
    ).tocsr()
    continuation.sum_duplicates()
    share = terminated_total / (n_cells * n_actions * samples)
    return SampledModel(state_dims, action_dims, reward, continuation, share, int(samples))


def sampled_value_iteration(
    model: SampledModel, gamma: float, *, tol: float = 1e-8, max_iter: int = 100_000
) -> NDArray[np.float64]:
    """Q* of a `SampledModel` by value iteration, Q <- r + gamma P max_a' Q.

    Parameters
    ----------
    model : SampledModel
    gamma : float
        Discount in (0, 1).
    tol : float, default 1e-8
        Stop when successive iterates differ by less than this (sup norm), so
        that ``max |Q - Q*| <= gamma tol / (1 - gamma)``.
    max_iter : int, default 100000

    Returns
    -------
    ndarray of float64, shape state_dims + action_dims

    References
    ----------
    Puterman (1994), Section 6.3.
    """
    gamma = _check_gamma(gamma)
    n_cells, n_actions = model.reward.shape
    q = np.zeros((n_cells, n_actions))
    for _ in range(max_iter):
        q_next = model.reward + gamma * (model.continuation @ q.max(axis=1)).reshape(
            n_cells, n_actions
        )
        delta = float(np.max(np.abs(q_next - q)))
        q = q_next
        if delta < tol:
            return q.reshape(model.state_dims + model.action_dims)
    raise RuntimeError(f"Value iteration did not reach tol={tol} in {max_iter} iterations.")


def exact_qstar(
    env: str, *, gamma: float | None = None, env_kwargs: dict | None = None, tol: float = 1e-10
) -> QTensor:
    """Q* of an exact-model problem (inventory, low-rank MDP) by value iteration.

    Parameters
    ----------
    env : {"inventory", "lowrank"}
    gamma : float, optional
        Discount in (0, 1); the problem's own (0.9) when None.
    env_kwargs : dict, optional
        Constructor arguments of the environment.
    tol : float, default 1e-10
        Value-iteration tolerance.

    Returns
    -------
    QTensor
    """
    import gymnasium

    from rl.envs import value_iteration
    from rl.problems import make_problem

    if env not in EXACT_ENVS:
        raise ValueError(f"The 'env' parameter must be one of {EXACT_ENVS}. Got {env!r} instead.")
    model = gymnasium.make(make_problem(env).env_id, **(env_kwargs or {})).unwrapped
    gamma = model.gamma if gamma is None else _check_gamma(gamma)
    q = value_iteration(model, gamma=gamma, tol=tol)
    source = f"Q* of {env} by value iteration on the exact model (gamma {gamma:g})"
    return QTensor(q, float(gamma), len(model.state_dims), source, float(model.reward_bound), env)


def grid_qstar(
    env: str,
    *,
    gamma: float = PAPER_GAMMA,
    samples: int = 20,
    rng: np.random.Generator | None = None,
    index_rule: str = "centre",
    model: SampledModel | None = None,
    tol: float = 1e-8,
) -> QTensor:
    """Q* of discretized CartPole or Pendulum on the paper's grid, from an estimated model.

    Parameters
    ----------
    env : {"cartpole", "pendulum"}
    gamma : float, default 0.99
        Discount (the paper's 0.99; the released code used 0.9).
    samples : int, default 20
        Samples per cell and action (see `estimate_model`).
    rng : numpy.random.Generator, optional
        Source of the draws (``default_rng(0)`` when None).
    index_rule : {"centre", "endpoint"}, default "centre"
    model : SampledModel, optional
        A model already estimated (to solve it for several gammas).
    tol : float, default 1e-8

    Returns
    -------
    QTensor
    """
    from rl.problems import make_problem

    gamma = _check_gamma(gamma)
    if model is None:
        model = estimate_model(env, samples=samples, rng=rng, index_rule=index_rule)
    q = sampled_value_iteration(model, gamma, tol=tol)
    source = (
        f"Q* of discretized {env} ({index_rule} grid {model.state_dims} x {model.action_dims}) "
        f"from an estimated model, {model.samples} samples per cell and action (gamma {gamma:g})"
    )
    bound = make_problem(env).reward_bound
    return QTensor(q, gamma, len(model.state_dims), source, float(bound), env)


@numpy_backend
def q_star(
    env: str,
    *,
    gamma: float | None = None,
    samples: int = 20,
    rng: np.random.Generator | None = None,
) -> QTensor:
    """Q* of a named problem: exact for inventory and lowrank, estimated for CartPole and Pendulum.

    Parameters
    ----------
    env : str
        ``"inventory"``, ``"lowrank"``, ``"cartpole"`` or ``"pendulum"``.
    gamma : float, optional
        Discount; None means the problem's own (0.9) for the exact models and
        the paper's 0.99 for CartPole and Pendulum.
    samples : int, default 20
        Samples per cell and action for the estimated models.
    rng : numpy.random.Generator, optional
        Source of the draws for the estimated models.

    Returns
    -------
    QTensor

    Raises
    ------
    ValueError
        For a problem without a model (Highway) or an unknown name.
    """
    if env in EXACT_ENVS:
        return exact_qstar(env, gamma=gamma)
    if env in GRID_ENVS:
        return grid_qstar(
            env, gamma=PAPER_GAMMA if gamma is None else gamma, samples=samples, rng=rng
        )
    if env == "highway":
        raise ValueError(
            "Highway has no model to compute Q* from; analyse a run instead (--source run)."
        )
    known = ", ".join(EXACT_ENVS + GRID_ENVS)
    raise ValueError(f"Unknown env {env!r}; Q* is available for: {known}.")


def _replica_cp(factors: list[NDArray], replica: int) -> CPTensor:
    """Return one replica's CP tensor (unit weights, float64 NumPy factors)."""
    rank = factors[0].shape[-1]
    return CPTensor((np.ones(rank), [np.array(f[replica], dtype=np.float64) for f in factors]))


@numpy_backend
def qtensor_from_run(
    run_dir: str | Path,
    *,
    replica: int = 0,
    max_entries: int | None = None,
    env: str | None = None,
    trust_env_module: bool = False,
) -> QTensor:
    """Return the Q-tensor of one replica of a finished run (tabular, TEQL or TLR).

    The run is read through `rl.runs.checkpoint.load_checkpoint` (file
    `rl.runs.training.CHECKPOINT_FILE`): a tabular agent's ``"q_table"`` (B, |S|, |A|)
    or a tensor agent's ``"factors"`` (one (B, d_n, R) array per mode), whose
    dense tensor is built with ``tensorly.cp_to_tensor``.

    Parameters
    ----------
    run_dir : path-like
        A run directory written by `rl.runs.training.train` / ``python -m rl.train``.
    replica : int, default 0
        Which replica (seed) of the run.
    max_entries : int, optional
        Build no dense tensor with more entries than this (default
        `DEFAULT_MAX_ENTRIES`): a tensor agent's Q is then returned as its CP
        factors (NumPy), a Q-table refused.
    env : str, optional
        The run's environment, named by the caller (as `rl.runs.load.load_run`); it
        must equal the recorded one.
    trust_env_module : bool, default False
        Import the module of a recorded ``"package.module:Env-v0"`` id without
        naming it (`rl.runs.load.run_problem`).

    Returns
    -------
    QTensor
        Its ``tensor`` is a float64 NumPy array, or a CPTensor of float64
        NumPy weights and factors, whatever TensorLy's global backend is.

    Raises
    ------
    ValueError
        If the directory has no checkpoint, the agent stores no Q-tensor, the
        replica does not exist or the tensor is too large.
    """
    from rl.runs.checkpoint import load_checkpoint
    from rl.runs.load import run_problem
    from rl.runs.training import CHECKPOINT_FILE

    path = Path(run_dir) / CHECKPOINT_FILE
    if not path.is_file():
        raise ValueError(f"{run_dir} is not a run directory: it has no {CHECKPOINT_FILE}.")
    checkpoint = load_checkpoint(path)
    config = checkpoint.config
    problem = run_problem(
        run_dir,
        config["env"],
        config.get("env_options", {}),
        env=env,
        trust_env_module=trust_env_module,
    )
    shape = problem.state_dims + problem.action_dims
    state, agent = checkpoint.agent_state, config.get("agent", "?")
    gamma = config.get("agent_params", {}).get("gamma")
    if "factors" in state:
        factors = [np.asarray(f) for f in state["factors"]]
        replicas, kind = factors[0].shape[0], "dense Q of CP factors"
    elif "q_table" in state:
        table = np.asarray(state["q_table"], dtype=np.float64)
        replicas, kind = table.shape[0], "Q-table"
    else:
        raise ValueError(
            f"The run in {run_dir} used agent {agent!r}, whose checkpoint holds no Q-tensor "
            "(neither CP 'factors' nor a 'q_table')."
        )
    if not isinstance(replica, (int, np.integer)) or not 0 <= replica < replicas:
        raise ValueError(
            f"The 'replica' parameter must be an int in [0, {replicas}). Got {replica!r} instead."
        )
    size = math.prod(shape)
    max_entries = DEFAULT_MAX_ENTRIES if max_entries is None else max_entries
    if size > max_entries and "factors" not in state:
        raise ValueError(
            f"The Q-table of {run_dir} has {size:.3g} entries (shape {shape}), above the "
            f"limit of {max_entries:.3g}: too large to build densely."
        )
    tensor: NDArray[np.float64] | CPTensor
    if "factors" in state and size > max_entries:
        tensor, kind = _replica_cp(factors, replica), "CP factors"
    elif "factors" in state:
        with tensorly.backend_context("numpy"):
            tensor = np.asarray(tensorly.cp_to_tensor(_replica_cp(factors, replica)), np.float64)
    else:
        tensor = table[replica].reshape(shape)
    source = (
        f"{kind} of replica {replica} of {agent} on {config['env']} in {run_dir} "
        f"after {checkpoint.episode} episodes"
    )
    return QTensor(
        tensor,
        None if gamma is None else float(gamma),
        len(problem.state_dims),
        source,
        float(problem.reward_bound),
        problem.name,
    )
