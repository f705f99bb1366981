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
import re
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")

ROOT = Path(__file__).resolve().parent.parent


def load_hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOKS = load_hooks()


@pytest.mark.parametrize("command, module_name, summary", HOOKS.COMMANDS)
def test_each_command_exposes_its_parser(command: str, module_name: str, summary: str) -> None:
    parser = importlib.import_module(module_name).build_parser()
    assert isinstance(parser, argparse.ArgumentParser)
    assert parser.prog == command
    assert parser.format_help().startswith(f"usage: {command}")


def test_every_parser_is_on_the_page() -> None:
    listed = {module for _, module, _ in HOOKS.COMMANDS}
    builds_parser = re.compile(r"\b(argparse\.ArgumentParser|OneLineParser)\(\s*\n?\s*prog=")
    paths = [*ROOT.glob("rl/*.py"), *ROOT.glob("analysis/*.py"), ROOT / "benchmarks/__main__.py"]
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
    assert "### `python -m rl.checkpoint convert`" in page  # sub-commands too


def test_api_pages_cover_public_modules() -> None:
    modules = HOOKS.public_modules("tensorq")
    assert "tensorq.update" in modules and "tensorq._backend" not in modules
    page = HOOKS.api_page(*HOOKS.API_PAGES["api/rl.md"])
    assert "::: rl.train" in page and "::: rl.agents" not in page
