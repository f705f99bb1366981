"""The Highway twin against highway-env over many episodes: equal episodes and a two-sample test.

``tests/rl/test_highway_twin.py`` compares the two simulators step by step (to
1e-9) over hundreds of episodes. This command plays many more, each simulator on
its own: copy ``seed`` of both is reset with that seed, later episodes continue
its generator (``reset()`` without a seed), and the same policy plays in each:
an open-loop policy of the equality tests, from its own generator seeded
``seed + 10_000`` (the random policy), or the greedy policy of a trained run
(``--policy run --run DIR``: replica 0 of a run on ``highway``, acting on each
simulator's own observations). Where a last-bit difference ever flipped a discrete
decision (a lane change, a collision, the nearest-vehicle order), the episodes
part; this counts them and tests whether the two samples of episode returns and
of episode lengths can be told apart (two-sample Kolmogorov-Smirnov,
`scipy.stats.ks_2samp`). Run from the repository root:

    python -m rl.experiments.highway_equality --policy random --seeds 100 --episodes 100 \
        --out highway-equality-random.csv
    python -m rl.train --env highway --env-option 'env_kwargs={"engine": "twin"}' \
        --agent teql --reading paper --seeds 1 --episodes 300 --out teql-highway
    python -m rl.experiments.highway_equality --policy run --run teql-highway \
        --seeds 100 --episodes 100 --out highway-equality-teql.csv

Every finished seed's episodes are appended to ``--out`` at once (`COLUMNS`); a
rerun with the same file skips the seeds it holds, so an interrupted run loses
at most the seed it was playing. A file holds one policy (a run's policy is
named ``run:`` and the run directory's name). highway-env costs about 13 ms a
step here, so 10,000 random-policy episodes take about 50 minutes.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import ks_2samp

from rl.envs.highway_twin import HighwayTwin
from rl.experiments.executor import ExecutorError, read_csv_rows
from rl.validation import check_int
from tensorq.version import add_version_option

COLUMNS = (
    "policy", "seed", "episode", "twin_return", "twin_length", "reference_return",
    "reference_length",
)  # fmt: skip
"""Columns of the output CSV, one row per (seed, episode)."""

Policy = Callable[[np.random.Generator, Any], int]
"""``policy(rng, observation) -> meta-action``."""

POLICIES: dict[str, Policy] = {
    "random": lambda rng, observation: int(rng.integers(5)),
    "idle": lambda rng, observation: 1,
    "faster": lambda rng, observation: 3,
}
"""Open-loop policies of the equality tests: uniform meta-actions, always IDLE, always FASTER."""

TOLERANCE = 1e-9
"""Two episodes are equal when their lengths agree and their returns differ by at most this."""


def run_policy(run_dir: str | Path) -> Policy:
    """Return the greedy policy of replica 0 of the run in ``run_dir`` (a run on ``highway``).

    Raises
    ------
    ValueError
        If ``run_dir`` is not a loadable run (`rl.runs.load.load_run`) or not one on Highway.
    """
    from rl.runs.load import load_run

    loaded = load_run(run_dir)
    if loaded.config.env != "highway":
        raise ValueError(
            f"--run {run_dir} is a run on {loaded.config.env!r}; the policy must be one "
            "trained on 'highway'."
        )
    return lambda rng, observation: int(loaded.policy(observation))


def play(env, choose: Policy, seed: int, episodes: int) -> list[tuple[float, int]]:
    """Return (return, length) of ``episodes`` episodes of ``env`` from ``seed``.

    ``choose(rng, observation)`` gives each action; ``rng`` is seeded ``seed + 10_000``.
    """
    rng = np.random.default_rng(seed + 10_000)
    played = []
    for episode in range(episodes):
        observation, _ = env.reset(seed=seed) if episode == 0 else env.reset()
        total, length, done = 0.0, 0, False
        while not done:
            observation, reward, terminated, truncated, _ = env.step(choose(rng, observation))
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


def run(
    policy: str, seeds: Sequence[int], episodes: int, out: Path, choose: Policy | None = None
) -> None:
    """Play every seed not yet in ``out`` in both simulators and append its rows.

    ``policy`` names the policy in the file; ``choose`` is it (default ``POLICIES[policy]``).
    """
    from rl.envs.highway import Highway  # highway-env, imported only when it is played

    choose = POLICIES[policy] if choose is None else choose
    done = {int(row["seed"]) for row in _read(out, policy)}
    for seed in seeds:
        if seed in done:
            continue
        twin = play(HighwayTwin(), choose, seed, episodes)
        reference = play(Highway(), choose, seed, episodes)
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
        "--policy", choices=[*sorted(POLICIES), "run"], default="random",
        help="uniform meta-actions, always IDLE, always FASTER, or the greedy policy of --run",
    )  # fmt: skip
    parser.add_argument("--run", help="with --policy run: a run directory of training on highway")
    parser.add_argument("--seeds", type=int, default=100, help="copies: seeds 0..N-1")
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--episodes", type=int, default=100, help="episodes per seed")
    parser.add_argument("--out", required=True, help="CSV of per-episode results (appended)")
    parser.add_argument("--summary-only", action="store_true", help="play nothing: summarize --out")
    return add_version_option(parser)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; return its exit code (2: bad input or a damaged --out)."""
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    try:
        check_int("seeds", args.seeds, 1, 10**6)
        check_int("episodes", args.episodes, 1, 10**6)
        if not args.summary_only:
            seeds = range(args.first_seed, args.first_seed + args.seeds)
            if (args.policy == "run") != (args.run is not None):
                raise ValueError("--run DIR goes with --policy run, and only with it.")
            label, choose = args.policy, None
            if args.run is not None:
                label, choose = f"run:{Path(args.run).resolve().name}", run_policy(args.run)
            run(label, seeds, args.episodes, out, choose)
        summary = summarize(out)
    except (ValueError, TypeError, ExecutorError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for key, value in summary.items():
        print(f"{key}: {value:.6g}" if isinstance(value, float) else f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
