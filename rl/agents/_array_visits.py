"""TEQL's visit table on an array backend's device, for the array engine.

The same numbers as `rl.agents.visits` (N(s, a) and Delta Q(s, a) per
replica) in the layout of `rl.agents.visits.SparseVisits`, made of array
operations: a dense index ``row_of`` (B, |S|) of int32 (-1: not visited) maps a
(replica, state) to a row of |A| counts and |A| errors, rows are handed out in
order of first visit (replicas in order within a step, as the sparse table
does), and the rows double when full. A step touches one state per replica, so
the keys of a step never collide and a new row is ``used + cumsum(new) - 1``:
no hashing, no loop over replicas. Row 0 is scratch (the target of the writes
of replicas that do not write); reads of unvisited states give zeros.

The functions here are pure (`VisitState` in, `VisitState` out), so that the
engine can compile a whole step around them (``jax.jit``); on NumPy and
PyTorch they write in place. `DeviceVisits` holds the state between steps,
grows it, and converts it to and from the agent's host table
(``agent.visits_``, dense or sparse), which stays the format of checkpoints.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from rl.agents._array_backend import ArrayNamespace
from rl.agents.visits import DenseVisits, VisitTable
from rl.validation import check_memory

Array = Any


class VisitState(NamedTuple):
    """The arrays of a device visit table.

    Attributes
    ----------
    row_of : int32 array of shape (B, |S|)
        Row of each (replica, state), -1 where never visited.
    counts : int64 array of shape (rows, |A|)
        N(s, a).
    delta : float64 array of shape (rows, |A|)
        Delta Q(s, a).
    keys : int64 array of shape (rows,)
        ``replica * |S| + state`` of each row (row 0: scratch).
    used : int64 array of shape (1,)
        Rows in use, the scratch row included.
    """

    row_of: Array
    counts: Array
    delta: Array
    keys: Array
    used: Array


def visit_rows(space: ArrayNamespace, table: VisitState, ids: Array, states: Array) -> Array:
    """Return the row of every replica's flat state (int64, -1 where never visited), (B,)."""
    return space.astype(table.row_of[ids, states], space.ops.int64)


def state_rows(space: ArrayNamespace, table: VisitState, rows: Array) -> tuple[Array, Array]:
    """Return the counts (B, |A|) and errors (B, |A|) of ``rows`` (zeros where -1)."""
    where = space.ops.where
    seen = (rows >= 0)[:, None]
    safe = where(rows >= 0, rows, 0)
    return where(seen, table.counts[safe], 0), where(seen, table.delta[safe], 0.0)


def insert(
    space: ArrayNamespace,
    table: VisitState,
    ids: Array,
    states: Array,
    rows: Array,
    active: Array,
    n_states: int,
) -> tuple[VisitState, Array]:
    """Give a row to every active replica's state that has none; return the table and rows."""
    where = space.ops.where
    new = active & (rows < 0)
    order = space.xp.cumsum(space.astype(new, space.ops.int64), axis=0)
    rows = where(new, table.used[0] + order - 1, rows)
    index = space.astype(rows, table.row_of.dtype)
    row_of = space.scatter(
        table.row_of, (ids, states), where(new, index, table.row_of[ids, states])
    )
    slot = where(new, rows, 0)
    keys = space.scatter(table.keys, (slot,), where(new, ids * n_states + states, table.keys[slot]))
    return table._replace(row_of=row_of, keys=keys, used=table.used + order[-1]), rows


def increment(
    space: ArrayNamespace, table: VisitState, rows: Array, actions: Array, active: Array
) -> VisitState:
    """N(s, a) += 1 for every active replica (whose ``rows`` exist)."""
    slot = space.ops.where(active, rows, 0)
    old = table.counts[slot, actions]
    new = space.ops.where(active, old + 1, old)
    return table._replace(counts=space.scatter(table.counts, (slot, actions), new))


def set_delta(
    space: ArrayNamespace,
    table: VisitState,
    rows: Array,
    actions: Array,
    values: Array,
    active: Array,
) -> VisitState:
    """Delta Q(s, a) = ``values`` for every active replica (whose ``rows`` exist)."""
    slot = space.ops.where(active, rows, 0)
    new = space.ops.where(active, values, table.delta[slot, actions])
    return table._replace(delta=space.scatter(table.delta, (slot, actions), new))


class DeviceVisits:
    """A `VisitState` between steps: room for new rows, and the host table's format.

    Parameters
    ----------
    space : ArrayNamespace
    replicas, n_states, n_actions : int
        B, |S| and |A|.
    """

    def __init__(self, space: ArrayNamespace, replicas: int, n_states: int, n_actions: int) -> None:
        check_memory(
            "seeds", 4.0 * replicas * n_states, "the array engine's visit index (B x |S| int32)"
        )
        self.space, self.replicas, self.n_states, self.n_actions = (
            space, replicas, n_states, n_actions,
        )  # fmt: skip
        self.table = self._table(np.zeros(0, np.int64), np.zeros((0, n_actions), np.int64),
                                 np.zeros((0, n_actions)), 16 * replicas + 1024)  # fmt: skip
        self._bound = 1  # rows in use at most, known on the host without asking the device

    def _table(self, keys: np.ndarray, counts: np.ndarray, delta: np.ndarray, capacity: int) -> Any:
        """Build a table holding rows 1.. = (keys, counts, delta), with ``capacity`` rows."""
        space, used = self.space, len(keys) + 1
        capacity = max(capacity, used)
        row_of = np.full(self.replicas * self.n_states, -1, dtype=np.int32)
        row_of[keys] = np.arange(1, used)
        full_keys = np.full(capacity, -1, dtype=np.int64)
        full_counts = np.zeros((capacity, self.n_actions), dtype=np.int64)
        full_delta = np.zeros((capacity, self.n_actions))
        full_keys[1:used], full_counts[1:used], full_delta[1:used] = keys, counts, delta
        return VisitState(
            space.put(row_of.reshape(self.replicas, self.n_states)),
            space.put(full_counts),
            space.put(full_delta),
            space.put(full_keys),
            space.put(np.array([used], dtype=np.int64)),
        )

    def reserve(self) -> VisitState:
        """Make room for one new row per replica (asking the device only when it may be full).

        The question is one number (the rows in use); the table grows on the device by
        appending empty rows, so that the rows in use and the index ``row_of`` (B x |S|,
        the bulk of the table) stay where they are.
        """
        capacity = int(self.table.counts.shape[0])
        if self._bound + self.replicas > capacity:
            self._bound = int(self.space.host(self.table.used)[0])
            if self._bound + self.replicas > capacity:
                self.table = self._grown(2 * capacity + self.replicas)
        self._bound += self.replicas
        return self.table

    def _grown(self, capacity: int) -> VisitState:
        """Return the table with empty rows appended up to ``capacity`` rows."""
        space, table = self.space, self.table
        extra = capacity - int(table.counts.shape[0])
        grown = (
            (table.counts, np.zeros((extra, self.n_actions), dtype=np.int64)),
            (table.delta, np.zeros((extra, self.n_actions))),
            (table.keys, np.full(extra, -1, dtype=np.int64)),
        )
        counts, delta, keys = (space.xp.concatenate([old, space.put(new)]) for old, new in grown)
        return table._replace(counts=counts, delta=delta, keys=keys)

    def _rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return the keys, counts and errors of the rows in use (scratch row excluded)."""
        host, table = self.space.host, self.table
        used = int(host(table.used)[0])
        keys = np.array(host(table.keys[1:used]), dtype=np.int64)
        counts = np.array(host(table.counts[1:used]), dtype=np.int64)
        return keys, counts, np.array(host(table.delta[1:used]), dtype=np.float64)

    def save(self, target: VisitTable) -> None:
        """Write this table into the host table ``target`` (in its own layout)."""
        keys, counts, delta = self._rows()
        if isinstance(target, DenseVisits):
            shape = (self.replicas, self.n_states, self.n_actions)
            full_counts, full_delta = np.zeros(shape, np.int64), np.zeros(shape)
            full_counts.reshape(-1, self.n_actions)[keys] = counts
            full_delta.reshape(-1, self.n_actions)[keys] = delta
            target.load_state_dict({"counts": full_counts, "delta": full_delta})
        else:
            target.load_state_dict({"keys": keys, "counts": counts, "delta": delta})

    def restore(self, source: VisitTable) -> None:
        """Read the host table ``source`` into this one (rows in its order)."""
        state = source.state_dict()
        if isinstance(source, DenseVisits):
            counts = state["counts"].reshape(-1, self.n_actions)
            delta = state["delta"].reshape(-1, self.n_actions)
            keys = np.flatnonzero((counts != 0).any(axis=1) | (delta != 0).any(axis=1))
            state = {"keys": keys, "counts": counts[keys], "delta": delta[keys]}
        keys = np.asarray(state["keys"], dtype=np.int64)
        capacity = max(2 * len(keys), 16 * self.replicas) + 1024
        self.table = self._table(keys, state["counts"], state["delta"], capacity)
        self._bound = len(keys) + 1
