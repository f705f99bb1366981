"""What TEQL and TLR share: a CP Q-tensor over state and action modes, B replicas.

The Q-function of every replica is one rank-R CP tensor of shape
``problem.state_dims + problem.action_dims`` (Section "Low-Rank Tensor
Q-Function Update", the CP representation). Actions with several components
(D_A > 1) are handled as joint actions: a state's values over all actions are
the sub-tensor over the trailing (action) modes, flattened; it is enumerated
exactly while the joint action count stays below ``max_joint_actions``, and
refused with a clear error above it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray

from rl.agents._explore import generator_states, set_generator_states
from rl.agents._restore import check_generator_states, saved_array
from rl.agents.base import DEFAULT_GAMMA, Agent, ContinuousActions, Transitions
from rl.agents.replica_settings import check_replica_settings, replica_config
from rl.agents.tensor._array_backend import Backend, check_backend
from rl.agents.tensor.state import (
    Engine,
    EngineName,
    ReplicaRule,
    StepRule,
    TensorState,
    pack_factors,
    replica_rule,
    resolve_engine,
)
from rl.agents.tensor.visits import VisitTable
from rl.validation import (
    MAX_JOINT_ACTIONS,
    MAX_RANK,
    check_choice,
    check_epsilon_schedule,
    check_int,
    check_joint_actions,
    check_memory,
    check_real,
)
from tensorq import OnlineCP
from tensorq._backend import array_namespace
from tensorq.validation import as_numpy

if TYPE_CHECKING:
    from rl.problems import Problem
    from rl.seeding import AgentRandom


@dataclass(frozen=True)
class TensorAgentConfig:
    """Settings shared by the CP-tensor agents."""

    rank: int = 10
    """CP rank R of the Q-tensor."""
    gamma: float = DEFAULT_GAMMA
    """Discount factor gamma in (0, 1)."""
    init_scale: float = 1.0
    """Factors start i.i.d. uniform in [0, init_scale), as in the authors' code."""
    init_symmetric: bool = False
    """Draw the initial factors uniform in [-init_scale, init_scale) instead: zero-mean
    rows, so that two rows of a mode start nearly orthogonal
    (docs/discrete-problems.md)."""
    init_actions: Literal["uniform", "identity"] = "uniform"
    """``"identity"``: where |A| <= R, the action modes start so that the joint action
    rows (their elementwise products) are orthogonal, R // |A| components for each action
    (`identity_action_factors`), so a state row's step moves only the visited action's
    entry; ``"uniform"`` (or |A| > R): as the other modes."""
    max_joint_actions: int = MAX_JOINT_ACTIONS
    """Largest joint action count |A| = prod(action modes) that is enumerated exactly."""
    epsilon_start: float = 0.0
    """Initial probability of a uniformly random action (epsilon-greedy layer)."""
    epsilon_decay: float = 1.0
    """Multiplicative decay of epsilon after every non-terminal training step."""
    epsilon_min: float = 0.0
    """Epsilon never decays below this value."""
    continuous_random_actions: bool = False
    """Execute the epsilon layer's random actions as continuous draws from the problem's
    action interval, credited to the grid index by endpoint rounding, as the released
    code does (`rl.agents.base.ContinuousActions`); False: a random bin, executed at its
    centre. Needs a continuous action interval (CartPole, Pendulum)."""
    engine: EngineName = "auto"
    """``"compiled"``: the Numba kernels (`rl.agents.tensor._compiled_engine.CompiledEngine`);
    ``"reference"``: the step of `rl.agents.tensor.step` on NumPy with each replica's own
    generator draws; ``"array"``: the same step on ``backend`` with buffered draws
    (`rl.agents.tensor._array_engine.ArrayEngine`); ``"scan"``: the array engine on JAX,
    with which the runner plays CartPole and Pendulum as whole compiled chunks of steps
    (`rl.loop.scan`; docs/tutorials/backends.md); ``"auto"``: the array engine for a
    backend other than NumPy, else compiled wherever it applies (NumPy float64 factors)."""
    backend: Backend = "numpy"
    """Array backend of the factors, visit counts, scores and updates: ``numpy``,
    ``pytorch`` (the ``torch`` extra) or ``jax`` (the ``jax`` extra); the last two run
    on the array engine (docs/tutorials/backends.md)."""
    device: str = "cpu"
    """Device of the array engine: ``cpu``, ``cuda`` or ``cuda:N`` (NumPy: ``cpu``)."""

    def __post_init__(self) -> None:
        check_int("rank", self.rank, 1, MAX_RANK)
        check_real("gamma", self.gamma, 0.0, 1.0, low_open=True, high_open=True)
        check_real("init_scale", self.init_scale, 0.0, math.inf, low_open=True)
        check_int("max_joint_actions", self.max_joint_actions, 1)
        check_epsilon_schedule(self.epsilon_start, self.epsilon_decay, self.epsilon_min)
        check_choice("engine", self.engine, ("auto", "compiled", "reference", "array", "scan"))
        check_backend(self.backend, self.device, self.engine)
        check_choice("init_actions", self.init_actions, ("uniform", "identity"))
        if not isinstance(self.init_symmetric, bool):
            raise ValueError(
                "The 'init_symmetric' parameter must be a bool. "
                f"Got {self.init_symmetric!r} instead."
            )
        if not isinstance(self.continuous_random_actions, bool):
            raise ValueError(
                "The 'continuous_random_actions' parameter must be a bool. "
                f"Got {self.continuous_random_actions!r} instead."
            )


def identity_action_factors(
    action_dims: Sequence[int], rank: int, scale: float
) -> list[NDArray[np.float64]]:
    """Return action factors whose joint action rows are orthogonal and of equal norm.

    With |A| = prod(action_dims) and m = R // |A|, component r < m |A| belongs
    to the joint action ``np.unravel_index(r % |A|, action_dims)``:
    A_k(i, r) = 1 where that action's k-th index is i (``scale`` on the first
    mode), 0 elsewhere; the other R - m |A| components are 0. So the joint row
    prod_k A_k(a_k, :) is ``scale`` on the m components of a and 0 elsewhere:
    two joint rows are orthogonal, and every action starts alike. Needs
    |A| <= ``rank``.
    """
    joint = math.prod(action_dims)
    if joint > rank:
        raise ValueError(f"An identity start needs |A| <= rank. Got |A| = {joint} > {rank}.")
    used = np.arange(rank // joint * joint)
    digits = np.unravel_index(used % joint, tuple(action_dims))
    factors = []
    for mode, size in enumerate(action_dims):
        rows = np.zeros((size, rank))
        rows[digits[mode], used] = scale if mode == 0 else 1.0
        factors.append(rows)
    return factors


class TensorAgent(Agent):
    """Base class: a B-replica `tensorq.OnlineCP` Q-tensor, its state bundle and its engine.

    The constructor builds the agent's `rl.agents.tensor.state.TensorState`
    (``state_``: the factors, counters, epsilon, generators, visit table and
    the subclass's `StepRule`) completely, then the engine on it (``engine_``,
    `rl.agents.tensor.state`); ``act``, ``greedy`` and ``observe`` go through
    the engine, which runs the step of `rl.agents.tensor.step` (or its compiled
    twin). A subclass declares its step (`own_rule`) and its visit table
    (`visit_table`); it writes no step of its own.

    Parameters
    ----------
    problem : rl.problems.Problem
        Mode sizes of states and actions.
    config : TensorAgentConfig
        The agent's settings (stored unmodified).
    streams : sequence of rl.seeding.AgentRandom
        One per replica: ``init`` draws the initial factors, ``explore`` every
        exploration decision.
    replica_settings : mapping of str to sequence, optional
        B values for each of some fields of ``per_replica``: replica b runs
        ``replica_settings[field][b]`` instead of ``config``'s value
        (`rl.agents.replica_settings`). ``rank`` r_b <= ``config.rank``: replica
        b holds components r_b, ..., R - 1 at 0 and runs as a rank-r_b agent,
        its factors drawn as that agent's from the same stream.

    Attributes
    ----------
    per_replica : frozenset of str
        The config fields ``replica_settings`` may vary: every number of the
        step, ``epsilon_start`` and ``rank``. The choices (update, exploration,
        grid, initialization, visit storage, ``bounded``) hold for every replica.
    replica_settings_ : dict of str to ndarray, shape (B,)
        The validated ``replica_settings`` (part of `state_dict`).
    ranks_ : ndarray of int64, shape (B,)
        Each replica's rank r_b (``config.rank`` where not given).
    state_ : rl.agents.tensor.state.TensorState
        What the engine reads; ``q_.factors``, ``steps_`` and ``epsilon_`` are its arrays.
    engine_ : rl.agents.tensor.state.Engine
        Runs ``act``, ``greedy`` and ``observe`` (``engine_.name`` says which).
    """

    config: TensorAgentConfig
    numbers: ClassVar[dict[str, str]] = {"gamma": "gamma", "epsilon_decay": "epsilon_decay",
                                         "epsilon_min": "epsilon_min"}  # fmt: skip
    """The config fields that are numbers of the step, and their `ReplicaRule` field."""
    per_replica: ClassVar[frozenset[str]] = frozenset({*numbers, "epsilon_start", "rank"})

    @classmethod
    def batch_group(cls, config: TensorAgentConfig) -> tuple[Any, ...]:
        """Whether the epsilon layer is on (``epsilon_start`` > 0): one choice for a whole batch."""
        return (config.epsilon_start > 0,)

    def __init__(
        self,
        problem: Problem,
        config: TensorAgentConfig,
        streams: Sequence[AgentRandom],
        *,
        replica_settings: Mapping[str, Sequence[float | int]] | None = None,
    ) -> None:
        if len(streams) < 1:
            raise ValueError("The 'streams' parameter must hold one AgentRandom per replica.")
        self.problem = problem
        self.config = config
        self.replicas = len(streams)
        self.replica_settings_ = self._check_settings(replica_settings)
        self.ranks_ = self.replica_settings_.get("rank", np.full(self.replicas, config.rank))
        self.n_states = math.prod(problem.state_dims)
        self.n_actions = check_joint_actions(
            type(self).__name__, problem.action_dims, config.max_joint_actions
        )
        factor_bytes = 8.0 * self.replicas * sum(problem.shape) * config.rank
        check_memory("rank", factor_bytes, "the CP factors (B x sum(d_n) x R float64)")
        interval = None
        if config.continuous_random_actions:
            interval = getattr(problem, "action_interval", None)
            if interval is None:
                raise ValueError(
                    "The 'continuous_random_actions' parameter needs a problem with a "
                    f"continuous action interval (cartpole, pendulum); {problem.name!r} has none."
                )
            interval = tuple(tuple(float(v) for v in np.ravel(bound)) for bound in interval)
            self.continuous_actions_ = ContinuousActions(
                np.zeros(self.replicas, dtype=bool),
                np.zeros((self.replicas, len(problem.action_dims))),
            )
        factors = self._initial_factors(streams)
        engine = resolve_engine(config.engine, factors, config.backend)
        if engine in ("array", "scan"):
            space = array_namespace(config.backend, config.device)
            factors = [space.put(np.array(f)) for f in factors]
        self.q_ = OnlineCP(factors)
        table = self.n_states * self.n_actions
        if self.q_.n_params > table:
            warnings.warn(
                f"{type(self).__name__} holds {self.q_.n_params} parameters per replica, more "
                f"than a table of Q ({table}): factor the state into several modes (for "
                "Taxi, its decode) for the CP tensor to compress.",
                stacklevel=3,
            )
        self.steps_ = np.zeros(self.replicas, dtype=np.int64)
        self.epsilon_ = np.full(self.replicas, float(config.epsilon_start))
        self.epsilon_[...] = self.replica_settings_.get("epsilon_start", self.epsilon_)
        rule = self.own_rule()._replace(
            gamma=float(config.gamma), epsilon_decay=float(config.epsilon_decay),
            epsilon_min=float(config.epsilon_min), action_interval=interval,
        )  # fmt: skip
        self.state_ = TensorState(
            rule=rule,
            values=self._replica_rule(rule),
            factors=self.q_.factors,
            steps=self.steps_,
            epsilon=self.epsilon_,
            generators=[stream.explore for stream in streams],
            visits=self.visit_table(engine),
            drawn=self.continuous_actions_,
            state_dims=tuple(problem.state_dims),
            action_dims=tuple(problem.action_dims),
            backend=config.backend,
            device=config.device,
            label=type(self).__name__,
            remedies=tuple(self.divergence_remedies()),
        )
        self.engine_: Engine = make_engine(engine, self.state_)

    def _check_settings(
        self, settings: Mapping[str, Sequence[float | int]] | None
    ) -> dict[str, NDArray[Any]]:
        """Validate ``replica_settings``: each replica's config must be valid, its rank <= R."""
        name, config = type(self).__name__, self.config
        arrays = check_replica_settings(name, self.per_replica, config, settings, self.replicas)
        ranks = arrays.get("rank")
        if ranks is not None and not np.all((ranks >= 1) & (ranks <= config.rank)):
            raise ValueError(
                f"The per-replica values of 'rank' must be ints in [1, {config.rank}] (the "
                f"config's rank is the largest). Got {ranks.tolist()} instead."
            )
        starts = arrays.get("epsilon_start")
        if starts is not None and len(np.unique(starts > 0)) > 1:
            raise ValueError(
                "The per-replica values of 'epsilon_start' must be all 0 or all above 0: 0 "
                "turns the epsilon layer off, a choice that holds for every replica."
            )
        for replica in range(self.replicas):
            try:
                replica_config(config, arrays, replica)
            except ValueError as error:
                raise ValueError(f"The settings of replica {replica}: {error}") from None
        return arrays

    def _replica_rule(self, rule: StepRule) -> ReplicaRule:
        """Return the step's numbers per replica (`rl.agents.tensor.state.replica_rule`)."""
        given = {
            self.numbers[field]: values
            for field, values in self.replica_settings_.items()
            if field in self.numbers
        }
        return replica_rule(rule, self.config.rank, self.replicas, {**given, "rank": self.ranks_})

    def _initial_factors(self, streams: Sequence[AgentRandom]) -> list[NDArray[np.float64]]:
        """Draw each replica's factors as a lone agent of its rank r_b would; zeros beyond r_b."""
        shape, scale = self.problem.shape, self.config.init_scale
        low = -scale if self.config.init_symmetric else 0.0
        stacked = [np.zeros((self.replicas, size, self.config.rank)) for size in shape]
        first = len(self.problem.state_dims)
        for replica, (stream, rank) in enumerate(zip(streams, self.ranks_.tolist(), strict=True)):
            for mode, size in enumerate(shape):
                stacked[mode][replica, :, :rank] = stream.init.uniform(low, scale, (size, rank))
            if self.config.init_actions == "identity" and self.n_actions <= rank:
                for mode, rows in enumerate(identity_action_factors(shape[first:], rank, scale)):
                    stacked[first + mode][replica, :, :rank] = rows
        return pack_factors(stacked)  # views of one array, which the compiled kernels read

    def own_rule(self) -> StepRule:
        """Return the subclass's exploration and update in numbers (a `StepRule`).

        The constructor adds what every tensor agent shares (gamma, epsilon's
        schedule, the continuous action interval).
        """
        raise NotImplementedError

    def visit_table(self, engine: str) -> VisitTable | None:
        """Return the visit table the step keeps, for the engine ``engine`` (None: none)."""
        return None

    def step_rule(self) -> StepRule:
        """Return the exploration and update of one training step in numbers (a `StepRule`)."""
        return self.state_.rule

    @property
    def visits_(self) -> VisitTable | None:
        """N(s, a) and Delta Q(s, a) per replica, up to date (None: the agent keeps none)."""
        if self.state_.visits is not None:
            self.engine_.sync()
        return self.state_.visits

    def act(
        self,
        states: NDArray[np.int64],
        active: NDArray[np.bool_],
        greedy: NDArray[np.bool_] | None = None,
    ) -> NDArray[np.int64]:
        """Explore where ``active & ~greedy``, act greedily where ``greedy`` (see `Agent.act`).

        On the compiled engine one kernel call does both, with the reference's draws.
        """
        return self.engine_.act(states, active, greedy)

    def explore(self, states: NDArray[np.int64], active: NDArray[np.bool_]) -> NDArray[np.int64]:
        """Exploratory actions (B, D_A) of the active replicas (`rl.agents.tensor.step.act`)."""
        return self.engine_.act(states, active)

    def observe(self, batch: Transitions) -> None:
        """Learn from one transition per active replica (`rl.agents.tensor.step.learn`)."""
        if batch.active.any():
            self.engine_.observe(batch)

    @property
    def n_params(self) -> int:
        """R * sum(d_n): the CP parameter count of one replica."""
        return int(self.q_.n_params)

    def flat_states(self, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """Flat state index per replica, shape (B,)."""
        return np.ravel_multi_index(tuple(states.T), self.problem.state_dims)

    def flat_actions(self, actions: NDArray[np.int64]) -> NDArray[np.int64]:
        """Flat (joint) action index per replica, shape (B,)."""
        return np.ravel_multi_index(tuple(actions.T), self.problem.action_dims)

    def action_values(self, states: NDArray[np.int64]) -> NDArray[np.float64]:
        """Q(s, a) for every joint action, shape (B, |A|): one (|A| x R) product per replica."""
        return np.asarray(self.q_.subtensor(states)).reshape(self.replicas, self.n_actions)

    def greedy(self, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """Argmax_a Q(s, a) per replica (first maximum on ties; no randomness)."""
        return self.engine_.greedy(states)

    def divergence_remedies(self) -> list[str]:
        """Return the settings of this agent that can stop its Q-values from overflowing."""
        return ["a smaller step size 'alpha'", "a smaller 'gamma'"]

    def state_dict(self) -> dict[str, Any]:
        """Factors, step counters, epsilon, generator states and visit table (NumPy)."""
        self.engine_.sync()
        saved = {
            "factors": [np.array(as_numpy(f), copy=True) for f in self.q_.factors],
            "steps": self.steps_.copy(),
            "epsilon": self.epsilon_.copy(),
            "rngs": generator_states(self.state_.generators),
        }
        if self.state_.visits is not None:
            saved["visits"] = self.state_.visits.state_dict()
        if self.replica_settings_:
            saved["replica_settings"] = {k: v.copy() for k, v in self.replica_settings_.items()}
        return saved

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned, once checked (`rl.agents._restore`).

        Raises
        ------
        ValueError
            If an entry has another shape or dtype than this agent's (factors
            (B, d_n, R) from the problem and rank), holds NaN or infinities, a
            negative step count or an epsilon outside [0, 1], or per-replica
            settings this agent refuses; nothing is changed. Without saved
            per-replica settings every replica runs the config's.
        """
        factors = state["factors"]
        if not isinstance(factors, list) or len(factors) != len(self.q_.factors):
            raise ValueError(f"the entry factors must be a list of {len(self.q_.factors)} arrays.")
        saved = [
            saved_array(dict(enumerate(factors)), n, np.zeros(tuple(f.shape)), where="factors")
            for n, f in enumerate(self.q_.factors)
        ]
        steps = saved_array(state, "steps", self.steps_, low=0)
        epsilon = saved_array(state, "epsilon", self.epsilon_, low=0.0, high=1.0)
        generators = self.state_.generators
        check_generator_states(state["rngs"], len(generators), "rngs")
        settings = self._check_settings(state.get("replica_settings"))
        if self.state_.visits is not None:
            self.state_.visits.load_state_dict(state["visits"])
        self.steps_[...] = steps
        self.epsilon_[...] = epsilon
        set_generator_states(generators, state["rngs"])
        self.replica_settings_ = settings
        self.ranks_ = settings.get("rank", np.full(self.replicas, self.config.rank))
        self.state_.values.packed[...] = self._replica_rule(self.state_.rule).packed
        self.engine_.reload(saved)


def make_engine(name: str, state: TensorState) -> Engine:
    """Build the engine ``name`` (compiled, array, scan or reference) on ``state``."""
    if name == "compiled":
        from rl.agents.tensor._compiled_engine import CompiledEngine

        return CompiledEngine(state)
    from rl.agents.tensor._array_engine import ArrayEngine

    return ArrayEngine(state, name)
