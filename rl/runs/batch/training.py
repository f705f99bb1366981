"""Several training configurations trained as the replicas of one agent, one run directory each.

Configurations that differ only in their seeds and in the agent settings the
agent class can vary per replica (its ``per_replica``, `rl.agents.replica_settings`)
train as one lockstep batch: `build_batch` makes ONE agent of B replicas (the
sum of the configurations' ``seeds``; configuration k's replicas are its seeds
``seed .. seed + seeds - 1``, with that configuration's values of the
per-replica fields) and one `rl.loop.runner.Runner`; `run_batch` plays it and
writes every configuration's run directory as its own `rl.runs.training.run`
would: ``config.json`` (its effective configuration), ``metrics.csv`` (its
rows; the ``wall_time`` column is the batch's clock) and ``checkpoint.npz``
(its replicas' part of the agent state, `rl.runs.batch.replica_state`, laid out as
its own agent saves it). A replica's numbers do not depend on the others, so
each ``metrics.csv`` equals, but for the wall time, the configuration trained
alone, and so does each checkpoint's agent state.

Checkpoints and resume. At every checkpoint boundary every configuration's
checkpoint is written, one after another; there is no checkpoint of the batch
itself. `train_batch` with ``resume`` continues each configuration from its own
checkpoint: the configurations whose checkpoints record the same episode are
joined into one batch again, those of another episode (a batch killed while it
wrote its checkpoints) form a batch of their own, and those without a usable
checkpoint start afresh together. A resumed configuration therefore finishes
with the files its uninterrupted run writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rl.loop.runner import Runner
from rl.runs.batch.replica_state import (
    ReplicaStateError,
    join_states,
    layout_signature,
    split_state,
)
from rl.runs.checkpoint import Checkpoint, CheckpointError, restore_agent, save_checkpoint
from rl.runs.config import (
    ConfigError,
    Settings,
    TrainConfig,
    effective_config,
    resolve_settings,
    to_jsonable,
)
from rl.runs.metrics import MetricsWriter
from rl.runs.rundir import RunDirError, RunLock, atomic_write_text, remove_stale_temporaries
from rl.runs.training import (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    METRICS_FILE,
    RUN_FILES,
    RunResult,
    build_run,
    config_text,
    has_checkpoint,
    next_barrier,
    prepare_run_dir,
    resumable_checkpoint,
    run,
)
from rl.seeding import spawn_replicas
from rl.validation import REPLICA_OVERHEAD_BYTES, check_replicas, state_bytes

MAX_BATCH_REPLICAS = 100
"""Most replicas one batch holds (`rl.sweep` chunks its batches to at most this many).

It bounds one process's memory and how long a batch's replicas wait for its
slowest one at every checkpoint; a larger group becomes several batches, which
the workers train side by side."""

COMPONENT_FIELD = "rank"
"""The per-replica agent setting that sets the length of the factors' component axis.

Configurations that differ in it share a batch where the agent class lists it
in ``per_replica``: the batch's agent takes the largest value, R_max, and a
replica of rank r holds components r .. R_max - 1 at exactly 0 (`state_layout`,
`rl.runs.batch.replica_state`)."""

MAY_DIFFER = ("out", "seed", "seeds")
"""Effective-configuration keys in which the configurations of one batch may differ
(besides the agent's per-replica fields)."""


def batch_key(
    effective: dict[str, Any],
    per_replica: frozenset[str],
    layout: str = "",
    group: tuple[Any, ...] = (),
) -> str:
    """Return what configurations of one batch share: ``effective`` without what may differ.

    Parameters
    ----------
    effective : dict
        A configuration's effective configuration (`rl.runs.config.effective_config`).
    per_replica : frozenset of str
        Its agent class's ``per_replica`` fields.
    layout : str
        The `rl.runs.batch.replica_state.layout_signature` of its fresh agent
        state, where known: configurations whose agent states are laid out
        differently (a per-replica field that changes a shape) train apart.
    group : tuple
        Its agent class's `rl.agents.base.Agent.batch_group` of its agent config:
        configurations of different groups train apart.

    Returns
    -------
    str
        Equal for two configurations exactly when they can train in one batch.
    """
    shared = {k: v for k, v in effective.items() if k not in MAY_DIFFER}
    agent = shared.get("agent_params")
    if isinstance(agent, dict):
        shared["agent_params"] = {k: v for k, v in agent.items() if k not in per_replica}
    return json.dumps(
        to_jsonable({"shared": shared, "layout": layout, "group": list(group)}), sort_keys=True
    )


def state_layout(settings: Settings, state: Any) -> str:
    """Return the layout signature of a configuration's fresh agent ``state``.

    Where the agent class varies `COMPONENT_FIELD` per replica, a twin agent of
    the same configuration at another rank is built (a rank one lower, or 2 for
    rank 1) and the axes in which the two states' arrays differ are left out of
    the signature (`rl.runs.batch.replica_state.layout_signature`): the arrays
    that depend on the rank are found by the states themselves, whatever their
    entries are called. Configurations of different ranks then share a batch.

    Parameters
    ----------
    settings : Settings
        The configuration's resolved settings, with its problem.
    state : tree
        Its agent's fresh ``state_dict()``.

    Returns
    -------
    str
    """
    agent_class = settings.spec.agent_class
    if COMPONENT_FIELD not in agent_class.per_replica:
        return layout_signature(state)
    rank = getattr(settings.agent, COMPONENT_FIELD)
    other = dataclasses.replace(settings.agent, **{COMPONENT_FIELD: rank - 1 if rank > 1 else 2})
    streams = spawn_replicas(_seeds(settings.config))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # what the twin warns of, the configuration itself did
        twin = agent_class(settings.problem, other, [s.agent for s in streams])
    return layout_signature(state, twin.state_dict())


class Member(NamedTuple):
    """One configuration of a batch: its settings, its effective configuration, its replicas.

    ``effective["out"]`` is what its ``config.json`` records; the files go to
    ``settings.config.out``.
    """

    settings: Settings
    effective: dict[str, Any]
    lo: int
    hi: int


class Batch(NamedTuple):
    """What `build_batch` made: the runner of all replicas and the layouts to cut its state."""

    runner: Runner
    members: list[Member]
    layouts: list[Any]
    """A fresh agent state of each member's own agent (`rl.runs.batch.replica_state`)."""
    batch_layout: Any
    """The batch agent's fresh state."""
    n_states: int
    n_params: list[int]
    """Each member's own agent's parameters per replica (its rank's, where ranks differ)."""


def resolve_members(
    configs: Sequence[TrainConfig], shown_outs: Sequence[str] | None = None
) -> list[tuple[Settings, dict[str, Any]]]:
    """Resolve every configuration once: its settings and effective configuration.

    ``shown_outs`` are the run directories the ``config.json`` files name (by
    default each config's ``out``).
    """
    resolved = []
    for i, config in enumerate(configs):
        settings = resolve_settings(config)
        recorded = {**settings.env_options, **settings.problem.recorded_options()}
        effective = effective_config(settings, recorded)
        if shown_outs is not None:
            effective["out"] = shown_outs[i]
        resolved.append((settings, effective))
    return resolved


def build_batch(
    resolved: Sequence[tuple[Settings, dict[str, Any]]], *, staggered: bool = False
) -> Batch:
    """Build the one agent and runner of a batch of configurations (`resolve_members`).

    ``staggered`` builds the runner so that its members may play from different
    episodes (`rl.loop.runner.Runner`, `rl.runs.batch.staggered`).

    Raises
    ------
    ConfigError
        If the configurations cannot share a batch, or its replicas do not fit in memory.
    ReplicaStateError
        If the agent's state cannot be cut into its members' states.
    """
    first, _ = resolved[0]
    spec, problem, config = first.spec, first.problem, first.config
    if any(settings.config.keep_best for settings, _ in resolved):
        raise ConfigError(
            "A batch keeps no best states: train a configuration with keep_best on its own."
        )
    fields = spec.agent_class.per_replica
    group = spec.agent_class.batch_group
    keys = {batch_key(effective, fields, group=group(s.agent)) for s, effective in resolved}
    if len(keys) > 1:
        raise ConfigError(
            "The configurations of a batch may differ only in seed, seeds and "
            f"{', '.join(sorted(fields)) or 'no agent setting'}."
        )
    seeds = [s for settings, _ in resolved for s in _seeds(settings.config)]
    what = f"{config.agent!r} on {config.env!r}"
    try:
        check_replicas(len(seeds), REPLICA_OVERHEAD_BYTES, what)
        streams = spawn_replicas(seeds)
        varying = {
            field: [getattr(s.agent, field) for s, _ in resolved for _ in _seeds(s.config)]
            for field in sorted(fields)
            if len({getattr(s.agent, field) for s, _ in resolved}) > 1
        }
        options = {"replica_settings": varying} if varying else {}
        # the config holds the largest value of a varying field: the batch's shape, for a rank
        batch_config = dataclasses.replace(first.agent, **{f: max(v) for f, v in varying.items()})
        agent = spec.agent_class(problem, batch_config, [s.agent for s in streams], **options)
        batch_layout = agent.state_dict()
        per_replica = state_bytes(batch_layout) / len(seeds) + REPLICA_OVERHEAD_BYTES
        check_replicas(len(seeds), per_replica, what)
    except ValueError as error:
        raise ConfigError(
            f"Cannot build agent {config.agent!r} for {config.env!r}: {error}"
        ) from None
    members, layouts, n_params, lo = [], [], [], 0
    alone: dict[tuple[int, Any], tuple[Any, int]] = {}  # a member's own state and n_params
    for settings, effective in resolved:
        count = settings.config.seeds
        shape = (count, getattr(settings.agent, COMPONENT_FIELD, None))  # what sets its layout
        if shape not in alone:
            own = spawn_replicas(_seeds(settings.config))
            agent_alone = spec.agent_class(problem, settings.agent, [s.agent for s in own])
            alone[shape] = (agent_alone.state_dict(), int(agent_alone.n_params))
        layouts.append(alone[shape][0])
        n_params.append(alone[shape][1])
        members.append(Member(settings, effective, lo, lo + count))
        lo += count
    n_states = math.prod(problem.state_dims)
    for member, layout in zip(members, layouts, strict=True):  # refuse an uncuttable state now
        split_state(batch_layout, layout, batch_layout, member.lo, member.hi, n_states)
    runner = Runner(
        problem,
        agent,
        streams,
        eval_every=config.eval_every,
        eval_episodes=config.eval_episodes,
        staggered=staggered,
    )
    return Batch(runner, members, layouts, batch_layout, n_states, n_params)


def _seeds(config: TrainConfig) -> range:
    return range(config.seed, config.seed + config.seeds)


class MemberFiles:
    """One member's run directory while the batch trains: its lock, metrics and clock."""

    def __init__(self, member: Member, checkpoint: Checkpoint | None) -> None:
        self.member = member
        self.run_dir = Path(member.settings.config.out)
        if checkpoint is None:
            self.lock = prepare_run_dir(self.run_dir, overwrite=True)
        else:
            self.lock = RunLock.acquire(self.run_dir)
        try:
            if checkpoint is not None:
                remove_stale_temporaries(self.run_dir, RUN_FILES)
            atomic_write_text(self.run_dir / CONFIG_FILE, config_text(member.effective))
            truncate = None if checkpoint is None else checkpoint.metrics_bytes
            self.writer = MetricsWriter(self.run_dir / METRICS_FILE, truncate_to=truncate)
        except BaseException:
            self.lock.release()
            raise
        self.wall_base = 0.0 if checkpoint is None else checkpoint.wall_time

    def close(self) -> None:
        with self.lock:
            self.writer.close()


def run_batch(
    batch: Batch,
    checkpoints: Sequence[Checkpoint] | None = None,
    *,
    stop_after_episode: int | None = None,
) -> list[RunResult]:
    """Train a batch to its episodes, writing every member's run directory (module doc).

    Parameters
    ----------
    batch : Batch
        From `build_batch`; its runner is not closed here.
    checkpoints : sequence of Checkpoint, optional
        Each member's checkpoint to continue from (all of one episode, checked
        by `rl.runs.training.resumable_checkpoint`); None starts afresh.
    stop_after_episode : int, optional
        Stop after this episode as an interrupted run does (for tests).

    Returns
    -------
    list of RunResult
        One per member, in order.
    """
    runner, members = batch.runner, batch.members
    config = members[0].settings.config
    start = 0
    if checkpoints is not None:
        start = checkpoints[0].episode
        sizes = [m.hi - m.lo for m in members]
        states = [c.agent_state for c in checkpoints]
        joined = join_states(states, sizes, batch.layouts, batch.batch_layout, batch.n_states)
        path = Path(members[0].settings.config.out) / CHECKPOINT_FILE
        restore_agent(runner.agent, Checkpoint(start, joined, 0.0, 0, {}), path)
    files: list[MemberFiles] = []
    clock = _Clock()
    try:
        for i, member in enumerate(members):
            files.append(MemberFiles(member, None if checkpoints is None else checkpoints[i]))

        def checkpoint_at(episode: int) -> None:
            state = runner.agent.state_dict()
            for member_files, layout in zip(files, batch.layouts, strict=True):
                member = member_files.member
                piece = split_state(
                    state, layout, batch.batch_layout, member.lo, member.hi, batch.n_states
                )
                wall = member_files.wall_base + clock()
                saved = Checkpoint(
                    episode, piece, wall, member_files.writer.flush(), member.effective
                )
                save_checkpoint(member_files.run_dir / CHECKPOINT_FILE, saved)

        episode = start
        if checkpoints is None:
            checkpoint_at(0)
        while episode < config.episodes:
            barrier = next_barrier(episode, config, stop_after_episode)
            for result in runner.episodes(episode, barrier):
                episode, now = result.episode, clock()
                for member_files in files:
                    lo, hi = member_files.member.lo, member_files.member.hi
                    for b in range(lo, hi):
                        member_files.writer.write(
                            runner.seeds[b],
                            episode,
                            result.returns[b],
                            result.lengths[b],
                            result.greedy_returns[b],
                            member_files.wall_base + now,
                        )
            checkpoint_at(episode)
            if episode == stop_after_episode:
                break
    finally:
        for member_files in files:
            with contextlib.suppress(OSError):
                member_files.close()
    interrupted = episode < config.episodes
    return [
        RunResult(f.run_dir, episode, interrupted, f.wall_base + clock(), n)
        for f, n in zip(files, batch.n_params, strict=True)
    ]


class _Clock:
    """Seconds since it was made."""

    def __init__(self) -> None:
        self._start = time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() - self._start


def _usable_checkpoint(settings: Settings, effective: dict[str, Any]) -> Checkpoint | None:
    """Return the member's checkpoint to continue from, or None (said on stderr): afresh."""
    run_dir = Path(settings.config.out)
    if not has_checkpoint(run_dir):
        return None
    try:
        checkpoint = resumable_checkpoint(run_dir, effective, settings.config.seeds)
    except (CheckpointError, ConfigError, RunDirError) as error:
        print(
            f"{effective['out']}: starting afresh: {' '.join(str(error).split())}", file=sys.stderr
        )
        return None
    print(f"{effective['out']}: continuing from episode {checkpoint.episode}", file=sys.stderr)
    return checkpoint


def train_batch(
    configs: Sequence[TrainConfig],
    *,
    shown_outs: Sequence[str] | None = None,
    resume: bool = False,
    stop_after_episode: int | None = None,
) -> list[RunResult]:
    """Train configurations that can share a batch, each into its ``out`` (module doc).

    Parameters
    ----------
    configs : sequence of TrainConfig
        Configurations that differ only in ``seed``, ``seeds`` and the agent's
        ``per_replica`` fields (`batch_key`).
    shown_outs : sequence of str, optional
        The run directories the ``config.json`` files name (default: each ``out``).
    resume : bool
        Continue every configuration from its own checkpoint where it has a
        usable one (module doc); the others start afresh.
    stop_after_episode : int, optional
        Stop after this episode as an interrupted run does (for tests).

    Returns
    -------
    list of RunResult
        One per configuration, in order.

    Raises
    ------
    ConfigError
        If the configurations cannot share a batch.
    """
    resolved = resolve_members(configs, shown_outs)
    groups: dict[int | None, list[int]] = {}
    chosen: list[Checkpoint | None] = []
    for i, (settings, effective) in enumerate(resolved):
        checkpoint = _usable_checkpoint(settings, effective) if resume else None
        chosen.append(checkpoint)
        groups.setdefault(None if checkpoint is None else checkpoint.episode, []).append(i)
    results: list[RunResult | None] = [None] * len(configs)
    for episode, positions in groups.items():
        part = [resolved[i] for i in positions]
        checkpoints = None if episode is None else [chosen[i] for i in positions]
        for i, result in zip(
            positions, _train_part(part, checkpoints, stop_after_episode), strict=True
        ):
            results[i] = result
    return [r for r in results if r is not None]


def _train_part(
    part: Sequence[tuple[Settings, dict[str, Any]]],
    checkpoints: Sequence[Checkpoint | None] | None,
    stop_after_episode: int | None,
) -> list[RunResult]:
    """Train members of one starting episode as one batch, or one by one where they cannot."""
    batch = None
    if len(part) > 1:
        try:
            batch = build_batch(part)
        except ReplicaStateError as error:
            print(f"training one by one: the agent state cannot be cut ({error})", file=sys.stderr)
    if batch is not None:
        try:
            return run_batch(batch, checkpoints, stop_after_episode=stop_after_episode)
        finally:
            batch.runner.close()
    results = []
    for settings, effective in part:
        runner, _ = build_run(settings)
        try:
            go_on = checkpoints is not None
            results.append(
                run(
                    runner,
                    settings.config,
                    effective,
                    resume=go_on,
                    overwrite=not go_on,
                    stop_after_episode=stop_after_episode,
                )
            )
        finally:
            runner.close()
    return results
