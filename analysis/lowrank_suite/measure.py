"""One batch of the suite: one agent set-up on one instance, S seeds in lockstep.

`run_batch` trains through the project's runner (`rl.runs.training.build` and
`rl.runs.training.run`, the seeds as lockstep replicas) and, every
``eval_every`` training episodes, at a checkpoint barrier where every replica
has finished the same episode, reads each replica's Q-tensor and evaluates
its greedy policy exactly on the model (`ExactReference`). Per seed it
records the environment steps at the first evaluation within the target
gap, the final normalized and absolute value gaps, ||Q - Q*||_inf and the
agent's parameter count.
"""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from analysis.lowrank_suite.grid import (
    ENV_ID,
    STEPS_PER_EPISODE,
    TARGET_GAP,
    AgentSetup,
    ExactReference,
    Instance,
)
from rl.runs.config import TrainConfig
from rl.runs.training import EpisodeLog, build, run

RUN_COLUMNS = (
    "instance",
    "kind",
    "qstar_rank",
    "state_modes",
    "mode_size",
    "gamma",
    "agent_key",
    "agent",
    "reading",
    "agent_rank",
    "seed",
    "episodes",
    "budget_steps",
    "reached",
    "diverged",
    "steps_to_target",
    "final_gap",
    "final_value_gap",
    "sup_error",
    "n_params",
    "table_params",
    "wall_s",
)
"""Columns of ``runs.csv``: one row per (instance, agent set-up, seed).

``steps_to_target`` is empty where the target was not reached within
``budget_steps``; ``final_gap`` is the normalized value gap (`ExactReference`)
and ``final_value_gap`` J* - J of the final greedy policy; ``wall_s`` the
batch's wall time divided by its seeds. ``diverged`` is 1 where the agent's
Q-values overflowed and the runner stopped the batch: every seed of it then
has the full budget as ``budget_steps`` (a seed that had not reached the
target never did) and the final columns of its last evaluation (NaN if none)."""


def dense_q(agent: object) -> NDArray[np.float64]:
    """Every replica's Q-tensor, shape (B, *state_dims, *action_dims)."""
    if hasattr(agent, "q_tensor"):
        return np.asarray(agent.q_tensor(), dtype=np.float64)
    return np.asarray(agent.q_.to_dense(), dtype=np.float64)


def run_batch(
    instance: Instance,
    setup: AgentSetup,
    *,
    seeds: int,
    episodes: int,
    eval_every: int,
    work_dir: Path,
    reference: ExactReference | None = None,
) -> list[dict]:
    """Train ``setup`` on ``instance`` with ``seeds`` lockstep replicas; one row per seed.

    Parameters
    ----------
    instance, setup : Instance, AgentSetup
    seeds : int
        Replicas (seeds 0 .. seeds - 1).
    episodes : int
        Training episodes per seed (100 steps each).
    eval_every : int
        Episodes between exact evaluations of the greedy policies.
    work_dir : Path
        The runner's run directory (removed when the batch is done).
    reference : ExactReference, optional
        The instance's exact quantities (computed when None).

    Returns
    -------
    list of dict
        Rows with the keys of `RUN_COLUMNS`.
    """
    reference = reference or ExactReference.of(instance)
    config = TrainConfig(
        env=ENV_ID,
        agent=setup.agent,
        reading=setup.reading,
        out=str(work_dir),
        seeds=seeds,
        episodes=episodes,
        eval_every=0,
        checkpoint_every=eval_every,  # a barrier: every replica is at the same episode
        env_options={"env_kwargs": instance.env_kwargs()},
        agent_params=setup.agent_params(),
    )
    runner, effective = build(config)
    steps = np.zeros(seeds, dtype=np.int64)
    first = np.full(seeds, -1, dtype=np.int64)
    last: list[NDArray[np.float64]] = []

    def evaluate(log: EpisodeLog) -> None:
        steps[:] += log.lengths
        if log.episode % eval_every and log.episode != episodes:
            return
        q = dense_q(runner.agent)
        gaps = reference.normalized_gap(reference.values(q))
        first[:] = np.where((first < 0) & (gaps <= TARGET_GAP), steps, first)
        last[:] = [q, gaps]

    clock = time.perf_counter()
    diverged = False
    try:
        run(runner, config, effective, overwrite=True, progress=evaluate)
    except ValueError as error:  # the agents' divergence error: Q overflowed, the run stopped
        if " diverged: " not in str(error):
            raise
        diverged = True
    finally:
        n_params = int(runner.agent.n_params)
        runner.close()
        shutil.rmtree(work_dir, ignore_errors=True)
    wall = (time.perf_counter() - clock) / seeds
    if diverged:  # the budget it was given, so that an unreached seed is censored there
        steps[:] = episodes * STEPS_PER_EPISODE
    if not last:  # diverged before its first evaluation
        last[:] = [np.full((seeds, *reference.q_star.shape), np.nan), np.full(seeds, np.nan)]
    q, gaps = last
    scale = reference.j_star - reference.j_random
    rows = []
    for seed in range(seeds):
        rows.append({
            "instance": instance.key,
            "kind": instance.kind,
            "qstar_rank": "" if instance.qstar_rank is None else instance.qstar_rank,
            "state_modes": instance.state_modes,
            "mode_size": instance.mode_size,
            "gamma": instance.gamma,
            "agent_key": setup.key,
            "agent": setup.agent,
            "reading": setup.reading,
            "agent_rank": "" if setup.rank is None else setup.rank,
            "seed": seed,
            "episodes": episodes,
            "budget_steps": int(steps[seed]),
            "reached": int(first[seed] >= 0),
            "diverged": int(diverged),
            "steps_to_target": int(first[seed]) if first[seed] >= 0 else "",
            "final_gap": float(gaps[seed]),
            "final_value_gap": float(gaps[seed] * scale),
            "sup_error": float(np.abs(q[seed] - reference.q_star).max()),
            "n_params": n_params,
            "table_params": instance.entries,
            "wall_s": wall,
        })  # fmt: skip
    return rows


def censored_steps(rows: list[dict], eval_every_steps: int) -> NDArray[np.float64]:
    """Return the steps to the target per row, censored.

    A row that never reached it counts as one evaluation past its budget
    (``budget_steps + eval_every_steps``), the least it could have taken.
    """
    return np.array([
        float(row["steps_to_target"])
        if row["steps_to_target"] not in ("", None) and not _isnan(row["steps_to_target"])
        else float(row["budget_steps"]) + eval_every_steps
        for row in rows
    ])  # fmt: skip


def _isnan(value: object) -> bool:
    return isinstance(value, float) and math.isnan(value)
