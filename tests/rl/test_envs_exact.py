"""Inventory and LowRankMDP: exact models, value iteration, policy values, low-rank Q*."""

import math

import gymnasium as gym
import numpy as np
import pytest
import tensorly as tl
from tensorly.decomposition import parafac

import rl  # noqa: F401
from rl.envs import (
    Inventory,
    LowRankMDP,
    bellman_residual,
    greedy_policy,
    policy_value,
    value_iteration,
)
from rl.envs.value_iteration import bellman_optimality

MODELS = [
    pytest.param(lambda: Inventory(), id="inventory"),
    pytest.param(lambda: LowRankMDP(), id="lowrank"),
    pytest.param(
        lambda: Inventory(
            n_locations=3,
            max_level=2,
            n_seasons=3,
            demand_means=(0.2, 1.0, 2.0),
            location_scales=(1, 0.5, 2),
        ),
        id="inventory-3",
    ),
    pytest.param(
        lambda: LowRankMDP(state_dims=(3, 5), action_dims=(4,), rank=3, model_seed=4),
        id="lowrank-small",
    ),
]


@pytest.mark.parametrize("make", MODELS)
def test_model_arrays_are_consistent(make):
    env = make()
    s, a = env.state_dims, env.action_dims
    assert env.transition.shape == s + a + s and env.reward.shape == s + a
    sums = env.transition.reshape(math.prod(s) * math.prod(a), -1).sum(axis=1)
    np.testing.assert_allclose(sums, 1.0, atol=1e-12)
    assert env.transition.min() >= 0
    assert np.abs(env.reward).max() <= env.reward_bound + 1e-12
    assert env.initial_distribution.shape == s
    assert env.initial_distribution.sum() == pytest.approx(1.0)
    assert env.observation_space.nvec.tolist() == list(s)
    assert env.action_space.nvec.tolist() == list(a)


@pytest.mark.parametrize("make", MODELS)
def test_value_iteration_satisfies_bellman_optimality(make):
    env = make()
    q = value_iteration(env, tol=1e-10)
    assert q.shape == env.state_dims + env.action_dims
    assert bellman_residual(env, q) < 1e-8
    # gamma override is honoured.
    q5 = value_iteration(env, gamma=0.5)
    assert bellman_residual(env, q5, gamma=0.5) < 1e-8


@pytest.mark.parametrize("make", MODELS[:2])
def test_policy_value_of_greedy_policy_is_optimal(make):
    env = make()
    q = value_iteration(env)
    n_state = len(env.state_dims)
    v_star = q.max(axis=tuple(range(n_state, q.ndim)))
    policy = greedy_policy(q, n_state)
    assert policy.shape == env.state_dims + (len(env.action_dims),)
    np.testing.assert_allclose(policy_value(env, policy), v_star, atol=1e-8)
    # Any other deterministic policy is no better anywhere.
    worse = np.zeros_like(policy)
    assert np.all(policy_value(env, worse) <= v_star + 1e-8)
    # policy evaluation agrees with the Bellman expectation equation.
    v = policy_value(env, worse)
    q_v = bellman_optimality(
        env, np.broadcast_to(v.reshape(env.state_dims + (1,) * len(env.action_dims)), q.shape)
    )
    idx = np.indices(env.state_dims)
    np.testing.assert_allclose(q_v[tuple(idx) + tuple(np.moveaxis(worse, -1, 0))], v, atol=1e-8)


def test_value_iteration_accepts_wrapped_env_and_rejects_bad_gamma():
    env = gym.make("rl/Inventory-v0")
    q = value_iteration(env)
    assert bellman_residual(env.unwrapped, q) < 1e-8
    with pytest.raises(ValueError, match="gamma"):
        value_iteration(env, gamma=1.0)
    with pytest.raises(RuntimeError):
        value_iteration(env, max_iter=3)


def _relative_cp_error(tensor, rank):
    cp = parafac(tl.tensor(tensor), rank, n_iter_max=500, tol=1e-12, init="random", random_state=0)
    return np.linalg.norm(tl.cp_to_tensor(cp) - tensor) / np.linalg.norm(tensor)


def test_lowrank_q_star_has_low_cp_rank():
    env = LowRankMDP(rank=2, model_seed=0)
    q = value_iteration(env)
    rank = 2 * env.rank + 1
    shuffled = np.random.default_rng(0).permutation(q.ravel()).reshape(q.shape)
    structured, unstructured = _relative_cp_error(q, rank), _relative_cp_error(shuffled, rank)
    assert structured < 0.02
    assert structured < 0.05 * unstructured


@pytest.mark.parametrize("make", MODELS[:2])
def test_sampled_steps_follow_the_model(make):
    env = make()
    env.reset(seed=0)
    state = np.array([1] + [2] * (len(env.state_dims) - 1))
    action = np.array([1] * len(env.action_dims))
    n = 4000
    counts = np.zeros(env.state_dims)
    rewards = np.zeros(n)
    for i in range(n):
        env.state = state.copy()
        next_state, rewards[i], terminated, truncated, _ = env.step(action)
        counts[tuple(next_state)] += 1
        assert not terminated and not truncated
    expected = env.transition[tuple(state) + tuple(action)]
    np.testing.assert_allclose(counts / n, expected, atol=4 * math.sqrt(0.25 / n))
    # The standard error of the sampled rewards' mean, not the (much wider) reward bound.
    standard_error = rewards.std(ddof=1) / math.sqrt(n)
    mean_reward = env.reward[tuple(state) + tuple(action)]
    assert rewards.mean() == pytest.approx(mean_reward, abs=4 * standard_error + 1e-12)


def test_lowrank_model_depends_only_on_model_seed():
    a, b, c = LowRankMDP(model_seed=1), LowRankMDP(model_seed=1), LowRankMDP(model_seed=2)
    assert np.array_equal(a.transition, b.transition) and np.array_equal(a.reward, b.reward)
    assert not np.array_equal(a.reward, c.reward)


def test_bad_arguments():
    with pytest.raises(ValueError, match="n_locations"):
        Inventory(n_locations=0)
    with pytest.raises(ValueError, match="demand_means"):
        Inventory(n_seasons=3)
    with pytest.raises(ValueError, match="rank"):
        LowRankMDP(rank=0)
    with pytest.raises(ValueError, match="state_dims"):
        LowRankMDP(state_dims=())
    with pytest.raises(ValueError, match="gamma"):
        LowRankMDP(gamma=1.5)
    env = Inventory()
    env.reset(seed=0)
    with pytest.raises(ValueError):
        env.step(np.array([3, 0]))
