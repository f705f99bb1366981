"""A training run: the run directory, metrics, checkpoints and resume around `rl.loop.runner`.

`build` resolves a `rl.runs.config.TrainConfig` (`rl.runs.config.resolve_settings`:
the agent, its reading and config, the problem) and `build_run` makes from those
settings the replicas' streams, the agent and the `rl.loop.runner.Runner`; `run` plays the
training episodes with the runner and writes ``metrics.csv`` (one row per seed
and episode, in episode order), ``config.json`` and checkpoints. Replicas run
ahead of one another freely (`rl.loop.runner`) and wait for each other only at a
checkpoint boundary (every ``checkpoint_every`` episodes, at the end, and on
interruption), where the checkpoint then needs the agent's state alone:
environments are reset at the start of every episode with a seed that is a
pure function of (seed, episode), so they carry nothing across episodes.

References
----------
Algorithm 3 of the TEQL paper (the episode loop around each agent's step), and
its experimental protocol: one greedy episode after every 10th training episode.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import json
import math
import os
import shlex
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from rl.loop.runner import Runner
from rl.runs.batch.replica_state import join_states, split_state
from rl.runs.checkpoint import (
    CHECKPOINT_NAME,
    LEGACY_CHECKPOINT_NAME,
    Checkpoint,
    CheckpointError,
    check_checkpoint_against_metrics,
    best_checkpoint,
    load_checkpoint,
    restore_agent,
    save_checkpoint,
)
from rl.runs.config import (
    ConfigError,
    Settings,
    TrainConfig,
    effective_config,
    recorded_run_config,
    resolve_settings,
)
from rl.runs.metrics import MetricsWriter
from rl.runs.rundir import (
    RunLock,
    RunWriteError,
    atomic_write_text,
    check_run_files,
    check_writable,
    has_run_files,
    make_run_dir,
    refuse_if_locked,
    remove_stale_temporaries,
)
from rl.runs.tensorboard import TensorBoardWriter, agent_diagnostics, watch_diagnostics
from rl.seeding import spawn_replicas
from rl.validation import (
    REPLICA_OVERHEAD_BYTES,
    check_replicas,
    state_bytes,
)

METRICS_FILE = "metrics.csv"
CONFIG_FILE = "config.json"
CHECKPOINT_FILE = CHECKPOINT_NAME
FIGURE_FILE = "learning_curve.png"
RUN_FILES = (METRICS_FILE, CONFIG_FILE, CHECKPOINT_FILE, FIGURE_FILE)
"""Files a run directory holds (besides its ``.lock``, see `rl.runs.rundir`).

``overwrite`` removes exactly these and an old pickled ``checkpoint.pkl``. A run
refuses a directory where one of them (or ``.lock``) is a symbolic link or not a
regular file, and removes the temporary files of writes killed earlier once it
holds the lock (see `rl.runs.rundir`).
"""

_RESUMABLE_CHANGES = ("episodes", "out", "checkpoint_every")


class EpisodeLog(NamedTuple):
    """What one training episode (and its evaluation, if any) produced, and when.

    The fields of `rl.loop.runner.EpisodeResult` (episode, returns, lengths,
    greedy_returns), then ``wall_time``: seconds since the run started, summed
    over resumed segments.
    """

    episode: int
    returns: NDArray[np.float64]
    lengths: NDArray[np.int64]
    greedy_returns: NDArray[np.float64]
    wall_time: float


STOP_GRACE_SECONDS = 2.0
"""After SIGINT/SIGTERM, how long the episodes in progress may run on to a checkpoint
before they are dropped (the run then keeps its last checkpoint)."""


class RunResult(NamedTuple):
    """Outcome of `run`: where it wrote, how far it got, whether it was interrupted.

    ``dropped``: the interruption dropped the episodes in progress, so
    ``episodes_done`` is the episode of the last checkpoint, from which a
    resumed run replays them.
    """

    run_dir: Path
    episodes_done: int
    interrupted: bool
    wall_time: float
    n_params: int
    dropped: bool = False


class _Interrupt:
    """First SIGINT/SIGTERM sets ``requested`` and ``since``; a second raises KeyboardInterrupt."""

    def __init__(self) -> None:
        self.requested = False
        self.since = 0.0

    def __call__(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self.since = time.monotonic()

    def overdue(self) -> bool:
        """Whether a stop was requested more than `STOP_GRACE_SECONDS` ago."""
        return self.requested and time.monotonic() - self.since > STOP_GRACE_SECONDS


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


class BestStates:
    """Each replica's best-evaluated agent state while a run trains (``keep_best``).

    A run with ``keep_best`` keeps, for each replica, a copy of its agent state
    after the training episode whose greedy evaluation (the mean return of its
    ``eval_episodes`` greedy episodes, the value ``metrics.csv`` records) is the
    highest so far; a later evaluation replaces it only when strictly higher, so
    the first of equal bests is kept. This is stable-baselines3's ``EvalCallback``
    with ``best_model_save_path``, per replica, on the run's own evaluations.
    Before a replica's first finite evaluation its best is the fresh agent
    (episode 0); a NaN evaluation never counts.

    The run then waits for all replicas at every evaluation point as well as at
    every checkpoint (`next_barrier`), so that the state copied is the agent's
    after exactly that episode; the results are bitwise those of the same run
    without ``keep_best``. The best states are cut out of the agent's state and
    joined back into one state of all replicas with `rl.runs.batch.replica_state`
    (per-replica rows, generator states and visit tables; values shared by all
    replicas are the latest), and written into every checkpoint
    (`rl.runs.checkpoint.Checkpoint.best`), so a resumed run continues with them
    and an interrupted one loses none.
    ``python -m rl.evaluate RUN_DIR --best`` and ``rl.load_run(RUN_DIR, best=True)``
    load them.

    The checkpoint's ``best`` is a tree of three entries: ``agent_state`` (the
    joined state), ``episodes`` (int64, shape (B,): the training episode of each
    replica's best, 0 for the fresh agent) and ``greedy_returns`` (float64, shape
    (B,): its evaluation, -inf for the fresh agent).

    Parameters
    ----------
    runner : Runner
        The run's runner, its agent fresh (before a checkpoint is restored).
    """

    def __init__(self, runner: Runner) -> None:
        agent = runner.agent
        self._agent = agent
        self._batch_layout = agent.state_dict()
        alone = type(agent)(runner.problem, agent.config, [spawn_replicas([0])[0].agent])
        self._layout = alone.state_dict()
        self._n_states = math.prod(runner.problem.state_dims)
        replicas = self._replicas = runner.replicas
        self.episodes: NDArray[np.int64] = np.zeros(replicas, dtype=np.int64)
        self.greedy_returns: NDArray[np.float64] = np.full(replicas, -np.inf)
        self._parts = [self._cut(self._batch_layout, i) for i in range(replicas)]

    def _cut(self, state: Any, replica: int) -> Any:
        if self._replicas == 1:  # the replica's state is the agent's
            return copy.deepcopy(state)
        return split_state(
            state, self._layout, self._batch_layout, replica, replica + 1, self._n_states
        )

    def observe(self, episode: int, greedy_returns: NDArray[np.float64]) -> None:
        """Keep the agent's current state for the replicas whose evaluation is a new best.

        Call it when every replica has finished ``episode`` and its evaluation,
        before any replica plays on.
        """
        better = np.asarray(greedy_returns, dtype=np.float64) > self.greedy_returns
        if not better.any():
            return
        state = self._agent.state_dict()
        for replica in np.flatnonzero(better):
            self._parts[replica] = self._cut(state, int(replica))
            self.episodes[replica] = episode
            self.greedy_returns[replica] = greedy_returns[replica]

    def tree(self) -> dict[str, Any]:
        """Return the checkpoint's ``best`` tree (see the module docstring)."""
        state = self._parts[0]
        if self._replicas > 1:
            state = join_states(
                self._parts,
                [1] * self._replicas,
                [self._layout] * self._replicas,
                self._agent.state_dict(),
                self._n_states,
            )
        return {
            "agent_state": state,
            "episodes": self.episodes.copy(),
            "greedy_returns": self.greedy_returns.copy(),
        }

    def restore(self, tree: dict[str, Any]) -> None:
        """Continue from a checkpoint's ``best`` tree (written by `tree`, checked on load)."""
        state = tree["agent_state"]
        self._parts = [self._cut(state, i) for i in range(self._replicas)]
        self.episodes = np.array(tree["episodes"], dtype=np.int64)
        self.greedy_returns = np.array(tree["greedy_returns"], dtype=np.float64)


def next_barrier(episode: int, config: TrainConfig, stop_after: int | None) -> int:
    """Return the next episode at which every replica waits.

    A checkpoint, the end or ``stop_after``, and with ``keep_best`` every
    evaluation as well (`BestStates`).
    """
    every = config.checkpoint_every
    barrier = min(config.episodes, (episode // every + 1) * every)
    if config.keep_best:
        barrier = min(barrier, (episode // config.eval_every + 1) * config.eval_every)
    if stop_after is not None and stop_after > episode:
        barrier = min(barrier, stop_after)
    return barrier


def prepare_run_dir(run_dir: Path, overwrite: bool) -> RunLock:
    """Create or empty ``run_dir`` for a fresh run and return its lock (see `rl.runs.rundir`)."""
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"The 'out' parameter {str(run_dir)!r} is a file, not a directory.")
    if has_run_files(run_dir) and not overwrite:
        refuse_if_locked(run_dir)
        if not has_checkpoint(run_dir):
            raise ConfigError(
                f"The run directory {str(run_dir)!r} is not empty but holds no checkpoint, "
                "so it cannot be resumed; use --overwrite to start again."
            )
        raise ConfigError(
            f"The run directory {str(run_dir)!r} is not empty; use --resume to continue "
            "it or --overwrite to start again."
        )
    make_run_dir(run_dir)
    lock = RunLock.acquire(run_dir)
    try:
        check_run_files(run_dir, (*RUN_FILES, LEGACY_CHECKPOINT_NAME))
        if overwrite:
            for name in (*RUN_FILES, LEGACY_CHECKPOINT_NAME):
                (run_dir / name).unlink(missing_ok=True)
        remove_stale_temporaries(run_dir, RUN_FILES)
        check_writable(run_dir)
    except BaseException:
        lock.release()
        raise
    return lock


def has_checkpoint(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a checkpoint file (of either format), valid or not."""
    return any(
        os.path.lexists(run_dir / name) for name in (CHECKPOINT_FILE, LEGACY_CHECKPOINT_NAME)
    )


def _afresh(run_dir: Path) -> str:
    """Return the command that starts the run in ``run_dir`` afresh from its ``config.json``."""
    config = shlex.quote(str(run_dir / CONFIG_FILE))
    return f"python -m rl.train --config {config} --overwrite"


def _write_error(path: Path, doing: str, error: OSError, kept: int | None) -> RunWriteError:
    """Return the one-line error for a failed write of ``path`` while ``doing``; say what is kept.

    ``kept`` is the episode of the last checkpoint on disk, None if there is none.
    """
    run_dir = path.parent
    reason = error.strerror or " ".join(str(error).split())
    remedy = "fix that"
    if error.errno == errno.ENOSPC:
        reason, remedy = f"the disk is full ({reason})", "free space"
    if kept is None:
        return RunWriteError(
            f"Cannot write {path} ({doing}): {reason}. No checkpoint was written, so the run "
            f"cannot be resumed; {remedy} and start afresh with: {_afresh(run_dir)}"
        )
    return RunWriteError(
        f"Cannot write {path} ({doing}): {reason}. The last good checkpoint, of episode {kept}, "
        f"is kept; {remedy} and continue with: python -m rl.train --resume "
        f"{shlex.quote(str(run_dir))}"
    )


def resumable_checkpoint(run_dir: Path, effective: dict[str, Any], seeds: int) -> Checkpoint:
    """Load and check the checkpoint of ``run_dir`` for a resume of ``effective``.

    Nothing is changed or restored. The checkpoint must load, record the same
    configuration (but for ``episodes``, ``out`` and ``checkpoint_every``), not
    go beyond ``effective["episodes"]``, and agree with ``metrics.csv`` (``seeds``
    rows per episode).

    Raises
    ------
    CheckpointError, rl.runs.rundir.RunDirError, ConfigError
        Why the run cannot be resumed, in one line.
    """
    check_run_files(run_dir, (*RUN_FILES, LEGACY_CHECKPOINT_NAME))
    path = run_dir / CHECKPOINT_FILE
    checkpoint = load_checkpoint(path)
    _check_resumable(recorded_run_config(checkpoint.config), effective)
    recorded = checkpoint.config.get("episodes")
    if not isinstance(recorded, int) or not 0 <= checkpoint.episode <= recorded:
        raise CheckpointError(
            f"Refusing checkpoint {path}: it records episode {checkpoint.episode} of a run of "
            f"{recorded!r} episodes."
        )
    if effective["episodes"] < checkpoint.episode:
        raise ConfigError(
            f"Cannot resume with episodes={effective['episodes']}: the run already trained "
            f"{checkpoint.episode} episodes, and config.json would then understate them (omit "
            f"--episodes or give at least {checkpoint.episode})."
        )
    check_checkpoint_against_metrics(checkpoint, run_dir / METRICS_FILE, seeds)
    return checkpoint


def _resume_checkpoint(
    runner: Runner, run_dir: Path, effective: dict, best: BestStates | None
) -> Checkpoint:
    """Load, check (`resumable_checkpoint`) and restore the checkpoint of ``run_dir``.

    With ``best``, the checkpoint's best states are restored into it too.
    """
    checkpoint = resumable_checkpoint(run_dir, effective, len(runner.seeds))
    check_writable(run_dir)
    path = run_dir / CHECKPOINT_FILE
    if best is not None:
        best.restore(best_checkpoint(checkpoint, path, runner.agent))
    restore_agent(runner.agent, checkpoint, path)
    return checkpoint


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
    progress: Callable[[EpisodeLog], bool | None] | None = None,
    stop_after_episode: int | None = None,
    handle_signals: bool = False,
    tensorboard: str | os.PathLike | None = None,
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
        in the checkpoint (see `rl.runs.config.effective_config`).
    resume : bool
        Continue from ``config.out/checkpoint.npz``: the checkpoint is checked
        (values, and episode against ``metrics.csv``, see
        `rl.runs.checkpoint.check_checkpoint_against_metrics`), the agent state is
        restored and ``metrics.csv`` cut back to the checkpointed length.
        ``config.episodes`` may extend or shorten the run, never below the
        episodes already trained, so ``config.json`` always states the length
        of the run.
    overwrite : bool
        Start afresh in a non-empty run directory (removes the run's files).
    progress : callable, optional
        Called with an `EpisodeLog` after every episode. Returning False stops
        the run as a first SIGINT does: the replicas finish the episodes they
        are playing, a checkpoint is written and the result has
        ``interrupted=True`` (`progress` is not called again).
    stop_after_episode : int, optional
        Behave as if interrupted right after this episode (for tests).
    handle_signals : bool
        Catch SIGINT/SIGTERM: the first lets the replicas finish the episodes
        they are playing, writes a checkpoint and returns with
        ``interrupted=True``; if those episodes have not ended after
        `STOP_GRACE_SECONDS` (an episode may be long), they are dropped instead:
        no checkpoint is written, the last one stays and a resumed run replays
        them (``dropped=True``). A second signal raises KeyboardInterrupt at
        once (the last periodic checkpoint stays valid).
    tensorboard : path-like, optional
        Also write every row of ``metrics.csv`` and the agent's diagnostics as
        TensorBoard events into this directory, one subdirectory per seed
        (`rl.runs.tensorboard`; `rl.runs.tensorboard.run_log_dir` names it).

    Returns
    -------
    RunResult
    """
    run_dir = Path(config.out)
    start, wall_base, metrics_bytes = 0, 0.0, None
    best = BestStates(runner) if config.keep_best else None  # the agent is still fresh here
    lock = RunLock.acquire(run_dir) if resume else prepare_run_dir(run_dir, overwrite)
    try:  # the lock is released in the ``finally`` below, or here if training never starts
        if resume:
            if not has_checkpoint(run_dir):
                raise ConfigError(
                    f"Cannot resume {run_dir}: no checkpoint was written (the run stopped before "
                    f"its first one); start afresh with: {_afresh(run_dir)}"
                )
            checkpoint = _resume_checkpoint(runner, run_dir, effective, best)
            start, wall_base = checkpoint.episode, checkpoint.wall_time
            metrics_bytes = checkpoint.metrics_bytes
            remove_stale_temporaries(run_dir, RUN_FILES)
        board = None
        if tensorboard is not None:
            resume_after = start if resume else None
            board = TensorBoardWriter(
                tensorboard, runner.seeds, effective, resume_after=resume_after
            )
            watch_diagnostics(runner.agent)
        atomic_write_text(run_dir / CONFIG_FILE, config_text(effective))
        writer = MetricsWriter(run_dir / METRICS_FILE, truncate_to=metrics_bytes)
    except BaseException:
        lock.release()
        raise
    clock = time.perf_counter()

    def wall() -> float:
        return wall_base + time.perf_counter() - clock

    kept = start if resume else None  # the episode of the last checkpoint on disk

    def failed(path: Path, doing: str, error: OSError) -> RunWriteError:
        with contextlib.suppress(OSError):  # keep this message, not the close's error
            writer.close()
        return _write_error(path, doing, error, kept)

    def checkpoint_at(episode: int) -> None:
        nonlocal kept
        doing = f"checkpoint of episode {episode}"
        state = runner.agent.state_dict()
        try:
            metrics_bytes = writer.flush()
        except OSError as error:
            raise failed(run_dir / METRICS_FILE, doing, error) from error
        if board is not None:
            board.flush()
        try:
            save_checkpoint(
                run_dir / CHECKPOINT_FILE,
                Checkpoint(
                    episode,
                    state,
                    wall(),
                    metrics_bytes,
                    effective,
                    best=None if best is None else best.tree(),
                ),
            )
        except OSError as error:
            raise failed(run_dir / CHECKPOINT_FILE, doing, error) from error
        kept = episode

    episode, interrupted, dropped, stopped = start, False, False, False
    try:
        with _signals(handle_signals) as interrupt:

            def abandon() -> bool:
                nonlocal interrupted, dropped
                if interrupt.requested and not interrupted:
                    interrupted = True
                    runner.request_stop()  # replicas finish the episodes they are playing
                dropped = interrupt.overdue()
                return dropped

            if not resume:
                checkpoint_at(0)
            while episode < config.episodes and not interrupted:
                barrier = next_barrier(episode, config, stop_after_episode)
                latest = None
                for result in runner.episodes(episode, barrier, abandon):
                    latest = result
                    episode, now = result.episode, wall()
                    try:
                        for i, seed in enumerate(runner.seeds):
                            writer.write(
                                seed,
                                episode,
                                result.returns[i],
                                result.lengths[i],
                                result.greedy_returns[i],
                                now,
                            )
                    except OSError as error:
                        doing = f"rows of episode {episode}"
                        raise failed(run_dir / METRICS_FILE, doing, error) from error
                    if board is not None:
                        board.write(
                            *result,
                            agent_steps=runner.agent_steps,
                            diagnostics=lambda: agent_diagnostics(runner.agent),
                        )
                    if progress is not None and not stopped:
                        if progress(EpisodeLog(*result, now)) is False:
                            stopped = interrupted = True
                            runner.request_stop()
                if dropped:  # the agent is mid-episode: keep the last checkpoint
                    break
                if best is not None and latest is not None and episode % config.eval_every == 0:
                    best.observe(episode, latest.greedy_returns)  # every replica is at it
                interrupted = interrupted or episode == stop_after_episode
                if (
                    interrupted
                    or episode == config.episodes
                    or episode % config.checkpoint_every == 0
                ):  # not at an evaluation that is only a barrier of ``keep_best``
                    checkpoint_at(episode)
            if episode == start and not dropped:
                checkpoint_at(episode)
    finally:
        with lock:  # released even if closing the metrics fails
            try:
                writer.close()
            finally:
                if board is not None:
                    board.close()
    if dropped:
        last = start if kept is None else kept
        return RunResult(run_dir, last, True, wall(), int(runner.agent.n_params), dropped=True)
    interrupted = interrupted and episode < config.episodes
    return RunResult(run_dir, episode, interrupted, wall(), int(runner.agent.n_params))


def build(config: TrainConfig, *, import_env_module: bool = True) -> tuple[Runner, dict[str, Any]]:
    """Resolve ``config`` (`rl.runs.config.resolve_settings`) and `build_run` it.

    Parameters
    ----------
    config : TrainConfig
    import_env_module : bool, default True
        Whether the module of a ``"package.module:Env-v0"`` id may be imported
        (False for a configuration read from a run directory that the user did
        not name the environment of; see `rl.problems.make_problem`).

    Returns
    -------
    runner : Runner
    effective : dict
        The full effective configuration (see `rl.runs.config.effective_config`).

    Raises
    ------
    ConfigError
        If the environment, its options, the agent or its parameters are invalid.
    rl.problems.from_gymnasium.EnvModuleRefused
        If ``import_env_module`` is False and the id's module is not imported yet.
    """
    return build_run(resolve_settings(config, import_env_module=import_env_module))


def build_run(settings: Settings) -> tuple[Runner, dict[str, Any]]:
    """Make the replica streams, the agent (once, with every replica) and the `Runner`.

    Before the streams are spawned, more replicas than fit in memory at
    `rl.validation.REPLICA_OVERHEAD_BYTES` each are refused; the agent refuses
    arrays that do not fit before it makes them (its factors, tables, networks
    or buffers); once built, its state per replica plus that overhead must fit
    as well (`rl.validation.check_replicas`).

    Parameters
    ----------
    settings : Settings
        A run's resolved settings (`rl.runs.config.resolve_settings`), with its problem.

    Returns
    -------
    runner : Runner
    effective : dict
        The full effective configuration (see `rl.runs.config.effective_config`).

    Raises
    ------
    ConfigError
        If the agent cannot be built for the problem, its replicas do not fit
        in memory, or the environment cannot be created.
    """
    config, problem = settings.config, settings.problem
    what = f"{config.agent!r} on {config.env!r}"
    try:
        check_replicas(config.seeds, REPLICA_OVERHEAD_BYTES, what)
        streams = spawn_replicas(range(config.seed, config.seed + config.seeds))
        agent = settings.spec.agent_class(problem, settings.agent, [s.agent for s in streams])
        per_replica = state_bytes(agent.state_dict()) / config.seeds + REPLICA_OVERHEAD_BYTES
        check_replicas(config.seeds, per_replica, what)
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
    except (ImportError, ValueError, TypeError) as error:  # env_kwargs reach the env only here
        raise ConfigError(f"Cannot create environment {problem.env_id!r}: {error}") from None
    recorded = {**settings.env_options, **problem.recorded_options()}  # an estimated reward bound
    return runner, effective_config(settings, recorded)


def train(config: TrainConfig, **options: Any) -> RunResult:
    """Build everything from ``config`` and `run` it; ``options`` are those of `run`."""
    runner, effective = build(config)
    try:
        return run(runner, config, effective, **options)
    finally:
        runner.close()


def config_text(effective: dict[str, Any]) -> str:
    """Return the text of ``config.json`` for an effective configuration (indented JSON)."""
    return json.dumps(effective, indent=2) + "\n"
