"""The loops that play one lockstep step per call in Python, and the one through the objects.

`SteppedLoop` is the step of `rl.loop.runner` written once: the agent acts,
the copies step, the agent learns from the slots on a training episode, ended
training episodes reach ``agent.end_episode``, the slots move on
(`rl.loop.slots.end_episodes`) and the slots whose episode ended are reset.
Its subclasses say how the copies step and reset: `ObjectSteps` through the
environment objects (`rl.loop.replicas.ReplicaEnvs` and the problem's encode
and decode), `rl.loop.copies.CompiledCopies` in compiled code, and
`rl.loop.device_copies.DeviceCopies` on the agent's device.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from rl.agents.base import Transitions
from rl.loop.lockstep import Lockstep, Segment, episode_seed
from rl.loop.replicas import StepResult, non_finite_error
from rl.loop.slots import end_episodes


def _check_finite(
    step: StepResult, active: NDArray[np.bool_], env_id: str, seeds: Sequence[int]
) -> None:
    observations = step.observations
    numeric = observations.dtype.kind in "fc"
    # One reduction each: a sum is finite when every term is (or, rarely, overflows: look then).
    if math.isfinite(step.rewards.sum()) and (not numeric or math.isfinite(observations.sum())):
        return
    bad = active & ~np.isfinite(step.rewards)
    if numeric:
        bad |= active & ~np.isfinite(observations.reshape(len(active), -1)).all(axis=1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise non_finite_error(env_id, i, seeds[i], step.rewards[i], observations[i])


class SteppedLoop(abc.ABC):
    """One lockstep step per call, the copies stepped and reset by the subclass.

    Parameters
    ----------
    lockstep : Lockstep
        The run's parts.
    """

    name: str

    def __init__(self, lockstep: Lockstep) -> None:
        self.lockstep = lockstep
        self.event_rows = lockstep.replicas
        """Rows of the event buffers: one lockstep step ends at most B episodes."""
        self._restart = np.zeros(lockstep.replicas, dtype=bool)

    def start(self, segment: Segment) -> Callable[[], int]:
        """Reset every copy for ``segment``; return a callable that plays one lockstep step."""
        states = self._reset(segment, np.ones(self.lockstep.replicas, dtype=bool), None)

        def advance() -> int:
            nonlocal states
            taken = int(segment.running.sum())
            states = self._step(segment, states)
            return taken

        return advance

    def _step(self, segment: Segment, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """One lockstep step of every running slot; returns the next states."""
        parts = self.lockstep
        step, next_states = self._play(segment, states)
        ended = step.terminated | step.truncated  # both False for inactive slots
        trained = ended & segment.training
        if trained.any():
            parts.agent.end_episode(trained)
        slots = segment.slots
        restart = self._restart
        n_events = end_episodes(
            ended, step.rewards, slots.ints, slots.floats, slots.running, parts.eval_every,
            parts.eval_episodes, segment.stop, slots.event_ints, slots.event_floats, restart,
        )  # fmt: skip
        if not ended.any():
            return next_states
        if n_events:
            segment.book(n_events)
        segment.update_masks()
        return self._reset(segment, restart, next_states) if restart.any() else next_states

    def _play(
        self, segment: Segment, states: NDArray[np.int64]
    ) -> tuple[StepResult, NDArray[np.int64]]:
        """Let the agent act, step the copies, let the agent learn; return the step, next states."""
        agent, active, training = self.lockstep.agent, segment.running, segment.training
        actions = agent.act(states, active, segment.greedy if segment.any_greedy else None)
        step, next_states = self._step_copies(actions, active, states)
        if segment.any_training:
            batch = (states, actions, step.rewards, next_states, step.terminated, training)
            agent.observe(Transitions(*batch))
        return step, next_states

    @abc.abstractmethod
    def _step_copies(
        self, actions: NDArray[np.int64], active: NDArray[np.bool_], states: NDArray[np.int64]
    ) -> tuple[StepResult, NDArray[np.int64]]:
        """Step the active copies with the agent's ``actions``; returns the step and next states."""

    @abc.abstractmethod
    def _reset(
        self, segment: Segment, mask: NDArray[np.bool_], states: NDArray[np.int64] | None
    ) -> NDArray[np.int64]:
        """Reset the masked slots for the episode their phase says; returns all states."""


class ObjectSteps(SteppedLoop):
    """The copies step through the environment objects, one lockstep step at a time.

    Per step the problem decodes the actions (`_env_actions`),
    `rl.loop.replicas.ReplicaEnvs` steps the active copies and the problem
    encodes their observations; copy i is reset with `episode_seed` of its
    replica's environment (or evaluation) stream seed and the episode.
    """

    name = "objects"

    def _step_copies(
        self, actions: NDArray[np.int64], active: NDArray[np.bool_], states: NDArray[np.int64]
    ) -> tuple[StepResult, NDArray[np.int64]]:
        """Step the active copies' objects; a non-finite value raises `non_finite_error`."""
        parts = self.lockstep
        step = parts.env.step(self._env_actions(actions), active)
        _check_finite(step, active, parts.problem.env_id, parts.seeds)
        return step, parts.problem.encode(step.observations)

    def _env_actions(self, actions: NDArray[np.int64]) -> NDArray:
        """Return the environment actions: bin values, or the agent's continuous draws.

        Replicas in ``agent.continuous_actions_.mask`` execute the drawn
        continuous values (the released code's random actions,
        `rl.agents.base.ContinuousActions`); the others ``problem.decode(actions)``.
        """
        decoded = self.lockstep.problem.decode(actions)
        drawn = self.lockstep.agent.continuous_actions_
        if drawn is None or not drawn.mask.any():
            return decoded
        decoded = np.array(decoded, dtype=np.float64, copy=True)
        decoded[drawn.mask] = drawn.values[drawn.mask].reshape(decoded[drawn.mask].shape)
        return decoded

    def _reset(
        self, segment: Segment, mask: NDArray[np.bool_], states: NDArray[np.int64] | None
    ) -> NDArray[np.int64]:
        """Reset the masked copies' objects with their episodes' seeds; returns all states."""
        parts, slots = self.lockstep, segment.slots
        seeds = np.zeros(parts.replicas, dtype=np.int64)
        for i in np.flatnonzero(mask).tolist():
            episode, k = int(slots.episode[i]), int(slots.eval_index[i])
            stream = parts.streams[i]
            seeds[i] = (
                episode_seed(stream.env_seed, episode)
                if k < 0
                else episode_seed(stream.eval_seed, episode, k)
            )
        fresh = parts.problem.encode(parts.env.reset(seeds.tolist(), mask))
        if states is None or mask.all():
            return fresh
        return np.where(mask[:, None], fresh, states)
