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

References
----------
Algorithm 3 of the TEQL paper (the episode loop around each agent's step), and
its experimental protocol: one greedy episode after every 10th training episode.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from rl.agents.base import Agent, Transitions
from rl.problems import Problem
from rl.replicas import ReplicaEnvs, StepResult
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
        raise ValueError(
            f"Environment {env_id!r} returned a non-finite reward or observation for replica "
            f"{i} (seed {seeds[i]}): reward {step.rewards[i]!r}, observation {observations[i]!r}."
        )


class _Segment:
    """Bookkeeping of `Runner.episodes` between two barriers: per-slot phase and results.

    Results are kept only for the episodes some replica has finished and not
    all have (at most the spread between the fastest and the slowest replica).
    """

    def __init__(self, start: int, stop: int, replicas: int) -> None:
        self.start = start
        self.stop = stop
        self.replicas = replicas
        self.results: dict[int, EpisodeResult] = {}
        self.finished: dict[int, int] = {}  # episode -> replicas done with it
        self.episode = np.full(replicas, start + 1, dtype=np.int64)  # current training episode
        self.eval_index = np.full(replicas, -1, dtype=np.int64)  # -1: on a training episode
        self.running = np.ones(replicas, dtype=bool)  # False once waiting at the barrier
        self.episode_return = np.zeros(replicas)
        self.episode_length = np.zeros(replicas, dtype=np.int64)
        self.greedy_sum = np.zeros(replicas)
        self.update_masks()

    def update_masks(self) -> None:
        """Recompute which running slots are on an evaluation or a training episode."""
        self.greedy = self.running & (self.eval_index >= 0)
        self.training = self.running & (self.eval_index < 0)
        self.any_greedy = bool(self.greedy.any())
        self.any_training = bool(self.training.any())

    def result(self, episode: int) -> EpisodeResult:
        """Return the (partly filled) result row of ``episode``."""
        if episode not in self.results:
            b = self.replicas
            self.results[episode] = EpisodeResult(
                episode, np.zeros(b), np.zeros(b, dtype=np.int64), np.full(b, np.nan)
            )
            self.finished[episode] = 0
        return self.results[episode]

    def pop_complete(self, episode: int) -> EpisodeResult | None:
        """Remove and return the result of ``episode`` once every replica has finished it."""
        if self.finished.get(episode, 0) < self.replicas:
            return None
        del self.finished[episode]
        return self.results.pop(episode)

    def lower_stop(self) -> None:
        """Move the barrier to the last episode any replica has started."""
        self.stop = min(self.stop, int(self.episode[self.running].max(initial=self.start + 1)))


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
    """

    def __init__(
        self,
        problem: Problem,
        agent: Agent,
        streams: Sequence[ReplicaStreams],
        *,
        eval_every: int = 10,
        eval_episodes: int = 1,
    ) -> None:
        self.problem = problem
        self.agent = agent
        self.streams = list(streams)
        self.seeds = [s.seed for s in self.streams]
        self.eval_every = eval_every
        self.eval_episodes = eval_episodes
        self.env = ReplicaEnvs(problem, len(self.streams))
        self._segment: _Segment | None = None

    @property
    def replicas(self) -> int:
        """Number of replicas B."""
        return len(self.streams)

    def episodes(self, start: int, stop: int) -> Iterator[EpisodeResult]:
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

        Yields
        ------
        EpisodeResult
        """
        if stop <= start:
            raise ValueError(f"The 'stop' parameter must exceed start={start}. Got {stop}.")
        segment = self._segment = _Segment(start, stop, self.replicas)
        everyone = np.ones(self.replicas, dtype=bool)
        states = self._reset(segment, everyone, np.zeros((self.replicas, 0), np.int64))
        pending = start + 1  # the next episode to yield
        try:
            while pending <= segment.stop:
                states = self._step(segment, states)
                while pending <= segment.stop and (result := segment.pop_complete(pending)):
                    yield result
                    pending += 1
        finally:
            self._segment = None

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

    def _step(self, segment: _Segment, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """One lockstep step of every running slot; returns the next states."""
        active, greedy, training = segment.running, segment.greedy, segment.training
        actions = self.agent.act(states, active, greedy if segment.any_greedy else None)
        step = self.env.step(self._env_actions(actions), active)
        _check_finite(step, active, self.problem.env_id, self.seeds)
        next_states = self.problem.encode(step.observations)
        if segment.any_training:
            self.agent.observe(
                Transitions(states, actions, step.rewards, next_states, step.terminated, training)
            )
        segment.episode_return += step.rewards  # 0 for inactive slots (ReplicaEnvs guarantees it)
        segment.episode_length += active
        ended = step.terminated | step.truncated  # both False for inactive slots
        if not ended.any():
            return next_states
        return self._episodes_ended(segment, ended, next_states)

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

    def _episodes_ended(
        self, segment: _Segment, ended: NDArray[np.bool_], states: NDArray[np.int64]
    ) -> NDArray[np.int64]:
        """Record the episodes that just ended and reset those slots for their next one."""
        trained = ended & segment.training
        if trained.any():
            self.agent.end_episode(trained)
        restart = np.zeros(self.replicas, dtype=bool)
        for i in np.flatnonzero(ended).tolist():
            episode = int(segment.episode[i])
            result = segment.result(episode)
            if trained[i]:
                result.returns[i] = segment.episode_return[i]
                result.lengths[i] = segment.episode_length[i]
                if self.eval_every and episode % self.eval_every == 0:
                    segment.eval_index[i], segment.greedy_sum[i] = 0, 0.0
                    restart[i] = True
                    continue
            else:
                segment.greedy_sum[i] += segment.episode_return[i]
                segment.eval_index[i] += 1
                if segment.eval_index[i] < self.eval_episodes:
                    restart[i] = True
                    continue
                result.greedy_returns[i] = segment.greedy_sum[i] / self.eval_episodes
                segment.eval_index[i] = -1
            segment.finished[episode] += 1
            if episode >= segment.stop:
                segment.running[i] = False
            else:
                segment.episode[i] += 1
                restart[i] = True
        segment.episode_return[ended] = 0.0
        segment.episode_length[ended] = 0
        segment.update_masks()
        return self._reset(segment, restart, states) if restart.any() else states

    def _reset(
        self, segment: _Segment, mask: NDArray[np.bool_], states: NDArray[np.int64]
    ) -> NDArray[np.int64]:
        """Reset the masked slots for the episode their phase says; returns all states."""
        seeds = np.zeros(self.replicas, dtype=np.int64)
        for i in np.flatnonzero(mask).tolist():
            episode, k = int(segment.episode[i]), int(segment.eval_index[i])
            stream = self.streams[i]
            seeds[i] = (
                episode_seed(stream.env_seed, episode)
                if k < 0
                else episode_seed(stream.eval_seed, episode, k)
            )
        fresh = self.problem.encode(self.env.reset(seeds.tolist(), mask))
        if mask.all():
            return fresh
        return np.where(mask[:, None], fresh, states)

    def close(self) -> None:
        """Close the environment copies."""
        self.env.close()
