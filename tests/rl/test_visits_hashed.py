"""The hashed device visit table (rl.agents.tensor._visits_array) against the host tables."""

import importlib.util

import numpy as np
import pytest

from rl.agents.tensor import _visits_array as visits_ops
from rl.agents.tensor.visits import SparseVisits
from tensorq._backend import array_namespace

NO_JAX = pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
NO_TORCH = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="PyTorch is not installed"
)
BACKENDS = ["numpy", pytest.param("jax", marks=NO_JAX)]
HIGHWAY_STATES = 20**9
"""Highway's grid: 9 modes of 20 bins."""


def _visit_sequence(replicas, steps, seed):
    """States drawn from a few hundred per replica on Highway's grid, actions, errors, masks."""
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, HIGHWAY_STATES, size=(replicas, 300))
    states = np.take_along_axis(pool, rng.integers(0, 300, size=(steps, replicas)).T, 1).T
    actions = rng.integers(0, 5, size=(steps, replicas))
    values = rng.normal(size=(steps, replicas))
    active = rng.random((steps, replicas)) < 0.8
    return states, actions, values, active


def _step(space, table, ids, states, actions, values, active):
    """One TEQL step's visit-table work: insert, read the counts, set Delta Q, count."""
    table, rows, full = visits_ops.hashed_insert(space, table, ids, states, active)
    counts, delta = visits_ops.state_rows(space, table, rows)
    table = visits_ops.set_delta(space, table, rows, actions, values, active)
    table = visits_ops.increment(space, table, rows, actions, active)
    return table, counts, delta, full


@pytest.mark.parametrize("backend", BACKENDS)
def test_hashed_table_counts_like_the_host_table(backend):
    """400 steps of 3 replicas on Highway's grid: each step's rows and the final table agree."""
    space = array_namespace(backend)
    replicas, steps, capacity = 3, 400, 512
    host = SparseVisits(replicas, HIGHWAY_STATES, 5, compiled=False)
    table = visits_ops.empty_hashed(space, replicas, capacity, 5)
    ids = space.put(np.arange(replicas), space.ops.int64)
    step = space.compile(lambda t, *arrays: _step(space, t, ids, *arrays))
    for s, a, v, m in zip(*_visit_sequence(replicas, steps, seed=4), strict=True):
        before = host.rows(s)
        host.set_delta(s, a, v, m)
        host.increment(s, a, m)
        table, counts, delta, full = step(table, *(space.put(x) for x in (s, a, v, m)))
        np.testing.assert_array_equal(space.host(counts), before.counts)
        np.testing.assert_array_equal(space.host(delta), before.delta)
        assert not space.host(full).any()
    saved = host.state_dict()
    replica, state = np.divmod(saved["keys"], HIGHWAY_STATES)
    rows = space.host(visits_ops.hashed_rows(space, table, space.put(replica), space.put(state)))
    np.testing.assert_array_equal(space.host(table.counts)[rows], saved["counts"])
    np.testing.assert_array_equal(space.host(table.delta)[rows], saved["delta"])
    assert space.host(table.used).sum() == len(saved["keys"])
    unseen = space.host(visits_ops.hashed_rows(space, table, ids, space.put(np.array([5, 6, 7]))))
    np.testing.assert_array_equal(unseen, -1)


def test_a_full_table_says_so_and_changes_nothing():
    """Capacity 4: the fifth state of replica 0 is refused, replica 1 still inserts."""
    space = array_namespace("numpy")
    table = visits_ops.empty_hashed(space, 2, 4, 2)
    ids = np.arange(2)
    for state in range(4):
        table, _, full = visits_ops.hashed_insert(
            space, table, ids, np.array([state, 10 + state]), ids < 2
        )
        assert not full.any()
    keys = table.keys.copy()
    table, rows, full = visits_ops.hashed_insert(space, table, ids, np.array([99, 10]), ids < 2)
    np.testing.assert_array_equal(full, [True, False])
    np.testing.assert_array_equal(table.keys[0], keys[0])
    assert rows[0] == -1 and rows[1] > 0
    assert visits_ops.hashed_load_factor(space, table) == 1.0
    with pytest.raises(ValueError, match="power of two"):
        visits_ops.empty_hashed(space, 2, 6, 2)


@pytest.mark.parametrize("backend", ["numpy", pytest.param("pytorch", marks=NO_TORCH)])
def test_device_table_doubles_and_saves_the_host_table(backend):
    """From 8 slots, through doublings and a restore midway: rows kept, the host's sparse table."""
    space = array_namespace(backend)
    replicas, n_actions, steps = 3, 5, 1200
    device = visits_ops.HashedDeviceVisits(space, replicas, HIGHWAY_STATES, n_actions, "cpu", 8)
    host = SparseVisits(replicas, HIGHWAY_STATES, n_actions, capacity=1)
    rng = np.random.default_rng(0)
    pool = rng.integers(0, HIGHWAY_STATES, size=(replicas, 900))
    ids = space.put(np.arange(replicas))
    for step in range(steps):
        if step == steps // 2:  # as a resumed run: rebuilt from the host table
            assert device.table.keys.shape[1] >= 512  # 8 slots doubled at least six times
            device = visits_ops.HashedDeviceVisits(
                space, replicas, HIGHWAY_STATES, n_actions, "cpu", 8
            )
            device.restore(host)
        states = pool[np.arange(replicas), rng.integers(0, 900, size=replicas)]
        actions, values = rng.integers(0, n_actions, size=replicas), rng.normal(size=replicas)
        active = rng.random(replicas) < 0.8
        s, a, on = space.put(states), space.put(actions), space.put(active)
        table = device.reserve()
        before = space.host(visits_ops.visit_rows(space, table, ids, s))
        table, rows = visits_ops.insert(
            space, table, ids, s, visits_ops.visit_rows(space, table, ids, s), on, HIGHWAY_STATES
        )
        found = space.host(rows)
        np.testing.assert_array_equal(found[before >= 0], before[before >= 0])
        assert np.all(found[active] > 0)
        counts, _ = visits_ops.state_rows(space, table, rows)
        np.testing.assert_array_equal(space.host(counts)[active], host.rows(states).counts[active])
        table = visits_ops.set_delta(space, table, rows, a, space.put(values), on)
        device.table = visits_ops.increment(space, table, rows, a, on)
        host.set_delta(states, actions, values, active)
        host.increment(states, actions, active)
        assert visits_ops.hashed_load_factor(space, device.table) <= visits_ops.MAX_LOAD
    saved = SparseVisits(replicas, HIGHWAY_STATES, n_actions, capacity=1)
    device.save(saved)
    for name, value in host.state_dict().items():
        np.testing.assert_array_equal(saved.state_dict()[name], value, err_msg=name)


def test_the_grid_picks_the_layout():
    """CartPole's 40,000 states: the paged index; Highway's 20^9: the hashed table."""
    space = array_namespace("numpy")
    paged = visits_ops.device_visits(space, 4, 40_000, 2, "cpu")
    hashed = visits_ops.device_visits(space, 4, HIGHWAY_STATES, 5, "cpu")
    assert isinstance(paged, visits_ops.DeviceVisits)
    assert isinstance(hashed, visits_ops.HashedDeviceVisits)
    assert hashed.table.keys.shape == (4, visits_ops.START_SLOTS)
