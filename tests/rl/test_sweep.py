import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rl.experiments.executor import INDEX_FILE, read_index
from rl.runs.config import ConfigError
from rl.runs.metrics import COLUMNS, read_metrics
from rl.runs.rundir import lock_holder
from rl.sweep import MAX_CONFIGURATIONS, build_parser, expand_grid, main

ROOT = Path(__file__).resolve().parents[2]
EXCEPT_WALL = [c for c in COLUMNS if c != "wall_time"]

GRID = """
[base]
env = "cartpole"
agent = "teql"
episodes = {episodes}
seeds = 2
eval_every = 5
out = "ignored/by/the/sweep"

[grid]
"agent_params.alpha0" = [0.005, 0.01]
seed = [0, 100]
"""


@pytest.fixture(scope="module")
def ray_two_cpus():
    """One local Ray instance with 2 CPUs for the module (its start-up is slow)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield ray
    ray.shutdown()


def _grid(tmp_path, text=None, episodes=15):
    path = tmp_path / "grid.toml"
    path.write_text(GRID.format(episodes=episodes) if text is None else text)
    return path


def _config(run_dir):
    config = json.loads((run_dir / "config.json").read_text())
    config.pop("out")
    return config


@pytest.mark.slow  # Ray's start-up; the ray-sweep tutorial runs Ray in the default run
def test_grid_runs_identically_on_local_pool_and_ray(tmp_path, ray_two_cpus, capsys):
    grid = _grid(tmp_path)
    local, remote = tmp_path / "local", tmp_path / "ray"
    assert main([str(grid), "--out", str(local), "--workers", "2", "--no-progress"]) == 0
    assert main([str(grid), "--out", str(remote), "--backend", "ray", "--no-progress"]) == 0
    assert "4 configurations: 4 done" in capsys.readouterr().out
    rows = read_index(local)
    assert read_index(remote) == [
        {**row, "wall_time": r["wall_time"]}
        for row, r in zip(rows, read_index(remote), strict=True)
    ]
    assert [(r["agent_params.alpha0"], r["seed"]) for r in rows] == [
        ("0.005", "0"),
        ("0.005", "100"),
        ("0.01", "0"),
        ("0.01", "100"),
    ]
    for row in rows:
        assert (
            row["status"] == "done" and row["name"] == f"{int(row['position']):03d}-{row['hash']}"
        )
        a, b = local / row["name"], remote / row["name"]
        assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
        assert {"metrics.csv", "config.json", "checkpoint.npz", "learning_curve.png"} <= {
            p.name for p in b.iterdir()
        }
        assert _config(a) == _config(b)
        assert json.loads((b / "config.json").read_text())["out"] == str(b)
        metrics_a, metrics_b = read_metrics(a / "metrics.csv"), read_metrics(b / "metrics.csv")
        for column in EXCEPT_WALL:
            np.testing.assert_array_equal(metrics_a[column], metrics_b[column], err_msg=column)
    config = _config(local / rows[3]["name"])
    assert config["seed"] == 100 and config["agent_params"]["alpha0"] == 0.01
    assert config["seeds"] == 2 and config["episodes"] == 15


BAD_GRIDS = {
    "unknown field": ('[base]\nenv = "cartpole"\nagent = "teql"\nepisodez = 5\n', "episodez"),
    "unknown grid field": (
        '[base]\nenv = "cartpole"\nagent = "teql"\n[grid]\nsead = [1, 2]\n',
        "sead",
    ),
    "unknown agent parameter": (
        '[base]\nenv = "cartpole"\nagent = "teql"\n[grid]\n"agent_params.rnak" = [1, 2]\n',
        "rnak",
    ),
    "empty list": ('[base]\nenv = "cartpole"\nagent = "teql"\n[grid]\nseed = []\n', "seed"),
    "not a list": ('[base]\nenv = "cartpole"\nagent = "teql"\n[grid]\nseed = 3\n', "seed"),
    "malformed TOML": ('[base]\nenv = "cartpole\n', "Cannot parse"),
    "unknown section": ('[bsae]\nenv = "cartpole"\n', "bsae"),
    "bad value in one run": (
        '[base]\nenv = "cartpole"\nagent = "teql"\n[[runs]]\nseed = 1\n[[runs]]\nseeds = 0\n',
        "seeds",
    ),
    "bad dotted key": (
        '[base]\nenv = "cartpole"\nagent = "teql"\n[grid]\n"episodes.x" = [1]\n',
        "episodes.x",
    ),
    "duplicate configurations": (
        '[base]\nenv = "cartpole"\nagent = "teql"\n[grid]\n"agent_params.rank" = [10, 10]\n',
        "same as configuration 0",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_GRIDS))
def test_bad_grid_file_is_refused_before_anything_runs(tmp_path, capsys, case):
    text, key = BAD_GRIDS[case]
    out = tmp_path / "out"
    assert main([str(_grid(tmp_path, text)), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert key in err and err.startswith("error: ") and err.count("\n") == 1, err
    assert not out.exists()


def test_runs_and_dotted_tables_expand_onto_base():
    data = {
        "base": {"env": "cartpole", "agent": "teql", "out": "x", "agent_params": {"rank": 5}},
        "grid": {"agent_params": {"alpha0": [0.1, 0.2]}, "seed": [0, 1]},
        "runs": [{"agent": "tlr", "env_options.state_bins": [5, 5, 8, 8]}],
    }
    expanded = expand_grid(data)
    assert [values for values, _ in expanded] == [
        {"agent_params.alpha0": 0.1, "seed": 0},
        {"agent_params.alpha0": 0.1, "seed": 1},
        {"agent_params.alpha0": 0.2, "seed": 0},
        {"agent_params.alpha0": 0.2, "seed": 1},
        {"agent": "tlr", "env_options.state_bins": [5, 5, 8, 8]},
    ]
    assert expanded[2][1] == {
        "env": "cartpole",
        "agent": "teql",
        "seed": 0,
        "agent_params": {"rank": 5, "alpha0": 0.2},
    }
    assert expanded[4][1]["env_options"] == {"state_bins": [5, 5, 8, 8]}
    assert expand_grid({"base": {"env": "cartpole", "agent": "teql"}})[0][0] == {}
    assert {a.dest for a in build_parser()._actions} >= {"out", "backend", "address", "resume"}


def test_failed_configuration_gives_exit_code_1(tmp_path, capsys):
    grid, out = _grid(tmp_path, episodes=5), tmp_path / "out"
    assert main([str(grid), "--out", str(out), "--dry-run"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    out.mkdir()
    (out / names[2]).write_text("a file where the run directory should be")
    assert main([str(grid), "--out", str(out), "--workers", "2", "--no-progress"]) == 1
    report = capsys.readouterr().out
    assert f"failed: {names[2]}" in report and "3 done" in report
    assert [r["status"] for r in read_index(out)] == ["done", "done", "failed", "done"]


def test_killed_sweep_resumes_only_the_rest(tmp_path, capsys):
    grid, out = _grid(tmp_path, episodes=60), tmp_path / "out"
    command = [sys.executable, "-m", "rl.sweep", str(grid), "--out", str(out), "--workers", "1"]
    command.append("--no-batch")  # one task per configuration (a killed batch: test_sweep_batch)
    process = subprocess.Popen(
        [*command, "--no-progress", "--no-plot"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    try:
        while not any(r["status"] == "done" for r in _safe_index(out)):
            assert process.poll() is None, process.stderr.read()
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the driver and its pool, at once
        process.wait()
        process.stderr.close()
    done = {r["name"] for r in read_index(out) if r["status"] == "done"}
    assert 1 <= len(done) < 4
    stamps = {name: (out / name / "metrics.csv").stat().st_mtime_ns for name in done}
    resumed = [str(grid), "--out", str(out), "--resume", "--workers", "2", "--no-batch"]
    assert main([*resumed, "--no-progress"]) == 0
    assert f"4 done ({len(done)} earlier)" in capsys.readouterr().out
    assert {name: (out / name / "metrics.csv").stat().st_mtime_ns for name in done} == stamps
    assert [r["status"] for r in read_index(out)] == ["done"] * 4
    assert (out / INDEX_FILE).is_file()


def _safe_index(out):
    try:
        return read_index(out)
    except (OSError, ValueError):
        return []


def test_presets_in_the_grid(tmp_path, capsys):
    presets = pytest.importorskip("rl.experiments.presets")
    names = [n for n in presets.presets() if n.startswith("cartpole-")][:2]
    text = f"[base]\nepisodes = 3\n[grid]\npreset = {json.dumps(names)}\n"
    assert main([str(_grid(tmp_path, text)), "--out", str(tmp_path / "o"), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(name in line for name, line in zip(names, lines, strict=True))
    text = '[base]\npreset = "cartpole-nonesuch"\n'
    assert main([str(_grid(tmp_path, text)), "--out", str(tmp_path / "o")]) == 2
    assert "cartpole-nonesuch" in capsys.readouterr().err


def test_swept_tables_merge_onto_base():
    data = {
        "base": {"env": "cartpole", "agent": "teql", "agent_params": {"rank": 5, "c": 1.0}},
        "grid": {"agent_params": [{"c": 2.0}, {"rank": 3}]},
    }
    assert [values["agent_params"] for _, values in expand_grid(data)] == [
        {"rank": 5, "c": 2.0},
        {"rank": 3, "c": 1.0},
    ]


def test_resume_reruns_a_configuration_whose_files_were_damaged(tmp_path, capsys):
    grid, out = _grid(tmp_path, episodes=5), tmp_path / "out"
    command = [str(grid), "--out", str(out), "--workers", "2", "--no-progress", "--no-plot"]
    assert main(command) == 0
    names = [row["name"] for row in read_index(out)]
    before = read_metrics(out / names[1] / "metrics.csv")
    (out / names[1] / "checkpoint.npz").unlink()
    capsys.readouterr()
    assert main([*command, "--resume"]) == 0
    captured = capsys.readouterr()
    checkpoint = out / names[1] / "checkpoint.npz"
    assert captured.err == (
        f"rerunning {names[1]} (recorded done): Refusing checkpoint {checkpoint}: "
        "the file does not exist.\n"
    )
    assert "4 configurations: 4 done (3 earlier), 0 failed." in captured.out
    after = read_metrics(out / names[1] / "metrics.csv")
    for column in EXCEPT_WALL:
        np.testing.assert_array_equal(after[column], before[column], err_msg=column)


def _holders(out, names):
    """The lock holders (pid, host) of the run directories ``out/NAME`` that are locked."""
    return [holder for holder in (lock_holder(out / name) for name in names) if holder]


def _running(pid):
    """Whether process ``pid`` exists and is not a zombie (Linux /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
def test_workers_end_with_a_killed_driver_and_resume_completes(tmp_path, capsys):
    text = GRID.format(episodes=400).replace('"agent_params.alpha0" = [0.005, 0.01]\n', "")
    grid, out = _grid(tmp_path, text), tmp_path / "out"
    options = ["--workers", "2", "--no-progress", "--no-plot"]
    assert main([str(grid), "--out", str(out), "--dry-run"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    driver = subprocess.Popen(
        [sys.executable, "-m", "rl.sweep", str(grid), "--out", str(out), *options],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 40
        while not (held := _holders(out, names)):  # a worker is training
            assert driver.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        os.kill(driver.pid, signal.SIGKILL)  # the driver alone
        driver.wait()
        workers = {holder["pid"] for holder in held}  # they may be gone before the next look
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            held = _holders(out, names)
            workers |= {holder["pid"] for holder in held}
            if not held and not any(map(_running, workers)):
                break
            time.sleep(0.05)
        assert workers and _holders(out, names) == []
        assert not any(map(_running, workers))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)
    assert main([str(grid), "--out", str(out), "--resume", *options]) == 0
    assert main([str(grid), "--out", str(tmp_path / "whole"), *options]) == 0
    report = capsys.readouterr().out
    assert "2 configurations: 2 done (0 earlier), 0 failed." in report
    assert report.count("2 configurations: 2 done (") == 2
    for name in names:
        resumed = read_metrics(out / name / "metrics.csv")
        whole = read_metrics(tmp_path / "whole" / name / "metrics.csv")
        assert len(whole["episode"]) == 2 * 400
        for column in EXCEPT_WALL:
            np.testing.assert_array_equal(resumed[column], whole[column], err_msg=column)


def test_interrupted_sweep_prints_a_resume_command_that_pastes(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "my grids (1)"
    folder.mkdir()
    grid, out = _grid(folder, episodes=3), tmp_path / "my out"

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("rl.sweep.run_tasks", interrupted)
    assert main([str(grid), "--out", str(out), "--no-progress"]) == 130
    command = capsys.readouterr().err.rpartition("Continue with: ")[2]
    assert shlex.split(command) == [
        "python",
        "-m",
        "rl.sweep",
        str(grid),
        "--out",
        str(out),
        "--resume",
    ]


def test_grids_beyond_the_cap_are_refused_before_anything_is_built(tmp_path, capsys):
    keys = "".join(f'"agent_params.k{i}" = {list(range(10))}\n' for i in range(8))
    text = f'[base]\nenv = "inventory"\nagent = "tabular"\n[grid]\n{keys}'
    assert main([str(_grid(tmp_path, text)), "--out", str(tmp_path / "out"), "--dry-run"]) == 2
    assert capsys.readouterr().err == (
        "error: The grid file describes 100000000 configurations (10 x 10 x 10 x 10 x 10 x 10 x "
        "10 x 10 + 0 runs); at most 10000 (rl.sweep.MAX_CONFIGURATIONS) run in one sweep: split "
        "it into several grid files.\n"
    )
    seeds = {"base": {"env": "inventory", "agent": "tabular"}, "grid": {"seed": list(range(9999))}}
    assert len(expand_grid({**seeds, "runs": [{"seed": 10**6}]})) == MAX_CONFIGURATIONS
    with pytest.raises(ConfigError, match=r"describes 10001 configurations \(9999 \+ 2 runs\)"):
        expand_grid({**seeds, "runs": [{"seed": 10**6}, {"seed": 10**7}]})


def test_an_index_that_is_not_utf8_is_refused_on_resume(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / INDEX_FILE).write_bytes(b"position,name,hash,status\n0,000-abc,abc,d\xf6ne\n")
    grid = _grid(tmp_path, '[base]\nenv = "inventory"\nagent = "tabular"\nepisodes = 1\n')
    assert main([str(grid), "--out", str(out), "--resume", "--no-progress", "--no-plot"]) == 2
    assert capsys.readouterr().err == (
        f"error: Cannot read {out / INDEX_FILE}: it is not UTF-8 text (byte 0xf6 at offset 41); "
        "it was not written by this project.\n"
    )
    assert not [p for p in out.iterdir() if p.is_dir()]  # nothing ran
