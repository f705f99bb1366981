"""Agent names for the CLI, resolved lazily so that PyTorch stays optional.

Each entry names a module that defines an `rl.agents.base.Agent` subclass, its
frozen config dataclass and, in one object ``SPEC`` (an `AgentSpec`),
what the runner needs of it: the two classes, and through `rl.agents.readings.READINGS`
its readings (config overrides and problem options per problem). ``ALIASES``
keeps older names working: ``teql-released`` is TEQL with the released reading.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

AGENTS: dict[str, str] = {
    "teql": "rl.agents.tensor.teql",
    "tlr": "rl.agents.tensor.tlr",
    "lora-vi": "rl.agents.tables.lora_vi",
    "tabular": "rl.agents.tables.tabular",
    "dqn": "rl.agents.deep.dqn",
    "sac": "rl.agents.deep.sac",
    "random": "rl.agents.random_agent",
}
"""Registered agent name -> module that defines ``SPEC``."""

ALIASES: dict[str, tuple[str, str]] = {"teql-released": ("teql", "released")}
"""Alias -> (agent, reading)."""


def canonical(name: str) -> tuple[str, str | None]:
    """Return (agent, reading the alias implies or None) for a name or an alias."""
    if name in ALIASES:
        return ALIASES[name]
    return name, None


def agent_spec(name: str) -> AgentSpec:
    """Import the module of the agent (or alias) ``name`` and return its ``SPEC``.

    Raises
    ------
    ValueError
        If ``name`` is neither a registered agent nor an alias.
    ImportError
        If the module needs an optional dependency that is missing (PyTorch).
    """
    agent, _ = canonical(name)
    if agent not in AGENTS:
        known = ", ".join(sorted([*AGENTS, *ALIASES]))
        raise ValueError(f"Unknown agent {name!r}; choose one of: {known}.")
    return importlib.import_module(AGENTS[agent]).SPEC


@dataclass(frozen=True)
class AgentSpec:
    """What the runner needs of one agent module, declared once as its ``SPEC``.

    Attributes
    ----------
    name : str
        Registered name (`AGENTS`), the key of `rl.agents.readings.READINGS`.
    agent_class : type
        The `rl.agents.base.Agent` subclass, built as ``(problem, config, streams)``.
    config_class : type
        Its frozen config dataclass.
    """

    name: str
    agent_class: type
    config_class: type
