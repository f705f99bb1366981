"""The suite's outputs besides ``runs.csv``: the rank bracket of each Q*, tables and figures.

* `rank_bracket`: the CP rank of an instance's Q* bracketed by `analysis.rank`
  (a certified lower bound from singular values, an upper one from an exact
  CP fit), beside the construction's rank;
* `axis_table`: the rows of ``verdicts.csv`` behind one figure;
* `verdict_count_rows` and `verdict_cell_rows`: the tables of the page "Is
  TEQL for my problem?" (`analysis.lowrank_suite.page_tables`);
* `plot_axis`: steps to target of a tensor agent over tabular's, against Q*
  rank or against the number of state modes, one line per agent rank, one
  panel per discount.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from analysis.lowrank_suite.grid import Instance
from analysis.rank import rank_profile

EXACT_FIT = 1e-6
"""A CP fit whose sup error is below this times max |Q*| counts as exact (rank <= R)."""
CERTIFIED = 1e-9
"""A lower bound on B_R above this times max |Q*| certifies CP rank > R."""
AXIS_LABELS = {"qstar_rank": "Q* rank", "state_modes": "state modes"}
"""The tables' heading of each axis of the suite."""
VERDICTS = ("faster", "equal", "slower", "neither")
"""The verdicts of `analysis.lowrank_suite.verdicts.verdict`, in the order tables show them."""
MAX_BRACKET_RANK = 20
"""Largest rank fitted for the bracket of a full-rank Q*."""
BRACKET_COLUMNS = ("instance", "kind", "construction_rank", "rank_low", "rank_high", "entries")
"""Columns of ``instances.csv``; ``rank_high`` is empty when no exact fit was found up to the
largest rank tried (then the rank exceeds it)."""


def rank_bracket(
    q_star: np.ndarray,
    construction_rank: int | None,
    seed: int = 0,
    max_rank: int = MAX_BRACKET_RANK,
) -> tuple[int, int | None]:
    """Return (low, high) with low <= CP rank(Q*) <= high, from `analysis.rank.rank_profile`.

    Ranks 1 .. construction rank are fitted (1 .. ``max_rank`` for a full-rank Q*);
    ``low`` is one more than the largest rank whose certified lower bound on B_R
    is positive, ``high`` the smallest rank with an exact fit (None if none).
    """
    top = max_rank if construction_rank is None else construction_rank
    profile = rank_profile(q_star, range(1, top + 1), restarts=3, random_state=seed)
    scale = float(np.abs(q_star).max())
    low, high = 1, None
    for row in profile.rows:
        if row["b_r_lower"] > CERTIFIED * scale:
            low = row["rank"] + 1
        if high is None and row["b_r_upper"] <= EXACT_FIT * scale:
            high = row["rank"]
    return low, high


def bracket_row(instance: Instance, q_star: np.ndarray, seed: int = 0) -> dict:
    """Return the ``instances.csv`` row of ``instance``."""
    low, high = rank_bracket(q_star, instance.qstar_rank, seed)
    return {
        "instance": instance.key,
        "kind": instance.kind,
        "construction_rank": "" if instance.qstar_rank is None else instance.qstar_rank,
        "rank_low": low,
        "rank_high": "" if high is None else high,
        "entries": instance.entries,
    }


def axis_table(verdicts: Sequence[dict], axis: str, fixed: dict) -> list[dict]:
    """Rows of ``verdicts`` on one axis: ``axis`` varies, the ``fixed`` columns match.

    ``axis`` is ``"qstar_rank"`` (``fixed={"state_modes": m}``) or ``"state_modes"``
    (``fixed={"qstar_rank": r}``); values compare as strings.
    """
    return [
        row
        for row in verdicts
        if all(str(row[key]) == str(value) for key, value in fixed.items())
        and (axis != "state_modes" or row["kind"] == "lowrank")
    ]


def _x_value(row: dict, axis: str, full_at: float) -> float:
    value = row[axis]
    return full_at if value in ("", None) else float(value)


def plot_axis(
    rows: Sequence[dict], axis: str, path: Path, *, agent_key_prefix: str, title: str
) -> None:
    """Draw IQM steps-to-target ratio (tensor agent / tabular) against ``axis``; save ``path``.

    One line per agent rank of the set-ups whose key starts with
    ``agent_key_prefix`` (e.g. ``"teql-stable-r"``), one panel per discount; the
    bars are the ratio intervals of `analysis.lowrank_suite.verdicts`.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gammas = sorted({float(r["gamma"]) for r in rows})
    figure, panels = plt.subplots(
        1, max(len(gammas), 1), figsize=(4.2 * max(len(gammas), 1), 3.2), squeeze=False
    )
    ranks_present = sorted({int(r[axis]) for r in rows if axis == "qstar_rank" and r[axis] != ""})
    full_at = (max(ranks_present) * 1.6) if ranks_present else 1.0
    for panel, gamma in zip(panels[0], gammas, strict=False):
        mine = [
            r
            for r in rows
            if float(r["gamma"]) == gamma and str(r["agent_key"]).startswith(agent_key_prefix)
        ]
        for rank in sorted({int(r["agent_rank"]) for r in mine}):
            line = sorted(
                (r for r in mine if int(r["agent_rank"]) == rank),
                key=lambda r: _x_value(r, axis, full_at),
            )
            x = np.array([_x_value(r, axis, full_at) for r in line])
            y = np.array([float(r["ratio"]) for r in line])
            low = np.array([float(r["ratio_low"]) for r in line])
            high = np.array([float(r["ratio_high"]) for r in line])
            panel.errorbar(
                x, y, yerr=[y - low, high - y], marker="o", ms=3, capsize=2, label=f"R = {rank}"
            )
        panel.axhline(1.0, color="grey", lw=0.8, ls="--")
        panel.set_yscale("log")
        panel.set_title(f"gamma = {gamma:g}", fontsize=9)
        if axis == "qstar_rank":
            ticks = [*ranks_present, full_at] if ranks_present else [full_at]
            panel.set_xscale("log")
            panel.set_xticks(ticks, [*map(str, ranks_present), "full"])
            panel.minorticks_off()
            panel.set_xlabel("CP rank of Q*")
        else:
            panel.set_xticks(sorted({int(r[axis]) for r in rows}))
            panel.set_xlabel("state modes")
        panel.set_ylabel("steps to 5% gap, TEQL / tabular")
        panel.tick_params(labelsize=8)
    panels[0][0].legend(fontsize=7, title="agent rank", title_fontsize=7)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)


def axis_markdown(rows: Sequence[dict], axis: str) -> list[str]:
    """Return one figure's tables as Markdown lines: one table per discount.

    Each table has one row per (axis value, set-up). Steps are IQMs with their
    95% intervals, in thousands; ``reached`` counts the seeds that reached the
    target (tensor agent / tabular), and a side with unreached seeds has its
    IQM counted at one evaluation past the budget.
    """
    label = AXIS_LABELS[axis]
    lines: list[str] = []
    for gamma in sorted({float(r["gamma"]) for r in rows}):
        lines += [
            f"gamma {gamma:g}:",
            "",
            f"| {label} | agent | params (table) | steps, agent (k) | steps, tabular (k) "
            "| ratio | reached | verdict |",
            "|---|---|---|---|---|---|---|---|",
        ]
        mine = [r for r in rows if float(r["gamma"]) == gamma]
        for row in sorted(mine, key=lambda r: (_x_value(r, axis, 1e9), _setup_order(r))):
            x = "full" if row[axis] in ("", None) else row[axis]
            lines.append(
                f"| {x} | {row['agent_key']} | {row['n_params']} ({row['table_params']}) "
                f"| {_steps(row, '')} | {_steps(row, 'tabular_')} | {_ratio(row)} "
                f"| {row['reached']}/{row['tabular_reached']} of {row['seeds']} "
                f"| {row['verdict']} |"
            )
        lines.append("")
    return lines


def verdict_counts_markdown(rows: Sequence[dict]) -> list[str]:
    """Return Markdown lines counting the verdicts of ``rows`` per agent reading and discount.

    One row per (agent, reading, gamma): how many cells of ``verdicts.csv`` read
    faster, equal, slower and neither, over every instance and agent rank.
    """
    header, *body = verdict_count_rows(rows)
    lines = ["| " + " | ".join(header) + " |", "|---|---|---|---:|" + "---:|" * len(VERDICTS)]
    return lines + ["| " + " | ".join(cells) + " |" for cells in body]


def verdict_count_rows(rows: Sequence[dict]) -> list[list[str]]:
    """Return the verdict counts of ``rows`` as table rows, the header first.

    One row per (agent, reading, gamma), sorted: how many cells of
    ``verdicts.csv`` read faster, equal, slower and neither, over every
    instance and agent rank (the table of `verdict_counts_markdown`).
    """
    counts: dict[tuple[str, str, float], dict[str, int]] = {}
    for row in rows:
        key = (str(row["agent"]), str(row["reading"]), float(row["gamma"]))
        tally = counts.setdefault(key, dict.fromkeys(VERDICTS, 0))
        tally[row["verdict"]] += 1
    table = [["agent", "reading", "gamma", "cells", *VERDICTS]]
    for (agent, reading, gamma), tally in sorted(counts.items()):
        cells = [str(tally[v]) for v in VERDICTS]
        table.append([agent, reading, f"{gamma:g}", str(sum(tally.values())), *cells])
    return table


def verdict_cell_rows(rows: Sequence[dict], axis: str) -> list[list[str]]:
    """Return one figure's cells as table rows, the header first: every verdict with its ratio.

    One row per (discount, axis value, agent reading), the readings in the order
    of ``rows``; then tabular Q-learning's steps to the target (IQM in thousands
    with its 95% interval) and how many of its seeds reached it, and one column
    per agent rank holding the verdict's mark (`VERDICT_MARKS`) and the ratio
    of steps with its deciding interval, or ``-`` where neither side reached
    the target.
    """
    readings = list(dict.fromkeys((str(r["agent"]), str(r["reading"])) for r in rows))
    ranks = sorted({int(r["agent_rank"]) for r in rows})
    cells = {
        (float(r["gamma"]), str(r[axis]), str(r["agent"]), str(r["reading"]), int(r["agent_rank"])):
        r
        for r in rows
    }  # fmt: skip
    points = sorted(
        {(float(r["gamma"]), str(r[axis])) for r in rows},
        key=lambda p: (p[0], _x_value({axis: p[1]}, axis, 1e9)),
    )
    table = [
        [
            "gamma",
            AXIS_LABELS[axis],
            "tabular: steps (k), seeds reached",
            "agent",
            *(f"R = {rank}" for rank in ranks),
        ]
    ]
    for gamma, x in points:
        for agent, reading in readings:
            mine = [cells[gamma, x, agent, reading, rank] for rank in ranks]
            first = mine[0]
            tabular = f"{_steps(first, 'tabular_')}, {first['tabular_reached']}/{first['seeds']}"
            marks = [
                "-"
                if row["verdict"] == "neither"
                else f"{VERDICT_MARKS[row['verdict']]} {_ratio(row)}"
                for row in mine
            ]
            table.append([f"{gamma:g}", x or "full", tabular, f"{agent} {reading}", *marks])
    return table


VERDICT_MARKS = {"faster": "F", "equal": "=", "slower": "S", "neither": "-"}
"""One-letter marks of the verdicts in `verdict_grid_markdown`."""


def verdict_grid_markdown(rows: Sequence[dict], axis: str) -> list[str]:
    """Return one figure's verdicts as a compact Markdown grid, every agent at once.

    One row per (discount, axis value), one column per agent reading; a cell
    holds one mark of `VERDICT_MARKS` per agent rank, lowest rank first (a
    blank for a rank not run), or ``not run``.
    """
    label = AXIS_LABELS[axis]
    readings = sorted({(str(r["agent"]), str(r["reading"])) for r in rows})
    ranks = sorted({int(r["agent_rank"]) for r in rows})
    marks = {
        (float(r["gamma"]), str(r[axis]), str(r["agent"]), str(r["reading"]), int(r["agent_rank"])):
        VERDICT_MARKS[r["verdict"]]
        for r in rows
    }  # fmt: skip
    lines = [
        f"| gamma | {label} | "
        + " | ".join(f"{a} {g} (R = {', '.join(map(str, ranks))})" for a, g in readings)
        + " |",
        "|---|---|" + "---|" * len(readings),
    ]
    points = sorted(
        {(float(r["gamma"]), str(r[axis])) for r in rows},
        key=lambda p: (p[0], _x_value({axis: p[1]}, axis, 1e9)),
    )
    for gamma, x in points:
        cells = [
            " ".join(marks.get((gamma, x, agent, reading, rank), " ") for rank in ranks)
            for agent, reading in readings
        ]
        cells = [cell if cell.strip() else "not run" for cell in cells]
        lines.append(f"| {gamma:g} | {x or 'full'} | " + " | ".join(cells) + " |")
    return lines


def _setup_order(row: dict) -> tuple[str, str, int]:
    """Sort key of a set-up: agent, reading, then rank as a number."""
    return (str(row["agent"]), str(row["reading"]), int(row["agent_rank"]))


_STEP_KEYS = {
    "": ("iqm_steps", "iqm_low", "iqm_high"),
    "tabular_": ("iqm_steps", "low", "high"),
}


def _steps(row: dict, prefix: str) -> str:
    """Return one side's IQM steps to the target with its 95% interval, in thousands."""
    point, low, high = (float(row[f"{prefix}{k}"]) / 1000 for k in _STEP_KEYS[prefix])
    return f"{point:.1f} [{low:.1f}, {high:.1f}]"


def _ratio(row: dict) -> str:
    """Return the ratio of steps (agent over tabular) with its deciding interval."""
    ratio, low, high = (float(row[key]) for key in ("ratio", "ratio_low", "ratio_high"))
    return f"{ratio:.2f} [{low:.2f}, {high:.2f}]"
