import functools
import json
import os
import pickle
import random
import shlex
import signal
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from rl import train as train_cli
from rl.agents.readings import AGENT_STEPS
from rl.runs import training as runner
from rl.runs.checkpoint import load_checkpoint
from rl.runs.metrics import COLUMNS, read_metrics
from tests.run_records import rewrite_recorded_config

ROOT = Path(__file__).resolve().parents[2]
EXCEPT_WALL = [c for c in COLUMNS if c != "wall_time"]


def _cli(*args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "rl.train", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _assert_same(path_a, path_b):
    a, b = read_metrics(path_a), read_metrics(path_b)
    for column in EXCEPT_WALL:
        np.testing.assert_array_equal(a[column], b[column], err_msg=column)


def test_end_to_end_and_config_json_reruns(tmp_path):
    out = tmp_path / "run"
    done = _cli(
        "--env",
        "cartpole",
        "--agent",
        "random",
        "--seeds",
        2,
        "--episodes",
        20,
        "--eval-every",
        5,
        "--out",
        out,
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    for name in ("metrics.csv", "config.json", "learning_curve.png", "checkpoint.npz"):
        assert (out / name).is_file(), name
    assert "n_params" in done.stdout and "IQM" in done.stdout and "per 1000 episodes" in done.stdout
    assert "Traceback" not in done.stderr
    config = json.loads((out / "config.json").read_text())
    assert (config["env"], config["seeds"], config["eval_every"]) == ("cartpole", 2, 5)
    assert config["agent_params"] == {"gamma": 0.99}
    assert (out / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    again = _cli(
        "--config", out / "config.json", "--out", tmp_path / "again", "--no-progress", "--no-plot"
    )
    assert again.returncode == 0, again.stderr
    _assert_same(out / "metrics.csv", tmp_path / "again" / "metrics.csv")


def test_toml_config_and_set_overrides(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text(
        'env = "rl/Inventory-v0"\nagent = "tabular"\nepisodes = 3\n'
        "[agent_params]\ngamma = 0.8\n[env_options]\nenv_kwargs = {max_level = 3}\n"
    )
    out = tmp_path / "run"
    done = _cli(
        "--config", config, "--set", "step_size=0.5", "--out", out, "--no-progress", "--no-plot"
    )
    assert done.returncode == 0, done.stderr
    saved = json.loads((out / "config.json").read_text())
    assert saved["agent_params"]["gamma"] == 0.8 and saved["agent_params"]["step_size"] == 0.5
    assert saved["env_options"] == {"env_kwargs": {"max_level": 3}}


def test_sigint_checkpoints_and_resume_equals_uninterrupted(tmp_path):
    out = tmp_path / "run"
    args = [
        "--env",
        "inventory",
        "--agent",
        "tabular",
        "--seeds",
        2,
        "--checkpoint-every",
        1000,
        "--no-progress",
        "--no-plot",
    ]
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rl.train",
            *map(str, args),
            "--episodes",
            "100000",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    metrics = out / "metrics.csv"
    while time.monotonic() < deadline and not metrics.exists():  # written with checkpoint 0
        time.sleep(0.05)
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "--resume" in stderr
    stopped = load_checkpoint(out / "checkpoint.npz").episode
    assert 0 < stopped < 100000
    assert read_metrics(metrics)["episode"].max() == stopped
    total = stopped + 3
    resumed = _cli("--resume", out, "--episodes", total, "--no-progress", "--no-plot")
    assert resumed.returncode == 0, resumed.stderr
    straight = _cli(*args, "--episodes", total, "--out", tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr
    _assert_same(metrics, tmp_path / "straight" / "metrics.csv")


def test_refuses_non_empty_out_without_resume_or_overwrite(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    args = [
        "--env",
        "cartpole",
        "--agent",
        "random",
        "--episodes",
        2,
        "--out",
        out,
        "--no-progress",
        "--no-plot",
    ]
    refused = _cli(*args)
    assert refused.returncode == 2 and "--overwrite" in refused.stderr
    assert _cli(*args, "--overwrite").returncode == 0
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (["--set", "gamma_x=0.5"], "gamma_x"),
        (["--set", "gamma=fast"], "gamma"),
        (["--set", "gamma=2.0"], "gamma"),
        (["--seeds", "0"], "seeds"),
        (["--eval-every", "-1"], "eval_every"),
        (["--env", "nope"], "nope"),
        (["--agent", "nope"], "nope"),
        (["--env-option", "state_bins=0"], "state_bins"),
        (["--set", "state_bins=10"], "pass it with --env-option state_bins=10"),
        (["--env", "tests.rl.toy_envs:ToyRenamed-v0"], "Please use `ToyRenamed-v1` instead"),
        (["--set", "gamma=" + "[" * 100_000], "The value of 'gamma' is nested deeper than 64"),
        (["--set", "gamma=" + "9" * 5000], "The value of 'gamma' holds an integer longer than"),
    ],
)
def test_bad_arguments_exit_2_naming_the_key(tmp_path, args, key):
    base = {
        "--env": "cartpole",
        "--agent": "random",
        "--episodes": "2",
        "--out": str(tmp_path / "run"),
    }
    for flag in args[::2]:
        base.pop(flag, None)
    flat = [x for pair in base.items() for x in pair]
    done = _cli(*flat, *args, "--no-progress")
    assert done.returncode == 2
    assert key in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run" / "metrics.csv").exists()


@pytest.mark.parametrize(
    ("content", "key"),
    [
        ('env = "cartpole"\nagent = "random"\nepisods = 3\n', "episods"),
        ('env = "cartpole"\nagent = "random"\nepisodes = "3"\n', "episodes"),
        ('env = "cartpole"\nagent = "random"\n[agent_params]\nrank = 3\n', "rank"),
        ('env = "cartpole"\n', "agent"),
    ],
)
def test_bad_config_file_exits_2_naming_the_key(tmp_path, content, key):
    config = tmp_path / "bad.toml"
    config.write_text(content)
    done = _cli("--config", config, "--out", tmp_path / "run", "--no-progress")
    assert done.returncode == 2
    assert f"'{key}'" in done.stderr
    assert "Traceback" not in done.stderr


FAST = ["--env", "inventory", "--agent", "tabular", "--seeds", 2, "--no-progress", "--no-plot"]


def _files(run_dir):
    """Every file of a run directory but the lock, name -> bytes."""
    return {p.name: p.read_bytes() for p in sorted(run_dir.iterdir()) if p.name != ".lock"}


def _wait_for(path, process, timeout=30):
    deadline = time.monotonic() + timeout
    while not path.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)


def _start(*args):
    return subprocess.Popen(
        [sys.executable, "-m", "rl.train", *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


FUSED = ["--env", "cartpole", "--agent", "teql-released", "--seeds", 8, *FAST[-2:]]


@pytest.mark.parametrize(
    ("setup", "episodes", "every"),
    [
        # the SIGTERM test below resumes a step-by-step run in the default run
        pytest.param(FAST, 120, 10, marks=pytest.mark.slow),
        (FUSED, 3000, 100),
    ],
    ids=["step-by-step", "fused"],
)
def test_sigkill_at_random_moments_then_resume_equals_uninterrupted(
    tmp_path, setup, episodes, every
):
    rng = random.Random(0)  # the kill moments are random but the same on every run
    out = tmp_path / "killed"
    args = [*setup, "--checkpoint-every", every, "--episodes", episodes]
    process, killed = _start(*args, "--out", out), []
    for _ in range(3):
        _wait_for(out / "checkpoint.npz", process)
        time.sleep(rng.uniform(0.0, 0.8))
        process.kill()  # SIGKILL: no handler runs
        process.communicate(timeout=30)
        killed.append(process.returncode == -signal.SIGKILL)
        process = _start(*FAST[-2:], "--resume", out, "--episodes", episodes)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert any(killed)  # at least one run died mid-training (all do, unless the machine is fast)
    straight = _cli(*args, "--out", tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr
    _assert_same(out / "metrics.csv", tmp_path / "straight" / "metrics.csv")
    assert read_metrics(out / "metrics.csv")["episode"].max() == episodes


def test_second_run_on_a_live_run_directory_is_refused(tmp_path):
    out = tmp_path / "run"
    first = _start(*FAST, "--episodes", 100000, "--checkpoint-every", 1000, "--out", out)
    try:
        _wait_for(out / "checkpoint.npz", first)
        assert first.poll() is None
        for extra in (["--resume", out], [*FAST[:-2], "--out", out, "--overwrite"]):
            second = _cli(*FAST[-2:], *extra, "--episodes", 2)
            assert second.returncode == 2, second.stderr
            assert f"in use by process {first.pid} on host {socket.gethostname()}" in second.stderr
            assert "Traceback" not in second.stderr
        fresh = _cli(*FAST, "--episodes", 2, "--out", out)
        assert fresh.returncode == 2 and f"process {first.pid}" in fresh.stderr
        assert first.poll() is None  # the first run was not disturbed
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=30)
    assert first.returncode == 130
    trained = load_checkpoint(out / "checkpoint.npz").episode  # resume may not go below it
    assert _cli(*FAST[-2:], "--resume", out, "--episodes", trained).returncode == 0  # unlocked


CLIFF = [
    "--env", "CliffWalking-v1", "--agent", "teql", "--reading", "stable", "--seeds", 1,
    # the stable reading's steps of the paper's problems and EUGE's count bonus as printed,
    # with which it never reaches the goal
    *[arg for key, value in AGENT_STEPS.items() for arg in ("--set", f"{key}={json.dumps(value)}")],
    "--set", "bonus_unit=1.0",
]  # fmt: skip
LONG_EPISODES = ["--env-option", "max_episode_steps=40000", "--checkpoint-every", 1]


def test_sigterm_mid_episode_stops_within_seconds_and_resume_equals_uninterrupted(tmp_path):
    out = tmp_path / "stopped"
    args = [*CLIFF, *LONG_EPISODES, *FAST[-2:], "--episodes", 2]  # TEQL-stable never gets out
    process = _start(*args, "--out", out)
    _wait_for(out / "checkpoint.npz", process)  # checkpoint 0: training has begun
    time.sleep(1.0)  # mid-episode 1 (40000 steps take several seconds here)
    process.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    _, stderr = process.communicate(timeout=30)
    assert time.monotonic() - signalled < 10
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "--resume" in stderr
    config = json.loads((out / "config.json").read_text())
    assert config["env_options"]["max_episode_steps"] == 40000
    resumed = _cli(*FAST[-2:], "--resume", out, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    straight = _cli(*args, "--out", tmp_path / "straight", timeout=120)
    assert straight.returncode == 0, straight.stderr
    _assert_same(out / "metrics.csv", tmp_path / "straight" / "metrics.csv")
    assert read_metrics(out / "metrics.csv")["length"].tolist() == [40000, 40000]


def test_gymnasium_cartpole_trains_out_of_the_box_and_resumes(tmp_path):
    out = tmp_path / "cartpole"
    args = ["--env", "CartPole-v1", "--agent", "tabular", *FAST[-4:], "--checkpoint-every", 2]
    first = _cli(*args, "--episodes", 2, "--out", out)
    assert first.returncode == 0, first.stderr
    options = json.loads((out / "config.json").read_text())["env_options"]
    assert options["state_bins"] == 6 and len(options["low"]) == len(options["high"]) == 4
    # fitted to seeded random play (+10% of its range), within the space's bounds (x: 4.8)
    assert -4.8 < options["low"][0] < -0.1 and 0.1 < options["high"][0] < 4.8
    resumed = _cli(*FAST[-2:], "--resume", out, "--episodes", 4)
    assert resumed.returncode == 0, resumed.stderr
    straight = _cli(*args, "--episodes", 4, "--out", tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr
    _assert_same(out / "metrics.csv", tmp_path / "straight" / "metrics.csv")


class _Planted:
    """Unpickling this runs a shell command that creates a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("where", ["pkl", "npz-named-pickle", "object-array-in-npz"])
def test_planted_pickle_runs_nothing_on_resume(tmp_path, where):
    out, marker = tmp_path / "run", tmp_path / "marker"
    assert _cli(*FAST, "--episodes", 3, "--out", out).returncode == 0
    planted = pickle.dumps({"format": 1, "agent_state": _Planted(marker)})
    checkpoint = out / "checkpoint.npz"
    if where == "pkl":
        checkpoint.unlink()
        (out / "checkpoint.pkl").write_bytes(planted)
    elif where == "npz-named-pickle":
        checkpoint.write_bytes(planted)
    else:
        with open(checkpoint, "wb") as handle:
            np.savez(handle, __document__=np.array([_Planted(marker)], dtype=object))
    before = _files(out)
    done = _cli(*FAST[-2:], "--resume", out, "--episodes", 5)
    assert done.returncode == 2, done.stderr
    assert not marker.exists()
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("error: Refusing checkpoint")
    if where != "object-array-in-npz":
        assert f"python -m rl.runs.legacy_checkpoint convert {out}" in done.stderr
    assert _files(out) == before


def _flip_inside_largest_entry(path):
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = max(archive.infolist(), key=lambda i: i.file_size)
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + info.compress_size // 2] ^= 0x10
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_damaged_checkpoint_is_refused_and_nothing_changes(tmp_path, damage):
    out = tmp_path / "run"
    assert _cli(*FAST, "--episodes", 3, "--out", out).returncode == 0
    checkpoint = out / "checkpoint.npz"
    if damage == "truncate":
        checkpoint.write_bytes(checkpoint.read_bytes()[: checkpoint.stat().st_size // 2])
    else:
        _flip_inside_largest_entry(checkpoint)
    before = _files(out)
    done = _cli(*FAST[-2:], "--resume", out, "--episodes", 5)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith(f"error: Refusing checkpoint {checkpoint}:")
    assert _files(out) == before


TINY = ["--env", "inventory", "--agent", "tabular", "--seeds", "2", "--no-progress"]


def test_interrupted_run_prints_a_resume_command_that_pastes(tmp_path, monkeypatch, capsys):
    out = tmp_path / "my run (1)"
    monkeypatch.setattr(train_cli, "run", functools.partial(runner.run, stop_after_episode=2))
    assert train_cli.main([*TINY, "--no-plot", "--episodes", "5", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert err == (
        "Interrupted after episode 2; checkpoint written. "
        f"Continue with: python -m rl.train --resume '{out}'\n"
    )
    command = shlex.split(err.rpartition("Continue with: ")[2])
    assert command == ["python", "-m", "rl.train", "--resume", str(out)]
    monkeypatch.undo()
    assert train_cli.main([*command[3:], "--no-progress", "--no-plot"]) == 0


def test_abort_before_the_first_checkpoint_does_not_promise_one(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"

    def abort(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "save_checkpoint", abort)
    assert train_cli.main([*TINY, "--no-plot", "--episodes", "5", "--out", str(out)]) == 130
    assert capsys.readouterr().err == (
        f"\nAborted before the first checkpoint of {out} was written, so it cannot be resumed; "
        "start afresh with --overwrite.\n"
    )


def test_damaged_metrics_header_gives_one_line_after_training(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    metrics = out / "metrics.csv"
    train = train_cli.run

    def train_then_damage(*args, **kwargs):  # the file is damaged while training ends
        result = train(*args, **kwargs)
        metrics.write_text(metrics.read_text().replace("return", "retrun", 1))
        return result

    monkeypatch.setattr(train_cli, "run", train_then_damage)
    assert train_cli.main([*TINY, "--no-plot", "--episodes", "4", "--out", str(out)]) == 1
    assert capsys.readouterr().err == (
        "error: Training ended, but its metrics cannot be read back for the plot and summary: "
        f"{metrics} lacks the columns ['return'].\n"
    )
    assert load_checkpoint(out / "checkpoint.npz").episode == 4


def test_an_environment_error_is_one_line_and_debug_shows_its_traceback(tmp_path):
    env = "tests.rl.toy_envs:ToyFailing-v0"
    args = [
        "--env", env, "--agent", "tabular", "--seeds", 2, "--seed", 5, "--episodes", 2,
        "--env-option", "reward_bound=1.1", "--env-option", "reward_size=1.0",
        "--no-progress", "--no-plot",
    ]  # fmt: skip
    message = (
        f"Environment {env!r} failed in step() of replica 0 (seed 5): ZeroDivisionError: "
        "toy failure after 3 steps"
    )
    failed = _cli(*args, "--out", tmp_path / "a")
    assert (failed.returncode, failed.stderr) == (
        1,
        f"error: {message} (rerun with --debug for the traceback)\n",
    )
    debug = _cli(*args, "--out", tmp_path / "b", "--debug")
    assert debug.returncode == 1 and debug.stderr.startswith("Traceback")
    assert 'toy_envs.py", line' in debug.stderr and "ZeroDivisionError: toy failure" in debug.stderr
    assert debug.stderr.endswith(f"rl.problems.problem.EnvFailure: {message}\n")
    probe = _cli(*args[:-6], "--no-progress", "--out", tmp_path / "c")
    assert probe.returncode == 1 and "while estimating its reward bound" in probe.stderr


def _written_before(run_dir: Path, field: str) -> None:
    """Make ``run_dir`` a run written before the agent config had ``field``."""

    def without(recorded):
        params = {k: v for k, v in recorded["agent_params"].items() if k != field}
        return {**recorded, "agent_params": params}

    rewrite_recorded_config(run_dir, without)


def test_a_run_written_before_a_parameter_existed_resumes_with_its_default(tmp_path):
    """Off the paper's problems the stable reading now sets bonus_unit = R_max (200 here);
    a run recorded before that field existed ran with 1 and goes on with 1."""
    out = tmp_path / "run"
    args = ["--env", "CliffWalking-v1", "--agent", "teql", "--seeds", "2", "--eval-every", "0"]
    assert train_cli.main([*args, "--episodes", "2", "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["agent_params"]["bonus_unit"] == 200.0
    _written_before(out, "bonus_unit")
    assert train_cli.main(["--resume", str(out), "--episodes", "4"]) == 0
    assert json.loads((out / "config.json").read_text())["agent_params"]["bonus_unit"] == 1.0
    assert load_checkpoint(out / "checkpoint.npz").episode == 4
