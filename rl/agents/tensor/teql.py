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

The authors' released code differs in several places; its reading in
`rl.agents.readings.READINGS` collects those differences as one option set
(docs/agents.md has the table).

The stable reading (``update="stable"``, docs/readings.md "The stable reading")
keeps the loss, EUGE and Algorithm 1's Gauss-Seidel loop over modes and changes
three things, each the smallest that restores what the proofs assume:

- the loss uses the count after the visit (``count_before_update=True``):
  L = 1/2 (y - Q)^2 - lambda Q^2 / (N_{t-1} + 1 + epsilon), convex in Q for
  every count when lambda < 1/2;
- each row step is a normalized-LMS step,
  F_n(i_n, :) <- clip(F_n(i_n, :) - eta_t / ||g_n||^2 ((1 - 2 w) Q - y) g_n),
  a descent step on L for eta_t = eta_0 / (1 + kappa t) in (0, 2) (``alpha0`` is
  eta_0, dimensionless, so it does not depend on the reward scale);
- the factor bound F_max = (V_max / R)^(1/N), V_max = R_max / (1 - gamma), is
  always on, so |Q| <= V_max (Assumption 2) and Proposition 2 holds with the
  proof's ||g_n||^2 <= R F_max^(2(N-1)) replaced by 1.

Where the paper gives no settings and the state is one mode the stable reading also
takes tabular-like steps (docs/discrete-problems.md): the action factors
start with orthogonal joint rows (``init_actions="identity"``), the action
modes' row steps are scaled by rho = min(1, |A| / |S|)^2
(``footprint_power=2``), and eta = eta_0 / (1 + kappa N_t(s, a)) decays with the
entry's own visits (``step_count="entry"``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal, NamedTuple

import numpy as np
from numpy.typing import NDArray

from rl.agents.base import Transitions
from rl.agents.registry import AgentSpec
from rl.agents.tensor.agent import TensorAgent, TensorAgentConfig
from rl.agents.tensor.state import ReplicaRule, StepRule, UpdateStats
from rl.agents.tensor.visits import Storage, VisitTable, make_visit_table
from rl.validation import check_choice, check_int, check_real
from tensorq import FactorBound, StepSchedule

if TYPE_CHECKING:
    from rl.problems import Problem
    from rl.seeding import AgentRandom


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
    bonus_unit: float = 1.0
    """u, the reward unit of EUGE's count bonus: EU = Q + c (Delta Q + u sqrt(log N_total /
    (N + 1))); 1 is eq. (euge) as printed. Off the paper's problems the stable reading sets it
    to twice the problem's reward size (R_max on one state mode), so that the bonus follows
    the reward scale (docs/readings.md, "Sparse rewards")."""
    tol: float = 0.01
    """Inner-loop threshold tau: stop when the entry moves less than this."""
    max_inner: int = 10
    """I_max, the cap on inner iterations per mode (per sweep for the released rule)."""
    bounded: bool = True
    """Clip factors so that |Q| <= V_max = R_max / (1 - gamma) everywhere (Assumption 2)."""
    update: Literal["paper", "released", "stable"] = "paper"
    """``"paper"``: Algorithm 1; ``"released"``: the authors' normalized Jacobi sweeps;
    ``"stable"``: Algorithm 1 with normalized-LMS row steps (alpha0 is then the
    dimensionless step eta_0 in (0, 2); the ``stable`` reading of `rl.agents.readings`)."""
    signed_delta: bool = False
    """Store Delta Q as Q_before - Q_after (released) instead of |Q_after - Q_before|."""
    count_before_update: bool = False
    """Increment N(s, a) before the update and pass the new count (released code)."""
    visit_storage: Storage = "auto"
    """Visit-table storage: dense arrays, sparse rows per visited state, or chosen by size."""
    step_count: Literal["agent", "entry"] = "agent"
    """The t of alpha_t = alpha_0 / (1 + kappa t): the agent's steps (Algorithm 3), or
    ``"entry"``: the visit count N_t(s_t, a_t) passed to the loss, so that each entry's
    step decays with its own visits, as tabular Q-learning's
    (docs/discrete-problems.md)."""
    footprint_power: float = 0.0
    """p of the footprint steps: the stable update's action-mode row steps are scaled by
    rho = min(1, |A| / |S|)^p (0: every mode takes the whole step), so the action rows,
    which every state shares, move less (docs/discrete-problems.md)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_real("alpha0", self.alpha0, 0.0, math.inf, low_open=True)
        check_real("kappa", self.kappa, 0.0, math.inf)
        check_real("lam", self.lam, 0.0, math.inf)
        check_real("eps", self.eps, 0.0, math.inf, low_open=True)
        check_real("c", self.c, 0.0, math.inf)
        check_real("bonus_unit", self.bonus_unit, 0.0, math.inf, low_open=True)
        check_real("tol", self.tol, 0.0, math.inf)
        check_int("max_inner", self.max_inner, 1)
        check_choice("update", self.update, ("paper", "released", "stable"))
        if self.update == "stable":
            check_real("alpha0", self.alpha0, 0.0, 2.0, low_open=True, high_open=True)
        check_choice("visit_storage", self.visit_storage, ("auto", "dense", "sparse"))
        check_choice("step_count", self.step_count, ("agent", "entry"))
        check_real("footprint_power", self.footprint_power, 0.0, math.inf)
        if self.footprint_power > 0 and self.update != "stable":
            raise ValueError(
                "The 'footprint_power' parameter needs the stable update (update 'stable'). "
                f"Got update {self.update!r} instead."
            )


class UpdateRecord(NamedTuple):
    """What one lockstep TEQL update did, one value per replica (see `TEQL.on_update`).

    Attributes
    ----------
    states, actions : ndarray of int64, shape (B,)
        Flat state and joint-action index of the updated entry.
    targets : ndarray of float64, shape (B,)
        TD targets r + gamma max_a' Q_{t-1}(s', a').
    before, after : ndarray of float64, shape (B,)
        The entry Q_{t-1}(s_t, a_t) and Q_t(s_t, a_t); Delta Q = |after - before|.
    visits : ndarray of int64, shape (B,)
        The count N passed to the loss of eq. (loss_function).
    step_size : ndarray of float64, shape (B,)
        alpha_t in force.
    f_max : float or None
        The config's factor bound F_max of Assumption 2 (None when unbounded;
        with per-replica settings each replica's own is ``state_.values.f_max``).
    active : ndarray of bool, shape (B,)
        Replicas that were updated; the other rows are meaningless.
    """

    states: NDArray[np.int64]
    actions: NDArray[np.int64]
    targets: NDArray[np.float64]
    before: NDArray[np.float64]
    after: NDArray[np.float64]
    visits: NDArray[np.int64]
    step_size: NDArray[np.float64]
    f_max: float | None
    active: NDArray[np.bool_]


class TEQLAgent(TensorAgent):
    """TEQL agent (Algorithm 3) holding B independent replicas.

    Parameters
    ----------
    problem : rl.problems.Problem
        Mode sizes and the reward bound R_max (for V_max when ``bounded``).
    config : TEQLConfig
    streams : sequence of rl.seeding.AgentRandom
        One per replica.
    replica_settings : mapping of str to sequence, optional
        B values for fields of ``per_replica`` (`rl.agents.tensor.agent.TensorAgent`):
        alpha0, kappa, lam, eps, c, bonus_unit, tol, max_inner, gamma, the epsilon
        schedule and rank. Each replica's F_max follows its gamma and rank.

    Attributes
    ----------
    q_ : tensorq.OnlineCP
        The Q-tensors of all replicas.
    schedule, bound : tensorq.StepSchedule, tensorq.FactorBound or None
        The config's step sizes and factor bound (a replica's own are in
        ``state_.values``).
    visits_ : rl.agents.tensor.visits.VisitTable
        N(s, a) and Delta Q(s, a) per replica.
    steps_ : ndarray of int64, shape (B,)
        Training transitions observed per replica (t - 1 of Algorithm 3).
    on_update : callable or None
        If set, called with an `UpdateRecord` after every update (diagnostics,
        such as `analysis` checking Proposition 2 on every update).

    References
    ----------
    Algorithms 1-3, eqs. (loss_function), (gradient), (decomp_error), (euge).
    """

    config: TEQLConfig
    numbers: ClassVar[dict[str, str]] = {
        **TensorAgent.numbers,
        **{field: field for field in ("alpha0", "kappa", "lam", "eps", "c", "bonus_unit",
                                      "tol", "max_inner")},
    }  # fmt: skip
    per_replica: ClassVar[frozenset[str]] = frozenset({*numbers, "epsilon_start", "rank"})

    def __init__(
        self,
        problem: Problem,
        config: TEQLConfig,
        streams: Sequence[AgentRandom],
        *,
        replica_settings: Mapping[str, Sequence[float | int]] | None = None,
    ) -> None:
        self.schedule = StepSchedule(config.alpha0, config.kappa)
        self.bound = None
        if config.bounded:
            v_max = problem.reward_bound / (1.0 - config.gamma)
            self.bound = FactorBound.from_value_bound(v_max, config.rank, len(problem.shape))
        self.on_update: Callable[[UpdateRecord], None] | None = None
        super().__init__(problem, config, streams, replica_settings=replica_settings)

    def _replica_rule(self, rule: StepRule) -> ReplicaRule:
        """Return the step's numbers per replica, F_max from each replica's gamma and rank."""
        values = super()._replica_rule(rule)
        if self.bound is not None:
            order, reward_bound = len(self.problem.shape), self.problem.reward_bound
            for replica, (gamma, rank) in enumerate(zip(values.gamma, values.rank, strict=True)):
                v_max = reward_bound / (1.0 - float(gamma))
                bound = FactorBound.from_value_bound(v_max, int(rank), order)
                values.f_max[replica] = bound.f_max
        return values

    def own_rule(self) -> StepRule:
        """EUGE (under epsilon-greedy when epsilon_start > 0) and the configured update."""
        config = self.config
        return StepRule(
            exploration="euge-epsilon" if config.epsilon_start > 0 else "euge",
            update=config.update, alpha0=config.alpha0, kappa=config.kappa, lam=config.lam,
            eps=config.eps, c=config.c, bonus_unit=config.bonus_unit, tol=config.tol,
            max_inner=config.max_inner,
            f_max=None if self.bound is None else self.bound.f_max,
            count_before_update=config.count_before_update, signed_delta=config.signed_delta,
            step_count=config.step_count, mode_scale=self.mode_scale,
        )  # fmt: skip

    def visit_table(self, engine: str) -> VisitTable:
        """N(s, a) and Delta Q(s, a), dense or sparse (``visit_storage``)."""
        return make_visit_table(
            self.replicas, self.n_states, self.n_actions, self.config.visit_storage,
            engine == "compiled",
        )  # fmt: skip

    @property
    def mode_scale(self) -> tuple[float, ...] | None:
        """rho_n of the footprint steps, or None when p = 0.

        rho_n = (|A| / |S|)^p on the action modes (|A| joint actions, |S| joint
        states; capped at 1), 1 on the state modes.
        """
        power = self.config.footprint_power
        if power == 0:
            return None
        share = min(1.0, self.n_actions / self.n_states) ** power
        first = len(self.problem.state_dims)
        return tuple(1.0 if mode < first else share for mode in range(len(self.problem.shape)))

    def divergence_remedies(self) -> list[str]:
        """Return TEQL's settings that keep Q finite: step size, gamma, stable rule, bounds."""
        remedies = ["a smaller step size 'alpha0'", "a smaller 'gamma'"]
        if self.config.update != "stable":
            remedies.append("the stable update (reading 'stable')")
        if not self.config.bounded:
            remedies.append("bounded iterates ('bounded': true)")
        return remedies

    def observe(self, batch: Transitions) -> None:
        """Learn from the batch (`rl.agents.tensor.step.learn`), then call `on_update` if set."""
        if not batch.active.any():
            return
        stats = self.engine_.observe(batch)
        if self.on_update is not None:
            self._report(batch, stats)

    def _report(self, batch: Transitions, stats: UpdateStats) -> None:
        """Call `on_update` with the `UpdateRecord` of the last update."""
        f_max = None if self.bound is None else self.bound.f_max
        record = UpdateRecord(
            self.flat_states(batch.states), self.flat_actions(batch.actions),
            np.array(stats.targets, dtype=np.float64), np.array(stats.before, dtype=np.float64),
            np.array(stats.after, dtype=np.float64), np.array(stats.visits).astype(np.int64),
            np.array(stats.step_size, dtype=np.float64), f_max, batch.active,
        )  # fmt: skip
        self.on_update(record)


SPEC = AgentSpec("teql", TEQLAgent, TEQLConfig)
"""What the runner needs of TEQL; its readings are `rl.agents.readings.READINGS["teql"]`."""
