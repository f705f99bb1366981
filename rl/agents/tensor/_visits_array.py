"""TEQL's visit table on an array backend's device, for the array engine.

The same numbers as `rl.agents.tensor.visits` (N(s, a) and Delta Q(s, a) per
replica) in the layout of `rl.agents.tensor.visits.SparseVisits`, made of array
operations. A two-level index maps a (replica, state) to a row of |A| counts
and |A| errors: ``page_of`` (B, ceil(|S| / PAGE)) of int32 gives each
replica's page of `PAGE` consecutive states, and ``pages`` (pages, PAGE) of
int32 the row of each state of a page (-1: not visited). Rows and pages are
handed out in order of first visit (replicas in order within a step, as the
sparse table does), and both double when full. A step touches one state per
replica, so the keys of a step never collide and a new row (page) is
``used + cumsum(new) - 1``: no hashing, no loop over replicas. Row 0 and page 0
are scratch (the targets of the writes of replicas that do not write; page 0
stays all -1); reads of unvisited states give zeros.

The index takes 4 |S| / PAGE bytes per replica at the start (5 KB on the
paper's CartPole grid of 40,000 states, 0.5 GB at B = 100,000) and grows with
the pages visited; a dense (B, |S|) index would take PAGE times that (16 GB at
B = 100,000). After 10,000 CartPole episodes (the comparison's TEQL, 3,846
states visited per replica) the index takes 39 KB per replica and the rows
646 KB.

The functions here are pure (`VisitState` in, `VisitState` out), so that the
engine can compile a whole step around them (``jax.jit``); on NumPy and
PyTorch they write in place. `DeviceVisits` holds the state between steps,
grows it, and converts it to and from the agent's host table
(``agent.visits_``, dense or sparse), which stays the format of checkpoints.

The hashed table (`HashedVisits`, `HashedDeviceVisits`) is a second layout,
for grids too large for the paged index (Highway's 20^9 states: the index alone
would take 4 x 20^9 / 32 bytes per replica); `device_visits` picks, for a grid,
the layout that starts smaller. Every replica owns ``capacity`` slots (a power of
two) of one open-addressing table: ``keys`` (B, capacity) holds the flat state
of each slot (-1: empty), found by linear probing from a mixed hash of the state
(`first_slot`), the probe loop being the namespace's ``while_loop``
(``jax.lax.while_loop`` on JAX) until the last replica of the batch has found
its state or an empty slot. A slot's N(s, a) and Delta Q(s, a) are row
``1 + b * capacity + slot`` of ``counts`` and ``delta`` (row 0: scratch), so
`state_rows`, `increment` and `set_delta` read and write it as they do the
paged table, and `visit_rows` and `insert` take either layout. Its memory,
B x capacity x (16 + 16 |A|) bytes, is fixed inside a compiled program; between
steps (or compiled stretches of steps) `HashedDeviceVisits` doubles the capacity
of every replica, by inserting the rows again, before a replica could hold more
than `MAX_LOAD` of its slots, so that probes stay short and no insert fails.
Each row also keeps its number in the order of first visits (``order``), so that
the host table it is saved into is the one the other engines write.
"""

from __future__ import annotations

import abc
from typing import Any, NamedTuple

import numpy as np

from rl.agents.tensor.visits import DenseVisits, VisitTable
from rl.validation import check_memory
from tensorq._backend import ArrayNamespace, array_namespace

Array = Any

PAGE = 32
"""States per page of the index: the smallest index after 10,000 CartPole episodes."""
MIN_ROOM_ROWS = 16_384
"""Free rows `DeviceVisits.make_room` makes, at least: few replicas then seldom compile
a stretch of steps again for a larger table (about 2.7 MB on CartPole)."""
START_SLOTS = 1024
"""Slots per replica of a new hashed table (`HashedDeviceVisits`)."""
MAX_LOAD = 0.5
"""Largest share of a replica's slots in use before the hashed table doubles."""


class VisitState(NamedTuple):
    """The arrays of a device visit table.

    Attributes
    ----------
    page_of : int32 array of shape (B, ceil(|S| / PAGE))
        Page of each (replica, state // PAGE), -1 where none of its states was visited.
    pages : int32 array of shape (pages, PAGE)
        Row of each state of a page, -1 where never visited (page 0: scratch, all -1).
    counts : int64 array of shape (rows, |A|)
        N(s, a).
    delta : float64 array of shape (rows, |A|)
        Delta Q(s, a).
    keys : int64 array of shape (rows,)
        ``replica * |S| + state`` of each row (row 0: scratch).
    used : int64 array of shape (1,)
        Rows in use, the scratch row included.
    used_pages : int64 array of shape (1,)
        Pages in use, the scratch page included.
    """

    page_of: Array
    pages: Array
    counts: Array
    delta: Array
    keys: Array
    used: Array
    used_pages: Array


def _page_slots(space: ArrayNamespace, table: VisitState, ids: Array, states: Array) -> Array:
    """Return the page of every replica's state (int64, -1 where it has none), (B,)."""
    return space.astype(table.page_of[ids, states // PAGE], space.ops.int64)


def _looked_up(space: ArrayNamespace, table: VisitState, ids: Array, states: Array) -> Array:
    """Read each replica's page, then its state's row there (`visit_rows`)."""
    pages = _page_slots(space, table, ids, states)
    slot = space.ops.where(pages >= 0, pages, 0)  # page 0 is all -1
    return space.astype(table.pages[slot, states % PAGE], space.ops.int64)


def visit_rows(space: ArrayNamespace, table: VisitState, ids: Array, states: Array) -> Array:
    """Return the row of every replica's flat state (int64, -1 where never visited), (B,).

    On JAX the reads run as one pass of a ``while_loop``, which XLA does not fuse
    into the readers of the rows: fused, the reads of the index would be repeated
    in the readers (the EUGE scores, the writes of counts and Delta Q), which need
    not run before `insert` writes the index in the same compiled program, and XLA
    would then copy the whole index on every step to keep the old one for them.
    The loop's flag starts from the states (never negative), so that XLA cannot
    see that it runs once and inline it. A `HashedVisits` table probes instead
    (`hashed_rows`).
    """
    if isinstance(table, HashedVisits):
        return hashed_rows(space, table, ids, states)
    if not space.ops.functional:
        return _looked_up(space, table, ids, states)

    def once(carry: tuple[Array, Array]) -> tuple[Array, Array]:
        return carry[0] | True, _looked_up(space, table, ids, states)

    pending = lambda carry: ~carry[0]  # noqa: E731
    init = (states[0] < 0, space.astype(states, space.ops.int64))
    return space.while_loop(pending, once, init)[1]


def has_room(table: VisitState, replicas: int) -> Array:
    """Whether ``table`` has room for one more lockstep step of ``replicas`` (an array flag)."""
    if isinstance(table, HashedVisits):
        return table.used.max() + 1 <= int(MAX_LOAD * table.keys.shape[1])
    rows, pages = table.counts.shape[0], table.pages.shape[0]
    return (table.used[0] + replicas <= rows) & (table.used_pages[0] + replicas <= pages)


def state_rows(space: ArrayNamespace, table: VisitState, rows: Array) -> tuple[Array, Array]:
    """Return the counts (B, |A|) and errors (B, |A|) of ``rows`` (zeros where -1)."""
    where = space.ops.where
    seen = (rows >= 0)[:, None]
    safe = where(rows >= 0, rows, 0)
    return where(seen, table.counts[safe], 0), where(seen, table.delta[safe], 0.0)


def _handed_out(space: ArrayNamespace, new: Array, used: Array) -> tuple[Array, Array]:
    """Return numbers ``used``, ``used + 1``, ... for the ``new`` entries, and their count.

    The numbers (B,) go in replica order and mean something only where ``new``;
    the count is an array of shape (1,).
    """
    order = space.xp.cumsum(space.astype(new, space.ops.int64), axis=0)
    return used[0] + order - 1, order[-1:]


def insert(
    space: ArrayNamespace,
    table: VisitState,
    ids: Array,
    states: Array,
    rows: Array,
    active: Array,
    n_states: int,
) -> tuple[VisitState, Array]:
    """Give a row to every active replica's state that has none; return the table and rows.

    ``rows`` are `visit_rows`'s. A `HashedVisits` table probes again
    (`hashed_insert`); its owner made room first (`HashedDeviceVisits.reserve`,
    `HashedDeviceVisits.make_room`), so that no replica is full.
    """
    if isinstance(table, HashedVisits):
        return hashed_insert(space, table, ids, states, active)[:2]
    where, int32 = space.ops.where, table.page_of.dtype
    new = active & (rows < 0)
    page, offset = states // PAGE, states % PAGE
    slots = _page_slots(space, table, ids, states)
    fresh = new & (slots < 0)
    numbers, new_pages = _handed_out(space, fresh, table.used_pages)
    slots = where(fresh, numbers, slots)
    page_of = space.scatter(
        table.page_of,
        (ids, page),
        where(fresh, space.astype(slots, int32), table.page_of[ids, page]),
    )
    numbers, new_rows = _handed_out(space, new, table.used)
    rows = where(new, numbers, rows)
    slot = where(slots >= 0, slots, 0)  # pages are per replica: only page 0's -1s collide
    pages = space.scatter(
        table.pages,
        (slot, offset),
        where(new, space.astype(rows, int32), table.pages[slot, offset]),
    )
    row = where(new, rows, 0)
    keys = space.scatter(table.keys, (row,), where(new, ids * n_states + states, table.keys[row]))
    return table._replace(
        page_of=page_of, pages=pages, keys=keys,
        used=table.used + new_rows, used_pages=table.used_pages + new_pages,
    ), rows  # fmt: skip


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


class _DeviceTable(abc.ABC):
    """What both device layouts share: the host table's format (`save`, `restore`).

    A subclass keeps its table in ``table`` and gives `_rows` (the rows in use
    in the order of first visits) and `_load_rows` (a table holding those rows).
    """

    space: ArrayNamespace
    replicas: int
    n_states: int
    n_actions: int

    @abc.abstractmethod
    def _rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return the keys ``replica * |S| + state``, counts and errors of the rows in use."""

    @abc.abstractmethod
    def _load_rows(self, keys: np.ndarray, counts: np.ndarray, delta: np.ndarray) -> None:
        """Make the table hold exactly these rows, in this order of first visits."""

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
        self._load_rows(keys, np.asarray(state["counts"]), np.asarray(state["delta"]))


class DeviceVisits(_DeviceTable):
    """A paged `VisitState` between steps: room for new rows and pages, and the host's format.

    Parameters
    ----------
    space : ArrayNamespace
    replicas, n_states, n_actions : int
        B, |S| and |A|.
    device : str
        The device's name (``"cpu"``, ``"cuda:0"``), whose memory must hold the table.
    """

    def __init__(
        self, space: ArrayNamespace, replicas: int, n_states: int, n_actions: int, device: str
    ) -> None:
        self.space, self.replicas, self.n_states, self.n_actions = (
            space, replicas, n_states, n_actions,
        )  # fmt: skip
        self.n_pages = -(-n_states // PAGE)
        rows, pages = self._capacity(0)
        check_memory(
            "seeds",
            4.0 * replicas * self.n_pages + 4.0 * PAGE * pages + (16.0 * n_actions + 8) * rows,
            f"the array engine's visit table (B x |S| / {PAGE} int32 and its first rows)",
            device,
        )
        self.table = self._table(
            np.zeros(0, np.int64), np.zeros((0, n_actions), np.int64), np.zeros((0, n_actions)),
            rows, pages,
        )  # fmt: skip
        # rows and pages in use at most, known on the host without asking the device
        self._bound, self._page_bound = 1, 1

    def _capacity(self, rows: int) -> tuple[int, int]:
        """Return the rows and pages a table holding ``rows`` rows starts with."""
        capacity = max(2 * rows, 16 * self.replicas) + 1024
        return capacity, capacity // 4

    def _table(
        self, keys: np.ndarray, counts: np.ndarray, delta: np.ndarray, rows: int, pages: int
    ) -> VisitState:
        """Build a table holding rows 1.. = (keys, counts, delta).

        It has room for ``rows`` rows and ``pages`` pages (more where those in use need it).
        """
        space, used = self.space, len(keys) + 1
        replica, state = np.divmod(keys, self.n_states)
        page_keys = replica * self.n_pages + state // PAGE
        unique, first = np.unique(page_keys, return_index=True)
        in_order = unique[np.argsort(first, kind="stable")]  # as the steps handed them out
        used_pages = len(in_order) + 1
        page_of = np.full(self.replicas * self.n_pages, -1, dtype=np.int32)
        page_of[in_order] = np.arange(1, used_pages)
        full_pages = np.full((max(pages, used_pages), PAGE), -1, dtype=np.int32)
        full_pages[page_of[page_keys], state % PAGE] = np.arange(1, used)
        rows = max(rows, used)
        full_keys = np.full(rows, -1, dtype=np.int64)
        full_counts = np.zeros((rows, self.n_actions), dtype=np.int64)
        full_delta = np.zeros((rows, self.n_actions))
        full_keys[1:used], full_counts[1:used], full_delta[1:used] = keys, counts, delta
        return VisitState(
            space.put(page_of.reshape(self.replicas, self.n_pages)),
            space.put(full_pages),
            space.put(full_counts),
            space.put(full_delta),
            space.put(full_keys),
            space.put(np.array([used], dtype=np.int64)),
            space.put(np.array([used_pages], dtype=np.int64)),
        )

    def reserve(self) -> VisitState:
        """Make room for one new row and one new page per replica.

        The device is asked (two numbers: the rows and pages in use) only when the
        table may be full. The table grows on the device by appending empty rows
        and pages, so that those in use and the replicas' page index ``page_of``
        stay where they are. Rows and pages grow together (each to twice its
        size, plus B): every new shape recompiles the engine's step on JAX.
        """
        space, table, replicas = self.space, self.table, self.replicas
        rows, pages = int(table.counts.shape[0]), int(table.pages.shape[0])
        if self._bound + replicas > rows or self._page_bound + replicas > pages:
            self._bound = int(space.host(table.used)[0])
            self._page_bound = int(space.host(table.used_pages)[0])
            if self._bound + replicas > rows or self._page_bound + replicas > pages:
                self.table = self._grown(2 * rows + replicas, 2 * pages + replicas)
        self._bound += replicas
        self._page_bound += replicas
        return self.table

    def make_room(self, steps: int) -> VisitState:
        """Make room for ``steps`` lockstep steps of new rows (at least `MIN_ROOM_ROWS`).

        For a caller that plays a compiled stretch of steps (`rl.loop.scan`); pages
        get a quarter of the rows' room. The rows and pages in use are read from
        the device, and the table grows as `reserve` grows it, to at least twice
        its size.
        """
        host, table = self.space.host, self.table
        used, used_pages = int(host(table.used)[0]), int(host(table.used_pages)[0])
        self._bound, self._page_bound = used, used_pages
        rows = max(steps * self.replicas, MIN_ROOM_ROWS)
        pages = rows // 4
        size, n_pages = int(table.counts.shape[0]), int(table.pages.shape[0])
        if used + rows > size or used_pages + pages > n_pages:
            rows, pages = max(2 * size, used + rows), max(2 * n_pages, used_pages + pages)
            self.table = self._grown(rows, pages)
        return self.table

    def _grown(self, rows: int, pages: int) -> VisitState:
        """Return the table with empty rows and pages appended, up to ``rows`` and ``pages``."""
        space, table = self.space, self.table
        extra, extra_pages = rows - int(table.counts.shape[0]), pages - int(table.pages.shape[0])
        grown = (
            (table.counts, np.zeros((extra, self.n_actions), dtype=np.int64)),
            (table.delta, np.zeros((extra, self.n_actions))),
            (table.keys, np.full(extra, -1, dtype=np.int64)),
            (table.pages, np.full((extra_pages, PAGE), -1, dtype=np.int32)),
        )
        counts, delta, keys, pages_ = (
            space.xp.concatenate([old, space.put(new)]) for old, new in grown
        )
        return table._replace(counts=counts, delta=delta, keys=keys, pages=pages_)

    def _rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return the keys, counts and errors of the rows in use (scratch row excluded)."""
        host, table = self.space.host, self.table
        used = int(host(table.used)[0])
        keys = np.array(host(table.keys[1:used]), dtype=np.int64)
        counts = np.array(host(table.counts[1:used]), dtype=np.int64)
        return keys, counts, np.array(host(table.delta[1:used]), dtype=np.float64)

    def _load_rows(self, keys: np.ndarray, counts: np.ndarray, delta: np.ndarray) -> None:
        self.table = self._table(keys, counts, delta, *self._capacity(len(keys)))
        self._bound = len(keys) + 1
        self._page_bound = int(self.space.host(self.table.used_pages)[0])


# ---------------------------------------------------------------- the hashed table
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
    order : int64 array of shape (1 + B capacity,)
        Each row's number in the order of first visits (replicas in order within a
        step, as the sparse host table hands out rows), 0 where the slot is empty.
    clock : int64 array of shape (1,)
        The number the next new row gets.
    """

    keys: Array
    counts: Array
    delta: Array
    used: Array
    probes: Array
    order: Array
    clock: Array


def empty_hashed(
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
        order=space.zeros((rows,), np.int64),
        clock=space.put(np.ones(1, dtype=np.int64)),
    )


def first_slot(states: Array, capacity: int) -> Array:
    """Return the home slot of each flat state (int64 (B,)): two multiply-xorshift rounds."""
    mixed = states
    for multiplier in _MIX:
        mixed = (mixed ^ (mixed >> 31)) * multiplier
    return (mixed ^ (mixed >> 29)) & (capacity - 1)


def _hashed_find(
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


def hashed_lookup(
    space: ArrayNamespace, table: HashedVisits, ids: Array, states: Array
) -> tuple[Array, Array]:
    """Return the row of every replica's flat state (-1: never visited) and the slots read."""
    slot, hit, read = _hashed_find(space, table, ids, states)
    return space.ops.where(hit, 1 + ids * table.keys.shape[1] + slot, -1), read


def hashed_rows(space: ArrayNamespace, table: HashedVisits, ids: Array, states: Array) -> Array:
    """Return the row of every replica's flat state (int64, -1 where never visited), (B,)."""
    return hashed_lookup(space, table, ids, states)[0]


def hashed_insert(
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
    for them).
    """
    ops, int64 = space.ops, space.ops.int64
    capacity = table.keys.shape[1]
    slot, hit, read = _hashed_find(space, table, ids, states)
    new = active & ~hit
    full = new & (table.used >= capacity)
    new = new & ~full
    keys = space.scatter(table.keys, (ids, slot), ops.where(new, states, table.keys[ids, slot]))
    rows = ops.where(hit | new, 1 + ids * capacity + slot, -1)
    numbers, count = _handed_out(space, new, table.clock)
    row = ops.where(new, rows, 0)
    order = space.scatter(table.order, (row,), ops.where(new, numbers, table.order[row]))
    used = table.used + space.astype(new, int64)
    probes = table.probes + ops.where(active, read, 0)
    return table._replace(
        keys=keys, used=used, probes=probes, order=order, clock=table.clock + count
    ), rows, full  # fmt: skip


def hashed_load_factor(space: ArrayNamespace, table: HashedVisits) -> float:
    """Return the largest share of a replica's slots in use."""
    return float(space.host(table.used).max()) / table.keys.shape[1]


def hashed_bytes(replicas: int, capacity: int, n_actions: int) -> float:
    """Bytes of a hashed table of ``capacity`` slots per replica."""
    return float(replicas) * capacity * (24.0 + 16.0 * n_actions)


class HashedDeviceVisits(_DeviceTable):
    """A `HashedVisits` table between steps: doubled before it fills, and the host's format.

    Parameters
    ----------
    space : ArrayNamespace
    replicas, n_states, n_actions : int
        B, |S| and |A|.
    device : str
        The device's name (``"cpu"``, ``"cuda:0"``), whose memory must hold the table.
    capacity : int, default START_SLOTS
        Slots per replica to start with (a power of two).
    """

    def __init__(
        self,
        space: ArrayNamespace,
        replicas: int,
        n_states: int,
        n_actions: int,
        device: str,
        capacity: int = START_SLOTS,
    ) -> None:
        self.space, self.replicas, self.n_states, self.n_actions, self.device = (
            space, replicas, n_states, n_actions, device,
        )  # fmt: skip
        self._check_memory(capacity)
        self.table = empty_hashed(space, replicas, capacity, n_actions)
        self._bound = 0  # slots in use per replica at most, known without asking the device

    def _check_memory(self, capacity: int) -> None:
        check_memory(
            "seeds",
            hashed_bytes(self.replicas, capacity, self.n_actions),
            f"the array engine's hashed visit table ({capacity} slots per replica)",
            self.device,
        )

    def reserve(self) -> HashedVisits:
        """Make room for one new slot per replica (see `make_room`)."""
        table = self._room(1, asked=False)
        self._bound += 1
        return table

    def make_room(self, steps: int) -> HashedVisits:
        """Make room for ``steps`` lockstep steps, each at most one new slot per replica.

        For a caller that plays a compiled stretch of steps (`rl.loop.scan`),
        which checks `has_room` before every step; the slots in use are read
        from the device.
        """
        return self._room(steps, asked=True)

    def _room(self, steps: int, asked: bool) -> HashedVisits:
        """Double the capacity until ``steps`` more slots per replica keep it within `MAX_LOAD`.

        The device is asked for the slots in use only when ``asked`` or when the
        host's bound says the table may be too full.
        """
        limit = MAX_LOAD * int(self.table.keys.shape[1])
        if asked or self._bound + steps > limit:
            self._bound = int(self.space.host(self.table.used).max())
        if self._bound + steps > limit:
            self._load_rows(*self._rows(), room=steps)
        return self.table

    def _rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return the keys, counts and errors of the slots in use, in the order of first visits."""
        host, table = self.space.host, self.table
        keys = np.asarray(host(table.keys))
        replica, slot = np.nonzero(keys >= 0)
        rows = 1 + replica * keys.shape[1] + slot
        rows = rows[np.argsort(np.asarray(host(table.order))[rows], kind="stable")]
        replica, slot = np.divmod(rows - 1, keys.shape[1])
        flat = replica * self.n_states + keys[replica, slot]
        counts = np.array(host(table.counts), dtype=np.int64)[rows]
        return flat, counts, np.array(host(table.delta), dtype=np.float64)[rows]

    def _load_rows(
        self, keys: np.ndarray, counts: np.ndarray, delta: np.ndarray, room: int = 0
    ) -> None:
        """Insert the rows again, in their order, into a table of the capacity they need.

        The capacity is the table's own, doubled until every replica's rows and
        ``room`` more fit within `MAX_LOAD`.
        """
        replica, state = np.divmod(keys, self.n_states)
        per_replica = np.bincount(replica, minlength=self.replicas)
        most = int(per_replica.max(initial=0))
        capacity = int(self.table.keys.shape[1])
        while most + room > MAX_LOAD * capacity:
            capacity *= 2
        self._check_memory(capacity)
        host = array_namespace("numpy")  # built on the host, then put on the device once
        table = empty_hashed(host, self.replicas, capacity, self.n_actions)
        probes = np.array(self.space.host(self.table.probes), dtype=np.int64)
        # rank: a row's place among its replica's rows; the k-th rows go in together
        grouped = np.argsort(replica, kind="stable")
        rank = np.empty(len(keys), dtype=np.int64)
        rank[grouped] = np.arange(len(keys)) - np.repeat(
            np.cumsum(per_replica) - per_replica, per_replica
        )
        by_rank = np.argsort(rank, kind="stable")
        ends = np.cumsum(np.bincount(rank, minlength=most))
        ids, rows = np.arange(self.replicas), np.zeros(len(keys), dtype=np.int64)
        for k in range(most):
            these = by_rank[(ends[k - 1] if k else 0) : ends[k]]
            states, active = np.zeros(self.replicas, np.int64), np.zeros(self.replicas, bool)
            states[replica[these]], active[replica[these]] = state[these], True
            table, found, _ = hashed_insert(host, table, ids, states, active)
            rows[these] = found[replica[these]]
        table.counts[rows], table.delta[rows] = counts, delta
        table.order[:] = 0
        table.order[rows] = np.arange(1, len(keys) + 1)
        table = table._replace(probes=probes, clock=np.array([len(keys) + 1], dtype=np.int64))
        self.table = HashedVisits(*(self.space.put(array) for array in table))
        self._bound = most


def device_visits(
    space: ArrayNamespace, replicas: int, n_states: int, n_actions: int, device: str
) -> DeviceVisits | HashedDeviceVisits:
    """Return an empty device table of the layout that starts smaller for this grid.

    The paged index takes 4 ceil(|S| / PAGE) bytes per replica from the start, a
    hashed table `START_SLOTS` slots: the paper's CartPole and Pendulum grids get
    the paged table, Highway's 20^9 states the hashed one.
    """
    paged = 4.0 * replicas * -(-n_states // PAGE)
    if paged <= hashed_bytes(replicas, START_SLOTS, n_actions):
        return DeviceVisits(space, replicas, n_states, n_actions, device)
    return HashedDeviceVisits(space, replicas, n_states, n_actions, device)
