"""Visit tables per replica: N(s, a), N_total(s) and Delta Q(s, a).

TEQL's exploration (eq. (euge)) and regulariser (eq. (loss_function)) need, for
every replica, the visit count N(s, a), the state total
N_total(s) = sum_a N(s, a) and the last decomposition error Delta Q(s, a) of
eq. (decomp_error). Two storages hold them behind one interface:

- `DenseVisits`: arrays of shape (B, |S|, |A|), for small state spaces.
- `SparseVisits`: one row of |A| counts and |A| errors per *visited* (replica,
  state) pair, found through an open-addressing hash table in arrays, so that
  memory grows with the number of visited states and never with the product of
  the state modes (Highway's grid has 20^9 states).

Both expose `arrays`, a `VisitArrays` that the compiled agent step
(`rl.agents.tensor._step_compiled`) reads and writes directly. The sparse table's hashing
runs in NumPy here (`table_rebuild`, `table_rows`) or, for an agent on the
compiled engine, in its compiled twin (`rl.agents.tensor._visits_compiled`); both
build the same arrays, so this module imports no Numba.

`make_visit_table` chooses by size. States and actions are flat indices
(``numpy.ravel_multi_index`` over the state and action modes); the totals are
derived from the counts instead of being stored.
"""

from __future__ import annotations

import abc
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import NDArray

from rl.agents._restore import check_values, saved_array
from rl.agents.tensor._visit_layout import EMPTY
from rl.validation import check_memory

Storage = Literal["auto", "dense", "sparse"]

#: Largest dense table (bytes, counts and errors together) that ``"auto"`` accepts.
DENSE_LIMIT_BYTES = 8 * 2**20

_BYTES_PER_ENTRY = 16  # int64 count + float64 error

_MASK64 = (1 << 64) - 1


class VisitArrays(NamedTuple):
    """The arrays of a visit table as the compiled kernels read and write them.

    Attributes
    ----------
    keys, slot_rows : ndarray of int64, shape (capacity,)
        Hash slots: the key held (`EMPTY` if none) and its row; empty for a dense table.
    row_keys : ndarray of int64, shape (rows,)
        The key of every row, in order of first visit (empty for a dense table).
    counts : ndarray of int64, shape (rows, |A|)
        N(s, a); a dense table's row is the key ``replica * |S| + state``.
    delta : ndarray of float64, shape (rows, |A|)
        Delta Q(s, a).
    used : ndarray of int64, shape (1,)
        Rows in use (sparse table).
    """

    keys: NDArray[np.int64]
    slot_rows: NDArray[np.int64]
    row_keys: NDArray[np.int64]
    counts: NDArray[np.int64]
    delta: NDArray[np.float64]
    used: NDArray[np.int64]


def _slot(key: int, mask: int) -> int:
    """Home slot of ``key``: the splitmix64 finalizer, masked to the capacity."""
    z = key & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) & mask


def table_rebuild(
    row_keys: NDArray[np.int64], used: int, capacity: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Hash arrays (keys, slot rows) of ``capacity`` (a power of two) slots for rows 0..used-1."""
    keys = np.full(capacity, EMPTY, dtype=np.int64)
    slot_rows = np.full(capacity, EMPTY, dtype=np.int64)
    mask = capacity - 1
    for row, key in enumerate(row_keys[:used].tolist()):
        i = _slot(key, mask)
        while keys[i] != EMPTY:
            i = (i + 1) & mask
        keys[i] = key
        slot_rows[i] = row
    return keys, slot_rows


def table_rows(
    table: VisitArrays, keys_in: NDArray[np.int64], active: NDArray[np.bool_], create: bool
) -> NDArray[np.int64]:
    """Rows of many keys (-1 where absent or inactive), inserting when ``create``."""
    out = np.full(len(keys_in), EMPTY, dtype=np.int64)
    keys, slot_rows = table.keys, table.slot_rows
    mask = len(keys) - 1
    for b in np.flatnonzero(active).tolist():
        key = int(keys_in[b])
        i = _slot(key, mask)
        while keys[i] != key and keys[i] != EMPTY:
            i = (i + 1) & mask
        if keys[i] == key:
            out[b] = slot_rows[i]
        elif create:
            row = int(table.used[0])
            table.used[0] = row + 1
            keys[i], slot_rows[i], table.row_keys[row] = key, row, key
            out[b] = row
    return out


class VisitRows(NamedTuple):
    """The visit statistics of one state per replica, over all actions.

    Attributes
    ----------
    counts : ndarray of int64, shape (B, |A|)
        N(s, a) for every action.
    delta : ndarray of float64, shape (B, |A|)
        Delta Q(s, a) for every action.
    """

    counts: NDArray[np.int64]
    delta: NDArray[np.float64]

    @property
    def totals(self) -> NDArray[np.int64]:
        """N_total(s) = sum_a N(s, a), shape (B,)."""
        return self.counts.sum(axis=-1)


class VisitTable(abc.ABC):
    """N(s, a) and Delta Q(s, a) for B replicas over flat state and action indices.

    Parameters
    ----------
    replicas : int
        Number of independent replicas B.
    n_states : int
        Number of flat states |S| (the product of the state modes).
    n_actions : int
        Number of flat actions |A| (the product of the action modes).
    """

    def __init__(self, replicas: int, n_states: int, n_actions: int) -> None:
        self.replicas = replicas
        self.n_states = n_states
        self.n_actions = n_actions

    @abc.abstractmethod
    def rows(self, states: NDArray[np.int64]) -> VisitRows:
        """Return the statistics of ``states`` (shape (B,)); unvisited states read as zeros."""

    @abc.abstractmethod
    def counts(self, states: NDArray[np.int64], actions: NDArray[np.int64]) -> NDArray[np.int64]:
        """Return N(s, a) at one (state, action) per replica, shape (B,)."""

    @abc.abstractmethod
    def increment(
        self, states: NDArray[np.int64], actions: NDArray[np.int64], active: NDArray[np.bool_]
    ) -> None:
        """Add one visit at (s, a) for the active replicas."""

    @abc.abstractmethod
    def set_delta(
        self,
        states: NDArray[np.int64],
        actions: NDArray[np.int64],
        values: NDArray[np.float64],
        active: NDArray[np.bool_],
    ) -> None:
        """Record Delta Q(s, a) = ``values`` for the active replicas."""

    @property
    @abc.abstractmethod
    def nbytes(self) -> int:
        """Memory held by the table's arrays, in bytes."""

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Arrays that restore the table exactly."""

    @abc.abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""


class DenseVisits(VisitTable):
    """Visit table stored as dense (B, |S|, |A|) arrays."""

    def __init__(self, replicas: int, n_states: int, n_actions: int) -> None:
        super().__init__(replicas, n_states, n_actions)
        self._counts = np.zeros((replicas, n_states, n_actions), dtype=np.int64)
        self._delta = np.zeros((replicas, n_states, n_actions), dtype=np.float64)
        self._replica = np.arange(replicas)
        none = np.zeros(0, dtype=np.int64)
        flat = (replicas * n_states, n_actions)
        self._arrays = VisitArrays(
            none, none, none, self._counts.reshape(flat), self._delta.reshape(flat), none
        )

    def arrays(self) -> VisitArrays:
        """Return the arrays the compiled kernels use: no hash keys, the key is the row."""
        return self._arrays

    def reserve(self, extra: int) -> None:
        """Nothing to do: every row exists."""

    def rows(self, states: NDArray[np.int64]) -> VisitRows:  # noqa: D102
        return VisitRows(self._counts[self._replica, states], self._delta[self._replica, states])

    def counts(self, states, actions):  # noqa: D102
        return self._counts[self._replica, states, actions]

    def increment(self, states, actions, active):  # noqa: D102
        replica = self._replica[active]
        self._counts[replica, states[active], actions[active]] += 1

    def set_delta(self, states, actions, values, active):  # noqa: D102
        replica = self._replica[active]
        self._delta[replica, states[active], actions[active]] = values[active]

    @property
    def nbytes(self) -> int:  # noqa: D102
        return self._counts.nbytes + self._delta.nbytes

    def state_dict(self) -> dict[str, Any]:  # noqa: D102
        return {"counts": self._counts.copy(), "delta": self._delta.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned; ValueError if a shape, dtype or value is wrong."""
        counts = saved_array(state, "counts", self._counts, low=0, where="visits")
        delta = saved_array(state, "delta", self._delta, where="visits")
        self._counts[...] = counts
        self._delta[...] = delta


class SparseVisits(VisitTable):
    """Visit table holding one row per visited (replica, state) pair, found by hashing.

    An open-addressing hash table in arrays (linear probing, load factor at
    most 1/2) maps the key ``replica * |S| + state`` to a row of ``|A|`` counts
    and ``|A|`` errors; rows are appended in order of first visit, and the
    table doubles (rehashing its keys) when full. Lookups and inserts run in
    NumPy (`table_rows`) or compiled (`rl.agents.tensor._visits_compiled`), with the
    same results, and the compiled agent step runs the same lookups inside its
    kernels. Reading an unvisited state allocates nothing.

    Parameters
    ----------
    replicas, n_states, n_actions : int
        B, |S| and |A|.
    capacity : int, default=256
        Rows allocated at first (rounded up to a power of two); grows as needed.
    compiled : bool, default=True
        Hash with the compiled twins (imports Numba); False: the NumPy ones.
    """

    def __init__(
        self,
        replicas: int,
        n_states: int,
        n_actions: int,
        capacity: int = 256,
        compiled: bool = True,
    ) -> None:
        super().__init__(replicas, n_states, n_actions)
        if compiled:
            from rl.agents.tensor import _visits_compiled

            self._rebuild, self._table_rows = (
                _visits_compiled.table_rebuild,
                _visits_compiled.table_rows,
            )
        else:
            self._rebuild, self._table_rows = table_rebuild, table_rows
        if replicas * n_states >= 2**63:
            raise ValueError(
                f"The state space is too large to index: {replicas} replicas x {n_states} states "
                "exceeds 2**63 keys."
            )
        self._offsets = np.arange(replicas, dtype=np.int64) * n_states
        self._all = np.ones(replicas, dtype=bool)
        self._allocate(np.zeros(0, dtype=np.int64), capacity)

    def _allocate(self, row_keys: NDArray[np.int64], capacity: int) -> None:
        """Allocate zeroed rows for ``capacity`` (a power of two) and hash ``row_keys`` in."""
        capacity = 1 << max(int(capacity) - 1, 0).bit_length()
        used = len(row_keys)
        self._row_keys = np.full(capacity, EMPTY, dtype=np.int64)
        self._row_keys[:used] = row_keys
        self._counts = np.zeros((capacity, self.n_actions), dtype=np.int64)
        self._delta = np.zeros((capacity, self.n_actions), dtype=np.float64)
        self._used = np.array([used], dtype=np.int64)
        self._keys, self._slot_rows = self._rebuild(self._row_keys, used, 2 * capacity)

    def reserve(self, extra: int) -> None:
        """Make room for ``extra`` new rows: double the rows and rehash when needed."""
        used = int(self._used[0])
        capacity = len(self._row_keys)
        if used + extra <= capacity:
            return
        counts, delta = self._counts[:used], self._delta[:used]
        self._allocate(self._row_keys[:used].copy(), max(used + extra, 2 * capacity))
        self._counts[:used] = counts
        self._delta[:used] = delta

    def arrays(self) -> VisitArrays:
        """Return the arrays the compiled kernels read and write (valid until it grows)."""
        return VisitArrays(
            self._keys, self._slot_rows, self._row_keys, self._counts, self._delta, self._used
        )

    @property
    def visited(self) -> int:
        """Number of visited (replica, state) pairs, i.e. rows in use."""
        return int(self._used[0])

    def _rows(self, states: NDArray[np.int64], active: NDArray[np.bool_], create: bool) -> Any:
        keys = self._offsets + np.asarray(states, dtype=np.int64)
        if create:
            self.reserve(self.replicas)
        return self._table_rows(self.arrays(), keys, np.asarray(active, bool), create)

    def rows(self, states: NDArray[np.int64]) -> VisitRows:  # noqa: D102
        rows = self._rows(states, self._all, False)
        seen = (rows >= 0)[:, None]
        return VisitRows(
            np.where(seen, self._counts[rows], 0), np.where(seen, self._delta[rows], 0.0)
        )

    def counts(self, states, actions):  # noqa: D102
        rows = self._rows(states, self._all, False)
        return np.where(rows >= 0, self._counts[rows, actions], 0)

    def increment(self, states, actions, active):  # noqa: D102
        rows = self._rows(states, active, True)
        self._counts[rows[active], actions[active]] += 1

    def set_delta(self, states, actions, values, active):  # noqa: D102
        rows = self._rows(states, active, True)
        self._delta[rows[active], actions[active]] = values[active]

    @property
    def nbytes(self) -> int:  # noqa: D102
        arrays = (self._counts, self._delta, self._row_keys, self._keys, self._slot_rows)
        return sum(a.nbytes for a in arrays)

    def state_dict(self) -> dict[str, Any]:
        """Keys, counts and errors of the visited rows, in order of first visit."""
        used = self.visited
        return {
            "keys": self._row_keys[:used].copy(),
            "counts": self._counts[:used].copy(),
            "delta": self._delta[:used].copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned (also the older dict-based layout).

        The keys must be unique integers in ``[0, B * |S|)`` (found in
        O(n log n) by sorting, so a rebuild stays linear), and counts and
        errors one (|A|,) row per key, counts >= 0 and errors finite.

        Raises
        ------
        ValueError
            Naming the entry that is wrong; nothing is changed.
        """
        keys = state["keys"]
        if not isinstance(keys, np.ndarray) or keys.ndim != 1 or keys.dtype.kind not in "iu":
            raise ValueError(
                f"the entry visits/keys must be a 1-d integer array; got {keys!r:.80}."
            )
        check_values("visits/keys", keys, 0, self.replicas * self.n_states - 1)
        keys = keys.astype(np.int64)
        if "rows" in state:  # the dict-based table saved keys[i] -> rows[i]
            rows = np.asarray(state["rows"])
            if rows.shape != keys.shape or not np.array_equal(np.sort(rows), np.arange(len(keys))):
                raise ValueError("the entry visits/rows must be a permutation of the rows.")
            keys = keys[np.argsort(rows, kind="stable")]
        ordered = np.sort(keys)  # O(n log n); np.unique is ten times slower on NumPy 2.4
        if np.any(ordered[1:] == ordered[:-1]):
            raise ValueError("the entry visits/keys holds the same (replica, state) key twice.")
        shape = (len(keys), self.n_actions)  # np.zeros maps pages lazily: no copy of the table
        counts = saved_array(state, "counts", np.zeros(shape, np.int64), low=0, where="visits")
        delta = saved_array(state, "delta", np.zeros(shape), where="visits")
        self._allocate(keys, max(len(keys), 1))
        self._counts[: len(keys)] = counts
        self._delta[: len(keys)] = delta


def make_visit_table(
    replicas: int, n_states: int, n_actions: int, storage: Storage = "auto", compiled: bool = True
) -> VisitTable:
    """Build a visit table, dense when it fits in `DENSE_LIMIT_BYTES`, sparse otherwise.

    Parameters
    ----------
    replicas, n_states, n_actions : int
        B, |S| and |A|.
    storage : {"auto", "dense", "sparse"}
        ``"auto"`` chooses by the size of the dense table; the others force a storage.
    compiled : bool, default=True
        Whether a sparse table hashes with the compiled kernels (see `SparseVisits`).

    Returns
    -------
    VisitTable
    """
    if storage not in ("auto", "dense", "sparse"):
        raise ValueError(
            "The 'storage' parameter must be one of 'auto', 'dense', 'sparse'. "
            f"Got {storage!r} instead."
        )
    dense_bytes = replicas * n_states * n_actions * _BYTES_PER_ENTRY
    if storage == "dense":
        check_memory("visit_storage", float(dense_bytes), "the dense visit table")
    if storage == "dense" or (storage == "auto" and dense_bytes <= DENSE_LIMIT_BYTES):
        return DenseVisits(replicas, n_states, n_actions)
    return SparseVisits(replicas, n_states, n_actions, compiled=compiled)
