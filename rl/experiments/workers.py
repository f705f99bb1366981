"""The worker side of `rl.experiments.executor`: one task, the local process pool and Ray.

`execute_task` trains one configuration and `execute_batch` several as one
lockstep batch (`rl.runs.batch.training`); neither raises (an error comes back in the
`Outcome`s). `local_outcomes` and `ray_outcomes` run many units (one task, or
the tasks of one batch) and yield each task's outcome as its unit finishes.
`rl.experiments.executor.run_tasks` is the interface; this module
holds what runs in the workers and how they are started.
"""

from __future__ import annotations

import concurrent.futures as futures
import contextlib
import ctypes
import dataclasses
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NamedTuple

from rl.runs.batch.training import train_batch
from rl.runs.checkpoint import CheckpointError
from rl.runs.config import ConfigError, TrainConfig
from rl.runs.rundir import LOCK_FILE, RunDirError
from rl.runs.tensorboard import run_log_dir
from rl.runs.training import FIGURE_FILE, build, has_checkpoint, resumable_checkpoint, run

RAY_INSTALL_HINT = 'Ray is not installed; install the extra with: pip install -e ".[ray]"'
"""The one line shown when ``backend="ray"`` is asked for without Ray."""


Job = tuple[int, TrainConfig, str, "tuple[str, str] | None"]
"""A task as the driver hands it out: position, config, run directory, TensorBoard target."""

Unit = Sequence[Job]
"""What one worker runs at once: one job, or the jobs of one batch (no TensorBoard target)."""


class ExecutorError(ValueError):
    """The executor refuses to start (bad arguments, Ray missing, output in use); one line."""


# ----------------------------------------------------------------------------- the task


class Outcome(NamedTuple):
    """What a task sends back to the driver (picklable, small unless ``files`` are collected)."""

    ok: bool
    wall_time: float
    """Seconds: the run's training wall time over all its segments (done), or this attempt's."""
    error: str | None
    details: str | None
    files: dict[str, tuple[bytes, int]] | None


@contextmanager
def _one_thread() -> Iterator[None]:
    """Run BLAS and PyTorch on one thread: one task per core, and the same numbers everywhere."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(1)
        yield


def _train_into(
    config: TrainConfig,
    work_dir: str,
    shown_out: str,
    plot: bool,
    resume: bool,
    tensorboard: tuple[str, str] | None = None,
) -> float:
    """Train ``config`` into ``work_dir``; return the run's wall time over all its segments.

    ``config.json`` says ``shown_out`` is the run's home. ``tensorboard`` is
    (directory, run name): log there too (`rl.runs.tensorboard.run_log_dir`).

    With ``resume``, a checkpoint in ``work_dir`` of the same configuration is
    continued (a killed task keeps its trained episodes); one that cannot be
    (damaged, another configuration) is said on stderr, and the task starts afresh.
    """
    config = dataclasses.replace(config, out=work_dir)
    with _one_thread():
        runner, effective = build(config)
        torch = sys.modules.get("torch")  # imported by a PyTorch agent just now
        if torch is not None:
            torch.set_num_threads(1)
        effective["out"] = shown_out
        go_on = False
        if resume and has_checkpoint(Path(work_dir)):
            try:
                episode = resumable_checkpoint(Path(work_dir), effective, config.seeds).episode
            except (CheckpointError, ConfigError, RunDirError) as error:
                print(f"{shown_out}: starting afresh: {one_line(error)}", file=sys.stderr)
            else:
                print(f"{shown_out}: continuing from episode {episode}", file=sys.stderr)
                go_on = True
        try:
            log_dir = None if tensorboard is None else run_log_dir(*tensorboard, resume=go_on)
            wall = run(
                runner, config, effective, resume=go_on, overwrite=not go_on, tensorboard=log_dir
            ).wall_time
        finally:
            runner.close()
    if plot:
        from rl.runs.plot import plot_runs

        plot_runs([work_dir], Path(work_dir) / FIGURE_FILE)
    return wall


def _read_run_files(run_dir: Path) -> dict[str, tuple[bytes, int]]:
    """Return relative path -> (content, permission bits) of every file but the lock."""
    return {
        path.relative_to(run_dir).as_posix(): (path.read_bytes(), path.stat().st_mode & 0o777)
        for path in sorted(run_dir.rglob("*"))
        if path.is_file() and path.name != LOCK_FILE
    }


def execute_task(
    config: TrainConfig,
    run_dir: str,
    collect: bool,
    plot: bool = True,
    resume: bool = False,
    start_files: dict[str, tuple[bytes, int]] | None = None,
    tensorboard: tuple[str, str] | None = None,
) -> Outcome:
    """Train one configuration and report how it went; never raises (the worker side).

    Parameters
    ----------
    config : TrainConfig
        What to train.
    run_dir : str
        The run directory as the driver names it (``config.json``'s ``out``).
    collect : bool
        Train in a temporary directory and return the run files' bytes (Ray)
        instead of writing ``run_dir`` directly (local pool).
    plot : bool
        Draw ``learning_curve.png`` as ``python -m rl.train`` does.
    resume : bool
        Continue the run's checkpoint where one of this configuration is there.
    start_files : dict, optional
        With ``collect``: the run files the driver holds (`_read_run_files`),
        written into the temporary directory first, so that ``resume`` finds them.
    tensorboard : (str, str), optional
        Also log to TensorBoard: the directory and the run's name (`_train_into`).
    """
    start = time.perf_counter()
    try:
        if collect:
            with tempfile.TemporaryDirectory(prefix="rl-task-") as temporary:
                work_dir = Path(temporary) / Path(run_dir).name  # the figure shows the name
                work_dir.mkdir()
                for name, (content, mode) in (start_files or {}).items():
                    path = work_dir / name
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(content)
                    path.chmod(mode)
                wall = _train_into(config, str(work_dir), run_dir, plot, resume, tensorboard)
                files = _read_run_files(work_dir)
        else:
            wall = _train_into(config, run_dir, run_dir, plot, resume, tensorboard)
            files = None
    except Exception as error:  # recorded by the driver; the other tasks go on
        return Outcome(
            False, time.perf_counter() - start, one_line(error), traceback.format_exc(), None
        )
    return Outcome(True, wall, None, None, files)


def _train_batch_into(
    configs: Sequence[TrainConfig],
    work_dirs: Sequence[str],
    shown_outs: Sequence[str],
    plot: bool,
    resume: bool,
) -> list[float]:
    """Train ``configs`` as one batch into ``work_dirs``; return each run's wall time."""
    configs = [dataclasses.replace(c, out=d) for c, d in zip(configs, work_dirs, strict=True)]
    with _one_thread():
        results = train_batch(configs, shown_outs=shown_outs, resume=resume)
    if plot:
        from rl.runs.plot import plot_runs

        for work_dir in work_dirs:
            plot_runs([work_dir], Path(work_dir) / FIGURE_FILE)
    return [result.wall_time for result in results]


def _train_each_into(
    configs: Sequence[TrainConfig],
    work_dirs: Sequence[str],
    shown_outs: Sequence[str],
    plot: bool,
) -> list[Outcome]:
    """Train ``configs`` one by one, each resuming from its checkpoint where it has one.

    What a failed batch falls back to: its configurations' checkpoints are
    those each would have written alone, so every configuration continues
    from the last one and ends with the files of its own uninterrupted run,
    while one that fails (diverges, cannot write) fails alone.
    """
    outcomes = []
    for config, work_dir, shown in zip(configs, work_dirs, shown_outs, strict=True):
        start = time.perf_counter()
        try:
            try:
                (wall,) = _train_batch_into([config], [work_dir], [shown], plot, resume=True)
            except CheckpointError:  # the batch saved it already diverging: afresh, as alone
                (wall,) = _train_batch_into([config], [work_dir], [shown], plot, resume=False)
        except Exception as error:  # recorded by the driver; the others go on
            outcomes.append(
                Outcome(
                    False,
                    time.perf_counter() - start,
                    one_line(error),
                    traceback.format_exc(),
                    None,
                )  # fmt: skip
            )
            continue
        outcomes.append(Outcome(True, wall, None, None, None))
    return outcomes


def _train_batch_or_each(
    configs: Sequence[TrainConfig],
    work_dirs: Sequence[str],
    shown_outs: Sequence[str],
    plot: bool,
    resume: bool,
) -> list[Outcome]:
    """Train ``configs`` as one batch; if the batch fails, one by one (`_train_each_into`)."""
    try:
        walls = _train_batch_into(configs, work_dirs, shown_outs, plot, resume)
    except Exception:  # one configuration's failure: each goes on alone from its checkpoint
        return _train_each_into(configs, work_dirs, shown_outs, plot)
    return [Outcome(True, wall, None, None, None) for wall in walls]


def execute_batch(
    configs: Sequence[TrainConfig],
    run_dirs: Sequence[str],
    collect: bool,
    plot: bool = True,
    resume: bool = False,
    start_files: Sequence[dict[str, tuple[bytes, int]] | None] | None = None,
) -> list[Outcome]:
    """Train configurations as one lockstep batch (`rl.runs.batch.training.train_batch`).

    The parameters are those of `execute_task`, one entry per configuration;
    the outcomes come back in their order. It never raises: if the batch
    fails (one of its configurations diverges, or cannot be written), its
    configurations go on one by one from the checkpoints the batch wrote, so
    that only the failing ones fail, and the others end with the files of
    their own runs.
    """
    start = time.perf_counter()
    try:
        if collect:
            with tempfile.TemporaryDirectory(prefix="rl-batch-") as temporary:
                work_dirs = [
                    Path(temporary) / str(i) / Path(run_dir).name
                    for i, run_dir in enumerate(run_dirs)
                ]
                for work_dir, held in zip(
                    work_dirs, start_files or [None] * len(run_dirs), strict=True
                ):
                    work_dir.mkdir(parents=True)
                    for name, (content, mode) in (held or {}).items():
                        path = work_dir / name
                        path.parent.mkdir(parents=True, exist_ok=True)
                        path.write_bytes(content)
                        path.chmod(mode)
                outcomes = _train_batch_or_each(
                    configs, [str(d) for d in work_dirs], run_dirs, plot, resume
                )
                return [
                    o._replace(files=_read_run_files(d)) if o.ok else o
                    for o, d in zip(outcomes, work_dirs, strict=True)
                ]
        return _train_batch_or_each(configs, run_dirs, run_dirs, plot, resume)
    except Exception as error:  # recorded by the driver; the other tasks go on
        failed = Outcome(
            False, time.perf_counter() - start, one_line(error), traceback.format_exc(), None
        )
        return [failed] * len(run_dirs)


def _unit_call(unit: Unit, collect: bool, plot: bool, resume: bool, held: Callable) -> tuple:
    """Return the function and arguments that run ``unit`` (`execute_task` or `execute_batch`)."""
    if len(unit) == 1:
        ((_, config, run_dir, board),) = unit
        return execute_task, (config, run_dir, collect, plot, resume, held(run_dir), board)
    configs = [config for _, config, _, _ in unit]
    run_dirs = [run_dir for _, _, run_dir, _ in unit]
    return execute_batch, (configs, run_dirs, collect, plot, resume, [held(d) for d in run_dirs])


def _as_list(outcome: Outcome | list[Outcome]) -> list[Outcome]:
    return outcome if isinstance(outcome, list) else [outcome]


def one_line(error: BaseException) -> str:
    """Return ``"ExceptionType: message"`` on one line."""
    message = " ".join(str(error).split())
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


# ----------------------------------------------------------------------------- pools


def cpu_workers(workers: int | None) -> int:
    """Return ``workers`` checked, or the number of CPUs this process may use if None.

    Raises
    ------
    ExecutorError
        If ``workers`` is not an int >= 1.
    """
    if workers is None:
        if hasattr(os, "sched_getaffinity"):
            return len(os.sched_getaffinity(0))
        return os.cpu_count() or 1
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ExecutorError(
            f"The 'workers' parameter must be an int >= 1. Got {workers!r} instead."
        )
    return workers


def _end_with_driver(driver: Connection) -> None:
    """Pool initializer: end this worker as soon as the driver's end of ``driver`` closes.

    Only the driver holds the writing end of the pipe, and the kernel closes
    it when the driver dies, even by SIGKILL; the worker then exits at once
    (its run directory's lock goes with it) instead of training on and waiting
    for tasks forever. A worker's parent is the forkserver, which outlives the
    driver, so watching the parent process would not do.
    """

    def watch() -> None:
        with contextlib.suppress(EOFError, OSError):
            driver.recv_bytes()  # nothing is ever sent: this returns on EOF
        os._exit(1)

    threading.Thread(target=watch, name="end-with-driver", daemon=True).start()


PR_SET_PDEATHSIG = 1
"""``prctl`` option of Linux: the signal a process gets when its parent dies (``<sys/prctl.h>``)."""


def end_with_parent() -> Callable[[], None] | None:
    """Return a ``preexec_fn`` for `subprocess.Popen` that ends the child with this process.

    On Linux the child asks the kernel (``prctl(PR_SET_PDEATHSIG, SIGTERM)``)
    for SIGTERM when this process dies, even by SIGKILL, so that a part of
    ``python -m rl.reproduce paper`` stops (keeping what it finished, and
    releasing its run directory's lock) instead of training on as an orphan;
    if this process died before the request, the child ends at once. The
    request holds for the thread that starts the child: call it from the
    main thread. Elsewhere it returns None (no such request).
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the request: end now
            os.kill(os.getpid(), signal.SIGTERM)

    return arm


def local_outcomes(
    units: Sequence[Unit], workers: int, plot: bool, resume: bool
) -> Iterator[tuple[int, Outcome]]:
    """Yield (position, outcome) as the local pool's units finish.

    ``units`` hold jobs: (position, config, run directory as the driver names it,
    TensorBoard directory and run name or None), one per unit or a batch's;
    ``resume`` continues the checkpoints found there (`execute_task`).
    Closing the generator early (the driver interrupted) terminates the
    running tasks; if the driver dies, the workers end with it
    (`_end_with_driver`).
    """
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    alive_read, alive_write = context.Pipe(duplex=False)
    pool = futures.ProcessPoolExecutor(
        max_workers=min(workers, len(units)),
        mp_context=context,
        initializer=_end_with_driver,
        initargs=(alive_read,),
    )
    completed = False
    try:
        pending = {}
        for unit in units:
            function, arguments = _unit_call(unit, False, plot, resume, lambda run_dir: None)
            pending[pool.submit(function, *arguments)] = [job[0] for job in unit]
        for future in futures.as_completed(pending):
            positions = pending[future]
            try:
                outcomes = _as_list(future.result())
            except Exception as error:  # a worker died (killed, out of memory): the pool breaks
                lost = Outcome(False, 0.0, f"worker lost: {one_line(error)}", None, None)
                outcomes = [lost] * len(positions)
            yield from zip(positions, outcomes, strict=True)
        completed = True
    finally:
        if not completed:  # interrupted: stop the running tasks now rather than wait for them
            processes = getattr(pool, "_processes", None) or {}  # private, hence the guard
            for process in list(processes.values()):
                process.terminate()
            for process in list(processes.values()):
                process.join(timeout=10)  # its run directory's lock is free once it is gone
        pool.shutdown(wait=completed, cancel_futures=True)
        alive_read.close()
        alive_write.close()


def require_ray() -> Any:
    """Import and return ``ray``, or raise `ExecutorError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ExecutorError(RAY_INSTALL_HINT) from None
    return ray


@contextmanager
def _ray_session(address: str | None, workers: int | None) -> Iterator[Any]:
    """Connect to ``address`` or start a quiet local instance; shut down only what we started."""
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    quiet: dict[str, Any] = {"logging_level": "ERROR", "log_to_driver": False}
    try:
        if address:
            ray.init(address=address, **quiet)
        else:
            ray.init(num_cpus=cpu_workers(workers), include_dashboard=False, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise ExecutorError(f"Cannot start or reach Ray ({address or 'local'}): {error}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def ray_outcomes(
    units: Sequence[Unit],
    address: str | None,
    workers: int | None,
    plot: bool,
    resume: bool,
) -> Iterator[tuple[int, Outcome]]:
    """Yield (position, outcome) as the Ray tasks (one per unit) finish, with the run files.

    With ``resume`` the files of each job's run directory on the driver's machine
    travel with it, so that the worker continues its checkpoint. Closing the
    generator early cancels the unfinished tasks.
    """

    def files(run_dir: str) -> dict[str, tuple[bytes, int]] | None:
        return _read_run_files(Path(run_dir)) if resume and Path(run_dir).is_dir() else None

    with _ray_session(address, workers) as ray:
        remotes = {f: ray.remote(num_cpus=1)(f) for f in (execute_task, execute_batch)}
        pending = {}
        for unit in units:
            function, arguments = _unit_call(unit, True, plot, resume, files)
            pending[remotes[function].remote(*arguments)] = [job[0] for job in unit]
        try:
            while pending:
                (ref,), _ = ray.wait(list(pending), num_returns=1)
                positions = pending.pop(ref)
                try:
                    outcomes = _as_list(ray.get(ref))
                except Exception as error:  # a lost worker or node, after Ray's own retries
                    lost = Outcome(False, 0.0, f"worker lost: {one_line(error)}", None, None)
                    outcomes = [lost] * len(positions)
                yield from zip(positions, outcomes, strict=True)
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)
