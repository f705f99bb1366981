"""Edit what a run directory records, for tests of runs written elsewhere or earlier."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rl.runs.checkpoint import load_checkpoint, save_checkpoint


def rewrite_recorded_config(
    run_dir: Path, edit: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    """Replace the config ``run_dir`` records (checkpoint and config.json) by ``edit`` of it."""
    path = run_dir / "checkpoint.npz"
    checkpoint = load_checkpoint(path)
    recorded = edit(dict(checkpoint.config))
    save_checkpoint(path, dataclasses.replace(checkpoint, config=recorded))
    (run_dir / "config.json").write_text(json.dumps(recorded))
