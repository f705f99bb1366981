"""Every command a documentation page shows is accepted by that command's parser.

The pages are ``README.md``, ``docs/*.md`` and ``docs/tutorials/*.md``. A
command is a line of a fenced ``bash``, ``console`` or ``shell`` block, or of a
block with no language, that starts with ``python -m``, ``bin/``, ``teql-`` or
``bash `` (a leading ``$ `` is a prompt; a trailing ``\\`` continues the line),
and an inline span ``python -m MODULE ARGS`` in the prose. ``text`` blocks are
output, not commands. Each ``python -m MODULE ARGS`` is parsed by MODULE's own
``argparse`` parser (the ``build_parser()`` the command-line reference is
generated from), without running it: an unknown flag, a wrong choice or a
missing required argument fails with the page and line. ``bin/`` and ``bash``
commands must name a file of the repository, ``teql-`` commands an entry point
of ``pyproject.toml``.

A synopsis (``[--center]``, ``paper|released|stable``, ``A | B``) is parsed
with its optional parts in, once for each alternative, and the placeholders the
pages use on purpose (`PLACEHOLDERS`) stand for valid values. A ``--reading``
must name a reading and an ``--agent`` an agent (the parsers take any string).
A benchmark's own flags are parsed by its module's ``main``, stopped right after
parsing. An inline span that only names a command (no arguments) is checked to
name one.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PAGES = (
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "tutorials").glob("*.md")),
)

FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
SHELL_LANGUAGES = {"bash", "console", "shell", ""}
STARTS = ("python -m ", ".venv/bin/python -m ", "bin/", "teql-", "bash ")
INLINE = re.compile(r"`((?:\.venv/bin/)?python -m [^`]+)`")
SEPARATORS = {"&&", "||", ";"}

#: Placeholders the pages use on purpose, and the valid value each stands for here.
PLACEHOLDERS = {
    "NAME": "comparison",
    "ENV": "cartpole",
    "E": "cartpole",
    "ID": "CartPole-v1",
    "READING": "stable",
    "RUN": "runs/run",
    "RUN_DIR": "runs/run",
    "DIR": "runs/dir",
    "GRID_FILE": "grid.toml",
    "ADDR": "127.0.0.1:6379",
    "N": "2",
    "S": "2",
    "I": "0",
    "F": "0.5",
    "G": "0.99",
    "R": "1.0",
}


def reference_commands() -> dict[tuple[str, ...], str]:
    """``python -m`` words of each command of the CLI reference, and its parser's module.

    Read from ``docs/hooks.py`` (``COMMANDS``), which generates the reference.
    """
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return {
        tuple(line.removeprefix("python -m ").split()): module for line, module, _ in hooks.COMMANDS
    }


REFERENCE = reference_commands()


class Parsed(Exception):
    """Raised by the patched ``parse_args`` once a command's arguments are parsed."""


def page_commands(page: Path) -> Iterator[tuple[int, str, bool]]:
    """Yield ``(line, command, inline)`` for every command of one page, as written there."""
    fence = language = None
    pending: tuple[int, str] | None = None
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        match = FENCE.match(line)
        if match and fence is None:
            fence, language = match.group(1), match.group(2).lower()
            continue
        if match and line.strip().startswith(fence):
            fence = None
            continue
        if fence is None:
            for span in INLINE.findall(line):
                yield number, span, True
            continue
        if language not in SHELL_LANGUAGES:
            continue
        text = line.strip()
        if pending is None:
            text = text.removeprefix("$ ")
            if not text.startswith(STARTS):
                continue
            pending = (number, "")
        start, joined = pending
        joined = f"{joined} {text.removesuffix(chr(92))}".strip()
        pending = (start, joined) if text.endswith("\\") else None
        if pending is None:
            yield start, joined, False


def simple_commands(command: str) -> list[list[str]]:
    """Split a shell line into its simple commands, each synopsis alternative a command."""
    commands: list[list[str]] = [[]]
    for token in shlex.split(command, comments=True):
        if token in SEPARATORS:
            commands.append([])
            continue
        if "=" not in token and "," not in token:
            token = token.replace("[", "").replace("]", "")
        if token and token != "...":
            commands[-1].append(PLACEHOLDERS.get(token, token))
    return [words for part in commands if part for words in alternatives(part)]


def alternatives(words: list[str]) -> list[list[str]]:
    """Every alternative of a synopsis: ``--a X | --b Y``, ``--a X | Y`` and ``--a X|Y``."""
    if "|" in words:
        cut = words.index("|")
        first, rest = words[:cut], words[cut + 1 :]
        if rest and rest[0].startswith("-"):
            after = 3 if first[1:2] == ["-m"] else 1  # past "python -m MODULE"
            flags = next(i for i in range(after, len(first)) if first[i].startswith("-"))
            second = first[:flags] + rest
        else:
            second = first[:-1] + rest
        return alternatives(first) + alternatives(second)
    for index, word in enumerate(words):
        if "|" in word and not word.startswith("{"):
            return [
                variant
                for choice in word.split("|")
                for variant in alternatives([*words[:index], choice, *words[index + 1 :]])
            ]
    return [words]


def cases() -> list[pytest.param]:
    """One test case per simple command on a page, named ``page:line``."""
    found = []
    for page in PAGES:
        where = page.relative_to(ROOT).as_posix()
        for number, command, inline in page_commands(page):
            for index, argv in enumerate(simple_commands(command)):
                name = f"{where}:{number}" + (f"-{index}" if index else "")
                found.append(pytest.param(argv, command, inline, id=name))
    return found


def parse_with_main(module_name: str, argv: list[str]) -> None:
    """Call ``module.main(argv)`` with ``parse_args`` stopping right after it parsed."""
    original = argparse.ArgumentParser.parse_args

    def parse_and_stop(self, args=None, namespace=None):
        original(self, args, namespace)
        raise Parsed

    module = importlib.import_module(module_name)
    with mock.patch.object(argparse.ArgumentParser, "parse_args", parse_and_stop):
        with contextlib.suppress(Parsed):
            module.main(argv)


def check_names(args: list[str]) -> None:
    """Check every ``--reading`` and ``--agent`` value names one (the parsers take any string)."""
    from rl.agents.readings import READINGS

    known = {
        "--reading": {name for readings in READINGS.values() for name in readings},
        "--agent": {*READINGS, "teql-released"},
    }
    known["--readings"] = known["--reading"]
    for flag, value in zip(args, args[1:], strict=False):
        if flag in known:
            unknown = set(value.split(",")) - known[flag]
            assert not unknown, f"{flag} {value}: no {sorted(unknown)}; there are {known[flag]}"


def check_python_module(module_name: str, args: list[str]) -> None:
    """Parse ``python -m module_name args`` with that command's own parser."""
    check_names(args)
    if module_name == "pytest":
        return
    if (module_name, *args[:1]) in REFERENCE:  # a sub-command with a parser of its own
        module_name, args = REFERENCE[(module_name, *args[:1])], args[1:]
    else:
        module_name = REFERENCE.get((module_name,), module_name)
    if module_name == "benchmarks.__main__":
        from benchmarks.__main__ import MODULES, build_parser

        names, extra = build_parser().parse_known_args(args)
        unknown = [name for name in names.names if name not in MODULES]
        assert not unknown, f"unknown benchmark {unknown}; there are {sorted(MODULES)}"
        if extra:
            assert len(names.names) == 1, f"flags {extra} need exactly one benchmark"
            parse_with_main(f"benchmarks.{MODULES[names.names[0]]}", extra)
        return
    module = importlib.import_module(module_name)
    if not hasattr(module, "build_parser"):
        parse_with_main(module.__name__, args)
        return
    module.build_parser().parse_args(args)


@pytest.mark.parametrize(("argv", "written", "inline"), cases())
def test_command_on_page_parses(argv: list[str], written: str, inline: bool) -> None:
    """The command is accepted by its parser, names a file, or names an entry point."""
    program = argv[0]
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            if program in ("python", ".venv/bin/python"):
                assert argv[1] == "-m", f"not a python -m command: {written}"
                if inline and len(argv) == 3:
                    importlib.import_module(REFERENCE.get((argv[2],), argv[2]))
                    return
                check_python_module(argv[2], argv[3:])
            elif program == "bash":
                assert (ROOT / argv[1]).is_file(), f"no file {argv[1]}"
            elif program.startswith("bin/"):
                assert (ROOT / program).is_file(), f"no file {program}"
            elif program.startswith("teql-"):
                scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
                assert program in scripts, f"no entry point {program} in pyproject.toml"
                module_name = scripts[program].split(":")[0]
                check_python_module(module_name, argv[1:])
            else:
                pytest.fail(f"{written!r}: {program} is not a command this test knows")
    except SystemExit as stop:
        if stop.code not in (0, None):
            message = errors.getvalue().strip().splitlines()
            pytest.fail(f"{written!r} is refused: {message[-1] if message else stop.code}")


def test_pages_show_commands() -> None:
    """The extraction finds the commands (a broken pattern would make every case vanish)."""
    readme = [command for _, command, _ in page_commands(ROOT / "README.md")]
    assert any("python -m rl.train --env cartpole" in command for command in readme)
    assert len(cases()) > 150
