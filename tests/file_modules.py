"""Load a script that is not in a package (``docs/hooks.py``, ``bin/check_lock.py``) as a module."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_file(name: str, relative_path: str) -> ModuleType:
    """Return the module of the file at ``relative_path`` (from the repository root)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / relative_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
