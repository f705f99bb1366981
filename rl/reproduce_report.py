"""Figures, tidy tables and ``summary.md`` of one `rl.reproduce` experiment.

Reads the finished run directories (``OUT/ENV/LINE`` for a line trained as one
task, ``OUT/ENV/LINE/seed-S`` for a line trained one seed per task) and writes,
per environment:

* ``ENV-curves.png`` / ``.pdf``: greedy return against episode, raw (mean ±
  1 std across seeds, no smoothing: the paper's caption) and, with
  ``postprocess``, beside it the authors' post-processing
  (`rl.stats.postprocess_like_authors`: outlier replacement, two moving
  averages, ± 0.5 std);
* ``ENV-curves.csv``: the tidy table behind every plotted line (one row per
  line, view and evaluated episode);
* ``ENV-scores.csv``: one row per line and seed, the mean greedy return over
  the final window (raw, and after the authors' outlier replacement);
* for the ablation, ``ENV-box.png`` / ``.pdf``: box plots of those scores;

and one ``summary.md`` with our numbers beside the paper's.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from rl.checkpoint import atomic_write_text
from rl.metrics import pivot, read_metrics
from rl.reproduce_experiments import (
    LEVELS,
    PAPER_ABLATION_STD,
    PAPER_FIGURE,
    RELEASED_RAW,
    Experiment,
    Line,
    PaperValue,
)
from rl.stats import iqm_interval, mean_std, postprocess_like_authors, replace_outliers

ENV_TITLES = {"cartpole": "CartPole", "pendulum": "Pendulum", "highway": "Highway"}


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
    """Read the greedy returns of one line from its run directories (None if any is missing)."""
    episodes, rows, seeds = None, [], []
    for run_dir in run_dirs:
        path = run_dir / "metrics.csv"
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
    expanded-percentile bootstrap interval are across seeds (`rl.stats`). The
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
    figure.savefig(paths[0], dpi=120)
    figure.savefig(paths[1])
    return paths


def plot_curves(
    stats: Sequence[LineStats], title: str, out: Path, stem: str, postprocess: bool
) -> list[Path]:
    """Draw the learning curves, raw and (if asked) post-processed beside them.

    ``axes[view, panel]``: with one panel the views sit side by side, with
    several each panel is a column and each view a row.
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
    return _save(figure, out, stem)


def plot_box(stats: Sequence[LineStats], title: str, out: Path, stem: str) -> list[Path]:
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
    return _save(figure, out, stem)


# ----------------------------------------------------------------------------- summary


def _fmt(value: float, digits: int = 1) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _pm(mean: float, std: float) -> str:
    return f"{_fmt(mean)} ± {_fmt(std)}" if not math.isnan(mean) else "n/a"


def _paper(value: PaperValue | None, last: int, window: int | None = None) -> PaperValue | None:
    """Return ``value`` if it belongs to a run of ``last`` episodes (and this final window)."""
    if value is None or (value.episodes is not None and value.episodes != last):
        return None
    if value.window is not None and window is not None and value.window != window:
        return None
    return value


class Settings(NamedTuple):
    """What `write_summary` says about how the runs were made."""

    command: str
    reading: str
    seeds: int
    deep_seeds: int
    scale: float
    backend: str
    workers: int | None
    wall_time: float
    postprocess: bool
    readings_used: Mapping[str, str]


def _gap_table(stats: Sequence[LineStats], env: str) -> list[str]:
    lines = []
    for st in stats:
        value = _paper(PAPER_FIGURE.get((env, st.runs.line.agent)), st.last)
        if value is None or st.runs.line.key != st.runs.line.agent:
            continue
        gap = value.value - st.mean
        left = value.value - st.pp_mean
        share = (st.pp_mean - st.mean) / gap if gap else math.nan
        lines.append(
            f"| {st.runs.line.label} | {_fmt(value.value)} ({value.source}) | {_fmt(st.mean)} | "
            f"{_fmt(st.pp_mean)} (end {_fmt(st.pp_end)}) | {_fmt(gap)} | {_fmt(left)} | "
            f"{_fmt(100 * share, 0)}% |"
        )
    if not lines:
        return []
    return [
        "",
        "How much of the gap to the paper's figure the authors' post-processing accounts for "
        "(window means; share = (post-processed - raw) / (paper - raw)):",
        "",
        "| line | paper's figure | ours raw | ours post-processed | gap raw | gap left | "
        "share explained |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *lines,
    ]


def _ablation_table(stats: Sequence[LineStats], env: str) -> list[str]:
    paper = PAPER_ABLATION_STD.get(env)
    rows = []
    for st in stats:
        stated = ""
        if paper is not None and st.runs.line.key == "teql-lam0":
            stated = f"{paper[0]:.2f}"
        elif paper is not None and st.runs.line.key == "teql-lam":
            stated = f"{paper[1]:.2f}"
        replaced_std = float(np.std(st.scores_replaced)) if not math.isnan(st.std) else math.nan
        rows.append(
            f"| {st.runs.line.label} | {len(st.runs.seeds)} | {_fmt(st.std, 2)} | "
            f"{_fmt(replaced_std, 2)} | {stated or '-'} |"
        )
    return [
        "",
        "Standard deviation across seeds of the final-window greedy return (the box plots; the "
        "paper quotes it for lambda = 0 and lambda > 0 over 100 runs):",
        "",
        "| line | seeds | std raw | std after outlier replacement | paper |",
        "|---|---:|---:|---:|---:|",
        *rows,
    ]


def _levels_table(env: str, stats: Sequence[LineStats]) -> list[str]:
    levels = LEVELS.get(env, ())
    by_key = {st.runs.line.key: st for st in stats}
    rows = []
    for level in levels:
        grid = f"{list(level.state_bins)} \\| {level.action_bins}"
        cells = []
        for agent in ("teql", "tlr"):
            st = by_key.get(f"{agent}-{level.name.replace(' ', '-')}")
            cells.append(_pm(st.mean, st.std) if st is not None else "-")
        rows.append(
            f"| {level.name} | {grid} | {level.params()} | {level.stated_params} | "
            f"{' | '.join(cells)} |"
        )
    return [
        "",
        "Discretization levels (P_CP = R sum(d_n) at rank 10, from the formula, beside the "
        "stated count):",
        "",
        "| level | state bins \\| action bins | P_CP | stated | TEQL raw | TLR raw |",
        "|---|---|---:|---:|---:|---:|",
        *rows,
    ]


def _compare(stats: Mapping[str, LineStats], text: str, a: str, b: str, attr: str) -> str:
    """Return whether ``attr`` of line ``a`` exceeds that of line ``b``, with both numbers."""
    if a not in stats or b not in stats:
        return ""
    x, y = getattr(stats[a], attr), getattr(stats[b], attr)
    if math.isnan(x) or math.isnan(y):
        return ""
    verdict = "holds" if x > y else "does not hold"
    return f"- {text}: {verdict} ({_fmt(x, 2)} vs {_fmt(y, 2)})."


def _checks(experiment: Experiment, stats: Sequence[LineStats]) -> list[str]:
    """Return the paper's claims about this figure checked against our raw numbers."""
    by_key = {st.runs.line.key: st for st in stats}
    checks: list[tuple[str, str, str, str]] = []
    if experiment.name in ("comparison", "highway"):
        checks.append(("TEQL above TLR (raw mean)", "teql", "tlr", "mean"))
        for other in ("lora-vi", "dqn", "sac"):
            checks.append((f"TLR above {other} (raw mean)", "tlr", other, "mean"))
    if experiment.box:
        checks.append(("lambda > 0 reduces the std across seeds", "teql-lam0", "teql-lam", "std"))
        checks.append(("lambda > 0 raises the mean", "teql-lam", "teql-lam0", "mean"))
    found = [line for line in (_compare(by_key, *c) for c in checks) if line]
    return ["", "The paper's claims against our raw numbers:", "", *found] if found else []


def _env_section(
    experiment: Experiment,
    env: str,
    stats: Sequence[LineStats],
    walls: Mapping[str, float],
    settings: Settings,
    episodes: int,
    window: int,
) -> list[str]:
    title = ENV_TITLES.get(env, env)
    first, last = max(1, episodes - window + 1), episodes
    out = [
        f"## {title}",
        "",
        f"{episodes} training episodes per seed; final window episodes {first}-{last} "
        f"({window} episodes, {last // 10 - (first - 1) // 10} greedy evaluations per seed).",
        "",
    ]
    header = "| line | reading | seeds | raw mean ± std | IQM [95% CI] |"
    rule = "|---|---|---:|---:|---:|"
    if settings.postprocess:
        header += " post-processed mean ± std |"
        rule += "---:|"
    header += " paper's figure | released code, raw | wall (core-s) |"
    rule += "---:|---:|---:|"
    out += [header, rule]
    for st in stats:
        line = st.runs.line
        figure = (
            _paper(PAPER_FIGURE.get((env, line.agent)), last) if line.key == line.agent else None
        )
        released = (
            _paper(RELEASED_RAW.get((env, line.agent)), last, window)
            if line.key == line.agent
            else None
        )
        cells = [
            line.label + (f" [{line.panel}]" if line.panel else ""),
            settings.readings_used.get(line.agent, settings.reading),
            str(len(st.runs.seeds)),
            _pm(st.mean, st.std),
            f"{_fmt(st.iqm)} [{_fmt(st.ci_low)}, {_fmt(st.ci_high)}]",
        ]
        if settings.postprocess:
            cells.append(_pm(st.pp_mean, st.pp_std))
        cells += [
            _fmt(figure.value) if figure else "-",
            _pm(released.value, released.std or math.nan) if released else "-",
            _fmt(walls.get(f"{env}/{line.key}", math.nan), 0),
        ]
        out.append("| " + " | ".join(cells) + " |")
    if settings.postprocess:
        out += _gap_table(stats, env)
    if experiment.box:
        out += _ablation_table(stats, env)
    if experiment.name.startswith("sensitivity"):
        out += _levels_table(env, stats)
    out += _checks(experiment, stats)
    ranked = sorted((st for st in stats if not math.isnan(st.mean)), key=lambda s: -s.mean)
    if ranked:
        order = " > ".join(f"{st.runs.line.label} {_fmt(st.mean)}" for st in ranked)
        out += ["", f"Ranking by raw final-window mean: {order}."]
    return out + [""]


def write_summary(
    out: Path,
    experiment: Experiment,
    envs: Sequence[str],
    stats: Mapping[str, Sequence[LineStats]],
    walls: Mapping[str, float],
    missing: Sequence[str],
    settings: Settings,
    episodes: Mapping[str, int],
    windows: Mapping[str, int],
) -> Path:
    """Write ``summary.md``: settings, our numbers beside the paper's, per environment."""
    core = sum(walls.values())
    text = [
        f"# `{experiment.name}`: {experiment.figure}",
        "",
        f"Command: `{settings.command}`",
        "",
        f"- Reading: `{settings.reading}` (per agent: "
        + ", ".join(f"{a} `{r}`" for a, r in settings.readings_used.items())
        + ").",
        f"- Seeds: {settings.seeds} per line (the paper says 100; the authors ran 30); "
        f"PyTorch agents (DQN, SAC) {settings.deep_seeds}. Seeds 0, 1, ...",
        f"- Episodes scale: {settings.scale:g} of the paper's "
        + ", ".join(f"{ENV_TITLES.get(e, e)} {episodes[e]}" for e in envs)
        + " episodes; final windows "
        + ", ".join(f"{ENV_TITLES.get(e, e)} {windows[e]}" for e in envs)
        + " episodes (scaled in proportion).",
        "- Protocol: one greedy episode after every 10th training episode; numbers are "
        "each seed's mean greedy return over the final window, then mean ± population std "
        "and IQM with a 95% expanded-percentile stratified bootstrap interval (seed 0) "
        "across seeds.",
        "- Post-processing (the authors' outlier replacement and two moving averages, "
        "REFERENCE-FACTS): "
        + (
            "**on**, shown beside the raw numbers for visual comparison only."
            if settings.postprocess
            else "off (add `--postprocess`; with `--resume` on a finished run nothing retrains)."
        ),
        f"- Backend `{settings.backend}`, workers {settings.workers or 'all CPUs'}; "
        f"wall time of this invocation {settings.wall_time:.0f} s; the runs' own wall "
        f"times sum to {core:.0f} core-s.",
        "",
        "What the paper says:",
        "",
        *(f"> {claim}" + "\n>" for claim in experiment.claims),
        "",
        "The paper's numbers are from its text and captions; \"paper's figure\" values were "
        "read off its figures (REFERENCE-FACTS), after the authors' post-processing. "
        '"released code, raw" is the authors\' code run with 8 seeds, no smoothing.',
        "",
    ]
    if missing:
        text += ["Missing (not finished or failed): " + ", ".join(missing) + ".", ""]
    for env in envs:
        text += _env_section(
            experiment, env, stats.get(env, []), walls, settings, episodes[env], windows[env]
        )
    path = out / "summary.md"
    atomic_write_text(path, "\n".join(text).rstrip() + "\n")
    return path


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
