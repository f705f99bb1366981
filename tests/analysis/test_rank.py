import csv

import numpy as np
import pytest
import tensorly as tl
from tensorly.cp_tensor import cp_to_tensor
from tensorly.random import random_cp

from analysis import rank_profile, spectral_energy
from analysis.rank import COLUMNS, RankProfile, plot_rank_profile

SHAPE = (5, 6, 7)


def rank3_tensor(seed=0):
    cp = random_cp(SHAPE, 3, random_state=seed)
    with tl.backend_context("numpy"):
        return np.asarray(cp_to_tensor(cp))


def smooth_tensor(shape=(6, 7, 8)):
    grids = np.meshgrid(*[np.linspace(-1, 1, d) for d in shape], indexing="ij")
    return np.tanh(2 * grids[0] + grids[1] * grids[2]) + np.exp(-(grids[0] ** 2 + grids[2] ** 2))


@pytest.fixture(scope="module")
def profile3():
    return rank_profile(rank3_tensor(), range(1, 5), restarts=2, random_state=0)


def test_rank_r_tensor_error_vanishes_from_rank_r_on(profile3):
    errors = profile3.column("rel_error")
    assert errors[0] > 1e-2 and errors[1] > 1e-3
    assert errors[2] < 1e-4 and errors[3] < 1e-4
    assert profile3.row(3)["sup_error"] < 1e-3
    assert profile3.smallest_rank(0.999999) == 3
    se = spectral_energy(rank3_tensor())
    assert all(mode.numerical_rank() <= 3 for mode in se.modes)


def test_rows_hold_the_promised_columns(profile3):
    assert isinstance(profile3, RankProfile)
    assert profile3.ranks == (1, 2, 3, 4)
    for row in profile3.rows:
        assert tuple(row) == COLUMNS
        assert row["energy"] == pytest.approx(1 - row["rel_error"] ** 2)
        assert row["n_params"] == row["rank"] * sum(SHAPE)
        assert 0 <= row["mean_abs_error"] <= row["sup_error"]
    tensor = rank3_tensor()
    residual = tensor - profile3.approximation(2)
    row = profile3.row(2)
    assert row["rel_error"] == pytest.approx(np.linalg.norm(residual) / np.linalg.norm(tensor))
    assert row["sup_error"] == pytest.approx(np.abs(residual).max())
    assert row["mean_abs_error"] == pytest.approx(np.abs(residual).mean())


def test_same_random_state_same_profile():
    tensor = smooth_tensor()
    a = rank_profile(tensor, [1, 2, 3], restarts=2, random_state=7, n_iter_max=30)
    b = rank_profile(tensor, [3, 2, 1], restarts=2, random_state=7, n_iter_max=30)
    assert a.rows == b.rows
    c = rank_profile(
        tensor, [1, 2, 3], restarts=2, random_state=np.random.default_rng(7), n_iter_max=30
    )
    d = rank_profile(
        tensor, [1, 2, 3], restarts=2, random_state=np.random.default_rng(7), n_iter_max=30
    )
    assert c.rows == d.rows


def test_warm_started_profile_is_monotone():
    profile = rank_profile(smooth_tensor(), range(1, 7), restarts=1, random_state=0, n_iter_max=40)
    errors = profile.column("rel_error")
    assert np.all(np.diff(errors) <= 1e-12)


def test_center_adds_the_mean_back():
    tensor = rank3_tensor(1) + 50.0
    profile = rank_profile(tensor, [3], restarts=1, center=True, random_state=0)
    assert profile.center and profile.mean == pytest.approx(tensor.mean())
    row = profile.row(3)
    assert row["n_params"] == 3 * sum(SHAPE) + 1
    # the mean-removed rank-3 tensor plus a constant is not rank 3, but the fit is measured
    # against the original tensor, whose norm is dominated by the mean
    assert row["rel_error"] == pytest.approx(
        np.linalg.norm(tensor - profile.approximation(3)) / np.linalg.norm(tensor)
    )
    constant = rank_profile(np.full((3, 4), 2.0), [1], center=True, random_state=0)
    assert constant.row(1)["rel_error"] == 0.0


def test_csv_and_plot(tmp_path, profile3):
    path = profile3.to_csv(tmp_path / "profile.csv")
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == COLUMNS
    assert [int(r["rank"]) for r in rows] == [1, 2, 3, 4]
    assert float(rows[1]["rel_error"]) == profile3.rows[1]["rel_error"]
    png, pdf = plot_rank_profile(profile3, tmp_path / "figs" / "cartpole_gamma0.99")
    assert png.name == "cartpole_gamma0.99.png" and pdf.name == "cartpole_gamma0.99.pdf"
    assert png.stat().st_size > 0 and pdf.stat().st_size > 0


def test_row_lookup_errors(profile3):
    with pytest.raises(ValueError, match="'rank'"):
        profile3.row(9)
    with pytest.raises(ValueError, match="'energy'"):
        profile3.smallest_rank(0.0)
    with pytest.raises(ValueError, match="'key'"):
        profile3.column("bogus")
    assert profile3.smallest_rank(1.0 - 1e-300) in (None, 3, 4)


@pytest.mark.parametrize(
    "tensor, kwargs, name",
    [
        (np.ones((2, 3)), dict(ranks=[]), "ranks"),
        (np.ones((2, 3)), dict(ranks=[0, 1]), "ranks"),
        (np.ones((2, 3)), dict(ranks=[1], restarts=0), "restarts"),
        (np.ones((2, 3)), dict(ranks=[1], random_state=-1), "random_state"),
        (np.ones((2, 3)), dict(ranks=[1], random_state="x"), "random_state"),
        (np.ones((2, 3)), dict(ranks=[1], n_iter_max=0), "n_iter_max"),
        (np.ones((2, 3)), dict(ranks=[1], tol=-1.0), "tol"),
        (np.ones(3), dict(ranks=[1]), "tensor"),
        (np.array([[1.0, np.inf]]), dict(ranks=[1]), "tensor"),
    ],
)
def test_bad_arguments(tensor, kwargs, name):
    with pytest.raises(ValueError, match=f"The '{name}' parameter"):
        rank_profile(tensor, **kwargs)
