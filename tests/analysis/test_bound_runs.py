import numpy as np
import pytest

from analysis.bounds.runs import (
    plot_bound_overlays,
    prop2_check,
    prop3_table,
    record_bound_run,
    theorem1_curves,
)


@pytest.fixture(scope="module")
def lowrank_record():
    return record_bound_run("lowrank", 6, seeds=2, seed=3)


def test_proposition2_holds_on_every_update(lowrank_record):
    record = lowrank_record
    u = record.updates
    assert len(u["t"]) == 2 * 6 * 100  # two replicas, 6 episodes of 100 steps, one update each
    bound, ratio = prop2_check(record)
    assert np.all(u["delta_q"] <= bound)
    assert 0 < ratio <= 1
    assert record.settings.f_max == pytest.approx((10.0 / 5) ** (1 / 5))


def test_proposition2_holds_on_inventory_with_other_settings():
    record = record_bound_run(
        "inventory", 2, rank=3, agent_params={"count_before_update": True, "alpha0": 0.02}
    )
    bound, ratio = prop2_check(record)
    assert np.all(record.updates["delta_q"] <= bound) and ratio <= 1


def test_record_is_consistent(lowrank_record):
    record = lowrank_record
    u = record.updates
    np.testing.assert_allclose(u["delta_q"], np.abs(u["after"] - u["before"]))
    np.testing.assert_allclose(u["noise"], np.abs(u["target"] - u["bellman"]))
    assert record.selections.sum() == len(u["t"])
    for replica in (0, 1):
        mine = u["replica"] == replica
        np.testing.assert_array_equal(u["t"][mine], np.arange(1, 601))
        # the visit count passed to the loss is the number of earlier selections of the pair
        keys = u["state"][mine] * 9 + u["action"][mine]
        seen = {}
        for key, visits in zip(keys, u["visits"][mine], strict=True):
            assert visits == seen.get(key, 0)
            seen[key] = seen.get(key, 0) + 1
    assert np.all(u["sup_error"] >= 0) and record.initial_error.shape == (2,)


def test_bellman_image_uses_the_previous_tensor(lowrank_record):
    # Deterministic rewards: the TD target and the Bellman image differ only through s'.
    record = lowrank_record
    u = record.updates
    assert np.all(u["noise"] < 2 * record.settings.v_max)
    assert u["noise"].mean() > 0


def test_same_seed_same_record():
    a = record_bound_run("lowrank", 1, seed=5)
    b = record_bound_run("lowrank", 1, seed=5)
    for name in a.updates:
        np.testing.assert_array_equal(a.updates[name], b.updates[name])


def test_theorem1_and_proposition3_tables(lowrank_record, tmp_path):
    record = lowrank_record
    curves = theorem1_curves(record, b_r=0.0)
    assert curves.measured.shape == curves.bound_updates.shape == curves.bound_phases.shape
    assert curves.limit == pytest.approx(curves.noise_bar / (1 - 0.9))
    table = prop3_table(record)
    assert np.all(table["reselections"] <= table["selections"])
    assert np.all(table["t0"] >= 1) and np.all(table["t0"] <= table["horizon"])
    np.testing.assert_allclose(table["bound"] - table["t0"], table["log_term"])
    paths = plot_bound_overlays(record, curves, tmp_path / "fig")
    assert all((tmp_path / name).is_file() for name in ("fig.png", "fig.pdf"))
    assert len(paths) == 2


def test_bad_arguments():
    with pytest.raises(ValueError, match="env"):
        record_bound_run("cartpole", 1)
    with pytest.raises(ValueError, match="episodes"):
        record_bound_run("lowrank", 0)
