"""Reinforcement learning with low-rank tensor Q-functions.

Environments of the TEQL paper and exact-model factored problems (``rl.envs``),
discretization (``rl.discretize``), agents (``rl.agents``), the training runner
and CLI (``python -m rl.train``) and plots.

Importing ``rl`` registers its environments with Gymnasium under the ``rl/``
namespace, for example ``gymnasium.make("rl/ContinuousCartPole-v0")``.
"""

from rl.envs import register_envs

register_envs()
