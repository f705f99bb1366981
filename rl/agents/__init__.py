"""Agents: TEQL, TLR, LoRa-VI, tabular Q-learning, DQN and discrete SAC.

Every agent implements `rl.agents.base.Agent` and works on integer index
vectors of a `rl.problem.Problem`.
"""

from rl.agents.base import Agent, Transitions

__all__ = ["Agent", "Transitions"]
