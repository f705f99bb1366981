"""The page "Does the paper reproduce?", the pages' generated tables, and their builder.

`rl.experiments.results_page` writes ``docs/results.md`` and every table that a
page marks (`rl.experiments.page_tables`) from the CSV files in ``docs/results/``.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest

from rl.experiments.claims import CLAIMS, FAILS, HOLDS, UNSURE
from rl.experiments.page_tables import table_names
from rl.experiments.results_page import DOCS, expected_pages, main, render, stale_pages
from rl.experiments.results_tables import READINGS, read_tables

PAGE = DOCS / "results.md"


def test_the_page_is_what_the_command_writes_from_the_committed_tables() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(read_tables(DOCS / "results"))


def test_every_claim_is_on_the_page_with_a_verdict_per_reading_and_its_figure() -> None:
    page = PAGE.read_text(encoding="utf-8")
    verdict = "|".join(re.escape(f"**{v}**") for v in (HOLDS, FAILS, UNSURE))
    for claim in CLAIMS:
        row = next(line for line in page.splitlines() if f"](#{claim.key})" in line)
        assert claim.quote in row and len(re.findall(verdict, row)) == len(READINGS), row
        assert f"{{#{claim.key}}}" in page and f"results/{claim.key}.png" in page
        assert (DOCS / "results" / f"{claim.key}.png").is_file()
    assert sum(p.stat().st_size for p in (DOCS / "results").glob("*.png")) < 500_000


def test_a_missing_table_is_one_line_and_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(DOCS / "results", tmp_path / "results", ignore=shutil.ignore_patterns("*.png"))
    (tmp_path / "results" / "lines.csv").unlink()
    assert main(["--docs", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "lines.csv is missing" in err and "\n" not in err
    assert not (tmp_path / "results.md").exists()


def test_every_generated_table_on_every_page_is_what_the_command_writes() -> None:
    pages = expected_pages()
    marked = {page.relative_to(DOCS).as_posix() for page in pages} - {"results.md"}
    assert {"readings.md", "discrete-problems.md", "classics.md", "highway.md"} <= marked
    assert "is-teql-for-my-problem.md" in marked
    assert stale_pages() == []
    names = [name for page in pages for name in table_names(page.read_text(encoding="utf-8"))]
    assert len(names) == len(set(names)), "two markers name the same table"
    assert all((DOCS / "results" / f"{name}.csv").is_file() for name in names)


def test_a_shared_number_comes_from_its_row_of_the_results_tables() -> None:
    line = read_tables(DOCS / "results").lines[("comparison", "cartpole", "teql"), "stable"]
    readings = expected_pages()[DOCS / "readings.md"]
    row = next(r for r in readings.splitlines() if r.startswith("| `stable` (`--reading stable`)"))
    assert line.shown == "76.0 ± 14.4" and f"| {line.shown} |" in row
    analysis = expected_pages()[DOCS / "analysis.md"]
    energy = read_tables(DOCS / "results").rank[1]
    assert energy["env"] == "cartpole" and energy["energy"] == "0.9982"
    assert "| CartPole | 0.99 | no | 0.9982 | 0.9978 |" in analysis


def _docs_copy(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    shutil.copytree(DOCS / "results", docs / "results", ignore=shutil.ignore_patterns("*.png"))
    shutil.copy(DOCS / "results.md", docs / "results.md")
    shutil.copy(DOCS / "highway.md", docs / "highway.md")
    return docs


def _rows(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def _write_rows(path: Path, rows: list[list[str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)


def test_check_names_a_stale_page_and_the_command_brings_it_up_to_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = _docs_copy(tmp_path)
    assert main(["--docs", str(docs), "--check"]) == 0
    table = docs / "results" / "highway-twin-speed.csv"
    rows = _rows(table)
    rows[1][1] = "12345"
    _write_rows(table, rows)
    capsys.readouterr()
    assert main(["--docs", str(docs), "--check"]) == 1
    err = capsys.readouterr().err.strip()
    command = "python -m rl.experiments.results_page"
    assert err == f"error: {docs / 'highway.md'} is stale: run {command}"
    assert "12345" not in (docs / "highway.md").read_text(encoding="utf-8")
    assert main(["--docs", str(docs)]) == 0
    assert f"| {' | '.join(rows[1])} |" in (docs / "highway.md").read_text(encoding="utf-8")
    assert main(["--docs", str(docs), "--check"]) == 0


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (("<!-- end table -->\n", ""), "opens before table highway-equality is closed"),
        (("<!-- table: highway-equality -->\n", ""), "closes no table"),
        (("<!-- table: highway-equality -->", "<!-- table: highway-nothing -->"), "missing"),
    ],
)
def test_a_broken_marker_is_one_line_and_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: tuple[str, str], message: str
) -> None:
    docs = _docs_copy(tmp_path)
    page = docs / "highway.md"
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace(*damage, 1), encoding="utf-8")
    assert main(["--docs", str(docs), "--check"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {page}: ") and message in err and "\n" not in err


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("{lines.csv comparison/cartpole/teql/none}", "teql/none} names no value of lines.csv"),
        ("{rank.csv cartpole/nothing}", "{rank.csv cartpole/nothing} names no value of rank.csv"),
        ("always | IDLE", "row 2 has a line break or an unescaped '|' in a cell"),
        ("always\nIDLE", "row 2 has a line break or an unescaped '|' in a cell"),
    ],
)
def test_a_bad_cell_of_a_table_is_one_line_and_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cell: str, message: str
) -> None:
    docs = _docs_copy(tmp_path)
    table = docs / "results" / "highway-equality.csv"
    rows = _rows(table)
    rows[1][0] = cell
    _write_rows(table, rows)
    before = (docs / "highway.md").read_text(encoding="utf-8")
    assert main(["--docs", str(docs)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert (docs / "highway.md").read_text(encoding="utf-8") == before


# ------------------------------------------------------------------- numbers other code holds
# The authors' code's raw returns live in Python, the suite's scale in its settings: each is
# checked against its source. (The suite's and the formats' tables are marked tables, written
# by `analysis`, which `rl` does not import: tests/analysis checks those CSVs.)


def _page_table(text: str, header: str) -> list[list[str]]:
    lines = text.splitlines()
    start = lines.index(header)
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


SUITE = DOCS / "data" / "lowrank-suite" / "full"
"""The whole suite's summaries that the page shows (``python -m analysis.lowrank_suite``)."""


def test_the_page_states_the_scale_of_the_committed_suite() -> None:
    page = (DOCS / "is-teql-for-my-problem.md").read_text(encoding="utf-8")
    settings = json.loads((SUITE / "suite.json").read_text(encoding="utf-8"))
    with (SUITE / "verdicts.csv").open(encoding="utf-8") as handle:
        cells = sum(1 for _ in csv.DictReader(handle))
    assert (settings["discounts"], cells) == ([0.9, 0.99], 300)
    scale = f"{settings['seeds']} seeds per cell and {settings['episodes']} training episodes"
    assert scale in " ".join(page.split())
    names = table_names(page)
    assert names == [
        "lowrank-verdict-counts", "lowrank-rank-axis", "lowrank-modes-axis",
        "formats-pendulum", "formats-cartpole",
    ]  # fmt: skip


def test_the_authors_codes_raw_returns_on_its_page_are_rl_experiments_paper_released_raw() -> None:
    from rl.experiments.paper import RELEASED_RAW

    page = (DOCS / "authors-code.md").read_text(encoding="utf-8")
    rows = {row[0]: row[1:] for row in _page_table(page, "| | TEQL | TLR |")}
    for (env, line), value in RELEASED_RAW.items():
        label = next(label for label in rows if label.lower().startswith(env))
        cell = rows[label][("teql", "tlr").index(line)]
        assert label.partition("episodes ")[2] in value.source, (env, value.source)
        assert cell == f"{value.value:g} ± {value.std:g}", (env, line)
