"""``python -m rl.reproduce paper``: every experiment of the paper, one resumable directory each.

::

    python -m rl.reproduce paper [--scale paper | --episodes-scale F --seeds N [--deep-seeds N]]
        [--readings released,paper,stable] [--workers W] [--backend local|ray] [--address A]
        [--highway-engine twin|reference] [--parts-at-once K] [--out DIR] [--resume]
        [--report-only] [--plan [--measured DIR ...]]

The parts (`parts`), in the order they run: the appendix's parameter table
(``python -m analysis.params``), the rank claim's profiles of Q* on Pendulum and
CartPole (``python -m analysis.rank``), then for each reading the experiments of
`rl.experiments.paper.EXPERIMENTS` one environment at a time, cheapest first
(ablation and sensitivity on CartPole and Pendulum, the comparison, Highway,
the Highway ablation). A training part is one ``python -m rl.reproduce NAME
--env ENV`` call into ``OUT/READING/NAME-ENV`` (its figures, tables and
``summary.md`` as that command writes them). After the first reading, a part
trains only the lines whose settings differ from those of a reading already
run (`rl.agents.readings.same_settings`); the report reads the others from
there. Within a reading, a configuration that two parts share (the
comparison's TEQL line is one of the ablation's) trains in one of them and
is copied by the other once it has ended (`share_lines`, ``--reuse``).

Each part runs as its own process (``python -m rl.reproduce ...`` or the
analysis command; `rl.experiments.part_runs`). ``--parts-at-once K`` runs K
parts side by side, each with ``--workers W // K`` (W: ``--workers``,
default every CPU), longest first by the plan's cost estimate, so that one
part's last long task does not leave the other workers idle (local backend
only); then a part's output goes to ``OUT/PART/log.txt`` instead of the
terminal. The default, 1, runs the parts
one after the other in the order above, each with all W workers.

``OUT/paper.json`` records the settings, ``OUT/parts.csv`` one row per part
(status, wall time, exit code). A killed run continues with the same command
and ``--resume``: finished parts are skipped (one recorded done whose files
are missing runs again, `rl.experiments.parts.not_done`), an unfinished part resumes with
its own ``--resume`` (only the configurations not yet done run). Ctrl-C or
SIGTERM stops every running part (SIGTERM to each: it keeps what it finished);
on Linux a part gets SIGTERM too when the driver is killed, even by SIGKILL
(`rl.experiments.workers.end_with_parent`). The driver holds ``OUT/.lock``
while it runs, so a second driver on the same ``OUT`` is refused.
``report.md`` and ``report.html`` (`rl.experiments.paper_report`) are written
at the end, and by ``--report-only`` from whatever has finished. ``--plan``
runs nothing: it prints the parts, what each trains and copies, and the
estimated core-hours and wall time (`rl.experiments.paper_plan`; with
``--measured DIR`` tasks measured before cost their measured wall time, with
``--resume`` what ``--out`` has done costs nothing).

``--scale paper`` is the paper's episodes and 100 seeds for every agent
(Table tab:hyperparams: "Results aggregate 100 independent runs").
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rl.agents.readings import same_settings
from rl.experiments.executor import (
    ExecutorError,
    add_executor_arguments,
    sigterm_interrupts,
)
from rl.experiments.history import append_command
from rl.experiments.paper import add_highway_engine_argument, experiment, reading_for
from rl.experiments.part_runs import run_parts
from rl.experiments.parts import (
    MANIFEST,
    READINGS,
    Part,
    read_manifest,
    read_parts,
)
from rl.experiments.workers import cpu_workers
from rl.runs.config import ConfigError
from rl.runs.rundir import (
    RunLock,
    atomic_write_text,
    make_run_dir,
    os_error_line,
)
from rl.runs.tensorboard import require_tensorboard
from rl.validation import check_counts, check_directories
from tensorq.version import add_version_option

DEFAULT_READINGS = "released,paper,stable"
PAPER_SEEDS = 100
"""``--scale paper``: the paper's 100 runs per curve."""

#: Training parts, cheapest first: (experiment, environment).
TRAINING = (
    ("ablation", "cartpole"),
    ("ablation", "pendulum"),
    ("sensitivity", "cartpole"),
    ("sensitivity", "pendulum"),
    ("sensitivity-tlr", "cartpole"),
    ("sensitivity-tlr", "pendulum"),
    ("comparison", "cartpole"),
    ("comparison", "pendulum"),
    ("highway", "highway"),
    ("ablation", "highway"),
)
RANK_ENVS = ("pendulum", "cartpole")
"""Environments with a model to compute Q* from (Highway has none)."""
QUICK_RANK_BELOW = 0.1
"""Below this episodes scale the rank parts run a quick fit (`_rank_args`)."""
RANK_SECONDS = {"pendulum": 300.0, "cartpole": 600.0}
"""Core seconds of ``analysis.rank`` with its documented settings (docs/analysis.md),
the rank parts' cost estimate for ordering parts (a tenth for the quick fit)."""


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m rl.reproduce paper``."""
    parser = argparse.ArgumentParser(
        prog="python -m rl.reproduce paper",
        description="Run every experiment of the paper and write one report with a verdict "
        "per claim.",
    )
    parser.add_argument(
        "--scale", choices=("paper",), help="the paper's episodes and 100 seeds for every agent"
    )
    parser.add_argument(
        "--episodes-scale",
        type=float,
        default=None,
        metavar="F",
        help="train the first F of the paper's episodes (default 1; not with --scale paper)",
    )
    parser.add_argument("--seeds", type=int, default=None, help="seeds per line (default 30)")
    parser.add_argument("--deep-seeds", type=int, help="seeds of DQN and SAC (default --seeds)")
    parser.add_argument(
        "--readings",
        default=DEFAULT_READINGS,
        help=f"comma-separated readings, the first trains every line (default {DEFAULT_READINGS})",
    )
    add_executor_arguments(parser)
    add_highway_engine_argument(parser)
    parser.add_argument(
        "--parts-at-once",
        type=int,
        default=1,
        metavar="K",
        help="run K parts side by side, each with --workers W/K, longest first (default 1; "
        "local backend)",
    )
    parser.add_argument("--out", help="output directory (default runs/reproduce/paper[-sF])")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue a killed run in --out (with --plan: plan what is left of it)",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="train nothing: write the report from --out"
    )
    parser.add_argument(
        "--plan",
        action="store_true",
        help="run nothing: print the parts, what each trains and copies, and the estimated "
        "core-hours and wall time",
    )
    parser.add_argument(
        "--measured",
        action="append",
        default=[],
        metavar="DIR",
        help="with --plan: a task that an index.csv under DIR records done costs its measured "
        "wall time (repeatable)",
    )
    parser.add_argument(
        "--tensorboard",
        metavar="DIR",
        help="also log every run that trains to TensorBoard, in DIR/READING/NAME-ENV/",
    )
    return add_version_option(parser)


class Settings(NamedTuple):
    """The settings every part shares (``OUT/paper.json``)."""

    scale: float
    seeds: int
    deep_seeds: int
    readings: tuple[str, ...]
    highway_engine: str


def settings_from(args: argparse.Namespace) -> Settings:
    """Return the shared settings of the arguments.

    Raises
    ------
    ValueError
        In one line, for a bad scale, seed count or reading, or ``--scale``
        combined with ``--episodes-scale`` or ``--seeds``.
    """
    if args.scale == "paper":
        if args.episodes_scale is not None or args.seeds is not None or args.deep_seeds:
            raise ValueError(
                "--scale paper sets the episodes and seeds; drop --episodes-scale, "
                "--seeds and --deep-seeds."
            )
        scale, seeds, deep = 1.0, PAPER_SEEDS, PAPER_SEEDS
    else:
        scale = 1.0 if args.episodes_scale is None else args.episodes_scale
        seeds = 30 if args.seeds is None else args.seeds
        deep = args.deep_seeds or seeds
    if not 0.0 < scale <= 1.0:
        raise ValueError(f"The '--episodes-scale' value must be in (0, 1]. Got {scale!r} instead.")
    if seeds < 1 or deep < 1:
        raise ValueError(f"The seed counts must be ints >= 1. Got {seeds} and {deep} instead.")
    readings = tuple(r.strip() for r in args.readings.split(",") if r.strip())
    unknown = [r for r in readings if r not in READINGS]
    if not readings or unknown or len(set(readings)) != len(readings):
        raise ValueError(
            f"--readings must name distinct readings of {', '.join(READINGS)}. "
            f"Got {args.readings!r} instead."
        )
    check_counts(args, "workers", "parts_at_once")
    if args.address and args.backend != "ray":
        raise ValueError("--address needs --backend ray.")
    if args.parts_at_once > 1 and args.backend != "local":
        raise ValueError("--parts-at-once above 1 needs --backend local (Ray shares one pool).")
    if args.parts_at_once > cpu_workers(args.workers):
        raise ValueError(
            f"--parts-at-once {args.parts_at_once} needs as many workers; --workers is "
            f"{cpu_workers(args.workers)} (default: every CPU)."
        )
    return Settings(scale, seeds, deep, readings, args.highway_engine)


def new_lines(name: str, env: str, wanted: str, earlier: Sequence[str]) -> list[str] | None:
    """Return the lines of ``name`` on ``env`` whose settings differ in every earlier reading.

    None: all of them (no earlier reading).
    """
    if not earlier:
        return None
    keys = []
    for line in experiment(name).lines(env):
        mine = reading_for(line.agent, wanted)
        if not any(
            same_settings(line.agent, mine, reading_for(line.agent, other), env)
            for other in earlier
        ):
            keys.append(line.key)
    return keys


def _rank_args(env: str, scale: float) -> tuple[str, ...]:
    """``analysis.rank`` on Q*: the documented settings, or a quick fit below `QUICK_RANK_BELOW`."""
    quick = scale < QUICK_RANK_BELOW
    return (
        "--env",
        env,
        "--ranks",
        "1,2,5,10,20" if quick else "1:20",
        "--samples",
        "2" if quick else "20",
        "--restarts",
        "1" if quick else "3",
        *(("--no-refine",) if quick else ()),
        "--no-progress",
    )


def part_workers(args: argparse.Namespace) -> int | None:
    """Return each part's ``--workers``: W // K side by side, else ``--workers`` (None: all)."""
    if args.parts_at_once == 1:
        return args.workers
    return cpu_workers(args.workers) // args.parts_at_once


def parts(
    settings: Settings,
    args: argparse.Namespace,
    out: Path,
    plan: Callable[[Sequence[str]], list[tuple[str, float]]],
) -> list[Part]:
    """Return every part of the paper in the order it runs one after the other.

    ``plan(argv)`` gives the tasks of a training part's ``python -m
    rl.reproduce`` arguments, (configuration hash, estimated core seconds)
    each (`rl.reproduce.plan_tasks`); see `share_lines` for what is done with them.
    """
    python = sys.executable
    found = [
        Part("analysis/params", (python, "-m", "analysis.params", "--format", "markdown"), False)
    ]
    for env in RANK_ENVS:
        name = f"analysis/rank-{env}"
        command = (python, "-m", "analysis.rank", *_rank_args(env, settings.scale))
        cost = RANK_SECONDS[env] * (0.1 if settings.scale < QUICK_RANK_BELOW else 1.0)
        found.append(Part(name, (*command, "--out", str(out / name)), False, cost))
    workers = part_workers(args)
    common = [
        "--seeds",
        str(settings.seeds),
        "--deep-seeds",
        str(settings.deep_seeds),
        "--episodes-scale",
        f"{settings.scale:g}",
        "--backend",
        args.backend,
        "--postprocess",
        "--highway-engine",
        settings.highway_engine,
        *(["--workers", str(workers)] if workers else []),
        *(["--address", args.address] if args.address else []),
    ]
    for name, env in TRAINING:
        for index, reading in enumerate(settings.readings):
            keys = new_lines(name, env, reading, settings.readings[:index])
            if keys == []:
                continue
            part = f"{reading}/{name}-{env}"
            argv = [name, "--env", env, "--reading", reading, "--out", str(out / part), *common]
            if args.tensorboard:
                argv += ["--tensorboard", str(Path(args.tensorboard) / part)]
            if keys:
                argv += ["--agents", ",".join(keys)]
            episodes = experiment(name).episodes(env, settings.scale)
            rows = max(settings.seeds, settings.deep_seeds) * episodes
            found.append(Part(part, tuple(argv), True, rows=rows))
    return share_lines(found, out, plan, by_cost=args.parts_at_once > 1)


def share_lines(
    found: Sequence[Part],
    out: Path,
    plan: Callable[[Sequence[str]], list[tuple[str, float]]],
    by_cost: bool,
) -> list[Part]:
    """Give each configuration to one part; the others copy it (``--reuse``) once that part ends.

    Experiments share lines: in one reading the comparison's TEQL and TLR
    lines are the ablation's TLR line and one of its lambda lines, and the
    TEQL lines of ``sensitivity-tlr`` are those of ``sensitivity``. A
    configuration (by `rl.experiments.executor.config_hash`) belongs to the
    first part that has it, in the order the parts are taken: as listed, or
    with ``by_cost`` (parts side by side) by estimated cost, largest first,
    so that the longest parts start at once. A later part that has it waits
    for the owner to end (`Part.after`). Its tasks of its own are `Part.trains`,
    its cost is theirs, and `Part.copies` counts the others.
    Every part's `Part.reuse` names ``OUT/OTHER`` for each other part it
    shares a configuration with, owner or not, so that a run resumed with
    another ``--parts-at-once`` (other owners) still copies what is finished.
    """
    tasks = {part.name: plan(part.argv) if part.training else [] for part in found}
    holders: dict[str, set[str]] = {}
    for name, planned in tasks.items():
        for digest, _ in planned:
            holders.setdefault(digest, set()).add(name)
    order = list(found)
    if by_cost:
        order.sort(key=lambda part: -(part.cost + sum(cost for _, cost in tasks[part.name])))
    owners: dict[str, str] = {}
    shared: dict[str, Part] = {}
    for part in order:
        after = sorted({owners[digest] for digest, _ in tasks[part.name] if digest in owners})
        own = [(digest, cost) for digest, cost in tasks[part.name] if digest not in owners]
        owners.update((digest, part.name) for digest, _ in own)
        others = sorted({other for d, _ in tasks[part.name] for other in holders[d]} - {part.name})
        shared[part.name] = part._replace(
            cost=part.cost + sum(cost for _, cost in own),
            after=tuple(after),
            reuse=tuple(str(out / other) for other in others),
            trains=tuple(own),
            copies=len(tasks[part.name]) - len(own),
        )
    return [shared[part.name] for part in found]


def _wanted(settings: Settings) -> dict[str, Any]:
    """Return ``settings`` as ``paper.json`` records them."""
    return settings._asdict() | {"readings": list(settings.readings)}


def _check_settings(out: Path, settings: Settings) -> None:
    """Refuse ``settings`` other than those ``out/paper.json`` records (if any), in one line."""
    if not (out / MANIFEST).is_file():
        return
    recorded = read_manifest(out)
    changed = [key for key, value in _wanted(settings).items() if recorded.get(key) != value]
    if changed:
        raise ValueError(
            f"{out} was started with other settings ({', '.join(changed)}); use the same "
            "ones with --resume, or another --out."
        )


def _check_manifest(out: Path, settings: Settings, resume: bool) -> None:
    path = out / MANIFEST
    if path.is_file() and not resume:
        raise ValueError(f"{out} already holds {MANIFEST}; continue it with --resume.")
    _check_settings(out, settings)
    make_run_dir(out)
    atomic_write_text(path, json.dumps(_wanted(settings), indent=1) + "\n")


def default_out(settings: Settings) -> Path:
    """Return ``runs/reproduce/paper`` (``paper-sF-NseedS`` below the paper's scale)."""
    if settings.scale == 1.0 and settings.seeds == PAPER_SEEDS:
        return Path("runs") / "reproduce" / "paper"
    return Path("runs") / "reproduce" / f"paper-s{settings.scale:g}-{settings.seeds}seeds"


def main(argv: Sequence[str], plan: Callable[[Sequence[str]], list[tuple[str, float]]]) -> int:
    """Run ``python -m rl.reproduce paper ARGS``; ``plan`` as for `parts`.

    The run holds ``OUT/.lock`` (`rl.runs.rundir.RunLock`) from before it
    reads ``paper.json`` until the report is written, so a second driver on the
    same ``OUT`` is refused in one line while the first runs.

    Returns the exit code: 0 done, 1 some part failed, 2 bad input, 130 interrupted.
    """
    args = build_parser().parse_args(list(argv))
    try:
        settings = settings_from(args)
        out = Path(args.out) if args.out else default_out(settings)
        if args.measured and not args.plan:
            raise ValueError("--measured needs --plan.")
        if args.tensorboard and not args.plan:
            require_tensorboard()
        if args.plan:
            return _print_plan(args, settings, out, plan)
        if args.report_only and not (out / MANIFEST).is_file():
            raise ValueError(f"{out} holds no {MANIFEST}; nothing to report.")
        make_run_dir(out)
        lock = RunLock.acquire(out)
    except (ValueError, ConfigError, ExecutorError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"error: {os_error_line(error)}", file=sys.stderr)
        return 2
    with lock:
        return _run(args, argv, settings, out, plan)


def _print_plan(
    args: argparse.Namespace,
    settings: Settings,
    out: Path,
    plan: Callable[[Sequence[str]], list[tuple[str, float]]],
) -> int:
    """Print the plan of ``--plan`` (`rl.experiments.paper_plan`); return 0."""
    from rl.experiments.paper_plan import measured_walls, plan_text, progress_in

    check_directories("--measured", args.measured)
    walls = measured_walls([Path(directory) for directory in args.measured])
    progress = None
    if args.resume:
        _check_settings(out, settings)
        progress = progress_in(out)
    todo = parts(settings, args, out, plan)
    workers = cpu_workers(args.workers) // args.parts_at_once
    print(plan_text(todo, args.parts_at_once, workers, walls, progress))
    return 0


def _run(
    args: argparse.Namespace,
    argv: Sequence[str],
    settings: Settings,
    out: Path,
    plan: Callable[[Sequence[str]], list[tuple[str, float]]],
) -> int:
    """Run the parts and write the report, holding ``OUT``'s lock; return the exit code."""
    from rl.experiments.paper_report import write_paper_report

    command = "python -m rl.reproduce paper " + shlex.join(list(argv))
    try:
        if args.report_only:
            read_manifest(out)  # a damaged one: one line before anything is read
        else:
            _check_manifest(out, settings, args.resume)
        read_parts(out)  # a damaged table of parts: one line before anything runs
        code = 0
        if not args.report_only:
            start = time.perf_counter()
            with sigterm_interrupts():
                todo = parts(settings, args, out, plan)
                code = run_parts(todo, out, args.resume, args.parts_at_once)
            append_command(out, time.perf_counter() - start, command)
            if code == 130:
                print(
                    f"Interrupted; continue with the same command and --resume ({out}).",
                    file=sys.stderr,
                )
                return 130
        written = write_paper_report(out, command)
    except (ValueError, ExecutorError) as error:  # RunDirError too: a link, a busy part
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"error: {os_error_line(error)}", file=sys.stderr)
        return 2
    print(f"Report: {written[0]} and {written[1]}")
    return code
