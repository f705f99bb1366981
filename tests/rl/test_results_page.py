"""The page "Does the paper reproduce?" and its builder (`rl.experiments.results_page`)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from rl.experiments.claims import CLAIMS, FAILS, HOLDS, UNSURE
from rl.experiments.results_page import DOCS, main, render
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
