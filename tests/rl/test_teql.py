import math
import tracemalloc

import gymnasium
import numpy as np
import pytest

from rl.agents.base import Transitions
from rl.agents.readings import reading
from rl.agents.tensor.teql import TEQLAgent, TEQLConfig
from rl.agents.tensor.visits import DenseVisits, SparseVisits
from rl.envs import greedy_policy, policy_value, value_iteration
from rl.problems import Problem, make_problem
from rl.runs.metrics import read_metrics
from rl.runs.training import Runner
from rl.seeding import spawn_replicas
from tensorq import OnlineCP, bcd_update


def _agent(problem, seeds=(0,), **params):
    streams = spawn_replicas(list(seeds))
    return TEQLAgent(problem, TEQLConfig(**params), [s.agent for s in streams]), streams


def _transition(agent, states, actions, rewards, next_states, terminated=None):
    replicas = len(states)
    terminated = np.zeros(replicas, bool) if terminated is None else terminated
    return Transitions(
        np.asarray(states), np.asarray(actions), np.asarray(rewards, float),
        np.asarray(next_states), terminated, np.ones(replicas, bool),
    )  # fmt: skip


def _assert_same(ours, theirs, engine):
    """Bitwise on the reference engine; to 1e-12 on the compiled one (summation order)."""
    if engine == "reference":
        np.testing.assert_array_equal(ours, theirs)
    else:
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("engine", ["reference", "compiled"])
def test_observe_follows_algorithm_3_order(engine):
    """Target from Q_{t-1}, update with N_{t-1}, then Delta Q = |change| and N += 1."""
    problem = make_problem("lowrank")
    agent, _ = _agent(problem, gamma=0.9, alpha0=0.3, kappa=0.5, lam=1e-3, engine=engine)
    reference = OnlineCP([np.array(f, copy=True) for f in agent.q_.factors])
    state, action, next_state = [[1, 2, 3]], [[2, 0]], [[0, 1, 1]]
    batch = _transition(agent, state, action, [0.7], next_state)
    for visit in range(2):
        target = 0.7 + 0.9 * np.asarray(reference.subtensor(np.array(next_state))).max()
        expected = bcd_update(
            reference, np.array([[1, 2, 3, 2, 0]]), np.array([target]), np.array([visit]),
            step_size=0.3 / (1 + 0.5 * (visit + 1)), lam=1e-3, eps=1e-4, tol=0.01,
            max_inner=10, bound=agent.bound,
        )  # fmt: skip
        agent.observe(batch)
        for ours, theirs in zip(agent.q_.factors, reference.factors, strict=True):
            _assert_same(ours, theirs, engine)
        flat_s, flat_a = agent.flat_states(np.array(state)), agent.flat_actions(np.array(action))
        rows = agent.visits_.rows(flat_s)
        assert rows.counts[0, flat_a[0]] == visit + 1
        change = abs(expected.after[0] - expected.before[0])
        _assert_same(rows.delta[0, flat_a[0]], change, engine)


@pytest.mark.parametrize("engine", ["reference", "compiled"])
def test_released_reading_counts_first_and_signs_delta(engine):
    problem = make_problem("lowrank")
    agent, _ = _agent(
        problem, **reading("teql", "released").agent_params("lowrank"), gamma=0.9, engine=engine
    )
    batch = _transition(agent, [[0, 0, 0]], [[1, 1]], [1.0], [[0, 0, 1]])
    before = agent.q_.entries(np.array([[0, 0, 0, 1, 1]]))
    agent.observe(batch)
    after = agent.q_.entries(np.array([[0, 0, 0, 1, 1]]))
    flat_s = agent.flat_states(np.array([[0, 0, 0]]))
    rows = agent.visits_.rows(flat_s)
    flat_a = agent.flat_actions(np.array([[1, 1]]))[0]
    assert rows.counts[0, flat_a] == 1
    _assert_same(rows.delta[0, flat_a], before[0] - after[0], engine)  # signed, as released
    assert after[0] > before[0]  # target 1 + 0.9 max Q exceeds the initial entry


def test_bound_holds_everywhere_under_the_paper_reading():
    """The paper's loss is concave at first visits (lam / eps = 10): clipping keeps |Q| <= V_max."""
    problem = make_problem("lowrank")
    streams = spawn_replicas([0, 1])
    agent = TEQLAgent(problem, TEQLConfig(gamma=0.9, alpha0=0.5), [s.agent for s in streams])
    Runner(problem, agent, streams, eval_every=0).episode(1)
    v_max = problem.reward_bound / (1 - 0.9)
    for replica in range(2):
        dense = np.asarray(agent.q_.to_cp_tensor(replica).to_tensor())
        assert np.abs(dense).max() <= v_max * (1 + 1e-12)
    assert np.abs(dense).max() > 1.0  # the first-visit push did move entries far from 0..1


def _exact_model_run(episodes):
    problem = make_problem("lowrank")
    model = gymnasium.make(problem.env_id, **problem.env_kwargs).unwrapped
    q_star = value_iteration(model)
    start = model.initial_distribution
    params = {"gamma": model.gamma, "alpha0": 0.5, "c": 0.5, "count_before_update": True}
    agent, streams = _agent(problem, seeds=(0,), **params)
    runner = Runner(problem, agent, streams, eval_every=0)

    def measure():
        q = np.asarray(agent.q_.to_cp_tensor(0).to_tensor())
        policy = greedy_policy(q, len(problem.state_dims))
        value = (start * policy_value(model, policy)).sum()
        return np.abs(q - q_star).max(), value

    first = measure()
    for episode in range(1, episodes + 1):
        runner.episode(episode)
    optimal = (start * q_star.reshape(*problem.state_dims, -1).max(axis=-1)).sum()
    return first, measure(), optimal


def test_learns_the_exact_low_rank_mdp():
    """Seed 0, 250 episodes (25,000 steps) of the 4x4x4 state, 3x3 action low-rank MDP.

    Measured: ||Q - Q*||_inf 1.03 -> 0.48, greedy policy value -0.36 -> 0.525
    against V* = 0.632 (averaged over the start distribution). Settings for this
    small problem: alpha0 0.5, c 0.5, lambda 1e-3 with the count including the
    current visit (the paper's N_{t-1} makes the loss concave at first visits).
    """
    (err0, value0), (err, value), optimal = _exact_model_run(250)
    assert err < 0.6 * err0
    assert value >= optimal - 0.15
    assert value - value0 > 0.8


def test_sparse_and_dense_visit_tables_give_identical_agents(tmp_path):
    problem = make_problem("cartpole")
    results = {}
    for storage in ("dense", "sparse"):
        agent, streams = _agent(problem, seeds=(3, 4), visit_storage=storage)
        runner = Runner(problem, agent, streams, eval_every=5)
        table = [runner.episode(e) for e in range(1, 11)]
        results[storage] = (table, [np.array(f) for f in agent.q_.factors])
    assert isinstance(_agent(problem, visit_storage="dense")[0].visits_, DenseVisits)
    assert isinstance(_agent(problem, visit_storage="sparse")[0].visits_, SparseVisits)
    (dense_rows, dense_factors), (sparse_rows, sparse_factors) = results.values()
    for a, b in zip(dense_rows, sparse_rows, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    for x, y in zip(dense_factors, sparse_factors, strict=True):
        np.testing.assert_array_equal(x, y)


def test_highway_sized_agent_fits_in_memory():
    """20^9 states x 5 actions, rank 20: 200 steps with a synthetic observation stream."""
    problem = Problem(
        name="highway-synthetic", env_id="none", env_kwargs={}, state_dims=(20,) * 9,
        action_dims=(5,), reward_bound=1.0, encode=np.asarray, decode=np.asarray,
    )  # fmt: skip
    tracemalloc.start()
    agent, _ = _agent(
        problem, seeds=(0, 1, 2, 3), **reading("teql", "paper").agent_params("highway")
    )
    assert isinstance(agent.visits_, SparseVisits)
    rng = np.random.default_rng(0)
    states = rng.integers(20, size=(4, 9))
    active = np.ones(4, bool)
    for _ in range(200):
        actions = agent.act(states, active)
        next_states = np.clip(states + rng.integers(-1, 2, size=(4, 9)), 0, 19)
        agent.observe(_transition(agent, states, actions, rng.random(4), next_states))
        states = next_states
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 2**30
    assert agent.n_params == 20 * (20 * 9 + 5) == 3700
    assert agent.visits_.visited <= 800


def test_greedy_return_improves_on_cartpole(tmp_path):
    """The released reading, 3 seeds x 300 episodes (about 15 s).

    Measured mean greedy return: episodes 1-50: 5.5, episodes 261-300: 34.6
    (a random policy scores about -62 in both windows).
    """
    table = _train_cartpole(tmp_path, "teql-released", episodes=300)
    early, late = _greedy_window(table, 1, 50), _greedy_window(table, 261, 300)
    assert late - early > 20


def _train_cartpole(tmp_path, agent, episodes):
    from rl.runs.config import TrainConfig
    from rl.runs.training import train

    config = TrainConfig(
        env="cartpole", agent=agent, seeds=3, episodes=episodes, out=str(tmp_path / agent)
    )
    train(config)
    return read_metrics(tmp_path / agent / "metrics.csv")


def _greedy_window(table, first, last):
    keep = (table["episode"] >= first) & (table["episode"] <= last)
    values = table["greedy_return"][keep]
    return values[np.isfinite(values)].mean()


def test_bad_config_names_the_parameter():
    with pytest.raises(ValueError, match="'rank'"):
        TEQLConfig(rank=0)
    with pytest.raises(ValueError, match="'gamma'"):
        TEQLConfig(gamma=1.0)
    with pytest.raises(ValueError, match="'update'"):
        TEQLConfig(update="fast")
    with pytest.raises(ValueError, match="'max_inner'"):
        TEQLConfig(max_inner=0)
    with pytest.raises(ValueError, match="'alpha0'"):  # the stable step eta_0 lies in (0, 2)
        TEQLConfig(update="stable", alpha0=2.0)
    assert TEQLConfig(update="stable", alpha0=1.99).alpha0 == 1.99


def test_too_many_joint_actions_is_refused():
    problem = make_problem("inventory", env_kwargs={"n_locations": 2, "max_order": 2})
    with pytest.raises(ValueError, match="max_joint_actions"):
        _agent(problem, max_joint_actions=4)
    assert math.prod(problem.action_dims) == 9
    agent, _ = _agent(problem)
    actions = agent.act(np.zeros((1, len(problem.state_dims)), np.int64), np.ones(1, bool))
    assert actions.shape == (1, 2)
