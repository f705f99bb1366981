"""Uniform validation of agent hyperparameters.

Every agent config checks its fields in ``__post_init__`` with these functions,
so that a bad value always raises ValueError with the same scikit-learn style
message, for example "The 'rank' parameter must be an int >= 1. Got 0 instead.".

Nothing here imports torch, so the tensor and tabular agents stay importable
without it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def check_int(name: str, value: object, minimum: int, maximum: int | None = None) -> None:
    """Raise ValueError unless ``value`` is an int in ``[minimum, maximum]``.

    ``maximum=None`` means no upper bound; a bool is not an int here.

    Parameters
    ----------
    name : str
        The parameter's name, quoted in the message.
    value : object
        The value to check.
    minimum, maximum : int
        Inclusive bounds.
    """
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    ok = ok and value >= minimum and (maximum is None or value <= maximum)
    if not ok:
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"The {name!r} parameter must be an int {bound}. Got {value!r} instead.")


def check_real(
    name: str,
    value: object,
    low: float,
    high: float,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> None:
    """Raise ValueError unless ``value`` is a finite real number in the given interval.

    Parameters
    ----------
    name : str
        The parameter's name, quoted in the message.
    value : object
        The value to check; a bool is not a real number here.
    low, high : float
        Bounds of the interval (may be infinite; the value itself must be finite).
    low_open, high_open : bool
        Exclude the lower or upper bound.
    """
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok:
        value_f = float(value)  # type: ignore[arg-type]
        ok = math.isfinite(value_f)
        ok = ok and (value_f > low if low_open else value_f >= low)
        ok = ok and (value_f < high if high_open else value_f <= high)
    if not ok:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(
            f"The {name!r} parameter must be a real number in {interval}. Got {value!r} instead."
        )


def check_choice(name: str, value: object, choices: Sequence[str]) -> None:
    """Raise ValueError unless ``value`` is one of ``choices``."""
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"The {name!r} parameter must be one of {options}. Got {value!r} instead.")


def check_epsilon_schedule(epsilon_start: float, epsilon_decay: float, epsilon_min: float) -> None:
    """Validate an epsilon schedule: start and minimum in [0, 1], decay in (0, 1], min <= start."""
    check_real("epsilon_start", epsilon_start, 0.0, 1.0)
    check_real("epsilon_decay", epsilon_decay, 0.0, 1.0, low_open=True)
    check_real("epsilon_min", epsilon_min, 0.0, 1.0)
    if epsilon_min > epsilon_start:
        raise ValueError(
            f"The 'epsilon_min' parameter must be <= epsilon_start = {epsilon_start}. "
            f"Got {epsilon_min!r} instead."
        )
