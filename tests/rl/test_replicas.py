"""rl.loop.replicas.ReplicaEnvs: per-replica reset, frozen inactive copies, equal to single envs."""

import gymnasium as gym
import numpy as np
import pytest

from rl.loop.replicas import ReplicaEnvs
from rl.problems import make_problem

NAMES = ["cartpole", "pendulum", "inventory", "lowrank"]


def _random_actions(problem, rng, copies):
    indices = rng.integers(0, problem.action_dims, size=(copies, len(problem.action_dims)))
    return problem.decode(indices)


@pytest.mark.parametrize("name", NAMES)
def test_full_reset_equals_single_env_reset(name):
    problem = make_problem(name)
    envs = ReplicaEnvs(problem, 3)
    obs = envs.reset([11, 12, 13])
    for i, seed in enumerate([11, 12, 13]):
        single = gym.make(problem.env_id, **problem.env_kwargs)
        assert np.array_equal(obs[i], single.reset(seed=seed)[0])
    envs.close()


@pytest.mark.parametrize("name", NAMES)
def test_per_replica_reset_and_inactive_copies_match_single_envs(name):
    """Each copy runs its own episode sequence, reset alone when it ends, idle when inactive.

    A list of single environments driven by the same schedule (reset copy i
    with seed s when it ends, skip it when inactive) must give the same
    observations, rewards and flags, bit for bit.
    """
    problem = make_problem(name)
    copies = 5
    envs = ReplicaEnvs(problem, copies)
    singles = [gym.make(problem.env_id, **problem.env_kwargs) for _ in range(copies)]
    rng = np.random.default_rng(0)
    seeds = np.arange(copies) + 100
    obs = envs.reset(seeds)
    expected = np.stack([env.reset(seed=int(s))[0] for env, s in zip(singles, seeds, strict=True)])
    assert np.array_equal(obs, expected)
    n_resets = n_idle = 0
    for t in range(250):
        actions = _random_actions(problem, rng, copies)
        active = rng.random(copies) < 0.8
        step = envs.step(actions, active)
        for i, env in enumerate(singles):
            if active[i]:
                o, r, te, tr, _ = env.step(actions[i])
                expected[i] = o
            else:
                r, te, tr = 0.0, False, False
                n_idle += 1
            assert np.array_equal(step.observations[i], expected[i]), (t, i)
            assert step.rewards[i] == r and step.terminated[i] == te and step.truncated[i] == tr
        ended = step.terminated | step.truncated
        if ended.any():
            seeds = 1000 * (t + 1) + np.arange(copies)
            seeds_with_gaps = [int(s) if e else None for s, e in zip(seeds, ended, strict=True)]
            obs = envs.reset(seeds_with_gaps, ended)
            for i in np.flatnonzero(ended):
                expected[i] = singles[i].reset(seed=int(seeds[i]))[0]
                n_resets += 1
            assert np.array_equal(obs, expected), t  # the others keep their last observation
    assert n_resets >= copies and n_idle > 0
    envs.close()


def test_masked_reset_is_a_full_reset_for_the_masked_copies():
    """Resetting copy i alone with seed s gives what a full reset with s gives."""
    problem = make_problem("cartpole")
    full = ReplicaEnvs(problem, 4).reset([7, 8, 9, 10])
    envs = ReplicaEnvs(problem, 4)
    envs.reset([0, 1, 2, 3])
    envs.step(problem.decode(np.full((4, 1), 9)), np.ones(4, dtype=bool))
    before = envs.reset([0, 1, 2, 3], np.zeros(4, dtype=bool))
    mask = np.array([False, True, False, True])
    after = envs.reset([None, 8, None, 10], mask)
    assert np.array_equal(after[mask], full[mask])
    assert np.array_equal(after[~mask], before[~mask])


def test_vector_copies_do_not_move_while_inactive():
    problem = make_problem("pendulum")
    envs = ReplicaEnvs(problem, 2)
    obs = envs.reset([3, 4])
    state = envs._vector.state.copy()
    counters = envs._vector.elapsed_steps.copy()
    rng_states = [r.bit_generator.state for r in envs._vector._rngs]
    active = np.array([False, True])
    for _ in range(5):
        step = envs.step(np.full((2, 1), 1.0), active)
        assert np.array_equal(step.observations[0], obs[0]) and step.rewards[0] == 0.0
    assert np.array_equal(envs._vector.state[0], state[0])
    assert envs._vector.elapsed_steps[0] == counters[0] and envs._vector.elapsed_steps[1] == 5
    assert [r.bit_generator.state for r in envs._vector._rngs] == rng_states


def test_bad_reset_arguments():
    envs = ReplicaEnvs(make_problem("cartpole"), 2)
    with pytest.raises(RuntimeError, match="first reset"):
        envs.reset([1, 2], np.array([True, False]))
    with pytest.raises(ValueError, match="seeds"):
        envs.reset([1, 2, 3])
    envs.reset([1, 2])
    with pytest.raises(ValueError, match="'mask'"):
        envs.reset([1, 2], np.array([True]))
