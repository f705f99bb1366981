"""Copy a finished run directory, so that a configuration trained once serves twice.

`rl.experiments.executor.run_tasks` (``reuse=``) copies a run recorded done
elsewhere with the same configuration hash instead of training it again:
training is deterministic, so the copy holds exactly what training would have
written, but for the ``wall_time`` column of ``metrics.csv`` and the
checkpoint, which say how long the original took.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rl.runs.documents import DocumentError, parse_json
from rl.runs.rundir import (
    RunDirError,
    RunLock,
    atomic_copy,
    atomic_write_text,
    check_run_files,
    make_run_dir,
    read_run_file,
)
from rl.runs.training import CONFIG_FILE, RUN_FILES, config_text

MAX_CONFIG_BYTES = 1 << 20
"""Largest ``config.json`` copied (a run's is a few kilobytes)."""


def copy_run(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Copy the run files of ``source`` into ``target``, whose ``config.json`` then names it.

    Both directories are locked while copying, ``source`` shared (a run
    being written is refused; other copies may read it meanwhile), every
    run file of ``source`` must be a regular file (never read through a
    link), and ``target``'s old run files are replaced. Each file is
    written atomically; ``config.json`` is copied with its ``out`` set to
    ``target``, as training writes it.

    Raises
    ------
    rl.runs.rundir.RunDirError
        If a directory is locked by another process, or a run file is a link
        or not a regular file, or ``config.json`` is not a JSON object.
    OSError
        If a file cannot be read or written.
    """
    source, target = Path(source), Path(target)
    make_run_dir(target)
    with RunLock.acquire(source, shared=True), RunLock.acquire(target):
        check_run_files(source, RUN_FILES)
        check_run_files(target, RUN_FILES)
        config = _config_naming(source / CONFIG_FILE, target)
        for name in RUN_FILES:
            (target / name).unlink(missing_ok=True)
        for name in RUN_FILES:
            if name == CONFIG_FILE:
                atomic_write_text(target / name, config)
            elif (source / name).is_file():
                atomic_copy(source / name, target / name)


def _config_naming(path: Path, target: Path) -> str:
    """Return the text of the ``config.json`` at ``path`` with ``out`` set to ``target``."""
    try:
        config = parse_json(read_run_file(path, MAX_CONFIG_BYTES).decode("utf-8"), str(path))
    except (UnicodeDecodeError, json.JSONDecodeError, DocumentError) as error:
        raise RunDirError(f"Refusing {path}: it is not a configuration ({error}).") from None
    if not isinstance(config, dict):
        raise RunDirError(f"Refusing {path}: it is not a JSON object.")
    config["out"] = str(target)
    return config_text(config)
