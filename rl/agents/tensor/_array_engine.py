"""The array engine of the tensor agents: a training step as array operations on a backend.

`ArrayEngine` (`rl.agents.tensor.engine.Engine`, ``engine_.name == "array"``) runs
TEQL (every reading) and TLR on NumPy, PyTorch or JAX, on the CPU or a GPU
(the config's ``backend`` and ``device``): the factors (``agent.q_``, a
`tensorq.OnlineCP` of that backend), the visit table
(`rl.agents.tensor._visits_array.DeviceVisits`), the step counters and epsilon, the
EUGE scores of eq. (euge), the TD targets and the updates (`tensorq.bcd_update`
and `tensorq.normalized_step`, run on the backend) all stay on the device,
batched over the B replicas: no Python loop over replicas or actions. What
crosses to the host each step is what the environments need: the states come
in, the actions (and the released reading's continuous draws) go out, and one
flag says whether a TD target overflowed.

Randomness is the reference's: each replica's exploration doubles come from
its own generator, in the order the reference draws them (epsilon's test,
then the continuous action components), through
`rl.agents.tensor._array_backend.UniformStreams`. Two draws differ from the
reference, which calls ``Generator.integers`` there: an exact tie among
maximizers is broken by one double (``floor(u k)`` among k maximizers), and a
discrete random action (a problem without a continuous action interval) is
``floor(u |A|)``. Until the first such draw the actions equal the reference
engine's (float64; ``tests/rl/test_array_engine.py``); after it the two runs
are different samples of the same process.

The host copies (``agent.steps_``, ``agent.epsilon_``, ``agent.visits_`` and
the generators' states) are brought up to date by `ArrayEngine.sync`, which
`TensorAgent.state_dict` calls, so checkpoints keep their format and resume
exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from rl.agents.base import Transitions
from rl.agents.tensor import _visits_array as visits_ops
from rl.agents.tensor._array_backend import (
    ArrayNamespace,
    UniformStreams,
    array_namespace,
    read_uniform,
)
from rl.agents.tensor._visits_array import DeviceVisits, VisitState
from rl.agents.tensor.engine import StepRule, UpdateStats
from tensorq import OnlineCP
from tensorq.functional import pure_subtensor, pure_update, update_setting

if TYPE_CHECKING:
    from rl.agents.tensor.agent import TensorAgent

Array = Any


def ravel(index: Array, dims: Sequence[int]) -> Array:
    """Return the flat (C-order) indices of the rows of ``index`` (B, len(dims)).

    As ``numpy.ravel_multi_index``, on any backend.
    """
    flat = index[:, 0]
    for k, size in enumerate(dims[1:], start=1):
        flat = flat * size + index[:, k]
    return flat


def unravel(space: ArrayNamespace, flat: Array, dims: Sequence[int]) -> Array:
    """Return the index vectors (B, len(dims)) of the flat indices ``flat`` (``unravel_index``)."""
    columns = []
    for size in reversed(dims):
        columns.append(flat % size)
        flat = flat // size
    return space.ops.stack(columns[::-1], axis=1)


class ArrayEngine:
    """The act, greedy and observe of one tensor agent as array operations on its backend.

    Each is a host wrapper around a pure function of the device arrays (the
    ``_*_core`` methods), compiled once by ``jax.jit`` on JAX (factors and
    visit table donated, so XLA updates them in place) and run eagerly on
    NumPy and PyTorch (in place).

    Parameters
    ----------
    agent : rl.agents.tensor.agent.TensorAgent
        Its config's ``backend`` and ``device`` say where to run; its factors
        (``q_``) are moved there now, the rest on first use (the agent's
        `StepRule` is complete only once the agent is built).
    """

    name = "array"

    def __init__(self, agent: TensorAgent) -> None:
        config = agent.config
        self.agent = agent
        self.space = space = array_namespace(config.backend, config.device)
        agent.q_ = OnlineCP([space.put(np.array(f)) for f in agent.q_.factors])
        self.ids = space.put(np.arange(agent.replicas), space.ops.int64)
        self._loaded = False
        self.rule: StepRule | None = None
        self._pending: tuple[Array, Array] | None = None  # last targets, all finite (unchecked)

    # ------------------------------------------------------------------ state

    def _ready(self) -> StepRule:
        """Load the device state from the agent's host copies where needed; return the rule."""
        if self.rule is None:
            self.rule = rule = self.agent.step_rule()
            space = self.space
            bound = getattr(self.agent, "bound", None)
            self._setting = update_setting(
                rule.update, lam=rule.lam, eps=rule.eps, tol=rule.tol,
                max_inner=rule.max_inner, bound=bound, mode_scale=rule.mode_scale,
            )  # fmt: skip
            self._greedy = space.compile(self._greedy_core)
            self._act = space.compile(self._act_core)
            self._targets = space.compile(self._targets_core)
            self._update = space.compile(self._update_core, donate=(0, 2))
            self._pack = space.compile(self._pack_core)
        if not self._loaded:
            agent, space = self.agent, self.space
            self.steps = space.put(agent.steps_, space.ops.int64)
            self.epsilon = space.put(agent.epsilon_, space.ops.float64)
            self.visits: DeviceVisits | None = None
            if agent.visits_ is not None:
                self.visits = DeviceVisits(
                    space, agent.replicas, agent.n_states, agent.n_actions, agent.config.device
                )
                self.visits.restore(agent.visits_)
            epsilon = self.rule.exploration != "euge"
            per_step = 1 + (1 + len(agent.problem.action_dims) if epsilon else 0)
            self.streams = UniformStreams(agent.exploration_generators(), space, per_step)
            self._loaded = True
        return self.rule

    def sync(self) -> None:
        """Bring the agent's host copies up to date (steps, epsilon, visits, generator states)."""
        if not self._loaded:
            return
        agent, host = self.agent, self.space.host
        self.streams.sync()
        agent.steps_[...] = host(self.steps)
        agent.epsilon_[...] = host(self.epsilon)
        if self.visits is not None:
            self.visits.save(agent.visits_)

    def reload(self, factors: list[NDArray[np.float64]]) -> None:
        """Take ``factors`` and, on next use, the agent's host copies (after a checkpoint load)."""
        self.agent.q_.factors[:] = [self.space.put(f) for f in factors]
        self._loaded = False

    # ------------------------------------------------------------------ acting

    def act(
        self,
        states: NDArray[np.int64],
        active: NDArray[np.bool_],
        greedy: NDArray[np.bool_] | None = None,
    ) -> NDArray[np.int64]:
        """Explore where ``active & ~greedy``, argmax Q where ``greedy``; (B, D_A) on the host."""
        drawn = self.agent.continuous_actions_
        if drawn is not None:
            drawn.mask[:] = False
        space = self.space
        flat, explored, values = self.act_arrays(space.put(states, space.ops.int64), active, greedy)
        if drawn is not None and explored is not None:
            mask = np.asarray(space.host(explored), dtype=bool)
            drawn.mask[:] = mask
            if mask.any():
                drawn.values[mask] = np.stack([space.host(v) for v in values], axis=-1)[mask]
        return self.agent.action_vectors(np.asarray(space.host(flat), dtype=np.int64))

    def act_arrays(
        self, states: Array, active: NDArray[np.bool_], greedy: NDArray[np.bool_] | None = None
    ) -> tuple[Array, Array | None, tuple[Array, ...]]:
        """`act` on the device: the state index vectors (B, D_S) are a backend array there.

        Returns
        -------
        flat : backend int64 array, shape (B,)
            The flat joint actions.
        explored : backend bool array, shape (B,), or None
            The replicas that took a random action (None: no replica explored).
        drawn : tuple of backend float64 arrays, shape (B,) each
            The released reading's continuous random actions, one per action
            component, executed where ``explored`` (empty without continuous draws).
        """
        self._ready()
        space = self.space
        factors = tuple(self.agent.q_.factors)
        exploring = active if greedy is None else active & ~greedy
        if not exploring.any():
            return self._greedy(factors, self.ids, states), None, ()
        streams = self.streams
        streams.reserve()
        greedy = np.zeros_like(active) if greedy is None else greedy
        flags = space.put(np.stack([exploring, greedy], axis=1).astype(np.int64))
        flat, explored, drawn, streams.cursor = self._act(
            factors, self.ids, None if self.visits is None else self.visits.table, self.epsilon,
            streams.buffer, streams.cursor, states, flags,
        )  # fmt: skip
        return flat, explored, drawn

    def explore(self, states: NDArray[np.int64], active: NDArray[np.bool_]) -> NDArray[np.int64]:
        """Exploratory actions of the active replicas (B, D_A)."""
        return self.act(states, active)

    def greedy(self, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """Return the first maximizer of Q per replica; no randomness."""
        replicas = self.agent.replicas
        return self.act(states, np.zeros(replicas, bool), np.ones(replicas, bool))

    def _values(self, factors: tuple[Array, ...], ids: Array, states: Array) -> Array:
        """Q(s, a) for every joint action, (B, |A|)."""
        agent = self.agent
        values = pure_subtensor(factors, ids, states, tuple(agent.problem.action_dims))
        return values.reshape(agent.replicas, agent.n_actions)

    def _greedy_core(self, factors: tuple[Array, ...], ids: Array, states: Array) -> Array:
        return self.space.xp.argmax(self._values(factors, ids, states), axis=-1)

    def _scores(self, table: VisitState, ids: Array, values: Array, flat_states: Array) -> Array:
        """EU_t(s, a) of eq. (euge), as `rl.agents.tensor.euge.euge_scores` computes it."""
        space = self.space
        rows = visits_ops.visit_rows(space, table, ids, flat_states)
        counts, delta = visits_ops.state_rows(space, table, rows)
        counts = space.astype(counts, space.ops.float64)
        totals = counts.sum(axis=-1)[:, None]
        log_total = space.xp.log(space.ops.clip(totals, 1.0, math.inf))
        bonus = delta + self.rule.bonus_unit * space.ops.sqrt(log_total / (counts + 1.0))
        return values + self.rule.c * bonus

    def _act_core(
        self, factors: tuple[Array, ...], ids: Array, table: VisitState | None, epsilon: Array,
        buffer: Array, cursor: Array, states: Array, flags: Array,
    ) -> tuple[Array, Array, tuple[Array, ...], Array]:  # fmt: skip
        """Algorithm 2 (EUGE) or epsilon-greedy with the replicas' own doubles.

        ``states`` holds the state index vectors, ``flags`` the exploring and
        greedy flags as two columns. Returns the flat actions, which replicas
        took a random action, the continuous draws (one (B,) array per action
        component) and the cursor.
        """
        rule, space = self.rule, self.space
        ops, xp, int64 = space.ops, space.xp, space.ops.int64
        exploring, greedy = flags[:, 0] > 0, flags[:, 1] > 0
        values = self._values(factors, ids, states)
        first = xp.argmax(values, axis=-1)
        if table is None:
            scores = values
        else:
            flat_states = ravel(states, self.agent.problem.state_dims)
            scores = self._scores(table, ids, values, flat_states)
        used = space.astype(exploring, int64) * 0
        explored = exploring & False
        random_flat, drawn = first, ()
        if rule.exploration != "euge":
            explored = exploring & (read_uniform(space, buffer, cursor) < epsilon)
            random_flat, drawn = self._random_actions(buffer, cursor)
            width = max(len(drawn), 1)
            used = space.astype(exploring, int64) + width * space.astype(explored, int64)
        best = xp.amax(scores, axis=-1)
        is_best = scores == best[:, None]
        ties = is_best.sum(axis=-1)
        tied = exploring & ~explored & (ties > 1)
        pick = space.astype(xp.floor(read_uniform(space, buffer, cursor, used) * ties), int64)
        rank = xp.cumsum(space.astype(is_best, int64), axis=-1) - 1
        tie_choice = xp.argmax(space.astype(is_best & (rank == pick[:, None]), int64), axis=-1)
        choice = ops.where(tied, tie_choice, xp.argmax(scores, axis=-1))
        flat = ops.where(greedy, first, ops.where(explored, random_flat, choice))
        return flat, explored, drawn, cursor + used + space.astype(tied, int64)

    def _random_actions(self, buffer: Array, cursor: Array) -> tuple[Array, tuple[Array, ...]]:
        """Every replica's random joint action and continuous draws (used where it explores)."""
        agent, space = self.agent, self.space
        int64 = space.ops.int64
        if agent.continuous_actions_ is None:
            index = space.xp.floor(read_uniform(space, buffer, cursor, 1) * agent.n_actions)
            return space.ops.clip(space.astype(index, int64), 0, agent.n_actions - 1), ()
        low, high = agent.action_interval_
        flat, drawn = None, []
        for k, size in enumerate(agent.problem.action_dims):  # components, not actions
            value = low[k] + (high[k] - low[k]) * read_uniform(space, buffer, cursor, 1 + k)
            index = space.xp.round((value - low[k]) / (high[k] - low[k]) * (size - 1))
            index = space.astype(space.ops.clip(index, 0.0, size - 1.0), int64)
            flat = index if flat is None else flat * size + index
            drawn.append(value)
        return flat, tuple(drawn)

    # ------------------------------------------------------------------ learning

    def observe(self, batch: Transitions) -> UpdateStats:
        """Learn from ``batch`` on the device; return the update's record (backend arrays).

        Raises
        ------
        ValueError
            If a TD target is not finite (nothing has changed then).
        """
        columns = [
            batch.states, batch.actions, batch.next_states,
            batch.terminated[:, None], batch.active[:, None],
        ]  # fmt: skip
        space = self.space
        packed = space.put(np.concatenate(columns, axis=1, dtype=np.int64))  # one copy in
        return self._learn(packed, space.put(np.asarray(batch.rewards, dtype=np.float64)))

    def observe_arrays(
        self,
        states: Array,
        flat_actions: Array,
        rewards: Array,
        next_states: Array,
        terminated: Array,
        active: NDArray[np.bool_],
        valid: Array,
    ) -> UpdateStats | None:
        """`observe` on the device, asking the host nothing: see `check_targets`.

        Every argument but ``active`` is a backend array on the device;
        ``flat_actions`` are `act_arrays`'s flat joint actions. ``valid`` (a
        device bool scalar) and the finiteness of every TD target decide
        together whether the update happens: where either fails nothing
        changes, and the caller raises (its own error where ``valid`` is False,
        else `check_targets`'s). Returns None when no replica is active.
        """
        if not active.any():
            return None
        self._ready()
        space = self.space
        packed = self._pack(states, flat_actions, next_states, terminated, space.put(active))
        return self._learn(packed, rewards, valid)

    def check_targets(self) -> None:
        """Raise `observe_arrays`'s divergence error, if its last TD targets were not all finite.

        One host read, which `observe_arrays` leaves out so that a step asks the
        device once.

        Raises
        ------
        ValueError
            The agent's divergence error, naming the first replica whose target is not finite.
        """
        if self._pending is None:
            return
        (targets, finite), self._pending = self._pending, None
        space = self.space
        if not bool(space.host(finite)):
            values = np.asarray(space.host(targets))
            replica = int(np.flatnonzero(~np.isfinite(values))[0])
            raise self.agent.divergence(replica, float(values[replica]))

    def _pack_core(
        self, states: Array, flat_actions: Array, next_states: Array, terminated: Array,
        active: Array,
    ) -> Array:  # fmt: skip
        """Pack `observe_arrays`'s device arrays into the columns of `_learn`."""
        space = self.space
        int64 = space.ops.int64
        columns = [
            states, unravel(space, flat_actions, self.agent.problem.action_dims), next_states,
            space.astype(terminated, int64)[:, None], space.astype(active, int64)[:, None],
        ]  # fmt: skip
        return space.xp.concat(columns, axis=1)

    def _learn(self, packed: Array, rewards: Array, valid: Array | None = None) -> UpdateStats:
        """TD targets and Algorithm 1 on the packed columns (`_columns`).

        Without ``valid`` (`observe`) the targets are checked at once (`check_targets`);
        with it (`observe_arrays`) the check waits, and the update is skipped unless
        ``valid`` holds and every target is finite.
        """
        self._ready()
        agent = self.agent
        factors = tuple(agent.q_.factors)
        targets, finite = self._targets(factors, self.ids, packed, rewards)
        self._pending = (targets, finite)
        if valid is None:
            self.check_targets()
        else:
            finite = finite & valid
        table = None if self.visits is None else self.visits.reserve()
        factors, table, self.steps, self.epsilon, stats = self._update(
            factors, self.ids, table, self.steps, self.epsilon, packed, targets, finite
        )
        agent.q_.factors[:] = factors
        if self.visits is not None:
            self.visits.table = table
        return UpdateStats(*stats)

    def _columns(self, packed: Array) -> tuple[Array, ...]:
        """Split the packed columns of `_learn`: index (s, a), next states, terminated, active."""
        state_modes = len(self.agent.problem.state_dims)
        modes = state_modes + len(self.agent.problem.action_dims)
        index, next_states = packed[:, :modes], packed[:, modes : modes + state_modes]
        terminated, active = packed[:, -2] > 0, packed[:, -1] > 0
        return index, next_states, terminated, active

    def _targets_core(
        self, factors: tuple[Array, ...], ids: Array, packed: Array, rewards: Array
    ) -> tuple[Array, Array]:
        """TD targets r + gamma max_a' Q(s', a') (Algorithm 1, line 3); whether all are finite."""
        space = self.space
        _, next_states, terminated, *_ = self._columns(packed)
        bootstrap = space.xp.amax(self._values(factors, ids, next_states), axis=-1)
        targets = rewards + self.agent.config.gamma * space.ops.where(terminated, 0.0, bootstrap)
        return targets, space.xp.all(space.xp.isfinite(targets))

    def _update_core(
        self, factors: tuple[Array, ...], ids: Array, table: VisitState | None, steps: Array,
        epsilon: Array, packed: Array, targets: Array, proceed: Array,
    ) -> tuple[Any, ...]:  # fmt: skip
        """One update per active replica (Algorithm 1 with the visit table of Algorithm 3).

        ``proceed`` (a bool scalar) False makes every replica inactive: nothing changes.
        """
        rule, space, config = self.rule, self.space, self.agent.config
        index, _, terminated, active = self._columns(packed)
        active = active & proceed
        ops, int64, float64 = space.ops, space.ops.int64, space.ops.float64
        if table is None:  # TLR: one normalized step with the constant step size
            step = targets * 0.0 + rule.alpha0
            counts = targets * 0.0
            vectors: tuple[Array, ...] = (targets, step)
        else:
            problem = self.agent.problem
            states = ravel(index[:, : len(problem.state_dims)], problem.state_dims)
            actions = ravel(index[:, len(problem.state_dims) :], problem.action_dims)
            rows = visits_ops.visit_rows(space, table, ids, states)
            table, rows = visits_ops.insert(
                space, table, ids, states, rows, active, self.agent.n_states
            )
            if rule.count_before_update:
                table = visits_ops.increment(space, table, rows, actions, active)
            counts = space.astype(table.counts[ops.where(rows >= 0, rows, 0), actions], float64)
            clock = counts if rule.step_count == "entry" else space.astype(steps + 1, float64)
            step = rule.alpha0 / (1.0 + rule.kappa * clock)
            vectors = (targets, counts, step)
        factors, before, after, _ = pure_update(
            ops, self._setting, factors, ids, index, active, vectors
        )
        if table is not None:
            change = before - after
            delta = change if rule.signed_delta else ops.abs(change)
            table = visits_ops.set_delta(space, table, rows, actions, delta, active)
            if not rule.count_before_update:
                table = visits_ops.increment(space, table, rows, actions, active)
        steps = steps + space.astype(active, int64)
        decayed = ops.clip(epsilon * config.epsilon_decay, config.epsilon_min, math.inf)
        epsilon = ops.where(active & ~terminated, decayed, epsilon)
        return tuple(factors), table, steps, epsilon, (targets, before, after, counts, step)
