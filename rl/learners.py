"""Learner objects shaped like stable-baselines3's: ``learn``, ``predict``, ``save``, ``load``.

A learner is a training run you hold in your hand. It is built from the same
`rl.runs.config.TrainConfig` as ``python -m rl.train`` and trains through the same
runner (`rl.runs.training.build`, `rl.runs.training.run`) into a run directory, so that its
metrics and checkpoints are bitwise those of the command with the same
settings, and a saved model *is* a run directory (``python -m rl.evaluate``
and `rl.load_run` read it). Example::

    import rl

    model = rl.TEQL("CartPole-v1", reading="stable", seeds=4,
                    env_options={"state_bins": 6, "low": [-2.4, -3, -0.21, -3],
                                 "high": [2.4, 3, 0.21, 3]})
    model.learn(total_timesteps=20_000)   # or learn(episodes=300); again to continue
    action, _ = model.predict(observation, deterministic=True)
    model.evaluate(episodes=20)           # greedy mean and std per replica
    model.save("runs/cp")
    model = rl.TEQL.load("runs/cp")

`learn`, `predict` and `get_env` take stable-baselines3's arguments, so that
its tools (``stable_baselines3.common.evaluation.evaluate_policy``) work on a
learner. `learn` continues where the last one stopped, exactly as ``python -m
rl.train --resume`` does: two calls of 100 episodes give the run of one call
of 200, bitwise. Without ``out`` a learner trains in a temporary directory,
removed when it is garbage collected; `save` copies the run there. See
``docs/tutorials/from-stable-baselines3.md``.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import os
import re
import shutil
import sys
import tempfile
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import gymnasium
import numpy as np
from numpy.typing import NDArray

from rl.callbacks import Callback, CallbackList, as_callback, asks_to_stop
from rl.problems.make import EnvSource
from rl.runs.checkpoint import CheckpointError
from rl.runs.config import ConfigError, TrainConfig, agent_spec, build_dataclass
from rl.runs.copy_run import copy_run
from rl.runs.load import LoadedRun, RunLoadError, load_resumable, reading_lock
from rl.runs.metrics import read_metrics
from rl.runs.rundir import (
    RunDirError,
    atomic_copy,
    atomic_write_bytes,
    check_run_files,
    has_run_files,
    open_run_file,
)
from rl.runs.training import (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    METRICS_FILE,
    EpisodeLog,
    config_text,
    has_checkpoint,
)
from rl.seeding import spawn_replicas

__all__ = [
    "DQN",
    "SAC",
    "TEQL",
    "TLR",
    "Callback",
    "CallbackList",
    "Learner",
    "LearnerEvaluation",
    "LoRaVI",
    "Tabular",
]


class LearnerEvaluation(NamedTuple):
    """Greedy episodes of every replica (`Learner.evaluate`).

    Attributes
    ----------
    returns : ndarray of float64, shape (B, episodes)
        Undiscounted return of every episode of every replica.
    mean, std : ndarray of float64, shape (B,)
        Mean and standard deviation of each replica's returns.
    """

    returns: NDArray[np.float64]
    mean: NDArray[np.float64]
    std: NDArray[np.float64]


class Learner:
    """One agent with B replicas (seeds) on one problem, trained through `rl.runs.training`.

    Subclasses fix the agent (`TEQL`, `TLR`, `LoRaVI`, `DQN`, `SAC`, `Tabular`).

    Parameters
    ----------
    env : str, gymnasium.Env or callable
        A bundled problem (``"cartpole"``) or a Gymnasium id (``"CartPole-v1"``,
        ``"package.module:Env-v0"``), as ``--env``; or an environment instance
        (deep-copied for each replica and for `get_env`, `evaluate` and
        `predict`); or a factory returning a new environment on each call
        (``lambda: gym.make("CartPole-v1")``). An instance or factory is
        registered with Gymnasium under a new id, ``learnerN/NAME``, that the
        run's ``config.json`` records: only this process can make it again,
        so ``python -m rl.evaluate`` elsewhere needs a run trained on an id.
    reading : str, optional
        Which settings the agent starts from (`rl.agents.readings.READINGS`), as ``--reading``.
    seeds : int, optional
        Replicas B; replica i has seed ``seed + i``.
    seed : int, optional
        First seed.
    env_options : mapping, optional
        Options of `rl.problems.make_problem` (``state_bins``, ``low``, ``high``,
        ``reward_bound``, ``max_episode_steps``, ...), as ``--env-option``.
    agent_params : mapping, optional
        Overrides of the agent's config fields, as ``--set``.
    eval_every, eval_episodes, checkpoint_every : int, optional
        As the `TrainConfig` fields of those names (their defaults when omitted).
    keep_best : bool, optional
        As the `TrainConfig` field: keep each replica's state after its best
        evaluation in the checkpoint; ``rl.load_run(model.run_dir, best=True)``
        loads it (`rl.runs.training.BestStates`).
    out : path-like, optional
        The run directory to train in; default a temporary one (see `save`).
    overwrite : bool, default False
        Start afresh in a non-empty ``out`` (as ``--overwrite``).
    verbose : int, default 1
        1 prints, at construction, how an estimated reward bound was obtained
        (`rl.problems.Problem.describe_reward_bound`); 0 prints nothing.
    tensorboard_log : path-like, optional
        Also log training to TensorBoard, as stable-baselines3 does: the first
        `learn` writes into ``tensorboard_log/{tb_log_name}_{n}`` (the next free
        n), later ones continue there (`rl.runs.tensorboard`).
    preset : {"tuned"}, optional
        Start from the tuned settings of this agent on ``env``, a Gymnasium id with a
        file in ``rl/presets/tuned/`` (`rl.experiments.tuned_presets`), as
        ``--preset tuned``: its reading, grid and agent parameters, which the
        arguments above override key by key (``learn(episodes=...)`` sets the budget;
        the file's ``episodes`` is the one it was tuned at).

    Raises
    ------
    rl.runs.config.ConfigError
        For an unknown environment, agent parameter or option, an instance
        that cannot be copied, or a factory that returns the same environment
        twice for several replicas (one line naming it).

    Attributes
    ----------
    config : TrainConfig
        The run's effective configuration (full agent config and problem
        options); after a `learn`, ``episodes`` is the episodes trained.
    run_dir : pathlib.Path
        Where the run is written.
    num_timesteps : int
        stable-baselines3's counter: environment steps trained per replica
        (the fewest of any replica) since the last ``learn(...,
        reset_num_timesteps=True)``.
    """

    agent: ClassVar[str] = ""
    """Registered agent name of the learner (`rl.agents.registry.AGENTS`)."""

    tensorboard_log: str | os.PathLike | None = None
    """Where `learn` logs to TensorBoard (None: nowhere); may be set after `load`."""

    _tensorboard_dir: Path | None = None
    """The run's TensorBoard directory, chosen by the first `learn` that logs."""

    def __init__(
        self,
        env: EnvSource,
        *,
        reading: str | None = None,
        seeds: int | None = None,
        seed: int | None = None,
        env_options: Mapping[str, Any] | None = None,
        agent_params: Mapping[str, Any] | None = None,
        eval_every: int | None = None,
        eval_episodes: int | None = None,
        checkpoint_every: int | None = None,
        keep_best: bool | None = None,
        out: str | os.PathLike | None = None,
        overwrite: bool = False,
        verbose: int = 1,
        tensorboard_log: str | os.PathLike | None = None,
        preset: str | None = None,
    ) -> None:
        from rl.runs.training import build

        if not self.agent:
            raise TypeError(
                "Learner is the base class; use one of rl.TEQL, rl.TLR, rl.LoRaVI, rl.DQN, "
                "rl.SAC, rl.Tabular."
            )
        given = {
            "reading": reading,
            "seeds": seeds,
            "seed": seed,
            "eval_every": eval_every,
            "eval_episodes": eval_episodes,
            "checkpoint_every": checkpoint_every,
            "keep_best": keep_best,
            "env_options": None if env_options is None else dict(env_options),
            "agent_params": None if agent_params is None else dict(agent_params),
        }
        values = {key: _plain(value) for key, value in given.items() if value is not None}
        if preset is not None:
            values = _preset_values(preset, env, self.agent, values)
        run_dir = self._own_run_dir(out)
        values.update(env=_env_id(env, seeds or 1), agent=self.agent, out=str(run_dir), episodes=1)
        config = build_dataclass(TrainConfig, values, "the learner's config")
        try:
            runner, effective = build(config)
        except ConfigError as error:
            raise ConfigError(_naming_defaults(str(error), self.agent, agent_params)) from None
        runner.close()  # learn builds its own, as each python -m rl.train does
        self._effective = effective
        self._overwrite = overwrite
        self._started = False  # whether run_dir holds this learner's run (learn resumes it)
        self._learning = False  # whether a learn is running (a callback is calling back)
        self.tensorboard_log = tensorboard_log
        full = build_dataclass(TrainConfig, effective, "the learner's config")
        self._model = LoadedRun(run_dir, full, runner.problem, runner.agent, 0)
        self._reset_counters()
        if verbose and runner.problem.reward_bound_source in ("estimated", "reward_range"):
            print(runner.problem.describe_reward_bound(), file=sys.stderr)

    def _own_run_dir(self, out: str | os.PathLike | None) -> Path:
        """Return ``out``, or a new temporary directory removed with this learner."""
        self._temporary = out is None
        if out is not None:
            if not os.fspath(out):
                raise ValueError("The 'out' parameter is empty; name a run directory, or omit it.")
            return Path(out)
        run_dir = Path(tempfile.mkdtemp(prefix=f"rl-{self.agent}-"))
        weakref.finalize(self, _remove_own_directory, run_dir, os.getpid())
        return run_dir

    def _refuse_copy(self, *args: Any) -> Any:
        raise TypeError(
            f"A {type(self).__name__} learner cannot be copied or pickled (its compiled state "
            f"lives outside Python): use save(path) to keep it and rl.{type(self).__name__}"
            ".load(path) to get a copy back."
        )

    __reduce_ex__ = __copy__ = __deepcopy__ = _refuse_copy

    # ----------------------------------------------------------------- state

    @property
    def config(self) -> TrainConfig:
        """The run's configuration (see the class's Attributes)."""
        return self._model.config

    @property
    def run_dir(self) -> Path:
        """The run directory the learner trains in."""
        return self._model.run_dir

    @property
    def episodes_done(self) -> int:
        """Training episodes every replica has completed."""
        return self._model.episode

    @property
    def replicas(self) -> int:
        """Number of replicas B (one per seed)."""
        return self._model.replicas

    @property
    def problem(self) -> Any:
        """The `rl.problems.Problem`: environment and discretization."""
        return self._model.problem

    @property
    def policy(self) -> Any:
        """The batched agent (`rl.agents.base.Agent`) with every replica."""
        return self._model.agent

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.config.env!r}, reading={self.config.reading!r}, "
            f"seeds={self.replicas}, episodes_done={self.episodes_done})"
        )

    # ----------------------------------------------------------------- training

    def learn(
        self,
        total_timesteps: int | None = None,
        *,
        episodes: int | None = None,
        callback: Callback | Callable[..., Any] | Sequence[Any] | None = None,
        progress_bar: bool = False,
        reset_num_timesteps: bool = True,
        tb_log_name: str | None = None,
    ) -> Learner:
        """Train every replica ``total_timesteps`` more steps or ``episodes`` more episodes.

        The first call starts the run (``python -m rl.train``), later calls
        resume it (``python -m rl.train --resume``): ``learn(episodes=a);
        learn(episodes=b)`` is ``learn(episodes=a + b)``, bitwise.

        A budget in steps, stable-baselines3's, is met in whole episodes, which
        every replica plays in the same number: training stops after the first
        episode at which every replica has played at least ``total_timesteps``
        environment steps in this call, so each replica trains that many or
        more: a replica whose episodes last longer plays more steps in the same
        episodes (`steps_done` says how many). ``learn(a); learn(b)`` is then
        ``learn(a + b)`` bitwise where every replica ends ``learn(a)`` on
        exactly ``a`` steps (episodes of a fixed length); otherwise ``learn(b)``
        counts its ``b`` steps from where each replica stood, and the two calls
        may train an episode or more beyond ``learn(a + b)``, never less.

        Parameters
        ----------
        total_timesteps : int, optional
            Environment steps per replica (>= 1); exactly one of this and ``episodes``.
        episodes : int, optional
            Training episodes per replica (>= 1).
        callback : Callback, callable or list of those, optional
            Told of the start, every episode and the end (`rl.callbacks`); an
            ``on_episode_end`` that returns False stops training after the
            episodes in progress.
        progress_bar : bool, default False
            Show a tqdm bar, of episodes or of steps (the fewest of any replica).
        reset_num_timesteps : bool, default True
            Count `num_timesteps` from 0 in this call, as stable-baselines3 does
            (training continues either way); False counts on.
        tb_log_name : str, optional
            With ``tensorboard_log``: the name of the run's log directory
            ``{tb_log_name}_{n}`` (stable-baselines3's; default the learner's
            class name, ``"TEQL"``), taken by the first `learn` that logs.

        Returns
        -------
        Learner
            ``self``, as stable-baselines3's ``learn`` returns the model.

        Raises
        ------
        ValueError
            For no budget, two budgets or one that is not an int >= 1; if an
            agent diverges or the environment returns a non-finite value (the
            learner then holds its last checkpoint).
        rl.runs.config.ConfigError, rl.runs.rundir.RunDirError
            For a run directory that cannot be used, or a call from a callback
            of a running ``learn``.
        """
        from rl.train import progress_bar as make_progress_bar
        from rl.validation import check_int

        if (total_timesteps is None) == (episodes is None):
            raise ValueError(
                "learn() takes one budget: total_timesteps (environment steps per replica) or "
                f"episodes. Got total_timesteps={total_timesteps!r}, episodes={episodes!r}."
            )
        if episodes is not None:
            episodes = check_int("episodes", episodes, 1)
        else:
            total_timesteps = check_int("total_timesteps", total_timesteps, 1)
        self._refuse_inside_learn("learn")
        chosen = as_callback(callback)
        self._tb_log_name = type(self).__name__ if tb_log_name is None else str(tb_log_name)
        if reset_num_timesteps:
            self._origin = self._steps.copy()
        start = self._steps.copy()
        if episodes is not None:
            target = dataclasses.replace(self.config, episodes=self.episodes_done + episodes)
            close_bar, update = make_progress_bar(target, progress_bar)
        else:
            close_bar, update = self._steps_bar(total_timesteps, start, progress_bar)

        def progress(log: EpisodeLog) -> bool:
            self._steps += log.lengths
            update(log)
            return not asks_to_stop(chosen.on_episode_end(self, log))

        try:
            self._learning = True
            chosen.on_training_start(self)
            if episodes is not None:
                self._train_to(self.episodes_done + episodes, progress)
            else:
                cap = self._episode_cap()
                while (short := total_timesteps - (self._steps - start)).max() > 0:
                    # no replica can be done in fewer episodes, so none plays past the first
                    # episode at which all are done: the run is that of learn(episodes=...)
                    more = 1 if cap is None else math.ceil(short.max() / cap)
                    if not self._train_to(self.episodes_done + more, progress):
                        break  # the callback stopped training
        finally:
            self._learning = False
            close_bar()
        chosen.on_training_end(self)
        return self

    def _train_to(self, episodes: int, on_episode: Callable[[EpisodeLog], bool]) -> bool:
        """Train (or resume) the run up to ``episodes``; return whether it got there.

        During training the learner shows the agent being trained (a callback's
        ``evaluate`` or ``predict`` sees it); on an error after training started
        it holds the last checkpoint.
        """
        from rl.runs.training import build, run

        resume = self._started and self._has_checkpoint()
        values = {**self._effective, "episodes": episodes}
        config = build_dataclass(TrainConfig, values, "the learner's config")
        runner, effective = build(config)
        before = self._model
        live = LoadedRun(self.run_dir, before.config, runner.problem, runner.agent, before.episode)
        began = False  # whether an episode ended (errors after that are not refusals)

        def progress(log: EpisodeLog) -> bool:
            nonlocal began
            began = True
            self._model = _at_episode(live, log.episode)
            return on_episode(log)

        try:
            result = run(
                runner, config, effective, resume=resume, overwrite=self._overwrite,
                progress=progress, tensorboard=self._log_dir(),
            )  # fmt: skip
        except BaseException as error:
            runner.close()
            if not began and isinstance(error, (ConfigError, CheckpointError, RunDirError)):
                self._model = before  # refused before training
                raise _in_api_words(error, type(self).__name__) from None
            self._started = True
            self._model = self._last_checkpoint(before)
            self._sampling = None
            if self._has_checkpoint():  # the steps of the episodes the checkpoint holds
                self._steps = self._count_steps()
            raise
        runner.close()
        self._started = True
        self._effective = effective
        trained = build_dataclass(
            TrainConfig, {**effective, "episodes": result.episodes_done}, "the learner's config"
        )
        self._model = LoadedRun(
            self.run_dir, trained, runner.problem, runner.agent, result.episodes_done
        )
        self._sampling = None  # `predict(deterministic=False)` copies the new agent
        if result.episodes_done == episodes:
            return True
        self._steps = self._count_steps()  # episodes after a stop are not told to ``progress``
        return False

    def _steps_bar(
        self, total_timesteps: int, start: NDArray[np.int64], enabled: bool
    ) -> tuple[Callable[[], None], Callable[[EpisodeLog], None]]:
        """Return (close, update) of a tqdm bar of the fewest steps any replica trained so far.

        As `rl.train.progress_bar`, the bar appears with the first episode.
        """
        from tqdm import tqdm

        bars = []

        def update(log: EpisodeLog) -> None:
            if not bars:
                bars.append(
                    tqdm(
                        total=total_timesteps,
                        unit="step",
                        disable=not enabled,
                        dynamic_ncols=True,
                        desc=f"{self.config.agent} on {self.config.env}",
                    )
                )
            bars[0].update(int((self._steps - start).min()) - bars[0].n)
            bars[0].set_postfix(ret=f"{log.returns.mean():.2f}", refresh=False)

        def close() -> None:
            for bar in bars:
                bar.close()

        return close, update

    def _episode_cap(self) -> int | None:
        """Return the most steps an episode can last (its time limit), None if unbounded."""
        env = self.problem.make_env()
        try:
            cap = getattr(env.spec, "max_episode_steps", None)
        finally:
            env.close()
        return int(cap) if cap else None

    def _count_steps(self) -> NDArray[np.int64]:
        """Return the environment steps each replica trained, from ``metrics.csv``."""
        steps = np.zeros(self.replicas, dtype=np.int64)
        path = self.run_dir / METRICS_FILE
        if self.episodes_done == 0 or not path.is_file():
            return steps
        table = read_metrics(path)
        kept = table["episode"] <= self.episodes_done
        np.add.at(steps, table["seed"][kept] - self.config.seed, table["length"][kept])
        return steps

    def _reset_counters(self) -> None:
        """Count the steps trained so far; forget a stochastic `predict`'s copy of the agent."""
        self._steps = self._count_steps()
        self._origin = np.zeros(self.replicas, dtype=np.int64)
        self._sampling: Any = None
        self._tb_log_name = type(self).__name__

    @property
    def steps_done(self) -> NDArray[np.int64]:
        """Environment steps each replica has trained over the whole run, shape (B,)."""
        return self._steps.copy()

    @property
    def num_timesteps(self) -> int:
        """stable-baselines3's counter (see the class's Attributes)."""
        return int((self._steps - self._origin).min())

    def get_env(self) -> gymnasium.Env:
        """Return a new copy of the environment the replicas train on (stable-baselines3's).

        It is ``problem.make_env()``: the environment with the run's episode
        cap, observations raw (the learner discretizes them itself).
        """
        return self.problem.make_env()

    def _log_dir(self) -> Path | None:
        """Return the TensorBoard directory of this learner's run (the first call picks it)."""
        from rl.runs.tensorboard import tensorboard_dir

        if self._tensorboard_dir is None:
            self._tensorboard_dir = tensorboard_dir(self.tensorboard_log, self._tb_log_name)
        return self._tensorboard_dir

    def _refuse_inside_learn(self, method: str) -> None:
        """Raise RunDirError if ``learn`` is running (``method`` is called from a callback)."""
        if self._learning:
            raise RunDirError(
                f"{method}() cannot run while learn() is training (from a callback): the run's "
                f"files are being written; call {method}() after learn returns, or stop "
                "training by returning False from on_episode_end."
            )

    def _has_checkpoint(self) -> bool:
        return (self.run_dir / CHECKPOINT_FILE).is_file()

    def _last_checkpoint(self, before: LoadedRun) -> LoadedRun:
        """Return the model of the last checkpoint after a failed learn, the run files cut to it.

        The metrics rows written after the checkpoint are those of episodes the
        model does not hold (a resume would drop them too), and ``config.json``
        then states the episodes the checkpoint holds; without a checkpoint the
        model of before the learn is kept.
        """
        if not self._has_checkpoint():
            return before
        loaded, metrics_bytes = load_resumable(self.run_dir, env=self.config.env)
        descriptor = open_run_file(self.run_dir / METRICS_FILE, os.O_WRONLY)
        try:
            os.ftruncate(descriptor, metrics_bytes)
        finally:
            os.close(descriptor)
        episodes = max(loaded.episode, 1)  # a run's config holds at least one (as at construction)
        held = {**_effective_of(loaded.config, self.run_dir), "episodes": episodes}
        atomic_write_bytes(self.run_dir / CONFIG_FILE, config_text(held).encode())
        loaded.config = dataclasses.replace(loaded.config, episodes=episodes)
        return loaded

    # ----------------------------------------------------------------- acting

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
        *,
        replica: int = 0,
    ) -> tuple[Any, None]:
        """Return ``(action, None)`` for one raw observation, ``(actions, None)`` for a batch.

        stable-baselines3's ``predict``: one observation as the environment
        returns it gives one action, a batch (a leading axis, as a vectorized
        environment returns) one action per row; these agents keep no
        recurrent state, so ``state`` and ``episode_start`` are accepted and
        the state returned is None.

        Parameters
        ----------
        observation : any
            One observation, or a sequence/array of them.
        state, episode_start : optional
            Ignored (stable-baselines3's recurrent state).
        deterministic : bool, default True
            True: the replica's greedy action. False: an action drawn from its
            exploration policy in training (EUGE for TEQL, epsilon-greedy for
            TLR, tabular and DQN, the softmax policy for SAC), played by a copy
            of the agent that continues the replica's exploration stream (seeded
            by its seed), so the draws repeat from the same model and training
            is not changed.
        replica : int, default 0
            Which seed's agent acts.

        Returns
        -------
        action or ndarray, None
            An element of the environment's action space, or one per
            observation (a list for Tuple/Dict action spaces); and None.

        Raises
        ------
        ValueError
            For a bad replica or an observation of the wrong shape.
        """
        model = self._model
        problem = model.problem
        single, rows = self._rows(observation)
        states = np.stack([problem.encode_observation(row) for row in rows]) if rows else None
        if states is None:
            states = np.zeros((0, len(problem.state_dims)), np.int64)
        if deterministic:
            actions = problem.decode(model.greedy_states(states, replica))
        else:
            model.greedy_states(states[:0], replica)  # checks the replica
            actions = self._explore(states, replica)
        return (actions[0] if single else actions), None

    def _explore(self, states: NDArray[np.int64], replica: int) -> Any:
        """Return the environment actions of ``replica``'s exploration policy at ``states``."""
        if self._sampling is None:
            model = self._model
            seeds = range(model.config.seed, model.config.seed + self.replicas)
            streams = [s.agent for s in spawn_replicas(seeds)]
            with warnings.catch_warnings():  # its warnings were given when the learner was built
                warnings.simplefilter("ignore")  # a copy, of the model's own config
                self._sampling = type(model.agent)(model.problem, model.agent.config, streams)
            self._sampling.load_state_dict(model.agent.state_dict())  # exploration streams too
        agent, problem = self._sampling, self._model.problem
        active = np.arange(self.replicas) == replica
        vectors = np.zeros((len(states), len(problem.action_dims)), dtype=np.int64)
        drawn_rows = {}  # row -> a released reading's continuous random action
        for row, state in enumerate(states):
            vectors[row] = agent.act(np.repeat(state[None], self.replicas, axis=0), active)[replica]
            drawn = agent.continuous_actions_
            if drawn is not None and drawn.mask[replica]:
                drawn_rows[row] = np.array(drawn.values[replica], dtype=np.float64)
        actions = problem.decode(vectors)
        for row, values in drawn_rows.items():
            actions[row] = values.reshape(np.shape(actions[row]))
        return actions

    def _rows(self, observation: Any) -> tuple[bool, list[Any]]:
        """Return (whether ``observation`` is one observation, the observations as a list)."""
        problem = self._model.problem
        if isinstance(observation, Mapping):
            return True, [observation]
        if problem.flatten is not None:  # Tuple/Dict spaces: one is what flattens to one
            return (
                (True, [observation])
                if _flattens(problem, observation)
                else (False, list(observation))
            )
        try:
            array = np.asarray(observation)
        except ValueError as error:  # ragged nesting
            raise ValueError(f"The observation is not an array of one shape: {error}") from None
        one = self._observation_shape()
        if array.shape == one:
            return True, [array]
        if array.shape[1:] == one:
            return False, list(array)
        raise ValueError(
            f"The observation has shape {array.shape}; {problem.env_id!r} observations have "
            f"shape {one} (one) or (N, *{one}) (a batch)."
        )

    def _observation_shape(self) -> tuple[int, ...]:
        problem = self._model.problem
        if problem.observation_shape is not None:
            return tuple(problem.observation_shape)
        if not hasattr(self, "_bundled_shape"):
            env = problem.make_env()
            self._bundled_shape = tuple(env.observation_space.shape or ())
            env.close()
        return self._bundled_shape

    def evaluate(self, episodes: int = 10, *, seed: int = 0) -> LearnerEvaluation:
        """Play greedy episodes with every replica (`rl.evaluate.evaluate`, ``--seed``).

        Episode k is reset with a seed derived from (``seed``, k), the same
        for every replica, as ``python -m rl.evaluate RUN_DIR --replica i`` does.

        Returns
        -------
        LearnerEvaluation
            Returns, their mean and standard deviation per replica.
        """
        from rl.evaluate import evaluate

        returns = np.stack(
            [
                evaluate(self._model, episodes=episodes, seed=seed, replica=i).returns
                for i in range(self.replicas)
            ]
        )
        return LearnerEvaluation(returns, returns.mean(axis=1), returns.std(axis=1))

    def q_tensor(self, replica: int = 0) -> Any:
        """Return a tensor agent's Q-function of one replica as a ``tensorly`` CPTensor.

        See `rl.runs.load.LoadedRun.q_tensor`; a TypeError for agents without one.
        """
        return self._model.q_tensor(replica)

    # ----------------------------------------------------------------- files

    def save(self, path: str | os.PathLike) -> Path:
        """Write the run (metrics, config, checkpoint) to the directory ``path``.

        ``path`` becomes a run directory: `load`, `rl.load_run`, ``python -m
        rl.evaluate`` and ``python -m rl.train --resume`` read it; its
        ``config.json`` names ``path`` as ``out``. It must be new, empty or a
        run directory (it holds a checkpoint): the run files there
        (`rl.runs.training.RUN_FILES`, an old figure included) are replaced,
        anything else in it is left alone. A directory that holds other files
        but no run is refused, and so is one another run is using. No figure
        is written (``python -m rl.plot PATH`` draws one).

        Returns
        -------
        pathlib.Path
            ``path``.

        Raises
        ------
        ValueError
            Before the first `learn` (there is no checkpoint yet), for an empty
            ``path``, or one inside the learner's temporary run directory.
        rl.runs.rundir.RunDirError
            If ``path`` holds files but no run, is in use by a run, holds a link
            where a run file goes, or cannot be written; or if called while
            `learn` runs (from a callback).
        """
        if not self._has_checkpoint():
            raise ValueError("Nothing to save yet: call learn() first.")
        target = _save_target(path)
        self._refuse_inside_learn("save")
        if self._temporary and target.resolve().is_relative_to(self.run_dir.resolve()):
            raise ValueError(
                f"Cannot save to {target}: it is inside the learner's temporary run directory "
                f"{self.run_dir}, which is removed with the learner; save somewhere else."
            )
        if target.resolve() == self.run_dir.resolve():
            return target
        copy_run(self.run_dir, target)
        return target

    @classmethod
    def load(
        cls, path: str | os.PathLike, *, env: str | None = None, trust_env_module: bool = False
    ) -> Learner:
        """Load a run directory (of `save` or ``python -m rl.train``) as a learner.

        ``Learner.load`` returns the learner of the run's agent (`TEQL`, ...).
        Learning goes on in a temporary copy of the checkpoint and of the
        metrics up to it (never through a link; a figure is not copied):
        ``path`` itself is not changed until it is saved to again. The run is
        read under its lock, shared (`rl.runs.load.reading_lock`). ``env``
        and ``trust_env_module`` are those of `rl.load_run` (needed for a
        ``"package.module:Env-v0"`` id).

        Raises
        ------
        rl.runs.load.RunLoadError
            If the directory cannot be loaded (`rl.runs.load.load_resumable`: a
            link, metrics that disagree with the checkpoint), is in use by a
            run being trained, or holds a run of another agent.
        """
        source = Path(path)
        with reading_lock(source):
            loaded, metrics_bytes = load_resumable(
                source, env=env, trust_env_module=trust_env_module
            )
            if not cls.agent:  # Learner.load: the class of the run's agent
                cls = _CLASSES.get(loaded.config.agent, cls)
            if cls.agent and loaded.config.agent != cls.agent:
                raise RunLoadError(
                    f"{path} holds a {loaded.config.agent!r} run, not {cls.agent!r}; load it "
                    f"with rl.{_CLASS_OF.get(loaded.config.agent, 'load_run')}.load."
                )
            learner = cls.__new__(cls)
            run_dir = learner._own_run_dir(None)
            try:
                _copy_checkpointed(source, run_dir, metrics_bytes)
            except (OSError, RunDirError) as error:
                raise RunLoadError(f"Cannot load {path}: {error}") from None
        learner._effective = _effective_of(loaded.config, run_dir)
        atomic_write_bytes(run_dir / CONFIG_FILE, config_text(learner._effective).encode())
        learner._overwrite = False
        learner._started = True
        learner._learning = False
        loaded.run_dir = run_dir
        learner._model = loaded
        learner._reset_counters()
        return learner


_REGISTERED = itertools.count()
"""Numbers the Gymnasium ids of the environments that learners were given as objects."""


def _env_id(env: EnvSource, replicas: int) -> str:
    """Return ``env`` if it is an id; register an instance or factory and return its new id.

    The id is ``learnerN/NAME`` (NAME: the environment's own id or class); making
    it returns a deep copy of the instance, or what the factory returns.

    Raises
    ------
    rl.runs.config.ConfigError
        If ``env`` is neither, the instance cannot be copied, or the factory does
        not return a `gymnasium.Env` (a new one on each call for several replicas).
    """
    if isinstance(env, str):
        return env
    if isinstance(env, gymnasium.Env):
        try:
            copy.deepcopy(env).close()
        except Exception as error:  # noqa: BLE001 - whatever the environment holds
            raise ConfigError(
                f"The environment {env} cannot be copied for the replicas ({type(error).__name__}: "
                f"{error}); pass an id, or a factory that returns an environment (lambda: env for "
                "one replica, a new environment on each call for several)."
            ) from None
        factory, made = (lambda: copy.deepcopy(env)), env
    elif callable(env):
        factory, made = env, env()
        if not isinstance(made, gymnasium.Env):
            raise ConfigError(f"The 'env' factory must return a gymnasium.Env. Got {made!r}.")
        if replicas > 1:
            second = env()
            if second is made:
                raise ConfigError(
                    f"The 'env' factory returned the same environment twice, but {replicas} "
                    "replicas need one each: make a new one on each call (lambda: "
                    "gym.make(...)), or pass the instance itself, which is copied."
                )
            second.close()
    else:
        raise ConfigError(
            "The 'env' parameter must be a problem name, a Gymnasium id, a gymnasium.Env or a "
            f"factory returning one. Got {env!r} instead."
        )
    name = made.spec.id if made.spec is not None else type(made.unwrapped).__name__
    env_id = f"learner{next(_REGISTERED)}/" + re.sub(r"[^\w.-]", "-", name)
    gymnasium.register(env_id, entry_point=factory, disable_env_checker=True, order_enforce=False)
    return env_id


def _effective_of(config: TrainConfig, run_dir: Path) -> dict[str, Any]:
    """Return a loaded run's effective configuration, writing to ``run_dir``."""
    from rl.runs.config import to_jsonable

    return {**to_jsonable(config), "out": str(run_dir)}


def _at_episode(live: LoadedRun, episode: int) -> LoadedRun:
    """Return ``live`` (the agent being trained) as the model after ``episode``, for callbacks."""
    live.config = dataclasses.replace(live.config, episodes=episode)
    live.episode = episode
    return live


def _flattens(problem: Any, observation: Any) -> bool:
    """Whether ``observation`` is one observation of a Tuple/Dict space (not a batch of them)."""
    try:
        problem.as_array(observation)
    except (ValueError, TypeError, IndexError, KeyError):
        return False
    return True


def _remove_own_directory(run_dir: Path, owner: int) -> None:
    """Remove a learner's temporary ``run_dir``, only in the process that made it (not a fork)."""
    if os.getpid() == owner:
        shutil.rmtree(run_dir, ignore_errors=True)


def _plain(value: Any) -> Any:
    """Return ``value`` with NumPy scalars and arrays (nested in mappings, lists) as Python's."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    return value


def _naming_defaults(message: str, agent: str, agent_params: Mapping[str, Any] | None) -> str:
    """Say in ``message`` when the parameter it refuses is the agent's default, not the user's."""
    found = re.search(r"The '(\w+)' parameter must be an int in \[\d+, (\d+)\]", message)
    if found is None or found.group(1) in (agent_params or {}):
        return message
    name, largest = found.groups()
    fields = {f.name for f in dataclasses.fields(agent_spec(agent).config_class)}
    if name not in fields:
        return message
    return (
        f"{message} '{name}' is agent {agent!r}'s default here, not a value you gave; this "
        f"problem needs at most {largest}: pass agent_params={{'{name}': {largest}}}."
    )


_API_WORDS = (
    (re.compile(r"use --resume to continue it or --overwrite to start again"),
     "load it with rl.{name}.load(path) to continue it, or pass overwrite=True to start again"),
    (re.compile(r"use --overwrite to start again"), "pass overwrite=True to start again"),
    (re.compile(r"continue with: python -m rl\.train --resume \S+"), "continue with learn()"),
    (re.compile(r"start afresh with: python -m rl\.train --config \S+ --overwrite"),
     "start afresh with overwrite=True"),
)  # fmt: skip
"""Command-line advice of `rl.runs.training`'s messages -> the same advice for learners."""


def _in_api_words(error: Exception, name: str) -> Exception:
    """Return ``error`` (of the same type) with its command-line advice given as API calls."""
    message = str(error)
    for pattern, words in _API_WORDS:
        message = pattern.sub(words.format(name=name), message)
    return error if message == str(error) else type(error)(message)


def _save_target(path: str | os.PathLike) -> Path:
    """Return ``path`` as a directory `Learner.save` may write, or raise (see `Learner.save`)."""
    if not os.fspath(path):
        raise ValueError("The 'path' parameter is empty; name the directory to save to.")
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise RunDirError(f"Cannot save to {target}: it is a file, not a directory.")
    if has_run_files(target) and not has_checkpoint(target):
        raise RunDirError(
            f"Refusing to save to {target}: it holds files but no run ({CHECKPOINT_FILE}), and "
            "saving would replace any config.json or metrics.csv there; save to a new or "
            "empty directory."
        )
    return target


def _copy_checkpointed(source: Path, run_dir: Path, metrics_bytes: int) -> None:
    """Copy ``source``'s checkpoint and the ``metrics_bytes`` of metrics it records to ``run_dir``.

    Never through a link, and never more metrics than the checkpoint's.
    """
    check_run_files(source, (CHECKPOINT_FILE, METRICS_FILE, CONFIG_FILE))
    atomic_copy(source / CHECKPOINT_FILE, run_dir / CHECKPOINT_FILE)
    descriptor = open_run_file(source / METRICS_FILE, os.O_RDONLY)
    with os.fdopen(descriptor, "rb") as handle:
        atomic_write_bytes(run_dir / METRICS_FILE, handle.read(metrics_bytes))


def _preset_values(
    preset: str, env: EnvSource, agent: str, values: dict[str, Any]
) -> dict[str, Any]:
    """Return a learner's ``values`` over the tuned preset of ``agent`` on the id ``env``."""
    from rl.experiments.tuned_presets import TUNED, override, tuned_preset

    if preset != TUNED:
        raise ConfigError(
            f"The 'preset' parameter of a learner must be {TUNED!r}. Got {preset!r} instead."
        )
    if not isinstance(env, str):
        raise ConfigError(
            f"The preset {TUNED!r} needs a Gymnasium id as 'env' (for example "
            f"'CartPole-v1'), not {type(env).__name__}."
        )
    tuned = tuned_preset(env, agent)
    del tuned["env"], tuned["agent"], tuned["episodes"]
    return override(tuned, values)


class TEQL(Learner):
    """TEQL (Algorithms 1-3 of the paper) as a learner (`rl.agents.tensor.teql`).

    Readings ``stable`` (the default, `rl.agents.readings.default_reading`), ``paper``
    and ``released``.
    """

    agent = "teql"


class TLR(Learner):
    """Tensor low-rank Q-learning as a learner (`rl.agents.tensor.tlr`).

    The released runs' settings on the paper's problems; elsewhere tabular Q-learning's
    discount and epsilon schedule (`rl.agents.readings.TLR_ELSEWHERE`).
    """

    agent = "tlr"


class LoRaVI(Learner):
    """Low-rank value iteration as a learner (`rl.agents.tables.lora_vi`)."""

    agent = "lora-vi"


class DQN(Learner):
    """DQN (PyTorch) as a learner (`rl.agents.deep.dqn`)."""

    agent = "dqn"


class SAC(Learner):
    """Discrete SAC (PyTorch) as a learner (`rl.agents.deep.sac`)."""

    agent = "sac"


class Tabular(Learner):
    """Tabular Q-learning as a learner (`rl.agents.tables.tabular`)."""

    agent = "tabular"


_CLASSES: dict[str, type[Learner]] = {
    cls.agent: cls for cls in (TEQL, TLR, LoRaVI, DQN, SAC, Tabular)
}
"""Registered agent name -> learner class (`Learner.load` of the base class uses it)."""
_CLASS_OF = {agent: cls.__name__ for agent, cls in _CLASSES.items()}
"""Registered agent name -> learner class name, for messages."""
