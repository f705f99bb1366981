"""rl.problems.discretize: index rules, round trips, clipping, batching and validation."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rl.problems.discretize import PRESETS, DiscreteGrid, UniformGrid

RULES = ["centre", "endpoint"]


@st.composite
def grids(draw):
    d = draw(st.integers(1, 4))
    low = np.array(draw(st.lists(st.floats(-100, 100), min_size=d, max_size=d)))
    width = np.array(draw(st.lists(st.floats(1e-2, 100), min_size=d, max_size=d)))
    bins = draw(st.lists(st.integers(1, 30), min_size=d, max_size=d))
    return UniformGrid(low, low + width, bins, rule=draw(st.sampled_from(RULES)))


@given(grids(), st.integers(0, 2**31))
def test_index_value_index_round_trip(grid, seed):
    rng = np.random.default_rng(seed)
    index = rng.integers(0, grid.bins, size=(7, grid.ndim))
    values = grid.value(index)
    assert np.array_equal(grid.index(values), index)
    assert np.all(values >= grid.low) and np.all(values <= grid.high)


@given(grids(), st.integers(0, 2**31))
def test_index_is_vectorized_and_clips(grid, seed):
    rng = np.random.default_rng(seed)
    span = grid.high - grid.low
    x = rng.uniform(grid.low - span, grid.high + span, size=(9, grid.ndim))
    batch = grid.index(x)
    assert batch.dtype == np.int64 and batch.shape == x.shape
    assert np.array_equal(batch, np.stack([grid.index(row) for row in x]))
    assert np.all(batch >= 0) and np.all(batch < grid.bins)
    below, above = grid.index(grid.low - span), grid.index(grid.high + span)
    assert np.all(below == 0) and np.array_equal(above, grid.bins - 1)


@given(arrays(np.float64, 5, elements=st.floats(-1, 1)))
def test_centre_rule_is_floor(x):
    grid = UniformGrid(-1.0, 1.0, 10)
    expected = np.clip(np.floor((x + 1) / 2 * 10), 0, 9)
    assert np.array_equal(grid.index(x[:, None])[:, 0], expected)


def test_endpoint_rule_is_the_authors_rounding():
    grid = UniformGrid([-4.8], [4.8], [10], rule="endpoint")
    x = np.array([[-4.8], [-4.3], [-4.2], [0.0], [4.8], [9.0]])
    expected = np.clip(np.rint((x + 4.8) / 9.6 * 9), 0, 9)
    assert np.array_equal(grid.index(x), expected)
    np.testing.assert_allclose(grid.value(np.array([[0], [9]])), [[-4.8], [4.8]])


def test_centre_values_are_bin_centres():
    grid = UniformGrid(-1.0, 1.0, 10)
    np.testing.assert_allclose(grid.value(np.arange(10)[:, None])[:, 0], np.linspace(-0.9, 0.9, 10))
    assert grid.dims == (10,)


def test_single_bin():
    for rule in RULES:
        grid = UniformGrid([0.0], [2.0], 1, rule=rule)
        assert grid.index(np.array([[5.0], [-3.0]])).tolist() == [[0], [0]]
        assert grid.value(np.array([0])).tolist() == [1.0]


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(low=[0.0, 1.0], high=[1.0, 1.0], bins=3), "low"),
        (dict(low=[2.0], high=[1.0], bins=3), "low"),
        (dict(low=[0.0], high=[1.0], bins=0), "bins"),
        (dict(low=[0.0, 0.0], high=[1.0, 1.0], bins=[3, 0]), "bins"),
        (dict(low=[0.0, 0.0], high=[1.0, 1.0], bins=[3, 3, 3]), "bins"),
        (dict(low=[0.0], high=[1.0], bins=2.5), "bins"),
        (dict(low=[0.0, 0.0], high=[1.0], bins=3), "high"),
        (dict(low=[np.nan], high=[1.0], bins=3), "low"),
        (dict(low=[0.0], high=[1.0], bins=3, rule="floor"), "rule"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=f"'{name}'"):
        UniformGrid(**kwargs)


def test_shape_mismatch_of_inputs():
    grid = UniformGrid([0.0, 0.0], [1.0, 1.0], 4)
    with pytest.raises(ValueError, match="'x'"):
        grid.index(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="'index'"):
        grid.value(np.array([[4, 0]]))


def test_discrete_grid_passes_through():
    scalar = DiscreteGrid((5,), scalar=True)
    assert scalar.index(np.array([0, 4, 2])).tolist() == [[0], [4], [2]]
    assert scalar.value(np.array([[3], [1]])).tolist() == [3, 1]
    multi = DiscreteGrid((2, 5, 5))
    x = np.array([[1, 4, 0], [0, 2, 3]])
    assert np.array_equal(multi.index(x), x) and np.array_equal(multi.value(x), x)
    assert multi.dims == (2, 5, 5)
    with pytest.raises(ValueError, match="dims"):
        DiscreteGrid((0,))


def test_presets_match_the_paper():
    cart = PRESETS["cartpole"]
    assert cart.state_grid().dims == (10, 10, 20, 20) and cart.action_grid().dims == (10,)
    np.testing.assert_allclose(cart.state_high, (4.8, 0.5, 0.42, 0.9))
    pend = PRESETS["pendulum"]
    assert pend.state_grid().dims == (20, 20) and pend.action_grid().dims == (10,)
    np.testing.assert_allclose(pend.state_high, (1.0, 5.0))
    np.testing.assert_allclose(pend.action_grid().value(np.array([[0], [9]])), [[-1.8], [1.8]])
    hw = PRESETS["highway"]
    assert hw.state_grid().dims == (20,) * 9 and hw.action_grid().dims == (5,)
    assert cart.state_grid(bins=(3, 3, 3, 3)).dims == (3, 3, 3, 3)


def _numpy_index(grid, x):
    """The plain NumPy formula the compiled `uniform_index` must reproduce."""
    with np.errstate(invalid="ignore"):
        scaled = (x - grid.low) * grid._scale
    raw = np.floor(scaled) if grid.rule == "centre" else np.rint(scaled)
    return np.clip(np.nan_to_num(raw), 0, grid.bins - 1).astype(np.int64)


def _numpy_value(grid, index):
    """The plain NumPy formula the compiled `uniform_value` must reproduce."""
    if grid.rule == "centre":
        return grid.low + (index + 0.5) * grid._width
    points = np.minimum(grid.low + index * grid._width, grid.high)
    return np.where(grid.bins == 1, 0.5 * (grid.low + grid.high), points)


@given(grids(), st.integers(0, 2**31))
def test_compiled_index_and_value_equal_the_numpy_formulas(grid, seed):
    rng = np.random.default_rng(seed)
    span = grid.high - grid.low
    x = rng.uniform(grid.low - span, grid.high + span, size=(11, grid.ndim))
    x[0] = np.nan
    x[1] = np.inf
    x[2] = -np.inf
    x[3] = grid.value(grid.bins - 1)  # exact centres / grid points
    assert np.array_equal(grid.index(x), _numpy_index(grid, x))
    index = rng.integers(0, grid.bins, size=(6, grid.ndim))
    assert np.array_equal(grid.value(index), _numpy_value(grid, index))  # bitwise
    assert np.array_equal(grid.index(x[0:1].reshape(grid.ndim)), _numpy_index(grid, x[0]))


def test_value_rejects_out_of_range_and_float_indices():
    grid = UniformGrid([0.0, 0.0], [1.0, 1.0], [3, 4])
    for bad in (np.array([[0, 4]]), np.array([[-1, 0]]), np.array([[0.0, 1.0]])):
        with pytest.raises(ValueError, match="'index'"):
            grid.value(bad)
