"""Do the batched DQN and SAC learn as the looped ones did? Final-window returns side by side.

Run with ``python -m benchmarks.deep_learning [--envs ...] [--agents ...]
[--impls ...] [--seeds N] [--episodes N] [--first-seed N] [--json FILE]``.
Each (environment, agent, implementation) trains ``--seeds`` seeds for
``--episodes`` episodes through the lockstep runner (paper reading, greedy
evaluation every 10 episodes) and reports, per seed, the mean greedy return of
the evaluations in the last fifth of the episodes. The looped agent is
`benchmarks.looped_deep` (the design before batching) built from the same
config; seeds are independent in both, so a run can be split over processes
by ``--first-seed`` and the rows joined. ``--compare FILE ...`` reads such
rows and prints mean +- std per implementation and Welch's t-test between
them (scipy.stats.ttest_ind with equal_var=False).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

EVAL_EVERY = 10


def train_one(env: str, agent: str, impl: str, seeds: int, first_seed: int, episodes: int) -> dict:
    """Train one (env, agent, implementation); return its per-seed final-window returns."""
    import torch

    from benchmarks.looped_deep import LoopedDiscreteSAC, LoopedDQN
    from rl.loop.runner import Runner
    from rl.runs.config import TrainConfig
    from rl.runs.training import build
    from rl.seeding import spawn_replicas

    torch.set_num_threads(1)
    config = TrainConfig(
        env=env,
        agent=agent,
        seeds=seeds,
        seed=first_seed,
        episodes=episodes,
        eval_every=EVAL_EVERY,
        eval_episodes=1,
        out="unused",
    )  # fmt: skip (build writes nothing)
    runner, _ = build(config)
    if impl == "looped":
        streams = spawn_replicas(range(first_seed, first_seed + seeds))  # fresh: unused init
        looped = LoopedDQN if agent == "dqn" else LoopedDiscreteSAC
        built = looped(runner.problem, runner.agent.config, [s.agent for s in streams])
        runner.close()
        runner = Runner(runner.problem, built, streams, eval_every=EVAL_EVERY, eval_episodes=1)
    start = time.perf_counter()
    greedy = np.array([result.greedy_returns for result in runner.episodes(0, episodes)])
    wall = time.perf_counter() - start
    runner.close()
    window = greedy[-(episodes // 5) :]
    final = np.nanmean(window, axis=0)
    return {
        "env": env, "agent": agent, "impl": impl,
        "seeds": list(range(first_seed, first_seed + seeds)),
        "episodes": episodes, "final": final.tolist(), "wall_s": wall,
        "agent_steps": int(runner.agent_steps),
    }  # fmt: skip


def compare(rows: list[dict]) -> None:
    """Print mean +- std of each implementation's final-window returns and Welch's t-test."""
    from scipy import stats

    groups: dict[tuple[str, str, str], list[float]] = {}
    walls: dict[tuple[str, str, str], float] = {}
    for row in rows:
        key = (row["env"], row["agent"], row["impl"])
        groups.setdefault(key, []).extend(row["final"])
        walls[key] = walls.get(key, 0.0) + row["wall_s"]
    print(
        "| env | agent | looped mean ± std | batched mean ± std | Welch t | p "
        "| looped s | batched s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for env, agent in sorted({key[:2] for key in groups}):
        looped, batched = groups.get((env, agent, "looped")), groups.get((env, agent, "batched"))
        if not looped or not batched:
            continue
        test = stats.ttest_ind(looped, batched, equal_var=False)
        print(
            f"| {env} | {agent} | {np.mean(looped):.1f} ± {np.std(looped, ddof=1):.1f} "
            f"| {np.mean(batched):.1f} ± {np.std(batched, ddof=1):.1f} "
            f"| {test.statistic:.2f} | {test.pvalue:.2f} "
            f"| {walls[env, agent, 'looped']:.0f} | {walls[env, agent, 'batched']:.0f} |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["cartpole", "pendulum"])
    parser.add_argument("--agents", nargs="+", default=["dqn", "sac"], choices=["dqn", "sac"])
    parser.add_argument("--impls", nargs="+", default=["looped", "batched"])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--json", help="append the rows (one JSON object a line) to this file")
    parser.add_argument("--compare", nargs="+", metavar="FILE", help="summarise saved rows")
    args = parser.parse_args(argv)
    if args.compare:
        rows = [json.loads(line) for f in args.compare for line in Path(f).read_text().splitlines()]
        compare(rows)
        return
    rows = []
    for env in args.envs:
        for agent in args.agents:
            for impl in args.impls:
                row = train_one(env, agent, impl, args.seeds, args.first_seed, args.episodes)
                print(json.dumps(row), flush=True)
                rows.append(row)
                if args.json:
                    with open(args.json, "a") as out:
                        out.write(json.dumps(row) + "\n")
    compare(rows)


if __name__ == "__main__":
    main()
