"""Build the factored discrete view (`rl.problem.Problem`) of each environment by name.

=============  ==========================  ==============================  ==========
name           env id                      state dims ; action dims        vectorized
=============  ==========================  ==============================  ==========
``cartpole``   ``rl/ContinuousCartPole-v0``  (10, 10, 20, 20) ; (10,)         yes
``pendulum``   ``rl/BoundedPendulum-v0``     (20, 20) ; (10,)                 yes
``highway``    ``rl/Highway-v0``             (20,) * 9 ; (5,)                 no
``inventory``  ``rl/Inventory-v0``           (2, 5, 5) ; (3, 3) by default    no
``lowrank``    ``rl/LowRankMDP-v0``          (4, 4, 4) ; (3, 3) by default    no
=============  ==========================  ==============================  ==========

The continuous problems use the paper's grids (`rl.discretize.PRESETS`). The
``index_rule`` option changes how observations are binned; actions always
execute bin centres (as the authors' greedy and EUGE actions do), so that with
10 action bins on [-1, 1] the executed CartPole forces are -0.9, -0.7, ..., 0.9.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rl.discretize import PRESETS, RULES, DiscreteGrid, UniformGrid
from rl.envs import cartpole, highway, pendulum
from rl.problem import Problem

#: Short names and their Gymnasium ids.
PROBLEMS: dict[str, str] = {
    "cartpole": "rl/ContinuousCartPole-v0",
    "pendulum": "rl/BoundedPendulum-v0",
    "highway": "rl/Highway-v0",
    "inventory": "rl/Inventory-v0",
    "lowrank": "rl/LowRankMDP-v0",
}
_BY_ID = {env_id: name for name, env_id in PROBLEMS.items()}
_OPTIONS = ("index_rule", "state_bins", "action_bins", "normalization", "env_kwargs")
_VECTORIZED = ("cartpole", "pendulum")


def _bins(option: str, value: Any, ndim: int) -> tuple[int, ...] | None:
    if value is None:
        return None
    bins = (value,) * ndim if isinstance(value, (int, np.integer)) else tuple(value)
    if len(bins) != ndim or any(not isinstance(b, (int, np.integer)) or b < 1 for b in bins):
        raise ValueError(
            f"The '{option}' option must be an int >= 1 or {ndim} such ints. Got {value!r} instead."
        )
    return tuple(int(b) for b in bins)


def _encoder(grid: UniformGrid | DiscreteGrid, obs_dim: int) -> Callable[[NDArray], NDArray]:
    def encode(observations: NDArray) -> NDArray[np.int64]:
        return grid.index(np.asarray(observations).reshape(-1, obs_dim))

    return encode


def _decoder(grid: UniformGrid | DiscreteGrid, n_components: int) -> Callable[[NDArray], NDArray]:
    def decode(actions: NDArray[np.int64]) -> NDArray:
        return grid.value(np.asarray(actions, dtype=np.int64).reshape(-1, n_components))

    return decode


def _exact_problem(name: str, env_id: str, env_kwargs: dict, state_bins, action_bins) -> Problem:
    import gymnasium

    if state_bins is not None or action_bins is not None:
        raise ValueError(
            f"The 'state_bins' and 'action_bins' options do not apply to {name!r}: its spaces "
            "are discrete; change its sizes through 'env_kwargs'."
        )
    env = gymnasium.make(env_id, **env_kwargs).unwrapped
    state_grid = DiscreteGrid(env.state_dims)
    action_grid = DiscreteGrid(env.action_dims)
    env.close()
    return Problem(
        name=name,
        env_id=env_id,
        env_kwargs=env_kwargs,
        state_dims=state_grid.dims,
        action_dims=action_grid.dims,
        reward_bound=float(env.reward_bound),
        encode=_encoder(state_grid, len(state_grid.dims)),
        decode=_decoder(action_grid, len(action_grid.dims)),
        vectorized=False,
    )


def make_problem(name: str, **options: Any) -> Problem:
    """Build the `Problem` (environment id plus discretization) called ``name``.

    Parameters
    ----------
    name : str
        ``"cartpole"``, ``"pendulum"``, ``"highway"``, ``"inventory"``,
        ``"lowrank"`` or the matching Gymnasium id (``"rl/ContinuousCartPole-v0"``).
    index_rule : {"centre", "endpoint"}, default "centre"
        State index rule of the continuous problems (see `rl.discretize`);
        ``"endpoint"`` reproduces the authors' released code.
    state_bins : int or tuple of int, optional
        Override the preset state bins (one int for all dimensions), e.g. the
        coarse LoRa-VI grids 3 (CartPole) and 7 (Pendulum).
    action_bins : int or tuple of int, optional
        Override the preset action bins (continuous actions only).
    normalization : {"paper", "informative"}, default "paper"
        Highway only: observation scaling (see `rl.envs.highway`).
    env_kwargs : dict, optional
        Keyword arguments for the environment constructor (for example
        ``{"n_locations": 3}`` for ``inventory``).

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
        For an unknown name or option, or an invalid option value.
    """
    if name in PROBLEMS:
        short = name
    elif name in _BY_ID:
        short = _BY_ID[name]
    else:
        known = ", ".join(list(PROBLEMS) + list(_BY_ID))
        raise ValueError(f"Unknown problem {name!r}; choose one of: {known}.")
    for option in options:
        if option not in _OPTIONS:
            raise ValueError(
                f"Unknown option {option!r} for make_problem; valid options: {', '.join(_OPTIONS)}."
            )
    env_id = PROBLEMS[short]
    rule = options.get("index_rule", "centre")
    if rule not in RULES:
        raise ValueError(f"The 'index_rule' option must be one of {RULES}. Got {rule!r} instead.")
    raw_kwargs = options.get("env_kwargs")
    if raw_kwargs is not None and not isinstance(raw_kwargs, dict):
        raise ValueError(f"The 'env_kwargs' option must be a dict. Got {raw_kwargs!r} instead.")
    env_kwargs = dict(raw_kwargs or {})
    normalization = options.get("normalization")
    if normalization is not None:
        if short != "highway":
            raise ValueError(
                f"The 'normalization' option applies to 'highway' only, not {short!r}."
            )
        env_kwargs["normalization"] = normalization
    if short in ("inventory", "lowrank"):
        return _exact_problem(
            short, env_id, env_kwargs, options.get("state_bins"), options.get("action_bins")
        )
    if short == "highway":
        if env_kwargs.get("normalization", "paper") not in highway.NORMALIZATIONS:
            raise ValueError(
                f"The 'normalization' option must be one of {highway.NORMALIZATIONS}. "
                f"Got {env_kwargs['normalization']!r} instead."
            )
        reward_bound = highway.reward_bound(env_kwargs.get("config"))
    else:
        reward_bound = float((cartpole if short == "cartpole" else pendulum).REWARD_BOUND)
    preset = PRESETS[short]
    state_bins = _bins("state_bins", options.get("state_bins"), len(preset.state_bins))
    action_bins = _bins("action_bins", options.get("action_bins"), len(preset.action_bins))
    if action_bins is not None and preset.action_low is None:
        raise ValueError(
            f"The 'action_bins' option does not apply to {short!r}: its actions are discrete."
        )
    state_grid = preset.state_grid(rule, state_bins)
    action_grid = preset.action_grid("centre", action_bins)
    return Problem(
        name=short,
        env_id=env_id,
        env_kwargs=env_kwargs,
        state_dims=state_grid.dims,
        action_dims=action_grid.dims,
        reward_bound=reward_bound,
        encode=_encoder(state_grid, state_grid.ndim),
        decode=_decoder(action_grid, action_grid.ndim),
        vectorized=short in _VECTORIZED,
    )
