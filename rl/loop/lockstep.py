"""What every loop of the runner shares: the run's parts, a segment's bookkeeping, episode seeds.

`rl.loop.runner.Runner` picks one loop when it is built (`Loop`: the
environment objects step by step, `rl.loop.stepped.ObjectSteps`; the compiled
copies, `rl.loop.copies.CompiledCopies`; the copies on the agent's device,
`rl.loop.device_copies.DeviceCopies`; the fused compiled loop,
`rl.loop.fused.FusedLoop`). Each loop is built from the run's parts
(`Lockstep`), never from the runner, and plays the segments that the runner
hands it (`Segment`: the slots and the results between two barriers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple, Protocol

import numpy as np
from numpy.typing import NDArray

from rl.agents.base import Agent
from rl.loop.replicas import ReplicaEnvs
from rl.loop.slots import (
    EV_EPISODE,
    EV_GREEDY,
    EV_LENGTH,
    EV_REPLICA,
    EV_RETURN,
    OFFSET,
    Slots,
)
from rl.problems import Problem
from rl.seeding import ReplicaStreams


def episode_seed(base: int, *indices: int) -> int:
    """Seed of one environment reset, derived from a replica's stream seed and episode indices."""
    return int(np.random.SeedSequence([int(base), *map(int, indices)]).generate_state(1)[0])


@dataclass(frozen=True)
class Lockstep:
    """The parts of a lockstep run that a loop reads, fixed when the runner is built.

    Attributes
    ----------
    problem : Problem
        The discretized environment.
    agent : Agent
        The agent of B replicas.
    env : ReplicaEnvs
        The B environment copies.
    streams : sequence of ReplicaStreams
        One per replica (`rl.seeding.spawn_replicas`).
    eval_every, eval_episodes : int
        The evaluation schedule (`rl.loop.slots.end_episode`).
    """

    problem: Problem
    agent: Agent
    env: ReplicaEnvs
    streams: Sequence[ReplicaStreams]
    eval_every: int
    eval_episodes: int

    @property
    def replicas(self) -> int:
        """Number of replicas B."""
        return len(self.streams)

    @cached_property
    def seeds(self) -> list[int]:
        """Every replica's integer seed."""
        return [s.seed for s in self.streams]


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


class Segment:
    """Bookkeeping of `rl.loop.runner.Runner.episodes` between two barriers: slots and results.

    Results are kept only for the episodes some replica has finished and not
    all have (at most the spread between the fastest and the slowest replica).
    With ``offsets`` (`rl.loop.slots.Slots`), replica b plays its episodes
    ``offsets[b] + start + 1 .. offsets[b] + stop`` and a result of episode e
    holds every replica's episode ``offsets[b] + e``.
    """

    def __init__(
        self,
        start: int,
        stop: int,
        replicas: int,
        capacity: int,
        offsets: NDArray[np.int64] | None = None,
    ) -> None:
        self.start = start
        self.stop = stop
        self.replicas = replicas
        self.slots = Slots(start, replicas, capacity, offsets)
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
        """File the first ``n_events`` events of the slots' buffers into the result rows.

        The events are sorted by episode once, so that each episode's rows are
        one slice (at B = 1 a compiled stretch ends hundreds of episodes).
        """
        if n_events == 0:
            return
        ints = self.slots.event_ints[:n_events]
        floats = self.slots.event_floats[:n_events]
        episodes = ints[:, EV_EPISODE] - self.slots.ints[ints[:, EV_REPLICA], OFFSET]
        order = np.argsort(episodes, kind="stable")
        episodes, ints, floats = episodes[order], ints[order], floats[order]
        starts = np.flatnonzero(np.diff(episodes, prepend=episodes[:1] - 1))
        stops = [*starts[1:].tolist(), n_events]
        for episode, start, stop in zip(
            episodes[starts].tolist(), starts.tolist(), stops, strict=True
        ):
            replicas = ints[start:stop, EV_REPLICA]
            if episode not in self.results:
                b = self.replicas
                self.results[episode] = EpisodeResult(
                    episode, np.zeros(b), np.zeros(b, dtype=np.int64), np.full(b, np.nan)
                )
                self.finished[episode] = 0
            result = self.results[episode]
            result.returns[replicas] = floats[start:stop, EV_RETURN]
            result.lengths[replicas] = ints[start:stop, EV_LENGTH]
            result.greedy_returns[replicas] = floats[start:stop, EV_GREEDY]
            self.finished[episode] += stop - start

    def pop_complete(self, episode: int) -> EpisodeResult | None:
        """Remove and return the result of ``episode`` once every replica has finished it."""
        if self.finished.get(episode, 0) < self.replicas:
            return None
        del self.finished[episode]
        return self.results.pop(episode)

    def lower_stop(self) -> None:
        """Move the barrier to the furthest episode any replica has started (or waits at)."""
        self.stop = min(self.stop, int((self.slots.episode - self.slots.ints[:, OFFSET]).max()))


class Loop(Protocol):
    """One way to play a segment's lockstep steps; the runner holds one, chosen when built.

    Attributes
    ----------
    name : str
        "objects", "compiled copies", "device copies" or "fused".
    event_rows : int
        Rows of a segment's event buffers that `start` needs.
    """

    name: str
    event_rows: int

    def start(self, segment: Segment) -> Callable[[], int]:
        """Reset every copy for ``segment``; return a callable that plays on and returns steps.

        Each call plays one lockstep step (or one compiled stretch of them),
        files the finished episodes into ``segment`` and returns the
        agent-steps taken.
        """
        ...
