"""CartPole and Pendulum over the array API (rl.envs.physics, rl.loop.device_copies).

The systems' dynamics are written once, ``dynamics(xp)``: Numba compiles it for one
copy, and NumPy, PyTorch and JAX run it on whole batches. An array-engine run keeps
its copies on its device and takes the compiled engine's actions. Its returns agree to
`RETURN_TOL`, not bit for bit: PyTorch's and JAX's ``sin`` and ``cos`` may differ from
the C library's in the last bit, and the pendulum, unstable at the top, multiplies
such a difference by about 1.2 per step (7e-9 after 100 steps, measured: TEQL stable
on JAX). A different action moves the state by a whole force or torque step, far more.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from rl.agents.readings import reading
from rl.agents.tensor.teql import TEQLAgent, TEQLConfig
from rl.agents.tensor.tlr import TLRAgent, TLRConfig
from rl.envs.cartpole import ContinuousCartPole, cartpole_row
from rl.envs.pendulum import BoundedPendulum, pendulum_row
from rl.loop.device_copies import DeviceCopies
from rl.loop.runner import Runner
from rl.problems import make_problem
from rl.seeding import spawn_replicas
from tensorq.validation import as_numpy
from tests.rl.agent_drivers import cuda_available
from tests.rl.cli_runs import assert_resumed_run_equals_whole

NO_TORCH = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="PyTorch is not installed"
)
NO_JAX = pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
BACKENDS = ["numpy", pytest.param("pytorch", marks=NO_TORCH), pytest.param("jax", marks=NO_JAX)]
AGENTS = {
    "teql-released": (TEQLAgent, TEQLConfig),
    "teql-stable": (TEQLAgent, TEQLConfig),
    "tlr-released": (TLRAgent, TLRConfig),
}
RETURN_TOL = 1e-6
"""Returns of the same actions agree to this (see the module docstring)."""
SYSTEMS = {
    "cartpole": (ContinuousCartPole, cartpole_row, 4, 1.5),
    "pendulum": (BoundedPendulum, pendulum_row, 2, 3.0),
}


def _namespace(backend):
    if backend == "pytorch":
        import torch

        return torch, torch.as_tensor
    if backend == "jax":
        from tensorq._backend import ops_for_backend

        ops_for_backend("jax")  # turns on float64
        import jax.numpy as jnp

        return jnp, jnp.asarray
    return np, np.asarray


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("system", SYSTEMS)
def test_array_dynamics_equal_the_compiled_row(system, backend):
    """10,000 random states and actions (out of range included): to 1e-12, flags exactly."""
    env_class, row, dims, action_scale = SYSTEMS[system]
    rng = np.random.default_rng(3)
    states = rng.uniform(-1.0, 1.0, size=(10_000, dims)) * [3.0, 2.0, 0.4, 3.0][:dims]
    actions = rng.uniform(-action_scale, action_scale, size=10_000)
    expected = np.empty_like(states)
    rewards, done = np.empty(len(states)), np.empty(len(states), dtype=bool)
    for i, (state, action) in enumerate(zip(states, actions, strict=True)):
        rewards[i], done[i] = row(state, action, expected[i])
    xp, put = _namespace(backend)
    moved, reward, terminated = env_class.dynamics(xp)(*(put(c) for c in states.T), put(actions))
    got = np.stack([as_numpy(c) for c in moved], axis=1)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(as_numpy(reward), rewards, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(as_numpy(terminated), done)
    assert done.any() and not done.all()


def _runner(case, backend, env, seeds, device="cpu"):
    """A fused runner (the default) on the compiled engine (backend None) or the array engine."""
    agent_class, config_class = AGENTS[case]
    params = reading(*case.split("-")).agent_params(env)
    problem = make_problem(env)
    replicas = spawn_replicas(list(seeds))
    engine = "compiled" if backend is None else "array"
    config = config_class(**params, engine=engine, backend=backend or "numpy", device=device)
    agent = agent_class(problem, config, [s.agent for s in replicas])
    return Runner(problem, agent, replicas, eval_every=2)


def _play(runner, episodes):
    results = list(runner.episodes(0, episodes))
    return np.array([r.returns for r in results]), np.array([r.greedy_returns for r in results])


def _assert_same_run(case, backend, env, seeds, episodes):
    expected, got = _runner(case, None, env, seeds), _runner(case, backend, env, seeds)
    played = _play(expected, episodes), _play(got, episodes)
    assert isinstance(got.loop, DeviceCopies)
    assert got.loop.obs.__class__ is got.agent.q_.factors[0].__class__
    for a, b in zip(*played, strict=True):
        np.testing.assert_allclose(b, a, rtol=0, atol=RETURN_TOL)


SHORT_CASES = [
    pytest.param(case, backend, marks=marks)
    for case in AGENTS
    for backend, marks in [
        ("numpy", []),
        ("pytorch", [NO_TORCH]),
        ("jax", [NO_JAX] + ([] if case == "teql-released" else [pytest.mark.slow])),
    ]
]
"""Every agent on every backend; JAX compiles for seconds per case, so two run with -m slow."""


@pytest.mark.parametrize(("case", "backend"), SHORT_CASES)
@pytest.mark.parametrize("env", SYSTEMS)
def test_device_run_plays_the_compiled_engines_episodes(env, case, backend):
    """Two seeds, 4 episodes and their evaluations, with exploration: the same returns."""
    _assert_same_run(case, backend, env, (0, 1), 4)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", AGENTS)
@pytest.mark.parametrize("env", SYSTEMS)
def test_long(env, case, backend):
    """The issue's check: 4 seeds x 200 episodes, the same actions throughout."""
    _assert_same_run(case, backend, env, range(4), 200)


def _learned(agent):
    """The agent's factors and step counters as NumPy (its host copies brought up to date)."""
    state = agent.state_dict()
    return [as_numpy(f) for f in agent.q_.factors], np.array(state["steps"])


def _assert_unchanged(before, agent):
    factors, steps = _learned(agent)
    for a, b in zip(before[0], factors, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(before[1], steps)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_non_finite_state_is_named_and_not_learned(backend, monkeypatch):
    """A NaN in replica 1's copy stops the run with the replica and its seed named."""
    reset = DeviceCopies.reset
    runner = _runner("tlr-released", backend, "cartpole", (0, 5))
    runner.episode(1)

    def poisoned(self, mask, fresh, states):
        result = reset(self, mask, fresh, states)
        obs = np.array(self.space.host(self.obs))
        obs[1, 0] = np.nan
        self.obs = self.space.put(obs)
        return result

    monkeypatch.setattr(DeviceCopies, "reset", poisoned)
    before = _learned(runner.agent)
    message = r"non-finite reward or observation for replica 1 \(seed 5\)"
    with pytest.raises(ValueError, match=message):
        runner.episode(2)
    _assert_unchanged(before, runner.agent)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_diverged_target_is_named_and_not_learned(backend):
    """Q-values that overflow: the divergence error of the agent, and no update."""
    runner = _runner("tlr-released", backend, "cartpole", (0, 5))
    runner.episode(1)
    agent = runner.agent
    agent.q_.factors[:] = [f * 1e120 for f in agent.q_.factors]  # products overflow to inf
    before = _learned(agent)
    with pytest.raises(ValueError, match="TLRAgent diverged: the TD target of replica 0"):
        runner.episode(2)
    _assert_unchanged(before, agent)


@pytest.mark.gpu
@pytest.mark.skipif(not Path("/dev/nvidiactl").exists(), reason="no NVIDIA device")
@pytest.mark.parametrize("backend", ["pytorch", "jax"])
def test_cuda_copies_stay_on_the_device(backend):
    """On a CUDA device the copies' states live there; the run plays the compiled one's returns."""
    if not cuda_available(backend):
        pytest.skip(f"{backend} sees no CUDA device")
    runner = _runner("teql-released", backend, "cartpole", range(4), device="cuda")
    got = _play(runner, 20)
    device = str(getattr(runner.loop.obs, "device", None) or runner.loop.obs.devices())
    assert "cuda" in device.lower() or "gpu" in device.lower()
    expected = _play(_runner("teql-released", None, "cartpole", range(4)), 20)
    np.testing.assert_allclose(got[0][:3], expected[0][:3], rtol=0, atol=RETURN_TOL)


@NO_TORCH
def test_a_resumed_run_equals_a_whole_one(tmp_path):
    """`python -m rl.train --backend pytorch`: 3 episodes, then resumed to 6, as 6 at once."""
    args = ["--env", "cartpole", "--agent", "teql", "--reading", "released", "--seeds", 2,
            "--checkpoint-every", 2, "--eval-every", 2, "--backend", "pytorch", "--no-progress",
            "--no-plot"]  # fmt: skip

    assert_resumed_run_equals_whole(tmp_path, args, timeout=300)
