"""The version of the teql distribution: in the packages, on every command, and in the scripts."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import analysis
import rl
import tensorq
from tensorq import version
from tests.file_modules import load_file

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

pytest.importorskip("mkdocs")  # docs/hooks.py lists every command
COMMANDS = [command for command, _, _ in load_file("docs_hooks", "docs/hooks.py").COMMANDS]


def test_the_packages_report_the_version_of_the_installed_distribution():
    installed = metadata.version("teql")
    assert installed == PYPROJECT["project"]["version"]
    assert tensorq.__version__ == rl.__version__ == analysis.__version__ == installed


def test_a_checkout_that_was_never_installed_reports_unknown(monkeypatch):
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert version.distribution_version() == "0+unknown"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_prints_the_version(command):
    argv = [sys.executable, "-m", *command.removeprefix("python -m ").split(), "--version"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"teql {rl.__version__}\n", "")


def test_every_installed_script_is_a_command_main():
    scripts = PYPROJECT["project"]["scripts"]
    assert {"teql-train", "teql-evaluate", "teql-sweep", "teql-reproduce"} <= set(scripts)
    for name, target in scripts.items():
        module_name, function = target.split(":")
        assert name.startswith("teql-")
        with pytest.raises(SystemExit) as exit_:
            getattr(importlib.import_module(module_name), function)(["--version"])
        assert exit_.value.code == 0
