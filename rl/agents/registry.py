"""Agent names for the CLI, resolved lazily so that PyTorch stays optional.

Each entry names a module that defines an `rl.agents.base.Agent` subclass, its
frozen config dataclass, and a preset function ``preset(problem_name) -> dict``
with the paper's hyperparameters for that environment (overrides of the config
defaults; empty where the paper gives none). An entry may name another preset
function of the same module, so that one agent class can appear under two
readings (``teql`` follows the paper's text, ``teql-released`` the authors'
released code).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import NamedTuple


class AgentEntry(NamedTuple):
    """Where one agent lives: module path, agent class, config class, preset function."""

    module: str
    agent: str
    config: str
    preset: str = "preset"


AGENTS: dict[str, AgentEntry] = {
    "teql": AgentEntry("rl.agents.teql", "TEQL", "TEQLConfig"),
    "teql-released": AgentEntry("rl.agents.teql", "TEQL", "TEQLConfig", "released_preset"),
    "tlr": AgentEntry("rl.agents.tlr", "TLR", "TLRConfig"),
    "lora-vi": AgentEntry("rl.agents.lora_vi", "LoRaVI", "LoRaVIConfig"),
    "tabular": AgentEntry("rl.agents.tabular", "TabularQ", "TabularQConfig"),
    "dqn": AgentEntry("rl.agents.dqn", "DQN", "DQNConfig"),
    "sac": AgentEntry("rl.agents.sac", "DiscreteSAC", "DiscreteSACConfig"),
    "random": AgentEntry("rl.agents.random_agent", "RandomAgent", "RandomConfig"),
}


def agent_module(name: str) -> ModuleType:
    """Import and return the module of the agent called ``name``.

    Raises
    ------
    ValueError
        If ``name`` is not a registered agent.
    """
    if name not in AGENTS:
        known = ", ".join(sorted(AGENTS))
        raise ValueError(f"Unknown agent {name!r}; choose one of: {known}.")
    return importlib.import_module(AGENTS[name].module)
