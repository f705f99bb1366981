import dataclasses
import json
import shutil
import sys

import numpy as np
import pytest

from rl.experiments.executor import (
    ERROR_FILE,
    INDEX_FILE,
    RAY_INSTALL_HINT,
    ExecutorError,
    Task,
    config_hash,
    read_index,
    run_tasks,
)
from rl.runs.config import TrainConfig
from rl.runs.copy_run import copy_run
from rl.runs.metrics import COLUMNS, read_metrics
from rl.runs.rundir import RunDirError, RunLock
from rl.runs.training import train
from rl.runs.verify import verify_run

EXCEPT_WALL = [c for c in COLUMNS if c != "wall_time"]
BASE = TrainConfig(env="cartpole", agent="teql", out="unused", seeds=2, episodes=12, eval_every=4)


def _tasks(count, **changes):
    return [
        Task(f"t{i}", dataclasses.replace(BASE, seed=10 * i, **changes), {"seed": 10 * i})
        for i in range(count)
    ]


class Killed(Exception):
    """Stands for the driver dying right after it recorded a task."""


def test_failing_task_is_recorded_and_the_others_finish(tmp_path):
    tasks = _tasks(3)
    bad = dataclasses.replace(BASE, env_options={"bogus_option": 1})  # fails inside the task
    tasks[1] = Task("bad", bad, {"env_options.bogus_option": 1})
    seen = []
    results = run_tasks(tasks, tmp_path, workers=2, on_done=seen.append, plot=False)
    assert [r.status for r in results] == ["done", "failed", "done"]
    assert sorted(r.name for r in seen) == ["bad", "t0", "t2"]
    assert "bogus_option" in results[1].error and "\n" not in results[1].error
    rows = {row["name"]: row for row in read_index(tmp_path)}
    assert rows["bad"]["status"] == "failed" and "bogus_option" in rows["bad"]["error"]
    assert rows["bad"]["env_options.bogus_option"] == "1"
    assert rows["t0"]["status"] == rows["t2"]["status"] == "done"
    error_text = (tmp_path / "bad" / ERROR_FILE).read_text()
    assert "bogus_option" in error_text and "Traceback" in error_text
    for name in ("t0", "t2"):
        assert (tmp_path / name / "metrics.csv").is_file()


def test_killed_driver_resumes_only_unfinished_tasks(tmp_path):
    tasks = _tasks(4)

    def die(result):
        raise Killed

    with pytest.raises(Killed):
        run_tasks(tasks, tmp_path, workers=1, on_done=die, plot=False)
    rows = read_index(tmp_path)
    done = [row["name"] for row in rows if row["status"] == "done"]
    assert len(done) == 1 and {row["status"] for row in rows} == {"done", "pending"}
    kept = (tmp_path / done[0] / "metrics.csv").stat().st_mtime_ns

    with pytest.raises(ExecutorError, match="--resume"):
        run_tasks(tasks, tmp_path, workers=1, plot=False)
    ran = []
    results = run_tasks(tasks, tmp_path, workers=2, resume=True, on_done=ran.append, plot=False)
    assert sorted(r.name for r in ran) == sorted(t.name for t in tasks if t.name not in done)
    assert all(r.status == "done" for r in results)
    assert [r.ran for r in results] == [t.name not in done for t in tasks]
    assert (tmp_path / done[0] / "metrics.csv").stat().st_mtime_ns == kept
    assert [row["status"] for row in read_index(tmp_path)] == ["done"] * 4
    assert run_tasks(tasks, tmp_path, resume=True, on_done=ran.append) and len(ran) == 3


def _killed_mid_run(tmp_path, task, config):
    """Leave ``tmp_path / task.name`` as a task killed after its checkpoint of episode 4."""
    result = train(dataclasses.replace(config, out=str(tmp_path / task.name)), stop_after_episode=4)
    assert result.interrupted and result.episodes_done == 4
    return read_metrics(tmp_path / task.name / "metrics.csv")


@pytest.mark.parametrize("same_config", [True, False])
def test_resume_continues_a_task_killed_mid_run(tmp_path, same_config):
    """A pending task's checkpoint of the same configuration is continued, not retrained;
    one of another configuration is replaced. Either way the run is the uninterrupted one."""
    (task,) = _tasks(1, checkpoint_every=4)
    reference = read_metrics(
        train(dataclasses.replace(task.config, out=str(tmp_path / "ref"))).run_dir / "metrics.csv"
    )
    other = task.config if same_config else dataclasses.replace(task.config, seed=99)
    partial = _killed_mid_run(tmp_path / "out", task, other)
    (result,) = run_tasks([task], tmp_path / "out", workers=1, resume=True, plot=False)
    assert result.status == "done" and result.ran
    after = read_metrics(tmp_path / "out" / task.name / "metrics.csv")
    for column in EXCEPT_WALL:
        np.testing.assert_array_equal(after[column], reference[column], column)
    first = after["episode"] <= 4  # trained before the kill: kept, down to the wall time
    kept = np.array_equal(after["wall_time"][first], partial["wall_time"][partial["episode"] <= 4])
    assert kept == same_config
    assert result.wall_time >= after["wall_time"].max()  # the run's, over both segments


@pytest.mark.slow  # a local Ray instance starts in 10 to 30 s
def test_resume_on_ray_continues_from_the_drivers_checkpoint(tmp_path):
    ray = pytest.importorskip("ray")
    (task,) = _tasks(1, checkpoint_every=4)
    partial = _killed_mid_run(tmp_path, task, task.config)
    ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        (result,) = run_tasks([task], tmp_path, backend="ray", resume=True, plot=False)
    finally:
        ray.shutdown()
    assert result.status == "done"
    after = read_metrics(tmp_path / task.name / "metrics.csv")
    assert len(after["episode"]) == 2 * 12
    kept = after["episode"] <= 4
    np.testing.assert_array_equal(
        after["wall_time"][kept], partial["wall_time"][partial["episode"] <= 4]
    )


def test_hash_ignores_out_and_spelling_of_defaults():
    same = dataclasses.replace(BASE, out="elsewhere", agent_params={"rank": 10})
    assert config_hash(same) == config_hash(BASE)
    assert config_hash(dataclasses.replace(BASE, seed=1)) != config_hash(BASE)


def test_ray_missing_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ExecutorError) as error:
        run_tasks(_tasks(1), tmp_path, backend="ray")
    assert str(error.value) == RAY_INSTALL_HINT and 'pip install -e ".[ray]"' in str(error.value)
    assert not (tmp_path / INDEX_FILE).exists()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"backend": "dask"}, "backend"),
        ({"workers": 0}, "workers"),
        ({"address": "ray://x:1"}, "address"),
    ],
)
def test_bad_arguments_are_refused(tmp_path, kwargs, match):
    with pytest.raises(ExecutorError, match=match):
        run_tasks(_tasks(1), tmp_path / "out", **kwargs)
    assert not (tmp_path / "out").exists()


def test_duplicate_task_names_are_refused(tmp_path):
    with pytest.raises(ExecutorError, match="unique"):
        run_tasks([*_tasks(1), *_tasks(1)], tmp_path / "out")


def test_resume_reruns_tasks_whose_files_are_missing_or_damaged(tmp_path):
    tasks = _tasks(5)
    run_tasks(tasks, tmp_path, workers=2, plot=False)
    before = {t.name: read_metrics(tmp_path / t.name / "metrics.csv") for t in tasks}
    (tmp_path / "t0" / "metrics.csv").unlink()
    checkpoint = tmp_path / "t1" / "checkpoint.npz"
    checkpoint.write_bytes(checkpoint.read_bytes()[:-100])
    metrics = tmp_path / "t2" / "metrics.csv"
    metrics.write_text("".join(metrics.read_text().splitlines(keepends=True)[:-1]))
    shutil.rmtree(tmp_path / "t3")
    started = []
    results = run_tasks(
        tasks,
        tmp_path,
        workers=2,
        resume=True,
        plot=False,
        on_start=lambda names, reruns: started.append((names, reruns)),
    )
    ((names, reruns),) = started
    assert names == ["t0", "t1", "t2", "t3"] and list(reruns) == names
    assert reruns["t0"] == f"{tmp_path / 't0' / 'metrics.csv'} does not exist."
    assert reruns["t1"].startswith(f"Refusing checkpoint {checkpoint}: ")
    assert reruns["t2"].startswith(f"The checkpoint in {tmp_path / 't2'} (episode 12, ")
    assert reruns["t2"].endswith("it was changed after the checkpoint and cannot be resumed.")
    assert reruns["t3"] == f"The run directory {tmp_path / 't3'} does not exist."
    assert [r.ran for r in results] == [True, True, True, True, False]
    assert [r.status for r in results] == ["done"] * 5
    for task in tasks:
        after = read_metrics(tmp_path / task.name / "metrics.csv")
        for column in EXCEPT_WALL:
            np.testing.assert_array_equal(after[column], before[task.name][column], column)
    assert verify_run(tmp_path / "t1", tasks[1].config) is None


def test_verify_run_names_what_is_missing(tmp_path):
    config = dataclasses.replace(BASE, out=str(tmp_path / "run"), episodes=4)
    train(config)
    assert verify_run(tmp_path / "run", config) is None
    longer = dataclasses.replace(config, episodes=6)
    assert verify_run(tmp_path / "run", longer) == (
        f"The checkpoint {tmp_path / 'run' / 'checkpoint.npz'} is of episode 4, "
        "before the 6 configured."
    )
    metrics = tmp_path / "run" / "metrics.csv"
    text = metrics.read_text()
    metrics.write_text(text[:-2] + "x\n")  # the last wall time, same length: rows still whole
    assert verify_run(tmp_path / "run", config).startswith(f"{metrics}")
    metrics.write_text(text.replace("return", "retrun", 1))
    assert verify_run(tmp_path / "run", config).startswith(
        f"The checkpoint in {tmp_path / 'run'} (episode 4, "
    )


def test_reuse_copies_finished_runs_of_the_same_configuration(tmp_path):
    """A configuration done in another output directory is copied, bytes and all, not trained."""
    first, second = tmp_path / "first", tmp_path / "second"
    tasks = _tasks(3)
    run_tasks(tasks[:2], first, workers=2, plot=False)
    # t1 damaged there (the checkpoint cut short): trained here; t2 is not there at all
    checkpoint = first / "t1" / "checkpoint.npz"
    checkpoint.write_bytes(checkpoint.read_bytes()[:-100])
    renamed = [Task(f"again/{t.name}", t.config, t.values) for t in tasks]
    ran = []
    results = run_tasks(
        renamed, second, workers=2, reuse=[first, tmp_path / "none"], on_done=ran.append, plot=False
    )
    assert [r.status for r in results] == ["done"] * 3
    assert [r.ran for r in results] == [False, True, True]
    assert results[0].copied_from == first / "t0" and results[1].copied_from is None
    assert sorted(r.name for r in ran) == ["again/t1", "again/t2"]
    for name in ("metrics.csv", "checkpoint.npz"):
        assert (second / "again/t0" / name).read_bytes() == (first / "t0" / name).read_bytes()
    config = json.loads((second / "again/t0" / "config.json").read_text())
    assert config["out"] == str(second / "again/t0")
    assert config | {"out": ""} == json.loads((first / "t0" / "config.json").read_text()) | {
        "out": ""
    }
    rows = {row["name"]: row for row in read_index(second)}
    recorded = {row["name"]: row for row in read_index(first)}
    assert rows["again/t0"]["status"] == "done"
    assert rows["again/t0"]["wall_time"] == recorded["t0"]["wall_time"]
    assert [rows[f"again/t{i}"]["copied_from"] for i in range(3)] == [str(first / "t0"), "", ""]
    assert verify_run(second / "again/t0", tasks[0].config) is None
    # a resumed call keeps the record of what was copied
    again = run_tasks(renamed, second, workers=1, resume=True, reuse=[first], plot=False)
    assert [r.copied_from for r in again] == [first / "t0", None, None]
    assert read_index(second) == list(rows.values())


def test_two_copies_of_one_run_may_read_it_at_once_but_not_while_it_is_written(tmp_path):
    run_tasks(_tasks(1), tmp_path / "first", workers=1, plot=False)
    source = tmp_path / "first" / "t0"
    with RunLock.acquire(source, shared=True):  # another copy reading it
        copy_run(source, tmp_path / "a")
    assert (tmp_path / "a" / "metrics.csv").read_bytes() == (source / "metrics.csv").read_bytes()
    with RunLock.acquire(source), pytest.raises(RunDirError, match="in use by process"):
        copy_run(source, tmp_path / "b")
    assert not (tmp_path / "b" / "metrics.csv").exists()


def test_reuse_never_reads_through_a_link(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    tasks = _tasks(1)
    run_tasks(tasks, first, workers=1, plot=False)
    elsewhere = tmp_path / "secret.csv"
    (first / "t0" / "metrics.csv").rename(elsewhere)
    (first / "t0" / "metrics.csv").symlink_to(elsewhere)
    before = elsewhere.read_bytes()
    (result,) = run_tasks(tasks, second, workers=1, reuse=[first], plot=False)
    assert result.ran and result.copied_from is None  # trained, not copied
    assert not (second / "t0" / "metrics.csv").is_symlink()
    assert elsewhere.read_bytes() == before
