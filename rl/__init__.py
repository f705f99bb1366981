"""Reinforcement learning with low-rank tensor Q-functions.

Environments of the TEQL paper and exact-model factored problems (``rl.envs``),
discretization (``rl.problems.discretize``), agents (``rl.agents``), the training runner
and CLI (``python -m rl.train``) and plots.

Importing ``rl`` registers its environments with Gymnasium under the ``rl/``
namespace, for example ``gymnasium.make("rl/ContinuousCartPole-v0")``.
``rl.make_problem`` turns a bundled problem or any factored Gymnasium
environment (an id, ``"package.module:Env-v0"``, an instance or a factory)
into a `rl.problems.Problem`; ``rl.load_run(RUN_DIR)`` loads a finished run
back (`rl.runs.load`). ``rl.TEQL``, ``rl.TLR``, ``rl.LoRaVI``, ``rl.DQN``,
``rl.SAC`` and ``rl.Tabular`` are learners with ``learn``, ``predict``,
``save`` and ``load`` as in stable-baselines3 (`rl.learners`). See
``docs/your-problem.md`` and ``docs/from-stable-baselines3.md``.
"""

import importlib
from typing import Any

from rl.problems import make_problem, register_envs

_LEARNERS = ("TEQL", "TLR", "LoRaVI", "DQN", "SAC", "Tabular")
"""Learner classes (`rl.learners`), shaped like stable-baselines3's algorithms."""

_SUBMODULES = ("callbacks", "evaluate", "learners")
"""Submodules reachable as attributes of ``rl`` without importing them first."""

__all__ = ["load_run", "make_problem", *_LEARNERS]

register_envs()


def __getattr__(name: str) -> Any:
    # imported on first use: they pull in the agents, checkpoints and runner
    if name == "__version__":  # of the teql distribution (tensorq.version)
        from tensorq.version import __version__

        return __version__
    if name == "load_run":
        from rl.runs.load import load_run

        return load_run
    if name in _LEARNERS:
        from rl import learners

        return getattr(learners, name)
    if name in _SUBMODULES:
        return importlib.import_module(f"rl.{name}")
    raise AttributeError(f"module 'rl' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_SUBMODULES})
