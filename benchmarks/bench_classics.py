"""The stock Gymnasium classics out of the box: greedy return beside random and the optimum.

Every environment trains with its defaults (`rl.problems.from_gymnasium`: observed grid
bounds, estimated reward bound, episode cap) through the same runner as
``python -m rl.train``, with TEQL (stable and released readings), TLR and
tabular Q-learning, B seeds each, at a small budget per environment
(`BUDGETS`). After training, each seed's greedy policy plays evaluation
episodes (`rl.evaluate.evaluate`, evaluation seed 0); the table shows the
mean ± std over seeds of those per-seed means, beside uniformly random actions
on the same evaluation episodes and the environment's known optimum
(`OPTIMA`), and the training wall time. Run it niced from the repository root:

    nice -n 10 python -m benchmarks classics [--seeds 4] [--scale 1.0] [--markdown FILE]

``--scale`` multiplies every training budget (0.5 halves it);
``--envs``/``--agents`` select rows; ``--set KEY=VALUE`` and ``--env-option
KEY=VALUE`` (repeatable, as in ``python -m rl.train``) change a setting in every row,
named in the agent column, to measure a candidate default beside the table:

    nice -n 10 python -m benchmarks classics --agents "TEQL stable" --set alpha0=1.0

``--preset tuned`` trains every tuned preset instead (`rl.experiments.tuned_presets`:
each environment's file, each agent in it, at the budget it was tuned at), and TEQL
with its defaults at the budget of TEQL's preset (`DEFAULT`), on seeds
`TUNED_SEED` onwards, disjoint from the tuning seeds 0-3, with greedy evaluations
during training (`TUNED_EVALUATIONS`), and prints per environment and agent: the
final greedy return (mean ± std and IQM with its 95% interval over seeds,
`rl.experiments.stats.iqm_interval`; three decimals where random play scores
below 1 in size), the seeds whose final greedy return reaches the threshold
(`threshold`), the environment steps each seed took to reach it in an evaluation
during training (median over seeds, a seed that never does counting as never, and
the fraction that does), the steps trained, the wall time, the core-seconds (the
process's CPU time over all its threads, `time.process_time`), and rl-zoo3's published
result (`RL_ZOO`, quoted, not run). ``--scale`` multiplies each preset's episodes
(``--scale 10``: ten times the budget). ``--keep-best`` trains with ``keep_best``
(`rl.runs.training.BestStates`; evaluations `BEST_EVALUATIONS`) and adds `BEST_COLUMNS`: each seed's
best-evaluated state played on the same fresh episodes as its last state;
``--eval-episodes N`` replaces the greedy episodes of each evaluation. ``--csv
FILE`` also writes it as a CSV table:

    nice -n 10 python -m benchmarks classics --preset tuned --seeds 10 --csv FILE
"""

from __future__ import annotations

import argparse
import copy
import csv
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from rl.evaluate import evaluate
from rl.experiments.presets import preset_config
from rl.experiments.stats import iqm_interval
from rl.experiments.tuned_presets import TUNED, tuned_preset, tuned_presets
from rl.loop.runner import episode_seed
from rl.runs.config import TrainConfig, parse_assignment
from rl.runs.load import LoadedRun, load_run
from rl.runs.metrics import read_metrics
from rl.runs.training import train

BUDGETS = {  # environment -> (training episodes per seed, greedy evaluation episodes)
    "CartPole-v1": (300, 20),
    "MountainCar-v0": (200, 10),
    "Acrobot-v1": (100, 10),
    "Pendulum-v1": (100, 10),
    "Taxi-v3": (500, 20),
    "FrozenLake-v1": (1000, 100),
    "CliffWalking-v1": (300, 10),
    "Blackjack-v1": (2000, 500),
}
"""Training episodes per seed and greedy evaluation episodes per seed."""

OPTIMA = {
    "CartPole-v1": "500 (the time limit)",
    "MountainCar-v0": "about -100 (solved at -110)",
    "Acrobot-v1": "about -60 to -80 (solved at -100)",
    "Pendulum-v1": "about -140 to -150",
    "Taxi-v3": "about 8 (solved at 8)",
    "FrozenLake-v1": "about 0.74 (solved at 0.70)",
    "CliffWalking-v1": "-13",
    "Blackjack-v1": "about -0.05 (basic strategy)",
}
"""Known optimal mean return: the exact value where it is known (CartPole's cap,
CliffWalking's shortest safe path), else a literature value and the
``reward_threshold`` of the Gymnasium spec ("solved at")."""

AGENTS = {  # row label -> (agent, reading)
    "TEQL stable": ("teql", "stable"),
    "TEQL released": ("teql", "released"),
    "TLR": ("tlr", None),
    "tabular": ("tabular", None),
}

TUNED_SEED = 100
"""First training seed (and the evaluation seed) of the tuned rows: the searches trained
seeds 0-3."""

TUNED_EVALUATIONS = {  # environment -> (evaluate after every k-th episode, greedy episodes)
    "CartPole-v1": (5, 1),
    "MountainCar-v0": (5, 1),
    "Acrobot-v1": (5, 1),
    "Pendulum-v1": (5, 1),
    "Taxi-v4": (10, 10),
    "FrozenLake-v1": (50, 50),
    "CliffWalking-v1": (5, 1),
    "Blackjack-v1": (100, 100),
}
"""Greedy evaluations during a tuned row's training, for the steps to the threshold."""

BEST_EVALUATIONS = {env: (10, 5) for env in ("CartPole-v1", "MountainCar-v0", "Acrobot-v1")}
"""Evaluations of ``--keep-best`` where they differ from `TUNED_EVALUATIONS`: five greedy
episodes choose the kept state (`rl.runs.training.BestStates`) less by luck than one."""

NO_SPEC_THRESHOLD = {"CliffWalking-v1": -13.0}
"""Thresholds where the Gymnasium spec has no ``reward_threshold``: CliffWalking's optimum."""

RL_ZOO = {
    "CartPole-v1": "DQN 500 in 50k steps",
    "MountainCar-v0": "DQN -100.8 in 120k steps",
    "Acrobot-v1": "DQN -76.6 in 100k steps",
    "Pendulum-v1": "SAC -157 in 20k steps",
}
"""rl-zoo3's published tuned results (its benchmark table), quoted as a reference."""

DEFAULT = "teql-default"
"""The ``--agents`` name of the tuned table's row of TEQL with its defaults (no preset)."""

_LABELS = {"teql": "TEQL stable", "tlr": "TLR", "tabular": "tabular",
           "dqn": "DQN (rl-zoo3 settings)", DEFAULT: "TEQL default"}  # fmt: skip


def _installed(env_id: str) -> str:
    """Return ``env_id``, or its newest registered version (Taxi-v3 became Taxi-v4)."""
    import gymnasium

    if env_id in gymnasium.registry:
        return env_id
    name = env_id.rsplit("-v", 1)[0]
    versions = [s.version for s in gymnasium.registry.values() if s.name == name and s.version]
    return f"{name}-v{max(versions)}"


def random_returns(problem, episodes: int, seed: int = 0) -> np.ndarray:
    """Undiscounted returns of uniformly random actions on the evaluation episodes."""
    env = problem.make_env()
    space = copy.deepcopy(env.action_space)
    space.seed(seed)
    returns = np.zeros(episodes)
    for k in range(episodes):
        env.reset(seed=episode_seed(seed, k))
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(space.sample())
            returns[k] += float(reward)
            done = terminated or truncated
    env.close()
    return returns


def run_row(
    env_id: str,
    label: str,
    seeds: int,
    episodes: int,
    eval_episodes: int,
    root: Path,
    agent_params: dict | None = None,
    env_options: dict | None = None,
):
    """Train one agent on one environment and return (per-seed greedy means, wall time).

    ``agent_params`` and ``env_options`` change those settings from the defaults.
    """
    agent, reading = AGENTS[label]
    out = root / f"{env_id}-{label.replace(' ', '-')}"
    config = TrainConfig(
        env=env_id,
        agent=agent,
        reading=reading,
        out=str(out),
        seeds=seeds,
        episodes=episodes,
        eval_every=0,
        checkpoint_every=episodes,
        agent_params=agent_params or {},
        env_options=env_options or {},
    )
    started = time.perf_counter()
    train(config)
    wall = time.perf_counter() - started
    run = load_run(out)
    means = [evaluate(run, episodes=eval_episodes, replica=i).summary.mean for i in range(seeds)]
    return np.array(means), wall, run.problem


def scaled(episodes: float, scale: float) -> int:
    """Return the training budget ``episodes`` under ``--scale``: rounded, at least 1."""
    return max(1, round(episodes * scale))


def threshold(env_id: str) -> float | None:
    """Return the return that counts as solving ``env_id``: its spec's, or `NO_SPEC_THRESHOLD`."""
    import gymnasium

    spec_value = gymnasium.spec(env_id).reward_threshold
    return NO_SPEC_THRESHOLD.get(env_id, spec_value)


def steps_to_threshold(table: dict, level: float) -> list[float]:
    """Return, per seed of a run's metrics, the training steps done when an evaluation first
    reached ``level`` (inf if none did)."""
    steps = []
    for seed in np.unique(table["seed"]):
        rows = table["seed"] == seed
        done = np.cumsum(table["length"][rows])
        reached = np.flatnonzero(table["greedy_return"][rows] >= level)
        steps.append(float(done[reached[0]]) if reached.size else math.inf)
    return steps


TUNED_COLUMNS = (
    "environment", "agent", "episodes x seeds", "steps per seed",
    "greedy return, mean ± std", "greedy return, IQM [95% CI]", "random", "threshold",
    "seeds at it at the end", "steps to threshold, median", "seeds reaching it",
    "wall time (s)", "core-seconds", "rl-zoo3 (published)",
)  # fmt: skip

BEST_COLUMNS = (
    "best state, mean ± std", "best state, IQM [95% CI]", "seeds at it, best state",
    "best state's episode, median",
)  # fmt: skip
"""The columns ``--keep-best`` adds: each seed's best-evaluated state, played afresh."""


def _returns(means: np.ndarray, digits: int) -> list[str]:
    """Mean ± std and IQM [95% CI] over seeds of their greedy returns."""
    interval = iqm_interval(means)
    return [
        f"{means.mean():.{digits}f} ± {means.std():.{digits}f}",
        f"{interval.iqm:.{digits}f} [{interval.low:.{digits}f}, {interval.high:.{digits}f}]",
    ]


def _at(means: np.ndarray, level: float | None) -> str:
    return "-" if level is None else f"{(means >= level).sum()}/{means.size}"


def tuned_row(
    env_id: str,
    agent: str,
    seeds: int,
    root: Path,
    scale: float = 1.0,
    keep_best: bool = False,
    eval_episodes: int | None = None,
) -> list[str]:
    """Train the tuned preset of ``agent`` on ``env_id`` and return its table row.

    ``agent`` `DEFAULT`: TEQL with its defaults, at the episodes of TEQL's preset.
    ``scale`` multiplies the preset's training episodes. ``keep_best`` trains with
    ``keep_best`` (evaluations `BEST_EVALUATIONS`) and adds `BEST_COLUMNS`.
    ``eval_episodes`` replaces the greedy episodes of each evaluation during training.
    """
    every, per_evaluation = TUNED_EVALUATIONS[env_id]
    if keep_best:
        every, per_evaluation = BEST_EVALUATIONS.get(env_id, (every, per_evaluation))
    per_evaluation = per_evaluation if eval_episodes is None else eval_episodes
    out = root / f"{env_id}-{agent}"
    preset_agent = "teql" if agent == DEFAULT else agent
    episodes = scaled(tuned_preset(env_id, preset_agent)["episodes"], scale)
    common = {"seeds": seeds, "seed": TUNED_SEED, "episodes": episodes, "eval_every": every,
              "eval_episodes": per_evaluation, "checkpoint_every": 10**9,
              "keep_best": keep_best}  # fmt: skip
    if agent == DEFAULT:
        config = TrainConfig(env=env_id, agent="teql", out=str(out), **common)
    else:
        config = preset_config(TUNED, env=env_id, agent=agent, out=str(out), **common)
    started, cpu_started = time.perf_counter(), time.process_time()
    train(config)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    run = load_run(out)
    final = next(value for key, value in BUDGETS.items() if _installed(key) == env_id)[1]

    def played(run: LoadedRun) -> np.ndarray:
        return np.array(
            [
                evaluate(run, episodes=final, seed=TUNED_SEED, replica=i).summary.mean
                for i in range(seeds)
            ]
        )

    means = played(run)
    table = read_metrics(out / "metrics.csv")
    level = threshold(env_id)
    reach, share = "-", "-"
    if level is not None:
        steps = steps_to_threshold(table, level)
        median = float(np.median(steps))
        reach = f"{median:,.0f}" if math.isfinite(median) else "not by half"
        share = f"{np.isfinite(steps).sum()}/{seeds}"
    random_mean = random_returns(run.problem, final, TUNED_SEED).mean()
    digits = 3 if abs(random_mean) < 1 else 2
    row = [
        env_id, _LABELS[agent], f"{config.episodes} x {seeds}",
        f"{table['length'].sum() / seeds:,.0f}", *_returns(means, digits),
        f"{random_mean:.{digits}f}", "-" if level is None else f"{level:g}", _at(means, level),
        reach, share, f"{wall:.1f}", f"{cpu:.1f}", RL_ZOO.get(env_id, "-"),
    ]  # fmt: skip
    if keep_best:
        best = load_run(out, best=True)
        kept = played(best)
        when = float(np.median(best.best_episodes))
        row += [*_returns(kept, digits), _at(kept, level), f"{when:g}"]
    return row


def tuned_main(args: argparse.Namespace) -> None:
    """Print (and optionally write as CSV) the table of the tuned presets."""
    columns = (*TUNED_COLUMNS, *BEST_COLUMNS) if args.keep_best else TUNED_COLUMNS
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    print(lines[0], flush=True)
    rows = []
    envs = args.envs if args.envs is not None else list(tuned_presets())
    with tempfile.TemporaryDirectory() as tmp:
        for env_id, agents in tuned_presets().items():
            for agent in [*agents, DEFAULT] if "teql" in agents else agents:
                if env_id not in envs or (args.agents is not None and agent not in args.agents):
                    continue
                row = tuned_row(
                    env_id, agent, args.seeds, Path(tmp), args.scale, args.keep_best,
                    args.eval_episodes,
                )  # fmt: skip
                rows.append(row)
                lines.append("| " + " | ".join(rows[-1]) + " |")
                print(lines[-1], flush=True)
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n", encoding="utf-8")
    if args.csv:
        with open(args.csv, "w", newline="", encoding="utf-8") as handle:
            csv.writer(handle, lineterminator="\n").writerows([columns, *rows])


def main(argv: list[str] | None = None) -> None:
    """Print (and optionally write) the table of greedy returns."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=4, help="seeds B per agent (default 4)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply training budgets")
    parser.add_argument("--envs", nargs="*", help="environments (default all)")
    parser.add_argument(
        "--agents", nargs="*", help="row labels, or agents with --preset tuned (default all)"
    )
    parser.add_argument("--markdown", metavar="FILE", help="also write the table there")
    parser.add_argument(
        "--preset", choices=[TUNED], help="train the tuned presets (their budgets) instead"
    )
    parser.add_argument("--csv", metavar="FILE", help="with --preset tuned: write the table there")
    parser.add_argument(
        "--keep-best",
        action="store_true",
        help="with --preset tuned: train with keep_best and add each seed's best-evaluated state",
    )
    parser.add_argument(
        "--eval-episodes",
        type=int,
        help="with --preset tuned: greedy episodes of each evaluation during training "
        "(default per environment)",
    )
    for flag, what in (("--set", "an agent parameter"), ("--env-option", "a problem option")):
        parser.add_argument(
            flag,
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help=f"change {what} in every row (repeatable); VALUE is read as JSON",
        )
    args = parser.parse_args(argv)
    if args.preset == TUNED:
        tuned_main(args)
        return
    args.envs = list(BUDGETS) if args.envs is None else args.envs
    args.agents = list(AGENTS) if args.agents is None else args.agents
    agent_params = dict(parse_assignment(text) for text in args.set)
    env_options = dict(parse_assignment(text) for text in args.env_option)
    changed = ", ".join([*args.set, *args.env_option])
    lines = [
        f"| environment | agent | episodes x seeds | greedy return (mean ± std over "
        f"{args.seeds} seeds) | random | known optimum | wall time (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    print(lines[0], flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for env_id in args.envs:
            budget, eval_episodes = BUDGETS[env_id]
            installed = _installed(env_id)
            episodes = scaled(budget, args.scale)
            random_mean = None
            for label in args.agents:
                means, wall, problem = run_row(
                    installed, label, args.seeds, episodes, eval_episodes, Path(tmp),
                    agent_params, env_options,
                )  # fmt: skip
                if random_mean is None:
                    random_mean = random_returns(problem, eval_episodes).mean()
                line = (
                    f"| {installed} | {label}{', ' + changed if changed else ''} | "
                    f"{episodes} x {args.seeds} | "
                    f"{means.mean():.2f} ± {means.std():.2f} | {random_mean:.2f} | "
                    f"{OPTIMA[env_id]} | {wall:.1f} |"
                )
                lines.append(line)
                print(line, flush=True)
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
