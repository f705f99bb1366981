"""Every tutorial in docs/tutorials runs as written, at a small size.

The fenced ``python`` blocks of a page run in order as one script; a ``bash``
block runs in a shell at its place in that order (with this interpreter's
directory first on PATH, so ``python`` is the project's). Output blocks
(``text``) are not run. Each tutorial reads its full-size settings from
``TEQL_*`` environment variables in one place; `SMALL` gives the values the
test suite runs with. The script runs in a temporary directory.

Run one page by hand: ``python tests/test_tutorials.py docs/tutorials/low-rank.md``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TUTORIALS = ROOT / "docs" / "tutorials"

#: Small-size settings of each tutorial (every tutorial page must have an entry).
SMALL: dict[str, dict[str, str]] = {
    "own-problem.md": {"TEQL_EPISODES": "40"},
    "low-rank.md": {"TEQL_RANKS": "6"},
    "backends.md": {},
    "reproduce-figure.md": {"TEQL_SEEDS": "2", "TEQL_SCALE": "0.005"},
    "ray-sweep.md": {"TEQL_EPISODES": "5"},
}

#: Seconds a tutorial may take at its small size (the issue asks for under a minute).
TIME_LIMIT = 240

FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


def blocks(page: Path) -> list[tuple[str, str]]:
    """Return the (language, code) of each fenced block of a page, in order."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(page.read_text(encoding="utf-8"))]


def script(page: Path) -> str:
    """Return one Python script that runs the page's python and bash blocks in order."""
    parts = ["import subprocess as _subprocess\n"]
    for language, code in blocks(page):
        if language == "python":
            parts.append(code)
        elif language == "bash":
            parts.append(
                f"_subprocess.run({code!r}, shell=True, check=True, executable='/bin/bash')\n"
            )
    return "\n".join(parts)


def run_tutorial(
    page: Path, workdir: Path, settings: dict[str, str]
) -> subprocess.CompletedProcess:
    """Run a page's script in ``workdir`` with ``settings`` in the environment."""
    path = workdir / "tutorial.py"
    path.write_text(script(page), encoding="utf-8")
    env = {
        **os.environ,
        **settings,
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


PAGES = sorted(p for p in TUTORIALS.glob("*.md") if p.name != "index.md")


def test_every_tutorial_has_small_settings() -> None:
    assert {p.name for p in PAGES} == set(SMALL)


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_tutorial_runs(page: Path, tmp_path: Path) -> None:
    if page.name == "ray-sweep.md":
        pytest.importorskip("ray")
    if page.name == "backends.md":
        pytest.importorskip("torch")
    assert any(language == "python" for language, _ in blocks(page)), "no python block"
    result = run_tutorial(page, tmp_path, SMALL[page.name])
    assert result.returncode == 0, f"{page.name} failed:\n{result.stdout}\n{result.stderr}"


if __name__ == "__main__":  # run one page at full size, printing its output
    import tempfile

    page = Path(sys.argv[1]).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        completed = run_tutorial(page, Path(tmp), {})
    print(completed.stdout, completed.stderr, sep="\n")
    sys.exit(completed.returncode)
