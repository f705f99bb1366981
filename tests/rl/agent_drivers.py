"""Drivers shared by the agent tests: toy problems, random transitions, a chain task."""

import importlib.util

import numpy as np

from rl.agents.base import Transitions
from rl.agents.tensor._array_backend import check_backend
from rl.problems import Problem
from rl.seeding import replica_streams


def make_problem(state_dims, action_dims):
    return Problem(
        name="toy",
        env_id="none",
        env_kwargs={},
        state_dims=tuple(state_dims),
        action_dims=tuple(action_dims),
        reward_bound=1.0,
        encode=lambda obs: obs,
        decode=lambda actions: actions,
    )


def streams(*seeds):
    return [replica_streams(seed).agent for seed in seeds]


def assert_tree_equal(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_tree_equal(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_tree_equal(x, y)
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b)
    else:
        assert a == b


def random_drive(agent, steps, seed, active_mask=None):
    """Drive ``agent`` on random transitions of a (3, 4) x (3,) problem; return actions."""
    rng = np.random.default_rng(seed)
    b = agent.replicas
    states = rng.integers(0, [3, 4], size=(b, 2))
    taken = []
    for t in range(steps):
        active = np.ones(b, bool) if active_mask is None else active_mask(t)
        actions = agent.act(states, active)
        next_states = rng.integers(0, [3, 4], size=(b, 2))
        rewards = rng.normal(size=b)
        terminated = rng.random(b) < 0.1
        agent.observe(Transitions(states, actions, rewards, next_states, terminated, active))
        if t % 7 == 6:
            agent.end_episode(active)
        taken.append(np.where(active[:, None], actions, -1))
        states = next_states
    return np.stack(taken)


def run_chain(agent, steps, length=6, horizon=15):
    """Chain 0..length-1, action 1 moves right, reward 1 on reaching the end (terminal)."""
    b = agent.replicas
    active = np.ones(b, bool)
    states = np.zeros((b, 1), np.int64)
    clock = np.zeros(b, np.int64)
    for _ in range(steps):
        actions = agent.act(states, active)
        next_states = np.clip(states + np.where(actions == 1, 1, -1), 0, length - 1)
        terminated = next_states[:, 0] == length - 1
        agent.observe(
            Transitions(states, actions, terminated.astype(float), next_states, terminated, active)
        )
        clock += 1
        done = terminated | (clock >= horizon)
        if done.any():
            agent.end_episode(done)
        states = np.where(done[:, None], 0, next_states)
        clock[done] = 0


def random_drive_single(agent, steps, seed, replica, mask, replicas=2):
    """Feed replica ``replica``'s rows of `random_drive`'s stream (B = ``replicas``) to B = 1."""
    rng = np.random.default_rng(seed)
    states = rng.integers(0, [3, 4], size=(replicas, 2))
    taken = []
    for t in range(steps):
        active = mask(t)[replica : replica + 1]
        actions = agent.act(states[replica : replica + 1], active)
        next_states = rng.integers(0, [3, 4], size=(replicas, 2))
        rewards = rng.normal(size=replicas)
        terminated = rng.random(replicas) < 0.1
        r = slice(replica, replica + 1)
        agent.observe(
            Transitions(states[r], actions, rewards[r], next_states[r], terminated[r], active)
        )
        if t % 7 == 6:
            agent.end_episode(active)
        taken.append(np.where(active[:, None], actions, -1)[0])
        states = next_states
    return np.stack(taken)


def cuda_available(backend):
    """True where ``backend`` ("pytorch", "jax") sees a CUDA device (gpu tests skip if not)."""
    if importlib.util.find_spec("torch" if backend == "pytorch" else "jax") is None:
        return False
    try:
        check_backend(backend, "cuda")
    except ValueError:
        return False
    return True
