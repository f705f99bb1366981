"""Paper-scale CartPole TEQL (100 seeds x 10,000 episodes x 100 steps), from a shortened run.

Runs the real training command (`rl.runs.training.train`: metrics, checkpoints, greedy
evaluation after every 10th episode, as the paper's protocol) for the first
``--episodes`` episodes of 100 seeds, counts every agent-step the replicas took
(training and evaluation), and extrapolates the wall time of the full protocol
at the measured cost per agent-step. The extrapolation assumes every episode
lasts the full 100 steps (an upper bound on the step count) and adds the
evaluation episodes (one per 10 training episodes).

Run with ``python -m benchmarks paper_scale``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

PAPER_SEEDS, PAPER_EPISODES, PAPER_STEPS = 100, 10_000, 100
READINGS = {
    "teql I_max=1": ("teql", {"max_inner": 1}),
    "teql-released (I_max=5)": ("teql-released", {}),
}


def measure(label: str, seeds: int, episodes: int) -> dict[str, Any]:
    """Train ``seeds`` x ``episodes`` for reading ``label``; return the row with the forecast."""
    from rl.runs.config import TrainConfig
    from rl.runs.training import build, run

    agent, params = READINGS[label]
    with tempfile.TemporaryDirectory() as directory:
        config = TrainConfig(
            env="cartpole", agent=agent, reading="paper" if agent == "teql" else None,
            seeds=seeds, episodes=episodes, agent_params=params, out=str(Path(directory) / "run"),
        )  # fmt: skip
        runner, effective = build(config)
        start = time.perf_counter()
        run(runner, config, effective)
        seconds = time.perf_counter() - start
        agent_steps = runner.agent_steps
        runner.close()
    per_step = seconds / agent_steps
    full_steps = PAPER_SEEDS * PAPER_EPISODES * PAPER_STEPS * 1.1  # + one greedy episode in 10
    return {
        "reading": label, "seeds": seeds, "episodes": episodes, "agent_steps": agent_steps,
        "seconds": seconds, "us_per_agent_step": 1e6 * per_step,
        "paper_scale_minutes": per_step * full_steps / 60,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Print the measured cost and the forecast of the full protocol for each reading."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=PAPER_SEEDS)
    parser.add_argument("--episodes", type=int, default=200, help="episodes of the short run")
    args = parser.parse_args(argv)
    rows = []
    print(f"{'reading':26} {'agent-steps':>12} {'s':>7} {'us/step':>8} {'full (min)':>11}")
    for label in READINGS:
        row = measure(label, args.seeds, args.episodes)
        rows.append(row)
        print(
            f"{label:26} {row['agent_steps']:>12,} {row['seconds']:7.1f} "
            f"{row['us_per_agent_step']:8.2f} {row['paper_scale_minutes']:11.1f}"
        )
    return rows


if __name__ == "__main__":
    main()
