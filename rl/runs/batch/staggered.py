"""Configurations of different ages trained as one batch, one segment of episodes at a time.

A population search (`rl.tune.population`) keeps its trials in one batch while
trials leave it (pruned or finished) and new ones join it at episode 0. A
`StaggeredMember` holds one configuration's run directory (``config.json``,
``metrics.csv``, ``checkpoint.npz``, written as its own `rl.runs.training.run`
writes them), its age (the training episodes it has played) and its agent
state between segments. `train_segment` trains ``length`` more episodes of
every member as one batch:

1. `rl.runs.batch.training.build_batch` builds a fresh agent of all the
   members' replicas and a runner built ``staggered``;
2. a member's state is the one it saved at the end of its last segment, or,
   for a member at episode 0, its replicas' part of the fresh batch agent (a
   replica's numbers do not depend on the others, so that part is the
   member's own fresh agent, seeded with its own seeds; it is also the
   checkpoint of episode 0 that a lone run writes first); the states are
   joined into the batch's (`rl.runs.batch.replica_state.join_states`) and
   restored;
3. the runner plays episodes ``age + 1 .. age + length`` of every member, its
   age as the offset of its replicas (`rl.loop.runner.Runner.episodes`), each
   replica resetting its environment with its own (seed, episode) seeds;
4. the batch's state is cut into the members' states again
   (`rl.runs.batch.replica_state.split_state`), and only then are the
   segment's ``metrics.csv`` rows written: a segment that fails writes
   nothing, so that each member can replay it alone from the same state.

Rebuilding the batch at each segment is exact for the same reason that a
resumed run is: at a barrier the agent's state is all a run carries on, and a
replica's numbers do not depend on the other replicas of its batch. So every
member's ``metrics.csv`` (but for the ``wall_time`` column, its own clock from
when it joined) equals the configuration trained alone with ``rl.train``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rl.runs.batch.replica_state import join_states, split_state
from rl.runs.batch.training import Member, MemberFiles, build_batch, resolve_members
from rl.runs.checkpoint import Checkpoint, restore_agent, save_checkpoint
from rl.runs.config import TrainConfig
from rl.loop.lockstep import EpisodeResult
from rl.runs.training import CHECKPOINT_FILE, EpisodeLog, build_run


class StaggeredMember:
    """One configuration of a staggered batch: its run directory, age and agent state.

    Creating it empties (or creates) its run directory ``config.out``, takes
    its lock and writes its ``config.json``; `close` releases it.

    Parameters
    ----------
    config : TrainConfig
        The configuration, trained into ``config.out``.

    Attributes
    ----------
    age : int
        Training episodes played.
    state : tree or None
        The agent state of its replicas at ``age``, laid out as its own agent
        saves it; None before its first segment.
    """

    def __init__(self, config: TrainConfig) -> None:
        ((settings, effective),) = resolve_members([config])
        self.resolved = (settings, effective)
        self.files = MemberFiles(Member(settings, effective, 0, config.seeds), None)
        self.config = config
        self.age = 0
        self.state: Any = None
        self._start = time.perf_counter()
        self._closed = False

    @property
    def run_dir(self) -> Path:
        """Its run directory."""
        return self.files.run_dir

    @property
    def seeds(self) -> range:
        """Its replicas' seeds."""
        return range(self.config.seed, self.config.seed + self.config.seeds)

    @property
    def done(self) -> bool:
        """Whether it has played all its episodes."""
        return self.age >= self.config.episodes

    def wall(self) -> float:
        """Seconds since it joined (its ``wall_time``)."""
        return time.perf_counter() - self._start

    def checkpoint(self) -> None:
        """Write its checkpoint of episode `age` (after the rows written so far)."""
        writer = self.files.writer
        saved = Checkpoint(self.age, self.state, self.wall(), writer.flush(), self.resolved[1])
        save_checkpoint(self.run_dir / CHECKPOINT_FILE, saved)

    def checkpoint_due(self, length: int) -> bool:
        """Whether a lone run checkpoints within the last ``length`` episodes, or it is done."""
        every = self.config.checkpoint_every
        return self.done or self.age // every > (self.age - length) // every

    def close(self) -> None:
        """Close its ``metrics.csv`` and release its run directory (once)."""
        if not self._closed:
            self._closed = True
            self.files.close()


def train_segment(members: Sequence[StaggeredMember], length: int) -> list[list[EpisodeLog]]:
    """Train ``length`` more episodes of every member as one batch (module doc).

    Parameters
    ----------
    members : sequence of StaggeredMember
        Configurations that can share a batch
        (`rl.runs.batch.training.batch_key`), each with at least ``length``
        episodes left.
    length : int
        Training episodes to play.

    Returns
    -------
    list of list of EpisodeLog
        Per member, its episodes of the segment (its replicas' columns).

    Raises
    ------
    rl.runs.config.ConfigError
        If the members cannot share a batch.
    ValueError, rl.problems.EnvFailure
        If a replica diverged or its environment failed: nothing is written
        and no member's `state` or `age` changed, but a fresh member's
        checkpoint of episode 0.
    """
    if len(members) == 1:  # no batch to cut: the member's own runner
        ends, logs = _play_alone(members[0], length)
    else:
        ends, logs = _play_batch(members, length)
    for member, end, log in zip(members, ends, logs, strict=True):
        member.state, member.age = end, member.age + length
        for episode in log:
            for i, seed in enumerate(member.seeds):
                member.files.writer.write(
                    seed,
                    episode.episode,
                    episode.returns[i],
                    episode.lengths[i],
                    episode.greedy_returns[i],
                    episode.wall_time,
                )
    return logs


def _log(member: StaggeredMember, episode: int, result: EpisodeResult, mine: slice) -> EpisodeLog:
    """Return a member's columns ``mine`` of a segment's result, its own ``episode``."""
    return EpisodeLog(
        episode,
        result.returns[mine].copy(),
        result.lengths[mine].copy(),
        result.greedy_returns[mine].copy(),
        member.wall(),
    )


def _play_alone(member: StaggeredMember, length: int) -> tuple[list[Any], list[list[EpisodeLog]]]:
    """Play a segment of one member with its own agent and runner; return its state and log."""
    runner, _ = build_run(member.resolved[0])
    try:
        if member.state is None:
            member.state = runner.agent.state_dict()
            member.checkpoint()
        path = member.run_dir / CHECKPOINT_FILE
        restore_agent(runner.agent, Checkpoint(member.age, member.state, 0.0, 0, {}), path)
        everyone, age = slice(None), member.age
        log = [_log(member, r.episode, r, everyone) for r in runner.episodes(age, age + length)]
        return [runner.agent.state_dict()], [log]
    finally:
        runner.close()


def _play_batch(
    members: Sequence[StaggeredMember], length: int
) -> tuple[list[Any], list[list[EpisodeLog]]]:
    """Play a segment of several members as one staggered batch; return their states and logs."""
    batch = build_batch([m.resolved for m in members], staggered=True)
    runner, fresh, n_states = batch.runner, batch.batch_layout, batch.n_states
    pieces = list(zip(members, batch.members, batch.layouts, strict=True))
    logs: list[list[EpisodeLog]] = [[] for _ in members]
    try:
        for member, place, layout in pieces:
            if member.state is None:
                member.state = split_state(fresh, layout, fresh, place.lo, place.hi, n_states)
                member.checkpoint()
        sizes = [place.hi - place.lo for place in batch.members]
        joined = join_states([m.state for m in members], sizes, batch.layouts, fresh, n_states)
        path = members[0].run_dir / CHECKPOINT_FILE
        restore_agent(runner.agent, Checkpoint(0, joined, 0.0, 0, {}), path)
        offsets = [m.age for m, place, _ in pieces for _ in range(place.lo, place.hi)]
        for result in runner.episodes(0, length, offsets=offsets):
            for log, (member, place, _) in zip(logs, pieces, strict=True):
                episode = member.age + result.episode
                log.append(_log(member, episode, result, slice(place.lo, place.hi)))
        state = runner.agent.state_dict()
        ends = [split_state(state, layout, fresh, p.lo, p.hi, n_states) for _, p, layout in pieces]
    finally:
        runner.close()
    return ends, logs
