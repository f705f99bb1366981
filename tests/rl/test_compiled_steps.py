"""The compiled CPU kernels of DQN and SAC against the stacked PyTorch computations.

The PyTorch step (`rl.agents.deep._stacked`, tested against autograd) is the
reference: the compiled pieces compute the same functions, and a compiled
update from a given state lands where the PyTorch update does, up to float32
rounding (the sums run in other orders).
"""

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as hs  # noqa: E402

from rl.agents.base import Transitions  # noqa: E402
from rl.agents.deep import _stacked as st  # noqa: E402
from rl.agents.deep import _step_compiled as compiled  # noqa: E402
from rl.agents.deep import dqn, sac  # noqa: E402
from rl.agents.deep.engine import resolve_engine  # noqa: E402
from tests.rl.agent_drivers import make_problem, random_drive, streams  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")

CONFIGS = {
    "dqn huber": (dqn.DQNAgent, dqn.DQNConfig(hidden=16, learning_starts=20, batch_size=8)),
    "dqn mse, raw inputs": (
        dqn.DQNAgent,
        dqn.DQNConfig(hidden=16, learning_starts=20, batch_size=8, loss="mse", input_scaling="raw"),
    ),
    "sac": (sac.DiscreteSAC, sac.DiscreteSACConfig(hidden=16, learning_starts=20, batch_size=8)),
    "sac, fixed temperature": (
        sac.DiscreteSAC,
        sac.DiscreteSACConfig(hidden=16, learning_starts=20, batch_size=8, autotune=False),
    ),
}


@settings(max_examples=40, deadline=None)
@given(
    n_in=hs.integers(1, 5),
    hidden=hs.integers(1, 20),
    n_out=hs.integers(1, 8),
    n=hs.integers(1, 40),
    seed=hs.integers(0, 2**31),
)
def test_forward_and_backward_are_the_stacked_pytorch_ones(n_in, hidden, n_out, n, seed):
    rng = np.random.default_rng(seed)
    layout = st.mlp_layout(n_in, hidden, n_out)
    p = rng.normal(size=layout.size).astype(np.float32)
    x = rng.normal(size=(n_in, n)).astype(np.float32)
    d_out = rng.normal(size=(n_out, n)).astype(np.float32)
    params = layout.views(torch.from_numpy(p[None]))
    done = st.forward_pass(params, torch.from_numpy(x[None]))
    expected = st.backward(params, done, torch.from_numpy(d_out[None]))[0].numpy()
    h = np.empty((hidden, n), np.float32)
    out = np.empty((n_out, n), np.float32)
    compiled._forward(p, x, h, out)
    np.testing.assert_allclose(h, done.hidden[0].numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out, done.outputs[0].numpy(), rtol=1e-5, atol=1e-5)
    grad = np.empty(layout.size, np.float32)
    compiled._backward(
        p, x, h, d_out, grad, np.empty((hidden, n), np.float32), np.ones(n, np.float32)
    )
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-4)


@settings(max_examples=30, deadline=None)
@given(n_out=hs.integers(1, 12), n=hs.integers(1, 30), seed=hs.integers(0, 2**31))
def test_policy_is_the_softmax_and_log_softmax_over_actions(n_out, n, seed):
    logits = (np.random.default_rng(seed).normal(size=(n_out, n)) * 5).astype(np.float32)
    pi, log_pi = np.empty_like(logits), np.empty_like(logits)
    compiled._policy(logits, pi, log_pi, np.empty((2, n), np.float32))
    expected = torch.log_softmax(torch.from_numpy(logits), dim=0).numpy()
    np.testing.assert_allclose(log_pi, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pi, np.exp(expected), rtol=1e-5, atol=1e-6)


#: per agent: its network tensors and its optimizers
LEARNED = {
    dqn.DQNAgent: (("q", "target"), ("optimizer",)),
    sac.DiscreteSAC: (("actor", "critics", "critics_target", "log_alpha"), sac.OPTIMIZERS),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_acting_outputs_are_the_pytorch_ones(name):
    """The acting network's outputs at each replica's state, some replicas only."""
    fast, reference = _pair(name)
    states = np.random.default_rng(3).integers(0, [3, 4], size=(5, 2))
    rows = fast._rows(np.array([0, 2, 3]))
    network = fast._greedy_network()
    expected = reference.engine.outputs(network, states, rows).numpy()
    actual = fast.engine.outputs(network, states, rows).numpy()
    np.testing.assert_allclose(actual, expected, rtol=1e-5)
    assert expected.shape == (3, 3)


def _state(agent):
    """Every network, Adam moment and step count of a DQN or SAC agent, as numpy, by name."""
    networks, optimizers = LEARNED[type(agent)]
    tensors = {name: getattr(agent, name).numpy() for name in networks}
    for name in optimizers:
        optimizer = getattr(agent, name)
        tensors[f"{name} m"] = optimizer.exp_avg.numpy()
        tensors[f"{name} v"] = optimizer.exp_avg_sq.numpy()
        tensors[f"{name} steps"] = optimizer.steps
    return {key: value.copy() for key, value in tensors.items()}


def _losses(agent):
    return {key: value for key, value in agent.metrics().items() if "loss" in key}


def _pair(name):
    """A compiled and a PyTorch agent of ``CONFIGS[name]`` in the same state, after warm-up."""
    agent_class, config = CONFIGS[name]
    problem = make_problem((3, 4), (3,))
    both = []
    for engine in ("compiled", "stacked"):
        agent = agent_class(problem, dataclasses.replace(config, engine=engine), streams(*range(5)))
        assert agent.engine.name == engine
        both.append(agent)
    mask = lambda t: (np.arange(5) + t) % 3 != 0  # noqa: E731
    random_drive(both[1], 60, seed=0, active_mask=mask)
    both[0].load_state_dict(both[1].state_dict())
    return both


def _transitions(rng, active):
    b = len(active)
    states = rng.integers(0, [3, 4], size=(b, 2))
    return Transitions(
        states,
        rng.integers(0, 3, size=(b, 1)),
        rng.normal(size=b),
        rng.integers(0, [3, 4], size=(b, 2)),
        rng.random(b) < 0.2,
        active,
    )


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_one_update_is_the_pytorch_update_to_rounding(name):
    """From the same state, every parameter, moment and loss agrees to float32 rounding."""
    fast, reference = _pair(name)
    batch = _transitions(np.random.default_rng(1), np.array([True, True, False, True, True]))
    for agent in (fast, reference):
        agent.observe(batch)
    before, after = _state(reference), _state(fast)
    for key, value in before.items():
        np.testing.assert_allclose(after[key], value, rtol=1e-5, atol=1e-6, err_msg=key)
    for key, value in _losses(reference).items():
        np.testing.assert_allclose(_losses(fast)[key], value, rtol=1e-5, atol=1e-6, err_msg=key)
        if key != "alpha_loss" or reference.config.autotune:
            assert np.isfinite(value[[0, 1, 3, 4]]).all()  # the replicas that learned


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_many_updates_stay_near_the_pytorch_ones(name):
    """Forty updates on the same transitions: rounding grows, to well under the step size."""
    fast, reference = _pair(name)
    rng = np.random.default_rng(2)
    for _ in range(40):
        batch = _transitions(rng, rng.random(5) < 0.8)
        for agent in (fast, reference):
            agent.observe(batch)
    before, after = _state(reference), _state(fast)
    for key, value in before.items():
        np.testing.assert_allclose(after[key], value, rtol=1e-4, atol=1e-5, err_msg=key)


def test_the_cpu_trains_compiled_unless_the_config_says_stacked():
    agent_class, config = CONFIGS["dqn huber"]
    problem = make_problem((3, 4), (3,))
    assert agent_class(problem, config, streams(0)).engine.name == "compiled"
    stacked = dataclasses.replace(config, engine="stacked")
    assert agent_class(problem, stacked, streams(0)).engine.name == "stacked"
    assert resolve_engine("auto", torch.device("cuda")) == "stacked"
    with pytest.raises(ValueError, match="'engine' parameter 'compiled' runs on the CPU"):
        resolve_engine("compiled", torch.device("cuda"))
    with pytest.raises(ValueError, match="'engine'"):
        dataclasses.replace(config, engine="numba")
