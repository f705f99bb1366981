"""Why a tuned TEQL preset misses its threshold: the grid, the rank, the horizon, the budget.

For each environment, TEQL's tuned preset (``python -m rl.train --env ENV --agent
teql --preset tuned``) trains through the same runner as ``python -m rl.train`` on
seeds `TUNED_SEED` onwards (disjoint from the tuning seeds 0-3), once as shipped
and once per changed factor:

- ``preset``: the preset as shipped, at its budget.
- ``grid``: tabular Q-learning on exactly the preset's grid (its ``env_options``),
  at `GRID_BUDGET` times the preset's episodes, with the preset's gamma and
  tabular Q-learning's defaults otherwise; whether the grid holds a policy that
  reaches the threshold, without the CP decomposition.
- ``rank``: the preset with its rank times each of `RANK_FACTORS`.
- ``horizon``: the preset with each gamma of `GAMMAS` that differs from its own.
- ``budget``: the preset at `LONGER_BUDGET` times its episodes.
- ``finer``: the preset with `FINER` times the bins of every observation
  component, at `LONGER_BUDGET` times its episodes (beside the ``budget`` row).
- ``together``: the preset with `FINER` times its rank at `LONGER_BUDGET` times its
  episodes, the two factors of the ``rank`` and ``budget`` rows at once, with its own
  step and with the first of `STEP_FACTORS` times it.
- ``step``: the preset with its initial step size ``alpha0`` times each of
  `STEP_FACTORS` (kept below the stable reading's limit 2) and, with the preset's
  own step, no step-size decay (``kappa`` 0).

Each row reports the final greedy return (each seed's mean over the greedy
episodes of `rl.evaluate.evaluate`, evaluation seed `TUNED_SEED`; mean ± std over
seeds), the seeds whose greedy return reaches the threshold, the steps trained and
the wall time; and, from the agent's visit counts N(s, a) at the end, the share of
the grid's states visited at least once (mean over seeds) and the share of the
states of those greedy episodes that had been visited fewer than `RARE_VISITS`
times in training. Run
it niced from the repository root:

    nice -n 10 python -m benchmarks classics_why [--envs CartPole-v1] [--seeds 4] [--csv FILE]

``--scale`` multiplies every row's episodes (a quick look; the table uses 1);
``--rows`` selects row kinds (`ROWS`).
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from benchmarks.bench_classics import BUDGETS, TUNED_SEED, scaled, threshold
from rl.experiments.presets import preset_config
from rl.experiments.tuned_presets import TUNED, tuned_preset
from rl.loop.runner import episode_seed
from rl.runs.config import TrainConfig
from rl.runs.load import LoadedRun, load_run
from rl.runs.metrics import read_metrics
from rl.runs.training import train

ENVS = ("CartPole-v1", "MountainCar-v0", "Acrobot-v1")
"""The environments whose TEQL preset misses its threshold, in the order they run."""

GRID_BUDGET = 10
"""Episodes of the ``grid`` row, in multiples of the preset's."""

LONGER_BUDGET = 3
"""Episodes of the ``budget`` row, in multiples of the preset's."""

RANK_FACTORS = (0.25, 0.5, 2.0)
"""Ranks of the ``rank`` rows, in multiples of the preset's."""

GAMMAS = (0.95, 0.99, 0.999)
"""Discounts of the ``horizon`` rows (the preset's own is its ``preset`` row)."""

FINER = 2
"""Bins of each observation component in the ``finer`` row, in multiples of the preset's."""

STEP_FACTORS = (0.5, 1.5)
"""Initial step sizes of the ``step`` rows, in multiples of the preset's."""

STEP_LIMIT = 1.95
"""The largest ``alpha0`` a ``step`` row takes: the stable reading's steps need it below 2."""

ROWS = ("preset", "grid", "rank", "horizon", "budget", "finer", "together", "step")
"""The row kinds, in the order they run."""

RARE_VISITS = 5
"""A greedy episode's state counts as rarely visited below this many training visits."""

COLUMNS = (
    "environment", "row", "setting", "episodes x seeds", "steps per seed",
    "greedy return, mean ± std", "threshold", "seeds at it at the end",
    "states visited", f"greedy states visited < {RARE_VISITS} times", "wall time (s)",
)  # fmt: skip


def greedy_episodes(run: LoadedRun, episodes: int, replica: int) -> tuple[float, list[int]]:
    """Play ``episodes`` greedy episodes of one replica as `rl.evaluate.evaluate` does.

    Returns
    -------
    tuple
        The mean undiscounted return and the flat grid state of every step played.
    """
    env = run.problem.make_env()
    dims = run.problem.state_dims
    returns, states = np.zeros(episodes), []
    for k in range(episodes):
        observation, _ = env.reset(seed=episode_seed(TUNED_SEED, k))
        done = False
        while not done:
            states.append(
                int(np.ravel_multi_index(run.problem.encode_observation(observation), dims))
            )
            action = run.policy(observation, replica)
            observation, reward, terminated, truncated, _ = env.step(action)
            returns[k] += float(reward)
            done = terminated or truncated
    env.close()
    return float(returns.mean()), states


def coverage(run: LoadedRun, states: list[list[int]]) -> tuple[float, float]:
    """Return the share of grid states visited in training (mean over replicas) and the share
    of ``states`` (replica i's greedy states in ``states[i]``) visited fewer than
    `RARE_VISITS` times."""
    visits = run.agent.visits_
    n_states = int(np.prod(run.problem.state_dims))
    if isinstance(visits, np.ndarray):  # tabular Q-learning: N(s, a) of shape (B, |S|, |A|)
        totals = visits.sum(axis=2)
        visited = int((totals > 0).sum())
    else:  # a tensor agent's `VisitTable`: a row per replica (dense) or visited pair (sparse)
        arrays = visits.arrays()
        keys, counts = np.arange(len(arrays.counts)), arrays.counts
        if arrays.row_keys.size:
            used = int(arrays.used[0])
            keys, counts = arrays.row_keys[:used], arrays.counts[:used]
        visited = len(np.unique(keys[counts.sum(axis=1) > 0]))
        totals = None
    rare = total = 0
    for i, replica_states in enumerate(states):
        played = np.asarray(replica_states, dtype=np.int64)
        if totals is not None:
            seen = totals[i, played]
        else:
            seen = np.array(
                [visits.rows(np.full(run.replicas, s, np.int64)).totals[i] for s in played]
            )
        rare += int((seen < RARE_VISITS).sum())
        total += len(played)
    return visited / (n_states * run.replicas), rare / total


def run_row(env_id: str, name: str, setting: str, config: TrainConfig, level: float) -> list[str]:
    """Train ``config``, evaluate every seed greedily and return the table row."""
    started = time.perf_counter()
    train(config)
    wall = time.perf_counter() - started
    run = load_run(config.out)
    final = BUDGETS[env_id][1]
    results = [greedy_episodes(run, final, i) for i in range(config.seeds)]
    means = np.array([mean for mean, _ in results])
    share, rare_share = coverage(run, [states for _, states in results])
    steps = read_metrics(Path(config.out) / "metrics.csv")["length"].sum() / config.seeds
    return [
        env_id, name, setting, f"{config.episodes} x {config.seeds}", f"{steps:,.0f}",
        f"{means.mean():.2f} ± {means.std():.2f}", f"{level:g}",
        f"{(means >= level).sum()}/{config.seeds}", f"{share:.1%}", f"{rare_share:.1%}",
        f"{wall:.1f}",
    ]  # fmt: skip


def env_rows(env_id: str, seeds: int, scale: float, rows: list[str], root: Path):
    """Yield the table rows of kinds ``rows`` of one environment, trained under ``root``."""
    preset = tuned_preset(env_id, "teql")
    episodes, params = preset["episodes"], preset["agent_params"]
    level = threshold(env_id)
    common = {"seeds": seeds, "seed": TUNED_SEED, "eval_every": 0, "checkpoint_every": 10**9}

    def teql(tag: str, factor: float = 1.0, env_options=None, **agent_params) -> TrainConfig:
        return preset_config(
            TUNED, env=env_id, agent="teql", out=str(root / f"{env_id}-{tag}"),
            episodes=scaled(episodes * factor, scale), agent_params=agent_params,
            env_options=env_options or {}, **common,
        )  # fmt: skip

    rank, gamma = params["rank"], params["gamma"]
    if "preset" in rows:
        yield run_row(env_id, "preset", f"rank {rank}, gamma {gamma:g}", teql("preset"), level)
    if "grid" in rows:
        bins = preset["env_options"]["state_bins"]
        grid = TrainConfig(
            env=env_id, agent="tabular", out=str(root / f"{env_id}-grid"),
            episodes=scaled(episodes * GRID_BUDGET, scale),
            env_options=preset["env_options"],
            agent_params={"gamma": gamma, "max_entries": max(10**6, int(np.prod(bins)) * 3)},
            **common,
        )  # fmt: skip
        setting = f"tabular Q-learning, {GRID_BUDGET}x episodes"
        yield run_row(env_id, "grid", setting, grid, level)
    for factor in RANK_FACTORS if "rank" in rows else ():
        changed = max(1, round(rank * factor))
        yield run_row(
            env_id, "rank", f"rank {changed}", teql(f"rank{changed}", rank=changed), level
        )
    for value in GAMMAS if "horizon" in rows else ():
        if value != gamma:
            config = teql(f"gamma{value}", gamma=value)
            yield run_row(env_id, "horizon", f"gamma {value:g}", config, level)
    if "budget" in rows:
        config = teql("budget", LONGER_BUDGET)
        yield run_row(env_id, "budget", f"{LONGER_BUDGET}x episodes", config, level)
    if "finer" in rows:
        bins = [FINER * n for n in preset["env_options"]["state_bins"]]
        config = teql("finer", LONGER_BUDGET, env_options={"state_bins": bins})
        setting = f"{FINER}x bins ({bins[0]} each), {LONGER_BUDGET}x episodes"
        yield run_row(env_id, "finer", setting, config, level)
    for factor in (1.0, STEP_FACTORS[0]) if "together" in rows else ():
        changed, alpha0 = FINER * rank, params["alpha0"] * factor
        config = teql(f"together{factor}", LONGER_BUDGET, rank=changed, alpha0=alpha0)
        setting = f"rank {changed}, {LONGER_BUDGET}x episodes"
        setting += f", alpha0 {alpha0:.3g}" if factor != 1.0 else ""
        yield run_row(env_id, "together", setting, config, level)
    for factor in STEP_FACTORS if "step" in rows else ():
        alpha0 = min(STEP_LIMIT, params["alpha0"] * factor)
        config = teql(f"step{factor}", alpha0=alpha0)
        yield run_row(env_id, "step", f"alpha0 {alpha0:.3g}", config, level)
    if "step" in rows:
        config = teql("kappa0", kappa=0.0)
        yield run_row(env_id, "step", f"alpha0 {params['alpha0']:g}, kappa 0", config, level)


def main(argv: list[str] | None = None) -> None:
    """Print (and optionally write as CSV) the table of rows per environment."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--envs",
        nargs="*",
        default=list(ENVS),
        choices=ENVS,
        metavar="ENV",
        help=f"environments, any of {', '.join(ENVS)} (default all)",
    )
    parser.add_argument("--seeds", type=int, default=4, help="seeds per row (default 4)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every row's episodes")
    parser.add_argument(
        "--rows",
        nargs="*",
        default=list(ROWS),
        choices=ROWS,
        metavar="ROW",
        help=f"row kinds, any of {', '.join(map(repr, ROWS))} (default all)",
    )
    parser.add_argument("--csv", metavar="FILE", help="also write the table there")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rows = (
            row
            for env_id in args.envs
            for row in env_rows(env_id, args.seeds, args.scale, args.rows, Path(tmp))
        )
        print_table(COLUMNS, rows, args.csv)


def print_table(columns: Sequence[str], rows: Iterable[list[str]], path: str | None) -> None:
    """Print ``rows`` as Markdown table rows as they come and, with ``path``, write the
    table as CSV there after every row, so that a stopped run keeps the rows it made."""
    print("| " + " | ".join(columns) + " |", flush=True)
    done = []
    for row in rows:
        done.append(row)
        print("| " + " | ".join(row) + " |", flush=True)
        if path:
            with open(path, "w", newline="", encoding="utf-8") as handle:
                csv.writer(handle, lineterminator="\n").writerows([columns, *done])


if __name__ == "__main__":
    main()
