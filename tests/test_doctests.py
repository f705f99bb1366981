"""The ``Examples`` sections of the public modules run as doctests.

Every module of ``tensorq``, ``rl`` and ``analysis`` whose source holds a ``>>>``
example is imported and its examples run with `doctest`; a module that gains
an example is picked up without editing this file.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tensorq", "rl", "analysis")


def modules_with_examples() -> list[str]:
    """Return the dotted names of the package modules whose source holds ``>>>``."""
    names = []
    for package in PACKAGES:
        for info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
            path = ROOT / (info.name.replace(".", "/") + ("/__init__.py" if info.ispkg else ".py"))
            if info.name.endswith("__main__") or not path.is_file():
                continue
            if ">>>" in path.read_text(encoding="utf-8"):
                names.append(info.name)
    names += [p for p in PACKAGES if ">>>" in (ROOT / p / "__init__.py").read_text()]
    return sorted(names)


MODULES = modules_with_examples()


def test_the_examples_we_promise_exist() -> None:
    for module in ("tensorq.cp", "tensorq.update", "analysis.bounds.theory", "rl.problems.make"):
        assert module in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    with np.printoptions(legacy=False):
        result = doctest.testmod(
            module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
        )
    assert result.attempted > 0, f"{name} has '>>>' but doctest found no example"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
