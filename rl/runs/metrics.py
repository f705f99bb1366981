"""The tidy metrics table (one row per replica and episode) and summary statistics.

``metrics.csv`` has the columns of `COLUMNS`. Floats are written with
Python's shortest round-trip representation, so reading the file back gives
the exact numbers the runner computed; ``greedy_return`` is empty on episodes
without a greedy evaluation and reads back as NaN.

Across seeds the summaries report mean ± standard deviation, as the paper
does, and beside them the interquartile mean (IQM) with a percentile bootstrap
confidence interval over runs, as recommended by rliable (Agarwal et al.,
2021, "Deep Reinforcement Learning at the Edge of the Statistical Precipice").
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import NamedTuple, TextIO

import numpy as np
from numpy.typing import NDArray

from rl.runs.rundir import open_run_file

COLUMNS = ("seed", "episode", "return", "length", "greedy_return", "wall_time")
"""Columns of ``metrics.csv``, in order."""

_INTEGER_COLUMNS = ("seed", "episode", "length")

_DTYPES = {column: np.int64 if column in _INTEGER_COLUMNS else np.float64 for column in COLUMNS}
"""Each column's dtype as `read_metrics` returns it."""


class MetricsWriter:
    """Append rows to ``metrics.csv``, optionally truncating it first (resume).

    Parameters
    ----------
    path : path-like
        The CSV file; created with a header if missing or empty. Opened without
        following a symbolic link (`rl.runs.rundir.open_run_file`): a link or a
        non-regular file is refused (`rl.runs.rundir.RunDirError`).
    truncate_to : int, optional
        Byte length to cut the file to before appending (the length recorded
        in the checkpoint being resumed). None keeps the file as it is.
    """

    def __init__(self, path: str | os.PathLike, truncate_to: int | None = None) -> None:
        self.path = path
        descriptor = open_run_file(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        self._handle: TextIO = open(descriptor, "a+", newline="", encoding="utf-8")
        if truncate_to is not None:
            size = self._handle.seek(0, os.SEEK_END)
            if size < truncate_to:
                self._handle.close()
                raise ValueError(
                    f"{path} has {size} bytes, fewer than the {truncate_to} the checkpoint "
                    "recorded; it was changed after the checkpoint and cannot be resumed."
                )
            self._handle.truncate(truncate_to)
        self._handle.seek(0, os.SEEK_END)
        self._writer = csv.writer(self._handle, lineterminator="\n")
        if self._handle.tell() == 0:
            self._writer.writerow(COLUMNS)

    def write(
        self, seed: int, episode: int, ret: float, length: int, greedy: float, wall_time: float
    ) -> None:
        """Append one row; a NaN ``greedy`` is written as an empty field."""
        greedy_field = "" if np.isnan(greedy) else repr(float(greedy))
        self._writer.writerow(
            [
                int(seed),
                int(episode),
                repr(float(ret)),
                int(length),
                greedy_field,
                f"{wall_time:.6f}",
            ]
        )

    def flush(self) -> int:
        """Flush to disk and return the current byte length of the file."""
        self._handle.flush()
        os.fsync(self._handle.fileno())
        return self._handle.tell()

    def close(self) -> None:
        """Flush and close the file (closed even if the flush fails, for example on a full disk)."""
        if not self._handle.closed:
            try:
                self.flush()
            finally:
                self._handle.close()


def read_metrics(path: str | os.PathLike) -> dict[str, NDArray]:
    """Read ``metrics.csv`` into one array per column.

    pandas' C parser reads it (``pandas.read_csv``, floats parsed exactly:
    the round trip of Python's ``repr``), 17 to 19 times as fast as the `csv`
    module row by row (``python -m benchmarks metrics``). A file pandas refuses
    (a damaged row, a stray value) is read again with the `csv` module, which
    names the line that does not parse; both give the same table for a file
    either can read, but that pandas takes an integer written as an integral
    float (``3.0``).

    Returns
    -------
    dict of str to ndarray
        ``seed``, ``episode`` and ``length`` as int64, the others as float64
        (NaN where ``greedy_return`` is empty).

    Raises
    ------
    OSError
        If the file cannot be opened.
    ValueError
        In one line naming the file, if its header lacks a column or a row
        does not parse (a damaged file).
    """
    with open(path, newline="", encoding="utf-8") as handle:
        try:
            reader = csv.DictReader(handle)
            missing = set(COLUMNS) - set(reader.fieldnames or ())
            if missing:
                raise ValueError(f"{path} lacks the columns {sorted(missing)}.")
            table = _parse_fast(path)
            return table if table is not None else _parse_rows(reader)
        except (csv.Error, UnicodeDecodeError) as error:
            raise ValueError(f"{path} is damaged: {error}.") from None
        except _RowError as error:
            raise ValueError(f"{path} is damaged: line {reader.line_num}: {error}.") from None


class _RowError(ValueError):
    """A row of ``metrics.csv`` does not parse."""


def _parse_fast(path: str | os.PathLike) -> dict[str, NDArray] | None:
    """Return the columns of ``path`` read by pandas' C parser, or None if it cannot read them.

    Every line must have the header's number of fields (pandas would pad a
    short row and take a long one's first field as an index). Empty fields of
    the float columns read as NaN, as in `_parse_rows`; the integer columns
    must hold integers.
    """
    import pandas as pd

    data = Path(path).read_bytes()
    lines = data.count(b"\n") + (not data.endswith(b"\n"))
    fields = data.split(b"\n", 1)[0].count(b",") + 1
    if data.count(b",") != lines * (fields - 1):
        return None
    # pandas 3 parses floats exactly by default (float_precision is deprecated there)
    exact = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
    try:
        frame = pd.read_csv(
            io.BytesIO(data),
            usecols=list(COLUMNS),
            dtype=_DTYPES,
            index_col=False,
            keep_default_na=False,
            na_values={c: [""] for c in COLUMNS if c not in _INTEGER_COLUMNS},
            engine="c",
            **exact,
        )
    except (ValueError, TypeError, pd.errors.ParserError):
        return None
    if len(frame) != lines - 1:
        return None
    return {column: frame[column].to_numpy(dtype=_DTYPES[column]) for column in COLUMNS}


def _parse_rows(reader: csv.DictReader) -> dict[str, NDArray]:
    """Return the columns of the rows ``reader`` yields, raising `_RowError` on a bad row."""
    values: dict[str, list] = {column: [] for column in COLUMNS}
    for row in reader:
        if None in row or None in row.values():
            raise _RowError(f"expected {len(COLUMNS)} fields")
        try:
            for column in COLUMNS:
                text = row[column]
                if column in _INTEGER_COLUMNS:
                    values[column].append(int(text))
                else:
                    values[column].append(float(text) if text else np.nan)
        except ValueError as error:
            raise _RowError(str(error)) from None
    return {column: np.array(values[column], dtype=_DTYPES[column]) for column in COLUMNS}


def pivot(table: dict[str, NDArray], column: str) -> tuple[NDArray[np.int64], NDArray]:
    """Arrange one column as a (seeds, episodes) matrix.

    Returns
    -------
    episodes : ndarray of int, shape (E,)
        Sorted episode numbers.
    values : ndarray of float, shape (S, E)
        ``values[s, e]``; NaN where a seed lacks an episode.
    """
    seeds, seed_index = np.unique(table["seed"], return_inverse=True)
    episodes, episode_index = np.unique(table["episode"], return_inverse=True)
    values = np.full((len(seeds), len(episodes)), np.nan)
    values[seed_index, episode_index] = table[column]
    return episodes, values


class Summary(NamedTuple):
    """Statistics of one score per run.

    Attributes
    ----------
    mean, std : float
        Mean and sample standard deviation (ddof=1; 0 for one run).
    iqm : float
        Interquartile mean (25% trimmed mean).
    iqm_low, iqm_high : float
        Percentile bootstrap confidence interval of the IQM.
    runs : int
        Number of scores (NaNs dropped).
    """

    mean: float
    std: float
    iqm: float
    iqm_low: float
    iqm_high: float
    runs: int


def iqm(scores: NDArray, axis: int | None = None) -> NDArray | float:
    """Interquartile mean: the mean of the middle 50% of ``scores``.

    The same 25% trimmed mean as ``scipy.stats.trim_mean(scores, 0.25)``, which
    rliable uses: ``int(0.25 n)`` values are cut from each end (without
    importing scipy.stats, which takes a second).
    """
    scores = np.asarray(scores, dtype=float)
    if axis is None:
        scores, axis = scores.ravel(), 0
    size = scores.shape[axis]
    cut = int(0.25 * size)
    ordered = np.sort(scores, axis=axis)
    middle = np.take(ordered, np.arange(cut, size - cut), axis=axis)
    result = middle.mean(axis=axis)
    return float(result) if np.ndim(result) == 0 else result


def summarize(
    scores: NDArray,
    *,
    confidence: float = 0.95,
    repetitions: int = 2000,
    rng: np.random.Generator | None = None,
) -> Summary:
    """Mean ± std and IQM with a bootstrap confidence interval of one score per run.

    Parameters
    ----------
    scores : array-like, shape (runs,)
        One score per run (seed); NaNs are dropped.
    confidence : float
        Coverage of the interval.
    repetitions : int
        Bootstrap resamples of the runs.
    rng : numpy.random.Generator, optional
        Resampling stream; default ``default_rng(0)`` so summaries are reproducible.

    Returns
    -------
    Summary
    """
    scores = np.asarray(scores, dtype=float)
    scores = scores[~np.isnan(scores)]
    if scores.size == 0:
        nan = float("nan")
        return Summary(nan, nan, nan, nan, nan, 0)
    rng = np.random.default_rng(0) if rng is None else rng
    resampled = scores[rng.integers(0, scores.size, size=(repetitions, scores.size))]
    estimates = iqm(resampled, axis=1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(estimates, [tail, 100 - tail])
    std = float(scores.std(ddof=1)) if scores.size > 1 else 0.0
    return Summary(
        float(scores.mean()), std, float(iqm(scores)), float(low), float(high), scores.size
    )


def window_scores(table: dict[str, NDArray], column: str, first: int, last: int) -> NDArray:
    """Per-seed mean of ``column`` over episodes ``first..last`` (inclusive), NaNs ignored.

    Returns
    -------
    ndarray, shape (seeds,)
        NaN for a seed without any value in the window.
    """
    episodes, values = pivot(table, column)
    window = values[:, (episodes >= first) & (episodes <= last)]
    counts = np.sum(~np.isnan(window), axis=1)
    sums = np.nansum(window, axis=1)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


class WindowSummary(NamedTuple):
    """Training and greedy returns over one window of episodes, one score per seed.

    Attributes
    ----------
    first, last : int
        The window's episodes, inclusive.
    greedy_first : int
        First episode of the greedy window: ``first``, or earlier when the window
        holds no evaluation (it then starts at the last evaluation before ``last``).
    training, greedy : Summary
        Statistics across seeds of each seed's mean return in the window.
    """

    first: int
    last: int
    greedy_first: int
    training: Summary
    greedy: Summary


SUMMARY_FRACTION = 0.1
"""Share of the episodes in a summary's window: "the last 10% of training"."""


def window_width(episodes: int, fraction: float = SUMMARY_FRACTION) -> int:
    """Return the episodes in a window of ``fraction`` of ``episodes``: rounded, at least one."""
    return max(1, int(round(fraction * episodes)))


def milestone_summaries(
    table: dict[str, NDArray], episodes: int | None = None, fraction: float = SUMMARY_FRACTION
) -> list[WindowSummary]:
    """Summaries at a quarter, half and the end of training over windows of ``fraction``.

    Parameters
    ----------
    table : dict
        As returned by `read_metrics`.
    episodes : int, optional
        Last episode to consider (default: the largest in the table).
    fraction : float
        Window length as a fraction of ``episodes`` (at least one episode); the
        last window is "the last 10% of training".

    Returns
    -------
    list of WindowSummary
        One per distinct milestone, in increasing order.
    """
    episodes = int(table["episode"].max()) if episodes is None else episodes
    width = window_width(episodes, fraction)
    milestones = sorted({max(1, episodes // 4), max(1, episodes // 2), episodes})
    evaluated = np.unique(table["episode"][~np.isnan(table["greedy_return"])])
    rows = []
    for last in milestones:
        first = max(1, last - width + 1)
        before = evaluated[evaluated <= last]
        greedy_first = int(min(first, before[-1])) if before.size else first
        rows.append(
            WindowSummary(
                first,
                last,
                greedy_first,
                summarize(window_scores(table, "return", first, last)),
                summarize(window_scores(table, "greedy_return", greedy_first, last)),
            )
        )
    return rows
