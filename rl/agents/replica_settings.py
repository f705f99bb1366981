"""Per-replica settings: numeric agent settings that differ between the replicas of one batch.

An agent holds B replicas that advance in lockstep (`rl.agents.base.Agent`).
By default every replica runs its config's settings; an agent class that lists
fields in its ``per_replica`` class attribute also takes ``replica_settings``,
a mapping from such a field to B values, so that K configurations that differ
only in those fields train as one batch of K x S replicas (a sweep, a search).
Replica b then runs ``replica_settings[field][b]`` for each field given and the
config's value for the others; its numbers equal those of the same
configuration trained alone, bitwise.

`check_replica_settings` checks what an agent is given; `replica_values`
resolves every per-replica field once at construction (the config's value
where none is given), the arrays an agent computes with and saves in its
checkpoints under `SETTINGS_KEY`.

Fields that change array shapes (the grid, the number of components of a
network or a table) stay per run: a batch of such configurations is split
into one batch per shape by the caller (`rl.sweep`).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray


def field_dtype(config: Any, field: str) -> type:
    """Return the type of a config field's per-replica values: bool, int or float.

    Read from the field's annotation (``int`` and ``bool`` fields keep their
    type; every other numeric field is float, even where its value is written
    as an integer).
    """
    hint = typing.get_type_hints(type(config)).get(field)
    return hint if hint in (bool, int) else float


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
        The agent's config: each field's values take the type its annotation
        names (`field_dtype`).
    settings : mapping of str to sequence, or None
        B values per field (None or empty: every replica runs ``config``).
    replicas : int
        B.

    Returns
    -------
    dict of str to ndarray, shape (B,)
        One array per field given, of the field's `field_dtype`.

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
        dtype = field_dtype(config, field)
        try:
            numbers = np.asarray(values, dtype=float)
            array = numbers.astype(dtype)
        except (TypeError, ValueError):
            raise ValueError(
                f"The per-replica values of {field!r} must be numbers, one per replica."
            ) from None
        if dtype is not float and not np.array_equal(array, numbers):
            raise ValueError(
                f"The per-replica values of {field!r} must be {dtype.__name__}s. Got "
                f"{numbers.tolist()} instead."
            )
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


SETTINGS_KEY = "replica_settings"
"""The entry of an agent's ``state_dict`` that holds `replica_values`'s arrays."""


def replica_values(
    agent: str,
    allowed: Iterable[str],
    config: Any,
    settings: Mapping[str, Sequence[Any]] | None,
    replicas: int,
) -> dict[str, NDArray[Any]]:
    """Return every replica's value of each field in ``allowed``, one array (B,) per field.

    Parameters
    ----------
    agent : str
        The agent's name, for the error messages.
    allowed : iterable of str
        The fields the agent can vary per replica (its ``per_replica``).
    config : dataclass instance
        The agent's config: the value of every field not in ``settings``.
    settings : mapping of str to sequence, or None
        B values per field given (`rl.agents.replica_settings`).
    replicas : int
        B.

    Returns
    -------
    dict of str to ndarray, shape (B,)
        One array per field of ``allowed``, typed as `check_replica_settings` types them.

    Raises
    ------
    ValueError
        If `check_replica_settings` refuses ``settings``, or a replica's config
        refuses its values (then the message names the replica).
    """
    given = check_replica_settings(agent, allowed, config, settings, replicas)
    for b in range(replicas if given else 0):
        try:
            replica_config(config, given, b)
        except ValueError as error:
            raise ValueError(f"{agent}, replica {b} of the per-replica settings: {error}") from None
    return {
        field: given[field].copy()
        if field in given
        else np.full(replicas, getattr(config, field), dtype=field_dtype(config, field))
        for field in sorted(allowed)
    }


def saved_replica_values(
    agent: str,
    allowed: Iterable[str],
    config: Any,
    state: Mapping[str, Any],
    current: dict[str, NDArray[Any]],
) -> dict[str, NDArray[Any]]:
    """Return the per-replica values a saved ``state`` holds, checked; ``current`` where none.

    A state saved without them (by an agent that had no per-replica settings)
    keeps the agent's own.

    Raises
    ------
    ValueError
        As `replica_values` does, for the saved values.
    """
    if SETTINGS_KEY not in state:
        return current
    replicas = len(next(iter(current.values())))
    return replica_values(agent, allowed, config, state[SETTINGS_KEY], replicas)
