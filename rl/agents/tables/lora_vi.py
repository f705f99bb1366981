"""LoRa-VI: a CUR-skeleton (matrix low-rank) Q-learning baseline.

Q is arranged as an |S| x |A| matrix over the coarse discretized states
(|S| = prod(state_dims), the state index vector flattened with
``numpy.ravel_multi_index``; joint actions are flattened the same way when
D_A > 1). The learnable parameters are a skeleton of K anchor rows R
(K x |A|) and K anchor columns C (|S| x K) whose overlap W (K x K) is shared:
K (|S| + |A| - K) numbers. The full matrix is the completion
Q_hat = C W^+_d R with the pseudo-inverse truncated to rank d (`rl.agents.tables.cur`).

One replica's life:

1. Construction: K anchor states and K anchor actions drawn uniformly without
   replacement by the ``init`` stream; every skeleton entry starts at
   ``initial_value``.
2. Every transition (s, a, r, s') of an active replica with s an anchor row or
   a an anchor column moves that skeleton entry towards the TD target
   r + gamma max_a' Q_hat(s', a') (r alone on termination) with step size
   alpha. Other transitions only update the visit counts.
3. Every ``improve_every`` episodes (`LoRaVI.end_episode`) the matrix is
   re-completed (policy improvement). From episode ``warmup_episodes`` on, the
   anchors are also re-selected at these times by the leverage scores of the
   rank-d SVD of the observed entries (Q_hat at visited (s, a), zero
   elsewhere); new skeleton entries start from Q_hat, kept ones keep their
   values, and the matrix is completed again from the new skeleton.
4. Behaviour is epsilon-greedy on Q_hat (ties broken by the ``explore``
   stream). Between improvements Q_hat is frozen, so targets and behaviour
   come from the last completion: each period is one sweep of approximate
   value iteration.

The coarse state grid is a property of the problem, not of the agent's
config: `problem_options` returns the paper's grid as a ``make_problem``
option (CartPole 3 x 3 x 3 x 3, Pendulum 7 x 7), which the runner
(through its reading in `rl.agents.readings.READINGS`) passes to
``make_problem(name, state_bins=...)`` below the user's own ``env_options``;
`preset` returns the matching K (9 and 10). The agent takes whatever grid the
problem has. Problems with more than ``max_states`` states are refused: the
paper deems LoRa-VI infeasible on Highway (Appendix "Parameter Matching
Methodology").

The choices the paper leaves open are listed in ``docs/baselines.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rl.agents._explore import (
    decay_epsilon,
    generator_states,
    set_generator_states,
)
from rl.agents._restore import check_generator_states, saved_array
from rl.agents.base import DEFAULT_GAMMA, Transitions
from rl.agents.registry import AgentSpec
from rl.agents.tables._joint_table import JointTableAgent
from rl.agents.tables.cur import (
    ANCHOR_RULES,
    cur_complete,
    cur_param_count,
    leverage_scores,
    select_anchors,
)
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


@dataclass(frozen=True)
class LoRaVIConfig:
    """Hyperparameters of LoRa-VI."""

    anchors: int = 9
    """K, the number of anchor rows (states) and of anchor columns (actions)."""
    rank: int = 3
    """d, the truncation rank of W^+ and of the SVD giving leverage scores (d <= K)."""
    gamma: float = DEFAULT_GAMMA
    """Discount factor gamma in [0, 1)."""
    step_size: float = 0.1
    """Step size alpha in (0, 1] of the TD update of skeleton entries."""
    epsilon_start: float = 1.0
    """Initial exploration probability epsilon_0."""
    epsilon_decay: float = 0.9999
    """Multiplicative decay of epsilon after every observed transition."""
    epsilon_min: float = 0.05
    """Floor of epsilon."""
    improve_every: int = 5
    """Re-complete (and, after warm-up, re-select anchors) every this many episodes."""
    warmup_episodes: int = 10
    """Episodes with the initial uniformly random anchors before the first leverage selection."""
    anchor_rule: str = "top"
    """``"top"``: the K largest leverage scores; ``"sample"``: proportional draws (init stream)."""
    rcond: float = 1e-10
    """Singular values of W below rcond * sigma_max are dropped from W^+_d."""
    clip_values: bool = True
    """Clip completed entries to [-V_max, V_max], V_max = reward_bound / (1 - gamma)."""
    initial_value: float = 0.0
    """Initial value of every skeleton entry."""
    max_states: int = 100_000
    """Largest |S| accepted (Q_hat is a dense |S| x |A| array per replica)."""
    max_joint_actions: int = MAX_JOINT_ACTIONS
    """Largest joint action count |A| = prod(action modes) searched exactly (the argmax)."""

    def __post_init__(self) -> None:
        check_int("anchors", self.anchors, 1)
        check_int("rank", self.rank, 1, self.anchors)
        check_real("gamma", self.gamma, 0.0, 1.0, high_open=True)
        check_real("step_size", self.step_size, 0.0, 1.0, low_open=True)
        check_epsilon_schedule(self.epsilon_start, self.epsilon_decay, self.epsilon_min)
        check_int("improve_every", self.improve_every, 1)
        check_int("warmup_episodes", self.warmup_episodes, 0)
        check_choice("anchor_rule", self.anchor_rule, ANCHOR_RULES)
        check_real("rcond", self.rcond, 0.0, 1.0, high_open=True)
        if not isinstance(self.clip_values, bool):
            raise ValueError(
                f"The 'clip_values' parameter must be a bool. Got {self.clip_values!r} instead."
            )
        check_real("initial_value", self.initial_value, -np.inf, np.inf)
        check_int("max_states", self.max_states, 1)
        check_int("max_joint_actions", self.max_joint_actions, 1)


class LoRaVIAgent(JointTableAgent):
    """Matrix low-rank Q-learning with a CUR skeleton and leverage-score anchors.

    Parameters
    ----------
    problem : rl.problems.Problem
        The (coarse) discretized problem.
    config : LoRaVIConfig
        Hyperparameters.
    streams : sequence of rl.seeding.AgentRandom
        One per replica; ``init`` draws anchors (initial uniform draw and the
        ``"sample"`` rule), ``explore`` the epsilon-greedy decisions.

    Attributes
    ----------
    row_anchors_, col_anchors_ : ndarray of int, shape (B, K)
        Anchor states and anchor actions (flat indices, sorted).
    rows_ : ndarray of float, shape (B, K, |A|)
        R, the anchor rows.
    cols_ : ndarray of float, shape (B, |S|, K)
        C, the anchor columns; ``cols_[b][row_anchors_[b]] == rows_[b][:, col_anchors_[b]]``.
    q_hat_ : ndarray of float, shape (B, |S|, |A|)
        The last completion C W^+_d R (derived, not learned).
    visits_ : ndarray of int, shape (B, |S|, |A|)
        Visit counts N(s, a).
    epsilon_ : ndarray of float, shape (B,)
    episodes_ : ndarray of int, shape (B,)
        Finished training episodes.

    Raises
    ------
    ValueError
        If |S| > ``max_states`` or K > min(|S|, |A|).

    References
    ----------
    .. [1] Stojanovic, S., Jedra, Y. and Proutiere, A. "Model-free low-rank
       reinforcement learning via leveraged entry-wise matrix estimation".
       NeurIPS 2024.
    .. [2] TEQL paper, Section "Numerical Study" and Appendix "Parameter
       Matching Methodology".
    """

    label = "LoRa-VI"

    def __init__(self, problem: Problem, config: LoRaVIConfig, streams: Sequence[AgentRandom]):
        super().__init__(problem, config, streams)
        if self.n_states > config.max_states:
            raise ValueError(
                f"LoRa-VI needs a dense |S| x |A| matrix, but the state grid {self.state_dims} "
                f"has |S| = {self.n_states} states, more than max_states = {config.max_states}. "
                "Use a coarser grid (make_problem's state_bins) or raise 'max_states'; "
                "the paper deems LoRa-VI infeasible on Highway."
            )
        check_int("anchors", config.anchors, 1, min(self.n_states, self.n_actions))
        matrix_bytes = 32.0 * self.replicas * self.n_states * self.n_actions
        check_memory("max_states", matrix_bytes, "the |S| x |A| matrices (4 x float64 per replica)")
        bound = float(problem.reward_bound) / (1.0 - config.gamma)
        self.value_bound = bound if config.clip_values and np.isfinite(bound) else np.inf

        b, k = self.replicas, config.anchors
        self.row_anchors_ = np.empty((b, k), dtype=np.int64)
        self.col_anchors_ = np.empty((b, k), dtype=np.int64)
        for i, stream in enumerate(self.streams):
            self.row_anchors_[i] = np.sort(stream.init.choice(self.n_states, k, replace=False))
            self.col_anchors_[i] = np.sort(stream.init.choice(self.n_actions, k, replace=False))
        value = float(config.initial_value)
        self.rows_ = np.full((b, k, self.n_actions), value)
        self.cols_ = np.full((b, self.n_states, k), value)
        self.q_hat_ = np.full((b, self.n_states, self.n_actions), value)
        self.visits_ = np.zeros((b, self.n_states, self.n_actions), dtype=np.int64)
        self.epsilon_ = np.full(b, float(config.epsilon_start))
        self.episodes_ = np.zeros(b, dtype=np.int64)
        self._index_anchors()

    # -- index helpers -----------------------------------------------------
    def _index_anchors(self) -> None:
        """Rebuild the position maps: row_pos_[b, s] = i if s is anchor row i, else -1."""
        b = np.arange(self.replicas)[:, None]
        k = np.arange(self.config.anchors)[None, :]
        self.row_pos_ = np.full((self.replicas, self.n_states), -1, dtype=np.int64)
        self.col_pos_ = np.full((self.replicas, self.n_actions), -1, dtype=np.int64)
        self.row_pos_[b, self.row_anchors_] = k
        self.col_pos_[b, self.col_anchors_] = k

    def action_values(self, states: NDArray[np.int64]) -> NDArray[np.float64]:
        """Return Q_hat(s, .) over the joint actions, shape (B, |A|), for states (B, D_S)."""
        return self.q_hat_[np.arange(self.replicas), self._flat_states(states)]

    def skeleton(self, replica: int) -> NDArray[np.float64]:
        """Return an |S| x |A| array with replica's skeleton entries and Q_hat elsewhere."""
        dense = self.q_hat_[replica].copy()
        dense[self.row_anchors_[replica], :] = self.rows_[replica]
        dense[:, self.col_anchors_[replica]] = self.cols_[replica]
        return dense

    # -- protocol ------------------------------------------------------------
    def observe(self, batch: Transitions) -> None:
        """TD-update the skeleton entry (s, a) of each active replica, if it is one.

        The target r + gamma max_a' Q_hat(s', a') uses the last completion; the
        bootstrap is dropped where ``terminated``. An entry in both an anchor
        row and an anchor column (in W) is written to R and C alike.
        """
        active = np.asarray(batch.active, dtype=bool)
        idx = np.flatnonzero(active)
        if idx.size == 0:
            return
        s = self._flat_states(batch.states)[idx]
        a = self._flat_actions(batch.actions)[idx]
        s_next = self._flat_states(batch.next_states)[idx]
        not_terminal = ~np.asarray(batch.terminated, dtype=bool)[idx]
        rewards = np.asarray(batch.rewards, dtype=np.float64)[idx]
        targets = rewards + self.config.gamma * not_terminal * self.q_hat_[idx, s_next].max(axis=1)
        self.visits_[idx, s, a] += 1

        i = self.row_pos_[idx, s]
        j = self.col_pos_[idx, a]
        in_row, in_col = i >= 0, j >= 0
        current = np.where(in_row, self.rows_[idx, i, a], self.cols_[idx, s, j])
        new = current + self.config.step_size * (targets - current)
        self.rows_[idx[in_row], i[in_row], a[in_row]] = new[in_row]
        self.cols_[idx[in_col], s[in_col], j[in_col]] = new[in_col]
        decay_epsilon(self.epsilon_, active, self.config.epsilon_decay, self.config.epsilon_min)

    def end_episode(self, active: NDArray[np.bool_]) -> None:
        """Count the episode; every ``improve_every`` episodes improve (and re-anchor)."""
        for b in np.flatnonzero(np.asarray(active, dtype=bool)):
            self.episodes_[b] += 1
            if self.episodes_[b] % self.config.improve_every:
                continue
            self._complete(b)
            if self.episodes_[b] >= self.config.warmup_episodes:
                self._reselect_anchors(b)
                self._complete(b)

    def _complete(self, b: int) -> None:
        """Q_hat = C W^+_d R for replica b, clipped to [-V_max, V_max]."""
        q_hat = cur_complete(
            self.cols_[b], self.rows_[b], self.row_anchors_[b], self.config.rank, self.config.rcond
        )
        self.q_hat_[b] = np.clip(q_hat, -self.value_bound, self.value_bound)

    def _reselect_anchors(self, b: int) -> None:
        """Choose new anchors from the leverage scores of the observed entries of Q_hat."""
        observed = np.where(self.visits_[b] > 0, self.q_hat_[b], 0.0)
        if not np.any(observed):
            return
        scores = leverage_scores(observed, self.config.rank)
        k, rule, rng = self.config.anchors, self.config.anchor_rule, self.streams[b].init
        new_rows = select_anchors(scores.rows, k, rule, rng)
        new_cols = select_anchors(scores.columns, k, rule, rng)
        dense = self.skeleton(b)
        self.row_anchors_[b], self.col_anchors_[b] = new_rows, new_cols
        self.rows_[b] = dense[new_rows, :]
        self.cols_[b] = dense[:, new_cols]
        self._index_anchors()

    @property
    def n_params(self) -> int:
        """K (|S| + |A| - K): the distinct skeleton entries."""
        return cur_param_count(self.config.anchors, self.n_states, self.n_actions)

    def state_dict(self) -> dict[str, Any]:
        """Skeleton, anchors, completion, counters and the init/explore generator states."""
        return {
            "row_anchors": self.row_anchors_.copy(),
            "col_anchors": self.col_anchors_.copy(),
            "rows": self.rows_.copy(),
            "cols": self.cols_.copy(),
            "q_hat": self.q_hat_.copy(),
            "visits": self.visits_.copy(),
            "epsilon": self.epsilon_.copy(),
            "episodes": self.episodes_.copy(),
            "init_rng": generator_states([s.init for s in self.streams]),
            "explore_rng": generator_states([s.explore for s in self.streams]),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned; ValueError if a shape, dtype or value is wrong."""
        low = {"row_anchors": 0, "col_anchors": 0, "visits": 0, "epsilon": 0.0, "episodes": 0}
        names = ("row_anchors", "col_anchors", "rows", "cols", "q_hat", "visits", "epsilon")
        saved = {
            name: saved_array(
                state,
                name,
                getattr(self, f"{name}_"),
                low=low.get(name),
                high=1.0 if name == "epsilon" else None,
            )
            for name in (*names, "episodes")
        }
        check_generator_states(state["init_rng"], len(self.streams), "init_rng")
        check_generator_states(state["explore_rng"], len(self.streams), "explore_rng")
        for name, values in saved.items():
            setattr(self, f"{name}_", values.copy())
        set_generator_states([s.init for s in self.streams], state["init_rng"])
        set_generator_states([s.explore for s in self.streams], state["explore_rng"])
        self._index_anchors()


SPEC = AgentSpec("lora-vi", LoRaVIAgent, LoRaVIConfig)
"""What the runner needs of LoRa-VI; its readings (coarse grids too) are in `rl.agents.readings`."""
