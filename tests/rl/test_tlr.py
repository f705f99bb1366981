import numpy as np
import pytest

from rl.agents.base import Transitions
from rl.agents.tensor.tlr import TLRAgent, TLRConfig
from rl.problems import make_problem
from rl.seeding import spawn_replicas
from tensorq import OnlineCP, normalized_step
from tests.rl.test_teql import _greedy_window, _train_cartpole


def _agent(problem, seeds=(0,), **params):
    streams = spawn_replicas(list(seeds))
    return TLRAgent(problem, TLRConfig(**params), [s.agent for s in streams])


def test_observe_is_one_normalized_step_with_the_td_target():
    problem = make_problem("lowrank")
    agent = _agent(problem, gamma=0.9, alpha=0.1)
    reference = OnlineCP([np.array(f, copy=True) for f in agent.q_.factors])
    next_state = np.array([[3, 3, 0]])
    target = 0.5 + 0.9 * np.asarray(reference.subtensor(next_state)).max()
    normalized_step(reference, np.array([[1, 0, 2, 1, 2]]), np.array([target]), step_size=0.1)
    batch = Transitions(
        np.array([[1, 0, 2]]), np.array([[1, 2]]), np.array([0.5]), next_state,
        np.array([False]), np.array([True]),
    )  # fmt: skip
    agent.observe(batch)
    for ours, theirs in zip(agent.q_.factors, reference.factors, strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_epsilon_decays_per_non_terminal_active_step():
    problem = make_problem("lowrank")
    agent = _agent(problem, seeds=(0, 1, 2), epsilon_start=0.5, epsilon_decay=0.5)
    batch = Transitions(
        np.zeros((3, 3), np.int64), np.zeros((3, 2), np.int64), np.zeros(3),
        np.zeros((3, 3), np.int64), np.array([False, True, False]), np.array([True, True, False]),
    )  # fmt: skip
    agent.observe(batch)
    np.testing.assert_array_equal(agent.epsilon_, [0.25, 0.5, 0.5])


def test_greedy_return_improves_on_cartpole(tmp_path):
    """3 seeds x 400 episodes with the released TLR settings (about 8 s).

    Measured mean greedy return: episodes 1-50: -12.6, episodes 361-400: 39.6.
    """
    table = _train_cartpole(tmp_path, "tlr", episodes=400)
    early, late = _greedy_window(table, 1, 50), _greedy_window(table, 361, 400)
    assert late - early > 30


def test_bad_config_names_the_parameter():
    with pytest.raises(ValueError, match="'alpha'"):
        TLRConfig(alpha=0.0)
    with pytest.raises(ValueError, match="'epsilon_decay'"):
        TLRConfig(epsilon_decay=1.5)


def test_divergence_is_reported_clearly():
    problem = make_problem("lowrank")
    agent = _agent(problem, gamma=0.9)
    agent.q_.factors[0][...] = np.inf
    batch = Transitions(
        np.zeros((1, 3), np.int64), np.zeros((1, 2), np.int64), np.zeros(1),
        np.zeros((1, 3), np.int64), np.array([False]), np.array([True]),
    )  # fmt: skip
    with pytest.raises(ValueError, match="TLRAgent diverged: the TD target of replica 0") as error:
        agent.observe(batch)
    message = str(error.value)  # only remedies TLR has: no bounded iterates, no readings
    assert "'alpha'" in message and "'gamma'" in message and "bounded" not in message
