"""Agents: TEQL, TLR, LoRa-VI, tabular Q-learning, DQN and discrete SAC.

Every agent implements `rl.agents.base.Agent` and works on integer index
vectors of a `rl.problems.Problem`. ``DQN`` and ``DiscreteSAC`` need the
``torch`` extra and are imported on first access, so that importing this
package never imports PyTorch.
"""

from typing import Any

from rl.agents.base import Agent, Transitions
from rl.agents.lora_vi import LoRaVI
from rl.agents.random_agent import RandomAgent
from rl.agents.tabular import TabularQ
from rl.agents.teql import TEQL
from rl.agents.tlr import TLR

_TORCH_AGENTS = {"DQN": "rl.agents.dqn", "DiscreteSAC": "rl.agents.sac"}

__all__ = [
    "DQN",
    "Agent",
    "DiscreteSAC",
    "LoRaVI",
    "RandomAgent",
    "TEQL",
    "TLR",
    "TabularQ",
    "Transitions",
]


def __getattr__(name: str) -> Any:
    """Import the PyTorch agents lazily."""
    if name in _TORCH_AGENTS:
        import importlib

        return getattr(importlib.import_module(_TORCH_AGENTS[name]), name)
    raise AttributeError(f"module 'rl.agents' has no attribute {name!r}")
