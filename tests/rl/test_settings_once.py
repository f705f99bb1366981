"""A run's settings are resolved in one pass (rl.runs.config.resolve_settings, rl.runs.training).

`TrainConfig` keeps what it is given and imports no agent; `resolve_settings` looks the
reading up once and builds the agent config once; `rl.runs.training.build_run` builds
the agent once, with every replica, whatever their number B.
"""

import dataclasses
import json
import subprocess
import sys

import pytest

from rl.agents import readings
from rl.agents.tensor.teql import TEQLAgent, TEQLConfig
from rl.runs.config import TrainConfig, resolve_agent
from rl.runs.training import build

CONSTRUCTION = """
import json, sys
from rl.runs.config import TrainConfig
configs = [TrainConfig(env="cartpole", agent="teql-released", out="o"),
           TrainConfig(env="inventory", agent="teql", out="o", seeds=3)]
print(json.dumps({"modules": sorted(m for m in sys.modules if m.startswith("rl.agents")),
                  "fields": [[c.agent, c.reading, c.seeds] for c in configs]}))
"""


def test_train_config_imports_no_agent_and_keeps_what_it_is_given():
    completed = subprocess.run(
        [sys.executable, "-c", CONSTRUCTION], capture_output=True, text=True, check=True
    )
    seen = json.loads(completed.stdout)
    assert seen["modules"] == []
    assert seen["fields"] == [["teql-released", None, 1], ["teql", None, 3]]


def test_resolving_the_agent_returns_a_new_config_and_changes_none():
    given = TrainConfig(env="cartpole", agent="teql-released", out="o")
    resolved, spec, reading = resolve_agent(given)
    assert (given.agent, given.reading) == ("teql-released", None)
    assert (resolved.agent, resolved.reading) == ("teql", "released")
    assert dataclasses.replace(resolved, agent=given.agent, reading=None) == given
    assert spec.agent_class is TEQLAgent
    assert reading is readings.READINGS["teql"]["released"]


@pytest.mark.parametrize("seeds", [1, 64, 65, 100])
def test_the_reading_is_looked_up_and_the_agent_config_and_agent_built_once(monkeypatch, seeds):
    """Inventory has its own discount and a reward bound, which change TEQL's stable config."""
    calls = {"reading": 0, "config": 0, "agent": 0}

    def counted(key, original):
        def wrapper(*args, **kwargs):
            calls[key] += 1
            return original(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(readings, "reading", counted("reading", readings.reading))
    monkeypatch.setattr(TEQLConfig, "__post_init__", counted("config", TEQLConfig.__post_init__))
    monkeypatch.setattr(TEQLAgent, "__init__", counted("agent", TEQLAgent.__init__))
    runner, effective = build(TrainConfig(env="inventory", agent="teql", out="-", seeds=seeds))
    runner.close()
    assert calls == {"reading": 1, "config": 1, "agent": 1}
    assert runner.agent.q_.replicas == seeds
    assert runner.agent.config.gamma == effective["agent_params"]["gamma"] != TEQLConfig.gamma
