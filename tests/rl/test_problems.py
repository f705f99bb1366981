"""rl.problems.make_problem: names, options, encode/decode shapes."""

import importlib.util

import gymnasium as gym
import numpy as np
import pytest

from rl.problems import ENVIRONMENTS, Problem, bundled_env, make_problem

HAS_HIGHWAY = importlib.util.find_spec("highway_env") is not None
NAMES = [n for n in ENVIRONMENTS if n != "highway" or HAS_HIGHWAY]


@pytest.mark.parametrize("name", NAMES)
def test_encode_decode_shapes_and_env_round_trip(name):
    options = {"env_kwargs": {"engine": "reference"}} if name == "highway" else {}  # highway-env
    problem = make_problem(name, **options)
    entry = ENVIRONMENTS[name]
    assert isinstance(problem, Problem) and make_problem(entry.env_id).shape == problem.shape
    assert problem.env_id == entry.env_id and problem.reward_bound > 0
    assert problem.vectorized == entry.vectorized == (name in ("cartpole", "pendulum", "planted"))
    assert bundled_env(entry.env_id) is bundled_env(name) is entry
    env = gym.make(problem.env_id, **problem.env_kwargs)
    obs, _ = env.reset(seed=0)
    b = 3
    states = problem.encode(np.stack([obs] * b))
    assert states.dtype == np.int64 and states.shape == (b, len(problem.state_dims))
    assert np.all(states >= 0) and np.all(states < np.array(problem.state_dims))
    rng = np.random.default_rng(0)
    indices = rng.integers(0, problem.action_dims, size=(b, len(problem.action_dims)))
    actions = problem.decode(indices)
    assert len(actions) == b
    for i in range(b):
        assert env.action_space.contains(actions[i]), (actions[i], env.action_space)
    env.step(actions[0])
    env.close()
    assert problem.reward_bound == env.unwrapped.reward_bound


@pytest.mark.parametrize("name", ["cartpole", "pendulum"])
def test_vector_decode(name):
    problem = make_problem(name)
    vec = gym.make_vec(problem.env_id, num_envs=4)
    obs, _ = vec.reset(seed=0)
    assert problem.encode(obs).shape == (4, len(problem.state_dims))
    actions = problem.decode(np.array([[0], [1], [8], [9]]))
    assert actions.shape == (4, 1) and vec.action_space.contains(actions)
    vec.step(actions)


def test_options():
    coarse = make_problem("cartpole", state_bins=3, index_rule="endpoint")
    assert coarse.state_dims == (3, 3, 3, 3) and coarse.action_dims == (10,)
    assert make_problem("pendulum", state_bins=(7, 7), action_bins=5).shape == (7, 7, 5)
    inv = make_problem("inventory", env_kwargs={"n_locations": 3, "max_level": 2})
    assert inv.state_dims == (2, 3, 3, 3) and inv.action_dims == (3, 3, 3)
    low = make_problem("lowrank", env_kwargs={"state_dims": (2, 3), "action_dims": (4,)})
    assert low.shape == (2, 3, 4)
    # x_dot = 0.3 on 10 bins over [-0.5, 0.5]: floor(8.0) = 8 (centre), round(7.2) = 7 (endpoint).
    x = np.array([[0.0, 0.3, 0.0, 0.0]])
    assert make_problem("cartpole").encode(x)[0, 1] == 8
    assert make_problem("cartpole", index_rule="endpoint").encode(x)[0, 1] == 7


@pytest.mark.parametrize(
    "name,options,match",
    [
        ("nope", {}, "cartpole"),
        ("cartpole", {"bins": 3}, "bins"),
        ("cartpole", {"index_rule": "floor"}, "index_rule"),
        ("cartpole", {"state_bins": (3, 3)}, "state_bins"),
        ("cartpole", {"state_bins": 0}, "state_bins"),
        ("pendulum", {"action_bins": -1}, "action_bins"),
        ("pendulum", {"normalization": "paper"}, "normalization"),
        ("highway", {"normalization": "bogus"}, "normalization"),
        ("highway", {"action_bins": 3}, "action_bins"),
        ("inventory", {"state_bins": 3}, "state_bins"),
        ("lowrank", {"env_kwargs": [1]}, "env_kwargs"),
    ],
)
def test_bad_options(name, options, match):
    with pytest.raises(ValueError, match=match):
        make_problem(name, **options)


def test_highway_problem_without_building_the_env():
    problem = make_problem("highway", normalization="informative")
    assert problem.env_kwargs == {"normalization": "informative", "engine": "twin"}
    assert problem.state_dims == (20,) * 9 and problem.action_dims == (5,)
    assert problem.decode(np.array([[4], [0]])).tolist() == [4, 0]
    assert problem.reward_bound == 1.0
