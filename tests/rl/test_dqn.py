"""Tests of the DQN baseline: learning, parameter counts, presets, config (see also
test_deep_replicas.py for determinism, replicas and checkpoints)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rl.agents.deep._torch_agent import td_loss  # noqa: E402
from rl.agents.deep.dqn import DQNAgent, DQNConfig  # noqa: E402
from rl.agents.readings import reading  # noqa: E402
from tests.rl.agent_drivers import (  # noqa: E402
    make_problem,
    random_drive,
    run_chain,
    streams,
)

SMALL = dict(
    hidden=16, learning_starts=20, batch_size=8, target_update_every=10, epsilon_decay=0.99
)


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def test_learns_chain_better_than_random():
    """After 1,500 steps the greedy policy walks right from every state (random: 1/32 chance)."""
    length = 6
    agent = DQNAgent(
        make_problem((length,), (2,)),
        DQNConfig(hidden=32, learning_starts=100, epsilon_decay=0.995, epsilon_min=0.1, gamma=0.9),
        streams(0),
    )
    run_chain(agent, 1500, length=length)
    states = np.arange(length - 1)[:, None]
    greedy = np.array([agent.greedy(s[None])[0, 0] for s in states])
    np.testing.assert_array_equal(greedy, np.ones(length - 1))
    # A uniformly random policy reaches the end within 15 steps far less often than always.
    rng = np.random.default_rng(0)
    walks = np.cumsum(np.where(rng.random((2000, 15)) < 0.5, 1, -1), axis=1)
    assert (walks.max(axis=1) >= length - 1).mean() < 0.5


def test_presets_are_formula_nearest():
    assert reading("dqn", "paper").agent_params("cartpole")["hidden"] == 46
    assert reading("dqn", "paper").agent_params("pendulum")["hidden"] == 38
    assert reading("dqn", "paper").agent_params("highway")["hidden"] == 246
    assert reading("dqn", "paper").agent_params("unknown") == {}
    assert reading("dqn", "released").agent_params("cartpole")["epsilon_schedule"] == "episode"
    DQNConfig(**reading("dqn", "released").agent_params("highway"))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("hidden", 0),
        ("gamma", 1.5),
        ("learning_rate", 0.0),
        ("batch_size", 2.5),
        ("epsilon_decay", 0.0),
        ("loss", "l1"),
        ("input_scaling", "z"),
        ("epsilon_schedule", "x"),
    ],
)
def test_bad_config_names_field(field, value):
    with pytest.raises(ValueError, match=f"'{field}'"):
        DQNConfig(**{field: value})


def test_bad_config_message_format():
    with pytest.raises(ValueError, match=r"The 'hidden' parameter must be an int >= 1\. Got 0"):
        DQNConfig(hidden=0)


def test_episode_schedule_decays_per_episode_only():
    agent = DQNAgent(
        make_problem((3, 4), (3,)),
        DQNConfig(**{**SMALL, "epsilon_schedule": "episode", "epsilon_decay": 0.5}),
        streams(0),
    )
    random_drive(agent, 14, seed=0)  # two end_episode calls
    assert agent.metrics()["epsilon"][0] == pytest.approx(0.25)


def test_input_scaling():
    problem = make_problem((3, 5, 1), (2,))
    unit = DQNAgent(problem, DQNConfig(), streams(0)).codec.features(np.array([[2, 2, 0]]))
    raw = DQNAgent(problem, DQNConfig(input_scaling="raw"), streams(0)).codec.features(
        np.array([[2, 2, 0]])
    )
    np.testing.assert_allclose(unit, [[1.0, 0.5, 0.0]])
    np.testing.assert_allclose(raw, [[2.0, 2.0, 0.0]])


@pytest.mark.parametrize("loss", ["huber", "mse"])
def test_td_loss_gradient_is_autograd(loss):
    """`td_loss` gives PyTorch's loss per replica and autograd's gradient (Huber: both sides)."""
    generator = torch.Generator().manual_seed(0)
    values = (torch.randn(4, 9, generator=generator, dtype=torch.float64) * 2).requires_grad_()
    targets = torch.randn(4, 9, generator=generator, dtype=torch.float64)
    losses, d_values = td_loss(values.detach(), targets, loss)
    fn = torch.nn.functional.smooth_l1_loss if loss == "huber" else torch.nn.functional.mse_loss
    expected = fn(values, targets, reduction="none").mean(dim=1)
    (grad,) = torch.autograd.grad(expected.sum(), values)
    torch.testing.assert_close(losses, expected.detach(), rtol=0, atol=0)
    torch.testing.assert_close(d_values, grad, rtol=1e-12, atol=1e-15)
    if loss == "huber":
        assert (values - targets).abs().min() < 1 < (values - targets).abs().max()
