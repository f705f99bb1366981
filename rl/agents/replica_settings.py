"""Per-replica settings: numeric agent settings that differ between the replicas of one batch.

An agent holds B replicas that advance in lockstep (`rl.agents.base.Agent`).
By default every replica runs its config's settings; an agent class that lists
fields in its ``per_replica`` class attribute also takes ``replica_settings``,
a mapping from such a field to B values, so that K configurations that differ
only in those fields train as one batch of K x S replicas (a sweep, a search).
Replica b then runs ``replica_settings[field][b]`` for each field given and the
config's value for the others; its numbers equal those of the same
configuration trained alone, bitwise.

Fields that change array shapes (the grid, the number of components of a
network or a table) stay per run: a batch of such configurations is split
into one batch per shape by the caller (`rl.sweep`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray


def check_replica_settings(
    agent: str,
    allowed: Iterable[str],
    config: Any,
    settings: Mapping[str, Sequence[Any]] | None,
    replicas: int,
) -> dict[str, NDArray[Any]]:
    """Validate ``settings`` against an agent's per-replica fields; return them as arrays.

    Parameters
    ----------
    agent : str
        The agent's name, for the error messages.
    allowed : iterable of str
        The config fields the agent can vary per replica (its ``per_replica``).
    config : dataclass instance
        The agent's config: the type of each field's values (int, float, bool)
        is that of the config's value.
    settings : mapping of str to sequence, or None
        B values per field (None or empty: every replica runs ``config``).
    replicas : int
        B.

    Returns
    -------
    dict of str to ndarray, shape (B,)
        One array per field given: int64 where the config's value is an int,
        bool for a bool, float64 otherwise.

    Raises
    ------
    ValueError
        If a field is not one the agent can vary per replica, its values are
        not B numbers, or a value is not finite.
    """
    if not settings:
        return {}
    allowed = frozenset(allowed)
    names = {f.name for f in dataclasses.fields(config)}
    arrays: dict[str, NDArray[Any]] = {}
    for field, values in settings.items():
        if field not in allowed:
            can = ", ".join(sorted(allowed)) or "none"
            where = "a field of its config" if field in names else "not a field of its config"
            raise ValueError(
                f"{agent} cannot vary {field!r} per replica ({where}); the fields it can "
                f"vary are: {can}."
            )
        default = getattr(config, field)
        dtype = bool if isinstance(default, bool) else int if isinstance(default, int) else float
        try:
            array = np.asarray(values, dtype=dtype)
        except (TypeError, ValueError):
            raise ValueError(
                f"The per-replica values of {field!r} must be numbers, one per replica."
            ) from None
        if array.shape != (replicas,):
            raise ValueError(
                f"The per-replica values of {field!r} must be {replicas} numbers (one per "
                f"replica), not an array of shape {array.shape}."
            )
        if dtype is float and not np.all(np.isfinite(array)):
            raise ValueError(f"The per-replica values of {field!r} must be finite.")
        arrays[field] = array
    return arrays


def replica_config(config: Any, settings: Mapping[str, NDArray[Any]], replica: int) -> Any:
    """Return the config that replica ``replica`` runs: ``config`` with its per-replica values."""
    if not settings:
        return config
    values = {field: array[replica].item() for field, array in settings.items()}
    return dataclasses.replace(config, **values)
