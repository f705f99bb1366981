"""``python -m analysis.formats``: CP, Tucker and tensor train on one Q-tensor.

::

    python -m analysis.formats --env ENV [--source qstar|run] [--run DIR] [--replica I]
        [--gamma G] [--planted-rank R] [--ranks 1,2,5,10,20] [--restarts 3]
        [--no-refine] [--samples 20] [--seed 0] [--out DIR]

``ENV`` is ``planted`` (the known-rank problem of `analysis.lowrank_suite`, Q*
of CP rank ``--planted-rank``, default 5, at its 4 state modes) or one of
`analysis.rank.cli.ENVS` (``cartpole`` and ``pendulum``: Q* from the
estimated model, as ``python -m analysis.rank`` builds it). ``--source run``
reads the Q of a finished run instead. Writes ``formats.csv`` (one row per
format and rank: `analysis.formats.profile.COLUMNS`) and ``formats.png`` in
``--out`` and prints the table.

Exit codes: 0 done; 2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from analysis.formats.profile import COLUMNS, format_profile, plot_format_profile
from analysis.rank.cli import ENVS, OneLineParser, UsageError, load_tensor, parse_ranks, run_command
from tensorq.version import add_version_option

DEFAULT_RANKS = "1,2,5,10,20"


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m analysis.formats``."""
    parser = OneLineParser(
        prog="python -m analysis.formats",
        description="Approximation error against parameters: CP, Tucker, tensor train.",
    )
    parser.add_argument("--env", required=True, help=f"planted or one of {', '.join(ENVS)}")
    parser.add_argument(
        "--source", choices=("qstar", "run"), default="qstar", help="Q* (default) or a run's Q"
    )
    parser.add_argument("--run", help="run directory (with --source run)")
    parser.add_argument("--replica", type=int, default=0, help="replica of the run (default 0)")
    parser.add_argument("--gamma", type=float, default=None, help="discount in (0, 1)")
    parser.add_argument("--planted-rank", type=int, default=5, help="CP rank of planted Q*")
    parser.add_argument("--ranks", default=DEFAULT_RANKS, help="comma list or FIRST:LAST")
    parser.add_argument("--restarts", type=int, default=3, help="seeded fits per rank")
    parser.add_argument("--no-refine", action="store_true", help="no CP sup-norm refinement")
    parser.add_argument("--samples", type=int, default=20, help="samples of estimated models")
    parser.add_argument("--seed", type=int, default=0, help="seed of sampling and fits")
    parser.add_argument("--out", default="formats-out", help="output directory")
    return add_version_option(parser)


def _tensor(args: argparse.Namespace) -> tuple[np.ndarray, str]:
    if args.env == "planted" and args.source == "qstar":
        from analysis.lowrank_suite.grid import RANK_AXIS_MODES, Instance

        if args.planted_rank < 1:
            raise UsageError(f"--planted-rank must be >= 1, got {args.planted_rank}.")
        if args.gamma is not None and not 0.0 < args.gamma < 1.0:
            raise UsageError(f"--gamma must lie in (0, 1), got {args.gamma}.")
        instance = Instance(args.planted_rank, RANK_AXIS_MODES, args.gamma or 0.9)
        return instance.make().q_star, f"planted Q* of CP rank {args.planted_rank}"
    if args.gamma is not None and not 0.0 < args.gamma < 1.0:
        raise UsageError(f"--gamma must lie in (0, 1), got {args.gamma}.")
    if args.env == "planted":  # a run on the planted problem
        from analysis.qstar import qtensor_from_run

        if not args.run:
            raise UsageError("--source run needs --run DIR.")
        try:
            qtensor = qtensor_from_run(args.run, replica=args.replica, env="planted")
        except (ValueError, KeyError, OSError) as error:
            raise UsageError(str(error).strip().splitlines()[0]) from None
    else:
        qtensor = load_tensor(args)
    tensor = qtensor.tensor
    if not isinstance(tensor, np.ndarray):
        raise UsageError("the Q-tensor is too large to build densely; choose a smaller one.")
    return tensor, qtensor.source


def run(args: argparse.Namespace) -> list[str]:
    """Profile the tensor ``args`` name; write the table and figure; return the table lines."""
    ranks = parse_ranks(args.ranks)
    if args.restarts < 1:
        raise UsageError(f"--restarts must be >= 1, got {args.restarts}.")
    tensor, source = _tensor(args)
    rows = format_profile(
        tensor, ranks, restarts=args.restarts, random_state=args.seed, refine=not args.no_refine
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from analysis.lowrank_suite.cli import write_csv

    write_csv(out / "formats.csv", rows, COLUMNS)
    plot_format_profile(rows, out / "formats.png", entries=tensor.size, title=source)
    lines = [
        f"{source}: shape {tensor.shape}, {tensor.size} entries",
        "format rank params rel_error sup_error",
    ]
    lines += [
        f"{r['format']:<7} {r['rank']:>4} {r['n_params']:>7} "
        f"{r['rel_error']:.3e} {r['sup_error']:.3e}"
        for r in rows
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (`analysis.rank.cli.run_command`)."""
    return run_command(build_parser(), argv, run)
