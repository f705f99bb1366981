"""The best-evaluated state of every replica, kept in the checkpoint (``keep_best``).

A run with ``keep_best`` keeps, for each replica, a copy of its agent state
after the training episode whose greedy evaluation (the mean return of its
``eval_episodes`` greedy episodes, the value ``metrics.csv`` records) is the
highest so far; a later evaluation replaces it only when strictly higher, so
the first of equal bests is kept. This is stable-baselines3's ``EvalCallback``
with ``best_model_save_path``, per replica, on the run's own evaluations.
Before a replica's first finite evaluation its best is the fresh agent
(episode 0); a NaN evaluation never counts.

The run then waits for all replicas at every evaluation point as well as at
every checkpoint (`rl.runs.training.next_barrier`), so that the state copied is
the agent's after exactly that episode; the results are bitwise those of the
same run without ``keep_best``. The best states are cut out of the agent's state
and joined back into one state of all replicas with
`rl.runs.batch.replica_state` (per-replica rows, generator states and visit
tables), and written into every checkpoint (`rl.runs.checkpoint.Checkpoint.best`),
so a resumed run continues with them and an interrupted one loses none.
``python -m rl.evaluate RUN_DIR --best`` and ``rl.load_run(RUN_DIR, best=True)``
load them.

The checkpoint's ``best`` is a tree of three entries: ``agent_state`` (the
joined state), ``episodes`` (int64, shape (B,): the training episode of each
replica's best, 0 for the fresh agent) and ``greedy_returns`` (float64, shape
(B,): its evaluation, -inf for the fresh agent).
"""

from __future__ import annotations

import copy
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from rl.runs.batch.replica_state import join_states, split_state
from rl.runs.checkpoint import Checkpoint, refuse, restore_agent
from rl.seeding import spawn_replicas

if TYPE_CHECKING:
    from rl.loop.runner import Runner


class BestStates:
    """Each replica's best-evaluated agent state while a run trains.

    Parameters
    ----------
    runner : Runner
        The run's runner, its agent fresh (before a checkpoint is restored).
    """

    def __init__(self, runner: Runner) -> None:
        agent = runner.agent
        self._agent = agent
        self._batch_layout = agent.state_dict()
        alone = type(agent)(runner.problem, agent.config, [spawn_replicas([0])[0].agent])
        self._layout = alone.state_dict()
        self._n_states = math.prod(runner.problem.state_dims)
        replicas = self._replicas = runner.replicas
        self.episodes: NDArray[np.int64] = np.zeros(replicas, dtype=np.int64)
        self.greedy_returns: NDArray[np.float64] = np.full(replicas, -np.inf)
        self._parts = [self._cut(self._batch_layout, i) for i in range(replicas)]

    def _cut(self, state: Any, replica: int) -> Any:
        if self._replicas == 1:  # the replica's state is the agent's
            return copy.deepcopy(state)
        return split_state(
            state, self._layout, self._batch_layout, replica, replica + 1, self._n_states
        )

    def observe(self, episode: int, greedy_returns: NDArray[np.float64]) -> None:
        """Keep the agent's current state for the replicas whose evaluation is a new best.

        Call it when every replica has finished ``episode`` and its evaluation,
        before any replica plays on.
        """
        better = np.asarray(greedy_returns, dtype=np.float64) > self.greedy_returns
        if not better.any():
            return
        state = self._agent.state_dict()
        for replica in np.flatnonzero(better):
            self._parts[replica] = self._cut(state, int(replica))
            self.episodes[replica] = episode
            self.greedy_returns[replica] = greedy_returns[replica]

    def tree(self) -> dict[str, Any]:
        """Return the checkpoint's ``best`` tree (see the module docstring)."""
        state = self._parts[0]
        if self._replicas > 1:
            state = join_states(
                self._parts,
                [1] * self._replicas,
                [self._layout] * self._replicas,
                self._agent.state_dict(),
                self._n_states,
            )
        return {
            "agent_state": state,
            "episodes": self.episodes.copy(),
            "greedy_returns": self.greedy_returns.copy(),
        }

    def restore(self, tree: dict[str, Any]) -> None:
        """Continue from a checkpoint's ``best`` tree (written by `tree`, checked on load)."""
        state = tree["agent_state"]
        self._parts = [self._cut(state, i) for i in range(self._replicas)]
        self.episodes = np.array(tree["episodes"], dtype=np.int64)
        self.greedy_returns = np.array(tree["greedy_returns"], dtype=np.float64)


def best_checkpoint(checkpoint: Checkpoint, path: str | os.PathLike, agent: Any) -> dict[str, Any]:
    """Return a checkpoint's ``best`` tree, checked like any input.

    Its agent state is checked by loading it into ``agent`` (`restore_agent`),
    an agent of the checkpoint's configuration whose own state it replaces; each
    replica's episode must lie in 0 .. ``checkpoint.episode`` and its evaluation
    be a number or -inf.

    Raises
    ------
    CheckpointError
        If the checkpoint keeps no best states, or they do not fit the run; one line.
    """
    path = Path(path)
    best = checkpoint.best
    if best is None:
        raise refuse(
            path,
            "it keeps no best states (the run was trained without keep_best); evaluate its "
            "last state instead (without --best).",
        )
    replicas = agent.replicas
    episodes, returns = best["episodes"], best["greedy_returns"]
    for name, value, kind in (("episodes", episodes, "i"), ("greedy_returns", returns, "f")):
        if (
            not isinstance(value, np.ndarray)
            or value.dtype.kind != kind
            or value.shape != (replicas,)
        ):
            raise refuse(path, f"its best {name} is not one {kind}-number per replica.")
    if ((episodes < 0) | (episodes > checkpoint.episode)).any():
        raise refuse(path, f"its best episodes lie outside 0 .. {checkpoint.episode}.")
    if np.isnan(returns).any() or np.isposinf(returns).any():
        raise refuse(path, "its best evaluations hold NaN or +inf.")
    restore_agent(agent, Checkpoint(checkpoint.episode, best["agent_state"], 0.0, 0, {}), path)
    return best
