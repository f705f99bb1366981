"""The fused runner: whole stretches of lockstep steps in one compiled call.

Where every part of a lockstep step has compiled code (`FusedLoop.applies`: a
tensor agent on the compiled engine, TEQL in any reading or TLR, on an
environment that declares a compiled step: CartPole, Pendulum, the Highway
twin), `run_steps` plays up to ``budget`` agent-steps in one Numba call: the
agent's action choice (`rl.agents.tensor._step_compiled.act`), decoding the action bin
(`rl.problems.discretize.bin_value`, or the index itself for discrete actions)
or the agent's continuous draw, the environment's step (its declared kernel,
through `rl.envs.compiled.step_copy`), truncation, encoding the observation
(`rl.problems.discretize.bin_index`), the update (`rl.agents.tensor._step_compiled.observe`),
the slot bookkeeping (`rl.loop.slots`) and the resets, whose initial states
are drawn exactly as ``env.reset(seed=...)`` draws them
(`rl.envs.compiled.reset_copy`). Python then files the finished
episodes and yields them (`rl.loop.runner.Runner.episodes`).

It computes what the step-by-step path (`rl.loop.runner.Runner` with
``fused=False``: agent, `rl.loop.replicas.ReplicaEnvs`, problem encode/decode)
computes, bit for bit: the same kernels on the same numbers in the same order
(``tests/rl/test_fused.py``). It returns to Python when every replica waits at
the barrier, when ``budget`` agent-steps are played, when the event buffer
could overflow, when the visit table needs room (Python grows it, then calls
again) and on an error (a diverged target, a non-finite observation).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numba import njit
from numpy.typing import NDArray

from rl.agents.base import Agent, Transitions
from rl.agents.tensor import _step_compiled as _kernels
from rl.agents.tensor._compiled_engine import CompiledEngine
from rl.envs import compiled, seeding_kernels
from rl.envs.compiled import RowState, TwinState, compiled_state, reset_copy, step_copy
from rl.envs.seeding_kernels import episode_seed_kernel
from rl.jit import drop_stale
from rl.loop import slots
from rl.loop.replicas import non_finite_error
from rl.loop.slots import EPISODE, EVAL_INDEX, LENGTH, RETURN, end_episode
from rl.problems import discretize
from rl.problems.discretize import DiscreteGrid, GridArrays, UniformGrid, bin_index, bin_value

if TYPE_CHECKING:
    from rl.loop.runner import Runner, Segment

drop_stale(
    __file__,
    [_kernels.__file__, *_kernels.DEPENDENCIES]
    + [m.__file__ for m in (discretize, slots, compiled, seeding_kernels)]
    + compiled.DEPENDENCIES,
)

# Why `run_steps` returned.
DONE, BUDGET, EVENTS_FULL, GROW, DIVERGED, NOT_FINITE = range(6)

BUDGET_AGENT_STEPS = 65_536
"""Agent-steps one `run_steps` call plays at most before Python sees the results."""
MIN_EVENT_ROWS = 4096
"""Rows of the event buffer at least (finished episodes one `run_steps` call can book)."""
_UNUSED_GRID = UniformGrid(0.0, 1.0, 1)
"""Stands in for the action grid of discrete actions, so that `EnvArrays` keeps one type."""


class EnvArrays(NamedTuple):
    """The B environment copies as `run_steps` steps them.

    Attributes
    ----------
    sim : rl.envs.compiled.RowState or rl.envs.compiled.TwinState
        The copies' state, generators and observations (`rl.envs.compiled`).
    elapsed : ndarray of int64, shape (B,)
        Steps of every copy's episode so far.
    env_seeds, eval_seeds : ndarray of int64, shape (B,)
        Every replica's environment and evaluation stream seed.
    states, actions : rl.problems.discretize.GridArrays
        The observation and action grids (``actions`` unused for discrete actions).
    discrete_actions : bool
        Whether the environment's action is the action index itself.
    """

    sim: RowState | TwinState
    elapsed: NDArray[np.int64]
    env_seeds: NDArray[np.int64]
    eval_seeds: NDArray[np.int64]
    states: GridArrays
    actions: GridArrays
    discrete_actions: bool


class SlotArrays(NamedTuple):
    """The slots of a `rl.loop.runner.Segment` and the evaluation schedule (`rl.loop.slots`)."""

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
def _reset_slot(b, episode, k, env, states):
    """Reset replica ``b``'s copy for training episode ``episode`` (k < 0) or its evaluation k.

    The seed is `rl.loop.runner.episode_seed` of the replica's environment (or
    evaluation) stream seed; the initial state is drawn as the environment's
    ``reset(seed=)`` draws it, then encoded into ``states[b]``.
    """
    if k < 0:
        seed = episode_seed_kernel(env.env_seeds[b], episode, -1)
    else:
        seed = episode_seed_kernel(env.eval_seeds[b], episode, k)
    reset_copy(env.sim, b, seed)
    env.elapsed[b] = 0
    obs, grid = env.sim.obs, env.states
    for j in range(states.shape[1]):
        states[b, j] = bin_index(obs[b, j], grid.low[j], grid.scale[j], grid.last[j],
                                 grid.centre)  # fmt: skip


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
    are the agent's kernel arguments (`rl.agents.tensor._step_compiled`), ``env`` an `EnvArrays`,
    ``slots`` a
    `SlotArrays`, ``work`` a `StepArrays`. Returns (status, agent-steps played,
    events booked, replica): the replica that diverged or saw a non-finite
    value, else -1.
    """
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
            _reset_slot(b, ints[b, EPISODE], ints[b, EVAL_INDEX], env, states)
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
                _reset_slot(b, ints[b, EPISODE], ints[b, EVAL_INDEX], env, states)


def compiled_envs_apply(runner: Runner) -> bool:
    """Whether ``runner``'s environment copies can step in compiled code (`env_arrays`).

    A problem with a uniform state grid and one action component (a uniform
    grid or the index itself) whose vector environment declares a compiled
    step (`rl.envs.compiled`): CartPole, Pendulum, the Highway twin.
    """
    problem = runner.problem
    return (
        compiled_state(runner.env.vector, 0) is not None
        and problem.grids is not None
        and isinstance(problem.grids[0], UniformGrid)
        and isinstance(problem.grids[1], (UniformGrid, DiscreteGrid))
        and len(problem.action_dims) == 1
    )


def env_arrays(runner: Runner) -> EnvArrays:
    """Allocate the arrays of ``runner``'s B copies in compiled code (`compiled_envs_apply`)."""
    replicas = runner.replicas
    state_grid, action_grid = runner.problem.grids
    discrete_actions = isinstance(action_grid, DiscreteGrid)
    return EnvArrays(
        sim=compiled_state(runner.env.vector, replicas),
        elapsed=np.zeros(replicas, dtype=np.int64),
        env_seeds=np.array([s.env_seed for s in runner.streams], dtype=np.int64),
        eval_seeds=np.array([s.eval_seed for s in runner.streams], dtype=np.int64),
        states=state_grid.kernel_arrays(),
        actions=(_UNUSED_GRID if discrete_actions else action_grid).kernel_arrays(),
        discrete_actions=discrete_actions,
    )


class Draws(NamedTuple):
    """An agent's continuous draws (`rl.agents.base.ContinuousActions`) as `step_envs` reads them.

    Attributes
    ----------
    drawn_mask : ndarray of bool, shape (B,)
        Replicas whose action is executed as ``drawn[b, 0]``.
    drawn : ndarray of float64, shape (B, 1)
        The drawn continuous actions.
    """

    drawn_mask: NDArray[np.bool_]
    drawn: NDArray[np.float64]


@njit(cache=True)
def step_envs(env, draws, actions, running, next_states, rewards, terminated, truncated):
    """Step every running copy of ``env`` (an `EnvArrays`) as `run_steps` steps it.

    ``draws`` is a `Draws`; ``actions`` (B, 1) the agent's action indices. The
    outputs (B, ...) are written for the running copies; the others get reward
    0, both flags False and their ``next_states`` row unchanged. Returns the
    first replica whose reward or observation is not finite, or -1 (its reward is
    written, the copies after it are not stepped).

    The named tuples' fields are read once, before the loop over the copies: a
    named tuple of arrays passed to a function called once per copy costs a
    reference-count update per array and call, more than the step of CartPole.
    """
    sim, obs, elapsed, max_steps = env.sim, env.sim.obs, env.elapsed, env.sim.max_steps
    grid, bins, discrete = env.states, env.actions, env.discrete_actions
    low, scale, last, centre = grid.low, grid.scale, grid.last, grid.centre
    drawn_mask, drawn = draws.drawn_mask, draws.drawn
    for b in range(running.shape[0]):
        rewards[b], terminated[b], truncated[b] = 0.0, False, False
        if not running[b]:
            continue
        if drawn_mask[b]:
            a = drawn[b, 0]
        elif discrete:
            a = float(actions[b, 0])
        else:
            a = bin_value(actions[b, 0], bins.low[0], bins.high[0], bins.width[0], bins.last[0],
                          bins.centre)  # fmt: skip
        reward, terminated[b] = step_copy(sim, b, a)
        rewards[b] = reward
        finite = math.isfinite(reward)
        for j in range(obs.shape[1]):
            finite = finite and math.isfinite(obs[b, j])
            next_states[b, j] = bin_index(obs[b, j], low[j], scale[j], last[j], centre)
        elapsed[b] += 1
        truncated[b] = max_steps >= 0 and elapsed[b] >= max_steps
        if not finite:
            return b
    return -1


@njit(cache=True)
def reset_envs(env, episodes, eval_index, mask, states):
    """Reset the masked copies of ``env`` for their slots' episodes (`_reset_slot`)."""
    for b in range(mask.shape[0]):
        if mask[b]:
            _reset_slot(b, episodes[b], eval_index[b], env, states)


class FusedLoop:
    """The arrays `run_steps` works on for one `rl.loop.runner.Runner`, and its Python side.

    Parameters
    ----------
    runner : rl.loop.runner.Runner
        A runner for which `applies` holds.
    """

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.engine: CompiledEngine = runner.agent.engine_
        replicas = runner.replicas
        self.event_capacity = max(MIN_EVENT_ROWS, 4 * replicas)
        """Rows of the event buffer (`run_steps` keeps B free before each lockstep step)."""
        self.env = env_arrays(runner)
        n_state, n_modes = len(runner.problem.state_dims), len(runner.problem.shape)
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
        self._segment: Segment | None = None

    @staticmethod
    def applies(runner: Runner) -> bool:
        """Whether every part of ``runner``'s lockstep step has compiled code.

        An agent on the compiled engine (`rl.agents.tensor._compiled_engine.CompiledEngine`:
        TEQL, TLR) with no ``on_update`` hook and no per-episode work, on a
        problem whose environment steps in compiled code (`compiled_envs_apply`).
        """
        agent = runner.agent
        return (
            isinstance(getattr(agent, "engine_", None), CompiledEngine)
            and getattr(agent, "on_update", None) is None
            and type(agent).end_episode is Agent.end_episode
            and compiled_envs_apply(runner)
        )

    def advance(self, segment: Segment) -> int:
        """Play up to `BUDGET_AGENT_STEPS` agent-steps of ``segment``; returns those played.

        Finished episodes are filed into ``segment`` (`rl.loop.runner.Segment.book`).

        Raises
        ------
        ValueError
            If an update diverged or the environment returned a non-finite value.
        """
        if segment is not self._segment:  # a new segment starts with every copy reset
            self._segment = segment
            self.needs_reset[:] = True
        engine, runner, slots = self.engine, self.runner, segment.slots
        settings, rule = engine.settings()
        slot_arrays = SlotArrays(
            slots.ints, slots.floats, slots.running, self.needs_reset, runner.eval_every,
            runner.eval_episodes, slots.event_ints, slots.event_floats,
        )  # fmt: skip
        taken_total, room = 0, 0
        while True:
            status, taken, n_events, replica = run_steps(
                engine.arrays(), engine.generators, settings, rule, engine.visit_arrays(room),
                engine.scratch(), self.env, slot_arrays, self.work, segment.stop,
                BUDGET_AGENT_STEPS,
            )  # fmt: skip
            taken_total += taken
            if n_events:
                segment.book(n_events)
            room = runner.replicas if status == GROW else 0
            if status == GROW:
                continue
            if status == DIVERGED:
                raise engine.divergence(replica)
            if status == NOT_FINITE:
                raise non_finite_error(
                    runner.problem.env_id, replica, runner.seeds[replica],
                    float(self.work.rewards[replica]), self.env.sim.obs[replica],
                )  # fmt: skip
            if status == EVENTS_FULL and not n_events:
                raise RuntimeError("The fused runner's event buffer is smaller than B.")
            return taken_total
