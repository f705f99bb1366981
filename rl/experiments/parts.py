"""The whole-paper run's parts: what one is (`Part`), which may start next, ``OUT/parts.csv``.

`rl.experiments.whole` runs the parts, writes the table (one row per part, its
last status) after every part (atomically) and reads it to skip the parts done;
`rl.experiments.paper_report` reads it for the cost of each part, and
`rl.experiments.paper_plan` plays the same schedule without running anything.
The run's settings, ``OUT/paper.json``, are read with `read_manifest` by
`rl.experiments.whole` (to resume and to plan what is left) and
`rl.experiments.paper_report`.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rl.experiments.executor import INDEX_FILE, ExecutorError, read_csv_rows, read_index
from rl.problems.bundled import HIGHWAY_ENGINES
from rl.runs.documents import parse_json
from rl.runs.rundir import atomic_write_text, read_run_file

PARTS_FILE = "parts.csv"
PART_COLUMNS = ("part", "status", "wall_s", "code", "command")
PART_STATUSES = ("done", "failed", "interrupted")
PART_NAME = re.compile(r"[a-z]+/[a-z0-9-]+")
"""A part's directory under ``OUT``: ``READING/NAME-ENV`` or ``analysis/NAME``."""

MANIFEST = "paper.json"
"""The run's settings (`rl.experiments.whole.Settings`), written when it starts."""
#: The settings every reader of `MANIFEST` needs, with their JSON types (``highway_engine``,
#: absent from older runs, defaults to the twin).
MANIFEST_KEYS = {"scale": (int, float), "seeds": int, "deep_seeds": int, "readings": list}
MAX_MANIFEST_BYTES = 1 << 16
"""Largest ``paper.json`` read (it holds five settings)."""
READINGS = ("paper", "released", "stable")
"""The readings a whole-paper run may train (`rl.agents.readings`)."""


class Part(NamedTuple):
    """One resumable piece of the paper: a directory under ``OUT`` and the command that fills it."""

    name: str
    """Directory relative to ``OUT`` (``released/comparison-cartpole``, ``analysis/params``)."""
    argv: tuple[str, ...]
    """For a training part the arguments of ``python -m rl.reproduce``; otherwise a command."""
    training: bool
    cost: float = 0.0
    """Estimated core seconds of what it trains itself: the order side by side."""
    after: tuple[str, ...] = ()
    """Parts whose lines it copies (``--reuse``): it starts once they have ended."""
    reuse: tuple[str, ...] = ()
    """Directories of the parts it shares a configuration with: its ``--reuse`` values."""
    trains: tuple[tuple[str, float], ...] = ()
    """The tasks it trains itself, (configuration hash, estimated core seconds), in plan order."""
    copies: int = 0
    """How many of its tasks it copies from the parts of `Part.after`."""
    rows: int = 0
    """Rows of each of its lines' ``metrics.csv`` at most (seeds times episodes): what its
    summary and the report read (`rl.experiments.costs.postprocess_seconds`)."""


def start_order(todo: Sequence[Part], at_once: int) -> list[Part]:
    """Return ``todo`` in the order parts are taken: as listed, or longest first side by side.

    Side by side (``at_once`` > 1) the order is by `Part.cost`, largest first,
    so that the longest parts start at once.
    """
    if at_once > 1:
        return sorted(todo, key=lambda part: -part.cost)
    return list(todo)


def next_ready(waiting: list[Part], running: Collection[str]) -> Part | None:
    """Remove and return the first waiting part none of whose `Part.after` waits or runs.

    ``running`` names the parts that run.
    """
    busy = {part.name for part in waiting} | set(running)
    for index, part in enumerate(waiting):
        if busy.isdisjoint(part.after):
            return waiting.pop(index)
    return None


def output_file(part: Part) -> str:
    """Return the file an analysis part's output is kept in: ``params.md`` or ``summary.txt``."""
    return "params.md" if part.name == "analysis/params" else "summary.txt"


def not_done(out: Path, part: Part) -> str | None:
    """Return why a part ``parts.csv`` records done must run again, or None if it need not.

    It must when its directory is missing, or the file an analysis part
    writes (`output_file`), or a training part's ``index.csv``, or one of the
    run directories that index names, or when a row of that index is not done.
    What a run directory holds is checked by the part's own ``--resume``
    (`rl.runs.verify`).

    Raises
    ------
    rl.experiments.executor.ExecutorError
        If the part's ``index.csv`` is damaged (one line naming it).
    """
    directory = out / part.name
    if not directory.is_dir():
        return f"{directory} is missing"
    if not part.training:
        path = directory / output_file(part)
        return None if path.is_file() else f"{path} is missing"
    if not (directory / INDEX_FILE).is_file():
        return f"{directory / INDEX_FILE} is missing"
    for row in read_index(directory):
        name = row.get("name") or ""
        if row.get("status") != "done":
            return f"its configuration {name} is {row.get('status') or 'not recorded'}"
        if not name or not (directory / name).is_dir():
            return f"{directory / name} is missing"
    return None


def read_parts(out: Path) -> dict[str, dict[str, str]]:
    """Return ``OUT/parts.csv`` as part -> row (empty if there is none).

    Raises
    ------
    rl.experiments.executor.ExecutorError
        If the file is damaged (one line naming it, `rl.experiments.executor.read_csv_rows`),
        or a row's part is not a directory name of `PART_NAME` or its status not one of
        `PART_STATUSES`.
    """
    path = out / PARTS_FILE
    rows = read_csv_rows(path, "table of parts", PART_COLUMNS)
    for row in rows:
        if not PART_NAME.fullmatch(row["part"] or "") or row["status"] not in PART_STATUSES:
            raise ExecutorError(
                f"Cannot read {path}: the row of part {row['part']!r} (status "
                f"{row['status']!r}) names no part of a run; it was not written by this project."
            )
    return {row["part"]: row for row in rows}


def write_parts(out: Path, rows: dict[str, dict[str, str]]) -> None:
    """Write ``rows`` (part -> row of `PART_COLUMNS`) as ``OUT/parts.csv``, atomically."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, PART_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows.values())
    atomic_write_text(out / PARTS_FILE, buffer.getvalue())


def read_manifest(out: Path) -> dict[str, Any]:
    """Return the settings ``OUT/paper.json`` records.

    Raises
    ------
    ValueError
        In one line naming the file, if it is a link or not a regular file, or
        not a JSON object holding each of `MANIFEST_KEYS` with its type and a
        value a run can have: a scale in (0, 1], seed counts >= 1, distinct
        readings of `READINGS`, a Highway engine of
        `rl.problems.bundled.HIGHWAY_ENGINES`.
    """
    path = out / MANIFEST
    try:
        data = read_run_file(path, MAX_MANIFEST_BYTES)
        recorded = parse_json(data.decode("utf-8"), str(path))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is damaged: not JSON ({error}).") from None
    if not isinstance(recorded, dict):
        raise ValueError(f"{path} is damaged: not a JSON object.")
    for key, kind in MANIFEST_KEYS.items():
        value = recorded.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"{path} is damaged: no valid {key!r} setting.")
    readings = recorded["readings"]
    valid = {
        "scale": 0.0 < recorded["scale"] <= 1.0,
        "seeds": recorded["seeds"] >= 1,
        "deep_seeds": recorded["deep_seeds"] >= 1,
        "readings": bool(readings)
        and all(isinstance(r, str) and r in READINGS for r in readings)
        and len(set(readings)) == len(readings),
        "highway_engine": recorded.get("highway_engine", "twin") in HIGHWAY_ENGINES,
    }
    for key, ok in valid.items():
        if not ok:
            raise ValueError(
                f"{path} is damaged: {key!r} is {recorded.get(key)!r}, not a value a run has."
            )
    return recorded
