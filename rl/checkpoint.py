"""Checkpoints written atomically: a killed run never leaves a corrupt file.

A checkpoint is taken only at an episode boundary. Environments are reset at
the start of every episode with a seed derived from the replica's environment
seed and the episode index (see `rl.runner`), so they need no saved state: the
agent's ``state_dict()``, the episode index, the cumulative wall time and the
length of ``metrics.csv`` are enough to continue bitwise-identically.

Every write goes to a temporary file in the destination's directory, is
flushed to disk, and then replaces the destination with ``os.replace`` (atomic
on POSIX and Windows within one file system). If anything fails before the
rename, the previous file is left intact and the temporary file is removed.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHECKPOINT_FORMAT = 1
"""Version of the checkpoint layout; bumped when `Checkpoint` changes incompatibly."""


@dataclass(frozen=True)
class Checkpoint:
    """The state of a run at the end of a training episode.

    Attributes
    ----------
    episode : int
        Number of training episodes completed (the next one is ``episode + 1``).
    agent_state : dict
        What the agent's ``state_dict()`` returned.
    wall_time : float
        Seconds of training spent so far, summed over every resumed segment.
    metrics_bytes : int
        Byte length of ``metrics.csv`` after the rows of ``episode`` were written.
    config : dict
        The effective configuration of the run, to check that a resume matches.
    format : int
        `CHECKPOINT_FORMAT` at the time of writing.
    """

    episode: int
    agent_state: dict[str, Any]
    wall_time: float
    metrics_bytes: int
    config: dict[str, Any]
    format: int = CHECKPOINT_FORMAT


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file in the same directory, then rename).

    Parameters
    ----------
    path : path-like
        Destination; its directory must exist.
    data : bytes
        The whole new content.
    """
    path = Path(path)
    descriptor, temporary = tempfile.mkstemp(
        prefix=f".{path.name}.", suffix=".tmp", dir=path.parent
    )
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; see `atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"))


def save_checkpoint(path: str | os.PathLike, checkpoint: Checkpoint) -> None:
    """Pickle ``checkpoint`` to ``path`` atomically.

    Parameters
    ----------
    path : path-like
        Destination, conventionally ``RUN_DIR/checkpoint.pkl``.
    checkpoint : Checkpoint
        What to save.
    """
    payload = {
        "format": checkpoint.format,
        "episode": checkpoint.episode,
        "agent_state": checkpoint.agent_state,
        "wall_time": checkpoint.wall_time,
        "metrics_bytes": checkpoint.metrics_bytes,
        "config": checkpoint.config,
    }
    atomic_write_bytes(path, pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Read a checkpoint written by `save_checkpoint`.

    Only load checkpoints you wrote yourself: unpickling runs arbitrary code.

    Raises
    ------
    ValueError
        If the file is not a checkpoint of a known format.
    """
    with open(path, "rb") as handle:
        payload = pickle.load(handle)
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a checkpoint of format {CHECKPOINT_FORMAT}.")
    return Checkpoint(
        episode=int(payload["episode"]),
        agent_state=payload["agent_state"],
        wall_time=float(payload["wall_time"]),
        metrics_bytes=int(payload["metrics_bytes"]),
        config=payload["config"],
        format=payload["format"],
    )
