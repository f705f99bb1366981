"""The suite's cost model: CPU seconds per batch from a few timed probe batches.

A batch (one agent set-up on one instance, S seeds in lockstep, E episodes)
costs about ``c * S + E * (a + b * S)`` seconds of CPU time
(`time.process_time`: what the batch costs on one core of its own, whatever
else the machine runs; the wall time on a busy machine is longer): ``c`` one replica's set-up
(its environment builds the dense model), ``a`` the lockstep loop's
per-episode overhead, ``b`` one replica's episode (its environment steps,
agent steps and exact evaluations). `measure_costs` times three probe batches
per agent kind, at the smallest and largest state spaces of a plan and at the
lowest and highest agent rank, each after a one-episode warm-up batch whose
time is not fitted (it loads the compiled kernels, a cost paid once per
process, not per batch); `forecast` interpolates ``a``, ``b`` and ``c``
linearly in log(states) and in agent rank to price every batch of a plan.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analysis.lowrank_suite.grid import AgentSetup, ExactReference, Instance
from analysis.lowrank_suite.measure import run_batch

PROBE_SEEDS = (2, 8)
"""Seed counts of the probe batches."""
PROBE_LENGTHS = (1, 3)
"""Probe lengths, in units of ``episodes``, at the larger seed count."""


@dataclass(frozen=True)
class Probe:
    """The fitted costs of one agent kind at one size and rank (module docstring).

    ``overhead`` is a, ``per_seed`` b (seconds per episode), ``setup`` c (seconds
    per replica and batch).
    """

    kind: str
    states: int
    rank: int
    overhead: float
    per_seed: float
    setup: float


def _kind(setup: AgentSetup) -> str:
    return setup.key if setup.rank is None else f"{setup.agent}-{setup.reading}"


def measure_costs(
    instances: Sequence[Instance],
    setups: Sequence[AgentSetup],
    *,
    episodes: int = 10,
    eval_every: int = 10,
) -> list[Probe]:
    """Time probe batches and fit ``a + b * S`` per agent kind, size and rank.

    Parameters
    ----------
    instances, setups : sequence
        The plan's instances (the smallest and largest state spaces are probed)
        and agent set-ups (each kind at its lowest and highest rank).
    episodes, eval_every : int
        Length of a probe batch and its evaluation interval.

    Returns
    -------
    list of Probe
    """
    by_size = sorted(instances, key=lambda i: i.entries)
    sizes = list(dict.fromkeys([by_size[0], by_size[-1]]))
    kinds: dict[str, list[AgentSetup]] = {}
    for setup in setups:
        kinds.setdefault(_kind(setup), []).append(setup)
    probes = []
    with tempfile.TemporaryDirectory() as work:
        for instance in sizes:
            reference = ExactReference.of(instance)
            states = instance.mode_size**instance.state_modes
            for kind, members in kinds.items():
                ranked = sorted(members, key=lambda s: s.rank or 0)
                for setup in list(dict.fromkeys([ranked[0], ranked[-1]])):
                    seconds = {}
                    for seeds, length in ((1, 0), (2, 1), (8, 1), (8, 3)):  # (1, 0): warm-up
                        clock = time.process_time()
                        run_batch(
                            instance,
                            setup,
                            seeds=seeds,
                            episodes=max(episodes * length, 1),
                            eval_every=eval_every,
                            work_dir=Path(work) / "probe",
                            reference=reference,
                        )
                        seconds[seeds, length] = time.process_time() - clock
                    probes.append(_fit(kind, states, setup.rank or 0, seconds, episodes))
    return probes


def _fit(kind: str, states: int, rank: int, seconds: dict, episodes: int) -> Probe:
    """Solve ``c S + E (a + b S)`` from the CPU seconds at (S, E) = (2, E), (8, E), (8, 3E)."""
    per_episode_8 = max((seconds[8, 3] - seconds[8, 1]) / (2 * episodes), 0.0)
    setup = max((seconds[8, 1] - episodes * per_episode_8) / 8, 0.0)
    per_episode_2 = max((seconds[2, 1] - 2 * setup) / episodes, 0.0)
    per_seed = max((per_episode_8 - per_episode_2) / 6, 0.0)
    return Probe(kind, states, rank, max(per_episode_8 - 8 * per_seed, 0.0), per_seed, setup)


def batch_seconds(
    probes: Sequence[Probe], instance: Instance, setup: AgentSetup, seeds: int, episodes: int
) -> float:
    """Predicted CPU seconds of one batch, interpolated from ``probes``."""
    states = instance.mode_size**instance.state_modes
    mine = [p for p in probes if p.kind == _kind(setup)]
    if not mine:
        raise ValueError(f"No probe of agent kind {_kind(setup)!r}; measure the costs with it.")
    sizes = sorted({p.states for p in mine})
    ranks = sorted({p.rank for p in mine})

    def at(size: int, rank: int) -> tuple[float, float, float]:
        probe = next(p for p in mine if p.states == size and p.rank == rank)
        return probe.overhead, probe.per_seed, probe.setup

    def weight(value: float, low: float, high: float) -> float:
        return 0.0 if high == low else float(np.clip((value - low) / (high - low), 0.0, None))

    u = weight(math.log(states), math.log(sizes[0]), math.log(sizes[-1]))
    v = weight(setup.rank or 0, ranks[0], ranks[-1])
    corners = [at(s, r) for s in (sizes[0], sizes[-1]) for r in (ranks[0], ranks[-1])]
    weights = [(1 - u) * (1 - v), (1 - u) * v, u * (1 - v), u * v]
    overhead = sum(w * c[0] for w, c in zip(weights, corners, strict=True))
    per_seed = sum(w * c[1] for w, c in zip(weights, corners, strict=True))
    setup_cost = sum(w * c[2] for w, c in zip(weights, corners, strict=True))
    return setup_cost * seeds + episodes * (overhead + per_seed * seeds)


def forecast(
    probes: Sequence[Probe],
    instances: Sequence[Instance],
    setups: Sequence[AgentSetup],
    seeds: int,
    episodes: int,
) -> float:
    """Predicted CPU seconds of the whole plan (batches one after another on one core)."""
    return sum(
        batch_seconds(probes, instance, setup, seeds, episodes)
        for instance in instances
        for setup in setups
    )
