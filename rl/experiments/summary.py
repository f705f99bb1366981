"""``summary.md`` of one `rl.reproduce` experiment: our numbers beside the paper's.

Per environment: a table of every line's final-window numbers (raw mean ± std,
IQM with its bootstrap interval, post-processed, the paper's figure value and
the released code's raw value where they exist), how much of the gap to the
paper's figure the authors' post-processing accounts for, the ablation's table
of standard deviations, the sensitivity levels' parameter counts, and the
paper's claims checked against our raw numbers. The numbers come from
`rl.experiments.report.line_stats`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from rl.experiments import claims
from rl.experiments.document import code_span
from rl.experiments.paper import (
    LEVELS,
    PAPER_ABLATION_STD,
    PAPER_FIGURE,
    RELEASED_RAW,
    Experiment,
    PaperValue,
)
from rl.experiments.report import ENV_TITLES, LineStats
from rl.runs.rundir import atomic_write_text


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
    history: tuple[tuple[str, str], ...] = ()
    """(wall seconds, command) of every training invocation in the output directory."""


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


def _compare(
    experiment: str, env: str, stats: Mapping[str, LineStats], text: str, a: str, b: str, attr: str
) -> str:
    """Return the verdict that ``attr`` (mean or std) of line ``a`` exceeds that of line ``b``.

    Decided as the whole-paper report decides (`rl.experiments.claims`): a 95% seeded
    bootstrap interval of the difference of means (``attr`` "mean") or of the ratio of
    standard deviations ("std") against 0 or 1; "cannot tell" when it straddles.
    """
    if a not in stats or b not in stats:
        return ""
    x, y = getattr(stats[a], attr), getattr(stats[b], attr)
    if math.isnan(x) or math.isnan(y):
        return ""
    lines = ((experiment, env, a), (experiment, env, b))
    check = (
        claims.Check(text, "diff", lines)
        if attr == "mean"
        else claims.Check(text, "ratio", lines, threshold=1.0)
    )
    found = claims.evaluate(check, lambda key: stats.get(key[2]))
    measure = "difference" if attr == "mean" else "ratio"
    interval = f"{measure} {_fmt(found.estimate, 2)} [{_fmt(found.low, 2)}, {_fmt(found.high, 2)}]"
    names = f"{stats[a].runs.line.label} vs {stats[b].runs.line.label}"
    return f"- {text}: {found.verdict} ({names}: {_fmt(x, 2)} vs {_fmt(y, 2)}; {interval})."


def _checks(experiment: Experiment, env: str, stats: Sequence[LineStats]) -> list[str]:
    """Return the paper's claims about this figure checked against our raw numbers."""
    by_key = {st.runs.line.key: st for st in stats}
    checks: list[tuple[str, str, str, str]] = []
    if experiment.name in ("comparison", "highway"):
        checks.append(("TEQL above TLR (raw mean)", "teql", "tlr", "mean"))
        for other in ("lora-vi", "dqn", "sac"):
            checks.append(
                ("the tensor method TLR above a baseline (raw mean)", "tlr", other, "mean")
            )
    if experiment.box:
        checks.append(("lambda > 0 reduces the std across seeds", "teql-lam0", "teql-lam", "std"))
        checks.append(("lambda > 0 raises the mean", "teql-lam", "teql-lam0", "mean"))
    if experiment.name == "sensitivity-tlr":
        for key in by_key:
            if key.startswith("teql-") and "tlr-" + key[5:] in by_key:
                level = key[5:].replace("-", " ")
                checks.append((f"{level}: TEQL above TLR", key, "tlr-" + key[5:], "mean"))
                checks.append((f"{level}: TLR's std above TEQL's", "tlr-" + key[5:], key, "std"))
    found = [line for line in (_compare(experiment.name, env, by_key, *c) for c in checks) if line]
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
            _paper(PAPER_FIGURE.get((env, line.agent)), last)
            if line.key == line.agent and experiment.name == "comparison"
            else None
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
    if settings.postprocess and experiment.name == "comparison":
        out += _gap_table(stats, env)
    if experiment.box:
        out += _ablation_table(stats, env)
    if experiment.name.startswith("sensitivity"):
        out += _levels_table(env, stats)
    out += _checks(experiment, env, stats)
    ranked = sorted((st for st in stats if not math.isnan(st.mean)), key=lambda s: -s.mean)
    if ranked:
        order = " > ".join(
            f"{st.runs.line.label}{f' [{st.runs.line.panel}]' if st.runs.line.panel else ''} "
            f"{_fmt(st.mean)}"
            for st in ranked
        )
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
        "Trained by (wall time of each invocation):",
        "",
        *(f"- {code_span(command)} ({wall} s)" for wall, command in settings.history),
        *(["- (no training invocation recorded)"] if not settings.history else []),
        "",
        f"This report: `{settings.command}`",
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
        "docs/authors-code.md): "
        + (
            "**on**, shown beside the raw numbers for visual comparison only."
            if settings.postprocess
            else "off (add `--postprocess`; with `--resume` on a finished run nothing retrains)."
        ),
        f"- Backend `{settings.backend}`, workers {settings.workers or 'all CPUs'}; "
        f"wall time of this invocation {settings.wall_time:.0f} s; the runs' own wall "
        f"times sum to {core:.0f} core-s (2-core machine shared with other work).",
        "",
        "What the paper says:",
        "",
        *(f"> {claim}" + "\n>" for claim in experiment.claims),
        "",
        "The paper's numbers are from its text and captions; \"paper's figure\" values were "
        "read off its figures, after the authors' post-processing (docs/authors-code.md). "
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
