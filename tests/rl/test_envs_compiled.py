"""The compiled-environment protocol (rl.envs.compiled): copies declared in their own modules."""

from typing import NamedTuple

import numpy as np
import pytest
from numba import njit

from rl.envs import cartpole, pendulum
from rl.envs.compiled import CompiledVectorEnv, kernel_sources, reset_copy, step_copy
from rl.loop.copies import compiled_copies_apply
from rl.problems import make_problem


@njit
def _walk_reset(copies, b, seed):
    copies.obs[b, 0] = seed


@njit
def _walk_step(copies, b, action):
    copies.obs[b, 0] += 2.0 * action
    return -copies.obs[b, 0], copies.obs[b, 0] > 5.0


class WalkCopies(NamedTuple):
    """A compiled environment declared outside ``rl.envs``: a walk on the line."""

    obs: np.ndarray
    max_steps: int

    reset_kernel = _walk_reset
    step_kernel = _walk_step
    sources = ()


@njit  # not cached: it compiles in the test's own kernels
def _reset_then_step(copies, b, seed, actions):
    reset_copy(copies, b, seed)
    total, ended = 0.0, False
    for action in actions:
        reward, ended = step_copy(copies, b, action)
        total += reward
    return total, ended


def test_a_new_environment_declares_its_copies_in_its_own_module():
    copies = WalkCopies(np.zeros((2, 1)), -1)
    total, ended = _reset_then_step(copies, 1, 1, np.array([1.0, 0.5, 2.0]))
    assert copies.obs[:, 0].tolist() == [0.0, 8.0]  # 1 + 2 (1 + 0.5 + 2)
    assert total == -(3.0 + 4.0 + 8.0) and ended
    assert kernel_sources(copies)[1:] == []


SYSTEMS = {
    "cartpole": (cartpole, cartpole.ContinuousCartPole, cartpole.ContinuousCartPoleVector),
    "pendulum": (pendulum, pendulum.BoundedPendulum, pendulum.BoundedPendulumVector),
}


@pytest.mark.parametrize("system", SYSTEMS)
def test_physics_copies_reset_and_step_as_the_single_environment(system):
    module, env_cls, vector_cls = SYSTEMS[system]
    vector = vector_cls(3)
    assert isinstance(vector, CompiledVectorEnv)
    copies = vector.compiled_copies(3)
    assert type(copies) is vector_cls.copies and copies.max_steps == 100
    actions = np.array([0.3, -0.7, 0.9, 0.1])
    total, ended = _reset_then_step(copies, 2, 17, actions)
    env = env_cls()
    observation, _ = env.reset(seed=17)
    expected, done = 0.0, False
    for action in actions:
        observation, reward, done, _, _ = env.step(np.array([action]))
        expected += reward
    np.testing.assert_array_equal(copies.obs[2], observation)
    assert (total, ended) == (expected, done)
    assert copies.obs[:2].tolist() == [[0.0] * copies.obs.shape[1]] * 2  # the others untouched
    assert module.__file__ in kernel_sources(copies)


def test_environments_without_compiled_copies_stay_with_the_objects():
    problem = make_problem("inventory")
    vector = problem.make_env()
    assert not isinstance(vector, CompiledVectorEnv)
    assert not compiled_copies_apply(problem, vector)
    assert compiled_copies_apply(make_problem("cartpole"), cartpole.ContinuousCartPoleVector(2))
