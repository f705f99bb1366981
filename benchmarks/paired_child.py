"""One row of `benchmarks.bench_against`, run inside the tree being measured.

Started as a script (``python benchmarks/paired_child.py AGENT B ...``) with
``PYTHONPATH`` pointing at one tree, so that ``rl`` is that tree's, while this
file and the yardstick beside it (`benchmarks.plain_loop`) are the working
tree's in both processes. It builds the CartPole runner of that tree (fused, as
``python -m rl.train`` runs it), plays one warm-up episode, then a fixed number
of episodes, and prints one JSON line: microseconds per agent-step, the
yardstick's, and, under Callgrind, the instructions of those episodes alone
(client requests of ``callgrind.h`` through a small shared library compiled on
the spot, so that start-up, imports and compilation are not counted).

It imports nothing from ``benchmarks`` and reads the settings modules of either
layout of the package (``rl.runs`` today, ``rl.config`` / ``rl.runner`` in the
trees of November 2026), so that an earlier commit runs it unchanged.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import fields
from pathlib import Path

CARTPOLE = (10, 10, 20, 20, 10)
"""The CartPole grid of the yardstick: four state modes, then the action mode."""
SHIM = """#include <valgrind/callgrind.h>
void counting_on(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void counting_off(void) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS_AT("episodes"); }
"""


def _counter(directory: str) -> ctypes.CDLL:
    """Compile and load the two Callgrind client requests."""
    source = Path(directory) / "counting.c"
    source.write_text(SHIM, encoding="utf-8")
    library = source.with_suffix(".so")
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return ctypes.CDLL(str(library))


def _build(agent: str, params: dict, replicas: int, reading: str | None):  # noqa: ANN202
    try:
        from rl.runs.config import TrainConfig
        from rl.runs.training import build
    except ImportError:  # the layout before the rl.runs package
        from rl.config import TrainConfig
        from rl.runner import build
    # A tree without readings in its configuration runs the agent's only one.
    names = {field.name for field in fields(TrainConfig)}
    chosen = {"reading": reading} if reading and "reading" in names else {}
    config = TrainConfig(
        env="cartpole", agent=agent, seeds=replicas, eval_every=0, out="unused",
        agent_params=params, **chosen,
    )  # fmt: skip
    runner, _ = build(config)
    return runner


def main() -> None:
    """Measure one row; print it as JSON on the last line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("agent")
    parser.add_argument("params", help="agent parameters as JSON")
    parser.add_argument("replicas", type=int)
    parser.add_argument("episodes", type=int)
    parser.add_argument("--reading", help="the agent's reading, where the tree has readings")
    parser.add_argument("--count", action="store_true", help="running under Callgrind")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from plain_loop import plain_loop_us

    yardstick = (
        0.0 if args.count else plain_loop_us(CARTPOLE, 4, steps=1000, clock=time.process_time)
    )
    runner = _build(args.agent, json.loads(args.params), args.replicas, args.reading)
    runner.episode(1)  # warm-up: compilation, allocation
    with tempfile.TemporaryDirectory() as scratch:
        counter = _counter(scratch) if args.count else None
        played = runner.agent_steps
        if counter is not None:
            counter.counting_on()
        start = time.process_time()
        for _ in runner.episodes(1, 1 + args.episodes):
            pass
        seconds = time.process_time() - start
        if counter is not None:
            counter.counting_off()
    steps = runner.agent_steps - played
    runner.close()
    row = {"agent_steps": steps, "us": 1e6 * seconds / steps, "plain_loop_us": yardstick}
    print(json.dumps(row))


if __name__ == "__main__":
    main()
