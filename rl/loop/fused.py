"""The fused runner: whole stretches of lockstep steps in one compiled call.

Where every part of a lockstep step has compiled code (`FusedLoop.applies`: a
tensor agent on the compiled engine, TEQL in any reading or TLR, on CartPole or
Pendulum), `run_steps` plays up to ``budget`` agent-steps in one Numba call:
the agent's action choice (`rl.agents._kernels.act_kernel`), decoding the
action bin (`rl.problems.discretize.bin_value`) or the agent's continuous draw, the
physics (`rl.envs.cartpole.cartpole_row`, `rl.envs.pendulum.pendulum_row`),
truncation, encoding the observation (`rl.problems.discretize.bin_index`), the update
(`rl.agents._kernels.observe_kernel`), the slot bookkeeping (`rl.loop.slots`) and
the resets, whose initial states are drawn exactly as ``env.reset(seed=...)``
draws them (`rl.envs.seeding_kernels`). Python then files the finished
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
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from rl.agents import _kernels, _update_kernels
from rl.agents._kernels import TARGET, act_kernel, observe_kernel
from rl.agents.base import Agent
from rl.agents.tensor_agent import TensorAgent
from rl.envs import cartpole, pendulum, seeding_kernels
from rl.envs.cartpole import ContinuousCartPole, cartpole_row
from rl.envs.pendulum import BoundedPendulum, pendulum_row
from rl.envs.seeding_kernels import episode_seed_kernel, seed_pcg64, uniform_into
from rl.loop import slots
from rl.loop.replicas import non_finite_error
from rl.loop.slots import EPISODE, EVAL_INDEX, LENGTH, RETURN, end_episode
from rl.numba_cache import drop_stale
from rl.problems import discretize
from rl.problems.discretize import UniformGrid, bin_index, bin_value

if TYPE_CHECKING:
    from rl.loop.runner import Runner, _Segment

drop_stale(
    __file__,
    [m.__file__ for m in (_kernels, _update_kernels, discretize, slots, cartpole, pendulum,
                          seeding_kernels)],
)  # fmt: skip

# Physics of `run_steps`.
CARTPOLE, PENDULUM = 0, 1
_PHYSICS = {ContinuousCartPole: CARTPOLE, BoundedPendulum: PENDULUM}

# Why `run_steps` returned.
DONE, BUDGET, EVENTS_FULL, GROW, DIVERGED, NOT_FINITE = range(6)

BUDGET_AGENT_STEPS = 65_536
"""Agent-steps one `run_steps` call plays at most before Python sees the results."""
MIN_EVENT_ROWS = 4096
"""Rows of the event buffer at least (finished episodes one `run_steps` call can book)."""


@njit(cache=True)
def _reset_slot(b, episode, k, env, states):
    """Reset replica ``b``'s copy for training episode ``episode`` (k < 0) or its evaluation k.

    The seed is `rl.loop.runner.episode_seed` of the replica's environment (or
    evaluation) stream seed; the initial state is drawn as the environment's
    ``reset(seed=)`` draws it, then encoded into ``states[b]``.
    """
    (_, phys, elapsed, _, low, high, env_seeds, eval_seeds, rng, s_low, s_scale, s_last,
     s_centre, _, _, _, _, _) = env  # fmt: skip
    if k < 0:
        seed = episode_seed_kernel(env_seeds[b], episode, -1)
    else:
        seed = episode_seed_kernel(eval_seeds[b], episode, k)
    seed_pcg64(seed, rng)
    uniform_into(rng, low, high, phys[b])
    elapsed[b] = 0
    for j in range(states.shape[1]):
        states[b, j] = bin_index(phys[b, j], s_low[j], s_scale[j], s_last[j], s_centre)


@njit(cache=True)
def _physics_step(b, env, actions, drawn, drawn_mask, next_states):
    """Step replica ``b``'s copy; returns (reward, terminated, truncated, all finite)."""
    (physics, phys, elapsed, max_steps, _, _, _, _, _, s_low, s_scale, s_last, s_centre,
     a_low, a_high, a_width, a_last, a_centre) = env  # fmt: skip
    if drawn_mask[b]:
        a = drawn[b, 0]
    else:
        a = bin_value(actions[b, 0], a_low[0], a_high[0], a_width[0], a_last[0], a_centre)
    if physics == CARTPOLE:
        reward, terminated = cartpole_row(phys[b], a, phys[b])
    else:
        reward, terminated = pendulum_row(phys[b], a, phys[b])
    finite = math.isfinite(reward)
    for j in range(phys.shape[1]):
        finite = finite and math.isfinite(phys[b, j])
        next_states[b, j] = bin_index(phys[b, j], s_low[j], s_scale[j], s_last[j], s_centre)
    elapsed[b] += 1
    truncated = max_steps >= 0 and elapsed[b] >= max_steps
    return reward, terminated, truncated, finite


@njit(cache=True)
def run_steps(agent, table, generators, env, slots, work, stop, budget):
    """Play lockstep steps of every running slot until a reason to return; see the module doc.

    Returns (status, agent-steps played, events booked, replica): the replica
    that diverged or saw a non-finite value, else -1.
    """
    (factors, offsets, dims, n_state, n_states, epsilon, rule, c, floats, ints, steps,
     continuous, low, high, drawn, drawn_mask) = agent  # fmt: skip
    keys, slot_rows, row_keys, counts, delta, used = table
    (slot_ints, slot_floats, running, needs_reset, eval_every, eval_episodes, event_ints,
     event_floats) = slots  # fmt: skip
    states, actions, next_states, rewards, terminated, ended, training, greedy, record = work
    replicas = states.shape[0]
    taken, n_events = 0, 0
    for b in range(replicas):
        if needs_reset[b]:
            _reset_slot(b, slot_ints[b, EPISODE], slot_ints[b, EVAL_INDEX], env, states)
            needs_reset[b] = False
    while True:
        any_running, any_training = False, False
        for b in range(replicas):
            greedy[b] = running[b] and slot_ints[b, EVAL_INDEX] >= 0
            training[b] = running[b] and slot_ints[b, EVAL_INDEX] < 0
            any_running = any_running or running[b]
            any_training = any_training or training[b]
        if not any_running:
            return DONE, taken, n_events, -1
        if taken >= budget:
            return BUDGET, taken, n_events, -1
        if n_events + replicas > event_ints.shape[0]:
            return EVENTS_FULL, taken, n_events, -1
        if keys.shape[0] > 0 and used[0] + replicas > row_keys.shape[0]:
            return GROW, taken, n_events, -1
        act_kernel(
            factors, offsets, dims, n_state, n_states, states, running, greedy, epsilon, rule, c,
            keys, slot_rows, row_keys, counts, delta, used, generators, actions, continuous, low,
            high, drawn, drawn_mask,
        )  # fmt: skip
        for b in range(replicas):
            ended[b] = False
            if not running[b]:
                continue
            reward, terminated[b], truncated, finite = _physics_step(
                b, env, actions, drawn, drawn_mask, next_states
            )
            if not finite:
                rewards[b] = reward
                return NOT_FINITE, taken, n_events, b
            rewards[b] = reward
            ended[b] = terminated[b] or truncated
            taken += 1
        if any_training:
            bad = observe_kernel(
                factors, offsets, dims, n_state, n_states, states, actions, rewards, next_states,
                terminated, training, floats, ints, keys, slot_rows, row_keys, counts, delta,
                used, steps, epsilon, record,
            )  # fmt: skip
            if bad >= 0:
                return DIVERGED, taken, n_events, bad
        for b in range(replicas):
            if not running[b]:
                continue
            slot_floats[b, RETURN] += rewards[b]
            slot_ints[b, LENGTH] += 1
            if not ended[b]:
                for j in range(states.shape[1]):
                    states[b, j] = next_states[b, j]
                continue
            restart, n_events = end_episode(
                b, slot_ints, slot_floats, running, eval_every, eval_episodes, stop, event_ints,
                event_floats, n_events,
            )  # fmt: skip
            if restart:
                _reset_slot(b, slot_ints[b, EPISODE], slot_ints[b, EVAL_INDEX], env, states)


class FusedLoop:
    """The arrays `run_steps` works on for one `rl.loop.runner.Runner`, and its Python side.

    Parameters
    ----------
    runner : rl.loop.runner.Runner
        A runner for which `applies` holds.
    """

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        agent = runner.agent
        self.compiled = agent.compiled_step()
        vector = runner.env.vector
        state_grid, action_grid = runner.problem.grids
        replicas = runner.replicas
        self.event_capacity = max(MIN_EVENT_ROWS, 4 * replicas)
        """Rows of the event buffer (`run_steps` keeps B free before each lockstep step)."""
        s_low, _, s_scale, _, s_last, s_centre = state_grid.kernel_arrays()
        a_low, a_high, _, a_width, a_last, a_centre = action_grid.kernel_arrays()
        single = vector.single_env
        reset_low, reset_high = single.reset_interval
        max_steps = -1 if vector.max_episode_steps is None else int(vector.max_episode_steps)
        self.phys = np.zeros((replicas, vector.state_dim))
        self.env = (
            _PHYSICS[single], self.phys, np.zeros(replicas, dtype=np.int64), max_steps,
            float(reset_low), float(reset_high),
            np.array([s.env_seed for s in runner.streams], dtype=np.int64),
            np.array([s.eval_seed for s in runner.streams], dtype=np.int64),
            np.zeros(4, dtype=np.uint64), s_low, s_scale, s_last, s_centre, a_low, a_high,
            a_width, a_last, a_centre,
        )  # fmt: skip
        n_state, n_modes = len(runner.problem.state_dims), len(runner.problem.shape)
        self.rewards = np.zeros(replicas)  # read back to name a non-finite reward
        self.work = (
            np.zeros((replicas, n_state), dtype=np.int64),
            np.zeros((replicas, n_modes - n_state), dtype=np.int64),
            np.zeros((replicas, n_state), dtype=np.int64), self.rewards,
            np.zeros(replicas, dtype=bool), np.zeros(replicas, dtype=bool),
            np.zeros(replicas, dtype=bool), np.zeros(replicas, dtype=bool), self.compiled.record,
        )  # fmt: skip
        self.needs_reset = np.zeros(replicas, dtype=bool)
        self._segment: Any = None

    @staticmethod
    def applies(runner: Runner) -> bool:
        """Whether every part of ``runner``'s lockstep step has compiled code.

        A tensor agent (TEQL, TLR) on the compiled engine with no ``on_update``
        hook and no per-episode work, on a problem with grids whose vector
        environment is a bundled physical system (CartPole, Pendulum) with one
        action component.
        """
        agent, problem = runner.agent, runner.problem
        vector = runner.env.vector
        return (
            isinstance(agent, TensorAgent)
            and agent.compiled_step() is not None
            and getattr(agent, "on_update", None) is None
            and type(agent).end_episode is Agent.end_episode
            and getattr(vector, "single_env", None) in _PHYSICS
            and problem.grids is not None
            and all(isinstance(grid, UniformGrid) for grid in problem.grids)
            and len(problem.action_dims) == 1
        )

    def advance(self, segment: _Segment) -> int:
        """Play up to `BUDGET_AGENT_STEPS` agent-steps of ``segment``; returns those played.

        Finished episodes are filed into ``segment`` (`rl.loop.runner._Segment.book`).

        Raises
        ------
        ValueError
            If an update diverged or the environment returned a non-finite value.
        """
        if segment is not self._segment:  # a new segment starts with every copy reset
            self._segment = segment
            self.needs_reset[:] = True
        compiled, agent, slots = self.compiled, self.runner.agent, segment.slots
        taken_total = 0
        while True:
            agent_arrays = (
                compiled._factors(), compiled.offsets, compiled.dims, compiled.n_state,
                compiled.n_states, agent.epsilon_, compiled.explore_rule, compiled.c,
                compiled.floats, compiled.ints, agent.steps_, compiled.continuous, compiled.low,
                compiled.high, compiled.drawn, compiled.drawn_mask,
            )  # fmt: skip
            slot_arrays = (
                slots.ints, slots.floats, slots.running, self.needs_reset,
                self.runner.eval_every, self.runner.eval_episodes, slots.event_ints,
                slots.event_floats,
            )  # fmt: skip
            status, taken, n_events, replica = run_steps(
                agent_arrays, compiled._table(), compiled.generators, self.env, slot_arrays,
                self.work, segment.stop, BUDGET_AGENT_STEPS,
            )  # fmt: skip
            taken_total += taken
            if n_events:
                segment.book(n_events)
            if status == GROW:
                compiled.visits.reserve(self.runner.replicas)
                continue
            if status == DIVERGED:
                agent._diverged(replica, float(compiled.record[TARGET, replica]))
            if status == NOT_FINITE:
                raise non_finite_error(
                    self.runner.problem.env_id, replica, self.runner.seeds[replica],
                    float(self.rewards[replica]), self.phys[replica],
                )  # fmt: skip
            if status == EVENTS_FULL and not n_events:
                raise RuntimeError("The fused runner's event buffer is smaller than B.")
            return taken_total


def warm() -> None:
    """Compile (or load from Numba's on-disk cache) `run_steps` on a tiny CartPole run.

    Every agent and physics the fused runner serves passes the same argument
    types, so one run compiles the code that later runs, in this process and
    in processes started after it, find.
    """
    from rl.runs.config import TrainConfig
    from rl.runs.training import build

    config = TrainConfig(env="cartpole", agent="teql-released", seeds=2, eval_every=1, out="-")
    runner, _ = build(config)
    for _ in runner.episodes(0, 2):
        pass
    runner.close()
