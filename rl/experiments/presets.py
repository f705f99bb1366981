"""Presets: an environment, an agent and a reading selected together (``--preset NAME``).

``cartpole-teql-released`` is CartPole, TEQL and its released reading
(`rl.agents.readings`); `preset_config` turns a preset into a
`rl.runs.config.TrainConfig` whose fields can then be overridden key by key.
Every environment x agent that runs on it x reading of the agent is a preset.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rl.agents.readings import reading, readings, same_settings
from rl.experiments.tuned_presets import TUNED, override, tuned_preset
from rl.runs.config import ConfigError, TrainConfig, build_dataclass


class Preset(NamedTuple):
    """An environment, an agent and a reading selected together (``--preset NAME``)."""

    env: str
    agent: str
    reading: str

    @property
    def name(self) -> str:
        """``{env}-{agent}-{reading}``."""
        return f"{self.env}-{self.agent}-{self.reading}"


#: Agents that make sense on each environment: LoRa-VI and the tabular agent are
#: infeasible on Highway's 20^9 states.
_AGENTS_ON = {
    "cartpole": ("teql", "tlr", "lora-vi", "dqn", "sac", "tabular", "random"),
    "pendulum": ("teql", "tlr", "lora-vi", "dqn", "sac", "tabular", "random"),
    "highway": ("teql", "tlr", "dqn", "sac", "random"),
    "inventory": ("teql", "tlr", "lora-vi", "dqn", "sac", "tabular", "random"),
    "lowrank": ("teql", "tlr", "lora-vi", "dqn", "sac", "tabular", "random"),
}


def presets() -> dict[str, Preset]:
    """Return every preset by name: each environment x agent that runs on it x reading."""
    table: dict[str, Preset] = {}
    for env, agents in _AGENTS_ON.items():
        for agent in agents:
            for name in readings(agent):
                entry = Preset(env, agent, name)
                table[entry.name] = entry
    return table


def preset(name: str) -> Preset:
    """Return the preset called ``name``.

    Raises
    ------
    ValueError
        In one line, if there is none.
    """
    table = presets()
    if name not in table:
        raise ValueError(
            f"Unknown preset {name!r}; `python -m rl.train --list-presets` lists them."
        )
    return table[name]


def describe(entry: Preset) -> str:
    """Return one line about a preset: its reading and the readings with the same settings."""
    same = [
        other
        for other in readings(entry.agent)
        if other != entry.reading and same_settings(entry.agent, entry.reading, other, entry.env)
    ]
    note = f" (same settings as {', '.join(same)})" if same else ""
    return f"{entry.name}: {reading(entry.agent, entry.reading).description}{note}"


def preset_config(name: str, **fields: Any) -> TrainConfig:
    """Return the `TrainConfig` of preset ``name`` with ``fields`` overriding it key by key.

    ``preset_config("cartpole-teql-released", out="runs/x", seeds=8)`` is
    ``--preset cartpole-teql-released --out runs/x --seeds 8``.
    ``preset_config("tuned", env="CartPole-v1", agent="teql", out="runs/x")`` is the
    tuned preset (`rl.experiments.tuned_presets`), whose ``env_options`` and
    ``agent_params`` tables ``fields`` override key by key.

    Raises
    ------
    ConfigError
        For an unknown preset or an invalid field.
    """
    if name == TUNED:
        values = override(tuned_preset(fields.get("env"), fields.get("agent")), fields)
        return build_dataclass(TrainConfig, values, "the training config")
    try:
        chosen = preset(name)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    values = {"env": chosen.env, "agent": chosen.agent, "reading": chosen.reading, **fields}
    return build_dataclass(TrainConfig, values, "the training config")
