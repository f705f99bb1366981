"""The whole-paper run's table of parts, ``OUT/parts.csv``: one row per part, last status.

`rl.experiments.whole` writes it after every part (atomically) and reads it to skip
the parts done; `rl.experiments.paper_report` reads it for the cost of each part.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from rl.experiments.executor import read_csv_rows
from rl.runs.rundir import atomic_write_text

PARTS_FILE = "parts.csv"
PART_COLUMNS = ("part", "status", "wall_s", "code", "command")


def read_parts(out: Path) -> dict[str, dict[str, str]]:
    """Return ``OUT/parts.csv`` as part -> row (empty if there is none).

    Raises
    ------
    rl.experiments.executor.ExecutorError
        If the file is damaged (one line naming it, `rl.experiments.executor.read_csv_rows`).
    """
    rows = read_csv_rows(out / PARTS_FILE, "table of parts", PART_COLUMNS)
    return {row["part"]: row for row in rows}


def write_parts(out: Path, rows: dict[str, dict[str, str]]) -> None:
    """Write ``rows`` (part -> row of `PART_COLUMNS`) as ``OUT/parts.csv``, atomically."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, PART_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows.values())
    atomic_write_text(out / PARTS_FILE, buffer.getvalue())
