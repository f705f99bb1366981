"""The bundled environments: one registry (`ENVIRONMENTS`) and their problem builders.

`ENVIRONMENTS` is the one map from short name to everything about a bundled
environment: its Gymnasium id, entry points, episode length and problem
builder. `register_envs` (called by ``import rl``), `rl.make_problem`, the
configuration and the tests all read it; nothing else lists the environments.
`exact_model` returns the model of an environment that implements
`rl.envs.ExactModel`, for value iteration and the ``analysis`` tools.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from numpy.typing import NDArray

from rl.envs import cartpole, highway, pendulum
from rl.envs.value_iteration import ExactModel, is_exact_model, missing_model_members
from rl.problems.discretize import PRESETS, DiscreteGrid, UniformGrid
from rl.problems.problem import Problem
from rl.validation import MAX_BINS, check_ints


@dataclass(frozen=True)
class BundledEnv:
    """One bundled environment: how Gymnasium makes it and how it becomes a `Problem`.

    Attributes
    ----------
    name : str
        Short name (``"cartpole"``).
    env_id : str
        Registered Gymnasium id (``"rl/ContinuousCartPole-v0"``).
    entry_point : str
        ``module:Class`` of the single environment.
    vector_entry_point : str or None
        ``module:Class`` of the NumPy vector version, if there is one.
    max_episode_steps : int
        Registered truncation horizon (a ``TimeLimit``).
    build : callable
        ``build(entry, env_kwargs, options) -> Problem``: the problem builder,
        given this entry, the constructor arguments and the remaining
        `make_problem` options (``index_rule``, ``state_bins``, ``action_bins``).
    """

    name: str
    env_id: str
    entry_point: str
    vector_entry_point: str | None
    max_episode_steps: int
    build: Callable[[BundledEnv, dict, dict[str, Any]], Problem]

    @property
    def vectorized(self) -> bool:
        """Whether a NumPy vector version is registered (``gymnasium.make_vec``)."""
        return self.vector_entry_point is not None


BUNDLED_OPTIONS = ("index_rule", "state_bins", "action_bins", "normalization", "env_kwargs")
"""The `make_problem` options that apply to the bundled problems."""


def _bins(option: str, value: Any, ndim: int) -> tuple[int, ...] | None:
    if value is None:
        return None
    single = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    bins = (value,) * ndim if single else value
    try:
        if len(bins) == ndim:
            return check_ints(option, bins, 1, MAX_BINS)
    except (TypeError, ValueError):  # not a sequence, or not such ints
        pass
    raise ValueError(
        f"The '{option}' parameter must be an int in [1, {MAX_BINS}] or {ndim} such ints. "
        f"Got {value!r} instead."
    )


def _encoder(grid: UniformGrid | DiscreteGrid, obs_dim: int) -> Callable[[NDArray], NDArray]:
    def encode(observations: NDArray) -> NDArray[np.int64]:
        return grid.index(np.asarray(observations).reshape(-1, obs_dim))

    return encode


def _decoder(grid: UniformGrid | DiscreteGrid, n_components: int) -> Callable[[NDArray], NDArray]:
    def decode(actions: NDArray[np.int64]) -> NDArray:
        return grid.value(np.asarray(actions, dtype=np.int64).reshape(-1, n_components))

    return decode


def _grid_problem(
    entry: BundledEnv, env_kwargs: dict, options: dict[str, Any], reward_bound: float
) -> Problem:
    """Build a problem on the paper's grid `rl.problems.discretize.PRESETS[entry.name]`."""
    preset = PRESETS[entry.name]
    state_bins = _bins("state_bins", options.get("state_bins"), len(preset.state_bins))
    action_bins = _bins("action_bins", options.get("action_bins"), len(preset.action_bins))
    if action_bins is not None and preset.action_low is None:
        raise ValueError(
            f"The 'action_bins' option does not apply to {entry.name!r}: its actions are discrete."
        )
    state_grid = preset.state_grid(options.get("index_rule", "centre"), state_bins)
    action_grid = preset.action_grid("centre", action_bins)
    return Problem(
        name=entry.name,
        env_id=entry.env_id,
        env_kwargs=env_kwargs,
        state_dims=state_grid.dims,
        action_dims=action_grid.dims,
        reward_bound=reward_bound,
        encode=_encoder(state_grid, state_grid.ndim),
        decode=_decoder(action_grid, action_grid.ndim),
        vectorized=entry.vectorized,
        action_interval=None
        if preset.action_low is None
        else (tuple(preset.action_low), tuple(preset.action_high)),
        grids=(state_grid, action_grid),
    )


def _physics_problem(entry: BundledEnv, env_kwargs: dict, options: dict[str, Any]) -> Problem:
    """Build CartPole or Pendulum: the paper's grids, the module's `REWARD_BOUND`."""
    module = cartpole if entry.name == "cartpole" else pendulum
    return _grid_problem(entry, env_kwargs, options, float(module.REWARD_BOUND))


def _uncovered_by_twin(env_kwargs: dict) -> list[str]:
    """Return the Highway options the twin does not cover (it is the paper's configuration)."""
    return sorted(set(env_kwargs) - {"engine", "normalization"})


def _highway_problem(entry: BundledEnv, env_kwargs: dict, options: dict[str, Any]) -> Problem:
    """Build Highway without the simulator: the grid and the configuration's reward bound.

    Without an ``engine`` option the compiled twin runs wherever it covers the
    configuration, highway-env otherwise; the choice is recorded in the problem's
    ``chosen_options`` (so a run's ``config.json`` names it) and `describe_simulator`
    says which.
    """
    if env_kwargs.get("normalization", "paper") not in highway.NORMALIZATIONS:
        raise ValueError(
            f"The 'normalization' option must be one of {highway.NORMALIZATIONS}. "
            f"Got {env_kwargs['normalization']!r} instead."
        )
    uncovered = _uncovered_by_twin(env_kwargs)
    engine = env_kwargs.get("engine")
    chosen = {}
    if engine is None:
        engine = "reference" if uncovered else "twin"
        chosen = {"env_kwargs": {**env_kwargs, "engine": engine}}
    if engine not in HIGHWAY_ENGINES:
        raise ValueError(
            f"The 'engine' option of 'highway' must be one of {HIGHWAY_ENGINES}. "
            f"Got {engine!r} instead."
        )
    if engine == "reference":
        env_kwargs = {key: value for key, value in env_kwargs.items() if key != "engine"}
    elif uncovered:
        raise ValueError(
            "The Highway twin (engine 'twin') covers the paper's configuration only; use "
            f"engine 'reference' (highway-env) for the options {uncovered}."
        )
    else:
        env_kwargs = {**env_kwargs, "engine": "twin"}
    problem = _grid_problem(
        entry, env_kwargs, options, highway.reward_bound(env_kwargs.get("config"))
    )
    problem = dataclasses.replace(problem, chosen_options=chosen)
    if engine == "twin":
        return dataclasses.replace(problem, env_id=HIGHWAY_TWIN_ID, vectorized=True)
    return problem


def describe_simulator(problem: Problem) -> str | None:
    """Return one line saying which simulator runs ``problem`` where there is a choice.

    Highway runs on its compiled twin (`rl.envs.highway_twin`) or on highway-env;
    every other problem has one simulator (None).
    """
    if problem.name != "highway":
        return None
    if problem.env_id == HIGHWAY_TWIN_ID:
        return (
            "Highway runs on its compiled twin of highway-env (equal to it on the paper's "
            'configuration); --env-option \'env_kwargs={"engine": "reference"}\' runs '
            "highway-env itself."
        )
    uncovered = _uncovered_by_twin(problem.env_kwargs)
    why = (
        f"the compiled twin does not cover the options {uncovered}"
        if uncovered
        else ("engine 'reference' was asked for")
    )
    return f"Highway runs on highway-env ({why})."


def _exact_problem(entry: BundledEnv, env_kwargs: dict, options: dict[str, Any]) -> Problem:
    """Build Inventory, LowRankMDP or GoalGrid: the discrete spaces are the grid (identity maps).

    A ``Discrete`` action space (GoalGrid's) decodes to one int per environment.
    The reward size is the one the environment declares (GoalGrid's), else None.
    """
    if options.get("state_bins") is not None or options.get("action_bins") is not None:
        raise ValueError(
            f"The 'state_bins' and 'action_bins' options do not apply to {entry.name!r}: its "
            "spaces are discrete; change its sizes through 'env_kwargs'."
        )
    env = gymnasium.make(entry.env_id, **env_kwargs).unwrapped
    state_grid = DiscreteGrid(env.state_dims)
    action_grid = DiscreteGrid(
        env.action_dims, scalar=isinstance(env.action_space, gymnasium.spaces.Discrete)
    )
    env.close()
    size = getattr(env, "reward_size", None)
    return Problem(
        name=entry.name,
        env_id=entry.env_id,
        env_kwargs=env_kwargs,
        state_dims=state_grid.dims,
        action_dims=action_grid.dims,
        reward_bound=float(env.reward_bound),
        reward_size=size,
        reward_size_source=None if size is None else "environment",
        encode=_encoder(state_grid, len(state_grid.dims)),
        decode=_decoder(action_grid, len(action_grid.dims)),
        vectorized=entry.vectorized,
        discount=float(env.gamma),
        grids=(state_grid, action_grid),
        check_values=state_grid.check,
    )


#: The bundled environments by short name: the one list every other place derives from.
ENVIRONMENTS: dict[str, BundledEnv] = {
    entry.name: entry
    for entry in (
        BundledEnv(
            "cartpole",
            "rl/ContinuousCartPole-v0",
            "rl.envs.cartpole:ContinuousCartPole",
            "rl.envs.cartpole:ContinuousCartPoleVector",
            100,
            _physics_problem,
        ),
        BundledEnv(
            "pendulum",
            "rl/BoundedPendulum-v0",
            "rl.envs.pendulum:BoundedPendulum",
            "rl.envs.pendulum:BoundedPendulumVector",
            100,
            _physics_problem,
        ),
        BundledEnv(
            "highway", "rl/Highway-v0", "rl.envs.highway:Highway", None, 50, _highway_problem
        ),
        BundledEnv(
            "inventory", "rl/Inventory-v0", "rl.envs.inventory:Inventory", None, 100, _exact_problem
        ),
        BundledEnv(
            "lowrank",
            "rl/LowRankMDP-v0",
            "rl.envs.lowrank_mdp:LowRankMDP",
            None,
            100,
            _exact_problem,
        ),
        BundledEnv(
            "planted",
            "rl/PlantedRankMDP-v0",
            "rl.envs.lowrank_mdp:PlantedRankMDP",
            "rl.envs.planted_vector:PlantedRankVector",
            100,
            _exact_problem,
        ),
        BundledEnv(
            "goalgrid", "rl/GoalGrid-v0", "rl.envs.goal_grid:GoalGrid", None, 200, _exact_problem
        ),
    )
}
_BY_ID = {entry.env_id: entry for entry in ENVIRONMENTS.values()}


#: Highway's simulators (``env_kwargs={"engine": ...}``): highway-env itself, or the
#: compiled twin of `rl.envs.highway_twin` (the paper's configuration only, where it is
#: the default).
HIGHWAY_ENGINES = ("reference", "twin")
HIGHWAY_TWIN_ID = "rl/HighwayTwin-v0"


def register_envs() -> None:
    """Register every environment of `ENVIRONMENTS` with Gymnasium (idempotent).

    Also registers `HIGHWAY_TWIN_ID`, the ``highway`` problem's compiled engine.
    """
    if HIGHWAY_TWIN_ID not in gymnasium.registry:
        gymnasium.register(
            id=HIGHWAY_TWIN_ID,
            entry_point="rl.envs.highway_twin:HighwayTwin",
            vector_entry_point="rl.envs.highway_twin:HighwayTwinVector",
            max_episode_steps=ENVIRONMENTS["highway"].max_episode_steps,
        )
    for entry in ENVIRONMENTS.values():
        if entry.env_id in gymnasium.registry:
            continue
        gymnasium.register(
            id=entry.env_id,
            entry_point=entry.entry_point,
            vector_entry_point=entry.vector_entry_point,
            max_episode_steps=entry.max_episode_steps,
        )


def is_bundled(name: str) -> bool:
    """Whether ``name`` is a short name or Gymnasium id of `ENVIRONMENTS`."""
    return name in ENVIRONMENTS or name in _BY_ID


def bundled_env(name: str) -> BundledEnv:
    """Return the `ENVIRONMENTS` entry of a short name or Gymnasium id.

    Raises
    ------
    ValueError
        For a name that is neither.
    """
    entry = ENVIRONMENTS.get(name) or _BY_ID.get(name)
    if entry is None:
        known = ", ".join(list(ENVIRONMENTS) + list(_BY_ID))
        raise ValueError(f"Unknown problem {name!r}; choose one of: {known}.")
    return entry


def exact_model(problem: Problem) -> ExactModel:
    """Return the exact model (transition and reward arrays, discount) of a problem's environment.

    Any environment whose unwrapped instance implements `rl.envs.ExactModel`
    (as the bundled inventory and low-rank problems do) has one; its modes must
    be the problem's. Pass the result to `rl.envs.value_iteration` for Q*, or to
    the ``analysis`` tools.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    ExactModel
        The unwrapped environment.

    Raises
    ------
    ValueError
        If the environment does not expose a model, or its modes differ from the problem's.
    """
    env = problem.make_env()
    model = env.unwrapped
    env.close()
    if not is_exact_model(model):
        missing = ", ".join(missing_model_members(model))
        raise ValueError(
            f"Environment {problem.env_id!r} does not expose an exact model (missing {missing}); "
            "implement rl.envs.ExactModel to get value iteration and Q*."
        )
    dims = (tuple(model.state_dims), tuple(model.action_dims))
    if dims != (problem.state_dims, problem.action_dims):
        raise ValueError(
            f"The exact model of {problem.env_id!r} has modes {dims[0]} ; {dims[1]}, but the "
            f"problem has {problem.state_dims} ; {problem.action_dims}."
        )
    return model
