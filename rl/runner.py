"""The one training loop shared by every agent.

B replicas (one per seed) advance in lockstep through a `rl.batch_env.BatchEnv`.
Episodes are synchronous: all replicas start training episode e together, and
the episode lasts until every replica has terminated or been truncated. A
replica that finished earlier is inactive: it is not stepped, earns nothing and
learns nothing, so B replicas run together give each seed the same numbers as
running it alone.

Seeding. Replica i has the integer seed ``seed + i``; `rl.seeding.replica_streams`
spawns its environment, agent (init, explore) and evaluation streams. The
training copy of replica i is reset at the start of episode e with
``episode_seed(env_seed_i, e)``, and greedy evaluation episode k after training
episode e with ``episode_seed(eval_seed_i, e, k)`` on a separate set of copies.
Because every episode's environment randomness is a pure function of
(seed, episode), environments carry no state across episode boundaries: a
checkpoint holds only the agent, and evaluation never shifts the training
stream.

Per step: ``states = problem.encode(obs)``, ``actions = agent.act(states,
active)``, step the environment with ``problem.decode(actions)``, then
``agent.observe(Transitions(...))``. Termination stops bootstrapping; a
truncation is passed as ``terminated=False`` and keeps it (the agent applies
this rule). After the episode ``agent.end_episode`` is called for all replicas.

References
----------
Algorithm 3 of the TEQL paper (the episode loop around each agent's step), and
its experimental protocol: one greedy episode after every 10th training episode.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from rl.agents.base import Agent, Transitions
from rl.batch_env import BatchEnv, StepResult
from rl.checkpoint import Checkpoint, atomic_write_text, load_checkpoint, save_checkpoint
from rl.config import (
    ConfigError,
    TrainConfig,
    agent_config,
    agent_parts,
    effective_config,
    effective_env_options,
)
from rl.metrics import MetricsWriter
from rl.problem import Problem
from rl.seeding import ReplicaStreams, spawn_replicas

METRICS_FILE = "metrics.csv"
CONFIG_FILE = "config.json"
CHECKPOINT_FILE = "checkpoint.pkl"
FIGURE_FILE = "learning_curve.png"
RUN_FILES = (METRICS_FILE, CONFIG_FILE, CHECKPOINT_FILE, FIGURE_FILE)
"""Files a run directory holds; ``overwrite`` removes exactly these."""

_RESUMABLE_CHANGES = ("episodes", "out", "checkpoint_every")


class EpisodeLog(NamedTuple):
    """What one training episode (and its evaluation, if any) produced.

    Attributes
    ----------
    episode : int
        1-based training episode index.
    returns, lengths : ndarray, shape (B,)
        Undiscounted training return and number of steps of every replica.
    greedy_returns : ndarray, shape (B,)
        Mean greedy return of the evaluation after this episode; NaN if none.
    wall_time : float
        Seconds since the run started, summed over resumed segments.
    """

    episode: int
    returns: NDArray[np.float64]
    lengths: NDArray[np.int64]
    greedy_returns: NDArray[np.float64]
    wall_time: float


class RunResult(NamedTuple):
    """Outcome of `run`: where it wrote, how far it got, whether it was interrupted."""

    run_dir: Path
    episodes_done: int
    interrupted: bool
    wall_time: float
    n_params: int


def episode_seed(base: int, *indices: int) -> int:
    """Seed of one environment reset, derived from a replica's stream seed and episode indices."""
    return int(np.random.SeedSequence([int(base), *map(int, indices)]).generate_state(1)[0])


def _check_finite(
    step: StepResult, active: NDArray[np.bool_], env_id: str, seeds: Sequence[int]
) -> None:
    observations = step.observations
    numeric = observations.dtype.kind in "fc"
    if np.isfinite(step.rewards).all() and (not numeric or np.isfinite(observations).all()):
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


def play_episode(
    env: BatchEnv,
    problem: Problem,
    agent: Agent,
    reset_seeds: Sequence[int],
    replica_seeds: Sequence[int],
    *,
    learn: bool,
) -> tuple[NDArray, NDArray]:
    """Play one synchronous episode of every replica.

    Parameters
    ----------
    env : BatchEnv
        B environment copies.
    problem : Problem
        Encodes observations and decodes actions.
    agent : Agent
        Acts with ``act`` and learns with ``observe`` if ``learn``; otherwise
        acts with ``greedy`` and does not learn.
    reset_seeds : sequence of int
        Reset seed of every copy.
    replica_seeds : sequence of int
        The replicas' integer seeds (for error messages).
    learn : bool
        Training episode (True) or greedy evaluation (False).

    Returns
    -------
    returns : ndarray of float, shape (B,)
    lengths : ndarray of int, shape (B,)
    """
    replicas = len(reset_seeds)
    states = problem.encode(env.reset(reset_seeds))
    active = np.ones(replicas, dtype=bool)
    returns = np.zeros(replicas)
    lengths = np.zeros(replicas, dtype=np.int64)
    while active.any():
        actions = agent.act(states, active) if learn else agent.greedy(states)
        step = env.step(problem.decode(actions), active)
        _check_finite(step, active, problem.env_id, replica_seeds)
        next_states = problem.encode(step.observations)
        if learn:
            transitions = Transitions(
                states, actions, step.rewards, next_states, step.terminated, active
            )
            agent.observe(transitions)
        returns += step.rewards  # 0 for inactive replicas (BatchEnv guarantees it)
        lengths += active
        active = active & ~(step.terminated | step.truncated)
        states = next_states
    return returns, lengths


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
        self.train_env = BatchEnv(problem, len(self.streams))
        self._eval_env: BatchEnv | None = None

    def train_episode(self, episode: int) -> tuple[NDArray, NDArray]:
        """Play training episode ``episode`` (1-based) and call ``agent.end_episode``."""
        reset_seeds = [episode_seed(s.env_seed, episode) for s in self.streams]
        result = play_episode(
            self.train_env, self.problem, self.agent, reset_seeds, self.seeds, learn=True
        )
        self.agent.end_episode(np.ones(len(self.streams), dtype=bool))
        return result

    def evaluate(self, episode: int) -> NDArray[np.float64]:
        """Mean return of ``eval_episodes`` greedy episodes after training episode ``episode``."""
        if self._eval_env is None:
            self._eval_env = BatchEnv(self.problem, len(self.streams))
        total = np.zeros(len(self.streams))
        for k in range(self.eval_episodes):
            reset_seeds = [episode_seed(s.eval_seed, episode, k) for s in self.streams]
            returns, _ = play_episode(
                self._eval_env, self.problem, self.agent, reset_seeds, self.seeds, learn=False
            )
            total += returns
        return total / self.eval_episodes

    def episode(self, episode: int) -> tuple[NDArray, NDArray, NDArray]:
        """Training episode ``episode`` followed by its evaluation when one is due."""
        returns, lengths = self.train_episode(episode)
        if self.eval_every and episode % self.eval_every == 0:
            greedy = self.evaluate(episode)
        else:
            greedy = np.full(len(self.streams), np.nan)
        return returns, lengths, greedy

    def close(self) -> None:
        """Close the environment copies."""
        self.train_env.close()
        if self._eval_env is not None:
            self._eval_env.close()


class _Interrupt:
    """First SIGINT/SIGTERM sets ``requested``; a second one raises KeyboardInterrupt."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True


@contextmanager
def _signals(enabled: bool) -> Iterator[_Interrupt]:
    interrupt = _Interrupt()
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield interrupt
        return
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield interrupt
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _prepare_run_dir(run_dir: Path, overwrite: bool) -> None:
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"The 'out' parameter {str(run_dir)!r} is a file, not a directory.")
    if run_dir.is_dir() and any(run_dir.iterdir()):
        if not overwrite:
            raise ConfigError(
                f"The run directory {str(run_dir)!r} is not empty; use --resume to continue "
                "it or --overwrite to start again."
            )
        for name in RUN_FILES:
            (run_dir / name).unlink(missing_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)


def _check_resumable(saved: dict, current: dict) -> None:
    for key in sorted(set(saved) | set(current)):
        if key not in _RESUMABLE_CHANGES and saved.get(key) != current.get(key):
            raise ConfigError(
                f"Cannot resume: the '{key}' parameter differs from the checkpoint "
                f"({current.get(key)!r} now, {saved.get(key)!r} saved). Only "
                f"{', '.join(_RESUMABLE_CHANGES)} may change on resume."
            )


def run(
    runner: Runner,
    config: TrainConfig,
    effective: dict[str, Any],
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: Callable[[EpisodeLog], None] | None = None,
    stop_after_episode: int | None = None,
    handle_signals: bool = False,
) -> RunResult:
    """Train ``runner`` up to ``config.episodes``, writing metrics, config and checkpoints.

    Parameters
    ----------
    runner : Runner
        The problem, agent and replica streams.
    config : TrainConfig
        Episodes, checkpoint interval and the run directory ``config.out``.
    effective : dict
        The full effective configuration, written to ``config.json`` and stored
        in the checkpoint (see `rl.config.effective_config`).
    resume : bool
        Continue from ``config.out/checkpoint.pkl``: the agent state is
        restored and ``metrics.csv`` cut back to the checkpointed length.
    overwrite : bool
        Start afresh in a non-empty run directory (removes the run's files).
    progress : callable, optional
        Called with an `EpisodeLog` after every episode.
    stop_after_episode : int, optional
        Behave as if interrupted right after this episode (for tests).
    handle_signals : bool
        Catch SIGINT/SIGTERM: the first finishes the current episode, writes a
        checkpoint and returns with ``interrupted=True``; a second one raises
        KeyboardInterrupt at once (the last periodic checkpoint stays valid).

    Returns
    -------
    RunResult
    """
    run_dir = Path(config.out)
    start, wall_base, metrics_bytes = 0, 0.0, None
    if resume:
        checkpoint = load_checkpoint(run_dir / CHECKPOINT_FILE)
        _check_resumable(checkpoint.config, effective)
        runner.agent.load_state_dict(checkpoint.agent_state)
        start, wall_base = checkpoint.episode, checkpoint.wall_time
        metrics_bytes = checkpoint.metrics_bytes
    else:
        _prepare_run_dir(run_dir, overwrite)
    atomic_write_text(run_dir / CONFIG_FILE, _dumps(effective))
    writer = MetricsWriter(run_dir / METRICS_FILE, truncate_to=metrics_bytes)
    clock = time.perf_counter()

    def wall() -> float:
        return wall_base + time.perf_counter() - clock

    def checkpoint_at(episode: int) -> None:
        state = runner.agent.state_dict()
        save_checkpoint(
            run_dir / CHECKPOINT_FILE, Checkpoint(episode, state, wall(), writer.flush(), effective)
        )

    episode, interrupted = start, False
    try:
        with _signals(handle_signals) as interrupt:
            if not resume:
                checkpoint_at(0)
            while episode < config.episodes and not interrupted:
                episode += 1
                returns, lengths, greedy = runner.episode(episode)
                now = wall()
                for i, seed in enumerate(runner.seeds):
                    writer.write(seed, episode, returns[i], lengths[i], greedy[i], now)
                interrupted = interrupt.requested or episode == stop_after_episode
                if (
                    interrupted
                    or episode % config.checkpoint_every == 0
                    or episode == config.episodes
                ):
                    checkpoint_at(episode)
                if progress is not None:
                    progress(EpisodeLog(episode, returns, lengths, greedy, now))
            if episode == start:
                checkpoint_at(episode)
    finally:
        writer.close()
    interrupted = interrupted and episode < config.episodes
    return RunResult(run_dir, episode, interrupted, wall(), int(runner.agent.n_params))


def build(config: TrainConfig) -> tuple[Runner, dict[str, Any]]:
    """Make the problem, replica streams, agent and `Runner` that ``config`` describes.

    Returns
    -------
    runner : Runner
    effective : dict
        The full effective configuration (see `rl.config.effective_config`).

    Raises
    ------
    ConfigError
        If the environment, its options, the agent or its parameters are invalid.
    """
    from rl.problems import make_problem

    env_options = effective_env_options(config)
    agent_cfg = agent_config(config)
    try:
        problem = make_problem(config.env, **env_options)
    except (ValueError, TypeError, ImportError) as error:
        raise ConfigError(f"The 'env' or 'env_options' parameter is invalid: {error}") from None
    streams = spawn_replicas(range(config.seed, config.seed + config.seeds))
    agent_class = agent_parts(config.agent)[0]
    try:
        agent = agent_class(problem, agent_cfg, [s.agent for s in streams])
    except ValueError as error:
        raise ConfigError(
            f"Cannot build agent {config.agent!r} for {config.env!r}: {error}"
        ) from None
    try:
        runner = Runner(
            problem,
            agent,
            streams,
            eval_every=config.eval_every,
            eval_episodes=config.eval_episodes,
        )
    except ImportError as error:
        raise ConfigError(f"Cannot create environment {problem.env_id!r}: {error}") from None
    return runner, effective_config(config, agent_cfg, env_options)


def train(config: TrainConfig, **options: Any) -> RunResult:
    """Build everything from ``config`` and `run` it; ``options`` are those of `run`."""
    runner, effective = build(config)
    try:
        return run(runner, config, effective, **options)
    finally:
        runner.close()


def _dumps(value: Any) -> str:
    return json.dumps(value, indent=2) + "\n"
