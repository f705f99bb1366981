"""CP, Tucker and tensor train side by side: exact ranks, never worse with more effort, CLI."""

import csv

import numpy as np
import pytest

from analysis.formats import cli, page_tables
from analysis.formats.profile import FORMATS, format_profile
from analysis.lowrank_suite.grid import Instance


@pytest.fixture(scope="module")
def q_star():
    return Instance(2, 2, 0.9).make().q_star  # CP rank 2, shape (3, 3, 3, 3)


def _by_format(rows, name):
    return [r for r in rows if r["format"] == name]


def test_exact_rank_two_is_held_by_every_format_at_rank_two(q_star):
    rows = format_profile(q_star, [1, 2, 3], restarts=1, refine=False)
    scale = np.abs(q_star).max()
    for name in FORMATS:
        mine = {r["rank"]: r for r in _by_format(rows, name)}
        assert mine[1]["rel_error"] > 1e-3
        assert mine[2]["rel_error"] < 1e-8 and mine[2]["sup_error"] < 1e-8 * scale
    params = {r["format"]: r["n_params"] for r in rows if r["rank"] == 2}
    assert params == {"cp": 2 * 12, "tucker": 2**4 + 2 * 12, "tt": 3 * 2 + 2 * (2 * 3 * 2) + 2 * 3}


def test_more_ranks_or_restarts_are_never_worse():
    q = Instance(None, 2, 0.9).make().q_star  # no low-rank structure
    few = format_profile(q, [1, 3], restarts=1, refine=False)
    more = format_profile(q, [1, 2, 3], restarts=2, refine=False)
    for name in FORMATS:
        mine = _by_format(more, name)
        for key in ("rel_error", "sup_error"):
            values = [r[key] for r in mine]
            assert values == sorted(values, reverse=True)
        at = {r["rank"]: r for r in mine}
        for row in _by_format(few, name):
            assert at[row["rank"]]["rel_error"] <= row["rel_error"]
            assert at[row["rank"]]["sup_error"] <= row["sup_error"]


def test_command_writes_table_and_figure(tmp_path, capsys):
    out = tmp_path / "formats"
    code = cli.main(["--env", "planted", "--planted-rank", "2", "--ranks", "1,2",
                     "--restarts", "1", "--no-refine", "--out", str(out)])  # fmt: skip
    assert code == 0
    with open(out / "formats.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["format"], r["rank"]) for r in rows] == [
        (f, str(k)) for f in FORMATS for k in (1, 2)
    ]
    assert (out / "formats.png").is_file()
    assert "planted Q* of CP rank 2" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args", [["--ranks", "0"], ["--planted-rank", "0"], ["--restarts", "0"], ["--gamma", "2"]]
)
def test_bad_arguments_exit_2(args, tmp_path, capsys):
    assert cli.main(["--env", "planted", *args, "--out", str(tmp_path)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_page_tables_written_from_the_committed_fits_are_the_committed_ones(tmp_path):
    assert page_tables.main(["--out", str(tmp_path)]) == 0
    names = sorted(path.name for path in tmp_path.iterdir())
    assert names == ["formats-cartpole.csv", "formats-pendulum.csv"]
    for name in names:
        written = (tmp_path / name).read_text(encoding="utf-8")
        assert written == (page_tables.RESULTS / name).read_text(encoding="utf-8"), name


@pytest.mark.parametrize("env", page_tables.ENVS)
def test_every_cell_of_a_formats_table_is_its_fit_to_the_digits_shown(env):
    with (page_tables.DATA / f"{env}.csv").open(encoding="utf-8") as handle:
        fits = {(row["format"], row["rank"]): row for row in csv.DictReader(handle)}
    header, *body = page_tables.format_rows(fits.values())
    assert header[1:4] == ["CP params", "CP Frobenius", "CP sup"] and len(header) == 10
    assert [row[0] for row in body] == ["1", "2", "5", "10", "20"]
    for rank, *cells in body:
        triples = zip(cells[0::3], cells[1::3], cells[2::3], strict=True)
        for fmt, (params, frobenius, sup) in zip(FORMATS, triples, strict=True):
            fit = fits[fmt, rank]
            assert params.replace(",", "") == fit["n_params"]
            for shown, value in ((frobenius, fit["rel_error"]), (sup, fit["sup_error"])):
                if shown == "exact":
                    assert float(value) < 1e-12
                else:
                    digits = len(shown.partition(".")[2])
                    assert abs(float(shown) - float(value)) <= 0.5 * 10**-digits, (fmt, rank)


def test_page_tables_of_a_missing_profile_exit_2_in_one_line(tmp_path, capsys):
    assert page_tables.main(["--data", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert "pendulum.csv is missing or empty" in err and "\n" not in err
    assert not (tmp_path / "o").exists()
