"""``OUT/commands.txt``: the training invocations of an output directory, one line each.

Each line is ``WALL_SECONDS<TAB>COMMAND``. ``python -m rl.reproduce NAME`` and
``python -m rl.reproduce paper`` append one after training (`append_command`);
their reports show them (`read_commands`). The file is opened without following
a symbolic link (`rl.runs.rundir.open_run_file`) both ways, and read up to
`MAX_HISTORY_BYTES`: what it holds is shown, never run.
"""

from __future__ import annotations

import os
from pathlib import Path

from rl.runs.rundir import open_run_file, read_run_text

HISTORY_FILE = "commands.txt"
"""The training invocations of an output directory: one line each, ``WALL_SECONDS<TAB>COMMAND``."""
MAX_HISTORY_BYTES = 1 << 20
"""Largest ``commands.txt`` read: about 5,000 invocations."""


def append_command(out: Path, wall: float, command: str) -> None:
    """Append ``WALL<TAB>COMMAND`` to ``OUT/commands.txt``, never through a link.

    Raises
    ------
    rl.runs.rundir.RunDirError
        If the file is a symbolic link or not a regular file.
    OSError
        If it cannot be written.
    """
    descriptor = open_run_file(out / HISTORY_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    with os.fdopen(descriptor, "a", encoding="utf-8") as handle:
        handle.write(f"{wall:.0f}\t{command}\n")


def read_commands(out: Path) -> list[tuple[str, str]]:
    """Return (wall seconds, command) of each line of ``OUT/commands.txt`` (empty if none).

    Bytes that are not UTF-8 are shown as U+FFFD; a line without a tab, or whose
    wall time is not a whole number of seconds, is left out.

    Raises
    ------
    rl.runs.rundir.RunDirError
        If the file is a link, not a regular file, or larger than `MAX_HISTORY_BYTES`.
    OSError
        If it cannot be read.
    """
    try:
        text = read_run_text(out / HISTORY_FILE, MAX_HISTORY_BYTES)
    except FileNotFoundError:
        return []
    pairs = (line.split("\t", 1) for line in text.splitlines() if "\t" in line)
    return [(wall, command) for wall, command in pairs if wall.isdecimal()]
