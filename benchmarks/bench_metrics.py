"""Seconds to read a ``metrics.csv``: pandas' C parser against the ``csv`` module, in one run.

Run with ``python -m benchmarks metrics``. Writes a synthetic file as the
runner does (`rl.runs.metrics.MetricsWriter`: ``--seeds`` x ``--episodes``
rows, a greedy return every tenth episode, random returns at full precision)
into a temporary directory, then times `rl.runs.metrics.read_metrics` (pandas)
and the ``csv`` module's row-by-row reader it falls back to, best of
``--repeat``, and checks that both give the same table. The paper's largest
lines are 100 seeds x 40,000 Pendulum episodes (4M rows); every part of
``python -m rl.reproduce paper`` reads its lines, and the report reads them again.
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from pathlib import Path

import numpy as np

from rl.runs.metrics import COLUMNS, MetricsWriter, _parse_rows, read_metrics


def write_file(path: Path, seeds: int, episodes: int) -> None:
    """Write ``seeds`` x ``episodes`` rows in the runner's order (episode by episode)."""
    rng = np.random.default_rng(0)
    writer = MetricsWriter(path)
    returns = rng.normal(50.0, 30.0, size=(episodes, seeds))
    for episode in range(1, episodes + 1):
        greedy = episode % 10 == 0
        for seed in range(seeds):
            ret = float(returns[episode - 1, seed])
            writer.write(seed, episode, ret, 100, ret + 1.0 if greedy else np.nan, 0.001 * episode)
    writer.close()


def read_with_csv(path: Path) -> dict[str, np.ndarray]:
    """Read ``path`` with the ``csv`` module, as `read_metrics` does for a file pandas refuses."""
    with open(path, newline="", encoding="utf-8") as handle:
        return _parse_rows(csv.DictReader(handle))


def best_seconds(read, path: Path, repeat: int) -> tuple[float, dict[str, np.ndarray]]:  # noqa: ANN001
    """Return the best wall seconds of ``read(path)`` over ``repeat`` calls, and its table."""
    best, table = float("inf"), {}
    for _ in range(repeat):
        start = time.perf_counter()
        table = read(path)
        best = min(best, time.perf_counter() - start)
    return best, table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100, help="replicas (rows per episode)")
    parser.add_argument("--episodes", type=int, default=10_000, help="episodes per seed")
    parser.add_argument("--repeat", type=int, default=3, help="reads of each kind; the best")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "metrics.csv"
        write_file(path, args.seeds, args.episodes)
        rows = args.seeds * args.episodes
        fast, table = best_seconds(read_metrics, path, args.repeat)
        slow, reference = best_seconds(read_with_csv, path, args.repeat)
        same = all(
            np.array_equal(table[c], reference[c], equal_nan=True)
            and table[c].dtype == reference[c].dtype
            for c in COLUMNS
        )
        size = path.stat().st_size / 2**20
    print(f"metrics.csv of {rows:,} rows ({size:.0f} MiB), best of {args.repeat}:")
    print(f"{'reader':<22} {'seconds':>8} {'us/row':>7}")
    for name, seconds in (("read_metrics (pandas)", fast), ("csv module", slow)):
        print(f"{name:<22} {seconds:>8.2f} {seconds / rows * 1e6:>7.2f}")
    print(f"pandas is {slow / fast:.1f}x the csv module; same table: {same}")
    if not same:
        raise SystemExit("the two readers disagree")


if __name__ == "__main__":
    main()
