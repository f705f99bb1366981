"""Learner objects (rl.learners) under odd use: links, foreign directories, forks, callbacks."""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import rl
from rl.callbacks import Callback
from rl.problems import EnvFailure
from rl.runs.checkpoint import load_checkpoint
from rl.runs.config import ConfigError
from rl.runs.load import RunLoadError
from rl.runs.metrics import read_metrics
from rl.runs.rundir import RunDirError, RunLock
from tests.rl import toy_envs

TOY = "tests.rl.toy_envs:Toy-v0"
SECRET = b"secret: never copied\n"


class TupleToy(toy_envs.ToyObserved):
    """`toy_envs.Toy` observed as ``(Box(0, 3, (1,)) x, Discrete(4) y)``."""

    observation_space = spaces.Tuple((spaces.Box(0.0, 3.0, (1,), np.float32), spaces.Discrete(4)))

    def _observe(self, state):
        return np.array([state[0]], dtype=np.float32), int(state[1])


class ObjectToy(toy_envs.ToyBox):
    """`toy_envs.ToyBox` that returns its observations as arrays of dtype object."""

    def reset(self, *, seed=None, options=None):
        observation, info = super().reset(seed=seed, options=options)
        return np.array([np.nan, *observation[1:]], dtype=object), info

    def step(self, action):
        observation, *rest = super().step(action)
        return (np.array(observation.tolist(), dtype=object), *rest)


class StrayToy(toy_envs.Toy):
    """`toy_envs.Toy` whose observations after a step are ``(x, y) + offset``."""

    offset = np.array([5.0, 0.0])

    def step(self, action):
        observation, *rest = super().step(action)
        return (observation + self.offset, *rest)


gym.register("RelStrayToy-v0", entry_point=StrayToy, max_episode_steps=20)
TUPLE_TOY, OBJECT_TOY = "RelTupleToy-v0", "RelObjectToy-v0"
gym.register(TUPLE_TOY, entry_point=TupleToy, max_episode_steps=20)
gym.register(OBJECT_TOY, entry_point=ObjectToy, max_episode_steps=20)


def _learner(out=None, episodes=4, **options):
    model = rl.Tabular(TOY, seeds=2, checkpoint_every=2, out=out, verbose=0, **options)
    return model.learn(episodes=episodes) if episodes else model


def _saved(tmp_path, name="run", episodes=4):
    return _learner(episodes=episodes).save(tmp_path / name)


def _secret(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_bytes(SECRET)
    return secret


def _tree_bytes(directory):
    return b"".join(p.read_bytes() for p in directory.rglob("*") if p.is_file())


# ----------------------------------------------------------------------------- links and files


def test_load_refuses_a_linked_run_file_and_never_copies_its_target(tmp_path):
    run_dir = _saved(tmp_path)
    secret = _secret(tmp_path)
    (run_dir / "metrics.csv").unlink()
    (run_dir / "metrics.csv").symlink_to(secret)
    with pytest.raises(RunLoadError, match="symbolic link"):
        rl.Tabular.load(run_dir, env=TOY)
    assert secret.read_bytes() == SECRET


def test_a_linked_figure_is_neither_copied_by_load_nor_written_by_save(tmp_path):
    run_dir = _saved(tmp_path)
    secret = _secret(tmp_path)
    (run_dir / "learning_curve.png").symlink_to(secret)
    loaded = rl.Tabular.load(run_dir, env=TOY)
    assert SECRET not in _tree_bytes(loaded.run_dir)
    target = loaded.save(tmp_path / "again")
    assert not (target / "learning_curve.png").exists()
    assert SECRET not in _tree_bytes(target)
    assert secret.read_bytes() == SECRET


def test_save_refuses_a_directory_that_holds_files_but_no_run(tmp_path):
    model = _learner()
    project = tmp_path / "project"
    project.mkdir()
    (project / "config.json").write_text('{"mine": 1}\n')
    with pytest.raises(RunDirError, match="holds files but no run"):
        model.save(project)
    assert (project / "config.json").read_text() == '{"mine": 1}\n'
    assert sorted(p.name for p in project.iterdir()) == ["config.json"]
    with pytest.raises(ValueError, match="empty"):
        model.save("")


def test_save_into_an_existing_run_drops_its_old_figure_and_names_the_target_in_config(tmp_path):
    target = _saved(tmp_path, "target")
    (target / "learning_curve.png").write_bytes(b"an old figure")
    model = _learner(episodes=2)
    model.save(target)
    assert not (target / "learning_curve.png").exists()
    config = json.loads((target / "config.json").read_text())
    assert config["out"] == str(target)
    assert config["episodes"] == 2


def test_a_forked_child_leaves_the_parents_temporary_run_directory_alone(tmp_path):
    script = (
        "import gc, os, sys, rl\n"
        f"model = rl.Tabular({TOY!r}, seeds=1, verbose=0).learn(episodes=2)\n"
        "run_dir = model.run_dir\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    del model\n"
        "    gc.collect()\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print(run_dir.is_dir(), model.learn(episodes=1).episodes_done)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "3"]


def test_load_of_a_run_being_trained_is_refused(tmp_path):
    run_dir = _saved(tmp_path)
    with RunLock.acquire(run_dir), pytest.raises(RunLoadError, match="in use by process"):
        rl.Tabular.load(run_dir, env=TOY)
    assert rl.Tabular.load(run_dir, env=TOY).episodes_done == 4


# ----------------------------------------------------------------------------- silent wrong results


class _Record(Callback):
    def __init__(self, at):
        self.at, self.seen = at, None

    def on_episode_end(self, learner, log):
        if log.episode == self.at:
            state = learner.policy.state_dict()
            self.seen = (
                learner.episodes_done,
                learner.config.episodes,
                np.array(state["q_table"], copy=True),
                learner.evaluate(episodes=2).returns,
                learner.predict(np.array([[0, 0], [3, 2]]), replica=1)[0],
            )


def test_a_callback_sees_the_model_being_trained(tmp_path):
    record = _Record(at=3)
    model = rl.Tabular(TOY, seeds=2, checkpoint_every=1, verbose=0)
    model.learn(episodes=6, callback=record)
    straight = rl.Tabular(TOY, seeds=2, checkpoint_every=1, verbose=0).learn(episodes=3)
    done, episodes, q, returns, actions = record.seen
    assert (done, episodes) == (3, 3)
    np.testing.assert_array_equal(q, straight.policy.state_dict()["q_table"])
    np.testing.assert_array_equal(returns, straight.evaluate(episodes=2).returns)
    np.testing.assert_array_equal(
        actions, straight.predict(np.array([[0, 0], [3, 2]]), replica=1)[0]
    )
    alone = rl.Tabular(TOY, seeds=2, checkpoint_every=1, verbose=0).learn(episodes=6)
    np.testing.assert_array_equal(
        model.policy.state_dict()["q_table"], alone.policy.state_dict()["q_table"]
    )


class _FailAt(Callback):
    def __init__(self, at):
        self.at = at

    def on_episode_end(self, learner, log):
        if log.episode == self.at:
            raise RuntimeError("callback failure")


def test_after_a_failed_learn_the_run_files_agree_with_the_model(tmp_path):
    model = rl.Tabular(TOY, seeds=2, checkpoint_every=5, verbose=0)
    with pytest.raises(RuntimeError, match="callback failure"):
        model.learn(episodes=10, callback=_FailAt(7))
    assert model.episodes_done == 5
    target = model.save(tmp_path / "saved")
    metrics = read_metrics(target / "metrics.csv")
    assert len(metrics["episode"]) == 2 * 5 and int(metrics["episode"].max()) == 5
    assert load_checkpoint(target / "checkpoint.npz").episode == 5
    assert json.loads((target / "config.json").read_text())["episodes"] == 5
    assert model.config.episodes == 5
    assert model.learn(episodes=5).episodes_done == 10


def test_predict_refuses_observations_outside_a_discrete_space(tmp_path):
    model = _learner(episodes=2)
    np.testing.assert_array_equal(model.predict([3, 2])[0], model.predict(np.array([3, 2]))[0])
    for wrong, reason in (
        ([np.nan, 0], "not finite"),
        ([7, 0], "outside"),
        ([-1, 0], "outside"),
        ([2.6, 0], "not an integer"),
    ):
        with pytest.raises(ValueError, match=reason):
            model.predict(wrong)
    with pytest.raises(ValueError, match="not finite"):
        model.predict(np.array([[0, 0], [np.inf, 1]]))


# ----------------------------------------------------------------------------- odd inputs


def test_numpy_arrays_and_integers_are_accepted_as_python_values(tmp_path):
    low, high = np.array([-2.4, -3, -0.21, -3]), np.array([2.4, 3, 0.21, 3])
    options = {"state_bins": np.int64(3), "low": low, "high": high}
    model = rl.Tabular("CartPole-v1", seeds=np.int64(2), seed=np.int64(1), env_options=options,
                       verbose=0)  # fmt: skip
    assert model.config.env_options["low"] == low.tolist()
    assert model.learn(episodes=np.int64(2)).episodes_done == 2
    assert model.replicas == 2 and model.config.seed == 1


def test_copying_or_pickling_a_learner_says_what_to_use(tmp_path):
    model = _learner(episodes=2)
    for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match=r"save\(path\).*load\(path\)"):
            attempt(model)


def test_predict_on_a_tuple_space_with_a_box_first(tmp_path):
    model = rl.Tabular(TUPLE_TOY, seeds=1, verbose=0, env_options={"state_bins": 4}).learn(
        episodes=2
    )
    one = (np.array([1.2], dtype=np.float32), 2)
    action, _ = model.predict(one)
    assert model.problem.make_env().action_space.contains(action)
    batch, _ = model.predict([one, (np.array([0.1], dtype=np.float32), 3)])
    assert len(batch) == 2
    np.testing.assert_array_equal(batch[0], action)


def test_api_errors_speak_the_api_and_name_the_loaded_directory(tmp_path):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError) as refused:
        rl.Tabular(TOY, out=busy, verbose=0).learn(episodes=2)
    assert "--" not in str(refused.value) and "overwrite=True" in str(refused.value)
    run_dir = _saved(tmp_path)
    with open(run_dir / "metrics.csv", "r+b") as metrics:
        metrics.truncate(40)
    with pytest.raises(RunLoadError) as damaged:
        rl.Tabular.load(run_dir, env=TOY)
    assert str(run_dir) in str(damaged.value) and "--" not in str(damaged.value)


def test_callbacks_and_learners_are_listed_by_the_package():
    script = "import rl; print(rl.callbacks.Callback.__name__, 'TEQL' in dir(rl))"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        timeout=120,
    )
    assert done.stdout.split() == ["Callback", "True"], done.stderr


def test_an_agent_default_that_does_not_fit_the_problem_is_named_as_a_default():
    options = {"state_bins": 3, "low": [-2.4, -3, -0.21, -3], "high": [2.4, 3, 0.21, 3]}
    with pytest.raises(ConfigError, match=r"default.*agent_params=\{'anchors': 2\}"):
        rl.LoRaVI("CartPole-v1", env_options=options, verbose=0)


@pytest.mark.filterwarnings("ignore:.*obs returned by the `reset\\(\\)` method:UserWarning")
def test_an_object_dtype_observation_is_told_what_is_wrong():
    with pytest.raises((ValueError, EnvFailure)) as refused:
        rl.Tabular(OBJECT_TOY, verbose=0)
    assert "dtype object" in str(refused.value) and "'low'" not in str(refused.value)


# ----------------------------------------------------------------------------- a second pass


def test_save_or_learn_from_a_callback_is_refused_with_what_to_do(tmp_path):
    def save_now(learner, log):
        learner.save(tmp_path / "mid")

    model = _learner(episodes=2)

    def learn_now(learner, log):
        learner.learn(episodes=1)

    model = _learner(episodes=2)
    for inside in (save_now, learn_now):
        with pytest.raises(RunDirError, match=r"\(\) cannot run while learn\(\) is training"):
            model.learn(episodes=2, callback=inside)
    assert not (tmp_path / "mid").exists()
    assert model.episodes_done == 2 and model.learn(episodes=2).episodes_done == 4
    fresh = rl.Tabular(TOY, seeds=1, checkpoint_every=1, verbose=0)
    with pytest.raises(RunDirError):
        fresh.learn(episodes=3, callback=save_now)
    assert fresh.episodes_done == 0 and fresh.learn(episodes=1).episodes_done == 1


def test_load_never_writes_through_a_linked_lock_file(tmp_path):
    run_dir = _saved(tmp_path)
    secret = _secret(tmp_path)
    (run_dir / ".lock").unlink(missing_ok=True)
    (run_dir / ".lock").symlink_to(secret)
    with pytest.raises(RunLoadError, match="symbolic link"):
        rl.Tabular.load(run_dir, env=TOY)
    assert secret.read_bytes() == SECRET


def test_an_empty_out_is_refused():
    with pytest.raises(ValueError, match="'out' parameter is empty"):
        rl.Tabular(TOY, out="", verbose=0)


def test_loading_a_file_says_it_is_not_a_directory(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunLoadError, match=r"not a run directory \(it is not a directory\)"):
        rl.Tabular.load(tmp_path / "file")


def test_a_callback_class_instead_of_an_instance_is_refused():
    model = _learner(episodes=0)
    with pytest.raises(TypeError, match=r"pass an instance of it \(Callback\(\)\)"):
        model.learn(episodes=2, callback=Callback)


def test_the_base_class_loads_the_learner_of_the_runs_agent(tmp_path):
    loaded = rl.learners.Learner.load(_saved(tmp_path), env=TOY)
    assert type(loaded) is rl.Tabular and loaded.episodes_done == 4


def test_save_inside_the_temporary_run_directory_is_refused():
    model = _learner(episodes=2)
    for inside in (model.run_dir, model.run_dir / "kept"):
        with pytest.raises(ValueError, match="removed with the learner"):
            model.save(inside)
    assert not (model.run_dir / "kept").exists()


def test_a_ragged_batch_is_refused_in_one_line():
    model = _learner(episodes=2)
    with pytest.raises(ValueError, match="not an array of one shape"):
        model.predict([[1, 2], [3]])


def test_greedy_states_refuses_state_indices_outside_the_modes(tmp_path):
    run = rl.TEQL(TOY, seeds=1, verbose=0).learn(episodes=2).save(tmp_path / "teql")
    loaded = rl.load_run(run, env=TOY)
    assert loaded.greedy_states(np.array([[3, 3]])).shape == (1, 2)
    for wrong in ([[4, 0]], [[-1, 0]], [[0, 2**40]]):
        with pytest.raises(ValueError, match="outside the state modes"):
            loaded.greedy_states(np.array(wrong))


def test_a_huge_sparse_figure_is_not_copied_by_load(tmp_path):
    run_dir = _saved(tmp_path)
    with open(run_dir / "learning_curve.png", "wb") as figure:
        figure.truncate(3 << 30)  # sparse: no disk used
    loaded = rl.Tabular.load(run_dir, env=TOY)
    assert not (loaded.run_dir / "learning_curve.png").exists()


@pytest.mark.filterwarnings("ignore:.*obs returned by the `step\\(\\)` method:UserWarning")
def test_training_on_observations_outside_a_discrete_space_warns():
    model = rl.Tabular("RelStrayToy-v0", seeds=1, verbose=0)
    with pytest.warns(RuntimeWarning, match="outside the space MultiDiscrete"):
        model.learn(episodes=2)
    assert model.episodes_done == 2


def test_predict_on_a_bundled_discrete_problem_refuses_values_outside_its_modes():
    model = rl.Tabular("inventory", seeds=1, verbose=0).learn(episodes=1)
    dims = model.problem.state_dims
    inside = np.zeros(len(dims), dtype=np.int64)
    assert model.problem.make_env().action_space.contains(model.predict(inside)[0])
    for component, wrong in ((0, dims[0]), (0, -1), (len(dims) - 1, 0.5)):
        observation = inside.astype(np.float64)
        observation[component] = wrong
        with pytest.raises(ValueError, match="outside the space"):
            model.predict(observation)
