"""Tests of discrete SAC: learning, losses, parameter counts, presets, config (see also
test_deep_replicas.py for determinism, replicas and checkpoints)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rl.agents.deep.sac import (  # noqa: E402
    DiscreteSAC,
    DiscreteSACConfig,
    log_policy,
    policy_gradient,
    policy_loss,
    soft_bellman_targets,
    temperature_gradient,
    temperature_loss,
)
from rl.agents.readings import reading  # noqa: E402
from tests.rl.agent_drivers import (  # noqa: E402
    make_problem,
    random_drive,
    run_chain,
    streams,
)

SMALL = dict(hidden=16, learning_starts=20, batch_size=8)


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def test_learns_chain_better_than_random():
    """After 1,500 steps the most probable action is right in every state (random: 1/32 chance)."""
    length = 6
    agent = DiscreteSAC(
        make_problem((length,), (2,)),
        DiscreteSACConfig(hidden=32, learning_starts=100, learning_rate=3e-3, gamma=0.9),
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
    assert reading("sac", "paper").agent_params("cartpole")["hidden"] == 15
    assert reading("sac", "paper").agent_params("pendulum")["hidden"] == 12
    assert reading("sac", "paper").agent_params("highway")["hidden"] == 82
    assert reading("sac", "paper").agent_params("unknown") == {}
    assert reading("sac", "released").agent_params("pendulum")["hidden"] == 13
    DiscreteSACConfig(**reading("sac", "released").agent_params("highway"))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("hidden", 0),
        ("gamma", 1.5),
        ("learning_rate", 0.0),
        ("batch_size", 2.5),
        ("tau", 0.0),
        ("alpha", -1.0),
        ("autotune", 1),
        ("target_entropy_scale", 1.5),
        ("input_scaling", "z"),
    ],
)
def test_bad_config_names_field(field, value):
    with pytest.raises(ValueError, match=f"'{field}'"):
        DiscreteSACConfig(**{field: value})


def test_bad_config_message_format():
    with pytest.raises(ValueError, match=r"The 'hidden' parameter must be an int >= 1\. Got 0"):
        DiscreteSACConfig(hidden=0)


def test_temperature_follows_target_entropy():
    """Target entropy 0 (below the policy's) lowers alpha from 0.2; autotune off keeps it."""
    problem = make_problem((3, 4), (3,))
    tuned = DiscreteSAC(
        problem,
        DiscreteSACConfig(**{**SMALL, "target_entropy_scale": 0.0, "learning_rate": 1e-2}),
        streams(0),
    )
    random_drive(tuned, 80, seed=0)
    assert tuned.metrics()["alpha"][0] < 0.2
    fixed = DiscreteSAC(problem, DiscreteSACConfig(**{**SMALL, "autotune": False}), streams(0))
    random_drive(fixed, 80, seed=0)
    assert fixed.metrics()["alpha"][0] == pytest.approx(0.2)


def test_losses_match_numpy_formulas():
    rng = np.random.default_rng(0)
    logits, q = rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    rewards, not_done = rng.normal(size=5), (rng.random(5) < 0.5).astype(float)
    pi = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    log_pi = np.log(pi)
    alpha, gamma, target_entropy, log_alpha = 0.3, 0.9, 0.5, np.log(0.3)
    t = torch.from_numpy
    targets = soft_bellman_targets(t(rewards), t(not_done), t(log_pi), t(q), alpha, gamma)
    expected = rewards + gamma * not_done * np.sum(pi * (q - alpha * log_pi), axis=1)
    np.testing.assert_allclose(targets.numpy(), expected, rtol=1e-12)
    actor = policy_loss(t(log_pi), t(q), alpha)
    assert float(actor) == pytest.approx(np.mean(np.sum(pi * (alpha * log_pi - q), axis=1)))
    temp = temperature_loss(torch.tensor(log_alpha), t(log_pi), target_entropy)
    expected_temp = np.mean(-log_alpha * np.sum(pi * (log_pi + target_entropy), axis=1))
    assert float(temp) == pytest.approx(expected_temp)


def test_input_scaling():
    problem = make_problem((3, 5, 1), (2,))
    agent = DiscreteSAC(problem, DiscreteSACConfig(), streams(0))
    np.testing.assert_allclose(agent.codec.features(np.array([[2, 2, 0]])), [[1.0, 0.5, 0.0]])


def test_log_policy_is_the_log_softmax_over_actions_and_keeps_replicas_apart():
    generator = torch.Generator().manual_seed(0)
    logits = (torch.randn(7, 10, 64, generator=generator) * 5).requires_grad_()  # columns
    weights = torch.randn(7, 64, 10, generator=generator)
    got = log_policy(logits)
    expected = torch.nn.functional.log_softmax(logits.transpose(1, 2), dim=2)
    assert got.shape == expected.shape == (7, 64, 10)
    torch.testing.assert_close(got, expected, rtol=0, atol=2e-6)
    (grad_got,) = torch.autograd.grad((got.exp() * weights).sum(), logits)
    (grad_expected,) = torch.autograd.grad((expected.exp() * weights).sum(), logits)
    torch.testing.assert_close(grad_got, grad_expected, rtol=0, atol=1e-6)
    alone = log_policy(logits[3:4])  # a replica's values do not depend on the others
    assert torch.equal(alone[0], got[3])


def test_policy_and_temperature_gradients_are_autograd():
    """The written-out gradients of the actor and temperature losses equal autograd's."""
    generator = torch.Generator().manual_seed(1)
    logits = (torch.randn(3, 16, 5, generator=generator, dtype=torch.float64) * 3).requires_grad_()
    min_q = torch.randn(3, 16, 5, generator=generator, dtype=torch.float64)
    alpha = torch.tensor([[[0.1]], [[0.5]], [[2.0]]], dtype=torch.float64)
    log_pi = torch.log_softmax(logits, dim=2)
    loss = policy_loss(log_pi, min_q, alpha)
    (expected,) = torch.autograd.grad(loss.sum(), logits)
    got_loss, got = policy_gradient(log_pi.detach(), min_q, alpha)
    torch.testing.assert_close(got_loss, loss.detach(), rtol=1e-12, atol=0)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)

    log_alpha = torch.log(alpha[:, :, 0]).requires_grad_()  # (R, 1), as the agent keeps it
    loss = temperature_loss(log_alpha, log_pi.detach(), 0.7)
    (expected,) = torch.autograd.grad(loss.sum(), log_alpha)
    torch.testing.assert_close(temperature_gradient(log_pi.detach(), 0.7), expected)
