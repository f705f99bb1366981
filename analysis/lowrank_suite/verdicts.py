"""Verdicts of the suite: per cell, TEQL (or TLR) against tabular Q-learning on steps to target.

A *cell* is one instance and one tensor-agent set-up. Its score per seed is the
number of environment steps until the greedy policy's normalized value gap is
at most the target (`analysis.lowrank_suite.grid.TARGET_GAP`); a seed that
never got there counts as one evaluation past its budget
(`analysis.lowrank_suite.measure.censored_steps`), the least it could have
taken. Each side's interquartile mean (IQM) gets a 95% stratified bootstrap
interval (`rl.experiments.stats.iqm_interval`, the expanded percentile
interval), and the verdict is

* ``faster``: the tensor agent's interval lies wholly below tabular's;
* ``slower``: wholly above;
* ``equal``: the intervals overlap (equal within seed noise), or neither side
  reached the target with any seed (``neither``, also counted as equal).

The ratio of the IQMs (tensor agent over tabular) is reported with the
interval ``[low_T / high_tab, high_T / low_tab]``, which holds both intervals.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from analysis.lowrank_suite.measure import censored_steps
from rl.experiments.stats import iqm_interval
from rl.runs.metrics import iqm

VERDICT_COLUMNS = (
    "instance",
    "kind",
    "qstar_rank",
    "state_modes",
    "gamma",
    "agent_key",
    "agent",
    "reading",
    "agent_rank",
    "seeds",
    "reached",
    "tabular_reached",
    "diverged",
    "iqm_steps",
    "iqm_low",
    "iqm_high",
    "tabular_iqm_steps",
    "tabular_low",
    "tabular_high",
    "ratio",
    "ratio_low",
    "ratio_high",
    "verdict",
    "iqm_final_gap",
    "tabular_iqm_final_gap",
    "iqm_sup_error",
    "n_params",
    "table_params",
)
"""Columns of ``verdicts.csv``: one row per cell (instance x tensor-agent set-up)."""


def verdict(tensor: tuple[float, float], tabular: tuple[float, float], reached: bool) -> str:
    """Return ``faster``, ``slower``, ``equal`` or ``neither`` from two (low, high) intervals."""
    if not reached:
        return "neither"
    if tensor[1] < tabular[0]:
        return "faster"
    if tensor[0] > tabular[1]:
        return "slower"
    return "equal"


def verdict_rows(rows: Sequence[dict], eval_steps: int, seed: int = 0) -> list[dict]:
    """Compare every tensor-agent cell of ``rows`` (``runs.csv``) with tabular on its instance.

    Parameters
    ----------
    rows : sequence of dict
        Rows of ``runs.csv`` (values as read back, strings allowed).
    eval_steps : int
        Environment steps between evaluations (censoring, see the module docstring).
    seed : int
        Seed of the bootstrap.

    Returns
    -------
    list of dict
        Rows with the keys of `VERDICT_COLUMNS`, instances in order of appearance.
    """
    cells: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        cells[(row["instance"], row["agent_key"])].append(row)
    out = []
    for (instance, key), group in cells.items():
        if key == "tabular" or (instance, "tabular") not in cells:
            continue
        table = cells[(instance, "tabular")]
        mine = iqm_interval(censored_steps(group, eval_steps), seed=seed)
        theirs = iqm_interval(censored_steps(table, eval_steps), seed=seed)
        reached = sum(int(r["reached"]) for r in group)
        table_reached = sum(int(r["reached"]) for r in table)
        first = group[0]
        out.append({
            "instance": instance,
            "kind": first["kind"],
            "qstar_rank": first["qstar_rank"],
            "state_modes": first["state_modes"],
            "gamma": first["gamma"],
            "agent_key": key,
            "agent": first["agent"],
            "reading": first["reading"],
            "agent_rank": first["agent_rank"],
            "seeds": len(group),
            "reached": reached,
            "tabular_reached": table_reached,
            "diverged": sum(int(r.get("diverged") or 0) for r in group),
            "iqm_steps": mine.iqm,
            "iqm_low": mine.low,
            "iqm_high": mine.high,
            "tabular_iqm_steps": theirs.iqm,
            "tabular_low": theirs.low,
            "tabular_high": theirs.high,
            "ratio": mine.iqm / theirs.iqm,
            "ratio_low": mine.low / theirs.high,
            "ratio_high": mine.high / theirs.low,
            "verdict": verdict(
                (mine.low, mine.high), (theirs.low, theirs.high), reached + table_reached > 0
            ),
            "iqm_final_gap": _iqm(group, "final_gap"),
            "tabular_iqm_final_gap": _iqm(table, "final_gap"),
            "iqm_sup_error": _iqm(group, "sup_error"),
            "n_params": first["n_params"],
            "table_params": first["table_params"],
        })  # fmt: skip
    return out


def _iqm(rows: Sequence[dict], column: str) -> float:
    return float(iqm(np.array([float(r[column]) for r in rows])))
