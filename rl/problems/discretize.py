"""Uniform grids between continuous observations/actions and integer bin indices.

A `UniformGrid` covers a Box with ``bins[d]`` cells per dimension. Two index
rules are offered:

``"centre"`` (default)
    cell ``i`` is ``[low + i w, low + (i + 1) w)`` with ``w = (high - low) / bins``;
    ``index(x) = floor((x - low) / w)`` and ``value(i) = low + (i + 1/2) w``,
    the bin centre.
``"endpoint"`` (the authors' released code)
    ``index(x) = round((x - low) / (high - low) * (bins - 1))`` and
    ``value(i) = low + i (high - low) / (bins - 1)``, the grid points including
    both ends. The outermost cells are half as wide as the inner ones.

Under both rules out-of-range inputs are clipped to the first or last bin and
``index(value(i)) == i``. `DiscreteGrid` is the identity map for spaces that
are already discrete. `PRESETS` holds the paper's grids.

`UniformGrid.index` and `UniformGrid.value` run as two small compiled kernels
(`uniform_index`, `uniform_value`): the runner encodes observations and
decodes actions at every step, and at B = 1 a chain of NumPy calls would cost
more than the arithmetic. They compute exactly the NumPy formulas above
(``tests/rl/test_discretize.py`` keeps those as the reference).

References
----------
.. [1] S. Rozada, S. Paternain, A. G. Marques, "Tensor and matrix low-rank
   value-function approximation in reinforcement learning", IEEE TSP, 2024
   (the CartPole and Pendulum grids).
.. [2] TEQL paper, Table of hyperparameters (bins per dimension).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rl.jit import kernel

RULES = ("centre", "endpoint")


class GridArrays(NamedTuple):
    """A `UniformGrid` as compiled code reads it (`bin_index`, `bin_value`), shape (D,) each.

    Attributes
    ----------
    low, high : ndarray of float64
        The interval of every dimension.
    scale, width : ndarray of float64
        Bins per unit and bin width of every dimension.
    last : ndarray of int64
        The last bin index of every dimension.
    centre : bool
        The index rule: ``"centre"`` (True) or ``"endpoint"``.
    """

    low: NDArray[np.float64]
    high: NDArray[np.float64]
    scale: NDArray[np.float64]
    width: NDArray[np.float64]
    last: NDArray[np.int64]
    centre: bool


@kernel
def bin_index(x: float, low: float, scale: float, last: int, centre: bool) -> int:
    """Bin index of one coordinate: ``(x - low) scale`` floored (centre) or rounded (endpoint).

    Round-half-to-even (``numpy.rint``) for the endpoint rule; NaN maps to bin
    0 and +-inf to the last or first bin, as ``clip(nan_to_num(raw), 0, last)`` does.
    """
    scaled = (x - low) * scale
    raw = np.floor(scaled) if centre else np.rint(scaled)
    if math.isnan(raw) or raw <= 0.0:
        return 0
    if raw >= last:
        return last
    return int(raw)


@kernel
def bin_value(k: int, low: float, high: float, width: float, last: int, centre: bool) -> float:
    """Point of bin ``k`` (in range): its centre, or its grid point (endpoint rule).

    Centre rule: ``low + (k + 1/2) width``. Endpoint rule: ``min(low + k width,
    high)``, or the middle of the interval when the dimension has one bin.
    """
    if centre:
        return low + (k + 0.5) * width
    if last == 0:
        return 0.5 * (low + high)
    return min(low + k * width, high)


@kernel
def uniform_index(
    x: NDArray[np.float64],
    low: NDArray[np.float64],
    scale: NDArray[np.float64],
    last: NDArray[np.int64],
    centre: bool,
) -> NDArray[np.int64]:
    """Return the bin indices of the rows of ``x`` (N, D), one `bin_index` per coordinate."""
    n_rows, n_dims = x.shape
    out = np.empty((n_rows, n_dims), dtype=np.int64)
    for i in range(n_rows):
        for j in range(n_dims):
            out[i, j] = bin_index(x[i, j], low[j], scale[j], last[j], centre)
    return out


@kernel
def uniform_value(
    index: NDArray[np.int64],
    low: NDArray[np.float64],
    high: NDArray[np.float64],
    width: NDArray[np.float64],
    last: NDArray[np.int64],
    centre: bool,
) -> tuple[NDArray[np.float64], bool]:
    """Return the points of the index rows (N, D) (`bin_value`) and whether all were in range."""
    n_rows, n_dims = index.shape
    out = np.empty((n_rows, n_dims))
    for i in range(n_rows):
        for j in range(n_dims):
            k = index[i, j]
            if k < 0 or k > last[j]:
                return out, False
            out[i, j] = bin_value(k, low[j], high[j], width[j], last[j], centre)
    return out, True


class UniformGrid:
    """A uniform grid over a box ``[low, high]`` with ``bins`` cells per dimension.

    Parameters
    ----------
    low, high : array-like of float, shape (D,)
        Bounds per dimension; ``low < high`` elementwise (scalars mean D = 1).
    bins : int or array-like of int, shape (D,)
        Cells per dimension, each >= 1 (an int is used for every dimension).
    rule : {"centre", "endpoint"}, default "centre"
        Index rule; see the module docstring.

    Attributes
    ----------
    dims : tuple of int
        ``bins`` as a tuple: the Q-tensor mode sizes of these dimensions.
    """

    def __init__(
        self, low: ArrayLike, high: ArrayLike, bins: int | ArrayLike, rule: str = "centre"
    ) -> None:
        low_arr = np.atleast_1d(np.asarray(low, dtype=np.float64))
        high_arr = np.atleast_1d(np.asarray(high, dtype=np.float64))
        if low_arr.ndim != 1 or not np.all(np.isfinite(low_arr)):
            raise ValueError(
                f"The 'low' parameter must be a finite 1-D array. Got {low!r} instead."
            )
        if high_arr.shape != low_arr.shape or not np.all(np.isfinite(high_arr)):
            raise ValueError(
                f"The 'high' parameter must be finite with the shape of 'low' {low_arr.shape}. "
                f"Got {high!r} instead."
            )
        if np.any(low_arr >= high_arr):
            raise ValueError(
                f"The 'low' parameter must be < 'high' elementwise. Got low={low!r}, high={high!r}."
            )
        bins_arr = np.asarray(bins)
        if bins_arr.ndim == 0:
            bins_arr = np.full(low_arr.shape, bins_arr)
        if (
            bins_arr.shape != low_arr.shape
            or not np.issubdtype(bins_arr.dtype, np.integer)
            or np.any(bins_arr < 1)
        ):
            raise ValueError(
                f"The 'bins' parameter must be ints >= 1, one per dimension ({low_arr.size}). "
                f"Got {bins!r} instead."
            )
        if rule not in RULES:
            raise ValueError(f"The 'rule' parameter must be one of {RULES}. Got {rule!r} instead.")
        self.low = low_arr
        self.high = high_arr
        self.bins = bins_arr.astype(np.int64)
        self.rule = rule
        self.dims: tuple[int, ...] = tuple(int(b) for b in self.bins)
        self._last = self.bins - 1
        self._centre = rule == "centre"
        if rule == "centre":
            self._scale = self.bins / (high_arr - low_arr)
            self._width = (high_arr - low_arr) / self.bins
        else:
            self._scale = self._last / (high_arr - low_arr)
            self._width = (high_arr - low_arr) / np.maximum(self._last, 1)

    @property
    def ndim(self) -> int:
        """Number of dimensions D."""
        return len(self.dims)

    def kernel_arrays(self) -> GridArrays:
        """Return what `bin_index` and `bin_value` read, as a `GridArrays`.

        Arrays of shape (D,), indexed per dimension; compiled code (the fused
        runner, `rl.loop.fused`) encodes and decodes with them exactly as `index`
        and `value` do.
        """
        return GridArrays(self.low, self.high, self._scale, self._width, self._last, self._centre)

    def _check(self, x: NDArray, name: str) -> None:
        if x.shape[-1:] != (self.ndim,):
            raise ValueError(
                f"The '{name}' parameter must have a trailing axis of size {self.ndim}. "
                f"Got shape {x.shape} instead."
            )

    def index(self, x: ArrayLike) -> NDArray[np.int64]:
        """Map points to bin indices, clipping out-of-range values.

        Parameters
        ----------
        x : array-like, shape (..., D)
            One point (D,) or a batch (B, D).

        Returns
        -------
        ndarray of int64, shape (..., D)
        """
        x = np.asarray(x, dtype=np.float64)
        self._check(x, "x")
        rows = x.reshape(-1, self.ndim)
        out = uniform_index(rows, self.low, self._scale, self._last, self._centre)
        return out.reshape(x.shape)

    def value(self, index: ArrayLike) -> NDArray[np.float64]:
        """Map bin indices to representative points (bin centres or grid points).

        Parameters
        ----------
        index : array-like of int, shape (..., D)

        Returns
        -------
        ndarray of float64, shape (..., D)
        """
        index = np.asarray(index)
        self._check(index, "index")
        valid = np.issubdtype(index.dtype, np.integer)
        if valid:
            rows = index.reshape(-1, self.ndim).astype(np.int64, copy=False)
            values, valid = uniform_value(
                rows, self.low, self.high, self._width, self._last, self._centre
            )
        if not valid:
            raise ValueError(f"The 'index' parameter must be ints in [0, bins). Got {index!r}.")
        return values.reshape(index.shape)  # the endpoint rule never goes an ulp past high

    def __repr__(self) -> str:
        return (
            f"UniformGrid(low={self.low.tolist()}, high={self.high.tolist()}, "
            f"bins={list(self.dims)}, rule={self.rule!r})"
        )


class DiscreteGrid:
    """Identity map for Discrete / MultiDiscrete spaces, with the `UniformGrid` interface.

    Parameters
    ----------
    dims : sequence of int
        Number of values of each component (``nvec``; ``(n,)`` for ``Discrete(n)``).
    scalar : bool, default False
        True for a ``Discrete`` space: `value` drops the trailing axis (an
        index batch (B, 1) becomes actions (B,)) and `index` adds it.
    """

    def __init__(self, dims: Sequence[int], scalar: bool = False) -> None:
        dims = tuple(int(d) for d in dims)
        if not dims or any(d < 1 for d in dims):
            raise ValueError(f"The 'dims' parameter must be ints >= 1. Got {dims!r} instead.")
        if scalar and len(dims) != 1:
            raise ValueError("The 'scalar' option needs exactly one component.")
        self.dims = dims
        self.scalar = scalar
        self._last = np.asarray(dims) - 1

    @property
    def ndim(self) -> int:
        """Number of components D."""
        return len(self.dims)

    def index(self, x: ArrayLike) -> NDArray[np.int64]:
        """Return the values themselves as int64 (clipped), shape (..., D)."""
        x = np.asarray(x)
        if self.scalar:
            x = x[..., None]
        return np.clip(x, 0, self._last).astype(np.int64)

    def check(self, value: ArrayLike) -> None:
        """Refuse one value (D,) that is not a vector of integers in ``[0, dims)``.

        Raises
        ------
        ValueError
            Naming the first component that is not one of its mode's integers.
        """
        value = np.asarray(value, dtype=np.float64).reshape(self.ndim)
        wrong = (value != np.rint(value)) | (value < 0) | (value > self._last)
        if wrong.any():
            i = int(np.flatnonzero(wrong)[0])
            raise ValueError(
                f"Component {i} of the observation is {value[i]:g}: not one of the integers "
                f"0..{self._last[i]} of its mode (outside the space)."
            )

    def value(self, index: ArrayLike) -> NDArray[np.int64]:
        """Return the indices as environment actions (trailing axis dropped if scalar)."""
        index = np.asarray(index, dtype=np.int64)
        return index[..., 0] if self.scalar else index

    def __repr__(self) -> str:
        return f"DiscreteGrid(dims={list(self.dims)}, scalar={self.scalar})"


@dataclass(frozen=True)
class GridPreset:
    """The paper's discretization of one environment.

    Attributes
    ----------
    state_low, state_high : tuple of float
        State ranges.
    state_bins : tuple of int
        Bins per state dimension.
    action_low, action_high : tuple of float or None
        Action range (None for a discrete action space).
    action_bins : tuple of int
        Bins per action dimension (the number of actions when discrete).
    """

    state_low: tuple[float, ...]
    state_high: tuple[float, ...]
    state_bins: tuple[int, ...]
    action_low: tuple[float, ...] | None
    action_high: tuple[float, ...] | None
    action_bins: tuple[int, ...]

    def state_grid(self, rule: str = "centre", bins: Sequence[int] | None = None) -> UniformGrid:
        """Build the state grid, optionally with other bins."""
        return UniformGrid(self.state_low, self.state_high, bins or self.state_bins, rule)

    def action_grid(
        self, rule: str = "centre", bins: Sequence[int] | None = None
    ) -> UniformGrid | DiscreteGrid:
        """Build the action grid (a `DiscreteGrid` for discrete actions)."""
        if self.action_low is None:
            return DiscreteGrid(self.action_bins, scalar=True)
        return UniformGrid(self.action_low, self.action_high, bins or self.action_bins, rule)


#: The paper's grids (TEQL paper, Table of hyperparameters; ranges from the released code).
PRESETS: dict[str, GridPreset] = {
    "cartpole": GridPreset(
        state_low=(-4.8, -0.5, -0.42, -0.9),
        state_high=(4.8, 0.5, 0.42, 0.9),
        state_bins=(10, 10, 20, 20),
        action_low=(-1.0,),
        action_high=(1.0,),
        action_bins=(10,),
    ),
    "pendulum": GridPreset(
        state_low=(-1.0, -5.0),
        state_high=(1.0, 5.0),
        state_bins=(20, 20),
        action_low=(-2.0,),
        action_high=(2.0,),
        action_bins=(10,),
    ),
    "highway": GridPreset(
        state_low=(-1.0,) * 9,
        state_high=(1.0,) * 9,
        state_bins=(20,) * 9,
        action_low=None,
        action_high=None,
        action_bins=(5,),
    ),
}
