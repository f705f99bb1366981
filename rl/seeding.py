"""Random streams for replicas: one integer seed per replica, independent children.

Only the CLI and the runner turn integers into streams; library code takes
``numpy.random.Generator`` objects. Each replica's seed spawns four independent
children (environment, agent initialisation, exploration, evaluation), so that
adding evaluation episodes or changing the exploration rule never changes the
other streams, and a replica gives the same numbers whether it runs alone or
beside others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from rl.validation import check_int

MAX_SEED = 2**63 - 1
"""Largest integer seed of a replica: seeds are stored as int64 (metrics, checkpoints, the
compiled environments), so a run's last seed ``seed + seeds - 1`` must not exceed it."""


class AgentRandom(NamedTuple):
    """The two random streams an agent replica owns.

    Attributes
    ----------
    init : numpy.random.Generator
        Parameter initialisation (factors, network weights).
    explore : numpy.random.Generator
        Action selection: epsilon draws, tie breaking, replay sampling.
    """

    init: np.random.Generator
    explore: np.random.Generator


class ReplicaStreams(NamedTuple):
    """Every random stream of one replica, spawned from its integer seed.

    Attributes
    ----------
    seed : int
        The replica's integer seed, as written to the metrics table.
    env_seed : int
        Seed for the first ``reset`` of the training environment copy.
    agent : AgentRandom
        The agent's initialisation and exploration generators.
    eval_seed : int
        Seed for the first ``reset`` of the evaluation environment copy.
    """

    seed: int
    env_seed: int
    agent: AgentRandom
    eval_seed: int


def _child_int(sequence: np.random.SeedSequence) -> int:
    return int(sequence.generate_state(1, dtype=np.uint32)[0])


def replica_streams(seed: int) -> ReplicaStreams:
    """Spawn the environment, agent, exploration and evaluation streams of one seed.

    Parameters
    ----------
    seed : int
        Non-negative integer seed of the replica.

    Returns
    -------
    ReplicaStreams
        Independent children of ``numpy.random.SeedSequence(seed)``.
    """
    seed = check_int("seed", seed, 0)
    env, init, explore, evaluation = np.random.SeedSequence(seed).spawn(4)
    return ReplicaStreams(
        seed=seed,
        env_seed=_child_int(env),
        agent=AgentRandom(np.random.default_rng(init), np.random.default_rng(explore)),
        eval_seed=_child_int(evaluation),
    )


def spawn_replicas(seeds: Sequence[int]) -> list[ReplicaStreams]:
    """Spawn the streams of several replicas, one per seed (see `replica_streams`)."""
    return [replica_streams(seed) for seed in seeds]
