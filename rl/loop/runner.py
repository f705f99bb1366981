"""B replicas (one per seed) stepped in lockstep, every slot always busy.

Each replica plays its own sequence of episodes in its own slot of the batch:
training episode 1, 2, ..., and after every training episode whose index is a
multiple of ``eval_every`` its ``eval_episodes`` greedy evaluation episodes
(no exploration, no learning). When a replica's episode ends, the replica is
reset and starts its next episode at the next lockstep step, whatever the other
replicas are doing (Gymnasium's autoreset idea), so no slot idles while
another replica's episode runs long. The only idle slots left are at a
*barrier*: `Runner.episodes` stops every replica at the end of a given episode
(the run's checkpoint boundaries), so that a checkpoint holds the agent alone.

Seeding. Replica i has the integer seed ``seed + i``; `rl.seeding.spawn_replicas`
gives it environment, agent (init, explore) and evaluation streams. Its copy is
reset at the start of training episode e with ``episode_seed(env_seed_i, e)``,
and for greedy evaluation episode k after training episode e with
``episode_seed(eval_seed_i, e, k)``. Every episode's environment randomness is
a pure function of (seed, episode), agents draw only from their own replica's
streams, and a replica's sequence of agent calls does not depend on the others:
a seed's results are bitwise the same whatever B and whatever the barriers.

Per lockstep step: ``actions = agent.act(states, active, greedy)`` (``greedy``
marks the slots on an evaluation episode), the environment steps with
``problem.decode(actions)`` (or, for the replicas in
``agent.continuous_actions_.mask``, the agent's continuous draws), and
``agent.observe`` learns from the slots on a training episode. Termination
stops bootstrapping; a truncation is passed as ``terminated=False`` and keeps
it (the agent applies this rule). When a training episode ends,
``agent.end_episode`` is called with that replica's mask.

Where every part of that step has compiled code (TEQL and TLR on CartPole,
Pendulum and the Highway twin), `rl.loop.fused` plays the same steps, many at a
time, in one compiled call. Where only the environment has (any other agent on
those problems: the array engine, DQN, SAC, ...), the agent's calls stay in
Python and the copies step, encode and reset in compiled code
(`rl.loop.fused.step_envs`, `rl.loop.fused.reset_envs`), which spares a
Python call per copy and per reset. The results are bitwise the same
(``fused=False`` forces the step-by-step loop through the environment objects).
With the array engine on CartPole or Pendulum the copies live on the agent's
device instead (`rl.loop.device_copies`), and the states, actions and the
agent's learning stay there; the results equal the compiled engine's to the
last bits of PyTorch's and JAX's ``sin`` and ``cos``.

References
----------
Algorithm 3 of the TEQL paper (the episode loop around each agent's step), and
its experimental protocol: one greedy episode after every 10th training episode.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from rl.agents.base import Agent, Transitions
from rl.loop.device_copies import DeviceCopies, device_copies_apply
from rl.loop.fused import (
    Draws,
    EnvArrays,
    FusedLoop,
    compiled_envs_apply,
    env_arrays,
    reset_envs,
    step_envs,
)
from rl.loop.replicas import ReplicaEnvs, StepResult, non_finite_error
from rl.loop.slots import (
    EV_EPISODE,
    EV_GREEDY,
    EV_LENGTH,
    EV_REPLICA,
    EV_RETURN,
    Slots,
    end_episodes,
)
from rl.problems import Problem
from rl.seeding import ReplicaStreams


class EpisodeResult(NamedTuple):
    """Training episode ``episode`` of every replica, and its evaluation if one was due.

    Attributes
    ----------
    episode : int
        1-based training episode index.
    returns, lengths : ndarray, shape (B,)
        Undiscounted training return and number of steps of every replica.
    greedy_returns : ndarray, shape (B,)
        Mean greedy return of the evaluation after this episode; NaN if none.
    """

    episode: int
    returns: NDArray[np.float64]
    lengths: NDArray[np.int64]
    greedy_returns: NDArray[np.float64]


def episode_seed(base: int, *indices: int) -> int:
    """Seed of one environment reset, derived from a replica's stream seed and episode indices."""
    return int(np.random.SeedSequence([int(base), *map(int, indices)]).generate_state(1)[0])


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


class Segment:
    """Bookkeeping of `Runner.episodes` between two barriers: the slots and the results.

    Results are kept only for the episodes some replica has finished and not
    all have (at most the spread between the fastest and the slowest replica).
    """

    def __init__(self, start: int, stop: int, replicas: int, capacity: int) -> None:
        self.start = start
        self.stop = stop
        self.replicas = replicas
        self.slots = Slots(start, replicas, capacity)
        self.results: dict[int, EpisodeResult] = {}
        self.finished: dict[int, int] = {}  # episode -> replicas done with it
        self.update_masks()

    @property
    def running(self) -> NDArray[np.bool_]:
        """False for the replicas waiting at the barrier (a view)."""
        return self.slots.running

    def update_masks(self) -> None:
        """Recompute which running slots are on an evaluation or a training episode."""
        evaluating = self.slots.eval_index >= 0
        self.greedy = self.running & evaluating
        self.training = self.running & ~evaluating
        self.any_greedy = bool(self.greedy.any())
        self.any_training = bool(self.training.any())

    def book(self, n_events: int) -> None:
        """File the first ``n_events`` events of the slots' buffers into the result rows."""
        ints = self.slots.event_ints[:n_events]
        floats = self.slots.event_floats[:n_events]
        for episode in np.unique(ints[:, EV_EPISODE]).tolist():
            rows = ints[:, EV_EPISODE] == episode
            replicas = ints[rows, EV_REPLICA]
            if episode not in self.results:
                b = self.replicas
                self.results[episode] = EpisodeResult(
                    episode, np.zeros(b), np.zeros(b, dtype=np.int64), np.full(b, np.nan)
                )
                self.finished[episode] = 0
            result = self.results[episode]
            result.returns[replicas] = floats[rows, EV_RETURN]
            result.lengths[replicas] = ints[rows, EV_LENGTH]
            result.greedy_returns[replicas] = floats[rows, EV_GREEDY]
            self.finished[episode] += len(replicas)

    def pop_complete(self, episode: int) -> EpisodeResult | None:
        """Remove and return the result of ``episode`` once every replica has finished it."""
        if self.finished.get(episode, 0) < self.replicas:
            return None
        del self.finished[episode]
        return self.results.pop(episode)

    def lower_stop(self) -> None:
        """Move the barrier to the furthest episode any replica has started (or waits at)."""
        self.stop = min(self.stop, int(self.slots.episode.max()))


class Runner:
    """Training and evaluation episodes of B replicas of one agent on one problem.

    Parameters
    ----------
    problem : Problem
        The discretized environment.
    agent : Agent
        An agent with ``len(streams)`` replicas, built from ``[s.agent for s in streams]``.
    streams : sequence of ReplicaStreams
        One per replica (see `rl.seeding.spawn_replicas`).
    eval_every : int
        Evaluate after training episodes whose index is a multiple of this; 0 never.
    eval_episodes : int
        Greedy episodes per evaluation.
    fused : bool
        Play whole stretches of episodes in one compiled call (`rl.loop.fused`)
        wherever that applies (`rl.loop.fused.FusedLoop.applies`), else step the
        environment copies in compiled code where that applies
        (`rl.loop.fused.compiled_envs_apply`); False always steps through the
        agent and environment objects, one lockstep step at a time. Results
        are bitwise the same either way.
    """

    def __init__(
        self,
        problem: Problem,
        agent: Agent,
        streams: Sequence[ReplicaStreams],
        *,
        eval_every: int = 10,
        eval_episodes: int = 1,
        fused: bool = True,
    ) -> None:
        self.problem = problem
        self.agent = agent
        self.streams = list(streams)
        self.seeds = [s.seed for s in self.streams]
        self.eval_every = eval_every
        self.eval_episodes = eval_episodes
        self.env = ReplicaEnvs(problem, len(self.streams), self.seeds)
        self.agent_steps = 0
        """Agent-steps played so far (training and evaluation, summed over replicas)."""
        self._restart = np.zeros(self.replicas, dtype=bool)
        self._segment: Segment | None = None
        self.fused = fused
        self._fused: FusedLoop | None = None  # made by `_fused_loop` when first needed
        self._env_arrays: EnvArrays | None = None  # made by `_compiled_copies` when first needed
        self._envs: EnvArrays | None = None  # the compiled copies of the segment playing, or None
        self._device_arrays: DeviceCopies | None = None  # made by `_device_copies` when needed
        self._device: DeviceCopies | None = None  # the device copies of the segment, or None

    @property
    def replicas(self) -> int:
        """Number of replicas B."""
        return len(self.streams)

    def episodes(
        self, start: int, stop: int, abandon: Callable[[], bool] | None = None
    ) -> Iterator[EpisodeResult]:
        """Play training episodes ``start + 1 .. stop`` of every replica, with their evaluations.

        Replicas run ahead of one another freely; results are yielded in episode
        order, each as soon as every replica has finished that episode (and its
        evaluation). When the iterator is exhausted every replica has finished
        episode ``stop`` (or the lowered barrier, see `request_stop`) and no
        episode is in progress, so the agent's state is a clean checkpoint.

        Parameters
        ----------
        start : int
            Training episodes already completed by every replica.
        stop : int
            The barrier: the last training episode to play (> ``start``).
        abandon : callable, optional
            Asked after every lockstep step (every compiled stretch of steps,
            `rl.loop.fused`); when it returns True the iterator ends at once and
            the episodes in progress are dropped: their learning stays in the
            agent, which is then no clean checkpoint (a run keeps its last one
            and replays those episodes on resume).

        Yields
        ------
        EpisodeResult
        """
        if stop <= start:
            raise ValueError(f"The 'stop' parameter must exceed start={start}. Got {stop}.")
        fused = self._fused_loop()
        if fused is not None:
            segment = Segment(start, stop, self.replicas, fused.event_capacity)
            advance = functools.partial(fused.advance, segment)
        else:
            segment = Segment(start, stop, self.replicas, self.replicas)
            advance = self._stepper(segment)
        self._segment = segment
        pending = start + 1  # the next episode to yield
        try:
            while pending <= segment.stop:
                self.agent_steps += advance()
                if abandon is not None and abandon():
                    return
                while pending <= segment.stop and (result := segment.pop_complete(pending)):
                    yield result
                    pending += 1
        finally:
            self._segment = None

    def _fused_loop(self) -> FusedLoop | None:
        """Return the fused runner if ``fused`` is on and it applies now (hooks can change)."""
        if not self.fused or not FusedLoop.applies(self):
            return None
        if self._fused is None:
            self._fused = FusedLoop(self)
        return self._fused

    def request_stop(self) -> None:
        """Lower the barrier of the running `episodes` to the episodes now in progress.

        Replicas finish the episode they are playing (and its evaluation) and
        wait; no new episode starts beyond the furthest one already started.
        """
        if self._segment is not None:
            self._segment.lower_stop()

    def episode(self, episode: int) -> EpisodeResult:
        """Play training episode ``episode`` of every replica (and its evaluation) alone."""
        (result,) = self.episodes(episode - 1, episode)
        return result

    def _stepper(self, segment: Segment) -> Callable[[], int]:
        """Return a callable that plays one lockstep step and returns the agent-steps taken."""
        self._envs = self._compiled_copies()
        self._device = self._device_copies()
        states = self._reset(segment, np.ones(self.replicas, dtype=bool), None)

        def advance() -> int:
            nonlocal states
            taken = int(segment.running.sum())
            states = self._step(segment, states)
            return taken

        return advance

    def _compiled_copies(self) -> EnvArrays | None:
        """Return the compiled copies if ``fused`` is on and they apply now (as `_fused_loop`)."""
        if not self.fused or not compiled_envs_apply(self):
            return None
        if self._env_arrays is None:
            self._env_arrays = env_arrays(self)
        return self._env_arrays

    def _device_copies(self) -> DeviceCopies | None:
        """Return the device copies if the compiled copies play and they apply (made once)."""
        if self._envs is None or not device_copies_apply(self):
            return None
        if self._device_arrays is None:  # kept: JAX compiles its step once per object
            self._device_arrays = DeviceCopies(self, self._envs)
        return self._device_arrays

    def _step(self, segment: Segment, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """One lockstep step of every running slot; returns the next states.

        With `rl.loop.device_copies` the states are the agent's device arrays,
        and the agent's and the copies' parts of the step run there.
        """
        active, greedy, training = segment.running, segment.greedy, segment.training
        if self._device is not None:
            step, next_states = self._device.step(segment, states)
        else:
            actions = self.agent.act(states, active, greedy if segment.any_greedy else None)
            if self._envs is None:
                step = self.env.step(self._env_actions(actions), active)
                _check_finite(step, active, self.problem.env_id, self.seeds)
                next_states = self.problem.encode(step.observations)
            else:
                step, next_states = self._step_compiled(actions, active, states)
            if segment.any_training:
                batch = (states, actions, step.rewards, next_states, step.terminated, training)
                self.agent.observe(Transitions(*batch))
        ended = step.terminated | step.truncated  # both False for inactive slots
        trained = ended & training
        if trained.any():
            self.agent.end_episode(trained)
        slots = segment.slots
        restart = self._restart
        n_events = end_episodes(
            ended, step.rewards, slots.ints, slots.floats, slots.running, self.eval_every,
            self.eval_episodes, segment.stop, slots.event_ints, slots.event_floats, restart,
        )  # fmt: skip
        if not ended.any():
            return next_states
        if n_events:
            segment.book(n_events)
        segment.update_masks()
        return self._reset(segment, restart, next_states) if restart.any() else next_states

    def _env_actions(self, actions: NDArray[np.int64]) -> NDArray:
        """Return the environment actions: bin values, or the agent's continuous draws.

        Replicas in ``agent.continuous_actions_.mask`` execute the drawn
        continuous values (the released code's random actions,
        `rl.agents.base.ContinuousActions`); the others ``problem.decode(actions)``.
        """
        decoded = self.problem.decode(actions)
        drawn = self.agent.continuous_actions_
        if drawn is None or not drawn.mask.any():
            return decoded
        decoded = np.array(decoded, dtype=np.float64, copy=True)
        decoded[drawn.mask] = drawn.values[drawn.mask].reshape(decoded[drawn.mask].shape)
        return decoded

    def _step_compiled(
        self, actions: NDArray[np.int64], active: NDArray[np.bool_], states: NDArray[np.int64]
    ) -> tuple[StepResult, NDArray[np.int64]]:
        """Step the active copies in compiled code; returns the step and the next states.

        The step's ``observations`` are the copies' raw observations; the first replica
        with a non-finite reward or observation raises `non_finite_error`, as the objects'
        path does. Inactive rows of the next states are their current states.
        """
        envs = self._envs
        drawn = self.agent.continuous_actions_
        if drawn is None:
            draws = Draws(np.zeros(self.replicas, dtype=bool), np.zeros((self.replicas, 1)))
        else:
            draws = Draws(drawn.mask, np.asarray(drawn.values, dtype=np.float64).reshape(-1, 1))
        actions = np.ascontiguousarray(actions, dtype=np.int64).reshape(self.replicas, -1)
        next_states = states.copy()
        rewards = np.zeros(self.replicas)
        terminated, truncated = (np.zeros(self.replicas, dtype=bool) for _ in range(2))
        bad = step_envs(envs, draws, actions, active, next_states, rewards, terminated, truncated)
        if bad >= 0:
            raise non_finite_error(
                self.problem.env_id, bad, self.seeds[bad], float(rewards[bad]), envs.sim.obs[bad]
            )
        return StepResult(envs.sim.obs, rewards, terminated, truncated), next_states

    def _reset(
        self, segment: Segment, mask: NDArray[np.bool_], states: NDArray[np.int64] | None
    ) -> NDArray[np.int64]:
        """Reset the masked slots for the episode their phase says; returns all states."""
        slots = segment.slots
        if self._envs is not None:
            fresh = np.zeros((self.replicas, len(self.problem.state_dims)), dtype=np.int64)
            if states is not None and self._device is None:
                fresh[:] = states
            reset_envs(self._envs, slots.episode, slots.eval_index, mask, fresh)
            return fresh if self._device is None else self._device.reset(mask, fresh, states)
        seeds = np.zeros(self.replicas, dtype=np.int64)
        for i in np.flatnonzero(mask).tolist():
            episode, k = int(slots.episode[i]), int(slots.eval_index[i])
            stream = self.streams[i]
            seeds[i] = (
                episode_seed(stream.env_seed, episode)
                if k < 0
                else episode_seed(stream.eval_seed, episode, k)
            )
        fresh = self.problem.encode(self.env.reset(seeds.tolist(), mask))
        if states is None or mask.all():
            return fresh
        return np.where(mask[:, None], fresh, states)

    def close(self) -> None:
        """Close the environment copies."""
        self.env.close()
