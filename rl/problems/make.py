"""`make_problem`: a `Problem` from a short name, any Gymnasium id, an instance or a factory."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium

from rl.problems.bundled import BUNDLED_OPTIONS, bundled_env, is_bundled
from rl.problems.discretize import RULES
from rl.problems.from_gymnasium import user_problem
from rl.problems.problem import Problem

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
    reward_size: float | None = None,
    reward_size_source: str | None = None,
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
        Users' own environments are viewed through `rl.problems.spaces.SpaceGrid`.
    state_bins : int or tuple of int, optional
        Bins of the continuous (Box) observation components (one int for all).
        For the bundled continuous problems: overrides the preset grid, e.g.
        the coarse LoRa-VI grids 3 (CartPole) and 7 (Pendulum). Users'
        environments default to `rl.problems.from_gymnasium.DEFAULT_STATE_BINS`.
    action_bins : int or tuple of int, optional
        Bins of the continuous (Box) action components (default
        `rl.problems.from_gymnasium.DEFAULT_ACTION_BINS`).
    low, high : float or sequence of float, optional
        Bounds of the Box observation components (one value for all or one per
        component); default the bounds observed over seeded random episodes
        (`rl.problems.from_gymnasium.observe_bounds`), widened by
        `rl.problems.from_gymnasium.BOUNDS_MARGIN` (10%) of the observed range on
        each side and kept within the space's own bounds.
    action_low, action_high : float or sequence of float, optional
        The same for Box actions.
    reward_bound : float, optional
        R_max, a bound on |r| of one step. A user's environment that declares
        one as its (unwrapped) ``reward_bound`` attribute uses that; otherwise
        this value; otherwise the largest |r| of a finite ``reward_range`` of
        the environment; otherwise it is estimated: `REWARD_MARGIN` (2) times the
        largest |r| seen over `ESTIMATE_EPISODES` episodes of uniformly random
        actions (resets seeded 0, 1, ..., actions drawn from the action space
        seeded 0, at most `ESTIMATE_STEPS` steps each), 1.0 if every reward was 0.
        A run records an estimate in its ``config.json``
        (``env_options``); `Problem.describe_reward_bound` says which source
        gave the bound, and the CLI and learners print it.
    reward_bound_source : {"argument", "estimated"}, optional
        Recorded with an estimated ``reward_bound`` so that a rerun says so.
    reward_size : float, optional
        The size of a typical step's reward (`Problem.reward_size`), for users'
        environments: the environment's ``reward_size`` attribute, otherwise this
        value, otherwise the mean |r| per step over the episodes of the bound's
        estimate (`rl.problems.from_gymnasium.estimate_reward_size`), recorded
        in a run's ``config.json``.
    reward_size_source : {"argument", "estimated"}, optional
        Recorded with an estimated ``reward_size``.
    index_rule : {"centre", "endpoint"}, default "centre"
        Observation index rule of the grids (see `rl.problems.discretize`);
        ``"endpoint"`` reproduces the authors' released code.
    normalization : {"paper", "informative"}, optional
        Highway only: observation scaling (see `rl.envs.highway`).
    env_kwargs : dict, optional
        Keyword arguments for the environment constructor (for example
        ``{"n_locations": 3}`` for ``inventory``); ids only.
    max_episode_steps : int, optional
        Users' environments: cap every episode at this many steps (truncation,
        ``gymnasium.wrappers.TimeLimit``). An environment without a time limit
        of its own gets `rl.problems.from_gymnasium.DEFAULT_MAX_EPISODE_STEPS`, recorded
        in a run's ``config.json``.
    import_env_module : bool, default True
        Whether the module of a ``"package.module:Env-v0"`` id may be imported
        (it runs that module's code). Loading a run directory passes False
        unless the user named the environment or trusted it
        (`rl.problems.from_gymnasium.EnvModuleRefused`); a module already imported is
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
    rl.problems.from_gymnasium.EnvModuleRefused
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
        "reward_size": reward_size,
        "reward_size_source": reward_size_source,
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
    if not isinstance(env, str) or not is_bundled(env):
        return user_problem(env, options, import_env_module)
    entry = bundled_env(env)
    for option in options:
        if option not in BUNDLED_OPTIONS:
            raise ValueError(
                f"The {option!r} option does not apply to the bundled problem {entry.name!r}; "
                f"its options: {', '.join(BUNDLED_OPTIONS)}."
            )
    env_kwargs = dict(raw_kwargs or {})
    if normalization is not None:
        if entry.name != "highway":
            raise ValueError(
                f"The 'normalization' option applies to 'highway' only, not {entry.name!r}."
            )
        env_kwargs["normalization"] = normalization
    return entry.build(entry, env_kwargs, options)
