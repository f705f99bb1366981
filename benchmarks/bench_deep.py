"""Microseconds per agent-step of the deep baselines on CartPole-sized inputs.

Run with ``python benchmarks/bench_deep.py``. The problem has 4 state
components of 10 bins and 10 actions (in = 4, |A| = 10), the parameter-matched
widths (DQN hidden 46, SAC hidden 15), B = 1, one torch thread. Each agent
first runs past its warm-up, then ``act`` + ``observe`` (one gradient step)
are timed on random transitions; ``act`` and ``greedy`` alone are timed too.
Reports the best of 5 repeats (the least disturbed by other processes).
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np
import torch

from rl.agents.base import Transitions
from rl.agents.dqn import DQN, DQNConfig
from rl.agents.dqn import preset as dqn_preset
from rl.agents.sac import DiscreteSAC, DiscreteSACConfig
from rl.agents.sac import preset as sac_preset
from rl.problems import Problem
from rl.seeding import replica_streams

STATE_DIMS = (10, 10, 10, 10)
N_ACTIONS = 10


def make_problem() -> Problem:
    return Problem(
        name="cartpole-sized",
        env_id="none",
        env_kwargs={},
        state_dims=STATE_DIMS,
        action_dims=(N_ACTIONS,),
        reward_bound=1.0,
        encode=lambda obs: obs,
        decode=lambda actions: actions,
    )


def make_agents(replicas: int) -> dict[str, object]:
    streams = [replica_streams(seed).agent for seed in range(replicas)]
    problem = make_problem()
    return {
        "dqn": DQN(problem, DQNConfig(**dqn_preset("cartpole")), streams),
        "sac": DiscreteSAC(problem, DiscreteSACConfig(**sac_preset("cartpole")), streams),
    }


def time_agent(agent, replicas: int, number: int) -> dict[str, float]:
    """Return best-of-5 microseconds per call of step (act + observe), act and greedy."""
    rng = np.random.default_rng(0)
    active = np.ones(replicas, dtype=bool)
    pool = [rng.integers(0, STATE_DIMS, size=(replicas, len(STATE_DIMS))) for _ in range(64)]
    rewards = rng.normal(size=replicas)
    terminated = np.zeros(replicas, dtype=bool)
    counter = iter(range(10**9))

    def step() -> None:
        i = next(counter)
        states, next_states = pool[i % 64], pool[(i + 1) % 64]
        actions = agent.act(states, active)
        agent.observe(Transitions(states, actions, rewards, next_states, terminated, active))

    for _ in range(600):  # past the 500-step warm-up: every step now trains
        step()
    result = {}
    for name, fn in (
        ("step", step),
        ("act", lambda: agent.act(pool[0], active)),
        ("greedy", lambda: agent.greedy(pool[0])),
    ):
        best = min(timeit.repeat(fn, number=number, repeat=5)) / number
        result[name] = best * 1e6 / replicas
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=300, help="calls per timing repeat")
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        print(f"torch {torch.__version__}, 1 thread; in=4, |A|=10; microseconds per replica-step")
        print(f"{'agent':<6} {'B':>3} {'params':>7} {'act+observe':>12} {'act':>8} {'greedy':>8}")
        for replicas in (1, 8):
            for name, agent in make_agents(replicas).items():
                t = time_agent(agent, replicas, number=args.number)
                print(
                    f"{name:<6} {replicas:>3} {agent.n_params:>7} {t['step']:>12.0f} "
                    f"{t['act']:>8.0f} {t['greedy']:>8.0f}"
                )
    finally:
        torch.set_num_threads(threads)


if __name__ == "__main__":
    main()
