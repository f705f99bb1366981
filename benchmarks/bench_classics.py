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
``--envs``/``--agents`` select rows.
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
from pathlib import Path

import numpy as np

from rl.evaluate import evaluate
from rl.loop.runner import episode_seed
from rl.runs.config import TrainConfig
from rl.runs.load import load_run
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


def run_row(env_id: str, label: str, seeds: int, episodes: int, eval_episodes: int, root: Path):
    """Train one agent on one environment and return (per-seed greedy means, wall time)."""
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
    )
    started = time.perf_counter()
    train(config)
    wall = time.perf_counter() - started
    run = load_run(out)
    means = [evaluate(run, episodes=eval_episodes, replica=i).summary.mean for i in range(seeds)]
    return np.array(means), wall, run.problem


def main(argv: list[str] | None = None) -> None:
    """Print (and optionally write) the table of greedy returns."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=4, help="seeds B per agent (default 4)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply training budgets")
    parser.add_argument("--envs", nargs="*", default=list(BUDGETS), help="environments")
    parser.add_argument("--agents", nargs="*", default=list(AGENTS), help="row labels")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table there")
    args = parser.parse_args(argv)
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
            episodes = max(1, round(budget * args.scale))
            random_mean = None
            for label in args.agents:
                means, wall, problem = run_row(
                    installed, label, args.seeds, episodes, eval_episodes, Path(tmp)
                )
                if random_mean is None:
                    random_mean = random_returns(problem, eval_episodes).mean()
                line = (
                    f"| {installed} | {label} | {episodes} x {args.seeds} | "
                    f"{means.mean():.2f} ± {means.std():.2f} | {random_mean:.2f} | "
                    f"{OPTIMA[env_id]} | {wall:.1f} |"
                )
                lines.append(line)
                print(line, flush=True)
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
