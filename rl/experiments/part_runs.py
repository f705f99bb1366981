"""Running the parts of ``python -m rl.reproduce paper``: one process each, recorded as it ends.

`run_parts` starts each part that is not done (`rl.experiments.parts.not_done`)
as its own process (`command_of`), one after the other or side by side, and
writes its row of ``OUT/parts.csv`` when it ends; `rl.experiments.whole` plans
the parts and calls it. Each part's process gets SIGTERM when the driver dies,
even by SIGKILL, on Linux (`rl.experiments.workers.end_with_parent`).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from rl.experiments.executor import INDEX_FILE
from rl.experiments.parts import (
    PART_COLUMNS,
    Part,
    next_ready,
    not_done,
    output_file,
    read_parts,
    start_order,
    write_parts,
)
from rl.experiments.workers import end_with_parent
from rl.runs.rundir import atomic_write_text, make_run_dir, open_run_file, refuse_linked_path

LOG_FILE = "log.txt"
"""A training part's output when parts run side by side (``--parts-at-once`` > 1)."""
POLL_SECONDS = 0.2
"""How often `run_parts` looks whether a running part has ended."""
STOP_GRACE_SECONDS = 5.0
"""After Ctrl-C or SIGTERM, how long running parts may take to stop before they get SIGTERM."""


class _Running:
    """A part's process, started at construction, and the files it prints to.

    A training part prints to the terminal, or to ``OUT/PART/log.txt`` when
    parts run side by side. An analysis part's output is kept in temporary
    files and written as ``params.md`` (the parameter table) or
    ``summary.txt``, its errors as ``error.txt`` if it fails.
    """

    def __init__(self, part: Part, command: list[str], directory: Path, logged: bool) -> None:
        self.part = part
        self.directory = directory
        self.shown = shlex.join(["python", *command[1:]])
        self.files: list[IO[bytes]] = []
        make_run_dir(directory)
        if not part.training:
            self.files = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
        elif logged:
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
            self.files = [os.fdopen(open_run_file(directory / LOG_FILE, flags), "ab")] * 2
        outputs = self.files or [None, None]
        self.process = subprocess.Popen(
            command, stdout=outputs[0], stderr=outputs[1], preexec_fn=end_with_parent()
        )
        self.start = time.perf_counter()

    def finish(self) -> int:
        """Wait for the process, write an analysis part's files, close; return its exit code."""
        code = self.process.wait()
        if not self.part.training:
            stdout, stderr = (self._read(handle) for handle in self.files)
            atomic_write_text(self.directory / output_file(self.part), stdout)
            if code != 0:
                atomic_write_text(self.directory / "error.txt", stderr)
        for handle in dict.fromkeys(self.files):  # a training log is one file, listed twice
            handle.close()
        return code

    @staticmethod
    def _read(handle: IO[bytes]) -> str:
        handle.seek(0)
        return handle.read().decode("utf-8", errors="replace")


def command_of(part: Part, out: Path, resume: bool) -> list[str]:
    """Return the command line of ``part``; a training part started before gets ``--resume``.

    It gets ``--reuse`` for each of `Part.reuse` that exists: a part that has
    not started yet (no directory) holds nothing to copy.
    """
    if not part.training:
        return list(part.argv)
    argv = list(part.argv)
    for source in part.reuse:
        if Path(source).is_dir():
            argv += ["--reuse", source]
    if resume and (out / part.name / INDEX_FILE).is_file():
        argv.append("--resume")
    return [sys.executable, "-m", "rl.reproduce", *argv]


def run_parts(
    todo: Sequence[Part],
    out: Path,
    resume: bool,
    at_once: int = 1,
    command: Callable[[Part, Path, bool], list[str]] = command_of,
) -> int:
    """Run the parts not yet done, ``at_once`` at a time; return 0, 1 (some failed) or 130.

    A part ``OUT/parts.csv`` records done runs again if its files are missing
    (`rl.experiments.parts.not_done`, one line on stderr saying why).

    One after the other (``at_once`` 1) in the order of ``todo``; side by side
    longest first by `Part.cost`. A part starts once the parts of its
    `Part.after` have ended (whatever their status). A part that ends interrupted (exit code 130),
    Ctrl-C or SIGTERM stops the others (SIGTERM to each) and returns 130;
    ``OUT/parts.csv`` gets each part's row as it ends. ``command`` gives a
    part's command line (`command_of`).

    Raises
    ------
    rl.runs.rundir.RunDirError
        Before any part starts, if the directory of a part to run, or one above
        it under ``out``, is a symbolic link.
    """
    rows = read_parts(out)
    number = {part.name: index + 1 for index, part in enumerate(todo)}
    again = set()
    for part in todo:
        if rows.get(part.name, {}).get("status") == "done":
            reason = not_done(out, part)
            if reason is not None:
                again.add(part.name)
                print(f"rerunning {part.name} (recorded done): {reason}", file=sys.stderr)
    waiting = start_order(
        [p for p in todo if rows.get(p.name, {}).get("status") != "done" or p.name in again],
        at_once,
    )
    for part in waiting:  # never write a part through a link: refuse before any starts
        refuse_linked_path(out, part.name)
    running: list[_Running] = []
    failed = interrupted = False

    def record(done: _Running, code: int) -> None:
        nonlocal failed
        wall = time.perf_counter() - done.start
        stopped = code == 130 or (interrupted and code < 0)
        status = "done" if code == 0 else "interrupted" if stopped else "failed"
        failed |= status == "failed"
        rows[done.part.name] = dict(
            zip(
                PART_COLUMNS,
                (done.part.name, status, f"{wall:.1f}", str(code), done.shown),
                strict=True,
            )
        )
        write_parts(out, rows)

    try:
        while (waiting and not interrupted) or running:
            while waiting and not interrupted and len(running) < at_once:
                part = next_ready(waiting, {r.part.name for r in running})
                if part is None:
                    break
                print(
                    f"[part {number[part.name]}/{len(todo)}] {part.name}",
                    file=sys.stderr,
                    flush=True,
                )
                line = command(part, out, resume)
                running.append(_Running(part, line, out / part.name, at_once > 1))
            if all(r.process.poll() is None for r in running):
                time.sleep(POLL_SECONDS)
            for done in [r for r in running if r.process.poll() is not None]:
                running.remove(done)
                code = done.finish()
                record(done, code)
                if code == 130 and not interrupted:
                    interrupted = True
                    _stop(running)
    except KeyboardInterrupt:
        interrupted = True
        _stop(running, STOP_GRACE_SECONDS)
        for done in running:
            record(done, done.finish())
    return 130 if interrupted else 1 if failed else 0


def _stop(running: Sequence[_Running], grace: float = 0.0) -> None:
    """Send SIGTERM to every part still running after ``grace`` seconds.

    Each then records what it finished and exits. After Ctrl-C the parts got
    the terminal's SIGINT too: the grace lets them stop on their own first.
    """
    deadline = time.monotonic() + grace
    for other in running:
        try:
            other.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            other.process.terminate()
