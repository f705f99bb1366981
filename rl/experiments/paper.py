"""The experiments of the paper's "Numerical Study", as data for `rl.reproduce`.

An `Experiment` names the environments it runs on and, per environment and
reading, the lines (`Line`) it draws, one agent with its overrides each.
`rl.reproduce.make_plan` turns them into tasks of `rl.experiments.executor`: the seeds of a
line run as replicas of one task (DQN's and SAC's too, which compute their
replicas together); every line on Highway, where the simulator dominates, runs
one task per seed, so that the executor's pool spreads them over its workers.
Tasks are ordered longest first.

Scale. ``--episodes-scale F`` trains ``round(F * E)`` episodes where ``E`` is
the paper's count (`rl.agents.readings.PAPER_TABLE`: Pendulum 40,000, CartPole and
Highway 10,000). No agent reads the total episode count (its schedules are per
step or per episode), so a shortened run is exactly a prefix of the full one
(tested). The final windows scale in proportion (`Experiment.window`).

The paper's numbers beside ours (`PAPER_FIGURE`, `RELEASED_RAW`,
`PAPER_ABLATION_STD`) are read off its text and captions and off
the authors' released code (docs/authors-code.md; figure values read off the paper's figures).

References
----------
TEQL paper, Section "Numerical Study": Figures fig:pendulum_cartpole,
fig:highway, fig:ablation_curve, fig:ablation_boxplot, fig:sensitivity,
fig:tlr_teql_sensitivity and Table tab:hyperparams.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rl.agents.param_formulas import cp_params
from rl.agents.readings import PAPER_TABLE, readings
from rl.problems.bundled import HIGHWAY_ENGINES

DEEP_AGENTS = ("dqn", "sac")
"""PyTorch agents: their seed count is ``--deep-seeds``."""

FULL_EPISODES: Mapping[str, int] = {env: col["episodes"] for env, col in PAPER_TABLE.items()}
"""The paper's training episodes per environment (Table tab:hyperparams)."""

LABELS = {
    "teql": "TEQL",
    "tlr": "TLR",
    "lora-vi": "LoRa-VI",
    "dqn": "DQN",
    "sac": "SAC",
    "tabular": "tabular Q (not in the paper)",
}


@dataclass(frozen=True)
class Line:
    """One plotted line: an agent with config overrides and problem options.

    Attributes
    ----------
    key : str
        Unique within an environment; the run directory ``ENV/KEY``.
    label : str
        Legend entry.
    agent : str
        Registered agent name.
    agent_params, env_options : mapping
        Overrides on top of the agent's reading (`rl.agents.readings.READINGS`).
    panel : str
        Which panel of a figure the line is drawn in ("" for one panel).
    """

    key: str
    label: str
    agent: str
    agent_params: Mapping[str, Any] = field(default_factory=dict)
    env_options: Mapping[str, Any] = field(default_factory=dict)
    panel: str = ""

    @property
    def deep(self) -> bool:
        """Whether this is a PyTorch agent."""
        return self.agent in DEEP_AGENTS


class Level(NamedTuple):
    """A discretization level of the sensitivity study (states | actions)."""

    name: str
    state_bins: tuple[int, ...]
    action_bins: int
    stated_params: int
    """Parameter count at rank 10 stated in the paper's caption / the issue."""

    def params(self, rank: int = 10) -> int:
        """Return R * sum(d_n) of this grid (P_CP)."""
        return cp_params(rank, (*self.state_bins, self.action_bins))


#: The sensitivity level that is the problem's own grid (the paper's, `PAPER_TABLE`).
BASE_LEVEL = "base"

#: Sensitivity levels (fig:sensitivity: "CartPole 300 to 2,800; Pendulum 200 to 2,000").
LEVELS: Mapping[str, tuple[Level, ...]] = {
    "cartpole": (
        Level("very coarse", (5, 5, 8, 8), 4, 300),
        Level("coarse", (8, 8, 15, 15), 8, 540),
        Level(BASE_LEVEL, (10, 10, 20, 20), 10, 700),
        Level("fine", (15, 15, 30, 30), 15, 1050),
        Level("very fine", (40, 40, 80, 80), 40, 2800),
    ),
    "pendulum": (
        Level("very coarse", (8, 8), 4, 200),
        Level("coarse", (15, 15), 8, 380),
        Level(BASE_LEVEL, (20, 20), 10, 500),
        Level("fine", (30, 30), 15, 750),
        Level("very fine", (80, 80), 40, 2000),
    ),
}


class PaperValue(NamedTuple):
    """A number of the paper (or of the authors' code) to put beside ours.

    ``episodes``: the run length it belongs to (None: any length, a plateau);
    ``window``: the final window it averages, in episodes (None: a point of a curve).
    """

    value: float
    std: float | None
    source: str
    episodes: int | None = None
    window: int | None = None


#: Greedy returns the paper's figures show (read off the figures; docs/authors-code.md).
PAPER_FIGURE: Mapping[tuple[str, str], PaperValue] = {
    ("cartpole", "teql"): PaperValue(
        88.0, None, "fig. pendulum_cartpole, read off at episode 1000", 1000
    ),
    ("pendulum", "teql"): PaperValue(98.0, None, "fig. pendulum_cartpole, read off (plateau)"),
    ("pendulum", "tlr"): PaperValue(95.0, None, "fig. pendulum_cartpole, read off (plateau)"),
}

#: The authors' released code, raw greedy returns, 8 seeds (docs/authors-code.md).
RELEASED_RAW: Mapping[tuple[str, str], PaperValue] = {
    ("cartpole", "teql"): PaperValue(
        76.1, 10.3, "released code, eps. 901-1000, 8 seeds", 1000, 100
    ),
    ("cartpole", "tlr"): PaperValue(60.1, 16.5, "released code, eps. 901-1000, 8 seeds", 1000, 100),
    ("pendulum", "teql"): PaperValue(
        88.7, 3.9, "released code, eps. 1801-2000, 8 seeds", 2000, 200
    ),
    ("pendulum", "tlr"): PaperValue(
        84.8, 11.5, "released code, eps. 1801-2000, 8 seeds", 2000, 200
    ),
}

#: fig:ablation_boxplot caption: std across runs of the final-window returns, lambda = 0 -> > 0.
PAPER_ABLATION_STD: Mapping[str, tuple[float, float]] = {
    "pendulum": (5.24, 1.30),
    "cartpole": (29.44, 0.28),
    "highway": (0.59, 0.12),
}


@dataclass(frozen=True)
class Experiment:
    """One experiment of the paper.

    Attributes
    ----------
    name : str
        Command name (``comparison``).
    figure : str
        The paper's figure(s) it reproduces.
    envs : tuple of str
        Environments it runs on.
    lines : callable
        ``lines(env) -> list[Line]``.
    window_episodes : callable
        ``window_episodes(env)``: the final window at full scale, in episodes.
    claims : tuple of str
        What the paper says about the figure (caption and text), quoted in the summary.
    box : bool
        Whether to draw box plots and the table of standard deviations (ablation).
    """

    name: str
    figure: str
    envs: tuple[str, ...]
    lines: Callable[[str], list[Line]]
    window_episodes: Callable[[str], int]
    claims: tuple[str, ...] = ()
    box: bool = False

    def episodes(self, env: str, scale: float) -> int:
        """Return the training episodes on ``env`` at ``scale`` (at least 1)."""
        return max(1, round(FULL_EPISODES[env] * scale))

    def window(self, env: str, scale: float) -> int:
        """Return the final window on ``env`` at ``scale``, in episodes (at least 1)."""
        return max(1, min(self.episodes(env, scale), round(self.window_episodes(env) * scale)))


def _agents(*names: str) -> Callable[[str], list[Line]]:
    return lambda env: [Line(name, LABELS[name], name) for name in names]


def _ablation(env: str) -> list[Line]:
    return [
        Line("tlr", "TLR", "tlr"),
        Line("teql-lam0", "TEQL, lambda = 0", "teql", {"lam": 0.0}),
        Line("teql-lam", "TEQL, lambda = 1e-3", "teql", {"lam": PAPER_TABLE[env]["lam"]}),
    ]


def _slug(name: str) -> str:
    return name.replace(" ", "-")


def _grid(level: Level) -> dict[str, Any]:
    """Return the problem options of ``level``: none for the base level, the problem's own grid.

    So the base line is the comparison's TEQL line (one configuration hash), and
    the whole-paper run trains it once (`rl.experiments.whole.share_lines`).
    """
    if level.name == BASE_LEVEL:
        return {}
    return {"state_bins": list(level.state_bins), "action_bins": level.action_bins}


def _sensitivity(env: str) -> list[Line]:
    return [
        Line(
            f"teql-{_slug(lv.name)}",
            f"TEQL {lv.name} ({lv.params()} params)",
            "teql",
            env_options=_grid(lv),
        )
        for lv in LEVELS[env]
    ]


def _sensitivity_tlr(env: str) -> list[Line]:
    lines = []
    for level in LEVELS[env]:
        if level.name == BASE_LEVEL:
            continue
        for agent in ("tlr", "teql"):
            lines.append(
                Line(
                    f"{agent}-{_slug(level.name)}",
                    LABELS[agent],
                    agent,
                    env_options=_grid(level),
                    panel=f"{level.name} ({level.params()} params)",
                )
            )
    return lines


def _tenth(env: str) -> int:
    return FULL_EPISODES[env] // 10


EXPERIMENTS: Mapping[str, Experiment] = {
    e.name: e
    for e in (
        Experiment(
            "comparison",
            "fig. pendulum_cartpole (learning curves, Pendulum and CartPole, five agents)",
            ("pendulum", "cartpole"),
            _agents("teql", "tlr", "lora-vi", "dqn", "sac", "tabular"),
            _tenth,
            (
                "CP tensor methods (TEQL, TLR) outperform matrix-based (LoRa-VI) and neural "
                "baselines (DQN, SAC) under matched parameter budgets.",
                "The TEQL-TLR gap widens from Pendulum to CartPole.",
            ),
        ),
        Experiment(
            "highway",
            "fig. highway (learning curves on Highway)",
            ("highway",),
            _agents("teql", "tlr", "dqn", "sac"),
            _tenth,
            (
                "TEQL reaches high performance around episode 5,000, approximately 2,000 "
                "episodes before TLR.",
                "DQN oscillates; SAC regresses after initial progress.",
            ),
        ),
        Experiment(
            "ablation",
            "figs. ablation_curve and ablation_boxplot (TLR, TEQL lambda = 0 and > 0)",
            ("pendulum", "cartpole", "highway"),
            _ablation,
            lambda env: 2000,
            (
                "Setting lambda > 0 reduces variance and achieves faster convergence across "
                "all environments.",
                "Std of the final average rewards, lambda = 0 -> > 0: Pendulum 5.24 -> 1.30, "
                "CartPole 29.44 -> 0.28, Highway 0.59 -> 0.12.",
            ),
            box=True,
        ),
        Experiment(
            "sensitivity",
            "fig. sensitivity (TEQL at five discretization levels)",
            ("cartpole", "pendulum"),
            _sensitivity,
            _tenth,
            (
                "Coarse discretization limits final performance; fine discretization allows "
                "near-optimal convergence. TEQL remains stable across all resolutions.",
            ),
        ),
        Experiment(
            "sensitivity-tlr",
            "fig. tlr_teql_sensitivity (TLR vs TEQL at four non-base levels)",
            ("cartpole", "pendulum"),
            _sensitivity_tlr,
            _tenth,
            (
                "At coarse granularity both methods are limited by B_R; at fine granularity "
                "TEQL converges faster with lower variance.",
            ),
        ),
    )
}


def experiment(name: str) -> Experiment:
    """Return the experiment ``name``.

    Raises
    ------
    ValueError
        In one line, naming the experiments, if there is none.
    """
    if name not in EXPERIMENTS:
        raise ValueError(
            f"Unknown experiment {name!r}; choose one of: {', '.join(EXPERIMENTS)} "
            "(python -m rl.reproduce --list)."
        )
    return EXPERIMENTS[name]


def reading_for(agent: str, wanted: str) -> str:
    """Return ``wanted`` if ``agent`` has that reading, else ``paper`` (``stable`` is TEQL's)."""
    return wanted if wanted in readings(agent) else "paper"


def describe_lines(lines: Sequence[Line]) -> str:
    """Return the lines' labels, comma separated (for ``--list``)."""
    return ", ".join(dict.fromkeys(f"{ln.label}" for ln in lines))


def add_highway_engine_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--highway-engine``: Highway's simulator, the compiled twin (default) or highway-env."""
    parser.add_argument(
        "--highway-engine",
        choices=HIGHWAY_ENGINES,
        default="twin",
        help="Highway's simulator: the compiled twin of highway-v0 (default) or highway-env",
    )
