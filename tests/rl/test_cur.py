import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rl.agents.tables.cur import (
    cur_complete,
    cur_param_count,
    leverage_scores,
    select_anchors,
    truncated_pinv,
)


def rank_d_matrix(rng, m, n, d):
    return rng.normal(size=(m, d)) @ rng.normal(size=(d, n))


@given(
    seed=st.integers(0, 2**32 - 1),
    m=st.integers(4, 30),
    n=st.integers(4, 12),
    d=st.integers(1, 4),
    extra=st.integers(0, 3),
)
def test_completion_reproduces_rank_d_matrix_from_its_skeleton(seed, m, n, d, extra):
    rng = np.random.default_rng(seed)
    k = min(d + extra, m, n)
    matrix = rank_d_matrix(rng, m, n, d)
    rows = np.sort(rng.choice(m, k, replace=False))
    cols = np.sort(rng.choice(n, k, replace=False))
    completed = cur_complete(matrix[:, cols], matrix[rows, :], rows, rank=d)
    scale = max(1.0, np.abs(matrix).max())
    np.testing.assert_allclose(completed, matrix, atol=1e-8 * scale, rtol=0)


def test_completion_with_the_papers_cartpole_shape():
    rng = np.random.default_rng(0)
    matrix = rank_d_matrix(rng, 81, 10, 3)
    rows, cols = np.arange(0, 81, 9), np.arange(9)
    completed = cur_complete(matrix[:, cols], matrix[rows, :], rows, rank=3)
    assert np.max(np.abs(completed - matrix)) < 1e-8


def test_truncated_pinv_equals_pinv_at_full_rank_and_truncates_below():
    rng = np.random.default_rng(1)
    w = rng.normal(size=(5, 5))
    np.testing.assert_allclose(truncated_pinv(w, 5), np.linalg.pinv(w), atol=1e-10)
    u, s, vt = np.linalg.svd(w)
    expected = vt[:2].T @ np.diag(1 / s[:2]) @ u[:, :2].T
    np.testing.assert_allclose(truncated_pinv(w, 2), expected, atol=1e-10)


def test_truncated_pinv_drops_tiny_singular_values():
    w = np.diag([1.0, 1e-14])
    assert np.abs(truncated_pinv(w, 2)).max() == pytest.approx(1.0)


def test_leverage_scores_sum_to_rank():
    rng = np.random.default_rng(2)
    scores = leverage_scores(rank_d_matrix(rng, 20, 8, 3), 3)
    assert scores.rows.sum() == pytest.approx(3.0)
    assert scores.columns.sum() == pytest.approx(3.0)
    assert np.all(scores.rows >= 0) and np.all(scores.rows <= 1 + 1e-12)


def test_anchors_follow_leverage_scores_on_spiky_rows():
    # A smooth rank-2 matrix plus three rows that point in their own directions:
    # each spiky row carries a direction no other row has, so its leverage is ~1.
    rng = np.random.default_rng(3)
    m, n = 40, 10
    smooth = np.outer(np.ones(m), rng.normal(size=n)) * 0.1
    spiky = [5, 17, 31]
    matrix = smooth.copy()
    for i, row in enumerate(spiky):
        matrix[row, :] += 10.0 * np.eye(n)[2 * i]
    scores = leverage_scores(matrix, rank=4)
    assert np.all(scores.rows[spiky] > 0.9)
    anchors = select_anchors(scores.rows, 3, "top")
    np.testing.assert_array_equal(anchors, spiky)
    columns = select_anchors(scores.columns, 3, "top")
    np.testing.assert_array_equal(columns, [0, 2, 4])


def test_sampled_anchors_prefer_high_leverage():
    scores = np.array([0.0, 0.0, 1.0, 1.0, 0.0, 1e-6])
    rng = np.random.default_rng(4)
    for _ in range(20):
        chosen = select_anchors(scores, 2, "sample", rng)
        assert list(chosen) == [2, 3]
    # fewer positive scores than anchors: the positive ones plus uniform fill
    chosen = select_anchors(np.array([0.0, 1.0, 0.0, 0.0]), 3, "sample", rng)
    assert 1 in chosen and len(set(chosen)) == 3


def test_select_anchors_validates():
    with pytest.raises(ValueError, match="'k' parameter"):
        select_anchors(np.ones(3), 4)
    with pytest.raises(ValueError, match="needs a random generator"):
        select_anchors(np.ones(3), 2, "sample")
    with pytest.raises(ValueError, match="'rule' parameter"):
        select_anchors(np.ones(3), 2, "best")


def test_cur_param_count_matches_the_appendix():
    assert cur_param_count(9, 3**4, 10) == 738
    assert cur_param_count(10, 7**2, 10) == 490
    assert cur_param_count(20, 2**9, 5) == 9940
