"""Statistics across seeds (rl.experiments.stats): mean ± std, IQM intervals, authors' smoothing."""

import math

import numpy as np
import pytest

from rl.experiments.stats import (
    iqm_interval,
    mean_std,
    moving_average,
    postprocess_like_authors,
    replace_outliers,
    summarize,
)

EXP_IQM = (
    -(math.log(4) + 1) * 0.25 + (math.log(4 / 3) + 1) * 0.75
) / 0.5  # E[X | q25 < X < q75] of Exp(1)


def test_mean_std_across_runs():
    curves = np.array([[1.0, 2.0, np.nan], [3.0, 6.0, 5.0]])
    mean, std = mean_std(curves)
    np.testing.assert_allclose(mean, [2.0, 4.0, 5.0])
    np.testing.assert_allclose(std, [1.0, 2.0, 0.0])


@pytest.mark.parametrize("method", ["expanded", "bca", "percentile"])
def test_bootstrap_interval_is_deterministic_for_a_seed(method):
    scores = np.random.default_rng(0).exponential(size=10)
    first = iqm_interval(scores, seed=3, method=method)
    assert first == iqm_interval(scores, seed=3, method=method)
    assert first != iqm_interval(scores, seed=4, method=method)
    assert first.low <= first.iqm <= first.high and first.runs == 10


def test_stratified_bootstrap_over_tasks_and_edge_cases():
    scores = np.random.default_rng(1).normal(size=(12, 3)) + np.array([0.0, 10.0, 20.0])
    interval = iqm_interval(scores, seed=0)
    assert interval.runs == 12 and interval.low < interval.iqm < interval.high
    assert math.isnan(iqm_interval([np.nan]).iqm)
    assert iqm_interval([2.0]) == (2.0, 2.0, 2.0, 1)
    with pytest.raises(ValueError, match="'method'"):
        iqm_interval([1.0, 2.0], method="t")


def _coverage(runs, method, trials=300):
    rng = np.random.default_rng(2024)
    hits = 0
    for trial in range(trials):
        interval = iqm_interval(rng.exponential(size=runs), seed=trial, method=method,
                                repetitions=1000)  # fmt: skip
        hits += interval.low <= EXP_IQM <= interval.high
    return hits / trials


def test_expanded_interval_does_not_under_cover_at_10_seeds():
    """Coverage of Exp(1)'s true IQM (0.738), 300 trials (binomial s.e. about 0.013).

    docs/statistics.md gives the measured coverage at 2,000 trials: at 10 runs
    percentile 0.940, BCa 0.932, expanded 0.968; at 30 runs all about 0.95.
    """
    assert _coverage(10, "expanded") >= 0.93
    assert _coverage(10, "expanded") > _coverage(10, "percentile")


def test_replace_outliers_and_moving_average():
    series = np.array([10.0] * 5 + [12.0] + [10.0] * 5)  # within 30%: kept
    np.testing.assert_array_equal(replace_outliers(series), series)
    spike = np.array([10.0] * 5 + [100.0] + [10.0] * 5)
    assert replace_outliers(spike)[5] == 10.0  # neighbours judged against the original series
    assert replace_outliers(spike)[4] == pytest.approx((10.0 * 8 + 100.0) / 9)
    np.testing.assert_allclose(moving_average([1.0, 2.0, 3.0, 4.0], 2), [1.0, 1.5, 2.5, 3.5])


def test_postprocess_like_authors_smooths_and_bands():
    rng = np.random.default_rng(0)
    curves = 50 + rng.normal(scale=10, size=(8, 100))
    smooth = postprocess_like_authors(curves)
    assert smooth.mean.shape == (100,)
    np.testing.assert_allclose(smooth.high - smooth.low, smooth.std)
    assert np.std(smooth.mean[30:]) < np.std(mean_std(curves)[0][30:])


def test_summarize_raw_and_postprocessed_rows():
    seeds, episodes = np.repeat(np.arange(4), 100), np.tile(np.arange(1, 101), 4)
    greedy = np.where(episodes % 10 == 0, seeds * 10.0 + episodes / 10, np.nan)
    table = {"seed": seeds, "episode": episodes, "return": seeds * 1.0, "greedy_return": greedy}
    rows = summarize(table, 20, postprocess=True)
    raw, post, training = rows
    assert (raw.first, raw.last, raw.seeds, raw.postprocessed) == (81, 100, 4, False)
    assert raw.mean == pytest.approx(15 + 9.5)  # seeds 0..30 mean 15, episodes 90, 100
    assert post.postprocessed and math.isnan(post.iqm)
    assert training.column == "return" and training.mean == pytest.approx(1.5)
    assert summarize(table, 20) == [raw, training]
