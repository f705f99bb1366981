"""Runs of ``python -m rl.train`` in a subprocess, for tests that compare whole runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from rl.runs.metrics import COLUMNS, read_metrics

ROOT = Path(__file__).resolve().parents[2]


def train(args: list, timeout: float) -> None:
    """Run ``python -m rl.train`` with ``args``; fail the test with its stderr if it fails."""
    command = [sys.executable, "-m", "rl.train", *map(str, args)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr


def assert_resumed_run_equals_whole(tmp_path: Path, args: list, timeout: float) -> None:
    """3 episodes resumed to 6 write the metrics (but wall time) of 6 episodes at once."""
    train([*args, "--episodes", 3, "--out", tmp_path / "half"], timeout)
    train([*args, "--resume", tmp_path / "half", "--episodes", 6], timeout)
    train([*args, "--episodes", 6, "--out", tmp_path / "whole"], timeout)
    half, whole = (read_metrics(tmp_path / name / "metrics.csv") for name in ("half", "whole"))
    assert len(whole["episode"]) > 0
    for column in COLUMNS:
        if column != "wall_time":
            np.testing.assert_array_equal(half[column], whole[column], err_msg=column)
