"""Per-replica settings of DQN and discrete SAC: a batch of settings equals each trained alone.

On each engine (the compiled CPU kernels and the stacked PyTorch step), bitwise:
actions, returns, networks, optimizer moments, replay and every reported number.
"""

import dataclasses
import pickle

import numpy as np
import pytest

pytest.importorskip("torch")

from rl.agents.deep.dqn import DQNAgent, DQNConfig  # noqa: E402
from rl.agents.deep.sac import DiscreteSAC, DiscreteSACConfig  # noqa: E402
from rl.agents.replica_settings import replica_config  # noqa: E402
from tests.rl.agent_drivers import (  # noqa: E402
    assert_tree_equal,
    make_problem,
    random_drive,
    random_drive_single,
    streams,
)
from tests.rl.replica_runs import (  # noqa: E402
    assert_replica_equals_alone,
    batch_and_alone,
    resolved,
    train,
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")

# three settings of every per-replica field of each agent
SETTINGS = {
    "dqn": {
        "gamma": [0.99, 0.9, 0.5],
        "learning_rate": [1e-3, 1e-2, 3e-4],
        "learning_starts": [20, 10, 30],
        "target_update_every": [10, 3, 25],
        "epsilon_start": [1.0, 0.5, 0.8],
        "epsilon_decay": [0.99, 0.9, 0.999],
        "epsilon_min": [0.05, 0.2, 0.0],
    },
    "sac": {
        "gamma": [0.99, 0.9, 0.5],
        "learning_rate": [3e-4, 3e-3, 1e-3],
        "learning_starts": [20, 10, 30],
        "tau": [0.005, 0.1, 0.5],
        "alpha": [0.2, 1.0, 0.05],
        "target_entropy_scale": [0.98, 0.5, 0.0],
    },
}
SMALL = {"hidden": 16, "batch_size": 8}
AGENTS = {
    "dqn": (DQNAgent, DQNConfig(**SMALL, learning_starts=20, target_update_every=10)),
    "sac": (DiscreteSAC, DiscreteSACConfig(**SMALL, learning_starts=20)),
}


@pytest.fixture(params=sorted(AGENTS))
def agent(request):
    return request.param


@pytest.fixture(params=["compiled", "stacked"])
def engine(request):
    return request.param


def test_per_replica_lists_the_numeric_settings_of_learning(agent):
    agent_class, _ = AGENTS[agent]
    assert agent_class.per_replica == frozenset(SETTINGS[agent])


def test_three_settings_by_two_seeds_equal_each_alone(agent, engine):
    """Six replicas, each inactive on a different quarter of the steps, against each alone."""
    agent_class, config = AGENTS[agent]
    config = dataclasses.replace(config, engine=engine)
    problem = make_problem((3, 4), (3,))
    per_replica = {field: np.repeat(values, 2) for field, values in SETTINGS[agent].items()}
    seeds = [1, 2] * 3
    mask = lambda t: (np.arange(6) + t) % 4 != 0  # noqa: E731
    batch = agent_class(problem, config, streams(*seeds), replica_settings=per_replica)
    actions = random_drive(batch, 70, seed=4, active_mask=mask)
    saved = batch.state_dict()
    metrics = batch.metrics()
    for b, seed in enumerate(seeds):
        alone = agent_class(problem, replica_config(config, per_replica, b), streams(seed))
        alone_actions = random_drive_single(alone, 70, seed=4, replica=b, mask=mask, replicas=6)
        np.testing.assert_array_equal(actions[:, b], alone_actions)
        assert_tree_equal(saved["replicas"][b], alone.state_dict()["replicas"][0])
        for key, values in alone.metrics().items():
            np.testing.assert_array_equal(metrics[key][b], values[0])
        for field, values in alone.settings_.items():
            assert saved["replica_settings"][field][b] == values[0]
    # the settings matter: the same seed under another setting has other networks
    first, other = saved["replicas"][0], saved["replicas"][2]
    network = "q" if agent == "dqn" else "actor"
    assert not np.array_equal(first[network]["0.weight"], other[network]["0.weight"])


@pytest.mark.parametrize("engine", ["compiled", pytest.param("stacked", marks=pytest.mark.slow)])
def test_training_runs_of_three_settings_by_two_seeds_equal_each_alone(agent, engine):
    """Through the runner on the low-rank MDP: returns, lengths, greedy returns and state."""
    agent_class, problem, config = resolved(agent, engine=engine, **SMALL, learning_starts=20)
    batch, _, alone = batch_and_alone(agent_class, problem, config, SETTINGS[agent], [0, 1], 4)
    saved = batch.agent.state_dict()["replicas"]
    for b, run in enumerate(alone):
        assert_replica_equals_alone(batch, b, run)
        assert_tree_equal(saved[b], run.agent.state_dict()["replicas"][0])


def test_uniform_settings_equal_no_settings(agent, engine):
    agent_class, problem, config = resolved(agent, engine=engine, **SMALL, learning_starts=20)
    uniform = {field: [getattr(config, field)] * 2 for field in SETTINGS[agent]}
    runs = [train(agent_class, problem, config, [3, 4], 1, s) for s in (None, uniform)]
    for key in ("returns", "lengths", "greedy_returns"):
        np.testing.assert_array_equal(getattr(runs[0], key), getattr(runs[1], key))
    assert_tree_equal(runs[0].agent.state_dict(), runs[1].agent.state_dict())


@pytest.mark.parametrize(
    ("agent", "settings", "message"),
    [
        ("dqn", {"hidden": [8, 16]}, "cannot vary 'hidden' per replica"),
        ("dqn", {"batch_size": [8, 16]}, "cannot vary 'batch_size' per replica"),
        ("sac", {"buffer_size": [8, 16]}, "cannot vary 'buffer_size' per replica"),
        ("sac", {"autotune": [True, False]}, "cannot vary 'autotune' per replica"),
        ("dqn", {"gamma": [0.9]}, "must be 2 numbers"),
        ("sac", {"tau": [0.1, float("nan")]}, "must be finite"),
        ("dqn", {"learning_rate": [1e-3, -1.0]}, "replica 1 of the per-replica settings"),
        ("sac", {"alpha": [0.0, 0.2]}, "replica 0 of the per-replica settings"),
    ],
)
def test_bad_settings_raise_one_line(agent, settings, message):
    agent_class, config = AGENTS[agent]
    problem = make_problem((3, 4), (3,))
    with pytest.raises(ValueError, match=message) as error:
        agent_class(problem, config, streams(0, 1), replica_settings=settings)
    assert "\n" not in str(error.value)


def test_state_dict_keeps_the_settings(agent, engine):
    """A saved state restores its settings, into an agent built without them too."""
    agent_class, config = AGENTS[agent]
    config = dataclasses.replace(config, engine=engine)
    problem = make_problem((3, 4), (3,))
    settings = {field: values[1:] for field, values in SETTINGS[agent].items()}
    trained = agent_class(problem, config, streams(7, 8), replica_settings=settings)
    random_drive(trained, 50, seed=1)
    saved = pickle.loads(pickle.dumps(trained.state_dict()))
    restored = agent_class(problem, config, streams(100, 101))
    restored.load_state_dict(saved)
    outputs = []
    for a in (trained, restored):
        outputs.append((random_drive(a, 40, seed=2), a.state_dict()))
    np.testing.assert_array_equal(outputs[0][0], outputs[1][0])
    assert_tree_equal(outputs[0][1], outputs[1][1])
    np.testing.assert_array_equal(outputs[1][1]["replica_settings"]["gamma"], [0.9, 0.5])
    saved["replica_settings"]["gamma"] = np.array([0.9, 2.0])
    with pytest.raises(ValueError, match="replica 1 of the per-replica settings"):
        restored.load_state_dict(saved)
