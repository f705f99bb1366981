r"""``python -m rl.reproduce NAME``: one command per experiment of the paper's "Numerical Study".

``python -m rl.reproduce paper`` runs them all and writes one report with a
verdict per claim (`rl.experiments.whole`, `rl.experiments.paper_report`).

::

    python -m rl.reproduce --list
    python -m rl.reproduce comparison --env cartpole --episodes-scale 0.1 \
        --seeds 10 --deep-seeds 4 --reading released --workers 2 --postprocess

Experiments (`rl.experiments.paper.EXPERIMENTS`): ``comparison`` (Pendulum
and CartPole: TEQL, TLR, LoRa-VI, DQN, SAC, and tabular Q-learning as a
reference), ``highway`` (TEQL, TLR, DQN, SAC), ``ablation`` (TLR, TEQL
lambda = 0 and lambda > 0; box plots and the standard deviations the paper
quotes), ``sensitivity`` (TEQL at five discretization levels) and
``sensitivity-tlr`` (TLR vs TEQL at the four non-base levels).

Every configuration is one task of `rl.experiments.executor` (a local process pool of
``--workers`` processes, or Ray with ``--backend ray [--address ADDR]``): the
seeds of a line run as replicas of one task (the PyTorch agents too: they
compute their replicas together), except on highway-env (``--highway-engine
reference``), one task per seed. Highway runs on its compiled twin by default
(``--highway-engine twin``, `rl.envs.highway_twin`: the paper's configuration,
which the experiments use), where the tensor agents play inside the fused
runner. Each
task's run directory (``OUT/ENV/LINE`` or ``OUT/ENV/LINE/seed-S``, as ``rl.train`` writes it) and
its row of ``OUT/index.csv`` are written when it finishes; ``--resume`` runs
only the configurations not yet done (or whose files are missing or damaged,
one line each on stderr, see `rl.runs.verify`), each from its last checkpoint
where it has one (`rl.experiments.executor`), then redraws everything. Progress lines
on stderr give configurations done and the time left, estimated from the
finished tasks' speed and the remaining tasks' estimated cost.
``--reuse DIR`` (repeatable) copies a configuration that another output
directory holds finished, with the same configuration hash, instead of
training it (`rl.experiments.executor.run_tasks`, ``reuse``): ``paper`` passes
it so that a line two experiments share trains once.

``--episodes-scale F`` trains the first ``F`` of the paper's episodes (a
prefix of the full run) with final windows scaled in proportion. The figures
(PNG and PDF), the tidy tables behind them (CSV) and ``summary.md`` go to
``--out`` (default ``runs/reproduce/NAME[-ENV]-READING``); see
`rl.experiments.report` and ``docs/reproduce.md``.

Exit codes: 0 done; 1 some configurations failed (see ``index.csv``); 2 bad
arguments or a refused output directory; 130 interrupted (finished
configurations are kept: continue with ``--resume``).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rl.agents.readings import default_reading
from rl.experiments.costs import task_cost
from rl.experiments.executor import (
    INDEX_FILE,
    ExecutorError,
    Task,
    TaskResult,
    add_executor_arguments,
    config_hash,
    read_index,
    require_ray,
    run_tasks,
    sigterm_interrupts,
    wall_seconds,
)
from rl.experiments.history import append_command, read_commands
from rl.experiments.paper import (
    EXPERIMENTS,
    Experiment,
    Line,
    add_highway_engine_argument,
    describe_lines,
    experiment,
    reading_for,
)
from rl.experiments.parts import READINGS
from rl.experiments.presets import preset_config
from rl.experiments.report import (
    ENV_TITLES,
    line_stats,
    load_line,
    plot_box,
    plot_curves,
    scale_label,
    write_tables,
)
from rl.experiments.summary import Settings, write_summary
from rl.runs.config import ConfigError
from rl.runs.rundir import RunDirError, os_error_line, refuse_linked_path
from rl.runs.tensorboard import require_tensorboard
from rl.validation import check_counts, check_directories
from tensorq.version import add_version_option

CHECKPOINTS_PER_LINE = 20
"""Checkpoints in each line's run (every 500 of 10,000 episodes), so that ``--resume``
continues a killed line from the last one."""


class PlannedTask(NamedTuple):
    """A task of the plan, with the line it belongs to and its estimated cost (seconds)."""

    task: Task
    env: str
    line: Line
    cost: float


class Plan(NamedTuple):
    """Everything one invocation trains and reports."""

    experiment: Experiment
    envs: tuple[str, ...]
    lines: dict[str, list[Line]]
    tasks: list[PlannedTask]
    episodes: dict[str, int]
    windows: dict[str, int]
    readings_used: dict[str, str]


def _check_args(args: argparse.Namespace, chosen: Experiment) -> None:
    if args.env is not None and args.env not in chosen.envs:
        raise ValueError(
            f"Experiment {chosen.name!r} runs on {', '.join(chosen.envs)}; got --env {args.env!r}."
        )
    scale = args.episodes_scale
    if not (scale > 0.0 and scale <= 1.0):
        raise ValueError(f"The '--episodes-scale' value must be in (0, 1]. Got {scale!r} instead.")
    check_counts(args, "seeds", "deep_seeds", "workers")  # memory caps: when a run is built
    if args.address and args.backend != "ray":
        raise ValueError("--address needs --backend ray.")
    check_directories("--reuse", args.reuse)


def make_plan(args: argparse.Namespace) -> Plan:
    """Return the tasks of one invocation: every line of every environment, longest first.

    Raises
    ------
    ValueError
        In one line, for an unknown experiment or environment, a bad scale,
        seed count or ``--agents`` entry.
    rl.runs.config.ConfigError
        If a configuration is invalid.
    """
    chosen = experiment(args.name)
    _check_args(args, chosen)
    envs = (args.env,) if args.env else chosen.envs
    deep_seeds = args.deep_seeds or args.seeds
    wanted = [key for key in (args.agents or "").split(",") if key]
    lines = {env: chosen.lines(env) for env in envs}
    known = {line.key for env_lines in lines.values() for line in env_lines}
    for key in wanted:
        if key not in known:
            raise ValueError(
                f"Unknown --agents entry {key!r}; this experiment's lines: "
                f"{', '.join(sorted(known))}."
            )
    if wanted:
        lines = {env: [ln for ln in ls if ln.key in wanted] for env, ls in lines.items()}
    episodes = {env: chosen.episodes(env, args.episodes_scale) for env in envs}
    windows = {env: chosen.window(env, args.episodes_scale) for env in envs}
    used: dict[str, str] = {}
    planned: list[PlannedTask] = []
    for env in envs:
        for line in lines[env]:
            reading = used[line.agent] = reading_for(line.agent, args.reading)
            name = f"{env}-{line.agent}-{reading}"
            fields: dict[str, Any] = {
                "out": "-",
                "episodes": episodes[env],
                "checkpoint_every": max(1, episodes[env] // CHECKPOINTS_PER_LINE),
                "agent_params": dict(line.agent_params),
                "env_options": dict(line.env_options),
            }
            if env == "highway":
                fields["env_options"]["env_kwargs"] = {"engine": args.highway_engine}
            values = {
                "experiment": chosen.name,
                "env": env,
                "line": line.key,
                "reading": reading,
            }
            count = deep_seeds if line.deep else args.seeds
            engine = args.highway_engine
            if env == "highway" and engine == "reference":  # highway-env dominates: 1 seed a task
                for seed in range(count):
                    config = preset_config(name, seeds=1, seed=seed, **fields)
                    task = Task(f"{env}/{line.key}/seed-{seed}", config, {**values, "seed": seed})
                    cost = task_cost(env, reading, line.key, line.agent, episodes[env], 1, engine)
                    planned.append(PlannedTask(task, env, line, cost))
            else:
                config = preset_config(name, seeds=count, seed=0, **fields)
                task = Task(f"{env}/{line.key}", config, {**values, "seeds": count})
                cost = task_cost(env, reading, line.key, line.agent, episodes[env], count, engine)
                planned.append(PlannedTask(task, env, line, cost))
    planned.sort(key=lambda p: -p.cost)  # longest first: the pool takes tasks in order
    return Plan(chosen, envs, lines, planned, episodes, windows, used)


def plan_tasks(argv: Sequence[str]) -> list[tuple[str, float]]:
    """Return each task of ``python -m rl.reproduce ARGV``: its configuration hash and cost.

    The hash is `rl.experiments.executor.config_hash`, the cost the estimated core seconds.
    """
    plan = make_plan(build_parser().parse_args(list(argv)))
    return [(config_hash(planned.task.config), planned.cost) for planned in plan.tasks]


def default_out(args: argparse.Namespace) -> Path:
    """Return ``runs/reproduce/NAME[-ENV]-READING[-sSCALE]``."""
    parts = [args.name, *([args.env] if args.env else []), args.reading]
    if args.episodes_scale != 1.0:
        parts.append(f"s{args.episodes_scale:g}")
    return Path("runs") / "reproduce" / "-".join(parts)


# ----------------------------------------------------------------------------- progress


class _Progress:
    """Print configurations done and the time left (by estimated cost) after each task."""

    def __init__(self, plan: Plan) -> None:
        self.costs = {p.task.name: p.cost for p in plan.tasks}
        self.total = 0
        self.remaining = 0.0
        self.done_cost = 0.0
        self.count = 0
        self.failed = 0
        self.start = time.perf_counter()

    def started(self, names: list[str], reruns: dict[str, str]) -> None:
        """Print what runs: the `rl.experiments.executor.run_tasks` ``on_start`` callback."""
        for name, reason in reruns.items():
            print(f"rerunning {name} (recorded done): {reason}", file=sys.stderr)
        self.total = len(names)
        self.remaining = sum(self.costs.get(name, 0.0) for name in names)
        self.start = time.perf_counter()
        print(
            f"{self.total} configurations to run ({len(self.costs) - self.total} already done).",
            file=sys.stderr,
        )

    def __call__(self, result: TaskResult) -> None:
        cost = self.costs.get(result.name, 0.0)
        self.count += 1
        self.failed += result.status == "failed"
        self.done_cost += cost
        self.remaining = max(0.0, self.remaining - cost)
        elapsed = time.perf_counter() - self.start
        left = elapsed * self.remaining / self.done_cost if self.done_cost > 0 else float("nan")
        print(
            f"[{self.count}/{self.total} configurations, {self.failed} failed] {result.name} "
            f"{result.status} in {result.wall_time:.0f} s; about {left / 60:.1f} min left",
            file=sys.stderr,
            flush=True,
        )


# ----------------------------------------------------------------------------- the report


def _walls(out: Path) -> dict[str, float]:
    """Return line directory (``ENV/LINE``) -> summed wall time of its finished tasks."""
    walls: dict[str, float] = {}
    for row in read_index(out):
        if row.get("status") != "done" or not row.get("wall_time"):
            continue
        parts = (row.get("name") or "").split("/")
        key = "/".join(parts[:2])
        walls[key] = walls.get(key, 0.0) + wall_seconds(row["wall_time"], out / INDEX_FILE)
    return walls


def write_report(plan: Plan, out: Path, settings: Settings) -> list[Path]:
    """Write the figures, tables and ``summary.md`` from the finished runs under ``out``.

    Raises
    ------
    rl.runs.rundir.RunDirError
        If a run directory, or one above it under ``out``, is a symbolic link.
    ValueError
        If a run's ``metrics.csv`` or ``out``'s ``index.csv`` is damaged (one line).
    """
    by_line: dict[tuple[str, str], list[Path]] = {}
    for planned in plan.tasks:
        refuse_linked_path(out, planned.task.name)  # a run read from elsewhere
        by_line.setdefault((planned.env, planned.line.key), []).append(out / planned.task.name)
    stats: dict[str, list[Any]] = {}
    missing: list[str] = []
    written: list[Path] = []
    for env in plan.envs:
        env_stats = []
        for line in plan.lines[env]:
            dirs = sorted(by_line[(env, line.key)], key=lambda p: (len(p.name), p.name))
            runs = load_line(dirs, line, env)
            if runs is None:
                missing.append(f"{env}/{line.key}")
                continue
            last = plan.episodes[env]
            env_stats.append(line_stats(runs, max(1, last - plan.windows[env] + 1), last))
        stats[env] = env_stats
        if not env_stats:
            continue
        scale = scale_label(settings.scale, settings.seeds, settings.deep_seeds)
        title = ENV_TITLES.get(env, env)
        written += plot_curves(
            env_stats, title, out, f"{env}-curves", settings.postprocess, note=scale
        )
        if plan.experiment.box:
            written += plot_box(env_stats, title, out, f"{env}-box", note=scale)
        written += write_tables(
            out, env, plan.experiment.name, env_stats, settings.reading, settings.postprocess
        )
    written.append(
        write_summary(
            out,
            plan.experiment,
            plan.envs,
            stats,
            _walls(out),
            missing,
            settings,
            plan.episodes,
            plan.windows,
        )
    )
    return written


# ----------------------------------------------------------------------------- the command


def list_text() -> str:
    """Return one line per experiment: name, figure, environments and lines."""
    rows = []
    for chosen in EXPERIMENTS.values():
        env_lines = chosen.lines(chosen.envs[0])
        rows.append(
            f"{chosen.name:16s} {chosen.figure}\n{'':16s} envs: {', '.join(chosen.envs)}; "
            f"lines: {describe_lines(env_lines)}"
        )
    return "\n".join(rows)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m rl.reproduce``."""
    parser = argparse.ArgumentParser(
        prog="python -m rl.reproduce",
        description="Reproduce one experiment of the paper: train, plot, summarize.",
    )
    parser.add_argument("name", nargs="?", metavar="NAME", help="experiment (see --list)")
    parser.add_argument("--list", action="store_true", help="list the experiments and exit")
    parser.add_argument(
        "--env", help="run on this environment only (default: all of the experiment's)"
    )
    parser.add_argument("--seeds", type=int, default=30, help="seeds per line (default 30)")
    parser.add_argument(
        "--deep-seeds", type=int, help="seeds of the PyTorch agents DQN and SAC (default: --seeds)"
    )
    parser.add_argument(
        "--episodes-scale",
        type=float,
        default=1.0,
        metavar="F",
        help="train the first F of the paper's episodes, windows scaled alike (default 1)",
    )
    add_highway_engine_argument(parser)
    parser.add_argument(
        "--reading",
        choices=READINGS,
        default=default_reading("teql"),
        help="settings of every agent that has them, the others' paper (stable is TEQL's; "
        "default %(default)s, TEQL's default reading, which learns)",
    )
    add_executor_arguments(parser)
    parser.add_argument(
        "--out", help="output directory (default runs/reproduce/NAME[-ENV]-READING)"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="run only the configurations not finished in --out, then redraw",
    )
    parser.add_argument(
        "--postprocess",
        action="store_true",
        help="also show the authors' post-processed curves and numbers",
    )
    parser.add_argument(
        "--agents",
        metavar="KEYS",
        help="comma-separated subset of the experiment's lines (e.g. teql,tlr)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="train nothing: redraw figures and summary from the runs in --out",
    )
    parser.add_argument(
        "--reuse",
        action="append",
        default=[],
        metavar="DIR",
        help="copy a configuration that DIR (an earlier --out) holds finished instead of "
        "training it (repeatable)",
    )
    parser.add_argument(
        "--tensorboard",
        metavar="DIR",
        help="also log every run that trains to TensorBoard in DIR/ENV/LINE_N",
    )
    return add_version_option(parser)


def _settings(args: argparse.Namespace, argv: Sequence[str], plan: Plan, wall: float) -> Settings:
    return Settings(
        command="python -m rl.reproduce " + " ".join(shlex.quote(a) for a in argv),
        reading=args.reading,
        seeds=args.seeds,
        deep_seeds=args.deep_seeds or args.seeds,
        scale=args.episodes_scale,
        backend=args.backend,
        workers=args.workers,
        wall_time=wall,
        postprocess=args.postprocess,
        readings_used=plan.readings_used,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; return the exit code (0, 1 some failed, 2 refused, 130 interrupted)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["paper"]:  # every experiment and one report: rl.experiments.whole
        from rl.experiments.whole import main as paper_main

        return paper_main(argv[1:], plan_tasks)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list:
        print(list_text())
        print(
            f"{'paper':16s} every experiment above, the parameter table and the rank claim; "
            "one report (python -m rl.reproduce paper --help)"
        )
        return 0
    if args.name is None:
        print("error: give an experiment NAME (python -m rl.reproduce --list)", file=sys.stderr)
        return 2
    try:
        plan = make_plan(args)
        if args.tensorboard:
            require_tensorboard()
        if args.backend == "ray":
            require_ray()
    except (ValueError, ConfigError, ExecutorError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else default_out(args)
    start = time.perf_counter()
    results: list[TaskResult] = []
    if not args.report_only:
        progress = _Progress(plan)
        try:
            with sigterm_interrupts():
                results = run_tasks(
                    [p.task for p in plan.tasks],
                    out,
                    backend=args.backend,
                    workers=args.workers,
                    address=args.address,
                    resume=args.resume,
                    reuse=args.reuse,
                    on_start=progress.started,
                    on_done=progress,
                    progress=False,
                    plot=False,
                    tensorboard=args.tensorboard,
                )
        except (ConfigError, ExecutorError, RunDirError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        except OSError as error:
            print(f"error: {os_error_line(error)}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(
                f"\nInterrupted; finished configurations are kept in {out}. Continue with the "
                "same command and --resume.",
                file=sys.stderr,
            )
            return 130
    elif not out.is_dir():
        print(f"error: {out} does not exist; nothing to report.", file=sys.stderr)
        return 2
    settings = _settings(args, argv, plan, time.perf_counter() - start)
    try:
        if not args.report_only:
            append_command(out, settings.wall_time, settings.command)
        settings = settings._replace(history=tuple(read_commands(out)))
        written = write_report(plan, out, settings)
    except ValueError as error:  # a damaged file (ExecutorError), a link (RunDirError)
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"error: {os_error_line(error)}", file=sys.stderr)
        return 2
    for result in results:
        if result.copied_from is not None:
            print(f"copied {result.name} from {result.copied_from}", file=sys.stderr)
    failed = [r for r in results if r.status == "failed"]
    for result in failed:
        print(f"failed: {result.name}: {result.error}", file=sys.stderr)
    print(f"Wrote {len(written)} files; summary: {written[-1]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
