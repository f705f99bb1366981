"""The tensor agents' step of the working tree against a named earlier commit, paired in one run.

``python -m benchmarks against --rev REV`` checks REV out into a temporary ``git
worktree`` and times, for TEQL (the paper's reading with I_max = 1, in a tree
whose configuration has readings, the released reading and the stable one) and TLR on
CartPole through the fused runner, microseconds per agent-step (CPU time of
the process) in both trees: each row in its own
subprocess whose ``PYTHONPATH`` is that tree, the two trees alternated
``--repeat`` times, each against the plain-loop yardstick
(`benchmarks.plain_loop`, on the same clock) measured in the same process. It
prints per row the best time of each tree, its ratio to the yardstick, and
new / old of those ratios (below 1: the working tree is slower).

On a loaded machine times are noisy; ``--instructions`` also counts
the instructions of the same fixed episodes in both trees under Callgrind
(``valgrind`` and a C compiler with ``valgrind/callgrind.h`` needed), which load
does not change: new / old of instructions per agent-step is the steadier
reading (above 1: the working tree does more work). Each tree compiles its
Numba kernels on its first row (into its own cache), before the clock starts.

Run with ``python -m benchmarks against --rev 0091af7``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.bench_step import AGENTS, PAPER_READING
from benchmarks.child import measure_in_child

ROOT = Path(__file__).resolve().parent.parent
SINGLE_EPISODES = 25
"""At B = 1 a row plays this many times ``--episodes``: CartPole's first episodes
are short, and 20 of them are a few milliseconds, too few to time on a busy machine."""
ROWS = {
    **{
        label: (agent, params, PAPER_READING.get(agent))
        for label, (agent, params) in AGENTS.items()
    },
    "teql stable": ("teql", {}, "stable"),
}
"""Row label -> (agent, parameters, reading): the rows of `benchmarks.bench_step` and TEQL's
default reading."""
CHILD = Path(__file__).resolve().parent / "paired_child.py"


def _child_env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def _args(label: str, replicas: int, episodes: int) -> list[str]:
    agent, params, reading = ROWS[label]
    chosen = ["--reading", reading] if reading else []
    return [str(CHILD), agent, json.dumps(params), str(replicas), str(episodes), *chosen]


def time_row(tree: Path, label: str, replicas: int, episodes: int) -> dict | str:
    """Microseconds per agent-step in ``tree`` and the yardstick's, from a fresh process."""
    return measure_in_child(_args(label, replicas, episodes), env=_child_env(tree))


def count_row(tree: Path, label: str, replicas: int, episodes: int) -> float | str:
    """Instructions per agent-step in ``tree`` over the timed episodes, under Callgrind."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "callgrind.out"
        command = [
            "valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
            sys.executable, *_args(label, replicas, episodes), "--count",
        ]  # fmt: skip
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, env=_child_env(tree), cwd=scratch
        )
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines()
            return lines[-1][:300] if lines else f"exit code {done.returncode}"
        row = json.loads(done.stdout.strip().splitlines()[-1])
        dumps = [p.read_text(encoding="utf-8") for p in Path(scratch).glob("callgrind.out*")]
        counted = [re.search(r"^totals: (\d+)", d, re.M) for d in dumps if "episodes" in d]
        if not counted or counted[0] is None:
            return "no Callgrind dump of the timed episodes"
        return int(counted[0].group(1)) / row["agent_steps"]


def _checkout(rev: str, into: Path) -> str | None:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into), rev],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return f"cannot check out {rev!r}: {done.stderr.strip().splitlines()[-1]}"
    return None


def _remove(into: Path) -> None:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(into)],
        capture_output=True, check=False,
    )  # fmt: skip
    shutil.rmtree(into, ignore_errors=True)


def _best(rows: list[dict | str]) -> dict | str:
    good = [r for r in rows if isinstance(r, dict)]
    if not good:
        return rows[0]
    best = min(good, key=lambda r: r["us"])
    ratio = max(r["plain_loop_us"] / r["us"] for r in good)
    return {**best, "speedup": ratio}


def compare(
    old: Path, new: Path, labels: list[str], replicas: list[int], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Measure every row in both trees, alternating; returns the paired rows."""
    rows = []
    for label in labels:
        for b in replicas:
            episodes = args.episodes if b > 1 else SINGLE_EPISODES * args.episodes
            timed: dict[str, list] = {"old": [], "new": []}
            for _ in range(args.repeat):
                for name, tree in (("old", old), ("new", new)):
                    timed[name].append(time_row(tree, label, b, episodes))
            old_row, new_row = _best(timed["old"]), _best(timed["new"])
            if isinstance(old_row, str) or isinstance(new_row, str):
                print(
                    f"{label:14} {b:>5} failed: {old_row if isinstance(old_row, str) else new_row}"
                )
                continue
            row = {
                "agent": label, "B": b, "agent_steps": new_row["agent_steps"],
                "old_us": old_row["us"], "new_us": new_row["us"],
                "old_speedup": old_row["speedup"], "new_speedup": new_row["speedup"],
                "new_over_old": new_row["speedup"] / old_row["speedup"],
            }  # fmt: skip
            line = (
                f"{label:14} {b:>5} {row['old_us']:7.2f} {row['old_speedup']:7.1f} "
                f"{row['new_us']:7.2f} {row['new_speedup']:7.1f} {row['new_over_old']:7.2f}"
            )
            if args.instructions:
                counts = {name: count_row(tree, label, b, episodes) for name, tree in
                          (("old", old), ("new", new))}  # fmt: skip
                if any(isinstance(c, str) for c in counts.values()):
                    line += f"  instructions failed: {counts}"
                else:
                    row |= {"old_instr": counts["old"], "new_instr": counts["new"]}
                    line += (
                        f" {counts['old']:9.0f} {counts['new']:9.0f} "
                        f"{counts['new'] / counts['old']:6.3f}"
                    )
            rows.append(row)
            print(line, flush=True)
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Print the paired table (and write JSON with ``--json``); returns its rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rev", metavar="REV", default="HEAD",
        help="the earlier commit: hash, tag or branch (default: HEAD, the last commit)",
    )  # fmt: skip
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 100])
    parser.add_argument("--agents", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument(
        "--episodes", type=int, default=20, help=f"timed episodes (x{SINGLE_EPISODES} at B = 1)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="alternations old/new per row")
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions under Callgrind"
    )
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind on PATH; install it or leave the flag out")
    with tempfile.TemporaryDirectory() as scratch:
        old = Path(scratch) / "old"
        refused = _checkout(args.rev, old)
        if refused:
            parser.error(f"{refused}; name a commit of this repository")
        try:
            print(f"old: {args.rev}; new: the working tree {ROOT}")
            head = "{:14} {:>5} {:>7} {:>7} {:>7} {:>7} {:>7}".format(
                "agent", "B", "old us", "ratio", "new us", "ratio", "new/old"
            )
            if args.instructions:
                head += " {:>9} {:>9} {:>6}".format("old Ir", "new Ir", "n/o")
            print(head, flush=True)
            rows = compare(old, ROOT, args.agents, args.replicas, args)
        finally:
            _remove(old)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=2)
    return rows


if __name__ == "__main__":
    main()
