import csv
import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rl.experiments.executor import INDEX_FILE, config_hash, read_index
from rl.experiments.paper import BASE_LEVEL, EXPERIMENTS, LEVELS
from rl.problems import make_problem
from rl.reproduce import build_parser, main, make_plan
from rl.runs.metrics import COLUMNS, read_metrics
from rl.runs.training import train

ROOT = Path(__file__).resolve().parents[2]
EXCEPT_WALL = [c for c in COLUMNS if c != "wall_time"]


def _reproduce(*args, check=True):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "rl.reproduce", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def _plan(*args):
    return make_plan(build_parser().parse_args(list(args)))


def _rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_list_lists_every_experiment():
    result = _reproduce("--list")
    for name in ("comparison", "highway", "ablation", "sensitivity", "sensitivity-tlr"):
        assert any(line.startswith(name + " ") for line in result.stdout.splitlines()), name
    assert set(EXPERIMENTS) == {
        "comparison",
        "highway",
        "ablation",
        "sensitivity",
        "sensitivity-tlr",
    }


@pytest.mark.parametrize(("scale", "every"), [("1", 500), ("0.1", 50), ("0.001", 1)])
def test_every_line_checkpoints_twenty_times_so_a_killed_line_resumes(scale, every):
    plan = _plan("comparison", "--env", "cartpole", "--episodes-scale", scale)
    assert {p.task.config.checkpoint_every for p in plan.tasks} == {every}


# Tiny end-to-end runs: (arguments, environments whose files must exist, box plots?).
# Highway at scale 0.0001 is one episode of at most 50 simulator steps per seed (TEQL only,
# on highway-env: each seed is a task there; the twin's plan is test_highway_plan_...); it has
# no greedy evaluation yet, so the files are written and their numbers are n/a.
TINY = [
    (
        ("comparison", "--env", "cartpole", "--episodes-scale", "0.001", "--deep-seeds", "1"),
        ["cartpole"],
        False,
    ),
    (("ablation", "--env", "pendulum", "--episodes-scale", "0.00025"), ["pendulum"], True),
    (("sensitivity", "--episodes-scale", "0.001"), ["cartpole", "pendulum"], False),
    (("sensitivity-tlr", "--env", "pendulum", "--episodes-scale", "0.00025"), ["pendulum"], False),
    (
        (
            "highway",
            "--episodes-scale",
            "0.0001",
            "--agents",
            "teql",
            "--highway-engine",
            "reference",
        ),
        ["highway"],
        False,
    ),
]


@pytest.mark.parametrize(("args", "envs", "box"), TINY, ids=[t[0][0] for t in TINY])
def test_each_command_writes_figures_tables_and_summary(tmp_path, args, envs, box):
    out = tmp_path / "out"
    _reproduce(*args, "--seeds", "2", "--workers", "2", "--postprocess", "--out", str(out))
    for env in envs:
        for suffix in ("curves.png", "curves.pdf", "curves.csv", "scores.csv"):
            assert (out / f"{env}-{suffix}").is_file(), f"{env}-{suffix}"
        if box:
            assert (out / f"{env}-box.png").is_file() and (out / f"{env}-box.pdf").is_file()
        scores = _rows(out / f"{env}-scores.csv")
        plan = _plan(*args, "--seeds", "2")
        assert {row["line"] for row in scores} == {p.line.key for p in plan.tasks if p.env == env}
        expected = sum(p.task.config.seeds for p in plan.tasks if p.env == env)
        assert len(scores) == expected
    summary = (out / "summary.md").read_text()
    assert "Seeds: 2 per line" in summary and "**on**" in summary
    assert all(row["status"] == "done" for row in read_index(out))


def test_comparison_curves_table_has_raw_and_postprocessed_rows(tmp_path):
    out = tmp_path / "out"
    _reproduce(
        "comparison",
        "--env",
        "cartpole",
        "--episodes-scale",
        "0.002",
        "--seeds",
        "2",
        "--agents",
        "teql,tlr",
        "--postprocess",
        "--out",
        str(out),
    )
    rows = _rows(out / "cartpole-curves.csv")
    views = {(row["line"], row["view"]) for row in rows}
    assert views == {(k, v) for k in ("teql", "tlr") for v in ("raw", "postprocessed")}
    assert sorted({int(row["episode"]) for row in rows}) == [10, 20]
    summary = (out / "summary.md").read_text()
    assert "post-processed mean ± std" in summary and "20 training episodes" in summary


def test_resume_after_a_killed_run_does_not_redo_finished_configurations(tmp_path):
    out = tmp_path / "out"
    args = [
        "comparison",
        "--env",
        "cartpole",
        "--episodes-scale",
        "0.002",
        "--seeds",
        "2",
        "--agents",
        "tlr,teql,dqn",  # three configurations (DQN's two seeds are one)
        "--workers",
        "1",
        "--out",
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    driver = subprocess.Popen(
        [sys.executable, "-m", "rl.reproduce", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and driver.poll() is None:
        if any(row["status"] == "done" for row in read_index(out)):
            break
        time.sleep(0.05)
    driver.send_signal(signal.SIGTERM)
    driver.communicate(timeout=60)
    assert driver.returncode == 130
    done = {row["name"] for row in read_index(out) if row["status"] == "done"}
    assert 0 < len(done) < 3, "the kill must come after some and before all configurations"
    stamps = {name: (out / name / "metrics.csv").stat().st_mtime_ns for name in done}
    result = _reproduce(*args, "--resume")
    assert f"({len(done)} already done)" in result.stderr
    for name, stamp in stamps.items():
        assert (out / name / "metrics.csv").stat().st_mtime_ns == stamp
    rows = read_index(out)
    assert len(rows) == 3 and all(row["status"] == "done" for row in rows)
    assert (out / "summary.md").is_file()


def test_a_shortened_run_is_a_prefix_of_the_longer_one(tmp_path):
    short = _plan(
        "comparison",
        "--env",
        "cartpole",
        "--episodes-scale",
        "0.001",
        "--seeds",
        "2",
        "--agents",
        "teql,tlr,dqn",
    )
    longer = _plan(
        "comparison",
        "--env",
        "cartpole",
        "--episodes-scale",
        "0.002",
        "--seeds",
        "2",
        "--agents",
        "teql,tlr,dqn",
    )
    assert [p.task.name for p in short.tasks] == [p.task.name for p in longer.tasks]
    for a, b in zip(short.tasks, longer.tasks, strict=True):
        assert (a.task.config.episodes, b.task.config.episodes) == (10, 20)
        tables = []
        for planned, where in ((a, "short"), (b, "long")):
            out = tmp_path / where / planned.task.name
            train(dataclasses.replace(planned.task.config, out=str(out)))
            tables.append(read_metrics(out / "metrics.csv"))
        first = tables[1]["episode"] <= 10
        for column in EXCEPT_WALL:
            np.testing.assert_array_equal(tables[0][column], tables[1][column][first], column)


def test_scale_sets_episodes_windows_and_one_task_per_line():
    plan = _plan(
        "comparison", "--episodes-scale", "0.1", "--seeds", "10", "--deep-seeds", "4",
        "--reading", "paper",
    )  # fmt: skip
    assert plan.episodes == {"pendulum": 4000, "cartpole": 1000}
    assert plan.windows == {"pendulum": 400, "cartpole": 100}
    names = [p.task.name for p in plan.tasks]
    assert "cartpole/teql" in names and "cartpole/sac" in names
    assert not any("/seed-" in name for name in names)  # per-seed tasks only on Highway
    sac = next(p.task.config for p in plan.tasks if p.task.name == "cartpole/sac")
    assert sac.seeds == 4
    costs = [p.cost for p in plan.tasks]
    assert costs == sorted(costs, reverse=True) and costs[0] > costs[-1]  # longest first
    teql = next(p.task.config for p in plan.tasks if p.task.name == "cartpole/teql")
    assert (teql.seeds, teql.episodes, teql.reading) == (10, 1000, "paper")
    ablation = _plan("ablation", "--env", "cartpole", "--episodes-scale", "0.1")
    assert ablation.windows == {"cartpole": 200}  # the last 2,000 of 10,000 episodes, scaled
    lam0 = next(p.task.config for p in ablation.tasks if p.task.name == "cartpole/teql-lam0")
    assert lam0.agent_params == {"lam": 0.0}


def test_highway_plan_uses_the_twin_with_seeds_as_replicas_unless_told_otherwise():
    twin = _plan("highway", "--episodes-scale", "0.05", "--seeds", "8", "--agents", "teql,tlr")
    assert sorted(p.task.name for p in twin.tasks) == ["highway/teql", "highway/tlr"]
    for planned in twin.tasks:
        config = planned.task.config
        assert (config.seeds, config.episodes) == (8, 500)
        assert config.env_options == {"env_kwargs": {"engine": "twin"}}
    reference = _plan(
        "highway", "--agents", "teql", "--seeds", "3", "--highway-engine", "reference"
    )
    assert [p.task.name for p in reference.tasks] == [f"highway/teql/seed-{s}" for s in range(3)]
    assert reference.tasks[0].task.config.env_options == {"env_kwargs": {"engine": "reference"}}


def test_sensitivity_parameter_counts_match_the_stated_ones():
    mismatched = [
        f"{env} {lv.name}: R sum(d_n) = {lv.params()}, stated {lv.stated_params}"
        for env, levels in LEVELS.items()
        for lv in levels
        if lv.params() != lv.stated_params
    ]
    assert mismatched == []
    assert [lv.params() for lv in LEVELS["cartpole"]] == [300, 540, 700, 1050, 2800]
    assert [lv.params() for lv in LEVELS["pendulum"]] == [200, 380, 500, 750, 2000]
    plan = _plan("sensitivity-tlr", "--env", "pendulum", "--seeds", "2")
    grids = {p.task.name: p.task.config.env_options for p in plan.tasks}
    assert grids["pendulum/tlr-very-fine"] == {"state_bins": [80, 80], "action_bins": 40}
    assert len(grids) == 8 and not any("base" in name for name in grids)


@pytest.mark.parametrize("reading", ["paper", "released", "stable"])
@pytest.mark.parametrize("env", ["cartpole", "pendulum"])
def test_the_sensitivity_base_line_is_the_comparison_teql_line(env, reading):
    """The base level is the problem's own grid, so the two lines are one configuration."""
    (base,) = [lv for lv in LEVELS[env] if lv.name == BASE_LEVEL]
    problem = make_problem(env)
    assert problem.state_dims == base.state_bins and problem.action_dims == (base.action_bins,)
    args = ("--env", env, "--reading", reading, "--seeds", "2")
    sensitivity = {p.line.key: p.task.config for p in _plan("sensitivity", *args).tasks}
    comparison = {p.line.key: p.task.config for p in _plan("comparison", *args).tasks}
    assert config_hash(sensitivity["teql-base"]) == config_hash(comparison["teql"])
    assert config_hash(sensitivity["teql-fine"]) != config_hash(comparison["teql"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nonsense"], "Unknown experiment 'nonsense'"),
        (["comparison", "--episodes-scale", "0"], "--episodes-scale"),
        (["comparison", "--episodes-scale", "1.5"], "--episodes-scale"),
        (["comparison", "--env", "highway"], "runs on pendulum, cartpole"),
        (["ablation", "--agents", "dqn"], "Unknown --agents entry 'dqn'"),
        (["comparison", "--seeds", "0"], "'--seeds' value must be an int >= 1. Got 0"),
        (["comparison", "--deep-seeds", "-2"], "'--deep-seeds' value must be an int >= 1. Got -2"),
        (["comparison", "--workers", "0"], "'--workers' value must be an int >= 1. Got 0"),
        (["comparison", "--address", "1.2.3.4:6379"], "--address needs --backend ray"),
        (["comparison", "--reuse", "/no/such/dir"], "'--reuse' value '/no/such/dir' is not a"),
        ([], "give an experiment NAME"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_ray_backend_and_address_reach_the_executor(monkeypatch, tmp_path):
    pytest.importorskip("ray")
    seen = {}

    def fake_run_tasks(tasks, out, **options):
        seen.update(options, tasks=len(tasks))
        return []

    monkeypatch.setattr("rl.reproduce.run_tasks", fake_run_tasks)
    args = [
        "ablation",
        "--env",
        "cartpole",
        "--episodes-scale",
        "0.001",
        "--seeds",
        "2",
        "--backend",
        "ray",
        "--address",
        "10.0.0.1:6379",
        "--out",
        str(tmp_path / "o"),
    ]
    (tmp_path / "o").mkdir()
    assert main(args) == 0
    assert (seen["backend"], seen["address"], seen["tasks"]) == ("ray", "10.0.0.1:6379", 3)
    assert "Missing (not finished or failed)" in (tmp_path / "o" / "summary.md").read_text()
    assert not (tmp_path / "o" / INDEX_FILE).exists()


@pytest.mark.slow  # a local Ray instance starts in 10 to 30 s; the sweep tests cover the executor
def test_ray_backend_writes_the_same_runs_as_the_local_pool(tmp_path):
    ray = pytest.importorskip("ray")
    args = ["ablation", "--env", "cartpole", "--episodes-scale", "0.002", "--seeds", "2"]
    local, remote = tmp_path / "local", tmp_path / "ray"
    assert main([*args, "--workers", "2", "--out", str(local)]) == 0
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        assert main([*args, "--backend", "ray", "--out", str(remote)]) == 0
    finally:
        ray.shutdown()
    for line in ("tlr", "teql-lam0", "teql-lam"):
        a = read_metrics(local / "cartpole" / line / "metrics.csv")
        b = read_metrics(remote / "cartpole" / line / "metrics.csv")
        for column in EXCEPT_WALL:
            np.testing.assert_array_equal(a[column], b[column], f"{line} {column}")
    assert _rows(local / "cartpole-scores.csv") == _rows(remote / "cartpole-scores.csv")


def test_resume_reruns_a_configuration_whose_metrics_were_damaged(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["ablation", "--env", "cartpole", "--episodes-scale", "0.001", "--seeds", "2"]
    args += ["--workers", "2", "--out", str(out)]
    assert main(args) == 0
    metrics = out / "cartpole" / "tlr" / "metrics.csv"
    before = read_metrics(metrics)
    metrics.write_text("".join(metrics.read_text().splitlines(keepends=True)[:-2]))
    capsys.readouterr()
    assert main([*args, "--resume"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(
        f"rerunning cartpole/tlr (recorded done): The checkpoint in {metrics.parent} (episode 10, "
    ), err
    assert (
        "it was changed after the checkpoint and cannot be resumed.\n"
        "1 configurations to run (2 already done).\n"
    ) in err
    after = read_metrics(metrics)
    for column in EXCEPT_WALL:
        np.testing.assert_array_equal(after[column], before[column], column)
