"""Each replica's value of every per-replica field of an agent, resolved once at construction.

`rl.agents.replica_settings.check_replica_settings` checks the fields an
agent is given and their shapes; `replica_values` also builds each replica's
config (`rl.agents.replica_settings.replica_config`), so that a value outside
its field's range is refused by the config's own check, naming the replica,
and returns one array per field the agent can vary, the config's value where
no setting is given: the arrays the agent computes with, and saves in its
checkpoints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rl.agents.replica_settings import check_replica_settings, replica_config

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
        field: given[field].copy() if field in given else np.full(replicas, getattr(config, field))
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
