"""`rl.agents.borrowed`: the same arrays inside a kernel, without reference counts."""

from typing import NamedTuple

import numpy as np
from numba import njit
from numba.typed import List

from rl.agents.borrowed import borrowed


class Bundle(NamedTuple):
    values: np.ndarray
    counts: np.ndarray
    size: int


@njit
def _write_through(values, index, value):
    view = borrowed(values)
    view[index] = value
    return view.sum()


@njit
def _views(matrix):
    view = borrowed(matrix)
    row, block, flat = view[1], view[:, 1:], view.reshape(view.size)
    return row.sum(), block.sum(), flat[-1]


@njit
def _bundle(bundle):
    view = borrowed(bundle)
    view.counts[0] += view.size
    return view.values.sum(), view.counts.sum(), view.size


@njit
def _list_in_tuple(pair):
    view = borrowed(pair)
    return len(view[1]) + view[0][0]


def test_writes_through_a_borrowed_array_land_in_the_original() -> None:
    values = np.arange(5.0)
    total = _write_through(values, 2, 10.0)
    assert values.tolist() == [0.0, 1.0, 10.0, 3.0, 4.0]
    assert total == 18.0


def test_views_of_a_borrowed_array_read_the_original_numbers() -> None:
    matrix = np.arange(12.0).reshape(3, 4)
    assert _views(matrix) == (matrix[1].sum(), matrix[:, 1:].sum(), 11.0)


def test_a_named_tuple_is_borrowed_member_by_member() -> None:
    bundle = Bundle(np.array([0.5, 1.5]), np.array([1, 2], dtype=np.int64), 3)
    assert _bundle(bundle) == (2.0, 6, 3)
    assert bundle.counts.tolist() == [4, 2]


def test_a_typed_list_in_a_borrowed_tuple_keeps_its_reference_count() -> None:
    # The list is not an array: the result owns a counted reference to it, so the
    # decrement at the end of every call must not free it.
    items = List([1.0, 2.0, 3.0])
    pair = (np.array([0.25]), items)
    for _ in range(1000):
        assert _list_in_tuple(pair) == 3.25
    assert list(items) == [1.0, 2.0, 3.0]
