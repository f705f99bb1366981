"""Checks of a saved agent state before an agent restores it.

A checkpoint is input (docs/run-directories.md, "Run directories from elsewhere"): its SHA-256
detects damage, not tampering, so every value an agent restores is checked
against what the agent's own configuration makes it hold. The agents'
``load_state_dict`` methods call these helpers before changing anything; a
failure is a ValueError naming the entry, which `rl.runs.checkpoint.restore_agent`
turns into one refusal line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"shape {value.shape} and dtype {value.dtype}"
    return type(value).__name__


def saved_array(
    state: Mapping[str, Any],
    key: str,
    like: NDArray[Any],
    *,
    low: float | None = None,
    high: float | None = None,
    where: str = "",
) -> NDArray[Any]:
    """Return ``state[key]`` once checked against ``like``: same shape and dtype, finite, in range.

    Parameters
    ----------
    state : mapping
        The saved state (or a part of it).
    key : str
        Entry to read; a missing one raises KeyError naming it.
    like : ndarray
        The agent's own array the entry will replace.
    low, high : float, optional
        Inclusive bounds of every value.
    where : str
        Path of ``state`` inside the agent state, for the message.

    Returns
    -------
    ndarray
        The entry itself (not copied).

    Raises
    ------
    ValueError
        Naming the entry and what is wrong with it.
    """
    name = f"{where}/{key}" if where else key
    value = state[key]
    if not isinstance(value, np.ndarray) or value.shape != like.shape or value.dtype != like.dtype:
        raise ValueError(
            f"the entry {name} must be an array of shape {like.shape} and dtype {like.dtype}; "
            f"got {_describe(value)}."
        )
    check_values(name, value, low, high)
    return value


def check_values(
    name: str, value: NDArray[Any], low: float | None = None, high: float | None = None
) -> None:
    """Raise ValueError naming ``name`` unless ``value`` is finite and within ``[low, high]``."""
    if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
        raise ValueError(f"the entry {name} holds NaN or infinite values.")
    if value.size and (
        (low is not None and value.min() < low) or (high is not None and value.max() > high)
    ):
        raise ValueError(
            f"the entry {name} must lie in [{low}, {high}]; it holds values from "
            f"{value.min()} to {value.max()}."
        )


def saved_count(state: Mapping[str, Any], key: str, high: int | None = None) -> int:
    """Return ``state[key]``, a non-negative integer (at most ``high``), as an int.

    Raises
    ------
    ValueError
        If it is not an integer (a bool is not one) or out of range.
    """
    value = state[key]
    if isinstance(value, np.integer):
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"the entry {key} must be an integer >= 0; got {value!r}.")
    if high is not None and value > high:
        raise ValueError(f"the entry {key} must be at most {high}; got {value}.")
    return value


def saved_fraction(state: Mapping[str, Any], key: str) -> float:
    """Return ``state[key]``, a real number in [0, 1] (an exploration rate), as a float."""
    value = state[key]
    real = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not real or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"the entry {key} must be a number in [0, 1]; got {value!r}.")
    return float(value)


def check_generator_states(states: Any, count: int, key: str) -> None:
    """Raise ValueError unless ``states`` is a list of ``count`` bit-generator state tables."""
    if not isinstance(states, list) or len(states) != count:
        raise ValueError(f"the entry {key} must be a list of {count} generator states.")
    for i, state in enumerate(states):
        if not isinstance(state, dict) or not isinstance(state.get("bit_generator"), str):
            raise ValueError(f"the entry {key}/{i} is not a generator state.")
