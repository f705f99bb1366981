"""The analysis CLIs' output directory and size limits: links, files in the way, huge values."""

import os

import pytest

from analysis.bounds import cli as bounds_cli
from analysis.rank import cli as rank_cli

SECRET = b"a file the user never asked to overwrite\n"

RANK_QUICK = ["--env", "lowrank", "--ranks", "1:2", "--restarts", "1", "--no-progress"]
BOUNDS_QUICK = ["--env", "lowrank", "--episodes", "1", "--no-progress"]


def _plant_link(out, name, tmp_path):
    """Make ``out/name`` a link to a file outside ``out``; return that file."""
    target = tmp_path / f"target-{name}"
    target.write_bytes(SECRET)
    out.mkdir(exist_ok=True)
    os.symlink(target, out / name)
    return target


def _one_line(capsys):
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    "name", ["rank_profile.csv", "spectral.csv", "rank_profile.png", "rank_profile.pdf"]
)
def test_rank_out_never_writes_through_a_link(name, tmp_path, capsys):
    out = tmp_path / "out"
    target = _plant_link(out, name, tmp_path)
    assert rank_cli.main([*RANK_QUICK, "--out", str(out)]) == 2
    assert "symbolic link" in _one_line(capsys)
    assert target.read_bytes() == SECRET and os.path.islink(out / name)


@pytest.mark.parametrize(
    "name",
    ["updates.csv", "prop3.csv", "summary.csv", "bounds_lowrank.png", "bounds_lowrank.pdf"],
)
def test_bounds_out_never_writes_through_a_link(name, tmp_path, capsys):
    out = tmp_path / "out"
    target = _plant_link(out, name, tmp_path)
    assert bounds_cli.main([*BOUNDS_QUICK, "--out", str(out)]) == 2
    assert "symbolic link" in _one_line(capsys)
    assert target.read_bytes() == SECRET and os.path.islink(out / name)


def test_rank_writes_fresh_files_with_the_umask_over_old_ones(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "rank_profile.csv").write_text("old\n")
    assert rank_cli.main([*RANK_QUICK, "--out", str(out)]) == 0
    assert (out / "rank_profile.csv").read_text().startswith("rank,rel_error,")
    assert (out / "rank_profile.png").read_bytes()[:4] == b"\x89PNG"
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("cli", [rank_cli, bounds_cli])
def test_out_that_is_a_file_is_one_line(cli, tmp_path, capsys):
    existing = tmp_path / "a-file"
    existing.write_bytes(SECRET)
    quick = RANK_QUICK if cli is rank_cli else BOUNDS_QUICK
    assert cli.main([*quick, "--out", str(existing)]) == 2
    assert "--out" in _one_line(capsys)
    assert existing.read_bytes() == SECRET


def _never(*args, **kwargs):
    raise AssertionError("the work started before the input was refused")


def test_rank_refuses_a_rank_above_the_limit_before_fitting(monkeypatch, tmp_path, capsys):
    import analysis.rank

    monkeypatch.setattr(analysis.rank, "rank_profile", _never)
    argv = ["--env", "lowrank", "--no-progress", "--out", str(tmp_path)]
    assert rank_cli.main([*argv, "--ranks", "100000"]) == 2
    assert "4096" in _one_line(capsys)
    assert rank_cli.main([*argv, "--ranks", "1:1000000000000"]) == 2  # never listed
    assert "4096" in _one_line(capsys)
    # the low-rank MDP's Q* has shape (4, 4, 4, 3, 3): no CP rank above 4 * 4 * 3 * 3 = 144
    assert rank_cli.main([*argv, "--ranks", "145"]) == 2
    assert "above 144" in _one_line(capsys)


def test_rank_refuses_samples_that_cannot_fit(tmp_path, capsys):
    argv = ["--env", "cartpole", "--samples", "1000000000", "--out", str(tmp_path)]
    assert rank_cli.main([*argv, "--no-progress"]) == 2
    err = _one_line(capsys)
    assert "'samples'" in err and "GiB" in err


def test_bounds_refuses_seeds_that_cannot_fit_before_training(monkeypatch, tmp_path, capsys):
    import rl.runs.training

    monkeypatch.setattr(rl.runs.training, "build", _never)
    argv = ["--env", "lowrank", "--episodes", "200", "--no-progress", "--out", str(tmp_path)]
    assert bounds_cli.main([*argv, "--seeds", "100000"]) == 2
    err = _one_line(capsys)
    assert "'seeds'" in err and "GiB" in err
    assert bounds_cli.main([*argv[:2], "--episodes", "10000000000", *argv[4:]]) == 2
    assert "'episodes'" in _one_line(capsys)


@pytest.mark.parametrize(
    ("cli", "argv", "needle"),
    [
        (rank_cli, [*RANK_QUICK, "--seed", "-1"], "--seed must be >= 0"),
        (bounds_cli, ["--gamma", "0.9", "--r-max", "1", "--max-inner", "0"], "--max-inner"),
        (bounds_cli, [*BOUNDS_QUICK, "--gamma", "0.5", "--set", "gamma=0.7"], "give gamma once"),
        (bounds_cli, [*BOUNDS_QUICK, "--rank", "5", "--set", "rank=3"], "give rank once"),
    ],
)
def test_odd_values_are_one_line(cli, argv, needle, tmp_path, capsys):
    assert cli.main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert needle in _one_line(capsys)


def test_rank_of_a_non_finite_tensor_is_one_line(monkeypatch, tmp_path, capsys):
    import numpy as np

    import analysis.qstar
    from analysis.qstar import QTensor

    diverged = np.ones((4, 4, 3))
    diverged[1, 2, 0] = np.inf
    tensor = QTensor(diverged, 0.9, 2, "a diverged Q", 1.0, "lowrank")
    monkeypatch.setattr(analysis.qstar, "exact_qstar", lambda env, gamma=None: tensor)
    assert rank_cli.main([*RANK_QUICK, "--out", str(tmp_path / "out")]) == 2
    assert "finite" in _one_line(capsys)


def test_bounds_growth_beyond_the_float_range_is_inf(capsys):
    argv = ["--gamma", "0.9", "--r-max", "1e300", "--order", "3", "--rank", "1"]
    assert bounds_cli.main(argv) == 0
    assert "F_max^(2(N-1)) = inf" in capsys.readouterr().out
