"""stable-baselines3's signatures on the learners: evaluate_policy, step budgets, env objects."""

import copy
import re
import threading

import gymnasium as gym
import numpy as np
import pytest

import rl
from rl.loop.runner import episode_seed
from rl.runs.config import ConfigError
from rl.runs.metrics import pivot, read_metrics
from tests.rl.test_learners import CARTPOLE_OPTIONS, _assert_same_run

evaluation = pytest.importorskip("stable_baselines3.common.evaluation")

CAPPED = {**CARTPOLE_OPTIONS, "max_episode_steps": 100}
"""CartPole's grid with episodes cut at 100 steps (short evaluations)."""


class SeededResets(gym.Wrapper):
    """Reset episode k with ``episode_seed(seed, k)``, as `rl.learners.Learner.evaluate` does."""

    def __init__(self, env, seed=0):
        super().__init__(env)
        self.seed, self.episodes = seed, 0

    def reset(self, *, seed=None, options=None):
        reset_seed = episode_seed(self.seed, self.episodes)
        self.episodes += 1
        return self.env.reset(seed=reset_seed, options=options)


def _steps_per_seed(run_dir):
    """Cumulative training steps, shape (seeds, episodes), from a run's metrics.csv."""
    _, lengths = pivot(read_metrics(run_dir / "metrics.csv"), "length")
    return np.cumsum(lengths, axis=1)


@pytest.mark.filterwarnings("ignore:Evaluation environment is not wrapped")
@pytest.mark.parametrize("name", ["TEQL", "TLR", "Tabular", "DQN"])
def test_evaluate_policy_of_stable_baselines3_returns_the_learners_evaluation(name, request):
    if name == "DQN":
        request.getfixturevalue("torch_one_thread")
    options = {"reading": "stable"} if name == "TEQL" else {}
    model = getattr(rl, name)("CartPole-v1", seeds=2, env_options=CAPPED, verbose=0, **options)
    model.learn(total_timesteps=600)
    assert model.num_timesteps >= 600 and (model.steps_done >= 600).all()
    ours = model.evaluate(episodes=4)
    plain = SeededResets(gym.wrappers.TimeLimit(gym.make("CartPole-v1"), 100))
    returns, lengths = evaluation.evaluate_policy(
        model, plain, n_eval_episodes=4, return_episode_rewards=True
    )
    np.testing.assert_array_equal(returns, ours.returns[0])
    recorded = gym.wrappers.RecordEpisodeStatistics(
        gym.wrappers.TimeLimit(SeededResets(gym.make("CartPole-v1")), max_episode_steps=100)
    )
    mean, std = evaluation.evaluate_policy(model, recorded, n_eval_episodes=4)
    assert (mean, std) == (ours.mean[0], ours.std[0])
    np.testing.assert_array_equal(list(recorded.return_queue)[:4], ours.returns[0])


def test_a_step_budget_stops_after_the_first_episode_every_replica_reaches_it(tmp_path):
    model = rl.Tabular("FrozenLake-v1", seeds=3, out=tmp_path / "run", verbose=0)
    model.learn(total_timesteps=250)
    steps = _steps_per_seed(tmp_path / "run")
    assert steps.shape == (3, model.episodes_done)
    assert steps[:, -1].min() >= 250 > steps[:, -2].min()  # the first episode, not a later one
    np.testing.assert_array_equal(model.steps_done, steps[:, -1])
    assert model.num_timesteps == steps[:, -1].min() and model.config.episodes == steps.shape[1]
    before = model.steps_done
    model.learn(total_timesteps=100, reset_num_timesteps=False)
    after = _steps_per_seed(tmp_path / "run")
    assert (after[:, -1] - before).min() >= 100 > (after[:, -2] - before).min()
    assert model.num_timesteps == after[:, -1].min()
    model.learn(total_timesteps=50)  # SB3's default: counted from 0 again
    assert model.num_timesteps == (model.steps_done - after[:, -1]).min() >= 50


def test_learning_steps_twice_is_learning_their_sum_where_episodes_have_one_length(tmp_path):
    options = {"seeds": 2, "checkpoint_every": 3, "env_options": {"state_bins": 4}, "verbose": 0}
    once = rl.Tabular("Pendulum-v1", out=tmp_path / "once", **options)  # 200 steps an episode
    once.learn(total_timesteps=1000)
    twice = rl.Tabular("Pendulum-v1", out=tmp_path / "twice", **options)
    twice.learn(total_timesteps=400).learn(total_timesteps=600)
    assert twice.episodes_done == once.episodes_done == 5
    assert twice.steps_done.tolist() == once.steps_done.tolist() == [1000, 1000]
    _assert_same_run(tmp_path / "once", tmp_path / "twice")
    by_episodes = rl.Tabular("Pendulum-v1", out=tmp_path / "episodes", **options)
    by_episodes.learn(episodes=5)
    _assert_same_run(tmp_path / "once", tmp_path / "episodes")


def test_where_episodes_end_unevenly_two_step_budgets_train_at_least_their_sum(tmp_path):
    options = {"seeds": 2, "verbose": 0}
    once = rl.Tabular("FrozenLake-v1", out=tmp_path / "once", **options).learn(300)
    twice = rl.Tabular("FrozenLake-v1", out=tmp_path / "twice", **options)
    twice.learn(120).learn(180)
    assert twice.episodes_done >= once.episodes_done and (twice.steps_done >= 300).all()
    first, second = (read_metrics(tmp_path / name / "metrics.csv") for name in ("once", "twice"))
    rows = len(first["episode"])  # the shorter run is the start of the longer one
    for column in ("seed", "episode", "return", "length"):
        np.testing.assert_array_equal(first[column], second[column][:rows], err_msg=column)


def test_one_budget_exactly():
    model = rl.Tabular("FrozenLake-v1", verbose=0)
    for call in (lambda: model.learn(), lambda: model.learn(10, episodes=2)):
        with pytest.raises(ValueError, match="^learn\\(\\) takes one budget: total_timesteps"):
            call()
    with pytest.raises(ValueError, match="'total_timesteps' parameter must be an int >= 1"):
        model.learn(0)
    assert model.episodes_done == 0 and model.num_timesteps == 0


def test_predict_returns_stable_baselines3s_pair_and_samples_without_changing_training(tmp_path):
    sampled = rl.Tabular("FrozenLake-v1", seeds=2, out=tmp_path / "sampled", verbose=0)
    sampled.learn(episodes=10)
    observations = np.arange(16)
    action, state = sampled.predict(3, state=None, episode_start=np.ones(1, bool))
    assert state is None and action == sampled.predict(observations)[0][3]
    draws = [sampled.predict(observations, deterministic=False, replica=1)[0] for _ in range(5)]
    again = rl.Tabular.load(sampled.save(tmp_path / "copy"))
    repeated = [again.predict(observations, deterministic=False, replica=1)[0] for _ in range(5)]
    np.testing.assert_array_equal(draws, repeated)  # seeded: the same draws from the same model
    greedy = sampled.predict(observations, replica=1)[0]
    assert all(((0 <= d) & (d < 4)).all() for d in draws)
    assert any((d != greedy).any() for d in draws)  # epsilon-greedy explores
    sampled.learn(episodes=10)
    straight = rl.Tabular("FrozenLake-v1", seeds=2, out=tmp_path / "straight", verbose=0)
    straight.learn(episodes=20)
    _assert_same_run(tmp_path / "sampled", tmp_path / "straight")


def test_an_environment_instance_or_factory_trains_as_its_id(tmp_path):
    by_id = rl.Tabular("FrozenLake-v1", seeds=2, out=tmp_path / "id", verbose=0).learn(episodes=8)
    instance = gym.make("FrozenLake-v1")
    by_instance = rl.Tabular(instance, seeds=2, out=tmp_path / "instance", verbose=0)
    by_factory = rl.Tabular(
        lambda: gym.make("FrozenLake-v1"), seeds=2, out=tmp_path / "factory", verbose=0
    )
    for model in (by_instance, by_factory):
        model.learn(episodes=8)
        assert re.fullmatch(r"learner\d+/FrozenLake-v1", model.config.env)
        for column in ("seed", "episode", "return", "length", "greedy_return"):
            ours = read_metrics(model.run_dir / "metrics.csv")[column]
            np.testing.assert_array_equal(ours, read_metrics(by_id.run_dir / "metrics.csv")[column])
        env = model.get_env()
        assert isinstance(env, gym.Env) and env is not instance
        assert env.spec.max_episode_steps == 100
    np.testing.assert_array_equal(by_instance.evaluate(3).returns, by_id.evaluate(3).returns)


def test_an_instance_that_cannot_be_copied_asks_for_a_factory_or_an_id():
    env = gym.make("FrozenLake-v1")
    env.unwrapped.lock = threading.Lock()  # deepcopy refuses a lock
    with pytest.raises(TypeError):
        copy.deepcopy(env)
    with pytest.raises(ConfigError, match=r"cannot be copied for the replicas .*lambda: env"):
        rl.Tabular(env, verbose=0)
    one = rl.Tabular(lambda: env, verbose=0).learn(episodes=2)  # one replica may share it
    assert one.episodes_done == 2
    with pytest.raises(ConfigError, match="returned the same environment twice, but 2 replicas"):
        rl.Tabular(lambda: env, seeds=2, verbose=0)
    for bad, message in ((lambda: 3, "must return a gymnasium.Env"), (3, "must be a problem")):
        with pytest.raises(ConfigError, match=message):
            rl.Tabular(bad, verbose=0)
