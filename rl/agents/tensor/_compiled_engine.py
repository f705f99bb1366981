"""The compiled engine of the tensor agents (`rl.agents.tensor.state.Engine`): kernel arguments.

`CompiledEngine` builds, from the agent's `rl.agents.tensor.state.TensorState`,
the named tuples that `rl.agents.tensor._step_compiled` reads: `AgentArrays`
(the packed factors, counters, epsilon, the typed list of the replicas'
exploration generators, which shares their state with the Python objects so
that checkpoints and the reference engine see the same streams, and the record
of the last update and the EUGE bonus sums), `Settings` (with the state's
`rl.agents.tensor.state.ReplicaRule`, the step's numbers per replica, as
the one array it shares), `tensorq._compiled.RuleKind`, the visit table's
`rl.agents.tensor.visits.VisitArrays` and the kernels' working arrays
(`rl.agents.tensor._step_compiled.Scratch`), all allocated once in the
constructor, so that a step allocates nothing. The state's factors are
views of the one packed array (B, sum_n d_n, R) the kernels read
(`rl.agents.tensor.state.packed_factors`), so one compiled kernel serves any
number of modes.
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from rl.agents._explore_compiled import typed_generators
from rl.agents.base import Transitions
from rl.agents.tensor import _step_compiled as kernels
from rl.agents.tensor._step_compiled import EXPLORATION, AgentArrays, Settings, new_scratch
from rl.agents.tensor.state import (
    BonusShareMean,
    StepRule,
    TensorState,
    UpdateStats,
    packed_factors,
)
from rl.agents.tensor.visits import VisitArrays
from tensorq._compiled import RULES, RuleKind

_NO_TABLE = VisitArrays(*([np.zeros(0, np.int64)] * 3), np.zeros((0, 0), np.int64),
                        np.zeros((0, 0)), np.zeros(0, np.int64))  # fmt: skip


class _PlainArguments(NamedTuple):
    """`CompiledEngine`'s kernel arguments as plain tuples, in `observe_entry`'s order."""

    arrays: tuple
    settings: tuple
    rule: tuple
    table: tuple
    scratch: tuple


def kernel_settings(state: TensorState) -> tuple[Settings, RuleKind]:
    """Return the state's `StepRule`, numbers and mode sizes as the kernels read them.

    `Settings.values` is the state's packed `rl.agents.tensor.state.ReplicaRule`
    itself, so the kernels read the numbers the state holds now.
    """
    rule: StepRule = state.rule
    dims = np.array(state.state_dims + state.action_dims, dtype=np.int64)
    interval = rule.action_interval
    low, high = (np.zeros(1), np.ones(1)) if interval is None else map(np.array, interval)
    settings = Settings(
        dims=dims,
        offsets=np.concatenate([[0], np.cumsum(dims)[:-1]]).astype(np.int64),
        n_state=len(state.state_dims),
        n_states=int(state.n_states),
        explore=EXPLORATION[rule.exploration],
        values=state.values.packed,
        continuous=interval is not None,
        low=np.asarray(low, dtype=np.float64),
        high=np.asarray(high, dtype=np.float64),
        count_before_update=bool(rule.count_before_update),
        signed_delta=bool(rule.signed_delta),
        visits=state.visits is not None,
        entry_steps=rule.step_count == "entry",
        bonus_share=False,
    )
    kind = RuleKind(
        rule=RULES[rule.update],
        bounded=rule.f_max is not None,
        mode_scale=np.ones(len(dims)) if rule.mode_scale is None else np.array(rule.mode_scale),
    )
    return settings, kind


class CompiledEngine:
    """The compiled act, greedy and observe of one tensor agent (`rl.agents.tensor.state.Engine`).

    Parameters
    ----------
    state : rl.agents.tensor.state.TensorState
        Complete, on NumPy with float64 factors (packed here).
    """

    name = "compiled"

    def __init__(self, state: TensorState) -> None:
        self.state = state
        replicas, action_modes = state.replicas, len(state.action_dims)
        self._packed = packed_factors(state.factors)
        self._views: list[NDArray[np.float64]] = list(state.factors)
        self._no_greedy = np.zeros(replicas, dtype=bool)
        self._all = np.ones(replicas, dtype=bool)
        self._record = np.zeros((5, replicas))
        self.stats = UpdateStats(*self._record)
        """The last update's record (rows of inactive replicas are stale)."""
        self.bonus_shares = BonusShareMean(replicas)
        """The chosen EUGE actions' bonus shares (added only after `track_bonus_share`)."""
        self.tracks_bonus_share = False
        """Whether `act` adds the bonus shares (`track_bonus_share`)."""
        drawn = state.drawn
        if drawn is None:
            drawn = (np.zeros(replicas, dtype=bool), np.zeros((replicas, action_modes)))
        self._drawn_mask, self._drawn = drawn
        self.generators = typed_generators(state.generators)
        """The replicas' exploration generators as the kernels draw from them (shared state)."""
        self._constants = kernel_settings(state)
        self._plain_settings = tuple(map(kernels.as_plain, self._constants))
        settings = self._constants[0]
        self.scratch = new_scratch(settings.dims, settings.n_state, self._packed.shape[2])
        """The kernels' working arrays (`._step_compiled.Scratch`), overwritten by every call."""
        self._plain_scratch = kernels.as_plain(self.scratch)

    def settings(self) -> tuple[Settings, RuleKind]:
        """Return the state's constants as the kernels read them."""
        return self._constants

    def arrays(self) -> AgentArrays:
        """Return the state's arrays as the kernels read and write them.

        The factors are checked to still be views of the packed array (repacked if not).
        """
        state = self.state
        factors = state.factors
        if len(factors) != len(self._views) or not all(map(operator.is_, factors, self._views)):
            self._packed = packed_factors(factors)
            self._views = list(factors)
        return AgentArrays(
            self._packed, state.steps, state.epsilon, self._drawn, self._drawn_mask,
            self._record, self.bonus_shares.sums,
        )  # fmt: skip

    def track_bonus_share(self) -> None:
        """Make every later EUGE action add its bonus share to `bonus_shares`."""
        self.tracks_bonus_share = True
        settings, rule = self._constants
        self._constants = settings._replace(bonus_share=True), rule
        self._plain_settings = tuple(map(kernels.as_plain, self._constants))

    def bonus_share(self) -> NDArray[np.float64]:
        """Return each replica's mean EUGE bonus share since the last call, and start anew.

        The share of the chosen action's EUGE score that is the exploration bonus
        (`rl.agents.tensor.step.bonus_share`), over the replica's EUGE actions
        since the last call (`track_bonus_share` first); NaN for a replica that
        took none.
        """
        return self.bonus_shares.pop()

    def visit_arrays(self, room: int = 0) -> VisitArrays:
        """Return the visit table's arrays, with room for ``room`` new rows (empty without one)."""
        visits = self.state.visits
        if visits is None:
            return _NO_TABLE
        if room:
            visits.reserve(room)
        return visits.arrays()

    def _plain(self, room: int = 0) -> _PlainArguments:
        """Return the kernels' arguments as plain tuples (`._step_compiled.as_plain`)."""
        settings, rule = self._plain_settings
        arrays = kernels.as_plain(self.arrays())
        table = kernels.as_plain(self.visit_arrays(room))
        return _PlainArguments(arrays, settings, rule, table, self._plain_scratch)

    def act(
        self,
        states: NDArray[np.int64],
        active: NDArray[np.bool_],
        greedy: NDArray[np.bool_] | None = None,
    ) -> NDArray[np.int64]:
        """Return actions (B, D_A): explore where ``active & ~greedy``, argmax Q where greedy."""
        state = self.state
        actions = np.zeros((state.replicas, len(state.action_dims)), dtype=np.int64)
        plain = self._plain()
        kernels.act_entry(
            plain.arrays, self.generators, plain.settings, plain.table,
            np.ascontiguousarray(states, dtype=np.int64),
            np.ascontiguousarray(active, dtype=bool),
            self._no_greedy if greedy is None else np.ascontiguousarray(greedy, dtype=bool),
            actions, plain.scratch,
        )  # fmt: skip
        return actions

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
        arrays, settings, rule, table, scratch = self._plain(self.state.replicas)
        bad = kernels.observe_entry(arrays, settings, rule, table, kernels.as_plain(batch), scratch)
        if bad >= 0:
            raise self.divergence(bad)
        return self.stats

    def sync(self) -> None:
        """Nothing to do: the kernels write the state's own arrays."""

    def reload(self, factors: list[NDArray[np.float64]]) -> None:
        """Copy ``factors`` into the state's (packed) factors in place."""
        self.state.reload(factors)

    def divergence(self, replica: int) -> ValueError:
        """Return the error of replica ``replica``'s non-finite TD target."""
        return self.state.divergence(replica, float(self.stats.targets[replica]))
