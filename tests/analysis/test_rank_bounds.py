import itertools

import numpy as np
import pytest
import tensorly as tl
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorly.cp_tensor import CPTensor, cp_to_tensor

from analysis.rank_bounds import b_r_lower, mode_splits


def dense(cp):
    with tl.backend_context("numpy"):
        return np.asarray(cp_to_tensor(cp))


def test_mode_splits_name_each_bipartition_once():
    for order in (2, 3, 4, 5):
        splits = mode_splits(order)
        assert len(splits) == 2 ** (order - 1) - 1
        complements = {tuple(m for m in range(order) if m not in s) for s in splits}
        assert not complements & set(splits)  # a split and its transpose appear once
        assert all(s[0] == 0 for s in splits)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**16),
    shape=st.lists(st.integers(2, 5), min_size=2, max_size=4).map(tuple),
    rank=st.integers(1, 4),
    scale=st.floats(0.0, 2.0),
)
def test_no_rank_r_cp_tensor_beats_the_lower_bound(seed, shape, rank, scale):
    rng = np.random.default_rng(seed)
    tensor = rng.standard_normal(shape)
    bound = b_r_lower(tensor, [rank])[0]
    # any rank-R CP tensor, near the tensor or not
    cp = CPTensor((np.ones(rank), [scale * rng.standard_normal((d, rank)) for d in shape]))
    residual = tensor - dense(cp)
    assert np.abs(residual).max() >= bound.sup * (1 - 1e-12)
    assert np.linalg.norm(residual) >= bound.frobenius * (1 - 1e-12)


def test_the_bound_is_the_largest_tail_over_splits():
    rng = np.random.default_rng(0)
    tensor = rng.standard_normal((3, 4, 5))
    bound = b_r_lower(tensor, [2])[0]
    tails = []
    for rows in ((0,), (0, 1), (0, 2)):
        cols = tuple(m for m in range(3) if m not in rows)
        moved = np.transpose(tensor, rows + cols)
        matrix = moved.reshape(int(np.prod([tensor.shape[m] for m in rows])), -1)
        values = np.linalg.svd(matrix, compute_uv=False)
        tails.append(np.sqrt(np.sum(values[2:] ** 2)))
    assert bound.frobenius == pytest.approx(max(tails), rel=1e-12)
    assert bound.sup == pytest.approx(max(tails) / np.sqrt(tensor.size), rel=1e-12)


def test_exact_rank_gives_zero_and_factors_equal_dense():
    rng = np.random.default_rng(1)
    cp = CPTensor((rng.uniform(1, 2, 3), [rng.standard_normal((d, 3)) for d in (4, 5, 6, 3)]))
    from_factors = b_r_lower(cp, [1, 2, 3])
    from_dense = b_r_lower(dense(cp), [1, 2, 3])
    for a, b in itertools.zip_longest(from_factors, from_dense):
        assert a.sup == pytest.approx(b.sup, rel=1e-9, abs=1e-12)
    assert from_dense[2].sup < 1e-12 < from_dense[1].sup
