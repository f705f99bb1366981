"""Reinforcement learning with low-rank tensor Q-functions.

Environments of the TEQL paper and exact-model factored problems (``rl.envs``),
discretization (``rl.problems.discretize``), agents (``rl.agents``), the training runner
and CLI (``python -m rl.train``) and plots.

Importing ``rl`` registers its environments with Gymnasium under the ``rl/``
namespace, for example ``gymnasium.make("rl/ContinuousCartPole-v0")``.
``rl.make_problem`` turns a bundled problem or any factored Gymnasium
environment (an id, ``"package.module:Env-v0"``, an instance or a factory)
into a `rl.problems.Problem`; ``rl.load_run(RUN_DIR)`` loads a finished run
back (`rl.runs.load`). See ``docs/your-problem.md``.
"""

from typing import Any

from rl.problems import make_problem, register_envs

__all__ = ["load_run", "make_problem"]

register_envs()


def __getattr__(name: str) -> Any:
    if name == "load_run":  # imported on first use: it pulls in the agents and checkpoints
        from rl.runs.load import load_run

        return load_run
    raise AttributeError(f"module 'rl' has no attribute {name!r}")
