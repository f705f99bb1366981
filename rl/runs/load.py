"""Use what you trained: load a run directory back as configuration, problem and agent.

`load_run` reads ``RUN_DIR/checkpoint.npz`` through `rl.runs.checkpoint.load_checkpoint`
(arrays and JSON only, never unpickled), rebuilds the run's configuration from
the effective configuration stored in it, makes the problem with the recorded
environment options (an estimated reward bound is among them), builds the agent
with all its replicas and restores its state. The result acts greedily on raw
observations (`LoadedRun.policy`) and, for a tensor agent, exports each
replica's Q-function as a ``tensorly.cp_tensor.CPTensor`` (`LoadedRun.q_tensor`).

Example::

    import rl

    run = rl.load_run("runs/teql")
    env = run.problem.make_env()
    observation, _ = env.reset(seed=0)
    action = run.policy(observation, replica=0)
    cp = run.q_tensor(replica=0)  # tensorly.cp_tensor.CPTensor of the Q-tensor
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rl.agents.base import Agent
from rl.problems import Problem, make_problem
from rl.problems.from_gymnasium import EnvModuleRefused
from rl.runs.checkpoint import (
    CHECKPOINT_NAME,
    LEGACY_CHECKPOINT_NAME,
    Checkpoint,
    CheckpointError,
    best_checkpoint,
    check_checkpoint_against_metrics,
    load_checkpoint,
    restore_agent,
)
from rl.runs.config import (
    ConfigError,
    TrainConfig,
    build_dataclass,
    recorded_run_config,
    resolve_agent,
)
from rl.runs.rundir import RunDirError, RunLock, lock_holder
from rl.seeding import spawn_replicas


class RunLoadError(ValueError):
    """A run directory cannot be loaded; the message is one line."""


@dataclass
class LoadedRun:
    """A finished (or checkpointed) run, restored.

    Attributes
    ----------
    run_dir : pathlib.Path
        Where it was loaded from.
    config : TrainConfig
        The run's effective configuration (the full agent config and
        environment options in ``agent_params`` and ``env_options``).
    problem : Problem
        The problem the agent was trained on (same encoding of observations).
    agent : Agent
        The agent with every replica (``agent.replicas`` = ``config.seeds``),
        in the state of the checkpoint.
    episode : int
        Training episodes completed when the checkpoint was written.
    best_episodes : ndarray of int64, shape (B,), or None
        Loaded with ``best=True`` (`load_run`): the training episode of each
        replica's best-evaluated state, which ``agent`` then holds (`rl.runs.training.BestStates`).
    """

    run_dir: Path
    config: TrainConfig
    problem: Problem
    agent: Agent
    episode: int
    best_episodes: NDArray[np.int64] | None = None

    @property
    def replicas(self) -> int:
        """Number of replicas B (one per seed)."""
        return int(self.agent.replicas)

    def _check_replica(self, replica: int) -> int:
        if isinstance(replica, bool) or not isinstance(replica, (int, np.integer)):
            raise ValueError(f"The 'replica' parameter must be an int. Got {replica!r} instead.")
        if not 0 <= replica < self.replicas:
            raise ValueError(
                f"The 'replica' parameter must be in [0, {self.replicas}). Got {replica} instead."
            )
        return int(replica)

    def greedy_states(self, states: NDArray[np.int64], replica: int = 0) -> NDArray[np.int64]:
        """Greedy action index vectors (N, D_A) of state index vectors (N, D_S) for one replica.

        Raises
        ------
        ValueError
            For a bad replica, or a state index outside ``[0, problem.state_dims)``.
        """
        replica = self._check_replica(replica)
        states = np.asarray(states, dtype=np.int64).reshape(-1, len(self.problem.state_dims))
        dims = np.asarray(self.problem.state_dims)
        outside = (states < 0) | (states >= dims)
        if outside.any():
            row = int(np.flatnonzero(outside.any(axis=1))[0])
            raise ValueError(
                f"The state index vector {states[row].tolist()} lies outside the state modes "
                f"{list(self.problem.state_dims)} (each index in [0, size))."
            )
        out = np.empty((len(states), len(self.problem.action_dims)), dtype=np.int64)
        for row, state in enumerate(states):
            batch = np.repeat(state[None], self.replicas, axis=0)
            out[row] = self.agent.greedy(batch)[replica]
        return out

    def policy(self, observation: Any, replica: int = 0) -> Any:
        """Return the greedy environment action of one raw observation.

        The observation is encoded with the problem's grid (`Problem.encode_observation`),
        the replica's greedy action is decoded to an environment action (a bin
        centre for continuous actions).

        Parameters
        ----------
        observation : any
            One observation as the environment returns it.
        replica : int, default 0
            Which seed's agent acts.

        Returns
        -------
        action
            An element of the environment's action space.
        """
        state = self.problem.encode_observation(observation)
        return self.problem.decode(self.greedy_states(state[None], replica))[0]

    def q_tensor(self, replica: int = 0) -> Any:
        """Return a tensor agent's Q-function of one replica as a ``tensorly`` CPTensor.

        Its shape is ``problem.state_dims + problem.action_dims``; its entries
        are the agent's Q-values (a copy: changing it leaves the agent alone).
        Weights and factors are float NumPy arrays whatever TensorLy's global
        backend is (read them under ``tl.backend_context("numpy")``, or
        convert them with ``tl.tensor``, to compute with another backend).

        Raises
        ------
        TypeError
            If the agent is not a CP-tensor agent (TEQL, TLR).
        """
        replica = self._check_replica(replica)
        q = getattr(self.agent, "q_", None)
        if q is None or not hasattr(q, "to_cp_tensor"):
            raise TypeError(
                f"Agent {self.config.agent!r} has no CP Q-tensor; only the tensor agents "
                "(teql, tlr) export one."
            )
        import tensorly as tl
        from tensorly.cp_tensor import CPTensor

        from tensorq._validation import as_numpy

        weights, factors = q.to_cp_tensor(replica)
        # CPTensor checks its input with TensorLy's current backend: NumPy arrays, NumPy's.
        with tl.backend_context("numpy"):
            return CPTensor((np.array(as_numpy(weights)), [np.array(as_numpy(f)) for f in factors]))

    def q_tensors(self) -> list[Any]:
        """Return `q_tensor` of every replica."""
        return [self.q_tensor(i) for i in range(self.replicas)]


def run_problem(
    run_dir: str | os.PathLike,
    recorded_env: str,
    env_options: Mapping[str, Any],
    *,
    env: str | None = None,
    trust_env_module: bool = False,
) -> Problem:
    """Make the problem recorded in a run directory, importing no module that nobody named.

    Parameters
    ----------
    run_dir : path-like
        The run directory, named in messages.
    recorded_env : str
        The environment recorded in the run.
    env_options : mapping
        The recorded options of `rl.problems.make_problem`.
    env : str, optional
        The environment as the caller names it; it must equal ``recorded_env``,
        whose module may then be imported.
    trust_env_module : bool, default False
        Import the module of ``recorded_env`` without its being named.

    Returns
    -------
    Problem

    Raises
    ------
    RunLoadError
        If ``env`` differs from ``recorded_env``.
    rl.problems.from_gymnasium.EnvModuleRefused
        If the module would be imported without being named or trusted.
    """
    if env is not None and env != recorded_env:
        raise RunLoadError(
            f"The 'env' parameter {env!r} differs from the environment of the run in "
            f"{run_dir} ({recorded_env!r})."
        )
    allowed = trust_env_module or env is not None
    return make_problem(recorded_env, import_env_module=allowed, **env_options)


def _refuse_missing(run_dir: Path) -> None:
    """Raise `RunLoadError` unless ``run_dir`` is a directory (saying what it is instead)."""
    if not run_dir.is_dir():
        what = "it is not a directory" if run_dir.exists() else "it does not exist"
        raise RunLoadError(f"{run_dir} is not a run directory ({what}).")


@contextlib.contextmanager
def reading_lock(run_dir: str | os.PathLike) -> Iterator[None]:
    """Hold ``run_dir``'s lock shared while reading it: a run being trained is refused.

    Readers share the lock (`rl.runs.rundir.RunLock`), so several may read at
    once and no run writes the directory meanwhile. A directory this process
    cannot write (read-only) is read without the lock if no live process holds it.

    Raises
    ------
    RunLoadError
        If ``run_dir`` is not a directory, a live process holds the lock
        (naming its pid and host), or the lock file is a link or not a regular file.
    """
    _refuse_missing(Path(run_dir))
    lock = None
    if os.access(run_dir, os.W_OK):
        try:
            lock = RunLock.acquire(run_dir, shared=True)
        except RunDirError as error:  # busy, or a link or odd file at .lock
            raise RunLoadError(str(error)) from None
    elif lock_holder(run_dir) is not None:  # a directory this process cannot write
        raise RunLoadError(
            f"The run directory {run_dir} is in use by a run being trained; wait for it to end."
        )
    try:
        yield
    finally:
        if lock is not None:
            lock.release()


def load_run(
    run_dir: str | os.PathLike,
    *,
    env: str | None = None,
    trust_env_module: bool = False,
    best: bool = False,
) -> LoadedRun:
    """Load a run directory written by ``python -m rl.train`` (or `rl.runs.training.train`).

    A run directory is data: an environment id ``"package.module:Env-v0"``
    recorded in it is made only if ``package.module`` is already imported, or
    the caller names the environment (``env``) or trusts its module
    (``trust_env_module``); importing a module runs its code.

    Parameters
    ----------
    run_dir : path-like
        The run's ``--out`` directory, holding ``checkpoint.npz``.
    env : str, optional
        The run's environment id, named by the caller: it must equal the
        recorded one, and its module may then be imported.
    trust_env_module : bool, default False
        Import the module of the recorded environment id without naming it.
    best : bool, default False
        Load each replica's best-evaluated state instead of the last one (a run
        trained with ``keep_best``, `rl.runs.training.BestStates`); ``best_episodes`` says from
        which episodes.

    Returns
    -------
    LoadedRun
        Its agent computes in NumPy (factors, tables and Q-values are NumPy
        arrays) and `LoadedRun.q_tensor` returns a CPTensor of NumPy arrays,
        whatever TensorLy's global backend is.

    Raises
    ------
    RunLoadError
        If the directory or its checkpoint is missing, the checkpoint is
        refused (`rl.runs.checkpoint.CheckpointError`), or its configuration no
        longer builds a problem and agent, or ``env`` differs from the run's
        environment; one line naming the reason.
    rl.problems.from_gymnasium.EnvModuleRefused
        A ValueError: the recorded environment would import a module that is
        neither imported yet, named by ``env`` nor trusted.
    """
    run_dir = Path(run_dir)
    _refuse_missing(run_dir)
    return _load(run_dir, env, trust_env_module, best)[0]


def load_resumable(
    run_dir: str | os.PathLike, *, env: str | None = None, trust_env_module: bool = False
) -> tuple[LoadedRun, int]:
    """`load_run`, also checking ``metrics.csv`` against the checkpoint as a resume does.

    Call it inside `reading_lock` to copy the run's files consistently.

    Returns
    -------
    run : LoadedRun
    metrics_bytes : int
        Length of the prefix of ``metrics.csv`` that the checkpoint records
        (its rows up to ``run.episode``); the rest is not the checkpoint's.

    Raises
    ------
    RunLoadError
        As `load_run`, and if ``metrics.csv`` is missing, a link, or disagrees
        with the checkpoint (`rl.runs.checkpoint.check_checkpoint_against_metrics`).
    """
    run_dir = Path(run_dir)
    _refuse_missing(run_dir)
    from rl.runs.training import METRICS_FILE

    loaded, checkpoint = _load(run_dir, env, trust_env_module)
    try:
        check_checkpoint_against_metrics(checkpoint, run_dir / METRICS_FILE, loaded.replicas)
    except CheckpointError as error:
        raise RunLoadError(str(error)) from None
    return loaded, int(checkpoint.metrics_bytes)


def _load(
    run_dir: Path, env: str | None, trust_env_module: bool, best: bool = False
) -> tuple[LoadedRun, Checkpoint]:
    """Load the run in the existing directory ``run_dir`` (see `load_run`), and its checkpoint."""
    path = run_dir / CHECKPOINT_NAME
    if not path.is_file() and not (run_dir / LEGACY_CHECKPOINT_NAME).is_file():
        raise RunLoadError(
            f"{run_dir} holds no checkpoint ({CHECKPOINT_NAME}); train into it with "
            f"python -m rl.train --out {run_dir} first."
        )
    try:
        checkpoint = load_checkpoint(path)
        recorded = recorded_run_config(checkpoint.config)
        config, spec, _ = resolve_agent(build_dataclass(TrainConfig, recorded, "the run's config"))
        agent_config = build_dataclass(
            spec.config_class, config.agent_params, f"agent {config.agent!r}"
        )
        problem = run_problem(
            run_dir, config.env, config.env_options, env=env, trust_env_module=trust_env_module
        )
        streams = spawn_replicas(range(config.seed, config.seed + config.seeds))
        agent = spec.agent_class(problem, agent_config, [s.agent for s in streams])
        restore_agent(agent, checkpoint, path)  # every value checked before use
        best_episodes = None
        if best:
            best_episodes = best_checkpoint(checkpoint, path, agent)["episodes"]
    except (CheckpointError, ConfigError, RunDirError) as error:
        raise RunLoadError(str(error)) from None
    except (RunLoadError, EnvModuleRefused):
        raise
    except (ValueError, TypeError, ImportError, KeyError) as error:
        raise RunLoadError(f"Cannot rebuild the run in {run_dir}: {error}") from None
    loaded = LoadedRun(run_dir, config, problem, agent, int(checkpoint.episode), best_episodes)
    return loaded, checkpoint
