import numpy as np

from rl.agents._explore import argmax_random_ties
from rl.agents.tensor.step import euge_scores


def test_euge_scores_by_hand():
    q = np.array([[1.0, 2.0, 0.5]])
    delta = np.array([[0.5, 0.0, 0.25]])
    counts = np.array([[3, 0, 1]])
    c = 2.0
    # N_total = 4: bonus_a = delta_a + sqrt(log 4 / (N_a + 1))
    expected = [
        1.0 + 2.0 * (0.5 + np.sqrt(np.log(4) / 4)),
        2.0 + 2.0 * (0.0 + np.sqrt(np.log(4) / 1)),
        0.5 + 2.0 * (0.25 + np.sqrt(np.log(4) / 2)),
    ]
    np.testing.assert_allclose(euge_scores(q, delta, counts, c)[0], expected, rtol=1e-15)


def test_unvisited_state_has_no_count_bonus():
    q = np.array([[0.3, -1.0]])
    delta = np.array([[0.0, 0.1]])
    counts = np.zeros((1, 2), dtype=np.int64)
    np.testing.assert_array_equal(euge_scores(q, delta, counts, 1.5)[0], [0.3, -1.0 + 0.15])


def test_ties_broken_by_each_replica_generator():
    scores = np.array([[1.0, 3.0, 3.0, 0.0], [1.0, 3.0, 3.0, 0.0], [5.0, 1.0, 1.0, 1.0]])
    active = np.array([True, True, True])
    picks = set()
    for seed in range(40):
        rngs = [
            np.random.default_rng(seed),
            np.random.default_rng(seed + 100),
            np.random.default_rng(0),
        ]
        choice = argmax_random_ties(scores, rngs, active)
        assert choice[0] in (1, 2) and choice[1] in (1, 2) and choice[2] == 0
        picks.add(int(choice[0]))
    assert picks == {1, 2}
    # the same generator state gives the same pick; the untied replica draws nothing
    rngs = [np.random.default_rng(7) for _ in range(3)]
    first = argmax_random_ties(scores, rngs, active)
    assert rngs[2].bit_generator.state == np.random.default_rng(7).bit_generator.state
    rngs = [np.random.default_rng(7) for _ in range(3)]
    np.testing.assert_array_equal(first, argmax_random_ties(scores, rngs, active))


def test_inactive_replicas_draw_nothing():
    scores = np.zeros((2, 3))
    rngs = [np.random.default_rng(1), np.random.default_rng(2)]
    before = [g.bit_generator.state for g in rngs]
    choice = argmax_random_ties(scores, rngs, np.array([False, False]))
    np.testing.assert_array_equal(choice, [0, 0])
    assert [g.bit_generator.state for g in rngs] == before


def test_the_count_bonus_takes_the_reward_unit():
    """u multiplies the count term only: EU = Q + c (Delta Q + u sqrt(log N_total / (N + 1)))."""
    q, delta, counts = np.array([[1.0, 2.0]]), np.array([[0.5, 0.0]]), np.array([[3, 0]])
    root = np.sqrt(np.log(3) / np.array([4.0, 1.0]))
    expected = q[0] + 2.0 * (delta[0] + 10.0 * root)
    np.testing.assert_allclose(euge_scores(q, delta, counts, 2.0, 10.0)[0], expected, rtol=1e-15)
