"""One benchmark row measured in a fresh Python process.

A fresh process gives each row its own peak resident memory and no warm state
left by the rows before it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any


def measure_in_child(args: Sequence[str], env: Mapping[str, str] | None = None) -> dict | str:
    """Run ``python ARGS`` and return the JSON row printed on its last line of output.

    Parameters
    ----------
    args : sequence of str
        Arguments of the interpreter (``["-m", "benchmarks.bench_x", ...]``).
    env : mapping, optional
        The child's environment (default: this process's).

    Returns
    -------
    dict or str
        The row; or, if the child failed, the last line of its error output.
    """
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, check=False, env=env
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return lines[-1][:300] if lines else f"exit code {done.returncode}"
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return row
