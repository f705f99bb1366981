"""Whether a run directory recorded as finished really holds a finished run.

The index of a sweep or a reproduction (``index.csv``, see `rl.experiments.executor`)
says which configurations are done, but the run files may since have been
deleted, cut short or damaged. `verify_run` checks the files themselves, so
that ``--resume`` of ``rl.sweep`` and ``rl.reproduce`` reruns what is missing
or damaged instead of reporting it done.
"""

from __future__ import annotations

import os
from pathlib import Path

from rl.runs.config import TrainConfig
from rl.runs.checkpoint import CheckpointError, check_checkpoint_against_metrics, load_checkpoint
from rl.runs.metrics import read_metrics
from rl.runs.training import CHECKPOINT_FILE, METRICS_FILE


def verify_run(run_dir: str | os.PathLike, config: TrainConfig) -> str | None:
    """Return why ``run_dir`` does not hold a finished run of ``config``, or None if it does.

    A finished run has a checkpoint that `rl.runs.checkpoint.load_checkpoint`
    accepts, whose episode reaches ``config.episodes``, and a ``metrics.csv``
    that holds the rows the checkpoint recorded
    (`rl.runs.checkpoint.check_checkpoint_against_metrics`) and reads back
    (`rl.runs.metrics.read_metrics`) with one row per seed and episode:
    ``config.seeds`` times the checkpoint's episode.

    Parameters
    ----------
    run_dir : path-like
        The run directory.
    config : TrainConfig
        The configuration it should hold (``episodes`` and ``seeds`` are read).

    Returns
    -------
    str or None
        One sentence naming the file and what is wrong with it; None for a finished run.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return f"The run directory {run_dir} does not exist."
    try:
        checkpoint = load_checkpoint(run_dir / CHECKPOINT_FILE)
    except CheckpointError as error:
        return str(error)
    if checkpoint.episode < config.episodes:
        return (
            f"The checkpoint {run_dir / CHECKPOINT_FILE} is of episode {checkpoint.episode}, "
            f"before the {config.episodes} configured."
        )
    metrics = run_dir / METRICS_FILE
    if not metrics.is_file():
        return f"{metrics} does not exist."
    try:  # the rows the checkpoint recorded are still there, whole
        check_checkpoint_against_metrics(checkpoint, metrics, config.seeds)
    except CheckpointError as error:
        return str(error)
    try:
        rows = len(read_metrics(metrics)["episode"])
    except OSError as error:
        return f"{metrics} cannot be read: {error.strerror or error}."
    except ValueError as error:
        return " ".join(str(error).split())
    expected = config.seeds * checkpoint.episode
    if rows != expected:
        return (
            f"{metrics} has {rows} rows, not the {expected} of {config.seeds} seeds "
            f"times {checkpoint.episode} episodes."
        )
    return None
