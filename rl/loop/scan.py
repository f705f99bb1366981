"""The scan loop: T lockstep steps of the whole loop as one compiled JAX program.

With the scan engine (``engine="scan"``: TEQL in any reading or TLR, backend
JAX, `rl.agents.tensor._array_engine.ArrayEngine` named ``"scan"``) on
CartPole or Pendulum (`ScanLoop.applies`), the runner plays ``steps`` lockstep
steps per call as one ``jax.lax.scan`` compiled once by ``jax.jit``: acting
(EUGE or epsilon-greedy), the copies' dynamics (``dynamics(xp)``, as
`rl.loop.device_copies` steps them), the encoding into state indices, the TD
target, Algorithm 1's update, the visit counts and Delta Q, the episode ends
with their bookkeeping (`rl.loop.slots.end_episode`, as array operations), the
resets and the greedy evaluation episodes, batched over the B replicas. The
host sees the device once per call: the finished episodes' rows come back and
the runner writes metrics and checkpoints between calls as it does for every
loop.

What stays on the host, between calls:

- the initial states of the next episodes: every replica's next ``queue``
  episodes (training and evaluation, in the order `rl.loop.slots.end_episode`
  plays them) are drawn there with the compiled copies' seeded reset
  (`rl.loop.copies.reset_envs`), as every other loop draws them, and go up as
  one (B, queue, D) array; a replica whose queue runs dry waits (plays no step)
  until the next call, which changes none of its numbers;
- the visit table's room: a step that could hand out more rows than the table
  has stops the call (the carry is then left as it was before that step); the
  host grows the table (``make_room`` of `rl.agents.tensor._visits_array.device_visits`)
  and calls again, so the table still grows with the states visited;
- the errors: a non-finite reward or observation, or a TD target that is not
  finite, stops the call before that step changes anything, and the host raises
  the error every loop raises.

Random draws. With ``draws="prng"`` (the default, JAX's PRNG) a replica's exploration
doubles of its t-th training step are ``jax.random.uniform`` of
``fold_in(key, t)``, ``key`` taken from its exploration generator's state
(which the loop never advances), so a checkpoint (generators and step counters)
resumes exactly and a seed's numbers depend neither on B nor on ``steps``.
With ``draws="host"`` the doubles are those of each replica's own generator, in
the reference's order (`rl.agents.tensor._array_backend.BufferedDraws` on a
buffer drawn per call, the generators rewound after it to just after the
doubles used): the actions are then the array engine's, which are the
reference engine's until the first exact tie or discrete random action
(`rl.agents.tensor._array_engine`).

The step of the tensor agents is the array engine's own pure functions
(`rl.agents.tensor.step` through them), called in one place, `StepCalls`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import NDArray

from rl.agents.base import Agent
from rl.agents.tensor import _visits_array as visits_ops
from rl.agents.tensor._array_backend import UniformStreams
from rl.agents.tensor._array_engine import ArrayEngine
from rl.agents.tensor._visits_array import VisitState
from rl.agents.tensor.agent import TensorAgent
from rl.envs.physics import PhysicsVectorEnv
from rl.loop import slots as columns
from rl.loop.copies import compiled_copies_apply, reset_envs
from rl.loop.device_copies import DeviceCopies
from rl.loop.fused import has_update_hook
from rl.loop.lockstep import Lockstep, Segment
from rl.loop.replicas import non_finite_error

Array = Any

CHUNK_STEPS = 256
"""Lockstep steps of one compiled call (T), by default."""
QUEUE_EPISODES = 32
"""Episodes whose initial states every replica has ahead of it, by default."""
ROOM_STEPS = 64
"""Lockstep steps of new visit-table rows made room for before a call, at least."""

_INT_COLUMNS = (columns.EPISODE, columns.EVAL_INDEX, columns.LENGTH, columns.LAST_LENGTH)
_FLOAT_COLUMNS = (columns.RETURN, columns.GREEDY_SUM, columns.LAST_RETURN)
"""The columns of `rl.loop.slots.Slots` that `Slot` holds, in its order."""

# Why a call stopped early (`Carry.status`).
GO_ON, GROW, DIVERGED, NOT_FINITE = range(4)


class Slot(NamedTuple):
    """Every replica's place in its episode sequence, on the device (`rl.loop.slots.Slots`)."""

    episode: Array
    eval_index: Array
    length: Array
    last_length: Array
    ret: Array
    greedy_sum: Array
    last_return: Array
    running: Array
    needs_reset: Array
    started: Array
    """Episodes of the queue taken (the one in progress included), since the segment began."""


class Carry(NamedTuple):
    """What one scan step reads and returns."""

    factors: tuple[Array, ...]
    table: VisitState | None
    steps: Array
    epsilon: Array
    cursor: Array
    obs: Array
    elapsed: Array
    slot: Slot
    events: Array
    """(B, queue + 1, 4) float64: episode, length, return, mean greedy return (NaN: none)."""
    n_events: Array
    status: Array
    bad: Array
    """The replica that diverged or saw a non-finite value, its reward and TD target."""
    bad_obs: Array
    taken: Array


class StepCalls:
    """The one place this loop calls the tensor step: the array engine's pure functions.

    Parameters
    ----------
    engine : ArrayEngine
        The agent's engine; its ``_act_core``, ``_pack_core``, ``_targets_core``
        and ``_update_core`` are `rl.agents.tensor.step` on the engine's state.
    """

    def __init__(self, engine: ArrayEngine) -> None:
        self.engine = engine

    def act(
        self, factors: tuple[Array, ...], table: VisitState | None, epsilon: Array,
        buffer: Array, cursor: Array, states: Array, exploring: Array, greedy: Array,
    ) -> tuple[Array, Array, tuple[Array, ...], Array]:  # fmt: skip
        """Return the flat actions, who explored, the continuous draws and the new cursor."""
        engine, space = self.engine, self.engine.space
        flags = space.ops.stack([exploring, greedy], axis=1).astype(space.ops.int64)
        flat, explored, drawn, (cursor,), _ = engine._act_core(
            factors, engine.ids, table, epsilon, (buffer, cursor), states, flags
        )
        return flat, explored, drawn, cursor

    def learn(
        self, factors: tuple[Array, ...], table: VisitState | None, steps: Array, epsilon: Array,
        states: Array, flat: Array, rewards: Array, next_states: Array, terminated: Array,
        training: Array, env_ok: Array,
    ) -> tuple[tuple[Any, ...], Array, Array]:  # fmt: skip
        """TD targets and Algorithm 1 where ``training``, unless ``env_ok`` is False.

        Returns the step's results (factors, table, steps, epsilon), the TD
        targets and whether the update happened (every training target finite).
        """
        engine, xp = self.engine, self.engine.space.xp
        packed = engine._pack_core(states, flat, next_states, terminated, training)
        targets, _ = engine._targets_core(factors, engine.ids, packed, rewards)
        proceed = env_ok & xp.all(xp.isfinite(targets) | ~training)
        learned = engine._update_core(
            factors, engine.ids, table, steps, epsilon, packed, targets, proceed
        )
        return learned[:4], targets, proceed


def jax_keys(generators: list[np.random.Generator]) -> NDArray[np.uint32]:
    """Return one JAX PRNG key (two uint32 words) per generator, from its state (not advanced)."""
    words = np.empty((len(generators), 2), dtype=np.uint32)
    for b, generator in enumerate(generators):
        state = generator.bit_generator.state["state"]
        mixed = state["state"] ^ (state["state"] >> 64) ^ state["inc"]
        words[b] = (mixed & 0xFFFFFFFF, (mixed >> 32) & 0xFFFFFFFF)
    return words


class EpisodeQueue:
    """Every replica's next episodes and their initial observations, drawn on the host.

    Entry i of replica b (i = 0, 1, ... from the segment's start) is its i-th
    episode, in the order `rl.loop.slots.end_episode` plays them, and lives at
    column ``i % size`` of ``obs``.
    """

    def __init__(self, loop: DeviceCopies, segment: Segment, size: int) -> None:
        parts = loop.lockstep
        self.envs, self.size = loop.envs, size
        self.eval_every, self.eval_episodes = parts.eval_every, parts.eval_episodes
        replicas, dims = loop.envs.sim.obs.shape
        self.obs = np.zeros((replicas, size, dims))
        self.filled = np.zeros(replicas, dtype=np.int64)
        self.next_episode = segment.slots.episode.copy()
        self.next_index = segment.slots.eval_index.copy()
        self._states = np.zeros((replicas, len(parts.problem.state_dims)), dtype=np.int64)

    def fill(self, started: NDArray[np.int64], stop: int) -> None:
        """Draw entries until every replica has ``size`` ahead of its ``started`` ones."""
        while True:
            mask = (self.filled <= started + self.size) & (self.next_episode <= stop)
            if not mask.any():
                return
            reset_envs(self.envs, self.next_episode, self.next_index, mask, self._states)
            rows = np.flatnonzero(mask)
            self.obs[rows, self.filled[rows] % self.size] = self.envs.sim.obs[rows]
            self.filled += mask
            self._advance(mask)

    def _advance(self, mask: NDArray[np.bool_]) -> None:
        """Move the masked replicas' next episode on, as `rl.loop.slots.end_episode` does."""
        episode, index = self.next_episode, self.next_index
        training = index < 0
        due = training & (self.eval_every > 0)
        if self.eval_every > 0:
            due &= episode % self.eval_every == 0
        more = ~training & (index + 1 < self.eval_episodes)
        new_index = np.where(due, 0, np.where(more, index + 1, -1))
        new_episode = np.where(due | more, episode, episode + 1)
        self.next_index = np.where(mask, new_index, index)
        self.next_episode = np.where(mask, new_episode, episode)


class ScanLoop(DeviceCopies):
    """The run's steps in compiled chunks of ``steps`` lockstep steps (see the module docstring).

    Parameters
    ----------
    lockstep : rl.loop.lockstep.Lockstep
        The run's parts, for which `applies` holds.
    steps : int
        T, the lockstep steps of one compiled call.
    queue : int
        Episodes whose initial states each replica has ahead of it in a call.
    draws : {"prng", "host"}
        The exploration doubles: JAX's PRNG, or each replica's generator in the
        reference's order (the module docstring).
    """

    name = "scan"

    def __init__(
        self,
        lockstep: Lockstep,
        steps: int = CHUNK_STEPS,
        queue: int = QUEUE_EPISODES,
        draws: Literal["prng", "host"] = "prng",
    ) -> None:
        super().__init__(lockstep)
        if draws not in ("prng", "host"):
            raise ValueError(f"The 'draws' parameter must be 'prng' or 'host'. Got {draws!r}.")
        self.steps, self.queue_size, self.draws = int(steps), int(queue), draws
        self.event_rows = max(4096, 4 * lockstep.replicas)
        """Rows of a segment's event buffers (events are filed in pieces of this many)."""
        engine = self.engine
        self.calls = StepCalls(engine)
        streams = engine.draws
        if not isinstance(streams, UniformStreams):
            raise ValueError("The scan loop needs the scan engine's buffered draws.")
        self.per_step = streams.per_step
        self._chunk = self.space.compile(self._chunk_core, donate=(0,))
        self._keys: Array = None

    @staticmethod
    def applies(lockstep: Lockstep) -> bool:
        """Whether the run is the scan engine's on a physical system (CartPole, Pendulum).

        A tensor agent on the scan engine with no ``on_update`` hook, no
        per-episode work and no bonus-share tracking, on a physical system whose
        copies step in compiled code (`rl.loop.copies.compiled_copies_apply`).
        """
        agent, vector = lockstep.agent, lockstep.env.vector
        return (
            isinstance(agent, TensorAgent)
            and isinstance(agent.engine_, ArrayEngine)
            and agent.engine_.name == "scan"
            and not agent.engine_.tracks_bonus_share
            and not has_update_hook(agent)
            and type(agent).end_episode is Agent.end_episode
            and isinstance(vector, PhysicsVectorEnv)
            and compiled_copies_apply(lockstep.problem, vector)
        )

    # ------------------------------------------------------------------ host side

    def start(self, segment: Segment) -> Callable[[], int]:
        """Prepare ``segment``: every replica starts its next episode; return the chunk player.

        Raises
        ------
        ValueError
            If the agent got an ``on_update`` hook or bonus-share tracking after the
            runner was built.
        """
        agent, engine, space = self.lockstep.agent, self.engine, self.space
        if has_update_hook(agent) or engine.tracks_bonus_share:
            raise ValueError(
                "The agent's on_update hook or bonus-share tracking was set after its Runner "
                "was built, and the scan loop cannot call it: set it before building the Runner."
            )
        engine.draws.sync()  # no buffered doubles left over from acting outside the loop
        if self.draws == "prng":
            self._keys = space.put(jax_keys(engine.state.generators))
        slots, int64, float64 = segment.slots, np.int64, np.float64
        ints, floats = slots.ints, slots.floats
        self._slot = Slot(
            *(space.put(ints[:, c], int64) for c in _INT_COLUMNS),
            *(space.put(floats[:, c], float64) for c in _FLOAT_COLUMNS),
            space.put(slots.running.copy()),
            space.put(np.ones(len(ints), dtype=bool)),
            space.put(np.full(len(ints), -1, dtype=int64)),
        )
        self._queue = EpisodeQueue(self, segment, self.queue_size)
        self._started = np.full(len(ints), -1, dtype=np.int64)
        return functools.partial(self.advance, segment)

    def advance(self, segment: Segment) -> int:
        """Play one compiled chunk of ``segment`` (again after growing the visit table).

        Returns the agent-steps played; the finished episodes are filed into ``segment``.

        Raises
        ------
        ValueError
            If an update diverged or a copy's reward or observation is not finite.
        """
        taken_total = 0
        while True:
            status, taken, replica, reward, target, obs = self._play_chunk(segment)
            taken_total += taken
            if status == GROW:
                continue
            if status == DIVERGED:
                raise self.engine.state.divergence(replica, target)
            if status == NOT_FINITE:
                parts = self.lockstep
                raise non_finite_error(
                    parts.problem.env_id, replica, parts.seeds[replica], reward, obs
                )
            return taken_total

    def _play_chunk(self, segment: Segment) -> tuple[int, int, int, float, float, Any]:
        """Make one compiled call and file its events.

        Returns (status, agent-steps, bad replica, its reward, its target, its observation).
        """
        engine, space, state = self.engine, self.space, self.engine.state
        self._queue.fill(self._started, segment.stop)
        buffer, cursor = self._host_draws()
        table = None
        if engine.visits is not None:
            table = engine.visits.make_room(ROOM_STEPS)
        replicas = self.lockstep.replicas
        carry = Carry(
            factors=tuple(state.factors), table=table, steps=engine.steps,
            epsilon=engine.epsilon, cursor=cursor, obs=self.obs, elapsed=self.elapsed,
            slot=self._slot,
            events=space.zeros((replicas, self.queue_size + 1, 4), np.float64),
            n_events=space.zeros((replicas,), np.int64),
            status=space.put(np.array(GO_ON, np.int64)), bad=space.zeros((3,), np.float64),
            bad_obs=space.zeros(self.obs.shape[1:], np.float64),
            taken=space.put(np.array(0, np.int64)),
        )  # fmt: skip
        queue = space.put(self._queue.obs)
        filled = space.put(self._queue.filled)
        stop = space.put(np.array(segment.stop, np.int64))
        carry = self._chunk(carry, queue, filled, buffer, self._keys, stop)
        state.factors[:] = carry.factors
        engine.steps, engine.epsilon = carry.steps, carry.epsilon
        if engine.visits is not None:
            engine.visits.table = carry.table
        self.obs, self.elapsed, self._slot = carry.obs, carry.elapsed, carry.slot
        if self.draws == "host":
            self._rewind(np.asarray(space.host(carry.cursor)), buffer.shape[1])
        self._started = np.array(space.host(carry.slot.started), dtype=np.int64)
        self._file(segment, carry)
        bad = np.asarray(space.host(carry.bad))
        return (
            int(space.host(carry.status)), int(space.host(carry.taken)), int(bad[0]),
            float(bad[1]), float(bad[2]), np.asarray(space.host(carry.bad_obs)),
        )  # fmt: skip

    def _host_draws(self) -> tuple[Array, Array]:
        """Return the draws' buffer and cursor: one call's doubles of every generator ("host")."""
        space, replicas = self.space, self.lockstep.replicas
        cursor = space.zeros((replicas,), np.int64)
        if self.draws == "prng":
            return space.zeros((replicas, 1), np.float64), cursor
        width = self.steps * self.per_step
        rows = np.stack([g.random(width) for g in self.engine.state.generators])
        return space.put(rows), cursor

    def _rewind(self, used: NDArray[np.int64], width: int) -> None:
        """Rewind every generator to just after the doubles its replica used."""
        unused = (width - used).tolist()
        for generator, count in zip(self.engine.state.generators, unused, strict=True):
            if count:
                generator.bit_generator.advance(-count)

    def _file(self, segment: Segment, carry: Carry) -> None:
        """File the call's finished episodes into ``segment`` and update its slots."""
        space = self.space
        counts = np.asarray(space.host(carry.n_events))
        events = np.asarray(space.host(carry.events))
        replicas, order = np.nonzero(np.arange(events.shape[1])[None, :] < counts[:, None])
        rows = events[replicas, order]
        slots = segment.slots
        capacity = len(slots.event_ints)
        for first in range(0, len(rows), capacity):
            piece, owners = rows[first : first + capacity], replicas[first : first + capacity]
            n = len(piece)
            slots.event_ints[:n, columns.EV_REPLICA] = owners
            slots.event_ints[:n, columns.EV_EPISODE] = piece[:, 0]
            slots.event_ints[:n, columns.EV_LENGTH] = piece[:, 1]
            slots.event_floats[:n, columns.EV_RETURN] = piece[:, 2]
            slots.event_floats[:n, columns.EV_GREEDY] = piece[:, 3]
            segment.book(n)
        slot = carry.slot
        slots.ints[:, columns.EPISODE] = space.host(slot.episode)
        slots.ints[:, columns.EVAL_INDEX] = space.host(slot.eval_index)
        slots.running[:] = space.host(slot.running)
        segment.update_masks()

    # ------------------------------------------------------------------ device side

    def _chunk_core(
        self, carry: Carry, queue: Array, filled: Array, buffer: Array, keys: Array, stop: Array
    ) -> Carry:
        """Play `steps` lockstep steps (`_one_step`) as one ``jax.lax.scan``."""
        import jax

        def body(carry: Carry, _: None) -> tuple[Carry, None]:
            return self._one_step(carry, queue, filled, buffer, keys, stop), None

        carry, _ = jax.lax.scan(body, carry, None, length=self.steps)
        return carry

    def _draw_buffer(self, carry: Carry, buffer: Array, keys: Array) -> tuple[Array, Array]:
        """Return the step's draws' buffer and cursor (JAX: this step's doubles of each replica)."""
        if self.draws == "host":
            return buffer, carry.cursor
        import jax

        def doubles(key: Array, t: Array) -> Array:
            key = jax.random.fold_in(key, t)
            return jax.random.uniform(key, (self.per_step,), dtype=self.space.ops.float64)

        return jax.vmap(doubles)(keys, carry.steps), carry.cursor * 0

    def _one_step(
        self, carry: Carry, queue: Array, filled: Array, buffer: Array, keys: Array, stop: Array
    ) -> Carry:
        """Play one lockstep step of every replica: reset, act, step, learn, book."""
        space = self.space
        ops, xp = space.ops, space.xp
        slot, table, replicas = carry.slot, carry.table, self.lockstep.replicas
        # A stopped chunk plays on with every replica masked out, which changes nothing:
        # a masked step reads and writes the arrays in place, where a branch would copy them.
        room = carry.status == GO_ON
        if table is not None:
            room &= visits_ops.has_room(table, replicas)
        # resets: the queue's next initial state for every replica whose episode ended
        take = slot.needs_reset & slot.running & (slot.started + 1 < filled) & room
        started = slot.started + space.astype(take, ops.int64)
        column = ops.where(take, (slot.started + 1) % self.queue_size, 0)
        fresh = queue[self.engine.ids, column]
        obs = ops.where(take[:, None], fresh, carry.obs)
        elapsed = ops.where(take, 0, carry.elapsed)
        needs_reset = slot.needs_reset & ~take
        active = slot.running & ~needs_reset & room
        greedy = active & (slot.eval_index >= 0)
        training = active & (slot.eval_index < 0)
        states = self._encode(obs)
        # acting, the copies' step, learning
        draw_buffer, cursor = self._draw_buffer(carry, buffer, keys)
        flat, explored, drawn, cursor = self.calls.act(
            carry.factors, carry.table, carry.epsilon, draw_buffer, cursor, states, training,
            greedy,
        )  # fmt: skip
        moved, elapsed, next_states, rewards, terminated, env_ok, report = self._step_core(
            obs, elapsed, flat, explored, drawn, active
        )
        learned, targets, proceed = self.calls.learn(
            carry.factors, carry.table, carry.steps, carry.epsilon, states, flat, rewards,
            next_states, terminated, training, env_ok,
        )  # fmt: skip
        factors, table, steps, epsilon = learned
        # the episode bookkeeping of `rl.loop.slots.end_episode`, for every replica at once
        truncated = report[:, 2] > 0
        slot, events, n_events = self._book(
            slot._replace(started=started, needs_reset=needs_reset), active, rewards,
            terminated | truncated, carry.events, carry.n_events, stop,
        )  # fmt: skip
        # a step that is not finite changes nothing but the status
        bad_row = active & (report[:, 3] == 0)
        bad_target = training & ~xp.isfinite(targets)
        replica = ops.where(env_ok, xp.argmax(bad_target), xp.argmax(bad_row))
        status = ops.where(proceed, GO_ON, ops.where(env_ok, DIVERGED, NOT_FINITE))
        status = ops.where(room, status, ops.where(carry.status == GO_ON, GROW, carry.status))
        status = space.astype(status, ops.int64)
        keep = lambda new, old: ops.where(proceed, new, old)  # noqa: E731
        new_slot = Slot(*(keep(n, o) for n, o in zip(slot, carry.slot, strict=True)))
        bad = ops.stack([space.astype(replica, ops.float64), rewards[replica], targets[replica]])
        return Carry(
            factors=factors, table=table, steps=steps, epsilon=epsilon,
            cursor=keep(cursor, carry.cursor), obs=keep(moved, carry.obs),
            elapsed=keep(elapsed, carry.elapsed), slot=new_slot,
            events=keep(events, carry.events), n_events=keep(n_events, carry.n_events),
            status=status, bad=keep(carry.bad, bad), bad_obs=keep(carry.bad_obs, moved[replica]),
            taken=carry.taken + space.astype(active & proceed, ops.int64).sum(),
        )  # fmt: skip

    def _book(
        self, slot: Slot, active: Array, rewards: Array, ended: Array, events: Array,
        n_events: Array, stop: Array,
    ) -> tuple[Slot, Array, Array]:  # fmt: skip
        """`rl.loop.slots.end_episode` for every replica whose episode ended, as array code."""
        space = self.space
        ops, int64 = space.ops, space.ops.int64
        where = ops.where
        eval_every, eval_episodes = self.lockstep.eval_every, self.lockstep.eval_episodes
        ret = slot.ret + where(active, rewards, 0.0)
        length = slot.length + space.astype(active, int64)
        ended = active & ended
        training = slot.eval_index < 0
        train_end, eval_end = ended & training, ended & ~training
        last_return = where(train_end, ret, slot.last_return)
        last_length = where(train_end, length, slot.last_length)
        due = train_end & False
        if eval_every > 0:
            due = train_end & (slot.episode % eval_every == 0)
        greedy_sum = where(eval_end, slot.greedy_sum + ret, where(due, 0.0, slot.greedy_sum))
        index = where(eval_end, slot.eval_index + 1, where(due, 0, slot.eval_index))
        more = eval_end & (index < eval_episodes)
        done = eval_end & ~more
        greedy = where(done, greedy_sum / max(eval_episodes, 1), space.xp.nan)
        index = where(done, -1, index)
        book = ended & ~(due | more)
        wait = book & (slot.episode >= stop)
        row = ops.stack(
            [space.astype(slot.episode, ops.float64), space.astype(last_length, ops.float64),
             last_return, greedy], axis=1,
        )  # fmt: skip
        ids = self.engine.ids
        at = ops.where(book, n_events, events.shape[1] - 1)
        events = space.scatter(events, (ids, at), where(book[:, None], row, events[ids, at]))
        slot = Slot(
            episode=where(book & ~wait, slot.episode + 1, slot.episode),
            eval_index=index,
            length=where(ended, 0, length),
            last_length=last_length,
            ret=where(ended, 0.0, ret),
            greedy_sum=greedy_sum,
            last_return=last_return,
            running=slot.running & ~wait,
            needs_reset=slot.needs_reset | (ended & ~wait),
            started=slot.started,
        )
        return slot, events, n_events + space.astype(book, int64)
