"""Parameter checks with uniform, scikit-learn style error messages.

Every check takes the parameter's name first, then the value, and raises
:class:`ValueError` whose message names the parameter, for example "The 'rank'
parameter must be an int >= 1. Got 0 instead.". The checks work on NumPy
copies of the inputs, so they run before any factor is touched.

`rl.validation` holds the same checks, with the same argument order and
wording, for the rest of the project; `tensorq` keeps this copy because it
must not import `rl`. Values are checked once, where they enter (`OnlineCP`,
`StepSchedule`, `FactorBound`); the per-step update checks only its targets.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np


def _fail(name: str, requirement: str, got: Any) -> ValueError:
    return ValueError(f"The {name!r} parameter must be {requirement}. Got {got!r} instead.")


def check_int(name: str, value: Any, minimum: int) -> int:
    """Return ``value`` as an int, checking ``value >= minimum``."""
    if type(value) is not int and (
        isinstance(value, bool) or not isinstance(value, numbers.Integral)
    ):
        raise _fail(name, f"an int >= {minimum}", value)
    if value < minimum:
        raise _fail(name, f"an int >= {minimum}", value)
    return int(value)


def check_float(name: str, value: Any, *, positive: bool = False) -> float:
    """Return ``value`` as a finite float, ``> 0`` if ``positive`` else ``>= 0``."""
    requirement = "a finite float > 0" if positive else "a finite float >= 0"
    if type(value) is not float and (
        isinstance(value, bool) or not isinstance(value, numbers.Real)
    ):
        raise _fail(name, requirement, value)
    value = float(value)
    if not np.isfinite(value) or value < 0 or (positive and value == 0):
        raise _fail(name, requirement, value)
    return value


def as_numpy(value: Any) -> np.ndarray:
    """Return a NumPy view or copy of an array-like or a CPU PyTorch tensor."""
    if type(value) is np.ndarray:
        return value
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def check_index(name: str, index: Any, dims: np.ndarray, replicas: int) -> np.ndarray:
    """Check an integer index array of shape ``(replicas, len(dims))``.

    Parameters
    ----------
    index : array-like
        Candidate index, one row per replica.
    name : str
        Parameter name used in error messages.
    dims : ndarray of int
        Size of each indexed mode.
    replicas : int
        Expected number of rows.

    Returns
    -------
    ndarray of int
        The index as a NumPy integer array.
    """
    idx = as_numpy(index)
    expected = (replicas, len(dims))
    if idx.dtype.kind not in "iu" or idx.shape != expected:
        raise _fail(
            name,
            f"an int array of shape {expected}",
            f"{idx.dtype} array of shape {idx.shape}",
        )
    if idx.size and (idx.min() < 0 or (idx >= dims).any()):
        raise _fail(name, f"in range [0, d_n) for mode sizes {tuple(dims.tolist())}", idx.tolist())
    return idx


def check_vector(
    name: str, value: Any, replicas: int, *, minimum: float | None = None, strict: bool = False
) -> np.ndarray | float:
    """Check a finite float per replica, given as a scalar or an array ``(replicas,)``.

    Parameters
    ----------
    value : float or array-like
        Candidate values; a scalar is broadcast to every replica.
    name : str
        Parameter name used in error messages.
    replicas : int
        Expected length.
    minimum : float, optional
        Lower bound on the values.
    strict : bool, default=False
        Whether the bound is strict (``> minimum``) rather than ``>= minimum``.

    Returns
    -------
    float or ndarray of float64, shape (replicas,)
        A Python float for a Python scalar (it broadcasts), else an array.
    """
    if isinstance(value, (float, int)) and not isinstance(value, bool):
        value = float(value)
        bad = not np.isfinite(value)
        if minimum is not None:
            bad = bad or (value <= minimum if strict else value < minimum)
        if bad:
            relation = ">" if strict else ">="
            rule = "finite" if minimum is None else f"finite and {relation} {minimum}"
            raise _fail(name, rule, value)
        return value
    arr = as_numpy(value).astype(np.float64, copy=False)
    if arr.ndim == 0:
        arr = np.full(replicas, arr)
    elif arr.shape != (replicas,):
        raise _fail(name, f"a float or an array of shape ({replicas},)", f"shape {arr.shape}")
    if replicas == 0:
        return arr
    low, high = arr.min(), arr.max()  # NaN propagates and fails both tests below
    if not (-np.inf < low and high < np.inf):
        raise _fail(name, "finite", arr.tolist())
    if minimum is not None and (low <= minimum if strict else low < minimum):
        relation = ">" if strict else ">="
        raise _fail(name, f"{relation} {minimum}", arr.tolist())
    return arr


def as_vector(value: Any, replicas: int) -> np.ndarray | float:
    """Return a per-replica value as a float (a Python scalar broadcasts) or a float64 array.

    A conversion, not a check: for values already checked where they entered.
    """
    if isinstance(value, (float, int)) and not isinstance(value, bool):
        return float(value)
    arr = as_numpy(value).astype(np.float64, copy=False)
    return np.full(replicas, arr) if arr.ndim == 0 else arr
