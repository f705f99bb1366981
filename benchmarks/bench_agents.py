"""Microseconds per training step of every agent on CartPole, through the runner.

Run with ``python benchmarks/bench_agents.py`` (or ``python -m benchmarks``).
Each agent trains B replicas in lockstep for a few episodes with its CartPole
preset; the time per replica-step includes action selection, the update, the
vectorized environment and the runner's bookkeeping (greedy evaluation off).
The first episode (warm-up: imports, allocation) is not timed.
"""

from __future__ import annotations

import argparse
import importlib.util
import time

import numpy as np

from rl.runs.config import TrainConfig
from rl.runs.training import build

TENSOR_AGENTS = ("teql", "teql-released", "tlr")
OTHER_AGENTS = ("lora-vi", "tabular", "random")
TORCH_AGENTS = ("dqn", "sac")
PAPER_READING = {"teql": "paper"}  # the rows measure the paper's update, not TEQL's default


def microseconds_per_step(agent: str, replicas: int, episodes: int) -> float:
    """Mean wall-clock microseconds per replica-step over ``episodes`` training episodes."""
    config = TrainConfig(
        env="cartpole", agent=agent, reading=PAPER_READING.get(agent), seeds=replicas,
        eval_every=0, out="unused", episodes=episodes,
    )  # fmt: skip
    runner, _ = build(config)
    runner.episode(1)  # warm-up
    steps = 0
    start = time.perf_counter()
    for result in runner.episodes(1, episodes + 1):
        steps += int(np.sum(result.lengths))
    elapsed = time.perf_counter() - start
    runner.close()
    return 1e6 * elapsed / steps


def main(argv: list[str] | None = None) -> None:
    """Print a table of microseconds per replica-step, B = 1 and larger B."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=20, help="timed episodes per agent")
    parser.add_argument("--replicas", type=int, default=100, help="the large B")
    args = parser.parse_args(argv)
    agents = list(TENSOR_AGENTS + OTHER_AGENTS)
    if importlib.util.find_spec("torch") is not None:
        agents += TORCH_AGENTS
    print(f"{'agent':15s} {'B=1 us/step':>12s} {'B=' + str(args.replicas) + ' us/step':>14s}")
    for agent in agents:
        single = microseconds_per_step(agent, 1, args.episodes)
        if agent in TORCH_AGENTS:  # replicas loop in Python: no gain from batching
            print(f"{agent:15s} {single:12.1f} {'-':>14s}")
            continue
        batched = microseconds_per_step(agent, args.replicas, max(2, args.episodes // 10))
        print(f"{agent:15s} {single:12.1f} {batched:14.1f}")


if __name__ == "__main__":
    main()
