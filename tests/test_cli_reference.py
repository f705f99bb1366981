"""The CLI reference of the documentation site covers every command, from its own parser.

``docs/hooks.py`` writes the page at build time from each command's
``build_parser()``; these tests check that every command module has one, that
its ``prog`` is the command the page names, and that no module with an
argument parser is missing from the page.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import re
from pathlib import Path

import pytest

from tests.file_modules import load_file

pytest.importorskip("mkdocs")

ROOT = Path(__file__).resolve().parent.parent


HOOKS = load_file("docs_hooks", "docs/hooks.py")


@pytest.mark.parametrize("command, module_name, summary", HOOKS.COMMANDS)
def test_each_command_exposes_its_parser(command: str, module_name: str, summary: str) -> None:
    parser = importlib.import_module(module_name).build_parser()
    assert isinstance(parser, argparse.ArgumentParser)
    assert parser.prog == command
    assert parser.format_help().startswith(f"usage: {command}")


def test_every_parser_is_on_the_page() -> None:
    listed = {module for _, module, _ in HOOKS.COMMANDS}
    builds_parser = re.compile(r"\b(argparse\.ArgumentParser|OneLineParser)\(\s*\n?\s*prog=")
    paths = [
        *ROOT.glob("rl/**/*.py"),
        *ROOT.glob("analysis/**/*.py"),
        ROOT / "benchmarks/__main__.py",
    ]
    found = set()
    for path in paths:
        text = path.read_text(encoding="utf-8")
        if builds_parser.search(text):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            assert "def build_parser()" in text, f"{module} builds a parser outside build_parser()"
            found.add(module)
    assert found == listed, (
        f"docs/hooks.py COMMANDS lacks {found - listed}, or lists {listed - found}"
    )


def test_cli_page_holds_every_help_text() -> None:
    page = HOOKS.cli_page()
    for command, _, _ in HOOKS.COMMANDS:
        assert f"## `{command}`" in page
        assert f"usage: {command}" in page
    assert "### `python -m rl.runs.legacy_checkpoint convert`" in page  # sub-commands too


def test_api_pages_cover_public_modules() -> None:
    modules = HOOKS.public_modules("tensorq")
    assert "tensorq.update" in modules and "tensorq._backend" not in modules
    page = HOOKS.api_page(*HOOKS.API_PAGES["api/rl.md"])
    assert "::: rl.train" in page and "::: rl.agents" not in page


def _actions(parser: argparse.ArgumentParser, name: str):
    """Yield (command, action) of a parser and of its sub-commands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, subparser in action.choices.items():
                yield from _actions(subparser, f"{name} {sub}")
        else:
            yield name, action


@pytest.mark.parametrize("command, module_name, summary", HOOKS.COMMANDS)
def test_every_flag_has_a_help_line(command: str, module_name: str, summary: str) -> None:
    parser = importlib.import_module(module_name).build_parser()
    silent = [
        f"{name} {action.option_strings or action.dest}"
        for name, action in _actions(parser, command)
        if not action.help
    ]
    assert not silent, f"flags without help: {silent}"


def test_train_help_lists_every_reading_and_default() -> None:
    from rl import train
    from rl.agents.readings import READINGS
    from rl.runs.config import TrainConfig

    text = " ".join(train.build_parser().format_help().split())
    for name in {name for readings in READINGS.values() for name in readings}:
        assert name in text.split("--reading READING")[-1].split("--preset")[0], name
    assert "stable (teql only)" in text
    assert "(default: teql stable, every other agent paper)" in text
    fields = TrainConfig.__dataclass_fields__
    for flag in ("seeds", "seed", "episodes", "eval_every", "eval_episodes", "checkpoint_every"):
        option = "--" + flag.replace("_", "-")
        help_text = text.split(f"{option} {flag.upper()}")[-1].split(" --")[0]
        assert f"(default {fields[flag].default})" in help_text, option


def test_benchmarks_help_names_the_benchmarks_and_refuses_others(capsys) -> None:
    from benchmarks.__main__ import MODULES, build_parser, main

    text = build_parser().format_help()
    assert "[]" not in text and ", ".join(MODULES) in " ".join(text.split())
    with pytest.raises(SystemExit) as exit_info:
        main(["nonsense"])
    assert exit_info.value.code == 2
    assert "unknown benchmark 'nonsense'; choose from: tensorq" in capsys.readouterr().err


def test_benchmarks_run_from_any_directory_in_the_setup_environment(tmp_path: Path) -> None:
    import subprocess
    import sys
    import sysconfig

    if not (Path(sysconfig.get_path("purelib")) / "teql-repository.pth").exists():
        pytest.skip("not bin/setup's environment (it puts the repository on the path)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m benchmarks")
