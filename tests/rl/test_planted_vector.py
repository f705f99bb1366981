"""Tests of rl/envs/planted_vector.py: B copies equal single environments, bit for bit."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import rl  # noqa: F401  (registers the environments)
from rl.envs.planted_vector import PlantedRankVector, latent_cdf_table

ENV_ID = "rl/PlantedRankMDP-v0"
KINDS = (
    {"rank": 5, "state_modes": 4, "mode_size": 3},
    {"kind": "sparse", "rank": 2, "sparse_entries": 4, "state_modes": 3, "transition_rank": 9},
    {"kind": "full", "state_modes": 2, "mode_size": 5, "action_dims": (2, 3, 2)},
)


def test_make_vec_gives_the_vector_version():
    vector = gym.make_vec(ENV_ID, num_envs=3, vectorization_mode="vector_entry_point")
    assert isinstance(vector, PlantedRankVector)
    assert vector.max_episode_steps == 100


@pytest.mark.parametrize("kwargs", KINDS)
def test_latent_table_is_the_single_step_cdf(kwargs):
    env = gym.make(ENV_ID, **kwargs).unwrapped
    table = latent_cdf_table(env)
    rng = np.random.default_rng(1)
    for _ in range(20):
        state = rng.integers(0, env.state_dims)
        action = rng.integers(0, env.action_dims)
        weights = env.mixing_weights(state, action)
        expected = np.cumsum(np.concatenate([[1.0 - weights.sum()], weights]))
        joint = np.ravel_multi_index((*state, *action), env.state_dims + env.action_dims)
        np.testing.assert_array_equal(table[joint], expected)


@pytest.mark.parametrize("kwargs", KINDS)
def test_copies_replay_single_environments_bitwise(kwargs):
    copies, seeds = 4, [7, 8, 9, 7]
    vector = gym.make_vec(
        ENV_ID,
        num_envs=copies,
        vectorization_mode="vector_entry_point",
        autoreset_mode=AutoresetMode.DISABLED,
        max_episode_steps=30,
        **kwargs,
    )
    singles = [gym.make(ENV_ID, max_episode_steps=30, **kwargs) for _ in range(copies)]
    observations, _ = vector.reset(seed=seeds)
    expected = np.stack([env.reset(seed=s)[0] for env, s in zip(singles, seeds, strict=True)])
    np.testing.assert_array_equal(observations, expected)
    ended = np.zeros(copies, dtype=bool)
    rng = np.random.default_rng(0)
    dims = singles[0].unwrapped.action_dims
    for step in range(90):
        actions = rng.integers(0, dims, size=(copies, len(dims)))
        active = rng.random(copies) < 0.8
        if step % 35 == 34:  # reset the copies that ended, unseeded: their streams continue
            vector.reset(options={"reset_mask": ended})
            for i in np.flatnonzero(ended):
                expected[i] = singles[i].reset()[0]
            ended[:] = False
        observations, rewards, terminated, truncated, _ = vector.step(actions, active=active)
        for i in range(copies):
            if active[i] and not ended[i]:
                obs, reward, _, trunc, _ = singles[i].step(actions[i])
                expected[i] = obs
                assert rewards[i] == reward
                assert truncated[i] == trunc
                ended[i] = trunc
            else:
                assert rewards[i] == 0.0
        np.testing.assert_array_equal(observations, expected)
        assert not terminated.any()


def test_next_step_mode_resets_an_ended_copy():
    vector = PlantedRankVector(2, max_episode_steps=2, rank=2, state_modes=2)
    vector.reset(seed=3)
    for _ in range(2):
        *_, truncated, _ = vector.step(np.zeros((2, 2)))
    assert truncated.all()
    _, rewards, _, truncated, _ = vector.step(np.zeros((2, 2)))
    assert not truncated.any() and (rewards == 0.0).all()
    assert (vector.elapsed_steps == 0).all()


def test_bad_action_is_refused_in_one_line():
    vector = PlantedRankVector(2, rank=2, state_modes=2)
    vector.reset(seed=0)
    with pytest.raises(ValueError, match=r"Action \[0 3\] outside \(3, 3\)"):
        vector.step(np.array([[0, 0], [0, 3]]))
