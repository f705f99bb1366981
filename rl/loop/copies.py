"""The environment copies in compiled code: their arrays, step, reset, and the loop over them.

Where a problem's vector environment is a compiled environment
(`rl.envs.compiled.CompiledVectorEnv`: CartPole, Pendulum, the Highway twin)
with a uniform state grid and one action component, its B copies step,
encode and reset in compiled code: `step_envs` decodes the action bin
(`rl.problems.discretize.bin_value`, or the index itself for discrete actions)
or takes the agent's continuous draw, steps the copy
(`rl.envs.compiled.step_copy`), counts the truncation horizon and encodes the
observation (`rl.problems.discretize.bin_index`); `reset_envs` draws each
initial state exactly as ``env.reset(seed=...)`` draws it
(`rl.envs.compiled.reset_copy`) with the seed `rl.loop.lockstep.episode_seed`
gives. The fused loop (`rl.loop.fused`) calls both from inside its compiled
loop; `CompiledCopies` calls them once per lockstep step for an agent that
stays in Python (the array engine, DQN, SAC, ...), which spares a Python call
per copy and per reset. The results are those of the environment objects
(`rl.loop.stepped.ObjectSteps`), bit for bit.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from numba import njit
from numpy.typing import NDArray

from rl.envs import seeding_kernels
from rl.envs.compiled import CompiledVectorEnv, kernel_sources, reset_copy, step_copy
from rl.envs.seeding_kernels import episode_seed_kernel
from rl.jit import drop_stale
from rl.loop.lockstep import Lockstep, Segment
from rl.loop.replicas import StepResult, non_finite_error
from rl.loop.stepped import SteppedLoop
from rl.problems import Problem, discretize
from rl.problems.discretize import DiscreteGrid, GridArrays, UniformGrid, bin_index, bin_value

_UNUSED_GRID = UniformGrid(0.0, 1.0, 1)
"""Stands in for the action grid of discrete actions, so that `EnvArrays` keeps one type."""


class EnvArrays(NamedTuple):
    """The B environment copies as compiled loops step them.

    Attributes
    ----------
    sim : rl.envs.compiled.CopyArrays
        The copies' state, generators and observations (the environment's own named tuple).
    elapsed : ndarray of int64, shape (B,)
        Steps of every copy's episode so far.
    env_seeds, eval_seeds : ndarray of int64, shape (B,)
        Every replica's environment and evaluation stream seed.
    states, actions : rl.problems.discretize.GridArrays
        The observation and action grids (``actions`` unused for discrete actions).
    discrete_actions : bool
        Whether the environment's action is the action index itself.
    """

    sim: Any
    elapsed: NDArray[np.int64]
    env_seeds: NDArray[np.int64]
    eval_seeds: NDArray[np.int64]
    states: GridArrays
    actions: GridArrays
    discrete_actions: bool


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


def compiled_copies_apply(problem: Problem, vector: Any) -> bool:
    """Whether the copies of ``problem``'s vector environment can step in compiled code.

    A problem with a uniform state grid and one action component (a uniform
    grid or the index itself) whose vector environment is a
    `rl.envs.compiled.CompiledVectorEnv`: CartPole, Pendulum, the Highway twin.
    """
    return (
        isinstance(vector, CompiledVectorEnv)
        and problem.grids is not None
        and isinstance(problem.grids[0], UniformGrid)
        and isinstance(problem.grids[1], (UniformGrid, DiscreteGrid))
        and len(problem.action_dims) == 1
    )


def env_arrays(lockstep: Lockstep) -> EnvArrays:
    """Allocate the arrays of the B copies in compiled code (`compiled_copies_apply`).

    Drops this module's Numba cache if one of the environment's kernel sources
    is newer (`rl.envs.compiled.kernel_sources`).
    """
    replicas, problem = lockstep.replicas, lockstep.problem
    state_grid, action_grid = problem.grids
    discrete_actions = isinstance(action_grid, DiscreteGrid)
    sim = lockstep.env.vector.compiled_copies(replicas)
    drop_stale(__file__, loop_sources(sim))
    return EnvArrays(
        sim=sim,
        elapsed=np.zeros(replicas, dtype=np.int64),
        env_seeds=np.array([s.env_seed for s in lockstep.streams], dtype=np.int64),
        eval_seeds=np.array([s.eval_seed for s in lockstep.streams], dtype=np.int64),
        states=state_grid.kernel_arrays(),
        actions=(_UNUSED_GRID if discrete_actions else action_grid).kernel_arrays(),
        discrete_actions=discrete_actions,
    )


def loop_sources(sim: Any) -> list[str]:
    """Source files whose kernels this module compiles in for the copies ``sim``."""
    return [discretize.__file__, seeding_kernels.__file__, *kernel_sources(sim)]


@njit(cache=True)
def reset_slot(b, episode, k, env, states):
    """Reset replica ``b``'s copy for training episode ``episode`` (k < 0) or its evaluation k.

    The seed is `rl.loop.lockstep.episode_seed` of the replica's environment (or
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
def step_envs(env, draws, actions, running, next_states, rewards, terminated, truncated):
    """Step every running copy of ``env`` (an `EnvArrays`), as the fused loop steps it.

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
    """Reset the masked copies of ``env`` for their slots' episodes (`reset_slot`)."""
    for b in range(mask.shape[0]):
        if mask[b]:
            reset_slot(b, episodes[b], eval_index[b], env, states)


class CompiledCopies(SteppedLoop):
    """The agent in Python, its copies in compiled code, one lockstep step at a time.

    Parameters
    ----------
    lockstep : rl.loop.lockstep.Lockstep
        The run's parts; `compiled_copies_apply` holds for its problem and copies.
    """

    name = "compiled copies"

    def __init__(self, lockstep: Lockstep) -> None:
        super().__init__(lockstep)
        self.envs = env_arrays(lockstep)
        replicas = lockstep.replicas
        self._no_draws = Draws(np.zeros(replicas, dtype=bool), np.zeros((replicas, 1)))

    def _step_copies(
        self, actions: NDArray[np.int64], active: NDArray[np.bool_], states: NDArray[np.int64]
    ) -> tuple[StepResult, NDArray[np.int64]]:
        """Step the active copies in compiled code; returns the step and the next states.

        The step's ``observations`` are the copies' raw observations; the first replica
        with a non-finite reward or observation raises `non_finite_error`, as the objects'
        path does. Inactive rows of the next states are their current states.
        """
        parts, envs, replicas = self.lockstep, self.envs, self.lockstep.replicas
        drawn = parts.agent.continuous_actions_
        if drawn is None:
            draws = self._no_draws
        else:
            draws = Draws(drawn.mask, np.asarray(drawn.values, dtype=np.float64).reshape(-1, 1))
        actions = np.ascontiguousarray(actions, dtype=np.int64).reshape(replicas, -1)
        next_states = states.copy()
        rewards = np.zeros(replicas)
        terminated, truncated = (np.zeros(replicas, dtype=bool) for _ in range(2))
        bad = step_envs(envs, draws, actions, active, next_states, rewards, terminated, truncated)
        if bad >= 0:
            raise non_finite_error(
                parts.problem.env_id, bad, parts.seeds[bad], float(rewards[bad]), envs.sim.obs[bad]
            )
        return StepResult(envs.sim.obs, rewards, terminated, truncated), next_states

    def _reset(
        self, segment: Segment, mask: NDArray[np.bool_], states: NDArray[np.int64] | None
    ) -> NDArray[np.int64]:
        """Reset the masked copies in compiled code; returns all states."""
        fresh = self._fresh()
        if states is not None:
            fresh[:] = states
        reset_envs(self.envs, segment.slots.episode, segment.slots.eval_index, mask, fresh)
        return fresh

    def _fresh(self) -> NDArray[np.int64]:
        """Return a zero (B, state components) array of state indices."""
        return np.zeros((self.lockstep.replicas, len(self.lockstep.problem.state_dims)), np.int64)
