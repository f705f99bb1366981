"""``python -m rl.train``: train an agent on a problem with B seeds in lockstep.

Example::

    python -m rl.train --env cartpole --agent teql --seeds 8 --episodes 2000 --out runs/teql

writes ``metrics.csv`` (one row per seed and episode), ``config.json`` (rerun
with ``--config runs/teql/config.json``), ``checkpoint.npz`` and
``learning_curve.png`` into ``--out``, and prints a summary table. Ctrl-C
finishes the current episode, writes a checkpoint and exits with code 130;
``--resume runs/teql`` continues. Bad configuration exits with code 2 and a
message naming the key, as does a refused checkpoint or a run directory that another
run is using or that cannot be written. ``--resume`` of a run on an environment
``package.module:Env-v0`` needs ``--env package.module:Env-v0`` (the recorded id,
named again) or ``--trust-env-module``: the run directory alone never makes it
import a module. See ``docs/training.md``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rl.agents.readings import AGENT_DEFAULTS, DEFAULT_READING, READINGS, not_learning
from rl.experiments.tuned_presets import TUNED, override, tuned_preset
from rl.problems import EnvFailure
from rl.problems.bundled import describe_simulator
from rl.problems.from_gymnasium import EnvModuleRefused
from rl.runs.checkpoint import CheckpointError
from rl.runs.config import (
    ConfigError,
    TrainConfig,
    build_dataclass,
    load_config_file,
    parse_assignment,
    problem_name,
    recorded_run_config,
    resolve_settings,
)
from rl.runs.rundir import RunDirError, check_run_files
from rl.runs.tensorboard import tensorboard_dir
from rl.runs.training import (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    FIGURE_FILE,
    METRICS_FILE,
    EpisodeLog,
    RunResult,
    build_run,
    run,
)
from tensorq.version import add_version_option

_FLAGS = {  # command-line flag (argparse dest) -> TrainConfig field
    "env": "env",
    "agent": "agent",
    "reading": "reading",
    "out": "out",
    "seeds": "seeds",
    "seed": "seed",
    "episodes": "episodes",
    "eval_every": "eval_every",
    "eval_episodes": "eval_episodes",
    "checkpoint_every": "checkpoint_every",
    "keep_best": "keep_best",
    "backend": "backend",
    "device": "device",
}


def _default(flag: str) -> str:
    """Return ``"(default X)"`` for a flag of `_FLAGS`, X from `TrainConfig` (defined once)."""
    return f"(default {TrainConfig.__dataclass_fields__[_FLAGS[flag]].default})"


def _readings_help() -> str:
    """Return the help of ``--reading``: the readings of `rl.agents.readings.READINGS`."""
    names = []
    for name in dict.fromkeys(n for readings in READINGS.values() for n in readings):
        owners = [agent for agent, readings in READINGS.items() if name in readings]
        only = "" if len(owners) == len(READINGS) else f" ({', '.join(owners)} only)"
        names.append(f"{name}{only}")
    defaults = ", ".join(f"{agent} {name}" for agent, name in AGENT_DEFAULTS.items())
    return (
        f"which settings the agent starts from: {', '.join(names)} (default: {defaults}, "
        f"every other agent {DEFAULT_READING}); tlr on a problem without a paper setting "
        "takes tabular Q-learning's gamma and epsilon schedule (rl.agents.readings; "
        "--list-presets shows them per environment)"
    )


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m rl.train``."""
    parser = argparse.ArgumentParser(
        prog="python -m rl.train",
        description="Train an agent on a factored problem with several seeds in lockstep.",
    )
    parser.add_argument(
        "--env",
        help="cartpole, pendulum, highway, inventory, lowrank or a "
        "Gymnasium id such as rl/ContinuousCartPole-v0",
    )
    parser.add_argument(
        "--agent", help="teql, tlr, lora-vi, tabular, dqn, sac, random (teql-released: an alias)"
    )
    parser.add_argument("--reading", help=_readings_help())
    parser.add_argument(
        "--preset",
        metavar="NAME",
        help="environment, agent and reading together, e.g. cartpole-teql-released; or "
        "tuned, with --env and --agent: the searched settings of rl/presets/tuned/ENV.toml "
        "(grid, rank, steps, exploration, discount, episodes); other flags and the config "
        "file override it",
    )
    parser.add_argument(
        "--list-presets", action="store_true", help="list the presets, one a line, and exit"
    )
    parser.add_argument("--seeds", type=int, help=f"number of replicas B {_default('seeds')}")
    parser.add_argument(
        "--seed", type=int, help=f"first seed; replica i uses seed + i {_default('seed')}"
    )
    parser.add_argument(
        "--episodes", type=int, help=f"training episodes per replica {_default('episodes')}"
    )
    parser.add_argument(
        "--eval-every",
        type=int,
        help=f"greedy evaluation after every k-th episode, 0 disables {_default('eval_every')}",
    )
    parser.add_argument(
        "--eval-episodes",
        type=int,
        help=f"greedy episodes per evaluation {_default('eval_episodes')}",
    )
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        help=f"checkpoint every n episodes {_default('checkpoint_every')}",
    )
    parser.add_argument(
        "--keep-best",
        action="store_true",
        default=None,
        help="also keep each seed's state after its best evaluation in the checkpoint "
        "(python -m rl.evaluate RUN_DIR --best plays it)",
    )
    parser.add_argument(
        "--backend",
        metavar="{numpy,pytorch,jax}",
        help="array backend of teql and tlr: factors, visit counts and updates run there "
        "(pytorch and jax on the array engine; default numpy)",
    )
    parser.add_argument(
        "--device",
        metavar="{cpu,cuda,cuda:N}",
        help="device of the agent (teql and tlr: with --backend pytorch or jax; default cpu)",
    )
    parser.add_argument(
        "--engine",
        help="who runs the agent's step, as --set engine=...: for teql and tlr auto, compiled, "
        "reference, array or scan (JAX; CartPole and Pendulum as whole compiled chunks of "
        "steps), for dqn and sac auto, compiled or stacked (default auto)",
    )
    parser.add_argument(
        "--out", help="run directory (required unless --resume or --config sets it)"
    )
    parser.add_argument("--config", help="TOML or JSON file of TrainConfig fields")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override an agent parameter (repeatable); VALUE is read as JSON",
    )
    parser.add_argument(
        "--env-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override an option of the problem factory (repeatable)",
    )
    parser.add_argument(
        "--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR (--episodes may extend it)"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="start afresh in a non-empty run directory"
    )
    parser.add_argument(
        "--trust-env-module",
        action="store_true",
        help="with --resume: import the module of the run's 'package.module:Env-v0' id "
        "without naming it again with --env",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the full traceback of an error instead of its one-line message",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--no-plot", action="store_true", help="do not draw the learning curve")
    parser.add_argument(
        "--tensorboard",
        metavar="DIR",
        help="also log to TensorBoard in DIR/NAME_N/seed_S (NAME: the run directory's name; "
        "a resumed run continues the latest NAME_N); needs the tensorboard extra",
    )
    return add_version_option(parser)


def _placement_flags(args: argparse.Namespace, values: dict, recorded: dict) -> None:
    """Let ``--backend`` and ``--device`` replace the config file's agent parameter.

    On ``--resume`` (``recorded``: the run's top-level backend and device) a flag may
    only name the run's own placement again.

    Raises
    ------
    ConfigError
        If a flag on ``--resume`` differs from the run's placement.
    """
    for key in ("backend", "device"):
        flag, params = getattr(args, key), values.get("agent_params")
        if flag is None or not isinstance(params, dict):
            continue
        if args.resume:
            if params.get(key, flag) != flag:
                raise ConfigError(
                    f"The '{key}' parameter cannot change on resume: the run in {args.resume} "
                    f"records {params[key]!r}; omit --{key}."
                )
            values[key] = recorded[key]
        else:
            values["agent_params"] = {name: v for name, v in params.items() if name != key}


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """Merge `TrainConfig` defaults <- ``--preset`` <- config file (or the resumed run's) <- flags.

    Raises
    ------
    ConfigError
        On unknown keys, wrong types or impossible values.
    """
    values: dict[str, Any] = {}
    placement: dict[str, Any] = {}  # a resumed run's backend and device
    if args.resume:
        if args.config or args.preset:
            raise ConfigError("Use either --resume or --config/--preset, not both.")
        check_run_files(args.resume, [CONFIG_FILE])  # never read through a link
        values = recorded_run_config(load_config_file(Path(args.resume) / CONFIG_FILE))
        values["out"] = args.resume
        recorded = values.get("env")
        placement = {key: values.get(key) for key in ("backend", "device")}
    else:
        if args.preset == TUNED:
            values = tuned_preset(args.env, args.agent)
        elif args.preset:
            from rl.experiments import presets

            try:
                chosen = presets.preset(args.preset)
            except ValueError as error:
                raise ConfigError(str(error)) from None
            values = {"env": chosen.env, "agent": chosen.agent, "reading": chosen.reading}
        if args.config:
            values = override(values, load_config_file(args.config))
    for dest, field in _FLAGS.items():
        if getattr(args, dest) is not None:
            values[field] = getattr(args, dest)
    _placement_flags(args, values, placement)
    if args.resume:
        if args.env is not None and args.env != recorded:
            raise ConfigError(
                f"The 'env' parameter {args.env!r} differs from the environment of the run in "
                f"{args.resume} ({recorded!r})."
            )
        if args.out is not None and Path(args.out) != Path(args.resume):
            raise ConfigError("The 'out' parameter cannot differ from --resume RUN_DIR.")
        values["out"] = args.resume
    for key, target in (("set", "agent_params"), ("env_option", "env_options")):
        pairs = dict(parse_assignment(text) for text in getattr(args, key))
        if key == "set" and args.engine is not None:  # --engine X is --set engine="X"
            pairs = {"engine": args.engine, **pairs}
        if pairs:
            current = values.get(target, {})
            if not isinstance(current, dict):
                raise ConfigError(f"The '{target}' parameter must be a table of key = value.")
            values[target] = {**current, **pairs}
    return build_dataclass(TrainConfig, values, "the training config")


def progress_bar(config: TrainConfig, enabled: bool) -> Any:
    """Return (close, update); the bar appears with the first episode, so a refusal is one line."""
    from tqdm import tqdm

    state: dict[str, Any] = {"greedy": float("nan"), "bar": None}

    def update(log: EpisodeLog) -> None:
        if state["bar"] is None:
            state["bar"] = tqdm(
                total=config.episodes,
                unit="ep",
                disable=not enabled,
                dynamic_ncols=True,
                desc=f"{config.agent} on {config.env}",
            )
        bar = state["bar"]
        if not np.all(np.isnan(log.greedy_returns)):
            state["greedy"] = float(np.nanmean(log.greedy_returns))
        bar.update(log.episode - bar.n)
        bar.set_postfix(
            ret=f"{log.returns.mean():.2f}", greedy=f"{state['greedy']:.2f}", refresh=False
        )

    def close() -> None:
        if state["bar"] is not None:
            state["bar"].close()

    return close, update


def _format_summary(result: RunResult, config: TrainConfig) -> str:
    from rl.runs.metrics import milestone_summaries, read_metrics

    table = read_metrics(result.run_dir / METRICS_FILE)
    rows = [
        (
            "episodes",
            "train mean ± std",
            "train IQM [95% CI]",
            "greedy episodes",
            "greedy mean ± std",
            "greedy IQM [95% CI]",
        )
    ]
    for row in milestone_summaries(table, result.episodes_done):
        cells = [f"{row.first}-{row.last}"]
        for first, s in ((None, row.training), (row.greedy_first, row.greedy)):
            if first is not None:
                cells.append(f"{first}-{row.last}")
            cells.append(f"{s.mean:.2f} ± {s.std:.2f}")
            cells.append(f"{s.iqm:.2f} [{s.iqm_low:.2f}, {s.iqm_high:.2f}]")
        rows.append(tuple(cells))
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    per_thousand = 1000 * result.wall_time / max(result.episodes_done, 1)
    lines.append(
        f"{config.seeds} seeds ({config.seed}..{config.seed + config.seeds - 1}), "
        f"{result.episodes_done} episodes, wall time {result.wall_time:.1f} s "
        f"({per_thousand:.1f} s per 1000 episodes), agent n_params {result.n_params} per replica"
    )
    return "\n".join(lines)


def _resume_command(run_dir: str) -> str:
    """Return ``python -m rl.train --resume RUN_DIR``, quoted for a POSIX shell."""
    return f"python -m rl.train --resume {shlex.quote(run_dir)}"


def _plot(run_dir: Path) -> None:
    from rl.runs.plot import plot_runs

    plot_runs([run_dir], run_dir / FIGURE_FILE)


def _env_failure(error: EnvFailure, debug: bool) -> int:
    """Print a failure of the user's environment in one line (or re-raise it); return 1."""
    if debug:
        raise error
    print(f"error: {error} (rerun with --debug for the traceback)", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; return the exit code.

    0 done; 1 a failure during training (a non-finite reward, a failed write,
    an exception or a wrongly shaped observation of the environment: one line
    naming the environment, replica and seed; ``--debug`` shows the traceback);
    2 bad configuration, a refused checkpoint, or a run directory in use or not
    writable; 130 interrupted.
    """
    args = build_parser().parse_args(argv)
    if args.list_presets:
        from rl.experiments import presets

        print("\n".join(presets.describe(entry) for entry in presets.presets().values()))
        return 0
    try:
        trusted = not args.resume or args.env is not None or args.trust_env_module
        settings = resolve_settings(config_from_args(args), import_env_module=trusted)
        runner, effective = build_run(settings)
        config = settings.config
    except EnvModuleRefused as error:
        if args.debug:
            raise
        print(f"error: {error.cli_message()}", file=sys.stderr)
        return 2
    except (ConfigError, RunDirError) as error:
        if args.debug:
            raise
        print(f"error: {error}", file=sys.stderr)
        return 2
    except EnvFailure as error:  # while estimating the reward bound
        return _env_failure(error, args.debug)
    except KeyboardInterrupt:
        print("\nInterrupted before training started; nothing written.", file=sys.stderr)
        return 130
    if runner.problem.reward_bound_source in ("estimated", "reward_range"):
        print(runner.problem.describe_reward_bound(), file=sys.stderr)
    simulator = describe_simulator(runner.problem)
    if simulator is not None:
        print(simulator, file=sys.stderr)
    note = not_learning(config.agent, str(config.reading), problem_name(config.env))
    if note is not None and not args.resume:  # said when the reading is chosen
        print(note, file=sys.stderr)
    close_bar, update = progress_bar(config, not args.no_progress)
    try:
        result = run(
            runner,
            config,
            effective,
            resume=bool(args.resume),
            overwrite=args.overwrite,
            progress=update,
            handle_signals=True,
            tensorboard=tensorboard_dir(
                args.tensorboard, Path(config.out).name, resume=bool(args.resume)
            ),
        )
    except (ConfigError, CheckpointError, RunDirError, FileNotFoundError) as error:
        if args.debug:
            raise
        print(f"error: {error}", file=sys.stderr)
        return 2
    except EnvFailure as error:
        return _env_failure(error, args.debug)
    except (ValueError, OSError) as error:  # a non-finite reward, a damaged metrics file, disk full
        if args.debug:
            raise
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if (Path(config.out) / CHECKPOINT_FILE).is_file():
            print(
                f"\nAborted. The last periodic checkpoint in {config.out} remains valid; "
                f"continue with: {_resume_command(config.out)}",
                file=sys.stderr,
            )
        else:
            print(
                f"\nAborted before the first checkpoint of {config.out} was written, so it "
                "cannot be resumed; start afresh with --overwrite.",
                file=sys.stderr,
            )
        return 130
    finally:
        close_bar()
        runner.close()
    try:
        if not args.no_plot:
            _plot(result.run_dir)
        summary = None if result.interrupted else _format_summary(result, config)
    except (ValueError, OSError) as error:  # a metrics.csv damaged by someone else
        print(
            f"error: Training ended, but its metrics cannot be read back for the plot and "
            f"summary: {' '.join(str(error).split())}",
            file=sys.stderr,
        )
        return 1
    if summary is None:
        written = "checkpoint written"
        if result.dropped:
            written = "the episodes in progress were dropped, to be replayed on resume"
        print(
            f"Interrupted after episode {result.episodes_done}; {written}. "
            f"Continue with: {_resume_command(config.out)}",
            file=sys.stderr,
        )
        return 130
    print(summary)
    written = [METRICS_FILE, CONFIG_FILE, *([] if args.no_plot else [FIGURE_FILE]), CHECKPOINT_FILE]
    print(f"Wrote {result.run_dir}/{{{', '.join(written)}}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
