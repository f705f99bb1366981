import errno
import os
import signal

import gymnasium
import numpy as np
import pytest

from rl.agents.random_agent import RandomAgent, RandomConfig
from rl.loop.runner import episode_seed
from rl.problems import Problem, make_problem
from rl.runs import training as runner_module
from rl.runs.checkpoint import load_checkpoint
from rl.runs.config import ConfigError, TrainConfig
from rl.runs.metrics import COLUMNS, MetricsWriter, read_metrics
from rl.runs.rundir import RunWriteError
from rl.runs.training import Runner, build, run, train
from rl.seeding import spawn_replicas

EXCEPT_WALL = [c for c in COLUMNS if c != "wall_time"]


def _train(tmp_path, name, **fields):
    values = {
        "env": "cartpole",
        "agent": "random",
        "episodes": 12,
        "seeds": 3,
        "checkpoint_every": 5,
        **fields,
    }
    config = TrainConfig(out=str(tmp_path / name), **values)
    result = train(config)
    return result, read_metrics(tmp_path / name / "metrics.csv")


def _assert_same(a, b, columns=EXCEPT_WALL):
    for column in columns:
        np.testing.assert_array_equal(a[column], b[column], err_msg=column)


def _rows_of(table, seed):
    keep = table["seed"] == seed
    return {column: values[keep] for column, values in table.items()}


@pytest.mark.parametrize(("env", "agent"), [("cartpole", "random"), ("inventory", "tabular")])
def test_same_seed_same_metrics_different_seed_differs(tmp_path, env, agent):
    _, first = _train(tmp_path, "a", env=env, agent=agent)
    _, again = _train(tmp_path, "b", env=env, agent=agent)
    _, other = _train(tmp_path, "c", env=env, agent=agent, seed=5)
    _assert_same(first, again)
    assert not np.array_equal(first["return"], other["return"])


@pytest.mark.parametrize(
    ("env", "agent"),
    [("cartpole", "random"), ("inventory", "tabular"), ("cartpole", "teql"), ("cartpole", "tlr")],
)
def test_replicas_together_equal_each_alone(tmp_path, env, agent):
    _, together = _train(tmp_path, "all", env=env, agent=agent, seed=4, seeds=3, eval_every=3)
    for seed in (4, 5, 6):
        _, alone = _train(
            tmp_path, f"s{seed}", env=env, agent=agent, seed=seed, seeds=1, eval_every=3
        )
        _assert_same(_rows_of(together, seed), alone)


def test_metrics_rows_and_columns(tmp_path):
    result, table = _train(tmp_path, "run", seeds=2, episodes=7, seed=10)
    header = (tmp_path / "run" / "metrics.csv").read_text().splitlines()[0]
    assert header == ",".join(COLUMNS)
    assert table["seed"].tolist() == [10, 11] * 7
    assert table["episode"].tolist() == list(np.repeat(np.arange(1, 8), 2))
    assert np.all((table["length"] >= 1) & (table["length"] <= 100))
    assert np.all(np.diff(table["wall_time"]) >= 0)
    assert (result.episodes_done, result.interrupted, result.n_params) == (7, False, 0)
    assert load_checkpoint(tmp_path / "run" / "checkpoint.npz").episode == 7


def test_greedy_on_multiples_of_eval_every_and_training_unchanged(tmp_path):
    config = {"env": "inventory", "agent": "tabular", "episodes": 25, "seeds": 2}
    _, with_eval = _train(tmp_path, "eval", eval_every=10, eval_episodes=2, **config)
    _, without = _train(tmp_path, "none", eval_every=0, **config)
    evaluated = ~np.isnan(with_eval["greedy_return"])
    assert np.array_equal(evaluated, with_eval["episode"] % 10 == 0)
    assert evaluated.sum() == 2 * 2
    assert np.all(np.isnan(without["greedy_return"]))
    _assert_same(with_eval, without, ["seed", "episode", "return", "length"])


def test_training_return_matches_a_plain_loop(tmp_path):
    problem = make_problem("cartpole")
    streams = spawn_replicas([3])
    agent = RandomAgent(problem, RandomConfig(), [s.agent for s in streams])
    env = gymnasium.make(problem.env_id, **problem.env_kwargs)
    expected = []
    for episode in (1, 2, 3):
        obs, _ = env.reset(seed=episode_seed(streams[0].env_seed, episode))
        total, done = 0.0, False
        while not done:
            states = problem.encode(obs[None])
            action = problem.decode(agent.act(states, np.array([True])))[0]
            obs, reward, terminated, truncated, _ = env.step(action)
            total += reward
            done = terminated or truncated
        expected.append(total)
    _, table = _train(tmp_path, "run", seed=3, seeds=1, episodes=3, eval_every=0)
    np.testing.assert_allclose(table["return"], expected, rtol=1e-12)


@pytest.mark.parametrize(
    ("env", "agent"), [("inventory", "tabular"), ("cartpole", "teql"), ("lowrank", "teql-released")]
)
def test_interrupt_and_resume_equals_uninterrupted(tmp_path, env, agent):
    fields = {
        "env": env,
        "agent": agent,
        "seeds": 2,
        "episodes": 12,
        "checkpoint_every": 5,
        "eval_every": 3,
    }
    _, straight = _train(tmp_path, "straight", **fields)
    config = TrainConfig(out=str(tmp_path / "resumed"), **fields)
    result = train(config, stop_after_episode=7)
    assert result.interrupted and result.episodes_done == 7
    assert load_checkpoint(tmp_path / "resumed" / "checkpoint.npz").episode == 7
    result = train(config, resume=True)
    assert not result.interrupted and result.episodes_done == 12
    _assert_same(read_metrics(tmp_path / "resumed" / "metrics.csv"), straight)


def test_a_stop_outlasting_the_grace_period_drops_the_episodes_in_progress(tmp_path, monkeypatch):
    fields = {
        "env": "CliffWalking-v1",  # no time limit of its own: capped at 1000 steps
        "agent": "tabular",
        "seeds": 2,
        "episodes": 8,
        "checkpoint_every": 2,
        "eval_every": 3,
    }
    _, straight = _train(tmp_path, "straight", **fields)
    monkeypatch.setattr(runner_module, "STOP_GRACE_SECONDS", -1.0)  # overdue at once

    def terminate_after_three(log):
        if log.episode == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    config = TrainConfig(out=str(tmp_path / "dropped"), **fields)
    result = train(config, handle_signals=True, progress=terminate_after_three)
    assert result.interrupted and result.dropped and result.episodes_done == 2
    assert load_checkpoint(tmp_path / "dropped" / "checkpoint.npz").episode == 2
    assert read_metrics(tmp_path / "dropped" / "metrics.csv")["episode"].max() == 3
    result = train(config, resume=True)
    assert not result.interrupted and result.episodes_done == 8
    resumed = read_metrics(tmp_path / "dropped" / "metrics.csv")
    assert len(resumed["episode"]) == 16
    _assert_same(resumed, straight)


def test_hard_abort_resumes_from_last_periodic_checkpoint(tmp_path, monkeypatch):
    fields = {
        "env": "inventory",
        "agent": "tabular",
        "seeds": 2,
        "episodes": 12,
        "checkpoint_every": 5,
    }
    _, straight = _train(tmp_path, "straight", **fields)
    config = TrainConfig(out=str(tmp_path / "aborted"), **fields)
    original = Runner.episodes

    def aborting(self, start, stop, abandon=None):
        for result in original(self, start, stop, abandon):
            if result.episode == 9:
                raise KeyboardInterrupt
            yield result

    monkeypatch.setattr(Runner, "episodes", aborting)
    with pytest.raises(KeyboardInterrupt):
        train(config)
    monkeypatch.setattr(Runner, "episodes", original)
    assert read_metrics(tmp_path / "aborted" / "metrics.csv")["episode"].max() == 8
    assert load_checkpoint(tmp_path / "aborted" / "checkpoint.npz").episode == 5
    train(config, resume=True)
    _assert_same(read_metrics(tmp_path / "aborted" / "metrics.csv"), straight)


def test_resume_may_extend_episodes_but_not_change_the_run(tmp_path):
    fields = {"env": "cartpole", "agent": "random", "seeds": 2}
    _, straight = _train(tmp_path, "straight", episodes=15, **fields)
    train(TrainConfig(out=str(tmp_path / "ext"), episodes=10, **fields))
    train(TrainConfig(out=str(tmp_path / "ext"), episodes=15, **fields), resume=True)
    _assert_same(read_metrics(tmp_path / "ext" / "metrics.csv"), straight)
    with pytest.raises(ConfigError, match="'seeds'"):
        train(
            TrainConfig(
                out=str(tmp_path / "ext"), env="cartpole", agent="random", seeds=3, episodes=20
            ),
            resume=True,
        )


def test_refuses_non_empty_run_dir_unless_overwrite(tmp_path):
    _train(tmp_path, "run", episodes=2)
    with pytest.raises(ConfigError, match="not empty"):
        _train(tmp_path, "run", episodes=2)
    config = TrainConfig(out=str(tmp_path / "run"), env="cartpole", agent="random", episodes=3)
    assert train(config, overwrite=True).episodes_done == 3
    assert read_metrics(tmp_path / "run" / "metrics.csv")["episode"].max() == 3


def test_progress_callback_sees_every_episode(tmp_path):
    logs = []
    config = TrainConfig(
        out=str(tmp_path / "run"), env="cartpole", agent="random", seeds=2, episodes=4, eval_every=2
    )
    train(config, progress=logs.append)
    assert [log.episode for log in logs] == [1, 2, 3, 4]
    assert np.isnan(logs[0].greedy_returns).all() and not np.isnan(logs[1].greedy_returns).any()


class _NanEnv(gymnasium.Env):
    observation_space = gymnasium.spaces.Discrete(3)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return 0, {}

    def step(self, action):
        self.t += 1
        return self.t % 3, float("nan") if self.t == 2 else 1.0, False, self.t >= 5, {}


def test_nan_reward_raises_naming_env_and_replica(tmp_path):
    gymnasium.register("tests/NanEnv-v0", entry_point=_NanEnv)
    problem = Problem(
        "nan",
        "tests/NanEnv-v0",
        {},
        (3,),
        (2,),
        1.0,
        lambda obs: np.asarray(obs, dtype=np.int64).reshape(-1, 1),
        lambda actions: actions[:, 0],
    )
    streams = spawn_replicas([7])
    agent = RandomAgent(problem, RandomConfig(), [s.agent for s in streams])
    runner = Runner(problem, agent, streams, eval_every=0)
    config = TrainConfig(env="nan", agent="random", out=str(tmp_path / "run"), episodes=2)
    with pytest.raises(ValueError, match=r"'tests/NanEnv-v0'.*replica 0 \(seed 7\)"):
        run(runner, config, {})


def test_build_rejects_unknown_env(tmp_path):
    with pytest.raises(ConfigError, match="'env'"):
        build(TrainConfig(env="nope", agent="random", out=str(tmp_path)))


def test_episode_seed_is_a_pure_function():
    assert episode_seed(11, 3) == episode_seed(11, 3)
    assert len({episode_seed(11, e) for e in range(50)}) == 50
    assert episode_seed(11, 3, 0) != episode_seed(11, 3, 1)


def test_random_agent_greedy_is_a_fixed_policy_and_state_roundtrips():
    problem = make_problem("inventory")
    streams = spawn_replicas([0, 1])
    agent = RandomAgent(problem, RandomConfig(), [s.agent for s in streams])
    states = np.array([[0, 1, 2], [1, 4, 0]])
    first = agent.greedy(states)
    assert np.array_equal(first, agent.greedy(states))
    assert np.all((first >= 0) & (first < np.array(problem.action_dims)))
    alone = RandomAgent(problem, RandomConfig(), [spawn_replicas([1])[0].agent])
    assert np.array_equal(alone.greedy(states[1:]), first[1:])
    saved = agent.state_dict()
    drawn = agent.act(states, np.array([True, False]))
    agent.load_state_dict(saved)
    assert np.array_equal(agent.act(states, np.array([True, False])), drawn)
    assert np.array_equal(drawn[1], [0, 0])
    with pytest.raises(ValueError, match="'gamma'"):
        RandomConfig(gamma=1.5)


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_full_disk_between_checkpoints_names_the_file_and_what_is_kept(tmp_path, monkeypatch):
    _, straight = _train(tmp_path, "straight")
    out = tmp_path / "my run (1)"
    config = TrainConfig(
        out=str(out), env="cartpole", agent="random", episodes=12, seeds=3, checkpoint_every=5
    )
    write = MetricsWriter.write

    def full_at_episode_7(self, seed, episode, *values):
        if episode == 7:
            _enospc()
        write(self, seed, episode, *values)

    monkeypatch.setattr(MetricsWriter, "write", full_at_episode_7)
    with pytest.raises(RunWriteError) as error:
        train(config)
    assert str(error.value) == (
        f"Cannot write {out / 'metrics.csv'} (rows of episode 7): the disk is full (No space "
        "left on device). The last good checkpoint, of episode 5, is kept; free space and "
        f"continue with: python -m rl.train --resume '{out}'"
    )
    monkeypatch.setattr(MetricsWriter, "write", write)
    train(config, resume=True)
    _assert_same(read_metrics(out / "metrics.csv"), straight)


def test_failed_first_checkpoint_says_only_overwrite_starts_afresh(tmp_path, monkeypatch):
    out = tmp_path / "my run (1)"
    config = TrainConfig(out=str(out), env="cartpole", agent="random", episodes=4, seeds=2)
    monkeypatch.setattr("rl.runs.training.save_checkpoint", _enospc)
    afresh = f"python -m rl.train --config '{out / 'config.json'}' --overwrite"
    with pytest.raises(RunWriteError) as error:
        train(config)
    assert str(error.value) == (
        f"Cannot write {out / 'checkpoint.npz'} (checkpoint of episode 0): the disk is full (No "
        "space left on device). No checkpoint was written, so the run cannot be resumed; free "
        f"space and start afresh with: {afresh}"
    )
    monkeypatch.undo()
    with pytest.raises(ConfigError) as error:
        train(config, resume=True)
    assert str(error.value) == (
        f"Cannot resume {out}: no checkpoint was written (the run stopped before its first "
        f"one); start afresh with: {afresh}"
    )
    with pytest.raises(ConfigError) as error:
        train(config)
    assert str(error.value) == (
        f"The run directory {str(out)!r} is not empty but holds no checkpoint, so it cannot be "
        "resumed; use --overwrite to start again."
    )
    assert train(config, overwrite=True).episodes_done == 4


# ------------------------------------------------------------- run directories from elsewhere


def _tiny(out, **changes):
    values = {"env": "inventory", "agent": "tabular", "seeds": 2, "episodes": 4}
    return TrainConfig(out=str(out), checkpoint_every=1, **{**values, **changes})


def _files(run_dir):
    files = sorted(run_dir.iterdir())
    return {p.name: p.read_bytes() for p in files if p.is_file() and p.name != ".lock"}


@pytest.mark.parametrize("name", ["metrics.csv", "config.json", "checkpoint.npz"])
def test_resume_refuses_a_linked_run_file_and_leaves_its_target(tmp_path, capsys, name):
    from rl.train import main as train_main

    out = tmp_path / "run"
    train(_tiny(out), stop_after_episode=2)
    target = tmp_path / "elsewhere.csv"
    target.write_bytes((out / name).read_bytes() + b"x" * 28_000)
    content = target.read_bytes()
    (out / name).unlink()
    (out / name).symlink_to(target)
    before = _files(out)
    code = train_main(["--resume", str(out), "--no-plot", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{name}: it is a symbolic link" in err and err.count("\n") == 1, err
    assert target.read_bytes() == content
    assert _files(out) == before


def test_overwrite_refuses_a_linked_figure(tmp_path):
    from rl.runs.rundir import RunDirError

    out = tmp_path / "run"
    train(_tiny(out, episodes=1))
    target = tmp_path / "elsewhere.png"
    target.write_bytes(b"not a figure")
    (out / "learning_curve.png").symlink_to(target)
    with pytest.raises(RunDirError, match="learning_curve.png: it is a symbolic link"):
        train(_tiny(out, episodes=1), overwrite=True)
    assert target.read_bytes() == b"not a figure"


def test_resumed_and_overwritten_runs_remove_stale_temporaries(tmp_path):
    out = tmp_path / "run"
    stale = [".checkpoint.npz.abc.tmp", ".config.json.def.tmp", ".probe.x.tmp"]

    def leave_stale():
        for name in stale:
            (out / name).write_bytes(b"\0" * 1000)

    train(_tiny(out), stop_after_episode=1)
    leave_stale()
    train(_tiny(out), resume=True, stop_after_episode=2)
    assert not [p for p in out.iterdir() if p.suffix == ".tmp"]
    leave_stale()
    train(_tiny(out), overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == [
        ".lock",
        "checkpoint.npz",
        "config.json",
        "metrics.csv",
    ]


def test_resume_never_goes_below_the_episodes_trained(tmp_path):
    out = tmp_path / "run"
    train(_tiny(out, episodes=6), stop_after_episode=3)
    before = _files(out)
    with pytest.raises(ConfigError, match="episodes=2: the run already trained 3 episodes"):
        train(_tiny(out, episodes=2), resume=True)
    assert _files(out) == before
    assert '"episodes": 6' in (out / "config.json").read_text()
    train(_tiny(out, episodes=8), resume=True)  # extending is allowed and recorded
    assert '"episodes": 8' in (out / "config.json").read_text()
    assert load_checkpoint(out / "checkpoint.npz").episode == 8


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_run_files_follow_the_umask(tmp_path, umask):
    out = tmp_path / "run"
    previous = os.umask(umask)
    try:
        train(_tiny(out, episodes=1))
    finally:
        os.umask(previous)
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()}
    assert modes == dict.fromkeys(
        [".lock", "checkpoint.npz", "config.json", "metrics.csv"], 0o666 & ~umask
    )
