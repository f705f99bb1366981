"""``rl.tune --population``: trials of different ages in one batch equal each trained alone."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from benchmarks.bench_tune_population import SPACE
from rl.runs.batch.staggered import StaggeredMember, train_segment
from rl.runs.config import TrainConfig
from rl.runs.metrics import COLUMNS, read_metrics
from rl.runs.training import train
from rl.train import main as train_main
from tests.rl.test_sweep_batch import _assert_same_run

optuna = pytest.importorskip("optuna")

from rl.tune import study as tune_study  # noqa: E402
from rl.tune.cli import main  # noqa: E402
from rl.tune.study import trial_dir  # noqa: E402

EXCEPT_WALL = [c for c in COLUMNS if c != "wall_time"]

AGENTS = {"teql-stable": ("teql", "stable"), "tabular": ("tabular", None)}


def _config(out: Path, agent: str, reading: str | None, **agent_params: float) -> TrainConfig:
    return TrainConfig(
        env="cartpole", agent=agent, reading=reading, seeds=2, episodes=15, eval_every=5,
        checkpoint_every=5, out=str(out), agent_params=agent_params,
    )  # fmt: skip


def _assert_prefix_of_alone(run_dir: Path, alone: Path) -> None:
    """The episodes ``run_dir`` played are, bitwise, the first ones of the lone run."""
    ours, theirs = read_metrics(run_dir / "metrics.csv"), read_metrics(alone / "metrics.csv")
    rows = len(ours["episode"])
    assert 0 < rows < len(theirs["episode"])
    for column in EXCEPT_WALL:
        np.testing.assert_array_equal(ours[column], theirs[column][:rows], err_msg=column)


def _alone(config: TrainConfig, tmp_path: Path) -> Path:
    lone = dataclasses.replace(config, out=str(tmp_path / "alone" / Path(config.out).name))
    train(lone)
    return Path(lone.out)


def _trial_alone(run_dir: Path, tmp_path: Path) -> Path:
    """Train a trial's ``config.json`` with ``rl.train``; return its run directory."""
    alone = tmp_path / "alone" / run_dir.name
    config = str(run_dir / "config.json")
    assert train_main(["--config", config, "--out", str(alone), "--no-plot"]) == 0
    return alone


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_members_that_join_a_batch_at_other_episodes_equal_each_trained_alone(tmp_path, name):
    """a leaves after 5 episodes; c joins its slot at episode 0 while b is at episode 5."""
    agent, reading = AGENTS[name]
    a, b, c = (
        _config(tmp_path / "pop" / key, agent, reading, gamma=gamma)
        for key, gamma in (("a", 0.9), ("b", 0.95), ("c", 0.99))
    )
    first, second = StaggeredMember(a), StaggeredMember(b)
    train_segment([first, second], 5)
    first.checkpoint()  # a "pruned" member stops at its checkpoint
    first.close()
    third = StaggeredMember(c)
    train_segment([second, third], 5)  # b plays episodes 6..10, c 1..5
    assert (second.age, third.age) == (10, 5)
    train_segment([second, third], 5)
    train_segment([third], 5)
    for member in (second, third):
        assert member.done
        member.checkpoint()
        member.close()
        _assert_same_run(member.run_dir, _alone(member.config, tmp_path))
    _assert_prefix_of_alone(first.run_dir, _alone(a, tmp_path))
    assert read_metrics(first.run_dir / "metrics.csv")["episode"].max() == 5


RUN = ["--env", "CartPole-v1", "--agent", "teql", "--reading", "stable", "--seeds", "2"]


def _command(tmp_path: Path, out: Path, *more: str, space: str = SPACE) -> list[str]:
    path = tmp_path / "space.toml"
    path.write_text(space)
    return [*RUN, "--space", str(path), "--out", str(out), "--eval-every", "5", *more]


def _trials(out: Path) -> list:
    storage = optuna.storages.RDBStorage(f"sqlite:///{out / 'study.db'}")
    return optuna.load_study(study_name=tune_study.STUDY_NAME, storage=storage).trials


def test_a_population_refills_pruned_slots_and_each_trial_equals_rl_train_alone(
    tmp_path, capsys
) -> None:
    out = tmp_path / "out"
    argv = _command(
        tmp_path, out, "--n-trials", "8", "--episodes", "20", "--population", "3",
        "--objective", "return",
    )  # fmt: skip
    assert main(argv) == 0
    trials = _trials(out)
    states = [t.state.name for t in trials]
    assert len(trials) == 8 and set(states) <= {"COMPLETE", "PRUNED"}
    assert "PRUNED" in states and "COMPLETE" in states
    # trials start in 3 slots; every later one took a slot a pruned or finished trial freed
    starts = sorted(trials, key=lambda t: t.datetime_start)
    assert [t.number for t in starts] == list(range(8))
    ends = sorted(t.datetime_complete for t in trials)
    assert all(t.datetime_start >= ends[t.number - 3] for t in trials[3:])
    for trial in trials:
        run_dir = trial_dir(out, trial.number)
        alone = _trial_alone(run_dir, tmp_path)
        if trial.state.name == "COMPLETE":
            _assert_same_run(run_dir, alone)
            table = read_metrics(alone / "metrics.csv")
            score = tune_study.window_iqm(table, "return", 19, 20)
            assert trial.value == score
        else:
            _assert_prefix_of_alone(run_dir, alone)
            last = max(trial.intermediate_values)
            assert read_metrics(run_dir / "metrics.csv")["episode"].max() == last
    assert "8 trials complete or pruned" in capsys.readouterr().out


def test_a_population_larger_than_a_batch_trains_in_batches_each_trial_as_alone(
    tmp_path, monkeypatch
) -> None:
    from rl.tune import population

    monkeypatch.setattr(population, "MAX_BATCH_REPLICAS", 4)  # 2 trials of 2 seeds a batch
    out = tmp_path / "out"
    argv = _command(
        tmp_path, out, "--n-trials", "4", "--episodes", "10", "--population", "3",
        "--pruner", "none",
    )  # fmt: skip
    sizes = []
    play_batch = population._play_batch

    def counted(slots, *args):
        sizes.append(len(slots))
        return play_batch(slots, *args)

    monkeypatch.setattr(population, "_play_batch", counted)
    assert main(argv) == 0
    assert sizes[:2] == [2, 1] and max(sizes) == 2
    trials = _trials(out)
    assert [t.state.name for t in trials] == ["COMPLETE"] * 4
    for trial in trials:
        run_dir = trial_dir(out, trial.number)
        _assert_same_run(run_dir, _trial_alone(run_dir, tmp_path))


def test_a_space_that_cannot_vary_per_replica_is_refused_in_one_line(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    grid = SPACE + '\n[params."env_options.state_bins"]\ntype = "int"\nlow = 4\nhigh = 6\n'
    argv = _command(tmp_path, out, "--n-trials", "2", "--population", "2", space=grid)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "'env_options.state_bins'" in err and "drop --population" in err
    assert not out.exists() or not any((out / "trials").glob("*"))
    assert main(_command(tmp_path, out, "--n-trials", "2", "--population", "-1")) == 2
    assert "'population' parameter must be >= 1" in capsys.readouterr().err


def test_an_interrupted_population_queues_its_live_trials_and_resumes_to_n_trials(
    tmp_path, monkeypatch
) -> None:
    """Ctrl-C after the first trial ends: the live ones rerun, each counted once."""
    out = tmp_path / "out"
    argv = _command(
        tmp_path, out, "--n-trials", "5", "--episodes", "10", "--population", "3",
        "--pruner", "none",
    )  # fmt: skip
    from rl.tune import cli

    said = cli._say

    def interrupt(trial, error) -> None:
        said(trial, error)
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_say", interrupt)
    assert main(argv) == 130
    first = {t.number: t.state.name for t in _trials(out)}
    assert sorted(first.values()) == ["COMPLETE", "FAIL", "FAIL", "WAITING", "WAITING"]
    monkeypatch.setattr(cli, "_say", said)
    assert main(argv) == 0
    trials = _trials(out)
    done = [t for t in trials if t.state.name == "COMPLETE"]
    assert len(done) == 5
    reruns = {t.system_attrs["failed_trial"]: t for t in trials if "failed_trial" in t.system_attrs}
    failed = [t for t in trials if t.state.name == "FAIL"]
    assert sorted(reruns) == sorted(t.number for t in failed)
    for trial in failed:  # queued again with its parameters, and rerun from episode 1
        rerun = reruns[trial.number]
        assert rerun.params == trial.params and rerun.state.name == "COMPLETE"
        run_dir = trial_dir(out, rerun.number)
        _assert_same_run(run_dir, _trial_alone(run_dir, tmp_path))


def test_a_population_killed_mid_batch_resumes_to_n_trials(tmp_path, monkeypatch) -> None:
    """kill -9 while a batch trains: the live trials' heartbeats go stale and they rerun."""
    from tests.rl.test_tune import _kill_mid_trial

    out = tmp_path / "out"
    argv = _command(
        tmp_path, out, "--n-trials", "4", "--episodes", "30", "--population", "2",
        "--pruner", "none",
    )  # fmt: skip
    _kill_mid_trial(argv, out)
    killed = {t.number for t in _trials(out) if t.state.name == "RUNNING"}
    assert 1 in killed
    monkeypatch.setattr(tune_study, "HEARTBEAT_SECONDS", 1)
    monkeypatch.setattr(tune_study, "GRACE_SECONDS", 1)
    assert main(argv) == 0
    trials = _trials(out)
    assert sum(t.state.name == "COMPLETE" for t in trials) == 4
    assert {t.number for t in trials if t.state.name == "FAIL"} == killed
    reruns = {t.system_attrs["failed_trial"]: t for t in trials if "failed_trial" in t.system_attrs}
    assert sorted(reruns) == sorted(killed)
    for number in killed:  # queued again with its parameters, and rerun from episode 1
        rerun = reruns[number]
        assert rerun.params == trials[number].params and rerun.state.name == "COMPLETE"
        run_dir = trial_dir(out, rerun.number)
        _assert_same_run(run_dir, _trial_alone(run_dir, tmp_path))
    assert main(argv) == 0  # a finished study runs nothing more
    assert len(_trials(out)) == len(trials)


def test_a_runner_takes_offsets_only_when_built_staggered_and_one_per_replica() -> None:
    from rl.runs.config import resolve_settings
    from rl.runs.training import build_run

    settings = resolve_settings(_config(Path("unused"), "tabular", None))
    runner, _ = build_run(settings)
    try:
        with pytest.raises(ValueError, match="staggered=True"):
            next(runner.episodes(0, 1, offsets=[0, 5]))
        runner.staggered = True
        with pytest.raises(ValueError, match="must be 2 episode counts >= 0"):
            next(runner.episodes(0, 1, offsets=[0, -1]))
    finally:
        runner.close()
