"""Per-replica settings of tabular Q-learning: a batch of settings equals each trained alone."""

import pickle

import numpy as np
import pytest

from rl.agents.replica_settings import replica_config
from rl.agents.tables.tabular import TabularQ, TabularQConfig
from tests.rl.agent_drivers import (
    assert_tree_equal,
    make_problem,
    random_drive,
    random_drive_single,
    streams,
)
from tests.rl.replica_runs import assert_replica_equals_alone, batch_and_alone, resolved, train

# three settings of every per-replica field (epsilon decays fast enough to matter in 12 episodes)
SETTINGS = {
    "gamma": [0.9, 0.99, 0.5],
    "step_size": [0.1, 0.5, 0.03],
    "epsilon_start": [1.0, 0.5, 0.2],
    "epsilon_decay": [0.999, 0.99, 0.9],
    "epsilon_min": [0.05, 0.1, 0.0],
    "initial_value": [0.0, 1.0, -0.5],
}


def test_per_replica_lists_every_numeric_step_setting():
    assert TabularQ.per_replica == frozenset(SETTINGS)


def test_three_settings_by_two_seeds_equal_each_trained_alone():
    agent_class, problem, config = resolved("tabular")
    batch, _, alone = batch_and_alone(agent_class, problem, config, SETTINGS, [0, 1], 12)
    assert len(alone) == 6
    for b, run in enumerate(alone):
        assert_replica_equals_alone(batch, b, run)
        np.testing.assert_array_equal(batch.agent.q_table_[b], run.agent.q_table_[0])
        np.testing.assert_array_equal(batch.agent.visits_[b], run.agent.visits_[0])
        np.testing.assert_array_equal(batch.agent.epsilon_[b], run.agent.epsilon_[0])
    # the settings matter: the same seed under another setting learns other values
    assert not np.array_equal(batch.agent.q_table_[0], batch.agent.q_table_[2])
    assert not np.array_equal(batch.returns[:, 0], batch.returns[:, 4])


def test_actions_and_state_of_each_replica_equal_its_setting_alone():
    """Six replicas, each inactive on a different quarter of the steps, against each alone."""
    problem = make_problem((3, 4), (3,))
    per_replica = {field: np.repeat(values, 2) for field, values in SETTINGS.items()}
    seeds = [1, 2] * 3
    mask = lambda t: (np.arange(6) + t) % 4 != 0  # noqa: E731
    batch = TabularQ(problem, TabularQConfig(), streams(*seeds), replica_settings=per_replica)
    actions = random_drive(batch, 120, seed=4, active_mask=mask)
    for b, seed in enumerate(seeds):
        alone = TabularQ(problem, replica_config(TabularQConfig(), per_replica, b), streams(seed))
        alone_actions = random_drive_single(alone, 120, seed=4, replica=b, mask=mask, replicas=6)
        np.testing.assert_array_equal(actions[:, b], alone_actions)
        state, alone_state = batch.state_dict(), alone.state_dict()
        for key in ("q_table", "visits", "epsilon"):
            np.testing.assert_array_equal(state[key][b], alone_state[key][0])
        assert state["explore_rng"][b] == alone_state["explore_rng"][0]


def test_uniform_settings_equal_no_settings():
    agent_class, problem, config = resolved("tabular")
    uniform = {field: [getattr(config, field)] * 2 for field in SETTINGS}
    runs = [train(agent_class, problem, config, [3, 4], 6, s) for s in (None, uniform)]
    for key in ("returns", "lengths", "greedy_returns"):
        np.testing.assert_array_equal(getattr(runs[0], key), getattr(runs[1], key))
    assert_tree_equal(runs[0].agent.state_dict(), runs[1].agent.state_dict())


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max_entries": [10, 20]}, "cannot vary 'max_entries' per replica"),
        ({"step_size_rule": [0, 1]}, "cannot vary 'step_size_rule' per replica"),
        ({"gamma": [0.9]}, "must be 2 numbers"),
        ({"step_size": [0.1, float("inf")]}, "must be finite"),
        ({"gamma": [0.9, 1.5]}, "replica 1 of the per-replica settings: The 'gamma' parameter"),
        ({"epsilon_min": [0.05, 2.0]}, "replica 1 of the per-replica settings"),
    ],
)
def test_bad_settings_raise_one_line(settings, message):
    with pytest.raises(ValueError, match=message) as error:
        TabularQ(
            make_problem((3, 4), (3,)), TabularQConfig(), streams(0, 1), replica_settings=settings
        )
    assert "\n" not in str(error.value)


def test_state_dict_keeps_the_settings():
    """A state restores the saved settings, into an agent built without them too."""
    problem = make_problem((3, 4), (3,))
    settings = {"gamma": [0.5, 0.9], "step_size": [0.3, 0.05], "epsilon_decay": [0.9, 0.99]}
    agent = TabularQ(problem, TabularQConfig(), streams(1, 2), replica_settings=settings)
    random_drive(agent, 40, seed=0)
    saved = pickle.loads(pickle.dumps(agent.state_dict()))
    np.testing.assert_array_equal(saved["replica_settings"]["gamma"], [0.5, 0.9])
    restored = TabularQ(problem, TabularQConfig(), streams(8, 9))
    restored.load_state_dict(saved)
    for a in (agent, restored):
        random_drive(a, 40, seed=1)
    assert_tree_equal(agent.state_dict(), restored.state_dict())
    saved["replica_settings"]["gamma"] = np.array([0.5, 2.0])
    with pytest.raises(ValueError, match="replica 1 of the per-replica settings"):
        restored.load_state_dict(saved)
