"""Figures, tidy tables and ``summary.md`` of one `rl.reproduce` experiment.

Reads the finished run directories (``OUT/ENV/LINE`` for a line trained as one
task, ``OUT/ENV/LINE/seed-S`` for a line trained one seed per task) and writes,
per environment:

* ``ENV-curves.png`` / ``.pdf``: greedy return against episode, raw (mean ±
  1 std across seeds, no smoothing: the paper's caption) and, with
  ``postprocess``, beside it the authors' post-processing
  (`rl.experiments.stats.postprocess_like_authors`: outlier replacement, two moving
  averages, ± 0.5 std);
* ``ENV-curves.csv``: the tidy table behind every plotted line (one row per
  line, view and evaluated episode);
* ``ENV-scores.csv``: one row per line and seed, the mean greedy return over
  the final window (raw, and after the authors' outlier replacement);
* for the ablation, ``ENV-box.png`` / ``.pdf``: box plots of those scores.

`rl.experiments.summary` writes ``summary.md`` from the same numbers.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from rl.experiments.paper import (
    Line,
)
from rl.experiments.stats import iqm_interval, mean_std, postprocess_like_authors, replace_outliers
from rl.runs.metrics import pivot, read_metrics
from rl.runs.rundir import atomic_write_bytes, atomic_write_text, check_run_files

ENV_TITLES = {"cartpole": "CartPole", "pendulum": "Pendulum", "highway": "Highway"}

PAPER_SEEDS = 100
"""The paper's runs per curve (Section subsec:hyperparameters: "100 independent runs")."""


def scale_label(scale: float, seeds: int, deep_seeds: int | None = None) -> str:
    """Return which scale a figure or table is at: the paper's, or how far below it."""
    deep = seeds if deep_seeds is None else deep_seeds
    if scale == 1.0 and seeds == deep == PAPER_SEEDS:
        return "paper scale (its episodes, 100 seeds)"
    seeds_text = f"{seeds} seeds" + (f" (DQN, SAC {deep})" if deep != seeds else "")
    return f"scale {scale:g} of the paper's episodes, {seeds_text}"


class LineRuns(NamedTuple):
    """The greedy evaluations of one line: one row per seed, one column per evaluation."""

    line: Line
    env: str
    episodes: NDArray[np.int64]
    greedy: NDArray[np.float64]
    seeds: tuple[int, ...]


@dataclass(frozen=True)
class LineStats:
    """Numbers of one line over the final window (see `line_stats`)."""

    runs: LineRuns
    first: int
    last: int
    scores: NDArray[np.float64]
    scores_replaced: NDArray[np.float64]
    mean: float
    std: float
    iqm: float
    ci_low: float
    ci_high: float
    pp_mean: float
    pp_std: float
    pp_end: float


def load_line(run_dirs: Sequence[Path], line: Line, env: str) -> LineRuns | None:
    """Read the greedy returns of one line from its run directories (None if any is missing).

    Raises
    ------
    rl.runs.rundir.RunDirError
        If a ``metrics.csv`` is a symbolic link or not a regular file.
    ValueError
        If a ``metrics.csv`` is damaged (one line naming it, `rl.runs.metrics.read_metrics`).
    """
    episodes, rows, seeds = None, [], []
    for run_dir in run_dirs:
        path = run_dir / "metrics.csv"
        check_run_files(run_dir, [path.name])  # a link or a FIFO: RunDirError, never read
        if not path.is_file():
            return None
        table = read_metrics(path)
        if table["episode"].size == 0:
            return None
        eps, values = pivot(table, "greedy_return")
        evaluated = ~np.all(np.isnan(values), axis=0)
        eps, values = eps[evaluated], values[:, evaluated]
        if episodes is not None and not np.array_equal(eps, episodes):
            return None
        episodes = eps
        rows.append(values)
        seeds.extend(int(s) for s in np.unique(table["seed"]))
    if episodes is None:
        return None
    return LineRuns(line, env, episodes, np.vstack(rows), tuple(seeds))


def line_stats(runs: LineRuns, first: int, last: int) -> LineStats:
    """Return the final-window numbers of one line, raw and post-processed.

    Each seed's score is its mean greedy return over the evaluations in
    episodes ``first..last``; mean, population std and IQM with its 95%
    expanded-percentile bootstrap interval are across seeds (`rl.experiments.stats`). The
    post-processed numbers are the window means of the authors' smoothed mean
    and std curves, and the smoothed mean at the last evaluation.
    """
    nan = math.nan
    inside = (runs.episodes >= first) & (runs.episodes <= last)
    if not inside.any() or runs.greedy.size == 0:  # no greedy evaluation in the window yet
        empty = np.full(len(runs.seeds), nan)
        return LineStats(runs, first, last, empty, empty, *(nan,) * 8)
    scores = np.nanmean(runs.greedy[:, inside], axis=1)
    replaced = np.nanmean(replace_outliers(runs.greedy)[:, inside], axis=1)
    mean, std = mean_std(scores[:, None])
    interval = iqm_interval(scores, seed=0)
    smooth = postprocess_like_authors(runs.greedy)
    return LineStats(
        runs,
        first,
        last,
        scores,
        replaced,
        float(mean[0]),
        float(std[0]),
        interval.iqm,
        interval.low,
        interval.high,
        float(np.mean(smooth.mean[inside])),
        float(np.mean(smooth.std[inside])),
        float(smooth.mean[-1]),
    )


# ----------------------------------------------------------------------------- tables


def _csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if isinstance(v, float) and math.isnan(v) else v for v in row])
    return buffer.getvalue()


def curve_rows(
    experiment: str, stats: Sequence[LineStats], reading: str, postprocess: bool
) -> list[list[Any]]:
    """Return the tidy rows behind every plotted line (raw, and post-processed if asked)."""
    rows: list[list[Any]] = []
    for st in stats:
        runs, line = st.runs, st.runs.line
        mean, std = mean_std(runs.greedy)
        views = [("raw", mean, std, mean - std, mean + std)]
        if postprocess:
            smooth = postprocess_like_authors(runs.greedy)
            views.append(("postprocessed", smooth.mean, smooth.std, smooth.low, smooth.high))
        for view, m, s, low, high in views:
            for i, episode in enumerate(runs.episodes):
                rows.append(
                    [
                        experiment,
                        runs.env,
                        line.panel,
                        line.key,
                        line.label,
                        line.agent,
                        reading,
                        view,
                        int(episode),
                        float(m[i]),
                        float(s[i]),
                        float(low[i]),
                        float(high[i]),
                        len(runs.seeds),
                    ]
                )
    return rows


CURVE_COLUMNS = (
    "experiment",
    "env",
    "panel",
    "line",
    "label",
    "agent",
    "reading",
    "view",
    "episode",
    "mean",
    "std",
    "low",
    "high",
    "seeds",
)
SCORE_COLUMNS = (
    "env",
    "line",
    "label",
    "seed",
    "first",
    "last",
    "score",
    "score_outliers_replaced",
)


def score_rows(stats: Sequence[LineStats]) -> list[list[Any]]:
    """Return one row per line and seed: its mean greedy return over the final window."""
    return [
        [
            st.runs.env,
            st.runs.line.key,
            st.runs.line.label,
            seed,
            st.first,
            st.last,
            float(score),
            float(replaced),
        ]
        for st in stats
        for seed, score, replaced in zip(st.runs.seeds, st.scores, st.scores_replaced, strict=False)
    ]


# ----------------------------------------------------------------------------- figures


def _save(figure: Any, out: Path, stem: str) -> list[Path]:
    paths = [out / f"{stem}.png", out / f"{stem}.pdf"]
    for path, dpi in zip(paths, (120, "figure"), strict=True):
        image = io.BytesIO()
        figure.savefig(image, dpi=dpi, format=path.suffix[1:])
        atomic_write_bytes(path, image.getvalue())  # never through a link, permissions by umask
    return paths


def plot_curves(
    stats: Sequence[LineStats],
    title: str,
    out: Path,
    stem: str,
    postprocess: bool,
    note: str = "",
) -> list[Path]:
    """Draw the learning curves, raw and (if asked) post-processed beside them.

    ``axes[view, panel]``: with one panel the views sit side by side, with
    several each panel is a column and each view a row. ``note`` (the scale,
    `scale_label`) is the figure's title.
    """
    from matplotlib.figure import Figure

    panels = list(dict.fromkeys(st.runs.line.panel for st in stats)) or [""]
    views = ["raw", "postprocessed"] if postprocess else ["raw"]
    if len(panels) == 1:  # one panel: raw and post-processed side by side
        figure = Figure(figsize=(5.6 * len(views), 4.2), layout="constrained")
        axes = figure.subplots(1, len(views), squeeze=False).T
    else:  # one column per panel, one row per view
        figure = Figure(figsize=(4.6 * len(panels), 3.6 * len(views)), layout="constrained")
        axes = figure.subplots(len(views), len(panels), squeeze=False)
    colours: dict[str, Any] = {}
    for st in stats:
        runs = st.runs
        column = panels.index(runs.line.panel)
        if runs.greedy.size == 0:
            continue
        mean, std = mean_std(runs.greedy)
        curves = [(mean, mean - std, mean + std)]
        if postprocess:
            smooth = postprocess_like_authors(runs.greedy)
            curves.append((smooth.mean, smooth.low, smooth.high))
        for row, (m, low, high) in enumerate(curves):
            axis = axes[row, column]
            label = f"{runs.line.label} ({len(runs.seeds)} seeds)"
            colour = colours.get(runs.line.label)
            (drawn,) = axis.plot(runs.episodes, m, label=label, color=colour, linewidth=1.2)
            colours[runs.line.label] = drawn.get_color()
            axis.fill_between(
                runs.episodes, low, high, color=drawn.get_color(), alpha=0.15, linewidth=0
            )
    names = {"raw": "raw: mean ± 1 std", "postprocessed": "authors' post-processing: ± 0.5 std"}
    for row, view in enumerate(views):
        for column, panel in enumerate(panels):
            axis = axes[row, column]
            axis.set_title(" | ".join(p for p in (title, panel, names[view]) if p), fontsize=9)
            axis.set_xlabel("episode")
            axis.set_ylabel("greedy return")
            axis.grid(alpha=0.3)
            if axis.lines:
                axis.legend(loc="best", fontsize="x-small")
    if note:
        figure.suptitle(note, fontsize=9)
    return _save(figure, out, stem)


def plot_box(
    stats: Sequence[LineStats], title: str, out: Path, stem: str, note: str = ""
) -> list[Path]:
    """Box plots of the final-window scores per line: raw and after outlier replacement."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 3.6), layout="constrained")
    axes = figure.subplots(1, 2)
    labels = [st.runs.line.label for st in stats]
    for axis, attr, name in zip(
        axes, ("scores", "scores_replaced"), ("raw", "after outlier replacement"), strict=True
    ):
        data = [getattr(st, attr)[~np.isnan(getattr(st, attr))] for st in stats]
        if any(d.size for d in data):
            axis.boxplot([d if d.size else [np.nan] for d in data], tick_labels=labels)
        axis.set_title(f"{title}: final-window greedy return ({name})", fontsize=9)
        axis.tick_params(axis="x", labelsize=7)
        axis.grid(alpha=0.3)
    if note:
        figure.suptitle(note, fontsize=9)
    return _save(figure, out, stem)


def write_tables(
    out: Path,
    env: str,
    experiment: str,
    stats: Sequence[LineStats],
    reading: str,
    postprocess: bool,
) -> list[Path]:
    """Write ``ENV-curves.csv`` and ``ENV-scores.csv``."""
    curves = out / f"{env}-curves.csv"
    scores = out / f"{env}-scores.csv"
    atomic_write_text(
        curves, _csv_text(CURVE_COLUMNS, curve_rows(experiment, stats, reading, postprocess))
    )
    atomic_write_text(scores, _csv_text(SCORE_COLUMNS, score_rows(stats)))
    return [curves, scores]
