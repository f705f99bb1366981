"""Measurement tables of the documentation pages, generated from committed CSV files.

A page marks each generated table with two comment lines::

    <!-- table: readings-cartpole -->
    <!-- end table -->

and `fill_tables` writes between them the Markdown table of
``docs/results/readings-cartpole.csv``: its first row is the header, every
other row a table row, each cell Markdown text as the page shows it. A column
is right-aligned when every non-empty cell of it starts with a number. A cell
may name a number of the results page's tables instead of repeating it, so that
a number two pages show comes from one row: ``{lines.csv
PART/ENV/LINE/READING}`` (for example ``{lines.csv
comparison/cartpole/teql/stable}``) becomes that line's ``mean ± std`` in
``docs/results/lines.csv``, and ``{rank.csv ENV/COLUMN}`` (for example
``{rank.csv cartpole/energy}``) that environment's value in
``docs/results/rank.csv``. The prose around the
markers stays hand-written; ``python -m rl.experiments.results_page`` fills
every page (`rl.experiments.results_page`).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from rl.experiments.results_tables import Tables

START = re.compile(r"^<!-- table: ([a-z0-9][a-z0-9-]*) -->$")
"""The comment line that opens a generated table, with the table's name."""

END = "<!-- end table -->"
"""The comment line that closes a generated table."""

_REFERENCE = re.compile(r"\{(lines|rank)\.csv ([\w-]+(?:/[\w-]+)+)\}")
_NUMBER = re.compile(r"^\**[-+−]?\d")
_PIPE = re.compile(r"(?<!\\)\|")


def read_table(path: Path) -> list[list[str]]:
    """Return the rows of the table CSV ``path``, the header first, checked to be rectangular."""
    if not path.is_file():
        raise ValueError(
            f"{path} is missing: name a table of {path.parent} in the marker, or restore the "
            "file (git checkout)."
        )
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    if len(rows) < 2:
        raise ValueError(f"{path} needs a header row and at least one row.")
    width = len(rows[0])
    for number, row in enumerate(rows, start=1):
        if len(row) != width:
            raise ValueError(f"{path}: row {number} has {len(row)} cells, the header {width}.")
        if any(_PIPE.search(cell) or "\n" in cell for cell in row):
            raise ValueError(
                f"{path}: row {number} has a line break or an unescaped '|' in a cell: "
                "write '|' as '\\|' and keep each cell on one line."
            )
    return rows


def _resolve(cell: str, tables: Tables, path: Path) -> str:
    def number(match: re.Match[str]) -> str:
        name, key = match.group(1), tuple(match.group(2).split("/"))
        if name == "lines" and len(key) == 4:
            found = tables.lines.get((key[:3], key[3]))
            if found is not None:
                return found.shown
        if name == "rank" and len(key) == 2:
            row = next((row for row in tables.rank if row["env"] == key[0]), {})
            if key[1] in row:
                return row[key[1]]
        raise ValueError(f"{path}: {match.group(0)} names no value of {name}.csv.")

    return _REFERENCE.sub(number, cell)


def render_table(path: Path, tables: Tables) -> list[str]:
    """Return the Markdown lines of the table CSV ``path``, its references to ``tables`` filled."""
    header, *body = read_table(path)
    body = [[_resolve(cell, tables, path) for cell in row] for row in body]
    align = [
        "---:"
        if any(row[column] for row in body)
        and all(_NUMBER.match(row[column]) for row in body if row[column])
        else "---"
        for column in range(len(header))
    ]
    return ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"] + [
        "| " + " | ".join(row) + " |" for row in body
    ]


def fill_tables(text: str, data: Path, tables: Tables) -> str:
    """Return the page ``text`` with every marked table rewritten from its CSV in ``data``."""
    out: list[str] = []
    name = ""
    for number, line in enumerate(text.splitlines(), start=1):
        opened = START.match(line)
        if name:
            if line == END:
                out += ["", *render_table(data / f"{name}.csv", tables), "", END]
                name = ""
            elif opened:
                raise ValueError(
                    f"line {number}: table {opened.group(1)} opens before table {name} is "
                    f"closed: add {END} after {name}'s table."
                )
            continue
        out.append(line)
        if opened:
            name = opened.group(1)
        elif line == END:
            raise ValueError(
                f"line {number}: {END} closes no table: remove it or open its table first."
            )
    if name:
        raise ValueError(f"table {name} has no {END} line: add one after its table.")
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def table_names(text: str) -> list[str]:
    """Return the names of the tables ``text`` marks, in order."""
    return [m.group(1) for m in map(START.match, text.splitlines()) if m]
