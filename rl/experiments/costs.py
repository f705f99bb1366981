"""What a line's task of ``python -m rl.reproduce`` costs: estimates from measured runs.

The estimates order the tasks (longest first), drive the time left that a
run prints and ``python -m rl.reproduce paper --plan``'s forecast. Each is
core seconds on one core of the 2-core development machine, from task walls
measured at the paper's scale (the paper's episodes, mostly 100 seeds; one
core at ``nice 19`` beside another run, so upper bounds), kept as data in
``walls.csv`` and ``step_costs.csv`` beside this module with the machine, date
and commit of each (see the "What it costs" section of the reproduction guide):

- a line measured in its own reading (`MEASURED_WALLS`) costs its measured
  wall, scaled to the task's episodes (linearly) and seeds (`seed_factor`);
- any other line costs its agent's measured cost per replica-step in the
  released reading (`STEP_COST`), over its episodes counted at full length
  plus one greedy episode in ten, and scaled to its seeds alike.

A reading learns its own way, so its episodes end at other times: the paper
reading's TEQL on CartPole costs a tenth of the released one, and its DQN
four times as much; hence the table per reading. The tensor agents' cost is
linear in the seeds; DQN's and SAC's is not: a batched step of B replicas
has a fixed part (`SHARED_REPLICAS`), so a replica costs less among more.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from importlib import resources
from types import MappingProxyType

from rl.agents.readings import PAPER_TABLE

#: DQN's and SAC's lockstep step of B replicas costs about (k + B) times one replica's part:
#: k is this fixed part counted in replicas, fitted to ``python -m benchmarks deep`` (CartPole
#: widths, one thread, B = 10 and 100, the compiled kernels: DQN 149 and 560 microseconds per
#: lockstep step, SAC 314 and 1,670). Agents not listed have k = 0 (linear in seeds).
SHARED_REPLICAS: Mapping[str, float] = MappingProxyType({"dqn": 23.0, "sac": 11.0})

#: The seeds of a task at which `STEP_COST` holds (DQN and SAC cost less per replica-step
#: in a larger task, `SHARED_REPLICAS`).
STEP_COST_SEEDS = 100

WALLS_FILE = "walls.csv"
"""The measured task walls (package data of `rl.experiments`), one line per measured line:
``env, reading, line, wall_s, seeds, episodes, cpu, cores, date, commit`` (the commit that
recorded the wall)."""

STEP_COSTS_FILE = "step_costs.csv"
"""The released reading's seconds per replica-step (package data of `rl.experiments`):
``env, agent, seconds_per_replica_step, seeds, cpu, cores, date, commit``."""


def data_rows(name: str) -> list[dict[str, str]]:
    """Return the rows of the package data file ``name`` of `rl.experiments`."""
    text = resources.files("rl.experiments").joinpath(name).read_text(encoding="utf-8")
    return list(csv.DictReader(io.StringIO(text)))


def read_walls(rows: Iterable[Mapping[str, str]]) -> dict[tuple[str, str, str], tuple[float, int]]:
    """Return (environment, reading, line key) -> (core seconds, seeds) of walls.csv's ``rows``.

    Every wall is at the paper's episodes (`rl.agents.readings.PAPER_TABLE`); a row at
    other episodes is refused, so that a wall is never scaled from a partial run.
    """
    walls = {}
    for row in rows:
        env = row["env"]
        if int(row["episodes"]) != PAPER_TABLE[env]["episodes"]:
            raise ValueError(f"{WALLS_FILE}: {env}/{row['line']} is not at the paper's episodes.")
        walls[env, row["reading"], row["line"]] = (float(row["wall_s"]), int(row["seeds"]))
    return walls


def read_step_costs(rows: Iterable[Mapping[str, str]]) -> dict[str, dict[str, float]]:
    """Return environment -> agent -> seconds per replica-step of step_costs.csv's ``rows``."""
    costs: dict[str, dict[str, float]] = {}
    for row in rows:
        if int(row["seeds"]) != STEP_COST_SEEDS:
            raise ValueError(
                f"{STEP_COSTS_FILE}: {row['env']}/{row['agent']} is not at {STEP_COST_SEEDS} seeds."
            )
        costs.setdefault(row["env"], {})[row["agent"]] = float(row["seconds_per_replica_step"])
    return costs


#: Seconds per replica-step by environment and agent in the released reading, in a task of
#: `STEP_COST_SEEDS` seeds (`STEP_COSTS_FILE`): released lines' measured task walls at the
#: paper's scale over their replica-steps counted as full-length episodes plus one greedy
#: episode in ten. Highway's include the compiled twin's step. Agents not listed cost as TEQL.
STEP_COST: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {
        env: MappingProxyType(costs)
        for env, costs in read_step_costs(data_rows(STEP_COSTS_FILE)).items()
    }
)

#: Seconds per step that highway-env adds over the twin (a 1.7-hour task of one seed).
HIGHWAY_ENV_STEP = 11e-3

#: Measured task walls at the paper's episodes (`WALLS_FILE`): (environment, reading, line
#: key) -> (core seconds, seeds). Line keys as `rl.experiments.paper` names them, one key per
#: configuration (`SAME_LINE`); the reading is the one the agent used. Each is one core at
#: ``nice 19`` beside another run, so an upper bound; where a line was measured twice, the
#: larger wall, unless the code became faster since (then the later wall). TLR's four
#: released Pendulum levels were measured together and share that wall evenly.
MEASURED_WALLS: Mapping[tuple[str, str, str], tuple[float, int]] = MappingProxyType(
    read_walls(data_rows(WALLS_FILE))
)

#: (reading, line key) -> the line key of `rl.experiments.paper` with the same settings in
#: that reading, so the same cost: the ablation's lambda line that is TEQL's own lambda and
#: the sensitivity study's base grid (the problem's own) are the comparison's TEQL (the same
#: configuration; the released TEQL has lambda = 0).
SAME_LINE: Mapping[tuple[str, str], str] = MappingProxyType({
    ("paper", "teql-lam"): "teql",
    ("stable", "teql-lam"): "teql",
    ("released", "teql-lam0"): "teql",
    **{(reading, "teql-base"): "teql" for reading in ("paper", "released", "stable")},
})  # fmt: skip


def seed_factor(agent: str, seeds: int, measured_seeds: int) -> float:
    """Return what ``seeds`` replicas cost over what ``measured_seeds`` cost, as one task.

    (k + seeds) / (k + measured_seeds) with k = `SHARED_REPLICAS` of ``agent``
    (0 for the tensor agents: seeds / measured_seeds).
    """
    shared = SHARED_REPLICAS.get(agent, 0.0)
    return (shared + seeds) / (shared + measured_seeds)


def task_cost(
    env: str, reading: str, key: str, agent: str, episodes: int, seeds: int, engine: str
) -> float:
    """Return the estimated core seconds of one task: line ``key`` of ``agent`` on ``env``.

    ``reading`` is the agent's reading, ``episodes`` and ``seeds`` the task's,
    ``engine`` Highway's simulator (``"twin"`` or ``"reference"``, which adds
    highway-env's step, `HIGHWAY_ENV_STEP`). See the module docstring.
    """
    full = PAPER_TABLE[env]["episodes"]
    replica_steps = episodes * 1.1 * PAPER_TABLE[env]["steps"]
    measured = MEASURED_WALLS.get((env, reading, SAME_LINE.get((reading, key), key)))
    if measured is not None:
        wall, measured_seeds = measured
        cost = wall * (episodes / full) * seed_factor(agent, seeds, measured_seeds)
    else:
        costs = STEP_COST[env]
        calibrated = replica_steps * STEP_COST_SEEDS * costs.get(agent, costs["teql"])
        cost = calibrated * seed_factor(agent, seeds, STEP_COST_SEEDS)
    highway_env = env == "highway" and engine == "reference"
    return cost + (replica_steps * seeds * HIGHWAY_ENV_STEP if highway_env else 0.0)


#: Seconds of a training part of ``python -m rl.reproduce paper`` besides its training:
#: starting its process (imports, planning) and writing its summary and figures. Measured
#: on parts that copy or train little (``--episodes-scale 0.01``: 2 to 5 s).
PART_SECONDS = 5.0

#: Seconds per line of a part besides reading its rows: loading a copied line's checkpoint
#: to check it (`rl.runs.verify.verify_run`: up to 1.3 s for 100 tabular replicas) and
#: plotting the line.
LINE_SECONDS = 1.5

#: Seconds per ``metrics.csv`` row read and summarized (`rl.runs.metrics.read_metrics`,
#: 0.2 microseconds a row, then the pivot and the statistics of `rl.experiments.report`;
#: a finished 100-seed Pendulum part, 4M rows read twice, resumes in 9 s).
ROW_SECONDS = 0.5e-6


def postprocess_seconds(lines: int, copies: int, rows: int) -> float:
    """Return the core seconds a part spends besides training: ``lines`` of ``rows`` rows each.

    ``copies`` of the lines are copied from another part: checked first
    (`rl.runs.verify.verify_run` reads them whole), so their rows are read twice;
    the part's summary reads every line once. See `PART_SECONDS`, `LINE_SECONDS`,
    `ROW_SECONDS`.
    """
    return PART_SECONDS + LINE_SECONDS * lines + ROW_SECONDS * rows * (lines + copies)


def report_seconds(line_rows: int) -> float:
    """Return the core seconds of the whole paper's report over ``line_rows`` rows of lines.

    `rl.experiments.paper_report` reads every part's lines once more after the
    last part, ``line_rows`` rows in all, with one process start.
    """
    return PART_SECONDS + ROW_SECONDS * line_rows
