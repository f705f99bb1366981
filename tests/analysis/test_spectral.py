import numpy as np
import pytest
import tensorly as tl
from tensorly.cp_tensor import CPTensor, cp_to_tensor
from tensorly.random import random_cp

import analysis.spectral as spectral
from analysis import spectral_energy

SHAPE = (4, 5, 6, 3)


def dense_of(cp):
    with tl.backend_context("numpy"):
        return np.asarray(cp_to_tensor(cp))


def reference_singular_values(tensor, row_modes):
    others = [m for m in range(tensor.ndim) if m not in row_modes]
    moved = np.transpose(tensor, [*row_modes, *others])
    rows = int(np.prod([tensor.shape[m] for m in row_modes]))
    return np.linalg.svd(moved.reshape(rows, -1), compute_uv=False)


def test_rank_r_cp_tensor_has_spectral_rank_at_most_r():
    cp = random_cp(SHAPE, 3, random_state=0)
    for method in ("dense", "factors"):
        se = spectral_energy(cp, n_state_modes=2, method=method)
        assert se.method == method
        for spectrum in (*se.modes, se.matricization):
            assert spectrum.numerical_rank() <= 3
            assert spectrum.rank_for(1.0) <= 3
            assert spectrum.energy[-1] == 1.0
            assert np.all(np.diff(spectrum.energy) >= 0)


@pytest.mark.parametrize("rank", [2, 9])  # below and above every mode size
def test_dense_and_cp_inputs_give_the_same_spectra(rank):
    cp = random_cp(SHAPE, rank, random_state=1)
    tensor = dense_of(cp)
    dense = spectral_energy(tensor, n_state_modes=3)
    assert dense.method == "dense" and dense.weights is None
    for method in ("auto", "factors"):
        other = spectral_energy(cp, n_state_modes=3, method=method)
        for a, b in zip(
            (*dense.modes, dense.matricization), (*other.modes, other.matricization), strict=True
        ):
            assert a.shape == b.shape and a.row_modes == b.row_modes
            scale = a.singular_values[0]
            np.testing.assert_allclose(b.singular_values, a.singular_values, atol=1e-10 * scale)
            np.testing.assert_allclose(b.energy, a.energy, atol=1e-10)


def test_dense_spectra_match_numpy_svd():
    tensor = np.random.default_rng(2).standard_normal(SHAPE)
    se = spectral_energy(tensor, n_state_modes=2)
    for n in range(len(SHAPE)):
        np.testing.assert_allclose(
            se.modes[n].singular_values, reference_singular_values(tensor, [n])
        )
        assert se.modes[n].shape == (SHAPE[n], tensor.size // SHAPE[n])
    assert se.matricization.shape == (20, 18)
    np.testing.assert_allclose(
        se.matricization.singular_values, reference_singular_values(tensor, [0, 1])
    )


def test_large_cp_path_never_reconstructs(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the dense tensor was built")

    monkeypatch.setattr(spectral, "cp_to_tensor", refuse)
    cp = random_cp((20,) * 9 + (5,), 6, random_state=0)
    se = spectral_energy(cp, n_state_modes=9)
    assert se.method == "factors"
    assert se.matricization.shape == (20**9, 5)
    assert all(m.numerical_rank() <= 6 for m in se.modes)
    assert se.matricization.singular_values.shape == (5,)


def test_size_limit_selects_the_factor_path(monkeypatch):
    cp = random_cp(SHAPE, 4, random_state=3)
    reference = spectral_energy(cp, method="dense")
    monkeypatch.setattr(spectral, "MAX_DENSE_ENTRIES", 10)
    forced = spectral_energy(cp)
    assert forced.method == "factors"
    for a, b in zip(reference.modes, forced.modes, strict=True):
        np.testing.assert_allclose(
            b.singular_values, a.singular_values, atol=1e-10 * a.singular_values[0]
        )


def test_energy_and_rank_for_by_hand():
    se = spectral_energy(np.diag([3.0, 2.0, 1.0]))
    spectrum = se.modes[0]
    np.testing.assert_allclose(spectrum.singular_values, [3, 2, 1])
    np.testing.assert_allclose(spectrum.energy, [9 / 14, 13 / 14, 1.0])
    assert spectrum.total == pytest.approx(14.0)
    assert spectrum.rank_for(0.5) == 1
    assert spectrum.rank_for(9 / 14) == 1
    assert spectrum.rank_for(0.9) == 2
    assert spectrum.rank_for(13 / 14) == 2
    assert spectrum.rank_for(1.0) == 3


def test_zero_tensor():
    se = spectral_energy(np.zeros((3, 4)))
    assert se.modes[0].rank_for(0.9) == 0
    assert se.modes[0].numerical_rank() == 0
    np.testing.assert_array_equal(se.modes[0].energy, 1.0)


def test_cp_weights_after_normalization():
    rng = np.random.default_rng(4)
    factors = [rng.standard_normal((d, 3)) for d in (4, 5, 6)]
    factors = [f / np.linalg.norm(f, axis=0) for f in factors]
    factors[1][:, 2] *= 2.0  # weight 2 moved into a factor column
    cp = CPTensor((np.array([1.0, -3.0, 1.0]), factors))
    se = spectral_energy(cp)
    np.testing.assert_allclose(se.weights, [3.0, 2.0, 1.0])  # cp_normalize moves signs
    np.testing.assert_array_equal(se.weight_order, [1, 2, 0])
    np.testing.assert_allclose(se.weight_energy, [9 / 14, 13 / 14, 1.0])
    assert se.weight_rank_for(0.9) == 2
    with pytest.raises(ValueError, match="CPTensor"):
        spectral_energy(dense_of(cp)).weight_rank_for(0.9)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(n_state_modes=0), "n_state_modes"),
        (dict(n_state_modes=3), "n_state_modes"),
        (dict(n_state_modes=1.5), "n_state_modes"),
        (dict(method="svd"), "method"),
        (dict(method="factors"), "method"),
    ],
)
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"The '{name}' parameter"):
        spectral_energy(np.ones((2, 3, 4)), **kwargs)


def test_bad_tensors_and_shares():
    with pytest.raises(ValueError, match="'tensor'"):
        spectral_energy(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match="'tensor'"):
        spectral_energy(np.array(1.0))
    with pytest.raises(ValueError, match="'tensor'"):
        spectral_energy(np.array([["a"]]))
    spectrum = spectral_energy(np.eye(3)).modes[0]
    for share in (0.0, 1.5, True):
        with pytest.raises(ValueError, match="'share'"):
            spectrum.rank_for(share)
