"""Check that this interpreter's environment holds exactly the packages of a lock file.

Run by ``bin/setup`` after it installs ``requirements/lock.txt``: every pinned
package must be installed at its pinned version, and nothing else may be
installed but the project itself (``teql``). Prints one line on success; on a
difference prints each package that differs and exits with status 1.

Usage: ``python bin/check_lock.py requirements/lock.txt``
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

#: The project itself, installed in editable mode beside the lock.
PROJECT = "teql"

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def canonical(name: str) -> str:
    """Return a distribution name normalized as in PEP 503."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked(path: Path) -> dict[str, str]:
    """Return {name: version} of every ``name==version`` line of a lock file."""
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = PIN.match(line)
        if match:
            pins[canonical(match.group(1))] = match.group(2)
    return pins


def installed() -> dict[str, str]:
    """Return {name: version} of every distribution in this environment."""
    return {canonical(d.metadata["Name"]): d.version for d in metadata.distributions()}


def differences(pins: dict[str, str], present: dict[str, str]) -> list[str]:
    """Return one line per package whose installed version is not its pinned one."""
    lines = []
    for name in sorted((set(pins) | set(present)) - {PROJECT}):
        want, have = pins.get(name), present.get(name)
        if want != have:
            lines.append(f"{name}: locked {want or 'no'}, installed {have or 'no'}")
    return lines


def main(argv: list[str]) -> int:
    """Compare the environment with the lock file named in ``argv``; return the exit status."""
    path = Path(argv[1]) if len(argv) > 1 else Path("requirements/lock.txt")
    pins = locked(path)
    wrong = differences(pins, installed())
    if wrong:
        print(f"the environment differs from {path}:", *wrong, sep="\n  ", file=sys.stderr)
        return 1
    print(f"bin/setup: the environment holds exactly {path}: {len(pins)} pinned packages")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
