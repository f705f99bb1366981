"""Users' own environments as problems: any id, instance or factory with factored spaces.

`rl.problems.make_problem` sends everything that is not a bundled problem
here. The environment is made once (a *probe*) to read its spaces and reward
bound; the observation and action spaces become tensor modes through
`rl.problems.spaces.SpaceGrid` (Discrete and MultiDiscrete components map to modes
directly, Box components are discretized on a uniform grid, Tuple and Dict are
flattened in order).

Reward bound (R_max, used for V_max = R_max / (1 - gamma) by TEQL's bounded
iterates and LoRa-VI's clipping), in this order:

1. the unwrapped environment's ``reward_bound`` attribute, if it declares one;
2. the ``reward_bound`` option;
3. the environment's ``reward_range``, if it declares a finite one (source
   ``"reward_range"``);
4. an estimate (`estimate_reward_bound`): `REWARD_MARGIN` times the largest |r|
   over `ESTIMATE_EPISODES` seeded random episodes, recorded in the run's
   ``config.json``. Random play may never see a rare large reward (the +100
   goal bonus of ``MountainCarContinuous-v0``: the estimate is 0.2), so
   `rl.problems.Problem.describe_reward_bound` says how the bound was
   obtained and ``python -m rl.train`` and the learners print it.

Reward size (the mean |r| of a step, in which TEQL's stable reading counts EUGE's
count bonus): the unwrapped environment's ``reward_size`` attribute, the
``reward_size`` option, or the mean |r| per step of those random episodes
(`estimate_reward_size`), recorded in ``config.json`` as the bound's estimate is.

Defaults, so that any environment with supported spaces trains as it is (the
stock Gymnasium classics among them), each recorded in the run's
``config.json`` (`rl.problems.Problem.chosen_options`) so that a resumed or
loaded run rebuilds the same problem:

- Box components without bins get `DEFAULT_STATE_BINS` (observations) or
  `DEFAULT_ACTION_BINS` (actions) bins;
- observation Box components, when ``low`` or ``high`` is not given, are
  bounded by the smallest and largest value seen over `ESTIMATE_EPISODES`
  seeded random episodes (`observe_bounds`), widened by `BOUNDS_MARGIN` of that
  range on each side and kept within the space's own bounds: a grid fits the
  data, not a loose space bound (``Acrobot-v1``'s velocity bounds are three times
  what random play reaches). A task whose good states lie where random play
  never goes (``MountainCar-v0``'s goal at x = 0.5) needs ``low``/``high``;
- an environment without a time limit of its own (no
  ``gymnasium.wrappers.TimeLimit``) is capped at `DEFAULT_MAX_EPISODE_STEPS`
  steps per episode (the ``max_episode_steps`` option sets any cap).

Ids. ``"package.module:Env-v0"`` imports ``package.module`` (its registration
runs) and keeps the whole string as the problem's ``env_id``, so that
``gymnasium.make`` in any later process imports it again. Importing runs the
module's code, so it happens only where the caller allows it
(``import_env_module``): an id read from a run directory (``rl.load_run``,
``rl.evaluate``, ``rl.train --resume``) is refused with `EnvModuleRefused`
unless the user names the environment again or trusts the module. A module
already imported is never refused: importing it again runs nothing.
"""

from __future__ import annotations

import copy
import functools
import importlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium
import numpy as np
from numpy.typing import NDArray

from rl.problems.bundled import ENVIRONMENTS
from rl.problems.problem import (
    ESTIMATE_EPISODES,
    REWARD_MARGIN,
    EnvFailure,
    ObservationShapeError,
    Problem,
)
from rl.problems.spaces import SpaceGrid, box_bounds, box_values
from rl.validation import check_int, check_real

ESTIMATE_STEPS = 1000
"""Step cap of each of those episodes."""

BOUNDS_MARGIN = 0.1
"""Default Box grids reach this fraction of the observed range beyond it on each side."""

DEFAULT_STATE_BINS = 6
"""Bins of each Box observation component when ``state_bins`` is not given."""

DEFAULT_ACTION_BINS = 5
"""Bins of each Box action component when ``action_bins`` is not given (odd: 0 is a centre
of a symmetric interval)."""

DEFAULT_MAX_EPISODE_STEPS = 1000
"""Episode cap of an environment without a time limit of its own (``max_episode_steps``)."""


class EnvModuleRefused(ValueError):
    """An environment id read from data names a module that nobody allowed to be imported.

    Parameters
    ----------
    env_id : str
        The id, ``"module:Env-v0"``.
    module : str
        Its module.
    """

    def __init__(self, env_id: str, module: str) -> None:
        self.env_id = env_id
        self.module = module
        super().__init__(self.explain(f"pass env={env_id!r} or trust_env_module=True"))

    def explain(self, how: str) -> str:
        """Return the one-line refusal, ending with ``how`` to allow the import."""
        return (
            f"Refusing to import module {self.module!r}, named by the environment "
            f"{self.env_id!r} of the run directory (importing it runs its code); "
            f"to allow it, {how}."
        )

    def cli_message(self) -> str:
        """Return the refusal as the command-line tools print it."""
        return self.explain(f"rerun with --env {self.env_id} or --trust-env-module")


def _spec(env_id: str, import_env_module: bool = True) -> gymnasium.envs.registration.EnvSpec:
    module, sep, name = env_id.rpartition(":")
    if sep:
        if not import_env_module and module not in sys.modules:
            raise EnvModuleRefused(env_id, module)
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ValueError(
                f"Cannot import module {module!r} of environment {env_id!r}: {error}."
            ) from None
    try:
        return gymnasium.spec(name)
    except gymnasium.error.Error as error:
        hint = " ".join(str(error).split()).rstrip(".")  # e.g. "Please use `Taxi-v4` instead"
        known = ", ".join(ENVIRONMENTS)
        raise ValueError(
            f"Unknown problem {env_id!r} (Gymnasium: {hint}); choose one of: {known}, or a "
            "registered Gymnasium id ('package.module:Env-v0' imports package.module first)."
        ) from None


def _source(
    env: Any, env_kwargs: dict, import_env_module: bool = True
) -> tuple[str, Callable[[], gymnasium.Env], bool]:
    """Return (env_id, factory, has a vector entry point) of an id, instance or factory."""
    if isinstance(env, str):
        spec = _spec(env, import_env_module)
        factory = functools.partial(gymnasium.make, env, **env_kwargs)
        return env, factory, spec.vector_entry_point is not None
    if env_kwargs:
        raise ValueError("The 'env_kwargs' option applies to Gymnasium ids only, not to instances.")
    if isinstance(env, gymnasium.Env):
        spec = env.spec
        name = spec.id if spec is not None else type(env.unwrapped).__name__
        return name, functools.partial(copy.deepcopy, env), False
    if callable(env):
        return getattr(env, "__name__", type(env).__name__), env, False
    raise ValueError(
        "The 'env' parameter must be a problem name, a Gymnasium id, an environment or a "
        f"factory. Got {env!r} instead."
    )


def _random_episodes(
    env: gymnasium.Env, episodes: int, max_steps: int, name: str, purpose: str
) -> Iterator[tuple[Any, float | None]]:
    """Yield (observation, reward) of seeded random episodes (reward None after a reset).

    Episode k is reset with seed k; actions are drawn from a copy of the action
    space seeded 0. An exception of the environment becomes `EnvFailure`, naming
    ``purpose``, the episode and its reset seed.
    """
    space = copy.deepcopy(env.action_space)
    space.seed(0)
    for episode in range(episodes):
        call = "reset"
        try:
            observation, _ = env.reset(seed=episode)
            yield observation, None
            call = "step"
            for _ in range(max_steps):
                observation, reward, terminated, truncated, _ = env.step(space.sample())
                yield observation, float(reward)
                if terminated or truncated:
                    break
        except Exception as error:  # noqa: BLE001 - any error of the user's code, reported
            where = f"{call}() while {purpose} (episode {episode}, seed {episode})"
            raise EnvFailure.during(name, where, error) from error


def _name(env: gymnasium.Env, env_id: str | None) -> str:
    return env_id or (env.spec.id if env.spec is not None else type(env.unwrapped).__name__)


def estimate_reward_bound(
    env: gymnasium.Env,
    episodes: int = ESTIMATE_EPISODES,
    max_steps: int = ESTIMATE_STEPS,
    *,
    env_id: str | None = None,
) -> float:
    """`REWARD_MARGIN` times the largest |r| seen over random episodes (1.0 if every r was 0).

    Episode k is reset with seed k; actions are drawn from a copy of the action
    space seeded 0, so the estimate is a pure function of the environment.

    Parameters
    ----------
    env : gymnasium.Env
        Stepped (it is left mid-episode).
    episodes, max_steps : int
        Episodes played and the step cap of each.
    env_id : str, optional
        How messages name the environment (default: its spec's id or class name).

    Returns
    -------
    float

    Raises
    ------
    rl.problems.EnvFailure
        If the environment raises in ``reset`` or ``step`` (naming the episode
        and its reset seed; the original exception is the cause).
    """
    rewards = _random_rewards(env, episodes, max_steps, _name(env, env_id), "reward bound")
    return _bound_of(rewards)


def _random_rewards(
    env: gymnasium.Env, episodes: int, max_steps: int, name: str, estimating: str
) -> list[float]:
    """Return the rewards of `_random_episodes` (errors name the ``estimating`` pass)."""
    played = _random_episodes(env, episodes, max_steps, name, f"estimating its {estimating}")
    return [reward for _, reward in played if reward is not None]


def _bound_of(rewards: list[float]) -> float:
    """`estimate_reward_bound` of the random episodes' ``rewards``."""
    largest = 0.0
    for reward in rewards:
        largest = max(largest, abs(reward))
    if not np.isfinite(largest):
        raise ValueError("The environment returned a non-finite reward; pass 'reward_bound'.")
    return REWARD_MARGIN * largest if largest > 0 else 1.0


def estimate_reward_size(
    env: gymnasium.Env,
    episodes: int = ESTIMATE_EPISODES,
    max_steps: int = ESTIMATE_STEPS,
    *,
    env_id: str | None = None,
) -> float:
    """Return the mean |r| per step over `estimate_reward_bound`'s episodes (1.0 if it is 0).

    The size of a typical step's reward: a rare large reward (a goal bonus) sets
    the bound, not this. Where every reward has one size (CartPole's +1 a step)
    the bound's estimate is `REWARD_MARGIN` times it.

    Parameters
    ----------
    env : gymnasium.Env
        Stepped (it is left mid-episode).
    episodes, max_steps : int
        Episodes played and the step cap of each.
    env_id : str, optional
        How messages name the environment (default: its spec's id or class name).

    Returns
    -------
    float

    Raises
    ------
    rl.problems.EnvFailure
        If the environment raises in ``reset`` or ``step``.
    """
    return _size_of(_random_rewards(env, episodes, max_steps, _name(env, env_id), "reward size"))


def _size_of(rewards: list[float]) -> float:
    """`estimate_reward_size` of the random episodes' ``rewards``."""
    size = float(np.mean(np.abs(rewards))) if rewards else 0.0
    if not np.isfinite(size):
        raise ValueError("The environment returned a non-finite reward; pass 'reward_size'.")
    return size if size > 0 else 1.0


def observe_bounds(
    env: gymnasium.Env,
    episodes: int = ESTIMATE_EPISODES,
    max_steps: int = ESTIMATE_STEPS,
    *,
    env_id: str | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Smallest and largest value of each Box observation component over random episodes.

    The episodes are those of `estimate_reward_bound` (episode k reset with
    seed k, actions from the action space seeded 0, at most ``max_steps``
    steps each), first observations included, so the bounds are a pure
    function of the environment.

    Parameters
    ----------
    env : gymnasium.Env
        Stepped (it is left mid-episode).
    episodes, max_steps : int
        Episodes played and the step cap of each.
    env_id : str, optional
        How messages name the environment.

    Returns
    -------
    low, high : ndarray of float64, shape (Box components,)
        In the flattening order of `rl.problems.spaces`.

    Raises
    ------
    rl.problems.EnvFailure
        If the environment raises in ``reset`` or ``step``.
    ValueError
        If an observation is not finite.
    """
    space = env.observation_space
    purpose = "observing its bounds"
    name = _name(env, env_id)
    seen = []
    for observation, _ in _random_episodes(env, episodes, max_steps, name, purpose):
        try:
            _refuse_object_dtype(observation)
            seen.append(box_values(space, observation))
        except (IndexError, ValueError, TypeError) as error:
            wrong = ObservationShapeError(
                f"An observation {np.shape(observation)} does not fit the observation space "
                f"{space} ({' '.join(str(error).split())})."
            )
            raise EnvFailure.during(name, f"random play while {purpose}", wrong) from error
    values = np.stack(seen)
    if not np.all(np.isfinite(values)):
        wrong = values[~np.all(np.isfinite(values), axis=1)][0]
        raise ValueError(
            f"{name!r} returned a non-finite observation {wrong.tolist()} in random play while "
            f"{purpose}; agents need finite observations: fix the environment (passing 'low' "
            "and 'high' skips this random play, not the need)."
        )
    return values.min(axis=0), values.max(axis=0)


def _refuse_object_dtype(observation: Any) -> None:
    """Raise TypeError for an observation array of dtype object (numbers must be numbers)."""
    if isinstance(observation, np.ndarray) and observation.dtype == object:
        raise TypeError(
            "it is an array of dtype object; return a numeric array (float or int) of the "
            "observation space's shape"
        )


class _RandomRewards:
    """The rewards of the estimates' random episodes, played once for every estimate of a probe.

    The first estimate that needs them plays them, and an environment's error
    names that estimate (`_random_rewards`).
    """

    def __init__(self, probe: gymnasium.Env, env_id: str) -> None:
        self.probe, self.env_id = probe, env_id
        self._rewards: list[float] | None = None

    def __call__(self, estimating: str) -> list[float]:
        if self._rewards is None:
            self._rewards = _random_rewards(
                self.probe, ESTIMATE_EPISODES, ESTIMATE_STEPS, self.env_id, estimating
            )
        return self._rewards


def _reward_bound(
    probe: gymnasium.Env, rewards: _RandomRewards, options: dict[str, Any]
) -> tuple[float, str]:
    given = _declared_or_given(probe, "reward_bound", options)
    if given is not None:
        return given
    declared_range = getattr(probe.unwrapped, "reward_range", None)
    if declared_range is not None:
        largest = float(np.max(np.abs(np.asarray(declared_range, dtype=np.float64))))
        if np.isfinite(largest) and largest > 0:
            return largest, "reward_range"
    return _bound_of(rewards("reward bound")), "estimated"


def _declared_or_given(
    probe: gymnasium.Env, key: str, options: dict[str, Any]
) -> tuple[float, str] | None:
    """Return (value, source) of ``key`` declared by the environment or given as an option.

    None if neither gives it. The option may come with ``key + "_source"``
    (``"argument"`` or ``"estimated"``, as a run records an estimate).
    """
    declared = getattr(probe.unwrapped, key, None)
    if declared is not None:
        return check_real(key, float(declared), 0.0, low_open=True), "environment"
    if key in options:
        value = options[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"The '{key}' option must be a float > 0. Got {value!r}.")
        source = options.get(f"{key}_source", "argument")
        if source not in ("argument", "estimated"):
            raise ValueError(
                f"The '{key}_source' option must be 'argument' or 'estimated'. "
                f"Got {source!r} instead."
            )
        return check_real(key, float(value), 0.0, low_open=True), source
    if f"{key}_source" in options:
        raise ValueError(f"The '{key}_source' option needs a '{key}'.")
    return None


def _reward_size(
    probe: gymnasium.Env, rewards: _RandomRewards, options: dict[str, Any]
) -> tuple[float, str]:
    given = _declared_or_given(probe, "reward_size", options)
    return given if given is not None else (_size_of(rewards("reward size")), "estimated")


def user_problem(env: Any, options: dict[str, Any], import_env_module: bool = True) -> Problem:
    """Build the `Problem` of a user's environment (see `rl.problems.make_problem`).

    Parameters
    ----------
    env : str, gymnasium.Env or callable
        A Gymnasium id (``"package.module:Env-v0"`` allowed), an instance or a factory.
    options : dict
        The `make_problem` options that were given (None values left out).
    import_env_module : bool, default True
        Whether the module of a ``"package.module:Env-v0"`` id may be imported.

    Returns
    -------
    Problem

    Raises
    ------
    EnvModuleRefused
        If ``import_env_module`` is False and the id's module is not imported yet.
    """
    if "normalization" in options:
        raise ValueError("The 'normalization' option applies to 'highway' only.")
    env_kwargs = dict(options.get("env_kwargs") or {})
    env_id, factory, has_vector = _source(env, env_kwargs, import_env_module)
    probe = factory()
    if not isinstance(probe, gymnasium.Env):
        raise ValueError(f"The factory {env_id!r} must return a gymnasium.Env. Got {probe!r}.")
    chosen: dict[str, Any] = {}
    try:
        states = SpaceGrid(
            probe.observation_space,
            "observation",
            rule=options.get("index_rule", "centre"),
            **_grid_options(probe, "observation", options, chosen, env_id),
        )
        actions = SpaceGrid(
            probe.action_space, "action", **_grid_options(probe, "action", options, chosen, env_id)
        )
        rewards = _RandomRewards(probe, env_id)  # played once, for both estimates
        bound, source = _reward_bound(probe, rewards, options)
        size, size_source = _reward_size(probe, rewards, options)
        cap = _episode_cap(probe, options, chosen)
        probe_shape = tuple(probe.observation_space.shape or ())
    finally:
        probe.close()
    return Problem(
        name=env_id,
        env_id=env_id,
        env_kwargs=env_kwargs,
        state_dims=states.dims,
        action_dims=actions.dims,
        reward_bound=bound,
        encode=states.index,
        decode=actions.value,
        vectorized=has_vector and cap is None and not states.composite and not actions.composite,
        env_factory=None if isinstance(env, str) else factory,
        flatten=states.flatten if states.composite else None,
        reward_bound_source=source,
        reward_size=size,
        reward_size_source=size_source,
        observation_shape=(states.n_components,) if states.composite else probe_shape,
        max_episode_steps=cap,
        chosen_options=chosen,
        check_values=states.check,
    )


def _grid_options(
    probe: gymnasium.Env, role: str, options: dict[str, Any], chosen: dict[str, Any], env_id: str
) -> dict[str, Any]:
    """Return the ``bins``, ``low``, ``high`` of one space's grid, filling in the defaults.

    Defaults (recorded in ``chosen`` under their option names): `DEFAULT_STATE_BINS` or
    `DEFAULT_ACTION_BINS` bins, and for observations the bounds of `observe_bounds`
    widened by `BOUNDS_MARGIN` of the observed range on each side, within the space's
    own bounds (a component that never moved gets a cell of width 1).
    """
    observation = role == "observation"
    space = probe.observation_space if observation else probe.action_space
    prefix = "" if observation else "action_"
    bins_option = "state_bins" if observation else "action_bins"
    bins = options.get(bins_option)
    low, high = options.get(f"{prefix}low"), options.get(f"{prefix}high")
    space_low, space_high = box_bounds(space, role)
    if space_low.size == 0:
        return {"bins": bins, "low": low, "high": high}
    if bins is None:
        bins = DEFAULT_STATE_BINS if observation else DEFAULT_ACTION_BINS
        chosen[bins_option] = bins
    if observation and (low is None or high is None):
        seen_low, seen_high = observe_bounds(probe, env_id=env_id)
        margin = BOUNDS_MARGIN * (seen_high - seen_low)
        lows = np.maximum(space_low, seen_low - margin)
        highs = np.minimum(space_high, seen_high + margin)
        highs = np.where(highs > lows, highs, lows + 1.0)
        if low is None:
            low = chosen["low"] = lows.tolist()
        if high is None:
            high = chosen["high"] = highs.tolist()
    return {"bins": bins, "low": low, "high": high}


def _time_limit(env: gymnasium.Env) -> int | None:
    """Return the step limit of the environment's ``TimeLimit`` wrapper, None if it has none."""
    while isinstance(env, gymnasium.Wrapper):
        if isinstance(env, gymnasium.wrappers.TimeLimit):
            return int(env._max_episode_steps)
        env = env.env
    return None


def _episode_cap(
    probe: gymnasium.Env, options: dict[str, Any], chosen: dict[str, Any]
) -> int | None:
    """Return the episode cap `Problem.make_env` applies: the option, the default or None."""
    if "max_episode_steps" in options:
        return check_int("max_episode_steps", options["max_episode_steps"], 1)
    if _time_limit(probe) is not None:
        return None
    chosen["max_episode_steps"] = DEFAULT_MAX_EPISODE_STEPS
    return DEFAULT_MAX_EPISODE_STEPS
