"""Replica, determinism and checkpoint tests shared by the PyTorch agents (DQN, discrete SAC)."""

import copy
import pickle

import numpy as np
import pytest

pytest.importorskip("torch")

from rl.agents import dqn, sac  # noqa: E402
from tests.rl.agent_drivers import (  # noqa: E402
    assert_tree_equal,
    make_problem,
    random_drive,
    random_drive_single,
    streams,
)

# name, module, agent class, small config, loss reported by metrics(), first network's key
SPECS = {
    "dqn": (
        dqn,
        dqn.DQN,
        dqn.DQNConfig(
            hidden=16, learning_starts=20, batch_size=8, target_update_every=10, epsilon_decay=0.99
        ),
        "loss",
        "q",
    ),
    "sac": (
        sac,
        sac.DiscreteSAC,
        sac.DiscreteSACConfig(hidden=16, learning_starts=20, batch_size=8),
        "critic_loss",
        "actor",
    ),
}


pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.fixture(params=sorted(SPECS))
def spec(request):
    return (request.param, *SPECS[request.param])


def test_same_streams_same_numbers_and_different_seed_differs(spec):
    _, _, agent_class, config, _, network = spec
    problem = make_problem((3, 4), (3,))
    runs = []
    for seed in (5, 5, 6):
        agent = agent_class(problem, config, streams(seed))
        runs.append((random_drive(agent, 80, seed=0), agent.state_dict()))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert_tree_equal(runs[0][1], runs[1][1])
    assert not np.array_equal(
        runs[0][1]["replicas"][0][network]["0.weight"],
        runs[2][1]["replicas"][0][network]["0.weight"],
    )


def test_batched_equals_separate(spec):
    _, _, agent_class, config, _, _ = spec
    problem = make_problem((3, 4), (3,))
    mask = lambda t: np.array([True, t % 3 != 0])  # noqa: E731
    batched = agent_class(problem, config, streams(1, 2))
    actions = random_drive(batched, 90, seed=3, active_mask=mask)
    # Replay the same inputs replica by replica: replica 0 every step, replica 1 when active.
    for i in (0, 1):
        alone = agent_class(problem, config, streams(1 + i))
        alone_actions = random_drive_single(alone, 90, seed=3, replica=i, mask=mask)
        np.testing.assert_array_equal(actions[:, i], alone_actions)
        assert_tree_equal(batched.state_dict()["replicas"][i], alone.state_dict()["replicas"][0])


def test_inactive_replica_untouched(spec):
    _, _, agent_class, config, _, _ = spec
    problem = make_problem((3, 4), (3,))
    agent = agent_class(problem, config, streams(1, 2))
    before = copy.deepcopy(agent.state_dict()["replicas"][1])
    random_drive(agent, 60, seed=0, active_mask=lambda t: np.array([True, False]))
    assert_tree_equal(agent.state_dict()["replicas"][1], before)


def test_state_dict_round_trip_continues_identically(spec):
    _, _, agent_class, config, loss, _ = spec
    problem = make_problem((3, 4), (3,))
    agent = agent_class(problem, config, streams(7, 8))
    random_drive(agent, 50, seed=1)
    saved = pickle.loads(pickle.dumps(agent.state_dict()))
    restored = agent_class(problem, config, streams(100, 101))
    restored.load_state_dict(saved)
    outputs = []
    for a in (agent, restored):
        actions = random_drive(a, 40, seed=2)
        outputs.append((actions, a.metrics()[loss], a.state_dict()))
    np.testing.assert_array_equal(outputs[0][0], outputs[1][0])
    np.testing.assert_array_equal(outputs[0][1], outputs[1][1])
    assert np.all(np.isfinite(outputs[0][1]))
    assert_tree_equal(outputs[0][2], outputs[1][2])


def test_presets_agree_with_analysis_matcher(spec):
    name, module, *_ = spec
    params = pytest.importorskip("analysis.params")
    widths = params.matched_widths()
    for env in ("cartpole", "pendulum", "highway"):
        assert module.preset(env)["hidden"] == widths[env, name]
