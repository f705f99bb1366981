"""Highway (only when highway-env is installed; kept short, about 13 ms per step)."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

pytest.importorskip("highway_env")

import rl  # noqa: E402, F401


def test_check_env():
    env = gym.make("rl/Highway-v0")
    check_env(env.unwrapped, skip_render_check=True)
    assert env.spec.max_episode_steps == 50
    assert env.observation_space.shape == (9,) and env.action_space.n == 5


def test_paper_scaling_and_seeding():
    env = gym.make("rl/Highway-v0")

    def rollout(seed):
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for action in (3, 1, 0, 2, 4, 1):
            obs, reward, terminated, truncated, _ = env.step(np.int64(action))
            assert -1.0 <= reward <= 0.4 and abs(reward) <= env.unwrapped.reward_bound
            out.append(obs)
            if terminated or truncated:
                break
        return np.stack(out)

    first = rollout(3)
    assert first.dtype == np.float32 and np.all(np.abs(first) <= 1)
    assert np.all(first[:, 0] == 1.0)  # the ego vehicle's absolute x saturates under /100
    assert np.array_equal(first, rollout(3))


def test_informative_normalization_separates_lanes():
    env = gym.make("rl/Highway-v0", normalization="informative")
    lanes = {round(float(env.reset(seed=s)[0][1]), 3) for s in range(6)}
    assert len(lanes) > 1
    with pytest.raises(ValueError, match="normalization"):
        gym.make("rl/Highway-v0", normalization="bogus")
