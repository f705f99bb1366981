"""An open-addressing visit table on an array backend's device, of fixed capacity per replica.

For grids too large for the paged index of `rl.agents.tensor._visits_array`
(Highway's 20^9 states: its index alone would take B x 20^9 / 32 int32), every
replica owns ``capacity`` slots (a power of two) of one hash table: ``keys``
(B, capacity) holds the flat state of each slot (-1: empty), found by linear
probing from a mixed hash of the state. A slot's N(s, a) and Delta Q(s, a)
are row ``1 + b * capacity + slot`` of ``counts`` and ``delta`` (row 0 is
scratch), so that `rl.agents.tensor._visits_array.state_rows`, ``increment``
and ``set_delta`` read and write this table as they do the paged one. Memory is
fixed when the table is made, B x capacity x (8 + 16 |A|) bytes, and never
grows inside a compiled program; a replica whose slots are all taken cannot
insert, and `insert` says so (``full``): its caller raises `full_error`.

Every function is pure (arrays in, a `HashedVisits` out), written on
`tensorq._backend.ArrayNamespace`; the probe loop is the namespace's
``while_loop`` (``jax.lax.while_loop`` on JAX), and it runs until the last
replica of the batch has found its state or an empty slot.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from tensorq._backend import ArrayNamespace

Array = Any

_MIX = (0x7FB5D329728EA185, 0x1B873593A4E2C1B7)
"""Multipliers of the hash's two rounds (odd 63-bit constants; products wrap modulo 2^64)."""


class HashedVisits(NamedTuple):
    """The arrays of a hashed device visit table.

    Attributes
    ----------
    keys : int64 array of shape (B, capacity)
        The flat state held in each slot, -1 where empty.
    counts : int64 array of shape (1 + B capacity, |A|)
        N(s, a) of slot ``(b, j)`` at row ``1 + b capacity + j`` (row 0: scratch).
    delta : float64 array of shape (1 + B capacity, |A|)
        Delta Q(s, a), in the rows of ``counts``.
    used : int64 array of shape (B,)
        Slots in use per replica.
    probes : int64 array of shape (B,)
        Slots read per replica by the lookups so far (one per lookup at least).
    """

    keys: Array
    counts: Array
    delta: Array
    used: Array
    probes: Array


def empty_table(
    space: ArrayNamespace, replicas: int, capacity: int, n_actions: int
) -> HashedVisits:
    """Return an empty table of ``capacity`` slots per replica (a power of two).

    Raises
    ------
    ValueError
        If ``capacity`` is not a power of two.
    """
    if capacity < 1 or capacity & (capacity - 1):
        raise ValueError(
            f"The 'capacity' parameter must be a power of two. Got {capacity} instead."
        )
    rows = 1 + replicas * capacity
    return HashedVisits(
        keys=space.put(np.full((replicas, capacity), -1, dtype=np.int64)),
        counts=space.zeros((rows, n_actions), np.int64),
        delta=space.zeros((rows, n_actions), np.float64),
        used=space.zeros((replicas,), np.int64),
        probes=space.zeros((replicas,), np.int64),
    )


def first_slot(states: Array, capacity: int) -> Array:
    """Return the home slot of each flat state (int64 (B,)): two multiply-xorshift rounds."""
    mixed = states
    for multiplier in _MIX:
        mixed = (mixed ^ (mixed >> 31)) * multiplier
    return (mixed ^ (mixed >> 29)) & (capacity - 1)


def _find(
    space: ArrayNamespace, table: HashedVisits, ids: Array, states: Array
) -> tuple[Array, Array, Array]:
    """Probe until each replica finds its state or an empty slot.

    Returns the slot (B,), whether it holds the state (B,), and the slots read (B,).
    """
    ops, int64 = space.ops, space.ops.int64
    capacity = table.keys.shape[1]
    start = first_slot(states, capacity)
    done = states < 0  # never: a first value of the loop's flags, shaped (B,)

    def pending(carry: tuple[Array, ...]) -> Array:
        _, resolved, _, read = carry
        return space.xp.any(~resolved & (read < capacity))

    def probe(carry: tuple[Array, ...]) -> tuple[Array, ...]:
        slot, resolved, hit, read = carry
        held = table.keys[ids, slot]
        now = ~resolved & ((held == states) | (held < 0))
        hit = ops.where(now, held == states, hit)
        resolved = resolved | now
        read = read + space.astype(~resolved | now, int64)
        slot = ops.where(resolved, slot, (slot + 1) & (capacity - 1))
        return slot, resolved, hit, read

    init = (start, done, done, space.astype(start * 0, int64))
    slot, _, hit, read = space.while_loop(pending, probe, init)
    return slot, hit, read


def lookup(
    space: ArrayNamespace, table: HashedVisits, ids: Array, states: Array
) -> tuple[Array, Array]:
    """Return the row of every replica's flat state (-1: never visited) and the slots read."""
    slot, hit, read = _find(space, table, ids, states)
    return space.ops.where(hit, 1 + ids * table.keys.shape[1] + slot, -1), read


def visit_rows(space: ArrayNamespace, table: HashedVisits, ids: Array, states: Array) -> Array:
    """Return the row of every replica's flat state (int64, -1 where never visited), (B,)."""
    return lookup(space, table, ids, states)[0]


def insert(
    space: ArrayNamespace,
    table: HashedVisits,
    ids: Array,
    states: Array,
    active: Array,
) -> tuple[HashedVisits, Array, Array]:
    """Give a slot to every active replica's state that has none.

    Returns the table, the rows of the states (-1 for an inactive replica's
    unvisited state and for a full replica's new one), and ``full`` (B,):
    the active replicas whose new state found no free slot (nothing changes
    for them; the caller raises `full_error`).
    """
    ops, int64 = space.ops, space.ops.int64
    capacity = table.keys.shape[1]
    slot, hit, read = _find(space, table, ids, states)
    new = active & ~hit
    full = new & (table.used >= capacity)
    new = new & ~full
    keys = space.scatter(table.keys, (ids, slot), ops.where(new, states, table.keys[ids, slot]))
    rows = ops.where(hit | new, 1 + ids * capacity + slot, -1)
    used = table.used + space.astype(new, int64)
    probes = table.probes + ops.where(active, read, 0)
    return table._replace(keys=keys, used=used, probes=probes), rows, full


def full_error(replica: int, capacity: int) -> ValueError:
    """Return the error of a replica whose visit table has no free slot."""
    return ValueError(
        f"The hashed visit table of replica {replica} is full: all {capacity} slots hold "
        "visited states. Build it with a larger capacity (a power of two, at least twice "
        "the states one replica visits)."
    )


def load_factor(space: ArrayNamespace, table: HashedVisits) -> float:
    """Return the largest share of a replica's slots in use."""
    return float(space.host(table.used).max()) / table.keys.shape[1]
