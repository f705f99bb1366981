"""Learner objects (rl.learners): the stable-baselines3 calls, bitwise equal to the CLI runs."""

import json

import gymnasium as gym
import numpy as np
import pytest

import rl
from rl import evaluate as evaluate_cli
from rl import train as train_cli
from rl.callbacks import Callback
from rl.runs.checkpoint import load_checkpoint
from rl.runs.config import ConfigError, TrainConfig
from rl.runs.load import RunLoadError
from rl.runs.metrics import COLUMNS, read_metrics
from rl.runs.training import train

CARTPOLE_OPTIONS = {"state_bins": 6, "low": [-2.4, -3, -0.21, -3], "high": [2.4, 3, 0.21, 3]}
EXCEPT_WALL = [c for c in COLUMNS if c != "wall_time"]


def _leaves(tree, path=()):
    """Yield (path, array) of every array (or number) in a nested state dict."""
    if isinstance(tree, dict):
        for key in sorted(tree):
            yield from _leaves(tree[key], (*path, key))
    elif isinstance(tree, (list, tuple)):
        for i, item in enumerate(tree):
            yield from _leaves(item, (*path, i))
    else:
        yield path, tree


def _assert_same_run(a, b):
    """Metrics (but wall time), checkpoint arrays and config (but out) of two run dirs agree."""
    first, second = read_metrics(a / "metrics.csv"), read_metrics(b / "metrics.csv")
    for column in EXCEPT_WALL:
        np.testing.assert_array_equal(first[column], second[column], err_msg=column)
    ours, theirs = load_checkpoint(a / "checkpoint.npz"), load_checkpoint(b / "checkpoint.npz")
    assert ours.episode == theirs.episode
    left, right = list(_leaves(ours.agent_state)), list(_leaves(theirs.agent_state))
    assert [p for p, _ in left] == [p for p, _ in right] and left
    for (path, x), (_, y) in zip(left, right, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=str(path))
    configs = [json.loads((d / "config.json").read_text()) for d in (a, b)]
    for config in configs:
        config.pop("out")
    assert configs[0] == configs[1]


def test_the_stable_baselines3_lines_run_and_a_loaded_model_acts_as_the_saved_one(tmp_path, capsys):
    model = rl.TEQL("CartPole-v1", reading="stable", seeds=4, env_options=CARTPOLE_OPTIONS)
    assert "R_max = 2 for 'CartPole-v1', estimated as 2 x" in capsys.readouterr().err
    model.learn(episodes=30, progress_bar=True)
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    action, state = model.predict(obs, replica=0, deterministic=True)
    assert state is None
    assert env.action_space.contains(action)
    evaluation = model.evaluate(episodes=3)
    assert evaluation.returns.shape == (4, 3) and evaluation.mean.shape == (4,)
    np.testing.assert_array_equal(evaluation.std, evaluation.returns.std(axis=1))
    model.save(tmp_path / "cp")
    loaded = rl.TEQL.load(tmp_path / "cp")
    assert loaded.episodes_done == 30 and loaded.replicas == 4
    observations = np.stack([env.reset(seed=k)[0] for k in range(20)])
    for replica in range(4):
        batch, _ = model.predict(observations, replica=replica)
        assert batch.shape == (20,)
        np.testing.assert_array_equal(loaded.predict(observations, replica=replica)[0], batch)
        assert [model.predict(o, replica=replica)[0] for o in observations] == batch.tolist()
    np.testing.assert_array_equal(loaded.evaluate(episodes=3).returns, evaluation.returns)
    weights, factors = loaded.q_tensor(replica=1)
    assert [f.shape for f in factors] == [(6, 10)] * 4 + [(2, 10)]
    assert evaluate_cli.main([str(tmp_path / "cp"), "--episodes", "2"]) == 0


def test_a_learner_run_is_bitwise_the_command_line_run(tmp_path, capsys):
    settings = {"seeds": 2, "seed": 3, "checkpoint_every": 5, "eval_every": 4}
    model = rl.Tabular(
        "CartPole-v1", env_options=CARTPOLE_OPTIONS, out=tmp_path / "learner", **settings
    )
    model.learn(episodes=12)
    config = TrainConfig(
        env="CartPole-v1", agent="tabular", out=str(tmp_path / "function"), episodes=12,
        env_options=CARTPOLE_OPTIONS, **settings,
    )  # fmt: skip
    train(config)
    argv = ["--env", "CartPole-v1", "--agent", "tabular", "--episodes", "12", "--seeds", "2"]
    argv += ["--seed", "3", "--checkpoint-every", "5", "--eval-every", "4"]
    argv += ["--env-option", "state_bins=6", "--env-option", "low=[-2.4, -3, -0.21, -3]"]
    argv += ["--env-option", "high=[2.4, 3, 0.21, 3]", "--no-plot", "--no-progress"]
    assert train_cli.main([*argv, "--out", str(tmp_path / "cli")]) == 0
    _assert_same_run(tmp_path / "learner", tmp_path / "function")
    _assert_same_run(tmp_path / "learner", tmp_path / "cli")
    assert model.config.episodes == 12 and model.run_dir == tmp_path / "learner"


def test_learning_twice_is_learning_once_for_the_sum(tmp_path):
    options = {"seeds": 2, "checkpoint_every": 4, "env_options": CARTPOLE_OPTIONS}
    once = rl.TEQL("CartPole-v1", reading="stable", out=tmp_path / "once", **options)
    once.learn(episodes=10)
    twice = rl.TEQL("CartPole-v1", reading="stable", out=tmp_path / "twice", **options)
    twice.learn(episodes=3).learn(episodes=7)
    assert twice.episodes_done == 10
    _assert_same_run(tmp_path / "once", tmp_path / "twice")


class _Recorder(Callback):
    def __init__(self, stop_at):
        self.stop_at, self.calls = stop_at, []

    def on_training_start(self, learner):
        self.calls.append("start")

    def on_episode_end(self, learner, log):
        self.calls.append(log.episode)
        return np.int64(log.episode) < self.stop_at  # a numpy bool stops as False does

    def on_training_end(self, learner):
        self.calls.append("end")


def test_a_callback_stops_training_and_learn_continues_from_there(tmp_path):
    options = {"seeds": 2, "checkpoint_every": 50}
    recorder = _Recorder(stop_at=3)
    seen = []
    stopped = rl.Tabular("FrozenLake-v1", out=tmp_path / "stopped", **options)
    stopped.learn(episodes=20, callback=[recorder, lambda learner, log: seen.append(log.episode)])
    done = stopped.episodes_done
    assert 3 <= done < 20 and recorder.calls == ["start", 1, 2, 3, "end"] and seen == [1, 2, 3]
    stopped.learn(episodes=20 - done)
    straight = rl.Tabular("FrozenLake-v1", out=tmp_path / "straight", **options)
    straight.learn(episodes=20)
    _assert_same_run(tmp_path / "stopped", tmp_path / "straight")


def test_tuple_observations_one_or_a_batch_and_refusals(tmp_path):
    model = rl.Tabular("Blackjack-v1", seeds=2).learn(episodes=5)
    one, _ = model.predict((14, 3, 0), replica=1)
    assert one in (0, 1)
    batch, _ = model.predict([(14, 3, 0), (20, 10, 1)], replica=1)
    assert len(batch) == 2 and batch[0] == one
    drawn, _ = model.predict([(14, 3, 0), (20, 10, 1)], deterministic=False)
    assert len(drawn) == 2 and set(drawn.tolist()) <= {0, 1}
    for deterministic in (True, False):
        with pytest.raises(ValueError, match="'replica'"):
            model.predict((14, 3, 0), replica=2, deterministic=deterministic)
    cartpole = rl.Tabular("CartPole-v1", env_options=CARTPOLE_OPTIONS)
    with pytest.raises(ValueError, match=r"has shape \(3,\).*\(4,\) \(one\)"):
        cartpole.predict(np.zeros(3))
    with pytest.raises(ValueError, match="call learn"):
        cartpole.save(tmp_path / "nothing")
    with pytest.raises(TypeError, match="no CP Q-tensor"):
        cartpole.q_tensor()
    model.save(tmp_path / "bj")
    with pytest.raises(RunLoadError, match="holds a 'tabular' run, not 'teql'; .*rl.Tabular.load"):
        rl.TEQL.load(tmp_path / "bj")
    with pytest.raises(TypeError, match="'callback'"):
        model.learn(episodes=1, callback=3)


@pytest.mark.parametrize(
    ("name", "env"),
    [
        ("LoRaVI", "cartpole"),
        ("TLR", "FrozenLake-v1"),
        ("DQN", "FrozenLake-v1"),
        ("SAC", "FrozenLake-v1"),
    ],
)
def test_every_learner_learns_saves_and_loads(tmp_path, name, env):
    if name in ("DQN", "SAC"):
        pytest.importorskip("torch")
    cls = getattr(rl, name)
    model = cls(env, seeds=2, verbose=0).learn(episodes=2)
    observation, _ = model.problem.make_env().reset(seed=0)
    loaded = cls.load(model.save(tmp_path / name))
    assert loaded.episodes_done == 2 and loaded.config.agent == cls.agent
    for replica in range(2):
        np.testing.assert_array_equal(
            loaded.predict(observation, replica=replica)[0],
            model.predict(observation, replica=replica)[0],
        )


def test_a_run_directory_in_use_is_refused_and_overwrite_starts_afresh(tmp_path):
    out = tmp_path / "run"
    first = rl.Tabular("FrozenLake-v1", seeds=2, out=out).learn(episodes=4)
    first.save(tmp_path / "copy")
    again = rl.Tabular("FrozenLake-v1", seeds=2, out=out)
    with pytest.raises(ConfigError, match="is not empty"):
        again.learn(episodes=2)
    assert again.episodes_done == 0 and first.episodes_done == 4
    fresh = rl.Tabular("FrozenLake-v1", seeds=2, out=out, overwrite=True).learn(episodes=4)
    assert fresh.episodes_done == 4
    _assert_same_run(tmp_path / "copy", out)  # the same settings: the same run again
