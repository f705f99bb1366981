"""What a line's task of ``python -m rl.reproduce`` costs: estimates from measured runs.

The estimates order the tasks (longest first), drive the time left that a
run prints and ``python -m rl.reproduce paper --plan``'s forecast. Each is
core seconds on one core of the 2-core development machine, from task walls
measured at the paper's scale (the paper's episodes, mostly 100 seeds; one
core at ``nice 19`` beside another run, so upper bounds; the runs are listed
in ``docs/reproduce.md``, "What it costs at the paper's scale"):

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

from collections.abc import Mapping
from types import MappingProxyType

from rl.agents.readings import PAPER_TABLE

#: DQN's and SAC's lockstep step of B replicas costs about (k + B) times one replica's part:
#: k is this fixed part counted in replicas, fitted to ``python -m benchmarks deep`` (CartPole
#: widths, one thread, B = 10 and 100; session 22, with the compiled kernels: DQN 149 and 560
#: microseconds per lockstep step, SAC 314 and 1,670; it was 55 and 42 with the PyTorch
#: step). Agents not listed have k = 0 (linear in seeds).
SHARED_REPLICAS: Mapping[str, float] = MappingProxyType({"dqn": 23.0, "sac": 11.0})

#: The seeds of a task at which `STEP_COST` holds (DQN and SAC cost less per replica-step
#: in a larger task, `SHARED_REPLICAS`).
STEP_COST_SEEDS = 100

#: Seconds per replica-step by environment and agent in the released reading, in a task of
#: `STEP_COST_SEEDS` seeds: each released line's measured task wall at the paper's scale over
#: its replica-steps counted as full-length episodes plus one greedy episode in ten.
#: Highway's include the compiled twin's step. DQN's and SAC's are their 100-seed walls with
#: the compiled kernels of session 22 (`MEASURED_WALLS`; Highway's DQN, not measured again,
#: session 21's with the PyTorch step); TEQL's and TLR's on Pendulum and Highway and
#: LoRa-VI's and tabular Q-learning's (with compiled exploration) are their session-20
#: walls; the others are from sessions 9 to 15. Agents not listed cost as TEQL.
STEP_COST: Mapping[str, Mapping[str, float]] = MappingProxyType({
    "cartpole": {"teql": 3.2e-6, "tlr": 1.5e-6, "lora-vi": 1.9e-6, "tabular": 1.9e-6,
                 "dqn": 2.5e-6, "sac": 4.7e-6},
    "pendulum": {"teql": 2.6e-6, "tlr": 1.2e-6, "lora-vi": 1.3e-6, "tabular": 1.5e-6,
                 "dqn": 2.2e-6, "sac": 4.0e-6},
    "highway": {"teql": 4.9e-6, "tlr": 4.2e-6, "dqn": 2.4e-5, "sac": 2.3e-5},
})  # fmt: skip

#: Seconds per step that highway-env adds over the twin (a 1.7-hour seed task, session 8).
HIGHWAY_ENV_STEP = 11e-3

#: Measured task walls at the paper's episodes: (environment, reading, line key) ->
#: (core seconds, seeds). Line keys as `rl.experiments.paper` names them, one key per
#: configuration (`SAME_LINE`); the reading is the one the agent used. Where a line was
#: measured twice, the larger wall, but where the code became faster since: the stable
#: reading's Highway TEQL (2,338 s before the Highway twin played in the fused loop, 540 s
#: in session 20), and the DQN and SAC lines re-measured after their speed-ups, in session
#: 21 (the same results to the last digit) and session 22 (the compiled kernels: the same
#: results to seed noise). Each line's earlier and later walls are in ``docs/reproduce.md``
#: ("Session 21", "Session 22"). Sessions 9-22;
#: TLR's four released Pendulum levels were measured together (1,774 core-s) and share it
#: evenly.
MEASURED_WALLS: Mapping[tuple[str, str, str], tuple[float, int]] = MappingProxyType({
    ("cartpole", "released", "teql-very-coarse"): (69, 30),
    ("cartpole", "released", "teql-coarse"): (77, 30),
    ("cartpole", "released", "teql-fine"): (88, 30),
    ("cartpole", "released", "teql-very-fine"): (134, 30),
    ("cartpole", "released", "tlr-very-coarse"): (55, 30),
    ("cartpole", "released", "tlr-coarse"): (52, 30),
    ("cartpole", "released", "tlr-fine"): (54, 30),
    ("cartpole", "released", "tlr-very-fine"): (53, 30),
    ("cartpole", "released", "teql"): (147, 100),
    ("cartpole", "released", "tlr"): (72, 100),
    ("cartpole", "released", "teql-lam"): (375, 100),
    ("cartpole", "released", "lora-vi"): (208, 100),
    ("cartpole", "released", "tabular"): (211, 100),
    ("cartpole", "released", "dqn"): (270, 100),
    ("cartpole", "released", "sac"): (520, 100),
    ("cartpole", "paper", "teql"): (35, 100),
    ("cartpole", "paper", "teql-very-coarse"): (30, 100),
    ("cartpole", "paper", "teql-coarse"): (37, 100),
    ("cartpole", "paper", "teql-fine"): (80, 100),
    ("cartpole", "paper", "teql-very-fine"): (220, 100),
    ("cartpole", "paper", "teql-lam0"): (65, 100),
    ("cartpole", "paper", "tlr"): (74, 100),
    ("cartpole", "paper", "tlr-very-coarse"): (84, 100),
    ("cartpole", "paper", "tlr-coarse"): (70, 100),
    ("cartpole", "paper", "tlr-fine"): (76, 100),
    ("cartpole", "paper", "tlr-very-fine"): (90, 100),
    ("cartpole", "paper", "dqn"): (1073, 100),
    ("cartpole", "paper", "sac"): (523, 100),
    ("cartpole", "stable", "teql"): (189, 100),
    ("cartpole", "stable", "teql-very-coarse"): (369, 100),
    ("cartpole", "stable", "teql-coarse"): (148, 100),
    ("cartpole", "stable", "teql-fine"): (186, 100),
    ("cartpole", "stable", "teql-very-fine"): (614, 100),
    ("cartpole", "stable", "teql-lam0"): (158, 100),
    ("pendulum", "released", "teql"): (1124, 100),
    ("pendulum", "released", "teql-lam"): (760, 100),
    ("pendulum", "released", "teql-very-coarse"): (864, 100),
    ("pendulum", "released", "teql-coarse"): (414, 100),
    ("pendulum", "released", "teql-fine"): (562, 100),
    ("pendulum", "released", "teql-very-fine"): (741, 100),
    ("pendulum", "released", "tlr"): (515, 100),
    ("pendulum", "released", "tlr-very-coarse"): (444, 100),
    ("pendulum", "released", "tlr-coarse"): (444, 100),
    ("pendulum", "released", "tlr-fine"): (444, 100),
    ("pendulum", "released", "tlr-very-fine"): (444, 100),
    ("pendulum", "released", "lora-vi"): (564, 100),
    ("pendulum", "released", "tabular"): (646, 100),
    ("pendulum", "released", "dqn"): (985, 100),
    ("pendulum", "released", "sac"): (1758, 100),
    ("pendulum", "paper", "teql"): (212, 100),
    ("pendulum", "paper", "teql-very-coarse"): (131, 100),
    ("pendulum", "paper", "teql-coarse"): (136, 100),
    ("pendulum", "paper", "teql-fine"): (204, 100),
    ("pendulum", "paper", "teql-very-fine"): (275, 100),
    ("pendulum", "paper", "teql-lam0"): (306, 100),
    ("pendulum", "paper", "tlr"): (610, 100),
    ("pendulum", "paper", "tlr-very-coarse"): (335, 100),
    ("pendulum", "paper", "tlr-coarse"): (348, 100),
    ("pendulum", "paper", "tlr-fine"): (420, 100),
    ("pendulum", "paper", "tlr-very-fine"): (596, 100),
    ("pendulum", "paper", "dqn"): (497, 100),
    ("pendulum", "paper", "sac"): (1801, 100),
    ("pendulum", "stable", "teql"): (512, 100),
    ("pendulum", "stable", "teql-very-coarse"): (822, 100),
    ("pendulum", "stable", "teql-coarse"): (470, 100),
    ("pendulum", "stable", "teql-fine"): (568, 100),
    ("pendulum", "stable", "teql-very-fine"): (719, 100),
    ("pendulum", "stable", "teql-lam0"): (587, 100),
    ("highway", "released", "teql"): (270, 100),
    ("highway", "released", "teql-lam"): (196, 100),
    ("highway", "released", "tlr"): (232, 100),
    ("highway", "released", "dqn"): (1314, 100),
    ("highway", "released", "sac"): (1267, 100),
    ("highway", "paper", "teql"): (175, 100),
    ("highway", "paper", "teql-lam0"): (177, 100),
    ("highway", "paper", "dqn"): (3064, 100),
    ("highway", "paper", "sac"): (1115, 100),
    ("highway", "stable", "teql"): (540, 100),
    ("highway", "stable", "teql-lam0"): (730, 100),
})  # fmt: skip

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
#: on parts that copy or train little (``--episodes-scale 0.01``: 2 to 5 s, session 21).
PART_SECONDS = 5.0

#: Seconds per line of a part besides reading its rows: loading a copied line's checkpoint
#: to check it (`rl.runs.verify.verify_run`: up to 1.3 s for 100 tabular replicas) and
#: plotting the line.
LINE_SECONDS = 1.5

#: Seconds per ``metrics.csv`` row read and summarized (`rl.runs.metrics.read_metrics`,
#: 0.2 microseconds a row, then the pivot and the statistics of `rl.experiments.report`;
#: session 21: a finished 100-seed Pendulum part, 4M rows read twice, resumes in 9 s).
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
