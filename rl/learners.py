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
    model.learn(episodes=300)          # again to continue
    action = model.predict(observation, replica=0)
    model.evaluate(episodes=20)        # greedy mean and std per replica
    model.save("runs/cp")
    model = rl.TEQL.load("runs/cp")

`learn` continues where the last one stopped, exactly as ``python -m rl.train
--resume`` does: two calls of 100 episodes give the run of one call of 200,
bitwise. Without ``out`` a learner trains in a temporary directory, removed
when it is garbage collected; `save` copies the run there. See
``docs/from-stable-baselines3.md``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import numpy as np
from numpy.typing import NDArray

from rl.callbacks import Callback, CallbackList, as_callback, asks_to_stop
from rl.runs.checkpoint import CheckpointError
from rl.runs.config import ConfigError, TrainConfig, build_dataclass
from rl.runs.load import LoadedRun, load_run
from rl.runs.rundir import RunDirError, atomic_write_bytes, make_run_dir, refuse_if_locked
from rl.runs.training import CHECKPOINT_FILE, CONFIG_FILE, FIGURE_FILE, METRICS_FILE, EpisodeLog

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
    env : str
        A bundled problem (``"cartpole"``) or a Gymnasium id (``"CartPole-v1"``,
        ``"package.module:Env-v0"``), as ``--env``.
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

    Raises
    ------
    rl.runs.config.ConfigError
        For an unknown environment, agent parameter or option (one line naming it).

    Attributes
    ----------
    config : TrainConfig
        The run's effective configuration (full agent config and problem
        options); after a `learn`, ``episodes`` is the episodes trained.
    run_dir : pathlib.Path
        Where the run is written.
    """

    agent: ClassVar[str] = ""
    """Registered agent name of the learner (`rl.agents.registry.AGENTS`)."""

    tensorboard_log: str | os.PathLike | None = None
    """Where `learn` logs to TensorBoard (None: nowhere); may be set after `load`."""

    _tensorboard_dir: Path | None = None
    """The run's TensorBoard directory, chosen by the first `learn` that logs."""

    def __init__(
        self,
        env: str,
        *,
        reading: str | None = None,
        seeds: int | None = None,
        seed: int | None = None,
        env_options: Mapping[str, Any] | None = None,
        agent_params: Mapping[str, Any] | None = None,
        eval_every: int | None = None,
        eval_episodes: int | None = None,
        checkpoint_every: int | None = None,
        out: str | os.PathLike | None = None,
        overwrite: bool = False,
        verbose: int = 1,
        tensorboard_log: str | os.PathLike | None = None,
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
            "env_options": None if env_options is None else dict(env_options),
            "agent_params": None if agent_params is None else dict(agent_params),
        }
        values = {key: value for key, value in given.items() if value is not None}
        run_dir = self._own_run_dir(out)
        values.update(env=env, agent=self.agent, out=str(run_dir), episodes=1)
        config = build_dataclass(TrainConfig, values, "the learner's config")
        runner, effective = build(config)
        runner.close()  # learn builds its own, as each python -m rl.train does
        self._effective = effective
        self._overwrite = overwrite
        self._started = False  # whether run_dir holds this learner's run (learn resumes it)
        self.tensorboard_log = tensorboard_log
        full = build_dataclass(TrainConfig, effective, "the learner's config")
        self._model = LoadedRun(run_dir, full, runner.problem, runner.agent, 0)
        if verbose and runner.problem.reward_bound_source in ("estimated", "reward_range"):
            print(runner.problem.describe_reward_bound(), file=sys.stderr)

    def _own_run_dir(self, out: str | os.PathLike | None) -> Path:
        """Return ``out``, or a new temporary directory removed with this learner."""
        if out is not None:
            return Path(out)
        run_dir = Path(tempfile.mkdtemp(prefix=f"rl-{self.agent}-"))
        weakref.finalize(self, shutil.rmtree, run_dir, ignore_errors=True)
        return run_dir

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
        episodes: int,
        *,
        callback: Callback | Callable[..., Any] | Sequence[Any] | None = None,
        progress_bar: bool = False,
        tb_log_name: str | None = None,
    ) -> Learner:
        """Train every replica ``episodes`` more episodes; return the learner.

        The first call starts the run (``python -m rl.train``), later calls
        resume it (``python -m rl.train --resume``): ``learn(a); learn(b)`` is
        ``learn(a + b)``, bitwise.

        Parameters
        ----------
        episodes : int
            Training episodes per replica (>= 1).
        callback : Callback, callable or list of those, optional
            Told of the start, every episode and the end (`rl.callbacks`); an
            ``on_episode_end`` that returns False stops training after the
            episodes in progress.
        progress_bar : bool, default False
            Show a tqdm bar of episodes.
        tb_log_name : str, optional
            With ``tensorboard_log``: the name of the run's log directory
            ``{tb_log_name}_{n}`` (default: the learner's class name, ``"TEQL"``),
            taken by the first `learn` that logs.

        Returns
        -------
        Learner
            ``self``, as stable-baselines3's ``learn`` returns the model.

        Raises
        ------
        rl.runs.config.ConfigError, rl.runs.rundir.RunDirError
            For a run directory that cannot be used.
        ValueError
            If an agent diverges or the environment returns a non-finite value;
            the learner then holds its last checkpoint.
        """
        from rl.runs.training import build, run
        from rl.train import progress_bar as make_progress_bar
        from rl.validation import check_int

        check_int("episodes", episodes, 1)
        done = self.episodes_done
        resume = self._started and self._has_checkpoint()
        values = {**self._effective, "episodes": done + episodes}
        config = build_dataclass(TrainConfig, values, "the learner's config")
        runner, effective = build(config)
        chosen = as_callback(callback)
        close_bar, update = make_progress_bar(config, progress_bar)

        def progress(log: EpisodeLog) -> bool:
            update(log)
            return not asks_to_stop(chosen.on_episode_end(self, log))

        try:
            chosen.on_training_start(self)
            result = run(
                runner, config, effective, resume=resume, overwrite=self._overwrite,
                progress=progress, tensorboard=self._log_dir(tb_log_name),
            )  # fmt: skip
        except (ConfigError, CheckpointError, RunDirError):  # refused before training
            close_bar()
            runner.close()
            raise
        except BaseException:
            close_bar()
            runner.close()
            self._started = True
            if self._has_checkpoint():  # hold the last checkpoint, not a half-played episode
                self._model = load_run(self.run_dir, env=self.config.env)
            raise
        close_bar()
        runner.close()
        self._started = True
        self._effective = effective
        trained = build_dataclass(
            TrainConfig, {**effective, "episodes": result.episodes_done}, "the learner's config"
        )
        self._model = LoadedRun(
            self.run_dir, trained, runner.problem, runner.agent, result.episodes_done
        )
        chosen.on_training_end(self)
        return self

    def _log_dir(self, tb_log_name: str | None) -> Path | None:
        """Return the TensorBoard directory of this learner's run (the first call picks it)."""
        from rl.runs.tensorboard import tensorboard_dir

        if self._tensorboard_dir is None:
            name = type(self).__name__ if tb_log_name is None else tb_log_name
            self._tensorboard_dir = tensorboard_dir(self.tensorboard_log, name)
        return self._tensorboard_dir

    def _has_checkpoint(self) -> bool:
        return (self.run_dir / CHECKPOINT_FILE).is_file()

    # ----------------------------------------------------------------- acting

    def predict(self, observation: Any, *, replica: int = 0, deterministic: bool = True) -> Any:
        """Return the greedy action of one raw observation, or the actions of a batch.

        Parameters
        ----------
        observation : any
            One observation as the environment returns it, or a sequence/array
            of them (a leading batch axis).
        replica : int, default 0
            Which seed's agent acts.
        deterministic : bool, default True
            Only greedy actions are available (exploration belongs to training).

        Returns
        -------
        action or ndarray
            An element of the environment's action space, or one per
            observation (a list for Tuple/Dict action spaces).

        Raises
        ------
        ValueError
            For ``deterministic=False``, a bad replica or an observation of the
            wrong shape.
        """
        if not deterministic:
            raise ValueError(
                "predict(deterministic=False) is not available: the agents explore only "
                "while learning; predict returns greedy actions."
            )
        model = self._model
        problem = model.problem
        single, rows = self._rows(observation)
        states = np.stack([problem.encode_observation(row) for row in rows]) if rows else None
        if states is None:
            states = np.zeros((0, len(problem.state_dims)), np.int64)
        actions = problem.decode(model.greedy_states(states, replica))
        return actions[0] if single else actions

    def _rows(self, observation: Any) -> tuple[bool, list[Any]]:
        """Return (whether ``observation`` is one observation, the observations as a list)."""
        problem = self._model.problem
        if isinstance(observation, Mapping):
            return True, [observation]
        if problem.flatten is not None:  # Tuple/Dict spaces: one is a tuple or mapping
            first = observation[0] if len(observation) else None
            batch = isinstance(first, (tuple, list, Mapping, np.ndarray))
            return (False, list(observation)) if batch else (True, [observation])
        array = np.asarray(observation)
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
        """Write the run (metrics, config, checkpoint, figure if drawn) to the directory ``path``.

        ``path`` becomes a run directory: `load`, `rl.load_run`, ``python -m
        rl.evaluate`` and ``python -m rl.train --resume`` read it. Files of a
        run already there are replaced; a directory another run is using is
        refused.

        Returns
        -------
        pathlib.Path
            ``path``.

        Raises
        ------
        ValueError
            Before the first `learn` (there is no checkpoint yet).
        rl.runs.rundir.RunDirError
            If ``path`` is in use by a run or cannot be written.
        """
        target = Path(path)
        if not self._has_checkpoint():
            raise ValueError("Nothing to save yet: call learn() first.")
        if target.resolve() == self.run_dir.resolve():
            return target
        make_run_dir(target)
        refuse_if_locked(target)
        for name in (METRICS_FILE, CHECKPOINT_FILE, FIGURE_FILE, CONFIG_FILE):
            source = self.run_dir / name
            if source.is_file():
                atomic_write_bytes(target / name, source.read_bytes())
        return target

    @classmethod
    def load(
        cls, path: str | os.PathLike, *, env: str | None = None, trust_env_module: bool = False
    ) -> Learner:
        """Load a run directory (of `save` or ``python -m rl.train``) as a learner.

        Learning goes on in a temporary copy: ``path`` itself is not changed
        until it is saved to again. ``env`` and ``trust_env_module`` are those
        of `rl.load_run` (needed for a ``"package.module:Env-v0"`` id).

        Raises
        ------
        rl.runs.load.RunLoadError
            If the directory cannot be loaded or holds a run of another agent.
        """
        from rl.runs.load import RunLoadError

        loaded = load_run(path, env=env, trust_env_module=trust_env_module)
        if cls.agent and loaded.config.agent != cls.agent:
            raise RunLoadError(
                f"{path} holds a {loaded.config.agent!r} run, not {cls.agent!r}; load it with "
                f"rl.{_CLASS_OF.get(loaded.config.agent, 'load_run')}.load."
            )
        learner = cls.__new__(cls)
        run_dir = learner._own_run_dir(None)
        for name in (METRICS_FILE, CHECKPOINT_FILE, FIGURE_FILE, CONFIG_FILE):
            if (Path(path) / name).is_file():
                shutil.copyfile(Path(path) / name, run_dir / name)
        learner._effective = _effective_of(loaded.config, run_dir)
        learner._overwrite = False
        learner._started = True
        loaded.run_dir = run_dir
        learner._model = loaded
        return learner


def _effective_of(config: TrainConfig, run_dir: Path) -> dict[str, Any]:
    """Return a loaded run's effective configuration, writing to ``run_dir``."""
    from rl.runs.config import to_jsonable

    return {**to_jsonable(config), "out": str(run_dir)}


class TEQL(Learner):
    """TEQL (Algorithms 1-3 of the paper) as a learner (`rl.agents.teql`).

    Readings ``paper`` (the default on the paper's problems), ``released`` and ``stable``
    (the default elsewhere; `rl.agents.readings.default_reading`).
    """

    agent = "teql"


class TLR(Learner):
    """Tensor low-rank Q-learning as a learner (`rl.agents.tlr`).

    The released runs' settings on the paper's problems; elsewhere tabular Q-learning's
    discount and epsilon schedule (`rl.agents.readings.TLR_ELSEWHERE`).
    """

    agent = "tlr"


class LoRaVI(Learner):
    """Low-rank value iteration as a learner (`rl.agents.lora_vi`)."""

    agent = "lora-vi"


class DQN(Learner):
    """DQN (PyTorch) as a learner (`rl.agents.dqn`)."""

    agent = "dqn"


class SAC(Learner):
    """Discrete SAC (PyTorch) as a learner (`rl.agents.sac`)."""

    agent = "sac"


class Tabular(Learner):
    """Tabular Q-learning as a learner (`rl.agents.tabular`)."""

    agent = "tabular"


_CLASS_OF = {cls.agent: cls.__name__ for cls in (TEQL, TLR, LoRaVI, DQN, SAC, Tabular)}
"""Registered agent name -> learner class name, for messages."""
