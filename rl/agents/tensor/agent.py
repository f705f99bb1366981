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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import NDArray

from rl.agents._explore import (
    decay_epsilon,
    epsilon_greedy,
    epsilon_greedy_continuous,
    generator_states,
    set_generator_states,
)
from rl.agents._restore import check_generator_states, saved_array
from rl.agents.base import DEFAULT_GAMMA, Agent, ContinuousActions, Transitions
from rl.agents.tensor._array_backend import Backend, check_backend
from rl.agents.tensor.engine import (
    Engine,
    EngineName,
    ReferenceEngine,
    StepRule,
    UpdateStats,
    pack_factors,
    resolve_engine,
)
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
from tensorq.validation import as_numpy

if TYPE_CHECKING:
    from rl.agents.tensor.visits import VisitTable
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
    ``"reference"``: the NumPy/TensorLy mathematics (`rl.agents.tensor.engine.ReferenceEngine`);
    ``"array"``: array operations on ``backend`` (`rl.agents.tensor._array_engine.ArrayEngine`);
    ``"auto"``: the array engine for a backend other than NumPy, else compiled wherever
    it applies (NumPy float64 factors)."""
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
        check_choice("engine", self.engine, ("auto", "compiled", "reference", "array"))
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
    """Base class: a B-replica `tensorq.OnlineCP` Q-tensor, its reading helpers and its engine.

    ``act``, ``greedy`` and ``observe`` go through ``engine_``
    (`rl.agents.tensor.engine`), chosen at construction: the reference engine runs the
    subclass's mathematics (`choose_actions`, `learn`), the compiled engine the
    same step as declared by `step_rule`.

    Parameters
    ----------
    problem : rl.problems.Problem
        Mode sizes of states and actions.
    config : TensorAgentConfig
        The agent's settings (stored unmodified).
    streams : sequence of rl.seeding.AgentRandom
        One per replica: ``init`` draws the initial factors, ``explore`` every
        exploration decision.

    Attributes
    ----------
    engine_ : rl.agents.tensor.engine.Engine
        Runs ``act``, ``greedy`` and ``observe`` (``engine_.name`` says which).
    visits_ : rl.agents.tensor.visits.VisitTable or None
        The visit table, for agents that keep one (TEQL).
    """

    config: TensorAgentConfig
    visits_: VisitTable | None = None

    def __init__(
        self, problem: Problem, config: TensorAgentConfig, streams: Sequence[AgentRandom]
    ) -> None:
        if len(streams) < 1:
            raise ValueError("The 'streams' parameter must hold one AgentRandom per replica.")
        self.problem = problem
        self.config = config
        self.replicas = len(streams)
        self.n_states = math.prod(problem.state_dims)
        self.n_actions = check_joint_actions(
            type(self).__name__, problem.action_dims, config.max_joint_actions
        )
        factor_bytes = 8.0 * self.replicas * sum(problem.shape) * config.rank
        check_memory("rank", factor_bytes, "the CP factors (B x sum(d_n) x R float64)")
        self._rngs = [stream.explore for stream in streams]
        self.action_interval_: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None
        if config.continuous_random_actions:
            interval = getattr(problem, "action_interval", None)
            if interval is None:
                raise ValueError(
                    "The 'continuous_random_actions' parameter needs a problem with a "
                    f"continuous action interval (cartpole, pendulum); {problem.name!r} has none."
                )
            low, high = (np.asarray(bound, dtype=np.float64) for bound in interval)
            self.action_interval_ = (low, high)
            self.continuous_actions_ = ContinuousActions(
                np.zeros(self.replicas, dtype=bool),
                np.zeros((self.replicas, len(problem.action_dims))),
            )
        self.q_ = OnlineCP(self._initial_factors(streams))
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
        name = resolve_engine(config.engine, self.q_.factors, config.backend)
        self.engine_: Engine = make_engine(name, self)

    def _initial_factors(self, streams: Sequence[AgentRandom]) -> list[NDArray[np.float64]]:
        shape, rank, scale = self.problem.shape, self.config.rank, self.config.init_scale
        low = -scale if self.config.init_symmetric else 0.0
        per_replica = [
            [stream.init.uniform(low, scale, size=(size, rank)) for size in shape]
            for stream in streams
        ]
        modes = range(len(shape))
        stacked = [np.stack([factors[mode] for factors in per_replica]) for mode in modes]
        if self.config.init_actions == "identity" and self.n_actions <= rank:
            first = len(self.problem.state_dims)
            for mode, rows in enumerate(identity_action_factors(shape[first:], rank, scale)):
                stacked[first + mode][:] = rows
        return pack_factors(stacked)  # views of one array, which the compiled kernels read

    @property
    def compiled(self) -> bool:
        """Whether the engine is the compiled one."""
        return self.engine_.name == "compiled"

    def step_rule(self) -> StepRule:
        """Return the exploration and update of one training step in numbers (a `StepRule`)."""
        raise NotImplementedError

    def choose_actions(
        self, states: NDArray[np.int64], active: NDArray[np.bool_]
    ) -> NDArray[np.int64]:
        """Exploratory flat joint actions (B,) of the active replicas: the reference mathematics."""
        raise NotImplementedError

    def learn(self, batch: Transitions) -> UpdateStats:
        """One update of every active replica: the reference mathematics."""
        raise NotImplementedError

    def exploration_generators(self) -> list[np.random.Generator]:
        """Return the replicas' exploration generators (shared, not copied)."""
        return self._rngs

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
        """Exploratory actions (B, D_A) of the active replicas (`choose_actions`)."""
        return self.engine_.act(states, active)

    def observe(self, batch: Transitions) -> None:
        """Learn from one transition per active replica (`learn`)."""
        if batch.active.any():
            self.engine_.observe(batch)

    def _epsilon_greedy(
        self, scores: NDArray[np.float64], active: NDArray[np.bool_]
    ) -> NDArray[np.int64]:
        """Epsilon-greedy on ``scores`` (B, |A|), with continuous random actions if configured."""
        if self.action_interval_ is None or self.continuous_actions_ is None:
            return epsilon_greedy(scores, self.epsilon_, active, self._rngs)
        low, high = self.action_interval_
        drawn = self.continuous_actions_
        return epsilon_greedy_continuous(
            scores, self.epsilon_, active, self._rngs, low, high, self.problem.action_dims,
            drawn.values, drawn.mask,
        )  # fmt: skip

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

    def action_vectors(self, flat: NDArray[np.int64]) -> NDArray[np.int64]:
        """Convert flat joint actions (B,) to action index vectors (B, D_A)."""
        return np.stack(np.unravel_index(flat, self.problem.action_dims), axis=-1)

    def action_values(self, states: NDArray[np.int64]) -> NDArray[np.float64]:
        """Q(s, a) for every joint action, shape (B, |A|): one (|A| x R) product per replica."""
        return np.asarray(self.q_.subtensor(states)).reshape(self.replicas, self.n_actions)

    def greedy(self, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """Argmax_a Q(s, a) per replica (first maximum on ties; no randomness)."""
        return self.engine_.greedy(states)

    def targets(
        self,
        rewards: NDArray[np.float64],
        next_states: NDArray[np.int64],
        terminated: NDArray[np.bool_],
    ) -> NDArray[np.float64]:
        """TD targets r + gamma max_a' Q(s', a'), the reward alone at termination.

        References
        ----------
        Algorithm 1, line 3 (the target uses the factors before the update).
        """
        bootstrap = self.action_values(next_states).max(axis=-1)
        targets = rewards + self.config.gamma * np.where(terminated, 0.0, bootstrap)
        if not np.isfinite(targets).all():
            replica = int(np.flatnonzero(~np.isfinite(targets))[0])
            raise self.divergence(replica, targets[replica])
        return targets

    def divergence_remedies(self) -> list[str]:
        """Return the settings of this agent that can stop its Q-values from overflowing."""
        return ["a smaller step size 'alpha'", "a smaller 'gamma'"]

    def divergence(self, replica: int, target: float) -> ValueError:
        """Return the error raised when replica ``replica``'s TD target ``target`` is not finite."""
        return ValueError(
            f"{type(self).__name__} diverged: the TD target of replica {replica} is "
            f"{target} (its Q-values overflowed); the run stops. Try "
            f"{', or '.join(self.divergence_remedies())}."
        )

    def count_step(self, batch: Transitions) -> None:
        """Advance the step counters and decay epsilon after a training step.

        Epsilon decays after every non-terminal step of an active replica, as in
        the authors' code.
        """
        self.steps_[batch.active] += 1
        config = self.config
        mask = batch.active & ~batch.terminated
        decay_epsilon(self.epsilon_, mask, config.epsilon_decay, config.epsilon_min)

    def state_dict(self) -> dict[str, Any]:
        """Factors, step counters, epsilon and exploration generator states (NumPy)."""
        self.engine_.sync()
        return {
            "factors": [np.array(as_numpy(f), copy=True) for f in self.q_.factors],
            "steps": self.steps_.copy(),
            "epsilon": self.epsilon_.copy(),
            "rngs": generator_states(self._rngs),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned, once checked (`rl.agents._restore`).

        Raises
        ------
        ValueError
            If an entry has another shape or dtype than this agent's (factors
            (B, d_n, R) from the problem and rank), holds NaN or infinities, a
            negative step count or an epsilon outside [0, 1]; nothing is changed.
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
        check_generator_states(state["rngs"], len(self._rngs), "rngs")
        self.engine_.reload(saved)
        self.steps_[...] = steps
        self.epsilon_[...] = epsilon
        set_generator_states(self._rngs, state["rngs"])


def make_engine(name: str, agent: TensorAgent) -> Engine:
    """Build the engine ``name`` (``"compiled"``, ``"array"`` or ``"reference"``) of ``agent``."""
    if name == "compiled":
        from rl.agents.tensor._compiled_engine import CompiledEngine

        return CompiledEngine(agent)
    if name == "array":
        from rl.agents.tensor._array_engine import ArrayEngine

        return ArrayEngine(agent)
    return ReferenceEngine(agent)
