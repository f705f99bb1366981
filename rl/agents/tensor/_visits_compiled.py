"""Compiled (Numba) twin of the sparse visit table's hashing (`rl.agents.tensor.visits`).

A visit table reaches the kernels as a `rl.agents.tensor.visits.VisitArrays`: an
open-addressing hash table (linear probing, keys ``replica * |S| + flat
state``, `EMPTY` for an empty slot) mapping a key to a row of ``counts`` and
``delta``; a dense table has empty ``keys`` and uses the key itself as the row.
`table_rebuild` and `table_rows` compute what their NumPy twins in
`rl.agents.tensor.visits` compute (the same hash, the same probing, so the same layout);
``tests/rl/test_visits.py`` checks that they agree.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from rl.agents.tensor import _visit_layout
from rl.agents.tensor._visit_layout import EMPTY
from rl.jit import drop_stale

drop_stale(__file__, [_visit_layout.__file__])


@njit(cache=True)
def _slot(key, mask):
    """Home slot of ``key``: the splitmix64 finalizer, masked to the capacity."""
    z = np.uint64(key)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.int64(z & np.uint64(mask))


@njit(cache=True)
def _probe(keys, key):
    """Slot holding ``key``, or the empty slot where linear probing would insert it."""
    mask = keys.shape[0] - 1
    i = _slot(key, mask)
    while keys[i] != key and keys[i] != EMPTY:
        i = (i + 1) & mask
    return i


@njit(cache=True)
def table_find(keys, slot_rows, key):
    """Row of ``key``, or -1 when it is not in the table."""
    i = _probe(keys, key)
    return slot_rows[i] if keys[i] == key else -1


@njit(cache=True)
def table_insert(table, key):
    """Row of ``key``, appending a new row when absent (the caller ensures room)."""
    keys, slot_rows = table.keys, table.slot_rows
    i = _probe(keys, key)
    if keys[i] == key:
        return slot_rows[i]
    row = table.used[0]
    table.used[0] = row + 1
    keys[i] = key
    slot_rows[i] = row
    table.row_keys[row] = key
    return row


@njit(cache=True)
def table_rebuild(row_keys, used, capacity):
    """Hash arrays of ``capacity`` (a power of two) slots for rows 0..used-1."""
    keys = np.full(capacity, EMPTY, dtype=np.int64)
    slot_rows = np.full(capacity, EMPTY, dtype=np.int64)
    mask = capacity - 1
    for row in range(used):
        i = _slot(row_keys[row], mask)
        while keys[i] != EMPTY:
            i = (i + 1) & mask
        keys[i] = row_keys[row]
        slot_rows[i] = row
    return keys, slot_rows


@njit(cache=True)
def visit_row(table, key, create):
    """Row of ``key`` in a `VisitArrays` (dense: the key itself); -1 if absent."""
    if table.keys.shape[0] == 0:
        return key
    if create:
        return table_insert(table, key)
    return table_find(table.keys, table.slot_rows, key)


@njit(cache=True)
def table_rows(table, keys_in, active, create):
    """Rows of many keys (-1 where absent or inactive), inserting when ``create``."""
    out = np.full(keys_in.shape[0], EMPTY, dtype=np.int64)
    for b in range(keys_in.shape[0]):
        if active[b]:
            out[b] = visit_row(table, keys_in[b], create)
    return out
