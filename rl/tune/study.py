"""The study of ``python -m rl.tune``: trials of S seeds in lockstep on an Optuna SQLite study.

A trial draws the parameters of the search space (`rl.tune.space`), trains its
seeds as B = S replicas in lockstep with the runner of ``python -m rl.train``
(`rl.runs.training.build` and `rl.runs.training.run`) into ``OUT/trials/NNNN/``,
a run directory like any other, and scores the run by `window_iqm`: the
interquartile mean over seeds of each seed's mean of a ``metrics.csv`` column
(the greedy return by default) over the final window of episodes. At every
evaluation point the same score over the window ending there is reported to
Optuna's pruner; a pruned trial stops there (its run directory keeps what it
trained).

The study lives in Optuna's RDB storage on a SQLite file, so that several
worker processes share it and it survives a kill. A trial records a heartbeat
every `HEARTBEAT_SECONDS`; `optimize` fails a running trial whose heartbeat is
older than `GRACE_SECONDS` and whose run directory no live process locks (its
process died: ``kill -9``, a lost machine) and queues its parameters again
(Optuna's ``RetryHeartbeatStaleTrialCallback``), so the interrupted trial is rerun
under a new number and counted once. The study ends when `Search.n_trials`
trials are complete or pruned; failed ones do not count.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rl.problems import EnvFailure
from rl.runs.config import ConfigError, TrainConfig, to_jsonable
from rl.runs.metrics import iqm, read_metrics, window_scores, window_width
from rl.runs.rundir import lock_holder, open_run_file
from rl.runs.training import METRICS_FILE, EpisodeLog, build, run
from rl.tune.space import Param, with_values

COLUMNS = ("greedy_return", "return", "length")
"""``metrics.csv`` columns a study may score."""

DIRECTIONS = ("maximize", "minimize")

PRUNERS = ("median", "halving", "none")
"""Optuna's ``MedianPruner``, ``SuccessiveHalvingPruner``, or no pruning."""

STUDY_NAME = "rl.tune"
"""Name of the study in the storage; its user attribute of that name records the search."""

TRIALS_DIR = "trials"
"""Directory under ``--out`` that holds one run directory per trial, ``NNNN``."""

HEARTBEAT_SECONDS = 5
"""How often a running trial records that its process is alive."""

GRACE_SECONDS = 30
"""A running trial whose heartbeat is older than this (and whose run directory is not
locked) belongs to a dead process; longer than any pause of a loaded machine."""

SQLITE_TIMEOUT_SECONDS = 20.0
"""How long an access to the SQLite file waits for another process's write to finish."""

INSTALL = 'pip install "teql[tune]"'


class TuneError(ValueError):
    """A study cannot be opened, is another search's, or Optuna is missing."""


def require_optuna() -> Any:
    """Return the ``optuna`` module, or raise `TuneError` naming the extra that installs it."""
    try:
        import optuna
    except ImportError:
        raise TuneError(f"rl.tune needs Optuna, which is not installed: {INSTALL}") from None
    return optuna


def quiet_optuna() -> None:
    """Silence Optuna's per-trial log and its warnings about the experimental heartbeat.

    For the command line, which prints a line per trial itself.
    """
    optuna = require_optuna()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


@dataclass(frozen=True)
class Search:
    """What a study searches and how it scores a trial.

    Attributes
    ----------
    base : TrainConfig
        The run settings every trial shares (its ``out`` is a placeholder).
    params : tuple of Param
        The search space.
    n_trials : int
        Complete or pruned trials the study ends with.
    column : str
        The ``metrics.csv`` column scored (`COLUMNS`).
    window : int, optional
        Episodes of the final window (and of the window at each pruning point);
        default the last 10% of the episodes (`rl.runs.metrics.window_width`), as
        ``python -m rl.train``'s summary.
    direction : str
        ``maximize`` or ``minimize``.
    pruner : str
        One of `PRUNERS`.
    sampler_seed : int
        Seed of Optuna's TPE sampler (mixed with the trials already in the study
        and the worker's index, so that a resumed or parallel search draws anew).
    population : int
        Trials trained at once as one batch, their slots refilled
        (`rl.tune.population`); 0 trains one trial after another.
    """

    base: TrainConfig
    params: tuple[Param, ...]
    n_trials: int
    column: str = "greedy_return"
    window: int | None = None
    direction: str = "maximize"
    pruner: str = "median"
    sampler_seed: int = 0
    population: int = 0

    def __post_init__(self) -> None:
        episodes, every = self.base.episodes, self.base.eval_every
        if self.window is None:
            object.__setattr__(self, "window", window_width(episodes))
        checks = (
            (self.n_trials >= 1, f"The 'n_trials' parameter must be >= 1. Got {self.n_trials}."),
            (self.column in COLUMNS, f"The objective column must be one of {', '.join(COLUMNS)}."),
            (self.direction in DIRECTIONS, f"The direction must be one of {DIRECTIONS}."),
            (self.pruner in PRUNERS, f"The pruner must be one of {', '.join(PRUNERS)}."),
            (
                self.population >= 0,
                f"The 'population' parameter must be >= 1 (or 0: off). Got {self.population}.",
            ),
            (
                1 <= self.window <= episodes,
                f"The window must be 1..{episodes} episodes (--episodes). Got {self.window}.",
            ),
        )
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        if self.column == "greedy_return" and (
            every == 0 or (episodes // every) * every <= episodes - self.window
        ):
            raise ConfigError(
                f"The final window of {self.window} episodes holds no greedy evaluation "
                f"(--eval-every {every}); widen --window or evaluate more often."
            )

    @property
    def report_every(self) -> int:
        """Episodes between two pruning points: the evaluations, else the window."""
        return self.base.eval_every or self.window

    def record(self) -> dict[str, Any]:
        """Return what a resumed study must share with this one (JSON-able)."""
        base = to_jsonable(self.base)
        del base["out"]
        return {
            "base": base,
            "params": [p.describe() for p in self.params],
            "column": self.column,
            "window": self.window,
            "direction": self.direction,
        }


def window_iqm(table: dict[str, Any], column: str, first: int, last: int) -> float:
    """IQM over seeds of each seed's mean of ``column`` over episodes ``first..last``.

    Parameters
    ----------
    table : dict
        Columns of ``metrics.csv`` (`rl.runs.metrics.read_metrics`).
    column : str
        One of `COLUMNS`.
    first, last : int
        The window, inclusive.
    """
    return float(iqm(window_scores(table, column, first, last)))


def sqlite_path(url: str) -> Path:
    """Return the file of a ``sqlite:///PATH`` URL, or raise `TuneError`."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or url == prefix or url.endswith(":memory:"):
        raise TuneError(f"The storage must be a SQLite file, sqlite:///PATH. Got {url!r}.")
    return Path(url.removeprefix(prefix))


def open_storage(url: str) -> Any:
    """Open (or create) the RDB storage of ``url`` with heartbeats and retry of dead trials.

    Raises
    ------
    TuneError
        If the file is a symbolic link, is not a SQLite database (damaged), is
        locked by another process for longer than `SQLITE_TIMEOUT_SECONDS`, or
        was written by an incompatible Optuna.
    """
    optuna = require_optuna()
    import sqlalchemy.exc

    path = sqlite_path(url)
    if path.is_symlink():
        raise TuneError(f"Refusing the study file {path}: it is a symbolic link.")
    if path.exists() and not path.is_file():
        raise TuneError(f"The study file {path} is not a regular file.")
    try:
        return optuna.storages.RDBStorage(
            url,
            engine_kwargs={"connect_args": {"timeout": SQLITE_TIMEOUT_SECONDS}},
            heartbeat_interval=HEARTBEAT_SECONDS,
            grace_period=GRACE_SECONDS,
            heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(),
        )
    except (sqlalchemy.exc.SQLAlchemyError, RuntimeError) as error:
        reason = " ".join(str(getattr(error, "orig", None) or error).split())
        hint = "wait for it or stop it" if "locked" in reason else "move it away or use another"
        raise TuneError(f"Cannot open the study file {path}: {reason}; {hint} (--out).") from None


def load_study(storage: Any, search: Search, worker: int = 0) -> Any:
    """Create the study in ``storage``, or load it if it records the same search.

    Raises
    ------
    TuneError
        If the storage holds a study of another search (other environment,
        agent, settings, space or objective).
    """
    optuna = require_optuna()
    pruner = {
        "median": lambda: optuna.pruners.MedianPruner(
            n_startup_trials=5, n_warmup_steps=search.base.episodes // 4
        ),
        "halving": lambda: optuna.pruners.SuccessiveHalvingPruner(
            **({"min_resource": search.report_every} if search.population else {})
        ),
        "none": optuna.pruners.NopPruner,
    }[search.pruner]()
    try:
        trials = storage.get_n_trials(storage.get_study_id_from_name(STUDY_NAME))
    except KeyError:  # a new study
        trials = 0
    seed = np.random.SeedSequence([search.sampler_seed, trials, worker]).generate_state(1)[0]
    study = optuna.create_study(
        storage=storage,
        study_name=STUDY_NAME,
        direction=search.direction,
        sampler=optuna.samplers.TPESampler(seed=int(seed)),
        pruner=pruner,
        load_if_exists=True,
    )
    recorded = study.user_attrs.get(STUDY_NAME)
    if recorded is None:
        study.set_user_attr(STUDY_NAME, search.record())
    elif recorded != search.record():
        now = search.record()
        differs = [k for k in sorted(set(recorded) | set(now)) if recorded.get(k) != now.get(k)]
        if "base" in differs and isinstance(recorded.get("base"), dict):  # name the fields
            base = sorted(set(recorded["base"]) | set(now["base"]))
            fields = [f for f in base if recorded["base"].get(f) != now["base"].get(f)]
            differs = [*fields, *(k for k in differs if k != "base")]
        raise TuneError(
            f"The study in {storage.url} is another search's (it differs in: "
            f"{', '.join(differs)}); give the same options to continue it, or another --out."
        )
    return study


def trial_dir(out: Path, number: int) -> Path:
    """Return the run directory of trial ``number``: ``OUT/trials/NNNN``."""
    return out / TRIALS_DIR / f"{number:04d}"


def _suggest(trial: Any, param: Param) -> Any:
    if param.kind == "categorical":
        return trial.suggest_categorical(param.name, list(param.choices))
    suggest = trial.suggest_int if param.kind == "int" else trial.suggest_float
    if param.step is not None:
        return suggest(param.name, param.low, param.high, step=param.step)
    return suggest(param.name, param.low, param.high, log=param.log)


class Scores:
    """The scored column of the episodes trained so far, as a ``metrics.csv`` table."""

    def __init__(self, seeds: list[int], column: str) -> None:
        self.seeds, self.column = np.asarray(seeds), column
        self.episodes: list[int] = []
        self.values: list[np.ndarray] = []

    def add(self, log: EpisodeLog) -> None:
        """Keep the scored column of one episode's log."""
        field = {"greedy_return": "greedy_returns", "return": "returns", "length": "lengths"}
        self.episodes.append(log.episode)
        self.values.append(np.asarray(getattr(log, field[self.column]), dtype=float))

    def table(self) -> dict[str, np.ndarray]:
        """Return the episodes kept as the columns of a ``metrics.csv`` table."""
        count = len(self.episodes)
        return {
            "seed": np.tile(self.seeds, count),
            "episode": np.repeat(self.episodes, len(self.seeds)),
            self.column: np.concatenate(self.values),
        }


def trial_config(trial: Any, search: Search, run_dir: Path) -> TrainConfig:
    """Draw the trial's values of the search space; return its run's configuration."""
    values = {param.name: _suggest(trial, param) for param in search.params}
    return dataclasses.replace(
        with_values(search.base, list(search.params), values), out=str(run_dir)
    )


def report(trial: Any, search: Search, scores: Scores, episode: int) -> bool:
    """Report the score of the window ending at ``episode`` if it is a pruning point.

    Returns whether the pruner stops the trial there.
    """
    if episode % search.report_every or episode == search.base.episodes:
        return False
    first = max(1, episode - search.window + 1)
    trial.report(window_iqm(scores.table(), search.column, first, episode), episode)
    return bool(trial.should_prune())


def final_score(search: Search, run_dir: Path) -> float:
    """Return a finished trial's score: `window_iqm` of its ``metrics.csv``'s final window."""
    table = read_metrics(run_dir / METRICS_FILE)
    last = search.base.episodes
    return window_iqm(table, search.column, last - search.window + 1, last)


def run_trial(trial: Any, search: Search, run_dir: Path) -> float:
    """Train one trial's seeds in lockstep into ``run_dir``; return its score.

    Raises
    ------
    optuna.TrialPruned
        If the pruner stopped it at an evaluation point.
    """
    optuna = require_optuna()
    config = trial_config(trial, search, run_dir)
    runner, effective = build(config)
    scores, pruned = Scores(runner.seeds, search.column), False

    def progress(log: EpisodeLog) -> bool:
        nonlocal pruned
        scores.add(log)
        pruned = report(trial, search, scores, log.episode)
        return not pruned

    try:
        run(runner, config, effective, progress=progress)
    finally:
        runner.close()
    if pruned:
        raise optuna.TrialPruned()
    return final_score(search, run_dir)


@contextlib.contextmanager
def heartbeat(storage: Any, trial_ids: Callable[[], list[int]]) -> Iterator[None]:
    """Record the heartbeat of the trials ``trial_ids()`` every `HEARTBEAT_SECONDS`."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_SECONDS):
            for trial_id in trial_ids():
                with contextlib.suppress(Exception):  # a busy file: the next beat tries again
                    storage.record_heartbeat(trial_id)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextlib.contextmanager
def _claim_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created beside the study file)."""
    descriptor = open_run_file(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def claim(study: Any, storage: Any, search: Search, out: Path) -> tuple[Any, bool]:
    """Return (a new trial, False), or (None, whether to wait for a dead trial to go stale)."""
    optuna = require_optuna()
    state = optuna.trial.TrialState
    with _claim_lock(sqlite_path(storage.url).with_suffix(".claim")):
        optuna.storages.fail_stale_trials(study)
        trials = study.get_trials(deepcopy=False)
        done = sum(t.state in (state.COMPLETE, state.PRUNED) for t in trials)
        running = [t for t in trials if t.state == state.RUNNING]
        if done + len(running) >= search.n_trials:
            orphans = [t for t in running if lock_holder(trial_dir(out, t.number)) is None]
            return None, done < search.n_trials and bool(orphans)
        with warnings.catch_warnings():  # `optimize` records the heartbeat, not Study.optimize
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
            trial = study.ask()
        storage.record_heartbeat(trial._trial_id)
        return trial, False


def retry(study: Any, trial: Any) -> None:
    """Mark ``trial`` failed and queue its parameters again, as for a dead process's trial."""
    optuna = require_optuna()
    frozen = study.tell(trial, state=optuna.trial.TrialState.FAIL)
    optuna.storages.RetryHeartbeatStaleTrialCallback()(study, frozen)


def optimize(
    study: Any,
    storage: Any,
    search: Search,
    out: Path,
    *,
    timeout: float | None = None,
    on_trial: Callable[[Any, str | None], None] | None = None,
) -> int:
    """Run trials until the study holds `Search.n_trials` complete or pruned ones.

    It also stops after ``timeout``, and when as many trials of this call as
    `Search.n_trials` have failed (an error in training or a non-finite score),
    so that a search whose every trial fails ends.

    Parameters
    ----------
    study : optuna.Study
        From `load_study`.
    storage : optuna.storages.RDBStorage
        The study's storage, from `open_storage`.
    search : Search
    out : path
        The output directory (trial run directories go under ``out/trials``).
    timeout : float, optional
        Start no trial after this many seconds.
    on_trial : callable, optional
        Called with each finished trial (``optuna.trial.FrozenTrial``) and the
        one-line error of a failed one (else None).

    Returns
    -------
    int
        The number of trials of this call that failed.

    Raises
    ------
    KeyboardInterrupt
        After marking the running trial failed and queuing it again.
    """
    optuna = require_optuna()
    deadline = None if timeout is None else time.monotonic() + timeout
    failures = 0
    while failures < search.n_trials and (deadline is None or time.monotonic() < deadline):
        trial, wait = claim(study, storage, search, out)
        if trial is None:
            if not wait:
                return failures
            time.sleep(HEARTBEAT_SECONDS)
            continue
        error, value, state = None, None, optuna.trial.TrialState.COMPLETE
        with heartbeat(storage, [trial._trial_id].copy):
            try:
                value = run_trial(trial, search, trial_dir(out, trial.number))
            except optuna.TrialPruned:
                state = optuna.trial.TrialState.PRUNED
            except KeyboardInterrupt:
                retry(study, trial)
                raise
            except TRIAL_ERRORS as exc:
                error, state = one_line(exc), optuna.trial.TrialState.FAIL
        failures += tell(study, trial, value, state, error, on_trial)
    return failures


TRIAL_ERRORS = (EnvFailure, ValueError, OSError)
"""What fails a trial (`rl.runs.config.ConfigError` and `rl.runs.rundir.RunDirError` too)."""


def one_line(error: BaseException) -> str:
    """Return an error's message on one line."""
    return " ".join(str(error).split())


def tell(
    study: Any,
    trial: Any,
    value: float | None,
    state: Any,
    error: str | None,
    on_trial: Callable[[Any, str | None], None] | None,
) -> bool:
    """Tell the study a trial's end (``error``: why it failed); return whether it failed.

    A trial already failed as stale (queued again by another process) is left as it is.
    """
    optuna = require_optuna()
    if error is not None:
        trial.set_user_attr("error", error)
    try:
        frozen = study.tell(trial, value, state=state)
    except optuna.exceptions.UpdateFinishedTrialError:  # failed as stale: it is queued again
        return False
    if on_trial is not None:
        on_trial(frozen, error)
    return frozen.state == optuna.trial.TrialState.FAIL  # also a non-finite score
