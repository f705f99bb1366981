"""The hashed device visit table on Highway's grid: load factor, probes and memory.

``python -m benchmarks visits_hashed``: TEQL (released reading) plays
``--episodes`` Highway episodes of ``--seeds`` seeds on the Highway twin (the
compiled engine, the fused loop); the (replica, state) pairs it visited, in
order of first visit, are then inserted into the open-addressing table of
`rl.agents.tensor._visits_array` (NumPy), one state per replica per step, with
``--capacity`` slots per replica (default: the smallest power of two at least
twice the most states a replica visited, a load factor of at most 1/2). It
prints the states visited per replica, the load factor, the slots read per
insert and per lookup of every visited state (mean and largest), and the
table's bytes per replica beside those of the array engine's paged index,
whose page index alone takes 4 |S| / 32 bytes per replica (|S| = 20^9).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def visited_keys(episodes: int, seeds: int) -> tuple[np.ndarray, int, int]:
    """Return the visited keys in order of first visit, |S| and |A| of a Highway run."""
    from rl.agents.readings import reading
    from rl.agents.tensor.teql import TEQLAgent, TEQLConfig
    from rl.loop.runner import Runner
    from rl.problems import make_problem
    from rl.seeding import spawn_replicas

    problem = make_problem("highway", env_kwargs={"engine": "twin"})
    replicas = spawn_replicas(list(range(seeds)))
    config = TEQLConfig(**reading("teql", "released").agent_params("highway"))
    agent = TEQLAgent(problem, config, [s.agent for s in replicas])
    runner = Runner(problem, agent, replicas, eval_every=0)
    for _ in runner.episodes(0, episodes):
        pass
    keys = agent.visits_.state_dict()["keys"]
    return keys, int(np.prod(problem.state_dims)), int(np.prod(problem.action_dims))


def measure(keys: np.ndarray, n_states: int, n_actions: int, seeds: int, capacity: int) -> dict:
    """Insert ``keys`` into a hashed table (one state per replica per step); its statistics."""
    from rl.agents.tensor import _visits_array as visits_ops
    from tensorq._backend import array_namespace

    space = array_namespace("numpy")
    owner, states = np.divmod(keys, n_states)
    per_replica = [states[owner == b] for b in range(seeds)]
    most = max(len(s) for s in per_replica)
    capacity = capacity or 1 << max(2 * most - 1, 0).bit_length()
    table = visits_ops.empty_hashed(space, seeds, capacity, n_actions)
    ids = np.arange(seeds)
    for t in range(most):
        active = np.array([t < len(s) for s in per_replica])
        step = np.array([s[t] if t < len(s) else 0 for s in per_replica], dtype=np.int64)
        table, _, full = visits_ops.hashed_insert(space, table, ids, step, active)
        if full.any():
            replica = int(np.flatnonzero(full)[0])
            raise ValueError(
                f"The hashed visit table of replica {replica} is full: all {capacity} slots "
                "hold visited states; pass a larger --capacity (a power of two)."
            )
    reads = []
    for t in range(most):
        active = np.array([t < len(s) for s in per_replica])
        step = np.array([s[t] if t < len(s) else 0 for s in per_replica], dtype=np.int64)
        rows, read = visits_ops.hashed_lookup(space, table, ids, step)
        assert (rows[active] > 0).all()
        reads.append(read[active])
    reads = np.concatenate(reads)
    table_bytes = sum(a.nbytes for a in (table.keys, table.counts, table.delta)) / seeds
    return {
        "seeds": seeds, "states_visited_per_replica": [len(s) for s in per_replica],
        "capacity": capacity, "load_factor": visits_ops.hashed_load_factor(space, table),
        "probes_per_insert": float(table.probes.sum() / len(keys)),
        "probes_per_lookup_mean": float(reads.mean()), "probes_per_lookup_max": int(reads.max()),
        "table_bytes_per_replica": table_bytes, "paged_index_bytes_per_replica": 4 * n_states / 32,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    """Print the statistics (and write JSON with ``--json``); returns them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000, help="Highway episodes per seed")
    parser.add_argument("--seeds", type=int, default=4, help="replicas")
    parser.add_argument(
        "--capacity", type=int, default=0,
        help="slots per replica, a power of two (default: at least twice the most visited)",
    )  # fmt: skip
    parser.add_argument("--json", help="also write the statistics to this JSON file")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    keys, n_states, n_actions = visited_keys(args.episodes, args.seeds)
    row = measure(keys, n_states, n_actions, args.seeds, args.capacity)
    row["episodes"] = args.episodes
    print(f"TEQL released on the Highway twin, {args.episodes} episodes x {args.seeds} seeds "
          f"({time.perf_counter() - start:.0f} s)")  # fmt: skip
    for name, value in row.items():
        print(f"  {name}: {value}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(row, handle, indent=2)
    return row


if __name__ == "__main__":
    main()
