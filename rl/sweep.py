"""``python -m rl.sweep GRID_FILE --out DIR``: train every configuration of a grid.

The grid file (TOML, or JSON with the same structure)::

    [base]            # TrainConfig fields, as in a --config file of rl.train
    env = "cartpole"      # or: preset = "cartpole-teql-released" (env, agent, reading)
    agent = "teql-released"
    episodes = 1000
    seeds = 10

    [grid]            # field -> list of values; the sweep runs the Cartesian product
    "agent_params.alpha0" = [0.005, 0.01]
    seed = [0, 100]

    [[runs]]          # optional: configurations listed one by one, each merged onto [base]
    agent = "tlr"
    "env_options.state_bins" = [8, 8, 15, 15]

Dotted keys (``agent_params.NAME``, ``env_options.NAME``, quoted or as TOML
dotted keys) set one entry of those tables; a table (``agent_params = {...}``,
also as a grid value) sets several, merged key by key onto ``[base]``'s.
The configurations are the grid's Cartesian product (the first key varies
slowest), then the ``[[runs]]``; a file with neither is the
single configuration ``[base]``; at most `MAX_CONFIGURATIONS` (10,000) are
allowed, counted before any is expanded. ``out`` in the file is ignored: ``--out``
decides. Every configuration is built before anything runs (the same
`rl.runs.config` loader as ``rl.train``, and the agent and environment are
constructed, without training); the first bad one stops the sweep with its
key named (exit 2).

Configurations that differ only in ``seed``, ``seeds`` and the agent settings
its agent class can vary per replica (``per_replica``, `rl.agents.replica_settings`)
train as one lockstep batch by default (``--batch``; `sweep_batches` forms and
chunks the batches, `rl.runs.batch.training` trains them); ``--no-batch`` makes every
configuration a task of its own. A batch, and every configuration in none, is
one task of `rl.experiments.executor` (a configuration's seeds are replicas in
lockstep) on a local process pool (default) or Ray (``--backend ray``). Either
way each configuration writes ``DIR/NNN-HASH/`` exactly as ``rl.train`` would, where ``NNN`` is its
position and ``HASH`` the short hash of its effective configuration
(`rl.experiments.executor.config_hash`), and ``DIR/index.csv`` (one row per configuration:
its swept values, directory, status, wall time and error). ``--resume`` runs
only the configurations whose hash has no finished row, and those whose
files are missing or damaged (`rl.runs.verify.verify_run`, one line each on
stderr). Exit codes: 0 all done; 1 some configurations failed (see
``index.csv`` and their ``error.txt``); 2 a bad grid file or a refused output
directory, before anything ran; 130 interrupted. See ``docs/scale-out.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rl.experiments.executor import (
    INDEX_FILE,
    ExecutorError,
    Task,
    TaskResult,
    add_executor_arguments,
    hash_effective,
    require_ray,
    run_tasks,
    sigterm_interrupts,
)
from rl.experiments.workers import cpu_workers
from rl.runs.batch.training import MAX_BATCH_REPLICAS, batch_key, state_layout
from rl.runs.config import (
    ConfigError,
    TrainConfig,
    build_dataclass,
    load_config_file,
    resolve_settings,
)
from rl.runs.rundir import RunDirError, os_error_line
from rl.runs.tensorboard import require_tensorboard
from rl.runs.training import build_run
from rl.validation import REPLICA_OVERHEAD_BYTES, max_replicas, state_bytes
from tensorq.version import add_version_option

SECTIONS = ("base", "grid", "runs")
"""Top-level tables a grid file may hold."""

NESTED = ("agent_params", "env_options")
"""`TrainConfig` fields that dotted keys reach into."""

PRESET = "preset"
"""Key that selects an ``rl.train --preset`` (environment, agent, reading) below the other keys."""

MAX_CONFIGURATIONS = 10_000
"""Most configurations one grid file may describe (the grid's product plus its ``[[runs]]``).

Every configuration is built before anything runs (a few milliseconds each), so
a larger grid would wait minutes before starting, or not fit in memory: split
it into several grid files."""


class SweepConfig(NamedTuple):
    """One configuration of a sweep.

    Attributes
    ----------
    position : int
        0-based position in the sweep (grid product first, then ``[[runs]]``).
    values : dict
        The swept keys (dotted) and their values: what ``index.csv`` shows.
    config : TrainConfig
        The merged configuration (its ``out`` is a placeholder).
    config_hash : str
        Short hash of its effective configuration.
    batch_key : str
        Equal for configurations that can train in one batch
        (`rl.runs.batch.training.batch_key`, with the layout of its agent state).
    replica_bytes : float
        Memory of one replica: its agent state plus
        `rl.validation.REPLICA_OVERHEAD_BYTES`.
    """

    position: int
    values: dict[str, Any]
    config: TrainConfig
    config_hash: str
    batch_key: str = ""
    replica_bytes: float = float(REPLICA_OVERHEAD_BYTES)

    @property
    def name(self) -> str:
        """Run directory name, ``NNN-HASH``."""
        return f"{self.position:03d}-{self.config_hash}"


# ----------------------------------------------------------------------------- the grid file


def _known_fields() -> list[str]:
    return sorted([PRESET, *(f.name for f in dataclasses.fields(TrainConfig) if f.init)])


def train_config(values: Mapping[str, Any]) -> TrainConfig:
    """Build a `TrainConfig` from merged values as ``rl.train`` does: preset <- the values.

    A ``preset`` key names an ``rl.train --preset`` (environment, agent and
    reading together); the other values override it key by key.

    Raises
    ------
    ConfigError
        Naming the first bad key, or an unknown preset.
    """
    values = dict(values)
    name = values.pop(PRESET, None)
    if name is None:
        return build_dataclass(TrainConfig, values, "the training config")
    if not isinstance(name, str):
        raise ConfigError(f"The '{PRESET}' parameter must be a str. Got {name!r} instead.")
    from rl.experiments.presets import preset_config

    return preset_config(name, **values)


def _flatten(table: Any, where: str) -> dict[str, Any]:
    """Return ``table`` with ``agent_params``/``env_options`` tables as dotted keys; check keys."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table of key = value.")
    flat: dict[str, Any] = {}
    for key, value in table.items():
        head, dot, rest = key.partition(".")
        if head not in _known_fields():
            known = ", ".join(_known_fields())
            raise ConfigError(f"Unknown parameter '{key}' in {where}; known parameters: {known}.")
        if dot and (head not in NESTED or not rest):
            raise ConfigError(
                f"The key '{key}' in {where} is not allowed: dotted keys must be "
                "agent_params.NAME or env_options.NAME."
            )
        if not dot and head in NESTED and isinstance(value, Mapping):
            flat.update({f"{head}.{name}": item for name, item in value.items()})
        elif head != "out":  # the sweep's --out decides
            flat[key] = value
    return flat


def _merge(base: Mapping[str, Any], swept: Mapping[str, Any]) -> dict[str, Any]:
    """Merge dotted ``swept`` onto dotted ``base`` and nest the result as `TrainConfig` values."""
    flat = dict(base)
    for key, value in swept.items():  # a swept whole table merges key by key, as in [base]
        if key in NESTED and isinstance(value, Mapping):
            flat.update({f"{key}.{name}": item for name, item in value.items()})
        else:
            flat[key] = value
    values: dict[str, Any] = {k: v for k, v in flat.items() if "." not in k}
    for key, value in flat.items():
        head, dot, rest = key.partition(".")
        if dot:
            table = values.get(head, {})
            if not isinstance(table, Mapping):
                raise ConfigError(f"The '{head}' parameter must be a table of key = value.")
            values[head] = {**table, rest: value}
    return values


def expand_grid(data: Mapping[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Return (swept values, `TrainConfig` values) of every configuration of a grid file.

    Parameters
    ----------
    data : mapping
        The parsed grid file: ``base``, ``grid`` and ``runs``.

    Raises
    ------
    ConfigError
        On an unknown section or key, a grid value that is not a non-empty
        list, a ``runs`` that is not an array of tables, or more than
        `MAX_CONFIGURATIONS` configurations.
    """
    for section in data:
        if section not in SECTIONS:
            raise ConfigError(
                f"Unknown section '{section}' in the grid file; expected [base], [grid] "
                "and [[runs]] (TrainConfig fields go into [base])."
            )
    base = _flatten(data.get("base", {}), "[base]")
    grid = _flatten(data.get("grid", {}), "[grid]")
    for key, options in grid.items():
        if not isinstance(options, list) or not options:
            raise ConfigError(
                f"The [grid] key '{key}' must be a non-empty list of values. "
                f"Got {options!r} instead."
            )
    runs = data.get("runs", [])
    if not isinstance(runs, list):
        raise ConfigError("The 'runs' section must be an array of tables ([[runs]]).")
    sizes = [len(options) for options in grid.values()]
    count = (math.prod(sizes) if grid else 0) + len(runs)
    if count > MAX_CONFIGURATIONS:
        product = " x ".join(map(str, sizes)) if grid else "no grid"
        raise ConfigError(
            f"The grid file describes {count} configurations ({product} + {len(runs)} runs); "
            f"at most {MAX_CONFIGURATIONS} (rl.sweep.MAX_CONFIGURATIONS) run in one sweep: "
            "split it into several grid files."
        )
    swept = (
        [
            dict(zip(grid, combination, strict=True))
            for combination in itertools.product(*grid.values())
        ]
        if grid
        else []
    )
    swept += [_flatten(entry, f"[[runs]] entry {i}") for i, entry in enumerate(runs)]
    if not grid and not runs:
        swept = [{}]
    return [(values, _merge(base, values)) for values in swept]


def _describe(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in values.items()) or "[base]"


def validate(
    expanded: Sequence[tuple[dict[str, Any], dict[str, Any]]],
    out: str | Path,
    progress: Callable[[int], None] | None = None,
) -> list[SweepConfig]:
    """Build every configuration (agent and environment, no training); refuse the first bad one.

    Parameters
    ----------
    expanded : sequence
        The output of `expand_grid`.
    out : path-like
        The sweep directory (a placeholder ``out`` for the configs).
    progress : callable, optional
        Called with the number of configurations built so far after each one.

    Returns
    -------
    list of SweepConfig

    Raises
    ------
    ConfigError
        Naming the configuration (position and swept values) and the key, or
        two configurations that train the same thing.
    """
    configs: list[SweepConfig] = []
    seen: dict[str, int] = {}
    for position, (values, config_values) in enumerate(expanded):
        where = f"Configuration {position} ({_describe(values)})"
        try:
            config = train_config({**config_values, "out": str(out)})
            settings = resolve_settings(config)
            runner, effective = build_run(settings)
            agent = runner.agent
            state = agent.state_dict()
            replica_bytes, layout = state_bytes(state) / config.seeds, state_layout(settings, state)
            runner.close()
        except ConfigError as error:
            raise ConfigError(f"{where}: {error}") from None
        except (ValueError, TypeError, ImportError) as error:
            raise ConfigError(f"{where}: {type(error).__name__}: {error}") from None
        digest = hash_effective(effective)
        if digest in seen:
            raise ConfigError(
                f"{where} trains the same as configuration {seen[digest]}; remove one of them."
            )
        seen[digest] = position
        group = type(agent).batch_group(agent.config)
        key = batch_key(effective, type(agent).per_replica, layout, group)
        if config.keep_best:  # a batch keeps no best states: the configuration trains alone
            key = f"{key} alone {position}"
        replica_bytes += REPLICA_OVERHEAD_BYTES
        configs.append(SweepConfig(position, values, config, digest, key, replica_bytes))
        if progress is not None:
            progress(len(configs))
    return configs


def load_sweep(path: str | Path, out: str | Path, *, progress: bool = False) -> list[SweepConfig]:
    """Read, expand and validate a grid file; see `expand_grid` and `validate`.

    Parameters
    ----------
    path : path-like
        The grid file.
    out : path-like
        The sweep directory.
    progress : bool
        Show a progress bar on stderr while the configurations are built, if
        that takes more than a second; it is removed when done.

    Raises
    ------
    ConfigError
        If the file is missing or does not parse, or a configuration is bad.
    """
    expanded = expand_grid(load_config_file(path))
    from tqdm import tqdm

    with tqdm(
        total=len(expanded), desc="building", unit="config", leave=False, delay=1.0,
        disable=not progress,
    ) as bar:  # fmt: skip
        return validate(expanded, out, lambda done: bar.update(done - bar.n))


def sweep_tasks(configs: Sequence[SweepConfig]) -> list[Task]:
    """Return the `rl.experiments.executor.Task` of every configuration (directory ``NNN-HASH``)."""
    return [Task(c.name, c.config, c.values) for c in configs]


def sweep_batches(
    configs: Sequence[SweepConfig], workers: int, max_batch: int = MAX_BATCH_REPLICAS
) -> list[list[int]]:
    """Return the positions of the configurations that train together, one list per batch.

    Configurations with the same `SweepConfig.batch_key` form a group (in the
    order of their first configuration). A group is chunked, in order and
    never splitting a configuration's seeds, into batches of at most
    ``min(max_batch, max_replicas // workers)`` replicas (`rl.validation.max_replicas`
    at the largest memory per replica of the group, so that ``workers``
    batches training at once fit in memory), and into at least ``workers``
    batches where it has that many configurations, so that every worker has
    one; the replicas are spread evenly over the batches. A batch of one
    configuration is no batch: it is left out (it runs as its own task).

    Parameters
    ----------
    configs : sequence of SweepConfig
    workers : int
        Batches that train at once (the pool's processes).
    max_batch : int
        Most replicas of a batch (`rl.runs.batch.training.MAX_BATCH_REPLICAS`).

    Returns
    -------
    list of list of int
    """
    groups: dict[str, list[SweepConfig]] = {}
    for config in configs:
        groups.setdefault(config.batch_key, []).append(config)
    batches = []
    for group in groups.values():
        fit = max_replicas(max(c.replica_bytes for c in group)) // max(workers, 1)
        cap = max(1, min(max_batch, fit))
        total = sum(c.config.seeds for c in group)
        count = max(-(-total // cap), min(workers, len(group)))
        target = -(-total // count)
        chunk: list[SweepConfig] = []
        for config in group:
            size = sum(c.config.seeds for c in chunk)
            if chunk and (size >= target or size + config.config.seeds > cap):
                batches.append(chunk)
                chunk = []
            chunk.append(config)
        batches.append(chunk)
    return [[c.position for c in chunk] for chunk in batches if len(chunk) > 1]


# ----------------------------------------------------------------------------- the command


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m rl.sweep``."""
    parser = argparse.ArgumentParser(
        prog="python -m rl.sweep",
        description="Train every configuration of a TOML grid file on a process pool or Ray.",
    )
    parser.add_argument("grid_file", metavar="GRID_FILE", help="TOML (or JSON) grid file")
    parser.add_argument("--out", required=True, help="sweep directory (index.csv, run directories)")
    add_executor_arguments(parser)
    parser.add_argument(
        "--resume", action="store_true", help="run only the configurations not finished in --out"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="validate and list the configurations, run nothing"
    )
    parser.add_argument(
        "--batch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="train configurations that differ only in seeds and per-replica agent settings as "
        "one lockstep batch (default); --no-batch: one task per configuration",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--no-plot", action="store_true", help="do not draw learning curves")
    parser.add_argument(
        "--tensorboard",
        metavar="DIR",
        help="also log every run to TensorBoard in DIR/NAME_N (NAME: the run directory's name)",
    )
    return add_version_option(parser)


def _report(results: Sequence[TaskResult], out: Path) -> str:
    done = sum(r.status == "done" for r in results)
    earlier = sum(not r.ran for r in results)
    failed = [r for r in results if r.status == "failed"]
    lines = [f"failed: {r.name}: {r.error}" for r in failed]
    lines.append(
        f"{len(results)} configurations: {done} done ({earlier} earlier), {len(failed)} failed. "
        f"Index: {out / INDEX_FILE}"
    )
    return "\n".join(lines)


def _say_reruns(names: list[str], reruns: dict[str, str]) -> None:
    for name, reason in reruns.items():
        print(f"rerunning {name} (recorded done): {reason}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; return the exit code (0 done, 1 some failed, 2 refused, 130 interrupted)."""
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    try:
        if args.backend == "ray":
            require_ray()
        elif args.address:
            raise ExecutorError("--address needs --backend ray.")
        configs = load_sweep(args.grid_file, out, progress=not args.no_progress)
        if args.tensorboard:
            require_tensorboard()
        batches = sweep_batches(configs, cpu_workers(args.workers)) if args.batch else []
    except (ConfigError, ExecutorError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.dry_run:
        batch_of = {position: i for i, batch in enumerate(batches) for position in batch}
        for config in configs:
            where = f"batch {batch_of[config.position]}  " if config.position in batch_of else ""
            print(f"{config.name}  {where}{_describe(config.values)}")
        return 0
    try:
        with sigterm_interrupts():
            results = run_tasks(
                sweep_tasks(configs),
                out,
                backend=args.backend,
                workers=args.workers,
                address=args.address,
                resume=args.resume,
                on_start=_say_reruns,
                progress=not args.no_progress,
                plot=not args.no_plot,
                tensorboard=args.tensorboard,
                batches=batches,
            )
    except (ConfigError, ExecutorError, RunDirError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # the output directory: a name too long, a read-only disk
        print(f"error: {os_error_line(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            f"\nInterrupted; finished configurations are recorded in {out / INDEX_FILE}. "
            "Continue with: python -m rl.sweep "
            f"{shlex.quote(args.grid_file)} --out {shlex.quote(str(out))} --resume",
            file=sys.stderr,
        )
        return 130
    print(_report(results, out))
    return 1 if any(r.status == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
