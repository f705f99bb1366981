import numpy as np
import pytest
import tensorly as tl
from hypothesis import given
from hypothesis import strategies as st
from tensorly.cp_tensor import CPTensor

from tensorq import OnlineCP


@st.composite
def tensors_and_indices(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    rank = draw(st.integers(1, 3))
    replicas = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    q = OnlineCP.random(shape, rank, replicas=replicas, rng=rng)
    index = rng.integers(0, shape, size=(replicas, len(shape)))
    return q, index


def dense(q, b):
    return tl.cp_to_tensor(q.to_cp_tensor(b))


@given(tensors_and_indices())
def test_entries_equal_cp_to_tensor(case):
    q, index = case
    values = q.entries(index)
    assert values.shape == (q.replicas,)
    for b in range(q.replicas):
        np.testing.assert_allclose(values[b], dense(q, b)[tuple(index[b])], rtol=1e-12, atol=1e-14)


@given(tensors_and_indices(), st.data())
def test_subtensor_equals_cp_to_tensor_slices(case, data):
    q, index = case
    k = data.draw(st.integers(0, len(q.shape)))
    sub = q.subtensor(index[:, :k])
    assert sub.shape == (q.replicas, *q.shape[k:])
    for b in range(q.replicas):
        np.testing.assert_allclose(sub[b], dense(q, b)[tuple(index[b, :k])], rtol=1e-12, atol=1e-14)


def test_subtensor_over_actions_matches_entries():
    q = OnlineCP.random((10, 10, 20, 20, 10), 10, replicas=4, rng=0)
    index = np.random.default_rng(1).integers(0, q.shape, size=(4, 5))
    values = q.subtensor(index[:, :4])
    assert values.shape == (4, 10)
    np.testing.assert_allclose(values[np.arange(4), index[:, 4]], q.entries(index), rtol=1e-13)


def test_to_dense_matches_and_refuses_large():
    q = OnlineCP.random((2, 3, 4), 2, replicas=2, rng=0)
    full = q.to_dense()
    for b in range(2):
        np.testing.assert_allclose(full[b], dense(q, b), rtol=1e-13)
    with pytest.raises(ValueError, match="max_size"):
        q.to_dense(max_size=47)
    assert q.to_dense(max_size=48).shape == (2, 2, 3, 4)


def test_to_cp_tensor_is_a_view():
    q = OnlineCP.random((2, 3), 2, replicas=2, rng=0)
    cp = q.to_cp_tensor(1)
    assert isinstance(cp, CPTensor)
    np.testing.assert_array_equal(cp.weights, np.ones(2))
    q.factors[0][1, 0, 0] = 7.0
    assert cp.factors[0][0, 0] == 7.0
    cp.factors[1][2, 1] = -3.0
    assert q.factors[1][1, 2, 1] == -3.0
    assert q.to_cp_tensor(0).factors[0][0, 0] != 7.0


def test_from_cp_tensor_absorbs_weights_and_copies_replicas():
    rng = np.random.default_rng(0)
    cp = CPTensor((np.array([2.0, -1.0]), [rng.random((3, 2)), rng.random((4, 2))]))
    q = OnlineCP.from_cp_tensor(cp, replicas=3)
    assert (q.shape, q.rank, q.replicas) == ((3, 4), 2, 3)
    for b in range(3):
        np.testing.assert_allclose(dense(q, b), tl.cp_to_tensor(cp), rtol=1e-13)
    q.factors[0][0, 0, 0] = 100.0
    assert q.factors[0][1, 0, 0] != 100.0
    assert cp.factors[0][0, 0] != 100.0


def test_from_parafac_output():
    tensor = OnlineCP.random((4, 5, 3), 2, rng=3).to_dense()[0]
    cp = tl.decomposition.parafac(tl.tensor(tensor), rank=2, init="random", random_state=0)
    q = OnlineCP.from_cp_tensor(cp)
    np.testing.assert_allclose(q.to_dense()[0], tl.cp_to_tensor(cp), rtol=1e-12)


def test_sizes():
    q = OnlineCP.random((10, 10, 20, 20, 10), 10, replicas=3, rng=0)
    assert q.n_params == 10 * 70
    assert q.shape == (10, 10, 20, 20, 10)
    assert (q.rank, q.replicas, q.backend) == (10, 3, "numpy")
    assert [f.shape for f in q.factors] == [(3, d, 10) for d in q.shape]


def test_random_is_seeded_uniform_float64():
    a = OnlineCP.random((3, 4), 2, replicas=2, scale=0.5, rng=np.random.default_rng(5))
    b = OnlineCP.random((3, 4), 2, replicas=2, scale=0.5, rng=np.random.default_rng(5))
    c = OnlineCP.random((3, 4), 2, replicas=2, scale=0.5, rng=np.random.default_rng(6))
    for fa, fb, fc in zip(a.factors, b.factors, c.factors, strict=True):
        assert fa.dtype == np.float64
        np.testing.assert_array_equal(fa, fb)
        assert not np.array_equal(fa, fc)
        assert fa.min() >= 0 and fa.max() < 0.5


def test_rows_are_copies_of_factor_rows():
    q = OnlineCP.random((3, 4), 2, replicas=2, rng=0)
    rows = q.rows(np.array([[2, 1], [0, 3]]))
    np.testing.assert_array_equal(rows[1][1], q.factors[1][1, 3])
    rows[0][0, 0] = 9.0
    assert q.factors[0][0, 2, 0] != 9.0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"shape": (3, 4), "rank": 0}, "rank"),
        ({"shape": (3, 0), "rank": 2}, "shape"),
        ({"shape": (3, -1), "rank": 2}, "shape"),
        ({"shape": (), "rank": 2}, "shape"),
        ({"shape": (3, 4), "rank": 2, "replicas": 0}, "replicas"),
        ({"shape": (3, 4), "rank": 2, "scale": 0.0}, "scale"),
        ({"shape": (3, 4), "rank": 2.5}, "rank"),
    ],
)
def test_random_rejects_bad_parameters(kwargs, name):
    with pytest.raises(ValueError, match=f"'{name}'"):
        OnlineCP.random(**kwargs)


def test_rank_message_is_sklearn_style():
    with pytest.raises(
        ValueError, match=r"The 'rank' parameter must be an int >= 1. Got 0 instead."
    ):
        OnlineCP.random((3, 4), 0)


@pytest.mark.parametrize(
    "index",
    [
        np.array([[0, 4], [0, 0]]),  # out of range
        np.array([[-1, 0], [0, 0]]),  # negative
        np.array([[0, 0]]),  # B mismatch
        np.array([[0, 0, 0], [0, 0, 0]]),  # wrong N
        np.array([[0.0, 0.0], [0.0, 0.0]]),  # not int
        np.array([0, 0]),  # 1-D
    ],
)
def test_entries_reject_bad_index(index):
    q = OnlineCP.random((3, 4), 2, replicas=2, rng=0)
    with pytest.raises(ValueError, match="'index'"):
        q.entries(index)


def test_subtensor_rejects_bad_leading():
    q = OnlineCP.random((3, 4), 2, replicas=2, rng=0)
    with pytest.raises(ValueError, match="'leading'"):
        q.subtensor(np.zeros((2, 3), dtype=int))
    with pytest.raises(ValueError, match="'leading'"):
        q.subtensor(np.array([[3], [0]]))


def test_constructor_rejects_inconsistent_factors():
    with pytest.raises(ValueError, match="'factors'"):
        OnlineCP([np.ones((2, 3, 2)), np.ones((1, 3, 2))])
    with pytest.raises(ValueError, match="'factors'"):
        OnlineCP([np.ones((3, 2))])
    with pytest.raises(ValueError, match="'rank'"):
        OnlineCP([np.ones((2, 3, 0))])


def test_to_cp_tensor_rejects_bad_replica():
    q = OnlineCP.random((3, 4), 2, replicas=2, rng=0)
    with pytest.raises(ValueError, match="'replica'"):
        q.to_cp_tensor(2)
