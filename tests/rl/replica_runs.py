"""Training runs for the per-replica settings tests: a batch of settings against each alone."""

from typing import NamedTuple

import numpy as np

from rl.agents.replica_settings import replica_config
from rl.loop.runner import Runner
from rl.runs.config import TrainConfig, resolve_settings
from rl.seeding import spawn_replicas


class Trained(NamedTuple):
    """An agent after some training episodes, and every episode's numbers (episodes, B)."""

    agent: object
    returns: np.ndarray
    lengths: np.ndarray
    greedy_returns: np.ndarray


def resolved(agent, env="lowrank", **agent_params):
    """Return the problem and agent config that a run of ``agent`` on ``env`` resolves to."""
    config = TrainConfig(env=env, agent=agent, out="unused", agent_params=agent_params)
    settings = resolve_settings(config)
    return settings.spec.agent_class, settings.problem, settings.agent


def train(agent_class, problem, config, seeds, episodes, replica_settings=None):
    """Train one replica per seed of ``seeds`` for ``episodes`` episodes, evaluating every 2."""
    streams = spawn_replicas(seeds)
    agent = agent_class(
        problem, config, [s.agent for s in streams], replica_settings=replica_settings
    )
    runner = Runner(problem, agent, streams, eval_every=2, eval_episodes=1)
    try:
        results = [runner.episode(e) for e in range(1, episodes + 1)]
    finally:
        runner.close()
    rows = [np.stack([getattr(r, key) for r in results]) for key in Trained._fields[1:]]
    return Trained(agent, *rows)


def batch_and_alone(agent_class, problem, config, settings, seeds, episodes):
    """Train ``settings`` x ``seeds`` as one batch, and each replica's config alone.

    Replica k * len(seeds) + j runs setting k with seed ``seeds[j]``. Returns
    the batch's `Trained`, the arrays of its settings and the B runs alone.
    """
    count = len(next(iter(settings.values())))
    per_replica = {field: np.repeat(values, len(seeds)) for field, values in settings.items()}
    all_seeds = list(seeds) * count
    batch = train(agent_class, problem, config, all_seeds, episodes, per_replica)
    alone = [
        train(agent_class, problem, replica_config(config, per_replica, b), [seed], episodes)
        for b, seed in enumerate(all_seeds)
    ]
    return batch, per_replica, alone


def assert_replica_equals_alone(batch, b, alone):
    """Replica b's returns, lengths and greedy returns are those of its run alone, bitwise."""
    for key in Trained._fields[1:]:
        np.testing.assert_array_equal(getattr(batch, key)[:, b], getattr(alone, key)[:, 0])
