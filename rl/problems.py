"""The bundled environments (one registry) and their factored discrete views (`Problem`).

Agents never see raw observations or environment actions: they work on integer
index vectors, one index per state component and one per action component
(the modes of the Q-tensor). A `Problem` holds the maps between the two
worlds; `make_problem` builds one by short name, by any Gymnasium id
(``"package.module:Env-v0"`` included), or from an environment instance or
factory (users' own environments: `rl.user_problems`, `rl.spaces`).
`exact_model` returns the model of an environment that implements
`rl.envs.ExactModel`, for value iteration and the ``analysis`` tools.

`ENVIRONMENTS` is the one map from short name to everything about a bundled
environment: its Gymnasium id, entry points, episode length and problem
builder. `register_envs` (called by ``import rl``), `make_problem`, the
configuration and the tests all read it; nothing else lists the environments.

=============  ============================  ==============================  =====  ======
name           env id                        state dims ; action dims        steps  vector
=============  ============================  ==============================  =====  ======
``cartpole``   ``rl/ContinuousCartPole-v0``  (10, 10, 20, 20) ; (10,)        100    yes
``pendulum``   ``rl/BoundedPendulum-v0``     (20, 20) ; (10,)                100    yes
``highway``    ``rl/Highway-v0``             (20,) * 9 ; (5,)                50     no
``inventory``  ``rl/Inventory-v0``           (2, 5, 5) ; (3, 3) by default   100    no
``lowrank``    ``rl/LowRankMDP-v0``          (4, 4, 4) ; (3, 3) by default   100    no
=============  ============================  ==============================  =====  ======

``highway`` takes ``env_kwargs={"engine": "twin"}`` for its compiled twin
(`rl.envs.highway_twin`, id ``rl/HighwayTwin-v0``, vectorized); the default
``"reference"`` is highway-env itself.

The continuous problems use the paper's grids (`rl.discretize.PRESETS`). The
``index_rule`` option changes how observations are binned; actions always
execute bin centres (as the authors' greedy and EUGE actions do), so that with
10 action bins on [-1, 1] the executed CartPole forces are -0.9, -0.7, ..., 0.9.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium
import numpy as np
from numpy.typing import NDArray

from rl.discretize import PRESETS, RULES, DiscreteGrid, UniformGrid
from rl.envs import cartpole, highway, pendulum
from rl.envs.value_iteration import ExactModel, is_exact_model, missing_model_members
from rl.validation import MAX_BINS, check_ints


class ObservationShapeError(ValueError):
    """An environment returned an observation whose shape is not its observation space's."""


class EnvFailure(RuntimeError):
    """A user's environment raised, or returned an observation of the wrong shape.

    The message is one line naming the environment, the replica and its seed (or
    the probe episode) and the error; the original exception is ``__cause__``,
    with its full traceback.
    """

    @classmethod
    def during(cls, env_id: str, where: str, error: BaseException) -> EnvFailure:
        """Return the failure of ``env_id`` at ``where`` (e.g. "step() of replica 1 (seed 1)")."""
        message = " ".join(str(error).split())
        if not isinstance(error, ObservationShapeError):
            message = f"{type(error).__name__}: {message}" if message else type(error).__name__
        return cls(f"Environment {env_id!r} failed in {where}: {message}")


@dataclass(frozen=True)
class Problem:
    """An environment together with its discretization.

    Attributes
    ----------
    name : str
        Short name (``"cartpole"``) or Gymnasium id.
    env_id : str
        Gymnasium id passed to ``gymnasium.make`` / ``gymnasium.make_vec``.
    env_kwargs : dict
        Keyword arguments for the environment constructor.
    state_dims : tuple of int
        Number of bins of each state component (the state modes d_1..d_{D_S}).
    action_dims : tuple of int
        Number of bins of each action component (the action modes).
    reward_bound : float
        R_max, an upper bound on |r| for one step; V_max = R_max / (1 - gamma).
    encode : callable
        Batch of observations, shape (B, obs_dim...) -> int array (B, D_S).
    decode : callable
        Int array of action indices (B, D_A) -> batch of environment actions
        (row i for copy i; a list of tuples or dicts for Tuple/Dict actions).
    vectorized : bool
        Whether ``env_id`` has a vector version (``gymnasium.make_vec`` with its
        ``vector_entry_point``) that `rl.replicas.ReplicaEnvs` uses.
    env_factory : callable or None
        Makes one copy of the environment, for problems built from an instance
        or a factory; None: ``gymnasium.make(env_id, **env_kwargs)``.
    flatten : callable or None
        One raw observation -> flat float array, for Tuple/Dict observation
        spaces (see `rl.spaces`); None: ``numpy.asarray``.
    reward_bound_source : {"environment", "argument", "estimated"}
        Where ``reward_bound`` came from (see `make_problem`).
    """

    name: str
    env_id: str
    env_kwargs: dict
    state_dims: tuple[int, ...]
    action_dims: tuple[int, ...]
    reward_bound: float
    encode: Callable[[NDArray], NDArray[np.int64]]
    decode: Callable[[NDArray[np.int64]], Any]
    vectorized: bool = False
    env_factory: Callable[[], gymnasium.Env] | None = None
    flatten: Callable[[Any], NDArray] | None = None
    reward_bound_source: str = "environment"
    discount: float | None = None
    """The problem's own discount, if it defines one (the exact-model problems compute Q*
    with it); agents use it unless the configuration sets ``gamma``."""
    action_interval: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    """(low, high) of each continuous action component, for ``continuous_random_actions``."""
    grids: tuple[UniformGrid | DiscreteGrid, UniformGrid | DiscreteGrid] | None = None
    """The (state, action) grids behind `encode` and `decode`, for the bundled problems;
    the fused runner (`rl.fused`) encodes and decodes with their compiled helpers."""
    observation_shape: tuple[int, ...] | None = None
    """Shape of one observation as `as_array` returns it (flattened for Tuple/Dict spaces),
    for users' environments; `as_array` refuses any other. None: not checked (the bundled
    environments)."""
    max_episode_steps: int | None = None
    """Episode cap that `make_env` applies (``TimeLimit``), for users' environments."""
    chosen_options: dict = field(default_factory=dict)
    """Options the problem chose itself (`rl.user_problems` defaults), for `recorded_options`."""

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the Q-tensor: state modes followed by action modes."""
        return self.state_dims + self.action_dims

    def make_env(self, **overrides: Any) -> gymnasium.Env:
        """Return a new copy of the environment (``env_factory`` or ``gymnasium.make``).

        ``overrides`` (for example ``render_mode="rgb_array"``) are added to
        ``env_kwargs``; a problem built from an instance or factory takes none.
        """
        if self.env_factory is not None:
            if overrides:
                raise ValueError(
                    f"Environment {self.env_id!r} was given as an instance or factory; "
                    f"it cannot be made with {sorted(overrides)}."
                )
            env = self.env_factory()
            if self.max_episode_steps is None:
                return env
            return gymnasium.wrappers.TimeLimit(env, self.max_episode_steps)
        cap = (
            {} if self.max_episode_steps is None else {"max_episode_steps": self.max_episode_steps}
        )
        return gymnasium.make(self.env_id, **cap, **{**self.env_kwargs, **overrides})

    def as_array(self, observation: Any) -> NDArray:
        """Return one raw observation as the array `encode` reads (Tuple/Dict flattened).

        Raises
        ------
        ObservationShapeError
            If ``observation_shape`` is set and the observation has another shape.
        """
        array = np.asarray(observation) if self.flatten is None else self.flatten(observation)
        if self.observation_shape is not None and array.shape != self.observation_shape:
            raise ObservationShapeError(
                f"The observation has shape {array.shape}; the observation space of "
                f"{self.env_id!r} has shape {self.observation_shape}"
                f"{' (flattened)' if self.flatten is not None else ''}."
            )
        return array

    def encode_observation(self, observation: Any) -> NDArray[np.int64]:
        """Return the state index vector (D_S,) of one raw observation."""
        return self.encode(self.as_array(observation)[None])[0]

    def recorded_options(self) -> dict[str, Any]:
        """Options that rebuild this problem exactly, to record in a run's config.

        An estimated reward bound is recorded (with its source), and the
        options the problem chose itself (`chosen_options`), so that a resumed
        or rerun run uses the same bound, grid and episode cap.
        """
        if self.reward_bound_source != "estimated":
            return dict(self.chosen_options)
        estimated = {"reward_bound": self.reward_bound, "reward_bound_source": "estimated"}
        return {**self.chosen_options, **estimated}


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


_OPTIONS = ("index_rule", "state_bins", "action_bins", "normalization", "env_kwargs")
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
    """Build a problem on the paper's grid `rl.discretize.PRESETS[entry.name]`."""
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


def _highway_problem(entry: BundledEnv, env_kwargs: dict, options: dict[str, Any]) -> Problem:
    """Build Highway without the simulator: the grid and the configuration's reward bound."""
    if env_kwargs.get("normalization", "paper") not in highway.NORMALIZATIONS:
        raise ValueError(
            f"The 'normalization' option must be one of {highway.NORMALIZATIONS}. "
            f"Got {env_kwargs['normalization']!r} instead."
        )
    engine = env_kwargs.get("engine", "reference")
    if engine not in HIGHWAY_ENGINES:
        raise ValueError(
            f"The 'engine' option of 'highway' must be one of {HIGHWAY_ENGINES}. "
            f"Got {engine!r} instead."
        )
    if engine == "reference":
        env_kwargs = {key: value for key, value in env_kwargs.items() if key != "engine"}
    elif uncovered := sorted(set(env_kwargs) - {"engine", "normalization"}):
        raise ValueError(
            "The Highway twin (engine 'twin') covers the paper's configuration only; use "
            f"engine 'reference' (highway-env) for the options {uncovered}."
        )
    problem = _grid_problem(
        entry, env_kwargs, options, highway.reward_bound(env_kwargs.get("config"))
    )
    if engine == "twin":
        return dataclasses.replace(problem, env_id=HIGHWAY_TWIN_ID, vectorized=True)
    return problem


def _exact_problem(entry: BundledEnv, env_kwargs: dict, options: dict[str, Any]) -> Problem:
    """Build Inventory or LowRankMDP: the discrete spaces are the grid (identity maps)."""
    if options.get("state_bins") is not None or options.get("action_bins") is not None:
        raise ValueError(
            f"The 'state_bins' and 'action_bins' options do not apply to {entry.name!r}: its "
            "spaces are discrete; change its sizes through 'env_kwargs'."
        )
    env = gymnasium.make(entry.env_id, **env_kwargs).unwrapped
    state_grid = DiscreteGrid(env.state_dims)
    action_grid = DiscreteGrid(env.action_dims)
    env.close()
    return Problem(
        name=entry.name,
        env_id=entry.env_id,
        env_kwargs=env_kwargs,
        state_dims=state_grid.dims,
        action_dims=action_grid.dims,
        reward_bound=float(env.reward_bound),
        encode=_encoder(state_grid, len(state_grid.dims)),
        decode=_decoder(action_grid, len(action_grid.dims)),
        vectorized=entry.vectorized,
        discount=float(env.gamma),
        grids=(state_grid, action_grid),
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
    )
}
_BY_ID = {entry.env_id: entry for entry in ENVIRONMENTS.values()}


#: Highway's simulators (``env_kwargs={"engine": ...}``): highway-env itself, or the
#: compiled twin of `rl.envs.highway_twin` (the paper's configuration only).
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


EnvSource = str | gymnasium.Env | Callable[[], gymnasium.Env]
"""What `make_problem` accepts: a short name or Gymnasium id, an instance, or a factory."""


def make_problem(
    env: EnvSource,
    *,
    state_bins: int | Sequence[int] | None = None,
    action_bins: int | Sequence[int] | None = None,
    low: float | Sequence[float] | None = None,
    high: float | Sequence[float] | None = None,
    action_low: float | Sequence[float] | None = None,
    action_high: float | Sequence[float] | None = None,
    reward_bound: float | None = None,
    reward_bound_source: str | None = None,
    index_rule: str | None = None,
    normalization: str | None = None,
    env_kwargs: dict | None = None,
    max_episode_steps: int | None = None,
    import_env_module: bool = True,
    **unknown: Any,
) -> Problem:
    """Build the `Problem` (environment plus discretization) of ``env``.

    Parameters
    ----------
    env : str, gymnasium.Env or callable
        A bundled problem (``"cartpole"``, ``"pendulum"``, ``"highway"``,
        ``"inventory"``, ``"lowrank"`` or its id ``"rl/ContinuousCartPole-v0"``,
        built exactly as before), any registered Gymnasium id, including
        ``"package.module:Env-v0"`` (the module is imported first so that its
        registration runs, as ``gymnasium.make`` does), an environment instance
        (deep-copied once per replica) or a factory returning a new environment.
        Users' own environments are viewed through `rl.spaces.SpaceGrid`.
    state_bins : int or tuple of int, optional
        Bins of the continuous (Box) observation components (one int for all).
        For the bundled continuous problems: overrides the preset grid, e.g.
        the coarse LoRa-VI grids 3 (CartPole) and 7 (Pendulum). Users'
        environments default to `rl.user_problems.DEFAULT_STATE_BINS`.
    action_bins : int or tuple of int, optional
        Bins of the continuous (Box) action components (default
        `rl.user_problems.DEFAULT_ACTION_BINS`).
    low, high : float or sequence of float, optional
        Bounds of the Box observation components (one value for all or one per
        component); default the space's bounds where finite, else the bounds
        observed over seeded random episodes (`rl.user_problems.observe_bounds`).
    action_low, action_high : float or sequence of float, optional
        The same for Box actions.
    reward_bound : float, optional
        R_max, a bound on |r| of one step. A user's environment that declares
        one as its (unwrapped) ``reward_bound`` attribute uses that; otherwise
        this value; otherwise it is estimated: twice the largest |r| seen over
        `ESTIMATE_EPISODES` episodes of uniformly random actions (resets seeded
        0, 1, ..., actions drawn from the action space seeded 0, at most
        `ESTIMATE_STEPS` steps each), 1.0 if every reward was 0. A run records
        an estimate in its ``config.json`` (``env_options``).
    reward_bound_source : {"argument", "estimated"}, optional
        Recorded with an estimated ``reward_bound`` so that a rerun says so.
    index_rule : {"centre", "endpoint"}, default "centre"
        Observation index rule of the grids (see `rl.discretize`);
        ``"endpoint"`` reproduces the authors' released code.
    normalization : {"paper", "informative"}, optional
        Highway only: observation scaling (see `rl.envs.highway`).
    env_kwargs : dict, optional
        Keyword arguments for the environment constructor (for example
        ``{"n_locations": 3}`` for ``inventory``); ids only.
    max_episode_steps : int, optional
        Users' environments: cap every episode at this many steps (truncation,
        ``gymnasium.wrappers.TimeLimit``). An environment without a time limit
        of its own gets `rl.user_problems.DEFAULT_MAX_EPISODE_STEPS`, recorded
        in a run's ``config.json``.
    import_env_module : bool, default True
        Whether the module of a ``"package.module:Env-v0"`` id may be imported
        (it runs that module's code). Loading a run directory passes False
        unless the user named the environment or trusted it
        (`rl.user_problems.EnvModuleRefused`); a module already imported is
        always allowed.

    Returns
    -------
    Problem
        With ``encode``: observations (B, obs_dim) -> int64 (B, D_S) and
        ``decode``: int64 (B, D_A) -> environment actions, (B, 1) floats for
        CartPole and Pendulum, (B,) ints for Highway, (B, D_A) ints for the
        exact-model problems (row i is the action of one environment).

    Raises
    ------
    ValueError
        For an unknown name or option, an invalid option value, or a space
        that cannot be discretized (one line saying what is needed).
    rl.user_problems.EnvModuleRefused
        A ValueError: ``import_env_module`` is False and the id's module would
        have to be imported.

    Examples
    --------
    A bundled problem, and any Gymnasium id with discrete spaces:

    >>> problem = make_problem("inventory")
    >>> problem.env_id, problem.state_dims, problem.action_dims
    ('rl/Inventory-v0', (2, 5, 5), (3, 3))
    >>> make_problem("FrozenLake-v1").state_dims  # Discrete(16): one mode of size 16
    (16,)

    A bounded ``Box`` needs a grid (here 4 cells per observation component, 3
    actions):

    >>> pendulum = make_problem("Pendulum-v1", state_bins=4, action_bins=3)
    >>> pendulum.state_dims, pendulum.action_dims
    ((4, 4, 4), (3,))
    """
    options = {
        "state_bins": state_bins,
        "action_bins": action_bins,
        "low": low,
        "high": high,
        "action_low": action_low,
        "action_high": action_high,
        "reward_bound": reward_bound,
        "reward_bound_source": reward_bound_source,
        "index_rule": index_rule,
        "normalization": normalization,
        "env_kwargs": env_kwargs,
        "max_episode_steps": max_episode_steps,
    }
    for option in unknown:
        raise ValueError(
            f"Unknown option {option!r} for make_problem; valid options: {', '.join(options)}."
        )
    options = {key: value for key, value in options.items() if value is not None}
    rule = options.get("index_rule", "centre")
    if rule not in RULES:
        raise ValueError(f"The 'index_rule' option must be one of {RULES}. Got {rule!r} instead.")
    raw_kwargs = options.get("env_kwargs")
    if raw_kwargs is not None and not isinstance(raw_kwargs, dict):
        raise ValueError(f"The 'env_kwargs' option must be a dict. Got {raw_kwargs!r} instead.")
    if not isinstance(env, str) or not (env in ENVIRONMENTS or env in _BY_ID):
        from rl.user_problems import user_problem

        return user_problem(env, options, import_env_module)
    entry = bundled_env(env)
    for option in options:
        if option not in _OPTIONS:
            raise ValueError(
                f"The {option!r} option does not apply to the bundled problem {entry.name!r}; "
                f"its options: {', '.join(_OPTIONS)}."
            )
    env_kwargs = dict(raw_kwargs or {})
    if normalization is not None:
        if entry.name != "highway":
            raise ValueError(
                f"The 'normalization' option applies to 'highway' only, not {entry.name!r}."
            )
        env_kwargs["normalization"] = normalization
    return entry.build(entry, env_kwargs, options)


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


def warm_kernels() -> None:
    """Compile (or load from Numba's on-disk cache) the environment layer's kernels.

    Steps the CartPole and Pendulum vector environments and encodes and
    decodes through their problems with the argument types the runner uses,
    so that later calls, in this process and in processes started after it,
    find the compiled code (``cartpole_step``, ``pendulum_step``, the vector
    bookkeeping kernel and the grid kernels).
    """
    for name in ("cartpole", "pendulum"):
        problem = make_problem(name)
        envs = gymnasium.make_vec(problem.env_id, num_envs=2, autoreset_mode="Disabled")
        observations, _ = envs.reset(seed=0)
        problem.encode(observations)
        actions = problem.decode(np.zeros((2, 1), dtype=np.int64))
        envs.step(actions, active=np.ones(2, dtype=bool))
        single = gymnasium.make(problem.env_id)
        single.reset(seed=0)
        single.step(actions[0])
        envs.close()
        single.close()
