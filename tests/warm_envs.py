"""Compiling the environment layer's Numba kernels ahead of the tests (used by conftest)."""

import gymnasium
import numpy as np

from rl.problems import make_problem


def warm_kernels() -> None:
    """Compile (or load from Numba's on-disk cache) the environment layer's kernels.

    Steps the CartPole and Pendulum vector environments and encodes and
    decodes through their problems with the argument types the runner uses,
    so that later calls, in this process and in processes started after it,
    find the compiled code (``cartpole_step``, ``pendulum_step``, the vector
    bookkeeping kernel and the grid kernels).
    """
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
