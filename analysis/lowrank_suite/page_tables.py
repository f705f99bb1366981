"""``python -m analysis.lowrank_suite.page_tables``: the suite's tables of the documentation.

::

    python -m analysis.lowrank_suite.page_tables [--data DIR] [--out DIR]

reads a finished suite's ``verdicts.csv``, ``rank_axis.csv`` and
``modes_axis.csv`` in ``--data`` (default: the committed
``docs/data/lowrank-suite/full``) and writes, in ``--out`` (default
``docs/results``), the tables of the page "Is TEQL for my problem?" as
`rl.experiments.page_tables` reads them: ``lowrank-verdict-counts.csv`` (the
verdicts per agent reading and discount,
`analysis.lowrank_suite.report.verdict_count_rows`) and
``lowrank-rank-axis.csv`` and ``lowrank-modes-axis.csv`` (every cell of each
figure, `analysis.lowrank_suite.report.verdict_cell_rows`). Then
``python -m rl.experiments.results_page`` writes them into the page.

Exit codes: 0 done; 2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import csv
import io
from collections.abc import Mapping, Sequence
from pathlib import Path

from analysis.lowrank_suite.cli import read_csv
from analysis.lowrank_suite.report import verdict_cell_rows, verdict_count_rows
from analysis.rank.cli import OneLineParser, UsageError, run_command
from rl.experiments.results_page import DOCS
from rl.runs.rundir import atomic_write_text
from tensorq.version import add_version_option

DATA = DOCS / "data" / "lowrank-suite" / "full"
"""The committed whole suite that the page shows."""
RESULTS = DOCS / "results"
"""Where the pages' table CSVs live (`rl.experiments.page_tables`)."""
AXES = {
    "lowrank-rank-axis": ("rank_axis", "qstar_rank"),
    "lowrank-modes-axis": ("modes_axis", "state_modes"),
}
"""Page table -> (the suite's figure table, its axis)."""


def write_tables(out: Path, tables: Mapping[str, Sequence[Sequence[str]]]) -> list[str]:
    """Write each table (name -> rows, the header first) as ``out/NAME.csv``; say what was written.

    A link at a table's path is refused (`rl.runs.rundir.atomic_write_text`).
    """
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in tables.items():
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(rows)
        atomic_write_text(out / f"{name}.csv", buffer.getvalue())
    return [f"wrote {out / name}.csv" for name in tables]


def _rows(data: Path, name: str) -> list[dict]:
    rows = read_csv(data / f"{name}.csv")
    if not rows:
        raise UsageError(
            f"{data / name}.csv is missing or empty: name a finished suite with --data "
            "(python -m analysis.lowrank_suite --out DIR writes one)."
        )
    return rows


def tables(data: Path) -> dict[str, list[list[str]]]:
    """Return the page's tables (name -> rows, the header first) from the suite in ``data``."""
    out = {"lowrank-verdict-counts": verdict_count_rows(_rows(data, "verdicts"))}
    for name, (figure, axis) in AXES.items():
        out[name] = verdict_cell_rows(_rows(data, figure), axis)
    return out


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m analysis.lowrank_suite.page_tables``."""
    parser = OneLineParser(
        prog="python -m analysis.lowrank_suite.page_tables",
        description="Write the low-rank suite's tables of the documentation from its CSVs.",
    )
    parser.add_argument("--data", type=Path, default=DATA, help="a finished suite's --out")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the tables")
    return add_version_option(parser)


def run(args: argparse.Namespace) -> list[str]:
    """Write the tables of the suite ``args.data`` in ``args.out``; return what was written."""
    return write_tables(args.out, tables(args.data))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (`analysis.rank.cli.run_command`)."""
    return run_command(build_parser(), argv, run)


if __name__ == "__main__":
    raise SystemExit(main())
