"""The Highway twin against highway-env over many episodes: equal episodes and a two-sample test.

``tests/rl/test_highway_twin.py`` compares the two simulators step by step (to
1e-9) over hundreds of episodes. This command plays many more, each simulator on
its own: copy ``seed`` of both is reset with that seed, later episodes continue
its generator (``reset()`` without a seed), and the open-loop policy of the
equality tests plays in each, from its own generator seeded ``seed + 10_000``
(the random policy). Where a last-bit difference ever flipped a discrete
decision (a lane change, a collision, the nearest-vehicle order), the episodes
part; this counts them and tests whether the two samples of episode returns and
of episode lengths can be told apart (two-sample Kolmogorov-Smirnov,
`scipy.stats.ks_2samp`). Run from the repository root:

    python -m rl.experiments.highway_equality --policy random --seeds 100 --episodes 100 \
        --out highway-equality-random.csv

Every finished seed's episodes are appended to ``--out`` at once (`COLUMNS`); a
rerun with the same file skips the seeds it holds, so an interrupted run loses
at most the seed it was playing. A file holds one policy. highway-env costs about
13 ms a step here, so 10,000 random-policy episodes take about half an hour.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from scipy.stats import ks_2samp

from rl.envs.highway_twin import HighwayTwin
from rl.experiments.executor import ExecutorError, read_csv_rows
from rl.validation import check_int

COLUMNS = (
    "policy", "seed", "episode", "twin_return", "twin_length", "reference_return",
    "reference_length",
)  # fmt: skip
"""Columns of the output CSV, one row per (seed, episode)."""

POLICIES: dict[str, Callable[[np.random.Generator], int]] = {
    "random": lambda rng: int(rng.integers(5)),
    "idle": lambda rng: 1,
    "faster": lambda rng: 3,
}
"""Open-loop policies of the equality tests: uniform meta-actions, always IDLE, always FASTER."""

TOLERANCE = 1e-9
"""Two episodes are equal when their lengths agree and their returns differ by at most this."""


def play(env, policy: str, seed: int, episodes: int) -> list[tuple[float, int]]:
    """Return (return, length) of ``episodes`` episodes of ``env`` from ``seed``."""
    choose, rng = POLICIES[policy], np.random.default_rng(seed + 10_000)
    played = []
    for episode in range(episodes):
        env.reset(seed=seed) if episode == 0 else env.reset()
        total, length, done = 0.0, 0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(choose(rng))
            total, length, done = total + float(reward), length + 1, terminated or truncated
        played.append((total, length))
    env.close()
    return played


def _read(path: Path, policy: str | None = None) -> list[dict[str, str]]:
    """Return the rows of ``path`` (none if it does not exist), all of one policy.

    Raises
    ------
    ValueError
        If the rows are of another policy than ``policy`` (None: any one) or of several.
    """
    rows = read_csv_rows(path, "equality table", COLUMNS)
    held = sorted({row["policy"] for row in rows})
    if len(held) > 1 or (held and policy is not None and held != [policy]):
        raise ValueError(f"{path} holds episodes of the policies {held}; use another --out.")
    return rows


def run(policy: str, seeds: Sequence[int], episodes: int, out: Path) -> None:
    """Play every seed not yet in ``out`` in both simulators and append its rows."""
    from rl.envs.highway import Highway  # highway-env, imported only when it is played

    done = {int(row["seed"]) for row in _read(out, policy)}
    for seed in seeds:
        if seed in done:
            continue
        twin = play(HighwayTwin(), policy, seed, episodes)
        reference = play(Highway(), policy, seed, episodes)
        rows = [
            (policy, seed, k, *map(repr, twin[k]), *map(repr, reference[k]))
            for k in range(episodes)
        ]
        new = not out.exists()
        with open(out, "a", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            if new:
                writer.writerow(COLUMNS)
            writer.writerows(rows)
        print(f"seed {seed}: {episodes} episodes", flush=True)


def summarize(out: Path) -> dict[str, float]:
    """Return the counts and the two-sample tests of the episodes in ``out``.

    Raises
    ------
    ValueError
        If ``out`` holds no episodes, or episodes of several policies.
    """
    rows = _read(out)
    if not rows:
        raise ValueError(f"{out} holds no episodes; nothing to summarize.")
    values = {c: np.array([float(r[c]) for r in rows]) for c in COLUMNS[3:]}
    equal = (values["twin_length"] == values["reference_length"]) & (
        np.abs(values["twin_return"] - values["reference_return"]) <= TOLERANCE
    )
    returns = ks_2samp(values["twin_return"], values["reference_return"])
    lengths = ks_2samp(values["twin_length"], values["reference_length"])
    return {
        "episodes": len(rows),
        "steps_twin": int(values["twin_length"].sum()),
        "steps_reference": int(values["reference_length"].sum()),
        "equal_episodes": int(equal.sum()),
        "max_return_gap": float(np.abs(values["twin_return"] - values["reference_return"]).max()),
        "mean_return_twin": float(values["twin_return"].mean()),
        "mean_return_reference": float(values["reference_return"].mean()),
        "ks_returns": float(returns.statistic),
        "p_returns": float(returns.pvalue),
        "ks_lengths": float(lengths.statistic),
        "p_lengths": float(lengths.pvalue),
    }


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m rl.experiments.highway_equality``."""
    parser = argparse.ArgumentParser(
        prog="python -m rl.experiments.highway_equality",
        description="Play the Highway twin and highway-env from the same seeds; count equal "
        "episodes and test the two samples of returns and lengths.",
    )
    parser.add_argument(
        "--policy", choices=sorted(POLICIES), default="random",
        help="open-loop policy: uniform meta-actions, always IDLE or always FASTER",
    )  # fmt: skip
    parser.add_argument("--seeds", type=int, default=100, help="copies: seeds 0..N-1")
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--episodes", type=int, default=100, help="episodes per seed")
    parser.add_argument("--out", required=True, help="CSV of per-episode results (appended)")
    parser.add_argument("--summary-only", action="store_true", help="play nothing: summarize --out")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; return its exit code (2: bad input or a damaged --out)."""
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    try:
        check_int("seeds", args.seeds, 1, 10**6)
        check_int("episodes", args.episodes, 1, 10**6)
        if not args.summary_only:
            seeds = range(args.first_seed, args.first_seed + args.seeds)
            run(args.policy, seeds, args.episodes, out)
        summary = summarize(out)
    except (ValueError, TypeError, ExecutorError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for key, value in summary.items():
        print(f"{key}: {value:.6g}" if isinstance(value, float) else f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
