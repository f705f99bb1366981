"""GoalGrid: spaces, slips, the goal, walls, truncation and the exact model."""

import gymnasium as gym
import numpy as np
import pytest

from rl.envs.goal_grid import MOVES, GoalGrid
from rl.envs.value_iteration import value_iteration
from rl.problems import make_problem

LEFT, DOWN, RIGHT, UP = range(4)


def test_spaces_start_and_problem():
    env = gym.make("rl/GoalGrid-v0")
    assert env.observation_space == gym.spaces.MultiDiscrete([10, 10])
    assert env.action_space == gym.spaces.Discrete(4)
    assert env.spec.max_episode_steps == 200
    obs, _ = env.reset(seed=0)
    assert obs.tolist() == [0, 0] and env.observation_space.contains(obs)
    problem = make_problem("goalgrid", env_kwargs={"shape": (6, 15)})
    assert (problem.state_dims, problem.action_dims) == ((6, 15), (4,))
    assert problem.reward_bound == 10.0 and problem.discount == 0.99
    assert problem.decode(np.array([[2], [3]])).tolist() == [2, 3]  # Discrete: one int each


def test_slips_go_to_each_other_direction_with_a_third_of_the_slip():
    """From the centre, 30,000 moves right: 0.8 right, 0.2 / 3 each other way (slip 0.2).

    The standard error of a share p over n moves is sqrt(p (1 - p) / n), at most 0.0023
    here; the tolerance 0.01 is over four of them.
    """
    env = GoalGrid(slip=0.2)
    env.reset(seed=1)
    n, moved = 30_000, np.zeros(4)
    for _ in range(n):
        env.state = np.array([5, 5])
        obs, reward, terminated, truncated, _ = env.step(RIGHT)
        moved[int(np.flatnonzero((MOVES == obs - 5).all(axis=1))[0])] += 1
        assert reward == -0.1 and not terminated and not truncated
    np.testing.assert_allclose(moved / n, [0.2 / 3, 0.2 / 3, 0.8, 0.2 / 3], atol=0.01)


def test_shortest_path_reaches_the_goal_and_walls_hold():
    env = gym.make("rl/GoalGrid-v0", slip=0.0)
    env.reset(seed=0)
    assert env.step(LEFT)[0].tolist() == [0, 0] and env.step(UP)[0].tolist() == [0, 0]
    total, steps = 0.0, 0
    for action in [DOWN] * 9 + [RIGHT] * 9:
        obs, reward, terminated, truncated, _ = env.step(action)
        total, steps = total + reward, steps + 1
    assert obs.tolist() == [9, 9] and terminated and not truncated and reward == 10.0
    assert total == pytest.approx(17 * -0.1 + 10.0)


def test_episodes_are_truncated_at_200_steps():
    env = gym.make("rl/GoalGrid-v0")
    env.reset(seed=0)
    for step in range(1, 201):
        _, _, terminated, truncated, _ = env.step(LEFT)  # slips stay far from the goal
        assert not terminated and truncated == (step == 200)
    capped = gym.make("rl/GoalGrid-v0", max_episode_steps=5)
    capped.reset(seed=0)
    assert [capped.step(LEFT)[3] for _ in range(5)] == [False] * 4 + [True]


def test_exact_model_gives_the_shortest_paths_value():
    """Without slips V*(start) = 10 gamma^17 - 0.1 (1 - gamma^17) / (1 - gamma) (18 steps)."""
    model = GoalGrid(slip=0.0)
    transition = model.transition
    np.testing.assert_allclose(transition.sum(axis=(-2, -1)), 1.0)
    q = value_iteration(model)
    gamma = 0.99
    expected = 10.0 * gamma**17 - 0.1 * (1 - gamma**17) / (1 - gamma)
    assert q[0, 0].max() == pytest.approx(expected, abs=1e-6)
    assert q[9, 8, RIGHT] == pytest.approx(10.0, abs=1e-6)  # one step into the goal
    slippery = value_iteration(GoalGrid())
    assert 6.0 < slippery[0, 0].max() < expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"shape": (1, 5)}, "'shape' parameter"),
        ({"shape": (3, 3, 3)}, "two ints"),
        ({"slip": 1.5}, "'slip' parameter"),
        ({"goal_reward": 0.0}, "'goal_reward' parameter"),
        ({"step_cost": -1.0}, "'step_cost' parameter"),
    ],
)
def test_bad_parameters_are_refused_in_one_line(kwargs, message):
    with pytest.raises(ValueError, match=message) as error:
        GoalGrid(**kwargs)
    assert "\n" not in str(error.value)


def test_a_model_too_large_is_refused():
    with pytest.raises(ValueError, match="choose a smaller shape"):
        _ = GoalGrid(shape=(100, 100)).transition


def test_invalid_action_is_refused():
    env = GoalGrid()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="outside"):
        env.step(4)
