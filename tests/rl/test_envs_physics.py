"""ContinuousCartPole and BoundedPendulum: physics, bounds, seeding, Gymnasium conformance."""

import math
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from rl.envs import cartpole as cp
from rl.envs import pendulum as pd
from rl.problems import ENVIRONMENTS, make_problem, register_envs

EXACT_IDS = [entry.env_id for entry in ENVIRONMENTS.values() if entry.name != "highway"]


def cartpole_reference(state, a):
    """Plain scalar Sutton-Barto step with the Rozada et al. reward."""
    x, x_dot, theta, theta_dot = state
    force = 30.0 * a
    cos_t, sin_t = math.cos(theta), math.sin(theta)
    temp = (force + 0.05 * theta_dot**2 * sin_t) / 1.1
    theta_acc = (9.8 * sin_t - cos_t * temp) / (0.5 * (4 / 3 - 0.1 * cos_t**2 / 1.1))
    x_acc = temp - 0.05 * theta_acc * cos_t / 1.1
    new = (
        x + 0.02 * x_dot,
        x_dot + 0.02 * x_acc,
        theta + 0.02 * theta_dot,
        theta_dot + 0.02 * theta_acc,
    )
    done = abs(new[0]) > 2.4 or abs(new[2]) > 12 * math.pi / 180
    if done:
        reward = -(new[2] ** 2) - 0.1 * new[3] ** 2 - 10 * a**2
    else:
        reward = 1 - new[2] ** 2 - new[3] ** 2 - 10 * a**2
    return new, reward, done


@pytest.mark.parametrize("env_id", EXACT_IDS)
def test_check_env(env_id):
    env = gym.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # infinite bounds and the [-2, 2] torque are by design
        check_env(env.unwrapped, skip_render_check=True)


def test_register_envs_is_idempotent_and_highway_is_lazy():
    register_envs()
    register_envs()
    for entry in ENVIRONMENTS.values():
        spec = gym.spec(entry.env_id)
        assert spec.entry_point == entry.entry_point
        assert spec.max_episode_steps == entry.max_episode_steps
        assert spec.vector_entry_point == entry.vector_entry_point
    code = "import sys, rl; assert 'highway_env' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cartpole_one_step_hand_computed():
    env = cp.ContinuousCartPole()
    env.reset(seed=0)
    env.state = np.zeros(4)
    obs, reward, terminated, truncated, _ = env.step(np.array([1.0]))
    # theta_acc = -(30 / 1.1) / (0.5 (4/3 - 0.1/1.1)) = -1800/41, x_acc = 1200/41.
    np.testing.assert_allclose(obs, [0.0, 24 / 41, 0.0, -36 / 41], rtol=1e-12, atol=1e-15)
    assert reward == pytest.approx(-9 - 1296 / 1681, rel=1e-12)
    assert isinstance(reward, float) and not terminated and not truncated


@pytest.mark.parametrize(
    "state,a",
    [((0.1, -0.2, 0.05, 0.3), 0.5), ((2.39, 1.0, 0.0, 0.0), 0.2), ((0.0, 0.0, 0.2, 1.0), -0.7)],
)
def test_cartpole_step_matches_scalar_reference(state, a):
    env = cp.ContinuousCartPole()
    env.reset(seed=0)
    env.state = np.array(state)
    obs, reward, terminated, _, _ = env.step(np.array([a]))
    new, ref_reward, ref_done = cartpole_reference(state, a)
    np.testing.assert_allclose(obs, new, rtol=1e-12, atol=1e-15)
    assert reward == pytest.approx(ref_reward, rel=1e-12)
    assert terminated == ref_done


def test_pendulum_one_step_hand_computed():
    env = pd.BoundedPendulum()
    env.reset(seed=0)
    env.state = np.zeros(2)
    obs, reward, terminated, _, _ = env.step(np.array([2.0]))
    np.testing.assert_allclose(obs, [0.015, 0.3], rtol=1e-12)
    assert reward == pytest.approx(0.6) and not terminated

    env.state = np.array([0.5, -1.0])
    obs, reward, terminated, _, _ = env.step(np.array([-1.0]))
    theta_dot = -1.0 + (15 * math.sin(0.5) - 3.0) * 0.05
    np.testing.assert_allclose(obs, [0.5 + 0.05 * theta_dot, theta_dot], rtol=1e-12)
    assert reward == pytest.approx(1 - (0.25 + 0.1 + 0.1)) and not terminated

    # theta integrates the unclipped velocity, which is then clipped to 8.
    env.state = np.array([0.7, 7.9])
    obs, reward, terminated, _, _ = env.step(np.array([2.0]))
    theta_dot = 7.9 + (15 * math.sin(0.7) + 6.0) * 0.05
    np.testing.assert_allclose(obs, [0.7 + 0.05 * theta_dot, 8.0], rtol=1e-12)
    assert reward == pytest.approx(1 - (0.49 + 0.1 * 7.9**2 + 0.4))
    assert terminated


def test_pendulum_reward_wraps_theta():
    state = np.array([[2 * np.pi + 0.1, 0.0]])
    _, reward, _ = pd.pendulum_step(state, np.zeros((1, 1)))
    assert reward[0] == pytest.approx(1 - 0.01)


def test_cartpole_constant_policy_bound():
    """Action-bin centres have |a| >= 0.1, so a return is at most 100 - 10 * 0.1^2 * 100."""
    problem = make_problem("cartpole")
    actions = problem.decode(np.arange(10)[:, None])[:, 0]
    seeds = 5
    env = cp.ContinuousCartPoleVector(num_envs=10 * seeds, autoreset_mode="Disabled")
    env.reset(seed=list(range(10 * seeds)))
    batch = np.repeat(actions, seeds)[:, None]
    returns = np.zeros(10 * seeds)
    steps = np.zeros(10 * seeds)
    for _ in range(100):
        alive = ~(env._terminated | env._truncated)
        _, reward, _, _, _ = env.step(batch)
        returns += reward
        steps += alive
    assert np.all(returns <= steps * (1 - 10 * batch[:, 0] ** 2) + 1e-9)
    assert returns.max() <= 100 - 10 * 0.1**2 * 100 + 1e-9
    assert np.abs(actions).min() == pytest.approx(0.1)


@pytest.mark.parametrize("env_id", EXACT_IDS)
def test_same_seed_same_trajectory(env_id):
    def rollout(seed):
        env = gym.make(env_id)
        env.action_space.seed(123)
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for _ in range(60):
            obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            out += [obs, np.array([reward])]
            if terminated or truncated:
                out.append(env.reset()[0])
        return np.concatenate([np.ravel(o).astype(np.float64) for o in out])

    assert np.array_equal(rollout(7), rollout(7))
    assert not np.array_equal(rollout(7), rollout(8))


def test_reward_bounds_hold_on_random_rollouts():
    for env_cls, bound in (
        (cp.ContinuousCartPoleVector, cp.REWARD_BOUND),
        (pd.BoundedPendulumVector, pd.REWARD_BOUND),
    ):
        env = env_cls(num_envs=64)
        env.reset(seed=0)
        env.action_space.seed(0)
        for _ in range(300):
            _, reward, _, _, _ = env.step(env.action_space.sample())
            assert np.all(np.abs(reward) <= bound)
        assert env.reward_bound == bound
