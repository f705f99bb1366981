import numpy as np
import pytest

from tensorq import FactorBound, OnlineCP


def test_from_value_bound():
    bound = FactorBound.from_value_bound(100.0, rank=10, order=5)
    assert bound.f_max == pytest.approx(10.0 ** (1 / 5))
    assert bound.value_bound(10, 5) == pytest.approx(100.0)


def test_clip_and_project_idempotent():
    bound = FactorBound(0.5)
    np.testing.assert_array_equal(bound.clip(np.array([-2.0, 0.1, 3.0])), [-0.5, 0.1, 0.5])
    q = OnlineCP.random((3, 4, 5), 2, replicas=2, scale=1.0, rng=0)
    bound.project(q)
    once = [f.copy() for f in q.factors]
    assert max(np.abs(f).max() for f in once) <= 0.5
    bound.project(q)
    for a, b in zip(once, q.factors, strict=True):
        np.testing.assert_array_equal(a, b)
    assert np.abs(q.to_dense()).max() <= bound.value_bound(2, 3)


@pytest.mark.parametrize("f_max", [0.0, -1.0, float("nan"), float("inf")])
def test_rejects_bad_f_max(f_max):
    with pytest.raises(ValueError, match="'f_max'"):
        FactorBound(f_max)


def test_from_value_bound_rejects_bad_input():
    with pytest.raises(ValueError, match="'v_max'"):
        FactorBound.from_value_bound(0.0, 2, 3)
    with pytest.raises(ValueError, match="'rank'"):
        FactorBound.from_value_bound(1.0, 0, 3)
    with pytest.raises(ValueError, match="'order'"):
        FactorBound.from_value_bound(1.0, 2, 0)
