"""Tensor-Efficient Q-Learning (TEQL): Algorithm 3 with EUGE and Algorithm 1.

One training step of every replica (Algorithm 3, lines 9-11):

1. EUGE picks a_t = argmax_a Q_{t-1}(s_t, a) + c (Delta Q_{t-1}(s_t, a) +
   sqrt(log N_total(s_t) / (N_{t-1}(s_t, a) + 1))), eq. (euge), Algorithm 2.
2. The target r_t + gamma max_a' Q_{t-1}(s_{t+1}, a') is fixed.
3. Algorithm 1 updates the factor rows of (s_t, a_t) by block coordinate
   descent on the frequency-regularized loss of eq. (loss_function) with
   N_{t-1}(s_t, a_t), step size alpha_t = alpha_0 / (1 + kappa t), and
   (by default) factor clipping that keeps |Q| <= V_max = R_max / (1 - gamma)
   everywhere (Assumption 2).
4. Delta Q_t(s_t, a_t) = |Q_t(s_t, a_t) - Q_{t-1}(s_t, a_t)|, eq. (decomp_error),
   is recorded, then N_t(s_t, a_t) = N_{t-1}(s_t, a_t) + 1.

The authors' released code differs in several places; `released_preset`
collects those differences as one option set (docs/agents.md has the table).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from rl.agents._explore import argmax_random_ties, epsilon_greedy
from rl.agents._validation import check_choice, check_int, check_real
from rl.agents.base import Transitions
from rl.agents.euge import euge_scores
from rl.agents.tensor_agent import TensorAgent, TensorAgentConfig
from rl.agents.visits import Storage, make_visit_table
from rl.problem import Problem
from rl.seeding import AgentRandom
from tensorq import FactorBound, StepSchedule, bcd_update


@dataclass(frozen=True)
class TEQLConfig(TensorAgentConfig):
    """Hyperparameters of TEQL; defaults follow the paper's text (CartPole column)."""

    alpha0: float = 0.005
    """Initial step size alpha_0 of alpha_t = alpha_0 / (1 + kappa t)."""
    kappa: float = 0.001
    """Step-size decay kappa (0 keeps the step size constant, as the released code does)."""
    lam: float = 1e-3
    """Frequency-regularization strength lambda of eq. (loss_function)."""
    eps: float = 1e-4
    """Smoothing constant epsilon of eq. (loss_function)."""
    c: float = 2.0
    """EUGE exploration coefficient c of eq. (euge)."""
    tol: float = 0.01
    """Inner-loop threshold tau: stop when the entry moves less than this."""
    max_inner: int = 10
    """I_max, the cap on inner iterations per mode (per sweep for the released rule)."""
    bounded: bool = True
    """Clip factors so that |Q| <= V_max = R_max / (1 - gamma) everywhere (Assumption 2)."""
    update: Literal["paper", "released"] = "paper"
    """``"paper"``: Algorithm 1; ``"released"``: the authors' normalized Jacobi sweeps."""
    signed_delta: bool = False
    """Store Delta Q as Q_before - Q_after (released) instead of |Q_after - Q_before|."""
    count_before_update: bool = False
    """Increment N(s, a) before the update and pass the new count (released code)."""
    visit_storage: Storage = "auto"
    """Visit-table storage: dense arrays, sparse rows per visited state, or chosen by size."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_real("alpha0", self.alpha0, 0.0, math.inf, low_open=True)
        check_real("kappa", self.kappa, 0.0, math.inf)
        check_real("lam", self.lam, 0.0, math.inf)
        check_real("eps", self.eps, 0.0, math.inf, low_open=True)
        check_real("c", self.c, 0.0, math.inf)
        check_real("tol", self.tol, 0.0, math.inf)
        check_int("max_inner", self.max_inner, 1)
        check_choice("update", self.update, ("paper", "released"))
        check_choice("visit_storage", self.visit_storage, ("auto", "dense", "sparse"))


_PAPER = {
    "cartpole": {"rank": 10, "alpha0": 0.005, "c": 2.0},
    "pendulum": {"rank": 10, "alpha0": 0.005, "c": 1.0},
    "highway": {"rank": 20, "alpha0": 0.0002, "c": 2.0},
}

_RELEASED_COMMON = {
    "kappa": 0.0,
    "lam": 0.0,
    "eps": 1e-4,
    "c": 1.0,
    "tol": 0.01,
    "bounded": False,
    "update": "released",
    "signed_delta": True,
    "count_before_update": True,
}

_RELEASED = {
    "cartpole": {"rank": 10, "alpha0": 0.005, "gamma": 0.9, "max_inner": 5,
                 "epsilon_start": 0.4, "epsilon_decay": 0.999999},
    "pendulum": {"rank": 10, "alpha0": 0.005, "gamma": 0.9, "max_inner": 1,
                 "epsilon_start": 1.0, "epsilon_decay": 0.999995},
    "highway": {"rank": 20, "alpha0": 0.0002, "gamma": 0.8, "max_inner": 1,
                "epsilon_start": 1.0, "epsilon_decay": 0.999999},
}  # fmt: skip


def preset(problem_name: str) -> dict[str, Any]:
    """Return the paper's Table of hyperparameters for ``problem_name`` (empty if none).

    gamma 0.99, kappa 0.001, tau 0.01, epsilon 1e-4 and lambda 1e-3 are the
    config defaults; this adds the per-environment rank, alpha_0 and c.

    References
    ----------
    Table "Hyperparameter settings for all environments" (tab:hyperparams).
    """
    return dict(_PAPER.get(problem_name, {}))


def released_preset(problem_name: str) -> dict[str, Any]:
    """Return the effective settings of the authors' published runs.

    Constant step size, no lambda, c = 1, gamma 0.9 (0.8 on Highway), an
    epsilon-greedy layer with per-step decay, signed Delta Q, counts before
    the update, the normalized Jacobi update and no clipping.
    """
    if problem_name not in _RELEASED:
        return dict(_RELEASED_COMMON)
    return {**_RELEASED_COMMON, **_RELEASED[problem_name]}


class TEQL(TensorAgent):
    """TEQL agent (Algorithm 3) holding B independent replicas.

    Parameters
    ----------
    problem : rl.problem.Problem
        Mode sizes and the reward bound R_max (for V_max when ``bounded``).
    config : TEQLConfig
    streams : sequence of rl.seeding.AgentRandom
        One per replica.

    Attributes
    ----------
    q_ : tensorq.OnlineCP
        The Q-tensors of all replicas.
    visits_ : rl.agents.visits.VisitTable
        N(s, a) and Delta Q(s, a) per replica.
    steps_ : ndarray of int64, shape (B,)
        Training transitions observed per replica (t - 1 of Algorithm 3).

    References
    ----------
    Algorithms 1-3, eqs. (loss_function), (gradient), (decomp_error), (euge).
    """

    config: TEQLConfig

    def __init__(
        self, problem: Problem, config: TEQLConfig, streams: Sequence[AgentRandom]
    ) -> None:
        super().__init__(problem, config, streams)
        self.visits_ = make_visit_table(
            self.replicas, self.n_states, self.n_actions, config.visit_storage
        )
        self.schedule = StepSchedule(config.alpha0, config.kappa)
        self.bound = None
        if config.bounded:
            v_max = problem.reward_bound / (1.0 - config.gamma)
            self.bound = FactorBound.from_value_bound(v_max, config.rank, len(problem.shape))

    def exploration_scores(self, states: NDArray[np.int64]) -> NDArray[np.float64]:
        """EU_t(s, a) of eq. (euge) for every joint action, shape (B, |A|)."""
        rows = self.visits_.rows(self.flat_states(states))
        return euge_scores(self.action_values(states), rows.delta, rows.counts, self.config.c)

    def act(self, states: NDArray[np.int64], active: NDArray[np.bool_]) -> NDArray[np.int64]:
        """EUGE action (Algorithm 2), under an epsilon-greedy layer when epsilon_start > 0."""
        scores = self.exploration_scores(states)
        if self.config.epsilon_start > 0:
            flat = epsilon_greedy(scores, self.epsilon_, active, self._rngs)
        else:
            flat = argmax_random_ties(scores, self._rngs, active)
        return self.action_vectors(flat)

    def observe(self, batch: Transitions) -> None:
        """One Algorithm 1 update per active replica, then Delta Q and N (Algorithm 3)."""
        active = batch.active
        if not active.any():
            return
        config = self.config
        states, actions = self.flat_states(batch.states), self.flat_actions(batch.actions)
        targets = self.targets(batch.rewards, batch.next_states, batch.terminated)
        if config.count_before_update:
            self.visits_.increment(states, actions, active)
        visits = self.visits_.counts(states, actions)
        result = bcd_update(
            self.q_,
            np.concatenate([batch.states, batch.actions], axis=1),
            targets,
            visits,
            step_size=self.schedule(self.steps_ + 1),
            lam=config.lam,
            eps=config.eps,
            tol=config.tol,
            max_inner=config.max_inner,
            bound=self.bound,
            mask=~active,
            variant=config.update,
        )
        change = result.before - result.after
        delta = change if config.signed_delta else np.abs(change)
        self.visits_.set_delta(states, actions, delta, active)
        if not config.count_before_update:
            self.visits_.increment(states, actions, active)
        self.count_step(batch)

    def state_dict(self) -> dict[str, Any]:
        """Factors, counters, visit table, epsilon and generator states."""
        return {**super().state_dict(), "visits": self.visits_.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        super().load_state_dict(state)
        self.visits_.load_state_dict(state["visits"])
