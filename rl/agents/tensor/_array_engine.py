"""The array engine of the tensor agents: `rl.agents.tensor.step` run on a backend.

`ArrayEngine` (`rl.agents.tensor.state.Engine`) runs TEQL (every reading)
and TLR as the array code of `rl.agents.tensor.step`, batched over the B
replicas, with no Python loop over replicas or actions, on the
`rl.agents.tensor.state.TensorState` it is given:

- ``name="reference"``: on NumPy, each replica drawing from its own generator
  as the paper's step is written (`rl.agents.tensor._array_backend.GeneratorDraws`):
  the reference engine, which the compiled engine is tested against;
- ``name="array"``: on the state's ``backend`` (NumPy, PyTorch, JAX) and
  ``device`` (CPU or GPU), with buffered doubles
  (`rl.agents.tensor._array_backend.UniformStreams`). The factors, the visit table
  (`rl.agents.tensor._visits_array.device_visits`: paged, or hashed for a grid as
  large as Highway's), the step counters and
  epsilon stay on the device; what crosses to the host each step is what the
  environments need: the states come in, the actions (and the released
  reading's continuous draws) go out, and one flag says whether a TD target
  overflowed.

Both take each replica's exploration doubles from its own generator in the
reference's order; the array engine breaks an exact tie among k maximizers by
one double (``floor(u k)``) and draws a discrete random action as
``floor(u |A|)``, where the reference calls ``Generator.integers``. Until the
first such draw the two take the same actions (float64;
``tests/rl/test_array_engine.py``); after it the runs are different samples of
the same process.

Once asked (`ArrayEngine.track_bonus_share`), an engine of a EUGE agent
also adds the share of each exploring replica's chosen action's score that is
the bonus (`rl.agents.tensor.step.bonus_share`) to `ArrayEngine.bonus_shares`
on the host: one more read from the device per step, paid only then.

Off the host the state's counters, epsilon and visit table are brought up to
date by `ArrayEngine.sync`, which `rl.agents.tensor.agent.TensorAgent` calls
before it reads them, so checkpoints keep their format and resume exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from rl.agents.base import Transitions
from rl.agents.tensor import _visits_array as visits_ops
from rl.agents.tensor import step
from rl.agents.tensor._array_backend import GeneratorSource, UniformStreams
from rl.agents.tensor._visits_array import VisitState
from rl.agents.tensor.state import BonusShareMean, ReplicaRule, TensorState, UpdateStats
from tensorq._backend import array_namespace
from tensorq.functional import update_setting

Array = Any


class ArrayEngine:
    """The act, greedy and observe of one tensor agent, as `rl.agents.tensor.step` on a backend.

    Each is a host wrapper around a pure function of the device arrays (the
    ``_*_core`` methods), compiled once by ``jax.jit`` on JAX (factors and
    visit table donated, so XLA updates them in place) and run eagerly on
    NumPy and PyTorch (in place).

    Parameters
    ----------
    state : rl.agents.tensor.state.TensorState
        Complete; its factors are on the backend and device already.
    name : {"array", "reference"}
        ``"reference"``: NumPy, with each replica's own generator draws.
    """

    def __init__(self, state: TensorState, name: str = "array") -> None:
        self.name = name
        self.state = state
        self.space = space = array_namespace(state.backend, state.device)
        self.ids = space.put(np.arange(state.replicas), space.ops.int64)
        self._pending: tuple[Array, Array] | None = None  # last targets, all finite (unchecked)
        self.bonus_shares = BonusShareMean(state.replicas)
        """The chosen EUGE actions' bonus shares (added only after `track_bonus_share`)."""
        self.tracks_bonus_share = False
        """Whether `act` adds the bonus shares (`track_bonus_share`)."""
        self._load()

    def _compile(self) -> None:
        """Read the state's numbers per replica (`numbers`, the update's setting); compile.

        A number every replica shares enters as a Python float, as it did
        before settings could differ, so that a uniform batch runs the same
        code; one that differs enters as an array (B,) on the device.
        """
        space, rule, values = self.space, self.state.rule, self.state.values
        numbers = {}
        for field in values._fields:
            uniform = values.uniform(field)
            numbers[field] = uniform if uniform is not None else space.put(getattr(values, field))
        self.numbers = ReplicaRule(**numbers)
        """The step's numbers: a float where the replicas share one, else a device array (B,)."""
        max_inner = values.max_inner.astype(np.int64)
        limits = None
        if values.uniform("max_inner") is None:
            limits = space.put(max_inner, space.ops.int64)
        components = None
        rank = self.state.factors[0].shape[-1]
        if values.uniform("rank") != rank:
            live = np.arange(rank) < values.rank[:, None]
            components = space.put(live.astype(np.int64), space.ops.int64) > 0
        f_max = self.numbers.f_max if rule.f_max is not None else None
        self._setting = update_setting(
            rule.update, lam=self.numbers.lam, eps=self.numbers.eps, tol=self.numbers.tol,
            max_inner=int(max_inner.max()), f_max=f_max, mode_scale=rule.mode_scale,
            limits=limits, components=components,
        )  # fmt: skip
        self._greedy = space.compile(self._greedy_core)
        self._act = space.compile(self._act_core)
        self._targets = space.compile(self._targets_core)
        self._update = space.compile(self._update_core, donate=(0, 2))
        self._pack = space.compile(self._pack_core)

    # ------------------------------------------------------------------ state

    def _load(self) -> None:
        """Take the state's counters, epsilon, visits, generators and numbers onto the device."""
        state, space = self.state, self.space
        self._compile()
        if space.on_host:
            self.steps, self.epsilon = state.steps, state.epsilon
        else:
            self.steps = space.put(state.steps, space.ops.int64)
            self.epsilon = space.put(state.epsilon, space.ops.float64)
        self.visits: visits_ops.DeviceVisits | visits_ops.HashedDeviceVisits | None = None
        if state.visits is not None:
            self.visits = visits_ops.device_visits(
                space, state.replicas, state.n_states, state.n_actions, state.device
            )
            self.visits.restore(state.visits)
        if self.name == "reference":
            self.draws: GeneratorSource | UniformStreams = GeneratorSource(state.generators)
        else:
            epsilon = state.rule.exploration != "euge"
            per_step = 1 + (1 + len(state.action_dims) if epsilon else 0)
            self.draws = UniformStreams(state.generators, space, per_step)

    def sync(self) -> None:
        """Bring the state's host copies up to date (steps, epsilon, visits, generator states)."""
        state, host = self.state, self.space.host
        self.draws.sync()
        if not self.space.on_host:
            state.steps[...] = host(self.steps)
            state.epsilon[...] = host(self.epsilon)
        if self.visits is not None:
            self.visits.save(state.visits)

    def reload(self, factors: list[NDArray[np.float64]]) -> None:
        """Take ``factors`` and the state's host copies, as restored from a checkpoint."""
        self.state.factors[:] = [self.space.put(f) for f in factors]
        self._load()

    def track_bonus_share(self) -> None:
        """Make every later EUGE action add its bonus share to `bonus_shares`."""
        self.tracks_bonus_share = self.state.rule.exploration != "epsilon"
        self._compile()  # act traced again with the share

    def bonus_share(self) -> NDArray[np.float64]:
        """Return each replica's mean EUGE bonus share since the last call, and start anew.

        The share of the chosen action's EUGE score that is the exploration bonus
        (`rl.agents.tensor.step.bonus_share`), over the replica's EUGE actions
        since the last call (`track_bonus_share` first); NaN for a replica that
        took none.
        """
        return self.bonus_shares.pop()

    # ------------------------------------------------------------------ acting

    def act(
        self,
        states: NDArray[np.int64],
        active: NDArray[np.bool_],
        greedy: NDArray[np.bool_] | None = None,
    ) -> NDArray[np.int64]:
        """Explore where ``active & ~greedy``, argmax Q where ``greedy``; (B, D_A) on the host."""
        drawn = self.state.drawn
        if drawn is not None:
            drawn.mask[:] = False
        space = self.space
        flat, explored, values = self.act_arrays(space.put(states, space.ops.int64), active, greedy)
        if drawn is not None and explored is not None:
            mask = np.asarray(space.host(explored), dtype=bool)
            drawn.mask[:] = mask
            if mask.any():
                drawn.values[mask] = np.stack([space.host(v) for v in values], axis=-1)[mask]
        return self.state.action_vectors(np.asarray(space.host(flat), dtype=np.int64))

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
        space = self.space
        factors = tuple(self.state.factors)
        exploring = active if greedy is None else active & ~greedy
        if not exploring.any():
            return self._greedy(factors, self.ids, states), None, ()
        greedy = np.zeros_like(active) if greedy is None else greedy
        flags = space.put(np.stack([exploring, greedy], axis=1).astype(np.int64))
        table = None if self.visits is None else self.visits.table
        flat, explored, drawn, result, shares = self._act(
            factors, self.ids, table, self.epsilon, self.draws.args(), states, flags
        )
        self.draws.take(result)
        if shares is not None:
            self.bonus_shares.add(np.asarray(space.host(shares), dtype=np.float64), exploring)
        return flat, explored, drawn

    def greedy(self, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """Return the first maximizer of Q per replica; no randomness."""
        replicas = self.state.replicas
        return self.act(states, np.zeros(replicas, bool), np.ones(replicas, bool))

    def _greedy_core(self, factors: tuple[Array, ...], ids: Array, states: Array) -> Array:
        values = step.action_values(factors, ids, states, self.state.action_dims)
        return self.space.xp.argmax(values, axis=-1)

    def _act_core(
        self, factors: tuple[Array, ...], ids: Array, table: VisitState | None, epsilon: Array,
        draw_args: tuple[Array, ...], states: Array, flags: Array,
    ) -> tuple[Array, Array, tuple[Array, ...], tuple[Array, ...], Array | None]:  # fmt: skip
        """`rl.agents.tensor.step.act` on ``states``, ``flags`` (exploring, greedy columns).

        The last result is the chosen actions' bonus shares where `track_bonus_share`
        asked for them, else None.
        """
        space, state = self.space, self.state
        draws = self.draws.open(space, draw_args)
        values = step.action_values(factors, ids, states, state.action_dims)
        flat_states = step.ravel(states, state.state_dims)
        scores = step.scores(space, state.rule, self.numbers, table, ids, values, flat_states)
        exploring, greedy = flags[:, 0] > 0, flags[:, 1] > 0
        flat, explored, drawn = step.act(
            space, state.rule, draws, values, scores, epsilon, exploring, greedy,
            state.action_dims,
        )  # fmt: skip
        shares = None
        if self.tracks_bonus_share:
            chosen = flat[:, None]
            shares = step.bonus_share(
                space.take_along(values, chosen)[:, 0],
                space.take_along(scores, chosen)[:, 0],
                space,
            )
        return flat, explored, drawn, draws.result(), shares

    # ------------------------------------------------------------------ learning

    def observe(self, batch: Transitions) -> UpdateStats:
        """Learn from ``batch``; return the update's record (backend arrays).

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
            raise self.state.divergence(replica, float(values[replica]))

    def _pack_core(
        self, states: Array, flat_actions: Array, next_states: Array, terminated: Array,
        active: Array,
    ) -> Array:  # fmt: skip
        """Pack `observe_arrays`'s device arrays into the columns of `_learn`."""
        space = self.space
        int64 = space.ops.int64
        columns = [
            states, step.unravel(space, flat_actions, self.state.action_dims), next_states,
            space.astype(terminated, int64)[:, None], space.astype(active, int64)[:, None],
        ]  # fmt: skip
        return space.xp.concat(columns, axis=1)

    def _learn(self, packed: Array, rewards: Array, valid: Array | None = None) -> UpdateStats:
        """TD targets and Algorithm 1 on the packed columns (`_columns`).

        Without ``valid`` (`observe`) the targets are checked at once (`check_targets`);
        with it (`observe_arrays`) the check waits, and the update is skipped unless
        ``valid`` holds and every target is finite.
        """
        state = self.state
        factors = tuple(state.factors)
        targets, finite = self._targets(factors, self.ids, packed, rewards)
        self._pending = (targets, finite)
        if valid is None:
            self.check_targets()
        else:
            finite = finite & valid
        table = None if self.visits is None else self.visits.reserve()
        factors, table, steps, epsilon, stats = self._update(
            factors, self.ids, table, self.steps, self.epsilon, packed, targets, finite
        )
        state.factors[:] = factors
        if self.space.on_host:  # the state's own arrays, written in place
            self.steps[...], self.epsilon[...] = steps, epsilon
        else:
            self.steps, self.epsilon = steps, epsilon
        if self.visits is not None:
            self.visits.table = table
        return UpdateStats(*stats)

    def _columns(self, packed: Array) -> tuple[Array, ...]:
        """Split the packed columns of `_learn`: index (s, a), next states, terminated, active."""
        state_modes = len(self.state.state_dims)
        modes = state_modes + len(self.state.action_dims)
        index, next_states = packed[:, :modes], packed[:, modes : modes + state_modes]
        terminated, active = packed[:, -2] > 0, packed[:, -1] > 0
        return index, next_states, terminated, active

    def _targets_core(
        self, factors: tuple[Array, ...], ids: Array, packed: Array, rewards: Array
    ) -> tuple[Array, Array]:
        """`rl.agents.tensor.step.td_targets`; whether all are finite."""
        space, state = self.space, self.state
        _, next_states, terminated, *_ = self._columns(packed)
        targets = step.td_targets(
            space, self.numbers, factors, ids, rewards, next_states, terminated, state.action_dims
        )
        return targets, space.xp.all(space.xp.isfinite(targets))

    def _update_core(
        self, factors: tuple[Array, ...], ids: Array, table: VisitState | None, steps: Array,
        epsilon: Array, packed: Array, targets: Array, proceed: Array,
    ) -> tuple[Any, ...]:  # fmt: skip
        """`rl.agents.tensor.step.learn`; ``proceed`` (a bool scalar) False changes nothing."""
        state = self.state
        index, _, terminated, active = self._columns(packed)
        return step.learn(
            self.space, state.rule, self.numbers, self._setting, factors, ids, table, steps,
            epsilon, index,
            terminated, active & proceed, targets, (state.state_dims, state.action_dims),
        )  # fmt: skip
