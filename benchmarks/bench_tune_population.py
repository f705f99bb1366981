"""Wall time of a successive-halving search as one population batch against one trial at a time.

Run with ``python -m benchmarks tune_population``. Searches ``--trials``
trials of ``--agent`` (``--reading``) on CartPole, ``--seeds`` seeds and
``--episodes`` episodes each, over the step size alpha_0 and the discount
gamma, with ``python -m rl.tune --pruner halving`` twice in this process: with
``--population P`` (P trials, P * S replicas, in one batch; a pruned or
finished trial's slot refilled at once, `rl.tune.population`) and one trial
after another (no ``--population``). It prints both wall times, their ratio,
the training episodes and steps each search played (over all seeds; the two
searches prune differently, so they train different amounts),
how many trials each pruned, and the population's slot occupancy: the
replica-steps of the slots that hold a live trial over all the replica-steps
of the batch (P * S slots at every lockstep step), and the share of them that
the live trials' replicas played (`occupancy`). A tiny search of each kind
runs first, untimed, so that neither timing includes compiling.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rl.runs.metrics import read_metrics
from rl.tune import population
from rl.tune.cli import main as tune_main

SPACE = """
[params.alpha0]
type = "float"
low = 0.05
high = 1.0

[params.gamma]
type = "float"
low = 0.9
high = 0.999
"""


def occupancy(segments: Sequence[list[list[Any]]], slots: int) -> tuple[float, float]:
    """Shares of the batch's replica-steps held by live trials, and stepped by them (CartPole).

    ``segments`` holds, per segment, every live trial's episodes
    (`rl.runs.training.EpisodeLog`). A replica's steps in a segment are its
    training episodes' lengths and its greedy episodes' (on CartPole, whose
    every step is rewarded 1, a greedy return is that episode's length); the
    segment's lockstep steps T are the most any replica took. All the
    replica-steps of a segment are T x ``slots``; those of live trials are T
    x the live trials' replicas (the slot occupancy: empty slots are the
    only loss); those stepped are the replicas' own steps (a replica that has
    played its episodes of the segment waits at its end).

    Returns
    -------
    held, stepped : float
    """
    held, stepped, total = 0.0, 0.0, 0.0
    for logs in segments:
        steps = [
            sum(log.lengths[i] + np.nan_to_num(log.greedy_returns[i]) for log in trial)
            for trial in logs
            for i in range(len(trial[0].lengths))
        ]
        held += max(steps) * len(steps)
        stepped += sum(steps)
        total += max(steps) * slots
    return held / total, stepped / total


def trained_steps(out: Path) -> tuple[int, int]:
    """Return the training episodes and steps, over seeds, of every trial of a search."""
    episodes, steps = 0, 0
    for metrics in sorted((out / "trials").glob("*/metrics.csv")):
        lengths = read_metrics(metrics)["length"]
        episodes, steps = episodes + len(lengths), steps + int(lengths.sum())
    return episodes, steps


def timed_search(argv: list[str]) -> float:
    """Return the wall seconds of one ``rl.tune`` run (it prints its counts)."""
    start = time.perf_counter()
    code = tune_main(argv)
    seconds = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"rl.tune exited with {code}")
    return seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64, help="trials of each search")
    parser.add_argument("--population", type=int, default=16, help="trials in the batch P")
    parser.add_argument("--seeds", type=int, default=4, help="seeds S of each trial")
    parser.add_argument("--episodes", type=int, default=100, help="episodes of each trial")
    parser.add_argument("--agent", default="teql", help="agent (default %(default)s)")
    parser.add_argument("--reading", default="stable", help="its reading (default %(default)s)")
    args = parser.parse_args(argv)
    segments: list[list[list[Any]]] = []
    train_segment = population.train_segment

    def recorded(members: Sequence[Any], length: int) -> list[list[Any]]:
        logs = train_segment(members, length)
        segments.append(logs)
        return logs

    with tempfile.TemporaryDirectory(prefix="bench-tune-population-") as temporary:
        root = Path(temporary)
        space = root / "space.toml"
        space.write_text(SPACE)
        search = [
            "--env", "CartPole-v1", "--agent", args.agent, "--reading", args.reading,
            "--space", str(space), "--pruner", "halving",
        ]  # fmt: skip
        common = [*search, "--n-trials", str(args.trials), "--seeds", str(args.seeds),
                  "--episodes", str(args.episodes)]  # fmt: skip
        print(
            f"{args.trials} trials x {args.seeds} seeds x {args.episodes} episodes of "
            f"{args.agent} ({args.reading}) on CartPole, successive halving; population "
            f"{args.population} ({args.population * args.seeds} replicas)"
        )
        tiny = [*search, "--n-trials", "2", "--seeds", "1", "--episodes", "10"]
        for warm in (["--population", "2"], []):  # compile and import before either is timed
            tune_main([*tiny, *warm, "--out", str(root / f"warm{len(warm)}")])
        population.train_segment = recorded
        try:
            batched = timed_search([*common, "--population", str(args.population),
                                    "--out", str(root / "population")])  # fmt: skip
        finally:
            population.train_segment = train_segment
        alone = timed_search([*common, "--out", str(root / "sequential")])
        held, stepped = occupancy(segments, args.population * args.seeds)
        print(f"{'search':<22}{'wall s':>10}{'episodes':>10}{'steps':>10}{'steps/s':>10}")
        for name, wall, out in (
            (f"--population {args.population}", batched, root / "population"),
            ("one after another", alone, root / "sequential"),
        ):
            episodes, steps = trained_steps(out)
            print(f"{name:<22}{wall:>10.2f}{episodes:>10}{steps:>10}{steps / wall:>10.0f}")
        print(f"ratio (one after another / population): {alone / batched:.2f}")
        print(
            f"population over {len(segments)} segments: slot occupancy {held:.3f} (replica-steps "
            f"of slots holding a live trial / all), stepped {stepped:.3f} (replica-steps played "
            "/ all; the rest waited at a segment's end for a trial with longer episodes)"
        )
