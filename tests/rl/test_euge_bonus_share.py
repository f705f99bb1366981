"""EUGE's bonus share (the TensorBoard diagnostic) against a hand computation on a tiny problem."""

import math

import numpy as np
import pytest

from rl.agents.tensor._euge_compiled import euge_bonus_share
from rl.agents.tensor.step import bonus_share
from rl.agents.tensor.teql import TEQLAgent, TEQLConfig
from rl.problems import Problem
from rl.runs.tensorboard import agent_diagnostics, watch_diagnostics
from rl.seeding import spawn_replicas

TINY = Problem(
    name="tiny", env_id="none", env_kwargs={}, state_dims=(2,), action_dims=(3,),
    reward_bound=1.0, encode=None, decode=None,
)  # fmt: skip
Q_STATE_0 = np.array([1.0, 2.0, 0.5])
"""Q(0, a) of both replicas (rank 1: the state row is 1)."""


def test_share_of_a_score_is_its_bonus_over_the_magnitudes():
    values, scores = np.array([1.0, -1.0, 0.0, 2.0]), np.array([3.0, 0.5, 0.0, 2.0])
    expected = [2.0 / 3.0, 1.5 / 2.5, 0.0, 0.0]
    np.testing.assert_allclose(bonus_share(values, scores), expected, rtol=1e-15)
    compiled = [euge_bonus_share(v, s) for v, s in zip(values, scores, strict=True)]
    np.testing.assert_allclose(compiled, expected, rtol=1e-15)


def _tiny_teql(engine):
    config = TEQLConfig(rank=1, c=1.0, epsilon_start=0.0, bonus_unit=1.0, engine=engine)
    agent = TEQLAgent(TINY, config, [s.agent for s in spawn_replicas([0, 1])])
    state_factor, action_factor = agent.q_.factors
    state_factor[...] = 1.0
    action_factor[:, :, 0] = Q_STATE_0
    # Flat state 0 of each replica: N = (1, 0, 0), Delta Q(0, 0) = 2; N = (2, 1, 0).
    everyone, visits = np.ones(2, dtype=bool), agent.visits_
    visits.increment(np.array([0, 0]), np.array([0, 0]), everyone)
    visits.increment(np.array([0, 0]), np.array([0, 1]), np.array([False, True]))
    visits.increment(np.array([0, 0]), np.array([0, 0]), np.array([False, True]))
    visits.set_delta(np.array([0, 0]), np.array([0, 0]), np.array([2.0, 0.0]), everyone)
    # The engine takes the edited host copies as a checkpoint's (the array engines copy them).
    agent.engine_.reload([np.array(factor) for factor in agent.q_.factors])
    return agent


@pytest.mark.parametrize("engine", ["compiled", "reference", "array"])
def test_bonus_share_of_the_chosen_euge_actions_equals_the_hand_computation(engine):
    agent = _tiny_teql(engine)
    watch_diagnostics(agent)
    states = np.zeros((2, 1), dtype=np.int64)
    # Replica 0: log N_total = log 1 = 0, EU = (1 + 2, 2, 0.5): action 0, bonus 2, share 2/3.
    # Replica 1: EU = Q + sqrt(log 3 / (N + 1)) with N = (2, 1, 0): action 1, bonus sqrt(log 3 / 2).
    bonus_1 = math.sqrt(math.log(3.0) / 2.0)
    first = agent.act(states, np.ones(2, dtype=bool))
    np.testing.assert_array_equal(first[:, 0], [0, 1])
    agent.act(states, np.array([True, False]))  # replica 1 inactive: no share added
    agent.greedy(states)  # greedy actions do not explore: no share added
    shares = agent_diagnostics(agent)["euge_bonus_share"]
    np.testing.assert_allclose(shares, [2.0 / 3.0, bonus_1 / (2.0 + bonus_1)], rtol=1e-12)
    again = agent_diagnostics(agent)["euge_bonus_share"]  # nothing since the last reading
    assert np.isnan(again).all()


def test_untracked_agent_has_no_bonus_share_and_its_step_adds_none():
    agent = _tiny_teql("compiled")
    agent.act(np.zeros((2, 1), dtype=np.int64), np.ones(2, dtype=bool))
    np.testing.assert_array_equal(agent.engine_.bonus_shares.sums, [[0, 0], [0, 0]])
    assert agent.engine_.settings()[0].bonus_share is False
