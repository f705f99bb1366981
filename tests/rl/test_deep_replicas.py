"""Replica, determinism and checkpoint tests shared by the PyTorch agents (DQN, discrete SAC)."""

import copy
import dataclasses
import math
import pickle

import numpy as np
import pytest

pytest.importorskip("torch")

from rl.agents.base import Transitions  # noqa: E402
from rl.agents.deep import (
    dqn,  # noqa: E402
    sac,  # noqa: E402
)
from rl.agents.readings import reading
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
        dqn.DQNAgent,
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


@pytest.fixture(params=["compiled", "stacked"])
def training_step(request):
    """The engine: the compiled steps (the CPU's default) or the stacked PyTorch step."""
    return request.param


def test_same_streams_same_numbers_and_different_seed_differs(spec, training_step):
    _, _, agent_class, config, _, network = spec
    config = dataclasses.replace(config, engine=training_step)
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


def test_batched_equals_separate(spec, training_step):
    _, _, agent_class, config, _, _ = spec
    config = dataclasses.replace(config, engine=training_step)
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


def test_a_seed_alone_equals_the_same_seed_among_seven(spec, training_step):
    """Bitwise on the CPU: a seed's actions and whole state do not depend on the other replicas.

    Seven replicas, each inactive on a different quarter of the steps, so that
    the stacked computations run on 4 to 7 rows; replica 3 against its seed alone.
    """
    _, _, agent_class, config, _, _ = spec
    config = dataclasses.replace(config, engine=training_step)
    assert_alone_equals_among_seven(agent_class, config, make_problem((3, 4), (3,)), steps=90)


def assert_alone_equals_among_seven(agent_class, config, problem, steps):
    """Drive seven replicas, each inactive on a different quarter of the steps; compare replica 3.

    Its actions and whole state must equal those of its seed driven alone.
    """
    mask = lambda t: (np.arange(7) + t) % 4 != 0  # noqa: E731
    among = agent_class(problem, config, streams(*range(10, 17)))
    actions = random_drive(among, steps, seed=4, active_mask=mask)
    alone = agent_class(problem, config, streams(13))
    alone_actions = random_drive_single(alone, steps, seed=4, replica=3, mask=mask, replicas=7)
    np.testing.assert_array_equal(actions[:, 3], alone_actions)
    assert_tree_equal(among.state_dict()["replicas"][3], alone.state_dict()["replicas"][0])


def test_looped_checkpoint_loads(spec):
    """A state saved by the looped design (benchmarks.looped_deep) restores: same layout."""
    from benchmarks.looped_deep import LoopedDiscreteSAC, LoopedDQN

    name, _, agent_class, config, _, network = spec
    problem = make_problem((3, 4), (3,))
    looped = (LoopedDQN if name == "dqn" else LoopedDiscreteSAC)(problem, config, streams(1, 2))
    random_drive(looped, 40, seed=0)
    saved = looped.state_dict()
    batched = agent_class(problem, config, streams(8, 9))
    batched.load_state_dict(saved)
    probes = np.array([[i, j] for i in range(3) for j in range(4)])
    for row in probes:
        both = np.repeat(row[None], 2, axis=0)
        np.testing.assert_array_equal(batched.greedy(both), looped.greedy(both))
    restored = batched.state_dict()["replicas"]
    for i in (0, 1):
        assert_tree_equal(restored[i][network], saved["replicas"][i][network])
        assert_tree_equal(restored[i]["buffer"], saved["replicas"][i]["buffer"])


def test_inactive_replica_untouched(spec, training_step):
    _, _, agent_class, config, _, _ = spec
    config = dataclasses.replace(config, engine=training_step)
    problem = make_problem((3, 4), (3,))
    agent = agent_class(problem, config, streams(1, 2))
    before = copy.deepcopy(agent.state_dict()["replicas"][1])
    random_drive(agent, 60, seed=0, active_mask=lambda t: np.array([True, False]))
    assert_tree_equal(agent.state_dict()["replicas"][1], before)


def test_state_dict_round_trip_continues_identically(spec, training_step):
    _, _, agent_class, config, loss, _ = spec
    config = dataclasses.replace(config, engine=training_step)
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


# per agent: the changes to the small config that learn the bandit, the parameter formula
BANDIT = {
    "dqn": {"hidden": 32, "epsilon_decay": 0.995},
    "sac": {"hidden": 32, "learning_rate": 3e-3},
}


def test_joint_actions_learn_bandit(spec, training_step):
    """D_A = 2: a contextual bandit over 2 x 3 joint actions; the greedy joint action is found."""
    name, _, agent_class, config, *_ = spec
    config = dataclasses.replace(config, engine=training_step)
    agent = agent_class(
        make_problem((3,), (2, 3)), dataclasses.replace(config, **BANDIT[name]), streams(1)
    )
    rng = np.random.default_rng(1)
    best = np.array([[0, 2], [1, 0], [0, 1]])
    active = np.ones(1, bool)
    for _ in range(1200):
        s = rng.integers(0, 3, size=(1, 1))
        a = agent.act(s, active)
        assert a.shape == (1, 2) and 0 <= a[0, 0] < 2 and 0 <= a[0, 1] < 3
        reward = float(np.all(a[0] == best[s[0, 0]]))
        agent.observe(Transitions(s, a, np.array([reward]), s, np.array([True]), active))
    greedy = np.concatenate([agent.greedy(np.array([[s]])) for s in range(3)])
    np.testing.assert_array_equal(greedy, best)


def test_too_many_joint_actions_raise(spec):
    _, _, agent_class, config, *_ = spec
    with pytest.raises(ValueError, match="max_joint_actions"):
        agent_class(make_problem((3,), (100, 100)), config, streams(0))


@pytest.mark.parametrize("env", ["cartpole", "pendulum", "highway"])
def test_n_params_match_the_appendix_formulas(spec, env):
    """n_params is the appendix formula (P_MLP for DQN, P_SAC for SAC) and counts the networks."""
    from analysis import params

    name, module, agent_class, config, *_ = spec
    state_dims, action_dims = {
        "cartpole": ((10,) * 4, (10,)), "pendulum": ((20, 20), (10,)), "highway": ((20,) * 9, (5,)),
    }[env]  # fmt: skip
    hidden = reading(module.SPEC.name, "paper").agent_params(env)["hidden"]
    agent = agent_class(
        make_problem(state_dims, action_dims),
        dataclasses.replace(config, hidden=hidden),
        streams(0),
    )
    formula = params.mlp_params if name == "dqn" else params.sac_params
    assert agent.n_params == formula(len(state_dims), hidden, math.prod(action_dims))
    networks = (agent.q,) if name == "dqn" else (agent.actor, agent.critics, agent.log_alpha)
    assert sum(net.numel() for net in networks) == agent.n_params  # B = 1: one row each


def test_presets_agree_with_analysis_matcher(spec):
    name, module, *_ = spec
    from analysis import params

    widths = params.matched_widths()
    for env in ("cartpole", "pendulum", "highway"):
        assert reading(module.SPEC.name, "paper").agent_params(env)["hidden"] == widths[env, name]


@pytest.fixture
def torch_two_threads():
    """Let PyTorch use two intra-op threads (as an unpinned run on two cores does), then restore."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(threads)


def test_a_seed_alone_equals_the_same_seed_among_seven_with_two_torch_threads(
    spec, training_step, torch_two_threads
):
    """Bitwise whatever PyTorch's thread count: the agents compute on one CPU thread.

    With two intra-op threads, PyTorch's batched product of one replica and of
    several take different kernels, whose sums differ in the last bits at the
    output layer of 46 hidden units, 10 joint actions and mini-batches of 32.
    """
    _, _, agent_class, config, _, _ = spec
    config = dataclasses.replace(config, hidden=46, batch_size=32, engine=training_step)
    assert_alone_equals_among_seven(agent_class, config, make_problem((3, 4), (10,)), steps=60)
