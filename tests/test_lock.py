"""The lock file covers pyproject.toml, and ``bin/check_lock.py`` finds every difference.

``bin/setup`` installs ``requirements/lock.txt`` and then runs
``bin/check_lock.py``; ``bin/lock`` refreshes the lock with pip-compile.
"""

from __future__ import annotations

import sys
from pathlib import Path

from packaging.requirements import Requirement

from tests.file_modules import load_file

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "lock.txt"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the lock is made on 3.11
    import tomli as tomllib


CHECK = load_file("check_lock", "bin/check_lock.py")


def requirement_names() -> set[str]:
    """What pyproject.toml asks for on this Python, in any extra (the project excluded)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = [*project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        lines += extra
    requirements = [Requirement(line) for line in lines]
    names = {
        CHECK.canonical(r.name) for r in requirements if r.marker is None or r.marker.evaluate()
    }
    return names - {CHECK.PROJECT}


def test_the_lock_pins_every_requirement_of_pyproject() -> None:
    pins = CHECK.locked(LOCK)
    missing = requirement_names() - set(pins)
    assert not missing, f"not in requirements/lock.txt (run bin/lock): {sorted(missing)}"


def test_the_lock_pins_the_cpu_build_of_torch_and_the_build_backend() -> None:
    pins = CHECK.locked(LOCK)
    assert pins["torch"].endswith("+cpu")
    assert not any(name.startswith("nvidia-") for name in pins)
    assert "setuptools" in pins and "pip" in pins


def test_differences_name_each_package_that_is_off(tmp_path: Path) -> None:
    lock = tmp_path / "lock.txt"
    lock.write_text("# header\nnumpy==2.4.6\n    # via teql\nTensorLy==0.10.0\n", encoding="utf-8")
    pins = CHECK.locked(lock)
    assert pins == {"numpy": "2.4.6", "tensorly": "0.10.0"}
    assert CHECK.differences(pins, {"numpy": "2.4.6", "tensorly": "0.10.0", "teql": "0.1.0"}) == []
    assert CHECK.differences(pins, {"numpy": "2.5.0", "extra-pkg": "1.0", "teql": "0.1.0"}) == [
        "extra-pkg: locked no, installed 1.0",
        "numpy: locked 2.4.6, installed 2.5.0",
        "tensorly: locked 0.10.0, installed no",
    ]
