"""The fused loop: whole stretches of lockstep steps in one compiled call.

Where every part of a lockstep step has compiled code (`FusedLoop.applies`: a
tensor agent on the compiled engine, TEQL in any reading or TLR, on a
compiled environment: CartPole, Pendulum, the Highway twin), `run_steps`
plays up to ``budget`` agent-steps in one Numba call: the agent's action
choice (`rl.agents.tensor._step_compiled.act`), the copies' step, truncation
and encoding (`rl.loop.copies.step_envs`), the update
(`rl.agents.tensor._step_compiled.observe`), the slot bookkeeping
(`rl.loop.slots`) and the resets (`rl.loop.copies.reset_slot`). Python then
files the finished episodes and yields them (`rl.loop.runner.Runner.episodes`).

It computes what the step-by-step loop (`rl.loop.stepped.ObjectSteps`, the
runner with ``fused=False``: agent, `rl.loop.replicas.ReplicaEnvs`, problem
encode/decode) computes, bit for bit: the same kernels on the same numbers in the same order
(``tests/rl/test_fused.py``). It returns to Python when every replica waits at
the barrier, when ``budget`` agent-steps are played, when the event buffer
could overflow, when the visit table needs room (Python grows it, then calls
again) and on an error (a diverged target, a non-finite observation).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numba import njit
from numpy.typing import NDArray

from rl.agents.base import Agent, Transitions
from rl.agents.borrowed import borrowed
from rl.agents.tensor import _step_compiled as _kernels
from rl.agents.tensor._compiled_engine import CompiledEngine
from rl.agents.tensor.agent import TensorAgent
from rl.agents.tensor.teql import TEQLAgent
from rl.jit import drop_stale
from rl.loop import copies, slots
from rl.loop.copies import (
    Draws,
    compiled_copies_apply,
    env_arrays,
    loop_sources,
    reset_slot,
    step_envs,
)
from rl.loop.lockstep import Lockstep, Segment
from rl.loop.replicas import non_finite_error
from rl.loop.slots import EPISODE, EVAL_INDEX, LENGTH, RETURN, end_episode

drop_stale(__file__, [_kernels.__file__, *_kernels.DEPENDENCIES, slots.__file__])

# Why `run_steps` returned.
DONE, BUDGET, EVENTS_FULL, GROW, DIVERGED, NOT_FINITE = range(6)

BUDGET_AGENT_STEPS = 65_536
"""Agent-steps one `run_steps` call plays at most before Python sees the results."""
MIN_EVENT_ROWS = 4096
"""Rows of the event buffer at least (finished episodes one `run_steps` call can book)."""


class SlotArrays(NamedTuple):
    """The slots of a `rl.loop.lockstep.Segment` and the evaluation schedule (`rl.loop.slots`)."""

    ints: NDArray[np.int64]
    floats: NDArray[np.float64]
    running: NDArray[np.bool_]
    needs_reset: NDArray[np.bool_]
    eval_every: int
    eval_episodes: int
    event_ints: NDArray[np.int64]
    event_floats: NDArray[np.float64]


class StepArrays(NamedTuple):
    """Scratch of one lockstep step, shape (B, ...) each."""

    states: NDArray[np.int64]
    actions: NDArray[np.int64]
    next_states: NDArray[np.int64]
    rewards: NDArray[np.float64]
    terminated: NDArray[np.bool_]
    truncated: NDArray[np.bool_]
    ended: NDArray[np.bool_]
    training: NDArray[np.bool_]
    greedy: NDArray[np.bool_]


@njit(cache=True)
def _why_stop(running, ints, greedy, training, room, taken, budget):
    """Set the step's masks; return why `run_steps` must return before it (-1: go on).

    ``room`` is `GROW`, `EVENTS_FULL` or -1 (room for the step's events and
    visits). Arrays come one by one, not in their named tuples: each array of
    a tuple passed to a function costs a reference-count update per call.
    """
    any_running = False
    for b in range(running.shape[0]):
        greedy[b] = running[b] and ints[b, EVAL_INDEX] >= 0
        training[b] = running[b] and ints[b, EVAL_INDEX] < 0
        any_running = any_running or running[b]
    if not any_running:
        return DONE
    if taken >= budget:
        return BUDGET
    return room


@njit(cache=True)
def run_steps(agent, generators, settings, rule, table, scratch, env, slots, work, stop, budget):
    """Play lockstep steps of every running slot until a reason to return; see the module doc.

    ``agent``, ``generators``, ``settings``, ``rule``, ``table`` and ``scratch``
    are the agent's kernel arguments (`rl.agents.tensor._step_compiled`),
    ``env`` a `rl.loop.copies.EnvArrays`, ``slots`` a `SlotArrays`, ``work`` a
    `StepArrays`. Returns (status, agent-steps played, events booked, replica):
    the replica that diverged or saw a non-finite value, else -1.
    """
    # This call's arrays, without reference counts (`rl.agents.borrowed`).
    agent, settings, rule, table = borrowed((agent, settings, rule, table))
    scratch, env, slots, work = borrowed((scratch, env, slots, work))
    replicas = work.states.shape[0]
    # Every field the loop reads is read here once (see `step_envs`).
    states, actions, rewards, running = work.states, work.actions, work.rewards, slots.running
    next_states, terminated, truncated = work.next_states, work.terminated, work.truncated
    ended, training, greedy = work.ended, work.training, work.greedy
    ints, floats, needs_reset = slots.ints, slots.floats, slots.needs_reset
    event_ints, event_floats = slots.event_ints, slots.event_floats
    eval_every, eval_episodes = slots.eval_every, slots.eval_episodes
    draws = Draws(agent.drawn_mask, agent.drawn)
    batch = Transitions(states, actions, rewards, next_states, terminated, training)
    event_rows, used, row_capacity = event_ints.shape[0], table.used, table.row_keys.shape[0]
    hashed = table.keys.shape[0] > 0  # a dense table never needs room
    taken, n_events = 0, 0
    for b in range(replicas):
        if needs_reset[b]:
            reset_slot(b, ints[b, EPISODE], ints[b, EVAL_INDEX], env, states)
            needs_reset[b] = False
    while True:
        room = -1
        if n_events + replicas > event_rows:
            room = EVENTS_FULL
        elif hashed and used[0] + replicas > row_capacity:
            room = GROW
        status = _why_stop(running, ints, greedy, training, room, taken, budget)
        if status >= 0:
            return status, taken, n_events, -1
        _kernels.act(agent, generators, settings, table, states, running, greedy, actions, scratch)
        bad = step_envs(
            env, draws, actions, running, next_states, rewards, terminated, truncated
        )  # fmt: skip
        if bad >= 0:
            return NOT_FINITE, taken, n_events, bad
        any_training = False
        for b in range(replicas):
            any_training = any_training or training[b]
            ended[b] = terminated[b] or truncated[b]
            taken += running[b]
        if any_training:
            bad = _kernels.observe(agent, settings, rule, table, batch, scratch)
            if bad >= 0:
                return DIVERGED, taken, n_events, bad
        for b in range(replicas):
            if not running[b]:
                continue
            floats[b, RETURN] += rewards[b]
            ints[b, LENGTH] += 1
            if not ended[b]:
                for j in range(states.shape[1]):
                    states[b, j] = next_states[b, j]
                continue
            restart, n_events = end_episode(
                b, ints, floats, running, eval_every, eval_episodes, stop, event_ints,
                event_floats, n_events,
            )  # fmt: skip
            if restart:
                reset_slot(b, ints[b, EPISODE], ints[b, EVAL_INDEX], env, states)


def has_update_hook(agent: Agent) -> bool:
    """Whether ``agent`` has an ``on_update`` hook (TEQL's), which compiled code cannot call."""
    return isinstance(agent, TEQLAgent) and agent.on_update is not None


class FusedLoop:
    """The arrays `run_steps` works on for one run, and its Python side.

    Parameters
    ----------
    lockstep : rl.loop.lockstep.Lockstep
        The run's parts, for which `applies` holds.
    """

    name = "fused"

    def __init__(self, lockstep: Lockstep) -> None:
        self.lockstep = lockstep
        self.engine: CompiledEngine = lockstep.agent.engine_
        replicas, problem = lockstep.replicas, lockstep.problem
        self.event_rows = max(MIN_EVENT_ROWS, 4 * replicas)
        """Rows of the event buffer (`run_steps` keeps B free before each lockstep step)."""
        self.env = env_arrays(lockstep)
        drop_stale(__file__, [copies.__file__, *loop_sources(self.env.sim)])
        n_state, n_modes = len(problem.state_dims), len(problem.shape)
        flags = [np.zeros(replicas, dtype=bool) for _ in range(5)]
        self.work = StepArrays(
            states=np.zeros((replicas, n_state), dtype=np.int64),
            actions=np.zeros((replicas, n_modes - n_state), dtype=np.int64),
            next_states=np.zeros((replicas, n_state), dtype=np.int64),
            rewards=np.zeros(replicas),  # read back to name a non-finite reward
            terminated=flags[0],
            truncated=flags[1],
            ended=flags[2],
            training=flags[3],
            greedy=flags[4],
        )
        self.needs_reset = np.zeros(replicas, dtype=bool)

    @staticmethod
    def applies(lockstep: Lockstep) -> bool:
        """Whether every part of the run's lockstep step has compiled code.

        A tensor agent on the compiled engine
        (`rl.agents.tensor._compiled_engine.CompiledEngine`: TEQL, TLR) with no
        ``on_update`` hook and no per-episode work, on a problem whose copies
        step in compiled code (`rl.loop.copies.compiled_copies_apply`).
        """
        agent = lockstep.agent
        return (
            isinstance(agent, TensorAgent)
            and isinstance(agent.engine_, CompiledEngine)
            and not has_update_hook(agent)
            and type(agent).end_episode is Agent.end_episode
            and compiled_copies_apply(lockstep.problem, lockstep.env.vector)
        )

    def start(self, segment: Segment) -> Callable[[], int]:
        """Reset every copy for ``segment``; return a callable that plays a stretch of it.

        Raises
        ------
        ValueError
            If the agent got an ``on_update`` hook after the runner was built.
        """
        if has_update_hook(self.lockstep.agent):
            raise ValueError(
                "The agent's on_update hook was set after its Runner was built, and the fused "
                "loop cannot call it: set on_update before building the Runner."
            )
        self.needs_reset[:] = True
        return functools.partial(self.advance, segment)

    def advance(self, segment: Segment) -> int:
        """Play up to `BUDGET_AGENT_STEPS` agent-steps of ``segment``; returns those played.

        Finished episodes are filed into ``segment`` (`rl.loop.lockstep.Segment.book`).

        Raises
        ------
        ValueError
            If an update diverged or the environment returned a non-finite value.
        """
        engine, parts, slots = self.engine, self.lockstep, segment.slots
        settings, rule = engine.settings()
        slot_arrays = SlotArrays(
            slots.ints, slots.floats, slots.running, self.needs_reset, parts.eval_every,
            parts.eval_episodes, slots.event_ints, slots.event_floats,
        )  # fmt: skip
        taken_total, room = 0, 0
        while True:
            status, taken, n_events, replica = run_steps(
                engine.arrays(), engine.generators, settings, rule, engine.visit_arrays(room),
                engine.scratch, self.env, slot_arrays, self.work, segment.stop,
                BUDGET_AGENT_STEPS,
            )  # fmt: skip
            taken_total += taken
            if n_events:
                segment.book(n_events)
            room = parts.replicas if status == GROW else 0
            if status == GROW:
                continue
            if status == DIVERGED:
                raise engine.divergence(replica)
            if status == NOT_FINITE:
                raise non_finite_error(
                    parts.problem.env_id, replica, parts.seeds[replica],
                    float(self.work.rewards[replica]), self.env.sim.obs[replica],
                )  # fmt: skip
            if status == EVENTS_FULL and not n_events:
                raise RuntimeError("The fused runner's event buffer is smaller than B.")
            return taken_total
