import math

import numpy as np
import pytest
import tensorly as tl
from tensorly.cp_tensor import CPTensor, cp_to_tensor

from analysis import rank_profile
from analysis.cp_form import cp_als, frobenius_norm, mean_of, minus_constant, relative_error
from analysis.spectral import MAX_DENSE_ENTRIES


def dense(cp):
    with tl.backend_context("numpy"):
        return np.asarray(cp_to_tensor(cp))


def random_cp(shape, rank, seed):
    rng = np.random.default_rng(seed)
    return CPTensor((rng.uniform(0.5, 2, rank), [rng.standard_normal((d, rank)) for d in shape]))


def test_norms_means_and_errors_from_factors_equal_the_dense_ones():
    target = random_cp((4, 5, 6), 3, 0)
    other = [np.random.default_rng(1).standard_normal((d, 2)) for d in (4, 5, 6)]
    tensor = dense(target)
    assert frobenius_norm(target) == pytest.approx(np.linalg.norm(tensor), rel=1e-12)
    assert mean_of(target) == pytest.approx(tensor.mean(), rel=1e-12)
    np.testing.assert_allclose(dense(minus_constant(target, 0.7)), tensor - 0.7, atol=1e-12)
    residual = tensor - dense(CPTensor((np.ones(2), other)))
    expected = np.linalg.norm(residual) / np.linalg.norm(tensor)
    assert relative_error(target, other) == pytest.approx(expected, rel=1e-10)


def test_als_on_the_cp_form_recovers_an_exact_rank():
    target = random_cp((6, 7, 5, 4), 3, 2)
    start = [np.random.default_rng(3).standard_normal((d, 3)) for d in (6, 7, 5, 4)]
    error, factors = cp_als(target, start, n_iter_max=500, tol=0)
    assert error < 1e-7
    np.testing.assert_allclose(
        dense(CPTensor((np.ones(3), factors))),
        dense(target),
        atol=1e-6 * np.abs(dense(target)).max(),
    )


def test_a_highway_sized_q_is_profiled_from_its_factors():
    shape = (20,) * 9 + (5,)  # the paper's Highway Q: 2.6e12 entries
    assert math.prod(shape) > MAX_DENSE_ENTRIES
    target = random_cp(shape, 3, 4)
    profile = rank_profile(target, [1, 2, 3], restarts=2, random_state=0)
    assert profile.settings["method"] == "factors"
    errors = profile.column("rel_error")
    assert errors[0] > 1e-2 and errors[2] < 1e-6
    assert (
        np.isnan(profile.column("b_r_upper")).all() and np.isnan(profile.column("sup_error")).all()
    )
    lower = profile.column("b_r_lower")
    assert lower[0] > 0 and lower[2] < 1e-12
    with pytest.raises(ValueError, match="profiled from its factors"):
        profile.approximation(3)
