"""The result tables behind "Does the paper reproduce?" and the checks decided from them.

The tables live in ``docs/results/`` (see `rl.experiments.results_page`):
``lines.csv`` (one row per measured line: part, environment, line key, reading,
seeds, episodes, final window, the final-window greedy return's mean and
standard deviation across seeds), ``checks.csv`` (checks whose quantity a
line's mean and standard deviation do not give, or whose seed bootstrap was
recorded), ``claims.csv`` (what each claim's verdicts mean) and ``rank.csv``
(the rank claim's CP energy of Q*).

Every check of `rl.experiments.claims.CLAIMS` is decided by that module's rule
(`rl.experiments.claims.decide`, `rl.experiments.claims.combine`). A check not in
``checks.csv`` gets a normal-theory 95% interval from its lines' means,
standard deviations and seeds: Welch's for a difference of means, the F
distribution's for a ratio of standard deviations, the chi-square
distribution's for one standard deviation, the delta method's for a
difference of log ratios.

References
----------
TEQL paper, Section "Numerical Study" (sec:experiments).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy import stats

from rl.agents.readings import PAPER_TABLE
from rl.experiments.claims import (
    CLAIMS,
    MIN_SEEDS,
    UNSURE,
    Check,
    Claim,
    LineKey,
    combine,
    decide,
)

READINGS = ("released", "paper", "stable")
"""The readings the page gives a verdict in, in its columns' order."""

PAPER_SEEDS = 100
"""The paper's runs per line ("Results aggregate 100 independent runs")."""


_Z = float(stats.norm.ppf(0.975))

CLOSED_FORM = ("diff", "gap", "ratio", "std")
"""Check kinds whose interval a line's mean, standard deviation and seeds give."""


class Line(NamedTuple):
    """One measured line: its key, reading, scale and final-window mean and std."""

    key: LineKey
    reading: str
    seeds: int
    episodes: int
    window: str
    mean: float
    std: float
    note: str
    shown: str = ""
    """``mean ± std`` as the table writes them."""


class Decided(NamedTuple):
    """A check decided in one reading: estimate, interval, verdict, scale and how."""

    check: Check
    reading: str
    estimate: float
    low: float
    high: float
    verdict: str
    seeds: int
    episodes: int
    full: bool
    how: str


class Tables(NamedTuple):
    """The committed tables the page is built from."""

    lines: Mapping[tuple[LineKey, str], Line]
    checks: Mapping[tuple[str, str], Mapping[str, str]]
    meanings: Mapping[str, str]
    rank: Sequence[Mapping[str, str]]


# ----------------------------------------------------------------------------- reading the tables


def _read(path: Path, columns: Sequence[str]) -> list[dict[str, str]]:
    """Return the rows of the CSV ``path``, refusing one without ``columns``."""
    if not path.is_file():
        raise ValueError(f"{path} is missing: restore it from the repository (git checkout).")
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in columns if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"{path} lacks the columns {', '.join(missing)}.")
        return list(reader)


def _number(row: Mapping[str, str], column: str, path: Path) -> float:
    text = row[column].strip()
    if not text:
        return math.nan
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{path}: {column} {text!r} is not a number.") from None


def read_tables(data: Path) -> Tables:
    """Return the tables in ``data`` (``docs/results``), checked; see the module docstring."""
    path = data / "lines.csv"
    lines = {}
    for row in _read(path, Line._fields[1:-1] + ("part", "env", "line")):
        key = (row["part"], row["env"], row["line"])
        if row["reading"] not in READINGS or row["env"] not in PAPER_TABLE:
            raise ValueError(f"{path}: unknown reading or environment in {row}.")
        lines[key, row["reading"]] = Line(
            key,
            row["reading"],
            int(_number(row, "seeds", path)),
            int(_number(row, "episodes", path)),
            row["window"],
            _number(row, "mean", path),
            _number(row, "std", path),
            row["note"],
            f"{row['mean']} ± {row['std']}",
        )
    path = data / "checks.csv"
    labels = {check.label for claim in CLAIMS for check in claim.checks}
    checks = {}
    for row in _read(path, ("reading", "check", "estimate", "low", "high", "seeds", "episodes")):
        if row["check"] not in labels:
            raise ValueError(f"{path}: {row['check']!r} is no check of rl.experiments.claims.")
        checks[row["reading"], row["check"]] = row
    path = data / "claims.csv"
    meanings = {row["claim"]: row["meaning"] for row in _read(path, ("claim", "meaning"))}
    rank = _read(data / "rank.csv", ("env", "gamma", "rank", "energy", "smallest_rank_90"))
    return Tables(lines, checks, meanings, rank)


# ----------------------------------------------------------------------------- deciding


def _interval(check: Check, found: Sequence[Line]) -> tuple[float, float, float]:
    """Return the estimate and normal-theory 95% interval of ``check`` on lines ``found``."""
    m = np.array([line.mean for line in found])
    s = np.array([line.std for line in found])
    n = np.array([line.seeds for line in found], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if check.quantity == "std-ratio":
            estimate = math.log(s[0] / s[1]) - math.log(s[2] / s[3])
            half = _Z * math.sqrt(float(np.sum(1.0 / (2.0 * (n - 1.0)))))
            return estimate, estimate - half, estimate + half
        if check.kind in ("diff", "gap"):
            signs = np.array([1.0, -1.0, -1.0, 1.0][: len(found)])
            estimate = float(signs @ m)
            half = _Z * math.sqrt(float(np.sum(s**2 / n)))
            return estimate, estimate - half, estimate + half
        if check.kind == "ratio":
            ratio = float(s[0] / s[1])
            low = ratio / math.sqrt(stats.f.ppf(0.975, n[0] - 1, n[1] - 1))
            high = ratio * math.sqrt(stats.f.ppf(0.975, n[1] - 1, n[0] - 1))
            return ratio, low, high
        if check.kind == "std":
            dof = n[0] - 1
            low = s[0] * math.sqrt(dof / stats.chi2.ppf(0.975, dof))
            high = s[0] * math.sqrt(dof / stats.chi2.ppf(0.025, dof))
            return float(s[0]), float(low), float(high)
    raise ValueError(f"No closed-form interval for {check.label!r}.")


def _full(env: str, seeds: int, episodes: int) -> bool:
    return seeds >= PAPER_SEEDS and episodes == PAPER_TABLE[env]["episodes"]


def decide_check(check: Check, reading: str, tables: Tables) -> Decided:
    """Return ``check`` decided in ``reading`` from ``tables`` (see the module docstring)."""
    env = check.lines[0][1]
    recorded = tables.checks.get((reading, check.label))
    if recorded is not None:
        path = Path("checks.csv")
        estimate, low, high = (_number(recorded, c, path) for c in ("estimate", "low", "high"))
        seeds, episodes = int(recorded["seeds"]), int(recorded["episodes"])
        verdict = decide(estimate, low, high, check.threshold, check.side)
        how = recorded.get("note", "") or "recorded"
        if seeds < MIN_SEEDS:
            verdict = UNSURE
        full = _full(env, seeds, episodes)
        return Decided(check, reading, estimate, low, high, verdict, seeds, episodes, full, how)
    found = [tables.lines.get((key, reading)) for key in check.lines]
    closed = check.quantity in ("final", "std-ratio") and check.kind in CLOSED_FORM
    if any(line is None for line in found) or not closed:
        missing = [
            f"{p}/{e}/{k}"
            for (p, e, k), line in zip(check.lines, found, strict=True)
            if line is None
        ]
        quantity = "drop" if check.kind == "drop" else check.quantity
        what = f"no line {', '.join(missing)}" if missing else f"`{quantity}` not kept"
        how = f"{what} in this reading"
        return Decided(check, reading, *(math.nan,) * 3, UNSURE, 0, 0, False, how)
    lines = [line for line in found if line is not None]
    estimate, low, high = _interval(check, lines)
    seeds = min(line.seeds for line in lines)
    episodes = min(line.episodes for line in lines)
    verdict = decide(estimate, low, high, check.threshold, check.side)
    if seeds < MIN_SEEDS:
        verdict = UNSURE
    full = all(_full(line.key[1], line.seeds, line.episodes) for line in lines)
    windows = sorted({line.window for line in lines})
    how = "normal theory" + (f"; windows differ ({', '.join(windows)})" if len(windows) > 1 else "")
    return Decided(check, reading, estimate, low, high, verdict, seeds, episodes, full, how)


def decide_claim(claim: Claim, reading: str, tables: Tables) -> tuple[str, list[Decided]]:
    """Return the claim's verdict in ``reading`` and its decided checks."""
    decided = [decide_check(check, reading, tables) for check in claim.checks]
    return combine([d.verdict for d in decided]), decided
