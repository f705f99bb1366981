"""Presets and readings (rl.agents.readings), their resolution (rl.runs.config), the CLI flags."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rl.agents import readings
from rl.agents.param_formulas import cp_params
from rl.agents.tables.tabular import TabularQConfig
from rl.experiments import presets
from rl.experiments.presets import preset_config
from rl.runs.config import ConfigError, TrainConfig, resolve_agent, resolve_settings
from rl.runs.metrics import read_metrics
from rl.runs.training import build, train
from rl.train import build_parser, config_from_args

ROOT = Path(__file__).resolve().parents[2]
ALL_PRESETS = sorted(presets.presets())


def _cli(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "rl.train", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize("name", ALL_PRESETS)
def test_every_preset_loads_validates_and_runs_3_episodes(tmp_path, name):
    config = preset_config(
        name, out=str(tmp_path), seeds=1, episodes=3, eval_every=3, checkpoint_every=3
    )
    chosen = presets.preset(name)
    assert (config.env, config.agent, config.reading) == tuple(chosen)
    result = train(config)
    assert result.episodes_done == 3
    table = read_metrics(tmp_path / "metrics.csv")
    assert len(table["episode"]) == 3 and np.isfinite(table["greedy_return"][-1])
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["reading"] == chosen.reading and saved["agent"] == chosen.agent


def test_list_presets_lists_every_preset_one_a_line():
    completed = _cli("--list-presets")
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == list(presets.presets())
    assert set(ALL_PRESETS) >= {
        "cartpole-teql-paper",
        "cartpole-teql-released",
        "pendulum-tlr-released",
        "highway-teql-released",
    }
    same = next(line for line in lines if line.startswith("cartpole-tabular-paper:"))
    assert "same settings as released" in same
    assert "same settings" not in next(line for line in lines if "cartpole-teql-paper:" in line)


def test_readings_that_agree_are_the_same_settings():
    for agent in ("lora-vi", "tabular", "random"):
        for env in ("cartpole", "pendulum", "inventory"):
            assert readings.same_settings(agent, "paper", "released", env)
    assert not readings.same_settings("teql", "paper", "released", "cartpole")
    assert not readings.same_settings("dqn", "paper", "released", "cartpole")


def test_tlr_off_the_papers_problems_explores_and_discounts_as_tabular_does(tmp_path):
    tabular = TabularQConfig()
    schedule = ("gamma", "epsilon_start", "epsilon_decay", "epsilon_min")
    for reading in ("paper", "released"):
        config = TrainConfig(env="FrozenLake-v1", agent="tlr", out=str(tmp_path), reading=reading)
        agent = resolve_settings(config).agent
        assert [getattr(agent, k) for k in schedule] == [getattr(tabular, k) for k in schedule]
        assert (agent.gamma, agent.epsilon_min) == (0.99, 0.05)  # not TLRConfig's 0.9 and 0
        # the paper's problems keep the released runs' settings, without a floor
        for problem, column in readings.RELEASED_TABLE.items():
            config = TrainConfig(env=problem, agent="tlr", out=str(tmp_path), reading=reading)
            agent = resolve_settings(config, build_problem=False).agent
            assert [getattr(agent, k) for k in schedule] == [column[k] for k in schedule]
            assert agent.epsilon_min == 0.0 and agent.gamma < 0.99
    # a problem's own discount still wins (inventory: 0.9), the schedule stays
    config = TrainConfig(env="inventory", agent="tlr", out=str(tmp_path))
    agent = resolve_settings(config).agent
    assert (agent.gamma, agent.epsilon_decay, agent.epsilon_min) == (0.9, 0.9999, 0.05)


def test_budgets_and_widths_come_from_the_formulas():
    assert [readings.budget(p) for p in ("cartpole", "pendulum", "highway")] == [700, 500, 3700]
    assert readings.budget("cartpole") == cp_params(10, (10, 10, 20, 20, 10))
    widths = {
        (p, a): readings.matched_hidden(a, p) for p in readings.PAPER_TABLE for a in ("dqn", "sac")
    }
    assert widths == {
        ("pendulum", "dqn"): 38, ("pendulum", "sac"): 12, ("cartpole", "dqn"): 46,
        ("cartpole", "sac"): 15, ("highway", "dqn"): 246, ("highway", "sac"): 82,
    }  # fmt: skip
    from analysis.params import matched_widths

    assert widths == {(p, a): w for (p, a), w in matched_widths().items()}


def test_precedence_defaults_reading_file_set(tmp_path):
    # defaults: TEQLConfig.max_inner = 10; reading released on cartpole: 5
    base = TrainConfig(env="cartpole", agent="teql", out="o", reading="paper")
    assert _agent_config(base).max_inner == 10
    released = TrainConfig(env="cartpole", agent="teql", out="o", reading="released")
    assert _agent_config(released).max_inner == 5
    # the config file beats the reading, --set beats the file
    path = tmp_path / "run.toml"
    path.write_text(
        'env = "cartpole"\nagent = "teql"\nreading = "released"\nout = "o"\n'
        "[agent_params]\nmax_inner = 3\nc = 0.5\n"
    )
    args = build_parser().parse_args(["--config", str(path), "--set", "max_inner=2"])
    config = config_from_args(args)
    cfg = _agent_config(config)
    assert (cfg.max_inner, cfg.c, cfg.kappa) == (2, 0.5, 0.0)
    # --preset is below the file and the flags
    args = build_parser().parse_args(
        ["--preset", "pendulum-tlr-released", "--reading", "paper", "--out", "o"]
    )
    config = config_from_args(args)
    assert (config.env, config.agent, config.reading) == ("pendulum", "tlr", "paper")
    args = build_parser().parse_args(["--preset", "pendulum-tlr-released", "--config", str(path)])
    assert config_from_args(args).env == "cartpole"


def test_problem_discount_applies_unless_the_config_sets_gamma(tmp_path):
    for reading in ("paper", "released"):
        config = TrainConfig(env="inventory", agent="teql", out=str(tmp_path), reading=reading)
        runner, effective = build(config)
        runner.close()
        assert runner.agent.config.gamma == 0.9 == effective["agent_params"]["gamma"]
    config = TrainConfig(env="lowrank", agent="dqn", out=str(tmp_path), agent_params={"gamma": 0.5})
    runner, effective = build(config)
    runner.close()
    assert runner.agent.config.gamma == 0.5 == effective["agent_params"]["gamma"]
    runner, _ = build(TrainConfig(env="cartpole", agent="tabular", out=str(tmp_path)))
    runner.close()
    assert runner.agent.config.gamma == 0.99  # the paper's environments define no discount


def _resolved(**values):
    """The config of ``values`` with its agent and reading resolved (`resolve_agent`)."""
    return resolve_agent(TrainConfig(**values))[0]


def test_teql_released_alias(tmp_path):
    config = _resolved(env="cartpole", agent="teql-released", out="o")
    assert (config.agent, config.reading) == ("teql", "released")
    assert config == _resolved(env="cartpole", agent="teql", reading="released", out="o")
    with pytest.raises(ConfigError, match="conflicts"):
        _resolved(env="cartpole", agent="teql-released", reading="paper", out="o")


def test_unknown_reading_is_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match="Agent 'dqn' has no reading 'stable'"):
        _resolved(env="cartpole", agent="dqn", reading="stable", out="o")
    completed = _cli("--env", "cartpole", "--agent", "tlr", "--reading", "nope", "--out", tmp_path)
    assert completed.returncode == 2
    assert completed.stderr.strip().count("\n") == 0
    assert "has no reading 'nope'; its readings: paper, released" in completed.stderr
    completed = _cli("--preset", "nowhere-teql-paper", "--out", tmp_path)
    assert completed.returncode == 2 and "Unknown preset" in completed.stderr


def test_config_json_reruns_and_resume_compares_effective_configs(tmp_path):
    first = tmp_path / "a"
    completed = _cli(
        "--preset", "cartpole-tlr-released", "--episodes", 3, "--out", first, "--no-plot",
        "--no-progress",
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    saved = json.loads((first / "config.json").read_text())
    assert saved["reading"] == "released"
    assert saved["agent_params"]["continuous_random_actions"] is True
    again = tmp_path / "b"
    completed = _cli("--config", first / "config.json", "--out", again, "--no-plot")
    assert completed.returncode == 0, completed.stderr
    a, b = read_metrics(first / "metrics.csv"), read_metrics(again / "metrics.csv")
    np.testing.assert_array_equal(a["return"], b["return"])
    completed = _cli("--resume", first, "--episodes", 5, "--no-plot", "--no-progress")
    assert completed.returncode == 0, completed.stderr
    completed = _cli("--resume", first, "--episodes", 6, "--reading", "paper", "--no-plot")
    assert completed.returncode == 2 and "'reading'" in completed.stderr


def _agent_config(config):
    """The effective agent config of ``config`` (`rl.runs.config.resolve_settings`)."""
    return resolve_settings(config, build_problem=False).agent
