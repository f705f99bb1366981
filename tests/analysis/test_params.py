import subprocess
import sys

import pytest

from analysis.params import (
    ENVIRONMENTS,
    cp_params,
    cur_params,
    format_table,
    main,
    match_cur_k,
    match_width,
    matched_widths,
    mlp_params,
    parameter_table,
    sac_params,
)


def test_cp_budgets():
    assert cp_params(10, [10, 10, 20, 20, 10]) == 700
    assert cp_params(10, [20, 20, 10]) == 500
    assert cp_params(20, [20] * 9 + [5]) == 3700
    assert [env.budget for env in ENVIRONMENTS.values()] == [700, 500, 3700]


def test_mlp_and_sac_formulas():
    assert mlp_params(4, 46, 10) == 4 * 46 + 46 + 46 * 10 + 10 == 700
    assert mlp_params(2, 38, 10) == 504
    assert mlp_params(9, 246, 5) == 3695
    assert mlp_params(4, [46], 10) == 700
    assert mlp_params(4, [8, 6], 2) == (4 * 8 + 8) + (8 * 6 + 6) + (6 * 2 + 2)
    assert mlp_params(3, [], 2) == 8
    assert sac_params(4, 15, 10) == 3 * 235 + 1 == 706
    assert sac_params(2, 12, 10) == 499
    assert sac_params(9, 82, 5) == 3706
    # the appendix's printed SAC widths do not give its printed counts
    assert sac_params(4, 38, 10) == 1741
    assert sac_params(2, 31, 10) == 1240


def test_cur_formula():
    assert cur_params(9, 3**4, 10) == 738
    assert cur_params(10, 7**2, 10) == 490
    assert cur_params(20, 2**9, 5) == 9940


def test_match_width_picks_the_nearest_and_smaller_on_ties():
    assert match_width(700, lambda h: mlp_params(4, h, 10)) == 46
    assert match_width(500, lambda h: mlp_params(2, h, 10)) == 38
    assert match_width(3700, lambda h: mlp_params(9, h, 5)) == 246
    # counts 10h: 25 is 5 from both 20 and 30 -> the smaller width
    assert match_width(25, lambda h: 10 * h) == 2
    assert match_width(5, lambda h: 10 * h) == 1
    assert match_width(10**9, lambda h: h, max_width=50) == 50
    with pytest.raises(ValueError, match="'budget' parameter"):
        match_width(0, lambda h: h)


def test_matched_widths():
    assert matched_widths() == {
        ("cartpole", "dqn"): 46,
        ("cartpole", "sac"): 15,
        ("pendulum", "dqn"): 38,
        ("pendulum", "sac"): 12,
        ("highway", "dqn"): 246,
        ("highway", "sac"): 82,
    }


def test_match_cur_k():
    assert match_cur_k(700, 81, 10) == 8  # 664 is nearer 700 than the appendix's 738
    assert match_cur_k(500, 49, 10) == 10
    assert match_cur_k(3700, 512, 5) == 5  # capped at |A|
    assert cur_params(match_cur_k(3700, 512, 5), 512, 5) == 512 * 5  # the full table


def test_parameter_table_rows():
    rows = parameter_table()
    assert len(rows) == 12
    table = {(r.environment, r.algorithm): r for r in rows}
    expected = {
        ("CartPole", "TEQL/TLR"): 700,
        ("CartPole", "DQN"): 700,
        ("CartPole", "SAC"): 706,
        ("CartPole", "LoRa-VI"): 738,
        ("Pendulum", "TEQL/TLR"): 500,
        ("Pendulum", "DQN"): 504,
        ("Pendulum", "SAC"): 499,
        ("Pendulum", "LoRa-VI"): 490,
        ("Highway", "TEQL/TLR"): 3700,
        ("Highway", "DQN"): 3695,
        ("Highway", "SAC"): 3706,
        ("Highway", "LoRa-VI"): 9940,
    }
    assert {k: r.params for k, r in table.items()} == expected
    assert table["CartPole", "LoRa-VI"].ratio == pytest.approx(738 / 700)
    assert not table["Highway", "LoRa-VI"].feasible
    assert "infeasible" in table["Highway", "LoRa-VI"].architecture
    assert sum(r.feasible for r in rows) == 11


def test_formats():
    rows = parameter_table()
    text = format_table(rows)
    assert text.splitlines()[0].split() == [
        "Environment",
        "Algorithm",
        "Architecture",
        "Params",
        "Ratio",
    ]
    markdown = format_table(rows, "markdown")
    assert markdown.count("\n") == 14 and "\\|A\\|" in markdown
    csv_text = format_table(rows, "csv")
    assert (
        csv_text.splitlines()[4]
        == 'CartPole,LoRa-VI,"K=9, state=[3,3,3,3], |A|=10",738,1.0543,True'
    )
    with pytest.raises(ValueError, match="'fmt' parameter"):
        format_table(rows, "html")


def test_main_returns_zero(capsys):
    assert main(["--format", "csv"]) == 0
    assert "Highway,LoRa-VI" in capsys.readouterr().out


def test_command_prints_the_table():
    result = subprocess.run(
        [sys.executable, "-m", "analysis.params"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 14
    assert "CartPole     DQN        hidden=[46], in=4, out=10" in result.stdout
    assert any(line.startswith("Highway") and "9,940" in line for line in lines)
    bad = subprocess.run(
        [sys.executable, "-m", "analysis.params", "--format", "xml"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode != 0 and "invalid choice" in bad.stderr
