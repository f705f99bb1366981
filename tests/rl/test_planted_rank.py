"""PlantedRankMDP: its Q* is the model's optimum, and the kinds are what they say."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import rl  # noqa: F401
from rl.envs import PlantedRankMDP, bellman_residual, policy_value, value_iteration
from rl.problems import make_problem


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rank": 2, "state_modes": 2},
        {"kind": "full", "state_modes": 2, "gamma": 0.99},
        {"kind": "sparse", "rank": 3, "sparse_entries": 4, "state_modes": 3, "mode_size": 2},
    ],
)
def test_planted_q_star_is_the_value_iteration_optimum(kwargs):
    env = PlantedRankMDP(**kwargs)
    assert bellman_residual(env, env.q_star) < 1e-12
    q = value_iteration(env, tol=1e-12)
    np.testing.assert_allclose(q, env.q_star, atol=1e-9)
    assert np.abs(env.reward).max() == pytest.approx(1.0)
    modes = tuple(range(-len(env.state_dims), 0))
    np.testing.assert_allclose(env.transition.sum(axis=modes), 1.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rank": 4, "state_modes": 3, "gamma": 0.99},
        {"kind": "full", "state_modes": 2, "mode_size": 4, "transition_rank": 5},
    ],
)
def test_policy_values_equal_the_dense_solve(kwargs):
    env = PlantedRankMDP(**kwargs)
    rng = np.random.default_rng(3)
    policies = rng.integers(0, env.action_dims, size=(3, *env.state_dims, len(env.action_dims)))
    values = env.policy_values(policies)
    assert values.shape == (3, *env.state_dims)
    for policy, value in zip(policies, values, strict=True):
        np.testing.assert_allclose(value, policy_value(env, policy), rtol=1e-11, atol=1e-11)
    np.testing.assert_array_equal(env.policy_values(policies[1:2])[0], values[1])  # bitwise
    with pytest.raises(ValueError, match="'policies' parameter must have shape"):
        env.policy_values(policies[0])


def test_sparse_kind_moves_exactly_the_chosen_entries():
    low = PlantedRankMDP(rank=3, state_modes=2, model_seed=5).q_star
    sparse = PlantedRankMDP(rank=3, state_modes=2, kind="sparse", sparse_entries=6, model_seed=5)
    q = sparse.q_star
    ratio = np.median(q / low)  # the two are scaled by different constants
    moved = np.abs(q - ratio * low) > 1e-9 * np.abs(q).max()
    assert moved.sum() == 6


def test_registered_env_passes_check_env_and_is_a_problem():
    env = gym.make("rl/PlantedRankMDP-v0", rank=2, state_modes=2)
    check_env(env.unwrapped, skip_render_check=True)
    problem = make_problem("planted", env_kwargs={"state_modes": 2, "rank": 2, "gamma": 0.99})
    assert problem.state_dims == (4, 4)
    assert problem.action_dims == (3, 3)
    assert problem.discount == 0.99


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"kind": "spiky"}, "kind"),
        ({"kind": "sparse"}, "sparse_entries"),
        ({"rank": 0}, "rank"),
        ({"state_modes": 0}, "state_modes"),
        ({"sparse_scale": 0.0}, "sparse_scale"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        PlantedRankMDP(**kwargs)
