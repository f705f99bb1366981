"""Cut an agent state of B replicas into the states of its members, and join them back.

A batch of `rl.runs.batch.training` trains several configurations as the replicas of
one agent; each configuration's checkpoint holds the state its own run would
save, replicas ``lo .. hi-1`` of the batch's. An agent's ``state_dict()`` is a
tree (dicts, lists, arrays, numbers); which of its parts belong to a replica
is read off two fresh states, the member's own (S replicas) and the batch's
(B replicas), walked together:

- an array whose first axis is S in the member's state and B in the batch's
  (the rest of its shape the same) holds one row per replica;
- a list of length S against B holds one item per replica (generator states,
  the deep agents' per-replica dicts);
- an array whose trailing axes are shorter in the member's state than in the
  batch's (the component axis of CP factors, where a replica of rank r runs in
  a batch of rank R_max, `rl.agents.tensor.agent.TensorAgent`) is cut to the
  member's first entries along them; what is cut off must be exactly 0 (a
  replica of a lower rank holds its components r .. R_max - 1 at 0), and
  joining pads it with zeros again;
- a number or string equal in both is shared and copied;
- an entry of the batch's state that the member's lacks (what only a batch
  holds, such as its per-replica settings) is left out of the member's state,
  and keeps the batch's fresh value when the members' states are joined;
- the visit table of the tensor agents is a node of its own: dense
  (``counts``/``delta`` of shape (B, |S|, |A|), the first rule) or sparse
  (``keys``/``counts``/``delta``: one row per visited (replica, state) pair, the
  key ``replica * |S| + state``, rows in order of first visit,
  `rl.agents.tensor.visits.SparseVisits`). The table is dense or sparse by its
  size, so a large batch may hold a sparse table where its members hold dense
  ones; both directions are converted exactly.

Any other difference between the two trees raises `ReplicaStateError`: the
batch cannot be cut, and its configurations train one by one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

_SPARSE = frozenset({"keys", "counts", "delta"})


class ReplicaStateError(ValueError):
    """An agent state cannot be cut into per-replica parts (its layout is not recognised)."""


def _is_sparse(node: Any) -> bool:
    return isinstance(node, dict) and set(node) == _SPARSE


def split_state(state: Any, member: Any, batch: Any, lo: int, hi: int, n_states: int) -> Any:
    """Return replicas ``lo .. hi-1`` of a batch's agent state, laid out as the member's own.

    Parameters
    ----------
    state : tree
        The batch agent's ``state_dict()``.
    member : tree
        A fresh ``state_dict()`` of the member's own agent (``hi - lo`` replicas):
        its layout.
    batch : tree
        A fresh ``state_dict()`` of the batch agent (more replicas than the
        member's): its layout.
    lo, hi : int
        The member's replicas in the batch.
    n_states : int
        |S|, the number of flat states of the problem (the key of a sparse visit row).

    Returns
    -------
    tree
        The state the member's agent restores (`rl.runs.checkpoint.restore_agent`).

    Raises
    ------
    ReplicaStateError
        If the trees differ in another way than the module doc lists.
    """
    if _is_sparse(batch) or _is_sparse(member):
        return _member_visits(state, member, lo, hi, n_states)
    if isinstance(member, dict):
        _member_keys(member, batch)
        return {k: split_state(state[k], member[k], batch[k], lo, hi, n_states) for k in member}
    if isinstance(member, (list, tuple)):
        if len(member) == len(batch):
            parts = [
                split_state(s, m, b, lo, hi, n_states)
                for s, m, b in zip(state, member, batch, strict=True)
            ]
            return type(member)(parts)
        _check_per_replica(len(member), len(batch), hi - lo)
        return type(member)(state[lo:hi])
    if isinstance(member, np.ndarray):
        if member.ndim == 0 or member.ndim != batch.ndim:
            raise ReplicaStateError(f"an array of shape {member.shape} is not one row per replica")
        _check_per_replica(member.shape[0], batch.shape[0], hi - lo)
        rows = state[lo:hi]
        if member.shape[1:] == batch.shape[1:]:
            return rows.copy()
        own = rows[_leading(member.shape, batch.shape)]
        if np.count_nonzero(own) != np.count_nonzero(rows):
            raise ReplicaStateError(
                f"replicas {lo} .. {hi - 1} hold nonzero entries beyond their own shape "
                f"{member.shape[1:]} of the batch's {batch.shape[1:]}: a replica of a lower "
                "rank must keep its components beyond its rank at exactly 0"
            )
        return own.copy()
    if member != batch:
        raise ReplicaStateError(f"a value {member!r} differs from the batch's {batch!r}")
    return state


def layout_signature(state: Any, twin: Any = None) -> str:
    """Return what two agent states must share to be cut from one batch's: their layout.

    The tree's entries, array dtypes and shapes but the first axis (the
    replicas), and the kinds of the other values; list lengths are left out
    (a per-replica list's length is the number of replicas). Configurations
    whose fresh states differ here (another grid or network, a dense visit
    table against a sparse one) do not share a batch.

    Parameters
    ----------
    state : tree
        A configuration's fresh agent state.
    twin : tree, optional
        A fresh state of the same configuration at another rank
        (`rl.runs.batch.training.state_layout`): an axis in which an array's
        shape differs from its twin's (the component axis of CP factors) is
        written ``*``, so that configurations that differ only in their rank
        share a signature, their factors cut and padded along that axis.
    """
    if isinstance(state, dict):
        twins = twin if isinstance(twin, dict) else {}
        inner = ",".join(
            f"{key}:{layout_signature(state[key], twins.get(key))}" for key in sorted(state)
        )
        return "{" + inner + "}"
    if isinstance(state, (list, tuple)):
        same = isinstance(twin, (list, tuple)) and len(twin) == len(state)
        pairs = zip(state, twin if same else [None] * len(state), strict=True)
        return "[" + "|".join(sorted({layout_signature(item, t) for item, t in pairs})) + "]"
    if isinstance(state, np.ndarray):
        shape: tuple[int | str, ...] = state.shape[1:]
        if isinstance(twin, np.ndarray) and twin.ndim == state.ndim:
            shape = tuple("*" if n != m else n for n, m in zip(shape, twin.shape[1:], strict=True))
        return f"{state.dtype.str}{shape}"
    return type(state).__name__


def join_states(
    states: Sequence[Any], sizes: Sequence[int], members: Sequence[Any], batch: Any, n_states: int
) -> Any:
    """Return the batch state made of its members' states, the inverse of `split_state`.

    Parameters
    ----------
    states : sequence of tree
        Each member's saved state, in replica order.
    sizes : sequence of int
        Each member's number of replicas.
    members : sequence of tree
        A fresh state of each member's own agent (its layout).
    batch : tree
        A fresh ``state_dict()`` of the batch agent: its layout, and the values
        of what is shared.
    n_states : int
        |S| (see `split_state`).

    Raises
    ------
    ReplicaStateError
        If the trees differ in another way than the module doc lists.
    """
    if _is_sparse(batch) or any(_is_sparse(m) for m in members):
        return _batch_visits(states, sizes, members, batch, n_states)
    if isinstance(batch, dict):
        for member in members:
            _member_keys(member, batch)
        joined = {}
        for key in batch:
            if not any(key in m for m in members):  # the batch's own: its value stays
                joined[key] = batch[key]
                continue
            if not all(key in m for m in members):
                raise ReplicaStateError(f"the entry {key!r} is in some members' states only")
            parts, layouts = [s[key] for s in states], [m[key] for m in members]
            joined[key] = join_states(parts, sizes, layouts, batch[key], n_states)
        return joined
    if isinstance(batch, (list, tuple)):
        if all(len(m) == len(batch) for m in members):
            parts = [
                join_states([s[i] for s in states], sizes, [m[i] for m in members], b, n_states)
                for i, b in enumerate(batch)
            ]
            return type(batch)(parts)
        for member, size in zip(members, sizes, strict=True):
            _check_per_replica(len(member), len(batch), size)
        return type(batch)(item for s in states for item in s)
    if isinstance(batch, np.ndarray):
        return np.concatenate([_padded(part, batch) for part in states])
    return batch


def _leading(member: tuple[int, ...], batch: tuple[int, ...]) -> tuple[slice, ...]:
    """Return the index of a member's entries: its rows, the first entries of each other axis."""
    if any(m > n for m, n in zip(member[1:], batch[1:], strict=True)):
        raise ReplicaStateError(f"an array of shape {member} is larger than the batch's {batch}")
    return (slice(None), *(slice(0, m) for m in member[1:]))


def _padded(part: np.ndarray, batch: np.ndarray) -> np.ndarray:
    """Return a member's array padded with zeros to the batch's shape past the first axis."""
    if part.shape[1:] == batch.shape[1:]:
        return part
    if part.ndim != batch.ndim:
        raise ReplicaStateError(f"an array of shape {part.shape} is not one row per replica")
    padded = np.zeros(part.shape[:1] + batch.shape[1:], dtype=part.dtype)
    padded[_leading(part.shape, batch.shape)] = part
    return padded


def _member_keys(member: Any, batch: Any) -> None:
    if not isinstance(batch, dict) or not set(member) <= set(batch):
        raise ReplicaStateError("the member's state holds entries the batch's does not")


def _check_per_replica(member_length: int, batch_length: int, replicas: int) -> None:
    if member_length != replicas or batch_length <= member_length:
        raise ReplicaStateError(f"an entry of length {member_length} is not one per replica")


def _visit_rows(state: Any, lo: int, hi: int, n_states: int) -> tuple[np.ndarray, ...]:
    """Keys (local to ``lo``), counts and errors of the visited rows of replicas ``lo .. hi-1``."""
    if _is_sparse(state):
        keys = state["keys"]
        mine = (keys >= lo * n_states) & (keys < hi * n_states)
        return keys[mine] - lo * n_states, state["counts"][mine], state["delta"][mine]
    counts = state["counts"][lo:hi].reshape(-1, state["counts"].shape[-1])
    delta = state["delta"][lo:hi].reshape(counts.shape)
    keys = np.flatnonzero(counts.any(axis=1) | (delta != 0).any(axis=1))
    return keys, counts[keys], delta[keys]


def _member_visits(state: Any, member: Any, lo: int, hi: int, n_states: int) -> dict:
    """Return the visit table of replicas ``lo .. hi-1``, dense or sparse as ``member`` is."""
    if not isinstance(member, dict) or not {"counts", "delta"} <= set(member):
        raise ReplicaStateError("the member's state holds no visit table where the batch's does")
    keys, counts, delta = _visit_rows(state, lo, hi, n_states)
    if _is_sparse(member):
        return {"keys": keys.copy(), "counts": counts.copy(), "delta": delta.copy()}
    shape = member["counts"].shape
    if shape[0] != hi - lo or shape[1] != n_states:
        raise ReplicaStateError(f"a dense visit table of shape {shape} is not the member's")
    dense_counts = np.zeros((shape[0] * shape[1], shape[2]), dtype=member["counts"].dtype)
    dense_delta = np.zeros(dense_counts.shape, dtype=member["delta"].dtype)
    dense_counts[keys], dense_delta[keys] = counts, delta
    return {"counts": dense_counts.reshape(shape), "delta": dense_delta.reshape(shape)}


def _batch_visits(
    states: Sequence[Any], sizes: Sequence[int], members: Sequence[Any], batch: Any, n_states: int
) -> dict:
    """Return the batch's visit table from its members' (dense or sparse), as ``batch`` is."""
    if not _is_sparse(batch):
        if any(_is_sparse(m) for m in members):
            raise ReplicaStateError("a member's visit table is sparse where the batch's is dense")
        return {key: np.concatenate([s[key] for s in states]) for key in ("counts", "delta")}
    first, keys, counts, delta = 0, [], [], []
    for state, size in zip(states, sizes, strict=True):
        rows = _visit_rows(state, 0, size, n_states)
        keys.append(rows[0] + first * n_states)
        counts.append(rows[1])
        delta.append(rows[2])
        first += size
    return {
        "keys": np.concatenate(keys).astype(batch["keys"].dtype, copy=False),
        "counts": np.concatenate(counts).astype(batch["counts"].dtype, copy=False),
        "delta": np.concatenate(delta).astype(batch["delta"].dtype, copy=False),
    }
