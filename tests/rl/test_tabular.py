import dataclasses

import numpy as np
import pytest

from rl.agents.base import Transitions
from rl.agents.readings import reading
from rl.agents.tables.tabular import TabularQ, TabularQConfig
from rl.problems import Problem
from rl.seeding import replica_streams

# A 5-state chain. Action 1 moves right, action 0 left (state 0 stays put).
# Moving right from state 3 into state 4 pays 1 and terminates; taking action 0
# in state 0 pays a distracting 0.05 forever. With gamma = 0.9 the optimal
# policy walks right: V*(0) = 0.9^3 = 0.729 > 0.05 / (1 - 0.9) = 0.5.
N_STATES, GAMMA, HORIZON = 5, 0.9, 20


def chain_step(s, a):
    s_next = np.where(a == 1, s + 1, np.maximum(s - 1, 0))
    reward = np.where((a == 1) & (s_next == 4), 1.0, np.where((a == 0) & (s == 0), 0.05, 0.0))
    return s_next, reward, s_next == 4


def chain_model():
    p = np.zeros((N_STATES, 2, N_STATES))
    r = np.zeros((N_STATES, 2))
    for s in range(N_STATES - 1):
        for a in range(2):
            s_next, reward, _ = chain_step(np.array(s), np.array(a))
            p[s, a, s_next] = 1.0
            r[s, a] = reward
    return p, r  # state 4 is absorbing with zero value (no outgoing mass)


def policy_value(policy_probs):
    p, r = chain_model()
    p_pi = np.einsum("sa,sat->st", policy_probs, p)
    r_pi = np.sum(policy_probs * r, axis=1)
    return np.linalg.solve(np.eye(N_STATES) - GAMMA * p_pi, r_pi)


def optimal_q():
    p, r = chain_model()
    q = np.zeros((N_STATES, 2))
    for _ in range(500):
        q = r + GAMMA * p @ q.max(axis=1)
    return q


def chain_problem():
    return Problem("chain", "none", {}, (N_STATES,), (2,), 1.0, lambda x: x, lambda x: x)


def run_chain(agent, episodes, seed=0):
    env = np.random.default_rng(seed)
    b = agent.replicas
    for _ in range(episodes):
        s = env.integers(0, N_STATES - 1, size=b)  # exploring starts
        running = np.ones(b, dtype=bool)
        for _ in range(HORIZON):
            a = agent.act(s[:, None], running)[:, 0]
            s_next, r, term = chain_step(s, a)
            agent.observe(Transitions(s[:, None], a[:, None], r, s_next[:, None], term, running))
            running = running & ~term
            s = np.where(running, s_next, s)
            if not running.any():
                break
        agent.end_episode(np.ones(b, dtype=bool))


def make_agent(seeds=(0,), **overrides):
    config = TabularQConfig(gamma=GAMMA, step_size=0.5, epsilon_decay=0.995, **overrides)
    return TabularQ(chain_problem(), config, [replica_streams(s).agent for s in seeds])


def test_learns_the_optimal_policy_on_a_chain():
    agent = make_agent()
    run_chain(agent, episodes=60)
    states = np.arange(N_STATES - 1)[:, None]
    greedy = np.array([agent.greedy(s[None])[0, 0] for s in states])
    values = policy_value(np.eye(2)[np.r_[greedy, 0]])
    random_values = policy_value(np.full((N_STATES, 2), 0.5))
    optimal = optimal_q().max(axis=1)
    # Optimal V*(0) = 0.729; a uniformly random policy gets 0.365 from state 0.
    assert optimal[0] == pytest.approx(0.729)
    assert random_values[0] == pytest.approx(0.3646, abs=1e-4)
    assert values[0] - random_values[0] > 0.36
    np.testing.assert_allclose(values[:4], optimal[:4], atol=1e-12)
    np.testing.assert_allclose(agent.q_table_[0, :4].max(axis=1), optimal[:4], atol=0.05)


def test_inverse_visit_step_size_learns_too():
    agent = make_agent(step_size_rule="inverse_visits")
    run_chain(agent, episodes=80)
    np.testing.assert_array_equal(agent.q_table_[0, :4].argmax(axis=1), [1, 1, 1, 1])


def test_refuses_a_table_that_does_not_fit():
    problem = Problem("big", "none", {}, (20,) * 9, (5,), 1.0, lambda x: x, lambda x: x)
    with pytest.raises(ValueError, match=r"\|S\| \* \|A\| = 512000000000 \* 5"):
        TabularQ(problem, TabularQConfig(), [replica_streams(0).agent])
    with pytest.raises(ValueError, match="max_entries = 9"):
        TabularQ(chain_problem(), TabularQConfig(max_entries=9), [replica_streams(0).agent])


def test_ties_are_broken_by_the_explore_stream_and_greedy_takes_the_first():
    agent = make_agent(epsilon_start=0.0, epsilon_min=0.0)
    states = np.zeros((1, 1), dtype=np.int64)
    chosen = {int(agent.act(states, np.array([True]))[0, 0]) for _ in range(40)}
    assert chosen == {0, 1}
    assert {int(agent.greedy(states)[0, 0]) for _ in range(5)} == {0}


def test_inactive_replica_is_untouched():
    agent = make_agent(seeds=(3, 4))
    before = agent.state_dict()
    s = np.array([[1], [2]])
    mask = np.array([True, False])
    agent.act(s, mask)
    agent.observe(Transitions(s, np.array([[1], [1]]), np.ones(2), s + 1, np.zeros(2, bool), mask))
    after = agent.state_dict()
    np.testing.assert_array_equal(after["q_table"][1], before["q_table"][1])
    assert after["explore_rng"][1] == before["explore_rng"][1]
    assert after["epsilon"][1] == before["epsilon"][1]
    assert after["q_table"][0, 1, 1] != before["q_table"][0, 1, 1]


def test_two_replicas_give_the_same_numbers_as_each_run_alone():
    seeds = (11, 12)
    pair = make_agent(seeds=seeds)
    singles = [make_agent(seeds=(s,)) for s in seeds]
    env = np.random.default_rng(5)
    s = env.integers(0, 4, size=2)
    for _ in range(200):
        active = env.random(2) < 0.7
        a = pair.act(s[:, None], active)[:, 0]
        for b, single in enumerate(singles):
            if active[b]:
                assert single.act(s[b : b + 1, None], np.array([True]))[0, 0] == a[b]
        s_next, r, term = chain_step(s, a)
        batch = Transitions(s[:, None], a[:, None], r, s_next[:, None], term, active)
        pair.observe(batch)
        for b, single in enumerate(singles):
            single.observe(Transitions(*(np.asarray(x)[b : b + 1] for x in batch)))
        s = np.where(active & ~term, s_next, np.where(term & active, 0, s))
    for b, single in enumerate(singles):
        np.testing.assert_array_equal(pair.q_table_[b], single.q_table_[0])


def test_same_streams_same_actions_and_state_dict_round_trip():
    first, second = make_agent(seeds=(9,)), make_agent(seeds=(9,))
    run_chain(first, 5, seed=1)
    run_chain(second, 5, seed=1)
    np.testing.assert_array_equal(first.q_table_, second.q_table_)
    saved = first.state_dict()
    states = np.array([[0]])
    expected = [first.act(states, np.array([True]))[0, 0] for _ in range(30)]
    restored = make_agent(seeds=(123,))
    restored.load_state_dict(saved)
    got = [restored.act(states, np.array([True]))[0, 0] for _ in range(30)]
    assert got == expected


def test_n_params_and_q_tensor_shape():
    problem = Problem("grid", "none", {}, (3, 4), (2, 5), 1.0, lambda x: x, lambda x: x)
    agent = TabularQ(problem, TabularQConfig(), [replica_streams(0).agent] * 1)
    assert agent.n_params == 12 * 10
    assert agent.q_tensor().shape == (1, 3, 4, 2, 5)
    actions = agent.act(np.array([[2, 3]]), np.array([True]))
    assert actions.shape == (1, 2) and 0 <= actions[0, 0] < 2 and 0 <= actions[0, 1] < 5


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gamma", 1.0),
        ("step_size", 0.0),
        ("step_size_rule", "harmonic"),
        ("epsilon_start", 1.5),
        ("epsilon_decay", 0.0),
        ("epsilon_min", -0.1),
        ("max_entries", 0),
    ],
)
def test_bad_config_values_name_the_field(field, value):
    with pytest.raises(ValueError, match=f"'{field}' parameter"):
        TabularQConfig(**{field: value})


def test_config_is_frozen_and_preset_is_empty():
    with pytest.raises(dataclasses.FrozenInstanceError):
        TabularQConfig().gamma = 0.5  # type: ignore[misc]
    for name in ("cartpole", "pendulum", "highway"):
        assert reading("tabular", "paper").agent_params(name) == {}
