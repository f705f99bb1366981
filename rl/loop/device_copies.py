"""An array-engine run's environment copies on its device: CartPole and Pendulum, array API.

With the array engine (TEQL in any reading and TLR on NumPy, PyTorch or JAX,
`rl.agents.tensor._array_engine`) on a physical system
(`rl.envs.physics.PhysicsVectorEnv`: CartPole, Pendulum), the runner keeps the
copies on the engine's device. They step with the system's one definition of
its dynamics, ``dynamics(xp)`` on the backend's namespace (the function that
Numba compiles for the other engines), and the observations are encoded into
state indices and the actions decoded there. A lockstep step then passes no
state and no action through the host. Per step, the (B,) masks of the
running, exploring and training slots go up and one (B, 4) array comes down
(rewards, terminated, truncated, and whether the step is finite) for the
episode bookkeeping (`rl.loop.slots`), which stays on the host; that read is
the step's one wait for the device, after the update has been queued (a
non-finite copy or TD target makes that update change nothing, and the step
then raises). When episodes end, the new initial states go up: the host draws
them with the compiled copies' seeded reset (`rl.loop.copies.reset_envs`), as
every other engine does, so each episode of a seed starts from the same state
on every engine.

Equality. NumPy evaluates the dynamics as Numba does, bit for bit on the
development machine (the same C library's ``sin`` and ``cos``, unless
NumPy's SIMD versions differ from it in the last bit). PyTorch and JAX
compute ``sin`` and ``cos`` with their own vectorized code, which differs in the
last bit on a few per cent of the arguments. Rewards and states then agree to
about 1e-15, and the actions stay the same unless such a difference moves an
observation across a bin edge. `tests/rl/test_device_copies.py` compares
whole CartPole and Pendulum runs with the compiled engine.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from rl.agents.tensor._array_engine import ArrayEngine
from rl.agents.tensor.agent import TensorAgent
from rl.envs.physics import PhysicsVectorEnv
from rl.loop.copies import CompiledCopies, compiled_copies_apply, reset_envs
from rl.loop.lockstep import Lockstep, Segment
from rl.loop.replicas import StepResult, non_finite_error

Array = Any


def device_copies_apply(lockstep: Lockstep) -> bool:
    """Whether the run's copies can run on its agent's device (see the module docstring).

    A tensor agent on the array engine (not the reference engine, which runs
    the same class with each replica's generator draws and plays on the host
    copies), on a physical system whose copies step in compiled code
    (`rl.loop.copies.compiled_copies_apply`, whose seeded resets draw the
    initial states).
    """
    agent, vector = lockstep.agent, lockstep.env.vector
    return (
        isinstance(agent, TensorAgent)
        and isinstance(agent.engine_, ArrayEngine)
        and agent.engine_.name == "array"
        and isinstance(vector, PhysicsVectorEnv)
        and compiled_copies_apply(lockstep.problem, vector)
    )


class DeviceCopies(CompiledCopies):
    """The B copies of the run's physical system on its agent's device, one step per call.

    The compiled copies (`rl.loop.copies.CompiledCopies`) stay on the host to
    draw the initial states.

    Parameters
    ----------
    lockstep : rl.loop.lockstep.Lockstep
        The run's parts, for which `device_copies_apply` holds.
    """

    name = "device copies"

    def __init__(self, lockstep: Lockstep) -> None:
        super().__init__(lockstep)
        self.engine = engine = lockstep.agent.engine_
        self.space = space = engine.space
        host, problem = self.envs, lockstep.problem
        self.dynamics = lockstep.env.vector.single_env.dynamics(space.xp)
        replicas, dims = host.sim.obs.shape
        self.obs = space.zeros((replicas, dims), np.float64)
        self.elapsed = space.zeros((replicas,), np.int64)
        grid = host.states
        self._low, self._scale = space.put(grid.low), space.put(grid.scale)
        self._last = space.put(grid.last.astype(np.float64))
        action_grid = problem.grids[1]
        indices = np.arange(problem.action_dims[0])
        table = indices if host.discrete_actions else action_grid.value(indices[:, None])[:, 0]
        self._actions = space.put(np.asarray(table, dtype=np.float64))
        self._step_device = space.compile(self._step_core)
        self._reset_device = space.compile(self._reset_core)

    def _play(self, segment: Segment, states: Array) -> tuple[StepResult, Array]:
        """Play one lockstep step of ``segment``'s running slots from the device ``states``.

        The agent acts, the copies step, and the agent learns from the slots on a
        training episode, all on the device; the host waits for the device once,
        for the step's report. Returns the step (host rewards and flags; no
        observations) and the next state indices (device).

        Raises
        ------
        ValueError
            `rl.loop.replicas.non_finite_error` for the first running copy whose
            reward or state is not finite, else the agent's divergence error
            for a TD target that is not finite; the agent has not learned then.
        """
        engine, space, parts = self.engine, self.space, self.lockstep
        active = segment.running
        greedy = segment.greedy if segment.any_greedy else None
        flat, explored, drawn = engine.act_arrays(states, active, greedy)
        self.obs, self.elapsed, next_states, rewards, terminated, finite, report = (
            self._step_device(self.obs, self.elapsed, flat, explored, drawn, space.put(active))
        )
        if segment.any_training:  # learns unless a copy or a target is not finite
            batch = (states, flat, rewards, next_states, terminated, segment.training, finite)
            engine.observe_arrays(*batch)
        report = np.asarray(space.host(report))  # the step's one wait for the device
        bad = np.flatnonzero(active & (report[:, 3] == 0))
        if bad.size:
            b = int(bad[0])
            raise non_finite_error(
                parts.problem.env_id, b, parts.seeds[b], float(report[b, 0]),
                np.asarray(space.host(self.obs))[b],
            )  # fmt: skip
        engine.check_targets()
        result = StepResult(None, report[:, 0], report[:, 1] > 0, report[:, 2] > 0)
        return result, next_states

    def _reset(self, segment: Segment, mask: NDArray[np.bool_], states: Array | None) -> Array:
        """Draw the masked copies' initial states on the host (`reset_envs`); see `reset`."""
        fresh = self._fresh()
        reset_envs(self.envs, segment.slots.episode, segment.slots.eval_index, mask, fresh)
        return self.reset(mask, fresh, states)

    def reset(
        self, mask: NDArray[np.bool_], fresh: NDArray[np.int64], states: Array | None
    ) -> Array:
        """Take the masked copies' new initial states from the host copies; return all states.

        ``fresh`` holds the masked copies' encoded initial states (from
        `rl.loop.copies.reset_envs`), ``states`` the others' (None: every copy resets).
        """
        space = self.space
        fresh = space.put(fresh, space.ops.int64)
        self.obs, self.elapsed, states = self._reset_device(
            self.obs, self.elapsed, fresh if states is None else states, space.put(mask),
            space.put(self.envs.sim.obs), fresh,
        )  # fmt: skip
        return states

    def _reset_core(
        self, obs: Array, elapsed: Array, states: Array, mask: Array, new_obs: Array,
        new_states: Array,
    ) -> tuple[Array, Array, Array]:  # fmt: skip
        """Take the masked rows of the new observations and states; zero their step counts."""
        where = self.space.ops.where
        return (
            where(mask[:, None], new_obs, obs),
            where(mask, 0, elapsed),
            where(mask[:, None], new_states, states),
        )

    def _step_core(
        self, obs: Array, elapsed: Array, flat: Array, explored: Array | None,
        drawn: tuple[Array, ...], active: Array,
    ) -> tuple[Array, ...]:  # fmt: skip
        """Step the copies as array operations (compiled by ``jax.jit`` on JAX).

        The action is the agent's continuous draw where it explored with one (the
        released reading), else the point of its bin; inactive copies keep their
        state and get reward 0 and both flags False, as `rl.loop.copies.step_envs` does.
        """
        space = self.space
        ops, int64, float64 = space.ops, space.ops.int64, space.ops.float64
        action = self._actions[flat]
        if drawn:
            action = ops.where(explored, drawn[0], action)
        moved, reward, terminated = self.dynamics(*(obs[:, j] for j in range(obs.shape[1])), action)
        moved = ops.where(active[:, None], ops.stack(moved, axis=1), obs)
        reward = ops.where(active, reward, 0.0)
        terminated = terminated & active
        elapsed = elapsed + space.astype(active, int64)
        truncated = active & False
        if self.envs.sim.max_steps >= 0:
            truncated = active & (elapsed >= self.envs.sim.max_steps)
        finite = space.xp.isfinite(reward) & space.xp.all(space.xp.isfinite(moved), axis=1)
        flags = (terminated, truncated, finite)
        report = ops.stack([reward, *(space.astype(f, float64) for f in flags)], axis=1)
        all_finite = space.xp.all(finite | ~active)
        return moved, elapsed, self._encode(moved), reward, terminated, all_finite, report

    def _encode(self, obs: Array) -> Array:
        """Return the state index vectors of ``obs`` (B, D), as `bin_index` computes them.

        (`rl.problems.discretize.bin_index`: floored or rounded, NaN to bin 0, clipped.)
        """
        space = self.space
        ops, xp = space.ops, space.xp
        scaled = (obs - self._low) * self._scale
        raw = xp.floor(scaled) if self.envs.states.centre else xp.round(scaled)
        raw = ops.where(raw >= self._last, self._last, raw)
        raw = ops.where(xp.isnan(raw) | (raw <= 0.0), 0.0, raw)
        return space.astype(raw, ops.int64)
