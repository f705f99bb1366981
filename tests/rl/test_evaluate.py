"""User environments on the CLI: rl.train on a module-qualified id with every agent; rl.evaluate."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rl.evaluate import evaluate
from rl.loop.runner import episode_seed
from rl.problems import EnvFailure, make_problem
from rl.runs.config import TrainConfig
from rl.runs.load import load_run
from rl.runs.training import train

ROOT = Path(__file__).resolve().parents[2]
TOY = "tests.rl.toy_envs:Toy-v0"


def _cli(module, *args, timeout=120, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _train(out, agent, *extra):
    done = _cli(
        "rl.train",
        "--env",
        TOY,
        "--agent",
        agent,
        "--seeds",
        2,
        "--episodes",
        4,
        "--eval-every",
        2,
        "--out",
        out,
        "--no-progress",
        "--no-plot",
        *extra,
    )
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.parametrize("agent", ["teql", "tlr", "tabular", "dqn"])
def test_train_cli_on_a_module_qualified_id(tmp_path, agent):
    if agent == "dqn":
        pytest.importorskip("torch")
    out = tmp_path / agent
    _train(out, agent)
    assert json.loads((out / "config.json").read_text())["env"] == TOY
    for name in ("metrics.csv", "checkpoint.npz"):
        assert (out / name).is_file()


def test_box_env_options_and_estimated_bound_are_recorded_and_resume(tmp_path):
    out = tmp_path / "box"
    options = ["state_bins=[6, 5]", "low=-2", "high=[2, 1]", "action_bins=3"]
    flags = [x for option in options for x in ("--env-option", option)]
    done = _cli(
        "rl.train",
        "--env",
        "tests.rl.toy_envs:ToyBox-v0",
        "--agent",
        "teql",
        "--episodes",
        2,
        "--out",
        out,
        "--no-progress",
        "--no-plot",
        *flags,
    )
    assert done.returncode == 0, done.stderr
    env_options = json.loads((out / "config.json").read_text())["env_options"]
    assert env_options["reward_bound_source"] == "estimated" and env_options["reward_bound"] > 0
    resumed = _cli(
        "rl.train", "--resume", out, "--env", "tests.rl.toy_envs:ToyBox-v0", "--episodes", 3,
        "--no-progress", "--no-plot",
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr


def test_evaluate_end_to_end_and_refusals(tmp_path):
    out = tmp_path / "teql"
    _train(out, "teql")
    done = _cli("rl.evaluate", out, "--episodes", 5, "--seed", 3, "--replica", 1, "--env", TOY)
    assert done.returncode == 0, done.stderr
    assert "replica 1 (seed 1)" in done.stdout and "mean ± std" in done.stdout
    assert "IQM [95% CI]" in done.stdout
    again = _cli(
        "rl.evaluate", out, "--episodes", 5, "--seed", 3, "--replica", 1, "--trust-env-module"
    )
    assert again.stdout == done.stdout  # seeded
    for args, match in (
        ((tmp_path / "empty",), "not a run directory"),
        ((tmp_path,), "holds no checkpoint"),
        ((out, "--replica", 2, "--env", TOY), "'replica'"),
        ((out, "--video", tmp_path / "video", "--env", TOY), "does not render 'rgb_array'"),
    ):
        refused = _cli("rl.evaluate", *map(str, args))
        assert refused.returncode == 2, refused.stderr
        assert match in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


def test_evaluate_records_videos_of_an_rgb_array_env(tmp_path):
    out = tmp_path / "run"
    done = _cli(
        "rl.train", "--env", "tests.rl.toy_envs:ToyVideo-v0", "--agent", "tabular", "--seeds", 1,
        "--episodes", 2, "--out", out, "--no-progress", "--no-plot",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = _cli(
        "rl.evaluate", out, "--episodes", 2, "--video", tmp_path / "video", "--trust-env-module"
    )
    assert done.returncode == 0, done.stderr
    videos = sorted((tmp_path / "video").glob("*.mp4"))
    assert len(videos) == 2 and all(v.stat().st_size > 0 for v in videos)


def test_evaluate_and_resume_never_import_a_module_the_run_names(payload_run):
    run_dir, marker = payload_run
    refusal = (
        "error: Refusing to import module 'payload', named by the environment 'payload:Foo-v0' "
        "of the run directory (importing it runs its code); to allow it, rerun with --env "
        "payload:Foo-v0 or --trust-env-module.\n"
    )
    evaluate = ("rl.evaluate", run_dir, "--episodes", 1)
    resume = ("rl.train", "--resume", run_dir, "--episodes", 3, "--no-progress", "--no-plot")
    for command in (evaluate, resume):  # python -m puts the run's parent, with payload.py, first
        refused = _cli(*command, cwd=run_dir.parent)
        assert (refused.returncode, refused.stderr) == (2, refusal)
        assert not marker.exists()
    other = _cli(*evaluate, "--env", "payload:Bar-v0", cwd=run_dir.parent)
    assert other.returncode == 2 and "'env' parameter 'payload:Bar-v0' differs" in other.stderr
    assert not marker.exists()
    for command, allow in ((evaluate, "--trust-env-module"), (resume, "--env=payload:Foo-v0")):
        done = _cli(*command, allow, cwd=run_dir.parent)
        assert done.returncode == 0, done.stderr
        assert marker.read_text() == "payload ran"
        marker.unlink()
    resumed = _cli(*evaluate, "--trust-env-module", cwd=run_dir.parent).stdout
    assert "tabular on payload:Foo-v0, replica 0 (seed 0), after 3 training episodes" in resumed


def test_an_environment_error_during_evaluation_names_episode_replica_and_seed(tmp_path):
    config = TrainConfig(env=TOY, agent="tabular", out=str(tmp_path / "run"), episodes=2)
    train(config)
    loaded = load_run(tmp_path / "run")
    failing = "tests.rl.toy_envs:ToyFailing-v0"
    problem = make_problem(failing, reward_bound=1.1, reward_size=1.0, env_kwargs={"fail_after": 3})
    with pytest.raises(EnvFailure) as failed:
        evaluate(dataclasses.replace(loaded, problem=problem), episodes=2, seed=3)
    assert str(failed.value) == (
        f"Environment {failing!r} failed in step() of evaluation episode 0 (replica 0, seed "
        f"{episode_seed(3, 0)}): ZeroDivisionError: toy failure after 3 steps"
    )
