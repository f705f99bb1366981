"""MkDocs hook: generate the CLI reference and the API reference pages at build time.

Both come from the code, so neither can drift from it:

- ``cli.md``: the ``format_help()`` of every command's ``build_parser()``
  (`COMMANDS`), sub-commands included.
- ``api/<package>.md``: one mkdocstrings section per public module of each
  package in `API_PAGES` (modules whose name starts with ``_`` are private and
  left out), found by walking the package on disk.

``mkdocs.yml`` names this file under ``hooks:``; it is excluded from the site.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import re
import sys
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent

#: (command line, module with ``build_parser()``, one-line summary), in the order of the page.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("python -m rl.train", "rl.train", "train an agent on a problem, B seeds in lockstep"),
    (
        "python -m rl.reproduce",
        "rl.reproduce",
        "reproduce one figure or table of the paper",
    ),
    (
        "python -m rl.reproduce paper",
        "rl.experiments.whole",
        "every experiment of the paper and one report with a verdict per claim",
    ),
    ("python -m rl.sweep", "rl.sweep", "a grid of runs on a process pool or a Ray cluster"),
    ("python -m rl.tune", "rl.tune.cli", "hyperparameter search on Optuna, S seeds a trial"),
    ("python -m rl.evaluate", "rl.evaluate", "greedy episodes of a finished run"),
    ("python -m rl.runs.plot", "rl.runs.plot", "learning curves of one or more runs"),
    (
        "python -m rl.runs.legacy_checkpoint",
        "rl.runs.legacy_checkpoint",
        "convert old pickled checkpoints",
    ),
    ("python -m analysis.rank", "analysis.rank.cli", "CP rank profile and spectral energy"),
    ("python -m analysis.bounds", "analysis.bounds.cli", "the paper's bounds, alone or vs runs"),
    (
        "python -m analysis.lowrank_suite",
        "analysis.lowrank_suite.cli",
        "TEQL against a table on problems of known Q* rank",
    ),
    (
        "python -m analysis.lowrank_suite.page_tables",
        "analysis.lowrank_suite.page_tables",
        "the low-rank suite's tables of the documentation, from its committed CSVs",
    ),
    (
        "python -m analysis.formats",
        "analysis.formats.cli",
        "CP, Tucker and tensor train on one Q-tensor",
    ),
    (
        "python -m analysis.formats.page_tables",
        "analysis.formats.page_tables",
        "the format profiles' tables of the documentation, from their committed CSVs",
    ),
    ("python -m analysis.params", "analysis.params", "the appendix's parameter table"),
    (
        "python -m analysis.teql_dynamics",
        "analysis.teql_dynamics",
        "TEQL's learning dynamics on one replica",
    ),
    (
        "python -m rl.experiments.highway_equality",
        "rl.experiments.highway_equality",
        "the Highway twin against highway-env over many episodes",
    ),
    (
        "python -m rl.experiments.results_page",
        "rl.experiments.results_page",
        'the page "Does the paper reproduce?" and the measurement tables of every page, from '
        "their committed CSVs",
    ),
    ("python -m benchmarks", "benchmarks.__main__", "speed benchmarks"),
)

#: API page -> (title, packages whose public modules it documents, sub-packages to skip).
API_PAGES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "api/tensorq.md": ("`tensorq`: online CP tensors", ("tensorq",), ()),
    "api/rl.md": (
        "`rl`: problems, the loop, runs, experiments, tuning, CLIs",
        ("rl", "rl.problems", "rl.loop", "rl.runs", "rl.experiments", "rl.tune"),
        (),
    ),
    "api/rl-agents.md": (
        "`rl.agents`: the agents",
        ("rl.agents", "rl.agents.tensor", "rl.agents.tables", "rl.agents.deep"),
        (),
    ),
    "api/rl-envs.md": ("`rl.envs`: environments", ("rl.envs",), ()),
    "api/analysis.md": (
        "`analysis`: rank, bounds, parameters",
        (
            "analysis",
            "analysis.rank",
            "analysis.bounds",
            "analysis.lowrank_suite",
            "analysis.formats",
        ),
        (),
    ),
}

#: A Sphinx role left in a rendered docstring (``:func:`x```), to be shown as plain code.
SPHINX_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|data|mod|obj|exc):(<code>)~?")

#: Width of the help text, fixed so the page does not depend on the terminal that builds it.
HELP_COLUMNS = "88"


def public_modules(package: str, skip: tuple[str, ...] = ()) -> list[str]:
    """Return the package and its public modules (no ``_`` prefix), sub-packages excluded."""
    path = ROOT / package.replace(".", "/")
    names = [package]
    for info in sorted(pkgutil.iter_modules([str(path)]), key=lambda i: i.name):
        name = f"{package}.{info.name}"
        if info.name.startswith("_") or info.ispkg or name in skip:
            continue
        names.append(name)
    return names


def api_page(title: str, packages: tuple[str, ...], skip: tuple[str, ...]) -> str:
    """Return the Markdown of one API reference page."""
    lines = [f"# {title}", ""]
    for package in packages:
        for module in public_modules(package, skip):
            lines += [f"::: {module}", ""]
    return "\n".join(lines)


def parser_help(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """Return (prog, help text) of a parser and of each of its sub-commands."""
    helps = [(parser.prog, parser.format_help())]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                helps += parser_help(sub)
    return helps


def parser_line(module_name: str) -> str:
    """Return the line naming a command's parser, linked into the API reference if it is there."""
    if module_name.split(".")[0] in ("tensorq", "rl", "analysis"):
        return f"Parser: [`{module_name}.build_parser()`][{module_name}.build_parser]."
    return f"Parser: `{module_name}.build_parser()`."


def cli_page() -> str:
    """Return the Markdown of the CLI reference, from every command's ``build_parser()``."""
    if str(ROOT) not in sys.path:  # benchmarks/ is not an installed package
        sys.path.insert(0, str(ROOT))
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        lines = [
            "# Command-line reference",
            "",
            "Generated at build time from each command's `build_parser()`, so it is the "
            "`--help` of the code the site was built from. The guides say what the flags "
            "are for: [Training](training.md), [Reproducing the paper](reproduce.md), "
            "[Scale-out](scale-out.md), [Your own problem](your-problem.md), "
            "[Analysis](analysis.md).",
            "",
            "| command | what it does |",
            "|---|---|",
        ]
        for command, _, summary in COMMANDS:
            anchor = command.replace("python -m ", "").replace(".", "").replace(" ", "-")
            lines.append(f"| [`{command}`](#{anchor}) | {summary} |")
        for command, module_name, _ in COMMANDS:
            module = importlib.import_module(module_name)
            anchor = command.replace("python -m ", "").replace(".", "").replace(" ", "-")
            lines += [
                "",
                f"## `{command}` {{#{anchor}}}",
                "",
                parser_line(module_name),
            ]
            for prog, text in parser_help(module.build_parser()):
                if prog != command:
                    lines += ["", f"### `{prog}`"]
                lines += ["", "```text", text.rstrip(), "```"]
        return "\n".join(lines) + "\n"
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated pages to the site's files."""
    pages = {"cli.md": cli_page()}
    pages.update({uri: api_page(*spec) for uri, spec in API_PAGES.items()})
    for uri, content in pages.items():
        files.append(File.generated(config, uri, content=content))
    return files


def on_page_content(html: str, **kwargs: object) -> str:
    """Show the Sphinx roles of numpydoc docstrings (``:func:`name```) as plain code."""
    return SPHINX_ROLE.sub(r"\1", html)
