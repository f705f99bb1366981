"""``python -m rl.train``'s odd inputs: placement given twice, a broken backend, what it says."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rl import train as train_cli
from rl.runs.config import resolve_settings

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["--episodes", "1", "--eval-every", "0", "--no-progress"]


def _settings(*argv):
    args = train_cli.build_parser().parse_args([*argv, "--out", "unused"])
    return resolve_settings(train_cli.config_from_args(args), build_problem=False)


def _one_line(capsys):
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_no_plot_does_not_claim_the_figure(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["--env", "cartpole", "--agent", "random", *QUICK, "--out", str(out), "--no-plot"]
    assert train_cli.main(argv) == 0
    wrote = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Wrote")]
    assert wrote == [f"Wrote {out}/{{metrics.csv, config.json, checkpoint.npz}}"]
    assert not (out / "learning_curve.png").exists()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--set", "backend=numpy", "--backend", "pytorch"], "'backend'"),
        (["--set", "device=cpu", "--backend", "pytorch", "--device", "cuda"], "'device'"),
    ],
)
def test_placement_given_twice_and_differently_is_refused(argv, needle, tmp_path, capsys):
    base = ["--env", "cartpole", "--agent", "teql", *QUICK, "--out", str(tmp_path / "r")]
    assert train_cli.main([*base, *argv]) == 2
    err = _one_line(capsys)
    assert needle in err and "--set" in err
    assert not (tmp_path / "r" / "config.json").exists()


def test_placement_flag_overrides_the_config_file(tmp_path):
    config = tmp_path / "run.json"
    params = {"backend": "numpy", "device": "cpu", "rank": 3}
    config.write_text(json.dumps({"env": "cartpole", "agent": "teql", "agent_params": params}))
    settings = _settings("--config", str(config), "--backend", "pytorch")
    assert (settings.agent.backend, settings.agent.rank) == ("pytorch", 3)
    assert settings.config.backend == "pytorch"
    assert _settings("--config", str(config)).agent.backend == "numpy"
    same = _settings("--config", str(config), "--set", "backend=numpy", "--backend", "numpy")
    assert same.agent.backend == "numpy"


BROKEN = "raise ImportError('this build of {name} is broken: libcuda.so.1 not found')\n"


@pytest.mark.parametrize(("backend", "module"), [("jax", "jax"), ("pytorch", "torch")])
def test_a_backend_that_fails_to_import_is_one_line(backend, module, tmp_path):
    shadow = tmp_path / "shadow" / module
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(BROKEN.format(name=module))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow.parent), str(ROOT)])}
    argv = ["--env", "cartpole", "--agent", "teql", "--backend", backend, *QUICK]
    done = subprocess.run(
        [sys.executable, "-m", "rl.train", *argv, "--out", str(tmp_path / "r")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "is broken" in done.stderr and f"'{backend}'" in done.stderr


def test_resume_names_the_runs_placement_or_refuses_another(tmp_path, capsys):
    run_dir = str(tmp_path / "r")
    assert train_cli.main(["--env", "cartpole", "--agent", "teql", *QUICK, "--out", run_dir]) == 0
    capsys.readouterr()
    resume = ["--resume", run_dir, "--episodes", "2", "--no-progress", "--no-plot"]
    assert train_cli.main([*resume, "--backend", "pytorch"]) == 2
    assert "cannot change on resume" in _one_line(capsys)
    assert train_cli.main([*resume, "--backend", "numpy", "--device", "cpu"]) == 0
