"""Run independent training configurations on a local process pool or on a Ray cluster.

The one executor of `rl.sweep` and `rl.reproduce`. A `Task` is one training
configuration (a `rl.runs.config.TrainConfig`, its seeds trained as replicas in
lockstep by `rl.runs.training`) and the name of its run directory under the
executor's output directory ``out``; `run_tasks` runs a list of them::

    from rl.experiments.executor import Task, run_tasks

    tasks = [Task("cartpole-teql", config_a, {"agent": "teql"}), Task("cartpole-tlr", config_b)]
    results = run_tasks(tasks, "runs/study", backend="local", workers=4, resume=False,
                        on_done=print, progress=True)
    failed = [r for r in results if r.status == "failed"]

Backends
--------
``"local"``
    A `concurrent.futures.ProcessPoolExecutor` of ``workers`` processes
    (default: the CPUs this process may use) started with ``forkserver``
    (``spawn`` where that is missing). A task writes its run directory itself.
``"ray"``
    One Ray task per configuration (one CPU each). With ``address`` the driver
    connects to a running cluster (``ray start --head`` prints the address);
    without it, a local Ray instance with ``workers`` CPUs starts and stops with
    the call (an instance this process already started is used as it is). A task
    trains in a temporary directory on its node and returns its run files
    (bytes of every file but the lock); the driver writes them, so the nodes
    need no shared file system, only this package installed. Ray is an optional
    extra: without it, `ExecutorError` says ``pip install -e ".[ray]"``.

The files are the same on either backend: ``OUT/NAME/`` holds exactly what
``python -m rl.train`` writes (``metrics.csv``, ``config.json`` whose ``out``
is ``OUT/NAME``, ``checkpoint.npz``, ``learning_curve.png``, ``.lock``), and
every task trains its PyTorch agents and BLAS on one thread, so the numbers
agree bitwise; only the ``wall_time`` column (and the checkpoint that records
it) differ between any two runs.

Records and resume
------------------
``OUT/index.csv`` has one row per task, in task order: ``position``, ``name``
(the run directory, relative to ``OUT``), ``hash`` (`config_hash`), the task's
``values`` (one column per key, JSON for non-strings), ``status`` (``pending``,
``done`` or ``failed``), ``wall_time`` (seconds of training, summed over the
segments of a run continued by ``resume``; of the attempt, for a failed task),
``error`` (one line) and ``copied_from`` (the run directory a task copied
from another output directory was copied from, see ``reuse``; empty for a
task trained here). The
driver rewrites it atomically when a task finishes, so a killed driver or a
lost worker loses only the unfinished tasks. A failed task also leaves
``OUT/NAME/error.txt`` (its configuration and the traceback); it does not stop
the others. With ``resume=True`` a task whose configuration hash has a
``done`` row (matched by hash, not by position) is not run again if its run
files are complete (`rl.runs.verify.verify_run`: the checkpoint loads and
reaches the configured episodes, ``metrics.csv`` has one row per seed and
episode). The others run again: a run directory that holds a checkpoint of
the same configuration (a task killed mid-run keeps its periodic checkpoints)
is continued from it, as ``python -m rl.train --resume`` does; one whose
files are missing, damaged or of another configuration starts afresh, and the
worker says why on stderr. On Ray, the run files travel from the driver's
machine to the worker and back. Without ``resume`` the call refuses an
``OUT`` that already holds an ``index.csv`` or any of the run directories.
A second driver on the same ``OUT`` is refused while the first runs
(``OUT/.lock``, see `rl.runs.rundir`).

``reuse`` names output directories of earlier calls: a task whose
configuration hash one of them records done, with complete run files, is
copied from there instead of trained (`rl.runs.copy_run`). Training is
deterministic, so the copy is what training would write; ``python -m
rl.reproduce paper`` uses it so that a line shared by two experiments (the
comparison's TEQL line is the ablation's lambda = 0 line in the released
reading) trains once.

Batches
-------
``batches`` groups task positions: the tasks of one group that are to run
train as one lockstep batch in one worker (`rl.runs.batch.training`: one agent whose
replicas are every task's seeds, each task's run directory written as its own
run writes it); they are recorded one by one when the batch ends, each with
the batch's wall time. A task in no group, or alone in its group after
``resume`` skipped the others, runs as its own task. With ``tensorboard``
every task runs as its own task. `rl.sweep` forms the groups.

This module is the driver; what runs in the workers, and how the pool and Ray
are started, is in `rl.experiments.workers`. See ``docs/scale-out.md``.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import io
import json
import math
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal, NamedTuple

from rl.experiments.workers import (
    RAY_INSTALL_HINT,
    ExecutorError,
    Job,
    Outcome,
    cpu_workers,
    execute_task,
    local_outcomes,
    one_line,
    ray_outcomes,
    require_ray,
)
from rl.runs.config import TrainConfig, effective_config, resolve_settings, to_jsonable
from rl.runs.copy_run import copy_run
from rl.runs.rundir import (
    RunDirError,
    RunLock,
    atomic_write_bytes,
    atomic_write_text,
    has_run_files,
    make_run_dir,
    open_run_file,
    refuse_linked_path,
)
from rl.runs.training import RUN_FILES
from rl.runs.verify import verify_run

__all__ = [
    "ERROR_FILE",
    "INDEX_FILE",
    "RAY_INSTALL_HINT",
    "ExecutorError",
    "Task",
    "TaskResult",
    "config_hash",
    "execute_task",
    "finished",
    "hash_effective",
    "read_index",
    "require_ray",
    "run_tasks",
]

INDEX_FILE = "index.csv"
"""Name of the index of tasks in the executor's output directory."""

ERROR_FILE = "error.txt"
"""Name of the file a failed task leaves in its run directory."""


Backend = Literal["local", "ray"]

_HASH_LENGTH = 8


@dataclass(frozen=True)
class Task:
    """One training configuration to run.

    Attributes
    ----------
    name : str
        Run directory relative to the executor's ``out`` (``"003-1a2b3c4d"``,
        ``"cartpole/teql"``); unique within a call.
    config : TrainConfig
        What to train; its ``out`` is replaced by ``OUT/name``.
    values : mapping
        What to show in the task's row of ``index.csv`` (the swept keys, say),
        key -> JSON-able value.
    """

    name: str
    config: TrainConfig
    values: Mapping[str, Any] = field(default_factory=dict)


class TaskResult(NamedTuple):
    """How one task ended.

    Attributes
    ----------
    name : str
        Its run directory relative to ``out`` (for a task skipped on resume,
        the directory of the earlier run with the same hash).
    config_hash : str
        `config_hash` of its configuration.
    status : str
        ``"done"`` or ``"failed"``.
    wall_time : float
        Seconds of training of its run, over every segment (a failed task: of the attempt).
    run_dir : Path
        ``out / name``.
    error : str or None
        ``"ExceptionType: message"`` of a failed task.
    ran : bool
        False for a task that a resumed call found done, or that was copied, and did not run.
    copied_from : Path or None
        The run directory it was copied from (``reuse``; for a task a resumed
        call found done, as its index row records), else None.
    """

    name: str
    config_hash: str
    status: str
    wall_time: float
    run_dir: Path
    error: str | None
    ran: bool
    copied_from: Path | None = None


def config_hash(config: TrainConfig) -> str:
    """Return a short hash of the effective configuration of ``config``, ``out`` excluded.

    The effective configuration is what ``config.json`` holds (every agent
    hyperparameter after presets, the merged environment options), so two
    configurations that train the same thing have the same hash however they
    were written.

    Raises
    ------
    rl.runs.config.ConfigError
        If the agent or its parameters are invalid.
    """
    effective = effective_config(resolve_settings(config, build_problem=False))
    return hash_effective(effective)


def hash_effective(effective: Mapping[str, Any]) -> str:
    """Return the short hash of an effective configuration dict (its ``out`` is ignored)."""
    content = {key: value for key, value in effective.items() if key != "out"}
    text = json.dumps(to_jsonable(content), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:_HASH_LENGTH]


# ----------------------------------------------------------------------------- the index


class _Record:
    """The driver's table of tasks, written to ``OUT/index.csv`` after every change."""

    def __init__(self, out: Path, tasks: Sequence[Task], hashes: Sequence[str]) -> None:
        self.path = out / INDEX_FILE
        self.rows: list[dict[str, Any]] = [
            {
                "position": position,
                "name": task.name,
                "hash": digest,
                "values": dict(task.values),
                "status": "pending",
                "wall_time": "",
                "error": "",
                "copied_from": "",
            }
            for position, (task, digest) in enumerate(zip(tasks, hashes, strict=True))
        ]

    def update(self, position: int, **changes: Any) -> None:
        self.rows[position].update(changes)
        self.write()

    def write(self) -> None:
        keys: list[str] = []
        for row in self.rows:
            keys.extend(key for key in row["values"] if key not in keys)
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(
            ["position", "name", "hash", *keys, "status", "wall_time", "error", "copied_from"]
        )
        for row in self.rows:
            values = [_cell(row["values"][key]) if key in row["values"] else "" for key in keys]
            wall = row["wall_time"]
            writer.writerow(
                [
                    row["position"],
                    row["name"],
                    row["hash"],
                    *values,
                    row["status"],
                    f"{wall:.3f}" if wall != "" else "",
                    row["error"],
                    row["copied_from"],
                ]
            )
        atomic_write_text(self.path, buffer.getvalue())


def _cell(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(to_jsonable(value))


MAX_TABLE_BYTES = 32 * 2**20
"""Largest ``index.csv``, ``parts.csv`` or other table of an output directory that is read
(32 MiB: a 10,000-configuration sweep's index is a few MiB); a larger one is refused unread."""
MAX_TABLE_ROWS = 100_000
"""Most rows of such a table (ten times a sweep's `rl.sweep.MAX_CONFIGURATIONS`): the rows are
held as dicts, about 0.5 KB each, so this bounds the memory a table of short rows takes."""
INDEX_COLUMNS = ("hash", "status")
"""Columns every reader of ``index.csv`` relies on."""


def read_csv_rows(path: Path, what: str, columns: Sequence[str] = ()) -> list[dict[str, str]]:
    """Return the rows of the CSV file ``path`` as dicts of strings (empty if there is none).

    ``what`` names the file in errors; ``columns`` are the columns it must have.
    The file is opened without following a link (`rl.runs.rundir.open_run_file`),
    refused unread above `MAX_TABLE_BYTES`, and parsed as it streams in.

    Raises
    ------
    ExecutorError
        If the file is a link or not a regular file, larger than `MAX_TABLE_BYTES` or
        `MAX_TABLE_ROWS`, not UTF-8 text, not CSV, or lacks one of ``columns`` (one line
        naming it).
    """
    try:
        descriptor = open_run_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return []
    except RunDirError as error:  # a link or not a regular file
        raise ExecutorError(str(error)) from None
    except OSError as error:
        raise ExecutorError(f"Cannot read {path}: {error.strerror or error}.") from None
    with os.fdopen(descriptor, "rb") as raw:
        size = os.fstat(descriptor).st_size
        if size > MAX_TABLE_BYTES:
            raise ExecutorError(
                f"Cannot read {path}: it has {size} bytes, more than the {MAX_TABLE_BYTES} a "
                f"CSV {what} may have; it was not written by this project."
            )
        text = io.TextIOWrapper(io.BufferedReader(_Limited(raw, size)), "utf-8", newline="")
        reader = csv.DictReader(text)
        rows = []
        try:
            for row in reader:
                if len(rows) == MAX_TABLE_ROWS:
                    raise ExecutorError(
                        f"Cannot read {path}: it has more than the {MAX_TABLE_ROWS} rows a CSV "
                        f"{what} may have; it was not written by this project."
                    )
                rows.append(row)
        except UnicodeDecodeError as error:
            raise ExecutorError(
                f"Cannot read {path}: it is not UTF-8 text (byte {error.object[error.start]:#04x} "
                f"at offset {error.start}); it was not written by this project."
            ) from None
        except csv.Error as error:
            raise ExecutorError(f"Cannot read {path}: it is not a CSV {what} ({error}).") from None
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
    if rows and missing:
        raise ExecutorError(
            f"Cannot read {path}: it is not a CSV {what} (no column {missing[0]!r}); it was not "
            "written by this project."
        )
    return rows


class _Limited(io.RawIOBase):
    """A raw reader of at most ``limit`` bytes of ``handle``: a file that grows is not read on."""

    def __init__(self, handle: BinaryIO, limit: int) -> None:
        self._handle, self._left = handle, limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer)[: self._left]
        count = self._handle.readinto(view) or 0
        self._left -= count
        return count


def read_index(out: str | os.PathLike) -> list[dict[str, str]]:
    """Return the rows of ``OUT/index.csv`` as dicts of strings (empty if there is none).

    Raises
    ------
    ExecutorError
        If the file is not UTF-8 text, not CSV or lacks one of `INDEX_COLUMNS` (one line
        naming it, `read_csv_rows`).
    """
    return read_csv_rows(Path(out) / INDEX_FILE, "index", INDEX_COLUMNS)


def wall_seconds(value: str | None, path: Path) -> float:
    """Return a wall time that a table records, in seconds (an empty one is 0).

    Raises
    ------
    ExecutorError
        Naming ``path``, if it is not a finite number >= 0.
    """
    try:
        seconds = float(value or "0")
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise ExecutorError(
            f"Cannot read {path}: the wall time {value!r} is not a number of seconds; it was "
            "not written by this project."
        )
    return seconds


def finished(out: str | os.PathLike) -> dict[str, dict[str, str]]:
    """Return hash -> index row of the tasks recorded ``done`` in ``OUT`` (files not checked)."""
    return {row["hash"]: row for row in read_index(out) if row.get("status") == "done"}


# ----------------------------------------------------------------------------- the driver


def _write_run_files(run_dir: Path, files: Mapping[str, tuple[bytes, int]]) -> None:
    """Write a Ray task's run files into ``run_dir`` under its lock (replacing old run files)."""
    make_run_dir(run_dir)
    with RunLock.acquire(run_dir):
        for name in RUN_FILES:
            (run_dir / name).unlink(missing_ok=True)
        for name, (data, mode) in files.items():
            path = run_dir / name
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, data)
            path.chmod(mode)


# ----------------------------------------------------------------------------- the driver


def _check_tasks(tasks: Sequence[Task]) -> None:
    seen: set[str] = set()
    for task in tasks:
        if not isinstance(task, Task):
            raise ExecutorError(
                f"Expected rl.experiments.executor.Task objects. Got {type(task).__name__}."
            )
        path = Path(task.name)
        if not task.name or path.is_absolute() or ".." in path.parts or task.name in seen:
            raise ExecutorError(
                f"Task names must be unique relative directories. Got {task.name!r}."
            )
        seen.add(task.name)


def _not_finished(out: Path, name: str, task: Task) -> str | None:
    """Return why the run ``OUT/name`` recorded done for ``task`` is not finished, or None."""
    path = Path(name)
    if not name or path.is_absolute() or ".." in path.parts:
        return f"its row in {out / INDEX_FILE} names {name!r}, not a directory inside {out}"
    return verify_run(out / name, task.config)


def _progress_bar(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        unit="config",
        disable=not enabled or total == 0,
        dynamic_ncols=True,
        desc="configurations",
    )


def run_tasks(
    tasks: Sequence[Task],
    out: str | os.PathLike,
    *,
    backend: Backend = "local",
    workers: int | None = None,
    address: str | None = None,
    resume: bool = False,
    reuse: Sequence[str | os.PathLike] = (),
    on_start: Callable[[list[str], dict[str, str]], None] | None = None,
    on_done: Callable[[TaskResult], None] | None = None,
    progress: bool = False,
    plot: bool = True,
    tensorboard: str | os.PathLike | None = None,
    batches: Sequence[Sequence[int]] = (),
) -> list[TaskResult]:
    """Run independent training configurations; record each one as it finishes.

    Parameters
    ----------
    tasks : sequence of Task
        The configurations, with unique run-directory names.
    out : path-like
        Directory of the run directories and ``index.csv`` (created if needed).
    backend : {"local", "ray"}
        A local process pool or Ray tasks (see the module docstring).
    workers : int, optional
        Processes of the local pool, or CPUs of a local Ray instance
        (default: the CPUs available here). Ignored with ``address``.
    address : str, optional
        Address of a running Ray cluster (``backend="ray"`` only).
    resume : bool
        Skip the tasks whose configuration hash ``OUT/index.csv`` records as
        done and whose run files `rl.runs.verify.verify_run` finds complete;
        run the others afresh.
    reuse : sequence of path-like
        Output directories of earlier calls. A task not done in ``out`` whose
        configuration hash one of them records done, with complete run files,
        is copied from there (`rl.runs.copy_run.copy_run`) instead of trained:
        training is deterministic, so the copy is what training would write.
        Its row gets the original's ``wall_time`` and names the original in
        ``copied_from``, so that summing ``wall_time`` over the rows without it
        counts each training once. A directory without an
        index, or a run that cannot be copied (locked, damaged), is passed over.
    on_start : callable, optional
        Called in the driver once before any task runs, with the names of the
        tasks about to run and, for those recorded done whose files are
        missing or damaged, name -> the reason (one line).
    on_done : callable, optional
        Called in the driver with the `TaskResult` of every task that ran, once
        it is recorded.
    progress : bool
        Show a progress bar on stderr: configurations done and failed, time left.
    plot : bool
        Draw every run's ``learning_curve.png``.
    tensorboard : path-like, optional
        Also log every run that trains to TensorBoard, in
        ``tensorboard/{name}_{n}`` (`rl.runs.tensorboard`; on a Ray cluster the
        directory must be one that the workers share).
    batches : sequence of sequence of int
        Positions of tasks that train as one lockstep batch (see the module
        docstring); they must differ only in what `rl.runs.batch.training.batch_key`
        lets differ. Ignored with ``tensorboard``.

    Returns
    -------
    list of TaskResult
        One per task, in task order.

    Raises
    ------
    ExecutorError
        Before anything runs: bad arguments, Ray missing, ``out`` already used
        (without ``resume``) or in use by another driver.
    rl.runs.rundir.RunDirError
        Before anything runs, if a task's run directory, or one above it under
        ``out``, is a symbolic link.
    rl.runs.config.ConfigError
        If a task's agent or its parameters are invalid (from `config_hash`).
    """
    if backend not in ("local", "ray"):
        raise ExecutorError(f"The 'backend' parameter must be 'local' or 'ray'. Got {backend!r}.")
    if address and backend != "ray":
        raise ExecutorError("The 'address' parameter needs backend='ray'.")
    if backend == "ray":
        require_ray()
    workers_local = cpu_workers(workers)
    _check_tasks(tasks)
    out = Path(out)
    hashes = [config_hash(task.config) for task in tasks]
    if not resume:
        used = [t.name for t in tasks if has_run_files(out / t.name)]
        if (out / INDEX_FILE).exists() or used:
            what = INDEX_FILE if (out / INDEX_FILE).exists() else used[0]
            raise ExecutorError(
                f"{out} already holds {what}; continue it with --resume or choose another --out."
            )
    make_run_dir(out)
    with RunLock.acquire(out):
        for task in tasks:  # never train into, copy into or read a run through a link
            refuse_linked_path(out, task.name)
        return _drive(
            tasks,
            out,
            hashes,
            backend,
            workers_local,
            workers,
            address,
            resume,
            [Path(source) for source in reuse],
            on_start,
            on_done,
            progress,
            plot,
            None if tensorboard is None else str(tensorboard),
            [] if tensorboard is not None else [list(group) for group in batches],
        )


def _drive(
    tasks: Sequence[Task],
    out: Path,
    hashes: Sequence[str],
    backend: str,
    workers_local: int,
    workers: int | None,
    address: str | None,
    resume: bool,
    reuse: Sequence[Path],
    on_start: Callable[[list[str], dict[str, str]], None] | None,
    on_done: Callable[[TaskResult], None] | None,
    progress: bool,
    plot: bool,
    tensorboard: str | None,
    batches: Sequence[Sequence[int]],
) -> list[TaskResult]:
    done_before = finished(out) if resume else {}
    done_elsewhere = [(source, finished(source)) for source in reuse]
    record = _Record(out, tasks, hashes)
    results: list[TaskResult | None] = [None] * len(tasks)
    jobs = []
    reruns: dict[str, str] = {}
    for position, (task, digest) in enumerate(zip(tasks, hashes, strict=True)):
        old = done_before.get(digest)
        reason = None if old is None else _not_finished(out, old.get("name") or "", task)
        if reason is not None:
            reruns[task.name] = reason
        elif old is not None:
            wall = float(old.get("wall_time") or 0.0)
            source = old.get("copied_from") or ""
            record.rows[position].update(
                name=old["name"], status="done", wall_time=wall, copied_from=source
            )
            copied_from = Path(source) if source else None
            results[position] = TaskResult(
                old["name"], digest, "done", wall, out / old["name"], None, False, copied_from
            )
            continue
        run_dir = out / task.name
        if (run_dir / ERROR_FILE).is_file():  # from an earlier failed run of this task
            (run_dir / ERROR_FILE).unlink()
        copied = _copy_finished(done_elsewhere, task, digest, out)
        if copied is not None:
            record.rows[position].update(
                status="done", wall_time=copied.wall_time, copied_from=str(copied.copied_from)
            )
            results[position] = copied
            continue
        board = None if tensorboard is None else (tensorboard, task.name)
        config = dataclasses.replace(task.config, out=str(run_dir))
        jobs.append((position, config, str(run_dir), board))
    record.write()
    if on_start is not None:
        on_start([tasks[job[0]].name for job in jobs], reruns)
    if not jobs:
        return list(results)
    units = _units(jobs, batches)
    outcomes = (
        local_outcomes(units, workers_local, plot, resume)
        if backend == "local"
        else ray_outcomes(units, address, workers, plot, resume)
    )
    bar = _progress_bar(len(jobs), progress)
    failed = 0
    try:
        for position, outcome in outcomes:
            result = _finish(tasks[position], hashes[position], out, outcome)
            record.update(
                position, status=result.status, wall_time=result.wall_time, error=result.error or ""
            )
            results[position] = result
            failed += result.status == "failed"
            bar.set_postfix(done=bar.n + 1 - failed, failed=failed, refresh=False)
            bar.update(1)
            if on_done is not None:
                on_done(result)
    finally:
        bar.close()
        outcomes.close()
    return list(results)


def _units(jobs: Sequence[Job], batches: Sequence[Sequence[int]]) -> list[list[Job]]:
    """Group the jobs to run into units: the jobs of one batch together, every other alone."""
    group_of = {position: i for i, group in enumerate(batches) for position in group}
    units: list[list[Job]] = []
    where: dict[int, list[Job]] = {}
    for job in jobs:
        group = group_of.get(job[0])
        if group is None:
            units.append([job])
        elif group in where:
            where[group].append(job)
        else:
            where[group] = [job]
            units.append(where[group])
    return units


def _copy_finished(
    done_elsewhere: Sequence[tuple[Path, Mapping[str, Mapping[str, str]]]],
    task: Task,
    digest: str,
    out: Path,
) -> TaskResult | None:
    """Copy the first finished run of ``task``'s hash from the ``reuse`` directories, if any."""
    for source, done in done_elsewhere:
        row = done.get(digest)
        if row is None or _not_finished(source, row.get("name") or "", task) is not None:
            continue
        try:
            copy_run(source / row["name"], out / task.name)
        except (RunDirError, OSError):
            continue  # locked or damaged there: train it here
        wall = float(row.get("wall_time") or 0.0)
        return TaskResult(
            task.name, digest, "done", wall, out / task.name, None, False, source / row["name"]
        )
    return None


def _finish(task: Task, digest: str, out: Path, outcome: Outcome) -> TaskResult:
    """Write a collected task's files or a failed task's error file; return its result."""
    run_dir = out / task.name
    error = outcome.error
    if outcome.ok and outcome.files is not None:
        try:
            _write_run_files(run_dir, outcome.files)
        except (OSError, ValueError) as write_error:
            error = f"cannot write the run files: {one_line(write_error)}"
    if error is not None:
        details = {
            "error": error,
            "config": to_jsonable(dataclasses.replace(task.config, out=str(run_dir))),
            "values": to_jsonable(dict(task.values)),
        }
        text = json.dumps(details, indent=2) + "\n\n" + (outcome.details or "") + "\n"
        try:
            make_run_dir(run_dir)
            atomic_write_text(run_dir / ERROR_FILE, text)
        except (OSError, ValueError):
            pass  # the index row still records the error
        return TaskResult(task.name, digest, "failed", outcome.wall_time, run_dir, error, True)
    return TaskResult(task.name, digest, "done", outcome.wall_time, run_dir, None, True)


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Treat SIGTERM like Ctrl-C in the main thread, so the pool's processes stop with the driver.

    Used by the drivers of `rl.sweep` and `rl.reproduce` around `run_tasks`.
    """

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--workers``, ``--backend`` and ``--address``, where a command's tasks run."""
    parser.add_argument(
        "--workers",
        type=int,
        help="processes of the local pool, or CPUs of a local Ray instance (default: all)",
    )
    parser.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="where the tasks run: a local process pool or Ray (default %(default)s)",
    )
    parser.add_argument("--address", help="address of a running Ray cluster (with --backend ray)")
