"""Tabular Q-learning: the ground truth on problems whose Q-table fits in memory.

Q is stored densely as a (B, |S|, |A|) array, one table per replica, with
|S| = prod(state_dims) and |A| = prod(action_dims); state and action index
vectors are flattened with ``numpy.ravel_multi_index`` (C order). The agent
refuses problems with more than ``max_entries`` table entries instead of
silently allocating gigabytes.

Behaviour is epsilon-greedy with ties among maximisers broken at random by the
replica's ``explore`` stream; `TabularQ.greedy` takes the first maximiser and
uses no randomness. Epsilon is multiplied by ``epsilon_decay`` (not below
``epsilon_min``) after every observed transition.

Every numeric setting of the update and of exploration may differ between the
replicas (`TabularQ.per_replica`, `rl.agents.replica_settings`): replica b
computes with its own gamma, step size, epsilon schedule and initial value,
the same operations on the same numbers as that configuration trained alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from rl.agents._explore import (
    EPSILON_SCHEDULE,
    decay_epsilon,
    generator_states,
    set_generator_states,
)
from rl.agents._restore import check_generator_states, saved_array
from rl.agents.base import DEFAULT_GAMMA, Transitions
from rl.agents.registry import AgentSpec
from rl.agents.replica_settings import SETTINGS_KEY, replica_values, saved_replica_values
from rl.agents.tables._joint_table import JointTableAgent
from rl.problems import Problem
from rl.seeding import AgentRandom
from rl.validation import (
    MAX_JOINT_ACTIONS,
    check_choice,
    check_epsilon_schedule,
    check_int,
    check_memory,
    check_real,
)

STEP_SIZE_RULES = ("constant", "inverse_visits")


@dataclass(frozen=True)
class TabularQConfig:
    """Hyperparameters of tabular Q-learning."""

    gamma: float = DEFAULT_GAMMA
    """Discount factor gamma in [0, 1)."""
    step_size: float = 0.1
    """Constant step size alpha in (0, 1], used when ``step_size_rule`` is ``"constant"``."""
    step_size_rule: str = "constant"
    """``"constant"`` (alpha) or ``"inverse_visits"`` (alpha_t = 1 / N(s, a), visit included)."""
    epsilon_start: float = EPSILON_SCHEDULE["epsilon_start"]
    """Initial exploration probability epsilon_0."""
    epsilon_decay: float = EPSILON_SCHEDULE["epsilon_decay"]
    """Multiplicative decay of epsilon after every observed transition."""
    epsilon_min: float = EPSILON_SCHEDULE["epsilon_min"]
    """Floor of epsilon."""
    initial_value: float = 0.0
    """Initial value of every table entry."""
    max_entries: int = 1_000_000
    """Largest |S| * |A| accepted (per replica); larger problems raise ValueError."""
    max_joint_actions: int = MAX_JOINT_ACTIONS
    """Largest joint action count |A| = prod(action modes) searched exactly (the argmax)."""

    def __post_init__(self) -> None:
        check_real("gamma", self.gamma, 0.0, 1.0, high_open=True)
        check_real("step_size", self.step_size, 0.0, 1.0, low_open=True)
        check_choice("step_size_rule", self.step_size_rule, STEP_SIZE_RULES)
        check_epsilon_schedule(self.epsilon_start, self.epsilon_decay, self.epsilon_min)
        check_real("initial_value", self.initial_value, -np.inf, np.inf)
        check_int("max_entries", self.max_entries, 1)
        check_int("max_joint_actions", self.max_joint_actions, 1)


class TabularQ(JointTableAgent):
    """Watkins' Q-learning with a dense table per replica.

    Parameters
    ----------
    problem : rl.problems.Problem
        The discretized problem; only ``state_dims`` and ``action_dims`` are used.
    config : TabularQConfig
        Hyperparameters.
    streams : sequence of rl.seeding.AgentRandom
        One per replica; ``explore`` draws epsilon decisions and tie breaks.
        ``init`` is not used (the table starts at ``initial_value``).
    replica_settings : mapping of str to sequence of float, optional
        B values of some fields of `per_replica` (`rl.agents.replica_settings`):
        replica b runs ``replica_settings[field][b]``, the config's value for the others.

    Attributes
    ----------
    per_replica : frozenset of str
        Every numeric setting of the update and of exploration: gamma, step_size,
        epsilon_start, epsilon_decay, epsilon_min and initial_value.
    settings_ : dict of str to ndarray, shape (B,)
        Each replica's value of every field of `per_replica`.
    q_table_ : ndarray of float, shape (B, |S|, |A|)
        The Q-tables.
    visits_ : ndarray of int, shape (B, |S|, |A|)
        Visit counts N(s, a).
    epsilon_ : ndarray of float, shape (B,)
        Current exploration probabilities.

    Raises
    ------
    ValueError
        If |S| * |A| exceeds ``config.max_entries``, or ``replica_settings`` names a
        field not in `per_replica`, holds other than B numbers or a value its field refuses.

    References
    ----------
    .. [1] Watkins, C. J. C. H. and Dayan, P. "Q-learning". Machine Learning
       8, 279-292 (1992).
    """

    label = "Tabular Q-learning"
    per_replica: ClassVar[frozenset[str]] = frozenset(
        {"gamma", "step_size", "epsilon_start", "epsilon_decay", "epsilon_min", "initial_value"}
    )

    def __init__(
        self,
        problem: Problem,
        config: TabularQConfig,
        streams: Sequence[AgentRandom],
        *,
        replica_settings: Mapping[str, Sequence[float]] | None = None,
    ):
        super().__init__(problem, config, streams)
        self.settings_ = replica_values(
            type(self).__name__, self.per_replica, config, replica_settings, self.replicas
        )
        entries = self.n_states * self.n_actions
        if entries > config.max_entries:
            raise ValueError(
                f"Tabular Q-learning needs |S| * |A| = {self.n_states} * {self.n_actions} = "
                f"{entries} entries (state dims {self.state_dims}, action dims "
                f"{self.action_dims}), more than max_entries = {config.max_entries}. "
                "Use a coarser grid or a low-rank agent, or raise 'max_entries'."
            )
        table_bytes = 16.0 * self.replicas * entries
        check_memory("max_entries", table_bytes, "the Q-table and visits (B x |S| x |A| x 16 B)")
        shape = (self.replicas, self.n_states, self.n_actions)
        self.q_table_ = np.empty(shape)
        self.q_table_[:] = self.settings_["initial_value"][:, None, None]
        self.visits_ = np.zeros(shape, dtype=np.int64)
        self.epsilon_ = self.settings_["epsilon_start"].copy()

    def action_values(self, states: NDArray[np.int64]) -> NDArray[np.float64]:
        """Return Q(s, .) over the joint actions, shape (B, |A|), for states (B, D_S)."""
        return self.q_table_[np.arange(self.replicas), self._flat_states(states)]

    def q_tensor(self) -> NDArray[np.float64]:
        """Return the tables reshaped to (B, *state_dims, *action_dims) (a view)."""
        return self.q_table_.reshape((self.replicas, *self.state_dims, *self.action_dims))

    # -- protocol ------------------------------------------------------------
    def observe(self, batch: Transitions) -> None:
        """Apply Q(s,a) += alpha (r + gamma max_a' Q(s',a') - Q(s,a)) for active replicas.

        The bootstrap term is dropped where ``terminated`` (not on truncation);
        gamma, alpha and epsilon's schedule are each replica's own (`settings_`).
        """
        idx = np.flatnonzero(batch.active)
        if idx.size == 0:
            return
        s = self._flat_states(batch.states)[idx]
        a = self._flat_actions(batch.actions)[idx]
        s_next = self._flat_states(batch.next_states)[idx]
        bootstrap = self.q_table_[idx, s_next].max(axis=1)
        not_terminal = ~np.asarray(batch.terminated, dtype=bool)[idx]
        rewards = np.asarray(batch.rewards, dtype=np.float64)[idx]
        settings = self.settings_
        targets = rewards + settings["gamma"][idx] * not_terminal * bootstrap
        self.visits_[idx, s, a] += 1
        if self.config.step_size_rule == "inverse_visits":
            alpha = 1.0 / self.visits_[idx, s, a]
        else:
            alpha = settings["step_size"][idx]
        current = self.q_table_[idx, s, a]
        self.q_table_[idx, s, a] = current + alpha * (targets - current)
        active = np.asarray(batch.active, dtype=bool)
        decay = settings["epsilon_decay"][active], settings["epsilon_min"][active]
        decay_epsilon(self.epsilon_, active, *decay)

    @property
    def n_params(self) -> int:
        """|S| * |A|: one learnable entry per state-action pair."""
        return self.n_states * self.n_actions

    def state_dict(self) -> dict[str, Any]:
        """Tables, visit counts, epsilons, per-replica settings and the generator states."""
        return {
            SETTINGS_KEY: {field: values.copy() for field, values in self.settings_.items()},
            "q_table": self.q_table_.copy(),
            "visits": self.visits_.copy(),
            "epsilon": self.epsilon_.copy(),
            "explore_rng": generator_states([s.explore for s in self.streams]),
            "init_rng": generator_states([s.init for s in self.streams]),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned; ValueError if a shape, dtype or value is wrong.

        The per-replica settings are the saved ones (a state without them keeps
        the agent's own).
        """
        settings = saved_replica_values(
            type(self).__name__, self.per_replica, self.config, state, self.settings_
        )
        q_table = saved_array(state, "q_table", self.q_table_)
        visits = saved_array(state, "visits", self.visits_, low=0)
        epsilon = saved_array(state, "epsilon", self.epsilon_, low=0.0, high=1.0)
        check_generator_states(state["explore_rng"], len(self.streams), "explore_rng")
        check_generator_states(state["init_rng"], len(self.streams), "init_rng")
        self.settings_ = settings
        self.q_table_ = q_table.copy()
        self.visits_ = visits.copy()
        self.epsilon_ = epsilon.copy()
        set_generator_states([s.explore for s in self.streams], state["explore_rng"])
        set_generator_states([s.init for s in self.streams], state["init_rng"])


SPEC = AgentSpec("tabular", TabularQ, TabularQConfig)
"""What the runner needs of tabular Q; its readings are `rl.agents.readings.READINGS["tabular"]`."""
