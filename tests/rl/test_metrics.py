import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from rl.runs.metrics import (
    COLUMNS,
    MetricsWriter,
    iqm,
    milestone_summaries,
    pivot,
    read_metrics,
    summarize,
    window_scores,
)


def _write(path, rows):
    writer = MetricsWriter(path)
    for row in rows:
        writer.write(*row)
    writer.close()


def test_roundtrip_is_exact_and_nan_for_missing_greedy(tmp_path):
    path = tmp_path / "metrics.csv"
    ret = 0.1 + 0.2  # not exactly representable in few digits
    _write(path, [(0, 1, ret, 5, float("nan"), 0.5), (1, 1, -3.0, 7, 2.0 / 3.0, 0.5)])
    assert path.read_text().splitlines()[0] == ",".join(COLUMNS)
    table = read_metrics(path)
    assert table["return"][0] == ret
    assert np.isnan(table["greedy_return"][0])
    assert table["greedy_return"][1] == 2.0 / 3.0
    assert table["seed"].dtype == np.int64 and table["length"].tolist() == [5, 7]


finite = st.floats(allow_nan=False, allow_infinity=False)
metric_rows = st.lists(
    st.tuples(
        st.integers(0, 2**40),
        st.integers(1, 2**40),
        finite,
        st.integers(0, 10**9),
        st.one_of(st.just(float("nan")), finite),
        st.floats(0.0, 1e6),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(rows=metric_rows)
def test_every_written_row_reads_back_exactly(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("metrics") / "metrics.csv"
    _write(path, rows)
    table = read_metrics(path)
    written = list(zip(*rows, strict=True)) if rows else [()] * len(COLUMNS)
    for column, values in zip(COLUMNS, written, strict=True):
        expected = np.array(values, dtype=table[column].dtype)
        if column == "wall_time":  # written with six decimals
            expected = np.array([float(f"{v:.6f}") for v in values])
        np.testing.assert_array_equal(table[column], expected, strict=True)


def test_a_written_file_takes_the_fast_path(tmp_path, monkeypatch):
    import rl.runs.metrics as metrics

    path = tmp_path / "metrics.csv"
    _write(path, [(0, 1, 0.1, 5, float("nan"), 0.5), (1, 1, -3.0, 7, 2.0, 0.25)])
    expected = read_metrics(path)

    def row_by_row(reader):
        raise AssertionError("read row by row")

    monkeypatch.setattr(metrics, "_parse_rows", row_by_row)
    table = read_metrics(path)
    for column in COLUMNS:
        np.testing.assert_array_equal(table[column], expected[column], strict=True)


def test_a_file_numpy_cannot_parse_reads_the_same_through_csv(tmp_path):
    plain, quoted = tmp_path / "plain.csv", tmp_path / "quoted.csv"
    _write(plain, [(0, 1, 0.1 + 0.2, 5, float("nan"), 0.5), (1, 1, -3.0, 7, 2.0 / 3.0, 0.25)])
    lines = plain.read_text().splitlines()
    rows = ['"' + line.replace(",", '","') + '"' for line in lines[1:]]
    quoted.write_text("\n".join([lines[0], *rows]) + "\n")
    assert quoted.read_text().splitlines()[1].startswith('"0","1",')
    a, b = read_metrics(plain), read_metrics(quoted)
    for column in COLUMNS:
        np.testing.assert_array_equal(a[column], b[column], strict=True)


def test_an_integer_column_must_hold_integers(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text(",".join(COLUMNS) + "\n0,1.0,2.0,5,,0.1\n")
    assert read_metrics(path)["episode"].tolist() == [1]  # pandas takes an integral float
    path.write_text(",".join(COLUMNS) + "\n0,1.5,2.0,5,,0.1\n")
    with pytest.raises(ValueError, match="is damaged: line 2: invalid literal for int"):
        read_metrics(path)


def test_truncate_then_append(tmp_path):
    path = tmp_path / "metrics.csv"
    writer = MetricsWriter(path)
    writer.write(0, 1, 1.0, 1, float("nan"), 0.0)
    length = writer.flush()
    writer.write(0, 2, 2.0, 1, float("nan"), 0.0)
    writer.close()
    writer = MetricsWriter(path, truncate_to=length)
    writer.write(0, 2, 9.0, 1, float("nan"), 0.0)
    writer.close()
    table = read_metrics(path)
    assert table["episode"].tolist() == [1, 2]
    assert table["return"].tolist() == [1.0, 9.0]


def test_pivot_and_window_scores():
    table = {
        "seed": np.array([3, 4, 3, 4]),
        "episode": np.array([1, 1, 2, 2]),
        "return": np.array([1.0, 2.0, 3.0, 4.0]),
        "greedy_return": np.array([np.nan, np.nan, 5.0, np.nan]),
    }
    episodes, values = pivot(table, "return")
    assert episodes.tolist() == [1, 2]
    np.testing.assert_array_equal(values, [[1.0, 3.0], [2.0, 4.0]])
    np.testing.assert_array_equal(window_scores(table, "return", 1, 2), [2.0, 3.0])
    scores = window_scores(table, "greedy_return", 1, 2)
    assert scores[0] == 5.0 and np.isnan(scores[1])


def test_summarize_matches_definitions():
    scores = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 100.0])
    summary = summarize(scores)
    assert summary.mean == pytest.approx(scores.mean())
    assert summary.std == pytest.approx(scores.std(ddof=1))
    assert summary.iqm == pytest.approx(stats.trim_mean(scores, 0.25)) == pytest.approx(3.5)
    assert summary.iqm_low <= summary.iqm <= summary.iqm_high
    assert summary.runs == 8
    assert summarize(scores) == summary  # reproducible default stream
    assert iqm(np.array([1.0, 2.0, 3.0, 4.0])) == pytest.approx(2.5)


def test_summarize_edge_cases():
    assert summarize(np.array([np.nan])).runs == 0
    single = summarize(np.array([2.0]))
    assert (single.mean, single.std, single.iqm) == (2.0, 0.0, 2.0)


def test_milestones_cover_the_end_and_find_an_evaluation():
    episodes = np.repeat(np.arange(1, 41), 2)
    seeds = np.tile([0, 1], 40)
    greedy = np.where(episodes % 10 == 0, 1.0, np.nan)
    table = {
        "seed": seeds,
        "episode": episodes,
        "return": episodes.astype(float),
        "greedy_return": greedy,
    }
    rows = milestone_summaries(table)
    assert [(r.first, r.last) for r in rows] == [(7, 10), (17, 20), (37, 40)]
    assert rows[-1].training.mean == pytest.approx(np.mean([37, 38, 39, 40]))
    assert rows[-1].greedy.mean == 1.0


def test_iqm_equals_scipy_trim_mean():
    rng = np.random.default_rng(3)
    for size in (1, 2, 3, 4, 5, 7, 8, 30):
        values = rng.normal(size=(4, size))
        np.testing.assert_allclose(iqm(values, axis=1), stats.trim_mean(values, 0.25, axis=1))
        assert iqm(values[0]) == pytest.approx(stats.trim_mean(values[0], 0.25))


def test_refuses_to_resume_a_shortened_file(tmp_path):
    path = tmp_path / "metrics.csv"
    _write(path, [(0, 1, 1.0, 1, float("nan"), 0.0)])
    with pytest.raises(ValueError, match="fewer than"):
        MetricsWriter(path, truncate_to=10_000)


DAMAGED = {
    "renamed column": ("seed,episode,retrun,length,greedy_return,wall_time\n", "lacks the columns"),
    "short row": (",".join(COLUMNS) + "\n0,1,2.0,5\n", "is damaged: line 2: expected 6 fields"),
    "long row": (",".join(COLUMNS) + "\n0,1,2.0,5,,0.1,9\n", "is damaged: line 2: expected 6"),
    "not a number": (",".join(COLUMNS) + "\n0,x,2.0,5,,0.1\n", "is damaged: line 2: invalid"),
    "not UTF-8": (b"seed,\xff\xfe,episode\n", "is damaged: 'utf-8' codec can't decode"),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_damaged_file_raises_one_line_value_error(tmp_path, case):
    text, message = DAMAGED[case]
    path = tmp_path / "metrics.csv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError) as error:
        read_metrics(path)
    assert str(error.value).startswith(f"{path} ") and message in str(error.value)
    assert "\n" not in str(error.value)


def test_writer_refuses_a_link_or_a_fifo_and_leaves_the_target(tmp_path):
    from rl.runs.rundir import RunDirError

    target = tmp_path / "elsewhere.csv"
    target.write_bytes(b"y" * 28_000)
    (tmp_path / "metrics.csv").symlink_to(target)
    with pytest.raises(RunDirError, match="metrics.csv: it is a symbolic link"):
        MetricsWriter(tmp_path / "metrics.csv", truncate_to=5)
    assert target.read_bytes() == b"y" * 28_000
    os.mkfifo(tmp_path / "fifo.csv")
    with pytest.raises(RunDirError, match="fifo.csv: it is not a regular file"):
        MetricsWriter(tmp_path / "fifo.csv")


def test_writer_creates_the_file_by_the_umask(tmp_path):
    previous = os.umask(0o077)
    try:
        MetricsWriter(tmp_path / "metrics.csv").close()
    finally:
        os.umask(previous)
    assert (tmp_path / "metrics.csv").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "metrics.csv").read_text() == ",".join(COLUMNS) + "\n"
