"""``python -m rl.reproduce paper --plan``: what the command would train and copy, and its cost.

Nothing runs and nothing is written. The parts are those the command would
run (`rl.experiments.whole.parts`: the same lines, owners and order); each
training task costs the plan's estimate (`rl.reproduce.plan_tasks`, from
task walls measured at the paper's scale: `rl.experiments.costs`), a copied
task no training, an analysis part its own estimate. A part's wall time is its tasks
taken in the plan's order by the first free of its workers, as the process
pool takes them, then its work besides training (start, checking the lines it
copies, summary and figures: `rl.experiments.costs.postprocess_seconds`); the
command's wall time plays `rl.experiments.part_runs.run_parts`' schedule over
those walls: ``--parts-at-once`` parts at a time, longest first, a part
waiting for the parts it copies from; then the report, which reads every
line again (`rl.experiments.costs.report_seconds`).

With ``--measured DIR`` a task whose configuration (by
`rl.experiments.executor.config_hash`) some ``index.csv`` under DIR records
done and trained there costs its recorded ``wall_time`` instead: pieces of
the run measured earlier, with the same seeds and episodes, replace their
estimates. With ``--resume`` the plan is of what is left in ``--out``: a part
that ``parts.csv`` records done, and a task that an ``index.csv`` under
``--out`` records done (trained or copied), cost nothing, and a task stopped
part-way costs the share of its episodes after its last checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from rl.experiments.costs import postprocess_seconds, report_seconds
from rl.experiments.executor import INDEX_FILE, read_index, wall_seconds
from rl.experiments.parts import Part, next_ready, read_parts, start_order
from rl.runs.checkpoint import CHECKPOINT_NAME, CheckpointError, load_checkpoint


class Progress(NamedTuple):
    """What a run in ``out`` has done: the parts and the task configurations (hashes)."""

    out: Path
    parts: frozenset[str]
    tasks: frozenset[str]
    left: Mapping[str, float]
    """Hash -> share of its episodes left, for a task stopped after a checkpoint."""


def _rows(root: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """Yield (directory, row) of every row of every ``index.csv`` under ``root``."""
    for index in sorted(root.rglob(INDEX_FILE)):
        yield from ((index.parent, row) for row in read_index(index.parent))


def _share_left(run_dir: Path) -> float:
    """Return the share of a run's episodes after its checkpoint (1 without a readable one)."""
    try:
        checkpoint = load_checkpoint(run_dir / CHECKPOINT_NAME)
        return max(0.0, 1.0 - checkpoint.episode / int(checkpoint.config["episodes"]))
    except (CheckpointError, OSError, KeyError, TypeError, ValueError, ZeroDivisionError):
        return 1.0


def measured_walls(roots: Sequence[Path]) -> dict[str, float]:
    """Return configuration hash -> task wall time recorded in every ``index.csv`` under ``roots``.

    Only tasks recorded done and trained where they are recorded (not copied
    from elsewhere) count; of several, the largest.

    Raises
    ------
    rl.experiments.executor.ExecutorError
        If an ``index.csv`` is damaged or records a wall time that is not a number.
    """
    walls: dict[str, float] = {}
    for root in roots:
        for directory, row in _rows(Path(root)):
            if row.get("status") == "done" and not row.get("copied_from"):
                wall = wall_seconds(row.get("wall_time"), directory / INDEX_FILE)
                if wall > 0:
                    walls[row["hash"]] = max(walls.get(row["hash"], 0.0), wall)
    return walls


def progress_in(out: Path) -> Progress:
    """Return what the run in ``out`` has done: parts done in ``parts.csv``, tasks done anywhere.

    Raises
    ------
    rl.experiments.executor.ExecutorError
        If ``parts.csv`` or an ``index.csv`` is damaged (one line naming it).
    """
    parts = frozenset(name for name, row in read_parts(out).items() if row["status"] == "done")
    rows = list(_rows(out))  # each index.csv read once
    done = frozenset(row["hash"] for _, row in rows if row.get("status") == "done")
    left = {
        row["hash"]: _share_left(directory / (row.get("name") or ""))
        for directory, row in rows
        if row["hash"] not in done
        and (directory / (row.get("name") or "") / CHECKPOINT_NAME).is_file()
    }
    return Progress(out, parts, done, left)


def pool_wall(costs: Sequence[float], workers: int) -> float:
    """Return the wall time of tasks taken in order by the first free of ``workers`` workers."""
    ends = [0.0] * workers
    for cost in costs:
        first_free = ends.index(min(ends))
        ends[first_free] += cost
    return max(ends)


def schedule_wall(todo: Sequence[Part], at_once: int, walls: Mapping[str, float]) -> float:
    """Return the wall time of `rl.experiments.part_runs.run_parts`' schedule of ``todo``.

    ``walls`` maps each part's name to its wall time. As `run_parts` does: one
    part after the other in the order of ``todo``, or ``at_once`` side by side
    longest first by `Part.cost`; a part starts once the parts of its
    `Part.after` have ended.
    """
    waiting = start_order(todo, at_once)
    running: dict[str, float] = {}  # name -> when it ends
    now = 0.0
    while waiting or running:
        while waiting and len(running) < at_once:
            part = next_ready(waiting, running)
            if part is None:
                break
            running[part.name] = now + walls[part.name]
        ended = min(running, key=running.__getitem__)
        now = running.pop(ended)
    return now


def plan_text(
    todo: Sequence[Part],
    at_once: int,
    workers: int,
    measured: Mapping[str, float] | None = None,
    progress: Progress | None = None,
) -> str:
    """Return the Markdown table of the parts and the estimated core-hours and wall time.

    ``todo`` are the parts as `rl.experiments.whole.parts` gives them (each
    with the tasks it trains and the count it copies); ``workers`` is each
    part's number of workers (``--workers`` divided by ``at_once``);
    ``measured`` maps configuration hashes to measured task walls
    (`measured_walls`), which replace the plan's estimates; ``progress``
    (`progress_in`, with ``--resume``) what is done already, which costs nothing.
    """
    measured = measured or {}
    done = progress or Progress(Path(), frozenset(), frozenset(), {})
    walls: dict[str, float] = {}
    table = [
        "| part | lines it trains (measured) | lines it copies | waits for | core-s | wall (s) |",
        "|---|---:|---:|---|---:|---:|",
    ]
    core, trained, found, finished = 0.0, 0, 0, 0
    post, report_rows = 0.0, 0
    for part in todo:
        if part.training:
            left = [
                (digest, cost)
                for digest, cost in part.trains
                if digest not in done.tasks and part.name not in done.parts
            ]
            costs = [
                measured.get(digest, cost) * done.left.get(digest, 1.0) for digest, cost in left
            ]
            hits = sum(digest in measured for digest, _ in left)
            lines = len(part.trains) + part.copies
            after = (
                0.0
                if part.name in done.parts
                else postprocess_seconds(lines, part.copies, part.rows)
            )
            report_rows += lines * part.rows
            walls[part.name] = pool_wall(costs, workers) + after
            costs.append(after)
            post += after
            trains, copies = f"{len(part.trains)} ({hits})", str(part.copies)
            if progress is not None:
                trains += f", {len(part.trains) - len(left)} done"
            trained, found = trained + len(part.trains), found + hits
            finished += len(part.trains) - len(left)
        else:  # an analysis part: its own estimate
            costs = [] if part.name in done.parts else [part.cost]
            walls[part.name], trains, copies = sum(costs), "-", "-"
        core += sum(costs)
        table.append(
            f"| {part.name} | {trains} | {copies} | {', '.join(part.after) or '-'} | "
            f"{sum(costs):,.0f} | {walls[part.name]:,.0f} |"
        )
    report = report_seconds(report_rows)
    wall = schedule_wall(todo, at_once, walls) + report
    core += report
    post += report
    perfect = core / (workers * at_once)
    return "\n".join(
        [
            *table,
            "",
            f"Estimated {core:,.0f} core-s ({core / 3600:.1f} core-hours); the schedule of "
            f"--parts-at-once {at_once} with {workers} worker(s) per part about {wall:,.0f} s "
            f"({wall / 3600:.1f} h), against {perfect:,.0f} s for a perfect split. Of "
            f"these, {post:,.0f} core-s are the parts' work besides training and the report "
            f"after the last part ({report:,.0f} s; rl.experiments.costs.postprocess_seconds).",
            f"{found} of the {trained} trained tasks cost their measured wall time "
            "(--measured); the others their estimates from walls measured at the paper's "
            "scale on a 2-core machine (rl.experiments.costs). Nothing ran.",
            *(
                [
                    f"With --resume, what is left in {done.out}: {len(done.parts)} of the "
                    f"{len(todo)} parts and {finished} of the {trained} trained tasks are done "
                    f"and cost nothing; {len(done.left)} stopped part-way cost what is left "
                    "after their last checkpoint."
                ]
                if progress is not None
                else []
            ),
        ]
    )
