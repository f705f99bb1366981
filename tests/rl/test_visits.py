import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rl.agents.tensor.visits import DenseVisits, SparseVisits, make_visit_table
from tests.rl.visits_reference import DictVisits


def _random_ops(seed, replicas, n_states, n_actions, steps):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        states = rng.integers(n_states, size=replicas)
        actions = rng.integers(n_actions, size=replicas)
        active = rng.random(replicas) < 0.7
        values = rng.normal(size=replicas)
        yield states, actions, active, values


@given(
    seed=st.integers(0, 2**16),
    replicas=st.integers(1, 4),
    n_states=st.integers(1, 30),
    n_actions=st.integers(1, 6),
)
def test_sparse_equals_dense(seed, replicas, n_states, n_actions):
    dense = DenseVisits(replicas, n_states, n_actions)
    sparse = SparseVisits(replicas, n_states, n_actions, capacity=1)
    for states, actions, active, values in _random_ops(seed, replicas, n_states, n_actions, 40):
        for table in (dense, sparse):
            table.increment(states, actions, active)
            table.set_delta(states, actions, values, active)
        probe = np.random.default_rng(seed + 1).integers(n_states, size=replicas)
        d_rows, s_rows = dense.rows(probe), sparse.rows(probe)
        np.testing.assert_array_equal(d_rows.counts, s_rows.counts)
        np.testing.assert_array_equal(d_rows.delta, s_rows.delta)
        np.testing.assert_array_equal(d_rows.totals, s_rows.totals)
        np.testing.assert_array_equal(dense.counts(states, actions), sparse.counts(states, actions))


@given(
    seed=st.integers(0, 2**16),
    replicas=st.integers(1, 5),
    n_states=st.sampled_from([1, 7, 50, 10**6, 20**9]),
    n_actions=st.integers(1, 5),
    capacity=st.integers(1, 8),
)
def test_hash_table_equals_dict_reference_through_growth(
    seed, replicas, n_states, n_actions, capacity
):
    """Random visit sequences, starting from a tiny capacity so that the table rehashes."""
    rng = np.random.default_rng(seed)
    table = SparseVisits(replicas, n_states, n_actions, capacity=capacity)
    reference = DictVisits(replicas, n_states, n_actions)
    pool = rng.integers(n_states, size=40)  # revisits are common, as in an episode
    for _ in range(60):
        states = rng.choice(pool, size=replicas)
        actions = rng.integers(n_actions, size=replicas)
        active = rng.random(replicas) < 0.8
        values = rng.normal(size=replicas)
        if rng.random() < 0.5:
            table.increment(states, actions, active)
            reference.increment(states, actions, active)
        else:
            table.set_delta(states, actions, values, active)
            reference.set_delta(states, actions, values, active)
        probe = rng.choice(pool, size=replicas)
        counts, delta = reference.rows(probe)
        np.testing.assert_array_equal(table.rows(probe).counts, counts)
        np.testing.assert_array_equal(table.rows(probe).delta, delta)
        expected = counts[np.arange(replicas), actions]
        np.testing.assert_array_equal(table.counts(probe, actions), expected)
    assert table.visited == reference.visited()
    assert len(table._keys) >= 2 * table.visited  # load factor <= 1/2
    copy = SparseVisits(replicas, n_states, n_actions)
    copy.load_state_dict(table.state_dict())
    for key, saved in table.state_dict().items():
        np.testing.assert_array_equal(copy.state_dict()[key], saved)
    probe = pool[: replicas * (len(pool) // replicas)].reshape(-1, replicas)
    for states in probe:
        np.testing.assert_array_equal(copy.rows(states).counts, table.rows(states).counts)
        np.testing.assert_array_equal(copy.rows(states).delta, table.rows(states).delta)


def test_state_dict_holds_only_arrays_and_loads_the_dict_layout():
    table = SparseVisits(replicas=2, n_states=10, n_actions=2)
    table.increment(np.array([3, 4]), np.array([1, 0]), np.array([True, True]))
    table.increment(np.array([5, 4]), np.array([0, 0]), np.array([True, True]))
    state = table.state_dict()
    assert all(isinstance(v, np.ndarray) for v in state.values())
    np.testing.assert_array_equal(state["keys"], [3, 14, 5])  # order of first visit
    legacy = {  # the dict-based table's layout: key -> row, rows in any order
        "keys": state["keys"][::-1].copy(),
        "rows": np.array([2, 1, 0]),
        "counts": state["counts"],
        "delta": state["delta"],
    }
    copy = SparseVisits(replicas=2, n_states=10, n_actions=2)
    copy.load_state_dict(legacy)
    np.testing.assert_array_equal(copy.rows(np.array([5, 4])).counts, [[1, 0], [2, 0]])


def test_highway_grid_at_100_replicas_stays_small():
    """20^9 states x 5 actions, B = 100: 10,000 steps of fresh states take a few MB."""
    table = make_visit_table(replicas=100, n_states=20**9, n_actions=5)
    rng = np.random.default_rng(1)
    on = np.ones(100, bool)
    for _ in range(100):
        states = rng.integers(20**9, size=100)
        table.increment(states, rng.integers(5, size=100), on)
        table.set_delta(states, rng.integers(5, size=100), rng.normal(size=100), on)
    assert table.visited == 10_000
    assert table.nbytes < 5 * 2**20


def test_counts_and_totals_by_hand():
    table = DenseVisits(replicas=2, n_states=3, n_actions=2)
    on = np.array([True, True])
    table.increment(np.array([0, 2]), np.array([1, 0]), on)
    table.increment(np.array([0, 2]), np.array([1, 1]), np.array([True, False]))
    rows = table.rows(np.array([0, 2]))
    np.testing.assert_array_equal(rows.counts, [[0, 2], [1, 0]])
    np.testing.assert_array_equal(rows.totals, [2, 1])


def test_inactive_replicas_untouched():
    table = SparseVisits(replicas=2, n_states=5, n_actions=3)
    table.increment(np.array([1, 1]), np.array([2, 2]), np.array([False, True]))
    table.set_delta(
        np.array([1, 1]), np.array([2, 2]), np.array([5.0, 7.0]), np.array([False, True])
    )
    rows = table.rows(np.array([1, 1]))
    np.testing.assert_array_equal(rows.counts, [[0, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(rows.delta, [[0, 0, 0], [0, 0, 7.0]])
    assert table.visited == 1


def test_sparse_memory_grows_with_visited_states_only():
    highway_states = 20**9
    table = make_visit_table(replicas=4, n_states=highway_states, n_actions=5)
    assert isinstance(table, SparseVisits)
    rng = np.random.default_rng(0)
    for _ in range(200):
        states = rng.integers(highway_states, size=4)
        table.increment(states, rng.integers(5, size=4), np.ones(4, bool))
    assert table.visited == 800
    assert table.nbytes < 2048 * 5 * 16


def test_sparse_state_dict_round_trip():
    table = SparseVisits(replicas=2, n_states=50, n_actions=3)
    for states, actions, active, values in _random_ops(3, 2, 50, 3, 30):
        table.increment(states, actions, active)
        table.set_delta(states, actions, values, active)
    copy = SparseVisits(replicas=2, n_states=50, n_actions=3)
    copy.load_state_dict(table.state_dict())
    probe = np.arange(50)
    for replica_states in (probe[:2], probe[10:12], probe[40:42]):
        np.testing.assert_array_equal(
            copy.rows(replica_states).counts, table.rows(replica_states).counts
        )
        np.testing.assert_array_equal(
            copy.rows(replica_states).delta, table.rows(replica_states).delta
        )


def test_auto_storage_choice_and_bad_storage():
    assert isinstance(make_visit_table(2, 100, 10), DenseVisits)
    assert isinstance(make_visit_table(2, 100, 10, storage="sparse"), SparseVisits)
    with pytest.raises(ValueError, match="'storage'"):
        make_visit_table(2, 100, 10, storage="compressed")


def _saved_rows(keys, n_actions=2):
    keys = np.asarray(keys, dtype=np.int64)
    return {
        "keys": keys,
        "counts": np.ones((len(keys), n_actions), dtype=np.int64),
        "delta": np.zeros((len(keys), n_actions)),
    }


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (_saved_rows([3, 14, 3]), "visits/keys holds the same"),
        (_saved_rows([3, 20]), r"visits/keys must lie in \[0, 19\]"),
        (_saved_rows([-1]), r"visits/keys must lie in \[0, 19\]"),
        ({**_saved_rows([3]), "counts": -np.ones((1, 2), dtype=np.int64)}, "visits/counts"),
        ({**_saved_rows([3]), "delta": np.full((1, 2), np.nan)}, "visits/delta holds NaN"),
        ({**_saved_rows([3, 4]), "delta": np.zeros((1, 2))}, r"visits/delta must be .*\(2, 2\)"),
        ({**_saved_rows([3]), "keys": np.array([3.0])}, "visits/keys must be a 1-d integer"),
        ({**_saved_rows([3, 4]), "rows": np.array([0, 0])}, "visits/rows must be a permutation"),
    ],
)
def test_sparse_table_refuses_a_bad_saved_state_and_stays_unchanged(state, message):
    table = SparseVisits(replicas=2, n_states=10, n_actions=2)
    table.increment(np.array([3, 4]), np.array([1, 0]), np.array([True, True]))
    before = table.state_dict()
    with pytest.raises(ValueError, match=message):
        table.load_state_dict(state)
    for key, saved in before.items():
        np.testing.assert_array_equal(table.state_dict()[key], saved)


def test_many_duplicate_keys_are_refused_at_once():
    """200,000 copies of one key: the quadratic rebuild took minutes; sorting finds them at once."""
    table = SparseVisits(replicas=1, n_states=10, n_actions=2)
    start = time.perf_counter()
    with pytest.raises(ValueError, match="the same"):
        table.load_state_dict(_saved_rows(np.zeros(200_000)))
    assert time.perf_counter() - start < 2.0
    assert table.visited == 0


def test_dense_table_refuses_negative_counts():
    table = DenseVisits(replicas=2, n_states=3, n_actions=2)
    state = table.state_dict()
    state["counts"][0, 0, 0] = -1
    with pytest.raises(ValueError, match=r"visits/counts must lie in \[0, None\]"):
        table.load_state_dict(state)
