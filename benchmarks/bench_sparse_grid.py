"""Sparse rewards: TEQL's defaults on goal grids of several sizes and slip rates.

Every grid is the bundled ``goalgrid`` (`rl.envs.goal_grid.GoalGrid`: start (0, 0),
+10 at the far corner, -0.1 a step, 200 steps at most) with its size and slip
changed through ``env_kwargs``. Each row trains one setting (`SETTINGS`) for
`EPISODES` episodes on B seeds through the same runner as ``python -m rl.train``,
then plays `GREEDY_EPISODES` greedy episodes per seed (`rl.evaluate.evaluate`,
evaluation seed 0) and reports the mean ± std over seeds, the worst seed, and the
seeds whose greedy policy reaches the goal (a return above the -20 of an episode
that never does). Run it niced from the repository root:

    nice -n 10 python -m benchmarks sparse_grid [--seeds 16] [--settings default ...] [--csv FILE]

``--scale`` multiplies the episodes (a quick look; the table uses 1).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.bench_classics import scaled
from benchmarks.bench_classics_why import print_table
from rl.evaluate import evaluate
from rl.runs.config import TrainConfig
from rl.runs.load import load_run
from rl.runs.training import train

GRIDS = (((10, 10), 0.1), ((10, 10), 0.2), ((10, 10), 0.0), ((6, 6), 0.1), ((15, 15), 0.1),
         ((15, 15), 0.0))  # fmt: skip
"""(shape, slip) of each grid, in the order they run; the first is the bundled default."""

SETTINGS = {  # name -> (agent, reading, agent_params)
    "default": ("teql", None, {}),
    "u = 1": ("teql", None, {"bonus_unit": 1.0}),
    "released": ("teql", "released", {}),
    "tabular": ("tabular", None, {}),
}
"""The rows of each grid: TEQL's default (stable) reading; the same with EUGE's count bonus
in units u = 1, eq. (euge) as printed, instead of 2 reward sizes (0.2 here); TEQL's released
reading; tabular Q-learning. Each is otherwise at its defaults."""

EPISODES = 1000
"""Training episodes per seed."""

GREEDY_EPISODES = 20
"""Greedy evaluation episodes per seed after training."""

NEVER = -20.0
"""The return of an episode that never reaches the goal: 200 steps of -0.1."""

COLUMNS = (
    "grid", "slip", "setting", "episodes x seeds", "greedy return, mean ± std",
    "worst seed", "seeds reaching the goal", "wall time (s)",
)  # fmt: skip


def run_row(shape: tuple[int, int], slip: float, name: str, seeds: int, episodes: int,
            root: Path) -> list[str]:  # fmt: skip
    """Train setting ``name`` on one grid and return its table row."""
    agent, reading, params = SETTINGS[name]
    config = TrainConfig(
        env="goalgrid", agent=agent, reading=reading, seeds=seeds, episodes=episodes,
        out=str(root / f"{shape[0]}x{shape[1]}-{slip}-{name.replace(' ', '')}"),
        env_options={"env_kwargs": {"shape": list(shape), "slip": slip}},
        agent_params=params, eval_every=0, checkpoint_every=episodes,
    )  # fmt: skip
    started = time.perf_counter()
    train(config)
    wall = time.perf_counter() - started
    run = load_run(config.out)
    means = np.array(
        [evaluate(run, episodes=GREEDY_EPISODES, replica=i).summary.mean for i in range(seeds)]
    )
    return [
        f"{shape[0]} x {shape[1]}", f"{slip:g}", name, f"{episodes} x {seeds}",
        f"{means.mean():.2f} ± {means.std():.2f}", f"{means.min():.2f}",
        f"{(means > NEVER).sum()}/{seeds}", f"{wall:.1f}",
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """Print (and optionally write as CSV) the table of settings per grid."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=16, help="seeds per row (default 16)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the episodes")
    parser.add_argument(
        "--settings",
        nargs="*",
        default=list(SETTINGS),
        choices=list(SETTINGS),
        metavar="SETTING",
        help=f"settings, any of {', '.join(map(repr, SETTINGS))} (default all)",
    )
    parser.add_argument("--csv", metavar="FILE", help="also write the table there")
    args = parser.parse_args(argv)
    episodes = scaled(EPISODES, args.scale)
    with tempfile.TemporaryDirectory() as tmp:
        rows = (
            run_row(shape, slip, name, args.seeds, episodes, Path(tmp))
            for shape, slip in GRIDS
            for name in args.settings
        )
        print_table(COLUMNS, rows, args.csv)


if __name__ == "__main__":
    main()
