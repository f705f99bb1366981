"""Compile (or load from Numba's on-disk cache) the package's kernels once per test session.

Runs tiny training runs with the argument types the package passes, so that
later calls, in this process and in the CLI tests' subprocesses, find the
compiled code. Test-only: the package never imports this module.
"""

from __future__ import annotations

import gymnasium
import numpy as np


def warm_agents() -> None:
    """The compiled tensor-agent step, through the agents' own calls (dense and sparse tables)."""
    from rl.agents.base import Transitions
    from rl.agents.tensor.teql import TEQLAgent, TEQLConfig
    from rl.problems import make_problem
    from rl.seeding import spawn_replicas

    problem = make_problem("cartpole")
    for storage, continuous in (("dense", False), ("sparse", True)):
        streams = [s.agent for s in spawn_replicas([0, 1])]
        config = TEQLConfig(
            engine="compiled", visit_storage=storage, epsilon_start=0.5,
            continuous_random_actions=continuous,
        )  # fmt: skip
        agent = TEQLAgent(problem, config, streams)
        states = np.zeros((2, len(problem.state_dims)), dtype=np.int64)
        active = np.ones(2, dtype=bool)
        actions = agent.act(states, active, ~active)
        agent.observe(Transitions(states, actions, np.zeros(2), states, ~active, active))


def warm_envs() -> None:
    """The environment layer's kernels: CartPole and Pendulum, single and vector, encode/decode."""
    from rl.problems import make_problem

    for name in ("cartpole", "pendulum"):
        problem = make_problem(name)
        envs = gymnasium.make_vec(problem.env_id, num_envs=2, autoreset_mode="Disabled")
        observations, _ = envs.reset(seed=0)
        problem.encode(observations)
        actions = problem.decode(np.zeros((2, 1), dtype=np.int64))
        envs.step(actions, active=np.ones(2, dtype=bool))
        single = gymnasium.make(problem.env_id)
        single.reset(seed=0)
        single.step(actions[0])
        envs.close()
        single.close()


def warm_fused() -> None:
    """`rl.loop.fused.run_steps`, `step_envs` and `reset_envs`, on tiny CartPole runs.

    Every physics passes the same types; the random agent's run takes the compiled copies.
    """
    from rl.runs.config import TrainConfig
    from rl.runs.training import build

    for agent in ("teql-released", "random"):
        config = TrainConfig(env="cartpole", agent=agent, seeds=2, eval_every=1, out="-")
        runner, _ = build(config)
        for _ in runner.episodes(0, 2):
            pass
        runner.close()
