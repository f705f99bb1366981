import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rl.checkpoint import load_checkpoint
from rl.metrics import COLUMNS, read_metrics

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
    for name in ("metrics.csv", "config.json", "learning_curve.png", "checkpoint.pkl"):
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
    stopped = load_checkpoint(out / "checkpoint.pkl").episode
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
