import json
from dataclasses import dataclass
from typing import Literal

import pytest

from rl.config import (
    ConfigError,
    TrainConfig,
    agent_config,
    build_dataclass,
    effective_config,
    effective_env_options,
    load_config_file,
    parse_assignment,
)


@dataclass(frozen=True)
class Example:
    rank: int = 2
    alpha: float = 0.5
    flag: bool = False
    name: str = "a"
    bins: tuple[int, ...] = (3, 4)
    rule: Literal["paper", "released"] = "paper"
    limit: float | None = None

    def __post_init__(self):
        if self.rank < 1:
            raise ValueError(f"The 'rank' parameter must be an int >= 1. Got {self.rank} instead.")


def test_types_are_checked_and_coerced():
    built = build_dataclass(Example, {"alpha": 1, "bins": [5, 6, 7], "limit": 3, "flag": True})
    assert built.alpha == 1.0 and isinstance(built.alpha, float)
    assert built.bins == (5, 6, 7)
    assert built.limit == 3.0 and built.flag is True
    assert build_dataclass(Example, {"limit": None}).limit is None


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"rank": "10"}, "rank"),
        ({"rank": 1.5}, "rank"),
        ({"rank": True}, "rank"),
        ({"alpha": "x"}, "alpha"),
        ({"flag": 1}, "flag"),
        ({"bins": [1, "a"]}, "bins"),
        ({"bins": 3}, "bins"),
        ({"rule": "other"}, "rule"),
        ({"limit": "no"}, "limit"),
        ({"rnak": 3}, "rnak"),
        ({"rank": 0}, "rank"),
    ],
)
def test_bad_values_name_the_key(values, key):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        build_dataclass(Example, values)


def test_train_config_values():
    config = build_dataclass(TrainConfig, {"env": "cartpole", "agent": "random", "out": "x"})
    assert (config.seeds, config.seed, config.eval_every, config.eval_episodes) == (1, 0, 10, 1)
    for key, value in [
        ("seeds", 0),
        ("seed", -1),
        ("episodes", 0),
        ("eval_every", -1),
        ("eval_episodes", 0),
        ("checkpoint_every", 0),
    ]:
        with pytest.raises(ConfigError, match=f"'{key}'"):
            build_dataclass(TrainConfig, {"env": "e", "agent": "a", "out": "o", key: value})
    with pytest.raises(ConfigError, match="'out'"):
        build_dataclass(TrainConfig, {"env": "e", "agent": "a"})
    with pytest.raises(ConfigError, match="'env_options'"):
        build_dataclass(TrainConfig, {"env": "e", "agent": "a", "out": "o", "env_options": 3})


def test_load_toml_and_json(tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text('env = "cartpole"\nseeds = 4\n[agent_params]\ngamma = 0.9\n')
    assert load_config_file(toml) == {"env": "cartpole", "seeds": 4, "agent_params": {"gamma": 0.9}}
    js = tmp_path / "run.json"
    js.write_text(json.dumps({"env": "pendulum"}))
    assert load_config_file(js) == {"env": "pendulum"}
    broken = tmp_path / "broken.toml"
    broken.write_text("env = \n")
    with pytest.raises(ConfigError, match="broken.toml"):
        load_config_file(broken)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config_file(tmp_path / "missing.json")
    yaml = tmp_path / "run.yaml"
    yaml.write_text("env: cartpole\n")
    with pytest.raises(ConfigError, match=".toml or .json"):
        load_config_file(yaml)


def test_parse_assignment():
    assert parse_assignment("rank=10") == ("rank", 10)
    assert parse_assignment("alpha=0.005") == ("alpha", 0.005)
    assert parse_assignment("bins=[10, 20]") == ("bins", [10, 20])
    assert parse_assignment("rule=released") == ("rule", "released")
    assert parse_assignment("flag=true") == ("flag", True)
    with pytest.raises(ConfigError):
        parse_assignment("rank")


def test_agent_config_merges_preset_and_overrides():
    config = TrainConfig(
        env="cartpole", agent="tabular", out="o", agent_params={"gamma": 0.5, "max_entries": 10}
    )
    built = agent_config(config)
    assert (built.gamma, built.max_entries) == (0.5, 10)
    with pytest.raises(ConfigError, match="'gama'"):
        agent_config(
            TrainConfig(env="cartpole", agent="random", out="o", agent_params={"gama": 0.5})
        )
    with pytest.raises(ConfigError, match="'gamma'"):
        agent_config(
            TrainConfig(env="cartpole", agent="random", out="o", agent_params={"gamma": 2.0})
        )
    with pytest.raises(ConfigError, match="'agent'"):
        agent_config(TrainConfig(env="cartpole", agent="nope", out="o"))


def test_problem_options_hook_sits_below_user_options(monkeypatch):
    import rl.agents.random_agent as module

    monkeypatch.setattr(
        module,
        "problem_options",
        lambda name: {"state_bins": 5, "index_rule": "round"},
        raising=False,
    )
    config = TrainConfig(
        env="cartpole", agent="random", out="o", env_options={"index_rule": "floor"}
    )
    assert effective_env_options(config) == {"state_bins": 5, "index_rule": "floor"}


def test_effective_config_is_plain_json_and_rebuilds():
    config = TrainConfig(env="cartpole", agent="tabular", out="o", seeds=2)
    effective = effective_config(config, agent_config(config), {"state_bins": (3, 3)})
    text = json.dumps(effective)
    rebuilt = build_dataclass(TrainConfig, json.loads(text))
    assert agent_config(rebuilt) == agent_config(config)
    assert rebuilt.env_options == {"state_bins": [3, 3]}
