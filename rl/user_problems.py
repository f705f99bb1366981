"""Users' own environments as problems: any id, instance or factory with factored spaces.

`rl.problems.make_problem` sends everything that is not a bundled problem
here. The environment is made once (a *probe*) to read its spaces and reward
bound; the observation and action spaces become tensor modes through
`rl.spaces.SpaceGrid` (Discrete and MultiDiscrete components map to modes
directly, Box components are discretized on a uniform grid, Tuple and Dict are
flattened in order).

Reward bound (R_max, used for V_max = R_max / (1 - gamma) by TEQL's bounded
iterates and LoRa-VI's clipping), in this order:

1. the unwrapped environment's ``reward_bound`` attribute, if it declares one;
2. the ``reward_bound`` option;
3. an estimate (`estimate_reward_bound`): twice the largest |r| over
   `ESTIMATE_EPISODES` random episodes, recorded in the run's ``config.json``.

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
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np

from rl.problems import ENVIRONMENTS, EnvFailure, Problem
from rl.spaces import SpaceGrid
from rl.validation import check_real

ESTIMATE_EPISODES = 10
"""Random episodes played to estimate a reward bound that nobody gives."""

ESTIMATE_STEPS = 1000
"""Step cap of each of those episodes."""


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
    except gymnasium.error.Error:
        known = ", ".join(ENVIRONMENTS)
        raise ValueError(
            f"Unknown problem {env_id!r}; choose one of: {known}, or a registered Gymnasium id "
            "('package.module:Env-v0' imports package.module first)."
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


def estimate_reward_bound(
    env: gymnasium.Env,
    episodes: int = ESTIMATE_EPISODES,
    max_steps: int = ESTIMATE_STEPS,
    *,
    env_id: str | None = None,
) -> float:
    """Twice the largest |r| seen over random episodes (1.0 if every reward was 0).

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
    space = copy.deepcopy(env.action_space)
    space.seed(0)
    largest = 0.0
    name = env_id or (env.spec.id if env.spec is not None else type(env.unwrapped).__name__)
    for episode in range(episodes):
        call = "reset"
        try:
            env.reset(seed=episode)
            call = "step"
            for _ in range(max_steps):
                _, reward, terminated, truncated, _ = env.step(space.sample())
                largest = max(largest, abs(float(reward)))
                if terminated or truncated:
                    break
        except Exception as error:  # noqa: BLE001 - any error of the user's code, reported
            where = (
                f"{call}() while estimating its reward bound (episode {episode}, seed {episode})"
            )
            raise EnvFailure.during(name, where, error) from error
    if not np.isfinite(largest):
        raise ValueError("The environment returned a non-finite reward; pass 'reward_bound'.")
    return 2.0 * largest if largest > 0 else 1.0


def _reward_bound(probe: gymnasium.Env, env_id: str, options: dict[str, Any]) -> tuple[float, str]:
    declared = getattr(probe.unwrapped, "reward_bound", None)
    if declared is not None:
        return check_real("reward_bound", float(declared), 0.0, low_open=True), "environment"
    if "reward_bound" in options:
        value = options["reward_bound"]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"The 'reward_bound' option must be a float > 0. Got {value!r}.")
        source = options.get("reward_bound_source", "argument")
        if source not in ("argument", "estimated"):
            raise ValueError(
                "The 'reward_bound_source' option must be 'argument' or 'estimated'. "
                f"Got {source!r} instead."
            )
        return check_real("reward_bound", float(value), 0.0, low_open=True), source
    if "reward_bound_source" in options:
        raise ValueError("The 'reward_bound_source' option needs a 'reward_bound'.")
    return estimate_reward_bound(probe, env_id=env_id), "estimated"


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
    try:
        states = SpaceGrid(
            probe.observation_space,
            "observation",
            bins=options.get("state_bins"),
            low=options.get("low"),
            high=options.get("high"),
            rule=options.get("index_rule", "centre"),
        )
        actions = SpaceGrid(
            probe.action_space,
            "action",
            bins=options.get("action_bins"),
            low=options.get("action_low"),
            high=options.get("action_high"),
        )
        bound, source = _reward_bound(probe, env_id, options)
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
        vectorized=has_vector and not states.composite and not actions.composite,
        env_factory=None if isinstance(env, str) else factory,
        flatten=states.flatten if states.composite else None,
        reward_bound_source=source,
        observation_shape=(states.n_components,) if states.composite else probe_shape,
    )
