"""`Problem`: the factored discrete view of an environment that every agent works on.

Agents never see raw observations or environment actions: they work on integer
index vectors, one index per state component and one per action component
(the modes of the Q-tensor). A `Problem` holds the maps between the two worlds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium
import numpy as np
from numpy.typing import NDArray

from rl.problems.discretize import DiscreteGrid, UniformGrid

ESTIMATE_EPISODES = 10
"""Random episodes played to estimate a reward bound that nobody gives
(`rl.problems.from_gymnasium.estimate_reward_bound`)."""

REWARD_MARGIN = 2.0
"""The estimated reward bound is this many times the largest |r| seen 
(`rl.problems.from_gymnasium.estimate_reward_bound`)."""


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
        ``vector_entry_point``) that `rl.loop.replicas.ReplicaEnvs` uses.
    env_factory : callable or None
        Makes one copy of the environment, for problems built from an instance
        or a factory; None: ``gymnasium.make(env_id, **env_kwargs)``.
    flatten : callable or None
        One raw observation -> flat float array, for Tuple/Dict observation
        spaces (see `rl.problems.spaces`); None: ``numpy.asarray``.
    reward_bound_source : {"environment", "argument", "reward_range", "estimated"}
        Where ``reward_bound`` came from (see `make_problem`; `describe_reward_bound`).
    reward_size : float or None
        The size of a typical step's reward, the mean |r| per step: declared by the
        environment, given as an option, or estimated over the random episodes of the
        bound's estimate (`rl.problems.from_gymnasium.estimate_reward_size`). TEQL's
        stable reading counts EUGE's count bonus in it (`rl.agents.readings`). None:
        the problem gives none (the bundled problems that declare none).
    reward_size_source : {"environment", "argument", "estimated"} or None
        Where ``reward_size`` came from (see `make_problem`).
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
    reward_size: float | None = None
    reward_size_source: str | None = None
    discount: float | None = None
    """The problem's own discount, if it defines one (the exact-model problems compute Q*
    with it); agents use it unless the configuration sets ``gamma``."""
    action_interval: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    """(low, high) of each continuous action component, for ``continuous_random_actions``."""
    grids: tuple[UniformGrid | DiscreteGrid, UniformGrid | DiscreteGrid] | None = None
    """The (state, action) grids behind `encode` and `decode`, for the bundled problems;
    the fused runner (`rl.loop.fused`) encodes and decodes with their compiled helpers."""
    observation_shape: tuple[int, ...] | None = None
    """Shape of one observation as `as_array` returns it (flattened for Tuple/Dict spaces),
    for users' environments; `as_array` refuses any other. None: not checked (the bundled
    environments)."""
    max_episode_steps: int | None = None
    """Episode cap that `make_env` applies (``TimeLimit``), for users' environments."""
    chosen_options: dict = field(default_factory=dict)
    """Options the problem chose itself (`rl.problems.from_gymnasium` defaults), for
    `recorded_options`."""
    check_values: Callable[[NDArray], None] | None = None
    """Raises ValueError for one observation (as `as_array` returns it) with a discrete
    component outside its space (`rl.problems.spaces.SpaceGrid.check`), for users'
    environments; `encode_observation` calls it. None: finiteness is checked only."""

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
        """Return the state index vector (D_S,) of one raw observation.

        Raises
        ------
        ValueError
            If the observation is not numeric, has a component that is not
            finite, or (`check_values`) a discrete component outside its space;
            continuous components out of range are clipped to the grid.
        """
        array = self.as_array(observation)
        if array.dtype.kind not in "biuf":
            raise ValueError(
                f"The observation {observation!r} is not numeric (dtype {array.dtype}); "
                f"{self.env_id!r} observations are numbers."
            )
        if not np.all(np.isfinite(array)):
            raise ValueError(f"The observation {observation!r} is not finite.")
        if self.check_values is not None:
            self.check_values(array)
        return self.encode(array[None])[0]

    def describe_reward_bound(self) -> str:
        """Return one line saying what R_max is and how it was obtained.

        An estimate says that it covers only the rewards random play sees, so a
        user whose task has a rare large reward (a goal bonus) knows to pass
        ``reward_bound``.
        """
        bound = f"Reward bound R_max = {self.reward_bound:.6g} for {self.env_id!r}"
        how = {
            "environment": "declared by the environment",
            "argument": "given as the 'reward_bound' option",
            "reward_range": "the largest |r| of the environment's reward_range",
        }
        if self.reward_bound_source in how:
            return f"{bound} ({how[self.reward_bound_source]})."
        return (
            f"{bound}, estimated as {REWARD_MARGIN:g} x the largest |r| over {ESTIMATE_EPISODES} "
            "seeded random episodes; it misses any reward random play never reaches (a goal "
            "bonus): if there is one, pass env_options={'reward_bound': ...} "
            "(--env-option reward_bound=...)."
        )

    def recorded_options(self) -> dict[str, Any]:
        """Options that rebuild this problem exactly, to record in a run's config.

        An estimated reward bound and reward size are recorded (with their
        sources), and the options the problem chose itself (`chosen_options`), so
        that a resumed or rerun run uses the same bound, size, grid and episode cap.
        """
        recorded = dict(self.chosen_options)
        if self.reward_bound_source == "estimated":
            recorded.update(reward_bound=self.reward_bound, reward_bound_source="estimated")
        if self.reward_size_source == "estimated":
            recorded.update(reward_size=self.reward_size, reward_size_source="estimated")
        return recorded
