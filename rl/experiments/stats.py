"""Statistics across seeds: mean ± std, IQM with bootstrap CIs, the authors' smoothing.

Three views of the same runs, each named for what it is:

* `mean_std`: mean and standard deviation across seeds at every point of a
  curve, as the paper's figures plot them ("Shaded regions show mean ±
  standard deviation").
* `iqm_interval`: the interquartile mean (IQM) of one score per run with a
  seeded, deterministic 95% stratified bootstrap confidence interval, as
  rliable recommends (Agarwal et al., 2021). The default interval is the
  expanded percentile bootstrap (Hesterberg, 2015): the plain percentile
  bootstrap (rliable's) under-covers at 10 seeds, and BCa does not help
  there (measured coverage in ``docs/statistics.md``).
* `postprocess_like_authors`: the post-processing behind the paper's figures
  (docs/authors-code.md, "Protocol behind the figures"): outlier replacement, mean
  and std across runs, two moving averages (20, then 10), ±0.5 std bands. For
  visual comparison with the paper only; off unless asked for, and `summarize`
  labels its rows.

`summarize` turns a metrics table (`rl.runs.metrics.read_metrics`) into rows of all
of these over a final window of episodes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rl.runs.metrics import iqm, pivot

Interval = Literal["expanded", "bca", "percentile"]


def mean_std(curves: ArrayLike, ddof: int = 0) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return the mean and standard deviation across runs at every point, NaNs ignored.

    Parameters
    ----------
    curves : array-like, shape (runs, points)
    ddof : int
        Delta degrees of freedom of the standard deviation (0: the population
        value, as NumPy and the authors' plotting code compute it).
    """
    values = np.asarray(curves, dtype=float)
    counts = np.sum(~np.isnan(values), axis=0)
    mean = np.nanmean(values, axis=0) if values.size else np.zeros(values.shape[1:])
    std = np.nanstd(values, axis=0, ddof=ddof) if values.size else np.zeros(values.shape[1:])
    return np.where(counts > 0, mean, np.nan), np.where(counts > ddof, std, np.nan)


class IQMInterval(NamedTuple):
    """The IQM of one score per run and its bootstrap confidence interval."""

    iqm: float
    low: float
    high: float
    runs: int


def _normal_cdf(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return 0.5 * (1.0 + np.vectorize(math.erf)(np.asarray(x) / math.sqrt(2.0)))


def _normal_ppf(p: float) -> float:
    """Inverse standard normal CDF (Acklam's rational approximation, refined by Newton)."""
    lo, hi = -10.0, 10.0
    for _ in range(100):  # bisection: exact to double precision, no scipy import
        mid = 0.5 * (lo + hi)
        if 0.5 * (1.0 + math.erf(mid / math.sqrt(2.0))) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _resample(scores: NDArray[np.float64], repetitions: int, rng: np.random.Generator) -> NDArray:
    """Stratified resamples: within each task (column), runs drawn with replacement."""
    runs, tasks = scores.shape
    rows = rng.integers(0, runs, size=(repetitions, runs, tasks))
    return np.take_along_axis(scores[None, :, :], rows, axis=1)


def iqm_interval(
    scores: ArrayLike,
    *,
    confidence: float = 0.95,
    repetitions: int = 2000,
    seed: int = 0,
    method: Interval = "expanded",
) -> IQMInterval:
    """Return the IQM of the runs' scores with a stratified bootstrap confidence interval.

    Parameters
    ----------
    scores : array-like, shape (runs,) or (runs, tasks)
        One score per run (and task); NaN rows are dropped. With several tasks
        the IQM is taken over all runs x tasks and each resample draws runs
        within each task separately (the stratified bootstrap of rliable).
    confidence : float
        Coverage of the interval, in (0, 1).
    repetitions : int
        Bootstrap resamples.
    seed : int
        Seed of the resampling generator: the same seed gives the same interval.
    method : {"expanded", "bca", "percentile"}
        ``"percentile"``: plain percentiles of the bootstrap IQMs, which are too
        narrow for few runs; ``"expanded"`` (default): the percentile interval
        at the widened level ``Phi(sqrt(n / (n - 1)) t_{n-1, (1 - confidence) / 2})``
        per tail (Hesterberg, 2015), which corrects that; ``"bca"``:
        bias-corrected and accelerated percentiles (Efron, 1987), the
        acceleration from the jackknife. Measured coverage: ``docs/statistics.md``.

    Returns
    -------
    IQMInterval

    References
    ----------
    .. [1] R. Agarwal et al., "Deep Reinforcement Learning at the Edge of the
       Statistical Precipice", NeurIPS 2021 (IQM, stratified bootstrap CIs).
    .. [2] B. Efron, "Better Bootstrap Confidence Intervals", JASA 82, 1987.
    .. [3] T. Hesterberg, "What Teachers Should Know About the Bootstrap",
       The American Statistician 69, 2015 (the expanded percentile interval).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"The 'confidence' parameter must be in (0, 1). Got {confidence!r}.")
    if method not in ("expanded", "bca", "percentile"):
        raise ValueError(
            f"The 'method' parameter must be 'expanded', 'bca' or 'percentile'. Got {method!r}."
        )
    values = np.asarray(scores, dtype=float)
    values = values.reshape(len(values), -1) if values.ndim else values.reshape(1, 1)
    values = values[~np.isnan(values).any(axis=1)]
    runs = len(values)
    if runs == 0:
        return IQMInterval(math.nan, math.nan, math.nan, 0)
    point = float(iqm(values))
    if runs == 1:
        return IQMInterval(point, point, point, 1)
    rng = np.random.default_rng(seed)
    estimates = iqm(_resample(values, repetitions, rng).reshape(repetitions, -1), axis=1)
    tail = (1.0 - confidence) / 2.0
    quantiles = np.array([tail, 1.0 - tail])
    if method == "bca":
        quantiles = _bca_quantiles(values, point, estimates, quantiles)
    elif method == "expanded":
        quantiles = _expanded_quantiles(runs, tail)
    low, high = np.quantile(estimates, quantiles)
    return IQMInterval(point, float(low), float(high), runs)


def _expanded_quantiles(runs: int, tail: float) -> NDArray[np.float64]:
    """Hesterberg's expanded percentile levels: the t_{n-1} tail mapped back through Phi."""
    from scipy.stats import t as student_t

    widened = math.sqrt(runs / (runs - 1)) * float(student_t.ppf(tail, runs - 1))
    level = float(_normal_cdf(np.array(widened)))
    return np.array([level, 1.0 - level])


def _bca_quantiles(
    values: NDArray[np.float64], point: float, estimates: NDArray, quantiles: NDArray
) -> NDArray[np.float64]:
    """Adjust the percentile levels by BCa's bias correction z0 and jackknife acceleration."""
    below = np.mean(estimates < point) + 0.5 * np.mean(estimates == point)
    below = min(max(below, 1.0 / (len(estimates) + 1)), 1.0 - 1.0 / (len(estimates) + 1))
    z0 = _normal_ppf(below)
    keep = ~np.eye(len(values), dtype=bool)
    jackknife = np.array([iqm(values[row]) for row in keep])
    spread = jackknife.mean() - jackknife
    denominator = 6.0 * np.sum(spread**2) ** 1.5
    accel = float(np.sum(spread**3) / denominator) if denominator > 0 else 0.0
    z = np.array([_normal_ppf(q) for q in quantiles])
    adjusted = z0 + (z0 + z) / (1.0 - accel * (z0 + z))
    return np.clip(_normal_cdf(adjusted), 0.0, 1.0)


# ------------------------------------------------------------------- the authors' smoothing


class SmoothedCurves(NamedTuple):
    """The authors' post-processed curves (`postprocess_like_authors`).

    Attributes
    ----------
    mean, std : ndarray, shape (points,)
        Mean and standard deviation across runs after outlier replacement,
        each smoothed by the two moving averages.
    low, high : ndarray, shape (points,)
        ``mean -+ band * std`` (band 0.5 in the comparison figure).
    """

    mean: NDArray[np.float64]
    std: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]


def replace_outliers(
    series: ArrayLike, neighbours: int = 5, threshold: float = 0.3
) -> NDArray[np.float64]:
    """Replace every point more than ``threshold`` away from its neighbours' mean by that mean.

    The neighbours are up to ``neighbours`` points on each side (fewer at the
    ends), taken from the original series; "away" is relative:
    ``|x - m| > threshold |m|``. Works along the last axis.
    """
    values = np.asarray(series, dtype=float)
    out = values.copy()
    length = values.shape[-1]
    for i in range(length):
        around = [
            j for j in range(i - neighbours, i + neighbours + 1) if 0 <= j < length and j != i
        ]
        if not around:
            continue
        local = np.nanmean(values[..., around], axis=-1)
        far = np.abs(values[..., i] - local) > threshold * np.abs(local)
        out[..., i] = np.where(far, local, values[..., i])
    return out


def moving_average(series: ArrayLike, window: int) -> NDArray[np.float64]:
    """Trailing moving average over ``window`` points (fewer at the start), along the last axis."""
    values = np.asarray(series, dtype=float)
    cumulative = np.cumsum(np.nan_to_num(values), axis=-1)
    shifted = np.concatenate(
        [np.zeros(values.shape[:-1] + (window,)), cumulative[..., :-window]], axis=-1
    )[..., : values.shape[-1]]
    counts = np.minimum(np.arange(1, values.shape[-1] + 1), window)
    return (cumulative - shifted) / counts


def postprocess_like_authors(
    curves: ArrayLike, *, windows: Sequence[int] = (20, 10), band: float = 0.5
) -> SmoothedCurves:
    """Post-process greedy-return curves as the paper's figures were (for visual comparison).

    1. In each run's series, a point more than 30% away from the mean of its 5
       neighbours on each side is replaced by that mean (`replace_outliers`).
    2. Mean and standard deviation across runs at every point (`mean_std`).
    3. Both are smoothed by trailing moving averages of 20, then 10 points.
    4. The band is ``mean -+ 0.5 std``.

    Parameters
    ----------
    curves : array-like, shape (runs, points)
        One greedy series per run (the evaluations after every 10th episode).
    windows : sequence of int
        The moving-average windows, applied in order.
    band : float
        Half-width of the band in standard deviations.

    Returns
    -------
    SmoothedCurves

    References
    ----------
    "The authors' code and this one" (docs/authors-code.md), "Protocol behind the figures".
    """
    mean, std = mean_std(replace_outliers(curves))
    for window in windows:
        mean, std = moving_average(mean, window), moving_average(std, window)
    return SmoothedCurves(mean, std, mean - band * std, mean + band * std)


# ----------------------------------------------------------------------------- summaries


class WindowRow(NamedTuple):
    """Statistics of one column over one window of episodes, one score per seed.

    Attributes
    ----------
    column : str
        ``"greedy_return"`` or ``"return"``.
    first, last : int
        The window's episodes, inclusive.
    seeds : int
        Runs with a score in the window.
    mean, std : float
        Across seeds of each seed's mean over the window (population std), or,
        when ``postprocessed``, the window means of the authors' smoothed curves.
    iqm, ci_low, ci_high : float
        The IQM and its 95% bootstrap interval (NaN when ``postprocessed``).
    postprocessed : bool
        Whether the authors' post-processing was applied (`postprocess_like_authors`).
    """

    column: str
    first: int
    last: int
    seeds: int
    mean: float
    std: float
    iqm: float
    ci_low: float
    ci_high: float
    postprocessed: bool


def summarize(
    table: dict[str, NDArray],
    window: int,
    *,
    columns: Sequence[str] = ("greedy_return", "return"),
    postprocess: bool = False,
    seed: int = 0,
    method: Interval = "expanded",
) -> list[WindowRow]:
    """Summarize the final ``window`` episodes of a metrics table, raw (and post-processed).

    Parameters
    ----------
    table : dict of column -> array
        As returned by `rl.runs.metrics.read_metrics`.
    window : int
        Number of final episodes (100 for CartPole at 1,000 episodes, 200 for
        Pendulum at 2,000: the last 10 and 20 greedy evaluations).
    columns : sequence of str
        Columns to summarize.
    postprocess : bool
        Also give, for ``greedy_return``, a row after the authors'
        post-processing (labelled ``postprocessed=True``), beside the raw row.
    seed, method
        Of the bootstrap (`iqm_interval`).

    Returns
    -------
    list of WindowRow
    """
    last = int(np.max(table["episode"]))
    first = max(1, last - int(window) + 1)
    rows = []
    for column in columns:
        episodes, values = pivot(table, column)
        inside = (episodes >= first) & (episodes <= last)
        part = values[:, inside]
        present = np.sum(~np.isnan(part), axis=1) > 0
        scores = np.nanmean(part[present], axis=1) if present.any() else np.zeros(0)
        mean, std = mean_std(scores[:, None]) if scores.size else (np.array([np.nan]),) * 2
        interval = iqm_interval(scores, seed=seed, method=method)
        stats = (float(mean[0]), float(std[0]), interval.iqm, interval.low, interval.high)
        rows.append(WindowRow(column, first, last, int(scores.size), *stats, False))
        if postprocess and column == "greedy_return" and scores.size:
            evaluated = ~np.all(np.isnan(values), axis=0)
            smooth = postprocess_like_authors(values[:, evaluated])
            kept = inside[evaluated]
            stats = (float(np.mean(smooth.mean[kept])), float(np.mean(smooth.std[kept])))
            nan = math.nan
            rows.append(
                WindowRow(column, first, last, int(scores.size), *stats, nan, nan, nan, True)
            )
    return rows
