"""``python -m rl.tune``: the search space, the trial's score and pruning, resume after kill -9."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

optuna = pytest.importorskip("optuna")

from rl import train  # noqa: E402
from rl.runs.config import ConfigError, TrainConfig  # noqa: E402
from rl.runs.metrics import COLUMNS, read_metrics  # noqa: E402
from rl.runs.rundir import lock_holder  # noqa: E402
from rl.tune import study as tune_study  # noqa: E402
from rl.tune.cli import main  # noqa: E402
from rl.tune.results import BEST_CONFIG_FILE, TABLE_FILE  # noqa: E402
from rl.tune.space import Param, read_space  # noqa: E402
from rl.tune.study import Search, run_trial, trial_dir, window_iqm  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXCEPT_WALL = [c for c in COLUMNS if c != "wall_time"]

SPACE = """
[params.c]
type = "float"
low = 0.1
high = 10.0
log = true

[params."env_options.state_bins"]
type = "int"
low = 4
high = 6
"""

RUN = ["--env", "CartPole-v1", "--agent", "teql", "--reading", "stable", "--seeds", "2"]


def _space(tmp_path: Path, text: str = SPACE) -> Path:
    path = tmp_path / "space.toml"
    path.write_text(text)
    return path


def _command(tmp_path: Path, out: Path, *more: str) -> list[str]:
    return [*RUN, "--space", str(_space(tmp_path)), "--out", str(out), "--eval-every", "5", *more]


def _states(out: Path) -> dict[int, str]:
    storage = optuna.storages.RDBStorage(f"sqlite:///{out / 'study.db'}")
    study = optuna.load_study(study_name=tune_study.STUDY_NAME, storage=storage)
    return {t.number: t.state.name for t in study.trials}


def test_window_iqm_is_the_iqm_over_seeds_of_each_seeds_window_mean() -> None:
    # seeds 0..3, episodes 1..4; seed means over episodes 3..4: 2, 3, 5, 100
    table = {
        "seed": np.repeat([0, 1, 2, 3], 4),
        "episode": np.tile([1, 2, 3, 4], 4),
        "greedy_return": np.array(
            [9, 9, 1, 3, 9, 9, 3, 3, 9, 9, np.nan, 5, 9, 9, 100, 100], dtype=float
        ),
    }
    assert window_iqm(table, "greedy_return", 3, 4) == 4.0  # middle two of 2, 3, 5, 100
    assert window_iqm(table, "greedy_return", 1, 1) == 9.0


def test_read_space_gives_each_parameters_range_and_table(tmp_path) -> None:
    text = (
        SPACE
        + '\n[params."agent_params.update"]\ntype = "categorical"\nchoices = ["stable", "paper"]\n'
    )
    c, bins, update = read_space(_space(tmp_path, text))
    assert c == Param("c", "float", 0.1, 10.0, True)
    assert (bins.table, bins.key, bins.low, bins.high) == ("env_options", "state_bins", 4, 6)
    assert (update.table, update.key, update.choices) == (
        "agent_params",
        "update",
        ("stable", "paper"),
    )
    base = TrainConfig(env="CartPole-v1", agent="teql", out="x", episodes=20)
    record = Search(base, (c, bins, update), 3).record()  # what a resumed study compares
    assert json.loads(json.dumps(record)) == record
    assert record["params"][2] == {
        "name": "agent_params.update",
        "kind": "categorical",
        "log": False,
        "choices": ["stable", "paper"],
    }


@pytest.mark.parametrize(
    "table,message",
    [
        ("[params.no_such]\ntype = 'float'\nlow = 0.1\nhigh = 1.0", "Unknown parameter 'no_such'"),
        ("[params.c]\ntype = 'float'\nlow = 2.0\nhigh = 1.0", "the range is empty"),
        ("[params.rank]\ntype = 'int'\nlow = 3\nhigh = 3", "the range is empty"),
        ("[params.c]\ntype = 'categorical'\nchoices = ['big', 'small']", "'c' parameter must"),
        ("[params.c]\ntype = 'categorical'\nchoices = [[1, 2]]", "string, number or boolean"),
        ("[params.c]\ntype = 'float'\nlow = 0.0\nhigh = 1.0\nlog = true", "needs low > 0"),
        ("[params.c]\ntype = 'real'\nlow = 0.0\nhigh = 1.0", "'type' must be one of"),
        ("[params.c]\ntype = 'float'\nlow = 0.1\nhigh = 1.0\nlg = true", "unknown key 'lg'"),
        ("[params.'env_options.bins']\ntype = 'int'\nlow = 2\nhigh = 4", "'bins'"),
    ],
)
def test_a_bad_search_space_is_one_line_exit_2_and_writes_nothing(
    tmp_path, capsys, table, message
) -> None:
    out = tmp_path / "out"
    argv = [*RUN, "--space", str(_space(tmp_path, table)), "--out", str(out), "--n-trials", "2"]
    assert main([*argv, "--episodes", "10"]) == 2
    error = capsys.readouterr().err
    assert message in error and error.startswith("error: ") and error.count("\n") == 1
    assert not out.exists()


def test_a_damaged_or_locked_study_file_is_refused_and_nothing_written(
    tmp_path, capsys, monkeypatch
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "study.db").write_bytes(b"not a database, but forty bytes of text.")
    assert main([*_command(tmp_path, out), "--n-trials", "2", "--episodes", "10"]) == 2
    error = capsys.readouterr().err
    assert "Cannot open the study file" in error and "not a database" in error
    assert sorted(p.name for p in out.iterdir()) == ["study.db"]

    (out / "study.db").unlink()
    holder = sqlite3.connect(out / "study.db")
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(tune_study, "SQLITE_TIMEOUT_SECONDS", 0.1)
    try:
        assert main([*_command(tmp_path, out), "--n-trials", "2", "--episodes", "10"]) == 2
    finally:
        holder.close()
    error = capsys.readouterr().err
    assert "database is locked" in error and error.count("\n") == 1
    assert sorted(p.name for p in out.iterdir()) == ["study.db"]


def test_optuna_missing_names_the_extra(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "optuna", None)
    out = tmp_path / "out"
    assert main([*_command(tmp_path, out), "--n-trials", "2", "--episodes", "10"]) == 2
    assert 'pip install "teql[tune]"' in capsys.readouterr().err
    assert not out.exists()


def test_a_trial_trains_the_drawn_values_and_a_pruned_one_stops_at_its_evaluation(tmp_path) -> None:
    base = TrainConfig(
        env="CartPole-v1", agent="teql", reading="stable", out="x", seeds=3, episodes=30,
        eval_every=5,
    )  # fmt: skip
    more = "[params.max_inner]\ntype = 'categorical'\nchoices = [1, 2]\n"
    more += "[params.alpha0]\ntype = 'float'\nlow = 0.2\nhigh = 1.0\nstep = 0.2\n"
    search = Search(base, tuple(read_space(_space(tmp_path, SPACE + more))), 1, window=10)
    study = optuna.create_study(  # a seeded draw: the test is the same on every run
        sampler=optuna.samplers.RandomSampler(seed=0),
        pruner=optuna.pruners.ThresholdPruner(lower=1e9),
    )
    trial = study.ask()
    with pytest.raises(optuna.TrialPruned):
        run_trial(trial, search, tmp_path / "trial")
    drawn = study.trials[0].params
    assert drawn["max_inner"] in (1, 2) and round(drawn["alpha0"] / 0.2, 9) % 1 == 0
    config = json.loads((tmp_path / "trial" / "config.json").read_text())
    agent = config["agent_params"]
    assert (agent["c"], agent["max_inner"], agent["alpha0"]) == tuple(
        drawn[name] for name in ("c", "max_inner", "alpha0")
    )
    assert config["env_options"]["state_bins"] == drawn["env_options.state_bins"]
    table = read_metrics(tmp_path / "trial" / "metrics.csv")
    # stopped after the evaluation of episode 5 (the episodes the replicas had played on kept)
    assert 5 <= table["episode"].max() < 15
    assert study.trials[0].intermediate_values == {5: window_iqm(table, "greedy_return", 1, 5)}
    with pytest.raises(ConfigError, match="holds no greedy evaluation"):
        Search(replace(base, episodes=33), search.params, 1, window=3)  # 31..33: no eval


def _kill_mid_trial(argv: list[str], out: Path) -> None:
    """Start ``rl.tune`` in a subprocess and SIGKILL it while trial 1 trains."""
    process = subprocess.Popen(
        [sys.executable, "-m", "rl.tune", *argv],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    deadline = time.monotonic() + 120
    try:
        while lock_holder(trial_dir(out, 1)) is None:  # trial 1's run holds its directory
            assert process.poll() is None, process.stderr.read().decode()
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        process.stderr.close()


def test_a_study_killed_mid_trial_resumes_with_each_trial_counted_once(
    tmp_path, capsys, monkeypatch
) -> None:
    out = tmp_path / "out"
    argv = _command(tmp_path, out, "--n-trials", "3", "--episodes", "40", "--pruner", "none")
    _kill_mid_trial(argv, out)
    assert _states(out) == {0: "COMPLETE", 1: "RUNNING"}
    before = (out / "study.db").read_bytes()
    monkeypatch.setattr(tune_study, "HEARTBEAT_SECONDS", 1)
    monkeypatch.setattr(tune_study, "GRACE_SECONDS", 1)
    assert main(argv) == 0
    states = _states(out)
    assert states == {0: "COMPLETE", 1: "FAIL", 2: "COMPLETE", 3: "COMPLETE"}
    storage = optuna.storages.RDBStorage(f"sqlite:///{out / 'study.db'}")
    trials = optuna.load_study(study_name=tune_study.STUDY_NAME, storage=storage).trials
    reruns = [t for t in trials if "failed_trial" in t.system_attrs]
    assert [t.system_attrs["failed_trial"] for t in reruns] == [1]  # the killed trial, rerun
    assert reruns[0].params == trials[1].params and reruns[0].number in (2, 3)
    assert before != (out / "study.db").read_bytes()
    table = (out / TABLE_FILE).read_text().splitlines()
    assert [row.split(",")[1] for row in table[1:]] == list(states.values())
    # the best settings rerun by rl.train give the trial's numbers bitwise
    best = max((t for t in trials if t.state.name == "COMPLETE"), key=lambda t: t.value).number
    rerun = tmp_path / "rerun"
    code = train.main(["--config", str(out / BEST_CONFIG_FILE), "--out", str(rerun), "--no-plot"])
    assert code == 0
    theirs = read_metrics(trial_dir(out, best) / "metrics.csv")
    ours = read_metrics(rerun / "metrics.csv")
    for column in EXCEPT_WALL:
        np.testing.assert_array_equal(ours[column], theirs[column])
    assert main(argv) == 0  # a finished study runs nothing more
    assert _states(out) == states
    assert main([*argv[:-4], "--episodes", "41", "--pruner", "none"]) == 2
    assert "another search's (it differs in: episodes)" in capsys.readouterr().err


def test_two_workers_share_the_study_and_end_with_exactly_n_trials(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    argv = _command(tmp_path, out, "--n-trials", "4", "--episodes", "10", "--workers", "2")
    assert main(argv) == 0
    assert _states(out) == dict.fromkeys(range(4), "COMPLETE")
    assert "4 trials complete or pruned (4 complete, 0 pruned, 0 failed)" in capsys.readouterr().out


def test_a_timeout_starts_no_trial_after_it_and_still_writes_the_table(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    argv = _command(tmp_path, out, "--n-trials", "4", "--episodes", "10", "--timeout", "0")
    assert main(argv) == 0
    assert _states(out) == {}
    lines = (out / TABLE_FILE).read_text().splitlines()
    assert lines == ["number,state,value,last_report,retry_of,wall_s,run_dir,error"]
    assert "not drawn: best_config.json: no trial is complete yet" in capsys.readouterr().out


def test_a_search_whose_trials_all_fail_stops_after_n_with_exit_1(
    tmp_path, capsys, monkeypatch
) -> None:
    def fails(trial, search, run_dir):
        trial.suggest_float("c", 0.1, 10.0, log=True)
        raise ValueError("The reward of replica 0 is nan.")

    monkeypatch.setattr(tune_study, "run_trial", fails)
    out = tmp_path / "out"
    assert main([*_command(tmp_path, out), "--n-trials", "2", "--episodes", "10"]) == 1
    assert _states(out) == {0: "FAIL", 1: "FAIL"}
    rows = (out / TABLE_FILE).read_text().splitlines()[1:]
    assert all(row.endswith(",The reward of replica 0 is nan.") for row in rows)
    assert "trial 1 fail" in capsys.readouterr().err
