"""Every tutorial in docs/tutorials runs as written, and prints what the page shows.

The fenced ``python`` blocks of a page run in order as one script; a ``bash``
block runs in a shell at its place in that order (with this interpreter's
directory first on PATH, so ``python`` is the project's). A ``text`` block is
the expected standard output of everything that ran since the previous
``text`` block, and the test compares them: ``...`` inside a line matches any
characters (times, which vary by machine), and a line that is only ``...``
matches any number of lines (an excerpt). Every other number must match: the
pages run at their full size, which takes seconds to a minute each on 2 cores,
and runs are bitwise reproducible for a seed. The script runs in a temporary
directory.

Run one page by hand, printing its output: ``python tests/test_tutorials.py
docs/tutorials/low-rank.md``.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TUTORIALS = ROOT / "docs" / "tutorials"

#: Seconds a tutorial may take at its full size.
TIME_LIMIT = 300

FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)

#: Printed on standard output where a ``text`` block stands, to cut the output into pieces.
MARK = "@@ tutorial output block @@"

#: In an expected output: any characters within a line, or (alone on a line) any lines.
ELLIPSIS = "..."


def blocks(page: Path) -> list[tuple[str, str]]:
    """Return the (language, code) of each fenced block of a page, in order."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(page.read_text(encoding="utf-8"))]


def expected_outputs(page: Path) -> list[str]:
    """Return the page's ``text`` blocks, in order."""
    return [code for language, code in blocks(page) if language == "text"]


def script(page: Path) -> str:
    """Return one Python script that runs the page's blocks in order, marking each output."""
    parts = ["import subprocess as _subprocess\nimport sys as _sys\n"]
    for language, code in blocks(page):
        if language == "python":
            parts.append(code)
        elif language == "bash":
            parts.append(
                "_sys.stdout.flush()\n"
                f"_subprocess.run({code!r}, shell=True, check=True, executable='/bin/bash')\n"
            )
        elif language == "text":
            parts.append(f"print({MARK!r}, flush=True)\n")
    return "\n".join(parts)


def run_tutorial(page: Path, workdir: Path) -> subprocess.CompletedProcess:
    """Run a page's script in ``workdir``."""
    path = workdir / "tutorial.py"
    path.write_text(script(page), encoding="utf-8")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "MPLBACKEND": "Agg",
    }
    return subprocess.run(
        [sys.executable, str(path)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIME_LIMIT,
    )


def printed_outputs(stdout: str) -> list[str]:
    """Return what was printed before each output mark (the last piece, after it, is dropped)."""
    return stdout.split(MARK + "\n")[:-1]


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def output_pattern(expected: str) -> re.Pattern:
    """Return a regular expression for an expected output, with `ELLIPSIS` as a wildcard."""
    parts = []
    for line in _lines(expected):
        if line.strip() == ELLIPSIS:
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            pieces = (re.escape(piece) for piece in line.split(ELLIPSIS))
            parts.append("[^\n]*?".join(pieces) + r"\n")
    return re.compile("".join(parts))


def matches(expected: str, printed: str) -> bool:
    """Whether ``printed`` is ``expected`` (trailing spaces and blank edges ignored)."""
    text = "".join(line + "\n" for line in _lines(printed))
    return output_pattern(expected).fullmatch(text) is not None


def mismatches(page: Path, stdout: str) -> list[str]:
    """Return a diff for each ``text`` block of ``page`` that ``stdout`` does not match."""
    expected, printed = expected_outputs(page), printed_outputs(stdout)
    if len(printed) != len(expected):
        return [f"{len(expected)} output blocks on the page, {len(printed)} printed"]
    problems = []
    for number, (want, got) in enumerate(zip(expected, printed, strict=True), start=1):
        if not matches(want, got):
            diff = difflib.unified_diff(_lines(want), _lines(got), "page", "printed", lineterm="")
            problems.append(f"output block {number}:\n" + "\n".join(diff))
    return problems


PAGES = sorted(p for p in TUTORIALS.glob("*.md") if p.name != "index.md")


def test_ellipsis_matches_within_a_line_and_across_lines() -> None:
    assert matches("a in ... s\nb\n", "a in 3.5 s\nb  \n\n")
    assert not matches("a in ... s\nb\n", "a in 3.5 s\nc\n")
    assert matches("first\n...\nlast\n", "first\none\ntwo\nlast\n")
    assert matches("first\n...\nlast\n", "first\nlast\n")
    assert not matches("| 92.1 | ... |\n", "| 92.2 | 3 |\n")
    assert not matches("x = 1.0\n", "x = 1.0\ny = 2.0\n")


def test_a_drifted_output_is_reported(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nprint('score', 2 + 2)\n```\n\n```text\nscore 5\n```\n", encoding="utf-8"
    )
    result = run_tutorial(page, tmp_path)
    assert result.returncode == 0, result.stderr
    problems = mismatches(page, result.stdout)
    assert len(problems) == 1 and "-score 5" in problems[0] and "+score 4" in problems[0]
    page.write_text(page.read_text().replace("score 5", "score 4"), encoding="utf-8")
    assert mismatches(page, run_tutorial(page, tmp_path).stdout) == []


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_tutorial_runs_and_prints_what_the_page_shows(page: Path, tmp_path: Path) -> None:
    if page.name == "ray-sweep.md":
        pytest.importorskip("ray")
    if page.name == "backends.md":
        pytest.importorskip("torch")
    assert any(language == "python" for language, _ in blocks(page)), "no python block"
    assert expected_outputs(page), "no output block to check"
    result = run_tutorial(page, tmp_path)
    assert result.returncode == 0, f"{page.name} failed:\n{result.stdout}\n{result.stderr}"
    problems = mismatches(page, result.stdout)
    assert not problems, f"{page.name} prints other than it shows:\n" + "\n\n".join(problems)


if __name__ == "__main__":  # run one page, printing its output and any difference from the page
    import tempfile

    page = Path(sys.argv[1]).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        completed = run_tutorial(page, Path(tmp))
    print(completed.stdout.replace(MARK + "\n", ""), completed.stderr, sep="\n")
    print(*mismatches(page, completed.stdout), sep="\n\n")
    sys.exit(completed.returncode)
