"""Environment steps per second, single (gymnasium.make) and vectorized (B = 100).

CartPole and Pendulum use their NumPy vector versions (``make_vec``, the
registered ``vector_entry_point``); the other environments use Gymnasium's
``SyncVectorEnv`` (a Python loop over copies). With highway-env installed, the
last row times Highway's compiled twin (`rl.envs.highway_twin`, one vector env
of B copies) against B highway-env copies, per env-step in CPU time, in this
run (`benchmarks.bench_highway`). Run with

    python benchmarks/bench_envs.py [--steps N] [--no-highway]
"""

from __future__ import annotations

import argparse
import importlib.util
import time

import gymnasium as gym

from rl.problems import ENVIRONMENTS


def single_rate(env_id: str, steps: int) -> float:
    env = gym.make(env_id)
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(steps)]
    env.reset(seed=0)
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def vector_rate(env_id: str, num_envs: int, steps: int) -> float:
    env = gym.make_vec(env_id, num_envs=num_envs)
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(steps)]
    env.reset(seed=0)
    start = time.perf_counter()
    for action in actions:
        env.step(action)
    return steps * num_envs / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=5000, help="steps per measurement")
    parser.add_argument("--num-envs", type=int, default=100, help="vector copies B")
    parser.add_argument("--no-highway", action="store_true", help="skip rl/Highway-v0")
    args = parser.parse_args(argv)
    has_highway = importlib.util.find_spec("highway_env") is not None
    print(
        f"{'environment':28s} {'single steps/s':>15s} {'B=' + str(args.num_envs) + ' steps/s':>16s}"
    )
    for entry in ENVIRONMENTS.values():
        env_id = entry.env_id
        steps = args.steps
        if env_id == "rl/Highway-v0":
            if args.no_highway or not has_highway:
                continue
            steps = max(20, args.steps // 100)  # about 13 ms per step
        single = single_rate(env_id, steps)
        vector_steps = max(2, steps // args.num_envs) if not entry.vectorized else steps
        vector = vector_rate(env_id, args.num_envs, vector_steps)
        print(f"{env_id:28s} {single:15,.0f} {vector:16,.0f}")
    if has_highway and not args.no_highway:
        from benchmarks.bench_highway import reference_us, twin_us

        reference = reference_us(args.num_envs, max(args.num_envs, args.steps // 10))
        twin = twin_us(args.num_envs, 2.0)
        print(
            f"twin vs highway-env at B = {args.num_envs}: {twin:.2f} us against {reference:,.0f} "
            f"us per env-step (CPU time), {reference / twin:,.0f}x"
        )


if __name__ == "__main__":
    main()
