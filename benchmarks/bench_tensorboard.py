"""What streaming a run to TensorBoard costs: the same training with and without the writer.

Run with ``python -m benchmarks tensorboard``. Each agent trains ``--seeds``
replicas for ``--episodes`` episodes on CartPole (TEQL in the stable reading;
checkpoints every ``--checkpoint-every`` episodes) through `rl.runs.training.run`,
``--repeat`` times with ``tensorboard=`` a fresh directory and as often
without, in pairs alternated ABBA, so that a drift of the machine's load hits
both alike. It prints the median wall seconds of each, the median of the pairs'
ratios (with / without), which should stay under 1.05 at B = 100, the same
ratio of the process's CPU seconds (user and system: steadier than the wall
clock where other programs share the machine), and the bytes of event files a
run writes. A warm-up run of each kind goes first (compilation, imports).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

from rl.runs.config import TrainConfig
from rl.runs.training import build, run


def timed_run(config: TrainConfig, tensorboard: Path | None) -> tuple[float, float]:
    """Train ``config`` afresh (logging to ``tensorboard`` if given); its wall and CPU seconds."""
    runner, effective = build(config)
    try:
        start, cpu = time.perf_counter(), time.process_time()
        run(runner, config, effective, overwrite=True, tensorboard=tensorboard)
        return time.perf_counter() - start, time.process_time() - cpu
    finally:
        runner.close()


def measure(
    agent: str, args: argparse.Namespace, work: Path
) -> tuple[float, float, float, float, int]:
    """Return the median seconds with the writer and without, the median wall and CPU ratios,
    and the bytes of a run's event files."""
    config = TrainConfig(
        env="cartpole",
        agent=agent,
        reading="stable" if agent == "teql" else None,
        seeds=args.seeds,
        episodes=args.episodes,
        checkpoint_every=args.checkpoint_every,
        out=str(work / f"{agent}-run"),
    )
    warm = dataclasses.replace(config, episodes=2)
    timed_run(warm, work / "warm-up")
    timed_run(warm, None)
    with_writer, without = [], []
    for repeat in range(args.repeat):
        log_dir = work / f"{agent}_{repeat + 1}"
        if repeat % 2:  # ABBA: a drift of the machine's load cancels out of each pair of pairs
            without.append(timed_run(config, None))
            with_writer.append(timed_run(config, log_dir))
        else:
            with_writer.append(timed_run(config, log_dir))
            without.append(timed_run(config, None))
    size = sum(path.stat().st_size for path in log_dir.rglob("*") if path.is_file())
    median = statistics.median
    ratios = [
        median(a[k] / b[k] for a, b in zip(with_writer, without, strict=True)) for k in (0, 1)
    ]
    seconds = [median(wall for wall, _ in runs) for runs in (with_writer, without)]
    return *seconds, *ratios, size


def main(argv: list[str] | None = None) -> None:
    """Print the seconds with and without the TensorBoard writer, and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100, help="replicas B")
    parser.add_argument("--episodes", type=int, default=300, help="training episodes per run")
    parser.add_argument("--checkpoint-every", type=int, default=50, help="episodes")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each kind; the median")
    parser.add_argument(
        "--agents", nargs="+", default=["teql", "tlr"], help="agents to train (default teql tlr)"
    )
    args = parser.parse_args(argv)
    print(
        f"CartPole, B = {args.seeds}, {args.episodes} episodes, median of {args.repeat} "
        "alternated runs:"
    )
    print(
        f"{'agent':8s} {'with s':>8s} {'without s':>10s} {'ratio':>7s} {'CPU ratio':>10s} "
        f"{'events KiB':>11s}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-tensorboard-") as directory:
        for agent in args.agents:
            with_writer, without, ratio, cpu, size = measure(agent, args, Path(directory))
            print(
                f"{agent:8s} {with_writer:8.3f} {without:10.3f} {ratio:7.3f} {cpu:10.3f} "
                f"{size / 2**10:11.1f}"
            )


if __name__ == "__main__":
    main()
