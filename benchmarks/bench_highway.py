"""Highway: microseconds per environment step, highway-env against its compiled twin.

For each B, highway-env (`rl.envs.highway.Highway`, the paper's
configuration) is B separate environments stepped in a Python loop, and the
twin is one `rl.envs.highway_twin.HighwayTwinVector` of B copies (NEXT_STEP
autoreset); both play uniformly random meta-actions from seeds 0..B-1, and
ended episodes start again. The twin's kernels are compiled (and the
highway-env copies built and reset) before the clock starts. The clock is
this process's CPU time (`time.process_time`; both simulators run on one
thread), so that other load on a shared machine does not count. Run with

    python -m benchmarks highway [--batches 1 10 100 1000] [--reference-steps N]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import time

import numpy as np


def reference_us(batch: int, env_steps: int) -> float:
    """Microseconds per env-step of B highway-env copies stepped in turn."""
    from rl.envs.highway import Highway

    envs = [Highway() for _ in range(batch)]
    for seed, env in enumerate(envs):
        env.reset(seed=seed)
    rounds = max(1, math.ceil(env_steps / batch))
    actions = np.random.default_rng(0).integers(5, size=(rounds, batch))
    start = time.process_time()
    for row in actions:
        for env, action in zip(envs, row, strict=True):
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
    elapsed = time.process_time() - start
    for env in envs:
        env.close()
    return 1e6 * elapsed / (rounds * batch)


def twin_us(batch: int, min_seconds: float) -> float:
    """Microseconds per env-step of one B-copy twin, timed over at least ``min_seconds``."""
    from rl.envs.highway_twin import HighwayTwinVector

    twin = HighwayTwinVector(batch)
    twin.reset(seed=0)
    rng = np.random.default_rng(0)
    twin.step(rng.integers(5, size=batch))  # compiles on the first call
    rounds, elapsed = 0, 0.0
    block = max(1, 20_000 // batch)
    while elapsed < min_seconds:
        actions = rng.integers(5, size=(block, batch))
        start = time.process_time()
        for row in actions:
            twin.step(row)
        elapsed += time.process_time() - start
        rounds += block
    return 1e6 * elapsed / (rounds * batch)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 10, 100, 1000])
    parser.add_argument(
        "--reference-steps",
        type=int,
        default=300,
        help="highway-env env-steps timed per B (at least one round of B)",
    )
    parser.add_argument("--seconds", type=float, default=1.0, help="twin time per B")
    args = parser.parse_args(argv)
    if importlib.util.find_spec("highway_env") is None:
        print("highway-env is not installed: pip install teql[highway]")
        return
    print(f"{'B':>6s} {'highway-env us/step':>20s} {'twin us/step':>13s} {'speed-up':>9s}")
    for batch in args.batches:
        reference = reference_us(batch, args.reference_steps)
        twin = twin_us(batch, args.seconds)
        print(f"{batch:6d} {reference:20,.1f} {twin:13,.2f} {reference / twin:8,.0f}x", flush=True)


if __name__ == "__main__":
    main()
