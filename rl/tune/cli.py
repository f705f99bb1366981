"""The command ``python -m rl.tune``: search hyperparameters with Optuna, S seeds per trial.

Example::

    python -m rl.tune --env CartPole-v1 --agent teql --reading stable
        --space space.toml --n-trials 20 --seeds 4 --episodes 100 --out runs/tune

Every trial trains its seeds in lockstep into ``runs/tune/trials/NNNN/`` (as
``python -m rl.train`` would) and is scored by the IQM over seeds of the greedy
return in the final window (`rl.tune.study`). The study is a SQLite file
(``runs/tune/study.db`` unless ``--storage`` says otherwise): run the same
command again to continue it after an interruption or a kill, and start it in
several shells (or with ``--workers N``) to share it. ``--population P`` trains P
trials at a time as one batch and refills the slot of a pruned or finished
trial with a new one (`rl.tune.population`). At the end the command
writes ``trials.csv``, ``best_config.json`` (``python -m rl.train --config`` trains it),
``importance.png`` and ``history.png`` (`rl.tune.results`). Exit codes: 0 done (or
``--timeout`` reached); 1 stopped because as many trials as ``--n-trials`` failed
(their errors are in ``trials.csv``); 2 bad input (the
search space, options, or a study file that is locked, damaged or another
search's), nothing written; 130 interrupted. See ``docs/tune.md``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rl.runs.config import ConfigError, TrainConfig, build_dataclass, parse_assignment
from rl.runs.rundir import RunDirError, has_run_files, make_run_dir
from rl.tune.population import check_population, optimize_population
from rl.tune.space import check_space, read_space
from rl.tune.study import (
    COLUMNS,
    DIRECTIONS,
    PRUNERS,
    TRIALS_DIR,
    Search,
    TuneError,
    load_study,
    open_storage,
    optimize,
    quiet_optuna,
    require_optuna,
    sqlite_path,
)
from tensorq.version import add_version_option

STUDY_FILE = "study.db"
"""The study's SQLite file in ``--out`` when ``--storage`` is not given."""

_RUN_FLAGS = ("env", "agent", "reading", "seeds", "seed", "episodes", "eval_every", "eval_episodes")


def _default(field: str) -> str:
    return f"(default {TrainConfig.__dataclass_fields__[field].default})"


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m rl.tune``."""
    parser = argparse.ArgumentParser(
        prog="python -m rl.tune",
        description="Search hyperparameters with Optuna; a trial trains S seeds in lockstep.",
    )
    parser.add_argument("--env", required=True, help="problem name or Gymnasium id")
    parser.add_argument("--agent", required=True, help="agent name, as rl.train's --agent")
    parser.add_argument("--reading", help="the settings the agent starts from (rl.train)")
    parser.add_argument("--space", required=True, help="TOML search space file (docs/tune.md)")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument(
        "--n-trials", type=int, required=True, help="complete or pruned trials to end with"
    )
    parser.add_argument("--seeds", type=int, help=f"seeds per trial {_default('seeds')}")
    parser.add_argument("--seed", type=int, help=f"first seed {_default('seed')}")
    parser.add_argument("--episodes", type=int, help=f"episodes per trial {_default('episodes')}")
    parser.add_argument(
        "--eval-every",
        type=int,
        help=f"greedy evaluation every k episodes {_default('eval_every')}",
    )
    parser.add_argument(
        "--eval-episodes", type=int, help=f"episodes per evaluation {_default('eval_episodes')}"
    )
    parser.add_argument(
        "--objective",
        choices=COLUMNS,
        default=COLUMNS[0],
        help="metrics.csv column scored (default greedy_return)",
    )
    parser.add_argument(
        "--window", type=int, help="episodes of the final window (default the last 10%%)"
    )
    parser.add_argument(
        "--direction",
        choices=DIRECTIONS,
        default=DIRECTIONS[0],
        help="whether a higher or a lower score is better (default maximize)",
    )
    parser.add_argument(
        "--pruner",
        choices=PRUNERS,
        help="Optuna's median pruner, successive halving, or none "
        "(default median; halving with --population)",
    )
    parser.add_argument(
        "--population",
        type=int,
        default=0,
        help="train this many trials at a time in lockstep, refilling pruned slots "
        "(default 0: one after another)",
    )
    parser.add_argument(
        "--timeout", type=float, help="start no trial after this many seconds (default none)"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="processes sharing the study (default 1)"
    )
    parser.add_argument(
        "--storage", help=f"sqlite:///PATH of the study (default sqlite:///OUT/{STUDY_FILE})"
    )
    parser.add_argument(
        "--sampler-seed", type=int, default=0, help="seed of the TPE sampler (default 0)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fix an agent parameter for every trial (repeatable, as rl.train)",
    )
    parser.add_argument(
        "--env-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fix an option of the problem for every trial (repeatable, as rl.train)",
    )
    return add_version_option(parser)


def search_from_args(args: argparse.Namespace) -> Search:
    """Build the `rl.tune.study.Search` of the command line; check it (nothing is written).

    Raises
    ------
    ConfigError
        On a bad option or search space (unknown parameter, empty range,
        categorical of the wrong type).
    """
    values: dict[str, Any] = {"out": str(args.out)}
    values |= {f: getattr(args, f) for f in _RUN_FLAGS if getattr(args, f) is not None}
    for flag, table in (("set", "agent_params"), ("env_option", "env_options")):
        values[table] = dict(parse_assignment(text) for text in getattr(args, flag))
    base = build_dataclass(TrainConfig, values, "the training config")
    if args.workers < 1:
        raise ConfigError(f"The 'workers' parameter must be >= 1. Got {args.workers}.")
    params = read_space(args.space)
    pruner = args.pruner or ("halving" if args.population else PRUNERS[0])
    search = Search(
        base,
        tuple(params),
        args.n_trials,
        column=args.objective,
        window=args.window,
        direction=args.direction,
        pruner=pruner,
        sampler_seed=args.sampler_seed,
        population=args.population,
    )
    check_space(base, params)
    if search.population:
        check_population(search)
    return search


def _say(trial: Any, error: str | None) -> None:
    values = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in trial.params.items())  # fmt: skip
    value = "" if trial.value is None else f" {trial.value:.4g}"
    wall = "" if trial.duration is None else f" in {trial.duration.total_seconds():.1f} s"
    why = f": {error}" if error else ""
    print(f"trial {trial.number} {trial.state.name.lower()}{value}{wall} ({values}){why}",
          file=sys.stderr, flush=True)  # fmt: skip


def _optimize(search: Search) -> Callable[..., int]:
    """Return how the search runs its trials: one after another, or as a population."""
    return optimize_population if search.population else optimize


def _work(url: str, search: Search, out: Path, worker: int, timeout: float | None) -> None:
    """Run one worker process's share of the study."""
    try:
        quiet_optuna()
        storage = open_storage(url)
        study = load_study(storage, search, worker)
        _optimize(search)(study, storage, search, out, timeout=timeout, on_trial=_say)
    except TuneError as error:
        print(f"error: worker {worker}: {error}", file=sys.stderr)
    except KeyboardInterrupt:
        pass


def _summary(study: Any, out: Path) -> str:
    """Write the results (`rl.tune.results.write_results`) and return the closing lines."""
    from rl.tune.results import BEST_CONFIG_FILE, write_results

    state = require_optuna().trial.TrialState
    states = [t.state for t in study.trials]
    complete, pruned, failed = (states.count(s) for s in (state.COMPLETE, state.PRUNED, state.FAIL))
    written = write_results(study, out)
    lines = [f"not drawn: {name}: {why}" for name, why in written.skipped.items()]
    lines.append(
        f"{complete + pruned} trials complete or pruned ({complete} complete, {pruned} pruned, "
        f"{failed} failed)"
    )
    if complete:
        best = study.best_trial
        config = shlex.quote(str(out / BEST_CONFIG_FILE))
        lines.append(
            f"best trial {best.number}: {best.value:.6g} with {best.params}; "
            f"train it with: python -m rl.train --config {config}"
        )
    lines.append("Wrote " + ", ".join(str(path) for path in written.files))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; return the exit code (0 done, 1 failed, 2 refused, 130 interrupted)."""
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    url = args.storage or f"sqlite:///{out / STUDY_FILE}"
    try:
        quiet_optuna()
        database = sqlite_path(url)
        if out.exists() and not out.is_dir():
            raise ConfigError(f"The 'out' parameter {str(out)!r} is a file, not a directory.")
        if not database.exists() and has_run_files(out / TRIALS_DIR):
            raise ConfigError(
                f"{out / TRIALS_DIR} holds trials but {database} does not exist: they are "
                "another study's; use another --out."
            )
        search = search_from_args(args)
        if not database.exists():  # a new study: its directory first
            make_run_dir(database.parent)
        storage = open_storage(url)
        study = load_study(storage, search)
        make_run_dir(out)
    except (ConfigError, TuneError, RunDirError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    context = multiprocessing.get_context("spawn")
    helpers = [
        context.Process(target=_work, args=(url, search, out, worker, args.timeout))
        for worker in range(1, args.workers)
    ]
    import sqlalchemy.exc

    try:
        for helper in helpers:
            helper.start()
        failures = _optimize(search)(
            study, storage, search, out, timeout=args.timeout, on_trial=_say
        )
        for helper in helpers:
            helper.join()
    except KeyboardInterrupt:
        for helper in helpers:
            helper.join()
        print(
            "\nInterrupted; the finished trials are kept and the running ones are queued again. "
            "Continue with the same command.",
            file=sys.stderr,
        )
        return 130
    except sqlalchemy.exc.OperationalError as error:  # the file locked for too long, disk full
        reason = " ".join(str(error.orig).split())
        print(f"error: Cannot use the study file {sqlite_path(url)}: {reason}", file=sys.stderr)
        return 1
    print(_summary(study, out))
    return int(failures >= search.n_trials)
