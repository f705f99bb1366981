"""Wall time of a CartPole sweep trained in lockstep batches against one task per configuration.

Run with ``python -m benchmarks sweep_batch``. Writes a grid file of
``--configs`` configurations x ``--seeds`` seeds of ``--agent`` on CartPole,
``--episodes`` each, and runs ``python -m rl.sweep`` on it twice in this
process with the same ``--workers``: batched (the default, `rl.sweep.sweep_batches`)
and with ``--no-batch``; it prints both wall times, their ratio, the batches
and the memory per replica, and checks that every configuration's
``metrics.csv`` is the same both ways (all columns but the wall time).

``--vary seed`` (the default) makes the configurations differ in their seeds
only; ``--vary alpha0`` gives them ``--configs`` step sizes alpha_0 from 0.001
to 0.01 (geometrically spaced, none of which diverges), which batch where the
agent lists ``alpha0`` in its ``per_replica`` (`rl.agents.replica_settings`)
and are tasks of their own otherwise.
A 100-configuration x 10-seed sweep of 1,000 episodes each is
``--configs 100 --seeds 10 --episodes 1000``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from rl.experiments.executor import read_index
from rl.experiments.workers import cpu_workers
from rl.runs.metrics import COLUMNS, read_metrics
from rl.sweep import load_sweep, sweep_batches
from rl.sweep import main as sweep_main


def grid_text(agent: str, configs: int, seeds: int, episodes: int, vary: str) -> str:
    """Return the TOML grid file of the benchmark."""
    if vary == "seed":
        swept = f"seed = {[k * seeds for k in range(configs)]}"
    else:
        values = [float(v) for v in np.round(np.geomspace(0.001, 0.01, configs), 6)]
        swept = f'"agent_params.alpha0" = {values}'
    return (
        f'[base]\nenv = "cartpole"\nagent = "{agent}"\nepisodes = {episodes}\n'
        f"seeds = {seeds}\neval_every = 10\n\n[grid]\n{swept}\n"
    )


def timed_sweep(grid: Path, out: Path, workers: int, batch: bool) -> float:
    """Return the wall seconds of one ``rl.sweep`` of ``grid`` into ``out``."""
    flags = ["--workers", str(workers), "--no-progress", "--no-plot"]
    start = time.perf_counter()
    code = sweep_main([str(grid), "--out", str(out), *flags, *([] if batch else ["--no-batch"])])
    seconds = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"rl.sweep exited with {code}")
    return seconds


def same_metrics(first: Path, second: Path) -> bool:
    """Whether every run of two sweep directories has the same metrics but for the wall time."""
    for row in read_index(first):
        one = read_metrics(first / row["name"] / "metrics.csv")
        two = read_metrics(second / row["name"] / "metrics.csv")
        for column in COLUMNS:
            if column != "wall_time" and not np.array_equal(one[column], two[column], True):
                return False
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=8, help="configurations K")
    parser.add_argument("--seeds", type=int, default=4, help="seeds S of each configuration")
    parser.add_argument("--episodes", type=int, default=100, help="episodes of each run")
    parser.add_argument("--agent", default="teql-released", help="agent (default %(default)s)")
    parser.add_argument("--vary", choices=("seed", "alpha0"), default="seed")
    parser.add_argument("--workers", type=int, help="processes of both sweeps (default: all)")
    args = parser.parse_args(argv)
    workers = cpu_workers(args.workers)
    with tempfile.TemporaryDirectory(prefix="bench-sweep-batch-") as temporary:
        root = Path(temporary)
        grid = root / "grid.toml"
        grid.write_text(grid_text(args.agent, args.configs, args.seeds, args.episodes, args.vary))
        configs = load_sweep(grid, root / "probe")
        batches = sweep_batches(configs, workers)
        largest = max((len(b) for b in batches), default=1)
        per_replica = max(c.replica_bytes for c in configs)
        print(
            f"{args.configs} configurations x {args.seeds} seeds x {args.episodes} episodes of "
            f"{args.agent} on CartPole, --vary {args.vary}, {workers} workers"
        )
        print(
            f"batches: {len(batches)}, largest {largest * args.seeds} replicas, "
            f"{per_replica / 2**10:.1f} KiB per replica"
        )
        batched = timed_sweep(grid, root / "batch", workers, batch=True)
        alone = timed_sweep(grid, root / "alone", workers, batch=False)
        print(f"{'sweep':<12}{'wall s':>10}")
        print(f"{'--batch':<12}{batched:>10.2f}")
        print(f"{'--no-batch':<12}{alone:>10.2f}")
        print(f"ratio (no-batch / batch): {alone / batched:.2f}")
        equal = same_metrics(root / "batch", root / "alone")
        print(f"metrics equal (all columns but wall time): {equal}")
