"""``python -m rl.runs.plot RUN_DIR [RUN_DIR ...] --out FILE``: learning curves of runs.

Two panels: the training return of every episode and the greedy return of
every evaluation, each as the mean across seeds with a band of ``band``
standard deviations, after a moving average over ``smooth`` points (default:
about 1/50 of the curve). One line per run directory.

The paper's figures additionally replace outliers and apply two moving
averages (see ``docs/training.md``); this command draws the plain curves.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from rl.runs.documents import parse_json
from rl.runs.metrics import pivot, read_metrics
from rl.runs.rundir import atomic_write_bytes
from tensorq.version import add_version_option


def moving_average(values: NDArray, window: int) -> NDArray:
    """Trailing moving average along the last axis; the first points average what exists."""
    if window <= 1 or values.shape[-1] == 0:
        return values
    cumulative = np.cumsum(np.insert(values, 0, 0.0, axis=-1), axis=-1)
    ends = np.arange(1, values.shape[-1] + 1)
    starts = np.maximum(ends - window, 0)
    return (cumulative[..., ends] - cumulative[..., starts]) / (ends - starts)


def seed_band(
    table: dict[str, NDArray], column: str, smooth: int | None = None
) -> tuple[NDArray, NDArray, NDArray]:
    """Episodes, mean and standard deviation across seeds of one column.

    Episodes where no seed has a value (greedy returns between evaluations)
    are dropped; each seed's curve is smoothed before the statistics.

    Returns
    -------
    episodes, mean, std : ndarray, shape (E,)
    """
    episodes, values = pivot(table, column)
    keep = ~np.all(np.isnan(values), axis=0)
    episodes, values = episodes[keep], values[:, keep]
    window = max(1, values.shape[1] // 50) if smooth is None else smooth
    values = moving_average(values, window)
    std = np.nanstd(values, axis=0) if values.shape[0] > 1 else np.zeros(values.shape[1])
    return episodes, np.nanmean(values, axis=0), std


def _label(run_dir: Path) -> str:
    try:
        config = parse_json((run_dir / "config.json").read_text(encoding="utf-8"))
        return f"{run_dir.name} ({config['agent']}, {config['seeds']} seeds)"
    except (OSError, ValueError, KeyError, TypeError):  # not our config.json: the name alone
        return run_dir.name


def plot_runs(
    run_dirs: Sequence[str | Path],
    out: str | Path,
    *,
    smooth: int | None = None,
    band: float = 1.0,
    labels: Sequence[str] | None = None,
) -> Path:
    """Draw the learning curves of one or more runs into an image file.

    Parameters
    ----------
    run_dirs : sequence of path-like
        Run directories holding ``metrics.csv``.
    out : path-like
        Image file (the suffix picks the format: .png, .pdf, .svg).
    smooth : int, optional
        Moving-average window in points; default about 1/50 of each curve.
    band : float
        Half-width of the shaded band in standard deviations across seeds.
    labels : sequence of str, optional
        Legend entries; default the directory names with agent and seed count.

    Returns
    -------
    pathlib.Path
        ``out``.
    """
    from matplotlib.figure import Figure  # no pyplot: no global state, Agg canvas

    run_dirs = [Path(d) for d in run_dirs]
    labels = list(labels) if labels is not None else [_label(d) for d in run_dirs]
    figure = Figure(figsize=(11, 4), layout="constrained")
    axes = figure.subplots(1, 2)
    panels = (("return", "training return"), ("greedy_return", "greedy return"))
    for run_dir, label in zip(run_dirs, labels, strict=True):
        table = read_metrics(run_dir / "metrics.csv")
        for axis, (column, _) in zip(axes, panels, strict=True):
            episodes, mean, std = seed_band(table, column, smooth)
            if episodes.size == 0:
                continue
            (line,) = axis.plot(episodes, mean, label=label)
            axis.fill_between(
                episodes,
                mean - band * std,
                mean + band * std,
                color=line.get_color(),
                alpha=0.2,
                linewidth=0,
            )
    for axis, (_, title) in zip(axes, panels, strict=True):
        axis.set_title(f"{title} (mean ± {band:g} std across seeds)")
        axis.set_xlabel("episode")
        axis.set_ylabel("return")
        axis.grid(alpha=0.3)
        if axis.lines:
            axis.legend(loc="best", fontsize="small")
    out = Path(out)
    image = io.BytesIO()
    figure.savefig(image, dpi=120, format=out.suffix.lstrip(".") or "png")
    atomic_write_bytes(out, image.getvalue())  # never through a link, permissions by umask
    return out


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m rl.runs.plot``."""
    parser = argparse.ArgumentParser(
        prog="python -m rl.runs.plot", description="Plot learning curves of training runs."
    )
    parser.add_argument(
        "run_dirs", nargs="+", metavar="RUN_DIR", help="run directories, one curve each"
    )
    parser.add_argument("--out", required=True, help="image file to write (.png, .pdf, .svg)")
    parser.add_argument("--smooth", type=int, help="moving-average window in points")
    parser.add_argument("--band", type=float, default=1.0, help="band half-width in std")
    parser.add_argument("--label", action="append", help="legend entry per run (repeatable)")
    return add_version_option(parser)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``python -m rl.runs.plot``; return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.label and len(args.label) != len(args.run_dirs):
        parser.error("give one --label per RUN_DIR")
    for run_dir in args.run_dirs:
        if not (Path(run_dir) / "metrics.csv").is_file():
            print(f"error: {run_dir} has no metrics.csv", file=sys.stderr)
            return 2
    out = plot_runs(args.run_dirs, args.out, smooth=args.smooth, band=args.band, labels=args.label)
    print(f"Wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
