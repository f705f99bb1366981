"""``python -m analysis.lowrank_suite``: where low rank pays, on problems of known Q* rank.

::

    python -m analysis.lowrank_suite [--out DIR] [--seeds 10] [--episodes 600]
        [--eval-every 10] [--discounts 0.9,0.99] [--qstar-ranks 1,3,5,9,17,full]
        [--state-modes 2,3,4,5,6] [--agent-ranks 1,2,5,10,20]
        [--agents teql-stable,teql-released,tlr-paper] [--jobs 1] [--estimate] [--overwrite]

trains every agent set-up on every instance of the plan
(`analysis.lowrank_suite.grid.suite_plan`) with the seeds as lockstep
replicas and writes, in ``--out``: ``runs.csv`` (one row per run:
`analysis.lowrank_suite.measure.RUN_COLUMNS`), ``instances.csv`` (each Q*'s
construction rank and CP rank bracket), ``verdicts.csv`` (one row per cell:
`analysis.lowrank_suite.verdicts.VERDICT_COLUMNS`), the two figures' tables
``rank_axis.csv`` and ``modes_axis.csv``, the figures ``rank_axis.png`` and
``modes_axis.png``, and ``suite.json`` (the settings).

Resumable: rerunning the same command in the same ``--out`` skips every batch
already in ``runs.csv`` (a batch interrupted midway is run again); other
settings are refused unless ``--overwrite``. ``--jobs N`` runs N batches at
once, each in its own process; a batch's rows do not depend on it.
``--estimate`` times probe batches (`analysis.lowrank_suite.cost`, in CPU
seconds) and prints the forecast of the plan instead.

Exit codes: 0 done; 2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import multiprocessing
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from analysis.lowrank_suite.grid import (
    AGENT_RANKS,
    DISCOUNTS,
    MODES_AXIS_RANK,
    QSTAR_RANKS,
    RANK_AXIS_MODES,
    STATE_MODES,
    STEPS_PER_EPISODE,
    TENSOR_AGENTS,
    AgentSetup,
    Instance,
    agent_setups,
    suite_instances,
)
from analysis.lowrank_suite.measure import RUN_COLUMNS, run_batch
from analysis.lowrank_suite.report import (
    BRACKET_COLUMNS,
    axis_markdown,
    axis_table,
    bracket_row,
    plot_axis,
    verdict_counts_markdown,
    verdict_grid_markdown,
)
from analysis.lowrank_suite.verdicts import VERDICT_COLUMNS, verdict_rows
from analysis.rank.cli import OneLineParser, UsageError, run_command
from rl.runs.rundir import RunLock, atomic_write_text, read_run_file, refuse_link
from tensorq.version import add_version_option

SETTINGS_FILE = "suite.json"
RUNS_FILE = "runs.csv"
MAX_CSV_BYTES = 64 * 1024 * 1024


def _list(text: str, parse: type, name: str) -> list:
    try:
        values = [None if part == "full" else parse(part) for part in text.split(",") if part]
    except ValueError:
        raise UsageError(f"--{name} must be a comma list, got {text!r}.") from None
    if not values:
        raise UsageError(f"--{name} must name at least one value.")
    return values


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m analysis.lowrank_suite``."""
    parser = OneLineParser(
        prog="python -m analysis.lowrank_suite",
        description="TEQL, TLR and tabular Q-learning on problems of known Q* rank.",
    )
    parser.add_argument("--out", default="lowrank-suite", help="output directory")
    parser.add_argument("--seeds", type=int, default=10, help="seeds per batch (lockstep)")
    parser.add_argument("--episodes", type=int, default=600, help="training episodes per seed")
    parser.add_argument("--eval-every", type=int, default=10, help="episodes between evaluations")
    parser.add_argument(
        "--discounts", default=",".join(map(str, DISCOUNTS)), help="discounts, a comma list"
    )
    parser.add_argument(
        "--qstar-ranks",
        default=",".join("full" if r is None else str(r) for r in QSTAR_RANKS),
        help="CP ranks of Q* on the rank axis ('full': no low-rank structure)",
    )
    parser.add_argument(
        "--state-modes",
        default=",".join(map(str, STATE_MODES)),
        help="numbers of state modes on the modes axis (1 to 6)",
    )
    parser.add_argument(
        "--agent-ranks", default=",".join(map(str, AGENT_RANKS)), help="CP ranks of the agents"
    )
    parser.add_argument(
        "--agents",
        default=",".join(f"{a}-{r}" for a, r in TENSOR_AGENTS),
        help="tensor agents as AGENT-READING (tabular Q-learning always runs)",
    )
    parser.add_argument("--estimate", action="store_true", help="print the cost forecast only")
    parser.add_argument("--probe-episodes", type=int, default=10, help="episodes per probe")
    parser.add_argument(
        "--jobs", type=int, default=1, help="batches run at once, one process each (default 1)"
    )
    parser.add_argument("--overwrite", action="store_true", help="start afresh in --out")
    return add_version_option(parser)


def _settings(args: argparse.Namespace) -> dict:
    for name in ("seeds", "episodes", "eval_every", "probe_episodes", "jobs"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}.")
    discounts = _list(args.discounts, float, "discounts")
    if any(g is None or not 0.0 < g < 1.0 for g in discounts):
        raise UsageError(f"--discounts must lie in (0, 1), got {args.discounts!r}.")
    ranks = _list(args.qstar_ranks, int, "qstar-ranks")
    modes = _list(args.state_modes, int, "state-modes")
    agent_ranks = _list(args.agent_ranks, int, "agent-ranks")
    if any(v is not None and v < 1 for v in ranks) or None in modes or None in agent_ranks:
        raise UsageError("--qstar-ranks, --state-modes and --agent-ranks take integers >= 1.")
    if any(m < 1 or m > 6 for m in modes) or any(r < 1 for r in agent_ranks):
        raise UsageError("--state-modes must lie in 1..6 and --agent-ranks be >= 1.")
    known = {f"{a}-{r}": (a, r) for a, r in TENSOR_AGENTS}
    agents = [part for part in args.agents.split(",") if part]
    if unknown := [a for a in agents if a not in known]:
        raise UsageError(f"unknown --agents {unknown}; choose from {', '.join(known)}.")
    return {
        "seeds": args.seeds,
        "episodes": args.episodes,
        "eval_every": args.eval_every,
        "discounts": discounts,
        "qstar_ranks": ranks,
        "state_modes": modes,
        "agent_ranks": agent_ranks,
        "agents": [list(known[a]) for a in agents],
    }


def _plan(settings: dict) -> tuple[list, list]:
    instances = suite_instances(
        settings["qstar_ranks"], settings["state_modes"], settings["discounts"]
    )
    setups = agent_setups(settings["agent_ranks"], [tuple(a) for a in settings["agents"]])
    return instances, setups


def read_csv(path: Path) -> list[dict]:
    """Rows of a CSV the suite wrote ([] when the file is absent); never follows a link."""
    if not path.exists() and not path.is_symlink():
        return []
    text = read_run_file(path, MAX_CSV_BYTES).decode()
    return list(csv.DictReader(io.StringIO(text)))


def write_csv(path: Path, rows: Sequence[dict], columns: Sequence[str]) -> None:
    """Write ``rows`` atomically (a link at ``path`` is refused)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buffer.getvalue())


def _start(out: Path, settings: dict, overwrite: bool) -> list[dict]:
    """Check ``out`` against ``settings``; return the finished rows of ``runs.csv``."""
    path = out / SETTINGS_FILE
    refuse_link(path)
    if path.exists() and not overwrite:
        saved = json.loads(read_run_file(path, 1 << 20).decode())
        if changed := sorted(k for k in settings if saved.get(k) != settings[k]):
            raise UsageError(
                f"{out} holds a suite with other settings ({', '.join(changed)}); "
                "rerun with its settings to resume, or give --overwrite or another --out."
            )
        rows = read_csv(out / RUNS_FILE)
        counts: dict[tuple, int] = {}
        for row in rows:
            key = (row["instance"], row["agent_key"])
            counts[key] = counts.get(key, 0) + 1
        return [r for r in rows if counts[(r["instance"], r["agent_key"])] == settings["seeds"]]
    atomic_write_text(path, json.dumps(settings, indent=2) + "\n")
    write_csv(out / RUNS_FILE, [], RUN_COLUMNS)
    return []


def _estimate(settings: dict, probe_episodes: int, jobs: int) -> list[str]:
    from analysis.lowrank_suite.cost import forecast, measure_costs

    instances, setups = _plan(settings)
    probes = measure_costs(
        instances, setups, episodes=probe_episodes, eval_every=settings["eval_every"]
    )
    lines = ["agent kind, states, rank: seconds = c * seeds + episodes * (a + b * seeds)"]
    lines += [
        f"  {p.kind:<16} {p.states:>5} r{p.rank:<3} a = {p.overhead:.4f}  b = {p.per_seed:.4f}"
        f"  c = {p.setup:.3f}"
        for p in probes
    ]
    total = forecast(probes, instances, setups, settings["seeds"], settings["episodes"])
    lines.append(
        f"plan: {len(instances)} instances x {len(setups)} agent set-ups, "
        f"{settings['seeds']} seeds, {settings['episodes']} episodes: "
        f"{total / 3600:.2f} CPU hours, about {total / 3600 / jobs:.2f} hours of wall time "
        f"with --jobs {jobs} on {jobs} idle core{'s' if jobs > 1 else ''}"
    )
    return lines


def _summaries(out: Path, rows: list[dict], settings: dict) -> list[str]:
    """Write ``verdicts.csv``, the figures and their tables; return the tables as Markdown."""
    eval_steps = settings["eval_every"] * STEPS_PER_EPISODE
    verdicts = verdict_rows(rows, eval_steps)
    write_csv(out / "verdicts.csv", verdicts, VERDICT_COLUMNS)
    axes = (
        ("rank_axis", "qstar_rank", {"state_modes": RANK_AXIS_MODES}),
        ("modes_axis", "state_modes", {"qstar_rank": MODES_AXIS_RANK}),
    )
    lines = ["", "verdicts per agent (every instance and agent rank):"]
    lines += verdict_counts_markdown(verdicts)
    for name, axis, fixed in axes:
        table = axis_table(verdicts, axis, fixed)
        write_csv(out / f"{name}.csv", table, VERDICT_COLUMNS)
        lines += ["", f"{name} ({', '.join(f'{k} {v}' for k, v in fixed.items())}):", ""]
        lines += verdict_grid_markdown(table, axis) + [""]
        lines += axis_markdown(table, axis)
        if table:
            plot_axis(
                table,
                axis,
                out / f"{name}.png",
                agent_key_prefix="teql-stable-r",
                title=f"TEQL (stable) / tabular, {settings['seeds']} seeds, 95% intervals",
            )
    return lines


def _bracket(instance: Instance, instances: Sequence[Instance], known: dict[str, dict]) -> dict:
    """Return the ``instances.csv`` row of ``instance``, reusing one of another discount.

    The planted Q* of two discounts differ by a positive factor only (the same
    tensor, scaled to max |R| = 1), so their CP rank brackets are the same.
    """
    for twin in instances:
        if dataclasses.replace(twin, gamma=instance.gamma) == instance and twin.key in known:
            return {**known[twin.key], "instance": instance.key}
    return bracket_row(instance, instance.make().q_star)


def _batch(instance: Instance, setup: AgentSetup, settings: dict, work: Path) -> list[dict]:
    return run_batch(
        instance,
        setup,
        seeds=settings["seeds"],
        episodes=settings["episodes"],
        eval_every=settings["eval_every"],
        work_dir=work / f"{instance.key}-{setup.key}",
    )


def _batches(pending: list, settings: dict, work: Path, jobs: int) -> Iterator[tuple]:
    """Yield (instance, setup, rows) of every pending batch, on ``jobs`` processes."""
    if jobs == 1:
        for instance, setup in pending:
            yield instance, setup, _batch(instance, setup, settings, work)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {
            pool.submit(_batch, instance, setup, settings, work): (instance, setup)
            for instance, setup in pending
        }
        for future in as_completed(futures):
            yield (*futures[future], future.result())


def run(args: argparse.Namespace) -> list[str]:
    """Run (or resume) the suite of ``args``; return the summary lines.

    BLAS runs on one thread: the exact evaluations solve small dense systems,
    which threads only slow down on a shared machine.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return _run(args)


def _run(args: argparse.Namespace) -> list[str]:
    settings = _settings(args)
    if args.estimate:
        return _estimate(settings, args.probe_episodes, args.jobs)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a directory.")
    out.mkdir(parents=True, exist_ok=True)
    instances, setups = _plan(settings)
    with RunLock.acquire(out):
        rows = _start(out, settings, args.overwrite)
        done = {(r["instance"], r["agent_key"]) for r in rows}
        brackets = {r["instance"]: r for r in read_csv(out / "instances.csv")}
        pending = [
            (instance, setup)
            for instance in instances
            for setup in setups
            if (instance.key, setup.key) not in done
        ]
        clock = time.perf_counter()
        for instance, setup, batch in _batches(pending, settings, out / "work", args.jobs):
            rows += batch
            write_csv(out / RUNS_FILE, rows, RUN_COLUMNS)
            print(
                f"{instance.key} {setup.key}: {time.perf_counter() - clock:.0f} s",
                file=sys.stderr,
                flush=True,
            )
        for instance in instances:
            if instance.key not in brackets:
                brackets[instance.key] = _bracket(instance, instances, brackets)
                write_csv(out / "instances.csv", list(brackets.values()), BRACKET_COLUMNS)
        tables = _summaries(out, rows, settings)
    return [f"wrote {out}: {len(rows)} runs, {len(instances)} instances", *tables]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (`analysis.rank.cli.run_command`)."""
    return run_command(build_parser(), argv, run)
