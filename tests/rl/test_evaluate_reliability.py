"""rl.evaluate under odd environments: rewards that are not finite numbers, NumPy arguments."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import rl
from rl.evaluate import evaluate, main
from rl.problems import EnvFailure
from tests.rl import toy_envs

TOY = "tests.rl.toy_envs:Toy-v0"


class NanToy(toy_envs.Toy):
    """`toy_envs.Toy` whose rewards are NaN after a reset with evaluation episode 3's seed."""

    def reset(self, *, seed=None, options=None):
        from rl.loop.runner import episode_seed

        self.broken = seed == episode_seed(0, 3)
        return super().reset(seed=seed, options=options)

    def step(self, action):
        observation, reward, *rest = super().step(action)
        return (observation, np.nan if self.broken else reward, *rest)


NAN_TOY = "RelEvalNanToy-v0"
gym.register(NAN_TOY, entry_point=NanToy, max_episode_steps=20)


def _saved(tmp_path):
    model = rl.Tabular(TOY, seeds=2, checkpoint_every=2, verbose=0).learn(episodes=4)
    return model.save(tmp_path / "run")


class _RewardAt(gym.Wrapper):
    """Return ``reward`` at the first step of episode ``episode`` (counted from 0)."""

    def __init__(self, env, episode, reward):
        super().__init__(env)
        self.episode, self.reward, self.resets = episode, reward, -1

    def reset(self, **kwargs):
        self.resets += 1
        return self.env.reset(**kwargs)

    def step(self, action):
        observation, reward, *rest = self.env.step(action)
        return (observation, self.reward if self.resets == self.episode else reward, *rest)


def _run_with_rewards(tmp_path, episode, reward):
    run = rl.load_run(_saved(tmp_path), env=TOY)
    problem = run.problem
    factory = lambda: _RewardAt(problem.make_env(), episode, reward)  # noqa: E731
    run.problem = dataclasses.replace(problem, env_factory=factory)
    return run


@pytest.mark.parametrize("reward", [np.nan, np.inf, -np.inf, "1.0"])
def test_evaluate_refuses_a_non_finite_reward(tmp_path, reward):
    run = _run_with_rewards(tmp_path, 3, reward)
    with pytest.raises(
        EnvFailure,
        match=r"evaluation episode 3 .*that is not a finite number \(3 episodes completed",
    ):
        evaluate(run, episodes=5)


def test_the_evaluate_command_says_how_many_episodes_it_played_before_a_nan(tmp_path, capsys):
    out = tmp_path / "nan"
    rl.Tabular(NAN_TOY, seeds=1, out=out, verbose=0).learn(episodes=3)
    assert main([str(out), "--episodes", "5", "--env", NAN_TOY]) == 1
    printed = capsys.readouterr()
    assert "greedy episodes" not in printed.out
    assert "evaluation episode 3" in printed.err and "3 episodes completed" in printed.err


def test_evaluate_takes_numpy_integers(tmp_path):
    run = rl.load_run(_saved(tmp_path), env=TOY)
    returns = evaluate(run, episodes=np.int64(2), seed=np.int64(1)).returns
    np.testing.assert_array_equal(returns, evaluate(run, episodes=2, seed=1).returns)
