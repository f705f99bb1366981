"""The defaults a user expects: a TEQL reading that learns, Highway on its twin, torch's index."""

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from rl import train as train_cli
from rl.agents.readings import NOT_LEARNING, default_reading, not_learning
from rl.problems import make_problem
from rl.problems.bundled import HIGHWAY_TWIN_ID, describe_simulator
from rl.reproduce import build_parser as reproduce_parser
from rl.reproduce import make_plan
from rl.runs.config import TrainConfig, recorded_run_config, resolve_agent

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["--seeds", "1", "--episodes", "1", "--eval-every", "0", "--no-progress", "--no-plot"]


# ----------------------------------------------------------------------------- readings


@pytest.mark.parametrize("env", ["cartpole", "pendulum", "highway", "rl/ContinuousCartPole-v0"])
def test_teql_defaults_to_a_reading_that_learns_the_papers_problems(env):
    def chosen(agent, **extra):
        return resolve_agent(TrainConfig(env=env, agent=agent, out="-", **extra))[0].reading

    assert chosen("teql") == "stable"
    assert chosen("teql", reading="paper") == "paper"
    assert chosen("teql-released") == "released"
    assert chosen("tlr") == "paper"


def test_the_readings_known_not_to_learn_are_data_and_never_a_default():
    assert set(NOT_LEARNING[("teql", "paper")]) == {"cartpole", "pendulum"}
    for (agent, reading), problems in NOT_LEARNING.items():
        assert default_reading(agent) != reading
        assert all(not_learning(agent, reading, problem) for problem in problems)
    assert not_learning("teql", "paper", "inventory") is None
    assert not_learning("teql", "stable", "cartpole") is None
    assert not_learning("tlr", "paper", "cartpole") is None


def _train(tmp_path, name, *argv, capsys):
    assert train_cli.main([*argv, *QUICK, "--out", str(tmp_path / name)]) == 0
    return capsys.readouterr().err.splitlines()


def test_choosing_a_reading_known_not_to_learn_prints_one_line(tmp_path, capsys):
    err = _train(tmp_path, "p", "--env", "cartpole", "--agent", "teql", "--reading", "paper",
                 capsys=capsys)  # fmt: skip
    notes = [line for line in err if "known not to learn" in line]
    assert notes == [not_learning("teql", "paper", "cartpole")]
    assert "--reading stable learns it" in notes[0]
    quiet = _train(tmp_path, "s", "--env", "cartpole", "--agent", "teql", capsys=capsys)
    assert not [line for line in quiet if "known not to learn" in line]
    recorded = json.loads((tmp_path / "s" / "config.json").read_text())
    assert (recorded["reading"], recorded["agent_params"]["update"]) == ("stable", "stable")


def test_reproduce_defaults_to_the_reading_that_learns():
    assert reproduce_parser().parse_args(["comparison"]).reading == "stable"
    argv = ["comparison", "--env", "cartpole", "--episodes-scale", "0.1", "--seeds", "2"]
    plan = make_plan(reproduce_parser().parse_args(argv))
    readings = {p.task.name: p.task.config.reading for p in plan.tasks}
    assert readings["cartpole/teql"] == "stable"
    assert readings["cartpole/tlr"] == readings["cartpole/dqn"] == "paper"


# ----------------------------------------------------------------------------- Highway


def test_highway_runs_on_the_twin_wherever_it_covers_the_configuration():
    for options in ({}, {"normalization": "informative"}):
        problem = make_problem("highway", env_kwargs=dict(options))
        assert problem.env_id == HIGHWAY_TWIN_ID and problem.vectorized
        assert problem.recorded_options() == {"env_kwargs": {**options, "engine": "twin"}}
        assert "compiled twin" in describe_simulator(problem)
    other = make_problem("highway", env_kwargs={"config": {"lanes_count": 4}})
    assert other.env_id == "rl/Highway-v0" and "engine" not in other.env_kwargs
    assert other.recorded_options()["env_kwargs"]["engine"] == "reference"
    assert "does not cover the options ['config']" in describe_simulator(other)
    asked = make_problem("highway", env_kwargs={"engine": "reference"})
    assert asked.env_id == "rl/Highway-v0" and asked.recorded_options() == {}
    assert "'reference' was asked for" in describe_simulator(asked)
    assert describe_simulator(make_problem("cartpole")) is None


def test_train_on_highway_says_which_simulator_and_records_it(tmp_path, capsys):
    err = _train(tmp_path, "hw", "--env", "highway", "--agent", "random", capsys=capsys)
    assert [line for line in err if line.startswith("Highway runs on")] == [
        describe_simulator(make_problem("highway"))
    ]
    recorded = json.loads((tmp_path / "hw" / "config.json").read_text())
    assert recorded["env_options"] == {"env_kwargs": {"engine": "twin"}}
    argv = ["--resume", str(tmp_path / "hw"), "--episodes", "2", "--no-progress", "--no-plot"]
    assert train_cli.main(argv) == 0


def test_a_highway_run_recorded_without_a_simulator_continues_on_highway_env():
    old = {"env": "highway", "agent": "random", "out": "o", "env_options": {}}
    assert recorded_run_config(old)["env_options"] == {"env_kwargs": {"engine": "reference"}}
    twin = {**old, "env_options": {"env_kwargs": {"engine": "twin"}}}
    assert recorded_run_config(twin)["env_options"] == twin["env_options"]
    assert recorded_run_config({**old, "env": "cartpole"})["env_options"] == {}


# ----------------------------------------------------------------------------- bin/setup

FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$CALLS"
case "$*" in
  *--dry-run*) exit "$DRY_RUN_STATUS" ;;
  *sysconfig*) echo "$SITE" ;;
esac
exit 0
"""


def _setup(tmp_path, dry_run_status):
    """Run bin/setup in a copy of the repository whose .venv/bin/python records its calls."""
    repo = tmp_path / f"repo-{dry_run_status}"
    (repo / "bin").mkdir(parents=True)
    shutil.copy(ROOT / "bin" / "setup", repo / "bin" / "setup")
    shutil.copytree(ROOT / "requirements", repo / "requirements")
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    python = repo / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    calls, site = tmp_path / f"calls-{dry_run_status}", tmp_path / f"site-{dry_run_status}"
    site.mkdir()
    env = {**os.environ, "CALLS": str(calls), "DRY_RUN_STATUS": str(dry_run_status)}
    done = subprocess.run(
        ["bash", str(repo / "bin" / "setup")], env={**env, "SITE": str(site)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [line for line in calls.read_text().splitlines() if "pip install" in line], done.stderr


def _pin(name):
    lock = (ROOT / "requirements" / "lock.txt").read_text().splitlines()
    return next(line for line in lock if line.startswith(f"{name}=="))


def test_setup_keeps_a_local_torch_and_uses_pytorchs_index_only_without_one(tmp_path):
    index = "--extra-index-url https://download.pytorch.org/whl/cpu"
    local, _ = _setup(tmp_path, 0)  # pip finds the pinned build with its own configuration
    assert not [call for call in local if "extra-index-url" in call]
    assert any(f"--dry-run --no-deps {_pin('torch')}" in call for call in local)
    remote, err = _setup(tmp_path, 1)  # it does not: PyTorch's CPU index, for torch alone
    with_index = [call for call in remote if "extra-index-url" in call]
    assert len(with_index) == 1 and index in with_index[0] and _pin("torch") in with_index[0]
    assert "-r requirements/lock.txt" not in with_index[0]
    assert "download.pytorch.org/whl/cpu" in err
    order = [call for call in remote if "requirements/lock.txt" in call or index in call]
    assert index in order[0]  # torch first, so the lock finds it installed
