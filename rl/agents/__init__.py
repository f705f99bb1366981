"""Agents: TEQL, TLR, LoRa-VI, tabular Q-learning, DQN and discrete SAC.

Every agent implements `rl.agents.base.Agent` and works on integer index
vectors of a `rl.problems.Problem`; each class holds B replicas. ``DQNAgent`` and
``DiscreteSAC`` need the
``torch`` extra and are imported on first access, so that importing this
package never imports PyTorch. The learners users train with (`rl.TEQL`,
`rl.DQN`, ...) are built on these classes (`rl.learners`).
"""

from typing import Any

from rl.agents.base import Agent, Transitions
from rl.agents.random_agent import RandomAgent
from rl.agents.tables.lora_vi import LoRaVIAgent
from rl.agents.tables.tabular import TabularQ
from rl.agents.tensor.teql import TEQLAgent
from rl.agents.tensor.tlr import TLRAgent

_TORCH_AGENTS = {"DQNAgent": "rl.agents.deep.dqn", "DiscreteSAC": "rl.agents.deep.sac"}

__all__ = [
    "DQNAgent",
    "Agent",
    "DiscreteSAC",
    "LoRaVIAgent",
    "RandomAgent",
    "TEQLAgent",
    "TLRAgent",
    "TabularQ",
    "Transitions",
]


def __getattr__(name: str) -> Any:
    """Import the PyTorch agents lazily."""
    if name in _TORCH_AGENTS:
        import importlib

        return getattr(importlib.import_module(_TORCH_AGENTS[name]), name)
    raise AttributeError(f"module 'rl.agents' has no attribute {name!r}")
