import dataclasses

import numpy as np
import pytest

from rl.agents.base import Transitions
from rl.agents.readings import reading
from rl.agents.tables.lora_vi import LoRaVIAgent, LoRaVIConfig
from rl.problems import Problem
from rl.seeding import replica_streams

# A small exact-model problem with a low-rank Q*: two state modes (3 x 4 = 12
# states), two action modes (2 x 3 = 6 joint actions), reward r(s, a) = u_s v_a
# and next state uniform whatever the action. Then Q* = r + gamma * const has
# rank 2, the optimal policy maximises u_s v_a, and its mean reward per step is
# 0.501 while a uniformly random policy gets 0.004.
STATE_DIMS, ACTION_DIMS = (3, 4), (2, 3)
N_S, N_A = 12, 6


def reward_matrix():
    rng = np.random.default_rng(0)
    return np.outer(rng.uniform(-1, 1, N_S), rng.uniform(-1, 1, N_A))


def problem(state_dims=STATE_DIMS, action_dims=ACTION_DIMS):
    return Problem("lowrank", "none", {}, state_dims, action_dims, 1.0, lambda x: x, lambda x: x)


def config(**overrides):
    base = dict(
        anchors=3, rank=2, gamma=0.5, step_size=0.2, epsilon_decay=0.999,
        improve_every=1, warmup_episodes=5,
    )  # fmt: skip
    base.update(overrides)
    return LoRaVIConfig(**base)


def state_vectors(flat):
    return np.stack(np.unravel_index(flat, STATE_DIMS), axis=1)


def drive(agent, episodes, horizon=20, seed=0):
    r = reward_matrix()
    env = np.random.default_rng(seed)
    b = agent.replicas
    everyone = np.ones(b, dtype=bool)
    for _ in range(episodes):
        s = env.integers(N_S, size=b)
        for _ in range(horizon):
            a = agent.act(state_vectors(s), everyone)
            reward = r[s, np.ravel_multi_index(tuple(a.T), ACTION_DIMS)]
            s_next = env.integers(N_S, size=b)
            batch = Transitions(
                state_vectors(s), a, reward, state_vectors(s_next), np.zeros(b, bool), everyone
            )
            agent.observe(batch)
            s = s_next
        agent.end_episode(everyone)


def greedy_mean_reward(agent):
    """Mean reward per step of each replica's greedy policy, shape (B,)."""
    r = reward_matrix()
    b = agent.replicas
    means = np.zeros(b)
    for s in range(N_S):
        actions = agent.greedy(state_vectors(np.full(b, s)))
        means += r[s, np.ravel_multi_index(tuple(actions.T), ACTION_DIMS)] / N_S
    return means


def test_learns_on_a_low_rank_problem():
    r = reward_matrix()
    optimal, random = r.max(axis=1).mean(), r.mean()
    assert optimal == pytest.approx(0.501, abs=1e-3) and abs(random) < 0.01
    agent = LoRaVIAgent(problem(), config(), [replica_streams(s).agent for s in range(4)])
    assert agent.n_params == 3 * (12 + 6 - 3)  # 45 < 72 table entries
    drive(agent, episodes=60)
    # 1,200 steps per replica (seeds 0-3): each greedy policy gets over half of the
    # optimal gain over random, and on average over 80% of it.
    gain = (greedy_mean_reward(agent) - random) / (optimal - random)
    assert np.all(gain > 0.5) and gain.mean() > 0.8


def test_skeleton_overlap_stays_shared_and_anchors_move_after_warmup():
    agent = LoRaVIAgent(problem(), config(), [replica_streams(2).agent])
    initial = agent.row_anchors_.copy(), agent.col_anchors_.copy()
    drive(agent, episodes=8)
    rows, cols = agent.row_anchors_[0], agent.col_anchors_[0]
    np.testing.assert_array_equal(agent.cols_[0][rows], agent.rows_[0][:, cols])
    assert agent.episodes_[0] == 8
    moved = not (
        np.array_equal(initial[0], agent.row_anchors_)
        and np.array_equal(initial[1], agent.col_anchors_)
    )
    assert moved


def test_reproduces_an_exact_low_rank_q_when_the_skeleton_is_exact():
    # With exact skeleton values of a rank-2 matrix, the completion is exact.
    agent = LoRaVIAgent(problem(), config(clip_values=False), [replica_streams(3).agent])
    q = reward_matrix() + 0.3
    rows, cols = agent.row_anchors_[0], agent.col_anchors_[0]
    assert np.linalg.matrix_rank(q[np.ix_(rows, cols)]) == 2  # seed 3's anchors: a full core
    agent.rows_[0], agent.cols_[0] = q[rows, :], q[:, cols]
    agent._complete(0)
    np.testing.assert_allclose(agent.q_hat_[0], q, atol=1e-8)


def test_observe_touches_only_skeleton_entries_and_inactive_replicas_are_untouched():
    agent = LoRaVIAgent(problem(), config(), [replica_streams(s).agent for s in (4, 5)])
    before = agent.state_dict()
    row = agent.row_anchors_[0, 0]
    s = state_vectors(np.array([row, row]))
    a = np.zeros((2, 2), dtype=np.int64)
    active = np.array([True, False])
    agent.act(s, active)
    agent.observe(Transitions(s, a, np.ones(2), s, np.zeros(2, bool), active))
    agent.end_episode(active)
    after = agent.state_dict()
    for key in ("rows", "cols", "q_hat", "visits", "epsilon", "episodes"):
        np.testing.assert_array_equal(after[key][1], before[key][1])
    assert after["explore_rng"][1] == before["explore_rng"][1]
    assert after["init_rng"][1] == before["init_rng"][1]
    assert after["rows"][0, 0, 0] == pytest.approx(0.2)


def test_two_replicas_give_the_same_numbers_as_each_run_alone():
    seeds = (6, 7)
    pair = LoRaVIAgent(problem(), config(), [replica_streams(s).agent for s in seeds])
    singles = [LoRaVIAgent(problem(), config(), [replica_streams(s).agent]) for s in seeds]
    r = reward_matrix()
    env = np.random.default_rng(8)
    s = env.integers(N_S, size=2)
    for step in range(400):
        active = env.random(2) < 0.7
        a = pair.act(state_vectors(s), active)
        s_next = env.integers(N_S, size=2)
        reward = r[s, np.ravel_multi_index(tuple(a.T), ACTION_DIMS)]
        batch = Transitions(
            state_vectors(s), a, reward, state_vectors(s_next), np.zeros(2, bool), active
        )
        pair.observe(batch)
        for b, single in enumerate(singles):
            if active[b]:
                np.testing.assert_array_equal(
                    single.act(state_vectors(s[b : b + 1]), np.array([True]))[0], a[b]
                )
                single.observe(Transitions(*(np.asarray(x)[b : b + 1] for x in batch)))
        if step % 20 == 19:
            pair.end_episode(active)
            for b, single in enumerate(singles):
                if active[b]:
                    single.end_episode(np.array([True]))
        s = s_next
    for b, single in enumerate(singles):
        np.testing.assert_array_equal(pair.q_hat_[b], single.q_hat_[0])
        np.testing.assert_array_equal(pair.row_anchors_[b], single.row_anchors_[0])


def test_same_streams_same_actions_and_state_dict_round_trip():
    first = LoRaVIAgent(problem(), config(anchor_rule="sample"), [replica_streams(9).agent])
    second = LoRaVIAgent(problem(), config(anchor_rule="sample"), [replica_streams(9).agent])
    drive(first, 7, seed=1)
    drive(second, 7, seed=1)
    np.testing.assert_array_equal(first.q_hat_, second.q_hat_)
    saved = first.state_dict()
    restored = LoRaVIAgent(problem(), config(anchor_rule="sample"), [replica_streams(99).agent])
    restored.load_state_dict(saved)
    drive(first, 3, seed=2)
    drive(restored, 3, seed=2)
    np.testing.assert_array_equal(first.q_hat_, restored.q_hat_)
    states = state_vectors(np.arange(N_S))[:1]
    expected = [first.act(states, np.array([True])) for _ in range(20)]
    got = [restored.act(states, np.array([True])) for _ in range(20)]
    np.testing.assert_array_equal(got, expected)


def test_different_seeds_choose_different_anchors():
    anchors = {
        tuple(LoRaVIAgent(problem(), config(), [replica_streams(s).agent]).row_anchors_[0])
        for s in range(6)
    }
    assert len(anchors) > 1


@pytest.mark.parametrize(
    ("state_dims", "action_dims", "anchors", "expected"),
    [((3, 3, 3, 3), (10,), 9, 738), ((7, 7), (10,), 10, 490), ((3, 4), (2, 3), 3, 45)],
)
def test_n_params(state_dims, action_dims, anchors, expected):
    agent = LoRaVIAgent(
        problem(state_dims, action_dims), LoRaVIConfig(anchors=anchors), [replica_streams(0).agent]
    )
    assert agent.n_params == expected


def test_refuses_highway_and_oversized_anchors():
    highway = problem((20,) * 9, (5,))
    with pytest.raises(ValueError, match="max_states"):
        LoRaVIAgent(highway, LoRaVIConfig(anchors=5), [replica_streams(0).agent])
    with pytest.raises(ValueError, match=r"'anchors' parameter must be an int in \[1, 6\]"):
        LoRaVIAgent(problem(), LoRaVIConfig(anchors=7), [replica_streams(0).agent])


def test_presets_carry_the_papers_grids():
    assert reading("lora-vi", "paper").agent_params("cartpole") == {"anchors": 9}
    assert reading("lora-vi", "paper").agent_params("pendulum") == {"anchors": 10}
    assert reading("lora-vi", "paper").agent_params("highway") == {}
    assert reading("lora-vi", "paper").problem_options("cartpole") == {"state_bins": (3, 3, 3, 3)}
    assert reading("lora-vi", "paper").problem_options("pendulum") == {"state_bins": (7, 7)}
    assert reading("lora-vi", "paper").problem_options("highway") == {}
    for name, n_params in (("cartpole", 738), ("pendulum", 490)):
        grid = problem(reading("lora-vi", "paper").problem_options(name)["state_bins"], (10,))
        agent = LoRaVIAgent(
            grid,
            LoRaVIConfig(**reading("lora-vi", "paper").agent_params(name)),
            [replica_streams(0).agent],
        )
        assert agent.n_params == n_params


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("anchors", 0),
        ("rank", 4),
        ("gamma", 1.0),
        ("step_size", 1.5),
        ("epsilon_decay", 2.0),
        ("improve_every", 0),
        ("warmup_episodes", -1),
        ("anchor_rule", "best"),
        ("rcond", -1.0),
        ("clip_values", 1),
        ("max_states", 0),
    ],
)
def test_bad_config_values_name_the_field(field, value):
    with pytest.raises(ValueError, match=f"'{field}' parameter"):
        LoRaVIConfig(**{"anchors": 3, field: value})


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        LoRaVIConfig().rank = 2  # type: ignore[misc]
