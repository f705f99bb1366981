"""``python -m analysis.formats.page_tables``: the formats' tables of the documentation.

::

    python -m analysis.formats.page_tables [--data DIR] [--out DIR]

reads the ``formats.csv`` of each Q* the page "Is TEQL for my problem?"
tabulates (`ENVS`), committed as ``docs/data/formats/ENV.csv`` (``--data``), and
writes, in ``--out`` (default ``docs/results``), ``formats-ENV.csv`` as
`rl.experiments.page_tables` reads it (`format_rows`). Then
``python -m rl.experiments.results_page`` writes them into the page.

Exit codes: 0 done; 2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from analysis.formats.profile import FORMATS
from analysis.lowrank_suite.cli import read_csv
from analysis.lowrank_suite.page_tables import RESULTS, write_tables
from analysis.rank.cli import OneLineParser, UsageError, run_command
from tensorq.version import add_version_option

DATA = RESULTS.parent / "data" / "formats"
"""The committed format profiles that the page shows."""
ENVS = ("pendulum", "cartpole")
"""The Q-tensors whose profiles the page tabulates."""
LABELS = {"cp": "CP", "tucker": "Tucker", "tt": "TT"}
"""Each format's name in the table's header."""
EXACT = 1e-12
"""A fit whose relative Frobenius error is below this is shown as ``exact``."""


def format_rows(profile: Sequence[dict]) -> list[list[str]]:
    """Return a format profile (``formats.csv`` rows) as table rows, the header first.

    One row per rank; per format its parameter count, relative Frobenius error
    (three decimals) and sup-norm error (three significant digits), both
    ``exact`` for a fit within `EXACT` of the tensor.
    """
    fits = {(row["format"], int(row["rank"])): row for row in profile}
    header = ["rank"]
    for fmt in FORMATS:
        header += [f"{LABELS[fmt]} {column}" for column in ("params", "Frobenius", "sup")]
    table = [header]
    for rank in sorted({rank for _, rank in fits}):
        cells = [str(rank)]
        for fmt in FORMATS:
            fit = fits[fmt, rank]
            frobenius, sup = float(fit["rel_error"]), float(fit["sup_error"])
            errors = ["exact"] * 2 if frobenius < EXACT else [f"{frobenius:.3f}", f"{sup:#.3g}"]
            cells += [f"{int(fit['n_params']):,}", *errors]
        table.append(cells)
    return table


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m analysis.formats.page_tables``."""
    parser = OneLineParser(
        prog="python -m analysis.formats.page_tables",
        description="Write the format profiles' tables of the documentation from their CSVs.",
    )
    parser.add_argument("--data", type=Path, default=DATA, help="directory of ENV.csv profiles")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the tables")
    return add_version_option(parser)


def run(args: argparse.Namespace) -> list[str]:
    """Write the table of each profile of `ENVS` in ``args.data`` to ``args.out``."""
    written = {}
    for env in ENVS:
        profile = read_csv(args.data / f"{env}.csv")
        if not profile:
            raise UsageError(
                f"{args.data / env}.csv is missing or empty: copy the formats.csv of "
                f"python -m analysis.formats --env {env} there, or name its directory with --data."
            )
        written[f"formats-{env}"] = format_rows(profile)
    return write_tables(args.out, written)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (`analysis.rank.cli.run_command`)."""
    return run_command(build_parser(), argv, run)


if __name__ == "__main__":
    raise SystemExit(main())
