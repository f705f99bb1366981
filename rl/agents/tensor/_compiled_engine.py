"""The compiled engine of the tensor agents (`rl.agents.tensor.engine`): kernel arguments, once.

`CompiledEngine` builds, from the agent's `rl.agents.tensor.engine.StepRule`, the
named tuples that `rl.agents.tensor._step_compiled` reads: `AgentArrays` (the packed
factors, counters, epsilon, the typed list of the replicas' exploration
generators, which shares their state with the Python objects so that
checkpoints and the reference path see the same streams, and the record of the
last update), `Settings`, `tensorq._compiled.RuleSettings` and the visit
table's `rl.agents.tensor.visits.VisitArrays`, and the kernels' working arrays
(`rl.agents.tensor._step_compiled.Scratch`, allocated once here, so that a
step allocates nothing). The agent's ``q_.factors`` are views
of the one packed array (B, sum_n d_n, R) the kernels read (`packed_factors`),
so one compiled kernel serves any number of modes.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numpy.typing import NDArray

from rl.agents._explore_compiled import typed_generators
from rl.agents.base import Transitions
from rl.agents.tensor import _step_compiled as _kernels
from rl.agents.tensor._step_compiled import EXPLORATION, AgentArrays, Scratch, Settings, new_scratch
from rl.agents.tensor.engine import UpdateStats, copy_factors, packed_factors
from rl.agents.tensor.euge import BonusShareMean
from rl.agents.tensor.visits import VisitArrays
from tensorq._compiled import RULES, RuleSettings

if TYPE_CHECKING:
    from rl.agents.tensor.agent import TensorAgent


_NO_TABLE = VisitArrays(*([np.zeros(0, np.int64)] * 3), np.zeros((0, 0), np.int64),
                        np.zeros((0, 0)), np.zeros(0, np.int64))  # fmt: skip


class _PlainArguments(NamedTuple):
    """`CompiledEngine`'s kernel arguments as plain tuples, in `observe_entry`'s order."""

    arrays: tuple
    settings: tuple
    rule: tuple
    table: tuple
    scratch: tuple


class CompiledEngine:
    """The compiled act, greedy and observe of one tensor agent (`rl.agents.tensor.engine.Engine`).

    Parameters
    ----------
    agent : rl.agents.tensor.agent.TensorAgent
        Supplies the factors (``q_``, packed here), ``problem``, ``steps_``,
        ``epsilon_``, the exploration generators, ``visits_`` (None: no counts,
        no Delta Q) and its `rl.agents.tensor.engine.StepRule` (read on first use,
        once the agent is fully built).
    """

    name = "compiled"

    def __init__(self, agent: TensorAgent) -> None:
        self.agent = agent
        replicas, action_modes = agent.replicas, len(agent.problem.action_dims)
        packed_factors(agent.q_.factors)
        self._views: list[NDArray[np.float64]] = []
        self._packed = np.zeros((0, 0, 0))
        self._no_greedy = np.zeros(replicas, dtype=bool)
        self._all = np.ones(replicas, dtype=bool)
        self._record = np.zeros((5, replicas))
        self.stats = UpdateStats(*self._record)
        """The last update's record (rows of inactive replicas are stale)."""
        self.bonus_shares = BonusShareMean(replicas)
        """The chosen EUGE actions' bonus shares (added only after `track_bonus_share`)."""
        self.tracks_bonus_share = False
        """Whether `act` adds the bonus shares (`track_bonus_share`)."""
        self._scratch: Scratch | None = None
        drawn = agent.continuous_actions_
        if drawn is None:
            drawn = (np.zeros(replicas, dtype=bool), np.zeros((replicas, action_modes)))
        self._drawn_mask, self._drawn = drawn
        self.generators = typed_generators(agent.exploration_generators())
        """The replicas' exploration generators as the kernels draw from them (shared state)."""
        self._constants: tuple[Settings, RuleSettings] | None = None
        self._plain_settings: tuple[tuple, tuple] | None = None

    def settings(self) -> tuple[Settings, RuleSettings]:
        """Return the agent's constants as the kernels read them (built on first use)."""
        if self._constants is None:
            self._constants = self._build_settings()
        return self._constants

    def _build_settings(self) -> tuple[Settings, RuleSettings]:
        agent = self.agent
        config, problem, rule = agent.config, agent.problem, agent.step_rule()
        dims = np.array(problem.shape, dtype=np.int64)
        interval = agent.action_interval_
        low, high = interval if interval is not None else (np.zeros(1), np.ones(1))
        settings = Settings(
            dims=dims,
            offsets=np.concatenate([[0], np.cumsum(dims)[:-1]]).astype(np.int64),
            n_state=len(problem.state_dims),
            n_states=int(agent.n_states),
            explore=EXPLORATION[rule.exploration],
            c=float(rule.c),
            bonus_unit=float(rule.bonus_unit),
            continuous=bool(config.continuous_random_actions),
            low=low,
            high=high,
            gamma=float(config.gamma),
            alpha0=float(rule.alpha0),
            kappa=float(rule.kappa),
            lam=float(rule.lam),
            eps=float(rule.eps),
            epsilon_decay=float(config.epsilon_decay),
            epsilon_min=float(config.epsilon_min),
            count_before_update=bool(rule.count_before_update),
            signed_delta=bool(rule.signed_delta),
            visits=agent.visits_ is not None,
            entry_steps=rule.step_count == "entry",
            bonus_share=self.tracks_bonus_share,
        )
        f_max = rule.f_max
        rule_settings = RuleSettings(
            rule=RULES[rule.update],
            tol=float(rule.tol),
            max_inner=int(rule.max_inner),
            f_max=0.0 if f_max is None else float(f_max),
            bounded=f_max is not None,
            mode_scale=np.ones(len(dims)) if rule.mode_scale is None else np.array(rule.mode_scale),
        )
        return settings, rule_settings

    def arrays(self) -> AgentArrays:
        """Return the agent's arrays as the kernels read and write them.

        The factors are checked to still be views of the packed array (repacked if not).
        """
        agent = self.agent
        factors = agent.q_.factors
        if len(factors) != len(self._views) or not all(map(operator.is_, factors, self._views)):
            self._packed = packed_factors(factors)
            self._views = list(factors)
        return AgentArrays(
            self._packed, agent.steps_, agent.epsilon_, self._drawn, self._drawn_mask,
            self._record, self.bonus_shares.sums,
        )  # fmt: skip

    def scratch(self) -> Scratch:
        """Return the kernels' working arrays (`._step_compiled.Scratch`, built on first use)."""
        if self._scratch is None:
            settings = self.settings()[0]
            self._scratch = new_scratch(
                settings.dims, settings.n_state, self.arrays().factors.shape[2]
            )
        return self._scratch

    def track_bonus_share(self) -> None:
        """Make every later EUGE action add its bonus share to `bonus_shares`."""
        self.tracks_bonus_share = True
        if self._constants is not None:
            settings, rule = self._constants
            self._constants = settings._replace(bonus_share=True), rule
            self._plain_settings = None

    def bonus_share(self) -> NDArray[np.float64]:
        """Return each replica's mean EUGE bonus share since the last call, and start anew.

        The share of the chosen action's EUGE score that is the exploration bonus
        (`rl.agents.tensor.euge.bonus_share`), over the replica's EUGE actions
        since the last call (`track_bonus_share` first); NaN for a replica that
        took none.
        """
        return self.bonus_shares.pop()

    def visit_arrays(self, room: int = 0) -> VisitArrays:
        """Return the visit table's arrays, with room for ``room`` new rows (empty without one)."""
        visits = self.agent.visits_
        if visits is None:
            return _NO_TABLE
        if room:
            visits.reserve(room)
        return visits.arrays()

    def _plain(self, room: int = 0) -> _PlainArguments:
        """Return the kernels' arguments as plain tuples (`._step_compiled.as_plain`)."""
        if self._plain_settings is None:
            self._plain_settings = tuple(map(_kernels.as_plain, self.settings()))
        settings, rule = self._plain_settings
        arrays = _kernels.as_plain(self.arrays())
        table = _kernels.as_plain(self.visit_arrays(room))
        return _PlainArguments(arrays, settings, rule, table, _kernels.as_plain(self.scratch()))

    def act(
        self,
        states: NDArray[np.int64],
        active: NDArray[np.bool_],
        greedy: NDArray[np.bool_] | None = None,
    ) -> NDArray[np.int64]:
        """Return actions (B, D_A): explore where ``active & ~greedy``, argmax Q where greedy."""
        agent = self.agent
        actions = np.zeros((agent.replicas, len(agent.problem.action_dims)), dtype=np.int64)
        plain = self._plain()
        _kernels.act_entry(
            plain.arrays, self.generators, plain.settings, plain.table,
            np.ascontiguousarray(states, dtype=np.int64),
            np.ascontiguousarray(active, dtype=bool),
            self._no_greedy if greedy is None else np.ascontiguousarray(greedy, dtype=bool),
            actions, plain.scratch,
        )  # fmt: skip
        return actions

    def explore(self, states: NDArray[np.int64], active: NDArray[np.bool_]) -> NDArray[np.int64]:
        """Exploratory actions of the active replicas (B, D_A)."""
        return self.act(states, active)

    def greedy(self, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """Return the first maximizer of Q per replica; no randomness."""
        return self.act(states, self._all, self._all)

    def observe(self, batch: Transitions) -> UpdateStats:
        """Learn from ``batch``; return the record of the update (`stats`).

        Raises
        ------
        ValueError
            If an active replica's TD target is not finite (nothing has changed then).
        """
        batch = Transitions(
            np.ascontiguousarray(batch.states, dtype=np.int64),
            np.ascontiguousarray(batch.actions, dtype=np.int64),
            np.ascontiguousarray(batch.rewards, dtype=np.float64),
            np.ascontiguousarray(batch.next_states, dtype=np.int64),
            np.ascontiguousarray(batch.terminated, dtype=bool),
            np.ascontiguousarray(batch.active, dtype=bool),
        )
        arrays, settings, rule, table, scratch = self._plain(self.agent.replicas)
        bad = _kernels.observe_entry(
            arrays, settings, rule, table, _kernels.as_plain(batch), scratch
        )
        if bad >= 0:
            raise self.divergence(bad)
        return self.stats

    def sync(self) -> None:
        """Nothing to do: the kernels write the agent's own arrays."""

    def reload(self, factors: list[NDArray[np.float64]]) -> None:
        """Copy ``factors`` into the agent's (packed) factors in place."""
        copy_factors(self.agent, factors)

    def divergence(self, replica: int) -> ValueError:
        """Return the error of replica ``replica``'s non-finite TD target."""
        return self.agent.divergence(replica, float(self.stats.targets[replica]))
