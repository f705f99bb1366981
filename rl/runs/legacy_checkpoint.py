"""Converting format-1 checkpoints (``checkpoint.pkl``) of one's own runs to the current format.

``python -m rl.runs.legacy_checkpoint convert RUN_DIR`` unpickles the old file,
which runs any code it holds, so it converts only what the user asks for; the
rest of the package never unpickles anything (`rl.runs.checkpoint`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rl.runs.checkpoint import (
    CHECKPOINT_NAME,
    LEGACY_CHECKPOINT_NAME,
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    refuse,
    save_checkpoint,
)
from rl.runs.rundir import RunDirError, RunLock, check_run_files
from tensorq.version import add_version_option


def convert_legacy(run_dir: str | os.PathLike) -> Path:
    """Convert ``RUN_DIR/checkpoint.pkl`` (format 1) to ``RUN_DIR/checkpoint.npz`` once.

    **This unpickles the old file, which runs any code it holds**: convert only
    run directories you wrote yourself. The new file is written atomically and
    read back before the pickle is removed.

    Parameters
    ----------
    run_dir : path-like
        A run directory holding ``checkpoint.pkl``.

    Returns
    -------
    Path
        The new checkpoint file.

    Raises
    ------
    CheckpointError
        If there is nothing to convert, the pickle is not a format-1 checkpoint,
        or either file is a symbolic link (never read or written through).
    """
    import pickle

    run_dir = Path(run_dir)
    legacy, target = run_dir / LEGACY_CHECKPOINT_NAME, run_dir / CHECKPOINT_NAME
    try:
        check_run_files(run_dir, (LEGACY_CHECKPOINT_NAME, CHECKPOINT_NAME))
    except RunDirError as error:
        raise CheckpointError(str(error)) from None
    if not legacy.is_file():
        raise CheckpointError(f"Nothing to convert: {legacy} does not exist.")
    if os.path.lexists(target):
        raise CheckpointError(f"Not converting: {target} already exists.")
    try:
        with open(legacy, "rb") as handle:
            payload = pickle.load(handle)  # noqa: S301 - the user asked for it, see the docstring
        checkpoint = Checkpoint(
            episode=int(payload["episode"]),
            agent_state=payload["agent_state"],
            wall_time=float(payload["wall_time"]),
            metrics_bytes=int(payload["metrics_bytes"]),
            config=payload["config"],
        )
        if payload.get("format") != 1:
            raise ValueError(f"format {payload.get('format')!r}, expected 1")
    except Exception as error:  # noqa: BLE001 - anything wrong with the old file is one refusal
        raise refuse(legacy, f"it is not a format-1 checkpoint ({error}).") from None
    save_checkpoint(target, checkpoint)
    load_checkpoint(target)
    legacy.unlink()
    return target


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m rl.runs.legacy_checkpoint``."""
    parser = argparse.ArgumentParser(
        prog="python -m rl.runs.legacy_checkpoint",
        description="Convert old pickled checkpoints (checkpoint.pkl) of your own runs to "
        "checkpoint.npz. This UNPICKLES the old file, which runs any code it holds: only "
        "convert run directories you wrote yourself.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    convert = commands.add_parser("convert", help="convert RUN_DIR/checkpoint.pkl (unpickles it)")
    convert.add_argument(
        "run_dirs", nargs="+", metavar="RUN_DIR", help="run directories to convert, in turn"
    )
    return add_version_option(parser)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rl.runs.legacy_checkpoint convert RUN_DIR ...``; returns the exit code."""
    args = build_parser().parse_args(argv)

    status = 0
    for run_dir in map(Path, args.run_dirs):
        if not (run_dir / LEGACY_CHECKPOINT_NAME).is_file():
            print(
                f"error: {run_dir / LEGACY_CHECKPOINT_NAME} does not exist; nothing to convert.",
                file=sys.stderr,
            )
            status = 2
            continue
        print(
            f"Unpickling {run_dir / LEGACY_CHECKPOINT_NAME} (this runs any code it holds; "
            "only convert runs you wrote yourself).",
            file=sys.stderr,
        )
        try:
            with RunLock.acquire(run_dir):
                target = convert_legacy(run_dir)
        except (CheckpointError, RunDirError) as error:
            print(f"error: {error}", file=sys.stderr)
            status = 2
            continue
        print(f"Converted {run_dir / LEGACY_CHECKPOINT_NAME} -> {target}")
    return status


if __name__ == "__main__":
    sys.exit(main())
