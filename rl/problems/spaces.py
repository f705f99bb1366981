"""Factored views of Gymnasium spaces: flatten, then one tensor mode per component.

`SpaceGrid` turns a Gymnasium space into Q-tensor modes and maps between the
environment's values and integer indices, for users' own environments
(`rl.problems.make_problem` with an id, an instance or a factory).

Flattening order. A space is flattened depth first into *leaves*, in the order
of ``Tuple.spaces`` and of ``Dict.spaces`` (Gymnasium keeps a ``Dict``'s keys
sorted when it is built from a plain dict, which is also the order of
``gymnasium.spaces.flatten``). Each leaf gives components in C order:

=====================  =======================  ===============================
leaf                   components (modes)       index of a value ``x``
=====================  =======================  ===============================
``Discrete(n, start)``  one, of size ``n``      ``x - start``
``MultiDiscrete(nvec)`` ``nvec.size``, ``nvec``  ``x - start``
``Box``                 ``prod(shape)``, bins    the uniform grid (`rl.problems.discretize`)
=====================  =======================  ===============================

Box components take their bins from ``bins`` and their bounds from ``low`` /
``high`` (one value for every Box component, or one per Box component in the
flattening order), else from the space when its bounds are finite. Discrete
components take no bins. Everything else (text, graphs, sequences, a Box
without finite bounds and none given, a Box of more than `MAX_COMPONENTS`
components, such as an image) is refused with one line saying what is needed.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from numpy.typing import ArrayLike, NDArray

from rl.problems.discretize import UniformGrid
from rl.validation import MAX_BINS, check_ints

MAX_COMPONENTS = 64
"""Largest number of flattened components (tensor modes) of one space; images exceed it."""


def _leaves(
    space: spaces.Space, role: str, keys: tuple[Any, ...] = ()
) -> list[tuple[tuple[Any, ...], spaces.Space]]:
    """Return (keys into a value, leaf space) in the flattening order."""
    if isinstance(space, spaces.Tuple):
        items: Any = enumerate(space.spaces)
    elif isinstance(space, spaces.Dict):
        items = space.spaces.items()
    elif isinstance(space, (spaces.Discrete, spaces.MultiDiscrete, spaces.Box)):
        return [(keys, space)]
    else:
        where = "".join(f"[{key!r}]" for key in keys)
        raise ValueError(
            f"The {role} space{where} {space} is not supported: use Discrete, MultiDiscrete, "
            "bounded Box, or a Tuple/Dict of those (wrap the environment to expose one)."
        )
    return [leaf for key, sub in items for leaf in _leaves(sub, role, (*keys, key))]


def _flat(leaves: list[tuple[tuple[Any, ...], spaces.Space]], value: Any) -> NDArray[np.float64]:
    """Return one value of a Tuple/Dict space as a flat float64 vector, leaf by leaf."""
    parts = []
    for keys, _ in leaves:
        item = value
        for key in keys:
            item = item[key]
        parts.append(np.asarray(item, dtype=np.float64).ravel())
    return np.concatenate(parts)


def box_bounds(space: spaces.Space, role: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return the space's own bounds (low, high) of its Box components, in the flattening order.

    Parameters
    ----------
    space : gymnasium.spaces.Space
        Discrete, MultiDiscrete, Box, or a Tuple/Dict of those.
    role : {"observation", "action"}
        Named in messages.

    Returns
    -------
    low, high : ndarray of float64, shape (Box components,)
        Possibly infinite; empty if the space has no Box component.
    """
    boxes = [leaf for _, leaf in _leaves(space, role) if isinstance(leaf, spaces.Box)]
    if not boxes:
        return np.zeros(0), np.zeros(0)
    low = np.concatenate([np.asarray(b.low, np.float64).ravel() for b in boxes])
    high = np.concatenate([np.asarray(b.high, np.float64).ravel() for b in boxes])
    return low, high


def box_values(space: spaces.Space, value: Any) -> NDArray[np.float64]:
    """Return the Box components of one value of ``space``, flat, in the flattening order."""
    leaves = _leaves(space, "observation")
    flat = _flat(leaves, value)
    sizes = [int(np.prod(leaf.shape, dtype=np.int64)) for _, leaf in leaves]
    kinds = [isinstance(leaf, spaces.Box) for _, leaf in leaves]
    return flat[np.repeat(np.array(kinds, dtype=bool), sizes)]


def _per_component(option: str, value: Any, count: int, role: str) -> NDArray[np.float64] | None:
    if value is None:
        return None
    array = np.asarray(value, dtype=np.float64).ravel()
    if array.size == 1:
        array = np.full(count, array[0])
    if array.size != count or not np.all(np.isfinite(array)):
        raise ValueError(
            f"The '{option}' option must be one finite float or {count} (one per {role} Box "
            f"component). Got {value!r} instead."
        )
    return array


class SpaceGrid:
    """One Gymnasium space as tensor modes: flattening, indexing and values.

    Parameters
    ----------
    space : gymnasium.spaces.Space
        Discrete, MultiDiscrete, Box, or a Tuple/Dict of those.
    role : {"observation", "action"}
        Named in messages.
    bins : int or sequence of int, optional
        Bins of the Box components (one for all, or one per Box component).
    low, high : float or sequence of float, optional
        Bounds of the Box components; default the space's own, when finite.
    rule : {"centre", "endpoint"}, default "centre"
        Index rule of the Box components (`rl.problems.discretize`); actions always use centres.

    Attributes
    ----------
    dims : tuple of int
        Mode sizes, in the flattening order.
    composite : bool
        Whether the space is a Tuple or Dict (values are not plain arrays).
    """

    def __init__(
        self,
        space: spaces.Space,
        role: str,
        *,
        bins: int | Sequence[int] | None = None,
        low: ArrayLike | None = None,
        high: ArrayLike | None = None,
        rule: str = "centre",
    ) -> None:
        self.space = space
        self.composite = isinstance(space, (spaces.Tuple, spaces.Dict))
        self._leaves = _leaves(space, role)
        sizes = [int(np.prod(leaf.shape, dtype=np.int64)) for _, leaf in self._leaves]
        self.n_components = sum(sizes)
        if self.n_components > MAX_COMPONENTS:
            raise ValueError(
                f"The {role} space {space} has {self.n_components} components, more than "
                f"{MAX_COMPONENTS}: a factored Q-tensor needs a few modes (images are not "
                "supported; wrap the environment to expose a few features)."
            )
        kinds = [isinstance(leaf, spaces.Box) for _, leaf in self._leaves]
        box = np.repeat(np.array(kinds, dtype=bool), sizes)
        self._box = box
        self._grid = self._box_grid(role, bins, low, high, rule) if box.any() else None
        dims = np.zeros(self.n_components, dtype=np.int64)
        starts = np.zeros(self.n_components, dtype=np.int64)
        column = 0
        for size, (_, leaf) in zip(sizes, self._leaves, strict=True):
            if isinstance(leaf, spaces.Discrete):
                dims[column], starts[column] = int(leaf.n), int(leaf.start)
            elif isinstance(leaf, spaces.MultiDiscrete):
                dims[column : column + size] = np.asarray(leaf.nvec).ravel()
                starts[column : column + size] = np.asarray(leaf.start).ravel()
            column += size
        if self._grid is not None:
            dims[box] = self._grid.bins
        check_ints(f"{role} mode sizes", dims.tolist(), 1, MAX_BINS)
        self._sizes = sizes
        self._starts = starts
        self._last = dims - 1
        self._warned = False  # whether `index` has warned of values outside the space
        self.dims: tuple[int, ...] = tuple(int(d) for d in dims)

    def _box_grid(
        self, role: str, bins: Any, low: ArrayLike | None, high: ArrayLike | None, rule: str
    ) -> UniformGrid:
        boxes = [leaf for _, leaf in self._leaves if isinstance(leaf, spaces.Box)]
        count = sum(int(np.prod(leaf.shape, dtype=np.int64)) for leaf in boxes)
        option = "state_bins" if role == "observation" else "action_bins"
        prefix = "" if role == "observation" else "action_"
        if bins is None:
            raise ValueError(
                f"The {role} space has {count} continuous (Box) components: pass '{option}' "
                "(bins per component) to discretize them."
            )
        space_low = np.concatenate([np.asarray(b.low, np.float64).ravel() for b in boxes])
        space_high = np.concatenate([np.asarray(b.high, np.float64).ravel() for b in boxes])
        lows = _per_component(f"{prefix}low", low, count, role)
        highs = _per_component(f"{prefix}high", high, count, role)
        lows = space_low if lows is None else lows
        highs = space_high if highs is None else highs
        if not (np.all(np.isfinite(lows)) and np.all(np.isfinite(highs))):
            raise ValueError(
                f"The {role} space has unbounded Box components (low {space_low.tolist()}, high "
                f"{space_high.tolist()}): pass '{prefix}low' and '{prefix}high' "
                f"(one value or {count}) to bound the grid."
            )
        bins_array = np.asarray(bins)
        if bins_array.ndim == 0:
            bins_array = np.full(count, bins_array)
        if bins_array.shape != (count,):
            raise ValueError(
                f"The '{option}' option must be an int in [1, {MAX_BINS}] or {count} such ints "
                f"(one per Box component). Got {bins!r} instead."
            )
        bins_tuple = check_ints(option, bins_array.tolist(), 1, MAX_BINS)
        return UniformGrid(lows, highs, bins_tuple, rule)

    def flatten(self, value: Any) -> NDArray[np.float64]:
        """Return one value of the space as a flat float64 vector (n_components,)."""
        if not self.composite:
            return np.asarray(value, dtype=np.float64).ravel()
        return _flat(self._leaves, value)

    def _outside(self, rows: NDArray[np.float64]) -> NDArray[np.bool_]:
        """Mask (B, n_components) of discrete components not an integer of their leaf's range."""
        shifted = rows - self._starts
        wrong = (shifted != np.rint(shifted)) | (shifted < 0) | (shifted > self._last)
        return wrong & ~self._box

    def check(self, value: ArrayLike) -> None:
        """Refuse one flat value (n_components,) whose discrete components lie outside the space.

        Raises
        ------
        ValueError
            Naming the first component that is not an integer, or lies outside
            ``[start, start + n)`` of its Discrete or MultiDiscrete leaf.
        """
        value = np.asarray(value, dtype=np.float64).reshape(self.n_components)
        wrong = self._outside(value[None])[0]
        if wrong.any():
            i = int(np.flatnonzero(wrong)[0])
            low, high = int(self._starts[i]), int(self._starts[i] + self._last[i])
            kind = "not an integer in" if value[i] != np.rint(value[i]) else "outside"
            raise ValueError(
                f"Component {i} of the observation is {value[i]:g}: {kind} the values "
                f"{low}..{high} of the space {self.space}."
            )

    def index(self, rows: ArrayLike) -> NDArray[np.int64]:
        """Map a batch of flat values (B, n_components) to mode indices (B, n_components).

        Discrete components outside their space are rounded and clipped to it,
        with a `RuntimeWarning` the first time (per grid); Box components are
        clipped to the grid (`rl.problems.discretize`).
        """
        rows = np.asarray(rows, dtype=np.float64).reshape(-1, self.n_components)
        if not self._warned and self._outside(rows).any():
            self._warned = True
            warnings.warn(
                f"Observations outside the space {self.space} (a discrete component not one of "
                "its integers) are rounded and clipped into it; fix the environment's "
                "observations or its observation space.",
                RuntimeWarning,
                stacklevel=2,
            )
        out = np.clip(np.rint(rows - self._starts), 0, self._last).astype(np.int64)
        if self._grid is not None:
            out[:, self._box] = self._grid.index(rows[:, self._box])
        return out

    def value(self, index: ArrayLike) -> Any:
        """Map mode indices (B, n_components) to B values of the space.

        Returns an array whose row i is value i (Box leaves: bin centres in the
        space's dtype) for a plain space, and a list of tuples or dicts for a
        Tuple or Dict space.
        """
        index = np.asarray(index, dtype=np.int64).reshape(-1, self.n_components)
        values = (index + self._starts).astype(np.float64)
        if self._grid is not None:
            values[:, self._box] = self._grid.value(index[:, self._box])
        leaves, column = [], 0
        for size, (_, leaf) in zip(self._sizes, self._leaves, strict=True):
            block = values[:, column : column + size]
            column += size
            if isinstance(leaf, spaces.Discrete):
                leaves.append(block[:, 0].astype(leaf.dtype))
            else:
                leaves.append(block.reshape((-1, *leaf.shape)).astype(leaf.dtype))
        if not self.composite:
            return leaves[0]
        return [_assemble(self.space, iter(row)) for row in zip(*leaves, strict=True)]


def _assemble(space: spaces.Space, items: Any) -> Any:
    if isinstance(space, spaces.Tuple):
        return tuple(_assemble(sub, items) for sub in space.spaces)
    if isinstance(space, spaces.Dict):
        return {key: _assemble(sub, items) for key, sub in space.spaces.items()}
    return next(items)
