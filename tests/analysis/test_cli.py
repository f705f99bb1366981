import subprocess
import sys

import numpy as np
import pytest

from analysis.bounds import cli as bounds_cli
from analysis.rank import cli as rank_cli


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_rank_command_end_to_end(tmp_path):
    out = tmp_path / "rank"
    result = run(
        "analysis.rank",
        "--env",
        "lowrank",
        "--ranks",
        "1:10",
        "--restarts",
        "1",
        "--out",
        str(out),
        "--no-progress",
    )
    assert result.returncode == 0, result.stderr
    for name in ("rank_profile.csv", "spectral.csv", "rank_profile.png", "rank_profile.pdf"):
        assert (out / name).is_file(), name
    assert "rank 10: CP energy" in result.stdout
    assert "smallest rank reaching 90% CP energy" in result.stdout
    assert "<= B_R <=" in result.stdout
    header = (out / "rank_profile.csv").read_text().splitlines()[0]
    assert header.split(",")[:6] == [
        "rank", "rel_error", "energy", "sup_error", "b_r_upper", "b_r_lower"
    ]  # fmt: skip


def test_rank_headline_follows_center():
    rows = [
        {"rank": r, "energy": e, "energy_about_mean": m}
        for r, e, m in ((1, 0.99, 0.5), (2, 0.995, 0.8), (3, 0.999, 0.95))
    ]
    tail = rank_cli.summary_lines(_Q, rows, None, 1.0, centred=True)[-1]
    assert tail == "smallest rank reaching 90% energy about the mean: 3 (CP energy: 1)"
    tail = rank_cli.summary_lines(_Q, rows, None, 1.0)[-1]
    assert tail == "smallest rank reaching 90% CP energy: 1 (energy about the mean: 3)"


class _Q:  # the fields of analysis.qstar.QTensor that summary_lines reads
    source, tensor, gamma = "a test tensor", np.zeros((2, 2)), None


def test_bounds_commands_end_to_end(tmp_path):
    result = run("analysis.bounds", "--gamma", "0.9", "--r-max", "1")
    assert result.returncode == 0, result.stderr
    assert "V_max = R_max / (1 - gamma) = 10" in result.stdout
    out = tmp_path / "bounds"
    result = run(
        "analysis.bounds", "--env", "lowrank", "--episodes", "3", "--out", str(out), "--no-progress"
    )
    assert result.returncode == 0, result.stderr
    for name in (
        "updates.csv",
        "prop3.csv",
        "summary.csv",
        "bounds_lowrank.png",
        "bounds_lowrank.pdf",
    ):
        assert (out / name).is_file(), name
    assert "Proposition 2: 0 violations" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("analysis.rank", "--env", "pendulum", "--gamma", "1.5"),
        ("analysis.bounds", "--gamma", "0", "--r-max", "1"),
    ],
)
def test_bad_gamma_exits_2_with_one_line(args):
    result = run(*args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "gamma" in result.stderr


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--env", "mountaincar"], "unknown --env"),
        (["--env", "highway"], "--source run"),
        (["--env", "cartpole", "--source", "run"], "--run DIR"),
        (["--env", "cartpole", "--source", "run", "--run", "/nonexistent"], "not a run directory"),
        (["--env", "lowrank", "--ranks", "a:b"], "--ranks"),
        (
            ["--env", "lowrank", "--ranks", "5:1"],
            "reversed range: FIRST must be <= LAST (did you mean 1:5?)",
        ),
        (["--env", "lowrank", "--ranks", "1:5:0"], "STEP 0: it must be >= 1"),
        (["--env", "lowrank", "--ranks", "0,2"], "ranks >= 1"),
        (["--env", "lowrank", "--gamma", "1.0"], "gamma"),
    ],
)
def test_rank_bad_input(argv, needle, capsys, tmp_path):
    assert rank_cli.main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1


def test_rank_refuses_a_run_without_q(tmp_path, capsys):
    from rl.runs.config import TrainConfig
    from rl.runs.training import train

    train(TrainConfig(env="lowrank", agent="random", out=str(tmp_path / "r"), episodes=1))
    argv = ["--env", "lowrank", "--source", "run", "--run", str(tmp_path / "r")]
    assert rank_cli.main(argv) == 2
    assert "no Q-tensor" in capsys.readouterr().err


def test_rank_of_a_run(tmp_path, capsys):
    from rl.runs.config import TrainConfig
    from rl.runs.training import train

    train(TrainConfig(env="lowrank", agent="tabular", out=str(tmp_path / "t"), episodes=1))
    argv = ["--env", "lowrank", "--source", "run", "--run", str(tmp_path / "t"), "--ranks", "1:2"]
    out = ["--restarts", "1", "--no-progress", "--out", str(tmp_path / "o")]
    assert rank_cli.main([*argv, *out]) == 0
    assert "Q-table of replica 0 of tabular on lowrank" in capsys.readouterr().out
    assert (tmp_path / "o" / "rank_profile.csv").is_file()
    assert rank_cli.main(["--env", "inventory", *argv[2:], *out]) == 2
    assert "not --env 'inventory'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--r-max", "1"], "--gamma and --r-max"),
        (["--env", "cartpole", "--episodes", "1"], "--env must be one of"),
        (["--env", "lowrank", "--episodes", "0"], ">= 1"),
        (["--env", "lowrank", "--set", "rank"], "KEY=VALUE"),
        (["--env", "lowrank", "--episodes", "1", "--set", "rnak=3"], "rnak"),
        (["--gamma", "0.9", "--r-max", "-1"], "--r-max"),
    ],
)
def test_bounds_bad_input(argv, needle, capsys, tmp_path):
    assert bounds_cli.main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1


def test_parsers_and_ranks():
    assert rank_cli.build_parser().parse_args(["--env", "lowrank"]).ranks == "1:20"
    assert bounds_cli.build_parser().parse_args(["--gamma", "0.5"]).gamma == 0.5
    assert rank_cli.parse_ranks("1:20") == list(range(1, 21))
    assert rank_cli.parse_ranks("1:9:4") == [1, 5, 9]
    assert rank_cli.parse_ranks("20,10") == [10, 20]
